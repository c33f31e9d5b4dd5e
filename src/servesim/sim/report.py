"""The numbers ``servesim simulate`` shows, as plain dicts (the command's JSON schema).

Pure computation: no printing, no rendering (see :mod:`servesim.render.simtext`).
Queue mode reports seconds (``*_s``); serving mode reports milliseconds
(``*_ms``) like ``servesim disagg``.  An interval is ``[low, high]`` (95%,
Student t over replications).  ``sim_wall_s`` (``sim_wall_ms`` in the serving summary, whose
times are all in ms) and ``sim_requests_per_s`` are
wall-clock measurements, the only fields that differ between two runs with
the same seed; ``timing=False`` leaves them out.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any, Unpack

from servesim._checks import ParameterError
from servesim.model.mgc import GGc
from servesim.model.queueing import MMc
from servesim.model.serving import (
    WORKLOAD_PRESETS,
    NodeSpec,
    ScenarioArgs,
    ServingResult,
    Workload,
    colocated,
    disaggregated,
    resolve_scenario,
    workload_row,
)
from servesim.model.serving import best_split as cf_best_split
from servesim.model.serving import compare as cf_compare
from servesim.sim import _kernels as kern
from servesim.sim.cluster import (
    DEFAULT_OPTIONS,
    FleetComparison,
    ServingSim,
    SimOptions,
    SimSettings,
    compare_fleets,
    decode_slots_per_node,
)
from servesim.sim.distributions import (
    Deterministic,
    Distribution,
    Exponential,
    Gamma,
    Lognormal,
    arrivals_with_cv,
    scv,
)
from servesim.sim.queue import QueueSim, simulate_queue
from servesim.sim.stats import DEFAULT_SEED, Estimate

__all__ = ["SERVICE_KINDS", "erlang_tail_curve", "queue_summary", "service_distribution", "serving_summary",
           "sim_row"]

SERVICE_KINDS: tuple[str, ...] = ("exp", "det", "lognormal", "gamma")
"""Service-time distributions of ``simulate``'s queue mode."""


def service_distribution(kind: str, mean_s: float, cv: float = 1.0) -> Distribution:
    """exp (c_s^2 = 1), det (0), lognormal or gamma with coefficient of variation ``cv``."""
    if kind == "exp":
        return Exponential(mean_s)
    if kind == "det":
        return Deterministic(mean_s)
    if kind == "lognormal":
        return Lognormal(mean_s, cv)
    if kind == "gamma":
        return Gamma(mean_s, cv)
    raise ParameterError("service", kind, f"one of {', '.join(SERVICE_KINDS)}")


def _num(x: float) -> float | None:
    return None if (math.isinf(x) or math.isnan(x)) else x


def _ci(e: Estimate, scale: float = 1.0, upper: float = math.inf) -> list[float | None]:
    """The 95% interval of a non-negative quantity (a probability: ``upper=1``), clipped to its
    range; [None, None] when there is no honest interval (fewer than 3 replications, unstable)."""
    iv = e.bounded(0.0, upper).interval
    if iv is None:
        return [None, None]
    return [iv[0] * scale, iv[1] * scale]


def _kendall(arrival_cv: float, service: str) -> str:
    a = "M" if arrival_cv == 1.0 else "G"
    s = {"exp": "M", "det": "D"}.get(service, "G")
    return f"{a}/{s}/c"


