"""Speed of the iteration-level engine simulator (``servesim simulate --model ... --rate``).

Simulates 5,000 Poisson requests on one colocated replica and on a disaggregated
deployment at light, moderate and heavy load, eight seeds each, with the engine loop as
it runs now (:mod:`servesim.sim.loop`, compiled by :mod:`servesim.sim._engine_loop`) and with
the Python loop of before the compiled one (frozen in ``benchmarks/_baseline_engine.py``, with its
policies in ``_baseline_schedulers.py``), each on step models of its
own (shared by its cases in order, as one process simulating them one after the other
would), so that both start with their step prices uncached.  For each it prints simulated
requests per second of wall time: the first run (its step prices still uncached) and
the median of the runs after it, and the ratio new/old of the medians; and the medians per second
of CPU time (this process's), which the other work of a shared machine does not slow as much as it
slows the wall time.  A disaggregated deployment's pools run their workers through
``batching.run_worker`` (arrays in and out); the frozen loop runs them through an adapter that turns
the arrays into its lists and back.  The two loops no longer
give the same numbers (since the overlap scheduler's late admission and the request overhead as
the client's time, which the frozen loop has neither of), so the comparison is one of speed; the
script says whether they agree, as information.  The compiled loop's first call in the process (numba
compiling it, or loading it from its disk cache) is timed apart, before everything.
A baseline measured in the same run: pricing one decode step a thousand times.

Targets: issue 10, at least 10^5 requests per second on one core; issue 19 (item 7), at
least 5 x 10^5 on this 2-core machine with the compiled loop.

    python benchmarks/bench_engine.py
"""

from __future__ import annotations

import contextlib
import functools
import gc
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

RATES = (1.0, 3.0, 6.0)
SEEDS = range(8)
TARGET = 5e5


@contextlib.contextmanager
def _loop(run_benchmark: Callable[..., Any], run_worker: Callable[..., Any]) -> Iterator[None]:
    """Run ``servesim.sim.engine``'s simulations with ``run_benchmark`` as their engine loop and
    ``run_worker`` as the loop of each worker of a disaggregated deployment's pools (which
    ``servesim.sim.disaggregation`` runs)."""
    import servesim.sim.disaggregation as disaggregation
    import servesim.sim.engine as engine

    saved = engine.run_benchmark, disaggregation.run_worker
    engine.run_benchmark, disaggregation.run_worker = run_benchmark, run_worker
    try:
        yield
    finally:
        engine.run_benchmark, disaggregation.run_worker = saved


def _old_worker(run_benchmark: Callable[..., Any]) -> Callable[..., Any]:
    """A pool's worker (``batching.run_worker``: arrays in, each request's times out as arrays) run by
    the frozen loop ``run_benchmark``, which takes lists and gives tuples (the conversions, ~1 ms a
    run, count in the old loop's time: they are what a pool of it costs)."""
    import numpy as np

    from servesim.sim.batching import WorkerTimes

    def worker(model: Any, bench: Any, memory_bytes: float, sends: Any, isl: Any, osl: Any, *,
               prefilled: bool, spec: Any = None, cold_start_s: float = 0.0) -> tuple[Any, WorkerTimes]:
        assert cold_start_s == 0.0  # a warm deployment here: the baseline loop predates cold starts
        res = run_benchmark(model, bench, memory_bytes, arrival_times=sends.tolist(),
                            lengths=list(zip(isl.tolist(), osl.tolist(), strict=True)), prefilled=prefilled,
                            keep_requests=True, spec=spec)
        index, sent, first, last = (np.array(c) for c in zip(*res.requests, strict=True))
        return res, WorkerTimes(index.astype(np.int64), sent, first, last)

    return worker


