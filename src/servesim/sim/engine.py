"""Iteration-level simulation of a deployment under Poisson traffic: colocated or disaggregated.

* **Colocated**: ``replicas`` engines, requests routed round-robin, each engine
  the step-by-step loop of :func:`servesim.sim.batching.run_benchmark`
  (continuous batching, chunked prefill, KV admission and preemption, step
  times from the measured-kernel step model).
* **Disaggregated**: a front end to the one disaggregated simulator,
  :func:`servesim.sim.disaggregation.run_disaggregated` (the engine loop of every
  prefill and decode worker, the KV cache crossing the link between them), the
  same one ``predict --mode disagg`` runs; here with the plain client at a Poisson
  rate and the figures in the shape ``simulate --model`` reports.

Send times are the client's (:func:`servesim.sim.client.arrival_times`, burstiness 1:
Poisson).  TTFT = arrival to first token; TPOT per request as ``vllm bench serve``
computes it.  Same seed, same numbers.  Nothing here prints.
"""

from __future__ import annotations

import math
import time
from typing import Any

from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.precision import kv_bytes_of
from servesim.hardware.pricer import Pricer
from servesim.sim.batching import Benchmark, BenchResult, run_benchmark
from servesim.sim.client import arrival_times
from servesim.sim.disaggregation import Pool, run_disaggregated

__all__ = ["replay_colocated", "simulate_colocated", "simulate_disaggregated"]


def simulate_colocated(sm: Pricer, memory_bytes: float, replicas: int, rate_per_s: float, isl: int,
                       osl: int, *, requests: int = 2000, seed: int = 0) -> dict[str, Any]:
    """``replicas`` colocated engines at ``rate_per_s`` in all (see the module docstring)."""
    n = check_int("replicas", replicas, lo=1, hi=4096)
    rate = check_real("rate", rate_per_s, lo=0.0, lo_open=True)
    total = check_int("requests", requests, lo=n, hi=1_000_000)
    t0 = time.perf_counter()
    arr = arrival_times(rate, 1.0, total, seed)  # Poisson: exponential gaps
    per: list[BenchResult] = []
    for i in range(n):
        mine = arr[i::n]
        bench = Benchmark(isl, osl, rate_per_s=rate / n, num_prompts=len(mine), seed=seed)
        per.append(run_benchmark(sm, bench, memory_bytes, arrival_times=mine))
    wall = time.perf_counter() - t0
    return _merge(per, osl, wall, {"mode": "agg", "replicas": n})


def _merge(per: list[BenchResult], osl: int, wall: float, extra: dict[str, Any]) -> dict[str, Any]:
    # Means are request-weighted; percentiles of the merged population are not recoverable from the
    # parts, so the p99 is the largest replica p99 (replicas see the same traffic: they agree closely).
    done = sum(r.completed for r in per)
    ttft = sum(r.mean_ttft_s * r.completed for r in per) / done
    tpot = sum(r.mean_tpot_s * r.completed for r in per) / done
    duration = max(r.duration_s for r in per)
    return {
        "mean_ttft_ms": ttft * 1e3, "p99_ttft_ms": max(r.p99_ttft_s for r in per) * 1e3,
        "mean_tpot_ms": tpot * 1e3, "p99_tpot_ms": max(r.p99_tpot_s for r in per) * 1e3,
        "output_throughput": done * osl / duration, "request_throughput": done / duration,
        "completed": done, "decode_batch": sum(r.decode_batch for r in per) / len(per),
        "preemptions": sum(r.preemptions for r in per),
        "sim_requests_per_s": done / wall if wall > 0 else math.inf, "wall_ms": wall * 1e3, **extra,
    }


