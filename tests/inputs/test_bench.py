"""Reading a points CSV and a saved ``vllm bench serve`` result (servesim.inputs.bench), and the
comparison of a prediction with a measurement (servesim.plan.predict.compare_to_measured)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servesim._checks import InputError
from servesim.inputs.bench import read_bench_result, read_point_rows
from servesim.plan.predict import compare_to_measured


def test_points_parse_numbers_and_keep_going_past_a_bad_row(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("model,gpu,tp,dtype,isl,osl,concurrency,rate\n"
                    "llama-3-8b,h100-sxm,1,bf16,1024,256,16,\n"
                    "llama-3-8b,h100-sxm,two,bf16,1024,256,16,\n"
                    "llama-3-8b,,1,bf16,1024,256,,2.5\n")
    good, bad_int, empty = read_point_rows(path)
    assert good["tp"] == 1 and good["isl"] == 1024 and good["concurrency"] == 16 and good["rate"] is None
    assert good["line"] == 2 and good["engine"] is None
    assert bad_int == {"error": f"{path}:3:3: column 'tp' = 'two' is invalid: must be an integer"}
    assert empty == {"error": f"{path}:4:2: column 'gpu' is empty"}


def test_points_without_a_required_column_are_refused(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("model,gpu,tp,dtype,isl,concurrency\nx,y,1,bf16,10,1\n")
    with pytest.raises(InputError, match=r":1: missing column\(s\) osl"):
        read_point_rows(path)


def test_rate_may_stand_in_for_concurrency(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("model,gpu,tp,dtype,isl,osl,rate\nx,y,1,bf16,10,5,0.5\n")
    (row,) = read_point_rows(path)
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


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_sglang_jsonl_reads_its_last_run_under_vllms_names():
    # the last of five lines of examples/sglang_bench_serving.jsonl, values read by hand
    r = read_bench_result(EXAMPLES / "sglang_bench_serving.jsonl")
    assert (r.record, r.records, r.client) == (5, 5, "sglang")
    assert (r.engine, r.engine_recorded) == ("sglang", "sglang")
    assert (r.request_rate, r.completed, r.concurrency, r.model) == (16.0, 3200, None, None)
    # random dataset: the client's nominal lengths and ratio, not the mean tokens (1,629,242 / 3,200 = 509)
    assert (r.isl, r.osl, r.random_range_ratio) == (1024, 1024, 0.0)
    assert r.metrics["median_ttft_ms"] == 1292.0442644972354
    assert r.metrics["mean_e2el_ms"] == 154144.70748483183  # SGLang's mean_e2e_latency_ms
    assert r.metrics["median_e2el_ms"] == 163510.83913911134
    assert "mean_ttft_ms" not in r.metrics  # that version wrote no mean TTFT


def test_sglang_jsonl_bad_line_is_named(tmp_path):
    path = tmp_path / "runs.jsonl"
    line = json.dumps({"backend": "sglang-oai", "total_output_tokens_retokenized": 10, "completed": 2,
                       "total_input_tokens": 200, "total_output_tokens": 20, "dataset_name": "sharegpt"})
    path.write_text(f"{line}\n{{oops\n")
    with pytest.raises(InputError, match=r"runs\.jsonl:2: not valid JSON"):
        read_bench_result(path)
    path.write_text(f"{line}\n\n{line}\n")
    r = read_bench_result(path)
    # not the random dataset: the mean tokens (200 / 2, 20 / 2); the OpenAI route of an SGLang server
    assert (r.record, r.records, r.isl, r.osl, r.engine) == (2, 2, 100, 10, "sglang")


def test_inferencemax_record_in_ms_and_whole_deployment_throughput():
    r = read_bench_result(EXAMPLES / "inferencemax_agg_result.json")
    assert (r.client, r.engine, r.gpu, r.model) == ("inferencemax", "vllm", "mi355x", "moonshotai/Kimi-K2.5")
    assert r.deployment == {"tp": 8, "ep": 1, "dtype": "int4", "spec": "mtp"}  # dp_attention "false"
    assert (r.isl, r.osl, r.concurrency, r.request_rate, r.completed) == (1024, 1024, 4, None, None)
    assert r.metrics["mean_ttft_ms"] == pytest.approx(1000 * 0.3170863160688896, rel=1e-15)
    assert r.metrics["p99.9_itl_ms"] == pytest.approx(1000 * 0.2516422391461674, rel=1e-15)
    # process_result.py divides by tp = 8
    assert r.metrics["output_throughput"] == pytest.approx(8 * 27.678011491816765, rel=1e-15)
    assert r.metrics["total_token_throughput"] == pytest.approx(8 * 55.62670336516291, rel=1e-15)
    assert "mean_intvty" not in r.metrics and "mean_ttft" not in r.metrics


def test_inferencemax_dp_attention_and_multinode_pools(tmp_path):
    path = tmp_path / "agg.json"
    base = {"hw": "h200", "conc": 64, "framework": "dynamo-trt", "precision": "fp8", "spec_decoding": "none",
            "model": "deepseek-ai/DeepSeek-R1-0528", "isl": 8192, "osl": 1024, "mean_ttft": 2.0}
    path.write_text(json.dumps({**base, "disagg": False, "tp": 8, "ep": 8, "dp_attention": "true",
                                "tput_per_gpu": 100.0, "output_tput_per_gpu": 10.0}))
    r = read_bench_result(path)
    # attention DP over 8 GPUs: servesim's tp 1, dp 8; no speculation recorded as none
    assert r.deployment == {"tp": 1, "dp": 8, "ep": 8, "dtype": "fp8"} and r.engine == "trtllm"
    assert r.metrics["total_token_throughput"] == 800.0 and r.metrics["mean_ttft_ms"] == 2000.0
    path.write_text(json.dumps({**base, "disagg": True, "is_multinode": True, "prefill_tp": 4,
                                "prefill_ep": 4, "prefill_dp_attention": "false", "prefill_num_workers": 2,
                                "decode_tp": 8,
                                "decode_ep": 8, "decode_dp_attention": "true", "decode_num_workers": 1,
                                "num_prefill_gpu": 8, "num_decode_gpu": 8, "tput_per_gpu": 100.0,
                                "output_tput_per_gpu": 50.0}))
    r = read_bench_result(path)
    assert r.deployment == {"mode": "disagg", "prefill_tp": 4, "prefill_ep": 4, "prefill_workers": 2,
                            "decode_tp": 1, "decode_dp": 8, "decode_ep": 8, "decode_workers": 1,
                            "dtype": "fp8"}
    # total over prefill + decode GPUs (16), output over the decode GPUs (8)
    assert (r.metrics["total_token_throughput"], r.metrics["output_throughput"]) == (1600.0, 400.0)
    path.write_text(json.dumps({**base, "tp": 100}))
    with pytest.raises(InputError, match=r"field 'tp' = 100 is invalid"):
        read_bench_result(path)


def test_model_id_hint_reads_a_hugging_face_cache_path():
    from servesim.inputs.bench import model_id_hint

    path = "/models/models--openai--gpt-oss-120b/snapshots/b5c939de8f754692c1647ca79fbf85e8c1e70f8a/"
    assert model_id_hint(path) == "openai/gpt-oss-120b"
    assert model_id_hint("/workspace/models/Qwen/Qwen3-8B") is None


def test_compare_lists_what_an_unstable_prediction_leaves_out():
    rows = compare_to_measured({"stable": False, "median_ttft_ms": None, "output_throughput": 900.0},
                               {"median_ttft_ms": 1292.0, "output_throughput": 1000.0})
    assert [(r["metric"], r["predicted"]) for r in rows] == [("median_ttft_ms", None),
                                                            ("output_throughput", 900.0)]
    assert rows[0]["verdict"].startswith("not predicted")
    # a stable prediction without the metric lists nothing for it
    assert [r["metric"] for r in compare_to_measured({"output_throughput": 900.0},
                                                     {"median_ttft_ms": 1.0, "output_throughput": 1.0})] == [
        "output_throughput"]
