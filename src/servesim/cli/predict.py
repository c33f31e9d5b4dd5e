"""CLI command ``servesim predict``: what a serving benchmark would measure on one replica.

A thin layer over :func:`servesim.plan.predict.predict`: flags in, a result dict
out (``--format json`` prints it as is), a table for people.  ``--points`` runs
a CSV of deployments, ``--compare`` a benchmark tool's saved result (vLLM's, SGLang's, InferenceMAX's).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servesim._checks import BOUNDS, InputError, ParameterError
from servesim.cli.args import (
    ALL_DTYPES,
    Output,
    SubParsers,
    add_engine_argument,
    add_ep_comm_argument,
    add_format,
    add_interval_level,
    add_pool_arguments,
    bounded,
    choice,
    dtype_choice,
    engine_of,
    integer,
    link,
    number,
)
from servesim.cli.common import ep_comm_of
from servesim.cli.deploy import (
    add_command_arguments,
    add_emit_argument,
    emit,
    predict_deploy,
    predict_from_commands,
    wants_deploy,
)
from servesim.cli.progress import Progress, working
from servesim.hardware import engines
from servesim.hardware.acceptance import TRAFFIC_KINDS
from servesim.hardware.catalog import load_catalog
from servesim.hardware.kernels import tables_for
from servesim.hardware.names import canonical_gpu
from servesim.hardware.precision import KV_DTYPES, normalize_dtype
from servesim.hardware.topology import kv_path
from servesim.inputs.bench import MeasuredResult, model_id_hint, read_bench_result, read_point_rows
from servesim.model import kvcache
from servesim.model.speculative import SPEC_METHODS  # the one list every command takes
from servesim.plan.verdict import likely_causes
from servesim.render.predict import compare_text, points_text, predict_disagg_text, predict_text

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog
    from servesim.sim.batching import Benchmark

__all__ = ["register"]

_FIELDS = {"budget": "max_num_batched_tokens", "seqs": "max_num_seqs", "memory_fraction": "memory_fraction"}
"""What an engine flag sets (engines.toml ``sets``) -> the Deployment field, where it is one of the fields
that each engine sets by a flag of its own (``no_overlap`` turns ``overlap`` off; the rest are scheduler
options)."""


@cache
def flag_dests() -> dict[str, dict[str, tuple[str, str]]]:
    """Each engine's own flags (engines.toml ``[[engine.NAME.flags]]``): engine -> {argument dest: (what
    it sets on the Deployment, the engine's own flag)}."""
    return {eng: {_dest(flag): (sets, flag) for flag, sets, _, _ in engines.engine_flags(eng)}
            for eng in engines.ENGINES}


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _owners() -> dict[str, tuple[str, str]]:
    """Each engine flag's dest -> (its engine, the flag)."""
    return {dest: (eng, flag) for eng, flags in flag_dests().items() for dest, (_, flag) in flags.items()}


def _client(text: str) -> str:
    """``--client``: a benchmark client of :data:`servesim.sim.client.CLIENTS` (loaded when given, so that
    building the parser imports no simulator)."""
    from servesim.sim.client import CLIENTS

    return choice(tuple(CLIENTS), "client")(text)


def _rate(text: str) -> float | None:
    """--request-rate: a positive rate or inf (None: every request at once)."""
    if text.strip().lower() == "inf":
        return None
    rate: float = bounded("rate")(text)  # below one request in ~12 days a run's clock loses its milliseconds
    return rate


def engine_settings(engine: str, values: dict[str, Any]) -> dict[str, Any]:
    """The Deployment fields the engine flags in ``values`` set; a flag of another engine is an error
    naming it and the engine it belongs to."""
    owners, flags = _owners(), flag_dests()
    out: dict[str, Any] = {"max_num_batched_tokens": None, "max_num_seqs": None, "scheduler": (),
                           "overlap": None}
    options: dict[str, Any] = {}
    for dest, value in values.items():
        if value is None or dest not in owners:
            continue
        owner, flag = owners[dest]
        if owner != engine:
            raise ParameterError(flag, value, f"given only with --engine {owner} (this run's engine is "
                                 f"{engine}; "
                                 f"its flags: {', '.join(f for _, f in flags[engine].values())})")
        target = flags[engine][dest][0]
        if target == "no_overlap":
            out["overlap"] = not value
        elif target in _FIELDS:
            out[_FIELDS[target]] = value
        else:
            options[target] = value
    out["scheduler"] = tuple(sorted(options.items()))
    return out


