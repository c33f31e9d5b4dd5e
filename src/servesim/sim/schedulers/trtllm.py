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
   (2,048); with attention data parallel each rank schedules its own step under
   ``max_num_tokens``, so a whole prompt must also fit one rank's budget beside that
   rank's share of the decoding tokens (the ranks hold the decodes evenly).  A prompt
   longer than ``max_num_tokens`` cannot run without ``--enable-chunked-prefill``; with
   it, contexts are cut to what the budget leaves.
3. **Overlap scheduler** (``disable_overlap_scheduler=False``) and **CUDA graphs for
   generation-only steps** (``cuda_graph_config``: a step with a context request runs
   eagerly): the engine profile's ``overlap`` and ``cuda_graph_decode_only``.
4. **Attention-DP balance** (``attention_dp_config: enable_balance``, off by default;
   ``pyexecutor/py_executor.py`` ``_balance_adp_requests``): with attention data parallel, new
   context requests wait until every rank has one, for at most ``timeout_iters`` iterations
   (and start at once while some rank has no generation request); once every rank has one and
   every rank is generating, they wait ``batching_wait_iters`` more iterations.  ``_schedule``
   calls the balance every iteration, so its count of waiting iterations runs on while no context
   request waits anywhere and starts again at ``timeout_iters``: a lone request waits out what is
   left of the running count, not a whole one.  Every rank
   holding one is read as at least as many waiting requests as ranks (the ranks are handed
   requests in turn), every rank generating as at least as many decoding ones.
