"""deferkv.eval.run: `deferkv eval` from Python, the same sweep through the same library call.

    import deferkv.eval
    out = deferkv.eval.run(tasks=["niah_single_1"], lengths=["4k"], samples=5,
                           press=["full", "snapkv", "deferkv:d=4"], kv_budget=64)
    out["results"]        # one dict per (method, task, length): pd.DataFrame(out["results"])
    out["summary"]        # summary.json: the tables, the configuration and the run

Results go to a results folder as with the CLI (`output`/`name`), so a rerun or a grown
sweep reuses every row already there, and the CLI's `deferkv score`, `eval merge` and
reports read it.
"""
from __future__ import annotations

import csv
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _deferkv

__all__ = ["run"]

Numbers = Union[int, float, str, Sequence[Union[int, float, str]]]


def _list(value: Any) -> List[Any]:
    if value is None:
        return []
    if isinstance(value, (str, int, float)):
        return [value]
    return list(value)


def _length(value: Union[int, str]) -> int:
    """4096, "4096" or "4k" (k = 1024, as the CLI's --lengths)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    try:
        return int(text[:-1]) * 1024 if text.endswith("k") else int(text)
    except ValueError:
        raise ValueError(f"a length is a number of tokens such as 4096 or '4k', got {value!r}") from None


def _number(text: str) -> Any:
    """A results.csv field as Python data: int, float, bool, or None when empty."""
    if text == "":
        return None
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _read_results(folder: str) -> List[Dict[str, Any]]:
    path = os.path.join(folder, "results.csv")
    if not os.path.exists(path):  # a shard: its rows wait for `eval merge`
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return [{k: (v if k in ("label", "method", "task", "error") else _number(v)) for k, v in row.items()}
                for row in csv.DictReader(f)]


def run(
    bench: str = "ruler",
    *,
    model: Optional[str] = None,
    tasks: Union[str, Sequence[str], None] = None,
    lengths: Numbers = (),
    depths: Union[float, Sequence[float], None] = None,
    press: Union[str, Any, Sequence[Any]] = "full",
    kv_budget: Union[int, Sequence[int], None] = None,
    kv_ratio: Union[float, Sequence[float], None] = None,
    samples: Optional[int] = None,
    seed: int = 42,
    temperature: float = 0.0,
    top_k: int = 40,
    top_p: float = 0.95,
    min_p: float = 0.05,
    threads: int = 0,
    n_batch: int = 512,
    cache_type_k: str = "f16",
    cache_type_v: str = "f16",
    question_agnostic: bool = False,
    questions_per_context: int = 1,
    context_mode: str = "independent",
    output: str = "results",
    name: Optional[str] = None,
    shard: str = "1/1",
    chat: bool = True,
    chat_template: str = "",
    draft_model: Optional[str] = None,
    data_dir: Optional[str] = None,
    squad: Optional[str] = None,
    hotpotqa: Optional[str] = None,
    longbench_dir: Optional[str] = None,
    max_length: Optional[int] = None,
    word_split: str = "all",
    progress: bool = True,
) -> Dict[str, Any]:
    """Runs a RULER, NIAH or LongBench sweep over presses and budgets, as `deferkv eval`.

    Args:
        bench: "ruler", "niah" or "longbench".
        model: a GGUF file; None: the embedded retrieval model.
        tasks: RULER tasks or LongBench datasets; None: all (RULER's 13, qa_1/qa_2 only with
            `squad`/`hotpotqa`; LongBench's 16 English datasets).
        lengths: prompt lengths in tokens, e.g. [4096, "8k"] (RULER and NIAH).
        depths: NIAH needle depths in percent; None: 0, 11, ..., 100.
        press: press specs, e.g. ["full", "snapkv", "deferkv:d=4"]; a deferkv.Press or
            deferkv.Scorer (a press written in Python) as well.
        kv_budget / kv_ratio: budgets (entries per KV head) or compression ratios; every
            press but "full" runs at each.
        samples: per task and length (RULER, default 500) or per dataset (LongBench, all).
        seed, temperature, top_k, top_p, min_p: the task generators' seed and the decoding
            (greedy by default, as the papers').
        threads, n_batch, cache_type_k, cache_type_v: the engine's, as the CLI's -t, -b, -ctk, -ctv
            (threads 0: every core this process may use, as -t's default).
        question_agnostic: compress each context before its question is read (kvpress's
            default); False: the press sees context and question (docs/compression.md).
        questions_per_context, context_mode: Q questions over each sample's one haystack, its
            context compressed once ("independent" or "multi-turn"; docs/evaluation.md, shared
            contexts).
        output, name: the folder the results folder is made in, and its name (None: from a
            hash of the configuration); the same configuration reuses its rows.
        shard: "i/N" runs shard i of N of the grid (then `deferkv eval merge`).
        chat, chat_template: the model's chat format (or one by name); chat=False: plain prompts.
        progress: print progress and warnings on stderr.

    Returns:
        {"dir": the results folder, "samples_run": samples run by this call, "seconds",
        "failed_rows": rows whose run failed (in failures.jsonl and the reports; a rerun
        retries them),
        "results": results.csv's rows as dicts (label, method, kv_budget, kv_ratio, task,
        length, score, samples, failed, error, prompt_tokens, prefill_seconds, decode_tokens_per_second,
        capture_seconds, eviction_seconds, kv_bytes_after_eviction, peak_kv_bytes),
        "summary": summary.json, "tables": the score and cost tables as Markdown}; a shard's
        "results", "summary" and "tables" are empty until `eval merge`.

    Raises:
        ValueError: a bad length. deferkv.Error: anything else the engine refuses (an unknown
            task or press, a bad budget, a missing data file, a results folder of another
            configuration), with its message. KeyboardInterrupt: Ctrl-C, after the sample in
            flight; the reports then hold what was done.
    """
    r = _deferkv._EvalRequest()
    r.bench = bench
    r.model = "" if model is None else str(model)
    r.draft_model = "" if draft_model is None else str(draft_model)
    r.tasks = [str(t) for t in _list(tasks)]
    r.lengths = [_length(x) for x in _list(lengths)]
    r.depths = [float(x) for x in _list(depths)]
    from . import _press_spec  # a Scorer or a Press runs as the press it is added as

    r.presses = [_press_spec(p) for p in (press if isinstance(press, (list, tuple)) else [press])]
    r.budgets = [int(b) for b in _list(kv_budget)]
    r.ratios = [float(x) for x in _list(kv_ratio)]
    r.samples = 0 if samples is None else samples
    r.seed = seed
    r.set_sampling(temperature, top_k, top_p, min_p)
    r.threads = threads
    r.n_batch = n_batch
    r.cache_type_k, r.cache_type_v = cache_type_k, cache_type_v
    r.question_agnostic = question_agnostic
    r.questions_per_context = questions_per_context
    r.context_mode = context_mode
    r.output = str(output)
    r.name = "" if name is None else name
    r.shard = shard
    r.chat = chat
    r.chat_template = chat_template
    if data_dir is not None:
        r.data_dir = str(data_dir)
    r.squad = "" if squad is None else str(squad)
    r.hotpotqa = "" if hotpotqa is None else str(hotpotqa)
    r.longbench_dir = "" if longbench_dir is None else str(longbench_dir)
    r.max_length = 0 if max_length is None else max_length
    r.word_split = word_split
    out = dict(_deferkv.eval_run(r, progress))
    summary_path = os.path.join(out["dir"], "summary.json")
    out["summary"] = {}
    if out["tables"] and os.path.exists(summary_path):
        with open(summary_path, encoding="utf-8") as f:
            out["summary"] = json.load(f)
    out["results"] = _read_results(out["dir"]) if out["tables"] else []
    return out
