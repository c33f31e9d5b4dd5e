"""Deployment planner: rank colocated and every prefill/decode split, speculation off or on.

For a workload, a node, a link and a fleet size, every candidate deployment is
priced with the closed forms of :mod:`servesim.model.serving`, optionally with
speculative decoding on the decode side:

* **Speculation on a pool** divides its TPOT by the speedup
  ``S(k, alpha, d, c, u)`` of :mod:`servesim.model.speculative`, where ``u`` is the
  fraction of the pool's compute already in use: ``u = rho_d`` on a decode
  pool (its decode capacity is taken as the compute roof) and
  ``u = rho_p + rho_d`` on a colocated node (prefill is compute-bound).  A k is
  tried only where ``S > 1`` (the batch leaves spare compute).  Decode capacity
  is kept at its no-speculation value (conservative: stability never depends
  on the draft).
* **Attainment** is the fraction of requests meeting both SLOs,
  ``P(TTFT <= X) 1[TPOT <= Y]``; a deployment *meets the target* when it is at
  least ``attainment_target`` (DistServe reports 90%).  ``goodput_rps`` is
  ``lambda x attainment`` (the seed's definition) and ``max_rate_rps`` the
  largest arrival rate at which the target still holds (DistServe's).

Ranking: deployments that meet the target first, then higher goodput, then
the simpler deployment (colocated before split, speculation off before on),
then lower TPOT, then more headroom (a less utilized busiest pool), then lower
mean TTFT.  Goodputs within ``GOODPUT_TIE_FRACTION`` of the rate are
a tie, so the recommendation is the simplest deployment within that tolerance
of the best.

Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from servesim._checks import check_int, check_real
from servesim.model.kvcache import Link
from servesim.model.serving import (
    NodeSpec,
    ServingResult,
    Workload,
    colocated,
    disaggregated,
    tie_step,
)
from servesim.model.speculative import SpecDecPreset, optimal_k, speedup

__all__ = [
    "Candidate",
    "Plan",
    "PlanRequest",
    "Sensitivity",
    "candidates",
    "plan",
    "plan_stages",
    "sensitivity",
    "sensitivity_one",
    "sensitivity_parameters",
    "smallest_fleet",
]


@dataclass(frozen=True)
class PlanRequest:
    """What to plan: a workload on a fleet of identical nodes joined by a link."""

    workload: Workload
    node: NodeSpec
    link: Link
    nodes: int = 8
    beta: float = 0.5
    attainment_target: float = 0.9
    speculation: SpecDecPreset | None = None
    k_max: int = 8

    def __post_init__(self) -> None:
        check_int("nodes", self.nodes, lo=1)
        check_real("beta", self.beta, lo=0.0)
        check_real("attainment_target", self.attainment_target, lo=0.0, hi=1.0, lo_open=True)
        check_int("k_max", self.k_max, lo=1)


@dataclass(frozen=True)
class Candidate:
    """One priced deployment."""

    architecture: str  # "colocated" | "disaggregated"
    prefill_nodes: int
    decode_nodes: int
    speculative_k: int  # 0 = off
    speculative_speedup: float  # 1.0 when off
    result: ServingResult  # TPOT here already includes speculation
    attainment: float
    goodput_rps: float
    goodput_per_gpu: float
    meets_target: bool
    binding_constraint: str

    @property
    def label(self) -> str:
        where = "colocated" if self.architecture == "colocated" else self.result.split
        spec = f", spec k={self.speculative_k}" if self.speculative_k else ""
        return f"{where} x{self.prefill_nodes}{spec}" if self.architecture == "colocated" else where + spec

    @property
    def complexity(self) -> int:
        """0 colocated, 1 split; +1 with speculation: ties go to the simpler one."""
        return (self.architecture != "colocated") + (self.speculative_k > 0)


def _with_spec(r: ServingResult, wl: Workload, preset: SpecDecPreset | None, k: int, u: float) -> tuple[
    ServingResult, float
]:
    """Apply speculation (k drafts at compute utilization u) to a result's TPOT."""
    if preset is None or k == 0:
        return r, 1.0
    s = speedup(k, preset.alpha, preset.d, preset.c, u)
    tpot = r.tpot_s / s
    ok = tpot <= wl.slo_tpot_s
    good = wl.rate_per_s * r.p_ttft_ok if (r.stable and ok) else 0.0
    return replace(r, tpot_s=tpot, tpot_ok=ok, goodput_rps=good), s


