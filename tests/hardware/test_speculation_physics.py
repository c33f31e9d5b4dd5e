"""Draft token trees and preset kinds (servesim.hardware.speculation_physics), and the physics of
what speculation costs, now priced by the one speculation module (servesim.hardware.speculation)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servesim._checks import ParameterError
from servesim.hardware import speculation as spm
from servesim.hardware import speculation_physics as sp
from servesim.hardware.pricer import Deployment, build_step_model
from servesim.model import speculative as sd
from tests.strategies import open_alphas


@pytest.fixture(scope="module")
def sm70():
    sm, _, _ = build_step_model(Deployment("llama-3-70b", "h100-sxm", 8, "bf16", "bf16", "vllm"))
    return sm


# --------------------------------------------------------------------------- what it costs


@pytest.mark.parametrize("preset", ["small-draft", "medusa", "eagle3"])
def test_speedup_falls_with_batch_for_every_kind(sm70, preset):
    alpha = sd.SPECDEC_PRESETS[preset].alpha
    dm = spm.draft_model_for(sm70, preset)
    s = [spm.speculation_for(sm70, preset, b, 2048, draft=dm, alpha=alpha, k_max=8)[1]["speedup_at_batch"]
         for b in (1, 16, 64, 256)]
    assert s[0] > 1.0  # pays at batch 1 at the lab's acceptance
    assert all(b <= a * (1 + 1e-9) for a, b in itertools.pairwise(s)), s
    assert s[-1] < s[0]


def test_a_separate_drafts_d_is_about_its_weight_ratio_at_batch_1(sm70):
    """At batch 1 every pass streams its weights: an 8B draft's pass costs about 8/70 of the target's
    (more: its launch floors and host time do not shrink with its size)."""
    dm = spm.draft_model_for(sm70, "small-draft")
    _, info = spm.speculation_for(sm70, "small-draft", 1, 2048, draft=dm, alpha=0.75, k=3)
    ratio = 8.0e9 / 70.6e9
    assert ratio < info["d"] < 3 * ratio


def test_trees_beat_chains_at_equal_width_when_acceptance_is_low(sm70):
    """A tree of 4 nodes verifies the same 5 positions as a chain of 4 drafts; at low acceptance its
    second guesses are worth more than a deep chain's unlikely tail, and it drafts fewer levels."""
    alpha = 0.35
    dm = spm.draft_model_for(sm70, "eagle3")
    chain = spm.speculation_for(sm70, "eagle3", 1, 2048, draft=dm, alpha=alpha, k=4)[1]["speedup_at_batch"]
    tree = sp.best_tree(4, sp.rank_acceptance(alpha, 4))
    assert tree.expected_tokens > sp.chain(4, alpha).expected_tokens
    assert tree.depth < 4
    assert spm.tree_speedup(sm70, tree, 1, 2048, draft=dm, method="eagle3") > chain


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


def test_a_confident_draft_goes_deep_not_wide():
    # at alpha = 0.9 the second guess (0.09) never beats going deeper (0.9^5 = 0.59)
    t = sp.best_tree(5, sp.rank_acceptance(0.9, 4))
    assert t.level_sizes == (1, 1, 1, 1, 1)


def test_every_preset_has_a_draft_kind():
    assert set(sp.PRESET_DRAFT_KINDS) == set(sd.SPECDEC_PRESETS)
    assert set(sp.PRESET_DRAFT_KINDS.values()) <= set(sp.DRAFT_KINDS)
    assert list(itertools.chain(sp.DRAFT_KINDS)) == ["separate", "mtp", "eagle", "medusa", "ngram"]