def main() -> int:
    import _baseline_engine

    from servesim.hardware.catalog import builtin_catalog
    from servesim.hardware.pricer import Deployment, build_step_model
    from servesim.sim import _engine_loop
    from servesim.sim.batching import run_benchmark, run_worker
    from servesim.sim.engine import simulate_colocated, simulate_disaggregated

    def models() -> tuple[Any, Any, float]:
        # the catalog given: built anew each call (build_step_model keeps one per deployment only for
        # the shipped catalog by default, which would hand both loops the same, already warmed, models)
        cat = builtin_catalog()
        sm, _, mem = build_step_model(Deployment("llama-3-70b", "h100-sxm", 4), cat)
        psm, _, _ = build_step_model(Deployment("llama-3-70b", "h100-sxm", 2), cat)
        return sm, psm, mem

    # The compiled loop's first call: numba compiles it (or loads it from its disk cache).
    t0 = time.perf_counter()
    fresh = _engine_loop.compile_kernels()
    jit = time.perf_counter() - t0
    how = "compiled by numba now" if fresh else "loaded from its cache"
    print(f"compiled loop, first call: {jit:.2f} s ({how}; not in the figures below)")

    # Each loop prices with step models of its own, shared by its cases in order (as one process
    # simulating them one after the other would), so both start with every step price uncached.
    own = {"old": models(), "new": models()}
    assert own["old"][0] is not own["new"][0]
    t0 = time.perf_counter()
    for i in range(1000):
        own["old"][0].step(1 + i % 64, 2000 + i)
    base = time.perf_counter() - t0
    print(f"baseline: 1,000 step prices in {base * 1e3:.1f} ms")

    cases: list[tuple[str, Callable[[Any, float, int], dict[str, Any]]]] = [
        ("colocated 70B TP4", lambda m, r, s: simulate_colocated(m[0], m[2], 1, r, 1024, 512, requests=5000,
                                                                 seed=s)),
        ("disagg 2xTP2 -> TP4", lambda m, r, s: simulate_disaggregated(m[1], 2, m[0], m[2], 1, 50e9, r, 1024,
                                                                       512, requests=5000, seed=s)),
    ]
    worst = worst_cpu = float("inf")
    same = True
    for name, run in cases:
        for rate in RATES:
            speeds: dict[str, list[float]] = {}
            cpu: dict[str, list[float]] = {}
            outputs = {}
            loops = {"old": (_baseline_engine.run_benchmark, _old_worker(_baseline_engine.run_benchmark)),
                     "new": (functools.partial(run_benchmark, loop="compiled"),
                             functools.partial(run_worker, loop="compiled"))}
            for label, (loop, worker) in loops.items():
                out = []
                cpu[label] = []
                with _loop(loop, worker):
                    for seed in SEEDS:
                        gc.collect()  # each run starts without the garbage of the one before (untimed)
                        t0 = time.process_time()
                        out.append(run(own[label], rate, seed))
                        cpu[label].append(out[-1]["completed"] / (time.process_time() - t0))
                speeds[label] = [o.pop("sim_requests_per_s") for o in out]
                for o in out:
                    o.pop("wall_ms")
                outputs[label] = out
            same = same and outputs["old"] == outputs["new"]
            old, new = (statistics.median(speeds[k][1:]) for k in ("old", "new"))
            old_cpu, new_cpu = (statistics.median(cpu[k][1:]) for k in ("old", "new"))
            worst = min(worst, new)
            worst_cpu = min(worst_cpu, new_cpu)
            print(f"{name:<20} {rate:>4g} req/s: old first {speeds['old'][0]:>8,.0f}, median {old:>8,.0f} | "
                  f"new first {speeds['new'][0]:>9,.0f}, median {new:>9,.0f} req/s of wall time | "
                  f"new/old {new / old:5.1f}x | of CPU time: old {old_cpu:>8,.0f}, new {new_cpu:>9,.0f}")
    why = "no (expected: the frozen loop has no late admission)"
    print(f"same results, old and new: {'yes' if same else why}")
    met = "met" if worst >= TARGET else "NOT met"
    print(f"slowest new median: {worst:,.0f} req/s of wall time (target {TARGET:,.0f}: {met}); "
          f"{worst_cpu:,.0f} req/s of CPU time (on a machine whose other work takes its cores, the wall "
          "time counts the waits for a core and the CPU time does not)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
