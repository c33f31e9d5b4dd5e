"""Benchmark: the same M/M/8 queue at rho = 0.85 simulated by servesim, SimPy and Ciw.

Run on demand (not collected by pytest)::

    python benchmarks/bench_mmc.py                 # 1e5 and 1e6 for all three, 1e7 for servesim
    python benchmarks/bench_mmc.py --sizes 100000 --servesim-sizes 1000000 --json out.json

Each tool simulates the same number of requests (lambda = 6.8/s, mu = 1/s,
c = 8, FCFS).  Reported per run: wall-clock seconds, requests per second,
servesim's speed ratio over the tool at the same request count, and the mean
wait E[W_q] and P(wait) against Erlang-C with z = (estimate - exact) / SE.

Statistics: the first 10% of requests are dropped (warm-up) for every tool.
servesim's SE comes from its 10 independent replications; SimPy and Ciw run
one long replication each, so their SE comes from 20 batch means over the
measured requests (the standard estimator for one correlated run).

Fairness: SimPy and Ciw draw their own exponential variates the way their
users do (SimPy from ``random.Random``, Ciw from its distributions); servesim
includes drawing its variates with numpy, running the recursion and computing
its statistics (mean, P(wait), p50/p90/p99) in the timed region.  numba's
compilation is done before timing (it is cached on disk after the first run),
and every tool first runs 10^4 requests untimed (imports, caches, allocator).
servesim's runs last milliseconds, so each is timed 5 times (same seed, same
answer) and the median reported; SimPy's and Ciw's single runs last seconds.
Everything runs on one core.  simpy and ciw are benchmark-only dependencies
(``pip install servesim[bench]``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from typing import Any

import numpy as np

from servesim.model.queueing import MMc
from servesim.sim import Exponential, poisson_arrivals, simulate_queue
from servesim.sim import _kernels as kern

SERVERS = 8
LAM = 6.8
MU = 1.0
WARMUP = 0.1
BATCHES = 20


def batch_means(waits: np.ndarray) -> tuple[float, float, float, float]:
    """Mean and P(wait) with standard errors from BATCHES batch means (after warm-up)."""
    w = waits[int(len(waits) * WARMUP) :]
    b = len(w) // BATCHES
    w = w[: b * BATCHES].reshape(BATCHES, b)
    means = w.mean(axis=1)
    pw = (w > 1e-12).mean(axis=1)
    return (
        float(means.mean()),
        float(means.std(ddof=1) / math.sqrt(BATCHES)),
        float(pw.mean()),
        float(pw.std(ddof=1) / math.sqrt(BATCHES)),
    )


SERVESIM_REPEATS = 5


def run_servesim(n: int, seed: int) -> dict[str, Any]:
    """servesim's run lasts milliseconds, so one timing is at the mercy of the scheduler: it is
    timed SERVESIM_REPEATS times (same seed, same answer) and the median wall time reported."""
    kern.compile_queue_kernels()  # compile, or load numba's disk cache, before timing
    walls = []
    for _ in range(SERVESIM_REPEATS):
        t0 = time.perf_counter()
        q = simulate_queue(
            SERVERS,
            poisson_arrivals(LAM),
            Exponential(1.0 / MU),
            requests=n,
            replications=10,
            warmup_fraction=WARMUP,
            seed=seed,
        )
        walls.append(time.perf_counter() - t0)
    wall = sorted(walls)[len(walls) // 2]
    return {
        "tool": "servesim",
        "requests": q.requests,
        "wall_s": wall,
        "mean_wait_s": q.mean_wait_s.mean,
        "mean_wait_se": q.mean_wait_s.se,
        "p_wait": q.p_wait.mean,
        "p_wait_se": q.p_wait.se,
    }


def run_simpy(n: int, seed: int) -> dict[str, Any]:
    import simpy

    rng = random.Random(seed)
    waits = np.empty(n)
    t0 = time.perf_counter()
    env = simpy.Environment()
    servers = simpy.Resource(env, capacity=SERVERS)

    def customer(i: int) -> Any:
        arrived = env.now
        with servers.request() as req:
            yield req
            waits[i] = env.now - arrived
            yield env.timeout(rng.expovariate(MU))

    def source() -> Any:
        for i in range(n):
            yield env.timeout(rng.expovariate(LAM))
            env.process(customer(i))

    env.process(source())
    env.run()
    wall = time.perf_counter() - t0
    m, m_se, p, p_se = batch_means(waits)
    return {
        "tool": "simpy",
        "requests": n,
        "wall_s": wall,
        "mean_wait_s": m,
        "mean_wait_se": m_se,
        "p_wait": p,
        "p_wait_se": p_se,
    }


def run_ciw(n: int, seed: int) -> dict[str, Any]:
    import ciw

    t0 = time.perf_counter()
    ciw.seed(seed)  # Ciw seeds its global generators; benchmark only
    net = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate=LAM)],
        service_distributions=[ciw.dists.Exponential(rate=MU)],
        number_of_servers=[SERVERS],
    )
    sim = ciw.Simulation(net)
    sim.simulate_until_max_customers(n, method="Finish")
    recs = sim.get_all_records()
    wall = time.perf_counter() - t0
    recs = sorted(recs, key=lambda r: r.arrival_date)
    waits = np.array([r.waiting_time for r in recs], dtype=float)
    m, m_se, p, p_se = batch_means(waits)
    return {
        "tool": "ciw",
        "requests": len(waits),
        "wall_s": wall,
        "mean_wait_s": m,
        "mean_wait_se": m_se,
        "p_wait": p,
        "p_wait_se": p_se,
    }


def finish(row: dict[str, Any], ref: MMc) -> dict[str, Any]:
    row["requests_per_s"] = row["requests"] / row["wall_s"]
    row["mean_wait_z"] = (row["mean_wait_s"] - ref.mean_wait_s()) / row["mean_wait_se"]
    row["p_wait_z"] = (row["p_wait"] - ref.p_wait) / row["p_wait_se"]
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100000,1000000", help="request counts for all three tools")
    p.add_argument("--servesim-sizes", default="10000000", help="extra request counts for servesim alone")
    p.add_argument("--tools", default="servesim,simpy,ciw", help="which tools to run")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", default=None, help="also write the rows as JSON to this path")
    args = p.parse_args(argv)
    sizes = [int(float(x)) for x in args.sizes.split(",") if x]
    extra = [int(float(x)) for x in args.servesim_sizes.split(",") if x]
    tools = args.tools.split(",")
    ref = MMc(SERVERS, LAM, MU)
    print(
        f"M/M/{SERVERS}, rho = {LAM / (SERVERS * MU):.2f}: Erlang-C E[W_q] = {ref.mean_wait_s():.5f} s,"
        f" P(wait) = {ref.p_wait:.5f}   (python {sys.version.split()[0]}, {os.cpu_count()} cpus visible,"
        " one used)"
    )
    runners = {"servesim": run_servesim, "simpy": run_simpy, "ciw": run_ciw}
    for tool in tools:  # one untimed small run each: imports, numba cache load, allocator warm-up
        runners[tool](10_000, args.seed + 1)
    rows: list[dict[str, Any]] = []
    for n in sizes:
        for tool in tools:
            rows.append(finish(runners[tool](n, args.seed), ref))
            print_row(rows[-1], rows)
    for n in extra:
        if "servesim" in tools:
            rows.append(finish(run_servesim(n, args.seed), ref))
            print_row(rows[-1], rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"erlang_c_mean_wait_s": ref.mean_wait_s(), "erlang_c_p_wait": ref.p_wait, "rows": rows},
                fh,
                indent=2,
            )
    return 0


def print_row(r: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    ours = next((x for x in rows if x["tool"] == "servesim" and x["requests"] == r["requests"]), None)
    ratio = (
        ""
        if ours is None or r["tool"] == "servesim"
        else f"  servesim is {ours['requests_per_s'] / r['requests_per_s']:,.0f}x faster"
    )
    print(
        f"{r['tool']:9s} {r['requests']:>10,d} req  {r['wall_s']:8.3f} s  {r['requests_per_s']:>13,.0f} req/s"
        f"  E[W_q] {r['mean_wait_s']:.5f} (z {r['mean_wait_z']:+.2f})"
        f"  P(wait) {r['p_wait']:.5f} (z {r['p_wait_z']:+.2f}){ratio}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
