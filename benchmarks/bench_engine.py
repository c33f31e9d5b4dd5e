"""Speed of the iteration-level engine simulator (``servesim simulate --model ... --rate``).

Simulates 5,000 Poisson requests on one colocated replica and on a disaggregated
deployment at light, moderate and heavy load, three seeds each, and prints simulated
requests per second of wall time (first run in the process, with its step prices still
uncached, and the median of the runs after it), beside a baseline measured in the same run:
pricing one decode step a thousand times.  Target (issue 10): at least 10^5 requests
per second on one core.

    python benchmarks/bench_engine.py
"""

from __future__ import annotations

import statistics
import sys
import time


def main() -> int:
    from servesim.plan.predict import Deployment, build_step_model
    from servesim.sim.engine import simulate_colocated, simulate_disaggregated

    sm, _, mem = build_step_model(Deployment("llama-3-70b", "h100-sxm", 4))
    psm, _, _ = build_step_model(Deployment("llama-3-70b", "h100-sxm", 2))
    t0 = time.perf_counter()
    for i in range(1000):
        sm.step(1 + i % 64, 2000 + i)
    base = time.perf_counter() - t0
    print(f"baseline: 1,000 step prices in {base * 1e3:.1f} ms")
    for name, run in (
        ("colocated 70B TP4", lambda r, s: simulate_colocated(sm, mem, 1, r, 1024, 512, requests=5000,
                                                              seed=s)),
        ("disagg 2xTP2 -> TP4", lambda r, s: simulate_disaggregated(psm, 2, sm, mem, 1, 50e9, r, 1024, 512,
                                                                     requests=5000, seed=s)),
    ):
        for rate in (1.0, 3.0, 6.0):
            speeds = [run(rate, seed)["sim_requests_per_s"] for seed in range(4)]
            print(f"{name:<20} {rate:>4g} req/s: first {speeds[0]:>9,.0f} req/s, then median "
                  f"{statistics.median(speeds[1:]):>9,.0f} req/s of wall time "
                  f"(= {statistics.median(speeds[1:]) * base / 1000:.1f} requests per step price)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
