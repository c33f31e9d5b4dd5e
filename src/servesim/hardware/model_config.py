"""The one reader of a Hugging Face ``config.json``: every family servesim prices, dense or per layer.

:func:`read_config` builds a :class:`~servesim.hardware.shape.ModelShape` from a ``config.json``
(and the ``hf_quant_config.json`` beside it, where a ModelOpt checkpoint has one) through one family
table: the first ``architectures`` class the table names, else ``model_type``, picks the entry whose
reader gives the shape's fields.  Dense decoders (``llama``, ``mistral``, ``qwen2``, ``qwen3``; a config
naming neither field and no experts is read as ``llama``) keep no per-layer detail: their counts are
:func:`dense_params`'.  Mixture-of-experts, MLA and hybrid families fill in the per-layer detail
(``layer_moe``, ``layer_windows``, ``layer_linear``) and the checkpoint's quantization.
:func:`find_architecture` looks up the configs shipped in ``servesim/data/model_configs``
(copied from ai-dynamo/aiconfigurator, see the ``NOTICE.md`` there) by Hugging Face id,
alias or short name.  An unsupported family is refused naming every supported one
(:func:`supported_families`).

**Dense families** (``LlamaForCausalLM``, ``MistralForCausalLM``, ``Qwen2ForCausalLM``,
``Qwen3ForCausalLM``): required ``hidden_size``, ``num_attention_heads``, ``num_hidden_layers``,
``intermediate_size``, ``vocab_size``; optional ``num_key_value_heads`` (default: the heads),
``head_dim`` (default ``hidden_size / num_attention_heads``), ``tie_word_embeddings``,
``attention_bias`` (Q, K, V and O biases), ``mlp_bias``; Qwen2 always has Q, K, V biases, Qwen3
per-head Q/K RMSNorms.  Experts or an MLA ``kv_lora_rank`` in a dense family's config are refused.

**Notation.**  ``h`` width (``hidden_size``), ``V`` vocabulary, ``H`` query heads, ``G`` KV
heads of width ``d``, ``E`` routed experts of width ``I`` (``k`` per token), ``S`` shared
experts of width ``I_s``, dense-layer MLP width ``I_d``.  Every MLP is gated (gate, up, down:
``3 h I``).  Every layer has two RMSNorms (``2 h``); the model a final norm (``h``), the
input embedding (``V h``) and the LM head (``V h``, unless tied).

**Families** (one line each: the attention, the FFN, the config fields read):

* ``deepseek_v3`` (DeepSeek-V3 / R1 / V3.1, Kimi-K2; ``KimiK25`` nests it in
  ``text_config``): MLA, per layer ``h r_q + r_q + r_q H (n + p)`` (q_a, its norm, q_b;
  ``h H (n + p)`` when ``q_lora_rank`` is null) ``+ h (r_kv + p) + r_kv`` (kv_a with the
  shared RoPE key, its norm) ``+ r_kv H (n + v) + H v h`` (kv_b, o); the first
  ``first_k_dense_replace`` layers dense (``3 h I_d``), then every ``moe_layer_freq``-th
  layer MoE: ``E 3 h I + S 3 h I`` + router ``h E`` + ``E`` correction biases.  Reads
  ``q_lora_rank`` (r_q), ``kv_lora_rank`` (r_kv), ``qk_nope_head_dim`` (n),
  ``qk_rope_head_dim`` (p), ``v_head_dim`` (v), ``n_routed_experts``, ``n_shared_experts``,
  ``moe_intermediate_size``, ``intermediate_size``, ``num_nextn_predict_layers``.
* ``qwen3_moe``: GQA ``2 h H d + 2 h G d`` plus per-head Q/K norms ``2 d``; a layer is MoE
  unless listed in ``mlp_only_layers`` or off the ``decoder_sparse_step``: ``E 3 h I + h E``.
  Reads ``num_experts``, ``moe_intermediate_size``, ``head_dim``, ``use_sliding_window``.
* ``gpt_oss``: GQA with biases (``H d + 2 G d + h``) and one learned sink logit per head
  (``H``); ``layer_types`` alternates ``sliding_window`` (128) and full attention; MoE every
  layer: ``E (3 h I + 2 I + h)`` (gate_up and down with biases) + router ``h E + E``.
  Reads ``num_local_experts``, ``num_experts_per_tok``, ``intermediate_size`` (an expert's).
* ``minimax_m2``: GQA with Q/K RMSNorms over all heads (``qk_norm_type`` ``per_layer``:
  ``H d + G d``; ``per_head``: ``2 d``), full attention in every layer; MoE every layer
  ``E 3 h I + h E + E`` (routing bias); ``shared_intermediate_size`` 0 = no shared expert.
  MTP: ``num_mtp_modules x mtp_transformer_layers`` when ``use_mtp``.
* ``mixtral``: GQA ``2 h H d + 2 h G d``; MoE every layer ``E 3 h I + h E``
  (``num_local_experts``, ``intermediate_size``); ``sliding_window`` (null today) on every layer.
* ``llama4`` (``text_config``): GQA ``2 h H d + 2 h G d`` (its QK norm has no weights);
  MoE layers ``moe_layers`` or every ``interleave_moe_layer_step``-th (counting from
  ``step - 1``): ``E 3 h I + 1 x 3 h I + h E`` (a shared expert of ``intermediate_size``),
  the others dense with ``intermediate_size_mlp``.  Attention: ``layer_types`` or, by
  default, ``no_rope_layers`` (every 4th layer is a NoPE layer with full attention, the
  other three RoPE layers attend within chunks of ``attention_chunk_size`` = 8192 tokens).

* ``qwen3_5_moe`` (Qwen3.5-397B-A17B, -122B-A10B, -35B-A3B; ``text_config``) and ``qwen3_5`` (the dense
  Qwen3.5-27B, no experts): ``layer_types`` of ``linear_attention`` (a gated delta net, ``layer_linear``)
  and ``full_attention`` (every ``full_attention_interval``-th).  Full-attention layers: Qwen3's GQA
  with per-head Q/K norms, ``q_proj`` doubled by its output gate (``attn_output_gate``: ``2 h H d``).
  Gated-delta-net layers: ``in_proj_qkvz`` ``h (2 Hk dk + 2 Hv dv)``, ``in_proj_ba`` ``h 2 Hv``,
  ``out_proj`` ``Hv dv h``, the causal convolution ``conv1d`` ``(2 Hk dk + Hv dv) K``, ``dt_bias`` and
  ``A_log`` (``Hv`` each), a gated RMSNorm of ``dv``.  MoE layers: ``E 3 h I + h E``, one shared expert
  of ``shared_expert_intermediate_size`` and its gate (``h``).  Reads ``linear_num_key_heads`` (Hk),
  ``linear_num_value_heads`` (Hv), ``linear_key_head_dim``, ``linear_value_head_dim``,
  ``linear_conv_kernel_dim`` (K), ``mamba_ssm_dtype``, ``mtp_num_hidden_layers``.  The vision tower
  is not modelled (0.46e9 parameters in each).
* DeepSeek Sparse Attention (``DeepseekV32ForCausalLM``, ``GlmMoeDsaForCausalLM``; family
  ``deepseek_v3``): MLA plus the lightning indexer's ``wq_b`` ``r_q H_I d_I``, ``wk`` ``h d_I`` and
  ``weights_proj`` ``h H_I`` (part ``indexer``) and its LayerNorm ``2 d_I``.  Reads ``index_n_heads``
  (H_I), ``index_head_dim`` (d_I), ``index_topk``.  DeepSeek-V4 (``DeepseekV4ForCausalLM``) is refused
  in one line naming why.

**Parameters** are the sum of :meth:`~servesim.hardware.shape.ModelShape.breakdown` (MTP modules
excluded; vision towers are not modelled); ``active_params`` counts the routed experts scaled by
``k / E``, every other weight once, the input embedding included (Mistral, Meta and Qwen publish
theirs so; ``active_matmul_params`` leaves the input table out, as DeepSeek, OpenAI, Moonshot and
MiniMax publish theirs).  The KV cache per token, the recurrent state of a gated-delta-net layer and
the weight bytes per dtype are :class:`~servesim.hardware.shape.ModelShape`'s.

**Name and id of a file** (:func:`_identity`, every family): the id a shipped file's name gives
(``org--repo_config.json``, named by its repository in lower case), else a valid ``_name_or_path``,
named by the directory holding ``config.json`` or the file's stem.  ``torch_dtype`` (or ``dtype``)
as written; ``max_position_embeddings`` the context length.

**Names** (:func:`find_architecture`, case-insensitive): the shipped configs' Hugging Face ids
(:func:`shipped_ids`); re-releases of the same shape (``deepseek-ai/DeepSeek-R1-0528``,
``DeepSeek-V3-0324``, ``DeepSeek-V3.1`` / ``-Terminus`` / ``-Base``: V3's shape and block FP8;
``Kimi-K2-Instruct-0905``, ``Kimi-K2-Base``, ``Kimi-K2-Thinking`` (int4 experts, as K2.5); Qwen3's
``-Instruct-2507`` / ``-Thinking-2507`` and their ``-FP8`` (262,144 tokens of context);
``Qwen3-30B-A3B-FP8``: block FP8 of every linear layer, as Qwen's FP8 releases;
``Mixtral-8x7B-Instruct-v0.1``; the Llama-4 base models; ``MiniMax-M2`` / ``M2.1``); each id's
repository name (``deepseek-r1``, ``gpt-oss-120b``, ``qwen3-235b-a22b``, ``kimi-k2.5``) and a few
short names (``kimi-k2``, ``mixtral-8x7b``, ``llama-4-scout``, ``llama-4-maverick``).

**Checkpoint dtype** (``checkpoint_dtype``, per-layer families; a dense family's stays bf16) from
``quantization_config`` (in ``text_config`` or the top level) or ``hf_quant_config.json``: ``fp8`` with a
``weight_block_size`` -> ``fp8_block`` (without -> ``fp8``); ``mxfp4`` -> ``mxfp4``;
``compressed-tensors`` groups of 4-bit integers -> ``int4`` (4-bit floats -> ``fp4``,
8-bit floats -> ``fp8`` / ``fp8_block``); ModelOpt ``NVFP4`` -> ``fp4``, ``FP8`` -> ``fp8``;
no quantization -> ``bf16``.  ``quantized_parts`` lists the linear layers
(:data:`~servesim.hardware.shape.LINEAR_PARTS`) the checkpoint stores in that dtype: those its
``modules_to_not_convert`` / ``ignore`` / ``exclude_modules`` lists (names, ``*`` globs,
``re:`` regular expressions) leave out in no decoder layer, and, for compressed-tensors,
that its ``targets`` select.  Every linear layer of a bf16 checkpoint is listed.

Standard library only; nothing prints.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from servesim._checks import InputError, ParameterError
from servesim._textfile import path_kind, shown
from servesim.hardware.hf_config import QUOTED, Fields, load_json
from servesim.hardware.shape import LINEAR_PARTS, ModelShape, attention_kind

__all__ = [
    "DENSE_DEFAULT",
    "FP4_RELEASE_PARTS",
    "MOE_CONFIG_FIELDS",
    "dense_params",
    "find_architecture",
    "read_config",
    "shipped_ids",
    "supported_families",
]

_MAX_PATTERN = 1000


# --------------------------------------------------------------------------- families

@dataclass(frozen=True)
class _Family:
    """One entry of the family table: the reader of its text model's fields, the ``architectures``
    class names and ``model_type`` values that name it, and whether the shape it reads holds the
    per-layer detail (``family`` set, quantization read) or is a dense decoder's counts."""

    read: Callable[[Fields, int], dict[str, Any]]
    classes: tuple[str, ...]
    model_types: tuple[str, ...]
    per_layer: bool = True


