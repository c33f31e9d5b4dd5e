"""CLI commands: simulate, validate (issue 3).

A thin layer that imports numpy only when a command runs: flags are parsed
here (types from :mod:`servesim.cli.args`, so bad input is one line and exit
status 2), the numbers come from :mod:`servesim.sim.report` and
:mod:`servesim.plan.validate`, the text from :mod:`servesim.render.simtext`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from servesim._checks import InputError, ParameterError
from servesim.cli.args import (
    Output,
    add_disagg_arguments,
    add_format,
    add_pool_arguments,
    choice,
    integer,
    number,
    plot_path,
)
from servesim.cli.common import deployment_of, resolve_node, workload_of
from servesim.cli.progress import Progress, working
from servesim.hardware.catalog import load_catalog
from servesim.inputs.traces import load_trace, workload_from_trace
from servesim.model import kvcache, serving
from servesim.model.serving import resolve_scenario
from servesim.render import simtext as text
from servesim.render.predict import engine_sim_text

if TYPE_CHECKING:  # pragma: no cover
    from servesim.cli.args import SubParsers
    from servesim.sim.cluster import SimSettings

__all__ = ["register"]

# Registration must not import numpy: the seed's stdlib-only entry point
# (``python -S spec_decode_sim.py``) builds the whole parser.  These mirror
# servesim.sim's values; tests/cli/test_sim_cli.py checks that they agree.
SERVICE_KINDS = ("exp", "det", "lognormal", "gamma")
LINK_CONTENTION = ("node", "shared", "none")
DEFAULT_SEED = 20240601
_MEMORY_NOTE = " (memory: about 100 bytes a request, so 10^7 is about 1 GB)"


def _with_plot(run: Callable[[argparse.Namespace], Output], command: str
               ) -> Callable[[argparse.Namespace], Output]:
    """Wrap a command so that ``--plot FILE`` saves its figure of the result, drawn after it ran."""

    def wrapped(args: argparse.Namespace) -> Output:
        out: Output = run(args)
        if args.plot is not None:
            from servesim.cli.sim_plots import save_figure  # matplotlib, only with --plot

            save_figure(command, out.data, args.plot)
        return out

    return wrapped


def _split(text: str) -> tuple[int, int]:
    """'2p/6d' or '2,6' -> (2, 6)."""
    cleaned = text.replace("p", "").replace("d", "").replace("/", ",")
    parts = cleaned.split(",")
    try:
        p, d = (int(x) for x in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a split: must be like 2p/6d or 2,6 (prefill, decode nodes >= 1)"
        ) from None
    if p < 1 or d < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range: prefill and decode nodes must be >= 1")
    return p, d


def register(sub: SubParsers) -> None:
    """Add ``simulate`` and ``validate``."""
    _register_simulate(sub)
    _register_validate(sub)


def _register_simulate(sub: SubParsers) -> None:
    """``simulate``: the queue, the serving presets, the run's size, engine mode, trace replay."""
    sp = sub.add_parser(
        "simulate",
        help="simulate a G/G/c queue, or (--preset) colocated vs disaggregated serving, "
        "beside the closed forms",
        description="Without --preset: a G/G/c FCFS queue (--servers, --rate, --service ...) against "
        "Erlang-C and the M/G/c approximations.  With --preset: the request-level serving simulation of "
        "colocated and disaggregated deployments (TTFT/TPOT percentiles, goodput) against servesim "
        "disagg's closed form.",
    )
    add_disagg_arguments(sp, list(serving.WORKLOAD_PRESETS))
    sp.set_defaults(preset=None)
    _queue_arguments(sp)
    _serving_arguments(sp)
    _run_arguments(sp)
    _engine_arguments(sp)
    _trace_arguments(sp)
    sp.add_argument("--no-timing", action="store_true",
                    help="leave out the wall-clock figures (sim_wall_s or sim_wall_ms, sim_requests_per_s), "
                    "for byte-identical output")
    sp.add_argument("--plot", type=plot_path, default=None, metavar="FILE.png|svg",
                    help="save the wait tail (queue), TTFT closed form vs simulated (--preset) or "
                    "goodput per deployment (--trace)")
    add_format(sp)
    sp.set_defaults(run=_with_plot(_simulate, "simulate"))


