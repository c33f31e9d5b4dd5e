"""Rewrite the output of every ```console block in README.md with what the command prints now.

    python scripts/update_readme_examples.py [--check]

Each block is ``$ servesim ...`` on its first line and the command's exact output after it
(``tests/test_readme.py`` checks them).  ``--check`` changes nothing and fails if a block is stale.
Blocks that show only a command (no output) are left alone.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"```console\n\$ ([^\n]+)\n(.*?)```", flags=re.S)


def run(command: str) -> str:
    argv = shlex.split(command)
    res = subprocess.run([sys.executable, "-m", "servesim", *argv[1:]], capture_output=True, text=True,
                         cwd=ROOT, check=False)
    if res.returncode != 0:
        raise SystemExit(f"{command}: exit {res.returncode}: {res.stderr}")
    return res.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = README.read_text(encoding="utf-8")
    stale = []

    def redo(m: re.Match[str]) -> str:
        command, old = m.group(1), m.group(2)
        if not old:
            return m.group(0)
        new = run(command)
        if new != old:
            stale.append(command)
        return f"```console\n$ {command}\n{new}```"

    out = BLOCK.sub(redo, text)
    for c in stale:
        print(f"{'stale' if args.check else 'updated'}: {c}")
    if args.check:
        return 1 if stale else 0
    if out != text:
        tmp = README.with_suffix(".md.tmp")
        tmp.write_text(out, encoding="utf-8")
        tmp.replace(README)
    return 0


if __name__ == "__main__":
    sys.exit(main())
