"""Speculation as each engine runs it (issue 18): which methods keep the overlap scheduler, and the
drafter's memory beside the target's KV cache."""

from __future__ import annotations

import pytest

from servesim._checks import ParameterError
from servesim.hardware.engines import engine_profile
from servesim.hardware.names import dense_shape
from servesim.hardware.precision import weight_bytes
from servesim.hardware.pricer import Deployment, build_step_model
from servesim.hardware.speculation import (
    EAGLE3_DRAFT_VOCAB,
    draft_model_for,
    drafter_memory,
    speculation_for,
    verify_s,
)
from servesim.plan.predict import predict
from servesim.sim.batching import Benchmark

CONTEXT = 1024


@pytest.fixture(scope="module")
def llama8b():
    return build_step_model(Deployment("llama-3-8b", "h100-sxm", 1))[0]


def test_each_engine_names_the_methods_that_keep_its_overlap():
    vllm = engine_profile("vllm")
    # vllm/config/vllm.py: async scheduling stays on for EagleModelTypes only
    assert [m for m in ("eagle", "eagle3", "mtp", "draft", "small-draft", "ngram", "medusa")
            if vllm.overlaps_speculation(m)] == ["eagle", "eagle3", "mtp"]
    # SGLang's default (spec v1) worker turns the overlap schedule off for every method
    assert not any(engine_profile("sglang").overlaps_speculation(m) for m in ("eagle3", "mtp", "ngram"))
    # no overlap to keep when the user turned it off
    assert not engine_profile("vllm", overlap=False).overlaps_speculation("eagle3")


def test_a_synchronous_verify_pays_gpu_plus_host(llama8b):
    step = llama8b.decode_step(64, CONTEXT, positions=4)
    assert step.host_s > 0
    assert verify_s(llama8b, "eagle3", 64, CONTEXT, 4) == pytest.approx(max(step.gpu_s, step.host_s))
    assert verify_s(llama8b, "draft", 64, CONTEXT, 4) == pytest.approx(step.gpu_s + step.host_s)
    assert verify_s(llama8b, "ngram", 64, CONTEXT, 4) == pytest.approx(step.gpu_s + step.host_s)


def test_the_same_drafter_pays_less_where_the_overlap_stays(llama8b):
    dm = draft_model_for(llama8b, "draft", draft="llama-3.2-1b")
    sync = speculation_for(llama8b, "draft", 64, CONTEXT, k=3, draft=dm, alpha=0.7)[1]
    # the same drafter, priced as if the method kept the overlap: the verify is max(gpu, host)
    kept = speculation_for(llama8b, "eagle3", 64, CONTEXT, k=3, draft=dm, alpha=0.7)[1]
    step = llama8b.decode_step(64, CONTEXT, positions=4)
    target = llama8b.decode_step(64, CONTEXT).total_s
    assert sync["c"] - kept["c"] == pytest.approx((step.gpu_s + step.host_s - max(step.gpu_s, step.host_s))
                                                  / target / 3, rel=1e-9)
    assert sync["speedup_at_batch"] < kept["speedup_at_batch"]


def test_a_draft_models_memory_is_its_weights_and_every_layers_kv(llama8b):
    dm = draft_model_for(llama8b, "draft", draft="llama-3.2-1b")
    w, kv = drafter_memory(dm, llama8b, 3)
    shape = dense_shape("llama-3.2-1b")
    assert w == pytest.approx(weight_bytes(shape, "bf16"))
    assert kv == 2 * 16 * 8 * 64 * 2  # 2 (K, V) x 16 layers x 8 KV heads x 64 x 2 bytes = 32,768 B


def test_an_eagle3_heads_memory_is_one_layer_its_fc_and_its_own_lm_head(llama8b):
    dm = draft_model_for(llama8b, "eagle3")
    w, kv = drafter_memory(dm, llama8b, 3)
    h, heads, g, d, inter = 4096, 32, 8, 128, 14336
    layer = (heads + 2 * g) * d * 2 * h + h * heads * d + 2 * inter * h + h * inter  # 2h-wide QKV input
    want = (layer + 3 * h * h + EAGLE3_DRAFT_VOCAB * h) * 2.0
    assert w == pytest.approx(want)
    assert kv == 2 * 1 * g * d * 2  # one layer of KV


def test_ngram_and_medusa_hold_no_kv(llama8b):
    assert drafter_memory(draft_model_for(llama8b, "ngram"), llama8b, 4) == (0.0, 0.0)
    w, kv = drafter_memory(draft_model_for(llama8b, "medusa"), llama8b, 4)
    assert kv == 0.0 and w == pytest.approx(4 * (4096 * 4096 + 128256 * 4096) * 2.0)


