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

from typing import ClassVar

from servesim._checks import check_int
from servesim.sim.schedulers.base import EngineState, Scheduler, StepPlan

__all__ = ["SglangScheduler"]

RETRACT_DECODE_STEPS = 20
"""``global_config.retract_decode_steps``: the decode steps a retraction plans room for."""

QUIET_STEPS_WAITING = 16
"""While a request waits for room, the decode stretch is advanced at most this many steps at
once, so that the decaying ``new_token_ratio`` is re-read (0.016 of it per stretch)."""


class SglangScheduler(Scheduler):
    """SGLang (see the module docstring)."""

    name: ClassVar[str] = "sglang"

    def __init__(self, profile, options=None):  # type: ignore[no-untyped-def]
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

    def recv_interval(self) -> int:
        """``--scheduler-recv-interval`` (``managers/scheduler_recv_skipper.py``): before each
        iteration the scheduler adds the weight of the batch it last ran to a counter, 1 for a
        decode step and 1,000 for any other (a prefill), and polls its request socket only when
        the counter reaches the interval, then starts again from 0; an idle scheduler polls at once."""
        return int(self.options["scheduler_recv_interval"])

    def prepare(self, s: EngineState) -> None:
        s.long_output = float(self.options["clip_max_new_tokens"])  # the outputs the clip shortens

    def _reserved(self, s: EngineState) -> float:
        """KV the running requests are expected to still write: ratio x clipped remaining output."""
        clip = self.options["clip_max_new_tokens"]
        if s.long_count == 0:  # no output longer than the clip: the running sums are exact
            total = s.remaining_output()
        else:
            total = sum(min(r.osl - s.generated_of(r), clip) for r in s.decoding.values())
        for r in s.chunking:
            total += min(r.osl - r.generated, clip)
        return self.ratio * max(0.0, total)

    def schedule(self, s: EngineState) -> StepPlan:
        o = self.options
        chunk_left = s.budget
        input_left = int(o["max_prefill_tokens"])
        chunks = []
        cut = 0  # chunked requests (one per DP rank) whose prompt goes on past this step
        for r in s.chunking:  # the chunked request continues first
            q = min(r.prompt_left, chunk_left, input_left, s.chunk_cap)
            if q <= 0 or q > s.capacity - s.used:
                break
            chunks.append((r, q))
            chunk_left -= q
            input_left -= q
            cut += q < r.prompt_left
        if s.waiting and cut < s.ranks:
            rem = s.capacity - s.used - self._reserved(s)
            clip = o["clip_max_new_tokens"]
            while s.waiting and chunk_left > 0 and s.running < s.slots:
                r = s.waiting[0]
                total = r.prompt_left + min(r.osl - r.generated, clip)
                if total >= rem:  # NO_TOKEN: the cache cannot promise it room
                    break
                if r.prompt_left > input_left and chunks:  # OTHER: the batch is full
                    break
                q = min(r.prompt_left, chunk_left, s.chunk_cap)
                s.waiting.popleft()
                s.admit(r)
                chunks.append((r, q))
                chunk_left -= q
                input_left -= q
                rem -= total
                if q < r.prompt_left:  # cut at the chunk size: the one chunked request of a rank
                    cut += 1
                    if cut >= s.ranks:
                        break
        if chunks:
            return StepPlan(bool(o["enable_mixed_chunk"]), chunks, False)
        preempted = s.make_room_for_decode()
        if preempted:
            # retract_decode: the ratio becomes what the survivors have decoded plus 20 steps each,
            # over what they may write in all.
            left = list(s.decoding.values())
            total = sum(r.osl for r in left)
            decoded = sum(s.generated_of(r) for r in left)
            self.ratio = min(1.0, (decoded + RETRACT_DECODE_STEPS * len(left)) / total) if total else 1.0
        return StepPlan(True, [], preempted)

    def after_step(self, s: EngineState, plan: StepPlan, steps: int) -> None:
        if plan.decode and not plan.chunks and not plan.preempted:
            o = self.options
            self.ratio = max(float(o["min_new_token_ratio"]),
                             self.ratio - steps * float(o["new_token_ratio_decay"]))

    def quiet_steps(self, s: EngineState) -> float:
        return QUIET_STEPS_WAITING if s.waiting else float("inf")
