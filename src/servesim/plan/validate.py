"""The numbers ``servesim validate`` shows: agreement and bias tables, as plain dicts.

**Agreement** (closed form vs simulation under the closed form's own
assumptions).  A row passes when

* the closed form is exact for the simulated model (Erlang-C for M/M/c, the
  geometric E[n] for i.i.d. acceptance, the exact E[n] of the other
  acceptance models, TTFT means under M/M/c): ``|sim - closed| <= t SE``,
  SE the standard error over independent replications and ``t`` the Student-t
  critical value (replications - 1 degrees of freedom) at 1% divided by the
  number of exact rows (Bonferroni): a run of correct closed forms fails some
  row with probability below 1% whatever the seed, while a closed form off by
  more than a few SE still fails (rare waits add the rule of three on their
  count, stated on the row);
* the closed form is itself an approximation (the M/G/c formulas, the
  colocated mean TPOT ``TPOT_base (1 + beta rho_p)``): the relative error is
  within the tolerance stated on the row.

The serving goodput row checks the closed form's own definition,
``lambda P(W_q <= X - S - t_xfer)``, on the simulated M/M/c prefill queue
(with exponential service a simulated TTFT includes a random S, which the
closed form's TTFT does not).

**Bias** (one row per assumption of seed section 7, one line per headline
figure): the simulation under a baseline (the closed form's assumptions,
unless the row says otherwise) and with only that assumption relaxed, on the
same random numbers; ``change`` is relaxed minus baseline with a 95% interval
from the paired replications, and ``sign`` is "+" or "-" when the interval
excludes 0, else "0".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from servesim.hardware.node import step_node
from servesim.hardware.pricer import Deployment, build_step_model
from servesim.model import speculative as sd
from servesim.model.kvcache import LINKS
from servesim.model.mgc import GGc
from servesim.model.queueing import MMc
from servesim.model.serving import (
    DEFAULT_NODE,
    WORKLOAD_PRESETS,
    NodeSpec,
    Workload,
    best_split,
    colocated,
    disaggregated,
    link_crossover,
)
from servesim.model.serving import colocated as ref_colocated
from servesim.plan.capacity import colocated_at_load, disaggregated_at_load
from servesim.sim.cluster import (
    CLOSED_FORM,
    Colocated,
    Disaggregated,
    Fleet,
    ServingSim,
    SimOptions,
    SimSettings,
    link_crossover_sim,
    simulate_serving,
)
from servesim.sim.distributions import (
    Deterministic,
    Exponential,
    Lognormal,
    gamma_arrivals,
    poisson_arrivals,
    scv,
)
from servesim.sim.engine import simulate_colocated, simulate_disaggregated
from servesim.sim.queue import simulate_queue
from servesim.sim.specdec import (
    IidAcceptance,
    MarkovAcceptance,
    linear_profile,
    simulate_specdec,
)
from servesim.sim.stats import DEFAULT_SEED, Estimate, estimate

__all__ = [
    "BIAS_ARRIVAL_CV",
    "BIAS_MARKOV_CORRELATION",
    "BIAS_POSITION_SPREAD",
    "BIAS_PROMPT_CV",
    "DECODE_LOAD",
    "MMC_GRID",
    "TPOT_SLO_S",
    "Z_TOLERANCE",
    "validate_summary",
]

Z_TOLERANCE = 4.0
"""Standard errors allowed between simulation and an exact closed form in a single row (a run's rows
use :func:`_family_critical` instead)."""

FAMILY_ALPHA = 0.01
"""The chance that a run of ``validate`` fails some exact row although every closed form is right."""


def _family_critical(rows: int, replications: int) -> float:
    """The per-row critical value of ``|sim - closed| / SE`` that keeps the family-wise false-FAIL rate
    of ``rows`` exact rows under :data:`FAMILY_ALPHA` (Bonferroni; the SE of ``replications``
    replications is Student-t with ``replications - 1`` degrees of freedom)."""
    from scipy import stats

    if rows < 1 or replications < 2:
        return Z_TOLERANCE
    return max(Z_TOLERANCE, float(stats.t.ppf(1.0 - FAMILY_ALPHA / (2 * rows), replications - 1)))

MMC_GRID: tuple[tuple[int, float], ...] = tuple((c, rho) for c in (1, 8, 32) for rho in (0.5, 0.85, 0.95))
"""(servers, utilization) of the M/M/c agreement cases (unit mean service)."""

MGC_TOLERANCE = 0.10
"""Relative error allowed to the M/G/c approximations (Kimura, Allen-Cunneen)."""

TPOT_TOLERANCE = 0.02
"""Relative error allowed to the colocated mean-TPOT formula (a mean-field approximation)."""

BIAS_MARKOV_CORRELATION = 0.5
"""Lag-1 correlation of the bursty acceptance chain in the bias table."""
BIAS_POSITION_SPREAD = 0.2
"""Drop of alpha_i from the first to the last draft in the bias table (same mean)."""
BIAS_ARRIVAL_CV = 2.0
"""Interarrival coefficient of variation of the bursty-arrival row."""
BIAS_PROMPT_CV = 1.0
"""Prompt-length coefficient of variation (lognormal, same mean) of the length-mix row."""
TPOT_SLO_S = 0.030
"""TPOT SLO of the TPOT-distribution row: just above rag's formula TPOT (29.8 ms), so the mean passes."""
DECODE_LOAD = 0.9
"""Decode-pool utilization of the decode-queueing row (the presets' own loads queue too little to show)."""

