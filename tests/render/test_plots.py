"""The figures say what they claim: TTFT as a CDF with the SLO and the attainment, operating points
marked, full labels, legends outside the data, distinguishable threshold lines, one file per run."""

from __future__ import annotations

import hashlib
import itertools
from bisect import bisect_right
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from matplotlib.lines import Line2D

from servesim.model.kvcache import LINKS
from servesim.model.serving import DEFAULT_NODE, WORKLOAD_PRESETS, best_split, colocated
from servesim.model.speculative import SPECDEC_PRESETS
from servesim.plan.figures import all_curves, disagg_curves, plan_curves, specdec_curves
from servesim.plan.summary import disagg_summary
from servesim.render import plots
from servesim.render.figures import all_figure, disagg_figure, plan_figure, specdec_figure
from servesim.render.simfigures import simulate_figure, validate_figure
from tests.cli_helpers import run_cli


def _lines(ax: Any) -> list[Line2D]:
    return [ln for ln in ax.get_lines() if isinstance(ln, Line2D)]


def _markers_at(ax: Any, x: float) -> list[Line2D]:
    """Single-point lines drawn with a marker at x."""
    return [ln for ln in _lines(ax) if ln.get_marker() not in (None, "None", "", " ")
            and len(ln.get_xdata()) == 1 and float(ln.get_xdata()[0]) == pytest.approx(x)]


def _vertical_at(ax: Any, x: float) -> list[Line2D]:
    """axvline-style lines at data x."""
    out = []
    for ln in _lines(ax):
        xs = list(ln.get_xdata())
        if len(xs) == 2 and xs[0] == xs[1] and float(xs[0]) == pytest.approx(x):
            out.append(ln)
    return out


def _close(fig: Any) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)


# --- TTFT as a CDF --------------------------------------------------------------------------


def _ttft_samples() -> dict[str, list[float]]:
    import numpy as np

    rng = np.random.default_rng(7)
    return {
        "colocated x8": [float(x) for x in 0.4 + rng.exponential(0.3, 3000)],
        "6p/2d": [float(x) for x in 0.6 + rng.exponential(0.1, 2000)],
    }


def test_ttft_is_a_cdf_with_the_slo_and_the_attainment_marked():
    samples = _ttft_samples()
    slo_s = 0.9
    fig, axes = plots.figure(1)
    ax = axes[0]
    plots.plot_ttft_distribution(ax, samples, slo_s)
    for name, xs in samples.items():
        (cdf,) = [ln for ln in _lines(ax) if str(ln.get_label()).startswith(f"{name}:")]
        x, y = [float(v) for v in cdf.get_xdata()], [float(v) for v in cdf.get_ydata()]
        assert cdf.get_drawstyle() == "steps-post"
        assert all(0.0 <= v <= 1.0 for v in y) and y[-1] == pytest.approx(1.0)
        assert all(b >= a for a, b in itertools.pairwise(y)), "the CDF must not decrease"
        assert all(b >= a for a, b in itertools.pairwise(x))
        # The attainment: the fraction of requests within the SLO, marked on the SLO line and named.
        frac = bisect_right(sorted(xs), slo_s) / len(xs)
        assert 0.0 < frac < 1.0
        (mark,) = [m for m in _markers_at(ax, slo_s * 1e3) if m.get_color() == cdf.get_color()]
        assert float(mark.get_ydata()[0]) == pytest.approx(frac)
        assert f"{frac:.1%}" in str(cdf.get_label())
        # The step CDF at the SLO is that fraction too.
        i = bisect_right(x, slo_s * 1e3) - 1
        assert y[i] == pytest.approx(frac)
        # ... with a horizontal marker at that height.
        hlines = [c for c in ax.collections if c.get_segments()
                  and all(abs(seg[0][1] - frac) < 1e-12 and abs(seg[1][1] - frac) < 1e-12
                          for seg in c.get_segments())]
        assert hlines
    (slo,) = [ln for ln in _lines(ax) if str(ln.get_label()).startswith("TTFT SLO")]
    assert [float(v) for v in slo.get_xdata()] == [pytest.approx(900.0)] * 2
    assert ax.get_xlim()[1] > 900.0
    _close(fig)


# --- Operating points -----------------------------------------------------------------------


