"""The lab's commands on a real model's step model: ``specdec --model`` (the speedup by running batch)
and ``disagg --model`` (each mix's figures with a prediction interval).

Apart from :mod:`servesim.plan.summary` so that the lab's commands without ``--model`` import no
hardware module (tests/cli/test_lab_imports.py); this module imports the pricer at its top.
"""

from __future__ import annotations

import math
from typing import Any

from servesim._checks import ParameterError
from servesim.hardware.acceptance import DEFAULT_TRAFFIC, preset_for, published_alphas
from servesim.hardware.pricer import Pricer
from servesim.hardware.speculation import (
    K_MAX,
    beside_drafter,
    draft_model_for,
    drafter_memory,
    speculation_for,
)
from servesim.hardware.stepmodel import sequences_held
from servesim.model.speculative import lab_preset
from servesim.plan.interval import prediction_interval, requests_in_flight
from servesim.plan.predict import speculation_setting

__all__ = ["SPECDEC_MODEL_BATCHES", "add_disagg_intervals", "specdec_on_model"]


SPECDEC_MODEL_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
"""Running batches ``specdec --model`` tabulates (those the KV cache holds)."""


def _published_row(method: str, family: str, k: int, kind: str) -> str:
    """The published preset ``k`` takes for traffic ``kind``, as predict describes it."""
    return preset_for(method, kind, family, k=k).describe(kind)


def specdec_on_model(sm: Pricer, memory_bytes: float, *, preset: str | None, context: int,
                     alpha: float | None = None, acceptance_length: float | None = None,
                     k: int | None = None, draft: str | None = None,
                     traffic: str | None = None) -> dict[str, Any]:
    """``specdec --model``: the speedup of ``preset`` by running batch on the step model ``sm`` (the
    figures ``predict --spec`` and ``roofline`` print: :func:`servesim.plan.predict.speculation_setting`),
    with d, c and the best k at each batch and the batch above which it stops paying.

    ``preset`` None: eagle3, or mtp for a model with its own MTP module.  Acceptance: the user's
    ``acceptance_length`` at ``k`` or ``alpha``; else the published one for the model's family (chat
    traffic, :func:`servesim.hardware.acceptance.preset_for`), each k at the acceptance measured at
    it or at the nearest k measured, so that the best k at each batch weighs what engines measured
    (DeepSeek-R1's MTP accepts 1.875, 2.58, 2.82, 2.99 and 3.01 tokens a step at k = 1-5, where one
    i.i.d. alpha would keep growing); else the lab's preset alpha (said in the output).  ``traffic``
    picks the published acceptance's kind (default chat), as ``predict --spec`` takes it.

    ``turn_off_batch`` is the one :func:`servesim.hardware.speculation.turn_off_batch` of the setting
    ``predict --spec`` runs for the same acceptance and k (:func:`speculation_setting`: a published
    preset's own k, or the user's), so both commands name the same batch (``turn_off_k`` the k it
    holds, None for the best k at each batch); the table's best k by batch is a search beside it."""
    if preset is None:
        preset = "mtp" if sm.has_mtp else "eagle3"
    cap = sequences_held(sm, memory_bytes, context)
    if cap < 1:
        raise ParameterError("context", context, f"at most {sm.kv_capacity_tokens(memory_bytes):,} tokens: "
                             "what the KV cache of this replica holds")
    found = lab_preset(preset, on_model=True)  # eagle, ngram: none (a published acceptance or refused)
    lab = found.alpha if found is not None else None
    given = acceptance_length is not None or alpha is not None
    name = sm.model_name
    kind = DEFAULT_TRAFFIC if traffic is None else traffic
    # predict --spec's own setting for this acceptance: the turn-off batch both commands print
    _, setting = speculation_setting(sm, preset, 1.0, float(context), k=k, alpha=alpha,
                                     acceptance_length=acceptance_length, draft=draft, kv_max=cap,
                                     traffic=traffic)
    measured = None if given else published_alphas(preset, kind, name,
                                                     [k] if k is not None else range(1, K_MAX + 1))
    if given:
        info = setting
    else:
        _, info = speculation_setting(sm, preset, 1.0, float(context), k=k,
                                      alpha=(measured or {}).get(k or 1, lab) if measured or lab else None,
                                      draft=draft, kv_max=cap, traffic=traffic)
    dm = draft_model_for(sm, preset, None, draft)

    def at_batch(b: float) -> dict[str, Any]:
        """The best k's figures at running batch ``b``: each k at its own published alpha, if any."""
        if measured is None:
            return speculation_for(sm, preset, b, float(context), k=k, draft=dm, alpha=info["alpha"])[1]
        return speculation_for(sm, preset, b, float(context), k=k, draft=dm, alphas=measured)[1]

    if measured is not None:
        _published_acceptance(info, at_batch(1.0), preset, name, kind)
    elif not given and lab is not None:
        info["acceptance"] = f"the lab's {preset} preset: alpha {lab:g} (an illustration, not a measurement)"
    # the drafter's weights and KV come out of the target's KV cache (as predict --spec takes them)
    beside = beside_drafter(sm, drafter_memory(dm, sm, int(info.get("k") or k or 1)))
    cap_plain = cap
    cap = sequences_held(beside, memory_bytes, context)
    rows = [_specdec_row(sm, b, context, at_batch(float(b))) for b in SPECDEC_MODEL_BATCHES if b <= cap]
    off = next((r["batch"] for r in rows if r["speedup"] <= 1.0), None)
    return {"model": name, "gpu": sm.gpu, "tp": sm.tp, "engine": sm.engine.name,
            "context_tokens": context, "preset": preset, "acceptance": info["acceptance"],
            "alpha": info["alpha"], "max_batch": cap, "max_batch_without_draft": cap_plain,
            "draft_weight_bytes_per_gpu": beside.drafter_bytes[0], "rows": rows, "stops_paying_at_batch": off,
            "turn_off_batch": setting["turn_off_batch"], "turn_off_k": setting["turn_off_k"],
            "turn_off_alpha": setting["alpha"],
            "priced_by": "the measured-kernel step model (as predict --spec and roofline price it)"}


