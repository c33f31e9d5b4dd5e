"""Speed of the capacity plan: one workload on one GPU type, the whole search.

Times ``capacity_plan`` (``servesim plan --gpus``) for the three questions of
issue 10 (Llama-3-70B on H100: chat 1024/512 at 1000/40 ms, RAG 6144/512 at
2000/28 ms, agent 8192/256 at 1000/35 ms) on 16 GPUs with MTP considered, each
the median of 3 runs (each run builds new step models, so no step price is
cached from the run before; the kernel tables stay loaded), and prints the
ratio against a baseline measured in the same run: pricing one decode step a
thousand times.  Target: under 2 s per question on this 2-core machine
(aiconfigurator takes 7-18 s for a comparable search).  A fourth question times
a mixture of experts whose replicas span nodes: DeepSeek-R1 on 32 H100s with
SGLang, 1024/1024 at 2000/50 ms (splits of 1-8 GPUs and of 16 and 32: the
two- and four-node ones).

    python benchmarks/bench_plan.py
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

QUESTIONS = [("chat", 1024, 512, 1.0, 0.040), ("rag", 6144, 512, 2.0, 0.028),
             ("agent", 8192, 256, 1.0, 0.035)]


def _timed(name: str, q: Any, base: float) -> None:
    """The median of 3 runs of ``capacity_plan(q)``, printed beside the baseline."""
    from servesim.plan.search import capacity_plan

    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        d = capacity_plan(q)
        times.append(time.perf_counter() - t0)
    wall = statistics.median(times)
    best = d["ranked"][0] if d["ranked"] else None
    what = (f"best {best['architecture']} on {best['gpus']} GPUs at {best['output_throughput_per_gpu']:,.0f} "
            "tok/s/GPU" if best else "nothing meets the SLOs")
    print(f"{name:<6} {d['isl']}/{d['osl']}: {d['searched']} deployments in {wall:.2f} s "
          f"(= {wall / (base / 1000):,.0f} step prices); {what}")


def main() -> int:
    from servesim.hardware.names import dense_shape
    from servesim.hardware.stepmodel import StepModel
    from servesim.plan.search import PlanQuestion

    sm = StepModel(dense_shape("llama-3-70b"), "h100-sxm", 4)
    t0 = time.perf_counter()
    for i in range(1000):
        sm.step(1 + i % 64, 2000 + i)
    base = time.perf_counter() - t0
    print(f"baseline: 1,000 step prices in {base * 1e3:.1f} ms")
    for name, isl, osl, ttft, tpot in QUESTIONS:
        _timed(name, PlanQuestion("llama-3-70b", "h100-sxm", 16, isl, osl, ttft, tpot, spec="eagle3"), base)
    _timed("moe", PlanQuestion("deepseek-ai/DeepSeek-R1", "h100-sxm", 32, 1024, 1024, 2.0, 0.050,
                               engine="sglang"), base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