def _queue_arguments(sp: argparse.ArgumentParser) -> None:
    """simulate's queue mode: servers, service and arrival laws."""
    sp.add_argument("--servers", type=integer(1, hi=100_000), default=8,
                    help="queue mode: servers c, 1-100,000 (default 8)")
    sp.add_argument("--service", type=choice(SERVICE_KINDS, "service"), default=None,
                    help="service time: exp, det, lognormal, gamma (default exp; with --preset: det, the "
                    "prefill time P / R_p; exp gives the M/M/c assumption)")
    sp.add_argument("--service-mean-s", type=number(1e-9, 1e6), default=1.0,
                    help="queue mode: mean service time in s, 1e-9 to 1e6 (default 1)")
    sp.add_argument("--service-cv", type=number(0.001, 100.0), default=1.0,
                    help="queue mode: coefficient of variation of lognormal/gamma service, 0.001-100 "
                    "(default 1)")
    sp.add_argument("--arrival-cv", type=number(0.001, 100.0), default=1.0,
                    help="interarrival coefficient of variation, 0.001-100: 1 = Poisson (default), > 1 "
                    "bursty (gamma)")


def _serving_arguments(sp: argparse.ArgumentParser) -> None:
    """simulate --preset: the split, prompt lengths, KV link, decode slots and attainment."""
    sp.add_argument("--split", type=_split, default=None,
                    help="with --preset: disaggregated split such as 2p/6d (default: the closed form's best)")
    sp.add_argument("--prompt-cv", type=number(0.0, 10.0), default=0.0,
                    help="with --preset: lognormal prompt lengths of this cv >= 0 around the preset's mean "
                    "(default 0: one length)")
    sp.add_argument("--link-contention", type=choice(LINK_CONTENTION, "link contention"), default="node",
                    help="with --preset: KV link as one FCFS queue per prefill node (node, default), one for "
                    "the pool (shared), or none (the closed form)")
    sp.add_argument("--kv-streaming", action="store_true",
                    help="with --preset: stream the KV cache layer by layer, overlapping transfer and "
                    "prefill")
    sp.add_argument("--decode-slots", type=integer(1, hi=100_000), default=None,
                    help="with --preset: batch slots per decode node (default floor(R_d TPOT_base))")
    sp.add_argument("--no-decode-slots", action="store_true",
                    help="with --preset: unlimited decode slots (the closed form: no decode-side queueing)")
    sp.add_argument("--attainment", "--attainment-target", dest="attainment_target", type=number(0.0, 1.0),
                    default=0.9, metavar="FRACTION",
                    help="with --preset: share of requests that must meet both SLOs, in [0, 1] (default 0.9, "
                    "as DistServe; --attainment-target is the old name)")


def _run_arguments(sp: argparse.ArgumentParser) -> None:
    """simulate's run: requests, replications, warm-up and seed."""
    sp.add_argument("--requests", type=integer(1, _MEMORY_NOTE, hi=10_000_000), default=None,
                    help="requests simulated in total, 1-10,000,000 (about 100 bytes and a microsecond or "
                    "two each: 10^7 needs about 1 GB) (default 1,000,000; with --preset 100,000 per "
                    "architecture; engine mode 2,000)")
    sp.add_argument("--replications", type=integer(1, hi=1000), default=None,
                    help="independent replications for the 95%% intervals (default 10; with --preset 5)")
    sp.add_argument("--warmup", type=number(0.0, 1.0, hi_open=True), default=0.1,
                    help="fraction of each replication's first requests left out, in [0, 1) (default 0.1)")
    sp.add_argument("--seed", type=integer(0, hi=2**63 - 1), default=DEFAULT_SEED,
                    help=f"seed, 0 to 2^63-1 (default {DEFAULT_SEED})")


def _engine_arguments(sp: argparse.ArgumentParser) -> None:
    """simulate's engine mode (--model, --gpu, --isl, --osl, --rate)."""
    e = sp.add_argument_group(
        "engine mode (--model, --gpu, --isl, --osl, --rate): the iteration-level simulator")
    e.add_argument("--mode", type=choice(["agg", "disagg"], "mode"), default="agg",
                   help="agg: colocated replicas of --tp GPUs (default); disagg: prefill and decode pools")
    e.add_argument("--replicas", type=integer(1, hi=4096), default=1,
                   help="agg: colocated replicas, requests routed round-robin, 1-4,096 (default 1)")
    add_pool_arguments(e)
    e.add_argument("--shared-link", action="store_true",
                   help="disagg: KV transfers queue on one shared link (the closed form gives each its own)")


