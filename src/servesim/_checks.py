"""Validation helpers shared by the parameter objects.

Every check raises :class:`ParameterError` whose message names the parameter,
the value it was given and the valid range, so a user can fix the input without
reading code.  Nothing is ever clamped.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from itertools import product
from numbers import Integral, Real
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib

from servesim._lazy import OnFirstUse

__all__ = ["BOUNDS", "Bound", "InputError", "OutputError", "ParameterError", "check_bound", "check_choice",
           "check_counts", "check_fields", "check_int", "check_real", "describe_range"]


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
    valid = describe_range(lo, hi, lo_open, hi_open)
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
    valid = describe_range(lo, hi, False, False)
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ParameterError(name, value, f"an integer {valid}")
    n = int(value)
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        raise ParameterError(name, value, f"an integer {valid}")
    return n


def check_choice(name: str, value: object, choices: Collection[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise naming them all."""
    if not isinstance(value, str) or value not in choices:
        raise ParameterError(name, value, f"one of {', '.join(choices)}")
    return value


def check_fields(obj: object, *names: str, lo: float = 0.0, lo_open: bool = True) -> None:
    """:func:`check_real` on each named field of the parameter object ``obj``, in order: finite and
    above ``lo`` (default > 0; ``lo_open=False``: >= ``lo``)."""
    for name in names:
        check_real(name, getattr(obj, name), lo=lo, lo_open=lo_open)


def check_counts(obj: object, *names: str) -> None:
    """:func:`check_int` on each named field of ``obj``, in order: an integer >= 1."""
    for name in names:
        check_int(name, getattr(obj, name), lo=1)


def describe_range(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    """The range as messages name it: "in [lo, hi)", ">= lo", "< hi" or "finite"."""
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {lo:g}"
    if hi is not None:
        return f"{'<' if hi_open else '<='} {hi:g}"
    return "finite"


@dataclass(frozen=True)
class Bound:
    """The valid range of one input, wherever it comes from: a flag (``flag``), a column of a points
    file or a field of a saved result (the input's name), a keyword of the Python API."""

    kind: str  # "int" or "real"
    lo: float | None
    hi: float | None
    flag: str = ""  # the command-line flag that sets it ("" where none does)
    lo_open: bool = False
    hi_open: bool = False

    @property
    def valid(self) -> str:
        """``an integer in [1, 64]``, ``a number in (0, 1]``: what the messages say."""
        if self.kind == "int":
            lo, hi = (None if x is None else int(x) for x in (self.lo, self.hi))
            if lo is not None and hi is not None:
                return f"an integer in [{lo}, {hi}]"
            return f"an integer {describe_range(lo, hi, False, False)}"
        return f"a number {describe_range(self.lo, self.hi, self.lo_open, self.hi_open)}"


def _read_bounds() -> dict[str, Bound]:
    """The table of ``data/catalog/bounds.toml``: each input's bound, and every name a family's pattern
    makes of its lists."""
    data = tomllib.loads((Path(__file__).parent / "data" / "catalog" / "bounds.toml").read_text("utf-8"))
    table = {name: Bound(**b) for name, b in data["inputs"].items()}
    for family in data["families"].values():
        lists = {key: v for key, v in family.items() if isinstance(v, list)}
        bound = Bound(**family["bound"])
        for values in product(*lists.values()):  # every name the pattern makes of the lists
            table[family["pattern"].format(**dict(zip(lists, values, strict=True)))] = bound
    return table


BOUNDS: Mapping[str, Bound] = OnFirstUse(_read_bounds)  # read on first use, once
"""Every bounded input of predict, by its name as the Python API, a points column and a saved result
spell it (``concurrency`` is ``--max-concurrency`` and the result's ``max_concurrency``), with the flag
that sets it: the data file ``data/catalog/bounds.toml`` (its header says why each range).  The flags'
argparse types (:func:`servesim.cli.args.bounded`), the points reader, the ``--compare`` reader and
the API's parameter objects read their ranges here, so one input has one range and one message
wherever it comes from."""


def check_bound(name: str, value: object, where: str = "", label: str = "") -> int | float:
    """Return ``value`` (an int or a float as :data:`BOUNDS` says) if it is within ``BOUNDS[name]``.

    A bad value raises :class:`ParameterError` naming ``label`` (default ``name``) where ``where`` is
    empty, else :class:`InputError` ``"WHERE: LABEL=VALUE is invalid: must be ..."``: ``where`` says
    where it came from (``FILE:LINE:COLUMN``, ``FILE``), ``label`` what it is called there (the column
    ``'tp'``, the field ``'max_concurrency'``).
    """
    b = BOUNDS[name]
    label = label or name
    try:
        if b.kind == "int":
            if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
                value = int(value)  # 16.0 in a JSON file is the integer 16
            return check_int(label, value, lo=None if b.lo is None else int(b.lo),
                             hi=None if b.hi is None else int(b.hi))
        return check_real(label, value, lo=b.lo, hi=b.hi, lo_open=b.lo_open, hi_open=b.hi_open)
    except ParameterError as exc:
        if not where:
            raise ParameterError(label, value, b.valid) from None
        raise InputError(f"{where}: {label} = {exc.value!r} is invalid: must be {b.valid}") from None
