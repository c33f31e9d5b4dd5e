"""Engine scheduler policies, one module per engine (``vllm``, ``sglang``, ``trtllm``).

Each policy reads the replica's books (:class:`~servesim.sim.schedulers.base.EngineState`)
and plans the next step; :func:`servesim.sim.batching.run_benchmark` prices and runs it, in
Python or compiled from the same text (:mod:`servesim.sim._engine_loop`).  Adding an engine is
one new module and its entry in ``hardware/data/engines.toml`` (``policy = "module:Class"``), from
which :data:`SCHEDULERS` is filled on its first lookup.
"""

from __future__ import annotations

import importlib
from collections.abc import MutableMapping

from servesim._checks import ParameterError
from servesim._lazy import MutableOnFirstUse
from servesim.hardware import engines  # engines.ENGINES: engines.toml, read on first use
from servesim.hardware.engines import EngineProfile, policy_of
from servesim.sim.schedulers.base import EngineState, Options, Scheduler, StepPlan

__all__ = ["SCHEDULERS", "EngineState", "Scheduler", "StepPlan", "make_scheduler"]

def _policy(spec: str) -> type[Scheduler]:
    """The class ``"module:Class"`` names."""
    module, _, name = spec.partition(":")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, Scheduler)):
        raise TypeError(f"{spec} is not a scheduler policy (a subclass of Scheduler)")
    return cls


def _policies() -> dict[str, type[Scheduler]]:
    """The policy of each engine by its name, from engines.toml (``policy``)."""
    return {name: _policy(policy_of(name)) for name in engines.ENGINES}


# filled on the first lookup, so that importing the policies reads no data file (issue 47 item 7: data
# files are read on first use, once); a test may add its own
SCHEDULERS: MutableMapping[str, type[Scheduler]] = MutableOnFirstUse(_policies)
"""Policy of each engine, by the engine's name, in engines.toml's order (read on the first lookup)."""


def make_scheduler(name: str, profile: EngineProfile, options: Options | None = None) -> Scheduler:
    """The policy ``name`` for an engine of ``profile``, with the engine's own options."""
    cls = SCHEDULERS.get(name)
    if cls is None:
        raise ParameterError("scheduler", name, f"one of {', '.join(SCHEDULERS)}")
    return cls(profile, options)
