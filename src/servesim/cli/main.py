"""Command line: ``servesim specdec | disagg | all | ...``.

A thin layer over :mod:`servesim.plan.summary` and :mod:`servesim.render`; the CLI
modules are the only ones that print.  Bad input gets one line on stderr
naming the flag, the value and the valid range, and exit status 2.

Commands beyond the seed's live in their own modules (``COMMAND_MODULES``);
each has ``register(sub)`` (see :mod:`servesim.cli.args`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from servesim._catalogfile import CatalogError
from servesim._checks import InputError, ParameterError
from servesim._version import __version__
from servesim.cli.args import Output, Parser, add_format, choice, integer, link, number, plot_path

__all__ = ["COMMAND_MODULES", "build_parser", "main"]

COMMAND_MODULES: tuple[str, ...] = (
    "servesim.cli.sim",
    "servesim.cli.roofline",
    "servesim.cli.inputs",
    "servesim.cli.plan",
    "servesim.cli.predict",
)
"""Modules that add further subcommands, in the order they appear in --help."""


def build_parser() -> argparse.ArgumentParser:
    from servesim.model.serving import WORKLOAD_PRESETS
    from servesim.model.speculative import DEFAULT_C, DEFAULT_D, DEFAULT_K_MAX, SPECDEC_PRESETS

    parser = Parser(prog="servesim", description="Speculative decoding and prefill/decode "
                    "disaggregation, in closed form, with the assumptions attached.")
    parser.add_argument("-V", "--version", action="version", version=f"servesim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    sp = sub.add_parser("specdec", help="speculative decoding economics: grid, presets, utilization sweep")
    sp.add_argument("--preset", type=choice(list(SPECDEC_PRESETS), "preset"), default="mtp",
                    help=f"preset for the utilization sweep: {', '.join(SPECDEC_PRESETS)} (default mtp)")
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
    add_format(sp)
    sp.set_defaults(run=_specdec)

    dp = sub.add_parser("disagg", help="colocated vs disaggregated serving: TTFT, TPOT, goodput, crossover")
    add_disagg_arguments(dp, list(WORKLOAD_PRESETS))
    dp.add_argument("--plot", type=plot_path, default=None, metavar="FILE.png|svg",
                    help="save goodput vs arrival rate and vs link bandwidth")
    add_format(dp)
    dp.set_defaults(run=_disagg)

    ap = sub.add_parser("all", help="both parts with defaults (disagg for every workload preset)")
    ap.add_argument("--plot", type=plot_path, default=None, metavar="FILE.png|svg",
                    help="save every figure in one file: the speedup heatmap and utilization sweep, then "
                    "goodput vs arrival rate and vs link for each workload preset")
    add_format(ap)
    ap.set_defaults(run=_all)

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for name, p in sub.choices.items():  # every --help ends with examples
        if name in EXAMPLES and not p.epilog:
            p.epilog = "examples:\n" + "\n".join(f"  {e}" for e in EXAMPLES[name])
            p.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = ("examples:\n  servesim all\n  servesim predict --model meta-llama/Llama-3.1-8B-Instruct "
                     "--gpu h100-sxm --isl 1024 --osl 256 --concurrency 16\n  servesim COMMAND --help")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


EXAMPLES: dict[str, tuple[str, ...]] = {
    "specdec": ("servesim specdec", "servesim specdec --preset mtp",
                "servesim specdec --util 0.7 --alpha 0.6"),
    "disagg": ("servesim disagg --preset chat", "servesim disagg --preset rag --link tcp",
               "servesim disagg --preset rag --model llama-3-70b --gpu h100-sxm --tp 8 --isl 4096"),
    "all": ("servesim all", "servesim all --format json"),
    "plan": ("servesim plan --preset rag",
             "servesim plan --model meta-llama/Llama-3.1-70B-Instruct --gpu h100-sxm --gpus 16 "
             "--isl 1024 --osl 512",
             "servesim plan --model llama-3-8b --gpu h100-sxm,h200 --target-rate 50 --isl 2048 --osl 256"),
    "report": ("servesim report --preset rag --out rag-report",
               "servesim report --model llama-3-70b --gpu h100-sxm --gpus 8 --isl 1024 --osl 512 --out cap"),
    "simulate": ("servesim simulate --servers 8 --rate 6.8",
                 "servesim simulate --preset rag --requests 20000",
                 "servesim simulate --model llama-3-70b --gpu h100-sxm --tp 4 --isl 1024 --osl 512 --rate 3"),
    "validate": ("servesim validate --quiet", "servesim validate --requests 100000 --format json"),
    "roofline": ("servesim roofline --model llama-3-70b --gpu h100-sxm --tp 8",
                 "servesim roofline --model meta-llama/Llama-3.1-8B-Instruct --gpu h200 --dtype fp8 "
                 "--batch 1 64"),
    "trace": ("servesim trace summarize FILE", "servesim trace fetch azure-code"),
    "fit-alpha": ("servesim fit-alpha scrape.txt", "servesim fit-alpha before.txt after.txt --batch 64 "
                  "--model llama-3-70b --gpu h100-sxm --tp 8"),
    "calibrate": ("servesim calibrate points.csv", "servesim calibrate result.json --save node.toml"),
    "predict": ("servesim predict --model meta-llama/Llama-3.1-70B-Instruct --gpu h100-sxm --tp 4 "
                "--isl 1024 --osl 512 --concurrency 32",
                "servesim predict --model llama-3-8b --gpu h200 --dtype fp8 --isl 2048 --osl 256 --rate 4",
                "servesim predict --points sweep.csv --format json"),
}
"""Two or three examples at the end of each command's --help."""


