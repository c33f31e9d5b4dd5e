"""A serving node (one replica) for the lab's reference model, priced by the measured-kernel step
model (:func:`step_node`) or by the roofline alone (:func:`derive_node`, at the end).

The reference model (:mod:`servesim.model.serving`) takes a node as four numbers:
prefill tokens/s, decode tokens/s, TPOT_base and the KV shape.  Here they come
from :class:`servesim.hardware.stepmodel.StepModel` for a dense model on ``tp``
GPUs in the given dtypes:

* prefill tokens/s = ``P / t_prefill(P)``, the prompt run in chunks of the
  engine's token budget, one chunk per step;
* the decode batch: the largest whose KV cache at the final context (prompt +
  output) fits beside the weights (:meth:`StepModel.kv_capacity_tokens`), at
  most the engine's ``max_num_seqs``, and, with a TPOT SLO, the largest whose
  decode step at the mean context meets it (batch 1 if none does);
* TPOT_base = that decode step (host time included); decode tokens/s = batch / TPOT_base;
* the KV shape in the KV-cache dtype, so KV-transfer sizes follow ``--kv-dtype``.

This is still the reference model's fixed-batch node; :mod:`servesim.plan`
moves the batch with the load.  Standard library only; nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.roofline import (
    DEFAULT_BATCH_CAP,
    DEFAULT_EFFICIENCY,
    DEFAULT_MEMORY_FRACTION,
    Efficiency,
    GPUSpec,
    ModelSpec,
    _check_tp,
    decode_step,
    largest_batch_within,
    max_batch,
    prefill_step,
)
from servesim.hardware.roofline import StepTime as RooflineTime
from servesim.hardware.stepmodel import StepModel, StepTime
from servesim.model.serving import NodeSpec

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog

__all__ = ["NodeDerivation", "StepNode", "derive_node", "node_spec", "step_node"]


@dataclass(frozen=True)
class StepNode:
    """A :class:`servesim.model.serving.NodeSpec` and how the step model derived it."""

    node: Any  # servesim.model.serving.NodeSpec
    batch: int
    batch_limited_by: str  # "memory", "max_num_seqs" or "tpot_slo"
    max_batch: int
    prefill_s: float
    decode: StepTime
    source: str


def step_node(sm: StepModel, memory_bytes: float, *, prompt_tokens: int, output_tokens: int,
              tpot_slo_s: float | None = None, load: tuple[float, float] | None = None) -> StepNode:
    """Derive the node (see the module docstring).  With ``load`` = (requests per second each node
    serves, the decode batch that rate keeps running: the fixed point ``B = rate (O - 1) T(B)`` of
    :func:`servesim.plan.capacity.decode_at_load`, inf where none fits), TPOT_base is the decode step at
    that batch (at least one sequence, at most the node's batch), so that the lab's TPOT agrees with
    the engine model's at that rate; the decode capacity stays the node's largest batch over its step."""
    from servesim.model.kvcache import KVShape

    p = check_int("prompt_tokens", prompt_tokens, lo=1)
    o = check_int("output_tokens", output_tokens, lo=0)
    final_ctx, mean_ctx = p + o, p + o / 2.0
    name, layers, kv_heads, head_dim, gpus = _kv_layout(sm)
    fit = sm.kv_capacity_tokens(memory_bytes) // final_ctx
    if fit < 1:
        raise ParameterError(
            "tp", gpus,
            f"large enough for {name}'s weights ({sm.weight_bytes_per_gpu / 2**30:.1f} GiB per GPU "
            f"in {sm.dtype}) and one {final_ctx:,}-token sequence on {sm.gpu}",
        )
    cap = sm.engine.max_num_seqs
    b, why = (fit, "memory") if fit <= cap else (cap, "max_num_seqs")

    def tpot(batch: int) -> float:
        return sm.decode_step(batch, mean_ctx).total_s

    if tpot_slo_s is not None:
        slo = check_real("tpot_slo_s", tpot_slo_s, lo=0.0, lo_open=True)
        if tpot(b) > slo:
            from servesim.hardware.roofline import largest_batch_within

            b, why = largest_batch_within(tpot, b, slo), "tpot_slo"
    prefill = sm.prompt_s(p)  # the prompt in budget-sized chunks, each behind the ones before it
    dec = sm.decode_step(b, mean_ctx)
    base = dec.total_s
    at_load = ""
    if load is not None and o > 1:
        lam = check_real("rate_per_node", load[0], lo=0.0)
        load_b = max(1.0, min(float(load[1]), float(b)))  # the load fills the node: the full batch's step
        base = sm.decode_step(load_b, mean_ctx).total_s
        at_load = f"; TPOT_base at the {load_b:.1f} sequences {lam:g} req/s keeps running"
    kv_bytes = 1.0 if sm.kv_dtype == "fp8" else 2.0
    node = NodeSpec(prefill_tokens_per_s=p / prefill, decode_tokens_per_s=b / dec.total_s,
                    tpot_base_s=base, kv=KVShape(name, layers, kv_heads, head_dim, kv_bytes), gpus=gpus)
    source = (f"measured-kernel step model: {name} on {gpus} x {sm.gpu} ({sm.dtype}, {sm.kv_dtype} KV, "
              f"{sm.engine.name}), decode batch {b} (limited by {why.replace('_', ' ')}){at_load}")
    return StepNode(node, b, why, fit, prefill, dec, source)


def _kv_layout(sm: Any) -> tuple[str, int, int, int, int]:
    """(name, layers, KV heads, head width, GPUs) of a dense or an MoE step model; an MLA model's latent
    (``kv_lora_rank + rope`` values a layer) is written as one head of half that width (K and V)."""
    arch = getattr(sm, "arch", None)
    if arch is None:
        s = sm.shape
        return s.name, s.layers, s.kv_heads, s.head_dim, sm.tp
    gpus = sm.par.tp * sm.par.dp
    if arch.attention == "mla":
        return arch.name, arch.layers, 1, max(1, (arch.kv_lora_rank + arch.qk_rope_head_dim) // 2), gpus
    return arch.name, arch.layers, arch.kv_heads, arch.head_dim, gpus


# --------------------------------------------------------------------------- from the roofline


@dataclass(frozen=True)
class NodeDerivation:
    """A :class:`servesim.model.serving.NodeSpec` and how it was derived."""

    node: NodeSpec
    model: str
    gpu: str
    tp: int
    batch: int
    batch_limited_by: str  # "given", "memory", "batch_cap" or "tpot_slo"
    max_batch: int
    context_tokens: float  # mean context during decode (prompt + output / 2)
    prefill: RooflineTime
    decode: RooflineTime


def _resolve(model: ModelSpec | str, gpu: GPUSpec | str, catalog: Catalog | None
             ) -> tuple[ModelSpec, GPUSpec]:
    if isinstance(model, ModelSpec) and isinstance(gpu, GPUSpec):
        return model, gpu
    from servesim.hardware.catalog import builtin_catalog

    cat = builtin_catalog() if catalog is None else catalog
    m = model if isinstance(model, ModelSpec) else cat.model(model)
    g = gpu if isinstance(gpu, GPUSpec) else cat.gpu(gpu)
    return m, g


def derive_node(
    model: ModelSpec | str,
    gpu: GPUSpec | str,
    tp: int,
    *,
    prompt_tokens: int,
    output_tokens: int = 0,
    batch: int | None = None,
    tpot_slo_s: float | None = None,
    batch_cap: int = DEFAULT_BATCH_CAP,
    memory_fraction: float = DEFAULT_MEMORY_FRACTION,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    catalog: Catalog | None = None,
) -> NodeDerivation:
    """Derive a serving node (one replica on ``tp`` GPUs) from the roofline.

    * prefill tokens/s = P / t_prefill(P) for one prompt of ``prompt_tokens``;
    * the decode batch: ``batch`` if given; otherwise the largest batch whose KV
      cache at the final context (prompt + output) fits beside the weights, at
      most ``batch_cap``, and, when ``tpot_slo_s`` is given, whose step time
      still meets it (batch 1 if none does);
    * TPOT_base = t_decode(batch) at the mean context prompt + output / 2;
    * decode tokens/s = batch / TPOT_base;
    * the KV shape from the model (the catalog shape of servesim.model.kvcache).

    Raises ParameterError when the weights and one sequence do not fit.
    """
    from servesim.model.kvcache import KVShape

    m, g = _resolve(model, gpu, catalog)
    tp = _check_tp(tp)
    p = check_int("prompt_tokens", prompt_tokens, lo=1)
    o = check_int("output_tokens", output_tokens, lo=0)
    cap = check_int("batch_cap", batch_cap, lo=1)
    final_ctx = float(p + o)
    mean_ctx = p + o / 2.0
    fit = max_batch(m, g, tp=tp, context_tokens=final_ctx, memory_fraction=memory_fraction)
    if fit < 1:
        need = m.weight_bytes / tp + final_ctx * m.kv_bytes_per_token / m.kv_shards(tp)
        raise ParameterError(
            "tp", tp,
            f"large enough for {m.name}'s weights and one {final_ctx:g}-token sequence: "
            f"{need / 1e9:.1f} GB per GPU against {memory_fraction:g} x "
            f"{g.memory_bytes / 1e9:.1f} GB on {g.name}",
        )

    def tpot(b: int) -> float:
        return decode_step(m, g, tp=tp, batch=b, context_tokens=mean_ctx, efficiency=efficiency).total_s

    if batch is not None:
        b, why = check_int("batch", batch, lo=1), "given"
    else:
        b, why = (fit, "memory") if fit <= cap else (cap, "batch_cap")
        if tpot_slo_s is not None:
            slo = check_real("tpot_slo_s", tpot_slo_s, lo=0.0, lo_open=True)
            if tpot(b) > slo:
                b, why = largest_batch_within(tpot, b, slo), "tpot_slo"
    pre = prefill_step(m, g, tp=tp, prompt_tokens=p, efficiency=efficiency)
    dec = decode_step(m, g, tp=tp, batch=b, context_tokens=mean_ctx, efficiency=efficiency)
    shape = KVShape(m.name, m.layers, m.kv_heads, m.head_dim, m.bytes_per_value)
    node = NodeSpec(
        prefill_tokens_per_s=p / pre.total_s,
        decode_tokens_per_s=b / dec.total_s,
        tpot_base_s=dec.total_s,
        kv=shape,
        gpus=tp,
    )
    return NodeDerivation(node, m.name, g.name, tp, b, why, fit, mean_ctx, pre, dec)


def node_spec(
    model: ModelSpec | str,
    gpu: GPUSpec | str,
    tp: int,
    *,
    prompt_tokens: int,
    output_tokens: int = 0,
    batch: int | None = None,
    tpot_slo_s: float | None = None,
    batch_cap: int = DEFAULT_BATCH_CAP,
    memory_fraction: float = DEFAULT_MEMORY_FRACTION,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    catalog: Catalog | None = None,
) -> NodeSpec:
    """The :class:`servesim.model.serving.NodeSpec` of :func:`derive_node` (see there for the choices)."""
    return derive_node(
        model, gpu, tp, prompt_tokens=prompt_tokens, output_tokens=output_tokens, batch=batch,
        tpot_slo_s=tpot_slo_s, batch_cap=batch_cap, memory_fraction=memory_fraction,
        efficiency=efficiency, catalog=catalog,
    ).node
