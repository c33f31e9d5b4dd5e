"""Figures of ``simulate`` and ``validate``, drawn from their result dicts (matplotlib)."""

from __future__ import annotations

import math
from typing import Any

from servesim.queueing import MMc

__all__ = ["simulate_figure", "validate_figure"]


def _queue(ax: Any, d: dict[str, Any]) -> None:
    """P(W_q > t): the M/M/c tail against the simulated p_wait and percentiles."""
    c, lam = d["servers"], d["rate_per_s"]
    q = MMc(c, lam, 1.0 / d["service_mean_s"])
    top = max(d["wait_p99_s"] or 0.0, q.wait_quantile_s(0.995) if q.stable else 1.0) * 1.2 or 1.0
    ts = [top * i / 200 for i in range(201)]
    ax.semilogy(ts, [max(q.wait_tail(t), 1e-6) for t in ts], label="Erlang-C tail C exp(-(c mu - lambda) t)")
    pts = [(0.0, d["p_wait"]), (d["wait_p50_s"], 0.5), (d["wait_p90_s"], 0.1), (d["wait_p99_s"], 0.01)]
    pts = [(t, p) for t, p in pts if t is not None and p <= d["p_wait"] + 1e-12]
    ax.semilogy([t for t, _ in pts], [p for _, p in pts], "o", label="simulated P(wait), p50, p90, p99")
    ax.set_xlabel("wait t (s)")
    ax.set_ylabel("P(W_q > t)")
    ax.set_title(f"{d['model']} at utilization {d['utilization']:.2f}")
    ax.legend(fontsize=8)


def _serving(ax: Any, d: dict[str, Any]) -> None:
    """TTFT mean and p99, closed form vs simulation, per architecture."""
    labels, cf, sim = [], [], []
    for arch in ("colocated", "disaggregated"):
        c, s = d[arch]["closed_form"], d[arch]["simulated"]
        for stat, ckey in (("mean", "ttft_mean_ms"), ("p99", "ttft_p99_ms")):
            labels.append(f"{arch[:5]}. {c['split']}\n{stat}")
            cf.append(c[ckey] or math.nan)
            sim.append(s["ttft_ms"][stat] or math.nan)
    x = range(len(labels))
    ax.bar([i - 0.2 for i in x], cf, 0.4, label="closed form (M/M/c)")
    ax.bar([i + 0.2 for i in x], sim, 0.4, label="simulated")
    ax.axhline(d["workload"]["slo_ttft_ms"], color="red", ls="--", lw=1, label="TTFT SLO")
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_ylabel("TTFT (ms)")
    ax.set_title(f"TTFT, {d['preset']}: closed form vs simulation")
    ax.legend(fontsize=8)


def _trace(ax: Any, d: dict[str, Any]) -> None:
    """Goodput per deployment: closed form from the trace's means vs the replay."""
    labels = [r["deployment"].replace("colocated ", "co ") for r in d["rows"]]
    x = range(len(labels))
    ax.bar([i - 0.2 for i in x], [r["closed_form"]["goodput_rps"] for r in d["rows"]], 0.4,
           label="closed form (trace means)")
    ax.bar([i + 0.2 for i in x], [r["replay"]["goodput_rps"] for r in d["rows"]], 0.4, label="replay")
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_ylabel("goodput (req/s)")
    ax.set_title("Trace replay vs closed form")
    ax.legend(fontsize=8)


def simulate_figure(d: dict[str, Any]) -> Any:
    from servesim.render import plots

    fig, axes = plots.figure(1)
    {"queue": _queue, "serving": _serving, "trace": _trace}[d["mode"]](axes[0], d)
    return fig


def validate_figure(d: dict[str, Any]) -> Any:
    """Agreement as z-scores (|z| <= 4 passes for exact rows) and each assumption's relative bias."""
    from servesim.render import plots

    fig, axes = plots.figure(2, width_in=7.5, height_in=5.5)
    ag = d["agreement"]
    ax = axes[0]
    for relative, marker, label in ((False, "o", "exact closed form: passes within 4 SE"),
                                    (True, "s", "approximation: passes within its relative tolerance")):
        pts = [(i, r["z"]) for i, r in enumerate(ag)
               if r.get("z") is not None and ("relative" in r["tolerance"]) == relative]
        ax.plot([i for i, _ in pts], [z for _, z in pts], marker, ms=4, ls="none", label=label)
    failed = [(i, r["z"]) for i, r in enumerate(ag) if not r["pass"] and r.get("z") is not None]
    if failed:
        ax.plot([i for i, _ in failed], [z for _, z in failed], "x", color="red", ms=8, label="FAIL")
    for y in (-4, 4):
        ax.axhline(y, color="red", ls="--", lw=1)
    ax.legend(fontsize=7)
    ax.set_xlabel("agreement row")
    ax.set_ylabel("(simulated - closed form) / SE")
    ax.set_title(f"Agreement: {d['agreement_passed']} PASS, {d['agreement_failed']} FAIL")
    bias = d["bias"]
    ax = axes[1]
    vals = [100 * r["relative_change"] if r.get("relative_change") is not None else 0.0 for r in bias]
    ax.barh(range(len(vals)), vals)
    ax.set_yticks(range(len(vals)), [f"{r['assumption'][:22]}: {r['figure']}" for r in bias], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("change when the assumption is relaxed (%)")
    ax.set_title("Bias of each section-7 assumption")
    fig.tight_layout()
    return fig
