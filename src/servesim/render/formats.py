"""JSON and CSV renderings of command results (deterministic bytes)."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["flatten", "to_csv", "to_json", "wrap_long_lines"]


def _clean(x: object) -> object:
    """Replace non-finite floats (not valid JSON) by None, recursively."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, Mapping):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def to_json(data: object) -> str:
    """Indented JSON with keys in insertion order; inf/nan become null."""
    return json.dumps(_clean(data), indent=2, allow_nan=False) + "\n"


def flatten(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts to one level with ``outer_inner`` keys."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}_"))
        else:
            out[name] = value
    return out


def to_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    """Rows (nested dicts allowed) as CSV; the header is the union of keys in order."""
    flat = [flatten(r) for r in rows]
    header: dict[str, None] = {}
    for r in flat:
        header.update(dict.fromkeys(r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(header), lineterminator="\n")
    writer.writeheader()
    for r in flat:
        writer.writerow({k: _csv_value(v) for k, v in r.items()})
    return buf.getvalue()


def _csv_value(v: object) -> object:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if not math.isfinite(v) else repr(v)
    return v


def wrap_long_lines(text: str, width: int, *, break_long_words: bool) -> str:
    """``text`` with each line longer than ``width`` wrapped at its words, the continuation indented
    two spaces more than the line (a word longer than the width is cut only with
    ``break_long_words``); shorter lines as they are."""
    import textwrap

    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(line.strip(), width, initial_indent=lead, subsequent_indent=lead + "  ",
                             break_long_words=break_long_words, break_on_hyphens=False) or [line]
    return "\n".join(out)
