"""One speedup per (model, GPU, batch, method, k, acceptance), whichever command prints it (issue 19):
``roofline``'s speculation tables and ``predict --spec``'s curve come from the same step model."""

from __future__ import annotations

import pytest

from servesim.hardware.catalog import builtin_catalog
from servesim.hardware.names import resolve_gpu, resolve_model
from servesim.hardware.pricer import Deployment, build_step_model
from servesim.hardware.speculation import K_MAX, draft_model_for, speculation_for, tree_speedup
from servesim.hardware.speculation_physics import TokenTree
from servesim.plan.predict import speculation_setting
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
    # EAGLE-3 on Llama-3.1-8B has a published chat acceptance (vLLM's CI baseline: 2.6 tokens a step
    # at k = 3): each k takes the one measured at (or nearest) it, as specdec --model weighs them, not
    # the lab's illustrative alpha of 0.9 (6.13 tokens a step at k = 8)
    from servesim.hardware.acceptance import published_alphas
    from servesim.hardware.speculation import alpha_for_acceptance_length

    alphas = published_alphas("eagle3", "chat", sm.shape.name, range(1, K_MAX + 1))
    assert alphas is not None
    dm = draft_model_for(sm, "eagle3")
    curve = {}
    for b in (r["batch"] for r in data["rows"]):
        info = speculation_for(sm, "eagle3", b, CONTEXT, draft=dm, alphas=alphas)[1]
        curve[b] = (info["speedup_at_batch"], info["k"])
        assert info["alpha"] == pytest.approx(alpha_for_acceptance_length(2.6, 3), rel=1e-12)
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


def test_the_first_draft_pass_runs_over_the_verified_tokens(roofline_and_step_model):
    """vLLM's EagleProposer.propose: one pass over B (k+1) tokens, then k-1 passes at B."""
    from servesim.hardware.speculation import drafting_s

    _, sm = roofline_and_step_model
    dm = draft_model_for(sm, "eagle3")
    for b in (1, 256):
        one = dm.decode_step(b, CONTEXT).gpu_s
        first = dm.decode_step(b, CONTEXT, positions=4).gpu_s
        fuse = dm.first_pass_extra_s(b * 4)  # EAGLE-3's fc over the verified tokens' hidden states
        assert fuse > 0
        assert drafting_s(dm, b, CONTEXT, 3) == pytest.approx(first + 2 * one + fuse, rel=1e-12)
    # at batch 1 the first pass costs about one step; at 256 the 1,024-token pass costs far more
    assert dm.decode_step(1, CONTEXT, positions=4).gpu_s < 1.3 * dm.decode_step(1, CONTEXT).gpu_s
    assert dm.decode_step(256, CONTEXT, positions=4).gpu_s > 1.5 * dm.decode_step(256, CONTEXT).gpu_s


