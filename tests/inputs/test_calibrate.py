"""Calibration of prefill rate, TPOT_base and beta from measured points (servesim.inputs.calibrate).

Points are generated from the closed forms with known parameters (so the fit
must recover them), perturbed with seeded noise, or written as vLLM
``benchmark_serving.py --save-result`` JSON files with that script's key names.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from servesim.inputs.calibrate import (
    CalibrationPoint,
    InputError,
    calibrate,
    load_calibration,
    model_tpot_s,
    model_ttft_s,
    read_points,
)
from servesim.model.kvcache import LINKS
from servesim.model.serving import Workload, best_split, colocated

FIXTURES = Path(__file__).resolve().parents[1] / "data"
R_P, TPOT0, BETA = 12_000.0, 0.025, 0.5


def synthetic(rates: list[float], nodes: int = 1, prompt: float = 2000.0, output: float = 300.0,
              noise: float = 0.0, seed: int = 0) -> list[CalibrationPoint]:
    """Points on the closed form (R_P, TPOT0, BETA), with optional multiplicative log-normal noise."""
    rng = np.random.default_rng(seed)
    pts = []
    for lam in rates:
        bare = CalibrationPoint(lam, 1.0, 1.0, prompt, output, nodes, f"{lam:g}/s")
        ttft = model_ttft_s(bare, R_P) * math.exp(noise * rng.standard_normal())
        tpot = model_tpot_s(bare, R_P, TPOT0, BETA) * math.exp(noise * rng.standard_normal())
        pts.append(replace(bare, ttft_s=ttft, tpot_s=tpot))
    return pts


def vllm_result(p: CalibrationPoint, completed: int = 200, **extra: Any) -> dict[str, Any]:
    """A benchmark_serving.py --save-result dict (its key names; values from the point)."""
    duration = completed / p.rate_per_s
    return {
        "date": "20250101-000000", "backend": "vllm", "model_id": "meta-llama/Meta-Llama-3-70B",
        "num_prompts": completed, "request_rate": p.rate_per_s, "burstiness": 1.0, "max_concurrency": None,
        "duration": duration, "completed": completed,
        "total_input_tokens": int(p.prompt_tokens * completed),
        "total_output_tokens": int(p.output_tokens * completed),
        "request_throughput": completed / duration * 0.98,
        "output_throughput": p.output_tokens * completed / duration,
        "total_token_throughput": (p.prompt_tokens + p.output_tokens) * completed / duration,
        "mean_ttft_ms": p.ttft_s * 1e3, "median_ttft_ms": p.ttft_s * 1e3, "std_ttft_ms": 0.0,
        "p99_ttft_ms": p.ttft_s * 3e3, "mean_tpot_ms": p.tpot_s * 1e3, "median_tpot_ms": p.tpot_s * 1e3,
        "std_tpot_ms": 0.0, "p99_tpot_ms": p.tpot_s * 1.2e3, "mean_itl_ms": p.tpot_s * 1e3,
        **extra,
    }


@pytest.mark.parametrize("nodes", [1, 4])
def test_exact_points_recover_the_parameters(nodes: int) -> None:
    cal = calibrate(synthetic([0.5 * nodes, 1.5 * nodes, 3.0 * nodes, 4.5 * nodes], nodes=nodes))
    assert cal.prefill_tokens_per_s == pytest.approx(R_P, rel=1e-9)
    assert cal.tpot_base_s == pytest.approx(TPOT0, rel=1e-9)
    assert cal.beta == pytest.approx(BETA, rel=1e-9)
    assert cal.ttft_rms_rel < 1e-9 and cal.tpot_rms_rel < 1e-9
    assert cal.warnings == ()


def test_mm1_closed_form() -> None:
    """One node: TTFT = 1 / (mu - lambda), so R_p = P (1 / TTFT + lambda) at every point."""
    pts = synthetic([1.0, 2.0, 4.0])
    for p in pts:
        assert p.prompt_tokens * (1 / p.ttft_s + p.rate_per_s) == pytest.approx(R_P)
    assert calibrate(pts).prefill_tokens_per_s == pytest.approx(R_P)


def test_noisy_points_fit_within_their_scatter() -> None:
    noise = 0.05
    cal = calibrate(synthetic([0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5], noise=noise, seed=42))
    # Ten points with 5% log-noise pin the parameters to a few percent.
    assert cal.prefill_tokens_per_s == pytest.approx(R_P, rel=0.05)
    assert cal.tpot_base_s == pytest.approx(TPOT0, rel=0.05)
    assert cal.beta == pytest.approx(BETA, abs=0.2)
    assert 0.5 * noise < cal.ttft_rms_rel < 2 * noise
    assert len(cal.points) == 10 and all(abs(p.tpot_rel_residual) < 4 * noise for p in cal.points)


def test_csv_fixture() -> None:
    points, notes = read_points([FIXTURES / "calibration_points.csv"])
    assert len(points) == 4 and notes == []
    cal = calibrate(points)
    assert cal.prefill_tokens_per_s == pytest.approx(12_000.0, rel=1e-9)
    assert cal.tpot_base_s == pytest.approx(0.025, rel=1e-9)
    assert cal.beta == pytest.approx(0.5, rel=1e-9)


def test_vllm_benchmark_json(tmp_path: Path) -> None:
    files = []
    for i, p in enumerate(synthetic([1.0, 2.0, 3.0, 4.0])):
        f = tmp_path / f"vllm-{i}qps.json"
        f.write_text(json.dumps(vllm_result(p)))
        files.append(f)
    points, notes = read_points(files)
    assert notes == []
    assert [p.rate_per_s for p in points] == [1.0, 2.0, 3.0, 4.0]  # the offered Poisson rate
    assert points[0].prompt_tokens == 2000.0 and points[0].output_tokens == 300.0
    cal = calibrate(points)
    assert cal.prefill_tokens_per_s == pytest.approx(R_P, rel=1e-9)
    inf = tmp_path / "inf.json"
    inf.write_text(json.dumps(vllm_result(synthetic([2.0])[0], request_rate="inf", max_concurrency=16)))
    points, notes = read_points([inf])
    assert points[0].rate_per_s == pytest.approx(2.0 * 0.98)  # achieved request_throughput
    assert any("request_rate='inf' is not a finite Poisson rate" in n for n in notes)
    assert any("max_concurrency=16" in n for n in notes)
    listed = tmp_path / "all.json"
    listed.write_text(json.dumps([vllm_result(p) for p in synthetic([1.0, 3.0])]))
    assert [p.source for p in read_points([listed])[0]] == [f"{listed}[0]", f"{listed}[1]"]


def test_negative_interference_is_refitted_at_zero() -> None:
    pts = synthetic([1.0, 2.0, 3.0, 4.0])
    falling = [replace(p, tpot_s=0.030 - 0.001 * i) for i, p in enumerate(pts)]
    cal = calibrate(falling)
    assert cal.beta == 0.0
    assert cal.tpot_base_s == pytest.approx(np.mean([p.tpot_s for p in falling]))
    assert any("beta fixed at 0" in w for w in cal.warnings)


def test_decode_capacity_is_checked() -> None:
    cal = calibrate(synthetic([1.0, 2.0, 4.0], output=1000.0), decode_tokens_per_s=3000.0)
    assert any("lambda O / (N R_d) = 1.33 >= 1" in w for w in cal.warnings)


def test_calibrated_node_drives_the_closed_forms(tmp_path: Path) -> None:
    cal = calibrate(synthetic([1.0, 2.0, 3.0]))
    path = tmp_path / "node.toml"
    path.write_text(cal.to_toml())
    node, beta = load_calibration(path)
    assert node == cal.node and beta == cal.beta
    wl = Workload("chat", 2000, 300, 2.0, 1.0, 0.040)
    co = colocated(wl, node, 1, beta)
    assert co.tpot_s == pytest.approx(model_tpot_s(synthetic([2.0])[0], R_P, TPOT0, BETA))
    assert co.ttft_mean_s == pytest.approx(model_ttft_s(synthetic([2.0])[0], R_P))
    split = best_split(replace(wl, rate_per_s=6.0), node, 4, LINKS["rdma"])
    assert split.goodput_rps > 0 and split.kv_transfer_s > 0


# ---------------------------------------------------------------------------
# Malformed input


def test_too_few_or_degenerate_points() -> None:
    with pytest.raises(InputError, match="at least 2 measured points"):
        calibrate(synthetic([1.0]))
    same = synthetic([2.0])
    with pytest.raises(InputError, match="beta is not identifiable: every point has the same prefill load"):
        calibrate(same + same)


def test_malformed_csv(tmp_path: Path) -> None:
    text = (FIXTURES / "calibration_points.csv").read_text()
    bad = tmp_path / "h.csv"
    bad.write_text(text.replace("mean_tpot_ms", "tpot", 1))
    with pytest.raises(InputError) as err:
        read_points([bad])
    assert str(err.value).startswith(f"{bad}:1: header 'rate_per_s,mean_ttft_ms,tpot,prompt_tokens,"
                                     "output_tokens' lacks mean_tpot_ms (or mean_tpot_s)")
    cut = tmp_path / "t.csv"
    cut.write_text(text.rstrip("\n").rsplit(",", 2)[0] + "\n")
    with pytest.raises(InputError, match=r"t\.csv:5: truncated line"):
        read_points([cut])
    neg = tmp_path / "n.csv"
    neg.write_text(text.replace("3.0,333", "-3.0,333"))
    with pytest.raises(InputError, match=r"n\.csv:4: rate_per_s=-3 is invalid: must be > 0"):
        read_points([neg])
    huge = tmp_path / "f.csv"  # a field over the csv module's limit: one line, as a trace's says it
    huge.write_text(text.replace("3.0,333", "3.0," + "3" * 200_000, 1))
    with pytest.raises(InputError, match=r"f\.csv:\d+: a field is longer than 131,072 characters: "
                                         "not a calibration row"):
        read_points([huge])


def test_malformed_json(tmp_path: Path) -> None:
    good = json.dumps(vllm_result(synthetic([1.0])[0]))
    cut = tmp_path / "cut.json"
    cut.write_text(good[:-30])
    with pytest.raises(InputError, match=r"cut\.json:1: not valid JSON \(truncated\?\)"):
        read_points([cut])
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"completed": 3, "mean_ttft_ms": 1.0}))
    with pytest.raises(InputError, match=r"not a vLLM benchmark_serving\.py result: missing total_input"):
        read_points([other])
    none = tmp_path / "none.json"
    none.write_text(json.dumps({**vllm_result(synthetic([1.0])[0]), "completed": 0}))
    with pytest.raises(InputError, match="completed=0: no request finished"):
        read_points([none])


def test_cli_calibrate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from servesim.cli.main import main

    out = tmp_path / "node.toml"
    assert main(["calibrate", str(FIXTURES / "calibration_points.csv"), "--save", str(out)]) == 0
    text = capsys.readouterr().out
    assert "prefill R_p   12,000 tokens/s per node" in text and "beta          0.5000" in text
    assert load_calibration(out)[1] == pytest.approx(0.5)
    assert main(["calibrate", str(FIXTURES / "calibration_points.csv"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["node"]["tpot_base_s"] == pytest.approx(0.025) and len(data["points"]) == 4
    assert main(["calibrate", str(tmp_path / "missing.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"servesim calibrate: error: {tmp_path / 'missing.csv'}: cannot read")
