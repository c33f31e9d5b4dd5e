"""The MoE / MLA step model (servesim.hardware.moe_step): memory by parallelism, bounds, order.

Expectations are computed independently: weight bytes per GPU from the architecture's own parameter
breakdown split as the parallelism says; KV capacity grows with the attention DP ranks; every step
lies above its speed of light and below the stated ceiling, and more work never costs less.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from servesim._checks import ParameterError
from servesim.hardware.dtypes import BYTES_PER_VALUE
from servesim.hardware.engines import engine_profile
from servesim.hardware.model_config import find_architecture
from servesim.hardware.moe_step import MoEStepModel, Parallelism
from servesim.hardware.names import resolve_gpu
from servesim.hardware.ops import priced_parts
from servesim.hardware.stepmodel import STEP_CEILING, Chunk

H200 = resolve_gpu("h200").memory_bytes

CASES = [
    ("deepseek-ai/DeepSeek-R1", Parallelism(8, 1, 1)),
    ("deepseek-ai/DeepSeek-R1", Parallelism(1, 8, 8)),
    ("openai/gpt-oss-120b", Parallelism(2, 1, 1)),
    ("Qwen/Qwen3-235B-A22B", Parallelism(4, 2, 8)),
    ("MiniMaxAI/MiniMax-M2.5", Parallelism(4, 1, 4)),
    ("moonshotai/Kimi-K2.5", Parallelism(8, 1, 8)),
    ("mistralai/Mixtral-8x7B-v0.1", Parallelism(2, 1, 1)),
]


def _sm(name: str, par: Parallelism, engine: str = "vllm") -> MoEStepModel:
    arch = find_architecture(name)
    assert arch is not None
    return MoEStepModel(arch, "h200", par, engine=engine_profile(engine, gpu="h200", memory_gib=131))


@pytest.mark.parametrize(("name", "par"), CASES, ids=[f"{n}-{p.tp}x{p.dp}-ep{p.ep}" for n, p in CASES])
def test_weights_per_gpu_split_as_the_parallelism_says(name: str, par: Parallelism) -> None:
    sm = _sm(name, par)
    arch = sm.arch
    w = BYTES_PER_VALUE[sm.dtype]
    parts = arch.breakdown()
    quantized = set(arch.quantized_parts) if sm.dtype != "bf16" else set()
    expect = parts["experts"] * (w if "experts" in quantized else 2.0) / par.gpus
    for part, n in parts.items():
        if part == "experts":
            continue
        size = n * (w if part in quantized else 2.0)
        expect += size if part in ("norms", "router", "biases") else size / par.tp
    assert sm.weight_bytes_per_gpu == pytest.approx(expect, rel=1e-12)
    # The whole replica holds at least the checkpoint (replicated attention makes it more with DP).
    assert sm.weight_bytes_per_gpu * par.gpus >= 0.99 * arch.weight_bytes() if (
        sm.dtype == arch.checkpoint_dtype) else True


def test_deepseek_r1_fits_eight_h200_not_eight_h100() -> None:
    sm = _sm("deepseek-ai/DeepSeek-R1", Parallelism(8, 1, 1))
    assert 75 * 2**30 < sm.weight_bytes_per_gpu < 82 * 2**30  # ~671 GB of FP8 over 8 GPUs
    assert sm.kv_capacity_tokens(H200) > 100_000
    assert sm.kv_capacity_tokens(resolve_gpu("h100-sxm").memory_bytes) == 0


def test_mla_cache_is_its_latent_replicated_and_dp_ranks_hold_their_own() -> None:
    tp8 = _sm("deepseek-ai/DeepSeek-R1", Parallelism(8, 1, 1))
    dp8 = _sm("deepseek-ai/DeepSeek-R1", Parallelism(1, 8, 8))
    assert tp8.kv_bytes_per_token_per_gpu == 61 * (512 + 64) * 2  # the latent, on every TP rank
    # DP8: attention weights replicate on every GPU (less room each) but each rank's tokens are its own.
    assert dp8.weight_bytes_per_gpu > tp8.weight_bytes_per_gpu
    per_rank = dp8.kv_capacity_tokens(H200) // 8
    assert dp8.kv_capacity_tokens(H200) == per_rank * 8
    assert dp8.kv_capacity_tokens(H200) > 4 * tp8.kv_capacity_tokens(H200)


@pytest.mark.parametrize(("name", "par"), CASES, ids=[f"{n}-{p.tp}x{p.dp}-ep{p.ep}" for n, p in CASES])
def test_steps_lie_within_their_bounds_and_grow_with_work(name: str, par: Parallelism) -> None:
    _assert_bounded_and_growing(_sm(name, par), (0, 1, 8, 64, 512), (0, 1, 700, 8192))


def _assert_bounded_and_growing(sm: MoEStepModel, batches: tuple[int, ...], prompts: tuple[int, ...]) -> None:
    """Every step on the grid lies between its speed of light and STEP_CEILING times its bound, and
    neither one more sequence nor twice the context makes it cheaper."""
    for b, ctx, q, c in itertools.product(batches, (16, 2048, 32768), prompts, (0, 4000)):
        if b == 0 and q == 0:
            continue
        chunks = (Chunk(q, c),) if q else ()
        st = sm.step(b, ctx, chunks)
        assert st.total_s >= st.sol_s, (b, ctx, q, c)
        assert st.gpu_s <= STEP_CEILING * st.bound_s, (b, ctx, q, c, st.gpu_s / st.bound_s)
        assert sm.step(b + 1, ctx, chunks).total_s >= st.total_s * (1 - 1e-9), (b, ctx, q, c)
        assert sm.step(b, ctx * 2, chunks).total_s >= st.total_s * (1 - 1e-9), (b, ctx, q, c)


def test_decode_at_batch_one_reads_the_chosen_experts_not_all() -> None:
    sm = _sm("deepseek-ai/DeepSeek-R1", Parallelism(8, 1, 1))
    one, full = sm.decode_step(1, 1024), sm.decode_step(512, 1024)
    assert one.gemm_s < full.gemm_s / 3  # 8 of 256 experts per layer against nearly all of them


@pytest.mark.parametrize(("par", "name"), [
    (dict(tp=8, dp=1, ep=3), "ep"),
    (dict(tp=3, dp=1, ep=1), "tp"),
])
def test_bad_parallelism_names_the_parameter(par: dict[str, int], name: str) -> None:
    with pytest.raises(ParameterError) as exc:
        _sm("deepseek-ai/DeepSeek-R1", Parallelism(**par))
    assert exc.value.name == name


def test_ep_must_divide_the_experts() -> None:
    with pytest.raises(ParameterError) as exc:
        _sm("mistralai/Mixtral-8x7B-v0.1", Parallelism(1, 16, 16))
    assert exc.value.name == "ep" and "8 routed experts" in str(exc.value)


def test_sliding_window_layers_hold_only_their_window() -> None:
    """gpt-oss alternates 128-token windows with full attention: at 2,048-token requests a token
    costs the full layers' KV plus the windowed layers' 128 tokens spread over the request:
    18 full layers x 2,048 B + 18 windowed layers x 2,048 B x 128 / 2,048, by hand."""
    sm = _sm("openai/gpt-oss-120b", Parallelism(1, 1, 1))
    full = sm.kv_bytes_per_token_per_gpu
    assert full == 36 * 2 * 8 * 64 * 2  # every layer's K and V of 8 heads of 64 at BF16
    cap_full = sm.kv_capacity_tokens(H200)
    sm.kv_context = 2048
    windowed = sm.kv_bytes_per_token_per_gpu
    assert windowed == pytest.approx(18 * 2048 + 18 * 2048 * 128 / 2048)
    assert sm.kv_capacity_tokens(H200) / cap_full == pytest.approx(full / windowed, rel=1e-4)
    ds = _sm("deepseek-ai/DeepSeek-R1", Parallelism(8, 1, 1))
    before = ds.kv_bytes_per_token_per_gpu
    ds.kv_context = 2048
    assert ds.kv_bytes_per_token_per_gpu == before  # no windows: nothing changes


def test_mla_down_projections_are_one_gemm() -> None:
    """q_a (1536 x 7168) and kv_a (576 x 7168) run as one fused GEMM of 1536 + 512 + 64 = 2112 rows
    in every engine (SGLang fused_qkv_a_proj_with_mqa, vLLM fused_qkv_a_proj, TensorRT-LLM's
    kv_a_proj_with_mqa); at TP8 q_b is 16 heads x (128 + 64) = 3072 by 1536 and O 7168 by 16 x 128."""
    sm = _sm("deepseek-ai/DeepSeek-R1", Parallelism(8, 1, 1))
    assert sm._proj_shapes() == ((2112, 7168), (3072, 1536), (7168, 2048))
    # The same weights as the unfused projections: only the launch of one GEMM is saved.
    assert sum(n * k for n, k in sm._proj_shapes()) == 1536 * 7168 + 3072 * 1536 + 576 * 7168 + 7168 * 2048


@pytest.mark.parametrize("gpu", ["h200", "b200"])
def test_sglang_runs_shared_experts_beside_the_routed_ones_in_graph_steps(gpu: str) -> None:
    """SGLang's DeepseekV2MoE (forward_normal_dual_stream) in a CUDA-graph decode step: an MoE layer
    costs max(router + routed, shared, both branches' weights at the tables' HBM share); the same
    step run eagerly (no graph) adds the three.  Reference from the model's own kernel lookups."""
    arch = find_architecture("deepseek-ai/DeepSeek-R1")
    assert arch is not None
    eng = engine_profile("sglang", gpu=gpu, memory_gib=resolve_gpu(gpu).memory_bytes / 2**30, tp=8)
    graph = MoEStepModel(arch, gpu, Parallelism(8, 1, 1), engine=eng)
    no_graph = dataclasses.replace(eng, cuda_graph_max_tokens=0)
    eager = MoEStepModel(arch, gpu, Parallelism(8, 1, 1), engine=no_graph)
    n_moe = sum(arch.layer_moe)
    for b in (1, 8, 64):
        routed = graph._gemm(b, arch.experts, arch.hidden, "bf16")[0] + graph._moe(b)[0]
        shared = graph._mlp(b, arch.shared_intermediate)
        t = graph.tables
        # Shared experts in the checkpoint's block FP8 (weights plus one FP32 scale per 128 x 128).
        shared_w = 3 * arch.hidden * arch.shared_intermediate / 8 * BYTES_PER_VALUE["fp8_block"]
        weights = graph._expert_bytes(b) + shared_w
        both = weights / (t.hbm_bytes_per_s * t.memory_efficiency)
        saved = routed + shared - max(routed, shared, both)
        assert saved > 0
        g, e = graph.decode_step(b, 1024), eager.decode_step(b, 1024)
        assert e.gemm_s - g.gemm_s == pytest.approx(n_moe * saved, rel=1e-9)
    # A step with a prefill chunk runs eagerly in SGLang: shared experts in series.
    st = graph.step(4, 1024, (Chunk(512, 0),))
    st_eager = eager.step(4, 1024, (Chunk(512, 0),))
    assert st.gemm_s == pytest.approx(st_eager.gemm_s, rel=1e-12)


