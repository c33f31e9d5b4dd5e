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
  (:meth:`ModelSpec.attention_flops_per_position`), bytes the cache read;
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

from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.ops import ACTIVATION_BYTES, Op, Peaks, StepTime, light_s, ring_bytes

__all__ = [
    "ACTIVATION_BYTES",
    "ALLREDUCES_PER_LAYER",
    "ATTENTION_KINDS",
    "DEFAULT_EFFICIENCY",
    "DEFAULT_MEMORY_FRACTION",
    "Efficiency",
    "GPUSpec",
    "ModelSpec",
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

ATTENTION_KINDS: tuple[str, ...] = ("mha", "gqa", "mqa", "mla")
"""Multi-head, grouped-query, multi-query and multi-head latent (DeepSeek) attention."""

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


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer's shape: the fields of models.toml, and what a per-GEMM step model
    needs beside them (the MLP width, ``intermediate``; :func:`servesim.hardware.names.model_shape`).
    The one model-shape class of the lab, the roofline and the dense step model
    (``servesim.hardware.names.ModelShape`` is this class); a mixture-of-experts model's per-layer shape
    is an :class:`~servesim.hardware.architectures.Architecture` (:meth:`~servesim.hardware.architectures.
    Architecture.model_spec` gives its ModelSpec).

    Derived sizes (all parameters are counted over every layer):

    * embedding tables: ``vocab x hidden`` each, one if tied to the LM head, else two;
    * ``matmul_params = params - (untied input table)``: the weights a decode step
      streams (the input table is only gathered, B rows per step);
    * MoE: with E routed experts of which k are used per token,
      ``params = shared + E p_e`` and ``active = shared + k p_e``, so
      ``p_e = (params - active) / (E - k)`` (one expert slot summed over layers).
    """

    name: str
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    params: float
    active_params: float
    attention: str = "gqa"
    bytes_per_value: float = 2.0
    weight_bytes_per_param: float = 2.0
    tied_embeddings: bool = False
    experts: int = 1
    experts_per_token: int = 1
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    draft_model: str = ""
    description: str = ""
    # what a per-GEMM step model needs beside (models.toml's model_extras or the config.json read;
    # servesim.hardware.names.model_shape fills them in)
    hf_id: str = ""
    intermediate: int = 0  # the MLP width (MoE: one routed expert's); 0 = unknown
    gated_mlp: bool = True
    qkv_bias: bool = False
    torch_dtype: str = ""
    source: str = "catalog"  # "catalog" or the config.json path the shape was read from
    context_length: int = 0  # the longest request (prompt + output) it serves; 0 = unknown

    def __post_init__(self) -> None:
        check_int("layers", self.layers, lo=1)
        check_int("intermediate", self.intermediate, lo=0)
        check_int("context_length", self.context_length, lo=0)
        check_int("hidden_size", self.hidden_size, lo=1)
        heads = check_int("heads", self.heads, lo=1)
        kv = check_int("kv_heads", self.kv_heads, lo=1)
        check_int("head_dim", self.head_dim, lo=1)
        check_int("vocab_size", self.vocab_size, lo=1)
        params = check_real("params", self.params, lo=0.0, lo_open=True)
        check_real("bytes_per_value", self.bytes_per_value, lo=0.0, lo_open=True)
        check_real("weight_bytes_per_param", self.weight_bytes_per_param, lo=0.0, lo_open=True)
        experts = check_int("experts", self.experts, lo=1)
        per_token = check_int("experts_per_token", self.experts_per_token, lo=1, hi=experts)
        if self.attention not in ATTENTION_KINDS:
            raise ParameterError("attention", self.attention, f"one of {', '.join(ATTENTION_KINDS)}")
        tables = self.embedding_params * (1 if self.tied_embeddings else 2)
        if params <= tables:
            raise ParameterError(
                "params", self.params,
                f"> {tables:.4g}, the embedding tables alone (vocab_size x hidden_size"
                f"{'' if self.tied_embeddings else ' x 2, untied'})",
            )
        if per_token == experts:
            active = check_real("active_params", self.active_params, lo=params, hi=params)
        else:
            active = check_real("active_params", self.active_params, lo=tables, hi=params, lo_open=True,
                                hi_open=True)
            if params - self.routed_params < tables:
                raise ParameterError(
                    "active_params", active,
                    f"large enough that the shared (non-expert) part, params - experts x "
                    f"(params - active) / (experts - experts_per_token), covers the embedding "
                    f"tables ({tables:.4g})",
                )
        self._check_attention(heads, kv)

    def _check_attention(self, heads: int, kv: int) -> None:
        kind = self.attention
        if kind == "mha" and kv != heads:
            raise ParameterError("kv_heads", kv, f"equal to heads ({heads}) for attention 'mha'")
        if kind == "mqa" and kv != 1:
            raise ParameterError("kv_heads", kv, "1 for attention 'mqa'")
        if kind == "gqa" and not (1 < kv < heads and heads % kv == 0):
            raise ParameterError(
                "kv_heads", kv, f"a divisor of heads ({heads}) strictly between 1 and {heads} for "
                "attention 'gqa' (use 'mqa' for 1, 'mha' for all)",
            )
        if kind == "mla":
            rank = check_int("kv_lora_rank", self.kv_lora_rank, lo=1)
            rope = check_int("qk_rope_head_dim", self.qk_rope_head_dim, lo=1)
            check_int("qk_nope_head_dim", self.qk_nope_head_dim, lo=1)
            check_int("v_head_dim", self.v_head_dim, lo=1)
            if 2 * kv * self.head_dim != rank + rope:
                raise ParameterError(
                    "head_dim", self.head_dim,
                    f"such that 2 x kv_heads x head_dim = kv_lora_rank + qk_rope_head_dim = "
                    f"{rank + rope} for attention 'mla' (the cached latent in the K+V form "
                    f"servesim.model.kvcache uses; e.g. kv_heads = 1, head_dim = {(rank + rope) / 2:g})",
                )

    # sizes ------------------------------------------------------------------------

    @property
    def hidden(self) -> int:
        """``hidden_size``, as :class:`~servesim.hardware.architectures.Architecture` names it."""
        return self.hidden_size

    @property
    def vocab(self) -> int:
        """``vocab_size``, as :class:`~servesim.hardware.architectures.Architecture` names it."""
        return self.vocab_size

    @property
    def embedding_params(self) -> float:
        """One vocab x hidden table (the input embedding, or the LM head)."""
        return float(self.vocab_size * self.hidden_size)

    @property
    def head_params(self) -> float:
        """The LM head: hidden -> vocab logits."""
        return self.embedding_params

    @property
    def matmul_params(self) -> float:
        """Weights a pass streams: all but the untied input table (only B rows are gathered)."""
        return self.params - (0.0 if self.tied_embeddings else self.embedding_params)

    @property
    def active_matmul_params(self) -> float:
        """Weights one token multiplies by: 2 FLOPs each per token."""
        return self.active_params - (0.0 if self.tied_embeddings else self.embedding_params)

    @property
    def expert_params(self) -> float:
        """One routed expert slot over all layers: (params - active) / (E - k); 0 if dense."""
        if self.experts == self.experts_per_token:
            return 0.0
        return (self.params - self.active_params) / (self.experts - self.experts_per_token)

    @property
    def routed_params(self) -> float:
        """All routed experts: E p_e."""
        return self.experts * self.expert_params

    @property
    def weight_bytes(self) -> float:
        """Resident weights: params x bytes per parameter."""
        return self.params * self.weight_bytes_per_param

    @property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes one token adds, summed over layers.

        MHA/GQA/MQA: ``2 (K and V) x layers x kv_heads x head_dim x bytes``;
        MLA: ``layers x (kv_lora_rank + qk_rope_head_dim) x bytes`` (one latent
        and one decoupled RoPE key, shared by all heads).  Both equal
        ``servesim.model.kvcache.kv_bytes_per_token`` of the catalog shape.
        """
        if self.attention == "mla":
            return self.layers * (self.kv_lora_rank + self.qk_rope_head_dim) * self.bytes_per_value
        return 2.0 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_value

    def kv_shards(self, tp: int) -> int:
        """Over how many of the tp GPUs the KV cache is split (the rest replicate it).

        Tensor parallelism splits heads: with kv_heads >= tp each GPU holds
        kv_heads / tp of them; with fewer, each KV head is replicated.  MLA's
        latent is shared by all heads, so every GPU holds all of it.
        """
        if self.attention == "mla":
            return 1
        return min(tp, self.kv_heads)

    def attention_flops_per_position(self, *, absorbed: bool = True) -> float:
        """FLOPs one query token spends on one cached position, over all layers.

        MHA/GQA/MQA: ``QK^T`` is 2 heads head_dim, ``AV`` the same: ``4 layers
        heads head_dim``.  MLA in its absorbed form (decode; the up-projections
        folded into the query and output) scores against the 576-wide latent+RoPE
        key and sums 512-wide latent values: ``2 layers heads (2 rank + rope)``;
        in the naive form (prefill) it works with per-head keys of nope + rope and
        values of v_head_dim: ``2 layers heads (nope + rope + v)``.
        """
        if self.attention != "mla":
            return 4.0 * self.layers * self.heads * self.head_dim
        if absorbed:
            width = 2 * self.kv_lora_rank + self.qk_rope_head_dim
        else:
            width = self.qk_nope_head_dim + self.qk_rope_head_dim + self.v_head_dim
        return 2.0 * self.layers * self.heads * width

    def weight_bytes_streamed(self, tokens: float) -> float:
        """Weight bytes a pass of ``tokens`` tokens reads from HBM (all GPUs together).

        Dense: every matmul weight once.  MoE: the shared part plus the experts
        the tokens touch; with uniform independent top-k routing an expert is
        missed by all T tokens with probability ``(1 - k/E)^T``, so
        ``E (1 - (1 - k/E)^T)`` experts per layer are read (k at T = 1, all E as
        T grows).
        """
        t = check_real("tokens", tokens, lo=0.0)
        if self.expert_params == 0.0:
            return self.matmul_params * self.weight_bytes_per_param
        miss: float = (1.0 - self.experts_per_token / self.experts) ** t
        touched = self.experts * (1.0 - miss)
        shared = self.matmul_params - self.routed_params
        return (shared + touched * self.expert_params) * self.weight_bytes_per_param


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


def allreduce_bytes(model: ModelSpec, tp: int, tokens: float) -> float:
    """Bytes each GPU sends in a pass: layers x 2 all-reduces x 2 (tp-1)/tp x T hidden x 2 B."""
    tp = _check_tp(tp)
    if tp == 1:
        return 0.0
    message = tokens * model.hidden_size * ACTIVATION_BYTES  # one activation tensor
    return model.layers * ALLREDUCES_PER_LAYER * ring_bytes(tp, message)


def decode_cost(
    model: ModelSpec, *, tp: int, batch: float, context_tokens: float, positions: int = 1
) -> PassCost:
    """One decode (or verify) pass: ``batch`` sequences, ``positions`` new tokens each.

    ``positions = 1`` is a plain decode step; ``positions = k + 1`` verifies k
    drafts plus the bonus position.  With ``T = batch x positions``:

    * weights: :meth:`ModelSpec.weight_bytes_streamed` (T) / tp;
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
    kv_read = b * ctx * model.kv_bytes_per_token
    kv_write = tokens * model.kv_bytes_per_token
    attended = ctx + (pos + 1) / 2.0  # mean positions each new token attends to
    return PassCost(
        tokens=tokens,
        weight_bytes=model.weight_bytes_streamed(tokens) / tp,
        kv_bytes=(kv_read + kv_write) / shards,
        linear_flops=2.0 * model.active_matmul_params * tokens / tp,
        attention_flops=tokens * attended * model.attention_flops_per_position(absorbed=True) / tp,
        comm_bytes=allreduce_bytes(model, tp, tokens),
    )


def prefill_cost(model: ModelSpec, *, tp: int, prompt_tokens: int, sequences: int = 1) -> PassCost:
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
    body = model.active_matmul_params - model.head_params
    linear = 2.0 * (body * tokens + model.head_params * n)
    pairs = n * p * (p + 1) / 2.0
    return PassCost(
        tokens=tokens,
        weight_bytes=model.weight_bytes_streamed(tokens) / tp,
        kv_bytes=tokens * model.kv_bytes_per_token / model.kv_shards(tp),
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
    model: ModelSpec,
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
    model: ModelSpec,
    gpu: GPUSpec,
    *,
    tp: int,
    prompt_tokens: int,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> StepTime:
    """Time to prefill one prompt of ``prompt_tokens`` tokens."""
    return step_time(prefill_cost(model, tp=tp, prompt_tokens=prompt_tokens), gpu, efficiency)


def prefill_tokens_per_s(
    model: ModelSpec,
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
    model: ModelSpec,
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
    model: ModelSpec,
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
    model: ModelSpec,
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
    return frac * gpu.memory_bytes - model.weight_bytes / tp - extra


def max_batch(
    model: ModelSpec,
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
    model's bytes/token over :meth:`ModelSpec.kv_shards`, plus
    ``extra_kv_bytes_per_token`` (per GPU, e.g. a draft model's cache).  0 when
    not even one sequence fits.
    """
    ctx = check_real("context_tokens", context_tokens, lo=0.0, lo_open=True)
    extra_kv = check_real("extra_kv_bytes_per_token", extra_kv_bytes_per_token, lo=0.0)
    room = kv_room_bytes(model, gpu, tp=tp, memory_fraction=memory_fraction,
                         extra_weight_bytes=extra_weight_bytes)
    per_seq = ctx * (model.kv_bytes_per_token / model.kv_shards(tp) + extra_kv)
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
