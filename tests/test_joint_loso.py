"""benchmarks/joint_loso.py's joint fit of the request overhead and the eager launch time, by hand on
made-up rows (the scan over the measured sets is a benchmark, not a test)."""

from __future__ import annotations

import pytest

from tests.bench_helpers import load_benchmark

jl = load_benchmark("joint_loso")


def _item(engine: str, source: str, measured: float, bare: dict[float, float]) -> object:
    return jl.Item(engine=engine, source=source, dataset="published", measured_ms=measured, bare_ms=bare)


def test_the_pair_that_fits_best_is_found_and_ties_go_to_the_smaller():
    """Two rows measured 100 ms: at launch 0 they predict 80 and 90 ms bare, at launch 1000 both 95.
    Overhead 10 at launch 0 gives |errors| 10% and 0% (median 5%); overhead 5 at launch 1000 gives 0%
    for both: the pair (5, 1000).  With one row only (bare 90 at 0, 95 at 1000), both (10, 0) and
    (5, 1000) are exact: the tie goes to the smaller launch time."""
    rows = [_item("e", "a", 100.0, {0.0: 80.0, 1000.0: 95.0}),
            _item("e", "b", 100.0, {0.0: 90.0, 1000.0: 95.0})]
    assert jl.fit(rows, (0.0, 5.0, 10.0), (0.0, 1000.0)) == (5.0, 1000.0)
    assert jl.fit(rows[1:], (0.0, 5.0, 10.0), (0.0, 1000.0)) == (10.0, 0.0)
    assert jl.error(rows[0], 5.0, 1000.0) == pytest.approx(0.0)
    assert jl.error(rows[0], 10.0, 0.0) == pytest.approx(-0.1)
    assert jl.fit([], (0.0, 5.0), (0.0, 1000.0)) == (0.0, 0.0)


def test_each_source_is_predicted_with_the_pair_fitted_without_it():
    """Engine e: sources a and b want overhead 10 (bare 90 of 100), source c wants 30 (bare 70 of
    100), all at launch 0 whatever the grid says (bare equal at both launch times).  Left out, a
    takes b and c's median-best (the grid's first of the two exact ones: 10), c takes a and b's (10);
    the never-fitted source n is predicted with the pair fitted on a, b and c (10), not fitted to."""
    same = {0.0: 90.0, 500.0: 90.0}
    rows = [_item("e", "a", 100.0, same), _item("e", "b", 100.0, same),
            _item("e", "c", 100.0, {0.0: 70.0, 500.0: 70.0}), _item("e", "n", 100.0, {0.0: 0.0, 500.0: 0.0})]
    full, picks = jl.loso(rows, (0.0, 10.0, 30.0), {"e": (0.0, 500.0)}, {"n"})["e"]
    assert full == (10.0, 0.0)
    assert picks["a"] == (10.0, 0.0) and picks["b"] == (10.0, 0.0) and picks["c"] == (10.0, 0.0)
    assert picks["n"] == full  # never fitted: the full pair, though 100 ms would fit it
