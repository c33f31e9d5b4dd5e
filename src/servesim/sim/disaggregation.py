"""A disaggregated deployment, step by step: prefill workers, the KV transfer, decode workers.

The one disaggregated simulator on the engine loop: ``predict --mode disagg``
(:func:`servesim.plan.predict.predict_disaggregated`) and ``simulate --model --mode disagg``
(:func:`servesim.sim.engine.simulate_disaggregated`) both run :func:`run_disaggregated`.
(:mod:`servesim.sim.cluster` is not an engine simulator: it checks the lab's closed forms on
nodes of four numbers.)

The same engine loop as a colocated replica (:func:`servesim.sim.batching.run_benchmark`)
runs each worker of each pool with its own step model and scheduler:

* the **router** sends request ``i`` (in send order) to prefill worker ``i mod w_p`` and
  decode worker ``i mod w_d`` (round robin: the default of SGLang's PD router
  ``--policy round_robin`` and of Dynamo's; deterministic, and even on average);
* a **prefill worker** runs the prompt as its engine would (its own chunk budget and
  scheduler) and produces the first token: the request's output there is one token;
* the **KV transfer** starts when the prefill ends and takes ``transfer_s(prompt)``
  (the cache's bytes over the link; an MLA model's latent is much smaller than a GQA
  cache); with ``link_contention`` the transfers share one link, first come first served
  in the order the prefills end;
* a **decode worker** admits the arrived cache when it fits (the prefilled path of the
  engine loop) and decodes the remaining ``output - 1`` tokens in its continuous batch.

TTFT is from the client's send to the request joining a decode batch (the first token,
computed by the prefill worker, reaches the client with the decode worker's first
stream, as SGLang's and Dynamo's disaggregated servers return it), plus the prefill
engine's per-request overhead; TPOT is ``(last - first) / (output - 1)`` on the decode
worker, as ``vllm bench serve`` computes it.

**Closed loop** (``--max-concurrency C``): a client sends its next request when its last
one ends, so the send times depend on the finishes, which depend on the load.  The loop
is solved as a fixed point: from each request's time in the system ``d_i`` (first guess:
its unloaded prefill, transfer and ``output - 1`` decode steps at batch ``C / w_d``), the
client's slots give the send times, the pools are run at them, and the new times in the
system are averaged with the old (damping 1/2) until the mean send time moves less than
0.5% of the run, at most :data:`FIXED_POINT_ROUNDS` rounds.  An open loop (``--request-rate``
without a cap) needs one round.

Deterministic: the router, the fixed point and each worker's loop have no random draw
beyond the client's seeded lengths and gaps.  Standard library only; nothing here prints.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servesim._checks import ParameterError, check_int, check_real
from servesim.sim.batching import Benchmark, BenchResult, _pct, _std, run_benchmark
from servesim.sim.client import arrival_times

__all__ = ["FIXED_POINT_ROUNDS", "DisaggResult", "Pool", "run_disaggregated"]

FIXED_POINT_ROUNDS = 12
"""Most rounds of the closed loop's fixed point (it settles in 3-6 on the shipped cases)."""

_SETTLED = 0.005
"""The fixed point stops when the mean send time moves less than this share of the run."""


@dataclass(frozen=True)
class Pool:
    """``workers`` identical workers, each priced by ``model`` (a step model) on GPUs of
    ``memory_bytes`` each."""

    model: Any
    workers: int
    memory_bytes: float
    spec: Any = None  # a servesim.hardware.speculation.Speculation for a decode pool, or None

    def __post_init__(self) -> None:
        check_int("workers", self.workers, lo=1, hi=4096)


