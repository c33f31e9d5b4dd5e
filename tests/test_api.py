"""The public API: __all__ is a contract and the analytic core is stdlib-only."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import servesim

CORE = ("servesim.model.speculative", "servesim.model.queueing", "servesim.model.kvcache",
        "servesim.model.serving")


def test_all_names_resolve():
    for name in servesim.__all__:
        assert hasattr(servesim, name), name
    assert servesim.__all__ == sorted(servesim.__all__, key=lambda n: (not n.isupper(), n[0].islower(), n))


@pytest.mark.parametrize("module", CORE)
def test_module_all_names_resolve(module):
    mod = importlib.import_module(module)
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.{name}"


def test_issue_contract_names_exist():
    from servesim.model import kvcache, queueing, serving, speculative

    for mod, names in [
        (speculative, ["expected_tokens", "speedup", "optimal_k", "SPECDEC_PRESETS"]),
        (queueing, ["erlang_b", "erlang_c", "mmc_mean_wait_s", "mmc_wait_tail"]),
        (kvcache, ["kv_bytes_per_token", "kv_transfer_s"]),
        (serving, ["colocated", "disaggregated", "best_split", "link_crossover"]),
    ]:
        assert all(n in mod.__all__ for n in names)


def test_analytic_core_imports_only_the_standard_library():
    code = (
        "import sys; before = set(sys.modules); "
        f"import {', '.join(CORE)}; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "print(sorted(m for m in new if m not in sys.stdlib_module_names and m != 'servesim'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