def queue_summary(
    *,
    servers: int,
    rate_per_s: float,
    service: str = "exp",
    service_mean_s: float = 1.0,
    service_cv: float = 1.0,
    arrival_cv: float = 1.0,
    requests: int = 1_000_000,
    replications: int = 10,
    warmup_fraction: float = 0.1,
    seed: int = DEFAULT_SEED,
    timing: bool = True,
) -> dict[str, Any]:
    """Simulate one G/G/c queue and set Erlang-C and the M/G/c approximations beside it."""
    dist = service_distribution(service, service_mean_s, service_cv)
    arr = arrivals_with_cv(rate_per_s, arrival_cv)
    kern.compile_queue_kernels()  # outside the timed region
    t0 = time.perf_counter()
    q = simulate_queue(servers, arr, dist, requests=requests, replications=replications,
                       warmup_fraction=warmup_fraction, seed=seed)
    wall = time.perf_counter() - t0
    ca2, cs2 = arr.scv, scv(dist)
    queues: tuple[tuple[str, MMc | GGc], ...] = (
        ("erlang_c", MMc(servers, rate_per_s, 1.0 / dist.mean)),
        *((key, GGc(servers, rate_per_s, dist.mean, ca2, cs2, key.replace("_", "-")))
          for key in ("allen_cunneen", "kimura")),
    )
    models = {key: {"mean_wait_s": _num(m.mean_wait_s()), "p_wait": m.p_wait,
                    "wait_p99_s": _num(m.wait_quantile_s(0.99)), "exact": ca2 == 1.0 and cs2 == 1.0}
              for key, m in queues}
    out: dict[str, Any] = {
        "mode": "queue",
        "model": _kendall(arrival_cv, service).replace("c", str(servers)),
        "servers": servers,
        "rate_per_s": rate_per_s,
        "service": service,
        "service_mean_s": dist.mean,
        "service_scv": cs2,
        "arrival_scv": ca2,
        "utilization": q.utilization,
        "stable": q.stable,
        "requests": q.requests,
        "measured_requests": q.measured_requests,
        "replications": q.replications,
        "warmup_fraction": q.warmup_fraction,
        "seed": seed,
        "mean_wait_s": _num(q.mean_wait_s.mean),
        "mean_wait_ci95_s": _ci(q.mean_wait_s),
        "p_wait": q.p_wait.mean,
        "p_wait_ci95": _ci(q.p_wait, upper=1.0),
        "wait_p50_s": _num(q.wait_p50_s.mean),
        "wait_p90_s": _num(q.wait_p90_s.mean),
        "wait_p99_s": _num(q.wait_p99_s.mean),
        "wait_p99_ci95_s": _ci(q.wait_p99_s),
        "closed_form": models,
        "agreement": _queue_agreement(q, models) if q.stable else [],
    }
    if timing:
        out["sim_wall_s"] = wall
        out["sim_requests_per_s"] = q.requests / wall if wall > 0 else None
    return out


def erlang_tail_curve(d: dict[str, Any], points: int = 201) -> dict[str, list[float]]:
    """The M/M/c wait tail P(W_q > t) = C exp(-(c mu - lambda) t) of a :func:`queue_summary`
    result, on ``points`` waits from 0 to 1.2 x the larger of its simulated p99 and the model's
    99.5th percentile (floored at 1e-6 for a log axis): the theory curve of its figure."""
    q = MMc(d["servers"], d["rate_per_s"], 1.0 / d["service_mean_s"])
    top = max(d["wait_p99_s"] or 0.0, q.wait_quantile_s(0.995) if q.stable else 1.0) * 1.2 or 1.0
    ts = [top * i / (points - 1) for i in range(points)]
    return {"t_s": ts, "p": [max(q.wait_tail(t), 1e-6) for t in ts]}


