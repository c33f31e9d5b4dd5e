"""Hostile inputs over predict's points and --compare files, plan --gpus and roofline (issue 51).

Each test names the class of what it guards against: ``crash`` (a traceback), ``wrong_answer`` (exit 0
with an answer the input does not support, or an input silently ignored or repaired), ``message`` (an
error that does not say where the bad value came from) and ``hang`` (work with no stated bound or no
sign of life).  Each fails on the tree before the fix.  The one-validation tests check that a flag, a
points column and a --compare field of the same name share one range and one refusal.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servesim._checks import BOUNDS, InputError, ParameterError, check_bound
from servesim.cli.main import build_parser, main

LLAMA = ["--model", "llama-3-8b", "--gpu", "h100-sxm"]
SMALL = ["--isl", "64", "--osl", "8", "--concurrency", "2", "--num-prompts", "4"]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:  # argparse refusals exit from the parser
        rc = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return rc, out, err


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one-line error of a refused command (exit 2, no traceback)."""
    rc, out, err = _run(capsys, *argv)
    assert rc == 2, (argv, out[-300:], err[-300:])
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def _result(tmp_path: Path, name: str = "r.json", **fields: object) -> Path:
    """A `vllm bench serve --save-result` file of a run without a concurrency cap (vLLM's own
    ``max_concurrency: null`` and ``request_rate: "inf"``), with ``fields`` changed."""
    res: dict[str, object] = {
        "model_id": "llama-3-8b", "num_prompts": 8, "request_rate": "inf", "burstiness": 1.0,
        "max_concurrency": None, "duration": 2.0, "completed": 8, "total_input_tokens": 8 * 64,
        "total_output_tokens": 8 * 8, "mean_ttft_ms": 50.0, "mean_tpot_ms": 5.0, "output_throughput": 30.0}
    res.update(fields)
    path = tmp_path / name
    path.write_text(json.dumps(res))
    return path


