"""Matplotlib figures (Agg backend; imported only when a plot is asked for).

Each ``plot_*`` function draws on a given Axes; :func:`save` writes a figure
atomically (a temporary file in the same folder, then a rename), as PNG or SVG
by the file's suffix.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from servesim.curves import GoodputCurves, SpeedupSurface, UtilizationCurve

__all__ = [
    "figure",
    "plot_acceptance",
    "plot_calibration",
    "plot_goodput_vs_link",
    "plot_goodput_vs_rate",
    "plot_roofline_intensity",
    "plot_roofline_speedup",
    "plot_speedup_heatmap",
    "plot_ttft_distribution",
    "plot_utilization",
    "png_bytes",
    "save",
]

SUFFIXES = (".png", ".svg")


def figure(ncols: int = 1, width_in: float = 6.4, height_in: float = 4.2) -> tuple[Any, Any]:
    fig, axes = plt.subplots(1, ncols, figsize=(width_in * ncols, height_in), squeeze=False)
    return fig, list(axes[0])


def save(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` (.png or .svg) atomically, then close it."""
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        plt.close(fig)
        raise ValueError(f"--plot={str(p)!r} is invalid: the file must end in .png or .svg")
    fd, tmp = tempfile.mkstemp(dir=p.parent if str(p.parent) else ".", prefix=f".{p.name}.", suffix=p.suffix)
    os.close(fd)
    try:
        # A fixed date keeps SVG/PNG bytes identical from run to run.
        meta = {"Date": None} if p.suffix.lower() == ".svg" else {"Software": "servesim"}
        fig.savefig(tmp, dpi=110, bbox_inches="tight", metadata=meta)
        from servesim.render.output import file_mode

        os.chmod(tmp, file_mode())  # mkstemp makes 0600; a plot gets the user's usual mode
        os.replace(tmp, p)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)
    return p


def plot_speedup_heatmap(ax: Any, s: SpeedupSurface) -> None:
    """Speedup over (alpha, k) with the optimal k of each alpha marked, and the S = 1 contour."""
    im = ax.imshow(
        s.speedup, origin="lower", aspect="auto", cmap="viridis",
        extent=(s.alphas[0], s.alphas[-1], s.ks[0] - 0.5, s.ks[-1] + 0.5),
    )
    ax.figure.colorbar(im, ax=ax, label="speedup vs plain decoding")
    ax.contour(s.alphas, s.ks, s.speedup, levels=[1.0], colors="white", linewidths=1.2)
    ax.plot(s.alphas, s.optimal_k, "r.-", label="optimal k")
    ax.set_xlabel("acceptance alpha")
    ax.set_ylabel("draft length k")
    ax.set_title(f"Speedup (d={s.d:g}, c={s.c:g}, u={s.u:g}); white: S = 1")
    ax.legend(loc="upper left")


def plot_utilization(ax: Any, curves: Sequence[UtilizationCurve]) -> None:
    """Best-k speedup vs compute utilization, with each preset's turn-off point."""
    for c in curves:
        (line,) = ax.plot(c.us, c.speedup, label=f"{c.name} (off above u={c.turn_off_u:.3f})")
        if c.turn_off_u > 0:
            ax.axvline(c.turn_off_u, color=line.get_color(), ls=":", lw=1)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xlabel("compute utilization u")
    ax.set_ylabel("best-k speedup")
    ax.set_title("When to turn speculation off")
    ax.legend(fontsize=8)


def plot_goodput_vs_rate(ax: Any, g: GoodputCurves, slo_note: str = "") -> None:
    ax.plot(g.x, g.colocated, label="colocated")
    ax.plot(g.x, g.disaggregated, label="best disaggregated split")
    ax.plot(g.x, g.x, color="grey", ls=":", lw=0.8, label="offered rate")
    ax.set_xlabel("arrival rate (req/s)")
    ax.set_ylabel("goodput (req/s meeting both SLOs)")
    ax.set_title("Goodput vs arrival rate" + (f" ({slo_note})" if slo_note else ""))
    ax.legend(fontsize=8)


def plot_goodput_vs_link(ax: Any, g: GoodputCurves, crossover_GBps: float | None) -> None:
    ax.semilogx(g.x, g.colocated, label="colocated")
    ax.semilogx(g.x, g.disaggregated, label="best disaggregated split")
    if crossover_GBps is not None:
        ax.axvline(crossover_GBps, color="red", ls="--", lw=1,
                   label=f"crossover {crossover_GBps:.2f} GB/s")
    ax.set_xlabel("link bandwidth (GB/s)")
    ax.set_ylabel("goodput (req/s)")
    ax.set_title("Goodput vs prefill-to-decode link")
    ax.legend(fontsize=8)


