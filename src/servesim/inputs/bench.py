"""Serving-benchmark files a user brings to ``predict``: a CSV of deployments to price
(``--points``) and a benchmark tool's saved result to compare against (``--compare``): ``vllm bench
serve --save-result`` JSON, SGLang ``bench_serving --output-file`` JSONL (the last run appended) or
InferenceMAX's aggregated record (``utils/process_result.py``: the engine, GPU, parallelism, dtype
and lengths beside the latencies in seconds); which is which, and where each key is read in the
tool's source, is ``data/catalog/result_formats.toml``.

Both are read through :func:`servesim._textfile.read_text` (bounded, decoded; a bad byte is named
by line), and every problem is one :class:`InputError` line naming the file, the line and the
field.  A bad row of a points file does not stop the others: it comes back as ``{"error":
"FILE:LINE:COLUMN: ..."}``.  Every number is checked against the range the flag of the same name
has (:data:`servesim._checks.BOUNDS`), and a result file that cannot be taken as written (no cap
written as 0, more requests completed than sent, a request of negative length) is refused, never
repaired.  Standard library only.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servesim._catalogfile import load_builtin
from servesim._checks import BOUNDS, InputError, check_bound
from servesim._textfile import read_text, shown

__all__ = [
    "LABEL_COLUMNS",
    "MAX_BENCH_FILE_BYTES",
    "MAX_POINTS",
    "MEASURED_COLUMNS",
    "OPTIONAL_COLUMNS",
    "POINT_COLUMNS",
    "POOL_COLUMNS",
    "MeasuredResult",
    "model_id_hint",
    "read_bench_result",
    "read_point_rows",
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
_TOKENS_MAX = 10_000_000  # a request's tokens in a saved result (the mean is then checked as --isl's)
_TRUE = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _read(path: Path, what: str) -> str:
    return read_text(path, what=what, max_bytes=MAX_BENCH_FILE_BYTES)


_KIND_WORDS = {"int": "an integer", "float": "a number", "rate": "a number or inf"}


def _cell(where: str, name: str, raw: str, kind: str) -> object:
    """The value of one cell (None where empty), its range checked as the flag's
    (:data:`servesim._checks.BOUNDS`); ``where`` is ``FILE:LINE:COLUMN``."""
    raw = raw.strip()
    if raw == "":
        return None
    if kind == "rate" and raw.lower() in ("inf", "infinity", "+inf"):
        return None  # all at once
    if kind == "mode":
        if raw not in ("agg", "disagg"):
            raise InputError(f"{where}: column {name!r} = {raw!r} is invalid: must be agg or disagg")
        return raw
    if kind == "bool":
        if raw.lower() not in _TRUE:
            raise InputError(f"{where}: column {name!r} = {raw!r} is invalid: must be true or false")
        return _TRUE[raw.lower()]
    if kind == "str":
        return raw
    try:
        if kind == "int":
            if len(raw) > 12:
                raise ValueError
            value: Any = int(raw)
        else:
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError
    except ValueError:
        raise InputError(f"{where}: column {name!r} = {raw!r} is invalid: must be {_KIND_WORDS[kind]}"
                         ) from None
    bound = _ALIASES.get(name, name)
    if bound in BOUNDS:
        check_bound(bound, value, where, f"column {name!r}")
    return value


def _records(path: Path, text: str) -> list[tuple[int, int, list[str]]]:
    """Each CSV record with the lines it starts and ends on.  A record of more than one line has a
    quote that was not closed on the line it opened (no points cell holds a line break): it comes
    back as that one line, and reading goes on at the next line, so one stray quote does not take
    the rows after it."""
    lines = text.splitlines(keepends=True)
    out: list[tuple[int, int, list[str]]] = []
    first = 0  # index of the line the reader starts at
    while first < len(lines):
        reader = csv.reader(io.StringIO("".join(lines[first:]), newline=""))
        last = 0
        try:
            for fields in reader:
                start, end = first + last + 1, first + reader.line_num
                out.append((start, end, fields))
                last = reader.line_num
                if len(out) > MAX_POINTS + 1:
                    raise InputError(f"{path}: more than {MAX_POINTS:,} rows (about 10 ms each): split the "
                                     "file")
                if end > start:
                    break
            else:
                return out
        except csv.Error as exc:
            raise InputError(f"{path}:{first + reader.line_num}: not a CSV row: {exc}") from None
        first = out[-1][0]  # read on from the line after the one whose quote ran over
    return out


def read_point_rows(path: Path, what: str = "--points",
                    given: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The rows of a points CSV, in order, as ``{column: value}`` (ints and floats parsed and their
    ranges checked as the flags' are, an empty cell None), with ``line`` (its line) and ``columns``
    (each column's 1-based position); a row with a bad or missing required field is
    ``{"error": "FILE:LINE:COLUMN: ..."}``.  A missing column, more than :data:`MAX_POINTS` rows or
    a malformed CSV raises InputError.  ``given``: required columns a flag fills in every row (they
    may be left out, or empty)."""
    text = _read(path, what)
    records = _records(path, text)
    while records and not any(f.strip() for f in records[0][2]):
        records.pop(0)  # blank lines before the header
    if not records:
        raise InputError(f"{path}: no header: a points file starts with its column names "
                         f"({','.join(_REQUIRED)}, ...)")
    head_line, _, head = records[0]
    header = [h.strip() for h in head]
    known = (*POINT_COLUMNS, *OPTIONAL_COLUMNS, *LABEL_COLUMNS, *MEASURED_COLUMNS)
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise InputError(f"{path}:{head_line}: column(s) {', '.join(twice)} given more than once (which one "
                         "is meant?)")
    unknown = [h for h in header if h not in known]
    if unknown:
        raise InputError(f"{path}:{head_line}: unknown column(s) {', '.join(unknown)}; known: "
                         f"{', '.join(known)}")
    missing = [c for c in _REQUIRED if c not in header and c not in given and
               not any(_ALIASES.get(h) == c for h in header)]
    if missing:
        raise InputError(f"{path}:{head_line}: missing column(s) {', '.join(missing)} (or the flag, which "
                         f"fills every row: {', '.join('--' + m for m in missing)}); needs "
                         f"{','.join(_REQUIRED)} (usually also tp, dtype, concurrency; optional "
                         f"{', '.join(OPTIONAL_COLUMNS)})")
    columns = {h: (i + 1, h) for i, h in enumerate(header)}
    rows: list[dict[str, Any]] = []
    for line, end, fields in records[1:]:
        if not any(f.strip() for f in fields):
            continue  # a blank line
        try:
            rows.append(_row(path, line, end, fields, header, columns, given))
        except InputError as exc:
            rows.append({"error": str(exc)})
    return rows


