"""Erlang-B/C and M/M/c: exact small cases, properties, large-c stability."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servesim import ParameterError
from servesim.model.queueing import (
    MMc,
    erlang_b,
    erlang_c,
    mmc_mean_wait_s,
    mmc_wait_tail,
)
from tests.strategies import servers


def _erlang_c_exact(c: int, a: Fraction) -> Fraction:
    """Textbook Erlang-C in exact rational arithmetic (the reference)."""
    rho = a / c
    top = a**c / math.factorial(c)
    return top / ((1 - rho) * sum(a**n / math.factorial(n) for n in range(c)) + top)


@pytest.mark.parametrize("c", [1, 2, 3, 5, 8, 13, 20])
@pytest.mark.parametrize("rho", [Fraction(1, 10), Fraction(1, 2), Fraction(17, 20), Fraction(99, 100)])
def test_erlang_c_matches_exact_rational_to_1e_12(c, rho):
    a = rho * c
    exact = float(_erlang_c_exact(c, a))
    assert math.isclose(erlang_c(c, float(a)), exact, rel_tol=1e-12)


@given(servers, st.floats(0.0, 0.999))
def test_erlang_c_is_a_probability(c, rho):
    p = erlang_c(c, rho * c)
    assert 0.0 <= p <= 1.0


@given(st.integers(1, 100), st.floats(0.01, 50.0))
def test_erlang_c_decreasing_in_servers(c, a):
    if a < c:
        assert erlang_c(c + 1, a) <= erlang_c(c, a)


@given(st.integers(1, 100), st.floats(0.0, 100.0))
def test_erlang_c_at_least_erlang_b(c, a):
    if a < c:
        assert erlang_c(c, a) >= erlang_b(c, a) - 1e-15


@given(st.integers(2, 50), st.floats(0.05, 0.95))
def test_pooling_beats_splitting(c, rho):
    # c servers sharing one queue vs c separate M/M/1 queues, each fed lambda / c.
    lam, mu = rho * c, 1.0
    assert mmc_mean_wait_s(c, lam, mu) < mmc_mean_wait_s(1, lam / c, mu)


def test_large_server_counts_are_stable():
    # 100,000 servers at rho = 0.999: factorials would overflow; the recursion does not.
    c = 100_000
    p = erlang_c(c, 0.999 * c)
    assert 0.0 < p < 1.0 and math.isfinite(p)
    # Halfin-Whitt: at rho = 1 - beta / sqrt(c) the wait probability tends to a constant
    # in (0, 1); for beta = 1 it is about 0.22, at any large c.
    for n in (10_000, 100_000):
        q = erlang_c(n, n - math.sqrt(n))
        assert 0.2 < q < 0.25


def test_wait_tail_and_quantile_invert():
    q = MMc(4, 3.2, 1.0)
    for p in (0.5, 0.9, 0.99):
        t = q.wait_quantile_s(p)
        if t > 0:
            assert math.isclose(q.wait_tail(t), 1 - p, rel_tol=1e-12)
    assert mmc_wait_tail(4, 3.2, 1.0, 0.0) == pytest.approx(q.p_wait)
    assert MMc(4, 0.1, 1.0).wait_quantile_s(0.5) == 0.0  # most arrivals never wait


def test_mean_wait_is_integral_of_tail():
    # E[W] = int_0^inf P(W > t) dt = C / (c mu - lambda)
    q = MMc(3, 2.4, 1.0)
    dt = 1e-3
    integral = sum(q.wait_tail(i * dt + dt / 2) for i in range(200_000)) * dt
    assert math.isclose(integral, q.mean_wait_s(), rel_tol=1e-6)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: erlang_c(0, 1.0), "servers"),
        (lambda: erlang_b(2, -1.0), "offered_load"),
        (lambda: erlang_c(2, float("nan")), "offered_load"),
        (lambda: MMc(2, 1.0, 0.0), "service_rate_per_s"),
        (lambda: MMc(2, -1.0, 1.0), "arrival_rate_per_s"),
    ],
)
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ParameterError) as info:
        call()
    assert info.value.name == name
