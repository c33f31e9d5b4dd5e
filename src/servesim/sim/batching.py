"""A serving benchmark, step by step: the client, the engine's scheduler and the step pricer.

Three rooms joined by one short loop:

* the **client** (:mod:`servesim.sim.client`) says what requests are sent, with
  which prompt and output lengths, and when: every request at once gated by
  ``max_concurrency`` client slots (a closed loop: a client sends its next request
  when its last one ends), or at a ``request_rate`` with gamma gaps, or both;
* the **scheduler** (:mod:`servesim.sim.schedulers`, one module per engine) decides
  what runs in each step: which decoding sequences step, which prefill chunks run,
  whom to preempt;
* the **pricer** (:class:`servesim.hardware.pricer.Pricer`) says how long the
  step takes on the replica's GPUs; with speculation each decoding sequence runs
  ``k + 1`` positions and ``k`` draft steps are added, and each sequence accepts its
  own drafts, drawn i.i.d. with the preset's alpha (``E[n]`` tokens per step on
  average).

A prompt whose last chunk ran yields its first token at the end of that step
(TTFT); a sequence that reached its output length leaves.  Stretches of pure decode
between events are advanced in one move when the scheduler allows (its
``quiet_steps``): the step time is priced at the stretch's mean context, exact for
the decode attention, which is linear in context.  Step prices are cached, keyed on
the batch and on contexts rounded to 7 significant bits (within 1.6%).

Metrics follow ``vllm bench serve``: TTFT per request from when it was sent
(queueing, waiting for chunks, the prefill itself and the engine's per-request
overhead, see :mod:`servesim.hardware.engines`), TPOT per request ``(e2e - TTFT) /
(output - 1)``, ITL the mean gap between tokens over all tokens, throughput over the
benchmark's duration (first request sent to last token received).  ``warmup``
leaves the first requests out of every statistic, as tools that measure in a
steady-state window (genai-perf, AIPerf) do; the default 0 counts all, as ``vllm
bench serve`` does (its own ``--num-warmups`` run before the measured requests, see
:mod:`servesim.sim.client`).

Deterministic: every tie is broken by send order.  The reference loop
(:mod:`servesim.sim.loop`) is standard library only; :func:`run_benchmark` runs the same loop
compiled with numba (:mod:`servesim.sim._engine_loop`, imported only then) where that pays, with
the same result to the last bit (``loop``, :data:`LOOPS`); :func:`run_worker` is the same run
with its inputs and each request's times as numpy arrays (a disaggregated pool's worker).
Nothing here prints.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import operator
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from servesim._checks import ParameterError, check_bound, check_int, check_real
from servesim.hardware.ops import StepPrice
from servesim.hardware.pricer import Pricer
from servesim.hardware.speculation import Speculation
from servesim.sim import loop as _loop
from servesim.sim.client import Client, arrival_times, draw_lengths
from servesim.sim.frontend import serve_loop, settle
from servesim.sim.schedulers import SCHEDULERS, EngineState, Scheduler, make_scheduler
from servesim.sim.schedulers.base import Options, core_tag, list_column

__all__ = ["LOOPS", "BenchResult", "Benchmark", "Speculation", "WorkerTimes", "run_benchmark", "run_worker"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Benchmark:
    """A serving benchmark run as a client sends it (see :mod:`servesim.sim.client`).

    ``concurrency`` is the client's ``--max-concurrency`` and ``rate_per_s`` its
    ``--request-rate`` (None: ``inf``, every request at once); either, both or
    neither may be given.  ``isl`` and ``osl`` are the nominal lengths
    (``--random-input-len``, ``--random-output-len``), drawn per request as the
    client's ``--random-range-ratio`` says.
    """

    isl: int
    osl: int
    concurrency: int | None = None
    rate_per_s: float | None = None
    num_prompts: int | None = None  # default: 10 x concurrency (at least 50 for vllm/sglang), or 500
    seed: int = 0
    warmup: int = 0  # first requests left out of the statistics (0: all count, as vllm bench serve)
    client: Client = field(default_factory=Client)

    def __post_init__(self) -> None:
        check_int("isl", self.isl, lo=1, hi=10_000_000)
        check_int("osl", self.osl, lo=1, hi=10_000_000)
        # the flags' ranges (_checks.BOUNDS); below 1e-6 req/s, float clocks lose the step times
        if self.concurrency is not None:
            check_bound("concurrency", self.concurrency)
        if self.rate_per_s is not None:
            check_bound("rate", self.rate_per_s)
        if self.num_prompts is not None:
            check_bound("num_prompts", self.num_prompts)
        check_int("warmup", self.warmup, lo=0, hi=self.prompts - 1)
        if not isinstance(self.client, Client):
            raise ParameterError("client", self.client, "a servesim.sim.client.Client")
        w = self.client.warmups(self.concurrency)
        if w > self.prompts:
            raise ParameterError("num_warmups", w, f"at most the prompts ({self.prompts})")

    @property
    def prompts(self) -> int:
        """Measured requests: ``num_prompts``, else 10 per client (InferenceMAX's 10 x C; at least
        50 for the other tools, whose own default of 1,000 costs more than it tells), else 500."""
        if self.num_prompts is not None:
            return self.num_prompts
        if self.concurrency is not None:
            c = 10 * self.concurrency
            return c if self.client.name == "inferencemax" else max(50, c)
        return 500

    @property
    def warmups(self) -> int:
        """Warm-up requests the client sends before the measured ones (not simulated)."""
        return self.client.warmups(self.concurrency)

    def lengths(self) -> list[tuple[int, int]] | None:
        """Each request's (prompt, output) tokens as the client draws them; None: all ``isl``/``osl``."""
        return draw_lengths(self.client, self.isl, self.osl, self.prompts, self.seed)

    def mean_lengths(self) -> tuple[float, float]:
        return self.client.mean_lengths(self.isl, self.osl)


