"""Request-level simulation of colocated and disaggregated serving: the lab's closed forms, checked.

This is the simulator of the lab's closed forms (:mod:`servesim.model.serving`, seed sections
3.3-3.5), not a second engine simulator: a node is the lab's four numbers (``R_p``, ``R_d``,
``TPOT_base`` and the KV bytes of a token), a fleet is :data:`Fleet` (``Colocated`` or
``Disaggregated`` nodes), and under :data:`CLOSED_FORM` (exponential prefill, free links,
unlimited decode) the simulation must agree with the formulas; each other setting relaxes one
of their assumptions.  ``simulate --preset``, ``validate`` (its serving agreement and bias
rows), ``plan --simulate`` and ``report`` run it.  The lab's own commands (``specdec``,
``disagg``, ``all``) and their golden outputs are closed forms only and never call it.  A
deployment of an engine on GPUs, step by step, is the engine loop's:
:func:`servesim.sim.disaggregation.run_disaggregated` is the one disaggregated simulator there.

The same frozen objects as the closed forms (:class:`~servesim.model.serving.Workload`,
:class:`~servesim.model.serving.NodeSpec`, :class:`~servesim.model.kvcache.Link`) describe the
system; :class:`SimSettings` says which of the closed form's simplifications (seed section 7)
to relax, and :class:`SimOptions` (the settings, the traffic, its size and the seed) is the one
parameter object of every function here that simulates.

**Colocated** (N nodes, each prefills and decodes)::

    prefill:  S_i = P_i / R_p on the shared FCFS queue of N nodes
    TTFT_i  = W_i + S_i                      (first token at the end of prefill)
    decode on the same node for D_i, where   D_i = O_i TPOT_base (1 + beta f_i)

``f_i`` is the fraction of the request's own decode window [t0, t0 + D_i]
during which its node runs prefill: the seed's ``rho_p``, measured on the
prefill work actually running beside the request instead of averaged, so TPOT
has a distribution (``TPOT_i = D_i / O_i``).  D_i appears on both sides (a
longer decode sees more prefill); the compiled kernel solves the fixed point
by bisection.  The mean is close to the closed form's
``TPOT_base (1 + beta rho_p)`` because E[f] ~= rho_p, and slightly below it
(0.1-1.5% on the presets): each window opens as its node finishes a prefill,
when the node is more often idle than on average.

**Disaggregated** (N_p prefill + N_d decode nodes joined by a link)::

    prefill:  S_i on the FCFS queue of N_p nodes, ends at e_i
    KV:       X_i = bytes/token * P_i / BW, queued FCFS on the link
              (one link per prefill node, one shared link, or no contention)
              with layer-by-layer streaming the cache of layer l leaves as soon
              as that layer's prefill is done: transfer can start at
              s_i + S_i / L and ends no earlier than e_i + X_i / L
              (L layers; the link is held for X_i, the bytes at full rate, so a
              transfer paced by its prefill leaves the link to others meanwhile)
    decode:   a FCFS pool of N_d * slots batch slots, each request holding
              one slot for O_i TPOT_base (no interference)
    TTFT_i  = time from arrival to the start of decode (seed convention: the
              first token counts once the cache is on the decode node, so
              TTFT = W + S + t_xfer, plus any link and decode-slot wait)
    TPOT_i  = TPOT_base

``slots`` defaults to floor(R_d TPOT_base): a node producing R_d tokens/s at
one token per TPOT_base per sequence runs R_d TPOT_base sequences at once, so
the pool's capacity matches the closed form's stability test
``lambda O < N_d R_d`` (to the rounding of the slot count).

Goodput is ``rate * attainment``, the attainment being the fraction of
measured requests with TTFT <= X and TPOT <= Y (the closed form's
``lambda P(TTFT <= X) 1[TPOT <= Y]`` with TPOT per request).

Warm-up and edges: each replication drops its first ``warmup_fraction`` of
requests (the system starts empty).  Colocated runs also drop requests whose
decode ends after the last arrival: past it no new prefill arrives, so their
interference would be under-counted.  A system whose offered load reaches 1
on any resource (prefill pool, decode pool, link) is unstable: it is not
simulated and reported with infinite latencies and zero goodput.  Trace
replays are always simulated (a finite trace has finite delays) and flagged
unstable by the same test at the trace's mean rate.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from servesim._checks import ParameterError, check_choice, check_counts, check_int, check_real
from servesim.model.kvcache import Link
from servesim.model.serving import (
    CROSSOVER_LADDER_GBPS,
    NodeSpec,
    Workload,
    best_split,
    pick_split,
    winner,
)
from servesim.sim import _kernels as kern
from servesim.sim.distributions import (
    Arrivals,
    Deterministic,
    Distribution,
    RenewalArrivals,
    TraceArrivals,
    arrivals_with_cv,
    as_times_s,
    poisson_arrivals,
)
from servesim.sim.stats import (
    DEFAULT_SEED,
    DEFAULT_WARMUP_FRACTION,
    Estimate,
    estimate,
    percentiles,
    replication_rngs,
    warmup_count,
)

__all__ = [
    "CLOSED_FORM",
    "DEFAULT_OPTIONS",
    "DEFAULT_SETTINGS",
    "LINK_CONTENTION",
    "PREFILL_SERVICE",
    "QUICK_OPTIONS",
    "REPLAY_OPTIONS",
    "Colocated",
    "Disaggregated",
    "Fleet",
    "FleetComparison",
    "Latency",
    "RequestTimes",
    "Requests",
    "ServingSim",
    "SimOptions",
    "SimSettings",
    "best_split_sim",
    "compare_fleets",
    "compare_sims",
    "decode_slots_per_node",
    "link_crossover_sim",
    "pick_best_split",
    "replay_trace",
    "run",
    "sample_requests",
    "simulate_serving",
    "slo_capacity_per_s",
]

F64 = NDArray[np.float64]

PREFILL_SERVICE: tuple[str, ...] = ("deterministic", "exponential")
"""Prefill time of a P-token prompt: exactly P / R_p (real), or exponential of that mean (M/M/c)."""

LINK_CONTENTION: tuple[str, ...] = ("node", "shared", "none")
"""KV link: one FCFS link per prefill node, one FCFS link for the pool, or no contention."""


@dataclass(frozen=True)
class SimSettings:
    """Which closed-form simplifications the simulation relaxes (defaults: the realistic choice):
    ``prefill_service`` and ``link_contention`` (:data:`PREFILL_SERVICE`, :data:`LINK_CONTENTION`;
    "none" is the closed form's, every transfer at full bandwidth at once), ``kv_streaming`` (the KV
    transfer overlaps prefill, layer by layer), ``decode_slots`` (False: unlimited, the closed form's,
    which only tests stability) of ``slots_per_node`` each (None: floor(R_d TPOT_base))."""

    prefill_service: str = "deterministic"
    link_contention: str = "node"
    kv_streaming: bool = False
    decode_slots: bool = True
    slots_per_node: int | None = None

    def __post_init__(self) -> None:
        check_choice("prefill_service", self.prefill_service, PREFILL_SERVICE)
        check_choice("link_contention", self.link_contention, LINK_CONTENTION)
        if not isinstance(self.kv_streaming, bool):
            raise ParameterError("kv_streaming", self.kv_streaming, "True or False")
        if not isinstance(self.decode_slots, bool):
            raise ParameterError("decode_slots", self.decode_slots, "True or False")
        if self.slots_per_node is not None:
            check_int("slots_per_node", self.slots_per_node, lo=1)


DEFAULT_SETTINGS = SimSettings()
"""The realistic settings: deterministic prefill, per-node links, finite decode slots."""

CLOSED_FORM = SimSettings(
    prefill_service="exponential", link_contention="none", kv_streaming=False, decode_slots=False
)
"""The closed form's own assumptions: under these the simulation must agree with it."""


