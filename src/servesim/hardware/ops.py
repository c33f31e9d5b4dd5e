"""A step as a list of operations, each with two prices: the engine's and the speed of light.

A step model (:class:`~servesim.hardware.moe_step.MoEStepModel`) lists the operations one engine
step runs (:class:`Op`): a kernel kind, how many times the step runs it (the layers of its kind)
and its work, in bytes moved and FLOPs done.  Each operation is priced twice from that one
description:

* **engine price** (:attr:`Op.seconds`): the engine's measured kernel table for that kind of
  kernel (GEMM, attention, MLA, MoE, all-reduce, DeepEP all-to-all), falling back to the kind's
  own roofline at the tables' fitted efficiencies where nothing was measured (the step model
  does the lookup; the note says which);
* **speed of light** (:attr:`Op.light_s`): the same work at 100% of the datasheet peaks,
  ``max(bytes / HBM, FLOPs / peak)`` for a kernel on one GPU and ``wire bytes / link`` for a
  collective (a ring all-reduce sends ``2 (g - 1) / g`` of its message from each GPU).

The step is the sum of the engine prices by part (GEMM, attention, communication, other
kernels) and its bound is the sum of the lights: one cost model, two pricers.  A bound summed
op by op is at least the old whole-step roofline ``max(sum bytes / HBM, sum FLOPs / peak)``
(each term of a sum of maxima is at least its own share), so it is the tighter of the two.

Kinds (:data:`KINDS`): ``gemm`` (weight GEMMs, the router, the LM head), ``attention``
(decode, prefill chunks; GQA or MLA), ``mla_bmm`` (MLA's absorbed batched matmuls), ``moe``
(routed experts of one GPU), ``two_streams`` (the shared experts beside the routed ones on a
second stream, SGLang's DeepSeek path: the longer branch), ``allreduce``, ``allgather``
(attention data parallel's gather and scatter), ``alltoall`` (expert-parallel dispatch and
combine), ``elementwise`` (norms, RoPE, activations, sampling, launch gaps) and ``host`` (CPU
time; no GPU bound).

Standard library only; nothing here prints.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.kernels import KernelTables

__all__ = ["ACTIVATION_BYTES", "KINDS", "PARTS", "Op", "Peaks", "PriceCache", "StepPrice", "StepTime",
           "by_name", "light_s", "priced_parts", "ring_bytes"]

ACTIVATION_BYTES = 2
"""Bytes of one activation value, in and out of every kernel and in the tensor-parallel all-reduces:
BF16 whatever the weights' dtype (the one definition; the step models and the roofline import it)."""

KINDS: tuple[str, ...] = ("gemm", "attention", "mla_bmm", "moe", "two_streams", "allreduce", "allgather",
                          "alltoall", "elementwise", "host")
PARTS: dict[str, str] = {"gemm": "gemm", "attention": "attention", "mla_bmm": "gemm", "moe": "gemm",
                         "two_streams": "gemm", "allreduce": "comm", "allgather": "comm", "alltoall": "comm",
                         "elementwise": "other", "host": "host"}
"""The :class:`~servesim.hardware.stepmodel.StepTime` part each kind adds to (``comm`` is its
``allreduce_s``: every collective)."""


@dataclass(frozen=True)
class Peaks:
    """Datasheet peaks of one GPU: HBM bytes/s, dense FLOP/s by dtype, GPU-to-GPU link bytes/s."""

    hbm_bytes_per_s: float
    flops_per_s: dict[str, float]
    link_bytes_per_s: float

    def flops(self, dtype: str) -> float:
        return self.flops_per_s.get(dtype, self.flops_per_s["bf16"])

    @classmethod
    def of(cls, tables: KernelTables) -> Peaks:
        """The peaks a kernel-table set states for its GPU (``hbm_bytes_per_s``, ``flops_per_s``,
        ``nvlink_bytes_per_s``: :class:`servesim.hardware.kernels.KernelTables`)."""
        return cls(tables.hbm_bytes_per_s, tables.flops_per_s, tables.nvlink_bytes_per_s)


@dataclass(eq=False, slots=True)
class Op:
    """One operation of a step: ``count`` instances of a ``kind`` kernel doing ``flops`` and moving
    ``nbytes`` through HBM (``wire_bytes`` over the GPU links for a collective) each, priced at
    ``priced_s`` each by the engine's table (``measured`` False where the table fell back to the
    roofline; ``note`` says how).  Not frozen, for speed (a step lists a dozen; the engine loop prices
    thousands of steps): treat it as a value."""

    name: str
    kind: str
    count: float
    priced_s: float
    nbytes: float = 0.0
    flops: float = 0.0
    dtype: str = "bf16"
    wire_bytes: float = 0.0
    measured: bool = True
    note: str = ""
    branches: tuple[Op, ...] = field(default=())  # two_streams: the operations run side by side

    def __post_init__(self) -> None:
        if self.kind not in PARTS:
            raise ValueError(f"kind {self.kind!r}: one of {', '.join(KINDS)}")

    @property
    def part(self) -> str:
        return PARTS[self.kind]

    @property
    def seconds(self) -> float:
        """The engine's price of all instances."""
        return self.count * self.priced_s

    def light_one(self, peaks: Peaks) -> float:
        """One instance at 100% of the peaks: the roofline of its bytes and FLOPs, or its wire bytes
        over the links; side-by-side branches cost the longer branch and no less than their HBM
        traffic together (they share the memory); host time is no GPU work."""
        if self.kind == "host":
            return 0.0
        if self.branches:
            together = sum(b.nbytes for b in self.branches) / peaks.hbm_bytes_per_s
            return max(max(b.light_one(peaks) for b in self.branches), together)
        t = max(self.nbytes / peaks.hbm_bytes_per_s, self.flops / peaks.flops(self.dtype))
        return t + self.wire_bytes / peaks.link_bytes_per_s

    def light_s(self, peaks: Peaks) -> float:
        """All instances at the speed of light."""
        return self.count * self.light_one(peaks)


