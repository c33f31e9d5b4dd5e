"""The field checks every parameter object shares (servesim._checks)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from servesim._checks import ParameterError, check_choice, check_counts, check_fields


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
