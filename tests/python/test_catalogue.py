"""deferkv.presses() and deferkv.score() return plain Python data."""
import deferkv


def test_presses_lists_the_catalogue():
    presses = {p["name"]: p for p in deferkv.presses()}
    assert {"snapkv", "deferkv"} <= set(presses)
    assert presses["snapkv"]["uses_budget"] is True
    assert all({"name", "default", "help"} == set(p) for p in presses["deferkv"]["parameters"])
    assert any(p["name"] == "d" for p in presses["deferkv"]["parameters"])
    assert presses["snapkv"]["reads"] == "prompt_queries"
    assert presses["knorm"]["reads"] == "keys_and_values"
    assert presses["deferkv"]["reads"] == "decode_queries"
    assert all(p["reads"] != "unstated" for p in presses.values())


def test_score_uses_the_official_metric():
    # RULER's string_match_all: the share of the reference strings found in the prediction.
    rows = [
        {"task": "niah_single_1", "pred": "the number is 1234", "outputs": ["1234"]},
        {"task": "niah_single_1", "pred": "no idea", "outputs": ["9876"]},
        {"task": "niah_multikey_2", "pred": "11 and 22", "outputs": ["11", "33"]},
    ]
    result = deferkv.score(rows, benchmark="ruler")
    assert result["benchmark"] == "ruler"
    (row,) = result["rows"]
    groups = {g["name"]: g for g in row["groups"]}
    assert groups["niah_single_1"]["score"] == 50.0 and groups["niah_single_1"]["samples"] == 2
    assert groups["niah_multikey_2"]["score"] == 50.0
    assert row["average"] == 50.0
