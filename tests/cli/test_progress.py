"""The progress bar draws only on a terminal, only after its delay, and clears itself."""

from __future__ import annotations

import io

from servesim.cli.progress import Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_draws_on_a_terminal_and_clears():
    tty = _Tty()
    bar = Progress(4, "planning", stream=tty, delay_s=0.0)
    for _ in range(4):
        bar.advance()
    drawn = tty.getvalue()
    assert "planning" in drawn and "4/4" in drawn and "/s" in drawn  # label, done/total, rate
    bar.close()
    assert bar._bar is None  # transient: the bar removed itself


def test_silent_when_piped_quiet_or_quick():
    piped = io.StringIO()
    Progress(3, "x", stream=piped, delay_s=0.0).advance()
    assert piped.getvalue() == ""
    quiet = _Tty()
    Progress(3, "x", stream=quiet, enabled=False, delay_s=0.0).advance()
    assert quiet.getvalue() == ""
    quick = _Tty()
    bar = Progress(3, "x", stream=quick, delay_s=60.0)
    bar.advance()
    bar.close()
    assert quick.getvalue() == ""
