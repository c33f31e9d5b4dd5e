"""vLLM V1's scheduler: mixed chunked prefill inside one token budget, running first.

From ``vllm/v1/core/sched/scheduler.py`` (``Scheduler.schedule``):

1. **Running first.**  Every decoding sequence gets its next token(s) (``k + 1``
   positions with speculation) out of ``max_num_batched_tokens``.  When the KV
   cache cannot hold them, the lowest-priority running request (the last admitted,
   decoding or still prefilling; FCFS policy) is preempted and later recomputed
   (``_preempt_request``: its blocks are freed, it goes back to the front of the
   queue), and no waiting request is scheduled in that step (``if not preempted_reqs``
   guards the waiting loop).
2. **Then the prompt already being chunked**, then **waiting requests in arrival
   order**, each getting ``min(prompt left, budget left)`` tokens while a running slot
   (``max_num_seqs``) remains and the KV blocks for the chunk can be allocated
   (``kv_cache_manager.allocate_slots``) beyond the running sequences' next step and
   a 1% watermark (the block manager's watermark: without it a newcomer is preempted
   at once by the sequences' growth).

With ``reserve`` (not vLLM's behaviour; kept for comparisons) a request is admitted
only when its whole prompt and output fit beside everything promised.  Defaults
(``vllm/engine/arg_utils.py``, ``EngineArgs.get_batch_defaults``): 8,192 tokens and
1,024 sequences on GPUs of 70 GiB and more except the A100, 2,048 and 256 below.
"""

from __future__ import annotations

from typing import ClassVar

from servesim.hardware.engines import EngineProfile
from servesim.sim.schedulers.base import EngineState, Options, Scheduler

__all__ = ["VllmScheduler"]

WATERMARK = 0.01
"""Share of the KV cache kept free when admitting a new request."""


class VllmScheduler(Scheduler):
    """vLLM V1 (see the module docstring: ``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``)."""

    name: ClassVar[str] = "vllm"
    takes_reserve: ClassVar[bool] = True  # run_benchmark(reserve=True) sets the option below
    reserve: bool  # admit only what fits whole (not vLLM's behaviour; kept for comparisons)

    def __init__(self, profile: EngineProfile, options: Options | None = None) -> None:
        super().__init__(profile, options)
        self.reserve = bool(self.options.get("reserve", False))

    def schedule(self, s: EngineState) -> None:
        preempted = s.make_room_for_decode()
        need = s.decode_tokens()
        left = s.budget - need
        for c in range(s.chunking_n):
            if left <= 0:
                break
            r = s.chunking[c]
            q = min(s.prompt_left[r], left, s.chunk_cap)
            if q > s.capacity - s.used - need:  # the chunk's blocks must all be free
                break
            s.plan_chunk(r, q)
            left -= q
            need += q
        headroom = s.decode_tokens() + WATERMARK * s.capacity
        while not preempted and s.waiting_n > 0 and left > 0 and s.running() < s.slots:
            r = s.waiting_at(0)
            if self.reserve and s.capacity - s.promised - WATERMARK * s.capacity < s.final_of(r):
                break
            q = min(s.prompt_left[r], left, s.chunk_cap)
            if q > int(s.capacity - s.used - need - headroom):
                break
            s.pop_waiting()
            s.admit(r)
            s.plan_chunk(r, q)
            left -= q
            need += q
        s.plan_step(True, preempted)
