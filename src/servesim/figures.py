"""The figures of each command: which curves, on which axes (matplotlib, imported lazily).

``specdec_figure``, ``disagg_figure`` and ``plan_figure`` return a matplotlib
Figure; the CLI saves it with ``--plot FILE`` and the report embeds it.
"""

from __future__ import annotations

from typing import Any

from servesim.curves import (
    geometric_range,
    goodput_vs_link,
    goodput_vs_rate,
    speedup_surface,
    utilization_curve,
)
from servesim.kvcache import Link
from servesim.serving import NodeSpec, Workload
from servesim.speculative import SPECDEC_PRESETS

__all__ = ["disagg_figure", "plan_figure", "rate_range", "specdec_figure"]


def specdec_figure(d: float, c: float, u: float) -> Any:
    """Speedup heatmap over (alpha, k) with the optimal k, and every preset's utilization sweep."""
    from servesim.render import plots

    fig, axes = plots.figure(2)
    plots.plot_speedup_heatmap(axes[0], speedup_surface(d, c, u))
    plots.plot_utilization(axes[1], [utilization_curve(p) for p in SPECDEC_PRESETS.values()])
    return fig


def rate_range(wl: Workload, node: NodeSpec, nodes: int, n: int = 80) -> list[float]:
    """Arrival rates from near 0 to 10% past the fleet's whole prefill capacity."""
    top = 1.1 * nodes * node.prefill_tokens_per_s / wl.prompt_tokens
    return [top * (i + 1) / n for i in range(n)]


def disagg_figure(wl: Workload, node: NodeSpec, nodes: int, beta: float, link: Link,
                  crossover_GBps: float | None) -> Any:
    """Goodput vs arrival rate (colocated vs best split) and goodput vs link bandwidth."""
    from servesim.render import plots

    fig, axes = plots.figure(2)
    slo = f"TTFT<={wl.slo_ttft_s * 1e3:g} ms, TPOT<={wl.slo_tpot_s * 1e3:g} ms"
    plots.plot_goodput_vs_rate(
        axes[0], goodput_vs_rate(wl, node, nodes, beta, link, rate_range(wl, node, nodes)), slo
    )
    plots.plot_goodput_vs_link(
        axes[1], goodput_vs_link(wl, node, nodes, beta, geometric_range(0.1, 1000.0, 81)), crossover_GBps
    )
    return fig


def plan_figure(wl: Workload, node: NodeSpec, nodes: int, beta: float, link: Link) -> Any:
    """Goodput vs arrival rate for colocated and the best split, with the planned rate marked."""
    from servesim.render import plots

    fig, axes = plots.figure(1)
    slo = f"TTFT<={wl.slo_ttft_s * 1e3:g} ms, TPOT<={wl.slo_tpot_s * 1e3:g} ms"
    plots.plot_goodput_vs_rate(
        axes[0], goodput_vs_rate(wl, node, nodes, beta, link, rate_range(wl, node, nodes)), slo
    )
    axes[0].axvline(wl.rate_per_s, color="black", ls="--", lw=0.8, label="planned rate")
    axes[0].legend(fontsize=8)
    return fig
