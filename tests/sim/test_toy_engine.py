"""A fourth engine is one policy class: this file registers a toy one and runs it both ways.

The policy below is written here alone, in the part of Python numba compiles (as every shipped
policy is), and registered by name; ``run_benchmark`` runs it as it is (``loop="python"``) and
compiled (``loop="compiled"``), and the two results agree to the last bit, as do the fields the
policy keeps.  Nothing else in the package knows of it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from servesim.hardware.engines import EngineProfile, engine_profile
from servesim.hardware.names import dense_shape, resolve_gpu
from servesim.hardware.stepmodel import StepModel
from servesim.sim.batching import Benchmark, run_benchmark
from servesim.sim.client import Client
from servesim.sim.schedulers import SCHEDULERS, EngineState, Scheduler

pytestmark = pytest.mark.xdist_group("compiled-engine-loop")

H100 = resolve_gpu("h100-sxm").memory_bytes


class ToyScheduler(Scheduler):
    """A toy engine (no engine's source: a test's policy): the first waiting prompt runs whole and
    alone in a step of its own (the decoding sequences wait), when its prompt and its whole output
    fit beside what every running request may still write; otherwise the decoding sequences step.
    Nothing is ever preempted."""

    name: ClassVar[str] = "toy"
    prefills: int  # steps that ran a prompt, over every run of this object
    max_prompt: int  # most prompt tokens a step may take (an option)

    def __init__(self, profile: EngineProfile, options: dict[str, Any] | None = None) -> None:
        super().__init__(profile, options)
        self.max_prompt = int(self.options.get("max_prompt", profile.max_num_batched_tokens))
        self.prefills = 0

    def schedule(self, s: EngineState) -> None:
        if s.waiting_n > 0 and s.running() < s.slots:
            r = s.waiting_at(0)
            if s.promised + s.final_of(r) <= s.capacity and s.prompt_left[r] <= self.max_prompt:
                s.pop_waiting()
                s.admit(r)
                s.plan_chunk(r, s.prompt_left[r])
                s.plan_step(False, False)
                return
        s.plan_step(True, False)

    def after_step(self, s: EngineState, steps: int) -> None:
        if s.plan_n > 0:
            self.prefills += 1


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> StepModel:
    monkeypatch.setitem(SCHEDULERS, "toy", ToyScheduler)
    return StepModel(dense_shape("llama-3-8b"), "h100-sxm", 1,
                     engine=engine_profile("vllm", gpu="h100-sxm", memory_gib=80))


LOADS = [dict(concurrency=16, num_prompts=64), dict(rate_per_s=20.0, num_prompts=80)]


@pytest.mark.parametrize("load", LOADS)
def test_a_toy_engine_registered_here_runs_in_python_and_compiled_alike(toy, load):
    from servesim.sim import _engine_loop

    bench = Benchmark(1024, 128, seed=3, client=Client("vllm", random_range_ratio=0.5), **load)
    policies = {loop: SCHEDULERS["toy"](toy.engine) for loop in ("python", "compiled")}
    results = {loop: run_benchmark(toy, bench, H100, scheduler=p, loop=loop) for loop, p in policies.items()}
    assert ToyScheduler in _engine_loop._CORES  # the compiled loop ran it, compiled for it
    assert repr(results["compiled"]) == repr(results["python"])
    # the toy's own rules, seen in the result and in the field it keeps
    n = load["num_prompts"]
    assert all(p.prefills == n for p in policies.values())  # one step per prompt, each whole
    res = results["python"]
    assert res.completed == n and res.preemptions == 0 and res.scheduler["scheduler"] == "toy"
    # its prefill steps stall the decodes: the mean gap between tokens exceeds the median one
    assert res.mean_itl_s > 1.05 * res.median_itl_s


def test_a_toy_engine_by_name_and_its_option(toy):
    bench = Benchmark(1024, 32, concurrency=4, num_prompts=12, seed=1)
    by_name = run_benchmark(toy, bench, H100, scheduler="toy", loop="compiled")
    assert by_name.completed == 12 and by_name.scheduler["scheduler"] == "toy"
    # a prompt beyond the toy's option never fits: the loop says so, compiled or not
    small = ToyScheduler(toy.engine, {"max_prompt": 512})
    for loop in ("python", "compiled"):
        with pytest.raises(Exception, match="concurrency"):
            run_benchmark(toy, bench, H100, scheduler=small, loop=loop)


def test_loop_auto_looks_for_this_policys_own_cached_core(tmp_path: Any, monkeypatch: Any) -> None:
    # loop="auto" takes the compiled loop when numba's cache holds it: it must look for the core of
    # this policy class compiled from the current sources, not for any cached core.
    from servesim.sim import batching
    from servesim.sim.schedulers.base import core_tag

    class Uncompiled(ToyScheduler):
        """Never compiled: a class of this test alone."""

    tag = core_tag(Uncompiled)
    assert tag.startswith("Uncompiled_") and tag != core_tag(ToyScheduler)
    assert batching._kernels_cached(Uncompiled) is False
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    (tmp_path / f"loop.core_{tag}-1.py311.nbi").write_bytes(b"")
    batching._CACHED_CORES.pop(Uncompiled, None)
    assert batching._kernels_cached(Uncompiled) is True


def test_every_engine_of_the_data_file_names_its_policy_class() -> None:
    # An engine is its engines.toml entry and the policy class its ``policy`` names ("module:Class").
    from servesim.hardware.engines import ENGINES, policy_of

    assert ENGINES == ("vllm", "sglang", "trtllm")
    for name in ENGINES:
        module, _, cls = policy_of(name).partition(":")
        assert SCHEDULERS[name].__module__ == module and SCHEDULERS[name].__name__ == cls
        assert SCHEDULERS[name].name == name


def test_a_kernels_name_is_the_text_this_process_imported(tmp_path: Any, monkeypatch: Any) -> None:
    """The digest that names a compiled loop on disk is of each module's source as this process
    imported it: a file edited after the import (another process's work in a shared tree) does not
    change it, so this process's old kernels are never cached under the new text's name; a module
    never imported is read as it is now."""
    import importlib
    import sys

    from servesim.sim.schedulers import base

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(base, "_SOURCES", {})
    path = tmp_path / "toy_policy_digest.py"
    path.write_text("from servesim.sim.schedulers.base import Scheduler\n\n\n"
                    "class Edited(Scheduler):\n    pass\n")
    module = importlib.import_module("toy_policy_digest")
    monkeypatch.setitem(sys.modules, "toy_policy_digest", module)
    imported = base.source_digest("toy_policy_digest")
    path.write_text(path.read_text() + "# edited after the import\n")
    assert base.source_digest("toy_policy_digest") == imported  # the class recorded its module's text
    fresh = tmp_path / "toy_never_imported.py"
    fresh.write_text("x = 1\n")
    before = base.source_digest("toy_never_imported")
    fresh.write_text("x = 2\n")
    assert base.source_digest("toy_never_imported") != before
