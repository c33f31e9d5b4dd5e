"""Where a step's time goes, by batch: the measured-kernel step model beside its speed of light.

For ``servesim roofline``: at each decode batch the step split into GEMMs (for a
mixture-of-experts model, the MoE layers' share of them as ``moe_ms``), attention, communication
(all-reduce, and the all-to-all or gather of expert and data parallelism), other kernels and host time
(:class:`servesim.hardware.stepmodel.StepModel`) and the pure roofline bound, and each of its
operations (:mod:`servesim.hardware.ops`) at the smallest and the largest batch that fit, priced by
the engine and at the speed of light.  The
same step model prices the command's speculation (:func:`servesim.plan.roofline.roofline_summary`).
Plain dicts out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servesim.hardware.ops import by_name
from servesim.hardware.pricer import Pricer
from servesim.hardware.stepmodel import Chunk, sequences_held

__all__ = ["MOE_KINDS", "moe_ms", "step_view"]

MOE_KINDS = ("moe", "two_streams")
"""The operations that are a mixture-of-experts layer: its experts (and router), or the experts
beside the shared experts on a second stream.  Their time is part of ``gemm_ms`` (weight GEMMs);
``moe_ms`` says how much of it."""


def moe_ms(ops: Sequence[Any]) -> float:
    """The MoE layers' share of a step's GEMM time, in ms (0 for a dense model)."""
    return float(sum(op.seconds for op in ops if op.kind in MOE_KINDS)) * 1e3


def step_view(sm: Pricer, batches: Sequence[int], context: int, memory_bytes: float) -> dict[str, Any]:
    """The measured-kernel section of ``servesim roofline`` as plain data (times in ms)."""
    cap_tokens = sm.kv_capacity_tokens(memory_bytes)
    max_batch = sequences_held(sm, memory_bytes, context)

    steps = {b: sm.decode_step(b, context) for b in batches}
    rows = [{"batch": b, "fits_memory": b <= max_batch, **st.as_dict(), "moe_ms": moe_ms(st.ops),
             "tokens_per_s": b / st.total_s} for b, st in steps.items()]
    prefill = sm.step(0.0, 0.0, (Chunk(min(context, sm.engine.max_num_batched_tokens)),))
    fitting = [b for b in batches if b <= max_batch] or list(batches)
    ops = {str(b): by_name(steps[b].ops, sm.peaks) for b in sorted({min(fitting), max(fitting)})}
    return {
        "model": sm.model_name, "gpu": sm.gpu, "tp": sm.tp, "dtype": sm.dtype, "kv_dtype": sm.kv_dtype,
        "engine": sm.engine.name, "tables": sm.tables_note, "context_tokens": context,
        "kv_capacity_tokens": cap_tokens, "max_batch": max_batch, "rows": rows,
        "prefill": {"tokens": min(context, sm.engine.max_num_batched_tokens), **prefill.as_dict()},
        "operations": ops,
    }
