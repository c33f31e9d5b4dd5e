"""Accuracy of ``servesim predict`` against published serving measurements.

Reads ``benchmarks/data/published_measurements.csv`` (each row cites its source;
see ``benchmarks/data/SOURCES.md``), predicts every row with the shipped model,
and prints predicted against measured with the median and worst relative error
of TTFT, TPOT and output throughput, overall and per source.

    python benchmarks/accuracy.py             # the table and the summary
    python benchmarks/accuracy.py --fit       # also scan the two host-time constants
    python benchmarks/accuracy.py --frontend  # and the first-token path's candidate mechanisms
    python benchmarks/accuracy.py --frontend loop  # only the serving-loop candidate

``--fit`` scans the engine's host time per step (fixed part and per-sequence
part) on a small grid and prints the median TPOT error for each: the only
constants fitted to these measurements (``hardware/data/engines.toml``).
Rows the model cannot price (an unknown model or GPU) are listed and skipped.
``--frontend`` fits each candidate term of the first-token path (:func:`frontend_term_ms`:
tokenization, the front end's burst of a step's chunks, the front end as a queue, and
:mod:`servesim.sim.frontend`'s serving loop on the engines whose loop has no measured cost)
leave-one-source-out beside the request overhead (one per group, :func:`overhead_group`) and in its
place, and prints the out-of-sample TTFT error of each per engine, client and load band
(:func:`frontend_scan`);
``--frontend KIND ...`` scans those named.

A second section reads ``benchmarks/data/published_speculative.csv``: published
runs with and without speculative decoding, each with its measured acceptance
length.  Each is predicted twice with ``servesim.plan.predict.predict`` (the same
deployment and benchmark, without speculation and with ``spec=method, k=k,
acceptance_length=A``) and the predicted speedup is set against the measured one,

    speedup = base TPOT / spec TPOT   (metric tpot_ms, and tps_user at concurrency 1)
            = base duration / spec duration   (metric e2e_runtime)

with the median and worst |error| per source and method, and per series (one
deployment over concurrency) the first concurrency where speculation stops paying
(speedup <= 1), measured against predicted, beside the model's own curve (the
prediction's ``stops_paying_at_batch``: the first batch on a 2x grid).  Fields a
source does not publish are named in the row's ``assumed`` column.
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import re
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
DATA = HERE / "data" / "published_measurements.csv"
SPEC_DATA = HERE / "data" / "published_speculative.csv"
INTERVALS = "prediction_errors.json"


def _num(x: str) -> float | None:
    x = (x or "").strip()
    if not x or x.lower() == "inf":
        return None
    try:
        v = float(x)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def load_rows(path: Path = DATA) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def warmup(row: dict[str, str]) -> int:
    """Requests left out as the source's tool does: AIPerf / genai-perf measure a steady window."""
    note = row.get("note", "").lower()
    conc = _num(row["concurrency"])
    if conc and ("aiperf" in note or "genai-perf" in note):
        return int(conc)
    return 0


_CLIENT = re.compile(r"client=(\w+)")
_RATIO = re.compile(r"random_range_ratio=([0-9.]+)")
_NOMINAL = re.compile(r"--random-input(?:-len)? (\d+) --random-output(?:-len)? (\d+)")
_MEDIAN = {"ttft": re.compile(r"median TTFT ([0-9.]+) ms"), "itl": re.compile(r"median ITL ([0-9.]+) ms")}


def client_of(row: dict[str, str]) -> tuple[str, float | None, tuple[int, int] | None]:
    """The benchmark client a row's note names (``client=sglang.bench_serving``, ``client=inferencemax``;
    default vllm with fixed lengths), its range ratio and the nominal lengths it was given."""
    note = row.get("note", "")
    m = _CLIENT.search(note)
    name = "vllm"
    if m:
        word = m.group(1).lower()
        name = "sglang" if word.startswith("sglang") else "inferencemax" if "inferencemax" in word else "vllm"
    r = _RATIO.search(note)
    n = _NOMINAL.search(note)
    return name, float(r.group(1)) if r else None, (int(n.group(1)), int(n.group(2))) if n else None


_VLLM_VERSION = re.compile(r"vLLM v?0\.(\d+)")
_DP = re.compile(r"\bdp=(\d+)")
_EP = re.compile(r"\bep=(\d+)")


_SHAREGPT = re.compile(r"sharegpt", re.IGNORECASE)
SHAREGPT_RATIO = 0.9
"""The range ratio that stands in for ShareGPT's spread of lengths (:func:`length_spread`)."""


def length_spread(row: dict[str, str], name: str, ratio: float | None,
                  nominal: tuple[int, int] | None) -> float | None:
    """The range ratio a row is predicted with: the one its note states, else, for a run of the vllm
    client on ShareGPT (``vllm bench serve`` or ``sglang.bench_serving`` without ``--dataset-name
    random``: each request the prompt and answer of one conversation, whose lengths the row gives as
    means), :data:`SHAREGPT_RATIO`: lengths uniform in [0.1, 1.9] x the means.  A run of fixed
    lengths at its means locks a closed loop's clients into step (four clients of gpt-oss-120b on
    one H100, gpsoss-012: every prompt prefilled beside the three others, 55.6 ms before any
    overhead, against 31.0 ms with lengths spread at 0.5 and 31.3 ms at 0.9); the spread stands in
    for the conversations' (longer-tailed) one, which the sources do not give.  None: the client's
    default (fixed lengths for vllm)."""
    if ratio is None and nominal is None and name == "vllm" and _SHAREGPT.search(row.get("note", "")):
        return SHAREGPT_RATIO
    return ratio


def parallelism_of(row: dict[str, str]) -> tuple[int, int]:
    """Attention data parallel and expert parallel a row's note states (``dp=8 ep=8``), else 1, 1."""
    note = row.get("note", "")
    dp, ep = _DP.search(note), _EP.search(note)
    return (int(dp.group(1)) if dp else 1), (int(ep.group(1)) if ep else 1)


def family_of(model: str) -> str:
    """The row's model family for the summary: the MoE family where the model is one, else dense."""
    from servesim.hardware.model_config import find_architecture

    try:
        arch = find_architecture(model)
    except Exception:  # an unknown id is a dense catalog model or a skip reported elsewhere
        arch = None
    return "dense" if arch is None else str(arch.family)


def overlap_of(row: dict[str, str]) -> bool | None:
    """Whether the row's engine ran an overlap (async) scheduler, from the version its note states;
    None: the engine's current default (on for all three).

    TensorRT-LLM's TensorRT (C++) backend, which the v0.14 Triton rows, the v0.17 trtllm-bench
    engines and NIM 1.8 ran, has no overlap scheduler (the PyTorch backend's
    ``disable_overlap_scheduler`` is where it lives); vLLM ran steps synchronously by default up to
    0.11 (InferenceMAX passed ``--async-scheduling`` on 0.10.2; the default came with PR #27614).
    A vLLM row whose note has the literal ``--async-scheduling`` (its serving command) ran overlapped."""
    note = row.get("note", "")
    if row["engine"] == "trtllm" and any(w in note for w in ("Triton TensorRT-LLM backend", "v0.17", "NIM")):
        return False
    if row["engine"] == "vllm" and "--async-scheduling" in note:
        return True
    m = _VLLM_VERSION.search(note)
    if row["engine"] == "vllm" and m and int(m.group(1)) <= 11:
        return False
    return None


