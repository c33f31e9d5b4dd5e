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
beyond the client's seeded lengths and gaps.  Each request's times are numpy arrays, indexed by
its place in send order (a pool of thousands of requests would spend longer building and reading
lists of tuples than in its compiled loop); their sums run left to right, as Python adds a list
(:func:`_sum`), so that every figure is the one a loop over the requests would give, to the bit.
Nothing here prints.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from servesim._checks import ParameterError, check_int, check_real
from servesim.sim.batching import Benchmark, BenchResult, _pct, run_worker, sample_stats
from servesim.sim.client import arrival_times

__all__ = ["FIXED_POINT_ROUNDS", "DisaggResult", "Pool", "run_disaggregated"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

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


def _closed_loop_sends(base: F64, stay: F64, slots: int | None) -> F64:
    """Send times of requests in order: each at its base time once a client slot is free; a slot
    frees when its request ends (its send plus its time in the system)."""
    if slots is None:
        return base.copy()
    free = [0.0] * slots
    out = []
    for b, d in zip(base.tolist(), stay.tolist(), strict=True):
        at = max(b, heapq.heappop(free))
        out.append(at)
        heapq.heappush(free, at + d)
    return np.array(out, np.float64)


@dataclass(frozen=True)
class _Requests:
    """Each request's prompt and output tokens, by index (in send order)."""

    prompt: I64
    output: I64


def _run_pool(pool: Pool, arrivals: F64, lengths: _Requests, seed: int, *, prefilled: bool,
              cold_start_s: float = 0.0) -> tuple[F64, F64, list[BenchResult]]:
    """Each request's first and last token times on ``pool`` (round robin by index), and each
    worker's result; every worker takes its first step at ``cold_start_s``."""
    n = arrivals.shape[0]
    first, last = np.empty(n), np.empty(n)
    results = []
    for w in range(pool.workers):
        mine = np.arange(w, n, pool.workers)
        if not mine.shape[0]:
            continue
        mine = mine[np.argsort(arrivals[mine], kind="stable")]  # in send order; a tie by index
        isl, osl = lengths.prompt[mine], lengths.output[mine]
        bench = Benchmark(isl=int(isl.max()), osl=int(osl.max()), num_prompts=mine.shape[0], seed=seed)
        res, times = run_worker(pool.model, bench, pool.memory_bytes, arrivals[mine], isl, osl,
                                prefilled=prefilled, spec=pool.spec, cold_start_s=cold_start_s)
        at = mine[times.index]
        first[at] = times.first
        last[at] = times.last
        results.append(res)
    return first, last, results


def _transfers(pre_end: F64, xfer: F64, connect_at: float, shared: bool) -> F64:
    """Each cache's arrival at its decode worker: it leaves when its prefill ends (``pre_end``) and
    the link is open (``connect_at``); on a ``shared`` link the transfers also queue first come,
    first served in the order the prefills end, each holding the link for its ``xfer``."""
    if not shared:
        return np.maximum(pre_end, connect_at) + xfer
    out = np.empty(pre_end.shape[0])
    free = 0.0
    ends, times = pre_end.tolist(), xfer.tolist()
    for i in np.argsort(pre_end, kind="stable").tolist():
        free = max(ends[i], connect_at, free) + times[i]
        out[i] = free
    return out


def _unloaded_stay(decode: Pool, bench: Benchmark, lengths: _Requests, unloaded: F64, xfer: F64) -> F64:
    """The closed loop's first guess of each request's time in the system: its unloaded prefill and
    transfer, and ``output - 1`` decode steps at the batch ``C / w_d``; zeros for an open loop."""
    n = lengths.prompt.shape[0]
    if bench.concurrency is None:
        return np.zeros(n)
    b0 = max(1.0, bench.concurrency / decode.workers)
    ctx = _sum(lengths.prompt + lengths.output / 2) / n
    step: float = decode.model.decode_step(b0, ctx).total_s
    return unloaded + xfer + (lengths.output - 1) * step


def _sum(x: F64) -> float:
    """``sum(x)`` as Python adds a list of floats, left to right (numpy's ``sum`` adds pairwise, which
    differs in the last bits); ``+ 0.0`` as Python's ``0 + x[0]`` turns a sum of -0.0 into 0.0."""
    return float(np.add.accumulate(x)[-1]) + 0.0 if x.shape[0] else 0.0


@dataclass(frozen=True)
class _Run:
    """One run of both pools at one set of send times (each request's times, by index)."""

    sends: F64
    pre_first: F64  # the prefill worker's first token (the prefill's end)
    at_decode: F64  # the cache's arrival at the decode worker
    dec_first: F64  # joins the decode batch
    dec_last: F64  # its last token
    results: tuple[list[BenchResult], list[BenchResult]]  # the prefill and the decode workers'


def run_disaggregated(prefill: Pool, decode: Pool, bench: Benchmark, transfer_s: Callable[[int], float], *,
                      lengths: list[tuple[int, int]] | None = None, cold_start_s: float = 0.0,
                      connect_s: float = 0.0, link_contention: bool = False,
                      keep_requests: bool = True) -> DisaggResult:
    """Run ``bench`` against ``prefill`` and ``decode`` pools joined by a link that moves a prompt of
    ``p`` tokens' cache in ``transfer_s(p)`` seconds (see the module docstring).  A fresh deployment
    (``Client.fresh_server``): the prefill workers take their first step at ``cold_start_s`` (the
    engine's cold start, ``run_benchmark``), and the link opens its connections when the first prompt
    is ready to move: no transfer starts before ``connect_s`` after that.  ``link_contention``: the
    transfers share one link, first come first served, instead of each having a link to itself.
    ``keep_requests``: the result's ``requests`` holds each request's times (else empty)."""
    check_real("cold_start_s", cold_start_s, lo=0.0, hi=3600.0)
    check_real("connect_s", connect_s, lo=0.0, hi=3600.0)
    n = bench.prompts
    if lengths is None:
        lengths = bench.lengths()
    if lengths is None:
        req = _Requests(np.full(n, bench.isl, np.int64), np.full(n, bench.osl, np.int64))
    elif len(lengths) != n:
        raise ParameterError("lengths", len(lengths), f"one (prompt, output) pair per prompt ({n})")
    else:
        table = np.array(lengths, np.int64).reshape(n, 2)
        req = _Requests(table[:, 0].copy(), table[:, 1].copy())
    base = (np.array(arrival_times(bench.rate_per_s, bench.client.burstiness, n, bench.seed), np.float64)
            if bench.rate_per_s is not None else np.zeros(n))
    prompts, which = np.unique(req.prompt, return_inverse=True)  # each distinct prompt length priced once
    xfer = np.array([transfer_s(p) for p in prompts.tolist()], np.float64)[which]
    unloaded = np.array([prefill.model.prompt_s(p) for p in prompts.tolist()], np.float64)[which]
    overhead = prefill.model.engine.request_overhead_s
    stay = _unloaded_stay(decode, bench, req, unloaded, xfer)
    pre_len = _Requests(req.prompt, np.ones(n, np.int64))  # a prefill worker's output is the first token

    def run_pools(sends: F64) -> _Run:
        """Both pools at these send times: prefill, the transfer, then decode."""
        pre_end, _, pre_res = _run_pool(prefill, sends, pre_len, bench.seed, prefilled=False,
                                        cold_start_s=cold_start_s)
        at_decode = _transfers(pre_end, xfer, float(pre_end.min()) + connect_s if connect_s else 0.0,
                               link_contention)
        dec_first, dec_last, dec_res = _run_pool(decode, at_decode, req, bench.seed, prefilled=True)
        return _Run(sends, pre_end, at_decode, dec_first, dec_last, (pre_res, dec_res))

    rounds = 0
    sends = _closed_loop_sends(base, stay, bench.concurrency)
    while True:
        rounds += 1
        run = run_pools(sends)
        if bench.concurrency is None or rounds >= FIXED_POINT_ROUNDS:
            break
        stay = (stay + (run.dec_last - sends + overhead)) / 2
        new_sends = _closed_loop_sends(base, stay, bench.concurrency)
        span = max(float(run.dec_last.max()) - float(sends.min()), 1e-9)
        moved = _sum(np.abs(new_sends - sends)) / n
        sends = new_sends
        if moved < _SETTLED * span:
            # one more run at the settled send times, so that every figure is of one consistent run
            run = run_pools(sends)
            break
    return _result(run, bench.warmup, req, unloaded, overhead, prefill.workers, rounds, keep_requests)


def _result(run: _Run, warmup: int, lengths: _Requests, unloaded: F64, overhead: float, prefill_workers: int,
            rounds: int, keep_requests: bool) -> DisaggResult:
    """What the benchmark reports of the requests from ``warmup`` on of ``run``."""
    m = slice(warmup, None)
    sends, pre_first, at_decode, dec_first, dec_last = (
        run.sends[m], run.pre_first[m], run.at_decode[m], run.dec_first[m], run.dec_last[m])
    outputs = lengths.output[m]
    pre_res, dec_res = run.results
    count = sends.shape[0]
    ttfts = dec_first - sends + overhead
    several = outputs > 1
    tpots = (dec_last[several] - dec_first[several]) / (outputs[several] - 1)
    gap_tokens = int((outputs - 1).sum())
    itl_mean = _sum(dec_last - dec_first) / gap_tokens if gap_tokens else math.nan
    duration = max(float(dec_last.max()) - float(sends.min()), 1e-12)
    out_tokens = int(outputs.sum())
    in_tokens = int(lengths.prompt[m].sum())
    dec_time = sum(r.duration_s for r in dec_res)
    notes = tuple(dict.fromkeys(x for r in (*pre_res, *dec_res) for x in r.notes))
    itl_med = [r.median_itl_s for r in dec_res if not math.isnan(r.median_itl_s)]
    itl_p99 = [r.p99_itl_s for r in dec_res if not math.isnan(r.p99_itl_s)]
    itl_std = [r.std_itl_s for r in dec_res if not math.isnan(r.std_itl_s)]
    e2els = dec_last - sends + overhead
    ttft_mean, ttft_median, ttft_p99, ttft_std = sample_stats(ttfts)
    tpot_mean, tpot_median, tpot_p99, tpot_std = sample_stats(tpots)
    e2el_mean, e2el_median, e2el_p99, e2el_std = sample_stats(e2els)
    requests = (tuple(zip(range(run.sends.shape[0]), run.sends.tolist(), run.dec_first.tolist(),
                          run.dec_last.tolist(), strict=True)) if keep_requests else ())
    return DisaggResult(
        mean_ttft_s=ttft_mean, median_ttft_s=ttft_median, p99_ttft_s=ttft_p99, std_ttft_s=ttft_std,
        mean_tpot_s=tpot_mean, median_tpot_s=tpot_median, p99_tpot_s=tpot_p99, std_tpot_s=tpot_std,
        mean_itl_s=itl_mean,
        median_itl_s=_pct(itl_med, 50) if itl_med else math.nan,
        p99_itl_s=max(itl_p99) if itl_p99 else math.nan,
        duration_s=duration, completed=count, total_input_tokens=in_tokens,
        total_output_tokens=out_tokens, output_throughput=out_tokens / duration,
        request_throughput=count / duration,
        mean_prefill_wait_s=_sum(pre_first - sends - unloaded[m]) / count,
        mean_transfer_s=_sum(at_decode - pre_first) / count,
        mean_decode_wait_s=_sum(dec_first - at_decode) / count,
        decode_batch=(sum(r.decode_batch * r.duration_s for r in dec_res) / dec_time) if dec_time else 0.0,
        prefill_busy=min(1.0, _sum(unloaded) / (prefill_workers * duration)),
        preemptions=sum(r.preemptions for r in (*pre_res, *dec_res)), rounds=rounds,
        measured=all(r.measured for r in (*pre_res, *dec_res)), notes=notes, ttfts_s=tuple(ttfts.tolist()),
        std_itl_s=_pct(itl_std, 50) if itl_std else math.nan,
        mean_e2el_s=e2el_mean, median_e2el_s=e2el_median, p99_e2el_s=e2el_p99, std_e2el_s=e2el_std,
        prefill_scheduler=pre_res[0].scheduler if pre_res else {},
        decode_scheduler=dec_res[0].scheduler if dec_res else {},
        requests=requests,
    )
