"""Closed-form M/G/c approximations: exact limits, and closeness to the simulation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings

from servesim._checks import ParameterError
from servesim.model.mgc import (
    METHODS,
    GGc,
    cosmetatos_md_c_mean_wait_s,
)
from servesim.model.queueing import MMc
from servesim.sim.distributions import Deterministic, poisson_arrivals
from servesim.sim.queue import simulate_queue
from tests.strategies import service_scvs, small_servers, stable_utilizations


@settings(max_examples=50, deadline=None)
@given(c=small_servers, rho=stable_utilizations)
def test_every_method_is_erlang_c_for_mmc(c, rho):
    ref = MMc(c, rho * c, 1.0).mean_wait_s()
    for method in METHODS:
        assert GGc(c, rho * c, 1.0, 1.0, 1.0, method).mean_wait_s() == pytest.approx(ref, rel=1e-12)


@settings(max_examples=50, deadline=None)
@given(rho=stable_utilizations, cs2=service_scvs)
def test_single_server_is_pollaczek_khinchine(rho, cs2):
    # M/G/1: E[W_q] = rho S (1 + c_s^2) / (2 (1 - rho))
    pk = rho * (1 + cs2) / (2 * (1 - rho))
    for method in METHODS:
        assert GGc(1, rho, 1.0, 1.0, cs2, method).mean_wait_s() == pytest.approx(pk, rel=1e-12)
    assert cosmetatos_md_c_mean_wait_s(1, rho, 1.0) == pytest.approx(rho / (2 * (1 - rho)), rel=1e-12)


@settings(max_examples=50, deadline=None)
@given(c=small_servers, rho=stable_utilizations, cs2=service_scvs)
def test_kimura_interpolates_between_md_c_and_mm_c(c, rho, cs2):
    w = GGc(c, rho * c, 1.0, 1.0, cs2, "kimura").mean_wait_s()
    w_md = cosmetatos_md_c_mean_wait_s(c, rho * c, 1.0)
    w_mm = MMc(c, rho * c, 1.0).mean_wait_s()
    if cs2 <= 1.0:
        assert w_md * (1 - 1e-12) <= w <= w_mm * (1 + 1e-12)
    else:
        assert w >= w_mm * (1 - 1e-12)


def test_tail_and_quantile_are_exact_for_mmc_and_consistent_otherwise():
    g = GGc(8, 6.8, 1.0)
    m = MMc(8, 6.8, 1.0)
    assert g.wait_tail(1.3) == pytest.approx(m.wait_tail(1.3), rel=1e-12)
    assert g.wait_quantile_s(0.99) == pytest.approx(m.wait_quantile_s(0.99), rel=1e-12)
    d = GGc(8, 6.8, 1.0, service_scv=0.0)
    t = d.wait_quantile_s(0.99)
    assert d.wait_tail(t) == pytest.approx(0.01, rel=1e-9)
    assert d.wait_quantile_s(0.1) == 0.0  # below 1 - C nobody waits


def test_unstable_is_infinite_not_an_error():
    g = GGc(2, 3.0, 1.0, service_scv=0.0)
    assert not g.stable
    assert math.isinf(g.mean_wait_s())
    assert g.wait_tail(5.0) == 1.0
    assert math.isinf(cosmetatos_md_c_mean_wait_s(2, 3.0, 1.0))


def test_bad_method_and_parameters_are_named():
    with pytest.raises(ParameterError, match="method"):
        GGc(2, 1.0, 1.0, method="whitt")
    with pytest.raises(ParameterError, match="service_scv"):
        GGc(2, 1.0, 1.0, service_scv=-1.0)
    with pytest.raises(ParameterError, match="service_mean_s"):
        GGc(2, 1.0, 0.0, method="allen-cunneen")
    with pytest.raises(ParameterError, match="service_s"):
        cosmetatos_md_c_mean_wait_s(2, 1.0, 0.0)


def test_md_c_approximation_is_close_to_the_simulation():
    # An approximation, so a stated tolerance (5%) rather than standard errors
    c, rho = 8, 0.85
    q = simulate_queue(
        c, poisson_arrivals(rho * c), Deterministic(1.0), requests=600_000, replications=6, seed=2
    )
    kimura = GGc(c, rho * c, 1.0, 1.0, 0.0, "kimura").mean_wait_s()
    assert abs(kimura - q.mean_wait_s.mean) <= 0.05 * q.mean_wait_s.mean + 4 * q.mean_wait_s.se
