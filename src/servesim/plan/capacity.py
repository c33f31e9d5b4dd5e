"""The serving model at load: the decode batch from the traffic, a pool per phase, the largest rate.

The lab's reference model fixes TPOT at a node constant and links prefill and
decode only through ``TPOT (1 + beta rho_p)``.  Here both phases share each
step's time, as continuous batching with chunked prefill runs them, and every
time comes from the measured-kernel step model
(:class:`servesim.hardware.stepmodel.StepModel`).

**Colocated** (``n`` replicas, requests routed evenly, ``lambda = rate / n``
each).  A step carries the ``B`` decoding sequences and, in a share ``phi`` of
the steps, a prefill chunk of ``c = min(I, budget - B)`` tokens (an engine that runs prompts
whole, TensorRT-LLM without ``enable_chunked_prefill``, needs ``c = I``: with ``I + B`` over the
budget, or with attention DP ``I + B / dp`` over one rank's, a prompt waits for the batch to drain,
and the rate is unstable).  With
``T0 = T(B)`` and ``Tc = T(B, chunk c)`` the mean step is

    T = (1 - phi) T0 + phi Tc,   phi = lambda I T / c   (prefill tokens per step / chunk)
    =>  T = T0 / (1 - lambda I (Tc - T0) / c)

and Little's law closes the loop: ``B = lambda (O - 1) T(B)`` (each request
decodes ``O - 1`` tokens after its first, one per step), with the step priced at
``max(B, 1)`` sequences: a decoding request always sees itself.  The fixed point is
the smallest ``B`` where ``lambda (O - 1) T(B) = B``; the rate is unstable
when there is none below the memory and slot limit, or when ``phi >= 1``
(prefill alone fills every step).  TPOT = T; at vanishing load ``B -> 0`` and
TPOT tends to the batch-1 step.  The engine's one budget: ``phi`` (the share
of steps with prefill) and ``B`` together never exceed the step; the GPU's
utilization is ``min(1, lambda (I t_p + (O - 1) t_d))``-free: it is the
fixed point itself.

TTFT: the prefill of a prompt is ``k = ceil(I / c)`` chunk steps, ``S = k Tc``;
prompts queue for the chunk slot as an M/D/1 queue with utilization ``phi``:
``E[W] = phi S / (2 (1 - phi))`` (Pollaczek-Khinchine, constant service), its
tail ``P(W > t) ~ phi exp(-2 (1 - phi) t / S)`` (the heavy-traffic exponential
with that mean), plus half a step of residual when the arrival finds a step
running (probability ``min(1, B + phi)``) and the engine's per-request overhead.

**Disaggregated**: ``w_p`` prefill workers of ``tp_p`` GPUs and ``w_d`` decode
workers of ``tp_d`` GPUs, each pool with its own dtype.  Prefill is an M/D/c
queue (``c = w_p``, service ``S`` = the prompt's chunk steps on a prefill
worker): mean wait by Cosmetatos, tail ``C(c, a) exp(-2 (c mu - lambda) t)``
(the M/M/c tail with the constant-service factor 2).  The KV cache crosses the
link (bytes in the KV dtype / link rate).  Each decode worker takes ``lambda /
w_d`` and solves ``B = lambda_d (O - 1) T_d(B)`` with no prefill in its steps.
The two pools are independent given the rate, so the capacity of a split is
the smaller of each pool's.

**Speculation** (optional, per decoding pool): a step becomes ``k`` draft
steps and a ``k + 1``-wide verify yielding ``E[n]`` tokens; the fixed point
uses ``T / E[n]`` per token, with ``k`` chosen by the step model at the batch.

**Capacity**: the largest rate at which mean TPOT meets its SLO and the share
of requests whose TTFT meets its SLO reaches the attainment target, found by
bisection on the rate (both fail monotonically as the rate grows).

Standard library only; nothing here prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

from servesim._checks import check_int, check_real
from servesim.hardware.precision import kv_bytes_of
from servesim.hardware.pricer import Pricer
from servesim.hardware.speculation import speculation_for
from servesim.hardware.stepmodel import Chunk
from servesim.model.mgc import cosmetatos_md_c_mean_wait_s
from servesim.model.queueing import MMc

__all__ = ["Decode", "LoadPoint", "Prefill", "colocated_at_load", "decode_at_load", "disaggregated_at_load",
           "max_rate", "prefill_at_load", "wait_quantile"]

_BISECT = 40
"""Bisection steps (the rate to 1e-12 of its bracket; cheap)."""

Spec = str | tuple[str, int | None, float | Mapping[int, float] | None] | None
"""The speculation a decode replica runs: a preset's name (the lab's alpha, k searched), or
(method, k, alpha) as the plan resolved them (k None: searched; alpha a mapping of k to alpha where
each k has its own), or None without speculation."""


@dataclass(frozen=True)
class LoadPoint:
    """One deployment at one rate (seconds; NaN where unstable)."""

    rate_per_s: float
    stable: bool
    ttft_mean_s: float
    ttft_p99_s: float
    attainment: float  # P(TTFT <= SLO) (0 when unstable)
    tpot_s: float
    decode_batch: float  # per decode replica
    prefill_share: float  # phi (colocated) or prefill pool utilization
    reason: str = ""
    speculative_k: int = 0


@dataclass(frozen=True)
class Decode:
    """A decode replica at load: batch, TPOT, the share of steps with prefill, their chunk."""

    stable: bool
    batch: float
    tpot_s: float
    phi: float
    chunk: int
    chunk_step_s: float
    k: int
    reason: str = ""


@dataclass(frozen=True)
class Prefill:
    """A prefill pool at load: the mean and tail of its wait and its service time."""

    stable: bool
    wait_mean_s: float
    service_s: float
    utilization: float
    servers: int
    wait_tail: Callable[[float], float]  # t -> P(W > t)


def wait_quantile(tail: Callable[[float], float], q: float, hi: float) -> float:
    """Smallest t with P(W > t) <= 1 - q (bisection on a decreasing tail)."""
    if tail(0.0) <= 1.0 - q:
        return 0.0
    lo = 0.0
    while tail(hi) > 1.0 - q:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail(mid) > 1.0 - q else (lo, mid)
    return hi


def decode_at_load(sm: Pricer, memory_bytes: float, rate_per_s: float, isl: int, osl: int, *,
                   prefill: bool, spec: Spec = None) -> Decode:
    """Solve the decode batch of one replica at ``rate_per_s`` (see the module docstring)."""
    lam = check_real("rate", rate_per_s, lo=0.0)
    budget = sm.engine.max_num_batched_tokens
    whole = not sm.engine.chunks_prompts
    ranks = max(1, sm.engine.dp_ranks)  # attention DP: a whole prompt fits one rank's budget and decodes
    rank_budget = sm.engine.chunk_tokens or budget
    cap_tokens = sm.kv_capacity_tokens(memory_bytes)
    b_max = min(float(sm.engine.max_num_seqs), cap_tokens / (isl + osl))
    ctx = isl + osl / 2.0
    if b_max < 1.0:
        return Decode(False, math.nan, math.nan, math.nan, 0, math.nan, 0,
                      "one request does not fit the KV cache")

    k, en, draft_s = _speculation_at(sm, spec, max(1.0, min(b_max, lam * osl * 0.02)), ctx)
    seen = _kept(sm).cycles

    def cycle(b: float, chunk: int) -> float:
        # the bisections of every rate of a search try the same batches (the same geometric grid,
        # the same first halvings): each step priced once (_kept)
        key = (isl, osl, b, chunk, k, draft_s)
        hit = seen.get(key)
        if hit is not None:
            return hit
        chunks = (Chunk(chunk, max(0, isl - chunk) // 2, 1, True),) if chunk > 0 else ()
        if b <= 0 and not chunks:
            return 0.0
        st = sm.step(max(b, 0.0), ctx, chunks, k + 1 if b > 0 else 1, bound=False)
        seen[key] = t = st.total_s + (k * draft_s if b > 0 else 0.0)
        _Kept.entries += 1
        return t

    def mean_step(b: float) -> tuple[float, float, int, float]:
        """Mean step time per token of decode, phi, chunk, chunk step.

        A decoding request always sees itself in the batch: below one sequence on average the
        step it experiences is the batch-1 step (so TPOT tends to it at vanishing load).
        """
        b1 = max(b, 1.0)
        t0 = cycle(b1, 0)
        if not prefill:
            return t0, 0.0, 0, 0.0
        c = int(min(isl, budget - b1 * (k + 1)))
        if c < 1 or (whole and (c < isl or isl + b1 * (k + 1) / ranks > rank_budget)):
            return math.inf, 1.0, 0, math.inf  # a whole prompt waits until its rank's batch leaves room
        tc = cycle(b1, c)
        denom = 1.0 - lam * isl * (tc - t0) / c
        if denom <= 0:
            return math.inf, 1.0, c, tc
        t = t0 / denom
        return t, lam * isl * t / c, c, tc

    def g(b: float) -> float:
        t, phi, _, _ = mean_step(b)
        if math.isinf(t) or phi >= 1.0:
            return math.inf
        return lam * (osl - 1) * t / en - b

    if lam == 0.0:
        t, _, c, tc = mean_step(0.0)
        return Decode(True, 0.0, t / en, 0.0, c, tc, k)
    hi = _smallest_root(g, b_max)
    if hi is None:
        t, phi, _, _ = mean_step(b_max)
        why = ("prefill fills every step" if phi >= 1.0 else
               f"the decode batch would exceed the {b_max:.0f} sequences that fit (KV cache or slots)")
        return Decode(False, math.nan, math.nan, phi, 0, math.nan, k, why)
    t, phi, c, tc = mean_step(hi)
    if prefill and hi < 1.0 and c > 0:
        tc = cycle(hi, c)  # the prompt's own steps carry the B < 1 decoding sequences on average
    return Decode(True, hi, t / en, phi, c, tc, k)


class _Kept:
    """What one step model's searches have priced, to be asked again: cycle times by (isl, osl,
    batch, chunk, k, draft step) and the speculation run at a batch (k, tokens per step, draft step)
    by (method, k, alpha, batch, context)."""

    entries = 0  # kept by every model together (:data:`_KEPT_ENTRIES`)

    def __init__(self, sm: Pricer) -> None:
        self.sm = sm  # held, so that its id is not reused while this lives
        self.cycles: dict[tuple[int, int, float, int, int, float], float] = {}
        self.speculation: dict[tuple[object, ...], tuple[int, float, float]] = {}


_KEPT: dict[int, _Kept] = {}
"""What each step model's searches priced, by the model's identity: a step model is never changed
once built (``copied`` makes a new one), so a price stays its price."""

_KEPT_MODELS = 256
"""Step models whose prices are kept (all are forgotten past this many: a plan prices tens)."""

_KEPT_ENTRIES = 200_000
"""Prices kept in all, every model's together (all are forgotten past this many, some tens of MB:
the screen of an 8-GPU plan keeps 10,000-30,000)."""


def _kept(sm: Pricer) -> _Kept:
    """The prices kept for ``sm`` (:data:`_KEPT`), created on first use."""
    entry = _KEPT.get(id(sm))
    if entry is None or entry.sm is not sm or _Kept.entries >= _KEPT_ENTRIES:
        if len(_KEPT) >= _KEPT_MODELS or _Kept.entries >= _KEPT_ENTRIES:
            _KEPT.clear()
            _Kept.entries = 0
        entry = _KEPT[id(sm)] = _Kept(sm)
    return entry


def _speculation_at(sm: Pricer, spec: Spec, batch: float, context: float) -> tuple[int, float, float]:
    """The speculation a decode replica runs at ``batch``: its draft length k, tokens per step E[n]
    and draft step time; (0, 1, 0), plain decoding, without ``spec`` or where it does not pay."""
    if spec is None:
        return 0, 1.0, 0.0
    # a preset's name (the lab's alpha, k searched) or (method, k, alpha) as the plan resolved them,
    # alpha a mapping of k to alpha where each k has its own (k searched over its keys)
    method, kk, alpha = (spec, None, None) if isinstance(spec, str) else spec
    per_k = alpha if isinstance(alpha, Mapping) else None
    # kept beside the model's cycle times (_kept): a search's low rates all ask at batch 1, its
    # high ones at the batch that fits
    key = (method, kk, tuple(sorted(per_k.items())) if per_k is not None else alpha, batch, context)
    seen = _kept(sm).speculation
    hit = seen.get(key)
    if hit is None:
        one = None if per_k is not None else cast(float | None, alpha)
        s, info = speculation_for(sm, method, batch, context, k=kk, alpha=one, alphas=per_k)
        hit = (s.k, s.tokens_per_step, s.draft_step_s) if info["speedup_at_batch"] > 1.0 else (0, 1.0, 0.0)
        seen[key] = hit
        _Kept.entries += 1
    return hit


def _smallest_root(g: Callable[[float], float], b_max: float) -> float | None:
    """The smallest root of ``g`` on (0, b_max] (``g(0+) > 0``), to 1e-7 of itself: scan a geometric
    grid for the first point where ``g <= 0``, then bisect; None when ``g`` stays positive."""
    lo, hi = 0.0, None
    b = min(1.0, b_max)
    while True:
        if g(b) <= 0:
            hi = b
            break
        lo = b
        if b >= b_max:
            break
        b = min(b * 1.5, b_max)
    if hi is None:
        return None
    for _ in range(50):  # to 1e-7 of the batch (a few dozen steps; the step time is smooth in it)
        if hi - lo <= 1e-7 * hi:
            break
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if g(mid) > 0 else (lo, mid)
    return hi


def prefill_at_load(sm: Pricer, workers: int, rate_per_s: float, isl: int) -> Prefill:
    """A prefill pool of ``workers`` replicas at ``rate_per_s`` (M/D/c; see the module docstring)."""
    c = check_int("prefill_workers", workers, lo=1)
    s = sm.prompt_s(isl)
    lam = rate_per_s
    rho = lam * s / c
    if rho >= 1.0:
        return Prefill(False, math.inf, s, rho, c, lambda t: 1.0)
    if lam == 0.0:
        return Prefill(True, 0.0, s, 0.0, c, lambda t: 0.0)
    q = MMc(c, lam, 1.0 / s)
    pw = q.p_wait
    gap = c / s - lam

    def tail(t: float) -> float:
        return float(pw * math.exp(-2.0 * gap * t))

    return Prefill(True, cosmetatos_md_c_mean_wait_s(c, lam, s), s, rho, c, tail)


def colocated_at_load(sm: Pricer, memory_bytes: float, replicas: int, rate_per_s: float, isl: int,
                      osl: int, slo_ttft_s: float, *, spec: Spec = None) -> LoadPoint:
    """``replicas`` colocated replicas at ``rate_per_s`` in all (see the module docstring)."""
    n = check_int("replicas", replicas, lo=1)
    lam = rate_per_s / n
    d = decode_at_load(sm, memory_bytes, lam, isl, osl, prefill=True, spec=spec)
    if not d.stable:
        return _unstable(rate_per_s, d.reason, d.phi)
    s = math.ceil(isl / max(1, d.chunk)) * d.chunk_step_s
    phi = d.phi
    wait = phi * s / (2 * (1 - phi))
    busy = min(1.0, d.batch + phi)  # the chance an arrival finds a step running: it waits out half of it
    base = busy * d.tpot_s / 2 + s + sm.engine.request_overhead_s

    def tail(t: float) -> float:
        return phi * math.exp(-2 * (1 - phi) * t / s) if phi > 0 else 0.0

    mean = base + wait
    p99 = base + wait_quantile(tail, 0.99, s)
    att = 1.0 - tail(slo_ttft_s - base) if slo_ttft_s >= base else 0.0
    return LoadPoint(rate_per_s, True, mean, p99, att, d.tpot_s, d.batch, phi, "", d.k)


def disaggregated_at_load(prefill_sm: Pricer, prefill_workers: int, decode_sm: Pricer,
                          decode_memory_bytes: float, decode_workers: int, link_bytes_per_s: float,
                          rate_per_s: float, isl: int, osl: int, slo_ttft_s: float, *,
                          spec: Spec = None) -> LoadPoint:
    """Prefill pool, KV transfer, decode pool at ``rate_per_s`` (see the module docstring)."""
    wd = check_int("decode_workers", decode_workers, lo=1)
    p = prefill_at_load(prefill_sm, prefill_workers, rate_per_s, isl)
    if not p.stable:
        return _unstable(rate_per_s, f"the prefill pool is {100 * p.utilization:.0f}% busy", p.utilization)
    d = decode_at_load(decode_sm, decode_memory_bytes, rate_per_s / wd, isl, osl, prefill=False, spec=spec)
    if not d.stable:
        return _unstable(rate_per_s, f"decode pool: {d.reason}", p.utilization)
    xfer = kv_bytes_of(decode_sm, isl) / link_bytes_per_s
    base = p.service_s + xfer + prefill_sm.engine.request_overhead_s
    mean = base + p.wait_mean_s
    p99 = base + wait_quantile(p.wait_tail, 0.99, p.service_s)
    att = 1.0 - p.wait_tail(slo_ttft_s - base) if slo_ttft_s >= base else 0.0
    return LoadPoint(rate_per_s, True, mean, p99, att, d.tpot_s, d.batch, p.utilization, "", d.k)


def _unstable(rate: float, why: str, share: float) -> LoadPoint:
    nan = math.nan
    return LoadPoint(rate, False, nan, nan, 0.0, nan, nan, share, why)


def max_rate(point: Callable[[float], LoadPoint], slo_tpot_s: float, attainment: float, *,
             hi: float = 1e4) -> tuple[float, LoadPoint]:
    """The largest rate whose :class:`LoadPoint` (``point(rate)``) meets both SLOs.

    TPOT (mean) <= ``slo_tpot_s`` and P(TTFT <= SLO) >= ``attainment``; both
    fail monotonically as the rate grows, so bisection applies.  (0, point(0+))
    when even a vanishing load fails.
    """
    check_real("attainment", attainment, lo=0.0, hi=1.0, lo_open=True)

    def ok(p: LoadPoint) -> bool:
        return p.stable and p.tpot_s <= slo_tpot_s and p.attainment >= attainment

    lo_p = point(1e-6)
    if not ok(lo_p):
        return 0.0, lo_p
    lo, hi_r = 1e-6, 1.0
    while ok(point(hi_r)):
        lo, hi_r = hi_r, hi_r * 2
        if hi_r > hi:
            return lo, point(lo)
    best = lo_p
    for _ in range(_BISECT):
        mid = (lo + hi_r) / 2
        p = point(mid)
        if ok(p):
            lo, best = mid, p
        else:
            hi_r = mid
        if hi_r - lo <= 1e-4 * hi_r:
            break
    return lo, best if best.rate_per_s == lo else point(lo)
