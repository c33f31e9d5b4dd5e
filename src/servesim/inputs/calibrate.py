"""Fit the serving parameters from a handful of measured points, instead of profiling.

The closed forms of :mod:`servesim.model.serving` (colocated, seed 3.3) say, for a
pool of N nodes serving Poisson arrivals at rate lambda with P-token prompts::

    TTFT = W_q(M/M/N; lambda, mu = R_p / P) + P / R_p
    TPOT = TPOT_base (1 + beta rho_p),        rho_p = lambda P / (N R_p)

Three unknowns (prefill rate R_p, TPOT_base, beta) from a few (lambda, mean
TTFT, mean TPOT, P, O) points, e.g. vLLM's ``benchmark_serving.py`` at
several ``--request-rate`` values:

1. **R_p** from the TTFTs alone: minimise ``sum_i ln(TTFT_model_i / TTFT_i)^2``
   over R_p (log residuals weigh a 50 ms and a 5 s point alike).  Each TTFT
   model falls monotonically in R_p from infinity at the stability bound
   ``R_p = max_i lambda_i P_i / N_i`` to ``P_i / R_p`` -> 0, so the sum has a
   minimum above the bound; a log-spaced scan brackets it and golden-section
   search refines it.  (For N = 1, M/M/1 gives ``TTFT = 1 / (mu - lambda)``,
   so one point alone fixes ``R_p = P (1 / TTFT + lambda)``.)
2. **TPOT_base and beta** by linear least squares of TPOT on rho_p (with
   rho_p from the fitted R_p): ``TPOT = a + b rho_p``, ``TPOT_base = a``,
   ``beta = b / a``.  beta < 0 is outside the model (more prefill load cannot
   make decode faster): then b = 0 is refitted (the constrained optimum) and
   a warning says so.

The decode capacity R_d (tokens/s per node) is not identified by mean TTFT
and TPOT below saturation: it is taken as given and checked against the
points' output-token rates.  Residuals are reported per point.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from servesim._catalogfile import CatalogError, load_file
from servesim._checks import ParameterError, check_counts, check_fields, check_int, check_real
from servesim._textfile import MAX_COUNT, parse_json, parse_number, read_text, shown, table_at
from servesim.inputs.traces import InputError, csv_records
from servesim.model import kvcache, serving
from servesim.model.kvcache import KVShape
from servesim.model.queueing import MMc
from servesim.model.serving import NodeSpec

__all__ = [
    "CSV_COLUMNS",
    "Calibration",
    "CalibrationPoint",
    "InputError",
    "PointFit",
    "calibrate",
    "load_calibration",
    "model_tpot_s",
    "model_ttft_s",
    "read_points",
]

CSV_COLUMNS: tuple[str, ...] = (
    "rate_per_s", "mean_ttft_ms", "mean_tpot_ms", "prompt_tokens", "output_tokens",
)
"""Required CSV columns (``mean_ttft_s``/``mean_tpot_s`` also accepted; ``nodes`` optional)."""

_VLLM_KEYS: tuple[str, ...] = ("completed", "total_input_tokens", "total_output_tokens", "mean_ttft_ms",
                               "mean_tpot_ms")
"""Keys every vLLM ``benchmark_serving.py --save-result`` JSON has that the fit needs."""

MAX_POINTS_BYTES = 16 * 2**20
"""A calibration CSV or JSON file larger than this (16 MiB) is refused unread."""

MAX_NODES = 100_000
"""The most replicas a calibration point may say it drove."""

_NODE_KEYS: tuple[str, ...] = ("model", "prefill_tokens_per_s", "decode_tokens_per_s", "tpot_base_s", "beta")


@dataclass(frozen=True)
class CalibrationPoint:
    """One measured operating point: mean TTFT and TPOT at an arrival rate."""

    rate_per_s: float
    ttft_s: float
    tpot_s: float
    prompt_tokens: float  # mean prompt length of the run
    output_tokens: float
    nodes: int = 1
    source: str = ""

    def __post_init__(self) -> None:
        check_fields(self, "rate_per_s", "ttft_s", "tpot_s", "prompt_tokens")
        check_fields(self, "output_tokens", lo_open=False)
        check_counts(self, "nodes")


def model_ttft_s(p: CalibrationPoint, prefill_tokens_per_s: float) -> float:
    """Mean TTFT of the colocated closed form: M/M/N wait plus the prefill P / R_p."""
    service_s = p.prompt_tokens / prefill_tokens_per_s
    queue = MMc(p.nodes, p.rate_per_s, 1.0 / service_s)
    return queue.mean_wait_s() + service_s if queue.stable else math.inf


def model_tpot_s(p: CalibrationPoint, prefill_tokens_per_s: float, tpot_base_s: float, beta: float) -> float:
    """Colocated TPOT: TPOT_base (1 + beta rho_p) with rho_p = lambda P / (N R_p)."""
    rho_p = p.rate_per_s * p.prompt_tokens / (p.nodes * prefill_tokens_per_s)
    return tpot_base_s * (1.0 + beta * rho_p)


@dataclass(frozen=True)
class PointFit:
    """One point's measured and fitted values."""

    source: str
    rate_per_s: float
    prefill_utilization: float
    ttft_s: float
    ttft_model_s: float
    ttft_rel_residual: float  # model / measured - 1
    tpot_s: float
    tpot_model_s: float
    tpot_rel_residual: float


