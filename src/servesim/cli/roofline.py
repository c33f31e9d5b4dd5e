"""CLI command ``servesim roofline``: step times, intensity and speculation from hardware (issue 4).

``roofline_summary`` computes the numbers as plain dicts (the JSON schema);
``roofline_text`` renders them; ``register`` adds the subcommand.  Nothing
here prints: :mod:`servesim.cli.main` does.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from servesim.cli.args import Output, add_format, choice, integer, number, plot_path

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.roofline import Efficiency, GPUSpec, ModelSpec
    from servesim.hardware.speculation_physics import Drafter

__all__ = ["DEFAULT_BATCHES", "DEFAULT_CONTEXT", "SEED_US", "register", "roofline_summary", "roofline_text"]

DEFAULT_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEFAULT_CONTEXT = 2048
"""Tokens of context each sequence holds during decode (prompt plus output so far)."""
SEED_US: tuple[float, ...] = (0.3, 0.5, 0.7, 0.9)
"""The seed's utilizations mapped to a batch."""

Row = dict[str, Any]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``roofline``."""
    from servesim.hardware.engines import ENGINES
    from servesim.hardware.precision import KV_DTYPES, WEIGHT_DTYPES
    from servesim.hardware.roofline import DEFAULT_EFFICIENCY, DEFAULT_MEMORY_FRACTION

    eff = DEFAULT_EFFICIENCY
    p = sub.add_parser(
        "roofline",
        help="step times, arithmetic intensity and speculation priced from GPU and model shape",
        description="Prices decode and prefill on the roofline for a catalog model on tp GPUs, and "
        "each speculative preset's speedup by batch, with the batch above which to turn it off.",
    )
    p.add_argument("--model", required=True, help="catalog model or Hugging Face id, e.g. llama-3-70b or "
                   "meta-llama/Llama-3.1-70B-Instruct")
    p.add_argument("--gpu", required=True, help="catalog GPU, e.g. h100-sxm (or h100_sxm)")
    p.add_argument("--tp", type=integer(1, hi=64), default=1,
                   help="tensor-parallel GPUs per replica, 1-64, dividing the heads (default 1)")
    p.add_argument("--batch", type=integer(1, hi=100_000), nargs="+", default=None, metavar="B",
                   help=f"decode batches to tabulate (default {' '.join(map(str, DEFAULT_BATCHES))})")
    p.add_argument("--context", type=integer(1, hi=10_000_000), default=DEFAULT_CONTEXT,
                   help=f"context tokens per sequence; also the prefill prompt (default {DEFAULT_CONTEXT})")
    p.add_argument("--k", type=integer(1, hi=64), default=4,
                   help="draft length for the intensity table, 1-64 (default 4)")
    p.add_argument("--k-max", type=integer(1, hi=64), default=16,
                   help="largest draft length searched, 1-64 (default 16)")
    p.add_argument("--draft", default=None,
                   help="catalog model drafting for small-draft (default: the model's draft_model)")
    p.add_argument("--draft-overhead-us", type=number(0.0, 1e6, scale=1e-6), default=0.0, metavar="US",
                   dest="draft_overhead_s",
                   help="host time per draft step in microseconds, >= 0 (default 0: not modelled)")
    p.add_argument("--memory-efficiency", type=number(0.0, 1.0, lo_open=True), default=eff.memory,
                   help=f"fraction of peak HBM bandwidth reached, in (0, 1] (default {eff.memory:g})")
    p.add_argument("--compute-efficiency", type=number(0.0, 1.0, lo_open=True), default=eff.compute,
                   help=f"fraction of dense BF16 peak reached, in (0, 1] (default {eff.compute:g})")
    p.add_argument("--interconnect-efficiency", type=number(0.0, 1.0, lo_open=True),
                   default=eff.interconnect,
                   help=f"fraction of GPU-to-GPU bandwidth reached, in (0, 1] (default {eff.interconnect:g})")
    p.add_argument("--memory-fraction", type=number(0.0, 1.0, lo_open=True), default=DEFAULT_MEMORY_FRACTION,
                   help=f"share of HBM for weights and KV, in (0, 1] (default {DEFAULT_MEMORY_FRACTION:g})")
    p.add_argument("--dtype", type=choice(WEIGHT_DTYPES, "dtype"), default="bf16",
                   help="weights and GEMMs for the measured-kernel step: bf16 (default), fp8, fp4 (B200)")
    p.add_argument("--kv-dtype", type=choice(KV_DTYPES, "kv-dtype"), default="bf16",
                   help="KV cache for the measured-kernel step: bf16 (default) or fp8")
    p.add_argument("--engine", type=choice(ENGINES, "engine"), default="vllm",
                   help="engine whose host time and budgets the measured-kernel step uses (default vllm)")
    p.add_argument("--catalog", action="append", default=[], metavar="FILE",
                   help="a TOML file of extra [gpu.NAME] / [model.NAME] / [link.NAME] entries (repeatable)")
    p.add_argument("--plot", type=plot_path, default=None, metavar="FILE.png|svg",
                   help="save speedup vs batch per preset and arithmetic intensity vs the ridge point")
    add_format(p)
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> Output:
    from servesim.hardware.catalog import load_catalog
    from servesim.hardware.names import check_tp, resolve_gpu, resolve_model
    from servesim.hardware.roofline import Efficiency

    cat = load_catalog(*args.catalog)
    model = resolve_model(args.model, cat)
    gpu = resolve_gpu(args.gpu, cat)
    check_tp(model, args.tp)
    draft_name = args.draft or model.draft_model
    draft = None
    if draft_name:
        from servesim._checks import ParameterError

        try:
            draft = resolve_model(draft_name, cat)
        except ParameterError as exc:
            raise ParameterError("--draft", draft_name, exc.valid) from None
    data = roofline_summary(
        model,
        gpu,
        args.tp,
        batches=args.batch or DEFAULT_BATCHES,
        context_tokens=args.context,
        k=args.k,
        k_max=args.k_max,
        draft=draft,
        draft_overhead_s=args.draft_overhead_s,
        efficiency=Efficiency(args.memory_efficiency, args.compute_efficiency, args.interconnect_efficiency),
        memory_fraction=args.memory_fraction,
    )
    data["measured"] = _measured(args, cat, model, gpu)
    if args.plot is not None:
        from servesim.render import plots

        fig, axes = plots.figure(2)
        plots.plot_roofline_speedup(axes[0], data["rows"], data["presets"])
        plots.plot_roofline_intensity(axes[1], data["rows"], data["ridge_flops_per_byte"],
                                      data["intensity_k"])
        plots.save(fig, args.plot)
    return Output(data, roofline_text(data), _rows(data))


def _measured(args: argparse.Namespace, cat: Any, model: ModelSpec, gpu: GPUSpec) -> dict[str, Any]:
    """The measured-kernel step model's view (dense models only), or why there is none."""
    from servesim.hardware.engines import engine_profile
    from servesim.hardware.names import canonical_gpu, dense_shape
    from servesim.hardware.stepmodel import StepModel
    from servesim.model.speculative import SPECDEC_PRESETS
    from servesim.plan.stepview import step_view

    try:
        shape = dense_shape(model, cat)
        gname = canonical_gpu(args.gpu, cat)
        eng = engine_profile(args.engine, gpu=gname, memory_gib=gpu.memory_bytes / 2**30)
        sm = StepModel(shape, gname, args.tp, dtype=args.dtype, kv_dtype=args.kv_dtype, engine=eng,
                       catalog=cat)
    except ValueError as exc:
        return {"available": False, "note": str(exc)}
    view = step_view(sm, args.batch or DEFAULT_BATCHES, args.context, gpu.memory_bytes, list(SPECDEC_PRESETS),
                     catalog=cat)
    return {"available": True, **view}


