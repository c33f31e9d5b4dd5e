"""CLI commands on real inputs (issue 5): ``trace summarize``, ``fit-alpha``, ``calibrate``.

* ``servesim trace summarize FILE`` -- count, span, rate, burstiness, length
  percentiles and (Mooncake) prefix reuse of an Azure, Mooncake or BurstGPT
  trace (:mod:`servesim.inputs.traces`), with ``--plot FILE.png``.
* ``servesim trace fetch NAME`` -- download a full public trace (Azure 2023
  code or conversation, Mooncake FAST'25, BurstGPT), checked, to a file;
  ``--list`` shows the names, sources and the excerpts that ship with
  servesim (:mod:`servesim.inputs.fetch`).
* ``servesim fit-alpha FILE [FILE2]`` -- the i.i.d. acceptance alpha from
  vLLM or SGLang Prometheus metrics, or from a typed-in figure with
  ``--value`` (:mod:`servesim.inputs.telemetry`).
* ``servesim calibrate FILE...`` -- prefill rate, TPOT_base and beta from
  measured TTFT/TPOT points (:mod:`servesim.inputs.calibrate`).

File problems raise :class:`servesim.inputs.traces.InputError`, which the CLI
``servesim.cli.main.main`` prints as one line with exit status 2.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from servesim.cli.args import FORMATS, Output, add_format, choice, integer, number, output_file, plot_path
from servesim.cli.progress import Progress
from servesim.hardware.catalog import builtin_catalog
from servesim.inputs.calibrate import calibrate, read_points
from servesim.inputs.traces import InputError, load_trace, summarize_trace
from servesim.model import kvcache
from servesim.model.speculative import DEFAULT_C, DEFAULT_D, DEFAULT_K_MAX
from servesim.render import inputs as itext
from servesim.render.output import write_atomic

if TYPE_CHECKING:  # pragma: no cover
    from servesim.cli.args import SubParsers

__all__ = ["register"]

# = servesim.inputs.traces.TRACE_FORMATS (not imported: the parser stays numpy-free)
_TRACE_FORMATS = ("azure", "mooncake", "burstgpt")
_FETCH_NAMES = ("azure-code", "azure-conv", "mooncake-conversation", "mooncake-synthetic", "burstgpt")
# = servesim.inputs.fetch.SOURCES (not imported: the parser is built without it; a test checks they agree)
_DEFINITIONS = ("per-position", "accept-length", "accept-rate")  # servesim.inputs.telemetry.DEFINITIONS


def _exporter(text: str) -> str:
    """``fit-alpha --engine``: an engine whose speculative metrics servesim reads
    (:data:`servesim.inputs.telemetry.ENGINES`, loaded only when the flag is given)."""
    from servesim.inputs.telemetry import ENGINES

    return choice(ENGINES, "engine")(text)


def _values(text: str) -> list[float]:
    """An argparse type: one number or a comma-separated list of numbers >= 0."""
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number or a comma-separated list of numbers"
        ) from None
    if not vals or not all(math.isfinite(v) and v >= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"{text!r} is out of range: numbers must be finite and >= 0")
    return vals


def _plot_format_run(
    p: argparse.ArgumentParser, plot_help: str, run: Callable[[argparse.Namespace], Output]
) -> None:
    """The tail every command here shares: ``--plot`` (what it saves: ``plot_help``), ``--format``,
    and the function that runs it."""
    p.add_argument("--plot", type=plot_path, default=None, metavar="FILE.png|svg", help=plot_help)
    add_format(p)
    p.set_defaults(run=run)


def register(sub: SubParsers) -> None:
    """Add ``trace``, ``fit-alpha`` and ``calibrate``."""
    _register_trace(sub)
    _register_fit_alpha(sub)
    _register_calibrate(sub)


def _register_trace(sub: SubParsers) -> None:
    """``trace summarize`` and ``trace fetch``."""
    tp = sub.add_parser("trace", help="request traces: summarize an Azure, Mooncake or BurstGPT trace")
    tsub = tp.add_subparsers(dest="trace_command", metavar="ACTION", parser_class=type(tp))
    tsub.required = True
    ts = tsub.add_parser("summarize", help="count, rate, burstiness, length percentiles, prefix reuse")
    ts.add_argument("file", metavar="FILE", help="trace file (.csv, .jsonl; .gz accepted)")
    ts.add_argument("--trace-format", type=choice(_TRACE_FORMATS, "trace format"), default=None,
                    help=f"{', '.join(_TRACE_FORMATS)} (default: detected from the first line)")
    ts.add_argument("--window-s", type=number(0.001, 1e7), default=60.0, metavar="S",
                    help="window for the peak-to-mean arrival rate, seconds > 0 (default 60)")
    ts.add_argument("--block-tokens", type=integer(1, hi=1_000_000), default=512,
                    help="tokens per hash_ids block (Mooncake: 512, the default)")
    ts.add_argument("--cache-blocks", type=integer(1, hi=100_000_000), default=None,
                    help="prefix-cache capacity in blocks, LRU (default: unbounded)")
    _plot_format_run(ts, "save arrival rate over time and length histograms", _trace_summarize)
    tf = tsub.add_parser("fetch",
                         help="download a full public trace (Azure 2023, Mooncake FAST'25, BurstGPT)")
    tf.add_argument("name", metavar="NAME", nargs="?", default=None, type=choice(_FETCH_NAMES, "trace"),
                    help=f"{', '.join(_FETCH_NAMES)}")
    tf.add_argument("--out", default=None, metavar="FILE",
                    help="where to write it (default: the upstream file name in the current folder; a "
                         "folder gets that name inside it; a name ending in .gz is written compressed)")
    tf.add_argument("--force", action="store_true", help="replace an existing file")
    tf.add_argument("--timeout-s", type=number(0.1, 3600.0), default=30.0, metavar="S",
                    help="seconds to wait for the server at each step (default 30)")
    tf.add_argument("--url", default=None,
                    help="download from this URL instead (a mirror; a pinned checksum still applies)")
    tf.add_argument("--list", action="store_true",
                    help="list the traces, their sources and licences, and the excerpts that ship "
                         "with servesim")
    tf.add_argument("--quiet", action="store_true", help="no progress bar")
    tf.add_argument("--format", type=choice(FORMATS, "format"), default="table",
                    help="output format: table (default), json or csv (the download itself is unchanged)")
    tf.set_defaults(run=_trace_fetch)


def _register_fit_alpha(sub: SubParsers) -> None:
    """``fit-alpha``: the input, the fit's definition, the optimum's costs."""
    fp = sub.add_parser("fit-alpha", help="acceptance alpha from vLLM/SGLang metrics or a published figure")
    fp.add_argument("files", nargs="*", metavar="FILE",
                    help="one Prometheus scrape (file, '-' for stdin, or http URL), or two for the "
                         "interval between them")
    fp.add_argument("--value", type=_values, default=None,
                    help="a published figure instead of a scrape (per-position: comma-separated p_1,p_2,...)")
    fp.add_argument("--from", dest="definition", type=choice(_DEFINITIONS, "definition"), default=None,
                    help="what to fit from: per-position, accept-length (mean, bonus included) or "
                         "accept-rate (default: the richest the input has)")
    fp.add_argument("--k", type=integer(1, hi=64), default=None,
                    help="draft tokens per cycle of the measurement, when the input does not say")
    fp.add_argument("--engine", type=_exporter, default=None,
                    help="whose accept-rate definition a --value uses: vllm (accepted/drafted) or "
                         "sglang (length/(k+1)) (default vllm)")
    fp.add_argument("--exclude-bonus", action="store_true",
                    help="the --value accept-length excludes the bonus token")
    fp.add_argument("--model", default=None, help="model_name label to use when a scrape has several")
    fp.add_argument("--interval-s", type=number(0.001, 1e9), default=None, metavar="S",
                    help="seconds between two scrapes (default: their sample or file times)")
    fp.add_argument("--util", type=number(0.0, 1.0, hi_open=True), default=0.0,
                    help="compute utilization u in [0, 1) for the second optimal k (default 0)")
    fp.add_argument("--batch", type=integer(1, hi=100_000), default=None,
                    help="decode batch instead of --util: u from the roofline of --target on --gpu x --tp")
    fp.add_argument("--target", default=None,
                    help="with --batch: catalog model being served, e.g. llama-3-70b")
    fp.add_argument("--gpu", default=None, help="with --batch: catalog GPU, e.g. h100-sxm")
    fp.add_argument("--tp", type=integer(1, hi=64), default=1,
                    help="with --batch: tensor-parallel GPUs, 1-64 (default 1, as in every command)")
    fp.add_argument("--context", type=integer(1, hi=10_000_000), default=2048,
                    help="with --batch: mean context tokens during decode (default 2048)")
    fp.add_argument("--d", type=number(0.0, 100.0), default=DEFAULT_D,
                    help=f"draft-cost ratio t_draft/t_target >= 0 (default {DEFAULT_D:g})")
    fp.add_argument("--c", type=number(0.0, 100.0), default=DEFAULT_C,
                    help=f"verify cost per extra position, in target steps, >= 0 (default {DEFAULT_C:g})")
    fp.add_argument("--k-max", type=integer(1, hi=64), default=DEFAULT_K_MAX,
                    help=f"largest k searched for the optimum (default {DEFAULT_K_MAX})")
    _plot_format_run(fp, "save measured per-position acceptance against the fitted i.i.d. alpha^i",
                     _fit_alpha)


def _register_calibrate(sub: SubParsers) -> None:
    """``calibrate``: the measured points and what the fit does not identify."""
    cp = sub.add_parser("calibrate", help="fit prefill rate, TPOT_base and beta to measured TTFT/TPOT points")
    cp.add_argument("files", nargs="+", metavar="FILE",
                    help="a CSV (rate_per_s,mean_ttft_ms,mean_tpot_ms,prompt_tokens,output_tokens[,nodes]) "
                         "or vLLM benchmark_serving.py result JSON files")
    cp.add_argument("--nodes", type=integer(1, hi=100_000), default=1,
                    help="replicas the benchmark drove (default 1)")
    cp.add_argument("--model", default=None,
                    help="KV shape from the model catalog (default: the default node's)")
    cp.add_argument("--decode-tokens-per-s", type=number(1e-3, 1e9), default=None,
                    help="decode capacity per node, not identified by the fit (default: the default node's)")
    cp.add_argument("--save", type=output_file, default=None, metavar="FILE.toml",
                    help="write the fitted node and beta as TOML")
    _plot_format_run(cp, "save measured vs fitted TTFT and TPOT against the arrival rate", _calibrate)


# ---------------------------------------------------------------------------
# trace summarize


def _estimated_lines(path: str) -> int:
    """Lines in a trace file, estimated from its size and its first 64 KiB (for the progress bar)."""
    import gzip
    import os

    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(65536)
        ratio = 1.0
        if head[:2] == b"\x1f\x8b":  # compressed: measure the first decompressed bytes instead
            with gzip.open(path, "rb") as g:
                plain = g.read(65536)
            ratio = len(plain) / max(1, len(head)) if len(head) < 65536 else 4.0
            head = plain
        per_line = max(1.0, len(head) / max(1, head.count(b"\n")))
        return max(1, int(size * ratio / per_line))
    except (OSError, EOFError):
        return 1


def _trace_summarize(args: argparse.Namespace) -> Output:
    bar = Progress(_estimated_lines(args.file), "reading trace (lines)")
    done = [0]

    def tick(line: int) -> None:
        bar.advance(line - done[0])
        done[0] = line

    try:
        tr = load_trace(args.file, args.trace_format, block_tokens=args.block_tokens,
                        cache_blocks=args.cache_blocks, progress=tick)
    finally:
        bar.close()
    s = summarize_trace(tr, args.window_s)
    data = s.as_dict()
    if args.plot is not None:
        from servesim.render.simfigures import plot_trace  # matplotlib only when plotting

        data["plot"] = str(plot_trace(tr, args.plot, args.window_s))
    row = {k: v for k, v in data.items() if k != "prefix"}
    if data["prefix"] is not None:
        row["prefix"] = data["prefix"]
    return Output(data, itext.trace_text(data), [row])


# ---------------------------------------------------------------------------
# trace fetch


def _trace_fetch(args: argparse.Namespace) -> Output:
    from servesim.inputs.fetch import SOURCES, fetch_trace  # reads sources.toml at its import

    if args.list:
        rows = [{"name": s.name, "title": s.title, "format": s.format, "license": s.license, "url": s.url,
                 "sha256": s.sha256, "bytes": s.size,
                 "excerpt": None if s.excerpt is None else str(_excerpt(s.name)),
                 "excerpt_requests": s.excerpt_requests or None} for s in SOURCES.values()]
        return Output(rows, itext.sources_text(rows), rows)
    if args.name is None:
        raise InputError(f"give a trace NAME ({', '.join(_FETCH_NAMES)}), or --list")

    bar: list[Progress] = []

    def progress(done: int, total: int | None) -> None:
        if total is None:
            return
        if not bar:
            bar.append(Progress(max(1, total >> 20), f"fetching {args.name} (MiB)", enabled=not args.quiet))
        b = bar[0]
        b.advance((done >> 20) - b.done)

    try:
        res = fetch_trace(args.name, args.out, force=args.force, timeout_s=args.timeout_s, url=args.url,
                          progress=progress)
    finally:
        if bar:
            bar[0].close()
    d = res.as_dict()
    s = SOURCES[res.name]
    check = ("matches the pinned sha256" if res.sha256_pinned else "no pinned checksum for this source")
    lines = [f"FETCHED {res.name}: {s.title} ({res.license})", f"  from    {res.url}",
             f"  to      {res.path}" + (" (gzip-compressed)" if res.compressed else ""),
             f"  bytes   {res.bytes:,} downloaded, sha256 {res.sha256} ({check})",
             f"  format  {res.format}; the first {res.requests_checked} requests parse"]
    return Output(d, "\n".join(lines) + "\n", [d])


def _excerpt(name: str) -> str:
    from servesim.inputs.fetch import excerpt_path

    return str(excerpt_path(name))


# ---------------------------------------------------------------------------
# fit-alpha


def _fit_alpha(args: argparse.Namespace) -> Output:
    from servesim.inputs.telemetry import counters_from_value, fit_alpha, read_counters

    if args.target is not None or args.gpu is not None:  # names first: before any file is read
        cat = builtin_catalog()
        for flag, value, table in (("--target", args.target, cat.models), ("--gpu", args.gpu, cat.gpus)):
            if value is not None and value not in table:
                kind = "model" if flag == "--target" else "GPU"
                raise InputError(f"{flag} {value!r}: not a catalog {kind}; one of {', '.join(sorted(table))}")
    if args.value is not None:
        if args.files:
            raise InputError("give either scrape files or --value, not both")
        if args.definition is None:
            raise InputError("--value needs --from: which definition the figure is "
                             f"({', '.join(_DEFINITIONS)})")
        engine = {} if args.engine is None else {"engine": args.engine}  # unset: the function's default
        counts = counters_from_value(args.definition, args.value,
                                     length_includes_bonus=not args.exclude_bonus, **engine)
    else:
        if not 1 <= len(args.files) <= 2:
            raise InputError(
                f"give one or two Prometheus scrapes (FILE [FILE2]) or --value; got {len(args.files)} files"
            )
        counts = read_counters(args.files, model=args.model, interval_s=args.interval_s)
    util, from_batch = args.util, None
    if args.batch is not None:
        from servesim.hardware.roofline import utilization

        if args.target is None or args.gpu is None:
            raise InputError("--batch needs --target MODEL and --gpu GPU (catalog names) "
                             "to map the batch to u")
        cat = builtin_catalog()
        util = utilization(cat.model(args.target), cat.gpu(args.gpu), tp=args.tp, batch=args.batch,
                           context_tokens=args.context)
        from_batch = {"batch": args.batch, "target": args.target, "gpu": args.gpu, "tp": args.tp,
                      "context_tokens": args.context, "u": util}
    fit = fit_alpha(counts, definition=args.definition, k=args.k, util=util, d=args.d, c=args.c,
                    k_max=args.k_max)
    data = fit.as_dict()
    # The same answer in predict's terms: the mean acceptance length at k (bonus token included), from
    # the observed per-position acceptance where the scrape has it, else from the fitted alpha.
    obs = (data.get("observed") or {}).get("marginal")
    k = int(data["k"])
    length = 1.0 + (sum(obs) if obs else sum(data["alpha"] ** i for i in range(1, k + 1)))
    data["acceptance_length"] = length
    data["predict_flags"] = f"--k {k} --acceptance-length {length:.3f}"
    if from_batch is not None:
        data["util_from_batch"] = from_batch
    if args.plot is not None:
        from servesim.inputs.telemetry import acceptance_curve
        from servesim.render import plots  # matplotlib only when plotting

        fig, axes = plots.figure(1)
        plots.plot_acceptance(axes[0], data, acceptance_curve(data))
        plots.save(fig, args.plot)
    return Output(data, itext.fit_text(data), _fit_rows(data))


def _fit_rows(d: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{
        "table": "fit", "source": d["source"], "engine": d["engine"], "input": d["input_definition"],
        "k": d["k"], "num_drafts": d["num_drafts"], "alpha": d["alpha"], "alpha_lo": d["alpha_lo"],
        "alpha_hi": d["alpha_hi"],
        "iid_p_value": None if d["iid_test"] is None else d["iid_test"]["p_value"],
    }]
    obs = d["observed"]
    for i in range(d["k"]):
        rows.append({"table": "position", "position": i + 1,
                     "observed_marginal": None if obs["marginal"] is None else obs["marginal"][i],
                     "observed_conditional": None if obs["conditional"] is None else obs["conditional"][i],
                     "iid_marginal": d["iid"]["marginal"][i]})
    rows += [{"table": "optimal_k", **o} for o in d["optimal"]]
    return rows


# ---------------------------------------------------------------------------
# calibrate


def _calibrate(args: argparse.Namespace) -> Output:
    from pathlib import Path

    kv = None
    if args.model is not None:
        if args.model not in kvcache.MODELS:
            raise InputError(f"--model {args.model!r}: unknown; one of {', '.join(kvcache.MODELS)}")
        kv = kvcache.MODELS[args.model]
    points, notes = read_points(args.files, nodes=args.nodes)
    cal = calibrate(points, decode_tokens_per_s=args.decode_tokens_per_s, kv=kv, warnings=notes)
    data = cal.as_dict()
    rows = [{"table": "node", **data["node"], "beta": data["beta"],
             "ttft_rms_rel": data["ttft_rms_rel"], "tpot_rms_rel": data["tpot_rms_rel"]}]
    rows += [{"table": "point", **p} for p in data["points"]]
    if args.plot is not None:  # the figure first: a failing plot leaves any saved file untouched
        from servesim.render import plots  # matplotlib only when plotting

        fig, axes = plots.figure(2)
        plots.plot_calibration(axes, data["points"])
        plots.save(fig, args.plot)
    if args.save is not None:  # checked before any work (--save's type); written whole or not at all
        path = Path(args.save)
        try:
            write_atomic(path, cal.to_toml().encode("utf-8"))
        except OSError as exc:
            raise InputError(f"--save {path}: cannot write: {exc.strerror or exc}") from None
        data["saved"] = str(path)
    return Output(data, itext.calibrate_text(data), rows)