@dataclass(frozen=True)
class Colocated:
    """Every one of ``nodes`` nodes prefills and decodes; ``beta`` is the interference knob."""

    architecture: ClassVar[str] = "colocated"
    nodes: int
    beta: float = 0.5

    def __post_init__(self) -> None:
        check_int("nodes", self.nodes, lo=1)
        check_real("beta", self.beta, lo=0.0)

    @property
    def split(self) -> str:
        return f"{self.nodes}"

    @property
    def pools(self) -> tuple[int, int]:
        """Nodes that prefill and nodes that decode: the same ``nodes``."""
        return self.nodes, self.nodes


@dataclass(frozen=True)
class Disaggregated:
    """``prefill_nodes`` prefill nodes and ``decode_nodes`` decode nodes joined by ``link``."""

    architecture: ClassVar[str] = "disaggregated"
    prefill_nodes: int
    decode_nodes: int
    link: Link

    def __post_init__(self) -> None:
        check_counts(self, "prefill_nodes", "decode_nodes")
        if not isinstance(self.link, Link):
            raise ParameterError("link", self.link, "a servesim.model.kvcache.Link")

    @property
    def split(self) -> str:
        return f"{self.prefill_nodes}p/{self.decode_nodes}d"

    @property
    def pools(self) -> tuple[int, int]:
        return self.prefill_nodes, self.decode_nodes


