"""Serving simulation: agreement with the closed form under its own assumptions, and each relaxation."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from servesim._checks import ParameterError
from servesim.model.kvcache import LINKS
from servesim.model.serving import DEFAULT_NODE, WORKLOAD_PRESETS, colocated, disaggregated
from servesim.sim import _kernels as kern
from servesim.sim.cluster import (
    CLOSED_FORM,
    QUICK_OPTIONS,
    REPLAY_OPTIONS,
    Colocated,
    Disaggregated,
    Requests,
    SimOptions,
    SimSettings,
    best_split_sim,
    compare_fleets,
    decode_slots_per_node,
    replay_trace,
    run,
    sample_requests,
    simulate_serving,
    slo_capacity_per_s,
)
from servesim.sim.distributions import Lognormal, gamma_arrivals

NODE = DEFAULT_NODE
Z = 4.0
SMALL = SimOptions(requests=40_000, replications=8, seed=3)


@pytest.mark.parametrize("name", ["agent", "rag"])
def test_mean_ttft_agrees_with_the_closed_form_under_its_assumptions(name):
    wl = WORKLOAD_PRESETS[name]
    link = LINKS["rdma"]
    co = simulate_serving(wl, NODE, Colocated(8), replace(SMALL, settings=CLOSED_FORM))
    de = simulate_serving(wl, NODE, Disaggregated(7, 1, link), replace(SMALL, settings=CLOSED_FORM))
    assert co.ttft_s.mean.agrees_with(colocated(wl, NODE, 8).ttft_mean_s, Z)
    assert de.ttft_s.mean.agrees_with(disaggregated(wl, NODE, 7, 1, link).ttft_mean_s, Z)
    assert de.tpot_s.mean.mean == NODE.tpot_base_s


def test_colocated_tpot_mean_is_close_to_the_mean_field_formula():
    # The formula uses the average rho_p; the simulation the busy fraction of each
    # request's own window.  Not exact (a window starts as its node finishes a prefill),
    # so a stated 2% tolerance.
    wl = WORKLOAD_PRESETS["rag"]
    co = simulate_serving(wl, NODE, Colocated(8), replace(SMALL, settings=CLOSED_FORM))
    assert co.tpot_s.mean.mean == pytest.approx(colocated(wl, NODE, 8).tpot_s, rel=0.02)
    assert co.tpot_s.p99.mean > co.tpot_s.mean.mean  # a distribution, not one number


def test_no_interference_means_base_tpot_exactly():
    wl = WORKLOAD_PRESETS["chat"]
    co = simulate_serving(wl, NODE, Colocated(8, beta=0.0), SimOptions(requests=5000, replications=2))
    assert co.tpot_s.p99.mean == pytest.approx(NODE.tpot_base_s, rel=1e-12)


def _busy_brute(starts, ends, a, b):
    return sum(max(0.0, min(e, b) - max(s, a)) for s, e in zip(starts, ends, strict=True))


def test_decode_window_solves_its_fixed_point():
    rng = np.random.default_rng(2)
    wl = WORKLOAD_PRESETS["chat"]
    req = sample_requests(replace(wl, rate_per_s=40.0), rng, 400)
    beta, n = 0.7, 4
    t = run(req, NODE, Colocated(n, beta))
    start = req.arrival_s + t.prefill_wait_s
    s = req.prompt_tokens / NODE.prefill_tokens_per_s
    server = np.empty(req.n, dtype=np.int64)
    st = np.empty(req.n)
    kern.fcfs_assign(req.arrival_s, s, n, st, server)
    for i in range(0, req.n, 37):
        mine = server == server[i]
        t0 = start[i] + s[i]
        d = t.tpot_s[i] * req.output_tokens[i]
        busy = _busy_brute(st[mine], st[mine] + s[mine], t0, t0 + d)
        base = req.output_tokens[i] * NODE.tpot_base_s
        assert d == pytest.approx(base * (1 + beta * busy / d), rel=1e-9)


def test_unstable_deployment_is_a_result():
    wl = WORKLOAD_PRESETS["chat"]
    s = simulate_serving(wl, NODE, Disaggregated(1, 1, LINKS["tcp"]),
                         SimOptions(requests=1000, replications=2))
    assert not s.stable
    assert s.goodput_rps.mean == 0.0
    assert s.goodput_at_target_rps == 0.0
    assert math.isinf(s.ttft_s.p99.mean)


def test_link_contention_and_streaming_move_ttft_the_right_way():
    wl = WORKLOAD_PRESETS["rag"]
    dep = Disaggregated(7, 1, LINKS["ib100"])
    det = replace(CLOSED_FORM, prefill_service="deterministic")
    free = simulate_serving(wl, NODE, dep, replace(SMALL, settings=det))
    shared = simulate_serving(wl, NODE, dep, replace(SMALL, settings=replace(det, link_contention="shared")))
    stream = simulate_serving(
        wl, NODE, dep, replace(SMALL, settings=replace(det, link_contention="shared", kv_streaming=True))
    )
    assert free.link_wait_s.mean == 0.0
    assert shared.link_wait_s.mean > 0.0
    assert shared.ttft_s.mean.mean > free.ttft_s.mean.mean
    assert stream.ttft_s.mean.mean < free.ttft_s.mean.mean
    # streaming can never finish before prefill ends plus one layer's transfer
    xfer = NODE.kv.bytes_for(wl.prompt_tokens) / LINKS["ib100"].bytes_per_s
    floor = wl.prompt_tokens / NODE.prefill_tokens_per_s + xfer / NODE.kv.layers
    assert stream.ttft_s.p50.mean >= floor - 1e-12


def test_decode_slots_create_decode_side_queueing_near_capacity():
    wl = WORKLOAD_PRESETS["chat"]
    rate = 0.93 * 2 * NODE.decode_tokens_per_s / wl.output_tokens
    hot = replace(wl, rate_per_s=rate)
    dep = Disaggregated(6, 2, LINKS["rdma"])
    det = replace(CLOSED_FORM, prefill_service="deterministic")
    unlimited = simulate_serving(hot, NODE, dep, replace(SMALL, settings=det))
    slots = simulate_serving(hot, NODE, dep, replace(SMALL, settings=replace(det, decode_slots=True)))
    assert unlimited.decode_wait_s.mean == 0.0
    assert slots.decode_wait_s.mean > 0.0
    assert slots.ttft_s.p99.mean > unlimited.ttft_s.p99.mean
    assert decode_slots_per_node(NODE) == 70  # floor(2600 tok/s * 0.027 s)


def test_trace_replay_with_explicit_requests():
    arrival = [0.0, 0.1, 0.2, 5.0]
    prompts = [11000, 22000, 11000, 1100]  # 1 s, 2 s, 1 s, 0.1 s of prefill
    outputs = [10, 10, 10, 10]
    req = Requests(arrival, prompts, outputs)
    s = replay_trace(req, NODE, Colocated(1, beta=0.0), slo_ttft_s=2.5, slo_tpot_s=1.0)
    # one node, FCFS: TTFT 1.0, 2.9, 3.8, 0.1 -> two of four meet 2.5 s
    assert s.ttft_s.mean.mean == pytest.approx((1.0 + 2.9 + 3.8 + 0.1) / 4)
    assert s.attainment.mean == pytest.approx(0.5)
    assert s.replications == 1


def test_requests_are_validated():
    with pytest.raises(ParameterError, match="prompt_tokens"):
        Requests([0.0, 1.0], [10, 0], [5, 5])
    with pytest.raises(ParameterError, match="output_tokens"):
        Requests([0.0, 1.0], [10, 10], [5])
    with pytest.raises(ParameterError, match=r"arrival_s\[1\]"):
        Requests([1.0, 0.5], [10, 10], [5, 5])
    with pytest.raises(ParameterError, match="link_contention"):
        SimSettings(link_contention="ring")
    with pytest.raises(ParameterError, match="nodes"):
        Colocated(0)


def test_comparison_uses_common_random_numbers_and_is_deterministic():
    wl = WORKLOAD_PRESETS["agent"]
    options = SimOptions(prompt_tokens=Lognormal(8192.0, 0.5), arrivals=gamma_arrivals(4.0, 1.5),
                         requests=6000, replications=3, seed=9)
    a = compare_fleets(wl, NODE, 8, LINKS["rdma"], options=options)
    b = compare_fleets(wl, NODE, 8, LINKS["rdma"], options=options)
    assert a == b
    assert a.winner in ("colocated", "disaggregated", "neither")
    assert a.disaggregated.split == "7p/1d"


def test_slo_capacity_is_below_saturation_and_meets_the_target():
    wl = WORKLOAD_PRESETS["agent"]
    dep = Colocated(8)
    small = SimOptions(requests=3000, replications=2)
    cap = slo_capacity_per_s(wl, NODE, dep, rel_tol=0.05, options=small)
    saturation = 8 * NODE.prefill_tokens_per_s / wl.prompt_tokens
    assert 0.0 < cap < saturation
    at = simulate_serving(replace(wl, rate_per_s=cap), NODE, dep, small)
    assert at.attainment.mean >= 0.9


def test_options_are_validated_at_construction_and_a_replay_takes_the_traces_own_traffic():
    with pytest.raises(ParameterError, match="requests"):
        SimOptions(requests=3, replications=4)  # fewer requests than replications
    with pytest.raises(ParameterError, match="warmup_fraction"):
        SimOptions(warmup_fraction=1.0)
    with pytest.raises(ParameterError, match="attainment_target"):
        SimOptions(attainment_target=1.5)
    with pytest.raises(ParameterError, match="settings"):
        SimOptions(settings="closed form")  # type: ignore[arg-type]
    req = Requests([0.0, 1.0], [100, 100], [5, 5])
    with pytest.raises(ParameterError, match="arrivals"):
        replay_trace(req, NODE, Colocated(1), slo_ttft_s=1.0, slo_tpot_s=1.0,
                     options=replace(REPLAY_OPTIONS, arrivals=gamma_arrivals(1.0, 2.0)))
    with pytest.raises(ParameterError, match="arrivals"):  # the capacity search draws its own at each rate
        slo_capacity_per_s(WORKLOAD_PRESETS["chat"], NODE, Colocated(8),
                           options=replace(QUICK_OPTIONS, arrivals=gamma_arrivals(1.0, 2.0)))
    assert SimOptions(requests=10, replications=3).per_replication == 3


def test_one_options_object_gives_the_same_run_through_every_entry_point():
    # compare_fleets and best_split_sim pass the options on unchanged: their colocated and split runs
    # are simulate_serving's with the same options, to the bit.
    wl = WORKLOAD_PRESETS["rag"]
    options = SimOptions(requests=4000, replications=2, seed=11)
    cmp = compare_fleets(wl, NODE, 4, LINKS["rdma"], split=(3, 1), options=options)
    assert cmp.colocated == simulate_serving(wl, NODE, Colocated(4), options)
    assert cmp.disaggregated == simulate_serving(wl, NODE, Disaggregated(3, 1, LINKS["rdma"]), options)
    best = best_split_sim(wl, NODE, 3, LINKS["rdma"], options=options)
    splits = [simulate_serving(wl, NODE, Disaggregated(p, 3 - p, LINKS["rdma"]), options) for p in (1, 2)]
    assert best in splits
    assert best.requests == 4000 and best.replications == 2
