"""A plan row's rate is one the deployment holds at steady state (plan/confirm.py), and how the
capacity plan shows it: headroom, the customer's rate, columns that fit, hazards per engine, counts."""

from __future__ import annotations

import pytest

from servesim._checks import ParameterError
from servesim.plan.confirm import CONVERGED, Steady, steady_window


def _even(n: int, wait_s: float, gap_s: float, outputs: int) -> list[tuple[int, float, float, float]]:
    """Request i sent at i seconds, its first token ``wait_s`` later, then a token every ``gap_s``."""
    return [(i, float(i), i + wait_s, i + wait_s + gap_s * (outputs - 1)) for i in range(n)]


def test_an_even_window_is_what_littles_law_says():
    # one request a second, 0.2 s to the first token (+ 0.05 s the engine adds), 99 gaps of 10 ms:
    # by Little's law 1/s x 0.99 s = 0.99 requests decoding and 1/s x 0.2 s = 0.2 waiting
    reqs = _even(1000, 0.2, 0.01, 100)
    s = steady_window(reqs, [100] * 1000, 100, 0.05, slo_ttft_s=0.3)
    assert s.ttft_s == pytest.approx((0.25, 0.25))
    assert s.tpot_s == pytest.approx((0.01, 0.01))
    assert s.decode_batch == pytest.approx((0.99, 0.99))
    assert s.queue == pytest.approx((0.2, 0.2))
    assert s.output_tokens_per_s == pytest.approx(100.0, rel=0.01)  # 100 tokens a request, one a second
    assert s.converged and not s.growing
    assert s.run_attainment == 1.0 and s.run_tpot_s == pytest.approx(0.01)
    # a TTFT SLO below 0.25 s: no request meets it
    assert steady_window(reqs, [100] * 1000, 100, 0.05, slo_ttft_s=0.2).run_attainment == 0.0
    # two decode workers share the batch
    assert steady_window(reqs, [100] * 1000, 100, 0.05, 0.3, decode_workers=2).decode_batch == \
        pytest.approx((0.495, 0.495))


def test_a_queue_that_still_grows_is_unstable():
    # served at one request per 1.2 s while one arrives a second: request i waits 0.2 i seconds
    reqs = [(i, float(i), 1.2 * i + 0.2, 1.2 * i + 1.19) for i in range(1000)]
    s = steady_window(reqs, [100] * 1000, 100, 0.0, slo_ttft_s=1.0)
    assert s.queue[1] > (1 + CONVERGED) * s.queue[0] + 1.0
    assert s.growing and not s.converged  # the mean TTFT still climbs over the window


def test_a_window_needs_requests_past_its_warmup():
    with pytest.raises(ParameterError, match="warmup"):
        steady_window(_even(10, 0.1, 0.01, 10), [10] * 10, 9, 0.0, 1.0)


def test_converged_is_the_running_means_moving_less_than_five_percent():
    base = {"prompts": 4000, "warmup": 500, "ttft_s": (0.30, 0.30), "tpot_s": (0.05, 0.05),
            "decode_batch": (50.0, 50.0), "queue": (1.0, 1.0), "output_tokens_per_s": 1.0, "run_tpot_s": 0.05,
            "run_attainment": 1.0}
    assert Steady(**base).converged  # type: ignore[arg-type]
    assert Steady(**{**base, "tpot_s": (0.0476, 0.05)}).converged  # type: ignore[arg-type]  # 4.8%
    assert not Steady(**{**base, "tpot_s": (0.047, 0.05)}).converged  # type: ignore[arg-type]  # 6%
    assert not Steady(**{**base, "decode_batch": (45.0, 50.0)}).converged  # type: ignore[arg-type]
    assert Steady(**{**base, "queue": (1.0, 2.1)}).growing  # type: ignore[arg-type]  # > 1.05 + 1
    assert not Steady(**{**base, "queue": (1.0, 2.0)}).growing  # type: ignore[arg-type]