def test_specdec_on_a_model_is_predicts_curve():
    import json

    from tests.cli_helpers import run_cli

    r = run_cli("specdec", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8", "--preset",
                "small-draft", "--acceptance-length", "2.5", "--k", "3", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    sm = build_step_model(Deployment("llama-3-70b", "h100-sxm", 8))[0]
    _, info = speculation_setting(sm, "small-draft", 1, 2048, k=3, acceptance_length=2.5, kv_max=512)
    want = {int(c["batch"]): c["speedup"] for c in info["speedup_by_batch"]}
    for row in d["rows"]:
        assert row["speedup"] == pytest.approx(want[row["batch"]], rel=1e-9)
    # a draft model's win shrinks to a loss by 128-256 sequences (published vLLM sweeps: 0.6-0.95x there)
    assert d["rows"][0]["speedup"] > 1.3 and d["stops_paying_at_batch"] in (64, 128, 256)
    assert d["acceptance"] == "given: mean acceptance length 2.5 at k = 3"
    # the 8B draft's weights (8.03e9 x 2 B / 8 = 2.0 GB per GPU) and its KV leave fewer sequences
    assert d["draft_weight_bytes_per_gpu"] == pytest.approx(8.03e9 * 2 / 8, rel=0.01)
    assert 0 < d["max_batch"] < d["max_batch_without_draft"]
    assert max(r["batch"] for r in d["rows"]) <= d["max_batch"]


def test_specdec_on_a_model_weighs_each_k_at_its_published_acceptance():
    # DeepSeek-R1's MTP (chat): 1.875, 2.58, 2.82, 2.99, 3.01 tokens a step measured at k = 1-5; one
    # i.i.d. alpha (the lab's 0.85) would claim 5.12 at k = 8 and rank k = 8 best at batch 1
    from servesim.hardware.speculation import alpha_for_acceptance_length
    from servesim.plan.lab_model import specdec_on_model

    dep = Deployment("deepseek-ai/DeepSeek-R1", "h200", 8, "fp8", "fp8", "trtllm")
    sm, _, memory = build_step_model(dep)
    d = specdec_on_model(sm, memory, preset="mtp", context=2048)
    assert d["acceptance"].startswith("published (mtp, chat)")
    measured = {1: 1.875, 2: 2.58, 3: 2.82, 4: 2.99, 5: 3.01}
    dm = draft_model_for(sm, "mtp")
    for row in d["rows"]:
        if row["k"] in measured:
            assert row["acceptance_length"] == pytest.approx(measured[row["k"]], abs=1e-9)
        # the row's k is the best of every k at its own acceptance
        for kk, length in measured.items():
            other = speculation_for(sm, "mtp", row["batch"], 2048, k=kk, draft=dm,
                                    alpha=alpha_for_acceptance_length(length, kk))[1]
            assert row["speedup"] >= other["speedup_at_batch"] - 1e-12
    assert d["rows"][0]["batch"] == 1 and d["rows"][0]["k"] <= 5 and d["rows"][0]["acceptance_length"] < 3.1


@pytest.mark.parametrize(("argv", "fragment"), [
    (("specdec", "--acceptance-length", "2"), "acceptance_length=2"),
    (("specdec", "--model", "llama-3-8b"), "gpu=None"),
    (("specdec", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--preset", "mtp"), "no MTP module"),
])
def test_specdec_model_mode_refuses_what_does_not_apply(argv, fragment):
    from tests.cli_helpers import run_cli

    r = run_cli(*argv)
    assert r.returncode == 2 and fragment in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_predict_takes_sglangs_tree_flags():
    from servesim.plan.predict import predict
    from servesim.sim.batching import Benchmark
    from tests.cli_helpers import run_cli

    dep = Deployment("llama-3-8b", "h100-sxm", 1, engine="sglang")
    bench = Benchmark(512, 128, concurrency=8, num_prompts=40)
    s = predict(dep, bench, spec="eagle3", tree=(5, 4, 8), acceptance_length=3.2)["speculation"]
    assert s["tree"] == {"steps": 5, "topk": 4, "draft_tokens": 8} and s["k"] == 7
    assert s["acceptance_length"] == pytest.approx(3.2) and "of the tree" in s["acceptance"]
    # the same measured length from a 3-draft chain costs less to verify: more speedup at batch 256
    c = predict(dep, bench, spec="eagle3", k=3, acceptance_length=3.2)["speculation"]
    assert c["speedup_by_batch"][-1]["speedup"] > s["speedup_by_batch"][-1]["speedup"]
    base = ("predict", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm", "--engine",
            "sglang", "--isl", "512", "--osl", "128", "--concurrency", "8", "--spec", "eagle3")
    bad = run_cli(*base, "--speculative-num-steps", "5")
    assert bad.returncode == 2 and "given with the other two" in bad.stderr
    with pytest.raises(ValueError, match="k=3"):
        predict(dep, bench, spec="eagle3", tree=(5, 4, 8), k=3)


def test_the_plans_screen_prices_the_acceptance_predict_uses():
    """plan's closed-form screen takes (method, k, alpha) as predict resolves them, not the lab's alpha."""
    from servesim.plan.capacity import decode_at_load
    from servesim.plan.predict import resolve_acceptance

    sm = build_step_model(Deployment("llama-3-8b", "h100-sxm", 1))[0]
    mem = 80e9
    alpha, k, source = resolve_acceptance("eagle3", "llama-3-8b", k=3, acceptance_length=2.0)
    assert k == 3 and source.startswith("given") and 0 < alpha < 0.6
    low = decode_at_load(sm, mem, 2.0, 1024, 256, prefill=False, spec=("eagle3", k, alpha))
    lab = decode_at_load(sm, mem, 2.0, 1024, 256, prefill=False, spec="eagle3")  # alpha 0.9, k searched
    plain = decode_at_load(sm, mem, 2.0, 1024, 256, prefill=False)
    assert low.k == 3 and plain.tpot_s > low.tpot_s > lab.tpot_s


def test_a_moe_plan_takes_mtp_only_where_the_model_has_it():
    from servesim.plan.search import PlanQuestion, capacity_plan

    q = PlanQuestion(model="Qwen/Qwen3-235B-A22B", gpu="h200", gpus=8, isl=512, osl=128, slo_ttft_s=1.0,
                     slo_tpot_s=0.05, spec="eagle3")
    with pytest.raises(ValueError, match="no MTP module"):
        capacity_plan(q)


def test_speculation_is_priced_at_the_batch_the_load_keeps_running():
    from servesim.plan.capacity import decode_at_load
    from servesim.plan.predict import _running_batch
    from servesim.sim.batching import Benchmark

    sm, _, mem = build_step_model(Deployment("llama-3-8b", "h100-sxm", 1))
    at_rate = Benchmark(1024, 256, rate_per_s=20.0, num_prompts=200)
    want = decode_at_load(sm, mem, 20.0, 1024, 256, prefill=True).batch
    assert want > 50 and _running_batch(sm, mem, at_rate, 1024, 256, 300) == pytest.approx(want)
    capped = Benchmark(1024, 256, rate_per_s=20.0, concurrency=16, num_prompts=200)
    assert _running_batch(sm, mem, capped, 1024, 256, 300) == 16
    all_at_once = Benchmark(1024, 256, num_prompts=1000)
    assert _running_batch(sm, mem, all_at_once, 1024, 256, 300) == 300  # as many as the KV cache holds
    assert _running_batch(sm, mem, Benchmark(1024, 256, concurrency=64), 1024, 256, 300, workers=4,
                          prefill=False) == 16  # a decode pool of 4 shares the clients