@dataclass(frozen=True)
class DisaggResult:
    """What the benchmark would report of a disaggregated deployment (seconds)."""

    mean_ttft_s: float
    median_ttft_s: float
    p99_ttft_s: float
    std_ttft_s: float
    mean_tpot_s: float
    median_tpot_s: float
    p99_tpot_s: float
    std_tpot_s: float
    mean_itl_s: float
    median_itl_s: float
    p99_itl_s: float
    duration_s: float
    completed: int
    total_input_tokens: int
    total_output_tokens: int
    output_throughput: float
    request_throughput: float
    mean_prefill_wait_s: float  # send to the prefill's end, less the prompt's unloaded prefill
    mean_transfer_s: float  # the prefill's end to the cache's arrival (with a fresh link's connection wait)
    mean_decode_wait_s: float  # the cache's arrival to its joining a decode batch
    decode_batch: float  # time-mean running sequences per decode worker
    prefill_busy: float  # share of the run the prefill workers spend on unloaded prefills
    preemptions: int
    rounds: int  # fixed-point rounds (1: open loop)
    measured: bool
    notes: tuple[str, ...] = field(default=())
    ttfts_s: tuple[float, ...] = field(default=())  # every measured request's TTFT, by index
    std_itl_s: float = math.nan  # the decode workers' median spread (no worker sees another's gaps)
    mean_e2el_s: float = math.nan  # end-to-end latency: sent to last token
    median_e2el_s: float = math.nan
    p99_e2el_s: float = math.nan
    std_e2el_s: float = math.nan
    prefill_scheduler: dict[str, Any] = field(default_factory=dict)
    decode_scheduler: dict[str, Any] = field(default_factory=dict)
    requests: tuple[tuple[int, float, float, float], ...] = ()
    """(index, sent, first token, last token) of every request, by index (as ``BenchResult.requests``)."""


def _closed_loop_sends(base: list[float], stay: list[float], slots: int | None) -> list[float]:
    """Send times of requests in order: each at its base time once a client slot is free; a slot
    frees when its request ends (its send plus its time in the system)."""
    if slots is None:
        return list(base)
    free = [0.0] * slots
    out = []
    for b, d in zip(base, stay, strict=True):
        at = max(b, heapq.heappop(free))
        out.append(at)
        heapq.heappush(free, at + d)
    return out


def _run_pool(pool: Pool, arrivals: list[float], lengths: list[tuple[int, int]], seed: int, *,
              prefilled: bool, cold_start_s: float = 0.0) -> tuple[dict[int, tuple[float, float]],
                                                                  list[BenchResult]]:
    """Each request's (first token, last token) times on ``pool`` (round robin by index), and each
    worker's result; every worker takes its first step at ``cold_start_s``."""
    out: dict[int, tuple[float, float]] = {}
    results = []
    for w in range(pool.workers):
        mine = sorted(range(w, len(arrivals), pool.workers), key=lambda i: (arrivals[i], i))
        if not mine:
            continue
        lens = [lengths[i] for i in mine]
        bench = Benchmark(isl=max(p for p, _ in lens), osl=max(o for _, o in lens), num_prompts=len(mine),
                          seed=seed)
        res = run_benchmark(pool.model, bench, pool.memory_bytes, arrival_times=[arrivals[i] for i in mine],
                            lengths=lens, prefilled=prefilled, keep_requests=True, spec=pool.spec,
                            cold_start_s=cold_start_s)
        for local, _, first, last in res.requests:
            out[mine[local]] = (first, last)
        results.append(res)
    return out, results


def _transfers(pre_end: list[float], xfer: list[float], connect_at: float, shared: bool) -> list[float]:
    """Each cache's arrival at its decode worker: it leaves when its prefill ends (``pre_end``) and
    the link is open (``connect_at``); on a ``shared`` link the transfers also queue first come,
    first served in the order the prefills end, each holding the link for its ``xfer``."""
    if not shared:
        return [max(e, connect_at) + x for e, x in zip(pre_end, xfer, strict=True)]
    out = [0.0] * len(pre_end)
    free = 0.0
    for i in sorted(range(len(pre_end)), key=lambda j: (pre_end[j], j)):
        free = max(pre_end[i], connect_at, free) + xfer[i]
        out[i] = free
    return out


def _unloaded_stay(decode: Pool, bench: Benchmark, lengths: list[tuple[int, int]], unloaded: list[float],
                   xfer: list[float]) -> list[float]:
    """The closed loop's first guess of each request's time in the system: its unloaded prefill and
    transfer, and ``output - 1`` decode steps at the batch ``C / w_d``; zeros for an open loop."""
    n = len(lengths)
    if bench.concurrency is None:
        return [0.0] * n
    b0 = max(1.0, bench.concurrency / decode.workers)
    ctx = sum(p + o / 2 for p, o in lengths) / n
    step = decode.model.decode_step(b0, ctx).total_s
    return [u + x + (o - 1) * step for u, x, (_, o) in zip(unloaded, xfer, lengths, strict=True)]


