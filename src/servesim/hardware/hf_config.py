"""Reading a Hugging Face ``config.json``: the one reader of its fields.

:func:`load_json` reads the file (at most :data:`MAX_CONFIG_BYTES`, a JSON object or an error
naming the file); :class:`Fields` gives typed access to its fields, each error naming the file and
the field.  The model config reader (:func:`servesim.hardware.model_config.read_config`, every
family) and the EAGLE head reader (:mod:`servesim.hardware.speculation`) all read through them.

Standard library only; nothing prints.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from servesim._checks import InputError
from servesim._textfile import parse_json, path_kind, read_text, shown

__all__ = ["MAX_CONFIG_BYTES", "MAX_DIM", "QUOTED", "Fields", "load_json"]

MAX_CONFIG_BYTES = 1 << 20
"""A ``config.json`` larger than this (1 MiB) is refused unread: real ones are a few KiB."""

QUOTED = 80
"""How much of a bad field's ``repr`` an error quotes (``_textfile.shown``'s width): a longer one is
cut there, its length said."""

MAX_DIM = 1 << 24
"""The largest integer a ``config.json`` shape field may hold (16,777,216: beyond any real model)."""

_MAX_LIST = 4096
_T = TypeVar("_T", bool, str)


def load_json(path: Path) -> tuple[str, dict[str, Any]]:
    """The file's name as errors cite it and its JSON object."""
    where = str(path)
    if path_kind(path) != "file":
        what = "is not a regular file" if path_kind(path) == "dir" else "no such file (or a name no file " \
            "system takes)"
        raise InputError(f"{where}: {what} (a model is a catalog name, a Hugging Face id or the path "
                         "of a config.json)")
    text = read_text(path, what="", max_bytes=MAX_CONFIG_BYTES)
    data = parse_json(text, where, constants=False, line_in_prefix=False)
    if not isinstance(data, dict):
        raise InputError(f"{where}: must be a JSON object (a Hugging Face config.json), "
                         f"got {type(data).__name__}")
    return where, data


class Fields:
    """Typed access to one JSON object of a config, errors naming the file and the field."""

    def __init__(self, where: str, data: Mapping[str, Any], prefix: str = "") -> None:
        self.where, self.data, self.prefix = where, data, prefix

    def name(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def bad(self, key: str, value: object, must: str) -> InputError:
        return InputError(f"{self.where}: field {self.name(key)!r} = {shown(value, QUOTED)} is invalid: "
                          f"must be {must}")

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def int_(self, key: str, meaning: str, default: int | None = None, lo: int = 1) -> int:
        value = self.data.get(key)
        if value is None:
            if default is None:
                raise InputError(f"{self.where}: missing required field {self.name(key)!r} ({meaning})")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= MAX_DIM:
            raise self.bad(key, value, f"an integer in [{lo}, {MAX_DIM}] ({meaning})")
        return value

    def _typed(self, key: str, default: _T, must: str) -> _T:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, type(default)):
            raise self.bad(key, value, must)
        return value

    def bool_(self, key: str, default: bool) -> bool:
        return self._typed(key, default, "true or false")

    def str_(self, key: str, default: str = "") -> str:
        return self._typed(key, default, "a string")

    def list_(self, key: str, kind: type, meaning: str, length: int | None = None) -> list[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        what = f"a list of {meaning}" + ("" if length is None else f", {length} of them")
        if (not isinstance(value, list) or len(value) > _MAX_LIST
                or any(isinstance(v, bool) and kind is not bool for v in value)
                or not all(isinstance(v, kind) for v in value)
                or (length is not None and len(value) != length)):
            raise self.bad(key, value, what)
        return value

    def dict_(self, key: str) -> dict[str, Any] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.bad(key, value, "a JSON object")
        return value

    def child(self, key: str) -> Fields:
        sub = self.dict_(key)
        if sub is None:
            raise InputError(f"{self.where}: missing required field {self.name(key)!r} "
                             "(the text model's config)")
        return Fields(self.where, sub, f"{self.name(key)}.")
