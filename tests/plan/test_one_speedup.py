"""One speedup per (model, GPU, batch, method, k, acceptance), whichever command prints it (issue 19):
``roofline``'s speculation tables and ``predict --spec``'s curve come from the same step model."""

from __future__ import annotations

import pytest

from servesim.hardware.catalog import builtin_catalog
from servesim.hardware.names import resolve_gpu, resolve_model
from servesim.hardware.speculation import K_MAX, draft_model_for, speculation_for, tree_speedup
from servesim.hardware.speculation_physics import TokenTree
from servesim.plan.predict import Deployment, build_step_model, speculation_setting
from servesim.plan.roofline import measured_step_model, roofline_summary

CONTEXT = 1280


@pytest.fixture(scope="module")
def roofline_and_step_model():
    cat = builtin_catalog()
    model, gpu = resolve_model("llama-3-8b", cat), resolve_gpu("h100-sxm", cat)
    sm = measured_step_model(model, gpu, "h100-sxm", 1, engine="vllm", dtype="bf16", kv_dtype="bf16",
                             catalog=cat)
    data = roofline_summary(model, gpu, 1, batches=(1, 16, 64, 256), context_tokens=CONTEXT, k_max=K_MAX,
                            step_model=sm, catalog=cat)
    return data, build_step_model(Deployment("llama-3-8b", "h100-sxm", 1))[0]


def test_roofline_speedups_are_predicts(roofline_and_step_model):
    data, sm = roofline_and_step_model
    assert data["assumptions"]["speculation_priced_by"].startswith("measured-kernel step model")
    _, info = speculation_setting(sm, "eagle3", 1, CONTEXT, alpha=0.9, kv_max=256)
    curve = {int(c["batch"]): (c["speedup"], c["k"]) for c in info["speedup_by_batch"]}
    for row in data["rows"]:
        s, k = curve[row["batch"]]
        assert row["speedup"]["eagle3"] == pytest.approx(s, rel=1e-12)
        assert row["best_k"]["eagle3"] == k
    # the win shrinks with the batch (seed 003): at 256 clearly below batch 1
    assert data["rows"][-1]["speedup"]["eagle3"] < 0.7 * data["rows"][0]["speedup"]["eagle3"]
    eagle = next(p for p in data["presets"] if p["name"] == "eagle3")
    assert eagle["speedup_batch1"] == pytest.approx(curve[1][0], rel=1e-12)


def test_mtp_is_not_offered_for_a_model_without_the_module(roofline_and_step_model):
    data, _ = roofline_and_step_model
    mtp = next(p for p in data["presets"] if p["name"] == "mtp")
    assert not mtp["available"] and "no MTP module" in mtp["note"]
    assert all(r["speedup"]["mtp"] is None for r in data["rows"])


def test_a_chain_tree_is_priced_as_the_chain(roofline_and_step_model):
    _, sm = roofline_and_step_model
    dm = draft_model_for(sm, "eagle3")
    alpha = 0.8
    chain = TokenTree(parents=(-1, 0, 1), accept=(alpha, alpha, alpha))
    for b in (1, 64):
        want = speculation_for(sm, "eagle3", b, CONTEXT, k=3, draft=dm, alpha=alpha)[1]["speedup_at_batch"]
        assert tree_speedup(sm, chain, b, CONTEXT, draft=dm) == pytest.approx(want, rel=1e-12)
    # two candidates for the first position: more expected tokens, one more verified node
    wide = TokenTree(parents=(-1, -1, 0), accept=(alpha, alpha * (1 - alpha), alpha))
    assert wide.expected_tokens > 1 + alpha + alpha**2