DENSE_DEFAULT = "llama"
"""The family of a config that names neither ``architectures`` nor ``model_type`` and declares no
experts or latent KV cache: a Llama-style dense decoder."""
MOE_CONFIG_FIELDS: tuple[str, ...] = ("num_experts", "num_local_experts", "n_routed_experts")
"""``config.json`` fields that mark a mixture of experts (Qwen-MoE, Mixtral, DeepSeek)."""

_NESTED = ("KimiK25ForConditionalGeneration", "Llama4ForConditionalGeneration", "kimi_k25", "llama4",
           "Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe", "Qwen3_5ForConditionalGeneration", "qwen3_5")

# Architectures read but refused, each with the one line that says why.
_REFUSED: Mapping[str, str] = {
    "deepseek_v4": (
        "DeepSeek-V4 is not priced: its layers mix compressed sparse attention (compress_ratios 4) and "
        "heavily compressed attention (128) behind a sliding window, with manifold hyper-connections "
        "(hc_mult 4), a grouped low-rank output projection (o_groups, o_lora_rank) and hash-routed MoE "
        "layers; the dsv4_* tables time only the attention modules, of SGLang and vLLM, and not the "
        "hyper-connection mixing, so no step of it can be priced from measured kernels"),
}
_REFUSED_IDS: Mapping[str, str] = {
    **{k: "deepseek_v4" for k in ("deepseek-ai/deepseek-v4-flash", "deepseek-ai/deepseek-v4-pro",
                                  "deepseek-v4-flash", "deepseek-v4-pro")},
}
"""Names :func:`find_architecture` refuses with the architecture's one line (their configs are not
shipped)."""
_REFUSED_ARCHS: Mapping[str, str] = {"DeepseekV4ForCausalLM": "deepseek_v4"}

