"""Test-session hooks.

``--dist loadgroup`` (the README's test command) sends the tests marked ``xdist_group`` to one
worker by suffixing their node ids with ``@group`` in each worker.  pytest-xdist 3.8 writes the
suffix to ``item._nodeid``, which pytest 9 no longer reads (``Node.nodeid`` is ``str(self._id)``),
so the groups were spread over the workers and each compiled the engine loop (about 17 s apiece on
a fresh checkout).  This hook adds the suffix where pytest 9 reads it, exactly as xdist means to.

It also keeps a module's tests that share one of its module-scoped fixtures (a plan or a report made
once for the module) in one worker: spread over two workers, each made it again (the report's
fixture took 24-28 s in each worker, tests/render/test_report.py).  Such tests join the group
``module:<path>`` unless they already belong to a group.

Hypothesis runs without its per-example deadline: a deadline is a timed assertion, and on a loaded
2-core machine it failed tests whose answers were right (speed is measured in benchmarks/).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("servesim", deadline=None)
settings.load_profile("servesim")


def pytest_configure(config: Any) -> None:
    """A test named by its id runs even when marked slow: the default ``-m "not slow"`` (pyproject
    addopts) would deselect it without a word."""
    args = [str(a) for a in config.args]
    if config.option.markexpr == "not slow" and args and all("::" in a for a in args):
        config.option.markexpr = ""


# Cases of a generated parametrization that repeat another test's work, marked slow here (their
# parameter lists are built from the CLI's own --help examples): id -> the default test that covers it.
SLOW_CASES = {
    "tests/cli/test_help_examples.py::test_help_example_runs[servesim report --preset rag --out rag-report]":
        "tests/render/test_report.py's report_dir runs the same report (and checks its files)",
    "tests/cli/test_help_examples.py::test_help_example_runs[servesim report --model llama-3-70b --gpu "
    "h100-sxm --gpus 8 --isl 1024 --osl 512 --out cap]":
        "tests/render/test_report.py's capacity report (report --model ... --out) runs the same path",
    "tests/cli/test_help_examples.py::test_help_example_runs[servesim validate --quiet]":
        "the example validate --requests 100000 --format json and tests/cli/test_sim_cli.py's "
        "test_validate_small_run_has_both_tables run validate",
    "tests/cli/test_help_examples.py::test_help_example_runs[servesim plan --model "
    "meta-llama/Llama-3.1-70B-Instruct --gpu h100-sxm --gpus 16 --isl 1024 --osl 512]":
        "the README's plan of Llama-3-70B on 8 H100s (tests/test_readme.py) and a 16-GPU budget's screen "
        "(tests/plan/test_capacity.py test_capacity_is_monotone_in_gpus)",
}


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m deselection
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    for item in items:
        if item.nodeid in SLOW_CASES:
            item.add_marker(pytest.mark.slow)
        if not any(True for _ in item.iter_markers("xdist_group")) and _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(f"module:{item.nodeid.split('::', 1)[0]}"))
    # in a worker, xdist has set option.loadgroup from the controller's --dist (and dist to "no")
    if os.environ.get("PYTEST_XDIST_WORKER") is None or not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                 for m in item.iter_markers("xdist_group")}
        nodeid = item.nodeid
        if not names or nodeid.rfind("@") > nodeid.rfind("]"):  # none, or xdist's own suffix took
            continue
        new = f"{nodeid}@{'_'.join(sorted(names))}"
        try:
            from _pytest.nodes import coerce_node_id  # pytest >= 9
        except ImportError:  # pragma: no cover - older pytest reads _nodeid, which xdist sets after us
            return
        item._id = coerce_node_id(new)


def _uses_a_module_fixture(item: Any) -> bool:
    """Whether ``item`` requests a fixture of module scope defined in its own module."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    module = item.nodeid.split("::", 1)[0]
    for defs in info.name2fixturedefs.values():
        for d in defs:
            if d.scope == "module" and str(getattr(d, "baseid", "")).split("::", 1)[0] == module:
                return True
    return False