SGLANG_CASES = [(n, p, g) for n, p in CASES for g in ("h200", "b200")]


@pytest.mark.parametrize(("name", "par", "gpu"), SGLANG_CASES,
                         ids=[f"{n}-{p.tp}x{p.dp}-ep{p.ep}-{g}" for n, p, g in SGLANG_CASES])
def test_sglang_steps_lie_within_their_bounds_and_grow_with_work(name: str, par: Parallelism,
                                                                  gpu: str) -> None:
    """The same bounds with SGLang's tables and its shared-expert overlap (the batch grid crosses
    its CUDA-graph limit, 512 on both GPUs at these TP sizes: 512 -> 513 must not get cheaper)."""
    arch = find_architecture(name)
    assert arch is not None
    eng = engine_profile("sglang", gpu=gpu, memory_gib=resolve_gpu(gpu).memory_bytes / 2**30, tp=par.gpus)
    _assert_bounded_and_growing(MoEStepModel(arch, gpu, par, engine=eng),
                                (0, 1, 8, 64, eng.cuda_graph_max_tokens), (0, 1, 700))


def test_expert_parallel_under_tensor_parallel_attention_needs_no_all_to_all():
    """TP8 EP8 without attention DP: every token is on every GPU, each runs its own experts and one
    all-reduce sums them (SGLang MiniMaxM2MoE.forward_normal), the same communication as TP8; with
    DP8 EP8 the tokens are dispatched and combined (all-to-all), which costs more at decode.
    (BF16 weights: the block-FP8 checkpoint cannot split its 1536-wide experts over MoE TP 8.)"""
    arch = find_architecture("MiniMaxAI/MiniMax-M2.5")
    eng = engine_profile("sglang", gpu="b200", tp=8)
    tp = MoEStepModel(arch, "b200", Parallelism(8, 1, 1), dtype="bf16", engine=eng).decode_step(16, 1000)
    tp_ep = MoEStepModel(arch, "b200", Parallelism(8, 1, 8), dtype="bf16", engine=eng).decode_step(16, 1000)
    dp_ep = MoEStepModel(arch, "b200", Parallelism(1, 8, 8), dtype="bf16",
                         engine=engine_profile("sglang", gpu="b200", tp=8, dp=8)).decode_step(16, 1000)
    assert tp_ep.allreduce_s == pytest.approx(tp.allreduce_s, rel=1e-12)
    assert tp_ep.gemm_s != tp.gemm_s  # the experts are split differently
    assert dp_ep.allreduce_s > 0