Fleet = Colocated | Disaggregated
"""How the lab's nodes are arranged: all colocated, or a prefill pool and a decode pool joined by a
link.  (Not ``Deployment``, which names an engine on GPUs, the engine-level commands' input.)"""


@dataclass(frozen=True)
class SimOptions:
    """How a simulation runs: the :class:`SimSettings`; renewal ``arrivals`` (None: Poisson at the
    workload's rate) and length distributions (None: the workload's fixed lengths); ``requests`` in
    all, split evenly over ``replications`` independent runs (every estimate carries a 95% interval
    from their spread), each dropping its first ``warmup_fraction``; the share of requests that must
    meet both SLOs; the seed (an int or a ``numpy.random.Generator``)."""

    settings: SimSettings = DEFAULT_SETTINGS
    arrivals: RenewalArrivals | None = None
    prompt_tokens: Distribution | None = None
    output_tokens: Distribution | None = None
    requests: int = 100_000
    replications: int = 5
    warmup_fraction: float = DEFAULT_WARMUP_FRACTION
    attainment_target: float = 0.9
    seed: int | np.random.Generator = DEFAULT_SEED

    def __post_init__(self) -> None:
        if not isinstance(self.settings, SimSettings):
            raise ParameterError("settings", self.settings, "a servesim.sim.SimSettings")
        reps = check_int("replications", self.replications, lo=1)
        check_int("requests", self.requests, lo=reps)
        check_real("attainment_target", self.attainment_target, lo=0.0, hi=1.0)
        check_real("warmup_fraction", self.warmup_fraction, lo=0.0, hi=1.0, hi_open=True)
        if self.arrivals is not None and not isinstance(self.arrivals, RenewalArrivals):
            raise ParameterError(
                "arrivals", self.arrivals, "RenewalArrivals (use replay_trace for timestamps)"
            )

    @property
    def per_replication(self) -> int:
        """Requests in each replication."""
        return self.requests // self.replications


DEFAULT_OPTIONS = SimOptions()
"""The realistic settings, Poisson arrivals and the workload's lengths, 100,000 requests in 5 runs."""

QUICK_OPTIONS = SimOptions(requests=20_000, replications=3)
"""The smaller runs of the searches that simulate many times (crossover ladder, capacity bisection)."""

REPLAY_OPTIONS = SimOptions(replications=1, warmup_fraction=0.0)
"""A trace replayed once from its start: no warm-up (the trace's start is part of what is replayed)."""


def _positive_array(name: str, values: ArrayLike, n: int) -> F64:
    arr = np.array(values, dtype=np.float64, copy=True)
    if arr.shape != (n,):
        raise ParameterError(name, f"array of shape {arr.shape}", f"a 1-D sequence of {n} values")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0.0):
        raise ParameterError(name, "array with entries <= 0 or non-finite", "finite token counts > 0")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class Requests:
    """Requests to serve: arrival times (s, sorted) and prompt / output lengths (tokens).

    Arrays are copied and made read-only.  Lengths may be fractional (a
    continuous length distribution); a trace gives integers.
    """

    arrival_s: F64 = field(repr=False)
    prompt_tokens: F64 = field(repr=False)
    output_tokens: F64 = field(repr=False)

    def __post_init__(self) -> None:
        a = as_times_s("arrival_s", self.arrival_s)
        object.__setattr__(self, "arrival_s", a)
        object.__setattr__(
            self, "prompt_tokens", _positive_array("prompt_tokens", self.prompt_tokens, a.size)
        )
        object.__setattr__(
            self, "output_tokens", _positive_array("output_tokens", self.output_tokens, a.size)
        )

    @property
    def n(self) -> int:
        return int(self.arrival_s.size)

    @property
    def rate_per_s(self) -> float:
        """Empirical arrival rate (n - 1) / (t_last - t_first); inf for a single instant."""
        return TraceArrivals(self.arrival_s).rate_per_s