def scheduler_of(row: dict[str, str]) -> tuple[tuple[str, float | bool], ...]:
    """Scheduler options of the row's engine where its version differs from servesim's default: the
    TensorRT (C++) backend (:func:`overlap_of`) takes requests in its C++ executor, without the
    PyTorch backend's Python submit thread, so new requests are not limited to one an iteration
    (``new_requests_per_iteration`` 0; :mod:`servesim.sim.schedulers.trtllm` item 5); nor is
    ``trtllm-bench``, which queues every request up front and streams nothing (its v1.0 max-load
    Llama-3.1-8B run at 128/128 tokens on one H200, 27,911 tok/s measured, is predicted at 14,987
    with the limit and 21,639 without).  Both are the TensorRT-LLM rows not served by
    ``trtllm-serve`` (:func:`serving_loop`)."""
    if row["engine"] == "trtllm" and not serving_loop(row):
        return (("new_requests_per_iteration", 0),)
    return ()


def serving_loop(row: dict[str, str]) -> bool:
    """Whether the row's server answered through the engine's serving loop
    (:mod:`servesim.sim.frontend`: ``trtllm-serve``'s one Python process): not TensorRT-LLM's
    TensorRT (C++) backend behind Triton or NIM (:func:`overlap_of`), whose front end is C++, nor
    ``trtllm-bench``, which runs the executor in-process without a server."""
    if "trtllm-bench" in row.get("note", ""):
        return False
    return not (row["engine"] == "trtllm" and overlap_of(row) is False)


def _without_serving_loop(sm: Any) -> None:
    """``sm``'s engine without a serving loop (its front end costs nothing on the loop)."""
    sm.engine = replace(sm.engine, front_end_response_s=0.0, front_end_request_s=0.0)


def campaign(row: dict[str, str]) -> str:
    """The row's source campaign: its id without the running number (``trt014-007`` -> ``trt014``)."""
    return row["id"].rsplit("-", 1)[0]


def in_flight(row: dict[str, str], pred: dict[str, Any]) -> float:
    """Requests in flight: the client's concurrency, or rate x the predicted mean latency
    (:func:`servesim.plan.interval.requests_in_flight`, as ``predict`` bands its interval)."""
    from servesim.plan.interval import requests_in_flight

    return requests_in_flight(_num(row["concurrency"]), _num(row["request_rate"]), pred["ttft"], pred["tpot"],
                              int(float(row["osl"])))


def predict_row(row: dict[str, str], host: tuple[float, float] | None = None) -> dict[str, Any]:
    """One row's prediction.  A row measured with InferenceMAX's harness (``client=inferencemax``) is
    predicted as ``servesim predict --client inferencemax`` predicts it (the harness's server recipe
    for what the row leaves blank, a fresh server), as ``benchmarks/inferencex.py`` does; ``host``
    (the ``--fit`` scan) applies to the other rows only."""
    from servesim.hardware.pricer import Deployment, build_step_model
    from servesim.plan.predict import harness_deployment, predict
    from servesim.sim.batching import Benchmark, run_benchmark
    from servesim.sim.client import Client

    conc = _num(row["concurrency"])
    rate = _num(row["request_rate"])
    dp, ep = parallelism_of(row)
    name, ratio, nominal = client_of(row)
    ratio = length_spread(row, name, ratio, nominal)
    isl, osl = nominal or (int(float(row["isl"])), int(float(row["osl"])))
    client = Client(name, random_range_ratio=ratio)
    bench = Benchmark(isl=isl, osl=osl,
                      concurrency=int(conc) if conc is not None else None,
                      rate_per_s=rate if conc is None else None,
                      num_prompts=None, warmup=warmup(row), client=client)
    if name == "inferencemax":
        dep = harness_deployment(bench, model=row["model"], gpu=row["gpu"], tp=int(row["tp"] or 1),
                                 dtype=row["dtype"] or "auto", kv_dtype=row["kv_dtype"] or None,
                                 engine=row["engine"] or "vllm", overlap=overlap_of(row), dp=dp, ep=ep,
                                 scheduler=scheduler_of(row))
        out = predict(dep, bench)
        return {"ttft": out["mean_ttft_ms"], "tpot": out["mean_tpot_ms"], "itl": out["mean_itl_ms"],
                "tput": out["output_throughput"], "median_ttft": out["median_ttft_ms"],
                "median_itl": out["median_itl_ms"], "client": name}
    dep = Deployment(model=row["model"], gpu=row["gpu"], tp=int(row["tp"] or 1), dtype=row["dtype"] or "auto",
                     kv_dtype=row["kv_dtype"] or "bf16", engine=row["engine"] or "vllm",
                     overlap=overlap_of(row), dp=dp, ep=ep, scheduler=scheduler_of(row))
    sm, _, memory = build_step_model(dep)
    if host is not None:
        sm.engine = replace(sm.engine, host_step_s=host[0], host_per_seq_s=host[1])
    if not serving_loop(row):
        _without_serving_loop(sm)
    if overhead_group(row["engine"] or "vllm", row) == CPP_FRONT_END:
        sm.engine = replace(sm.engine, request_overhead_s=CPP_FRONT_END_OVERHEAD_MS * 1e-3)
    res = run_benchmark(sm, bench, memory)
    return {"ttft": res.mean_ttft_s * 1e3, "tpot": res.mean_tpot_s * 1e3, "itl": res.mean_itl_s * 1e3,
            "tput": res.output_throughput, "median_ttft": res.median_ttft_s * 1e3,
            "median_itl": res.median_itl_s * 1e3, "client": name}


def _err(p: float | None, m: float | None) -> float | None:
    if p is None or m is None or m == 0 or p != p:
        return None
    return (p - m) / m


