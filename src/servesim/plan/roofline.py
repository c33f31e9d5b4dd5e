"""The numbers ``servesim roofline`` shows, as plain dicts (its JSON schema): step times, arithmetic
intensity and speculation priced from GPU and model shape (:func:`roofline_summary`), and the
measured-kernel step model's view beside them (:func:`measured_view`).  Rendering is
:mod:`servesim.render.roofline`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servesim._checks import InputError, ParameterError
from servesim.hardware import roofline as rl
from servesim.hardware import speculation as spm
from servesim.hardware import speculation_physics as sp
from servesim.hardware.acceptance import DEFAULT_TRAFFIC, preset_for, published_alphas
from servesim.hardware.catalog import Catalog
from servesim.hardware.engines import engine_profile
from servesim.hardware.model_config import find_architecture
from servesim.hardware.moe_step import MoEStepModel, Parallelism
from servesim.hardware.names import canonical_gpu, dense_shape
from servesim.hardware.ops import StepTime
from servesim.hardware.pricer import Pricer, moe_dtype
from servesim.hardware.roofline import Efficiency, GPUSpec
from servesim.hardware.shape import ModelShape
from servesim.hardware.stepmodel import StepModel, sequences_held
from servesim.model import speculative  # speculative.SPECDEC_PRESETS: speculative.toml, read on first use
from servesim.plan.stepview import step_view

__all__ = ["DEFAULT_BATCHES", "DEFAULT_CONTEXT", "LAB_UTILIZATIONS", "measured_step_model", "measured_view",
           "roofline_summary"]

DEFAULT_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEFAULT_CONTEXT = 2048
"""Tokens of context each sequence holds during decode (prompt plus output so far)."""
LAB_UTILIZATIONS: tuple[float, ...] = (0.3, 0.5, 0.7, 0.9)
"""The lab's utilizations, each mapped to a batch."""

Row = dict[str, Any]