def _trace_arguments(sp: argparse.ArgumentParser) -> None:
    """simulate --trace: the replayed trace, its speed and the prefix cache."""
    sp.add_argument("--trace", default=None, metavar="FILE",
                    help="replay an Azure, Mooncake or BurstGPT trace through colocated and every split "
                    "(SLOs from --slo-* or the preset)")
    sp.add_argument("--rate-scale", type=number(1e-6, 1e6), default=1.0,
                    help="with --trace: replay this many times faster (default 1)")
    sp.add_argument("--prefix-cache", action="store_true",
                    help="with --trace (Mooncake hash_ids): also replay with cached prefixes skipping their "
                    "prefill and transfer")
    sp.add_argument("--cache-blocks", type=integer(1, hi=100_000_000), default=None,
                    help="with --prefix-cache: LRU capacity in 512-token blocks (default unbounded)")


def _register_validate(sub: SubParsers) -> None:
    """``validate``: the agreement and bias tables' sizes and seed."""
    vp = sub.add_parser(
        "validate",
        help="closed forms vs simulation: agreement table (PASS/FAIL) and the bias of each "
        "'model vs reality' assumption of the closed forms",
        description="Closed forms vs simulation. An exact closed form passes when the simulation is "
        "within t standard errors of it, t the Student-t critical value at 1%% divided by the number of "
        "exact rows (Bonferroni): correct closed forms fail a run with probability below 1%% whatever "
        "the seed; an approximate one passes within the relative tolerance stated on its row. Exit "
        "status 1 when a row fails.",
    )
    vp.add_argument("--requests", type=integer(10, _MEMORY_NOTE, hi=10_000_000), default=1_000_000,
                    help="requests per M/M/c and M/G/c case, 10-10,000,000 (default 1,000,000)")
    vp.add_argument("--serving-requests", type=integer(10, _MEMORY_NOTE, hi=10_000_000), default=100_000,
                    help="requests per serving simulation, 10-10,000,000 (default 100,000)")
    vp.add_argument("--cycles", type=integer(1, hi=100_000_000), default=1_000_000,
                    help="speculative cycles per case, 1-100,000,000 (default 1,000,000)")
    vp.add_argument("--replications", type=integer(2, " (intervals need a spread)", hi=1000), default=10,
                    help="independent replications per case (default 10)")
    vp.add_argument("--seed", type=integer(0, hi=2**63 - 1), default=DEFAULT_SEED,
                    help=f"seed, 0 to 2^63-1 (default {DEFAULT_SEED})")
    vp.add_argument("--no-crossover", action="store_true",
                    help="skip the simulated link-crossover rows (a best-split search per bandwidth)")
    vp.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    vp.add_argument("--plot", type=plot_path, default=None, metavar="FILE.png|svg",
                    help="save the agreement z-scores and the bias of each assumption")
    add_format(vp)
    vp.set_defaults(run=_with_plot(_validate, "validate"))


def _simulate(args: argparse.Namespace) -> Output:
    """simulate: engine mode, trace replay, the G/G/c queue or (--preset) the serving simulation; on a
    terminal, a run of more than a second shows that it is running."""
    with working("simulating"):
        return _simulated(args)


def _simulated(args: argparse.Namespace) -> Output:
    """:func:`_simulate` without the progress."""
    if args.trace is not None and args.model is not None:
        return _engine_trace(args)
    if args.trace is not None:
        return _replay(args)
    if args.model is not None and args.isl is not None:
        return _engine(args)
    if args.preset is None:
        return _simulate_queue(args)
    return _simulate_serving(args)