@dataclass(frozen=True)
class Calibration:
    """Fitted node parameters plus beta, ready for :func:`servesim.model.serving.colocated` and friends."""

    node: NodeSpec
    beta: float
    points: tuple[PointFit, ...]
    ttft_rms_rel: float
    tpot_rms_rel: float
    warnings: tuple[str, ...] = field(default=())

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.node.prefill_tokens_per_s

    @property
    def tpot_base_s(self) -> float:
        return self.node.tpot_base_s

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["node"] = {
            "model": self.node.kv.name,
            "prefill_tokens_per_s": self.node.prefill_tokens_per_s,
            "decode_tokens_per_s": self.node.decode_tokens_per_s,
            "tpot_base_s": self.node.tpot_base_s,
        }
        return d

    def to_toml(self) -> str:
        """The ``[node]`` table of ``workloads.toml`` plus ``beta``, for :func:`load_calibration`."""
        lines = [
            "# Written by `servesim calibrate`: fitted to measured TTFT/TPOT points.",
            f"# TTFT rms relative residual {self.ttft_rms_rel:.3g}, TPOT {self.tpot_rms_rel:.3g}.",
            "[node]",
            f'model = "{self.node.kv.name}"',
            f"prefill_tokens_per_s = {self.node.prefill_tokens_per_s!r}",
            f"decode_tokens_per_s = {self.node.decode_tokens_per_s!r}",
            f"tpot_base_s = {self.node.tpot_base_s!r}",
            f"beta = {self.beta!r}",
        ]
        return "\n".join(lines) + "\n"


def load_calibration(path: str | Path) -> tuple[NodeSpec, float]:
    """Read a file written from :meth:`Calibration.to_toml`: the node and beta.

    Every error names the file and the key: binary or malformed TOML, a
    ``node`` that is not a table (a scalar, a list, ``[[node]]``), a missing
    key, a ``model`` that is not a catalog model's name, a value out of range.
    """
    where = f"calibration file {str(path)!r}"
    table = load_file(path)
    meaning = ", ".join(_NODE_KEYS)
    try:
        n = table_at(table, "node", where, meaning=meaning)
    except InputError as exc:
        raise CatalogError(str(exc)) from None
    missing = [k for k in _NODE_KEYS if k not in n]
    if missing:
        raise CatalogError(f"{where}: [node] is missing {', '.join(repr(k) for k in missing)} (it needs "
                           f"{meaning})")
    model = n["model"]
    if not isinstance(model, str) or model not in kvcache.MODELS:
        raise CatalogError(f"{where}: [node] key 'model' = {shown(model)} is invalid: must be one of "
                           f"{', '.join(kvcache.MODELS)}")
    try:
        # Physical ranges: a node prefills 1 to 10^9 tokens/s, decodes as many, and a decode step takes
        # 1 us to 60 s; beta (the prefill's slowdown of decode) is at most 100, as the flag's.
        node = NodeSpec(
            check_real("prefill_tokens_per_s", n["prefill_tokens_per_s"], lo=1.0, hi=1e9),
            check_real("decode_tokens_per_s", n["decode_tokens_per_s"], lo=1.0, hi=1e9),
            check_real("tpot_base_s", n["tpot_base_s"], lo=1e-6, hi=60.0),
            kvcache.MODELS[model],
        )
        beta = check_real("beta", n["beta"], lo=0.0, hi=100.0)
    except ParameterError as exc:
        raise CatalogError(f"{where}: [node] key {exc.name!r}: {exc}") from None
    return node, beta


# ---------------------------------------------------------------------------
# Reading points