def _row(path: Path, line: int, end: int, fields: list[str], header: list[str],
         columns: dict[str, tuple[int, str]], given: frozenset[str] = frozenset()) -> dict[str, Any]:
    """One record of a points file as a row (see :func:`read_point_rows`)."""
    if end > line:  # a quote opened on this line runs over the next ones
        col = next((i + 1 for i, f in enumerate(fields) if "\n" in f or "\r" in f), len(fields))
        name = header[col - 1] if col <= len(header) else "?"
        raise InputError(f"{path}:{line}:{col}: a quote opened in column {name!r} is not closed on its line "
                         "(a points cell holds no line break; the next lines are read as rows of their own)")
    if any(f.strip() for f in fields[len(header):]):
        raise InputError(f"{path}:{line}:{len(header) + 1}: {len(fields)} fields where the header has "
                         f"{len(header)} columns")
    clean = dict(zip(header, [*fields, *[""] * len(header)][:len(header)], strict=True))
    row: dict[str, Any] = {}
    for k in (*POINT_COLUMNS, *OPTIONAL_COLUMNS, *MEASURED_COLUMNS):
        where = f"{path}:{line}:{columns.get(k, (0, k))[0]}"
        row[k] = _cell(where, k, clean.get(k, ""), _KINDS.get(k, "str"))
    for alias, name in _ALIASES.items():
        if row[alias] is not None:
            if row[name] is not None and row[name] != row[alias]:
                raise InputError(f"{path}:{line}:{columns[alias][0]}: column {alias!r} = {row[alias]} and "
                                 f"column {name!r} = {row[name]} disagree (they are one flag)")
            row[name] = row[alias]
            columns = {**columns, name: columns[alias]}
        del row[alias]
    empty = next((k for k in _REQUIRED if row[k] is None and k not in given), None)
    if empty is not None:
        raise InputError(f"{path}:{line}:{columns.get(empty, (0, empty))[0]}: column {empty!r} is empty")
    row["measured"] = {k: row.pop(k) for k in MEASURED_COLUMNS if row.get(k) is not None}
    for k in MEASURED_COLUMNS:
        row.pop(k, None)
    row["labels"] = {k: clean[k].strip() for k in LABEL_COLUMNS if clean.get(k, "").strip()}
    row["line"] = line
    row["columns"] = columns  # each column's position and name in the file, by the name it sets
    return row


