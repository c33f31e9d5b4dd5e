"""The command line in a subprocess: golden outputs, formats, bad input.

Golden files live in tests/golden/.  After an intended change to an output,
regenerate them with ``SERVESIM_UPDATE_GOLDEN=1 pytest tests/cli/test_cli.py`` and
review the diff.
"""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

from tests.cli_helpers import ROOT, run_cli

GOLDEN = ROOT / "tests" / "golden"
UPDATE = os.environ.get("SERVESIM_UPDATE_GOLDEN") == "1"

# Every command of the seed's "How to run" section, plus the other formats.
CASES = {
    "specdec": ["specdec"],
    "specdec_preset_mtp": ["specdec", "--preset", "mtp"],
    "specdec_util_07": ["specdec", "--util", "0.7"],
    "specdec_own_case": ["specdec", "--alpha", "0.6", "--k", "4", "--d", "0.2", "--util", "0.5"],
    "disagg_chat": ["disagg", "--preset", "chat"],
    "disagg_rag": ["disagg", "--preset", "rag"],
    "disagg_agent": ["disagg", "--preset", "agent"],
    "disagg_rag_tcp": ["disagg", "--preset", "rag", "--link", "tcp"],
    "disagg_chat_2_tcp": ["disagg", "--preset", "chat", "--nodes", "2", "--link", "tcp"],
    "disagg_rag_slo32": ["disagg", "--preset", "rag", "--slo-tpot-ms", "32"],
    "all": ["all"],
    "disagg_rag_h100_roofline": ["disagg", "--preset", "rag", "--model", "llama-3-70b", "--gpu", "h100-sxm",
                                 "--tp", "8"],
    "roofline_70b_h100": ["roofline", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8"],
    "plan_rag": ["plan", "--preset", "rag", "--quiet"],
    "specdec_json": ["specdec", "--format", "json"],
    "disagg_rag_json": ["disagg", "--preset", "rag", "--format", "json"],
    "disagg_rag_csv": ["disagg", "--preset", "rag", "--format", "csv"],
    "specdec_csv": ["specdec", "--format", "csv"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_output(name):
    res = run_cli(*CASES[name])
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        path.write_text(res.stdout)
    assert res.stdout == path.read_text(), f"output of {CASES[name]} changed; see {path}"


def test_seed_entry_point_works_without_installing():
    # `python -S` hides site-packages, so the shim must fall back to src/.
    res = run_cli("disagg", "--preset", "rag", entry=("-S", "spec_decode_sim.py"))
    assert res.returncode == 0, res.stderr
    assert res.stdout == (GOLDEN / "disagg_rag.txt").read_text()


def test_specdec_json_schema():
    data = json.loads(run_cli("specdec", "--format", "json").stdout)
    assert {"grid", "presets", "utilization_sweep"} <= set(data)
    keys = {"name", "alpha", "d", "c", "best_k_u0", "speedup_u0", "best_k_u07", "speedup_u07"}
    assert all(keys <= set(p) for p in data["presets"])
    assert all({"u", "best_k", "speedup", "verdict"} <= set(r) for r in data["utilization_sweep"])
    ks = [r["best_k"] for r in data["utilization_sweep"]]
    assert ks == sorted(ks, reverse=True) and ks[0] == 6 and ks[-1] == 1


def test_disagg_json_schema():
    data = json.loads(run_cli("disagg", "--preset", "chat", "--nodes", "2", "--link", "tcp",
                              "--format", "json").stdout)
    row = data["rows"][0]
    assert {"mix", "prompt_tokens", "output_tokens", "colocated", "disaggregated"} <= set(row)
    assert {"ttft_ms", "tpot_ms", "goodput_rps", "stable"} <= set(row["colocated"])
    assert {"prefill_nodes", "decode_nodes", "ttft_ms", "tpot_ms", "goodput_rps", "stable"} <= set(
        row["disaggregated"]
    )
    # The one-node decode pool is unstable: a result, with null TTFT and zero goodput.
    dis = row["disaggregated"]
    assert dis["stable"] is False and dis["ttft_ms"] is None and dis["goodput_rps"] == 0.0
    assert row["colocated"]["stable"] is True and row["colocated"]["goodput_rps"] > 0
    assert data["crossover_link_GBps"] is None


def test_csv_parses_with_one_header():
    text = run_cli("disagg", "--preset", "rag", "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["mix"] for r in rows] == ["own", "prefill-heavy", "balanced", "decode-heavy"]
    assert float(rows[0]["colocated_tpot_ms"]) == pytest.approx(29.8, abs=0.05)
    assert rows[0]["crossover_link_GBps"] == "2.5"


def test_same_inputs_same_bytes():
    a = run_cli("all", "--format", "json").stdout
    b = run_cli("all", "--format", "json").stdout
    assert a == b and len(a) > 1000


@pytest.mark.parametrize(
    ("args", "flag", "fragment"),
    [
        (["specdec", "--alpha", "1.5"], "--alpha", "[0, 1]"),
        (["specdec", "--alpha", "-0.1"], "--alpha", "[0, 1]"),
        (["specdec", "--util", "1"], "--util", "[0, 1)"),
        (["specdec", "--util", "nan"], "--util", "[0, 1)"),
        (["specdec", "--k", "0"], "--k", "[1, 64]"),
        (["specdec", "--d", "-1"], "--d", "[0, 100]"),
        (["specdec", "--d", "-inf"], "--d", "[0, 100]"),
        (["specdec", "--k-max", "100000"], "--k-max", "[1, 64]"),
        (["specdec", "--k-max", "1" + "0" * 5000], "--k-max", "out of range"),
        (["specdec", "--preset", "magic"], "--preset", "small-draft"),
        (["disagg", "--nodes", "0"], "--nodes", "[2, 512]"),
        (["disagg", "--nodes", "-3"], "--nodes", "[2, 512]"),
        (["disagg", "--nodes", "100000"], "--nodes", "[2, 512]"),
        (["disagg", "--nodes", "two"], "--nodes", "integer"),
        (["disagg", "--rate", "0"], "--rate", "[1e-06, 1e+06]"),
        (["disagg", "--rate", "inf"], "--rate", "[1e-06, 1e+06]"),
        (["disagg", "--rate", "1e-320"], "--rate", "[1e-06, 1e+06]"),
        (["disagg", "--link", "carrier-pigeon"], "--link", "nvlink"),
        (["disagg", "--link", "-5"], "--link", "[0.001, 100000]"),
        (["disagg", "--link", "0"], "--link", "[0.001, 100000]"),
        (["disagg", "--link", "1e-320"], "--link", "[0.001, 100000]"),
        (["disagg", "--beta", "-0.1"], "--beta", "[0, 100]"),
        (["disagg", "--beta", "1e308"], "--beta", "[0, 100]"),
        (["disagg", "--slo-ttft-ms", "0"], "--slo-ttft-ms", "[0.001, 3.6e+06]"),
        (["disagg", "--slo-tpot-ms", "nan"], "--slo-tpot-ms", "[0.001, 60000]"),
        (["disagg", "--preset", "video"], "--preset", "chat"),
        (["all", "--format", "xml"], "--format", "table"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, flag, fragment):
    res = run_cli(*args)
    assert res.returncode == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert flag in lines[0] and fragment in lines[0] and "Traceback" not in res.stderr
    assert args[args.index(flag) + 1] in lines[0]  # the value itself is named


def test_model_without_gpu_is_one_line_exit_2():
    res = run_cli("disagg", "--preset", "rag", "--model", "llama-3-70b")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "--model and --gpu go together" in res.stderr


def test_calibrated_node_drives_disagg(tmp_path):
    from servesim.inputs.calibrate import calibrate, read_points

    points, warnings = read_points([ROOT / "tests" / "data" / "calibration_points.csv"])
    cal = calibrate(points, warnings=warnings)
    path = tmp_path / "node.toml"
    path.write_text(cal.to_toml())
    data = json.loads(run_cli("disagg", "--preset", "rag", "--calibration", str(path),
                              "--format", "json").stdout)
    assert data["node"]["source"] == f"calibrated ({path})"
    assert data["node"]["prefill_tokens_per_s"] == pytest.approx(cal.node.prefill_tokens_per_s)
    assert data["beta"] == pytest.approx(cal.beta)


_PLOTTING = [
    ["specdec"],
    ["disagg", "--preset", "rag"],
    ["plan", "--preset", "rag", "--spec", "none", "--quiet"],
    ["roofline", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8"],
    ["calibrate", "tests/data/calibration_points.csv"],
    ["fit-alpha", "--value", "3.2", "--from", "accept-length", "--k", "4"],
    ["trace", "summarize", "tests/data/mooncake_conversation_head.jsonl"],
    ["all"],
    ["simulate", "--servers", "4", "--rate", "3", "--requests", "20000", "--no-timing"],
    ["simulate", "--preset", "rag", "--requests", "4000", "--replications", "2", "--no-timing"],
    ["simulate", "--trace", "tests/data/azure_code_head.csv", "--nodes", "2"],
    ["validate", "--requests", "20000", "--serving-requests", "4000", "--cycles", "20000",
     "--replications", "2", "--no-crossover"],
]


# every command writes its plot once, the formats alternating (each is written by six commands)
def _plot_id(a: object) -> str:
    return "-".join(x.lstrip("-") for x in a[:2]) if isinstance(a, list) else str(a)[1:]


@pytest.mark.parametrize(("args", "suffix"), [(a, (".png", ".svg")[i % 2]) for i, a in enumerate(_PLOTTING)],
                         ids=_plot_id)
def test_every_command_saves_its_plot(args, suffix, tmp_path, capsys):
    from servesim.cli.main import main

    path = tmp_path / f"plot{suffix}"
    rc = main([*args, "--plot", str(path)])  # in-process: the commands are the CLI's own functions
    # validate exits 1 when a (small, fast) run has a FAIL row; the plot is written either way.
    assert rc == 0 or (args[0] == "validate" and rc == 1), capsys.readouterr().err
    data = path.read_bytes()
    assert len(data) > 5_000
    assert data.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in data[:2000]


def test_plot_path_must_be_png_or_svg(tmp_path):
    res = run_cli("specdec", "--plot", str(tmp_path / "x.pdf"))
    assert res.returncode == 2 and ".png or .svg" in res.stderr and "x.pdf" in res.stderr


def test_link_from_a_user_catalog(tmp_path):
    cat = tmp_path / "links.toml"
    cat.write_text('[link.cxl]\nGBps = 64.0\nnominal_GBps = 64.0\nefficiency = 1.0\nwhy = "test"\n')
    data = json.loads(run_cli("disagg", "--preset", "rag", "--link", "cxl", "--catalog", str(cat),
                              "--format", "json").stdout)
    assert data["link"] == {"name": "cxl", "GBps": 64.0}
    missing = run_cli("disagg", "--link", "cxl")
    assert missing.returncode == 2 and "'cxl' is not a known link" in missing.stderr


def test_roofline_prices_its_pure_sections_in_the_dtype_asked():
    """``--dtype fp8`` weighs the pure roofline's weights as the measured step does: Llama-3-70B in FP8
    on one H100 is 70.55e9 params at 1 B plus its two 128,256 x 8,192 tables in BF16 (72.7 GB, where
    BF16 is 141.1 GB and does not fit), so a batch-1 decode step streams about half the bytes."""
    def figures(*extra: str) -> dict:
        r = run_cli("roofline", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "1", *extra,
                    "--format", "json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    bf16, fp8 = figures(), figures("--dtype", "fp8")
    tables = 2 * 128256 * 8192
    assert bf16["weight_bytes"] == pytest.approx(bf16["params"] * 2, rel=1e-3)
    assert fp8["weight_bytes"] == pytest.approx((bf16["params"] - tables) * 1 + tables * 2, rel=1e-3)
    assert bf16["max_batch"] < 1 <= fp8["max_batch"]
    assert 0.45 < fp8["decode_step_ms"] / bf16["decode_step_ms"] < 0.6
