"""Command line: ``servesim specdec | disagg | all | ...``: the parser, ``main`` and the output.

A thin layer over the public API; the command-line modules are the only ones that
print.  Bad input gets one line on stderr naming the flag, the value and the valid
range, and exit status 2.

Each command group lives in its own module (``COMMAND_MODULES``), which has
``register(sub)`` (see :mod:`servesim.cli.args`); flags and resolution shared by
several groups are in :mod:`servesim.cli.common`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from servesim._catalogfile import CatalogError
from servesim._checks import InputError, OutputError, ParameterError
from servesim._version import __version__
from servesim.cli.args import Output, Parser, Subcommands
from servesim.cli.common import resolve_link_name
from servesim.render import text as render_text
from servesim.render import to_csv, to_json
from servesim.render.formats import wrap_long_lines

__all__ = ["COMMANDS", "COMMAND_MODULES", "build_parser", "main"]

COMMAND_MODULES: tuple[str, ...] = (
    "servesim.cli.lab",
    "servesim.cli.sim",
    "servesim.cli.roofline",
    "servesim.cli.inputs",
    "servesim.cli.plan",
    "servesim.cli.predict",
)
"""Modules that add further subcommands, in the order they appear in --help."""

COMMANDS: dict[str, str] = {
    "specdec": "servesim.cli.lab",
    "disagg": "servesim.cli.lab",
    "all": "servesim.cli.lab",
    "simulate": "servesim.cli.sim",
    "validate": "servesim.cli.sim",
    "roofline": "servesim.cli.roofline",
    "trace": "servesim.cli.inputs",
    "fit-alpha": "servesim.cli.inputs",
    "calibrate": "servesim.cli.inputs",
    "plan": "servesim.cli.plan",
    "report": "servesim.cli.plan",
    "predict": "servesim.cli.predict",
}
"""Each subcommand and the module of :data:`COMMAND_MODULES` that registers it
(tests/cli/test_lab_imports.py checks the two agree)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``command`` (a key of :data:`COMMANDS`), the parser of that command
    alone.  This is the command line's lazy boundary: ``servesim all`` imports the lab's module and
    what it needs, never the pricers, simulators and planners the other commands load (and a module
    that registers several commands adds only the one asked for where it checks
    :func:`servesim.cli.args.wants`)."""
    parser = Parser(prog="servesim", description="Speculative decoding and prefill/decode "
                    "disaggregation, in closed form, with the assumptions attached.")
    parser.add_argument("-V", "--version", action="version", version=f"servesim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser, action=Subcommands)
    if isinstance(sub, Subcommands):
        sub.only = command
    for name in COMMAND_MODULES if command is None else (COMMANDS[command],):
        importlib.import_module(name).register(sub)
    for name, p in sub.choices.items():  # every --help ends with examples
        if name in EXAMPLES and not p.epilog:
            p.epilog = "examples:\n" + "\n".join(f"  {e}" for e in EXAMPLES[name])
            p.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = ("examples:\n  servesim all\n  servesim predict --model meta-llama/Llama-3.1-8B-Instruct "
                     "--gpu h100-sxm --isl 1024 --osl 256 --concurrency 16\n  servesim COMMAND --help")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


EXAMPLES: dict[str, tuple[str, ...]] = {
    "specdec": ("servesim specdec", "servesim specdec --preset mtp",
                "servesim specdec --util 0.7 --alpha 0.6"),
    "disagg": ("servesim disagg --preset chat", "servesim disagg --preset rag --link tcp",
               "servesim disagg --preset rag --model llama-3-70b --gpu h100-sxm --tp 8 --isl 4096"),
    "all": ("servesim all", "servesim all --format json"),
    "plan": ("servesim plan --preset rag",
             "servesim plan --model meta-llama/Llama-3.1-70B-Instruct --gpu h100-sxm --gpus 16 "
             "--isl 1024 --osl 512",
             "servesim plan --model llama-3-8b --gpu h100-sxm,h200 --target-rate 50 --isl 2048 --osl 256"),
    "report": ("servesim report --preset rag --out rag-report",
               "servesim report --model llama-3-70b --gpu h100-sxm --gpus 8 --isl 1024 --osl 512 --out cap"),
    "simulate": ("servesim simulate --servers 8 --rate 6.8",
                 "servesim simulate --preset rag --requests 20000",
                 "servesim simulate --model llama-3-70b --gpu h100-sxm --tp 4 --isl 1024 --osl 512 --rate 3"),
    "validate": ("servesim validate --quiet", "servesim validate --requests 100000 --format json"),
    "roofline": ("servesim roofline --model llama-3-70b --gpu h100-sxm --tp 8",
                 "servesim roofline --model meta-llama/Llama-3.1-8B-Instruct --gpu h200 --dtype fp8 "
                 "--batch 1 64"),
    "trace": ("servesim trace summarize examples/trace.jsonl", "servesim trace fetch azure-code"),
    "fit-alpha": ("servesim fit-alpha examples/scrape.txt", "servesim fit-alpha examples/before.txt "
                  "examples/after.txt --batch 64 --target llama-3-70b --gpu h100-sxm --tp 8"),
    "calibrate": ("servesim calibrate examples/sweep.csv",
                  "servesim calibrate examples/sweep.csv --save node.toml"),
    "predict": ("servesim predict --model meta-llama/Llama-3.1-70B-Instruct --gpu h100-sxm --tp 4 "
                "--isl 1024 --osl 512 --concurrency 32",
                "servesim predict --model llama-3-8b --gpu h200 --dtype fp8 --isl 2048 --osl 256 --rate 4",
                "servesim predict --points examples/points.csv --format json",
                "servesim predict --compare examples/vllm_bench_result.json --model qwen3-8b --gpu h100-sxm"),
}
"""Two or three examples at the end of each command's --help."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; exit status 0 (done), 1 (validate found a FAIL; output could not be
    written), 2 (bad input), 130 (interrupted)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        sys.stderr.write("servesim: interrupted\n")
        return 130


