"""How long the analytic core takes to import, against a bare interpreter start.

Run on demand: ``python benchmarks/bench_import.py [--repeat N]``.  Each sample
is a fresh interpreter; the baseline (``python -c pass``) is measured in the
same run, and the figure reported is the median extra time the import costs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = {
    "baseline (python -c pass)": "pass",
    "servesim.model.speculative": "import servesim.model.speculative",
    "servesim.model.queueing": "import servesim.model.queueing",
    "analytic core (4 modules)": "import servesim.model.speculative, servesim.model.queueing, "
    "servesim.model.kvcache, servesim.model.serving",
    "numpy (for scale)": "import numpy",
}


def sample(code: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=15)
    n = ap.parse_args().repeat
    medians = {}
    for name, code in CASES.items():
        sample(code)  # warm the file cache
        medians[name] = statistics.median(sample(code) for _ in range(n))
    base = medians["baseline (python -c pass)"]
    print(f"{'case':32s} {'median s':>9s} {'extra ms':>9s} {'x baseline':>10s}")
    for name, m in medians.items():
        print(f"{name:32s} {m:9.4f} {1e3 * (m - base):9.1f} {m / base:10.2f}")


if __name__ == "__main__":
    main()
