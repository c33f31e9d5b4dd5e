"""The G/G/c engine against exact queueing results, plus its contract.

Agreement tests compute the reference in code (Erlang-C, Pollaczek-Khinchine)
and allow 4 standard errors of the replication spread; they never pin seeded
numbers (those live in test_sim_regression.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings

from servesim._checks import ParameterError
from servesim.model.queueing import MMc
from servesim.sim import _kernels as kern
from servesim.sim.distributions import (
    Deterministic,
    Empirical,
    Exponential,
    Gamma,
    Lognormal,
    Mixture,
    TraceArrivals,
    arrivals_with_cv,
    gamma_arrivals,
    poisson_arrivals,
    scv,
)
from servesim.sim.queue import simulate_queue
from servesim.sim.stats import Estimate, estimate, replication_rngs, t_quantile_975
from tests.strategies import small_servers

Z = 4.0


@pytest.mark.parametrize(("servers", "rho"), [(1, 0.7), (8, 0.85), (32, 0.9)])
def test_mmc_agrees_with_erlang_c(servers, rho):
    lam = rho * servers
    q = simulate_queue(
        servers, poisson_arrivals(lam), Exponential(1.0), requests=400_000, replications=8, seed=11
    )
    ref = MMc(servers, lam, 1.0)
    assert q.mean_wait_s.agrees_with(ref.mean_wait_s(), Z)
    assert q.p_wait.agrees_with(ref.p_wait, Z)
    assert q.wait_p99_s.agrees_with(ref.wait_quantile_s(0.99), Z)


def test_md1_agrees_with_pollaczek_khinchine():
    # M/D/1: E[W_q] = rho S / (2 (1 - rho)) exactly (P-K with c_s^2 = 0)
    rho = 0.8
    q = simulate_queue(1, poisson_arrivals(rho), Deterministic(1.0), requests=400_000, replications=8, seed=3)
    assert q.mean_wait_s.agrees_with(rho / (2 * (1 - rho)), Z)
    assert q.p_wait.agrees_with(rho, Z)  # P(wait) = rho for any M/G/1


def test_mg1_lognormal_agrees_with_pollaczek_khinchine():
    rho, cv = 0.6, 1.5
    q = simulate_queue(1, poisson_arrivals(rho), Lognormal(1.0, cv), requests=400_000, replications=8, seed=5)
    assert q.mean_wait_s.agrees_with(rho * (1 + cv**2) / (2 * (1 - rho)), Z)


def test_p_within_matches_the_mmc_tail():
    q = simulate_queue(
        4, poisson_arrivals(3.0), Exponential(1.0), requests=200_000, replications=8, seed=9, within_s=0.5
    )
    assert q.p_within is not None
    assert q.p_within.agrees_with(1.0 - MMc(4, 3.0, 1.0).wait_tail(0.5), Z)


def test_compiled_kernel_matches_python_reference():
    rng = np.random.default_rng(0)
    ia, sv = rng.exponential(1.0, 500), rng.exponential(3.0, 500)
    out_c, out_p = np.empty(500), np.empty(500)
    heap_c, heap_p = np.zeros(4), np.zeros(4)
    t_c = kern.fcfs_waits_chunk(ia, sv, heap_c, 0.0, out_c)
    t_p = kern._fcfs_waits_chunk_py(ia, sv, heap_p, 0.0, out_p)
    assert t_c == t_p
    np.testing.assert_array_equal(out_c, out_p)


def _brute_force_fcfs(arrival, service, servers):
    free = [0.0] * servers
    waits = []
    for a, s in zip(arrival, service, strict=True):
        j = min(range(servers), key=lambda i: free[i])
        start = max(a, free[j])
        waits.append(start - a)
        free[j] = start + s
    return np.array(waits)


@settings(max_examples=25, deadline=None)
@given(c=small_servers)
def test_heap_recursion_equals_brute_force(c):
    rng = np.random.default_rng(c)
    ia, sv = rng.exponential(1.0, 300), rng.exponential(0.9 * c, 300)
    waits = np.empty(300)
    kern.fcfs_waits_chunk(ia, sv, np.zeros(c), 0.0, waits)
    np.testing.assert_allclose(waits, _brute_force_fcfs(np.cumsum(ia), sv, c), rtol=1e-12, atol=1e-12)


def test_assign_gives_the_same_waits_as_the_chunk_kernel():
    rng = np.random.default_rng(1)
    ia, sv = rng.exponential(1.0, 1000), rng.exponential(2.5, 1000)
    waits = np.empty(1000)
    kern.fcfs_waits_chunk(ia, sv, np.zeros(3), 0.0, waits)
    arrival = np.cumsum(ia)
    start, server = np.empty(1000), np.empty(1000, dtype=np.int64)
    kern.fcfs_assign(arrival, sv, 3, start, server)
    np.testing.assert_allclose(start - arrival, waits, atol=1e-9)
    assert set(np.unique(server)) <= {0, 1, 2}


def test_trace_arrivals_replay_exactly():
    times = np.array([0.0, 0.5, 0.6, 3.0])
    q = simulate_queue(1, TraceArrivals(times), Deterministic(1.0), replications=2, warmup_fraction=0.0)
    # waits: 0, 0.5, 1.4 (starts 0, 1, 2), then 0 at t = 3
    assert q.mean_wait_s.mean == pytest.approx((0 + 0.5 + 1.4 + 0) / 4)
    assert q.p_wait.mean == pytest.approx(0.5)
    assert q.requests == 8


def test_unstable_queue_is_a_result_not_a_crash():
    q = simulate_queue(2, poisson_arrivals(3.0), Exponential(1.0), requests=1000, replications=2)
    assert not q.stable
    assert math.isinf(q.mean_wait_s.mean)
    assert q.p_wait.mean == 1.0


def test_same_seed_same_numbers_other_seed_other_numbers():
    args = (8, gamma_arrivals(6.0, 1.5), Gamma(1.0, 0.5))
    a = simulate_queue(*args, requests=20_000, replications=4, seed=1)
    b = simulate_queue(*args, requests=20_000, replications=4, seed=1)
    c = simulate_queue(*args, requests=20_000, replications=4, seed=2)
    assert a == b
    assert a.mean_wait_s != c.mean_wait_s
    g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
    assert simulate_queue(*args, requests=2000, replications=2, seed=g1) == simulate_queue(
        *args, requests=2000, replications=2, seed=g2
    )


def test_exponential_fast_path_draws_the_same_numbers_as_sample():
    from servesim.sim.queue import _draw

    d = Exponential(2.5)
    out = np.empty(1000)
    _draw(d, np.random.default_rng(4), out)
    np.testing.assert_array_equal(out, d.sample(np.random.default_rng(4), 1000))


@pytest.mark.parametrize(
    "dist",
    [
        Exponential(2.0),
        Deterministic(2.0),
        Gamma(2.0, 0.5),
        Lognormal(2.0, 1.5),
        Empirical((1.0, 3.0), (1.0, 1.0)),
        Mixture((Deterministic(1.0), Exponential(3.0)), (0.5, 0.5)),
    ],
)
def test_distributions_sample_their_stated_moments(dist):
    x = dist.sample(np.random.default_rng(0), 400_000)
    assert x.mean() == pytest.approx(dist.mean, rel=0.02)
    assert x.var() == pytest.approx(dist.variance, rel=0.1, abs=1e-12)
    assert scv(dist) == pytest.approx(dist.variance / dist.mean**2)


def test_arrivals_with_cv_is_poisson_at_one_and_gamma_otherwise():
    rng = np.random.default_rng(3)
    for cv in (1.0, 0.5, 2.0):
        a = arrivals_with_cv(4.0, cv)
        assert a.rate_per_s == pytest.approx(4.0) and a.scv == pytest.approx(cv**2)
        assert isinstance(a.interarrival_s, Exponential if cv == 1.0 else Gamma)
        gaps = np.diff(a.times_s(rng, 200_001))
        assert np.std(gaps) / np.mean(gaps) == pytest.approx(cv, rel=0.03)


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: Exponential(0.0), "mean"),
        (lambda: Gamma(1.0, -1.0), "cv"),
        (lambda: Empirical(()), "values"),
        (lambda: Empirical((1.0, 2.0), (1.0,)), "weights"),
        (lambda: TraceArrivals([0.0, 2.0, 1.0]), "times_s[2]"),
        (lambda: poisson_arrivals(0.0), "rate_per_s"),
        (lambda: simulate_queue(0, poisson_arrivals(1.0), Exponential(1.0)), "servers"),
        (
            lambda: simulate_queue(1, poisson_arrivals(0.5), Exponential(1.0), warmup_fraction=1.0),
            "warmup_fraction",
        ),
    ],
)
def test_bad_parameters_name_the_field(build, name):
    with pytest.raises(ParameterError) as err:
        build()
    assert err.value.name == name
    assert "must be" in str(err.value)


def test_estimate_interval_is_student_t():
    e = estimate([1.0, 2.0, 3.0])
    assert e.mean == 2.0
    assert e.half_width == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert e.se == pytest.approx(1 / math.sqrt(3))
    assert math.isnan(estimate([1.0]).half_width)
    assert t_quantile_975(1000) == pytest.approx(1.9623, abs=1e-3)
    assert Estimate.unstable().agrees_with(math.inf)


def test_replication_streams_are_independent_and_reproducible():
    a = [g.random() for g in replication_rngs(7, 3)]
    b = [g.random() for g in replication_rngs(7, 3)]
    assert a == b
    assert len(set(a)) == 3


@pytest.mark.parametrize("n", [1, 2, 3, 10, 1001, 50_000])
def test_percentiles_match_numpy_linear_method(n):
    from servesim.sim.stats import percentiles

    x = np.random.default_rng(n).exponential(1.0, n)
    x[: n // 3] = 0.0  # an atom at zero, as waits have
    np.testing.assert_allclose(percentiles(x), np.percentile(x, [50, 90, 99]), rtol=1e-13, atol=0)


@pytest.mark.parametrize("c", [1, 2, 8, 600])
def test_sorted_and_heap_kernels_give_identical_waits(c):
    rng = np.random.default_rng(c)
    ia, sv = rng.exponential(1.0, 5000), rng.exponential(0.9 * c, 5000)
    w_heap, w_sorted = np.empty(5000), np.empty(5000)
    kern.fcfs_waits_chunk(ia, sv, np.zeros(c), 0.0, w_heap)
    kern.fcfs_waits_sorted_chunk(ia, sv, np.zeros(c), 0.0, w_sorted)
    np.testing.assert_array_equal(w_heap, w_sorted)


def test_the_largest_warmup_below_one_leaves_a_request_to_measure():
    # floor(3 x 0.9999999999999999) = 2 of 3 dropped: the third is measured (nothing to refuse)
    frac = math.nextafter(1.0, 0.0)
    q = simulate_queue(1, poisson_arrivals(0.5), Exponential(1.0), requests=3, replications=1,
                       warmup_fraction=frac)
    assert (q.requests, q.measured_requests) == (3, 1)