@dataclass(frozen=True)
class BenchResult:
    """What the benchmark would report (times in seconds; see the module docstring)."""

    mean_ttft_s: float
    median_ttft_s: float
    p99_ttft_s: float
    mean_tpot_s: float
    median_tpot_s: float
    p99_tpot_s: float
    mean_itl_s: float
    output_throughput: float  # tokens/s
    request_throughput: float  # req/s
    duration_s: float
    decode_batch: float  # time-mean of decoding sequences per step
    completed: int
    preemptions: int
    steps: int
    kv_capacity_tokens: int
    measured: bool
    notes: tuple[str, ...] = field(default=())
    std_ttft_s: float = math.nan
    std_tpot_s: float = math.nan
    median_itl_s: float = math.nan  # over every gap between two tokens of a sequence
    p99_itl_s: float = math.nan
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    scheduler: dict[str, Any] = field(default_factory=dict)
    std_itl_s: float = math.nan
    mean_e2el_s: float = math.nan  # end-to-end latency: sent to last token
    median_e2el_s: float = math.nan
    p99_e2el_s: float = math.nan
    std_e2el_s: float = math.nan
    ttfts_s: tuple[float, ...] = ()  # every measured request's TTFT, in send order of their first tokens
    requests: tuple[tuple[int, float, float, float], ...] = ()
    """With ``keep_requests``: (index, sent, first token, last token) of every request, in finishing
    order (times in seconds from the run's start; the index is the request's place in send order)."""


def _q(x: float) -> int:
    """``x`` rounded down to its 7 leading bits (exact below 128; within 1/64 above)."""
    n = int(x)
    if n < 128:
        return n
    shift = n.bit_length() - 7
    return (n >> shift) << shift


def _pct(xs: list[float], q: float) -> float:
    """The q-th percentile with linear interpolation (numpy's default)."""
    return _pct_sorted(sorted(xs), q)


def _pct_sorted(s: list[float], q: float) -> float:
    """:func:`_pct` of values already sorted."""
    if not s:
        return math.nan
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _gap_stats(gaps: list[float], tokens: list[float]) -> tuple[float, float, float]:
    """The median, 99th percentile and population standard deviation of the gaps between tokens
    ``gaps`` (distinct), each held by ``tokens[i]`` tokens (NaN: none): a percentile is the first gap
    in sorted order whose running count of tokens reaches q% of them all (the lower value at a tie);
    the running counts and the sums add left to right, the sums in the order given (the run's)."""
    total = sum(tokens)
    if total <= 0:
        return math.nan, math.nan, math.nan
    order = sorted(range(len(gaps)), key=gaps.__getitem__)
    held = list(itertools.accumulate(tokens[i] for i in order))  # non-decreasing: counts are >= 0
    pct = []
    for q in (50, 99):
        i = bisect.bisect_left(held, total * q / 100.0)
        pct.append(gaps[order[i]] if i < len(held) else max(gaps))  # past the end: rounding at q = 100
    mean = sum(map(operator.mul, gaps, tokens)) / total
    spread = sum(map(operator.mul, tokens, [(v - mean) ** 2 for v in gaps]))
    return pct[0], pct[1], math.sqrt(spread / total)


def _std(xs: list[float]) -> float:
    """Population standard deviation (numpy's default, as vllm bench serve reports)."""
    if not xs:
        return math.nan
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


LOOPS = ("auto", "compiled", "python")
"""How :func:`run_benchmark` runs its loop: numba-compiled (:mod:`servesim.sim._engine_loop`, the
same result to the last bit, for the shipped policies) or the Python reference; ``auto``
compiles where it pays (see :data:`AUTO_COMPILE_REQUESTS`)."""

