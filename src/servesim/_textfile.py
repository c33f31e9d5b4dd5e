"""One way to read a user's text file: bounded, decoded, and errors that say where.

Every file servesim reads (traces, metrics scrapes, calibration points and
files, catalogs, ``config.json``) comes through here:

* size: at most ``max_bytes`` (checked before reading: a 1 GB file is refused
  without being loaded), or, for the large files that are streamed a line at a
  time (:func:`iter_lines`, traces), at most ``max_line_bytes`` per line;
* gzip (the gzip magic number, whatever the suffix): decompressed up to the
  same bounds; a truncated or damaged stream is an error naming the file;
* text: UTF-8 with or without a BOM; UTF-16 when it starts with a UTF-16 BOM
  (Excel's "Unicode text"); anything else (Latin-1 or Windows-1252 exports,
  binary data) is refused with the line and byte offset of the first bad byte.

Structured text is parsed here too, so that its failures read the same way:
:func:`parse_json` (truncated, deeply nested, 5,000-digit numbers),
:func:`parse_toml` (binary or malformed TOML) and :func:`table_at` (a scalar or
a list where a table is expected).  :func:`parse_count` and
:func:`parse_number` turn a field into a number with explicit bounds: a token
count is an integer in [0, 10^9], never an int64 overflow, and a 5,000-digit
field is refused by its length before any conversion.

Errors are :class:`servesim._checks.InputError`, one line each.  Standard
library only.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import math
import re
import sys
import zlib
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

from servesim._checks import InputError, OutputError, describe_range

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib

__all__ = [
    "MAX_COUNT",
    "MAX_LINE_BYTES",
    "MAX_TEXT_BYTES",
    "decode_text",
    "iter_lines",
    "parse_count",
    "parse_json",
    "parse_number",
    "parse_toml",
    "path_kind",
    "read_text",
    "shown",
    "table_at",
]

MAX_TEXT_BYTES = 64 * 2**20
"""Default bound on a file read whole (64 MiB; streamed traces are bounded per line instead)."""

MAX_LINE_BYTES = 2**20
"""Longest line a streamed file may have (1 MiB): a real trace line is under 1 KiB."""

MAX_COUNT = 10**9
"""Largest token count accepted (a billion tokens: beyond any context window)."""

_MAX_DIGITS = 30
"""A numeric field longer than this is refused by its length, before any conversion."""

_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_INT_RE = re.compile(r"[+-]?[0-9]+")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def file_mode() -> int:
    """0666 minus the process umask (what ``open(..., 'w')`` would give)."""
    import os

    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def save_through_temp(path: str | Path, write: Callable[[str], object], what: str = "file") -> Path:
    """``write(tmp)`` a file beside ``path``, give it the user's usual mode and rename it over ``path``:
    the file appears whole or not at all.  A failed write (a full disk, a file-size limit) removes the
    temporary file and raises :class:`~servesim._checks.OutputError` naming ``path``."""
    import os
    import tempfile

    p = Path(path)
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(dir=p.parent if str(p.parent) else ".", prefix=f".{p.name}.",
                                   suffix=p.suffix)
        os.close(fd)
        write(tmp)
        os.chmod(tmp, file_mode())  # mkstemp makes 0600; the file gets what open() would give
        os.replace(tmp, p)
    except OSError as exc:
        raise OutputError(f"cannot write the {what} {str(p)!r}: {exc.strerror or exc} (nothing was written "
                          "there)") from None
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
    return p


def path_kind(text: str | Path) -> str:
    """``"file"``, ``"dir"`` or ``""`` (nothing there, or a name no file system takes: too long, a NUL
    byte): what a name that may or may not be a path names, without raising."""
    try:
        p = Path(text).expanduser()
        return "file" if p.is_file() else "dir" if p.is_dir() else ""
    except (OSError, ValueError):
        return ""


def _label(path: Path, what: str, label: str | None) -> str:
    if label is not None:
        return label
    return f"{what} {path}" if what else str(path)


def _human(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n:,} bytes"


def read_text(
    path: str | Path,
    *,
    what: str = "file",
    max_bytes: int = MAX_TEXT_BYTES,
    label: str | None = None,
) -> str:
    """The decoded text of ``path`` (see the module docstring).

    Errors start with ``label``, or ``"{what} {path}"`` (just the path when
    ``what`` is empty).
    """
    p = Path(path)
    where = _label(p, what, label)
    try:
        if p.is_dir():
            raise InputError(f"{where}: is a directory, expected a file")
        size = p.stat().st_size
        if size > max_bytes:
            raise InputError(f"{where}: too large: {size:,} bytes, larger than {_human(max_bytes)}")
        with open(p, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"{where}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:  # grew while being read, or a special file
        raise InputError(f"{where}: too large: larger than {_human(max_bytes)}")
    if raw[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as g:
                raw = g.read(max_bytes + 1)
        except (EOFError, OSError, zlib.error) as exc:
            raise InputError(_gzip_error(where, exc)) from None
        if len(raw) > max_bytes:
            raise InputError(f"{where}: too large: decompresses to more than {_human(max_bytes)}")
    return decode_text(raw, where)


def decode_text(raw: bytes, where: str) -> str:
    """UTF-8 (BOM optional) or BOM-marked UTF-16; otherwise an error naming line and byte offset."""
    if raw[:2] in _UTF16_BOMS:
        try:
            text = raw.decode("utf-16", errors="surrogatepass")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].decode("utf-16", errors="replace").count("\n") + 1
            raise InputError(
                f"{where}: line {line}: byte {exc.start}: invalid UTF-16 ({exc.reason})"
            ) from None
        bad = _LONE_SURROGATE.search(text)
        if bad:
            line = text.count("\n", 0, bad.start()) + 1
            raise InputError(f"{where}: line {line}: invalid UTF-16 (an unpaired surrogate)")
        return text
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(_not_utf8(where, line, exc.start, raw[exc.start])) from None


def _not_utf8(where: str, line: int, offset: int, byte: int, of: str = "") -> str:
    return (
        f"{where}: line {line}: byte {offset}{of} (0x{byte:02x}) is not UTF-8 text (a Latin-1 or "
        "Excel export?); save the file as UTF-8 (or UTF-16 with a BOM)"
    )


# ---------------------------------------------------------------------------
# Streaming


def iter_lines(
    path: str | Path,
    *,
    what: str = "",
    max_line_bytes: int = MAX_LINE_BYTES,
    label: str | None = None,
) -> Generator[str, None, None]:
    """Yield the decoded lines of ``path`` one at a time, each with its line ending.

    For files too large to read whole (traces): memory is bounded by
    ``max_line_bytes``, and the whole file is never held.  Gzip, BOMs and
    UTF-16 are handled as by :func:`read_text`; a line longer than
    ``max_line_bytes``, an undecodable byte (line and byte offset, counted in
    the decompressed data for gzip) or a truncated gzip stream raises
    :class:`InputError`.  Use it in a ``for`` loop, or close it (``with
    contextlib.closing(...)``) when stopping early.
    """
    p = Path(path)
    where = _label(p, what, label)
    try:
        if p.is_dir():
            raise InputError(f"{where}: is a directory, expected a file")
        fh = open(p, "rb")  # closed by the with below
    except OSError as exc:
        raise InputError(f"{where}: cannot read: {exc.strerror or exc}") from None
    with fh:
        stream: IO[bytes] = fh
        gz = False
        try:
            if fh.peek(2)[:2] == b"\x1f\x8b":
                gz = True
                stream = io.BufferedReader(gzip.GzipFile(fileobj=fh, mode="rb"), 1 << 16)
            head = stream.peek(4)[:4] if isinstance(stream, io.BufferedReader) else b""
        except (EOFError, OSError, zlib.error) as exc:
            raise InputError(_gzip_error(where, exc)) from None
        if head[:2] in _UTF16_BOMS:
            yield from _utf16_lines(stream, where, max_line_bytes, gz)
        else:
            yield from _utf8_lines(stream, where, max_line_bytes, gz)


def _gzip_error(where: str, exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return f"{where}: truncated gzip data: the file ends before the compressed stream does ({exc})"
    return f"{where}: damaged gzip data ({exc})"


def _too_long(where: str, line: int, limit: int) -> str:
    return (
        f"{where}: line {line}: longer than {_human(limit)}: not a line of text (a binary file, or "
        "a file without line breaks?)"
    )


def _utf8_lines(stream: IO[bytes], where: str, limit: int, gz: bool) -> Iterator[str]:
    number = 0
    offset = 0
    in_gz = " of the decompressed data" if gz else ""
    while True:
        try:
            raw = stream.readline(limit + 1)
        except (EOFError, OSError, zlib.error) as exc:
            raise InputError(_gzip_error(where, exc)) from None
        if not raw:
            return
        number += 1
        if len(raw) > limit:
            raise InputError(_too_long(where, number, limit))
        start = 3 if number == 1 and raw.startswith(codecs.BOM_UTF8) else 0
        try:
            text = raw[start:].decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = start + exc.start
            raise InputError(_not_utf8(where, number, offset + bad, raw[bad], in_gz)) from None
        offset += len(raw)
        yield text


def _utf16_lines(stream: IO[bytes], where: str, limit: int, gz: bool) -> Iterator[str]:
    text_io = io.TextIOWrapper(stream, encoding="utf-16", errors="surrogatepass", newline="")
    chars = max(1, limit // 2)
    number = 0
    while True:
        try:
            line = text_io.readline(chars + 1)
        except (EOFError, OSError, zlib.error) as exc:
            raise InputError(_gzip_error(where, exc)) from None
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{where}: line {number + 1}: invalid UTF-16 ({exc.reason})"
            ) from None
        if not line:
            return
        number += 1
        if len(line) > chars:
            raise InputError(_too_long(where, number, limit))
        if _LONE_SURROGATE.search(line):
            raise InputError(f"{where}: line {number}: invalid UTF-16 (an unpaired surrogate)")
        yield line


# ---------------------------------------------------------------------------
# Structured text


def shown(raw: object, width: int = 40) -> str:
    """``repr(raw)``, cut to about ``width`` characters with the full length said."""
    text = repr(raw)
    if len(text) <= width:
        return text
    n = len(raw) if isinstance(raw, str) else len(str(raw))
    return f"{text[:width]}... ({n:,} characters)"


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(
    text: str, where: str, *, constants: bool = True, line: int | None = None, line_in_prefix: bool = True
) -> Any:
    """``json.loads`` with one-line errors naming ``where`` and the line.

    ``line`` is the line of the file that ``text`` is (JSON lines), else the
    line comes from the parser: ``where:LINE: ...``, or ``where: ... (line
    LINE, column C)`` when not ``line_in_prefix``.  ``constants=False`` refuses
    ``NaN``/``Infinity`` (not JSON).  Nesting too deep for the parser and
    integers with more digits than Python converts (4,300) are refused with a
    message saying so.
    """
    at = where if line is None else f"{where}:{line}"
    try:
        if constants:
            return json.loads(text)
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        if line is None and not line_in_prefix:
            raise InputError(
                f"{at}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from None
        if line is None:
            at, cause = f"{where}:{exc.lineno}", "truncated?"
        else:
            cause = "truncated line?"
        raise InputError(f"{at}: not valid JSON ({cause}): {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise InputError(f"{at}: not valid JSON: nested too deeply") from None
    except ValueError as exc:
        if "digits" in str(exc) and "limit" in str(exc):
            limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
            raise InputError(
                f"{at}: not valid JSON: a number with more than {limit:,} digits "
                "(no real value has that many)"
            ) from None
        raise InputError(f"{at}: not valid JSON: {exc}") from None


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """``tomllib.loads`` with a one-line error naming ``where``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML: {exc}") from None
    except RecursionError:
        raise InputError(f"{where}: not valid TOML: nested too deeply") from None


