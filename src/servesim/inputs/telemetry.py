"""Speculative-decoding acceptance from serving-engine telemetry (Prometheus text).

Three definitions that published figures mix up
-----------------------------------------------

A cycle drafts ``k`` tokens; ``A`` in 0..k is the accepted prefix; the target
adds one token of its own (the correction, or the bonus after k accepts), so a
cycle emits ``n = A + 1`` tokens.

* **conditional acceptance alpha** (the seed, Leviathan et al.): P(draft i is
  accepted | drafts 1..i-1 were).  The i.i.d. model says it is one constant.
* **marginal per-position rate** ``p_i = P(A >= i)``: the fraction of cycles
  whose i-th draft was accepted (vLLM's ``accepted_tokens_per_pos / drafts``).
  Under i.i.d. acceptance ``p_i = alpha^i``; the conditional rate at position
  i is ``q_i = p_i / p_{i-1}`` (``p_0 = 1``).
* **mean accepted length**: ``E[A] = sum_i p_i`` without the bonus token, or
  ``E[n] = 1 + E[A]`` with it (vLLM's logged "mean acceptance length" and
  SGLang's ``spec_accept_length`` both include it).  Under i.i.d.
  ``E[n] = sum_{i=0}^{k} alpha^i``.

And two "acceptance rates" that are neither alpha nor p_i:

* vLLM: ``accepted / drafted = E[A] / k`` (counters ``num_accepted_tokens``
  over ``num_draft_tokens``);
* SGLang: ``spec_accept_rate = spec_accept_length / num_draft_tokens`` whose
  numerator includes the bonus token and whose denominator is
  ``speculative_num_draft_tokens`` (``k + 1`` for a chain draft), i.e.
  ``E[n] / (k + 1)``.

Where the numbers come from
---------------------------

vLLM exports cumulative counters (suffix ``_total``, labels ``model_name``,
``engine``; ``position`` 0-based for the last): ``vllm:spec_decode_num_drafts``
(cycles N), ``vllm:spec_decode_num_draft_tokens`` (drafted tokens),
``vllm:spec_decode_num_accepted_tokens`` (S = sum of A) and
``vllm:spec_decode_num_accepted_tokens_per_pos`` (c_i = cycles with A >= i).
Counters are cumulative since the engine started: two scrapes give the
interval between them, and a counter that went down was reset (a restart).
SGLang exports gauges ``sglang:spec_accept_length`` and
``sglang:spec_accept_rate``: averages over its last logging window, not
counters, and without the number of cycles behind them, so they give a point
estimate but no interval.

Estimators
----------

**Maximum likelihood from per-position counts.**  Under i.i.d. acceptance with
k drafts per cycle, A is a geometric variable truncated at k::

    P(A = a) = alpha^a (1 - alpha)   for a < k,      P(A = k) = alpha^k.

With n_a cycles ending at a, the log-likelihood is
``sum_{a<k} n_a (a log alpha + log(1-alpha)) + n_k k log alpha
= S log alpha + F log(1 - alpha)`` where ``S = sum_a a n_a = sum_i c_i`` are the
accepted drafts and ``F = N - c_k`` the cycles that ended in a rejection.  Setting
the derivative ``S/alpha - F/(1-alpha)`` to 0 gives

    alpha_hat = S / (S + F),

accepted drafts over drafts actually *examined* (every accepted one plus the one
rejected per failing cycle; drafts after a rejection are never examined).  This is
not vLLM's ``accepted / drafted``, which divides by all k drafts and is biased low.
The likelihood has the binomial kernel with T = S + F trials, so the Wilson score
interval for a binomial proportion applies (the stopping rule does not change the
likelihood).  The interval treats cycles as independent; acceptance is correlated
within a request, so it is a lower bound on the real uncertainty.

**Test of i.i.d.**  The saturated alternative gives each position its own
conditional rate q_i: position i has t_i = c_{i-1} trials (c_0 = N) and c_i
successes, and the log-likelihood splits into k binomials with MLE
``q_i = c_i / c_{i-1}``.  The null (one alpha) is nested in it, so the likelihood
ratio statistic

    G = 2 sum_i [ c_i ln(q_i / alpha) + (t_i - c_i) ln((1 - q_i) / (1 - alpha)) ]

is asymptotically chi-square with (positions with t_i > 0) - 1 degrees of
freedom (a G-test of homogeneity of k proportions).  With millions of drafts it
rejects for tiny departures: read the per-position table for their size.

**From a mean length or a rate** (no per-position counts): solve
``sum_{i=0}^{k} alpha^i = E[n]`` for alpha (method of moments; E[n] increases in
alpha).  With N cycles known the interval inverts ``E[n] +- z sd(A) / sqrt(N)``
where under i.i.d. ``E[A^2] = sum_{i=1}^{k} (2i - 1) alpha^i``.
"""

from __future__ import annotations

import math
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from servesim._catalogfile import engines_file
from servesim._checks import check_int, check_real
from servesim._textfile import decode_text, read_text
from servesim.inputs.traces import InputError
from servesim.model.speculative import (
    DEFAULT_C,
    DEFAULT_D,
    DEFAULT_K_MAX,
    alpha_at_tokens,
    optimal_k,
    speedup,
)

__all__ = [
    "CURVE_STATISTICS",
    "DEFINITIONS",
    "ENGINES",  # noqa: F822 (module __getattr__)
    "RATES",
    "AlphaFit",
    "Definitions",
    "IidTest",
    "InputError",
    "OptimalK",
    "SpecCounters",
    "acceptance_curve",
    "alpha_from_length",
    "chi2_sf",
    "counters_from_value",
    "definitions_at",
    "difference",
    "fit_alpha",
    "parse_exposition",
    "read_counters",
    "read_exposition",
    "spec_metrics",
    "wilson_interval",
]

DEFINITIONS: tuple[str, ...] = ("per-position", "accept-length", "accept-rate")
"""What an alpha is fitted from: per-position counts, a mean accepted length, or a rate."""

RATES: dict[str, tuple[Callable[[float, int], float], Callable[[float, int], float]]] = {
    # accepted / drafted = E[A] / k, so E[n] = 1 + rate k
    "vllm_acceptance_rate": (lambda length, k: (length - 1.0) / k, lambda rate, k: 1.0 + rate * k),
    # E[n] / (k + 1): the length (bonus included) over a chain draft's k + 1 draft tokens
    "sglang_accept_rate": (lambda length, k: length / (k + 1), lambda rate, k: rate * (k + 1)),
}
"""The engines' acceptance-rate definitions (fields of :class:`Definitions`): each the rate as a
function of the mean accepted length with the bonus E[n] and the draft length k, and its inverse."""

