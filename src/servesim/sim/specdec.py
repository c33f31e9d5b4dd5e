"""Monte Carlo of speculative-decoding cycles: measured E[n] and speedup.

A cycle drafts k tokens, accepts the longest accepted prefix A (0 <= A <= k)
and emits n = A + 1 tokens.  The closed form (:mod:`servesim.model.speculative`)
assumes i.i.d. acceptance with probability alpha, giving the geometric
``E[n] = sum_{i=0}^{k} alpha^i``.  Three acceptance models are simulated, each
with its own exact E[n] computed in code, so the simulation is checked
against theory and the bias of the geometric formula is measured:

* :class:`IidAcceptance`: every draft accepted with probability alpha.
  ``E[n] = sum_{i=0}^{k} alpha^i`` (the closed form).
* :class:`PositionalAcceptance`: draft i of a cycle (i = 1..k) accepted with
  probability alpha_i, independently.  ``P(A >= i) = prod_{j<=i} alpha_j``, so
  ``E[n] = 1 + sum_{i=1}^{k} prod_{j<=i} alpha_j``.  "Average alpha" is the
  mean of alpha_1..alpha_k.
* :class:`MarkovAcceptance`: bursty acceptance.  Text positions carry
  acceptance indicators forming a two-state Markov chain with stationary
  acceptance ``alpha`` and lag-1 correlation ``r``:
  ``P(accept | previous accepted) = p1 = alpha + r (1 - alpha)`` and
  ``P(accept | previous rejected) = p0 = alpha (1 - r)``; stationarity:
  ``p0 / (1 - p1 + p0) = alpha``.  Easy stretches accept long runs, a hard
  token is followed by more rejections.  The exact E[n] is derived in
  :meth:`MarkovAcceptance.expected_tokens`; r = 0 is the i.i.d. model.

Speedup uses the closed form's deterministic cycle time
``T_cycle / t_target = k d + 1 + c k g(u)``, so measured speedup is measured
E[n] over that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from servesim._checks import ParameterError, check_int, check_real
from servesim.model import speculative as sd
from servesim.sim import _kernels as kern
from servesim.sim.stats import DEFAULT_SEED, Estimate, estimate, replication_rngs

__all__ = [
    "AcceptanceModel",
    "IidAcceptance",
    "MarkovAcceptance",
    "PositionalAcceptance",
    "SpecDecSim",
    "linear_profile",
    "simulate_specdec",
]

_CHUNK_CYCLES = 1 << 15


@dataclass(frozen=True)
class IidAcceptance:
    """Each draft accepted independently with probability ``alpha`` (the closed form's model)."""

    alpha: float

    def __post_init__(self) -> None:
        check_real("alpha", self.alpha, lo=0.0, hi=1.0)

    @property
    def name(self) -> str:
        return "iid"

    def mean_alpha(self, k: int) -> float:
        return self.alpha

    def expected_tokens(self, k: int) -> float:
        """sum_{i=0}^{k} alpha^i (servesim.model.speculative.expected_tokens)."""
        return sd.expected_tokens(k, self.alpha)

    def sample_accepted(self, rng: np.random.Generator, k: int, cycles: int) -> NDArray[np.int64]:
        return _positional_sample(rng, np.full(k, self.alpha), cycles)


@dataclass(frozen=True)
class PositionalAcceptance:
    """Draft i of each cycle accepted with probability ``alphas[i-1]`` (the last repeats beyond)."""

    alphas: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.alphas) == 0:
            raise ParameterError("alphas", self.alphas, "a non-empty sequence of probabilities")
        vals = tuple(check_real(f"alphas[{i}]", a, lo=0.0, hi=1.0) for i, a in enumerate(self.alphas))
        object.__setattr__(self, "alphas", vals)

    @property
    def name(self) -> str:
        return "positional"

    def profile(self, k: int) -> NDArray[np.float64]:
        """alpha_1..alpha_k (the last given value repeated if k exceeds the list)."""
        a = list(self.alphas[:k]) + [self.alphas[-1]] * max(0, k - len(self.alphas))
        return np.asarray(a, dtype=np.float64)

    def mean_alpha(self, k: int) -> float:
        """Average of alpha_1..alpha_k (alpha_1 when k = 0)."""
        return float(self.profile(k).mean()) if k > 0 else self.alphas[0]

    def expected_tokens(self, k: int) -> float:
        """1 + sum_{i<=k} prod_{j<=i} alpha_j: P(A >= i) is the chance the first i drafts all pass."""
        return 1.0 + float(np.sum(np.cumprod(self.profile(k))))

    def sample_accepted(self, rng: np.random.Generator, k: int, cycles: int) -> NDArray[np.int64]:
        return _positional_sample(rng, self.profile(k), cycles)


