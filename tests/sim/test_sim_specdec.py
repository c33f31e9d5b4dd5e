"""Speculative-decoding Monte Carlo against the exact E[n] of each acceptance model."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest
from hypothesis import given, settings

from servesim._checks import ParameterError
from servesim.model import speculative as sd
from servesim.sim import _kernels as kern
from servesim.sim.specdec import (
    IidAcceptance,
    MarkovAcceptance,
    PositionalAcceptance,
    linear_profile,
    simulate_specdec,
)
from tests.strategies import acceptance_correlations, alphas, ks, open_alphas

Z = 4.0


@pytest.mark.parametrize("name", sorted(sd.SPECDEC_PRESETS))
def test_iid_monte_carlo_matches_the_geometric_formula(name):
    p = sd.SPECDEC_PRESETS[name]
    k = sd.optimal_k(p.alpha, p.d, p.c)
    s = simulate_specdec(IidAcceptance(p.alpha), k, d=p.d, c=p.c, cycles=200_000, replications=8, seed=1)
    assert s.expected_tokens.agrees_with(sd.expected_tokens(k, p.alpha), Z)
    assert s.speedup.agrees_with(sd.speedup(k, p.alpha, p.d, p.c), Z)
    assert s.acceptance_rate.agrees_with(p.alpha, Z)


@pytest.mark.parametrize(
    "model",
    [
        MarkovAcceptance(0.85, 0.5),
        MarkovAcceptance(0.6, 0.9),
        PositionalAcceptance((0.95, 0.9, 0.7, 0.5)),
        linear_profile(0.8, 6, 0.3),
    ],
)
def test_other_models_match_their_exact_expectation(model):
    s = simulate_specdec(model, 6, cycles=200_000, replications=8, seed=2)
    assert s.expected_tokens.agrees_with(model.expected_tokens(6), Z)


@settings(max_examples=60, deadline=None)
@given(alpha=alphas, k=ks)
def test_uncorrelated_markov_and_flat_profile_are_the_geometric_formula(alpha, k):
    geo = sd.expected_tokens(k, alpha)
    # (1 - a^(k+1)) / (1 - a) loses about eps / (1 - a) to cancellation as a -> 1 (2e-11 at a = 0.99999),
    # so the tolerance widens there; elsewhere the three agree to 1e-12.
    rel = 1e-12 + (8 * sys.float_info.epsilon / (1.0 - alpha) if alpha < 1.0 else 0.0)
    assert MarkovAcceptance(alpha, 0.0).expected_tokens(k) == pytest.approx(geo, rel=rel, abs=1e-12)
    assert PositionalAcceptance((alpha,)).expected_tokens(k) == pytest.approx(geo, rel=rel, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(alpha=open_alphas, r=acceptance_correlations, k=ks)
def test_burstiness_never_raises_tokens_per_cycle(alpha, r, k):
    # Positive correlation lowers E[n] at the same stationary alpha (seed section 7's claim)
    assert MarkovAcceptance(alpha, r).expected_tokens(k) <= sd.expected_tokens(k, alpha) + 1e-9


def _markov_exact_by_enumeration(alpha, r, k, start_prob_one):
    """E[A] of one cycle by enumerating all 2^(k) acceptance patterns from a given start state mix."""
    m = MarkovAcceptance(alpha, r)
    p1, p0 = m.p_after_accept, m.p_after_reject
    total = 0.0
    for s0, w0 in ((1, start_prob_one), (0, 1 - start_prob_one)):
        for bits in itertools.product((0, 1), repeat=k):
            prob, state = w0, s0
            for b in bits:
                p = p1 if state == 1 else p0
                prob *= p if b else 1 - p
                state = b
            a = next((i for i, b in enumerate(bits) if b == 0), k)
            total += prob * a
    return total


def test_markov_formula_against_enumeration_of_one_cycle():
    # With the start state drawn from the formula's stationary cycle-start share q,
    # E[n] = 1 + E[A] by direct enumeration.
    alpha, r, k = 0.7, 0.4, 5
    m = MarkovAcceptance(alpha, r)
    p1, p0 = m.p_after_accept, m.p_after_reject
    q = p0 * p1**k / (1 - p1 ** (k + 1) + p0 * p1**k)
    assert m.expected_tokens(k) == pytest.approx(1 + _markov_exact_by_enumeration(alpha, r, k, q), rel=1e-12)


def test_markov_kernel_matches_python_reference():
    u = np.random.default_rng(0).random(6 * 1000)
    a_c, a_p = np.empty(1000, dtype=np.int64), np.empty(1000, dtype=np.int64)
    s_c = kern.markov_accepted(u, 5, 0.9, 0.3, 1, a_c)
    s_p = kern._markov_accepted_py(u, 5, 0.9, 0.3, 1, a_p)
    assert s_c == s_p
    np.testing.assert_array_equal(a_c, a_p)
    assert a_c.min() >= 0 and a_c.max() <= 5


def test_linear_profile_keeps_the_mean_and_stays_in_range():
    p = linear_profile(0.95, 8, 0.4)
    assert np.mean(p.alphas) == pytest.approx(0.95)
    assert all(0.0 <= a <= 1.0 for a in p.alphas)
    assert list(p.alphas) == sorted(p.alphas, reverse=True)


def test_deterministic_and_validated():
    a = simulate_specdec(MarkovAcceptance(0.8, 0.3), 4, cycles=10_000, replications=2, seed=4)
    b = simulate_specdec(MarkovAcceptance(0.8, 0.3), 4, cycles=10_000, replications=2, seed=4)
    assert a == b
    with pytest.raises(ParameterError, match="correlation"):
        MarkovAcceptance(0.5, 1.0)
    with pytest.raises(ParameterError, match="alphas"):
        PositionalAcceptance(())
    with pytest.raises(ParameterError, match="model"):
        simulate_specdec(0.5, 3)  # type: ignore[arg-type]
