"""The measured data the accuracy benchmarks read (``benchmarks/data/*.csv``) is well formed.

The benchmarks run on demand, not in CI, so a row that would break them or silently drop out of
their medians is caught here: unique ids, a source, numbers where numbers belong, a model and GPU
servesim resolves, one of its engines, and for InferenceMAX's own runs the client and parallelism
tags the benchmark reads from the note.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest

from servesim.hardware.model_config import find_architecture
from servesim.hardware.names import resolve_gpu

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data"
NUMERIC = ("isl", "osl", "concurrency", "request_rate", "mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms",
           "output_throughput")


def _rows(name: str) -> list[dict[str, str]]:
    with open(DATA / name, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _model_known(model: str) -> bool:
    from servesim.hardware.names import dense_shape

    if find_architecture(model) is not None:
        return True
    try:
        dense_shape(model)
    except Exception:
        return False
    return True


def test_published_measurements_rows_are_well_formed():
    rows = _rows("published_measurements.csv")
    assert len(rows) > 300
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicate ids"
    for r in rows:
        where = r["id"]
        assert r["source"].startswith("https://"), where
        assert r["engine"] in ("vllm", "sglang", "trtllm"), where
        resolve_gpu(r["gpu"])  # raises on an unknown GPU
        assert _model_known(r["model"]), f"{where}: {r['model']}"
        for name in NUMERIC:
            cell = r[name].strip()
            if cell and not (name == "request_rate" and cell == "inf"):
                x = float(cell)
                assert math.isfinite(x) and x > 0, f"{where}: {name}={cell}"
        assert r["tp"].strip() == "" or int(r["tp"]) >= 1, where
        # a latency row states its load: clients or a rate
        if r["mean_ttft_ms"] or r["mean_tpot_ms"]:
            assert r["concurrency"] or r["request_rate"], where
        assert "\r" not in "".join(r.values()), f"{where}: carriage return"


def test_inferencemax_rows_carry_the_tags_the_benchmark_reads():
    """accuracy.py predicts a row with ``client=inferencemax`` in its note as ``predict --client
    inferencemax`` does, with the note's ``dp=`` and ``ep=``: every InferenceX row says all three and
    its nominal lengths are the harness's (1k or 8k prompts, 1k or 8k outputs)."""
    rows = [r for r in _rows("published_measurements.csv") if r["id"].startswith("ixexp-")]
    assert len(rows) >= 44
    for r in rows:
        note = r["note"]
        assert "client=inferencemax" in note, r["id"]
        assert re.search(r"\bdp=\d+", note) and re.search(r"\bep=\d+", note), r["id"]
        assert int(r["isl"]) in (1024, 8192) and int(r["osl"]) in (1024, 8192), r["id"]
        assert "InferenceX" in r["source"], r["id"]


@pytest.mark.parametrize("name", ["inferencex_dsr1.csv", "inferencex_dsr1_mtp.csv"])
def test_inferencex_runs_are_well_formed(name):
    rows = _rows(name)
    assert len(rows) > 100
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["mode"] in ("agg", "disagg"), r["id"]
        resolve_gpu(r["gpu"])
        assert r["engine"] in ("sglang", "trtllm"), r["id"]
        for key in ("mean_ttft_ms", "mean_tpot_ms"):
            assert float(r[key]) > 0, r["id"]
        assert int(r["concurrency"]) >= 1 and int(r["isl"]) in (1024, 8192), r["id"]
        if r["mode"] == "disagg":
            assert int(r["prefill_workers"]) >= 1 and int(r["decode_workers"]) >= 1, r["id"]


def test_published_speculative_rows_are_well_formed():
    """The speculative-decoding measurements (benchmarks/data/published_speculative.csv): unique ids,
    a source, a model and GPU servesim resolves, a draft method, and a positive base and speculative
    value of the metric they report."""
    rows = _rows("published_speculative.csv")
    assert len(rows) > 300
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        where = r["id"]
        assert r["source"].startswith("https://"), where
        assert r["engine"] in ("vllm", "sglang", "trtllm"), where
        resolve_gpu(r["gpu"])
        assert _model_known(r["model"]), f"{where}: {r['model']}"
        assert r["method"], where
        assert r["metric"] in ("output_throughput", "tpot_ms", "tps_user", "e2e_runtime"), where
        for key in ("base_value", "spec_value"):
            if r[key].strip():
                assert float(r[key]) > 0, f"{where}: {key}"