def _points(tmp_path: Path, text: str, name: str = "p.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- crash


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_crash_compare_a_run_without_a_concurrency_cap(capsys, tmp_path, fmt):
    """vLLM writes ``max_concurrency: null, request_rate: "inf"`` for a run with no cap: every format
    printed ``Unknown format code 'g' for object of type 'str'``."""
    rc, out, err = _run(capsys, "predict", "--compare", str(_result(tmp_path)), "--gpu", "h100-sxm",
                        "--format", fmt)
    assert rc == 0 and err == "", err
    if fmt == "table":
        assert "every request at once" in out.splitlines()[0]
    if fmt == "json":
        data = json.loads(out)
        assert data["prediction"]["concurrency"] is None and data["prediction"]["num_prompts"] == 8


def test_crash_compare_with_mode_disagg(capsys, tmp_path):
    """``--compare … --mode disagg`` died with ``KeyError: 'tp'`` (a disaggregated prediction has pools)."""
    rc, out, err = _run(capsys, "predict", "--compare", str(_result(tmp_path)), "--gpu", "h100-sxm",
                        "--mode", "disagg")
    assert rc == 0, err
    assert "prefill 1 x TP1 -> decode 1 x TP1" in out.splitlines()[0]


def test_crash_smallest_points_file_and_an_inf_rate_row(capsys, tmp_path):
    """``model,gpu,isl,osl`` (no concurrency) and ``request_rate=inf`` rows crashed the table."""
    path = _points(tmp_path, "model,gpu,isl,osl,num_prompts,request_rate\n"
                   "llama-3-8b,h100-sxm,64,8,4,\nllama-3-8b,h100-sxm,64,8,4,inf\n")
    rc, out, err = _run(capsys, "predict", "--points", str(path))
    assert rc == 0, err
    rows = out.splitlines()[1:]
    assert len(rows) == 2 and all(r.split()[6] == "all" for r in rows)  # the conc column: all at once
    rc, out, _ = _run(capsys, "predict", "--points", str(path), "--format", "json")
    assert rc == 0 and [r["concurrency"] for r in json.loads(out)] == [None, None]


def test_crash_a_speculation_row_with_k_0_fails_alone(capsys, tmp_path):
    """``spec=mtp, k=0`` raised ZeroDivisionError and took the whole file with it."""
    path = _points(tmp_path, "model,gpu,tp,isl,osl,concurrency,num_prompts,spec,k\n"
                   "deepseek-ai/DeepSeek-R1,h200,8,64,8,2,4,mtp,0\n"
                   "llama-3-8b,h100-sxm,1,64,8,2,4,,\n")
    rc, out, err = _run(capsys, "predict", "--points", str(path), "--format", "json")
    assert rc == 0, err
    bad, good = json.loads(out)
    assert bad == {"error": f"{path}:2:9: column 'k' = 0 is invalid: must be an integer in [1, 16]"}
    assert good["model"] == "llama-3-8b" and good["mean_tpot_ms"] > 0


def test_crash_a_word_in_a_numeric_column_is_its_rows_error(capsys, tmp_path):
    path = _points(tmp_path, "model,gpu,isl,osl,concurrency,request_rate,mean_ttft_ms\n"
                   "llama-3-8b,h100-sxm,64,8,2,fast,\nllama-3-8b,h100-sxm,64,8,2,,soon\n")
    rc, out, err = _run(capsys, "predict", "--points", str(path))
    assert rc == 0, err
    lines = out.splitlines()
    assert f"{path}:2:6: column 'request_rate' = 'fast' is invalid: must be a number or inf" in lines[1]
    assert f"{path}:3:7: column 'mean_ttft_ms' = 'soon' is invalid: must be a number" in lines[2]


@pytest.mark.parametrize("gpu", [",", "h100-sxm,", " , h200"])
def test_crash_plan_an_empty_name_in_the_gpu_list(capsys, gpu):
    """``plan --gpus … --gpu ,`` raised IndexError."""
    err = _refused(capsys, "plan", "--model", "llama-3-8b", "--gpu", gpu, "--gpus", "8", "--isl", "64",
                   "--osl", "8")
    assert "--gpu" in err and "empty GPU name" in err


@pytest.mark.parametrize("flag", ["--compute-efficiency", "--memory-efficiency", "--interconnect-efficiency"])
def test_crash_roofline_a_vanishing_efficiency_is_refused(capsys, flag):
    """``--compute-efficiency 1e-320`` printed ``inf ms`` and exit 0."""
    err = _refused(capsys, "roofline", *LLAMA, flag, "1e-320")
    assert flag in err and "[0.01, 1]" in err


# --------------------------------------------------------------------------- wrong answer

HOPPER_FP4 = "dtype='fp4' is invalid: must be a weight dtype h200 supports: bf16, fp8 (Hopper has no FP4"


def test_wrong_answer_fp4_on_hopper_is_refused_by_every_command(capsys):
    """predict refused fp4 on Hopper; plan --gpus gave an empty plan and roofline exit 0."""
    llama = ["--model", "llama-3-8b", "--gpu", "h200", "--dtype", "fp4"]
    for argv in (["predict", *llama, *SMALL[:4], "--concurrency", "2"],
                 ["plan", *llama, "--gpus", "8", "--isl", "64", "--osl", "8"],
                 ["roofline", *llama]):
        assert HOPPER_FP4 in _refused(capsys, *argv), argv


@pytest.mark.parametrize("split", [["--tp", "8", "--ep", "3"], ["--tp", "1", "--ep", "16"]])
def test_wrong_answer_roofline_refuses_an_expert_split_predict_refuses(capsys, split):
    gpt = ["--model", "openai/gpt-oss-120b", "--gpu", "h200", *split]
    mine = _refused(capsys, "roofline", *gpt)
    theirs = _refused(capsys, "predict", *gpt, "--isl", "64", "--osl", "8", "--concurrency", "2")
    assert mine.split("error: ", 1)[1] == theirs.split("error: ", 1)[1]
    assert f"ep={split[-1]} is invalid" in mine


@pytest.mark.parametrize("model", ["llama-3-8b", "openai/gpt-oss-120b"])
def test_wrong_answer_fp8_kv_on_the_a100_is_refused_for_dense_and_moe_alike(capsys, model):
    """``--kv-dtype fp8`` on the A100 was refused for llama-3-8b and accepted for gpt-oss-120b."""
    base = ["--model", model, "--gpu", "a100-80gb", "--tp", "8" if "gpt" in model else "1",
            "--kv-dtype", "fp8"]
    for argv in (["predict", *base, "--isl", "64", "--osl", "8", "--concurrency", "2"],
                 ["roofline", *base]):
        assert "kv_dtype='fp8' is invalid: must be a KV-cache dtype a100-80gb supports: bf16" in \
            _refused(capsys, *argv)


# A value each flag refuses, as a points cell: the row is refused the same way, naming FILE:LINE:COLUMN.
COLUMN_CASES = [("tp", "0"), ("dp", "0"), ("ep", "0"), ("prefill_workers", "0"), ("decode_workers", "0"),
                ("num_prompts", "0"), ("k", "17"), ("max_prefill_tokens", "0"),
                ("max_num_batched_tokens", "2000000"), ("speculative_num_draft_tokens", "66"),
                ("burstiness", "0"), ("mean_ttft_ms", "-1"), ("mean_tpot_ms", "1e308"),
                ("output_throughput", "-5")]


@pytest.mark.parametrize(("column", "cell"), COLUMN_CASES)
def test_wrong_answer_a_points_cell_the_flag_refuses_is_refused(tmp_path, column, cell):
    """tp=0 became tp 1, num_prompts=0 became 160, k=17 and 2,000,000-token budgets ran, negative
    and 1e308 measurements were compared with."""
    from servesim.inputs.bench import read_point_rows

    path = _points(tmp_path, f"model,gpu,isl,osl,{column}\nllama-3-8b,h100-sxm,64,8,{cell}\n")
    (row,) = read_point_rows(path)
    bound = BOUNDS[column]
    value = float(cell) if bound.kind == "real" else int(cell)
    assert row == {"error": f"{path}:2:5: column {column!r} = {value!r} is invalid: must be {bound.valid}"}


def test_wrong_answer_one_range_for_the_flag_the_column_and_the_api():
    """Item 2: each bounded input has one range wherever it comes from; the flag refuses just outside
    it and takes its ends, as check_bound (the column's and the API's check) does."""
    parser = build_parser("predict")
    flags = {o: a for a in parser._subparsers._group_actions[0].choices["predict"]._actions  # type: ignore[union-attr]
             for o in a.option_strings}
    checked = 0
    for name, b in BOUNDS.items():
        if not b.flag or b.flag not in flags:
            continue
        checked += 1
        parse = flags[b.flag].type
        assert b.lo is not None and b.hi is not None
        for inside in (b.lo, b.hi):
            if (inside == b.lo and b.lo_open) or (inside == b.hi and b.hi_open):
                continue
            text = str(int(inside)) if b.kind == "int" else repr(float(inside))
            assert parse(text) == check_bound(name, int(inside) if b.kind == "int" else float(inside))
        step = 1 if b.kind == "int" else max(abs(b.hi) * 1e-9, 1e-12)
        for outside in (b.lo - step if not b.lo_open else b.lo, b.hi + step if not b.hi_open else b.hi):
            text = str(int(outside)) if b.kind == "int" else repr(float(outside))
            with pytest.raises(argparse.ArgumentTypeError):
                parse(text)
            with pytest.raises(ParameterError):
                check_bound(name, int(outside) if b.kind == "int" else float(outside))
            with pytest.raises(InputError, match=rf"^f\.csv:2:3: column '{name}' = .* is invalid"):
                check_bound(name, int(outside) if b.kind == "int" else float(outside), "f.csv:2:3",
                            f"column {name!r}")
    assert checked >= 30  # every bounded flag of predict


def test_wrong_answer_the_api_keywords_share_the_ranges():
    from servesim.hardware.pricer import Deployment

    for kw, name in (({"tp": 0}, "tp"), ({"ep": 257}, "ep"), ({"max_num_seqs": 0}, "max_num_seqs"),
                     ({"scheduler": (("max_prefill_tokens", 0),)}, "max_prefill_tokens")):
        with pytest.raises(ParameterError) as exc:
            Deployment("llama-3-8b", "h100-sxm", **kw)  # type: ignore[arg-type]
        assert exc.value.name == name and exc.value.valid == BOUNDS[name].valid


def test_wrong_answer_an_unterminated_quote_errs_alone(tmp_path):
    """A stray quote swallowed the rows after it silently."""
    from servesim.inputs.bench import read_point_rows

    path = _points(tmp_path, 'model,gpu,isl,osl,concurrency\nllama-3-8b,"h100-sxm,64,8,2\n'
                   "llama-3-8b,h100-sxm,64,8,2\nllama-3-8b,h200,128,8,4\n")
    bad, a, b = read_point_rows(path)
    assert bad["error"].startswith(f"{path}:2:2: a quote opened in column 'gpu' is not closed on its line")
    assert (a["line"], a["gpu"], b["line"], b["gpu"], b["isl"]) == (3, "h100-sxm", 4, "h200", 128)


def test_wrong_answer_flags_given_with_points_apply_to_every_row_or_refuse_it(capsys, tmp_path):
    """--tp, --dtype, --kv-dtype and --rate were silently ignored with --points: ``--dtype fp4``
    predicted the row's default where the same flag alone is refused."""
    path = _points(tmp_path, "model,gpu,tp,isl,osl,concurrency,num_prompts\n"
                   "llama-3-8b,h200,,64,8,2,4\nllama-3-8b,h200,1,64,8,2,4\n")
    rc, out, _ = _run(capsys, "predict", "--points", str(path), "--dtype", "fp4", "--format", "json")
    assert rc == 0
    assert all(HOPPER_FP4 in r["error"] for r in json.loads(out))
    rc, out, _ = _run(capsys, "predict", "--points", str(path), "--tp", "2", "--dtype", "fp8",
                      "--format", "json")
    empty, says_1 = json.loads(out)
    assert (empty["tp"], empty["dtype"]) == (2, "fp8")
    assert says_1 == {"error": f"{path}:3:3: column 'tp' = 1 and --tp 2 disagree: a flag given with "
                               "--points applies to every row (leave the column empty, or drop the flag)"}


def test_wrong_answer_a_flag_fills_a_required_column_the_file_leaves_out(capsys, tmp_path):
    path = _points(tmp_path, "gpu,concurrency,num_prompts\nh100-sxm,2,4\nh200,,4\n")
    rc, out, _ = _run(capsys, "predict", "--points", str(path), "--model", "llama-3-8b", "--isl", "64",
                      "--osl", "8", "--format", "json")
    assert rc == 0
    assert [(r["model"], r["gpu"], r["isl"], r["osl"], r["concurrency"]) for r in json.loads(out)] == [
        ("llama-3-8b", "h100-sxm", 64, 8, 2), ("llama-3-8b", "h200", 64, 8, None)]
    err = _refused(capsys, "predict", "--points", str(path), "--model", "llama-3-8b", "--isl", "64")
    assert f"{path}:1: missing column(s) osl (or the flag, which fills every row: --osl)" in err


@pytest.mark.parametrize(("fields", "named"), [
    ({"max_concurrency": 0}, "field 'max_concurrency' = 0 is invalid"),
    ({"max_concurrency": 0.5}, "field 'max_concurrency' = 0.5 is invalid"),
    ({"max_concurrency": "16"}, "field 'max_concurrency' = '16' is invalid"),
    ({"request_rate": 0}, "field 'request_rate' = 0 is invalid"),
    ({"burstiness": 0}, "field 'burstiness' = 0 is invalid"),
    ({"input_lens": [-5] * 8, "output_lens": [8] * 8}, "field 'input_lens'[0] = -5 is invalid"),
    ({"input_lens": [64] * 8, "output_lens": [0] * 8}, "the mean of 'output_lens' (8 requests) = 0"),
    ({"total_input_tokens": 0}, "'total_input_tokens' / 'completed' = 0 / 8 = 0 tokens"),
    ({"completed": 0}, "field 'completed' = 0 is invalid"),
    ({"completed": 9}, "field 'completed' = 9 is invalid: must be at most 'num_prompts' = 8"),
    ({"input_lens": [64] * 8, "output_lens": [8] * 7},
     "fields 'input_lens' (8 requests) and 'output_lens' (7)"),
])
def test_wrong_answer_compare_refuses_an_impossible_file_naming_it(capsys, tmp_path, fields, named):
    """--compare repaired these silently (isl 1, osl 1, 160 requests, burstiness 1.0, no cap)."""
    path = _result(tmp_path, **fields)
    err = _refused(capsys, "predict", "--compare", str(path), "--gpu", "h100-sxm")
    assert f"error: {path}: {named}" in err


def test_wrong_answer_a_draft_length_without_a_method_is_refused_as_alpha_is(capsys, tmp_path):
    """``--k 3`` (or a k column) without --spec was ignored, where --alpha without it is refused."""
    for flag, value in (("--k", "3"), ("--traffic", "code")):
        err = _refused(capsys, "predict", *LLAMA, *SMALL, flag, value)
        shown = value if flag == "--k" else repr(value)
        assert f"{flag}: {flag[2:]}={shown} is invalid: must be given with a speculative method" in err
    path = _points(tmp_path, "model,gpu,isl,osl,concurrency,num_prompts,spec,k\n"
                   "llama-3-8b,h100-sxm,64,8,2,4,none,3\nllama-3-8b,h100-sxm,64,8,2,4,,3\n")
    rc, out, _ = _run(capsys, "predict", "--points", str(path), "--format", "json")
    assert rc == 0
    assert [r["error"].split(" is invalid")[0] for r in json.loads(out)] == [
        f"{path}:2:8: column 'k' = 3", f"{path}:3:8: column 'k' = 3"]


# --------------------------------------------------------------------------- message


def test_message_a_huge_request_in_a_result_file_names_the_file_and_its_fields(capsys, tmp_path):
    """One 10M-token request gave ``osl=9936738 … with isl=63518``: numbers found nowhere in the file."""
    path = _result(tmp_path, completed=1, num_prompts=1, total_input_tokens=63518,
                   total_output_tokens=10_000_000)
    err = _refused(capsys, "predict", "--compare", str(path), "--gpu", "h100-sxm")
    assert f"{path}: 'total_output_tokens' / 'completed' = 10,000,000 / 1" in err and "--osl" in err


def test_message_an_error_of_the_run_a_result_file_describes_names_the_file(capsys, tmp_path):
    path = _result(tmp_path, total_input_tokens=8 * 200_000)  # past llama-3-8b's 8,192-token context
    err = _refused(capsys, "predict", "--compare", str(path), "--gpu", "h100-sxm")
    assert f"error: {path}: predicting its run (isl=200000 from its input_lens/total_input_tokens" in err


def test_message_the_draft_tree_flag_states_its_real_range(capsys):
    """``--speculative-num-draft-tokens 257``, inside the documented 2-257, failed as ``k=256 … [1, 64]``."""
    rc, out, _ = _run(capsys, "predict", "--help")
    assert rc == 0 and "2-65" in out and "2-257" not in out
    err = _refused(capsys, "predict", *LLAMA, *SMALL, "--speculative-num-draft-tokens", "257")
    assert "--speculative-num-draft-tokens" in err and "[2, 65]" in err


def test_message_a_refusal_names_the_flag_that_set_the_value(capsys):
    """``warmup=5 is invalid`` named a field no flag is called (the flag is --warmup-prompts)."""
    err = _refused(capsys, "predict", *LLAMA, "--isl", "64", "--osl", "8", "--num-prompts", "3",
                   "--warmup-prompts", "5")
    assert "error: --warmup-prompts: warmup=5 is invalid" in err
    err = _refused(capsys, "predict", "--model", "openai/gpt-oss-120b", "--gpu", "h200", "--tp", "2",
                   "--mode", "disagg", "--prefill-ep", "3", *SMALL)
    assert "error: --prefill-ep: prefill_ep=3 is invalid" in err


def test_message_an_engine_field_is_named_by_the_rows_column(tmp_path):
    """Points-row errors named internal fields (memory_fraction, max_num_seqs) instead of the column."""
    from servesim.cli.predict import _row_error

    args = argparse.Namespace(points=tmp_path / "p.csv", engine=None)
    row = {"line": 4, "engine": "sglang", "mem_fraction_static": 0.05, "max_running_requests": 3,
           "columns": {"mem_fraction_static": (7, "mem_fraction_static"),
                       "max_running_requests": (8, "max_running_requests")}}
    exc = ParameterError("memory_fraction", 0.05, "at least 0.5 (the weights' share)")
    assert _row_error(args, row, exc) == (f"{args.points}:4:7: column 'mem_fraction_static' = 0.05 is "
                                          "invalid: must be at least 0.5 (the weights' share)")
    exc = ParameterError("max_num_seqs", 3, "at least 4")
    assert _row_error(args, row, exc).startswith(f"{args.points}:4:8: column 'max_running_requests' = 3")


def test_message_points_and_compare_together_are_refused(capsys, tmp_path):
    path = _points(tmp_path, "model,gpu,isl,osl\nllama-3-8b,h100-sxm,64,8\n")
    err = _refused(capsys, "predict", "--points", str(path), "--compare", str(_result(tmp_path)))
    assert "--points" in err and "--compare" in err and "give one" in err


# --------------------------------------------------------------------------- hang


@pytest.mark.parametrize(("command", "flags"), [
    ("plan", ["--gpus", "--top", "--gpu"]), ("predict", ["--num-prompts", "--concurrency"])])
def test_hang_the_flags_that_multiply_the_work_state_their_cost(capsys, command, flags):
    rc, out, _ = _run(capsys, command, "--help")
    assert rc == 0
    entries: dict[str, str] = {}  # each option's help entry, by its first option string
    name = ""
    for line in out.splitlines():
        if line.startswith("  -"):
            name = line.split()[0].rstrip(",")
            entries[name] = line
        elif name and line.startswith(" " * 8):
            entries[name] += " " + line.strip()
        else:
            name = ""
    for flag in flags:
        text = " ".join(entries[flag].split())
        assert "cost" in text and "progress bar shows after 1 s" in text, (flag, text)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_hang_a_ticking_bar_draws_without_a_step_and_within_a_second():
    """A long call with no steps (the capacity screen, a fresh numba compile) showed nothing."""
    from servesim.cli.progress import Progress, working

    tty = _Tty()
    bar = Progress(3, "planning", stream=tty, ticking=True)
    assert bar._timer is not None and bar._timer.interval <= 1.0  # it draws itself within a second
    bar._timer.cancel()
    bar._tick()  # what the timer does: draw with no step taken
    assert "planning" in tty.getvalue() and "0/3" in tty.getvalue()
    bar.close()
    quiet = _Tty()
    with working("predicting", stream=quiet, enabled=False) as w:
        assert w._timer is None  # --quiet: no timer, nothing drawn
    assert quiet.getvalue() == ""


# --------------------------------------------------------------------------- paired


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(isl=st.integers(16, 512), osl=st.integers(1, 32), conc=st.integers(1, 4),
       dtype=st.sampled_from(["bf16", "fp8"]), engine=st.sampled_from(["vllm", "sglang"]))
def test_paired_flags_and_a_one_row_points_file_give_identical_bytes(capsys, tmp_path, isl, osl, conc, dtype,
                                                                      engine):
    path = _points(tmp_path, "model,gpu,tp,dtype,engine,isl,osl,concurrency,num_prompts\n"
                   f"llama-3-8b,h100-sxm,1,{dtype},{engine},{isl},{osl},{conc},4\n")
    rc, by_points, _ = _run(capsys, "predict", "--points", str(path), "--format", "json")
    assert rc == 0
    rc, by_flags, _ = _run(capsys, "predict", *LLAMA, "--tp", "1", "--dtype", dtype, "--engine", engine,
                           "--isl", str(isl), "--osl", str(osl), "--concurrency", str(conc),
                           "--num-prompts", "4", "--format", "json")
    assert rc == 0
    (row,) = json.loads(by_points)
    assert json.dumps(row, indent=2) == json.dumps(json.loads(by_flags), indent=2)


@pytest.mark.parametrize(("model", "gpu", "dtype", "kv_dtype"), [
    ("llama-3-8b", "h200", "fp4", "bf16"), ("llama-3-8b", "mi300x", "fp4", "bf16"),
    ("openai/gpt-oss-120b", "a100-80gb", "bf16", "fp8"), ("llama-3-8b", "a100-80gb", "fp8", "bf16"),
    ("openai/gpt-oss-120b", "h200", "fp4", "bf16"), ("llama-3-8b", "l40s", "fp8", "fp8")])
def test_paired_a_refusal_in_one_command_is_a_refusal_in_every_command(capsys, model, gpu, dtype, kv_dtype):
    """The same model, GPU and dtypes are refused (with one message) or taken by predict, roofline and
    disagg alike; where refused, by plan --gpus and simulate --model too."""
    base = ["--model", model, "--gpu", gpu, "--tp", "8" if "gpt" in model else "1", "--dtype", dtype,
            "--kv-dtype", kv_dtype]
    outcomes = {}
    for argv in (["predict", *base, "--isl", "64", "--osl", "8", "--concurrency", "1", "--num-prompts", "2"],
                 ["roofline", *base, "--batch", "1"], ["disagg", *base, "--nodes", "2"]):
        rc, _, err = _run(capsys, *argv)
        outcomes[argv[0]] = (rc, err.split("error: ", 1)[-1])
    assert len(set(outcomes.values())) == 1, outcomes
    if outcomes["predict"][0] == 2:
        for argv in (["plan", *base[:4], *base[6:], "--gpus", "8", "--isl", "64", "--osl", "8"],
                     ["simulate", *base, "--isl", "64", "--osl", "8", "--rate", "1", "--requests", "100"]):
            assert _refused(capsys, *argv).split("error: ", 1)[-1] == outcomes["predict"][1], argv