def _drafters(draft: ModelSpec | None, overhead_s: float) -> dict[str, Drafter | None]:
    from servesim.hardware.speculation_physics import PRESET_DRAFT_KINDS, Drafter

    out: dict[str, Drafter | None] = {}
    for preset, kind in PRESET_DRAFT_KINDS.items():
        if kind == "separate":
            out[preset] = None if draft is None else Drafter(kind, draft, overhead_s=overhead_s)
        else:
            out[preset] = Drafter(kind, overhead_s=overhead_s)
    return out


def roofline_summary(
    model: ModelSpec,
    gpu: GPUSpec,
    tp: int,
    *,
    batches: Sequence[int] = DEFAULT_BATCHES,
    context_tokens: int = DEFAULT_CONTEXT,
    k: int = 4,
    k_max: int = 16,
    draft: ModelSpec | None = None,
    draft_overhead_s: float = 0.0,
    efficiency: Efficiency | None = None,
    memory_fraction: float | None = None,
) -> dict[str, Any]:
    """Everything ``servesim roofline`` shows, as plain data (times in ms, sizes in bytes or GB).

    ``model`` and ``gpu`` are :class:`servesim.hardware.roofline.ModelSpec` / ``GPUSpec``;
    ``draft`` is the separate draft model of the small-draft preset (the CLI
    passes ``--draft`` or the model's own ``draft_model``); without one that
    preset is reported as unavailable.
    """
    from servesim.hardware import roofline as rl
    from servesim.hardware import speculation_physics as sp
    from servesim.model.speculative import SPECDEC_PRESETS

    eff = rl.DEFAULT_EFFICIENCY if efficiency is None else efficiency
    frac = rl.DEFAULT_MEMORY_FRACTION if memory_fraction is None else memory_fraction
    L = float(context_tokens)  # the context length, as in the formulas
    drafters = _drafters(draft, draft_overhead_s)

    step1 = rl.decode_step(model, gpu, tp=tp, batch=1, context_tokens=L, efficiency=eff)
    pre = rl.prefill_step(model, gpu, tp=tp, prompt_tokens=context_tokens, efficiency=eff)
    cap = rl.max_batch(model, gpu, tp=tp, context_tokens=L, memory_fraction=frac)
    room = rl.kv_room_bytes(model, gpu, tp=tp, memory_fraction=frac)
    ridge = gpu.ridge_flops_per_byte

    rows: list[Row] = []
    for b in batches:
        st = rl.decode_step(model, gpu, tp=tp, batch=b, context_tokens=L, efficiency=eff)
        spec = rl.decode_cost(model, tp=tp, batch=b, context_tokens=L, positions=k + 1)
        speedups: dict[str, float | None] = {}
        ks: dict[str, int | None] = {}
        for name, dr in drafters.items():
            if dr is None:
                speedups[name], ks[name] = None, None
                continue
            pt = sp.best_k(dr, SPECDEC_PRESETS[name].alpha, model, gpu, tp=tp, batch=b,
                           context_tokens=L, k_max=k_max, efficiency=eff)
            speedups[name], ks[name] = pt.speedup, pt.drafted
        rows.append({
            "batch": b,
            "fits_memory": b <= cap,
            "decode_step_ms": st.total_s * 1e3,
            "decode_tokens_per_s": b / st.total_s,
            "u": st.compute_utilization,
            "bound": st.linear_bound,
            "weights_intensity_flops_per_byte": st.cost.weights_intensity_flops_per_byte,
            "spec_weights_intensity_flops_per_byte": spec.weights_intensity_flops_per_byte,
            "seed_spec_intensity_b_plus_k": b + k,
            "intensity_flops_per_byte": st.cost.intensity_flops_per_byte,
            "speedup": speedups,
            "best_k": ks,
        })

    presets: list[Row] = []
    for name, dr in drafters.items():
        alpha = SPECDEC_PRESETS[name].alpha
        seed = SPECDEC_PRESETS[name]
        entry: Row = {"name": name, "kind": sp.PRESET_DRAFT_KINDS[name], "alpha": alpha,
                      "seed_d": seed.d, "seed_c": seed.c,
                      "draft_model": dr.model.name if (dr is not None and dr.model is not None) else None}
        if dr is None:
            entry.update({"available": False, "turn_off_batch": None, "pays_from_batch": None,
                          "pays_at_memory_cap": None,
                          "note": f"no draft model for {model.name}: pass --draft MODEL"})
            presets.append(entry)
            continue
        p1 = sp.best_k(dr, alpha, model, gpu, tp=tp, batch=1, context_tokens=L, k_max=k_max,
                       efficiency=eff)
        stretch = sp.paying_batches(dr, alpha, model, gpu, tp=tp, context_tokens=L, k_max=k_max,
                                    efficiency=eff)
        off = 0 if stretch is None else stretch[1]
        w, kv = sp.draft_memory(dr, model, tp=tp, k=p1.drafted)
        cap_d = sp.max_batch_with_drafter(dr, model, gpu, tp=tp, context_tokens=L, k=p1.drafted,
                                          memory_fraction=frac)
        at_cap = None  # does it still pay at the largest batch that fits beside the drafter?
        if cap_d >= 1:
            at_cap = sp.best_k(dr, alpha, model, gpu, tp=tp, batch=cap_d, context_tokens=L, k_max=k_max,
                               efficiency=eff).speedup > 1.0
        chain_pt, tree_pt = sp.compare_chain_tree(dr, alpha, p1.width, model, gpu, tp=tp, batch=1,
                                                  context_tokens=L, efficiency=eff)
        tree = sp.best_tree(p1.drafted, sp.rank_acceptance(alpha, 4))
        entry.update({
            "available": True,
            "turn_off_batch": off,
            "pays_from_batch": None if stretch is None else stretch[0],
            "batch_limit": sp.DEFAULT_BATCH_LIMIT,
            "pays_at_memory_cap": at_cap,
            "best_k_batch1": p1.drafted,
            "speedup_batch1": p1.speedup,
            "d_batch1": p1.d,
            "c_batch1": p1.c,
            "draft_weight_bytes_per_gpu": w,
            "draft_kv_bytes_per_token_per_gpu": kv,
            "max_batch_with_draft": cap_d,
            "tree_vs_chain": {
                "batch": 1,
                "width": p1.width,
                "chain_expected_tokens": chain_pt.expected_tokens,
                "chain_speedup": chain_pt.speedup,
                "tree_levels": list(tree.level_sizes),
                "tree_expected_tokens": tree_pt.expected_tokens,
                "tree_speedup": tree_pt.speedup,
            },
        })
        presets.append(entry)

    u_map = []
    for u in SEED_US:
        b_u = rl.batch_for_utilization(u, model, gpu, tp=tp, context_tokens=L, efficiency=eff)
        u_map.append({"u": u, "batch": b_u})
    u_max = rl.utilization(model, gpu, tp=tp, batch=1e6, context_tokens=L, efficiency=eff)

    return {
        "model": model.name,
        "gpu": gpu.name,
        "tp": tp,
        "context_tokens": context_tokens,
        "assumptions": {
            "memory_efficiency": eff.memory,
            "compute_efficiency": eff.compute,
            "interconnect_efficiency": eff.interconnect,
            "memory_fraction": frac,
            "step": "weight GEMMs, attention and TP all-reduces priced one after another, "
                    "each at max(FLOPs / roof, bytes / roof)",
            "intensity": "speculative step pushes B (k+1) tokens through the weights (the B + k rule of "
                         "thumb counts one speculating sequence)",
            "acceptance": "i.i.d. per drafted token, alpha from the lab's presets",
            "draft_overhead_us": draft_overhead_s * 1e6,
            "not_modelled": "kernel-launch and scheduling overheads, all-reduce latency, "
                            "batch composition (every sequence holds the same context)",
        },
        "gpu_peaks": {
            "hbm_bytes_per_s": gpu.hbm_bytes_per_s,
            "flops_per_s": gpu.flops_per_s,
            "memory_bytes": gpu.memory_bytes,
            "interconnect_bytes_per_s": gpu.interconnect_bytes_per_s,
        },
        "ridge_flops_per_byte": ridge,
        "ridge_effective_flops_per_byte": rl.ridge_flops_per_byte(gpu, eff),
        "params": model.params,
        "active_params": model.active_params,
        "weight_bytes": model.weight_bytes,
        "weight_bytes_per_gpu": model.weight_bytes / tp,
        "attention": model.attention,
        "kv_bytes_per_token": model.kv_bytes_per_token,
        "kv_shards": model.kv_shards(tp),
        "kv_room_bytes_per_gpu": room,
        "max_batch": cap,
        "decode_step_ms": step1.total_s * 1e3,
        "decode_step_parts_ms": {
            "weights": step1.linear_s * 1e3, "attention": step1.attention_s * 1e3,
            "allreduce": step1.comm_s * 1e3,
        },
        "decode_bound": step1.linear_bound,
        "decode_streamed_bytes_per_gpu": step1.cost.hbm_bytes,
        "prefill_ms": pre.total_s * 1e3,
        "prefill_tokens_per_s": context_tokens / pre.total_s,
        "prefill_bound": pre.linear_bound,
        "intensity_k": k,
        "verify_ridge_batch": ridge / (k + 1) * model.weight_bytes_per_param / 2.0,
        "rows": rows,
        "presets": presets,
        "u_to_batch": u_map,
        "u_max": u_max,
    }


