"""The numbers each command shows, as plain dicts (the JSON schema of the CLI).

These functions only compute; rendering to a table, JSON or CSV happens in
:mod:`servesim.render`.  Times in the output are milliseconds (``*_ms``),
rates requests per second (``*_rps``), bandwidths GB/s (10^9 B/s).  An unstable
queue has ``stable: false``, ``ttft_ms: null`` and goodput 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Unpack

from servesim.model import kvcache, serving
from servesim.model import speculative as sd
from servesim.model.kvcache import Link
from servesim.model.serving import (
    GOODPUT_TIE_FRACTION,
    NodeSpec,
    ScenarioArgs,
    ServingResult,
    Workload,
    best_split,
    colocated,
    compare,
    link_crossover,
    mixes,
    resolve_scenario,
    workload_row,
)

if TYPE_CHECKING:  # pragma: no cover - annotations only: the lab's path imports no hardware module
    from servesim.plan.planner import Candidate, Plan

__all__ = [
    "GRID_ALPHAS",
    "GRID_KS",
    "KV_TABLE_LINKS",
    "SWEEP_US",
    "disagg_summary",
    "plan_summary",
    "specdec_summary",
]

GRID_ALPHAS: tuple[float, ...] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
GRID_KS: tuple[int, ...] = tuple(range(1, 11))
SWEEP_US: tuple[float, ...] = (0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.93, 0.95, 0.99)
KV_TABLE_LINKS: tuple[str, ...] = ("nvlink", "rdma", "tcp")

Row = dict[str, Any]


def _ms(seconds: float) -> float | None:
    """Seconds to milliseconds; None for an infinite (unstable) time."""
    return None if math.isinf(seconds) else seconds * 1e3


def specdec_summary(
    *,
    u: float = 0.0,
    d: float = sd.DEFAULT_D,
    c: float = sd.DEFAULT_C,
    preset: str = "mtp",
    alpha: float | None = None,
    k: int | None = None,
    k_max: int = sd.DEFAULT_K_MAX,
) -> dict[str, Any]:
    """Speedup grid at (u, d, c), the presets at u = 0 and 0.7, and a utilization sweep.

    The sweep uses ``preset``, or the user's own (alpha, d, c) when ``alpha`` is
    given; a ``case`` entry prices the user's own point when ``alpha`` or ``k``
    is given.
    """
    p = sd.SPECDEC_PRESETS[preset]
    grid = _speedup_grid(u, d, c)
    presets = _preset_rows(k_max)
    if alpha is not None:
        s_name, s_alpha, s_d, s_c = "custom", alpha, d, c
    else:
        s_name, s_alpha, s_d, s_c = preset, p.alpha, p.d, p.c
    sweep: list[Row] = []
    for uu in sorted({*SWEEP_US, u}):
        kk = sd.optimal_k(s_alpha, s_d, s_c, uu, k_max)
        r = sd.evaluate(kk, s_alpha, s_d, s_c, uu)
        sweep.append({"u": uu, "best_k": kk, "speedup": r.speedup, "verdict": r.verdict})
    out: dict[str, Any] = {
        "assumptions": {
            "acceptance": "i.i.d. per drafted token (optimistic; see what the numbers assume)",
            "verify_cost": "t_target (1 + c k g(u)), g(u) = (1 + 1e-3) / (1 - u + 1e-3)",
            "u": u,
            "d": d,
            "c": c,
            "k_max": k_max,
        },
        "grid": grid,
        "presets": presets,
        "sweep_preset": {"name": s_name, "alpha": s_alpha, "d": s_d, "c": s_c},
        "utilization_sweep": sweep,
        "turn_off_u": sd.turn_off_utilization(s_alpha, s_d, s_c, k_max),
    }
    if alpha is not None or k is not None:
        a = p.alpha if alpha is None else alpha
        cd, cc = (d, c) if alpha is not None else (p.d, p.c)
        out["case"] = _own_case(a, cd, cc, u, k, k_max)
    return out


def _speedup_grid(u: float, d: float, c: float) -> list[Row]:
    """The speedup at each (alpha, k) of the grid at (u, d, c), the optimal k of each alpha marked."""
    grid: list[Row] = []
    for a in GRID_ALPHAS:
        best = sd.optimal_k(a, d, c, u, k_max=max(GRID_KS))
        for kk in GRID_KS:
            grid.append(
                {"k": kk, "alpha": a, "speedup": sd.speedup(kk, a, d, c, u), "optimal": kk == best}
            )
    return grid


def _preset_rows(k_max: int) -> list[Row]:
    """Each speculation preset's best k and speedup at u = 0 and u = 0.7, and the u to turn it off above."""
    presets: list[Row] = []
    for name, q in sd.SPECDEC_PRESETS.items():
        k0 = sd.optimal_k(q.alpha, q.d, q.c, 0.0, k_max)
        k7 = sd.optimal_k(q.alpha, q.d, q.c, 0.7, k_max)
        presets.append(
            {
                "name": name,
                "alpha": q.alpha,
                "d": q.d,
                "c": q.c,
                "best_k_u0": k0,
                "speedup_u0": sd.speedup(k0, q.alpha, q.d, q.c, 0.0),
                "best_k_u07": k7,
                "speedup_u07": sd.speedup(k7, q.alpha, q.d, q.c, 0.7),
                "turn_off_u": sd.turn_off_utilization(q.alpha, q.d, q.c, k_max),
            }
        )
    return presets


