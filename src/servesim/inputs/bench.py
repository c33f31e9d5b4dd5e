"""Serving-benchmark files a user brings to ``predict``: a CSV of deployments to price
(``--points``) and a saved ``vllm bench serve --save-result`` JSON to compare against (``--compare``).

Both are read through :func:`servesim._textfile.read_text` (bounded, decoded; a bad byte is named
by line), and every problem is one :class:`InputError` line naming the file, the line and the
field.  A bad row of a points file does not stop the others: it comes back as ``{"error": ...}``.
Standard library only.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servesim._checks import InputError

__all__ = [
    "LABEL_COLUMNS",
    "MAX_BENCH_FILE_BYTES",
    "MAX_POINTS",
    "MEASURED_COLUMNS",
    "OPTIONAL_COLUMNS",
    "POINT_COLUMNS",
    "POOL_COLUMNS",
    "BenchResult",
    "read_bench_result",
    "read_points",
]

MAX_BENCH_FILE_BYTES = 16 * 2**20
"""A points or result file larger than this (16 MiB) is refused unread: real ones are KiB."""
MAX_POINTS = 100_000
"""Most rows of a points file (a row costs about 10 ms to predict: 100,000 rows take about 15 minutes)."""
POINT_COLUMNS: tuple[str, ...] = ("model", "gpu", "tp", "dtype", "isl", "osl", "concurrency")
"""The usual columns of a points file (``tp``, ``dtype`` and ``concurrency`` may be left out)."""
POOL_COLUMNS: tuple[str, ...] = ("prefill_tp", "prefill_dp", "prefill_ep", "prefill_workers", "decode_tp",
                                 "decode_dp", "decode_ep", "decode_workers")
"""The shape of each pool of a ``mode=disagg`` row (``concurrency`` is then the whole deployment's)."""
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "dp", "ep", "kv_dtype", "engine", "rate", "request_rate", "max_concurrency", "num_prompts", "num_warmups",
    "client", "random_range_ratio", "burstiness", "warm_server", "random_input_len", "random_output_len",
    "max_num_batched_tokens", "max_num_seqs", "chunked_prefill_size", "max_running_requests",
    "max_prefill_tokens", "enable_mixed_chunk", "scheduler_recv_interval", "max_num_tokens", "max_batch_size",
    "enable_chunked_prefill",
    "no_async_scheduling", "disable_overlap_schedule", "disable_overlap_scheduler",
    "gpu_memory_utilization", "mem_fraction_static", "free_gpu_memory_fraction",
    "mode", *POOL_COLUMNS, "spec", "k", "acceptance_length", "alpha", "draft", "traffic",
    "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
)
"""Columns a points file may also have: the benchmark client's flags as ``vllm bench serve`` names them
(``request_rate`` ``inf`` or empty: all at once; ``max_concurrency`` is ``concurrency``;
``random_input_len``/``random_output_len`` are ``isl``/``osl``), the engine's own flags, and ``mode``
(``agg`` or ``disagg``) with the pools' shapes, and speculation (``spec`` a method or ``none``, ``k``, the
measured ``acceptance_length`` or ``alpha``, a ``draft`` model, and the ``traffic`` kind whose published
acceptance a preset takes: chat, code, summarization or math; SGLang's EAGLE tree as its three
``speculative_*`` flags)."""
LABEL_COLUMNS: tuple[str, ...] = ("id", "source", "note")
"""Columns carried through to the output unread."""
MEASURED_COLUMNS: tuple[str, ...] = (
    "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "output_throughput", "request_throughput",
    "total_token_throughput",
)
"""Measured results a row may carry: the prediction is then compared with them."""
_KINDS = {"tp": "int", "dp": "int", "ep": "int", "isl": "int", "osl": "int", "concurrency": "int",
          "num_prompts": "int",
          "rate": "rate", "request_rate": "rate", "max_concurrency": "int", "num_warmups": "int",
          "random_range_ratio": "float", "burstiness": "float", "warm_server": "bool",
          "random_input_len": "int",
          "random_output_len": "int", "max_num_batched_tokens": "int", "max_num_seqs": "int",
          "chunked_prefill_size": "int", "max_running_requests": "int", "max_prefill_tokens": "int",
          "enable_mixed_chunk": "bool", "scheduler_recv_interval": "int", "max_num_tokens": "int",
          "max_batch_size": "int",
          "enable_chunked_prefill": "bool", "no_async_scheduling": "bool", "disable_overlap_schedule": "bool",
          "disable_overlap_scheduler": "bool", "gpu_memory_utilization": "float",
          "mem_fraction_static": "float", "free_gpu_memory_fraction": "float", "mode": "mode",
          **dict.fromkeys(POOL_COLUMNS, "int"),
          "k": "int", "acceptance_length": "float", "alpha": "float", "speculative_num_steps": "int",
          "speculative_eagle_topk": "int", "speculative_num_draft_tokens": "int",
          **dict.fromkeys(MEASURED_COLUMNS, "float")}
