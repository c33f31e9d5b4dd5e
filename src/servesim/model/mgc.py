"""Closed-form approximations for G/G/c and M/G/c queues, built on Erlang-C.

Real prefill service is nearly deterministic per prompt length (c_s^2 = 0 for
one length, larger for a mix of lengths) and real arrivals are often burstier
than Poisson (c_a^2 > 1); the M/M/c formulas of :mod:`servesim.model.queueing` assume
c_a^2 = c_s^2 = 1.  The approximations below correct the M/M/c mean wait with
the first two moments only (``scv`` = squared coefficient of variation):

* **Allen-Cunneen** (Allen 1990, *Probability, Statistics and Queueing
  Theory*, sec. 6.4; the G/G/c analogue of Kingman's heavy-traffic formula)::

      E[W_q] ~= E[W_q(M/M/c)] * (c_a^2 + c_s^2) / 2

  exact for M/M/c, and for M/G/1 where it is Pollaczek-Khinchine.

* **Cosmetatos** (1976) for deterministic service, M/D/c: half the M/M/c wait
  (P-K at c = 1) times a correction that grows with c and falls with rho::

      E[W_q(M/D/c)] ~= 1/2 E[W_q(M/M/c)] [1 + (1 - rho)(c - 1)(sqrt(4 + 5c) - 2) / (16 rho c)]

  (capped at E[W_q(M/M/c)], which it overshoots at light load with many servers)

* **Kimura** (1983, system interpolation) for M/G/c: a weighted harmonic
  interpolation between M/M/c (c_s^2 = 1) and M/D/c (c_s^2 = 0)::

      E[W_q(M/G/c)] ~= (1 + c_s^2) / (2 c_s^2 / W_MMc + (1 - c_s^2) / W_MDc)

  which returns W_MMc at c_s^2 = 1, W_MDc at c_s^2 = 0 and, when W_MDc is
  W_MMc / 2, Allen-Cunneen.  Kimura applies to Poisson arrivals only; for
  c_a^2 != 1 :class:`GGc` uses Allen-Cunneen.

The probability of waiting is approximated by Erlang-C in all three (it is
exact only for M/M/c), and the waiting-time tail keeps the M/M/c shape, an
exponential conditional wait, with its mean matched to the approximation::

    P(W_q > t) ~= C exp(-t C / E[W_q])

(for M/M/c, E[W_q] / C = 1 / (c mu - lambda), so this is exact there).
:mod:`servesim.sim` measures how close each is.

Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from servesim._checks import check_choice, check_counts, check_fields, check_real
from servesim.model.queueing import MMc, exp_tail_quantile_s

__all__ = ["METHODS", "GGc", "cosmetatos_md_c_mean_wait_s"]


def cosmetatos_md_c_mean_wait_s(servers: int, arrival_rate_per_s: float, service_s: float) -> float:
    """M/D/c mean wait by Cosmetatos' correction of half the M/M/c wait; inf when rho >= 1.

    ``1/2 W_MMc [1 + (1 - rho)(c - 1)(sqrt(4 + 5c) - 2) / (16 rho c)]``: the
    1/2 is P-K's (1 + c_s^2) / 2 at c_s^2 = 0; the bracket (= 1 at c = 1 or
    rho -> 1) adds back the wait that many servers at light load lose less
    than half of.  0 when there are no arrivals.  At light load with several
    servers the bracket can exceed 2 (Cosmetatos overestimates there, a known
    weakness), so the result is capped at the M/M/c wait: constant service
    never waits longer on average than exponential service of the same mean.
    """
    q = MMc(servers, arrival_rate_per_s, 1.0 / check_real("service_s", service_s, lo=0.0, lo_open=True))
    if not q.stable:
        return math.inf
    rho = q.utilization
    if rho == 0.0:
        return 0.0
    c = q.servers
    correction = 1.0 + (1.0 - rho) * (c - 1) * (math.sqrt(4.0 + 5.0 * c) - 2.0) / (16.0 * rho * c)
    w_mm = q.mean_wait_s()
    return min(w_mm, 0.5 * w_mm * correction)


def _allen_cunneen(q: GGc) -> float:
    """E[W_q] ~= E[W_q(M/M/c)] (c_a^2 + c_s^2) / 2."""
    return q.mmc.mean_wait_s() * (q.arrival_scv + q.service_scv) / 2.0


def _kimura(q: GGc) -> float:
    """``(1 + c_s^2) / (2 c_s^2 / W_MMc + (1 - c_s^2) / W_MDc)``, an M/G/c formula: Allen-Cunneen for
    non-Poisson arrivals.  For c_s^2 > 1 the second term of the denominator is negative (an
    extrapolation); if it would make the denominator non-positive the Allen-Cunneen value is used."""
    if q.arrival_scv != 1.0:
        return _allen_cunneen(q)
    cs2, w_mm = q.service_scv, q.mmc.mean_wait_s()
    if w_mm == 0.0:
        return 0.0
    w_md = cosmetatos_md_c_mean_wait_s(q.servers, q.arrival_rate_per_s, q.service_mean_s)
    denom = 2.0 * cs2 / w_mm + (1.0 - cs2) / w_md
    if denom <= 0.0:
        return w_mm * (1.0 + cs2) / 2.0
    return (1.0 + cs2) / denom


METHODS: Mapping[str, Callable[[GGc], float]] = {"allen-cunneen": _allen_cunneen, "kimura": _kimura}
"""Mean-wait approximations by name (a plain mapping: add one by adding an entry)."""


@dataclass(frozen=True)
class GGc:
    """A G/G/c queue described by its first two moments, priced by a named approximation.

    ``arrival_scv`` is c_a^2 of the interarrival times (1 for Poisson),
    ``service_scv`` c_s^2 of the service times (1 exponential, 0 deterministic).
    """

    servers: int
    arrival_rate_per_s: float
    service_mean_s: float
    arrival_scv: float = 1.0
    service_scv: float = 1.0
    method: str = "kimura"

    def __post_init__(self) -> None:
        check_counts(self, "servers")
        check_fields(self, "arrival_rate_per_s", lo_open=False)
        check_fields(self, "service_mean_s")
        check_fields(self, "arrival_scv", "service_scv", lo_open=False)
        check_choice("method", self.method, METHODS)

    @property
    def mmc(self) -> MMc:
        """The M/M/c queue with the same c, lambda and mean service time."""
        return MMc(self.servers, self.arrival_rate_per_s, 1.0 / self.service_mean_s)

    @property
    def utilization(self) -> float:
        return self.mmc.utilization

    @property
    def stable(self) -> bool:
        return self.mmc.stable

    @property
    def p_wait(self) -> float:
        """Approximated by Erlang-C (exact only for M/M/c); 1 if unstable."""
        return self.mmc.p_wait

    def mean_wait_s(self) -> float:
        """E[W_q] by the chosen method; inf when unstable."""
        if not self.stable:
            return math.inf
        return METHODS[self.method](self)

    def wait_tail(self, t_s: float) -> float:
        """P(W_q > t) ~= C exp(-t C / E[W_q]) for t >= 0 (M/M/c shape, matched mean); 1 if unstable."""
        if not self.stable or t_s < 0:
            return 1.0
        pw = self.p_wait
        w = self.mean_wait_s()
        if w == 0.0 or pw == 0.0:
            return 0.0
        return pw * math.exp(-t_s * pw / w)

    def wait_quantile_s(self, q: float) -> float:
        """Smallest t with P(W_q <= t) >= q under the tail above (0 when q <= 1 - C)."""
        return exp_tail_quantile_s(self, q, lambda log_ratio: log_ratio * self.mean_wait_s() / self.p_wait)
