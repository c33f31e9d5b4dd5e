"""The pricer of a deployment: what a replica's engine step costs, behind one typed seam.

:class:`Deployment` names one replica (model, GPUs, dtypes, engine and its settings);
:func:`build_step_model` is the one factory that turns it into a pricer: the operation-list step
model of :mod:`servesim.hardware.moe_step` for a mixture-of-experts or MLA model, the per-GEMM
:class:`~servesim.hardware.stepmodel.StepModel` for a dense one.  :class:`Pricer` is what the
engine loop (:mod:`servesim.sim`) and the planners (:mod:`servesim.plan`) may ask of either: a
step's time, the KV cache's capacity, the weights, the engine; nothing outside ``hardware/``
looks inside a pricer or sets an attribute on it.

Nothing here prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from servesim._checks import BOUNDS, ParameterError, check_bound, check_int, check_real
from servesim.hardware import engines  # engines.ENGINES: engines.toml, read on first use
from servesim.hardware.engines import (
    EP_COMMS,
    EngineProfile,
    default_engine,
    engine_profile,
    moe_backends,
)
from servesim.hardware.model_config import find_architecture
from servesim.hardware.moe_step import (
    GEMM_BACKENDS,
    MoEStepModel,
    Parallelism,
    block_fp8_splits,
)
from servesim.hardware.names import (
    ModelShape,
    canonical_gpu,
    dense_shape,
    resolve_gpu,
    valid_tps,
)
from servesim.hardware.ops import Peaks, PriceCache, StepPrice
from servesim.hardware.precision import check_kv_dtype, normalize_dtype
from servesim.hardware.shape import LINEAR_PARTS
from servesim.hardware.stepmodel import Chunk, StepModel, StepTime

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog

__all__ = ["BLOCK_FP8_FAMILIES", "Deployment", "Drafter", "Pricer", "build_step_model",
           "model_architecture", "moe_dtype"]


class GpuTime(Protocol):
    """A pass's GPU time (s): an engine step's :class:`~servesim.hardware.stepmodel.StepTime`, or a
    drafter's pass that is not one."""

    @property
    def gpu_s(self) -> float: ...


class Drafter(Protocol):
    """What speculation asks of a drafter (a draft model, an EAGLE or MTP head, Medusa heads, n-gram
    matching on the host): its pass over ``positions`` tokens of ``batch`` sequences."""

    def decode_step(self, batch: float, context: float, positions: int = 1) -> GpuTime: ...


class Pricer(Protocol):
    """What the engine loop and the planners ask of a step model (dense or MoE alike)."""

    engine: EngineProfile
    gpu: str
    tp: int  # the replica's GPUs (what throughput per GPU divides by)
    dtype: str
    kv_dtype: str
    drafter_bytes: tuple[float, float]

    is_moe: bool  # a mixture-of-experts or MLA model (the lab's closed forms price dense ones only)
    kv_context: int | None  # the request length it was made for (for_requests), None if any
    tables_note: str  # which measured tables price it (another GPU's, scaled, where it has none)
    price_cache: PriceCache  # what the engine loop keeps of its step prices (the pricer never reads it)

    @property
    def model_name(self) -> str: ...

    @property
    def has_mtp(self) -> bool: ...

    @property
    def peaks(self) -> Peaks: ...

    @property
    def pricing_notes(self) -> tuple[str, ...]: ...

    @property
    def weight_bytes_per_gpu(self) -> float: ...

    @property
    def kv_bytes_per_token_per_gpu(self) -> float: ...

    def kv_capacity_tokens(self, memory_bytes: float) -> int: ...

    def sequence_kv_bytes(self, tokens: float) -> float: ...

    def step(self, decode: float = 0.0, context: float = 0.0, chunks: tuple[Chunk, ...] = (),
             positions: int = 1, *, bound: bool = True) -> StepTime: ...

    def step_price(self, decode: int, context: int, chunks: tuple[tuple[int, int, bool], ...] = (),
                   positions: int = 1) -> StepPrice:
        """What the engine loop asks of a step: ``step(decode, context, chunks, positions,
        bound=False)``'s ``(total_s, measured, notes, launch_wait_s, launch_s)``, the chunks as
        (tokens, cached context, samples) of one prompt each (a dense model sums it without building
        the StepTime)."""
        ...

    def decode_step(self, batch: float, context: float, positions: int = 1) -> StepTime: ...

    def prompt_s(self, tokens: int) -> float: ...

    def for_requests(self, tokens: int) -> Pricer:
        """The pricer for requests of ``tokens`` tokens (a copy where the KV held depends on it)."""
        ...

    def with_drafter(self, drafter_bytes: tuple[float, float]) -> Pricer:
        """A copy whose KV cache makes room for a drafter's (weight, KV per token) bytes per GPU."""
        ...