def plot_ttft_distribution(ax: Any, samples_s: Mapping[str, Sequence[float]], slo_ttft_s: float) -> None:
    """Histogram of simulated TTFT per deployment, with the SLO."""
    for name, xs in samples_s.items():
        ax.hist([x * 1e3 for x in xs], bins=60, histtype="step", label=name)
    ax.axvline(slo_ttft_s * 1e3, color="red", ls="--", lw=1, label="TTFT SLO")
    ax.set_xlabel("TTFT (ms)")
    ax.set_ylabel("requests")
    ax.set_title("Simulated TTFT distribution")
    ax.legend(fontsize=8)


def png_bytes(fig: Any) -> bytes:
    """The figure as PNG bytes (for embedding), then close it."""
    import io

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": "servesim"})
    finally:
        plt.close(fig)
    return buf.getvalue()


def plot_roofline_speedup(ax: Any, rows: Sequence[dict[str, Any]], presets: Sequence[dict[str, Any]]) -> None:
    """Best-k speedup of each preset vs decode batch, with each preset's turn-off batch."""
    batches = [r["batch"] for r in rows]
    for p in presets:
        name = p["name"]
        (line,) = ax.semilogx(batches, [r["speedup"][name] for r in rows], marker=".", label=name)
        if p.get("turn_off_batch") is not None:
            ax.axvline(p["turn_off_batch"], color=line.get_color(), ls=":", lw=1)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xlabel("decode batch B")
    ax.set_ylabel("best-k speedup")
    ax.set_title("Speculation vs batch (dotted: turn it off above)")
    ax.legend(fontsize=8)


def plot_roofline_intensity(ax: Any, rows: Sequence[dict[str, Any]], ridge: float, k: int) -> None:
    """Arithmetic intensity of the weight GEMMs, plain and speculative, against the ridge point."""
    batches = [r["batch"] for r in rows]
    ax.loglog(batches, [r["weights_intensity_flops_per_byte"] for r in rows], marker=".", label="plain: B")
    ax.loglog(batches, [r["spec_weights_intensity_flops_per_byte"] for r in rows], marker=".",
              label=f"speculative: B (k+1), k={k}")
    ax.axhline(ridge, color="red", ls="--", lw=1, label=f"ridge {ridge:.0f} FLOP/B")
    ax.set_xlabel("decode batch B")
    ax.set_ylabel("FLOP per byte of weights")
    ax.set_title("Arithmetic intensity vs the ridge point")
    ax.legend(fontsize=8)


def plot_acceptance(ax: Any, fit: dict[str, Any]) -> None:
    """Per-position acceptance: measured P(A >= i) against the fitted i.i.d. alpha^i."""
    iid = fit["iid"]["marginal"]
    pos = list(range(1, len(iid) + 1))
    ax.plot(pos, iid, "o-", label=f"i.i.d. alpha^i, alpha = {fit['alpha']:.3f}")
    obs = fit["observed"].get("marginal")
    if obs:
        ax.bar(pos, obs, alpha=0.4, label="measured P(A >= i)")
    ax.set_xlabel("draft position i")
    ax.set_ylabel("probability position i is accepted")
    ax.set_ylim(0, 1)
    ax.set_title(f"Acceptance by position ({fit['engine']}, {fit['input_definition']})")
    ax.legend(fontsize=8)


def plot_calibration(axes: Sequence[Any], points: Sequence[dict[str, Any]]) -> None:
    """Measured vs fitted TTFT and TPOT at each measured arrival rate."""
    rates = [p["rate_per_s"] for p in points]
    for ax, key, label in ((axes[0], "ttft", "TTFT"), (axes[1], "tpot", "TPOT")):
        ax.plot(rates, [p[f"{key}_s"] * 1e3 for p in points], "o", label="measured")
        ax.plot(rates, [p[f"{key}_model_s"] * 1e3 for p in points], "x-", label="fitted closed form")
        ax.set_xlabel("arrival rate (req/s)")
        ax.set_ylabel(f"mean {label} (ms)")
        ax.set_title(f"{label}: measured vs fitted")
        ax.legend(fontsize=8)