AUTO_COMPILE_REQUESTS = 200_000
"""``loop="auto"`` runs the compiled loop once the process has simulated this many requests
(counting the run at hand) and numba's disk cache holds the kernels, or has the compiled loop
imported already: its first call in a process then costs about a second (importing numba and
loading the kernels), what the Python loop takes for about 4 x 10^4 requests; past 2 x 10^5 that
second is repaid (a confirmed plan's workers, which simulate fewer, stay in Python: 1.6 s
against 1.9-2.3 s with the load)."""

AUTO_COMPILE_COLD_REQUESTS = 600_000
"""Without the kernels in numba's disk cache, compiling them costs ~15 s, what the Python loop
takes for about 6 x 10^5 requests: ``loop="auto"`` compiles (and caches them) only past this many
requests in the process, so a first ``plan`` or ``predict`` on a fresh install is not slowed by it."""


_CACHED_CORES: dict[type, bool] = {}


def _kernels_cached(policy: type[Scheduler] | None = None) -> bool:
    """Whether numba's on-disk cache beside :mod:`servesim.sim._engine_loop` (or in
    ``NUMBA_CACHE_DIR``) holds the loop's core compiled for the class ``policy`` (None: for every
    shipped policy) from the current sources (its index file, named by
    :func:`servesim.sim.schedulers.base.core_tag`).  Looked up once a process per class: past that,
    ``run_benchmark`` would search the folder on every run."""
    if policy is None:
        return all(_kernels_cached(cls) for cls in SCHEDULERS.values())
    got = _CACHED_CORES.get(policy)
    if got is not None:
        return got
    here = Path(__file__).with_name("__pycache__")
    where = [here] + ([Path(os.environ["NUMBA_CACHE_DIR"])] if os.environ.get("NUMBA_CACHE_DIR") else [])
    pattern = f"loop.core_{core_tag(policy)}-*.nbi"
    found = False
    for d in where:
        try:
            if any(d.rglob(pattern)):
                found = True
                break
        except OSError:  # pragma: no cover - an unreadable cache folder: not cached
            continue
    _CACHED_CORES[policy] = found
    return found


_POLICY_HOOKS = ("schedule", "after_step", "quiet_steps", "prepare")
_simulated = 0  # requests run_benchmark has simulated in this process (for loop="auto")


