"""The figures of ``simulate`` and ``validate`` (``--plot FILE``), drawn from their result dicts by
:mod:`servesim.render.simfigures` and saved.

:mod:`servesim.cli.sim` imports this module only when ``--plot`` is given: it loads matplotlib.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servesim.render.plots import save
from servesim.render.simfigures import simulate_figure, validate_figure
from servesim.sim.report import erlang_tail_curve

__all__ = ["save_figure"]


def save_figure(command: str, data: dict[str, Any], path: str | Path) -> Path:
    """Save ``command``'s figure of ``data``; a queue run's carries the Erlang-C wait tail, computed
    here."""
    if command == "validate":
        return save(validate_figure(data), path)
    if data["mode"] != "queue":
        return save(simulate_figure(data), path)
    return save(simulate_figure(data, erlang_tail_curve(data)), path)
