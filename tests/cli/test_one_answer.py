"""Same inputs, same bytes; speculation only where asked (issue: one answer from every command)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PREEMPTING = ["predict", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "2048", "--osl", "256",
              "--concurrency", "400", "--num-prompts", "400", "--seed", "7", "--format", "json"]
QUEUEING = ["predict", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "2048", "--osl", "256",
            "--rate", "30", "--num-prompts", "400", "--seed", "7", "--format", "json"]
SIMULATE = ["simulate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "512", "--osl", "128",
            "--rate", "4", "--requests", "300", "--no-timing", "--format", "json"]


def _fresh(args: list[str], hashseed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hashseed}
    r = subprocess.run([sys.executable, "-m", "servesim", *args], capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_preempting_queueing_and_simulated_runs_repeat_to_the_byte_in_fresh_interpreters():
    first = {}
    for args in (PREEMPTING, QUEUEING, SIMULATE):
        outs = {_fresh(args, seed) for seed in ("0", "12345")}
        assert len(outs) == 1, args[:3]
        first[args[0] + str(len(first))] = outs.pop()
    d = json.loads(first["predict0"])
    assert d["preemptions"] > 0  # the case does preempt: ties in the loop are exercised


def test_no_timing_leaves_no_wall_clock_field():
    text = _fresh(SIMULATE, "0")
    for key in ("wall_ms", "sim_wall_ms", "sim_wall_s", "sim_requests_per_s"):
        assert key not in text


def test_a_model_plan_runs_no_speculation_unless_asked(capsys):
    from servesim.cli.main import main

    assert main(["plan", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "2", "--isl", "512", "--osl",
                 "128", "--slo-ttft-ms", "500", "--slo-tpot-ms", "40", "--top", "4", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ranked"] and all(r["speculative_k"] == 0 for r in out["ranked"])


def test_plot_works_on_the_engine_simulation_and_the_capacity_plan(tmp_path, capsys):
    from servesim.cli.main import main

    for args in (["simulate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "512", "--osl", "128",
                  "--rate", "4", "--requests", "200"],
                 ["plan", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "1", "--isl", "512",
                  "--osl", "128", "--top", "2"]):
        out = tmp_path / f"{args[0]}.png"
        assert main([*args, "--plot", str(out)]) == 0
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()


def test_roofline_prices_a_moe_config_as_predict_does(capsys, tmp_path):
    """`roofline` takes any MoE id or config.json predict takes, and its measured step at batch 1
    is predict's batch-1 step of the same deployment (one step model behind both)."""
    import shutil

    from servesim.cli.main import main
    from servesim.hardware.model_config import _shipped

    _, src = _shipped()["qwen/qwen3-235b-a22b"]
    cfg = tmp_path / "config.json"
    shutil.copy(src, cfg)
    steps = []
    for model in ("Qwen/Qwen3-235B-A22B-Instruct-2507", str(cfg)):
        assert main(["roofline", "--model", model, "--gpu", "b200", "--tp", "8", "--engine", "sglang",
                     "--batch", "1", "--context", "1000", "--format", "json"]) == 0
        measured = json.loads(capsys.readouterr().out)["measured"]
        rows = measured["rows"]
        steps.append(rows[0]["total_ms"])
        # where the time goes, by operation: the same step, summed (the GPU's parts, host apart)
        ops = measured["operations"]["1"]
        assert {"qkv proj", "attention", "moe experts", "router", "all-reduce"} <= {o["name"] for o in ops}
        gpu_ms = sum(rows[0][k] for k in ("gemm_ms", "attention_ms", "allreduce_ms", "other_ms"))
        assert sum(o["ms"] for o in ops) == pytest.approx(gpu_ms, rel=1e-9)
        assert sum(o["light_ms"] for o in ops) == pytest.approx(rows[0]["speed_of_light_ms"], rel=1e-9)
    assert main(["predict", "--model", "Qwen/Qwen3-235B-A22B-Instruct-2507", "--gpu", "b200", "--tp", "8",
                 "--engine", "sglang", "--isl", "1000", "--osl", "8", "--concurrency", "1", "--num-prompts",
                 "2", "--format", "json"]) == 0
    pred = json.loads(capsys.readouterr().out)["batch1_step_ms"]
    # predict's batch-1 step is priced at its own context (prompt + half the output), roofline's at
    # 1,000 tokens: the same step model, so within the attention's share of a 1% context change
    assert steps[0] == steps[1]
    assert abs(steps[0] - pred) / pred < 0.02
    # physical: above the step's speed of light, and a 94-layer BF16 MoE step is milliseconds
    assert 1.0 < steps[0] < 50.0


def test_simulate_takes_a_moe_checkpoint_in_its_own_format(capsys):
    """`simulate --model` defaults to the checkpoint's format as predict does: gpt-oss-120b's MXFP4
    experts fit one H200 (in BF16 it would need 2 GPUs, which predict and simulate both refuse)."""
    from servesim.cli.main import main

    args = ["simulate", "--model", "openai/gpt-oss-120b", "--gpu", "h200", "--isl", "512", "--osl", "64",
            "--rate", "2", "--requests", "60", "--no-timing", "--format", "json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert 0 < out["mean_tpot_ms"] < 50 and out["gpus"] == 1
    assert main([*args, "--dtype", "bf16"]) == 2
    assert "would hold it" in capsys.readouterr().err
