"""A press written in Python (deferkv.Scorer, deferkv.Press): SnapKV written here with NumPy
keeps exactly the C++ snapkv's kept set, under every allocation, selection and trigger, in
generate, compress, Session and eval.run; an unpooled mutant does not; errors in score()
come back as Python errors and leave the session usable."""
import json
import threading

import numpy as np
import pytest

import deferkv

PROMPT = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
          "One day she saw a big red ball under a tree. She ran to the ball and kicked it very hard. "
          "The ball went up into the sky and did not come down. Lily was sad and went home to her mom.")
BUDGET = 16
WINDOW = 4


def max_pool(scores, kernel):
    """SnapKV's pooling: max over the kernel around each token (stride 1, the padding ignored)."""
    half = kernel // 2
    n = len(scores)
    return np.array([scores[max(0, j - half):min(n, j + half + 1)].max() for j in range(n)], dtype=np.float32)


class PySnapKV(deferkv.Scorer):
    """SnapKV: the last `window` prompt queries' attention (the engine's capture: a mean over
    the window and the KV head's query heads), max-pooled over 7 tokens."""

    name = "py_snapkv"

    def __init__(self, window=WINDOW, kernel=7, pool=True, **declared):
        super().__init__(window=window, **declared)
        self.kernel, self.pool = kernel, pool

    def score(self, layer):
        out = []
        for g in range(layer.n_head_kv):
            a = layer.prompt_attention[g][: layer.candidates[g]]
            out.append(max_pool(a, self.kernel) if self.pool else a)
        return out


# Each shared part with the C++ snapkv's same parameters: allocations, chunks, the triggers.
SHARED = [{}, {"alloc": "adakv"}, {"alloc": "pyramid"}, {"d": 2}, {"chunk": 4}, {"per_step": True}, {"every": 2},
          {"alloc": "adakv", "d": 2}]


def cpp_spec(params):
    text = ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items())
    return f"snapkv:window={WINDOW}" + ("," + text if text else "")


def kept_after_generate(model, press):
    out = model.generate(PROMPT, max_tokens=6, temperature=0, press=press, kv_budget=None if press == "full" else BUDGET)
    return out.kv.positions, out.tokens


@pytest.mark.parametrize("params", SHARED, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "uniform")
def test_python_snapkv_keeps_the_cpp_snapkv_kept_set(model, params):
    python_kept, python_tokens = kept_after_generate(model, deferkv.Press(PySnapKV(), **params))
    cpp_kept, cpp_tokens = kept_after_generate(model, cpp_spec(params))
    assert python_kept == cpp_kept and python_tokens == cpp_tokens
    full, _ = kept_after_generate(model, "full")
    assert cpp_kept != full  # the press evicted


class PyH2O(deferkv.Scorer):
    """H2O: the attention every query so far has paid each entry (summed)."""

    name = "py_h2o"
    all_prompt_queries = True

    def score(self, layer):
        return [a[:c] for a, c in zip(layer.prompt_attention, layer.candidates)]


def test_python_h2o_keeps_the_cpp_h2o_kept_set_once_and_per_step(model):
    # One-shot: every prompt query, 8 recent tokens kept.
    once, _ = kept_after_generate(model, PyH2O(protected_window=8))
    assert once == kept_after_generate(model, "h2o:window=8")[0]
    # Per step, the decode queries add to the sums; the newest 8 entries are kept.
    per_step = deferkv.Press(PyH2O(protected_window=8, all_decode_queries=True), per_step=True)
    python_kept, python_tokens = kept_after_generate(model, per_step)
    cpp_kept, cpp_tokens = kept_after_generate(model, "h2o:per_step=true,recent=8")
    assert python_kept == cpp_kept and python_tokens == cpp_tokens and python_kept != once


def test_the_declared_group_reduction_is_the_engine_s(model):
    python_kept, _ = kept_after_generate(model, PySnapKV(gqa="max"))
    cpp_kept, _ = kept_after_generate(model, f"snapkv:window={WINDOW},gqa=max")
    mean_kept, _ = kept_after_generate(model, cpp_spec({}))
    assert python_kept == cpp_kept and cpp_kept != mean_kept