def register(sub: SubParsers) -> None:
    """Add ``predict``: the deployment, the benchmark client, the engine and its flags, speculation,
    the run's inputs, and disaggregated pools."""
    p = sub.add_parser(
        "predict", help="what `vllm bench serve` would measure on one replica (TTFT, TPOT, throughput)",
        description=(
            "Predicts a serving benchmark on one replica as the client ran it (--client vllm, sglang or "
            "inferencemax: lengths drawn around --isl/--osl with --random-range-ratio, --max-concurrency "
            "client slots, --request-rate with --burstiness): an iteration-level loop of the engine's own "
            "scheduler (--engine vllm, sglang, trtllm), each step priced from that engine's measured "
            "kernel tables (GEMM, attention, all-reduce; MoE, MLA, NCCL's all-gather and reduce-scatter "
            "and DeepEP for mixture-of-experts models on --tp x --dp GPUs with --ep) plus norms, sampling "
            "and host time."),
    )
    _deployment_arguments(p)
    _client_arguments(p)
    _engine_arguments(p)
    _speculation_arguments(p)
    _input_arguments(p)
    _disagg_arguments(p)

    add_command_arguments(p)
    add_emit_argument(p)
    p.add_argument("--catalog", action="append", default=[], metavar="FILE",
                   help="extra catalog TOML (GPUs, models); may be repeated")
    add_interval_level(p)
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bar (one shows on a terminal for work over a second)")
    add_format(p)
    p.set_defaults(run=_run)


def _deployment_arguments(p: argparse.ArgumentParser) -> None:
    """The replica: model, GPU, parallelism and dtypes."""
    p.add_argument("--model", help="catalog name, Hugging Face id (meta-llama/Llama-3.1-8B-Instruct) "
                   "or path to a config.json")
    p.add_argument("--gpu", help="h100-sxm, h200, b200, a100-80gb (also h100_sxm, ...)")
    p.add_argument("--tp", type=bounded("tp"), default=None,
                   help="tensor-parallel GPUs in the replica, 1-64, dividing the heads (default 1)")
    p.add_argument("--dtype", type=dtype_choice(ALL_DTYPES, "dtype"),
                   default=None,
                   help="weights and GEMMs: bf16 (default for dense models), fp8 (Hopper, Blackwell; block "
                   "FP8 for DeepSeek, Kimi, Qwen3-MoE and MiniMax, as their FP8 releases), fp4 (an MXFP4 "
                   "checkpoint's own MXFP4, gpt-oss; else NVFP4, Blackwell only), int4 (weight-only, MoE "
                   "experts), auto (default: a MoE checkpoint's own, else bf16); any case, nvfp4 and "
                   "w4a16 accepted")
    p.add_argument("--dp", type=bounded("dp"), default=None,
                   help="MoE models: attention data-parallel ranks, 1-256 (SGLang --enable-dp-attention "
                   "--dp, vLLM --data-parallel-size, TensorRT-LLM enable_attention_dp); the replica spans "
                   "tp x dp GPUs (default 1)")
    p.add_argument("--ep", type=bounded("ep"), default=None,
                   help="MoE models: expert-parallel ranks, 1-256, dividing the experts and tp x dp; the MoE "
                   "layers' tensor parallel is tp x dp / ep (default 1)")
    p.add_argument("--kv-dtype", type=dtype_choice(KV_DTYPES, "kv-dtype"), default=None,
                   help="KV cache: bf16 (default) or fp8")


