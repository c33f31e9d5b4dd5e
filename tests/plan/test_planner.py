"""The planner on hand-checkable cases: the seed's RAG preset at 28 and 32 ms TPOT."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servesim import ParameterError
from servesim.model.kvcache import LINKS
from servesim.model.serving import DEFAULT_NODE, WORKLOAD_PRESETS, colocated
from servesim.model.speculative import SPECDEC_PRESETS
from servesim.plan.planner import PlanRequest, candidates, plan, sensitivity_one, smallest_fleet

RAG = WORKLOAD_PRESETS["rag"]


def _req(slo_tpot_s: float = 0.028, spec: str | None = None, **kw) -> PlanRequest:
    return PlanRequest(replace(RAG, slo_tpot_s=slo_tpot_s), DEFAULT_NODE, LINKS["rdma"], 8,
                       speculation=SPECDEC_PRESETS[spec] if spec else None, **kw)


def test_rag_at_28_ms_without_speculation_picks_a_split():
    # Colocated TPOT is 29.8 ms > 28 ms, so colocation serves nothing.
    p = plan(_req())
    assert p.recommended.architecture == "disaggregated"
    co = next(c for c in p.ranked if c.architecture == "colocated")
    assert co.goodput_rps == 0.0
    assert co.binding_constraint == "TPOT SLO broken by prefill interference: 29.8 > 28 ms"


def test_rag_at_32_ms_colocation_wins_the_tie():
    p = plan(_req(0.032))
    best = p.recommended
    assert best.architecture == "colocated" and best.speculative_k == 0
    assert best.goodput_rps == pytest.approx(RAG.rate_per_s, rel=1e-6)


def test_speculation_rescues_colocation_at_28_ms():
    # u = rho_p + rho_d = 0.21 + 0.07 leaves spare compute: MTP divides TPOT by S > 2.
    p = plan(_req(spec="mtp"))
    best = p.recommended
    assert best.architecture == "colocated" and best.speculative_k > 0
    base = colocated(RAG, DEFAULT_NODE, 8).tpot_s
    assert best.result.tpot_s == pytest.approx(base / best.speculative_speedup)
    assert best.result.tpot_s < RAG.slo_tpot_s < base


def test_unstable_pools_are_named_as_binding():
    cands = {c.label: c for c in candidates(_req())}
    assert cands["1p/7d"].binding_constraint.startswith("prefill pool unstable")
    busy = replace(_req(), workload=replace(RAG, rate_per_s=3.0, output_tokens=6000))
    c = {x.label: x for x in candidates(busy)}["7p/1d"]
    assert c.binding_constraint.startswith("decode pool unstable") and c.goodput_rps == 0.0


def test_every_split_and_colocated_are_searched():
    labels = {c.label for c in candidates(_req())}
    assert labels == {"colocated x8"} | {f"{p}p/{8 - p}d" for p in range(1, 8)}


def test_goodput_per_gpu_counts_every_gpu():
    c = plan(_req(0.032)).recommended
    assert c.goodput_per_gpu == pytest.approx(c.goodput_rps / (8 * DEFAULT_NODE.gpus))


def test_smallest_fleet_is_minimal():
    req = _req()
    n = smallest_fleet(req)
    assert n is not None and n >= 2
    assert plan(replace(req, nodes=n), with_sensitivity=False).recommended.meets_target
    if n > 2:
        assert not plan(replace(req, nodes=n - 1), with_sensitivity=False).recommended.meets_target


def test_link_break_even_matches_the_crossover():
    # At 28 ms the split wins only while the link carries the KV fast enough: the break-even
    # is the crossover of `servesim disagg --preset rag` (1.397 GB/s).
    s = sensitivity_one(_req(), "link_GBps")
    assert s.direction == "down" and s.new_choice == "colocate (colocated x8)"
    assert s.flips_at == pytest.approx(1.397, abs=0.002)


def test_rate_break_even_is_where_colocated_tpot_reaches_the_slo():
    # Colocated meets 28 ms when 27 (1 + 0.5 rho_p) <= 28, rho_p = lambda 0.5585 / 8.
    s = sensitivity_one(_req(), "rate_per_s")
    expect = (28 / 27 - 1) / 0.5 * 8 / (6144 / 11000)
    assert s.direction == "down" and s.flips_at == pytest.approx(expect, rel=1e-3)


def test_parallel_sensitivity_matches_serial():
    req = _req(spec="mtp")
    assert plan(req, jobs=2).sensitivity == plan(req, jobs=1).sensitivity


def test_bad_request_names_the_parameter():
    with pytest.raises(ParameterError) as info:
        _req(attainment_target=1.5)
    assert info.value.name == "attainment_target"


def test_plan_from_a_trace_uses_its_mean_lengths_and_rate():
    import json

    from servesim.inputs.traces import load_trace, workload_from_trace
    from tests.cli_helpers import ROOT, run_cli

    path = ROOT / "tests" / "data" / "azure_code_head.csv"
    tr = load_trace(path)
    wl = workload_from_trace(tr, slo_ttft_s=2.0, slo_tpot_s=0.05)
    assert wl.prompt_tokens == round(float(tr.prompt_tokens.mean()))
    assert wl.rate_per_s == pytest.approx((tr.requests - 1) / float(tr.arrival_s[-1] - tr.arrival_s[0]))
    res = run_cli("plan", "--trace", str(path), "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50",
                  "--format", "json", "--quiet", "--spec", "none")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["workload"]["prompt_tokens"] == wl.prompt_tokens
    assert data["workload"]["rate_per_s"] == pytest.approx(wl.rate_per_s)