def _binding(
    c_arch: str, r: ServingResult, wl: Workload, node: NodeSpec, attain: float, target: float
) -> str:
    """The constraint that limits this deployment, in words."""
    ms = 1e3
    if r.prefill_utilization >= 1.0:
        return (f"prefill pool unstable: utilization {r.prefill_utilization:.2f} >= 1 "
                f"({wl.rate_per_s:g} req/s x {r.prefill_s * ms:.0f} ms of prefill on {r.prefill_nodes} "
                f"node{'s' if r.prefill_nodes > 1 else ''})")
    if r.decode_utilization >= 1.0:
        need = wl.rate_per_s * wl.output_tokens
        have = r.decode_nodes * node.decode_tokens_per_s
        return f"decode pool unstable: {need:,.0f} tok/s needed > {have:,.0f} tok/s capacity"
    if not r.tpot_ok:
        cause = "prefill interference" if c_arch == "colocated" else "decode step time"
        return f"TPOT SLO broken by {cause}: {r.tpot_s * ms:.1f} > {wl.slo_tpot_s * ms:g} ms"
    budget = wl.slo_ttft_s
    xfer_share = r.kv_transfer_s / budget
    if attain < target:
        fixed = r.prefill_s + r.kv_transfer_s
        if fixed >= budget:
            return (f"TTFT SLO unreachable: prefill {r.prefill_s * ms:.0f} ms + KV transfer "
                    f"{r.kv_transfer_s * ms:.0f} ms >= {budget * ms:g} ms")
        return (f"TTFT SLO met by only {attain:.1%} of requests (target {target:.0%}); "
                f"KV transfer uses {xfer_share:.0%} of the TTFT budget")
    notes = []
    if r.kv_transfer_s > 0:
        notes.append(f"KV transfer uses {xfer_share:.0%} of the TTFT budget")
    notes.append(f"TPOT {r.tpot_s * ms:.1f} of {wl.slo_tpot_s * ms:g} ms")
    notes.append(f"utilization prefill {r.prefill_utilization:.2f}, decode {r.decode_utilization:.2f}")
    return "meets both SLOs; " + "; ".join(notes)


def _compute_utilization(r: ServingResult, arch: str) -> float:
    """The seed's u of the pool that decodes: rho_d, plus rho_p on a colocated node."""
    return min(0.999, r.decode_utilization + (r.prefill_utilization if arch == "colocated" else 0.0))


def _candidate(req: PlanRequest, wl: Workload, arch: str, r: ServingResult, k: int) -> Candidate:
    rs, s = _with_spec(r, wl, req.speculation, k, _compute_utilization(r, arch))
    attain = rs.p_ttft_ok if (rs.stable and rs.tpot_ok) else 0.0
    nodes = rs.prefill_nodes if arch == "colocated" else rs.prefill_nodes + rs.decode_nodes
    gpus = nodes * req.node.gpus
    return Candidate(
        architecture=arch,
        prefill_nodes=rs.prefill_nodes,
        decode_nodes=rs.decode_nodes,
        speculative_k=k,
        speculative_speedup=s,
        result=rs,
        attainment=attain,
        goodput_rps=rs.goodput_rps,
        goodput_per_gpu=rs.goodput_rps / gpus,
        meets_target=attain >= req.attainment_target,
        binding_constraint=_binding(arch, rs, wl, req.node, attain, req.attainment_target),
    )


def _spec_ks(req: PlanRequest, r: ServingResult, arch: str) -> list[int]:
    """k = 0, plus the best k in 1..k_max if it speeds this pool up at its utilization.

    The best k minimizes TPOT, which is all speculation changes here, so the
    other k cannot rank above it.
    """
    p = req.speculation
    if p is None or not r.stable:
        return [0]
    u = _compute_utilization(r, arch)
    k = optimal_k(p.alpha, p.d, p.c, u, req.k_max)
    return [0, k] if speedup(k, p.alpha, p.d, p.c, u) > 1.0 else [0]