def _own_case(a: float, d: float, c: float, u: float, k: int | None, k_max: int) -> Row:
    """The user's own point (alpha ``a``, ``d``, ``c``, ``u``; ``k`` or else the optimal one): expected
    tokens, cycle time, speedup, verdict, the optimal k and the break-even alpha."""
    kk = sd.optimal_k(a, d, c, u, k_max) if k is None else k
    r = sd.evaluate(kk, a, d, c, u)
    return {
        "alpha": a,
        "k": kk,
        "d": d,
        "c": c,
        "u": u,
        "expected_tokens": r.expected_tokens,
        "cycle_time_target_steps": r.cycle_time,
        "speedup": r.speedup,
        "verdict": r.verdict,
        "optimal_k": sd.optimal_k(a, d, c, u, k_max),
        "break_even_alpha": sd.break_even_alpha(kk, d, c, u),
    }


def _result_row(r: ServingResult) -> Row:
    """The figures both architectures report (milliseconds, req/s)."""
    return {
        "ttft_ms": _ms(r.ttft_mean_s),
        "tpot_ms": r.tpot_s * 1e3,
        "goodput_rps": r.goodput_rps,
        "stable": r.stable,
        "p_ttft_ok": r.p_ttft_ok,
        "tpot_ok": r.tpot_ok,
    }


def _coloc_row(r: ServingResult) -> Row:
    return {
        "nodes": r.prefill_nodes,
        **_result_row(r),
        "prefill_utilization": r.prefill_utilization,
        "decode_utilization": r.decode_utilization,
    }


def _disagg_row(r: ServingResult) -> Row:
    return {
        "prefill_nodes": r.prefill_nodes,
        "decode_nodes": r.decode_nodes,
        **_result_row(r),
        "kv_transfer_ms": r.kv_transfer_s * 1e3,
        "prefill_utilization": r.prefill_utilization,
        "decode_utilization": r.decode_utilization,
    }


def disagg_summary(
    preset: str = "chat", *, nodes: int = 8, workload: Workload | None = None,
    **scenario: Unpack[ScenarioArgs],
) -> dict[str, Any]:
    """Colocated vs best disaggregated split for each mix, the KV table and the crossover.

    ``workload`` replaces the preset's (e.g. one derived from a trace; ``preset`` then only labels
    the output); ``scenario`` overrides it and gives the link and the node
    (:func:`servesim.model.serving.resolve_scenario`).
    """
    wl, ln, node, b, source = resolve_scenario(
        serving.WORKLOAD_PRESETS[preset] if workload is None else workload, **scenario)
    return _disagg(wl, preset, ln, nodes, b, node, source)


def _disagg(
    wl: Workload, preset: str, ln: Link, nodes: int, beta: float, node: NodeSpec, source: str
) -> dict[str, Any]:
    rows: list[Row] = []
    for label, w in mixes(wl):
        co = colocated(w, node, nodes, beta)
        de = best_split(w, node, nodes, ln)
        rows.append(
            {
                "mix": label,
                "prompt_tokens": w.prompt_tokens,
                "output_tokens": w.output_tokens,
                "colocated": _coloc_row(co),
                "disaggregated": _disagg_row(de),
                "winner": compare(co, de, w.rate_per_s),
                "tie": abs(co.goodput_rps - de.goodput_rps) <= GOODPUT_TIE_FRACTION * w.rate_per_s
                and co.goodput_rps + de.goodput_rps > 0,
            }
        )
    kv_bytes = node.kv.bytes_for(wl.prompt_tokens)
    kv_links = [kvcache.LINKS[n] for n in KV_TABLE_LINKS]
    if ln not in kv_links:
        kv_links.append(ln)
    kv_table = [
        {"link": x.name, "GBps": x.GBps, "kv_bytes": kv_bytes, "transfer_ms": x.transfer_s(kv_bytes) * 1e3}
        for x in kv_links
    ]
    xo = link_crossover(wl, node, nodes, beta)
    at = None
    if xo.ladder_GBps is not None:
        at = {
            "GBps": xo.ladder_GBps,
            "kv_transfer_ms": kv_bytes / (xo.ladder_GBps * 1e9) * 1e3,
            "split": best_split(wl, node, nodes, Link("x", xo.ladder_GBps * 1e9)).split,
        }
    return {
        "preset": preset,
        "assumptions": {
            "queueing": "M/M/c prefill queue (Poisson arrivals, exponential service)",
            "interference": "TPOT_coloc = TPOT_base (1 + beta rho_p)",
            "decode": "no decode-side queueing; stable iff lambda O < nodes R_d",
            "kv_transfer": "whole prompt cache sent after prefill, no overlap",
            "tie": "goodputs within 0.1% of the rate are a tie, won by colocation",
        },
        "nodes": nodes,
        "beta": beta,
        "link": {"name": ln.name, "GBps": ln.GBps},
        "workload": workload_row(wl),
        "node": {
            "source": source,
            "gpus": node.gpus,
            "model": node.kv.name,
            "prefill_tokens_per_s": node.prefill_tokens_per_s,
            "decode_tokens_per_s": node.decode_tokens_per_s,
            "tpot_base_ms": node.tpot_base_s * 1e3,
            "kv_bytes_per_token": node.kv.bytes_per_token,
        },
        "kv_transfer": kv_table,
        "rows": rows,
        "crossover_link_GBps": xo.ladder_GBps,
        "crossover_exact_GBps": xo.exact_GBps,
        "crossover_at": at,
    }