def table_at(doc: object, key: str, where: str, *, meaning: str = "") -> dict[str, Any]:
    """``doc[key]``, which must be a table: else an error naming the file and the key."""
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected a table, got {_kind(doc)} {shown(doc)}")
    if key not in doc:
        raise InputError(f"{where}: missing table [{key}]{f' ({meaning})' if meaning else ''}")
    value = doc[key]
    if not isinstance(value, dict):
        raise InputError(
            f"{where}: {key!r} must be a table ([{key}]{f' with {meaning}' if meaning else ''}), "
            f"got {_kind(value)} {shown(value)}"
        )
    return value


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def parse_count(raw: object, where: str, name: str, *, hi: int = MAX_COUNT) -> int:
    """A token count: an integer in [0, ``hi``] (integral floats such as ``12.0`` accepted).

    Strings are checked by length and digits before converting, so a
    5,000-digit field is refused without Python's digit-limit ValueError.
    """
    value: int
    if isinstance(raw, bool):
        raise InputError(f"{where}: {name}={raw!r} is not an integer token count")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, float) and math.isfinite(raw) and raw.is_integer():
        if raw > hi:
            raise InputError(f"{where}: {name}={raw!r} is too large: a token count must be <= {hi:,}")
        value = int(raw)
    elif isinstance(raw, str):
        text = raw.strip()
        if not _INT_RE.fullmatch(text):
            raise InputError(f"{where}: {name}={shown(raw)} is not an integer token count")
        if len(text.lstrip("+-").lstrip("0")) > _MAX_DIGITS:
            sign = "negative" if text.startswith("-") else "too large"
            raise InputError(
                f"{where}: {name}={shown(raw)} is {sign}: a token count must be an integer in [0, {hi:,}]"
            )
        value = int(text)
    else:
        raise InputError(f"{where}: {name}={shown(raw)} is not an integer token count")
    if value < 0:
        raise InputError(f"{where}: {name}={shown(value)} is negative: a token count must be >= 0")
    if value > hi:
        raise InputError(
            f"{where}: {name}={shown(value)} is too large: a token count must be an integer in [0, {hi:,}]"
        )
    return value


