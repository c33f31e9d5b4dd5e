"""One arrival generator for the engine loop (servesim.sim.client.arrival_times), its draws pinned."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from servesim.sim.client import arrival_times


@pytest.mark.parametrize(("rate", "n", "seed"),
                         [(0.3, 1, 0), (3.0, 2, 1), (17.3, 300, 7), (1.0, 1000, 12345)])
def test_poisson_send_times_are_the_running_sum_of_cpythons_exponential_gaps(rate, n, seed):
    # What sim.engine drew with its own copy before it called arrival_times: -log(1 - U) / rate
    # gaps of random.Random(seed), summed from 0 (CPython's expovariate, the same floats).
    u = random.Random(seed).random
    gaps = (-math.log(1.0 - u()) / rate for _ in range(n - 1))
    expected = list(itertools.accumulate(gaps, initial=0.0))[:n]
    assert arrival_times(rate, 1.0, n, seed) == expected


def test_burstiness_draws_gamma_gaps_of_the_same_mean_from_the_same_stream():
    # burstiness b: gamma gaps of shape b and mean 1 / rate (what the client's --burstiness does);
    # the mean of 20,000 gaps is within 4 standard errors of 1 / rate, and their coefficient of
    # variation is a gamma's, 1 / sqrt(b), within 10%.
    rate, n = 2.0, 20_001
    for b in (0.25, 1.0, 4.0):
        t = arrival_times(rate, b, n, 3)
        gaps = [y - x for x, y in itertools.pairwise(t)]
        mean = sum(gaps) / len(gaps)
        sd = math.sqrt(1.0 / b) / rate  # a gamma of shape b has cv 1 / sqrt(b)
        assert mean == pytest.approx(1.0 / rate, abs=4 * sd / math.sqrt(len(gaps)))
        cv = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1)) / mean
        assert cv == pytest.approx(1.0 / math.sqrt(b), rel=0.1)
    assert arrival_times(rate, 1.0, 5, 3)[0] == 0.0  # the first request goes at 0
