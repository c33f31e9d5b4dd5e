"""A model's shape: the one class every pricer, reader and planner takes (:class:`ModelShape`).

**Design.**  One frozen dataclass describes any decoder-only model servesim prices: a catalog entry
(models.toml, :mod:`servesim.hardware.catalog`) and a ``config.json`` of any family, dense or
mixture-of-experts, MLA or hybrid (:func:`servesim.hardware.model_config.read_config`) build it; the
roofline, the dense and the MoE step models, speculation and the planners all read it.

* **One name per quantity**, Hugging Face's where short (``hidden``, ``vocab``, ``heads``,
  ``kv_heads``, ``head_dim``); ``intermediate`` is the width of a dense MLP (a dense model's, or a
  MoE model's dense layers'), ``moe_intermediate`` one routed expert's.  No property gives a field
  a second name.
* **Per-layer detail is optional.**  ``layer_moe`` (one bool per layer: a MoE layer, else a dense
  MLP), ``layer_windows`` (0 = full attention, else the most tokens the layer attends to) and
  ``layer_linear`` (a gated-delta-net layer, no KV cache) are filled in by the ``config.json``
  reader of MoE / MLA / hybrid models.  A catalog entry, which gives the parameter counts but not
  the layers, leaves them empty: every layer is then a full-attention layer, and its counts are the
  catalog's.
* **Derived figures are computed one way** (:meth:`__post_init__`): where the per-layer detail is
  known (``layer_moe`` given), ``params`` is the sum of :meth:`breakdown`, ``active_params`` the
  same with the routed experts scaled by ``k / E``, ``weight_bytes_per_param`` the checkpoint's
  bytes (:meth:`weight_bytes` of ``checkpoint_dtype``) over ``params``, and ``quantized_parts``
  every linear part unless given: values passed for them are replaced, so that
  :func:`dataclasses.replace` derives them again.  Where it is not known they are the catalog's
  (``params``, ``active_params``, ``weight_bytes_per_param``), checked.
* **One validation**: every count is an integer in [0 or 1, :data:`MAX_DIM`], the attention kind
  agrees with the heads, a MoE layer has experts, the per-layer tuples have one entry per layer, the
  parameters exceed the embedding tables and the active ones sit between them and ``params``; the
  message names the field, its value and the valid range (:class:`~servesim._checks.ParameterError`).

**Sizes** (all parameters are counted over every layer):

* embedding tables: ``vocab x hidden`` each, one if tied to the LM head, else two;
* ``matmul_params = params - (untied input table)``: the weights a decode step streams (the input
  table is only gathered, B rows per step);
* MoE: with E routed experts of which k are used per token, ``params = shared + E p_e`` and
  ``active = shared + k p_e``, so ``p_e = (params - active) / (E - k)`` (one expert slot summed
  over layers).  A dense model has ``experts == experts_per_token`` (1 and 1 in the catalog, 0 and
  0 in a ``config.json`` without experts).

**KV cache per token** (:meth:`ModelShape.kv_bytes_per_token`): MLA stores one latent
``kv_lora_rank + qk_rope_head_dim`` values per layer (one copy for all heads); MHA / GQA / MQA
``2 kv_heads head_dim`` values per layer.  A layer with a window ``w`` holds at most ``w`` tokens,
so over a sequence of ``L`` tokens it costs ``min(L, w) / L`` of a full layer per token (a chunked
layer, Llama-4's, really holds ``L mod w``, at most ``w``: the bound is what an engine must reserve,
as vLLM's chunked-local-attention spec reserves a chunk); a gated-delta-net layer holds none (a
fixed state instead, :meth:`ModelShape.state_bytes_per_request`); a DSA layer adds its indexer's FP8
key, ``d_I + 4`` bytes, whatever the KV dtype.

MLA: ``kv_heads`` is 1 (one latent per token, shared by the heads, replicated on every
tensor-parallel rank) and ``head_dim`` the query/key head width ``qk_nope_head_dim +
qk_rope_head_dim``.

Standard library only; nothing prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.dtypes import BYTES_PER_VALUE
from servesim.hardware.hf_config import MAX_DIM

__all__ = [
    "ATTENTION_KINDS",
    "CHECKPOINT_DTYPES",
    "LINEAR_PARTS",
    "MOE_FAMILIES",
    "ModelShape",
    "attention_kind",
]

ATTENTION_KINDS: tuple[str, ...] = ("mha", "gqa", "mqa", "mla")
"""Multi-head, grouped-query, multi-query and multi-head latent (DeepSeek) attention."""

MOE_FAMILIES: tuple[str, ...] = ("deepseek_v3", "qwen3_moe", "gpt_oss", "minimax_m2", "mixtral", "llama4",
                                 "qwen3_5_moe", "qwen3_5")
"""The model families :func:`servesim.hardware.model_config.read_config` reads per layer (``qwen3_5``:
Qwen3.5's dense hybrid models, no experts: every layer a dense MLP beside a gated delta net or full
attention).  A shape's ``family`` is one of them, or ``""`` (a catalog or dense ``config.json`` model)."""

