"""``disagg --model``: each mix's colocated and disaggregated TTFT and TPOT carry a prediction interval
(issue 48 item 3), from the engine model's out-of-sample errors at the load each node holds."""

from __future__ import annotations

import json

from servesim.cli.main import main
from servesim.plan.interval import prediction_interval
from servesim.plan.lab_model import add_disagg_intervals


def _data(rate: float) -> dict:
    side = {"ttft_ms": 100.0, "tpot_ms": 10.0, "stable": True}
    return {"workload": {"rate_per_s": rate},
            "rows": [{"mix": "own", "output_tokens": 100,
                      "colocated": {**side, "nodes": 4},
                      "disaggregated": {**side, "prefill_nodes": 2, "decode_nodes": 2}}]}


def test_the_band_is_each_nodes_requests_in_flight_by_littles_law():
    # colocated: 8 req/s over 4 nodes = 2/s, each request 100 + 99 x 10 = 1,090 ms: 2.18 in flight (light);
    # 120 req/s: 30/s x 1.09 s = 32.7 (medium); the decode pool's 2 nodes hold twice that: 65.4 (heavy)
    light = add_disagg_intervals(_data(8.0), level=0.8, engine="vllm", moe=False, fallback=False)["rows"][0]
    assert "light load" in light["colocated"]["prediction_interval"]["basis"]
    mid = add_disagg_intervals(_data(120.0), level=0.8, engine="vllm", moe=False, fallback=False)["rows"][0]
    assert "medium load" in mid["colocated"]["prediction_interval"]["basis"]
    assert "heavy load" in mid["disaggregated"]["prediction_interval"]["basis"]
    # the same interval predict would give a prediction of these figures at that load
    want = prediction_interval({"mean_ttft_ms": 100.0, "mean_tpot_ms": 10.0}, level=0.8, engine="vllm",
                               moe=False, in_flight=32.7, fallback=False)
    got = mid["colocated"]["prediction_interval"]
    assert got["mean_ttft_ms"] == want["mean_ttft_ms"] and got["mean_tpot_ms"] == want["mean_tpot_ms"]
    assert "output_throughput" not in got  # the closed form gives no throughput to bound


def test_a_wider_level_holds_the_narrower_and_a_fallback_widens():
    rows = {lv: add_disagg_intervals(_data(8.0), level=lv, engine="sglang", moe=True,
                                     fallback=False)["rows"][0] for lv in (0.5, 0.9)}
    for key in ("mean_ttft_ms", "mean_tpot_ms"):
        lo5, hi5 = rows[0.5]["colocated"]["prediction_interval"][key]
        lo9, hi9 = rows[0.9]["colocated"]["prediction_interval"][key]
        assert lo9 <= lo5 < hi5 <= hi9
    wide = add_disagg_intervals(_data(8.0), level=0.8, engine="sglang", moe=True, fallback=True)["rows"][0]
    base = add_disagg_intervals(_data(8.0), level=0.8, engine="sglang", moe=True, fallback=False)["rows"][0]
    lo_w, hi_w = wide["colocated"]["prediction_interval"]["mean_ttft_ms"]
    lo_b, hi_b = base["colocated"]["prediction_interval"]["mean_ttft_ms"]
    assert hi_w / lo_w > hi_b / lo_b
    assert "widened" in wide["colocated"]["prediction_interval"]["basis"]


def test_disagg_model_json_and_text(capsys):
    args = ["disagg", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "4"]
    assert main([*args, "--format", "json", "--interval-level", "0.6"]) == 0
    d = json.loads(capsys.readouterr().out)
    for row in d["rows"]:
        for side in ("colocated", "disaggregated"):
            pi = row[side]["prediction_interval"]
            assert pi["level"] == 0.6 and pi["mean_ttft_ms"][0] < pi["mean_ttft_ms"][1]
            assert "closed form" in pi["basis"]
    assert main(args) == 0
    assert "80% prediction interval of the own mix" in capsys.readouterr().out  # the default level
    # the lab's own node has no engine model behind it: no interval
    assert main(["disagg", "--format", "json"]) == 0
    assert "prediction_interval" not in capsys.readouterr().out


def test_plan_rows_carry_the_asked_level():
    """``plan --interval-level``: each confirmed row's interval at that level; outside (0, 1) refused."""
    import pytest

    from servesim._checks import ParameterError
    from servesim.plan.search import PlanQuestion, capacity_plan

    q = PlanQuestion("llama-3-8b", "h100-sxm", 1, 512, 128, 0.5, 0.03, confirm_top=1, interval_level=0.6)
    row = capacity_plan(q)["ranked"][0]
    pi = row["prediction_interval"]
    assert pi["level"] == 0.6
    lo, hi = pi["mean_tpot_ms"]
    assert lo < hi
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ParameterError, match="interval_level"):
            PlanQuestion("llama-3-8b", "h100-sxm", 1, 512, 128, 0.5, 0.03, interval_level=bad)
