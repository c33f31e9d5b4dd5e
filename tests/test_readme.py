"""The README's examples still print what the README shows."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.cli_helpers import ROOT, run_cli

README = (ROOT / "README.md").read_text()
# A ```console block: "$ command" on its first line, then the exact output (maybe none).
BLOCKS = re.findall(r"```console\n\$ ([^\n]+)\n(.*?)```", README, flags=re.S)


def test_readme_has_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize(("command", "expected"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_readme_example(command, expected):
    argv = shlex.split(command)
    assert argv[0] == "servesim"
    res = run_cli(*argv[1:])
    assert res.returncode == 0, res.stderr
    if expected:  # a block with no output shows only how to call the command
        assert res.stdout == expected


PYTHON = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_python_example_prints_its_comments():
    """Each ``expr  # value`` line of the README's Python block evaluates to the value shown."""
    from fractions import Fraction

    (block,) = PYTHON
    scope: dict[str, object] = {}
    checked = 0
    for line in block.splitlines():
        code, _, comment = line.partition("  #")
        if not code.strip():
            continue
        if not comment or "=" in code.split("(")[0]:
            exec(code, scope)
            continue
        got = eval(code, scope)
        shown = comment.split(":")[0].strip()
        if shown.startswith("'"):
            assert got == shown.strip("'"), line
        else:
            value = float(Fraction(shown))
            digits = len(shown.split(".")[1]) if "." in shown else 6
            assert got == pytest.approx(value, abs=0.5 * 10 ** -digits), line
        checked += 1
    assert checked == 5
