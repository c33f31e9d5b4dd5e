"""What every engine's scheduler shares: the requests, the KV cache's books, one step's plan.

:class:`EngineState` keeps the books of one replica during a benchmark: requests
waiting, prompts being prefilled (``chunking``), sequences decoding, KV tokens
held and promised.  A scheduler policy (one module per engine beside this one)
reads them and writes the step's plan into them (:meth:`EngineState.plan_chunk`,
:meth:`EngineState.plan_step`): whether the decoding sequences take a step, which
prefill chunks run beside them, and whether it preempted.  The loop
(:mod:`servesim.sim.loop`) prices the plan and advances time.

Decoding sequences advance together: ``G`` counts decode steps, each adding
``per_step`` tokens (``E[n]`` with speculation) to every decoding sequence.  One
that joined at ``G = g0`` with ``c`` cached tokens holds ``c + (G - g0) per_step``
tokens and finishes at ``G = g0 + steps``: no per-sequence work per step.

**Written once, run two ways.**  A request is its send order ``r``, an index into the
books' columns (``prompt_left[r]``, ``context[r]``, ...); the queues are rings and
linked lists over those indices.  The books, and every policy, are written in the
part of Python that numba compiles: run as they are (columns as lists, the
reference, standard library only), or compiled by :mod:`servesim.sim._engine_loop`,
which turns each class's annotated fields into a numba structure and its methods into
compiled methods of it (columns as arrays) without a second copy of any of them.  A
field is an annotation of ``int``, ``float``, ``bool``, :data:`Ints` or :data:`Floats`;
the few pieces that cannot be one text for both (CPython's random generator, which
numba cannot call, and the map of gaps between tokens) are the functions in
:data:`TWINS`, each with its compiled implementation beside the compile step.  Every
key is a request's send order, never an object's identity, so runs are reproducible
byte for byte.  Nothing here prints.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from servesim.hardware.engines import EngineProfile

__all__ = ["EngineState", "Floats", "Ints", "Options", "Scheduler", "StepPlan"]

_T = TypeVar("_T")

Ints = list[int]
"""A column of integers (a list when run as Python, an int64 array when compiled)."""
Floats = list[float]
"""A column of floats (a list when run as Python, a float64 array when compiled)."""


def list_column(value: _T, n: int) -> list[_T]:
    """A column of ``n`` values, as the books run in Python."""
    return [value] * n


def draw(s: EngineState) -> float:
    """The acceptance generator's next ``random.random()`` (compiled: CPython's Mersenne Twister
    from the same state, :func:`servesim.sim._engine_loop._mt_random`)."""
    rng: random.Random = s.rng
    return rng.random()


def grown(column: list[Any]) -> list[Any]:
    """``column`` with twice the room (its second half is garbage, to be overwritten)."""
    return column + column


TWINS: tuple[str, ...] = ("draw", "grown")
"""Functions here whose compiled implementation differs in text (same result, bit for bit)."""

Options = dict[str, float | bool]
"""A policy's options by name (the engine's: ``EngineProfile.scheduler``, and a run's own: vLLM's
``reserve``), each a number or a switch."""

HEAP_START = 2
"""The finish heap starts with room for this many entries per request (it grows when preemptions
leave many stale entries in it)."""


class StepPlan:
    """One step as a policy planned it, read from the books (for tests and tools; the loop reads
    the books)."""

    def __init__(self, s: EngineState) -> None:
        self.decode = bool(s.plan_decode)
        self.chunks = [(s.plan_r[c], s.plan_q[c]) for c in range(s.plan_n)]  # (request, tokens)
        self.preempted = bool(s.plan_preempted)


class EngineState:
    """The books of one replica (see the module docstring)."""

    # the engine
    capacity: int  # KV tokens the cache holds
    slots: int  # most running sequences
    budget: int  # the engine's per-step token budget (all DP ranks together)
    chunk_cap: int  # most tokens of one request's chunk (one DP rank's budget)
    ranks: int  # attention data-parallel ranks: each may carry one chunked prompt
    pos: int  # tokens each decoding sequence runs per step (k + 1 with speculation)
    per_step: float  # tokens each decoding sequence keeps per step on average
    spec_k: int  # drafts per step (-1: no speculation)
    alpha: float  # each draft's acceptance probability
    long_output: float  # outputs longer than this are counted (set by a policy that clips them)
    # one entry per request, by send order
    arrival: Floats  # when the client sent it
    prompt_left: Ints  # prompt tokens not yet prefilled
    context: Ints  # tokens in the KV cache
    generated: Floats  # output tokens written
    first: Floats  # time of its first token (-1: none yet)
    admitted: Ints  # admission order, for preemption (newest first)
    osl: Ints  # output tokens it will generate
    final: Floats  # tokens it will hold when done (what a reserving engine sets aside)
    decoding: Ints  # 1 while it decodes
    prev: Ints  # the decoding sequences as a list in the order they began decoding
    next: Ints
    g0: Floats  # G when it joined the decoding sequences
    offset: Floats  # its context less G per_step, both at join
    # the queues
    waiting: Ints  # a ring of request indices: the queue
    waiting_head: int
    waiting_n: int
    chunking: Ints  # admitted, prompt not finished (admission order)
    chunking_n: int
    decoding_head: int
    decoding_tail: int
    decoding_n: int
    heap_g: Floats  # the finish heap: (G at which it finishes, index), heapq's order
    heap_i: Ints
    heap_n: int
    # the books
    G: float
    ctx_offset: float  # sum over decoding of (context - G per_step), both at join
    used: float  # KV tokens held
    promised: float  # final tokens of every running request
    order: int
    preemptions: int
    # Running sums over the decoding sequences, for reservations in O(1): their output lengths,
    # their generated tokens less G per_step at join, and how many have an output longer than
    # ``long_output``.
    osl_sum: float
    gen_offset: float
    long_count: int
    # the acceptance generator (compiled: CPython's Mersenne Twister words and position)
    mt: Ints
    mt_i: int
    # the step's plan
    plan_r: Ints
    plan_q: Ints
    plan_n: int
    plan_decode: bool
    plan_preempted: bool

    def __init__(self, capacity: int, slots: int, budget: int, positions: int, per_step: float,
                 requests: int, spec_k: int = -1, alpha: float = 0.0, seed: int = 0,
                 column: Callable[[Any, int], Any] = list_column) -> None:
        """The books of a run of ``requests`` requests; ``column(value, n)`` makes each column (a
        list; compiled, an array)."""
        n = max(1, requests)
        self.capacity, self.slots, self.budget, self.chunk_cap = capacity, slots, budget, budget
        self.ranks, self.pos, self.per_step = 1, positions, per_step
        self.spec_k, self.alpha, self.long_output = spec_k, alpha, math.inf
        self.arrival, self.generated, self.first = column(0.0, n), column(0.0, n), column(-1.0, n)
        self.final, self.g0, self.offset = column(0.0, n), column(0.0, n), column(0.0, n)
        self.prompt_left, self.context, self.admitted = column(0, n), column(0, n), column(0, n)
        self.osl, self.decoding = column(1, n), column(0, n)
        self.prev, self.next = column(-1, n), column(-1, n)
        self.waiting, self.chunking = column(0, n), column(0, n)
        self.waiting_head = self.waiting_n = self.chunking_n = self.decoding_n = 0
        self.decoding_head = self.decoding_tail = -1
        room = HEAP_START * n + 16
        self.heap_g, self.heap_i, self.heap_n = column(0.0, room), column(0, room), 0
        self.G = self.ctx_offset = self.used = self.promised = 0.0
        self.order = self.preemptions = self.long_count = 0
        self.osl_sum = self.gen_offset = 0.0
        self.rng = random.Random(seed)  # per-sequence acceptance draws (speculation only)
        state = self.rng.getstate()[1]
        self.mt, self.mt_i = column(0, 624), int(state[624])
        self.mt[:] = state[:624]
        self.plan_r, self.plan_q = column(0, n), column(0, n)
        self.plan_n = 0
        self.plan_decode = self.plan_preempted = False

    # ------------------------------------------------------------------ counts

    def running(self) -> int:
        return self.decoding_n + self.chunking_n

    def decode_tokens(self) -> int:
        """KV tokens the decoding sequences add in their next step."""
        return self.decoding_n * self.pos

    def mean_context(self) -> float:
        b = self.decoding_n
        return self.ctx_offset / b + self.G * self.per_step if b else 0.0

    def remaining_output(self) -> float:
        """Output tokens the decoding sequences have still to write, in all."""
        return self.osl_sum - (self.gen_offset + self.decoding_n * self.G * self.per_step)

    def generated_of(self, r: int) -> float:
        """Output tokens ``r`` holds now (decoding or not)."""
        if self.decoding[r]:
            return self.generated[r] + (self.G - self.g0[r]) * self.per_step
        return self.generated[r]

    def final_of(self, r: int) -> float:
        """Tokens ``r`` will hold when done: its cache, its prompt left and its output left."""
        return self.context[r] + self.prompt_left[r] + (self.osl[r] - self.generated[r])

    # ------------------------------------------------------------------ the queue

    def waiting_at(self, j: int) -> int:
        """The ``j``-th request in the queue (0: the first)."""
        k = self.waiting_head + j
        n = len(self.waiting)
        return self.waiting[k - n if k >= n else k]

    def pop_waiting(self) -> int:
        """The first request in the queue leaves it."""
        r = self.waiting[self.waiting_head]
        h = self.waiting_head + 1
        self.waiting_head = 0 if h == len(self.waiting) else h
        self.waiting_n -= 1
        return r

    def push_waiting(self, r: int) -> None:
        """``r`` joins the end of the queue."""
        k = self.waiting_head + self.waiting_n
        n = len(self.waiting)
        self.waiting[k - n if k >= n else k] = r
        self.waiting_n += 1

    def push_waiting_front(self, r: int) -> None:
        """``r`` waits first in line."""
        h = self.waiting_head - 1
        if h < 0:
            h += len(self.waiting)
        self.waiting[h] = r
        self.waiting_head = h
        self.waiting_n += 1

    # ------------------------------------------------------------------ moves

    def admit(self, r: int) -> None:
        """``r`` leaves the queue and starts its prompt (its final size is promised)."""
        self.order += 1
        self.admitted[r] = self.order
        final = self.final_of(r)
        self.final[r] = final
        self.promised += final
        self.chunking[self.chunking_n] = r
        self.chunking_n += 1

    def chunk_done(self, r: int) -> None:
        """``r``'s prompt is no longer being chunked (``list.remove``)."""
        n = self.chunking_n
        j = 0
        while self.chunking[j] != r:
            j += 1
        for m in range(j, n - 1):
            self.chunking[m] = self.chunking[m + 1]
        self.chunking_n = n - 1

    def steps_to_finish(self, r: int) -> float:
        """Decode steps sequence ``r`` needs: with speculation, its own accepted prefixes, drawn.

        Each step accepts the first j drafts with probability alpha^j (1 - alpha) (all k with
        alpha^k) and emits them plus one token of the target's: the i.i.d. model of the
        lab's section 2.1, drawn per sequence so that finishing times spread as they do in an
        engine.  The batch's context still grows by E[n] per step (the mean over sequences).
        """
        left = self.osl[r] - self.generated[r]
        k = self.spec_k
        if k < 0 or left <= 0:
            return (left if left > 0.0 else 0.0) / self.per_step
        steps = 0
        while left > 0:
            j = 0
            while j < k and draw(self) < self.alpha:
                j += 1
            left -= j + 1
            steps += 1
        return float(steps)

    def join(self, r: int) -> None:
        """``r`` starts (or resumes) decoding."""
        tail = self.decoding_tail
        self.decoding[r] = 1
        self.prev[r] = tail
        self.next[r] = -1
        if tail >= 0:
            self.next[tail] = r
        else:
            self.decoding_head = r
        self.decoding_tail = r
        self.decoding_n += 1
        off = self.context[r] - self.G * self.per_step
        self.g0[r] = self.G
        self.offset[r] = off
        self.ctx_offset += off
        self.osl_sum += self.osl[r]
        self.gen_offset += self.generated[r] - self.G * self.per_step
        if self.osl[r] > self.long_output:
            self.long_count += 1
        self.heap_push(self.G + self.steps_to_finish(r), r)

    def leave(self, r: int) -> None:
        """The decoding sequence ``r`` stops decoding; its tokens are brought up to date."""
        p = self.prev[r]
        nx = self.next[r]
        if p >= 0:
            self.next[p] = nx
        else:
            self.decoding_head = nx
        if nx >= 0:
            self.prev[nx] = p
        else:
            self.decoding_tail = p
        self.decoding[r] = 0
        self.decoding_n -= 1
        g0 = self.g0[r]
        off = self.offset[r]
        self.ctx_offset -= off
        self.osl_sum -= self.osl[r]
        self.gen_offset -= self.generated[r] - g0 * self.per_step
        if self.osl[r] > self.long_output:
            self.long_count -= 1
        self.context[r] = round(off + self.G * self.per_step)  # half to even, compiled or not
        self.generated[r] += (self.G - g0) * self.per_step

    def newest_running(self) -> int:
        """The running request admitted last (decoding or still prefilling): the first to go."""
        last = self.decoding_tail
        if self.chunking_n > 0:
            c = self.chunking[self.chunking_n - 1]
            if last < 0 or self.admitted[c] > self.admitted[last]:
                return c
        return last

    def make_room_for_decode(self) -> bool:
        """Preempt the newest running requests until the decoding sequences' next tokens fit in the
        cache; whether any was preempted."""
        preempted = False
        while self.decoding_n > 0 and self.used + self.decode_tokens() > self.capacity:
            self.preempt(self.newest_running())
            preempted = True
        return preempted

    def preempt(self, r: int) -> None:
        """Recompute preemption: ``r`` gives its KV back and waits, first in line, to be prefilled
        again over its prompt and the tokens it had generated."""
        if self.decoding[r]:
            self.leave(r)
        else:
            self.chunk_done(r)
        self.used -= self.context[r]
        self.promised -= self.final[r]
        self.preemptions += 1
        self.prompt_left[r] = self.context[r] + self.prompt_left[r]
        self.context[r] = 0
        self.admitted[r] = 0
        self.final[r] = 0.0
        self.push_waiting_front(r)

    # ------------------------------------------------------------------ the finish heap

    def heap_push(self, g: float, r: int) -> None:
        """Push ``(g, r)`` onto the finish heap (``heapq.heappush``'s order on tuples)."""
        if self.heap_n == len(self.heap_g):
            self.heap_g = grown(self.heap_g)
            self.heap_i = grown(self.heap_i)
        pos = self.heap_n
        self.heap_n = pos + 1
        hg, hi = self.heap_g, self.heap_i
        while pos > 0:
            parent = (pos - 1) >> 1
            pg = hg[parent]
            pi = hi[parent]
            if g < pg or (g == pg and r < pi):
                hg[pos] = pg
                hi[pos] = pi
                pos = parent
            else:
                break
        hg[pos] = g
        hi[pos] = r

    def heap_pop(self) -> None:
        """Remove the smallest ``(g, r)`` of the finish heap."""
        n = self.heap_n - 1
        self.heap_n = n
        if n == 0:
            return
        hg, hi = self.heap_g, self.heap_i
        lg = hg[n]
        li = hi[n]
        pos = 0
        while True:
            child = 2 * pos + 1
            if child >= n:
                break
            right = child + 1
            if right < n and (hg[right] < hg[child] or (hg[right] == hg[child] and hi[right] < hi[child])):
                child = right
            cg = hg[child]
            if cg < lg or (cg == lg and hi[child] < li):
                hg[pos] = cg
                hi[pos] = hi[child]
                pos = child
            else:
                break
        hg[pos] = lg
        hi[pos] = li

    # ------------------------------------------------------------------ the plan

    def plan_chunk(self, r: int, q: int) -> None:
        """The step runs ``q`` prompt tokens of ``r``."""
        self.plan_r[self.plan_n] = r
        self.plan_q[self.plan_n] = q
        self.plan_n += 1

    def plan_step(self, decode: bool, preempted: bool) -> None:
        """The step's other choices: whether the decoding sequences step, whether it preempted."""
        self.plan_decode = decode
        self.plan_preempted = preempted

    # ------------------------------------------------------------------ Python only

    def add_request(self, r: int, arrival: float, prompt: int, osl: int) -> None:
        """Request ``r`` arrives in the queue (for tools and tests; the loop's client does this)."""
        self.arrival[r], self.prompt_left[r], self.osl[r] = arrival, prompt, osl
        self.push_waiting(r)

    def plan(self) -> StepPlan:
        """The plan the policy last wrote."""
        return StepPlan(self)


