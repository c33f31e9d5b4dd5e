"""The engine scheduler policies as they were before the loop was written once (issue 47), frozen
beside ``_baseline_engine.py``, which runs them: ``servesim.sim.schedulers`` ``base``, ``vllm``,
``sglang`` and ``trtllm`` verbatim, in one file.  Not part of the package; nothing imports it but
the benchmark.
"""

# ruff: noqa
# mypy: ignore-errors

from __future__ import annotations



import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from servesim.hardware.engines import EngineProfile



@dataclass(eq=False)
class Request:
    """One request in the engine (token counts; times in seconds)."""

    arrival: float  # when the client sent it
    prompt_left: int  # prompt tokens not yet prefilled
    context: int = 0  # tokens in the KV cache
    generated: float = 0.0
    first: float = -1.0  # time of its first token (-1: none yet)
    admitted: int = 0  # admission order, for preemption (newest first)
    index: int = 0  # send order
    osl: int = 1  # output tokens it will generate
    final: float = 0.0  # tokens it will hold when done (what a reserving engine sets aside)


@dataclass
class StepPlan:
    """One step as a policy decides it."""

    decode: bool = True  # the decoding sequences take a step
    chunks: list[tuple[Request, int]] = field(default_factory=list)  # (request, prompt tokens)
    preempted: bool = False


class EngineState:
    """The books of one replica (see the module docstring)."""

    def __init__(self, capacity: int, slots: int, budget: int, positions: int, per_step: float,
                 steps_to_finish: Callable[[Request], float]) -> None:
        self.capacity = capacity  # KV tokens the cache holds
        self.slots = slots  # most running sequences
        self.budget = budget  # the engine's per-step token budget (all DP ranks together)
        self.chunk_cap = budget  # most tokens of one request's chunk (one DP rank's budget)
        self.ranks = 1  # attention data-parallel ranks: each may carry one chunked prompt
        self.pos = positions  # tokens each decoding sequence runs per step (k + 1 with speculation)
        self.per_step = per_step  # tokens each decoding sequence keeps per step on average
        self._steps_to_finish = steps_to_finish
        self.waiting: deque[Request] = deque()
        self.chunking: list[Request] = []  # admitted, prompt not finished (admission order)
        self.decoding: dict[int, Request] = {}  # index -> request, in the order they began decoding
        self.joined: dict[int, tuple[float, float]] = {}  # index -> (G at join, context - G per_step)
        self.finish_heap: list[tuple[float, int]] = []  # (G at which it finishes, index)
        self.G = 0.0
        self.ctx_offset = 0.0  # sum over decoding of (context - G per_step), both at join
        self.used = 0.0  # KV tokens held
        self.promised = 0.0  # final tokens of every running request
        self.order = 0
        self.preemptions = 0
        # Running sums over the decoding sequences, for reservations in O(1): their output
        # lengths, their generated tokens less G per_step at join, and how many have an output
        # longer than ``long_output`` (set by a policy that clips long outputs).
        self.long_output = float("inf")
        self.osl_sum = 0.0
        self.gen_offset = 0.0
        self.long_count = 0

    # ------------------------------------------------------------------ counts

    @property
    def running(self) -> int:
        return len(self.decoding) + len(self.chunking)

    def decode_tokens(self) -> int:
        """KV tokens the decoding sequences add in their next step."""
        return len(self.decoding) * self.pos

    def mean_context(self) -> float:
        b = len(self.decoding)
        return self.ctx_offset / b + self.G * self.per_step if b else 0.0

    def remaining_output(self) -> float:
        """Output tokens the decoding sequences have still to write, in all."""
        return self.osl_sum - (self.gen_offset + len(self.decoding) * self.G * self.per_step)

    def generated_of(self, r: Request) -> float:
        """Output tokens ``r`` holds now (decoding or not)."""
        j = self.joined.get(r.index)
        return r.generated if j is None else r.generated + (self.G - j[0]) * self.per_step

    # ------------------------------------------------------------------ moves

    def admit(self, r: Request) -> None:
        """``r`` leaves the queue and starts its prompt (its final size is promised)."""
        self.order += 1
        r.admitted = self.order
        r.final = r.context + r.prompt_left + (r.osl - r.generated)
        self.promised += r.final
        self.chunking.append(r)

    def join(self, r: Request) -> None:
        """``r`` starts (or resumes) decoding."""
        self.decoding[r.index] = r
        off = r.context - self.G * self.per_step
        self.joined[r.index] = (self.G, off)
        self.ctx_offset += off
        self.osl_sum += r.osl
        self.gen_offset += r.generated - self.G * self.per_step
        self.long_count += r.osl > self.long_output
        heapq.heappush(self.finish_heap, (self.G + self._steps_to_finish(r), r.index))

    def leave(self, index: int) -> Request:
        """The decoding sequence ``index`` stops decoding; its tokens are brought up to date."""
        r = self.decoding.pop(index)
        g0, off = self.joined.pop(index)
        self.ctx_offset -= off
        self.osl_sum -= r.osl
        self.gen_offset -= r.generated - g0 * self.per_step
        self.long_count -= r.osl > self.long_output
        r.context = round(off + self.G * self.per_step)
        r.generated += (self.G - g0) * self.per_step
        return r

    def newest_running(self) -> Request:
        """The running request admitted last (decoding or still prefilling): the first to go."""
        last = self.decoding[next(reversed(self.decoding))] if self.decoding else None
        if self.chunking and (last is None or self.chunking[-1].admitted > last.admitted):
            return self.chunking[-1]
        assert last is not None
        return last

    def make_room_for_decode(self) -> bool:
        """Preempt the newest running requests until the decoding sequences' next tokens fit in the
        cache; whether any was preempted."""
        preempted = False
        while self.decoding and self.used + self.decode_tokens() > self.capacity:
            self.preempt(self.newest_running())
            preempted = True
        return preempted

    def preempt(self, victim: Request) -> None:
        """Recompute preemption: ``victim`` gives its KV back and waits, first in line, to be
        prefilled again over its prompt and the tokens it had generated."""
        if victim.index in self.decoding:
            self.leave(victim.index)
        else:
            self.chunking.remove(victim)
        self.used -= victim.context
        self.promised -= victim.final
        self.preemptions += 1
        self.waiting.appendleft(Request(victim.arrival, victim.context + victim.prompt_left, 0,
                                        victim.generated, victim.first, index=victim.index, osl=victim.osl))