@dataclass(frozen=True)
class Deployment:
    """One replica: model on ``tp`` GPUs with weight and KV dtypes, served by ``engine``.

    ``max_num_batched_tokens`` and ``max_num_seqs`` are the engine's step token budget and
    running-sequence limit under whatever name the engine gives them (vLLM
    ``--max-num-batched-tokens``/``--max-num-seqs``, SGLang ``--chunked-prefill-size``/
    ``--max-running-requests``, TensorRT-LLM ``--max-num-tokens``/``--max-batch-size``);
    ``scheduler`` holds the engine's other scheduler options as (name, value) pairs
    (SGLang ``enable_mixed_chunk``, ``max_prefill_tokens``; TensorRT-LLM
    ``enable_chunked_prefill``); ``overlap`` False turns off the engine's overlap scheduler
    (vLLM ``--no-async-scheduling``, SGLang ``--disable-overlap-schedule``, TensorRT-LLM
    ``--disable-overlap-scheduler``).
    """

    model: str
    gpu: str
    tp: int = 1
    dtype: str = "bf16"
    kv_dtype: str = "bf16"
    engine: str = field(default_factory=default_engine)  # engines.toml default_engine
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    scheduler: tuple[tuple[str, float | bool], ...] = ()
    overlap: bool | None = None  # the engine's overlap (async) scheduler; None: its default
    dp: int = 1  # attention data-parallel ranks (MoE models): the replica spans tp x dp GPUs
    ep: int = 1  # expert-parallel ranks of the MoE layers (their tensor parallel is tp x dp / ep)
    memory_fraction: float | None = None  # the engine's memory flag (engine_profile); None: its default
    cuda_graph_max_tokens: int | None = None  # the engine's CUDA-graph limit (engine_profile); None: default
    moe_activations: str | None = None  # "mxfp8": MXFP4 experts with MXFP8 activations (MoEStepModel)
    moe_backend: str | None = None  # TensorRT-LLM's moe_config.backend (engines.moe_backends); None: default
    gemm_backend: str | None = None  # SGLang's block-FP8 linear-layer backend (GEMM_BACKENDS); None: default
    ep_comm: str | None = None  # how attention-DP ranks reach the experts (EP_COMMS); None: the engine's
    eplb_slots: int = 0  # EPLB's redundant expert slots over the EP ranks (MoEStepModel); 0: none
    piecewise_cuda_graphs: bool = False  # prefill steps in piecewise CUDA graphs (engine_profile)
    speculating: bool = False  # the step model of a speculative run (engine_profile's ``speculating``)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", normalize_dtype(self.dtype))  # FP8, nvfp4, w4a16 ... as typed
        object.__setattr__(self, "kv_dtype", normalize_dtype(self.kv_dtype))
        for name in ("tp", "dp", "ep"):  # the flags' ranges (_checks.BOUNDS), as every way in has them
            check_bound(name, getattr(self, name))
        # (the token budget is left to the engine profile: a plan sizes it past --isl for whole prompts)
        for name, value in (("max_num_seqs", self.max_num_seqs), *self.scheduler):
            if value is not None and name in BOUNDS and not isinstance(value, bool):
                check_bound(name, value)
        if self.memory_fraction is not None:
            check_real("memory_fraction", self.memory_fraction, lo=0.0, hi=1.0, lo_open=True)
        if self.cuda_graph_max_tokens is not None:
            check_int("cuda_graph_max_tokens", self.cuda_graph_max_tokens, lo=0, hi=65536)
        if self.moe_activations not in (None, "mxfp8"):
            raise ParameterError("moe_activations", self.moe_activations,
                                 "None (the engine's default) or mxfp8")
        check_int("eplb_slots", self.eplb_slots, lo=0, hi=4096)
        if self.ep_comm is not None and self.ep_comm not in EP_COMMS:
            raise ParameterError("ep_comm", self.ep_comm,
                                 f"None (the engine's default) or one of {', '.join(EP_COMMS)}")
        if self.moe_backend is not None and self.moe_backend not in moe_backends():
            raise ParameterError("moe_backend", self.moe_backend,
                                 f"None (the engine's default) or one of {', '.join(moe_backends())}")
        if self.gemm_backend is not None and self.gemm_backend not in GEMM_BACKENDS:
            raise ParameterError("gemm_backend", self.gemm_backend,
                                 f"None (the engine's default) or one of {', '.join(GEMM_BACKENDS)}")
        if self.engine not in engines.ENGINES:
            raise ParameterError("engine", self.engine, f"one of {', '.join(engines.ENGINES)}")