Row = dict[str, Any]


def _num(x: float) -> float | None:
    return None if (math.isinf(x) or math.isnan(x)) else x


def _row_head(group: str, case: str, quantity: str, closed: float, est: Estimate) -> Row:
    """An agreement row's names, both numbers, the simulation's 95% interval and its z score."""
    se = est.se
    z = (est.mean - closed) / se if se and not math.isnan(se) else math.nan
    return {
        "group": group,
        "case": case,
        "quantity": quantity,
        "closed_form": closed,
        "simulated": est.mean,
        "ci95_low": _num(est.low),
        "ci95_high": _num(est.high),
        "z": _num(z),
    }


def _exact_row(
    group: str, case: str, quantity: str, closed: float, est: Estimate, floor: float = 1e-12
) -> Row:
    """PASS when |sim - closed| <= 4 SE + floor.

    ``floor`` covers a statistic with no spread: for a proportion estimated
    from n requests in which the rare event never occurred, any true value
    below 3 / n (the "rule of three" 95% bound) is consistent.
    """
    tol = f"{Z_TOLERANCE:g} SE" if floor <= 1e-12 else f"{Z_TOLERANCE:g} SE + {floor:.2g}"
    return {
        "_exact": (est, floor),
        **_row_head(group, case, quantity, closed, est),
        "tolerance": tol,
        "pass": est.agrees_with(closed, Z_TOLERANCE, floor=floor),
    }


def _relative_row(group: str, case: str, quantity: str, closed: float, est: Estimate, tol: float) -> Row:
    rel = (closed - est.mean) / est.mean if est.mean != 0 else math.inf
    return {
        **_row_head(group, case, quantity, closed, est),
        "tolerance": f"{tol:.0%} relative",
        "pass": abs(rel) <= tol,
    }


def _agreement_mmc(requests: int, replications: int, seed: int) -> list[Row]:
    rows: list[Row] = []
    for c, rho in MMC_GRID:
        lam = rho * c
        q = simulate_queue(
            c,
            poisson_arrivals(lam),
            Exponential(1.0),
            requests=requests,
            replications=replications,
            seed=seed,
        )
        m = MMc(c, lam, 1.0)
        case = f"M/M/{c} rho={rho:g}"
        # A wait is a rare event at low load (M/M/32 at rho 0.5: 3 in 10,000 requests wait, in a few
        # bursts), so the spread of 10 replications understates the error of its mean: the rule of three
        # on the waiting requests of one replication (3 / n of them, each waiting 1 / (c mu - lambda) on
        # average) bounds what a correct closed form can be off by.
        n_rep = max(1.0, requests * 0.9 / replications)
        rare = 3.0 / n_rep
        rows.append(_exact_row("M/M/c", case, "mean_wait_s", m.mean_wait_s(), q.mean_wait_s,
                               floor=rare / (c - lam)))
        rows.append(_exact_row("M/M/c", case, "p_wait", m.p_wait, q.p_wait, floor=rare))
        rows.append(_exact_row("M/M/c", case, "wait_p99_s", m.wait_quantile_s(0.99), q.wait_p99_s))
    return rows