def add_disagg_arguments(p: argparse.ArgumentParser, presets: Sequence[str]) -> None:
    """The workload/fleet/SLO flags shared by disagg and the commands built on it."""
    p.add_argument("--preset", type=workload_name(presets), default="chat",
                   help=f"workload: {', '.join(presets)} or a [workload.NAME] of a --catalog file "
                   "(default chat)")
    p.add_argument("--link", type=link, default=None,
                   help="prefill-to-decode link: nvlink, rdma, tcp, ... or GB/s (default rdma)")
    p.add_argument("--nodes", type=integer(2, " (one prefill and one decode node at least)", hi=512),
                   default=8,
                   help="fleet size N, 2-512; every split is priced, so time grows about as N^2 "
                   "(512 nodes: seconds) (default 8)")
    p.add_argument("--beta", type=number(0.0, 100.0), default=None,
                   help="chunked-prefill interference coefficient in [0, 100] (default 0.5, or the "
                   "calibrated one)")
    p.add_argument("--rate", type=number(1e-6, 1e6), default=None,
                   help="arrival rate in req/s, 1e-6 to 1e6 (default: the preset's)")
    p.add_argument("--isl", type=integer(1, hi=1_000_000), default=None,
                   help="prompt tokens per request, 1-1,000,000 (default: the preset's)")
    p.add_argument("--osl", type=integer(1, hi=1_000_000), default=None,
                   help="output tokens per request, 1-1,000,000 (default: the preset's)")
    p.add_argument("--slo-ttft-ms", type=number(0.001, 3.6e6, scale=1e-3), default=None, metavar="MS",
                   dest="slo_ttft_s", help="TTFT SLO in ms, 0.001 to 3,600,000 (default: the preset's)")
    p.add_argument("--slo-tpot-ms", type=number(0.001, 60000.0, scale=1e-3), default=None, metavar="MS",
                   dest="slo_tpot_s", help="TPOT SLO in ms, 0.001 to 60,000 (default: the preset's)")
    g = p.add_argument_group("the node (default: the lab's reference node in workloads.toml)")
    g.add_argument("--model", default=None, help="derive the node from measured kernels: catalog model, "
                   "Hugging Face id or config.json, e.g. llama-3-70b (needs --gpu)")
    g.add_argument("--gpu", default=None, help="GPU for --model, e.g. h100-sxm (or h100_sxm)")
    g.add_argument("--tp", type=integer(1, hi=64), default=1,
                   help="tensor-parallel GPUs per node for --model, 1-64, dividing the heads (default 1, as "
                   "in every command)")
    g.add_argument("--dtype", type=choice(["bf16", "fp8", "fp4"], "dtype"), default=None,
                   help="weights and GEMMs for --model: bf16 (default; plan --gpus searches every dtype "
                   "the GPU runs), fp8, fp4 (B200)")
    g.add_argument("--kv-dtype", type=choice(["bf16", "fp8"], "kv-dtype"), default="bf16",
                   help="KV cache for --model: bf16 (default) or fp8; KV-transfer sizes follow")
    g.add_argument("--engine", type=choice(["vllm", "sglang", "trtllm"], "engine"), default="vllm",
                   help="engine whose budgets and host time price the node (default vllm)")
    g.add_argument("--catalog", action="append", default=[], metavar="FILE",
                   help="extra catalog TOML (GPUs, models, links); may be repeated")
    g.add_argument("--calibration", default=None, metavar="FILE",
                   help="use the node and beta fitted by `servesim calibrate` (its TOML output)")