@pytest.mark.parametrize(("engine", "per_layer"), [("trtllm", 1.5e-3), ("sglang", 1.5e-3), ("vllm", 0.0)])
def test_eager_mla_prefill_is_launch_bound(engine: str, per_layer: float) -> None:
    # engines.toml eager_mla_layer_host_us: an eager step that prefills an MLA model takes at least
    # its 61 layers x the CPU's launch time a layer (TensorRT-LLM and SGLang 1.5 ms: 91.5 ms; vLLM
    # none); a long prompt whose kernels take longer, decode-only steps and GQA models
    # keep what their kernels add up to.  A 200-token prompt's kernels add up to 50 ms (TensorRT-LLM)
    # and 40 ms (SGLang) on 8 x H200.
    sm = _sm("deepseek-r1", Parallelism(8), engine)
    floor = 61 * per_layer
    short = sm.step(4, 1024, (Chunk(200),))
    plain = dataclasses.replace(sm.engine, eager_mla_layer_host_s=0.0)
    bare = MoEStepModel(sm.arch, "h200", Parallelism(8), dtype=sm.dtype, engine=plain).step(
        4, 1024, (Chunk(200),))
    assert short.gpu_s == pytest.approx(max(bare.gpu_s, floor), rel=1e-9)
    # what the GPU waits on the CPU, which an overlap scheduler may hide (servesim.sim.loop.run_step)
    assert short.launch_wait_s == pytest.approx(max(0.0, floor - bare.gpu_s), rel=1e-9)
    assert sm.step_price(4, 1024, ((200, 0, True),))[3] == pytest.approx(short.launch_wait_s, rel=1e-12)
    assert short.launch_s == pytest.approx(floor, rel=1e-12)  # the CPU's launch, bound or not
    assert sm.step_price(4, 1024, ((200, 0, True),))[4] == short.launch_s
    if per_layer:
        assert bare.gpu_s < floor  # the floor binds for a short prompt
        names = [op.name for op in short.ops]
        assert "launch-bound wait (eager prefill)" in names
        parts = priced_parts(short.ops)  # conserved: the parts are still their operations' sums
        assert parts["other"] == pytest.approx(short.other_s, rel=1e-12)
        assert sum(parts[k] for k in ("gemm", "attention", "comm", "other")) == pytest.approx(short.gpu_s,
                                                                                               rel=1e-12)
    long = sm.step(4, 1024, (Chunk(8192),))
    assert long.gpu_s > floor and "launch-bound wait (eager prefill)" not in [op.name for op in long.ops]
    assert long.launch_wait_s == 0.0
    decode = sm.step(256, 2048)
    assert "launch-bound wait (eager prefill)" not in [op.name for op in decode.ops]
    gqa = _sm("qwen3-235b-a22b", Parallelism(8), engine).step(4, 1024, (Chunk(200),))
    assert "launch-bound wait (eager prefill)" not in [op.name for op in gqa.ops]


def test_cuda_graph_limit_decides_which_decode_steps_run_eagerly() -> None:
    """TensorRT-LLM captures decode steps up to cuda_graph_config.max_batch_size (128 by default):
    a 256-sequence step runs eagerly and pays every kernel's launch gap; with the limit at 512
    (InferenceMAX's FP4 recipe) the same step is a graph: no gaps, and the shared experts on their
    auxiliary stream beside the router and routed experts (Deepseekv3MoE.forward's
    maybe_execute_in_parallel, on only under graph capture) instead of after them."""
    arch = find_architecture("deepseek-r1")
    assert arch is not None
    default = engine_profile("trtllm", gpu="b200", memory_gib=179)
    wide = engine_profile("trtllm", gpu="b200", memory_gib=179, cuda_graph_max_tokens=512)
    assert (default.cuda_graph_max_tokens, wide.cuda_graph_max_tokens) == (128, 512)
    eager = MoEStepModel(arch, "b200", Parallelism(8), dtype="fp4", engine=default).decode_step(256, 2048)
    graph = MoEStepModel(arch, "b200", Parallelism(8), dtype="fp4", engine=wide).decode_step(256, 2048)
    gaps = [op for op in eager.ops if op.name == "launch gaps (eager step)"]
    assert len(gaps) == 1 and "launch gaps (eager step)" not in [op.name for op in graph.ops]
    two = [op for op in graph.ops if op.kind == "two_streams"]
    assert len(two) == 1 and not [op for op in eager.ops if op.kind == "two_streams"]
    serial = sum(op.count * op.priced_s for op in eager.ops
                 if op.name in ("moe experts", "shared experts", "router"))
    assert two[0].priced_s < serial / two[0].count  # the overlap saves time
    assert eager.gpu_s - gaps[0].count * gaps[0].priced_s - serial + two[0].count * two[0].priced_s \
        == pytest.approx(graph.gpu_s, rel=1e-9)
    # within the limit both are graphs: the same step
    small = [MoEStepModel(arch, "b200", Parallelism(8), dtype="fp4", engine=e).decode_step(64, 2048).gpu_s
             for e in (default, wide)]
    assert small[0] == small[1]
    with pytest.raises(ParameterError) as exc:
        engine_profile("trtllm", gpu="b200", cuda_graph_max_tokens=-1)
    assert exc.value.name == "cuda_graph_max_tokens"


def test_trtllm_runs_mxfp4_experts_with_mxfp8_activations_on_blackwell() -> None:
    """TensorRT-LLM's ModelConfig.get_mxfp4_quant_algo: W4A8_MXFP4_MXFP8 on SM 100+ (the B200's
    measured rows of that kernel), W4A16_MXFP4 on Hopper; vLLM and SGLang keep W4A16 by default.
    gpt-oss-120b at 64 tokens on one B200: TensorRT-LLM's own tables time the MXFP8-activation
    kernel at about a quarter of its W4A16 one, and the step stays above its speed of light."""
    arch = find_architecture("openai/gpt-oss-120b")
    assert arch is not None
    steps = {}
    for gpu, engine in (("b200", "trtllm"), ("h200", "trtllm"), ("b200", "vllm")):
        sm = MoEStepModel(arch, gpu, Parallelism(1), dtype="mxfp4", kv_dtype="fp8",
                          engine=engine_profile(engine, gpu=gpu, memory_gib=179 if gpu == "b200" else 131))
        steps[(gpu, engine)] = sm
        st = sm.decode_step(64, 1500)
        assert st.gpu_s >= sm.speed_of_light(64, 1500)
    assert steps[("b200", "trtllm")].moe_kernel_dtype == "mxfp4_mxfp8"
    assert steps[("h200", "trtllm")].moe_kernel_dtype is None
    assert steps[("b200", "vllm")].moe_kernel_dtype is None
    t = steps[("b200", "trtllm")]._moe_tables
    assert t is not None
    shape = (arch.hidden, arch.moe_intermediate, arch.experts_per_token, arch.experts, 1, 1)
    a8, a16 = t.moe("mxfp4_mxfp8", 64, *shape), t.moe("mxfp4", 64, *shape)
    assert a8.ms < 0.3 * a16.ms  # 0.207 against 0.891 ms in the table
    moe = [op for op in steps[("b200", "trtllm")].decode_step(64, 1500).ops if op.name == "moe experts"]
    assert moe[0].priced_s == pytest.approx(a8.ms * 1e-3, rel=1e-9) and moe[0].dtype == "fp8"


def test_vllm_mxfp8_activations_borrow_sglangs_flashinfer_rows_of_the_same_gpu() -> None:
    """vLLM with VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 runs FlashInfer's TRTLLM-gen MXFP4 x MXFP8 MoE;
    its B200 table has no gpt-oss rows of that kernel, SGLang's (the same kernel) has: priced from
    those, named in the note; without the flag vLLM keeps its W4A16 rows; any other value is refused."""
    arch = find_architecture("openai/gpt-oss-120b")
    assert arch is not None
    eng = engine_profile("vllm", gpu="b200", memory_gib=179)
    plain = MoEStepModel(arch, "b200", Parallelism(1), dtype="mxfp4", kv_dtype="fp8", engine=eng)
    a8 = MoEStepModel(arch, "b200", Parallelism(1), dtype="mxfp4", kv_dtype="fp8", engine=eng,
                      moe_activations="mxfp8")
    assert plain.moe_kernel_dtype is None and a8.moe_kernel_dtype == "mxfp4_mxfp8"
    assert "MXFP4 x MXFP8 experts from SGLang" in a8.moe_note
    from servesim.hardware.moe_kernels import moe_tables

    sglang = moe_tables("b200", "sglang")[0]
    assert sglang is not None
    want = sglang.moe("mxfp4_mxfp8", 64, arch.hidden, arch.moe_intermediate, arch.experts_per_token,
                      arch.experts, 1, 1).ms * 1e-3
    moe = next(op for op in a8.decode_step(64, 1500).ops if op.name == "moe experts")
    assert moe.priced_s == pytest.approx(want, rel=1e-9)
    assert a8.decode_step(64, 1500).gpu_s < plain.decode_step(64, 1500).gpu_s
    with pytest.raises(ParameterError) as exc:
        MoEStepModel(arch, "b200", Parallelism(1), dtype="mxfp4", engine=eng, moe_activations="fp8")
    assert exc.value.name == "moe_activations"


