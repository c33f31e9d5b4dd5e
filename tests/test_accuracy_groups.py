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
    assert acc.overhead_group("trtllm") == acc.PYTHON_FRONT_END  # InferenceX's runs: trtllm-serve
    sglang = next(r for r in acc.load_rows() if r["engine"] == "sglang")
    assert acc.overhead_group("sglang", sglang) == acc.PYTHON_FRONT_END
    assert acc.overhead_group("vllm") == acc.PYTHON_FRONT_END
    assert acc.shipped_overhead_ms(acc.CPP_FRONT_END) == acc.CPP_FRONT_END_OVERHEAD_MS
    assert acc.shipped_overhead_ms(acc.PYTHON_FRONT_END) > 10 * acc.CPP_FRONT_END_OVERHEAD_MS


def test_the_python_servers_share_one_overhead_in_engines_toml():
    """One constant, fitted on the three servers' rows pooled: engines.toml gives each the same."""
    from servesim.hardware.engines import engine_profile

    values = {engine_profile(e).request_overhead_s for e in acc.PYTHON_SERVERS}
    assert len(values) == 1
    assert acc.shipped_overhead_ms(acc.PYTHON_FRONT_END) == pytest.approx(values.pop() * 1e3)


def test_a_cpp_row_is_priced_with_its_own_overhead(monkeypatch):
    """trt014-019 (Llama-3.1-8B on one H100 behind Triton, 2 req/s: an open loop, whose engine does
    not feel the overhead) predicted with the C++ front end's overhead at 0 and at 20 ms: its TTFT
    moves by exactly 20 ms, and at 0 it is the engine's alone, not trtllm-serve's 69 ms more."""
    row = _row("trt014-019")
    monkeypatch.setattr(acc, "CPP_FRONT_END_OVERHEAD_MS", 0.0)
    bare = acc.predict_row(row)["ttft"]
    monkeypatch.setattr(acc, "CPP_FRONT_END_OVERHEAD_MS", 20.0)
    assert acc.predict_row(row)["ttft"] == pytest.approx(bare + 20.0, abs=1e-9)
    assert bare < acc.shipped_overhead_ms(acc.PYTHON_FRONT_END)  # a measured ~23 ms, no Python server's


def test_sharegpt_runs_are_predicted_with_lengths_spread_around_their_means():
    """A vllm-client run on ShareGPT (gpsoss-012: 229.5 / 216.9 tokens on average, four clients)
    takes the stand-in spread, lengths uniform in [0.1, 1.9] x the means; a run that states its range
    ratio keeps it, and a random-token run of the vllm client keeps fixed lengths."""
    share = _row("gpsoss-012")
    name, ratio, nominal = acc.client_of(share)
    assert (name, ratio, nominal) == ("vllm", None, None)
    assert acc.length_spread(share, name, ratio, nominal) == acc.SHAREGPT_RATIO == 0.9
    stated = _row("dch33-001")  # ShareGPT text at sglang.bench_serving's random lengths, ratio 0
    assert acc.length_spread(stated, *acc.client_of(stated)) == 0.0
    fixed = _row("trt014-019")
    assert "sharegpt" not in fixed["note"].lower()
    assert acc.length_spread(fixed, *acc.client_of(fixed)) is None


def test_spread_lengths_unlock_four_clients_of_one_length():
    """gpsoss-012 by hand: at fixed lengths (its means) the four clients lock into step, each prompt
    prefilled beside the three others; spread, a prompt mostly meets decodes only, so its TTFT
    (before the overhead) falls from about 56 to about 31 ms (the docstring of length_spread)."""
    share = _row("gpsoss-012")
    spread = acc.predict_row(share)["ttft"] - acc.shipped_overhead_ms(acc.PYTHON_FRONT_END)
    locked = acc.predict_row({**share, "note": share["note"].replace("ShareGPT", "random")})["ttft"]
    locked -= acc.shipped_overhead_ms(acc.PYTHON_FRONT_END)
    assert 50.0 < locked < 60.0
    assert 25.0 < spread < 40.0


def test_trtllm_bench_rows_admit_every_waiting_request_and_trtllm_serve_rows_one():
    """scheduler_of: the one-new-request-an-iteration limit (schedulers.trtllm item 5) is trtllm-serve's;
    trtllm-bench's max-load rows (the LLM API, every request queued up front, nothing streamed) and
    the TensorRT (C++) backend's rows lift it; InferenceX's trtllm-serve rows keep the default."""
    bench = _row("trt10-031")  # Llama-3.1-8B FP8, H200, trtllm-bench throughput, 128/128
    assert "trtllm-bench" in bench["note"]
    assert acc.scheduler_of(bench) == (("new_requests_per_iteration", 0),)
    assert acc.scheduler_of(_row("trt014-019")) == (("new_requests_per_iteration", 0),)  # Triton
    serve = next(r for r in acc.load_rows() if r["id"].startswith("ixgx") or "3317" in r["source"])
    assert acc.scheduler_of(serve) == ()


def test_the_nvfp4_max_load_rows_take_their_checkpoints_fp8_cache():
    """The B200 FP4 trtllm-bench rows of Llama-3.3-70B and Qwen3-235B-A22B carry their checkpoints'
    FP8 KV dtype (SOURCES.md sections 3 and 12); the FP8 rows keep the placeholder."""
    rows = [r for r in acc.load_rows() if r["id"].startswith(("trt10-", "trt10m-"))]
    fp4 = [r for r in rows if r["dtype"] == "fp4" and r["model"] != "Qwen/Qwen3-30B-A3B"]
    assert len(fp4) == 20 and all(r["kv_dtype"] == "fp8" for r in fp4)
    assert all(r["kv_dtype"] == "bf16" for r in rows if r["dtype"] == "fp8")
