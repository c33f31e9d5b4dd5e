"""An overlap scheduler hides a launch-bound eager step's CPU wait behind the step before it
(:func:`servesim.sim.loop.run_step`), by hand on a pricer whose prices are set: a decode-only step
10 ms, a step with a prefill chunk 100 ms of which ``wait`` is the GPU waiting on the CPU."""

from __future__ import annotations

from unittest import mock

import pytest

from servesim.hardware.engines import engine_profile
from servesim.hardware.names import dense_shape
from servesim.hardware.stepmodel import StepModel
from servesim.sim.batching import Benchmark, run_benchmark

H100 = 80e9


def _ttfts(wait_s: float, loop: str, overlap: bool = True, isl: int = 512, budget: int | None = None,
           arrivals: tuple[float, ...] = (0.0, 0.05)) -> tuple[float, ...]:
    """The TTFT of each request (sent at ``arrivals``), seconds.  A step with a prefill chunk is
    launch-bound when ``wait_s`` > 0: the CPU launches it in the whole 100 ms."""
    engine = engine_profile("vllm", gpu="h100-sxm", overlap=overlap, max_num_batched_tokens=budget)
    sm = StepModel(dense_shape("llama-3-8b"), "h100-sxm", 1, engine=engine)

    def price(self: StepModel, decode: int, context: int, chunks: tuple[tuple[int, int, bool], ...] = (),
              positions: int = 1) -> tuple[float, bool, tuple[str, ...], float, float]:
        if chunks:
            return 0.100, True, (), wait_s, 0.100 if wait_s else 0.0
        return 0.010, True, (), 0.0, 0.0

    with mock.patch.object(StepModel, "step_price", autospec=True, side_effect=price):
        res = run_benchmark(sm, Benchmark(isl, 8, num_prompts=len(arrivals)), H100,
                            arrival_times=list(arrivals), loop=loop, keep_requests=True, overhead_s=0.0)
    ttft = {i: first - sent for i, sent, first, _ in res.requests}
    return tuple(ttft[i] for i in range(len(arrivals)))


def _first_tokens(wait_s: float, loop: str, overlap: bool = True) -> tuple[float, ...]:
    """(TTFT of the request sent at 0, of the one sent at 50 ms), seconds."""
    return _ttfts(wait_s, loop, overlap)


@pytest.mark.parametrize("loop", ["python", "compiled"])
def test_a_prefill_after_a_running_step_waits_only_for_what_that_step_does_not_cover(loop):
    """Overlap on: request 0 finds the engine idle, so its prefill step has nothing to hide behind
    (100 ms).  Request 1, sent at 50 ms while that step runs, enters the step after next (the late
    scheduler): a 10 ms decode step (100-110 ms), then its prefill beside request 0's decode from
    110 ms, whose CPU wait is covered by up to the previous step's 10 ms: 100 - min(wait, 10) ms.
    TTFT 110 + 90 - 50 = 150 ms with a 60 ms wait, 155 ms with 5 ms, 160 ms with none."""
    assert _first_tokens(0.0, loop) == pytest.approx((0.100, 0.160), abs=1e-12)
    assert _first_tokens(0.060, loop) == pytest.approx((0.100, 0.150), abs=1e-12)
    assert _first_tokens(0.005, loop) == pytest.approx((0.100, 0.155), abs=1e-12)


def test_without_the_overlap_scheduler_nothing_is_hidden():
    """Overlap off: request 1 joins the step after the one running when it came (100-200 ms), and
    the CPU launches each step only after the last one ends, so the wait stays whole: TTFT 150 ms
    whatever the wait."""
    assert _first_tokens(0.0, "python", overlap=False) == pytest.approx((0.100, 0.150), abs=1e-12)
    assert _first_tokens(0.060, "python", overlap=False) == pytest.approx((0.100, 0.150), abs=1e-12)


@pytest.mark.parametrize("loop", ["python", "compiled"])
def test_behind_a_launch_bound_step_nothing_is_hidden(loop):
    """One 6,000-token prompt in chunks of 2,048 (a 2,048-token budget): three chunk steps in a row,
    each launch-bound.  The CPU launches each only once it has launched the one before, which took
    that step's whole time, so none is shortened: TTFT 300 ms whatever the wait (the chunks' own
    wait would hide 60 ms a step behind a decode step)."""
    assert _ttfts(0.060, loop, isl=6000, budget=2048, arrivals=(0.0,)) == pytest.approx((0.300,), abs=1e-12)
    assert _ttfts(0.0, loop, isl=6000, budget=2048, arrivals=(0.0,)) == pytest.approx((0.300,), abs=1e-12)
