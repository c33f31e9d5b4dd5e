"""Matplotlib figures (Agg backend; imported only when a plot is asked for).

Every figure starts with :func:`figure`, which applies the one house style
(:func:`apply_style`: fonts, grid, colours) and lays the panels out with
matplotlib's constrained layout.  Each ``plot_*`` function draws on a given
Axes and puts its legend outside the data (:func:`legend`); :func:`save`
writes a figure atomically (a temporary file in the same folder, then a
rename), as PNG or SVG by the file's suffix, with fixed metadata so that the
same figure gives the same bytes.
"""

from __future__ import annotations

import textwrap
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

from servesim._curves import GoodputCurves, OperatingPoint, SpeedupSurface, UtilizationCurve
from servesim._textfile import save_through_temp

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend
    from matplotlib.typing import ColorType

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from cycler import cycler

__all__ = ["LINESTYLES", "PALETTE", "REFERENCE", "STYLE", "OperatingPoint", "apply_style", "figure", "legend",
           "plot_acceptance", "plot_calibration", "plot_goodput_vs_link", "plot_goodput_vs_rate",
           "plot_roofline_intensity", "plot_roofline_speedup", "plot_speedup_heatmap",
           "plot_ttft_distribution", "plot_utilization", "png_bytes", "save", "wrap"]

SUFFIXES = (".png", ".svg")

PALETTE: tuple[str, ...] = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#7F7F7F",
                            "#000000")
"""Series colours (Okabe-Ito, readable by colour-blind readers), in the order series are drawn."""

REFERENCE = "#222222"
"""Colour of reference lines: SLOs, thresholds, operating points."""

LINESTYLES: tuple[Any, ...] = ("--", ":", "-.", (0, (6, 2, 1, 2, 1, 2)), (0, (1, 1)), (0, (8, 3)))
"""Line styles for several threshold lines on one axes (paired with the series colours)."""

STYLE: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.titleweight": "bold",
    "axes.labelsize": 9.0,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "legend.fontsize": 8.0,
    "legend.framealpha": 0.9,
    "legend.edgecolor": "#BBBBBB",
    "axes.prop_cycle": cycler(color=list(PALETTE)),
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#CCCCCC",
    "grid.linestyle": "-",
    "grid.linewidth": 0.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 4.0,
    "image.cmap": "viridis",
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    "svg.hashsalt": "servesim",  # fixed ids in SVG: same figure, same bytes
}
"""The one style of every servesim figure."""


def apply_style() -> None:
    """Set the house style (:data:`STYLE`) for the figures drawn from now on."""
    params: Any = matplotlib.rcParams  # typed with literal keys; STYLE's are checked by matplotlib
    params.update(STYLE)


def figure(ncols: int = 1, width_in: float = 7.0, height_in: float = 4.2, *, nrows: int = 1,
           width_ratios: Sequence[float] | None = None) -> tuple[Figure, list[Axes]]:
    """A styled figure of ``nrows`` x ``ncols`` panels (each ``width_in`` x ``height_in`` inches, legend
    included), with its axes in reading order (row by row)."""
    apply_style()
    grid = None if width_ratios is None else {"width_ratios": list(width_ratios)}
    fig, axes = plt.subplots(nrows, ncols, figsize=(width_in * ncols, height_in * nrows), squeeze=False,
                             layout="constrained", gridspec_kw=grid)
    return fig, [ax for row in axes for ax in row]


def legend(ax: Axes, *, where: str = "right", ncol: int = 1) -> Legend | None:
    """The axes' legend outside its data: to the right of it (``where="right"``) or under the x label
    (``"below"``).  Constrained layout makes room for it.  None when there is nothing to label."""
    if not ax.get_legend_handles_labels()[0]:
        return None
    if where == "right":
        return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, ncol=ncol)
    from matplotlib.transforms import ScaledTranslation

    # A fixed distance (in inches) under the axes: clear of the tick labels and the x label.
    under = ax.transAxes + ScaledTranslation(0.0, -0.5, ax.figure.dpi_scale_trans)
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=under,
                     borderaxespad=0.0, ncol=ncol)


