"""What a draft costs (issue 18): an EAGLE head's real shape, Medusa's heads in one pass, and a
model drafter's first pass over every verified token (vLLM's EagleProposer.propose)."""

from __future__ import annotations

import json

import pytest

from servesim._checks import ParameterError
from servesim.hardware.pricer import Deployment, build_step_model
from servesim.hardware.speculation import (
    EAGLE3_DRAFT_VOCAB,
    EagleHead,
    MedusaHeads,
    draft_model_for,
    drafting_s,
    speculation_for,
)

CTX = 1280


@pytest.fixture(scope="module")
def sm():
    return build_step_model(Deployment("llama-3-8b", "h100-sxm", 1))[0]


def test_an_eagle3_head_is_one_wide_layer_with_its_own_small_lm_head(sm):
    head = draft_model_for(sm, "eagle3")
    assert isinstance(head, EagleHead) and head.shape.layers == 1 and head.shape.vocab == EAGLE3_DRAFT_VOCAB
    h = sm.shape.hidden
    assert head._gemms[0][1] == 2 * h  # QKV reads [embedding, fused feature]
    eagle1 = draft_model_for(sm, "eagle")
    assert eagle1.shape.vocab == sm.shape.vocab and (h, 2 * h) in eagle1._gemms  # fc on every pass
    # its LM head over 32k tokens instead of 128k: a cheaper step than one target layer + full head
    one_layer = sm.decode_step(1, CTX).gpu_s / sm.shape.layers
    assert head.decode_step(1, CTX).gpu_s < eagle1.decode_step(1, CTX).gpu_s
    assert head.decode_step(1, CTX).gpu_s > one_layer  # but more than one bare layer
    # the fusion fc (3h -> h, bf16 by the table) once per step, on every verified token
    fc = sm.tables.gemm(sm.dtype, 4 * 16, h, 3 * h).ms * 1e-3
    assert head.first_pass_extra_s(64) == pytest.approx(fc)
    assert eagle1.first_pass_extra_s(64) == 0.0
    one = head.decode_step(16, CTX).gpu_s
    assert drafting_s(head, 16, CTX, 3) == pytest.approx(
        head.decode_step(16, CTX, positions=4).gpu_s + 2 * one + fc)


def test_an_eagle_head_config_is_read_and_checked(sm, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": sm.shape.hidden,
                               "draft_vocab_size": 64000, "intermediate_size": 14336,
                               "num_attention_heads": 32, "num_key_value_heads": 8}))
    head = draft_model_for(sm, "eagle3", draft=str(cfg))
    assert head.shape.vocab == 64000
    cfg.write_text(json.dumps({"hidden_size": 8192}))
    with pytest.raises(ParameterError, match="hidden_size is 8192, the target's 4096"):
        draft_model_for(sm, "eagle3", draft=str(cfg))
    cfg.write_text(json.dumps({"draft_vocab_size": -3}))
    with pytest.raises(ParameterError, match="draft_vocab_size"):
        draft_model_for(sm, "eagle3", draft=str(cfg))
    with pytest.raises(ParameterError, match="given only with"):
        draft_model_for(sm, "medusa", draft=str(cfg))


def test_medusa_drafts_all_its_heads_in_one_pass(sm):
    heads = draft_model_for(sm, "medusa")
    assert isinstance(heads, MedusaHeads)
    t = sm.tables
    h, v = sm.shape.hidden, sm.shape.vocab
    one = (t.gemm("bf16", 8, h, h).ms + t.gemm("bf16", 8, v, h).ms) * 1e-3
    assert heads.decode_step(8, CTX).gpu_s == pytest.approx(one)
    assert drafting_s(heads, 8, CTX, 4) == pytest.approx(4 * one)  # no first pass, no k sequential layers


def test_the_draft_models_first_pass_turns_the_win_into_a_loss_at_large_batch():
    big = build_step_model(Deployment("llama-3-70b", "h100-sxm", 8))[0]
    dm = draft_model_for(big, "small-draft")
    low = speculation_for(big, "small-draft", 1, 2048, k=3, draft=dm, alpha=0.6)[1]["speedup_at_batch"]
    high = speculation_for(big, "small-draft", 256, 2048, k=3, draft=dm, alpha=0.6)[1]["speedup_at_batch"]
    assert low > 1.2 and high < 1.0


def test_sglang_tree_is_priced_from_its_three_flags():
    from servesim.hardware.speculation import sglang_tree_for

    sg = build_step_model(Deployment("llama-3-8b", "h100-sxm", 1, engine="sglang"))[0]
    # a tree of 7 nodes (topk 4, 5 steps) expects more tokens than a chain of 3 at the same alpha
    chain = sglang_tree_for(sg, "eagle3", 1, CTX, steps=3, topk=1, draft_tokens=4, alpha=0.7)[1]
    tree = sglang_tree_for(sg, "eagle3", 1, CTX, steps=5, topk=4, draft_tokens=8, alpha=0.7)[1]
    assert chain["acceptance_length"] == pytest.approx(1 + 0.7 + 0.49 + 0.343)
    assert tree["acceptance_length"] > chain["acceptance_length"]
    # at batch 1 the tree wins; at 256 verifying 8 tokens a sequence costs more than it brings
    assert tree["speedup_at_batch"] > chain["speedup_at_batch"]
    far = sglang_tree_for(sg, "eagle3", 256, CTX, steps=5, topk=4, draft_tokens=8, alpha=0.7)[1]
    far_chain = sglang_tree_for(sg, "eagle3", 256, CTX, steps=3, topk=1, draft_tokens=4, alpha=0.7)[1]
    assert far["speedup_at_batch"] < far_chain["speedup_at_batch"]
    # a measured accept length is the tree's own; the loop's equivalent chain gives the same E[n]
    spec, info = sglang_tree_for(sg, "eagle3", 8, CTX, steps=5, topk=4, draft_tokens=8, acceptance_length=3.1)
    assert info["acceptance_length"] == 3.1 and spec.k == 7
    assert spec.tokens_per_step == pytest.approx(3.1, rel=1e-9)
    with pytest.raises(ParameterError, match="speculative_num_draft_tokens"):
        sglang_tree_for(sg, "eagle3", 1, CTX, steps=3, topk=1, draft_tokens=6, alpha=0.7)
