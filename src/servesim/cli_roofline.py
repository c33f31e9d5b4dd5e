"""CLI commands: roofline (issue 4)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands (placeholder until the commands land)."""
