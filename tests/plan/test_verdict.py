"""Where a measurement outside its interval points (servesim.plan.verdict.likely_causes): each rule
on hand-made rows."""

from __future__ import annotations

from servesim.plan.verdict import likely_causes

STEP = {"gemm_ms": 5.0, "attention_ms": 0.5, "other_ms": 0.5, "host_ms": 1.0, "total_ms": 6.0,
        "speed_of_light_ms": 4.0}


def _row(metric: str, predicted: float, measured: float, inside: bool = False) -> dict[str, object]:
    return {"metric": metric, "predicted": predicted, "measured": measured,
            "verdict": "inside" if inside else "outside by 10% (above)"}


def test_every_verdict_inside_says_nothing():
    assert likely_causes({"step_at_batch": STEP}, [_row("mean_tpot_ms", 6.0, 6.2, inside=True)], {}) == []


def test_tpot_gap_past_half_again_points_at_the_deployment_both_ways():
    for measured in (9.1, 3.9):  # 9.1 / 6 = 1.52; 6 / 3.9 = 1.54
        causes = likely_causes({"step_at_batch": STEP, "decode_batch": 8.0},
                               [_row("mean_tpot_ms", 6.0, measured)], {"mean_tpot_ms": measured})
        assert "points past the kernels" in causes[0] and "batch 8.0 is priced 6.00 ms" in causes[0]
        assert causes[-1].startswith("to refit the node") and "servesim calibrate" in causes[-1]


def test_small_tpot_gap_is_the_kernels_and_below_light_is_the_hardware():
    slow = likely_causes({"step_at_batch": STEP}, [_row("mean_tpot_ms", 6.0, 8.9)], {"mean_tpot_ms": 8.9})
    assert "slower than the tables" in slow[0]  # 8.9 / 6 = 1.48: under the deployment gap
    light = likely_causes({"step_at_batch": {**STEP, "speed_of_light_ms": 4.5}},
                          [_row("mean_tpot_ms", 6.0, 4.2)], {"mean_tpot_ms": 4.2})
    assert "below the step's speed of light" in light[0]  # 6 / 4.2 = 1.43, and 4.2 < 4.5


def test_chunked_itl_points_at_speculation_unless_predicted():
    rows = [_row("mean_tpot_ms", 10.0, 17.3, inside=True), _row("mean_itl_ms", 10.0, 48.7)]
    measured = {"mean_tpot_ms": 17.3, "mean_itl_ms": 48.7}  # 48.7 / 17.3 = 2.8 >= 1.3
    assert "several tokens a chunk" in likely_causes({"step_at_batch": STEP}, rows, measured)[0]
    with_spec = likely_causes({"step_at_batch": STEP, "speculation": {"method": "eagle3"}}, rows, measured)
    assert "several tokens a chunk" not in with_spec[0]


def test_ttft_alone_is_the_prefill_and_the_wait():
    causes = likely_causes({"step_at_batch": STEP}, [_row("mean_ttft_ms", 100.0, 160.0),
                                                     _row("mean_tpot_ms", 6.0, 6.1, inside=True)], {})
    assert causes[0].startswith("TTFT only") and len(causes) == 2