def run_benchmark(model: Pricer, bench: Benchmark, memory_bytes: float, *,
                  spec: Speculation | None = None, reserve: bool = False,
                  max_steps: int = 5_000_000, arrival_times: list[float] | None = None,
                  prefilled: bool = False, lengths: list[tuple[int, int]] | None = None,
                  scheduler: Scheduler | str | None = None, keep_requests: bool = False,
                  loop: str = "auto", cold_start_s: float = 0.0,
                  overhead_s: float | None = None) -> BenchResult:
    """Run ``bench`` against one replica priced by ``model`` (see the module docstring).

    ``scheduler`` is a policy or an engine's name (default: the step model's engine,
    with its options); ``reserve`` makes vLLM's policy admit only what fits whole.
    ``arrival_times`` (sorted, one per prompt) replaces the client's send times;
    ``prefilled`` makes every request arrive with its prompt's KV cache already
    computed (a decode worker of a disaggregated deployment): it joins the decode
    batch as soon as its cache fits, and its TTFT is the wait for that.
    ``lengths`` gives each request's (prompt, output) tokens, in send order (a
    trace); without it the client draws them.  ``keep_requests`` keeps each request's
    times in :attr:`BenchResult.requests` (:func:`run_worker` hands them on as arrays).
    ``loop`` is one of :data:`LOOPS`: ``"compiled"`` runs the
    numba-compiled loop, which gives the same result as ``"python"``, the reference loop,
    bit for bit; a policy it does not know (not one of the shipped classes, or with a method
    replaced on the instance) runs in Python.  ``"auto"`` (default) compiles where it pays.
    ``cold_start_s``: the engine takes no step before this time (a freshly started server compiling
    the kernels of shapes its own warm-up did not run, ``EngineProfile.cold_start_s``); requests
    sent meanwhile wait, and their TTFT counts the wait.
    ``overhead_s``: the client sees every token this much later (default: the engine's
    ``request_overhead_s`` plus, for an engine with a serving loop, that loop's wait at the run's
    throughput, :func:`servesim.sim.frontend.settle`, which runs the benchmark again: not with a
    policy instance given as ``scheduler``, whose state a second run would inherit).
    """
    if loop not in LOOPS:
        raise ParameterError("loop", loop, f"one of {', '.join(LOOPS)}")
    check_real("cold_start_s", cold_start_s, lo=0.0, hi=3600.0)
    serve = (None if overhead_s is not None or prefilled or isinstance(scheduler, Scheduler)
             else serve_loop(model.engine, bench.client.name))
    policy = _policy(model, scheduler, reserve)
    capacity = model.kv_capacity_tokens(memory_bytes)
    given = lengths
    lengths = _checked_lengths(bench, lengths, prefilled, capacity, policy)
    sends, slots = _client_sends(bench, arrival_times)
    # the client's own send times and lengths are Python floats and ints: only what a caller gives is
    # looked at
    compiled = _compiled_loop(loop, policy, bench.prompts) and _compiles(policy, bench, spec) and _plain(
        [] if arrival_times is None else sends, given)
    n_total = bench.prompts
    columns: tuple[Any, Any, Any]
    if compiled:  # the compiled loop's columns, as arrays at once
        if lengths is None:
            isl, osl = np.full(n_total, bench.isl, np.int64), np.full(n_total, bench.osl, np.int64)
        else:
            table = np.array(lengths, np.int64).reshape(n_total, 2)
            isl, osl = table[:, 0].copy(), table[:, 1].copy()
        columns = (np.array(sends, np.float64), isl, osl)
    else:
        columns = (sends, [bench.isl] * n_total if lengths is None else [p for p, _ in lengths],
                   [bench.osl] * n_total if lengths is None else [o for _, o in lengths])
    out = _simulate(model, bench, capacity, policy, columns, slots, spec=spec,
                    max_steps=max_steps, prefilled=prefilled, keep=keep_requests, compiled=compiled,
                    cold_start_s=cold_start_s, overhead_s=overhead_s)
    kept_i, kept_f = out.kept_i, out.kept_f
    if compiled:
        kept_i, kept_f = cast(I64, kept_i).tolist(), cast(F64, kept_f).tolist()
    k = out.n_kept
    requests = tuple(zip(kept_i[:k], kept_f[0:3 * k:3], kept_f[1:3 * k:3], kept_f[2:3 * k:3], strict=True))
    res = _result(out, capacity, policy, requests)
    if serve is None:
        return res

    def again(o: float) -> BenchResult:  # the same run with the serving loop's wait settled at o
        return run_benchmark(model, bench, memory_bytes, spec=spec, reserve=reserve, max_steps=max_steps,
                             arrival_times=arrival_times, prefilled=prefilled, lengths=given,
                             scheduler=scheduler, keep_requests=keep_requests, loop=loop,
                             cold_start_s=cold_start_s, overhead_s=o)
    o, settled = settle(again, res, model.engine.request_overhead_s, serve, closed=slots is not None)
    wait = o - model.engine.request_overhead_s
    if wait < NOTE_SERVING_LOOP_S:
        return settled
    note = serve.note(model.engine.description or model.engine.name, settled.output_throughput,
                      settled.request_throughput, wait)
    return dataclasses.replace(settled, notes=(*settled.notes, note))


NOTE_SERVING_LOOP_S = 1e-3
"""A serving loop's wait (:mod:`servesim.sim.frontend`) a run's notes name from this long."""


@dataclass(frozen=True)
class WorkerTimes:
    """Each request's times in a run of :func:`run_worker`, in finishing order: its place in send
    order (``index``), when it was sent, its first and its last token (seconds from the run's start)."""

    index: I64
    sent: F64
    first: F64
    last: F64


def run_worker(model: Pricer, bench: Benchmark, memory_bytes: float, sends: F64, isl: I64, osl: I64, *,
               prefilled: bool, spec: Speculation | None = None, cold_start_s: float = 0.0,
               loop: str = "auto") -> tuple[BenchResult, WorkerTimes]:
    """One worker of a disaggregated deployment's pool: :func:`run_benchmark` of ``bench`` with
    ``arrival_times`` ``sends`` and ``lengths`` ``zip(isl, osl)`` (the step model's own engine and
    scheduler, the requests kept), given and given back as arrays: the report (its ``requests``
    empty) and each request's times.  The same run as ``run_benchmark``'s, to the bit; the arrays go
    to the compiled loop as they are (a pool of thousands of requests would otherwise spend longer
    turning lists into arrays and back than in its loop)."""
    if loop not in LOOPS:
        raise ParameterError("loop", loop, f"one of {', '.join(LOOPS)}")
    check_real("cold_start_s", cold_start_s, lo=0.0, hi=3600.0)
    n_total = bench.prompts
    if not sends.shape[0] == isl.shape[0] == osl.shape[0] == n_total:
        raise ParameterError("arrival_times", sends.shape[0], f"one per prompt ({n_total}), as many lengths")
    policy = _policy(model, None, False)
    capacity = model.kv_capacity_tokens(memory_bytes)
    _check_fits(bench, capacity, policy, prefilled, int((isl + osl).max()), int(isl.max()))
    compiled = _compiled_loop(loop, policy, n_total) and _compiles(policy, bench, spec)
    columns: tuple[Any, Any, Any] = (np.ascontiguousarray(sends, np.float64),
                                     np.ascontiguousarray(isl, np.int64), np.ascontiguousarray(osl, np.int64))
    if not compiled:  # the Python loop's columns are lists (of Python numbers, as its results' types)
        columns = tuple(c.tolist() for c in columns)
    out = _simulate(model, bench, capacity, policy, columns, None, spec=spec, max_steps=5_000_000,
                    prefilled=prefilled, keep=True, compiled=compiled, cold_start_s=cold_start_s)
    k = out.n_kept
    kf = np.asarray(out.kept_f, np.float64)[:3 * k]
    times = WorkerTimes(np.asarray(out.kept_i, np.int64)[:k], kf[0::3], kf[1::3], kf[2::3])
    return _result(out, capacity, policy, ()), times


