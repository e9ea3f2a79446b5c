"""Model.generate against the CLI, streaming, and the model's basic accessors."""
import subprocess

import pytest

import deferkv

PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her"


def cli_generate(cli, model_path, press_args):
    out = subprocess.run([cli, "generate", "-m", model_path, "-p", PROMPT, "-n", "48", "--temp", "0", *press_args],
                         check=True, capture_output=True, text=True)
    assert out.stdout.endswith("\n")
    return out.stdout[:-1]


@pytest.mark.parametrize("press,budget", [("full", None), ("deferkv:d=1,window=4", 8), ("snapkv:window=4", 12)])
def test_generate_matches_the_cli(model, model_path, cli, press, budget):
    press_args = [] if budget is None else ["--press", press, "--kv-budget", str(budget)]
    expected = cli_generate(cli, model_path, press_args)
    out = model.generate(PROMPT, max_tokens=48, temperature=0, press=press, kv_budget=budget)
    assert out.text == expected
    assert model.detokenize(out.tokens) == out.text.lstrip(" ")
    assert out.stop_reason == "token_limit" and len(out.tokens) == 48
    prompt_tokens = len(model.tokenize(PROMPT))
    assert out.prompt_tokens == prompt_tokens
    heads = [n for layer in out.kv.entries for n in layer]
    assert len(heads) == model.metadata["n_layer"] * model.metadata["n_head_kv"]
    if budget is None:
        assert heads == [prompt_tokens + 48] * len(heads)  # every prompt and generated token
        assert out.kv.bytes == out.kv.peak_bytes == sum(heads) * out.kv.bytes_per_entry
    else:
        assert max(heads) < prompt_tokens + 48  # the press evicted
        assert out.kv.bytes == sum(heads) * out.kv.bytes_per_entry


def test_streaming_pieces_join_to_the_text_and_keep_the_leading_space(model):
    whole = model.generate(PROMPT, max_tokens=40, temperature=0, press="deferkv:d=1,window=4", kv_budget=8)
    pieces = list(model.generate(PROMPT, max_tokens=40, temperature=0, press="deferkv:d=1,window=4", kv_budget=8,
                                 stream=True))
    assert len(pieces) > 10
    assert "".join(pieces) == whole.text
    assert whole.text.startswith(" ")


def test_a_stop_string_ends_the_text_before_it(model):
    whole = model.generate(PROMPT, max_tokens=40, temperature=0).text
    stop = whole[10:14]
    cut = whole.find(stop)
    out = model.generate(PROMPT, max_tokens=40, temperature=0, stop=[stop])
    assert out.text == whole[:cut] and out.stop_reason == "stop"
    assert "".join(model.generate(PROMPT, max_tokens=40, temperature=0, stop=[stop], stream=True)) == whole[:cut]


def test_a_seed_repeats_a_sampled_text(model):
    a = model.generate(PROMPT, max_tokens=30, temperature=1.0, seed=7)
    b = model.generate(PROMPT, max_tokens=30, temperature=1.0, seed=7)
    assert a.tokens == b.tokens and a.seed == 7


def test_tokenize_and_metadata(model):
    ids = model.tokenize("Once upon a time")
    assert ids[0] == 1  # stories260K's BOS
    assert model.tokenize("Once upon a time", add_bos=False) == ids[1:]
    assert model.detokenize(ids[1:]) == "Once upon a time"
    meta = model.metadata
    assert meta["architecture"] == "llama" and meta["n_layer"] == 5 and meta["n_vocab"] == 512
    assert isinstance(model.chat_template, str)


def test_the_default_model_is_the_embedded_stories260k():
    assert deferkv.Model().metadata["n_vocab"] == 512
