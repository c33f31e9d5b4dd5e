"""Bounds and physics at rack scale (issue 49, item 6).

(a) A step is never faster on a GPU with less HBM bandwidth, compute and NVLink and the same measured
tables, and never slower than the peaks' ratio allows: every kernel of :class:`ScaledTables` is its
source's time times roofline(target) / roofline(source), each roofline ``max(floor, bytes / bw,
flops / peak)``, so with every peak x 0.7 each kernel (and so the step) takes 1 to 1 / 0.7 times as
long.  The MoE kernels are looked up by the GPU's name and stay the measured GPU's: a MoE step slows
by less, never more.

(b) Every rack-scale operation lies between its speed of light (the bytes it must move over the link
they cross: NVLink 5 at 900 GB/s a GPU inside an NVL72 rack, InfiniBand at 100 GB/s a GPU between
racks) and a stated multiple of it.

(c) A DEP32 decode step of DeepSeek-R1 on GB200 checked by hand from the model's config.json.

References are computed here from bytes and datasheet rates, never read back from the code.
"""

from __future__ import annotations

import math

import pytest

from servesim.hardware.engines import engine_profile
from servesim.hardware.kernels import ScaledTables, engine_tables, tables_for
from servesim.hardware.moe_kernels import moe_tables
from servesim.hardware.moe_step import MoEStepModel, Parallelism
from servesim.hardware.names import dense_shape
from servesim.hardware.pricer import model_architecture
from servesim.hardware.stepmodel import Chunk, StepModel
from servesim.hardware.topology import kv_path
from servesim.hardware.wide_ep import mnnvl_alltoall, mnnvl_table

NVLINK = 900e9  # NVLink 5, bytes/s a GPU each way (GB200 / GB300 NVL72: 130 TB/s over 72 GPUs, both ways)
IB = 100e9  # ConnectX-8 800 Gb/s a GPU between racks (topology.toml)
HBM = 8e12  # GB200 HBM3e, bytes/s
SLOW = 0.7  # the scaled-down GPU's share of every peak


def _hits(topk: int, experts: int, ep: int) -> float:
    """Expected other ranks one token's top-k experts land on (uniform routing without repeats): each
    other rank holds experts / ep of them and is missed with prod_j (E - E/ep - j) / (E - j)."""
    per = experts / ep
    miss = math.prod(max(0.0, (experts - per - j) / (experts - j)) for j in range(topk))
    return (ep - 1) * (1 - miss)


# --------------------------------------------------------------------------- (a) less GPU, never faster


def _slow(source) -> ScaledTables:
    return ScaledTables(source, "slow-" + source.name, hbm_bytes_per_s=source.hbm_bytes_per_s * SLOW,
                        flops_per_s={d: v * SLOW for d, v in source.flops_per_s.items()},
                        interconnect_bytes_per_s=source.nvlink_bytes_per_s * SLOW,
                        memory_bytes=source.memory_bytes)


def _between(fast: float, slow: float) -> bool:
    return fast <= slow <= fast / SLOW * (1 + 1e-9)