def sample_requests(
    wl: Workload,
    rng: np.random.Generator,
    n: int,
    *,
    arrivals: Arrivals | None = None,
    prompt_tokens: Distribution | None = None,
    output_tokens: Distribution | None = None,
) -> Requests:
    """n requests: arrivals (default Poisson at wl.rate_per_s), then prompt and output lengths.

    Lengths default to the workload's fixed ``prompt_tokens`` / ``output_tokens``.
    The draws are made in this order (arrivals, prompts, outputs) so that runs
    sharing a seed share their random numbers (common random numbers).
    """
    n = check_int("n", n, lo=1)
    arr = poisson_arrivals(wl.rate_per_s) if arrivals is None else arrivals
    if isinstance(arr, TraceArrivals):
        times = arr.times_s[:n]
        n = int(times.size)
    else:
        times = arr.times_s(rng, n)
    p_dist = Deterministic(float(wl.prompt_tokens)) if prompt_tokens is None else prompt_tokens
    o_dist = Deterministic(float(wl.output_tokens)) if output_tokens is None else output_tokens
    return Requests(times, p_dist.sample(rng, n), o_dist.sample(rng, n))


@dataclass(frozen=True, eq=False)
class RequestTimes:
    """Per-request outcome of one run (seconds), in request (arrival) order.

    ``measured`` marks the requests that count in statistics (see the module
    docstring on warm-up and edges; the warm-up is applied by the caller).
    """

    ttft_s: F64 = field(repr=False)
    tpot_s: F64 = field(repr=False)
    prefill_wait_s: F64 = field(repr=False)
    link_wait_s: F64 = field(repr=False)
    decode_wait_s: F64 = field(repr=False)
    finish_s: F64 = field(repr=False)
    in_horizon: NDArray[np.bool_] = field(repr=False)


def decode_slots_per_node(node: NodeSpec, settings: SimSettings = DEFAULT_SETTINGS) -> int:
    """Batch slots of one decode node: the setting, or floor(R_d TPOT_base) (at least 1)."""
    if settings.slots_per_node is not None:
        return settings.slots_per_node
    return max(1, math.floor(node.decode_tokens_per_s * node.tpot_base_s + 1e-9))


def _prefill_s(req: Requests, node: NodeSpec, settings: SimSettings, rng: np.random.Generator | None) -> F64:
    s = np.asarray(req.prompt_tokens / node.prefill_tokens_per_s, dtype=np.float64)
    if settings.prefill_service == "exponential":
        if rng is None:
            raise ParameterError("rng", rng, "a numpy Generator when prefill_service is exponential")
        s = s * rng.standard_exponential(req.n)  # mean-preserving: E[Exp(1)] = 1
    return s


def _fcfs(arrival_s: F64, service_s: F64, servers: int) -> tuple[F64, NDArray[np.int64]]:
    start = np.empty(arrival_s.size)
    server = np.empty(arrival_s.size, dtype=np.int64)
    kern.fcfs_assign(np.ascontiguousarray(arrival_s), np.ascontiguousarray(service_s), servers, start, server)
    return start, server


def _colocated_times(
    req: Requests, node: NodeSpec, fleet: Colocated, settings: SimSettings, rng: np.random.Generator | None
) -> RequestTimes:
    """Each request's times on colocated lab nodes (the module docstring's colocated model)."""
    n_nodes = fleet.nodes
    s = _prefill_s(req, node, settings, rng)
    start, server = _fcfs(req.arrival_s, s, n_nodes)
    end = start + s
    # Every node's prefill intervals, grouped by node and sorted by start time
    order = np.lexsort((start, server))
    st = np.ascontiguousarray(start[order])
    en = np.ascontiguousarray(end[order])
    dur = s[order]
    counts = np.bincount(server, minlength=n_nodes)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    cum = np.zeros(req.n + n_nodes)
    for k in range(n_nodes):  # per node: [0, d_0, d_0 + d_1, ...]
        lo, hi = offsets[k], offsets[k + 1]
        cum[lo + k + 1 : hi + k + 1] = np.cumsum(dur[lo:hi])
    base = req.output_tokens * node.tpot_base_s
    decode = np.empty(req.n)
    kern.colocated_decode_s(end, np.ascontiguousarray(base), server, offsets, st, en, cum, fleet.beta, decode)
    finish = end + decode
    zeros = np.zeros(req.n)
    return RequestTimes(
        ttft_s=end - req.arrival_s,
        tpot_s=decode / req.output_tokens,
        prefill_wait_s=start - req.arrival_s,
        link_wait_s=zeros,
        decode_wait_s=zeros,
        finish_s=finish,
        in_horizon=finish <= req.arrival_s[-1],
    )


