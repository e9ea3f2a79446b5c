"""deferkv.Session, the research level: prefill/decode/logits, checkpoint/rollback, set_press
and the KV cache per (layer, KV head) as NumPy arrays, checked against the generate path,
hand-computed kept sets and the engine's own statistics."""
import numpy as np
import pytest

import deferkv
from conftest import ROOT

PROMPT = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
          "One day she saw a big red ball under a tree.")


def greedy(session, n):
    out = []
    for _ in range(n):
        token = int(np.argmax(session.logits))
        out.append(token)
        session.decode(token)
    return out


def test_greedy_steps_give_the_tokens_of_generate(model):
    tokens = model.tokenize(PROMPT)
    s = deferkv.Session(model, press="snapkv:window=4", kv_budget=16)
    s.prefill(np.array(tokens, dtype=np.int64))  # a NumPy array is taken as it is
    assert s.n_past == len(tokens)
    steps = greedy(s, 20)
    ref = model.generate(PROMPT, max_tokens=20, temperature=0, press="snapkv:window=4", kv_budget=16)
    assert steps[: len(ref.tokens)] == ref.tokens and len(ref.tokens) > 5
    assert s.press == ref.kv.press


def test_logits_are_a_float32_copy_of_the_last_token(model):
    s = deferkv.Session(model)
    s.prefill(model.tokenize(PROMPT))
    first = s.logits
    assert first.dtype == np.float32 and first.shape == (model.metadata["n_vocab"],)
    kept = first.copy()
    s.decode(int(np.argmax(first)))
    assert np.array_equal(first, kept)  # a later step does not change an array already returned
    assert not np.array_equal(s.logits, first)


def test_all_logits_last_row_equals_the_last_token_logits(model):
    tokens = model.tokenize(PROMPT)
    everything = deferkv.Session(model, all_logits=True)
    everything.prefill(tokens)
    last = deferkv.Session(model)
    last.prefill(tokens)
    rows = everything.logits
    assert rows.shape == (len(tokens), model.metadata["n_vocab"])
    # The same row up to float32 summation order: every row's output projection goes
    # through the prefill GEMM (packed panels), the last row alone through the matvec.
    np.testing.assert_allclose(rows[-1], last.logits, rtol=1e-5, atol=1e-5)
    assert not np.allclose(rows[-2], last.logits, rtol=1e-5, atol=1e-5)


def test_streaming_llm_keeps_the_sinks_and_the_recent_tokens(model):
    # Hand-computed kept set: sinks 0..3 and the last b - 4 prompt positions, in every head.
    tokens = model.tokenize(PROMPT)
    n, b = len(tokens), 12
    s = deferkv.Session(model, press="streaming_llm:sinks=4", kv_budget=b)
    s.prefill(tokens)
    expected = np.concatenate([np.arange(4), np.arange(n - (b - 4), n)]).astype(np.int32)
    kept = s.kept()
    meta = model.metadata
    assert len(kept) == meta["n_layer"] and all(len(layer) == meta["n_head_kv"] for layer in kept)
    for layer in kept:
        for positions in layer:
            assert positions.dtype == np.int32
            np.testing.assert_array_equal(positions, expected)
    # A decoded token is appended at its true position.
    s.decode(int(np.argmax(s.logits)))
    np.testing.assert_array_equal(s.kv_positions(0, 0), np.append(expected, n))
    assert s.last_eviction["decode_step"] == 0 and s.last_eviction["n_past"] == n


def test_snapkv_kept_positions_agree_with_the_statistics(model):
    tokens = model.tokenize(PROMPT)
    s = deferkv.Session(model, press="snapkv:window=4", kv_budget=10)
    s.prefill(tokens)
    entries = s.kv.entries
    for l, layer in enumerate(s.kept()):
        for h, positions in enumerate(layer):
            assert len(positions) == entries[l][h] == 10
            assert np.all(np.diff(positions) > 0) and positions[0] >= 0
            assert set(range(len(tokens) - 4, len(tokens))) <= set(positions.tolist())  # the window
    assert s.kv_keys(0, 0).shape == (10, model.metadata["head_dim"])


def test_full_cache_keys_in_f16_match_the_f32_cache(model):
    tokens = model.tokenize(PROMPT)
    exact = deferkv.Session(model, cache_type_k="f32", cache_type_v="f32")
    half = deferkv.Session(model)
    for s in (exact, half):
        s.prefill(tokens)
    np.testing.assert_array_equal(exact.kv_positions(1, 0), np.arange(len(tokens), dtype=np.int32))
    # Layer 0's keys and values come from the embeddings alone, so the two caches differ by
    # the storage's rounding only (later layers also see attention over rounded entries).
    for part in ("kv_keys", "kv_values"):
        a, b = getattr(exact, part)(0, 0), getattr(half, part)(0, 0)
        assert a.shape == b.shape == (len(tokens), model.metadata["head_dim"])
        # f16 rounding: a relative error of at most 2^-11 per value.
        np.testing.assert_allclose(b, a, rtol=2.0**-11, atol=1e-6)
        assert not np.array_equal(a, b)
    assert half.kv.bytes_per_entry < exact.kv.bytes_per_entry


