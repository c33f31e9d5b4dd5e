"""Continuous batching with chunked prefill, step by step: what a serving benchmark measures.

The engine loop of vLLM, SGLang and TensorRT-LLM, reduced to what sets its
latencies.  Every step:

1. each **decoding** sequence adds one token (with speculation the step is ``k``
   draft steps plus a ``k + 1``-wide verify, and each sequence accepts its own
   drafts, drawn i.i.d. with the preset's alpha: ``E[n]`` tokens per step on average);
   if the KV cache cannot hold the new tokens the newest running sequence is
   preempted and later recomputed, and no waiting request is admitted in that
   step (vLLM V1's policy);
2. the rest of the step's **token budget** (``max_num_batched_tokens`` minus the
   decode tokens) goes to prefill chunks, first the prompt already being
   chunked, then waiting requests in arrival order, while a running slot
   (``max_num_seqs``) and KV room for the chunk remain, beyond the running
   sequences' next step and a 1% watermark (an engine that
   ``reserve``\\ s admits a request only when its whole prompt and output fit);
3. the step takes the time of :class:`servesim.hardware.stepmodel.StepModel`
   for that batch; a prompt whose last chunk ran yields its first token at the
   step's end (TTFT), a sequence that reached its output length leaves and, in a
   closed loop, its client sends the next request at once.

Arrivals are a closed loop of ``concurrency`` clients (``vllm bench serve
--max-concurrency C``: ``num_prompts`` requests in all, at most C in flight) or
a Poisson stream at ``rate_per_s`` (seeded).  Stretches of pure decode between
events are advanced in one move: the step time is priced at the stretch's mean
context, exact for the decode attention, which is linear in context.

Bookkeeping is O(log n) per step: decoding sequences share one step counter
(each knows the count at which it joined) and their finishing steps sit in a
heap.  Step prices are cached, keyed on the batch and on contexts rounded to 7
significant bits (within 1.6%).  Requests may carry their own lengths (a trace).

Metrics follow ``vllm bench serve``: TTFT per request (queueing, waiting for
chunks, the prefill itself and the engine's per-request overhead, see
:mod:`servesim.hardware.engines`), TPOT per request ``(e2e - TTFT) /
(output - 1)``, ITL the mean gap between tokens over all tokens, throughput
over the benchmark's duration (first request sent to last token received).
``warmup`` leaves the first requests out of every statistic, as tools that
measure in a steady-state window (genai-perf, AIPerf) do; the default 0 counts
all, as ``vllm bench serve`` does.

Deterministic; standard library only.  Nothing here prints.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field

from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.speculation import Speculation
from servesim.hardware.stepmodel import Chunk, StepModel

__all__ = ["BenchResult", "Benchmark", "Speculation", "run_benchmark"]


@dataclass(frozen=True)
class Benchmark:
    """A serving benchmark run: fixed prompt and output lengths, closed loop or Poisson."""

    isl: int
    osl: int
    concurrency: int | None = None
    rate_per_s: float | None = None
    num_prompts: int | None = None  # default: 10 x concurrency (at least 50), or 500 at a rate
    seed: int = 0
    warmup: int = 0  # first requests left out of the statistics (0: all count, as vllm bench serve)

    def __post_init__(self) -> None:
        check_int("isl", self.isl, lo=1, hi=10_000_000)
        check_int("osl", self.osl, lo=1, hi=10_000_000)
        if (self.concurrency is None) == (self.rate_per_s is None):
            raise ParameterError("concurrency", self.concurrency, "given, or a rate instead (exactly one)")
        if self.concurrency is not None:
            check_int("concurrency", self.concurrency, lo=1, hi=100_000)
        if self.rate_per_s is not None:
            check_real("rate", self.rate_per_s, lo=0.0, hi=1e6, lo_open=True)
        if self.num_prompts is not None:
            check_int("num_prompts", self.num_prompts, lo=1, hi=1_000_000)
        check_int("warmup", self.warmup, lo=0, hi=self.prompts - 1)

    @property
    def prompts(self) -> int:
        if self.num_prompts is not None:
            return self.num_prompts
        if self.concurrency is not None:
            return max(50, 10 * self.concurrency)
        return 500


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


@dataclass
class _Req:
    arrival: float
    prompt_left: int
    context: int = 0  # tokens in the KV cache
    generated: float = 0.0
    first: float = -1.0
    admitted: int = 0  # admission order, for preemption (newest first)
    index: int = 0  # send order
    osl: int = 1  # output tokens it will generate
    final: float = 0.0  # tokens it will hold when done (reserving engines count them at admission)


def _q(x: float) -> int:
    """``x`` rounded down to its 7 leading bits (exact below 128; within 1/64 above)."""
    n = int(x)
    if n < 128:
        return n
    shift = n.bit_length() - 7
    return (n >> shift) << shift


def _pct(xs: list[float], q: float) -> float:
    """The q-th percentile with linear interpolation (numpy's default)."""
    if not xs:
        return math.nan
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def run_benchmark(model: StepModel, bench: Benchmark, memory_bytes: float, *,
                  spec: Speculation | None = None, reserve: bool = False,
                  max_steps: int = 5_000_000, arrival_times: list[float] | None = None,
                  prefilled: bool = False, lengths: list[tuple[int, int]] | None = None) -> BenchResult:
    """Run ``bench`` against one replica priced by ``model`` (see the module docstring).

    ``arrival_times`` (sorted, one per prompt) replaces the benchmark's arrivals;
    ``prefilled`` makes every request arrive with its prompt's KV cache already
    computed (a decode worker of a disaggregated deployment): it joins the decode
    batch as soon as its cache fits, and its TTFT is the wait for that.
    ``lengths`` gives each request's (prompt, output) tokens, in send order (a
    trace); without it every request has the benchmark's ``isl`` and ``osl``.
    """
    eng = model.engine
    budget, slots = eng.max_num_batched_tokens, eng.max_num_seqs
    capacity = model.kv_capacity_tokens(memory_bytes)
    isl, osl, n_total = bench.isl, bench.osl, bench.prompts
    if lengths is not None and len(lengths) != n_total:
        raise ParameterError("lengths", len(lengths), f"one (prompt, output) pair per prompt ({n_total})")
    if lengths is not None and lengths:
        longest = max(p + o for p, o in lengths)
        if longest > capacity:
            raise ParameterError("lengths", longest, f"at most {capacity} tokens per request (prompt + "
                                 "output): what the KV cache of this replica holds")

    def isl_of(i: int) -> int:
        return isl if lengths is None else lengths[i][0]

    def osl_of(i: int) -> int:
        return osl if lengths is None else lengths[i][1]
    if capacity < isl + 1:
        raise ParameterError("isl", isl, f"at most {max(0, capacity - 1)}: the KV cache of this replica "
                             f"holds {capacity} tokens after the weights")
    pos = 1 + (spec.k if spec else 0)
    per_step = spec.tokens_per_step if spec else 1.0

    arrivals: deque[float] = deque()
    if arrival_times is not None:
        if len(arrival_times) != n_total:
            raise ParameterError("arrival_times", len(arrival_times), f"one per prompt ({n_total})")
        arrivals.extend(arrival_times)
    elif bench.rate_per_s is not None:
        rng = random.Random(bench.seed)
        t_arr = 0.0
        for _ in range(n_total):
            arrivals.append(t_arr)
            t_arr += rng.expovariate(bench.rate_per_s)
    sent = 0
    waiting: deque[_Req] = deque()
    if bench.concurrency is not None:
        for _ in range(min(bench.concurrency, n_total)):
            waiting.append(_Req(0.0, isl_of(len(waiting)), index=len(waiting), osl=osl_of(len(waiting))))
        sent = len(waiting)

    # Decoding sequences advance together: G counts decode steps, each adding per_step tokens to
    # every decoding sequence.  One that joined at G = g0 with c cached tokens and n generated holds
    # c + (G - g0) per_step tokens and finishes at G = g0 + (osl - n) / per_step: no per-sequence
    # work per step.
    chunking: list[_Req] = []  # admitted, prompt not finished (admission order)
    decoding: dict[int, _Req] = {}  # id -> request, in the order they started decoding
    joined: dict[int, tuple[float, float]] = {}  # id -> (G at join, context - G per_step at join)
    finish_heap: list[tuple[float, int]] = []  # (G at which it finishes, id)
    G = 0.0
    ctx_offset = 0.0  # sum over decoding of (context - G per_step), both at join
    used = 0.0  # KV tokens held
    promised = 0.0  # final tokens of every running request (what a reserving engine sets aside)
    t = 0.0
    order = 0
    ttfts: list[float] = []
    tpots: list[float] = []
    itl_sum = itl_n = 0.0
    batch_time = 0.0
    busy_time = 0.0
    preemptions = steps = 0
    done = 0
    last_finish = 0.0
    start = math.inf  # arrival of the first measured request
    measured_done = 0
    out_tokens = 0
    measured = True
    notes: dict[str, None] = {}

    prices: dict[tuple[object, ...], float] = {}

    def price(b: float, ctx: float, chunks: tuple[tuple[int, int, bool], ...] = ()) -> float:
        """The step's time; ``chunks`` are (tokens, cached context, samples).  Contexts are rounded
        to 7 significant bits (within 1.6%) so that recurring steps are priced once."""
        key = (b, _q(ctx), *[(t, _q(c), s) for t, c, s in chunks]) if chunks else (b, _q(ctx))
        dt = prices.get(key)
        if dt is None:
            dt = prices[key] = step_price(b, _q(ctx), tuple(Chunk(t, _q(c), 1, s) for t, c, s in chunks))
        return dt

    def step_price(b: float, ctx: float, chunks: tuple[Chunk, ...]) -> float:
        nonlocal measured
        st = model.step(b, ctx, chunks, pos if b > 0 else 1, bound=False)
        if not st.measured:
            measured = False
            for n in st.notes:
                notes[n] = None
        dt = st.total_s
        if spec is not None and b > 0:
            dt += spec.k * spec.draft_step_s
        return dt

    accept = random.Random(bench.seed + 1)  # per-sequence acceptance draws (speculation only)

    def steps_to_finish(r: _Req) -> float:
        """Decode steps this sequence needs: with speculation, its own accepted prefixes, drawn.

        Each step accepts the first j drafts with probability alpha^j (1 - alpha) (all k with
        alpha^k) and emits them plus one token of the target's: the i.i.d. model of the
        lab's section 2.1, drawn per sequence so that finishing times spread as they do in an
        engine.  The batch's context still grows by E[n] per step (the mean over sequences).
        """
        left = r.osl - r.generated
        if spec is None or left <= 0:
            return max(0.0, left) / per_step
        steps = 0
        while left > 0:
            j = 0
            while j < spec.k and accept.random() < spec.alpha:
                j += 1
            left -= j + 1
            steps += 1
        return float(steps)

    def join(r: _Req) -> None:
        nonlocal ctx_offset
        rid = id(r)
        decoding[rid] = r
        joined[rid] = (G, r.context - G * per_step)
        ctx_offset += r.context - G * per_step
        heapq.heappush(finish_heap, (G + steps_to_finish(r), rid))

    def leave(rid: int) -> _Req:
        nonlocal ctx_offset
        r = decoding.pop(rid)
        g0, off = joined.pop(rid)
        ctx_offset -= off
        r.context = round(off + G * per_step)
        r.generated += (G - g0) * per_step
        return r

    while done < n_total:
        if steps >= max_steps:
            raise ParameterError("num_prompts", n_total,
                                 f"small enough to finish in {max_steps} engine steps")
        while arrivals and arrivals[0] <= t:
            waiting.append(_Req(arrivals.popleft(), isl_of(sent), index=sent, osl=osl_of(sent)))
            sent += 1
        if not decoding and not chunking and not waiting:
            if arrivals:
                t = arrivals[0]
                continue
            break  # pragma: no cover - nothing left (cannot happen while done < n_total)
        # 1. decode: make room for this step's tokens, preempting the newest running requests
        need = len(decoding) * pos
        preempted = False
        while decoding and used + need > capacity:
            # vLLM V1: the lowest-priority running request (the last admitted, decoding or still
            # chunking its prompt) gives its KV back and is recomputed later from its tokens so far.
            last_dec = next(reversed(decoding))
            if chunking and chunking[-1].admitted > decoding[last_dec].admitted:
                victim = chunking.pop()
            else:
                victim = leave(last_dec)
            used -= victim.context
            promised -= victim.final
            preemptions += 1
            preempted = True
            waiting.appendleft(_Req(victim.arrival, victim.context + victim.prompt_left, 0, victim.generated,
                                    victim.first, index=victim.index, osl=victim.osl))
            need = len(decoding) * pos
        # 2. prefill chunks within the budget
        left = budget - len(decoding) * pos
        chunks: list[tuple[_Req, int]] = []
        for r in chunking:
            if left <= 0:
                break
            q = min(r.prompt_left, left)
            if q > capacity - used - need:  # the chunk's blocks must all be free (vLLM allocate_slots)
                break
            chunks.append((r, q))
            left -= q
            need += q
        # A new request is admitted only if its chunk leaves the running sequences room for their
        # next step and a watermark of 1% of the cache (vLLM's block-manager watermark): without it
        # the newcomer is preempted at once by the sequences' growth, every step.
        headroom = len(decoding) * pos + 0.01 * capacity
        while prefilled and not preempted and waiting and len(decoding) + len(chunking) < slots:
            r = waiting[0]  # its KV cache arrives whole: no compute, only room
            if r.prompt_left + r.osl > capacity - used - need - headroom:
                break
            waiting.popleft()
            order += 1
            r.admitted = order
            r.context += r.prompt_left
            used += r.prompt_left
            r.prompt_left = 0
            if r.first < 0:
                r.first = t
                r.generated = 1.0
                if r.index >= bench.warmup:
                    ttfts.append(t - r.arrival)
                    start = min(start, r.arrival)
            join(r)
            need += pos
        while not preempted and waiting and left > 0 and len(decoding) + len(chunking) < slots:
            r = waiting[0]
            room = int(capacity - used - need - headroom)
            final = r.context + r.prompt_left + (r.osl - r.generated)
            if reserve and capacity - promised - 0.01 * capacity < final:
                break
            q = min(r.prompt_left, left)
            if q > room:
                break
            waiting.popleft()
            order += 1
            r.admitted = order
            r.final = final
            promised += final
            chunking.append(r)
            chunks.append((r, q))
            left -= q
            need += q
        b = len(decoding)
        if b == 0 and not chunks:
            if arrivals:
                t = max(t, arrivals[0])
                continue
            raise ParameterError("concurrency", bench.concurrency,
                                 "small enough that one request fits in the KV cache")  # pragma: no cover
        ctx = ctx_offset / b + G * per_step if b else 0.0
        # Pure decode: advance to the next finish (or arrival, or KV limit) in one move.
        n = 1
        if not chunks and not chunking and not preempted:  # nothing to admit until a sequence ends
            while finish_heap and finish_heap[0][1] not in decoding:
                heapq.heappop(finish_heap)  # a preempted sequence's stale entry
            n = max(1, math.ceil(finish_heap[0][0] - G - 1e-9))
            if used + need * n > capacity:
                n = max(1, int((capacity - used) // max(1, need)))
        if n > 1:
            dt1 = price(b, ctx + (n - 1) * per_step / 2, ())
            if arrivals:
                n = max(1, min(n, math.ceil((arrivals[0] - t) / dt1)))
            dt = dt1 * n
        else:
            dt = price(b, ctx, tuple((q, r.context, q == r.prompt_left) for r, q in chunks))
        t += dt
        steps += n
        busy_time += dt
        batch_time += b * dt
        itl_sum += b * dt
        itl_n += b * n
        G += n
        used += b * per_step * n
        finished: list[_Req] = []
        while finish_heap and finish_heap[0][0] <= G + 1e-9:
            _, rid = heapq.heappop(finish_heap)
            if rid in decoding:
                finished.append(leave(rid))
        for r, q in chunks:
            r.prompt_left -= q
            r.context += q
            used += q
            if r.prompt_left == 0:
                chunking.remove(r)
                if r.first < 0:
                    r.first = t
                    r.generated = 1.0
                    if r.index >= bench.warmup:
                        ttfts.append(t - r.arrival + eng.request_overhead_s)
                        start = min(start, r.arrival)
                if r.generated >= r.osl:
                    finished.append(r)
                else:
                    join(r)
        for r in finished:
            used -= r.context
            promised -= r.final
            done += 1
            last_finish = t
            if r.index >= bench.warmup:
                measured_done += 1
                out_tokens += r.osl
                if r.osl > 1:
                    tpots.append((t - r.first) / (r.osl - 1))
            if bench.concurrency is not None and sent < n_total:
                waiting.append(_Req(t, isl_of(sent), index=sent, osl=osl_of(sent)))
                sent += 1
    duration = last_finish - start
    ttft_mean = sum(ttfts) / len(ttfts)
    tpot_mean = sum(tpots) / len(tpots) if tpots else math.nan
    return BenchResult(
        mean_ttft_s=ttft_mean, median_ttft_s=_pct(ttfts, 50), p99_ttft_s=_pct(ttfts, 99),
        mean_tpot_s=tpot_mean, median_tpot_s=_pct(tpots, 50), p99_tpot_s=_pct(tpots, 99),
        mean_itl_s=itl_sum / itl_n if itl_n else math.nan,
        output_throughput=out_tokens / duration, request_throughput=measured_done / duration,
        duration_s=duration, decode_batch=batch_time / busy_time if busy_time else 0.0,
        completed=measured_done, preemptions=preemptions, steps=steps, kv_capacity_tokens=capacity,
        measured=measured, notes=tuple(notes),
    )
