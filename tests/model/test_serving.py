"""Colocated vs disaggregated closed forms: hand checks, properties, limits."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servesim import ParameterError
from servesim.model.kvcache import LINKS, Link
from servesim.model.queueing import MMc
from servesim.model.serving import (
    CROSSOVER_LADDER_GBPS,
    DEFAULT_NODE,
    GOODPUT_TIE_FRACTION,
    WORKLOAD_PRESETS,
    Workload,
    best_split,
    colocated,
    compare,
    disaggregated,
    link_crossover,
    mixes,
    pick_split,
)

RAG = WORKLOAD_PRESETS["rag"]
rates = st.floats(0.1, 20.0)
bandwidths = st.floats(0.05, 1000.0)


def test_colocated_hand_check():
    # RAG at 8 nodes: S = 6144 / 11000 s, rho_p = 3 S / 8; TTFT = E[W_q] + S.
    s = 6144 / 11000
    co = colocated(RAG, DEFAULT_NODE, 8, 0.5)
    assert math.isclose(co.prefill_utilization, 3 * s / 8)
    assert math.isclose(co.tpot_s, 0.027 * (1 + 0.5 * 3 * s / 8))
    q = MMc(8, 3.0, 1 / s)
    assert math.isclose(co.ttft_mean_s, q.mean_wait_s() + s)
    assert math.isclose(co.decode_utilization, 3 * 512 / (8 * 2600))


def test_disaggregated_goodput_uses_the_wait_tail():
    # P(TTFT <= X) = 1 - C exp(-(c mu - lambda)(X - S - t_xfer)).
    link = Link("x", 2.5e9)
    r = disaggregated(RAG, DEFAULT_NODE, 7, 1, link)
    s = 6144 / 11000
    xfer = 6144 * 327_680 / 2.5e9
    q = MMc(7, 3.0, 1 / s)
    p_ok = 1 - q.p_wait * math.exp(-q.drain_rate_per_s * (2.0 - s - xfer))
    assert math.isclose(r.kv_transfer_s, xfer)
    assert math.isclose(r.goodput_rps, 3.0 * p_ok)


def test_budget_smaller_than_transfer_gives_zero_goodput():
    r = disaggregated(RAG, DEFAULT_NODE, 7, 1, Link("slow", 1e9))  # 2.01 s transfer > 2 s budget
    assert r.stable and r.goodput_rps == 0.0


@settings(max_examples=40)
@given(rates, st.floats(0.0, 2.0))
def test_goodput_bounded_by_rate_and_tpot_grows_with_beta(rate, beta):
    wl = replace(RAG, rate_per_s=rate)
    co = colocated(wl, DEFAULT_NODE, 8, beta)
    assert 0.0 <= co.goodput_rps <= rate
    assert co.tpot_s >= DEFAULT_NODE.tpot_base_s
    assert colocated(wl, DEFAULT_NODE, 8, beta + 0.1).tpot_s >= co.tpot_s


@settings(max_examples=40)
@given(bandwidths, bandwidths)
def test_best_split_goodput_non_decreasing_in_bandwidth(b1, b2):
    lo, hi = sorted((b1, b2))
    g_lo = best_split(RAG, DEFAULT_NODE, 8, Link("lo", lo * 1e9)).goodput_rps
    g_hi = best_split(RAG, DEFAULT_NODE, 8, Link("hi", hi * 1e9)).goodput_rps
    assert g_lo <= g_hi + 1e-12


@settings(max_examples=30)
@given(st.integers(2, 16), rates)
def test_best_split_dominates_every_split_up_to_the_tie_tolerance(n, rate):
    wl = replace(RAG, rate_per_s=rate)
    best = best_split(wl, DEFAULT_NODE, n, LINKS["rdma"])
    assert best.prefill_nodes + best.decode_nodes == n
    tol = GOODPUT_TIE_FRACTION * rate
    others = [disaggregated(wl, DEFAULT_NODE, p, n - p, LINKS["rdma"]) for p in range(1, n)]
    assert all(o.goodput_rps <= best.goodput_rps + tol for o in others)
    # Among the tied splits, the choice has the most headroom.
    tied = [o for o in others if o.goodput_rps >= best.goodput_rps - tol and o.stable == best.stable]
    busiest = max(best.prefill_utilization, best.decode_utilization)
    assert all(busiest <= max(o.prefill_utilization, o.decode_utilization) + 1e-12 for o in tied
               if abs(o.goodput_rps - best.goodput_rps) < 1e-12)


@settings(max_examples=30)
@given(st.floats(0.5, 30.0))
def test_unstable_means_zero_goodput(rate):
    wl = replace(RAG, rate_per_s=rate)
    for r in (colocated(wl, DEFAULT_NODE, 8), best_split(wl, DEFAULT_NODE, 8, LINKS["rdma"])):
        if not r.stable:
            assert r.goodput_rps == 0.0 and math.isinf(r.ttft_mean_s)


def test_crossover_ladder_and_exact_agree():
    xo = link_crossover(RAG, DEFAULT_NODE, 8)
    assert xo.ladder_GBps in CROSSOVER_LADDER_GBPS and xo.exact_GBps is not None
    assert xo.exact_GBps <= xo.ladder_GBps
    below = [b for b in CROSSOVER_LADDER_GBPS if b < xo.ladder_GBps]
    co = colocated(RAG, DEFAULT_NODE, 8)
    for b in below:
        assert compare(co, best_split(RAG, DEFAULT_NODE, 8, Link("b", b * 1e9)), 3.0) != "disaggregated"
    # Just above and below the exact threshold.
    up = best_split(RAG, DEFAULT_NODE, 8, Link("up", xo.exact_GBps * 1.001e9))
    down = best_split(RAG, DEFAULT_NODE, 8, Link("down", xo.exact_GBps * 0.999e9))
    assert compare(co, up, 3.0) == "disaggregated" != compare(co, down, 3.0)


def test_no_crossover_when_colocation_meets_both_slos():
    xo = link_crossover(WORKLOAD_PRESETS["chat"], DEFAULT_NODE, 8)
    assert xo.ladder_GBps is None and xo.exact_GBps is None


def test_mixes_keep_total_tokens_and_order():
    ms = mixes(RAG)
    assert [m for m, _ in ms] == ["own", "prefill-heavy", "balanced", "decode-heavy"]
    assert all(w.total_tokens == RAG.total_tokens for _, w in ms)
    shares = [w.prompt_tokens / w.total_tokens for _, w in ms[1:]]
    assert shares == sorted(shares, reverse=True)


def test_compare_ties_go_to_colocation_and_zero_is_neither():
    co = colocated(RAG, DEFAULT_NODE, 8)
    same = replace(co, architecture="disaggregated")
    assert compare(replace(co, goodput_rps=3.0), replace(same, goodput_rps=3.0 - 1e-6), 3.0) == "colocated"
    assert compare(replace(co, goodput_rps=0.0), replace(same, goodput_rps=0.0), 3.0) == "neither"
    assert compare(replace(co, goodput_rps=1.0), replace(same, goodput_rps=2.0), 3.0) == "disaggregated"


def test_pick_split_ranks_goodput_ties_then_stability_headroom_and_ttft():
    # rate 10: goodputs within 0.01 req/s of the best (5.004) are tied; 4.9 is not.
    splits = {
        "a": (5.0, True, 0.7, 0.5, 0.30),  # tied, stable, busiest pool 0.7
        "b": (5.004, True, 0.9, 0.2, 0.10),  # the best goodput, busiest pool 0.9
        "c": (4.9, True, 0.1, 0.1, 0.01),  # most headroom, but not tied
        "d": (5.003, False, 0.2, 1.2, 0.05),  # tied, unstable
    }
    assert pick_split(list(splits), 10.0, splits.__getitem__) == "a"
    splits["e"] = (5.001, True, 0.6, 0.7, 0.50)  # as busy as "a" at its busiest: TTFT decides
    assert pick_split(list(splits), 10.0, splits.__getitem__) == "a"
    splits["e"] = (5.001, True, 0.7, 0.7, 0.20)
    assert pick_split(list(splits), 10.0, splits.__getitem__) == "e"


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: Workload("x", 0, 10, 1.0, 1.0, 0.03), "prompt_tokens"),
        (lambda: Workload("x", 10, 10, -1.0, 1.0, 0.03), "rate_per_s"),
        (lambda: Workload("x", 10, 10, 1.0, float("nan"), 0.03), "slo_ttft_s"),
        (lambda: colocated(RAG, DEFAULT_NODE, 0), "nodes"),
        (lambda: colocated(RAG, DEFAULT_NODE, 8, -0.5), "beta"),
        (lambda: best_split(RAG, DEFAULT_NODE, 1, LINKS["rdma"]), "nodes"),
        (lambda: Link("x", 0.0), "link_bytes_per_s"),
    ],
)
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ParameterError) as info:
        call()
    assert info.value.name == name