@dataclass(frozen=True)
class MeasuredResult:
    """What a saved benchmark result says about its run: the model, the prompt and output lengths
    (the nominal ones where the file records the client's flags, else the means), the clients
    (``max_concurrency``) or the offered Poisson rate, the tool, engine and deployment where it
    records them, and every finite top-level number under vLLM's names (``metrics``:
    ``mean_ttft_ms``, ``output_throughput``, ...)."""

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
    tool: str = ""  # what wrote the file (result_formats.toml ``label``)
    client: str | None = None  # the benchmark client whose meanings the run takes (the tool's)
    engine: str | None = None  # the engine the file names (its backend or framework), None: none modelled
    engine_recorded: str | None = None  # the name as the file writes it ("sglang-oai", "dynamo-trt")
    engine_field: str = ""  # the key that names it (``backend``, ``framework``)
    gpu: str | None = None  # InferenceMAX's record: its ``hw``
    deployment: dict[str, Any] = field(default_factory=dict)  # tp, dp, ep, dtype, spec, mode, pools' shapes
    record: int = 1  # the line read (a JSONL file of runs: the last)
    records: int = 1
    notes: tuple[str, ...] = ()  # what was read how (the image, the lengths' meaning)


def _lens(path: Path | str, res: dict[str, Any], name: str, lo: int) -> list[int] | None:
    """The per-request list ``name`` (``input_lens``, ``output_lens``) where the file has one: integers
    of at least ``lo``; anything else is refused, naming the field and the first bad entry."""
    v = res.get(name)
    if v is None:
        return None
    if not isinstance(v, list):
        raise InputError(f"{path}: field {name!r} is invalid: must be a list of token counts, one a request")
    for i, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, int) or not lo <= x <= _TOKENS_MAX:
            raise InputError(f"{path}: field {name!r}[{i}] = {shown(x)} is invalid: must be an integer in "
                             f"[{lo}, {_TOKENS_MAX:,}] (a request's tokens)")
    return v


def _mean_len(path: Path | str, res: dict[str, Any], lens: str, total: str, completed: int | None,
              metrics: dict[str, float]) -> int | None:
    """Mean of the per-request ``lens`` list, else ``total`` / completed; a mean outside ``--isl``'s
    range (a file of no tokens, or of a 10M-token request) is refused, naming the fields."""
    v = _lens(path, res, lens, 1 if lens == "input_lens" else 0)
    bound = BOUNDS["isl" if lens == "input_lens" else "osl"]
    if lens == "output_lens" and v and any(v) and res.get("failed"):
        v = [x for x in v if x > 0]  # vLLM records 0 output tokens for each failed request
    if v:
        mean, what = sum(v) / len(v), f"the mean of {lens!r} ({len(v):,} requests)"
    elif total in metrics and completed:
        mean = metrics[total] / completed
        what = f"{total!r} / 'completed' = {metrics[total]:,.0f} / {completed:,}"
    else:
        return None
    n = round(mean)
    if bound.lo is not None and bound.hi is not None and not bound.lo <= n <= bound.hi:
        raise InputError(f"{path}: {what} = {mean:g} tokens a request is invalid: must be in "
                         f"[{bound.lo:g}, {bound.hi:,.0f}] ({bound.flag}'s range)")
    return n


