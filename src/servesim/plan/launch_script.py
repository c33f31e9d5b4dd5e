"""Launch and benchmark scripts split into their parts (program, arguments, environment, files).

Shared by :mod:`servesim.plan.launch` (which checks the flags of the scripts it writes against the
engines' own lists) and :mod:`servesim.plan.launch_parse` (which reads them back).  Text only:
nothing here knows an engine's flags.  Nothing here prints.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from servesim._checks import InputError

__all__ = ["Script", "read_yaml", "split_script"]

_PROGRAMS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("vllm", "bench", "serve"), "client.vllm"),
    (("vllm", "serve"), "vllm"),
    (("python", "-m", "sglang.launch_server"), "sglang"),
    (("python3", "-m", "sglang.launch_server"), "sglang"),
    (("python", "-m", "sglang.bench_serving"), "client.sglang"),
    (("python3", "-m", "sglang.bench_serving"), "client.sglang"),
    (("trtllm-serve",), "trtllm"),
    (("trtllm-serve", "serve"), "trtllm"),
    (("python3", "benchmarks/benchmark_serving.py"), "client.inferencemax"),
    (("python", "benchmarks/benchmark_serving.py"), "client.inferencemax"),
)
"""Command words -> the engine or client they start (the longest match wins)."""

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
        if program in ("vllm", "trtllm") and rest and not rest[0].startswith("-"):
            s.positional = rest.pop(0)
        s.args = rest
    return s


def _program(tokens: list[str]) -> tuple[str, list[str]]:
    best: tuple[int, str] = (0, "")
    for words, name in _PROGRAMS:
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