def _disaggregated_times(
    req: Requests, node: NodeSpec, fleet: Disaggregated, settings: SimSettings,
    rng: np.random.Generator | None,
) -> RequestTimes:
    """Each request's times on a prefill and a decode pool of lab nodes (the module docstring's
    disaggregated model; an engine's pools step by step are :mod:`servesim.sim.disaggregation`'s)."""
    s = _prefill_s(req, node, settings, rng)
    start_p, server_p = _fcfs(req.arrival_s, s, fleet.prefill_nodes)
    end_p = start_p + s
    xfer = req.prompt_tokens * node.kv.bytes_per_token / fleet.link.bytes_per_s
    layers = node.kv.layers
    if settings.kv_streaming:
        ready = start_p + s / layers  # layer 1's cache exists once 1/L of the prefill has run
        earliest_done = end_p + xfer / layers  # the last layer leaves when prefill ends
    else:
        ready = end_p
        earliest_done = end_p
    if settings.link_contention == "none":
        link_start = ready
    else:
        order = np.argsort(ready, kind="stable")
        if settings.link_contention == "node":
            group, groups = server_p[order], fleet.prefill_nodes
        else:
            group, groups = np.zeros(req.n, dtype=np.int64), 1
        started = np.empty(req.n)
        kern.fcfs_by_group(
            np.ascontiguousarray(ready[order]),
            np.ascontiguousarray(xfer[order]),
            np.ascontiguousarray(group),
            groups,
            started,
        )
        link_start = np.empty(req.n)
        link_start[order] = started
    kv_done = np.maximum(link_start + xfer, earliest_done)
    hold = req.output_tokens * node.tpot_base_s
    if settings.decode_slots:
        order = np.argsort(kv_done, kind="stable")
        slots = fleet.decode_nodes * decode_slots_per_node(node, settings)
        started, _ = _fcfs(kv_done[order], hold[order], slots)
        decode_start = np.empty(req.n)
        decode_start[order] = started
    else:
        decode_start = kv_done
    finish = decode_start + hold
    return RequestTimes(
        ttft_s=decode_start - req.arrival_s,
        tpot_s=np.full(req.n, node.tpot_base_s),
        prefill_wait_s=start_p - req.arrival_s,
        link_wait_s=link_start - ready,
        decode_wait_s=decode_start - kv_done,
        finish_s=finish,
        in_horizon=np.ones(req.n, dtype=bool),
    )


def run(
    requests: Requests,
    node: NodeSpec,
    fleet: Fleet,
    settings: SimSettings = DEFAULT_SETTINGS,
    rng: np.random.Generator | None = None,
) -> RequestTimes:
    """One run of ``requests`` through ``fleet``: per-request TTFT, TPOT and waits.

    ``rng`` is needed only for exponential prefill service (one draw per request).
    """
    if isinstance(fleet, Colocated):
        return _colocated_times(requests, node, fleet, settings, rng)
    if isinstance(fleet, Disaggregated):
        return _disaggregated_times(requests, node, fleet, settings, rng)
    raise ParameterError("fleet", fleet, "Colocated or Disaggregated")


@dataclass(frozen=True)
class Latency:
    """Mean and percentiles of one latency (seconds), each with its 95% interval."""

    mean: Estimate
    p50: Estimate
    p90: Estimate
    p99: Estimate

    @classmethod
    def unstable(cls) -> Latency:
        inf = Estimate.unstable()
        return cls(inf, inf, inf, inf)


@dataclass(frozen=True)
class ServingSim:
    """Simulated TTFT, TPOT and goodput of one fleet serving one workload.

    Utilizations are the offered loads ``lambda E[work] / capacity`` of the
    prefill pool, the decode pool and the busiest link; ``stable`` requires
    all three below 1.  ``goodput_rps = rate * attainment``;
    ``goodput_at_target_rps`` is the DistServe-style figure: the rate when at
    least ``attainment_target`` of requests meet both SLOs, else 0.
    """

    architecture: str
    split: str
    prefill_nodes: int
    decode_nodes: int
    settings: SimSettings
    rate_per_s: float
    slo_ttft_s: float
    slo_tpot_s: float
    attainment_target: float
    requests: int
    measured_requests: int
    replications: int
    warmup_fraction: float
    prefill_utilization: float
    decode_utilization: float
    link_utilization: float
    ttft_s: Latency
    tpot_s: Latency
    prefill_wait_s: Estimate
    link_wait_s: Estimate
    decode_wait_s: Estimate
    attainment: Estimate
    goodput_rps: Estimate

    @property
    def stable(self) -> bool:
        return max(self.prefill_utilization, self.decode_utilization, self.link_utilization) < 1.0

    @property
    def meets_target(self) -> bool:
        return self.attainment.mean >= self.attainment_target

    @property
    def goodput_at_target_rps(self) -> float:
        return self.rate_per_s if (self.stable and self.meets_target) else 0.0