class WorkloadName(str):
    """A --preset that is not shipped: resolved after parsing, against the --catalog files."""


def workload_name(presets: Sequence[str]) -> Any:
    """An argparse type: a shipped workload preset, or (a name) a workload of a user's --catalog."""
    import re

    def parse(text: str) -> str:
        if text in presets:
            return text
        if re.fullmatch(r"[A-Za-z][A-Za-z0-9_.+-]*", text):
            return WorkloadName(text)
        raise argparse.ArgumentTypeError(f"unknown preset {text!r}: must be one of {', '.join(presets)} "
                                         "or a [workload.NAME] of a --catalog file")

    return parse


def workload_of(args: argparse.Namespace) -> Any:
    """The workload ``--preset`` names: shipped, or from the ``--catalog`` files (later ones win)."""
    from servesim.model.serving import WORKLOAD_PRESETS

    name = args.preset
    if not isinstance(name, WorkloadName):
        return WORKLOAD_PRESETS[name]
    from servesim.hardware.catalog import load_catalog

    cat = load_catalog(*getattr(args, "catalog", []))
    if str(name) not in cat.workloads:
        known = [*WORKLOAD_PRESETS, *cat.workloads]
        raise InputError(f"--preset={str(name)!r} is not a known workload: must be one of "
                         f"{', '.join(known)}, or a [workload.NAME] of a --catalog file")
    return cat.workloads[str(name)]


def resolve_node(args: argparse.Namespace, wl: Any) -> tuple[Any, float, str]:
    """The node, beta and a one-line description of where the node came from.

    ``--calibration`` wins, then ``--model/--gpu/--tp/--dtype/--kv-dtype`` (the
    measured-kernel step model's node, :func:`servesim.hardware.node.step_node`,
    its decode batch sized so that TPOT_base meets the workload's TPOT SLO), then
    the lab's reference node.  ``--beta`` overrides a calibrated beta; the default is 0.5.
    """
    from servesim.model.serving import DEFAULT_NODE

    if args.calibration is not None:
        from servesim.inputs.calibrate import load_calibration

        node, beta = load_calibration(args.calibration)
        return node, beta if args.beta is None else args.beta, f"calibrated ({args.calibration})"
    beta = 0.5 if args.beta is None else args.beta
    if args.model is None and args.gpu is None:
        return DEFAULT_NODE, beta, "reference node (workloads.toml)"
    if args.model is None or args.gpu is None:
        raise InputError("--model and --gpu go together (both name catalog entries), "
                         "e.g. --model llama-3-70b --gpu h100-sxm --tp 8")
    from servesim.hardware.catalog import load_catalog
    from servesim.hardware.node import step_node
    from servesim.plan.predict import Deployment, build_step_model

    cat = load_catalog(*args.catalog)
    dep = Deployment(args.model, args.gpu, args.tp, args.dtype or "bf16", args.kv_dtype, args.engine)
    sm, _, memory = build_step_model(dep, cat)
    d = step_node(sm, memory, prompt_tokens=wl.prompt_tokens, output_tokens=wl.output_tokens,
                  tpot_slo_s=wl.slo_tpot_s)
    return d.node, beta, d.source


def _specdec(args: argparse.Namespace) -> Output:
    from servesim import render
    from servesim.plan.summary import specdec_summary

    data = specdec_summary(u=args.util, d=args.d, c=args.c, preset=args.preset,
                           alpha=args.alpha, k=args.k, k_max=args.k_max)
    if args.plot is not None:
        from servesim.render.figures import specdec_figure
        from servesim.render.plots import save

        save(specdec_figure(args.d, args.c, args.util), args.plot)
    return Output(data, render.specdec_text(data), _specdec_rows(data))


