"""M/M/c queueing: Erlang-B, Erlang-C, mean wait and the wait-time tail.

An M/M/c queue has Poisson arrivals (rate ``lam``), exponential service (rate
``mu`` per server) and ``c`` servers sharing one FCFS queue.  The offered load
is ``a = lam / mu`` Erlangs (mean number of busy servers) and the utilization is
``rho = a / c``; the queue is stable only while ``rho < 1``.

Standard results used here (Kleinrock 1975, vol. 1 ch. 3; Harchol-Balter 2013,
ch. 14):

* Erlang-C, the probability that an arrival waits::

      C(c, a) = (a^c / c!) / ((1 - rho) * sum_{n<c} a^n / n! + a^c / c!)

* mean wait ``E[W_q] = C / (c mu - lam)`` and tail
  ``P(W_q > t) = C * exp(-(c mu - lam) t)``.

Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from servesim._checks import check_counts, check_fields, check_int, check_real

__all__ = [
    "MMc",
    "erlang_b",
    "erlang_c",
    "exp_tail_quantile_s",
    "mmc_mean_wait_s",
    "mmc_wait_tail",
]


def erlang_b(servers: int, offered_load: float) -> float:
    """Erlang-B blocking probability B(c, a) by the stable recursion.

    ``B_0 = 1`` and ``B_n = a B_{n-1} / (n + a B_{n-1})``: each step divides
    two quantities of the same size, so no factorial or power overflows even at
    100,000 servers.  Valid for any ``a >= 0`` (loss systems have no stability
    condition).
    """
    return _erlang_b(check_int("servers", servers, lo=1), check_real("offered_load", offered_load, lo=0.0))


def _erlang_b(c: int, a: float) -> float:
    """:func:`erlang_b` of checked arguments (an int c >= 1, a float a >= 0)."""
    b = 1.0
    for n in range(1, c + 1):
        ab = a * b
        b = ab / (n + ab)
    return b


def erlang_c(servers: int, offered_load: float) -> float:
    """Erlang-C probability of waiting C(c, a) for an M/M/c queue.

    From Erlang-B: ``C = B / (1 - rho (1 - B))`` with ``rho = a / c``
    (substitute the Erlang-B sum into the Erlang-C denominator).  Requires a
    stable queue, ``a < c``; an unstable queue waits with probability 1, which
    callers treat as a result, not an error, via :class:`MMc`.
    """
    c = check_int("servers", servers, lo=1)
    a = check_real("offered_load", offered_load, lo=0.0)
    if a >= c:
        return 1.0
    b = _erlang_b(c, a)
    rho = a / c
    return b / (1.0 - rho * (1.0 - b))


@dataclass(frozen=True)
class MMc:
    """An M/M/c queue: ``servers`` servers, arrival rate and per-server service rate."""

    servers: int
    arrival_rate_per_s: float
    service_rate_per_s: float

    def __post_init__(self) -> None:
        check_counts(self, "servers")
        check_fields(self, "arrival_rate_per_s", lo_open=False)
        check_fields(self, "service_rate_per_s")

    @property
    def offered_load(self) -> float:
        """a = lambda / mu, in Erlangs."""
        return self.arrival_rate_per_s / self.service_rate_per_s

    @property
    def utilization(self) -> float:
        """rho = a / c."""
        return self.offered_load / self.servers

    @property
    def stable(self) -> bool:
        return self.utilization < 1.0

    @cached_property
    def p_wait(self) -> float:
        """Erlang-C: probability an arrival finds every server busy (1 if unstable); computed once
        per queue (the mean wait and the tail both use it)."""
        return erlang_c(self.servers, self.offered_load)

    @property
    def drain_rate_per_s(self) -> float:
        """c mu - lambda: the exponential decay rate of the waiting-time tail."""
        return self.servers * self.service_rate_per_s - self.arrival_rate_per_s

    def mean_wait_s(self) -> float:
        """E[W_q] = C / (c mu - lambda); infinite when unstable."""
        if not self.stable:
            return math.inf
        return self.p_wait / self.drain_rate_per_s

    def wait_tail(self, t_s: float) -> float:
        """P(W_q > t) = C exp(-(c mu - lambda) t) for t >= 0; 1 when unstable."""
        if not self.stable:
            return 1.0
        if t_s < 0:
            return 1.0
        return self.p_wait * math.exp(-self.drain_rate_per_s * t_s)

    def wait_quantile_s(self, q: float) -> float:
        """Smallest t with P(W_q <= t) >= q; inverts the tail (0 when q <= 1 - C)."""
        return exp_tail_quantile_s(self, q, lambda log_ratio: log_ratio / self.drain_rate_per_s)


class _WaitTail(Protocol):
    @property
    def stable(self) -> bool: ...
    @property
    def p_wait(self) -> float: ...


def exp_tail_quantile_s(queue: _WaitTail, q: float, seconds: Callable[[float], float]) -> float:
    """The q-quantile of a wait whose tail is ``P(W_q > t) = C exp(-t / tau)``, C the ``queue``'s
    ``p_wait``: 0 when ``q <= 1 - C``, else ``tau ln(C / (1 - q))``, with ``seconds`` turning the
    logarithm into seconds (each queue's own tau); inf when unstable."""
    check_real("q", q, lo=0.0, hi=1.0, hi_open=True)
    if not queue.stable:
        return math.inf
    pw = queue.p_wait
    if 1.0 - q >= pw:
        return 0.0
    return seconds(math.log(pw / (1.0 - q)))


def mmc_mean_wait_s(servers: int, arrival_rate_per_s: float, service_rate_per_s: float) -> float:
    """E[W_q] of an M/M/c queue (seconds); ``inf`` when unstable."""
    return MMc(servers, arrival_rate_per_s, service_rate_per_s).mean_wait_s()


def mmc_wait_tail(
    servers: int, arrival_rate_per_s: float, service_rate_per_s: float, t_s: float
) -> float:
    """P(W_q > t) of an M/M/c queue; 1 when unstable."""
    return MMc(servers, arrival_rate_per_s, service_rate_per_s).wait_tail(t_s)
