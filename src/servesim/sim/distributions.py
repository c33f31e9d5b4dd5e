"""Random inputs of the simulator: distributions and arrival processes.

Each distribution is a frozen, validated parameter object that exposes its
``mean`` and ``variance`` next to ``sample`` (STYLE habit 4), so the closed
forms (which need only the first two moments, see :mod:`servesim.model.mgc`) and the
simulator read the same object.  ``scv`` is the squared coefficient of
variation ``variance / mean^2``: 1 for the exponential, 0 for a constant.

Samples are drawn from a ``numpy.random.Generator`` passed in by the caller;
nothing here seeds anything.

Arrival processes are either a renewal process (i.i.d. interarrival times from
a distribution: Poisson when they are exponential, bursty when their
coefficient of variation exceeds 1) or an explicit list of timestamps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from servesim._checks import ParameterError, check_fields, check_int, check_real

__all__ = [
    "Arrivals",
    "Deterministic",
    "Distribution",
    "Empirical",
    "Exponential",
    "Gamma",
    "Lognormal",
    "Mixture",
    "RenewalArrivals",
    "TraceArrivals",
    "arrivals_with_cv",
    "gamma_arrivals",
    "poisson_arrivals",
    "scv",
]

F64 = NDArray[np.float64]


@runtime_checkable
class Distribution(Protocol):
    """A non-negative random quantity: its first two moments and a sampler."""

    @property
    def mean(self) -> float: ...

    @property
    def variance(self) -> float: ...

    def sample(self, rng: np.random.Generator, n: int) -> F64: ...


def scv(dist: Distribution) -> float:
    """Squared coefficient of variation c^2 = Var / E^2 (0 for a constant)."""
    return dist.variance / dist.mean**2


@dataclass(frozen=True)
class Exponential:
    """Exponential with the given mean: variance mean^2, c^2 = 1 (memoryless)."""

    mean: float

    def __post_init__(self) -> None:
        check_fields(self, "mean")

    @property
    def variance(self) -> float:
        return self.mean**2

    def sample(self, rng: np.random.Generator, n: int) -> F64:
        return rng.exponential(self.mean, n)


@dataclass(frozen=True)
class Deterministic:
    """A constant: variance 0, c^2 = 0 (e.g. prefill time of a fixed prompt length)."""

    value: float

    def __post_init__(self) -> None:
        check_fields(self, "value")

    @property
    def mean(self) -> float:
        return self.value

    @property
    def variance(self) -> float:
        return 0.0

    def sample(self, rng: np.random.Generator, n: int) -> F64:
        return np.full(n, self.value)


@dataclass(frozen=True)
class _MeanCV:
    """A distribution given by its mean and coefficient of variation cv: variance ``(mean cv)^2``."""

    mean: float
    cv: float

    def __post_init__(self) -> None:
        check_fields(self, "mean", "cv")

    @property
    def variance(self) -> float:
        return (self.mean * self.cv) ** 2


@dataclass(frozen=True)
class Gamma(_MeanCV):
    """Gamma with the given mean and coefficient of variation cv.

    Shape ``1 / cv^2`` and scale ``mean cv^2`` give mean ``shape * scale =
    mean`` and variance ``shape * scale^2 = (mean cv)^2``.  cv = 1 is the
    exponential; cv > 1 is burstier than Poisson when used for interarrivals.
    """

    def sample(self, rng: np.random.Generator, n: int) -> F64:
        shape = 1.0 / self.cv**2
        return rng.gamma(shape, self.mean / shape, n)


@dataclass(frozen=True)
class Lognormal(_MeanCV):
    """Lognormal with the given mean and coefficient of variation cv.

    If ln X ~ N(mu, sigma^2) then E X = exp(mu + sigma^2 / 2) and
    c^2 = exp(sigma^2) - 1, so ``sigma^2 = ln(1 + cv^2)`` and
    ``mu = ln(mean) - sigma^2 / 2``.  A common fit for prompt lengths.
    """

    def sample(self, rng: np.random.Generator, n: int) -> F64:
        sigma2 = math.log1p(self.cv**2)
        mu = math.log(self.mean) - 0.5 * sigma2
        return rng.lognormal(mu, math.sqrt(sigma2), n)


@dataclass(frozen=True)
class Empirical:
    """A discrete distribution over ``values`` with ``weights`` (equal when omitted).

    Mean ``sum w_i v_i`` and variance ``sum w_i v_i^2 - mean^2`` with the
    weights normalized to 1.  Use it for a measured prompt-length histogram or
    a mix of a few fixed lengths.
    """

    values: tuple[float, ...]
    weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        vals = tuple(
            float(check_real(f"values[{i}]", v, lo=0.0, lo_open=True)) for i, v in enumerate(self.values)
        )
        if not vals:
            raise ParameterError("values", self.values, "a non-empty sequence of numbers > 0")
        object.__setattr__(self, "values", vals)
        if self.weights is not None:
            ws = tuple(float(check_real(f"weights[{i}]", w, lo=0.0)) for i, w in enumerate(self.weights))
            if len(ws) != len(vals):
                raise ParameterError("weights", self.weights, f"{len(vals)} numbers, one per value")
            if sum(ws) <= 0.0:
                raise ParameterError("weights", self.weights, "numbers >= 0 with a positive sum")
            object.__setattr__(self, "weights", ws)

    def _p(self) -> F64:
        w = np.ones(len(self.values)) if self.weights is None else np.asarray(self.weights)
        return np.asarray(w / w.sum(), dtype=np.float64)

    @property
    def mean(self) -> float:
        return float(np.dot(self._p(), self.values))

    @property
    def variance(self) -> float:
        v = np.asarray(self.values)
        m = float(np.dot(self._p(), v))
        return max(0.0, float(np.dot(self._p(), (v - m) ** 2)))

    def sample(self, rng: np.random.Generator, n: int) -> F64:
        idx = rng.choice(len(self.values), size=n, p=self._p())
        return np.asarray(self.values, dtype=np.float64)[idx]


@dataclass(frozen=True)
class Mixture:
    """A probabilistic mix of distributions (e.g. 70% chat-length, 30% RAG-length prompts).

    With weights w_i normalized to 1: ``E X = sum w_i m_i`` and
    ``E X^2 = sum w_i (v_i + m_i^2)``, so ``Var X = E X^2 - (E X)^2`` (law of
    total variance).
    """

    components: tuple[Distribution, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.components:
            raise ParameterError("components", self.components, "a non-empty sequence of distributions")
        for i, d in enumerate(self.components):
            if not isinstance(d, Distribution):
                raise ParameterError(f"components[{i}]", d, "a distribution (mean, variance, sample)")
        ws = tuple(float(check_real(f"weights[{i}]", w, lo=0.0)) for i, w in enumerate(self.weights))
        if len(ws) != len(self.components) or sum(ws) <= 0.0:
            raise ParameterError(
                "weights", self.weights, f"{len(self.components)} numbers >= 0 with a positive sum"
            )
        object.__setattr__(self, "components", tuple(self.components))
        object.__setattr__(self, "weights", ws)

    def _p(self) -> list[float]:
        total = sum(self.weights)
        return [w / total for w in self.weights]

    @property
    def mean(self) -> float:
        return sum(p * d.mean for p, d in zip(self._p(), self.components, strict=True))

    @property
    def variance(self) -> float:
        second = sum(p * (d.variance + d.mean**2) for p, d in zip(self._p(), self.components, strict=True))
        return max(0.0, second - self.mean**2)

    def sample(self, rng: np.random.Generator, n: int) -> F64:
        which = rng.choice(len(self.components), size=n, p=self._p())
        out = np.empty(n)
        for i, d in enumerate(self.components):
            mask = which == i
            out[mask] = d.sample(rng, int(mask.sum()))
        return out


@dataclass(frozen=True)
class RenewalArrivals:
    """Arrivals with i.i.d. interarrival times (seconds) drawn from ``interarrival_s``.

    Rate ``1 / E[interarrival]``; ``scv`` is the c_a^2 of the two-moment
    approximations (1 for Poisson).
    """

    interarrival_s: Distribution

    def __post_init__(self) -> None:
        if not isinstance(self.interarrival_s, Distribution):
            raise ParameterError("interarrival_s", self.interarrival_s, "a distribution")

    @property
    def rate_per_s(self) -> float:
        return 1.0 / self.interarrival_s.mean

    @property
    def scv(self) -> float:
        return scv(self.interarrival_s)

    def times_s(self, rng: np.random.Generator, n: int) -> F64:
        """n arrival times: the running sum of n interarrival draws (the first at t > 0)."""
        return np.cumsum(self.interarrival_s.sample(rng, check_int("n", n, lo=0)))


def poisson_arrivals(rate_per_s: float) -> RenewalArrivals:
    """Poisson arrivals: exponential interarrivals of mean 1 / rate."""
    rate = check_real("rate_per_s", rate_per_s, lo=0.0, lo_open=True)
    return RenewalArrivals(Exponential(1.0 / rate))


def gamma_arrivals(rate_per_s: float, cv: float) -> RenewalArrivals:
    """Bursty arrivals: gamma interarrivals of mean 1 / rate and coefficient of variation cv."""
    rate = check_real("rate_per_s", rate_per_s, lo=0.0, lo_open=True)
    return RenewalArrivals(Gamma(1.0 / rate, cv))


def arrivals_with_cv(rate_per_s: float, cv: float) -> RenewalArrivals:
    """Poisson arrivals at ``cv`` = 1 (exponential gaps), else gamma gaps of that cv."""
    return poisson_arrivals(rate_per_s) if cv == 1.0 else gamma_arrivals(rate_per_s, cv)


@dataclass(frozen=True, eq=False)
class TraceArrivals:
    """Explicit arrival timestamps (seconds, non-decreasing, >= 0), e.g. from a trace.

    The array is copied and made read-only.  ``rate_per_s`` is the empirical
    rate ``(n - 1) / (t_last - t_first)``.
    """

    times_s: F64 = field(repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "times_s", as_times_s("times_s", self.times_s))

    @property
    def rate_per_s(self) -> float:
        t = self.times_s
        span = float(t[-1] - t[0]) if t.size > 1 else 0.0
        return (t.size - 1) / span if span > 0 else math.inf


Arrivals = RenewalArrivals | TraceArrivals
"""An arrival process: a renewal process or explicit timestamps."""


def as_times_s(name: str, values: ArrayLike) -> F64:
    """A read-only float64 copy of ``values`` after checking it is 1-D, finite, >= 0, sorted."""
    arr = np.array(values, dtype=np.float64, copy=True)
    if arr.ndim != 1 or arr.size == 0:
        raise ParameterError(name, f"array of shape {arr.shape}", "a non-empty 1-D sequence of times")
    if not np.all(np.isfinite(arr)) or arr[0] < 0.0:
        raise ParameterError(name, "array with negative or non-finite entries", "finite times >= 0")
    if arr.size > 1 and np.any(np.diff(arr) < 0.0):
        i = int(np.argmax(np.diff(arr) < 0.0))
        raise ParameterError(
            f"{name}[{i + 1}]",
            float(arr[i + 1]),
            f">= the previous timestamp {float(arr[i])!r} (times must be sorted)",
        )
    arr.setflags(write=False)
    return arr
