"""Hostile input to every command: each run either works and prints sane numbers, or refuses in one line.

Table-driven and seeded (so the suite stays fast and repeatable): every numeric flag of
every command (found by walking the argument parser, so a new flag is fuzzed without
editing this file) gets a handful of values drawn from a fixed hostile set (negative,
zero, denormal, huge, infinite, NaN, thousands of digits, text), and every file input gets
malformed files.  For each run exactly one of:

* exit 0, and the JSON output passes sanity checks: every number finite, shares and
  probabilities in [0, 1], times, rates and counts non-negative;
* exit 2 (bad input) or 1 (validate with a FAIL row), with exactly one line on stderr
  that names the flag or the file, and no traceback.

``SERVESIM_FUZZ_VALUES`` (default 3) sets how many hostile values each flag gets; a longer
run (all values) is ``SERVESIM_FUZZ_VALUES=0 python -m pytest tests/cli/test_fuzz.py``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
from pathlib import Path

import pytest

from servesim.cli.main import build_parser, main

HOSTILE = ["-1", "0", "-inf", "inf", "nan", "1e-320", "1e300", "10" + "0" * 40, "1" + "0" * 5000, "abc", "",
           "0.5", "3"]
"""Values every numeric flag may receive (the last two are ordinary, so success paths run too)."""

# Cheap base arguments per command, so that a run that is accepted finishes in well under a second.
BASE: dict[str, list[str]] = {
    "specdec": [],
    "disagg": ["--preset", "chat"],
    "all": [],
    "plan": ["--preset", "chat", "--quiet", "--spec", "none"],
    "simulate": ["--rate", "1", "--requests", "2000", "--replications", "2"],
    "validate": ["--requests", "2000", "--serving-requests", "400", "--cycles", "2000", "--replications", "2",
                 "--no-crossover", "--quiet"],
    "roofline": ["--model", "llama-3-8b", "--gpu", "h100-sxm", "--batch", "1", "8"],
    "predict": ["--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "128", "--osl", "16",
                "--concurrency", "2", "--num-prompts", "4"],
    "fit-alpha": ["--value", "0.8", "--from", "per-position"],
}
SKIP_FLAGS = {"--jobs", "--ray", "--simulate-top", "--sim-requests", "--requests", "--serving-requests",
              "--cycles", "--replications", "--num-prompts"}
"""Flags whose accepted values only cost time (their ranges are still checked by the range tests)."""
SLOW = {"validate", "plan"}
N_VALUES = int(os.environ.get("SERVESIM_FUZZ_VALUES", "3"))


def _numeric_flags() -> list[tuple[str, str]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = []
    for name, p in sub.choices.items():
        if name not in BASE:
            continue
        for action in p._actions:
            t = getattr(action, "type", None)
            flag = next((s for s in action.option_strings if s.startswith("--")), None)
            if flag is None or t is None or flag in SKIP_FLAGS or action.nargs not in (None,):
                continue
            if getattr(t, "__name__", "") in ("parse",):  # servesim's integer()/number() range types
                out.append((name, flag))
    return out


def _cases() -> list[tuple[str, str, str]]:
    rng = random.Random(20261130)
    cases = []
    for name, flag in _numeric_flags():
        values = list(HOSTILE)
        rng.shuffle(values)
        k = len(values) if N_VALUES <= 0 else (1 if name in SLOW else N_VALUES)
        cases += [(name, flag, v) for v in values[:k]]
    return cases


def _walk(x, key=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _walk(v, str(k))
    elif isinstance(x, list):
        for v in x:
            yield from _walk(v, key)
    else:
        yield key, x


# shares lie in [0, 1]; a utilization is offered load over capacity (above 1: the queue is unstable,
# which the output says), so it is only non-negative
_SHARE = ("attainment", "p_wait", "probability", "share", "alpha", "hit_rate")
_NONNEG = ("_ms", "_s", "rate", "throughput", "tokens", "batch", "requests", "gpus", "goodput", "utilization")


def _sane(data) -> None:
    for key, v in _walk(data):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        assert math.isfinite(v), (key, v)
        k = key.lower()
        if any(s in k for s in _SHARE) and not k.endswith("_gap"):
            assert -1e-9 <= v <= 1 + 1e-9 or "scaled" in k or "u_max" in k, (key, v)
        if any(k.endswith(s) or s in k for s in _NONNEG) and not any(
                w in k for w in ("change", "error", "bias", "delta", "diff", "z", "log", "relative")):
            assert v >= -1e-9, (key, v)


def _check(capsys, argv, names) -> None:
    rc = main(argv)
    out, err = capsys.readouterr()
    if rc == 0:
        assert err.strip() == "" or "warning" in err.lower(), err
        if "--format" in argv and argv[argv.index("--format") + 1] == "json":
            _sane(json.loads(out))
        return
    assert rc in (1, 2), (argv, rc, err)
    if rc == 1:  # validate's FAIL rows: the output is still whole and sane
        _sane(json.loads(out))
        return
    lines = err.strip().splitlines()
    assert len(lines) == 1, (argv, err)
    assert "Traceback" not in err
    assert any(n in lines[0] for n in names), (argv, lines[0])


@pytest.mark.parametrize(("command", "flag", "value"), _cases(),
                         ids=lambda x: x if len(str(x)) < 12 else f"{str(x)[:6]}..{len(str(x))}")
def test_numeric_flag(capsys, command, flag, value):
    argv = [command, *BASE[command], f"{flag}={value}", "--format", "json"]
    try:
        _check(capsys, argv, [flag, flag.lstrip("-").replace("-", "_"), value[:20]])
    except SystemExit as exc:  # argparse refusals exit through SystemExit(2)
        err = capsys.readouterr().err
        assert exc.code == 2, (argv, exc.code, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and flag in lines[0], (argv, err)


@pytest.mark.parametrize("command", ["specdec", "disagg", "roofline"])
def test_negative_values_in_the_space_form(capsys, command):
    flag = {"specdec": "--d", "disagg": "--beta", "roofline": "--k"}[command]
    with pytest.raises(SystemExit) as exc:
        main([command, *BASE.get(command, []), flag, "-inf"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and flag in err and "-inf" in err and "expected one argument" not in err


def _files(tmp: Path) -> dict[str, Path]:
    f = {
        "empty.csv": b"",
        "latin1.csv": ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.98,caf\xe9,1\n"
                       .encode("latin-1")),
        "utf16.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n".encode("utf-16"),
        "binary.toml": bytes(range(256)),
        "nested.json": ("[" * 100_000 + "]" * 100_000).encode(),
        "huge_number.csv": ("rate_per_s,mean_ttft_ms,mean_tpot_ms,prompt_tokens,output_tokens\n1,"
                            + "9" * 5000 + ",30,100,10\n").encode(),
        "zero_tokens.jsonl": b'{"timestamp": 0, "input_length": 0, "output_length": 0, "hash_ids": []}\n' * 3,
    }
    out = {}
    for name, data in f.items():
        p = tmp / name
        p.write_bytes(data)
        out[name] = p
    trunc = tmp / "truncated.jsonl.gz"
    trunc.write_bytes(gzip.compress(b'{"timestamp": 0, "input_length": 5, "output_length": 5}\n' * 50)[:40])
    out["truncated.jsonl.gz"] = trunc
    out["a_folder"] = tmp
    return out


FILE_COMMANDS = [
    (["trace", "summarize"], None),
    (["calibrate"], None),
    (["fit-alpha"], None),
    (["simulate", "--preset", "chat", "--requests", "500", "--replications", "2", "--trace"], "flag"),
    (["plan", "--quiet", "--spec", "none", "--trace"], "flag"),
    (["disagg", "--catalog"], "flag"),
    (["predict", "--points"], "flag"),
    (["predict", "--gpu", "h100-sxm", "--compare"], "flag"),
    (["roofline", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--catalog"], "flag"),
]


@pytest.mark.parametrize("prefix", [c for c, _ in FILE_COMMANDS], ids=lambda c: " ".join(c[:2]))
def test_malformed_files(capsys, tmp_path, prefix):
    for name, path in _files(tmp_path).items():
        argv = [*prefix, str(path), "--format", "json"]
        try:
            _check(capsys, argv, [str(path), name, "file", "--"])
        except SystemExit as exc:
            err = capsys.readouterr().err
            assert exc.code == 2 and len(err.strip().splitlines()) == 1, (argv, err)


@pytest.mark.parametrize("target", ["folder", "missing_parent", "dev_null"])
def test_unwritable_outputs_are_refused_before_work(capsys, tmp_path, target):
    # A device is never written through a rename (that would replace /dev/null with a file).
    argvs = {
        "folder": [["specdec", "--plot", str(tmp_path / "x.png" / "..")], ["specdec", "-o", str(tmp_path)]],
        "missing_parent": [["specdec", "--plot", str(tmp_path / "no" / "x.png")],
                           ["specdec", "-o", str(tmp_path / "no" / "x.txt")],
                           ["report", "--out", str(tmp_path / "a.txt" / "r")]],
        "dev_null": [["specdec", "--plot", os.devnull], ["specdec", "-o", os.devnull],
                     ["report", "--out", os.devnull]],
    }[target]
    (tmp_path / "a.txt").write_text("a file, not a folder")
    for argv in argvs:
        try:
            rc = main(argv)
            err = capsys.readouterr().err
            assert rc == 2 and len(err.strip().splitlines()) == 1, (argv, err)
        except SystemExit as exc:
            err = capsys.readouterr().err
            assert exc.code == 2 and len(err.strip().splitlines()) == 1, (argv, err)
            assert "Traceback" not in err


# --------------------------------------------------------------------------- named cases
# Inputs that once crashed or gave a confident wrong answer, and the new surfaces (clients, engine
# flags, MoE configs, tp/dp/ep, acceptance lengths, points columns): each with its expected class,
# a result ("ok", and a text it must show) or a refusal in one line naming what was wrong.

LLAMA = ["predict", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "128", "--osl", "16"]
DSR1 = ["predict", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--isl", "128", "--osl", "16",
        "--num-prompts", "8"]


def _named_cases(tmp: Path) -> list[tuple[list[str], str, str]]:
    bad_arch = tmp / "foo" / "config.json"
    bad_arch.parent.mkdir()
    bad_arch.write_text(json.dumps({"model_type": "foo_moe", "architectures": ["FooMoeForCausalLM"],
                                    "num_experts": 8, "hidden_size": 1024}))
    pts = {
        "unknown.csv": "model,gpu,isl,osl,concurency\nllama-3-8b,h100-sxm,128,16,2\n",
        "twice.csv": "model,gpu,isl,osl,isl\nllama-3-8b,h100-sxm,128,16,256\n",
        "rows.csv": ("model,gpu,tp,dtype,isl,osl,concurrency,mode,decode_tp,decode_dp,decode_ep,spec,k,"
                     "acceptance_length\n"
                     "llama-3-8b,h100-sxm,1,bf16,128,16,2,,,,,eagle3,3,2.5\n"
                     "deepseek-ai/DeepSeek-R1,h200,8,auto,128,16,8,disagg,1,8,3,,,\n"
                     "llama-3-8b,h100-sxm,1,bf16,128,16,2,,,,,eagle3,3,7\n"),
    }
    for name, text in pts.items():
        (tmp / name).write_text(text)
    res = {"neg.json": {"model_id": "llama-3-8b", "completed": 4, "total_input_tokens": 512,
                        "total_output_tokens": 64, "mean_ttft_ms": -5.0, "max_concurrency": 2},
           "digits.json": None}
    for name, obj in res.items():
        digits = '{"model_id": "llama-3-8b", "completed": 1' + "0" * 5000 + "}"
        text = json.dumps(obj) if obj is not None else digits
        (tmp / name).write_text(text)
    (tmp / "huge.csv").write_text("rate_per_s,mean_ttft_ms,mean_tpot_ms,prompt_tokens,output_tokens\n"
                                  "1,1e300,1e300,1000,100\n2,2e300,1e300,1000,100\n")
    (tmp / "cal.toml").write_text('[node]\nmodel = "llama-3-70b"\nprefill_tokens_per_s = 20000\n'
                                  "decode_tokens_per_s = 5000\ntpot_base_s = 1e300\nbeta = 0.5\n")
    c2 = ["--concurrency", "2", "--num-prompts", "4"]
    return [
        ([*LLAMA, "--rate", "1e-300"], "refuse", "--rate"),
        ([*LLAMA, "--osl", "1000000", *c2], "refuse", "osl"),
        ([*LLAMA, "--concurrency", "4", "--max-num-seqs", "1", "--num-prompts", "8"], "ok", "queue"),
        (["predict", "--model", "x" * 300, "--gpu", "h100-sxm", "--isl", "8", "--osl", "8", *c2], "refuse",
         "model"),
        ([*LLAMA, *c2, "--mode", "disagg", "--decode-tp", "3"], "refuse", "decode_tp"),
        ([*DSR1, "--tp", "8", "--ep", "3", "--concurrency", "4"], "refuse", "ep"),
        ([*DSR1, "--tp", "1", "--dp", "3", "--ep", "3", "--concurrency", "4"], "refuse", "ep"),
        ([*DSR1, "--tp", "8", "--dtype", "fp4", "--concurrency", "4"], "refuse", "dtype"),
        ([*DSR1, "--tp", "1", "--concurrency", "4"], "refuse", "GPUs would hold it"),
        ([*DSR1, "--tp", "8", "--concurrency", "4", "--spec", "mtp", "--k", "1", "--acceptance-length",
          "1.8"], "ok", "speculation mtp"),
        (["predict", "--model", str(bad_arch), "--gpu", "h100-sxm", "--isl", "8", "--osl", "8", *c2],
         "refuse", "config.json"),
        ([*LLAMA, *c2, "--client", "inferencemax", "--random-range-ratio", "1.5"], "refuse",
         "--random-range-ratio"),
        ([*LLAMA, *c2, "--engine", "sglang", "--max-num-batched-tokens", "100"], "refuse",
         "--max-num-batched-tokens"),
        ([*LLAMA, *c2, "--spec", "eagle3", "--k", "3", "--acceptance-length", "9"], "refuse",
         "acceptance_length"),
        ([*LLAMA, *c2, "--spec", "eagle3", "--k", "3", "--acceptance-length", "4.5"], "refuse",
         "acceptance_length"),
        ([*LLAMA, *c2, "--spec", "mtp"], "refuse", "MTP module"),
        ([*LLAMA, *c2, "--alpha", "0.5"], "refuse", "spec"),
        ([*LLAMA, *c2, "--spec", "ngram", "--traffic", "summarization", "--k", "3"], "refuse",
         "acceptance"),  # no published n-gram acceptance for summarization
        (["predict", "--points", str(tmp / "unknown.csv")], "refuse", "concurency"),
        (["predict", "--points", str(tmp / "twice.csv")], "refuse", "isl"),
        (["predict", "--points", str(tmp / "rows.csv"), "--format", "json"], "rows", "decode_ep"),
        (["predict", "--gpu", "h100-sxm", "--compare", str(tmp / "neg.json")], "refuse", "mean_ttft_ms"),
        (["predict", "--gpu", "h100-sxm", "--compare", str(tmp / "digits.json")], "refuse", "digits"),
        (["calibrate", str(tmp / "huge.csv")], "refuse", "mean TTFT"),
        (["disagg", "--calibration", str(tmp / "cal.toml")], "refuse", "tpot_base_s"),
        (["specdec", "--alpah", "0.5"], "refuse", "--alpha"),
        (["validate", "--serving-requests=1"], "refuse", "--serving-requests"),
        (["fit-alpha", "--target=nope"], "refuse", "--target"),
        (["specdec", "--plot", "/proc/x.png"], "refuse", "--plot"),
        # a capacity plan shows the customer's own rate beside each row's capacity (issue 50)
        (["plan", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "1", "--rate", "5", "--isl", "512",
          "--osl", "64", "--top", "1"], "ok", "load: your 5 req/s"),
    ]


def test_named_hostile_cases(capsys, tmp_path):
    wrong = []
    for argv, kind, text in _named_cases(tmp_path):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        if kind == "refuse":
            ok = rc == 2 and len(err.strip().splitlines()) == 1 and text in err
        elif kind == "ok":
            ok = rc == 0 and text in out
        else:  # a points file: the bad rows err alone, naming their line and what was wrong
            rows = json.loads(out) if rc == 0 else []
            ok = (len(rows) == 3 and "error" not in rows[0] and text in rows[1].get("error", "")
                  and ":3:" in rows[1]["error"] and "acceptance_length" in rows[2].get("error", ""))
        if not ok or "Traceback" in err:
            wrong.append((argv[:8], kind, text, rc, err.strip()[-200:]))
    assert not wrong, wrong
