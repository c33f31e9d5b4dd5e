"""What every engine's scheduler shares: the requests, the KV cache's books, one step's plan.

:class:`EngineState` keeps the books of one replica during a benchmark: requests
waiting, prompts being prefilled (``chunking``), sequences decoding, KV tokens
held and promised.  A scheduler policy (one module per engine beside this one)
reads it and returns a :class:`StepPlan`: whether the decoding sequences take a
step, which prefill chunks run beside them, and whether it preempted.  The loop
(:func:`servesim.sim.batching.run_benchmark`) prices the plan and advances time.

Decoding sequences advance together: ``G`` counts decode steps, each adding
``per_step`` tokens (``E[n]`` with speculation) to every decoding sequence.  One
that joined at ``G = g0`` with ``c`` cached tokens holds ``c + (G - g0) per_step``
tokens and finishes at ``G = g0 + steps``: no per-sequence work per step.  Every
key is a request's send order (``index``), never an object's identity, so runs
are reproducible byte for byte.

Standard library only; nothing here prints.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from servesim.hardware.engines import EngineProfile

__all__ = ["EngineState", "Request", "Scheduler", "StepPlan"]


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
