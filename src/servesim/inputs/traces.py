"""Request traces: streaming readers, a summary, a plot and the arrays for replay.

Three public formats are read, one request per line, in arrival order:

* **Azure LLM inference 2023** (Patel et al., Splitwise, ISCA 2024; Azure
  Public Dataset, CC-BY 4.0): CSV ``TIMESTAMP,ContextTokens,GeneratedTokens``
  with wall-clock timestamps such as ``2023-11-16 18:17:03.9799600``.
* **Mooncake FAST'25** (Qin et al.; kvcache-ai/Mooncake, Apache-2.0): JSON
  lines ``{"timestamp": ms, "input_length": n, "output_length": n,
  "hash_ids": [...]}`` where ``hash_ids`` are prefix-block hashes of 512-token
  blocks: equal leading ids mean a reusable prefix KV cache.
* **BurstGPT** (Wang et al., arXiv:2401.17644; CC-BY 4.0): CSV with
  ``Timestamp`` in seconds and ``Request tokens``/``Response tokens`` (other
  columns such as ``Session ID``, ``Model``, ``Log Type`` are ignored).  Failed
  requests appear with 0 response tokens and are kept (the summary counts them).

Readers stream: one line at a time is read (through
:func:`servesim._textfile.iter_lines`: plain or gzip, UTF-8 with or
without a BOM or BOM-marked UTF-16, lines of at most 1 MiB), parsed and
checked; :func:`load_trace` keeps only four compact numeric arrays (8 bytes per
value), never the text.  Token counts are integers in [0, 10^9], timestamps
finite.  Every malformed input raises :class:`InputError` naming the file, the
line and the field; a trace with nothing to serve (every prompt or every output
0 tokens) is refused by :func:`load_trace` itself, so every command that reads
traces refuses it with the same message.  numpy is imported only by the functions that build
arrays; the trace's figure is drawn by :func:`servesim.render.simfigures.plot_trace`.
"""

from __future__ import annotations

import csv
import math
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import asdict, dataclass, replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from servesim._checks import InputError, check_int, check_real
from servesim._textfile import iter_lines, parse_count, parse_json, parse_number, shown
from servesim.model.serving import Workload

if TYPE_CHECKING:

    import numpy as np
    import numpy.typing as npt

__all__ = [
    "AZURE_HEADER",
    "BURSTGPT_COLUMNS",
    "MOONCAKE_BLOCK_TOKENS",
    "TRACE_FORMATS",
    "InputError",
    "LengthStats",
    "PrefixStats",
    "TraceArrays",
    "TraceRequest",
    "TraceSummary",
    "csv_records",
    "detect_format",
    "iter_requests",
    "load_trace",
    "summarize_trace",
    "workload_from_trace",
]

TRACE_FORMATS: tuple[str, ...] = ("azure", "mooncake", "burstgpt")
"""Formats :func:`detect_format` recognises."""

AZURE_HEADER: tuple[str, ...] = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
"""Columns of the Azure LLM inference trace CSV, in order."""

BURSTGPT_COLUMNS: tuple[str, ...] = ("Timestamp", "Request tokens", "Response tokens")
"""The BurstGPT columns used (the file has more; order does not matter)."""

MOONCAKE_BLOCK_TOKENS = 512
"""Tokens per ``hash_ids`` block in the Mooncake FAST'25 traces (their README)."""

