"""benchmarks/inferencex.py's leave-one-source-out fit of an engines.toml number, by hand on made-up
rows with a stand-in prediction (the scan over InferenceX's runs is a benchmark, not a test)."""

from __future__ import annotations

import copy

import pytest

from servesim.hardware import engines
from tests.bench_helpers import load_benchmark

ix = load_benchmark("inferencex")


def test_a_field_of_a_list_of_tables_is_set_in_every_entry_and_read_from_the_first():
    raw = {"cold_start": [{"dtype": "fp8_block", "seconds": 1.0}, {"dtype": "fp4", "seconds": 2.0}], "x": 3}
    assert ix._get(raw, "cold_start.seconds") == 1.0
    assert ix._get(raw, "x") == 3.0
    assert ix._get(raw, "moe_prefill_scale.factor") is None  # an engine without the list: left out
    ix._set(raw, "cold_start.seconds", 0.5)
    ix._set(raw, "x", 7.0)
    assert [e["seconds"] for e in raw["cold_start"]] == [0.5, 0.5] and raw["x"] == 7.0


def _row(rid: str, date: str, measured: float, mode: str = "agg") -> dict[str, str]:
    return {"id": rid, "date": date, "engine": "sglang", "mode": mode, "mean_ttft_ms": str(measured)}


def test_each_source_takes_the_value_fitted_without_it(monkeypatch: pytest.MonkeyPatch):
    """The stand-in predicts 100 + 100 v ms at SGLang's cold_start seconds v.  Sources a and b
    (measured 200) want v = 1, source c (300) wants 2.  Left out, a takes the best of b and c over
    the grid 0, 1, 2 (median |error| 17% at 1, 25% at 2: v = 1, exact); c takes a and b's (1), so
    its error is |200 - 300| / 300 = 33.3%; the median over the three is 0.0%, and fitted on all
    it is 1.  The shipped value comes back afterwards."""
    raw = engines._raw()["engine"]
    before = copy.deepcopy(raw["sglang"]["cold_start"])

    def predict(row: dict[str, str]) -> dict[str, float]:
        return {"ttft": 100.0 + 100.0 * float(raw["sglang"]["cold_start"][0]["seconds"])}

    monkeypatch.setattr(ix, "predict_row", predict)
    rows = [_row("1", "a", 200.0), _row("2", "b", 200.0), _row("3", "c", 300.0)]
    lines = ix.loso(rows, "cold_start.seconds", [0.0, 1.0, 2.0])
    shipped = before[0]["seconds"]
    assert lines[1].startswith(f"  sglang: fitted on every source 1 (ships {shipped:g}); "
                               "per-source picks 1-1")
    assert "agg          n=3   out of sample   0.0%" in lines[2]
    assert "at 0  50.0%" in lines[2]  # |100 - 200| / 200 for a and b, 66.7% for c: median 50%
    assert lines[3].startswith("    agg moved    n=3 ")  # every row moves with the stand-in
    assert raw["sglang"]["cold_start"] == before
    # a disaggregated row of source c is reported apart, with the value fitted without c
    lines = ix.loso([*rows, _row("4", "c", 200.0, "disagg")], "cold_start.seconds", [0.0, 1.0, 2.0])
    assert "disagg       n=1   out of sample   0.0%" in lines[4]


def test_the_values_predicted_in_two_processes_print_the_same(monkeypatch: pytest.MonkeyPatch):
    """--jobs 2 predicts the grid's values in two processes: the same lines as in one."""
    raw = engines._raw()["engine"]

    def predict(row: dict[str, str]) -> dict[str, float]:
        return {"ttft": 100.0 + 100.0 * float(raw["sglang"]["cold_start"][0]["seconds"])}

    monkeypatch.setattr(ix, "predict_row", predict)
    rows = [_row("1", "a", 200.0), _row("2", "b", 200.0), _row("3", "c", 300.0, "disagg")]
    one = ix.loso(rows, "cold_start.seconds", [0.0, 1.0, 2.0])
    assert ix.loso(rows, "cold_start.seconds", [0.0, 1.0, 2.0], jobs=2) == one
