"""The engine loop of :func:`servesim.sim.batching.run_benchmark`, compiled with numba.

The same loop as the Python reference in :mod:`servesim.sim.batching` (with its three
policies, :mod:`servesim.sim.schedulers.vllm`, ``sglang`` and ``trtllm``, and the decode
worker's admission of prefilled requests), written over plain arrays so that numba
compiles it: each request is a row of ``RI`` (token counts) and ``RF`` (times and
fractional tokens), indexed by its send order; the waiting queue is a ring of indices,
the prompts being chunked a list, the decoding sequences a doubly linked list in the
order they began decoding (the reference's insertion-ordered dict), the finish heap two
arrays ordered as the reference's ``(G, index)`` tuples.  Every float is computed by
the same operations in the same order as the reference, so a run gives the same
:class:`~servesim.sim.batching.BenchResult` to the last bit: Python's ``round`` (half to
even), float ``//`` (CPython's ``float_floor_div``) and ``x ** 2`` (the C library's
``pow``, which differs from ``x * x`` in the last bit for about one value in a
thousand) are reproduced, and the speculation draws come from CPython's Mersenne
Twister, re-implemented here from the generator's state (``random.Random.getstate``).

**Prices.**  The compiled core cannot call the step model.  It looks each step's price
up in a table of flat arrays (:class:`PriceTable`, one per step model and positions,
beside the reference's dict of prices); on a miss it stops with status
:data:`NEED_PRICE` and the key in ``key`` (``[b, q(ctx), chunks, (tokens, q(context),
samples) ...]``), the driver (:func:`run`) prices it as the reference does (through
the same dict) and makes room for it, and the core, called again, adds it to the table
and goes on from where it stopped (the step's plan waits in the state arrays).  Likewise
:data:`NEED_ROOM` when the finish heap or the map of gaps between tokens needs larger
arrays.

**Speed.**  Each piece is compiled without numba's reference counting (``_nrt=False``:
the loop allocates nothing, and counting the references of a dozen arrays at every call
took most of the time) and inlined into the core (``forceinline``: a call passes each
array as a dozen words): about 0.2 microseconds per pass of the loop (a step, or a
stretch of decode steps) on this project's 2-core machine.  Compiling takes ~15 s the
first time on a machine; numba's disk cache then loads it in ~0.5 s per process
(:func:`compile_kernels` does either up front).

**Not compiled** (``run_benchmark`` runs the Python loop): a policy that is not one of
the three shipped classes, or whose ``schedule``, ``after_step``, ``quiet_steps`` or
``prepare`` was replaced on the instance; inputs of other types than the plain Python
ones the loop expects (numpy scalars, integer send times, see
``batching._compiles``).  Everything else (closed loops and request rates, prefilled
decode workers, speculation, given lengths, warm-up, preemption and SGLang's
retraction, chunked prefill, data-parallel ranks, MoE step models) runs compiled.
Nothing here prints.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numba
import numpy as np
from numpy.typing import NDArray

from servesim.sim.schedulers import sglang as _sglang
from servesim.sim.schedulers import vllm as _vllm
from servesim.sim.schedulers.base import Scheduler

__all__ = ["DONE", "KINDS", "NOTHING_FITS", "TOO_MANY_STEPS", "LoopInputs", "PriceTable", "compile_kernels",
           "run", "table_for"]

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]


def _jit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Compiled, cached on disk, and without numba's reference counting (``_nrt=False``): the loop
    allocates nothing, and counting the references of a dozen arrays at every call of a piece of
    the loop took most of its time."""
    jit: Any = numba.njit
    return cast(Callable[..., Any], jit(cache=True, _nrt=False)(fn))


