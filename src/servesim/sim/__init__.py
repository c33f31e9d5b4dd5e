"""Discrete-event and Monte Carlo checks of the closed forms (the "model vs reality" list in numbers).

Imports only :mod:`servesim.hardware` and :mod:`servesim.model`; computes and never prints.

The simulator takes the same frozen parameter objects as the closed forms
(:class:`servesim.model.serving.Workload`, :class:`servesim.model.serving.NodeSpec`,
:class:`servesim.model.kvcache.Link`, :class:`servesim.model.speculative.SpecDecPreset`'s
alpha/d/c) plus a seed or ``numpy.random.Generator``; nothing is seeded
globally and the same inputs give the same numbers.

* :func:`simulate_queue`: a G/G/c FCFS queue (numba-compiled recursion) with
  Poisson, bursty or explicit arrivals and any service distribution.
* :func:`simulate_serving`, :func:`compare_fleets`, :func:`replay_trace`:
  request-level colocated and disaggregated serving of the lab's nodes (TTFT/TPOT
  percentiles, goodput, attainment), with :class:`SimSettings` saying which
  closed-form simplification to relax and :class:`SimOptions` the traffic and the run.
* :func:`simulate_specdec`: speculative cycles under i.i.d., position-dependent
  and bursty (Markov) acceptance.
* Every estimate is an :class:`Estimate` with a 95% interval from independent
  replications; the first ``warmup_fraction`` (default 0.1) of each
  replication's requests is left out (the system starts empty).
"""

from servesim.sim.cluster import (
    CLOSED_FORM,
    DEFAULT_OPTIONS,
    DEFAULT_SETTINGS,
    LINK_CONTENTION,
    PREFILL_SERVICE,
    QUICK_OPTIONS,
    REPLAY_OPTIONS,
    Colocated,
    Disaggregated,
    Fleet,
    FleetComparison,
    Latency,
    Requests,
    RequestTimes,
    ServingSim,
    SimOptions,
    SimSettings,
    best_split_sim,
    compare_fleets,
    decode_slots_per_node,
    link_crossover_sim,
    replay_trace,
    run,
    sample_requests,
    simulate_serving,
    slo_capacity_per_s,
)
from servesim.sim.distributions import (
    Arrivals,
    Deterministic,
    Distribution,
    Empirical,
    Exponential,
    Gamma,
    Lognormal,
    Mixture,
    RenewalArrivals,
    TraceArrivals,
    gamma_arrivals,
    poisson_arrivals,
    scv,
)
from servesim.sim.queue import QueueSim, simulate_queue
from servesim.sim.specdec import (
    AcceptanceModel,
    IidAcceptance,
    MarkovAcceptance,
    PositionalAcceptance,
    SpecDecSim,
    linear_profile,
    simulate_specdec,
)
from servesim.sim.stats import DEFAULT_SEED, DEFAULT_WARMUP_FRACTION, Estimate, estimate, replication_rngs

__all__ = [
    "CLOSED_FORM",
    "DEFAULT_OPTIONS",
    "DEFAULT_SEED",
    "DEFAULT_SETTINGS",
    "DEFAULT_WARMUP_FRACTION",
    "LINK_CONTENTION",
    "PREFILL_SERVICE",
    "QUICK_OPTIONS",
    "REPLAY_OPTIONS",
    "AcceptanceModel",
    "Arrivals",
    "Colocated",
    "Deterministic",
    "Disaggregated",
    "Distribution",
    "Empirical",
    "Estimate",
    "Exponential",
    "Fleet",
    "FleetComparison",
    "Gamma",
    "IidAcceptance",
    "Latency",
    "Lognormal",
    "MarkovAcceptance",
    "Mixture",
    "PositionalAcceptance",
    "QueueSim",
    "RenewalArrivals",
    "RequestTimes",
    "Requests",
    "ServingSim",
    "SimOptions",
    "SimSettings",
    "SpecDecSim",
    "TraceArrivals",
    "best_split_sim",
    "compare_fleets",
    "decode_slots_per_node",
    "estimate",
    "gamma_arrivals",
    "linear_profile",
    "link_crossover_sim",
    "poisson_arrivals",
    "replay_trace",
    "replication_rngs",
    "run",
    "sample_requests",
    "scv",
    "simulate_queue",
    "simulate_serving",
    "simulate_specdec",
    "slo_capacity_per_s",
]