_COUNTER_ROLES = ("drafts", "draft_tokens", "accepted", "accepted_per_pos")
_GAUGE_ROLES = ("accept_length", "accept_rate")


@dataclass(frozen=True)
class _Exporter:
    """One engine's speculative-decoding metrics (engines.toml ``[engine.NAME.telemetry]``): cumulative
    counters (``counters``: the cycles, drafted, accepted and per-position accepted tokens) or
    windowed gauges (the mean accepted length and the acceptance rate), the metric of each role, and
    the definition of the engine's own acceptance rate (a key of :data:`RATES`)."""

    engine: str
    name: str  # as its project writes it
    counters: bool
    metrics: tuple[tuple[str, str], ...]  # (role, metric name)
    rate: str

    def metric(self, role: str) -> str:
        return dict(self.metrics)[role]

    def short(self, role: str) -> str:
        """The metric of ``role`` without its namespace (``spec_accept_length``)."""
        return self.metric(role).split(":", 1)[-1]


@cache
def _exporters() -> dict[str, _Exporter]:
    """The engines with speculative metrics, in engines.toml's order (read on first use)."""
    out: dict[str, _Exporter] = {}
    for key, entry in engines_file()["engine"].items():
        t = entry.get("telemetry")
        if t is None:
            continue
        counters = t["kind"] == "counters"
        roles = _COUNTER_ROLES if counters else _GAUGE_ROLES
        out[key] = _Exporter(engine=key, name=str(entry.get("name", key)), counters=counters,
                             metrics=tuple((role, str(t["metrics"][role])) for role in roles),
                             rate=str(t["rate"]))
    return out


@cache
def _metric_engines() -> dict[str, str]:
    """Each speculative metric's engine."""
    return {metric: ex.engine for ex in _exporters().values() for _, metric in ex.metrics}


def __getattr__(name: str) -> tuple[str, ...]:
    """``ENGINES``: the engines whose speculative metrics servesim reads (engines.toml
    ``[engine.NAME.telemetry]``), read on first use."""
    if name == "ENGINES":
        return tuple(_exporters())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def spec_metrics(engine: str) -> tuple[str, ...]:
    """The speculative-decoding metrics ``engine`` exports (counters without their ``_total``)."""
    return tuple(metric for _, metric in _exporters()[engine].metrics)

MAX_SCRAPE_BYTES = 64 * 2**20
"""A metrics scrape larger than this (64 MiB) is refused unread: real ones are well under 1 MiB."""

MIN_INTERVAL_S = 1.0
"""Two scrapes closer than this by their own times give no rate per second (file copies, clock noise)."""

Z_95 = 1.959963984540054
"""Standard normal quantile for a two-sided 95% interval."""

_CHI2_MIN_EXPECTED = 5.0
"""Expected successes and failures per position below which the chi-square approximation is poor."""


# ---------------------------------------------------------------------------
# Reading and parsing


def read_exposition(source: str) -> tuple[str, float | None]:
    """Read Prometheus exposition text from a file, ``-`` (standard input) or an http(s) URL.

    Returns the text and the time it describes, in seconds since the epoch, when
    known: the fetch time for a URL, the modification time for a file, None for
    standard input.  Every source is bounded (:data:`MAX_SCRAPE_BYTES`) and
    decoded by :mod:`servesim._textfile` (gzip, UTF-8 with or without a
    BOM, BOM-marked UTF-16; anything else is refused naming line and byte).
    """
    import time

    if source == "-":
        buffer = getattr(sys.stdin, "buffer", None)
        if buffer is None:  # a text stream without bytes underneath (tests, embedding)
            text = sys.stdin.read(MAX_SCRAPE_BYTES + 1)
            if len(text) > MAX_SCRAPE_BYTES:
                raise InputError(f"standard input: too large: more than {MAX_SCRAPE_BYTES // 2**20} MiB")
            return text.lstrip("\ufeff"), None
        raw: bytes = buffer.read(MAX_SCRAPE_BYTES + 1)
        if len(raw) > MAX_SCRAPE_BYTES:
            raise InputError(f"standard input: too large: more than {MAX_SCRAPE_BYTES // 2**20} MiB")
        return decode_text(raw, "standard input"), None
    if source.startswith(("http://", "https://")):
        fetched = time.time()
        try:
            with urllib.request.urlopen(source, timeout=10) as resp:
                body: bytes = resp.read(MAX_SCRAPE_BYTES + 1)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise InputError(f"{source}: cannot fetch metrics: {reason}") from exc
        if len(body) > MAX_SCRAPE_BYTES:
            raise InputError(f"{source}: too large: more than {MAX_SCRAPE_BYTES // 2**20} MiB")
        return decode_text(body, source), fetched
    if "://" in source:
        raise InputError(f"{source}: unsupported URL scheme: give a file, '-' or an http(s) URL")
    p = Path(source)
    text = read_text(p, what="", max_bytes=MAX_SCRAPE_BYTES)
    try:
        return text, p.stat().st_mtime
    except OSError as exc:
        raise InputError(f"{source}: cannot read: {exc.strerror or exc}") from exc


@dataclass(frozen=True)
class SpecCounters:
    """Speculative-decoding measurements: one scrape, the difference of two, or a typed-in value.

    vLLM fields are counts (cycles, drafted, accepted, per-position accepted
    ``c_1..c_K`` with ``c_i`` = cycles whose i-th draft was accepted).  When
    ``per_pos_are_rates`` the per-position values are marginal rates p_i from a
    typed-in figure and ``num_drafts`` is unknown.  ``accept_length`` (with the
    bonus token) and ``accept_rate`` (``engine``'s own definition) are reported
    values, e.g. SGLang's gauges.
    """

    source: str
    engine: str
    num_drafts: float | None = None
    num_draft_tokens: float | None = None
    num_accepted_tokens: float | None = None
    accepted_per_pos: tuple[float, ...] = ()
    per_pos_are_rates: bool = False
    accept_length: float | None = None
    accept_rate: float | None = None
    time_s: float | None = None
    time_from: str | None = None  # "sample timestamps", "file time", "fetch time"
    interval_s: float | None = None
    interval_from: str | None = None
    warnings: tuple[str, ...] = ()
    series: tuple[tuple[str, tuple[tuple[str, str], ...], float], ...] = field(default=(), repr=False)
    """vLLM: each counter series (metric, labels but model_name, value), for per-engine differences."""
    created: tuple[tuple[str, tuple[tuple[str, str], ...], float], ...] = field(default=(), repr=False)
    """The same for the counters' ``_created`` times, when exported: a new one marks a restart."""

    def __post_init__(self) -> None:
        if self.engine not in _exporters():
            raise ValueError(f"engine={self.engine!r} is invalid: must be one of {', '.join(_exporters())}")
        for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "accept_length",
                     "accept_rate", "interval_s"):
            v = getattr(self, name)
            if v is not None:
                check_real(name, v, lo=0.0)
        for i, v in enumerate(self.accepted_per_pos):
            check_real(f"accepted_per_pos[{i}]", v, lo=0.0)

    @property
    def positions(self) -> int:
        return len(self.accepted_per_pos)

    @property
    def has_counts(self) -> bool:
        """True when the number of cycles is known (an interval can be given)."""
        return self.num_drafts is not None and not self.per_pos_are_rates