def test_a_verify_step_rides_in_the_graph_of_its_batch_where_the_engine_captures_by_sequences() -> None:
    """TensorRT-LLM and SGLang capture CUDA graphs by batch size (sequences): a verify step of 4
    sequences with 3 MTP drafts each (16 tokens) replays the graph of batch 4, so with the limit
    at 4 it pays no launch gaps; vLLM captures by tokens, so the same 16 tokens run eagerly there."""
    arch = find_architecture("deepseek-r1")
    assert arch is not None
    trt = engine_profile("trtllm", gpu="b200", memory_gib=179, cuda_graph_max_tokens=4)
    vllm = engine_profile("vllm", gpu="b200", memory_gib=179, cuda_graph_max_tokens=4)
    assert trt.graph_size(16, 4, False) == 4 and vllm.graph_size(16, 4, False) == 16
    assert trt.graph_size(8196, 4, True) == 8196  # a step with a prefill counts its tokens
    names = {}
    for name, e in (("trtllm", trt), ("vllm", vllm)):
        sm = MoEStepModel(arch, "b200", Parallelism(8), dtype="fp4", engine=e)
        names[name] = [op.name for op in sm.decode_step(4, 2048, positions=4).ops]
    assert "launch gaps (eager step)" not in names["trtllm"]
    assert "launch gaps (eager step)" in names["vllm"]
    # one sequence more than the graphs hold: eager on both
    sm = MoEStepModel(arch, "b200", Parallelism(8), dtype="fp4", engine=trt)
    assert "launch gaps (eager step)" in [op.name for op in sm.decode_step(5, 2048, positions=4).ops]


def test_the_mtp_modules_experts_spread_over_every_gpu_as_the_targets_do() -> None:
    """DeepSeek-R1's MTP module (one MoE layer, 11.61e9 parameters, 11.27e9 of them routed
    experts) beside the target: at TP8 1/8 of all of it a GPU; at DP8 + EP8 the experts still
    1/8, the rest (attention, shared expert, projection: 0.34e9) whole on every DP rank, BF16."""
    from servesim.hardware.speculation import draft_model_for, drafter_memory

    arch = find_architecture("deepseek-r1")
    assert arch is not None
    experts = arch.experts * 3 * arch.hidden * arch.moe_intermediate
    rest = arch.mtp_params - experts
    assert experts == pytest.approx(11.27e9, rel=0.01) and rest == pytest.approx(0.34e9, rel=0.05)
    got = {}
    for tp, dp in ((8, 1), (1, 8)):
        sm = MoEStepModel(arch, "h200", Parallelism(tp, dp, 8), dtype="fp8",
                          engine=engine_profile("sglang", gpu="h200", memory_gib=141))
        got[(tp, dp)] = drafter_memory(draft_model_for(sm, "mtp", None, None), sm, 3)[0]
    assert got[(8, 1)] == pytest.approx((experts + rest) / 8 * 2.0)
    assert got[(1, 8)] == pytest.approx((experts / 8 + rest) * 2.0)
    assert got[(1, 8)] < 4 * 2**30  # not the whole module on every GPU (23 GB)


def test_sglang_blackwell_verify_reads_the_latent_cache_once_per_query_row() -> None:
    """SGLang's trtllm_mla backend on Blackwell runs a verify step's n query tokens a sequence as n
    single-query rows of flashinfer's trtllm-gen MLA decode kernel, each reading the sequence's
    cache (engines.toml, sglang PR #28303): the attention of a verify of 32 sequences x 3 tokens is
    the table's decode of 96 rows, and the other operations are those of the same step priced
    without the rule.  Hopper's backends and TensorRT-LLM keep one read a sequence."""
    arch = find_architecture("deepseek-r1")
    assert arch is not None
    sg = engine_profile("sglang", gpu="b200", memory_gib=179)
    assert sg.mla_verify_per_query
    assert not engine_profile("sglang", gpu="h200", memory_gib=141).mla_verify_per_query
    assert not engine_profile("trtllm", gpu="b200", memory_gib=179).mla_verify_per_query
    plain = dataclasses.replace(sg, mla_verify_per_query=False)
    per_row = MoEStepModel(arch, "b200", Parallelism(8), dtype="fp8", engine=sg)
    one_read = MoEStepModel(arch, "b200", Parallelism(8), dtype="fp8", engine=plain)

    def attention(sm: MoEStepModel, batch: float, positions: int) -> float:
        return sum(op.seconds for op in sm.decode_step(batch, 2048, positions=positions).ops
                   if op.kind == "attention")

    # a single-token step is the same either way; the verify's attention is the decode of 96 rows
    assert attention(per_row, 32, 1) == pytest.approx(attention(one_read, 32, 1))
    assert attention(per_row, 32, 3) == pytest.approx(attention(one_read, 96, 1), rel=1e-9)
    assert attention(per_row, 32, 3) > 1.5 * attention(one_read, 32, 3)
    rest = [op.seconds for op in per_row.decode_step(32, 2048, positions=3).ops if op.kind != "attention"]
    assert rest == pytest.approx([op.seconds for op in one_read.decode_step(32, 2048, positions=3).ops
                                  if op.kind != "attention"])


def test_sglang_hopper_mla_prefill_is_priced_by_the_fa3_class_kernel() -> None:
    """On Hopper SGLang's MLA prefill attention is priced by TensorRT-LLM's measured kernel
    (engines.toml mla_prefill_from: SGLang's own table runs an 8k causal prefill of 16 heads,
    2 x 16 x 320 x 8192 x 8193 / 2 = 344 GFLOP, at 17% of the H200's BF16 peak, TensorRT-LLM's at
    55%): an 8k prompt's attention on 8 x H200 is 61 layers of TensorRT-LLM's 8k prefill, above its
    speed of light and below SGLang's own price; decode keeps SGLang's table, and the B200 (where the
    two tables agree) and TensorRT-LLM itself are unchanged."""
    from servesim.hardware.moe_kernels import moe_tables

    arch = find_architecture("deepseek-r1")
    assert arch is not None
    sg = engine_profile("sglang", gpu="h200", memory_gib=141)
    assert sg.mla_prefill_engine == "trtllm"
    assert engine_profile("sglang", gpu="b200", memory_gib=179).mla_prefill_engine == ""
    assert engine_profile("trtllm", gpu="h200", memory_gib=141).mla_prefill_engine == ""
    own = dataclasses.replace(sg, mla_prefill_engine="")
    new = MoEStepModel(arch, "h200", Parallelism(8), dtype="fp8", engine=sg)
    old = MoEStepModel(arch, "h200", Parallelism(8), dtype="fp8", engine=own)

    prompt = (Chunk(8192, 0, 1),)
    a_new = next(op for op in new.step(0.0, 0.0, prompt).ops if op.kind == "attention")
    a_old = next(op for op in old.step(0.0, 0.0, prompt).ops if op.kind == "attention")
    trt = moe_tables("h200", "trtllm")[0]
    sgl = moe_tables("h200", "sglang")[0]
    assert trt is not None and sgl is not None
    assert a_new.seconds == pytest.approx(61 * trt.mla_prefill(1, 8192, 16, "bf16").ms * 1e-3, rel=1e-9)
    assert a_old.seconds == pytest.approx(61 * sgl.mla_prefill(1, 8192, 16, "bf16").ms * 1e-3, rel=1e-9)
    flops = 2 * 16 * 320 * 8192 * 8193 / 2
    assert flops == pytest.approx(343.6e9, rel=1e-3)
    peak = 989.4e12  # the H200's dense BF16
    assert 61 * flops / peak < a_new.seconds < 0.5 * a_old.seconds
    assert "TensorRT-LLM" in a_new.note and not a_old.note
    # decode steps are priced by SGLang's own table either way
    assert new.decode_step(16, 2048).total_s == pytest.approx(old.decode_step(16, 2048).total_s)