_ALIASES = {"random_input_len": "isl", "random_output_len": "osl", "max_concurrency": "concurrency",
            "request_rate": "rate"}
_REQUIRED = ("model", "gpu", "isl", "osl")
_TRUE = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _read(path: Path, what: str) -> str:
    from servesim._textfile import read_text

    return read_text(path, what=what, max_bytes=MAX_BENCH_FILE_BYTES)


def _cell(path: Path, line: int, name: str, raw: str, kind: str) -> Any:
    raw = raw.strip()
    if raw == "":
        return None
    if kind == "rate" and raw.lower() == "inf":
        return None  # all at once
    if kind == "mode":
        if raw not in ("agg", "disagg"):
            raise InputError(f"{path}: line {line}: field {name!r} = {raw!r} is not agg or disagg")
        return raw
    if kind == "bool":
        if raw.lower() not in _TRUE:
            raise InputError(f"{path}: line {line}: field {name!r} = {raw!r} is not true or false")
        return _TRUE[raw.lower()]
    try:
        if kind == "int":
            if len(raw) > 12:
                raise ValueError
            return int(raw)
        if kind in ("float", "rate"):
            x = float(raw)
            if not math.isfinite(x):
                raise ValueError
            return x
    except ValueError:
        raise InputError(f"{path}: line {line}: field {name!r} = {raw!r} is not a valid {kind}") from None
    return raw


def read_points(path: Path, what: str = "--points") -> list[dict[str, Any]]:
    """The rows of a points CSV, in order, as ``{column: value}`` (ints and floats parsed, an empty
    cell None); a row with a bad or missing required field is ``{"error": "FILE: line N: ..."}``.
    A missing column, more than :data:`MAX_POINTS` rows or a malformed CSV raises InputError."""
    text = _read(path, what)
    reader = csv.DictReader(io.StringIO(text))
    try:
        header = [h.strip() for h in (reader.fieldnames or [])]
        raws = []
        for raw in reader:
            raws.append(raw)
            if len(raws) > MAX_POINTS:
                raise InputError(f"{path}: more than {MAX_POINTS:,} rows (about 10 ms each): split the file")
    except csv.Error as exc:
        raise InputError(f"{path}: line {reader.line_num}: not a CSV row: {exc}") from None
    known = (*POINT_COLUMNS, *OPTIONAL_COLUMNS, *LABEL_COLUMNS, *MEASURED_COLUMNS)
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise InputError(f"{path}: line 1: column(s) {', '.join(twice)} given more than once (which one is "
                         "meant?)")
    unknown = [h for h in header if h not in known]
    if unknown:
        raise InputError(f"{path}: line 1: unknown column(s) {', '.join(unknown)}; known: {', '.join(known)}")
    missing = [c for c in _REQUIRED if c not in header and
               not any(_ALIASES.get(h) == c for h in header)]
    if missing:
        raise InputError(f"{path}: line 1: missing column(s) {', '.join(missing)}; needs "
                         f"{','.join(_REQUIRED)} (usually also tp, dtype, concurrency; optional "
                         f"{', '.join(OPTIONAL_COLUMNS)})")
    rows: list[dict[str, Any]] = []
    for line, raw in enumerate(raws, start=2):
        clean = {(k or "").strip(): (v if isinstance(v, str) else "") for k, v in raw.items()}
        try:
            row: dict[str, Any] = {k: _cell(path, line, k, clean.get(k, ""), _KINDS.get(k, "str"))
                                   for k in (*POINT_COLUMNS, *OPTIONAL_COLUMNS, *MEASURED_COLUMNS)}
            for alias, name in _ALIASES.items():
                if row[alias] is not None:
                    if row[name] is not None and row[name] != row[alias]:
                        raise InputError(f"{path}: line {line}: {alias} = {row[alias]} and {name} = "
                                         f"{row[name]} disagree (they are one flag)")
                    row[name] = row[alias]
                del row[alias]
            empty = next((k for k in _REQUIRED if row[k] is None), None)
            if empty is not None:
                raise InputError(f"{path}: line {line}: field {empty!r} is empty")
        except InputError as exc:
            rows.append({"error": str(exc)})
            continue
        row["measured"] = {k: row.pop(k) for k in MEASURED_COLUMNS if row.get(k) is not None}
        for k in MEASURED_COLUMNS:
            row.pop(k, None)
        row["labels"] = {k: clean[k].strip() for k in LABEL_COLUMNS if clean.get(k, "").strip()}
        row["line"] = line
        rows.append(row)
    return rows