def _bad_line(text: str) -> tuple[int, str] | None:
    """The first sample line the parser rejects on its own, to name it in the error."""
    from prometheus_client.parser import text_string_to_metric_families

    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            list(text_string_to_metric_families(line + "\n"))
        except Exception:
            return number, line
    return None


def _show_series(name: str, labels: dict[str, str]) -> str:
    shown = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{shown}}}"


def _series_lines(text: str, name: str, labels: dict[str, str]) -> list[int]:
    """The lines where the sample ``name{labels}`` appears (to name them in an error)."""
    from prometheus_client.parser import text_string_to_metric_families

    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip()
        if not stripped.startswith(name) or stripped[len(name):len(name) + 1] not in ("{", " ", "\t"):
            continue
        try:
            fams = list(text_string_to_metric_families(stripped + "\n"))
        except Exception:
            continue
        if any(smp.name == name and dict(smp.labels) == labels for f in fams for smp in f.samples):
            found.append(number)
    return found


def _refuse_duplicates(text: str, source: str, families: Sequence[Any]) -> None:
    """A series (metric name and label set) may appear once per scrape; twice is invalid exposition.

    Summing both would count the series twice (two scrapes concatenated into
    one file give an alpha far from either); the first duplicate is an error
    naming it and its lines.
    """
    seen: set[tuple[str, frozenset[tuple[str, str]]]] = set()
    for fam in families:
        for smp in fam.samples:
            if _sample_key(smp.name) is None:
                continue
            key = (smp.name, frozenset(smp.labels.items()))
            if key not in seen:
                seen.add(key)
                continue
            labels = dict(smp.labels)
            lines = _series_lines(text, smp.name, labels)
            where = f"{source}:{lines[1]}" if len(lines) > 1 else source
            also = f" (also line {lines[0]})" if len(lines) > 1 else ""
            raise InputError(
                f"{where}: duplicated series {_show_series(smp.name, labels)}{also}: a scrape lists each "
                "series once (invalid exposition format; two scrapes in one file?)"
            )


def _sample_key(name: str) -> tuple[str, bool] | None:
    """The metric a sample belongs to (``_total`` stripped), and whether it is its ``_created`` time."""
    created = name.endswith("_created")
    base = name[: -len("_created")] if created else name
    base = base[: -len("_total")] if base.endswith("_total") else base
    return (base, created) if base in _metric_engines() else None


def parse_exposition(
    text: str,
    source: str = "<text>",
    *,
    model: str | None = None,
    time_s: float | None = None,
    time_from: str | None = None,
) -> SpecCounters:
    """Extract the speculative-decoding metrics of one scrape.

    Counters are summed over label sets other than ``model_name`` (engines,
    ranks); per-position counters are keyed by their 0-based ``position``.  A
    series (name and label set) that appears twice is invalid exposition and an
    error naming it, never summed twice.
    SGLang gauges with several label sets are averaged, with a warning.  With
    several ``model_name`` values, ``model`` must pick one.  Raises
    :class:`InputError` for unparsable text, no speculative metrics,
    non-finite or negative values, or gaps in the positions.
    """
    from prometheus_client.parser import text_string_to_metric_families

    try:
        families = list(text_string_to_metric_families(text))
    except Exception as exc:
        bad = _bad_line(text)
        where = f"{source}:{bad[0]}: malformed line {bad[1][:100]!r}" if bad else f"{source}: malformed text"
        raise InputError(f"{where}: not Prometheus exposition format ({exc})") from None
    _refuse_duplicates(text, source, families)
    samples: list[tuple[str, dict[str, str], float, float | None]] = []
    created: list[tuple[str, dict[str, str], float]] = []  # counters' creation times (reset markers)
    for fam in families:
        for s in fam.samples:
            found = _sample_key(s.name)
            if found is None:
                continue
            key, is_created = found
            if is_created:
                created.append((key, dict(s.labels), float(s.value)))
            else:
                stamp = None if s.timestamp is None else float(s.timestamp)
                samples.append((key, dict(s.labels), float(s.value), stamp))
    if not samples:
        expected = " or ".join(
            f"{ex.name} counters ({', '.join(m + '_total' for _, m in ex.metrics)})" if ex.counters
            else f"{ex.name} gauges ({', '.join(m for _, m in ex.metrics)})" for ex in _exporters().values()
        )
        raise InputError(f"{source}: no speculative-decoding metrics: expected {expected}; "
                         "is speculative decoding enabled?")
    models = sorted({lab.get("model_name", "") for _, lab, _, _ in samples})
    if model is not None:
        if model not in models:
            raise InputError(f"{source}: no speculative metrics for model_name={model!r}; found {models}")
    elif len(models) > 1:
        raise InputError(
            f"{source}: metrics for several models {models}: choose one with --model"
        )
    chosen = model if model is not None else models[0]
    samples = [s for s in samples if s[1].get("model_name", "") == chosen]
    for key, labels, value, _ in samples:
        if not math.isfinite(value) or value < 0:
            shown = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            raise InputError(f"{source}: {key}{{{shown}}} = {value!r} is invalid: must be finite and >= 0")
    engines = {_metric_engines()[key] for key, _, _, _ in samples}
    if len(engines) > 1:
        names = " and ".join(ex.name for ex in _exporters().values() if ex.engine in engines)
        raise InputError(f"{source}: both {names} speculative metrics found: give one engine's scrape")
    ex = _exporters()[engines.pop()]
    stamps = [ts for _, _, _, ts in samples if ts is not None]
    when = max(stamps) if stamps else time_s
    origin = "sample timestamps" if stamps else (time_from if time_s is not None else None)
    counts = _counters(source, samples, when, ex) if ex.counters else _gauges(source, samples, when, ex)
    born = tuple((key, _series_labels(labels), value) for key, labels, value in created
                 if labels.get("model_name", "") == chosen)
    return replace(counts, time_from=origin, created=born)


def _series_labels(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "model_name"))


