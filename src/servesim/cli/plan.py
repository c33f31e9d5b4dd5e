"""CLI commands: ``plan`` (rank deployments) and ``report`` (HTML + Markdown to hand on)."""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servesim import render
from servesim._checks import InputError
from servesim.cli import progress
from servesim.cli.args import (
    Output,
    SubParsers,
    add_disagg_arguments,
    add_format,
    add_interval_level,
    bounded,
    choice,
    engine_of,
    gpu_list,
    integer,
    number,
    output_dir,
    plot_path,
)
from servesim.cli.common import deployment_of, ep_comm_of, resolve_node, workload_of
from servesim.cli.deploy import add_emit_argument, emit, plan_deploy
from servesim.hardware.acceptance import TRAFFIC_KINDS
from servesim.hardware.catalog import load_catalog
from servesim.inputs.traces import load_trace, workload_from_trace
from servesim.model import kvcache, serving
from servesim.model.serving import resolve_scenario
from servesim.model.speculative import SPEC_METHODS, lab_preset
from servesim.plan.figures import disagg_curves, plan_curves, specdec_curves
from servesim.plan.planner import Plan, PlanRequest, plan_stages, smallest_fleet
from servesim.plan.planner import plan as plan_one
from servesim.plan.summary import disagg_summary, plan_summary, specdec_summary
from servesim.render.capacity import capacity_report_blocks, capacity_text, pareto_figure
from servesim.render.report import write_report

if TYPE_CHECKING:  # pragma: no cover
    from servesim.plan.figures import PlanCurves

__all__ = ["register"]


def _add_plan_arguments(p: argparse.ArgumentParser) -> None:
    add_disagg_arguments(p, list(serving.WORKLOAD_PRESETS))
    p.add_argument("--spec", type=choice([*SPEC_METHODS, "none"], "speculative preset"), default=None,
                   help="speculative preset to consider on each pool, or none (default: mtp for the lab's "
                   "node plan; none with --model, where speculation runs only where asked for, at the "
                   "acceptance, k, draft and verify cost predict --spec prices for that model)")
    p.add_argument("--k-max", type=integer(1, hi=64), default=8,
                   help="largest draft length tried, 1-64 (default 8)")
    p.add_argument("--k", type=bounded("k"), default=None,
                   help="with --model and --spec: the draft length the engine runs, 1-16 (the one "
                   "--acceptance-length was measured at); the node plan tries no k above it")
    p.add_argument("--acceptance-length", type=bounded("acceptance_length"), default=None,
                   help="with --model, --spec and --k: the measured mean acceptance length (tokens per "
                   "verify step, bonus included), in [1, k + 1]; the engine model confirms each speculative "
                   "deployment with it, and one that does not beat the same deployment without speculation "
                   "is left out (speculation off at that load)")
    p.add_argument("--traffic", type=choice(TRAFFIC_KINDS, "traffic"), default=None,
                   help=f"with --model and --spec and no --acceptance-length: the kind of traffic whose "
                   f"published acceptance the engine model confirms with, {', '.join(TRAFFIC_KINDS)} "
                   "(default chat; sources in hardware/data/acceptance.toml)")
    p.add_argument("--attainment", type=number(0.0, 1.0, lo_open=True), default=0.9, metavar="FRACTION",
                   help="fraction of requests that must meet both SLOs, in (0, 1] (default 0.9)")
    p.add_argument("--trace", default=None, metavar="FILE",
                   help="take the workload (mean lengths, mean rate) from an Azure, Mooncake or BurstGPT "
                        "trace; SLOs from --slo-* or the preset")
    p.add_argument("--rate-scale", type=number(1e-6, 1e6), default=1.0,
                   help="replay the trace this many times faster (default 1)")
    p.add_argument("--target-rate", type=number(1e-6, 1e6), default=None,
                   help="plan for this rate (req/s) on the smallest fleet that meets the target")
    p.add_argument("--headroom", type=number(0.0, 1.0, lo_open=True), default=None, metavar="FRACTION",
                   help="with --gpus: plan each deployment at this share of its sustainable rate, in (0, 1] "
                   "(e.g. 0.8: 80%%; default none: at the rate itself)")
    add_interval_level(p, "each row the engine model confirms (with --gpus)")
    p.add_argument("--top", type=integer(1, hi=10_000), default=10,
                   help="how many ranked deployments to show, 1-10,000 (default 10); with --model, the "
                   "first 100 of them at most are confirmed by the engine model (about 0.3 s each: "
                   "--top 100 or more costs about 30 s; a progress bar shows after 1 s)")
    p.add_argument("--jobs", type=integer(1, hi=256), default=1,
                   help="local processes for the sweeps, 1-256 (default 1)")
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="run the sweeps on the Ray cluster at ADDRESS ('auto', 'local' or host:port)")
    p.add_argument("--simulate", action="store_true",
                   help="re-score the top candidates with the simulator and show where the ranking changes")
    p.add_argument("--simulate-top", type=integer(1, hi=100), default=5,
                   help="how many top candidates to simulate (default 5)")
    p.add_argument("--requests", "--sim-requests", dest="sim_requests", type=integer(100, hi=10_000_000),
                   default=50_000, metavar="N",
                   help="with --simulate: simulated requests per candidate, 100-10,000,000 (default 50,000; "
                   "--sim-requests is the old name)")
    p.add_argument("--seed", type=integer(0, hi=2**63 - 1), default=20240601,
                   help="simulation seed, 0 to 2^63-1 (default 20240601)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument("--gpus", type=integer(1, hi=4096), default=None,
                   help="GPU budget, 1-4,096: rank deployments by goodput per GPU at their largest "
                   "sustainable rate (needs --model and --gpu; the measured-kernel model at load); with "
                   "--target-rate, the fewest GPUs for that rate (up to this many, default 256); cost "
                   "grows with it and with each GPU of a --gpu list (8 GPUs: a few seconds, 64: about "
                   "20 s, 4,096: minutes; a progress bar shows after 1 s)")
    p.add_argument("--no-hazards", action="store_true",
                   help="with --gpus: leave out deployments that combine speculation with prefix caching "
                   "or with prefill/decode disaggregation (known correctness and stability hazards)")


