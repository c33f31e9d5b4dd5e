"""The speculation of the lab's node plan on a measured-kernel node (``plan --model M --gpu G``).

The lab's planner prices speculation with the seed's closed form,

    S(k, alpha, d, c, u) = sum_{i<=k} alpha^i / (k d + 1 + c k g(u)),

and its presets (``servesim.model.speculative.SPECDEC_PRESETS``) are illustrations: an MTP
alpha of 0.85 with d = 0.1 and c = 0.05, searched up to ``--k-max`` drafts.  On a node derived
from a real model that would claim what no engine runs: MTP for a model without an MTP module,
and 4.53 tokens a step at k = 6 for DeepSeek-R1, whose measured chain accepts 3.01 at k = 5.  So a
node from ``--model`` takes the speculation :func:`servesim.plan.predict.speculation_setting` gives
``predict --spec`` for the same model:

* **alpha**: the acceptance ``predict`` resolves (:func:`servesim.plan.predict.resolve_acceptance`):
  the published one for the model's family and the traffic kind at the k it was measured at, or the
  user's ``--acceptance-length`` at ``--k``; a method with no published acceptance keeps the lab's
  alpha and says so;
* **d and c**: the model's own drafter and verify step at the decode batch the node runs at the
  workload's rate (:func:`servesim.plan.capacity.decode_at_load`, the batch the node's TPOT_base is
  priced at): ``d`` = one draft step over the target's step, ``c`` = the verify step's extra over
  the target's step, per draft (:func:`servesim.hardware.speculation.speculation_for`), both over
  the plain step with the overlap scheduler the node's TPOT_base has, where the engine runs the
  speculative cycle without it (:func:`servesim.plan.predict.speculating_step_model`: SGLang's
  speculative worker pays 4.7 ms of host time a cycle after the GPU's);
* **k**: at most the k the acceptance was measured at (``--k-max`` stays a cap), since the i.i.d.
  alpha extrapolates a chain's acceptance poorly beyond it.

Standard library only; nothing here prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from servesim._checks import check_int, check_real
from servesim.hardware.pricer import build_step_model
from servesim.model.speculative import SpecDecPreset
from servesim.plan.capacity import decode_at_load
from servesim.plan.predict import speculating_step_model, speculation_setting

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog
    from servesim.hardware.pricer import Deployment

__all__ = ["NodeSpeculation", "node_speculation"]


@dataclass(frozen=True)
class NodeSpeculation:
    """The lab planner's speculation on a model's node: ``preset`` (alpha, d, c), the largest draft
    length ``k_max`` it may search, the ``batch`` d and c were priced at, and where the acceptance
    came from (``acceptance``)."""

    preset: Any
    k_max: int
    batch: float
    acceptance: str


def node_speculation(dep: Deployment, spec: str, *, isl: int, osl: int, rate_per_node: float, k_max: int,
                     k: int | None = None, acceptance_length: float | None = None,
                     traffic: str | None = None, catalog: Catalog | None = None) -> NodeSpeculation:
    """``spec`` on the node of deployment ``dep`` (a :class:`servesim.plan.predict.Deployment`) serving
    ``rate_per_node`` requests a second of ``isl`` / ``osl`` tokens (see the module docstring).

    Raises ParameterError naming the parameter: a method the model does not have (MTP on a model
    without its module), an acceptance given without its k, a traffic kind with no acceptance."""
    kmax = check_int("k_max", k_max, lo=1)
    p, o = check_int("isl", isl, lo=1), check_int("osl", osl, lo=1)
    rate = check_real("rate", rate_per_node, lo=0.0)
    sm, _, memory = build_step_model(dep, catalog)
    at = decode_at_load(sm, memory, rate, p, o, prefill=False)
    batch = at.batch if at.stable and math.isfinite(at.batch) else float(sm.engine.max_num_seqs)
    batch = max(1.0, batch)
    ctx = p + o / 2.0
    _, info = speculation_setting(sm, spec, batch, ctx, k=k, acceptance_length=acceptance_length,
                                  traffic=traffic, catalog=catalog)
    # The engine may run the speculative cycle on another step (SGLang's speculative worker without
    # its overlap scheduler, at its own host time): d and c are taken on that step and restated
    # against the plain step the node's TPOT_base is, so that 1 + k d + k c is the cycle's time
    # over the plain step, as predict --spec runs it.
    run = speculating_step_model(sm, dep, spec, dict(info), catalog)
    r = run.decode_step(batch, ctx).total_s / sm.decode_step(batch, ctx).total_s
    kk = int(info["k"])
    d = info["d"] * r
    c = max(0.0, ((1.0 + kk * info["c"]) * r - 1.0) / kk)
    preset = SpecDecPreset(spec, alpha=info["alpha"], d=d, c=c,
                           description=f"{spec} on {dep.model}: {info['acceptance']}")
    return NodeSpeculation(preset, min(kmax, kk), batch, info["acceptance"])
