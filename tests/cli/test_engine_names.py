"""The command line and the renderers name no engine (issue 47 item 1): the engines, their default and
each engine's own server flags are engines.toml's, so a fourth engine's flags are one entry there."""

from __future__ import annotations

import argparse
import ast
import copy
from pathlib import Path

import pytest

import servesim.hardware.engines as engines
from servesim._checks import ParameterError
from servesim.cli import predict
from servesim.cli.main import build_parser

SRC = Path(__file__).resolve().parents[2] / "src" / "servesim"


def _strings(path: Path) -> list[tuple[int, str]]:
    return [(n.lineno, n.value) for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


@pytest.mark.parametrize("room", ["cli", "render"])
def test_no_module_of_the_command_line_or_the_renderers_writes_an_engine_name(room):
    names = set(engines.ENGINES) | set(engines.engine_aliases())
    found = [f"{p.name}:{line}: {s!r}" for p in sorted((SRC / room).glob("*.py"))
             for line, s in _strings(p) if s.strip().lower() in names]
    assert found == []


TOY = [{"flag": "--toy-whole-prompts", "sets": "whole_prompts", "switch": True,
        "help": "runs every prompt whole (a test's engine)"},
       {"flag": "--toy-step-tokens", "sets": "budget", "help": "tokens in a step"}]


@pytest.fixture
def toy_engine(monkeypatch):
    """engines.toml with a fourth engine, ``toy``, with two flags of its own: a switch of a scheduler
    option, and its step's token budget under a name servesim's ranges (_checks.BOUNDS) do not know."""
    raw = copy.deepcopy(engines._raw())
    raw["engine"]["toy"] = {"name": "Toy", "flags": TOY}
    monkeypatch.setattr(engines, "_raw", lambda: raw)
    predict.flag_dests.cache_clear()
    yield
    predict.flag_dests.cache_clear()


def _predict_options() -> dict[str, argparse.Action]:
    """predict's options by flag."""
    sub = next(a for a in build_parser("predict")._actions if isinstance(a, argparse._SubParsersAction))
    return {o: a for a in sub.choices["predict"]._actions for o in a.option_strings}


def test_a_fourth_engine_and_its_flag_reach_predict_from_the_data_file_alone(toy_engine):
    args = build_parser("predict").parse_args(["predict", "--engine", "toy", "--toy-whole-prompts"])
    assert (args.engine, args.toy_whole_prompts, args.toy_step_tokens) == ("toy", True, None)
    assert _predict_options()["--toy-whole-prompts"].help == "toy: runs every prompt whole (a test's engine)"
    settings = predict.engine_settings("toy", {"toy_whole_prompts": True, "toy_step_tokens": 64})
    assert settings["scheduler"] == (("whole_prompts", True),)
    assert settings["max_num_batched_tokens"] == 64


@pytest.mark.parametrize(("value", "ok"), [("64", True), ("1000000", True), ("0", False), ("1000001", False),
                                           ("6.5", False)])
def test_a_fourth_engines_budget_flag_takes_the_budgets_range(toy_engine, value, ok, capsys):
    """A flag that sets the step's token budget takes the budget's range, 1-1,000,000 tokens, whatever
    the engine calls it; out of it, exit status 2 and one line naming the flag."""
    parser = build_parser("predict")
    if ok:
        assert parser.parse_args(["predict", "--toy-step-tokens", value]).toy_step_tokens == int(value)
        return
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["predict", "--toy-step-tokens", value])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "--toy-step-tokens" in err
    with pytest.raises(ParameterError, match="given only with --engine toy"):
        predict.engine_settings(engines.default_engine(), {"toy_whole_prompts": True})


def test_each_engines_flag_for_a_deployment_field_is_found_from_the_data():
    """Every engine names one flag for its running limit (vLLM --max-num-seqs, SGLang
    --max-running-requests, TensorRT-LLM --max-batch-size); each is an option of predict."""
    seqs = predict.flags_setting("max_num_seqs")
    assert len(seqs) == len(engines.ENGINES) == len(set(seqs))
    assert set(seqs) <= {a.dest for a in _predict_options().values()}
    for engine in engines.ENGINES:
        assert len(predict.flags_setting("max_num_seqs", engine)) == 1
    assert predict.flags_setting("no_such_field") == ()


@pytest.mark.parametrize("argv", [["predict"], ["disagg"], ["roofline", "--model", "m", "--gpu", "g"]])
def test_engine_takes_each_spelling_engines_toml_lists_and_refuses_others(argv, capsys):
    parser = build_parser(argv[0])
    for alias, engine in engines.engine_aliases().items():
        assert parser.parse_args([*argv, "--engine", alias.upper()]).engine == engine
    with pytest.raises(SystemExit) as exc:
        parser.parse_args([*argv, "--engine", "tensorrt"])
    assert exc.value.code == 2
    assert f"must be one of {', '.join(engines.ENGINES)}" in capsys.readouterr().err