def _agreement_mgc(requests: int, replications: int, seed: int) -> list[Row]:
    rows: list[Row] = []
    c, rho = 8, 0.85
    for label, dist in (("M/D/8", Deterministic(1.0)), ("M/G/8 lognormal cv=1", Lognormal(1.0, 1.0))):
        q = simulate_queue(
            c, poisson_arrivals(rho * c), dist, requests=requests, replications=replications, seed=seed
        )
        for method in ("kimura", "allen-cunneen"):
            g = GGc(c, rho * c, 1.0, 1.0, scv(dist), method)
            rows.append(
                _relative_row(
                    "M/G/c",
                    f"{label} rho={rho:g}",
                    f"mean_wait_s ({method})",
                    g.mean_wait_s(),
                    q.mean_wait_s,
                    MGC_TOLERANCE,
                )
            )
    return rows


def _agreement_serving(requests: int, replications: int, seed: int, node: NodeSpec) -> list[Row]:
    rows: list[Row] = []
    link = LINKS["rdma"]
    for name, wl in WORKLOAD_PRESETS.items():
        cf_co = colocated(wl, node, 8, 0.5)
        cf_de = best_split(wl, node, 8, link)
        options = SimOptions(settings=CLOSED_FORM, requests=requests, replications=replications, seed=seed)
        s_co = simulate_serving(wl, node, Colocated(8, 0.5), options)
        s_de = simulate_serving(wl, node, Disaggregated(cf_de.prefill_nodes, cf_de.decode_nodes, link),
                                options)
        for label, cf, sim in (("colocated 8", cf_co, s_co), (f"disagg {cf_de.split} rdma", cf_de, s_de)):
            case = f"{name}, {label}"
            rows.append(_exact_row("serving", case, "ttft_mean_s", cf.ttft_mean_s, sim.ttft_s.mean))
            budget = wl.slo_ttft_s - cf.prefill_s - cf.kv_transfer_s
            q = simulate_queue(
                cf.prefill_nodes,
                poisson_arrivals(wl.rate_per_s),
                Exponential(cf.prefill_s),
                requests=requests,
                replications=replications,
                seed=seed,
                within_s=budget,
            )
            assert q.p_within is not None
            lam = wl.rate_per_s
            good = Estimate(
                q.p_within.mean * lam,
                q.p_within.half_width * lam,
                tuple(v * lam for v in q.p_within.replicates),
            )
            rows.append(
                _exact_row(
                    "serving",
                    case,
                    "lambda P(W_q <= X - S - t_xfer)",
                    lam * cf.p_ttft_ok,
                    good,
                    floor=lam * 3.0 / q.measured_requests,
                )
            )
        rows.append(
            _relative_row(
                "serving",
                f"{name}, colocated 8",
                "tpot_mean_s",
                cf_co.tpot_s,
                s_co.tpot_s.mean,
                TPOT_TOLERANCE,
            )
        )
    return rows


def _agreement_specdec(cycles: int, replications: int, seed: int) -> list[Row]:
    rows: list[Row] = []
    for name, p in sd.SPECDEC_PRESETS.items():
        k = sd.optimal_k(p.alpha, p.d, p.c)
        s = simulate_specdec(
            IidAcceptance(p.alpha), k, d=p.d, c=p.c, cycles=cycles, replications=replications, seed=seed
        )
        case = f"{name}, k={k}, alpha={p.alpha:g}"
        rows.append(_exact_row("specdec", case, "E[n] (i.i.d.)", s.expected_tokens_exact, s.expected_tokens))
        rows.append(_exact_row("specdec", case, "speedup (i.i.d.)", s.speedup_exact, s.speedup))
    p = sd.SPECDEC_PRESETS["mtp"]
    k = sd.optimal_k(p.alpha, p.d, p.c)
    for model in (
        MarkovAcceptance(p.alpha, BIAS_MARKOV_CORRELATION),
        linear_profile(p.alpha, k, BIAS_POSITION_SPREAD),
    ):
        s = simulate_specdec(model, k, d=p.d, c=p.c, cycles=cycles, replications=replications, seed=seed)
        rows.append(
            _exact_row(
                "specdec",
                f"mtp, k={k}, {model.name} model",
                f"E[n] ({model.name}, exact)",
                s.expected_tokens_exact,
                s.expected_tokens,
            )
        )
    return rows


ENGINE_REPLICATIONS = 4
ENGINE_REQUESTS = 800