def _client_arguments(p: argparse.ArgumentParser) -> None:
    """The benchmark client: lengths, load, prompts, warm-ups and the tool whose meanings they take."""
    p.add_argument("--isl", "--random-input-len", dest="isl", type=bounded("isl"), default=None,
                   help="prompt tokens per request (nominal: see --random-range-ratio), 1-1,000,000; cost "
                   "grows with it")
    p.add_argument("--osl", "--random-output-len", dest="osl", type=bounded("osl"), default=None,
                   help="output tokens per request (nominal), 1-1,000,000; cost grows with it")
    p.add_argument("--concurrency", "--max-concurrency", dest="concurrency", type=bounded("concurrency"),
                   default=None, help="client slots: at most this many requests in flight (vllm bench serve "
                   "--max-concurrency), 1-100,000; with the default --num-prompts (10 per slot) cost grows "
                   "with it (100,000: seconds to a minute; a progress bar shows after 1 s)")
    p.add_argument("--rate", "--request-rate", dest="rate", type=_rate, default=None,
                   help="requests sent per second, [1e-6, 1e6], or inf (default: every request at once, "
                   "gated by --max-concurrency)")
    p.add_argument("--burstiness", type=bounded("burstiness"), default=None,
                   help="gamma shape of the gaps between sends at --request-rate, (0, 1000]: 1 is Poisson "
                   "(default), below 1 burstier")
    p.add_argument("--num-prompts", type=bounded("num_prompts"), default=None,
                   help="measured requests, 1-1,000,000; cost grows linearly with it (1,000,000: seconds "
                   "to a minute; a progress bar shows after 1 s) (default 10 x concurrency: InferenceMAX's; "
                   "at least 50 for the other clients; 500 at a rate)")
    p.add_argument("--num-warmups", type=bounded("num_warmups"), default=None,
                   help="warm-up requests sent first and not measured, 0 up to --num-prompts (default: the "
                   "client's, 2 x concurrency for inferencemax, else 0); they end before the measured run")
    p.add_argument("--random-range-ratio", type=bounded("random_range_ratio"), default=None,
                   help="spread of the drawn lengths as the client reads it: vllm [L(1-r), L(1+r)], r in "
                   "[0, 1); sglang [max(1, rL), L] and inferencemax [rL, L], r in [0, 1] (default: vllm 0, "
                   "sglang 0, inferencemax 0.8)")
    p.add_argument("--client", type=_client, default=None,
                   help="benchmark tool whose meanings the flags take: vllm (vllm bench serve, default), "
                   "sglang (sglang.bench_serving) or inferencemax (its client, and its launch scripts' "
                   "server flags for what is left unset; with --mode disagg each pool's Dynamo recipe; "
                   "a freshly started server, so the first wave pays the engine's fitted cold start)")
    p.add_argument("--warm-server", action="store_true", default=None,
                   help="the server has already run these shapes (a long-running deployment): no "
                   "fresh-server cold start or first-transfer connection wait, whatever --client's harness "
                   "does")
    p.add_argument("--warmup-prompts", type=integer(0, hi=1_000_000), default=0,
                   help="first requests left out of the statistics, as steady-window tools (genai-perf, "
                   "AIPerf) do (default 0: all count, as vllm bench serve)")


def _engine_arguments(p: argparse.ArgumentParser) -> None:
    """The engine, and each engine's own flags (engines.toml ``[[engine.NAME.flags]]``)."""
    names = [f"{e} (default)" if e == engines.default_engine() else e for e in engines.ENGINES]
    add_engine_argument(p, f"{', '.join(names[:-1])} or {names[-1]}: each engine's scheduler, budgets and "
                        "host overlap")
    eng = p.add_argument_group("engine flags (each applies to one engine; defaults from its source)")
    for engine in engines.ENGINES:
        for flag, sets, switch, text in engines.engine_flags(engine):
            kind: dict[str, Any] = {"action": "store_true"} if switch else {"type": _flag_type(flag, sets)}
            eng.add_argument(flag, default=None, help=f"{engine}: {text}", **kind)


def _flag_type(flag: str, sets: str) -> Callable[[str], float]:
    """The type of an engine's valued flag: the range of its name in :data:`BOUNDS`, else that of the
    Deployment field it sets, else (a scheduler option no range names) a share in (0, 1] for a memory
    share and any finite number for the rest, which the engine profile checks."""
    name = next((n for n in (_dest(flag), _FIELDS.get(sets, sets)) if n in BOUNDS), None)
    if name is not None:
        return bounded(name)
    return number(0.0, 1.0, lo_open=True) if sets == "memory_fraction" else number(None, None)


def _speculation_arguments(p: argparse.ArgumentParser) -> None:
    """Speculative decoding: the method, its draft length and acceptance, SGLang's EAGLE tree."""
    p.add_argument("--spec", type=choice(["none", *SPEC_METHODS], "spec"), default="none",
                   help=f"speculative decoding method: none (default), {', '.join(SPEC_METHODS)} (mtp: a "
                   "model's own MTP module, DeepSeek-V3 family; draft: --draft MODEL)")
    p.add_argument("--k", type=bounded("k"), default=None,
                   help="draft tokens per step with --spec, 1-16 (default: a published preset's own k; the "
                   "best at the batch with the lab's alpha)")
    p.add_argument("--acceptance-length", type=bounded("acceptance_length"), default=None,
                   help="measured mean acceptance length with --spec and --k: tokens per verify step, the "
                   "bonus token included, as vLLM's spec-decode metrics and SGLang's accept length print it, "
                   "in [1, k + 1]")
    p.add_argument("--alpha", type=bounded("alpha"), default=None,
                   help="per-token acceptance probability with --spec, in (0, 1) (default: the published "
                   "preset for --traffic, else the lab's; servesim fit-alpha estimates it from engine "
                   "telemetry)")
    p.add_argument("--traffic", type=choice(TRAFFIC_KINDS, "traffic"), default=None,
                   help=f"with --spec and no --acceptance-length/--alpha: the kind of traffic whose "
                   f"published acceptance the preset takes, {', '.join(TRAFFIC_KINDS)} (default chat: "
                   "MT-Bench-like; code HumanEval-like, summarization CNN/DM-like, math GSM8K-like; "
                   "synthetic: random-token prompts in the chat template, the default with --client "
                   "inferencemax, derived from chat where a fitted ratio covers the target, DeepSeek MTP); "
                   "sources in hardware/data/acceptance.toml")
    p.add_argument("--draft", default=None, metavar="MODEL",
                   help="draft model with --spec draft (a catalog name, Hugging Face id or config.json); it "
                   "must share the target's vocabulary; with --spec eagle or eagle3, the head's config.json "
                   "(its draft_vocab_size, width and heads)")
    for flag, what in (("num-steps", "draft passes (tree depth)"), ("eagle-topk", "branches kept per pass"),
                       ("num-draft-tokens", "tokens verified per sequence, the root included, at most "
                        "num-steps x eagle-topk + 1")):
        dest = f"speculative_{flag.replace('-', '_')}"
        b = BOUNDS[dest]
        p.add_argument(f"--speculative-{flag}", dest=dest, type=bounded(dest), default=None,
                       help=f"SGLang's EAGLE tree with --spec eagle/eagle3/mtp: {what}, {b.lo:g}-{b.hi:g}; "
                       "give all three (SGLang's flag names; cost grows with their product)")


