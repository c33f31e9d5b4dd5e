"""Speculative decoding priced by the measured-kernel step model: d, c and k at a running batch.

The seed's cycle ``k t_draft + t_verify`` (section 2.2) with both times from
:class:`servesim.hardware.stepmodel.StepModel` at the serving batch ``B``:

* ``t_target(B)``: a plain decode step;
* ``t_verify(B, k)``: the same step verifying ``k + 1`` positions per sequence
  (``B (k + 1)`` tokens through the GEMMs), so ``c(B, k) = (t_verify / t_target - 1) / k``;
* ``t_draft(B)``: ``mtp``, ``eagle3`` and ``medusa`` are priced as one decoder
  layer of the target's shape plus the LM head per draft token (an MTP module
  or an EAGLE head is one layer; Medusa's residual block is smaller, so this
  overstates its draft cost slightly); ``small-draft`` runs the catalog's draft
  model (``draft_model``) on the same GPUs (tp halved until its heads divide).
  ``d(B) = t_draft / t_target``.

The speedup at ``B`` is ``E[n] t_target / (k t_draft + t_verify)`` with the
seed's ``E[n] = sum_{i<=k} alpha^i``: as ``B`` grows the verify GEMMs leave the
memory-bound regime and ``c`` grows, which is seed 003's batch dependence, here
from measured kernels.  :func:`turn_off_batch` finds where it stops paying.

Standard library only; nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from servesim._checks import ParameterError
from servesim.hardware.names import dense_shape, resolve_model
from servesim.hardware.stepmodel import StepModel

__all__ = ["K_MAX", "Speculation", "speculation_for", "turn_off_batch"]

K_MAX = 8
"""Largest draft length searched when none is given."""


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding in the engine: k drafts per step, i.i.d. acceptance alpha."""

    k: int
    alpha: float
    draft_step_s: float  # one draft step at the running batch

    @property
    def tokens_per_step(self) -> float:
        """E[n] = sum_{i=0}^{k} alpha^i (the seed's section 2.1)."""
        return sum(self.alpha**i for i in range(self.k + 1))


def _draft_model(sm: StepModel, preset: str, catalog: Any) -> StepModel:
    if preset != "small-draft":
        return StepModel(replace(sm.shape, layers=1), sm.gpu, sm.tp, dtype=sm.dtype, kv_dtype=sm.kv_dtype,
                         engine=sm.engine, tables=sm.tables)
    try:
        draft_name = resolve_model(sm.shape.name, catalog).draft_model
    except ParameterError:
        draft_name = ""
    if not draft_name:
        raise ParameterError("spec", preset, f"a preset with a drafter for {sm.shape.name}: it has no "
                             "draft_model in the catalog (use mtp, eagle3 or medusa)")
    dshape = dense_shape(draft_name, catalog)
    tp = sm.tp
    while tp > 1 and (dshape.heads % tp or (dshape.kv_heads % tp and tp % dshape.kv_heads)):
        tp //= 2
    return StepModel(dshape, sm.gpu, tp, dtype=sm.dtype, kv_dtype=sm.kv_dtype, engine=sm.engine,
                     tables=sm.tables)


def speculation_for(sm: StepModel, preset: str, batch: float, context: float, *, k: int | None = None,
                    catalog: Any = None, draft: StepModel | None = None
                    ) -> tuple[Speculation, dict[str, float]]:
    """The speculative setting at a running ``batch``: best k (or the given one), d, c, speedup."""
    from servesim.model.speculative import SPECDEC_PRESETS

    if preset not in SPECDEC_PRESETS:
        raise ParameterError("spec", preset, f"one of {', '.join(SPECDEC_PRESETS)}")
    alpha = SPECDEC_PRESETS[preset].alpha
    b = max(1.0, batch)
    dm = draft if draft is not None else _draft_model(sm, preset, catalog)
    target = sm.decode_step(b, context).total_s
    t_draft = dm.decode_step(b, context).gpu_s
    best: tuple[float, int, float] | None = None
    for kk in ([k] if k is not None else list(range(1, K_MAX + 1))):
        verify = sm.decode_step(b, context, positions=kk + 1).total_s
        en = sum(alpha**i for i in range(kk + 1))
        s = en * target / (kk * t_draft + verify)
        if best is None or s > best[0]:
            best = (s, kk, verify)
    assert best is not None
    speedup, kk, verify = best
    info = {"k": kk, "alpha": alpha, "d": t_draft / target, "c": (verify / target - 1.0) / kk,
            "speedup_at_batch": speedup, "batch": b}
    return Speculation(kk, alpha, t_draft), info


def turn_off_batch(sm: StepModel, preset: str, context: float, *, batch_limit: int,
                   catalog: Any = None) -> int | None:
    """The largest batch (powers of two, then bisection) at which the best k still pays.

    None: it pays at every batch up to ``batch_limit``; 0: it pays at no batch.
    """
    dm = _draft_model(sm, preset, catalog)

    def pays(b: int) -> bool:
        return speculation_for(sm, preset, b, context, draft=dm)[1]["speedup_at_batch"] > 1.0

    if not pays(1):
        return 0
    lo, hi = 1, 2
    while hi <= batch_limit and pays(hi):
        lo, hi = hi, hi * 2
    if hi > batch_limit:
        return None if pays(batch_limit) else _bisect(pays, lo, batch_limit)
    return _bisect(pays, lo, hi)


def _bisect(pays: Any, lo: int, hi: int) -> int:
    """Largest b in [lo, hi) with pays(b), given pays(lo) and not pays(hi)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pays(mid):
            lo = mid
        else:
            hi = mid
    return lo
