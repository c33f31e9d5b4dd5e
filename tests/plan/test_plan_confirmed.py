"""Every row the plan prints is what the engine model (predict --rate) says of it."""

from __future__ import annotations

import json

import pytest

from servesim.cli.main import main
from tests.plan.steady import check_rows

PLAN = ["plan", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--gpus", "8", "--isl", "2000", "--osl", "300",
        "--slo-ttft-ms", "800", "--slo-tpot-ms", "50", "--format", "json"]


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def plan_json() -> dict:
    """The default 8-GPU plan, once for the module."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(PLAN) == 0
    return json.loads(buf.getvalue())


def test_every_printed_row_holds_its_rate_at_steady_state(plan_json):
    """Colocated and disaggregated rows (mixed dtypes too) of the issue's plan: ``predict`` with 4,000
    prompts at each row's rate meets the SLOs and agrees with the row within 5% (500-prompt runs
    promised 14.39 req/s for row 1, where 4,000 prompts give TPOT 55.6 ms against the SLO's 50)."""
    rows = plan_json["ranked"]
    assert rows and plan_json["confirmed"] == len(rows)
    assert {r["architecture"] for r in rows} == {"colocated", "disaggregated"}
    assert check_rows(rows, 0.8, 50, 0.9, model="llama-3-70b", isl=2000, osl=300) == len(rows)
    # Ranked by goodput per GPU, best first.
    per_gpu = [r["output_throughput_per_gpu"] for r in rows]
    assert per_gpu == sorted(per_gpu, reverse=True)


def test_the_front_is_not_dominated_and_rows_alike_show_their_budget(capsys, plan_json):
    front = plan_json["pareto"]
    for p in front:
        assert not any(o["output_throughput_per_gpu"] > p["output_throughput_per_gpu"]
                       and o["tokens_per_s_per_user"] > p["tokens_per_s_per_user"] for o in front)
    assert main([*PLAN[:-2]]) == 0
    text = capsys.readouterr().out
    lines = [ln for ln in text.splitlines() if ln.strip().startswith(("1 ", "2 ", "3 ", "4 ", "5 "))]
    assert len(set(ln.split()[2:7].__str__() for ln in lines)) == len(lines)  # no two rows look alike


@pytest.mark.slow
def test_a_moe_plan_and_a_speculative_plan_hold_their_rates_at_steady_state(capsys):
    """The MoE (Qwen3-235B, TP/DP/EP on 8 H200s, SGLang) and speculative (Llama-3-8B with EAGLE-3 at a
    measured acceptance) kinds of plan: every printed row, re-run by predict with 4,000 prompts."""
    moe = _json(capsys, "plan", "--model", "Qwen/Qwen3-235B-A22B-Instruct-2507", "--gpu", "h200", "--gpus",
                "8", "--isl", "1024", "--osl", "512", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50",
                "--engine", "sglang", "--top", "2", "--format", "json")
    assert check_rows(moe["ranked"], 2.0, 50, 0.9, model="Qwen/Qwen3-235B-A22B-Instruct-2507", isl=1024,
                      osl=512, engine="sglang") >= 1
    assert "sglang #8726" in moe["hazards"]["spec+prefix-cache"]  # an SGLang plan cites SGLang's reports
    spec = _json(capsys, "plan", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "2", "--isl",
                 "256", "--osl", "1024", "--slo-ttft-ms", "1000", "--slo-tpot-ms", "12", "--spec", "eagle3",
                 "--k", "3", "--acceptance-length", "2.5", "--top", "3", "--format", "json")
    rows = [r for r in spec["ranked"] if r["speculation"] == "eagle3"]
    assert rows
    assert check_rows(rows, 1.0, 12, 0.9, model="llama-3-8b", isl=256, osl=1024,
                      spec={"spec": "eagle3", "k": 3, "acceptance_length": 2.5}) == len(rows)


def test_a_moe_model_is_planned_over_tp_dp_and_ep_and_confirmed(capsys):
    plan = _json(capsys, "plan", "--model", "Qwen/Qwen3-235B-A22B-Instruct-2507", "--gpu", "h200", "--gpus",
                 "8", "--isl", "1024", "--osl", "512", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50",
                 "--engine", "sglang", "--top", "4", "--format", "json")
    rows = plan["ranked"]
    assert rows and plan["confirmed"] == len(rows) <= 4
    shapes = {(r["decode"]["tp"], r["decode"].get("dp", 1), r["decode"].get("ep", 1)) for r in rows}
    assert all(tp * dp <= 8 and (tp * dp) % ep == 0 for tp, dp, ep in shapes)
    for r in rows:
        assert r["mean_tpot_ms"] <= 50 and r["ttft_attainment"] >= 0.9 and r["gpus"] <= 8
        assert r["decode"]["dtype"] == "bf16"  # the checkpoint's own


