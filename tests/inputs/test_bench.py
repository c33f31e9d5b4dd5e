"""Reading a points CSV and a saved ``vllm bench serve`` result (servesim.inputs.bench), and the
comparison of a prediction with a measurement (servesim.plan.predict.compare_to_measured)."""

from __future__ import annotations

import json

import pytest

from servesim._checks import InputError
from servesim.inputs.bench import read_bench_result, read_points
from servesim.plan.predict import compare_to_measured


def test_points_parse_numbers_and_keep_going_past_a_bad_row(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("model,gpu,tp,dtype,isl,osl,concurrency,rate\n"
                    "llama-3-8b,h100-sxm,1,bf16,1024,256,16,\n"
                    "llama-3-8b,h100-sxm,two,bf16,1024,256,16,\n"
                    "llama-3-8b,,1,bf16,1024,256,,2.5\n")
    good, bad_int, empty = read_points(path)
    assert good["tp"] == 1 and good["isl"] == 1024 and good["concurrency"] == 16 and good["rate"] is None
    assert good["line"] == 2 and good["engine"] is None
    assert bad_int == {"error": f"{path}:3:3: column 'tp' = 'two' is invalid: must be an integer"}
    assert empty == {"error": f"{path}:4:2: column 'gpu' is empty"}


def test_points_without_a_required_column_are_refused(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("model,gpu,tp,dtype,isl,concurrency\nx,y,1,bf16,10,1\n")
    with pytest.raises(InputError, match=r":1: missing column\(s\) osl"):
        read_points(path)


def test_rate_may_stand_in_for_concurrency(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("model,gpu,tp,dtype,isl,osl,rate\nx,y,1,bf16,10,5,0.5\n")
    (row,) = read_points(path)
    assert row["rate"] == 0.5 and row["concurrency"] is None


def test_bench_result_lengths_from_lists_or_totals(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"model_id": "m", "completed": 4, "input_lens": [100, 101, 102, 103],
                                "total_output_tokens": 1000, "max_concurrency": 8, "request_rate": "inf",
                                "mean_ttft_ms": 50.0, "flag": True, "bad": float("nan")}))
    r = read_bench_result(path)
    assert (r.model, r.isl, r.osl, r.concurrency, r.completed) == ("m", 102, 250, 8, 4)
    assert r.request_rate is None  # "inf" (all at once) is no Poisson rate
    assert r.metrics["mean_ttft_ms"] == 50.0 and "flag" not in r.metrics and "bad" not in r.metrics


def test_bench_result_that_is_not_an_object_is_one_line(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("[1, 2]")
    with pytest.raises(InputError, match="expected a JSON object"):
        read_bench_result(path)
    path.write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        read_bench_result(path)


def test_compare_to_measured_hand_values():
    rows = compare_to_measured({"mean_ttft_ms": 110.0, "p99_tpot_ms": 20.0, "output_throughput": 900.0},
                               {"mean_ttft_ms": 100.0, "output_throughput": 1000.0, "p99_tpot_ms": 0.0})
    got = {r["metric"]: r["relative_error"] for r in rows}
    assert got["mean_ttft_ms"] == pytest.approx(0.10)
    assert got["output_throughput"] == pytest.approx(-0.10)
    assert got["p99_tpot_ms"] is None  # a zero measurement has no relative error
    assert [r["metric"] for r in rows] == ["mean_ttft_ms", "p99_tpot_ms", "output_throughput"]