@dataclass(frozen=True)
class MarkovAcceptance:
    """Bursty acceptance: a two-state Markov chain with stationary ``alpha``, lag-1 correlation ``r``."""

    alpha: float
    correlation: float

    def __post_init__(self) -> None:
        check_real("alpha", self.alpha, lo=0.0, hi=1.0)
        check_real("correlation", self.correlation, lo=0.0, hi=1.0, hi_open=True)

    @property
    def name(self) -> str:
        return "markov"

    @property
    def p_after_accept(self) -> float:
        """p1 = alpha + r (1 - alpha)."""
        return self.alpha + self.correlation * (1.0 - self.alpha)

    @property
    def p_after_reject(self) -> float:
        """p0 = alpha (1 - r)."""
        return self.alpha * (1.0 - self.correlation)

    def mean_alpha(self, k: int) -> float:
        return self.alpha

    def expected_tokens(self, k: int) -> float:
        """Exact long-run tokens per cycle.

        Condition on s, the indicator of the last position the previous cycle
        consumed.  The first draft passes with p_s and each later one with p1,
        so ``E[A | s] = p_s (1 - p1^k) / (1 - p1)``.  The cycle ends in state 1
        only if all k drafts pass and the bonus position's indicator is 1:
        probability ``p_s p1^k``.  The stationary share q of cycles starting in
        state 1 solves ``q = q p1^(k+1) + (1 - q) p0 p1^k``:
        ``q = p0 p1^k / (1 - p1^(k+1) + p0 p1^k)``.  Then
        ``E[n] = 1 + q E[A | 1] + (1 - q) E[A | 0]`` (renewal-reward).
        """
        k = check_int("k", k, lo=0)
        p1, p0 = self.p_after_accept, self.p_after_reject
        if k == 0:
            return 1.0
        run = float(k) if p1 == 1.0 else (1.0 - p1**k) / (1.0 - p1)  # sum_{i<k} p1^i
        denom = 1.0 - p1 ** (k + 1) + p0 * p1**k
        q = 1.0 if denom == 0.0 else p0 * p1**k / denom
        return 1.0 + q * p1 * run + (1.0 - q) * p0 * run

    def sample_accepted(self, rng: np.random.Generator, k: int, cycles: int) -> NDArray[np.int64]:
        out = np.empty(cycles, dtype=np.int64)
        # start from the stationary distribution of the chain
        state = 1 if rng.random() < self.alpha else 0
        for off in range(0, cycles, _CHUNK_CYCLES):
            m = min(_CHUNK_CYCLES, cycles - off)
            u = rng.random(m * (k + 1))
            state = kern.markov_accepted(
                u, k, self.p_after_accept, self.p_after_reject, state, out[off : off + m]
            )
        return out


AcceptanceModel = IidAcceptance | PositionalAcceptance | MarkovAcceptance


def _positional_sample(
    rng: np.random.Generator, alphas: NDArray[np.float64], cycles: int
) -> NDArray[np.int64]:
    """A per cycle: the length of the leading run of (U_i < alpha_i) over i = 1..k."""
    k = alphas.size
    out = np.empty(cycles, dtype=np.int64)
    if k == 0:
        out[:] = 0
        return out
    for off in range(0, cycles, _CHUNK_CYCLES):
        m = min(_CHUNK_CYCLES, cycles - off)
        passed = rng.random((m, k)) < alphas
        out[off : off + m] = np.cumprod(passed, axis=1).sum(axis=1)  # leading ones
    return out


