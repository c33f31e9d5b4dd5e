"""The serving process's event loop as a queue on the first-token path (issue 48 item 2).

``trtllm-serve`` (TensorRT-LLM's PyTorch backend) answers every client from **one** Python
process: one asyncio event loop, holding one GIL, parses and validates every request and
submits it to the executor (``tensorrt_llm/serve/openai_server.py`` through
``LLM.generate_async``), and turns every response the executor streams back into an OpenAI chunk
and writes it (``executor/result.py`` ``GenerationResultBase._handle_response`` on the loop, then
the chat post-processing and the SSE write).  With the defaults of ``tensorrt_llm/commands/serve.py``
(``--num_postprocess_workers 0``) and ``llm_args.py`` (``stream_interval`` 1) that is one
response per generated token per request.  The executor runs in other processes (the proxy's
workers, ``executor/proxy.py``), so the GPU steps go on while the loop is busy: queueing on the
loop, not GPU time, then dominates first-token latency.  TensorRT-LLM's own PR #16523 (merged;
``num_serve_frontends``) measured exactly that on a Dynamo worker: the request's
pre-processing p50 54 ms at 512 clients, 109 ms at 1,024 and 1,520 ms at 2,048, "an M/M/1-style
blow-up while decode step time stayed flat", and PR #19379 proposes 8 front-end processes by
default for it.  The load on the loop grows with the output tokens a second, so with the GPUs:
at the same clients a deployment on more GPUs (a higher TP) streams faster and queues longer.

The loop's work (:class:`ServeLoop`), each a p50 measured on an nsys capture of a TensorRT-LLM
decode worker with ``num_postprocess_workers: 0`` (NVIDIA ``ai-dynamo/dynamo``
``egress_experiments/costs.py``, ``Costs``): a streamed response 85.34 us (TensorRT-LLM's own
``_handle_response`` 23.97, then that worker's building of the response 50.65 and sending it
10.72, which stand in for ``trtllm-serve``'s chat post-processing and SSE write: no capture of
those is published), a new request 213.10 us (its four pre-submit stages 58.46 + ``engine_submit``
154.64).  The same file gives 1.94 us a response on ``trtllm-serve``'s loop with four
post-processing workers, which take the rest off it.  Not fitted to any benchmark.

The wait (:meth:`ServeLoop.wait_s`).  Every ``stream_interval`` engine steps the executor hands
the loop one response per decoding request, a burst of ``S = b x response_s`` (``b`` the decode
batch); the loop is busy ``rho = output tok/s / stream_interval x response_s + requests/s x
request_s`` of the time.  A new request waits for the work ahead of it on the way in and its first
chunk for the rest of its burst and the work ahead on the way out:

    W = S / 2 + rho S / (1 - rho)          (M/D/1-style: the mean residual burst S / 2, twice)

(``rho`` capped at :data:`RHO_CAP`).  The client sees every token ``W`` later (the engine loop's
``overhead_s``, beside the engine's fitted ``request_overhead_s``), so in a closed loop the wait
lowers the throughput that causes it: :func:`settle` finds the overhead where the two agree.

An engine's loop is its engines.toml ``front_end`` costs: vLLM's API server (``AsyncLLM``'s output
handler, ``OutputProcessor.process_outputs`` and the OpenAI chunk build, one asyncio loop) and
SGLang's ``TokenizerManager.handle_loop`` have the same shape but no published cost a response
(vLLM PR #27869 bounds it at 29.3 us), and none tried lowered their out-of-sample TTFT error
(``benchmarks/accuracy.py --frontend loop``; README, "How close is it?"), so they have none:
:func:`serve_loop` gives None, and their ``front_end`` holds only the harnesses' stream intervals.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from servesim._checks import check_int, check_real
from servesim.hardware.engines import EngineProfile

__all__ = ["RHO_CAP", "ServeLoop", "serve_loop", "settle"]

RHO_CAP = 0.99
"""The loop's busy share in :meth:`ServeLoop.wait_s` at most (an open loop past it would wait forever)."""


