"""Python refuses what the server refuses, with the same checks (deferkv/generation_params.h)
and messages naming the parameter, never a CLI flag; generate takes text, token ids or chat
messages; the documentation's examples run as written (issue 41, item 8)."""
import inspect
import pathlib
import re

import pytest

import deferkv

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _python_blocks(markdown: pathlib.Path):
    return re.findall(r"```python\n(.*?)```", markdown.read_text(), re.DOTALL)


def test_the_docs_first_example_runs_as_written():
    # docs/python.md's first example asked for kv_budget=16, below deferkv's 32-entry window.
    first = _python_blocks(ROOT / "docs" / "python.md")[0]
    exec(compile(first, "docs/python.md", "exec"), {})


def test_the_module_docstrings_generate_example_runs(model):
    example = re.search(r"out = model\.generate\((.*?)\)\n", deferkv.__doc__, re.DOTALL).group(1)
    out = eval(f"model.generate({example})", {"model": model})
    assert out.tokens


@pytest.mark.parametrize("kwargs, param", [
    ({"temperature": -1}, "temperature"),
    ({"temperature": 101}, "temperature"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": 2**20 + 1}, "max_tokens"),
    ({"top_k": -1}, "top_k"),
    ({"top_p": 0.0}, "top_p"),
    ({"min_p": 1.0}, "min_p"),
    ({"seed": -2}, "seed"),
    ({"stop": [""]}, "stop"),
    ({"stop": ""}, "stop"),
    ({"stop": ["x"] * 17}, "stop"),
    ({"press": "snapkv", "kv_budget": 0}, "kv_budget"),
    ({"press": "snapkv", "kv_ratio": 1.0}, "kv_ratio"),
    ({"kv_budget": 8}, "press"),
])
def test_what_the_server_refuses_is_a_value_error_naming_the_parameter(model, kwargs, param):
    with pytest.raises(ValueError, match=param) as raised:
        model.generate("Once", **{"max_tokens": 2, **kwargs})
    assert "--" not in str(raised.value)


def test_an_unknown_role_is_refused(model):
    with pytest.raises(ValueError, match="role"):
        model.generate([{"role": "robot", "content": "hi"}], max_tokens=2, chat_template="chatml")


def test_answer_checks_as_generate_does(model):
    ctx = model.compress("Once upon a time")
    for kwargs in ({"max_tokens": 0}, {"temperature": -1}, {"stop": [""]}):
        with pytest.raises(ValueError):
            ctx.answer(" there", **kwargs)


def test_errors_name_parameters_not_cli_flags(model_path, model):
    with pytest.raises(ValueError, match="kv_budget") as needs_budget:
        model.generate("Once", max_tokens=2, press="snapkv")
    assert "--kv-budget" not in str(needs_budget.value)
    small = deferkv.Model(model_path, n_ctx=16)
    with pytest.raises(deferkv.Error, match="n_ctx") as too_long:
        small.generate("Once upon a time, there was a little girl named Lily who loved to play", max_tokens=2)
    assert "(-c)" not in str(too_long.value)


def test_generate_takes_token_ids(model):
    text = "Once upon a time"
    by_text = model.generate(text, max_tokens=8, temperature=0)
    by_ids = model.generate(model.tokenize(text), max_tokens=8, temperature=0)
    assert by_ids.tokens == by_text.tokens
    assert by_ids.text == by_text.text
    assert model.generate([1, 403, 407], max_tokens=2, temperature=0).prompt_tokens == 3
    with pytest.raises(ValueError, match="vocabulary"):
        model.generate([1, 10**6], max_tokens=2)


@pytest.mark.parametrize("prompt", [None, 3, 3.5, b"bytes", [1.5], [1, "a"], [True, False], {"role": "user"}])
def test_other_prompts_are_a_type_error_naming_prompt(model, prompt):
    with pytest.raises(TypeError, match="prompt"):
        model.generate(prompt, max_tokens=2)


def test_an_empty_prompt_list_is_a_value_error(model):
    with pytest.raises(ValueError, match="prompt"):
        model.generate([], max_tokens=2)


def test_max_tokens_none_runs_to_the_end(model_path):
    small = deferkv.Model(model_path, n_ctx=24)
    prompt = small.tokenize("Once upon a time")
    out = small.generate(prompt, max_tokens=None, temperature=0)
    assert out.stop_reason in ("end_of_generation", "context_full")
    with pytest.raises(TypeError, match="max_tokens"):
        small.generate(prompt, max_tokens="8")


def test_eval_runs_default_threads_are_as_documented():
    # The docs said eval.run used one thread; it uses every core (threads=0), as Model does.
    assert inspect.signature(deferkv.eval.run).parameters["threads"].default == 0
    assert inspect.signature(deferkv.Model).parameters["n_threads"].default == 0
    docs = (ROOT / "docs" / "python.md").read_text()
    assert "`threads` (1" not in docs
    assert "`threads` 0 (every core" in docs
