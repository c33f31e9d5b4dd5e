"""The lab's figures (``specdec``, ``disagg`` and ``all`` with ``--plot FILE``): the curves of
:mod:`servesim.plan.figures`, drawn by :mod:`servesim.render.figures` and saved.

:mod:`servesim.cli.lab` imports this module only when ``--plot`` is given: it loads matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from servesim.model.kvcache import Link
from servesim.model.serving import NodeSpec, Workload
from servesim.model.speculative import DEFAULT_C, DEFAULT_D
from servesim.plan.figures import all_curves, disagg_curves, specdec_curves
from servesim.render.figures import all_figure, disagg_figure, specdec_figure
from servesim.render.plots import save

__all__ = ["save_all", "save_disagg", "save_specdec"]


def save_specdec(d: float, c: float, u: float, path: str | Path) -> Path:
    """``specdec --plot``: the speedup surface at (d, c, u) and every preset's utilization sweep."""
    return save(specdec_figure(specdec_curves(d, c, u)), path)


def save_disagg(wl: Workload, node: NodeSpec, nodes: int, beta: float, link: Link,
                crossover_GBps: float | None, path: str | Path) -> Path:
    """``disagg --plot``: colocated against the best split as the rate and the link vary."""
    return save(disagg_figure(disagg_curves(wl, node, nodes, beta, link, crossover_GBps)), path)


def save_all(summaries: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """``all --plot``: one file, every panel: specdec at the default d and c, then each preset's disagg."""
    return save(all_figure(*all_curves(summaries, DEFAULT_D, DEFAULT_C, 0.0)), path)