def evaluate(rows: list[dict[str, str]], host: tuple[float, float] | None = None
             ) -> tuple[list[dict[str, Any]], list[str]]:
    out, skipped = [], []
    for r in rows:
        if not _num(r["concurrency"]) and not _num(r["request_rate"]):
            continue  # throughput-only (all requests at once): see max_load
        if not _num(r["isl"]) or not _num(r["osl"]):
            skipped.append(f"{r['id']}: prompt or output length not published")
            continue
        if host is not None and client_of(r)[0] == "inferencemax":
            continue  # predicted with the shipped host time only (predict_row)
        try:
            p = predict_row(r, host)
        except Exception as exc:
            skipped.append(f"{r['id']}: {exc}")
            continue
        m_tpot = _num(r["mean_tpot_ms"]) or _num(r["mean_itl_ms"])
        ttft_pm = (p["ttft"], _num(r["mean_ttft_ms"]))
        e_tpot = _err(p["tpot"], m_tpot)
        note = r.get("note", "")
        if ttft_pm[1] is None and (m := _MEDIAN["ttft"].search(note)):  # only a median published
            ttft_pm = (p["median_ttft"], float(m.group(1)))
        if e_tpot is None and (m := _MEDIAN["itl"].search(note)):
            e_tpot = _err(p["median_itl"], float(m.group(1)))
        x = {
            "row": r, "pred": p, "e_ttft": _err(*ttft_pm), "e_tpot": e_tpot, "ttft_pm": ttft_pm,
            "e_tput": _err(p["tput"], _num(r["output_throughput"])),
            "source": campaign(r), "in_flight": in_flight(r, p), "group": overhead_group(r["engine"], r),
        }
        if ttft_pm[1] and ttft_pm[0] == ttft_pm[0]:  # the TTFT without the overhead it was predicted with
            x["t0"], x["m"] = ttft_pm[0] - shipped_overhead_ms(x["group"]), ttft_pm[1]
        out.append(x)
    return out, skipped


def _errors(sub: list[dict[str, Any]]) -> str:
    """Median and worst |error| of TTFT, TPOT and output tok/s over ``sub``, as one line."""
    parts = []
    for k, name in (("e_ttft", "TTFT"), ("e_tpot", "TPOT"), ("e_tput", "tok/s")):
        n, med, worst = summary(sub, k)
        if n:
            parts.append(f"{name} {100 * med:.0f}% / {100 * worst:.0f}% (n={n})")
    return ", ".join(parts)


def summary(results: list[dict[str, Any]], key: str) -> tuple[int, float, float]:
    errs = [abs(x[key]) for x in results if x[key] is not None]
    if not errs:
        return 0, math.nan, math.nan
    return len(errs), statistics.median(errs), max(errs)


def max_load(rows: list[dict[str, str]]) -> tuple[dict[str, list[float]], list[str]]:
    """Throughput-only rows (all requests at once): the engine loop with 2,000 requests all in
    flight, output tokens/s against the published figure, grouped by source, GPU and dtype."""
    from servesim.hardware.pricer import Deployment, build_step_model
    from servesim.sim.batching import Benchmark, run_benchmark
    from servesim.sim.client import Client

    groups: dict[str, list[float]] = {}
    skipped = []
    for r in rows:
        m = _num(r["output_throughput"])
        offline = r["request_rate"].strip().lower() == "inf"
        if not offline or m is None or not _num(r["isl"]) or not _num(r["osl"]):
            continue
        try:
            isl = int(float(r["isl"]))
            # trtllm-bench sizes max_num_tokens to the workload: a whole prompt fits in a step.
            budget = max(8192, isl) if r["engine"] == "trtllm" else None
            dp, ep = parallelism_of(r)
            dep = Deployment(r["model"], r["gpu"], int(r["tp"] or 1), r["dtype"] or "auto",
                             r["kv_dtype"] or "bf16", r["engine"] or "vllm", max_num_batched_tokens=budget,
                             overlap=overlap_of(r), dp=dp, ep=ep, scheduler=scheduler_of(r))
            sm, _, mem = build_step_model(dep)
            if not serving_loop(r):
                _without_serving_loop(sm)
            # a ShareGPT run's lengths spread around its means; other clients' rows keep their means
            name, ratio, nominal = client_of(r)
            spread = length_spread(r, name, ratio, nominal) if name == "vllm" else None
            bench = Benchmark(int(float(r["isl"])), int(float(r["osl"])), concurrency=2000, num_prompts=2000,
                              client=Client("vllm", random_range_ratio=spread))
            res = run_benchmark(sm, bench, mem)
        except Exception as exc:  # report and go on: this is a survey
            skipped.append(f"{r['id']}: {exc}")
            continue
        key = f"{r['id'].split('-')[0]} {r['engine']} {r['gpu']} {r['dtype']}"
        if family_of(r["model"]) != "dense":
            key += f" {family_of(r['model'])}"
        groups.setdefault(key, []).append((res.output_throughput - m) / m)
    return groups, skipped


_PLAIN: dict[Any, dict[str, Any]] = {}


def _plain(dep: Any, bench: Any) -> dict[str, Any]:
    """The no-speculation prediction of ``dep`` under ``bench``, once per pair (a sweep's series
    share their baselines)."""
    from servesim.plan.predict import predict

    key = (dep, bench.isl, bench.osl, bench.concurrency, bench.prompts, bench.rate_per_s)
    if key not in _PLAIN:
        _PLAIN[key] = predict(dep, bench)
    return _PLAIN[key]


def predict_speculative(row: dict[str, str]) -> dict[str, Any]:
    """A published speculative run predicted without and with its speculation: the predicted
    speedup in the row's metric and the model's own stop-paying batch."""
    from servesim.hardware.pricer import Deployment
    from servesim.plan.predict import predict
    from servesim.sim.batching import Benchmark

    dep = Deployment(model=row["model"], gpu=row["gpu"], tp=int(row["tp"] or 1), dtype=row["dtype"] or "auto",
                     kv_dtype="bf16", engine=row["engine"] or "vllm", overlap=overlap_of(row),
                     ep=int(row["ep"] or 1), scheduler=scheduler_of(row),
                     max_num_seqs=int(row["max_num_seqs"]) if row.get("max_num_seqs") else None)
    conc = int(row["concurrency"])
    bench = Benchmark(isl=int(row["isl"]), osl=int(row["osl"]), concurrency=conc,
                      num_prompts=int(row["num_prompts"]) if row["num_prompts"] else None,
                      rate_per_s=float(row["request_rate"]) if row.get("request_rate") else None)
    base = _plain(dep, bench)
    spec = predict(dep, bench, spec=row["method"], k=int(row["k"]),
                   acceptance_length=float(row["acceptance_length"]),
                   draft=(row["draft"] or None) if row["method"] in ("draft", "small-draft") else None)
    if row["metric"] == "e2e_runtime":
        speedup = base["duration"] / spec["duration"]
    elif row["metric"] == "output_throughput":  # tokens per second of the whole run
        speedup = spec["output_throughput"] / base["output_throughput"]
    else:  # tpot_ms, and tps_user at concurrency 1 (a user's tokens per second is 1 / TPOT)
        speedup = base["mean_tpot_ms"] / spec["mean_tpot_ms"]
    return {"speedup": speedup, "stops_paying_at_batch": spec["speculation"]["stops_paying_at_batch"],
            "k": spec["speculation"]["k"]}


