"""benchmarks/accuracy.py's request-overhead groups: TensorRT-LLM's TensorRT (C++) backend behind
Triton or NIM takes an overhead of its own, not trtllm-serve's (engines.toml)."""

from __future__ import annotations

import pytest

from tests.bench_helpers import load_benchmark

acc = load_benchmark("accuracy")


def _row(rid: str) -> dict[str, str]:
    return next(r for r in acc.load_rows() if r["id"] == rid)


def test_the_cpp_front_end_is_a_group_of_its_own():
    triton, nim = _row("trt014-019"), next(r for r in acc.load_rows() if r["id"].startswith("nim18"))
    assert acc.overhead_group("trtllm", triton) == acc.CPP_FRONT_END
    assert acc.overhead_group("trtllm", nim) == acc.CPP_FRONT_END
    assert acc.overhead_group("trtllm") == "trtllm"  # InferenceX's runs: trtllm-serve
    sglang = next(r for r in acc.load_rows() if r["engine"] == "sglang")
    assert acc.overhead_group("sglang", sglang) == "sglang"
    assert acc.shipped_overhead_ms(acc.CPP_FRONT_END) == acc.CPP_FRONT_END_OVERHEAD_MS
    assert acc.shipped_overhead_ms("trtllm") > 10 * acc.CPP_FRONT_END_OVERHEAD_MS  # a Python server's


def test_a_cpp_row_is_priced_with_its_own_overhead(monkeypatch):
    """trt014-019 (Llama-3.1-8B on one H100 behind Triton, 2 req/s: an open loop, whose engine does
    not feel the overhead) predicted with the C++ front end's overhead at 0 and at 20 ms: its TTFT
    moves by exactly 20 ms, and at 0 it is the engine's alone, not trtllm-serve's 69 ms more."""
    row = _row("trt014-019")
    monkeypatch.setattr(acc, "CPP_FRONT_END_OVERHEAD_MS", 0.0)
    bare = acc.predict_row(row)["ttft"]
    monkeypatch.setattr(acc, "CPP_FRONT_END_OVERHEAD_MS", 20.0)
    assert acc.predict_row(row)["ttft"] == pytest.approx(bare + 20.0, abs=1e-9)
    assert bare < acc.shipped_overhead_ms("trtllm")  # a measured ~23 ms, with no Python server's overhead
