"""The lab's commands: ``specdec`` (speculative decoding economics), ``disagg`` (colocated vs
disaggregated serving) and ``all`` (both, with defaults)."""

from __future__ import annotations

import argparse
from typing import Any

from servesim import render
from servesim._checks import ParameterError
from servesim.cli.args import (
    ALL_DTYPES,
    Output,
    SubParsers,
    add_disagg_arguments,
    add_engine_argument,
    add_format,
    add_interval_level,
    choice,
    dtype_choice,
    integer,
    number,
    plot_path,
    wants,
)
from servesim.cli.common import preset_label, resolve_node, workload_of
from servesim.model import serving, speculative
from servesim.model.serving import resolve_scenario
from servesim.model.speculative import DEFAULT_C, DEFAULT_D, DEFAULT_K_MAX
from servesim.plan.summary import disagg_summary, specdec_summary

__all__ = ["register"]


def register(sub: SubParsers) -> None:
    """Add ``specdec``, ``disagg`` and ``all`` (only the one being run: :func:`wants`)."""
    for command, add in (("specdec", _add_specdec), ("disagg", _add_disagg), ("all", _add_all)):
        if wants(sub, command):
            add(sub)


def _add_specdec(sub: SubParsers) -> None:
    sp = sub.add_parser("specdec", help="speculative decoding economics: grid, presets, utilization sweep")
    presets = speculative.SPECDEC_PRESETS  # speculative.toml, read here, not for the other commands
    methods = speculative.SPEC_METHODS  # the one list predict --spec and plan --spec take
    sp.add_argument("--preset", type=choice(list(methods), "preset"), default=None,
                    help=f"method: {', '.join(methods)}; the lab's utilization sweep takes "
                    f"{', '.join(presets)} or draft (default mtp; with --model: eagle3, or mtp for a model "
                    "with an MTP module; eagle and ngram at their published or given acceptance)")
    sp.add_argument("--util", type=number(0.0, 1.0, hi_open=True), default=0.0,
                    help="compute utilization u in [0, 1) for the grid and your case (default 0)")
    sp.add_argument("--alpha", type=number(0.0, 1.0), default=None,
                    help="your acceptance rate in [0, 1]: prices your case and sweeps it")
    sp.add_argument("--k", type=integer(1, hi=64), default=None,
                    help="your draft length, 1-64 (default: optimal)")
    sp.add_argument("--d", type=number(0.0, 100.0), default=DEFAULT_D,
                    help=f"draft-cost ratio t_draft/t_target in [0, 100] (default {DEFAULT_D:g})")
    sp.add_argument("--c", type=number(0.0, 100.0), default=DEFAULT_C,
                    help=f"verify cost per extra position, in target steps, in [0, 100] "
                    f"(default {DEFAULT_C:g})")
    sp.add_argument("--k-max", type=integer(1, hi=64), default=DEFAULT_K_MAX,
                    help=f"largest k searched for the optimum, 1-64; cost grows with it "
                    f"(default {DEFAULT_K_MAX})")
    sp.add_argument("--plot", type=plot_path, default=None, metavar="FILE.png|svg",
                    help="save the speedup heatmap and the utilization sweep")
    g = sp.add_argument_group("the speedup by batch on a real model (--model, --gpu): the measured-kernel "
                              "step model predict --spec uses")
    g.add_argument("--model", default=None,
                   help="catalog model, Hugging Face id or config.json: price the preset's draft, verify and "
                   "target step on --gpu at each batch instead of the lab's d and c")
    g.add_argument("--gpu", default=None, help="catalog GPU for --model, e.g. h100-sxm")
    g.add_argument("--tp", type=integer(1, hi=64), default=1, help="tensor-parallel GPUs with --model, 1-64 "
                   "(default 1)")
    g.add_argument("--dtype", type=dtype_choice(ALL_DTYPES, "dtype"),
                   default="auto", help="weights with --model: auto (bf16, or a MoE checkpoint's own), bf16, "
                   "fp8, fp4 or int4 (default auto)")
    add_engine_argument(g, "engine whose host time and budgets the step uses (default: engines.toml's "
                        "default_engine)")
    g.add_argument("--context", type=integer(1, hi=1_000_000), default=2048,
                   help="context tokens per sequence with --model, 1-1,000,000 (default 2048)")
    g.add_argument("--acceptance-length", type=number(1.0, 65.0), default=None,
                   help="measured mean acceptance length at --k with --model (tokens per verify step, the "
                   "bonus token included; replaces --alpha)")
    g.add_argument("--draft", default=None, help="with --model: the draft model of --preset small-draft or "
                   "draft, or the EAGLE head of eagle / eagle3 (its config.json or a published head's "
                   "Hugging Face id)")
    g.add_argument("--traffic", default=None,  # checked where it is used: the lab imports no hardware
                   help="with --model and no measured acceptance: the kind of traffic whose published "
                   "acceptance the preset takes (predict --help lists them; default chat), as predict --spec "
                   "and plan --spec take it")
    add_format(sp)
    sp.set_defaults(run=_specdec)


