"""Prediction intervals from out-of-sample errors.

A prediction ``p`` of a figure whose measured value is ``m`` has the relative error
``e = (p - m) / m``.  ``benchmarks/accuracy.py`` predicts every published run with each fitted
constant fitted leave-one-source-out (the run's own campaign never seen), and writes the signed
errors of those out-of-sample predictions, grouped by engine, model kind (dense or
mixture-of-experts) and load band, to ``plan/data/prediction_errors.json``.  For a new prediction
the interval at level ``L`` is the range of measured values those errors allow,

    m in [p / (1 + e_hi), p / (1 + e_lo)],   e_lo, e_hi = the (1 - L) / 2 and (1 + L) / 2
                                             empirical quantiles of the cell's errors,

from the smallest cell of the prediction's engine, kind and band that holds the errors of at least
:data:`MIN_SOURCES` sources (else the engine's, else all), each source weighing 1.  Where the step
model fell back to a roofline, no measured run checked that price: the interval's half-widths
(in ``log(1 + e)``) are scaled by :data:`FALLBACK_WIDEN` and the basis says so.
``accuracy.py`` reports how often such intervals, built without a source, hold that source's runs.
Nothing here prints.
"""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources
from typing import Any

from servesim._checks import ParameterError

__all__ = ["FALLBACK_WIDEN", "LOAD_BANDS", "METRICS", "MIN_SOURCES", "cell_keys", "interval", "load_band",
           "prediction_interval", "requests_in_flight", "weighted_quantile"]