def test_the_lab_commands_take_an_moe_model_node(capsys):
    d = _json(capsys, "disagg", "--preset", "chat", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200",
              "--tp", "8", "--format", "json")
    # The MLA latent: (512 + 64) values x 61 layers x 2 bytes a token; a 1,024-token prompt of it.
    assert d["node"]["kv_bytes_per_token"] == 576 * 61 * 2
    assert d["kv_transfer"][0]["kv_bytes"] == 576 * 61 * 2 * 1024
    assert "fp8_block" in d["node"]["source"] and d["node"]["gpus"] == 8


def test_a_speculative_plan_takes_the_measured_acceptance_and_drops_what_does_not_pay(capsys):
    # long outputs under a tight TPOT SLO: where a measured acceptance of 2.5 pays
    plan = _json(capsys, "plan", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "2", "--isl",
                 "256", "--osl", "1024", "--slo-ttft-ms", "1000", "--slo-tpot-ms", "12", "--spec", "eagle3",
                 "--k", "3", "--acceptance-length", "2.5", "--top", "8", "--format", "json")
    rows = plan["ranked"]
    spec = [r for r in rows if r["speculation"] != "none"]
    assert plan["speculation_off"] >= 0 and plan["confirmed"] == len(rows)
    assert spec and all(r["acceptance"].startswith("given") and r["speculative_k"] == 3 for r in spec)
    # Every speculative row left beats its twin without speculation where both were confirmed.
    plain = {(r["architecture"], str(r["prefill"]), str(r["decode"]), r["max_num_batched_tokens"]):
             r["max_rate_rps"] for r in rows if r["speculation"] == "none"}
    for r in spec:
        key = (r["architecture"], str(r["prefill"]), str(r["decode"]), r["max_num_batched_tokens"])
        twin = plain.get(key)
        assert twin is None or r["max_rate_rps"] > twin
    assert main(["plan", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "2", "--isl", "512",
                 "--osl", "64", "--spec", "eagle3", "--acceptance-length", "2.5"]) == 2
    assert "acceptance_length" in capsys.readouterr().err


@pytest.mark.slow
def test_a_speculative_plan_without_k_confirms_the_k_its_screen_picked_at_its_measured_acceptance(capsys):
    # DeepSeek-R1's MTP is measured at k = 1-5 (1.875, 2.58, 2.82, 2.99, 3.01 tokens a step): the screen
    # weighs each k at its own, and the engine model confirms the row at the k picked with the same
    measured = {1: 1.875, 2: 2.58, 3: 2.82, 4: 2.99, 5: 3.01}
    plan = _json(capsys, "plan", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--engine", "trtllm",
                 "--gpus", "8", "--spec", "mtp", "--isl", "1024", "--osl", "1024", "--slo-ttft-ms", "2000",
                 "--slo-tpot-ms", "50", "--top", "4", "--format", "json")
    spec = [r for r in plan["ranked"] if r["speculation"] == "mtp"]
    assert spec
    for r in spec:
        k = r["speculative_k"]
        assert 1 <= k <= 5
        assert f"mean acceptance length {measured[k]:g} at k = {k}" in r["acceptance"]
    assert any(r["speculative_k"] > 1 for r in spec)  # the k = 1 default alone would never go deeper