def _utilizations(
    rate: float, mean_prompt: float, mean_output: float, node: NodeSpec, fleet: Fleet, settings: SimSettings
) -> tuple[float, float, float]:
    """Offered load of (prefill pool, decode pool, busiest link)."""
    n_p, n_d = fleet.pools
    rho_p = rate * mean_prompt / (n_p * node.prefill_tokens_per_s)
    if isinstance(fleet, Colocated) or not settings.decode_slots:
        rho_d = rate * mean_output / (n_d * node.decode_tokens_per_s)
    else:  # each request holds a slot for O TPOT_base; the pool has N_d * slots of them
        rho_d = rate * mean_output * node.tpot_base_s / (n_d * decode_slots_per_node(node, settings))
    if isinstance(fleet, Colocated):
        return rho_p, rho_d, 0.0
    xfer_s = mean_prompt * node.kv.bytes_per_token / fleet.link.bytes_per_s
    links = {"none": math.inf, "node": n_p, "shared": 1}[settings.link_contention]
    return rho_p, rho_d, rate * xfer_s / links


def _result(
    fleet: Fleet,
    options: SimOptions,
    rate: float,
    slo_s: tuple[float, float],
    util: tuple[float, float, float],
    runs: list[tuple[Requests, RequestTimes]] | None,
    *,
    replay: bool = False,
) -> ServingSim:
    """The :class:`ServingSim` of ``runs``; None: unstable, not simulated (infinite latencies, no
    goodput).  Each run drops its warm-up and, unless ``replay``, the requests past the horizon."""
    cols: defaultdict[str, list[float]] = defaultdict(list)
    measured = 0
    for req, t in runs or ():
        keep = np.zeros(req.n, dtype=bool)
        keep[warmup_count(req.n, options.warmup_fraction) :] = True
        if not replay and np.any(keep & t.in_horizon):
            keep &= t.in_horizon
        ttft, tpot = t.ttft_s[keep], t.tpot_s[keep]
        measured += int(ttft.size)
        for name, x in (("ttft", ttft), ("tpot", tpot)):
            cols[f"{name}_mean"].append(float(x.mean()))
            for stat, value in zip(("p50", "p90", "p99"), percentiles(x), strict=True):
                cols[f"{name}_{stat}"].append(value)
        for name, w in (("wp", t.prefill_wait_s), ("wl", t.link_wait_s), ("wd", t.decode_wait_s)):
            cols[name].append(float(w[keep].mean()))
        att = float(np.mean((ttft <= slo_s[0]) & (tpot <= slo_s[1])))
        cols["att"].append(att)
        cols["good"].append(rate * att)
    e: defaultdict[str, Estimate] = defaultdict(Estimate.unstable, att=Estimate.exact(0.0),
                                                good=Estimate.exact(0.0))
    if runs is not None:
        e.update((k, estimate(v)) for k, v in cols.items())
    n_p, n_d = fleet.pools
    return ServingSim(
        architecture=fleet.architecture, split=fleet.split, prefill_nodes=n_p, decode_nodes=n_d,
        settings=options.settings, rate_per_s=rate, slo_ttft_s=slo_s[0], slo_tpot_s=slo_s[1],
        attainment_target=options.attainment_target, requests=sum(req.n for req, _ in runs or ()),
        measured_requests=measured, replications=options.replications,
        warmup_fraction=float(options.warmup_fraction), prefill_utilization=util[0],
        decode_utilization=util[1], link_utilization=util[2],
        ttft_s=Latency(e["ttft_mean"], e["ttft_p50"], e["ttft_p90"], e["ttft_p99"]),
        tpot_s=Latency(e["tpot_mean"], e["tpot_p50"], e["tpot_p90"], e["tpot_p99"]),
        prefill_wait_s=e["wp"], link_wait_s=e["wl"], decode_wait_s=e["wd"], attainment=e["att"],
        goodput_rps=e["good"],
    )


def _mean_lengths(wl: Workload, options: SimOptions) -> tuple[float, float]:
    """Mean prompt and output tokens: the options' distributions, else the workload's lengths."""
    p = float(wl.prompt_tokens) if options.prompt_tokens is None else options.prompt_tokens.mean
    o = float(wl.output_tokens) if options.output_tokens is None else options.output_tokens.mean
    return p, o