def register(sub: SubParsers) -> None:
    p = sub.add_parser("plan", help="rank deployments (colocated, every split, speculation on/off)")
    _add_plan_arguments(p)
    p.add_argument("--plot", type=plot_path, default=None, metavar="FILE.png|svg",
                   help="save goodput vs arrival rate for colocated and the best split")
    add_format(p)

    add_emit_argument(p)
    p.set_defaults(run=run_plan)

    r = sub.add_parser("report", help="write a self-contained HTML report and the same as Markdown")
    _add_plan_arguments(r)
    r.add_argument("--out", type=output_dir, default=Path("servesim-report"), metavar="DIR",
                   help="folder for report.html, report.md and its figures (default servesim-report)")
    add_format(r)
    r.set_defaults(run=run_report)


def _request(args: argparse.Namespace) -> tuple[PlanRequest, str]:
    wl = workload_of(args)
    preset = args.preset
    if args.trace is not None:
        tr = load_trace(args.trace, rate_scale=args.rate_scale)
        wl = workload_from_trace(tr, slo_ttft_s=wl.slo_ttft_s, slo_tpot_s=wl.slo_tpot_s)
        preset = f"trace {wl.name}"
    wl, link, node, beta, _ = resolve_scenario(
        wl, rate_per_s=args.rate if args.target_rate is None else args.target_rate,
        slo_ttft_s=args.slo_ttft_s, slo_tpot_s=args.slo_tpot_s, link=args.link,
        node_from=lambda w: resolve_node(args, w), prompt_tokens=args.isl, output_tokens=args.osl,
    )
    spec = args.spec or ("none" if args.model is not None else "mtp")
    on_model = args.model is not None and args.calibration is None  # else the lab's presets
    speculation, k_max = (None if spec == "none" else lab_preset(spec, on_model=on_model)), args.k_max
    if spec != "none" and args.model is not None and args.calibration is None:
        # a measured-kernel node speculates as predict --spec prices the same model
        from servesim.plan.node_speculation import node_speculation

        ns = node_speculation(deployment_of(args), spec, isl=wl.prompt_tokens, osl=max(1, wl.output_tokens),
                              rate_per_node=wl.rate_per_s / max(1, args.nodes), k_max=args.k_max, k=args.k,
                              acceptance_length=args.acceptance_length, traffic=args.traffic,
                              catalog=load_catalog(*args.catalog))
        speculation, k_max = ns.preset, ns.k_max
    req = PlanRequest(workload=wl, node=node, link=link, nodes=args.nodes, beta=beta,
                      attainment_target=args.attainment, speculation=speculation, k_max=k_max)
    if args.target_rate is not None:
        n = smallest_fleet(req)
        if n is not None:
            req = replace(req, nodes=n)
    return req, preset