@pytest.mark.parametrize("params", [{}, {"alloc": "adakv"}, {"d": 2}], ids=["uniform", "adakv", "d=2"])
def test_an_unpooled_mutant_keeps_another_set(model, params):
    mutant, _ = kept_after_generate(model, deferkv.Press(PySnapKV(pool=False), **params))
    cpp_kept, _ = kept_after_generate(model, cpp_spec(params))
    assert mutant != cpp_kept


def test_a_bare_scorer_compress_and_session_keep_the_cpp_set(model):
    ctx = model.compress(PROMPT, press=PySnapKV(), kv_budget=BUDGET)
    ref = model.compress(PROMPT, press=cpp_spec({}), kv_budget=BUDGET)
    assert ctx.kv.positions == ref.kv.positions
    assert ctx.answer(" Lily", max_tokens=4).text == ref.answer(" Lily", max_tokens=4).text
    s = deferkv.Session(model, press=deferkv.Press(PySnapKV(), alloc="adakv"), kv_budget=BUDGET)
    r = deferkv.Session(model, press=cpp_spec({"alloc": "adakv"}), kv_budget=BUDGET)
    for session in (s, r):
        session.prefill(model.tokenize(PROMPT))
    assert [[list(h) for h in layer] for layer in s.kept()] == [[list(h) for h in layer] for layer in r.kept()]
    assert s.press.startswith("py_snapkv:window=4,protected_window=4,") and "alloc=adakv" in s.press


