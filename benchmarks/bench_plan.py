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
and the runs take it.

``--cli`` times the 8-GPU plan as a user runs it (``servesim plan -q ...``, a process of its own:
wall time, and CPU time with its worker processes), and ``servesim --help`` (Python and the
command line's imports) in the same run.  ``--phases`` says where that time goes, in a fresh
process: the imports, the screen (the closed form, in the main process), numba's compiled loop
loaded (in the main process, once, before the workers fork), and the confirmation (its worker
processes, the costliest rows first: each one's CPU time and the slowest, which with the phases
before it is the plan's critical path).
``--profile`` splits the time by what runs (cProfile, one process, no workers: the engine runs,
the step prices inside them, the closed form, speculation's setting, the compiled loop's loading).
``--question spec`` asks them of the same plan with EAGLE-3 considered (1000/300 tokens at 800/40
ms), which costs about twice as much.

    python benchmarks/bench_plan.py [--only issue50,chat,rag,agent,moe] [--runs 3]
                                    [--cli] [--phases] [--profile] [--question issue50|spec]
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
_SPEC = ("meta-llama/Llama-3.1-70B-Instruct", "h100-sxm", 8, 1000, 300, 0.8, 0.040)
"""The 8-GPU question with EAGLE-3 considered (issue 50's second example)."""
_ISSUE50 = ("meta-llama/Llama-3.1-70B-Instruct", "h100-sxm", 8, 2000, 300, 0.8, 0.050)
"""Issue 50's 8-GPU question: Llama-3.1-70B on 8 H100s, 2000/300 tokens at 800/50 ms."""


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
        return PlanQuestion(*_ISSUE50)
    if name == "spec":
        return PlanQuestion(*_SPEC, spec="eagle3")
    if name == "moe":
        return PlanQuestion("deepseek-ai/DeepSeek-R1", "h100-sxm", 32, 1024, 1024, 2.0, 0.050,
                            engine="sglang")
    _, isl, osl, ttft, tpot = next(x for x in QUESTIONS if x[0] == name)
    return PlanQuestion("llama-3-70b", "h100-sxm", 16, isl, osl, ttft, tpot, spec="eagle3")


def _profile(name: str) -> None:
    """Where the plan's time goes by what runs: cumulative time of the main steps, one process (no
    workers; cProfile slows the Python parts more than numba's, so the shares are rough)."""
    import cProfile
    import pstats
    from dataclasses import replace

    from servesim.plan import search

    q = _question(name)
    prof = cProfile.Profile()
    prof.enable()
    screened = search._screen(replace(q, confirm=False))
    search._compiled_loop(q.confirm_top, q.engine)
    for row in screened["ranked"][:q.confirm_top]:
        search._confirm_task(row, q, screened["gpu"], None)
    prof.disable()
    stats = pstats.Stats(prof)
    total = max(stats.total_tt, 1e-9)  # type: ignore[attr-defined]
    wanted = {"_screen": "screen (closed form at load)", "_short_rate": "short runs (500 requests)",
              "_steady": "steady-state trials (4,000 requests)",
              "operating_point": "front's operating points (500 requests)",
              "run_benchmark": "engine runs (all of them)", "price_of": "  step prices inside them",
              "core": "  the engine loop itself", "struct_of": "  the compiled loop's records",
              "load_overload": "  loading numba's compiled loop",
              "speculation_setting": "speculation's setting per run (turn-off batch)",
              "decode_at_load": "closed form (screen and each run's check)",
              "steady_window": "steady-state windows"}
    rows: dict[str, float] = {}
    for (_, _, fn), (_, _, _, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        if fn in wanted:
            rows[wanted[fn]] = rows.get(wanted[fn], 0.0) + cum
    print(f"profile of the {name} plan in one process: {total:.2f} s (cProfile)")
    for what, cum in sorted(rows.items(), key=lambda x: -x[1]):
        print(f"  {what:<48} {cum:6.2f} s  {100 * cum / total:4.0f}%")


def _timed_confirm(*task: Any) -> tuple[int, float, int]:
    """A confirmation task as the plan runs it (search._confirm_task), with its worker's process id,
    its CPU seconds and whether the row held."""
    import os

    from servesim.plan import search

    c0 = time.process_time()
    row, _ = search._confirm_task(*task)
    return os.getpid(), time.process_time() - c0, int(row is not None)


def _phases_child(name: str) -> None:
    """In a fresh process: the plan's phases as ``capacity_plan`` runs them, printed as one JSON line
    (seconds)."""
    import json
    import os
    from dataclasses import replace

    w0, c0 = time.perf_counter(), time.process_time()
    import servesim.plan.predict  # noqa: F401  (the engine model: numpy, numba, the loop)
    from servesim.plan import search
    from servesim.sim.parallel import map_tasks

    imports = (time.perf_counter() - w0, time.process_time() - c0)
    q = _question(name)
    w0, c0 = time.perf_counter(), time.process_time()
    screened = search._screen(replace(q, confirm=False))
    screen = (time.perf_counter() - w0, time.process_time() - c0)
    # as search._confirmed: the compiled loop loaded here before the workers fork, the costliest rows
    # first
    w0, c0 = time.perf_counter(), time.process_time()
    tasks = [(r, q, screened["gpu"], None) for r in screened["ranked"][:q.confirm_top]]
    jobs = max(1, min(2, os.cpu_count() or 1, q.confirm_top))
    if search._compiled_loop(len(tasks), q.engine) and jobs > 1:
        search._load_compiled_loop(tasks[0], q, None)
    load = (time.perf_counter() - w0, time.process_time() - c0)
    w0, c0 = time.perf_counter(), time.process_time()
    tasks.sort(key=lambda t: -search._confirm_cost(t[0]))
    done = map_tasks(_timed_confirm, tasks, jobs=jobs)
    confirm = (time.perf_counter() - w0, time.process_time() - c0)
    workers: dict[int, list[float]] = {}
    for pid, cpu, _ in done:
        workers.setdefault(pid, []).append(cpu)
    print(json.dumps({"imports": imports, "screen": screen, "load": load, "confirm": confirm,
                      "rows": len(tasks), "held": sum(h for _, _, h in done),
                      "searched": len(screened["ranked"]),
                      "workers": list(workers.values())}))


def _phases(name: str, runs: int) -> None:
    """Where the plan's time goes, phase by phase (the median of ``runs`` fresh processes)."""
    import json
    import subprocess

    got = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, __file__, "--phases-child", name], capture_output=True,
                             text=True, check=True).stdout
        got.append(json.loads(out.strip().splitlines()[-1]))

    def med(key: str, i: int) -> float:
        return float(statistics.median(g[key][i] for g in got))

    slowest = statistics.median(max(sum(w) for w in g["workers"]) for g in got)
    first = statistics.median(statistics.mean(w[0] for w in g["workers"]) for g in got)
    rest = statistics.median(statistics.mean(x for w in g["workers"] for x in w[1:]) for g in got)
    cpu = statistics.median(sum(sum(w) for w in g["workers"]) for g in got)
    crit = med("imports", 1) + med("screen", 1) + med("load", 1) + slowest
    g = got[0]
    print(f"phases of the {name} plan ({g['searched']} deployments screened, {g['rows']} confirmed by "
          f"{len(g['workers'])} worker processes, {g['held']} hold), median of {runs} fresh processes:")
    for key, what in (("imports", "imports (numpy, numba, the engine model)"),
                      ("screen", "screen (closed form, main process)"),
                      ("load", "numba's compiled loop loaded (main process)")):
        print(f"  {what:<44} {med(key, 0):6.2f} s wall {med(key, 1):6.2f} s CPU")
    print(f"  {'confirmation (engine model, workers)':<44} {med('confirm', 0):6.2f} s wall {cpu:6.2f} s CPU "
          f"(slowest worker {slowest:.2f} s; a worker's first row {first:.2f} s, its others {rest:.2f} s "
          "each)")
    print(f"  critical path in CPU time (imports + screen + loop loaded + slowest worker): {crit:.2f} s")


def _cli(runs: int) -> None:
    """The 8-GPU plan as a user runs it, a process of its own, beside ``servesim --help``."""
    import shutil
    import subprocess

    exe = shutil.which("servesim")
    entry = [exe] if exe else [sys.executable, "-m", "servesim"]
    model, gpu, gpus, isl, osl, ttft, tpot = _ISSUE50
    plan = [*entry, "plan", "-q", "--model", model, "--gpu", gpu, "--gpus", str(gpus), "--isl", str(isl),
            "--osl", str(osl), "--slo-ttft-ms", f"{ttft * 1e3:g}", "--slo-tpot-ms", f"{tpot * 1e3:g}",
            "--spec", "none"]

    def timed(argv: list[str]) -> tuple[float, float]:
        walls, cpus = [], []
        for _ in range(runs):
            t0, c0 = time.perf_counter(), _children_cpu_s()
            subprocess.run(argv, capture_output=True, check=True)
            walls.append(time.perf_counter() - t0)
            cpus.append(_children_cpu_s() - c0)
        return statistics.median(walls), statistics.median(cpus)

    hw, hc = timed([*entry, "--help"])
    pw, pc = timed(plan)
    print(f"servesim --help (Python, the command line's imports): {hw:.2f} s wall, {hc:.2f} s CPU")
    print(f"servesim plan (issue 50's 8 GPUs): {pw:.2f} s wall, {pc:.2f} s CPU with its workers "
          f"(= {pw / max(hw, 1e-9):.1f} x --help; target: under 3 s wall)")


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished children (a timed command and its workers)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(NAMES), help=f"questions, of {', '.join(NAMES)}")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cli", action="store_true", help="time the 8-GPU plan as a process of its own")
    ap.add_argument("--phases", action="store_true", help="where the plan's time goes, phase by phase")
    ap.add_argument("--profile", action="store_true", help="where the plan's time goes, by what runs")
    ap.add_argument("--question", default="issue50", choices=("issue50", "spec"),
                    help="the plan --phases and --profile ask (default issue50)")
    ap.add_argument("--phases-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phases_child:
        _phases_child(args.phases_child)
        return 0
    from servesim.hardware.names import dense_shape
    from servesim.hardware.stepmodel import StepModel

    sm = StepModel(dense_shape("llama-3-70b"), "h100-sxm", 4)
    t0 = time.perf_counter()
    for i in range(1000):
        sm.step(1 + i % 64, 2000 + i)
    base = time.perf_counter() - t0
    print(f"baseline: 1,000 step prices in {base * 1e3:.1f} ms")
    if args.cli:
        _cli(args.runs)
    if args.phases:
        _phases(args.question, args.runs)
    if args.profile:
        _profile(args.question)
    if args.cli or args.phases or args.profile:
        return 0
    for name in args.only.split(","):
        if name not in NAMES:
            raise SystemExit(f"--only {name}: one of {', '.join(NAMES)}")
        _timed(name, _question(name), base, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
