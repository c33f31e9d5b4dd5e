"""SGLang's scheduler: prefill first, prefill and decode in separate steps, reserved output.

From ``python/sglang/srt/managers/scheduler.py`` and ``schedule_policy.py``:

1. **Prefill first.**  ``Scheduler.get_next_batch_to_run`` builds a prefill (extend)
   batch whenever it can (``get_new_batch_prefill``, "Run prefill first if
   possible") and runs the decode batch only when there is none: every arrival
   stalls the running decodes for its prefill step.  With ``--enable-mixed-chunk``
   (off by default, ``enable_mixed_chunk=False`` in ``server_args.py``) the decodes
   ride along in the prefill batch instead, as in vLLM.
2. **The extend batch.**  The request being chunked continues first (at most one
   is chunked at a time), then waiting requests in order (FCFS for random
   prompts: no prefix to share), while running slots remain, at most
   ``--chunked-prefill-size`` tokens in the batch (a longer prompt is cut there and
   continues next step) and ``--max-prefill-tokens`` (16,384) in all.
3. **Admission against a reservation** (``PrefillAdder``): a request is taken when
   its prompt plus its ``max_new_tokens`` (clipped at ``CLIP_MAX_NEW_TOKENS`` =
   4,096) fit in the free KV cache less what the running requests are expected to
   still write, ``new_token_ratio x`` their remaining output (each clipped the
   same way).  ``new_token_ratio`` starts at ``init_new_token_ratio`` 0.7, falls by
   ``new_token_ratio_decay`` 0.001 per decode step to ``min_new_token_ratio`` 0.1,
   and, when a decode step runs out of room and retracts requests (``retract_decode``:
   the fewest output tokens first, i.e. the newest; recomputed later), becomes
   ``min(1, (tokens decoded + 20 x survivors) / their max_new_tokens)``.
4. **Receive interval** (``--scheduler-recv-interval``, default 1): the scheduler polls for new
   requests only when a counter of the decode steps since its last poll reaches the interval (a
   prefill step counts 1,000, an idle scheduler polls at once;
   ``managers/scheduler_recv_skipper.py``), so during decoding a sent request waits for the next
   poll.  The loop keeps such requests in an inbox (:func:`servesim.sim.batching.run_benchmark`).
5. **Overlap schedule**: the CPU prepares step n + 1 while the GPU runs step n
   (the engine profile's ``overlap``), and CUDA graphs run decode batches only
   (``cuda_graph_decode_only``).

Defaults (``server_args.py``, ``_handle_gpu_memory_settings``): chunked prefill of
8,192 tokens on 80-160 GB GPUs (H100, H200) and 16,384 above (B200), 4,096 below.
"""

from __future__ import annotations

import math
from typing import ClassVar

from servesim._checks import check_int
from servesim.hardware.engines import EngineProfile
from servesim.sim.schedulers.base import EngineState, Options, Scheduler

__all__ = ["SglangScheduler"]

RETRACT_DECODE_STEPS = 20
"""``global_config.retract_decode_steps``: the decode steps a retraction plans room for."""

QUIET_STEPS_WAITING = 16
"""While a request waits for room, the decode stretch is advanced at most this many steps at
once, so that the decaying ``new_token_ratio`` is re-read (0.016 of it per stretch)."""