def _candidate_row(c: Candidate) -> Row:
    r = c.result
    return {
        "architecture": c.architecture,
        "prefill_nodes": c.prefill_nodes,
        "decode_nodes": c.decode_nodes if c.architecture == "disaggregated" else 0,
        "speculative_k": c.speculative_k,
        "speculative_speedup": c.speculative_speedup,
        "label": c.label,
        "ttft_ms": _ms(r.ttft_mean_s),
        "tpot_ms": r.tpot_s * 1e3,
        "attainment": c.attainment,
        "meets_target": c.meets_target,
        "goodput_rps": c.goodput_rps,
        "goodput_per_gpu": c.goodput_per_gpu,
        "stable": r.stable,
        "kv_transfer_ms": r.kv_transfer_s * 1e3,
        "binding_constraint": c.binding_constraint,
    }


def plan_summary(
    p: Plan,
    *,
    preset: str,
    top: int = 10,
    jobs: int = 1,
    ray_address: str | None = None,
    progress: Callable[[], None] | None = None,
    simulate: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A :class:`servesim.plan.planner.Plan` as a plain dict.

    ``simulate`` (keyword arguments of :func:`servesim.plan.rescore.rescore`,
    e.g. ``{"top": 5}``) re-scores the top candidates with the simulator, on
    ``jobs`` local processes or the Ray cluster at ``ray_address``.
    """
    req = p.request
    wl = req.workload
    best = p.recommended
    out = {
        "preset": preset,
        "question": (
            f"How should {wl.rate_per_s:g} req/s of '{preset}' traffic ({wl.prompt_tokens}-token prompts, "
            f"{wl.output_tokens}-token outputs) be served on {req.nodes} nodes joined by "
            f"{req.link.name}, so that {req.attainment_target:.0%} of requests meet TTFT <= "
            f"{wl.slo_ttft_s * 1e3:g} ms and TPOT <= {wl.slo_tpot_s * 1e3:g} ms?"
        ),
        "assumptions": {
            "closed_form": "M/M/c prefill queue, deterministic TPOT (the lab's reference model)",
            "speculation": (
                "off" if req.speculation is None else
                f"{req.speculation.name} (alpha={req.speculation.alpha:g}, d={req.speculation.d:g}, "
                f"c={req.speculation.c:g}, k <= {req.k_max}); TPOT / S(k, u) with u = pool compute "
                "utilization; decode capacity unchanged"
                + ("" if req.speculation in sd.SPECDEC_PRESETS.values()
                   else f"; {req.speculation.description}")
            ),
            "speculation_priced_on": ("off" if req.speculation is None else
                                      "lab" if req.speculation in sd.SPECDEC_PRESETS.values() else "model"),
            "attainment_target": req.attainment_target,
            "tie": "goodputs within 0.1% of the rate are a tie, won by the simpler deployment",
        },
        "nodes": req.nodes,
        "gpus_per_node": req.node.gpus,
        "link": {"name": req.link.name, "GBps": req.link.GBps},
        "workload": workload_row(wl),
        "recommendation": _candidate_row(best),
        "ranked": [_candidate_row(c) for c in p.ranked[:top]],
        "candidates_evaluated": len(p.ranked),
        "smallest_fleet": p.smallest_fleet,
        "sensitivity": [
            {
                "parameter": s.parameter,
                "baseline": s.baseline,
                "flips_at": s.flips_at,
                "direction": s.direction,
                "new_choice": s.new_choice,
            }
            for s in p.sensitivity
        ],
    }
    if simulate is not None:
        from servesim.plan.rescore import rescore  # lazy: the simulator, only when asked to simulate

        out["simulated"] = rescore(req, p.ranked, jobs=jobs, ray_address=ray_address, progress=progress,
                                   **simulate)
    return out