def _engine_cases() -> list[tuple[str, Callable[[], Any], Callable[[int], dict[str, Any]]]]:
    """(label, closed form at rate, simulator at (rate, seed)) for the engine-level checks."""
    sm, _, mem = build_step_model(Deployment("llama-3-70b", "h100-sxm", 4))
    psm, _, _ = build_step_model(Deployment("llama-3-70b", "h100-sxm", 2))
    isl, osl = 1024, 256
    cases: list[tuple[str, Callable[[], Any], Callable[[int], dict[str, Any]]]] = []
    def closed(r: float) -> Callable[[], Any]:
        return lambda: colocated_at_load(sm, mem, 1, r, isl, osl, 1.0)

    def simulated(r: float) -> Callable[[int], dict[str, Any]]:
        return lambda seed: simulate_colocated(sm, mem, 1, r, isl, osl, requests=ENGINE_REQUESTS, seed=seed)

    for rate in (1.0, 3.0):
        label = f"70B TP4 H100, colocated, {rate:g} req/s of {isl}/{osl}"
        cases.append((label, closed(rate), simulated(rate)))
    cases.append((f"70B 2 x TP2 -> 1 x TP4 H100, rdma, 3 req/s of {isl}/{osl}",
                  lambda: disaggregated_at_load(psm, 2, sm, mem, 1, 50e9, 3.0, isl, osl, 1.0),
                  lambda seed: simulate_disaggregated(psm, 2, sm, mem, 1, 50e9, 3.0, isl, osl,
                                                      requests=ENGINE_REQUESTS, seed=seed)))
    return cases


def _agreement_engine(seed: int) -> list[Row]:
    """The closed form at load against the iteration-level simulator (stated relative tolerances).

    Where its assumptions hold (Poisson arrivals, one prompt length, moderate load): TPOT within
    6% (the closed form spreads prefill over steps; the engine mixes whole chunks), TTFT within
    20% (M/D/1 with a half-step residual against the engine's step boundaries), the decode batch
    within 10%.
    """
    rows: list[Row] = []
    for label, closed, sim in _engine_cases():
        cf = closed()
        runs = [sim(seed + i) for i in range(ENGINE_REPLICATIONS)]
        for key, attr, tol, scale in (("mean TPOT (s)", "tpot_s", 0.06, 1e-3),
                                      ("mean TTFT (s)", "ttft_mean_s", 0.20, 1e-3),
                                      ("decode batch", "decode_batch", 0.10, 1.0)):
            field = {"tpot_s": "mean_tpot_ms", "ttft_mean_s": "mean_ttft_ms",
                     "decode_batch": "decode_batch"}[attr]
            est = estimate([r[field] * scale for r in runs])
            rows.append(_relative_row("engine", label, key, getattr(cf, attr), est, tol))
    return rows


def _bias_engine(seed: int) -> list[Row]:
    """What the lab's reference model's constant TPOT and beta miss, measured by the engine simulator.

    The node of each row is the measured-kernel node (``servesim.hardware.node.step_node``: decode
    batch sized to the TPOT SLO) of 70B on 4 x H100; the reference model prices TPOT as
    ``TPOT_base (1 + beta rho_p)`` at any load; the engine simulator runs the same replica at the
    same rate, its batch set by the traffic.
    """
    sm, _, mem = build_step_model(Deployment("llama-3-70b", "h100-sxm", 4))
    rows: list[Row] = []
    for name in ("chat", "rag"):
        wl = WORKLOAD_PRESETS[name]
        node = step_node(sm, mem, prompt_tokens=wl.prompt_tokens, output_tokens=wl.output_tokens,
                         tpot_slo_s=wl.slo_tpot_s).node
        rate = 1.0
        ref = ref_colocated(replace(wl, rate_per_s=rate), node, 1, 0.5)
        runs = [simulate_colocated(sm, mem, 1, rate, wl.prompt_tokens, wl.output_tokens, requests=400,
                                   seed=seed + i)["mean_tpot_ms"] * 1e-3 for i in range(ENGINE_REPLICATIONS)]
        sim = estimate(runs)
        ch = sim.mean - ref.tpot_s
        rows.append({
            "assumption": "TPOT is a node constant, inflated by beta x prefill load",
            "relaxation": "engine loop: the decode batch follows the traffic",
            "case": f"{name} {wl.prompt_tokens}/{wl.output_tokens}, 70B TP4 H100, {rate:g} req/s",
            "baseline": "reference model (TPOT_base (1 + 0.5 rho_p))",
            "figure": "mean TPOT (ms)",
            "closed_form": _num(ref.tpot_s * 1e3), "sim_baseline": _num(ref.tpot_s * 1e3),
            "sim_relaxed": _num(sim.mean * 1e3), "change": _num(ch * 1e3),
            "change_ci95": None if not math.isfinite(sim.half_width) else sim.half_width * 1e3,
            "relative_change": _num(ch / ref.tpot_s),
            "sign": "-" if sim.high < ref.tpot_s else ("+" if sim.low > ref.tpot_s else "0"),
        })
    return rows


