"""Speculative decoding priced by the measured-kernel step model: d, c and k at a running batch.

The seed's cycle ``k t_draft + t_verify`` (section 2.2) with both times from
:class:`servesim.hardware.stepmodel.StepModel` at the serving batch ``B``:

* ``t_target(B)``: a plain decode step;
* ``t_verify(B, k)``: the same step verifying ``k + 1`` positions per sequence
  (``B (k + 1)`` tokens through the GEMMs), so ``c(B, k) = (t_verify / t_target - 1) / k``;
* ``t_draft(B)``: ``mtp``, ``eagle3``, ``eagle`` and ``medusa`` are priced as one
  decoder layer of the target's shape plus the LM head per draft token (an MTP
  module or an EAGLE head is one layer; Medusa's residual block is smaller, so
  this overstates its draft cost slightly); a mixture-of-experts target's ``mtp``
  is its own module (``num_nextn_predict_layers``: one MLA + MoE layer and the
  shared LM head, priced by the MoE step model), refused for a model without one;
  ``small-draft`` (or ``draft``) runs the draft model (``--draft`` or the catalog's
  ``draft_model``) on the same GPUs (tp halved until its heads divide); ``ngram``
  drafts on the host (:data:`NGRAM_HOST_S` a step plus :data:`NGRAM_HOST_S_PER_SEQ`
  a sequence: vLLM's numba prompt-lookup proposer; an estimate, not a measurement).
  ``d(B) = t_draft / t_target``.

Acceptance: the preset's alpha (the lab's illustration), or the user's ``alpha``,
or a measured *mean acceptance length* ``A`` (tokens per verify step, the bonus
token included, as vLLM's spec-decode metrics and SGLang's ``accept length``
print it) at draft length ``k``, turned into the i.i.d. alpha with ``sum_{i<=k}
alpha^i = A`` (:func:`alpha_for_acceptance_length`).

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

__all__ = ["K_MAX", "METHODS", "NGRAM_HOST_S", "NGRAM_HOST_S_PER_SEQ", "Speculation",
           "alpha_for_acceptance_length", "draft_model_for", "speculation_for", "speedup_curve",
           "tree_speedup", "turn_off_batch", "with_host_overhead"]

K_MAX = 8
"""Largest draft length searched when none is given."""

METHODS: tuple[str, ...] = ("small-draft", "draft", "mtp", "medusa", "eagle", "eagle3", "ngram")
"""Draft methods ``predict`` prices (the lab's four presets, a named draft model, EAGLE-1/2, n-gram)."""

NGRAM_HOST_S = 20e-6
"""Host time of one n-gram (prompt-lookup) proposal step (estimate)."""
NGRAM_HOST_S_PER_SEQ = 2e-6
"""Host time per sequence of one n-gram proposal step (estimate)."""


def alpha_for_acceptance_length(length: float, k: int) -> float:
    """The i.i.d. per-token acceptance ``alpha`` whose mean accepted length at draft length ``k`` is
    ``length``: ``sum_{i=0}^{k} alpha^i = length`` (increasing in alpha; bisection to 1e-12).

    ``length`` is in ``[1, k + 1]``: 1 when no draft is ever accepted (alpha 0), ``k + 1`` when
    every one is (alpha 1)."""
    from servesim._checks import check_int, check_real

    kk = check_int("k", k, lo=1, hi=64)
    a = check_real("acceptance_length", length, lo=1.0, hi=kk + 1.0)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(mid**i for i in range(kk + 1)) < a:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


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


class _HostDraft:
    """An n-gram proposer: host time only (see :data:`NGRAM_HOST_S`)."""

    def decode_step(self, batch: float, context: float, positions: int = 1) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(gpu_s=NGRAM_HOST_S + NGRAM_HOST_S_PER_SEQ * batch)


def _mtp_module(sm: Any, method: str) -> Any:
    """A mixture-of-experts target's own MTP module (one layer of its kind, the shared LM head)."""
    from servesim.hardware.moe_step import MoEStepModel

    arch = sm.arch
    if method != "mtp":
        raise ParameterError("spec", method, f"mtp (its own module) or ngram for {arch.name}: draft heads "
                             "for "
                             "mixture-of-experts models are not priced yet")
    if not arch.mtp_layers:
        raise ParameterError("spec", method, f"a method {arch.name} has: it has no MTP module "
                             "(num_nextn_predict_layers is 0); use ngram or a draft model")
    parts = None if arch.quantized_parts is None else tuple(
        p for p in arch.quantized_parts if p != "dense_mlp")
    one = replace(arch, layers=1, layer_windows=arch.layer_windows[-1:], layer_moe=(True,),
                  quantized_parts=parts)
    return MoEStepModel(one, sm.gpu, sm.par, dtype=sm.dtype, kv_dtype=sm.kv_dtype, engine=sm.engine,
                        tables=sm.tables)


def draft_model_for(sm: Any, method: str, catalog: Any = None, draft: str | None = None) -> Any:
    """What drafts for ``method`` on the target step model ``sm`` (see the module docstring): a step
    model whose ``decode_step(b, ctx).gpu_s`` is one draft step."""
    if method == "ngram":
        return _HostDraft()
    if draft is not None and method not in ("small-draft", "draft"):
        raise ParameterError("draft", draft, f"given only with --spec draft or small-draft (not {method})")
    if not isinstance(sm, StepModel):
        return _mtp_module(sm, method)
    if method not in ("small-draft", "draft"):
        return StepModel(replace(sm.shape, layers=1), sm.gpu, sm.tp, dtype=sm.dtype, kv_dtype=sm.kv_dtype,
                         engine=sm.engine, tables=sm.tables)
    draft_name = draft
    if draft_name is None:
        try:
            draft_name = resolve_model(sm.shape.name, catalog).draft_model
        except ParameterError:
            draft_name = ""
    if not draft_name:
        raise ParameterError("spec", method, f"a preset with a drafter for {sm.shape.name}: it has no "
                             "draft_model in the catalog (give --draft MODEL, or use mtp, eagle3 or medusa)")
    try:
        dshape = dense_shape(draft_name, catalog)
    except ParameterError as exc:
        raise ParameterError("draft", draft_name, exc.valid) from None
    if dshape.vocab != sm.shape.vocab:
        raise ParameterError("draft", draft_name, f"a model of {sm.shape.name}'s tokenizer: its vocabulary "
                             f"has {dshape.vocab} tokens, the target's {sm.shape.vocab}")
    tp = sm.tp
    while tp > 1 and (dshape.heads % tp or (dshape.kv_heads % tp and tp % dshape.kv_heads)):
        tp //= 2
    return StepModel(dshape, sm.gpu, tp, dtype=sm.dtype, kv_dtype=sm.kv_dtype, engine=sm.engine,
                     tables=sm.tables)


def speculation_for(sm: Any, preset: str, batch: float, context: float, *, k: int | None = None,
                    catalog: Any = None, draft: Any = None, alpha: float | None = None,
                    k_max: int = K_MAX) -> tuple[Speculation, dict[str, float]]:
    """The speculative setting at a running ``batch``: best k (or the given one), d, c, speedup.

    ``alpha`` replaces the preset's (a user's or one fitted from telemetry); ``draft`` is the step
    model that drafts (default: :func:`draft_model_for` of the method)."""
    from servesim.model.speculative import SPECDEC_PRESETS

    if preset not in METHODS:
        raise ParameterError("spec", preset, f"one of {', '.join(METHODS)}")
    if alpha is None:
        if preset in ("eagle", "ngram"):
            raise ParameterError("spec", preset, "given with its measured acceptance (--acceptance-length A "
                                 "at --k K, or --alpha): the lab has no preset for it")
        alpha = SPECDEC_PRESETS["small-draft" if preset == "draft" else preset].alpha
    b = max(1.0, batch)
    dm = draft if draft is not None else draft_model_for(sm, preset, catalog)
    target = sm.decode_step(b, context).total_s
    t_draft = dm.decode_step(b, context).gpu_s
    best: tuple[float, int, float] | None = None
    for kk in ([k] if k is not None else list(range(1, k_max + 1))):
        verify = sm.decode_step(b, context, positions=kk + 1).total_s
        en = sum(alpha**i for i in range(kk + 1))
        s = en * target / (kk * t_draft + verify)
        if best is None or s > best[0]:
            best = (s, kk, verify)
    assert best is not None
    speedup, kk, verify = best
    info = {"k": kk, "alpha": alpha, "acceptance_length": sum(alpha**i for i in range(kk + 1)),
            "d": t_draft / target, "c": (verify / target - 1.0) / kk, "speedup_at_batch": speedup, "batch": b}
    return Speculation(kk, alpha, t_draft), info


def speedup_curve(sm: Any, method: str, context: float, batches: list[int], *, k: int | None = None,
                  alpha: float | None = None, draft: Any = None,
                  catalog: Any = None) -> list[dict[str, float]]:
    """The speedup of the best k (or the given one) at each running batch, from the same step model:
    seed 003's curve, whose crossing of 1 is where speculation stops paying."""
    dm = draft if draft is not None else draft_model_for(sm, method, catalog)
    out = []
    for b in batches:
        _, info = speculation_for(sm, method, float(b), context, k=k, draft=dm, alpha=alpha)
        out.append({"batch": float(b), "k": info["k"], "speedup": info["speedup_at_batch"]})
    return out


def turn_off_batch(sm: StepModel, preset: str, context: float, *, batch_limit: int,
                   catalog: Any = None, draft: Any = None, alpha: float | None = None,
                   k_max: int = K_MAX) -> int | None:
    """The largest batch (powers of two, then bisection) at which the best k still pays.

    None: it pays at every batch up to ``batch_limit``; 0: it pays at no batch.
    """
    dm = draft if draft is not None else draft_model_for(sm, preset, catalog)

    def pays(b: int) -> bool:
        return speculation_for(sm, preset, b, context, draft=dm, alpha=alpha,
                               k_max=k_max)[1]["speedup_at_batch"] > 1.0

    if not pays(1):
        return 0
    lo, hi = 1, 2
    while hi <= batch_limit and pays(hi):
        lo, hi = hi, hi * 2
    if hi > batch_limit:
        return None if pays(batch_limit) else _bisect(pays, lo, batch_limit)
    return _bisect(pays, lo, hi)


def tree_speedup(sm: Any, tree: Any, batch: float, context: float, *, draft: Any) -> float:
    """The speedup of a draft token tree (:class:`servesim.hardware.speculation_physics.TokenTree`)
    priced by the same step model as a chain: ``E[n] t_target / (sum_levels t_draft(B, n_l) +
    t_verify(B, nodes + 1))``, where level ``l`` drafts its ``n_l`` candidates per sequence in one
    forward pass of the drafter (``n_l`` positions) and the target verifies every node at once.  A
    chain (one node per level) gives :func:`speculation_for`'s figure exactly."""
    b = max(1.0, batch)
    target = sm.decode_step(b, context).total_s
    drafting = sum(draft.decode_step(b, context, positions=n).gpu_s if n > 1 else
                   draft.decode_step(b, context).gpu_s for n in tree.level_sizes)
    verify = sm.decode_step(b, context, positions=tree.nodes + 1).total_s
    return float(tree.expected_tokens * target / (drafting + verify))


class _WithHost:
    """A drafter whose every step also pays ``overhead_s`` of host time (``--draft-overhead-us``)."""

    def __init__(self, drafter: Any, overhead_s: float) -> None:
        self.drafter, self.overhead_s = drafter, overhead_s

    def decode_step(self, batch: float, context: float, positions: int = 1) -> Any:
        from types import SimpleNamespace

        st = self.drafter.decode_step(batch, context, positions) if positions > 1 else \
            self.drafter.decode_step(batch, context)
        return SimpleNamespace(gpu_s=st.gpu_s + self.overhead_s)


def with_host_overhead(drafter: Any, overhead_s: float) -> Any:
    """``drafter`` with ``overhead_s`` of host time added to each draft step (itself when 0)."""
    return drafter if overhead_s <= 0 else _WithHost(drafter, overhead_s)


def _bisect(pays: Any, lo: int, hi: int) -> int:
    """Largest b in [lo, hi) with pays(b), given pays(lo) and not pays(hi)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pays(mid):
            lo = mid
        else:
            hi = mid
    return lo
