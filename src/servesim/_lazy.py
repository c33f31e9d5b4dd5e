"""A table read from a data file on its first lookup, once (issue 47 item 7: importing a module parses no
data file it does not need yet)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from functools import cached_property
from typing import TypeVar

__all__ = ["MutableOnFirstUse", "OnFirstUse"]

K = TypeVar("K")
V = TypeVar("V")


class OnFirstUse(Mapping[K, V]):
    """A mapping whose table ``load()`` builds on the first lookup; later lookups read that table."""

    def __init__(self, load: Callable[[], dict[K, V]]) -> None:
        self._load = load

    @cached_property
    def _table(self) -> dict[K, V]:
        return self._load()

    def __getitem__(self, key: K) -> V:
        return self._table[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


class MutableOnFirstUse(OnFirstUse[K, V], MutableMapping[K, V]):
    """:class:`OnFirstUse` that takes entries beside those it loads (a test's own, for instance)."""

    def __setitem__(self, key: K, value: V) -> None:
        self._table[key] = value

    def __delitem__(self, key: K) -> None:
        del self._table[key]