class SglangScheduler(Scheduler):
    """SGLang (see the module docstring: ``python/sglang/srt/managers/scheduler.py``,
    ``Scheduler.get_next_batch_to_run``, and ``schedule_policy.py``, ``PrefillAdder``)."""

    name: ClassVar[str] = "sglang"
    ratio: float  # new_token_ratio
    max_prefill_tokens: int
    mixed: bool  # --enable-mixed-chunk
    clip: float  # CLIP_MAX_NEW_TOKENS
    min_ratio: float
    decay: float

    def __init__(self, profile: EngineProfile, options: Options | None = None) -> None:
        super().__init__(profile, options)
        o = self.options
        o.setdefault("max_prefill_tokens", 16384)
        o.setdefault("enable_mixed_chunk", False)
        o.setdefault("init_new_token_ratio", 0.7)
        o.setdefault("min_new_token_ratio", 0.1)
        o.setdefault("new_token_ratio_decay", 0.001)
        o.setdefault("clip_max_new_tokens", 4096)
        o.setdefault("scheduler_recv_interval", 1)
        check_int("scheduler_recv_interval", o["scheduler_recv_interval"], lo=1, hi=10_000)
        self.ratio = float(o["init_new_token_ratio"])
        self.max_prefill_tokens = int(o["max_prefill_tokens"])
        self.mixed = bool(o["enable_mixed_chunk"])
        self.clip = float(o["clip_max_new_tokens"])
        self.min_ratio = float(o["min_new_token_ratio"])
        self.decay = float(o["new_token_ratio_decay"])

    def recv_interval(self) -> int:
        """``--scheduler-recv-interval`` (``managers/scheduler_recv_skipper.py``): before each
        iteration the scheduler adds the weight of the batch it last ran to a counter, 1 for a
        decode step and 1,000 for any other (a prefill), and polls its request socket only when
        the counter reaches the interval, then starts again from 0; an idle scheduler polls at once."""
        return int(self.options["scheduler_recv_interval"])

    def prepare(self, s: EngineState) -> None:
        s.long_output = float(self.options["clip_max_new_tokens"])  # the outputs the clip shortens

    def reserved(self, s: EngineState) -> float:
        """KV the running requests are expected to still write: ratio x clipped remaining output."""
        clip = self.clip
        if s.long_count == 0:  # no output longer than the clip: the running sums are exact
            total = s.remaining_output()
        else:
            total = 0.0
            r = s.decoding_head
            while r >= 0:
                x = s.osl[r] - s.generated_of(r)
                total += x if x <= clip else clip
                r = s.next[r]
        for c in range(s.chunking_n):
            r = s.chunking[c]
            x = s.osl[r] - s.generated[r]
            total += x if x <= clip else clip
        return self.ratio * (total if total > 0.0 else 0.0)

    def schedule(self, s: EngineState) -> None:
        chunk_left = s.budget
        input_left = self.max_prefill_tokens
        cut = 0  # chunked requests (one per DP rank) whose prompt goes on past this step
        for c in range(s.chunking_n):  # the chunked request continues first
            r = s.chunking[c]
            q = min(s.prompt_left[r], chunk_left, input_left, s.chunk_cap)
            if q <= 0 or q > s.capacity - s.used:
                break
            s.plan_chunk(r, q)
            chunk_left -= q
            input_left -= q
            if q < s.prompt_left[r]:
                cut += 1
        if s.waiting_n > 0 and cut < s.ranks:
            rem = s.capacity - s.used - self.reserved(s)
            clip = self.clip
            while s.waiting_n > 0 and chunk_left > 0 and s.running() < s.slots:
                r = s.waiting_at(0)
                x = s.osl[r] - s.generated[r]
                total = s.prompt_left[r] + (x if x <= clip else clip)
                if total >= rem:  # NO_TOKEN: the cache cannot promise it room
                    break
                if s.prompt_left[r] > input_left and s.plan_n > 0:  # OTHER: the batch is full
                    break
                q = min(s.prompt_left[r], chunk_left, s.chunk_cap)
                s.pop_waiting()
                s.admit(r)
                s.plan_chunk(r, q)
                chunk_left -= q
                input_left -= q
                rem -= total
                if q < s.prompt_left[r]:  # cut at the chunk size: the one chunked request of a rank
                    cut += 1
                    if cut >= s.ranks:
                        break
        if s.plan_n > 0:
            s.plan_step(self.mixed, False)
            return
        preempted = s.make_room_for_decode()
        if preempted:
            # retract_decode: the ratio becomes what the survivors have decoded plus 20 steps each,
            # over what they may write in all.
            total_osl = 0
            decoded = 0.0
            r = s.decoding_head
            while r >= 0:
                total_osl += s.osl[r]
                decoded += s.generated_of(r)
                r = s.next[r]
            if total_osl:
                x = (decoded + RETRACT_DECODE_STEPS * s.decoding_n) / total_osl
                self.ratio = x if x < 1.0 else 1.0
            else:
                self.ratio = 1.0
        s.plan_step(True, preempted)

    def after_step(self, s: EngineState, steps: int) -> None:
        if s.plan_decode and s.plan_n == 0 and not s.plan_preempted:
            x = self.ratio - steps * self.decay
            self.ratio = x if x > self.min_ratio else self.min_ratio

    def quiet_steps(self, s: EngineState) -> float:
        return QUIET_STEPS_WAITING if s.waiting_n > 0 else math.inf