def test_rollback_restores_cache_position_and_logits(model):
    s = deferkv.Session(model, press="snapkv:window=4", kv_budget=12)
    s.prefill(model.tokenize(PROMPT))
    saved = s.checkpoint()
    logits, positions, held = s.logits, s.kv_positions(0, 1), s.kv.bytes
    first = greedy(s, 8)
    assert s.n_past == saved.n_past + 8
    s.rollback(saved)
    assert s.n_past == saved.n_past and s.kv.bytes == held
    np.testing.assert_array_equal(s.logits, logits)
    np.testing.assert_array_equal(s.kv_positions(0, 1), positions)
    assert greedy(s, 8) == first  # the same continuation again
    s.truncate(5)
    assert s.n_past == 5 and all(n <= 5 for layer in s.kv.entries for n in layer)


def test_set_press_acts_from_the_next_prefill(model):
    s = deferkv.Session(model)
    assert s.press == "full"
    s.set_press("streaming_llm:sinks=2", kv_budget=8)
    assert s.press.startswith("streaming_llm")
    s.prefill(model.tokenize(PROMPT))
    assert all(n == 8 for layer in s.kv.entries for n in layer)
    s.set_press("full")
    assert s.press == "full"


def test_quantised_cache_types_from_the_model_and_the_session():
    # The embedded retrieval model: its head_dim (a multiple of 32) takes the quantised types.
    m = deferkv.Model(str(ROOT / "models" / "deferkv-retrieval-5m.gguf"), cache_type_k="q8_0", cache_type_v="q4_0")
    assert m.cache_types == ("q8_0", "q4_0")
    head_dim = m.metadata["head_dim"]
    s = deferkv.Session(m)
    s.prefill(m.tokenize("one two three four five six"))
    # q8_0: 34 bytes per 32 values; q4_0: 18; and an int32 position.
    assert s.kv.bytes_per_entry == head_dim // 32 * 34 + head_dim // 32 * 18 + 4
    f16 = deferkv.Session(m, cache_type_k="f16", cache_type_v="f16")
    f16.prefill(m.tokenize("one two three four five six"))
    assert f16.kv.bytes_per_entry == 2 * head_dim * 2 + 4
    np.testing.assert_allclose(s.kv_keys(0, 0), f16.kv_keys(0, 0), atol=0.05 * np.abs(f16.kv_keys(0, 0)).max())
    out = m.generate("one two three", max_tokens=4, temperature=0)
    assert out.kv.bytes_per_entry == s.kv.bytes_per_entry


def test_bad_input_raises_the_documented_exceptions(model):
    with pytest.raises(ValueError, match="unknown KV cache type 'f8'"):
        deferkv.Model(cache_type_k="f8")
    with pytest.raises(ValueError, match="f8"):
        deferkv.Session(model, cache_type_v="f8")
    with pytest.raises(ValueError, match="n_batch"):
        deferkv.Session(model, n_batch=0)
    s = deferkv.Session(model, n_ctx=16)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        s.prefill([1, 10 ** 6])
    with pytest.raises(ValueError, match="integers"):
        s.prefill([1, 2.5])
    with pytest.raises(deferkv.Error, match="do not fit in the context of 16"):
        s.prefill(list(range(1, 40)))
    assert s.n_past == 0  # unchanged
    s.prefill([1, 2, 3])
    with pytest.raises(IndexError, match="layer 99"):
        s.kv_positions(99, 0)
    with pytest.raises(IndexError, match="KV head -1"):
        s.kv_keys(0, -1)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        s.decode(-3)
    other = deferkv.Session(model, n_ctx=16)
    with pytest.raises(ValueError, match="another Session"):
        s.rollback(other.checkpoint())
    with pytest.raises(ValueError, match="unknown press|no press"):
        s.set_press("no_such_press", kv_budget=4)
    assert s.n_past == 3 and s.press == "full"


def test_layer0_keys_carry_rope_and_values_do_not(model):
    # One token repeated: at layer 0 its value is the same at every position, its key is the
    # same vector rotated by RoPE (other directions, the same norm).
    token = model.tokenize("the", add_bos=False)[0]
    s = deferkv.Session(model, cache_type_k="f32", cache_type_v="f32")
    s.prefill([token] * 4)
    keys, values = s.kv_keys(0, 0), s.kv_values(0, 0)
    for i in range(1, 4):
        np.testing.assert_array_equal(values[i], values[0])
        assert not np.allclose(keys[i], keys[0])
        np.testing.assert_allclose(np.linalg.norm(keys[i]), np.linalg.norm(keys[0]), rtol=1e-5)