def _add_disagg(sub: SubParsers) -> None:
    dp = sub.add_parser("disagg", help="colocated vs disaggregated serving: TTFT, TPOT, goodput, crossover")
    add_disagg_arguments(dp, list(serving.WORKLOAD_PRESETS))
    add_interval_level(dp, "each TTFT and TPOT with --model")
    dp.add_argument("--plot", type=plot_path, default=None, metavar="FILE.png|svg",
                    help="save goodput vs arrival rate and vs link bandwidth")
    add_format(dp)
    dp.set_defaults(run=_disagg)


def _add_all(sub: SubParsers) -> None:
    ap = sub.add_parser("all", help="both parts with defaults (disagg for every workload preset)")
    ap.add_argument("--plot", type=plot_path, default=None, metavar="FILE.png|svg",
                    help="save every figure in one file: the speedup heatmap and utilization sweep, then "
                    "goodput vs arrival rate and vs link for each workload preset")
    add_format(ap)
    ap.set_defaults(run=_all)


def _specdec(args: argparse.Namespace) -> Output:
    if args.model is not None or args.gpu is not None:
        return _specdec_model(args)
    for flag in ("acceptance_length", "draft", "traffic"):
        if getattr(args, flag) is not None:
            raise ParameterError(flag, getattr(args, flag), "given with --model and --gpu (the lab's "
                                 "specdec takes --alpha)")
    lab = speculative.lab_preset(args.preset) if args.preset else None  # eagle, ngram: refused
    args.preset = lab.name if lab is not None else "mtp"
    data = specdec_summary(u=args.util, d=args.d, c=args.c, preset=args.preset,
                           alpha=args.alpha, k=args.k, k_max=args.k_max)
    if args.plot is not None:
        from servesim.cli.lab_plots import save_specdec  # matplotlib, only with --plot

        save_specdec(args.d, args.c, args.util, args.plot)
    return Output(data, render.specdec_text(data), _specdec_rows(data))


def _disagg(args: argparse.Namespace) -> Output:
    # Resolved once: the roofline node is derived here and reused by the figure.
    wl, ln, node, beta, source = resolve_scenario(
        workload_of(args), rate_per_s=args.rate, slo_ttft_s=args.slo_ttft_s,
        slo_tpot_s=args.slo_tpot_s, link=args.link, node_from=lambda w: resolve_node(args, w),
        prompt_tokens=args.isl, output_tokens=args.osl,
    )
    data = disagg_summary(preset_label(args, wl), workload=wl, link=ln, nodes=args.nodes, beta=beta,
                          node=node, node_source=source)
    if args.model is not None and args.calibration is None:
        from servesim.cli.lab_on_model import with_intervals  # the pricer, only with --model

        data = with_intervals(args, data)
    if args.plot is not None:
        from servesim.cli.lab_plots import save_disagg  # matplotlib, only with --plot

        save_disagg(wl, node, args.nodes, beta, ln, data["crossover_exact_GBps"], args.plot)
    return Output(data, render.disagg_text(data), _disagg_rows(data))


def _all(args: argparse.Namespace) -> Output:
    spec = specdec_summary()
    dis = {name: disagg_summary(name) for name in serving.WORKLOAD_PRESETS}
    if args.plot is not None:  # one file, every panel: specdec, then disagg for each preset
        from servesim.cli.lab_plots import save_all  # matplotlib, only with --plot

        save_all(dis, args.plot)
    text = "\n".join([render.specdec_text(spec), *(render.disagg_text(d) for d in dis.values())])
    rows = _specdec_rows(spec)
    for d in dis.values():
        rows += _disagg_rows(d)
    return Output({"specdec": spec, "disagg": dis}, text, rows)


def _specdec_model(args: argparse.Namespace) -> Output:
    """``specdec --model M --gpu G``: the preset's speedup by batch from the step model ``predict`` uses."""
    if args.model is None or args.gpu is None:
        missing = "model" if args.model is None else "gpu"
        raise ParameterError(missing, None, "given with --" + ("gpu" if missing == "model" else "model") +
                             ": the speedup by batch on a real model needs both")
    if args.plot is not None:
        raise ParameterError("plot", str(args.plot), "left out with --model (roofline --model --plot draws "
                             "the speedup by batch)")
    from servesim.cli.lab_on_model import specdec_model  # the pricer, only with --model

    return specdec_model(args)


def _specdec_rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"table": "grid", **g} for g in s["grid"]]
    rows += [{"table": "presets", **p} for p in s["presets"]]
    rows += [{"table": "utilization_sweep", "name": s["sweep_preset"]["name"], **r}
             for r in s["utilization_sweep"]]
    if "case" in s:
        rows.append({"table": "case", **s["case"]})
    return rows


def _disagg_rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"table": "disagg", "preset": s["preset"], **r,
         "crossover_link_GBps": s["crossover_link_GBps"]}
        for r in s["rows"]
    ]