_MOONCAKE_KEYS: tuple[str, ...] = ("timestamp", "input_length", "output_length")
_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0)
_Row_co = TypeVar("_Row_co", covariant=True)


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace.

    ``arrival_s`` counts from the trace's first request; ``hash_ids`` is empty
    unless the format carries prefix-block hashes (Mooncake).
    """

    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        check_real("arrival_s", self.arrival_s, lo=0.0)
        check_int("prompt_tokens", self.prompt_tokens, lo=0)
        check_int("output_tokens", self.output_tokens, lo=0)


# ---------------------------------------------------------------------------
# Opening and format detection


def _first_line(path: str | Path) -> tuple[int, str]:
    with closing(iter_lines(path)) as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                return number, line.strip()
    raise InputError(f"{path}: empty file: no requests")


def _csv_fields(path: str | Path, number: int, line: str) -> list[str]:
    try:
        return [f.strip() for f in next(csv.reader([line]))]
    except csv.Error as exc:
        raise InputError(_csv_error(path, number, exc)) from None


def _csv_error(path: str | Path, line: int, exc: csv.Error, what: str = "trace line") -> str:
    if "field limit" in str(exc):
        return f"{path}:{line}: a field is longer than {csv.field_size_limit():,} characters: not a {what}"
    return f"{path}:{line}: not valid CSV: {exc}"


class _CsvReader(Protocol[_Row_co]):
    @property
    def line_num(self) -> int: ...
    def __next__(self) -> _Row_co: ...


def csv_records(path: str | Path, reader: _CsvReader[_Row_co], what: str = "trace line") -> Iterator[_Row_co]:
    """The rows of a ``csv.reader`` or ``csv.DictReader``, with its errors (a huge field, a NUL) as
    :class:`InputError` naming the file and the line (``what`` a line should have been)."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(_csv_error(path, reader.line_num, exc, what)) from None
        yield row


def detect_format(path: str | Path) -> str:
    """Which of :data:`TRACE_FORMATS` the file is, from its first non-blank line.

    A line starting with ``{`` is Mooncake JSONL; a CSV header equal to
    :data:`AZURE_HEADER` is Azure; one containing every
    :data:`BURSTGPT_COLUMNS` is BurstGPT.  Anything else is an error that
    shows the header found and the ones expected.
    """
    number, first = _first_line(path)
    if first.startswith("{"):
        return "mooncake"
    fields = _csv_fields(path, number, first)
    if tuple(fields) == AZURE_HEADER:
        return "azure"
    if set(BURSTGPT_COLUMNS) <= set(fields):
        return "burstgpt"
    raise InputError(
        f"{path}:{number}: unrecognised header {shown(first, 120)}: expected the Azure header "
        f"{','.join(AZURE_HEADER)!r}, a BurstGPT header with columns "
        f"{', '.join(BURSTGPT_COLUMNS)}, or Mooncake JSON lines"
    )


# ---------------------------------------------------------------------------
# Field parsers (each raises InputError naming file, line and field)


def _length(raw: object, path: str, line: int, name: str) -> int:
    """A token count: an integer in [0, 10^9] (integral floats such as ``12.0`` accepted)."""
    return parse_count(raw, f"{path}:{line}", name)


def _seconds(raw: object, path: str, line: int, name: str, units_per_s: float) -> float:
    """A numeric timestamp in seconds (``units_per_s`` = 1000 for milliseconds): finite and >= 0."""
    return parse_number(raw, f"{path}:{line}", name, lo=0.0) / units_per_s


class _AzureClock:
    """Parse ``YYYY-MM-DD HH:MM:SS[.fffffff][Z|+HH:MM]`` to seconds since the first one.

    The files carry 7 fractional digits (100 ns); ``datetime.fromisoformat``
    accepts only 3 or 6 before Python 3.11, so the fields are split by hand.
    Seconds are counted from the first timestamp's day so that the float keeps
    sub-microsecond resolution (an absolute epoch value would not).
    """

    def __init__(self) -> None:
        self._day0: int | None = None
        self._days: dict[str, int] = {}

    def __call__(self, raw: str, path: str, line: int) -> float:
        text = raw.strip()
        try:
            day_s, clock = text.replace("T", " ", 1).split(" ", 1)
            day = self._days.get(day_s)
            if day is None:
                y, m, d = (int(p) for p in day_s.split("-"))
                day = self._days.setdefault(day_s, date(y, m, d).toordinal())
            offset_s = 0.0
            if clock.endswith("Z"):
                clock = clock[:-1]
            elif len(clock) > 8 and clock[-6] in "+-" and clock[-3] == ":":
                sign = 1.0 if clock[-6] == "+" else -1.0
                offset_s = sign * (int(clock[-5:-3]) * 3600 + int(clock[-2:]) * 60)
                clock = clock[:-6]
            hh, mm, ss = clock.split(":")
            h, m_, s = int(hh), int(mm), float(ss)
            if not (0 <= h < 24 and 0 <= m_ < 60 and 0 <= s < 61):
                raise ValueError
        except (ValueError, OverflowError):
            raise InputError(
                f"{path}:{line}: TIMESTAMP={shown(raw, 60)} is not a timestamp like "
                "2023-11-16 18:17:03.9799600"
            ) from None
        if self._day0 is None:
            self._day0 = day
        return (day - self._day0) * 86400.0 + h * 3600.0 + m_ * 60.0 + s - offset_s