def save(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` (.png or .svg) atomically, then close it."""
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        plt.close(fig)
        raise ValueError(f"--plot={str(p)!r} is invalid: the file must end in .png or .svg")

    # A fixed date keeps SVG/PNG bytes identical from run to run.
    meta = {"Date": None} if p.suffix.lower() == ".svg" else {"Software": "servesim"}
    try:
        return save_through_temp(p, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", metadata=meta),
                                 "plot")
    finally:
        plt.close(fig)


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG bytes (for embedding), then close it."""
    import io

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": "servesim"})
    finally:
        plt.close(fig)
    return buf.getvalue()


def _mark(ax: Axes, op: OperatingPoint, colors: tuple[ColorType, ColorType]) -> None:
    """A vertical line at the operating point and a marker on each curve."""
    ax.axvline(op.x, color=REFERENCE, ls="--", lw=1.0, label=op.label)
    ax.plot([op.x], [op.colocated], "o", ms=7, color=colors[0], mec=REFERENCE, zorder=5,
            label=f"colocated there: {op.colocated:.2f} req/s")
    ax.plot([op.x], [op.disaggregated], "s", ms=7, color=colors[1], mec=REFERENCE, zorder=5,
            label=f"best split there: {op.disaggregated:.2f} req/s")


def _thresholds(ax: Axes, lines: Sequence[tuple[float, ColorType, str, str]]) -> None:
    """Vertical threshold lines ``(x, colour, name, value)`` told apart three ways: each in its series'
    colour, each in its own line style, and each labelled (legend and a staggered tag beside the line)."""
    from matplotlib.transforms import blended_transform_factory

    where = blended_transform_factory(ax.transData, ax.transAxes)  # x in data, y in axes fraction
    for i, (x, color, name, value) in enumerate(lines):
        ls = LINESTYLES[i % len(LINESTYLES)]
        ax.axvline(x, color=color, ls=ls, lw=1.5, label=f"{name}: off above {value}")
        ax.annotate(f"{name} off > {value}", (x, 0.96 - 0.075 * i), xycoords=where, xytext=(-4, 0),
                    textcoords="offset points", ha="right", va="center", fontsize=7, color=color,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})


def plot_speedup_heatmap(ax: Axes, s: SpeedupSurface) -> None:
    """Speedup over (alpha, k) with the optimal k of each alpha marked, and the S = 1 contour."""
    im = ax.imshow(s.speedup, origin="lower", aspect="auto", cmap="viridis",
                   extent=(s.alphas[0], s.alphas[-1], s.ks[0] - 0.5, s.ks[-1] + 0.5))
    ax.grid(False)
    ax.figure.colorbar(im, ax=ax, label="speedup vs plain decoding")
    ax.contour(s.alphas, s.ks, s.speedup, levels=[1.0], colors="white", linewidths=1.4)
    ax.plot(s.alphas, s.optimal_k, ".-", color=PALETTE[3], label="optimal k of each alpha")
    ax.plot([], [], color="white", lw=1.4, label="S = 1 (white): speculation breaks even")
    ax.set_xlabel("acceptance alpha")
    ax.set_ylabel("draft length k")
    ax.set_title(f"Speedup over (alpha, k), d={s.d:g}, c={s.c:g}, u={s.u:g}")
    lg = legend(ax, where="below")
    if lg is not None:
        lg.get_frame().set_facecolor("#DDDDDD")  # the white contour's key stays visible


def plot_utilization(ax: Axes, curves: Sequence[UtilizationCurve]) -> None:
    """Best-k speedup vs compute utilization, with each preset's turn-off point (colour and style apart)."""
    offs = []
    for c in curves:
        (line,) = ax.plot(c.us, c.speedup, label=c.name)
        if c.turn_off_u > 0:
            offs.append((c.turn_off_u, line.get_color(), c.name, f"u={c.turn_off_u:.3f}"))
    _thresholds(ax, offs)
    ax.axhline(1.0, color=REFERENCE, lw=0.8, label="S = 1 (break-even)")
    ax.set_xlabel("compute utilization u")
    ax.set_ylabel("best-k speedup")
    ax.set_title("When to turn speculation off")
    legend(ax)


def plot_goodput_vs_rate(ax: Axes, g: GoodputCurves, slo_note: str = "",
                         current: OperatingPoint | None = None) -> None:
    """Colocated and best-split goodput vs arrival rate; ``current`` marks the scenario's own rate."""
    (co,) = ax.plot(g.x, g.colocated, label="colocated")
    (de,) = ax.plot(g.x, g.disaggregated, label="best disaggregated split")
    ax.plot(g.x, g.x, color=PALETTE[6], ls=":", lw=1.0, label="offered rate (goodput ceiling)")
    if current is not None:
        _mark(ax, current, (co.get_color(), de.get_color()))
    ax.set_xlabel("arrival rate (req/s)")
    ax.set_ylabel("goodput (req/s meeting both SLOs)")
    ax.set_title("Goodput vs arrival rate" + (f"\n{slo_note}" if slo_note else ""))
    legend(ax)


def plot_goodput_vs_link(ax: Axes, g: GoodputCurves, crossover_GBps: float | None,
                         current: OperatingPoint | None = None) -> None:
    """Colocated and best-split goodput vs link bandwidth, the crossover, and ``current`` (the link used)."""
    (co,) = ax.semilogx(g.x, g.colocated, label="colocated")
    (de,) = ax.semilogx(g.x, g.disaggregated, label="best disaggregated split")
    if crossover_GBps is not None:
        ax.axvline(crossover_GBps, color=PALETTE[4], ls="-.", lw=1.4,
                   label=f"crossover {crossover_GBps:.3g} GB/s: split wins above")
    if current is not None:
        _mark(ax, current, (co.get_color(), de.get_color()))
    ax.set_xlabel("link bandwidth (GB/s)")
    ax.set_ylabel("goodput (req/s)")
    ax.set_title("Goodput vs prefill-to-decode link")
    legend(ax)


def plot_ttft_distribution(ax: Axes, samples_s: Mapping[str, Sequence[float]], slo_ttft_s: float) -> None:
    """Empirical CDF of TTFT per deployment (a step), the SLO as a vertical line, and each deployment's
    attainment (the fraction of requests within the SLO) marked where its CDF crosses the SLO."""
    import numpy as np

    slo_ms = slo_ttft_s * 1e3
    hi = 1.25 * slo_ms
    for i, (name, xs) in enumerate(samples_s.items()):
        ms = np.sort(np.asarray(xs, dtype=float) * 1e3)
        n = len(ms)
        if n == 0:
            continue
        values, counts = np.unique(ms, return_counts=True)
        cdf = np.cumsum(counts) / n
        attained = bisect_right(ms.tolist(), slo_ms) / n
        # From 0 at the first value up the steps: x = each distinct TTFT, y = fraction <= x.
        (line,) = ax.step([0.0, *values.tolist()], [0.0, *cdf.tolist()], where="post",
                          label=f"{name}: {attained:.1%} within the SLO")
        ax.hlines(attained, 0.0, slo_ms, color=line.get_color(), ls=":", lw=1.0)
        ax.plot([slo_ms], [attained], "o", ms=7, color=line.get_color(), mec=REFERENCE, zorder=5)
        ax.annotate(f"{name}: {attained:.1%}", (slo_ms, attained), xytext=(8, -12 - 12 * i),
                    textcoords="offset points", color=line.get_color(), fontsize=8)
        hi = max(hi, 1.05 * float(np.quantile(ms, 0.995)))
    ax.axvline(slo_ms, color=REFERENCE, ls="--", lw=1.2, label=f"TTFT SLO {slo_ms:g} ms")
    ax.set_xlim(0.0, hi)
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel("TTFT t (ms)")
    ax.set_ylabel("fraction of requests with TTFT <= t")
    ax.set_title("Simulated TTFT, cumulative distribution")
    legend(ax, where="below")


def plot_roofline_speedup(ax: Axes, rows: Sequence[dict[str, Any]],
                          presets: Sequence[dict[str, Any]]) -> None:
    """Best-k speedup of each preset vs decode batch, with each preset's turn-off batch (its own colour,
    line style and legend entry)."""
    batches = [r["batch"] for r in rows]
    offs = []
    for p in presets:
        name = p["name"]
        (line,) = ax.semilogx(batches, [r["speedup"][name] for r in rows], marker=".", label=name)
        if p.get("turn_off_batch") is not None:
            offs.append((p["turn_off_batch"], line.get_color(), name, f"B={p['turn_off_batch']:g}"))
    _thresholds(ax, offs)
    ax.axhline(1.0, color=REFERENCE, lw=0.8, label="S = 1 (break-even)")
    ax.set_xlabel("decode batch B")
    ax.set_ylabel("best-k speedup")
    ax.set_title("Speculation vs batch, with each preset's turn-off batch")
    legend(ax)


def plot_roofline_intensity(ax: Axes, rows: Sequence[dict[str, Any]], ridge: float, k: int) -> None:
    """Arithmetic intensity of the weight GEMMs, plain and speculative, against the ridge point."""
    batches = [r["batch"] for r in rows]
    ax.loglog(batches, [r["weights_intensity_flops_per_byte"] for r in rows], marker=".", label="plain: B")
    ax.loglog(batches, [r["spec_weights_intensity_flops_per_byte"] for r in rows], marker=".",
              label=f"speculative: B (k+1), k={k}")
    ax.axhline(ridge, color=REFERENCE, ls="--", lw=1.2, label=f"ridge {ridge:.0f} FLOP/B")
    ax.set_xlabel("decode batch B")
    ax.set_ylabel("FLOP per byte of weights")
    ax.set_title("Arithmetic intensity vs the ridge point")
    legend(ax)


_STATISTICS = {  # fit-alpha's measured figure (servesim.inputs.telemetry.CURVE_STATISTICS), as an axis label
    "mean_accepted_with_bonus": "mean accepted length per cycle, bonus token included",
    "vllm_acceptance_rate": "vLLM acceptance rate (accepted / drafted tokens)",
    "sglang_accept_rate": "SGLang accept rate (accepted length / (k + 1))",
}


def plot_acceptance(ax: Axes, fit: dict[str, Any], curve: Mapping[str, Any] | None = None) -> None:
    """Per-position acceptance when it was measured: P(A >= i) against the fitted i.i.d. alpha^i.
    Otherwise (a single ``--value``, or counters without positions) the figure alpha was fitted to,
    against alpha, with the measured point marked where it fixes alpha: ``curve`` is that figure
    over alpha (``statistic``, ``alpha``, ``value``), computed by
    :func:`servesim.inputs.telemetry.acceptance_curve`."""
    obs = fit["observed"].get("marginal")
    key = None if obs or curve is None else str(curve["statistic"])
    if key is None or curve is None:
        iid = fit["iid"]["marginal"]
        pos = list(range(1, len(iid) + 1))
        ax.plot(pos, iid, "o-", label=f"i.i.d. alpha^i, alpha = {fit['alpha']:.3f}")
        if obs:
            ax.bar(pos, obs, alpha=0.4, color=PALETTE[1], label="measured P(A >= i)")
        ax.set_xlabel("draft position i")
        ax.set_ylabel("probability position i is accepted")
        ax.set_ylim(0, 1)
        ax.set_title(f"Acceptance by position ({fit['engine']}, {fit['input_definition']})")
        legend(ax)
        return
    k, alpha, measured = int(fit["k"]), float(fit["alpha"]), float(fit["observed"][key])
    values = list(curve["value"])
    ax.plot(curve["alpha"], values, label=f"i.i.d. acceptance, k = {k}")
    if fit.get("alpha_lo") is not None and fit.get("alpha_hi") is not None:
        ax.axvspan(fit["alpha_lo"], fit["alpha_hi"], color=PALETTE[0], alpha=0.15,
                   label=f"95% interval {fit['alpha_lo']:.3f} - {fit['alpha_hi']:.3f}")
    ax.hlines(measured, 0.0, alpha, color=REFERENCE, ls=":", lw=1.0)
    ax.vlines(alpha, min(values), measured, color=REFERENCE, ls=":", lw=1.0)
    ax.plot([alpha], [measured], "*", ms=14, color=PALETTE[3], mec=REFERENCE, zorder=5,
            label=f"measured {measured:.4g} -> alpha = {alpha:.3f}")
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("acceptance alpha")
    ax.set_ylabel(_STATISTICS[key])
    ax.set_title(f"alpha from the measured {fit['input_definition']} ({fit['engine']})")
    legend(ax)


def plot_calibration(axes: Sequence[Axes], points: Sequence[dict[str, Any]]) -> None:
    """Measured vs fitted TTFT and TPOT at each measured arrival rate."""
    rates = [p["rate_per_s"] for p in points]
    for ax, key, label in ((axes[0], "ttft", "TTFT"), (axes[1], "tpot", "TPOT")):
        ax.plot(rates, [p[f"{key}_s"] * 1e3 for p in points], "o", ms=6, zorder=4, label="measured")
        ax.plot(rates, [p[f"{key}_model_s"] * 1e3 for p in points], "x-", label="fitted closed form")
        ax.set_xlabel("arrival rate (req/s)")
        ax.set_ylabel(f"mean {label} (ms)")
        ax.set_title(f"{label}: measured vs fitted")
        legend(ax)


def wrap(text: str, width: int) -> str:
    """``text`` on lines of at most ``width`` characters, every word kept (for long tick labels)."""
    return "\n".join(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)) or text