def _count(path: Path | str, res: dict[str, Any], name: str, lo: int) -> int | None:
    """An integer count field (``completed``, ``num_prompts``, ``num_warmups``) where the file has one."""
    v = res.get(name)
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= 1_000_000:
        raise InputError(f"{path}: field {name!r} = {shown(v)} is invalid: must be an integer in "
                         f"[{lo}, 1,000,000]")
    return v


def _client_fields(path: Path | str, res: dict[str, Any]) -> dict[str, Any]:
    """What the file says about the client's flags, each checked as the flag is
    (:data:`servesim._checks.BOUNDS`): ``max_concurrency`` null (no cap) or 1-100,000, ``request_rate``
    ``"inf"`` (all at once) or a rate, ``burstiness``, ``random_range_ratio``, ``num_warmups``."""
    out: dict[str, Any] = {}
    for field_, name in (("max_concurrency", "concurrency"), ("request_rate", "rate"),
                         ("burstiness", "burstiness"), ("random_range_ratio", "random_range_ratio")):
        v = res.get(field_)
        if v is None or (field_ == "max_concurrency" and v == "None"):
            out[name] = None
            continue
        if field_ == "request_rate" and (v == "inf" or (isinstance(v, float) and v == math.inf)):
            out[name] = None  # vLLM's "inf": every request at once
            continue
        if isinstance(v, str):
            raise InputError(f"{path}: field {field_!r} = {shown(v)} is invalid: must be "
                             f"{'inf or ' if field_ == 'request_rate' else ''}{BOUNDS[name].valid}"
                             f"{' or null' if field_ == 'max_concurrency' else ''}")
        out[name] = check_bound(name, v, str(path), f"field {field_!r}")
    out["num_warmups"] = _count(path, res, "num_warmups", 0)
    return out


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


def _formats() -> dict[str, dict[str, Any]]:
    """The tools' result formats, in the order they are tried (``result_formats.toml``)."""
    return dict(load_builtin("result_formats.toml")["format"])


