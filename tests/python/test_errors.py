"""Bad input raises the documented exception, carrying the engine's message."""
import pytest

import deferkv


def test_a_missing_file_is_file_not_found(tmp_path):
    missing = tmp_path / "nope.gguf"
    with pytest.raises(FileNotFoundError, match="nope.gguf"):
        deferkv.Model(str(missing))


def test_a_corrupt_gguf_is_a_deferkv_error(tmp_path, model_path):
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(open(model_path, "rb").read()[:4000])  # the header, cut short
    with pytest.raises(deferkv.Error, match="corrupt.gguf") as raised:
        deferkv.Model(str(corrupt))
    assert isinstance(raised.value, RuntimeError)
    not_gguf = tmp_path / "text.gguf"
    not_gguf.write_text("hello, I am not a model\n" * 10)
    with pytest.raises(deferkv.Error, match="text.gguf"):
        deferkv.Model(str(not_gguf))


def test_an_unknown_press_or_key_is_a_value_error(model):
    with pytest.raises(ValueError, match="no_such_press"):
        model.generate("Once", max_tokens=4, press="no_such_press", kv_budget=8)
    with pytest.raises(ValueError, match="bogus"):
        model.generate("Once", max_tokens=4, press="snapkv:bogus=1", kv_budget=8)
    with pytest.raises(ValueError, match="no_such_press"):
        model.compress("Once", press="no_such_press", kv_budget=8)


def test_a_bad_budget_is_a_value_error(model):
    with pytest.raises(ValueError, match="kv_budget"):
        model.generate("Once", max_tokens=4, press="snapkv", kv_budget=-3)
    with pytest.raises(ValueError, match="not both"):
        model.generate("Once", max_tokens=4, press="snapkv", kv_budget=8, kv_ratio=0.5)
    with pytest.raises(ValueError, match="budget"):
        model.generate("Once", max_tokens=4, press="snapkv")  # a press that needs one
    with pytest.raises(ValueError, match="ratio"):
        model.generate("Once", max_tokens=4, press="snapkv", kv_ratio=1.5)


def test_bad_sampling_and_token_ids_are_value_errors(model):
    with pytest.raises(ValueError, match="top_p|top-p"):
        model.generate("Once", max_tokens=4, top_p=2.0)
    with pytest.raises(ValueError, match="max_tokens"):
        model.generate("Once", max_tokens=-5)
    with pytest.raises(ValueError, match="vocabulary"):
        model.detokenize([5, 100000])


def test_a_prompt_longer_than_the_context_is_a_deferkv_error(model_path):
    small = deferkv.Model(model_path, n_ctx=16)
    with pytest.raises(deferkv.Error, match="16"):
        small.generate("Once upon a time, there was a little girl named Lily who loved to play", max_tokens=4)
    ctx = small.compress("Once upon a time")
    with pytest.raises(deferkv.Error, match="16"):
        ctx.answer(" there was a little girl named Lily who loved to play outside all day", max_tokens=4)
    assert ctx.answer(" there", max_tokens=2).tokens  # the context survived the refusal


def test_score_errors(model):
    with pytest.raises(ValueError, match="nosuchbench"):
        deferkv.score([], benchmark="nosuchbench")
    with pytest.raises(deferkv.Error, match="rows:1"):
        deferkv.score([{"task": "niah_single_1", "pred": "x"}], benchmark="ruler")  # no "outputs"
