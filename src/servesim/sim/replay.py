"""Replay a real request trace through colocated and every disaggregated split.

Each deployment of the fleet sees the trace's own arrival times and its own
prompt and output lengths (:func:`servesim.sim.cluster.replay_trace`).  Beside
each, the closed form priced from the trace's mean lengths and mean rate
(the caller's :func:`servesim.inputs.traces.workload_from_trace`): the gap between the two columns
is what burstiness, the spread of lengths and queueing at the decode side add.

Prefix caching (traces with ``hash_ids``, i.e. Mooncake): a request whose
leading blocks were seen before skips their prefill, and in a disaggregated
deployment their transfer too (the decode side is assumed to hold the same
prefix, as in Mooncake's shared KV store).  The replay then uses
``prompt - cached`` tokens of prefill and transfer work per request.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from servesim._trace import TraceRecord
from servesim.model.kvcache import Link
from servesim.model.serving import (
    NodeSpec,
    ServingResult,
    Workload,
    best_split,
    colocated,
    compare,
    disaggregated,
    workload_row,
)
from servesim.sim.cluster import (
    DEFAULT_SETTINGS,
    REPLAY_OPTIONS,
    Colocated,
    Disaggregated,
    Fleet,
    Requests,
    ServingSim,
    SimSettings,
    compare_sims,
    pick_best_split,
    replay_trace,
)
from servesim.sim.report import node_row, sim_row
from servesim.sim.stats import DEFAULT_SEED

__all__ = ["trace_replay_summary"]


def _requests(tr: TraceRecord, prefix_cache: bool) -> Requests:
    prompt = tr.prompt_tokens.astype(np.float64)
    if prefix_cache:
        prompt = np.maximum(prompt - tr.cached_prompt_tokens, 1.0)
    # Zero-length outputs exist in real traces (Azure); a request emits at least one token.
    output = np.maximum(tr.output_tokens.astype(np.float64), 1.0)
    return Requests(tr.arrival_s, prompt, output)


def _fleets(nodes: int, beta: float, link: Link) -> list[Fleet]:
    out: list[Fleet] = [Colocated(nodes, beta)]
    out += [Disaggregated(p, nodes - p, link) for p in range(1, nodes)]
    return out


def _trace_row(tr: TraceRecord, rate: float) -> dict[str, Any]:
    return {
        "path": tr.path,
        "format": tr.format,
        "requests": tr.requests,
        "rate_per_s": rate,
        "mean_prompt_tokens": float(tr.prompt_tokens.mean()),
        "mean_output_tokens": float(tr.output_tokens.mean()),
        "prefix_info": tr.has_prefix_info,
        "cached_prompt_fraction": (float(tr.cached_prompt_tokens.sum() / tr.prompt_tokens.sum())
                                   if tr.has_prefix_info else None),
    }


def _assumptions(settings: SimSettings) -> dict[str, Any]:
    return {
        "closed_form": "the trace's mean prompt/output lengths and mean rate, Poisson, one length",
        "replay": "the trace's own arrival times and lengths; prefill deterministic per length",
        "prefill_service": settings.prefill_service,
        "link_contention": settings.link_contention,
        "kv_streaming": settings.kv_streaming,
        "decode_slots": settings.decode_slots,
    }


def _fleet_row(fleet: Fleet, nodes: int, cf: ServingResult, s: ServingSim) -> dict[str, Any]:
    """One fleet's closed form beside its replay."""
    return {
        "deployment": fleet.split if isinstance(fleet, Disaggregated) else f"colocated x{nodes}",
        "architecture": fleet.architecture,
        "closed_form": {
            "stable": cf.stable,
            "ttft_mean_ms": cf.ttft_mean_s * 1e3 if cf.stable else None,
            "tpot_ms": cf.tpot_s * 1e3,
            "goodput_rps": cf.goodput_rps,
        },
        "replay": sim_row(s),
    }


def trace_replay_summary(
    tr: TraceRecord,
    node: NodeSpec,
    *,
    workload: Workload,
    nodes: int,
    link: Link,
    beta: float,
    settings: SimSettings = DEFAULT_SETTINGS,
    prefix_cache: bool = False,
    attainment_target: float = 0.9,
    seed: int = DEFAULT_SEED,
    node_source: str = "",
) -> dict[str, Any]:
    """Closed form vs replay (the trace itself) for every fleet of ``nodes`` nodes.

    ``workload`` is the closed form's view of the trace (its mean lengths and mean rate,
    :func:`servesim.inputs.traces.workload_from_trace`) and carries the two SLOs.
    """
    wl = workload
    reqs = _requests(tr, prefix_cache=False)
    options = replace(REPLAY_OPTIONS, settings=settings, attainment_target=attainment_target, seed=seed)

    def replay(r: Requests, fleet: Fleet) -> ServingSim:
        return replay_trace(r, node, fleet, slo_ttft_s=wl.slo_ttft_s, slo_tpot_s=wl.slo_tpot_s,
                            options=options)

    rows: list[dict[str, Any]] = []
    sims: list[ServingSim] = []
    cfs: list[ServingResult] = []
    for fleet in _fleets(nodes, beta, link):
        cf = (colocated(wl, node, nodes, beta) if isinstance(fleet, Colocated)
              else disaggregated(wl, node, fleet.prefill_nodes, fleet.decode_nodes, link))
        s = replay(reqs, fleet)
        sims.append(s)
        cfs.append(cf)
        rows.append(_fleet_row(fleet, nodes, cf, s))
    rate = reqs.rate_per_s
    best_co = sims[0]
    best_de = pick_best_split(sims[1:], rate)
    cf_co = cfs[0]
    cf_best = best_split(wl, node, nodes, link)
    out: dict[str, Any] = {
        "mode": "trace",
        "trace": _trace_row(tr, rate),
        "assumptions": _assumptions(settings),
        "nodes": nodes,
        "beta": beta,
        "link": {"name": link.name, "GBps": link.GBps},
        "node": node_row(node, node_source, kv_bytes=False),
        "workload": workload_row(wl, attainment_target),
        "rows": rows,
        "best": {
            "closed_form": {"colocated_goodput_rps": cf_co.goodput_rps, "split": cf_best.split,
                            "split_goodput_rps": cf_best.goodput_rps,
                            "winner": compare(cf_co, cf_best, wl.rate_per_s)},
            "replay": {"colocated_goodput_rps": best_co.goodput_rps.mean, "split": best_de.split,
                       "split_goodput_rps": best_de.goodput_rps.mean,
                       "winner": compare_sims(best_co, best_de, rate)},
        },
    }
    if prefix_cache:
        if not tr.has_prefix_info:
            out["prefix_cache"] = None
        else:
            cached = _requests(tr, prefix_cache=True)
            effect = []
            for s in (best_co, best_de):
                best: Fleet = (Colocated(nodes, beta) if s.architecture == "colocated" else
                               Disaggregated(s.prefill_nodes, s.decode_nodes, link))
                c = replay(cached, best)
                effect.append({"deployment": rows[0]["deployment"] if s is best_co else s.split,
                               "architecture": s.architecture,
                               "without_cache": sim_row(s), "with_cache": sim_row(c)})
            out["prefix_cache"] = effect
    return out