class Scheduler:
    """A policy: reads the books, plans the next step.  One subclass per engine, each in its own
    module, its docstring citing the engine source it follows."""

    name: ClassVar[str] = ""

    def __init__(self, profile: EngineProfile, options: dict[str, Any] | None = None) -> None:
        self.profile = profile
        self.options: dict[str, Any] = {**dict(profile.scheduler), **(options or {})}

    def prepare(self, s: EngineState) -> None:
        """Set up the books before the first step (default: nothing)."""

    def schedule(self, s: EngineState) -> StepPlan:  # pragma: no cover - every policy overrides it
        raise NotImplementedError

    def after_step(self, s: EngineState, plan: StepPlan, steps: int) -> None:
        """Bookkeeping after ``steps`` steps of ``plan`` ran (default: none)."""

    def reference_only(self) -> bool:
        """Whether this policy's options need the reference (Python) loop: the compiled loop does
        not model them."""
        return self.recv_interval() > 1

    def recv_interval(self) -> int:
        """Decode steps between the scheduler's polls for new requests (1: every step).  The loop
        keeps requests sent between polls aside until the next one (:mod:`servesim.sim.schedulers.sglang`
        says how SGLang counts)."""
        return 1

    def quiet_steps(self, s: EngineState) -> float:
        """Pure decode steps that may run in one move before the policy must decide again
        (default: until a sequence finishes or a request arrives)."""
        return float("inf")

    def describe(self) -> dict[str, Any]:
        """The policy's name, token budget, sequence limit and options, for the output."""
        return {"scheduler": self.name, "token_budget": self.profile.max_num_batched_tokens,
                "max_running": self.profile.max_num_seqs, "overlap": self.profile.overlap, **self.options}


# ---------------------------------------------------------------- vllm


from typing import ClassVar



VLLM_WATERMARK = 0.01
"""Share of the KV cache kept free when admitting a new request."""


class VllmScheduler(Scheduler):
    """vLLM V1 (see the module docstring)."""

    name: ClassVar[str] = "vllm"

    def schedule(self, s: EngineState) -> StepPlan:
        reserve = bool(self.options.get("reserve", False))
        preempted = s.make_room_for_decode()
        need = s.decode_tokens()
        left = s.budget - need
        chunks = []
        for r in s.chunking:
            if left <= 0:
                break
            q = min(r.prompt_left, left, s.chunk_cap)
            if q > s.capacity - s.used - need:  # the chunk's blocks must all be free
                break
            chunks.append((r, q))
            left -= q
            need += q
        headroom = s.decode_tokens() + VLLM_WATERMARK * s.capacity
        while not preempted and s.waiting and left > 0 and s.running < s.slots:
            r = s.waiting[0]
            final = r.context + r.prompt_left + (r.osl - r.generated)
            if reserve and s.capacity - s.promised - VLLM_WATERMARK * s.capacity < final:
                break
            q = min(r.prompt_left, left, s.chunk_cap)
            if q > int(s.capacity - s.used - need - headroom):
                break
            s.waiting.popleft()
            s.admit(r)
            chunks.append((r, q))
            left -= q
            need += q
        return StepPlan(True, chunks, preempted)


# ---------------------------------------------------------------- sglang


from typing import ClassVar

from servesim._checks import check_int


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


# ---------------------------------------------------------------- trtllm