@dataclass(frozen=True)
class ServeLoop:
    """One serving process's event loop: its time per streamed response and per new request
    (seconds), and how many engine steps go by between two responses of a request."""

    response_s: float
    request_s: float
    stream_interval: int = 1

    def __post_init__(self) -> None:
        check_real("response_s", self.response_s, lo=0.0, hi=0.1)
        check_real("request_s", self.request_s, lo=0.0, hi=1.0)
        check_int("stream_interval", self.stream_interval, lo=1, hi=100_000)

    def load(self, output_tok_per_s: float, requests_per_s: float) -> float:
        """The loop's busy share: responses a second times their time, plus requests."""
        return output_tok_per_s / self.stream_interval * self.response_s + requests_per_s * self.request_s

    def note(self, who: str, output_tok_per_s: float, requests_per_s: float, wait_s: float) -> str:
        """The line a prediction carries where the loop's wait counts (``who``: the engine's label)."""
        rho = self.load(output_tok_per_s, requests_per_s)
        return (f"serving loop: {who}'s one serving process is busy {100 * min(rho, 1.0):.0f}% at "
                f"{output_tok_per_s:,.0f} tok/s (stream interval {self.stream_interval}), so each request's "
                f"tokens reach the client {1e3 * wait_s:.1f} ms later (servesim.sim.frontend)")

    def wait_s(self, output_tok_per_s: float, requests_per_s: float, decode_batch: float) -> float:
        """A request's wait on the loop, in and out (the module docstring's ``W``)."""
        burst = max(decode_batch, 1.0) * self.response_s  # one response per decoding request
        rho = min(RHO_CAP, self.load(output_tok_per_s, requests_per_s))
        return burst / 2 + rho * burst / (1 - rho)


def serve_loop(engine: EngineProfile, client: str) -> ServeLoop | None:
    """Engine ``engine``'s serving loop as benchmark client ``client``'s harness launches it (its
    ``front_end_stream_intervals``; 1 for any other client), or None: an engine without one."""
    if engine.front_end_response_s <= 0 and engine.front_end_request_s <= 0:
        return None
    interval = dict(engine.front_end_stream_intervals).get(client, 1)
    return ServeLoop(engine.front_end_response_s, engine.front_end_request_s, interval)


class _Run(Protocol):
    """What :func:`settle` reads of a run (a :class:`servesim.sim.batching.BenchResult`)."""

    @property
    def output_throughput(self) -> float: ...
    @property
    def request_throughput(self) -> float: ...
    @property
    def decode_batch(self) -> float: ...


R = TypeVar("R", bound=_Run)

SETTLE_TOLERANCE_S = 1e-3
""":func:`settle` stops once the overhead and the wait it causes agree within this (or 2%)."""
SETTLE_RUNS = 8
"""The most runs :func:`settle` makes after the first."""


def _wait(loop: ServeLoop, r: _Run) -> float:
    x = r.output_throughput if math.isfinite(r.output_throughput) else 0.0
    lam = r.request_throughput if math.isfinite(r.request_throughput) else 0.0
    return loop.wait_s(x, lam, r.decode_batch)


def settle(run: Callable[[float], R], first: R, base_s: float, loop: ServeLoop, *,
           closed: bool) -> tuple[float, R]:
    """The per-request overhead ``o = base_s + W`` with ``W`` the loop's wait at the throughput
    of ``run(o)``, and that run.  ``first`` is ``run(base_s)``.  With a fixed send schedule
    (``closed`` False) the engine's steps do not depend on ``o``: one more run.  In a closed loop
    a client sends again only when its last token arrived, so a longer ``o`` lowers the
    throughput and with it ``W``: ``base_s + W(run(o)) - o`` falls as ``o`` grows, from ``W(first)
    > 0`` at ``base_s`` to at most 0 at ``base_s + W(first)``, and bisection between the two
    finds where it is 0 (within :data:`SETTLE_TOLERANCE_S` or 2%, at most :data:`SETTLE_RUNS`
    runs)."""
    w0 = _wait(loop, first)
    hi = base_s + w0
    if not closed or w0 <= 0.0:
        return hi, run(hi) if w0 > 0.0 else first
    lo, o = base_s, hi
    best: tuple[float, float, R] | None = None
    for _ in range(SETTLE_RUNS):
        r = run(o)
        gap = base_s + _wait(loop, r) - o  # > 0: the overhead is short of the wait it causes
        if best is None or abs(gap) < best[0]:
            best = (abs(gap), o, r)
        if abs(gap) <= max(SETTLE_TOLERANCE_S, 0.02 * (o - base_s)):
            break
        lo, hi = (o, hi) if gap > 0 else (lo, o)
        o = (lo + hi) / 2
    assert best is not None
    return best[1], best[2]
