"""The engine simulation beside the closed form at load (servesim.plan.engine_summary)."""

from __future__ import annotations

import pytest

from servesim.hardware.pricer import Deployment
from servesim.plan.engine_summary import engine_summary, engine_trace_summary

DEP = Deployment("llama-3-8b", "h100-sxm", 1, "bf16", "bf16", "vllm")


def test_colocated_at_light_load_agrees_with_the_closed_form():
    d = engine_summary(DEP, None, rate_per_s=0.5, isl=512, osl=64, replicas=2, requests=200, seed=1)
    assert d["gpus"] == 2 and d["stable"] and d["closed_form"]["stable"]
    # At 0.5 req/s on two replicas the batch is about 1: TPOT is the batch-1 step, within the
    # engine-agreement tolerance that `validate` uses (6%).
    assert d["mean_tpot_ms"] == pytest.approx(d["closed_form"]["mean_tpot_ms"], rel=0.06)


def test_disaggregated_counts_both_pools_gpus():
    dec = Deployment("llama-3-8b", "h100-sxm", 2, "bf16", "bf16", "vllm")
    d = engine_summary(DEP, dec, rate_per_s=0.5, isl=512, osl=64, prefill_workers=3, decode_workers=2,
                       link_bytes_per_s=50e9, requests=200, seed=1)
    assert d["gpus"] == 3 * 1 + 2 * 2


def test_trace_rate_and_lengths_are_its_means():
    arr = [0.0, 1.0, 2.0, 4.0]
    lens = [(100, 10), (200, 20), (300, 30), (401, 41)]
    d = engine_trace_summary(DEP, arr, lens, seed=1, trace="t")
    assert d["rate"] == pytest.approx(4 / 4.0)  # n / (t_last - t_first)
    assert (d["isl"], d["osl"], d["requests"], d["trace"]) == (250, 25, 4, "t")