# ---------------------------------------------------------------------------
# Row generators: (arrival_s, prompt, output, hash_ids or None, line number)

_Row = tuple[float, int, int, "list[int] | None", int]


def _csv_rows(path: str, lines: Iterable[str], fmt: str) -> Iterator[tuple[str, int, list[str]]]:
    """Yield (timestamp text, line, [prompt text, output text]) after checking the header."""
    reader = csv.reader(lines, skipinitialspace=True)
    rows = csv_records(path, reader)
    header: list[str] = []
    for first in rows:  # the first non-blank row is the header
        header = [h.strip().lstrip("\ufeff") for h in first]
        if any(header):
            break
    if not any(header):
        raise InputError(f"{path}: empty file: no requests")
    header_line = reader.line_num
    if fmt == "azure":
        if tuple(header) != AZURE_HEADER:
            raise InputError(
                f"{path}:{header_line}: header {shown(','.join(header), 120)} is not the Azure trace header "
                f"{','.join(AZURE_HEADER)!r}"
            )
        cols = [0, 1, 2]
    else:
        missing = [c for c in BURSTGPT_COLUMNS if c not in header]
        if missing:
            raise InputError(
                f"{path}:{header_line}: header {shown(','.join(header), 120)} lacks the BurstGPT column(s) "
                f"{', '.join(repr(m) for m in missing)}"
            )
        cols = [header.index(c) for c in BURSTGPT_COLUMNS]
    width = len(header)
    need = max(cols) + 1
    for row in rows:
        line = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue  # blank line
        if len(row) < need or len(row) < width:
            raise InputError(
                f"{path}:{line}: truncated line: expected {width} fields ({_cut(','.join(header))}), "
                f"got {len(row)}: {','.join(row)[:80]!r}"
            )
        if len(row) > width:
            raise InputError(
                f"{path}:{line}: expected {width} fields ({_cut(','.join(header))}), got {len(row)}"
            )
        yield row[cols[0]], line, [row[cols[1]], row[cols[2]]]


def _cut(text: str, width: int = 120) -> str:
    return text if len(text) <= width else f"{text[:width]}..."


def _rows(path: str, fmt: str) -> Iterator[_Row]:
    """Parse, check and yield each request; arrival times relative to the first."""
    t0: float | None = None
    prev_t = -math.inf
    prev_raw: object = None
    if fmt == "mooncake":
        src: Iterator[tuple[object, float, int, int, list[int] | None, int]] = _mooncake(path)
    elif fmt in ("azure", "burstgpt"):
        src = _csv_source(path, fmt)
    else:
        raise InputError(f"{path}: unknown trace format {fmt!r}: must be one of {', '.join(TRACE_FORMATS)}")
    time_field = {"azure": "TIMESTAMP", "mooncake": "timestamp", "burstgpt": "Timestamp"}[fmt]
    for raw_t, t, prompt, output, hashes, line in src:
        if t < prev_t:
            raise InputError(
                f"{path}:{line}: {time_field}={raw_t!r} is earlier than the previous request's "
                f"{prev_raw!r}: a trace must be sorted by arrival time"
            )
        prev_t, prev_raw = t, raw_t
        if t0 is None:
            t0 = t
        yield t - t0, prompt, output, hashes, line
    if t0 is None:
        raise InputError(f"{path}: no requests (only a header or blank lines)")


