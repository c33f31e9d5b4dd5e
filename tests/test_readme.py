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
