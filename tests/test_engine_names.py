"""No engine's name is written in the code outside its own scheduler policy module (issue 47 item 1).

Adding an engine is one policy module (``src/servesim/sim/schedulers/<engine>.py``) and one entry in
``hardware/data/engines.toml``; every other module reads what differs between engines from the data
file.  The scan reads each module's string constants with ``ast`` (so a docstring or a comment that
mentions vLLM is prose, not a literal) and reports every constant equal to an engine's key of
engines.toml, its name or one of its aliases (``"vllm"``, ``"TensorRT-LLM"``, ``"trt-llm"``), as
``path:line``, outside ``sim/schedulers/<that engine>.py``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import servesim
from servesim.hardware.engines import ENGINES, display_name, engine_aliases

ROOT = Path(servesim.__file__).parent
POLICIES = ROOT / "sim" / "schedulers"

ALLOWED: dict[tuple[str, str], str] = {}
"""(module path under src/servesim, literal) -> why that literal is another concept that happens to be
spelled as an engine's name.  Empty: every engine-named literal is a mistake."""


def spellings() -> dict[str, str]:
    """Every way servesim spells an engine (key, aliases, name as its project writes it) -> its key."""
    return {**engine_aliases(), **{display_name(key): key for key in ENGINES}}


def engine_literals(root: Path, engines: dict[str, str],
                    allowed: dict[tuple[str, str], str]) -> list[str]:
    """``path:line: 'literal'`` for each string constant of a module under ``root`` that is one of
    the spellings ``engines`` (-> the engine's key), except in that engine's policy module
    (``sim/schedulers/<key>.py``) and the ``allowed`` (module, literal) pairs."""
    # A literal of a key is written with a quote or an f-string's brace on each side: only the files
    # with one are parsed (parsing them all takes seconds).
    quoted = re.compile("[\"'}](?:" + "|".join(map(re.escape, engines)) + ")[\"'{]")
    found: list[tuple[str, int, str]] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        if not quoted.search(text):
            continue
        for node in ast.walk(ast.parse(text)):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in engines):
                continue
            if rel == f"sim/schedulers/{engines[node.value]}.py" or (rel, node.value) in allowed:
                continue
            found.append((rel, node.lineno, node.value))
    return [f"{rel}:{line}: {value!r}" for rel, line, value in sorted(found)]


def test_every_engine_has_a_policy_module() -> None:
    assert ENGINES, "engines.toml lists no engine"
    for engine in ENGINES:
        assert (POLICIES / f"{engine}.py").is_file(), engine


def test_the_scan_finds_a_literal_and_spares_the_policy_module_and_prose(tmp_path: Path) -> None:
    (tmp_path / "sim" / "schedulers").mkdir(parents=True)
    (tmp_path / "sim" / "schedulers" / "beta.py").write_text('OTHER = "alpha"\n', encoding="utf-8")
    (tmp_path / "pricer.py").write_text(
        '"""Prices alpha\'s steps."""\n# "alpha" in a comment\nX = "alpha_rate"\nY = ("beta", "gamma")\n'
        'Z = "Alpha-LM"\n', encoding="utf-8")
    (tmp_path / "sim" / "schedulers" / "alpha.py").write_text('NAME, LABEL = "alpha", "Alpha-LM"\n',
                                                              encoding="utf-8")
    engines = {"alpha": "alpha", "Alpha-LM": "alpha", "beta": "beta"}
    found = engine_literals(tmp_path, engines, {})
    # another engine's policy module may not name it; a docstring, a comment or a longer string is no literal
    assert found == ["pricer.py:4: 'beta'", "pricer.py:5: 'Alpha-LM'", "sim/schedulers/beta.py:1: 'alpha'"]
    assert engine_literals(tmp_path, engines, {("pricer.py", "beta"): "test"}) == [
        "pricer.py:5: 'Alpha-LM'", "sim/schedulers/beta.py:1: 'alpha'"]


def test_no_engine_name_outside_its_policy_module() -> None:
    found = engine_literals(ROOT, spellings(), ALLOWED)
    assert not found, "engine names written in the code (move them to engines.toml):\n" + "\n".join(found)
