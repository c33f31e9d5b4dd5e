"""The seed's deterministic tests: every sanity limit and documented number.

Run with ``python -m pytest test_sim.py -q``.  Pure closed forms, no randomness;
the whole file runs in well under 0.1 s of test time.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from pathlib import Path

try:
    import servesim  # noqa: F401
except ImportError:  # a fresh checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

from servesim.model.kvcache import LINKS, MODELS, kv_bytes_per_token, kv_transfer_s
from servesim.model.queueing import MMc, erlang_b, erlang_c
from servesim.model.serving import (
    DEFAULT_NODE,
    WORKLOAD_PRESETS,
    Workload,
    best_split,
    colocated,
    compare,
    disaggregated,
    link_crossover,
    mixes,
)
from servesim.model.speculative import (
    SPECDEC_PRESETS,
    break_even_alpha,
    expected_tokens,
    optimal_k,
    speedup,
    turn_off_utilization,
)

# ---- 2.1 the acceptance model ------------------------------------------------


def test_expected_tokens_alpha_zero_emits_one():
    # Every draft rejected: the verify pass still emits one target token.
    assert all(expected_tokens(k, 0.0) == 1.0 for k in range(0, 12))


def test_expected_tokens_alpha_one_emits_k_plus_one():
    assert all(expected_tokens(k, 1.0) == k + 1 for k in range(0, 12))


def test_expected_tokens_is_the_geometric_sum():
    for k in (1, 3, 7):
        for a in (0.1, 0.5, 0.85, 0.99):
            direct = sum(a**i for i in range(k + 1))
            assert math.isclose(expected_tokens(k, a), direct, rel_tol=1e-12)
            assert math.isclose(expected_tokens(k, a), (1 - a ** (k + 1)) / (1 - a), rel_tol=1e-9)


def test_expected_tokens_monotone_in_alpha_and_k():
    for k in range(1, 10):
        vals = [expected_tokens(k, a / 20) for a in range(21)]
        assert vals == sorted(vals) and len(set(vals)) == len(vals)
    for a in (0.3, 0.8):
        vals = [expected_tokens(k, a) for k in range(12)]
        assert vals == sorted(vals) and len(set(vals)) == len(vals)


def test_marginal_value_of_kth_draft_is_alpha_to_the_k():
    # Saturation in k: the k-th draft adds alpha^k, which is why a finite k* exists.
    a = 0.7
    for k in range(1, 8):
        assert math.isclose(expected_tokens(k, a) - expected_tokens(k - 1, a), a**k, rel_tol=1e-12)


# ---- 2.2 / 2.3 cycle time, speedup and the utilization gate ---------------------


def test_speedup_at_idle_is_the_section_2_2_formula():
    k, a, d, c = 4, 0.8, 0.1, 0.05
    assert speedup(k, a, d, c, 0.0) == expected_tokens(k, a) / (k * d + 1 + c * k)


def test_spec_decode_can_hurt():
    # alpha 0.3, d 0.5, k 4: 1.4251 / 3.2 = 0.445 -> spec decode halves throughput.
    s = speedup(4, 0.3, 0.5, 0.05)
    assert round(s, 2) == 0.45
    assert s < 1.0


def test_break_even_alpha_at_u07_k4_is_about_053():
    # Denominator at u = 0.7: 1 + 4 (0.1 + 0.05 / 0.301) = 2.06 (seed experiment 1).
    a = break_even_alpha(4, 0.1, 0.05, 0.7)
    assert 0.52 < a < 0.54
    assert speedup(4, a - 0.01, 0.1, 0.05, 0.7) < 1.0 < speedup(4, a + 0.01, 0.1, 0.05, 0.7)


def test_speedup_decreases_with_utilization():
    vals = [speedup(4, 0.85, 0.1, 0.05, u / 100) for u in range(0, 100, 5)]
    assert vals == sorted(vals, reverse=True)


def test_mtp_optimal_k_shrinks_6_4_2_1_with_utilization():
    p = SPECDEC_PRESETS["mtp"]
    assert p.alpha == 0.85
    ks = [optimal_k(p.alpha, p.d, p.c, u) for u in (0.0, 0.7, 0.9, 0.93)]
    assert ks == [6, 4, 2, 1]


def test_mtp_verdict_flips_between_090_and_095():
    p = SPECDEC_PRESETS["mtp"]

    def best(u: float) -> float:
        return speedup(optimal_k(p.alpha, p.d, p.c, u), p.alpha, p.d, p.c, u)

    assert best(0.90) > 1.0 > best(0.95)
    assert 0.925 < turn_off_utilization(p.alpha, p.d, p.c) < 0.94


def test_optimal_k_grows_with_acceptance():
    ks = [optimal_k(a / 10, 0.1, 0.05) for a in range(3, 10)]
    assert ks == sorted(ks) and ks[0] < ks[-1]


# ---- 2.4 presets -------------------------------------------------------------------


def _best(name: str, u: float) -> float:
    p = SPECDEC_PRESETS[name]
    return speedup(optimal_k(p.alpha, p.d, p.c, u), p.alpha, p.d, p.c, u)


def test_presets_reproduce_the_published_pecking_order():
    assert round(_best("eagle3", 0.0), 1) == 3.1
    assert round(_best("mtp", 0.0), 1) == 2.4
    assert round(_best("small-draft", 0.0), 1) == 1.8
    assert round(_best("medusa", 0.0), 1) == 1.6


def test_medusa_draft_is_27x_cheaper_but_loses():
    med, small = SPECDEC_PRESETS["medusa"], SPECDEC_PRESETS["small-draft"]
    assert round(small.d / med.d, 1) == 2.7
    assert _best("medusa", 0.0) < _best("small-draft", 0.0)


def test_ranking_is_stable_under_load_and_eagle3_about_2x_at_u07():
    order = ["eagle3", "mtp", "small-draft", "medusa"]
    for u in (0.0, 0.7):
        vals = [_best(n, u) for n in order]
        assert vals == sorted(vals, reverse=True)
    assert round(_best("eagle3", 0.7)) == 2


# ---- 3.2 Erlang-C --------------------------------------------------------------------


def test_mm2_hand_computed_value():
    # a = 1.5, c = 2: C = (a^2/2) / ((1 - 0.75)(1 + a) + a^2/2) = 1.125 / 1.75 = 9/14.
    assert math.isclose(erlang_c(2, 1.5), float(Fraction(9, 14)), rel_tol=1e-12)
    q = MMc(2, 1.5, 1.0)  # mu = 1/s, so c mu - lambda = 0.5/s
    assert math.isclose(q.mean_wait_s(), float(Fraction(9, 7)), rel_tol=1e-12)


def test_erlang_b_recursion_hand_value():
    # B(2, 1.5) = (1.5^2 / 2) / (1 + 1.5 + 1.5^2 / 2) = 1.125 / 3.625.
    assert math.isclose(erlang_b(2, 1.5), 1.125 / 3.625, rel_tol=1e-12)


def test_mm1_waits_with_probability_rho():
    for rho in (0.1, 0.5, 0.9):
        assert math.isclose(erlang_c(1, rho), rho, rel_tol=1e-12)


def test_pooling_beats_splitting():
    # One 4-server queue at rate 3 waits less than four 1-server queues at 0.75 each.
    pooled = MMc(4, 3.0, 1.0).mean_wait_s()
    split = MMc(1, 0.75, 1.0).mean_wait_s()
    assert pooled < split


def test_unstable_queue_is_a_result_not_a_crash():
    q = MMc(2, 3.0, 1.0)
    assert not q.stable and q.mean_wait_s() == math.inf and q.wait_tail(10.0) == 1.0


# ---- 3.4 KV transfer -----------------------------------------------------------------


def test_llama70b_1k_tokens_hand_calc():
    per_token = kv_bytes_per_token(80, 8, 128, 2)
    assert per_token == 327_680 == 320 * 1024 == MODELS["llama-3-70b"].bytes_per_token
    kb = per_token * 1000
    assert round(kb / 1e9, 2) == 0.33  # 0.33 GB per 1k prompt tokens
    assert round(kv_transfer_s(kb, 400e9) * 1e3, 1) == 0.8  # ~0.8 ms over NVLink
    assert 0.25 < LINKS["tcp"].transfer_s(kb) < 0.27  # a quarter second over 10G TCP
    assert LINKS["nvlink"].transfer_s(kb) * 300 < LINKS["tcp"].transfer_s(kb)


# ---- 3.3-3.5 colocated vs disaggregated ------------------------------------------------


def test_rag_colocated_tpot_is_29_8_ms_over_the_28_ms_slo():
    rag = WORKLOAD_PRESETS["rag"]
    assert (rag.prompt_tokens, rag.slo_ttft_s, rag.slo_tpot_s) == (6144, 2.0, 0.028)
    co = colocated(rag, DEFAULT_NODE, 8, 0.5)
    assert round(co.tpot_s * 1e3, 1) == 29.8
    assert co.goodput_rps == 0.0


def test_rag_crossover_is_2_5_GBps_with_an_805_ms_transfer():
    rag = WORKLOAD_PRESETS["rag"]
    xo = link_crossover(rag, DEFAULT_NODE, 8, 0.5)
    assert xo.ladder_GBps == 2.5
    assert round(DEFAULT_NODE.kv.bytes_for(6144) / 2.5e9 * 1e3) == 805
    assert 1.25 < xo.exact_GBps < 2.5  # 10G TCP (1.25 GB/s) is below the break-even


def test_rag_over_tcp_blows_up_the_disagg_ttft():
    rag = WORKLOAD_PRESETS["rag"]
    fast = best_split(rag, DEFAULT_NODE, 8, LINKS["rdma"])
    slow = best_split(rag, DEFAULT_NODE, 8, LINKS["tcp"])
    assert slow.ttft_mean_s > rag.slo_ttft_s > 3 * fast.ttft_mean_s
    assert slow.goodput_rps == 0.0 < fast.goodput_rps


def test_looser_tpot_slo_gives_colocation_back_the_balanced_mix():
    def balanced(slo_tpot_s: float) -> Workload:
        rag = WORKLOAD_PRESETS["rag"]
        return dict(mixes(Workload("rag", rag.prompt_tokens, rag.output_tokens, rag.rate_per_s,
                                   rag.slo_ttft_s, slo_tpot_s)))["balanced"]

    for slo, winner in ((0.028, "disaggregated"), (0.032, "colocated")):
        wl = balanced(slo)
        co = colocated(wl, DEFAULT_NODE, 8, 0.5)
        assert 0.028 < co.tpot_s <= 0.032
        assert compare(co, best_split(wl, DEFAULT_NODE, 8, LINKS["rdma"]), wl.rate_per_s) == winner


def test_chat_on_two_nodes_over_tcp_decode_pool_unstable():
    chat = WORKLOAD_PRESETS["chat"]
    split = disaggregated(chat, DEFAULT_NODE, 1, 1, LINKS["tcp"])
    assert not split.stable and split.decode_utilization > 1.0 and split.goodput_rps == 0.0
    co = colocated(chat, DEFAULT_NODE, 2, 0.5)
    assert co.stable and co.goodput_rps > 0.99 * chat.rate_per_s


def test_disaggregated_decode_is_interference_free():
    rag = WORKLOAD_PRESETS["rag"]
    assert disaggregated(rag, DEFAULT_NODE, 4, 4, LINKS["nvlink"]).tpot_s == DEFAULT_NODE.tpot_base_s
    assert colocated(rag, DEFAULT_NODE, 8, 0.0).tpot_s == DEFAULT_NODE.tpot_base_s
