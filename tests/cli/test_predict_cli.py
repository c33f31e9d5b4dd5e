"""``servesim predict``: the JSON contract, aliases, bad input, --points, --compare and --spec.

Most runs are in-process (``servesim.cli.main.main`` with capsys); the JSON contract and one bad
input also run in a subprocess, the way a user runs them.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from servesim.cli.main import main
from servesim.plan.predict import COMPARED_KEYS
from tests.cli_helpers import ROOT, run_cli

HF_CONFIGS = ROOT / "tests" / "fixtures" / "hf_configs"

CONTRACT = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm", "--tp", "1",
            "--dtype", "bf16", "--isl", "512", "--osl", "128", "--concurrency", "8"]
KEYS = ("mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "output_throughput",
        "request_throughput", "output_throughput_per_gpu", "decode_batch", "max_concurrency",
        "kv_max_requests", "duration", "total_token_throughput",
        "median_itl_ms", "p99_itl_ms")
SMALL = ["--isl", "256", "--osl", "16", "--concurrency", "2"]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``servesim predict ARGS`` in-process: (exit status, stdout, stderr)."""
    try:
        rc = main(["predict", *args])
    except SystemExit as exc:  # argparse errors exit from the parser
        rc = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return rc, out, err


def _json(capsys: pytest.CaptureFixture[str], *args: str):
    rc, out, err = _run(capsys, *args, "--format", "json")
    assert rc == 0, err
    assert err == ""
    return json.loads(out)


def _one_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    """:func:`_json` of a single prediction (the object, not a list of one)."""
    out = _json(capsys, *args)
    return out[0] if isinstance(out, list) else out


# DeepSeek-R1 on 8 x B200, 1k/1k at 4 clients, InferenceMAX's client and its MTP
_MTP_B200_4 = ("--model", "deepseek-ai/DeepSeek-R1-0528", "--gpu", "b200", "--tp", "8", "--isl", "1024",
               "--osl", "1024", "--concurrency", "4", "--client", "inferencemax", "--spec", "mtp")


def _check_keys(d: dict) -> None:
    for k in KEYS:
        assert isinstance(d[k], (int, float)) and not isinstance(d[k], bool), k
        assert math.isfinite(d[k]) and d[k] > 0, (k, d[k])
    assert d["p99_ttft_ms"] >= d["mean_ttft_ms"] * (1 - 1e-12)  # equal up to rounding when all equal


# --------------------------------------------------------------------------- the JSON contract


def test_json_contract_in_a_subprocess():
    res = run_cli("predict", *CONTRACT, "--format", "json")
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    d = json.loads(res.stdout)
    assert isinstance(d, dict)
    _check_keys(d)
    assert d["model"] == "llama-3-8b" and d["gpu"] == "h100-sxm" and d["tp"] == 1 and d["gpus"] == 1
    assert d["concurrency"] == 8 and d["num_prompts"] == 80 and d["completed"] == 80
    assert d["output_throughput_per_gpu"] == d["output_throughput"]  # one GPU
    assert d["decode_batch"] <= 8
    assert d["max_concurrency"] == 8 and d["request_rate"] == "inf"  # vllm bench serve's meanings
    assert d["kv_max_requests"] >= 8 and d["preemptions"] == 0 and d["above_kv_limit"] == ""
    # Throughput is the tokens of the run over its duration (seconds, as vLLM writes it).
    assert d["output_throughput"] == pytest.approx(80 * 128 / d["duration"], rel=1e-9)
    assert d["total_output_tokens"] == 80 * 128 and d["total_input_tokens"] == 80 * 512
    assert d["total_token_throughput"] == pytest.approx(80 * 640 / d["duration"], rel=1e-9)
    assert d["client"] == "vllm" and d["random_range_ratio"] == 0 and d["scheduler"]["scheduler"] == "vllm"
    assert d["mean_itl_ms"] == pytest.approx(d["mean_tpot_ms"], rel=0.05)