def _memory_share_that_fits(eng: EngineProfile, weight_bytes: float, reserve_bytes: float,
                            memory_bytes: float) -> str:
    """``--gpu-memory-utilization 0.93 or more``: the engine's memory flag (engines.toml ``memory_flag``)
    at the smallest hundredth that leaves the weights room (fraction x HBM - reserve > weights),
    where the engine caps weights and KV together and a setting below 0.99 does; else ``""``."""
    flag = eng.memory_flag
    f_min = (weight_bytes + reserve_bytes) / memory_bytes
    if not flag or eng.fraction_of_free or f_min >= 0.99:
        return ""
    return f"{flag} {math.ceil(f_min * 100) / 100:.2f} or more"


def model_architecture(model: str) -> ModelShape | None:
    """The per-layer (MoE / MLA / hybrid) shape ``model`` names (a shipped config or a config.json
    path), or None for a dense model (a catalog name, or a dense config.json: :func:`dense_shape`'s)."""
    arch = find_architecture(model)
    return arch if arch is not None and arch.family else None


BLOCK_FP8_FAMILIES = frozenset({"deepseek_v3", "qwen3_moe", "minimax_m2"})
"""Model families whose publishers release their FP8 weights in 128 x 128 blocks, so that ``fp8``
names that release: DeepSeek-V3/R1 and Kimi-K2 (``quantization_config`` ``fp8`` with
``weight_block_size [128, 128]``), Qwen3-MoE (``Qwen/Qwen3-235B-A22B-FP8``,
``...-Instruct-2507-FP8``: "fine-grained fp8 quantization with block size of 128") and MiniMax-M2
(block FP8 checkpoints).  Others (gpt-oss, Mixtral, Llama-4) take per-tensor FP8."""