def test_eval_run_takes_a_python_press(tmp_path):
    press = deferkv.Press(PySnapKV(window=8), alloc="adakv")
    out = deferkv.eval.run(tasks=["niah_single_1"], lengths=[640], samples=2, press=[press, "snapkv:window=8,alloc=adakv"],
                           kv_budget=24, threads=1, progress=False, output=str(tmp_path))
    assert out["failed_rows"] == 0 and out["samples_run"] == 4
    rows = {r["label"]: r for r in out["results"]}
    py, cpp = rows["py_snapkv:alloc=adakv@24"], rows["snapkv:window=8,alloc=adakv@24"]
    for key in ("score", "kv_bytes_after_eviction", "samples"):
        assert py[key] == cpp[key]
    with open(f"{out['dir']}/samples.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    predictions = {label: sorted((r["index"], r["pred"]) for r in rows if r["label"] == label) for label in rows_labels(rows)}
    assert predictions["py_snapkv:alloc=adakv@24"] == predictions["snapkv:window=8,alloc=adakv@24"]


def rows_labels(rows):
    return {r["label"] for r in rows}


def test_the_layer_shows_the_engine_state_as_numpy_copies(model):
    seen = {}

    class Recorder(deferkv.Scorer):
        name = "py_recorder"
        window = WINDOW

        def score(self, layer):
            if layer.layer == 0:
                seen["layer"] = layer
                seen["fields"] = (layer.layer, layer.n_layer, layer.prompt_end, layer.next_position, layer.budget,
                                  layer.window, list(layer.candidates))
                seen["positions"] = layer.positions(0)
                seen["keys"], seen["values"] = layer.keys(1), layer.values(1)
                seen["attention"] = layer.prompt_attention
                seen["decode"] = layer.decode_attention
            return [np.zeros(c) for c in layer.candidates]

    tokens = model.tokenize(PROMPT)
    s = deferkv.Session(model, press=Recorder(), kv_budget=BUDGET)
    s.prefill(tokens)
    full = deferkv.Session(model)
    full.prefill(tokens)
    T, meta = len(tokens), model.metadata
    assert seen["fields"] == (0, meta["n_layer"], T, T, BUDGET, WINDOW, [T - WINDOW] * meta["n_head_kv"])
    assert np.array_equal(seen["positions"], np.arange(T, dtype=np.int32))
    assert np.array_equal(seen["keys"], full.kv_keys(0, 1)) and np.array_equal(seen["values"], full.kv_values(0, 1))
    assert seen["keys"].shape == (T, meta["head_dim"]) and seen["keys"].dtype == np.float32
    # The window's attention: each window query's row sums to 1 over the entries it sees, so
    # their mean (over queries and the group's heads) does too.
    assert len(seen["attention"]) == meta["n_head_kv"]
    for a in seen["attention"]:
        assert a.shape == (T,) and a.dtype == np.float32 and abs(float(a.sum()) - 1.0) < 1e-4
    assert seen["decode"] == []
    with pytest.raises(ValueError, match="only readable inside the score"):
        seen["layer"].candidates

    class OutOfRange(Recorder):
        def score(self, layer):
            return layer.keys(9)

    with pytest.raises(IndexError, match="kv_head 9 is out of range: layer 0 has 4 KV heads"):
        deferkv.Session(model, press=OutOfRange(), kv_budget=BUDGET).prefill(tokens)


def test_decode_attention_is_captured_for_declared_steps(model):
    steps = {}

    class Deferred(deferkv.Scorer):
        name = "py_deferred"
        decode_steps = 2
        protected_window = WINDOW

        def score(self, layer):
            steps[layer.layer] = (layer.next_position - layer.prompt_end, [s[0].shape for s in layer.decode_attention])
            return [a[0][:c] + a[1][:c] for a, c in zip(zip(*layer.decode_attention), layer.candidates)]

    out = model.generate(PROMPT, max_tokens=4, temperature=0, press=deferkv.Press(Deferred(), d=2), kv_budget=BUDGET)
    T = out.prompt_tokens
    # Evicted after decode step 2, with the two steps' queries, over the T + 2 entries then held.
    assert steps[0] == (2, [(T + 2,), (T + 2,)])
    assert out.kv.entries[0][0] <= BUDGET + 4


class Failing(PySnapKV):
    name = "py_failing"

    def __init__(self, fail_at_layer=0, **kw):
        super().__init__(**kw)
        self.fail_at_layer = fail_at_layer

    def score(self, layer):
        if self.fail_at_layer is not None and layer.layer == self.fail_at_layer:
            raise KeyError("scorer bug")
        return super().score(layer)


def test_an_exception_in_score_comes_back_and_the_session_stays_usable(model):
    tokens = model.tokenize(PROMPT)
    scorer = Failing()
    with pytest.raises(KeyError, match="scorer bug") as raised:
        model.generate(PROMPT, max_tokens=4, press=scorer, kv_budget=BUDGET)
    assert any("py_failing.score() at layer 0" in note for note in getattr(raised.value, "__notes__", []))
    s = deferkv.Session(model, press=scorer, kv_budget=BUDGET)
    with pytest.raises(KeyError, match="scorer bug"):
        s.prefill(tokens)
    assert s.n_past == 0 and s.kv.entries[0][0] == 0  # the prompt was taken back
    scorer.fail_at_layer = None
    s.prefill(tokens)
    ref = deferkv.Session(model, press=cpp_spec({}), kv_budget=BUDGET)
    ref.prefill(tokens)
    assert [[list(h) for h in l] for l in s.kept()] == [[list(h) for h in l] for l in ref.kept()]


def test_an_exception_in_score_comes_back_from_eval_run(tmp_path):
    sweep = dict(tasks=["niah_single_1"], lengths=[640], samples=1, kv_budget=24, threads=1, progress=False,
                 output=str(tmp_path))
    with pytest.raises(KeyError, match="scorer bug"):
        deferkv.eval.run(press=Failing(window=8), **sweep)
    out = deferkv.eval.run(press=Failing(window=8, fail_at_layer=None), **sweep)
    assert out["samples_run"] == 1 and out["failed_rows"] == 0


def test_an_exception_at_a_decode_step_takes_the_step_back(model):
    tokens = model.tokenize(PROMPT)
    scorer = Failing()
    s = deferkv.Session(model, press=deferkv.Press(scorer, d=2), kv_budget=BUDGET)
    ref = deferkv.Session(model, press=cpp_spec({"d": 2}), kv_budget=BUDGET)
    s.prefill(tokens)
    ref.prefill(tokens)
    first = int(np.argmax(ref.logits))
    s.decode(first)
    ref.decode(first)
    second = int(np.argmax(ref.logits))
    with pytest.raises(KeyError, match="scorer bug"):
        s.decode(second)  # step 2: its eviction runs the scorer
    assert s.n_past == len(tokens) + 1
    assert all(len(s.kv_positions(l, 0)) == len(tokens) + 1 for l in range(model.metadata["n_layer"]))
    scorer.fail_at_layer = None
    s.decode(second)  # step 2 again, now scored
    ref.decode(second)
    assert [[list(h) for h in l] for l in s.kept()] == [[list(h) for h in l] for l in ref.kept()]
    assert np.array_equal(s.logits, ref.logits)


class Returning(deferkv.Scorer):
    name = "py_returning"
    window = WINDOW

    def __init__(self, make):
        super().__init__()
        self.make = make

    def score(self, layer):
        return self.make(layer)


@pytest.mark.parametrize("make, message", [
    (lambda l: [np.zeros(c) for c in l.candidates][:-1], r"layer 0: score\(\) returned 3 arrays; the layer has 4 KV heads"),
    (lambda l: [np.zeros(c - (g == 2)) for g, c in enumerate(l.candidates)],
     r"layer 0, KV head 2: \d+ scores for \d+ candidates"),
    (lambda l: [np.where(np.arange(c) == 5, np.nan, 0.0) for c in l.candidates], "KV head 0: score 5 is NaN"),
    (lambda l: [np.zeros((c, 2)) for c in l.candidates], "KV head 0: a 2-D array"),
    (lambda l: 3.0, r"score\(\) returned float"),
    (lambda l: [["a"] * c for c in l.candidates], "KV head 0: its scores are not an array of numbers"),
])
def test_wrong_scores_name_the_head_and_the_sizes(model, make, message):
    assert model.metadata["n_head_kv"] == 4
    with pytest.raises(ValueError, match=message):
        model.generate(PROMPT, max_tokens=2, press=Returning(make), kv_budget=BUDGET)
    # The model goes on: the next generation runs.
    assert model.generate(PROMPT, max_tokens=2, press=Returning(lambda l: [np.zeros(c) for c in l.candidates]),
                          kv_budget=BUDGET).tokens


def test_bad_declarations_are_refused_by_name(model):
    with pytest.raises(TypeError, match="unknown keyword 'alloc'"):
        PySnapKV.__bases__[0](alloc="adakv")
    with pytest.raises(ValueError, match="'snapkv' is a built-in press"):
        deferkv.Press(type("S", (PySnapKV,), {"name": "snapkv"})())
    with pytest.raises(ValueError, match="gqa must be mean, max or sum"):
        deferkv.Press(deferkv.Scorer(gqa="median"))
    with pytest.raises(TypeError, match="window must be a int"):
        deferkv.Press(deferkv.Scorer(window=2.5))
    with pytest.raises(ValueError, match="no parameter 'bogus'"):
        deferkv.Press(PySnapKV(), bogus=1)
    with pytest.raises(ValueError, match="alloc"):
        deferkv.Press(PySnapKV(), alloc="nonesuch")
    with pytest.raises(ValueError, match="d=2 evicts once after decode step d and per-step eviction"):
        deferkv.Press(PySnapKV(), d=2, per_step=True)
    with pytest.raises(ValueError, match="window is declared by the scorer"):
        model.generate(PROMPT, max_tokens=1, press="py_snapkv:window=8", kv_budget=BUDGET)
    with pytest.raises(TypeError, match="press must be a spec"):
        model.generate(PROMPT, max_tokens=1, press=3, kv_budget=BUDGET)


def test_scorers_run_from_python_threads(model):
    ref, _ = kept_after_generate(model, cpp_spec({"alloc": "adakv"}))
    results = [None] * 3

    def run(i):
        results[i] = kept_after_generate(model, deferkv.Press(PySnapKV(), alloc="adakv"))[0]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == [ref] * 3
