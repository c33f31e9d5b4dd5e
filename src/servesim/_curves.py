"""What every figure shows, as plain frozen records: :mod:`servesim.plan.curves` and
:mod:`servesim.plan.figures` compute them, :mod:`servesim.render.plots` and
:mod:`servesim.render.figures` draw them.  Defined once here, in the base both floors may import, so
that the drawing reads the same fields the planning writes (render imports no model)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DisaggCurves", "GoodputCurves", "OperatingPoint", "PlanCurves", "SpecdecCurves", "SpeedupSurface",
           "UtilizationCurve"]


@dataclass(frozen=True)
class SpeedupSurface:
    """Speedup on an (alpha, k) grid, ``speedup[k index][alpha index]``, and the best k per alpha."""

    alphas: list[float]
    ks: list[int]
    speedup: list[list[float]]  # [k index][alpha index]
    optimal_k: list[int]  # per alpha
    d: float
    c: float
    u: float


@dataclass(frozen=True)
class UtilizationCurve:
    """A preset's best-k speedup at each utilization, and the utilization where it turns off."""

    name: str
    us: list[float]
    best_k: list[int]
    speedup: list[float]
    turn_off_u: float


@dataclass(frozen=True)
class GoodputCurves:
    """Colocated and best-split goodput at each x (an arrival rate or a link bandwidth), and the split."""

    x: list[float]
    colocated: list[float]
    disaggregated: list[float]
    splits: list[str]


@dataclass(frozen=True)
class OperatingPoint:
    """Where a scenario sits on a goodput curve: its x (rate or link) and both architectures' goodput."""

    x: float
    colocated: float
    disaggregated: float
    label: str  # e.g. "current rate 3 req/s"


@dataclass(frozen=True)
class SpecdecCurves:
    """Speedup over (alpha, k) and every preset's best-k speedup as utilization rises."""

    surface: SpeedupSurface
    utilization: list[UtilizationCurve]


@dataclass(frozen=True)
class DisaggCurves:
    """Goodput vs arrival rate and vs link bandwidth, with the scenario's rate and link marked."""

    by_rate: GoodputCurves
    by_link: GoodputCurves
    slo_note: str
    rate_point: OperatingPoint
    link_point: OperatingPoint
    crossover_GBps: float | None


@dataclass(frozen=True)
class PlanCurves:
    """Goodput vs arrival rate for colocated, the best split and the recommended deployment."""

    by_rate: GoodputCurves
    recommended: list[float]  # the recommendation's goodput at each rate of by_rate.x
    recommended_label: str  # "recommended: ..." or "recommended (speculation not considered): ..."
    best_label: str
    planned_rate: float
    best_goodput_rps: float
    best_attainment: float
    nodes: int
    slo_note: str
    attainment_target: float