def test_disagg_figure_marks_the_current_rate_the_current_link_and_the_crossover():
    wl, node, link = WORKLOAD_PRESETS["rag"], DEFAULT_NODE, LINKS["rdma"]
    xo = disagg_summary("rag")["crossover_exact_GBps"]
    assert xo is not None
    fig = disagg_figure(disagg_curves(wl, node, 8, 0.5, link, xo))
    by_rate, by_link = fig.axes[0], fig.axes[1]
    co, de = colocated(wl, node, 8, 0.5).goodput_rps, best_split(wl, node, 8, link).goodput_rps
    for ax, x in ((by_rate, wl.rate_per_s), (by_link, link.GBps)):
        marks = _markers_at(ax, x)
        assert sorted(float(m.get_ydata()[0]) for m in marks) == pytest.approx(sorted([co, de]))
        assert _vertical_at(ax, x), "a vertical line at the operating point"
        lo, hi = ax.get_xlim()
        assert lo < x < hi
    assert any("current rate" in str(ln.get_label()) for ln in _vertical_at(by_rate, wl.rate_per_s))
    assert any("rdma" in str(ln.get_label()) for ln in _vertical_at(by_link, link.GBps))
    assert any("crossover" in str(ln.get_label()) for ln in _vertical_at(by_link, xo))
    _close(fig)


def test_disagg_rate_axis_reaches_a_rate_above_the_fleet_capacity():
    from dataclasses import replace

    wl = replace(WORKLOAD_PRESETS["rag"], rate_per_s=500.0)
    fig = disagg_figure(disagg_curves(wl, DEFAULT_NODE, 8, 0.5, LINKS["rdma"], None))
    assert fig.axes[0].get_xlim()[1] > 500.0 and _markers_at(fig.axes[0], 500.0)
    _close(fig)


def test_plan_figure_marks_the_recommended_deployment_with_its_speculation():
    from servesim.plan.planner import PlanRequest, plan

    wl, node, link = WORKLOAD_PRESETS["rag"], DEFAULT_NODE, LINKS["rdma"]
    spec = SPECDEC_PRESETS["mtp"]
    best = plan(PlanRequest(wl, node, link, 8, 0.5, speculation=spec), with_sensitivity=False).recommended
    assert best.speculative_k > 0, "the rag preset's plan recommends speculation (the case to check)"
    fig = plan_figure(plan_curves(wl, node, 8, 0.5, link, speculation=spec))
    ax = fig.axes[0]
    (star,) = _markers_at(ax, wl.rate_per_s)
    assert float(star.get_ydata()[0]) == pytest.approx(best.goodput_rps)
    assert best.label in str(star.get_label()) and "spec k=" in str(star.get_label())
    assert any("planned rate" in str(ln.get_label()) for ln in _vertical_at(ax, wl.rate_per_s))
    curve = [ln for ln in _lines(ax) if str(ln.get_label()) == f"recommended: {best.label}"]
    assert len(curve) == 1 and len(curve[0].get_xdata()) > 10
    # The recommended curve passes through the operating point's goodput at the planned rate.
    xs, ys = [float(v) for v in curve[0].get_xdata()], [float(v) for v in curve[0].get_ydata()]
    assert max(xs) > wl.rate_per_s and ys[0] > 0.0
    _close(fig)


def test_plan_figure_without_speculation_says_so():
    wl = WORKLOAD_PRESETS["rag"]
    fig = plan_figure(plan_curves(wl, DEFAULT_NODE, 8, 0.5, LINKS["rdma"]))
    labels = [str(ln.get_label()) for ln in _lines(fig.axes[0])]
    assert any(lb.startswith("recommended (speculation not considered): ") for lb in labels)
    _close(fig)


# --- Labels, legends, thresholds ------------------------------------------------------------


def _validate_data() -> dict[str, Any]:
    names = ["TPOT is a node constant, inflated by beta x prefill load",
             "free KV-transfer machinery", "mean TPOT instead of a distribution"]
    bias = []
    for n in names:
        for fig_name in ("ttft_mean_ms", "goodput_rps"):
            bias.append({"assumption": n, "relaxation": f"relaxed {n} in a long and careful way",
                         "case": "rag", "figure": fig_name, "relative_change": 0.1})
    agreement = [{"z": 0.5, "tolerance": "4 SE", "pass": True},
                 {"z": 6.0, "tolerance": "4 SE", "pass": False},
                 {"z": -1.0, "tolerance": "relative 5%", "pass": True}]
    return {"agreement": agreement, "agreement_passed": 2, "agreement_failed": 1, "bias": bias}


