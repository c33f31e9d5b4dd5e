"""TensorRT-LLM's PyTorch-backend scheduler (``trtllm-serve``): whole prompts, reserved KV.

From ``tensorrt_llm/_torch/pyexecutor/scheduler.py`` and ``tensorrt_llm/llmapi/llm_args.py``:

1. **Capacity scheduler, GUARANTEED_NO_EVICT** (the default
   ``CapacitySchedulerPolicy``): a request starts only when the KV cache can hold
   its prompt and its maximum output beside what every running request may still
   write; nothing is ever evicted, so a request that does not fit waits.
2. **Micro-batch scheduler**: the step takes every generation request (one token
   each, ``k + 1`` with speculation) and then context requests in order, each
   **whole** (``enable_chunked_prefill=False`` by default), while the step's tokens
   stay within ``max_num_tokens`` (8,192) and the batch within ``max_batch_size``
   (2,048).  A prompt longer than ``max_num_tokens`` cannot run without
   ``--enable-chunked-prefill``; with it, contexts are cut to what the budget leaves.
3. **Overlap scheduler** (``disable_overlap_scheduler=False``) and **CUDA graphs for
   generation-only steps** (``cuda_graph_config``: a step with a context request runs
   eagerly): the engine profile's ``overlap`` and ``cuda_graph_decode_only``.
"""

from __future__ import annotations

from typing import ClassVar

from servesim._checks import ParameterError
from servesim.sim.schedulers.base import EngineState, Scheduler, StepPlan

__all__ = ["TrtllmScheduler"]


class TrtllmScheduler(Scheduler):
    """TensorRT-LLM (see the module docstring)."""

    name: ClassVar[str] = "trtllm"

    def __init__(self, profile, options=None):  # type: ignore[no-untyped-def]
        super().__init__(profile, options)
        self.options.setdefault("enable_chunked_prefill", False)

    def check_prompt(self, tokens: int) -> None:
        """A whole prompt must fit in one step's budget unless prefill is chunked."""
        if not self.options["enable_chunked_prefill"] and tokens > self.profile.max_num_batched_tokens:
            raise ParameterError("max_num_tokens", self.profile.max_num_batched_tokens,
                                 f"at least the longest prompt ({tokens} tokens) for TensorRT-LLM without "
                                 "--enable-chunked-prefill")

    def schedule(self, s: EngineState) -> StepPlan:
        chunked = bool(self.options["enable_chunked_prefill"])
        left = s.budget - s.decode_tokens()
        chunks = []
        for r in s.chunking:
            if left <= 0:
                break
            q = min(r.prompt_left, left, s.chunk_cap)
            if not chunked and q < r.prompt_left:
                break
            chunks.append((r, q))
            left -= q
        while s.waiting and left > 0 and s.running < s.slots:
            r = s.waiting[0]
            final = r.context + r.prompt_left + (r.osl - r.generated)
            if s.promised + final > s.capacity:
                break
            if not chunked and r.prompt_left > left:
                break
            q = min(r.prompt_left, left, s.chunk_cap)
            s.waiting.popleft()
            s.admit(r)
            chunks.append((r, q))
            left -= q
        return StepPlan(True, chunks, False)
