"""Properties of the speculative-decoding closed forms (Hypothesis)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servesim import ParameterError
from servesim.model.speculative import (
    GATE_EPSILON,
    SPECDEC_PRESETS,
    break_even_alpha,
    cycle_time,
    evaluate,
    expected_tokens,
    optimal_k,
    speedup,
    turn_off_utilization,
    utilization_gate,
)
from tests.strategies import alphas, draft_costs, ks, open_alphas, positive_ks, utilizations, verify_costs


@given(ks, alphas)
def test_expected_tokens_between_1_and_k_plus_1(k, a):
    en = expected_tokens(k, a)
    assert 1.0 <= en <= k + 1 + 1e-12


@given(positive_ks, open_alphas, open_alphas)
def test_expected_tokens_monotone_in_alpha(k, a, b):
    lo, hi = sorted((a, b))
    assert expected_tokens(k, lo) <= expected_tokens(k, hi) + 1e-12


@given(ks, alphas)
def test_expected_tokens_monotone_in_k(k, a):
    assert expected_tokens(k, a) <= expected_tokens(k + 1, a)


@given(positive_ks)
def test_expected_tokens_continuous_at_one(k):
    # Near alpha = 1 the closed form is 0/0; the value must approach k + 1 smoothly.
    for delta in (1e-6, 1e-9, 1e-12, 1e-15):
        # E[n](1 - delta) = k + 1 - delta k (k + 1) / 2 + O(delta^2)
        expected = (k + 1) - delta * k * (k + 1) / 2
        assert math.isclose(expected_tokens(k, 1.0 - delta), expected, rel_tol=1e-9)


@given(positive_ks, open_alphas, draft_costs, verify_costs)
def test_speedup_at_u0_is_exactly_2_2(k, a, d, c):
    assert speedup(k, a, d, c, 0.0) == expected_tokens(k, a) / (k * d + 1 + c * k)


@given(positive_ks, alphas, draft_costs, verify_costs, utilizations, utilizations)
def test_speedup_non_increasing_in_u(k, a, d, c, u1, u2):
    lo, hi = sorted((u1, u2))
    assert speedup(k, a, d, c, hi) <= speedup(k, a, d, c, lo) * (1 + 1e-12)


@given(positive_ks, open_alphas, open_alphas, draft_costs, verify_costs)
def test_speedup_monotone_in_alpha(k, a, b, d, c):
    lo, hi = sorted((a, b))
    assert speedup(k, lo, d, c) <= speedup(k, hi, d, c) * (1 + 1e-12)


@given(alphas, draft_costs, verify_costs, utilizations)
def test_optimal_k_is_the_argmax(a, d, c, u):
    k = optimal_k(a, d, c, u, k_max=12)
    best = speedup(k, a, d, c, u)
    assert all(speedup(j, a, d, c, u) <= best for j in range(1, 13))


@given(st.integers(1, 10), draft_costs, verify_costs, st.floats(0.0, 0.9))
def test_break_even_alpha_is_a_root(k, d, c, u):
    a = break_even_alpha(k, d, c, u)
    if a < 1.0:
        assert math.isclose(speedup(k, a, d, c, u), 1.0, rel_tol=1e-9)
    else:  # no alpha below 1 pays; at the boundary (speedup exactly 1) allow the last bit of rounding
        assert speedup(k, 1.0, d, c, u) <= 1.0 * (1 + 1e-12)


def test_gate_limits():
    assert utilization_gate(0.0) == 1.0
    assert math.isclose(utilization_gate(0.7), 1.001 / 0.301)
    assert utilization_gate(0.999999) > 900  # -> (1 + eps) / eps = 1001
    assert GATE_EPSILON == 1e-3


def test_cycle_time_counts_draft_and_verify():
    # k d + 1 + c k: 4 * 0.1 + 1 + 0.05 * 4 = 1.6 target steps
    assert math.isclose(cycle_time(4, 0.1, 0.05), 1.6)
    r = evaluate(4, 0.85, 0.1, 0.05)
    assert math.isclose(r.speedup, r.expected_tokens / r.cycle_time) and r.verdict == "HELPS"


def test_turn_off_utilization_is_where_best_speedup_crosses_1():
    for p in SPECDEC_PRESETS.values():
        u = turn_off_utilization(p.alpha, p.d, p.c)
        below, above = u - 1e-3, u + 1e-3
        assert speedup(optimal_k(p.alpha, p.d, p.c, below), p.alpha, p.d, p.c, below) > 1.0
        assert speedup(optimal_k(p.alpha, p.d, p.c, above), p.alpha, p.d, p.c, above) < 1.0
    assert turn_off_utilization(0.1, 1.0, 0.5) == 0.0  # never pays


def test_every_preset_documents_its_reasoning():
    assert set(SPECDEC_PRESETS) == {"small-draft", "mtp", "medusa", "eagle3"}
    assert all(len(p.description) > 80 for p in SPECDEC_PRESETS.values())


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: expected_tokens(3, 1.5), "alpha"),
        (lambda: expected_tokens(3, float("nan")), "alpha"),
        (lambda: expected_tokens(-1, 0.5), "k"),
        (lambda: speedup(3, 0.5, -0.1, 0.05), "d"),
        (lambda: speedup(3, 0.5, 0.1, 0.05, 1.0), "u"),
        (lambda: optimal_k(0.5, 0.1, 0.05, k_max=0), "k_max"),
    ],
)
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ParameterError) as info:
        call()
    assert info.value.name == name
    assert f"{name}=" in str(info.value) and "must be" in str(info.value)
