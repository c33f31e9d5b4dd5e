"""The numbers ``simulate --model`` shows: the iteration-level engine simulation
(:mod:`servesim.sim.engine`) beside the closed form at load (:mod:`servesim.plan.capacity`), for
colocated replicas, a disaggregated prefill/decode pair of pools, or a trace replayed through
colocated replicas.  Plain dicts; rendering is :func:`servesim.render.predict.engine_sim_text`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from servesim.hardware.pricer import Deployment, build_step_model
from servesim.plan.capacity import colocated_at_load, disaggregated_at_load
from servesim.plan.predict import check_context
from servesim.sim.engine import replay_colocated, simulate_colocated, simulate_disaggregated

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog
    from servesim.plan.capacity import LoadPoint

__all__ = ["engine_summary", "engine_trace_summary"]

NO_SLO_S = 1e9
"""The TTFT SLO the closed form is given when none is: large enough never to bind."""


def _with_closed_form(data: dict[str, Any], cf: LoadPoint) -> dict[str, Any]:
    """``data`` with ``stable`` and the closed form at load (``cf``, a LoadPoint) beside it, in ms."""
    ok = cf.stable
    data.update({"stable": ok, "closed_form": {
        "stable": ok, "mean_ttft_ms": cf.ttft_mean_s * 1e3 if ok else None,
        "p99_ttft_ms": cf.ttft_p99_s * 1e3 if ok else None, "mean_tpot_ms": cf.tpot_s * 1e3 if ok else None,
        "decode_batch": cf.decode_batch if ok else None, "reason": cf.reason}})
    return data


def engine_summary(
    prefill: Deployment,
    decode: Deployment | None,
    *,
    rate_per_s: float,
    isl: int,
    osl: int,
    replicas: int = 1,
    prefill_workers: int = 1,
    decode_workers: int = 1,
    link_bytes_per_s: float = 0.0,
    shared_link: bool = False,
    requests: int = 2000,
    seed: int = 0,
    slo_ttft_s: float | None = None,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """Colocated (``decode`` None: ``replicas`` copies of ``prefill``) or disaggregated
    (``prefill_workers`` x ``prefill`` -> link -> ``decode_workers`` x ``decode``) at ``rate_per_s``,
    simulated and in closed form."""
    slo = NO_SLO_S if slo_ttft_s is None else slo_ttft_s
    check_context(build_step_model(prefill, catalog)[1], isl, isl + osl)
    if decode is None:
        sm, _, mem = build_step_model(prefill, catalog)
        data = simulate_colocated(sm, mem, replicas, rate_per_s, isl, osl, requests=requests, seed=seed)
        cf = colocated_at_load(sm, mem, replicas, rate_per_s, isl, osl, slo)
        gpus = replicas * prefill.tp * prefill.dp  # a replica spans tp x dp GPUs
    else:
        psm, _, _ = build_step_model(prefill, catalog)
        dsm, _, dmem = build_step_model(decode, catalog)
        data = simulate_disaggregated(psm, prefill_workers, dsm, dmem, decode_workers, link_bytes_per_s,
                                      rate_per_s, isl, osl, requests=requests, seed=seed,
                                      link_contention=shared_link)
        cf = disaggregated_at_load(psm, prefill_workers, dsm, dmem, decode_workers, link_bytes_per_s,
                                   rate_per_s, isl, osl, slo)
        gpus = prefill.tp * prefill.dp * prefill_workers + decode.tp * decode.dp * decode_workers
    data.update({"model": prefill.model, "gpu": prefill.gpu, "gpus": gpus, "rate": rate_per_s, "isl": isl,
                 "osl": osl, "seed": seed})
    return _with_closed_form(data, cf)


def engine_trace_summary(
    deployment: Deployment,
    arrival_s: Sequence[float],
    lengths: Sequence[tuple[int, int]],
    *,
    replicas: int = 1,
    seed: int = 0,
    slo_ttft_s: float | None = None,
    trace: str = "",
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """A trace (arrival times and (prompt, output) tokens per request) replayed through the engine
    loop on colocated replicas (batch and TPOT move with the load), beside the closed form at the
    trace's mean lengths and mean rate ``n / (t_last - t_first)``.  The arrivals must span a
    positive time."""
    sm, _, mem = build_step_model(deployment, catalog)
    arr, lens = list(arrival_s), list(lengths)
    data = replay_colocated(sm, mem, replicas, arr, lens, seed=seed)
    rate = len(arr) / (arr[-1] - arr[0])
    isl = max(1, round(sum(p for p, _ in lens) / len(lens)))
    osl = max(1, round(sum(o for _, o in lens) / len(lens)))
    cf = colocated_at_load(sm, mem, replicas, rate, isl, osl, NO_SLO_S if slo_ttft_s is None else slo_ttft_s)
    data.update({"trace": trace, "requests": len(arr), "model": deployment.model, "gpu": deployment.gpu,
                 "gpus": replicas * deployment.tp * deployment.dp, "rate": rate, "isl": isl, "osl": osl,
                 "seed": seed})
    return _with_closed_form(data, cf)