@pytest.mark.parametrize("gpu", ["gb200", "gb300", "b300"])
@pytest.mark.parametrize("engine", ["trtllm", "vllm"])
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_a_dense_step_on_a_slower_gpu_with_the_same_tables_is_slower_by_at_most_the_peaks(gpu, engine, dtype):
    """Llama-3-70B on TP4: decode steps (1 to 256 sequences, 1k-8k context), prefill steps (512 and
    8,192 tokens) and a mixed step, on the GPU's own tables and on them scaled to 0.7 x its peaks.
    No operation gets faster.  In BF16 the step takes at most 1 / 0.7 as long.  In FP8 the step model
    takes the activations' quantization (a fixed latency of the table's, not scaled) off every
    weight GEMM after the lookup, so a GEMM may slow by a little more than the peaks' ratio; the
    operations priced by a lookup alone (attention, LM head, all-reduce) stay within it."""
    own, _ = engine_tables(gpu, engine)
    eng = engine_profile(engine, gpu=gpu)
    shape = dense_shape("llama-3-70b")
    fast = StepModel(shape, gpu, 4, dtype=dtype, kv_dtype="fp8", engine=eng)
    slow = StepModel(shape, gpu, 4, dtype=dtype, kv_dtype="fp8", engine=eng, tables=_slow(own))
    steps = [(lambda m, b=b, c=c: m.decode_step(b, c)) for b, c in ((1, 1000), (64, 4000), (256, 8000))]
    steps += [(lambda m, p=p: m.prefill_step(p)) for p in (512, 8192)]
    steps.append(lambda m: m.step(32, 3000, (Chunk(2048, 0, 1, True),)))
    for price in steps:
        f, s = price(fast), price(slow)
        assert f.total_s <= s.total_s
        if dtype == "bf16":
            assert _between(f.total_s, s.total_s)
        for a, b in zip(f.ops, s.ops, strict=True):
            assert a.name == b.name and a.seconds <= b.seconds * (1 + 1e-12), a.name
            if a.name.startswith(("attention", "lm head", "all-reduce")):
                assert _between(a.seconds, b.seconds), a.name


@pytest.mark.parametrize("gpu", ["gb200", "gb300", "b300"])
@pytest.mark.parametrize("engine", ["trtllm", "vllm"])
@pytest.mark.parametrize("par", [Parallelism(8, 1, 8), Parallelism(1, 8, 8)], ids=["tep8", "dep8"])
def test_a_moe_step_on_a_slower_gpu_with_the_same_tables_is_never_faster(gpu, engine, par):
    """DeepSeek-R1 (FP8 block weights, FP8 KV) on TEP8 and DEP8: decode at 8 and 256 sequences and a
    4,096-token prefill."""
    own, _ = engine_tables(gpu, engine)
    eng = engine_profile(engine, gpu=gpu)
    arch = model_architecture("deepseek-ai/DeepSeek-R1")
    fast = MoEStepModel(arch, gpu, par, engine=eng, kv_dtype="fp8")
    slow = MoEStepModel(arch, gpu, par, engine=eng, kv_dtype="fp8", tables=_slow(own))
    for b, ctx in ((8, 1000), (256, 2000)):
        assert _between(fast.decode_step(b, ctx).total_s, slow.decode_step(b, ctx).total_s), (b, ctx)
    assert _between(fast.prefill_step(4096).total_s, slow.prefill_step(4096).total_s)


# --------------------------------------------------------------------------- (b) rack operations' bounds


@pytest.mark.parametrize("gpu", ["gb200", "gb300"])
@pytest.mark.parametrize("mode", ["ll", "normal"])
def test_deepep_across_trays_and_racks_between_its_speed_of_light_and_six_times_it(gpu, mode):
    """DeepEP dispatch (FP8) plus combine (BF16) of DeepSeek-R1's layer (hidden 7168, top-8 of 256)
    over EP4 (one tray: measured) to EP72 (18 trays, one NVLink domain) and EP144 (two racks).

    Speed of light: each token crosses to every other rank holding one of its experts once, 3 bytes
    an element, over NVLink; the pairs that leave the rack (EP144: 72 of the 143 other ranks) over
    InfiniBand instead; the slower of the two.  Stated multiple: at most 6x that plus the kernel's
    latency (its one-token time over the same ranks), and more tokens never cost less."""
    mt, _ = moe_tables(gpu, "sglang")
    for ep in (4, 8, 16, 32, 72, 144):
        latency = sum(mt.deepep(k, mode, 1, 7168, 8, 256, ep).ms for k in ("dispatch", "combine"))
        prev = 0.0
        for tokens in (1, 16, 128, 1024, 8192):
            ms = sum(mt.deepep(k, mode, tokens, 7168, 8, 256, ep).ms for k in ("dispatch", "combine"))
            hits = tokens * _hits(8, 256, ep)
            outside = max(0, ep - 72) / (ep - 1)  # share of the other ranks in the other rack
            sol = 1e3 * max(hits * (1 - outside) * 7168 * 3 / NVLINK, hits * outside * 7168 * 3 / IB)
            assert sol <= ms <= 6 * sol + latency, (ep, tokens, ms, sol)
            assert ms >= prev
            prev = ms