def _published_acceptance(info: dict[str, Any], first: dict[str, Any], preset: str, name: str,
                          kind: str) -> None:
    """``info`` (updated in place) at the best k at batch 1 (``first``), each k at its published
    acceptance, and the line that says so."""
    info.update(k=first["k"], alpha=first["alpha"])
    info["acceptance"] = (f"published ({preset}, {kind}): each k at the acceptance measured at it, or at "
                          f"the nearest k measured; at batch 1 the best k = {first['k']} takes "
                          + _published_row(preset, name, first["k"], kind))


def _specdec_row(sm: Pricer, b: int, context: int, at: dict[str, Any]) -> dict[str, Any]:
    """One batch's row of ``specdec --model``: the target's step and the best k's figures ``at`` it."""
    return {"batch": b, "target_step_ms": sm.decode_step(b, context).total_s * 1e3, "k": at["k"],
            "acceptance_length": at["acceptance_length"], "d": at["d"], "c": at["c"],
            "speedup": at["speedup_at_batch"]}


def add_disagg_intervals(data: dict[str, Any], *, level: float, engine: str, moe: bool,
                         fallback: bool) -> dict[str, Any]:
    """``data`` (a :func:`disagg_summary` of a node priced from measured kernels) with a
    ``prediction_interval`` on each mix's colocated and disaggregated figures (mean TTFT as
    ``mean_ttft_ms``, TPOT as ``mean_tpot_ms``: :func:`servesim.plan.interval.prediction_interval`
    of ``engine`` x ``moe`` at the load each node holds).  The errors are those of the engine model
    (``predict``) on published runs; these figures are the closed form on that model's node, which
    ``servesim validate`` checks against simulation, so the basis says so.  The load band: the
    requests each engine holds, rate per node x its latency (Little's law; a decode node's share of
    the rate over the decode nodes)."""
    rate = float(data["workload"]["rate_per_s"])
    rows = []
    for row in data["rows"]:
        out = dict(row)
        for side, nodes in (("colocated", row["colocated"]["nodes"]),
                            ("disaggregated", row["disaggregated"].get("decode_nodes") or 0)):
            fig = dict(row[side])
            pred = {"mean_ttft_ms": fig["ttft_ms"], "mean_tpot_ms": fig["tpot_ms"]}
            flight = (requests_in_flight(None, rate / nodes, fig["ttft_ms"], fig["tpot_ms"],
                                         int(row["output_tokens"])) if nodes and fig["stable"] else math.inf)
            pi = prediction_interval(pred, level=level, engine=engine, moe=moe, in_flight=flight,
                                     fallback=fallback)
            pi["basis"] += "; the figures are the closed form on the engine model's node (servesim validate)"
            fig["prediction_interval"] = {k: v for k, v in pi.items() if v is not None}
            out[side] = fig
        rows.append(out)
    return {**data, "rows": rows}
