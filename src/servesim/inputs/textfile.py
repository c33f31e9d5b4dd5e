"""One way to read a user's text file: bounded, decoded, and errors that say where.

* size: at most ``max_bytes`` (checked before reading: a 1 GB file is refused
  without being loaded);
* gzip (``.gz`` or the gzip magic number): decompressed up to the same bound; a
  truncated stream is an error naming the file;
* text: UTF-8 with or without a BOM; UTF-16 when it starts with a UTF-16 BOM;
  anything else is refused with the line and byte offset of the first bad byte.

Errors are :class:`servesim._checks.InputError`.  Standard library only.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from servesim._checks import InputError

__all__ = ["decode_text", "read_text"]


def read_text(path: str | Path, *, what: str = "file", max_bytes: int = 64 * 2**20) -> str:
    """The decoded text of ``path`` (see the module docstring)."""
    p = Path(path)
    try:
        if p.is_dir():
            raise InputError(f"{what} {p}: is a directory, expected a file")
        size = p.stat().st_size
        if size > max_bytes:
            raise InputError(f"{what} {p}: {size:,} bytes is too large: at most {max_bytes:,}")
        with open(p, "rb") as f:
            raw = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise InputError(f"{what} {p}: no such file") from None
    except PermissionError:
        raise InputError(f"{what} {p}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot read: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=__import__("io").BytesIO(raw)) as g:
                raw = g.read(max_bytes + 1)
        except (EOFError, OSError, zlib.error) as exc:
            raise InputError(f"{what} {p}: damaged or truncated gzip data ({exc})") from None
        if len(raw) > max_bytes:
            raise InputError(f"{what} {p}: decompresses to more than {max_bytes:,} bytes")
    return decode_text(raw, f"{what} {p}")


def decode_text(raw: bytes, where: str) -> str:
    """UTF-8 (BOM optional) or BOM-marked UTF-16; otherwise an error naming line and byte offset."""
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise InputError(f"{where}: invalid UTF-16 at byte {exc.start}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{where}: line {line}: byte {exc.start} (0x{raw[exc.start]:02x}) is not UTF-8; "
            "save the file as UTF-8 (or UTF-16 with a BOM)"
        ) from None