@dataclass(frozen=True)
class BenchResult:
    """What a saved ``vllm bench serve`` result says about its run: the model, the mean prompt and
    output lengths, the clients (``max_concurrency``) or the offered Poisson rate, and every finite
    top-level number (``metrics``: ``mean_ttft_ms``, ``output_throughput``, ...)."""

    path: str
    model: str | None
    isl: int | None
    osl: int | None
    concurrency: int | None
    request_rate: float | None  # finite and > 0 only (vLLM writes "inf" for all-at-once)
    completed: int | None
    metrics: dict[str, float] = field(default_factory=dict)
    burstiness: float | None = None
    random_range_ratio: float | None = None  # where the file records the client's flags
    num_warmups: int | None = None
    lengths: list[tuple[int, int]] | None = None  # each request's (prompt, output) tokens, if recorded


def _mean_len(res: dict[str, Any], lens: str, total: str, completed: float | None) -> int | None:
    """Mean of the per-request ``lens`` list, else ``total`` / completed; at least 1."""
    v = res.get(lens)
    if isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return max(1, round(sum(v) / len(v)))
    t = res.get(total)
    if isinstance(t, (int, float)) and not isinstance(t, bool) and completed:
        return max(1, round(t / completed))
    return None


_RESULT_RANGES: dict[str, tuple[float, float]] = {
    **{f"{stat}_{m}_ms": (0.0, 3.6e9) for stat in ("mean", "median", "std", "p50", "p90", "p95", "p99")
       for m in ("ttft", "tpot", "itl", "e2el")},
    **dict.fromkeys(("output_throughput", "request_throughput", "total_token_throughput"), (0.0, 1e12)),
    **dict.fromkeys(("completed", "num_prompts", "total_input_tokens", "total_output_tokens",
                     "max_concurrency", "num_warmups"), (0.0, 1e12)),
    "duration": (0.0, 3.6e7), "request_rate": (0.0, 1e6), "burstiness": (0.0, 1000.0),
    "random_range_ratio": (0.0, 1.0),
}
"""Physical ranges of the fields a saved result is read for (times in ms, counts, rates)."""


def read_bench_result(path: Path, what: str = "--compare") -> BenchResult:
    """Read a ``vllm bench serve --save-result`` JSON file (one object)."""
    text = _read(path, what)
    try:
        res = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{path}: not valid JSON: {exc}") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise InputError(f"{path}: not a benchmark result: {exc}") from None
    if not isinstance(res, dict):
        raise InputError(f"{path}: expected a JSON object (a `vllm bench serve --save-result` file)")
    metrics: dict[str, float] = {}
    for k, v in res.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        try:
            x = float(v)
        except OverflowError:
            raise InputError(f"{path}: field {k!r} is not a finite number") from None
        if not math.isfinite(x):
            continue
        bounds = _RESULT_RANGES.get(k)
        if bounds is not None and not bounds[0] <= x <= bounds[1]:
            lo, hi = bounds
            raise InputError(f"{path}: field {k!r} = {x:g} is invalid: must be in [{lo:g}, {hi:g}] "
                             f"({'a time in ms' if k.endswith('_ms') else 'a count or a rate'})")
        metrics[k] = x
    completed = metrics.get("completed") or metrics.get("num_prompts")
    rate = metrics.get("request_rate")
    model = res.get("model_id")
    return BenchResult(
        path=str(path),
        model=model if isinstance(model, str) else None,
        isl=_mean_len(res, "input_lens", "total_input_tokens", completed),
        osl=_mean_len(res, "output_lens", "total_output_tokens", completed),
        concurrency=int(metrics.get("max_concurrency") or 0) or None,
        request_rate=rate if rate is not None and rate > 0 else None,
        completed=int(completed) if completed else None,
        metrics=metrics,
        burstiness=metrics.get("burstiness"),
        random_range_ratio=metrics.get("random_range_ratio"),
        num_warmups=int(metrics["num_warmups"]) if "num_warmups" in metrics else None,
        lengths=_lengths(res),
    )


def _lengths(res: dict[str, Any]) -> list[tuple[int, int]] | None:
    """The per-request (prompt, output) lengths ``--save-detailed`` records, when both lists are
    there, as long as each other and all positive integers."""
    ins, outs = res.get("input_lens"), res.get("output_lens")
    if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs) or not ins:
        return None
    pairs = list(zip(ins, outs, strict=True))
    if not all(isinstance(a, int) and isinstance(b, int) and a > 0 and b > 0 for a, b in pairs):
        return None
    return pairs