def linear_profile(alpha: float, k: int, spread: float = 0.2) -> PositionalAcceptance:
    """alpha_i falling linearly over i = 1..k with mean ``alpha`` and first-to-last gap ``spread``.

    ``alpha_i = alpha + spread (1/2 - (i - 1) / (k - 1))``, clipped to [0, 1]
    by shrinking the spread, so the mean stays alpha: later drafts
    (conditioned on a longer draft-only prefix) are accepted less often.
    """
    a = check_real("alpha", alpha, lo=0.0, hi=1.0)
    kk = check_int("k", k, lo=1)
    sp = check_real("spread", spread, lo=0.0)
    if kk == 1:
        return PositionalAcceptance((a,))
    sp = min(sp, 2.0 * a, 2.0 * (1.0 - a))
    return PositionalAcceptance(tuple(a + sp * (0.5 - i / (kk - 1)) for i in range(kk)))


@dataclass(frozen=True)
class SpecDecSim:
    """Measured tokens per cycle and speedup of one acceptance model at draft length k."""

    model: str
    k: int
    mean_alpha: float
    d: float
    c: float
    u: float
    cycles: int
    replications: int
    expected_tokens: Estimate
    expected_tokens_exact: float
    expected_tokens_geometric: float
    acceptance_rate: Estimate
    speedup: Estimate
    speedup_exact: float
    speedup_geometric: float


def simulate_specdec(
    model: AcceptanceModel,
    k: int,
    *,
    d: float = sd.DEFAULT_D,
    c: float = sd.DEFAULT_C,
    u: float = 0.0,
    cycles: int = 1_000_000,
    replications: int = 10,
    seed: int | np.random.Generator = DEFAULT_SEED,
) -> SpecDecSim:
    """Simulate ``cycles`` (total, split over ``replications``) speculative cycles of draft length k.

    Reports measured E[n] with a 95% interval, its exact value for the model,
    the geometric formula at the model's average alpha (what the closed form
    would claim), the measured per-draft acceptance rate (accepted drafts over
    drafts verified up to and including the first rejection), and the
    corresponding speedups over the deterministic cycle time.
    """
    kk = check_int("k", k, lo=0)
    reps = check_int("replications", replications, lo=1)
    per_rep = check_int("cycles", cycles, lo=reps) // reps
    if not isinstance(model, (IidAcceptance, PositionalAcceptance, MarkovAcceptance)):
        raise ParameterError("model", model, "IidAcceptance, PositionalAcceptance or MarkovAcceptance")
    t_cycle = sd.cycle_time(kk, d, c, u)
    en_vals: list[float] = []
    acc_vals: list[float] = []
    for rng in replication_rngs(seed, reps):
        a = model.sample_accepted(rng, kk, per_rep)
        total_a = float(a.sum())
        en_vals.append(1.0 + total_a / per_rep)
        verified = total_a + float(np.count_nonzero(a < kk))  # the rejected draft was verified too
        acc_vals.append(total_a / verified if verified > 0 else math.nan)
    en = estimate(en_vals)
    exact = model.expected_tokens(kk)
    geo = sd.expected_tokens(kk, model.mean_alpha(kk))
    sp = Estimate(en.mean / t_cycle, en.half_width / t_cycle, tuple(v / t_cycle for v in en.replicates))
    return SpecDecSim(
        model=model.name,
        k=kk,
        mean_alpha=model.mean_alpha(kk),
        d=float(d),
        c=float(c),
        u=float(u),
        cycles=per_rep * reps,
        replications=reps,
        expected_tokens=en,
        expected_tokens_exact=exact,
        expected_tokens_geometric=geo,
        acceptance_rate=estimate(acc_vals),
        speedup=sp,
        speedup_exact=exact / t_cycle,
        speedup_geometric=geo / t_cycle,
    )