def test_the_short_runs_rate_of_the_issue_does_not_hold_and_the_rows_rate_does():
    """Llama-3.1-70B TP2 fp8 (budget 2,048), 2000/300 tokens, SLO TTFT 800 ms for 90%, TPOT 50 ms: the
    500-request runs' 3.598 req/s a replica gives TPOT over 50 ms at steady state; the steady search
    lands below it, where 4,000 prompts meet the SLOs."""
    from servesim.plan.confirm import confirm_row
    from servesim.plan.search import PlanQuestion

    q = PlanQuestion("meta-llama/Llama-3.1-70B-Instruct", "h100-sxm", 8, 2000, 300, 0.8, 0.05)
    pool = {"tp": 2, "workers": 4, "dtype": "fp8"}
    row = {"architecture": "colocated", "prefill": pool, "decode": pool, "gpus": 8, "max_rate_rps": 14.39,
           "max_num_batched_tokens": 2048, "speculation": "none", "output_throughput_per_gpu": 0.0,
           "mean_ttft_ms": None, "mean_tpot_ms": None, "dollars_per_million_output_tokens": None,
           "gpu": "h100-sxm"}
    c = confirm_row(row, q, "h100-sxm")
    assert c is not None
    short = c["short_run"]["max_rate_rps"]
    assert c["max_rate_rps"] < short  # the short runs promise too much here
    assert c["steady_state"]["converged"] and not c["steady_state"]["queue_growing"]
    assert c["mean_tpot_ms"] <= 50 and c["ttft_attainment"] >= 0.9
    from tests.plan.steady import steady_predict

    at_short = steady_predict({**c, "planned_rate_rps": short}, "meta-llama/Llama-3.1-70B-Instruct", 2000,
                              300, 0.8)
    assert at_short["mean_tpot_ms"] > 50  # 4,000 prompts at the short runs' rate break the SLO
    at_row = steady_predict(c, "meta-llama/Llama-3.1-70B-Instruct", 2000, 300, 0.8)
    assert at_row["mean_tpot_ms"] <= 50 and at_row["ttft_slo_attainment"] >= 0.9
    # tok/s/GPU is what the window completes, within a few percent of the offered rate's tokens
    assert c["output_throughput_per_gpu"] == pytest.approx(c["max_rate_rps"] * 300 / 8, rel=0.03)


def test_headroom_plans_each_row_at_its_share_of_the_capacity_and_the_rate_is_shown_beside_it():
    from servesim.plan.search import PlanQuestion, capacity_plan

    args = ("llama-3-8b", "h100-sxm", 1, 1024, 256, 1.0, 0.03)
    full = capacity_plan(PlanQuestion(*args, confirm_top=1))["ranked"][0]
    low = capacity_plan(PlanQuestion(*args, confirm_top=1, headroom=0.8, rate_per_s=5.0))["ranked"][0]
    assert low["max_rate_rps"] == full["max_rate_rps"]  # the same capacity
    assert low["planned_rate_rps"] == pytest.approx(0.8 * full["max_rate_rps"])
    assert full["planned_rate_rps"] == full["max_rate_rps"]
    # less load: lower latency, less throughput
    assert low["mean_tpot_ms"] < full["mean_tpot_ms"] and low["mean_ttft_ms"] <= full["mean_ttft_ms"]
    assert low["output_throughput_per_gpu"] < full["output_throughput_per_gpu"]
    assert low["customer_load"] == pytest.approx(5.0 / full["max_rate_rps"])
    assert full.get("customer_load") is None
    with pytest.raises(ParameterError, match="headroom"):
        PlanQuestion(*args, headroom=1.5)


def test_hazards_are_the_engines_own():
    from servesim.plan.search import hazards_for

    sglang, vllm = hazards_for("sglang"), hazards_for("vllm")
    assert set(sglang) == set(vllm) == set(hazards_for("trtllm")) == {"spec+prefix-cache", "spec+disagg"}
    assert "vLLM" not in sglang["spec+prefix-cache"] and "sglang #" in sglang["spec+prefix-cache"]
    assert "vLLM #43559" in vllm["spec+prefix-cache"] and "sglang" not in vllm["spec+prefix-cache"].lower()
    assert "SGLang #36140" not in vllm["spec+disagg"] and "vLLM #54926" in vllm["spec+disagg"]


