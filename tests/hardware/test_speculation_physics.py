"""Speculation from the roofline: d, c and u from hardware; token trees; the turn-off batch."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servesim._checks import ParameterError
from servesim.hardware import roofline as rl
from servesim.hardware import speculation_physics as sp
from servesim.hardware.catalog import builtin_catalog
from servesim.model import speculative as sd
from tests.strategies import open_alphas

CAT = builtin_catalog()
L70 = CAT.model("llama-3-70b")
L8 = CAT.model("llama-3-8b")
H100 = CAT.gpu("h100-sxm")
SEPARATE = sp.Drafter("separate", L8)
HEADS = [sp.Drafter("mtp"), sp.Drafter("eagle"), sp.Drafter("medusa")]
KW = {"tp": 8, "context_tokens": 1024}


# --------------------------------------------------------------------------- the seed's knobs


def test_d_of_a_separate_draft_is_the_weight_ratio_at_batch_1():
    p = sp.evaluate(SEPARATE, 0.75, 4, L70, H100, batch=1, **KW)
    ratio = L8.matmul_params / L70.matmul_params  # both steps stream their weights
    assert p.d == pytest.approx(ratio, rel=0.05)
    assert abs(p.d - 0.12) < 0.02  # the seed's small-draft preset: d = 0.12


def test_c_is_small_at_batch_1_and_grows_with_batch():
    cs = [sp.evaluate(sp.Drafter("eagle"), 0.9, 4, L70, H100, batch=b, **KW).c for b in (1, 16, 64, 256)]
    assert cs[0] < 0.01  # verification of 5 positions rides on the weight stream
    assert cs == sorted(cs)
    assert cs[-1] > 0.2  # past the ridge each position costs compute


@pytest.mark.parametrize("drafter", [SEPARATE, *HEADS, sp.Drafter("ngram")])
def test_the_seed_formula_with_derived_knobs_gives_the_same_speedup(drafter):
    for b in (1, 32, 200):
        p = sp.evaluate(drafter, 0.8, 3, L70, H100, batch=b, **KW)
        assert sd.speedup(3, 0.8, p.d, p.c, 0.0) == pytest.approx(p.speedup, rel=1e-12)
        assert p.speedup == pytest.approx(p.expected_tokens * p.plain_s / (p.draft_s + p.verify_s))


def test_speedup_falls_with_batch_for_every_kind():
    for drafter in [SEPARATE, *HEADS]:
        s = [sp.best_k(drafter, 0.8, L70, H100, batch=b, tp=8, context_tokens=256).speedup
             for b in (1, 8, 32, 128, 512)]
        assert s == sorted(s, reverse=True), drafter.kind


def test_ngram_costs_no_weights_and_only_its_overhead():
    ng = sp.Drafter("ngram", overhead_s=50e-6)
    assert sp.draft_time_s(ng, L70, H100, batch=8, k=5, **KW) == 50e-6
    assert sp.draft_memory(ng, L70, tp=8) == (0.0, 0.0)
    free = sp.evaluate(sp.Drafter("ngram"), 0.6, 4, L70, H100, batch=1, **KW)
    assert free.d == 0.0


def test_medusa_drafts_in_one_pass_others_step_by_step():
    one = sp.draft_time_s(sp.Drafter("eagle"), L70, H100, batch=1, k=1, **KW)
    four = sp.draft_time_s(sp.Drafter("eagle"), L70, H100, batch=1, k=4, **KW)
    assert four == pytest.approx(4 * one)
    med1 = sp.draft_time_s(sp.Drafter("medusa"), L70, H100, batch=1, k=1, **KW)
    med4 = sp.draft_time_s(sp.Drafter("medusa"), L70, H100, batch=1, k=4, **KW)
    assert med4 == pytest.approx(4 * med1, rel=1e-9)  # 4 heads' weights, one pass (memory-bound)


def test_draft_memory_by_kind():
    w, kv = sp.draft_memory(SEPARATE, L70, tp=8)
    assert w == pytest.approx(L8.weight_bytes / 8) and kv == pytest.approx(L8.kv_bytes_per_token / 8)
    w, kv = sp.draft_memory(sp.Drafter("mtp"), L70, tp=8)
    assert kv == pytest.approx(L70.kv_bytes_per_token / 80 / 8)  # one layer of cache
    assert w == pytest.approx((L70.layer_params + 2 * 8192**2) * 2 / 8)
    w2, _ = sp.draft_memory(sp.Drafter("medusa"), L70, tp=8, k=2)
    w4, _ = sp.draft_memory(sp.Drafter("medusa"), L70, tp=8, k=4)
    assert w4 == pytest.approx(2 * w2)
    caps = [sp.max_batch_with_drafter(d, L70, H100, tp=8, context_tokens=4096, k=4)
            for d in (sp.Drafter("ngram"), sp.Drafter("eagle"), SEPARATE)]
    assert caps[0] == rl.max_batch(L70, H100, tp=8, context_tokens=4096)
    assert caps[0] > caps[1] > caps[2]


def test_utilization_map_is_exported_and_inverts():
    u = sp.utilization(L70, H100, batch=50, **KW)
    assert sp.batch_for_utilization(u, L70, H100, **KW) == pytest.approx(50, rel=1e-6)


# --------------------------------------------------------------------------- the turn-off batch


def test_turn_off_batch_is_the_last_paying_batch():
    b = sp.turn_off_batch(SEPARATE, 0.75, L70, H100, tp=8, context_tokens=256)
    assert isinstance(b, int) and 1 < b < 1000

    def best(batch):
        return sp.best_k(SEPARATE, 0.75, L70, H100, tp=8, batch=batch, context_tokens=256).speedup

    assert best(b) > 1.0 >= best(b + 1)


def test_turn_off_batch_edges():
    # alpha = 0: E[n] = 1, every draft is a pure cost
    assert sp.turn_off_batch(SEPARATE, 0.0, L70, H100, **KW) == 0
    # a free drafter with high acceptance pays at every batch up to the limit
    assert sp.turn_off_batch(sp.Drafter("ngram"), 0.9, L70, H100, batch_limit=64, **KW) is None


def test_long_contexts_keep_speculation_paying():
    # the KV read of each sequence is shared by its k+1 verified positions (MagicDec's argument)
    short = sp.turn_off_batch(sp.Drafter("medusa"), 0.56, L70, H100, tp=8, context_tokens=256)
    long = sp.turn_off_batch(sp.Drafter("medusa"), 0.56, L70, H100, tp=8, context_tokens=16384)
    assert short is not None and (long is None or long > short)


# --------------------------------------------------------------------------- token trees


@given(k=st.integers(min_value=0, max_value=20), alpha=open_alphas)
def test_a_chain_is_the_seeds_expected_tokens(k, alpha):
    t = sp.chain(k, alpha)
    assert t.expected_tokens == pytest.approx(sd.expected_tokens(k, alpha), rel=1e-12)
    assert t.width == k + 1 and t.depth == k


def test_tree_expected_tokens_by_hand():
    # root -> a (0.6), b (0.3); a -> c (0.5)
    t = sp.TokenTree((-1, -1, 0), (0.6, 0.3, 0.5))
    assert t.expected_tokens == pytest.approx(1 + 0.6 + 0.3 + 0.6 * 0.5)
    assert t.level_sizes == (2, 1) and t.depth == 2 and t.width == 4


def test_tree_validation():
    with pytest.raises(ParameterError, match="siblings"):
        sp.TokenTree((-1, -1), (0.7, 0.4))
    with pytest.raises(ParameterError, match=r"parents\[1\]"):
        sp.TokenTree((-1, 1), (0.5, 0.5))
    with pytest.raises(ParameterError, match="non-increasing"):
        sp.best_tree(3, (0.2, 0.5))


def _all_trees(n, probs):
    """Every tree of n nodes whose children take ranks 0, 1, ... in order (brute force)."""
    def grow(parents, ranks):
        if len(parents) == n:
            yield tuple(parents), tuple(ranks)
            return
        for p in range(-1, len(parents)):
            used = [r for q, r in zip(parents, ranks, strict=True) if q == p]
            r = len(used)
            if r < len(probs):
                yield from grow([*parents, p], [*ranks, r])

    seen = set()
    for parents, ranks in grow([], []):
        t = sp.TokenTree(parents, tuple(probs[r] for r in ranks))
        key = round(t.expected_tokens, 12)
        if key not in seen:
            seen.add(key)
            yield t


@pytest.mark.parametrize("alpha", [0.3, 0.6, 0.9])
def test_greedy_tree_is_the_best_tree(alpha):
    probs = sp.rank_acceptance(alpha, 3)
    for n in (1, 2, 3, 4, 5):
        best = max(t.expected_tokens for t in _all_trees(n, probs))
        assert sp.best_tree(n, probs).expected_tokens == pytest.approx(best, rel=1e-12)


def test_trees_beat_chains_at_equal_width_when_acceptance_is_low():
    for alpha in (0.4, 0.56, 0.7):
        chain_pt, tree_pt = sp.compare_chain_tree(sp.Drafter("medusa"), alpha, 6, L70, H100, batch=1, **KW)
        assert chain_pt.width == tree_pt.width == 6
        assert tree_pt.verify_s == chain_pt.verify_s  # same verify pass
        assert tree_pt.expected_tokens > chain_pt.expected_tokens
        assert tree_pt.depth < chain_pt.depth
    # at alpha = 0.9 the second guess (0.09) never beats going deeper (0.9^5 = 0.59)
    t = sp.best_tree(5, sp.rank_acceptance(0.9, 4))
    assert t.level_sizes == (1, 1, 1, 1, 1)


def test_tree_draft_passes_follow_the_levels():
    tree = sp.TokenTree((-1, -1, 0, 1), (0.6, 0.3, 0.5, 0.5))  # levels (2, 2)
    t = sp.draft_time_s(SEPARATE, L70, H100, batch=4, tree=tree, **KW)
    one = rl.decode_step(L8, H100, batch=4, positions=1, **KW).total_s
    two = rl.decode_step(L8, H100, batch=4, positions=2, **KW).total_s
    assert t == pytest.approx(one + two)  # root -> level 1, then level 1's two nodes -> level 2
    p = sp.evaluate_tree(SEPARATE, tree, L70, H100, batch=4, **KW)
    assert p.width == 5 and p.expected_tokens == pytest.approx(tree.expected_tokens)


def test_drafter_checks():
    with pytest.raises(ParameterError, match="kind"):
        sp.Drafter("lookahead")
    with pytest.raises(ParameterError, match="model"):
        sp.Drafter("separate")
    with pytest.raises(ParameterError, match="model"):
        sp.Drafter("eagle", L8)


def test_every_preset_has_a_draft_kind():
    assert set(sp.PRESET_DRAFT_KINDS) == set(sd.SPECDEC_PRESETS)
    assert set(sp.PRESET_DRAFT_KINDS.values()) <= set(sp.DRAFT_KINDS)
    assert list(itertools.chain(sp.DRAFT_KINDS)) == ["separate", "mtp", "eagle", "medusa", "ngram"]


def test_moe_speculation_pays_only_from_a_moderate_batch():
    # at batch 1 the 2 experts of a plain step become up to 2 (k + 1) when verifying
    mx = CAT.model("mixtral-8x7b")
    first, last = sp.paying_batches(sp.Drafter("medusa"), 0.56, mx, H100, tp=2, context_tokens=1024)
    assert first > 1
    assert last is None or last > first

    def s(b):
        return sp.best_k(sp.Drafter("medusa"), 0.56, mx, H100, tp=2, batch=b, context_tokens=1024).speedup

    assert s(first - 1) <= 1.0 < s(first)
