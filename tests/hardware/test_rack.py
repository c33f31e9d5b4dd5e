"""Rack-scale systems (issue 49, items 1, 3 and 6): GB200 / GB300 / B300 priced from their own tables,
TensorRT-LLM's MNNVL all-to-all for wide EP on an NVL72 rack, and the physics every new operation obeys.

References are computed here from bytes and datasheet rates, never read back from the code: an
operation never beats its speed of light (bytes over the link or HBM it must cross) and stays within
a stated multiple of it plus a launch latency; a step never gets faster when the GPU it runs on has
less bandwidth and compute and the same tables.
"""

from __future__ import annotations

import math

import pytest

from servesim.hardware.engines import engine_profile
from servesim.hardware.kernels import ScaledTables, engine_tables, tables_for
from servesim.hardware.moe_kernels import moe_tables
from servesim.hardware.moe_step import MoEStepModel, Parallelism
from servesim.hardware.pricer import model_architecture
from servesim.hardware.wide_ep import mnnvl_alltoall, mnnvl_table

NVLINK = 900e9  # NVLink 5, bytes/s a GPU each way (GB200 NVL72 page: 130 TB/s over 72 GPUs, both ways)
HBM = 8e12  # GB200 / GB300 HBM3e, bytes/s


def _ranks_hit_remote(topk: int, experts: int, ep: int) -> float:
    """Expected other ranks a token's top-k experts land on (uniform routing without repeats)."""
    per = experts / ep
    miss = math.prod(max(0.0, (experts - per - j) / (experts - j)) for j in range(topk))
    return ep * (1 - miss) * (ep - 1) / ep


# --------------------------------------------------------------------------- (1) their own tables


@pytest.mark.parametrize("gpu", ["gb200", "gb300", "b300"])
def test_rack_scale_gpus_have_their_own_tables_for_every_engine(gpu):
    for engine in ("vllm", "sglang", "trtllm"):
        t, note = engine_tables(gpu, engine)
        assert t is not None and t.name == tables_for(gpu).name
        own = (gpu, engine) != ("b300", "sglang")  # measured on a GB300: vLLM's B300 tables stand in
        assert (t.engine_name == engine) == own, note
        mt, mnote = moe_tables(gpu, engine)
        assert mt is not None and mt.engine_name == engine and mnote.startswith("MoE tables: ")
        assert mt.device == t.device or not own


def test_catalog_and_tables_agree_on_the_datasheet():
    """GB200 / GB300: 8 TB/s, 2.5 PFLOP/s dense BF16, 5 FP8; FP4 10 (GB200) and 15 (GB300, Blackwell
    Ultra); B300: 2.25 BF16, 4.5 FP8 (system.yaml 7.75 TB/s = 62 TB/s / 8; the catalog keeps NVIDIA's
    8 TB/s: within 3.3%)."""
    from servesim.hardware.names import resolve_gpu

    for gpu, fp4 in (("gb200", 10e15), ("gb300", 15e15)):
        t, spec = tables_for(gpu), resolve_gpu(gpu)
        assert t.hbm_bytes_per_s == spec.hbm_bytes_per_s == HBM
        assert t.flops_per_s["bf16"] == spec.flops_per_s == 2.5e15 and t.flops_per_s["fp8"] == 5e15
        assert t.flops_per_s["fp4"] == fp4 and t.nvlink_bytes_per_s == spec.interconnect_bytes_per_s == NVLINK
    b300, spec = tables_for("b300"), resolve_gpu("b300")
    assert b300.flops_per_s["bf16"] == spec.flops_per_s == 2.25e15 and b300.flops_per_s["fp8"] == 4.5e15
    assert abs(b300.hbm_bytes_per_s / spec.hbm_bytes_per_s - 1) < 0.035
    assert tables_for("gb300").memory_bytes > tables_for("gb200").memory_bytes  # 284,208 vs 189,471 MiB


# --------------------------------------------------------------------------- (3) MNNVL all-to-all