def simulate_serving(
    wl: Workload, node: NodeSpec, fleet: Fleet, options: SimOptions = DEFAULT_OPTIONS
) -> ServingSim:
    """Simulate ``wl`` on ``fleet``: TTFT/TPOT mean and percentiles, attainment, goodput.

    Arrivals default to Poisson at ``wl.rate_per_s`` and lengths to the workload's fixed
    prompt/output lengths; ``options`` may relax either (:class:`SimOptions`).  The SLO pair
    is ``wl.slo_ttft_s`` / ``wl.slo_tpot_s``.
    """
    if not isinstance(options, SimOptions):
        raise ParameterError("options", options, "a servesim.sim.SimOptions")
    per_rep = options.per_replication
    arr = poisson_arrivals(wl.rate_per_s) if options.arrivals is None else options.arrivals
    rate = arr.rate_per_s
    util = _utilizations(rate, *_mean_lengths(wl, options), node, fleet, options.settings)
    slo_s = (wl.slo_ttft_s, wl.slo_tpot_s)
    if max(util) >= 1.0:
        return _result(fleet, options, rate, slo_s, util, None)
    runs = []
    for rng in replication_rngs(options.seed, options.replications):
        req = sample_requests(wl, rng, per_rep, arrivals=arr, prompt_tokens=options.prompt_tokens,
                              output_tokens=options.output_tokens)
        runs.append((req, run(req, node, fleet, options.settings, rng)))
    return _result(fleet, options, rate, slo_s, util, runs)


def replay_trace(
    requests: Requests,
    node: NodeSpec,
    fleet: Fleet,
    *,
    slo_ttft_s: float,
    slo_tpot_s: float,
    options: SimOptions = REPLAY_OPTIONS,
) -> ServingSim:
    """Replay explicit requests (arrival timestamps, prompt and output lengths) on a fleet.

    The trace gives the arrivals, the lengths and the request count (the options' own must be
    left unset); the options' settings, replications, warm-up, target and seed apply.  The trace is
    simulated even when its mean load is unstable (a finite trace has finite delays); ``stable``
    then reports False.  Replications differ only where the settings draw random numbers
    (exponential prefill service); with the default deterministic service one replication says
    all.  Goodput uses the trace's empirical rate.  No warm-up by default
    (:data:`REPLAY_OPTIONS`): the trace's start is part of what is replayed, and no edge cut at
    its end (nothing arrives after the trace, so late decodes see all their interference).
    """
    if not isinstance(requests, Requests):
        raise ParameterError("requests", requests, "a servesim.sim.Requests")
    x = check_real("slo_ttft_s", slo_ttft_s, lo=0.0, lo_open=True)
    y = check_real("slo_tpot_s", slo_tpot_s, lo=0.0, lo_open=True)
    if not isinstance(options, SimOptions):
        raise ParameterError("options", options, "a servesim.sim.SimOptions")
    for name in ("arrivals", "prompt_tokens", "output_tokens"):
        if getattr(options, name) is not None:
            raise ParameterError(name, getattr(options, name), "None: a replay takes the trace's own")
    rate = requests.rate_per_s
    mean_p, mean_o = float(requests.prompt_tokens.mean()), float(requests.output_tokens.mean())
    util = _utilizations(rate, mean_p, mean_o, node, fleet, options.settings)
    runs = [(requests, run(requests, node, fleet, options.settings, rng))
            for rng in replication_rngs(options.seed, options.replications)]
    return _result(fleet, options, rate, (x, y), util, runs, replay=True)


@dataclass(frozen=True)
class FleetComparison:
    """Colocated vs one disaggregated split of the same workload, simulated on the same requests."""

    colocated: ServingSim
    disaggregated: ServingSim
    winner: str  # "colocated", "disaggregated" or "neither"


def compare_sims(co: ServingSim, de: ServingSim, rate: float) -> str:
    """:func:`servesim.model.serving.winner` of the simulated goodputs."""
    return winner(co.goodput_rps.mean, de.goodput_rps.mean, rate)


