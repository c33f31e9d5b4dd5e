"""Speed of ``servesim predict --points``: a thousand deployments in one run.

Builds a points file of 1,000 rows (5 models x 3 GPUs x TP x dtype x lengths x
concurrency 1-512, fixed by a seed), runs ``servesim predict --points FILE
--format json`` once in-process, and prints the wall time, rows per second and
the ratio against a baseline measured in the same run: one batch-1 decode step
priced 1,000 times (the cheapest thing a row does).  Target: under 10 s on a
2-core machine.

    python benchmarks/bench_predict.py
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import sys
import tempfile
import time
from pathlib import Path

MODELS = [("meta-llama/Llama-3.1-8B-Instruct", (1, 2, 4, 8)),
          ("meta-llama/Llama-3.1-70B-Instruct", (2, 4, 8)), ("Qwen/Qwen3-32B", (1, 2, 4, 8)),
          ("mistralai/Mistral-7B-Instruct-v0.3", (1, 2, 4)),
          ("Qwen/Qwen2.5-72B-Instruct", (4, 8))]
GPUS = [("h100-sxm", ("bf16", "fp8")), ("h200", ("bf16", "fp8")), ("b200", ("bf16", "fp8", "fp4"))]
LENGTHS = [(128, 128), (1024, 1024), (1024, 128), (8192, 1024), (2048, 256)]
CONCURRENCY = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def points(n: int = 1000, seed: int = 0) -> str:
    rng = random.Random(seed)
    lines = ["model,gpu,tp,dtype,isl,osl,concurrency"]
    for _ in range(n):
        model, tps = rng.choice(MODELS)
        gpu, dtypes = rng.choice(GPUS)
        isl, osl = rng.choice(LENGTHS)
        lines.append(f"{model},{gpu},{rng.choice(tps)},{rng.choice(dtypes)},{isl},{osl},"
                     f"{rng.choice(CONCURRENCY)}")
    return "\n".join(lines) + "\n"


def main() -> int:
    from servesim.cli.main import main as cli
    from servesim.hardware.names import dense_shape
    from servesim.hardware.stepmodel import StepModel

    sm = StepModel(dense_shape("llama-3-8b"), "h100-sxm", 1)
    t0 = time.perf_counter()
    for i in range(1000):
        sm.step(1, 1000 + i)  # distinct contexts: no cache hits
    base = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "points.csv"
        path.write_text(points())
        out = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(out):
            rc = cli(["predict", "--points", str(path), "--format", "json"])
        wall = time.perf_counter() - t0
    rows = json.loads(out.getvalue())
    errors = sum(1 for r in rows if "error" in r)
    print(f"predict --points: {len(rows)} rows ({errors} refused with a reason) in {wall:.2f} s "
          f"= {len(rows) / wall:,.0f} rows/s; exit {rc}")
    print(f"baseline: 1,000 batch-1 step prices in {base * 1e3:.1f} ms; a row costs "
          f"{wall / len(rows) / (base / 1000):,.0f} step prices")
    return 0


if __name__ == "__main__":
    sys.exit(main())