@pytest.mark.parametrize("dtype", ["fp4", "fp8_block", "bf16"])
def test_mnnvl_alltoall_between_its_speed_of_light_and_six_times_it(dtype):
    """Dispatch (one copy a token to each other rank its experts are on, in the activation dtype) plus
    combine (BF16 back) over NVLink is the speed of light; the measured kernels take 1.5-5.6x that
    plus 10 us of launch latency: 6x is the stated bound.  And more tokens never cost less."""
    mt, _ = moe_tables("gb200", "trtllm")
    act = {"fp4": 0.5625, "fp8_block": 1.0, "bf16": 2.0}[dtype]
    for ep in (2, 8, 16, 32, 64, 72):
        prev = 0.0
        for tokens in (1, 8, 64, 512, 4096, 32768, 100000):
            lk = mnnvl_alltoall(mt, dtype, tokens, 7168, 8, ep)
            assert lk is not None
            sol = tokens * _ranks_hit_remote(8, 256, ep) * 7168 * (act + 2) / NVLINK * 1e3
            assert sol <= lk.ms <= 6 * (sol + 0.010), (ep, tokens, lk.ms, sol)
            assert lk.ms >= prev
            prev = lk.ms


def test_mnnvl_kernel_and_ownership():
    mt, _ = moe_tables("gb200", "trtllm")
    assert "one-sided, fp4" in mnnvl_alltoall(mt, "fp4", 64, 7168, 8, 32).note  # NVLinkOneSided first
    assert "two-sided, fp4" in mnnvl_alltoall(mt, "fp4", 64, 7168, 8, 64).note  # not measured above 32
    assert "two-sided, fp8" in mnnvl_alltoall(mt, "fp8_block", 64, 7168, 8, 8).note
    g300, _ = moe_tables("gb300", "trtllm")
    assert "not measured on gb300" in mnnvl_alltoall(g300, "fp4", 64, 7168, 8, 16).note
    for gpu, engine in (("b200", "trtllm"), ("b300", "trtllm"), ("gb200", "sglang"), ("gb200", "vllm")):
        assert mnnvl_table(moe_tables(gpu, engine)[0]) is None  # no multi-node NVLink or not TensorRT-LLM's


def _dep(gpu: str, ranks: int, engine: str = "trtllm", ep_comm: str | None = None) -> MoEStepModel:
    arch = model_architecture("deepseek-ai/DeepSeek-R1")
    return MoEStepModel(arch, gpu, Parallelism(1, ranks, ranks), engine=engine_profile(engine, gpu=gpu),
                        ep_comm=ep_comm)


def _op(st, name):
    return next(op for op in st.ops if op.name == name)


def test_tensorrt_llm_wide_ep_on_a_rack_takes_mnnvl():
    st = _dep("gb200", 32).decode_step(1024, 2048)
    assert "MNNVL" in _op(st, "ep dispatch + combine").note
    assert "MNNVL" not in " ".join(op.note for op in _dep("b200", 8).decode_step(256, 2048).ops)
    gathered = _dep("gb200", 32, ep_comm="allgather").decode_step(1024, 2048)  # the user's choice stands
    assert any(op.name == "dp gather + scatter" for op in gathered.ops)
    # the DP gather moves every rank's tokens to every GPU: MNNVL's exchange is cheaper
    assert st.allreduce_s < gathered.allreduce_s


def test_dep32_decode_on_gb200_by_hand():
    """DeepSeek-R1 FP8 DEP32 on GB200, 32 sequences a rank (1,024 in the replica), 2,048 tokens of
    context.  Each MoE layer reads its 8 local experts (256 / 32; 32,768 token-expert pairs touch
    every one): 8 x 3 x 7168 x 2048 bytes = 352 MB, 44 us at 8 TB/s; the layer is priced above that.
    The exchange moves 32 tokens x ~7.4 other ranks x 7168 x (1 FP8 + 2 BF16) bytes = 5.1 MB a layer,
    5.7 us at 900 GB/s; it is priced above that and below 6x (it plus 10 us).  The step reads at
    least every weight the GPU holds for the layers it runs."""
    sm = _dep("gb200", 32)
    st = sm.decode_step(1024, 2048)
    experts_bytes = 8 * 3 * 7168 * 2048 * 1.0
    moe = _op(st, "moe layer (shared experts on a second stream)")
    assert moe.priced_s >= experts_bytes / HBM
    a2a = _op(st, "ep dispatch + combine")
    sol = 32 * _ranks_hit_remote(8, 256, 32) * 7168 * 3.0 / NVLINK
    assert sol <= a2a.priced_s <= 6 * (sol + 10e-6)
    assert st.gpu_s >= experts_bytes * 58 / HBM  # the experts alone, 58 MoE layers: 2.55 ms
    assert st.sol_s <= st.gpu_s <= st.total_s