def _piece(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A piece of the loop: as :func:`_jit`, and inlined into its callers by LLVM (a call would
    pass each of its arrays as a dozen words on the stack)."""
    jit: Any = numba.njit
    return cast(Callable[..., Any], jit(cache=True, _nrt=False, forceinline=True)(fn))


# Statuses the core returns with.
DONE = 0
NEED_PRICE = 1  # the step's key is in ``key``: price it, add it to the table, call again
NEED_ROOM = 2  # the finish heap or the gap map needs larger arrays: grow them, call again
TOO_MANY_STEPS = 3
NOTHING_FITS = 4

# Policies, as the core knows them.
VLLM, SGLANG, TRTLLM = 0, 1, 2

# Columns of RI (one row per request, int64).
PL, CTX, ADM, OSL, ISL, DEC, PREV, NEXT = range(8)
# Columns of RF (float64).
ARR, GEN, FIRST, FINAL, G0, OFF = range(6)

# The int state ``si``.
(S_PHASE, S_SENT, S_DONE, S_STEPS, S_ORDER, S_PREEMPT, S_LONG, S_MDONE, S_OUT, S_IN,
 S_HN, S_WHEAD, S_WN, S_CN, S_DHEAD, S_DTAIL, S_DN, S_PHEAD, S_SHEAD, S_STAIL,
 S_PDEC, S_PPRE, S_PNCH, S_B, S_N, S_NTTFT, S_NTPOT, S_NKEPT, S_MEAS, S_NLOG, S_MT, S_GN,
 S_KLEN, S_POK, S_TRTVIS) = range(35)
S_SIZE = 35
# The float state ``sf``.
(F_T, F_G, F_USED, F_PROM, F_CTXOFF, F_OSLSUM, F_GENOFF, F_ITLS, F_ITLN, F_BATCH, F_BUSY,
 F_LAST, F_START, F_RATIO, F_PDT) = range(15)
F_SIZE = 15
# The int configuration ``ci``.
(C_KIND, C_PREFILLED, C_CAP, C_SLOTS, C_BUDGET, C_CHUNKCAP, C_RANKS, C_POS, C_WARMUP, C_N,
 C_MAXSTEPS, C_HASSLOTS, C_SPECK, C_RESERVE, C_MIXED, C_MAXPREFILL, C_TRTCHUNK, C_KEEP, C_RUN,
 C_QUIET, C_RETRACT, C_TRTNEW) = range(22)
C_SIZE = 22
# The float configuration ``cf``.
(D_PERSTEP, D_OVERHEAD, D_SPECADD, D_ALPHA, D_CLIP, D_LONGOUT, D_MINRATIO, D_DECAY, D_WATERMARK,
 D_PREFWATER) = range(10)
D_SIZE = 10

HEAP_START = 2
"""The finish heap starts with room for this many entries per request (it grows, by
:data:`NEED_ROOM`, when preemptions leave many stale entries in it)."""

GAPS_START = 1024
"""The map of gaps between tokens starts with room for this many distinct gaps (it grows)."""

_INF = math.inf


# --------------------------------------------------------------------------- small pieces


def _q7_py(x: float) -> int:
    """``batching._q``: ``x`` rounded down to its 7 leading bits (exact below 128)."""
    n = int(x)
    shift = 0
    while (n >> shift) >= 128:
        shift += 1
    return (n >> shift) << shift


_q7 = _piece(_q7_py)


def _floordiv_py(a: float, b: float) -> float:
    """CPython's float ``a // b`` (``float_floor_div``: fmod, then the floor of the exact quotient)."""
    mod = np.fmod(a, b)
    div = (a - mod) / b
    if mod != 0.0:
        if (b < 0.0) != (mod < 0.0):
            div -= 1.0
    if div != 0.0:
        floordiv = np.floor(div)
        if div - floordiv > 0.5:
            floordiv += 1.0
    else:
        floordiv = np.copysign(0.0, a / b)
    return float(floordiv)


_floordiv = _piece(_floordiv_py)


def _mt_u32_py(mt: I64, si: I64) -> int:
    """The next 32-bit word of CPython's Mersenne Twister (``genrand_uint32`` in ``_randommodule.c``)."""
    i = si[S_MT]
    if i >= 624:
        for kk in range(624):
            y = (mt[kk] & 0x80000000) | (mt[(kk + 1) % 624] & 0x7FFFFFFF)
            v = mt[(kk + 397) % 624] ^ (y >> 1)
            if y & 1:
                v ^= 0x9908B0DF
            mt[kk] = v
        i = 0
    y = mt[i]
    si[S_MT] = i + 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return int(y)


_mt_u32 = _piece(_mt_u32_py)


def _mt_random_py(mt: I64, si: I64) -> float:
    """CPython's ``random.random()``: 53 bits from two words, ``(a 2^26 + b) / 2^53``."""
    a = _mt_u32(mt, si) >> 5
    b = _mt_u32(mt, si) >> 6
    return float((a * 67108864.0 + b) * (1.0 / 9007199254740992.0))


_mt_random = _piece(_mt_random_py)


def _hash_py(key: I64, klen: int) -> int:
    """A 64-bit hash of ``key[:klen]`` (FNV-1a over the words, then a splitmix finalizer)."""
    h = -3750763034362895579  # 0xcbf29ce484222325 as int64
    for j in range(klen):
        h ^= key[j]
        h *= 1099511628211
    h ^= (h >> 31) & 0x1FFFFFFFF
    h *= -4658895280553007687  # 0xbf58476d1ce4e5b9
    h ^= (h >> 29) & 0x7FFFFFFFF
    return h


_hash = _piece(_hash_py)


# --------------------------------------------------------------------------- the price table


def _table_find_py(slots: I64, th: I64, tks: I64, tkl: I64, tkp: I64, key: I64, klen: int) -> int:
    """The entry of ``key[:klen]`` in the table, or -1."""
    h = _hash(key, klen)
    mask = slots.shape[0] - 1
    s = h & mask
    while True:
        e = slots[s]
        if e < 0:
            return -1
        if th[e] == h and tkl[e] == klen:
            st = tks[e]
            same = True
            for j in range(klen):
                if tkp[st + j] != key[j]:
                    same = False
                    break
            if same:
                return int(e)
        s = (s + 1) & mask


_table_find = _piece(_table_find_py)


def _table_add_py(slots: I64, th: I64, tks: I64, tkl: I64, tkp: I64, meta: I64, key: I64, klen: int) -> int:
    """Add ``key[:klen]`` as a new entry (the caller made room); its number."""
    e = meta[0]
    h = _hash(key, klen)
    st = meta[1]
    for j in range(klen):
        tkp[st + j] = key[j]
    th[e] = h
    tks[e] = st
    tkl[e] = klen
    meta[0] = e + 1
    meta[1] = st + klen
    mask = slots.shape[0] - 1
    s = h & mask
    while slots[s] >= 0:
        s = (s + 1) & mask
    slots[s] = e
    return int(e)


_table_add = _piece(_table_add_py)


def _rehash_py(slots: I64, hashes: I64, count: int) -> None:
    """Place entries ``0 .. count - 1`` (by their hashes) into the empty open-addressed ``slots``."""
    mask = slots.shape[0] - 1
    for e in range(count):
        s = hashes[e] & mask
        while slots[s] >= 0:
            s = (s + 1) & mask
        slots[s] = e


_rehash = _jit(_rehash_py)


class PriceTable:
    """The step prices of one step model at one ``(positions, kv_context)``, as flat arrays.

    Entry ``e`` holds a key (``kpool[kstart[e]:kstart[e] + klen[e]]``), its step time
    ``dt[e]`` (seconds), whether it was measured (``ok[e]``) and its notes
    (``notes[e]``); ``slots`` is an open-addressed index over the keys' hashes, at most
    half full.  ``seen[e]`` is the last run that used entry ``e`` (for the notes).
    """

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = capacity
        self.reset()
        self.runs = 0

    def reset(self) -> None:
        cap = self.capacity
        self.slots = np.full(2 * cap, -1, np.int64)
        self.hash = np.zeros(cap, np.int64)
        self.kstart = np.zeros(cap, np.int64)
        self.klen = np.zeros(cap, np.int64)
        self.kpool = np.zeros(8 * cap, np.int64)
        self.dt = np.zeros(cap, np.float64)
        self.ok = np.zeros(cap, np.int64)
        self.seen = np.zeros(cap, np.int64)
        self.meta = np.zeros(2, np.int64)  # entries, key words used
        self.notes: list[tuple[str, ...]] = []

    @property
    def entries(self) -> int:
        return int(self.meta[0])

    def reserve(self, klen: int) -> None:
        """Make room for one more entry with a key of ``klen`` words (the core adds it)."""
        e, used = int(self.meta[0]), int(self.meta[1])
        cap = self.dt.shape[0]
        if e + 1 > cap:
            new = 2 * cap
            for name in ("hash", "kstart", "klen", "dt", "ok", "seen"):
                old = getattr(self, name)
                grown = np.zeros(new, old.dtype)
                grown[:cap] = old
                setattr(self, name, grown)
            self.slots = np.full(2 * new, -1, np.int64)
            _rehash(self.slots, self.hash, e)
        if used + klen > self.kpool.shape[0]:
            grown = np.zeros(2 * (used + klen), np.int64)
            grown[:used] = self.kpool[:used]
            self.kpool = grown


# --------------------------------------------------------------------------- the books


def _heap_push_py(hg: F64, hid: I64, si: I64, g: float, idx: int) -> None:
    """Push ``(g, idx)`` onto the finish heap (``heapq.heappush``'s order on tuples)."""
    pos = si[S_HN]
    si[S_HN] = pos + 1
    while pos > 0:
        parent = (pos - 1) >> 1
        pg = hg[parent]
        pi = hid[parent]
        if g < pg or (g == pg and idx < pi):
            hg[pos] = pg
            hid[pos] = pi
            pos = parent
        else:
            break
    hg[pos] = g
    hid[pos] = idx


_heap_push = _piece(_heap_push_py)


def _heap_pop_py(hg: F64, hid: I64, si: I64) -> None:
    """Remove the smallest ``(g, idx)`` of the finish heap."""
    n = si[S_HN] - 1
    si[S_HN] = n
    if n == 0:
        return
    lg = hg[n]
    li = hid[n]
    pos = 0
    while True:
        child = 2 * pos + 1
        if child >= n:
            break
        right = child + 1
        if right < n and (hg[right] < hg[child] or (hg[right] == hg[child] and hid[right] < hid[child])):
            child = right
        cg = hg[child]
        if cg < lg or (cg == lg and hid[child] < li):
            hg[pos] = cg
            hid[pos] = hid[child]
            pos = child
        else:
            break
    hg[pos] = lg
    hid[pos] = li


_heap_pop = _piece(_heap_pop_py)


def _steps_to_finish_py(i: int, RI: I64, RF: F64, ci: I64, cf: F64, si: I64, mt: I64) -> float:
    """``run_benchmark.steps_to_finish``: decode steps sequence ``i`` needs (drawn with speculation)."""
    per_step = cf[D_PERSTEP]
    left = RI[i, OSL] - RF[i, GEN]
    k = ci[C_SPECK]
    if k < 0 or left <= 0:
        return float((left if left > 0.0 else 0.0) / per_step)
    alpha = cf[D_ALPHA]
    steps = 0
    while left > 0:
        j = 0
        while j < k and _mt_random(mt, si) < alpha:
            j += 1
        left -= j + 1
        steps += 1
    return float(steps)


_steps_to_finish = _piece(_steps_to_finish_py)


def _join_py(i: int, RI: I64, RF: F64, ci: I64, cf: F64, si: I64, sf: F64, hg: F64, hid: I64,
             mt: I64) -> None:
    """``EngineState.join``: ``i`` starts (or resumes) decoding."""
    tail = si[S_DTAIL]
    RI[i, DEC] = 1
    RI[i, PREV] = tail
    RI[i, NEXT] = -1
    if tail >= 0:
        RI[tail, NEXT] = i
    else:
        si[S_DHEAD] = i
    si[S_DTAIL] = i
    si[S_DN] += 1
    G = sf[F_G]
    per_step = cf[D_PERSTEP]
    off = RI[i, CTX] - G * per_step
    RF[i, G0] = G
    RF[i, OFF] = off
    sf[F_CTXOFF] += off
    sf[F_OSLSUM] += RI[i, OSL]
    sf[F_GENOFF] += RF[i, GEN] - G * per_step
    if RI[i, OSL] > cf[D_LONGOUT]:
        si[S_LONG] += 1
    _heap_push(hg, hid, si, G + _steps_to_finish(i, RI, RF, ci, cf, si, mt), i)


_join = _piece(_join_py)


def _leave_py(i: int, RI: I64, RF: F64, cf: F64, si: I64, sf: F64) -> None:
    """``EngineState.leave``: ``i`` stops decoding; its tokens are brought up to date."""
    p = RI[i, PREV]
    nx = RI[i, NEXT]
    if p >= 0:
        RI[p, NEXT] = nx
    else:
        si[S_DHEAD] = nx
    if nx >= 0:
        RI[nx, PREV] = p
    else:
        si[S_DTAIL] = p
    RI[i, DEC] = 0
    si[S_DN] -= 1
    g0 = RF[i, G0]
    off = RF[i, OFF]
    G = sf[F_G]
    per_step = cf[D_PERSTEP]
    sf[F_CTXOFF] -= off
    sf[F_OSLSUM] -= RI[i, OSL]
    sf[F_GENOFF] -= RF[i, GEN] - g0 * per_step
    if RI[i, OSL] > cf[D_LONGOUT]:
        si[S_LONG] -= 1
    RI[i, CTX] = int(np.rint(off + G * per_step))  # Python's round(): half to even
    RF[i, GEN] += (G - g0) * per_step


_leave = _piece(_leave_py)


def _chunk_remove_py(cq: I64, si: I64, i: int) -> None:
    """``list.remove``: take ``i`` out of the prompts being chunked."""
    n = si[S_CN]
    j = 0
    while cq[j] != i:
        j += 1
    for m in range(j, n - 1):
        cq[m] = cq[m + 1]
    si[S_CN] = n - 1


_chunk_remove = _piece(_chunk_remove_py)


def _preempt_py(v: int, RI: I64, RF: F64, cf: F64, si: I64, sf: F64, cq: I64, wq: I64, n_total: int) -> None:
    """``EngineState.preempt``: ``v`` gives its KV back and waits first in line (as a new request)."""
    if RI[v, DEC]:
        _leave(v, RI, RF, cf, si, sf)
    else:
        _chunk_remove(cq, si, v)
    sf[F_USED] -= RI[v, CTX]
    sf[F_PROM] -= RF[v, FINAL]
    si[S_PREEMPT] += 1
    RI[v, PL] = RI[v, CTX] + RI[v, PL]
    RI[v, CTX] = 0
    RI[v, ADM] = 0
    RF[v, FINAL] = 0.0
    h = si[S_WHEAD] - 1
    if h < 0:
        h += n_total
    wq[h] = v
    si[S_WHEAD] = h
    si[S_WN] += 1


_preempt = _piece(_preempt_py)


def _make_room_py(RI: I64, RF: F64, ci: I64, cf: F64, si: I64, sf: F64, cq: I64, wq: I64) -> bool:
    """``EngineState.make_room_for_decode``: preempt the newest running until the next step fits."""
    preempted = False
    while si[S_DN] > 0 and sf[F_USED] + si[S_DN] * ci[C_POS] > ci[C_CAP]:
        last = si[S_DTAIL]  # newest_running: the last to decode, or the last prompt if admitted later
        if si[S_CN] > 0 and RI[cq[si[S_CN] - 1], ADM] > RI[last, ADM]:
            last = cq[si[S_CN] - 1]
        _preempt(last, RI, RF, cf, si, sf, cq, wq, ci[C_N])
        preempted = True
    return preempted


_make_room = _piece(_make_room_py)


def _admit_py(i: int, RI: I64, RF: F64, si: I64, sf: F64, cq: I64) -> None:
    """``EngineState.admit``: ``i`` leaves the queue and starts its prompt (its final size promised)."""
    si[S_ORDER] += 1
    RI[i, ADM] = si[S_ORDER]
    final = RI[i, CTX] + RI[i, PL] + (RI[i, OSL] - RF[i, GEN])
    RF[i, FINAL] = final
    sf[F_PROM] += final
    cq[si[S_CN]] = i
    si[S_CN] += 1


_admit = _piece(_admit_py)


def _popleft_py(wq: I64, si: I64, n_total: int) -> int:
    i = wq[si[S_WHEAD]]
    h = si[S_WHEAD] + 1
    si[S_WHEAD] = 0 if h == n_total else h
    si[S_WN] -= 1
    return int(i)


_popleft = _piece(_popleft_py)


def _first_token_py(i: int, overhead: float, RF: F64, ci: I64, si: I64, sf: F64, ttft: F64) -> None:
    """``run_benchmark.first_token``."""
    if RF[i, FIRST] < 0:
        t = sf[F_T]
        RF[i, FIRST] = t
        RF[i, GEN] = 1.0
        if i >= ci[C_WARMUP]:
            ttft[si[S_NTTFT]] = t - RF[i, ARR] + overhead
            si[S_NTTFT] += 1
            if RF[i, ARR] < sf[F_START]:
                sf[F_START] = RF[i, ARR]


_first_token = _piece(_first_token_py)


# --------------------------------------------------------------------------- the policies


def _schedule_vllm_py(RI: I64, RF: F64, ci: I64, cf: F64, si: I64, sf: F64, cq: I64, wq: I64,
                      plan_r: I64, plan_q: I64) -> None:
    """``VllmScheduler.schedule``."""
    cap = ci[C_CAP]
    preempted = _make_room(RI, RF, ci, cf, si, sf, cq, wq)
    need = si[S_DN] * ci[C_POS]
    left = ci[C_BUDGET] - need
    nch = 0
    for c in range(si[S_CN]):
        if left <= 0:
            break
        r = cq[c]
        q = min(RI[r, PL], left, ci[C_CHUNKCAP])
        if q > cap - sf[F_USED] - need:
            break
        plan_r[nch] = r
        plan_q[nch] = q
        nch += 1
        left -= q
        need += q
    watermark = cf[D_WATERMARK]
    headroom = si[S_DN] * ci[C_POS] + watermark * cap
    while not preempted and si[S_WN] > 0 and left > 0 and si[S_DN] + si[S_CN] < ci[C_SLOTS]:
        r = wq[si[S_WHEAD]]
        final = RI[r, CTX] + RI[r, PL] + (RI[r, OSL] - RF[r, GEN])
        if ci[C_RESERVE] and cap - sf[F_PROM] - watermark * cap < final:
            break
        q = min(RI[r, PL], left, ci[C_CHUNKCAP])
        if q > int(cap - sf[F_USED] - need - headroom):
            break
        _popleft(wq, si, ci[C_N])
        _admit(r, RI, RF, si, sf, cq)
        plan_r[nch] = r
        plan_q[nch] = q
        nch += 1
        left -= q
        need += q
    si[S_PDEC] = 1
    si[S_PNCH] = nch
    si[S_PPRE] = 1 if preempted else 0


_schedule_vllm = _piece(_schedule_vllm_py)


def _sglang_reserved_py(RI: I64, RF: F64, cf: F64, si: I64, sf: F64, cq: I64) -> float:
    """``SglangScheduler._reserved``: ratio x the clipped output the running requests may still write."""
    clip = cf[D_CLIP]
    per_step = cf[D_PERSTEP]
    G = sf[F_G]
    if si[S_LONG] == 0:
        total = sf[F_OSLSUM] - (sf[F_GENOFF] + si[S_DN] * G * per_step)  # remaining_output()
    else:
        total = 0.0
        r = si[S_DHEAD]
        while r >= 0:
            x = RI[r, OSL] - (RF[r, GEN] + (G - RF[r, G0]) * per_step)
            total += x if x <= clip else clip
            r = RI[r, NEXT]
    for c in range(si[S_CN]):
        r = cq[c]
        x = RI[r, OSL] - RF[r, GEN]
        total += x if x <= clip else clip
    return float(sf[F_RATIO] * (total if total > 0.0 else 0.0))


_sglang_reserved = _piece(_sglang_reserved_py)


def _schedule_sglang_py(RI: I64, RF: F64, ci: I64, cf: F64, si: I64, sf: F64, cq: I64, wq: I64,
                        plan_r: I64, plan_q: I64) -> None:
    """``SglangScheduler.schedule``."""
    cap = ci[C_CAP]
    chunk_left = ci[C_BUDGET]
    input_left = ci[C_MAXPREFILL]
    nch = 0
    cut = 0
    for c in range(si[S_CN]):
        r = cq[c]
        q = min(RI[r, PL], chunk_left, input_left, ci[C_CHUNKCAP])
        if q <= 0 or q > cap - sf[F_USED]:
            break
        plan_r[nch] = r
        plan_q[nch] = q
        nch += 1
        chunk_left -= q
        input_left -= q
        if q < RI[r, PL]:
            cut += 1
    if si[S_WN] > 0 and cut < ci[C_RANKS]:
        rem = cap - sf[F_USED] - _sglang_reserved(RI, RF, cf, si, sf, cq)
        clip = cf[D_CLIP]
        while si[S_WN] > 0 and chunk_left > 0 and si[S_DN] + si[S_CN] < ci[C_SLOTS]:
            r = wq[si[S_WHEAD]]
            x = RI[r, OSL] - RF[r, GEN]
            total = RI[r, PL] + (x if x <= clip else clip)
            if total >= rem:
                break
            if RI[r, PL] > input_left and nch > 0:
                break
            q = min(RI[r, PL], chunk_left, ci[C_CHUNKCAP])
            _popleft(wq, si, ci[C_N])
            _admit(r, RI, RF, si, sf, cq)
            plan_r[nch] = r
            plan_q[nch] = q
            nch += 1
            chunk_left -= q
            input_left -= q
            rem -= total
            if q < RI[r, PL]:
                cut += 1
                if cut >= ci[C_RANKS]:
                    break
    if nch > 0:
        si[S_PDEC] = ci[C_MIXED]
        si[S_PNCH] = nch
        si[S_PPRE] = 0
        return
    preempted = _make_room(RI, RF, ci, cf, si, sf, cq, wq)
    if preempted:
        total_osl = 0
        decoded = 0.0
        G = sf[F_G]
        per_step = cf[D_PERSTEP]
        r = si[S_DHEAD]
        while r >= 0:
            total_osl += RI[r, OSL]
            decoded += RF[r, GEN] + (G - RF[r, G0]) * per_step
            r = RI[r, NEXT]
        if total_osl:
            x = (decoded + ci[C_RETRACT] * si[S_DN]) / total_osl
            sf[F_RATIO] = x if x < 1.0 else 1.0
        else:
            sf[F_RATIO] = 1.0
    si[S_PDEC] = 1
    si[S_PNCH] = 0
    si[S_PPRE] = 1 if preempted else 0


_schedule_sglang = _piece(_schedule_sglang_py)


def _schedule_trtllm_py(RI: I64, RF: F64, ci: I64, si: I64, sf: F64, cq: I64, wq: I64,
                        plan_r: I64, plan_q: I64) -> None:
    """``TrtllmScheduler.schedule``."""
    chunked = ci[C_TRTCHUNK]
    left = ci[C_BUDGET] - si[S_DN] * ci[C_POS]
    nch = 0
    for c in range(si[S_CN]):
        if left <= 0:
            break
        r = cq[c]
        q = min(RI[r, PL], left, ci[C_CHUNKCAP])
        if not chunked and q < RI[r, PL]:
            break
        plan_r[nch] = r
        plan_q[nch] = q
        nch += 1
        left -= q
    if ci[C_TRTNEW] > 0:  # requests reach the scheduler C_TRTNEW an iteration (TrtllmScheduler item 5)
        si[S_TRTVIS] = min(si[S_WN], si[S_TRTVIS] + ci[C_TRTNEW])
    taken = 0
    while si[S_WN] > 0 and left > 0 and si[S_DN] + si[S_CN] < ci[C_SLOTS]:
        if ci[C_TRTNEW] > 0 and taken >= si[S_TRTVIS]:
            break
        r = wq[si[S_WHEAD]]
        final = RI[r, CTX] + RI[r, PL] + (RI[r, OSL] - RF[r, GEN])
        if sf[F_PROM] + final > ci[C_CAP]:
            break
        if not chunked and (RI[r, PL] > left or RI[r, PL] * ci[C_RANKS] + si[S_DN] * ci[C_POS]
                            > ci[C_CHUNKCAP] * ci[C_RANKS]):
            break
        taken += 1
        q = min(RI[r, PL], left, ci[C_CHUNKCAP])
        _popleft(wq, si, ci[C_N])
        _admit(r, RI, RF, si, sf, cq)
        plan_r[nch] = r
        plan_q[nch] = q
        nch += 1
        left -= q
    if ci[C_TRTNEW] > 0:
        si[S_TRTVIS] -= taken
    si[S_PDEC] = 1
    si[S_PNCH] = nch
    si[S_PPRE] = 0


_schedule_trtllm = _piece(_schedule_trtllm_py)


def _admit_prefilled_py(RI: I64, RF: F64, ci: I64, cf: F64, si: I64, sf: F64, cq: I64, wq: I64,
                        hg: F64, hid: I64, mt: I64, ttft: F64) -> None:
    """``batching._admit_prefilled``: a decode worker takes arrived caches that fit."""
    cap = ci[C_CAP]
    preempted = _make_room(RI, RF, ci, cf, si, sf, cq, wq)
    need = si[S_DN] * ci[C_POS]
    headroom = si[S_DN] * ci[C_POS] + cf[D_PREFWATER] * cap
    while not preempted and si[S_WN] > 0 and si[S_DN] + si[S_CN] < ci[C_SLOTS]:
        r = wq[si[S_WHEAD]]
        if RI[r, PL] + RI[r, OSL] > cap - sf[F_USED] - need - headroom:
            break
        _popleft(wq, si, ci[C_N])
        si[S_ORDER] += 1
        RI[r, ADM] = si[S_ORDER]
        RI[r, CTX] += RI[r, PL]
        sf[F_USED] += RI[r, PL]
        RI[r, PL] = 0
        _first_token(r, 0.0, RF, ci, si, sf, ttft)
        _join(r, RI, RF, ci, cf, si, sf, hg, hid, mt)
        need += ci[C_POS]
    si[S_PDEC] = 1
    si[S_PNCH] = 0
    si[S_PPRE] = 1 if preempted else 0


_admit_prefilled = _piece(_admit_prefilled_py)


# --------------------------------------------------------------------------- the client


def _send_py(now: float, RI: I64, RF: F64, ci: I64, si: I64, pend: F64, slots: F64, wq: I64,
             isl: I64, osl: I64) -> None:
    """``run_benchmark.send``: every request due by ``now`` with a free client slot joins the queue."""
    n_total = ci[C_N]
    has_slots = ci[C_HASSLOTS]
    while si[S_PHEAD] < n_total and pend[si[S_PHEAD]] <= now and (
            not has_slots or si[S_SHEAD] < si[S_STAIL]):
        at = pend[si[S_PHEAD]]
        si[S_PHEAD] += 1
        if has_slots:
            free = slots[si[S_SHEAD]]
            si[S_SHEAD] += 1
            if free > at:
                at = free
        i = si[S_SENT]
        RF[i, ARR] = at
        RF[i, GEN] = 0.0
        RF[i, FIRST] = -1.0
        RF[i, FINAL] = 0.0
        RI[i, PL] = isl[i]
        RI[i, CTX] = 0
        RI[i, ADM] = 0
        RI[i, OSL] = osl[i]
        RI[i, ISL] = isl[i]
        RI[i, DEC] = 0
        j = si[S_WHEAD] + si[S_WN]
        wq[j - n_total if j >= n_total else j] = i
        si[S_WN] += 1
        si[S_SENT] = i + 1


_send = _piece(_send_py)


def _next_send_py(ci: I64, si: I64, pend: F64) -> float:
    """``run_benchmark.next_send``: when the next request can be sent without a finish (inf: after one)."""
    if si[S_PHEAD] >= ci[C_N] or (ci[C_HASSLOTS] and si[S_SHEAD] >= si[S_STAIL]):
        return _INF
    return float(pend[si[S_PHEAD]])


_next_send = _piece(_next_send_py)


def _gap_slot_py(gap: float, mask: int) -> int:
    """Where the gap map looks for ``gap`` first (a hash of its mantissa and exponent)."""
    m, ex = math.frexp(gap)
    h = (int(m * 9007199254740992.0) * 31 + ex) * -4658895280553007687
    return (h ^ ((h >> 32) & 0xFFFFFFFF)) & mask


_gap_slot = _piece(_gap_slot_py)


def _gap_add_py(gk: F64, gv: F64, gs: I64, si: I64, gap: float, tokens: float) -> None:
    """``gaps[gap] = gaps.get(gap, 0.0) + tokens``, in a map of first-insertion order."""
    mask = gs.shape[0] - 1
    s = _gap_slot(gap, mask)
    while True:
        e = gs[s]
        if e < 0:
            e = si[S_GN]
            si[S_GN] = e + 1
            gk[e] = gap
            gv[e] = 0.0 + tokens
            gs[s] = e
            return
        if gk[e] == gap:
            gv[e] = gv[e] + tokens
            return
        s = (s + 1) & mask


_gap_add = _piece(_gap_add_py)


def _rehash_gaps_py(gk: F64, gs: I64, count: int) -> None:
    """Index the gap map's entries ``0 .. count - 1`` anew in the empty ``gs``."""
    mask = gs.shape[0] - 1
    for e in range(count):
        s = _gap_slot(gk[e], mask)
        while gs[s] >= 0:
            s = (s + 1) & mask
        gs[s] = e


_rehash_gaps = _jit(_rehash_gaps_py)


def gap_percentile_py(gk: F64, gv: F64, order: I64, count: int, q: int) -> float:
    """``batching._weighted_pct`` of the gap map (``order``: its keys' argsort): the q-th
    percentile of the gaps between tokens, each weighted by the tokens that had it."""
    total = 0.0
    for e in range(count):
        total += gv[e]
    if total <= 0:
        return math.nan
    acc = 0.0
    for j in order:
        acc += gv[j]
        if acc >= total * q / 100.0:
            return float(gk[j])
    return float(gk[order[count - 1]])


gap_percentile = _jit(gap_percentile_py)


def _pct_sorted_py(s: F64, count: int, q: int) -> float:
    """``batching._pct_sorted``: the q-th percentile of sorted values, interpolated linearly."""
    pos = (count - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, count - 1)
    return float(s[lo] + (s[hi] - s[lo]) * (pos - lo))


_pct_sorted = _jit(_pct_sorted_py)


def sample_stats_py(x: F64, s: F64, count: int, two: float) -> tuple[float, float, float, float]:
    """Mean, median, 99th percentile and standard deviation of ``x[:count]`` (``s``: the same values
    sorted), computed as ``batching._mean_pct_std`` computes them from a list: sums left to right,
    percentiles interpolated between sorted values, and the squares by the C library's ``pow``
    (``two`` is 2.0, given at run time so that the compiler keeps the call: ``pow(d, 2.0)`` and
    ``d * d`` differ in the last bit for about one value in a thousand)."""
    if count == 0:
        return math.nan, math.nan, math.nan, math.nan
    total = 0.0
    for i in range(count):
        total += x[i]
    mean = total / count
    sq = 0.0
    for i in range(count):
        sq += abs(x[i] - mean) ** two  # CPython's float ** int: pow() of the absolute value
    return mean, _pct_sorted(s, count, 50), _pct_sorted(s, count, 99), math.sqrt(sq / count)


sample_stats = _jit(sample_stats_py)


def _stats(x: F64, count: int) -> tuple[float, float, float, float]:
    """:func:`sample_stats` of ``x[:count]`` (sorted by numpy: the same values in the same order)."""
    mean, med, p99, std = sample_stats(x, np.sort(x[:count]), count, 2.0)
    return float(mean), float(med), float(p99), float(std)


# --------------------------------------------------------------------------- the loop


def _core_py(ci: I64, cf: F64, si: I64, sf: F64, RI: I64, RF: F64, hg: F64, hid: I64, wq: I64, cq: I64,
             pend: F64, slots: F64, isl: I64, osl: I64, plan_r: I64, plan_q: I64, fin: I64, key: I64,
             ttft: F64, tpot: F64, kept_i: I64, kept_f: F64, gk: F64, gv: F64, gs: I64, mt: I64,
             t_slots: I64, t_hash: I64, t_kstart: I64, t_klen: I64, t_kpool: I64, t_meta: I64, t_dt: F64,
             t_ok: I64, t_seen: I64, nlog: I64) -> int:
    """Run ``run_benchmark``'s loop until it ends or needs something from Python (the status)."""
    n_total = ci[C_N]
    kind = ci[C_KIND]
    pos = ci[C_POS]
    cap = ci[C_CAP]
    per_step = cf[D_PERSTEP]
    while True:
        if si[S_PHASE] == 0:
            if si[S_DONE] >= n_total:
                return DONE
            if si[S_STEPS] >= ci[C_MAXSTEPS]:
                return TOO_MANY_STEPS
            if si[S_HN] + n_total + 1 > hg.shape[0] or 2 * (si[S_GN] + 1) > gs.shape[0]:
                return NEED_ROOM
            t = sf[F_T]
            _send(t, RI, RF, ci, si, pend, slots, wq, isl, osl)
            if si[S_DN] == 0 and si[S_CN] == 0 and si[S_WN] == 0:
                nxt = _next_send(ci, si, pend)
                if nxt < _INF:
                    sf[F_T] = t if t >= nxt else nxt
                    continue
                return DONE  # nothing left (cannot happen while requests remain)
            if ci[C_PREFILLED]:
                _admit_prefilled(RI, RF, ci, cf, si, sf, cq, wq, hg, hid, mt, ttft)
            elif kind == VLLM:
                _schedule_vllm(RI, RF, ci, cf, si, sf, cq, wq, plan_r, plan_q)
            elif kind == SGLANG:
                _schedule_sglang(RI, RF, ci, cf, si, sf, cq, wq, plan_r, plan_q)
            else:
                _schedule_trtllm(RI, RF, ci, si, sf, cq, wq, plan_r, plan_q)
            nch = si[S_PNCH]
            b = si[S_DN] if si[S_PDEC] else 0
            if b == 0 and nch == 0:
                nxt = _next_send(ci, si, pend)
                if nxt < _INF and nxt > t:
                    sf[F_T] = nxt
                    continue
                return NOTHING_FITS
            ctx = sf[F_CTXOFF] / b + sf[F_G] * per_step if b else 0.0  # mean_context()
            n = 1
            if b and nch == 0 and si[S_CN] == 0 and not si[S_PPRE]:
                while si[S_HN] > 0 and not RI[hid[0], DEC]:
                    _heap_pop(hg, hid, si)  # a preempted sequence's stale entry
                n = max(1, math.ceil(hg[0] - sf[F_G] - 1e-9))
                need = si[S_DN] * pos
                if sf[F_USED] + need * n > cap:
                    n = max(1, int(_floordiv(cap - sf[F_USED], float(max(1, need)))))
                if ci[C_QUIET] >= 0 and si[S_WN] > 0 and ci[C_QUIET] < n:
                    n = max(1, ci[C_QUIET])
            si[S_B] = b
            si[S_N] = n
            key[0] = b
            if n > 1:
                key[1] = _q7(ctx + (n - 1) * per_step / 2)
                key[2] = 0
                si[S_KLEN] = 3
            else:
                key[1] = _q7(ctx)
                key[2] = nch
                for c in range(nch):
                    r = plan_r[c]
                    q = plan_q[c]
                    key[3 + 3 * c] = q
                    key[4 + 3 * c] = _q7(RI[r, CTX])
                    key[5 + 3 * c] = 1 if q == RI[r, PL] else 0
                si[S_KLEN] = 3 + 3 * nch
            si[S_PHASE] = 1
        # ---- the step's price (a miss goes back to Python, which prices it and calls again)
        if si[S_PHASE] == 2:  # Python has priced the key (and made room for it): it joins the table
            e = _table_add(t_slots, t_hash, t_kstart, t_klen, t_kpool, t_meta, key, si[S_KLEN])
            t_dt[e] = sf[F_PDT]
            t_ok[e] = si[S_POK]
            t_seen[e] = 0
        else:
            e = _table_find(t_slots, t_hash, t_kstart, t_klen, t_kpool, key, si[S_KLEN])
            if e < 0:
                return NEED_PRICE
        si[S_PHASE] = 0
        dt = t_dt[e]
        if t_ok[e] == 0:
            si[S_MEAS] = 0
            if t_seen[e] != ci[C_RUN]:
                t_seen[e] = ci[C_RUN]
                nlog[si[S_NLOG]] = e
                si[S_NLOG] += 1
        b = si[S_B]
        n = si[S_N]
        nch = si[S_PNCH]
        if ci[C_SPECK] >= 0 and b > 0:
            dt += cf[D_SPECADD]
        t = sf[F_T]
        if n > 1:
            dt1 = dt
            nxt = _next_send(ci, si, pend)
            if nxt < _INF:
                n = max(1, min(n, math.ceil((nxt - t) / dt1)))
            dt = dt1 * n
        # ---- the step runs
        t += dt
        sf[F_T] = t
        si[S_STEPS] += n
        sf[F_BUSY] += dt
        dn = si[S_DN]
        sf[F_BATCH] += dn * dt
        sf[F_ITLS] += b * dt
        sf[F_ITLN] += b * n
        if not si[S_PDEC]:
            sf[F_ITLS] += dn * dt
        if b:
            _gap_add(gk, gv, gs, si, dt / n, b * n)
        nfin = 0
        if b:
            sf[F_G] += n
            sf[F_USED] += b * per_step * n
            G = sf[F_G]
            while si[S_HN] > 0 and hg[0] <= G + 1e-9:
                rid = hid[0]
                _heap_pop(hg, hid, si)
                if RI[rid, DEC]:
                    _leave(rid, RI, RF, cf, si, sf)
                    fin[nfin] = rid
                    nfin += 1
        for c in range(nch):
            r = plan_r[c]
            q = plan_q[c]
            RI[r, PL] -= q
            RI[r, CTX] += q
            sf[F_USED] += q
            if RI[r, PL] == 0:
                _chunk_remove(cq, si, r)
                _first_token(r, cf[D_OVERHEAD], RF, ci, si, sf, ttft)
                if RF[r, GEN] >= RI[r, OSL]:
                    fin[nfin] = r
                    nfin += 1
                else:
                    _join(r, RI, RF, ci, cf, si, sf, hg, hid, mt)
        if kind == SGLANG and si[S_PDEC] and nch == 0 and not si[S_PPRE]:  # SglangScheduler.after_step
            x = sf[F_RATIO] - n * cf[D_DECAY]
            sf[F_RATIO] = x if x > cf[D_MINRATIO] else cf[D_MINRATIO]
        if kind == TRTLLM and ci[C_TRTNEW] > 0 and n > 1:  # TrtllmScheduler.after_step
            si[S_TRTVIS] = min(si[S_WN], si[S_TRTVIS] + (n - 1) * ci[C_TRTNEW])
        for f in range(nfin):
            r = fin[f]
            sf[F_USED] -= RI[r, CTX]
            sf[F_PROM] -= RF[r, FINAL]
            si[S_DONE] += 1
            sf[F_LAST] = t
            if ci[C_KEEP]:
                k = si[S_NKEPT]
                kept_i[k] = r
                kept_f[k, 0] = RF[r, ARR]
                kept_f[k, 1] = RF[r, FIRST]
                kept_f[k, 2] = t
                si[S_NKEPT] = k + 1
            if ci[C_HASSLOTS]:
                slots[si[S_STAIL]] = t
                si[S_STAIL] += 1
            if r >= ci[C_WARMUP]:
                si[S_MDONE] += 1
                si[S_OUT] += RI[r, OSL]
                si[S_IN] += RI[r, ISL]
                if RI[r, OSL] > 1:
                    tpot[si[S_NTPOT]] = (t - RF[r, FIRST]) / (RI[r, OSL] - 1)
                    si[S_NTPOT] += 1


_core = _jit(_core_py)


# --------------------------------------------------------------------------- the driver


KINDS = {"vllm": VLLM, "sglang": SGLANG, "trtllm": TRTLLM}
"""The core's number for each policy it runs, by the policy's name."""


@dataclass(frozen=True)
class LoopInputs:
    """What the loop needs, as ``run_benchmark`` has set it up (token counts; seconds)."""

    kind: int
    prefilled: bool
    capacity: int
    slots: int  # max_num_seqs
    budget: int
    chunk_cap: int
    ranks: int
    positions: int
    per_step: float
    long_output: float
    warmup: int
    max_steps: int
    sends: list[float]  # the client's send times, in order
    concurrency: int | None
    isl: int
    osl: int
    lengths: list[tuple[int, int]] | None
    spec_k: int  # -1: no speculation
    alpha: float
    spec_add_s: float  # spec.k x the draft step's time
    rng_state: tuple[int, ...]  # the acceptance generator's Mersenne Twister words and index
    overhead_s: float
    prefilled_watermark: float
    keep_requests: bool
    clock_start_s: float = 0.0  # the engine's first step waits for this (run_benchmark's cold_start_s)


def table_for(model: Any, kv_key: tuple[object, ...], max_entries: int) -> PriceTable:
    """The price table that travels with ``model`` for steps at ``kv_key`` (created on first use,
    emptied when it holds ``max_entries``)."""
    tables = getattr(model, "_engine_price_tables", None)
    if tables is None:
        tables = {}
        model._engine_price_tables = tables
    table = tables.get(kv_key)
    if table is None:
        table = tables[kv_key] = PriceTable()
    elif table.entries >= max_entries:
        table.reset()
    return table


Price = tuple[float, bool, tuple[str, ...]]
"""A step's time (seconds), whether it was measured, and its notes."""


def run(inp: LoopInputs, policy: Scheduler, table: PriceTable,
        price_miss: Callable[[int, int, tuple[tuple[int, int, bool], ...]], Price],
        outcome: Callable[..., Any]) -> tuple[int, Any]:
    """Run the compiled loop: (:data:`DONE`, ``outcome(...)``), or (:data:`TOO_MANY_STEPS` or
    :data:`NOTHING_FITS`, None) where the reference loop raises.

    ``price_miss(b, q(ctx), chunks)`` prices a step the table lacks; ``outcome`` is called with
    the reference loop's variables as keywords (``ttfts``, ``tpots``, ``itl_sum``, ...).
    """
    n = len(inp.sends)
    ci = np.zeros(C_SIZE, np.int64)
    cf = np.zeros(D_SIZE, np.float64)
    ci[C_KIND] = inp.kind
    ci[C_PREFILLED] = inp.prefilled
    ci[C_CAP] = inp.capacity
    ci[C_SLOTS] = inp.slots
    ci[C_BUDGET] = inp.budget
    ci[C_CHUNKCAP] = inp.chunk_cap
    ci[C_RANKS] = inp.ranks
    ci[C_POS] = inp.positions
    ci[C_WARMUP] = inp.warmup
    ci[C_N] = n
    ci[C_MAXSTEPS] = inp.max_steps
    ci[C_HASSLOTS] = inp.concurrency is not None
    ci[C_SPECK] = inp.spec_k
    ci[C_KEEP] = inp.keep_requests
    ci[C_QUIET] = -1
    cf[D_PERSTEP] = inp.per_step
    cf[D_OVERHEAD] = inp.overhead_s
    cf[D_SPECADD] = inp.spec_add_s
    cf[D_ALPHA] = inp.alpha
    cf[D_LONGOUT] = inp.long_output
    cf[D_WATERMARK] = _vllm.WATERMARK
    cf[D_PREFWATER] = inp.prefilled_watermark
    o = policy.options
    sf = np.zeros(F_SIZE, np.float64)
    if inp.kind == VLLM:
        ci[C_RESERVE] = bool(o.get("reserve", False))
    elif inp.kind == SGLANG:
        ci[C_MAXPREFILL] = int(o["max_prefill_tokens"])
        ci[C_MIXED] = bool(o["enable_mixed_chunk"])
        ci[C_QUIET] = _sglang.QUIET_STEPS_WAITING
        ci[C_RETRACT] = _sglang.RETRACT_DECODE_STEPS
        cf[D_CLIP] = float(o["clip_max_new_tokens"])
        cf[D_MINRATIO] = float(o["min_new_token_ratio"])
        cf[D_DECAY] = float(o["new_token_ratio_decay"])
        sf[F_RATIO] = policy.ratio  # type: ignore[attr-defined]
    else:
        ci[C_TRTCHUNK] = bool(o["enable_chunked_prefill"])
        ci[C_TRTNEW] = policy.new_per_step  # type: ignore[attr-defined]
    table.runs += 1
    ci[C_RUN] = table.runs
    si = np.zeros(S_SIZE, np.int64)
    si[S_DHEAD] = si[S_DTAIL] = -1
    si[S_MEAS] = 1
    si[S_MT] = inp.rng_state[624] if inp.rng_state else 624
    sf[F_START] = math.inf
    sf[F_T] = inp.clock_start_s
    RI = np.zeros((n, 8), np.int64)
    RF = np.zeros((n, 6), np.float64)
    hg = np.zeros(HEAP_START * n + 16, np.float64)
    hid = np.zeros(HEAP_START * n + 16, np.int64)
    wq = np.zeros(n, np.int64)
    cq = np.zeros(n, np.int64)
    pend = np.fromiter(inp.sends, np.float64, n)
    conc = inp.concurrency or 0
    slots = np.zeros(conc + n if inp.concurrency is not None else 1, np.float64)
    si[S_STAIL] = conc
    if inp.lengths is None:
        isl = np.full(n, inp.isl, np.int64)
        osl = np.full(n, inp.osl, np.int64)
    else:
        both = np.fromiter(itertools.chain.from_iterable(inp.lengths), np.int64, 2 * n).reshape(n, 2)
        isl = np.ascontiguousarray(both[:, 0])
        osl = np.ascontiguousarray(both[:, 1])
    plan_r = np.zeros(n, np.int64)
    plan_q = np.zeros(n, np.int64)
    fin = np.zeros(n, np.int64)
    key = np.zeros(3 + 3 * n, np.int64)
    ttft = np.zeros(n, np.float64)
    tpot = np.zeros(n, np.float64)
    kept_i = np.zeros(n if inp.keep_requests else 1, np.int64)
    kept_f = np.zeros((n if inp.keep_requests else 1, 3), np.float64)
    gcap = GAPS_START
    gk = np.zeros(gcap, np.float64)
    gv = np.zeros(gcap, np.float64)
    gs = np.full(2 * gcap, -1, np.int64)
    mt = np.array(inp.rng_state[:624], np.int64) if inp.rng_state else np.zeros(624, np.int64)
    nlog = np.zeros(max(1, table.dt.shape[0]), np.int64)
    while True:
        status = _core(ci, cf, si, sf, RI, RF, hg, hid, wq, cq, pend, slots, isl, osl, plan_r, plan_q, fin,
                       key, ttft, tpot, kept_i, kept_f, gk, gv, gs, mt, table.slots, table.hash, table.kstart,
                       table.klen, table.kpool, table.meta, table.dt, table.ok, table.seen, nlog)
        if status == DONE:
            break
        if status == NEED_PRICE:
            klen = int(si[S_KLEN])
            words = key[:klen].tolist()
            chunks = tuple((words[j], words[j + 1], bool(words[j + 2])) for j in range(3, klen, 3))
            dt, ok, why = price_miss(words[0], words[1], chunks)
            table.reserve(klen)
            table.notes.append(why)
            sf[F_PDT] = dt
            si[S_POK] = ok
            si[S_PHASE] = 2
            if nlog.shape[0] < table.dt.shape[0]:
                grown = np.zeros(table.dt.shape[0], np.int64)
                grown[: nlog.shape[0]] = nlog
                nlog = grown
        elif status == NEED_ROOM:
            if si[S_HN] + n + 1 > hg.shape[0]:
                hg = np.concatenate([hg, np.zeros(hg.shape[0] + n, np.float64)])
                hid = np.concatenate([hid, np.zeros(hid.shape[0] + n, np.int64)])
            if 2 * (si[S_GN] + 1) > gs.shape[0]:
                gcap = 2 * gk.shape[0]
                gk = np.concatenate([gk, np.zeros(gcap - gk.shape[0], np.float64)])
                gv = np.concatenate([gv, np.zeros(gcap - gv.shape[0], np.float64)])
                gs = np.full(2 * gcap, -1, np.int64)
                _rehash_gaps(gk, gs, int(si[S_GN]))
        else:
            return status, None
    if inp.kind == SGLANG:
        policy.ratio = float(sf[F_RATIO])  # type: ignore[attr-defined]
    notes: dict[str, None] = {}
    for e in nlog[: si[S_NLOG]].tolist():
        for why in table.notes[e]:
            notes[why] = None
    gn = int(si[S_GN])
    order = np.argsort(gk[:gn])  # the keys are distinct: one order
    kept: list[tuple[int, float, float, float]] = []
    if inp.keep_requests:
        k = int(si[S_NKEPT])
        kf = kept_f[:k]
        kept = list(zip(kept_i[:k].tolist(), kf[:, 0].tolist(), kf[:, 1].tolist(), kf[:, 2].tolist(),
                        strict=True))
    return DONE, outcome(
        ttfts=ttft[: si[S_NTTFT]].tolist(), ttft_stats=_stats(ttft, int(si[S_NTTFT])),
        tpot_stats=_stats(tpot, int(si[S_NTPOT])),
        itl_sum=float(sf[F_ITLS]), itl_n=float(sf[F_ITLN]), batch_time=float(sf[F_BATCH]),
        busy_time=float(sf[F_BUSY]), steps=int(si[S_STEPS]), last_finish=float(sf[F_LAST]),
        start=float(sf[F_START]), measured_done=int(si[S_MDONE]), out_tokens=int(si[S_OUT]),
        in_tokens=int(si[S_IN]), measured=bool(si[S_MEAS]), notes=notes, preemptions=int(si[S_PREEMPT]),
        median_itl_s=float(gap_percentile(gk, gv, order, gn, 50)),
        p99_itl_s=float(gap_percentile(gk, gv, order, gn, 99)),
        kept=kept,
    )


def compile_kernels() -> None:
    """Compile (or load from numba's disk cache) every kernel of the loop, e.g. before timing a run:
    the core on an empty run (it returns at once), the table's and the gap map's growth, the
    statistics."""
    i1, f1 = np.zeros(1, np.int64), np.zeros(1, np.float64)
    i2, f2 = np.zeros((1, 8), np.int64), np.zeros((1, 6), np.float64)
    ci = np.zeros(C_SIZE, np.int64)  # no requests: the core is done before its first step
    si = np.zeros(S_SIZE, np.int64)
    _core(ci, np.zeros(D_SIZE), si, np.zeros(F_SIZE), i2, f2, f1, i1, i1, i1, f1, f1, i1, i1, i1, i1, i1, i1,
          f1, f1, i1, np.zeros((1, 3)), f1, f1, np.full(2, -1, np.int64), np.zeros(624, np.int64),
          np.full(2, -1, np.int64), i1, i1, i1, i1, np.zeros(2, np.int64), f1, i1, i1, i1)
    _rehash(np.full(2, -1, np.int64), i1, 1)
    _rehash_gaps(f1, np.full(2, -1, np.int64), 1)
    _stats(f1, 1)
    gap_percentile(f1, f1, i1, 1, 50)
