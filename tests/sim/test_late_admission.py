"""An overlap (async) scheduler admits a request sent while a step runs one step late.

vLLM V1 (``v1/engine/core.py`` ``EngineCore.step_with_batch_queue``: with async scheduling two
batches are in flight and the next is scheduled before the running one's output is read), SGLang
(``managers/scheduler.py`` ``event_loop_overlap``: batch n + 1 is launched before batch n's result is
processed) and TensorRT-LLM's PyTorch backend (``pyexecutor/py_executor.py``
``_executor_loop_overlap``) all plan step n + 1 while step n runs, so a request that arrives during
step n can only join step n + 2.  With the host time set to zero an overlapped step costs what a
synchronous one does, so the two runs differ only by that rule.
"""

from __future__ import annotations

from dataclasses import replace

from servesim.hardware.engines import engine_profile
from servesim.hardware.names import dense_shape, resolve_gpu
from servesim.hardware.stepmodel import StepModel
from servesim.sim.batching import Benchmark, BenchResult, run_benchmark
from servesim.sim.client import Client

H100 = resolve_gpu("h100-sxm").memory_bytes
LENGTHS = [(512, 400), (512, 8)]
BENCH = Benchmark(512, 400, num_prompts=2, seed=1, client=Client("vllm"))


def _run(overlap: bool, sent: float, loop: str = "python") -> BenchResult:
    eng = replace(engine_profile("vllm", gpu="h100-sxm", memory_gib=80), overlap=overlap,
                  host_step_s=0.0, host_per_seq_s=0.0)
    sm = StepModel(dense_shape("llama-3-8b"), "h100-sxm", 1, engine=eng)
    return run_benchmark(sm, BENCH, H100, lengths=LENGTHS, arrival_times=[0.0, sent], keep_requests=True,
                         loop=loop)


def test_a_request_sent_mid_step_waits_one_more_step_with_the_overlap_scheduler() -> None:
    probe = _run(False, 1e6)  # request 1 far away: request 0's own times
    first0 = next(r for r in probe.requests if r[0] == 0)[2]
    step = probe.median_itl_s  # a decode step of request 0 alone
    sent = first0 + 10.5 * step  # half way through request 0's 11th decode step
    sync = {r[0]: r for r in _run(False, sent).requests}
    late = {r[0]: r for r in _run(True, sent).requests}
    # Synchronous: it waits the half step left, then its prefill step.  Overlapped: one decode step
    # more (the step planned before it came), so its first token is one decode step later.
    extra = (late[1][2] - sync[1][2]) / step
    assert 0.95 <= extra <= 1.05, extra
    # Request 0 came to an idle engine: it is planned at once in both, so its first token is the same.
    assert late[0][2] == sync[0][2]


def test_a_request_sent_to_an_idle_engine_is_not_delayed() -> None:
    # Request 1 arrives after request 0 has finished: nothing is in flight, the scheduler plans at once.
    probe = _run(False, 1e6)
    done0 = next(r for r in probe.requests if r[0] == 0)[3]
    sync = {r[0]: r for r in _run(False, done0 + 1.0).requests}
    late = {r[0]: r for r in _run(True, done0 + 1.0).requests}
    assert late[1][2] - late[1][1] == sync[1][2] - sync[1][1]


def test_the_compiled_loop_admits_late_the_same_way() -> None:
    probe = _run(False, 1e6)
    first0 = next(r for r in probe.requests if r[0] == 0)[2]
    sent = first0 + 10.5 * probe.median_itl_s
    assert _run(True, sent, "compiled").requests == _run(True, sent, "python").requests