@pytest.mark.parametrize("gpu", ["gb200", "gb300"])
def test_allreduce_over_two_racks_between_its_hierarchical_bound_and_twice_it(gpu):
    """144 GPUs over two NVL72 racks: a hierarchical all-reduce reduce-scatters inside each rack, sends
    each GPU's 1 / 72 share around the two racks (2 (r - 1) / r of it over InfiniBand) and gathers
    again.  It is never cheaper than the rack's own ring over NVLink or the InfiniBand share alone,
    and priced at most 2x their sum (the in-rack time is measured, not the ring's light)."""
    t = tables_for(gpu, "trtllm")
    for size in (2**20, 2**24, 2**28):
        ring = 2 * 71 / 72 * size / NVLINK * 1e3
        ib = 2 * (2 - 1) / 2 * (size / 72) / IB * 1e3
        ms = t.allreduce(144, size).ms
        assert max(ring, ib) <= ms <= 2 * (t.allreduce(72, size).ms + ib), (size, ms)


def test_kv_transfer_over_nvlink_and_infiniband_between_line_rate_and_its_stated_share():
    """A DeepSeek-R1 FP8 KV cache of an 8,192-token prompt: 61 layers x (512 + 64) bytes a token =
    288 MB.  Inside one rack it crosses NVLink: at least bytes / 900 GB/s, at most bytes / (0.89 x
    900 GB/s) (the link's stated 89%: 1.12x); between racks InfiniBand at its 100 GB/s line rate (the
    speed of light itself, an optimistic price); and inside the rack is never the slower."""
    kv_bytes = 8192 * 61 * (512 + 64) * 1.0
    gb = tables_for("gb200")
    inside = kv_path(gb.topology, gb.nvlink_bytes_per_s, 40)
    across = kv_path(gb.topology, gb.nvlink_bytes_per_s, 104)
    assert inside is not None and across is not None
    t_in, t_out = kv_bytes / inside.bytes_per_s, kv_bytes / across.bytes_per_s
    assert kv_bytes / NVLINK <= t_in <= kv_bytes / (0.89 * NVLINK) * (1 + 1e-12)
    assert t_out == pytest.approx(kv_bytes / IB)
    assert t_in < t_out


# --------------------------------------------------------------------------- (c) DEP32 by hand

# DeepSeek-R1's config.json (deepseek-ai/DeepSeek-R1)
HIDDEN, VOCAB, LAYERS, DENSE_LAYERS = 7168, 129280, 61, 3  # first_k_dense_replace 3
HEADS, Q_LORA, KV_LORA, NOPE, ROPE, V_DIM = 128, 1536, 512, 128, 64, 128
INTER, MOE_INTER, EXPERTS, TOPK, SHARED = 18432, 2048, 256, 8, 1


