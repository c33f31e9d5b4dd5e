"""Speed of the capacity plan: one workload on one GPU type, the whole search.

Times ``capacity_plan`` (``servesim plan --gpus``) for issue 50's question (Llama-3.1-70B on 8 H100s,
2000/300 tokens at 800/50 ms: the 8-GPU plan, target under 3 s), the three questions of issue 10
(Llama-3-70B on H100: chat 1024/512 at 1000/40 ms, RAG 6144/512 at 2000/28 ms, agent 8192/256 at
1000/35 ms) on 16 GPUs with EAGLE-3 considered, and a mixture of experts whose replicas span nodes
(DeepSeek-R1 on 32 H100s with SGLang, 1024/1024 at 2000/50 ms: splits of 1-8 GPUs and of 16 and 32,
the two- and four-node ones).  Each is the median of ``--runs`` runs (each run builds new step
models, so no step price is cached from the run before; the kernel tables stay loaded), printed as
wall time and as CPU time (this process and the confirmation's worker processes: the figure that
holds on a machine other work shares), beside a baseline measured in the same run: pricing one
decode step a thousand times.

The plan confirms its best rows by the engine model at steady state (plan/confirm.py: 4,000-request
runs); where numba's disk cache holds the compiled engine loop, the plan loads it (about a second)
and the runs take it.  ``--profile`` prints where the 8-GPU plan's time goes (cProfile, one process).

    python benchmarks/bench_plan.py [--only issue50,chat,rag,agent,moe] [--runs 3] [--profile]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from typing import Any

QUESTIONS = [("chat", 1024, 512, 1.0, 0.040), ("rag", 6144, 512, 2.0, 0.028),
             ("agent", 8192, 256, 1.0, 0.035)]
NAMES = ("issue50", "chat", "rag", "agent", "moe")


def _cpu_s() -> float:
    """CPU seconds of this process and of its finished children (the plan's worker processes)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(name: str, q: Any, base: float, runs: int) -> None:
    """The median of ``runs`` runs of ``capacity_plan(q)``, printed beside the baseline."""
    from servesim.plan.search import capacity_plan

    walls, cpus = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), _cpu_s()
        d = capacity_plan(q)
        walls.append(time.perf_counter() - t0)
        cpus.append(_cpu_s() - c0)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    best = d["ranked"][0] if d["ranked"] else None
    what = (f"best {best['architecture']} on {best['gpus']} GPUs at {best['output_throughput_per_gpu']:,.0f} "
            "tok/s/GPU" if best else "nothing meets the SLOs")
    print(f"{name:<7} {d['isl']}/{d['osl']} on {q.gpus}: {d['searched']} deployments, "
          f"{d.get('engine_tried', 0)} confirmed in {wall:.2f} s wall, {cpu:.2f} s CPU "
          f"(= {wall / (base / 1000):,.0f} step prices); {what}")


def _question(name: str) -> Any:
    from servesim.plan.search import PlanQuestion

    if name == "issue50":
        return PlanQuestion("meta-llama/Llama-3.1-70B-Instruct", "h100-sxm", 8, 2000, 300, 0.8, 0.050)
    if name == "moe":
        return PlanQuestion("deepseek-ai/DeepSeek-R1", "h100-sxm", 32, 1024, 1024, 2.0, 0.050,
                            engine="sglang")
    _, isl, osl, ttft, tpot = next(x for x in QUESTIONS if x[0] == name)
    return PlanQuestion("llama-3-70b", "h100-sxm", 16, isl, osl, ttft, tpot, spec="eagle3")


def _profile() -> None:
    """Where the 8-GPU plan's time goes: cumulative time of the main steps, one process (no workers)."""
    import cProfile
    import pstats
    from dataclasses import replace

    from servesim.plan import search

    q = _question("issue50")
    prof = cProfile.Profile()
    prof.enable()
    screened = search._screen(replace(q, confirm=False))
    for row in screened["ranked"][:q.confirm_top]:
        search._confirm_task(row, q, screened["gpu"], None)
    prof.disable()
    stats = pstats.Stats(prof)
    total = max(stats.total_tt, 1e-9)  # type: ignore[attr-defined]
    wanted = {"_screen": "screen (closed form at load)", "_short_rate": "short runs (500 requests)",
              "_steady": "steady-state trials (4,000 requests)",
              "operating_point": "front's operating points",
              "core": "engine loop", "price_of": "step prices", "steady_window": "steady-state windows"}
    rows = {}
    for (_, _, fn), (_, _, _, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        if fn in wanted:
            rows[wanted[fn]] = rows.get(wanted[fn], 0.0) + cum
    print(f"profile of the 8-GPU plan in one process: {total:.2f} s")
    for what, cum in sorted(rows.items(), key=lambda x: -x[1]):
        print(f"  {what:<40} {cum:6.2f} s  {100 * cum / total:4.0f}%")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(NAMES), help=f"questions, of {', '.join(NAMES)}")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    from servesim.hardware.names import dense_shape
    from servesim.hardware.stepmodel import StepModel

    sm = StepModel(dense_shape("llama-3-70b"), "h100-sxm", 4)
    t0 = time.perf_counter()
    for i in range(1000):
        sm.step(1 + i % 64, 2000 + i)
    base = time.perf_counter() - t0
    print(f"baseline: 1,000 step prices in {base * 1e3:.1f} ms")
    for name in args.only.split(","):
        if name not in NAMES:
            raise SystemExit(f"--only {name}: one of {', '.join(NAMES)}")
        _timed(name, _question(name), base, args.runs)
    if args.profile:
        _profile()
    return 0


if __name__ == "__main__":
    sys.exit(main())