def _plan_data(args: argparse.Namespace, extra_stages: int = 0
               ) -> tuple[Plan, dict[str, Any], progress.Progress]:
    """The plan (:class:`servesim.plan.planner.Plan`), its summary dict and the progress bar, still open
    when ``extra_stages`` (the report's own steps) remain."""
    req, preset = _request(args)
    simulate = ({"top": args.simulate_top, "requests": args.sim_requests, "seed": args.seed}
                if args.simulate else None)
    stages = plan_stages(req) + (min(args.simulate_top, 2 * req.nodes) if args.simulate else 0)
    bar = progress.Progress(stages + extra_stages, "planning" if not extra_stages else "report",
                            enabled=not args.quiet, ticking=True)
    try:
        p = plan_one(req, jobs=args.jobs, ray_address=args.ray, progress=bar.advance)
        data = plan_summary(p, preset=preset, top=args.top, jobs=args.jobs, ray_address=args.ray,
                            progress=bar.advance, simulate=simulate)
    except BaseException:
        bar.close()
        raise
    if not extra_stages:
        bar.close()
    return p, data, bar


def _capacity(args: argparse.Namespace) -> Output:
    """``plan --gpus N``: the capacity planner of :mod:`servesim.plan.search`."""
    from servesim.cli.model_node import check_gpu_dtypes
    from servesim.plan.search import PlanQuestion, capacity_plan, capacity_plan_gpus, screen_steps

    if args.model is None or args.gpu is None:
        raise InputError("--gpus plans on measured kernels: give --model and --gpu too, e.g. "
                         "--model meta-llama/Llama-3.1-70B-Instruct --gpu h100-sxm --gpus 16")
    wl = workload_of(args)
    if args.trace is not None:  # the trace's mean lengths; the capacity search sets the rate
        wl = workload_from_trace(load_trace(args.trace, rate_scale=args.rate_scale), slo_ttft_s=wl.slo_ttft_s,
                                 slo_tpot_s=wl.slo_tpot_s)
    # without --link each GPU type's rows take the KV link of where they sit (plan.search._kv_links:
    # NVLink inside one NVL72 rack, InfiniBand between racks), the RDMA default elsewhere
    link = kvcache.LINKS["rdma"] if args.link is None else args.link
    q = PlanQuestion(
        model=args.model, gpu=gpu_list(args.gpu)[0], gpus=args.gpus or 256,
        target_rate_per_s=args.target_rate,
        isl=args.isl or wl.prompt_tokens, osl=args.osl or wl.output_tokens,
        slo_ttft_s=args.slo_ttft_s or wl.slo_ttft_s, slo_tpot_s=args.slo_tpot_s or wl.slo_tpot_s,
        attainment=args.attainment, dtypes=(args.dtype,) if args.dtype else (), kv_dtype=args.kv_dtype,
        spec=None if args.spec in (None, "none") else args.spec, engine=engine_of(args),
        link_bytes_per_s=link.bytes_per_s, link_name=link.name, hazards=not args.no_hazards,
        confirm_top=min(args.top, 100), k=args.k, acceptance_length=args.acceptance_length,
        traffic=args.traffic, ep_comm=ep_comm_of(args),
        headroom=getattr(args, "headroom", None), rate_per_s=getattr(args, "rate", None),
        kv_placement=args.link is None,  # no --link: each row's KV link from its placement (NVL72)
        interval_level=args.interval_level,
    )
    cat = load_catalog(*args.catalog) if args.catalog else None
    gpus = gpu_list(args.gpu)
    check_gpu_dtypes(args.model, gpus, args.dtype, args.kv_dtype, cat)  # as predict refuses them
    steps = sum(screen_steps(replace(q, gpu=g), cat) for g in gpus)  # the screen's, then one a row
    bar = progress.Progress(steps + min(args.top, 100), "screening, then confirming by the engine model",
                            enabled=not args.quiet, ticking=True)  # on a terminal within 1 s, steps or none
    data = capacity_plan(q, cat, bar.advance) if len(gpus) == 1 else capacity_plan_gpus(q, gpus, cat,
                                                                                         bar.advance)
    bar.close()
    data["ranked"] = data["ranked"][:max(args.top, 1)] if args.format == "table" else data["ranked"]

    sets = plan_deploy(args, data, q, cat)
    if getattr(args, "plot", None) is not None:
        from servesim.render.plots import save

        save(pareto_figure(data), args.plot)
    return emit(args, Output(data, capacity_text(data, top=args.top), [{"table": "ranked", **_flat(r)}
                                                                       for r in data["ranked"]]), sets)