def _input_arguments(p: argparse.ArgumentParser) -> None:
    """The seed, and a CSV of deployments or a saved benchmark result to predict instead."""
    p.add_argument("--seed", type=integer(0, hi=2**63 - 1), default=0,
                   help="seed of the drawn lengths, send times and acceptances (default 0)")
    p.add_argument("--points", type=Path, default=None, metavar="FILE.csv",
                   help="predict every row of a CSV with columns model,gpu,tp,dtype,isl,osl,concurrency "
                   "(optional: kv_dtype, engine, request_rate, num_prompts, num_warmups, client, "
                   "random_range_ratio, burstiness, warm_server, the engine flags by their names, spec, k, "
                   "acceptance_length, alpha, draft, traffic, and measured "
                   "mean_ttft_ms, mean_tpot_ms, ... to compare with); a bad row errs alone")
    p.add_argument("--compare", type=Path, default=None, metavar="RESULT.json",
                   help="a benchmark's saved result (vllm bench serve --save-result JSON, sglang."
                   "bench_serving --output-file JSONL: its last run, InferenceMAX's result or aggregated "
                   "record): predict the run it records (engine, client, model, GPU, parallelism, lengths, "
                   "load; a flag wins, and gives what the file lacks) and print predicted vs measured with a "
                   "verdict per metric. examples/vllm_bench_result.json is a vLLM-Ascend run on Ascend NPUs, "
                   "which servesim does not model: on an H100 it shows the format read, not accuracy "
                   "(servesim's TPOT and ITL 77-85%% below the measured)")


def _disagg_arguments(p: argparse.ArgumentParser) -> None:
    """--mode disagg: the pools' shapes, the expert exchange and the prefill-to-decode link."""
    p.add_argument("--mode", type=choice(["agg", "disagg"], "mode"), default="agg",
                   help="agg: one colocated replica (default); disagg: prefill and decode pools with their "
                   "own shapes, the engine loop run per worker (--max-concurrency is the whole "
                   "deployment's)")
    add_pool_arguments(p)
    for pool in ("prefill", "decode"):
        p.add_argument(f"--{pool}-dp", type=bounded(f"{pool}_dp"), default=None,
                       help=f"disagg, MoE models: attention data-parallel ranks of a {pool} worker, 1-256 "
                       "(default --dp)")
        p.add_argument(f"--{pool}-ep", type=bounded(f"{pool}_ep"), default=None,
                       help=f"disagg, MoE models: expert-parallel ranks of a {pool} worker, 1-256, dividing "
                       f"the experts and its tp x dp (default --ep)")

    add_ep_comm_argument(p)
    p.add_argument("--eplb-slots", type=int, default=None,
                   help="MoE models with --ep: EPLB's redundant expert slots over the EP ranks (SGLang "
                   "--ep-num-redundant-experts, vLLM --num-redundant-experts, TensorRT-LLM "
                   "load_balancer num_slots less the experts), so that experts + slots divide by --ep; "
                   "each GPU holds and reads its share of them (default 0)")
    p.add_argument("--link", type=link, default=None,
                   help="disagg: prefill-to-decode link, nvlink, rdma (default), tcp or GB/s")


def _given(args: argparse.Namespace, row: dict[str, Any], name: str) -> Any:
    """Row ``row``'s own value of ``name`` (a points cell, a result file's field), else the flag's."""
    v = row.get(name)
    return v if v is not None else getattr(args, name, None)


def _catalog(args: argparse.Namespace) -> Catalog | None:
    if not args.catalog:
        return None

    return load_catalog(*args.catalog)


