"""Every example that a --help prints runs as written (from the repository root, on the shipped
examples/ inputs), with exit status 0; a download that the machine cannot make says so in one line."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from servesim.cli.main import EXAMPLES, build_parser, main

ROOT = Path(__file__).resolve().parents[2]
HEAVY = {"validate", "all", "report"}  # minutes of simulation at their defaults: run with small settings
CASES = [(name, ex) for name, exs in sorted(EXAMPLES.items()) for ex in exs]
CASES += [("servesim", ex.strip()) for ex in build_parser().epilog.splitlines()[1:] if "COMMAND" not in ex]


def _small(name: str, argv: list[str]) -> list[str]:
    """validate at a tenth of its default sizes (still enough for every row to pass: ~5 s)."""
    if name == "validate":
        extra = [] if "--requests" in argv else ["--requests", "100000"]
        return [*argv, *extra, "--serving-requests", "20000", "--cycles", "200000", "--no-crossover"]
    return argv


@pytest.mark.parametrize(("name", "example"), CASES, ids=[e for _, e in CASES])
def test_help_example_runs(name, example, tmp_path, monkeypatch, capsys):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(example)[1:]
    assert argv[0] in EXAMPLES or argv[0] in ("predict", "all")
    if name in HEAVY and argv[0] in HEAVY and "--preset" not in argv and "--model" not in argv:
        argv = _small(argv[0], argv)
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse
        rc = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    if argv[:2] == ["trace", "fetch"] and rc != 0:  # offline: one line naming the shipped excerpt
        assert len(err.strip().splitlines()) == 1 and "ships with servesim" in err
        return
    assert rc == 0, err
    assert out or list(tmp_path.iterdir())