def candidates(req: PlanRequest, wl: Workload | None = None) -> list[Candidate]:
    """Every deployment of the fleet: colocated and each N_p + N_d = N split, speculation off and on."""
    w = req.workload if wl is None else wl
    out: list[Candidate] = []
    co = colocated(w, req.node, req.nodes, req.beta)
    out += [_candidate(req, w, "colocated", co, k) for k in _spec_ks(req, co, "colocated")]
    for p in range(1, req.nodes):
        de = disaggregated(w, req.node, p, req.nodes - p, req.link)
        out += [_candidate(req, w, "disaggregated", de, k) for k in _spec_ks(req, de, "disaggregated")]
    return out


def _busiest(c: Candidate) -> float:
    """Utilization of the busier pool: less is more headroom for traffic growth."""
    return max(c.result.prefill_utilization, c.result.decode_utilization)


def _rank(cands: list[Candidate], rate_per_s: float) -> list[Candidate]:
    """Meeting the target first, then goodput in tie-tolerance steps below the best, then
    simplicity, TPOT, headroom and TTFT.  Steps are counted down from the best goodput, so
    the first step holds exactly the candidates tied with the best."""
    if not cands:
        return []
    top = {m: max((c.goodput_rps for c in cands if c.meets_target == m), default=0.0) for m in (True, False)}
    return sorted(
        cands,
        key=lambda c: (not c.meets_target, tie_step(c.goodput_rps, top[c.meets_target], rate_per_s),
                       c.complexity, c.result.tpot_s, _busiest(c), c.result.ttft_mean_s),
    )


def _best(req: PlanRequest, wl: Workload | None = None) -> Candidate:
    w = req.workload if wl is None else wl
    return _rank(candidates(req, w), w.rate_per_s)[0]


@dataclass(frozen=True)
class Sensitivity:
    """How far one input can move before the recommended architecture changes."""

    parameter: str
    baseline: float
    flips_at: float | None  # nearest value where the recommendation changes, None if not in range
    direction: str  # "down" or "up": which way the flip lies
    new_choice: str | None  # what changes, in words ("turn speculation off (colocated x8)", "split 6p/2d")


def _family(c: Candidate) -> str:
    """What a recommendation is, for sensitivity: architecture and whether it speculates."""
    return c.architecture + (" + speculation" if c.speculative_k else "")


def _change(old: Candidate, new: Candidate) -> str:
    """What a flip of the recommendation means, in words: the action and the deployment it leads to."""
    if old.architecture == new.architecture:
        turn = "off" if old.speculative_k and not new.speculative_k else "on"
        return f"turn speculation {turn} ({new.label})"
    if new.architecture == "colocated":
        return f"colocate ({new.label})"
    return f"split {new.label}"


def _flip(parameter: str, base: float, lo: float, hi: float, choose: Callable[[float], Candidate],
          log: bool = True) -> Sensitivity:
    """Scan from ``base`` towards ``lo`` and towards ``hi`` (24 steps each, geometric
    when ``log``) for the first value where the recommended family changes, refine
    it by bisection, and keep the flip nearer to ``base``."""
    ref_c = choose(base)
    ref = _family(ref_c)

    def between(a: float, b: float, f: float) -> float:
        return a * (b / a) ** f if log else a + (b - a) * f

    def distance(x: float) -> float:
        return abs(math.log(x / base)) if log else abs(x - base)

    found: list[Sensitivity] = []
    for end, direction in ((lo, "down"), (hi, "up")):
        prev = base
        for i in range(1, 25):
            x = between(base, end, i / 24)
            if _family(choose(x)) != ref:
                a, b = prev, x  # the choice is ref at a and differs at b
                for _ in range(40):
                    m = between(a, b, 0.5)
                    a, b = (m, b) if _family(choose(m)) == ref else (a, m)
                found.append(Sensitivity(parameter, base, b, direction, _change(ref_c, choose(b))))
                break
            prev = x
    if not found:
        return Sensitivity(parameter, base, None, "", None)
    return min(found, key=lambda s: distance(s.flips_at or base))