def _bench(args: argparse.Namespace, row: dict[str, Any]) -> Benchmark:
    from servesim.sim.batching import Benchmark
    from servesim.sim.client import Client

    pick = partial(_given, args, row)
    name = {"name": pick("client")} if pick("client") else {}  # none: the Client's own default
    client = Client(random_range_ratio=pick("random_range_ratio"), num_warmups=pick("num_warmups"),
                    burstiness=pick("burstiness") or 1.0, warm_server=bool(pick("warm_server")), **name)
    return Benchmark(isl=row["isl"], osl=row["osl"], concurrency=row.get("concurrency"),
                     rate_per_s=row.get("rate"), num_prompts=row.get("num_prompts") or args.num_prompts,
                     seed=args.seed, warmup=args.warmup_prompts, client=client)


def _one(args: argparse.Namespace, row: dict[str, Any], catalog: Catalog | None,
         lengths: list[tuple[int, int]] | None = None, *, progress: bool = True) -> dict[str, Any]:
    """Predict one row (flags or a points line): the row's own values first, the flags' after; on a
    terminal, a run of more than a second shows that it is running (``progress``, unless --quiet)."""
    with working("predicting", enabled=progress and not args.quiet):
        return _row_prediction(args, row, catalog, lengths)


def _row_prediction(args: argparse.Namespace, row: dict[str, Any], catalog: Catalog | None,
                    lengths: list[tuple[int, int]] | None = None) -> dict[str, Any]:
    """:func:`_one` without the progress."""
    from servesim.plan.predict import compare_to_measured, harness_deployment, harness_speculation, predict

    engine = row.get("engine") or engine_of(args)
    flags = {dest: _given(args, row, dest) for dest in _owners()}
    settings = engine_settings(engine, flags)
    bench = _bench(args, row)
    mode = row.get("mode") or args.mode
    if mode == "disagg":
        out = _disagg_row(args, row, catalog, engine, settings, bench, lengths)
    else:
        # the harness's own server recipe fills what the row and the flags leave unset
        spec = _spec_args(args, row)
        dp = row.get("dp") or args.dp or 1
        dep = harness_deployment(bench, model=row["model"], gpu=row["gpu"], tp=row.get("tp") or 1,
                                 dtype=row.get("dtype") or "auto", kv_dtype=row.get("kv_dtype"),
                                 engine=engine, dp=dp, ep=row.get("ep") or args.ep or 1,
                                 spec=spec["spec"], **settings, **_ep_comm(args))
        spec_kw = harness_speculation(bench, model=row["model"], engine=engine, dp=dp, **spec)
        out = predict(dep, bench, catalog=catalog, lengths=lengths, interval_level=args.interval_level,
                      **spec_kw)
        if row.get("deploy"):  # the launch and benchmark commands (servesim.cli.deploy)
            predict_deploy(out, bench, {"": dep}, spec_kw, catalog=catalog)
    if row.get("labels"):
        out = {**row["labels"], **out}
    if row.get("measured"):
        out["measured"] = row["measured"]
        out["comparison"] = compare_to_measured(out, row["measured"])
    return out


def _ep_comm(args: argparse.Namespace) -> dict[str, Any]:
    """``--ep-comm`` as a Deployment keyword: none where the flag is not given, so that the harness's
    recipe or the engine's default decides."""
    value = ep_comm_of(args)
    slots = getattr(args, "eplb_slots", None)
    out: dict[str, Any] = {} if value is None else {"ep_comm": value}
    return out if slots is None else {**out, "eplb_slots": slots}