def _policy(model: Pricer, scheduler: Scheduler | str | None, reserve: bool) -> Scheduler:
    """The run's scheduler policy: ``scheduler``, or the policy of its name or of the step model's
    engine, with the engine's options."""
    if scheduler is not None and not isinstance(scheduler, str):
        return scheduler
    eng = model.engine
    name = scheduler or eng.name
    options: Options | None = {"reserve": True} if reserve and SCHEDULERS[name].takes_reserve else None
    return make_scheduler(name, eng, options)


def _compiled_loop(loop: str, policy: Scheduler, requests: int) -> bool:
    """Whether a run of ``requests`` requests asks for the compiled loop (``loop``, or where it pays
    for ``"auto"``); counts the requests for ``"auto"``."""
    global _simulated
    _simulated += requests
    if loop == "auto":
        loop = "compiled" if ("servesim.sim._engine_loop" in sys.modules
                              or (_simulated >= AUTO_COMPILE_REQUESTS and _kernels_cached(type(policy)))
                              or _simulated >= AUTO_COMPILE_COLD_REQUESTS) else "python"
    return loop == "compiled"


def _simulate(model: Pricer, bench: Benchmark, capacity: int, policy: Scheduler,
              columns: tuple[Any, Any, Any], slots: int | None, *, spec: Speculation | None, max_steps: int,
              prefilled: bool, keep: bool, compiled: bool, cold_start_s: float,
              overhead_s: float | None = None) -> _Outcome:
    """The books, the loop's state and the run: ``columns`` are the send times and each request's
    prompt and output tokens (lists for the Python loop; lists or arrays for the compiled one)."""
    eng = model.engine
    pos = 1 + (spec.k if spec else 0)
    per_step = spec.tokens_per_step if spec else 1.0
    column: Callable[[float, int], Any] = list_column
    if compiled:
        from servesim.sim import _engine_loop  # lazy: once loaded, loop='auto' compiles (_compiled_loop)

        column = _engine_loop.column
    s = EngineState(capacity, eng.max_num_seqs, eng.max_num_batched_tokens, pos, per_step, bench.prompts,
                    spec.k if spec else -1, spec.alpha if spec else 0.0, bench.seed + 1, column)
    s.ranks = eng.dp_ranks
    s.chunk_cap = eng.chunk_tokens or eng.max_num_batched_tokens
    policy.prepare(s)
    sends, isls, osls = columns
    L = _loop.LoopState(s, sends, slots, isls, osls, warmup=bench.warmup, max_steps=max_steps,
                        prefilled=prefilled, keep=keep,
                        overhead_s=eng.request_overhead_s if overhead_s is None else overhead_s,
                        spec_add_s=spec.k * spec.draft_step_s if spec else 0.0,
                        prefilled_watermark=_PREFILLED_WATERMARK, recv_every=policy.recv_interval(),
                        clock_start_s=float(cold_start_s), late=eng.overlap, column=column)

    # a copy of a step model with another engine profile (its host time, say) shares the original's
    # caches: the profile is part of every key
    kv_key = (pos, model.kv_context, eng)
    return _run(s, L, policy, _price_table(model, kv_key, compiled), _step_pricer(model, kv_key, pos),
                compiled, bench.concurrency)


def _checked_lengths(bench: Benchmark, lengths: list[tuple[int, int]] | None, prefilled: bool,
                     capacity: int, policy: Scheduler) -> list[tuple[int, int]] | None:
    """Each request's (prompt, output) tokens: ``lengths`` as given, else the client's draws (none
    for a prefilled decode worker), checked against the prompts' count, the KV cache's ``capacity``
    and the policy's own limit on a prompt."""
    n_total = bench.prompts
    if lengths is None and not prefilled:
        lengths = bench.lengths()
    if lengths is not None and len(lengths) != n_total:
        raise ParameterError("lengths", len(lengths), f"one (prompt, output) pair per prompt ({n_total})")
    _check_fits(bench, capacity, policy, prefilled, max(p + o for p, o in lengths) if lengths else None,
                max(p for p, _ in lengths) if lengths else None)
    return lengths