def _disagg(args: argparse.Namespace) -> Output:
    from servesim import render
    from servesim.model.serving import resolve_scenario
    from servesim.plan.summary import disagg_summary

    # Resolved once: the roofline node is derived here and reused by the figure.
    wl, ln, node, beta, source = resolve_scenario(
        workload_of(args), rate_per_s=args.rate, slo_ttft_s=args.slo_ttft_s,
        slo_tpot_s=args.slo_tpot_s, link=args.link, node_from=lambda w: resolve_node(args, w),
        prompt_tokens=args.isl, output_tokens=args.osl,
    )
    data = disagg_summary(args.preset, workload=wl, link=ln, nodes=args.nodes, beta=beta, node=node,
                          node_source=source)
    if args.plot is not None:
        from servesim.render.figures import disagg_figure
        from servesim.render.plots import save

        save(disagg_figure(wl, node, args.nodes, beta, ln, data["crossover_exact_GBps"]), args.plot)
    return Output(data, render.disagg_text(data), _disagg_rows(data))


def _all(args: argparse.Namespace) -> Output:
    from servesim import render
    from servesim.model.serving import WORKLOAD_PRESETS
    from servesim.plan.summary import disagg_summary, specdec_summary

    spec = specdec_summary()
    dis = {name: disagg_summary(name) for name in WORKLOAD_PRESETS}
    if args.plot is not None:  # one file, every panel: specdec, then disagg for each preset
        from servesim.model.speculative import DEFAULT_C, DEFAULT_D
        from servesim.render.figures import all_figure
        from servesim.render.plots import save

        save(all_figure(dis, DEFAULT_D, DEFAULT_C, 0.0), args.plot)
    text = "\n".join([render.specdec_text(spec), *(render.disagg_text(d) for d in dis.values())])
    rows = _specdec_rows(spec)
    for d in dis.values():
        rows += _disagg_rows(d)
    return Output({"specdec": spec, "disagg": dis}, text, rows)


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


def _resolve_link_name(args: argparse.Namespace) -> None:
    """Replace a ``--link NAME`` that is not shipped by the link of that name in ``--catalog`` files."""
    from servesim.cli.args import LinkName

    name = getattr(args, "link", None)
    if not isinstance(name, LinkName):
        return
    from servesim.hardware.catalog import load_catalog
    from servesim.model.kvcache import LINKS

    cat = load_catalog(*getattr(args, "catalog", []))
    try:
        args.link = cat.link(str(name)).link()
    except CatalogError:
        raise InputError(
            f"--link={str(name)!r} is not a known link: must be one of {', '.join(LINKS)}, a link of a "
            "--catalog file, or a bandwidth in GB/s > 0"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; exit status 0 (done), 1 (validate found a FAIL; output could not be
    written), 2 (bad input), 130 (interrupted)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        sys.stderr.write("servesim: interrupted\n")
        return 130


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `servesim`: the command list
        sys.stdout.write(parser.format_help())
        return 0
    if getattr(args, "format", "table") == "table" and getattr(args, "output", None) is None:
        _fit_terminal()
    try:
        _resolve_link_name(args)
        out: Output = args.run(args)
    except (ParameterError, CatalogError, InputError) as exc:
        print(f"servesim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    fmt = getattr(args, "format", "table")
    if fmt == "json":
        from servesim.render import to_json

        text = to_json(out.data)
    elif fmt == "csv":
        from servesim.render import to_csv

        text = to_csv(out.csv_rows)
    else:
        text = out.text
        from servesim.render import text as render_text

        if render_text.WIDTH is not None:
            text = _wrap(text, render_text.WIDTH)
    status = 1 if args.command == "validate" and _failed(out.data) else 0
    target = getattr(args, "output", None)
    try:
        if target is not None:
            from servesim.render.output import write_atomic

            write_atomic(target, text.encode("utf-8"))
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (e.g. `| head`): not an error of ours
        _silence_stdout()
        return status
    except OSError as exc:
        where = str(target) if target is not None else "standard output"
        print(f"servesim {args.command}: error: cannot write {where}: {exc.strerror or exc}", file=sys.stderr)
        _silence_stdout()
        return 1
    return status


def _fit_terminal() -> None:
    """On a terminal, tables fit its width (render.text.WIDTH); elsewhere output is byte-stable."""
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        import shutil

        from servesim.render import text

        text.WIDTH = max(40, shutil.get_terminal_size().columns)


def _wrap(text: str, width: int) -> str:
    """Lines longer than the terminal wrapped at word boundaries, continuations indented."""
    import textwrap

    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(line.strip(), width, initial_indent=lead, subsequent_indent=lead + "  ",
                             break_long_words=False, break_on_hyphens=False) or [line]
    return "\n".join(out)


def _failed(data: Any) -> bool:
    return isinstance(data, dict) and bool(data.get("agreement_failed"))


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
