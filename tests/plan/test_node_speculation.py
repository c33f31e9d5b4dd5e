"""The lab's node plan on a measured-kernel node speculates as predict --spec prices the same model."""

from __future__ import annotations

import json

import pytest

from servesim.hardware.acceptance import preset_for
from servesim.hardware.pricer import Deployment, build_step_model
from servesim.hardware.speculation import alpha_for_acceptance_length
from servesim.plan.node_speculation import node_speculation
from servesim.plan.predict import speculating_step_model, speculation_setting

R1 = "deepseek-ai/DeepSeek-R1"
NODE_PLAN = ["plan", "--gpu", "h200", "--dtype", "fp8", "--tp", "8", "--nodes", "4", "--isl", "1024", "--osl",
             "1024", "--rate", "2", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50", "--top", "20", "-q",
             "--format", "json"]


def _plan(capsys, *extra: str) -> dict:
    from servesim.cli.main import main

    assert main([*NODE_PLAN, *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_model_node_plan_runs_no_speculation_unless_asked(capsys):
    out = _plan(capsys, "--model", R1, "--engine", "trtllm")
    assert out["ranked"] and all(r["speculative_k"] == 0 for r in out["ranked"])
    assert out["assumptions"]["speculation"] == "off"


def test_a_model_node_plan_refuses_a_method_the_model_has_not(capsys):
    from servesim.cli.main import main

    code = main(["plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "h100-sxm", "--tp", "8",
                 "--nodes", "4", "--spec", "mtp", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "spec='mtp'" in err and "no MTP module" in err and "Traceback" not in err


def test_a_model_node_plan_speculates_at_the_published_acceptance_and_its_k(capsys):
    # DeepSeek-R1's MTP: the report's 1.875 tokens a step at k = 1 (alpha 0.875), so no k above 1
    # (the lab's preset, alpha 0.85 searched to k = 8, ranked k = 6 at 4.53 tokens a step)
    out = _plan(capsys, "--model", R1, "--engine", "trtllm", "--spec", "mtp")
    ks = {r["speculative_k"] for r in out["ranked"]}
    assert ks == {0, 1}
    s = out["assumptions"]["speculation"]
    assert s.startswith("mtp (alpha=0.875, ") and "k <= 1" in s and "DeepSeek-V3 report" in s


def test_the_node_speculation_is_predicts_at_the_nodes_batch():
    dep = Deployment(R1, "h200", 8, "fp8", "fp8", "trtllm")
    ns = node_speculation(dep, "mtp", isl=1024, osl=1024, rate_per_node=0.5, k_max=8)
    sm = build_step_model(dep)[0]
    _, info = speculation_setting(sm, "mtp", ns.batch, 1024 + 512.0)
    # TensorRT-LLM keeps its overlap scheduler with MTP: the cycle runs on the plain step
    assert (ns.preset.alpha, ns.preset.d, ns.preset.c, ns.k_max) == pytest.approx(
        (info["alpha"], info["d"], info["c"], 1))
    assert ns.preset.alpha == pytest.approx(0.875) and 1.0 <= ns.batch <= sm.engine.max_num_seqs
    # a measured k given: TensorRT-LLM's k = 3 figure (2.82), and no k above it
    three = node_speculation(dep, "mtp", isl=1024, osl=1024, rate_per_node=0.5, k_max=8, k=3)
    assert three.k_max == 3 and three.preset.alpha == pytest.approx(alpha_for_acceptance_length(2.82, 3))
    assert preset_for("mtp", "chat", "deepseek-r1", k=3).length == 2.82
    # --k-max stays a cap
    assert node_speculation(dep, "mtp", isl=1024, osl=1024, rate_per_node=0.5, k_max=2, k=3).k_max == 2


def test_sglangs_node_pays_its_speculative_workers_host_time_a_cycle():
    # SGLang runs MTP without its overlap scheduler: each cycle pays 4.7 ms of host time after the
    # GPU's (engines.toml spec_host_step_us), which d and c carry against the plain (overlapped) step
    dep = Deployment(R1, "h200", 8, "fp8", "bf16", "sglang")
    ns = node_speculation(dep, "mtp", isl=1024, osl=1024, rate_per_node=0.5, k_max=8)
    sm = build_step_model(dep)[0]
    ctx = 1024 + 512.0
    _, info = speculation_setting(sm, "mtp", ns.batch, ctx)
    run = speculating_step_model(sm, dep, "mtp", dict(info), None)
    plain, spec = sm.decode_step(ns.batch, ctx), run.decode_step(ns.batch, ctx)
    assert 4.7e-3 <= spec.total_s - plain.total_s <= 4.8e-3  # by hand: the host time, no longer hidden
    k = ns.k_max
    assert (1 + k * ns.preset.d + k * ns.preset.c) * plain.total_s == pytest.approx(
        (1 + k * info["d"] + k * info["c"]) * spec.total_s, rel=1e-9)
    assert ns.preset.c > info["c"] and ns.preset.d > info["d"]


def test_the_report_says_how_the_plan_priced_the_models_speculation(tmp_path, capsys):
    from servesim.cli.main import main

    out = tmp_path / "rep"
    args = [a for a in NODE_PLAN if a not in ("--top", "20", "--format", "json")]
    assert main(["report", *args[1:], "--model", R1, "--engine", "trtllm", "--spec", "mtp", "--out",
                 str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "price speculation on the model as predict --spec does: mtp (alpha=0.875" in md
    assert "The presets below are the lab's illustrations" in md