def _check_fits(bench: Benchmark, capacity: int, policy: Scheduler, prefilled: bool, longest: int | None,
                longest_prompt: int | None) -> None:
    """The longest request (prompt and output; None: ``bench``'s own) fits the KV cache's
    ``capacity``, and the longest prompt the policy's own limit on a prompt."""
    if longest is not None and longest > capacity:
        raise ParameterError("lengths", longest, f"at most {capacity} tokens per request (prompt + "
                             "output): what the KV cache of this replica holds")
    isl = bench.isl
    if capacity < isl + 1:
        raise ParameterError("isl", isl, f"at most {max(0, capacity - 1)}: the KV cache of this replica "
                             f"holds {capacity} tokens after the weights")
    check = getattr(policy, "check_prompt", None)
    if check is not None and not prefilled:
        check(isl if longest_prompt is None else longest_prompt)


def _client_sends(bench: Benchmark, arrival_times: list[float] | None) -> tuple[list[float], int | None]:
    """The client: send times (all 0 when every request goes at once) and its slots (None where
    ``arrival_times``, one a prompt, replace its own)."""
    n_total = bench.prompts
    if arrival_times is not None:
        if len(arrival_times) != n_total:
            raise ParameterError("arrival_times", len(arrival_times), f"one per prompt ({n_total})")
        return list(arrival_times), None
    sends = _arrivals(bench) if bench.rate_per_s is not None else [0.0] * n_total
    return sends, bench.concurrency


def _step_pricer(model: Pricer, kv_key: tuple[object, ...],
                 pos: int) -> Callable[[int, int, tuple[tuple[int, int, bool], ...]], StepPrice]:
    """The loop's cached pricer of a step. Step prices are shared by every run on the same step model
    (a plan's confirmation runs one deployment at many rates), in the pricer's own slot for them
    (:class:`~servesim.hardware.ops.PriceCache`): by what the price depends on besides the step
    (``kv_key``: the positions a sequence scores, the KV context, the engine profile), then by the
    step; at most :data:`_PRICE_CACHE_MAX` of them when a run starts, and as many more in the run."""
    books = model.price_cache.steps
    if sum(map(len, books.values())) >= _PRICE_CACHE_MAX:
        books.clear()
    prices = books.get(kv_key)
    if prices is None:
        prices = books[kv_key] = {}
    price = model.step_price

    def price_of(b: int, qctx: int, chunks: tuple[tuple[int, int, bool], ...]) -> StepPrice:
        """The cached price of a step of ``b`` decoding sequences at (rounded) context ``qctx`` and
        the prefill ``chunks`` (tokens, rounded cached context, samples)."""
        key = (b, qctx, *chunks) if chunks else (b, qctx)
        hit = prices.get(key)
        if hit is None:
            hit = price(b, qctx, chunks, pos if b > 0 else 1)
            if len(prices) >= _PRICE_CACHE_MAX:
                prices.clear()
            prices[key] = hit
        return hit

    return price_of


def _compiles(policy: Scheduler, bench: Benchmark, spec: Speculation | None) -> bool:
    """Whether the compiled loop reproduces this run: a policy with none of its methods replaced on
    the instance (the compiled loop compiles its class's), and settings of the plain Python types (a
    numpy scalar or an int where the loop expects a float would carry its type into the Python
    loop's results)."""
    if any(m in vars(policy) for m in _POLICY_HOOKS):
        return False
    if type(bench.isl) is not int or type(bench.osl) is not int or type(bench.warmup) is not int:
        return False
    return spec is None or (type(spec.k) is int and type(spec.alpha) is float
                            and type(spec.draft_step_s) is float)


def _plain(sends: list[float], lengths: list[tuple[int, int]] | None) -> bool:
    """Whether the send times are Python floats and the lengths Python ints (as :func:`_compiles`)."""
    if lengths is not None and set(map(type, itertools.chain.from_iterable(lengths))) != {int}:
        return False
    return set(map(type, sends)) <= {float}


def _too_many_steps(n_total: int, max_steps: int) -> ParameterError:
    return ParameterError("num_prompts", n_total, f"small enough to finish in {max_steps} engine steps")


def _nothing_fits(concurrency: int | None) -> ParameterError:
    return ParameterError("concurrency", concurrency, "small enough that one request fits in the KV cache")


@dataclass
class _Outcome:
    """What a run of the loop (either one) leaves for the result: its statistics' raw material."""

    ttfts: list[float]
    ttft_stats: tuple[float, float, float, float]  # mean, median, p99, std (see _mean_pct_std)
    tpot_stats: tuple[float, float, float, float]
    e2el_stats: tuple[float, float, float, float]
    totals: _loop.Totals
    notes: dict[str, None]
    preemptions: int
    median_itl_s: float
    p99_itl_s: float
    std_itl_s: float
    kept_i: list[int] | I64  # the kept requests' places in send order (lists from the Python loop)
    kept_f: list[float] | F64  # (sent, first token, last token) of each
    n_kept: int


