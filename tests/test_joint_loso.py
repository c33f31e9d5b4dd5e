"""benchmarks/joint_loso.py's joint fit of the request overhead (one per group) and the eager launch
time (one per engine), by hand on made-up rows (the scan over the measured sets is a benchmark, not a
test)."""

from __future__ import annotations

import pytest

from tests.bench_helpers import load_benchmark

jl = load_benchmark("joint_loso")


def _item(engine: str, source: str, measured: float, bare: dict[float, float], group: str = "py") -> object:
    return jl.Item(group=group, engine=engine, source=source, dataset="published", measured_ms=measured,
                   bare_ms=bare)


def test_the_values_that_fit_best_are_found_and_ties_go_to_the_smaller():
    """Two rows of engine e measured 100 ms: at launch 0 they predict 80 and 90 ms bare, at launch
    1000 both 95.  Overhead 10 at launch 0 gives |errors| 10% and 0% (median 5%); overhead 5 at
    launch 1000 gives 0% for both: (5, e 1000).  With one row only (bare 90 at 0, 95 at 1000), both
    (10, 0) and (5, 1000) are exact: the tie goes to the smaller launch time."""
    rows = [_item("e", "a", 100.0, {0.0: 80.0, 1000.0: 95.0}),
            _item("e", "b", 100.0, {0.0: 90.0, 1000.0: 95.0})]
    grids = {"e": (0.0, 1000.0)}
    assert jl.fit(rows, (0.0, 5.0, 10.0), grids) == (5.0, (("e", 1000.0),))
    assert jl.fit(rows[1:], (0.0, 5.0, 10.0), grids) == (10.0, (("e", 0.0),))
    assert jl.error(rows[0], 5.0, (("e", 1000.0),)) == pytest.approx(0.0)
    assert jl.error(rows[0], 10.0, (("e", 0.0),)) == pytest.approx(-0.1)
    assert jl.fit([], (0.0, 5.0), grids) == (0.0, ())


def test_one_overhead_is_shared_and_each_engine_takes_its_own_launch_time():
    """Engine s (two rows) is exact at overhead 10 with launch 500 (bare 90 of 100; at 0 it is 70),
    engine t at overhead 10 with launch 0 (bare 90; at 500 it is 60), engine v has no launch time
    (bare 90 at every grid point).  At s 0 the two s rows are 20% off whatever the overhead (median
    10%); fitted together the one overhead is 10 and the launch times s 500, t 0, every row exact (t
    500 is exact in the median too, 30% off on its one row: the tie goes to the smaller); a row of v is
    priced at its bare 90 whatever the launch times."""
    s_bare = {0.0: 70.0, 500.0: 90.0}
    rows = [_item("s", "a", 100.0, s_bare), _item("s", "a", 100.0, s_bare),
            _item("t", "b", 100.0, {0.0: 90.0, 500.0: 60.0}),
            _item("v", "c", 100.0, {0.0: 90.0, 500.0: 90.0})]
    o, launches = jl.fit(rows, (0.0, 10.0, 30.0), {"s": (0.0, 500.0), "t": (0.0, 500.0)})
    assert (o, launches) == (10.0, (("s", 500.0), ("t", 0.0)))
    assert jl.bare(rows[2], launches) == 90.0
    assert all(jl.error(x, o, launches) == pytest.approx(0.0) for x in rows)


def test_each_source_is_predicted_with_the_values_fitted_without_it():
    """Engine e: sources a and b want overhead 10 (bare 90 of 100), source c wants 30 (bare 70 of
    100), all at launch 0 whatever the grid says (bare equal at both launch times).  Left out, a
    takes b and c's median-best (the grid's first of the two exact ones: 10), c takes a and b's (10);
    the never-fitted source n is predicted with the values fitted on a, b and c (10), not fitted to.
    A row of another group (the C++ front end) is fitted apart."""
    same = {0.0: 90.0, 500.0: 90.0}
    rows = [_item("e", "a", 100.0, same), _item("e", "b", 100.0, same),
            _item("e", "c", 100.0, {0.0: 70.0, 500.0: 70.0}), _item("e", "n", 100.0, {0.0: 0.0, 500.0: 0.0}),
            _item("cpp", "d", 100.0, {0.0: 95.0, 500.0: 95.0}, group="cpp")]
    fits = jl.loso(rows, (0.0, 5.0, 10.0, 30.0), {"e": (0.0, 500.0)}, {"n"})
    full, picks = fits["py"]
    assert full == (10.0, (("e", 0.0),))
    assert picks["a"] == full and picks["b"] == full and picks["c"] == full
    assert picks["n"] == full  # never fitted: the full values, though 100 ms would fit it
    assert fits["cpp"][0] == (5.0, ())
