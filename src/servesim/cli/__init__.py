"""The command line: argparse, one module per command group, over the public Python API."""

from __future__ import annotations

from servesim.cli.main import main

__all__ = ["main"]