@dataclass(frozen=True)
class StepTime:
    """One step, part by part (seconds), beside its speed-of-light bound: what every pricer returns (the
    step models of measured kernels, and the lab's roofline of a pass)."""

    gemm_s: float
    attention_s: float
    allreduce_s: float
    other_s: float
    host_s: float
    gpu_s: float  # everything the GPU runs
    total_s: float  # the step as the engine sees it (host added or overlapped)
    sol_s: float  # pure roofline at 100% of the peaks
    tokens: float
    measured: bool  # every lookup inside a measured table
    notes: tuple[str, ...] = field(default=())
    floor_s: float = 0.0  # the step's kernels at the shortest launch-to-launch gap each
    launch_wait_s: float = 0.0
    """The part of ``gpu_s`` the GPU waits for the CPU to launch an eager step's kernels (a
    launch-bound eager MLA prefill, :mod:`servesim.hardware.moe_step`): an overlap scheduler launches
    a step while the one before it still runs, so the engine loop (:mod:`servesim.sim.loop`) takes off
    it up to the time the step before it left the CPU free."""
    launch_s: float = 0.0
    """The CPU's time to launch the step's layers where it is priced (an eager MLA prefill; 0
    otherwise): what of its own time a step leaves the CPU to launch the next one is its time less
    this."""
    ops: tuple[Op, ...] = field(default=(), compare=False, repr=False)
    """The operations the step sums, where its pricer lists them."""

    @property
    def bound_s(self) -> float:
        """The larger of the two lower bounds: the roofline of the work and the launch floor of the
        kernels (no step is faster than either)."""
        return max(self.sol_s, self.floor_s)

    def as_dict(self) -> dict[str, float | bool | list[str]]:
        return {
            "gemm_ms": self.gemm_s * 1e3, "attention_ms": self.attention_s * 1e3,
            "allreduce_ms": self.allreduce_s * 1e3, "other_ms": self.other_s * 1e3,
            "host_ms": self.host_s * 1e3, "total_ms": self.total_s * 1e3,
            "speed_of_light_ms": self.sol_s * 1e3, "tokens": self.tokens,
            "measured": self.measured, "notes": list(self.notes),
        }


StepPrice = tuple[float, bool, tuple[str, ...], float, float]
"""What a caller keeps of a :class:`StepTime`: its ``total_s``, ``measured``, ``notes``,
``launch_wait_s`` and ``launch_s``."""


class PriceCache:
    """The step prices a caller keeps with one pricer from run to run (the engine loop,
    :mod:`servesim.sim.batching`, which prices a deployment at many rates): a slot every pricer
    declares and creates empty, and never reads itself.  Its copies (``with_drafter``,
    ``for_requests``) share it: their step prices are the original's.

    ``steps`` holds the prices by the caller's key (what else a price depends on: the positions a
    sequence scores, the KV context, the engine profile), then by the step; ``tables`` the caller's
    own structures over them (the loop's price tables), opaque here."""

    __slots__ = ("steps", "tables")

    def __init__(self) -> None:
        self.steps: dict[Hashable, dict[Hashable, StepPrice]] = {}
        self.tables: dict[Hashable, object] = {}


def ring_bytes(gpus: int, nbytes: float) -> float:
    """Bytes each GPU puts on the wire in a ring all-reduce (or gather + scatter) of an ``nbytes``
    message over ``gpus`` GPUs: ``2 (g - 1) / g`` of it (a reduce-scatter, then an all-gather)."""
    return 2 * (gpus - 1) / gpus * nbytes


def priced_parts(ops: Iterable[Op]) -> dict[str, float]:
    """The engine's prices summed by part (``gemm``, ``attention``, ``comm``, ``other``, ``host``), in
    the operations' order."""
    out = {"gemm": 0.0, "attention": 0.0, "comm": 0.0, "other": 0.0, "host": 0.0}
    for op in ops:
        out[op.part] += op.seconds
    return out


def light_s(ops: Iterable[Op], peaks: Peaks) -> float:
    """The step's speed of light: every GPU operation's, summed (host time is not GPU work)."""
    return float(sum(op.light_s(peaks) for op in ops))


def by_name(ops: Iterable[Op], peaks: Peaks | None = None) -> list[dict[str, float | str | bool]]:
    """One row per operation name (instances of the same name summed), in first-seen order: kind,
    count, engine ms, the speed-of-light ms where ``peaks`` is given, and whether every instance
    was measured."""
    rows: dict[str, dict[str, float | str | bool]] = {}
    for op in ops:
        r = rows.setdefault(op.name, {"name": op.name, "kind": op.kind, "count": 0.0, "ms": 0.0,
                                      "measured": True})
        r["count"] = float(r["count"]) + op.count
        r["ms"] = float(r["ms"]) + op.seconds * 1e3
        r["measured"] = bool(r["measured"]) and op.measured
        if peaks is not None:
            r["light_ms"] = float(r.get("light_ms", 0.0)) + op.light_s(peaks) * 1e3
    return list(rows.values())
