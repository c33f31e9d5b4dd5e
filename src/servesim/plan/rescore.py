"""Re-score the planner's top candidates with the simulator, and say where the ranking changes.

Each candidate deployment of :func:`servesim.plan.planner.plan` is simulated under
the realistic settings (deterministic prefill, per-node KV links, finite decode
slots): TTFT/TPOT percentiles, attainment and goodput with 95% intervals.
Speculative decoding enters as in the planner: TPOT divided by the candidate's
speedup S, i.e. the simulated node's TPOT_base is ``TPOT_base / S`` while its
decode slots stay those of the plain node (speculation changes step time, not
memory).  The simulated ranking uses the planner's rules: meeting the
attainment target first, then goodput, then the simpler deployment.

Candidates are independent, so they run through :func:`servesim.sim.parallel.map_tasks`
(serially, on local processes, or on a Ray cluster), one task each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from servesim.model.serving import NodeSpec, tie_step
from servesim.plan.planner import Candidate, PlanRequest
from servesim.sim.cluster import (
    DEFAULT_SETTINGS,
    Colocated,
    Disaggregated,
    Fleet,
    SimOptions,
    SimSettings,
    decode_slots_per_node,
    run,
    sample_requests,
    simulate_serving,
)
from servesim.sim.parallel import map_tasks
from servesim.sim.report import sim_row
from servesim.sim.stats import DEFAULT_SEED

__all__ = ["rescore", "simulate_candidate", "ttft_samples"]


def _deployment(req: PlanRequest, c: Candidate) -> Fleet:
    if c.architecture == "colocated":
        return Colocated(req.nodes, req.beta)
    return Disaggregated(c.prefill_nodes, c.decode_nodes, req.link)


def _speculative_node(req: PlanRequest, c: Candidate, settings: SimSettings) -> tuple[NodeSpec, SimSettings]:
    """The node and settings that simulate candidate ``c``: with speculation, TPOT_base / S and
    the plain node's decode slots (see the module docstring)."""
    if not c.speculative_k:
        return req.node, settings
    slots = decode_slots_per_node(req.node, settings)
    node = replace(req.node, tpot_base_s=req.node.tpot_base_s / c.speculative_speedup)
    return node, replace(settings, slots_per_node=slots)


def simulate_candidate(
    req: PlanRequest, c: Candidate, requests: int, replications: int, seed: int, settings: SimSettings
) -> dict[str, Any]:
    """One candidate simulated (a module-level function, so that it can run in another process)."""
    node, settings = _speculative_node(req, c, settings)
    s = simulate_serving(req.workload, node, _deployment(req, c),
                         SimOptions(settings=settings, requests=requests, replications=replications,
                                    attainment_target=req.attainment_target, seed=seed))
    return {"label": c.label, **sim_row(s)}


def rescore(
    req: PlanRequest,
    ranked: list[Candidate],
    *,
    top: int = 5,
    requests: int = 50_000,
    replications: int = 4,
    seed: int = DEFAULT_SEED,
    settings: SimSettings = DEFAULT_SETTINGS,
    jobs: int = 1,
    ray_address: str | None = None,
    progress: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Simulate the closed form's ``top`` candidates and rank them again by the simulation."""
    chosen = ranked[:top]
    tasks = [(req, c, requests, replications, seed, settings) for c in chosen]
    sims = map_tasks(simulate_candidate, tasks, jobs=jobs, ray_address=ray_address, progress=progress)
    rate = req.workload.rate_per_s
    best = {m: max((x["goodput_rps"] for x in sims if x["meets_attainment_target"] == m), default=0.0)
            for m in (True, False)}

    def key(i: int) -> tuple[bool, int, int, int]:
        # As the planner: target first, then goodput in tie steps below the best, then simplicity.
        s = sims[i]
        met = s["meets_attainment_target"]
        return (not met, tie_step(s["goodput_rps"], best[met], rate), chosen[i].complexity, i)

    order = sorted(range(len(chosen)), key=key)
    rows = []
    for new_rank, i in enumerate(order, start=1):
        c = chosen[i]
        rows.append({
            "label": c.label,
            "closed_form_rank": i + 1,
            "simulated_rank": new_rank,
            "closed_form_goodput_rps": c.goodput_rps,
            "closed_form_attainment": c.attainment,
            "simulated": sims[i],
        })
    changed = order != list(range(len(chosen)))
    return {
        "settings": {
            "prefill_service": settings.prefill_service,
            "link_contention": settings.link_contention,
            "decode_slots": settings.decode_slots,
            "requests": requests,
            "replications": replications,
            "seed": seed,
        },
        "rows": rows,
        "ranking_changed": changed,
        "top_changed": bool(order) and order[0] != 0,
    }


def ttft_samples(
    req: PlanRequest,
    candidates: list[Candidate],
    *,
    requests: int = 20_000,
    seed: int = DEFAULT_SEED,
    settings: SimSettings = DEFAULT_SETTINGS,
) -> dict[str, list[float]]:
    """Per-request simulated TTFT (s) of each candidate, on the same Poisson requests.

    Common random numbers: every candidate sees the same arrival times.  The
    first 10% of requests (the empty-system start) are left out.  Unstable
    candidates are skipped: their TTFT grows without bound with the horizon.
    """
    import numpy as np

    out: dict[str, list[float]] = {}
    reqs = sample_requests(req.workload, np.random.default_rng(seed), requests)
    skip = requests // 10
    for c in candidates:
        if not c.result.stable:
            continue
        node, s = _speculative_node(req, c, settings)
        times = run(reqs, node, _deployment(req, c), s, np.random.default_rng(seed + 1))
        out[c.label] = [float(x) for x in times.ttft_s[skip:]]
    return out