def _num(raw: object, where: str, name: str) -> float:
    """A finite number (a 5,000-digit field or an int beyond float range is refused, not a crash)."""
    return parse_number(raw, where, name)


def _point(where: str, rate: float, ttft_s: float, tpot_s: float, prompt: float, output: float,
           nodes: int) -> CalibrationPoint:
    for name, v, strict in (("rate_per_s", rate, True), ("mean TTFT", ttft_s, True),
                            ("mean TPOT", tpot_s, True), ("prompt_tokens", prompt, True),
                            ("output_tokens", output, False)):
        if v < 0 or (strict and v == 0):
            raise InputError(f"{where}: {name}={v:g} is invalid: must be {'>' if strict else '>='} 0")
        if name.endswith("_tokens") and v > MAX_COUNT:
            raise InputError(f"{where}: {name}={v:g} is invalid: a token count must be <= {MAX_COUNT:,}")
    # What a serving benchmark can measure: beyond these the fit's arithmetic means nothing.
    for name, v, lo, hi, unit in (("rate_per_s", rate, 1e-6, 1e6, " req/s"),
                                  ("mean TTFT", ttft_s * 1e3, 1e-3, 3.6e6, " ms"),
                                  ("mean TPOT", tpot_s * 1e3, 1e-3, 6e4, " ms")):
        if not lo <= v <= hi:
            raise InputError(f"{where}: {name}={v:g}{unit} is invalid: must be in [{lo:g}, {hi:g}]{unit} "
                             "(what a serving benchmark measures)")
    return CalibrationPoint(rate, ttft_s, tpot_s, prompt, output, nodes, where)


def _read_csv(path: Path, nodes: int) -> list[CalibrationPoint]:
    text = read_text(path, what="", max_bytes=MAX_POINTS_BYTES)
    reader = csv.DictReader(io.StringIO(text, newline=""), skipinitialspace=True)
    try:
        fields = reader.fieldnames
    except csv.Error as exc:
        raise InputError(f"{path}:1: not valid CSV: {exc}") from None
    header = [h.strip() for h in fields or []]
    reader.fieldnames = header
    ttft_col = "mean_ttft_ms" if "mean_ttft_ms" in header else "mean_ttft_s"
    tpot_col = "mean_tpot_ms" if "mean_tpot_ms" in header else "mean_tpot_s"
    need = ["rate_per_s", ttft_col, tpot_col, "prompt_tokens", "output_tokens"]
    missing = [f"{c[:-2]}_ms (or {c})" if c.endswith("_s") else c for c in need if c not in header]
    if missing:
        raise InputError(
            f"{path}:1: header {shown(','.join(header), 120)} lacks {', '.join(missing)}: a calibration CSV "
            f"has {','.join(CSV_COLUMNS)} (and optionally nodes)"
        )
    ttft_scale = 1e-3 if ttft_col.endswith("_ms") else 1.0
    tpot_scale = 1e-3 if tpot_col.endswith("_ms") else 1.0
    points = []
    for row in csv_records(path, reader, "calibration row"):
        where = f"{path}:{reader.line_num}"
        if any(row.get(c) in (None, "") for c in need):
            raise InputError(f"{where}: truncated line: every column of {','.join(need)} is needed")
        n = nodes
        if row.get("nodes") not in (None, ""):
            nv = _num(row["nodes"], where, "nodes")
            if not 1 <= nv <= MAX_NODES or not nv.is_integer():
                raise InputError(f"{where}: nodes={shown(row['nodes'])} is invalid: must be an integer in "
                                 f"[1, {MAX_NODES:,}]")
            n = int(nv)
        points.append(_point(
            where,
            _num(row["rate_per_s"], where, "rate_per_s"),
            _num(row[ttft_col], where, ttft_col) * ttft_scale,
            _num(row[tpot_col], where, tpot_col) * tpot_scale,
            _num(row["prompt_tokens"], where, "prompt_tokens"),
            _num(row["output_tokens"], where, "output_tokens"),
            n,
        ))
    return points


