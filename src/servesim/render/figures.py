"""The figures of each command, drawn from their curves (matplotlib: import this module only to draw).

``specdec_figure``, ``disagg_figure``, ``plan_figure`` and ``all_figure`` take the records of
:mod:`servesim.plan.figures` (computed there; nothing here knows a model) and return a matplotlib
Figure; the command line saves it with ``--plot FILE`` and the report embeds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from servesim._curves import DisaggCurves, PlanCurves, SpecdecCurves
from servesim.render import plots

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["all_figure", "disagg_figure", "plan_figure", "specdec_figure"]


def _specdec_panels(heatmap: Axes, sweep: Axes, curves: SpecdecCurves) -> None:
    plots.plot_speedup_heatmap(heatmap, curves.surface)
    plots.plot_utilization(sweep, curves.utilization)


def specdec_figure(curves: SpecdecCurves) -> Figure:
    """Speedup heatmap over (alpha, k) with the optimal k, and every preset's utilization sweep
    (``curves``: a :class:`servesim.plan.figures.SpecdecCurves`)."""
    fig, axes = plots.figure(2)
    _specdec_panels(axes[0], axes[1], curves)
    return fig


def _disagg_panels(by_rate: Axes, by_link: Axes, curves: DisaggCurves) -> None:
    plots.plot_goodput_vs_rate(by_rate, curves.by_rate, curves.slo_note, current=curves.rate_point)
    plots.plot_goodput_vs_link(by_link, curves.by_link, curves.crossover_GBps, current=curves.link_point)


def disagg_figure(curves: DisaggCurves) -> Figure:
    """Goodput vs arrival rate (colocated vs best split) and goodput vs link bandwidth, with the
    workload's rate, the link in use and the crossover marked (``curves``: a
    :class:`servesim.plan.figures.DisaggCurves`)."""
    fig, axes = plots.figure(2)
    _disagg_panels(axes[0], axes[1], curves)
    return fig


def plan_figure(curves: PlanCurves) -> Figure:
    """Goodput vs arrival rate for colocated, the best split and the recommended deployment, with the
    planned rate and the recommendation's operating point marked (``curves``: a
    :class:`servesim.plan.figures.PlanCurves`)."""
    fig, axes = plots.figure(1, width_in=9.5, height_in=4.6)
    ax = axes[0]
    plots.plot_goodput_vs_rate(ax, curves.by_rate)
    ax.plot(curves.by_rate.x, curves.recommended, color=plots.PALETTE[2], ls="--", lw=2.2,
            label=curves.recommended_label)
    ax.axvline(curves.planned_rate, color=plots.REFERENCE, ls="--", lw=1.0,
               label=f"planned rate {curves.planned_rate:g} req/s")
    ax.plot([curves.planned_rate], [curves.best_goodput_rps], "*", ms=16, color=plots.PALETTE[2],
            mec=plots.REFERENCE, zorder=6,
            label=f"{curves.best_label} there: {curves.best_goodput_rps:.2f} req/s, "
                  f"{curves.best_attainment:.1%} meet both SLOs")
    ax.set_title(f"Goodput vs arrival rate, {curves.nodes} nodes\n{curves.slo_note} "
                 f"(target: {curves.attainment_target:.0%} of requests)")
    plots.legend(ax)
    return fig


def all_figure(specdec: SpecdecCurves, disagg: Mapping[str, DisaggCurves]) -> Figure:
    """Everything ``servesim all`` prices, in one figure: the speedup heatmap and the utilization
    sweep (first row), then goodput vs arrival rate and vs link for each workload preset (one row
    each); the curves of :func:`servesim.plan.figures.all_curves`."""
    fig, axes = plots.figure(2, nrows=1 + len(disagg), height_in=4.6)
    _specdec_panels(axes[0], axes[1], specdec)
    for i, (name, curves) in enumerate(disagg.items(), start=1):
        by_rate, by_link = axes[2 * i], axes[2 * i + 1]
        _disagg_panels(by_rate, by_link, curves)
        for ax in (by_rate, by_link):
            ax.set_title(f"{name}: {ax.get_title()}")
    return fig
