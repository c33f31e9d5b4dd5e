"""Seeded regression pins: NOT agreement with theory.

These values are what the simulator printed for a fixed seed when they were
written.  They catch unintended changes to the random stream's layout or to
the engines (a refactor that should change no number), nothing more; the
agreement with theory is tested in test_sim_queue.py, test_sim_specdec.py and
test_sim_cluster.py with tolerances from the replication spread.  If a change
is intended (e.g. a new chunk layout), update the pins and say why.
"""

from __future__ import annotations

import pytest

from servesim.model.serving import DEFAULT_NODE, WORKLOAD_PRESETS
from servesim.sim import (
    Colocated,
    Exponential,
    MarkovAcceptance,
    SimOptions,
    poisson_arrivals,
    simulate_queue,
    simulate_serving,
    simulate_specdec,
)

PINS = {
    "mm8_mean_wait_s": 0.4738461701256475,
    "mm8_p_wait": 0.5732911111111111,
    "markov_en": 3.17894,
    "agent_ttft_mean_s": 0.7461764783632947,
}


def test_regression_pin_mm8_seed_1():
    q = simulate_queue(
        8, poisson_arrivals(6.8), Exponential(1.0), requests=1_000_000, replications=10, seed=1
    )
    assert q.mean_wait_s.mean == pytest.approx(PINS["mm8_mean_wait_s"], rel=1e-12)
    assert q.p_wait.mean == pytest.approx(PINS["mm8_p_wait"], rel=1e-12)


def test_regression_pin_markov_specdec_seed_4():
    s = simulate_specdec(MarkovAcceptance(0.8, 0.3), 4, cycles=100_000, replications=4, seed=4)
    assert s.expected_tokens.mean == pytest.approx(PINS["markov_en"], rel=1e-12)


def test_regression_pin_agent_colocated_seed_5():
    s = simulate_serving(WORKLOAD_PRESETS["agent"], DEFAULT_NODE, Colocated(8),
                         SimOptions(requests=20_000, replications=4, seed=5))
    assert s.ttft_s.mean.mean == pytest.approx(PINS["agent_ttft_mean_s"], rel=1e-12)
