"""Re-run every ```console example of README.md and write its current output back.

Run after an intended change to an output, then review ``git diff README.md``;
tests/test_readme.py fails while the README and the tool disagree.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```console\n\$ ([^\n]+)\n(.*?)```", flags=re.S)


def refresh(match: re.Match[str]) -> str:
    command, old = match.group(1), match.group(2)
    if not old:  # a block that only shows how to call a command
        return match.group(0)
    argv = shlex.split(command)
    out = subprocess.run([sys.executable, "-m", "servesim", *argv[1:]], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    return f"```console\n$ {command}\n{out}```"


def main() -> None:
    path = ROOT / "README.md"
    path.write_text(BLOCK.sub(refresh, path.read_text()))


if __name__ == "__main__":
    main()
