"""Figures of ``simulate`` and ``validate``, drawn from their result dicts, and a trace's (matplotlib).

Drawing only: a theory curve beside a simulation (the Erlang-C wait tail) is computed by the
caller (:func:`servesim.sim.report.erlang_tail_curve`) and passed in.

The house style, legends outside the data and full labels come from :mod:`servesim.render.plots`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from servesim._checks import check_real
from servesim._textfile import save_through_temp
from servesim._trace import TraceRecord
from servesim.render import plots

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.container import BarContainer

__all__ = ["bias_labels", "plot_trace", "simulate_figure", "validate_figure"]


def _queue(ax: Axes, d: dict[str, Any], tail: Mapping[str, Sequence[float]] | None) -> None:
    """P(W_q > t): the M/M/c tail (``tail``: ``t_s``, ``p``) against the simulated p_wait and percentiles."""
    if tail is not None:
        ax.semilogy(tail["t_s"], tail["p"], label="Erlang-C tail C exp(-(c mu - lambda) t)")
    pts = [(0.0, d["p_wait"]), (d["wait_p50_s"], 0.5), (d["wait_p90_s"], 0.1), (d["wait_p99_s"], 0.01)]
    pts = [(t, p) for t, p in pts if t is not None and p <= d["p_wait"] + 1e-12]
    ax.semilogy([t for t, _ in pts], [p for _, p in pts], "o", ms=6, label="simulated P(wait), p50, p90, p99")
    ax.set_xlabel("wait t (s)")
    ax.set_ylabel("P(W_q > t)")
    ax.set_title(f"{d['model']} at utilization {d['utilization']:.2f}")
    plots.legend(ax)


def _bar_values(ax: Axes, bars: BarContainer, values: list[float]) -> None:
    """Each bar's value written on it (a zero-height bar still says 0)."""
    ax.bar_label(bars, labels=["-" if math.isnan(v) else f"{v:.3g}" for v in values], fontsize=7, padding=2)


def _paired_bars(ax: Axes, labels: list[str], left: list[float], left_label: str, right: list[float],
                 right_label: str) -> None:
    """Two bars per label, each with its value, the labels under them."""
    x = range(len(labels))
    _bar_values(ax, ax.bar([i - 0.2 for i in x], left, 0.4, label=left_label), left)
    _bar_values(ax, ax.bar([i + 0.2 for i in x], right, 0.4, label=right_label), right)
    ax.set_xticks(list(x), labels)
    ax.grid(False, axis="x")


def _serving(ax: Axes, d: dict[str, Any]) -> None:
    """TTFT mean and p99, closed form vs simulation, per architecture."""
    labels, cf, sim = [], [], []
    for arch in ("colocated", "disaggregated"):
        c, s = d[arch]["closed_form"], d[arch]["simulated"]
        for stat, ckey in (("mean", "ttft_mean_ms"), ("p99", "ttft_p99_ms")):
            labels.append(f"{arch} {c['split']}\n{stat}")
            cf.append(c[ckey] or math.nan)
            sim.append(s["ttft_ms"][stat] or math.nan)
    _paired_bars(ax, labels, cf, "closed form (M/M/c)", sim, "simulated")
    ax.axhline(d["workload"]["slo_ttft_ms"], color=plots.REFERENCE, ls="--", lw=1.2,
               label=f"TTFT SLO {d['workload']['slo_ttft_ms']:g} ms")
    ax.set_ylabel("TTFT (ms)")
    ax.set_title(f"TTFT, {d['preset']}: closed form vs simulation")
    plots.legend(ax)


def _trace(ax: Axes, d: dict[str, Any]) -> None:
    """Goodput per deployment: closed form from the trace's means vs the replay."""
    labels = [plots.wrap(r["deployment"] + ("" if r["closed_form"]["stable"] else " (closed form unstable)"),
                         22) for r in d["rows"]]
    cf = [float(r["closed_form"]["goodput_rps"]) for r in d["rows"]]
    rp = [float(r["replay"]["goodput_rps"]) for r in d["rows"]]
    _paired_bars(ax, labels, cf, "closed form (trace means)", rp, "replay")
    ax.set_ylabel("goodput (req/s)")
    ax.set_title("Trace replay vs closed form")
    plots.legend(ax)