def _paired(base: Estimate, relaxed: Estimate) -> Estimate:
    """relaxed - base, replication by replication (common random numbers)."""
    if not (math.isfinite(base.mean) and math.isfinite(relaxed.mean)):
        return Estimate(relaxed.mean - base.mean if base.mean != relaxed.mean else 0.0, math.nan, ())
    if len(base.replicates) == len(relaxed.replicates) and len(base.replicates) > 1:
        return estimate([r - b for b, r in zip(base.replicates, relaxed.replicates, strict=True)])
    return Estimate(relaxed.mean - base.mean, math.nan, ())


def _sign(change: Estimate) -> str:
    if not math.isfinite(change.mean):
        return "+" if change.mean > 0 else "-"
    if math.isnan(change.half_width):
        return "0" if change.mean == 0 else ("+" if change.mean > 0 else "-")
    if change.low > 0:
        return "+"
    if change.high < 0:
        return "-"
    return "0"


def _bias_row(
    assumption: str,
    relaxation: str,
    case: str,
    baseline: str,
    figure: str,
    closed: float | None,
    base: Estimate,
    relaxed: Estimate,
    scale: float = 1.0,
) -> Row:
    ch = _paired(base, relaxed)
    return {
        "assumption": assumption,
        "relaxation": relaxation,
        "case": case,
        "baseline": baseline,
        "figure": figure,
        "closed_form": None if closed is None else _num(closed * scale),
        "sim_baseline": _num(base.mean * scale),
        "sim_relaxed": _num(relaxed.mean * scale),
        "change": _num(ch.mean * scale),
        "change_ci95": None if not math.isfinite(ch.half_width) else ch.half_width * scale,
        "relative_change": _num(ch.mean / base.mean)
        if base.mean not in (0.0,) and math.isfinite(base.mean)
        else None,
        "sign": _sign(ch),
    }


def _serving_figures(
    assumption: str,
    relaxation: str,
    case: str,
    baseline: str,
    cf_ttft_s: float,
    cf_ttft_p99_s: float,
    cf_good: float,
    base: ServingSim,
    relaxed: ServingSim,
) -> list[Row]:
    figures = (
        ("ttft_mean_ms", cf_ttft_s, base.ttft_s.mean, relaxed.ttft_s.mean, 1e3),
        ("ttft_p99_ms", cf_ttft_p99_s, base.ttft_s.p99, relaxed.ttft_s.p99, 1e3),
        ("goodput_rps", cf_good, base.goodput_rps, relaxed.goodput_rps, 1.0),
    )
    return [
        _bias_row(assumption, relaxation, case, baseline, figure, closed, b, r, scale)
        for figure, closed, b, r, scale in figures
    ]


def _cf_p99_s(wl: Workload, servers: int, prefill_s: float, xfer_s: float) -> float:
    q = MMc(servers, wl.rate_per_s, 1.0 / prefill_s)
    return q.wait_quantile_s(0.99) + prefill_s + xfer_s if q.stable else math.inf


_Sim = Callable[..., ServingSim]
_DET = replace(CLOSED_FORM, prefill_service="deterministic")
_DET_TEXT = "closed-form assumptions, but deterministic service (S = P / R_p, as TTFT uses)"


def _bias(
    requests: int, replications: int, cycles: int, seed: int, node: NodeSpec, crossover: bool
) -> list[Row]:
    """The bias rows, one group per assumption: speculative decoding's i.i.d. acceptance; Poisson
    arrivals, exponential service and one prompt length; mean TPOT; free KV-transfer machinery;
    no decode-side queueing."""

    def sim(wl: Workload, fleet: Fleet, settings: SimSettings, **kw: Any) -> ServingSim:
        return simulate_serving(wl, node, fleet, SimOptions(settings=settings, requests=requests,
                                                            replications=replications, seed=seed, **kw))

    return (
        _bias_speculation(cycles, replications, seed)
        + _bias_colocated(sim, node)
        + _bias_mean_tpot(sim, node)
        + _bias_kv_transfer(sim, node, requests, replications, seed, crossover)
        + _bias_decode_queueing(sim, node)
    )