# Module names (layer i) of each linear part, as the checkpoints name their tensors, to match
# the quantization configs' exclusion lists against.
_DS_MLP = ("gate_proj", "up_proj", "down_proj")
_MODULES: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "deepseek_v3": {
        "q_proj": ("self_attn.q_proj",), "q_a_proj": ("self_attn.q_a_proj",),
        "q_b_proj": ("self_attn.q_b_proj",),
        "kv_a_proj": ("self_attn.kv_a_proj_with_mqa",), "kv_b_proj": ("self_attn.kv_b_proj",),
        "o_proj": ("self_attn.o_proj",),
        "experts": tuple(f"mlp.experts.0.{p}" for p in _DS_MLP),
        "shared_experts": tuple(f"mlp.shared_experts.{p}" for p in _DS_MLP),
        "dense_mlp": tuple(f"mlp.{p}" for p in _DS_MLP),
        "indexer": tuple(f"self_attn.indexer.{p}" for p in ("wq_b", "wk", "weights_proj")),
    },
    "qwen3_5_moe": {
        **{p: (f"self_attn.{p}",) for p in ("q_proj", "k_proj", "v_proj", "o_proj")},
        "experts": tuple(f"mlp.experts.0.{p}" for p in _DS_MLP),
        "shared_experts": tuple(f"mlp.shared_expert.{p}" for p in _DS_MLP),
        "in_proj_qkvz": ("linear_attn.in_proj_qkv", "linear_attn.in_proj_z"),
        "in_proj_ba": ("linear_attn.in_proj_b", "linear_attn.in_proj_a"),
        "out_proj": ("linear_attn.out_proj",),
    },
    "qwen3_5": {
        **{p: (f"self_attn.{p}",) for p in ("q_proj", "k_proj", "v_proj", "o_proj")},
        "dense_mlp": tuple(f"mlp.{p}" for p in _DS_MLP),
        "in_proj_qkvz": ("linear_attn.in_proj_qkv", "linear_attn.in_proj_z"),
        "in_proj_ba": ("linear_attn.in_proj_b", "linear_attn.in_proj_a"),
        "out_proj": ("linear_attn.out_proj",),
    },
    "qwen3_moe": {
        **{p: (f"self_attn.{p}",) for p in ("q_proj", "k_proj", "v_proj", "o_proj")},
        "experts": tuple(f"mlp.experts.0.{p}" for p in _DS_MLP),
        "dense_mlp": tuple(f"mlp.{p}" for p in _DS_MLP),
    },
    "gpt_oss": {
        **{p: (f"self_attn.{p}",) for p in ("q_proj", "k_proj", "v_proj", "o_proj")},
        "experts": ("mlp.experts.gate_up_proj", "mlp.experts.down_proj"),
    },
    "minimax_m2": {
        **{p: (f"self_attn.{p}",) for p in ("q_proj", "k_proj", "v_proj", "o_proj")},
        "experts": tuple(f"block_sparse_moe.experts.0.{w}" for w in ("w1", "w2", "w3")),
        "shared_experts": tuple(f"block_sparse_moe.shared_experts.{p}" for p in _DS_MLP),
    },
    "mixtral": {
        **{p: (f"self_attn.{p}",) for p in ("q_proj", "k_proj", "v_proj", "o_proj")},
        "experts": tuple(f"block_sparse_moe.experts.0.{w}" for w in ("w1", "w2", "w3")),
    },
    "llama4": {
        **{p: (f"self_attn.{p}",) for p in ("q_proj", "k_proj", "v_proj", "o_proj")},
        "experts": ("feed_forward.experts.gate_up_proj", "feed_forward.experts.down_proj"),
        "shared_experts": tuple(f"feed_forward.shared_expert.{p}" for p in _DS_MLP),
        "dense_mlp": tuple(f"feed_forward.{p}" for p in _DS_MLP),
    },
}
_PREFIX: Mapping[str, str] = {
    "llama4": "language_model.model.layers", "kimi_k25": "language_model.model.layers",
    "qwen3_5_moe": "model.language_model.layers", "qwen3_5": "model.language_model.layers",
}


def supported_families() -> str:
    """Every family :func:`read_config` reads, each with the class names that name it (for messages)."""
    return "; ".join(f"{name} ({', '.join(fam.classes)})" for name, fam in _FAMILIES.items())


def _declares_moe(f: Fields) -> bool:
    """Whether a config's fields declare routed experts or a latent (MLA) KV cache."""
    return f.has("kv_lora_rank") or any(f.data.get(k) not in (None, 0, 1) for k in MOE_CONFIG_FIELDS)


def _family(where: str, top: Fields) -> tuple[str, Fields]:
    """(family, the fields of the text model) of a config: its first ``architectures`` class the
    table names, else its ``model_type``; neither field and no experts: :data:`DENSE_DEFAULT`."""
    archs = top.list_("architectures", str, "class names")
    model_type = top.str_("model_type")
    refused = next((_REFUSED_ARCHS[a] for a in archs if a in _REFUSED_ARCHS), None)
    refused = refused or (model_type if model_type in _REFUSED else None)
    if refused is not None:
        raise InputError(f"{where}: {_REFUSED[refused]}")
    by_class = {c: name for name, fam in _FAMILIES.items() for c in fam.classes}
    by_type = {t: name for name, fam in _FAMILIES.items() for t in fam.model_types}
    family = next((by_class[a] for a in archs if a in by_class), None) or by_type.get(model_type)
    if family is None and not archs and not model_type and not _declares_moe(top):
        family = DENSE_DEFAULT
    if family is None:
        if not archs and not model_type:
            raise InputError(f"{where}: missing required field 'architectures' (or 'model_type'): the model "
                             f"class; supported families: {supported_families()}")
        field = "architectures" if archs else "model_type"
        value = archs if archs else model_type
        raise InputError(
            f"{where}: field {field!r} = {shown(value, QUOTED)} (model_type {model_type!r}) is not a "
            f"supported family: supported families: {supported_families()}")
    nested = any(a in _NESTED for a in archs) or model_type in _NESTED
    if nested or (top.has("text_config") and not top.has("hidden_size")):
        return family, top.child("text_config")
    return family, top


def _windows_from_types(f: Fields, layers: int, window: int, chunk: int) -> tuple[int, ...]:
    kinds = {"full_attention": 0, "sliding_attention": window, "chunked_attention": chunk}
    types = f.list_("layer_types", str, "attention kinds", length=layers)
    out = []
    for t in types:
        if t not in kinds:
            raise f.bad("layer_types", types, f"a list of {', '.join(repr(k) for k in kinds)}")
        if kinds[t] == 0 and t != "full_attention":
            need = "sliding_window" if t == "sliding_attention" else "attention_chunk_size"
            raise InputError(f"{f.where}: field {f.name('layer_types')!r} has {t!r} layers but "
                             f"{f.name(need)!r} is missing or 0")
        out.append(kinds[t])
    return tuple(out)


def _dense_width(f: Fields, layer_moe: tuple[bool, ...], key: str) -> int:
    return 0 if all(layer_moe) else f.int_(key, "the dense layers' MLP width")