from typing import ClassVar

from servesim._checks import ParameterError, check_int, check_real



class TrtllmScheduler(Scheduler):
    """TensorRT-LLM (see the module docstring)."""

    name: ClassVar[str] = "trtllm"

    def __init__(self, profile, options=None):  # type: ignore[no-untyped-def]
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
        self._waited = 0  # iterations context requests have waited for every rank to hold one
        self._batched = 0  # iterations they have waited, every rank holding one, to batch more
        self._batch_waited = 0  # iterations contexts have waited for enough tokens (batch waiting)
        self._visible = 0  # waiting requests the executor has been handed (item 5)

    @property
    def balancing(self) -> bool:
        return bool(self.options["attention_dp_balance"]) and self.profile.dp_ranks > 1

    @property
    def batch_waiting(self) -> bool:
        o = self.options
        return self.profile.dp_ranks == 1 and (int(o["batch_wait_timeout_iters"]) > 0
                                               or float(o["batch_wait_max_tokens_ratio"]) > 0)

    def reference_only(self) -> bool:
        return self.balancing or self.batch_waiting or super().reference_only()

    def _wait_for_tokens(self, tokens: int) -> bool:
        """Whether batch waiting keeps this iteration's context requests (``tokens`` with the
        generation tokens) waiting for more."""
        o = self.options
        if (self._batch_waited >= int(o["batch_wait_timeout_iters"])
                or tokens >= float(o["batch_wait_max_tokens_ratio"]) * self.profile.max_num_batched_tokens):
            self._batch_waited = 0
            return False
        self._batch_waited += 1
        return True

    def _hold_contexts(self, s: EngineState) -> bool:
        """Whether the attention-DP balance keeps this iteration's new context requests waiting."""
        every_ctx = len(s.waiting) >= s.ranks
        every_gen = len(s.decoding) >= s.ranks
        if every_ctx:
            self._waited = 0
            if every_gen and self._batched < int(self.options["attention_dp_batching_wait_iters"]):
                self._batched += 1
                return True
            self._batched = 0
            return False
        self._waited += 1
        if self._waited >= int(self.options["attention_dp_timeout_iters"]) or not every_gen:
            self._waited = 0
            return False
        return True

    @property
    def new_per_step(self) -> int:
        """Waiting requests handed to the scheduler (made visible to it) each iteration; 0: all at once.

        A step admits only visible requests, so this caps new arrivals a step without capping
        requests that became visible earlier; attention DP lifts the limit."""
        return int(self.options["new_requests_per_iteration"]) if self.profile.dp_ranks == 1 else 0

    def after_step(self, s: EngineState, plan: StepPlan, steps: int) -> None:
        # a stretch of pure decode steps hands the executor one request a step as well
        if self.new_per_step and steps > 1:
            self._visible = min(len(s.waiting), self._visible + (steps - 1) * self.new_per_step)

    def quiet_steps(self, s: EngineState) -> float:
        # the balance and the batch waiting decide each iteration
        return 1.0 if (self.balancing or self.batch_waiting) and s.waiting else float("inf")

    def check_prompt(self, tokens: int) -> None:
        """A whole prompt must fit in one step's budget (one rank's, with attention DP) unless prefill
        is chunked."""
        budget = self.profile.chunk_tokens or self.profile.max_num_batched_tokens
        if not self.options["enable_chunked_prefill"] and tokens > budget:
            raise ParameterError("max_num_tokens", budget,
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
        hold = self.balancing and bool(s.waiting) and self._hold_contexts(s)
        take: list[int] = []  # prompt tokens of the queue's first requests that the step could take
        promised, running = s.promised, s.running
        cap = self.new_per_step
        if cap:
            self._visible = min(len(s.waiting), self._visible + cap)
        for r in s.waiting:
            if hold or left <= 0 or running >= s.slots or (cap and len(take) >= self._visible):
                break
            final = r.context + r.prompt_left + (r.osl - r.generated)
            if promised + final > s.capacity:
                break
            if not chunked and (r.prompt_left > left or r.prompt_left * s.ranks + s.decode_tokens()
                                > s.chunk_cap * s.ranks):
                break  # a whole prompt fits neither the step nor one rank's budget beside its decodes
            q = min(r.prompt_left, left, s.chunk_cap)
            take.append(q)
            promised += final
            running += 1
            left -= q
        if take and s.decoding and self.batch_waiting and self._wait_for_tokens(
                sum(take) + s.decode_tokens()):
            take = []
        if cap:
            self._visible -= len(take)
        for q in take:
            r = s.waiting.popleft()
            s.admit(r)
            chunks.append((r, q))
        return StepPlan(True, chunks, False)


SCHEDULERS = {"vllm": VllmScheduler, "sglang": SglangScheduler, "trtllm": TrtllmScheduler}


def make_scheduler(name, profile, options=None):
    return SCHEDULERS[name](profile, options)