def moe_dtype(user: str, arch: ModelShape, gpu: str, par: Parallelism | None = None) -> str:
    """The weight format ``--dtype`` names for an MoE checkpoint: ``auto`` its own; ``fp8`` block
    FP8 where the checkpoint or its publisher's FP8 release is block-quantized
    (:data:`BLOCK_FP8_FAMILIES`: ``fp8`` on Qwen3-235B-A22B-Instruct-2507 is Qwen's own -FP8
    release), else per-tensor, and per-tensor too where that release cannot be split as ``par``
    (a :class:`~servesim.hardware.moe_step.Parallelism`) splits it while the checkpoint itself is
    not block FP8: Qwen3-235B-A22B's 1536-wide experts over MoE TP 8 leave 192 rows a rank, not a
    whole number of 128-row scale blocks, which NVIDIA's per-tensor FP8 release
    (``nvidia/Qwen3-235B-A22B-FP8``, what TensorRT-LLM's TP8 tables run) loads at any split
    (:func:`~servesim.hardware.moe_step.block_fp8_splits`); ``fp4`` the checkpoint's own MXFP4
    experts where it has them (gpt-oss: what vLLM, SGLang and TensorRT-LLM load on Hopper and
    Blackwell alike, and what benchmark tables label "fp4"), else NVFP4 on Blackwell; ``int4``
    int4 weight-only groups; ``bf16`` as it says."""
    own = arch.checkpoint_dtype
    if user == "auto":
        return str(own)
    if user == "fp8":
        if own == "fp8_block":
            return "fp8_block"
        if arch.family not in BLOCK_FP8_FAMILIES:
            return "fp8"
        if par is not None:
            if block_fp8_splits(arch, par, set(LINEAR_PARTS)):
                return "fp8"
        return "fp8_block"
    if user == "fp4":
        if own == "mxfp4":  # its own MXFP4 experts, as every engine runs gpt-oss on any GPU
            return "mxfp4"
        blackwell = gpu.startswith(("b200", "b300", "gb200", "gb300"))
        if blackwell:
            return "fp4"
        raise ParameterError("dtype", user, f"bf16, fp8 or int4 on {gpu} for {arch.name}: NVFP4 needs a "
                             "Blackwell GPU (MXFP4 weight-only runs on Hopper for MXFP4 checkpoints)")
    return user


Built = tuple[Pricer, ModelShape, float]
"""A pricer (:class:`StepModel` or :class:`MoEStepModel`), the model's shape and each GPU's memory."""

_BUILT: dict[Deployment, Built] = {}
"""Step models built for the shipped catalog, by deployment (a plan confirms one at many rates)."""


def build_step_model(dep: Deployment, catalog: Catalog | None = None) -> Built:
    """The step model of ``dep``, the model's shape and each GPU's memory in bytes (built once per
    deployment for the shipped catalog)."""
    if catalog is not None:
        return _build_step_model(dep, catalog)
    hit = _BUILT.get(dep)
    if hit is None:
        if len(_BUILT) >= 256:
            _BUILT.clear()
        hit = _BUILT[dep] = _build_step_model(dep, None)
    return hit


