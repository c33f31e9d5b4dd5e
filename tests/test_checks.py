"""The field checks every parameter object shares (servesim._checks)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from servesim import _checks
from servesim._checks import BOUNDS, ParameterError, check_bound, check_choice, check_counts, check_fields
from servesim._lazy import OnFirstUse


@dataclass
class _Point:
    rate: float = 1.0
    size: float = 2.0
    count: object = 3


def test_check_fields_names_the_first_bad_field_in_order():
    with pytest.raises(ParameterError) as info:
        check_fields(_Point(rate=0.0, size=-1.0), "rate", "size")
    assert (info.value.name, info.value.valid) == ("rate", "> 0")
    check_fields(_Point(rate=0.0), "rate", lo_open=False)  # >= 0 takes 0
    with pytest.raises(ParameterError, match=r"size=-1\.0 is invalid: must be >= 0"):
        check_fields(_Point(size=-1.0), "size", lo_open=False)


@pytest.mark.parametrize("count", [0, 2.0, True, "3"])
def test_check_counts_wants_an_integer_of_at_least_one(count):
    with pytest.raises(ParameterError) as info:
        check_counts(_Point(count=count), "count")
    assert info.value.name == "count" and info.value.valid == "an integer >= 1"


def test_check_choice_lists_the_choices():
    assert check_choice("service", "det", ("exp", "det")) == "det"
    for bad in ("gamma", 1, None):
        with pytest.raises(ParameterError, match="must be one of exp, det"):
            check_choice("service", bad, ("exp", "det"))


def test_bounds_are_read_from_their_data_file_on_first_use_once():
    table = OnFirstUse(_checks._read_bounds)  # as BOUNDS is built
    assert "_table" not in vars(table)  # importing _checks parsed nothing
    assert table["tp"].flag == "--tp"
    first = vars(table)["_table"]
    assert table["isl"] is first["isl"]  # the second look-up reads no file again


def test_bounds_families_make_every_name_of_their_lists():
    # 7 statistics x 4 metrics of measured times and 3 throughputs, as points rows and results name them
    stats = ("mean", "median", "std", "p50", "p90", "p95", "p99")
    times = [f"{s}_{m}_ms" for s in stats for m in ("ttft", "tpot", "itl", "e2el")]
    assert len(times) == 28 and all(n in BOUNDS for n in times)
    assert BOUNDS["p99_e2el_ms"].hi == 1000 * 3600 * 1000  # 1,000 hours in ms
    assert check_bound("request_throughput", 1e12) == 1e12
    with pytest.raises(ParameterError, match="total_token_throughput"):
        check_bound("total_token_throughput", 1.5e12)
    assert BOUNDS["concurrency"].flag == "--max-concurrency"  # a flag not spelled from the name
