"""Validation helpers shared by the parameter objects.

Every check raises :class:`ParameterError` whose message names the parameter,
the value it was given and the valid range, so a user can fix the input without
reading code.  Nothing is ever clamped.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

__all__ = ["InputError", "OutputError", "ParameterError", "check_int", "check_real"]


class ParameterError(ValueError):
    """A parameter is outside its valid range or of the wrong kind."""

    def __init__(self, name: str, value: object, valid: str) -> None:
        self.name = name
        self.value = value
        self.valid = valid
        super().__init__(f"{name}={value!r} is invalid: must be {valid}")


class OutputError(RuntimeError):
    """A result could not be written (a full disk, a file-size limit): a runtime failure, exit 1.

    The message names the file; nothing partial is left where it was to go."""


class InputError(ValueError):
    """An input file (trace, metrics scrape, benchmark result) is missing or malformed.

    The message names the file and, where there is one, the line and field.
    """


def check_real(
    name: str,
    value: object,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """Return ``value`` as a float after checking it is finite and within bounds.

    ``lo``/``hi`` are inclusive unless ``lo_open``/``hi_open`` is set.
    """
    valid = _describe(lo, hi, lo_open, hi_open)
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ParameterError(name, value, f"a real number {valid}")
    x = float(value)
    if math.isnan(x) or math.isinf(x):
        raise ParameterError(name, value, f"a finite number {valid}")
    if lo is not None and (x < lo or (lo_open and x == lo)):
        raise ParameterError(name, value, valid)
    if hi is not None and (x > hi or (hi_open and x == hi)):
        raise ParameterError(name, value, valid)
    return x


def check_int(name: str, value: object, *, lo: int | None = None, hi: int | None = None) -> int:
    """Return ``value`` as an int after checking it is an integer within [lo, hi]."""
    valid = _describe(lo, hi, False, False)
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ParameterError(name, value, f"an integer {valid}")
    n = int(value)
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        raise ParameterError(name, value, f"an integer {valid}")
    return n


def _describe(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {lo:g}"
    if hi is not None:
        return f"{'<' if hi_open else '<='} {hi:g}"
    return "finite"
