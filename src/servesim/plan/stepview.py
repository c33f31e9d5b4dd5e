"""Where a step's time goes, by batch: the measured-kernel step model beside its speed of light.

For ``servesim roofline``: at each decode batch the step split into GEMMs,
attention, all-reduce, other kernels and host time
(:class:`servesim.hardware.stepmodel.StepModel`) and the pure roofline bound; for a step model that
lists its operations (:class:`servesim.hardware.moe_step.MoEStepModel`), each operation at the
smallest and the largest batch that fit, priced by the engine and at the speed of light.  The
same step model prices the command's speculation (:func:`servesim.plan.roofline.roofline_summary`).
Plain dicts out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servesim.hardware.stepmodel import Chunk, StepModel, sequences_held

__all__ = ["step_view"]


def step_view(sm: StepModel, batches: Sequence[int], context: int, memory_bytes: float) -> dict[str, Any]:
    """The measured-kernel section of ``servesim roofline`` as plain data (times in ms)."""
    cap_tokens = sm.kv_capacity_tokens(memory_bytes)
    max_batch = sequences_held(sm, memory_bytes, context)
    rows = []
    for b in batches:
        st = sm.decode_step(b, context)
        rows.append({"batch": b, "fits_memory": b <= max_batch, **st.as_dict(),
                     "tokens_per_s": b / st.total_s})
    prefill = sm.step(0.0, 0.0, (Chunk(min(context, sm.engine.max_num_batched_tokens)),))
    ops: dict[str, Any] = {}
    peaks = getattr(sm, "peaks", None)
    if peaks is not None:  # a step model that lists its operations
        from servesim.hardware.ops import by_name

        fitting = [b for b in batches if b <= max_batch] or list(batches)
        for b in sorted({min(fitting), max(fitting)}):
            st = sm.decode_step(b, context)
            ops[str(b)] = by_name(st.ops, peaks)
    return {
        "model": sm.shape.name, "gpu": sm.gpu, "tp": sm.tp, "dtype": sm.dtype, "kv_dtype": sm.kv_dtype,
        "engine": sm.engine.name, "tables": sm.tables_note, "context_tokens": context,
        "kv_capacity_tokens": cap_tokens, "max_batch": max_batch, "rows": rows,
        "prefill": {"tokens": min(context, sm.engine.max_num_batched_tokens), **prefill.as_dict()},
        "operations": ops,
    }