def _bias_speculation(cycles: int, replications: int, seed: int) -> list[Row]:
    """Speculative decoding: i.i.d. acceptance against bursty and position-dependent acceptance."""
    rows: list[Row] = []
    p = sd.SPECDEC_PRESETS["mtp"]
    k = sd.optimal_k(p.alpha, p.d, p.c)
    base_s = simulate_specdec(
        IidAcceptance(p.alpha), k, d=p.d, c=p.c, cycles=cycles, replications=replications, seed=seed
    )
    for model, text in (
        (
            MarkovAcceptance(p.alpha, BIAS_MARKOV_CORRELATION),
            "bursty: 2-state Markov acceptance, same mean alpha, lag-1 correlation "
            f"{BIAS_MARKOV_CORRELATION:g}",
        ),
        (
            linear_profile(p.alpha, k, BIAS_POSITION_SPREAD),
            f"position-dependent: alpha_i falls by {BIAS_POSITION_SPREAD:g} from draft 1 to draft k, "
            "same mean",
        ),
    ):
        rel = simulate_specdec(model, k, d=p.d, c=p.c, cycles=cycles, replications=replications, seed=seed)
        rows.append(
            _bias_row(
                "i.i.d. acceptance",
                text,
                f"mtp, k={k}, u=0",
                "i.i.d. Monte Carlo",
                "speedup",
                base_s.speedup_geometric,
                base_s.speedup,
                rel.speedup,
            )
        )
    return rows


def _bias_colocated(sim: _Sim, node: NodeSpec) -> list[Row]:
    """Arrivals, service and prompt lengths: agent (TTFT-bound), 8 colocated nodes."""
    rows: list[Row] = []
    agent = WORKLOAD_PRESETS["agent"]
    co8 = Colocated(8, 0.5)
    cf = colocated(agent, node, 8, 0.5)
    cf_p99 = _cf_p99_s(agent, 8, cf.prefill_s, 0.0)
    case = "agent, 8 colocated nodes"
    b_exp = sim(agent, co8, CLOSED_FORM)
    b = sim(agent, co8, _DET)
    rows += _serving_figures(
        "exponential service",
        "deterministic prefill per prompt length, S = P / R_p",
        case,
        "closed-form assumptions (M/M/c; TTFT then includes a random S)",
        cf.ttft_mean_s,
        cf_p99,
        cf.goodput_rps,
        b_exp,
        b,
    )
    r = sim(agent, co8, _DET, arrivals=gamma_arrivals(agent.rate_per_s, BIAS_ARRIVAL_CV))
    rows += _serving_figures(
        "Poisson arrivals",
        f"gamma interarrivals, cv {BIAS_ARRIVAL_CV:g} (bursty)",
        case,
        _DET_TEXT,
        cf.ttft_mean_s,
        cf_p99,
        cf.goodput_rps,
        b,
        r,
    )
    r = sim(agent, co8, _DET, prompt_tokens=Lognormal(float(agent.prompt_tokens), BIAS_PROMPT_CV))
    rows += _serving_figures(
        "one prompt length",
        f"lognormal prompt lengths, same mean, cv {BIAS_PROMPT_CV:g}",
        case,
        _DET_TEXT,
        cf.ttft_mean_s,
        cf_p99,
        cf.goodput_rps,
        b,
        r,
    )
    return rows