# --------------------------------------------------------------------------- (6) less GPU, never faster


def _scaled_down(source, factor: float) -> ScaledTables:
    return ScaledTables(source, "slow-" + source.name, hbm_bytes_per_s=source.hbm_bytes_per_s * factor,
                        flops_per_s={d: v * factor for d, v in source.flops_per_s.items()},
                        interconnect_bytes_per_s=source.nvlink_bytes_per_s * factor,
                        memory_bytes=source.memory_bytes)


@pytest.mark.parametrize("gpu", ["gb200", "gb300", "b300"])
def test_a_gpu_with_less_bandwidth_and_compute_is_never_faster_on_the_same_tables(gpu):
    for engine in ("vllm", "trtllm"):
        t = tables_for(gpu, engine)
        slow = _scaled_down(t, 0.7)
        for dtype in t.gemm_dtypes:
            for m in (1, 64, 4096):
                assert slow.gemm(dtype, m, 7168, 2048).ms >= t.gemm(dtype, m, 7168, 2048).ms
        for b, ctx in ((1, 1000), (64, 8000)):
            for kv in t.kv_dtypes:
                args = (64, 8, 128, kv)
                assert slow.decode_attention(b, ctx, *args).ms >= t.decode_attention(b, ctx, *args).ms
                assert slow.prefill_attention(1, 4096, *args).ms >= t.prefill_attention(1, 4096, *args).ms
        for n in (2, 4, 8):
            assert slow.allreduce(n, 2**22).ms >= t.allreduce(n, 2**22).ms


# --------------------------------------------------------------------------- (3) EPLB's redundant slots


def test_eplb_slots_make_ep72_possible_and_cost_weights():
    """DeepSeek-R1's 256 experts do not divide by 72; with 32 redundant slots 288 do (4 a GPU).  Each
    slot is a whole expert copy: 3 x 7168 x 2048 FP8 bytes a layer over 58 MoE layers, so the
    weights per GPU grow by slots / ep of that; the experts' time never falls as slots are added
    (balancing is not credited), and a count that leaves ranks unequal is refused by name."""
    from servesim._checks import ParameterError

    arch = model_architecture("deepseek-ai/DeepSeek-R1")
    eng = engine_profile("trtllm", gpu="gb200")
    with pytest.raises(ParameterError, match="ep"):
        MoEStepModel(arch, "gb200", Parallelism(1, 72, 72), engine=eng)
    with pytest.raises(ParameterError, match="eplb_slots"):
        MoEStepModel(arch, "gb200", Parallelism(1, 72, 72), engine=eng, eplb_slots=30)
    with pytest.raises(ParameterError, match="eplb_slots"):
        MoEStepModel(arch, "gb200", Parallelism(8, 1, 1), engine=eng, eplb_slots=8)  # no EP
    sm72 = MoEStepModel(arch, "gb200", Parallelism(1, 72, 72), engine=eng, eplb_slots=32)
    assert "4 experts a GPU over EP72" in " ".join(sm72.pricing_notes)
    expert = 3 * 7168 * 2048 * 1.0 * 58  # one expert's FP8 weights over the MoE layers
    base = MoEStepModel(arch, "gb200", Parallelism(1, 64, 64), engine=eng)
    prev = 0.0
    for slots in (0, 64, 128):
        sm = MoEStepModel(arch, "gb200", Parallelism(1, 64, 64), engine=eng, eplb_slots=slots)
        extra = sm.weight_bytes_per_gpu - base.weight_bytes_per_gpu
        # 58 MoE layers, plus the multi-token-prediction layer's experts held beside them (59: +1.7%)
        # and the block-FP8 scales: within 3%
        assert extra == pytest.approx(slots / 64 * expert, rel=0.03)
        moe = _op(sm.decode_step(2048, 2048), "moe layer (shared experts on a second stream)").priced_s
        assert moe >= prev
        prev = moe