def _simulate_queue(args: argparse.Namespace) -> Output:
    """The G/G/c queue against Erlang-C and the M/G/c approximations."""
    from servesim.sim.report import queue_summary

    if args.rate is None:
        raise ParameterError("rate", None, "given in req/s > 0 (or use --preset for a workload)")
    data = queue_summary(
        servers=args.servers, rate_per_s=args.rate, service=args.service or "exp",
        service_mean_s=args.service_mean_s, service_cv=args.service_cv, arrival_cv=args.arrival_cv,
        timing=not args.no_timing, **_run(args, requests=1_000_000, replications=10))
    cis = {"mean_wait_s": "mean_wait_ci95_s", "p_wait": "p_wait_ci95", "wait_p99_s": "wait_p99_ci95_s"}
    rows = [{**{k: data[k] for k in ("model", "servers", "rate_per_s", "requests", "stable")},
             "quantity": qty, "simulated": data[qty], "ci95_low": data[ci][0], "ci95_high": data[ci][1],
             **{key: m[qty] for key, m in data["closed_form"].items()}} for qty, ci in cis.items()]
    return Output(data, text.queue_text(data), rows)


def _simulate_serving(args: argparse.Namespace) -> Output:
    """--preset: colocated and disaggregated serving simulated beside the closed form."""
    from servesim.sim.cluster import SimOptions
    from servesim.sim.report import serving_summary

    if args.service not in (None, "exp", "det"):
        raise ParameterError("service", args.service, "exp or det with --preset (prefill time per prompt "
                             "length)")
    if args.split is not None and sum(args.split) != args.nodes:
        raise ParameterError("split", f"{args.split[0]}p/{args.split[1]}d",
                             f"prefill + decode nodes = --nodes ({args.nodes})")
    settings = _settings(args)

    data = serving_summary(
        args.preset, workload=workload_of(args), node_from=lambda wl: resolve_node(args, wl), link=args.link,
        nodes=args.nodes, beta=args.beta, rate_per_s=args.rate, slo_ttft_s=args.slo_ttft_s,
        slo_tpot_s=args.slo_tpot_s, split=args.split, prompt_cv=args.prompt_cv, arrival_cv=args.arrival_cv,
        options=SimOptions(settings=settings, attainment_target=args.attainment_target,
                           **_run(args, requests=100_000, replications=5)), timing=not args.no_timing)
    rows = [{"preset": data["preset"], "architecture": arch, "source": src, **_csv_safe(data[arch][src])}
            for arch in ("colocated", "disaggregated") for src in ("closed_form", "simulated")]
    return Output(data, text.serving_text(data), rows)


def _run(args: argparse.Namespace, *, requests: int, replications: int) -> dict[str, Any]:
    """The run's size, warm-up and seed (--requests and --replications, else these)."""
    return {"requests": args.requests or requests, "replications": args.replications or replications,
            "warmup_fraction": args.warmup, "seed": args.seed}


def _engine(args: argparse.Namespace) -> Output:
    """Engine mode: the iteration-level simulator beside the closed form at load."""
    from servesim.plan.engine_summary import engine_summary

    if args.gpu is None or args.rate is None or args.osl is None:
        raise InputError("engine mode needs --model, --gpu, --isl, --osl and --rate (req/s)")
    cat = load_catalog(*args.catalog) if args.catalog else None
    dep = deployment_of(args)
    run = {"rate_per_s": args.rate, "isl": args.isl, "osl": args.osl, "requests": args.requests or 2000,
           "seed": args.seed, "slo_ttft_s": args.slo_ttft_s, "catalog": cat}
    if args.mode == "agg":
        data = engine_summary(dep, None, replicas=args.replicas, **run)
    else:
        ln = kvcache.LINKS["rdma"] if args.link is None else args.link
        pools = replace(dep, tp=args.prefill_tp or args.tp), replace(dep, tp=args.decode_tp or args.tp)
        data = engine_summary(*pools, prefill_workers=args.prefill_workers,
                              decode_workers=args.decode_workers, link_bytes_per_s=ln.bytes_per_s,
                              shared_link=args.shared_link, **run)
    return _engine_output(data, timing=not args.no_timing)


WALL_CLOCK_KEYS = ("wall_ms", "sim_wall_ms", "sim_wall_s", "sim_requests_per_s")
"""Figures that depend on the machine's speed, not on the inputs (left out under --no-timing)."""


def _engine_output(data: dict[str, Any], *, timing: bool = True) -> Output:
    if not timing:
        data = _without_timing(data)

    return Output(data, engine_sim_text(data), [{k: v for k, v in data.items() if not isinstance(v, dict)}])


