"""Planner candidates re-scored by simulation."""

from __future__ import annotations

import json

import pytest

from servesim.model.kvcache import LINKS
from servesim.model.serving import DEFAULT_NODE, WORKLOAD_PRESETS
from servesim.model.speculative import SPECDEC_PRESETS
from servesim.plan.planner import PlanRequest, plan
from servesim.plan.rescore import rescore, simulate_candidate
from servesim.sim.cluster import DEFAULT_SETTINGS
from tests.cli_helpers import run_cli

REQ = PlanRequest(WORKLOAD_PRESETS["rag"], DEFAULT_NODE, LINKS["rdma"], 8, speculation=SPECDEC_PRESETS["mtp"])


def test_speculation_divides_the_simulated_tpot_by_its_speedup():
    ranked = plan(REQ, with_sensitivity=False).ranked
    split_spec = next(c for c in ranked if c.architecture == "disaggregated" and c.speculative_k)
    sim = simulate_candidate(REQ, split_spec, 4_000, 2, 1, DEFAULT_SETTINGS)
    # A decode node without interference: every token takes TPOT_base / S.
    expect_ms = DEFAULT_NODE.tpot_base_s / split_spec.speculative_speedup * 1e3
    assert sim["tpot_ms"]["mean"] == pytest.approx(expect_ms)


def test_rescore_ranks_are_a_permutation_and_deterministic():
    ranked = plan(REQ, with_sensitivity=False).ranked
    a = rescore(REQ, ranked, top=4, requests=8_000, replications=2, seed=3)
    b = rescore(REQ, ranked, top=4, requests=8_000, replications=2, seed=3)
    assert a == b
    assert sorted(r["simulated_rank"] for r in a["rows"]) == [1, 2, 3, 4]
    assert sorted(r["closed_form_rank"] for r in a["rows"]) == [1, 2, 3, 4]
    assert a["ranking_changed"] == any(r["simulated_rank"] != r["closed_form_rank"] for r in a["rows"])


def test_plan_simulate_cli():
    res = run_cli("plan", "--preset", "rag", "--simulate", "--simulate-top", "3", "--sim-requests", "6000",
                  "--format", "json", "--quiet")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert len(data["simulated"]["rows"]) == 3
    assert data["simulated"]["rows"][0]["simulated"]["stable"] is True
