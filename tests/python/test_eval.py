"""deferkv.eval.run: the CLI's sweep from Python, through the same library call."""
import json
import subprocess

import pytest

import deferkv

SWEEP = dict(tasks=["niah_single_1"], lengths=[640], samples=3, press=["full", "snapkv:window=8"], kv_budget=24,
             threads=1, progress=False)


def predictions(folder):
    with open(f"{folder}/samples.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return sorted((r["label"], r["index"], r["pred"]) for r in rows)


def test_run_equals_the_cli_and_its_rows_are_plain_data(cli, tmp_path):
    out = deferkv.eval.run(output=str(tmp_path / "py"), **SWEEP)
    assert out["samples_run"] == 6
    subprocess.run([cli, "eval", "--tasks", "niah_single_1", "--lengths", "640", "--samples", "3", "--press",
                    "full;snapkv:window=8", "--kv-budget", "24", "-t", "1", "-o", str(tmp_path / "cli")],
                   check=True, capture_output=True)
    cli_dir = (tmp_path / "cli" / "latest").resolve()
    # The same configuration (the folder's name is its hash), the same predictions and scores.
    assert cli_dir.name == out["dir"].rsplit("/", 1)[1]
    assert predictions(cli_dir) == predictions(out["dir"])
    def scores(tables):
        return [[(row["label"], row["scores"], row["average"]) for row in t["rows"]] for t in tables]

    with open(cli_dir / "summary.json", encoding="utf-8") as f:
        assert scores(json.load(f)["tables"]) == scores(out["summary"]["tables"])
    rows = {r["label"]: r for r in out["results"]}
    assert set(rows) == {"full", "snapkv:window=8@24"}
    full, snap = rows["full"], rows["snapkv:window=8@24"]
    assert full["kv_budget"] is None and snap["kv_budget"] == 24 and snap["samples"] == 3
    assert isinstance(full["score"], float) and full["task"] == "niah_single_1" and full["length"] == 640
    assert snap["kv_bytes_after_eviction"] < full["peak_kv_bytes"]
    assert "| method | niah_single_1 | Avg. |" in out["tables"]


def test_a_rerun_reuses_rows_and_a_grown_sweep_runs_only_the_new_ones(tmp_path):
    first = deferkv.eval.run(output=str(tmp_path), **SWEEP)
    again = deferkv.eval.run(output=str(tmp_path), **SWEEP)
    assert again["dir"] == first["dir"] and again["samples_run"] == 0
    grown = deferkv.eval.run(output=str(tmp_path), **{**SWEEP, "samples": 4})
    assert grown["dir"] == first["dir"] and grown["samples_run"] == 2
    assert {r["samples"] for r in grown["results"]} == {4}


def test_bad_requests_raise_with_the_engine_message(tmp_path):
    with pytest.raises(ValueError, match="'four'"):
        deferkv.eval.run(lengths=["four"], output=str(tmp_path))
    with pytest.raises(deferkv.Error, match="no_such_task"):
        deferkv.eval.run(tasks=["no_such_task"], lengths=[640], output=str(tmp_path), progress=False)
    with pytest.raises(deferkv.Error, match="needs --kv-budget or --kv-ratio"):
        deferkv.eval.run(tasks=["niah_single_1"], lengths=[640], press="snapkv", output=str(tmp_path), progress=False)
    with pytest.raises(deferkv.Error, match="give the lengths"):
        deferkv.eval.run(tasks=["niah_single_1"], output=str(tmp_path), progress=False)


def test_threads_default_as_the_clis(cli, tmp_path):
    # The configuration (its hash names the folder) records the threads: left out in both,
    # Python and the CLI run on the same number.
    out = deferkv.eval.run(output=str(tmp_path / "py"), tasks=["niah_single_1"], lengths=[640], samples=1,
                           press=["full"], progress=False)
    subprocess.run([cli, "eval", "--tasks", "niah_single_1", "--lengths", "640", "--samples", "1", "--press", "full",
                    "-o", str(tmp_path / "cli")], check=True, capture_output=True)
    assert (tmp_path / "cli" / "latest").resolve().name == out["dir"].rsplit("/", 1)[1]


def test_questions_per_context_reports_each_turn(tmp_path):
    out = deferkv.eval.run(tasks=["niah_multikey_2"], lengths=[640], samples=1, press="full", threads=1,
                           questions_per_context=2, context_mode="multi-turn", output=str(tmp_path), progress=False)
    turns = out["summary"]["turns"]
    assert turns["questions_per_context"] == 2 and turns["context_mode"] == "multi-turn"
    assert len(turns["rows"][0]["turn_scores"]) == 2
    with pytest.raises(deferkv.Error, match="task cwe cannot ask 2"):
        deferkv.eval.run(tasks=["cwe"], lengths=[640], questions_per_context=2, output=str(tmp_path), progress=False)