def parse_number(
    raw: object,
    where: str,
    name: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
) -> float:
    """A finite real number within [``lo``, ``hi``] (``lo`` exclusive when ``lo_open``)."""
    if isinstance(raw, bool):
        raise InputError(f"{where}: {name}={raw!r} is not a number")
    if isinstance(raw, str) and len(raw.strip()) > 64:
        raise InputError(f"{where}: {name}={shown(raw)} is not a number (too long)")
    bounds = _bounds(lo, hi, lo_open)
    try:
        x = float(raw.strip()) if isinstance(raw, str) else float(raw)  # type: ignore[arg-type]
    except OverflowError:  # an int beyond float range
        raise InputError(
            f"{where}: {name}={shown(raw)} is invalid: must be a finite number{bounds}"
        ) from None
    except (TypeError, ValueError):
        raise InputError(f"{where}: {name}={shown(raw)} is not a number") from None
    if not math.isfinite(x):
        raise InputError(f"{where}: {name}={shown(raw)} is invalid: must be a finite number{bounds}")
    if (lo is not None and (x < lo or (lo_open and x == lo))) or (hi is not None and x > hi):
        raise InputError(f"{where}: {name}={shown(raw)} is invalid: must be a finite number{bounds}")
    return x


def _bounds(lo: float | None, hi: float | None, lo_open: bool) -> str:
    """The range as a message's tail (" in [lo, hi]", the upper end closed), "" with neither end."""
    return "" if lo is None and hi is None else " " + describe_range(lo, hi, lo_open, False)
