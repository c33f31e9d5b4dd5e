"""One cost model, two pricers: a step is a list of operations, each priced by the engine's tables and
at the speed of light from the same bytes and FLOPs (servesim.hardware.ops)."""

from __future__ import annotations

import math

import pytest

from servesim.hardware.ops import Op, Peaks, by_name, light_s, priced_parts
from servesim.hardware.pricer import Deployment, build_step_model
from servesim.hardware.stepmodel import Chunk

H100 = Peaks(3.35e12, {"bf16": 989.4e12, "fp8": 1978.9e12}, 450e9)


def test_light_of_each_kind_by_hand() -> None:
    # A GEMM of 1 token through 8192 x 8192 BF16 weights: 134 MB at 3.35 TB/s = 40.1 us (memory-bound)
    g = Op("o proj", "gemm", 80, 1e-4, nbytes=8192 * 8192 * 2.0, flops=2.0 * 8192 * 8192)
    assert g.light_one(H100) == pytest.approx(8192 * 8192 * 2 / 3.35e12)
    assert g.light_s(H100) == pytest.approx(80 * g.light_one(H100))
    # The same GEMM at 4096 tokens in FP8 is compute-bound: 2 m n k / 1979 TFLOP/s = 278 us
    big = Op("o proj", "gemm", 1, 1e-3, nbytes=8192 * 8192.0, flops=2.0 * 4096 * 8192 * 8192, dtype="fp8")
    assert big.light_one(H100) == pytest.approx(2 * 4096 * 8192 * 8192 / 1978.9e12)
    # A ring all-reduce's wire bytes over the link: 2 (8 - 1) / 8 x 1 MiB at 450 GB/s = 4.08 us
    ar = Op("all-reduce", "allreduce", 1, 2e-5, wire_bytes=2 * 7 / 8 * 2**20)
    assert ar.light_one(H100) == pytest.approx(2 * 7 / 8 * 2**20 / 450e9)
    # Two streams: the longer branch, but no less than both branches' HBM traffic together
    a = Op("experts", "moe", 1, 1e-4, nbytes=30e6)
    b = Op("shared", "gemm", 1, 1e-4, nbytes=20e6)
    two = Op("moe layer", "two_streams", 58, 1e-4, branches=(a, b))
    assert two.light_one(H100) == pytest.approx(50e6 / 3.35e12)
    assert Op("host", "host", 1, 1e-3).light_one(H100) == 0.0
    with pytest.raises(ValueError, match="kind"):
        Op("x", "matmul", 1, 0.0)


def test_parts_and_rows_conserve_the_priced_time() -> None:
    ops = [Op("qkv", "gemm", 2, 1.0), Op("attn", "attention", 2, 0.5), Op("ar", "allreduce", 3, 0.25),
           Op("norm", "elementwise", 2, 0.125), Op("qkv", "gemm", 1, 1.0)]
    parts = priced_parts(ops)
    assert parts == {"gemm": 3.0, "attention": 1.0, "comm": 0.75, "other": 0.25, "host": 0.0}
    rows = by_name(ops, H100)
    assert [r["name"] for r in rows] == ["qkv", "attn", "ar", "norm"]
    assert rows[0]["count"] == 3 and rows[0]["ms"] == pytest.approx(3000.0)
    assert sum(float(r["ms"]) for r in rows) == pytest.approx(5000.0)


DEPLOYMENTS = [
    ("deepseek-ai/DeepSeek-R1", "h200", 8, 1, 1, "sglang", "auto"),
    ("deepseek-ai/DeepSeek-R1", "b200", 1, 8, 8, "trtllm", "auto"),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "h200", 8, 1, 1, "vllm", "auto"),
    ("openai/gpt-oss-120b", "h100-sxm", 1, 1, 1, "vllm", "auto"),
    ("MiniMaxAI/MiniMax-M2.5", "h200", 4, 2, 8, "sglang", "auto"),
    ("moonshotai/Kimi-K2.5", "h200", 8, 1, 8, "trtllm", "auto"),
    # dense models: the same operations, from StepModel
    ("meta-llama/Llama-3.1-70B-Instruct", "h100-sxm", 8, 1, 1, "vllm", "bf16"),
    ("meta-llama/Llama-3.1-70B-Instruct", "h200", 4, 1, 1, "trtllm", "fp8"),
    ("meta-llama/Llama-3.1-8B-Instruct", "b200", 1, 1, 1, "sglang", "fp4"),
    ("Qwen/Qwen3-32B", "a100-80gb", 2, 1, 1, "vllm", "bf16"),
]