def evaluate_speculative(rows: list[dict[str, str]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every row that has its lengths, predicted (see :func:`predict_speculative`); the others listed."""
    out, skipped = [], []
    for r in rows:
        if not _num(r["isl"]) or not _num(r["osl"]):
            skipped.append(f"{r['id']}: prompt or output length not published")
            continue
        try:
            p = predict_speculative(r)
        except Exception as exc:  # report and go on: this is a survey
            skipped.append(f"{r['id']}: {(str(exc).splitlines() or [type(exc).__name__])[0]}")
            continue
        m = float(r["measured_speedup"])
        out.append({"row": r, "pred": p, "measured": m, "err": p["speedup"] / m - 1.0})
    return out, skipped


def _first_stop(points: list[tuple[int, float]]) -> str:
    """The first concurrency whose speedup is at most 1, or 'none up to C'."""
    stop = next((c for c, s in sorted(points) if s <= 1.0), None)
    return str(stop) if stop is not None else f"none up to {max(c for c, _ in points)}"


def _stop_step(points: list[tuple[int, float]]) -> float:
    """log2 of the first concurrency with speedup <= 1; a series that pays throughout counts as
    stopping one 2x step above its largest concurrency."""
    stop = next((c for c, s in sorted(points) if s <= 1.0), None)
    return math.log2(stop if stop is not None else 2 * max(c for c, _ in points))


def speculative_section(results: list[dict[str, Any]], skipped: list[str], quiet: bool) -> list[str]:
    """The lines of the speculative section: rows (unless ``quiet``), the speedup error per source and
    method, and per series where speculation stops paying."""
    lines = ["", f"published speculative runs ({SPEC_DATA.name}): {len(results)} predicted, "
             f"{len(skipped)} not"]
    if not quiet:
        lines.append(f"  {'id':<24} {'model':<28} {'gpu':<8} {'method':<7} {'k':>2} {'A':>5} {'conc':>4} "
                     f"{'speedup p/m':>13} {'error':>7}  assumed")
        for x in results:
            r = x["row"]
            lines.append(f"  {r['id'][:24]:<24} {r['model'][-28:]:<28} {r['gpu']:<8} {r['method']:<7} "
                         f"{r['k']:>2} {float(r['acceptance_length']):5.2f} {r['concurrency']:>4} "
                         f"{x['pred']['speedup']:6.2f}/{x['measured']:<6.2f} {100 * x['err']:+6.0f}%  "
                         f"{r['assumed'] or '-'}")
    if results:
        errs = [abs(x["err"]) for x in results]
        signed = statistics.median(x["err"] for x in results)
        lines.append(f"speculative speedup n={len(errs):<3} median |error| "
                     f"{100 * statistics.median(errs):5.1f}%   worst {100 * max(errs):6.1f}%   "
                     f"(signed median {100 * signed:+.1f}%)")
    lines.append("speedup error per source and method (median |error|, worst, signed median; source):")
    groups: dict[tuple[str, str], list[float]] = {}
    for x in results:
        groups.setdefault((x["row"]["source"], x["row"]["method"]), []).append(x["err"])
    for (src, method), e in sorted(groups.items()):
        a = [abs(v) for v in e]
        lines.append(f"  {method:<7} n={len(e):<3} {100 * statistics.median(a):5.1f}% {100 * max(a):6.1f}% "
                     f"{100 * statistics.median(e):+6.1f}%  {src}")
    lines.append("where speculation stops paying, per series (first concurrency with speedup <= 1: "
                 "measured / predicted at the published concurrencies / the model's own 2x-grid curve):")
    series: dict[str, list[dict[str, Any]]] = {}
    for x in results:
        series.setdefault(x["row"]["series"], []).append(x)
    judged = within = 0
    for name, xs in sorted(series.items()):
        meas = [(int(x["row"]["concurrency"]), x["measured"]) for x in xs]
        pred = [(int(x["row"]["concurrency"]), x["pred"]["speedup"]) for x in xs]
        own = xs[-1]["pred"]["stops_paying_at_batch"]
        if len(meas) > 1:
            judged += 1
            within += abs(_stop_step(meas) - _stop_step(pred)) <= 1.0 + 1e-9
        lines.append(f"  {name:<26} measured {_first_stop(meas):<14} predicted {_first_stop(pred):<14} "
                     f"curve {'never' if own is None else int(own)}")
    lines.append(f"series of more than one concurrency whose first stop is predicted within one step of a "
                 f"2x grid: {within} of {judged}")
    if skipped:
        lines.append(f"not predicted: {len(skipped)} rows")
        lines += [f"  {s}" for s in skipped]
    return lines


# --------------------------------------------------------------------------- out of sample

NEVER_FITTED: dict[str, str] = {"trtllm": "nim18", "sglang": "dch33", "vllm": "gpsoss"}
"""One source per engine that no constant is fitted to (NIM 1.8's TensorRT-LLM runs, DataCrunch's
SGLang runs on H200, GPUStack's gpt-oss runs on vLLM): their errors are out of sample whatever the fit."""

CPP_FRONT_END = "trtllm-cpp"
"""The overhead group of TensorRT-LLM's TensorRT (C++) backend behind Triton or NIM
(:func:`overlap_of` False): a C++ front end, not ``trtllm-serve``'s Python server, whose overhead
engines.toml's ``request_overhead_us`` is and ``predict`` prices (:func:`overhead_group`)."""

CPP_FRONT_END_OVERHEAD_MS = 5.0
"""The C++ front end's request overhead (ms), fitted by :func:`leave_one_source_out` on its group's
rows (the script prints the fit beside it): the published runs of that backend are priced with it.
servesim predicts ``trtllm-serve``, so it is this script's, not engines.toml's."""

OVERHEAD_GRID_MS: tuple[float, ...] = tuple(float(x) for x in range(0, 151))


PYTHON_FRONT_END = "python"
"""The overhead group of the three Python OpenAI servers (vLLM's and SGLang's, ``trtllm-serve``):
one request overhead, engines.toml's ``request_overhead_us`` of each (the same number), fitted on
their rows pooled (:func:`overhead_group`)."""

PYTHON_SERVERS: tuple[str, ...] = ("sglang", "trtllm", "vllm")


def overhead_group(engine: str, row: dict[str, str] | None = None) -> str:
    """Which request overhead a row's TTFT takes: the Python servers' one (:data:`PYTHON_FRONT_END`),
    or for TensorRT-LLM's TensorRT (C++) backend behind Triton or NIM, :data:`CPP_FRONT_END`'s.  The
    three Python servers spend tens of ms a request where the C++ front end spends a few: fitted as
    one, TensorRT-LLM's fold without its Triton rows asks for 71 ms and the Triton rows for 5.  Fitted
    apart, the three ask for 58 (SGLang), 72 (``trtllm-serve``) and 72 ms (vLLM, on three runs of two
    sources, one of which alone asks for 80 ms with its decode steps priced 37% too fast), so they
    share one, fitted on their rows pooled: what the time is spent on is not identified, and the
    benchmark clients, the HTTP streaming and the tokenizer are common to them."""
    if row is not None and engine == "trtllm" and overlap_of(row) is False:
        return CPP_FRONT_END
    return PYTHON_FRONT_END


def shipped_overhead_ms(group: str) -> float:
    """The request overhead a group's rows are predicted with (ms): the C++ front end's, or the one
    engines.toml gives each Python server (an error where they differ)."""
    from servesim.hardware.engines import engine_profile

    if group == CPP_FRONT_END:
        return CPP_FRONT_END_OVERHEAD_MS
    values = {engine_profile(e).request_overhead_s * 1e3 for e in PYTHON_SERVERS}
    if len(values) != 1:
        raise SystemExit(f"engines.toml request_overhead_us differs among {', '.join(PYTHON_SERVERS)}: "
                         "they are one constant (accuracy.overhead_group)")
    return values.pop()


def fit_overhead(items: list[dict[str, Any]], grid: tuple[float, ...] = OVERHEAD_GRID_MS) -> float:
    """The request overhead (ms, on ``grid``, default :data:`OVERHEAD_GRID_MS`) that minimises the
    median |error| of TTFT over ``items`` (each holding ``t0``, the TTFT predicted without it, and the
    measured ``m``); ties go to the smaller; 0 without items."""
    if not items:
        return 0.0
    best, best_err = 0.0, math.inf
    for o in sorted(grid):
        err = statistics.median(abs(x["t0"] + o - x["m"]) / x["m"] for x in items)
        if err < best_err - 1e-12:
            best, best_err = o, err
    return best


def leave_one_source_out(results: list[dict[str, Any]],
                         extra: tuple[dict[str, Any], ...] = ()) -> dict[str, float]:
    """Refit each engine group's request overhead with each source left out and give that source's
    rows the TTFT error of the constant fitted without them (``e_ttft`` becomes out of sample; the
    in-sample error stays as ``e_ttft_in``).  ``extra`` are more measured TTFTs to fit on, never
    reported (:func:`inferencex_items`: InferenceX's colocated runs, each run date a source), each a
    dict of ``engine``, ``source``, ``t0`` (the TTFT predicted without the overhead) and ``m`` (ms).
    Returns the overhead fitted on every source (what engines.toml should ship)."""
    items: dict[str, list[dict[str, Any]]] = {}
    for x in results:
        if "t0" in x:
            items.setdefault(x["group"], []).append(x)
    for x in extra:
        items.setdefault(overhead_group(x["engine"]), []).append(x)
    full: dict[str, float] = {}
    never = set(NEVER_FITTED.values())
    for group, xs in items.items():
        fit_on = [x for x in xs if x["source"] not in never]
        full[group] = fit_overhead(fit_on)
        for src in sorted({x["source"] for x in xs if "row" in x}):
            o = full[group] if src in never else fit_overhead([x for x in fit_on if x["source"] != src])
            for x in xs:
                if x["source"] == src:
                    x["e_ttft_in"] = x["e_ttft"]
                    x["overhead_oos_ms"] = o
                    x["e_ttft"] = (x["t0"] + o - x["m"]) / x["m"]
    return full


def inferencex_items() -> tuple[dict[str, Any], ...]:
    """InferenceX's colocated DeepSeek-R1 runs (``benchmarks/inferencex.py``) as more rows to fit the
    request overhead on (:func:`leave_one_source_out`'s ``extra``): their mean TTFT predicted less the
    shipped overhead, each run date a source.  They price the other TTFT constant, the eager MLA
    prefill's launch time, which ``benchmarks/joint_loso.py`` fits together with the overhead: fitting
    the overhead here on these rows as well keeps the two consistent (about 40 s)."""
    import inferencex  # a sibling script (benchmarks/ is on the path when this one runs)

    out = []
    for r in inferencex.load_rows():
        if r["mode"] != "agg":
            continue
        p = inferencex.predict_row(r)
        out.append({"id": r["id"], "engine": r["engine"], "source": "ix " + r["date"],
                    "m": float(r["mean_ttft_ms"]),
                    "t0": p["ttft"] - shipped_overhead_ms(overhead_group(r["engine"]))})
    return tuple(out)


def overhead_effect(results: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Per engine (TensorRT-LLM's C++ front end apart), the median |error| of TTFT out of sample with
    the fitted overhead and with none (a constant is kept only where the first is the smaller)."""
    out: dict[str, tuple[float, float]] = {}
    for key in sorted({_effect_key(x) for x in results if "t0" in x}):
        xs = [x for x in results if "t0" in x and _effect_key(x) == key]
        out[key] = (statistics.median(abs(x["e_ttft"]) for x in xs),
                    statistics.median(abs(x["t0"] - x["m"]) / x["m"] for x in xs))
    return out


def _effect_key(x: dict[str, Any]) -> str:
    return CPP_FRONT_END if x["group"] == CPP_FRONT_END else str(x["row"]["engine"])


# --------------------------------------------------------------------------- the first-token path

FRONTEND_GRID_US: dict[str, tuple[float, ...]] = {
    "tokenize": (0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0),
    "burst": (0.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0),
    "queue": (0.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0),
    "tokenize-py": (0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0),
    "burst-py": (0.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0),
    "queue-py": (0.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0),
    "loop": (0.0, 5.0, 10.0, 20.0, 30.0, 50.0, 100.0, 200.0, 500.0, 1000.0),
}
"""The scan of each front-end candidate's one cost (microseconds: a prompt token, an output chunk);
``-py``: the term applies to the Python front ends only (not TensorRT-LLM's C++ backend); ``loop``:
:mod:`servesim.sim.frontend`'s serving loop at a fitted cost a streamed response, on the engines whose
loop has no measured cost (:func:`loop_candidate_ms`)."""


@functools.cache
def _loop_of(engine: str) -> tuple[bool, tuple[tuple[str, int], ...]]:
    """Whether ``engine``'s serving loop has a measured cost (engines.toml ``front_end``), and the
    stream interval each benchmark client's harness launches it with."""
    from servesim.hardware.engines import engine_profile

    eng = engine_profile(engine)
    return (eng.front_end_response_s > 0 or eng.front_end_request_s > 0), eng.front_end_stream_intervals


def loop_candidate_ms(x: dict[str, Any], response_us: float) -> float:
    """The serving loop's wait (:meth:`servesim.sim.frontend.ServeLoop.wait_s`, ms) for result ``x``
    at ``response_us`` a streamed response, for a row whose engine answers through a Python serving
    process with no measured cost of its own (engines.toml ``front_end`` without ``response_us``):
    one response every ``stream_interval`` steps per decoding request (the interval the row's client
    launches the engine with, ``front_end.stream_interval``; 1 by default), at the predicted output
    tok/s, ``output tok/s / output length`` requests a second and ``in_flight`` decoding requests.
    Open loop: the wait at the throughput predicted without it, an upper bound on what
    :func:`servesim.sim.frontend.settle` settles at in a closed loop.  0 for an engine whose loop is
    measured (already in the prediction) and a row without a serving loop (:func:`serving_loop`)."""
    from servesim.sim.frontend import ServeLoop

    measured, intervals = _loop_of(x["row"]["engine"])
    if measured or response_us <= 0 or not serving_loop(x["row"]):
        return 0.0
    interval = dict(intervals).get(x["pred"]["client"], 1)
    tput = x["pred"]["tput"] if math.isfinite(x["pred"]["tput"]) else 0.0
    b = x["in_flight"] if math.isfinite(x["in_flight"]) else 1.0
    lam = tput / max(float(x["row"]["osl"]), 1.0)
    return 1e3 * ServeLoop(response_us * 1e-6, 0.0, interval).wait_s(tput, lam, b)


def frontend_term_ms(kind: str, x: dict[str, Any], cost_us: float) -> float:
    """A candidate term of the first-token path (issue 48 item 2), in ms, for result ``x`` at
    ``cost_us``; each models one single-threaded Python process on the path:

    * ``tokenize``: the API server tokenizes the prompt before the engine sees it, ``cost x prompt
      tokens`` (vLLM: ``vllm/v1/engine/async_llm.py`` ``AsyncLLM.add_request`` runs the input
      processor in the API-server process; SGLang: ``managers/tokenizer_manager.py``
      ``TokenizerManager._tokenize_one_request``).
    * ``burst``: every engine step hands the front end one output per running request, processed
      one after another (vLLM: ``AsyncLLM._run_output_handler``'s ``output_handler`` runs
      ``OutputProcessor.process_outputs``, detokenization included, over a step's outputs in slices
      of ``VLLM_V1_OUTPUT_PROC_CHUNK_SIZE``; SGLang: ``DetokenizerManager`` then
      ``TokenizerManager.handle_loop``; the benchmark client, one asyncio process, parses every SSE
      chunk): a new request's first chunk waits for half the others, ``b x cost / 2`` with ``b``
      the requests in flight.
    * ``queue``: the same process as a server busy ``rho = output tok/s x cost`` of the time, its
      work arriving a step at a time (``S = b x cost``): the burst plus the M/D/1-style wait of the
      request on the way in and of its first chunk on the way out, ``S / 2 + 2 rho S / (2 (1 -
      rho))`` (rho capped at 0.95).

    ``KIND-py`` is ``KIND`` on the Python front ends only (vLLM's and SGLang's API servers and
    ``trtllm-serve``), none on TensorRT-LLM's C++ backend behind Triton or NIM (:func:`overlap_of`)."""
    if kind == "loop":
        return loop_candidate_ms(x, cost_us)
    c_ms = cost_us * 1e-3
    if kind.endswith("-py"):  # Python front ends only: TensorRT-LLM's C++ backend (Triton, NIM) has none
        if overhead_group(x["row"]["engine"], x["row"]) == CPP_FRONT_END:
            return 0.0
        kind = kind[:-3]
    if kind == "tokenize":
        return float(x["row"]["isl"]) * c_ms
    b = x["in_flight"] if math.isfinite(x["in_flight"]) else 1.0
    step_ms = b * c_ms
    if kind == "burst":
        return step_ms / 2
    rho = min(0.95, x["pred"]["tput"] * c_ms * 1e-3)
    return step_ms / 2 + rho * step_ms / (1 - rho)


def frontend_scan(results: list[dict[str, Any]], kinds: list[str] | None = None) -> list[str]:
    """Each front-end candidate (:func:`frontend_term_ms`; ``kinds``, default all of
    :data:`FRONTEND_GRID_US`) fitted leave-one-source-out, its cost shared by the engines, with the
    group's overhead refitted beside it (``+ overhead``) and in its place (``alone``): the
    out-of-sample median |error| of TTFT overall and per engine, client and load band, beside the
    overhead alone, and the cost and overheads fitted on every source.  Never-fitted sources take
    the fit on every other."""
    xs = [x for x in results if "t0" in x]
    never = set(NEVER_FITTED.values())
    sources = sorted({x["source"] for x in xs})

    def group(x: dict[str, Any]) -> str:
        return str(x["group"])

    def fit(items: list[dict[str, Any]], kind: str, with_overhead: bool) -> tuple[float, dict[str, float]]:
        best: tuple[float, float, dict[str, float]] | None = None
        for c in FRONTEND_GRID_US[kind]:
            shifted = [{"t0": x["t0"] + frontend_term_ms(kind, x, c), "m": x["m"], "g": group(x)}
                       for x in items]
            offs = {g: fit_overhead([y for y in shifted if y["g"] == g]) if with_overhead else 0.0
                    for g in {y["g"] for y in shifted}}
            err = statistics.median(abs(y["t0"] + offs[y["g"]] - y["m"]) / y["m"] for y in shifted)
            if best is None or err < best[0] - 1e-12:
                best = (err, c, offs)
        assert best is not None
        return best[1], best[2]

    def oos(kind: str, with_overhead: bool) -> tuple[dict[int, float], tuple[float, dict[str, float]]]:
        fit_on = [x for x in xs if x["source"] not in never]
        full = fit(fit_on, kind, with_overhead)
        errs: dict[int, float] = {}
        for src in sources:
            c, offs = full if src in never else fit([x for x in fit_on if x["source"] != src], kind,
                                                    with_overhead)
            for x in xs:
                if x["source"] == src:
                    t = x["t0"] + frontend_term_ms(kind, x, c) + offs.get(group(x), 0.0)
                    errs[id(x)] = (t - x["m"]) / x["m"]
        return errs, full

    def line(label: str, errs: dict[int, float]) -> str:
        parts = [f"all {100 * statistics.median(abs(e) for e in errs.values()):5.1f}%"]
        for by in (lambda x: x["row"]["engine"], lambda x: x["pred"]["client"], band_of):
            cells: dict[str, list[float]] = {}
            for x in xs:
                cells.setdefault(str(by(x)), []).append(abs(errs[id(x)]))
            parts.append(" ".join(f"{g} {100 * statistics.median(v):.1f}%" for g, v in sorted(cells.items())))
        return f"  {label:<34} " + " | ".join(parts)

    base = {id(x): x["e_ttft"] for x in xs}
    lines = [f"first-token path candidates, TTFT out of sample (median |error|; n={len(xs)}; the cost "
             "fitted leave-one-source-out on the grid FRONTEND_GRID_US, shared by the engines):",
             line("overhead per group (shipped form)", base)]
    for kind in kinds or FRONTEND_GRID_US:
        for with_overhead in (True, False):
            errs, (c, offs) = oos(kind, with_overhead)
            label = f"{kind} {'+ overhead' if with_overhead else 'alone'} ({c:g} us)"
            lines.append(line(label, errs))
            if with_overhead:
                lines.append(f"  {'':<34} fitted on every source: {c:g} us, overhead "
                             + ", ".join(f"{g} {o:g} ms" for g, o in sorted(offs.items())))
    return lines


def band_of(x: dict[str, Any]) -> str:
    from servesim.plan.interval import load_band

    return load_band(x["in_flight"])


def kind_of(x: dict[str, Any]) -> str:
    return "dense" if family_of(x["row"]["model"]) == "dense" else "moe"


def _stats(errs: list[float]) -> str:
    import numpy as np

    a = [abs(e) for e in errs]
    return (f"n={len(errs):<4} median |e| {100 * statistics.median(a):5.1f}%  "
            f"p90 {100 * float(np.quantile(a, 0.9)):6.1f}%  "
            f"signed median {100 * statistics.median(errs):+6.1f}%")


def breakdown(results: list[dict[str, Any]]) -> list[str]:
    """Out-of-sample errors per engine, client, model kind and family, and load band."""
    lines = []
    for key, name in (("e_ttft", "TTFT"), ("e_tpot", "TPOT"), ("e_tput", "output tok/s")):
        lines.append(f"{name}:")
        for label, by in (("engine", lambda x: x["row"]["engine"]),
                          ("client", lambda x: x["pred"]["client"]),
                          ("family", lambda x: family_of(x["row"]["model"])),
                          ("load", band_of)):
            groups: dict[str, list[float]] = {}
            for x in results:
                if x[key] is not None:
                    groups.setdefault(str(by(x)), []).append(x[key])
            for g, errs in sorted(groups.items()):
                lines.append(f"  {label:<7} {g:<13} {_stats(errs)}")
    return lines


ERROR_KEYS = {"ttft": "e_ttft", "tpot": "e_tpot", "tput": "e_tput"}


def error_cells(results: list[dict[str, Any]]) -> dict[str, dict[str, list[list[float]]]]:
    """Signed errors per metric and cell (``engine|kind|band`` and its coarser cells) as ``(error,
    weight)`` pairs, each source's errors in a cell weighing 1 in all: the table
    :mod:`servesim.plan.interval` reads."""
    from servesim.plan.interval import cell_keys

    raw: dict[str, dict[str, list[tuple[float, str]]]] = {m: {} for m in ERROR_KEYS}
    for x in results:
        e, k, b = x["row"]["engine"], kind_of(x), band_of(x)
        for metric, key in ERROR_KEYS.items():
            if x[key] is None:
                continue
            for cell in cell_keys(e, k, b):
                raw[metric].setdefault(cell, []).append((round(x[key], 4), x["source"]))
    out: dict[str, dict[str, list[list[float]]]] = {m: {} for m in ERROR_KEYS}
    for metric, cells in raw.items():
        for cell, xs in cells.items():
            per = {s: sum(1 for _, t in xs if t == s) for _, s in xs}
            out[metric][cell] = sorted([v, round(1.0 / per[s], 6)] for v, s in xs)
    return out


def coverage(results: list[dict[str, Any]], level: float = 0.8) -> list[str]:
    """How often an interval built without a source holds that source's measured values, and the
    intervals' median half-width (relative to the prediction)."""
    from servesim.plan.interval import _cell, interval

    lines = [f"{100 * level:.0f}% prediction intervals, each source's built from the other sources' "
             "out-of-sample errors:"]
    sources = sorted({x["source"] for x in results})
    without = {src: error_cells([x for x in results if x["source"] != src]) for src in sources}
    for metric, key in ERROR_KEYS.items():
        held = n = 0
        widths: list[float] = []
        per_engine: dict[str, list[int]] = {}
        for src in sources:
            cells = without[src][metric]
            for x in results:
                if x["source"] != src or x[key] is None:
                    continue
                xs, _ = _cell(cells, x["row"]["engine"], kind_of(x), band_of(x))
                if not xs:
                    continue
                p = 1.0 + x[key]  # the prediction over the measurement: the interval of m / p
                lo, hi = interval(1.0, xs, level)
                ok = lo <= 1.0 / p <= hi
                held += ok
                n += 1
                widths.append((hi - lo) / 2)
                per_engine.setdefault(x["row"]["engine"], []).append(int(ok))
        if n:
            eng = ", ".join(f"{e} {100 * sum(v) / len(v):.0f}% of {len(v)}"
                            for e, v in sorted(per_engine.items()))
            lines.append(f"  {metric.upper():<5} holds {held} of {n} ({100 * held / n:.0f}%; {eng}); "
                         f"median half-width {100 * statistics.median(widths):.0f}%")
    return lines


def write_intervals(results: list[dict[str, Any]], path: Path) -> None:
    """The out-of-sample errors as :mod:`servesim.plan.interval`'s table (written whole or not at all)."""
    import json
    import os
    import tempfile

    doc = {"source": "benchmarks/accuracy.py --write-intervals: signed relative errors (predicted - "
                     "measured) / measured of the published runs in "
                     "benchmarks/data/published_measurements.csv, TTFT with each source left out of "
                     "the request overhead's fit",
           "errors": error_cells(results)}
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=None, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--spec-data", type=Path, default=SPEC_DATA, help="published speculative runs")
    ap.add_argument("--fit", action="store_true", help="scan the host-time constants")
    ap.add_argument("--quiet", action="store_true", help="summary only")
    ap.add_argument("--frontend", nargs="*", default=None, choices=sorted(FRONTEND_GRID_US), metavar="KIND",
                    help="scan the first-token path's candidate mechanisms out of sample (frontend_scan): "
                         "the KINDs named, else all of " + ", ".join(FRONTEND_GRID_US))
    ap.add_argument("--published-only", action="store_true",
                    help="fit the request overhead on these rows only, not also on InferenceX's colocated "
                         "runs (inferencex_items; about 40 s faster)")
    ap.add_argument("--write-intervals", action="store_true",
                    help="write the out-of-sample errors to src/servesim/plan/data/prediction_errors.json")
    args = ap.parse_args(argv)
    rows = load_rows(args.data)
    results, skipped = evaluate(rows)
    full = leave_one_source_out(results, () if args.published_only else inferencex_items())
    if not args.quiet:
        print(f"{'id':<14} {'model':<34} {'gpu':<9} {'tp':>2} {'dt':<4} {'eng':<6} {'isl/osl':>10} "
              f"{'conc':>5}"
              f" {'TTFT p/m ms':>17} {'TPOT p/m ms':>15} {'tok/s p/m':>15}")
        for x in results:
            r, p = x["row"], x["pred"]

            def pm(pred: float, meas: str, nd: int = 1) -> str:
                m = _num(meas)
                return f"{pred:.{nd}f}/" + ("-" if m is None else f"{m:.{nd}f}")

            conc = r["concurrency"] or ("@" + r["request_rate"])
            m_tpot = r["mean_tpot_ms"] or r["mean_itl_ms"]
            print(f"{r['id'][:14]:<14} {r['model'][-34:]:<34} {r['gpu']:<9} {r['tp']:>2} {r['dtype']:<4} "
                  f"{r['engine']:<6} {r['isl'] + '/' + r['osl']:>10} {conc:>5} "
                  f"{pm(p['ttft'], r['mean_ttft_ms']):>17}"
                  f" {pm(p['tpot'], m_tpot, 2):>15} {pm(p['tput'], r['output_throughput'], 0):>15}")
    print()
    print("Errors are out of sample: each source's TTFT is predicted with the request overhead fitted "
          "without it\n(on the other sources" + (" only" if args.published_only else
                                                  " and InferenceX's colocated runs, a source a run date")
          + "; sources never fitted: "
          + ", ".join(f"{e} {s}" for e, s in sorted(NEVER_FITTED.items()))
          + "); host_per_seq_us is the shipped value, fitted on these rows (--fit: its scan).")
    for key, name in (("e_ttft", "TTFT"), ("e_tpot", "TPOT"), ("e_tput", "output tok/s")):
        n, med, worst = summary(results, key)
        print(f"{name:<13} n={n:<4} median |error| {100 * med:5.1f}%   worst {100 * worst:6.1f}%")
    ins = [abs(x["e_ttft_in"]) for x in results if x.get("e_ttft_in") is not None]
    if ins:
        print(f"TTFT in sample (the shipped overhead, fitted on every source): median |error| "
              f"{100 * statistics.median(ins):5.1f}%")
    print("request overhead fitted on every source (what engines.toml ships): " + ", ".join(
        f"{g} {o:g} ms (ships {shipped_overhead_ms(g):g})" for g, o in sorted(full.items())))
    print("out-of-sample TTFT median |error| per engine, the overhead fitted leave-one-source-out / none: "
          + ", ".join(f"{g} {100 * a:.1f}% / {100 * b:.1f}%"
                      for g, (a, b) in sorted(overhead_effect(results).items())))
    print("\nout of sample, per engine, client, family and load band (requests in flight: "
          "light < 16, medium 16-64, heavy > 64):")
    print("\n".join(breakdown(results)))
    print()
    print("\n".join(coverage(results)))
    if args.write_intervals:
        write_intervals(results, HERE.parent / "src" / "servesim" / "plan" / "data" / INTERVALS)
    print("\nper model family and engine (median |error|, worst):")
    fams: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for x in results:
        fams.setdefault((family_of(x["row"]["model"]), x["row"]["engine"]), []).append(x)
    for key in sorted(fams):
        print(f"  {key[0]:<12} {key[1]:<7} {_errors(fams[key])}")
    print("\nper engine and client (median |error|, worst):")
    for key in sorted({(x["row"]["engine"], x["pred"]["client"]) for x in results}):
        sub = [x for x in results if (x["row"]["engine"], x["pred"]["client"]) == key]
        print(f"  {key[0]:<7} {key[1]:<13} {_errors(sub)}")
    print("\nper source:")
    sources = sorted({x["row"]["source"] for x in results})
    for s in sources:
        sub = [x for x in results if x["row"]["source"] == s]
        parts = []
        for key, name in (("e_ttft", "TTFT"), ("e_tpot", "TPOT"), ("e_tput", "tok/s")):
            n, med, _ = summary(sub, key)
            if n:
                parts.append(f"{name} {100 * med:.0f}% (n={n})")
        print(f"  {s[:70]}: {', '.join(parts)}")
    groups, load_skipped = max_load(rows)
    if groups:
        print("\nmax-load output tokens/s (throughput-only rows: all requests at once; 2,000 in flight):")
        for key, errs in sorted(groups.items()):
            print(f"  {key:<32} n={len(errs):<3} median error {100 * statistics.median(errs):+6.1f}%")
        skipped += load_skipped
    if skipped:
        reasons: dict[str, list[str]] = {}
        for s in skipped:
            rid, why = s.split(": ", 1)
            reasons.setdefault(why, []).append(rid)
        print(f"\nnot predicted: {len(skipped)} rows")
        for why, ids in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(ids):>4} {why} ({ids[0]}{', ...' if len(ids) > 1 else ''})")
    spec_results, spec_skipped = evaluate_speculative(load_rows(args.spec_data))
    print("\n".join(speculative_section(spec_results, spec_skipped, args.quiet)))
    if args.fit:
        print("\n" + "\n".join(host_loso(rows)))
    if args.frontend is not None:
        print("\n" + "\n".join(frontend_scan(results, args.frontend)))
    return 0


HOST_PER_SEQ_GRID_US = (0.0, 5.0, 10.0, 20.0)
"""The scan of ``host_per_seq_us`` (the fixed host time a step, 1 ms, is not fitted: issue 9's breakdown)."""


def host_loso(rows: list[dict[str, str]]) -> list[str]:
    """``host_per_seq_us`` fitted leave-one-source-out on the TPOT of the rows not measured with
    InferenceMAX's harness (those keep the shipped value): each source's TPOT error with the value that
    minimises the median |error| of the others (never-fitted sources excluded from every fit), beside
    the error with none (0) and the in-sample scan."""
    runs = {h: evaluate(rows, (1e-3, h * 1e-6))[0] for h in HOST_PER_SEQ_GRID_US}
    by_id = {h: {x["row"]["id"]: x for x in res if x["e_tpot"] is not None} for h, res in runs.items()}
    ids = sorted(set.intersection(*(set(d) for d in by_id.values())))
    src = {i: campaign(by_id[HOST_PER_SEQ_GRID_US[0]][i]["row"]) for i in ids}
    never = set(NEVER_FITTED.values())

    def med(h: float, keep: list[str]) -> float:
        return statistics.median(abs(by_id[h][i]["e_tpot"]) for i in keep) if keep else math.inf

    lines = ["host_per_seq_us fitted leave-one-source-out on TPOT (host 1 ms a step, not fitted):"]
    lines.append("  in sample: " + ", ".join(f"{h:g} us {100 * med(h, ids):.1f}%"
                                             for h in HOST_PER_SEQ_GRID_US))
    fit_on = [i for i in ids if src[i] not in never]
    full = min(HOST_PER_SEQ_GRID_US, key=lambda h: (med(h, fit_on), h))
    oos: list[float] = []
    for s in sorted(set(src.values())):
        mine = [i for i in ids if src[i] == s]
        h = full if s in never else min(HOST_PER_SEQ_GRID_US,
                                         key=lambda g: (med(g, [i for i in fit_on if src[i] != s]), g))
        oos += [abs(by_id[h][i]["e_tpot"]) for i in mine]
        lines.append(f"  {s:<10} n={len(mine):<3} fitted without it {h:g} us: TPOT {100 * med(h, mine):.1f}%")
    none = [abs(by_id[0.0][i]["e_tpot"]) for i in ids]
    lines.append(f"  fitted on every source: {full:g} us; out of sample TPOT "
                 f"{100 * statistics.median(oos):.1f}% against {100 * statistics.median(none):.1f}% "
                 f"with none (n={len(ids)})")
    return lines


if __name__ == "__main__":
    sys.exit(main())
