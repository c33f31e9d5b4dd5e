"""Iteration-level simulation of a deployment under Poisson traffic: colocated or disaggregated.

* **Colocated**: ``replicas`` engines, requests routed round-robin, each engine
  the step-by-step loop of :func:`servesim.sim.batching.run_benchmark`
  (continuous batching, chunked prefill, KV admission and preemption, step
  times from the measured-kernel step model).
* **Disaggregated**: a prefill pool of ``prefill_workers`` FCFS servers (each
  prompt takes its chunk steps on a prefill worker; prompts are not batched
  together), the KV cache crossing the link (its bytes in the KV dtype over the
  link rate, one transfer per request; with ``link_contention`` the transfers
  queue on one shared link), then a decode worker
  (round-robin) that admits the request when its cache fits and decodes it in
  its continuous batch (``run_benchmark(prefilled=True)``).

TTFT = arrival to first token (prefill wait and chunks, transfer, decode
admission, the engine's request overhead); TPOT per request as ``vllm bench
serve`` computes it.  Same seed, same numbers.  Nothing here prints.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from typing import Any

from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.stepmodel import StepModel
from servesim.sim.batching import Benchmark, BenchResult, _pct, run_benchmark

__all__ = ["replay_colocated", "simulate_colocated", "simulate_disaggregated"]


def _arrivals(rate: float, n: int, seed: int) -> list[float]:
    """Poisson send times from 0: the running sum of ``random.Random(seed).expovariate(rate)``
    gaps (written out as CPython computes it, ``-log(1 - U) / rate``, the same floats)."""
    u = random.Random(seed).random
    log = math.log
    return list(itertools.accumulate((-log(1.0 - u()) / rate for _ in range(n - 1)), initial=0.0))[:n]


def _summary(ttfts: list[float], tpots: list[float], completed: int, osl: int, duration: float,
             wall: float, batch: float, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "mean_ttft_ms": 1e3 * sum(ttfts) / len(ttfts), "median_ttft_ms": 1e3 * _pct(ttfts, 50),
        "p99_ttft_ms": 1e3 * _pct(ttfts, 99),
        "mean_tpot_ms": 1e3 * sum(tpots) / len(tpots) if tpots else None,
        "p99_tpot_ms": 1e3 * _pct(tpots, 99) if tpots else None,
        "output_throughput": completed * osl / duration, "request_throughput": completed / duration,
        "completed": completed, "decode_batch": batch,
        "sim_requests_per_s": completed / wall if wall > 0 else math.inf, "wall_ms": wall * 1e3, **extra,
    }


def simulate_colocated(sm: StepModel, memory_bytes: float, replicas: int, rate_per_s: float, isl: int,
                       osl: int, *, requests: int = 2000, seed: int = 0) -> dict[str, Any]:
    """``replicas`` colocated engines at ``rate_per_s`` in all (see the module docstring)."""
    n = check_int("replicas", replicas, lo=1, hi=4096)
    rate = check_real("rate", rate_per_s, lo=0.0, lo_open=True)
    total = check_int("requests", requests, lo=n, hi=1_000_000)
    t0 = time.perf_counter()
    arr = _arrivals(rate, total, seed)
    per: list[BenchResult] = []
    for i in range(n):
        mine = arr[i::n]
        bench = Benchmark(isl, osl, rate_per_s=rate / n, num_prompts=len(mine), seed=seed)
        per.append(run_benchmark(sm, bench, memory_bytes, arrival_times=mine,
                                 reserve=sm.engine.name != "vllm"))
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


def simulate_disaggregated(prefill_sm: StepModel, prefill_workers: int, decode_sm: StepModel,
                           decode_memory_bytes: float, decode_workers: int, link_bytes_per_s: float,
                           rate_per_s: float, isl: int, osl: int, *, requests: int = 2000,
                           seed: int = 0, link_contention: bool = False) -> dict[str, Any]:
    """Prefill pool, KV transfer, decode pool at ``rate_per_s`` (see the module docstring).

    ``link_contention``: the transfers share one link, first come first served (a decode
    node's NIC), instead of each having the link to itself as the closed form assumes.
    """
    from servesim.hardware.precision import kv_bytes_of

    pw = check_int("prefill_workers", prefill_workers, lo=1, hi=4096)
    dw = check_int("decode_workers", decode_workers, lo=1, hi=4096)
    rate = check_real("rate", rate_per_s, lo=0.0, lo_open=True)
    total = check_int("requests", requests, lo=dw, hi=1_000_000)
    t0 = time.perf_counter()
    arr = _arrivals(rate, total, seed)
    service = prefill_sm.prompt_s(isl)
    xfer = kv_bytes_of(decode_sm, isl) / link_bytes_per_s
    # FCFS to the first free of pw identical prefill workers: as start times never decrease, the
    # first free is the one that took request k - pw, free at its start + service.
    done_at: list[float] = []  # each request's prefill end
    ready = []
    link_free = 0.0
    for k, a in enumerate(arr):
        sent = max(a, done_at[k - pw] if k >= pw else 0.0) + service
        done_at.append(sent)
        if link_contention:  # FCFS on one link, in prefill-completion order (arrival order here)
            sent = max(sent, link_free)
            link_free = sent + xfer
        ready.append(sent + xfer)
    overhead = prefill_sm.engine.request_overhead_s
    ttfts: list[float] = []
    tpots: list[float] = []
    completed, duration, batch = 0, 0.0, 0.0
    for i in range(dw):
        idx = range(i, total, dw)
        times = sorted(ready[i::dw])
        order = sorted(idx, key=ready.__getitem__)
        bench = Benchmark(isl, osl, rate_per_s=rate / dw, num_prompts=len(idx), seed=seed)
        res = run_benchmark(decode_sm, bench, decode_memory_bytes, arrival_times=times, prefilled=True,
                            reserve=decode_sm.engine.name != "vllm")
        # The decode worker's TTFT is its admission wait after the cache arrived.
        admit = res.mean_ttft_s
        ttfts += [ready[j] - arr[j] + overhead + admit for j in order]
        tpots += [res.mean_tpot_s] * res.completed
        completed += res.completed
        duration = max(duration, times[0] + res.duration_s)  # its last token, since arr[0] = 0
        batch += res.decode_batch / dw
    duration = max(duration, max(ready) - arr[0])
    wall = time.perf_counter() - t0
    return _summary(ttfts, tpots, completed, osl, duration, wall, batch,
                    {"mode": "disagg", "prefill_workers": pw, "decode_workers": dw,
                     "kv_transfer_ms": xfer * 1e3, "prefill_service_ms": service * 1e3})


def replay_colocated(sm: StepModel, memory_bytes: float, replicas: int, arrival_s: list[float],
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
                                 lengths=[ln for _, ln in mine], reserve=sm.engine.name != "vllm"))
    wall = time.perf_counter() - t0
    out_tokens = sum(o for _, (_, o) in keep)
    merged = _merge(per, 1, wall, {"mode": "agg", "replicas": n, "dropped": dropped})
    duration = max(r.duration_s for r in per)
    merged["output_throughput"] = out_tokens / duration
    return merged
