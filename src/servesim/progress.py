"""A minimal progress bar on stderr, shown only on a terminal.

Sweeps that may take more than about a second report progress through a
callback; the bar draws only when stderr is a TTY and ``--quiet`` is not set,
so piped and CI output stay clean (and byte-for-byte reproducible).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """``Progress(total, label)``; call ``advance()`` per step and ``close()`` at the end."""

    def __init__(self, total: int, label: str, *, enabled: bool = True, stream: TextIO | None = None,
                 delay_s: float = 1.0) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled and self.stream.isatty()
        self.total = max(1, total)
        self.label = label
        self.done = 0
        self.start = time.monotonic()
        self.delay_s = delay_s  # draw nothing for sweeps quicker than this
        self.drawn = False

    def advance(self, steps: int = 1) -> None:
        self.done = min(self.total, self.done + steps)
        if self.enabled and time.monotonic() - self.start >= self.delay_s:
            width = 30
            filled = width * self.done // self.total
            self.stream.write(f"\r{self.label} [{'#' * filled}{' ' * (width - filled)}] "
                              f"{self.done}/{self.total}")
            self.stream.flush()
            self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r" + " " * (len(self.label) + 50) + "\r")
            self.stream.flush()