def roofline_summary(
    model: ModelShape,
    gpu: GPUSpec,
    tp: int,
    *,
    batches: Sequence[int] = DEFAULT_BATCHES,
    context_tokens: int = DEFAULT_CONTEXT,
    k: int = 4,
    k_max: int = 16,
    draft: ModelShape | None = None,
    draft_overhead_s: float = 0.0,
    efficiency: Efficiency | None = None,
    memory_fraction: float | None = None,
    step_model: Pricer | ValueError | None = None,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """Everything ``servesim roofline`` shows, as plain data (times in ms, sizes in bytes or GB).

    ``model`` and ``gpu`` are :class:`servesim.hardware.shape.ModelShape` / ``GPUSpec``;
    ``draft`` is the separate draft model of the small-draft preset (the CLI
    passes ``--draft`` or the model's own ``draft_model``); without one that
    preset is reported as unavailable.

    Speculation (speedups by batch, where to turn it off, chain vs tree) is priced by
    ``step_model`` (the measured-kernel step model, :func:`measured_step_model`) when given, the
    same figures ``predict --spec`` uses (one speedup per model, GPU, batch, method, k and
    acceptance); without one (or a ValueError saying why there is none) by the pure roofline.
    """
    eff = rl.DEFAULT_EFFICIENCY if efficiency is None else efficiency
    frac = rl.DEFAULT_MEMORY_FRACTION if memory_fraction is None else memory_fraction
    L = float(context_tokens)  # the context length, as in the formulas
    kinds = dict(sp.PRESET_DRAFT_KINDS)

    step1 = rl.decode_step(model, gpu, tp=tp, batch=1, context_tokens=L, efficiency=eff)
    pre = rl.prefill_step(model, gpu, tp=tp, prompt_tokens=context_tokens, efficiency=eff)
    cap = rl.max_batch(model, gpu, tp=tp, context_tokens=L, memory_fraction=frac)
    room = rl.kv_room_bytes(model, gpu, tp=tp, memory_fraction=frac)

    sm = None if isinstance(step_model, ValueError) else step_model
    by_step_model = sm is not None
    rows = _batch_rows(model, gpu, tp, batches, L, k, eff, cap, kinds)
    presets = _preset_entries(model, draft, kinds, by_step_model, step_model)

    why = str(step_model) if isinstance(step_model, ValueError) else "not given"
    pricer = f"measured-kernel step model (none here: {why})"
    if sm is not None:
        _step_model_speculation(sm, rows, presets, L, k_max=k_max, draft=draft,
                                overhead_s=draft_overhead_s, catalog=catalog, memory_bytes=gpu.memory_bytes)
        pricer = f"measured-kernel step model ({sm.tables_note})"

    u_map = []
    for u in LAB_UTILIZATIONS:
        b_u = rl.batch_for_utilization(u, model, gpu, tp=tp, context_tokens=L, efficiency=eff)
        u_map.append({"u": u, "batch": b_u})
    u_max = rl.utilization(model, gpu, tp=tp, batch=1e6, context_tokens=L, efficiency=eff)

    return {
        "model": model.name,
        "gpu": gpu.name,
        "tp": tp,
        "context_tokens": context_tokens,
        "assumptions": _assumptions(eff, frac, pricer, draft_overhead_s),
        **_model_figures(model, gpu, tp, eff, room, cap),
        **_pass_figures(step1, pre, context_tokens, gpu, eff),
        "intensity_k": k,
        "verify_ridge_batch": gpu.ridge_flops_per_byte / (k + 1) * model.weight_bytes_per_param / 2.0,
        "rows": rows,
        "presets": presets,
        "u_to_batch": u_map,
        "u_max": u_max,
    }


def _batch_rows(model: ModelShape, gpu: GPUSpec, tp: int, batches: Sequence[int], context: float, k: int,
                eff: Efficiency, cap: int, kinds: dict[str, str]) -> list[Row]:
    """One row per decode batch: the roofline's step time, utilization, bound and the intensities of a
    plain and a (k+1)-position verify step; the speculation figures are left empty (None) for the step
    model to fill."""
    rows: list[Row] = []
    for b in batches:
        cost = rl.decode_cost(model, tp=tp, batch=b, context_tokens=context)
        st = rl.step_time(cost, gpu, eff)
        spec = rl.decode_cost(model, tp=tp, batch=b, context_tokens=context, positions=k + 1)
        speedups: dict[str, float | None] = dict.fromkeys(kinds)  # the step model's, below
        ks: dict[str, int | None] = dict.fromkeys(kinds)
        rows.append({
            "batch": b,
            "fits_memory": b <= cap,
            "decode_step_ms": st.total_s * 1e3,
            "decode_tokens_per_s": b / st.total_s,
            "u": rl.compute_share(st, gpu, eff),
            "bound": rl.gemm_bound(st, gpu, eff),
            "weights_intensity_flops_per_byte": cost.weights_intensity_flops_per_byte,
            "spec_weights_intensity_flops_per_byte": spec.weights_intensity_flops_per_byte,
            "seed_spec_intensity_b_plus_k": b + k,
            "intensity_flops_per_byte": cost.intensity_flops_per_byte,
            "speedup": speedups,
            "best_k": ks,
        })
    return rows


def _preset_entries(model: ModelShape, draft: ModelShape | None, kinds: dict[str, str], by_step_model: bool,
                    step_model: Pricer | ValueError | None) -> list[Row]:
    """One entry per speculation preset: its lab alpha, d and c, and whether it can be priced here
    (a separate drafter needs a draft model, every preset a step model), with the reason when not."""
    presets: list[Row] = []
    for name, kind in kinds.items():
        alpha = speculative.SPECDEC_PRESETS[name].alpha
        seed = speculative.SPECDEC_PRESETS[name]
        separate = kind == "separate"
        entry: Row = {"name": name, "kind": kind, "alpha": alpha, "seed_d": seed.d, "seed_c": seed.c,
                      "draft_model": draft.name if (separate and draft is not None) else None}
        none = {"available": False, "turn_off_batch": None, "pays_from_batch": None,
                "pays_at_memory_cap": None}
        if separate and draft is None:
            entry.update({**none, "note": f"no draft model for {model.name}: pass --draft MODEL"})
        elif not by_step_model:
            entry.update({**none, "note": "speculation is priced by the measured-kernel step model only, and "
                          f"there is none here: {step_model}"})
        else:  # the step model prices it below (_step_model_speculation)
            entry.update({"available": True, "tree_vs_chain": None})
        presets.append(entry)
    return presets


def _assumptions(eff: Efficiency, frac: float, pricer: str, draft_overhead_s: float) -> Row:
    """The efficiencies, memory share and modelling assumptions the summary states."""
    return {
        "memory_efficiency": eff.memory,
        "compute_efficiency": eff.compute,
        "interconnect_efficiency": eff.interconnect,
        "memory_fraction": frac,
        "step": "weight GEMMs, attention and TP all-reduces priced one after another, "
                "each at max(FLOPs / roof, bytes / roof)",
        "intensity": "speculative step pushes B (k+1) tokens through the weights (the B + k rule of "
                     "thumb counts one speculating sequence)",
        "acceptance": "i.i.d. per drafted token, alpha from the lab's presets",
        "speculation_priced_by": pricer,
        "draft_overhead_us": draft_overhead_s * 1e6,
        "not_modelled": "kernel-launch and scheduling overheads, all-reduce latency, "
                        "batch composition (every sequence holds the same context)",
    }


def _model_figures(model: ModelShape, gpu: GPUSpec, tp: int, eff: Efficiency, room: float, cap: int) -> Row:
    """The GPU's peaks and ridge points, the model's weights and KV cache per token and per GPU, the KV
    room and the largest batch that fits."""
    return {
        "gpu_peaks": {
            "hbm_bytes_per_s": gpu.hbm_bytes_per_s,
            "flops_per_s": gpu.flops_per_s,
            "memory_bytes": gpu.memory_bytes,
            "interconnect_bytes_per_s": gpu.interconnect_bytes_per_s,
        },
        "ridge_flops_per_byte": gpu.ridge_flops_per_byte,
        "ridge_effective_flops_per_byte": rl.ridge_flops_per_byte(gpu, eff),
        "params": model.params,
        "active_params": model.active_params,
        "weight_bytes": model.weight_bytes(),
        "weight_bytes_per_gpu": model.weight_bytes() / tp,
        "attention": model.attention,
        "kv_bytes_per_token": model.kv_bytes_per_token(),
        "kv_shards": model.kv_shards(tp),
        "kv_room_bytes_per_gpu": room,
        "max_batch": cap,
    }


def _pass_figures(step1: StepTime, pre: StepTime, context_tokens: int, gpu: GPUSpec, eff: Efficiency) -> Row:
    """The batch-1 decode step (its parts, bound and bytes streamed) and the prefill of one prompt."""
    return {
        "decode_step_ms": step1.total_s * 1e3,
        "decode_step_parts_ms": {
            "weights": step1.gemm_s * 1e3, "attention": step1.attention_s * 1e3,
            "allreduce": step1.allreduce_s * 1e3,
        },
        "decode_bound": rl.gemm_bound(step1, gpu, eff),
        "decode_streamed_bytes_per_gpu": sum(op.nbytes for op in step1.ops),
        "prefill_ms": pre.total_s * 1e3,
        "prefill_tokens_per_s": context_tokens / pre.total_s,
        "prefill_bound": rl.gemm_bound(pre, gpu, eff),
    }


def _hybrid(name: str) -> ModelShape | None:
    """The architecture of a dense model with gated-delta-net layers (Qwen3.5-27B: the MoE step model
    prices it, with no experts), else None."""
    try:
        arch = find_architecture(name)
    except InputError:  # a config.json that does not read: no hybrid architecture to price
        return None
    return arch if arch is not None and arch.linear_layers else None


def measured_step_model(model: ModelShape, gpu: GPUSpec, gpu_name: str, tp: int, *, engine: str, dtype: str,
                        kv_dtype: str, catalog: Catalog | None = None, dp: int = 1, ep: int = 1,
                        ep_comm: str | None = None) -> StepModel | MoEStepModel:
    """The measured-kernel step model of a model on ``tp x dp`` GPUs (dense on ``tp``, or MoE with its
    own step model, ``ep``-way expert parallel and the attention-DP ranks' exchange ``ep_comm``,
    :data:`servesim.hardware.engines.EP_COMMS`).  Raises ValueError saying why there is none."""
    gname = canonical_gpu(gpu_name, catalog)
    eng = engine_profile(engine, gpu=gname, memory_gib=gpu.memory_bytes / 2**30, tp=tp * dp, dp=dp)
    arch = (find_architecture(model.name) if model.experts > 1 or model.attention == "mla"
            else _hybrid(model.name))
    if arch is None and (dp > 1 or ep > 1):
        raise ParameterError("dp", dp, f"1 with ep 1: --dp and --ep apply to mixture-of-experts models, not "
                             f"{model.name}")
    if arch is not None:  # the MoE / MLA step model of its split (speculation: its own MTP module)
        # bf16 (the command's default) means the checkpoint's own format; fp8 / fp4 as predict reads them
        par = Parallelism(tp, dp, ep)
        own = moe_dtype("auto" if dtype == "bf16" else dtype, arch, gname, par)
        return MoEStepModel(arch, gname, par, dtype=own, kv_dtype=kv_dtype, engine=eng, ep_comm=ep_comm)
    shape = dense_shape(model, catalog)
    return StepModel(shape, gname, tp, dtype=dtype, kv_dtype=kv_dtype, engine=eng, catalog=catalog)


def measured_view(sm: Pricer, memory_bytes: float, *, batches: Sequence[int] = DEFAULT_BATCHES,
                  context_tokens: int = DEFAULT_CONTEXT) -> dict[str, Any]:
    """The measured-kernel step model's view (:func:`servesim.plan.stepview.step_view`) of ``sm``,
    or why there is none (``sm`` a ValueError: ``available`` False and a ``note``)."""
    if isinstance(sm, ValueError):
        return {"available": False, "note": str(sm)}
    return {"available": True, **step_view(sm, batches, context_tokens, memory_bytes)}


def _step_model_speculation(sm: Pricer, rows: list[Row], presets: list[Row], context: float, *, k_max: int,
                            draft: ModelShape | None, overhead_s: float, catalog: Catalog | None,
                            memory_bytes: float) -> None:
    """Replace the roofline's speculation figures in ``rows`` and ``presets`` by ``sm``'s
    (:mod:`servesim.hardware.speculation`: the draft's real cost, the verify pass of k + 1
    positions, the engine's host time), the plain step each speedup is against by ``sm``'s
    (``priced_step_ms``, ``priced_tokens_per_s``), and the drafter's memory as ``predict`` takes it
    (:func:`servesim.hardware.speculation.drafter_memory`: its weights and KV out of the KV cache of
    ``memory_bytes`` GPUs, the batch that still fits at ``context``)."""
    plain_cap = sequences_held(sm, memory_bytes, context)

    for r in rows:
        st = sm.decode_step(r["batch"], context)
        r["priced_step_ms"] = st.total_s * 1e3
        r["priced_tokens_per_s"] = r["batch"] / st.total_s
    family = sm.model_name
    for entry in presets:
        name, alpha = entry["name"], entry["alpha"]
        # each k at the chat acceptance a source measured on this model at (or nearest) that k, where
        # one is published (acceptance.toml); else the lab's preset alpha for every k
        alphas = (published_alphas(name, DEFAULT_TRAFFIC, family, range(1, k_max + 1))
                  if name != "small-draft" or draft is None else None)
        lab: float | None = None if alphas is not None else alpha
        try:
            if name == "mtp" and not sm.is_moe:
                raise ValueError(f"{sm.model_name} has no MTP module (num_nextn_predict_layers is 0; "
                                 "DeepSeek-V3 family models have one)")
            dm = spm.with_host_overhead(spm.draft_model_for(
                sm, name, catalog, draft.name if (draft is not None and name == "small-draft") else None),
                overhead_s)
            _, at1 = spm.speculation_for(sm, name, 1, context, draft=dm, alpha=lab, k_max=k_max,
                                         alphas=alphas)
        except ValueError as exc:
            for r in rows:
                r["speedup"][name], r["best_k"][name] = None, None
            entry.clear()
            entry.update({"name": name, "kind": sp.PRESET_DRAFT_KINDS[name], "alpha": alpha,
                          "available": False, "turn_off_batch": None, "pays_from_batch": None,
                          "pays_at_memory_cap": None, "draft_model": None,
                          "note": str(getattr(exc, "valid", exc))})
            continue
        if alphas is not None:
            entry["alpha"] = alpha = at1["alpha"]
            entry["acceptance"] = ("published: each k at the chat acceptance measured at it or at the "
                                   "nearest k measured; at B = 1 the best k takes "
                                   + preset_for(name, DEFAULT_TRAFFIC, family, k=int(at1["k"])).short)
        for r in rows:
            _, info = spm.speculation_for(sm, name, r["batch"], context, draft=dm, alpha=lab, k_max=k_max,
                                          alphas=alphas)
            r["speedup"][name], r["best_k"][name] = info["speedup_at_batch"], info["k"]
        w, kv = spm.drafter_memory(dm, sm, int(at1["k"]))
        cap_d = sequences_held(spm.beside_drafter(sm, (w, kv)), memory_bytes, context)
        entry.update({"draft_weight_bytes_per_gpu": w, "draft_kv_bytes_per_token_per_gpu": kv,
                      "max_batch_with_draft": cap_d, "max_batch_without_draft": plain_cap})
        limit = max(1, cap_d)
        off = spm.turn_off_batch(sm, name, context, batch_limit=limit, draft=dm, alpha=lab, k_max=k_max,
                                 alphas=alphas)
        width = int(at1["k"]) + 1
        chain = spm.speculation_for(sm, name, 1, context, draft=dm, alpha=alpha, k=width - 1)[1]
        tree = sp.best_tree(width - 1, sp.rank_acceptance(alpha, 4))
        entry.update({
            "turn_off_batch": off, "pays_from_batch": None if off == 0 else 1, "batch_limit": limit,
            "pays_at_memory_cap": off is None, "best_k_batch1": at1["k"],
            "speedup_batch1": at1["speedup_at_batch"], "d_batch1": at1["d"], "c_batch1": at1["c"],
            "tree_vs_chain": {
                "batch": 1, "width": width, "chain_expected_tokens": chain["acceptance_length"],
                "chain_speedup": chain["speedup_at_batch"], "tree_levels": list(tree.level_sizes),
                "tree_expected_tokens": tree.expected_tokens,
                "tree_speedup": spm.tree_speedup(sm, tree, 1, context, draft=dm, method=name),
            },
        })