def test_a_model_one_node_cannot_hold_is_planned_on_two_nodes_as_predict_prices_it(capsys):
    # DeepSeek-R1 in its block FP8 needs 93.9 GiB a GPU on 8 H100s (79.6 GiB each): no one-node split
    # holds it, and the plan says so and which budget would search two-node replicas ...
    args = ["plan", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h100-sxm", "--engine", "sglang",
            "--isl", "1024", "--osl", "1024", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50", "--top", "3"]
    small = _json(capsys, *args, "--gpus", "8", "--format", "json")
    assert small["ranked"] == [] and small["searched"] == 0
    assert "no split of 1, 2, 4, 8 GPUs holds the model" in small["fits_none"]
    assert "at least 11 GPUs would hold it" in small["fits_none"]
    assert "--gpus 16 or more" in small["fits_none"]
    assert main([*args, "--gpus", "8"]) == 0
    assert "--gpus 16 or more would also search 16-GPU replicas" in capsys.readouterr().out
    # ... and with 16 GPUs it plans 16-GPU replicas (two nodes of 8, as InferenceX serves it on H100),
    # each row what predict says of that deployment at the row's rate.
    plan = _json(capsys, *args, "--gpus", "16", "--format", "json")
    rows = plan["ranked"]
    assert rows and plan["fits_none"] is None
    for r in rows:
        d = r["decode"]
        assert r["gpus"] == 16 and d["tp"] * d.get("dp", 1) == 16 and r["architecture"] == "colocated"
        assert r["mean_tpot_ms"] <= 50 and r["ttft_attainment"] >= 0.9
    r = rows[0]
    d = r["decode"]
    got = _json(capsys, "predict", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h100-sxm", "--engine",
                "sglang", "--isl", "1024", "--osl", "1024", "--tp", str(d["tp"]), "--dp", str(d.get("dp", 1)),
                "--ep", str(d.get("ep", 1)), "--chunked-prefill-size", str(r["max_num_batched_tokens"]),
                "--rate", repr(r["max_rate_rps"]), "--num-prompts", str(r["steady_state"]["prompts"]),
                "--warmup-prompts", str(r["steady_state"]["warmup_prompts"]), "--format", "json")
    assert got["mean_tpot_ms"] == pytest.approx(r["mean_tpot_ms"], rel=1e-9)
    assert got["mean_ttft_ms"] == pytest.approx(r["mean_ttft_ms"], rel=1e-9)


def test_a_dense_model_no_split_holds_names_the_tp_that_would():
    from servesim.plan.search import PlanQuestion, capacity_plan

    d = capacity_plan(PlanQuestion("llama-3-70b", "h100-sxm", 1, 1024, 128, 1.0, 0.04, dtypes=("bf16",)))
    assert d["ranked"] == []
    # 70.6e9 parameters x 2 bytes = 131.4 GiB on one 79.6 GiB GPU; dense models are not searched across
    # nodes, so no budget hint
    assert d["fits_none"].startswith("no split of 1 GPU holds the model: at 1 GPU, ")
    assert "131.4 GiB" in d["fits_none"] and "tp 2 would hold it" in d["fits_none"]
    assert "--gpus" not in d["fits_none"]


def test_several_gpu_types_say_why_only_where_none_holds_the_model():
    from servesim.plan.search import PlanQuestion, capacity_plan_gpus

    # DeepSeek-R1 fits 8 H200s, not 8 H100s: with both, an empty plan is the SLOs', not the memory's
    q = PlanQuestion("deepseek-ai/DeepSeek-R1", "h100-sxm", 8, 1024, 1024, 2.0, 0.001, engine="sglang",
                     confirm=False)
    both = capacity_plan_gpus(q, ["h100-sxm", "h200"])
    assert both["ranked"] == [] and both["fits_none"] is None
    alone = capacity_plan_gpus(q, ["h100-sxm"])
    assert alone["fits_none"].startswith("h100-sxm: no split of 1, 2, 4, 8 GPUs holds the model")


@pytest.mark.slow
def test_a_plan_with_deepep_is_what_predict_with_deepep_says(capsys):
    """``plan --ep-comm deepep-normal`` prices its attention-DP rows with DeepEP's normal kernels, as
    ``predict --ep-comm deepep-normal`` does: the best colocated DP8 + EP8 row is predict's at its rate,
    and the same row's TPOT differs from the default plan's (the engines' all-gather)."""
    r1 = "deepseek-ai/DeepSeek-R1"
    args = ["plan", "--model", r1, "--gpu", "h200", "--engine", "sglang", "--gpus", "8", "--isl", "1024",
            "--osl", "1024", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "60", "--top", "10",
            "--format", "json"]

    def dep8(plan: dict) -> dict:
        rows = [r for r in plan["ranked"]
                if r["architecture"] == "colocated" and r["decode"].get("dp", 1) == 8]
        assert rows
        return rows[0]

    deepep = dep8(_json(capsys, *args, "--ep-comm", "deepep-normal"))
    default = dep8(_json(capsys, *args))
    d = deepep["decode"]
    got = _json(capsys, "predict", "--model", r1, "--gpu", "h200", "--engine", "sglang", "--isl", "1024",
                "--osl", "1024", "--tp", str(d["tp"]), "--dp", "8", "--ep", str(d["ep"]),
                "--chunked-prefill-size", str(deepep["max_num_batched_tokens"]), "--ep-comm", "deepep-normal",
                "--rate", repr(deepep["max_rate_rps"]), "--num-prompts",
                str(deepep["steady_state"]["prompts"]), "--warmup-prompts",
                str(deepep["steady_state"]["warmup_prompts"]), "--format", "json")
    assert got["mean_tpot_ms"] == pytest.approx(deepep["mean_tpot_ms"], rel=1e-9)
    assert got["mean_ttft_ms"] == pytest.approx(deepep["mean_ttft_ms"], rel=1e-9)
    assert (deepep["max_rate_rps"], deepep["mean_tpot_ms"]) != (default["max_rate_rps"],
                                                                 default["mean_tpot_ms"])