class Scheduler:
    """A policy: reads the books, plans the next step.  One subclass per engine, each in its own
    module, its docstring citing the engine source it follows.

    Its methods :meth:`schedule`, :meth:`after_step` and :meth:`quiet_steps` are written in the
    part of Python numba compiles (see the module docstring); so are the fields it annotates,
    which the loop may read and change (carried back to the object after a compiled run).  The
    other methods run in Python, before the loop."""

    name: ClassVar[str] = ""
    takes_reserve: ClassVar[bool] = False  # has a "reserve" option (admit only what fits whole)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        remember_source(cls.__module__)  # the policy's text as this process runs it (source_digest)

    def __init__(self, profile: EngineProfile, options: Options | None = None) -> None:
        self.profile = profile
        self.options: Options = {**dict(profile.scheduler), **(options or {})}

    def prepare(self, s: EngineState) -> None:
        """Set up the books before the first step (default: nothing)."""

    def schedule(self, s: EngineState) -> None:  # pragma: no cover - every policy overrides it
        """Plan the next step into the books (:meth:`EngineState.plan_chunk`, ``plan_step``)."""
        raise NotImplementedError

    def after_step(self, s: EngineState, steps: int) -> None:
        """Bookkeeping after ``steps`` steps of the plan in the books ran (default: none)."""

    def quiet_steps(self, s: EngineState) -> float:
        """Pure decode steps that may run in one move before the policy must decide again
        (default: until a sequence finishes or a request arrives)."""
        return math.inf

    def recv_interval(self) -> int:
        """Decode steps between the scheduler's polls for new requests (1: every step).  The loop
        keeps requests sent between polls aside until the next one (:mod:`servesim.sim.schedulers.sglang`
        says how SGLang counts)."""
        return 1

    def describe(self) -> dict[str, Any]:
        """The policy's name, token budget, sequence limit and options, for the output."""
        return {"scheduler": self.name, "token_budget": self.profile.max_num_batched_tokens,
                "max_running": self.profile.max_num_seqs, "overlap": self.profile.overlap, **self.options}


