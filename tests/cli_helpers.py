"""Run the CLI in a subprocess, the way a user does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, entry: tuple[str, ...] = ("-m", "servesim")) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *entry, *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
