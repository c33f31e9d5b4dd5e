"""Engine scheduler policies, one module per engine (``vllm``, ``sglang``, ``trtllm``).

Each policy reads the replica's books (:class:`~servesim.sim.schedulers.base.EngineState`)
and plans the next step; :func:`servesim.sim.batching.run_benchmark` prices and runs it, in
Python or compiled from the same text (:mod:`servesim.sim._engine_loop`).  Adding an engine is
one new module and one line in :data:`SCHEDULERS`.
"""

from __future__ import annotations

from typing import Any

from servesim._checks import ParameterError
from servesim.hardware.engines import EngineProfile
from servesim.sim.schedulers.base import EngineState, Scheduler, StepPlan
from servesim.sim.schedulers.sglang import SglangScheduler
from servesim.sim.schedulers.trtllm import TrtllmScheduler
from servesim.sim.schedulers.vllm import VllmScheduler

__all__ = ["SCHEDULERS", "EngineState", "Scheduler", "StepPlan", "make_scheduler"]

SCHEDULERS: dict[str, type[Scheduler]] = {
    "vllm": VllmScheduler,
    "sglang": SglangScheduler,
    "trtllm": TrtllmScheduler,
}
"""Policy of each engine, by the engine's name."""


def make_scheduler(name: str, profile: EngineProfile, options: dict[str, Any] | None = None) -> Scheduler:
    """The policy ``name`` for an engine of ``profile``, with the engine's own options."""
    cls = SCHEDULERS.get(name)
    if cls is None:
        raise ParameterError("scheduler", name, f"one of {', '.join(SCHEDULERS)}")
    return cls(profile, options)