def _csv_source(path: str, fmt: str) -> Iterator[tuple[object, float, int, int, list[int] | None, int]]:
    names = AZURE_HEADER if fmt == "azure" else BURSTGPT_COLUMNS
    clock = _AzureClock()
    with closing(iter_lines(path)) as lines:
        for raw_t, line, (raw_p, raw_o) in _csv_rows(path, lines, fmt):
            if fmt == "azure":
                t = clock(raw_t, path, line)
            else:
                t = _seconds(raw_t, path, line, names[0], 1.0)
            prompt = _length(raw_p, path, line, names[1])
            output = _length(raw_o, path, line, names[2])
            yield raw_t, t, prompt, output, None, line


def _mooncake(path: str) -> Iterator[tuple[object, float, int, int, list[int] | None, int]]:
    with closing(iter_lines(path)) as lines:
        for line, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            obj = parse_json(text, path, line=line)
            if not isinstance(obj, dict):
                raise InputError(f"{path}:{line}: expected a JSON object, got {type(obj).__name__}")
            missing = [k for k in _MOONCAKE_KEYS if k not in obj]
            if missing:
                raise InputError(
                    f"{path}:{line}: missing field(s) {', '.join(missing)}: a Mooncake line needs "
                    f"{', '.join(_MOONCAKE_KEYS)} (and optionally hash_ids)"
                )
            t = _seconds(obj["timestamp"], path, line, "timestamp", 1000.0)  # milliseconds
            prompt = _length(obj["input_length"], path, line, "input_length")
            output = _length(obj["output_length"], path, line, "output_length")
            hashes = obj.get("hash_ids")
            if hashes is not None:
                if not isinstance(hashes, list) or not all(
                    isinstance(h, int) and not isinstance(h, bool) for h in hashes
                ):
                    raise InputError(f"{path}:{line}: hash_ids must be a list of integers")
            yield obj["timestamp"], t, prompt, output, hashes, line


def iter_requests(path: str | Path, fmt: str | None = None) -> Iterator[TraceRequest]:
    """Stream the requests of a trace file, checked line by line.

    ``fmt`` is one of :data:`TRACE_FORMATS`, or None to detect it.  Arrival
    times are seconds from the first request.  Raises :class:`InputError` on
    the first malformed line (truncated line, wrong header, negative length,
    timestamps out of order).
    """
    p = str(path)
    fmt = fmt or detect_format(p)
    for t, prompt, output, hashes, _line in _rows(p, fmt):
        yield TraceRequest(t, prompt, output, tuple(hashes) if hashes else ())


# ---------------------------------------------------------------------------
# Prefix cache over hash_ids


class _PrefixCache:
    """Which leading prompt blocks of a request were already seen earlier in the trace.

    ``hash_ids`` are prefix hashes: block j's id identifies blocks 0..j
    together, so a request can reuse the cached KV of its leading run of ids
    that are in the cache, up to the first miss (a later id cannot be reused
    without the blocks before it).  The cache keeps every block ever seen when
    ``capacity_blocks`` is None (an optimistic upper bound on reuse: a real
    cache is finite and per node), or the most recently used
    ``capacity_blocks`` blocks (LRU).
    """

    def __init__(self, capacity_blocks: int | None) -> None:
        self.capacity = capacity_blocks
        self._lru: OrderedDict[int, None] = OrderedDict()

    def lookup_and_insert(self, hashes: Sequence[int]) -> int:
        """Number of leading blocks already cached; then cache all of them."""
        lru = self._lru
        hits = 0
        for h in hashes:
            if h not in lru:
                break
            hits += 1
        for h in hashes:
            if h in lru:
                lru.move_to_end(h)
            else:
                lru[h] = None
        if self.capacity is not None:
            while len(lru) > self.capacity:
                lru.popitem(last=False)
        return hits


# ---------------------------------------------------------------------------
# Arrays for replay


