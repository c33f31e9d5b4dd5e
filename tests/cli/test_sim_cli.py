"""``servesim simulate`` and ``validate`` in a subprocess: fields, formats, determinism, bad input."""

from __future__ import annotations

import csv
import io
import json

import pytest

import servesim.sim
from tests.cli_helpers import run_cli

MMC_ARGS = [
    "simulate",
    "--servers",
    "8",
    "--rate",
    "6.8",
    "--service",
    "exp",
    "--service-mean-s",
    "1",
    "--requests",
    "200000",
    "--seed",
    "1",
]


def test_simulate_queue_json_has_the_promised_fields_beside_erlang_c():
    res = run_cli(*MMC_ARGS, "--format", "json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    for key in ("requests", "mean_wait_s", "p_wait", "wait_p99_s", "sim_requests_per_s"):
        assert d[key] is not None, key
    assert d["requests"] == 200_000
    assert d["closed_form"]["erlang_c"]["exact"] is True
    assert {"allen_cunneen", "kimura"} <= set(d["closed_form"])
    ec = d["closed_form"]["erlang_c"]
    lo, hi = d["mean_wait_ci95_s"]
    assert lo <= d["mean_wait_s"] <= hi
    assert abs(d["mean_wait_s"] - ec["mean_wait_s"]) < 0.2 * ec["mean_wait_s"]


def test_same_seed_same_bytes_without_timing():
    a = run_cli(*MMC_ARGS, "--format", "json", "--no-timing")
    b = run_cli(*MMC_ARGS, "--format", "json", "--no-timing")
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    assert "sim_requests_per_s" not in json.loads(a.stdout)
    c = run_cli(*MMC_ARGS[:-1], "2", "--format", "json", "--no-timing")
    assert c.stdout != a.stdout


def test_simulate_preset_table_and_csv():
    res = run_cli(
        "simulate",
        "--preset",
        "rag",
        "--link",
        "eth25",
        "--requests",
        "4000",
        "--replications",
        "2",
        "--no-timing",
    )
    assert res.returncode == 0, res.stderr
    assert "SERVING SIMULATION: preset rag" in res.stdout
    assert "[PREFILL QUEUE]" in res.stdout
    res = run_cli(
        "simulate",
        "--preset",
        "chat",
        "--split",
        "4p/4d",
        "--requests",
        "4000",
        "--replications",
        "2",
        "--prompt-cv",
        "0.8",
        "--arrival-cv",
        "2",
        "--format",
        "csv",
        "--no-timing",
    )
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [(r["architecture"], r["source"]) for r in rows] == [
        ("colocated", "closed_form"),
        ("colocated", "simulated"),
        ("disaggregated", "closed_form"),
        ("disaggregated", "simulated"),
    ]
    assert rows[3]["split"] == "4p/4d"
    assert "ttft_ms_p99_ci95_low" in rows[1]


def test_simulate_preset_json_is_deterministic_and_unstable_is_reported():
    args = [
        "simulate",
        "--preset",
        "chat",
        "--nodes",
        "2",
        "--link",
        "tcp",
        "--requests",
        "2000",
        "--replications",
        "2",
        "--format",
        "json",
        "--no-timing",
    ]
    a, b = run_cli(*args), run_cli(*args)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    d = json.loads(a.stdout)
    assert d["disaggregated"]["simulated"]["stable"] is False
    assert d["disaggregated"]["simulated"]["goodput_rps"] == 0.0
    assert d["disaggregated"]["simulated"]["ttft_ms"]["p99"] is None


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["simulate", "--servers", "0", "--rate", "1"], "--servers"),
        (["simulate", "--rate", "-1"], "--rate"),
        (["simulate", "--servers", "4"], "rate"),
        (["simulate", "--preset", "chat", "--service", "lognormal"], "service"),
        (["simulate", "--preset", "chat", "--split", "3p/3d"], "split"),
        (["simulate", "--preset", "chat", "--split", "x"], "--split"),
        (["simulate", "--rate", "1", "--warmup", "1"], "--warmup"),
        (["validate", "--replications", "1"], "--replications"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    res = run_cli(*args)
    assert res.returncode == 2
    assert res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1
    assert needle in res.stderr


def test_validate_small_run_has_both_tables():
    res = run_cli(
        "validate",
        "--requests",
        "20000",
        "--serving-requests",
        "4000",
        "--cycles",
        "20000",
        "--replications",
        "4",
        "--no-crossover",
        "--format",
        "json",
    )
    d = json.loads(res.stdout)
    # Exit 1 exactly when a row FAILs (small runs can: few requests per tail estimate), else 0.
    assert res.returncode == (1 if d["agreement_failed"] else 0), res.stderr
    groups = {r["group"] for r in d["agreement"]}
    assert groups == {"M/M/c", "M/G/c", "serving", "specdec", "engine"}
    assumptions = {r["assumption"] for r in d["bias"]}
    assert assumptions == {
        "i.i.d. acceptance",
        "Poisson arrivals",
        "exponential service",
        "one prompt length",
        "mean TPOT instead of a distribution",
        "free KV-transfer machinery",
        "no decode-side queueing",
        "TPOT is a node constant, inflated by beta x prefill load",
    }
    assert all(r["sign"] in ("+", "-", "0") for r in d["bias"])
    assert d["agreement_passed"] + d["agreement_failed"] == len(d["agreement"])


def test_public_api_is_declared():
    for name in servesim.sim.__all__:
        assert hasattr(servesim.sim, name), name
    assert list(servesim.sim.__all__) == sorted(servesim.sim.__all__, key=lambda s: (not s.isupper(), s))


def test_cli_constants_mirror_the_simulator():
    from servesim.cli import sim as cli_sim
    from servesim.sim.cluster import LINK_CONTENTION
    from servesim.sim.report import SERVICE_KINDS
    from servesim.sim.stats import DEFAULT_SEED

    assert cli_sim.SERVICE_KINDS == SERVICE_KINDS
    assert cli_sim.LINK_CONTENTION == LINK_CONTENTION
    assert cli_sim.DEFAULT_SEED == DEFAULT_SEED


def test_help_builds_without_numpy():
    # the seed's entry point runs with `python -S` (no site-packages), so registering
    # simulate/validate must not import numpy
    res = run_cli("--help", entry=("-S", "spec_decode_sim.py"))
    assert res.returncode == 0, res.stderr
    assert "simulate" in res.stdout and "validate" in res.stdout


def test_engine_simulation_of_a_disaggregated_moe_deployment_sends_its_mla_latent():
    """simulate --mode disagg with DeepSeek-R1 (MLA) runs both pools of tp 1 x dp 8 GPUs (16 in all)
    and sends each prompt's latent cache, (512 + 64) values x 61 layers x 2 bytes = 70,272 bytes a
    token in BF16; the engine loop and the closed form agree within 10% on mean TTFT and TPOT."""
    from servesim.hardware.precision import kv_bytes_of
    from servesim.hardware.pricer import Deployment, build_step_model

    sm, _, _ = build_step_model(Deployment("deepseek-ai/DeepSeek-R1", "h200", 1, "fp8", "bf16", "sglang",
                                           dp=8, ep=8))
    assert kv_bytes_of(sm, 1024) == pytest.approx(70272 * 1024)
    assert kv_bytes_of(sm, 1) == pytest.approx(70272)
    res = run_cli("simulate", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--tp", "1", "--dp", "8",
                  "--ep", "8", "--engine", "sglang", "--isl", "1024", "--osl", "64", "--rate", "2",
                  "--requests", "60", "--mode", "disagg", "--format", "json", "--no-timing")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["gpus"] == 16
    cf = d["closed_form"]
    assert d["mean_ttft_ms"] == pytest.approx(cf["mean_ttft_ms"], rel=0.10)
    assert d["mean_tpot_ms"] == pytest.approx(cf["mean_tpot_ms"], rel=0.10)


def test_disagg_lab_takes_an_moe_node_shape():
    """servesim disagg --model with --dp/--ep prices its node as that split (8 GPUs, tp 1 x dp 8, ep 8)
    and its KV transfers at the MLA latent's 70,272 bytes a token; a dense model refuses --dp."""
    res = run_cli("disagg", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--tp", "1", "--dp", "8",
                  "--ep", "8", "--engine", "sglang", "--isl", "1024", "--osl", "1024", "--rate", "4")
    assert res.returncode == 0, res.stderr
    assert "on 8 GPUs each" in res.stdout and "(tp 1 x dp 8, ep 8)" in res.stdout
    assert "(70,272 B/token)" in res.stdout
    bad = run_cli("disagg", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8", "--dp", "2")
    assert bad.returncode == 2 and "dp=2" in bad.stderr and "Traceback" not in bad.stderr
