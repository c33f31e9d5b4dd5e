"""vLLM's end-to-end latency and ITL spread keys (issue 50): E2EL is a request's TTFT plus its
(osl - 1) gaps, so with one output length its mean is mean TTFT + (osl - 1) x mean TPOT exactly."""

from __future__ import annotations

import math

import pytest

from servesim.hardware.pricer import Deployment
from servesim.plan.predict import predict, predict_disaggregated
from servesim.sim.batching import Benchmark


@pytest.mark.parametrize("bench", [Benchmark(1000, 200, rate_per_s=2.0, num_prompts=120, seed=3),
                                   Benchmark(500, 64, concurrency=8, num_prompts=64)])
def test_mean_e2el_is_ttft_plus_the_gaps(bench: Benchmark) -> None:
    d = predict(Deployment("meta-llama/Llama-3.1-8B-Instruct", "h100-sxm"), bench)
    gaps = (bench.osl - 1) * d["mean_tpot_ms"]
    assert d["mean_e2el_ms"] == pytest.approx(d["mean_ttft_ms"] + gaps, rel=1e-9)
    assert d["median_e2el_ms"] <= d["p99_e2el_ms"]
    assert d["std_itl_ms"] >= 0 and not math.isnan(d["std_itl_ms"])


def test_disaggregated_e2el_too() -> None:
    dep = Deployment("meta-llama/Llama-3.1-8B-Instruct", "h100-sxm")
    bench = Benchmark(1000, 100, rate_per_s=2.0, num_prompts=80, seed=3)
    d = predict_disaggregated(dep, 1, dep, 1, 50e9, bench)
    gaps = (bench.osl - 1) * d["mean_tpot_ms"]
    assert d["mean_e2el_ms"] == pytest.approx(d["mean_ttft_ms"] + gaps, rel=1e-9)
