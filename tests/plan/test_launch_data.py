"""The engines' launch lines as data (data/engine_launch.toml): one entry per engine and per client,
read by one writer (servesim.plan.launch) and one reader (servesim.plan.launch_parse).

What is checked: every engine servesim prices has an entry whose program is its flag list's; every
name an entry reads is a setting the writer knows and every condition parses; an engine without an
entry is refused in one line that names it; and a toy fourth engine, added here as one entry (and
its flag list), launches with the line worked out by hand below and reads back as its deployment.
"""

from __future__ import annotations

import string
from collections.abc import Iterator

import pytest

from servesim._checks import ParameterError
from servesim.hardware import engines as engines_module
from servesim.hardware import pricer
from servesim.hardware.pricer import Deployment
from servesim.plan import launch
from servesim.plan.launch import (
    benchmark_command,
    deploy_colocated,
    engine_command,
    flag_lists,
    program,
    unknown_flags,
)
from servesim.plan.launch_parse import canonical, parse_launch
from servesim.plan.launch_script import launch_data
from servesim.sim.batching import Benchmark

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"


def test_every_engine_and_client_has_an_entry_whose_program_is_its_flag_lists() -> None:
    data = launch_data()
    for engine in engines_module.ENGINES:
        assert program(engine) == flag_lists()[engine]["program"], engine
        assert 0 < data["engine"][engine]["port"] < 65536
    assert set(data["client"]) == set(flag_lists()["client"])
    for client in data["client"]:
        assert program(f"client.{client}") == flag_lists()["client"][client]["program"]


def _names(entry: dict[str, object]) -> Iterator[str]:
    """The settings' names an entry reads: its value, its conditions' and its note's fields."""
    if "value" in entry:
        yield str(entry["value"])
    for cond in entry.get("when", ()):  # type: ignore[attr-defined]
        m = launch._CONDITION.fullmatch(cond)
        assert m is not None, cond
        yield m.group(1)
    for _, name, _, _ in string.Formatter().parse(str(entry.get("note", ""))):
        if name:
            yield name


def test_every_entry_reads_settings_the_writer_knows() -> None:
    dep = Deployment(LLAMA8, "h100-sxm", scheduler=())
    eng = launch.flag_profile(dep)
    for name, table in launch_data()["engine"].items():
        known = set(launch._values(dep, eng, table, "ckpt", None, None, None, None, None, ""))
        # an engine's scheduler options are its engines.toml [engine.NAME.scheduler] keys
        known |= {f"scheduler.{k}" for k in engines_module._raw()["engine"][name].get("scheduler", {})}
        for entry in table["settings"]:
            assert set(_names(entry)) <= known, (name, entry)
    bench = Benchmark(isl=100, osl=10, concurrency=2)
    for name, table in launch_data()["client"].items():
        known = set(launch._bench_values(bench, dep, table))
        for entry in table["settings"]:
            assert set(_names(entry)) <= known, (name, entry)


def _toy(dep: Deployment) -> Deployment:
    """``dep`` served by engine "toy" (set past the constructor's check of engines.toml's engines)."""
    object.__setattr__(dep, "engine", "toy")
    return dep


def test_an_engine_without_a_launch_entry_is_refused_by_name() -> None:
    dep = _toy(Deployment(LLAMA8, "h100-sxm"))
    for write in (lambda: engine_command(dep), lambda: benchmark_command(Benchmark(isl=100, osl=10), dep),
                  lambda: deploy_colocated(dep, Benchmark(isl=100, osl=10))):
        with pytest.raises(ParameterError, match=r"engine='toy' is invalid: must be one of .*launch entry"):
            write()


TOY = {
    "port": 9000,
    "commands": [["toy-serve"]],
    "speculation": {"mtp": "M"},
    "settings": [
        {"positional": True, "value": "checkpoint"},
        {"flag": "--gpus", "value": "world"},
        {"flag": "--budget", "value": "max_num_batched_tokens"},
        {"flag": "--seqs", "value": "max_num_seqs"},
        {"flag": "--kv", "value": "kv_dtype", "map": {"fp8": "f8"}, "otherwise": "same", "default": "bf16"},
        {"flag": "--draft-method", "value": "method"},
        {"flag": "--draft-len", "value": "k", "when": ["method"]},
    ],
}
TOY_FLAGS = {"program": "toy-serve", "flags": ["--gpus", "--budget", "--seqs", "--kv", "--draft-method",
                                               "--draft-len"],
             "repo": "a test", "path": "tests/plan/test_launch_data.py", "commit": "-", "version": "-",
             "license": "-"}


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fourth engine: one launch entry and its flag list (and, for its engine profile, vLLM's
    engines.toml entry under its name)."""
    monkeypatch.setitem(launch_data()["engine"], "toy", TOY)
    monkeypatch.setitem(flag_lists(), "toy", TOY_FLAGS)
    monkeypatch.setitem(engines_module._raw()["engine"], "toy", engines_module._raw()["engine"]["vllm"])
    monkeypatch.setattr(pricer, "ENGINES", (*engines_module.ENGINES, "toy"), raising=False)


def test_a_fourth_engine_is_one_entry(toy: None) -> None:
    dep = _toy(Deployment(LLAMA8, "h100-sxm", tp=2, kv_dtype="fp8", max_num_batched_tokens=4096,
                          max_num_seqs=64))
    cmd, notes = engine_command(dep, spec="mtp", k=3)
    assert cmd == (
        f"# servesim predict --model {LLAMA8} --gpu h100-sxm --spec mtp\n"
        f"toy-serve {LLAMA8} \\\n  --gpus 2 \\\n  --budget 4096 \\\n  --seqs 64 \\\n  --kv f8 \\\n"
        "  --draft-method M \\\n  --draft-len 3\n"
    )
    assert unknown_flags(cmd) == [] and notes == []
    p = parse_launch(cmd)
    assert p.deployment == canonical(dep, "mtp") and (p.speculation["spec"], p.speculation["k"]) == ("mtp", 3)
    assert p.deployment.tp == 2 and p.deployment.kv_dtype == "fp8" and p.deployment.max_num_seqs == 64
    # a method the entry has no name for: said, written without, its draft length on the first line
    cmd, notes = engine_command(dep, spec="ngram", k=4)
    assert "--draft-method" not in cmd and "--spec ngram --k 4" in cmd.splitlines()[0]
    assert notes == ["speculation ngram: the engine has no name for it (data/engine_launch.toml); the "
                     "command starts the engine without it"]
    assert "  --port 9000 \\\n" in benchmark_command(Benchmark(isl=100, osl=10, concurrency=2), dep)
