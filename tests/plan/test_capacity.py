"""The serving model at load (servesim.plan.capacity), the capacity plan and the engine simulator.

Reference values are computed here from the step model's own step prices, so
that each test checks the algebra of the fixed point, not a pinned number.
"""

from __future__ import annotations

import json
import math

import pytest

from servesim.cli.main import main
from servesim.hardware.pricer import Deployment, build_step_model
from servesim.plan.capacity import (
    colocated_at_load,
    decode_at_load,
    disaggregated_at_load,
    max_rate,
    prefill_at_load,
)
from servesim.plan.search import PlanQuestion, capacity_plan
from servesim.sim.engine import simulate_colocated, simulate_disaggregated

ISL, OSL = 1024, 256


@pytest.fixture(scope="module")
def node70():
    return build_step_model(Deployment("llama-3-70b", "h100-sxm", 4))


@pytest.fixture(scope="module")
def node8():
    return build_step_model(Deployment("llama-3-8b", "h100-sxm", 1))


def test_fixed_point_by_hand(node70):
    sm, _, mem = node70
    lam = 3.0
    d = decode_at_load(sm, mem, lam, ISL, OSL, prefill=True)
    assert d.stable and d.batch > 1
    ctx = ISL + OSL / 2
    from servesim.hardware.stepmodel import Chunk

    t0 = sm.step(d.batch, ctx, bound=False).total_s
    c = int(min(ISL, sm.engine.max_num_batched_tokens - d.batch))
    tc = sm.step(d.batch, ctx, (Chunk(c, (ISL - c) // 2, 1, True),), bound=False).total_s
    t = t0 / (1 - lam * ISL * (tc - t0) / c)  # the mean step with a share phi of chunk steps
    assert d.tpot_s == pytest.approx(t, rel=1e-9)
    assert d.phi == pytest.approx(lam * ISL * t / c, rel=1e-9)
    assert d.batch == pytest.approx(lam * (OSL - 1) * t, rel=1e-6)  # Little's law closes the loop


def test_vanishing_load_is_the_batch_1_step(node70):
    sm, _, mem = node70
    p = colocated_at_load(sm, mem, 1, 1e-6, ISL, OSL, 1.0)
    assert p.stable and p.decode_batch < 1e-3
    assert p.tpot_s == pytest.approx(sm.decode_step(1, ISL + OSL / 2).total_s, rel=0.01)
    # TTFT at no load: the engine is idle, so just the prompt's steps and the request overhead.
    assert p.ttft_mean_s == pytest.approx(sm.prompt_s(ISL) + sm.engine.request_overhead_s, rel=0.01)


def test_a_served_rate_never_uses_more_than_the_whole_step(node70):
    sm, _, mem = node70
    last_batch, last_tpot = 0.0, 0.0
    for rate in (0.5, 1, 2, 4, 6, 8, 10, 12, 14, 20, 40):
        p = colocated_at_load(sm, mem, 1, rate, ISL, OSL, 1.0)
        if not p.stable:
            assert p.reason
            continue
        assert 0 <= p.prefill_share < 1
        assert p.decode_batch >= last_batch and p.tpot_s >= last_tpot  # load moves TPOT and the batch
        last_batch, last_tpot = p.decode_batch, p.tpot_s
    assert not colocated_at_load(sm, mem, 1, 40, ISL, OSL, 1.0).stable


def test_prefill_pool_is_md_c(node70):
    sm, _, _ = node70
    s = sm.prompt_s(ISL)
    p = prefill_at_load(sm, 2, 1.0 / s, ISL)  # one server's worth of load on two
    assert p.stable and p.utilization == pytest.approx(0.5)
    assert 0 < p.wait_mean_s < s
    assert p.wait_tail(0.0) > p.wait_tail(s) > p.wait_tail(10 * s) >= 0
    assert not prefill_at_load(sm, 2, 2.01 / s, ISL).stable


def test_capacity_meets_the_slos_and_one_more_step_does_not(node70):
    sm, _, mem = node70

    def f(r):
        return colocated_at_load(sm, mem, 1, r, ISL, OSL, 1.0)

    rate, p = max_rate(f, 0.030, 0.9)
    assert rate > 0 and p.stable and p.tpot_s <= 0.030 and p.attainment >= 0.9
    q = f(rate * 1.01)
    assert (not q.stable) or q.tpot_s > 0.030 or q.attainment < 0.9


def test_capacity_is_monotone_in_gpus():
    rates = []
    for gpus in (4, 8, 16):
        # The closed-form screen (the engine model's confirmation is tested in test_plan_confirmed).
        d = capacity_plan(PlanQuestion("llama-3-8b", "h100-sxm", gpus, ISL, OSL, 1.0, 0.03, confirm=False))
        best = max(r["max_rate_rps"] for r in d["ranked"])
        assert all(r["gpus"] <= gpus for r in d["ranked"])
        rates.append(best)
    assert rates[0] <= rates[1] <= rates[2]
    assert rates[2] >= 1.9 * rates[1]  # twice the replicas, twice the traffic (independent replicas)


def test_plan_ranks_by_goodput_per_gpu_and_the_front_is_not_dominated():
    d = capacity_plan(PlanQuestion("llama-3-70b", "h100-sxm", 8, ISL, OSL, 1.0, 0.04, spec="eagle3",
                                   confirm=False))  # the screen (its confirmation: test_plan_confirmed)
    per_gpu = [r["output_throughput_per_gpu"] for r in d["ranked"]]
    assert per_gpu == sorted(per_gpu, reverse=True)
    for r in d["ranked"]:
        assert r["output_throughput_per_gpu"] == pytest.approx(r["max_rate_rps"] * OSL / r["gpus"])
        if r["dollars_per_million_output_tokens"] is not None:
            usd = d["usd_per_gpu_hour"] * r["gpus"] / (r["max_rate_rps"] * OSL * 3600) * 1e6
            assert r["dollars_per_million_output_tokens"] == pytest.approx(usd)
        assert ("spec+prefix-cache" in r["hazards"]) == (r["speculation"] != "none")
        assert ("spec+disagg" in r["hazards"]) == (r["speculation"] != "none" and
                                                   r["architecture"] == "disaggregated")
    front = d["pareto"]
    assert front
    for p in front:
        assert not any(o["output_throughput_per_gpu"] > p["output_throughput_per_gpu"]
                       and o["tokens_per_s_per_user"] > p["tokens_per_s_per_user"] for o in front)
    safe = capacity_plan(PlanQuestion("llama-3-70b", "h100-sxm", 8, ISL, OSL, 1.0, 0.04, spec="eagle3",
                                      hazards=False, confirm=False))
    assert all(r["speculation"] == "none" and not r["hazards"] for r in safe["ranked"])


@pytest.mark.parametrize("rate", [1.0, 3.0])
def test_the_simulator_agrees_with_the_closed_form_where_its_assumptions_hold(node70, rate):
    # Poisson arrivals, one prompt length, moderate load: the closed form's assumptions.
    # Tolerances: TPOT 6% (the closed form averages prefill over steps, the engine mixes whole
    # chunks), TTFT 20% (M/D/1 with a half-step residual against the engine's step boundaries).
    sm, _, mem = node70
    cf = colocated_at_load(sm, mem, 1, rate, ISL, OSL, 1.0)
    sim = simulate_colocated(sm, mem, 1, rate, ISL, OSL, requests=1500, seed=1)
    assert sim["mean_tpot_ms"] == pytest.approx(cf.tpot_s * 1e3, rel=0.06)
    assert sim["mean_ttft_ms"] == pytest.approx(cf.ttft_mean_s * 1e3, rel=0.20)
    assert sim["decode_batch"] == pytest.approx(cf.decode_batch, rel=0.10)
    psm, _, _ = build_step_model(Deployment("llama-3-70b", "h100-sxm", 2))
    cf = disaggregated_at_load(psm, 2, sm, mem, 1, 50e9, rate, ISL, OSL, 1.0)
    sim = simulate_disaggregated(psm, 2, sm, mem, 1, 50e9, rate, ISL, OSL, requests=1500, seed=1)
    assert sim["mean_tpot_ms"] == pytest.approx(cf.tpot_s * 1e3, rel=0.06)
    assert sim["mean_ttft_ms"] == pytest.approx(cf.ttft_mean_s * 1e3, rel=0.20)


def _json(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


def test_plan_contract(capsys):
    d = _json(capsys, "plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm",
              "--gpus", "4", "--isl", "512", "--osl", "128", "--slo-ttft-ms", "500", "--slo-tpot-ms", "30",
              "--spec", "none", "--format", "json")
    assert d["ranked"] and d["pareto"]
    keys = {"architecture", "prefill", "decode", "gpus", "max_rate_rps", "output_throughput_per_gpu",
            "tokens_per_s_per_user", "mean_ttft_ms", "mean_tpot_ms", "speculative_k",
            "dollars_per_million_output_tokens"}
    for r in d["ranked"]:
        assert keys <= set(r)
        assert r["architecture"] in ("colocated", "disaggregated")
        assert set(r["prefill"]) == set(r["decode"]) == {"tp", "workers", "dtype"}
        assert r["mean_tpot_ms"] <= 30 and r["gpus"] <= 4


def test_predict_disagg_and_stability_contract(capsys):
    base = ["predict", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--isl", "1024", "--osl", "256",
            "--format", "json"]
    d = _json(capsys, *base, "--mode", "disagg", "--prefill-tp", "2", "--prefill-workers", "2",
              "--decode-tp", "4", "--decode-workers", "1", "--rate", "2")
    assert d["stable"] is True and d["gpus"] == 8
    for k in ("mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "output_throughput", "request_throughput"):
        assert d[k] > 0
    assert d["p99_ttft_ms"] >= d["mean_ttft_ms"]
    c = _json(capsys, *base, "--mode", "disagg", "--prefill-tp", "2", "--prefill-workers", "2",
              "--decode-tp", "4", "--decode-workers", "1", "--concurrency", "16")
    # Little's law for the 16 clients, within the finite run's start-up and drain (a few %).
    x = c["request_throughput"]
    assert x * (c["mean_ttft_ms"] + (256 - 1) * c["mean_tpot_ms"]) / 1e3 == pytest.approx(16, rel=0.03)
    u = _json(capsys, *base, "--tp", "4", "--rate", "100", "--num-prompts", "60")
    assert u["stable"] is False and u["mean_ttft_ms"] is None and u["mean_tpot_ms"] is None


def test_simulate_engine_contract(capsys):
    d = _json(capsys, "simulate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp", "1", "--isl", "512",
              "--osl", "128", "--rate", "4", "--requests", "300", "--format", "json")
    for k in ("mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "output_throughput", "sim_requests_per_s"):
        assert d[k] > 0 and math.isfinite(d[k])
    assert d["completed"] == 300
    again = _json(capsys, "simulate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp", "1", "--isl",
                  "512", "--osl", "128", "--rate", "4", "--requests", "300", "--format", "json")
    for k in ("mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "output_throughput"):
        assert again[k] == d[k]  # same seed, same numbers


def test_an_engine_that_runs_prompts_whole_needs_the_prompt_and_the_batch_in_one_budget():
    # TensorRT-LLM without enable_chunked_prefill (its default) runs a prompt in one step beside the
    # decoding batch, under max_num_tokens 8192: an 8,192-token prompt beside one decoding sequence
    # (8,193 tokens) never fits, so no rate is stable, where vLLM chunks the same prompt and serves it.
    trt, _, mem = build_step_model(Deployment("llama-3-8b", "h100-sxm", 1, engine="trtllm"))
    vllm, _, _ = build_step_model(Deployment("llama-3-8b", "h100-sxm", 1, engine="vllm"))
    assert trt.engine.max_num_batched_tokens == vllm.engine.max_num_batched_tokens == 8192
    assert not decode_at_load(trt, mem, 0.5, 8192, OSL, prefill=True).stable
    assert decode_at_load(vllm, mem, 0.5, 8192, OSL, prefill=True).stable
    # A prompt that leaves room for the batch runs whole: its chunk is the prompt.
    d = decode_at_load(trt, mem, 0.5, 4096, OSL, prefill=True)
    assert d.stable and d.chunk == 4096 and d.batch < 8192 - 4096


def test_the_plan_sizes_a_whole_prompt_budget_as_inferencemax_does_and_confirms_what_it_screens():
    # 8k prompts on TensorRT-LLM: the default budget (8,192) holds no prompt beside a decoding
    # sequence, so the screen ranks nothing the engine model cannot confirm; the budget searched
    # beside it is InferenceMAX's max(8192, 64 ceil((C + ISL + 64) / 64)) with C the engine's
    # CUDA-graph batch (128): 64 x ceil(8384 / 64) = 8,384.
    # A disaggregated row's prefill workers run the prompts whole under the same budget.
    d = capacity_plan(PlanQuestion("deepseek-ai/DeepSeek-R1", "h100-sxm", 32, 8192, 1024, 2.0, 0.05,
                                   engine="trtllm", confirm_top=4))
    rows = d["ranked"]
    assert rows and d["engine_tried"] == d["confirmed"] == len(rows) == 4
    assert {r["max_num_batched_tokens"] for r in rows} == {8384}
    assert all(not r["budget_is_default"] for r in rows)
    assert {r["architecture"] for r in rows} == {"colocated", "disaggregated"}


def test_a_whole_prompt_fits_one_attention_dp_ranks_budget_in_the_closed_form_too():
    # 4 ranks of max_num_tokens 8192 (a group budget of 32,768): an 8k prompt fits no rank beside a
    # decoding sequence, as the engine model's scheduler has it; 8,384 leaves room for 192 a rank.
    def at(budget: int):
        sm, _, mem = build_step_model(Deployment("Qwen/Qwen3-30B-A3B", "h200-sxm", 1, dtype="auto",
                                                 engine="trtllm", dp=4, ep=4, max_num_batched_tokens=budget))
        return decode_at_load(sm, mem, 1.0, 8192, OSL, prefill=True)

    assert not at(8192).stable
    d = at(8384)
    assert d.stable and d.chunk == 8192 and d.batch <= 4 * (8384 - 8192)
