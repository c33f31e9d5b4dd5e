"""Steps of mixture-of-experts and MLA models as a list of operations, each priced by a table.

A replica of ``T x D`` GPUs (``tp`` tensor-parallel attention ranks, ``dp``
attention data-parallel ranks) runs the attention of each DP rank's own
sequences and the MoE layers of every rank's tokens, its experts split over
``ep`` expert-parallel ranks and ``moe_tp = T D / ep`` tensor-parallel ones.  A
step is the sum over one layer's operations (times the layers of each kind),
plus the LM head, sampling and host time, each operation priced from the
engine's measured tables and falling back to the roofline at the tables' fitted
efficiencies where none was measured:

* **attention projections** (GEMMs, the dense tables): GQA ``QKV (m, (H/T + 2
  max(1, G/T)) d, h)`` and ``O (m, h, H d / T)``; MLA (DeepSeek-V3 family) the fused
  down-projection ``qkv_a (m, q_lora + kv_lora + rope, h)``, one GEMM (every engine
  concatenates ``q_a_proj`` and ``kv_a_proj_with_mqa`` into one weight at load time:
  SGLang ``DeepseekV2AttentionMLA.fused_qkv_a_proj_with_mqa`` in ``models/deepseek_v2.py``,
  vLLM ``fused_qkv_a_proj``, a ``MergedColumnParallelLinear`` of ``[q_lora, kv_lora +
  rope]``, in ``model_executor/models/deepseek_v2.py``, TensorRT-LLM's ``MLA.kv_a_proj_with_mqa``
  of ``q_lora + kv_lora + rope`` outputs in ``_torch/modules/attention.py``), then ``q_b
  (m, H/T (nope + rope), q_lora)``, the absorbed per-head ``W_UK``/``W_UV`` (a batched
  matmul of ``m`` tokens, ``H/T`` heads, ``nope x kv_lora`` and ``kv_lora x v``) and ``O
  (m, h, H/T v)``, for the ``m`` tokens of one DP rank;
* **attention** (the GQA tables; MLA from the engine's MLA tables, :mod:`servesim.hardware.moe_kernels`,
  with its two absorbed batched matmuls from the MLA-BMM table): decode of the
  rank's sequences at their mean context, sliding-window layers at ``min(context,
  window)``; a prefill chunk as every family prices one
  (:func:`servesim.hardware.chunk_attention.chunk_attention_s`: the prefill hull's difference, the
  fresh prefill and the cache read, the largest). MLA decode reads
  the latent cache once per sequence: ``b c (kv_lora + rope)`` values, and does
  ``2 H/T c (2 kv_lora + rope)`` FLOPs per query; MLA prefill runs as multi-head
  attention of ``H/T`` heads of width ``nope + rope`` (values of width ``v``);
* **MoE** (routed experts): the engine's measured MoE table where it holds the
  shape (:mod:`servesim.hardware.moe_kernels`), else the grouped-GEMM roofline:
  each GPU holds ``E / ep`` experts split ``moe_tp`` ways, receives ``m_all k /
  ep`` token-expert pairs, and reads the weights of the experts they touch,
  ``E/ep (1 - (1 - k/E)^(m_all/ep... ))``: the expected share of its experts that at
  least one of the replica's ``m_all`` tokens picks; FLOPs ``2 m_all k 3 h I /
  (ep moe_tp)``;
* **CUDA-graph padding**: a decode-only graph step runs each DP rank's sequences padded to the
  smallest batch the engine captured (as the dense step model does; with attention DP every rank,
  an idle one too, runs at least one row, as SGLang's padded DP batches and TensorRT-LLM's dummy
  requests do), so ``m`` and ``m_all`` count the padded rows, attention the real ones;
* **shared experts and dense layers** (GEMMs): gate/up ``(m, 2 I_s / T, h)`` and down
  ``(m, h, I_s / T)`` on each DP rank's tokens; the **router** ``(m, E, h)`` in BF16 (the
  MoE tables time the experts from the router's logits on).  Where the engine runs the
  shared experts beside the router and the routed experts (:data:`SHARED_EXPERTS_OVERLAP`:
  SGLang's and TensorRT-LLM's DeepSeek-V3 family in a CUDA-graph step) an MoE layer costs the longer of the
  two branches, and no less than both branches' weights read at the tables' HBM
  efficiency (the two streams share the HBM); elsewhere the three are added;
* **communication**: with ``T > 1`` two all-reduces of ``m h`` activations per layer
  (after attention, after the MLP); with attention DP, how the MoE layer's tokens
  reach the experts is the engine's expert-parallel exchange (:data:`EP_COMMS`): by
  default every engine gathers the ``D`` ranks' tokens to every GPU before the
  experts and reduce-scatters the experts' partial outputs after them (NCCL's
  measured all-gather of the ``m_all`` tokens' activations and reduce-scatter of
  their ``m_all h`` BF16 outputs over the ``T D`` GPUs; an SGLang step that
  prefills gathers with an all-reduce instead and reduces with a second one);
  with DeepEP, the dispatch and the combine of each rank's ``m_all / ep`` tokens
  are DeepEP's measured kernels (low-latency ones for decode-only steps, normal
  ones when a prefill is in the step, or normal ones in every step); a
  collective whose group spans nodes is a model of the network, not a measurement:
  the operation is marked unmeasured and its note says so;
* **other kernels**: two norms, RoPE, the activation and the router per layer, at the
  launch floor plus their bytes at the tables' HBM efficiency.

The speed-of-light bound of the same step is every operation at 100% of the
datasheet peaks, computed from the same counts.

Standard library only; nothing here prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.chunk_attention import Hull, chunk_attention_s, prefill_hull
from servesim.hardware.dtypes import BYTES_PER_VALUE, FP8_BLOCK
from servesim.hardware.engines import (
    EP_COMMS,
    EngineProfile,
    default_engine,
    engine_profile,
    moe_backend_stand_ins,
    moe_backends,
)
from servesim.hardware.kernels import KernelTables, Lookup, tables_for
from servesim.hardware.linear_attention import hybrid_attention_ops, state_bytes_per_token
from servesim.hardware.model_config import FP4_RELEASE_PARTS
from servesim.hardware.moe_kernels import moe_tables
from servesim.hardware.ops import (
    ACTIVATION_BYTES,
    Op,
    Peaks,
    PriceCache,
    StepPrice,
    light_s,
    priced_parts,
    ring_bytes,
)
from servesim.hardware.precision import supported_dtypes
from servesim.hardware.shape import CHECKPOINT_DTYPES, LINEAR_PARTS, ModelShape
from servesim.hardware.sparse_attention import dsa_attention_ops
from servesim.hardware.stepmodel import (
    OTHER_KERNEL_FLOOR_S,
    SAMPLING_FLOOR_S,
    Chunk,
    StepTime,
    between_batches,
    bucket_context,
    column_blocks,
    copied,
    pricing_tables,
    prompt_in_chunks,
)
from servesim.hardware.topology import links_note
from servesim.hardware.wide_ep import mnnvl_alltoall, mnnvl_table

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog

__all__ = ["MoEStepModel", "Parallelism"]

_PEAK = {"bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "fp4": "fp4", "mxfp4": "bf16", "int4": "bf16",
         "mxfp4_mxfp8": "fp8"}
"""The tensor-core peak each weight format multiplies at (weight-only 4-bit formats in BF16; MXFP4
weights with MXFP8 activations at the FP8 rate)."""

GEMM_BACKENDS = ("flashinfer",)
"""SGLang's block-FP8 linear-layer backends that servesim prices apart (``None``: the engine's own
table).  ``"flashinfer"``: ``SGLANG_ENABLE_FLASHINFER_GEMM=true`` on Blackwell, where
``fp8_utils.dispatch_w8a8_block_fp8_linear`` sends every block-FP8 linear layer to FlashInfer's
``gemm_fp8_nt_groupwise`` ahead of DeepGEMM (InferenceMAX's ``dsr1_fp8_b200.sh`` and
``dsr1_fp8_b200_mtp.sh`` export it, with ``SGL_ENABLE_JIT_DEEPGEMM=false``).  SGLang 0.5.14's B200
table times only DeepGEMM (19 us for one row of a 2,048 x 7,168 block-FP8 GEMM, the activation
quantization included); no table times FlashInfer's kernel, so TensorRT-LLM 1.3.0rc20's measured
block-FP8 GEMMs on the same GPU stand in (11 us for that one).  Evidence, InferenceX's own runs of
DeepSeek-R1 FP8 on 8 x B200 with this recipe: mean TPOT of the 34 colocated SGLang 0.5.9 runs
(benchmarks/inferencex.py) 9.3% -> 5.3% median |error| (signed +7.0% -> -4.1%), of the 10 SGLang
0.5.12 runs of InferenceX PR #3363 (benchmarks/accuracy.py) 15% -> 3%; SGLang's cookbook runs of the
same model and GPU, launched without the variable, stay on SGLang's DeepGEMM table (TPOT 8.84 against
9.16 ms measured at one client), as do the disaggregated recipes, which do not set it."""


MXFP8_ACTIVATIONS = "engines.toml moe_mxfp8_activations"
"""Where it is set: engines that run an MXFP4 checkpoint's experts with MXFP8 activations where
their tables measured that kernel (the B200's): TensorRT-LLM ``_torch/model_config.py``
``ModelConfig.get_mxfp4_quant_algo`` returns ``W4A8_MXFP4_MXFP8`` on SM 100 and later for every MoE
backend but TRITON (``W4A16_MXFP4`` on Hopper), unless ``OVERRIDE_QUANT_ALGO`` says otherwise.  vLLM
does so only with ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1`` (``moe_activations="mxfp8"``:
InferenceMAX's B200 gpt-oss recipe sets it), priced from SGLang's rows of the same FlashInfer
TRTLLM-gen kernel on the same GPU where vLLM's table lacks the shape (engines.toml
``mxfp8_moe_tables_from``); SGLang keeps its W4A16 rows."""

_GEMM_DTYPE = {"bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "fp4": "fp4", "mxfp4": "bf16",
               "int4": "bf16"}
"""The GEMM table that prices a layer of each weight dtype (weight-only 4-bit layers multiply in BF16)."""

OTHER_KERNELS_PER_MOE_LAYER = 6
"""Two fused add + RMSNorm, RoPE, the activation, the router's softmax/top-k and the token
permutation around the experts.  (Known, left as is: the MoE tables already time the top-k,
the activation and the permutation (aiconfigurator ``collector/sglang/collect_moe.py`` runs
``select_experts`` and ``fused_moe``; FlashInfer's TRT-LLM MoE routes inside its kernel), while
MLA's two latent norms are not counted; the Q/K norms are their own operation
(:data:`QK_NORM_KERNELS`).  Counting the rest exactly lowers SGLang's batch-1 TPOT of
Qwen3-235B, gpt-oss-120b and Kimi-K2.5, which the tables already underprice by 30-45 us a layer
(issue 17, item 5), so the count stays until that gap is explained.)"""


QK_NORM_KERNELS = {"per_head": 1, "per_layer": 2}
"""Kernels of the Q/K RMSNorms on a layer's critical path: Qwen3-MoE normalizes each head (SGLang's
``Qwen3MoeAttention._apply_qk_norm`` runs the K norm on its alternate stream beside the Q norm in a
CUDA-graph step: one on the path); MiniMax-M2 normalizes over all heads, which attention TP splits,
so it sums squares, all-reduces the FP32 sums over the attention-TP ranks and applies the norm
(SGLang ``models/minimax_m2.py`` ``MiniMaxM2QKRMSNorm._forward_naive``: ``rms_sumsq_serial``,
``attn_tp_all_reduce``, ``rms_apply_serial``; vLLM's ``MiniMaxText01RMSNormTP`` and TensorRT-LLM's
all-reduce the variance the same way)."""


SHARED_EXPERTS_OVERLAP = "engines.toml shared_experts_overlap"
"""Where it is set: engines that take the shared experts off the routed experts' critical path in a
CUDA-graph step, and for which attention kind (the model family whose code does it).  SGLang
``models/deepseek_v2.py``: ``DeepseekV2MoE.forward`` calls ``forward_normal_dual_stream`` under
CUDA-graph capture (``get_is_capture_mode()``) when it has an ``alt_stream`` and no fused shared
expert: ``_forward_shared_experts`` runs on the current stream while the gate, the top-k and the
routed experts run on ``alt_stream``, joined by ``current_stream.wait_stream(alt_stream)``.
DeepSeek-V3/R1 themselves (256 routed experts, one shared, no EP) instead fuse the shared expert
into the MoE kernel as a 257th expert every token picks (``determine_num_fused_shared_experts``),
which at decode sizes costs about the routed experts' time as well.  Kimi-K2/K2.5 (384 experts)
take the dual-stream path.  TensorRT-LLM ``_torch/models/modeling_deepseekv3.py``:
``Deepseekv3MoE.forward`` runs ``_compute_routed_output`` (the gate and the routed experts) and
``_compute_shared_output`` through ``maybe_execute_in_parallel`` on its ``MoeShared`` auxiliary
stream, which ``_torch/modules/multi_stream_utils.py`` turns on only while a CUDA graph is
captured (the stream switch costs host time otherwise), for DeepSeek-V3/R1 and Kimi alike.
vLLM is priced in series: not checked against its code here."""


EAGER_KERNELS_PER_MOE_LAYER = 20
"""Kernels one MoE layer launches outside a CUDA graph: the attention projections, norms, RoPE,
attention, router, top-k, the experts' quantize / two grouped GEMMs / activation / weighted sum,
the shared expert's three, and the residual adds (the MLA layer's latent norms and absorbed
matmuls are of the same count as a GQA layer's fused QKV path plus its QK norms)."""



def block_fp8_splits(arch: ModelShape, par: Parallelism, quantized: frozenset[str] | set[str]) -> list[str]:
    """The block-FP8 weights that ``par`` would cut inside a 128 x 128 scale block, each as
    ``"name width / ranks = per-rank"``.  An engine loads a block-quantized linear layer split
    over ``n`` tensor-parallel ranks only if every rank's share of the split dimension is a whole
    number of blocks (vLLM and SGLang ``Fp8MoEMethod.create_weights``: "The output_size of gate's
    and up's weight = 192 is not divisible by weight quantization block_n = 128", and
    ``validate_block_quant_shapes`` for the dense linears; the block scales are sliced with the
    weight), so the experts' width over MoE TP (``tp x dp / ep``) and the shared experts' and
    dense MLPs' width over attention TP must be multiples of 128."""
    # (part, what it is called, its width, the ranks it splits over and their name); a width the
    # ranks do not divide is the parallelism checks' to refuse, not this one's
    splits = (("experts", "expert width", arch.moe_intermediate, par.moe_tp, "MoE TP"),
              ("shared_experts", "shared-expert width",
               arch.shared_intermediate if arch.shared_experts else 0, par.tp, "tp"),
              ("dense_mlp", "dense-MLP width", arch.intermediate if arch.dense_layers else 0,
               par.tp, "tp"))
    return [f"{what} {width} / {name} {ranks} = {width // ranks}"
            for part, what, width, ranks, name in splits
            if part in quantized and width and width % ranks == 0 and (width // ranks) % FP8_BLOCK]


def check_block_fp8_split(arch: ModelShape, par: Parallelism, quantized: frozenset[str] | set[str]) -> None:
    """Refuse a split that cuts a block-FP8 scale block (:func:`block_fp8_splits`), naming the
    expert-parallel sizes of the same GPUs that would load."""
    bad = block_fp8_splits(arch, par, quantized)
    if not bad:
        return
    ok = [e for e in range(1, par.gpus + 1) if par.gpus % e == 0 and arch.experts % e == 0
          and arch.moe_intermediate % (par.gpus // e) == 0
          and not block_fp8_splits(arch, Parallelism(par.tp, par.dp, e), quantized)]
    hint = (f"; on these {par.gpus} GPUs ep {', '.join(map(str, ok))} would load" if ok
            else "; fewer tensor-parallel GPUs would load")
    raise ParameterError("ep" if ok else "tp", par.ep if ok else par.tp,
                         f"a split of {arch.name}'s block-FP8 weights into whole {FP8_BLOCK} x "
                         f"{FP8_BLOCK} scale blocks: {'; '.join(bad)} is not a multiple of "
                         f"{FP8_BLOCK}{hint}")


@dataclass(frozen=True)
class Parallelism:
    """How a replica splits a model: ``tp`` x ``dp`` GPUs, experts over ``ep`` of them."""

    tp: int = 1
    dp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        check_int("tp", self.tp, lo=1, hi=64)
        check_int("dp", self.dp, lo=1, hi=256)
        check_int("ep", self.ep, lo=1, hi=256)
        if (self.tp * self.dp) % self.ep:
            raise ParameterError("ep", self.ep, f"a divisor of tp x dp = {self.tp * self.dp} (the replica's "
                                 "GPUs): MoE tensor parallel is tp x dp / ep")

    @property
    def gpus(self) -> int:
        return self.tp * self.dp

    @property
    def moe_tp(self) -> int:
        return self.gpus // self.ep


def _check_options(moe_activations: str | None, moe_backend: str | None, gemm_backend: str | None,
                   ep_comm: str | None) -> None:
    """Refuse an engine option :class:`MoEStepModel` does not know, naming it and the choices."""
    if moe_activations not in (None, "mxfp8"):
        raise ParameterError("moe_activations", moe_activations, "None (the engine's default) or mxfp8")
    for name, value, choices in (("gemm_backend", gemm_backend, GEMM_BACKENDS),
                                 ("ep_comm", ep_comm, EP_COMMS),
                                 ("moe_backend", moe_backend, tuple(moe_backends()))):
        if value is not None and value not in choices:
            raise ParameterError(name, value, f"None (the engine's default) or one of {', '.join(choices)}")


@dataclass(frozen=True)
class _Batch:
    """One step's work as :meth:`MoEStepModel._step` prices it: the replica's decoding sequences at
    their mean context, its chunks and positions a sequence; the busiest DP rank's chunks, sequences
    ``b``, tokens ``m`` and sampled rows; the replica's tokens ``m_all`` (``m`` and ``m_all`` padded to
    the captured CUDA-graph batch), the tokens it reports and whether it runs as a CUDA graph."""

    decode: float
    context: float
    chunks: tuple[Chunk, ...]
    positions: int
    rank_chunks: tuple[Chunk, ...]
    b: float
    m: float
    m_all: float
    samples: float
    tokens: float
    graph: bool


def _eplb(arch: ModelShape, par: Parallelism, slots: int) -> tuple[ModelShape, str]:
    """The architecture as an EPLB deployment places it, and the note: ``slots`` redundant expert
    slots (SGLang ``--ep-num-redundant-experts``, vLLM ``--num-redundant-experts`` of its EPLB config,
    TensorRT-LLM ``moe_config.load_balancer.num_slots`` less the experts) give each of the ``ep`` ranks
    ``(experts + slots) / ep`` expert copies, which the MoE tables' shape lookup and the weights per
    GPU then count; the router still scores the model's experts.  Load balance is not credited: the
    tables' power-law routing (the hottest rank) stays, so the slots cost memory and reads and buy the
    EP sizes that do not divide the experts (DeepSeek-R1's 256 + 32 = 288 over EP72, 4 a rank)."""
    n = check_int("eplb_slots", slots, lo=0, hi=4096)
    if n == 0:
        return arch, ""
    if par.ep == 1:
        raise ParameterError("eplb_slots", slots, "0 without expert parallelism (ep 1): EPLB places "
                             "redundant experts over EP ranks")
    total = arch.experts + n
    if total % par.ep:
        raise ParameterError("eplb_slots", slots, f"a count that with the {arch.experts} routed experts "
                             f"makes a multiple of ep={par.ep} (each rank the same number of slots)")
    note = (f"EPLB: {n} redundant expert slots, {total // par.ep} experts a GPU over EP{par.ep} "
            f"({arch.experts} routed); the routing imbalance stays the tables' power law (balancing not "
            "credited)")
    return replace(arch, experts=total), note


class MoEStepModel:
    """Prices steps of one replica of an MoE or MLA model (see the module docstring).

    ``arch`` is a :class:`servesim.hardware.shape.ModelShape`; ``dtype`` the
    weights' precision (``None``: the checkpoint's), applied to the experts and, unless
    the checkpoint keeps them in BF16, to the other linear layers.
    """

    def __init__(self, arch: ModelShape, gpu: str, par: Parallelism, *, dtype: str | None = None,
                 kv_dtype: str = "bf16", engine: EngineProfile | None = None,
                 tables: KernelTables | None = None, catalog: Catalog | None = None,
                 moe_activations: str | None = None, moe_backend: str | None = None,
                 gemm_backend: str | None = None, ep_comm: str | None = None, eplb_slots: int = 0) -> None:
        _check_options(moe_activations, moe_backend, gemm_backend, ep_comm)
        self.routed_experts = arch.experts  # the router's logits (EPLB's redundant slots add none)
        arch, self.eplb_note = _eplb(arch, par, eplb_slots)
        self.arch = arch
        self.shape = arch
        self.gpu = gpu
        self.par = par
        self.tp = par.gpus  # the replica's GPUs (what throughput per GPU divides by)
        self._check(arch, par)
        self.dtype = dtype or arch.checkpoint_dtype
        if self.dtype not in CHECKPOINT_DTYPES:
            raise ParameterError("dtype", self.dtype, f"one of {', '.join(CHECKPOINT_DTYPES)}")
        if kv_dtype not in ("bf16", "fp8"):
            raise ParameterError("kv_dtype", kv_dtype, "bf16 or fp8")
        self.kv_dtype = kv_dtype
        self.engine = engine if engine is not None else engine_profile(default_engine(), gpu=gpu)
        self.tables, self.tables_note, self._foreign = pricing_tables(gpu, self.engine.name, tables,
                                                                      catalog=catalog)
        self._moe_tables, self.moe_note = moe_tables(gpu, self.engine.name)
        self._hulls: dict[tuple[str, int], Hull] = {}
        self._choose_mla_prefill_tables()
        self._choose_moe_kernel(moe_activations)
        self.ep_comm = ep_comm or self.engine.ep_comm  # EP_COMMS: how the DP ranks reach the experts
        # TensorRT-LLM's MNNVL all-to-all where its table covers the group's NVLink domain (wide_ep.py)
        self._mnnvl = (ep_comm is None and self._moe_tables is not None and par.ep > 1 and par.dp > 1
                       and par.moe_tp == 1 and mnnvl_table(self._moe_tables, par.gpus) is not None)
        if self._mnnvl:
            self.ep_comm = "mnnvl"
        self._choose_moe_backend(moe_backend)
        # engines.toml moe_prefill_scale (fitted): what a prefill step's experts cost over the table
        self._moe_prefill_scale = self.engine.moe_prefill_factor(arch.family, self.dtype)
        self.moe_prefill_note = (f"the {self.dtype} experts of a step that prefills at "
                                 f"{self._moe_prefill_scale:g} x the measured kernel on the {gpu} "
                                 "(fitted: engines.toml moe_prefill_scale)"
                                 if self._moe_prefill_scale != 1.0 else "")
        self._quantized: frozenset[str] = self._quantized_parts()
        if self.dtype == "fp8_block":
            check_block_fp8_split(arch, par, self._quantized)
        self.gemm_dtype = self._table_dtype(bool(self._quantized & {"q_proj", "q_a_proj", "q_b_proj",
                                                                    "kv_a_proj", "o_proj"}))
        self.ffn_gemm_dtype = self._table_dtype(bool(self._quantized & {"shared_experts", "dense_mlp"}))
        self._choose_gemm_backend(gemm_backend, catalog)
        self._cache_step = lru_cache(maxsize=65536)(self._step)
        self.price_cache = PriceCache()  # the engine loop's step prices (shared by copies: for_requests)

    def _choose_mla_prefill_tables(self) -> None:
        """MLA prefill attention: the engine's own table, or the one its profile names for this GPU
        (engines.toml ``mla_prefill_from``)."""
        self._mla_prefill_tables = self._moe_tables
        self.mla_prefill_note = ""
        if self.engine.mla_prefill_engine and self._moe_tables is not None and self.arch.attention == "mla":
            other = moe_tables(self.gpu, self.engine.mla_prefill_engine)[0]
            if other is not None and other.has_mla and \
                    set(self._moe_tables.mla_kv_dtypes()) <= set(other.mla_kv_dtypes()):
                self._mla_prefill_tables = other
                self.mla_prefill_note = (f"MLA prefill attention priced by {other.engine}'s measured "
                                         f"kernel on {self.gpu} (engines.toml mla_prefill_from)")

    def _choose_moe_kernel(self, moe_activations: str | None) -> None:
        """The MoE kernel's dtype: the weights', or MXFP4 x MXFP8 (engines.toml ``moe_mxfp8_activations``,
        or asked for: vLLM's VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8), where the GPU's tables measured it,
        its own or those of ``mxfp8_moe_tables_from``."""
        arch = self.arch
        self.moe_kernel_dtype: str | None = None
        self._a8_tables = self._moe_tables
        if self.dtype == "mxfp4" and (self.engine.moe_mxfp8_activations or moe_activations == "mxfp8"):
            shape = (arch.hidden, arch.moe_intermediate, arch.experts_per_token, arch.experts)
            stand_in = self.engine.mxfp8_moe_tables_from
            for tab in (self._moe_tables, moe_tables(self.gpu, stand_in)[0] if stand_in else None):
                if tab is not None and "mxfp4_mxfp8" in tab.moe_dtypes and any(
                        s[:4] == shape for s in tab.moe_shapes("mxfp4_mxfp8")):
                    self.moe_kernel_dtype, self._a8_tables = "mxfp4_mxfp8", tab
                    if tab is not self._moe_tables:  # the FlashInfer TRTLLM-gen kernel SGLang timed
                        self.moe_note = f"{self.moe_note}; MXFP4 x MXFP8 experts from {tab.engine}'s table"
                    break

    def _choose_moe_backend(self, moe_backend: str | None) -> None:
        """TensorRT-LLM's MoE backend (``moe_config.backend``, engines.toml ``moe_backends``; ``None``: the
        engine's default).  Each backend is priced by its own measured rows where they exist, in this order:

        1. vLLM 0.24.0's rows of the same kernel on the same GPU and shape (``moe_backend_tables_from``),
           each backend naming that kernel by the experts' dtype, which time the whole layer, routing and
           finalize included: ``"trtllm"`` block FP8 by FlashInfer's TRTLLM-gen block-FP8 MoE
           (``vllm_fp8moe_flashinfer_trtllm_...``: the same kernels, expert parallel included;
           DeepSeek-V3's layer at 8,192 tokens on EP8 is 0.76 ms on DEEPGEMM and 2.54 ms on TRTLLM-gen),
           NVFP4 by FlashInfer's TRTLLM-gen NVFP4 MoE; ``"triton"`` MXFP4 experts by OpenAI's
           ``triton_kernels`` (``..._triton_oaitritonmxfp4...``, TensorRT-LLM's ``TritonFusedMoE``);
        2. where vLLM did not time that kernel at the shape, the engine's own table's rows of that backend
           (``MoETables.backend``: TensorRT-LLM 1.3.0rc20's TRTLLM-gen NVFP4 rows on the B200 and GB200,
           timed apart from its CUTLASS rows and without the finalize kernel, which the build adds);
        3. the engine's own table (``None`` and ``"cutlass"``: the default, CUTLASS, in
           ``tensorrt_llm/llmapi/llm_args.py`` ``MoeConfig.backend``, and what
           ``ModelConfig.resolve_moe_backend`` (``_torch/model_config.py``) resolves AUTO to for DeepSeek;
           its block-FP8 rows on Blackwell are DEEPGEMM's, ``"deepgemm"``).  A backend no table measured
           is priced as the nearest measured one (engines.toml ``moe_backend_stand_ins``: CUTEDSL and WIDEEP
           as CUTLASS), and where the rows used are another kernel than the backend named, a note says so."""
        self.moe_backend = moe_backend
        self.moe_backend_note = ""
        if moe_backend is None or self._moe_tables is None or not self.engine.moe_backend_tables_from:
            return  # the default, or an engine without moe_config.backend (its own table as it is)
        arch, par = self.arch, self.par
        backend = moe_backend.upper()
        key = (arch.hidden, arch.moe_intermediate, arch.experts_per_token, arch.experts, par.moe_tp, par.ep)
        borrow = moe_backends().get(moe_backend, {}).get(self.dtype)
        source_engine = self.engine.moe_backend_tables_from
        gen = moe_tables(self.gpu, source_engine)[0] if borrow is not None else None
        source = (gen.moe_source(self.dtype, key) if gen is not None and gen is not self._moe_tables
                  and self.dtype in gen.moe_dtypes else "")
        own = self._moe_tables.backend(moe_backend)
        if gen is not None and borrow is not None and borrow in source:
            self._a8_tables, self.moe_kernel_dtype = gen, self.dtype
            self.moe_backend_note = (f"{self.dtype} experts on TensorRT-LLM's {backend} MoE "
                                     f"backend priced by {gen.engine}'s measured {source} kernel on "
                                     f"{self.gpu} (moe_config.backend {backend})")
        elif own is not None and self.dtype in own.moe_backends.get(moe_backend, ()):
            self._a8_tables, self.moe_kernel_dtype = own, self.dtype
            self.moe_backend_note = (f"{self.dtype} experts on TensorRT-LLM's {backend} MoE backend priced "
                                     f"by its own measured {own.nearest_moe_source(self.dtype, key)} rows on "
                                     f"{self.gpu} ({own.engine})")
        else:
            self.moe_backend_note = self._nearest_backend_note(moe_backend, key)
        if self.moe_backend_note:
            self.moe_note = f"{self.moe_note}; {self.moe_backend_note}"

    def _nearest_backend_note(self, moe_backend: str, key: tuple[int, ...]) -> str:
        """Where ``moe_backend`` is priced by the engine's own rows: what they are when they are not that
        backend's (a backend no table measured, or one the table did not time for these experts)."""
        tab = self._moe_tables
        if tab is None or self.dtype not in tab.moe_dtypes:
            return ""
        backend, stand_in = moe_backend.upper(), moe_backend_stand_ins().get(moe_backend, moe_backend)
        source = tab.nearest_moe_source(self.dtype, key)
        if moe_backend != stand_in:
            return (f"moe_config.backend {backend}: no measured {backend} MoE table; its {self.dtype} "
                    f"experts are priced as {stand_in.upper()}, the nearest measured backend ({tab.engine}'s "
                    f"{source} rows on {self.gpu})")
        if stand_in in source.lower():
            return ""
        return (f"moe_config.backend {backend}: no {backend} {self.dtype} MoE rows measured on {self.gpu}; "
                f"priced by the nearest measured backend, {tab.engine}'s {source} rows")

    def _quantized_parts(self) -> frozenset[str]:
        """The linear layers stored in :attr:`dtype` (the rest stay BF16)."""
        arch = self.arch
        if self.dtype == "bf16":
            return frozenset()
        if self.dtype == arch.checkpoint_dtype:
            assert arch.quantized_parts is not None  # ModelShape.__post_init__ fills it in
            return frozenset(arch.quantized_parts)
        if self.dtype in ("mxfp4", "int4"):
            return frozenset({"experts"})  # weight-only 4-bit formats quantize the experts
        if self.dtype == "fp4" and arch.family in FP4_RELEASE_PARTS:
            # NVFP4 of a model whose checkpoint is another format is NVIDIA's ModelOpt release of it
            # (nvidia/DeepSeek-R1-0528-FP4-v2, nvidia/Qwen3-235B-A22B-NVFP4): its parts, so that the
            # base id with --dtype fp4 and the release's id are the same deployment
            return frozenset(FP4_RELEASE_PARTS[arch.family])
        return frozenset(LINEAR_PARTS)

    def _choose_gemm_backend(self, gemm_backend: str | None, catalog: Catalog | None) -> None:
        """SGLang's FlashInfer block-FP8 GEMM (:data:`GEMM_BACKENDS`): TensorRT-LLM's measured
        block-FP8 GEMMs on the same GPU stand in for the kernel no table times (SGLang's dispatch takes
        FlashInfer's GEMM on Blackwell only: ``is_blackwell_supported()``, here a GPU that runs NVFP4)."""
        gpu = self.gpu
        self.gemm_backend = gemm_backend
        self.gemm_backend_note = ""
        self._block_gemm_tables: KernelTables | None = None
        stand_in = self.engine.gemm_backend_tables_from
        if (gemm_backend == "flashinfer" and stand_in and not self._foreign
                and "fp4" in supported_dtypes(gpu, catalog)):
            trt = tables_for(gpu, stand_in)
            if trt is not None and "fp8_block" in trt.gemm_dtypes and "fp8_block" in (
                    self.gemm_dtype, self.ffn_gemm_dtype):
                self._block_gemm_tables = trt
                self.gemm_backend_note = (f"block-FP8 linear layers on FlashInfer's GEMM "
                                          f"(SGLANG_ENABLE_FLASHINFER_GEMM), which no table times: "
                                          f"{trt.engine}'s measured block-FP8 GEMMs on the {gpu} stand in")

    def _table_dtype(self, quantized: bool) -> str:
        """The GEMM table of a linear layer: the quantized format where the engine measured it
        (block FP8 falls back to per-tensor FP8), else BF16."""
        want = _GEMM_DTYPE[self.dtype] if quantized else "bf16"
        if want not in self.tables.gemm_dtypes:
            want = "fp8" if want == "fp8_block" and "fp8" in self.tables.gemm_dtypes else "bf16"
        return want

    # ------------------------------------------------------------------ checks

    @staticmethod
    def _check(arch: ModelShape, par: Parallelism) -> None:
        if arch.attention != "mla":
            if arch.heads % par.tp or (arch.kv_heads % par.tp and par.tp % arch.kv_heads):
                raise ParameterError("tp", par.tp, f"a divisor of the {arch.heads} query heads whose KV "
                                     "heads "
                                     f"({arch.kv_heads}) it divides or is divided by")
        elif arch.heads % par.tp:
            raise ParameterError("tp", par.tp, f"a divisor of the {arch.heads} attention heads")
        if arch.experts % par.ep:
            raise ParameterError("ep", par.ep, f"a divisor of the {arch.experts} routed experts")
        if arch.moe_intermediate % par.moe_tp:
            raise ParameterError("tp", par.tp, f"such that tp x dp / ep ({par.moe_tp}) divides the expert "
                                 f"width {arch.moe_intermediate}")

    # ------------------------------------------------------------------ memory

    @property
    def weight_bytes_per_gpu(self) -> float:
        """Weights each GPU holds: routed experts over all ``tp x dp`` GPUs; attention, shared
        experts, dense layers, embeddings and LM head over ``tp`` (replicated over the DP ranks);
        norms and the router on every GPU.  Quantized parts take the format's bytes, scales
        included (:data:`~servesim.hardware.dtypes.BYTES_PER_VALUE`), the rest BF16."""
        p = self.par
        w = BYTES_PER_VALUE[self.dtype]
        total = 0.0
        for part, n in self.arch.breakdown().items():
            size = n * (w if part in self._quantized else 2.0)
            if part == "experts":
                total += size / p.gpus
            elif part in ("norms", "router", "biases", "indexer"):  # DSA's indexer: ReplicatedLinear
                total += size
            else:
                total += size / p.tp
        return total

    kv_context: int | None = None
    """A request's typical length (prompt + output; :meth:`for_requests`): sliding-window layers hold
    at most their window of it (vLLM's hybrid KV-cache manager, SGLang's SWA pool, TensorRT-LLM's
    variable-window cache), so a token of a windowed model costs the per-token average over a
    sequence of that length."""

    is_moe = True
    """A mixture-of-experts or MLA model (the :class:`~servesim.hardware.pricer.Pricer` seam)."""

    @property
    def model_name(self) -> str:
        return str(self.arch.name)

    @property
    def has_mtp(self) -> bool:
        """Whether the checkpoint carries a multi-token-prediction module (``num_nextn_predict_layers``)."""
        return bool(self.arch.mtp_layers)

    @property
    def pricing_notes(self) -> tuple[str, ...]:
        """What this step model prices from another engine's table than its own (a prefill's MLA
        attention), on a backend the user chose, or scales by a fitted factor (the experts of a
        step that prefills), to print beside the figures."""
        notes = (self.mla_prefill_note, self.moe_backend_note, self.gemm_backend_note, self.moe_prefill_note,
                 self.eplb_note)
        return tuple(n for n in notes if n)

    @cached_property
    def links_note(self) -> str:
        """Which links the replica's groups cross where one leaves a tray (servesim.hardware.topology):
        the last note of every step."""
        p = self.par
        groups = {f"TP{p.tp} all-reduce": p.tp}
        if p.dp > 1:
            what = "all-to-all" if p.ep > 1 and self.ep_comm != "allgather" else "gather + scatter"
            groups[f"{'EP' if p.ep > 1 else 'DP'}{p.gpus} {what}"] = p.gpus
        return links_note(self.tables.topology, groups)

    def with_drafter(self, drafter_bytes: tuple[float, float]) -> MoEStepModel:
        """A copy whose KV cache makes room for a drafter's (weight bytes per GPU, KV bytes per token
        per GPU); its pricing is this model's."""
        return copied(self, drafter_bytes=drafter_bytes)

    def for_requests(self, tokens: int) -> MoEStepModel:
        """The step model for requests of ``tokens`` tokens (prompt + output): a copy whose windowed
        layers hold at most their window of each (:attr:`kv_context`); its pricing is this model's.
        A copy, never this model changed, so a step model shared between questions (the pricer
        factory keeps one per deployment) answers each the same whatever was asked before."""
        check_int("tokens", tokens, lo=1)
        return copied(self, kv_context=tokens)

    @property
    def kv_bytes_per_token_per_gpu(self) -> float:
        """KV bytes a token of one DP rank holds on each of its GPUs (MLA's latent is replicated
        over the TP ranks; GQA's KV heads split over them, replicated past the KV heads)."""
        a = self.arch
        b = 2.0 if self.kv_dtype == "bf16" else 1.0
        per = float(a.kv_bytes_per_token(b, self.kv_context) if any(a.layer_windows) and self.kv_context
                    else a.kv_bytes_per_token(b))
        # a gated-delta-net layer's fixed state per request, spread over the request's tokens
        state = state_bytes_per_token(a, self.par.tp, self.kv_context, self.engine.name)
        if a.attention == "mla":
            return per + state
        return per * max(1, int(a.kv_heads) // self.par.tp) / float(a.kv_heads) + state

    def sequence_kv_bytes(self, tokens: float) -> float:
        """KV bytes of one sequence's ``tokens`` tokens over all layers (MLA's latent once, a
        windowed layer at most its window): what a disaggregated deployment sends over its link."""
        b = BYTES_PER_VALUE[self.kv_dtype]
        return float(self.arch.kv_bytes_per_token(b, max(1, int(tokens)))) * tokens

    drafter_bytes: tuple[float, float] = (0.0, 0.0)
    """A speculative drafter's (weight bytes per GPU, KV bytes per token per GPU) sharing the GPUs
    (:func:`servesim.hardware.speculation.drafter_memory`; see :meth:`with_drafter`)."""

    def kv_capacity_tokens(self, memory_bytes: float) -> int:
        """KV tokens the replica holds: each DP rank's share beside the weights (and a drafter's),
        times the ranks."""
        w, kv = self.drafter_bytes
        room = self.engine.kv_room_bytes(memory_bytes, self.weight_bytes_per_gpu + w)
        return max(0, int(room // (self.kv_bytes_per_token_per_gpu + kv))) * self.par.dp

    # ------------------------------------------------------------------ lookups

    def _gemm(self, m: float, n: int, k: int, dtype: str | None = None) -> tuple[float, bool, str]:
        d = dtype or self.gemm_dtype
        tables = self._block_gemm_tables if d == "fp8_block" and self._block_gemm_tables else self.tables
        lk = tables.gemm(d, max(1.0, m), max(1, n), max(1, k))
        return lk.ms * 1e-3, lk.measured and not self._foreign, lk.note

    def _moe(self, m_all: float) -> tuple[float, bool, str]:
        """One MoE layer's routed experts on one GPU for the replica's ``m_all`` tokens."""
        a, p = self.arch, self.par
        if self._moe_tables is not None:
            tries = [(self.moe_kernel_dtype, self._a8_tables, ""), (self.dtype, self._moe_tables, "")]
            if self.dtype == "fp8" and "fp8" not in self._moe_tables.moe_dtypes:
                # per-tensor FP8 experts where the engine's table times only block FP8 (SGLang's Hopper
                # tables; vLLM's Hopper tables, whose per-tensor rows timed the static-scale FlashInfer
                # kernel a dynamic-scale FP8 deployment does not run: build_kernel_tables.py MOE_NOT_RUN):
                # the same one-byte weights through the same grouped GEMMs (SGLang's and vLLM's Triton
                # fused_moe take use_fp8_w8a8 with or without a block_shape), their per-block scales aside
                tries.append(("fp8_block", self._moe_tables,
                              "per-tensor FP8 experts priced by the engine's block-FP8 kernel table"))
            for d, tab, why in tries:
                if d is None or tab is None:
                    continue
                try:
                    shape = (max(1.0, m_all), a.hidden, a.moe_intermediate, a.experts_per_token)
                    lk: Lookup = tab.moe(d, *shape, self.routed_experts, p.moe_tp, p.ep)
                    if a.experts != self.routed_experts:  # EPLB's slots: more expert copies a rank (_eplb)
                        r = (tab.moe_roofline_ms(d, *shape, a.experts, p.moe_tp, p.ep)
                             / tab.moe_roofline_ms(d, *shape, self.routed_experts, p.moe_tp, p.ep))
                        how = (f"EPLB slots: the routed experts' time x{max(1.0, r):.3g} (roofline of "
                               f"{a.experts} over {self.routed_experts} experts)")
                        lk = Lookup(lk.ms * max(1.0, r), False, "; ".join(x for x in (how, lk.note) if x))
                    return lk.ms * 1e-3, lk.measured and not why, "; ".join(x for x in (why, lk.note) if x)
                except ParameterError:
                    continue
        t = self.tables
        e_local = a.experts / p.ep
        touched = e_local * (1.0 - (1.0 - a.experts_per_token / a.experts) ** max(1.0, m_all))
        inter = a.moe_intermediate / p.moe_tp
        w = BYTES_PER_VALUE[self.dtype]
        pairs = m_all * a.experts_per_token / p.ep
        nbytes = touched * 3 * a.hidden * inter * w + pairs * (a.hidden + inter) * ACTIVATION_BYTES * 2
        flops = 2 * pairs * 3 * a.hidden * inter
        eff = t.efficiency["gemm"]
        gd = self.gemm_dtype if self.gemm_dtype in eff else "bf16"
        peak = t.flops_per_s.get(gd, t.flops_per_s["bf16"])
        sec = max(nbytes / (eff[gd]["memory"] * t.hbm_bytes_per_s), flops / (eff[gd]["compute"] * peak))
        floor = 2 * eff["bf16"]["floor_ms"] * 1e-3
        return (max(sec, floor) + floor, False,
                "MoE experts priced on the grouped-GEMM roofline (no measured table)")

    def _mla_bmm(self, m: float) -> float:
        """MLA's two absorbed batched matmuls on ``m`` tokens: the measured table, else their GEMM
        as one matmul of the heads (``(m, H/T kv_lora, nope)`` and ``(m, H/T v, kv_lora)``)."""
        a, heads = self.arch, self.arch.heads // self.par.tp
        mt = self._moe_tables
        bdt = "fp8" if self.gemm_dtype in ("fp8", "fp8_block") else "bf16"
        if mt is not None:
            try:
                pre = mt.mla_bmm("pre", max(1.0, m), heads, bdt).ms
                return float(pre + mt.mla_bmm("post", max(1.0, m), heads, bdt).ms) * 1e-3
            except (ParameterError, KeyError):
                pass
        pre, _, _ = self._gemm(m, heads * a.kv_lora_rank, a.qk_nope_head_dim, "bf16")
        post, _, _ = self._gemm(m, heads * a.v_head_dim, a.kv_lora_rank, "bf16")
        return pre + post

    def _allreduce(self, gpus: int, nbytes: float) -> tuple[float, bool, str]:
        if gpus <= 1 or nbytes <= 0:
            return 0.0, True, ""
        lk = self.tables.allreduce(gpus, nbytes)
        return lk.ms * 1e-3, lk.measured, lk.note

    def _dp_gather(self, m_all: float, prefill: bool) -> tuple[float, bool, str, float]:
        """The attention-DP ranks' ``m_all`` tokens gathered to every GPU before an MoE layer and its
        partial outputs reduce-scattered back after it (seconds, measured, note, bytes on the wire;
        :data:`EP_COMMS` ``"allgather"``): NCCL's all-gather of the tokens' activations (BF16, or
        TensorRT-LLM's NVFP4 experts' quantized ones: 4 bits and an FP8 scale per 16 values) and
        reduce-scatter of their BF16 outputs over the replica's ``T D`` GPUs.  An engine whose step
        that prefills gathers with an all-reduce (``dp_gather_prefill``: SGLang's SUM_LEN mode) pays two
        all-reduces of the outputs' size instead; so does a model without the NCCL tables."""
        p, h = self.par, self.arch.hidden
        out = m_all * h * ACTIVATION_BYTES
        mt = self._moe_tables
        if mt is None or (prefill and self.engine.dp_gather_prefill == "allreduce"):
            t, ok, note = self._allreduce(p.gpus, out)
            return 2 * t, ok, note, 2 * ring_bytes(p.gpus, out)
        quantized = self.engine.gathers_nvfp4 and self.dtype == "fp4"  # gathered already as NVFP4
        gathered = m_all * h * (BYTES_PER_VALUE["fp4"] if quantized else ACTIVATION_BYTES)
        ag, rs = mt.all_gather(p.gpus, gathered), mt.reduce_scatter(p.gpus, out)
        share = (p.gpus - 1) / p.gpus
        return ((ag.ms + rs.ms) * 1e-3, ag.measured and rs.measured,
                "; ".join(x for x in (ag.note, rs.note) if x), share * (gathered + out))

    def _alltoall(self, nbytes: float, tokens: float = 0.0,
                  decode_only: bool = False) -> tuple[float, bool, str]:
        """Dispatch plus combine over the EP group (seconds, measured, note): DeepEP's measured kernels
        where shipped (low-latency for decode-only steps, normal otherwise) for ``tokens`` tokens of one
        rank; else the all-reduce table's time for ``nbytes`` per GPU, twice (each GPU sends and
        receives its share once each way).  Fewer tokens than ranks (a mean below one a rank) cost the
        one-token kernel: the collective waits for the ranks that hold one.  Measured and note are
        the tables' own: a group that spans
        nodes has no table (:meth:`MoETables.deepep` prices it from DeepEP's published RDMA latencies,
        :meth:`KernelTables.allreduce` from NCCL's own latency model) and says so."""
        p, a = self.par, self.arch
        if p.ep <= 1:
            return 0.0, True, ""
        mt = self._moe_tables
        if mt is not None and tokens > 0:
            mode = "ll" if decode_only else "normal"
            try:
                args = (max(1.0, tokens), a.hidden, a.experts_per_token, a.experts, p.ep)
                lks = (mt.deepep("dispatch", mode, *args), mt.deepep("combine", mode, *args))
                return (float(sum(lk.ms for lk in lks)) * 1e-3, all(lk.measured for lk in lks),
                        "; ".join(lk.note for lk in lks if lk.note))
            except (ParameterError, KeyError):
                pass
        t, ok, note = self._allreduce(p.ep, nbytes)
        return 2 * t, ok, note

    def _attention(self, b: float, ctx: float, chunks: tuple[Chunk, ...], window: int,
                   positions: int = 1) -> tuple[float, bool]:
        """One layer's attention on one DP rank: decode of ``b`` sequences (``positions`` query
        tokens each: a verify step) and the prefill chunks.  The MLA table measures one query token a
        sequence; where the engine's kernel runs a verify step's tokens as separate single-query
        rows (:attr:`~servesim.hardware.engines.EngineProfile.mla_verify_per_query`), each reading
        the sequence's cache, the step is the decode of ``positions x b`` rows."""
        a, t, tp = self.arch, self.tables, self.par.tp
        kv = self.kv_dtype
        total, ok = 0.0, True
        if a.attention == "mla":
            heads = a.heads // tp
            mt = self._moe_tables
            if mt is not None and kv in mt.mla_kv_dtypes():
                if b > 0:
                    c = min(ctx, window) if window else ctx
                    rows = b * positions if self.engine.mla_verify_per_query else b
                    cb = max(1, bucket_context(c + 1))
                    total += between_batches(lambda n: mt.mla_decode(n, cb, heads, kv).ms, rows) * 1e-3
                    ok = ok and mt.mla_decode(max(1, math.ceil(rows)), cb, heads, kv).measured
                pt = self._mla_prefill_tables or mt

                def mla_prefill_ms(n: int, x: int) -> float:
                    return float(pt.mla_prefill(n, x, heads, kv).ms)

                def mla_read_ms(n: int, x: int) -> float:
                    return float(mt.mla_decode(n, x, heads, kv).ms)

                for ch in chunks:
                    fresh = pt.mla_prefill(ch.count, ch.tokens, heads, kv)
                    total += self._chunk_s("mla", ch, ch.context, fresh.ms, mla_prefill_ms, mla_read_ms)
                    ok = ok and fresh.measured
                return total, ok
        heads, kvh = a.heads // tp, max(1, a.kv_heads // tp)
        if b > 0:
            c = min(ctx, window) if window else ctx
            cb = max(1, bucket_context(c + 1))
            def one(n: int) -> float:
                return float(t.decode_attention(n, cb, heads, kvh, a.head_dim, kv).ms)

            total += between_batches(one, b) * 1e-3
            ok = ok and t.decode_attention(max(1, math.ceil(b)), cb, heads, kvh, a.head_dim, kv).measured
        def prefill_ms(n: int, x: int) -> float:
            return float(t.prefill_attention(n, x, heads, kvh, a.head_dim, kv).ms)

        def read_ms(n: int, x: int) -> float:
            return float(t.decode_attention(n, x, heads, kvh, a.head_dim, kv).ms)

        for ch in chunks:
            fresh = t.prefill_attention(ch.count, ch.tokens, heads, kvh, a.head_dim, kv)
            total += self._chunk_s("gqa", ch, min(ch.context, window) if window else ch.context, fresh.ms,
                                   prefill_ms, read_ms)
            ok = ok and fresh.measured
        return total, ok

    def _chunk_s(self, kind: str, ch: Chunk, context: int, fresh_ms: float,
                 prefill_ms: Callable[[int, int], float], read_ms: Callable[[int, int], float]) -> float:
        """One layer's attention of the chunk ``ch`` behind ``context`` cached tokens, as every family
        prices one (:func:`~servesim.hardware.chunk_attention.chunk_attention_s`), from one attention
        ``kind``'s lookups in ms of (sequences, prompt length) and (sequences, context): its prefill
        hull is built on first use and kept."""
        n = ch.count

        def hull() -> Hull:
            got = self._hulls.get((kind, n))
            if got is None:
                got = self._hulls[(kind, n)] = prefill_hull(lambda x: prefill_ms(n, x) * 1e-3)
            return got

        return chunk_attention_s(ch.tokens, context, fresh_ms * 1e-3, hull,
                                 lambda x: read_ms(n, max(1, bucket_context(x))) * 1e-3)

    # ------------------------------------------------------------------ the step

    def step(self, decode: float = 0.0, context: float = 0.0, chunks: tuple[Chunk, ...] = (),
             positions: int = 1, *, bound: bool = True) -> StepTime:
        """A step with ``decode`` sequences (the whole replica's) at mean ``context`` and the given
        prefill ``chunks``; the DP ranks share them evenly."""
        if bound:
            check_real("decode", decode, lo=0.0)
            check_real("context", context, lo=0.0)
            check_int("positions", positions, lo=1)
        st = self._cache_step(float(decode), float(context), tuple(chunks), int(positions))
        if bound:
            return replace(st, sol_s=light_s(st.ops, self.peaks))
        return st

    def step_price(self, decode: int, context: int, chunks: tuple[tuple[int, int, bool], ...] = (),
                   positions: int = 1) -> StepPrice:
        """What the engine loop asks of a step (the :class:`~servesim.hardware.pricer.Pricer` seam):
        ``step(decode, context, chunks, positions, bound=False)``'s ``(total_s, measured, notes,
        launch_wait_s, launch_s)``, for chunks given as (tokens, context, samples) of one prompt each."""
        st = self.step(decode, context, tuple(Chunk(q, c, 1, x) for q, c, x in chunks), positions,
                       bound=False)
        return st.total_s, st.measured, st.notes, st.launch_wait_s, st.launch_s

    @property
    def peaks(self) -> Peaks:
        """The GPU's datasheet peaks (what the speed of light of each operation is priced at)."""
        return Peaks.of(self.tables)

    def operations(self, decode: float, context: float, chunks: tuple[Chunk, ...] = (),
                   positions: int = 1) -> tuple[Op, ...]:
        """The operations of a step (see the module docstring), each priced by the engine's tables
        and carrying its bytes and FLOPs for the speed of light."""
        return self._cache_step(float(decode), float(context), tuple(chunks), int(positions)).ops

    def _step(self, decode: float, context: float, chunks: tuple[Chunk, ...], positions: int) -> StepTime:
        """The step's operations, priced, summed (:meth:`_priced`)."""
        x = self._batch(decode, context, chunks, positions)
        ops = [*self._attention_ops(x), *self._ffn_ops(x), self._head_op(x), *self._comm_ops(x)]
        other, floor = self._other_ops(x)
        return self._priced(x, [*ops, *other], floor)

    def _batch(self, decode: float, context: float, chunks: tuple[Chunk, ...], positions: int) -> _Batch:
        """The step's token counts on the busiest DP rank and over the replica (CUDA-graph padding
        included) and whether it runs as a CUDA graph."""
        p = self.par
        prefill = sum(c.tokens * c.count for c in chunks)
        m_all = decode * positions + prefill
        if m_all <= 0:
            raise ParameterError("tokens", m_all, "> 0: a step needs a decoding sequence or a prefill chunk")
        dp = p.dp
        b = decode / dp
        rank_chunks = chunks if dp == 1 else _busiest_rank(chunks, dp)
        # Tokens of the busiest DP rank: its share of the decoding sequences and its own chunks (the
        # step waits for the slowest rank before the MoE layer gathers every rank's tokens).
        m = b * positions + sum(c.tokens * c.count for c in rank_chunks)
        samples = b * positions + sum(c.count for c in rank_chunks if c.samples)
        tokens = m_all
        if not chunks and positions == 1:
            # A decode step replays the CUDA graph of the smallest captured batch that holds the rank's
            # sequences (one above every captured size runs eagerly, as it is): the padded rows run
            # every kernel but attention (no cache to read).
            padded = self.engine.graph_batch(b)
            if padded != b:
                m = samples = padded
                m_all = m * dp
        elif not chunks and m < self.engine.graph_batch(b):
            # A verify step (positions > 1) runs no fewer rows than the plain decode step of the same
            # sequences: with attention DP every rank, an idle one too, runs at least one row (the
            # padding above), where b x positions of a rank's share below one sequence would not
            m = samples = self.engine.graph_batch(b)
            m_all = m * dp
        graph = (self.engine.graph_size(m, b, bool(rank_chunks)) <= self.engine.cuda_graph_max_tokens
                 and not (chunks and self.engine.cuda_graph_decode_only))
        return _Batch(decode, context, chunks, positions, rank_chunks, b, m, m_all, samples, tokens, graph)

    def _attention_ops(self, x: _Batch) -> list[Op]:
        """The attention projections (each in its checkpoint format), MLA's absorbed matmuls and the
        attention of each window, per layer, on the busiest DP rank's tokens."""
        a, p, L, m = self.arch, self.par, self.arch.layers, x.m
        if a.linear_layers:  # gated delta nets beside full attention (Qwen3.5): hardware/linear_attention.py
            return hybrid_attention_ops(self, x)
        ops: list[Op] = []
        for (n, k), name, proj in zip(self._proj_shapes(), self._proj_names(), self._proj_parts(),
                                      strict=True):
            quantized = bool(self._quantized & proj)
            d = self._table_dtype(quantized)
            g, good, note = self._gemm(m, n, k, d)
            ops.append(self._gemm_op(name, L, g, m, n, k, BYTES_PER_VALUE[self.dtype] if quantized else 2.0,
                                     d, good, note))
        if a.attention == "mla":  # the absorbed W_UK (before attention) and W_UV (after), per head
            heads = a.heads // p.tp
            w_bmm = heads * (a.qk_nope_head_dim * a.kv_lora_rank + a.kv_lora_rank * a.v_head_dim)
            acts = m * heads * (a.qk_nope_head_dim + 2 * a.kv_lora_rank + a.v_head_dim) * ACTIVATION_BYTES
            ops.append(Op("mla absorbed bmm", "mla_bmm", L, self._mla_bmm(m), nbytes=w_bmm * 2.0 + acts,
                          flops=2.0 * m * w_bmm))
        if a.sparse:  # DeepSeek Sparse Attention: the indexer, then MLA over the top-k (sparse_attention.py)
            return ops + dsa_attention_ops(self, x)
        windows: dict[int, int] = {}
        for w in a.layer_windows:
            windows[w] = windows.get(w, 0) + 1
        for w, count in windows.items():
            t_attn, good = self._attention(x.b, x.context + (x.positions - 1) / 2 + 1, x.rank_chunks, w,
                                           x.positions)
            nbytes, flops = self._attention_work(x.b, x.context, x.positions, x.rank_chunks, w)
            note = self.mla_prefill_note if x.rank_chunks else ""  # set for MLA models only
            ops.append(Op("attention" if not w else f"attention (window {w})", "attention", count, t_attn,
                          nbytes=nbytes, flops=flops, measured=good, note=note))
        return ops

    def _ffn_ops(self, x: _Batch) -> list[Op]:
        """The MoE layers (router, routed and shared experts; on two streams where the engine runs the
        shared experts beside the routed ones) and the dense layers' MLPs."""
        a, p, h, m = self.arch, self.par, self.arch.hidden, x.m
        n_moe = _n_moe(a)
        n_dense = a.layers - n_moe
        if not n_moe:  # no expert layers (Qwen3.5's dense hybrids): every layer's MLP
            return [self._mlp_op("dense mlp", n_dense, m, a.intermediate)]
        moe_t, good, note = self._moe(x.m_all)
        if x.chunks and self._moe_prefill_scale != 1.0:
            moe_t *= self._moe_prefill_scale
            note = "; ".join(y for y in (note, self.moe_prefill_note) if y)
        e_local_w = self._expert_bytes(x.m_all)
        pairs = x.m_all * a.experts_per_token / p.ep
        inter_local = a.moe_intermediate / p.moe_tp
        routed = Op("moe experts", "moe", n_moe, moe_t, measured=good, note=note,
                    nbytes=e_local_w + pairs * (h + inter_local) * ACTIVATION_BYTES * 2,
                    flops=2.0 * pairs * 3 * h * inter_local, dtype=_PEAK[self.moe_kernel_dtype or self.dtype])
        inter = a.shared_experts * a.shared_intermediate
        router_t, _, _ = self._gemm(m, self.routed_experts, h, "bf16")
        router = self._gemm_op("router", n_moe, router_t, m, self.routed_experts, h, 2.0, "bf16", True, "")
        shared = self._mlp_op("shared experts", n_moe, m, inter) if inter else None
        ops: list[Op] = []
        if shared is not None and x.graph and self.engine.shared_experts_overlap == a.attention:
            # Two streams: the longer branch, and no less than both branches' weights (the touched
            # experts and the shared experts' 3 h I_s / T) read at the tables' HBM efficiency.
            t = self.tables
            both = e_local_w + 3 * h * inter / p.tp * self._ffn_weight_bytes
            one = max(router.priced_s + moe_t, shared.priced_s,
                      both / (t.hbm_bytes_per_s * t.memory_efficiency))
            ops.append(Op("moe layer (shared experts on a second stream)", "two_streams", n_moe, one,
                          measured=good, note=note,
                          branches=(Op("router + experts", "moe", 1, router.priced_s + moe_t,
                                       nbytes=router.nbytes + routed.nbytes, flops=routed.flops,
                                       dtype=routed.dtype),
                                    Op("shared experts", "gemm", 1, shared.priced_s, nbytes=shared.nbytes,
                                       flops=shared.flops, dtype=shared.dtype))))
        else:
            ops.append(routed)
            if shared is not None:
                ops.append(shared)
            ops.append(router)
        if n_dense:
            ops.append(self._mlp_op("dense mlp", n_dense, m, a.intermediate))
        return ops

    def _head_op(self, x: _Batch) -> Op:
        """The LM head (BF16) on the sampled rows of one rank."""
        a, p = self.arch, self.par
        rows = max(1.0, x.samples)
        head = sum(lk.ms * 1e-3 * count for lk, count in
                   column_blocks(self.tables, "bf16", rows, a.vocab // p.tp, a.hidden))
        return self._gemm_op("lm head", 1, head, rows, a.vocab // p.tp, a.hidden, 2.0, "bf16", True, "")

    def _comm_ops(self, x: _Batch) -> list[Op]:
        """The step's collectives: the attention TP all-reduces and how the MoE layer's tokens reach
        the experts (the DP gather, the EP all-to-all, or the MoE all-reduce)."""
        a, p, h = self.arch, self.par, self.arch.hidden
        n_moe = _n_moe(a)
        n_dense = a.layers - n_moe
        ops: list[Op] = []
        act = x.m * h * ACTIVATION_BYTES
        ar1, ar1_ok, ar1_note = self._allreduce(p.tp, act)
        if p.tp > 1:  # after attention on every layer, after dense MLPs
            ops.append(Op("all-reduce", "allreduce", a.layers + n_dense, ar1,
                          wire_bytes=ring_bytes(p.tp, act), measured=ar1_ok, note=ar1_note))
        if self._mnnvl and self._moe_tables is not None:  # TensorRT-LLM on an NVL72 rack (wide_ep.py)
            sent = x.m_all * a.experts_per_token / p.ep * h * ACTIVATION_BYTES
            lk = mnnvl_alltoall(self._moe_tables, self.dtype, x.m_all / p.ep, h, a.experts_per_token, p.ep)
            assert lk is not None
            ops.append(Op("ep dispatch + combine", "alltoall", n_moe, lk.ms * 1e-3, wire_bytes=2 * sent,
                          measured=lk.measured, note=lk.note))
        elif p.dp > 1 and (p.ep == 1 or self.ep_comm == "allgather"):
            g, g_ok, g_note, wire = self._dp_gather(x.m_all, bool(x.chunks))
            ops.append(Op("dp gather + scatter", "allgather", n_moe, g, wire_bytes=wire, measured=g_ok,
                          note=g_note))
        elif p.ep > 1 and p.dp > 1:
            sent = x.m_all * a.experts_per_token / p.ep * h * ACTIVATION_BYTES
            a2a, a2a_ok, a2a_note = self._alltoall(sent, x.m_all / p.ep,
                                                   not x.chunks and self.ep_comm == "deepep")
            ops.append(Op("ep dispatch + combine", "alltoall", n_moe, a2a, wire_bytes=2 * sent,
                          measured=a2a_ok, note=a2a_note))
            if p.moe_tp > 1:
                r, r_ok, r_note = self._allreduce(p.moe_tp, sent)
                ops.append(Op("all-reduce (moe tp)", "allreduce", n_moe, r,
                              wire_bytes=ring_bytes(p.moe_tp, sent), measured=r_ok, note=r_note))
        elif p.tp > 1 and n_moe:
            # After the MoE layer, whose TP is the attention TP.  With EP as well, tensor-parallel
            # attention leaves every token on every GPU: each runs its own experts on them and the same
            # one all-reduce of m h sums the partial outputs, no all-to-all (SGLang's standard
            # dispatcher: models/minimax_m2.py MiniMaxM2MoE.forward_normal, models/qwen3_moe.py
            # forward_normal; vLLM's FusedMoE uses its all2all manager only with data parallel).
            ops.append(Op("all-reduce (moe)", "allreduce", n_moe, ar1, wire_bytes=ring_bytes(p.tp, act),
                          measured=ar1_ok, note=ar1_note))
        return ops

    def _other_ops(self, x: _Batch) -> tuple[list[Op], float]:
        """The memory-bound kernels (Q/K norms, norms, RoPE, activation, router; sampling), the launch
        gaps of an eager step, and the step's launch floor (its kernels at the shortest gap each)."""
        a, p, L, m = self.arch, self.par, self.arch.layers, x.m
        h = a.hidden
        ops: list[Op] = []
        t = self.tables
        bw = t.hbm_bytes_per_s * t.memory_efficiency
        if a.qk_norm:
            # Q/K RMSNorms after the QKV projection (module docstring of QK_NORM_KERNELS): per head one
            # kernel; over all heads (MiniMax-M2) a sum-of-squares kernel, then the apply kernel, and
            # with attention TP an all-reduce of the FP32 sums (2 per token) between them.
            heads_local = a.heads // p.tp + max(1, a.kv_heads // p.tp)
            qk_bytes = m * heads_local * a.head_dim * ACTIVATION_BYTES * 2
            kernels_qk = QK_NORM_KERNELS[a.qk_norm]
            ops.append(Op("q/k norm", "elementwise", L, kernels_qk * OTHER_KERNEL_FLOOR_S + qk_bytes / bw,
                          nbytes=qk_bytes))
            if a.qk_norm == "per_layer" and p.tp > 1:
                sums = m * 2 * 4.0
                qs, qs_ok, qs_note = self._allreduce(p.tp, sums)
                ops.append(Op("q/k norm all-reduce", "allreduce", L, qs,
                              wire_bytes=ring_bytes(p.tp, sums), measured=qs_ok, note=qs_note))
        per_token = ACTIVATION_BYTES * (8 * h + 4 * h + 2 * a.experts)
        ops.append(Op("norms, rope, activation", "elementwise", L,
                      OTHER_KERNELS_PER_MOE_LAYER * OTHER_KERNEL_FLOOR_S + m * per_token / bw,
                      nbytes=m * per_token))
        logits = x.samples * a.vocab / p.tp * 4 * 3
        ops.append(Op("sampling", "elementwise", 1, SAMPLING_FLOOR_S + logits / bw, nbytes=logits))
        kernels = L * (len(self._proj_shapes()) + 2 + OTHER_KERNELS_PER_MOE_LAYER
                       + (2 if p.tp > 1 else 0)) + 2
        floor = kernels * OTHER_KERNEL_FLOOR_S
        if not x.graph:
            eager = L * EAGER_KERNELS_PER_MOE_LAYER + (2 if p.tp > 1 else 0) * L
            # the launch gap of every kernel, eagerly, which no eager step can avoid
            ops.append(Op("launch gaps (eager step)", "elementwise", eager, self.engine.eager_kernel_s))
            floor += eager * self.engine.eager_kernel_s
        return ops, floor

    def _priced(self, x: _Batch, ops: list[Op], floor: float) -> StepTime:
        """The step's parts summed (a CPU-bound eager MLA prefill waits for its launches) and the host
        time added or overlapped."""
        ok = not self._foreign
        notes: list[str] = []
        for op in ops:
            ok = ok and op.measured
            if op.note:
                notes.append(op.note)
        parts = priced_parts(ops)
        gemm, attn, comm, other = parts["gemm"], parts["attention"], parts["comm"], parts["other"]
        gpu = gemm + attn + comm + other
        eager_prefill = not x.graph and bool(x.chunks) and self.arch.attention == "mla"
        launch = self.arch.layers * self.engine.eager_mla_layer_host_s if eager_prefill else 0.0
        wait = max(0.0, launch - gpu)
        if wait > 0.0:  # the GPU waits for the CPU to launch the layers (engines.toml, the fitted floor)
            ops.append(Op("launch-bound wait (eager prefill)", "elementwise", 1, wait))
            other += wait
            gpu = launch
        floor = max(floor, launch)  # no eager prefill step launches faster: part of its bound
        seqs = (x.decode + sum(c.count for c in x.chunks)) / self.par.dp
        host = self.engine.host_s(seqs)
        total = max(gpu, host) if self.engine.overlap else gpu + host
        notes.append(self.links_note)
        if self._foreign:
            notes.insert(0, self.tables_note)
        return StepTime(gemm_s=gemm, attention_s=attn, allreduce_s=comm, other_s=other, host_s=host,
                        gpu_s=gpu,
                        total_s=total, sol_s=math.nan, tokens=x.tokens, measured=ok,
                        notes=tuple(dict.fromkeys(n for n in notes if n)),
                        floor_s=floor, launch_wait_s=wait, launch_s=launch, ops=tuple(ops))

    def _gemm_op(self, name: str, count: float, seconds: float, m: float, n: int, k: int, wbytes: float,
                 dtype: str, measured: bool, note: str) -> Op:
        """A weight GEMM ``(m, n, k)``: its ``n k`` weights at ``wbytes`` each and BF16 activations in
        and out; ``2 m n k`` FLOPs at the peak of the dtype it multiplies in."""
        return Op(name, "gemm", count, seconds, nbytes=n * k * wbytes + m * (n + k) * ACTIVATION_BYTES,
                  flops=2.0 * m * n * k, dtype=_PEAK.get(dtype, "bf16"), measured=measured, note=note)

    def _mlp_op(self, name: str, count: float, m: float, inter: int) -> Op:
        """A gated MLP of width ``inter`` split over ``tp`` on ``m`` tokens (gate/up, then down)."""
        tp, h = self.par.tp, self.arch.hidden
        w = self._ffn_weight_bytes
        d = _PEAK.get(self.ffn_gemm_dtype, "bf16")
        return Op(name, "gemm", count, self._mlp(m, inter),
                  nbytes=3 * h * (inter // tp) * w + m * (2 * h + 3 * (inter // tp)) * ACTIVATION_BYTES,
                  flops=2.0 * m * 3 * h * (inter // tp), dtype=d)

    def _attention_work(self, b: float, context: float, positions: int, chunks: tuple[Chunk, ...],
                        window: int) -> tuple[float, float]:
        """One layer's attention bytes (the cache each sequence reads, its window at most) and FLOPs
        (2 x 2 per query-key pair and head dimension: GQA ``d``; MLA's absorbed decode ``(2 kv_lora +
        rope) / 2`` over its latent, its prefill ``(nope + rope + v) / 2``) on one DP rank."""
        a = self.arch
        kvb = 2.0 if self.kv_dtype == "bf16" else 1.0
        if a.attention == "mla":
            per_token = (a.kv_lora_rank + a.qk_rope_head_dim) * kvb
            dec_w = (2 * a.kv_lora_rank + a.qk_rope_head_dim) / 2
            pre_w = (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim) / 2
        else:
            per_token = 2 * max(1, a.kv_heads // self.par.tp) * a.head_dim * kvb
            dec_w = pre_w = float(a.head_dim)

        def seen(n: float) -> float:
            return min(n, window) if window else n

        heads = a.heads / self.par.tp
        nbytes = per_token * (b * seen(context + positions) + sum(c.count * seen(c.context + c.tokens)
                                                                  for c in chunks))
        dec_pairs = b * positions * seen(context + (positions + 1) / 2)
        pre_pairs = sum(c.count * c.tokens * seen(c.context + c.tokens / 2) for c in chunks)
        return nbytes, 4 * heads * (dec_w * dec_pairs + pre_w * pre_pairs)

    @property
    def _ffn_weight_bytes(self) -> float:
        """Bytes per weight value of the shared experts and dense layers."""
        return BYTES_PER_VALUE[self.dtype] if self._quantized & {"shared_experts", "dense_mlp"} else 2.0

    def _expert_bytes(self, m_all: float) -> float:
        """Weights of the local experts the replica's ``m_all`` tokens touch on one GPU: the
        expected share of its ``E / ep`` experts picked at least once, ``3 h I / moe_tp`` each."""
        a, p = self.arch, self.par
        touched = a.experts / p.ep * (1.0 - (1.0 - a.experts_per_token / a.experts) ** max(1.0, m_all))
        return float(touched * 3 * a.hidden * a.moe_intermediate / p.moe_tp * BYTES_PER_VALUE[self.dtype])

    def _mlp(self, m: float, inter: int) -> float:
        """A gated MLP of width ``inter`` split over ``tp``, on ``m`` tokens."""
        tp = self.par.tp
        up, _, _ = self._gemm(m, 2 * inter // tp, self.arch.hidden, self.ffn_gemm_dtype)
        down, _, _ = self._gemm(m, self.arch.hidden, inter // tp, self.ffn_gemm_dtype)
        return up + down

    def _proj_shapes(self) -> tuple[tuple[int, int], ...]:
        a, tp = self.arch, self.par.tp
        h = a.hidden
        if a.attention == "mla":
            heads = a.heads // tp
            qk = a.qk_nope_head_dim + a.qk_rope_head_dim
            kv_a = a.kv_lora_rank + a.qk_rope_head_dim
            if a.q_lora_rank:  # q_a and kv_a as one GEMM (module docstring), then q_b
                return ((a.q_lora_rank + kv_a, h), (heads * qk, a.q_lora_rank), (h, heads * a.v_head_dim))
            return ((heads * qk, h), (kv_a, h), (h, heads * a.v_head_dim))
        heads, kvh = a.heads // tp, max(1, a.kv_heads // tp)
        return (((heads + 2 * kvh) * a.head_dim, h), (h, heads * a.head_dim))

    def _proj_names(self) -> tuple[str, ...]:
        """What each of :meth:`_proj_shapes` is."""
        a = self.arch
        if a.attention == "mla":
            if a.q_lora_rank:
                return ("qkv_a proj", "q_b proj", "o proj")
            return ("q proj", "kv_a proj", "o proj")
        return ("qkv proj", "o proj")

    def _proj_parts(self) -> tuple[frozenset[str], ...]:
        """The checkpoint's linear parts (:data:`LINEAR_PARTS`) behind each of :meth:`_proj_shapes`."""
        a = self.arch
        if a.attention == "mla":
            if a.q_lora_rank:
                return (frozenset({"q_a_proj", "kv_a_proj"}), frozenset({"q_b_proj"}), frozenset({"o_proj"}))
            return (frozenset({"q_proj"}), frozenset({"kv_a_proj"}), frozenset({"o_proj"}))
        return (frozenset({"q_proj", "k_proj", "v_proj"}), frozenset({"o_proj"}))

    def speed_of_light(self, decode: float, context: float, chunks: tuple[Chunk, ...] = (),
                       positions: int = 1) -> float:
        """The step's operations at 100% of the datasheet peaks, summed (:mod:`servesim.hardware.ops`):
        the same list the engine's price sums, so one cost model with two pricers."""
        return light_s(self.operations(decode, context, chunks, positions), self.peaks)

    # ------------------------------------------------------------------ shortcuts

    def decode_step(self, batch: float, context: float, positions: int = 1) -> StepTime:
        return self.step(batch, context, (), positions)

    def prompt_s(self, tokens: int) -> float:
        return prompt_in_chunks(self, check_int("tokens", tokens, lo=1))

    def prefill_step(self, prompt: int, sequences: int = 1) -> StepTime:
        return self.step(0.0, 0.0, (Chunk(prompt, 0, sequences),))


def _busiest_rank(chunks: tuple[Chunk, ...], dp: int) -> tuple[Chunk, ...]:
    """The prefill chunks of the busiest of ``dp`` attention data-parallel ranks: each chunk belongs
    to one request and so to one rank; they are dealt largest first to the least loaded rank (by
    attention work, ``q (c + q / 2)``, plus projection work, ``q``, in tokens), as a router that
    balances the ranks would place them."""
    singles = sorted(((c.tokens, c.context, c.samples) for c in chunks for _ in range(c.count)),
                     key=lambda x: (-(x[0] * (x[1] + x[0] / 2) + x[0] * 4096), -x[0], -x[1]))
    loads = [0.0] * dp
    held: list[list[tuple[int, int, bool]]] = [[] for _ in range(dp)]
    for q, c, x in singles:
        r = min(range(dp), key=lambda i: (loads[i], i))
        loads[r] += q * (c + q / 2) + q * 4096
        held[r].append((q, c, x))
    top = max(range(dp), key=lambda i: (loads[i], -i))
    return tuple(Chunk(q, c, 1, x) for q, c, x in held[top])


def _n_moe(arch: ModelShape) -> int:
    """MoE layers of ``arch`` (the others are dense)."""
    return sum(1 for x in arch.layer_moe if x)