class _PriceTable:
    """The step prices one mode of the loop keeps for a step model at one ``kv_key``: the table
    (:class:`servesim.sim.loop.Prices`, compiled or not), each entry's notes, the runs so far."""

    def __init__(self, compiled: bool) -> None:
        self.table: object = _loop.Prices()  # compiled: its numba structure
        if compiled:
            from servesim.sim import _engine_loop  # lazy: once loaded, loop='auto' compiles (_compiled_loop)

            self.table = _engine_loop.struct_of(self.table)
        self.notes: list[tuple[str, ...]] = []
        self.runs = 0


def _price_table(model: Pricer, kv_key: tuple[object, ...], compiled: bool) -> _PriceTable:
    """The price table that travels with ``model`` for steps at ``kv_key`` in the pricer's slot for
    them (created on first use, started afresh when it holds :data:`_PRICE_CACHE_MAX` entries)."""
    tables = model.price_cache.tables
    table = tables.get((kv_key, compiled))
    if not isinstance(table, _PriceTable) or len(table.notes) >= _PRICE_CACHE_MAX:
        table = tables[(kv_key, compiled)] = _PriceTable(compiled)
    return table


_ENTRY_POINTS: dict[type[Scheduler], Callable[..., int]] = {}


def _entry_point(policy: type[Scheduler]) -> Callable[..., int]:
    """The compiled loop's core for the policy class ``policy``
    (:func:`servesim.sim._engine_loop.core_for`) at the one signature :func:`_run` calls it with
    (the four books' structures, the price as a float, whether it was measured as an int, its launch
    wait and launch time as floats), as numba's entry point of that compiled version: called
    directly, it skips the dispatcher's typing of eight arguments at each of the run's re-entries
    (one per step price the table lacks): 2-3 us each, 0.5-0.9 ms of the ~9 ms that 5,000 requests
    at 6 req/s on Llama-3-70B TP4 took with ~270 new prices (``benchmarks/bench_engine.py``'s
    heaviest case)."""
    got = _ENTRY_POINTS.get(policy)
    if got is None:
        from servesim.sim import _engine_loop  # lazy: once loaded, loop='auto' compiles (_compiled_loop)

        core = _engine_loop.core_for(policy)
        got = _ENTRY_POINTS[policy] = core.compile(_engine_loop.core_signature(policy))
    return got


def _run(s: EngineState, L: _loop.LoopState, policy: Scheduler, table: _PriceTable,
         price_of: Callable[[int, int, tuple[tuple[int, int, bool], ...]], StepPrice],
         compiled: bool, concurrency: int | None) -> _Outcome:
    """Run the loop (:mod:`servesim.sim.loop`), in Python or compiled, pricing the steps its table
    lacks; what it leaves for the result."""
    table.runs += 1
    L.run = table.runs
    core: Any = _loop.core
    books: tuple[Any, ...] = (s, L, policy)
    key: Any = L.key
    if compiled:
        from servesim.sim import _engine_loop  # lazy: once loaded, loop='auto' compiles (_compiled_loop)

        core = _entry_point(type(policy))
        books = tuple(_engine_loop.struct_of(x) for x in books)
    dt, ok, wait, launch = 0.0, -1, 0.0, 0.0
    while True:
        status = core(*books, table.table, dt, ok, wait, launch)
        if status & 7 != _loop.NEED_PRICE:
            break
        klen = status >> 3
        words = key[:klen].tolist() if compiled else [int(w) for w in key[:klen]]  # Python ints
        chunks = tuple((words[j], words[j + 1], bool(words[j + 2])) for j in range(3, klen, 3))
        dt, measured, why, wait, launch = price_of(words[0], words[1], chunks)
        ok = int(measured)
        table.notes.append(why)
    if status == _loop.TOO_MANY_STEPS:
        raise _too_many_steps(L.requests, L.max_steps)
    if status == _loop.NOTHING_FITS:
        raise _nothing_fits(concurrency)
    if compiled:
        for name, value in _engine_loop.dump(type(policy), books[2]).items():
            setattr(policy, name, value)
        fields = _engine_loop.dump(_loop.LoopState, books[1])
        totals = _loop.Totals(**{f.name: fields[f.name] for f in dataclasses.fields(_loop.Totals)})
        gn = fields["gaps_n"]
        gaps: tuple[list[float], list[float]] = (fields["gap_keys"][:gn].tolist(),
                                                 fields["gap_tokens"][:gn].tolist())
        fields["preemptions"] = _engine_loop.dump(EngineState, books[0])["preemptions"]
        ttft_stats = _engine_loop.stats(fields["ttft"], fields["n_ttft"])
        tpot_stats = _engine_loop.stats(fields["tpot"], fields["n_tpot"])
        e2el_stats = _engine_loop.stats(fields["e2el"], fields["n_e2el"])
        for name in ("ttft", "noted"):
            fields[name] = fields[name][: fields["n_" + name]].tolist()
    else:
        fields = dict(vars(L))
        totals = L
        fields["preemptions"] = s.preemptions
        gaps = list(L.gaps), list(L.gaps.values())
        ttft_stats = _mean_pct_std(fields["ttft"][: fields["n_ttft"]])
        tpot_stats = _mean_pct_std(fields["tpot"][: fields["n_tpot"]])
        e2el_stats = _mean_pct_std(fields["e2el"][: fields["n_e2el"]])
    notes: dict[str, None] = {}
    for e in fields["noted"][: fields["n_noted"]]:
        for why in table.notes[e]:
            notes[why] = None
    ttfts = fields["ttft"][: fields["n_ttft"]]
    median_itl, p99_itl, std_itl = _gap_stats(*gaps)
    return _Outcome(ttfts=ttfts, ttft_stats=ttft_stats, tpot_stats=tpot_stats, e2el_stats=e2el_stats,
                    totals=totals, notes=notes, preemptions=fields["preemptions"],
                    median_itl_s=median_itl, p99_itl_s=p99_itl, std_itl_s=std_itl,
                    kept_i=fields["kept_i"], kept_f=fields["kept_f"], n_kept=fields["n_kept"])