def test_b200_block_fp8_experts_of_a_prefill_step_take_the_fitted_scale() -> None:
    """engines.toml moe_prefill_scale: on the B200 a DeepSeek-V3-family step that prefills pays 1.5 x
    (TensorRT-LLM) and 1.7 x (SGLang) the measured block-FP8 experts (fitted leave-one-source-out to
    InferenceX's B200 FP8 runs, each engine apart), with a note;
    its decode steps, its NVFP4 experts, the H200, vLLM and GQA families are priced as measured, and
    the scaled step still lies between its speed of light and the ceiling."""
    arch = find_architecture("deepseek-r1")
    assert arch is not None
    prompt = (Chunk(7373, 0, 1),)

    def experts(sm: MoEStepModel, *args: object) -> float:
        return next(op.seconds for op in sm.step(*args).ops if op.kind == "moe")  # type: ignore[arg-type]

    for engine, factor in (("trtllm", 1.5), ("sglang", 1.7)):
        eng = engine_profile(engine, gpu="b200", memory_gib=179)
        assert eng.moe_prefill_factor("deepseek_v3", "fp8_block") == factor
        assert eng.moe_prefill_factor("qwen3_moe", "fp8_block") == 1.0
        assert eng.moe_prefill_factor("deepseek_v3", "nvfp4") == 1.0
        plain = dataclasses.replace(eng, moe_prefill_scale=())
        new = MoEStepModel(arch, "b200", Parallelism(8), dtype="fp8_block", engine=eng)
        old = MoEStepModel(arch, "b200", Parallelism(8), dtype="fp8_block", engine=plain)
        assert f"{factor:g} x" in new.moe_prefill_note and old.moe_prefill_note == ""
        from servesim.plan.predict import _pricing_notes
        assert new.moe_prefill_note in _pricing_notes(new)  # printed beside every prediction it touches
        scaled, measured = experts(new, 0.0, 0.0, prompt), experts(old, 0.0, 0.0, prompt)
        assert scaled == pytest.approx(factor * measured, rel=1e-12)
        st = new.step(0.0, 0.0, prompt)
        assert any("moe_prefill_scale" in n for n in st.notes)
        assert st.bound_s < st.gpu_s <= STEP_CEILING * st.bound_s
        assert st.gpu_s > old.step(0.0, 0.0, prompt).gpu_s
        # decode steps (memory-bound sizes, where the tables hold) are unchanged
        assert new.decode_step(64, 2000).total_s == pytest.approx(old.decode_step(64, 2000).total_s,
                                                                  rel=1e-12)
        fp4 = MoEStepModel(arch, "b200", Parallelism(8), dtype="fp4", engine=eng)
        fp4_plain = MoEStepModel(arch, "b200", Parallelism(8), dtype="fp4", engine=plain)
        assert fp4.moe_prefill_note == ""
        assert experts(fp4, 0.0, 0.0, prompt) == pytest.approx(experts(fp4_plain, 0.0, 0.0, prompt),
                                                               rel=1e-12)
    for engine, gpu, gib in (("trtllm", "h200", 141), ("sglang", "h200", 141), ("vllm", "b200", 179)):
        assert engine_profile(engine, gpu=gpu, memory_gib=gib).moe_prefill_scale == ()


def test_block_fp8_splits_only_into_whole_scale_blocks():
    """A 128 x 128 block-FP8 checkpoint loads only where each rank's share of a split width is a
    whole number of 128-row blocks (vLLM / SGLang ``Fp8MoEMethod.create_weights``): DeepSeek-R1's
    2048-wide experts and shared expert split 16 ways (128) but not 32 (64), nor its 18432-wide
    dense MLPs (576);
    MiniMax-M2.5's 1536-wide experts split 4 ways (384) but not 8 (192) -- its cookbook runs
    TP8 with EP8.  BF16 weights split any way the widths divide."""
    from servesim.hardware.model_config import LINEAR_PARTS
    from servesim.hardware.moe_step import block_fp8_splits

    ds = find_architecture("deepseek-ai/DeepSeek-R1")
    parts = set(ds.quantized_parts or LINEAR_PARTS)
    assert block_fp8_splits(ds, Parallelism(16), parts) == []
    assert block_fp8_splits(ds, Parallelism(32), parts) == [
        "expert width 2048 / MoE TP 32 = 64", "shared-expert width 2048 / tp 32 = 64",
        "dense-MLP width 18432 / tp 32 = 576"]
    assert block_fp8_splits(ds, Parallelism(8, 4, 2), parts) == []  # MoE TP 16
    mm = find_architecture("MiniMaxAI/MiniMax-M2.5")
    mparts = set(mm.quantized_parts or LINEAR_PARTS)
    assert block_fp8_splits(mm, Parallelism(4), mparts) == []
    assert block_fp8_splits(mm, Parallelism(8), mparts) == ["expert width 1536 / MoE TP 8 = 192"]
    assert block_fp8_splits(mm, Parallelism(8, 1, 2), mparts) == []
    with pytest.raises(ParameterError, match=r"ep=1 .*ep 2, 4, 8 would load"):
        MoEStepModel(mm, "h200", Parallelism(8))
    assert MoEStepModel(mm, "h200", Parallelism(8), dtype="bf16").dtype == "bf16"


def test_fp8_of_a_bf16_qwen3_checkpoint_is_per_tensor_where_the_block_release_cannot_split():
    """``--dtype fp8`` on Qwen3-MoE names Qwen's block-FP8 release, except where its experts cannot
    split (235B: 1536 / 8 = 192; 30B-A3B: 768 / 4 = 192): there NVIDIA's per-tensor FP8 release
    loads (what TensorRT-LLM's TP8 tables run).  A block-FP8 checkpoint itself stays block FP8."""
    from servesim.hardware.pricer import moe_dtype

    big = find_architecture("Qwen/Qwen3-235B-A22B")
    assert moe_dtype("fp8", big, "h200", Parallelism(8)) == "fp8"
    assert moe_dtype("fp8", big, "h200", Parallelism(8, 1, 8)) == "fp8_block"
    assert moe_dtype("fp8", big, "h200", Parallelism(4)) == "fp8_block"
    assert moe_dtype("fp8", big, "h200") == "fp8_block"  # no split given: the release
    small = find_architecture("Qwen/Qwen3-30B-A3B")
    assert moe_dtype("fp8", small, "h100-sxm", Parallelism(4)) == "fp8"
    assert moe_dtype("fp8", small, "h100-sxm", Parallelism(2)) == "fp8_block"
    own = find_architecture("Qwen/Qwen3-235B-A22B-FP8")
    assert moe_dtype("fp8", own, "h200", Parallelism(8)) == "fp8_block"


