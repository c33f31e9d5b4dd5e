"""Speculation as engines measure it: acceptance lengths, the draft's real cost, the curve over load."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from servesim._checks import ParameterError
from servesim.hardware.speculation import alpha_for_acceptance_length


@pytest.mark.parametrize(("length", "k", "alpha"), [
    (1.85, 1, 0.85),  # k = 1: A = 1 + alpha
    (1.875, 3, 0.5),  # 1 + 1/2 + 1/4 + 1/8
    (1.0, 4, 0.0),  # nothing accepted
    (5.0, 4, 1.0),  # everything accepted
])
def test_acceptance_length_inverts_the_iid_mean(length, k, alpha):
    assert alpha_for_acceptance_length(length, k) == pytest.approx(alpha, abs=1e-9)


@pytest.mark.parametrize(("length", "k"), [(0.99, 3), (4.01, 3), (2.5, 1)])
def test_acceptance_length_outside_one_to_k_plus_one_is_refused(length, k):
    with pytest.raises(ParameterError, match="acceptance_length"):
        alpha_for_acceptance_length(length, k)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "servesim", "predict", *args], capture_output=True,
                          text=True, timeout=120)


LLAMA = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm", "--isl", "1024", "--osl", "256"]


@pytest.mark.parametrize(("extra", "named"), [
    (["--spec", "eagle3", "--acceptance-length", "2.5"], "k"),  # A is measured at a k
    (["--spec", "eagle3", "--k", "3", "--acceptance-length", "4.5"], "acceptance_length"),
    (["--spec", "mtp"], "no MTP module"),  # Llama has none
    (["--spec", "ngram", "--traffic", "summarization", "--k", "3"], "acceptance"),  # none published
    (["--spec", "draft", "--draft", "qwen2.5-7b", "--k", "3", "--alpha", "0.6"], "vocabulary"),
    (["--alpha", "0.6"], "spec"),  # acceptance without a method
    (["--spec", "eagle3", "--alpha", "1.0"], "--alpha"),
])
def test_bad_speculation_is_one_line_exit_2(extra, named):
    r = _cli(*LLAMA, "--concurrency", "4", *extra)
    assert r.returncode == 2, r.stderr
    assert named in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_given_acceptance_drives_the_prediction_and_the_curve_falls_with_load():
    r = _cli(*LLAMA, "--concurrency", "8", "--spec", "eagle3", "--k", "3", "--acceptance-length", "2.5",
             "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    s = d["speculation"]
    assert s["acceptance"].startswith("given") and s["k"] == 3
    assert s["acceptance_length"] == pytest.approx(2.5, rel=1e-9)
    curve = s["speedup_by_batch"]
    assert curve[0]["batch"] == 1 and curve[-1]["speedup"] < curve[0]["speedup"]
    # The speedup never beats the accepted tokens per step (the verify costs at least a decode step).
    assert all(c["speedup"] < 2.5 for c in curve)
    plain = json.loads(_cli(*LLAMA, "--concurrency", "8", "--format", "json").stdout)
    assert d["mean_tpot_ms"] < plain["mean_tpot_ms"]


def test_deepseek_mtp_is_its_own_module_and_ngram_costs_the_host_only():
    ds = ["--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--tp", "8", "--isl", "1024", "--osl", "256",
          "--concurrency", "8", "--engine", "sglang", "--format", "json"]
    d = json.loads(_cli(*ds, "--spec", "mtp", "--k", "1", "--acceptance-length", "1.85").stdout)
    # One MLA + MoE layer of 61 plus the LM head: a few percent of a step.
    assert 0.01 < d["speculation"]["d"] < 0.1
    n = json.loads(_cli(*LLAMA, "--concurrency", "8", "--spec", "ngram", "--k", "3", "--acceptance-length",
                        "1.5", "--format", "json").stdout)
    assert n["speculation"]["d"] < 0.01


def test_fit_alpha_hands_predict_its_acceptance_length():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", "servesim", "fit-alpha", str(root / "examples" / "scrape.txt"),
                        "--format", "json"], capture_output=True, text=True, timeout=120)
    d = json.loads(r.stdout)
    # By hand: accepted per position 25,600, 19,200 and 13,440 of 32,000 drafts, plus the bonus token.
    assert d["acceptance_length"] == pytest.approx(1 + (25600 + 19200 + 13440) / 32000)
    flags = d["predict_flags"].split()
    p = _cli(*LLAMA, "--concurrency", "4", "--spec", "eagle3", *flags, "--format", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["speculation"]["acceptance_length"] == pytest.approx(2.82, abs=1e-3)
