"""Progress on stderr for work that may take more than about a second, shown only on a terminal.

A thin wrapper over :mod:`rich.progress` (bar, done/total, rate and time left).  The bar
appears only when the stream is a terminal, ``--quiet`` is not set and the work has
already run for ``delay_s`` (quick runs draw nothing), and it removes itself when done,
so piped and CI output stay clean and byte-for-byte reproducible.  rich is imported only
when a bar is actually drawn.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["Progress"]


class Progress:
    """``Progress(total, label)``; call ``advance()`` per step and ``close()`` at the end."""

    def __init__(self, total: int, label: str, *, enabled: bool = True, stream: TextIO | None = None,
                 delay_s: float = 1.0) -> None:
        self.stream = sys.stderr if stream is None else stream
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        self.enabled = enabled and tty
        self.total = max(1, total)
        self.label = label
        self.done = 0
        self.start = time.monotonic()
        self.delay_s = delay_s  # draw nothing for work quicker than this
        self.drawn = False
        self._bar: Any = None
        self._task: Any = None

    def _open(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        console = Console(file=self.stream, force_terminal=True, width=100)
        self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[rate]}"),
                                 console=console, transient=True, auto_refresh=False)
        self._bar.start()
        self._task = self._bar.add_task(self.label, total=self.total, completed=self.done, rate="")
        self.drawn = True

    def advance(self, steps: int = 1) -> None:
        self.done = min(self.total, self.done + steps)
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        if self._bar is None and elapsed >= self.delay_s:
            self._open()
        if self._bar is not None:
            rate = self.done / elapsed if elapsed > 0 else 0.0
            left = (self.total - self.done) / rate if rate > 0 else float("nan")
            eta = f", about {left:.0f} s left" if left == left else ""
            self._bar.update(self._task, completed=self.done, rate=f"{rate:,.2f}/s{eta}")
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
