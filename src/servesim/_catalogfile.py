"""Shipped data files (TOML): speculative presets, workloads, links, models.

Data lives in data files, not code, so each value can carry the reasoning
behind it.  :func:`load_builtin` reads one shipped file; :func:`load_file`
reads a user's file with the same checks.  Standard library only (``tomllib``;
the ``tomli`` backport on Python 3.10).
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path
from typing import Any

from servesim._checks import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib

__all__ = ["MAX_CATALOG_BYTES", "CatalogError", "engines_file", "load_builtin", "load_file", "read_toml"]


class CatalogError(ValueError):
    """A catalog file is missing, malformed or has an invalid entry."""


@cache
def load_builtin(name: str) -> dict[str, Any]:
    """Parse a TOML file shipped in ``servesim/data/catalog``."""
    # The files are package data under data/catalog; a plain path read avoids the
    # ~10 ms that importing importlib.resources costs at start-up.
    return read_toml(Path(__file__).parent / "data" / "catalog" / name)


@cache
def engines_file() -> dict[str, Any]:
    """The serving engines' data file, ``hardware/data/engines.toml``, parsed once: the profiles
    :mod:`servesim.hardware.engines` reads and the metrics :mod:`servesim.inputs.telemetry` reads
    (a layer that may not import ``hardware`` reads it here)."""
    return read_toml(Path(__file__).parent / "hardware" / "data" / "engines.toml")


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML data file shipped inside the package (the one place that picks ``tomllib`` or,
    on Python 3.10, ``tomli``).  Shipped files are trusted and tested; a user's file goes through
    :func:`load_file` or :func:`servesim._textfile.parse_toml`, which bound and explain."""
    with path.open("rb") as fh:
        return tomllib.load(fh)


MAX_CATALOG_BYTES = 16 * 2**20
"""A user's catalog file larger than this (16 MiB) is refused unread: real ones are a few KiB."""


def load_file(path: str | Path) -> dict[str, Any]:
    """Parse a user's TOML catalog file, with a one-line error naming the file.

    Read through :func:`servesim._textfile.read_text` (bounded, UTF-8
    with or without a BOM or BOM-marked UTF-16; a binary file is refused
    naming the line and byte), then parsed by ``tomllib``.
    """
    from servesim._textfile import parse_toml, read_text  # lazy: the lab reads shipped TOML without it

    where = f"catalog file {str(path)!r}"
    try:
        return parse_toml(read_text(path, max_bytes=MAX_CATALOG_BYTES, label=where), where)
    except InputError as exc:
        raise CatalogError(str(exc)) from None
