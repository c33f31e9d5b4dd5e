"""Point estimates with confidence intervals from independent replications.

A simulation run is repeated R times with independent random streams; each
replication yields one value of a statistic (a mean, a percentile, a
fraction).  The replication values are i.i.d., so the 95% interval is the
Student-t interval ``mean +- t_{0.975, R-1} s / sqrt(R)`` (s the sample
standard deviation).  Percentile estimates are averaged the same way
(each replication's p99 is one observation).

Warm-up: every run starts empty and idle, which biases early waits low.  The
callers drop the first ``warmup_fraction`` of each replication's requests
(in arrival order) before computing any statistic; the default 0.1 is ample
for the stable queues here (the relaxation time of a queue at utilization
rho is of order 1 / (1 - sqrt(rho))^2 service times, e.g. 1.5e3 at
rho = 0.95, against 10^4+ requests per replication).

Intervals are honest about what they can say: they are clipped to the
quantity's range (``Estimate.lower``/``upper``: a probability stays in [0, 1],
a time or a rate >= 0; a mean wait is never shown as [-0.36, 0.84] s), and an
interval from fewer than :data:`MIN_INTERVAL_SAMPLES` replications is not an
interval at all (two replications give a t quantile of 12.7 and a spread
measured from one difference; two equal values give a [0, 0] that claims
certainty): :attr:`Estimate.interval` is then None and
:func:`format_interval` says ``n/a (fewer than 3 samples)``.

Standard library and numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from servesim._checks import ParameterError, check_int, check_real

__all__ = [
    "DEFAULT_SEED",
    "DEFAULT_WARMUP_FRACTION",
    "MIN_INTERVAL_SAMPLES",
    "PERCENTILES",
    "Estimate",
    "estimate",
    "replication_rngs",
    "t_quantile_975",
]

DEFAULT_SEED = 20240601
"""Seed used when the caller gives none: the same inputs give the same bytes."""

DEFAULT_WARMUP_FRACTION = 0.1
"""Fraction of each replication's requests (first in arrival order) left out of statistics."""

PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0)
"""The percentiles every latency summary reports (p50, p90, p99)."""

MIN_INTERVAL_SAMPLES = 3
"""Fewest replications (samples) from which a confidence interval is shown."""