def test_the_ranked_table_keeps_ttft_and_tpot_at_100_and_80_columns():
    from servesim.render import text
    from servesim.render.capacity import capacity_text

    pool = {"tp": 2, "workers": 2, "dtype": "fp8"}
    row = {"architecture": "disaggregated", "prefill": pool, "decode": {**pool, "dtype": "bf16"}, "gpus": 8,
           "max_rate_rps": 10.47, "planned_rate_rps": 8.38, "headroom": 0.8, "customer_load": 1.32,
           "output_throughput_per_gpu": 309.0, "tokens_per_s_per_user": 73.7, "mean_ttft_ms": 290.0,
           "mean_tpot_ms": 13.6, "speculation": "eagle3", "speculative_k": 3,
           "dollars_per_million_output_tokens": 8.98, "hazards": ["spec+disagg"],
           "max_num_batched_tokens": 8192, "gpu": "h100-sxm"}
    d = {"model": "llama-3-70b", "gpu": "h100-sxm", "gpus_budget": 8, "engine": "vllm", "isl": 2000,
         "osl": 300,
         "slo_ttft_ms": 800, "slo_tpot_ms": 50, "attainment": 0.9, "kv_dtype": "bf16", "link": "rdma",
         "link_GBps": 50, "usd_per_gpu_hour": 10.0, "price_source": "x", "searched": 41, "confirmed": 1,
         "engine_tried": 1, "ranked": [row], "pareto": [], "hazards": {"spec+disagg": "text"},
         "step_model": "m", "customer_rate_rps": 9.0}
    old = text.WIDTH
    try:
        for width in (100, 80):
            text.WIDTH = width
            out = capacity_text(d)
            head = next(ln for ln in out.splitlines() if ln.strip().startswith("#"))
            for col in ("#", "pools", "req/s", "load", "tok/s/GPU", "TTFT", "TPOT", "spec"):
                assert col in head.split(), (width, head)
            assert ("cap" in head.split()) == (width == 100)  # at 80, the load says it
            table = [ln for ln in out.splitlines() if ln.startswith(("  #", "  1!"))]
            assert len(table) == 2 and table[1].startswith("  1!")  # the hazard mark on the rank
            assert all(len(ln) <= width for ln in out.splitlines()), (width, out)  # prose wrapped too
    finally:
        text.WIDTH = old


def test_the_header_and_the_footer_count_the_same_rows():
    from servesim.render.capacity import capacity_text

    d = {"model": "m", "gpu": "g", "gpus_budget": 8, "engine": "vllm", "isl": 1, "osl": 1, "slo_ttft_ms": 1,
         "slo_tpot_ms": 1, "attainment": 0.9, "kv_dtype": "bf16", "link": "rdma", "link_GBps": 50,
         "usd_per_gpu_hour": None, "price_source": "", "searched": 41, "ranked": [], "pareto": [],
         "hazards": {}}
    from servesim.plan.search import PlanQuestion, _confirmed_note

    note = _confirmed_note(PlanQuestion("llama-3-8b", "h100-sxm", 8, 1, 1, 1.0, 1.0), 7, 0, 10)
    out = capacity_text({**d, **note})
    assert "of the best 10 run through the engine model, 7 confirmed, 3 sustain no rate" in out
    assert "runs the best 10: 7 confirmed, 3 hold no rate that meets the SLOs" in out
    # speculative rows left out are counted alike at the top and the bottom (10 run: 6 kept, 4 left out)
    note = _confirmed_note(PlanQuestion("llama-3-8b", "h100-sxm", 8, 1, 1, 1.0, 1.0), 6, 4, 10)
    out = capacity_text({**d, **note, "confirmed": 6})
    assert "of the best 10 run through the engine model, 6 confirmed, 4 speculative left out" in out
    assert "runs the best 10: 6 confirmed, 4 speculative no faster than without it (left out)" in out
    assert "sustain no rate" not in out and "hold no rate" not in out


def test_the_screen_reports_progress_before_any_row_is_confirmed():
    """``plan`` was silent for seconds before its first progress step (the screen had none): the screen
    now steps once per split priced colocated and once per prefill split and dtype priced
    disaggregated; Llama-3-8B on 2 H100s searches TP1 and TP2 in bf16 and fp8: 2 x (1 + 2) = 6."""
    from servesim.plan.search import PlanQuestion, capacity_plan, screen_steps

    q = PlanQuestion("llama-3-8b", "h100-sxm", 2, 256, 128, 1.0, 0.03, confirm=False)
    steps: list[int] = []
    capacity_plan(q, progress=lambda: steps.append(1))
    assert screen_steps(q) == 6 == len(steps)


def test_the_plan_bar_draws_itself_within_a_second_steps_or_none(monkeypatch):
    import servesim.cli.progress as progress
    from servesim.cli.main import main

    made: list[dict] = []
    real = progress.Progress

    def spy(*a, **kw):  # the bar the capacity plan makes
        made.append(kw)
        return real(*a, **kw)

    monkeypatch.setattr(progress, "Progress", spy)
    assert main(["plan", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "1", "--isl", "256",
                 "--osl", "128", "--slo-ttft-ms", "1000", "--slo-tpot-ms", "30", "--top", "1", "--format",
                 "json"]) == 0
    assert made and made[0]["ticking"] is True and made[0].get("delay_s", 1.0) <= 1.0


def test_headroom_is_refused_outside_a_capacity_plan_and_outside_0_1(capsys):
    from servesim.cli.main import main

    assert main(["plan", "--preset", "rag", "--headroom", "0.8"]) == 2
    assert "--headroom 0.8: applies with --model M --gpu G --gpus N" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "1", "--headroom", "1.2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--headroom" in err and "1.2" in err and "Traceback" not in err
