"""``benchmarks/accuracy.py --frontend loop``: the serving loop at a fitted cost a streamed response on
the engines whose loop has no measured cost (:func:`loop_candidate_ms`), against
:meth:`servesim.sim.frontend.ServeLoop.wait_s` evaluated by hand."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from tests.bench_helpers import load_benchmark


def _accuracy() -> ModuleType:
    return load_benchmark("accuracy")


def _result(engine: str, client: str = "inferencemax", note: str = "", tput: float = 5000.0,
            in_flight: float = 64.0, osl: str = "1000") -> dict[str, Any]:
    return {"row": {"engine": engine, "note": note, "osl": osl}, "in_flight": in_flight,
            "pred": {"tput": tput, "client": client}}


def test_the_candidate_is_the_loops_wait_by_hand() -> None:
    term = _accuracy().loop_candidate_ms
    # vLLM streams every token (no --stream-interval in InferenceMAX's scripts): busy 5,000 tok/s x
    # 20 us = 0.1 (requests cost nothing here); a burst of 64 responses is 1.28 ms: 0.64 + 0.1 x 1.28 / 0.9
    assert term(_result("vllm"), 20.0) == pytest.approx(0.64 + 0.128 / 0.9)
    # SGLang under InferenceMAX's --stream-interval 10: a tenth of the load, the same burst
    assert term(_result("sglang"), 20.0) == pytest.approx(0.64 + 0.01 * 1.28 / 0.99)
    # its own client: SGLang's default interval 1
    assert term(_result("sglang", client="sglang"), 20.0) == pytest.approx(term(_result("vllm"), 20.0))
    assert term(_result("vllm"), 0.0) == 0.0


def test_measured_loops_and_cpp_front_ends_take_no_candidate() -> None:
    acc = _accuracy()
    term = acc.loop_candidate_ms
    assert term(_result("trtllm"), 100.0) == 0.0  # trtllm-serve's loop is measured: already predicted
    triton = _result("trtllm", note="Triton TensorRT-LLM backend v0.14")
    assert acc.serving_loop(triton["row"]) is False and term(triton, 100.0) == 0.0


def test_the_candidate_grows_with_the_load() -> None:
    term = _accuracy().loop_candidate_ms
    waits = [term(_result("vllm", tput=80.0 * b, in_flight=float(b)), 50.0) for b in (1, 8, 32, 64, 128)]
    assert waits == sorted(waits) and waits[-1] > 10 * waits[0]