CHECKPOINT_DTYPES: tuple[str, ...] = ("bf16", "fp8", "fp8_block", "fp4", "mxfp4", "int4")
"""Weight dtypes a checkpoint is stored in, or :meth:`ModelShape.weight_bytes` prices."""

LINEAR_PARTS: tuple[str, ...] = (
    "q_proj", "k_proj", "v_proj", "q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "o_proj",
    "experts", "shared_experts", "dense_mlp", "in_proj_qkvz", "in_proj_ba", "out_proj", "indexer",
)
"""Linear layers a checkpoint may quantize (the keys of :meth:`ModelShape.breakdown` that may
take a dtype other than bf16)."""

_QK_NORMS = ("", "per_head", "per_layer")
_AT_LEAST_0 = ("intermediate", "moe_intermediate", "shared_experts", "shared_intermediate", "q_lora_rank",
               "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "sliding_window",
               "attention_chunk", "mtp_layers", "context_length", "linear_key_heads", "linear_value_heads",
               "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel", "ssm_state_bytes",
               "index_heads", "index_head_dim", "index_topk")
_LINEAR_ATTENTION = ("linear_key_heads", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                     "linear_conv_kernel", "ssm_state_bytes")


def attention_kind(heads: int, kv_heads: int) -> str:
    """``mha``, ``mqa`` or ``gqa``: the attention of ``heads`` query heads over ``kv_heads``."""
    if kv_heads == heads:
        return "mha"
    return "mqa" if kv_heads == 1 else "gqa"


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's shape (the design is the module doc's).

    Identity: ``name``; ``hf_id`` (a Hugging Face id, or ""); ``family`` (:data:`MOE_FAMILIES`, or
    "" for a catalog or dense ``config.json`` model); ``source`` ("catalog" or the ``config.json``
    path read); ``description``; ``draft_model`` (a catalog model drafting for it).

    Attention: ``attention`` (:data:`ATTENTION_KINDS`), the MLA ranks, windows (``sliding_window``,
    Llama-4's ``attention_chunk``), per-head sinks and biases, Q/K norms (``qk_norm``, the MoE
    reader's; ``qkv_bias``, a dense model's Q, K and V biases), Qwen3.5's output gate,
    gated-delta-net layers (``linear_*``) and DeepSeek Sparse Attention's indexer (``index_*``).

    FFN: a dense MLP of ``intermediate`` (``gated_mlp``: gate, up and down); a MoE layer holds
    ``experts`` routed experts of ``moe_intermediate`` (``experts_per_token`` used per token) and
    ``shared_experts`` always-on experts of ``shared_intermediate``; ``mtp_layers`` multi-token
    prediction modules (not in ``params``).

    Bytes: ``bytes_per_value`` of one cached KV value; ``weight_bytes_per_param`` the checkpoint's
    mean; ``checkpoint_dtype`` and ``quantized_parts`` (the linear parts stored in it),
    ``checkpoint_kv_dtype`` (the KV dtype its quantization config states), ``torch_dtype`` (a dense
    ``config.json``'s, as written).  ``context_length``: the longest request (prompt + output) it
    serves, 0 = unknown.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    params: float = 0.0  # derived where the per-layer detail is known
    active_params: float = 0.0  # derived where the per-layer detail is known
    attention: str = "gqa"
    tied_embeddings: bool = False
    bytes_per_value: float = 2.0
    weight_bytes_per_param: float = 2.0  # derived where the per-layer detail is known
    hf_id: str = ""
    family: str = ""
    source: str = "catalog"
    description: str = ""
    draft_model: str = ""
    context_length: int = 0
    torch_dtype: str = ""
    # FFN
    intermediate: int = 0  # a dense MLP's width; 0 = unknown (or no dense layer)
    gated_mlp: bool = True
    mlp_bias: bool = False  # biases on a dense MLP's projections
    experts: int = 1
    experts_per_token: int = 1
    moe_intermediate: int = 0  # one routed expert's width
    shared_experts: int = 0
    shared_intermediate: int = 0
    router_bias: bool = False
    expert_bias: bool = False
    shared_expert_gate: bool = False  # a sigmoid gate (h -> 1) on the shared expert's output
    mtp_layers: int = 0
    # attention
    qkv_bias: bool = False  # Q, K and V biases (Qwen2)
    attention_bias: bool = False  # Q, K, V and O biases (gpt-oss)
    attention_sinks: bool = False
    qk_norm: str = ""
    attn_output_gate: bool = False  # full-attention q_proj also outputs a sigmoid gate of H d
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int = 0
    attention_chunk: int = 0
    # per layer: empty = unknown (every layer full attention, the catalog's counts)
    layer_moe: tuple[bool, ...] = ()
    layer_windows: tuple[int, ...] = ()
    layer_linear: tuple[bool, ...] = ()
    # hybrid linear attention (Qwen3.5): layer_linear[i] True = a gated-delta-net layer, no KV cache
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    ssm_state_bytes: int = 0  # bytes of one recurrent-state value (mamba_ssm_dtype)
    # DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the lightning indexer's heads, width and top-k
    index_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    # the checkpoint
    checkpoint_dtype: str = "bf16"
    quantized_parts: tuple[str, ...] | None = None  # None: every linear part (derived)
    checkpoint_kv_dtype: str = ""

    # ----------------------------------------------------------------- validation

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "kv_heads", "head_dim", "vocab"):
            check_int(name, getattr(self, name), lo=1, hi=MAX_DIM)
        for name in _AT_LEAST_0:
            check_int(name, getattr(self, name), lo=0, hi=MAX_DIM)
        if self.family not in ("", *MOE_FAMILIES):
            raise ParameterError("family", self.family, f"'' or one of {', '.join(MOE_FAMILIES)}")
        if self.attention not in ATTENTION_KINDS:
            raise ParameterError("attention", self.attention, f"one of {', '.join(ATTENTION_KINDS)}")
        self._check_per_layer()
        self._check_heads()
        self._check_experts()
        if self.qk_norm not in _QK_NORMS:
            raise ParameterError("qk_norm", self.qk_norm, "'', 'per_head' or 'per_layer'")
        if self.checkpoint_dtype not in CHECKPOINT_DTYPES:
            raise ParameterError("checkpoint_dtype", self.checkpoint_dtype,
                                 f"one of {', '.join(CHECKPOINT_DTYPES)}")
        if self.layer_moe:
            self._derive()
        self._check_params()

    def _check_per_layer(self) -> None:
        """The per-layer tuples: empty, or one entry per layer."""
        for name in ("layer_moe", "layer_linear"):
            flags = getattr(self, name)
            if flags and (len(flags) != self.layers or not all(isinstance(f, bool) for f in flags)):
                raise ParameterError(name, flags, f"{self.layers} booleans, one per layer (or none)")
        if self.layer_windows and len(self.layer_windows) != self.layers:
            raise ParameterError("layer_windows", self.layer_windows,
                                 f"{self.layers} windows, one per layer (or none)")
        allowed = {0, self.sliding_window, self.attention_chunk}
        for w in self.layer_windows:
            if isinstance(w, bool) or not isinstance(w, int) or w not in allowed:
                raise ParameterError("layer_windows", self.layer_windows,
                                     "0 (full attention), sliding_window or attention_chunk per layer")

    def _check_heads(self) -> None:
        kind, heads, kv = self.attention, self.heads, self.kv_heads
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
            for name in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
                check_int(name, getattr(self, name), lo=1, hi=MAX_DIM)
        if self.layer_linear and any(self.layer_linear):
            for name in _LINEAR_ATTENTION:
                check_int(name, getattr(self, name), lo=1, hi=MAX_DIM)
            if self.linear_value_heads % self.linear_key_heads:
                raise ParameterError("linear_value_heads", self.linear_value_heads,
                                     f"a multiple of linear_key_heads ({self.linear_key_heads})")
        if self.index_heads or self.index_head_dim or self.index_topk:
            if kind != "mla":
                raise ParameterError("index_heads", self.index_heads,
                                     "0: sparse attention is read for MLA only")
            for name in ("index_heads", "index_head_dim", "index_topk"):
                check_int(name, getattr(self, name), lo=1, hi=MAX_DIM)

    def _check_experts(self) -> None:
        """Routed and shared experts, and the dense MLP of a model with dense layers."""
        moe = any(self.layer_moe)
        experts = check_int("experts", self.experts, lo=1 if moe else 0, hi=MAX_DIM)
        check_int("experts_per_token", self.experts_per_token, lo=1 if (moe or experts) else 0, hi=experts)
        if moe:
            check_int("moe_intermediate", self.moe_intermediate, lo=1, hi=MAX_DIM)
        if self.shared_experts:
            check_int("shared_intermediate", self.shared_intermediate, lo=1, hi=MAX_DIM)
        if self.layer_moe and not all(self.layer_moe):
            check_int("intermediate", self.intermediate, lo=1, hi=MAX_DIM)

    def _derive(self) -> None:
        """The figures the per-layer breakdown gives (see the module doc)."""
        present = tuple(p for p in LINEAR_PARTS if self.linear_counts()[p])
        if self.quantized_parts is None:
            object.__setattr__(self, "quantized_parts", present)
        elif not set(self.quantized_parts) <= set(present):
            raise ParameterError("quantized_parts", self.quantized_parts,
                                 f"linear parts of this model: a subset of {', '.join(present)}")
        parts = self.breakdown()
        params = float(sum(parts.values()))
        active = params
        if self.experts:
            routed = parts["experts"]
            if self.expert_bias:
                routed += self.moe_layers * self.experts * (2 * self.moe_intermediate + self.hidden)
            active = params - routed * (1.0 - self.experts_per_token / self.experts)
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "active_params", min(active, params))
        object.__setattr__(self, "weight_bytes_per_param", self.weight_bytes(self.checkpoint_dtype) / params)

    def _check_params(self) -> None:
        params = check_real("params", self.params, lo=0.0, lo_open=True)
        check_real("bytes_per_value", self.bytes_per_value, lo=0.0, lo_open=True)
        check_real("weight_bytes_per_param", self.weight_bytes_per_param, lo=0.0, lo_open=True)
        tables = self.embedding_params * (1 if self.tied_embeddings else 2)
        if params <= tables:
            raise ParameterError(
                "params", self.params,
                f"> {tables:.4g}, the embedding tables alone (vocab_size x hidden_size"
                f"{'' if self.tied_embeddings else ' x 2, untied'})",
            )
        if self.experts_per_token == self.experts:
            check_real("active_params", self.active_params, lo=params, hi=params)
            return
        active = check_real("active_params", self.active_params, lo=tables, hi=params, lo_open=True,
                            hi_open=True)
        if params - self.routed_params < tables:
            raise ParameterError(
                "active_params", active,
                f"large enough that the shared (non-expert) part, params - experts x "
                f"(params - active) / (experts - experts_per_token), covers the embedding "
                f"tables ({tables:.4g})",
            )

    # ----------------------------------------------------------------- layers

    @property
    def moe_layers(self) -> int:
        """Layers with routed experts (0 where the per-layer detail is not known)."""
        return sum(self.layer_moe)

    @property
    def dense_layers(self) -> int:
        """Layers with a dense MLP: all but :attr:`moe_layers`."""
        return self.layers - self.moe_layers

    @property
    def linear_layers(self) -> int:
        """Gated-delta-net (linear attention) layers: no KV cache, a fixed recurrent state each."""
        return sum(self.layer_linear)

    @property
    def attention_layers(self) -> int:
        """Layers of softmax attention (full, windowed or sparse): the ones that keep a KV cache."""
        return self.layers - self.linear_layers

    @property
    def sparse(self) -> bool:
        """DeepSeek Sparse Attention: an indexer picks ``index_topk`` cached tokens per query."""
        return self.index_topk > 0

    # ----------------------------------------------------------------- parameters by part

    def _linear_attention_linear(self) -> dict[str, int]:
        """One gated-delta-net layer's projections (Qwen3.5 ``linear_attn``): ``in_proj_qkv`` (q and k
        of ``Hk dk`` each, v of ``Hv dv``) with ``in_proj_z`` (the output gate, ``Hv dv``) as
        ``in_proj_qkvz``, ``in_proj_b`` and ``in_proj_a`` (one value per value head each) as
        ``in_proj_ba``, and ``out_proj`` ``Hv dv -> h``."""
        h = self.hidden
        k = self.linear_key_heads * self.linear_key_head_dim
        v = self.linear_value_heads * self.linear_value_head_dim
        return {"in_proj_qkvz": h * (2 * k + 2 * v), "in_proj_ba": h * 2 * self.linear_value_heads,
                "out_proj": v * h}

    @property
    def linear_conv_dim(self) -> int:
        """Channels of a gated-delta-net layer's causal convolution: q, k and v (``2 Hk dk + Hv dv``)."""
        return (2 * self.linear_key_heads * self.linear_key_head_dim
                + self.linear_value_heads * self.linear_value_head_dim)

    def _indexer_linear(self) -> int:
        """One DSA layer's lightning-indexer projections: ``wq_b`` (``q_lora -> H_I d_I``), ``wk``
        (``h -> d_I``) and ``weights_proj`` (``h -> H_I``)."""
        if not self.sparse:
            return 0
        return (self.q_lora_rank * self.index_heads * self.index_head_dim + self.hidden * self.index_head_dim
                + self.hidden * self.index_heads)

    def _attention_linear(self) -> dict[str, int]:
        """One layer's attention projections, by part."""
        h, H = self.hidden, self.heads
        if self.attention == "mla":
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            out = {"kv_a_proj": h * (self.kv_lora_rank + self.qk_rope_head_dim),
                   "kv_b_proj": self.kv_lora_rank * H * (self.qk_nope_head_dim + self.v_head_dim),
                   "o_proj": H * self.v_head_dim * h}
            if self.q_lora_rank:
                out |= {"q_a_proj": h * self.q_lora_rank, "q_b_proj": self.q_lora_rank * H * qk}
            else:
                out["q_proj"] = h * H * qk
            return out
        q, kv = H * self.head_dim, self.kv_heads * self.head_dim
        gate = 2 if self.attn_output_gate else 1  # q_proj's second half is the output gate
        return {"q_proj": h * q * gate, "k_proj": h * kv, "v_proj": h * kv, "o_proj": q * h}

    def _attention_norms(self) -> int:
        if self.attention == "mla":
            # q_a_layernorm, kv_a_layernorm; DSA's indexer k_norm is a LayerNorm (weight and bias)
            return self.q_lora_rank + self.kv_lora_rank + 2 * self.index_head_dim
        if self.qk_norm == "per_head":
            return 2 * self.head_dim
        if self.qk_norm == "per_layer":
            return (self.heads + self.kv_heads) * self.head_dim
        return 0

    def _attention_biases(self) -> int:
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        biases = q + 2 * kv if (self.attention_bias or self.qkv_bias) else 0
        biases += self.hidden if self.attention_bias else 0
        return biases + (self.heads if self.attention_sinks else 0)

    def linear_counts(self) -> dict[str, int]:
        """Parameters of each of :data:`LINEAR_PARTS` over all layers (0 for a part the model lacks)."""
        counts = dict.fromkeys(LINEAR_PARTS, 0)
        for part, n in self._attention_linear().items():
            counts[part] = n * self.attention_layers
        if self.linear_layers:
            for part, n in self._linear_attention_linear().items():
                counts[part] = n * self.linear_layers
        counts["indexer"] = self._indexer_linear() * self.layers
        g = 3 * self.hidden  # gated MLP: gate, up, down
        counts["experts"] = self.moe_layers * self.experts * g * self.moe_intermediate
        counts["shared_experts"] = self.moe_layers * self.shared_experts * g * self.shared_intermediate
        mlp = g if self.gated_mlp else 2 * self.hidden  # a plain MLP (Falcon): up, down
        counts["dense_mlp"] = self.dense_layers * mlp * self.intermediate
        return counts

    def breakdown(self) -> dict[str, int]:
        """Parameters by part, from the per-layer detail: :data:`LINEAR_PARTS` plus ``embed``,
        ``lm_head``, ``norms``, ``biases`` (attention and expert biases, sinks), ``router`` (gate and
        routing bias) and ``conv1d``; MTP modules excluded (:attr:`mtp_params`)."""
        h, E = self.hidden, self.experts
        out = self.linear_counts()
        out["embed"] = self.vocab * h
        out["lm_head"] = 0 if self.tied_embeddings else self.vocab * h
        # a gated-delta-net layer normalizes each value head's output (RMSNormGated of d_v)
        out["norms"] = (self.layers * 2 * h + self.attention_layers * self._attention_norms()
                        + self.linear_layers * self.linear_value_head_dim + h)
        expert_bias = E * (2 * self.moe_intermediate + h) if self.expert_bias else 0
        # a dense MLP's biases: gate and up (or up alone) of I each, down of h
        mlp_biases = ((2 if self.gated_mlp else 1) * self.intermediate + h) if self.mlp_bias else 0
        # a gated-delta-net layer's dt_bias and A_log: one value per value head each
        out["biases"] = (self.attention_layers * self._attention_biases() + self.moe_layers * expert_bias
                         + self.dense_layers * mlp_biases + self.linear_layers * 2 * self.linear_value_heads)
        out["router"] = self.moe_layers * (h * E + (E if self.router_bias else 0)
                                           + (h if self.shared_expert_gate else 0))
        # the depthwise causal convolution over q, k and v (no bias)
        out["conv1d"] = self.linear_layers * self.linear_conv_dim * self.linear_conv_kernel
        return out

    @property
    def mtp_params(self) -> float:
        """Parameters of the multi-token-prediction modules, DeepSeek's layout: each one MoE decoder
        layer, the ``2h x h`` projection and three norms (embedding and head shared, not counted).

        DeepSeek-V3: 11.61e9; its checkpoint also stores copies of the embedding and head in the MTP
        layer (1.85e9) and FP32 block scales (0.04e9): 671.03 + 13.50 = 684.5e9, the published 685B.
        """
        if not self.mtp_layers:
            return 0.0
        h, E = self.hidden, self.experts
        layer = (sum(self._attention_linear().values()) + self._indexer_linear() + 2 * h
                 + self._attention_norms()
                 + self._attention_biases()
                 + E * 3 * h * self.moe_intermediate + self.shared_experts * 3 * h * self.shared_intermediate
                 + (0 if self.moe_layers else 3 * h * self.intermediate)
                 + h * E + (E if self.router_bias else 0))
        return float(self.mtp_layers * (layer + 2 * h * h + 3 * h))

    # ----------------------------------------------------------------- sizes

    @property
    def embedding_params(self) -> float:
        """One vocab x hidden table (the input embedding, or the LM head)."""
        return float(self.vocab * self.hidden)

    @property
    def matmul_params(self) -> float:
        """Weights a pass streams: all but the untied input table (only B rows are gathered)."""
        return self.params - (0.0 if self.tied_embeddings else self.embedding_params)

    @property
    def active_matmul_params(self) -> float:
        """Weights one token multiplies by: 2 FLOPs each per token (the active parameters without the
        untied input table, from which a token only gathers a row)."""
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

    def weight_bytes(self, dtype: str | None = None) -> float:
        """Bytes of the weights (MTP modules excluded).

        Without ``dtype``: the checkpoint's, ``params x weight_bytes_per_param``.  With one of
        :data:`CHECKPOINT_DTYPES` (any case), that dtype's bytes per value
        (:data:`~servesim.hardware.dtypes.BYTES_PER_VALUE`, scales included) for the linear layers
        and bf16 for the rest: from the per-layer breakdown where it is known (the routed experts and
        the other ``quantized_parts`` in ``dtype``; embeddings, LM head, norms, biases and router in
        bf16), else ``tables x 2 + (params - tables) x bytes(dtype)``, tables = ``vocab x hidden``
        once if tied to the LM head, else twice.
        """
        if dtype is None:
            return self.params * self.weight_bytes_per_param
        key = dtype.strip().lower() if isinstance(dtype, str) else ""
        if key not in CHECKPOINT_DTYPES:
            raise ParameterError("dtype", dtype, f"one of {', '.join(repr(d) for d in CHECKPOINT_DTYPES)}")
        if not self.layer_moe:
            tables = float(self.embedding_params * (1 if self.tied_embeddings else 2))
            return tables * BYTES_PER_VALUE["bf16"] + (self.params - tables) * BYTES_PER_VALUE[key]
        quantized = {"experts", *(self.quantized_parts or ())}
        total = 0.0
        for part, n in self.breakdown().items():
            total += n * (BYTES_PER_VALUE[key] if part in quantized else BYTES_PER_VALUE["bf16"])
        return total

    @property
    def quant_scope(self) -> str:
        """``"all_linear"``, ``"experts"`` (only the routed experts) or ``"partial"`` (others)."""
        present = [p for p, n in self.linear_counts().items() if n]
        parts = set(self.quantized_parts or ())
        if parts >= set(present):
            return "all_linear"
        return "experts" if parts == {"experts"} else "partial"

    def weight_bytes_streamed(self, tokens: float) -> float:
        """Weight bytes a pass of ``tokens`` tokens reads from HBM (all GPUs together).

        Dense: every matmul weight once.  MoE: the shared part plus the experts the tokens touch;
        with uniform independent top-k routing an expert is missed by all T tokens with probability
        ``(1 - k/E)^T``, so ``E (1 - (1 - k/E)^T)`` experts per layer are read (k at T = 1, all E as
        T grows).
        """
        t = check_real("tokens", tokens, lo=0.0)
        if self.expert_params == 0.0:
            return self.matmul_params * self.weight_bytes_per_param
        miss: float = (1.0 - self.experts_per_token / self.experts) ** t
        touched = self.experts * (1.0 - miss)
        shared = self.matmul_params - self.routed_params
        return (shared + touched * self.expert_params) * self.weight_bytes_per_param

    # ----------------------------------------------------------------- KV cache and state

    def kv_bytes_per_token(self, kv_dtype_bytes: float | None = None, context: int | None = None) -> float:
        """KV-cache bytes of one token over all layers (see the module doc).

        ``kv_dtype_bytes`` is the bytes of one cached value (default ``bytes_per_value``).  Without
        ``context`` every attention layer holds the token; with it, the average per token over a
        sequence of ``context`` tokens, a windowed layer holding at most its window.
        """
        b = (self.bytes_per_value if kv_dtype_bytes is None
             else check_real("kv_dtype_bytes", kv_dtype_bytes, lo=0.0, lo_open=True))
        n = None if context is None else check_int("context", context, lo=1)
        if self.attention == "mla":
            per_layer = float(self.kv_lora_rank + self.qk_rope_head_dim)
        else:
            per_layer = 2.0 * self.kv_heads * self.head_dim
        if not (self.layer_windows or self.layer_linear):
            return per_layer * float(self.layers) * b + self.indexer_bytes_per_token
        held = 0.0
        for i, w in enumerate(self.layer_windows or (0,) * self.layers):
            if self.layer_linear and self.layer_linear[i]:
                continue  # a gated-delta-net layer keeps a fixed state, not a KV cache
            held += 1.0 if (w == 0 or n is None or n <= w) else w / n
        return per_layer * held * b + self.indexer_bytes_per_token

    @property
    def indexer_bytes_per_token(self) -> float:
        """DSA's indexer cache of one token over all layers: its key of ``index_head_dim`` values in
        FP8 and one FP32 scale per 128 of them, whatever the KV dtype (vLLM
        ``model_executor/models/deepseek_v2.py`` ``DeepseekV32IndexerCache``: ``head_dim + head_dim //
        quant_block_size * 4`` bytes, block 128; SGLang's ``NSATokenToKVPool`` index_k buffer the
        same).  0 for dense attention."""
        if not self.sparse:
            return 0.0
        return float(self.layers * (self.index_head_dim + self.index_head_dim // 128 * 4))

    def kv_shards(self, tp: int) -> int:
        """Over how many of the tp GPUs the KV cache is split (the rest replicate it).

        Tensor parallelism splits heads: with kv_heads >= tp each GPU holds kv_heads / tp of them;
        with fewer, each KV head is replicated.  MLA's latent is shared by all heads, so every GPU
        holds all of it.
        """
        if self.attention == "mla":
            return 1
        return min(tp, self.kv_heads)

    def state_bytes_per_request(self, tp: int = 1, ssm_state_bytes: int | None = None) -> float:
        """The fixed recurrent state one request holds on each of ``tp`` tensor-parallel GPUs, over all
        gated-delta-net layers: the causal convolution's last ``K - 1`` inputs of its ``conv_dim / tp``
        channels in BF16 and the ``Hv / tp`` heads' ``d_v x d_k`` state in ``mamba_ssm_dtype`` (vLLM
        ``layers/mamba/mamba_utils.py`` ``MambaStateShapeCalculator.gated_delta_net_state_shape`` and
        ``MambaStateDtypeCalculator.gated_delta_net_state_dtype``; Qwen3.5's config asks float32).
        ``ssm_state_bytes`` overrides the state's bytes per value (an engine that keeps it in the
        model's dtype).  It does not grow with the request's length."""
        t = check_int("tp", tp, lo=1)
        s = self.ssm_state_bytes if ssm_state_bytes is None else check_int("ssm_state_bytes", ssm_state_bytes,
                                                                         lo=1, hi=8)
        if not self.linear_layers:
            return 0.0
        conv = self.linear_conv_dim / t * (self.linear_conv_kernel - 1) * 2.0
        ssm = (self.linear_value_heads / t * self.linear_value_head_dim * self.linear_key_head_dim
               * s)
        return float(self.linear_layers * (conv + ssm))

    def attention_flops_per_position(self, *, absorbed: bool = True) -> float:
        """FLOPs one query token spends on one cached position, over all layers.

        MHA/GQA/MQA: ``QK^T`` is 2 heads head_dim, ``AV`` the same: ``4 layers heads head_dim``.
        MLA in its absorbed form (decode; the up-projections folded into the query and output)
        scores against the 576-wide latent+RoPE key and sums 512-wide latent values: ``2 layers heads
        (2 rank + rope)``; in the naive form (prefill) it works with per-head keys of nope + rope and
        values of v_head_dim: ``2 layers heads (nope + rope + v)``.
        """
        if self.attention != "mla":
            return 4.0 * self.layers * self.heads * self.head_dim
        if absorbed:
            width = 2 * self.kv_lora_rank + self.qk_rope_head_dim
        else:
            width = self.qk_nope_head_dim + self.qk_rope_head_dim + self.v_head_dim
        return 2.0 * self.layers * self.heads * width