def test_per_tensor_fp8_experts_take_the_block_fp8_table_where_the_engine_timed_only_that():
    """SGLang's Hopper tables time block FP8 only: per-tensor FP8 experts (Qwen3-235B at MoE TP 8,
    where only NVIDIA's per-tensor release loads) are priced by the block-FP8 rows of the same
    engine, one byte a weight either way, with a note and not called measured; TensorRT-LLM,
    which timed per-tensor FP8, keeps its own rows."""
    a = find_architecture("Qwen/Qwen3-235B-A22B")
    sg = MoEStepModel(a, "h200", Parallelism(8), dtype="fp8",
                      engine=engine_profile("sglang", gpu="h200", tp=8))
    assert "fp8" not in sg._moe_tables.moe_dtypes
    sec, measured, note = sg._moe(64)
    blk = sg._moe_tables.moe("fp8_block", 64.0, a.hidden, a.moe_intermediate, a.experts_per_token,
                             a.experts, 8, 1)
    assert sec == pytest.approx(blk.ms * 1e-3, rel=1e-12)
    assert not measured and note.startswith("per-tensor FP8 experts priced by the engine's block-FP8")
    # never cheaper than the same layer's weights read at the GPU's full HBM bandwidth
    touched = 128 * (1 - (1 - 8 / 128) ** 64)
    assert sec > touched * 3 * a.hidden * (a.moe_intermediate / 8) / resolve_gpu("h200").hbm_bytes_per_s
    tr = MoEStepModel(a, "h200", Parallelism(8), dtype="fp8",
                      engine=engine_profile("trtllm", gpu="h200", tp=8))
    assert tr._moe(64)[1] and "block-FP8" not in tr._moe(64)[2]


def test_trtllm_moe_backend_prices_block_fp8_experts_on_trtllm_gen_kernels():
    """TensorRT-LLM's moe_config.backend TRTLLM (InferenceMAX's B200 FP8 recipe below 256 clients)
    runs DeepSeek-R1's block-FP8 experts on TRTLLM-gen kernels, which the engine's own B200 table
    times only up to 256 tokens (DEEPGEMM above): they are priced from vLLM's rows of the same
    FlashInfer kernels. At 8,192 tokens on EP8 those are 2-4x DeepGEMM's (2.54 against 0.76 ms in
    the tables) and on TP8 cheaper; the step carries a note and stays above its speed of light;
    without the backend, on Hopper or another engine nothing changes."""
    a = find_architecture("deepseek-ai/DeepSeek-R1")
    assert a is not None

    def sm(par: Parallelism, backend: str | None, gpu: str = "b200", engine: str = "trtllm") -> MoEStepModel:
        return MoEStepModel(a, gpu, par, dtype="fp8_block", kv_dtype="fp8", moe_backend=backend,
                            engine=engine_profile(engine, gpu=gpu, tp=8))

    for par, lo, hi in ((Parallelism(8, 1, 8), 2.0, 4.0), (Parallelism(8), 0.6, 0.95)):
        dg, gen = sm(par, None), sm(par, "trtllm")
        ratio = gen._moe(8192)[0] / dg._moe(8192)[0]
        assert lo < ratio < hi
        assert gen._moe(8192)[1] and dg.moe_backend_note == ""
        assert "flashinfer_trtllm" in gen.moe_backend_note and "vLLM" in gen.moe_backend_note
        chunks = (Chunk(8192, 0),)
        assert gen.prefill_step(8192).gpu_s >= gen.speed_of_light(0.0, 0.0, chunks)
        assert gen.prefill_step(8192).gpu_s <= STEP_CEILING * gen.speed_of_light(0.0, 0.0, chunks)
    assert sm(Parallelism(8, 1, 8), "deepgemm")._moe(8192) == sm(Parallelism(8, 1, 8), None)._moe(8192)
    # no TRTLLM-gen block-FP8 rows on Hopper: the table's own CUTLASS rows, and a note says so
    hopper = sm(Parallelism(8), "trtllm", gpu="h200")
    assert hopper._moe(8192) == sm(Parallelism(8), None, gpu="h200")._moe(8192)
    assert "no TRTLLM fp8_block MoE rows measured on h200" in hopper.moe_backend_note
    assert "moe_torch_flow_cutlass" in hopper.moe_backend_note
    assert sm(Parallelism(8), "trtllm", engine="sglang").moe_backend_note == ""
    with pytest.raises(ParameterError, match="moe_backend"):
        sm(Parallelism(8), "vanilla")  # a TensorRT-LLM backend servesim does not take


def test_trtllm_moe_backend_prices_nvfp4_experts_on_trtllm_gen_kernels():
    """moe_config.backend TRTLLM with NVFP4 experts (the Dynamo B200 FP4 ctx recipes): TRTLLM-gen rows, never
    the default CUTLASS kernel's. vLLM's rows of FlashInfer's TRTLLM-gen NVFP4 kernel where vLLM timed the
    shape (the whole layer, its finalize included): on EP4 at 8,192 tokens 1.07 against CUTLASS's 0.917 ms
    (the GB200's row 201633, 0.879 ms, x the two tables' median ratio 1.043: the B200's own CUTLASS EP4
    series, 1.38 ms here, ran 1.84 x its GB200 sibling's and was replaced, build_kernel_tables.py);
    where it did not (DeepSeek-V3's experts at MoE TP2 x EP4), TensorRT-LLM's own TRTLLM-gen rows, timed
    apart from its CUTLASS ones (b200_sxm/moe_trtllm_1.3.0rc20_moe_perf.parquet at 1,024 tokens: 0.1621 ms,
    row 192069, plus the finalize it was timed without, against CUTLASS's 0.2392, row 126702). Each with a
    note, within the step's bounds; the default backend and CUTLASS keep the own table without one."""
    a = find_architecture("deepseek-ai/DeepSeek-R1")
    assert a is not None

    dep4 = Parallelism(1, 4, 4)

    def sm(backend: str | None, par: Parallelism = dep4) -> MoEStepModel:
        return MoEStepModel(a, "b200", par, dtype="fp4", kv_dtype="fp8", moe_backend=backend,
                            engine=engine_profile("trtllm", gpu="b200", tp=par.tp, dp=par.dp))

    own, gen, cutlass = sm(None), sm("trtllm"), sm("cutlass")
    ratio = gen._moe(8192)[0] / own._moe(8192)[0]
    assert 1.1 < ratio < 1.25  # a different kernel's rows
    assert own._moe(8192)[0] * 1e3 == pytest.approx(0.8790016174316406 * 1.043, rel=1e-3)  # CUTLASS
    assert cutlass._moe(8192) == own._moe(8192) and cutlass.moe_backend_note == own.moe_backend_note == ""
    assert "trtllmnvfp4" in gen.moe_backend_note and "vLLM" in gen.moe_backend_note
    chunks = (Chunk(8192, 0),)
    step = gen.step(0.0, 0.0, chunks)
    assert gen.speed_of_light(0.0, 0.0, chunks) <= step.gpu_s <= STEP_CEILING * step.bound_s
    tp2 = Parallelism(8, 1, 4)  # MoE TP2 x EP4: no vLLM row of the kernel at this shape
    own2, gen2 = sm(None, tp2), sm("trtllm", tp2)
    finalize = 0.003 + 2 * 1024 * 7168 * 9 / 7.7e12 * 1e3  # ms: build_kernel_tables.finalize_ms
    assert gen2._moe(1024)[0] * 1e3 == pytest.approx(0.16213120222091676 + finalize, rel=1e-3)
    assert own2._moe(1024)[0] * 1e3 == pytest.approx(0.2391808032989502, rel=1e-3)
    assert "own measured moe_torch_flow_min_latency + finalize" in gen2.moe_backend_note