_SOURCES: dict[str, bytes] = {}
"""The source file of each module compiled into the loop, as it was when the module was imported
(:func:`remember_source`)."""


def _source(module: str) -> bytes:
    """``module``'s source file as it is now (found without importing it; its name alone where it
    has none)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
        origin = spec.origin if spec is not None else None
        if origin:
            with open(origin, "rb") as f:
                return f.read()
    except (OSError, ValueError):  # pragma: no cover - no source file (frozen, __main__): the name alone
        pass
    return module.encode()


def remember_source(module: str) -> None:
    """Keep ``module``'s source as it is while the module is imported (called at its end; each
    policy's by :class:`Scheduler` when the class is made), so that :func:`source_digest` names
    the kernels this process compiles by the text it runs, even if the file is edited before they
    compile (else a process started before an edit would cache its old kernels under the new
    text's name, and every later run would load them)."""
    _SOURCES.setdefault(module, _source(module))


def source_digest(*modules: str) -> str:
    """A digest of the named modules' source files, in the order given (each as this process
    imported it, :func:`remember_source`, else as it is now, found without importing it): part of
    the name of every compiled kernel cached on disk, so that a changed source never loads a stale
    kernel, and so that :func:`servesim.sim.batching.run_benchmark` can tell whether the kernels
    it would run are cached without importing numba."""
    import hashlib

    h = hashlib.sha256()
    for m in modules:
        got = _SOURCES.get(m)
        h.update(_source(m) if got is None else got)
    return h.hexdigest()[:12]


def core_tag(policy: type) -> str:
    """The name under which the engine loop compiled for ``policy`` is cached: its class name and a
    digest of every module compiled into it (the policy's classes, the loop, the books, the compiler)."""
    mods = sorted({c.__module__ for c in policy.__mro__ if c is not object}
                  | {"servesim.sim.loop", __name__, "servesim.sim._engine_loop"})
    return f"{policy.__name__}_{source_digest(*mods)}"


remember_source(__name__)
