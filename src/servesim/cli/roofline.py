"""``servesim roofline``: step times, intensity and speculation from hardware.

The numbers are :func:`servesim.plan.roofline.roofline_summary`'s, the text
:func:`servesim.render.roofline.roofline_text`'s; ``register`` adds the subcommand.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from servesim._checks import InputError, ParameterError
from servesim.cli.args import (
    Output,
    SubParsers,
    add_engine_argument,
    add_format,
    dtype_choice,
    engine_of,
    integer,
    number,
    plot_path,
)
from servesim.cli.common import add_ep_comm_argument, ep_comm_of
from servesim.hardware.catalog import load_catalog
from servesim.hardware.engines import default_engine
from servesim.hardware.model_config import find_architecture
from servesim.hardware.names import check_tp, resolve_gpu, resolve_model
from servesim.hardware.precision import KV_DTYPES, WEIGHT_DTYPES, check_kv_dtype
from servesim.hardware.roofline import DEFAULT_EFFICIENCY, DEFAULT_MEMORY_FRACTION, Efficiency
from servesim.hardware.speculation import K_MAX
from servesim.plan.roofline import (
    DEFAULT_BATCHES,
    DEFAULT_CONTEXT,
    measured_step_model,
    measured_view,
    roofline_summary,
)
from servesim.render.roofline import roofline_text

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog
    from servesim.hardware.shape import ModelShape

__all__ = ["register"]

Row = dict[str, Any]

_REFUSED = ("dtype", "kv_dtype", "ep")
"""Inputs whose refusal by the measured-kernel step model refuses the command (predict refuses them the
same way: an FP4 model on Hopper, an expert split that does not divide the GPUs or the experts); other
reasons leave the measured view out, with the reason, and the pure roofline stands."""


def register(sub: SubParsers) -> None:
    """Add ``roofline``."""
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
    p.add_argument("--dp", type=integer(1, hi=256), default=1,
                   help="MoE models: attention data-parallel ranks, 1-256 (the measured view; default 1)")
    p.add_argument("--ep", type=integer(1, hi=256), default=1,
                   help="MoE models: expert-parallel ranks, 1-256, dividing the experts and tp x dp "
                   "(the measured view; default 1)")

    add_ep_comm_argument(p)
    p.add_argument("--batch", type=integer(1, hi=100_000), nargs="+", default=None, metavar="B",
                   help=f"decode batches to tabulate (default {' '.join(map(str, DEFAULT_BATCHES))})")
    p.add_argument("--context", type=integer(1, hi=10_000_000), default=DEFAULT_CONTEXT,
                   help=f"context tokens per sequence; also the prefill prompt (default {DEFAULT_CONTEXT})")
    p.add_argument("--k", type=integer(1, hi=64), default=4,
                   help="draft length for the intensity table, 1-64 (default 4)")
    p.add_argument("--k-max", type=integer(1, hi=64), default=K_MAX,
                   help=f"largest draft length searched, 1-64 (default {K_MAX}, as predict --spec searches)")
    p.add_argument("--draft", default=None,
                   help="catalog model drafting for small-draft (default: the model's draft_model)")
    p.add_argument("--draft-overhead-us", type=number(0.0, 1e6, scale=1e-6), default=0.0, metavar="US",
                   dest="draft_overhead_s",
                   help="host time per draft step in microseconds, >= 0 (default 0: not modelled)")
    # below 1% of a peak no kernel runs (and 1e-320 of it divides to inf)
    p.add_argument("--memory-efficiency", type=number(0.01, 1.0), default=eff.memory,
                   help=f"fraction of peak HBM bandwidth reached, in [0.01, 1] (default {eff.memory:g})")
    p.add_argument("--compute-efficiency", type=number(0.01, 1.0), default=eff.compute,
                   help=f"fraction of dense BF16 peak reached, in [0.01, 1] (default {eff.compute:g})")
    p.add_argument("--interconnect-efficiency", type=number(0.01, 1.0),
                   default=eff.interconnect,
                   help=f"fraction of GPU-to-GPU bandwidth reached, in [0.01, 1] (default "
                   f"{eff.interconnect:g})")
    p.add_argument("--memory-fraction", type=number(0.0, 1.0, lo_open=True), default=DEFAULT_MEMORY_FRACTION,
                   help=f"share of HBM for weights and KV, in (0, 1] (default {DEFAULT_MEMORY_FRACTION:g})")
    p.add_argument("--dtype", type=dtype_choice(WEIGHT_DTYPES, "dtype"), default="bf16",
                   help="weights (the roofline's bytes and the measured-kernel step's GEMMs): bf16 "
                        "(default: the checkpoint's own), fp8, fp4 (B200)")
    p.add_argument("--kv-dtype", type=dtype_choice(KV_DTYPES, "kv-dtype"), default="bf16",
                   help="KV cache for the measured-kernel step: bf16 (default) or fp8")
    add_engine_argument(p, "engine whose host time and budgets the measured-kernel step uses (default "
                        f"{default_engine()})")
    p.add_argument("--catalog", action="append", default=[], metavar="FILE",
                   help="a TOML file of extra [gpu.NAME] / [model.NAME] / [link.NAME] entries (repeatable)")
    p.add_argument("--plot", type=plot_path, default=None, metavar="FILE.png|svg",
                   help="save speedup vs batch per preset and arithmetic intensity vs the ridge point")
    add_format(p)
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> Output:
    cat = load_catalog(*args.catalog)
    model = _model(args.model, cat)
    gpu = resolve_gpu(args.gpu, cat)
    check_tp(model, args.tp)
    draft_name = args.draft or model.draft_model
    draft = None
    if draft_name:
        try:
            draft = resolve_model(draft_name, cat)
        except ParameterError as exc:
            raise ParameterError("--draft", draft_name, exc.valid) from None

    check_kv_dtype(args.kv_dtype, args.gpu, cat)  # refused as predict refuses it, MoE models included
    try:
        sm: Any = measured_step_model(model, gpu, args.gpu, args.tp, engine=engine_of(args), dtype=args.dtype,
                                      kv_dtype=args.kv_dtype, catalog=cat, dp=args.dp, ep=args.ep,
                                      ep_comm=ep_comm_of(args))
    except ParameterError as exc:
        if exc.name in _REFUSED:  # what predict refuses is refused here too, with its message
            raise
        sm = exc
    except ValueError as exc:
        sm = exc
    # The pure roofline of [1], [2] and [5] prices the replica's GPUs: with attention data parallel it splits
    # every weight over tp x dp of them (the step model of [0] replicates attention over the DP ranks).
    gpus = args.tp * args.dp
    data = roofline_summary(
        _in_dtype(model, args.dtype),
        gpu,
        gpus,
        batches=args.batch or DEFAULT_BATCHES,
        context_tokens=args.context,
        k=args.k,
        k_max=args.k_max,
        draft=draft,
        draft_overhead_s=args.draft_overhead_s,
        efficiency=Efficiency(args.memory_efficiency, args.compute_efficiency, args.interconnect_efficiency),
        memory_fraction=args.memory_fraction,
        step_model=sm,
        catalog=cat,
    )
    data["parallel"] = {"tp": args.tp, "dp": args.dp, "ep": args.ep}
    data["measured"] = measured_view(sm, gpu.memory_bytes, batches=args.batch or DEFAULT_BATCHES,
                                     context_tokens=args.context)
    if args.plot is not None:
        from servesim.render import plots  # matplotlib only when plotting

        fig, axes = plots.figure(2)
        plots.plot_roofline_speedup(axes[0], data["rows"], data["presets"])
        plots.plot_roofline_intensity(axes[1], data["rows"], data["ridge_flops_per_byte"],
                                      data["intensity_k"])
        plots.save(fig, args.plot)
    return Output(data, roofline_text(data), _rows(data))


def _in_dtype(model: ModelShape, dtype: str) -> ModelShape:
    """``model`` with its weights in ``--dtype`` for the pure roofline of [1], [2] and [5], as the
    measured step of [0] prices them (bf16, the default, keeps the checkpoint's own, as there)."""
    if dtype == "bf16":
        return model
    return replace(model, checkpoint_dtype=dtype,
                   weight_bytes_per_param=model.weight_bytes(dtype) / model.params)


def _model(name: str, cat: Catalog | None) -> ModelShape:
    """The shape ``name`` names (a catalog model, a shipped config's id or a config.json path: the
    same shapes ``predict`` prices); one with per-layer detail is named as given, so that the
    measured view finds its architecture again."""
    try:
        shape = resolve_model(name, cat)
    except ParameterError as exc:
        try:
            arch = find_architecture(name)
        except InputError:
            arch = None
        if arch is None:
            raise exc from None
        shape = arch
    return replace(shape, name=name) if shape.family else shape


def _rows(d: dict[str, Any]) -> list[Row]:
    out: list[Row] = [{"table": "batch", **r} for r in d["rows"]]
    for p in d["presets"]:
        flat = {k: v for k, v in p.items() if k != "tree_vs_chain"}
        tree = {f"tree_{k}": v for k, v in p.get("tree_vs_chain", {}).items()}
        out.append({"table": "presets", **flat, **tree})
    return out
