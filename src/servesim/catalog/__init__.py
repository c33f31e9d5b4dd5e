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

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib

__all__ = ["CatalogError", "load_builtin", "load_file"]


class CatalogError(ValueError):
    """A catalog file is missing, malformed or has an invalid entry."""


@cache
def load_builtin(name: str) -> dict[str, Any]:
    """Parse a TOML file shipped in ``servesim/catalog``."""
    # The files sit beside this module (package data); a plain path read avoids the
    # ~10 ms that importing importlib.resources costs at start-up.
    with (Path(__file__).parent / name).open("rb") as fh:
        return tomllib.load(fh)


def load_file(path: str | Path) -> dict[str, Any]:
    """Parse a user's TOML catalog file, with a clear error naming the file."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise CatalogError(f"catalog file {str(p)!r}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"catalog file {str(p)!r}: not valid TOML: {exc}") from exc
