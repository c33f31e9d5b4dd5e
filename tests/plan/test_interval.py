"""Prediction intervals (servesim.plan.interval): quantiles by hand, nesting, widening, the shipped table."""

from __future__ import annotations

import math

import pytest

from servesim._checks import ParameterError
from servesim.plan.interval import (
    FALLBACK_WIDEN,
    METRICS,
    interval,
    load_band,
    prediction_interval,
    weighted_quantile,
)


def test_weighted_quantile_by_hand() -> None:
    # One source of three errors (weight 1/3 each) beside a source of one (weight 1): total 2.
    pairs = [[-0.3, 1 / 3], [-0.1, 1 / 3], [0.0, 1 / 3], [0.5, 1.0]]
    assert weighted_quantile(pairs, 0.1) == -0.3  # 0.2 of weight needed: the first holds 1/3
    assert weighted_quantile(pairs, 0.5) == 0.0  # 1.0 needed: reached at the third
    assert weighted_quantile(pairs, 0.6) == 0.5  # 1.2 needed: only the lone source's error reaches it
    assert weighted_quantile(pairs, 1.0) == 0.5


def test_interval_inverts_the_relative_error() -> None:
    # e = (p - m) / m, so m = p / (1 + e): errors of -50% and +100% allow m in [p/2, 2p].
    errors = [[-0.5, 1.0], [0.0, 1.0], [1.0, 1.0]]
    lo, hi = interval(100.0, errors, 0.99)
    assert lo == pytest.approx(50.0) and hi == pytest.approx(200.0)


def test_a_wider_level_holds_the_narrower_and_a_fallback_widens() -> None:
    errors = [[x / 20, 1.0] for x in range(-8, 9)]
    lo8, hi8 = interval(10.0, errors, 0.8)
    lo5, hi5 = interval(10.0, errors, 0.5)
    assert lo8 <= lo5 <= hi5 <= hi8
    wlo, whi = interval(10.0, errors, 0.8, FALLBACK_WIDEN)
    mid = 10.0  # median error 0: the centre in log space is the prediction itself
    assert math.log(mid / wlo) == pytest.approx(FALLBACK_WIDEN * math.log(mid / lo8))
    assert math.log(whi / mid) == pytest.approx(FALLBACK_WIDEN * math.log(hi8 / mid))


def test_load_bands() -> None:
    assert [load_band(x) for x in (1, 15.9, 16, 64, 64.1, math.inf)] == \
        ["light", "light", "medium", "heavy", "heavy", "heavy"]


def test_shipped_table_gives_every_metric_an_interval_around_plausible_values() -> None:
    pred = {"mean_ttft_ms": 200.0, "p99_ttft_ms": 400.0, "mean_tpot_ms": 10.0, "mean_itl_ms": 10.0,
            "output_throughput": 1000.0}
    for engine in ("vllm", "sglang", "trtllm"):
        for moe in (False, True):
            pi = prediction_interval(pred, engine=engine, moe=moe, in_flight=32, fallback=False)
            assert pi["level"] == 0.8
            for m in METRICS:
                lo, hi = pi[m]
                assert 0 < lo < hi, (engine, moe, m)
                assert lo < 2 * pred[m] and hi > pred[m] / 2, (engine, moe, m)
            wide = prediction_interval(pred, engine=engine, moe=moe, in_flight=32, fallback=True)
            assert all(wide[m][0] <= pi[m][0] and wide[m][1] >= pi[m][1] for m in METRICS)
            assert "widened" in wide["basis"] and "widened" not in pi["basis"]


def test_an_unstable_prediction_has_no_interval_and_a_bad_level_is_refused() -> None:
    pi = prediction_interval({"mean_ttft_ms": None}, engine="vllm", moe=False, in_flight=1, fallback=False)
    assert pi["mean_ttft_ms"] is None
    for bad in (0.0, 1.0, -0.5, 2):
        with pytest.raises(ParameterError, match="interval_level"):
            prediction_interval({}, level=bad, engine="vllm", moe=False, in_flight=1, fallback=False)


def test_tensorrt_llm_takes_the_kv_dtype_a_modelopt_checkpoint_states() -> None:
    # nvidia/DeepSeek-V3.1-NVFP4's hf_quant_config.json says kv_cache_quant_algo FP8; TensorRT-LLM's
    # KvCacheConfig.dtype "auto" follows the checkpoint, vLLM's and SGLang's "auto" take the model's.
    from servesim.plan.predict import harness_deployment
    from servesim.sim.batching import Benchmark

    bench = Benchmark(4000, 1000, concurrency=8)
    model = "nvidia/DeepSeek-V3.1-NVFP4"
    assert harness_deployment(bench, model=model, gpu="b200", tp=8, engine="trtllm").kv_dtype == "fp8"
    assert harness_deployment(bench, model=model, gpu="b200", tp=8, engine="vllm").kv_dtype == "bf16"
    assert harness_deployment(bench, model=model, gpu="b200", tp=8, engine="trtllm",
                              kv_dtype="bf16").kv_dtype == "bf16"  # a KV dtype given wins
    assert harness_deployment(bench, model="deepseek-ai/DeepSeek-R1", gpu="h200", tp=8,
                              engine="trtllm").kv_dtype == "bf16"  # no KV dtype in its config


def test_compare_gives_a_verdict_against_the_interval() -> None:
    from servesim.plan.predict import compare_to_measured

    pred = {"mean_ttft_ms": 100.0, "mean_tpot_ms": 10.0, "output_throughput": 500.0, "median_ttft_ms": 90.0,
            "prediction_interval": {"level": 0.8, "mean_ttft_ms": [80.0, 150.0], "mean_tpot_ms": [9.0, 12.0],
                                    "output_throughput": [400.0, 600.0]}}
    measured = {"mean_ttft_ms": 120.0, "mean_tpot_ms": 6.0, "output_throughput": 900.0,
                "median_ttft_ms": 95.0}
    rows = {r["metric"]: r for r in compare_to_measured(pred, measured)}
    assert rows["mean_ttft_ms"]["verdict"] == "inside"
    assert rows["mean_tpot_ms"]["verdict"] == "outside by 33% (below)"  # (9 - 6) / 9
    assert rows["output_throughput"]["verdict"] == "outside by 50% (above)"  # (900 - 600) / 600
    assert "verdict" not in rows["median_ttft_ms"]  # no interval for the median
    assert rows["mean_tpot_ms"]["relative_error"] == pytest.approx((10 - 6) / 6)


def test_plan_rows_whose_intervals_reach_the_best_are_marked_indistinguishable() -> None:
    from types import SimpleNamespace

    from servesim.plan.search import _mark_indistinguishable
    from servesim.render.capacity import _ranks

    def row(lo: float, hi: float) -> dict[str, object]:
        return {"prediction_interval": {"output_throughput_per_gpu": [lo, hi]}}

    rows = [row(400, 600), row(390, 580), row(300, 399), row(100, 400)]
    _mark_indistinguishable(rows, SimpleNamespace(target_rate_per_s=None))  # type: ignore[arg-type]
    assert [r["indistinguishable_from_best"] for r in rows] == [True, True, False, True]
    _mark_indistinguishable(rows, SimpleNamespace(target_rate_per_s=5.0))  # type: ignore[arg-type]
    assert not any(r["indistinguishable_from_best"] for r in rows)  # ranked by GPUs: none
    assert _ranks([1, 2, 3, 5, 7, 8]) == "1-3, 5, 7-8"