def _engine_of(labels: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """One engine's series share every label but ``position``."""
    return tuple(kv for kv in labels if kv[0] != "position")


def _counters(source: str, samples: Sequence[tuple[str, dict[str, str], float, float | None]],
              when: float | None, ex: _Exporter) -> SpecCounters:
    """One scrape (or difference) of an engine exporting cumulative counters (vLLM)."""
    totals: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    per_pos_metric = ex.metric("accepted_per_pos")
    totalled = {ex.metric(role): role for role in ("drafts", "draft_tokens", "accepted")}
    for key, labels, value, _ in samples:
        if key == per_pos_metric:
            raw = labels.get("position")
            try:
                pos = int(raw) if raw is not None else -1
            except ValueError:
                pos = -1
            if pos < 0:
                raise InputError(f"{source}: {per_pos_metric} has position={raw!r}: must be an integer >= 0")
            per_pos[pos] = per_pos.get(pos, 0.0) + value
        elif key in totalled:
            totals[totalled[key]] = totals.get(totalled[key], 0.0) + value
    if per_pos and sorted(per_pos) != list(range(len(per_pos))):
        raise InputError(
            f"{source}: {per_pos_metric} positions {sorted(per_pos)} have gaps: expected 0..{max(per_pos)}"
        )
    return SpecCounters(
        source=source,
        engine=ex.engine,
        num_drafts=totals.get("drafts"),
        num_draft_tokens=totals.get("draft_tokens"),
        num_accepted_tokens=totals.get("accepted"),
        accepted_per_pos=tuple(per_pos[i] for i in range(len(per_pos))),
        time_s=when,
        series=tuple((key, _series_labels(labels), value) for key, labels, value, _ in samples),
    )


def _gauges(source: str, samples: Sequence[tuple[str, dict[str, str], float, float | None]],
            when: float | None, ex: _Exporter) -> SpecCounters:
    """One scrape of an engine exporting windowed gauges (SGLang)."""
    values: dict[str, list[float]] = {}
    for key, _, value, _ in samples:
        values.setdefault(key, []).append(value)
    warnings = []
    for key, vs in values.items():
        if len(vs) > 1:
            warnings.append(f"{key} has {len(vs)} series (ranks?): their plain mean is used")
    length = _mean(values.get(ex.metric("accept_length")))
    rate = _mean(values.get(ex.metric("accept_rate")))
    return SpecCounters(source=source, engine=ex.engine, accept_length=length, accept_rate=rate,
                        time_s=when, warnings=tuple(warnings))


def _mean(xs: Sequence[float] | None) -> float | None:
    return sum(xs) / len(xs) if xs else None


def difference(first: SpecCounters, second: SpecCounters, interval_s: float | None = None) -> SpecCounters:
    """What happened between two scrapes: counter increases over the interval.

    Differences are taken per series and summed, like PromQL's ``increase()``.
    Counters only grow while an engine runs, so an engine (a label set apart
    from ``position``) any of whose counters went down, or whose ``_created``
    time changed, was reset (a restart, or the files given in the wrong
    order): all its series then count from the reset, i.e. the second
    scrape's values, with a warning and no rate per second.  SGLang's
    gauges are not cumulative: the second scrape's values are used, with a
    warning.  The interval is ``interval_s`` if given, else the difference of
    sample timestamps or file times (None if neither is known or it is not
    positive).
    """
    if first.engine != second.engine:
        raise InputError(
            f"{first.source} is a {first.engine} scrape and {second.source} a {second.engine} one"
        )
    warnings = list(first.warnings) + list(second.warnings)
    span = interval_s
    span_from = "--interval-s" if interval_s is not None else None
    if span is None and first.time_s is not None and second.time_s is not None:
        span = second.time_s - first.time_s
        span_from = first.time_from if first.time_from == second.time_from else "times"
        if span < MIN_INTERVAL_S:
            warnings.append(
                f"{second.source} is {span:.3g} s after {first.source} by their {span_from}: too short "
                "to trust, so no rates per second (give --interval-s)"
            )
            span = span_from = None
    ex = _exporters()[second.engine]
    if not ex.counters:
        warnings.append(
            f"{ex.name}'s {ex.short('accept_length')}/{ex.short('accept_rate')} are gauges averaged over "
            f"its last logging window, not counters: the values of {second.source} are used, not a difference"
        )
        return replace(second, interval_s=span, interval_from=span_from, warnings=tuple(warnings))
    if first.positions != second.positions:
        raise InputError(
            f"{first.source} has {first.positions} draft positions and {second.source} has "
            f"{second.positions}: not the same deployment"
        )
    # Per engine: an engine whose counters went down, or whose _created time changed, restarted;
    # its series then count from the restart (all of them: a restarted engine's later position
    # can exceed its old value by chance, and differencing it would be wrong).
    before = {(key, labels): value for key, labels, value in first.series}
    born_before = {(key, labels): value for key, labels, value in first.created}
    restarted = {_engine_of(labels) for key, labels, value in second.series
                 if value < before.get((key, labels), 0.0)}
    restarted |= {_engine_of(labels) for key, labels, value in second.created
                  if born_before.get((key, labels), value) != value}
    deltas: list[tuple[str, dict[str, str], float, float | None]] = []
    for key, labels, value in second.series:
        prev = before.pop((key, labels), 0.0)
        deltas.append((key, dict(labels), value - (0.0 if _engine_of(labels) in restarted else prev), None))
    if restarted:
        names = ", ".join(",".join(f"{k}={v}" for k, v in e) or "(no labels)" for e in sorted(restarted))
        warnings.append(
            f"counters were reset between {first.source} and {second.source} (engine {names}): a "
            "restart, or the files are in the wrong order; those counts start at the reset, and "
            "there is no rate per second"
        )
        span = span_from = None
    if before:
        warnings.append(
            f"{len(before)} series of {first.source} are missing from {second.source}: left out"
        )
    delta = _counters(f"{first.source} -> {second.source}", deltas, second.time_s, ex)
    return replace(delta, time_from=second.time_from, interval_s=span, interval_from=span_from,
                   warnings=tuple(warnings))


def counters_from_value(
    definition: str,
    values: Sequence[float],
    *,
    engine: str | None = None,
    length_includes_bonus: bool = True,
) -> SpecCounters:
    """Wrap a typed-in published figure so that :func:`fit_alpha` can convert it.

    * ``accept-length``: one mean accepted length (with the bonus token unless
      ``length_includes_bonus`` is False);
    * ``accept-rate``: one rate in ``engine``'s definition (vLLM
      ``E[A]/k``, SGLang ``E[n]/(k+1)``);
    * ``per-position``: the marginal rates p_1 >= p_2 >= ... (vLLM's
      per-position acceptance rates).

    ``engine`` None: the default engine (engines.toml ``default_engine``).
    """
    if definition not in DEFINITIONS:
        raise InputError(f"--from {definition!r}: must be one of {', '.join(DEFINITIONS)}")
    if engine is None:
        engine = str(engines_file()["default_engine"])
    if engine not in _exporters():
        raise InputError(f"engine {engine!r}: must be one of {', '.join(_exporters())}")
    vals = [float(v) for v in values]
    if not vals or not all(math.isfinite(v) and v >= 0 for v in vals):
        raise InputError(f"--value {values!r}: must be finite numbers >= 0")
    if definition != "per-position" and len(vals) != 1:
        raise InputError(f"--value: {definition} takes one number, got {len(vals)}")
    source = f"--value ({definition})"
    if definition == "per-position":
        return SpecCounters(source=source, engine=engine, num_drafts=1.0,
                            accepted_per_pos=tuple(vals), per_pos_are_rates=True)
    if definition == "accept-length":
        length = vals[0] + (0.0 if length_includes_bonus else 1.0)
        return SpecCounters(source=source, engine=engine, accept_length=length)
    return SpecCounters(source=source, engine=engine, accept_rate=vals[0])


# ---------------------------------------------------------------------------
# Statistics


def chi2_sf(x: float, df: int) -> float:
    """P(X > x) for X chi-square with ``df`` degrees of freedom (standard library only).

    Closed forms of the regularized upper incomplete gamma Q(df/2, x/2), y = x/2:
    even df = 2m: ``e^-y sum_{j<m} y^j / j!``;
    odd df = 2m+1: ``erfc(sqrt y) + e^-y sum_{j=1}^{m} y^(j-1/2) / Gamma(j+1/2)``.
    Terms are summed in log space so that large x does not overflow.
    """
    d = check_int("df", df, lo=1)
    xx = check_real("x", x, lo=0.0)
    if xx == 0.0:
        return 1.0
    y = xx / 2.0
    if d % 2 == 0:
        total = sum(math.exp(-y + j * math.log(y) - math.lgamma(j + 1)) for j in range(d // 2))
    else:
        total = math.erfc(math.sqrt(y)) + sum(
            math.exp(-y + (j - 0.5) * math.log(y) - math.lgamma(j + 0.5)) for j in range(1, d // 2 + 1)
        )
    return min(1.0, total)


def wilson_interval(successes: float, trials: float, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (good near 0 and 1).

    ``(p + z^2/2T +- z sqrt(p(1-p)/T + z^2/4T^2)) / (1 + z^2/T)`` with p = S/T.
    """
    t = check_real("trials", trials, lo=0.0, lo_open=True)
    s = check_real("successes", successes, lo=0.0, hi=t)
    p = s / t
    denom = 1.0 + z * z / t
    center = (p + z * z / (2 * t)) / denom
    half = z * math.sqrt(p * (1 - p) / t + z * z / (4 * t * t)) / denom
    return max(0.0, center - half), min(1.0, center + half)


def alpha_from_length(mean_length: float, k: int) -> float:
    """The alpha with ``E[n] = sum_{i=0}^{k} alpha^i`` equal to ``mean_length`` (bonus included).

    E[n] rises from 1 (alpha = 0) to k + 1 (alpha = 1), so bisection finds the
    unique root; a length outside [1, k + 1] is inconsistent with k drafts.
    """
    kk = check_int("k", k, lo=1)
    length = check_real("mean_length", mean_length, lo=1.0, hi=kk + 1.0)
    if length == 1.0:
        return 0.0
    if length == kk + 1.0:
        return 1.0
    return alpha_at_tokens(kk, length)


@dataclass(frozen=True)
class Definitions:
    """One acceptance behaviour in every definition (see the module docstring).

    ``marginal[i-1] = P(A >= i)``, ``conditional[i-1] = P(A >= i | A >= i-1)``.
    """

    k: int
    marginal: tuple[float, ...]
    conditional: tuple[float | None, ...]
    mean_accepted_no_bonus: float
    mean_accepted_with_bonus: float
    vllm_acceptance_rate: float
    sglang_accept_rate: float


def definitions_at(alpha: float, k: int) -> Definitions:
    """Every definition implied by i.i.d. acceptance ``alpha`` with ``k`` drafts per cycle.

    p_i = alpha^i; q_i = alpha; E[A] = sum_{i=1}^{k} alpha^i; E[n] = 1 + E[A];
    vLLM rate E[A]/k; SGLang rate E[n]/(k+1).
    """
    a = check_real("alpha", alpha, lo=0.0, hi=1.0)
    kk = check_int("k", k, lo=1)
    marginal = tuple(a**i for i in range(1, kk + 1))
    return _definitions(kk, marginal)


def _definitions(k: int, marginal: Sequence[float]) -> Definitions:
    prev = [1.0, *marginal[:-1]]
    conditional = tuple(p / q if q > 0 else None for p, q in zip(marginal, prev, strict=True))
    ea = float(sum(marginal))
    return Definitions(
        k=k,
        marginal=tuple(marginal),
        conditional=conditional,
        mean_accepted_no_bonus=ea,
        mean_accepted_with_bonus=1.0 + ea,
        vllm_acceptance_rate=ea / k,
        sglang_accept_rate=(1.0 + ea) / (k + 1),
    )


@dataclass(frozen=True)
class IidTest:
    """Likelihood-ratio (G) test of one alpha against one conditional rate per position."""

    statistic: float
    df: int
    p_value: float
    max_abs_deviation: float  # max_i |q_i - alpha_hat| over positions with trials
    consistent_at_5pct: bool


@dataclass(frozen=True)
class OptimalK:
    """The best draft length for an alpha at one utilization (servesim.model.speculative)."""

    u: float
    k: int
    speedup: float
    speedup_at_measured_k: float
    k_at_alpha_lo: int | None = None
    k_at_alpha_hi: int | None = None


@dataclass(frozen=True)
class AlphaFit:
    """The i.i.d. alpha fitted from telemetry, with the evidence and its consequences.

    ``input_definition`` says which definition the fit used; ``observed`` holds
    the definitions as measured (None where the data do not say), ``iid`` what
    the fitted alpha implies for each.
    """

    source: str
    engine: str
    input_definition: str
    input_value: float | tuple[float, ...]
    k: int
    alpha: float
    alpha_lo: float | None
    alpha_hi: float | None
    interval: str
    num_drafts: float | None
    observed: dict[str, Any]
    iid: Definitions
    iid_test: IidTest | None
    optimal: tuple[OptimalK, ...]
    d: float
    c: float
    interval_s: float | None
    interval_from: str | None
    drafts_per_s: float | None
    warnings: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _xlogx_ratio(x: float, p_hat: float, p0: float) -> float:
    """x ln(p_hat / p0) with the convention 0 ln(...) = 0."""
    return 0.0 if x == 0 else x * math.log(p_hat / p0)


def _iid_test(n: float, c: Sequence[float], alpha: float) -> tuple[IidTest | None, list[str]]:
    warnings: list[str] = []
    trials = [n, *c[:-1]]
    used = [(t, s) for t, s in zip(trials, c, strict=True) if t > 0]
    if len(used) < 2:
        return None, ["a single position with drafts cannot test i.i.d. acceptance"]
    if alpha in (0.0, 1.0):
        g = 0.0  # every position at the boundary: the saturated fit is the same point
    else:
        g = 2.0 * sum(
            _xlogx_ratio(s, s / t, alpha) + _xlogx_ratio(t - s, (t - s) / t, 1.0 - alpha)
            for t, s in used
        )
    g = max(g, 0.0)
    df = len(used) - 1
    smallest = min(min(t * alpha, t * (1 - alpha)) for t, _ in used)
    if smallest < _CHI2_MIN_EXPECTED:
        warnings.append(
            f"some position expects fewer than {_CHI2_MIN_EXPECTED:g} accepts or rejects: "
            "the chi-square p-value is approximate"
        )
    p = chi2_sf(g, df)
    dev = max(abs(s / t - alpha) for t, s in used)
    return IidTest(g, df, p, dev, p >= 0.05), warnings


def _resolve_k(counts: SpecCounters, k: int | None) -> tuple[int, list[str]]:
    warnings: list[str] = []
    ex = _exporters()[counts.engine]
    if counts.positions:
        if k is not None and k != counts.positions:
            raise InputError(
                f"--k {k} contradicts {counts.source}: it has {counts.positions} draft positions"
            )
        kk = counts.positions
        if counts.num_drafts and counts.num_draft_tokens is not None and not counts.per_pos_are_rates:
            mean_drafted = counts.num_draft_tokens / counts.num_drafts
            if mean_drafted < kk * (1 - 1e-6):
                warnings.append(
                    f"cycles drafted {mean_drafted:.3f} tokens on average, fewer than the {kk} positions: "
                    "undrafted positions count as rejections, so alpha and the per-position rates "
                    "at the last positions are biased low"
                )
        return kk, warnings
    if ex.counters and counts.num_drafts and counts.num_draft_tokens is not None:
        mean_drafted = counts.num_draft_tokens / counts.num_drafts
        if k is not None:
            if abs(mean_drafted - k) > 1e-6 * k:
                warnings.append(f"cycles drafted {mean_drafted:.3f} tokens on average, not --k {k}")
            return k, warnings
        if abs(mean_drafted - round(mean_drafted)) <= 1e-6 * mean_drafted and round(mean_drafted) >= 1:
            return round(mean_drafted), warnings
        raise InputError(
            f"{counts.source}: cycles drafted {mean_drafted:.3f} tokens on average (not a whole number) "
            "and there are no per-position counters: give the draft length with --k"
        )
    if not ex.counters and counts.accept_length and counts.accept_rate:
        # the gauges' rate is the length over a cycle's draft tokens (k + 1 for a chain draft)
        ndt = counts.accept_length / counts.accept_rate
        ratio = f"{ex.short('accept_length')} / {ex.short('accept_rate')} = {ndt:.2f}"
        if k is not None:
            if abs(ndt - (k + 1)) > 0.02 * (k + 1):
                warnings.append(
                    f"{ratio} draft tokens per cycle, not "
                    f"k + 1 = {k + 1}: a tree draft (topk > 1)? the chain model is an approximation"
                )
            return k, warnings
        if abs(ndt - round(ndt)) <= 0.02 * ndt and round(ndt) >= 2:
            return round(ndt) - 1, warnings
        raise InputError(
            f"{counts.source}: {ratio} is not a whole number of "
            "draft tokens (k + 1): give the draft length with --k"
        )
    if k is None:
        raise InputError(f"{counts.source}: the draft length is not in the input: give it with --k")
    return k, warnings


def _check_counters(counts: SpecCounters, ex: _Exporter) -> list[str]:
    """Consistency of an engine's counters (vLLM's): never fit an alpha from contradictory numbers."""
    warnings: list[str] = []
    n, s, dtok = counts.num_drafts, counts.num_accepted_tokens, counts.num_draft_tokens
    c = counts.accepted_per_pos
    src = counts.source
    if counts.per_pos_are_rates:
        if any(p > 1.0 for p in c):
            raise InputError(f"{src}: per-position rates {list(c)} must be in [0, 1]")
    elif n is None:
        if c or s is not None:
            raise InputError(f"{src}: {ex.metric('drafts')}_total is missing: the number of cycles is needed")
        raise InputError(f"{src}: no {ex.name} speculative counters with values")
    elif n == 0:
        raise InputError(
            f"{src}: {ex.metric('drafts')} is 0 (no speculative cycles in this interval): nothing to fit"
        )
    else:
        if s is not None and dtok is not None and s > dtok:
            raise InputError(
                f"{src}: accepted tokens {s:g} exceed drafted tokens {dtok:g}: inconsistent counters"
            )
        if c and c[0] > n:
            raise InputError(
                f"{src}: position 0 accepted {c[0]:g} times in {n:g} cycles: inconsistent counters"
            )
        if s is not None and c and abs(sum(c) - s) > max(1.0, 1e-6 * s):
            warnings.append(
                f"per-position counts sum to {sum(c):g} but {ex.metric('accepted')} is {s:g} "
                "(scraped mid-update?): the per-position counts are used"
            )
    for i in range(1, len(c)):
        if c[i] > c[i - 1] * (1 + 1e-9):
            raise InputError(
                f"{src}: position {i} accepted more often ({c[i]:g}) than position {i - 1} ({c[i - 1]:g}): "
                "a draft is accepted only after every earlier one, so counts cannot grow with position"
            )
    return warnings


def fit_alpha(
    counts: SpecCounters,
    *,
    definition: str | None = None,
    k: int | None = None,
    util: float = 0.0,
    d: float = DEFAULT_D,
    c: float = DEFAULT_C,
    k_max: int = DEFAULT_K_MAX,
    z: float = Z_95,
) -> AlphaFit:
    """Fit the i.i.d. acceptance alpha and price the best draft length with it.

    ``definition`` picks the input (:data:`DEFINITIONS`); by default the
    richest available: per-position counts, else the mean accepted length,
    else the acceptance rate.  ``k`` is the draft length of the measurement
    when the input does not carry it.  Returns the MLE (per-position) or the
    moment estimate (length, rate) with its interval when the number of
    cycles is known, the i.i.d. test, every definition observed and implied,
    and the optimal k at u = 0 and at ``util`` (servesim.model.speculative).
    """
    u = check_real("util", util, lo=0.0, hi=1.0, hi_open=True)
    dd = check_real("d", d, lo=0.0)
    cc = check_real("c", c, lo=0.0)
    kmax = check_int("k_max", k_max, lo=1)
    warnings = list(counts.warnings)
    kk, w = _checked_k(counts, k)
    warnings += w

    n = counts.num_drafts if counts.has_counts else None
    length_obs = _observed_length(counts, kk)
    rate_obs = _observed_rate(counts)
    chosen = _chosen_definition(counts, definition, length_obs, rate_obs)
    if chosen == "per-position":
        est, w = _fit_per_position(counts, n, z)
    else:
        est, w = _fit_mean_length(counts, chosen, kk, n, z, length_obs, rate_obs)
    warnings += w

    iid = definitions_at(est.alpha, kk)
    observed = _observed(counts, kk, length_obs, rate_obs)
    optimal = _optimal_ks(est, kk, dd, cc, u, kmax)
    warnings += _fit_warnings(est, kk, optimal)
    rate_s = None
    if counts.interval_s and counts.has_counts and counts.num_drafts is not None:
        rate_s = counts.num_drafts / counts.interval_s
    return AlphaFit(
        source=counts.source,
        engine=counts.engine,
        input_definition=chosen,
        input_value=est.input_value,
        k=kk,
        alpha=est.alpha,
        alpha_lo=est.lo,
        alpha_hi=est.hi,
        interval=est.interval,
        num_drafts=n,
        observed=observed,
        iid=iid,
        iid_test=est.iid_test,
        optimal=optimal,
        d=dd,
        c=cc,
        interval_s=counts.interval_s,
        interval_from=counts.interval_from,
        drafts_per_s=rate_s,
        warnings=tuple(warnings),
    )


@dataclass(frozen=True)
class _Estimate:
    """Alpha fitted from one definition: the input it came from, the point, its interval (None
    without the number of cycles) and how the interval was made, and the i.i.d. test if any."""

    input_value: float | tuple[float, ...]
    alpha: float
    lo: float | None
    hi: float | None
    interval: str
    iid_test: IidTest | None = None


def _checked_k(counts: SpecCounters, k: int | None) -> tuple[int, list[str]]:
    """The measurement's draft length, after refusing inconsistent counters (vLLM) or a mean
    accepted length below 1 (SGLang); with the checks' warnings."""
    warnings: list[str] = []
    ex = _exporters()[counts.engine]
    if counts.positions or (ex.counters and counts.num_drafts is not None):
        warnings += _check_counters(counts, ex)
    if not ex.counters and counts.accept_length is not None and counts.accept_length < 1.0:
        raise InputError(
            f"{counts.source}: {ex.metric('accept_length')} = {counts.accept_length:g} is below 1 (it counts "
            "the bonus token): speculative decoding is off or no decode step has been logged yet"
        )
    kk, w = _resolve_k(counts, k)
    warnings += w
    return kk, warnings


def _chosen_definition(counts: SpecCounters, definition: str | None, length_obs: float | None,
                       rate_obs: float | None) -> str:
    """The definition to fit from: ``definition``, else the richest the input has (per-position,
    accept-length, accept-rate); refuses an unknown one or one the input lacks."""
    available = []
    if counts.positions:
        available.append("per-position")
    if length_obs is not None:
        available.append("accept-length")
    if rate_obs is not None:
        available.append("accept-rate")
    if not available:
        raise InputError(f"{counts.source}: no acceptance data to fit")
    chosen = definition or available[0]
    if chosen not in DEFINITIONS:
        raise InputError(f"--from {chosen!r}: must be one of {', '.join(DEFINITIONS)}")
    if chosen not in available:
        raise InputError(
            f"--from {chosen}: {counts.source} has no {chosen} data (it has: {', '.join(available)})"
        )
    return chosen


def _fit_per_position(counts: SpecCounters, n: float | None, z: float) -> tuple[_Estimate, list[str]]:
    """The MLE of alpha from per-position accepts (S / (S + F)), its Wilson interval and the i.i.d.
    test when the number of cycles ``n`` is known; with the test's warnings."""
    warnings: list[str] = []
    iid_test: IidTest | None = None
    lo: float | None = None
    hi: float | None = None
    norm = n if n is not None else 1.0
    marginal = [ci / norm for ci in counts.accepted_per_pos]
    accepted = sum(marginal)  # S / N
    failed = 1.0 - marginal[-1]  # F / N: cycles that ended in a rejection
    alpha = accepted / (accepted + failed) if accepted + failed > 0 else 0.0
    if n is not None:
        trials = n * (accepted + failed)
        lo, hi = wilson_interval(alpha * trials, trials, z)
        interval = "95% Wilson score interval on T = S + F examined drafts (cycles independent)"
        iid_test, warnings = _iid_test(n, counts.accepted_per_pos, alpha)
    else:
        interval = "none: the number of cycles behind typed-in rates is unknown"
    return _Estimate(tuple(marginal), alpha, lo, hi, interval, iid_test), warnings


def _fit_mean_length(counts: SpecCounters, chosen: str, kk: int, n: float | None, z: float,
                     length_obs: float | None, rate_obs: float | None) -> tuple[_Estimate, list[str]]:
    """The moment estimate of alpha from the mean accepted length (given, or from the engine's
    acceptance rate), with the inverted normal interval of the mean when ``n`` is known."""
    warnings: list[str] = []
    lo: float | None = None
    hi: float | None = None
    input_value: float
    if chosen == "accept-length":
        assert length_obs is not None
        length = input_value = length_obs
    else:
        assert rate_obs is not None
        input_value = rate_obs
        length = RATES[_exporters()[counts.engine].rate][1](rate_obs, kk)
    if not 1.0 <= length <= kk + 1.0 + 1e-9:
        raise InputError(
            f"{counts.source}: mean accepted length {length:.4g} (bonus included) is outside "
            f"[1, k + 1] = [1, {kk + 1}]: inconsistent with k = {kk} drafts per cycle"
        )
    length = min(length, kk + 1.0)
    alpha = alpha_from_length(length, kk)
    if n is not None:
        sd = math.sqrt(_var_accepted(alpha, kk) / n)
        lo = alpha_from_length(max(1.0, length - z * sd), kk)
        hi = alpha_from_length(min(kk + 1.0, length + z * sd), kk)
        interval = "95% normal interval of the mean length over N cycles, inverted (i.i.d. variance)"
    else:
        interval = "none: the number of cycles behind the figure is unknown"
    if counts.positions:
        warnings.append("per-position counts are available: --from per-position gives the MLE")
    return _Estimate(input_value, alpha, lo, hi, interval), warnings


def _optimal_ks(est: _Estimate, kk: int, d: float, c: float, u: float, k_max: int) -> tuple[OptimalK, ...]:
    """The optimal draft length at u = 0 and at ``u`` for the fitted alpha, its speedup and the speedup
    at the measured k, and the optimal k at each end of alpha's interval."""
    alpha, lo, hi = est.alpha, est.lo, est.hi
    optimal = []
    for uu in sorted({0.0, u}):
        kopt = optimal_k(alpha, d, c, uu, k_max)
        optimal.append(OptimalK(
            u=uu,
            k=kopt,
            speedup=speedup(kopt, alpha, d, c, uu),
            speedup_at_measured_k=speedup(kk, alpha, d, c, uu),
            k_at_alpha_lo=optimal_k(lo, d, c, uu, k_max) if lo is not None else None,
            k_at_alpha_hi=optimal_k(hi, d, c, uu, k_max) if hi is not None else None,
        ))
    return tuple(optimal)


def _fit_warnings(est: _Estimate, kk: int, optimal: Sequence[OptimalK]) -> list[str]:
    """What to doubt in a fit: an optimal k beyond the measured positions, per-position rates that
    reject i.i.d. acceptance."""
    warnings: list[str] = []
    if any(o.k > kk for o in optimal):
        warnings.append(
            f"the optimal k exceeds the {kk} measured positions: it extrapolates the i.i.d. model"
        )
    if est.iid_test is not None and not est.iid_test.consistent_at_5pct:
        warnings.append(
            "per-position rates reject i.i.d. acceptance (p < 0.05): E[n] at other k will differ from "
            "the geometric formula; see the per-position table"
        )
    return warnings


def _var_accepted(alpha: float, k: int) -> float:
    """Var(A) under i.i.d.: E[A] = sum p_i, E[A^2] = sum (2i - 1) p_i with p_i = alpha^i."""
    ea = sum(alpha**i for i in range(1, k + 1))
    ea2 = sum((2 * i - 1) * alpha**i for i in range(1, k + 1))
    return max(ea2 - ea * ea, 0.0)


def _observed_length(counts: SpecCounters, k: int) -> float | None:
    """Mean accepted length with the bonus, as measured (vLLM: 1 + S/N)."""
    if counts.accept_length is not None:
        return counts.accept_length
    if _exporters()[counts.engine].counters and counts.has_counts and counts.num_drafts:
        if counts.num_accepted_tokens is not None:
            return 1.0 + counts.num_accepted_tokens / counts.num_drafts
        if counts.positions:
            return 1.0 + sum(counts.accepted_per_pos) / counts.num_drafts
    if counts.per_pos_are_rates:
        return 1.0 + sum(counts.accepted_per_pos)
    return None


def _observed_rate(counts: SpecCounters) -> float | None:
    """The engine's own acceptance rate, as measured (from counters: accepted / drafted)."""
    if counts.accept_rate is not None:
        return counts.accept_rate
    if (_exporters()[counts.engine].counters and counts.has_counts and counts.num_draft_tokens
            and counts.num_accepted_tokens is not None):
        return counts.num_accepted_tokens / counts.num_draft_tokens
    return None


def _observed(counts: SpecCounters, k: int, length: float | None, rate: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "marginal": None,
        "conditional": None,
        "mean_accepted_no_bonus": None if length is None else length - 1.0,
        "mean_accepted_with_bonus": length,
        "vllm_acceptance_rate": None,
        "sglang_accept_rate": None,
    }
    if counts.positions:
        norm = counts.num_drafts if counts.has_counts and counts.num_drafts else 1.0
        defs = _definitions(k, [x / norm for x in counts.accepted_per_pos])
        out["marginal"] = list(defs.marginal)
        out["conditional"] = list(defs.conditional)
    ex = _exporters()[counts.engine]
    for key, (of_length, _) in RATES.items():
        if key == ex.rate:  # the engine's own, as measured
            out[key] = rate
            if rate is None and ex.counters and counts.per_pos_are_rates and length is not None:
                out[key] = of_length(length, k)  # typed-in per-position rates: every cycle drafts k tokens
        elif length is not None:
            out[key] = of_length(length, k)
    return out


def read_counters(
    sources: Iterable[str],
    *,
    model: str | None = None,
    interval_s: float | None = None,
) -> SpecCounters:
    """Read one scrape (cumulative since start) or two (the interval between them)."""
    srcs = list(sources)
    if not 1 <= len(srcs) <= 2:
        raise InputError(f"give one or two scrapes, got {len(srcs)}")
    scrapes = []
    for s in srcs:
        text, when = read_exposition(s)
        origin = "fetch time" if s.startswith(("http://", "https://")) else "file time"
        scrapes.append(parse_exposition(text, s, model=model, time_s=when, time_from=origin))
    if len(scrapes) == 1:
        return replace(scrapes[0], interval_s=interval_s,
                       interval_from="--interval-s" if interval_s is not None else None)
    return difference(scrapes[0], scrapes[1], interval_s)


CURVE_STATISTICS: tuple[str, ...] = ("mean_accepted_with_bonus", "vllm_acceptance_rate", "sglang_accept_rate")
"""The measured figures fit-alpha can draw against alpha (fields of :class:`Definitions`), in order of
preference after the input's own definition."""


def _measured_statistic(fit: Mapping[str, Any]) -> str | None:
    """The ``observed`` key of the figure alpha was fitted to (the input's definition first)."""
    obs = fit["observed"]
    ex = _exporters().get(str(fit.get("engine")))
    own = [ex.rate] if ex is not None else []
    prefer = {"accept-length": ["mean_accepted_with_bonus"],
              "accept-rate": [*own, *(key for key in RATES if key not in own)]}
    keys = [*prefer.get(fit.get("input_definition", ""), []), *CURVE_STATISTICS]
    return next((key for key in keys if obs.get(key) is not None), None)


def acceptance_curve(fit: Mapping[str, Any], points: int = 201) -> dict[str, Any] | None:
    """The figure an alpha was fitted to, over alpha in [0, 1] at ``k`` drafts (i.i.d. acceptance,
    :func:`definitions_at`), for a fit (``AlphaFit.as_dict()``) without per-position counts; None
    when the fit has per-position counts or no single measured figure."""
    if fit["observed"].get("marginal"):
        return None
    key = _measured_statistic(fit)
    if key is None:
        return None
    k = int(fit["k"])
    alphas = [i / (points - 1) for i in range(points)]
    return {"statistic": key, "alpha": alphas,
            "value": [float(getattr(definitions_at(a, k), key)) for a in alphas]}