def test_trtllm_triton_moe_backend_prices_mxfp4_experts_on_openais_triton_kernels():
    """gptoss_fp4_h200_trt.sh runs gpt-oss-120b with moe_config.backend TRITON: TensorRT-LLM's
    TritonFusedMoE, OpenAI's triton_kernels, whose tensor-parallel rows vLLM measured on the same GPU
    (TensorRT-LLM's Hopper table timed expert parallel only). At TP2 the step takes vLLM's row,
    carries a note, and stays between its speed of light and the ceiling; on the B200 (vLLM's
    MXFP4 rows there are FlashInfer's) and without the backend nothing changes."""
    a = find_architecture("openai/gpt-oss-120b")
    assert a is not None

    def sm(backend: str | None, gpu: str = "h200") -> MoEStepModel:
        return MoEStepModel(a, gpu, Parallelism(2), dtype="mxfp4", moe_backend=backend,
                            engine=engine_profile("trtllm", gpu=gpu, tp=2))

    tri, own = sm("triton"), sm(None)
    key = (a.hidden, a.moe_intermediate, a.experts_per_token, a.experts, 2, 1)
    vl = tri._a8_tables.moe("mxfp4", 256, *key)
    sec, measured, _ = tri._moe(256)
    assert sec == pytest.approx(vl.ms * 1e-3, rel=1e-12) and measured
    assert not own._moe(256)[1]  # TensorRT-LLM's own Hopper rows: EP only, TP derived
    assert "oaitritonmxfp4" in tri.moe_backend_note and own.moe_backend_note == ""
    st = tri.decode_step(256, 1500)
    assert tri.speed_of_light(256, 1500) <= st.gpu_s <= STEP_CEILING * tri.speed_of_light(256, 1500)
    # on the B200 vLLM's MXFP4 rows are FlashInfer's: TensorRT-LLM's own rows, and a note says so
    b200 = sm("triton", gpu="b200")
    assert b200._moe(256) == sm(None, gpu="b200")._moe(256) and "no TRITON mxfp4" in b200.moe_backend_note


def test_piecewise_cuda_graphs_lift_the_eager_prefill_floor():
    """TensorRT-LLM with torch_compile_config.enable_piecewise_cuda_graph (InferenceMAX's B200 FP8
    recipe from 64 clients) replays its prefill steps piecewise, as vLLM does: a short prompt costs
    what its kernels add up to (below the 61 x 1.5 ms = 91.5 ms floor), never less than its speed
    of light; other engines' profiles and decode steps are unchanged."""
    arch = find_architecture("deepseek-r1")
    assert arch is not None
    eng = engine_profile("trtllm", gpu="h200", memory_gib=131, piecewise_cuda_graphs=True)
    assert eng.eager_mla_layer_host_s == 0.0
    plain = engine_profile("trtllm", gpu="h200", memory_gib=131)
    assert plain.eager_mla_layer_host_s == pytest.approx(1.5e-3)
    pw = MoEStepModel(arch, "h200", Parallelism(8), engine=eng)
    eager = _sm("deepseek-r1", Parallelism(8), "trtllm")
    chunks = (Chunk(200),)
    short, floor = pw.step(4, 1024, chunks), eager.step(4, 1024, chunks)
    assert pw.speed_of_light(4, 1024, chunks) <= short.gpu_s < 61 * 1.5e-3
    assert floor.gpu_s == pytest.approx(61 * 1.5e-3, rel=1e-9)
    assert "launch-bound wait (eager prefill)" not in [op.name for op in short.ops]
    assert pw.step(256, 2048).gpu_s == pytest.approx(eager.step(256, 2048).gpu_s, rel=1e-12)


@pytest.mark.parametrize(("par", "one_par", "names", "comm"), [
    # TEP16 (TP16 attention, EP16 experts) against TEP8; DEP16 (attention DP: the engine's all-gather
    # and reduce-scatter, or DeepEP) against DEP8
    (Parallelism(16, 1, 16), Parallelism(8, 1, 8), ("all-reduce", "all-reduce (moe)"), None),
    (Parallelism(1, 16, 16), Parallelism(1, 8, 8), ("dp gather + scatter",), None),
    (Parallelism(1, 16, 16), Parallelism(1, 8, 8), ("ep dispatch + combine",), "deepep"),
])
def test_a_collective_across_nodes_is_unmeasured_and_says_so(par: Parallelism, one_par: Parallelism,
                                                             names: tuple[str, ...],
                                                             comm: str | None) -> None:
    """No kernel table times a collective over two 8-GPU H100 nodes: its price is the node's plus a
    model of the network, so the operation is not measured and its note names the span and the
    model; the same operations within one node (TP8 / DP8 + EP8) stay measured, with no note."""
    arch = find_architecture("deepseek-ai/DeepSeek-R1")
    assert arch is not None
    eng = engine_profile("trtllm", gpu="h100-sxm", tp=par.tp * par.dp, dp=par.dp)
    two = MoEStepModel(arch, "h100-sxm", par, engine=eng, ep_comm=comm).decode_step(16 * par.dp, 2000)
    ops = {op.name: op for op in two.ops}
    for name in names:
        assert not ops[name].measured
        assert "over 16 " in ops[name].note and "spans 2 nodes of 8, not measured" in ops[name].note
    assert not two.measured and any("spans 2 nodes" in n for n in two.notes)
    one_eng = engine_profile("trtllm", gpu="h200", tp=one_par.tp * one_par.dp, dp=one_par.dp)
    one = MoEStepModel(arch, "h200", one_par, engine=one_eng, ep_comm=comm).decode_step(16 * one_par.dp, 2000)
    for op in one.ops:
        if op.name in names:
            assert op.measured and op.note == ""


@pytest.mark.parametrize("gpu", ["h200", "b200", "h100-sxm"])
def test_a_dispatch_of_under_one_token_a_rank_is_the_measured_one_token_kernel(gpu: str) -> None:
    """DP8 + EP8 decode (with DeepEP) of 1 and 4 sequences gives each rank 1/8 and 1/2 of a token on
    average: the collective waits for the ranks that hold one, so the step prices DeepEP's low-latency
    dispatch and combine at the table's measured 1-token point, stays measured and carries no
    extrapolation note;
    with 8 sequences (one a rank) the same op costs the same."""
    from servesim.hardware.moe_kernels import moe_tables

    arch = find_architecture("deepseek-ai/DeepSeek-R1")
    assert arch is not None
    par = Parallelism(1, 8, 8)
    eng = engine_profile("trtllm", gpu=gpu, tp=8, dp=8)
    sm = MoEStepModel(arch, gpu, par, engine=eng, ep_comm="deepep")
    mt, _ = moe_tables(gpu, "trtllm")
    assert mt is not None
    args = (1.0, arch.hidden, arch.experts_per_token, arch.experts, 8)
    one_token = (mt.deepep("dispatch", "ll", *args).ms + mt.deepep("combine", "ll", *args).ms) * 1e-3
    for batch in (1, 4, 8):
        step = sm.decode_step(batch, 2000)
        op = {o.name: o for o in step.ops}["ep dispatch + combine"]
        assert op.measured and op.note == ""
        assert op.priced_s == pytest.approx(one_token, rel=1e-12)
        assert step.measured