def sample_stats(xs: F64) -> tuple[float, float, float, float]:
    """:func:`_mean_pct_std` of the values ``xs``: compiled (:func:`servesim.sim._engine_loop.stats`,
    the same bits) where the compiled loop is loaded already, else in Python."""
    if "servesim.sim._engine_loop" in sys.modules:
        from servesim.sim import _engine_loop  # loaded already; importing it would switch loop='auto'

        return _engine_loop.stats(np.ascontiguousarray(xs, np.float64), xs.shape[0])
    return _mean_pct_std(xs.tolist())


def _mean_pct_std(xs: list[float]) -> tuple[float, float, float, float]:
    """Mean, median, 99th percentile and (population) standard deviation of ``xs`` (NaN: none)."""
    if not xs:
        return math.nan, math.nan, math.nan, math.nan
    s = sorted(xs)
    return sum(xs) / len(xs), _pct_sorted(s, 50), _pct_sorted(s, 99), _std(xs)


def _result(o: _Outcome, capacity: int, policy: Scheduler,
            requests: tuple[tuple[int, float, float, float], ...]) -> BenchResult:
    """The benchmark's report from what the loop left (and each request's times, if kept)."""
    t = o.totals
    duration = t.last_finish - t.start
    ttft_mean, ttft_median, ttft_p99, ttft_std = o.ttft_stats
    tpot_mean, tpot_median, tpot_p99, tpot_std = o.tpot_stats
    e2el_mean, e2el_median, e2el_p99, e2el_std = o.e2el_stats
    return BenchResult(
        mean_ttft_s=ttft_mean, median_ttft_s=ttft_median, p99_ttft_s=ttft_p99,
        mean_tpot_s=tpot_mean, median_tpot_s=tpot_median, p99_tpot_s=tpot_p99,
        mean_itl_s=t.itl_sum / t.itl_n if t.itl_n else math.nan,
        output_throughput=t.out_tokens / duration, request_throughput=t.measured_done / duration,
        duration_s=duration, decode_batch=t.batch_time / t.busy_time if t.busy_time else 0.0,
        completed=t.measured_done, preemptions=o.preemptions, steps=t.steps, kv_capacity_tokens=capacity,
        measured=t.measured, notes=tuple(o.notes), std_ttft_s=ttft_std, std_tpot_s=tpot_std,
        median_itl_s=o.median_itl_s, p99_itl_s=o.p99_itl_s, std_itl_s=o.std_itl_s,
        mean_e2el_s=e2el_mean, median_e2el_s=e2el_median, p99_e2el_s=e2el_p99, std_e2el_s=e2el_std,
        total_input_tokens=t.in_tokens, total_output_tokens=t.out_tokens, scheduler=policy.describe(),
        ttfts_s=tuple(o.ttfts), requests=requests,
    )


_PRICE_CACHE_MAX = 200_000
"""Most step prices a step model keeps when a run starts (about 40 MB; one run adds at most as
many): its prices start afresh past it."""


def _arrivals(bench: Benchmark) -> list[float]:
    """``bench``'s send times from the one arrival generator, :func:`servesim.sim.client.arrival_times`
    (a function of its own only because :func:`run_benchmark`'s ``arrival_times`` parameter hides
    that name there)."""
    assert bench.rate_per_s is not None
    return arrival_times(bench.rate_per_s, bench.client.burstiness, bench.prompts, bench.seed)


_PREFILLED_WATERMARK = 0.01
"""Share of the KV cache a decode worker keeps free when it admits an arrived cache."""
