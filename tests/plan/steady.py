"""Re-checking a plan's printed rows as a user would: ``predict`` at each row's rate with 4,000
prompts (shared by the plan tests)."""

from __future__ import annotations

import pytest


def steady_predict(r: dict, model: str, isl: int, osl: int, slo_ttft_s: float, *, engine: str = "vllm",
                   spec: dict | None = None, prompts: int = 4000, warmup: int = 0) -> dict:
    """``predict`` of a printed row at the row's rate with ``prompts`` Poisson requests (seed 0), as a
    user re-checks it (colocated: one replica at its share of the rate; disaggregated: the whole
    deployment, each pool in its own dtype, as the row has it)."""
    from servesim.hardware.pricer import Deployment
    from servesim.plan.predict import predict, predict_disaggregated
    from servesim.sim.batching import Benchmark

    def dep(pool: dict) -> Deployment:
        return Deployment(model, r["gpu"], pool["tp"], dtype=pool.get("dtype_flag", pool["dtype"]),
                          engine=engine, dp=pool.get("dp", 1), ep=pool.get("ep", 1),
                          max_num_batched_tokens=r["max_num_batched_tokens"])

    p, d = r["prefill"], r["decode"]
    rate = r.get("planned_rate_rps", r["max_rate_rps"])
    spec = spec or {}
    if r["architecture"] == "colocated":  # one replica at its share of the rate
        bench = Benchmark(isl=isl, osl=osl, rate_per_s=rate / d["workers"], num_prompts=prompts,
                          warmup=warmup)
        return predict(dep(d), bench, slo_ttft_s=slo_ttft_s, **spec)
    bench = Benchmark(isl=isl, osl=osl, rate_per_s=rate, num_prompts=prompts, warmup=warmup)
    return predict_disaggregated(dep(p), p["workers"], dep(d), d["workers"], 50e9, bench,
                                 slo_ttft_s=slo_ttft_s, **spec)


def check_rows(rows: list[dict], slo_ttft_s: float, slo_tpot_ms: float, attainment: float,
               **kw: object) -> int:
    """Every row: ``predict`` with 4,000 prompts at its rate meets the SLO pair and agrees with the row's
    TTFT, TPOT and output tok/s per GPU within 5%; how many rows were checked."""
    for r in rows:
        assert r["mean_tpot_ms"] <= slo_tpot_ms and r["ttft_attainment"] >= attainment
        got = steady_predict(r, slo_ttft_s=slo_ttft_s, **kw)  # type: ignore[arg-type]
        assert got["stable"], r
        assert got["mean_tpot_ms"] <= slo_tpot_ms and got["ttft_slo_attainment"] >= attainment, r
        assert got["mean_tpot_ms"] == pytest.approx(r["mean_tpot_ms"], rel=0.05)
        assert got["mean_ttft_ms"] == pytest.approx(r["mean_ttft_ms"], rel=0.05)
        replicas = r["decode"]["workers"] if r["architecture"] == "colocated" else 1
        per_gpu = got["output_throughput"] * replicas / r["gpus"]
        assert per_gpu == pytest.approx(r["output_throughput_per_gpu"], rel=0.05)
    return len(rows)
