"""The figures of each command: which curves, on which axes (matplotlib, imported lazily).

``specdec_figure``, ``disagg_figure``, ``plan_figure`` and ``all_figure``
return a matplotlib Figure; the CLI saves it with ``--plot FILE`` and the
report embeds it.  Operating points are marked: the scenario's own arrival
rate and link on the disagg curves, the recommended deployment at the planned
rate on the plan curve.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from servesim.model.kvcache import Link
from servesim.model.serving import NodeSpec, Workload, best_split, colocated, disaggregated
from servesim.model.speculative import SPECDEC_PRESETS, SpecDecPreset
from servesim.plan.curves import (
    geometric_range,
    goodput_vs_link,
    goodput_vs_rate,
    speedup_surface,
    utilization_curve,
)

__all__ = ["all_figure", "disagg_figure", "plan_figure", "rate_range", "specdec_figure"]


def _specdec_panels(heatmap: Any, sweep: Any, d: float, c: float, u: float) -> None:
    from servesim.render import plots

    plots.plot_speedup_heatmap(heatmap, speedup_surface(d, c, u))
    plots.plot_utilization(sweep, [utilization_curve(p) for p in SPECDEC_PRESETS.values()])


def specdec_figure(d: float, c: float, u: float) -> Any:
    """Speedup heatmap over (alpha, k) with the optimal k, and every preset's utilization sweep."""
    from servesim.render import plots

    fig, axes = plots.figure(2)
    _specdec_panels(axes[0], axes[1], d, c, u)
    return fig


def rate_range(wl: Workload, node: NodeSpec, nodes: int, n: int = 80) -> list[float]:
    """Arrival rates from near 0 to 10% past the fleet's whole prefill capacity, or past the
    workload's own rate when that is higher (so that the operating rate is on the axis)."""
    top = 1.1 * max(nodes * node.prefill_tokens_per_s / wl.prompt_tokens, wl.rate_per_s)
    return [top * (i + 1) / n for i in range(n)]


def _slo_note(wl: Workload) -> str:
    return f"TTFT <= {wl.slo_ttft_s * 1e3:g} ms, TPOT <= {wl.slo_tpot_s * 1e3:g} ms"


def _disagg_panels(by_rate: Any, by_link: Any, wl: Workload, node: NodeSpec, nodes: int, beta: float,
                   link: Link, crossover_GBps: float | None) -> None:
    from servesim.render import plots

    co = colocated(wl, node, nodes, beta).goodput_rps
    de = best_split(wl, node, nodes, link).goodput_rps
    plots.plot_goodput_vs_rate(
        by_rate, goodput_vs_rate(wl, node, nodes, beta, link, rate_range(wl, node, nodes)), _slo_note(wl),
        current=plots.OperatingPoint(wl.rate_per_s, co, de, f"current rate {wl.rate_per_s:g} req/s"),
    )
    lo, hi = min(0.1, link.GBps / 2, (crossover_GBps or 1.0) / 2), max(1000.0, 2 * link.GBps)
    plots.plot_goodput_vs_link(
        by_link, goodput_vs_link(wl, node, nodes, beta, geometric_range(lo, hi, 81)), crossover_GBps,
        current=plots.OperatingPoint(link.GBps, co, de, f"current link {link.name} ({link.GBps:g} GB/s)"),
    )


def disagg_figure(wl: Workload, node: NodeSpec, nodes: int, beta: float, link: Link,
                  crossover_GBps: float | None) -> Any:
    """Goodput vs arrival rate (colocated vs best split) and goodput vs link bandwidth, with the
    workload's rate, the link in use and the crossover marked."""
    from servesim.render import plots

    fig, axes = plots.figure(2)
    _disagg_panels(axes[0], axes[1], wl, node, nodes, beta, link, crossover_GBps)
    return fig


def plan_figure(wl: Workload, node: NodeSpec, nodes: int, beta: float, link: Link, *,
                speculation: SpecDecPreset | None = None, k_max: int = 8,
                attainment_target: float = 0.9) -> Any:
    """Goodput vs arrival rate for colocated and the best split (no speculation), and for the
    recommended deployment (with its speculation, if the plan recommends it), with the planned rate and
    the recommendation's operating point marked.

    The recommendation is the planner's (:mod:`servesim.plan.planner`) for the same request: pass the
    plan's ``speculation``, ``k_max`` and ``attainment_target`` to mark the same deployment.
    """
    from servesim.plan import planner
    from servesim.render import plots

    req = planner.PlanRequest(workload=wl, node=node, link=link, nodes=nodes, beta=beta,
                              attainment_target=attainment_target, speculation=speculation, k_max=k_max)
    best = planner._rank(planner.candidates(req), wl.rate_per_s)[0]
    rates = rate_range(wl, node, nodes)

    def recommended_at(rate: float) -> float:
        w = replace(wl, rate_per_s=rate)
        r = (colocated(w, node, nodes, beta) if best.architecture == "colocated"
             else disaggregated(w, node, best.prefill_nodes, best.decode_nodes, link))
        return planner._candidate(replace(req, workload=w), w, best.architecture, r,
                                  best.speculative_k).goodput_rps

    fig, axes = plots.figure(1, width_in=9.5, height_in=4.6)
    ax = axes[0]
    plots.plot_goodput_vs_rate(ax, goodput_vs_rate(wl, node, nodes, beta, link, rates))
    which = "recommended" if speculation is not None else "recommended (speculation not considered)"
    ax.plot(rates, [recommended_at(r) for r in rates], color=plots.PALETTE[2], ls="--", lw=2.2,
            label=f"{which}: {best.label}")
    ax.axvline(wl.rate_per_s, color=plots.REFERENCE, ls="--", lw=1.0,
               label=f"planned rate {wl.rate_per_s:g} req/s")
    ax.plot([wl.rate_per_s], [best.goodput_rps], "*", ms=16, color=plots.PALETTE[2], mec=plots.REFERENCE,
            zorder=6, label=f"{best.label} there: {best.goodput_rps:.2f} req/s, "
                            f"{best.attainment:.1%} meet both SLOs")
    ax.set_title(f"Goodput vs arrival rate, {nodes} nodes\n{_slo_note(wl)} "
                 f"(target: {attainment_target:.0%} of requests)")
    plots.legend(ax)
    return fig


def all_figure(summaries: Mapping[str, Mapping[str, Any]], d: float, c: float, u: float = 0.0) -> Any:
    """Everything ``servesim all`` prices, in one figure: the speedup heatmap and the utilization
    sweep (first row), then goodput vs arrival rate and vs link for each workload preset (one row
    each).  ``summaries`` maps each preset's name to its ``disagg_summary(name)`` (the preset's
    defaults: its fleet size, beta and crossover are read from it)."""
    from servesim.model.serving import WORKLOAD_PRESETS, resolve_scenario
    from servesim.render import plots

    fig, axes = plots.figure(2, nrows=1 + len(summaries), height_in=4.6)
    _specdec_panels(axes[0], axes[1], d, c, u)
    for i, (name, s) in enumerate(summaries.items(), start=1):
        wl, ln, node, _, _ = resolve_scenario(WORKLOAD_PRESETS[name])
        by_rate, by_link = axes[2 * i], axes[2 * i + 1]
        _disagg_panels(by_rate, by_link, wl, node, s["nodes"], s["beta"], ln, s["crossover_exact_GBps"])
        for ax in (by_rate, by_link):
            ax.set_title(f"{name}: {ax.get_title()}")
    return fig