def test_dep32_decode_step_of_deepseek_r1_on_gb200_by_hand():
    """32 sequences a rank (1,024 in the DEP32 replica) at 2,048 tokens of context, FP8 block weights,
    FP8 KV, TensorRT-LLM.

    Weights a GPU (attention DP: every rank holds the attention, dense layers, shared experts, router,
    embedding and LM head; the routed experts are split 256 / 32 = 8 a rank):
      attention a layer q_a 7168 x 1536 + q_b 1536 x 128 x 192 + kv_a 7168 x 576 + kv_b 512 x 128 x 256
        + o 128 x 128 x 7168 = 187,105,280, x 61 layers           = 11.41 GB (FP8)
      dense MLP 3 x 7168 x 18432 x 3 layers                        =  1.19 GB
      shared expert 3 x 7168 x 2048 x 58 MoE layers                =  2.55 GB
      routed experts 8 x 3 x 7168 x 2048 x 58                      = 20.43 GB
      router 7168 x 256 x 58 (BF16)                                =  0.21 GB
      embedding + LM head 2 x 129280 x 7168 (BF16)                 =  3.71 GB
      total 39.51 GB (+ 0.02% block-FP8 scales): servesim's within 2%.
    A decode step reads all of it (1,024 tokens x 8 / 256 experts = 32 tokens an expert: every local
    expert is touched) and the KV: 32 x 2,048 x 61 x 576 bytes = 2.30 GB; at 8 TB/s 5.23 ms at least.
    The all-to-all: 32 tokens x 6.94 other ranks hit x 7168 x (1 FP8 + 2 BF16) bytes = 4.78 MB a
    layer, 5.3 us over NVLink; 58 layers 0.31 ms.  The step is priced above their sum and at most 4x
    it; the exchange above its light and at most 6x it plus 10 us of launch a layer."""
    attn = (HIDDEN * Q_LORA + Q_LORA * HEADS * (NOPE + ROPE) + HIDDEN * (KV_LORA + ROPE)
            + KV_LORA * HEADS * (NOPE + V_DIM) + HEADS * V_DIM * HIDDEN)
    assert attn == 187_105_280
    moe_layers = LAYERS - DENSE_LAYERS
    expert = 3 * HIDDEN * MOE_INTER
    fp8 = (attn * LAYERS + 3 * HIDDEN * INTER * DENSE_LAYERS + SHARED * expert * moe_layers
           + EXPERTS // 32 * expert * moe_layers)
    bf16 = HIDDEN * EXPERTS * moe_layers + 2 * VOCAB * HIDDEN
    weights = fp8 * (1 + 4 / 128**2) + 2 * bf16  # one FP32 scale a 128 x 128 block
    assert weights == pytest.approx(39.51e9, rel=1e-3)

    arch = model_architecture("deepseek-ai/DeepSeek-R1")
    sm = MoEStepModel(arch, "gb200", Parallelism(1, 32, 32), engine=engine_profile("trtllm", gpu="gb200"),
                      kv_dtype="fp8")
    assert sm.weight_bytes_per_gpu == pytest.approx(weights, rel=0.02)

    kv = 32 * 2048 * LAYERS * (KV_LORA + ROPE) * 1.0
    hbm_s = (weights + kv) / HBM
    a2a_layer_s = 32 * _hits(TOPK, EXPERTS, 32) * HIDDEN * 3.0 / NVLINK
    assert 5.2e-3 < hbm_s < 5.3e-3 and 5.2e-6 < a2a_layer_s < 5.4e-6
    st = sm.decode_step(1024, 2048)
    assert hbm_s + moe_layers * a2a_layer_s <= st.gpu_s <= 4 * (hbm_s + moe_layers * a2a_layer_s)
    a2a = next(op for op in st.ops if op.name == "ep dispatch + combine")
    assert "MNNVL" in a2a.note and a2a.count == moe_layers
    assert a2a_layer_s <= a2a.priced_s <= 6 * (a2a_layer_s + 10e-6)


@pytest.mark.parametrize("gpu", ["gb200", "gb300"])
def test_what_is_measured_on_a_rack_is_one_tray(gpu):
    """topology.toml and the README say: the collectives and DeepEP were timed on one tray of 4; every
    larger group is a bound and its note says it is not measured; MNNVL's all-to-all was timed across
    trays on GB200.  Should wider rows be shipped, this test and those two texts change together."""
    for engine in ("trtllm", "sglang", "vllm"):
        t = tables_for(gpu, engine)
        mt, _ = moe_tables(gpu, engine)
        assert t.allreduce_gpus() == (2, 4) and t.allreduce(4, 2**20).measured
        assert not t.allreduce(8, 2**20).measured and "not measured" in t.allreduce(8, 2**20).note
        for op in ("all_gather", "reduce_scatter", "alltoall"):
            assert not getattr(mt, op)(8, 2**20).measured
        assert mt.deepep_ep == 4 and not mt.deepep("dispatch", "ll", 128, 7168, 8, 256, 8).measured
    mt, _ = moe_tables(gpu, "trtllm")
    assert mnnvl_table(mt, 32) is not None
    across = mnnvl_alltoall(mt, "fp8_block", 64, 7168, 8, 32)  # EP32: 8 trays
    assert across is not None and across.measured == (gpu == "gb200")