METRICS: tuple[str, ...] = ("mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "output_throughput")
"""The figures an interval is given for (keys as in ``predict``'s JSON)."""

ERROR_OF: dict[str, str] = {"mean_ttft_ms": "ttft", "p99_ttft_ms": "ttft", "mean_tpot_ms": "tpot",
                            "mean_itl_ms": "tpot", "output_throughput": "tput"}
"""Which measured error each figure's interval is built from: the published sets give mean (or
median) TTFT, TPOT (or ITL) and output throughput; p99 TTFT borrows the mean's errors and ITL
TPOT's (said in the basis)."""

LOAD_BANDS: tuple[tuple[str, float], ...] = (("light", 16.0), ("medium", 64.0), ("heavy", math.inf))
"""Bands of the requests in flight (the client's concurrency, or rate x mean latency): below 16,
16-64, above 64."""

MIN_SOURCES = 4
"""A cell holding errors of fewer sources than this gives way to the engine's (then all) errors: the
spread that matters is between campaigns, which a cell of one or two cannot show."""

FALLBACK_WIDEN = 1.5
"""Half-widths are scaled by this where a price came from a roofline or a borrowed table."""


def load_band(requests: float) -> str:
    """The band of ``requests`` in flight (:data:`LOAD_BANDS`)."""
    for name, top in LOAD_BANDS:
        if requests < top:
            return name
    return LOAD_BANDS[-1][0]


def requests_in_flight(concurrency: float | None, rate_per_s: float | None, ttft_ms: float | None,
              tpot_ms: float | None, osl: int) -> float:
    """Requests in flight: the client's ``concurrency``, else the rate times the mean latency of a
    request of ``osl`` output tokens (Little's law); inf where the rate or the times are unknown."""
    if concurrency:
        return float(concurrency)
    if rate_per_s is None or ttft_ms is None or tpot_ms is None:
        return math.inf
    return rate_per_s * (ttft_ms + max(0, osl - 1) * tpot_ms) / 1e3


def cell_keys(engine: str, kind: str, band: str) -> tuple[str, ...]:
    """The cells of the error table a prediction of ``engine`` x ``kind`` x ``band`` falls in, the
    narrowest first: its own, its engine and kind's, its engine's, all."""
    return f"{engine}|{kind}|{band}", f"{engine}|{kind}|*", f"{engine}|*|*", "*|*|*"


def weighted_quantile(pairs: list[list[float]], q: float) -> float:
    """The ``q`` quantile of ``(value, weight)`` pairs: the smallest value whose cumulative weight
    reaches ``q`` of the total (each source's errors weigh 1 in all, so that one large campaign does
    not set a cell's spread by itself)."""
    s = sorted(pairs)
    total = sum(w for _, w in s)
    acc = 0.0
    for v, w in s:
        acc += w
        if acc >= q * total - 1e-12:
            return v
    return s[-1][0]


@cache
def _table() -> dict[str, Any]:
    path = resources.files("servesim.plan").joinpath("data/prediction_errors.json")
    text = path.read_text(encoding="utf-8")
    return dict(json.loads(text))


def _cell(errors: dict[str, list[list[float]]], engine: str, kind: str, band: str
          ) -> tuple[list[list[float]], str]:
    for key in cell_keys(engine, kind, band):
        xs = errors.get(key, [])
        if sum(w for _, w in xs) >= MIN_SOURCES - 1e-6:
            return xs, key
    return [], ""


def interval(value: float, errors: list[list[float]], level: float,
             widen: float = 1.0) -> tuple[float, float]:
    """The interval of the measured value a prediction ``value`` allows at ``level`` given the signed
    relative ``errors`` of earlier predictions, ``(error, weight)`` pairs (see the module's docstring)."""
    lo_e = weighted_quantile(errors, (1 - level) / 2)
    hi_e = weighted_quantile(errors, (1 + level) / 2)
    mid = math.log1p(weighted_quantile(errors, 0.5))
    lo_l, hi_l = math.log1p(lo_e), math.log1p(hi_e)
    lo_l, hi_l = mid + widen * (lo_l - mid), mid + widen * (hi_l - mid)
    return value / math.exp(hi_l), value / math.exp(lo_l)


def prediction_interval(pred: dict[str, Any], *, level: float = 0.8, engine: str, moe: bool,
                        in_flight: float, fallback: bool, errors: dict[str, Any] | None = None
                        ) -> dict[str, Any]:
    """The ``prediction_interval`` object of a prediction ``pred`` (keys of :data:`METRICS`):
    ``{"level": L, metric: [lo, hi], ..., "basis": "..."}``.  ``errors`` replaces the shipped table
    (``accuracy.py`` passes the errors of the other sources)."""
    if not isinstance(level, float | int) or isinstance(level, bool) or not 0.0 < level < 1.0:
        raise ParameterError("interval_level", level, "a level in (0, 1), e.g. 0.8")
    table = _table()["errors"] if errors is None else errors
    kind = "moe" if moe else "dense"
    band = load_band(in_flight)
    widen = FALLBACK_WIDEN if fallback else 1.0
    out: dict[str, Any] = {"level": level}
    cells = []
    for metric in METRICS:
        v = pred.get(metric)
        xs, key = _cell(table.get(ERROR_OF[metric], {}), engine, kind, band)
        if not isinstance(v, float | int) or not math.isfinite(v) or v <= 0 or not xs:
            out[metric] = None
            continue
        lo, hi = interval(float(v), xs, level, widen)
        out[metric] = [round(lo, 6), round(hi, 6)]
        sources = round(sum(w for _, w in xs))
        cell = (f"{ERROR_OF[metric].upper()} from {key.replace('|', ' x ')} "
                f"({len(xs)} runs of {sources} sources)")
        if cell not in cells:
            cells.append(cell)
    out["basis"] = (f"out-of-sample errors of published runs (benchmarks/accuracy.py, each source left "
                    f"out of the constants' fit) for {engine} x {kind} x {band} load: {'; '.join(cells)}"
                    + "; p99 TTFT from mean TTFT errors, ITL from TPOT errors"
                    + (f"; widened {FALLBACK_WIDEN:g}x: a price fell back to a roofline or a borrowed table"
                       if fallback else ""))
    return out