def _disagg_row(args: argparse.Namespace, row: dict[str, Any], catalog: Catalog | None, engine: str,
                settings: dict[str, Any], bench: Benchmark,
                lengths: list[tuple[int, int]] | None) -> dict[str, Any]:
    """A disaggregated row: each pool's tp/dp/ep/workers from its own column or flag, else the
    replica's ``tp``/``dp``/``ep``."""
    from servesim.plan.predict import harness_deployment, harness_speculation, predict_disaggregated

    get = partial(_given, args, row)

    common = {"dtype": row.get("dtype") or "auto", "kv_dtype": row.get("kv_dtype"), "engine": engine,
              **settings, **_ep_comm(args)}
    pools, workers = {}, {}
    spec = _spec_args(args, row)
    for pool in ("prefill", "decode"):
        workers[pool] = get(f"{pool}_workers") or 1
    for pool, peer in (("prefill", "decode"), ("decode", "prefill")):
        # the harness's own recipe for the pool (InferenceMAX's Dynamo recipes) fills what is unset
        pools[pool] = harness_deployment(bench, model=row["model"], gpu=row["gpu"],
                                         tp=get(f"{pool}_tp") or row.get("tp") or 1,
                                         dp=get(f"{pool}_dp") or row.get("dp") or args.dp or 1,
                                         ep=get(f"{pool}_ep") or row.get("ep") or args.ep or 1,
                                         pool=pool, workers=workers[pool], peer_workers=workers[peer],
                                         spec=spec["spec"], **common)
    ln = kvcache.LINKS["rdma"] if args.link is None else args.link
    kv_note = ""
    if args.link is None:  # on an NVL72 rack the KV rides NVLink inside one rack, InfiniBand between racks
        gpus = sum(pools[p].tp * pools[p].dp * workers[p] for p in pools)
        t = tables_for(canonical_gpu(row["gpu"], catalog))
        path = kv_path(t.topology, t.nvlink_bytes_per_s, gpus) if t is not None else None
        if path is not None:
            ln, kv_note = type(ln)(path.name, path.bytes_per_s, path.note), path.note
    spec_kw = harness_speculation(bench, model=row["model"], engine=engine, decode=pools["decode"],
                                  decode_workers=workers["decode"], **spec)
    out = predict_disaggregated(pools["prefill"], workers["prefill"], pools["decode"], workers["decode"],
                                ln.bytes_per_s, bench, catalog=catalog, lengths=lengths,
                                interval_level=args.interval_level, **spec_kw)
    if kv_note:  # which links the KV transfer crosses (hardware.topology.kv_path), the placement's own
        out["notes"] = [kv_note, *out["notes"]]
    if row.get("deploy"):  # the launch and benchmark commands (servesim.cli.deploy)
        predict_deploy(out, bench, pools, spec_kw, (workers["prefill"], workers["decode"]), ln.bytes_per_s,
                       catalog)
    return out


def _spec_args(args: argparse.Namespace, row: dict[str, Any]) -> dict[str, Any]:
    """The speculation of a row (its spec, k, acceptance_length, alpha, draft, traffic columns) or the
    flags'."""
    out = {name: _given(args, row, name) for name in ("spec", "k", "acceptance_length", "alpha", "draft",
                                                      "traffic")}
    names = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
    tree = [_given(args, row, n) for n in names]
    if any(v is not None for v in tree):
        missing = [n for n, v in zip(names, tree, strict=True) if v is None]
        if missing:
            raise ParameterError(missing[0], None, "given with the other two (SGLang's EAGLE tree: "
                                 "--speculative-num-steps, --speculative-eagle-topk, "
                                 "--speculative-num-draft-tokens)")
        out["tree"] = tuple(int(v) for v in tree if v is not None)
    if out["spec"] in (None, "none"):  # as predict refuses --alpha and --acceptance-length without it
        for name in ("k", "traffic"):
            if out[name] is not None:
                raise ParameterError(name, out[name], "given with a speculative method (--spec METHOD; spec "
                                     "is none)")
    return out


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

    data = predict_from_commands(args, catalog)  # --engine-command ... --bench-command ...
    if data is None:
        data = _flagged(args, catalog, wants_deploy(args))

    text = (predict_disagg_text if data["mode"] == "disagg" else predict_text)(data)
    out = Output(data, text, [_flat(data)])
    return emit(args, out, [("", data["deploy"])] if "deploy" in data else [])


def _flagged(args: argparse.Namespace, catalog: Catalog | None, deploy: bool) -> dict[str, Any]:
    """The prediction of the flags (no --points, --compare or commands)."""
    _require(args, "model", "gpu", "isl", "osl")
    if args.concurrency is None and args.rate is None and args.num_prompts is None:
        raise InputError("--max-concurrency (--concurrency), --request-rate (--rate) or --num-prompts is "
                         "required: client slots, send rate, or every one of --num-prompts at once")
    return _one(args, _flag_row(args, deploy=deploy), catalog)  # the mode is --mode's


def _flag_row(args: argparse.Namespace, **given: object) -> dict[str, Any]:
    """The row the flags describe (the deployment and the load), with ``given``'s values instead."""
    names = ("model", "gpu", "tp", "dtype", "kv_dtype", "engine", "isl", "osl", "concurrency", "rate",
             "num_prompts")
    return {**{n: getattr(args, n) for n in names}, **given}


def _flat(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if not isinstance(v, (dict, list))}


# ----------------------------------------------------------------------------- points


