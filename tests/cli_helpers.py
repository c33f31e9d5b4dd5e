"""Run the CLI in a subprocess, the way a user does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RECORD_TOML_READS = """
import servesim._catalogfile as files
read = []
_read_toml = files.read_toml
def recording(path):
    read.append(path.name)
    return _read_toml(path)
files.read_toml = recording
"""
"""A fresh interpreter's first lines: every TOML data file servesim reads is appended to ``read``."""


def run_cli(*args: str, entry: tuple[str, ...] = ("-m", "servesim")) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *entry, *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
