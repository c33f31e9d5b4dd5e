"""What each figure shows, computed: the curves and marked points of the specdec, disagg and plan
figures, as plain frozen records (:mod:`servesim.render.figures` draws them).

Operating points are part of the data: the scenario's own arrival rate and link on the disagg
curves, the recommended deployment at the planned rate on the plan curve.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from servesim._curves import DisaggCurves, OperatingPoint, PlanCurves, SpecdecCurves
from servesim.model import serving, speculative
from servesim.model.kvcache import Link
from servesim.model.serving import NodeSpec, Workload, best_split, colocated, disaggregated
from servesim.model.serving import resolve_scenario as _resolve_scenario
from servesim.model.speculative import SpecDecPreset
from servesim.plan import planner
from servesim.plan.curves import (
    geometric_range,
    goodput_vs_link,
    goodput_vs_rate,
    speedup_surface,
    utilization_curve,
)

__all__ = [
    "DisaggCurves",
    "OperatingPoint",
    "PlanCurves",
    "SpecdecCurves",
    "all_curves",
    "disagg_curves",
    "plan_curves",
    "rate_range",
    "specdec_curves",
]


def specdec_curves(d: float, c: float, u: float) -> SpecdecCurves:
    """The speedup surface at (d, c, u) and the utilization sweep of every preset."""
    presets = speculative.SPECDEC_PRESETS.values()
    return SpecdecCurves(speedup_surface(d, c, u), [utilization_curve(p) for p in presets])


def rate_range(wl: Workload, node: NodeSpec, nodes: int, n: int = 80) -> list[float]:
    """Arrival rates from near 0 to 10% past the fleet's whole prefill capacity, or past the
    workload's own rate when that is higher (so that the operating rate is on the axis)."""
    top = 1.1 * max(nodes * node.prefill_tokens_per_s / wl.prompt_tokens, wl.rate_per_s)
    return [top * (i + 1) / n for i in range(n)]


def _slo_note(wl: Workload) -> str:
    return f"TTFT <= {wl.slo_ttft_s * 1e3:g} ms, TPOT <= {wl.slo_tpot_s * 1e3:g} ms"


def disagg_curves(wl: Workload, node: NodeSpec, nodes: int, beta: float, link: Link,
                  crossover_GBps: float | None) -> DisaggCurves:
    """Colocated vs best split as the rate varies (up to :func:`rate_range`) and as the link varies
    (log-spaced from below the crossover to past 1000 GB/s), with the workload's rate and link."""
    co = colocated(wl, node, nodes, beta).goodput_rps
    de = best_split(wl, node, nodes, link).goodput_rps
    lo, hi = min(0.1, link.GBps / 2, (crossover_GBps or 1.0) / 2), max(1000.0, 2 * link.GBps)
    return DisaggCurves(
        by_rate=goodput_vs_rate(wl, node, nodes, beta, link, rate_range(wl, node, nodes)),
        by_link=goodput_vs_link(wl, node, nodes, beta, geometric_range(lo, hi, 81)),
        slo_note=_slo_note(wl),
        rate_point=OperatingPoint(wl.rate_per_s, co, de, f"current rate {wl.rate_per_s:g} req/s"),
        link_point=OperatingPoint(link.GBps, co, de, f"current link {link.name} ({link.GBps:g} GB/s)"),
        crossover_GBps=crossover_GBps,
    )


def plan_curves(wl: Workload, node: NodeSpec, nodes: int, beta: float, link: Link, *,
                speculation: SpecDecPreset | None = None, k_max: int = 8,
                attainment_target: float = 0.9) -> PlanCurves:
    """Colocated and the best split (no speculation), and the recommended deployment (with its
    speculation, if the plan recommends it) at each rate, and the recommendation at the planned rate.

    The recommendation is the planner's (:mod:`servesim.plan.planner`) for the same request: pass the
    plan's ``speculation``, ``k_max`` and ``attainment_target`` to mark the same deployment.
    """
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

    which = "recommended" if speculation is not None else "recommended (speculation not considered)"
    return PlanCurves(
        by_rate=goodput_vs_rate(wl, node, nodes, beta, link, rates),
        recommended=[recommended_at(r) for r in rates],
        recommended_label=f"{which}: {best.label}",
        best_label=best.label,
        planned_rate=wl.rate_per_s,
        best_goodput_rps=best.goodput_rps,
        best_attainment=best.attainment,
        nodes=nodes,
        slo_note=_slo_note(wl),
        attainment_target=attainment_target,
    )


def all_curves(summaries: Mapping[str, Mapping[str, Any]], d: float, c: float, u: float = 0.0
               ) -> tuple[SpecdecCurves, dict[str, DisaggCurves]]:
    """Everything ``servesim all`` prices: the specdec curves, then each workload preset's disagg
    curves.  ``summaries`` maps each preset's name to its ``disagg_summary(name)`` (its fleet size,
    beta and crossover are read from it)."""
    dis = {}
    for name, s in summaries.items():
        wl, ln, node, _, _ = _resolve_scenario(serving.WORKLOAD_PRESETS[name])
        dis[name] = disagg_curves(wl, node, s["nodes"], s["beta"], ln, s["crossover_exact_GBps"])
    return specdec_curves(d, c, u), dis