def _from_vllm(obj: dict[str, Any], where: str, nodes: int, warnings: list[str]) -> CalibrationPoint:
    """One vLLM benchmark_serving.py result: lambda, mean lengths, mean TTFT and TPOT.

    lambda is the offered ``request_rate`` when it is a finite number (the
    Poisson rate the benchmark drew arrivals from), else the achieved
    ``request_throughput`` = completed / duration, with a warning: an
    ``inf`` rate sends every request at once, a batch and not a Poisson queue.
    """
    missing = [k for k in _VLLM_KEYS if k not in obj]
    if missing:
        raise InputError(
            f"{where}: not a vLLM benchmark_serving.py result: missing {', '.join(missing)}"
        )
    completed = _num(obj["completed"], where, "completed")
    if completed <= 0:
        raise InputError(f"{where}: completed={obj['completed']!r}: no request finished")
    raw_rate = obj.get("request_rate")
    rate: float | None = None
    if (isinstance(raw_rate, (int, float)) and not isinstance(raw_rate, bool)
            and abs(raw_rate) < 1e300 and math.isfinite(raw_rate)):
        rate = _num(raw_rate, where, "request_rate")
    if rate is None:
        if "request_throughput" not in obj:
            raise InputError(f"{where}: neither a finite request_rate nor request_throughput")
        rate = _num(obj["request_throughput"], where, "request_throughput")
        warnings.append(
            f"{where}: request_rate={raw_rate!r} is not a finite Poisson rate: using the achieved "
            f"request_throughput {rate:.4g}/s (an all-at-once run is a batch, not an M/M/c queue)"
        )
    if obj.get("max_concurrency") not in (None, "None"):
        warnings.append(
            f"{where}: max_concurrency={obj['max_concurrency']!r} caps the requests in flight: a closed "
            "loop, not the open Poisson arrivals the model assumes"
        )
    burst = obj.get("burstiness")
    if isinstance(burst, (int, float)) and burst != 1.0:
        warnings.append(f"{where}: burstiness={burst!r}: arrivals were not Poisson (gamma shape != 1)")
    prompt = _num(obj["total_input_tokens"], where, "total_input_tokens") / completed
    output = _num(obj["total_output_tokens"], where, "total_output_tokens") / completed
    ttft = _num(obj["mean_ttft_ms"], where, "mean_ttft_ms") * 1e-3
    tpot = _num(obj["mean_tpot_ms"], where, "mean_tpot_ms") * 1e-3
    return _point(where, rate, ttft, tpot, prompt, output, nodes)


def read_points(paths: Iterable[str | Path], nodes: int = 1) -> tuple[list[CalibrationPoint], list[str]]:
    """Read calibration points from CSV files and vLLM benchmark JSON result files.

    A ``.csv`` file has :data:`CSV_COLUMNS`; anything else is JSON: one
    benchmark result object, or a list of them.  ``nodes`` is the number of
    replicas the benchmark drove (a CSV ``nodes`` column overrides it).
    Returns the points and warnings about how they were read.  Files are read
    through :mod:`servesim._textfile` (at most 16 MiB; UTF-8 with or
    without a BOM, BOM-marked UTF-16, gzip), and numbers are checked as finite,
    token means at most 10^9.
    """
    n = check_int("nodes", nodes, lo=1)
    points: list[CalibrationPoint] = []
    warnings: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.suffix.lower() == ".csv":
            points += _read_csv(path, n)
            continue
        obj = parse_json(read_text(path, what="", max_bytes=MAX_POINTS_BYTES), str(path))
        objs = obj if isinstance(obj, list) else [obj]
        for i, o in enumerate(objs):
            where = str(path) if len(objs) == 1 else f"{path}[{i}]"
            if not isinstance(o, dict):
                raise InputError(f"{where}: expected a JSON object, got {type(o).__name__}")
            points.append(_from_vllm(o, where, n, warnings))
    return points, warnings


# ---------------------------------------------------------------------------
# Fitting


def _ttft_loss(points: Sequence[CalibrationPoint], r_p: float) -> float:
    total = 0.0
    for p in points:
        m = model_ttft_s(p, r_p)
        if not math.isfinite(m):
            return math.inf
        total += math.log(m / p.ttft_s) ** 2
    return total


