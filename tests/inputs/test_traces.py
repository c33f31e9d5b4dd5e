"""Trace readers, summaries and replay arrays (servesim.inputs.traces).

The excerpts of real traces that ship with servesim (servesim/data/traces: the
first 1,000 requests of the Azure LLM inference 2023 traces, CC-BY 4.0, and of
the Mooncake FAST'25 traces, Apache-2.0) are summarized and every figure is
recomputed here with the csv/json/statistics modules, independently of the
reader.  The full traces are checked against their publishers' own figures
when they are at hand, in $SERVESIM_TRACE_DIR (where ``servesim trace fetch
NAME --out DIR`` puts them; CI points it at the project's data folder); those
tests skip otherwise.  Malformed inputs are made from the small fixtures
in tests/data, one defect each, and each asserts its error message.
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
import math
import os
import statistics
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from servesim.inputs.fetch import EXCERPTS, SOURCES
from servesim.inputs.traces import (
    InputError,
    TraceRequest,
    detect_format,
    iter_requests,
    load_trace,
    summarize_trace,
)
from servesim.render.simfigures import plot_trace

HERE = Path(__file__).resolve().parents[1]  # tests/
FIXTURES = HERE / "data"
FULL_DIR = Path(os.environ["SERVESIM_TRACE_DIR"]) if os.environ.get("SERVESIM_TRACE_DIR") else None


def _full(name: str) -> Path:
    """The full upstream trace ``name`` (a servesim.inputs.fetch.SOURCES key), or skip."""
    filename = SOURCES[name].filename
    if FULL_DIR is None or not (FULL_DIR / filename).is_file():
        pytest.skip(f"full trace {filename} not in SERVESIM_TRACE_DIR={FULL_DIR} (set it to a folder "
                    f"filled by `servesim trace fetch {name} --out DIR`)")
    return FULL_DIR / filename


# ---------------------------------------------------------------------------
# Independent reference computations (csv/json/statistics, no servesim code)


def _azure_seconds(ts: str) -> Decimal:
    """Exact seconds since the epoch day of 2023-01-01 (Decimal keeps all 7 digits)."""
    whole = datetime.strptime(ts[:19], "%Y-%m-%d %H:%M:%S")
    base = datetime(2023, 1, 1)
    return Decimal(int((whole - base).total_seconds())) + Decimal("0" + ts[19:])


def _text(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")


def _reference_rows(path: Path) -> list[tuple[float, int, int, list[int] | None]]:
    rows: list[tuple[float, int, int, list[int] | None]] = []
    if ".csv" in path.suffixes:
        reader = csv.DictReader(io.StringIO(_text(path), newline=""))
        raw = [(_azure_seconds(r["TIMESTAMP"]), int(r["ContextTokens"]), int(r["GeneratedTokens"]))
               for r in reader]
        t0 = raw[0][0]
        rows = [(float(t - t0), p, o, None) for t, p, o in raw]
    else:
        objs = [json.loads(line) for line in _text(path).splitlines() if line.strip()]
        t0 = objs[0]["timestamp"]
        rows = [((o["timestamp"] - t0) / 1000.0, o["input_length"], o["output_length"], o["hash_ids"])
                for o in objs]
    return rows


def _percentile(xs: list[int], q: float) -> float:
    """Linear interpolation at rank (n - 1) q / 100 of the sorted values."""
    s = sorted(xs)
    rank = (len(s) - 1) * q / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (rank - lo)


def _reference_summary(path: Path, window_s: float = 60.0) -> dict[str, Any]:
    rows = _reference_rows(path)
    t = [r[0] for r in rows]
    gaps = [b - a for a, b in itertools.pairwise(t)]
    mean_gap = statistics.fmean(gaps)
    duration = t[-1] - t[0]
    full = int(duration // window_s)
    counts = [0] * full
    for x in t:
        b = int((x - t[0]) // window_s)
        if b < full:
            counts[b] += 1
    ref: dict[str, Any] = {
        "requests": len(rows),
        "duration_s": duration,
        "rate_per_s": len(gaps) / duration,
        "interarrival_cv": statistics.pstdev(gaps) / mean_gap,
        "peak_to_mean": max(counts) / statistics.fmean(counts),
        "windows": full,
    }
    for i, name in ((1, "prompt_tokens"), (2, "output_tokens")):
        xs = [r[i] for r in rows]
        ref[name] = {"mean": statistics.fmean(xs), "min": min(xs), "max": max(xs),
                     "p50": _percentile(xs, 50), "p90": _percentile(xs, 90), "p99": _percentile(xs, 99)}
    if rows[0][3] is not None:
        seen: set[int] = set()
        cached_total = prompt_total = hit_blocks = blocks = with_hit = 0
        for _, prompt, _, hashes in rows:
            assert hashes is not None
            hits = 0
            while hits < len(hashes) and hashes[hits] in seen:
                hits += 1
            seen.update(hashes)
            cached_total += min(hits * 512, prompt)
            prompt_total += prompt
            hit_blocks += hits
            blocks += len(hashes)
            with_hit += hits > 0
        ref["prefix"] = {"reuse_rate": cached_total / prompt_total, "block_hit_rate": hit_blocks / blocks,
                         "requests_with_hit": with_hit / len(rows), "cached_tokens": cached_total}
    return ref


# ---------------------------------------------------------------------------
# Excerpts of real traces (shipped), and the full traces when at hand


@pytest.fixture(scope="module", params=sorted(EXCERPTS))
def real_case(request: pytest.FixtureRequest) -> tuple[str, Path, Any, dict[str, Any]]:
    path = EXCERPTS[request.param]
    trace = load_trace(path)
    return request.param, path, trace, _reference_summary(path)


def test_real_trace_summary_matches_independent_computation(real_case: Any) -> None:
    name, path, trace, ref = real_case
    s = summarize_trace(trace)
    assert s.format == SOURCES[name].format == detect_format(path)
    assert s.requests == ref["requests"]
    assert s.duration_s == pytest.approx(ref["duration_s"], abs=1e-6)
    assert s.rate_per_s == pytest.approx(ref["rate_per_s"], rel=1e-9)
    assert s.interarrival_cv == pytest.approx(ref["interarrival_cv"], rel=1e-6)
    assert s.windows == ref["windows"]
    assert s.peak_to_mean == pytest.approx(ref["peak_to_mean"], rel=1e-12)
    for key in ("prompt_tokens", "output_tokens"):
        got = getattr(s, key)
        for stat, value in ref[key].items():
            assert getattr(got, stat) == pytest.approx(value, rel=1e-12), (key, stat)
    if "prefix" in ref:
        assert s.prefix is not None
        for key, value in ref["prefix"].items():
            assert getattr(s.prefix, key) == pytest.approx(value, rel=1e-12), key
    else:
        assert s.prefix is None


# Each excerpt's request count, token sums and medians, counted from the files with
# csv/json/statistics (pinned: an edited excerpt changes them).
EXCERPT_FIGURES = {
    "azure-code": (1000, 2_122_354, 1469, 27_621, 13),
    "azure-conv": (1000, 1_014_189, 999, 247_262, 203),
    "mooncake-conversation": (1000, 13_732_944, 8430, 349_357, 365),
    "mooncake-synthetic": (1000, 11_851_558, 2912, 196_039, 170.5),
}


@pytest.mark.parametrize("name", sorted(EXCERPT_FIGURES))
def test_excerpt_figures(name: str) -> None:
    count, prompt_sum, prompt_median, output_sum, output_median = EXCERPT_FIGURES[name]
    tr = load_trace(EXCERPTS[name])
    s = summarize_trace(tr)
    assert s.requests == count == SOURCES[name].excerpt_requests
    assert int(tr.prompt_tokens.sum()) == prompt_sum
    assert int(tr.output_tokens.sum()) == output_sum
    assert s.prompt_tokens.p50 == prompt_median
    assert s.output_tokens.p50 == output_median


# The upstream READMEs' own numbers for the full traces, a second, external reference.
PUBLISHED_FIGURES = {
    "azure-code": (8819, 2047.8, 1469, 27.9, 13),
    "azure-conv": (19366, 1154.7, 1020, 211.1, 129),
    "mooncake-conversation": (12031, 12035, None, 343, None),
    "mooncake-synthetic": (3993, 15325, None, 149, None),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_FIGURES))
def test_full_trace_matches_published_figures(name: str) -> None:
    count, prompt_mean, prompt_median, output_mean, output_median = PUBLISHED_FIGURES[name]
    s = summarize_trace(_full(name))
    assert s.requests == count
    assert s.prompt_tokens.mean == pytest.approx(prompt_mean, abs=0.5)
    assert s.output_tokens.mean == pytest.approx(output_mean, abs=0.5)
    if prompt_median is not None:
        assert s.prompt_tokens.p50 == prompt_median
        assert s.output_tokens.p50 == output_median


def test_replay_arrays_of_a_real_trace() -> None:
    path = EXCERPTS["mooncake-conversation"]
    tr = load_trace(path)
    rows = _reference_rows(path)
    assert tr.arrival_s[0] == 0.0
    assert (tr.arrival_s[1:] >= tr.arrival_s[:-1]).all()
    assert tr.prompt_tokens.tolist() == [r[1] for r in rows]
    assert tr.output_tokens.tolist() == [r[2] for r in rows]
    assert (tr.cached_prompt_tokens <= tr.prompt_tokens).all()
    assert tr.cached_prompt_tokens[0] == 0  # nothing is cached before the first request
    with pytest.raises(ValueError):
        tr.prompt_tokens[0] = 1  # read-only
    fast = tr.scaled(2.0)
    assert fast.arrival_s[-1] == pytest.approx(tr.arrival_s[-1] / 2)
    assert summarize_trace(fast).rate_per_s == pytest.approx(2 * summarize_trace(tr).rate_per_s)


def test_bounded_prefix_cache_reuses_less() -> None:
    path = EXCERPTS["mooncake-synthetic"]
    unbounded = summarize_trace(load_trace(path)).prefix
    small = summarize_trace(load_trace(path, cache_blocks=1000)).prefix
    assert unbounded is not None and small is not None
    assert small.reuse_rate < unbounded.reuse_rate


# ---------------------------------------------------------------------------
# Fixtures and hand-made traces


def test_azure_fixture_streams_requests() -> None:
    reqs = list(iter_requests(FIXTURES / "azure_code_head.csv"))
    assert [r.prompt_tokens for r in reqs] == [4808, 3180, 110, 7433, 34]
    assert [r.output_tokens for r in reqs] == [10, 8, 27, 14, 12]
    assert reqs[0].arrival_s == 0.0
    # 18:17:04.4249540 - 18:17:03.9799600, all seven digits kept
    assert reqs[-1].arrival_s == pytest.approx(0.444994, abs=1e-9)


def test_mooncake_fixture_prefix_hits() -> None:
    tr = load_trace(FIXTURES / "mooncake_conversation_head.jsonl")
    # Every request starts with block 0; only the first request pays for it.
    assert tr.cached_prompt_tokens.tolist() == [0, 512, 512, 512, 512, 512]
    assert tr.hit_blocks == 5


def test_burstgpt_columns_and_failed_requests() -> None:
    path = FIXTURES / "burstgpt_synthetic.csv"
    assert detect_format(path) == "burstgpt"
    s = summarize_trace(path)
    assert s.requests == 5
    assert s.duration_s == pytest.approx(185.5)
    assert s.zero_output_requests == 1
    assert s.prefix is None
    assert s.prompt_tokens.max == 2310


def test_prefix_cache_takes_the_leading_run_only(tmp_path: Path) -> None:
    lines = [
        {"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]},
        {"timestamp": 5, "input_length": 1500, "output_length": 1, "hash_ids": [1, 2, 3]},
        {"timestamp": 9, "input_length": 1536, "output_length": 1, "hash_ids": [4, 2, 3]},  # 2, 3 not leading
        {"timestamp": 9, "input_length": 700, "output_length": 1, "hash_ids": [1, 2]},  # capped at 700
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    tr = load_trace(path)
    assert tr.cached_prompt_tokens.tolist() == [0, 1024, 0, 700]
    assert tr.arrival_s.tolist() == [0.0, 0.005, 0.009, 0.009]
    lru = load_trace(path, cache_blocks=2)  # after request 2, blocks 2 and 3 remain: 1 was evicted
    assert lru.cached_prompt_tokens.tolist() == [0, 1024, 0, 0]


def test_trace_request_is_validated() -> None:
    with pytest.raises(ValueError, match="prompt_tokens=-1 is invalid"):
        TraceRequest(0.0, -1, 5)


def test_gzip_traces_are_read(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress((FIXTURES / "azure_code_head.csv").read_bytes()))
    assert load_trace(path).requests == 5


def test_plot_writes_a_png(tmp_path: Path) -> None:
    out = plot_trace(load_trace(FIXTURES / "mooncake_conversation_head.jsonl"), tmp_path / "t.png", 1.0)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_of_a_single_request(tmp_path: Path) -> None:
    path = tmp_path / "one.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,10,5\n")
    s = summarize_trace(path)
    assert s.requests == 1 and math.isnan(s.rate_per_s) and s.peak_to_mean == 1.0


# ---------------------------------------------------------------------------
# Malformed files: each error names the file, the line and the field


def _edited(tmp_path: Path, fixture: str, edit: Any, name: str | None = None) -> Path:
    text = (FIXTURES / fixture).read_text()
    path = tmp_path / (name or fixture)
    path.write_text(edit(text))
    return path


def test_truncated_csv_line(tmp_path: Path) -> None:
    path = _edited(tmp_path, "azure_code_head.csv", lambda t: t.rstrip("\n")[:-3])  # drop ",12"
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert str(err.value) == (
        f"{path}:6: truncated line: expected 3 fields (TIMESTAMP,ContextTokens,GeneratedTokens), "
        "got 2: '2023-11-16 18:17:04.4249540,34'"
    )


def test_truncated_jsonl_line(tmp_path: Path) -> None:
    path = _edited(tmp_path, "mooncake_conversation_head.jsonl", lambda t: t[:-40])
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert str(err.value).startswith(f"{path}:6: not valid JSON (truncated line?): ")


def test_wrong_header(tmp_path: Path) -> None:
    path = _edited(tmp_path, "azure_code_head.csv",
                   lambda t: t.replace("ContextTokens", "PromptTokens", 1))
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert str(err.value).startswith(
        f"{path}:1: unrecognised header 'TIMESTAMP,PromptTokens,GeneratedTokens'"
    )
    with pytest.raises(InputError) as err:
        load_trace(path, "azure")
    assert str(err.value) == (
        f"{path}:1: header 'TIMESTAMP,PromptTokens,GeneratedTokens' is not the Azure trace header "
        "'TIMESTAMP,ContextTokens,GeneratedTokens'"
    )


def test_wrong_burstgpt_header(tmp_path: Path) -> None:
    path = _edited(tmp_path, "burstgpt_synthetic.csv", lambda t: t.replace("Response tokens", "Output", 1))
    with pytest.raises(InputError, match="lacks the BurstGPT column\\(s\\) 'Response tokens'"):
        load_trace(path, "burstgpt")


def test_negative_lengths(tmp_path: Path) -> None:
    path = _edited(tmp_path, "azure_code_head.csv", lambda t: t.replace(",110,27", ",-110,27"))
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert str(err.value) == f"{path}:4: ContextTokens=-110 is negative: a token count must be >= 0"
    path = _edited(tmp_path, "mooncake_conversation_head.jsonl",
                   lambda t: t.replace('"output_length": 3,', '"output_length": -3,'), "m.jsonl")
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert str(err.value) == f"{path}:5: output_length=-3 is negative: a token count must be >= 0"


def test_unsorted_timestamps(tmp_path: Path) -> None:
    path = _edited(tmp_path, "azure_code_head.csv",
                   lambda t: t.replace("18:17:04.0781490", "18:17:03.0781490"))
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert str(err.value) == (
        f"{path}:4: TIMESTAMP='2023-11-16 18:17:03.0781490' is earlier than the previous request's "
        "'2023-11-16 18:17:04.0319600': a trace must be sorted by arrival time"
    )
    lines = [{"timestamp": 10, "input_length": 1, "output_length": 1},
             {"timestamp": 9, "input_length": 1, "output_length": 1}]
    path = tmp_path / "u.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    with pytest.raises(InputError, match=r"u\.jsonl:2: timestamp=9 is earlier than the previous request's"):
        load_trace(path)


def test_other_malformed_fields(tmp_path: Path) -> None:
    path = _edited(tmp_path, "azure_code_head.csv", lambda t: t.replace(",3180,", ",31.5x,"))
    with pytest.raises(InputError, match=r":3: ContextTokens='31.5x' is not an integer token count"):
        load_trace(path)
    path = _edited(tmp_path, "azure_code_head.csv",
                   lambda t: t.replace("2023-11-16 18:17:04.03", "yesterday"))
    with pytest.raises(InputError, match=r":3: TIMESTAMP='yesterday19600' is not a timestamp"):
        load_trace(path)
    path = _edited(tmp_path, "mooncake_conversation_head.jsonl",
                   lambda t: t.replace('"hash_ids": [0, 42, 43, 44, 45]', '"hash_ids": [0, 42]'), "h.jsonl")
    with pytest.raises(InputError, match=r"h\.jsonl:4: hash_ids has 2 blocks but input_length=2290 needs "
                                         r"ceil\(2290/512\) = 5"):
        load_trace(path)
    path = _edited(tmp_path, "mooncake_conversation_head.jsonl",
                   lambda t: t.replace('"input_length": 2290, ', ""), "k.jsonl")
    with pytest.raises(InputError, match=r"k\.jsonl:4: missing field\(s\) input_length"):
        load_trace(path)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "e.csv"
    empty.write_text("\n\n")
    with pytest.raises(InputError, match=r"e\.csv: empty file: no requests"):
        load_trace(empty)
    header_only = tmp_path / "h.csv"
    header_only.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    with pytest.raises(InputError, match=r"h\.csv: no requests"):
        load_trace(header_only)
    with pytest.raises(InputError, match=r"nope\.csv: cannot read"):
        load_trace(tmp_path / "nope.csv")


# ---------------------------------------------------------------------------
# CLI


def test_cli_trace_summarize(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from servesim.cli.main import main

    assert main(["trace", "summarize", str(FIXTURES / "mooncake_conversation_head.jsonl"),
                 "--format", "json", "--plot", str(tmp_path / "p.png")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["requests"] == 6 and data["prefix"]["cached_tokens"] == 5 * 512
    assert data["rate_per_s"] is None  # all at t = 0: no rate (NaN becomes null)
    assert (tmp_path / "p.png").is_file()
    assert main(["trace", "summarize", str(FIXTURES / "azure_code_head.csv")]) == 0
    text = capsys.readouterr().out
    assert "requests          5" in text and "prompt" in text


def test_cli_trace_error_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from servesim.cli.main import main

    path = _edited(tmp_path, "azure_code_head.csv", lambda t: t.replace(",110,27", ",-110,27"))
    assert main(["trace", "summarize", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"servesim trace: error: {path}:4: ContextTokens=-110 is negative: a token count must be >= 0\n"
    )


@pytest.mark.parametrize("module", ["servesim.inputs.traces", "servesim.inputs.telemetry",
                                    "servesim.inputs.calibrate"])
def test_public_names_resolve(module: str) -> None:
    import importlib

    mod = importlib.import_module(module)
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.{name}"
    assert mod.InputError is InputError  # one exception type for every input file


def test_traces_import_without_numpy() -> None:
    """The readers' module imports numpy and matplotlib only inside the functions that need them."""
    import subprocess
    import sys

    code = ("import sys; import servesim.inputs.traces; "
            "print(sorted(m for m in ('numpy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