def test_a_dispatch_past_the_measured_tokens_is_unmeasured_and_says_so() -> None:
    """DeepEP's low-latency kernels were measured up to 1,024 tokens a rank: a DP8 + EP8 decode of
    8,192 sequences is at that edge (measured, no note), one of 16,384 lies beyond it, so its dispatch
    and combine are the roofline-scaled extrapolation the table returns, flagged with the table's own
    note (the step then reports a roofline fallback), and cost twice the edge's (2,048 tokens a rank,
    bandwidth-bound: the roofline's ratio)."""
    arch = find_architecture("deepseek-ai/DeepSeek-R1")
    assert arch is not None
    eng = engine_profile("trtllm", gpu="h200", tp=8, dp=8)
    sm = MoEStepModel(arch, "h200", Parallelism(1, 8, 8), engine=eng, ep_comm="deepep")
    edge, past = sm.decode_step(8 * 1024, 2000), sm.decode_step(8 * 2048, 2000)
    a, b = ({o.name: o for o in s.ops}["ep dispatch + combine"] for s in (edge, past))
    assert a.measured and a.note == ""
    assert not b.measured and "tokens=2048 above the measured 1024" in b.note
    assert not past.measured and any("above the measured 1024" in n for n in past.notes)
    assert b.priced_s == pytest.approx(2 * a.priced_s, rel=0.01)


def test_sglang_flashinfer_gemm_prices_block_fp8_linear_layers_from_tensorrt_llms_table():
    """InferenceMAX's B200 FP8 SGLang scripts export SGLANG_ENABLE_FLASHINFER_GEMM=true, which sends
    every block-FP8 linear layer to FlashInfer's GEMM instead of DeepGEMM (the only kernel SGLang's
    table times): with gemm_backend "flashinfer" those GEMMs are TensorRT-LLM's B200 block-FP8 rows
    (a one-row 2,112 x 7,168 qkv_a projection: the TensorRT-LLM lookup exactly, below SGLang's own),
    the step carries a note, stays within its bounds and never gets cheaper with more sequences; the
    experts and attention do not move; on Hopper, in FP4, or another engine nothing changes."""
    from servesim.hardware.kernels import tables_for

    a = find_architecture("deepseek-ai/DeepSeek-R1")
    assert a is not None

    def sm(backend: str | None, gpu: str = "b200", engine: str = "sglang",
           dtype: str = "fp8_block") -> MoEStepModel:
        return MoEStepModel(a, gpu, Parallelism(8), dtype=dtype, kv_dtype="fp8", gemm_backend=backend,
                            engine=engine_profile(engine, gpu=gpu, tp=8))

    own, fi = sm(None), sm("flashinfer")
    n = a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim  # the fused q_a / kv_a projection
    trt, sgl = tables_for("b200", "trtllm"), tables_for("b200", "sglang")
    assert trt is not None and sgl is not None
    assert fi._gemm(1, n, a.hidden)[0] == pytest.approx(trt.gemm("fp8_block", 1, n, a.hidden).ms * 1e-3)
    assert own._gemm(1, n, a.hidden)[0] == pytest.approx(sgl.gemm("fp8_block", 1, n, a.hidden).ms * 1e-3)
    assert fi._gemm(1, n, a.hidden)[0] < own._gemm(1, n, a.hidden)[0]
    assert "FlashInfer" in fi.gemm_backend_note and "TensorRT-LLM" in fi.gemm_backend_note
    assert own.gemm_backend_note == ""
    assert fi._moe(64) == own._moe(64)  # the experts are the MoE runner's, not the linear layers'
    steps = [fi.decode_step(b, 2048) for b in (1, 2, 4, 8, 16, 32, 64, 128)]
    assert all(x.total_s <= y.total_s for x, y in itertools.pairwise(steps))
    for b, st in zip((1, 2, 4, 8, 16, 32, 64, 128), steps, strict=True):
        assert st.gpu_s >= fi.speed_of_light(b, 2048)
        assert st.gpu_s <= STEP_CEILING * max(fi.speed_of_light(b, 2048), st.floor_s)
    assert steps[0].gpu_s < own.decode_step(1, 2048).gpu_s
    assert sm("flashinfer", gpu="h200").gemm_backend_note == ""
    assert sm("flashinfer", engine="trtllm").gemm_backend_note == ""
    assert sm("flashinfer", dtype="fp4").gemm_backend_note == ""
    with pytest.raises(ParameterError, match="gemm_backend"):
        sm("deepgemm")


def test_deepseek_nvfp4_decode_experts_on_b200_are_tensorrt_llms_default_kernel_at_the_replicas_tokens():
    """Issue 48's point checked by hand: DeepSeek-V3.1 NVFP4 on 8 x B200, TensorRT-LLM, EP8, a decode
    batch of 422.  Every token is routed over the EP group, so the MoE layer is looked up at the
    replica's 422 tokens both with TP8 attention (every GPU holds them all) and with attention DP8
    (53 a rank, gathered): 422 x 8 / 256 = 13.2 tokens an expert, every one of a GPU's 32 experts
    touched, so no price may fall below reading their FP4 weights and block scales (32 x 3 x 7168 x
    2048 x 0.5625 bytes = 793 MB) at the HBM rate.  TensorRT-LLM's default backend for NVFP4 experts
    is CUTLASS (``ModelConfig.resolve_moe_backend``: AUTO is TRTLLM only for gpt-oss and DeepSeek-V4),
    its own table's rows above 256 tokens; moe_config.backend TRTLLM (TRTLLM-gen) is cheaper there."""
    a = find_architecture("deepseek-ai/DeepSeek-V3.1")
    assert a is not None

    def sm(par: Parallelism, backend: str | None = None) -> MoEStepModel:
        return MoEStepModel(a, "b200", par, dtype="fp4", kv_dtype="fp8", moe_backend=backend,
                            engine=engine_profile("trtllm", gpu="b200", tp=par.tp, dp=par.dp))

    tep, dep = sm(Parallelism(8, 1, 8)), sm(Parallelism(1, 8, 8))
    local = a.experts // 8
    touched = local * (1 - (1 - a.experts_per_token / a.experts) ** 422)
    assert touched > local - 1e-3  # all 32 experts read
    weights = local * 3 * a.hidden * a.moe_intermediate * BYTES_PER_VALUE["fp4"]  # bytes, scales included
    weights_s = weights / tep.tables.hbm_bytes_per_s
    assert 0.09e-3 < weights_s < 0.12e-3  # about 100 us at the B200's 7.7 TB/s
    own = tep._moe(422)
    assert own == dep._moe(422) and own[1]  # the same lookup, measured, whichever attention split
    key = (a.hidden, a.moe_intermediate, a.experts_per_token, a.experts, 1, 8)
    assert own[0] == pytest.approx(tep._moe_tables.moe("fp4", 422, *key).ms * 1e-3, rel=1e-12)
    gen = sm(Parallelism(8, 1, 8), "trtllm")._moe(422)
    assert weights_s < gen[0] < own[0]
    assert "cutlass" in tep._moe_tables.moe_source("fp4", key)  # the default backend's own rows
    # the steps price each of the 58 MoE layers at the replica's 422 tokens, not a rank's 53 (cheaper)
    assert tep._moe(53)[0] < own[0]
    moe_t = [op for op in tep.step(422, 4500).ops if op.kind == "moe"]
    assert len(moe_t) == 1 and moe_t[0].seconds == pytest.approx(58 * own[0], rel=1e-9)
    moe_d = [op for op in dep.step(422, 4500).ops if "moe layer" in op.name]  # beside the shared experts
    assert len(moe_d) == 1 and moe_d[0].seconds >= 58 * own[0] * (1 - 1e-9)