def _bias_mean_tpot(sim: _Sim, node: NodeSpec) -> list[Row]:
    """Mean TPOT instead of a distribution: rag at 8 colocated nodes, TPOT SLO 30 ms."""
    co8 = Colocated(8, 0.5)
    rag32 = replace(WORKLOAD_PRESETS["rag"], slo_tpot_s=TPOT_SLO_S)
    cf = colocated(rag32, node, 8, 0.5)
    case = (
        f"rag, 8 colocated nodes, TPOT SLO {TPOT_SLO_S * 1e3:g} ms"
        f" (the formula gives {cf.tpot_s * 1e3:.1f} ms)"
    )
    relaxed = sim(rag32, co8, _DET)
    # baseline: every request gets the formula's TPOT; goodput = rate * P(TTFT <= X) * 1[TPOT <= Y]
    ttft_only = sim(replace(rag32, slo_tpot_s=1e9), co8, _DET)
    ok = 1.0 if cf.tpot_s <= rag32.slo_tpot_s else 0.0
    base_good = Estimate(
        ttft_only.goodput_rps.mean * ok,
        ttft_only.goodput_rps.half_width * ok,
        tuple(v * ok for v in ttft_only.goodput_rps.replicates),
    )
    flat = Estimate(cf.tpot_s, 0.0, tuple(cf.tpot_s for _ in relaxed.tpot_s.mean.replicates))
    text = "per-request TPOT from the prefill work running beside each decode"
    mean_text = _DET_TEXT + "; TPOT = TPOT_base (1 + beta rho_p) for every request"
    figures: list[tuple[str, float, Estimate, Estimate, float]] = [
        ("tpot_mean_ms", cf.tpot_s, flat, relaxed.tpot_s.mean, 1e3),
        ("tpot_p99_ms", cf.tpot_s, flat, relaxed.tpot_s.p99, 1e3),
        ("goodput_rps", cf.goodput_rps, base_good, relaxed.goodput_rps, 1.0),
    ]
    return [
        _bias_row("mean TPOT instead of a distribution", text, case, mean_text, *figure)
        for figure in figures
    ]