def _fit_prefill(points: Sequence[CalibrationPoint]) -> float:
    """argmin over R_p of the TTFT log-residuals (scan, then golden section), see the module docstring."""
    bound = max(p.rate_per_s * p.prompt_tokens / p.nodes for p in points)  # rho_p < 1 at every point
    # Parametrise R_p = bound (1 + e^x): every x is stable; scan x over e^-20 .. e^20 of headroom.
    def loss(x: float) -> float:
        return _ttft_loss(points, bound * (1.0 + math.exp(x)))

    xs = [-20.0 + 40.0 * i / 400 for i in range(401)]
    losses = [loss(x) for x in xs]
    i = min(range(len(xs)), key=losses.__getitem__)
    lo, hi = xs[max(i - 1, 0)], xs[min(i + 1, len(xs) - 1)]
    g = (math.sqrt(5.0) - 1.0) / 2.0  # golden ratio conjugate
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = loss(a), loss(b)
    for _ in range(200):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = loss(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = loss(b)
        if hi - lo < 1e-12:
            break
    return bound * (1.0 + math.exp(0.5 * (lo + hi)))


def calibrate(
    points: Sequence[CalibrationPoint],
    *,
    decode_tokens_per_s: float | None = None,
    kv: KVShape | None = None,
    warnings: Sequence[str] = (),
) -> Calibration:
    """Fit R_p, TPOT_base and beta to the points (see the module docstring).

    ``decode_tokens_per_s`` and ``kv`` complete the :class:`NodeSpec`
    (defaults: :data:`servesim.model.serving.DEFAULT_NODE`'s).  Needs at least two
    points at different prefill loads for beta.
    """
    import numpy as np

    pts = list(points)
    if len(pts) < 2:
        raise InputError(
            f"calibration needs at least 2 measured points (TTFT/TPOT at two or more rates), got {len(pts)}"
        )
    notes = list(warnings)
    r_d = check_real("decode_tokens_per_s", serving.DEFAULT_NODE.decode_tokens_per_s
                     if decode_tokens_per_s is None else decode_tokens_per_s, lo=0.0, lo_open=True)
    shape = kv or serving.DEFAULT_NODE.kv

    r_p = _fit_prefill(pts)
    rho = np.array([p.rate_per_s * p.prompt_tokens / (p.nodes * r_p) for p in pts])
    tpot = np.array([p.tpot_s for p in pts])
    if float(rho.max() - rho.min()) <= 1e-9 * max(float(rho.max()), 1e-300):
        raise InputError(
            "beta is not identifiable: every point has the same prefill load lambda P / N; "
            "measure at two or more request rates"
        )
    design = np.column_stack([np.ones_like(rho), rho])
    (a, b), *_ = np.linalg.lstsq(design, tpot, rcond=None)
    a, b = float(a), float(b)
    if b < 0:
        notes.append(
            f"TPOT falls as prefill load grows (slope {b * 1e3:.3g} ms per unit rho_p): outside the "
            "interference model; beta fixed at 0 and TPOT_base = mean TPOT"
        )
        a, b = float(tpot.mean()), 0.0
    if a <= 0:
        raise InputError(
            f"the TPOT fit gives TPOT_base = {a * 1e3:.3g} ms <= 0: the points do not follow "
            "TPOT = TPOT_base (1 + beta rho_p)"
        )
    beta = b / a
    for p in pts:
        load = p.rate_per_s * p.output_tokens / (p.nodes * r_d)
        if load >= 1.0:
            notes.append(
                f"{p.source}: lambda O / (N R_d) = {load:.2f} >= 1 with the assumed decode capacity "
                f"{r_d:g} tokens/s per node, yet it was measured: R_d is larger (pass --decode-tokens-per-s)"
            )
    node = NodeSpec(prefill_tokens_per_s=r_p, decode_tokens_per_s=r_d, tpot_base_s=a, kv=shape)
    fits = []
    for p in pts:
        m_ttft = model_ttft_s(p, r_p)
        m_tpot = model_tpot_s(p, r_p, a, beta)
        fits.append(PointFit(
            source=p.source,
            rate_per_s=p.rate_per_s,
            prefill_utilization=p.rate_per_s * p.prompt_tokens / (p.nodes * r_p),
            ttft_s=p.ttft_s,
            ttft_model_s=m_ttft,
            ttft_rel_residual=m_ttft / p.ttft_s - 1.0,
            tpot_s=p.tpot_s,
            tpot_model_s=m_tpot,
            tpot_rel_residual=m_tpot / p.tpot_s - 1.0,
        ))
    ttft_rms = math.sqrt(sum(f.ttft_rel_residual**2 for f in fits) / len(fits))
    tpot_rms = math.sqrt(sum(f.tpot_rel_residual**2 for f in fits) / len(fits))
    if ttft_rms > 0.25:
        notes.append(
            f"TTFT residuals are large (rms {ttft_rms:.0%}): the M/M/c model misses something "
            "(fixed overheads, batching, non-Poisson arrivals, a prompt-length mix); treat R_p with care"
        )
    return Calibration(node, beta, tuple(fits), ttft_rms, tpot_rms, tuple(notes))
