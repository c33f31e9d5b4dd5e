"""Step times from measured kernels (servesim.hardware.stepmodel): parts, bounds, hand checks, errors.

Every expectation here is derived independently of the code under test: the parts must add
up, the pure roofline at 100% of the peaks must not be beaten, the GEMM part must equal the
kernel-table lookups of the shapes in the module docstring, the KV bytes are counted by hand
from the model's config, and the step must cost more when the work grows.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from servesim._checks import ParameterError
from servesim.hardware.engines import engine_profile
from servesim.hardware.kernels import tables_for
from servesim.hardware.names import dense_shape, resolve_gpu
from servesim.hardware.stepmodel import Chunk, StepModel


def _model(name: str = "llama-3-8b", gpu: str = "h100-sxm", tp: int = 1, **kw: object) -> StepModel:
    return StepModel(dense_shape(name), gpu, tp, **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- parts add up

STEPS = [
    # (decode, context, chunks, positions)
    (1, 1024, (), 1),
    (64, 3000, (), 1),
    (0, 0, (Chunk(2048),), 1),
    (16, 2048, (Chunk(512, 1536, 1, False), Chunk(300, 0, 2)), 1),
    (8, 700, (), 5),  # speculative verify
    (600, 100, (), 1),  # past the CUDA-graph limit: eager launches
]


@pytest.mark.parametrize(("name", "tp"), [("llama-3-8b", 1), ("llama-3-70b", 8)])
@pytest.mark.parametrize("step", STEPS, ids=lambda s: f"b{s[0]}-ctx{s[1]}-chunks{len(s[2])}-pos{s[3]}")
def test_parts_sum_to_the_gpu_time_and_host_is_added_without_overlap(name, tp, step):
    eng = engine_profile("vllm", gpu="h100-sxm", overlap=False)  # --no-async-scheduling
    st = _model(name, tp=tp, engine=eng).step(*step)
    assert st.gpu_s == pytest.approx(st.gemm_s + st.attention_s + st.allreduce_s + st.other_s, rel=1e-12)
    assert min(st.gemm_s, st.attention_s, st.other_s, st.host_s) > 0
    assert st.total_s == pytest.approx(st.gpu_s + st.host_s, rel=1e-12)  # host between the steps
    on = _model(name, tp=tp).step(*step)  # vLLM's default: async scheduling
    assert on.total_s == pytest.approx(max(on.gpu_s, on.host_s), rel=1e-12)
    b, _, chunks, pos = step
    assert st.tokens == b * pos + sum(c.tokens * c.count for c in chunks)


def test_a_step_without_its_bound_is_the_same_step_to_the_bit():
    """The engine loop's path (``bound=False``: no operation built) sums the same prices in the same
    order as the operations of the bounded step: every part, the notes and the measured flag equal
    to the last bit, only the bound and the operations left out; the parts are the operations'
    prices summed by part (ops.priced_parts), exactly."""
    from servesim.hardware.ops import priced_parts
    from servesim.hardware.speculation import EagleHead

    models = [_model(), _model("llama-3-70b", tp=8), _model("llama-3-70b", "h200", 4, dtype="fp8"),
              _model("llama-3-8b", "mi300x")]  # mi300x: another GPU's tables, every step noted
    models.append(EagleHead(models[1], eagle3=False))  # five weight GEMMs a layer (its fc)
    for sm in models:
        for step in [*STEPS, (3.5, 4000, (), 1), (200, 9000, (Chunk(100, 30000, 3, False),), 3)]:
            full, cheap = sm.step(*step), sm.step(*step, bound=False)
            assert cheap.ops == () and cheap.sol_s != cheap.sol_s and full.sol_s > 0
            assert dataclasses.replace(cheap, sol_s=full.sol_s) == full  # ops are not compared
            parts = priced_parts(full.ops)
            assert (full.gemm_s, full.attention_s, full.allreduce_s, full.other_s) == (
                parts["gemm"], parts["attention"], parts["comm"], parts["other"])
    assert not models[3].step(4, 100, bound=False).measured and models[3].step(4, 100).notes


def test_the_engine_loops_price_is_the_steps_to_the_bit():
    """The engine loop's price of a step (``step_price``, the Pricer seam: for a dense model no
    StepTime, no rows) is ``step(..., bound=False)``'s total, measured flag and notes, equal to the
    last bit, on models whose every part shows (quantized GEMMs, all-reduces, another GPU's tables and
    their notes, eager launches, host added or overlapped, sampled and unsampled chunks, verify
    steps), an EAGLE head and a mixture-of-experts model."""
    from servesim.hardware.pricer import Deployment, build_step_model
    from servesim.hardware.speculation import EagleHead

    no_overlap = engine_profile("vllm", gpu="h100-sxm", overlap=False)
    models = [_model(), _model("llama-3-70b", tp=8), _model("llama-3-70b", "h200", 4, dtype="fp8"),
              _model("llama-3-8b", "mi300x"), _model("llama-3-70b", tp=4, engine=no_overlap)]
    models.append(EagleHead(models[1], eagle3=True))  # five weight GEMMs a layer (its fc)
    moe = build_step_model(Deployment("Qwen/Qwen3-30B-A3B", "h200", 1, dtype="auto"))[0]
    steps = [(1, 1024, (), 1), (64, 3000, (), 1), (0, 0, ((2048, 0, True),), 1), (37, 5000, (), 1),
             (16, 2048, ((512, 1536, False), (300, 0, True), (300, 0, True)), 1), (8, 700, (), 5),
             (600, 100, (), 1), (200, 9000, ((100, 30000, False),), 3), (3, 40, ((1, 8128, True),), 1)]
    for sm in [*models, moe]:
        for b, ctx, raw, pos in steps:
            got = sm.step_price(b, ctx, raw, pos)  # first: its caches cold
            st = sm.step(b, ctx, tuple(Chunk(q, c, 1, x) for q, c, x in raw), pos, bound=False)
            want = (st.total_s, st.measured, st.notes, st.launch_wait_s, st.launch_s)
            assert got == want and sm.step_price(b, ctx, raw, pos) == want
    assert not models[3].step_price(4, 100)[1] and models[3].step_price(4, 100)[2]  # borrowed tables
    with pytest.raises(ParameterError, match="tokens"):
        models[0].step_price(0, 0)


@pytest.mark.parametrize("host_ms", [1.0, 50.0])  # host hidden behind the GPU, then GPU behind the host
def test_sglang_overlaps_host_with_the_gpu(host_ms):
    eng = dataclasses.replace(engine_profile("sglang", gpu="h100-sxm"), host_step_s=host_ms * 1e-3)
    assert eng.overlap
    st = _model(engine=eng).decode_step(4, 1000)
    assert st.gpu_s == pytest.approx(st.gemm_s + st.attention_s + st.allreduce_s + st.other_s, rel=1e-12)
    assert st.total_s == max(st.gpu_s, st.host_s)
    assert st.total_s == (st.gpu_s if host_ms == 1.0 else st.host_s)


# --------------------------------------------------------------------------- speed of light

SOL_MODELS = [
    ("llama-3-8b", "h100-sxm", 1, "bf16"),
    ("llama-3-8b", "h100-sxm", 2, "fp8"),
    ("llama-3-70b", "h100-sxm", 8, "bf16"),
    ("llama-3-70b", "h100-sxm", 4, "fp8"),
    ("llama-3-70b", "h100-sxm", 16, "bf16"),  # KV heads replicated
    ("llama-3-70b", "h200", 8, "fp8"),
    ("llama-3-70b", "b200", 8, "fp4"),
    ("llama-3-8b", "a100-80gb", 1, "bf16"),
    ("llama-3-8b", "mi300x", 1, "bf16"),  # no tables: roofline at the H100 fits
    ("qwen3-32b", "h100-sxm", 2, "bf16"),
]


@pytest.mark.parametrize(("name", "gpu", "tp", "dtype"), SOL_MODELS, ids=lambda x: str(x))
def test_speed_of_light_never_beats_the_estimate(name, gpu, tp, dtype):
    sm = _model(name, gpu, tp, dtype=dtype)
    for b, ctx, chunks, pos in itertools.product(
        [0, 1, 7, 64, 512], [1, 1000, 30000],
        [(), (Chunk(512),), (Chunk(2048, 6144, 1, False),), (Chunk(8192),), (Chunk(128, 0, 4),)],
        [1, 4],
    ):
        if b == 0 and not chunks:
            continue
        st = sm.step(b, ctx, chunks, pos)
        assert 0 < st.sol_s <= st.gpu_s <= st.total_s, (b, ctx, chunks, pos, st)
        assert st.sol_s == sm.speed_of_light(b, ctx, chunks, pos)


def test_speed_of_light_by_hand_for_a_decode_step():
    # 8B, tp 1, batch 1 at context 0: every operation memory-bound at datasheet HBM, summed: the
    # weights streamed once, each GEMM's BF16 activations in and out, one position of KV read, the
    # norms' / RoPE's / SiLU's bytes and the FP32 logits read three times.
    sm = _model()
    s, t = sm.shape, sm.tables
    gemms = ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336))  # (n, k): qkv, o, gate/up, down
    body = s.layers * sum(n * k for n, k in gemms)
    acts = s.layers * sum(n + k for n, k in gemms) * 2
    head = 128256 * 4096
    head_acts = (128256 + 4096) * 2
    kv = sm.kv_bytes_per_token_per_gpu * 1  # one position read
    norms = s.layers * 2 * (8 * 4096 + 2 * (32 + 8) * 128 + 3 * 14336)
    logits = 128256 * 4 * 3
    expect = ((body + head) * 2 + acts + head_acts + kv + norms + logits) / t.hbm_bytes_per_s
    assert sm.speed_of_light(1, 0) == pytest.approx(expect, rel=1e-9)
    # within 0.1% of the weights alone: batch 1 is the weights' read
    assert expect == pytest.approx((body + head) * 2 / t.hbm_bytes_per_s, rel=2e-3)


# --------------------------------------------------------------------------- hand check of the GEMMs


def test_gemm_part_is_the_sum_of_the_table_lookups_llama_3_8b_h100_batch_1():
    t = tables_for("h100_sxm")
    assert t is not None
    layer = [  # (n, k) per the module docstring, tp 1: H=32, G=8, d=128, h=4096, I=14336
        ((32 + 2 * 8) * 128, 4096),  # QKV
        (4096, 32 * 128),  # O
        (2 * 14336, 4096),  # gate/up
        (4096, 14336),  # down
    ]
    per_layer_ms = sum(t.gemm("bf16", 1, n, k).ms for n, k in layer)
    # The LM head (n = 128,256) is wider than the measured n (65,536): two measured column blocks
    # of 64,128 (the same weights and FLOPs), so the step is measured throughout.
    head_ms = 2 * t.gemm("bf16", 1, 64128, 4096).ms
    assert t.gemm("bf16", 1, 64128, 4096).measured and not t.gemm("bf16", 1, 128256, 4096).measured
    expect_s = (32 * per_layer_ms + head_ms) * 1e-3
    st = _model(dtype="bf16").decode_step(1, 1024)
    assert st.gemm_s == pytest.approx(expect_s, rel=1e-12)
    assert st.measured and not st.notes


def test_fp8_checkpoint_keeps_the_lm_head_in_bf16():
    t = tables_for("h100_sxm")
    assert t is not None
    st = _model(dtype="fp8").decode_step(1, 1024)
    layer = [((32 + 16) * 128, 4096), (4096, 4096), (2 * 14336, 4096), (4096, 14336)]
    # Each fp8 GEMM less the input quantization its table includes: the table's fp8 floor less
    # its bf16 floor (4.63 - 2.52 us on the H100), never below the bf16 floor.
    eff = t.efficiency["gemm"]
    quant = eff["fp8"]["floor_ms"] - eff["bf16"]["floor_ms"]
    assert 0.001 < quant < 0.003
    fp8 = [max(t.gemm("fp8", 1, n, k).ms - quant, eff["bf16"]["floor_ms"]) for n, k in layer]
    expect = 32 * sum(fp8) + 2 * t.gemm("bf16", 1, 64128, 4096).ms
    assert st.gemm_s == pytest.approx(expect * 1e-3, rel=1e-12)


# --------------------------------------------------------------------------- all-reduce, monotonicity


def test_allreduce_is_zero_on_one_gpu_and_positive_on_eight():
    assert _model("llama-3-70b", tp=1).decode_step(8, 1000).allreduce_s == 0.0
    assert _model("llama-3-8b", tp=1).step(4, 500, (Chunk(1000),)).allreduce_s == 0.0
    st8 = _model("llama-3-70b", tp=8).decode_step(8, 1000)
    assert st8.allreduce_s > 0
    # Two all-reduces per layer: at least 160 x the all-reduce floor of a tiny message.
    t = tables_for("h100_sxm")
    assert t is not None
    assert st8.allreduce_s == pytest.approx(160 * t.allreduce(8, 8 * 8192 * 2).ms * 1e-3, rel=1e-12)


BATCHES = list(range(1, 513))


def _worst_drop(times: list[float]) -> float:
    """The largest fall of a sequence below its running maximum, as a fraction of that maximum."""
    top, worst = 0.0, 0.0
    for x in times:
        if top > 0:
            worst = max(worst, 1 - x / top)
        top = max(top, x)
    return worst


@pytest.mark.parametrize("context", [128, 1024, 4096])
def test_decode_step_grows_with_batch_70b_tp8(context):
    # What holds despite the table noise: no dip deeper than the tables' own (<= 7%), and the
    # step at batch 512 costs well over twice the batch-1 step.
    sm = _model("llama-3-70b", tp=8)
    times = [sm.decode_step(b, context).total_s for b in BATCHES]
    assert _worst_drop(times) <= 0.07
    assert times[-1] > 2.5 * times[0]
    assert all(times[i] < times[j] for i, j in [(0, 63), (63, 255), (255, 511)])


@pytest.mark.parametrize("batch", [1, 8, 32, 128, 512])
def test_decode_step_non_decreasing_in_context_70b_tp8(batch):
    sm = _model("llama-3-70b", tp=8)
    cap = sm.kv_capacity_tokens(resolve_gpu("h100-sxm").memory_bytes)
    contexts = sorted({round(1.05**i) for i in range(250)})  # 1 .. ~190k
    contexts = [c for c in contexts if batch * c <= cap]  # what fits in the KV cache
    assert len(contexts) > 100
    times = [sm.decode_step(batch, c).total_s for c in contexts]
    assert _worst_drop(times) <= 0.02
    assert times[-1] > times[0]
    if batch * 16384 <= cap:  # the KV read grows 16x; past the launch floor, so does the kernel
        ratio = sm.decode_step(batch, 16384).attention_s / sm.decode_step(batch, 1024).attention_s
        assert ratio > (4 if batch >= 32 else 1.2)


# --------------------------------------------------------------------------- dtypes, tp


def test_fp8_decode_is_faster_than_bf16_at_batch_1_70b_tp4():
    bf16 = _model("llama-3-70b", tp=4, dtype="bf16").decode_step(1, 1024)
    fp8 = _model("llama-3-70b", tp=4, dtype="fp8").decode_step(1, 1024)
    assert fp8.total_s < 0.9 * bf16.total_s
    assert fp8.gemm_s < 0.75 * bf16.gemm_s  # the weights halve; the GEMMs are memory-bound
    assert fp8.attention_s == bf16.attention_s  # KV dtype unchanged


def test_fp4_on_hopper_is_a_parameter_error_naming_dtype():
    with pytest.raises(ParameterError, match="fp4") as exc:
        _model("llama-3-70b", tp=4, dtype="fp4")
    assert exc.value.name == "dtype" and exc.value.value == "fp4"


def test_fp4_on_blackwell_is_accepted():
    st = _model("llama-3-70b", "b200", 4, dtype="fp4").decode_step(1, 1024)
    assert st.total_s < _model("llama-3-70b", "b200", 4, dtype="fp8").decode_step(1, 1024).total_s


@pytest.mark.parametrize("tp", [3, 0, 5, 128])
def test_tp_that_does_not_split_the_heads_is_a_parameter_error_naming_tp(tp):
    with pytest.raises(ParameterError) as exc:
        _model("llama-3-70b", tp=tp)
    assert exc.value.name == "tp" and exc.value.value == tp
    assert "1, 2, 4, 8, 16, 32, 64" in str(exc.value)


@pytest.mark.parametrize(("kw", "msg"), [
    ({"decode": 0, "context": 0}, "tokens"),
    ({"decode": -1, "context": 10}, "decode"),
    ({"decode": 1, "context": float("nan")}, "context"),
    ({"decode": 1, "context": 10, "positions": 0}, "positions"),
])
def test_bad_step_arguments_raise(kw, msg):
    with pytest.raises(ParameterError, match=msg):
        _model().step(**kw)


# --------------------------------------------------------------------------- KV cache

KV_70B = 2 * 80 * 8 * 128 * 2  # K and V, 80 layers, 8 KV heads of 128, bf16 = 327680 bytes


@pytest.mark.parametrize(("tp", "kv_dtype", "per_gpu"), [
    (1, "bf16", KV_70B),
    (8, "bf16", KV_70B / 8),
    (8, "fp8", KV_70B / 16),
    (16, "bf16", KV_70B / 8),  # tp > kv_heads: each GPU still holds one KV head
    (64, "bf16", KV_70B / 8),
])
def test_kv_bytes_per_token_per_gpu_70b(tp, kv_dtype, per_gpu):
    assert _model("llama-3-70b", tp=tp, kv_dtype=kv_dtype).kv_bytes_per_token_per_gpu == per_gpu


def test_kv_capacity_is_what_fits_beside_the_weights():
    sm = _model("llama-3-70b", tp=8)
    eng = sm.engine
    mem = 80e9
    room = mem * eng.memory_fraction - sm.weight_bytes_per_gpu - sm.reserve_bytes
    assert sm.kv_capacity_tokens(mem) == int(room // (KV_70B / 8))
    fp8 = _model("llama-3-70b", tp=8, kv_dtype="fp8")
    assert fp8.kv_capacity_tokens(mem) == int(room // (KV_70B / 16))
    assert sm.kv_capacity_tokens(1e9) == 0  # the weights alone do not fit: zero, never negative


# --------------------------------------------------------------------------- chunked prefill


def test_chunk_behind_a_cached_prefix_costs_more_attention_than_a_fresh_prompt():
    sm = _model()
    behind = sm.step(0, 0, (Chunk(512, 1536),))
    fresh = sm.step(0, 0, (Chunk(512, 0),))
    assert behind.attention_s > fresh.attention_s
    # The causal pairs of a 2,048-token prompt less those of its first 1,536: the measured
    # prefill of 2,048 tokens less that of 1,536 per layer, read off the convex hull of the
    # measured curve (equal to it where the curve is convex, below it by the kinks otherwise);
    # here above the chunk's two lower bounds, the fresh 512 and the decode read.
    t = sm.tables
    s = sm.shape
    per_layer = [t.prefill_attention(1, n, s.heads, s.kv_heads, s.head_dim, "bf16").ms * 1e-3
                 for n in (2048, 1536, 512)]
    diff = s.layers * (per_layer[0] - per_layer[1])
    assert diff > s.layers * per_layer[2]
    assert 0.9 * diff <= behind.attention_s <= diff * (1 + 1e-9)
    assert behind.gemm_s == fresh.gemm_s  # same 512 tokens through the weights
    assert behind.sol_s > fresh.sol_s


def test_prefill_step_is_one_whole_chunk():
    sm = _model()
    assert sm.prefill_step(1000, 3) == sm.step(0, 0, (Chunk(1000, 0, 3),))
    assert sm.prefill_step(1000, 3).tokens == 3000
    assert sm.prefill_step(2000).total_s > sm.prefill_step(1000).total_s
