"""Launch and benchmark scripts split into their parts (program, arguments, environment, files).

Shared by :mod:`servesim.plan.launch` (which checks the flags of the scripts it writes against the
engines' own lists) and :mod:`servesim.plan.launch_parse` (which reads them back).  Text only: the
command words that start each engine and client, and whether an engine takes its checkpoint as a
positional argument, come from ``data/engine_launch.toml`` (:func:`launch_data`, which the writer
and the reader read too).  Nothing here prints.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from servesim._catalogfile import read_toml
from servesim._checks import InputError

__all__ = ["Script", "launch_data", "read_yaml", "split_script"]

_DATA = Path(__file__).parent / "data" / "engine_launch.toml"


@cache
def launch_data() -> dict[str, Any]:
    """How each engine's launch and each client's command are written and read back
    (``data/engine_launch.toml``: ``engine.NAME`` and ``client.NAME`` tables), read once."""
    return read_toml(_DATA)


def _programs() -> tuple[tuple[tuple[str, ...], str], ...]:
    """Command words -> the engine (its key) or client (``client.NAME``) they start (read each time:
    an entry added to the data, as a test's toy engine, is seen)."""
    data = launch_data()
    return tuple(
        (tuple(words), prefix + name)
        for prefix, table in (("", data["engine"]), ("client.", data["client"]))
        for name, entry in table.items()
        for words in entry["commands"]
    )


_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_REQUIRED = re.compile(r'^:\s+"?\$\{([A-Za-z_][A-Za-z0-9_]*):\?')
_HEREDOC = re.compile(r"^cat\s+>\s*(\S+)\s+<<\s*'?(\w+)'?\s*$")


@dataclass
class Script:
    """A launch or benchmark script split into its parts: the program (an engine name, or
    ``client.NAME``), its positional argument, its arguments (``$VARIABLES`` of the script
    substituted), its environment, the files its here-documents write, the ``# servesim predict``
    line's arguments and the variables the user must set."""

    program: str = ""
    positional: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    servesim: list[str] = field(default_factory=list)
    unset: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> list[str]:
        return self.args

    def options(self) -> dict[str, str | None]:
        """``--flag value`` pairs (None for a flag without a value), in order, the last one winning."""
        return _pairs(self.args)


def _pairs(tokens: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("-"):
            if "=" in tok and tok.startswith("--"):
                k, v = tok.split("=", 1)
                out[k] = v
            elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                out[tok] = tokens[i + 1]
                i += 1
            else:
                out[tok] = None
        i += 1
    return out


def _logical_lines(text: str) -> list[tuple[str, list[str]]]:
    """(line, here-document body) pairs: continuation lines joined, a here-document's body kept."""
    raw = text.replace("\r\n", "\n").split("\n")
    out: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(raw):
        line = raw[i]
        i += 1
        m = _HEREDOC.match(line.strip())
        if m:
            body = []
            while i < len(raw) and raw[i].strip() != m.group(2):
                body.append(raw[i])
                i += 1
            i += 1
            out.append((line.strip(), body))
            continue
        while line.rstrip().endswith("\\") and i < len(raw):
            line = line.rstrip()[:-1] + " " + raw[i].strip()
            i += 1
        if line.strip():
            out.append((line.strip(), []))
    return out


@lru_cache(maxsize=512)  # a command is read several times (flag checks, manifests): its text is its key
def split_script(text: str) -> Script:
    """The parts of a script as :mod:`servesim.plan.launch` writes it (or as a user types one line);
    shared between calls with the same text: read it, do not change it."""
    s = Script()
    variables: dict[str, str] = {}
    for line, body in _logical_lines(text):
        if body or _HEREDOC.match(line):
            m = _HEREDOC.match(line)
            assert m is not None
            s.files[m.group(1)] = _substitute("\n".join(body) + "\n", variables)
            continue
        if line.startswith("#"):
            if line.startswith("# servesim predict"):
                s.servesim = shlex.split(line[len("# servesim predict") :])
            continue
        m = _REQUIRED.match(line)
        if m:
            s.unset.append(m.group(1))
            continue
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError as exc:
            raise InputError(f"cannot read the command {line[:80]!r}: {exc}") from None
        env: dict[str, str] = {}
        while tokens and _ASSIGN.match(tokens[0]):
            name, value = tokens.pop(0).split("=", 1)
            env[name] = value
        if not tokens:
            variables.update(env)
            continue
        program, rest = _program(tokens)
        if not program:
            continue
        s.program, s.env = program, env
        rest = [_substitute(t, variables) for t in rest]
        if _positional(program) and rest and not rest[0].startswith("-"):
            s.positional = rest.pop(0)
        s.args = rest
    return s


def _positional(program: str) -> bool:
    """Whether the engine ``program`` takes the checkpoint as its positional argument."""
    entry = launch_data()["engine"].get(program, {})
    return any(item.get("positional") for item in entry.get("settings", ()))


def _program(tokens: list[str]) -> tuple[str, list[str]]:
    """The engine or client the command words start (the longest match wins), and the rest."""
    best: tuple[int, str] = (0, "")
    for words, name in _programs():
        if tuple(tokens[: len(words)]) == words and len(words) > best[0]:
            best = (len(words), name)
    return best[1], tokens[best[0] :]


def _substitute(text: str, variables: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return variables.get(name, m.group(0))

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", one, text)


def read_yaml(text: str) -> dict[str, Any]:
    """The two-level block YAML :mod:`servesim.plan.launch` writes (values as JSON scalars)."""
    out: dict[str, Any] = {}
    parent: dict[str, Any] | None = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, value = line.strip().partition(":")
        value = value.strip()
        if not line.startswith(" "):
            if value:
                out[key] = _scalar(value)
                parent = None
            else:
                parent = out.setdefault(key, {})
        elif parent is not None:
            parent[key] = _scalar(value)
    return out


def _scalar(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
