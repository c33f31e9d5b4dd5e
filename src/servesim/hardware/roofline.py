"""Step times from hardware and model shape: the roofline view of decode, prefill and speculation.

The roofline (Williams, Waterman and Patterson, CACM 52(4), 2009): a kernel that
performs ``F`` FLOPs and moves ``Q`` bytes through HBM takes at least

    t = max(F / (FLOP/s x eta_c), Q / (bytes/s x eta_m))

where ``eta_c`` and ``eta_m`` are the fractions of the datasheet peaks a real
kernel reaches (:class:`Efficiency`).  Its arithmetic intensity ``F / Q``
decides which term wins; the crossover is the **ridge point** ``FLOP/s /
bytes/s`` (295 FLOP/byte on an H100 SXM: 989.4e12 / 3.35e12).

A forward pass of a transformer is priced as three parts run one after the
other, so their times add:

* the **weight GEMMs**: ``2`` FLOPs per parameter per token (one multiply, one
  add) for the parameters a token uses; the bytes are every weight the pass
  must stream once, shared by all ``T`` tokens of the pass;
* **attention** over the KV cache: FLOPs per token per cached position
  (:meth:`~servesim.hardware.shape.ModelShape.attention_flops_per_position`), bytes the cache read;
* the **tensor-parallel all-reduces**: two per layer (after attention and
  after the MLP, Megatron-style) of ``T x hidden`` BF16 activations; a ring
  all-reduce sends ``2 (tp - 1) / tp`` of the message from each GPU.

Pricing the GEMMs and attention on separate roofs matters: a decode step's
attention is memory-bound at any batch (each sequence reads its own cache), so
pooling its bytes with the GEMMs' FLOPs would let idle compute during attention
"hide" the GEMMs' compute, which the hardware cannot do.

**Arithmetic intensity of plain and speculative steps.**  The GEMMs of a decode
step at batch ``B`` push ``T = B`` tokens through weights of ``P`` parameters
of ``b`` bytes: ``AI = 2 P T / (b P) = 2 T / b``, i.e. ``T`` FLOP/byte for BF16
(``b = 2``): seed 003's "a decode step at batch B has AI = B".  A speculative
step verifies ``k + 1`` positions (k drafts and the bonus) for **every** one of
the B sequences, so it pushes ``T = B (k + 1)`` tokens through the same weights:
``AI = B (k + 1)`` for BF16.  Seed 003 writes ``B + k``, which is the intensity
of a batch in which only one sequence speculates (or counts the k drafts once
per batch); the two agree at B = 1.  We use ``B (k + 1)``, because serving
engines (vLLM, SGLang) speculate for the whole batch, and it is what the bytes
and FLOPs above give.  The conclusion of seed 003 survives and sharpens: the
verify GEMMs stay free while ``B (k + 1)`` is under the ridge point, i.e. up to
``B = ridge / (k + 1)`` (59 for k = 4 on an H100 at peak), not up to ``ridge -
k``; past it every verified position costs compute and speculation stops
paying.

**One cost model.**  A pass is the step models' operations (:meth:`PassCost.ops`: the weight
GEMMs, attention and the all-reduces as :class:`servesim.hardware.ops.Op`), priced here by the
operations' own speed of light at efficiency-scaled peaks (:meth:`Efficiency.peaks`).  This is the
pricer of last resort: the lab's closed forms and ``servesim roofline`` use it where a model and GPU
need no measured kernels; an engine step is priced from the measured tables
(:mod:`servesim.hardware.stepmodel`, :mod:`servesim.hardware.moe_step`), with this roofline only for
a shape no table measured.

Units: seconds, bytes, FLOPs, tokens; SI prefixes are powers of ten (TB/s =
1e12 B/s); GiB = 2^30 bytes only for HBM capacity, where it is meant.

Standard library only; the model never prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from servesim._checks import check_int, check_real
from servesim.hardware.ops import ACTIVATION_BYTES, Op, Peaks, StepTime, light_s, ring_bytes
from servesim.hardware.shape import ModelShape

__all__ = [
    "ACTIVATION_BYTES",
    "ALLREDUCES_PER_LAYER",
    "DEFAULT_EFFICIENCY",
    "DEFAULT_MEMORY_FRACTION",
    "Efficiency",
    "GPUSpec",
    "PassCost",
    "allreduce_bytes",
    "batch_for_utilization",
    "compute_share",
    "decode_cost",
    "decode_step",
    "gemm_bound",
    "kv_room_bytes",
    "largest_batch_within",
    "max_batch",
    "prefill_cost",
    "prefill_step",
    "prefill_tokens_per_s",
    "ridge_flops_per_byte",
    "step_time",
    "utilization",
]

ALLREDUCES_PER_LAYER = 2
"""Megatron tensor parallelism: one all-reduce after attention, one after the MLP."""

DEFAULT_MEMORY_FRACTION = 0.9
"""Share of HBM the engine may fill with weights and KV cache (vLLM's default
``gpu_memory_utilization``); the rest holds the CUDA context, activations and
fragmentation."""


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Efficiency:
    """Fractions of the datasheet peaks a serving engine reaches (the stated efficiency factor).

    * ``memory = 0.8``: decode GEMV/GEMM and paged-attention kernels stream HBM at
      70-90% of peak; 0.8 is the middle.
    * ``compute = 0.5``: end-to-end prefill reaches 40-60% of dense peak (model
      FLOPs utilization); 0.5 is the middle.
    * ``interconnect = 0.8``: large NCCL all-reduces reach about 80% of the
      per-direction link rate; small ones are latency-bound (not modelled).

    With these defaults Llama-3-70B on 4 x H100 reproduces the seed's node
    (workloads.toml): about 11,900 prefill tokens/s (seed: 11,000) and a 29 ms
    decode step at batch 76 (seed: 27 ms at about 70).
    """

    memory: float = 0.8
    compute: float = 0.5
    interconnect: float = 0.8

    def __post_init__(self) -> None:
        check_real("memory_efficiency", self.memory, lo=0.0, hi=1.0, lo_open=True)
        check_real("compute_efficiency", self.compute, lo=0.0, hi=1.0, lo_open=True)
        check_real("interconnect_efficiency", self.interconnect, lo=0.0, hi=1.0, lo_open=True)

    def peaks(self, gpu: GPUSpec) -> Peaks:
        """The peaks ``gpu`` reaches at these efficiencies (the operations' speed of light there)."""
        return Peaks(gpu.hbm_bytes_per_s * self.memory, {"bf16": gpu.flops_per_s * self.compute},
                     gpu.interconnect_bytes_per_s * self.interconnect)


DEFAULT_EFFICIENCY = Efficiency()
_PEAK = Efficiency(1.0, 1.0, 1.0)
_NOTE = "efficiency-scaled roofline (servesim.hardware.roofline): no measured kernel"


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator's peaks, in SI base units (the catalog's gpus.toml converts)."""

    name: str
    hbm_bytes_per_s: float
    flops_per_s: float  # dense BF16
    memory_bytes: float
    interconnect_bytes_per_s: float  # per direction, GPU to GPU
    description: str = ""

    def __post_init__(self) -> None:
        check_real("hbm_bytes_per_s", self.hbm_bytes_per_s, lo=0.0, lo_open=True)
        check_real("flops_per_s", self.flops_per_s, lo=0.0, lo_open=True)
        check_real("memory_bytes", self.memory_bytes, lo=0.0, lo_open=True)
        check_real("interconnect_bytes_per_s", self.interconnect_bytes_per_s, lo=0.0, lo_open=True)

    @property
    def ridge_flops_per_byte(self) -> float:
        """FLOP/s / bytes/s: the intensity above which a kernel is compute-bound."""
        return self.flops_per_s / self.hbm_bytes_per_s


# --------------------------------------------------------------------------- pass costs


@dataclass(frozen=True)
class PassCost:
    """What one forward pass does on each GPU of a tp group (all GPUs work in lockstep)."""

    tokens: float  # tokens pushed through the weights, all sequences
    weight_bytes: float
    kv_bytes: float  # KV cache read and written
    linear_flops: float  # weight GEMMs
    attention_flops: float
    comm_bytes: float  # all-reduce bytes each GPU sends

    @property
    def intensity_flops_per_byte(self) -> float:
        """Arithmetic intensity of the whole pass: FLOPs / HBM bytes."""
        return (self.linear_flops + self.attention_flops) / (self.weight_bytes + self.kv_bytes)

    @property
    def weights_intensity_flops_per_byte(self) -> float:
        """Intensity of the weight GEMMs alone: 2 T / bytes per parameter (T for BF16, dense)."""
        return self.linear_flops / self.weight_bytes

    def ops(self) -> tuple[Op, Op, Op]:
        """The pass as operations of a step (:mod:`servesim.hardware.ops`): the weight GEMMs, the
        attention and the all-reduces, each once, unpriced (the roofline prices them)."""
        return (Op("weight GEMMs", "gemm", 1.0, 0.0, nbytes=self.weight_bytes, flops=self.linear_flops),
                Op("attention", "attention", 1.0, 0.0, nbytes=self.kv_bytes, flops=self.attention_flops),
                Op("all-reduces", "allreduce", 1.0, 0.0, wire_bytes=self.comm_bytes))


def _check_tp(tp: int) -> int:
    return check_int("tp", tp, lo=1)


def allreduce_bytes(model: ModelShape, tp: int, tokens: float) -> float:
    """Bytes each GPU sends in a pass: layers x 2 all-reduces x 2 (tp-1)/tp x T hidden x 2 B."""
    tp = _check_tp(tp)
    if tp == 1:
        return 0.0
    message = tokens * model.hidden * ACTIVATION_BYTES  # one activation tensor
    return model.layers * ALLREDUCES_PER_LAYER * ring_bytes(tp, message)


def decode_cost(
    model: ModelShape, *, tp: int, batch: float, context_tokens: float, positions: int = 1
) -> PassCost:
    """One decode (or verify) pass: ``batch`` sequences, ``positions`` new tokens each.

    ``positions = 1`` is a plain decode step; ``positions = k + 1`` verifies k
    drafts plus the bonus position.  With ``T = batch x positions``:

    * weights: :meth:`~servesim.hardware.shape.ModelShape.weight_bytes_streamed` (T) / tp;
    * GEMM FLOPs: 2 x active matmul params x T / tp;
    * KV: each sequence reads its ``context_tokens`` cached tokens once for all
      its positions and writes ``positions`` new ones, / kv_shards;
    * attention FLOPs: each new position attends to the context plus the
      positions before it, ``context + (positions + 1) / 2`` on average, / tp.

    ``batch`` is real so that limits (batch -> 0) and bisection work.
    """
    tp = _check_tp(tp)
    b = check_real("batch", batch, lo=0.0, lo_open=True)
    ctx = check_real("context_tokens", context_tokens, lo=0.0)
    pos = check_int("positions", positions, lo=1)
    tokens = b * pos
    shards = model.kv_shards(tp)
    kv_read = b * ctx * model.kv_bytes_per_token()
    kv_write = tokens * model.kv_bytes_per_token()
    attended = ctx + (pos + 1) / 2.0  # mean positions each new token attends to
    return PassCost(
        tokens=tokens,
        weight_bytes=model.weight_bytes_streamed(tokens) / tp,
        kv_bytes=(kv_read + kv_write) / shards,
        linear_flops=2.0 * model.active_matmul_params * tokens / tp,
        attention_flops=tokens * attended * model.attention_flops_per_position(absorbed=True) / tp,
        comm_bytes=allreduce_bytes(model, tp, tokens),
    )


def prefill_cost(model: ModelShape, *, tp: int, prompt_tokens: int, sequences: int = 1) -> PassCost:
    """One prefill pass over ``sequences`` prompts of ``prompt_tokens`` tokens.

    * GEMM FLOPs: 2 x (active matmul params - LM head) per prompt token, plus
      the LM head once per sequence (only the last position's logits are needed);
    * attention is causal: token i attends to i positions, ``P (P + 1) / 2`` in
      all per prompt (naive MLA form, as prefill kernels run it);
    * KV: the prompt's cache is written once.
    """
    tp = _check_tp(tp)
    p = check_int("prompt_tokens", prompt_tokens, lo=1)
    n = check_int("sequences", sequences, lo=1)
    tokens = float(n * p)
    body = model.active_matmul_params - model.embedding_params
    linear = 2.0 * (body * tokens + model.embedding_params * n)
    pairs = n * p * (p + 1) / 2.0
    return PassCost(
        tokens=tokens,
        weight_bytes=model.weight_bytes_streamed(tokens) / tp,
        kv_bytes=tokens * model.kv_bytes_per_token() / model.kv_shards(tp),
        linear_flops=linear / tp,
        attention_flops=pairs * model.attention_flops_per_position(absorbed=False) / tp,
        comm_bytes=allreduce_bytes(model, tp, tokens),
    )


# --------------------------------------------------------------------------- times


def step_time(cost: PassCost, gpu: GPUSpec, efficiency: Efficiency = DEFAULT_EFFICIENCY) -> StepTime:
    """Price a :class:`PassCost` on ``gpu``: its operations (:meth:`PassCost.ops`) one after another,
    each at its speed of light at the efficient peaks, max(FLOPs / roof, bytes / roof), the
    all-reduces their wire bytes over the links; ``sol_s`` is the same at 100% of the peaks."""
    peaks = efficiency.peaks(gpu)
    ops = cost.ops()
    gemms, attention, comm = (op.light_one(peaks) for op in ops)
    total = gemms + attention + comm
    return StepTime(gemm_s=gemms, attention_s=attention, allreduce_s=comm, other_s=0.0, host_s=0.0,
                    gpu_s=total, total_s=total, sol_s=light_s(ops, _PEAK.peaks(gpu)), tokens=cost.tokens,
                    measured=False, notes=(_NOTE,), ops=ops)


def compute_share(step: StepTime, gpu: GPUSpec, efficiency: Efficiency = DEFAULT_EFFICIENCY) -> float:
    """The seed's u of a priced pass: the share of it the (efficient) compute roof is busy, its FLOPs
    over the efficient FLOP/s over its time."""
    flops = efficiency.peaks(gpu).flops("bf16")
    return sum(op.flops / flops for op in step.ops) / step.total_s


def gemm_bound(step: StepTime, gpu: GPUSpec, efficiency: Efficiency = DEFAULT_EFFICIENCY) -> str:
    """``"compute"`` or ``"memory"``: the roof the pass's weight GEMMs sit on."""
    peaks = efficiency.peaks(gpu)
    gemms = step.ops[0]
    return "compute" if gemms.flops / peaks.flops("bf16") > gemms.nbytes / peaks.hbm_bytes_per_s else "memory"


def decode_step(
    model: ModelShape,
    gpu: GPUSpec,
    *,
    tp: int,
    batch: float,
    context_tokens: float,
    positions: int = 1,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> StepTime:
    """Time of one decode (positions = 1) or verify (positions = k + 1) pass."""
    cost = decode_cost(model, tp=tp, batch=batch, context_tokens=context_tokens, positions=positions)
    return step_time(cost, gpu, efficiency)


def prefill_step(
    model: ModelShape,
    gpu: GPUSpec,
    *,
    tp: int,
    prompt_tokens: int,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> StepTime:
    """Time to prefill one prompt of ``prompt_tokens`` tokens."""
    return step_time(prefill_cost(model, tp=tp, prompt_tokens=prompt_tokens), gpu, efficiency)


def prefill_tokens_per_s(
    model: ModelShape,
    gpu: GPUSpec,
    *,
    tp: int,
    prompt_tokens: int,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> float:
    """Prompt tokens per second of one tp group: P / t_prefill(P)."""
    step = prefill_step(model, gpu, tp=tp, prompt_tokens=prompt_tokens, efficiency=efficiency)
    return prompt_tokens / step.total_s


def ridge_flops_per_byte(gpu: GPUSpec, efficiency: Efficiency | None = None) -> float:
    """FLOP/s / bytes/s: the peak ridge point, or the effective one with ``efficiency``."""
    if efficiency is None:
        return gpu.ridge_flops_per_byte
    return gpu.ridge_flops_per_byte * efficiency.compute / efficiency.memory


def utilization(
    model: ModelShape,
    gpu: GPUSpec,
    *,
    tp: int,
    batch: float,
    context_tokens: float,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> float:
    """The seed's u at batch B: the share of a plain decode step the compute roof is busy.

    u(B) = (FLOPs / FLOP/s) / t_step.  Below the ridge the weight stream sets
    t_step, so u grows about as B / ridge; it saturates below 1 once the step is
    compute-bound (attention and the all-reduces still take their time).
    """
    step = decode_step(model, gpu, tp=tp, batch=batch, context_tokens=context_tokens,
                       efficiency=efficiency)
    return compute_share(step, gpu, efficiency)


def batch_for_utilization(
    u: float,
    model: ModelShape,
    gpu: GPUSpec,
    *,
    tp: int,
    context_tokens: float,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    batch_limit: float = 1e6,
) -> float | None:
    """The (real) batch at which :func:`utilization` reaches ``u``, or None if it never does.

    u(B) is non-decreasing in B (compute grows with B; the weight stream does
    not), so bisection applies.  None means u is beyond the step's saturation
    (long contexts: attention, memory-bound at any batch, keeps u low).
    """
    target = check_real("u", u, lo=0.0, hi=1.0, hi_open=True)

    def uu(b: float) -> float:
        return utilization(model, gpu, tp=tp, batch=b, context_tokens=context_tokens,
                           efficiency=efficiency)

    lo, hi = 1e-9, float(batch_limit)
    if uu(lo) >= target:
        return lo
    if uu(hi) < target:
        return None
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if uu(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-10:
            break
    return hi


# --------------------------------------------------------------------------- memory


def kv_room_bytes(
    model: ModelShape,
    gpu: GPUSpec,
    *,
    tp: int,
    memory_fraction: float = DEFAULT_MEMORY_FRACTION,
    extra_weight_bytes: float = 0.0,
) -> float:
    """HBM left for KV cache on each GPU: fraction x capacity - weights / tp - extra weights.

    ``extra_weight_bytes`` is per GPU (a draft model or speculative heads).
    Negative when the weights do not fit.
    """
    tp = _check_tp(tp)
    frac = check_real("memory_fraction", memory_fraction, lo=0.0, hi=1.0, lo_open=True)
    extra = check_real("extra_weight_bytes", extra_weight_bytes, lo=0.0)
    return frac * gpu.memory_bytes - model.weight_bytes() / tp - extra


def max_batch(
    model: ModelShape,
    gpu: GPUSpec,
    *,
    tp: int,
    context_tokens: float,
    memory_fraction: float = DEFAULT_MEMORY_FRACTION,
    extra_weight_bytes: float = 0.0,
    extra_kv_bytes_per_token: float = 0.0,
) -> int:
    """Largest batch of ``context_tokens``-long sequences whose KV cache fits beside the weights.

    floor(room / (context x KV bytes per token per GPU)); KV per GPU is the
    model's bytes/token over :meth:`~servesim.hardware.shape.ModelShape.kv_shards`, plus
    ``extra_kv_bytes_per_token`` (per GPU, e.g. a draft model's cache).  0 when
    not even one sequence fits.
    """
    ctx = check_real("context_tokens", context_tokens, lo=0.0, lo_open=True)
    extra_kv = check_real("extra_kv_bytes_per_token", extra_kv_bytes_per_token, lo=0.0)
    room = kv_room_bytes(model, gpu, tp=tp, memory_fraction=memory_fraction,
                         extra_weight_bytes=extra_weight_bytes)
    per_seq = ctx * (model.kv_bytes_per_token() / model.kv_shards(tp) + extra_kv)
    if room <= 0.0:
        return 0
    return int(room // per_seq)


def largest_batch_within(tpot: Callable[[int], float], hi: int, slo_s: float) -> int:
    """The largest batch in [1, ``hi``] whose step ``tpot(b)`` meets ``slo_s`` (1 if none does).

    ``tpot`` grows with the batch, so bisection applies; ``tpot(hi) > slo_s`` is the caller's case.
    """
    if tpot(1) > slo_s:
        return 1
    lo = 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if tpot(mid) <= slo_s else (lo, mid)
    return lo