def compare_fleets(
    wl: Workload,
    node: NodeSpec,
    nodes: int,
    link: Link,
    *,
    beta: float = 0.5,
    split: tuple[int, int] | None = None,
    options: SimOptions = DEFAULT_OPTIONS,
) -> FleetComparison:
    """Simulate ``nodes`` colocated nodes and a disaggregated split of the same fleet.

    ``split`` = (prefill_nodes, decode_nodes); by default the closed form's
    goodput-best split (:func:`servesim.model.serving.best_split`).  Both runs use
    the same seed, hence the same requests (common random numbers).
    """
    n = check_int("nodes", nodes, lo=2)
    if split is None:
        cf = best_split(wl, node, n, link)
        split = (cf.prefill_nodes, cf.decode_nodes)
    dis = Disaggregated(split[0], split[1], link)
    if isinstance(options.seed, np.random.Generator):  # one int seed, so both runs draw the same
        options = replace(options, seed=int(options.seed.integers(0, 2**63 - 1)))
    co = simulate_serving(wl, node, Colocated(n, beta), options)
    de = simulate_serving(wl, node, dis, options)
    return FleetComparison(co, de, compare_sims(co, de, co.rate_per_s))


def best_split_sim(
    wl: Workload, node: NodeSpec, nodes: int, link: Link, *, options: SimOptions = SimOptions(requests=50_000)
) -> ServingSim:
    """Simulate every split N_p + N_d = nodes and keep the best by :func:`pick_best_split`.

    Every split sees the same requests (one seed).
    """
    n = check_int("nodes", nodes, lo=2)
    sims = [simulate_serving(wl, node, Disaggregated(p, n - p, link), options) for p in range(1, n)]
    return pick_best_split(sims, wl.rate_per_s)


def pick_best_split(sims: list[ServingSim], rate: float) -> ServingSim:
    """The simulated splits ranked as :func:`servesim.model.serving.best_split` ranks closed forms
    (:func:`servesim.model.serving.pick_split`)."""
    return pick_split(sims, rate, lambda s: (s.goodput_rps.mean, s.stable, s.prefill_utilization,
                                             s.decode_utilization, s.ttft_s.mean.mean))


def link_crossover_sim(
    wl: Workload,
    node: NodeSpec,
    nodes: int,
    *,
    beta: float = 0.5,
    ladder_GBps: tuple[float, ...] = CROSSOVER_LADDER_GBPS,
    options: SimOptions = QUICK_OPTIONS,
) -> float | None:
    """The smallest ladder bandwidth (GB/s) at which the simulated best split beats colocation.

    The simulated counterpart of :func:`servesim.model.serving.link_crossover`'s
    ladder rung ("beats": more goodput by over 0.1% of the rate); None when no
    rung wins.
    """
    co = simulate_serving(wl, node, Colocated(check_int("nodes", nodes, lo=2), beta), options)
    for gbps in ladder_GBps:
        de = best_split_sim(wl, node, nodes, Link(f"{gbps:g} GB/s", gbps * 1e9), options=options)
        if compare_sims(co, de, co.rate_per_s) == "disaggregated":
            return gbps
    return None


def slo_capacity_per_s(
    wl: Workload,
    node: NodeSpec,
    fleet: Fleet,
    *,
    arrival_cv: float = 1.0,
    rel_tol: float = 0.01,
    options: SimOptions = QUICK_OPTIONS,
) -> float:
    """The highest arrival rate at which at least ``options.attainment_target`` of requests meet
    both SLOs.

    DistServe's per-GPU "goodput" is this rate divided by the GPUs.  Bisection
    on the rate between 0 and the stability limit; every trial uses the same
    seed, so interarrival times are the same draws rescaled (common random
    numbers) and attainment falls monotonically with the rate up to noise.
    Arrivals are Poisson (``arrival_cv`` = 1) or gamma with that cv (the options' own
    arrivals must be left unset).  Returns 0 when even a tiny rate misses the target (e.g.
    TPOT_base over the SLO).
    """
    target = check_real("attainment_target", options.attainment_target, lo=0.0, hi=1.0, hi_open=True)
    cv = check_real("arrival_cv", arrival_cv, lo=0.0, lo_open=True)
    tol = check_real("rel_tol", rel_tol, lo=0.0, lo_open=True)
    if options.arrivals is not None:
        raise ParameterError("arrivals", options.arrivals, "None: each trial rate draws its own (arrival_cv)")
    unit = _utilizations(1.0, *_mean_lengths(wl, options), node, fleet, options.settings)
    hi = 1.0 / max(unit)  # the rate at which the busiest resource saturates

    def ok(rate: float) -> bool:
        arr = arrivals_with_cv(rate, cv)
        sim = simulate_serving(replace(wl, rate_per_s=rate), node, fleet, replace(options, arrivals=arr))
        return sim.stable and sim.attainment.mean >= target

    lo = 0.0
    if not ok(hi * 1e-3):
        return 0.0
    lo = hi * 1e-3
    while hi - lo > tol * lo:
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