def test_predict_leaves_the_drafter_room_and_says_the_overlap_is_off():
    dep = Deployment("llama-3-8b", "h100-sxm", 1)
    bench = Benchmark(isl=1024, osl=256, concurrency=16, num_prompts=64)
    plain = predict(dep, bench)
    draft = predict(dep, bench, spec="draft", draft="llama-3.2-1b", k=3, acceptance_length=2.5)
    sm, _, memory = build_step_model(dep)
    dm = draft_model_for(sm, "draft", draft="llama-3.2-1b")
    w, kv = drafter_memory(dm, sm, 3)
    room = sm.engine.kv_room_bytes(memory, sm.weight_bytes_per_gpu + w, sm.profiled_reserve_bytes)
    assert draft["kv_capacity_tokens"] == int(room // (sm.kv_bytes_per_token_per_gpu + kv))
    assert draft["kv_capacity_tokens"] < plain["kv_capacity_tokens"]
    assert draft["speculation"]["overlap"].startswith("off: vLLM")
    eagle = predict(dep, bench, spec="eagle3", k=3, acceptance_length=2.5)
    assert "overlap" not in eagle["speculation"]
    assert plain["kv_capacity_tokens"] > eagle["kv_capacity_tokens"] > draft["kv_capacity_tokens"]


def test_a_drafter_that_leaves_no_room_is_refused_by_name():
    dep = Deployment("qwen3-32b", "h100-sxm", 1)
    bench = Benchmark(isl=600, osl=256, concurrency=8, num_prompts=16)
    predict(dep, bench, spec="draft", draft="Qwen/Qwen3-1.7B", k=3, acceptance_length=2.5)
    with pytest.raises(ParameterError) as exc:
        predict(dep, bench, spec="draft", draft="Qwen/Qwen3-4B", k=3, acceptance_length=2.5)
    assert exc.value.name == "draft" and "GiB of weights per GPU" in str(exc.value)


def test_vllm_reserves_its_profile_runs_peak_for_a_dense_model():
    sm, _, memory = build_step_model(Deployment("llama-3-70b", "h100-pcie", 2, max_num_seqs=256))
    t, h, inter, d = 8192, 8192, 28672 // 2, 128
    per_token = 2 * inter + inter + (32 + 2 * 4) * d + 4 * h  # 64 query / 8 KV heads over tp 2
    want = 2**30 + t * per_token * 2 + 2 * 4 * 256 * 128256
    assert sm.profiled_reserve_bytes == pytest.approx(want)
    assert 2.4 * 2**30 < want < 2.6 * 2**30  # vLLM logged about 2.4 GiB there (see the property)
    room = 0.9 * memory - sm.weight_bytes_per_gpu - want
    assert sm.kv_capacity_tokens(memory) == int(room // sm.kv_bytes_per_token_per_gpu)
    # a larger token budget profiles a larger batch: less KV cache
    big, _, _ = build_step_model(Deployment("llama-3-70b", "h100-pcie", 2, max_num_seqs=256,
                                            max_num_batched_tokens=16384))
    assert big.kv_capacity_tokens(memory) < sm.kv_capacity_tokens(memory)
    # engines without the profile keep their constant reserve
    tr, _, _ = build_step_model(Deployment("llama-3-70b", "h100-sxm", 2, engine="trtllm"))
    assert tr.profiled_reserve_bytes is None


def test_sglangs_eagle_v1_cycle_pays_the_host_time_its_overlap_would_hide():
    """SGLang PR #12128: one DeepSeek-R1 request with EAGLE (3 steps, accept length 2.296, 512
    tokens) takes 3.644 s without the overlap and 3.206 s with it, so the overlap hides 2.296 /
    140.52 - 2.296 / 159.71 = 1.96 ms a cycle; v1 exposes 4.7 ms a cycle in all (engines.toml: the
    measured cycle less the step model's GPU part of it), where a plain step's host time is 1 ms;
    the engines that keep their overlap (or have no such figure) keep theirs."""
    assert 2.296 / 140.52 - 2.296 / 159.71 == pytest.approx(1.96e-3, abs=0.01e-3)
    assert engine_profile("sglang", speculating=True).host_step_s == pytest.approx(4.7e-3)
    assert engine_profile("sglang").host_step_s == pytest.approx(1e-3)
    for name in ("vllm", "trtllm"):
        assert engine_profile(name, speculating=True).host_step_s == engine_profile(name).host_step_s
    bench = Benchmark(isl=1024, osl=256, concurrency=4, num_prompts=8)
    dep = Deployment("deepseek-ai/DeepSeek-R1-0528", "h200", 8, "fp8", kv_dtype="fp8", engine="sglang")
    out = predict(dep, bench, spec="mtp", tree=(2, 1, 3), acceptance_length=2.4)
    assert "4.7 ms a step" in out["speculation"]["overlap"]


def test_sglangs_eagle_v1_request_takes_what_pr_12128_measured():
    """The request PR #12128 timed (DeepSeek-R1 on 8 Hopper GPUs, TP8, EAGLE 3 x 1 x 4, accept length
    2.296, a ~20-token prompt, 512 tokens): 3.644 s end to end with EAGLE v1.  Predicted: TTFT plus
    511 times the TPOT, within 3% (v2's 3.206 s lies outside that band)."""
    bench = Benchmark(isl=20, osl=512, concurrency=1, num_prompts=4)
    dep = Deployment("deepseek-ai/DeepSeek-R1", "h200", 8, "fp8", engine="sglang")
    out = predict(dep, bench, spec="mtp", tree=(3, 1, 4), acceptance_length=2.296)
    latency = (out["mean_ttft_ms"] + 511 * out["mean_tpot_ms"]) / 1e3
    assert latency == pytest.approx(3.644, rel=0.03)