def _capacity_report(args: argparse.Namespace) -> Output:
    out = _capacity(args)
    command = "servesim " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    blocks = capacity_report_blocks(out.data, command)
    title = f"servesim capacity plan: {out.data['model']} on {out.data['gpu']}"
    files = {k: str(v) for k, v in write_report(blocks, args.out, title).items()}
    text = (f"wrote {files['html']} (self-contained) and {files['markdown']} with {len(files) - 2} "
            "figure(s)\n")
    rows = [{"file": k, "path": v} for k, v in files.items()]
    return Output({"files": files, "plan": out.data}, text, rows)


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update({f"{k}_{kk}": vv for kk, vv in v.items()})
        elif isinstance(v, list):
            out[k] = ";".join(map(str, v))
        else:
            out[k] = v
    return out


def _headroom_needs_gpus(args: argparse.Namespace) -> None:
    """``--headroom`` plans a capacity plan's rows below their sustainable rates: refused elsewhere."""
    if args.headroom is not None:
        raise InputError(f"--headroom {args.headroom:g}: applies with --model M --gpu G --gpus N (a capacity "
                         "plan, whose rows it plans at that share of their sustainable rates)")


def run_plan(args: argparse.Namespace) -> Output:
    fewest = args.target_rate is not None and args.model is not None and args.isl is not None
    if args.gpus is not None or fewest:
        return _capacity(args)
    _headroom_needs_gpus(args)
    lab_node = args.model is None or args.calibration is not None
    for flag, value in (("--k", args.k), ("--acceptance-length", args.acceptance_length),
                        ("--traffic", args.traffic)):
        if value is not None and (lab_node or args.spec in (None, "none")):
            shown = value if isinstance(value, str) else f"{value:g}"
            raise InputError(f"{flag} {shown}: applies with --model M --gpu G and --spec METHOD (a node "
                             "or capacity plan on measured kernels); the lab's reference or calibrated node "
                             "takes its preset's alpha")
    p, data, _ = _plan_data(args)
    req = p.request
    if args.plot is not None:
        from servesim.render.figures import plan_figure
        from servesim.render.plots import save

        save(plan_figure(_plan_curves(req)), args.plot)
    return Output(data, render.plan_text(data), [{"table": "ranked", **c} for c in data["ranked"]])