def _json_records(path: Path, text: str) -> list[tuple[int, Any]]:
    """The file's JSON values with the line each starts on: one (a JSON file), or one a non-blank line
    (SGLang's JSONL, a run appended each time)."""
    try:
        try:
            return [(1, json.loads(text))]
        except json.JSONDecodeError as exc:
            lines = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
            if exc.msg != "Extra data" or len(lines) < 2:
                raise
        out = []
        for i, line in lines:
            try:
                out.append((i, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{i}: not valid JSON (one run a line): {exc}") from None
        return out
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{path}: not valid JSON: {exc}") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise InputError(f"{path}: not a benchmark result: {exc}") from None


_SECONDS_KEY = re.compile(r"(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)")


def _true(v: object) -> bool:
    """InferenceMAX's ``dp_attention``/``disagg``: a JSON boolean or the text "true"/"false"."""
    return v is True or (isinstance(v, str) and v.strip().lower() == "true")


def _shape(where: str, rec: dict[str, Any], prefix: str) -> dict[str, int]:
    """One pool's tp, dp, ep (and workers) from InferenceMAX's ``{prefix}tp``, ``{prefix}ep``,
    ``{prefix}dp_attention`` (``{prefix}num_workers``): attention DP over T GPUs is servesim's
    ``tp 1, dp T``, without it ``tp T, dp 1`` (benchmarks/data/SOURCES.md section 14)."""
    out: dict[str, int] = {}
    for key in ("tp", "ep", "num_workers"):
        v = rec.get(prefix + key)
        if v is None:
            continue
        name = "workers" if key == "num_workers" else key
        bound = next((b for b in (prefix + name, name) if b in BOUNDS), "tp")
        out[name] = int(check_bound(bound, v, where, f"field {prefix + key!r}"))
    if "tp" in out and _true(rec.get(prefix + "dp_attention")):
        out["tp"], out["dp"] = 1, out["tp"]
    return out


def _inferencemax(where: str, rec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """InferenceMAX's aggregated record as the client's result (vLLM's names: each latency in ms, the
    throughputs of the whole deployment, ``max_concurrency`` = ``conc``), the deployment it records,
    and notes.  ``utils/process_result.py`` divides ``total_token_throughput`` by the GPUs (single
    node: ``tp``; multi-node: prefill plus decode GPUs) and ``output_throughput`` by ``tp`` or the
    decode GPUs; both are multiplied back."""
    res: dict[str, Any] = {"model_id": rec.get("model"), "max_concurrency": rec.get("conc")}
    for k, v in rec.items():
        if _SECONDS_KEY.fullmatch(k) and isinstance(v, (int, float)) and not isinstance(v, bool):
            res[f"{k}_ms"] = 1000.0 * v  # seconds -> ms
    dep: dict[str, Any] = {}
    if _true(rec.get("disagg")) or _true(rec.get("is_multinode")):
        dep["mode"] = "disagg"
        for pool in ("prefill", "decode"):
            dep.update({f"{pool}_{k}": v for k, v in _shape(where, rec, f"{pool}_").items()})
        pg, out_gpus = rec.get("num_prefill_gpu"), rec.get("num_decode_gpu")
        gpus = pg + out_gpus if isinstance(pg, int) and isinstance(out_gpus, int) else None
    else:
        dep.update(_shape(where, rec, ""))
        gpus = out_gpus = rec.get("tp")
    if isinstance(gpus, int) and isinstance(out_gpus, int) and gpus > 0 and out_gpus > 0:
        for per_gpu, total, n in (("tput_per_gpu", "total_token_throughput", gpus),
                                  ("output_tput_per_gpu", "output_throughput", out_gpus)):
            if isinstance(rec.get(per_gpu), (int, float)) and not isinstance(rec.get(per_gpu), bool):
                res[total] = rec[per_gpu] * n
    for key, name in (("precision", "dtype"), ("spec_decoding", "spec")):
        v = rec.get(key)
        if isinstance(v, str) and v.strip() and v.strip().lower() != "none":
            dep[name] = v.strip().lower()
    notes = []
    if isinstance(rec.get("image"), str):
        notes.append(f"image {rec['image']}")
    return res, dep, notes


def read_bench_result(path: Path, what: str = "--compare") -> MeasuredResult:
    """Read a benchmark tool's saved result: ``vllm bench serve --save-result`` JSON (one object),
    SGLang ``bench_serving --output-file`` JSONL (one run a line: the last is read) or InferenceMAX's
    aggregated record, told apart by the keys only each writes (``result_formats.toml``)."""
    text = _read(path, what)
    records = _json_records(path, text)
    line, rec = records[-1]
    where = f"{path}:{line}" if len(records) > 1 else str(path)
    if not isinstance(rec, dict):
        raise InputError(f"{where}: expected a JSON object (a `vllm bench serve --save-result` file, an "
                         "sglang.bench_serving JSONL line or an InferenceMAX result)")
    fmt = next(f for f in _formats().values() if all(k in rec for k in f["markers"]))
    deployment: dict[str, Any] = {}
    notes: list[str] = []
    if fmt.get("seconds"):
        res, deployment, notes = _inferencemax(where, rec)
    else:
        res = {fmt.get("renamed", {}).get(k, k): v for k, v in rec.items()}
    metrics: dict[str, float] = {}
    for k, v in res.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        try:
            x = float(v)
        except OverflowError:
            raise InputError(f"{where}: field {k!r} is not a finite number") from None
        if not math.isfinite(x):
            continue
        bounds = _RESULT_RANGES.get(k)
        if bounds is not None and not bounds[0] <= x <= bounds[1]:
            lo, hi = bounds
            raise InputError(f"{where}: field {k!r} = {x:g} is invalid: must be in [{lo:g}, {hi:g}] "
                             f"({'a time in ms' if k.endswith('_ms') else 'a count or a rate'})")
        metrics[k] = x
    ins, outs = res.get("input_lens"), res.get("output_lens")
    if isinstance(ins, list) and isinstance(outs, list) and len(ins) != len(outs):
        raise InputError(f"{where}: fields 'input_lens' ({len(ins):,} requests) and 'output_lens' "
                         f"({len(outs):,}) differ in length: one entry a request in each")
    client = _client_fields(where, res)
    completed, prompts = _count(where, res, "completed", 1), _count(where, res, "num_prompts", 1)
    if "completed" in res and completed is None:
        raise InputError(f"{where}: field 'completed' is null: no request finished")
    if completed is not None and prompts is not None and completed > prompts:
        raise InputError(f"{where}: field 'completed' = {completed} is invalid: must be at most "
                         f"'num_prompts' = {prompts} (the requests sent)")
    done = completed if completed is not None else prompts
    isl, osl = _nominal(where, rec, fmt, notes)
    if isl is None:
        isl = _mean_len(where, res, "input_lens", "total_input_tokens", done, metrics)
    if osl is None:
        osl = _mean_len(where, res, "output_lens", "total_output_tokens", done, metrics)
    model = res.get("model_id")
    recorded = rec.get(fmt.get("engine_field", ""))
    recorded = recorded.strip() if isinstance(recorded, str) and recorded.strip() else None
    engines: dict[str, str] = load_builtin("result_formats.toml")["engines"]
    gpu = rec.get("hw") if fmt.get("seconds") else None
    return MeasuredResult(
        path=str(path),
        model=model if isinstance(model, str) and model.strip() else None,
        isl=isl,
        osl=osl,
        concurrency=client["concurrency"],
        request_rate=client["rate"],
        completed=done,
        metrics=metrics,
        burstiness=client["burstiness"],
        random_range_ratio=client["random_range_ratio"],
        num_warmups=client["num_warmups"],
        lengths=_lengths(res),
        tool=str(fmt["label"]),
        client=str(fmt["client"]),
        engine=None if recorded is None else engines.get(recorded.lower()),
        engine_recorded=recorded,
        engine_field=str(fmt.get("engine_field", "")),
        gpu=gpu.strip() if isinstance(gpu, str) and gpu.strip() else None,
        deployment=deployment,
        record=len(records),
        records=len(records),
        notes=tuple(notes),
    )


def _nominal(where: str, rec: dict[str, Any], fmt: dict[str, Any], notes: list[str]
             ) -> tuple[int | None, int | None]:
    """The client's own nominal lengths where the file records them (InferenceMAX's ``isl``/``osl``;
    SGLang's ``random_input_len``/``random_output_len`` of a random dataset, drawn in [max(1, rL), L]:
    their mean is not the flag), else None (the means of the file's tokens are read instead)."""
    if fmt.get("seconds"):
        keys = ("isl", "osl")
    elif str(rec.get("dataset_name", "")).startswith("random") and "random_input_len" in rec:
        keys = ("random_input_len", "random_output_len")
        notes.append(f"lengths: the client's --random-input-len/--random-output-len {rec.get(keys[0])}/"
                     f"{rec.get(keys[1])} at range ratio {rec.get('random_range_ratio', 0)} (drawn up to "
                     "them), not the mean tokens")
    else:
        return None, None
    out = [None if rec.get(k) is None else int(check_bound(b, rec.get(k), where, f"field {k!r}"))
           for k, b in zip(keys, ("isl", "osl"), strict=True)]
    return out[0], out[1]


def model_id_hint(model_id: str) -> str | None:
    """The Hugging Face id a local checkpoint path names where it is a Hugging Face cache path
    (``.../models--openai--gpt-oss-120b/snapshots/<hash>/`` -> ``openai/gpt-oss-120b``), else
    None."""
    m = re.search(r"models--([^/\\]+?)--([^/\\]+)", model_id)
    return f"{m.group(1)}/{m.group(2)}" if m else None


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