def _common_gqa(f: Fields) -> dict[str, Any]:
    hidden = f.int_("hidden_size", "the model width")
    heads = f.int_("num_attention_heads", "query heads")
    kv = f.int_("num_key_value_heads", "KV heads", default=heads)
    if heads % kv:
        raise f.bad("num_key_value_heads", kv, f"a divisor of num_attention_heads ({heads})")
    if not f.has("head_dim") and hidden % heads:
        raise InputError(f"{f.where}: missing required field {f.name('head_dim')!r} (hidden_size "
                         f"{hidden} is not a multiple of num_attention_heads {heads})")
    return {"hidden": hidden, "heads": heads, "kv_heads": kv, "attention": attention_kind(heads, kv),
            "head_dim": f.int_("head_dim", "width of one head", default=hidden // heads),
            "attention_bias": f.bool_("attention_bias", False)}


def _moe(f: Fields, experts_key: str, width_key: str) -> dict[str, int]:
    experts = f.int_(experts_key, "routed experts")
    k_key = "experts_per_token" if not f.has("num_experts_per_tok") and f.has("experts_per_token") else (
        "num_experts_per_tok")
    k = f.int_(k_key, "experts per token")
    if k > experts:
        raise f.bad(k_key, k, f"at most {f.name(experts_key)} ({experts})")
    return {"experts": experts, "experts_per_token": k,
            "moe_intermediate": f.int_(width_key, "one routed expert's MLP width")}


def _uniform_window(f: Fields, layers: int) -> dict[str, Any]:
    window = f.int_("sliding_window", "attention window", default=0, lo=0)
    if f.has("layer_types"):
        return {"sliding_window": window, "layer_windows": _windows_from_types(f, layers, window, 0)}
    return {"sliding_window": window, "layer_windows": (window,) * layers}


def _deepseek(f: Fields, layers: int) -> dict[str, Any]:
    hidden = f.int_("hidden_size", "the model width")
    heads = f.int_("num_attention_heads", "query heads")
    nope = f.int_("qk_nope_head_dim", "per-head query/key width without RoPE")
    rope = f.int_("qk_rope_head_dim", "per-head RoPE query/key width")
    first_dense = f.int_("first_k_dense_replace", "leading dense layers", default=0, lo=0)
    if first_dense > layers:
        raise f.bad("first_k_dense_replace", first_dense, f"at most num_hidden_layers ({layers})")
    freq = f.int_("moe_layer_freq", "MoE layer period", default=1)
    layer_moe = tuple(i >= first_dense and i % freq == 0 for i in range(layers))
    out: dict[str, Any] = {
        "hidden": hidden, "heads": heads, "kv_heads": 1, "head_dim": nope + rope, "attention": "mla",
        "q_lora_rank": f.int_("q_lora_rank", "query compression rank", default=0, lo=0),
        "kv_lora_rank": f.int_("kv_lora_rank", "KV latent rank"),
        "qk_nope_head_dim": nope, "qk_rope_head_dim": rope,
        "v_head_dim": f.int_("v_head_dim", "per-head value width"),
        "layer_windows": (0,) * layers, "layer_moe": layer_moe,
        **_moe(f, "n_routed_experts", "moe_intermediate_size"),
        "intermediate": _dense_width(f, layer_moe, "intermediate_size"),
        "router_bias": f.str_("topk_method") == "noaux_tc",  # e_score_correction_bias
        "mtp_layers": f.int_("num_nextn_predict_layers", "MTP modules", default=0, lo=0),
    }
    if f.has("index_topk"):  # DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5)
        out |= {"index_topk": f.int_("index_topk", "tokens the indexer keeps per query"),
                "index_heads": f.int_("index_n_heads", "indexer heads"),
                "index_head_dim": f.int_("index_head_dim", "indexer head width")}
    shared = f.int_("n_shared_experts", "shared experts", default=0, lo=0)
    out |= {"shared_experts": shared, "shared_intermediate": out["moe_intermediate"] if shared else 0}
    return out


def _qwen3_moe(f: Fields, layers: int) -> dict[str, Any]:
    out = _common_gqa(f) | _moe(f, "num_experts", "moe_intermediate_size") | {"qk_norm": "per_head"}
    step = f.int_("decoder_sparse_step", "MoE layer period", default=1)
    dense = set(f.list_("mlp_only_layers", int, "layer indices"))
    layer_moe = tuple(i not in dense and (i + 1) % step == 0 for i in range(layers))
    window = f.int_("sliding_window", "attention window", default=0, lo=0)
    if f.has("layer_types"):
        windows = _windows_from_types(f, layers, window, 0)
    elif f.bool_("use_sliding_window", False) and window:
        first = f.int_("max_window_layers", "first sliding-window layer", default=0, lo=0)
        windows = tuple(window if i >= first else 0 for i in range(layers))
    else:
        window, windows = 0, (0,) * layers
    out |= {"layer_moe": layer_moe, "sliding_window": window, "layer_windows": windows,
            "intermediate": _dense_width(f, layer_moe, "intermediate_size")}
    return out


def _gpt_oss(f: Fields, layers: int) -> dict[str, Any]:
    out = _common_gqa(f) | _moe(f, "num_local_experts", "intermediate_size")
    out["attention_bias"] = f.bool_("attention_bias", True)
    window = f.int_("sliding_window", "attention window", default=0, lo=0)
    if f.has("layer_types"):
        windows = _windows_from_types(f, layers, window, 0)
    else:  # transformers' default: sliding, full, sliding, ...
        windows = tuple(window if i % 2 == 0 else 0 for i in range(layers))
    return out | {"layer_moe": (True,) * layers, "sliding_window": window, "layer_windows": windows,
                  "attention_sinks": True, "router_bias": True, "expert_bias": True}


def _minimax_m2(f: Fields, layers: int) -> dict[str, Any]:
    out = _common_gqa(f) | _moe(f, "num_local_experts", "intermediate_size") | _uniform_window(f, layers)
    shared = f.int_("shared_intermediate_size", "shared expert width", default=0, lo=0)
    qk = ""
    if f.bool_("use_qk_norm", False):
        qk = f.str_("qk_norm_type", "per_layer")
        if qk not in ("per_layer", "per_head"):
            raise f.bad("qk_norm_type", qk, "'per_layer' or 'per_head'")
    mtp = 0
    if f.bool_("use_mtp", False):
        mtp = (f.int_("num_mtp_modules", "MTP modules", default=1, lo=0)
               * f.int_("mtp_transformer_layers", "layers per MTP module", default=1, lo=0))
    return out | {"layer_moe": (True,) * layers, "shared_experts": 1 if shared else 0,
                  "shared_intermediate": shared, "qk_norm": qk,
                  "router_bias": f.bool_("use_routing_bias", False), "mtp_layers": mtp}


def _mixtral(f: Fields, layers: int) -> dict[str, Any]:
    return (_common_gqa(f) | _moe(f, "num_local_experts", "intermediate_size") | _uniform_window(f, layers)
            | {"layer_moe": (True,) * layers})


def _llama4(f: Fields, layers: int) -> dict[str, Any]:
    out = _common_gqa(f) | _moe(f, "num_local_experts", "intermediate_size")
    if f.has("moe_layers"):
        chosen = f.list_("moe_layers", int, "layer indices")
        if any(not 0 <= i < layers for i in chosen):
            raise f.bad("moe_layers", chosen, f"layer indices in [0, {layers - 1}]")
        layer_moe = tuple(i in set(chosen) for i in range(layers))
    else:
        step = f.int_("interleave_moe_layer_step", "MoE layer period", default=1)
        layer_moe = tuple((i - (step - 1)) % step == 0 and i >= step - 1 for i in range(layers))
    chunk = f.int_("attention_chunk_size", "chunked-attention length", default=0, lo=0)
    if f.has("layer_types"):
        windows = _windows_from_types(f, layers, 0, chunk)
    else:
        rope = f.list_("no_rope_layers", int, "0 (NoPE, full attention) or 1 (RoPE, chunked)", length=None)
        if rope and len(rope) != layers:
            raise f.bad("no_rope_layers", rope, f"one 0 or 1 per layer ({layers})")
        rope = rope or [int((i + 1) % 4 != 0) for i in range(layers)]
        windows = tuple(chunk if r else 0 for r in rope)
    return out | {
        "layer_moe": layer_moe, "attention_chunk": chunk, "layer_windows": windows,
        "shared_experts": 1, "shared_intermediate": out["moe_intermediate"],
        "intermediate": _dense_width(f, layer_moe, "intermediate_size_mlp"),
    }


_SSM_DTYPE_BYTES: Mapping[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2}


def _linear_attention(f: Fields, layers: int) -> dict[str, Any]:
    """The hybrid layout of Qwen3.5 (and Qwen3-Next): ``layer_types`` of ``linear_attention`` (gated
    delta net) and ``full_attention``, else every ``full_attention_interval``-th layer full; the
    gated-delta-net heads, widths, convolution and recurrent-state dtype."""
    if f.has("layer_types"):
        types = f.list_("layer_types", str, "attention kinds", length=layers)
        if any(t not in ("linear_attention", "full_attention") for t in types):
            raise f.bad("layer_types", types, "a list of 'linear_attention' and 'full_attention'")
        linear = tuple(t == "linear_attention" for t in types)
    else:
        every = f.int_("full_attention_interval", "full-attention layer period")
        linear = tuple((i + 1) % every != 0 for i in range(layers))
    ssm = f.str_("mamba_ssm_dtype", "float32")
    if ssm not in _SSM_DTYPE_BYTES:
        raise f.bad("mamba_ssm_dtype", ssm, f"one of {', '.join(_SSM_DTYPE_BYTES)}")
    return {"layer_linear": linear,
            "linear_key_heads": f.int_("linear_num_key_heads", "gated-delta-net key heads"),
            "linear_value_heads": f.int_("linear_num_value_heads", "gated-delta-net value heads"),
            "linear_key_head_dim": f.int_("linear_key_head_dim", "gated-delta-net key width"),
            "linear_value_head_dim": f.int_("linear_value_head_dim", "gated-delta-net value width"),
            "linear_conv_kernel": f.int_("linear_conv_kernel_dim", "causal convolution width"),
            "ssm_state_bytes": _SSM_DTYPE_BYTES[ssm]}


def _qwen3_5_moe(f: Fields, layers: int) -> dict[str, Any]:
    """Qwen3.5 MoE: Qwen3-MoE's GQA with per-head Q/K norms and an output gate in ``q_proj``
    (``attn_output_gate``) on the full-attention layers, gated delta nets on the others; every layer
    MoE with one gated shared expert of ``shared_expert_intermediate_size``."""
    out = _common_gqa(f) | _moe(f, "num_experts", "moe_intermediate_size") | {"qk_norm": "per_head"}
    dense = set(f.list_("mlp_only_layers", int, "layer indices"))
    if dense:
        raise f.bad("mlp_only_layers", sorted(dense), "empty (every Qwen3.5 MoE layer is MoE)")
    shared = f.int_("shared_expert_intermediate_size", "shared expert width", default=0, lo=0)
    return out | _linear_attention(f, layers) | {
        "layer_moe": (True,) * layers, "layer_windows": (0,) * layers,
        "shared_experts": 1 if shared else 0, "shared_intermediate": shared,
        "shared_expert_gate": bool(shared),
        "attn_output_gate": f.bool_("attn_output_gate", False),
        "mtp_layers": f.int_("mtp_num_hidden_layers", "MTP layers", default=0, lo=0)}


def _qwen3_5(f: Fields, layers: int) -> dict[str, Any]:
    """Qwen3.5's dense models (Qwen3.5-27B): the hybrid attention of :func:`_qwen3_5_moe` and a gated
    MLP of ``intermediate_size`` in every layer; no experts."""
    out = _common_gqa(f) | {"qk_norm": "per_head"}
    return out | _linear_attention(f, layers) | {
        "layer_moe": (False,) * layers, "layer_windows": (0,) * layers, "experts": 0, "experts_per_token": 0,
        "moe_intermediate": 0, "intermediate": f.int_("intermediate_size", "the MLP width"),
        "attn_output_gate": f.bool_("attn_output_gate", False),
        "mtp_layers": f.int_("mtp_num_hidden_layers", "MTP layers", default=0, lo=0)}


def _dense(qkv_bias: bool = False, qk_norm: bool = False) -> Callable[[Fields, int], dict[str, Any]]:
    """The reader of a dense Llama-style decoder: GQA (``attention_bias``: Q, K, V and O biases),
    a gated MLP of ``intermediate_size`` (``mlp_bias``) in every layer; ``qkv_bias``: the family's
    Q, K and V biases (Qwen2); ``qk_norm``: its per-head Q and K RMSNorms (Qwen3).  The shape keeps
    no per-layer detail: ``params`` is :func:`dense_params`' count, ``active_params`` the same."""

    def read(f: Fields, layers: int) -> dict[str, Any]:
        for key in MOE_CONFIG_FIELDS:
            if f.data.get(key) not in (None, 0, 1):
                raise f.bad(key, f.data[key], "absent, 0 or 1 in a dense model's config (a mixture of "
                            "experts is read by its own family, named in 'architectures')")
        if f.has("kv_lora_rank"):
            raise f.bad("kv_lora_rank", f.data["kv_lora_rank"], "absent in a dense model's config "
                        "(multi-head latent attention is read by the deepseek_v3 family)")
        gqa = _common_gqa(f)
        inter = f.int_("intermediate_size", "the MLP width")
        o_bias = gqa.pop("attention_bias")  # a dense shape's qkv_bias; the O bias is counted in params
        mlp_bias = f.bool_("mlp_bias", False)
        tied = f.bool_("tie_word_embeddings", False)
        params = float(dense_params(layers=layers, hidden=gqa["hidden"], heads=gqa["heads"],
                                    kv_heads=gqa["kv_heads"], head_dim=gqa["head_dim"], intermediate=inter,
                                    vocab=f.int_("vocab_size", "vocabulary size"), tied_embeddings=tied,
                                    qkv_bias=o_bias or qkv_bias, o_bias=o_bias, mlp_bias=mlp_bias,
                                    qk_norm=qk_norm))
        return gqa | {"intermediate": inter, "qkv_bias": o_bias or qkv_bias, "params": params,
                      "active_params": params}

    return read


def dense_params(*, layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int,
                 intermediate: int, vocab: int, tied_embeddings: bool, gated_mlp: bool = True,
                 qkv_bias: bool = False, o_bias: bool = False, mlp_bias: bool = False,
                 qk_norm: bool = False) -> int:
    """Parameters of a dense decoder, exactly: the :meth:`~servesim.hardware.shape.ModelShape.breakdown`
    of its layers, every one a dense MLP (``o_bias``: the Q, K, V and O projections all carry biases;
    ``qkv_bias`` alone: Q, K and V).  With vocabulary ``V``, width ``h``, ``H`` query heads and ``G``
    KV heads of width ``d``, MLP width ``I``::

        V h (x 2 if the LM head is untied)                       embedding tables
        + layers x ( h H d + 2 h G d + H d h                     Q, K, V, O projections
                   + 3 h I   (2 h I if the MLP is not gated)     gate, up, down
                   + 2 h                                         two RMSNorm weights
                   + (H d + 2 G d if qkv_bias)                   Q, K, V biases (Qwen2)
                   + (2 d if qk_norm) )                          per-head Q and K RMSNorm (Qwen3)
        + h                                                      final norm

    which gives the checkpoints' own counts exactly (Llama-3.1-8B 8,030,261,248;
    Qwen3-32B 32,762,123,264)."""
    shape = ModelShape(name="dense", layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                       head_dim=head_dim, vocab=vocab, attention=attention_kind(heads, kv_heads),
                       tied_embeddings=tied_embeddings, intermediate=intermediate, gated_mlp=gated_mlp,
                       mlp_bias=mlp_bias, qkv_bias=qkv_bias, attention_bias=o_bias,
                       qk_norm="per_head" if qk_norm else "", experts=0, experts_per_token=0,
                       layer_moe=(False,) * layers)
    return int(shape.params)


_FAMILIES: Mapping[str, _Family] = {
    # family -> entry; dense decoders first (the counts of dense_params, no per-layer detail)
    "llama": _Family(_dense(), ("LlamaForCausalLM",), ("llama",), per_layer=False),
    "mistral": _Family(_dense(), ("MistralForCausalLM",), ("mistral",), per_layer=False),
    "qwen2": _Family(_dense(qkv_bias=True), ("Qwen2ForCausalLM",), ("qwen2",), per_layer=False),
    "qwen3": _Family(_dense(qk_norm=True), ("Qwen3ForCausalLM",), ("qwen3",), per_layer=False),
    # mixture-of-experts, MLA and hybrid decoders, per layer (shape.MOE_FAMILIES)
    "deepseek_v3": _Family(_deepseek, ("DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration",
                                       "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"),
                           ("deepseek_v3", "kimi_k2", "kimi_k25", "deepseek_v32", "glm_moe_dsa")),
    "qwen3_moe": _Family(_qwen3_moe, ("Qwen3MoeForCausalLM",), ("qwen3_moe",)),
    "gpt_oss": _Family(_gpt_oss, ("GptOssForCausalLM",), ("gpt_oss",)),
    "minimax_m2": _Family(_minimax_m2, ("MiniMaxM2ForCausalLM",), ("minimax_m2",)),
    "mixtral": _Family(_mixtral, ("MixtralForCausalLM",), ("mixtral",)),
    "llama4": _Family(_llama4, ("Llama4ForConditionalGeneration", "Llama4ForCausalLM"),
                      ("llama4", "llama4_text")),
    "qwen3_5_moe": _Family(_qwen3_5_moe, ("Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM"),
                           ("qwen3_5_moe", "qwen3_5_moe_text")),
    "qwen3_5": _Family(_qwen3_5, ("Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"),
                       ("qwen3_5", "qwen3_5_text")),
}


# --------------------------------------------------------------------------- quantization


def _matcher(where: str, field: str, patterns: Sequence[object]) -> Callable[[str], bool]:
    """A test of module names against exclusion/target patterns: dotted names (matching whole
    components anywhere in the name), ``*`` / ``?`` globs, or ``re:`` regular expressions
    (``re.match``, as compressed-tensors)."""
    plain: list[str] = []
    regexes: list[re.Pattern[str]] = []
    for pat in patterns:
        if not isinstance(pat, str) or not pat or len(pat) > _MAX_PATTERN:
            raise InputError(f"{where}: field {field!r} holds {shown(pat, QUOTED)}: must be module names "
                             f"(strings of 1 to {_MAX_PATTERN} characters)")
        if pat.startswith("re:"):
            try:
                regexes.append(re.compile(pat[3:]))
            except re.error as exc:
                raise InputError(f"{where}: field {field!r} holds {pat!r}: not a regular expression "
                                 f"({exc})") from None
        else:
            plain.append(re.escape(pat).replace(r"\*", ".*").replace(r"\?", "."))
    joined = re.compile(r"(?:^|\.)(?:" + "|".join(plain) + r")(?:\.|$)") if plain else None

    def match(name: str) -> bool:
        return bool(joined and joined.search(name)) or any(r.match(name) for r in regexes)

    return match


@dataclass(frozen=True)
class _Quant:
    dtype: str
    excluded: Callable[[str], bool] | None = None
    targeted: Callable[[str], bool] | None = None
    kv_dtype: str = ""  # the KV-cache dtype the checkpoint states (ModelOpt kv_cache_quant_algo); "": none


def _cfg_quant(where: str, q: Fields) -> _Quant:
    """The dtype and exclusions of a ``quantization_config``."""
    method = q.str_("quant_method")
    if method == "fp8":
        block = q.data.get("weight_block_size")
        if block is not None and not (isinstance(block, list) and len(block) == 2
                                      and all(isinstance(b, int) and not isinstance(b, bool) and b > 0
                                              for b in block)):
            raise q.bad("weight_block_size", block, "two positive integers, e.g. [128, 128]")
        dtype = "fp8_block" if block else "fp8"
        return _Quant(dtype, _matcher(where, q.name("modules_to_not_convert"),
                                      q.list_("modules_to_not_convert", str, "module names")))
    if method == "mxfp4":
        return _Quant("mxfp4", _matcher(where, q.name("modules_to_not_convert"),
                                        q.list_("modules_to_not_convert", str, "module names")))
    if method == "compressed-tensors":
        return _compressed_tensors(where, q)
    if method == "modelopt":
        return _modelopt(where, q, "quant_algo", ("exclude_modules", "ignore"))
    raise InputError(f"{where}: field {q.name('quant_method')!r} = {shown(method or None, QUOTED)} is not "
                     "supported: must be 'fp8', 'mxfp4', 'compressed-tensors' or 'modelopt'")


def _compressed_tensors(where: str, q: Fields) -> _Quant:
    groups = q.dict_("config_groups")
    if not groups:
        raise InputError(f"{where}: missing required field {q.name('config_groups')!r} (compressed-tensors "
                         "quantization schemes)")
    dtypes: set[str] = set()
    targets: list[str] = []
    for key, raw in groups.items():
        g = Fields(where, raw if isinstance(raw, dict) else {}, f"{q.name('config_groups')}.{key}.")
        if not isinstance(raw, dict):
            raise q.bad(f"config_groups.{key}", raw, "a JSON object")
        w = g.child("weights")
        bits = w.int_("num_bits", "bits per weight")
        kind = w.str_("type", "int")
        if kind == "int" and bits == 4:
            dtypes.add("int4")
        elif kind == "float" and bits == 4:
            dtypes.add("fp4")
        elif kind == "float" and bits == 8:
            dtypes.add("fp8_block" if w.str_("strategy") == "block" else "fp8")
        else:
            raise w.bad("num_bits", bits, f"4 or 8 with type 'int' (4) or 'float' (4, 8); got type {kind!r}")
        targets += g.list_("targets", str, "module classes or names")
    if len(dtypes) != 1:
        raise InputError(f"{where}: field {q.name('config_groups')!r} mixes weight formats "
                         f"({', '.join(sorted(dtypes))}): one per checkpoint is supported")
    named = [t for t in targets if t != "Linear"]
    targeted = None
    if named and "Linear" not in targets:
        targeted = _matcher(where, q.name("config_groups.*.targets"), named)
    ignore = _matcher(where, q.name("ignore"), q.list_("ignore", str, "module names"))
    return _Quant(dtypes.pop(), ignore, targeted)


def _modelopt(where: str, q: Fields, algo_key: str, exclude_keys: tuple[str, ...]) -> _Quant:
    algo = q.str_(algo_key).upper()
    dtypes = {"NVFP4": "fp4", "FP8": "fp8", "FP8_BLOCK": "fp8_block", "MXFP4": "mxfp4", "W4A16_AWQ": "int4"}
    if algo not in dtypes:
        bad = shown(q.data.get(algo_key), QUOTED)
        raise InputError(f"{where}: field {q.name(algo_key)!r} = {bad} is not "
                         f"supported: must be one of {', '.join(dtypes)}")
    patterns: list[str] = []
    for key in exclude_keys:
        patterns += q.list_(key, str, "module names")
    kv = str(q.data.get("kv_cache_quant_algo") or "").upper()  # ModelOpt: "FP8" or absent
    return _Quant(dtypes[algo], _matcher(where, q.name(exclude_keys[0]), patterns),
                  kv_dtype="fp8" if kv == "FP8" else "")


def _quantization(where: str, top: Fields, text: Fields, quant_file: Path | None) -> _Quant | None:
    if quant_file is not None:
        qwhere, qdata = load_json(quant_file)
        quant = Fields(qwhere, qdata).child("quantization")
        return _modelopt(qwhere, quant, "quant_algo", ("exclude_modules",))
    for f in (text, top):
        q = f.dict_("quantization_config")
        if q is not None:
            return _cfg_quant(where, Fields(where, q, f.name("quantization_config") + "."))
    return None


def _quantized_parts(family: str, model_type: str, arch: ModelShape, quant: _Quant) -> tuple[str, ...]:
    """The linear parts stored quantized in every decoder layer that has them."""
    prefix = _PREFIX.get(model_type, _PREFIX.get(family, "model.layers"))
    counts = arch.linear_counts()
    modules = _MODULES[family]
    out = []
    for part in LINEAR_PARTS:
        if not counts[part]:
            continue
        if part in ("experts", "shared_experts"):
            layers = [i for i in range(arch.layers) if arch.layer_moe[i]]
        elif part == "dense_mlp":
            layers = [i for i in range(arch.layers) if not arch.layer_moe[i]]
        else:
            layers = list(range(arch.layers))
        names = [f"{prefix}.{i}.{m}" for i in layers for m in modules.get(part, (part,))]
        if quant.targeted is not None and not all(quant.targeted(n) for n in names):
            continue
        if quant.excluded is not None and any(quant.excluded(n) for n in names):
            continue
        out.append(part)
    return tuple(out)


# --------------------------------------------------------------------------- reading

_SHIPPED_NAME = re.compile(r"(?P<org>[A-Za-z0-9][\w.-]*)--(?P<repo>[\w.-]+)_config\.json")
_HF_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def _quant_sibling(p: Path) -> Path | None:
    if not p.name.endswith("config.json") or p.name.endswith("hf_quant_config.json"):
        return None
    sibling = p.with_name(p.name[: -len("config.json")] + "hf_quant_config.json")
    return sibling if path_kind(sibling) == "file" else None


def _identity(p: Path, top: Fields, text: Fields) -> tuple[str, str]:
    """(name, hf_id) of a config file: the id a shipped file's name gives (``org--repo_config.json``),
    else a valid ``_name_or_path`` (the text model's, then the top level's), else none; the name is
    a shipped file's repository in lower case, else the directory holding ``config.json``, else the
    file's stem."""
    m = _SHIPPED_NAME.fullmatch(p.name)
    if m:
        return m["repo"].lower(), f"{m['org']}/{m['repo']}"
    hf_id = text.str_("_name_or_path") or top.str_("_name_or_path")
    name = p.parent.name if p.name == "config.json" and p.parent.name else p.stem
    return name or "config", hf_id if _HF_ID.fullmatch(hf_id) else ""


def _torch_dtype(top: Fields, text: Fields) -> str:
    """The checkpoint's ``torch_dtype`` (or ``dtype``, its newer name) as written, the text model's first."""
    for f in (text, top):
        for key in ("torch_dtype", "dtype"):
            if f.has(key):
                return f.str_(key)
    return ""


def read_config(path: str | Path) -> ModelShape:
    """The :class:`ModelShape` of a Hugging Face ``config.json`` file, or of a directory holding one:
    the one reader of every family servesim prices, dense or per layer (:func:`supported_families`).

    The family is the first ``architectures`` class the family table names, else ``model_type``
    (a config with neither and no experts is read as a Llama-style dense decoder); its reader gives
    the shape's fields.  Dense families (``llama``, ``mistral``, ``qwen2``, ``qwen3``) keep no
    per-layer detail (``family`` ""; ``params`` from :func:`dense_params`); the others fill it in and
    read the checkpoint's quantization from ``quantization_config`` or an ``hf_quant_config.json``
    beside the file (``X_hf_quant_config.json`` beside ``X_config.json``).  Name and id:
    :func:`_identity`'s rule.  Every problem raises :class:`~servesim._checks.InputError` naming the
    file and the field: a file that is missing or not JSON, an unknown ``architectures`` /
    ``model_type`` (the message lists every supported family), a missing or invalid field.
    """
    p = Path(path).expanduser()
    if path_kind(p) == "dir":
        p = p / "config.json"
    where, data = load_json(p)
    top = Fields(where, data)
    family, text = _family(where, top)
    entry = _FAMILIES[family]
    layers = text.int_("num_hidden_layers", "decoder layers")
    shape = entry.read(text, layers)
    name, hf_id = _identity(p, top, text)
    tied_key = "tie_word_embeddings"
    tied = text.bool_(tied_key, top.bool_(tied_key, False))
    try:
        arch = ModelShape(name=name, hf_id=hf_id, family=family if entry.per_layer else "", layers=layers,
                          vocab=text.int_("vocab_size", "vocabulary size"), tied_embeddings=tied,
                          context_length=text.int_("max_position_embeddings", "longest sequence", 0, lo=0),
                          torch_dtype=_torch_dtype(top, text), source=where,
                          description=f"{hf_id or name} read from {where}", **shape)
        quant = _quantization(where, top, text, _quant_sibling(p)) if entry.per_layer else None
        if quant is not None:
            parts = _quantized_parts(family, top.str_("model_type"), arch, quant)
            if "experts" not in parts and arch.experts:
                raise InputError(f"{where}: the quantization config leaves the routed experts unquantized: "
                                 "only checkpoints that quantize them are read")
            arch = dataclasses.replace(arch, checkpoint_dtype=quant.dtype, quantized_parts=parts,
                                       checkpoint_kv_dtype=quant.kv_dtype)
    except ParameterError as exc:
        raise InputError(f"{where}: {exc}") from None
    return arch


# --------------------------------------------------------------------------- shipped configs

_DATA = Path(__file__).resolve().parents[1] / "data" / "model_configs"

# alias id -> (shipped id, fields to change)
_ALIASES: Mapping[str, tuple[str, Mapping[str, Any]]] = {
    "deepseek-ai/DeepSeek-R1-0528": ("deepseek-ai/DeepSeek-R1", {}),
    "deepseek-ai/DeepSeek-V3-0324": ("deepseek-ai/DeepSeek-V3", {}),
    "deepseek-ai/DeepSeek-V3-Base": ("deepseek-ai/DeepSeek-V3", {}),
    "deepseek-ai/DeepSeek-V3.1": ("deepseek-ai/DeepSeek-V3", {}),
    "deepseek-ai/DeepSeek-V3.1-Base": ("deepseek-ai/DeepSeek-V3", {}),
    "deepseek-ai/DeepSeek-V3.1-Terminus": ("deepseek-ai/DeepSeek-V3", {}),
    "moonshotai/Kimi-K2-Instruct-0905": ("moonshotai/Kimi-K2-Instruct", {}),
    "moonshotai/Kimi-K2-Base": ("moonshotai/Kimi-K2-Instruct", {}),
    # Kimi-K2-Thinking: K2's shape, its routed experts in compressed-tensors int4 groups of 32 (the
    # quantization_config K2.5 ships; attention, shared experts and dense layers stay BF16), 256K context
    "moonshotai/Kimi-K2-Thinking": ("moonshotai/Kimi-K2-Instruct",
                                    {"checkpoint_dtype": "int4", "quantized_parts": ("experts",),
                                     "context_length": 262144}),
    "Qwen/Qwen3-235B-A22B-Instruct-2507": ("Qwen/Qwen3-235B-A22B", {"context_length": 262144}),
    "Qwen/Qwen3-235B-A22B-Thinking-2507": ("Qwen/Qwen3-235B-A22B", {"context_length": 262144}),
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": ("Qwen/Qwen3-235B-A22B-FP8", {"context_length": 262144}),
    "Qwen/Qwen3-235B-A22B-Thinking-2507-FP8": ("Qwen/Qwen3-235B-A22B-FP8", {"context_length": 262144}),
    "Qwen/Qwen3-30B-A3B-Base": ("Qwen/Qwen3-30B-A3B", {}),
    "Qwen/Qwen3-30B-A3B-Instruct-2507": ("Qwen/Qwen3-30B-A3B", {"context_length": 262144}),
    "Qwen/Qwen3-30B-A3B-Thinking-2507": ("Qwen/Qwen3-30B-A3B", {"context_length": 262144}),
    # Qwen's FP8 releases: 128 x 128 block FP8 for every linear layer but lm_head (and the router)
    "Qwen/Qwen3-30B-A3B-FP8": ("Qwen/Qwen3-30B-A3B", {"checkpoint_dtype": "fp8_block"}),
    "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8": ("Qwen/Qwen3-30B-A3B", {"checkpoint_dtype": "fp8_block",
                                                             "context_length": 262144}),
    "Qwen/Qwen3-30B-A3B-Thinking-2507-FP8": ("Qwen/Qwen3-30B-A3B", {"checkpoint_dtype": "fp8_block",
                                                             "context_length": 262144}),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": ("mistralai/Mixtral-8x7B-v0.1", {}),
    "meta-llama/Llama-4-Scout-17B-16E": ("meta-llama/Llama-4-Scout-17B-16E-Instruct", {}),
    "meta-llama/Llama-4-Maverick-17B-128E": ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", {}),
    "MiniMaxAI/MiniMax-M2": ("MiniMaxAI/MiniMax-M2.5", {}),
    "MiniMaxAI/MiniMax-M2.1": ("MiniMaxAI/MiniMax-M2.5", {}),
}
# short name -> id, besides every id's repository name
_SHORT: Mapping[str, str] = {
    "kimi-k2": "moonshotai/Kimi-K2-Instruct",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "mixtral-8x22b": "mistralai/Mixtral-8x22B-v0.1",
    "llama-4-scout": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "llama-4-maverick": "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
}
_PATH_PREFIXES = ("/", "./", "../", "~", ".\\", "..\\")


@lru_cache(maxsize=1)
def _shipped() -> Mapping[str, tuple[str, Path]]:
    """Lower-case id -> (id, config file) of the shipped configs."""
    out: dict[str, tuple[str, Path]] = {}
    for p in sorted(_DATA.glob("*_config.json")):
        m = _SHIPPED_NAME.fullmatch(p.name)
        if m and not p.name.endswith("_hf_quant_config.json"):
            hf_id = f"{m['org']}/{m['repo']}"
            out[hf_id.lower()] = (hf_id, p)
    return out


def shipped_ids() -> tuple[str, ...]:
    """Hugging Face ids of the configs shipped with servesim."""
    return tuple(hf_id for hf_id, _ in _shipped().values())


@lru_cache(maxsize=1)
def _index() -> Mapping[str, tuple[str, str]]:
    """Lower-case id, alias or short name -> (id it names, shipped id whose config it uses)."""
    shipped = _shipped()
    ids = {k: (v[0], v[0]) for k, v in shipped.items()}
    ids |= {a.lower(): (a, target) for a, (target, _) in _ALIASES.items()}
    out = dict(ids)
    repos: dict[str, list[str]] = {}
    for key in ids:
        repos.setdefault(key.rpartition("/")[2], []).append(key)
    for repo, keys in repos.items():
        if len(keys) == 1 and repo not in out:
            out[repo] = ids[keys[0]]
    for short, hf_id in _SHORT.items():
        out.setdefault(short, ids[hf_id.lower()])
    return out


@lru_cache(maxsize=64)
def _read_shipped(hf_id: str) -> ModelShape:
    return read_config(_shipped()[hf_id.lower()][1])


def find_architecture(name: str) -> ModelShape | None:
    """The :class:`ModelShape` of a shipped config by Hugging Face id, alias or short name
    (case-insensitive), or of a ``config.json`` path; ``None`` for an unknown name.

    Text ending in ``.json`` or starting with ``/``, ``./``, ``../`` or ``~`` is a path (and an
    unreadable one raises :class:`~servesim._checks.InputError`); other text is looked up as a
    name first, then read as a directory holding a ``config.json`` if there is one.
    """
    if not isinstance(name, str):
        raise ParameterError("name", name, "a Hugging Face id, a short name or the path of a config.json")
    text = name.strip()
    if not text:
        return None
    if text.lower().endswith(".json") or text.startswith(_PATH_PREFIXES):
        return read_config(text)
    refused = _REFUSED_IDS.get(text.lower()) or _REFUSED_IDS.get(text.lower().rpartition("/")[2])
    if refused is not None:
        raise ParameterError("model", text, f"a model servesim prices: {_REFUSED[refused]}")
    found = _index().get(text.lower())
    if found is not None:
        hf_id, base = found
        arch = _read_shipped(base)
        if hf_id == base:
            return arch
        changes = dict(_ALIASES[hf_id][1]) if hf_id in _ALIASES else {}
        return dataclasses.replace(arch, name=hf_id.rpartition("/")[2].lower(), hf_id=hf_id, **changes)
    repacked = _repackaged(text)
    if repacked is not None:
        return repacked
    if path_kind(text) == "dir" and path_kind(Path(text).expanduser() / "config.json") == "file":
        return read_config(text)
    return None


_REPACKAGED = re.compile(r"(?P<base>.+?)[-_](?P<q>(?:nv)?fp4(?:[-_]v\d+)?|mxfp4"
                         r"|fp8(?:[-_](?:dynamic|block|v\d+))?|w4a16|awq|gptq[-_]int4|int4)", re.IGNORECASE)
# quantized parts of a re-packaged checkpoint by family, as the shipped quantized releases have them
# (nvidia/DeepSeek-V3.1-NVFP4 and nvidia/Qwen3-235B-A22B-NVFP4's hf_quant_config.json): NVIDIA's
# ModelOpt NVFP4 keeps MLA's projections but o_proj in higher precision; elsewhere every linear part
FP4_RELEASE_PARTS: Mapping[str, tuple[str, ...]] = {
    "deepseek_v3": ("o_proj", "experts", "shared_experts", "dense_mlp"),
    "qwen3_moe": ("q_proj", "k_proj", "v_proj", "o_proj", "experts"),
}


def _repackaged(text: str) -> ModelShape | None:
    """A quantized re-packaging of a shipped model (``nvidia/DeepSeek-R1-0528-FP4-v2``,
    ``RedHatAI/...-FP8-dynamic``, ``...-AWQ``): the base model's shape with the checkpoint's
    dtype read from the name (FP4/NVFP4 -> NVFP4, MXFP4, FP8 -> per-channel FP8, FP8-block,
    W4A16/AWQ/GPTQ-Int4/INT4 -> int4 weight-only).  None when the base is not shipped."""
    repo = text.rpartition("/")[2]
    m = _REPACKAGED.fullmatch(repo)
    if m is None:
        return None
    found = _index().get(m["base"].lower())
    if found is None:
        return None
    base = find_architecture(found[0])
    if base is None:  # pragma: no cover - every index entry names a shipped config
        return None
    q = m["q"].lower().replace("_", "-")
    if q.startswith(("nvfp4", "fp4")):
        dtype, parts = "fp4", FP4_RELEASE_PARTS.get(base.family)
    elif q == "mxfp4":
        dtype, parts = "mxfp4", ("experts",)
    elif q.startswith("fp8"):
        dtype, parts = ("fp8_block" if q == "fp8-block" else "fp8"), None
    else:
        dtype, parts = "int4", None
    return dataclasses.replace(base, name=repo.lower(), hf_id=text if "/" in text else "",
                               checkpoint_dtype=dtype, quantized_parts=parts)