def sensitivity_parameters(req: PlanRequest) -> list[str]:
    """The inputs whose break-even values :func:`sensitivity` reports."""
    return ["link_GBps", "rate_per_s", "prompt_share"] + (["alpha"] if req.speculation else [])


def sensitivity_one(req: PlanRequest, parameter: str) -> Sensitivity:
    """Break-even value of one input (scanned 100x down and up, or over its range)."""
    wl = req.workload
    if parameter == "link_GBps":
        g = req.link.GBps
        return _flip(parameter, g, g / 100, g * 100,
                     lambda x: _best(replace(req, link=Link(f"{x:g} GB/s", x * 1e9))))
    if parameter == "rate_per_s":
        r = wl.rate_per_s
        return _flip(parameter, r, r / 10, r * 10, lambda x: _best(req, replace(wl, rate_per_s=x)))
    if parameter == "prompt_share":
        total = wl.total_tokens

        def with_share(share: float) -> Candidate:
            p = max(1, min(total - 1, round(total * share)))
            return _best(req, replace(wl, prompt_tokens=p, output_tokens=total - p))

        return _flip(parameter, wl.prompt_tokens / total, 1 / total, 1 - 1 / total, with_share, log=False)
    if parameter == "alpha" and req.speculation is not None:
        sp = req.speculation
        return _flip(parameter, sp.alpha, 0.0, 1.0,
                     lambda x: _best(replace(req, speculation=replace(sp, alpha=x))), log=False)
    raise ValueError(f"parameter={parameter!r} is invalid: must be one of {sensitivity_parameters(req)}")


def sensitivity(req: PlanRequest) -> list[Sensitivity]:
    """Break-even values of link bandwidth, arrival rate, prompt share and alpha."""
    return [sensitivity_one(req, p) for p in sensitivity_parameters(req)]


@dataclass(frozen=True)
class Plan:
    """The ranked deployments for one fleet, with sensitivity and the smallest fleet."""

    request: PlanRequest
    ranked: list[Candidate]
    sensitivity: list[Sensitivity]
    smallest_fleet: int | None  # fewest nodes meeting the attainment target at the rate

    @property
    def recommended(self) -> Candidate:
        return self.ranked[0]


def smallest_fleet(req: PlanRequest, max_nodes: int = 256) -> int | None:
    """Fewest nodes (>= 2) whose best deployment meets the attainment target at the workload's rate."""
    for n in range(2, max_nodes + 1):
        if _best(replace(req, nodes=n)).meets_target:
            return n
    return None


def plan(
    req: PlanRequest,
    *,
    with_sensitivity: bool = True,
    max_nodes: int = 256,
    jobs: int = 1,
    ray_address: str | None = None,
    progress: Callable[[], None] | None = None,
) -> Plan:
    """Rank every deployment of ``req`` and say how robust the choice is.

    The independent sensitivity scans run in ``jobs`` local processes, or on
    the Ray cluster at ``ray_address`` (see :mod:`servesim.sim.parallel`);
    ``progress`` is called once per finished stage.
    """
    from servesim.sim.parallel import map_tasks  # lazy: servesim.sim imports numba; plan --help imports us

    check_int("nodes", req.nodes, lo=2)
    tick = progress or (lambda: None)
    ranked = _rank(candidates(req), req.workload.rate_per_s)
    tick()
    sens: list[Sensitivity] = []
    if with_sensitivity:
        tasks = [(req, p) for p in sensitivity_parameters(req)]
        sens = map_tasks(sensitivity_one, tasks, jobs=jobs, ray_address=ray_address, progress=tick)
    fleet = smallest_fleet(req, max_nodes)
    tick()
    return Plan(req, ranked, sens, fleet)


def plan_stages(req: PlanRequest, with_sensitivity: bool = True) -> int:
    """How many times :func:`plan` calls ``progress``."""
    return 2 + (len(sensitivity_parameters(req)) if with_sensitivity else 0)
