"""A serving node (one replica) for the lab's reference model, priced by the measured-kernel step
model (:func:`step_node`): the one cost model every command prices with.

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
from servesim.hardware.roofline import largest_batch_within
from servesim.hardware.stepmodel import StepTime
from servesim.model.kvcache import KVShape
from servesim.model.serving import NodeSpec

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.pricer import Pricer

__all__ = ["StepNode", "step_node"]


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


def step_node(sm: Pricer, memory_bytes: float, *, prompt_tokens: int, output_tokens: int,
              tpot_slo_s: float | None = None, load: tuple[float, float] | None = None) -> StepNode:
    """Derive the node (see the module docstring).  With ``load`` = (requests per second each node
    serves, the decode batch that rate keeps running: the fixed point ``B = rate (O - 1) T(B)`` of
    :func:`servesim.plan.capacity.decode_at_load`, inf where none fits), TPOT_base is the decode step at
    that batch (at least one sequence, at most the node's batch), so that the lab's TPOT agrees with
    the engine model's at that rate; the decode capacity stays the node's largest batch over its step."""
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
    par = getattr(sm, "par", None)  # a mixture-of-experts replica's split: tp x dp, ep
    split = (f" (tp {par.tp} x dp {par.dp}, ep {par.ep})" if par is not None and (par.dp > 1 or par.ep > 1)
             else "")
    source = (f"measured-kernel step model: {name} on {gpus} x {sm.gpu}{split} ({sm.dtype}, "
              f"{sm.kv_dtype} KV, {sm.engine.name}), decode batch {b} (limited by "
              f"{why.replace('_', ' ')}){at_load}")
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