5. **New requests enter one an iteration** (``new_requests_per_iteration``, servesim's: 1 without
   attention DP, 0 for no limit): the waiting requests become visible to the scheduler that many an
   iteration, and a step admits only visible ones (batch waiting still gathers the visible ones).
   InferenceX's DeepSeek-R1 runs show it: when C prompts of ~1k tokens arrive together (a
   closed-loop run's first wave), the p99 TTFT is C times one single-prompt iteration (8 x B200 FP4:
   0.27, 0.65, 1.2, 2.3, 5.7, 8.8 s at 4 to 128 clients; 8 x H200 FP8 about 0.13 s a client), where
   batching them under the 8,192-token budget would take C / 8 iterations; the runs with attention
   DP show no such tail (mean TTFT within 25% of the median).  The scheduler admits every context
   that fits (``microBatchScheduler.cpp``) and the executor drains its queue each iteration
   (``executor_request_queue.py``), so the limit is upstream of both.  The likeliest cause, not
   verified: the rank-0 worker's submit thread takes each request off the IPC queue and enqueues
   it while competing for the GIL with the executor loop (the contention ``executor/base_worker.py``
   and TensorRT-LLM PRs #15109 and #15114 describe), so requests reach the engine about one per
   executor sync.  The TensorRT (C++) backend and a Dynamo worker are fed otherwise (set 0), and so
   is ``trtllm-bench`` (the same LLM API, every request queued up front and nothing streamed): its
   v1.0 max-load runs of Llama-3.1-8B at 128/128 tokens reach 27,911 output tok/s on one H200,
   where one admission an iteration caps the prediction at 14,987 (21,639 without it; both with
   the BF16 cache the row assumes: ``benchmarks/accuracy.py``'s max-load section predicts such rows
   without the limit).
6. **Batch waiting** (``batch_wait_timeout_iters``, ``batch_wait_max_tokens_ratio``, off by
   default; ``_waiting_requests``): without attention DP, while generation requests run, the
   context requests the step could take wait until with the generation tokens they reach
   ``ratio x max_num_tokens``, for at most ``timeout_iters`` iterations.
"""

from __future__ import annotations

import math
from typing import ClassVar

from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.engines import EngineProfile
from servesim.sim.schedulers.base import EngineState, Options, Scheduler

__all__ = ["TrtllmScheduler"]


class TrtllmScheduler(Scheduler):
    """TensorRT-LLM (see the module docstring: ``tensorrt_llm/_torch/pyexecutor/scheduler.py``, the
    capacity and micro-batch schedulers, and ``pyexecutor/py_executor.py``)."""

    name: ClassVar[str] = "trtllm"
    chunked: bool  # --enable-chunked-prefill
    balancing: bool  # attention_dp_config enable_balance, with attention DP
    timeout_iters: int  # its timeout_iters
    batching_wait_iters: int  # its batching_wait_iters
    batch_waiting: bool  # batch_wait_timeout_iters or batch_wait_max_tokens_ratio, without attention DP
    batch_wait_iters: int
    batch_wait_tokens: float  # ratio x max_num_tokens
    new_per_step: int  # waiting requests handed to the scheduler each iteration (item 5); 0: all
    waited: int  # iterations context requests have waited for every rank to hold one
    batched: int  # iterations they have waited, every rank holding one, to batch more
    batch_waited: int  # iterations contexts have waited for enough tokens (batch waiting)
    visible: int  # waiting requests the executor has been handed (item 5)

    def __init__(self, profile: EngineProfile, options: Options | None = None) -> None:
        super().__init__(profile, options)
        o = self.options
        o.setdefault("enable_chunked_prefill", False)
        o.setdefault("attention_dp_balance", False)
        o.setdefault("attention_dp_timeout_iters", 50)  # AttentionDpConfig's defaults
        o.setdefault("attention_dp_batching_wait_iters", 10)
        o.setdefault("batch_wait_timeout_iters", 0)
        o.setdefault("batch_wait_max_tokens_ratio", 0.0)
        o.setdefault("new_requests_per_iteration", 0)
        check_int("new_requests_per_iteration", o["new_requests_per_iteration"], lo=0, hi=1_000_000)
        check_int("batch_wait_timeout_iters", o["batch_wait_timeout_iters"], lo=0, hi=100_000)
        check_real("batch_wait_max_tokens_ratio", o["batch_wait_max_tokens_ratio"], lo=0.0, hi=1.0)
        check_int("attention_dp_timeout_iters", o["attention_dp_timeout_iters"], lo=0, hi=100_000)
        check_int("attention_dp_batching_wait_iters", o["attention_dp_batching_wait_iters"], lo=0, hi=100_000)
        self.chunked = bool(o["enable_chunked_prefill"])
        self.balancing = bool(o["attention_dp_balance"]) and profile.dp_ranks > 1
        self.timeout_iters = int(o["attention_dp_timeout_iters"])
        self.batching_wait_iters = int(o["attention_dp_batching_wait_iters"])
        self.batch_waiting = profile.dp_ranks == 1 and (int(o["batch_wait_timeout_iters"]) > 0
                                                        or float(o["batch_wait_max_tokens_ratio"]) > 0)
        self.batch_wait_iters = int(o["batch_wait_timeout_iters"])
        self.batch_wait_tokens = float(o["batch_wait_max_tokens_ratio"]) * profile.max_num_batched_tokens
        # Waiting requests handed to the scheduler (made visible to it) each iteration; 0: all at
        # once.  A step admits only visible requests, so this caps new arrivals a step without
        # capping requests that became visible earlier; attention DP lifts the limit.
        self.new_per_step = int(o["new_requests_per_iteration"]) if profile.dp_ranks == 1 else 0
        self.waited = self.batched = self.batch_waited = self.visible = 0

    def wait_for_tokens(self, tokens: int) -> bool:
        """Whether batch waiting keeps this iteration's context requests (``tokens`` with the
        generation tokens) waiting for more."""
        if self.batch_waited >= self.batch_wait_iters or tokens >= self.batch_wait_tokens:
            self.batch_waited = 0
            return False
        self.batch_waited += 1
        return True

    def hold_contexts(self, s: EngineState) -> bool:
        """Whether the attention-DP balance keeps this iteration's new context requests waiting."""
        every_ctx = s.waiting_n >= s.ranks
        every_gen = s.decoding_n >= s.ranks
        if every_ctx:
            self.waited = 0
            if every_gen and self.batched < self.batching_wait_iters:
                self.batched += 1
                return True
            self.batched = 0
            return False
        self.count_on(s, 1)
        return self.waited > 0  # at the timeout (or with a rank not generating) they go

    def count_on(self, s: EngineState, iterations: int) -> None:
        """The balance's count of waiting iterations after ``iterations`` more without every rank
        holding a context request: one each, started again at the timeout, or at 0 while a rank has no
        generation request."""
        if s.decoding_n >= s.ranks and self.timeout_iters > 0:
            self.waited = (self.waited + iterations) % self.timeout_iters
        else:
            self.waited = 0

    def after_step(self, s: EngineState, steps: int) -> None:
        # a stretch of pure decode steps hands the executor one request a step as well
        if self.new_per_step and steps > 1:
            self.visible = min(s.waiting_n, self.visible + (steps - 1) * self.new_per_step)
        # and runs the balance's count on, with no context request on any rank (the step that planned
        # the stretch counted its first iteration)
        if self.balancing and steps > 1:
            self.count_on(s, steps - 1)

    def quiet_steps(self, s: EngineState) -> float:
        # the balance and the batch waiting decide each iteration
        return 1.0 if (self.balancing or self.batch_waiting) and s.waiting_n > 0 else math.inf

    def check_prompt(self, tokens: int) -> None:
        """A whole prompt must fit in one step's budget (one rank's, with attention DP) unless prefill
        is chunked."""
        budget = self.profile.chunk_tokens or self.profile.max_num_batched_tokens
        if not self.options["enable_chunked_prefill"] and tokens > budget:
            raise ParameterError("max_num_tokens", budget,
                                 f"at least the longest prompt ({tokens} tokens) for TensorRT-LLM without "
                                 "--enable-chunked-prefill")

    def schedule(self, s: EngineState) -> None:
        chunked = self.chunked
        left = s.budget - s.decode_tokens()
        for c in range(s.chunking_n):
            if left <= 0:
                break
            r = s.chunking[c]
            q = min(s.prompt_left[r], left, s.chunk_cap)
            if not chunked and q < s.prompt_left[r]:
                break
            s.plan_chunk(r, q)
            left -= q
        # the balance decides (and counts) every iteration, whether or not a request waits
        hold = self.balancing and self.hold_contexts(s) and s.waiting_n > 0
        # The queue's first requests that the step could take: their tokens go into the plan after
        # the chunks, and they are taken below unless batch waiting keeps them.
        take = 0
        tokens = 0
        promised, running = s.promised, s.running()
        cap = self.new_per_step
        if cap:
            self.visible = min(s.waiting_n, self.visible + cap)
        while take < s.waiting_n:
            if hold or left <= 0 or running >= s.slots or (cap and take >= self.visible):
                break
            r = s.waiting_at(take)
            final = s.final_of(r)
            if promised + final > s.capacity:
                break
            if not chunked and (s.prompt_left[r] > left or s.prompt_left[r] * s.ranks + s.decode_tokens()
                                > s.chunk_cap * s.ranks):
                break  # a whole prompt fits neither the step nor one rank's budget beside its decodes
            q = min(s.prompt_left[r], left, s.chunk_cap)
            s.plan_q[s.plan_n + take] = q
            take += 1
            tokens += q
            promised += final
            running += 1
            left -= q
        if take and s.decoding_n > 0 and self.batch_waiting and self.wait_for_tokens(
                tokens + s.decode_tokens()):
            take = 0
        if cap:
            self.visible -= take
        for _ in range(take):
            r = s.pop_waiting()
            s.admit(r)
            s.plan_chunk(r, s.plan_q[s.plan_n])
        s.plan_step(True, False)