@dataclass(frozen=True)
class _Run:
    """One run of both pools at one set of send times (each request's times, by index)."""

    sends: list[float]
    pre: dict[int, tuple[float, float]]  # prefill worker: (first token, last token)
    at_decode: list[float]  # the cache's arrival at the decode worker
    dec: dict[int, tuple[float, float]]  # decode worker: (joins the batch, last token)
    results: tuple[list[BenchResult], list[BenchResult]]  # the prefill and the decode workers'


def run_disaggregated(prefill: Pool, decode: Pool, bench: Benchmark, transfer_s: Callable[[int], float], *,
                      lengths: list[tuple[int, int]] | None = None, cold_start_s: float = 0.0,
                      connect_s: float = 0.0, link_contention: bool = False) -> DisaggResult:
    """Run ``bench`` against ``prefill`` and ``decode`` pools joined by a link that moves a prompt of
    ``p`` tokens' cache in ``transfer_s(p)`` seconds (see the module docstring).  A fresh deployment
    (``Client.fresh_server``): the prefill workers take their first step at ``cold_start_s`` (the
    engine's cold start, ``run_benchmark``), and the link opens its connections when the first prompt
    is ready to move: no transfer starts before ``connect_s`` after that.  ``link_contention``: the
    transfers share one link, first come first served, instead of each having a link to itself."""
    check_real("cold_start_s", cold_start_s, lo=0.0, hi=3600.0)
    check_real("connect_s", connect_s, lo=0.0, hi=3600.0)
    n = bench.prompts
    if lengths is None:
        lengths = bench.lengths() or [(bench.isl, bench.osl)] * n
    if len(lengths) != n:
        raise ParameterError("lengths", len(lengths), f"one (prompt, output) pair per prompt ({n})")
    base = (arrival_times(bench.rate_per_s, bench.client.burstiness, n, bench.seed)
            if bench.rate_per_s is not None else [0.0] * n)
    prompts = {p for p, _ in lengths}  # each distinct prompt length priced once
    xfer_of = {p: transfer_s(p) for p in prompts}
    unloaded_of = {p: prefill.model.prompt_s(p) for p in prompts}
    xfer = [xfer_of[p] for p, _ in lengths]
    unloaded = [unloaded_of[p] for p, _ in lengths]
    overhead = prefill.model.engine.request_overhead_s
    stay = _unloaded_stay(decode, bench, lengths, unloaded, xfer)
    pre_len = [(p, 1) for p, _ in lengths]  # a prefill worker's output is the first token

    def run_pools(sends: list[float]) -> _Run:
        """Both pools at these send times: prefill, the transfer, then decode."""
        pre, pre_res = _run_pool(prefill, sends, pre_len, bench.seed, prefilled=False,
                                 cold_start_s=cold_start_s)
        pre_end = [pre[i][0] for i in range(n)]
        at_decode = _transfers(pre_end, xfer, min(pre_end) + connect_s if connect_s else 0.0,
                               link_contention)
        dec, dec_res = _run_pool(decode, at_decode, lengths, bench.seed, prefilled=True)
        return _Run(sends, pre, at_decode, dec, (pre_res, dec_res))

    rounds = 0
    sends = _closed_loop_sends(base, stay, bench.concurrency)
    while True:
        rounds += 1
        run = run_pools(sends)
        if bench.concurrency is None or rounds >= FIXED_POINT_ROUNDS:
            break
        new_stay = [run.dec[i][1] - sends[i] + overhead for i in range(n)]
        stay = [(a + b) / 2 for a, b in zip(stay, new_stay, strict=True)]
        new_sends = _closed_loop_sends(base, stay, bench.concurrency)
        span = max(max(run.dec[i][1] for i in range(n)) - min(sends), 1e-9)
        moved = sum(abs(a - b) for a, b in zip(new_sends, sends, strict=True)) / n
        sends = new_sends
        if moved < _SETTLED * span:
            # one more run at the settled send times, so that every figure is of one consistent run
            run = run_pools(sends)
            break
    return _result(run, [i for i in range(n) if i >= bench.warmup], lengths, unloaded, overhead,
                   prefill.workers, rounds)


