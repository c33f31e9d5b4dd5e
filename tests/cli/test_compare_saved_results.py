"""``predict --compare`` reads the real saved result of each benchmark tool shipped in examples/ (vLLM's
``--save-result`` JSON, SGLang ``bench_serving``'s ``--output-file`` JSONL, InferenceMAX's client result and
its aggregated record; sources in examples/README.md) and names the engine and client it assumed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from servesim.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# file, the flags the file does not answer (its model or hardware is not one servesim names from it),
# the engine and client the file records (None: it records none), the measured mean TTFT in ms as written
CASES = [
    pytest.param("vllm_bench_result.json", ["--model", "qwen3-8b", "--gpu", "h100-sxm"], "vllm", "vllm",
                 None),
    pytest.param("sglang_bench_serving.jsonl", ["--model", "llama-3-70b", "--gpu", "h200", "--tp", "4"],
                 "sglang", "sglang", None),
    pytest.param("inferencemax_bench_result.json", ["--model", "openai/gpt-oss-120b", "--gpu", "h200"], None,
                 None, 327.7923499357712),
    pytest.param("inferencemax_agg_result.json", ["--model", "kimi-k2", "--gpu", "h200", "--tp", "8"], "vllm",
                 "inferencemax", 317.0863160688896),
]


def _recorded_mean_ttft_ms(name: str) -> float | None:
    """The file's own mean TTFT in ms (its last record; seconds in InferenceMAX's aggregated record)."""
    text = (EXAMPLES / name).read_text()
    record = json.loads(text.strip().splitlines()[-1]) if name.endswith(".jsonl") else json.loads(text)
    if "mean_ttft_ms" in record:
        return float(record["mean_ttft_ms"])
    return float(record["mean_ttft"]) * 1e3 if "mean_ttft" in record else None


@pytest.mark.parametrize(("name", "flags", "engine", "client", "ttft_ms"), CASES,
                         ids=[str(c.values[0]) for c in CASES])
def test_compare_reads_each_tools_saved_result(name, flags, engine, client, ttft_ms, capsys):
    assert ttft_ms is None or _recorded_mean_ttft_ms(name) == pytest.approx(ttft_ms, rel=1e-12)
    rc = main(["predict", "--compare", str(EXAMPLES / name), *flags])
    out, err = capsys.readouterr()
    assert rc == 0, err
    # the engine and client it assumed are named (the file's own where it records them)
    said = re.search(r"assumed: engine (\w+), client (\w+)", out)
    assert said is not None, out
    if engine is not None:
        assert (said.group(1), said.group(2)) == (engine, client)
    if ttft_ms is not None:  # the measured column is the file's figure, not a prediction
        row = next(line for line in out.splitlines() if line.split()[:1] == ["mean_ttft_ms"])
        assert f"{ttft_ms:,.2f}" in row.split()[1:3], row


def _row(out: str, metric: str) -> list[str]:
    return next(line.split() for line in out.splitlines() if line.split()[:1] == [metric])


def test_sglang_run_past_capacity_lists_its_measurements(capsys):
    # the file's last line (16 req/s): median TTFT 1292.0442644972354 ms, output 4238.110256944623 tok/s
    rc = main(["predict", "--compare", str(EXAMPLES / "sglang_bench_serving.jsonl"), "--model", "llama-3-70b",
               "--gpu", "h200", "--tp", "4"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "record 5 of 5" in out and "16 req/s" in out
    assert _row(out, "median_ttft_ms")[1:3] == ["n/a", "1,292.04"]
    assert _row(out, "output_throughput")[2] == "4,238.11"
    assert "engine: the file's backend 'sglang'" in out


def test_inferencemax_record_alone_names_its_deployment(capsys):
    # no flag: the model, GPU, TP and engine are the record's (hw mi355x, tp 8, framework vllm)
    rc = main(["predict", "--compare", str(EXAMPLES / "inferencemax_agg_result.json")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "on 8 x mi355x (int4)" in out and "concurrency 4" in out
    assert "from the file: model moonshotai/Kimi-K2.5, gpu mi355x, tp 8, ep 1, dtype int4, spec mtp" in out
    assert "spec_decoding 'mtp'" in out  # the model has no MTP module: said, and predicted without
    assert _row(out, "mean_tpot_ms")[2] == "17.29"  # 0.017294128568510713 s
    # its mean ITL 0.04869889880906398 s is 2.8x its TPOT: the verdict points at the speculation
    assert "likely cause: the measured ITL 48.70 ms is 2.8x its TPOT 17.29" in out
    # a flag wins over the file, and says so
    rc = main(["predict", "--compare", str(EXAMPLES / "inferencemax_agg_result.json"), "--engine", "sglang"])
    out = capsys.readouterr().out
    assert rc == 0 and "assumed: engine sglang, client inferencemax (engine: --engine;" in out


@pytest.mark.parametrize(("name", "flags", "says"), [
    ("vllm_bench_result.json", ["--model", "qwen3-8b"], "does not record the GPU: give --gpu"),
    ("sglang_bench_serving.jsonl", ["--gpu", "h200"], "records no model: give --model"),
    ("inferencemax_bench_result.json", ["--gpu", "h200"],
     "is a path on the machine that ran it: give --model openai/gpt-oss-120b"),
    ("vllm_bench_result.json", ["--gpu", "h200"], "the path ends in Qwen/Qwen3-VL-8B-Instruct"),
])
def test_compare_errors_name_the_input_the_file_lacks(name, flags, says, capsys):
    rc = main(["predict", "--compare", str(EXAMPLES / name), *flags])
    err = capsys.readouterr().err
    assert rc == 2 and says in err and "is required" not in err and "Traceback" not in err
