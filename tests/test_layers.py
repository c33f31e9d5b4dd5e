"""The package is a house in layers: imports go only downward and never in a circle.

Read from the source with ``ast`` (every import: module level, inside a function and under
``TYPE_CHECKING``), so a lazy import that climbs a floor is caught as surely as a top-level one.
The floors, lowest first (the table of layers in README.md, "Python API")::

    base      _checks, _textfile, _catalogfile, _curves,  helpers every layer shares
              _trace, _version
    model     closed forms, standard library only
    hardware  what a step costs                  -> model
    inputs    what users bring                   -> model
    sim       the simulators                     -> hardware, model
    plan      search, capacity, summaries        -> sim, hardware, model
    render    tables, plots, report              -> (base only: it takes plain results)
    cli       the command line                   -> everything below
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import servesim

ROOT = Path(servesim.__file__).parent
BASE = {"_checks", "_lazy", "_textfile", "_catalogfile", "_curves", "_trace", "_version"}
ALLOWED: dict[str, set[str]] = {
    "base": set(),
    "model": set(),
    "hardware": {"model"},
    "inputs": {"model"},
    "sim": {"hardware", "model"},
    "plan": {"sim", "hardware", "model"},
    "render": set(),
    "cli": {"render", "plan", "sim", "inputs", "hardware", "model"},
}


def _modules() -> dict[str, Path]:
    mods = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The servesim modules that ``name`` imports (a name imported from a package counts as its
    submodule when there is one)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                out.add(full if full in MODULES else target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.split(".")[0] == "servesim" and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def floor(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "root"
    if parts[1] in BASE:
        return "base"
    if parts[1] == "__main__":
        return "cli"
    assert parts[1] in ALLOWED, f"{module} is on no floor: put it in one of {sorted(ALLOWED)}"
    return parts[1]


def test_every_module_is_on_a_floor():
    top = sorted(m for m in MODULES if m.count(".") == 1 and floor(m) not in ("base", "cli")
                 and m.split(".")[1] not in ALLOWED)
    assert top == [], f"top-level modules outside the layers: {top}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if floor(m) != "root"))
def test_imports_go_only_downward(module):
    mine = floor(module)
    bad = sorted(
        target for target in GRAPH[module]
        if floor(target) not in ({mine, "base"} | ALLOWED[mine])
    )
    assert bad == [], f"{module} ({mine}) imports a higher or sideways floor: {bad}"


def test_no_import_circles():
    """No module reaches itself through its imports (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH.get(v, ()):
            if w not in MODULES:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(MODULES):
        if v not in index and floor(v) != "root":
            visit(v)
    assert circles == []


def test_the_checker_sees_a_planted_violation(tmp_path):
    """The graph reader is not blind: a lazy import inside a function is an edge."""
    src = tmp_path / "probe.py"
    src.write_text("def f():\n    from servesim.plan.summary import specdec_summary\n")
    assert "servesim.plan.summary" in _imports("servesim.model.probe", src)


def test_model_layer_is_standard_library_only():
    """Importing every closed form loads no third-party package and no other servesim floor."""
    code = (
        "import sys, servesim.model.speculative, servesim.model.queueing, servesim.model.mgc, "
        "servesim.model.kvcache, servesim.model.serving\n"
        "mods = [m for m in sys.modules if m.split('.')[0] in ('numpy', 'numba', 'matplotlib', 'rich')]\n"
        "own = [m for m in sys.modules if m.startswith('servesim.') and m.split('.')[1] not in "
        "('model', '_checks', '_lazy', '_textfile', '_catalogfile', '_version')]\n"
        "print(mods, own)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"


def test_old_module_paths_still_import():
    """The README's module paths of 0.1 (servesim.speculative, ...) are the modules at their new homes."""
    from servesim.kvcache import LINKS

    from servesim import queueing, serving, speculative
    from servesim.model import kvcache
    from servesim.model import queueing as q2
    from servesim.model import serving as s2
    from servesim.model import speculative as sp2

    assert speculative is sp2 and queueing is q2 and serving is s2
    assert LINKS is kvcache.LINKS
