"""One way out for every file the tool writes: checked first, written whole or not at all.

* :func:`check_file` / :func:`check_dir` validate a destination **before any
  work starts**: a missing or unwritable folder, a directory where a file is
  expected, a device or other non-regular file (``/dev/null``) are refused with
  one line naming the flag and the path (:class:`servesim._checks.InputError`).
* :func:`write_atomic` writes a temporary file in the destination's folder and
  renames it over the target, so readers see the old file or the whole new one;
  the file gets the mode a user expects (``0666`` minus the umask, e.g. 0644),
  not ``mkstemp``'s 0600.
* :func:`write_set` writes several files (a report: HTML, Markdown, figures) so
  that they appear together: every temporary file is written first, and only
  when all succeeded are they renamed into place; on failure none is.

Standard library only.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from servesim._checks import InputError, OutputError
from servesim._textfile import file_mode

__all__ = ["check_dir", "check_file", "file_mode", "write_atomic", "write_set"]


def _writable_dir(d: Path, flag: str, target: Path) -> None:
    if not d.exists():
        raise InputError(f"{flag}={str(target)!r}: folder {str(d)!r} does not exist")
    if not d.is_dir():
        raise InputError(f"{flag}={str(target)!r}: {str(d)!r} is not a folder")
    if not os.access(d, os.W_OK | os.X_OK):
        raise InputError(f"{flag}={str(target)!r}: no permission to write in folder {str(d)!r}")
    # A real probe: root passes os.access everywhere, yet /proc, /sys and read-only mounts take no file.
    try:
        fd, probe = tempfile.mkstemp(dir=d, prefix=f".{target.name[:40]}.", suffix=".probe")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"{flag}={str(target)!r}: cannot write in folder {str(d)!r}: "
                         f"{exc.strerror or exc}") from None


def check_file(path: str | Path, flag: str) -> Path:
    """A file the tool will write: its folder exists and is writable; it is not a folder or device."""
    p = Path(path)
    if str(p) in ("", "."):
        raise InputError(f"{flag}={str(path)!r}: expected a file name")
    if p.exists() or p.is_symlink():
        try:
            st = os.stat(p)
        except OSError as exc:
            raise InputError(f"{flag}={str(p)!r}: cannot use it: {exc.strerror or exc}") from None
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{flag}={str(p)!r} is a folder: expected a file name")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{flag}={str(p)!r} is not a regular file (a device or pipe): "
                             "expected a file name")
    _writable_dir(p.parent if str(p.parent) else Path("."), flag, p)
    return p


def check_dir(path: str | Path, flag: str) -> Path:
    """A folder the tool will write into: an existing writable folder, or one it can create."""
    p = Path(path)
    if p.exists():
        if not p.is_dir():
            raise InputError(f"{flag}={str(p)!r} exists and is not a folder")
        if not os.access(p, os.W_OK | os.X_OK):
            raise InputError(f"{flag}={str(p)!r}: no permission to write in it")
        return p
    parent = p.parent if str(p.parent) else Path(".")
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    _writable_dir(parent, flag, p)
    return p


def _temp(path: Path, data: bytes) -> str:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, file_mode())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def write_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename."""
    p = Path(path)
    tmp = _temp(p, data)
    try:
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return p


def write_set(folder: str | Path, files: Mapping[str, bytes]) -> dict[str, Path]:
    """Write every file of ``files`` (name -> bytes) into ``folder``, all or none."""
    d = Path(folder)
    temps: list[tuple[str, Path]] = []
    try:
        d.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            temps.append((_temp(d / name, data), d / name))
    except BaseException as exc:
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write into {str(d)!r}: {exc.strerror or exc} (no file of the set was "
                              "written)") from None
        raise
    for tmp, final in temps:
        os.replace(tmp, final)
    return {final.name: final for _, final in temps}