def simulate_figure(d: dict[str, Any], tail: Mapping[str, Sequence[float]] | None = None) -> Figure:
    """The figure of a ``simulate`` result; ``tail`` is the theory curve of a queue run."""
    fig, axes = plots.figure(1, width_in=8.0)
    if d["mode"] == "queue":
        _queue(axes[0], d, tail)
    else:
        {"serving": _serving, "trace": _trace}.get(d["mode"], _engine)(axes[0], d)
    return fig


def _engine(ax: Axes, d: dict[str, Any]) -> None:
    """The engine loop (agg or disagg) beside the closed form at the same rate: mean TTFT and TPOT."""
    cf = d.get("closed_form") or {}
    names = ["mean TTFT (ms)", "p99 TTFT (ms)", "mean TPOT (ms)"]
    keys = ["mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms"]
    sim = [float(d.get(k) or 0.0) for k in keys]
    closed = [float(cf.get(k) or 0.0) for k in keys]
    _paired_bars(ax, names, sim, "engine loop", closed, "closed form at load")
    ax.set_yscale("log")
    ax.set_ylabel("ms")
    rate = next((d[k] for k in ("rate_per_s", "rate", "request_rate") if isinstance(d.get(k), (int, float))),
                None)
    ax.set_title(f"Engine loop vs closed form ({d['mode']}" + (f", {rate:g} req/s)" if rate else ")"))
    plots.legend(ax)


def bias_labels(bias: list[dict[str, Any]]) -> tuple[list[str], list[tuple[float, str]]]:
    """The bias chart's labels, in full: one ``assumption: figure`` per bar; and per run of bars with the
    same assumption, relaxation and case, its middle row and the relaxation (with the case where one
    assumption is relaxed the same way in several cases), wrapped."""
    cases: dict[tuple[str, str], set[str]] = {}
    for r in bias:
        cases.setdefault((r["assumption"], r["relaxation"]), set()).add(r["case"])
    left = [f"{r['assumption']}: {r['figure']}" for r in bias]
    groups: list[list[int]] = []
    for i, r in enumerate(bias):
        prev = bias[i - 1] if i else None
        if prev is None or any(prev[k] != r[k] for k in ("assumption", "relaxation", "case")):
            groups.append([])
        groups[-1].append(i)
    right = []
    for g in groups:
        r = bias[g[0]]
        several = len(cases[(r["assumption"], r["relaxation"])]) > 1
        right.append(((g[0] + g[-1]) / 2, plots.wrap(r["relaxation"] + (f" ({r['case']})" if several else ""),
                                                     60)))
    return left, right