def _plan_curves(req: PlanRequest) -> PlanCurves:
    """The plan figure's curves for a plan request (the same recommendation as the plan)."""
    return plan_curves(req.workload, req.node, req.nodes, req.beta, req.link, speculation=req.speculation,
                       k_max=req.k_max, attainment_target=req.attainment_target)


def _report_ttft_png(p: Plan, seed: int) -> bytes | None:
    """Simulated TTFT histogram of the recommendation and the best of the other architecture."""
    from servesim.plan.rescore import ttft_samples
    from servesim.render import plots  # matplotlib only when plotting

    req, ranked = p.request, p.ranked
    best = ranked[0]
    other = next((c for c in ranked if c.architecture != best.architecture and c.result.stable), None)
    samples = ttft_samples(req, [c for c in (best, other) if c is not None], seed=seed)
    if not samples:
        return None
    fig, axes = plots.figure(1)
    plots.plot_ttft_distribution(axes[0], samples, req.workload.slo_ttft_s)
    return plots.png_bytes(fig)


def _report_biases(seed: int) -> list[dict[str, Any]]:
    """The bias rows of `servesim validate`, at a size that takes about a second."""
    from servesim.plan.validate import validate_summary

    data = validate_summary(requests=200_000, serving_requests=40_000, cycles=200_000, replications=4,
                            seed=seed, crossover=False)
    return list(data["bias"])


def run_report(args: argparse.Namespace) -> Output:
    if args.gpus is not None or (args.target_rate is not None and args.model is not None
                                 and args.isl is not None):
        return _capacity_report(args)
    _headroom_needs_gpus(args)
    p, plan_data, bar = _plan_data(args, extra_stages=5)  # mixes, specdec, biases, TTFT, files
    try:
        return _report_rest(args, p, plan_data, bar)
    finally:
        bar.close()


def _report_rest(args: argparse.Namespace, p: Plan, plan_data: dict[str, Any],
                 bar: progress.Progress) -> Output:
    from servesim.render.content import report_blocks

    req = p.request
    wl = req.workload
    dis = disagg_summary(plan_data["preset"], workload=wl, link=req.link, nodes=req.nodes, beta=req.beta,
                         node=req.node)
    if req.speculation is not None:  # the mixes table weighs speculation as the plan does
        for row in dis["rows"]:
            mix = replace(wl, prompt_tokens=row["prompt_tokens"], output_tokens=row["output_tokens"])
            best = plan_one(replace(req, workload=mix), with_sensitivity=False).ranked[0]
            row["with_speculation"] = {"label": best.label, "goodput_rps": best.goodput_rps}
    bar.advance()
    lab = lab_preset(args.spec, on_model=True) if args.spec not in (None, "none") else None  # eagle: none
    spec = specdec_summary(preset=lab.name if lab is not None else "mtp")
    bar.advance()
    command = "servesim " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    biases = _report_biases(args.seed)
    bar.advance()
    ttft_png = _report_ttft_png(p, args.seed)
    bar.advance()

    xo = dis["crossover_exact_GBps"]
    curves = {"plan": _plan_curves(req), "specdec": specdec_curves(0.1, 0.05, 0.0),
              "disagg": disagg_curves(wl, req.node, req.nodes, req.beta, req.link, xo)}
    blocks = report_blocks(plan_data, dis, spec, curves, command=command, biases=biases, ttft_png=ttft_png)
    title = f"servesim report: {plan_data['preset']} on {req.nodes} nodes"
    written = write_report(blocks, args.out, title)
    bar.advance()
    files = {k: str(v) for k, v in written.items()}
    text = (f"wrote {files['html']} (self-contained) and {files['markdown']} "
            f"with {len(files) - 2} figures\nrecommendation: {plan_data['recommendation']['label']}\n")
    rows = [{"file": k, "path": v} for k, v in files.items()]
    return Output({"files": files, "plan": plan_data}, text, rows)
