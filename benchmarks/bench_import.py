"""How long the analytic core takes to import, and the lab's main job as a whole process, against a
bare interpreter start.

Run on demand: ``python benchmarks/bench_import.py [--repeat N]``.  Each sample is a fresh
interpreter; the baseline (``python -c pass``) is measured in the same run, the cases take turns
(one sample of each, then the next round) so that a change in the machine's load falls on all of
them alike, and each figure is the median of ``N`` samples: wall time, its extra over the
baseline, and the process's CPU time (user + system), which a busy machine inflates less.

Bytecode: every interpreter reads and writes its ``.pyc`` files under a temporary
``PYTHONPYCACHEPREFIX``, warmed by one untimed run of each case, as an installed package's are
(``PYTHONDONTWRITEBYTECODE`` is lifted for the run).  The last row runs ``servesim all`` with
``PYTHONDONTWRITEBYTECODE=1`` and the usual ``__pycache__`` folders, as a development checkout that
writes no bytecode does: the standard library from its ``.pyc`` files, servesim's modules compiled
from source each time (unless a ``__pycache__`` of theirs was left by another run).

``--compare SRC`` also times ``servesim all`` from another tree's ``src`` folder in the same run
(e.g. ``git archive OLD src | tar -x -C /tmp/old`` then ``--compare /tmp/old/src``): a before and
after measured under the same load.

Target (issue 47): ``servesim all`` under 150 ms of wall time as a whole process.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

BASELINE = "baseline (python -c pass)"
ALL = "servesim all (whole process)"
CASES: dict[str, list[str]] = {
    BASELINE: ["-c", "pass"],
    "servesim.model.speculative": ["-c", "import servesim.model.speculative"],
    "servesim.model.queueing": ["-c", "import servesim.model.queueing"],
    "analytic core (4 modules)": ["-c", "import servesim.model.speculative, servesim.model.queueing, "
                                  "servesim.model.kvcache, servesim.model.serving"],
    "numpy (for scale)": ["-c", "import numpy"],
    ALL: ["-m", "servesim", "all"],
    "servesim specdec": ["-m", "servesim", "specdec"],
    "servesim disagg": ["-m", "servesim", "disagg"],
}
FROM_SOURCE = "servesim all, compiled from source"
TARGET_MS = 150.0


def sample(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one fresh interpreter running ``python ARGS``,
    its output discarded.  CPU time moves less than wall time when other work shares the cores."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=21, help="samples per case (default 21)")
    ap.add_argument("--compare", metavar="SRC", default=None,
                    help="another tree's src folder: time its servesim all in the same run")
    opts = ap.parse_args()
    n = opts.repeat
    with tempfile.TemporaryDirectory() as cached:
        lifted = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
        env = {k: v for k, v in os.environ.items() if k not in lifted}
        envs = {name: {**env, "PYTHONPYCACHEPREFIX": cached} for name in CASES}
        envs[FROM_SOURCE] = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
        argv = {**CASES, FROM_SOURCE: CASES[ALL]}
        if opts.compare is not None:
            other = f"servesim all from {opts.compare}"
            argv[other] = CASES[ALL]
            envs[other] = {**envs[ALL], "PYTHONPATH": os.pathsep.join(
                [opts.compare, *filter(None, [env.get("PYTHONPATH")])])}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in argv}
        for name in argv:
            sample(argv[name], envs[name])  # warm the file cache and write the bytecode
        for _ in range(n):
            for name in argv:
                times[name].append(sample(argv[name], envs[name]))
    wall = {name: statistics.median(w for w, _ in t) for name, t in times.items()}
    cpu = {name: statistics.median(c for _, c in t) for name, t in times.items()}
    base = wall[BASELINE]
    print(f"median of {n} fresh interpreters per case, cases in turn; {sys.executable}")
    print(f"{'case':40s} {'wall ms':>8s} {'extra ms':>9s} {'x baseline':>10s} {'CPU ms':>7s}")
    for name, m in wall.items():
        print(f"{name:40s} {1e3 * m:8.1f} {1e3 * (m - base):9.1f} {m / base:10.2f} {1e3 * cpu[name]:7.1f}")
    verdict = "meets" if 1e3 * wall[ALL] < TARGET_MS else "misses"
    print(f"servesim all: {1e3 * wall[ALL]:.1f} ms of wall time as a whole process, {verdict} the "
          f"{TARGET_MS:.0f} ms target ({1e3 * cpu[ALL]:.1f} ms of CPU)")


if __name__ == "__main__":
    main()