def _rows(d: dict[str, Any]) -> list[Row]:
    out: list[Row] = [{"table": "batch", **r} for r in d["rows"]]
    for p in d["presets"]:
        flat = {k: v for k, v in p.items() if k != "tree_vs_chain"}
        tree = {f"tree_{k}": v for k, v in p.get("tree_vs_chain", {}).items()}
        out.append({"table": "presets", **flat, **tree})
    return out


def _levels(sizes: Sequence[int]) -> str:
    """Nodes per tree level as '2-2-1', or 'chain' when every level has one node."""
    return "chain" if all(n == 1 for n in sizes) else "-".join(map(str, sizes))


def _g(x: float) -> str:
    """A number in 3-4 significant digits without exponent for everyday sizes."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def roofline_text(d: dict[str, Any]) -> str:
    from servesim.render.text import table

    a, g = d["assumptions"], d["gpu_peaks"]
    bw, fl = g["hbm_bytes_per_s"], g["flops_per_s"]
    tp = d["tp"]
    out: list[str] = []
    out.append(f"ROOFLINE: {d['model']} on {tp} x {d['gpu']} (tp={tp}), "
               f"{d['context_tokens']:,} tokens of context")
    out.append(
        f"  efficiency: {a['memory_efficiency']:.0%} of HBM bandwidth, {a['compute_efficiency']:.0%} of "
        f"dense BF16, {a['interconnect_efficiency']:.0%} of GPU-to-GPU links; "
        f"{a['memory_fraction']:.0%} of HBM usable"
    )
    out.append("  a step = weight GEMMs + attention + all-reduces, each max(FLOPs / roof, bytes / roof)")
    out.append("")
    if "measured" in d:
        out += _measured_text(d["measured"])
    out.append("[1] Hardware and model")
    out.append(
        f"  ridge point     = {fl / 1e12:g}e12 FLOP/s / {bw / 1e12:g}e12 B/s = "
        f"{d['ridge_flops_per_byte']:.0f} FLOP/byte (at the stated efficiencies: "
        f"{d['ridge_effective_flops_per_byte']:.0f})"
    )
    wpp = d["weight_bytes"] / d["params"]
    out.append(
        f"  weights         = {d['params'] / 1e9:g}e9 params x {wpp:g} B = {d['weight_bytes'] / 1e9:.1f} GB, "
        f"{d['weight_bytes_per_gpu'] / 1e9:.1f} GB per GPU"
        + (f" ({d['active_params'] / 1e9:g}e9 active per token)" if d["active_params"] < d["params"] else "")
    )
    out.append(
        f"  KV cache        = {d['kv_bytes_per_token']:,.0f} B/token ({d['attention'].upper()}), "
        f"split over {d['kv_shards']} of the {tp} GPUs"
    )
    room = d["kv_room_bytes_per_gpu"]
    mem = (f"{a['memory_fraction']:g} x {g['memory_bytes'] / 1e9:.1f} GB - "
           f"{d['weight_bytes_per_gpu'] / 1e9:.1f} GB")
    if d["max_batch"] >= 1:
        out.append(f"  memory          = {mem} = {room / 1e9:.1f} GB of KV room per GPU -> "
                   f"max batch {d['max_batch']:,} at {d['context_tokens']:,} tokens")
    else:
        out.append(f"  memory          = {mem} = {room / 1e9:.1f} GB: DOES NOT FIT (raise --tp)")
    parts = d["decode_step_parts_ms"]
    out.append(
        f"  decode, batch 1 = {d['decode_step_ms']:.2f} ms ({d['decode_bound']}-bound): weights "
        f"{parts['weights']:.2f} + attention {parts['attention']:.2f} + all-reduce "
        f"{parts['allreduce']:.3f} ms; ~ {d['decode_streamed_bytes_per_gpu'] / 1e9:.2f} GB / "
        f"({bw / 1e12:g} TB/s x {a['memory_efficiency']:g})"
    )
    out.append(
        f"  prefill         = one {d['context_tokens']:,}-token prompt in {d['prefill_ms']:.1f} ms -> "
        f"{d['prefill_tokens_per_s']:,.0f} tokens/s ({d['prefill_bound']}-bound)"
    )

    k = d["intensity_k"]
    out.append("")
    out.append("[2] Arithmetic intensity of the weight GEMMs (FLOP per byte of weights)")
    coef = 2 / wpp  # FLOP per byte per token: 2 FLOPs per weight over its bytes
    times = "B" if coef == 1 else f"{coef:g} B"
    out.append(f"  plain step:       2 FLOPs x B tokens x P weights / ({wpp:g} bytes x P) = {times}")
    out.append(f"  speculative step: each of the B sequences verifies k+1 = {k + 1} positions: {times} (k+1)"
               "   (the rule of thumb B + k counts as if one sequence speculated)")
    out.append(f"  the verify GEMMs cross the ridge ({d['ridge_flops_per_byte']:.0f}) at B = "
               f"{d['ridge_flops_per_byte']:.0f} / ({coef:g} x {k + 1}) = {d['verify_ridge_batch']:.0f};"
               f" plain ones at B = {d['ridge_flops_per_byte'] / coef:.0f}"
               + ("  (MoE: the table counts the experts each batch touches)"
                  if d["active_params"] < d["params"] else ""))
    rows = []
    for r in d["rows"]:
        rows.append([
            str(r["batch"]),
            _g(r["weights_intensity_flops_per_byte"]),
            _g(r["spec_weights_intensity_flops_per_byte"]),
            str(r["seed_spec_intensity_b_plus_k"]),
            f"{d['ridge_flops_per_byte']:.0f}",
            "above" if r["spec_weights_intensity_flops_per_byte"] > d["ridge_flops_per_byte"] else "below",
            _g(r["intensity_flops_per_byte"]),
        ])
    out.append(table(["batch", "plain", f"spec k={k}", "B+k", "ridge", "spec vs ridge", "whole step"],
                     rows))
    out.append("  (whole step: all FLOPs over all HBM bytes, the KV cache included)")

    names = [p["name"] for p in d["presets"]]
    out.append("")
    out.append("[3] Speedup by batch (best k in parentheses); acceptance alpha from the lab's presets")
    rows = []
    for r in d["rows"]:
        cells = [str(r["batch"]) + ("" if r["fits_memory"] else "!"), f"{r['decode_step_ms']:.2f}",
                 f"{r['decode_tokens_per_s']:,.0f}", f"{r['u']:.3f}"]
        for n in names:
            s = r["speedup"][n]
            cells.append("n/a" if s is None else f"{s:.2f}x (k={r['best_k'][n]})")
        rows.append(cells)
    out.append(table(["batch", "step ms", "tokens/s", "u", *names], rows))
    if any(not r["fits_memory"] for r in d["rows"]):
        out.append(f"  ! beyond the memory cap of {d['max_batch']:,} sequences at this context")

    out.append("")
    out.append("[4] When to turn it off (the largest batch at which the best k still pays)")
    for p in d["presets"]:
        head = f"  {p['name']:<12}"
        if not p["available"]:
            out.append(f"{head}{p['note']}")
            continue
        off, cap, first = p["turn_off_batch"], p["max_batch_with_draft"], p["pays_from_batch"]
        if off == 0:
            verdict = f"pays at no batch up to {p['batch_limit']:,}"
        elif cap >= 1 and (off is None or off >= cap):
            verdict = f"pays at every batch that fits (memory cap {cap:,})"
            verdict += f"; would turn off above B = {off:,}" if off is not None else ""
        elif off is None:
            verdict = f"pays at every batch up to {p['batch_limit']:,}"
        else:
            verdict = f"turn it off above B = {off:,}"
        if first is not None and first > 1:
            verdict += f"; it pays only from B = {first:,} up"
            if d["active_params"] < d["params"]:
                verdict += " (below, verifying k+1 positions touches more experts than a plain step)"
        out.append(f"{head}alpha {p['alpha']:g}: {verdict}")
        draft = f" ({p['draft_model']})" if p["draft_model"] else ""
        out.append(
            f"  {'':<12}draft{draft}: d = {p['d_batch1']:.4f} (preset {p['seed_d']:g}), "
            f"c = {p['c_batch1']:.4f} (preset {p['seed_c']:g}) at B = 1; "
            f"{p['draft_weight_bytes_per_gpu'] / 1e9:.2f} GB/GPU of weights, "
            f"max batch {d['max_batch']:,} -> {cap:,}"
        )

    out.append("")
    out.append("[5] The utilization u as a batch (u = compute time / step time of a plain step)")
    parts_u = []
    for m in d["u_to_batch"]:
        parts_u.append(f"u = {m['u']:g} at B = {m['batch']:,.0f}" if m["batch"] is not None
                       else f"u = {m['u']:g} never")
    out.append("  " + "; ".join(parts_u))
    out.append(f"  u saturates at {d['u_max']:.2f}: attention (memory-bound at any batch) and the "
               "all-reduces keep the compute roof partly idle")

    out.append("")
    out.append("[6] Chain vs tree at equal verify width (batch 1; tree from top-4 candidates, "
               "rank r accepted with alpha (1-alpha)^(r-1))")
    rows = []
    for p in d["presets"]:
        if not p["available"]:
            continue
        t = p["tree_vs_chain"]
        rows.append([p["name"], str(t["width"]), f"{t['chain_expected_tokens']:.2f}",
                     f"{t['chain_speedup']:.2f}x", _levels(t["tree_levels"]),
                     f"{t['tree_expected_tokens']:.2f}", f"{t['tree_speedup']:.2f}x"])
    out.append(table(["preset", "width", "chain E[n]", "chain S", "tree levels", "tree E[n]", "tree S"],
                     rows))
    out.append("")
    out.append("  d and c here are the roofline's alone; the lab's presets also carry launch, sampling and")
    out.append("  scheduling time (add it with --draft-overhead-us), so their speedups at B = 1 are lower.")
    out.append(f"  not modelled: {a['not_modelled']}")
    return "\n".join(out) + "\n"


def _measured_text(m: dict[str, Any]) -> list[str]:
    """Section [0]: the measured-kernel step model, part by part, beside the speed of light."""
    from servesim.render.text import table

    if not m.get("available"):
        return [f"[0] Measured-kernel step model: not available ({m.get('note', '')})", ""]
    out = [f"[0] Where a decode step's time goes: measured kernels ({m['tables']}),",
           f"    {m['dtype']} weights, {m['kv_dtype']} KV, {m['engine']} host time; "
           f"speed of light = pure roofline at 100% of the peaks"]
    rows = []
    for r in m["rows"]:
        rows.append([str(r["batch"]) + ("" if r["fits_memory"] else "!"), f"{r['total_ms']:.2f}",
                     f"{r['gemm_ms']:.2f}", f"{r['attention_ms']:.2f}", f"{r['allreduce_ms']:.2f}",
                     f"{r['other_ms']:.2f}", f"{r['host_ms']:.2f}", f"{r['speed_of_light_ms']:.2f}",
                     f"{r['tokens_per_s']:,.0f}", "yes" if r["measured"] else "part*"])
    out.append(table(["batch", "step ms", "GEMM", "attn", "allred", "other", "host", "light", "tok/s",
                      "measured"], rows))
    # One line per kind of fallback: the shape it was scaled from differs by batch.
    notes = list(dict.fromkeys(n.split(": measured (")[0] for r in m["rows"] for n in r["notes"]))
    for n in notes[:3]:
        out.append(f"  * outside the tables: {n}; priced as the nearest measured shape scaled by the "
                   "roofline at the tables' fitted efficiencies")
    if len(notes) > 3:
        out.append(f"  * and {len(notes) - 3} more fallbacks (--format json lists them)")
    p = m["prefill"]
    out.append(f"  prefill of {p['tokens']:,.0f} tokens: {p['total_ms']:.1f} ms "
               f"({p['tokens'] / p['total_ms'] * 1e3:,.0f} tok/s; "
               f"speed of light {p['speed_of_light_ms']:.1f} ms)")
    parts = []
    for s in m["speculation"]:
        if not s["available"]:
            parts.append(f"{s['name']} n/a")
            continue
        off = s["turn_off_batch"]
        where = ("pays at every batch that fits" if off is None else "pays at no batch" if off == 0
                 else f"off above B = {off:,}")
        parts.append(f"{s['name']} {s['speedup_batch1']:.2f}x at B=1 (k={s['k_batch1']}), {where}")
    out.append("  speculation from this step model: " + "; ".join(parts[:2]))
    if len(parts) > 2:
        out.append("    " + "; ".join(parts[2:]))
    if any(not r["fits_memory"] for r in m["rows"]):
        out.append(f"  ! beyond the KV-cache limit of {m['max_batch']:,} sequences at this context")
    out.append("")
    return out
