"""The engine loop of :func:`servesim.sim.batching.run_benchmark`, written once.

One pass of :func:`core` is one step (or one stretch of pure decode steps): the
client sends what is due (:func:`send`), the policy plans the step into the books
(``policy.schedule``; a decode worker of a disaggregated deployment admits arrived
caches instead, :func:`admit_prefilled`), the step is priced, and it runs: the clock
advances, decoding sequences that reached their output leave, prompts whose last chunk
ran yield their first token and join the decode batch.

The loop is written in the part of Python that numba compiles, like the books and the
policies (:mod:`servesim.sim.schedulers.base`): it runs as it is (the reference, with
the books' columns as lists) or compiled by :mod:`servesim.sim._engine_loop`, from this
same text, with the same result to the last bit.  It cannot call the step model when
compiled, so it looks prices up in a table (:class:`Prices`) and on a miss returns
:data:`NEED_PRICE` with the step's key in ``L.key[:L.klen]`` (``[b, q(ctx), chunks,
(tokens, q(context), samples) ...]``); the caller prices it and calls again with the price,
and the loop adds it to the table and goes on from where it stopped.  The functions in
:data:`TWINS` (a dict or an open-addressed table of arrays) have their compiled text beside
the compile step.  Nothing here prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from servesim.sim.schedulers.base import (
    EngineState,
    Floats,
    Ints,
    Scheduler,
    grown,
    list_column,
    remember_source,
)

__all__ = ["DONE", "NEED_PRICE", "NOTHING_FITS", "TOO_MANY_STEPS", "LoopState", "Prices", "Totals", "core"]

# What core returns with.
DONE = 0
NEED_PRICE = 1  # the step's key is in L.key[:L.klen]: price it and call again with the price
TOO_MANY_STEPS = 3
NOTHING_FITS = 4
PLANNED = -1  # next_step's: a step is planned

_INF = math.inf

GAPS_START = 1024
"""The compiled map of gaps between tokens starts with room for this many distinct gaps (it grows)."""


class Prices:
    """The step prices of one step model at one ``(positions, kv_context)``: entry ``e`` holds a
    step's time ``dt[e]`` (seconds), the part of it the GPU waits on the CPU's launches (``wait[e]``,
    :attr:`~servesim.hardware.ops.StepTime.launch_wait_s`), the CPU's launch time (``launch[e]``,
    :attr:`~servesim.hardware.ops.StepTime.launch_s`), whether it was measured (``ok[e]``) and the
    last run that used it (``seen[e]``, for the notes).  Keys are found by :func:`price_find` (in Python a
    dict; compiled an open-addressed index over the keys' hashes, ``slots`` at most half full,
    key ``e`` in ``kpool[kstart[e]:kstart[e] + klen[e]]``)."""

    dt: Floats
    wait: Floats
    launch: Floats
    ok: Ints
    seen: Ints
    entries: int
    runs: int
    slots: Ints
    hashes: Ints
    kstart: Ints
    klen: Ints
    kpool: Ints
    kused: int

    def __init__(self, capacity: int = 1024) -> None:
        self.dt, self.wait, self.launch = [0.0] * capacity, [0.0] * capacity, [0.0] * capacity
        self.ok, self.seen = [0] * capacity, [0] * capacity
        self.entries = self.runs = self.kused = 0
        self.slots = [-1] * (2 * capacity)
        self.hashes, self.kstart, self.klen = [0] * capacity, [0] * capacity, [0] * capacity
        self.kpool = [0] * (8 * capacity)
        self.index: dict[tuple[int, ...], int] = {}


def price_find(t: Prices, key: list[int], klen: int) -> int:
    """The entry of ``key[:klen]``, or -1."""
    return t.index.get(tuple(key[:klen]), -1)


def price_add(t: Prices, key: list[int], klen: int) -> int:
    """Add ``key[:klen]`` as a new entry; its number (its columns are the caller's to fill)."""
    e = t.entries
    if e == len(t.dt):
        t.dt, t.wait, t.launch = t.dt + t.dt, t.wait + t.wait, t.launch + t.launch
        t.ok, t.seen = t.ok + t.ok, t.seen + t.seen
    t.index[tuple(key[:klen])] = e
    t.entries = e + 1
    return e


@dataclass(eq=False)
class Totals:
    """The loop's running totals: what a run leaves for its report beside its samples (the Python
    loop's :class:`LoopState` is one; the compiled loop's are read back into one)."""

    itl_sum: float
    itl_n: float
    batch_time: float
    busy_time: float
    steps: int
    last_finish: float
    start: float  # send time of the first measured request
    measured_done: int
    out_tokens: int
    in_tokens: int
    measured: bool


class LoopState(Totals):
    """The loop's own state: the client, the clock, what the step's price waits on, the statistics
    (its totals, :class:`Totals`, first)."""

    requests: int
    warmup: int
    max_steps: int
    prefilled: bool  # a decode worker: requests arrive with their prompt's KV cache
    keep: bool  # keep each request's times
    overhead_s: float  # the engine's per-request overhead: the client sees every token this much later
    spec_add_s: float  # the draft steps' time, added to a step with decoding sequences
    prefilled_watermark: float
    recv_every: int  # the scheduler's receive interval
    late: bool  # an overlap (async) scheduler: a request sent while a step runs enters the step after next
    step_start: float  # when the step just run started (the late scheduler's horizon; see next_step)
    last_step_s: float  # the time of the step just run (one step of a stretch); 0 after an idle spell
    last_launch_s: float  # the CPU's launch time of the step just run (launch[e])
    run: int  # this run's number on the price table
    # the client
    sends: Floats  # send times, in send order
    send_head: int
    has_slots: bool  # a closed loop: requests wait for a free client
    slots_free: Floats  # a queue of when each client became free
    slots_head: int
    slots_tail: int
    isl: Ints
    osl: Ints
    sent: int
    inbox: int  # requests sent from this one on wait for the scheduler's next poll
    recv_count: int
    # the clock and the step in hand
    t: float
    phase: int  # 0: plan a step; 1: its price is looked up; 2: its price was given
    key: Ints
    klen: int
    b: int
    n: int
    finished: Ints
    # the statistics
    ttft: Floats
    n_ttft: int
    tpot: Floats
    n_tpot: int
    e2el: Floats  # each measured request's end-to-end latency (sent to last token, with the overhead)
    n_e2el: int
    done: int
    gap_keys: Floats  # the gaps between a sequence's tokens (a step's time) and tokens with each
    gap_tokens: Floats
    gap_slots: Ints
    gaps_n: int
    kept_i: Ints
    kept_f: Floats  # (sent, first token, last token) of each finished request
    n_kept: int
    noted: Ints  # price entries not measured, in the order this run first used them
    n_noted: int

    def __init__(self, s: EngineState, sends: list[float], concurrency: int | None, isl: list[int],
                 osl: list[int], *, warmup: int, max_steps: int, prefilled: bool, keep: bool,
                 overhead_s: float, spec_add_s: float, prefilled_watermark: float, recv_every: int,
                 clock_start_s: float, late: bool = False,
                 column: Callable[[Any, int], Any] = list_column) -> None:
        n = len(sends)
        m = max(1, n)
        self.requests, self.warmup, self.max_steps = n, warmup, max_steps
        self.prefilled, self.keep, self.overhead_s, self.spec_add_s = prefilled, keep, overhead_s, spec_add_s
        self.prefilled_watermark, self.recv_every, self.run = prefilled_watermark, recv_every, 0
        self.sends, self.send_head = (sends if n else column(0.0, 1)), 0
        self.has_slots = concurrency is not None
        c = concurrency or 0
        self.slots_free = column(0.0, c + n if concurrency is not None else 1)
        self.slots_head, self.slots_tail = 0, c
        self.isl, self.osl = (isl, osl) if n else (column(0, 1), column(0, 1))
        self.sent = self.inbox = 0
        self.recv_count = recv_every  # an idle scheduler polls at once
        self.t = clock_start_s  # the engine's first step waits for this (a cold start)
        self.late, self.step_start, self.last_step_s, self.last_launch_s = late, clock_start_s, 0.0, 0.0
        self.phase = self.klen = self.b = self.n = 0
        self.key, self.finished = column(0, 3 + 3 * m), column(0, m)
        self.ttft, self.tpot, self.e2el = column(0.0, m), column(0.0, m), column(0.0, m)
        self.n_ttft = self.n_tpot = self.n_e2el = 0
        self.itl_sum = self.itl_n = self.batch_time = self.busy_time = 0.0
        self.steps = self.done = 0
        self.last_finish, self.start = 0.0, math.inf
        self.measured_done = self.out_tokens = self.in_tokens = 0
        self.measured = True
        self.gap_keys, self.gap_tokens = column(0.0, GAPS_START), column(0.0, GAPS_START)
        self.gap_slots, self.gaps_n = column(-1, 2 * GAPS_START), 0
        self.gaps: dict[float, float] = {}
        self.kept_i = column(0, m if keep else 1)
        self.kept_f = column(0.0, 3 * m if keep else 1)
        self.n_kept = 0
        self.noted, self.n_noted = column(0, 1024), 0


def gap_add(L: LoopState, gap: float, tokens: float) -> None:
    """``gaps[gap] = gaps.get(gap, 0.0) + tokens`` (compiled: a map of first-insertion order)."""
    L.gaps[gap] = L.gaps.get(gap, 0.0) + tokens


TWINS: tuple[str, ...] = ("price_find", "price_add", "gap_add", "floordiv")
"""Functions here whose compiled implementation differs in text (same result, bit for bit)."""


def q7(x: float) -> int:
    """``x`` rounded down to its 7 leading bits (exact below 128; within 1/64 above): step prices
    are keyed on contexts so rounded, so that recurring steps are priced once."""
    n = int(x)
    shift = 0
    while (n >> shift) >= 128:
        shift += 1
    return (n >> shift) << shift


def floordiv(a: float, b: float) -> float:
    """Python's float ``a // b`` (compiled: CPython's ``float_floor_div``, step for step)."""
    return a // b


def send(s: EngineState, L: LoopState, now: float) -> None:
    """Every request due by ``now`` with a free client slot enters the queue (with a receive
    interval, the scheduler's socket until its next poll)."""
    while L.send_head < L.requests and L.sends[L.send_head] <= now and (
            not L.has_slots or (L.slots_head < L.slots_tail and L.slots_free[L.slots_head] <= now)):
        at = L.sends[L.send_head]
        L.send_head += 1
        if L.has_slots:
            free = L.slots_free[L.slots_head]
            L.slots_head += 1
            if free > at:
                at = free
        r = L.sent
        s.arrival[r] = at
        s.prompt_left[r] = L.isl[r]
        s.osl[r] = L.osl[r]
        if L.recv_every == 1:
            s.push_waiting(r)
        L.sent = r + 1


def receive(s: EngineState, L: LoopState) -> None:
    """The scheduler polls when its counter has reached the interval (and starts it again,
    whether or not a request came), or at once when it is idle."""
    if L.recv_count >= L.recv_every or (s.decoding_n == 0 and s.chunking_n == 0 and s.waiting_n == 0):
        for r in range(L.inbox, L.sent):
            s.push_waiting(r)
        L.inbox = L.sent
        L.recv_count = 0


def next_send(L: LoopState) -> float:
    """When the next request can enter the queue without a finish (inf: only after one): its send
    time, or in a closed loop when its client is free, if later."""
    if L.send_head >= L.requests or (L.has_slots and L.slots_head >= L.slots_tail):
        return _INF
    at = L.sends[L.send_head]
    if L.has_slots and L.slots_free[L.slots_head] > at:
        at = L.slots_free[L.slots_head]
    return at


def first_token(s: EngineState, L: LoopState, r: int, overhead: float) -> None:
    """``r``'s first token, now: its TTFT counts from when it was sent, with the engine's overhead."""
    if s.first[r] < 0:
        now = L.t
        s.first[r] = now
        s.generated[r] = 1.0
        if r >= L.warmup:
            L.ttft[L.n_ttft] = now - s.arrival[r] + overhead
            L.n_ttft += 1
            if s.arrival[r] < L.start:
                L.start = s.arrival[r]


def admit_prefilled(s: EngineState, L: LoopState) -> None:
    """A decode worker: a waiting request's KV cache arrives whole (no compute, only room); it joins
    the decode batch when its prompt and output fit beyond the running sequences' next step and
    a 1% watermark.  Its first token is the prefill worker's, counted when it joins."""
    preempted = s.make_room_for_decode()
    need = s.decode_tokens()
    headroom = s.decode_tokens() + L.prefilled_watermark * s.capacity
    while not preempted and s.waiting_n > 0 and s.running() < s.slots:
        r = s.waiting_at(0)
        if s.prompt_left[r] + s.osl[r] > s.capacity - s.used - need - headroom:
            break
        s.pop_waiting()
        s.order += 1
        s.admitted[r] = s.order
        s.context[r] += s.prompt_left[r]
        s.used += s.prompt_left[r]
        s.prompt_left[r] = 0
        first_token(s, L, r, 0.0)
        s.join(r)
        need += s.pos
    s.plan_step(True, preempted)


def next_step(s: EngineState, L: LoopState, p: Scheduler) -> int:
    """Plan the next step into the books and its price's key into ``L.key``: :data:`PLANNED`, or
    how the loop ends (it waits for the next send by itself)."""
    while True:
        if L.done >= L.requests:
            return DONE
        if L.steps >= L.max_steps:
            return TOO_MANY_STEPS
        now = L.t
        # An overlap scheduler planned this step while the last one ran (vLLM V1's batch queue,
        # SGLang's event_loop_overlap, TensorRT-LLM's _executor_loop_overlap): it sees what was
        # sent by the last step's start, and what came later waits a step more.
        send(s, L, L.step_start if L.late else now)
        if L.recv_every > 1:
            receive(s, L)
        if s.decoding_n == 0 and s.chunking_n == 0 and s.waiting_n == 0:
            if L.late and L.step_start < now:
                L.step_start = now  # nothing ran behind the last step: the scheduler looks again at once
                continue
            nxt = next_send(L)
            if nxt < _INF:
                L.t = now if now >= nxt else nxt
                L.step_start = L.t  # an idle engine plans its next step when a request comes
                L.last_step_s = 0.0  # and launches it behind no running step
                continue
            return DONE  # nothing left (cannot happen while requests remain)
        s.plan_n = 0
        if L.prefilled:
            admit_prefilled(s, L)
        else:
            p.schedule(s)
        nch = s.plan_n
        b = s.decoding_n if s.plan_decode else 0
        if b == 0 and nch == 0:
            if L.late and L.step_start < now:  # nothing fits: look again at what came meanwhile
                L.step_start = now
                continue
            nxt = next_send(L)
            if nxt < _INF and nxt > now:
                L.t = nxt
                L.step_start = nxt
                L.last_step_s = 0.0
                continue
            return NOTHING_FITS
        ctx = s.mean_context() if b else 0.0
        # Pure decode: advance to the next finish (or send, or KV limit, or policy decision) in one move.
        n = 1
        if b and nch == 0 and s.chunking_n == 0 and not s.plan_preempted:
            while s.heap_n > 0 and not s.decoding[s.heap_i[0]]:
                s.heap_pop()  # a preempted sequence's stale entry
            n = max(1, math.ceil(s.heap_g[0] - s.G - 1e-9))
            need = s.decode_tokens()
            if s.used + need * n > s.capacity:
                n = max(1, int(floordiv(s.capacity - s.used, float(max(1, need)))))
            quiet = p.quiet_steps(s)
            if quiet < n:
                n = max(1, int(quiet))
            if L.recv_every > 1:  # the stretch ends at the next poll
                n = min(n, max(1, L.recv_every - L.recv_count))
        L.b = b
        L.n = n
        key = L.key
        key[0] = b
        if n > 1:  # priced at the stretch's mean context
            key[1] = q7(ctx + (n - 1) * s.per_step / 2)
            key[2] = 0
            L.klen = 3
        else:
            key[1] = q7(ctx)
            key[2] = nch
            for c in range(nch):
                r = s.plan_r[c]
                q = s.plan_q[c]
                key[3 + 3 * c] = q
                key[4 + 3 * c] = q7(s.context[r])
                key[5 + 3 * c] = 1 if q == s.prompt_left[r] else 0
            L.klen = 3 + 3 * nch
        return PLANNED


def launch_hidden(L: LoopState, dt: float, wait: float, launch: float) -> float:
    """A step's time ``dt``, of which the GPU waits ``wait`` on the CPU's ``launch`` of it, less what
    an overlap scheduler hides of the wait behind the step before it.

    An overlap scheduler launches a step while the step before it still runs on the GPU
    (TensorRT-LLM's ``PyExecutor._executor_loop_overlap``: ``_forward_step`` for this batch, then
    ``_update_requests`` of the previous one; SGLang's ``event_loop_overlap``), so a launch-bound
    eager step's CPU work starts once the CPU has launched the step before it, not once that step
    ends, and the GPU waits only for what the previous step's time beyond its own launch covers not:

        step time = max(GPU work, launch) - min(wait, max(0, previous step's time - its launch))

    with ``wait = launch - GPU work``.  Behind a CUDA-graph decode step (no launch to speak of) the
    whole decode step is free; behind another launch-bound step (a first wave of prompts) none is.
    The first step after an idle spell has nothing before it (``L.last_step_s`` 0)."""
    if L.late and wait > 0.0:
        free = L.last_step_s - L.last_launch_s
        if free > 0.0:
            dt -= wait if wait < free else free
    L.last_launch_s = launch
    return dt


def run_step(s: EngineState, L: LoopState, p: Scheduler, dt: float, wait: float, launch: float) -> None:
    """The planned step runs for ``dt`` (its price; a stretch's price of one step), of which the GPU
    waits ``wait`` on the CPU's ``launch`` of it (:func:`launch_hidden`)."""
    b, n, nch = L.b, L.n, s.plan_n
    dt = launch_hidden(L, dt, wait, launch)
    if s.spec_k >= 0 and b > 0:
        dt += L.spec_add_s
    now = L.t
    dt1 = dt
    if n > 1:
        nxt = next_send(L)
        if nxt < _INF:
            n = max(1, min(n, math.ceil((nxt - now) / dt1)))
        dt = dt1 * n
    L.step_start = now + (dt - dt1)  # the start of the stretch's last step
    L.last_step_s = dt1
    now += dt
    L.t = now
    L.steps += n
    if L.recv_every > 1:  # the weight of the batch just run: 1 a decode step, 1,000 a prefill
        L.recv_count += 1000 if nch else n
    L.busy_time += dt
    L.batch_time += s.decoding_n * dt  # the running sequences, stepping or stalled by a prefill
    L.itl_sum += b * dt
    L.itl_n += b * n
    if not s.plan_decode:  # a prefill-only step stalls the decoding sequences: their next gap grows
        L.itl_sum += s.decoding_n * dt
    if b:
        gap_add(L, dt / n, b * n)
    nfin = 0
    if b:
        s.G += n
        s.used += b * s.per_step * n
        while s.heap_n > 0 and s.heap_g[0] <= s.G + 1e-9:
            r = s.heap_i[0]
            s.heap_pop()
            if s.decoding[r]:
                s.leave(r)
                L.finished[nfin] = r
                nfin += 1
    for c in range(nch):
        r = s.plan_r[c]
        q = s.plan_q[c]
        s.prompt_left[r] -= q
        s.context[r] += q
        s.used += q
        if s.prompt_left[r] == 0:
            s.chunk_done(r)
            first_token(s, L, r, L.overhead_s)
            if s.generated[r] >= s.osl[r]:
                L.finished[nfin] = r
                nfin += 1
            else:
                s.join(r)
    p.after_step(s, n)
    for f in range(nfin):
        r = L.finished[f]
        s.used -= s.context[r]
        s.promised -= s.final[r]
        L.done += 1
        L.last_finish = now
        if L.keep:
            k = L.n_kept
            L.kept_i[k] = r
            L.kept_f[3 * k] = s.arrival[r]
            L.kept_f[3 * k + 1] = s.first[r]
            L.kept_f[3 * k + 2] = now
            L.n_kept = k + 1
        if L.has_slots:  # the client has its last token the engine's overhead later (as its first)
            L.slots_free[L.slots_tail] = now + L.overhead_s
            L.slots_tail += 1
        if r >= L.warmup:
            L.measured_done += 1
            L.out_tokens += s.osl[r]
            L.in_tokens += L.isl[r]
            L.e2el[L.n_e2el] = now - s.arrival[r] + L.overhead_s
            L.n_e2el += 1
            if s.osl[r] > 1:
                L.tpot[L.n_tpot] = (now - s.first[r]) / (s.osl[r] - 1)
                L.n_tpot += 1


def core(s: EngineState, L: LoopState, p: Scheduler, t: Prices, dt_in: float, ok_in: int,
         wait_in: float, launch_in: float) -> int:
    """Run the loop until it ends (:data:`DONE`, :data:`TOO_MANY_STEPS`, :data:`NOTHING_FITS`) or
    needs a price: :data:`NEED_PRICE` plus 8 times the key's length (``L.klen``); call again with
    the price as ``dt_in``, whether it was measured as ``ok_in`` (-1: no price given), its launch
    wait as ``wait_in`` and its launch time as ``launch_in``."""
    while True:
        if L.phase == 0:
            status = next_step(s, L, p)
            if status != PLANNED:
                return status
            L.phase = 1
        if ok_in >= 0:  # the caller has priced the key: it joins the table
            e = price_add(t, L.key, L.klen)
            t.dt[e] = dt_in
            t.wait[e] = wait_in
            t.launch[e] = launch_in
            t.ok[e] = ok_in
            t.seen[e] = 0
            ok_in = -1
        else:
            e = price_find(t, L.key, L.klen)
            if e < 0:
                return NEED_PRICE + 8 * L.klen
        L.phase = 0
        if t.ok[e] == 0:
            L.measured = False
            if t.seen[e] != L.run:
                t.seen[e] = L.run
                if L.n_noted == len(L.noted):
                    L.noted = grown(L.noted)
                L.noted[L.n_noted] = e
                L.n_noted += 1
        run_step(s, L, p, t.dt[e], t.wait[e], t.launch[e])


FUNCTIONS: tuple[Any, ...] = (q7, send, receive, next_send, first_token, admit_prefilled, next_step,
                              launch_hidden, run_step)
"""The loop's functions that the compiled loop compiles from this text (:func:`core` itself, once
per policy)."""

remember_source(__name__)
