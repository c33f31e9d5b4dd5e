"""Today's engine loop, frozen: ``servesim.sim.batching.run_benchmark`` as it was before the
compiled loop (issue 19, item 7), kept verbatim so that ``bench_engine.py`` can time the new loop
against it in the same run.  Not part of the package; nothing imports it but the benchmark.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from typing import Any

from _baseline_schedulers import EngineState, Request, Scheduler, StepPlan, make_scheduler

from servesim._checks import ParameterError
from servesim.hardware.speculation import Speculation
from servesim.hardware.stepmodel import Chunk, StepModel
from servesim.sim.batching import Benchmark, BenchResult
from servesim.sim.client import arrival_times

__all__ = ["run_benchmark"]


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


def _weighted_pct(weights: dict[float, float], q: float) -> float:
    """The q-th percentile of values held with the given weights (the lower value at a tie)."""
    total = sum(weights.values())
    if total <= 0:
        return math.nan
    acc = 0.0
    for v in sorted(weights):
        acc += weights[v]
        if acc >= total * q / 100.0:
            return v
    return max(weights)  # pragma: no cover - rounding at q = 100


def _std(xs: list[float]) -> float:
    """Population standard deviation (numpy's default, as vllm bench serve reports)."""
    if not xs:
        return math.nan
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def run_benchmark(model: StepModel, bench: Benchmark, memory_bytes: float, *,
                  spec: Speculation | None = None, reserve: bool = False,
                  max_steps: int = 5_000_000, arrival_times: list[float] | None = None,
                  prefilled: bool = False, lengths: list[tuple[int, int]] | None = None,
                  scheduler: Scheduler | str | None = None, keep_requests: bool = False) -> BenchResult:
    """Run ``bench`` against one replica priced by ``model`` (see the module docstring).

    ``scheduler`` is a policy or an engine's name (default: the step model's engine,
    with its options); ``reserve`` makes vLLM's policy admit only what fits whole.
    ``arrival_times`` (sorted, one per prompt) replaces the client's send times;
    ``prefilled`` makes every request arrive with its prompt's KV cache already
    computed (a decode worker of a disaggregated deployment): it joins the decode
    batch as soon as its cache fits, and its TTFT is the wait for that.
    ``lengths`` gives each request's (prompt, output) tokens, in send order (a
    trace); without it the client draws them.  ``keep_requests`` keeps each request's
    times in :attr:`BenchResult.requests` (the pools of a disaggregated deployment
    hand them on).
    """
    eng = model.engine
    if scheduler is None or isinstance(scheduler, str):
        name = scheduler or eng.name
        policy = make_scheduler(name, eng, {"reserve": True} if reserve and name == "vllm" else None)
    else:
        policy = scheduler
    capacity = model.kv_capacity_tokens(memory_bytes)
    isl, osl, n_total = bench.isl, bench.osl, bench.prompts
    if lengths is None and not prefilled:
        lengths = bench.lengths()
    if lengths is not None and len(lengths) != n_total:
        raise ParameterError("lengths", len(lengths), f"one (prompt, output) pair per prompt ({n_total})")
    if lengths:
        longest = max(p + o for p, o in lengths)
        if longest > capacity:
            raise ParameterError("lengths", longest, f"at most {capacity} tokens per request (prompt + "
                                 "output): what the KV cache of this replica holds")
    if capacity < isl + 1:
        raise ParameterError("isl", isl, f"at most {max(0, capacity - 1)}: the KV cache of this replica "
                             f"holds {capacity} tokens after the weights")
    check = getattr(policy, "check_prompt", None)
    if check is not None and not prefilled:
        check(max(p for p, _ in lengths) if lengths else isl)

    def isl_of(i: int) -> int:
        return isl if lengths is None else lengths[i][0]

    def osl_of(i: int) -> int:
        return osl if lengths is None else lengths[i][1]

    pos = 1 + (spec.k if spec else 0)
    per_step = spec.tokens_per_step if spec else 1.0
    accept = random.Random(bench.seed + 1)  # per-sequence acceptance draws (speculation only)

    def steps_to_finish(r: Request) -> float:
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

    s = EngineState(capacity, eng.max_num_seqs, eng.max_num_batched_tokens, pos, per_step, steps_to_finish)
    s.ranks = eng.dp_ranks
    s.chunk_cap = eng.chunk_tokens or eng.max_num_batched_tokens
    policy.prepare(s)

    # The client: send times (all 0 when every request goes at once) gated by its slots.
    if arrival_times is not None:
        if len(arrival_times) != n_total:
            raise ParameterError("arrival_times", len(arrival_times), f"one per prompt ({n_total})")
        pending: deque[float] = deque(arrival_times)
        slots_free: deque[float] | None = None
    else:
        if bench.rate_per_s is not None:
            pending = deque(_arrivals(bench))
        else:
            pending = deque([0.0] * n_total)
        slots_free = None if bench.concurrency is None else deque([0.0] * bench.concurrency)
    sent = 0

    def send(now: float) -> None:
        """Every request due by ``now`` with a free client slot enters the queue."""
        nonlocal sent
        while pending and pending[0] <= now and (slots_free is None or slots_free):
            at = pending.popleft()
            if slots_free is not None:
                at = max(at, slots_free.popleft())
            s.waiting.append(Request(at, isl_of(sent), index=sent, osl=osl_of(sent)))
            sent += 1

    def next_send() -> float:
        """When the next request can enter the queue without a finish (inf: only after one)."""
        if not pending or (slots_free is not None and not slots_free):
            return math.inf
        return pending[0]

    t = 0.0
    ttfts: list[float] = []
    tpots: list[float] = []
    itl_sum = itl_n = 0.0
    batch_time = busy_time = 0.0
    steps = done = 0
    last_finish = 0.0
    start = math.inf  # send time of the first measured request
    measured_done = out_tokens = in_tokens = 0
    measured = True
    notes: dict[str, None] = {}
    # Step prices are shared by every run on the same step model (a plan's confirmation runs one
    # deployment at many rates): keyed on what the price depends on, bounded in size.
    prices: dict[tuple[object, ...], tuple[float, bool, tuple[str, ...]]] = _shared_prices(model)
    kv_key = (pos, getattr(model, "kv_context", None))
    gaps: dict[float, float] = {}  # gap between a sequence's tokens (a step's time) -> tokens with it
    kept: list[tuple[int, float, float, float]] = []

    def price(b: float, ctx: float, chunks: tuple[tuple[int, int, bool], ...] = ()) -> float:
        """The step's time; ``chunks`` are (tokens, cached context, samples).  Contexts are rounded
        to 7 significant bits (within 1.6%) so that recurring steps are priced once."""
        nonlocal measured
        key = (kv_key, b, _q(ctx), *[(q, _q(c), x) for q, c, x in chunks]) if chunks else (kv_key, b, _q(ctx))
        hit = prices.get(key)
        if hit is None:
            st = model.step(b, _q(ctx), tuple(Chunk(q, _q(c), 1, x) for q, c, x in chunks),
                            pos if b > 0 else 1, bound=False)
            hit = (st.total_s, st.measured, st.notes)
            if len(prices) >= _PRICE_CACHE_MAX:
                prices.clear()
            prices[key] = hit
        dt, ok, why = hit
        if not ok:
            measured = False
            for n in why:
                notes[n] = None
        if spec is not None and b > 0:
            dt += spec.k * spec.draft_step_s
        return dt

    def first_token(r: Request, overhead: float) -> None:
        nonlocal start
        if r.first < 0:
            r.first = t
            r.generated = 1.0
            if r.index >= bench.warmup:
                ttfts.append(t - r.arrival + overhead)
                start = min(start, r.arrival)

    while done < n_total:
        if steps >= max_steps:
            raise ParameterError("num_prompts", n_total,
                                 f"small enough to finish in {max_steps} engine steps")
        send(t)
        if not s.decoding and not s.chunking and not s.waiting:
            nxt = next_send()
            if nxt < math.inf:
                t = max(t, nxt)
                continue
            break  # pragma: no cover - nothing left (cannot happen while done < n_total)
        if prefilled:
            plan = _admit_prefilled(s, first_token)
        else:
            plan = policy.schedule(s)
        b = len(s.decoding) if plan.decode else 0
        if b == 0 and not plan.chunks:
            nxt = next_send()
            if nxt < math.inf and nxt > t:
                t = nxt
                continue
            raise ParameterError("concurrency", bench.concurrency,
                                 "small enough that one request fits in the KV cache")  # pragma: no cover
        ctx = s.mean_context() if b else 0.0
        # Pure decode: advance to the next finish (or send, or KV limit, or policy decision) in one move.
        n = 1
        if b and not plan.chunks and not s.chunking and not plan.preempted:
            while s.finish_heap and s.finish_heap[0][1] not in s.decoding:
                heapq.heappop(s.finish_heap)  # a preempted sequence's stale entry
            n = max(1, math.ceil(s.finish_heap[0][0] - s.G - 1e-9))
            need = s.decode_tokens()
            if s.used + need * n > capacity:
                n = max(1, int((capacity - s.used) // max(1, need)))
            quiet = policy.quiet_steps(s)
            if quiet < n:
                n = max(1, int(quiet))
        if n > 1:
            dt1 = price(b, ctx + (n - 1) * per_step / 2, ())
            nxt = next_send()
            if nxt < math.inf:
                n = max(1, min(n, math.ceil((nxt - t) / dt1)))
            dt = dt1 * n
        else:
            dt = price(b, ctx, tuple((q, r.context, q == r.prompt_left) for r, q in plan.chunks))
        t += dt
        steps += n
        busy_time += dt
        batch_time += len(s.decoding) * dt  # the running sequences, stepping or stalled by a prefill
        itl_sum += b * dt
        itl_n += b * n
        if not plan.decode:  # a prefill-only step stalls the decoding sequences: their next gap grows
            itl_sum += len(s.decoding) * dt
        if b:
            gaps[dt / n] = gaps.get(dt / n, 0.0) + b * n
        finished: list[Request] = []
        if b:
            s.G += n
            s.used += b * per_step * n
            while s.finish_heap and s.finish_heap[0][0] <= s.G + 1e-9:
                _, rid = heapq.heappop(s.finish_heap)
                if rid in s.decoding:
                    finished.append(s.leave(rid))
        for r, q in plan.chunks:
            r.prompt_left -= q
            r.context += q
            s.used += q
            if r.prompt_left == 0:
                s.chunking.remove(r)
                first_token(r, eng.request_overhead_s)
                if r.generated >= r.osl:
                    finished.append(r)
                else:
                    s.join(r)
        policy.after_step(s, plan, n)
        for r in finished:
            s.used -= r.context
            s.promised -= r.final
            done += 1
            last_finish = t
            if keep_requests:
                kept.append((r.index, r.arrival, r.first, t))
            if slots_free is not None:
                slots_free.append(t)
            if r.index >= bench.warmup:
                measured_done += 1
                out_tokens += r.osl
                in_tokens += isl_of(r.index)
                if r.osl > 1:
                    tpots.append((t - r.first) / (r.osl - 1))
    duration = last_finish - start
    ttft_mean = sum(ttfts) / len(ttfts)
    tpot_mean = sum(tpots) / len(tpots) if tpots else math.nan
    return BenchResult(
        mean_ttft_s=ttft_mean, median_ttft_s=_pct(ttfts, 50), p99_ttft_s=_pct(ttfts, 99),
        mean_tpot_s=tpot_mean, median_tpot_s=_pct(tpots, 50), p99_tpot_s=_pct(tpots, 99),
        mean_itl_s=itl_sum / itl_n if itl_n else math.nan,
        output_throughput=out_tokens / duration, request_throughput=measured_done / duration,
        duration_s=duration, decode_batch=batch_time / busy_time if busy_time else 0.0,
        completed=measured_done, preemptions=s.preemptions, steps=steps, kv_capacity_tokens=capacity,
        measured=measured, notes=tuple(notes), std_ttft_s=_std(ttfts), std_tpot_s=_std(tpots),
        median_itl_s=_weighted_pct(gaps, 50), p99_itl_s=_weighted_pct(gaps, 99),
        total_input_tokens=in_tokens, total_output_tokens=out_tokens, scheduler=policy.describe(),
        ttfts_s=tuple(ttfts), requests=tuple(kept),
    )


_PRICE_CACHE_MAX = 200_000
"""Most step prices kept per step model (about 40 MB); the cache starts afresh past it."""


def _shared_prices(model: Any) -> dict[tuple[object, ...], tuple[float, bool, tuple[str, ...]]]:
    """The step-price cache that travels with ``model`` (created on first use)."""
    cache = getattr(model, "_engine_step_prices", None)
    if cache is None:
        cache = {}
        model._engine_step_prices = cache
    return cache


def _arrivals(bench: Benchmark) -> list[float]:
    assert bench.rate_per_s is not None
    return arrival_times(bench.rate_per_s, bench.client.burstiness, bench.prompts, bench.seed)


def _admit_prefilled(s: EngineState, first_token: Any) -> StepPlan:
    """A decode worker: a waiting request's KV cache arrives whole (no compute, only room); it joins
    the decode batch when its prompt and output fit beyond the running sequences' next step and
    a 1% watermark.  Its first token is the prefill worker's, counted when it joins."""
    preempted = s.make_room_for_decode()
    need = s.decode_tokens()
    headroom = s.decode_tokens() + 0.01 * s.capacity
    while not preempted and s.waiting and s.running < s.slots:
        r = s.waiting[0]
        if r.prompt_left + r.osl > s.capacity - s.used - need - headroom:
            break
        s.waiting.popleft()
        s.order += 1
        r.admitted = s.order
        r.context += r.prompt_left
        s.used += r.prompt_left
        r.prompt_left = 0
        first_token(r, 0.0)
        s.join(r)
        need += s.pos
    return StepPlan(True, [], preempted)