def _points(args: argparse.Namespace, catalog: Catalog | None) -> Output:
    if args.compare is not None:
        raise InputError(f"--points {args.points} and --compare {args.compare}: give one (a file of "
                         "deployments to predict, or a saved result to predict again and compare)")
    # a required column a flag gives may be left out: the flag fills every row
    rows = read_point_rows(args.points, given=frozenset(n for n in ("model", "gpu", "isl", "osl")
                                                        if getattr(args, n, None) is not None))
    bar = Progress(len(rows), "predicting", enabled=not args.quiet, ticking=True)
    results: list[dict[str, Any]] = []
    sets: list[tuple[str, dict[str, Any]]] = []  # each row's launch and benchmark files, for --emit
    deploy = wants_deploy(args)  # each row carries its commands as a prediction by flags does
    for row in rows:
        bar.advance()
        if "error" in row:
            results.append(row)
            continue
        try:
            results.append(_one(args, {**_with_flags(args, row), "deploy": deploy}, catalog, progress=False))
        except (ParameterError, InputError) as exc:
            results.append({"error": _row_error(args, row, exc)})
            continue
        if "deploy" in results[-1]:
            sets.append((f"line{row['line']}-", results[-1]["deploy"]))
    bar.close()
    return emit(args, Output(results, points_text(results), [_flat(r) for r in results]), sets)


_ROW_FLAGS: dict[str, object] = {
    # a points column that a flag also sets -> the flag's default (a flag at its default was not given);
    # and every engine's own flags (flag_dests), default None
    **dict.fromkeys(("model", "gpu", "tp", "dp", "ep", "dtype", "kv_dtype", "engine", "isl", "osl",
                     "concurrency", "rate", "num_prompts", "num_warmups", "client", "random_range_ratio",
                     "burstiness", "warm_server", "k", "acceptance_length", "alpha", "draft", "traffic",
                     "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
                     "prefill_tp", "decode_tp", "prefill_dp", "decode_dp", "prefill_ep", "decode_ep")),
    "spec": "none", "mode": "agg", "prefill_workers": 1, "decode_workers": 1,
}
"""The columns of a points row a flag also sets, each with the flag's default."""


def _flag_name(name: str) -> str:
    b = BOUNDS.get(name)
    return b.flag if b is not None and b.flag else "--" + name.replace("_", "-")


def _same(name: str, a: object, b: object) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        if name in ("dtype", "kv_dtype"):
            return normalize_dtype(a) == normalize_dtype(b)
        return a.strip().lower().replace("_", "-") == b.strip().lower().replace("_", "-")
    return bool(a == b)