def _command_parser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser:
    """The subparser of ``command`` (``parser`` itself where it has none)."""
    for action in parser._actions:
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and command in choices:
            sub: argparse.ArgumentParser = choices[command]
            return sub
    return parser


def _unrecognized(parser: argparse.ArgumentParser, command: str | None, extra: list[str]) -> None:
    """Exit 2 naming the command, the arguments it does not take and the closest flags it does."""
    import difflib

    sub = _command_parser(parser, command)
    known = sorted(o for o in sub._option_string_actions if o.startswith("--") and o != "--help")
    hints = []
    for x in extra:
        flag = x.split("=", 1)[0]
        close = difflib.get_close_matches(flag, known, n=2, cutoff=0.6) if flag.startswith("-") else []
        hints.append(f"{x} (did you mean {' or '.join(close)}?)" if close else x)
    sub.error(f"unrecognized argument{'s' if len(extra) > 1 else ''}: {', '.join(hints)}; "
              f"see servesim {command or ''} --help".replace("  ", " "))


def _main(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # A command given first builds its own parser only; anything else (no command, -h or -V first, a
    # misspelt command) the whole one, whose help and errors list every command.
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args, extra = parser.parse_known_args(argv)
    if extra:
        _unrecognized(parser, getattr(args, "command", None), extra)
    if args.command is None:  # bare `servesim`: the command list
        sys.stdout.write(parser.format_help())
        return 0
    if getattr(args, "format", "table") == "table" and getattr(args, "output", None) is None:
        _fit_terminal()
    try:
        resolve_link_name(args)
        out: Output = args.run(args)
    except (ParameterError, CatalogError, InputError) as exc:
        flag = _flag_of(parser, args, exc) if isinstance(exc, ParameterError) else None
        print(f"servesim {args.command}: error: {flag + ': ' if flag else ''}{exc}", file=sys.stderr)
        return 2
    except OutputError as exc:  # the work ran; a result could not be written (disk full, size limit)
        print(f"servesim {args.command}: error: {exc}", file=sys.stderr)
        return 1
    fmt = getattr(args, "format", "table")
    if fmt == "json":
        text = to_json(out.data)
    elif fmt == "csv":
        text = to_csv(out.csv_rows)
    else:
        text = out.text

        if render_text.WIDTH is not None:
            text = _wrap(text, render_text.WIDTH)
    status = 1 if args.command == "validate" and _failed(out.data) else 0
    target = getattr(args, "output", None)
    try:
        if target is not None:
            from servesim.render.output import write_atomic

            write_atomic(target, text.encode("utf-8"))
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (e.g. `| head`): not an error of ours
        _silence_stdout()
        return status
    except OSError as exc:
        where = str(target) if target is not None else "standard output"
        print(f"servesim {args.command}: error: cannot write {where}: {exc.strerror or exc}", file=sys.stderr)
        _silence_stdout()
        return 1
    return status


_DESTS: dict[str, tuple[str, ...]] = {
    # a parameter object's field -> the flags (by dest) that set it, where the names differ (and each
    # engine's own flags for the fields they set: servesim.cli.predict.flags_setting)
    "warmup": ("warmup_prompts",),
    "rate_per_s": ("rate",),
}


def _flag_of(parser: argparse.ArgumentParser, args: argparse.Namespace, exc: ParameterError) -> str | None:
    """The flag of the command that set the parameter a ParameterError names (``prefill_ep`` ->
    ``--prefill-ep``, ``warmup`` -> ``--warmup-prompts``, an engine's memory share -> the engine's own
    flag as given), so that the message says what to change; None where no flag of the command sets it
    (or the message already names one)."""
    name = str(exc.name)
    if name.startswith("-"):
        return None
    sub = _command_parser(parser, args.command)
    by_dest = {a.dest: a for a in sub._actions if a.option_strings}
    aliases = _DESTS.get(name, ())
    if args.command == "predict":
        from servesim.cli.predict import flags_setting

        aliases = aliases or flags_setting(name)
    for dest in (name, *aliases):
        action = by_dest.get(dest)
        if action is None:
            continue
        if dest != name and getattr(args, dest, None) is None:
            continue  # another engine's flag, or one not given: not where the value came from
        opts: list[str] = list(action.option_strings)
        return next((o for o in opts if o.lstrip("-").replace("-", "_") == dest), max(opts, key=len))
    return None


def _fit_terminal() -> None:
    """On a terminal, tables fit its width (render.text.WIDTH); elsewhere output is byte-stable."""
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        import shutil

        render_text.WIDTH = max(40, shutil.get_terminal_size().columns)


def _wrap(text: str, width: int) -> str:
    """Lines longer than the terminal wrapped at word boundaries, continuations indented."""
    return wrap_long_lines(text, width, break_long_words=False)


def _failed(data: object) -> bool:
    return isinstance(data, dict) and bool(data.get("agreement_failed"))


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