@dataclass(frozen=True, eq=False)
class TraceArrays:
    """A trace as read-only numpy arrays, one element per request, in arrival order.

    * ``arrival_s``: seconds from the first request (float64, non-decreasing);
    * ``prompt_tokens``, ``output_tokens``: int64;
    * ``cached_prompt_tokens``: leading prompt tokens whose KV cache an earlier
      request already produced (prefix-cache hits from ``hash_ids``;
      ``min(hit_blocks * block_tokens, prompt_tokens)``), all zero when the
      format has no ``hash_ids`` (``has_prefix_info`` False);
    * ``hit_blocks``, ``total_blocks``: the block counts behind it.
    """

    path: str
    format: str
    arrival_s: npt.NDArray[np.float64]
    prompt_tokens: npt.NDArray[np.int64]
    output_tokens: npt.NDArray[np.int64]
    cached_prompt_tokens: npt.NDArray[np.int64]
    has_prefix_info: bool = False
    block_tokens: int = MOONCAKE_BLOCK_TOKENS
    cache_blocks: int | None = None
    hit_blocks: int = 0
    total_blocks: int = 0

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        for name in ("prompt_tokens", "output_tokens", "cached_prompt_tokens"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} elements, arrival_s has {n}")
        check_int("block_tokens", self.block_tokens, lo=1)
        for a in (self.arrival_s, self.prompt_tokens, self.output_tokens, self.cached_prompt_tokens):
            a.setflags(write=False)

    @property
    def requests(self) -> int:
        return len(self.arrival_s)

    def scaled(self, rate_scale: float) -> TraceArrays:
        """The same requests arriving ``rate_scale`` times faster (arrival_s / rate_scale)."""
        scale = check_real("rate_scale", rate_scale, lo=0.0, lo_open=True)
        return replace(self, arrival_s=self.arrival_s / scale)


