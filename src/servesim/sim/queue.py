"""The G/G/c FCFS queue by simulation: waiting-time mean, P(wait) and percentiles.

``c`` identical servers share one first-come-first-served queue; each arrival
takes the server that frees earliest (the Kiefer-Wolfowitz recursion, compiled
in :mod:`servesim.sim._kernels`).  With Poisson arrivals and exponential
service this is the M/M/c queue of :mod:`servesim.model.queueing`, so the run can be
checked against Erlang-C; with other inputs it measures what the two-moment
approximations of :mod:`servesim.model.mgc` only estimate.

Requests are generated and pushed through the recursion in chunks of
``CHUNK`` (interarrivals then service times, per chunk), so memory is one
float64 wait per request plus two chunk buffers.  Warm-up: the first
``warmup_fraction`` of each replication's requests is dropped (see
:mod:`servesim.sim.stats`).  An unstable queue (utilization >= 1) is not
simulated: the result is marked unstable with infinite waits and
``requests = 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from servesim._checks import ParameterError, check_int, check_real
from servesim.sim import _kernels as kern
from servesim.sim.distributions import (
    Arrivals,
    Distribution,
    Exponential,
    RenewalArrivals,
    TraceArrivals,
    scv,
)
from servesim.sim.stats import (
    DEFAULT_SEED,
    DEFAULT_WARMUP_FRACTION,
    Estimate,
    estimate,
    percentiles,
    replication_rngs,
    warmup_count,
)

__all__ = ["CHUNK", "QueueSim", "simulate_queue"]

CHUNK = 1 << 16
"""Requests drawn and simulated per chunk (part of the random stream's layout: fixed)."""


@dataclass(frozen=True)
class QueueSim:
    """Waiting time in a G/G/c FCFS queue, estimated from independent replications."""

    servers: int
    arrival_rate_per_s: float
    service_mean_s: float
    arrival_scv: float
    service_scv: float
    requests: int
    measured_requests: int
    replications: int
    warmup_fraction: float
    mean_wait_s: Estimate
    p_wait: Estimate
    wait_p50_s: Estimate
    wait_p90_s: Estimate
    wait_p99_s: Estimate
    within_s: float | None = None
    p_within: Estimate | None = None

    @property
    def utilization(self) -> float:
        """rho = lambda E[S] / c."""
        return self.arrival_rate_per_s * self.service_mean_s / self.servers

    @property
    def stable(self) -> bool:
        return self.utilization < 1.0


def _draw(dist: Distribution, rng: np.random.Generator, out: NDArray[np.float64]) -> None:
    """Fill ``out`` with draws of ``dist``: the same numbers as ``dist.sample(rng, len(out))``.

    The exponential takes a path without a temporary array:
    ``Generator.exponential(scale)`` is ``scale * standard_exponential``.
    """
    if isinstance(dist, Exponential):
        rng.standard_exponential(out=out)
        out *= dist.mean
    else:
        out[:] = dist.sample(rng, out.shape[0])


def simulate_queue(
    servers: int,
    arrivals: Arrivals,
    service_s: Distribution,
    *,
    requests: int = 1_000_000,
    replications: int = 10,
    warmup_fraction: float = DEFAULT_WARMUP_FRACTION,
    seed: int | np.random.Generator = DEFAULT_SEED,
    within_s: float | None = None,
) -> QueueSim:
    """Simulate a G/G/c FCFS queue and estimate its waiting-time statistics.

    ``requests`` is the total simulated, split evenly over ``replications``
    independent runs (each starting empty; each drops its warm-up).  With
    :class:`TraceArrivals` every replication replays the whole trace with
    fresh service draws and ``requests`` is ignored.

    Statistics of the waiting time W_q (time from arrival to start of
    service): mean, P(W_q > 0), p50, p90, p99, each the mean over replications
    with a Student-t 95% interval; with ``within_s`` also P(W_q <= within_s)
    (0 for a negative bound).
    """
    c = check_int("servers", servers, lo=1)
    reps = check_int("replications", replications, lo=1)
    if not isinstance(arrivals, (RenewalArrivals, TraceArrivals)):
        raise ParameterError("arrivals", arrivals, "RenewalArrivals or TraceArrivals")
    if isinstance(arrivals, TraceArrivals):
        per_rep = int(arrivals.times_s.size)
        a_scv = math.nan
    else:
        total = check_int("requests", requests, lo=reps)
        per_rep = total // reps
        a_scv = arrivals.scv
    warm = warmup_count(per_rep, warmup_fraction)  # floor(n f) < n: f < 1 leaves some to measure
    bound = None if within_s is None else check_real("within_s", within_s)
    rate = arrivals.rate_per_s
    mean_s = service_s.mean
    simulated = not (isinstance(arrivals, RenewalArrivals) and rate * mean_s >= c)
    if not simulated:
        inf = Estimate.unstable()
        e = [inf, Estimate.exact(1.0), inf, inf, inf]
        p_within = None if bound is None else Estimate.exact(0.0)
    else:
        cols = _wait_statistics(arrivals, service_s, c, per_rep, warm, bound, replication_rngs(seed, reps))
        e = [estimate(col) for col in cols[:5]]
        p_within = None if bound is None else estimate(cols[5])
    return QueueSim(
        servers=c,
        arrival_rate_per_s=rate,
        service_mean_s=mean_s,
        arrival_scv=a_scv,
        service_scv=scv(service_s),
        requests=per_rep * reps if simulated else 0,
        measured_requests=(per_rep - warm) * reps if simulated else 0,
        replications=reps,
        warmup_fraction=float(warmup_fraction),
        mean_wait_s=e[0],
        p_wait=e[1],
        wait_p50_s=e[2],
        wait_p90_s=e[3],
        wait_p99_s=e[4],
        within_s=bound,
        p_within=p_within,
    )


def _wait_statistics(
    arrivals: Arrivals,
    service_s: Distribution,
    c: int,
    per_rep: int,
    warm: int,
    bound: float | None,
    rngs: list[np.random.Generator],
) -> list[list[float]]:
    """Per replication (one ``rngs`` each): the mean wait, P(wait > 0), p50, p90, p99 and, with a
    ``bound``, P(wait <= bound) of the requests after the ``warm`` first, each in its own list."""
    waits = np.empty(per_rep)
    ia = np.empty(min(CHUNK, per_rep))
    sv = np.empty(min(CHUNK, per_rep))
    trace_ia = None
    if isinstance(arrivals, TraceArrivals):
        trace_ia = np.diff(arrivals.times_s, prepend=0.0)
    cols: list[list[float]] = [[] for _ in range(6)]
    # 2..512 servers: branchless sorted update; 1 or many: the heap (same waits, bit for bit)
    step = kern.fcfs_waits_sorted_chunk if 1 < c <= kern.SORTED_MAX_SERVERS else kern.fcfs_waits_chunk
    for rng in rngs:
        free_s = np.zeros(c)  # every server free at t = 0 (sorted, and a valid heap)
        clock = 0.0
        for off in range(0, per_rep, CHUNK):
            m = min(CHUNK, per_rep - off)
            if trace_ia is None:
                assert isinstance(arrivals, RenewalArrivals)
                _draw(arrivals.interarrival_s, rng, ia[:m])
                a_chunk = ia[:m]
            else:
                a_chunk = trace_ia[off : off + m]
            _draw(service_s, rng, sv[:m])
            clock = step(a_chunk, sv[:m], free_s, clock, waits[off : off + m])
        w = waits[warm:]
        cols[0].append(float(w.mean()))
        cols[1].append(np.count_nonzero(w) / w.size)
        if bound is not None:
            cols[5].append(np.count_nonzero(w <= bound) / w.size)
        p50, p90, p99 = percentiles(w, overwrite=True)
        cols[2].append(p50)
        cols[3].append(p90)
        cols[4].append(p99)
    return cols