@pytest.mark.parametrize(("model", "gpu", "tp", "dp", "ep", "engine", "dtype"), DEPLOYMENTS)
def test_step_is_its_operations_and_each_is_above_its_light(model, gpu, tp, dp, ep, engine, dtype) -> None:
    sm, _, _ = build_step_model(Deployment(model, gpu, tp, dtype, "bf16", engine, dp=dp, ep=ep))
    peaks = sm.peaks
    cases = ((1, ()), (64, ()), (512, ()), (8, (Chunk(2048, 0, 1),)), (0, (Chunk(512, 4096, 2),)))
    for decode, chunks in cases:
        st = sm.step(decode, 2048, chunks)
        parts = priced_parts(st.ops)
        # conservation: the step's parts are its operations' prices
        assert st.gemm_s == pytest.approx(parts["gemm"], rel=1e-12)
        assert st.attention_s == pytest.approx(parts["attention"], rel=1e-12)
        assert st.allreduce_s == pytest.approx(parts["comm"], rel=1e-12)
        assert st.other_s == pytest.approx(parts["other"], rel=1e-12)
        assert st.gpu_s == pytest.approx(sum(op.seconds for op in st.ops), rel=1e-12)
        # the bound is the same operations at the speed of light
        assert st.sol_s == pytest.approx(light_s(st.ops, peaks), rel=1e-12)
        assert sm.speed_of_light(decode, 2048, chunks) == st.sol_s
        # every operation costs at least its own light, and the step no more than 10x its bound
        for op in st.ops:
            assert op.seconds >= op.light_s(peaks) * (1 - 1e-12), (op.name, decode, chunks)
        assert st.gpu_s <= 10 * max(st.sol_s, st.floor_s)
        # summed op by op, the bound is at least the whole step's pooled roofline: all HBM bytes
        # (side-by-side branches included) over HBM, all FLOPs of single-stream ops at the top peak
        top = max(peaks.flops_per_s.values())
        nbytes = sum(op.count * (sum(b.nbytes for b in op.branches) if op.branches else op.nbytes)
                     for op in st.ops)
        flops = sum(op.count * op.flops for op in st.ops if not op.branches)
        pooled = max(nbytes / peaks.hbm_bytes_per_s, flops / top)
        assert st.sol_s >= pooled * (1 - 1e-12)
        assert math.isfinite(st.sol_s) and st.sol_s > 0


def test_deepseek_moe_layer_light_by_hand() -> None:
    """DeepSeek-R1 in block FP8 on 8 x H200 (TP8, SGLang: shared experts on a second stream) at
    batch 1: each MoE layer reads 8 routed experts and the shared one, 3 x 7168 x 256 values each
    on a GPU (2048 / 8 wide), at 1 + 4/128^2 bytes, plus the BF16 router's 256 x 7168: 58 layers
    of ~52.7 MB at 4.8 TB/s = 0.64 ms."""
    sm, _, _ = build_step_model(Deployment("deepseek-ai/DeepSeek-R1", "h200", 8, "auto", "bf16", "sglang"))
    st = sm.decode_step(1, 2048)
    (moe,) = [op for op in st.ops if op.kind == "two_streams"]
    w = 1 + 4 / 128**2
    expert = 3 * 7168 * 256 * w
    hand = (9 * expert + 256 * 7168 * 2) / 4.8e12
    assert moe.count == 58
    assert moe.light_one(sm.peaks) == pytest.approx(hand, rel=0.01)
    assert moe.light_s(sm.peaks) * 1e3 == pytest.approx(0.64, abs=0.02)
    # and the engine's price of that layer is the longer of its two branches, above both lights
    assert moe.priced_s >= max(b.priced_s for b in moe.branches)


def test_minimax_all_head_qk_norm_all_reduces_its_sums_under_tp() -> None:
    """MiniMax-M2 normalizes Q and K over all heads: at attention TP its step holds a q/k-norm
    all-reduce of 2 FP32 sums per token on every layer (none at attention TP 1); Qwen3-MoE's per-head norm
    is one kernel and no collective."""
    # TP8 EP8, as SGLang's cookbook runs it (its block-FP8 experts cannot split 8 ways)
    mm8, _, _ = build_step_model(Deployment("MiniMaxAI/MiniMax-M2.5", "h100-sxm", 8, "auto", "bf16",
                                            "sglang", ep=8))
    st = mm8.decode_step(16, 2048)
    (ar,) = [op for op in st.ops if op.name == "q/k norm all-reduce"]
    assert ar.count == mm8.arch.layers == 62
    assert ar.wire_bytes == pytest.approx(2 * 7 / 8 * 16 * 2 * 4)
    assert ar.priced_s > 0 and ar.light_s(mm8.peaks) < ar.seconds
    (norm,) = [op for op in st.ops if op.name == "q/k norm"]
    assert norm.count == 62
    # attention TP 1 (DP attention over 4 ranks, EP 4): the norm's sums stay on each rank
    mm1, _, _ = build_step_model(Deployment("MiniMaxAI/MiniMax-M2.5", "b200", 1, "auto", "bf16", "sglang",
                                            dp=4, ep=4))
    assert not [op for op in mm1.decode_step(16, 2048).ops if op.name == "q/k norm all-reduce"]
    qw, _, _ = build_step_model(Deployment("Qwen/Qwen3-235B-A22B-Instruct-2507", "h200", 8, "auto", "bf16",
                                           "sglang"))
    names = [op.name for op in qw.decode_step(16, 2048).ops]
    assert "q/k norm" in names and "q/k norm all-reduce" not in names
    ds, _, _ = build_step_model(Deployment("deepseek-ai/DeepSeek-R1", "h200", 8, "auto", "bf16", "sglang"))
    assert "q/k norm" not in [op.name for op in ds.decode_step(16, 2048).ops]