def _build_step_model(dep: Deployment, catalog: Catalog | None = None) -> Built:
    """The step model of ``dep``, the model's shape and each GPU's memory in bytes.

    A mixture-of-experts or MLA model (:mod:`servesim.hardware.model_config`) gets the
    operation-list step model of :mod:`servesim.hardware.moe_step` on ``tp x dp`` GPUs with
    ``ep``-way expert parallelism; a dense model the per-GEMM :class:`StepModel` on ``tp``."""
    arch = model_architecture(dep.model)
    gpu = resolve_gpu(dep.gpu, catalog)
    gname = canonical_gpu(dep.gpu, catalog)
    if arch is None and (dep.dp > 1 or dep.ep > 1):
        dense_shape(dep.model, catalog)  # a model it does not know is refused as unknown, not as dense
        raise ParameterError("dp" if dep.dp > 1 else "ep", dep.dp if dep.dp > 1 else dep.ep,
                             f"1 for a dense model ({dep.model}): attention data parallel and expert "
                             "parallel apply to mixture-of-experts models")
    if arch is None and dep.eplb_slots:
        raise ParameterError("eplb_slots", dep.eplb_slots, f"0 for a dense model ({dep.model}): EPLB places "
                             "redundant experts of mixture-of-experts models")
    eng = engine_profile(dep.engine, gpu=gname, memory_gib=gpu.memory_bytes / 2**30,
                         max_num_batched_tokens=dep.max_num_batched_tokens, max_num_seqs=dep.max_num_seqs,
                         scheduler=dict(dep.scheduler), overlap=dep.overlap, tp=dep.tp * dep.dp,
                         dp=dep.dp, memory_fraction=dep.memory_fraction,
                         cuda_graph_max_tokens=dep.cuda_graph_max_tokens, speculating=dep.speculating,
                         piecewise_cuda_graphs=dep.piecewise_cuda_graphs)
    if arch is not None:
        par = Parallelism(dep.tp, dep.dp, dep.ep)
        check_kv_dtype(dep.kv_dtype, gname, catalog)  # as the dense StepModel checks it
        msm = MoEStepModel(arch, gname, par,
                           dtype=moe_dtype(dep.dtype, arch, gname, par), kv_dtype=dep.kv_dtype, engine=eng,
                           catalog=catalog, moe_activations=dep.moe_activations,
                           moe_backend=dep.moe_backend, gemm_backend=dep.gemm_backend, ep_comm=dep.ep_comm,
                           eplb_slots=dep.eplb_slots)
        if msm.kv_capacity_tokens(gpu.memory_bytes) <= 0:
            per = msm.weight_bytes_per_gpu / 2**30
            # the most weights a GPU can hold and keep KV room: the engine's share of HBM less its reserve
            # (TensorRT-LLM takes its fraction of what the weights leave free: all but the reserve)
            usable = (gpu.memory_bytes - eng.reserved_bytes if eng.fraction_of_free
                      else eng.kv_room_bytes(gpu.memory_bytes, 0.0)) / 2**30
            # the fewest GPUs whose share of the same weights leaves that room some KV cache
            gpus_needed = math.floor(per * dep.tp * dep.dp / usable) + 1
            share = _memory_share_that_fits(eng, msm.weight_bytes_per_gpu, eng.reserved_bytes,
                                            gpu.memory_bytes)
            higher = f", or {share}" if share else ""
            raise ParameterError(
                "tp", f"{dep.tp} x dp {dep.dp}",
                f"large enough for the weights to fit: {arch.name} in {msm.dtype} needs {per:.1f} GiB per "
                f"GPU on {dep.tp * dep.dp} GPU{'s' if dep.tp * dep.dp > 1 else ''}, a {dep.gpu} has "
                f"{gpu.memory_bytes / 2**30:.1f} GiB, of which "
                f"{dep.engine} leaves at most {usable:.1f} GiB for weights (memory fraction "
                f"{eng.memory_fraction:g}, less its reserve; at least {gpus_needed} GPUs would hold it"
                f"{higher})")
        return msm, arch, gpu.memory_bytes
    shape = dense_shape(dep.model, catalog)
    sm = StepModel(shape, gname, dep.tp, dtype="bf16" if dep.dtype == "auto" else dep.dtype,
                   kv_dtype=dep.kv_dtype, engine=eng, catalog=catalog)
    if sm.kv_capacity_tokens(gpu.memory_bytes) <= 0:
        need = (sm.weight_bytes_per_gpu + sm.reserve_bytes) / (eng.memory_fraction * 2**30)
        room = eng.memory_fraction * gpu.memory_bytes - sm.reserve_bytes
        would = next((t for t in sorted(valid_tps(shape)) if t > dep.tp
                      and sm.weight_bytes_per_gpu * dep.tp / t < room), None)
        share = _memory_share_that_fits(eng, sm.weight_bytes_per_gpu, sm.reserve_bytes,
                                        gpu.memory_bytes)
        higher = f"{'; or' if would else ';'} {share}" if share else ""
        raise ParameterError(
            "tp", dep.tp,
            f"large enough for the weights to fit: {shape.name} in {sm.dtype} needs "
            f"{sm.weight_bytes_per_gpu / 2**30:.1f} GiB per GPU at tp {dep.tp} (about {need:.0f} GiB of "
            f"HBM at {eng.memory_fraction:g} utilization), a {dep.gpu} has "
            f"{gpu.memory_bytes / 2**30:.1f} GiB" + (f"; tp {would} would hold it" if would else "") + higher,
        )
    return sm, shape, gpu.memory_bytes