def test_validate_bias_labels_are_not_truncated():
    d = _validate_data()
    fig = validate_figure(d)
    ax = fig.axes[1]
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert ticks == [f"{b['assumption']}: {b['figure']}" for b in d["bias"]]
    right = " ".join(t.get_text().replace("\n", " ") for ax2 in fig.axes[2:] for t in ax2.get_yticklabels())
    for b in d["bias"]:
        assert b["relaxation"] in right
    _close(fig)


def test_trace_replay_bars_have_full_labels_and_a_legend_clear_of_them():
    d = {"mode": "trace", "rows": [
        {"deployment": "colocated x2", "closed_form": {"stable": True, "goodput_rps": 3.0},
         "replay": {"goodput_rps": 2.5}},
        {"deployment": "1p/1d", "closed_form": {"stable": False, "goodput_rps": 0.0},
         "replay": {"goodput_rps": 5.0}},
    ]}
    fig = simulate_figure(d)
    ax = fig.axes[0]
    ticks = [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()]
    assert ticks[0] == "colocated x2" and ticks[1].startswith("1p/1d")
    _assert_legends_outside(fig)
    _close(fig)


def _assert_legends_outside(fig: Any) -> int:
    """Every legend's box lies outside its axes' box (figure pixels, after a draw); how many legends."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    seen = 0
    for ax in fig.axes:
        lg = ax.get_legend()
        if lg is None:
            continue
        seen += 1
        lb, ab = lg.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert not lb.overlaps(ab), f"legend of {ax.get_title()!r} covers its data: {lb} vs {ab}"
    return seen


def _roofline_rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    names = ["small-draft", "mtp", "medusa", "eagle3"]
    rows = [{"batch": b, "speedup": {n: 3.0 / (1 + b / 100) + 0.1 * i for i, n in enumerate(names)},
             "weights_intensity_flops_per_byte": float(b), "spec_weights_intensity_flops_per_byte": 5.0 * b}
            for b in batches]
    presets = [{"name": "small-draft", "turn_off_batch": 163}, {"name": "mtp", "turn_off_batch": None},
               {"name": "medusa", "turn_off_batch": 171}, {"name": "eagle3", "turn_off_batch": 180}]
    return rows, presets


@pytest.mark.parametrize("which", ["specdec", "disagg", "plan", "ttft", "roofline", "validate",
                                   "calibration"])
def test_legends_lie_outside_the_data(which):
    if which == "specdec":
        fig = specdec_figure(specdec_curves(0.1, 0.05, 0.0))
    elif which == "disagg":
        fig = disagg_figure(disagg_curves(WORKLOAD_PRESETS["rag"], DEFAULT_NODE, 8, 0.5, LINKS["rdma"], 1.4))
    elif which == "plan":
        fig = plan_figure(plan_curves(WORKLOAD_PRESETS["rag"], DEFAULT_NODE, 8, 0.5, LINKS["rdma"],
                                      speculation=SPECDEC_PRESETS["mtp"]))
    elif which == "ttft":
        fig, axes = plots.figure(1)
        plots.plot_ttft_distribution(axes[0], _ttft_samples(), 0.9)
    elif which == "roofline":
        fig, axes = plots.figure(2)
        rows, presets = _roofline_rows()
        plots.plot_roofline_speedup(axes[0], rows, presets)
        plots.plot_roofline_intensity(axes[1], rows, 295.0, 4)
    elif which == "validate":
        fig = validate_figure(_validate_data())
    else:
        fig, axes = plots.figure(2)
        plots.plot_calibration(axes, [{"rate_per_s": r, "ttft_s": 0.2 * r, "ttft_model_s": 0.2 * r,
                                       "tpot_s": 0.03, "tpot_model_s": 0.03} for r in (1.0, 2.0, 3.0)])
    assert _assert_legends_outside(fig) >= 1
    _close(fig)


def test_roofline_turn_off_lines_differ_in_colour_style_and_label():
    fig, axes = plots.figure(1)
    rows, presets = _roofline_rows()
    plots.plot_roofline_speedup(axes[0], rows, presets)
    offs = [ln for p in presets if p["turn_off_batch"] is not None
            for ln in _vertical_at(axes[0], p["turn_off_batch"])]
    assert len(offs) == 3
    assert len({ln.get_color() for ln in offs}) == 3
    assert len({str(ln.get_linestyle()) for ln in offs}) == 3
    assert len({str(ln.get_label()) for ln in offs}) == 3
    assert all(str(ln.get_label()).startswith(p) for ln, p in zip(offs, ["small-draft", "medusa", "eagle3"],
                                                                       strict=True))
    # Each turn-off line has the colour of its preset's curve.
    curves = {str(ln.get_label()): ln.get_color() for ln in _lines(axes[0])}
    assert [ln.get_color() for ln in offs] == [curves["small-draft"], curves["medusa"], curves["eagle3"]]
    _close(fig)


def test_fit_alpha_value_plots_the_measured_point():
    from servesim.inputs.telemetry import acceptance_curve, counters_from_value, fit_alpha

    data = fit_alpha(counters_from_value("accept-length", [3.2]), definition="accept-length", k=4).as_dict()
    curve = acceptance_curve(data)
    assert curve is not None and curve["statistic"] == "mean_accepted_with_bonus"
    # i.i.d. acceptance at k = 4: E[n] = 1 + alpha + ... + alpha^4, so 1 at alpha = 0 and 5 at alpha = 1
    assert curve["value"][0] == pytest.approx(1.0) and curve["value"][-1] == pytest.approx(5.0)
    fig, axes = plots.figure(1)
    plots.plot_acceptance(axes[0], data, curve)
    (point,) = _markers_at(axes[0], data["alpha"])
    assert float(point.get_ydata()[0]) == pytest.approx(3.2)
    assert "measured" in str(point.get_label())
    _close(fig)


def test_figure_applies_the_house_style():
    import matplotlib

    matplotlib.rcParams["axes.grid"] = False
    fig, axes = plots.figure(2)
    assert matplotlib.rcParams["axes.grid"] is True
    assert fig.get_layout_engine() is not None  # constrained: outside legends get their room
    assert axes[0].xaxis._major_tick_kw.get("gridOn", True)
    _close(fig)


# --- Files ----------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_same_figure_same_bytes(tmp_path, suffix):
    digests = []
    for i in range(2):
        path = tmp_path / f"f{i}{suffix}"
        curves = disagg_curves(WORKLOAD_PRESETS["rag"], DEFAULT_NODE, 8, 0.5, LINKS["rdma"], 1.4)
        plots.save(disagg_figure(curves), path)
        digests.append(hashlib.sha256(path.read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"f0{suffix}", f"f1{suffix}"]  # no temporaries


def test_all_figure_has_every_panel():
    summaries = {name: disagg_summary(name) for name in WORKLOAD_PRESETS}
    fig = all_figure(*all_curves(summaries, 0.1, 0.05))
    titles = [ax.get_title() for ax in fig.axes]
    assert any(t.startswith("Speedup over (alpha, k)") for t in titles)
    assert "When to turn speculation off" in titles
    for name in WORKLOAD_PRESETS:
        assert sum(t.startswith(f"{name}: Goodput vs arrival rate") for t in titles) == 1
        assert sum(t.startswith(f"{name}: Goodput vs prefill-to-decode link") for t in titles) == 1
    _close(fig)


@pytest.mark.slow
def test_all_plot_writes_one_file_with_every_panel(tmp_path: Path):
    path = tmp_path / "everything.png"
    res = run_cli("all", "--plot", str(path))
    assert res.returncode == 0, res.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["everything.png"]
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG")
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert height > width > 1200  # four rows of two panels


def test_queue_figure_draws_the_erlang_tail_its_caller_computed():
    """The tail is computed below the renderer (sim.report) and drawn as given: P(W_q > 0) = C(c, a)."""
    import math

    from servesim.model.queueing import erlang_c
    from servesim.sim.report import erlang_tail_curve

    d = {"mode": "queue", "servers": 8, "rate_per_s": 6.8, "service_mean_s": 1.0, "p_wait": 0.45,
         "wait_p50_s": None, "wait_p90_s": 0.8, "wait_p99_s": 2.1, "model": "M/M/8", "utilization": 0.85}
    tail = erlang_tail_curve(d)
    c = erlang_c(8, 6.8)
    assert tail["p"][0] == pytest.approx(c, rel=1e-12)
    t = tail["t_s"][100]
    assert tail["p"][100] == pytest.approx(c * math.exp(-(8 - 6.8) * t), rel=1e-12)
    assert all(a >= b for a, b in zip(tail["p"], tail["p"][1:], strict=False))
    fig = simulate_figure(d, tail)
    (line,) = [ln for ln in fig.axes[0].get_lines() if ln.get_label().startswith("Erlang-C")]
    assert list(line.get_ydata()) == tail["p"]
    _close(fig)


def test_acceptance_axis_labels_cover_every_statistic_the_fit_can_draw():
    from servesim.inputs.telemetry import CURVE_STATISTICS

    assert tuple(plots._STATISTICS) == CURVE_STATISTICS