def _queue_agreement(q: QueueSim, models: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Closed form vs simulation per quantity.

    ``relative_error = (closed - simulated) / simulated`` (how far the formula
    is off, as a fraction of what the simulation measured) and
    ``z = (simulated - closed) / SE`` (SE from the replication spread).
    """
    rows = []
    for key, m in models.items():
        for qty, est in (("mean_wait_s", q.mean_wait_s), ("p_wait", q.p_wait), ("wait_p99_s", q.wait_p99_s)):
            cf = m[qty]
            se = est.se
            rel = None if cf is None or est.mean == 0 else (cf - est.mean) / est.mean
            z = None if cf is None or not se or math.isnan(se) else (est.mean - cf) / se
            rows.append(
                {
                    "closed_form": key,
                    "quantity": qty,
                    "closed": cf,
                    "simulated": est.mean,
                    "relative_error": rel,
                    "z": z,
                }
            )
    return rows


def _latency_ms(s: ServingSim, which: str) -> dict[str, Any]:
    lat = s.ttft_s if which == "ttft" else s.tpot_s
    return {
        "mean": _num(lat.mean.mean * 1e3),
        "mean_ci95": _ci(lat.mean, 1e3),
        "p50": _num(lat.p50.mean * 1e3),
        "p90": _num(lat.p90.mean * 1e3),
        "p99": _num(lat.p99.mean * 1e3),
        "p99_ci95": _ci(lat.p99, 1e3),
    }


def sim_row(s: ServingSim) -> dict[str, Any]:
    """A simulated fleet as a JSON-ready dict (milliseconds, req/s)."""
    return {
        "split": s.split,
        "stable": s.stable,
        "prefill_utilization": s.prefill_utilization,
        "decode_utilization": s.decode_utilization,
        "link_utilization": s.link_utilization,
        "ttft_ms": _latency_ms(s, "ttft"),
        "tpot_ms": _latency_ms(s, "tpot"),
        "prefill_wait_ms": _num(s.prefill_wait_s.mean * 1e3),
        "link_wait_ms": _num(s.link_wait_s.mean * 1e3),
        "decode_wait_ms": _num(s.decode_wait_s.mean * 1e3),
        "attainment": s.attainment.mean,
        "attainment_ci95": _ci(s.attainment, upper=1.0),
        "goodput_rps": s.goodput_rps.mean,
        "goodput_ci95": _ci(s.goodput_rps),
        "meets_attainment_target": s.meets_target,
        "goodput_at_target_rps": s.goodput_at_target_rps,
    }


def _cf_row(r: ServingResult, rate_per_s: float) -> dict[str, Any]:
    """The closed form's figures; TTFT p99 = S + t_xfer + the M/M/c wait quantile."""
    q = MMc(r.prefill_nodes, rate_per_s, 1.0 / r.prefill_s)
    p99 = q.wait_quantile_s(0.99) + r.prefill_s + r.kv_transfer_s if r.stable else math.inf
    return {
        "split": r.split,
        "stable": r.stable,
        "ttft_mean_ms": _num(r.ttft_mean_s * 1e3),
        "ttft_p99_ms": _num(p99 * 1e3),
        "tpot_ms": r.tpot_s * 1e3,
        "p_ttft_ok": r.p_ttft_ok,
        "goodput_rps": r.goodput_rps,
    }


def _mgc_rows(
    s: ServingSim,
    wl_rate: float,
    prompt: Distribution,
    node: NodeSpec,
    arrival_scv: float,
    settings: SimSettings,
) -> dict[str, Any]:
    """The prefill queue's mean wait: Erlang-C, Allen-Cunneen, Kimura vs the simulation (ms)."""
    mean_s = prompt.mean / node.prefill_tokens_per_s
    # service c_s^2: P / R_p has the prompt's c^2; exponential service multiplies by an
    # independent Exp(1): E[S^2] = 2 E[(P/R_p)^2], so c_s^2 = 2 (1 + c_P^2) - 1
    cs2 = scv(prompt) if settings.prefill_service == "deterministic" else 2.0 * (1.0 + scv(prompt)) - 1.0
    c = s.prefill_nodes
    ac = GGc(c, wl_rate, mean_s, arrival_scv, cs2, "allen-cunneen")
    ki = GGc(c, wl_rate, mean_s, arrival_scv, cs2, "kimura")
    sim = s.prefill_wait_s.mean
    return {
        "servers": c,
        "service_scv": cs2,
        "arrival_scv": arrival_scv,
        "erlang_c_ms": _num(ac.mmc.mean_wait_s() * 1e3),
        "allen_cunneen_ms": _num(ac.mean_wait_s() * 1e3),
        "kimura_ms": _num(ki.mean_wait_s() * 1e3),
        "simulated_ms": _num(sim * 1e3),
        "simulated_ci95_ms": _ci(s.prefill_wait_s, 1e3),
    }


def _assumptions(settings: SimSettings, node: NodeSpec, arrival_cv: float, prompt_cv: float,
                 warmup_fraction: float) -> dict[str, Any]:
    """What a serving summary's simulation assumes, in words."""
    return {
        "prefill_service": settings.prefill_service,
        "link_contention": settings.link_contention,
        "kv_streaming": settings.kv_streaming,
        "decode_slots_per_node": decode_slots_per_node(node, settings) if settings.decode_slots else None,
        "arrivals": "poisson" if arrival_cv == 1.0 else f"gamma, cv {arrival_cv:g}",
        "prompt_tokens": "fixed" if prompt_cv == 0.0 else f"lognormal, cv {prompt_cv:g}",
        "ttft": "arrival to first token; disaggregated: to the start of decode (KV on the decode node)",
        "tpot_colocated": "TPOT_base (1 + beta f), f = prefill busy fraction of the node over the"
        " request's own decode window",
        "warmup": f"first {warmup_fraction:g} of each replication dropped",
    }


def node_row(node: NodeSpec, source: str, *, kv_bytes: bool = True) -> dict[str, Any]:
    """The node a simulation ran on, as its JSON shows it (the KV bytes per token where asked)."""
    row: dict[str, Any] = {
        "source": source,
        "model": node.kv.name,
        "prefill_tokens_per_s": node.prefill_tokens_per_s,
        "decode_tokens_per_s": node.decode_tokens_per_s,
        "tpot_base_ms": node.tpot_base_s * 1e3,
    }
    if kv_bytes:
        row["kv_bytes_per_token"] = node.kv.bytes_per_token
    return row


def _side_by_side(cmp: FleetComparison, cf_co: ServingResult, cf_de: ServingResult, rate_per_s: float,
                  prompt: Distribution, node: NodeSpec, arrival_scv: float,
                  settings: SimSettings) -> dict[str, Any]:
    """Each architecture's closed form beside its simulation, the prefill queue's models, the winners."""
    return {
        "colocated": {"closed_form": _cf_row(cf_co, rate_per_s), "simulated": sim_row(cmp.colocated)},
        "disaggregated": {
            "closed_form": _cf_row(cf_de, rate_per_s),
            "simulated": sim_row(cmp.disaggregated),
        },
        "prefill_queue": {
            "colocated": _mgc_rows(cmp.colocated, rate_per_s, prompt, node, arrival_scv, settings),
            "disaggregated": _mgc_rows(cmp.disaggregated, rate_per_s, prompt, node, arrival_scv, settings),
        },
        "winner": {"closed_form": cf_compare(cf_co, cf_de, rate_per_s), "simulated": cmp.winner},
    }


def serving_summary(
    preset: str = "chat",
    *,
    nodes: int = 8,
    workload: Workload | None = None,
    split: tuple[int, int] | None = None,
    prompt_cv: float = 0.0,
    arrival_cv: float = 1.0,
    options: SimOptions = DEFAULT_OPTIONS,
    timing: bool = True,
    **scenario: Unpack[ScenarioArgs],
) -> dict[str, Any]:
    """Colocated vs a disaggregated split: closed form beside the simulation, per architecture.

    ``split`` defaults to the closed form's best split; ``prompt_cv`` > 0 draws
    prompt lengths from a lognormal of the preset's mean; ``arrival_cv`` != 1
    makes arrivals gamma-bursty.  ``options`` gives the simulation's settings, size, warm-up,
    attainment target and seed (its arrivals and lengths are the ones ``arrival_cv`` and
    ``prompt_cv`` say).  ``workload`` and ``scenario`` as in
    :func:`servesim.plan.summary.disagg_summary`.
    """
    wl, ln, node, beta, source = resolve_scenario(WORKLOAD_PRESETS[preset] if workload is None else workload,
                                                  **scenario)
    cf_co = colocated(wl, node, nodes, beta)
    cf_de = (
        cf_best_split(wl, node, nodes, ln)
        if split is None
        else disaggregated(wl, node, split[0], split[1], ln)
    )
    prompt: Distribution = (
        Deterministic(float(wl.prompt_tokens))
        if prompt_cv == 0.0
        else Lognormal(float(wl.prompt_tokens), prompt_cv)
    )
    arr = arrivals_with_cv(wl.rate_per_s, arrival_cv)
    options = replace(options, arrivals=arr, prompt_tokens=None if prompt_cv == 0.0 else prompt)
    settings = options.settings
    t0 = time.perf_counter()
    cmp = compare_fleets(wl, node, nodes, ln, beta=beta, split=(cf_de.prefill_nodes, cf_de.decode_nodes),
                         options=options)
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {
        "mode": "serving",
        "preset": preset,
        "assumptions": _assumptions(settings, node, arrival_cv, prompt_cv, options.warmup_fraction),
        "nodes": nodes,
        "beta": beta,
        "node": node_row(node, source),
        "link": {"name": ln.name, "GBps": ln.GBps},
        "workload": workload_row(wl, options.attainment_target),
        "requests": cmp.colocated.requests + cmp.disaggregated.requests,
        "requests_per_architecture": cmp.colocated.requests,
        "replications": options.replications,
        "seed": options.seed,
        **_side_by_side(cmp, cf_co, cf_de, wl.rate_per_s, prompt, node, arr.scv, settings),
    }
    if timing:
        out["sim_wall_ms"] = wall * 1e3  # every time of a serving summary is in ms
        out["sim_requests_per_s"] = out["requests"] / wall if wall > 0 else None
    return out