def _result(run: _Run, measured: list[int], lengths: list[tuple[int, int]], unloaded: list[float],
            overhead: float, prefill_workers: int, rounds: int) -> DisaggResult:
    """What the benchmark reports of the ``measured`` requests of ``run``."""
    sends, pre, at_decode, dec = run.sends, run.pre, run.at_decode, run.dec
    pre_res, dec_res = run.results
    ttfts = [dec[i][0] - sends[i] + overhead for i in measured]
    tpots = [(dec[i][1] - dec[i][0]) / (lengths[i][1] - 1) for i in measured if lengths[i][1] > 1]
    gap_tokens = sum(lengths[i][1] - 1 for i in measured)
    itl_mean = (sum(dec[i][1] - dec[i][0] for i in measured) / gap_tokens) if gap_tokens else math.nan
    start = min(sends[i] for i in measured)
    end = max(dec[i][1] for i in measured)
    duration = max(end - start, 1e-12)
    out_tokens = sum(lengths[i][1] for i in measured)
    in_tokens = sum(lengths[i][0] for i in measured)
    dec_time = sum(r.duration_s for r in dec_res)
    notes = tuple(dict.fromkeys(x for r in (*pre_res, *dec_res) for x in r.notes))
    itl_med = [r.median_itl_s for r in dec_res if not math.isnan(r.median_itl_s)]
    itl_p99 = [r.p99_itl_s for r in dec_res if not math.isnan(r.p99_itl_s)]
    itl_std = [r.std_itl_s for r in dec_res if not math.isnan(r.std_itl_s)]
    e2els = [dec[i][1] - sends[i] + overhead for i in measured]
    return DisaggResult(
        mean_ttft_s=sum(ttfts) / len(ttfts), median_ttft_s=_pct(ttfts, 50), p99_ttft_s=_pct(ttfts, 99),
        std_ttft_s=_std(ttfts),
        mean_tpot_s=sum(tpots) / len(tpots) if tpots else math.nan, median_tpot_s=_pct(tpots, 50),
        p99_tpot_s=_pct(tpots, 99), std_tpot_s=_std(tpots), mean_itl_s=itl_mean,
        median_itl_s=_pct(itl_med, 50) if itl_med else math.nan,
        p99_itl_s=max(itl_p99) if itl_p99 else math.nan,
        duration_s=duration, completed=len(measured), total_input_tokens=in_tokens,
        total_output_tokens=out_tokens, output_throughput=out_tokens / duration,
        request_throughput=len(measured) / duration,
        mean_prefill_wait_s=sum(pre[i][0] - sends[i] - unloaded[i] for i in measured) / len(measured),
        mean_transfer_s=sum(at_decode[i] - pre[i][0] for i in measured) / len(measured),
        mean_decode_wait_s=sum(dec[i][0] - at_decode[i] for i in measured) / len(measured),
        decode_batch=(sum(r.decode_batch * r.duration_s for r in dec_res) / dec_time) if dec_time else 0.0,
        prefill_busy=min(1.0, sum(unloaded) / (prefill_workers * duration)),
        preemptions=sum(r.preemptions for r in (*pre_res, *dec_res)), rounds=rounds,
        measured=all(r.measured for r in (*pre_res, *dec_res)), notes=notes, ttfts_s=tuple(ttfts),
        std_itl_s=_pct(itl_std, 50) if itl_std else math.nan,
        mean_e2el_s=sum(e2els) / len(e2els), median_e2el_s=_pct(e2els, 50), p99_e2el_s=_pct(e2els, 99),
        std_e2el_s=_std(e2els),
        prefill_scheduler=pre_res[0].scheduler if pre_res else {},
        decode_scheduler=dec_res[0].scheduler if dec_res else {},
        requests=tuple((i, sends[i], dec[i][0], dec[i][1]) for i in range(len(sends))),
    )