def load_trace(
    path: str | Path,
    fmt: str | None = None,
    *,
    block_tokens: int = MOONCAKE_BLOCK_TOKENS,
    cache_blocks: int | None = None,
    rate_scale: float = 1.0,
    need_rate: bool = False,
    progress: Callable[[int], None] | None = None,
) -> TraceArrays:
    """Read a trace into :class:`TraceArrays` for summaries and simulation replay.

    One streaming pass: each line is parsed, checked and appended to compact
    typed buffers (no list of row objects, no second copy of the file).  For
    Mooncake traces the prefix cache of :class:`_PrefixCache` (unbounded unless
    ``cache_blocks`` is given) yields each request's ``cached_prompt_tokens``.
    ``len(hash_ids)`` must equal ``ceil(input_length / block_tokens)``.
    ``rate_scale`` > 1 replays the trace faster (arrival times divided by it).

    A trace with nothing to serve is refused here, so that every command
    refuses it alike: no requests, every prompt 0 tokens, or every output 0
    tokens.  ``need_rate`` (for callers that derive an arrival rate) also
    refuses fewer than 2 requests or all of them at one instant.  ``progress``
    is called with the line number every 20,000 lines (for a progress bar).
    """
    import numpy as np

    p = str(path)
    fmt = fmt or detect_format(p)
    bt = check_int("block_tokens", block_tokens, lo=1)
    if cache_blocks is not None:
        check_int("cache_blocks", cache_blocks, lo=1)
    scale = check_real("rate_scale", rate_scale, lo=0.0, lo_open=True)
    arrival = array("d")
    prompt_a = array("q")
    output_a = array("q")
    cached_a = array("q")
    cache = _PrefixCache(cache_blocks)
    has_prefix = False
    hit_blocks = total_blocks = 0
    prompt_sum = output_sum = 0
    for t, prompt, output, hashes, line in _rows(p, fmt):
        if progress is not None and line % 20_000 == 0:
            progress(line)
        prompt_sum += prompt
        output_sum += output
        arrival.append(t)
        prompt_a.append(prompt)
        output_a.append(output)
        cached = 0
        if hashes is not None:
            has_prefix = True
            need = -(-prompt // bt)  # ceil(prompt / block_tokens)
            if len(hashes) != need:
                raise InputError(
                    f"{p}:{line}: hash_ids has {len(hashes)} blocks but input_length={prompt} needs "
                    f"ceil({prompt}/{bt}) = {need} (block size {bt} tokens)"
                )
            hits = cache.lookup_and_insert(hashes)
            hit_blocks += hits
            total_blocks += len(hashes)
            cached = min(hits * bt, prompt)  # the last block may be partial
        cached_a.append(cached)
    _check_servable(p, len(arrival), prompt_sum, output_sum)
    if need_rate:
        _check_rate(p, len(arrival), arrival[-1] - arrival[0])
    return TraceArrays(
        path=p,
        format=fmt,
        arrival_s=np.frombuffer(arrival, dtype=np.float64) / scale,
        prompt_tokens=np.frombuffer(prompt_a, dtype=np.int64),
        output_tokens=np.frombuffer(output_a, dtype=np.int64),
        cached_prompt_tokens=np.frombuffer(cached_a, dtype=np.int64),
        has_prefix_info=has_prefix,
        block_tokens=bt,
        cache_blocks=cache_blocks,
        hit_blocks=hit_blocks,
        total_blocks=total_blocks,
    )


def _check_servable(path: str, n: int, prompt_sum: int, output_sum: int) -> None:
    """Refuse a trace with nothing to serve: a plan or a replay of it would be a confident 0."""
    if n == 0:
        raise InputError(f"{path}: no requests (only a header or blank lines)")
    every = "the only request has" if n == 1 else f"every one of the {n:,} requests has"
    if prompt_sum == 0 and output_sum == 0:
        raise InputError(
            f"{path}: {every} 0 prompt and 0 output tokens: nothing to serve (a request has at least "
            "one prompt token); check the token-count columns"
        )
    if prompt_sum == 0:
        raise InputError(
            f"{path}: {every} 0 prompt tokens: nothing to prefill (a request has at least one prompt "
            "token); check the token-count columns"
        )
    if output_sum == 0:
        raise InputError(
            f"{path}: {every} 0 output tokens (failed requests?): nothing to decode; check the "
            "token-count columns"
        )


def _check_rate(path: str, n: int, span_s: float) -> None:
    """Refuse a trace with no arrival rate: fewer than 2 requests, or all at one instant."""
    if n < 2:
        raise InputError(f"{path}: a workload needs at least 2 requests to have a rate; it has {n}")
    if span_s <= 0:
        raise InputError(f"{path}: every request arrives at the same instant; the rate is undefined")


# ---------------------------------------------------------------------------
# Summary


@dataclass(frozen=True)
class LengthStats:
    """Mean, min, max and percentiles of a token-length column.

    Percentiles use linear interpolation between order statistics (numpy's
    default): the p-th percentile of sorted x_0..x_{n-1} is at rank
    (n - 1) p / 100.
    """

    mean: float
    min: int
    p50: float
    p90: float
    p99: float
    max: int


@dataclass(frozen=True)
class PrefixStats:
    """Prefix-cache reuse implied by ``hash_ids`` (see :class:`_PrefixCache`).

    ``reuse_rate`` is token-weighted: cached prompt tokens / all prompt
    tokens, i.e. the fraction of prefill work a prefix cache would skip.
    """

    block_tokens: int
    cache_blocks: int | None
    reuse_rate: float
    block_hit_rate: float
    requests_with_hit: float
    cached_tokens: int
    prompt_tokens: int


@dataclass(frozen=True)
class TraceSummary:
    """Count, span, rate, burstiness and length distribution of a trace.

    * ``rate_per_s = (n - 1) / duration_s``: the reciprocal of the mean
      interarrival time (n arrivals bound n - 1 gaps);
    * ``interarrival_cv = std / mean`` of the n - 1 gaps (population std);
      1 for a Poisson process, > 1 burstier;
    * ``peak_to_mean``: arrivals are counted in windows of ``window_s`` from
      the first request; only windows wholly inside the trace count (a
      trailing partial window is dropped; if the trace is shorter than one
      window the ratio is 1).  Peak window count / mean window count;
      ``peak_rate_per_s`` = peak count / window_s.
    """

    path: str
    format: str
    requests: int
    duration_s: float
    rate_per_s: float
    interarrival_cv: float
    window_s: float
    windows: int
    peak_rate_per_s: float
    peak_to_mean: float
    prompt_tokens: LengthStats
    output_tokens: LengthStats
    zero_output_requests: int
    prefix: PrefixStats | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _length_stats(x: npt.NDArray[np.int64]) -> LengthStats:
    import numpy as np

    p50, p90, p99 = (float(v) for v in np.percentile(x, _PERCENTILES))
    return LengthStats(float(x.mean()), int(x.min()), p50, p90, p99, int(x.max()))


def summarize_trace(trace: TraceArrays | str | Path, window_s: float = 60.0) -> TraceSummary:
    """Summarize a trace (a path is loaded with :func:`load_trace` defaults)."""
    import numpy as np

    w = check_real("window_s", window_s, lo=0.0, lo_open=True)
    tr = trace if isinstance(trace, TraceArrays) else load_trace(trace)
    n = tr.requests
    t = tr.arrival_s
    duration = float(t[-1] - t[0])
    if n >= 2 and duration > 0:
        gaps = np.diff(t)
        mean_gap = float(gaps.mean())
        rate = 1.0 / mean_gap
        cv = float(gaps.std()) / mean_gap
    else:  # a single request, or all at one instant: no rate to speak of
        rate = cv = math.nan
    full = math.floor(duration / w)
    if full >= 1:
        bins = np.floor((t - t[0]) / w).astype(np.int64)
        counts = np.bincount(bins[bins < full], minlength=full)
        peak = int(counts.max())
        peak_to_mean = peak / float(counts.mean())
        windows = full
    else:
        peak, peak_to_mean, windows = n, 1.0, 1
    prefix = None
    if tr.has_prefix_info:
        cached = int(tr.cached_prompt_tokens.sum())
        total = int(tr.prompt_tokens.sum())
        prefix = PrefixStats(
            block_tokens=tr.block_tokens,
            cache_blocks=tr.cache_blocks,
            reuse_rate=cached / total if total else 0.0,
            block_hit_rate=tr.hit_blocks / tr.total_blocks if tr.total_blocks else 0.0,
            requests_with_hit=float((tr.cached_prompt_tokens > 0).mean()),
            cached_tokens=cached,
            prompt_tokens=total,
        )
    return TraceSummary(
        path=tr.path,
        format=tr.format,
        requests=n,
        duration_s=duration,
        rate_per_s=rate,
        interarrival_cv=cv,
        window_s=w,
        windows=windows,
        peak_rate_per_s=peak / w,
        peak_to_mean=peak_to_mean,
        prompt_tokens=_length_stats(tr.prompt_tokens),
        output_tokens=_length_stats(tr.output_tokens),
        zero_output_requests=int((tr.output_tokens == 0).sum()),
        prefix=prefix,
    )


def workload_from_trace(
    tr: TraceArrays, *, slo_ttft_s: float, slo_tpot_s: float, name: str | None = None
) -> Workload:
    """The closed form's one-mix view of a trace: mean lengths and the mean rate.

    ``rate = (n - 1) / (t_last - t_first)``; prompt and output tokens are the
    means, rounded (at least 1).  Everything the closed form then ignores
    (burstiness, the length spread, prefix hits) is what ``simulate --trace``
    puts back.
    """
    n = tr.requests
    _check_rate(tr.path, n, float(tr.arrival_s[-1] - tr.arrival_s[0]) if n else 0.0)
    span = float(tr.arrival_s[-1] - tr.arrival_s[0])
    return Workload(
        name=name or Path(tr.path).stem,
        prompt_tokens=max(1, round(float(tr.prompt_tokens.mean()))),
        output_tokens=max(1, round(float(tr.output_tokens.mean()))),
        rate_per_s=(n - 1) / span,
        slo_ttft_s=slo_ttft_s,
        slo_tpot_s=slo_tpot_s,
    )
