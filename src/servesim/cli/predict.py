"""CLI command ``servesim predict``: what a serving benchmark would measure on one replica.

A thin layer over :func:`servesim.plan.predict.predict`: flags in, a result dict
out (``--format json`` prints it as is), a table for people.  ``--points`` runs
a CSV of deployments, ``--compare`` a saved ``vllm bench serve`` result.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from servesim._checks import InputError, ParameterError
from servesim.cli.args import Output, add_format, add_pool_arguments, choice, integer, link, number

__all__ = ["register"]




def register(sub: argparse._SubParsersAction[Any]) -> None:
    from servesim.hardware.engines import ENGINES
    from servesim.hardware.precision import KV_DTYPES, WEIGHT_DTYPES
    from servesim.model.speculative import SPECDEC_PRESETS

    p = sub.add_parser(
        "predict", help="what `vllm bench serve` would measure on one replica (TTFT, TPOT, throughput)",
        description="Predicts a serving benchmark (random prompts of --isl tokens, --osl output tokens, "
        "--concurrency closed-loop clients or Poisson --rate) on one replica of --tp GPUs: an "
        "iteration-level model of continuous batching with chunked prefill, each step priced from "
        "measured kernel tables (GEMM, attention, all-reduce) plus norms, sampling and host time.",
    )
    p.add_argument("--model", help="catalog name, Hugging Face id (meta-llama/Llama-3.1-8B-Instruct) "
                   "or path to a config.json")
    p.add_argument("--gpu", help="h100-sxm, h200, b200, a100-80gb (also h100_sxm, ...)")
    p.add_argument("--tp", type=integer(1, hi=64), default=None,
                   help="tensor-parallel GPUs in the replica, 1-64, dividing the heads (default 1)")
    p.add_argument("--dtype", type=choice(WEIGHT_DTYPES, "dtype"), default=None,
                   help="weights and GEMMs: bf16 (default), fp8 (Hopper, Blackwell), fp4 (Blackwell)")
    p.add_argument("--kv-dtype", type=choice(KV_DTYPES, "kv-dtype"), default=None,
                   help="KV cache: bf16 (default) or fp8")
    p.add_argument("--isl", type=integer(1, hi=1_000_000), default=None,
                   help="prompt tokens per request, 1-1,000,000")
    p.add_argument("--osl", type=integer(1, hi=1_000_000), default=None,
                   help="output tokens per request, 1-1,000,000")
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=integer(1, hi=100_000), default=None,
                      help="closed-loop clients (vllm bench serve --max-concurrency), 1-100,000")
    load.add_argument("--rate", type=number(0.0, 1e6, lo_open=True), default=None,
                      help="Poisson arrivals in req/s, (0, 1e6]")
    p.add_argument("--num-prompts", type=integer(1, hi=1_000_000), default=None,
                   help="requests in the run, 1-1,000,000; cost grows with it "
                   "(default 10 x concurrency, at least 50; 500 with --rate)")
    p.add_argument("--warmup-prompts", type=integer(0, hi=1_000_000), default=0,
                   help="first requests left out of the statistics, as steady-window tools (genai-perf, "
                   "AIPerf) do (default 0: all count, as vllm bench serve)")
    p.add_argument("--engine", type=choice(ENGINES, "engine"), default=None,
                   help="vllm (default), sglang or trtllm: budgets and host-time overlap")
    p.add_argument("--max-num-batched-tokens", type=integer(1, hi=1_000_000), default=None,
                   help="per-step token budget of chunked prefill (default: the engine's, 8192 on "
                   "H100/H200/B200 in vLLM)")
    p.add_argument("--max-num-seqs", type=integer(1, hi=100_000), default=None,
                   help="most running sequences (default: the engine's, 1024 in vLLM on H100)")
    p.add_argument("--spec", type=choice(["none", *SPECDEC_PRESETS], "spec"), default="none",
                   help=f"speculative decoding preset: none (default), {', '.join(SPECDEC_PRESETS)}")
    p.add_argument("--k", type=integer(1, hi=16), default=None,
                   help="draft tokens per step with --spec, 1-16 (default: best at the batch)")
    p.add_argument("--seed", type=integer(0, hi=2**63 - 1), default=0, help="seed of --rate arrivals")
    p.add_argument("--points", type=Path, default=None, metavar="FILE.csv",
                   help="predict every row of a CSV with columns model,gpu,tp,dtype,isl,osl,concurrency "
                   "(optional kv_dtype, engine, rate, num_prompts)")
    p.add_argument("--compare", type=Path, default=None, metavar="RESULT.json",
                   help="a saved `vllm bench serve` result: predict the same run, print predicted vs "
                   "measured")
    p.add_argument("--mode", type=choice(["agg", "disagg"], "mode"), default="agg",
                   help="agg: one colocated replica (default); disagg: prefill and decode pools with their "
                   "own shapes (closed form at load)")
    add_pool_arguments(p)
    p.add_argument("--link", type=link, default=None,
                   help="disagg: prefill-to-decode link, nvlink, rdma (default), tcp or GB/s")
    p.add_argument("--catalog", action="append", default=[], metavar="FILE",
                   help="extra catalog TOML (GPUs, models); may be repeated")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar (--points)")
    add_format(p)
    p.set_defaults(run=_run)


def _catalog(args: argparse.Namespace) -> Any:
    if not args.catalog:
        return None
    from servesim.hardware.catalog import load_catalog

    return load_catalog(*args.catalog)


def _one(args: argparse.Namespace, row: dict[str, Any], catalog: Any) -> dict[str, Any]:
    from servesim.plan.predict import Deployment, predict
    from servesim.sim.batching import Benchmark

    dep = Deployment(model=row["model"], gpu=row["gpu"], tp=row.get("tp") or 1,
                     dtype=row.get("dtype") or "bf16", kv_dtype=row.get("kv_dtype") or "bf16",
                     engine=row.get("engine") or "vllm",
                     max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=args.max_num_seqs)
    bench = Benchmark(isl=row["isl"], osl=row["osl"], concurrency=row.get("concurrency"),
                      rate_per_s=row.get("rate"), num_prompts=row.get("num_prompts"), seed=args.seed,
                      warmup=args.warmup_prompts)
    return predict(dep, bench, spec=args.spec, k=args.k, catalog=catalog)


def _require(args: argparse.Namespace, *names: str) -> None:
    missing = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n) is None]
    if missing:
        raise InputError(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required "
                         "(or --points FILE.csv, or --compare RESULT.json)")


def _run(args: argparse.Namespace) -> Output:
    catalog = _catalog(args)
    if args.points is not None:
        return _points(args, catalog)
    if args.compare is not None:
        return _compare(args, catalog)
    _require(args, "model", "gpu", "isl", "osl")
    if args.concurrency is None and args.rate is None:
        raise InputError("--concurrency or --rate is required: closed-loop clients or Poisson req/s")
    if args.mode == "disagg":
        return _disagg(args, catalog)
    row = {"model": args.model, "gpu": args.gpu, "tp": args.tp, "dtype": args.dtype,
           "kv_dtype": args.kv_dtype,
           "engine": args.engine, "isl": args.isl, "osl": args.osl, "concurrency": args.concurrency,
           "rate": args.rate, "num_prompts": args.num_prompts}
    data = _one(args, row, catalog)
    from servesim.render.predict import predict_text

    return Output(data, predict_text(data), [_flat(data)])


def _disagg(args: argparse.Namespace, catalog: Any) -> Output:
    from servesim.model.kvcache import LINKS
    from servesim.plan.predict import Deployment, predict_disaggregated
    from servesim.render.predict import disagg_text
    from servesim.sim.batching import Benchmark

    tp = args.tp or 1
    common = {"dtype": args.dtype or "bf16", "kv_dtype": args.kv_dtype or "bf16",
              "engine": args.engine or "vllm", "max_num_batched_tokens": args.max_num_batched_tokens,
              "max_num_seqs": args.max_num_seqs}
    pre = Deployment(args.model, args.gpu, args.prefill_tp or tp, **common)
    dec = Deployment(args.model, args.gpu, args.decode_tp or tp, **common)
    ln = LINKS["rdma"] if args.link is None else args.link
    bench = Benchmark(isl=args.isl, osl=args.osl, concurrency=args.concurrency, rate_per_s=args.rate)
    data = predict_disaggregated(pre, args.prefill_workers, dec, args.decode_workers, ln.bytes_per_s, bench,
                                 spec=args.spec, catalog=catalog)
    return Output(data, disagg_text(data), [_flat(data)])


def _flat(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if not isinstance(v, (dict, list))}


# ----------------------------------------------------------------------------- points


def _points(args: argparse.Namespace, catalog: Any) -> Output:
    from servesim.cli.progress import Progress
    from servesim.inputs.bench import read_points
    from servesim.render.predict import points_text

    rows = read_points(args.points)
    bar = Progress(len(rows), "predicting", enabled=not args.quiet)
    results: list[dict[str, Any]] = []
    for row in rows:
        bar.advance()
        if "error" in row:
            results.append(row)
            continue
        try:
            results.append(_one(args, row, catalog))
        except (ParameterError, InputError) as exc:
            msg = str(exc)
            where = f"{args.points}: line {row['line']}"
            results.append({"error": msg if msg.startswith(str(args.points)) else f"{where}: {msg}"})
    bar.close()
    return Output(results, points_text(results), [_flat(r) for r in results])


# ----------------------------------------------------------------------------- compare


def _compare(args: argparse.Namespace, catalog: Any) -> Output:
    from servesim.inputs.bench import read_bench_result
    from servesim.plan.predict import compare_to_measured
    from servesim.render.predict import compare_text

    res = read_bench_result(args.compare)
    _require(args, "gpu")
    isl, osl = args.isl or res.isl, args.osl or res.osl
    if isl is None or osl is None:
        raise InputError(f"{res.path}: cannot tell the prompt/output lengths (no input_lens/"
                         "total_input_tokens); give --isl and --osl")
    conc, rate = args.concurrency or res.concurrency, args.rate
    if conc is None and rate is None:
        rate = res.request_rate
    if conc is None and rate is None:
        raise InputError(f"{res.path}: no max_concurrency or finite request_rate; "
                         "give --concurrency or --rate")
    model = args.model or res.model
    if model is None:
        raise InputError(f"{res.path}: no model_id; give --model")
    row = {"model": model, "gpu": args.gpu, "tp": args.tp, "dtype": args.dtype, "kv_dtype": args.kv_dtype,
           "engine": args.engine, "isl": isl, "osl": osl, "concurrency": conc, "rate": rate,
           "num_prompts": args.num_prompts or res.completed}
    pred = _one(args, row, catalog)
    rows = compare_to_measured(pred, res.metrics)
    data = {"prediction": pred, "comparison": rows, "result_file": res.path}
    return Output(data, compare_text(data), rows)
