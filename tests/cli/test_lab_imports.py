"""The lab's path stays light (issue 47, item 7): its commands without ``--model`` load no
``servesim.hardware`` module and read only the data files they print from.

Each case runs the command line's ``main`` in a fresh interpreter and reports what that process
loaded: the servesim modules in ``sys.modules`` and the data files read through
:func:`servesim._catalogfile.read_toml` (the one reader of shipped TOML).  A control case loads a
command that prices hardware, so the probe is shown to see a hardware module when one is loaded.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

from servesim.cli.args import ALL_DTYPES, Parser, dtype_choice
from servesim.cli.main import COMMAND_MODULES, COMMANDS, build_parser
from tests.cli_helpers import RECORD_TOML_READS, ROOT

PROBE = RECORD_TOML_READS + """
import contextlib, io, json, sys
from servesim.cli.main import main

with contextlib.redirect_stdout(io.StringIO()):
    try:
        status = main(json.loads(sys.argv[1]))
    except SystemExit as exc:  # --help
        status = exc.code
print(json.dumps({"status": status, "read": read,
                  "modules": sorted(m for m in sys.modules if m.startswith("servesim"))}))
"""

LAB_FILES = {"speculative.toml", "workloads.toml", "links.toml", "models.toml"}
"""What the lab prints from: the speculative presets, the workloads and their reference node, whose
KV shape (models.toml) and link (links.toml) price the KV transfer."""


def loaded(*argv: str) -> dict[str, object]:
    """What ``servesim ARGV`` loaded in a fresh interpreter: exit status, data files, modules."""
    res = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    out: dict[str, object] = json.loads(res.stdout.splitlines()[-1])
    return out


@pytest.mark.parametrize("argv", [("all",), ("specdec",), ("disagg",), ("disagg", "--preset", "rag"),
                                  ("all", "--format", "json"), ("specdec", "--alpha", "0.6", "--k", "4")])
def test_lab_commands_load_no_hardware_module(argv):
    got = loaded(*argv)
    assert got["status"] == 0
    hardware = [m for m in got["modules"] if m == "servesim.hardware" or m.startswith("servesim.hardware.")]
    assert hardware == [], f"servesim {' '.join(argv)} loaded {hardware}"
    assert not {m for m in got["modules"] if m.startswith(("servesim.sim", "servesim.inputs"))}
    assert set(got["read"]) <= LAB_FILES, f"servesim {' '.join(argv)} read {got['read']}"
    assert len(got["read"]) == len(set(got["read"])), "a data file was read twice"


def test_the_probe_sees_a_hardware_module_when_one_is_loaded():
    got = loaded("roofline", "--help")  # the roofline command's flags name the pricer's constants
    assert got["status"] == 0
    assert "servesim.hardware.speculation" in got["modules"]


@pytest.mark.parametrize(("argv", "files"), [
    (("all",), LAB_FILES),
    (("disagg",), {"workloads.toml", "links.toml", "models.toml"}),  # not the speculative presets
    (("specdec",), {"speculative.toml"}),  # plan.summary takes the presets and links through their modules
])
def test_a_lab_command_reads_the_data_files_it_prints_from(argv, files):
    assert set(loaded(*argv)["read"]) == files


def test_importing_the_closed_forms_reads_no_data_file():
    """The presets, workloads, links and KV shapes are read on first use, once, not at import."""
    code = ("import servesim._catalogfile as files; read = []; r = files.read_toml; "
            "files.read_toml = lambda p: read.append(p.name) or r(p); "
            "import servesim.model.serving, servesim.model.speculative, servesim.model.kvcache as kv; "
            "print(read); kv.LINKS['rdma']; kv.LINKS['tcp']; servesim.model.serving.DEFAULT_NODE; "
            "servesim.model.serving.WORKLOAD_PRESETS; print(read)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[:2] == ["[]", "['links.toml', 'workloads.toml', 'models.toml']"]


def test_commands_name_the_module_that_registers_them():
    """:data:`COMMANDS` (what ``servesim CMD`` builds alone) agrees with what each module registers,
    and the whole parser lists the commands in its order."""
    registered: dict[str, str] = {}
    for name in COMMAND_MODULES:
        sub = Parser(prog="x").add_subparsers(dest="command", parser_class=Parser)
        importlib.import_module(name).register(sub)
        registered.update(dict.fromkeys(sub.choices, name))
    assert registered == COMMANDS
    full = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(full.choices) == list(COMMANDS)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_one_command_parser_is_the_whole_parser_s(command):
    """The parser ``servesim CMD`` builds alone gives that command the same flags and help."""
    def sub_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return action.choices[command]

    alone, whole = sub_parser(build_parser(command)), sub_parser(build_parser())
    assert alone.format_help() == whole.format_help()


def test_a_dtype_as_servesim_spells_it_needs_no_normalizing():
    """``dtype_choice`` takes a listed name as it is, without importing the pricer's normalizer: the
    normalizer would give the same name back."""
    from servesim.hardware.precision import normalize_dtype

    for name in ALL_DTYPES:
        assert normalize_dtype(name) == name
        assert dtype_choice(ALL_DTYPES)(name) == name
    assert dtype_choice(ALL_DTYPES)(" FP8 ") == "fp8"
    assert dtype_choice(ALL_DTYPES)("nvfp4") == "fp4"