def validate_figure(d: dict[str, Any]) -> Figure:
    """Agreement as z-scores (|z| <= 4 passes for exact rows) and each assumption's relative bias."""
    bias = d["bias"]
    fig, axes = plots.figure(2, width_in=8.0, height_in=max(5.5, 1.8 + 0.3 * len(bias)),
                             width_ratios=(1.0, 1.6))
    ag = d["agreement"]
    ax = axes[0]
    for relative, marker, label in ((False, "o", "exact closed form: passes within 4 SE"),
                                    (True, "s", "approximation: passes within its relative tolerance")):
        pts = [(i, r["z"]) for i, r in enumerate(ag)
               if r.get("z") is not None and ("relative" in r["tolerance"]) == relative]
        ax.plot([i for i, _ in pts], [z for _, z in pts], marker, ms=4, ls="none", label=label)
    failed = [(i, r["z"]) for i, r in enumerate(ag) if not r["pass"] and r.get("z") is not None]
    if failed:
        ax.plot([i for i, _ in failed], [z for _, z in failed], "x", color=plots.PALETTE[3], ms=9, mew=2,
                label="FAIL")
    for y in (-4, 4):
        ax.axhline(y, color=plots.REFERENCE, ls="--", lw=1, label="|z| = 4" if y > 0 else None)
    ax.set_xlabel("agreement row")
    ax.set_ylabel("(simulated - closed form) / SE")
    ax.set_title(f"Agreement: {d['agreement_passed']} PASS, {d['agreement_failed']} FAIL")
    plots.legend(ax, where="below")
    ax = axes[1]
    vals = [100 * r["relative_change"] if r.get("relative_change") is not None else 0.0 for r in bias]
    left, right = bias_labels(bias)
    groups = [(r["assumption"], r["relaxation"], r["case"]) for r in bias]
    colors = []
    shade = 0
    for i, g in enumerate(groups):  # one colour per assumption, bands per relaxation
        if i and g[0] != groups[i - 1][0]:
            shade += 1
        colors.append(plots.PALETTE[shade % 6])
        if i and g != groups[i - 1]:
            ax.axhline(i - 0.5, color="#999999", lw=0.6)
    ax.barh(range(len(vals)), vals, color=colors)
    ax.set_yticks(range(len(vals)), left, fontsize=7)
    ax.grid(False, axis="y")
    ax.axvline(0.0, color=plots.REFERENCE, lw=0.8)
    ax.set_ylim(len(vals) - 0.5, -0.5)
    twin = ax.twinx()
    twin.set_ylim(ax.get_ylim())
    twin.set_yticks([y for y, _ in right], [text for _, text in right], fontsize=6.5, color="#444444")
    twin.grid(False)
    twin.tick_params(length=0)
    ax.set_xlabel("change when the assumption is relaxed (%)")
    ax.set_title("Bias of each 'model vs reality' assumption (right: how it is relaxed)")
    return fig


def plot_trace(trace: TraceRecord, out_path: str | Path, window_s: float = 60.0) -> Path:
    """Write a PNG: arrival rate per window over time, and prompt/output length histograms.

    Drawn on the non-interactive Agg canvas (no display); moved here from
    ``servesim.inputs.traces``, which reads the trace and draws nothing.  Returns the path written.
    """
    w = check_real("window_s", window_s, lo=0.0, lo_open=True)
    t = trace.arrival_s
    # Whole windows only, as in summarize_trace (a trailing partial window would
    # show a spurious drop); a trace shorter than one window is one bar.
    nbins = max(1, math.floor(float(t[-1]) / w))
    counts = np.bincount(np.minimum((t / w).astype(np.int64), nbins), minlength=nbins + 1)[:nbins]
    fig = Figure(figsize=(11, 3.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax_rate, ax_p, ax_o = fig.subplots(1, 3)
    ax_rate.step(np.arange(nbins) * w / 60.0, counts / w, where="post")
    ax_rate.set_xlabel("time since first request (min)")
    ax_rate.set_ylabel(f"arrivals/s ({w:g} s windows)")
    ax_rate.set_title(f"{Path(trace.path).name}: {trace.requests} requests")
    for ax, data, label in (
        (ax_p, trace.prompt_tokens, "prompt tokens"),
        (ax_o, trace.output_tokens, "output tokens"),
    ):
        positive = data[data > 0]
        low = positive.min() if len(positive) else 0
        if ax is ax_p and trace.has_prefix_info and (trace.cached_prompt_tokens > 0).any():
            low = min(low, trace.cached_prompt_tokens[trace.cached_prompt_tokens > 0].min())
        if len(positive) and positive.max() > low:
            edges = np.geomspace(low, positive.max() + 1, 40)
            ax.hist(positive, bins=edges, label="all")
            ax.set_xscale("log")
            if ax is ax_p and trace.has_prefix_info:
                cached = trace.cached_prompt_tokens
                ax.hist(cached[cached > 0], bins=edges, alpha=0.6, label="cached prefix")
                ax.legend()
        else:
            ax.hist(data, bins=10)
        ax.set_xlabel(label)
        ax.set_ylabel("requests")
    try:  # atomically: a failed write leaves the old file as it was
        return save_through_temp(out_path, lambda tmp: fig.savefig(tmp, dpi=110), "plot")
    finally:
        plt.close(fig)