def test_json_per_gpu_throughput_divides_by_tp(capsys):
    d = _json(capsys, "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "4", *SMALL)
    _check_keys(d)
    assert d["gpus"] == 4
    assert d["output_throughput_per_gpu"] == pytest.approx(d["output_throughput"] / 4, rel=1e-12)


def test_table_and_csv_formats(capsys):
    rc, out, err = _run(capsys, *CONTRACT)
    assert rc == 0 and err == ""
    assert out.startswith("PREDICT  llama-3-8b on 1 x h100-sxm") and "TTFT" in out and "TPOT" in out
    rc, out, err = _run(capsys, *CONTRACT, "--format", "csv")
    assert rc == 0 and err == ""
    lines = out.strip().splitlines()
    assert len(lines) == 2 and all(k in lines[0].split(",") for k in KEYS)


@pytest.mark.parametrize("alias", ["h100_sxm", "H100", "nvidia-h100-sxm-80gb"])
def test_gpu_alias_gives_identical_output(capsys, alias):
    base = _run(capsys, *CONTRACT, "--format", "json")
    args = list(CONTRACT)
    args[args.index("h100-sxm")] = alias
    other = _run(capsys, *args, "--format", "json")
    assert base[0] == other[0] == 0
    assert other[1] == base[1]


# --------------------------------------------------------------------------- bad input


def _one_line_exit_2(rc: int, out: str, err: str, *fragments: str) -> str:
    assert rc == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


BAD = {
    "fp4-on-hopper": (["--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "4", "--dtype", "fp4", *SMALL],
                      ["dtype", "'fp4'", "bf16, fp8"]),
    "tp-3-70b": (["--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "3", *SMALL],
                 ["tp=3", "1, 2, 4, 8, 16, 32, 64"]),
    "concurrency-0": (["--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "256", "--osl", "16",
                       "--concurrency", "0"], ["--concurrency", "'0'"]),
    "405b-on-one-h100": (["--model", "llama-3-405b", "--gpu", "h100-sxm", "--tp", "1", *SMALL],
                         ["tp=1", "llama-3-405b", "GiB"]),
    "unknown-model": (["--model", "llama-3-8bb", "--gpu", "h100-sxm", *SMALL],
                      ["model=", "'llama-3-8bb'", "close matches: llama-3-8b"]),
    "unknown-hf-id": (["--model", "meta-llama/Llama-3.1-8B-Instruc", "--gpu", "h100-sxm", *SMALL],
                      ["'meta-llama/Llama-3.1-8B-Instruc'", "meta-llama/Llama-3.1-8B-Instruct"]),
    "unknown-gpu": (["--model", "llama-3-8b", "--gpu", "h1000", *SMALL], ["gpu=", "'h1000'", "h100-sxm"]),
    "no-load": (["--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "256", "--osl", "16"],
                ["--concurrency", "--rate"]),
    "kv-fp8-on-a100": (["--model", "llama-3-8b", "--gpu", "a100-80gb", "--kv-dtype", "fp8", *SMALL],
                       ["kv_dtype", "'fp8'"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2(capsys, case):
    args, fragments = BAD[case]
    _one_line_exit_2(*_run(capsys, *args), "servesim predict: error:", *fragments)


def test_malformed_config_json_fixture(capsys):
    path = str(HF_CONFIGS / "malformed.json")  # hidden_size = -1
    _one_line_exit_2(*_run(capsys, "--model", path, "--gpu", "h100-sxm", *SMALL), path, "hidden_size", "-1")


def test_config_json_that_is_not_json(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 4096,')
    _one_line_exit_2(*_run(capsys, "--model", str(path), "--gpu", "h100-sxm", *SMALL), str(path), "JSON")


def test_missing_config_json(capsys, tmp_path):
    path = str(tmp_path / "nope" / "config.json")
    _one_line_exit_2(*_run(capsys, "--model", path, "--gpu", "h100-sxm", *SMALL), path)


def test_valid_config_json_predicts_like_the_catalog_model(capsys):
    path = str(HF_CONFIGS / "llama-3.1-8b.json")
    d = _json(capsys, "--model", path, "--gpu", "h100-sxm", *SMALL)
    ref = _json(capsys, "--model", "llama-3-8b", "--gpu", "h100-sxm", *SMALL)
    _check_keys(d)
    assert d["mean_tpot_ms"] == pytest.approx(ref["mean_tpot_ms"], rel=0.02)


def test_bad_input_in_a_subprocess_has_no_traceback():
    res = run_cli("predict", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "3", *SMALL)
    _one_line_exit_2(res.returncode, res.stdout, res.stderr, "tp=3")


# --------------------------------------------------------------------------- --points

POINTS = (
    "model,gpu,tp,dtype,isl,osl,concurrency\n"
    "llama-3-8b,h100-sxm,1,bf16,256,16,2\n"
    "llama-3-70b,h100-sxm,3,bf16,256,16,2\n"
    "llama-3-70b,h100_sxm,4,fp8,256,16,2\n"
)


def _points(capsys, path: Path) -> list:
    data = _json(capsys, "--points", str(path))
    assert isinstance(data, list)
    return data


def test_points_one_bad_row_among_three(capsys, tmp_path):
    path = tmp_path / "sweep.csv"
    path.write_text(POINTS)
    rows = _points(capsys, path)
    assert len(rows) == 3
    assert set(rows[1]) == {"error"}
    assert str(path) in rows[1]["error"] and ":3:3: column 'tp' = 3 is invalid" in rows[1]["error"]
    for r in (rows[0], rows[2]):
        _check_keys(r)
    assert (rows[0]["model"], rows[0]["tp"], rows[0]["dtype"]) == ("llama-3-8b", 1, "bf16")
    assert (rows[2]["model"], rows[2]["tp"], rows[2]["dtype"], rows[2]["gpu"]) == (
        "llama-3-70b", 4, "fp8", "h100-sxm")
    # A row predicts what the same flags predict.
    direct = _json(capsys, "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "4", "--dtype", "fp8",
                   *SMALL)
    assert rows[2] == direct
    # The table says which row failed, in order.
    rc, out, _ = _run(capsys, "--points", str(path))
    assert rc == 0
    lines = out.splitlines()
    assert lines[1].split()[:2] == ["1", "llama-3-8b"] and lines[2].split()[:2] == ["2", "error:"]
    assert lines[3].split()[:2] == ["3", "llama-3-70b"]


def test_points_missing_column_is_exit_2_naming_it(capsys, tmp_path):
    path = tmp_path / "sweep.csv"
    path.write_text("model,gpu,tp,dtype,isl,concurrency\nllama-3-8b,h100-sxm,1,bf16,256,2\n")
    line = _one_line_exit_2(*_run(capsys, "--points", str(path)), str(path), "osl")
    assert "missing column" in line


def test_points_unknown_column_is_refused_naming_it_and_the_known_ones(capsys, tmp_path):
    path = tmp_path / "sweep.csv"
    path.write_text("model,gpu,tp,dtype,isl,osl,concurrency,spec_method\nllama-3-8b,h100-sxm,1,bf16,256,16,2,x\n")
    line = _one_line_exit_2(*_run(capsys, "--points", str(path)), str(path), "spec_method")
    assert "unknown column" in line and "random_range_ratio" in line


def test_points_take_the_client_and_engine_flags_as_columns(capsys, tmp_path):
    path = tmp_path / "sweep.csv"
    path.write_text(
        "model,gpu,tp,dtype,random_input_len,random_output_len,max_concurrency,engine,client,"
        "random_range_ratio,num_prompts,num_warmups,request_rate,burstiness,chunked_prefill_size,mean_tpot_ms\n"
        "llama-3-8b,h100-sxm,1,bf16,256,16,2,sglang,inferencemax,0.5,20,4,inf,,4096,10\n"
        "llama-3-8b,h100-sxm,1,bf16,256,16,2,vllm,vllm,,20,,,,4096,\n"
        "llama-3-8b,h100-sxm,1,bf16,256,16,2,vllm,vllm,1.0,20,,,,,\n")
    rows = _points(capsys, path)
    a = rows[0]
    assert a["engine"] == "sglang" and a["client"] == "inferencemax" and a["random_range_ratio"] == 0.5
    assert a["num_prompts"] == 20 and a["num_warmups"] == 4 and a["max_concurrency"] == 2
    assert a["scheduler"]["token_budget"] == 4096
    assert a["comparison"][0]["metric"] == "mean_tpot_ms" and a["comparison"][0]["measured"] == 10
    # Only that row errs: an SGLang flag on a vLLM row, a range ratio vLLM refuses.
    assert ":3:15: column 'chunked_prefill_size' = 4096" in rows[1]["error"]
    assert "random_range_ratio" in rows[2]["error"] and "[0, 1)" in rows[2]["error"]


def test_points_bad_cell_is_an_error_row(capsys, tmp_path):
    path = tmp_path / "sweep.csv"
    path.write_text("model,gpu,tp,dtype,isl,osl,concurrency\nllama-3-8b,h100-sxm,1,bf16,many,16,2\n")
    rows = _points(capsys, path)
    assert len(rows) == 1 and ":2:" in rows[0]["error"] and "isl" in rows[0]["error"]


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
def test_points_with_a_bom_or_in_utf16(capsys, tmp_path, encoding):
    plain = tmp_path / "plain.csv"
    plain.write_text(POINTS)
    other = tmp_path / f"{encoding}.csv"
    other.write_bytes(POINTS.replace("\n", "\r\n").encode(encoding))  # as Excel on Windows saves it
    assert other.read_bytes()[:2] in (b"\xef\xbb", b"\xff\xfe", b"\xfe\xff")
    a, b = _points(capsys, plain), _points(capsys, other)
    assert len(b) == 3 and "model" in b[0] and "error" in b[1]
    assert [r for r in b if "error" not in r] == [r for r in a if "error" not in r]


# --------------------------------------------------------------------------- --compare

MEASURED = {
    "mean_ttft_ms": 95.0, "median_ttft_ms": 90.0, "p99_ttft_ms": 150.0,
    "mean_tpot_ms": 8.0, "median_tpot_ms": 7.9,
    "mean_itl_ms": 8.1, "output_throughput": 900.0, "request_throughput": 7.0,
}


def _result_file(tmp_path: Path) -> Path:
    res = {
        "date": "20250101-000000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct", "num_prompts": 80, "request_rate": "inf",
        "burstiness": 1.0, "max_concurrency": 8, "duration": 11.4, "completed": 80,
        "total_input_tokens": 80 * 512, "total_output_tokens": 80 * 128,
        "p99_tpot_ms": None,  # not measured: must not be compared
        **MEASURED,
    }
    path = tmp_path / "vllm-result.json"
    path.write_text(json.dumps(res))
    return path


def test_compare_lists_predicted_vs_measured_and_predicts_the_same_run(capsys, tmp_path):
    path = _result_file(tmp_path)
    data = _json(capsys, "--compare", str(path), "--gpu", "h100-sxm")
    direct = _json(capsys, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm",
                   "--tp", "1", "--dtype", "bf16", "--isl", "512", "--osl", "128", "--concurrency", "8",
                   "--num-prompts", "80")
    # the launch commands spell the file's unstated dtype as vLLM's --dtype auto (the checkpoint's bf16)
    assert {k: v for k, v in data["prediction"].items() if k != "deploy"} == {
        k: v for k, v in direct.items() if k != "deploy"}
    shared = [k for k in COMPARED_KEYS if k in MEASURED]
    assert [r["metric"] for r in data["comparison"]] == shared
    for r in data["comparison"]:
        assert r["predicted"] == direct[r["metric"]]
        assert r["measured"] == MEASURED[r["metric"]]
        assert r["relative_error"] == pytest.approx((r["predicted"] - r["measured"]) / r["measured"])
    rc, out, err = _run(capsys, "--compare", str(path), "--gpu", "h100-sxm")
    assert rc == 0 and err == ""
    assert "p99_tpot_ms" not in out
    for key in shared:
        row = next(line for line in out.splitlines() if line.split()[:1] == [key])
        assert f"{MEASURED[key]:,.2f}" in row and f"{direct[key]:,.2f}" in row


def test_compare_needs_a_gpu_and_json(capsys, tmp_path):
    path = _result_file(tmp_path)
    _one_line_exit_2(*_run(capsys, "--compare", str(path)), "--gpu")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _one_line_exit_2(*_run(capsys, "--compare", str(bad), "--gpu", "h100-sxm"), str(bad), "JSON")


# --------------------------------------------------------------------------- --spec

SPEC_CASES = [
    pytest.param(["--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp", "1"], id="8b-h100-tp1"),
    pytest.param(["--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8"], id="70b-h100-tp8"),
]


@pytest.mark.parametrize("model", SPEC_CASES)
def test_spec_eagle3_reports_its_setting_and_lowers_tpot(capsys, model):
    load = ["--isl", "512", "--osl", "64", "--concurrency", "1", "--num-prompts", "3"]
    plain = _json(capsys, *model, *load)
    spec = _json(capsys, *model, *load, "--spec", "eagle3")
    assert "speculation" not in plain
    s = spec["speculation"]
    assert s["preset"] == "eagle3" and s["batch"] == 1 and s["acceptance"].startswith("preset")
    assert isinstance(s["k"], int) and s["k"] >= 1
    assert s["d"] > 0
    assert 0 < s["alpha"] < 1
    assert spec["mean_tpot_ms"] < plain["mean_tpot_ms"]
    # c is measured, not assumed: cuBLAS runs a 1-row GEMM slower than a few rows (e.g. gate/up
    # n=7168 k=8192 on H100: 0.0497 ms at m=1, 0.0434 ms at m=8), so a k+1-wide verify can cost a
    # hair less than a plain batch-1 step; it can never cost much less.
    assert s["c"] > -0.1


def test_spec_with_fixed_k(capsys):
    d = _json(capsys, "--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "512", "--osl", "32",
              "--concurrency", "1", "--num-prompts", "2", "--spec", "eagle3", "--k", "2")
    assert d["speculation"]["k"] == 2


# --------------------------------------------------------------------------- MoE models


def test_moe_model_predicts_with_its_parallelism(capsys):
    d = _json(capsys, "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--tp", "8",
              "--isl", "1024", "--osl", "256", "--concurrency", "16", "--num-prompts", "32")
    assert d["model"] == "deepseek-r1" and d["dtype"] == "fp8_block"  # the checkpoint's own
    assert d["tp"] == 8 and d["dp"] == 1 and d["ep"] == 1 and d["gpus"] == 8
    assert d["completed"] == 32 and d["mean_tpot_ms"] > d["batch1_step_ms"] * 0.9
    dp = _json(capsys, "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--tp", "1", "--dp", "8",
               "--ep", "8", "--isl", "1024", "--osl", "256", "--concurrency", "16", "--num-prompts", "32")
    assert dp["gpus"] == 8 and dp["kv_capacity_tokens"] > 4 * d["kv_capacity_tokens"]


@pytest.mark.parametrize(("args", "fragments"), [
    (["--model", "llama-3-8b", "--gpu", "h100-sxm", "--dp", "2"], ("dp=2", "dense model")),
    # a name it does not know is refused as unknown, with or without --ep, never as a dense model
    (["--model", "nvidia/NoSuchModel-R1", "--gpu", "b200", "--tp", "8", "--ep", "8"],
     ("model='nvidia/NoSuchModel-R1'", "must be a catalog model")),
    (["--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h100-sxm", "--tp", "8"], ("fit", "GPUs would hold")),
    # 626.9 GiB of block-FP8 weights on one GPU, 67.6 GiB of room a GPU: 626.9 / 67.6 = 9.3 -> 10 GPUs
    (["--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h100-sxm", "--tp", "1", "--dtype", "fp8"],
     ("626.9 GiB per GPU on 1 GPU,", "leaves at most 67.6 GiB", "at least 10 GPUs would hold it")),
    # 69.4 GiB of int4 weights a GPU on an 80 GB H100: vLLM's 0.9 of HBM less its reserve leaves 67.6
    (["--model", "moonshotai/Kimi-K2.5", "--gpu", "h100-sxm", "--tp", "8"],
     ("needs 69.4 GiB", "vllm leaves at most 67.6 GiB for weights", "memory fraction 0.9")),
    (["--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--tp", "8", "--ep", "3"], ("ep=3", "divisor")),
    # block FP8 loads only in whole 128-row scale blocks a rank: 1536 / 8 = 192 (vLLM, SGLang fp8.py)
    (["--model", "MiniMaxAI/MiniMax-M2.5", "--gpu", "h200", "--tp", "8"],
     ("ep=1", "1536 / MoE TP 8 = 192", "ep 2, 4, 8 would load")),
    (["--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--tp", "8", "--dp", "4"],
     ("2048 / MoE TP 32 = 64", "ep 2, 4, 8, 16, 32 would load")),
])
def test_moe_bad_parallelism_is_one_line_exit_2(capsys, args, fragments):
    _one_line_exit_2(*_run(capsys, *args, "--isl", "128", "--osl", "16", "--concurrency", "2"), *fragments)


def test_roofline_shows_where_an_moe_step_goes():
    res = run_cli("roofline", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--tp", "8")
    assert res.returncode == 0, res.stderr
    assert "fp8_block weights" in res.stdout and "priced by the measured-kernel step model" in res.stdout


def test_roofline_splits_an_moe_step_into_gemm_moe_attention_and_communication(capsys):
    """For a mixture-of-experts model the MoE layers get their own column, taken out of the GEMMs:
    their share is exactly the MoE operations' time, the columns still add up to the GPU's time, and
    a dense model's table keeps its layout (no MoE column)."""
    assert main(["roofline", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--tp", "1", "--dp", "8",
                 "--ep", "8", "--engine", "sglang", "--batch", "8", "256", "--format", "json"]) == 0
    measured = json.loads(capsys.readouterr().out)["measured"]
    for row in measured["rows"]:
        ops = measured["operations"].get(str(row["batch"]))
        if ops is not None:
            moe = sum(o["ms"] for o in ops if o["kind"] in ("moe", "two_streams"))
            assert row["moe_ms"] == pytest.approx(moe, rel=1e-9)
            gpu = sum(o["ms"] for o in ops)
            assert gpu == pytest.approx(sum(row[k] for k in ("gemm_ms", "attention_ms", "allreduce_ms",
                                                             "other_ms")), rel=1e-9)
        assert 0 < row["moe_ms"] < row["gemm_ms"]  # the MoE layers, and GEMMs besides (MLA, LM head)
    rows = measured["rows"]
    assert rows[1]["moe_ms"] > rows[0]["moe_ms"]  # 32x the tokens reach more experts
    assert main(["roofline", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--tp", "1", "--dp", "8",
                 "--ep", "8", "--engine", "sglang", "--batch", "8", "256"]) == 0
    text = capsys.readouterr().out
    head = next(line for line in text.splitlines() if line.strip().startswith("batch  step ms"))
    assert head.split() == ["batch", "step", "ms", "GEMM", "MoE", "attn", "comm", "other", "host", "light",
                            "tok/s", "measured"]
    line8 = next(line for line in text.splitlines() if line.split()[:1] == ["8"])
    cells = line8.split()
    assert float(cells[3]) == pytest.approx(rows[0]["moe_ms"], abs=0.006)
    assert float(cells[2]) == pytest.approx(rows[0]["gemm_ms"] - rows[0]["moe_ms"], abs=0.006)
    assert main(["roofline", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8", "--batch", "8"]) == 0
    dense = capsys.readouterr().out
    assert " MoE " not in dense and " allred " in dense


def test_inferencemax_client_takes_its_trtllm_recipe_budget_unless_given(capsys):
    # InferenceMAX's TensorRT-LLM recipe: --max_num_tokens = 64 ceil((C + ISL + 64) / 64) = 8,320 for
    # 8k prompts at 64 clients; an explicit --max-num-tokens wins; another client keeps 8,192.
    base = ("--model", "deepseek-ai/DeepSeek-R1-0528", "--gpu", "b200", "--tp", "8", "--dtype",
            "fp4", "--engine", "trtllm", "--isl", "8192", "--osl", "64", "--concurrency", "64",
            "--num-prompts", "64", "--num-warmups", "0")
    recipe = _json(capsys, *base, "--client", "inferencemax")
    given = _json(capsys, *base, "--client", "inferencemax", "--max-num-tokens", "12288")
    other = _json(capsys, *base, "--client", "vllm")
    assert recipe["max_num_batched_tokens"] == 8320 and recipe["kv_dtype"] == "fp8"
    assert given["max_num_batched_tokens"] == 12288
    assert other["max_num_batched_tokens"] == 8192 and other["kv_dtype"] == "bf16"
    bf16 = _json(capsys, *base, "--client", "inferencemax", "--kv-dtype", "bf16")
    assert bf16["kv_dtype"] == "bf16"  # a KV dtype given wins over the recipe's
    assert recipe["kv_capacity_tokens"] > 1.9 * bf16["kv_capacity_tokens"]  # one byte a value, not two


def test_harness_deployment_reads_the_dtype_as_typed():
    # the recipe is keyed by servesim's dtype name: NVFP4 is fp4 (dsr1_fp4_b200.sh: 256 running, 0.85)
    from servesim.plan.predict import harness_deployment
    from servesim.sim.batching import Benchmark
    from servesim.sim.client import Client

    bench = Benchmark(isl=1024, osl=1024, concurrency=64, client=Client("inferencemax"))
    for typed in ("fp4", "NVFP4"):
        dep = harness_deployment(bench, model="deepseek-ai/DeepSeek-R1-0528", gpu="B200", tp=8,
                                 dtype=typed, engine="sglang")
        assert (dep.max_num_seqs, dep.memory_fraction, dep.kv_dtype) == (256, 0.85, "fp8")
        assert dict(dep.scheduler) == {"scheduler_recv_interval": 30}
    plain = harness_deployment(Benchmark(isl=1024, osl=1024, concurrency=64),
                               model="deepseek-ai/DeepSeek-R1-0528", gpu="b200", tp=8, dtype="fp4",
                               engine="sglang")
    assert (plain.max_num_seqs, plain.memory_fraction, plain.kv_dtype) == (None, None, "bf16")
    assert plain.scheduler == ()


def test_harness_deployment_of_a_disaggregated_pool_takes_its_dynamo_recipe():
    # srt-slurm recipes/trtllm/h200: ctx workers max_batch_size 8, max_num_tokens 8192, no overlap
    # scheduler; a flag the user gives wins
    from servesim.plan.predict import harness_deployment
    from servesim.sim.batching import Benchmark
    from servesim.sim.client import Client

    bench = Benchmark(isl=1024, osl=1024, concurrency=64, client=Client("inferencemax"))
    pre = harness_deployment(bench, model="deepseek-ai/DeepSeek-R1-0528", gpu="h200", tp=8, ep=8, dtype="fp8",
                             engine="trtllm", pool="prefill", workers=1)
    assert (pre.max_num_seqs, pre.max_num_batched_tokens, pre.overlap, pre.kv_dtype) == (8, 8192, False,
                                                                                        "fp8")
    given = harness_deployment(bench, model="deepseek-ai/DeepSeek-R1-0528", gpu="h200", tp=8, ep=8,
                               dtype="fp8", engine="trtllm", pool="prefill", workers=1, overlap=True,
                               max_num_seqs=4)
    assert (given.overlap, given.max_num_seqs) == (True, 4)
    dec = harness_deployment(bench, model="deepseek-ai/DeepSeek-R1-0528", gpu="h200", tp=8, ep=8, dtype="fp8",
                             engine="trtllm", pool="decode", workers=3)
    assert dec.overlap is None and dec.cuda_graph_max_tokens == 32  # 22 clients a worker


def test_disaggregated_predict_with_the_inferencemax_client_uses_the_pools_recipes(capsys):
    rc = main(["predict", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--mode", "disagg",
               "--engine", "trtllm", "--prefill-tp", "8", "--prefill-ep", "8", "--decode-tp", "8",
               "--decode-ep", "8", "--decode-workers", "3", "--isl", "1024", "--osl", "1024",
               "--concurrency", "64", "--client", "inferencemax", "--format", "json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    out = out[0] if isinstance(out, list) else out
    pre, dec = out["prefill"]["scheduler"], out["decode"]["scheduler"]
    assert (pre["token_budget"], pre["max_running"], pre["overlap"]) == (8192, 8, False)
    assert (dec["max_running"], dec["overlap"]) == (2048, True)  # TensorRT-LLM's defaults
    assert out["kv_dtype"] == "fp8"


def test_a_low_latency_dynamo_recipe_caps_each_decode_worker_and_the_text_says_so(capsys):
    # recipes/trtllm/h200/8k1k/stp c1 gen7 b1: seven decode workers of max_batch_size 1, here nine
    # clients: two wait for a slot, which the TTFT holds (decode admission) and the text states
    args = ["--model", "deepseek-ai/DeepSeek-R1-0528", "--gpu", "h200", "--mode", "disagg",
            "--engine", "trtllm", "--dtype", "fp8", "--prefill-tp", "8", "--prefill-ep", "8",
            "--decode-tp", "8", "--decode-ep", "8", "--decode-workers", "7", "--isl", "8192",
            "--osl", "1024", "--concurrency", "9", "--client", "inferencemax"]
    out = _one_json(capsys, *args)
    assert out["decode"]["scheduler"]["max_running"] == 1
    # a request's decode is ~1,023 steps of ~8 ms: the two that wait hold a good part of one
    assert out["mean_decode_wait_ms"] > 300 and out["decode_batch"] <= 1.0
    rc, text, _ = _run(capsys, *args)
    assert rc == 0 and "per decode worker (at most 1 running)" in text


def test_the_inferencemax_client_runs_mtp_at_its_scripts_depth_with_the_acceptance_measured_there(capsys):
    # dsr1_fp4_b200_trt_mtp.sh: num_nextn_predict_layers 3 (no attention DP), --max_batch_size C,
    # --max_num_tokens 64 ceil((4 C + ISL + 64) / 64) = 1,152 at 4 clients and 1k prompts; the
    # acceptance is TensorRT-LLM's own at k = 3 (2.82 tokens a step), not the k = 1 figure's, with
    # its accepted drafts x 0.85 on the client's synthetic traffic: 1 + 0.85 x 1.82 = 2.547
    out = _one_json(capsys, *_MTP_B200_4, "--engine", "trtllm", "--dtype", "fp4")
    assert out["speculation"]["k"] == 3 and out["speculation"]["acceptance_length"] == pytest.approx(2.547)
    assert "mtp synthetic" in out["speculation"]["acceptance"]
    assert (out["max_num_seqs"], out["max_num_batched_tokens"]) == (4, 1152)
    # a k the user gives wins over the recipe's: 1 + 0.85 x 1.58 = 2.343
    out = _one_json(capsys, *_MTP_B200_4, "--engine", "trtllm", "--dtype", "fp4", "--k", "2")
    assert out["speculation"]["k"] == 2 and out["speculation"]["acceptance_length"] == pytest.approx(2.343)
    # and so does a traffic kind: chat takes the measurement as published
    out = _one_json(capsys, *_MTP_B200_4, "--engine", "trtllm", "--dtype", "fp4", "--traffic", "chat")
    assert out["speculation"]["acceptance_length"] == pytest.approx(2.82)


def test_sglangs_mtp_chain_takes_the_acceptance_measured_at_its_depth(capsys):
    # dsr1_fp8_b200_mtp.sh: EAGLE with 2 steps, top-k 1, 3 draft tokens: a chain of 2 drafts, so the
    # k = 2 measurement (2.58 tokens a step; on the client's synthetic traffic 1 + 0.85 x 1.58 =
    # 2.343) grows it, not the k = 1 figure's alpha (2.64)
    spec = _one_json(capsys, *_MTP_B200_4, "--engine", "sglang", "--dtype", "fp8")["speculation"]
    assert spec["tree"] == {"steps": 2, "topk": 1, "draft_tokens": 3}
    assert spec["acceptance_length"] == pytest.approx(2.343) and "MTP 2" in spec["acceptance"]


def test_a_fresh_server_pays_the_engines_fitted_cold_start_once(capsys):
    """InferenceMAX measures a fresh server: on Hopper a block-FP8 model's first wave waits the
    engine's fitted cold start (engines.toml cold_start: SGLang 0.5 s, TensorRT-LLM 1 s), and a fresh
    disaggregated deployment's first KV transfer the connection time (kv_connect_ms: TensorRT-LLM
    3000).  Other
    clients, and GPUs without a fitted value, pay none."""
    from servesim.hardware.engines import engine_profile

    assert engine_profile("sglang", gpu="h200").cold_start_s("fp8_block") == 0.5
    assert engine_profile("trtllm", gpu="h100-sxm").cold_start_s("fp8_block") == 1.0
    assert engine_profile("trtllm", gpu="b200").cold_start_s("fp8_block") == 0.0
    assert engine_profile("sglang", gpu="h200").cold_start_s("fp4") == 0.0
    assert engine_profile("vllm", gpu="h200").cold_start_s("fp8_block") == 0.0
    base = ("--model", "deepseek-ai/DeepSeek-R1", "--tp", "8", "--engine", "sglang", "--isl", "1024",
            "--osl", "32", "--concurrency", "4", "--num-prompts", "40")
    cold = _json(capsys, *base, "--gpu", "h200", "--client", "inferencemax")
    assert cold["cold_start_s"] == 0.5
    assert any(n.startswith("cold start: inferencemax measures a fresh server") for n in cold["notes"])
    # 4 of the 40 requests (the first wave, the top 10%) wait the 0.5 s more: the p99 is one of them,
    # half a second above the median (less the steady state's spread, under a decode step and a prefill)
    assert cold["p99_ttft_ms"] - cold["median_ttft_ms"] > 350.0
    assert cold["mean_ttft_ms"] > cold["median_ttft_ms"]
    assert _json(capsys, *base, "--gpu", "h200", "--client", "vllm")["cold_start_s"] == 0.0
    assert _json(capsys, *base, "--gpu", "b200", "--client", "inferencemax")["cold_start_s"] == 0.0
    rc = main(["predict", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--mode", "disagg",
               "--engine", "trtllm", "--prefill-tp", "8", "--decode-tp", "8", "--isl", "1024",
               "--osl", "32", "--concurrency", "2", "--num-prompts", "20", "--client", "inferencemax",
               "--format", "json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    out = out[0] if isinstance(out, list) else out
    assert (out["cold_start_s"], out["kv_connect_s"]) == (1.0, 3.0)
    assert any("first KV transfer waits 3 s" in n for n in out["notes"])
    # 2 of 20 requests wait 4 s more: 400 ms on the mean, nothing on the median
    assert out["mean_ttft_ms"] - out["median_ttft_ms"] > 300.0


def test_a_warm_server_pays_no_cold_start_as_a_flag_and_as_a_points_column(capsys, tmp_path):
    """--warm-server (and a points row's warm_server) says the server has already run these shapes:
    the same InferenceMAX run without the first wave's wait, nothing else changed."""
    base = ("--model", "deepseek-ai/DeepSeek-R1", "--tp", "8", "--engine", "sglang", "--isl", "1024",
            "--osl", "32", "--concurrency", "4", "--num-prompts", "40", "--gpu", "h200", "--client",
            "inferencemax")
    cold = _json(capsys, *base)
    warm = _json(capsys, *base, "--warm-server")
    assert (cold["cold_start_s"], warm["cold_start_s"]) == (0.5, 0.0)
    assert not any(n.startswith("cold start") for n in warm["notes"])
    # 4 of 40 requests waited 0.5 s: the mean falls by 50 ms, the median and TPOT do not move
    assert cold["mean_ttft_ms"] - warm["mean_ttft_ms"] == pytest.approx(50.0, abs=1e-6)
    # only the first wave moves (to the top of the distribution): the median moves by at most the gap
    # between the middle values of a closed loop's two TTFTs (a prefill alone, or behind another's)
    assert cold["median_ttft_ms"] == pytest.approx(warm["median_ttft_ms"], rel=0.05)
    assert cold["mean_tpot_ms"] == pytest.approx(warm["mean_tpot_ms"], abs=1e-9)
    pts = tmp_path / "p.csv"
    pts.write_text("model,gpu,tp,dtype,isl,osl,concurrency,num_prompts,engine,client,warm_server\n"
                   "deepseek-ai/DeepSeek-R1,h200,8,fp8,1024,32,4,40,sglang,inferencemax,true\n"
                   "deepseek-ai/DeepSeek-R1,h200,8,fp8,1024,32,4,40,sglang,inferencemax,false\n")
    rows = _json(capsys, "--points", str(pts), "-q")
    assert [r["cold_start_s"] for r in rows] == [0.0, 0.5]
    assert rows[0]["mean_ttft_ms"] == pytest.approx(warm["mean_ttft_ms"], rel=1e-9)
    assert rows[1]["mean_ttft_ms"] == pytest.approx(cold["mean_ttft_ms"], rel=1e-9)


def test_a_two_node_pool_prints_that_its_collectives_are_modelled_with_its_own_notes_first(capsys):
    """A TP16 decode pool on H100 spans two nodes: the printout says its all-reduce is a model of the
    network, not a measurement, flags the step model as falling back, and still shows the
    harness's own waits (the fresh server's notes come first, so the five printed keep them)."""
    args = ["predict", "--model", "deepseek-ai/DeepSeek-R1-0528", "--gpu", "h100-sxm", "--mode", "disagg",
            "--engine", "trtllm", "--prefill-tp", "1", "--prefill-dp", "16", "--prefill-ep", "16",
            "--decode-tp", "16", "--decode-ep", "16", "--isl", "1024", "--osl", "32", "--concurrency", "4",
            "--num-prompts", "20", "--client", "inferencemax"]
    assert main([*args, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    out = out[0] if isinstance(out, list) else out
    assert "with roofline fallback" in out["step_model"]
    assert any(n.startswith("all-reduce over 16 GPUs spans 2 nodes of 8") for n in out["notes"])
    assert main(args) == 0
    printed = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  note: ")]
    assert 4 <= len(printed) <= 5
    assert printed[0].startswith("  note: cold start: inferencemax measures a fresh server")
    assert any("first KV transfer waits 3 s" in ln for ln in printed)


def test_notes_that_differ_only_in_their_numbers_print_once():
    """The engine loop meets a table's edge at many token counts; the printout keeps the first such
    note with how many more there were, and keeps every other note in order."""
    from servesim.plan.predict import distinct_notes

    edge = "moe: tokens={} above the measured 16384: scaled"
    notes = [edge.format(29743), "cold start: 1 s", edge.format(25985), edge.format(31000)]
    assert distinct_notes(notes) == [edge.format(29743) + " (and 2 more like it)", "cold start: 1 s"]
    assert distinct_notes(["a 1", "a 1", "b"]) == ["a 1", "b"]  # a repeat of the same note is not "more"
    assert distinct_notes([]) == []


def test_a_rate_driven_run_says_its_completed_rate_is_over_the_run_and_names_the_offered_one(capsys):
    """A benchmark client's req/s is requests done over the run, the drain after the last arrival
    included, so a short run reports less than the offered rate a stable deployment sustains (what
    ``plan`` lists).  The text says which is which and how long the run was; with a fixed number of
    clients there is no offered rate to name."""
    rc, out, _ = _run(capsys, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm",
                      "--isl", "256", "--osl", "64", "--rate", "20", "--format", "json")
    d = json.loads(out)
    rc, text, _ = _run(capsys, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm",
                       "--isl", "256", "--osl", "64", "--rate", "20")
    assert rc == 0
    m = re.search(r"([\d.]+) req/s completed over the ([\d,]+) s run \(offered 20 req/s\)", text)
    assert m is not None, text
    assert float(m.group(1)) == pytest.approx(d["request_throughput"], abs=5e-4)
    assert float(m.group(2).replace(",", "")) == pytest.approx(d["duration"], abs=0.5)
    # completed / duration is the rate the client reports, below the offered one (arrivals stop, the
    # last requests drain)
    assert d["completed"] / d["duration"] == pytest.approx(d["request_throughput"], rel=1e-9)
    assert d["request_throughput"] < 20
    rc, text, _ = _run(capsys, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm", *SMALL)
    assert rc == 0 and "completed over" not in text and "offered" not in text


def test_a_disaggregated_prediction_states_its_benchmark_run(capsys):
    """The disaggregated text names the run the way the colocated one does: how many requests, the
    lengths as drawn, the load and the client."""
    rc, text, _ = _run(capsys, "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--mode", "disagg",
                       "--engine", "sglang", "--prefill-tp", "8", "--decode-tp", "8", "--isl", "1024",
                       "--osl", "32", "--rate", "2")
    assert rc == 0
    assert "benchmark: 500 requests of 1024 prompt + 32 output tokens, 2 req/s (vllm client)" in text
    assert re.search(r"req/s completed over the [\d,]+ s run \(offered 2 req/s\)", text)


def test_predict_names_an_moe_steps_moe_share_and_communication(capsys):
    """predict's step line splits a mixture-of-experts step the way roofline does: GEMM + MoE +
    attention + communication, the MoE share the JSON's ``moe_ms``; a dense model's line is as before."""
    args = ("--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--engine", "sglang", "--tp", "8",
            "--ep", "8", "--isl", "256", "--osl", "16", "--concurrency", "4", "--num-prompts", "8")
    d = _one_json(capsys, *args)
    st = d["step_at_batch"]
    assert 0 < st["moe_ms"] < st["gemm_ms"]
    rc, text, _ = _run(capsys, *args)
    assert rc == 0
    m = re.search(r"= GEMM ([\d.]+) \+ MoE ([\d.]+) \+ attention [\d.]+ \+ communication ([\d.]+)", text)
    assert m is not None, text
    assert float(m.group(2)) == pytest.approx(st["moe_ms"], abs=0.006)
    assert float(m.group(1)) == pytest.approx(st["gemm_ms"] - st["moe_ms"], abs=0.006)
    assert float(m.group(3)) == pytest.approx(st["allreduce_ms"], abs=0.006)
    rc, dense, _ = _run(capsys, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm", *SMALL)
    assert rc == 0 and "+ MoE" not in dense and "+ all-reduce" in dense


def test_each_engines_memory_flag_sets_the_kv_cache_it_leaves(capsys):
    """vLLM's --gpu-memory-utilization, SGLang's --mem-fraction-static and TensorRT-LLM's
    --free-gpu-memory-fraction set the engine's memory share: 0.05 more of an H100's 79.6 GiB is that
    much more KV cache for vLLM (Llama-3.1-8B keeps 2 x 32 layers x 8 KV heads x 128 x 2 bytes =
    131,072 bytes a token), and TensorRT-LLM's fraction is of what the weights leave, so doubling it
    about doubles its cache; each flag belongs to its engine only."""
    from servesim.hardware.catalog import builtin_catalog

    base = ("--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm", "--isl", "256", "--osl", "16",
            "--concurrency", "2", "--num-prompts", "4")
    cap = {f: _one_json(capsys, *base, "--gpu-memory-utilization", f)["kv_capacity_tokens"]
           for f in ("0.9", "0.95")}
    assert cap["0.9"] == _one_json(capsys, *base)["kv_capacity_tokens"]  # vLLM's default is 0.9
    hbm = builtin_catalog().gpus["h100-sxm"].memory_bytes
    assert (cap["0.95"] - cap["0.9"]) * 131072 == pytest.approx(0.05 * hbm, rel=0.01)
    sg = {f: _one_json(capsys, *base, "--engine", "sglang", "--mem-fraction-static", f)["kv_capacity_tokens"]
          for f in ("0.8", "0.85")}
    assert (sg["0.85"] - sg["0.8"]) * 131072 == pytest.approx(0.05 * hbm, rel=0.01)
    trt = {f: _one_json(capsys, *base, "--engine", "trtllm", "--free-gpu-memory-fraction",
                        f)["kv_capacity_tokens"] for f in ("0.4", "0.8")}
    assert trt["0.8"] / trt["0.4"] == pytest.approx(2.0, rel=0.01)
    _one_line_exit_2(*_run(capsys, *base, "--mem-fraction-static", "0.9"), "--mem-fraction-static",
                     "--engine sglang")
    _one_line_exit_2(*_run(capsys, *base, "--gpu-memory-utilization", "1.5"), "gpu-memory-utilization", "1.5")


def test_a_model_that_does_not_fit_names_the_memory_share_that_would_and_that_share_fits(capsys):
    """Kimi-K2.5's int4 experts on 8 x H100 need 69.4 GiB a GPU, past vLLM's default 0.9 share: the
    refusal names the GPUs that would hold it and the --gpu-memory-utilization that would, and at that
    share the same deployment is predicted."""
    base = ("--model", "moonshotai/Kimi-K2.5", "--gpu", "h100-sxm", "--tp", "8", "--isl", "256",
            "--osl", "16", "--concurrency", "2", "--num-prompts", "4")
    rc, out, err = _run(capsys, *base)
    line = _one_line_exit_2(rc, out, err, "at least 9 GPUs would hold it", "--gpu-memory-utilization")
    share = re.search(r"--gpu-memory-utilization ([\d.]+) or more", line)
    assert share is not None, line
    d = _one_json(capsys, *base, "--gpu-memory-utilization", share.group(1))
    assert d["kv_capacity_tokens"] > 0 and d["completed"] == 4
    # a hundredth less is refused again: the share named is the smallest that fits
    below = f"{float(share.group(1)) - 0.01:.2f}"
    _one_line_exit_2(*_run(capsys, *base, "--gpu-memory-utilization", below), "large enough for the weights")


def test_points_take_the_engines_memory_flag_as_a_column(capsys, tmp_path):
    path = tmp_path / "points.csv"
    path.write_text("model,gpu,isl,osl,concurrency,num_prompts,gpu_memory_utilization\n"
                    "meta-llama/Llama-3.1-8B-Instruct,h100-sxm,256,16,2,4,0.9\n"
                    "meta-llama/Llama-3.1-8B-Instruct,h100-sxm,256,16,2,4,0.95\n")
    rows = _points(capsys, path)
    assert rows[1]["kv_capacity_tokens"] > rows[0]["kv_capacity_tokens"]


def test_a_dense_model_that_does_not_fit_names_the_tp_and_the_share_that_would(capsys):
    """Llama-3.1-70B in BF16 needs 131.4 GiB on one H200 (140.4 GiB): tp 2 holds it, and so does a
    vLLM share of 0.97, at which the one-GPU deployment is predicted."""
    base = ("--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "h200", "--tp", "1", "--isl", "256",
            "--osl", "16", "--concurrency", "2", "--num-prompts", "4")
    line = _one_line_exit_2(*_run(capsys, *base), "tp 2 would hold it", "--gpu-memory-utilization")
    share = re.search(r"--gpu-memory-utilization ([\d.]+) or more", line)
    assert share is not None and float(share.group(1)) == pytest.approx(0.97)
    assert _one_json(capsys, *base, "--gpu-memory-utilization", share.group(1))["kv_capacity_tokens"] > 0
