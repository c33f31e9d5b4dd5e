"""Progress on stderr for work that may take more than about a second, shown only on a terminal.

A thin wrapper over :mod:`rich.progress` (bar, done/total, rate and time left).  The bar
appears only when the stream is a terminal, ``--quiet`` is not set and the work has
already run for ``delay_s`` (quick runs draw nothing), and it removes itself when done,
so piped and CI output stay clean and byte-for-byte reproducible.  rich is imported only
when a bar is actually drawn.

A bar made with ``ticking=True`` (and :func:`working`, for one long call with no steps to count)
draws itself ``delay_s`` after it is made, steps or no steps, and its clock runs on its own: work
that takes more than a second or two shows that it is running within a second.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = ["Progress", "working"]


class Progress:
    """``Progress(total, label)``; call ``advance()`` per step and ``close()`` at the end."""

    def __init__(self, total: int, label: str, *, enabled: bool = True, stream: TextIO | None = None,
                 delay_s: float = 1.0, ticking: bool = False) -> None:
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
        self._lock = threading.Lock()
        self._closed = False
        self._timer: threading.Timer | None = None
        if self.enabled and ticking:
            self._timer = threading.Timer(delay_s, self._tick)
            self._timer.daemon = True
            self._timer.start()

    def _tick(self) -> None:
        """The delay is over and no step has drawn the bar: draw it, its clock refreshing itself."""
        with self._lock:
            if self._bar is None and not self._closed:
                self._open(auto_refresh=True)

    def _open(self, auto_refresh: bool = False) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        console = Console(file=self.stream, force_terminal=True, width=100)
        self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[rate]}"),
                                 console=console, transient=True, auto_refresh=auto_refresh,
                                 refresh_per_second=4)
        self._bar.start()
        self._task = self._bar.add_task(self.label, total=self.total, completed=self.done, rate="")
        self.drawn = True

    def advance(self, steps: int = 1) -> None:
        self.done = min(self.total, self.done + steps)
        if not self.enabled:
            return
        with self._lock:
            self._advance()

    def _advance(self) -> None:
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
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._closed = True
            if self._bar is not None:
                self._bar.stop()
                self._bar = None


@contextmanager
def working(label: str, *, enabled: bool = True, stream: TextIO | None = None,
            delay_s: float = 1.0) -> Iterator[Progress]:
    """A ticking :class:`Progress` of one step around one long call: on a terminal, after ``delay_s``,
    ``label`` and the time it has run, until the call returns (or raises)."""
    bar = Progress(1, label, enabled=enabled, stream=stream, delay_s=delay_s, ticking=True)
    try:
        yield bar
    finally:
        bar.close()
