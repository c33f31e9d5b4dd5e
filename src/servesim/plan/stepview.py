"""Where a step's time goes, by batch: the measured-kernel step model beside its speed of light.

For ``servesim roofline``: at each decode batch the step split into GEMMs,
attention, all-reduce, other kernels and host time
(:class:`servesim.hardware.stepmodel.StepModel`), the pure roofline bound, and
for each speculative preset the batch above which it stops paying
(:func:`servesim.hardware.speculation.turn_off_batch`).  Plain dicts out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servesim.hardware.speculation import speculation_for, turn_off_batch
from servesim.hardware.stepmodel import Chunk, StepModel

__all__ = ["step_view"]


def step_view(sm: StepModel, batches: Sequence[int], context: int, memory_bytes: float,
              presets: Sequence[str], catalog: Any = None) -> dict[str, Any]:
    """The measured-kernel section of ``servesim roofline`` as plain data (times in ms)."""
    cap_tokens = sm.kv_capacity_tokens(memory_bytes)
    max_batch = min(sm.engine.max_num_seqs, cap_tokens // max(1, context))
    rows = []
    for b in batches:
        st = sm.decode_step(b, context)
        rows.append({"batch": b, "fits_memory": b <= max_batch, **st.as_dict(),
                     "tokens_per_s": b / st.total_s})
    prefill = sm.step(0.0, 0.0, (Chunk(min(context, sm.engine.max_num_batched_tokens)),))
    spec = []
    for name in presets:
        try:
            _, at1 = speculation_for(sm, name, 1, context, catalog=catalog)
            off = turn_off_batch(sm, name, context, batch_limit=max(1, max_batch), catalog=catalog)
        except ValueError as exc:
            spec.append({"name": name, "available": False, "note": str(exc)})
            continue
        spec.append({"name": name, "available": True, "turn_off_batch": off, "k_batch1": at1["k"],
                     "d_batch1": at1["d"], "c_batch1": at1["c"], "speedup_batch1": at1["speedup_at_batch"]})
    return {
        "model": sm.shape.name, "gpu": sm.gpu, "tp": sm.tp, "dtype": sm.dtype, "kv_dtype": sm.kv_dtype,
        "engine": sm.engine.name, "tables": sm.tables_note, "context_tokens": context,
        "kv_capacity_tokens": cap_tokens, "max_batch": max_batch, "rows": rows,
        "prefill": {"tokens": min(context, sm.engine.max_num_batched_tokens), **prefill.as_dict()},
        "speculation": spec,
    }
