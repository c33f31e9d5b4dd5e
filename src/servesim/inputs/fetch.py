"""Public request traces: the excerpts that ship with servesim, and downloads of the full files.

Excerpts (``src/servesim/data/traces/``, licences and a README alongside) are
the first 1,000 requests of four public traces, byte-for-byte prefixes of
the upstream files; :func:`excerpt_path` gives the installed path of one, so
tests, examples and users work without the network.

:func:`fetch_trace` downloads a full trace from its public source:

* the URL is pinned to an upstream commit where the file lives in git (Azure,
  Mooncake), and the download must match the SHA-256 and size recorded in
  ``data/traces/sources.toml``;
* the bytes go to a temporary file in the destination's folder, which is
  checked (not empty, the expected format by :func:`servesim.inputs.traces.detect_format`,
  its first requests parse) and only then renamed onto the destination, so a
  failed or interrupted download leaves nothing behind;
* an existing destination is kept unless ``force``;
* no network (DNS failure, refused connection, timeout): one
  :class:`~servesim._checks.InputError` naming the URL, saying the machine
  seems offline and pointing at the shipped excerpt.

Standard library only (urllib is imported when a download starts).
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import os
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from servesim._catalogfile import read_toml
from servesim._checks import InputError
from servesim._version import __version__
from servesim.inputs.traces import detect_format, iter_requests

__all__ = [
    "EXCERPTS",
    "EXCERPT_DIR",
    "SOURCES",
    "FetchResult",
    "TraceSource",
    "excerpt_path",
    "fetch_trace",
]

EXCERPT_DIR = Path(__file__).resolve().parents[1] / "data" / "traces"
"""Where the excerpts are installed (``servesim/data/traces``)."""


@dataclass(frozen=True)
class TraceSource:
    """One public trace: where it is, what it is, and its shipped excerpt (if any): a
    ``[source.NAME]`` of ``data/traces/sources.toml`` (whose header says what each field means)."""

    name: str
    title: str
    format: str
    url: str
    filename: str
    license: str
    sha256: str | None = None
    size: int | None = None
    excerpt: str | None = None
    excerpt_requests: int = 0


SOURCES: dict[str, TraceSource] = {
    name: TraceSource(name, **entry)
    for name, entry in read_toml(EXCERPT_DIR / "sources.toml")["source"].items()
}
"""The traces ``servesim trace fetch`` knows, by name."""

EXCERPTS: dict[str, Path] = {
    s.name: EXCERPT_DIR / s.excerpt for s in SOURCES.values() if s.excerpt is not None
}
"""Installed path of each shipped excerpt, by trace name."""

_CHECK_REQUESTS = 100  # requests parsed from the start of a download before it is accepted
_CHUNK = 1 << 16


def _source(name: str) -> TraceSource:
    try:
        return SOURCES[name]
    except KeyError:
        raise InputError(f"unknown trace {name!r}: must be one of {', '.join(SOURCES)}") from None


def excerpt_path(name: str) -> Path:
    """The installed path of the shipped excerpt of trace ``name`` (see :data:`EXCERPTS`)."""
    src = _source(name)
    if src.excerpt is None:
        have = ", ".join(EXCERPTS)
        raise InputError(f"no excerpt of {name} ships with servesim (excerpts: {have})")
    return EXCERPT_DIR / src.excerpt


@dataclass(frozen=True)
class FetchResult:
    """What :func:`fetch_trace` wrote: the file, its size and checksum, and what was checked."""

    name: str
    url: str
    path: str
    bytes: int
    sha256: str
    sha256_pinned: bool
    format: str
    requests_checked: int
    compressed: bool
    license: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _destination(src: TraceSource, out: str | Path | None, force: bool) -> Path:
    dest = Path(src.filename) if out is None else Path(out)
    if dest.is_dir():
        dest = dest / src.filename
    folder = dest.parent
    if not folder.is_dir():
        raise InputError(f"{dest}: folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{dest}: no permission to write in folder {str(folder)!r}")
    if (dest.exists() or dest.is_symlink()) and not force:
        raise InputError(f"{dest}: already exists; pass --force to replace it")
    return dest


def _offline_hint(src: TraceSource) -> str:
    if src.excerpt is None:
        return f"no excerpt of {src.name} ships with servesim"
    return f"a {src.excerpt_requests:,}-request excerpt ships with servesim: {EXCERPT_DIR / src.excerpt}"


def _open_url(src: TraceSource, url: str, timeout_s: float) -> Any:
    """``urlopen`` with every failure turned into one InputError line."""
    import urllib.error
    import urllib.parse
    import urllib.request

    req = urllib.request.Request(url, headers={"User-Agent": f"servesim/{__version__} (trace fetch)"})
    scheme = urllib.parse.urlsplit(url).scheme
    try:
        return urllib.request.urlopen(req, timeout=timeout_s)
    except urllib.error.HTTPError as exc:
        raise InputError(f"cannot download {src.name} from {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:  # OSError: TimeoutError, resets
        reason: object = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError):
            reason = f"no answer within {timeout_s:g} s"
        if scheme in ("http", "https"):
            host = urllib.parse.urlsplit(url).hostname or url
            raise InputError(
                f"cannot download {src.name} from {url}: {reason} (this machine seems to be offline, "
                f"or cannot reach {host}); {_offline_hint(src)}"
            ) from None
        raise InputError(f"cannot read {src.name} from {url}: {reason}") from None


def _copy(src: TraceSource, url: str, resp: IO[bytes], write: Callable[[bytes], object], max_bytes: int,
          progress: Callable[[int, int | None], None] | None) -> tuple[int, str]:
    """Stream the response into ``write``; return (bytes, sha256 hex) of the downloaded bytes."""
    import http.client

    digest = hashlib.sha256()
    total = 0
    length = resp.headers.get("Content-Length") if hasattr(resp, "headers") else None
    expected = int(length) if length and str(length).isdigit() else None
    while True:
        try:
            chunk = resp.read(_CHUNK)
        except (OSError, http.client.HTTPException) as exc:  # reset, timeout, short read mid-transfer
            raise InputError(
                f"download of {src.name} from {url} broke off after {total:,} bytes: {exc}; "
                "nothing was written"
            ) from None
        if not chunk:
            break
        total += len(chunk)
        if total > max_bytes:
            raise InputError(f"{url}: more than {max_bytes:,} bytes: refused (is this the trace?)")
        digest.update(chunk)
        write(chunk)
        if progress is not None:
            progress(total, expected)
    if expected is not None and total != expected:
        raise InputError(
            f"download of {src.name} from {url} is truncated: {total:,} of {expected:,} bytes; "
            "nothing was written"
        )
    return total, digest.hexdigest()


def _check_trace(src: TraceSource, url: str, tmp: Path) -> int:
    """The download is the expected format and its first requests parse; returns how many were read."""
    try:
        fmt = detect_format(tmp)
        if fmt != src.format:
            raise InputError(f"its first line is that of the {fmt} format")
        return sum(1 for _ in itertools.islice(iter_requests(tmp, fmt), _CHECK_REQUESTS))
    except InputError as exc:
        msg = str(exc).replace(str(tmp), src.filename)
        raise InputError(
            f"{url}: the download does not read as a trace in the {src.format} format: {msg}; "
            "nothing was written"
        ) from None


def fetch_trace(
    name: str,
    out: str | Path | None = None,
    *,
    force: bool = False,
    timeout_s: float = 30.0,
    url: str | None = None,
    max_bytes: int = 2**30,
    progress: Callable[[int, int | None], None] | None = None,
) -> FetchResult:
    """Download the full trace ``name`` (a key of :data:`SOURCES`) to ``out``.

    ``out`` defaults to the upstream file name in the current folder; an
    existing folder gets that name inside it; a name ending in ``.gz`` is
    written gzip-compressed (servesim reads ``.gz`` traces).  ``url``
    replaces the source's URL (a mirror; the pinned checksum still applies).
    ``timeout_s`` bounds each network wait.  ``progress(bytes, total or
    None)`` is called after each chunk.  Every failure raises
    :class:`InputError` and leaves ``out`` as it was.
    """
    src = _source(name)
    dest = _destination(src, out, force)
    where = url or src.url
    compress = dest.suffix == ".gz"
    tmp = dest.parent / f".{dest.name}.{secrets.token_hex(4)}.part{'.gz' if compress else ''}"
    with _open_url(src, where, timeout_s) as resp:
        try:
            with open(tmp, "xb") as raw:
                if compress:
                    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
                        size, digest = _copy(src, where, resp, gz.write, max_bytes, progress)
                else:
                    size, digest = _copy(src, where, resp, raw.write, max_bytes, progress)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise InputError(f"{dest}: cannot write: {exc.strerror or exc}") from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    try:
        if size == 0:
            raise InputError(f"{where}: the download is empty; nothing was written")
        if src.sha256 is not None and digest != src.sha256:
            raise InputError(
                f"{where}: the download ({size:,} bytes, sha256 {digest[:16]}...) is not the pinned file "
                f"({src.size:,} bytes, sha256 {src.sha256[:16]}...); nothing was written"
            )
        checked = _check_trace(src, where, tmp)
        if (dest.exists() or dest.is_symlink()) and not force:  # appeared while downloading
            raise InputError(f"{dest}: already exists; pass --force to replace it")
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return FetchResult(
        name=src.name, url=where, path=str(dest), bytes=size, sha256=digest,
        sha256_pinned=src.sha256 is not None, format=src.format, requests_checked=checked,
        compressed=compress, license=src.license,
    )
