"""deferkv.Context: save, load, answers from several threads, and the refusals (issue 44).

Mutant seen failing: load_context not starting its session from the loaded context (its kv
statistics empty) -> test_a_saved_and_loaded_context_answers_as_in_memory."""
import threading

import pytest

import deferkv

CONTEXT = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
           "One day she saw a big red ball under a tree. She ran to the tree and picked up the ball. "
           "Her friend Tom came and they played together all day.")
QUESTIONS = [" Lily and Tom", " The ball was", " One day", " Her friend"]
PRESS = "snapkv:window=4"


def test_a_saved_and_loaded_context_answers_as_in_memory(model, tmp_path):
    ctx = model.compress(CONTEXT, press=PRESS, kv_budget=16)
    assert isinstance(ctx, deferkv.Context) and ctx.press.startswith("snapkv:")
    path = tmp_path / "doc.dkvctx"
    ctx.save(path)
    loaded = deferkv.Context.load(path, model)
    assert loaded.press == ctx.press and loaded.context_tokens == ctx.context_tokens
    assert loaded.kv.positions == ctx.kv.positions and loaded.kv.bytes == ctx.kv.bytes
    for q in QUESTIONS:
        assert loaded.answer(q, max_tokens=16).tokens == ctx.answer(q, max_tokens=16).tokens
    assert len(model.tokenize(CONTEXT)) == ctx.context_tokens


def test_answers_from_threads_equal_answers_alone(model):
    ctx = model.compress(CONTEXT, press=PRESS, kv_budget=16)
    alone = [ctx.answer(q, max_tokens=12).tokens for q in QUESTIONS * 2]
    together = [None] * len(alone)

    def run(i):
        together[i] = ctx.answer((QUESTIONS * 2)[i], max_tokens=12).tokens

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(alone))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert together == alone


def test_cli_save_context_is_read_by_python(model, model_path, cli, tmp_path):
    import subprocess
    path = tmp_path / "cli.dkvctx"
    subprocess.run([cli, "generate", "-m", model_path, "-p", CONTEXT, "--press", PRESS, "--kv-budget", "16",
                    "--save-context", str(path)], check=True, capture_output=True)
    loaded = deferkv.Context.load(path, model)
    ctx = model.compress(CONTEXT, press=PRESS, kv_budget=16)
    assert loaded.press == ctx.press
    assert loaded.answer(QUESTIONS[0], max_tokens=12).tokens == ctx.answer(QUESTIONS[0], max_tokens=12).tokens
    # And the CLI answers from it as Python does.
    out = subprocess.run([cli, "generate", "-m", model_path, "--context", str(path), "-p", QUESTIONS[0], "-n", "12",
                          "--temp", "0"], check=True, capture_output=True, text=True)
    assert out.stdout.rstrip("\n") == ctx.answer(QUESTIONS[0], max_tokens=12).text


def test_refusals(model, model_path, tmp_path):
    ctx = model.compress(CONTEXT, press=PRESS, kv_budget=16)
    path = tmp_path / "doc.dkvctx"
    ctx.save(path)
    with pytest.raises(FileNotFoundError):
        deferkv.Context.load(tmp_path / "missing.dkvctx", model)
    f32 = deferkv.Model(model_path, cache_type_k="f32", cache_type_v="f32")
    with pytest.raises(deferkv.Error, match="not f32/f32"):
        deferkv.Context.load(path, f32)
    data = path.read_bytes()
    (tmp_path / "cut.dkvctx").write_bytes(data[:-10])
    with pytest.raises(deferkv.Error, match="cut.dkvctx.*truncated"):
        deferkv.Context.load(tmp_path / "cut.dkvctx", model)
    once = model.compress(CONTEXT, press="tova", kv_budget=16)
    with pytest.raises(deferkv.Error, match="cannot be saved"):
        once.save(tmp_path / "once.dkvctx")


def test_a_deferkv_context_answers_every_question_and_saves(model, tmp_path):
    """A deferred context (issue 44 item 5): kept as its pool, each answer evicting at its own
    step d; it answers any number of questions, each as often as asked, and saves."""
    ctx = model.compress(CONTEXT, press="deferkv:window=4,d=2,pool=2x", kv_budget=12)
    assert "pool=2x" in ctx.press
    heads = [head for layer in ctx.kv.positions for head in layer]
    assert all(len(head) == 24 for head in heads)  # the pool: 2 x the budget per head
    answers = [ctx.answer(q, max_tokens=10).tokens for q in QUESTIONS]
    assert [ctx.answer(q, max_tokens=10).tokens for q in QUESTIONS] == answers
    path = tmp_path / "deferred.dkvctx"
    ctx.save(path)
    loaded = deferkv.Context.load(path, model)
    assert loaded.press == ctx.press and loaded.kv.positions == ctx.kv.positions
    assert [loaded.answer(q, max_tokens=10).tokens for q in QUESTIONS] == answers