def _with_flags(args: argparse.Namespace, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with every flag given beside ``--points`` applied: a flag fills the row's empty cell; a
    cell that says otherwise makes the row an error naming both (never silently one or the other)."""
    out = dict(row)
    for name, default in {**_ROW_FLAGS, **dict.fromkeys(_owners())}.items():
        flag = getattr(args, name, None)
        if flag is None or flag == default:
            continue
        if out.get(name) is None:
            out[name] = flag
        elif not _same(name, out[name], flag):
            col, header = row["columns"].get(name, (0, name))
            raise InputError(f"{args.points}:{row['line']}:{col}: column {header!r} = {out[name]!r} and "
                             f"{_flag_name(name)} {flag} disagree: a flag given with --points applies to "
                             "every row (leave the column empty, or drop the flag)")
    return out


def flags_setting(field: str, engine: str | None = None) -> tuple[str, ...]:
    """The dests of the engine flags (of ``engine``, else of every engine) that set Deployment ``field``
    (``max_num_seqs`` -> ``max_num_seqs``, ``max_running_requests``, ``max_batch_size``); () for a field
    no engine flag sets."""
    target = next((t for t, f in _FIELDS.items() if f == field), None)
    return tuple(dest for eng, flags in flag_dests().items() for dest, (sets, _) in flags.items()
                 if target is not None and sets == target and engine in (None, eng))


def _row_error(args: argparse.Namespace, row: dict[str, Any], exc: Exception) -> str:
    """The message of a row that could not be predicted, ``FILE:LINE:COLUMN: column 'NAME' = ...`` where
    the value that failed is a cell of the file (an engine's field under the engine's own column
    name), else ``FILE:LINE: ...``."""
    where = f"{args.points}:{row['line']}"
    msg = str(exc)
    if msg.startswith(str(args.points)):
        return msg
    if isinstance(exc, ParameterError):
        name = exc.name
        name = next((dest for dest, (_, flag) in _owners().items() if flag == name), name)
        engine = row.get("engine") or engine_of(args)
        name = next((dest for dest in flags_setting(name, engine) if dest in row["columns"]), name)
        if name in row["columns"] and row.get(name) is not None:
            col, header = row["columns"][name]
            return f"{where}:{col}: column {header!r} = {exc.value!r} is invalid: must be {exc.valid}"
    return f"{where}: {msg}"


# ----------------------------------------------------------------------------- compare


def _compare(args: argparse.Namespace, catalog: Catalog | None) -> Output:
    from servesim.plan.predict import compare_to_measured

    res = read_bench_result(args.compare)
    row, said = _result_row(args, res)
    lengths = res.lengths if res.lengths is not None and len(res.lengths) == row["num_prompts"] else None
    try:
        try:
            pred = _one(args, row, catalog, lengths=lengths)
        except ParameterError as exc:  # the file's speculation, on a model servesim gives no such method
            if exc.name != "spec" or "spec" not in said["read"]:
                raise
            said["notes"].append(f"the file records spec_decoding {row['spec']!r}, which servesim cannot "
                                 f"model for {row['model']} ({exc.valid}): predicted without speculation, "
                                 "so TPOT and ITL compare a speculative run with a plain one (--spec to "
                                 "choose)")
            row = {**row, "spec": None}
            pred = _one(args, row, catalog, lengths=lengths)
    except (ParameterError, InputError) as exc:
        # the numbers may be the file's (isl and osl its mean lengths): say so, naming the file
        read = [f"{k}={row[k]!r} from {src}" for k, src, flag in (
            ("isl", "its input_lens/total_input_tokens", args.isl), ("osl", "its output_lens/"
             "total_output_tokens", args.osl), ("concurrency", "its max_concurrency", args.concurrency),
            ("num_prompts", "its completed", args.num_prompts)) if flag is None and row.get(k) is not None]
        raise InputError(f"{res.path}: predicting its run ({', '.join(read)}): {exc}") from None
    rows = compare_to_measured(pred, res.metrics)
    data = {"prediction": pred, "comparison": rows, "result_file": res.path, "tool": res.tool, **said,
            "likely_causes": likely_causes(pred, rows, res.metrics)}
    return emit(args, Output(data, compare_text(data), rows),
                [("", pred["deploy"])] if "deploy" in pred else [])


def _result_row(args: argparse.Namespace, res: MeasuredResult) -> tuple[dict[str, Any], dict[str, Any]]:
    """The row a saved result describes, each value the flag's where given, else the file's; and what
    was said of it: ``assumed`` (the engine and client, each with where it came from), ``read`` (the
    file's values taken) and ``notes``."""
    gpu = args.gpu or res.gpu
    if gpu is None:
        raise InputError(f"{res.path}: the file ({res.tool}) does not record the GPU: give --gpu")
    model = args.model or res.model
    if model is None:
        raise InputError(f"{res.path}: the file ({res.tool}) records no model: give --model")
    local = model.startswith(("/", "./", "../", "~")) and not Path(model).expanduser().exists()
    if args.model is None and local:
        hint = model_id_hint(model)
        raise InputError(f"{res.path}: its model_id {model!r} is a path on the machine that ran it: give "
                         + (f"--model {hint} (the Hugging Face id the path names)" if hint else
                            "--model NAME (a catalog name or Hugging Face id; the path ends in "
                            f"{'/'.join(Path(model).parts[-2:])})"))
    isl, osl = args.isl or res.isl, args.osl or res.osl
    if isl is None or osl is None:
        raise InputError(f"{res.path}: cannot tell the prompt/output lengths (no input_lens/"
                         "total_input_tokens); give --isl and --osl")
    rate = res.request_rate if args.rate is None else args.rate
    ratio, warmups = args.random_range_ratio, args.num_warmups
    # the deployment the file records (InferenceMAX's record), where no flag sets it (--spec none and
    # --mode agg are the flags' defaults, so the file's speculation and mode win over them)
    unset = {"tp": args.tp, "dp": args.dp, "ep": args.ep, "dtype": args.dtype,
             "spec": None if args.spec == "none" else args.spec,
             "mode": None if args.mode == "agg" else args.mode}
    dep = {k: v for k, v in res.deployment.items() if unset.get(k, getattr(args, k, None)) is None}
    row = _flag_row(args, model=model, gpu=gpu, deploy=wants_deploy(args), isl=isl, osl=osl,
                    concurrency=args.concurrency or res.concurrency, rate=rate,
                    num_prompts=args.num_prompts or res.completed,
                    burstiness=args.burstiness or res.burstiness,
                    random_range_ratio=res.random_range_ratio if ratio is None else ratio,
                    num_warmups=res.num_warmups if warmups is None else warmups,
                    engine=args.engine or res.engine, client=args.client or res.client, **dep)
    field = f"{res.engine_field} {res.engine_recorded!r}"
    engine_how = ("--engine" if args.engine else f"the file's {field}" if res.engine else
                  f"servesim's default: the file's {field} names no engine it models" if res.engine_recorded
                  else "servesim's default: the file records none")
    client_how = "--client" if args.client else f"the file's format, {res.tool}"
    read = {k: v for k, v in (("model", None if args.model else model),
                              ("gpu", None if args.gpu else res.gpu), *dep.items()) if v is not None}
    notes = [*res.notes]
    if res.records > 1:
        notes.insert(0, f"record {res.record} of {res.records} (the last run appended to the file)")
    return row, {"assumed": {"engine": engine_how, "client": client_how}, "read": read, "notes": notes}
