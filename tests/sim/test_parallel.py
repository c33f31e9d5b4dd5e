"""Sweeps give the same answer serially, on local processes and on a Ray cluster."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from servesim.sim.parallel import map_tasks
from tests.cli_helpers import run_cli


def _square(x: int) -> int:
    return x * x


def test_map_tasks_keeps_order_serial_and_local():
    args = [(i,) for i in range(7)]
    ticks: list[int] = []
    assert map_tasks(_square, args) == [i * i for i in range(7)]
    assert map_tasks(_square, args, jobs=2, progress=lambda: ticks.append(1)) == [i * i for i in range(7)]
    assert len(ticks) == 7


def test_plan_jobs_gives_the_same_bytes():
    a = run_cli("plan", "--preset", "rag", "--format", "json", "--quiet")
    b = run_cli("plan", "--preset", "rag", "--format", "json", "--quiet", "--jobs", "2")
    assert a.returncode == 0 and a.stdout == b.stdout


def test_plan_on_a_local_ray_cluster():
    pytest.importorskip("ray")
    ray_cli = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if ray_cli is None:
        pytest.skip("ray command not found")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    port = "6391"
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    start = subprocess.run(
        [ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
         f"--temp-dir={temp}"],
        capture_output=True, text=True, env=env, timeout=180,
    )
    assert start.returncode == 0, start.stderr[-2000:]
    try:
        ray = run_cli("plan", "--preset", "rag", "--format", "json", "--quiet",
                      "--ray", f"127.0.0.1:{port}")
        assert ray.returncode == 0, ray.stderr[-2000:]
    finally:
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True, env=env, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)
    serial = run_cli("plan", "--preset", "rag", "--format", "json", "--quiet")
    assert json.loads(ray.stdout) == json.loads(serial.stdout)