def _bias_kv_transfer(
    sim: _Sim, node: NodeSpec, requests: int, replications: int, seed: int, crossover: bool
) -> list[Row]:
    """Free KV-transfer machinery: rag, best split over 100 Gb/s (and the link crossover)."""
    rows: list[Row] = []
    rag = WORKLOAD_PRESETS["rag"]
    ib = LINKS["ib100"]
    cf = best_split(rag, node, 8, ib)
    dep = Disaggregated(cf.prefill_nodes, cf.decode_nodes, ib)
    cf_p99 = _cf_p99_s(rag, cf.prefill_nodes, cf.prefill_s, cf.kv_transfer_s)
    case = f"rag, disagg {cf.split} over {ib.name} ({ib.GBps:g} GB/s)"
    kv_text = _DET_TEXT + "; transfers never queue"
    b = sim(rag, dep, _DET)
    kv_cases: list[tuple[str, SimSettings]] = [
        (
            "one FCFS link per prefill node (sender NIC): a node's transfers queue",
            replace(_DET, link_contention="node"),
        ),
        (
            "one FCFS link for the pool (e.g. the one decode node's NIC): all transfers queue",
            replace(_DET, link_contention="shared"),
        ),
        (
            "shared link plus layer-by-layer streaming (transfer overlaps prefill)",
            replace(_DET, link_contention="shared", kv_streaming=True),
        ),
    ]
    for text, settings in kv_cases:
        r = sim(rag, dep, settings)
        rows += _serving_figures(
            "free KV-transfer machinery", text, case, kv_text, cf.ttft_mean_s, cf_p99, cf.goodput_rps, b, r
        )
    if crossover:
        cf_x = link_crossover(rag, node, 8, 0.5).ladder_GBps
        n_x = max(requests // 5, 1000)
        quick = SimOptions(settings=_DET, requests=n_x, replications=replications, seed=seed)
        x_base = link_crossover_sim(rag, node, 8, options=quick)
        for text, settings in kv_cases:
            x_rel = link_crossover_sim(rag, node, 8, options=replace(quick, settings=settings))
            rows.append(_crossover_row(text, kv_text, cf_x, x_base, x_rel))
    return rows


def _bias_decode_queueing(sim: _Sim, node: NodeSpec) -> list[Row]:
    """No decode-side queueing: chat with the decode pool at 90%."""
    rows: list[Row] = []
    chat = WORKLOAD_PRESETS["chat"]
    link = LINKS["rdma"]
    cf = best_split(chat, node, 8, link)
    rate = DECODE_LOAD * cf.decode_nodes * node.decode_tokens_per_s / chat.output_tokens
    chat_hi = replace(chat, rate_per_s=rate)
    cf = disaggregated(chat_hi, node, cf.prefill_nodes, cf.decode_nodes, link)
    dep = Disaggregated(cf.prefill_nodes, cf.decode_nodes, link)
    case = f"chat at {rate:.2f} req/s (decode pool at {DECODE_LOAD:.0%}), disagg {cf.split} over rdma"
    b = sim(chat_hi, dep, _DET)
    r = sim(chat_hi, dep, replace(_DET, decode_slots=True))
    rows += _serving_figures(
        "no decode-side queueing",
        "finite batch slots: floor(R_d TPOT_base) per decode node, FCFS",
        case,
        _DET_TEXT + "; unlimited decode slots",
        cf.ttft_mean_s,
        _cf_p99_s(chat_hi, cf.prefill_nodes, cf.prefill_s, cf.kv_transfer_s),
        cf.goodput_rps,
        b,
        r,
    )
    return rows


def _crossover_row(
    text: str, baseline: str, closed: float | None, base: float | None, relaxed: float | None
) -> Row:
    if base is None or relaxed is None:
        change = None
        sign = "0" if base == relaxed else ("+" if relaxed is None else "-")
    else:
        change = relaxed - base
        sign = "0" if change == 0 else ("+" if change > 0 else "-")
    return {
        "assumption": "free KV-transfer machinery",
        "relaxation": text,
        "case": "rag, 8 nodes, best split per bandwidth (ladder rung)",
        "baseline": baseline,
        "figure": "link_crossover_GBps",
        "closed_form": closed,
        "sim_baseline": base,
        "sim_relaxed": relaxed,
        "change": change,
        "change_ci95": None,
        "relative_change": None if change is None or not base else change / base,
        "sign": sign,
    }


VALIDATE_STAGES = 6
"""How many times :func:`validate_summary` calls ``progress``."""


def validate_summary(
    *,
    requests: int = 1_000_000,
    serving_requests: int = 50_000,
    cycles: int = 1_000_000,
    replications: int = 10,
    seed: int = DEFAULT_SEED,
    crossover: bool = True,
    node: NodeSpec = DEFAULT_NODE,
    progress: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Agreement table (closed form vs simulation) and bias table (one row per section-7 assumption).

    ``requests`` per M/M/c and M/G/c case, ``serving_requests`` per serving
    simulation, ``cycles`` per speculative case; each split over
    ``replications``.  ``crossover=False`` skips the simulated link-crossover
    rows (the slowest part: a best-split search per ladder bandwidth).
    ``progress`` is called after each of the VALIDATE_STAGES stages.
    """
    tick: Callable[[], None] = progress or (lambda: None)
    stages: list[Callable[[], list[dict[str, Any]]]] = [
        lambda: _agreement_mmc(requests, replications, seed),
        lambda: _agreement_mgc(requests, replications, seed),
        lambda: _agreement_serving(serving_requests, replications, seed, node),
        lambda: _agreement_specdec(cycles, replications, seed),
        lambda: _agreement_engine(seed),
    ]
    agreement: list[dict[str, Any]] = []
    for stage in stages:
        agreement += stage()
        tick()
    crit = _family_critical(sum(1 for r in agreement if "_exact" in r), replications)
    for r in agreement:
        if "_exact" in r:
            est, floor = r.pop("_exact")
            r["pass"] = est.agrees_with(r["closed_form"], crit, floor=floor)
            r["tolerance"] = f"{crit:.2f} SE" + (f" + {floor:.2g}" if floor > 1e-12 else "")
    bias = _bias(serving_requests, replications, cycles, seed, node, crossover) + _bias_engine(seed)
    tick()
    passed = sum(1 for r in agreement if r["pass"])
    return {
        "settings": {
            "requests_per_queue_case": requests,
            "requests_per_serving_case": serving_requests,
            "cycles_per_specdec_case": cycles,
            "replications": replications,
            "seed": seed,
            "warmup": "first 10% of each replication's requests dropped",
            "exact_tolerance": (f"|sim - closed| <= {crit:.2f} SE (replication spread): the Student-t "
                                f"critical value with {replications - 1} degrees of freedom at "
                                f"{FAMILY_ALPHA:.0%} / (number of exact rows), Bonferroni, so that a correct "
                                f"closed form fails a run with probability below {FAMILY_ALPHA:.0%}"),
            "approximation_tolerance": f"M/G/c {MGC_TOLERANCE:.0%}, colocated mean TPOT {TPOT_TOLERANCE:.0%}"
            " relative",
            "bias_change": "relaxed - baseline on common random numbers; sign given when the 95% interval"
            " excludes 0",
        },
        "agreement": agreement,
        "agreement_passed": passed,
        "agreement_failed": len(agreement) - passed,
        "bias": bias,
    }
