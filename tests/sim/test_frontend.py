"""trtllm-serve's serving loop as a queue on the first-token path (servesim.sim.frontend).

Its values by hand (the loop's load and wait, the shipped costs), the closed loop's fixed point
against a closed-form toy, and the engine loop's run with the serving loop against the same run
without it (paired: same requests, same steps)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from servesim._checks import ParameterError
from servesim.hardware.engines import engine_profile
from servesim.hardware.names import dense_shape, resolve_gpu
from servesim.hardware.stepmodel import StepModel
from servesim.sim.batching import Benchmark, run_benchmark
from servesim.sim.client import Client
from servesim.sim.frontend import RHO_CAP, ServeLoop, serve_loop, settle

LOOP = ServeLoop(85.34e-6, 213.1e-6)


def test_the_load_and_the_wait_by_hand() -> None:
    # 10,000 responses a second at 85.34 us and 40 requests at 213.1 us: 0.8534 + 0.008524
    assert LOOP.load(10_000.0, 40.0) == pytest.approx(0.861924)
    # a burst of 64 responses is 5.46176 ms: its half, plus rho S / (1 - rho) = 4.70764 / 0.138076 ms
    assert LOOP.wait_s(10_000.0, 40.0, 64.0) == pytest.approx(2.73088e-3 + 34.0946e-3, rel=1e-4)
    # streaming every 10th step: a tenth of the responses (0.08534 + 0.008524)
    assert replace(LOOP, stream_interval=10).load(10_000.0, 40.0) == pytest.approx(0.093864)
    # past saturation the busy share is held at the cap: a wait, not an infinity
    burst = 64 * 85.34e-6
    assert LOOP.wait_s(50_000.0, 0.0, 64.0) == pytest.approx(burst / 2 + RHO_CAP * burst / (1 - RHO_CAP))
    # an idle loop costs half a burst of one response
    assert LOOP.wait_s(0.0, 0.0, 0.0) == pytest.approx(85.34e-6 / 2)


def test_the_wait_grows_with_the_throughput() -> None:
    waits = [LOOP.wait_s(x, x / 256, 64.0) for x in (1_000.0, 4_000.0, 8_000.0, 10_000.0, 11_000.0)]
    assert waits == sorted(waits) and waits[-1] > 10 * waits[0]


def test_bad_costs_are_named() -> None:
    with pytest.raises(ParameterError, match="response_s"):
        ServeLoop(-1.0, 0.0)
    with pytest.raises(ParameterError, match="stream_interval"):
        ServeLoop(1e-4, 0.0, 0)


def test_the_shipped_loop_is_trtllm_serves_own_and_the_harness_stream_interval() -> None:
    trt = engine_profile("trtllm")
    # 23.97 + 50.65 + 10.72 us a response, 58.46 + 154.64 us a request (egress_experiments/costs.py)
    assert trt.front_end_response_s == pytest.approx(85.34e-6)
    assert trt.front_end_request_s == pytest.approx(213.1e-6)
    default, harness = serve_loop(trt, "vllm"), serve_loop(trt, "inferencemax")
    assert default is not None and default.stream_interval == 1  # trtllm-serve's default
    assert harness is not None and harness.stream_interval == 10  # InferenceMAX's scripts
    assert serve_loop(engine_profile("vllm"), "vllm") is None
    # SGLang: InferenceMAX's --stream-interval 10 recorded, but no measured cost, so no loop is priced
    sgl = engine_profile("sglang")
    assert dict(sgl.front_end_stream_intervals) == {"inferencemax": 10}
    assert sgl.front_end_response_s == sgl.front_end_request_s == 0.0
    assert serve_loop(sgl, "inferencemax") is None and serve_loop(sgl, "sglang") is None


@dataclass(frozen=True)
class _Toy:
    output_throughput: float
    request_throughput: float
    decode_batch: float


def _toy(o: float) -> _Toy:
    """64 clients, 256 tokens each, 1.4 s of engine time a request: a closed loop's throughput."""
    rate = 64 / (1.4 + o)
    return _Toy(256 * rate, rate, 64.0)


def test_settle_finds_the_closed_loops_fixed_point() -> None:
    base = 5e-3
    first = _toy(base)
    o, run = settle(_toy, first, base, LOOP, closed=True)
    w_first = LOOP.wait_s(first.output_throughput, first.request_throughput, 64.0)
    assert base < o < base + w_first  # the wait lowers the throughput that causes it
    gap = base + LOOP.wait_s(run.output_throughput, run.request_throughput, 64.0) - o
    assert abs(gap) <= max(1e-3, 0.02 * (o - base))
    assert run == _toy(o)
    # a fixed send schedule: the wait at the first run's throughput, one more run
    o_open, _ = settle(_toy, first, base, LOOP, closed=False)
    assert o_open == pytest.approx(base + w_first)


def test_the_engine_loop_with_the_serving_loop_against_without() -> None:
    # trtllm-serve's loop at a 5 ms overhead: with one prompt and output length a closed loop's clients
    # lock into a queue whose length an overhead of tens of ms moves by more than itself (README,
    # "How close is it?"), which this test of the loop's wait is not about
    eng = replace(engine_profile("trtllm", gpu="h100-sxm", memory_gib=80), request_overhead_s=5e-3)
    sm = StepModel(dense_shape("llama-3-8b"), "h100-sxm", 1, engine=eng)
    bench = Benchmark(1024, 128, concurrency=64, num_prompts=192, client=Client("vllm"))
    memory = resolve_gpu("h100-sxm").memory_bytes
    without = run_benchmark(sm, bench, memory, overhead_s=eng.request_overhead_s, loop="python")
    with_loop = run_benchmark(sm, bench, memory, loop="python")
    added = with_loop.mean_ttft_s - without.mean_ttft_s
    w_without = serve_loop(eng, "vllm").wait_s(without.output_throughput, without.request_throughput,  # type: ignore[union-attr]
                                               without.decode_batch)
    assert 0.0 < added <= w_without * 1.5  # the wait, shrunk by the throughput it lowers
    assert with_loop.completed == without.completed
    assert with_loop.mean_tpot_s == pytest.approx(without.mean_tpot_s, rel=0.1)  # the tokens' pace holds


def test_the_note_says_how_busy_and_how_long() -> None:
    # 10,000 tok/s and 40 req/s: busy 86% (0.861924); a 36.8 ms wait
    line = LOOP.note("TensorRT-LLM (trtllm-serve)", 10_000.0, 40.0, 0.03683)
    assert "busy 86% at 10,000 tok/s (stream interval 1)" in line and "36.8 ms later" in line
    assert "busy 100%" in LOOP.note("x", 50_000.0, 0.0, 1.0)  # past saturation it says full, not more
