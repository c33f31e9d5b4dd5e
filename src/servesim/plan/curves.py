"""The curves behind the plots: sweeps of the closed forms, as plain lists.

Standard library only; plotting lives in :mod:`servesim.render.plots`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from servesim._curves import GoodputCurves, SpeedupSurface, UtilizationCurve
from servesim.model import speculative as sd
from servesim.model.kvcache import Link
from servesim.model.serving import NodeSpec, Workload, best_split, colocated

__all__ = [
    "GoodputCurves",
    "SpeedupSurface",
    "UtilizationCurve",
    "geometric_range",
    "goodput_vs_link",
    "goodput_vs_rate",
    "speedup_surface",
    "utilization_curve",
]


def geometric_range(lo: float, hi: float, n: int) -> list[float]:
    """n points from lo to hi, evenly spaced in log."""
    return [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]


def speedup_surface(d: float, c: float, u: float = 0.0, alphas: Sequence[float] | None = None,
                    ks: Sequence[int] = tuple(range(1, 13))) -> SpeedupSurface:
    """S(k, alpha) on a grid, with the optimal k of each alpha column."""
    al = list(alphas) if alphas is not None else [0.30 + 0.02 * i for i in range(35)]
    kl = list(ks)
    grid = [[sd.speedup(k, a, d, c, u) for a in al] for k in kl]
    best = [sd.optimal_k(a, d, c, u, k_max=max(kl)) for a in al]
    return SpeedupSurface(al, kl, grid, best, d, c, u)


def utilization_curve(p: sd.SpecDecPreset, n: int = 100) -> UtilizationCurve:
    """Best-k speedup of a preset as the compute utilization u rises from 0 to 0.99."""
    us = [0.99 * i / (n - 1) for i in range(n)]
    ks = [sd.optimal_k(p.alpha, p.d, p.c, u) for u in us]
    ss = [sd.speedup(k, p.alpha, p.d, p.c, u) for k, u in zip(ks, us, strict=True)]
    return UtilizationCurve(p.name, us, ks, ss, sd.turn_off_utilization(p.alpha, p.d, p.c))


def goodput_vs_rate(wl: Workload, node: NodeSpec, nodes: int, beta: float, link: Link,
                    rates: Sequence[float]) -> GoodputCurves:
    """Colocated and best-split goodput as the arrival rate varies."""
    co, de, sp = [], [], []
    for r in rates:
        w = replace(wl, rate_per_s=r)
        co.append(colocated(w, node, nodes, beta).goodput_rps)
        b = best_split(w, node, nodes, link)
        de.append(b.goodput_rps)
        sp.append(b.split)
    return GoodputCurves(list(rates), co, de, sp)


def goodput_vs_link(wl: Workload, node: NodeSpec, nodes: int, beta: float,
                    gbps: Sequence[float]) -> GoodputCurves:
    """Colocated (flat) and best-split goodput as the link bandwidth varies."""
    co = colocated(wl, node, nodes, beta).goodput_rps
    de, sp = [], []
    for g in gbps:
        b = best_split(wl, node, nodes, Link(f"{g:g} GB/s", g * 1e9))
        de.append(b.goodput_rps)
        sp.append(b.split)
    return GoodputCurves(list(gbps), [co] * len(gbps), de, sp)
