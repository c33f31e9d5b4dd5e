"""The engine model confirms what the plan prints.

The capacity plan screens its candidates with the closed form at load
(:mod:`servesim.plan.capacity`, microseconds each).  Every deployment it then
prints is confirmed by the iteration-level engine model that ``predict`` runs (the
reference): its **sustainable rate** is the largest Poisson rate at which
``predict --rate`` of that deployment meets the SLO pair (stable, mean TPOT within
its SLO, the share of requests whose TTFT is within its SLO at least the
attainment target), and its TTFT and TPOT are that run's.  A colocated row of
``n`` replicas is one replica confirmed at ``rate / n`` (replicas share Poisson
traffic evenly); a disaggregated row is the whole deployment's engine loop.

The search: the closed form's rate ``r0`` is tried first; the bracket grows (x1.25)
or shrinks (x0.8) until it holds a passing and a failing rate, then
:data:`BISECT_STEPS` bisections narrow it to about 3%.  Each trial is one
``predict`` run with the default benchmark of ``predict --rate`` (500 Poisson
requests, seed 0), so ``predict --rate R`` of a printed row reproduces the row's
figures.

Nothing here prints.
"""

from __future__ import annotations

from typing import Any

from servesim._checks import InputError, ParameterError

__all__ = ["BISECT_STEPS", "confirm_row", "operating_point", "row_deployments"]

BISECT_STEPS = 3
"""Bisections after bracketing (the bracket's width x 1/8: the rate to about 3%)."""

_GROW, _SHRINK, _TRIES = 1.25, 0.8, 14


def row_deployments(row: dict[str, Any], q: Any, gpu: str) -> tuple[Any, Any]:
    """The prefill and decode :class:`~servesim.plan.predict.Deployment` of a plan row."""
    from servesim.hardware.pricer import Deployment

    def dep(pool: dict[str, Any]) -> Any:
        return Deployment(q.model, gpu, pool["tp"], dtype=pool.get("dtype_flag", pool["dtype"]),
                          kv_dtype=q.kv_dtype, engine=q.engine, dp=pool.get("dp", 1), ep=pool.get("ep", 1),
                          max_num_batched_tokens=row["max_num_batched_tokens"], ep_comm=q.ep_comm)

    return dep(row["prefill"]), dep(row["decode"])


def _run(row: dict[str, Any], q: Any, gpu: str, rate: float, catalog: Any) -> dict[str, Any]:
    """``predict --rate`` of the row at ``rate`` (its whole deployment's), SLO attainment included."""
    from servesim.plan.predict import predict, predict_disaggregated
    from servesim.sim.batching import Benchmark

    pre, dec = row_deployments(row, q, gpu)
    spec = None if row["speculation"] == "none" else row["speculation"]
    # the k the screen picked where it searched k (no --k), which predict prices at the acceptance
    # published at (or nearest) it
    k = getattr(q, "k", None) or (row.get("speculative_k") or None)
    acc = {} if spec is None else {"k": k,
                                   "acceptance_length": getattr(q, "acceptance_length", None),
                                   "traffic": getattr(q, "traffic", None)}
    if row["architecture"] == "colocated":
        n = row["prefill"]["workers"]
        bench = Benchmark(isl=q.isl, osl=q.osl, rate_per_s=rate / n)
        return predict(dec, bench, spec=spec, catalog=catalog, slo_ttft_s=q.slo_ttft_s, **acc)
    bench = Benchmark(isl=q.isl, osl=q.osl, rate_per_s=rate)
    return predict_disaggregated(pre, row["prefill"]["workers"], dec, row["decode"]["workers"],
                                 q.link_bytes_per_s, bench, spec=spec, catalog=catalog,
                                 slo_ttft_s=q.slo_ttft_s, **acc)


def _meets(d: dict[str, Any], q: Any) -> bool:
    return bool(d["stable"]) and d["mean_tpot_ms"] is not None and d["mean_tpot_ms"] <= q.slo_tpot_s * 1e3 \
        and d["ttft_slo_attainment"] >= q.attainment


def confirm_row(row: dict[str, Any], q: Any, gpu: str, catalog: Any = None) -> dict[str, Any] | None:
    """``row`` with the engine model's sustainable rate, TTFT, TPOT and attainment (see the module
    docstring); None when the engine model sustains no rate for it or cannot price it."""
    cache: dict[float, dict[str, Any]] = {}

    def at(r: float) -> dict[str, Any]:
        if r not in cache:
            cache[r] = _run(row, q, gpu, r, catalog)
        return cache[r]

    try:
        r0 = row["max_rate_rps"]
        good = bad = None
        r = r0
        for _ in range(_TRIES):
            if _meets(at(r), q):
                good = r
                if bad is not None:
                    break
                r *= _GROW
            else:
                bad = r
                if good is not None:
                    break
                r *= _SHRINK
        if good is None:
            return None
        if bad is not None:
            lo, hi = min(good, bad), max(good, bad)
            for _ in range(BISECT_STEPS):
                mid = (lo + hi) / 2
                if _meets(at(mid), q):
                    lo = mid
                else:
                    hi = mid
            good = lo
    except (ParameterError, InputError):
        return None
    d = at(good)
    out_tps = good * q.osl
    return {
        **row,
        "max_rate_rps": good,
        "output_throughput_per_gpu": out_tps / row["gpus"],
        "tokens_per_s_per_user": 1e3 / d["mean_tpot_ms"] if d["mean_tpot_ms"] else None,
        "mean_ttft_ms": d["mean_ttft_ms"], "p99_ttft_ms": d["p99_ttft_ms"], "mean_tpot_ms": d["mean_tpot_ms"],
        "ttft_attainment": d["ttft_slo_attainment"], "decode_batch": d["decode_batch"],
        **({"speculative_k": d["speculation"]["k"], "acceptance": d["speculation"]["acceptance"]}
           if "speculation" in d else {}),
        "dollars_per_million_output_tokens": (row["dollars_per_million_output_tokens"] * row["max_rate_rps"]
                                              / good if row["dollars_per_million_output_tokens"] else None),
        "closed_form": {"max_rate_rps": row["max_rate_rps"], "mean_ttft_ms": row["mean_ttft_ms"],
                        "mean_tpot_ms": row["mean_tpot_ms"]},
        "confirmed_by": "engine model (predict --rate)",
        "engine_trials": len(cache),
    }


def operating_point(row: dict[str, Any], q: Any, gpu: str, rate: float,
                    catalog: Any = None) -> dict[str, Any]:
    """The engine model's run of a confirmed row at a lower ``rate`` (a Pareto operating point)."""
    return _run(row, q, gpu, rate, catalog)