_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom.

    Tabulated for df <= 30 (three decimals); beyond that the Cornish-Fisher
    expansion ``z + (z^3 + z) / (4 df) + (5 z^5 + 16 z^3 + 3 z) / (96 df^2)``
    with z = 1.95996, accurate to 1e-4 there.
    """
    d = check_int("df", df, lo=1)
    if d <= len(_T975):
        return _T975[d - 1]
    z = 1.959963984540054
    return z + (z**3 + z) / (4 * d) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * d * d)


@dataclass(frozen=True)
class Estimate:
    """A statistic estimated from independent replications, with its 95% interval.

    ``half_width`` is nan with a single replication (no spread to measure) and
    inf when the system is unstable (``mean`` is then inf too).  ``lower`` and
    ``upper`` are the range the quantity can take (0 and 1 for a probability,
    0 and inf for a time or a rate; unbounded by default): :attr:`low` and
    :attr:`high` are clipped to it.
    """

    mean: float
    half_width: float
    replicates: tuple[float, ...]
    lower: float = -math.inf
    upper: float = math.inf

    @property
    def se(self) -> float:
        """Standard error of the mean over replications (nan with one replication)."""
        n = len(self.replicates)
        if n < 2:
            return math.nan
        return float(np.std(self.replicates, ddof=1)) / math.sqrt(n)

    @property
    def low(self) -> float:
        """``mean - half_width``, raised to ``lower`` (nan stays nan)."""
        x = self.mean - self.half_width
        return x if math.isnan(x) else max(x, self.lower)

    @property
    def high(self) -> float:
        """``mean + half_width``, lowered to ``upper`` (nan stays nan)."""
        x = self.mean + self.half_width
        return x if math.isnan(x) else min(x, self.upper)

    @property
    def interval(self) -> tuple[float, float] | None:
        """(low, high), or None when there is no honest interval to show.

        None with fewer than :data:`MIN_INTERVAL_SAMPLES` replications, or a
        non-finite half-width (one replication, an unstable system).  An exact
        value (:meth:`exact`: no replications, zero half-width) is its own
        interval.
        """
        if not self.replicates and self.half_width == 0.0:
            return (self.low, self.high)
        if len(self.replicates) < MIN_INTERVAL_SAMPLES or not math.isfinite(self.half_width):
            return None
        return (self.low, self.high)

    def bounded(self, lower: float = 0.0, upper: float = math.inf) -> Estimate:
        """The same estimate of a quantity known to lie in [``lower``, ``upper``]."""
        if not lower <= upper:
            raise ParameterError("lower", lower, f"<= upper ({upper:g})")
        return Estimate(self.mean, self.half_width, self.replicates, lower, upper)

    def agrees_with(self, value: float, z: float = 4.0, floor: float = 0.0) -> bool:
        """|mean - value| <= z standard errors (+ an absolute ``floor`` for a zero-spread case)."""
        if not math.isfinite(self.mean) or not math.isfinite(value):
            return self.mean == value
        se = self.se
        if math.isnan(se):
            return False
        return abs(self.mean - value) <= z * se + floor

    @classmethod
    def unstable(cls) -> Estimate:
        """The estimate reported for an unstable system: infinite, no interval."""
        return cls(math.inf, math.inf, ())

    @classmethod
    def exact(cls, value: float) -> Estimate:
        """A value known without sampling error (e.g. 0 goodput of an unstable system)."""
        return cls(float(value), 0.0, ())


def estimate(values: Sequence[float], *, lower: float = -math.inf, upper: float = math.inf) -> Estimate:
    """Mean of the replication values and the Student-t 95% half-width.

    ``lower``/``upper``: the quantity's range (e.g. 0 and 1 for a
    probability), to which the interval is clipped.
    """
    vals = tuple(float(v) for v in values)
    if not vals:
        raise ParameterError("values", values, "at least one replication value")
    if not lower <= upper:
        raise ParameterError("lower", lower, f"<= upper ({upper:g})")
    n = len(vals)
    mean = math.fsum(vals) / n
    if any(math.isinf(v) for v in vals):
        return Estimate(math.inf, math.inf, vals, lower, upper)
    if n < 2:
        return Estimate(mean, math.nan, vals, lower, upper)
    sd = float(np.std(vals, ddof=1))
    return Estimate(mean, t_quantile_975(n - 1) * sd / math.sqrt(n), vals, lower, upper)


def replication_rngs(seed: int | np.random.Generator, replications: int) -> list[np.random.Generator]:
    """Independent generators, one per replication, derived from ``seed``.

    An int seeds a ``numpy.random.SeedSequence`` whose ``spawn`` children are
    statistically independent streams.  A Generator supplies the entropy for
    that SeedSequence (it is advanced by one draw), so passing the same
    Generator state reproduces the same replications.  Nothing global is seeded.
    """
    r = check_int("replications", replications, lo=1)
    if isinstance(seed, np.random.Generator):
        entropy = [int(x) for x in seed.integers(0, 2**63 - 1, size=4)]
        seq = np.random.SeedSequence(entropy)
    else:
        seq = np.random.SeedSequence(check_int("seed", seed, lo=0))
    return [np.random.default_rng(child) for child in seq.spawn(r)]


def warmup_count(n: int, warmup_fraction: float) -> int:
    """How many leading requests the warm-up drops: floor(n * fraction), below n for every fraction
    < 1 (the float product rounds below n too), so a replication always keeps one to measure."""
    frac = check_real("warmup_fraction", warmup_fraction, lo=0.0, hi=1.0, hi_open=True)
    return int(n * frac)


def percentiles(x: NDArray[np.float64], overwrite: bool = False) -> tuple[float, ...]:
    """p50, p90, p99 of ``x`` by linear interpolation between order statistics; nan if x is empty.

    The q-th percentile sits at rank ``h = (n - 1) q / 100`` of the sorted
    sample and is ``x_(floor h) + (h - floor h) (x_(floor h + 1) - x_(floor h))``
    (numpy's default "linear" method, Hyndman and Fan's type 7).  Only the
    needed order statistics are found, by one in-place partition
    (``overwrite=True`` lets it reorder ``x``), which avoids the per-call cost
    of ``numpy.percentile`` in short runs.
    """
    n = int(x.size)
    if n == 0:
        return tuple(math.nan for _ in PERCENTILES)
    ranks = [(n - 1) * q / 100.0 for q in PERCENTILES]
    lows = [math.floor(h) for h in ranks]
    highs = [min(lo + 1, n - 1) for lo in lows]
    a = x if overwrite else x.copy()
    a.partition(sorted(set(lows + highs)))
    out = []
    for h, lo, hi in zip(ranks, lows, highs, strict=True):
        x_lo, x_hi = float(a[lo]), float(a[hi])
        out.append(x_lo if x_hi == x_lo else x_lo + (h - lo) * (x_hi - x_lo))
    return tuple(out)