def simulate_disaggregated(prefill_sm: Pricer, prefill_workers: int, decode_sm: Pricer,
                           decode_memory_bytes: float, decode_workers: int, link_bytes_per_s: float,
                           rate_per_s: float, isl: int, osl: int, *, requests: int = 2000,
                           seed: int = 0, link_contention: bool = False,
                           prefill_memory_bytes: float | None = None) -> dict[str, Any]:
    """Prefill pool, KV transfer, decode pool at ``rate_per_s``: ``requests`` requests of ``isl``
    prompt and ``osl`` output tokens through :func:`servesim.sim.disaggregation.run_disaggregated`.

    ``decode_memory_bytes`` is each decode GPU's memory; ``prefill_memory_bytes`` each prefill
    GPU's (default: the same, as when both pools run on one GPU model).  ``link_contention``: the
    transfers share one link, first come first served, instead of each having the link to itself
    as the closed form assumes.
    """
    pw = check_int("prefill_workers", prefill_workers, lo=1, hi=4096)
    dw = check_int("decode_workers", decode_workers, lo=1, hi=4096)
    rate = check_real("rate", rate_per_s, lo=0.0, lo_open=True)
    total = check_int("requests", requests, lo=dw, hi=1_000_000)
    pmem = decode_memory_bytes if prefill_memory_bytes is None else prefill_memory_bytes
    t0 = time.perf_counter()
    bench = Benchmark(isl, osl, rate_per_s=rate, num_prompts=total, seed=seed)
    res = run_disaggregated(Pool(prefill_sm, pw, pmem), Pool(decode_sm, dw, decode_memory_bytes), bench,
                            lambda p: kv_bytes_of(decode_sm, p) / link_bytes_per_s,
                            link_contention=link_contention, keep_requests=False)
    wall = time.perf_counter() - t0
    return {
        "mean_ttft_ms": 1e3 * res.mean_ttft_s, "median_ttft_ms": 1e3 * res.median_ttft_s,
        "p99_ttft_ms": 1e3 * res.p99_ttft_s, "mean_tpot_ms": 1e3 * res.mean_tpot_s,
        "p99_tpot_ms": 1e3 * res.p99_tpot_s, "output_throughput": res.output_throughput,
        "request_throughput": res.request_throughput, "completed": res.completed,
        "decode_batch": res.decode_batch, "preemptions": res.preemptions,
        "sim_requests_per_s": res.completed / wall if wall > 0 else math.inf, "wall_ms": wall * 1e3,
        "mode": "disagg", "prefill_workers": pw, "decode_workers": dw,
        "kv_transfer_ms": kv_bytes_of(decode_sm, isl) / link_bytes_per_s * 1e3,
        "prefill_service_ms": prefill_sm.prompt_s(isl) * 1e3,
    }


def replay_colocated(sm: Pricer, memory_bytes: float, replicas: int, arrival_s: list[float],
                     lengths: list[tuple[int, int]], *, seed: int = 0) -> dict[str, Any]:
    """Replay a trace (arrival times, (prompt, output) tokens per request) on colocated replicas.

    Requests are routed round-robin in arrival order.  A request of 0 prompt or 0 output tokens
    is priced as 1 (an engine reads at least one token and emits at least one); a request whose
    prompt and output exceed what one replica's KV cache holds cannot be served by any engine of
    this shape and is left out (counted in ``dropped``).
    """
    n = check_int("replicas", replicas, lo=1, hi=4096)
    if len(arrival_s) != len(lengths) or not arrival_s:
        raise ParameterError("trace", len(arrival_s), "one (prompt, output) pair per arrival, at least one")
    cap = sm.kv_capacity_tokens(memory_bytes)
    keep = [(a, (max(1, p), max(1, o))) for a, (p, o) in zip(arrival_s, lengths, strict=True)
            if max(1, p) + max(1, o) <= cap]
    dropped = len(arrival_s) - len(keep)
    if not keep:
        raise ParameterError("trace", len(arrival_s), f"requests that fit the {cap:,} tokens of KV cache "
                             "of a replica: every one is longer")
    t0 = time.perf_counter()
    per: list[BenchResult] = []
    for i in range(n):
        mine = keep[i::n]
        if not mine:
            continue
        first_isl, first_osl = mine[0][1]
        bench = Benchmark(first_isl, first_osl, rate_per_s=1.0, num_prompts=len(mine), seed=seed)
        per.append(run_benchmark(sm, bench, memory_bytes, arrival_times=[a for a, _ in mine],
                                 lengths=[ln for _, ln in mine]))
    wall = time.perf_counter() - t0
    out_tokens = sum(o for _, (_, o) in keep)
    merged = _merge(per, 1, wall, {"mode": "agg", "replicas": n, "dropped": dropped})
    duration = max(r.duration_s for r in per)
    merged["output_throughput"] = out_tokens / duration
    return merged