def _without_timing(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with every wall-clock figure removed, at any depth."""
    return {k: _untimed(v) for k, v in d.items() if k not in WALL_CLOCK_KEYS}


def _untimed(v: object) -> object:
    if isinstance(v, dict):
        return _without_timing(v)
    return [_untimed(x) for x in v] if isinstance(v, list) else v


def _engine_trace(args: argparse.Namespace) -> Output:
    """A trace replayed through the engine loop, beside the closed form at its means."""
    from servesim.plan.engine_summary import engine_trace_summary

    tr = load_trace(args.trace, rate_scale=args.rate_scale, need_rate=True)
    cat = load_catalog(*args.catalog) if args.catalog else None
    arr = [float(x) for x in tr.arrival_s]
    lengths = [(int(p), int(o)) for p, o in zip(tr.prompt_tokens, tr.output_tokens, strict=True)]
    if args.requests:
        arr, lengths = arr[:args.requests], lengths[:args.requests]
    if arr[-1] - arr[0] <= 0:  # the first --requests of the trace all arrive at once
        raise InputError(f"--requests {len(arr)}: those first requests of {args.trace} arrive at one "
                         "instant; the rate is undefined (take more requests)")
    dep = replace(deployment_of(args), gpu=args.gpu or "")
    data = engine_trace_summary(dep, arr, lengths, replicas=args.replicas, seed=args.seed,
                                slo_ttft_s=args.slo_ttft_s, trace=str(args.trace), catalog=cat)
    return _engine_output(data, timing=not args.no_timing)


def _replay(args: argparse.Namespace) -> Output:
    from servesim.sim.replay import trace_replay_summary

    tr = load_trace(args.trace, cache_blocks=args.cache_blocks, rate_scale=args.rate_scale)

    # the SLOs, unless --slo-* say so
    base = workload_of(args) if args.preset else serving.WORKLOAD_PRESETS["chat"]
    wl, link, node, beta, source = resolve_scenario(
        workload_from_trace(tr, slo_ttft_s=base.slo_ttft_s, slo_tpot_s=base.slo_tpot_s),
        slo_ttft_s=args.slo_ttft_s, slo_tpot_s=args.slo_tpot_s, link=args.link,
        node_from=lambda w: resolve_node(args, w),
    )
    data = trace_replay_summary(
        tr, node, workload=wl, nodes=args.nodes, link=link, beta=beta, settings=_settings(args),
        prefix_cache=args.prefix_cache,
        attainment_target=args.attainment_target, seed=args.seed, node_source=source,
    )
    rows = [{"deployment": r["deployment"], "architecture": r["architecture"],
             "closed_form": r["closed_form"], "replay": _csv_safe(r["replay"])} for r in data["rows"]]
    return Output(data, text.replay_text(data), rows)


def _settings(args: argparse.Namespace) -> SimSettings:
    """The simulator settings from the flags shared by --preset and --trace."""
    from servesim.sim.cluster import SimSettings

    return SimSettings(prefill_service="exponential" if args.service == "exp" else "deterministic",
                       link_contention=args.link_contention, kv_streaming=args.kv_streaming,
                       decode_slots=not args.no_decode_slots, slots_per_node=args.decode_slots)


def _csv_safe(row: dict[str, Any]) -> dict[str, Any]:
    """Intervals [low, high] become {low, high} so that CSV flattening gives *_low / *_high columns."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out[k] = _csv_safe(v)
        elif isinstance(v, list) and len(v) == 2:
            out[k] = {"low": v[0], "high": v[1]}
        else:
            out[k] = v
    return out


def _validate(args: argparse.Namespace) -> Output:
    from servesim.plan.validate import VALIDATE_STAGES, validate_summary

    bar = Progress(VALIDATE_STAGES, "validating", enabled=not args.quiet)
    try:
        data = validate_summary(requests=args.requests, serving_requests=args.serving_requests,
                                cycles=args.cycles, replications=args.replications, seed=args.seed,
                                crossover=not args.no_crossover, progress=bar.advance)
    finally:
        bar.close()
    rows = [{"table": "agreement", **r} for r in data["agreement"]]
    rows += [{"table": "bias", **r} for r in data["bias"]]
    return Output(data, text.validate_text(data), rows)
