"""Input files as people really have them (servesim._textfile and every reader that uses it).

Each hostile input is made here, byte by byte, and each asserts the one-line
error a user sees: the file, the line (and byte offset for undecodable bytes),
the field or key, and what is valid.  None may end in a traceback.
"""

from __future__ import annotations

import codecs
import gzip
import json
import math
from pathlib import Path

import pytest

from servesim._catalogfile import CatalogError, load_file
from servesim._checks import InputError
from servesim._textfile import (
    MAX_COUNT,
    iter_lines,
    parse_count,
    parse_json,
    parse_number,
    parse_toml,
    read_text,
    table_at,
)
from servesim.hardware.catalog import load_catalog
from servesim.hardware.model_config import read_config
from servesim.inputs.calibrate import load_calibration, read_points
from servesim.inputs.telemetry import fit_alpha, parse_exposition, read_counters
from servesim.inputs.traces import load_trace, summarize_trace, workload_from_trace
from servesim.render.text import FEW_SAMPLES, format_interval
from servesim.sim.stats import MIN_INTERVAL_SAMPLES, Estimate, estimate

HERE = Path(__file__).resolve().parents[1]  # tests/
DATA = HERE / "data"

AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:17:03.9799600,4808,10\n"
    "2023-11-16 18:17:04.0319600,3180,8\n"
    "2023-11-16 18:17:04.0781490,110,27\n"
)

SCRAPE = (
    "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
    "# TYPE vllm:spec_decode_num_drafts_total counter\n"
    'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 1000.0\n'
    "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.\n"
    "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n"
    'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 800.0\n'
    'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 640.0\n'
)


def _write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


# ---------------------------------------------------------------------------
# Encodings


@pytest.mark.parametrize(
    ("encoding", "prefix"),
    [("utf-16", b""), ("utf-16-be", codecs.BOM_UTF16_BE), ("utf-8", codecs.BOM_UTF8), ("utf-8", b"")],
    ids=["utf16-le-bom", "utf16-be-bom", "utf8-bom", "utf8"],
)
def test_utf16_and_bom_csv_traces_are_read(tmp_path: Path, encoding: str, prefix: bytes) -> None:
    text = AZURE.replace("\n", "\r\n")  # Excel writes CRLF
    path = _write(tmp_path, "t.csv", prefix + text.encode(encoding))
    tr = load_trace(path)
    assert tr.prompt_tokens.tolist() == [4808, 3180, 110]
    assert tr.output_tokens.tolist() == [10, 8, 27]
    assert tr.arrival_s[-1] == pytest.approx(0.098189, abs=1e-9)
    gz = _write(tmp_path, "t.csv.gz", gzip.compress(prefix + text.encode(encoding)))
    assert load_trace(gz).prompt_tokens.tolist() == [4808, 3180, 110]


def test_bom_mooncake_and_burstgpt(tmp_path: Path) -> None:
    head = (DATA / "mooncake_conversation_head.jsonl").read_bytes()
    moon = _write(tmp_path, "m.jsonl", codecs.BOM_UTF8 + head)
    assert load_trace(moon).requests == 6
    burst = _write(tmp_path, "b.csv", (DATA / "burstgpt_synthetic.csv").read_text().encode("utf-16"))
    assert summarize_trace(burst).requests == 5


def test_latin1_trace_is_refused_naming_line_and_byte(tmp_path: Path) -> None:
    text = AZURE.replace("TIMESTAMP", "TIMESTAMP", 1) + "2023-11-16 18:17:05.0,12,3  # café\n"
    raw = text.encode("latin-1")
    path = _write(tmp_path, "excel.csv", raw)
    offset = raw.index(b"\xe9")
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert _one_line(err) == (
        f"{path}: line 5: byte {offset} (0xe9) is not UTF-8 text (a Latin-1 or Excel export?); "
        "save the file as UTF-8 (or UTF-16 with a BOM)"
    )
    # The same file gzipped: the offset is in the decompressed data.
    gz = _write(tmp_path, "excel.csv.gz", gzip.compress(raw))
    with pytest.raises(InputError, match=rf"line 5: byte {offset} of the decompressed data \(0xe9\)"):
        load_trace(gz)
    # Read whole (calibration points, catalogs): the same words.
    with pytest.raises(InputError, match=rf"line 5: byte {offset} \(0xe9\) is not UTF-8 text"):
        read_text(path)


def test_latin1_calibration_csv_is_refused(tmp_path: Path) -> None:
    text = (DATA / "calibration_points.csv").read_text() + "# señal\n"
    path = _write(tmp_path, "p.csv", text.encode("latin-1"))
    with pytest.raises(InputError) as err:
        read_points([path])
    assert _one_line(err).startswith(f"{path}: line 6: byte ")
    assert "is not UTF-8 text" in str(err.value)


def test_utf16_calibration_csv_is_read(tmp_path: Path) -> None:
    text = (DATA / "calibration_points.csv").read_text()
    path = _write(tmp_path, "p.csv", text.encode("utf-16"))
    points, _ = read_points([path])
    assert len(points) == 4


# ---------------------------------------------------------------------------
# Gzip and size bounds


def test_truncated_gzip_trace_is_refused(tmp_path: Path) -> None:
    blob = gzip.compress(AZURE.encode() * 200)
    path = _write(tmp_path, "t.csv.gz", blob[: len(blob) // 2])
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert _one_line(err).startswith(
        f"{path}: truncated gzip data: the file ends before the compressed stream does"
    )
    with pytest.raises(InputError, match="truncated gzip data"):
        read_text(path)


def test_damaged_gzip_is_refused(tmp_path: Path) -> None:
    blob = bytearray(gzip.compress(AZURE.encode() * 50))
    blob[20:40] = b"\xff" * 20
    path = _write(tmp_path, "t.csv.gz", bytes(blob))
    with pytest.raises(InputError, match=r"t\.csv\.gz: (damaged|truncated) gzip data"):
        load_trace(path)


def test_a_2_mb_single_line_is_refused_unread(tmp_path: Path) -> None:
    path = _write(tmp_path, "one.jsonl", b"{" + b" " * (2 * 2**20) + b"}\n")
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert _one_line(err) == (
        f"{path}: line 1: longer than 1 MiB: not a line of text (a binary file, or a file without "
        "line breaks?)"
    )
    # The bound is per line: lines are read one at a time, at most 1 MiB + 1 byte each.
    lines = iter_lines(path, max_line_bytes=1000)
    with pytest.raises(InputError, match="line 1: longer than 1,000 bytes"):
        next(lines)


def test_a_csv_field_over_128_kib_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.csv", AZURE + '2023-11-16 18:17:05.0,"' + "9" * 200_000 + '",3\n')
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert _one_line(err) == f"{path}:5: a field is longer than 131,072 characters: not a trace line"


def test_a_file_read_whole_is_bounded_before_reading(tmp_path: Path) -> None:
    path = _write(tmp_path, "big.prom", b"#" * 2048)
    with pytest.raises(InputError, match=r"big\.prom: too large: 2,048 bytes, larger than 1 KiB"):
        read_text(path, what="", max_bytes=1024)
    bomb = _write(tmp_path, "bomb.toml.gz", gzip.compress(b"#" * 10_000))
    with pytest.raises(InputError, match="decompresses to more than 2 KiB"):
        read_text(bomb, max_bytes=2048)


# ---------------------------------------------------------------------------
# Numbers


def test_a_5000_digit_token_count_is_refused(tmp_path: Path) -> None:
    huge = "7" * 5000
    path = _write(tmp_path, "t.csv", AZURE.replace(",3180,", f",{huge},"))
    with pytest.raises(InputError) as err:
        load_trace(path)
    msg = _one_line(err)
    assert msg.startswith(f"{path}:3: ContextTokens='7777")
    assert msg.endswith("(5,000 characters) is too large: a token count must be an integer in "
                        "[0, 1,000,000,000]")
    assert len(msg) < 300 and "Exceeds the limit" not in msg
    # In JSON lines the parser meets it first.
    line = '{"timestamp": 0, "input_length": ' + huge + ', "output_length": 1}\n'
    moon = _write(tmp_path, "m.jsonl", line)
    with pytest.raises(InputError) as err:
        load_trace(moon)
    assert _one_line(err) == (
        f"{moon}:1: not valid JSON: a number with more than 4,300 digits (no real value has that many)"
    )


@pytest.mark.parametrize("value", ["1000000001", "9223372036854775808", "99999999999999999999999"])
def test_token_counts_above_a_billion_are_refused(tmp_path: Path, value: str) -> None:
    path = _write(tmp_path, "t.csv", AZURE.replace(",27\n", f",{value}\n"))
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert _one_line(err) == (
        f"{path}:4: GeneratedTokens={value} is too large: a token count must be an integer in "
        "[0, 1,000,000,000]"
    )
    moon = _write(tmp_path, "m.jsonl",
                  json.dumps({"timestamp": 0, "input_length": int(value), "output_length": 1}) + "\n")
    with pytest.raises(InputError, match=r"m\.jsonl:1: input_length=\d+ is too large"):
        load_trace(moon)


def test_a_billion_tokens_is_the_largest_count() -> None:
    assert parse_count(str(MAX_COUNT), "f:1", "n") == MAX_COUNT
    assert parse_count(1e9, "f:1", "n") == MAX_COUNT
    with pytest.raises(InputError, match="n=1e\\+300 is too large"):
        parse_count(1e300, "f:1", "n")
    with pytest.raises(InputError, match="n=inf is not an integer token count"):
        parse_count(math.inf, "f:1", "n")
    with pytest.raises(InputError, match="n='1_000' is not an integer token count"):
        parse_count("1_000", "f:1", "n")


def test_timestamps_must_be_finite(tmp_path: Path) -> None:
    for raw in ("1e400", "NaN", str(10**400)):
        line = '{"timestamp": ' + raw + ', "input_length": 5, "output_length": 1}\n'
        path = _write(tmp_path, "m.jsonl", line)
        with pytest.raises(InputError) as err:
            load_trace(path)
        assert "timestamp=" in _one_line(err) and "must be a finite number >= 0" in str(err.value)
    with pytest.raises(InputError, match=r"x=inf is invalid: must be a finite number"):
        parse_number(1e400, "f", "x")
    with pytest.raises(InputError, match=r"x=1000.* is invalid: must be a finite number"):
        parse_number(10**400, "f", "x")


def test_calibration_numbers_are_bounded(tmp_path: Path) -> None:
    text = (DATA / "calibration_points.csv").read_text()
    header, first, *rest = text.splitlines()
    cells = first.split(",")
    cells[0] = "9" * 5000  # rate_per_s
    path = _write(tmp_path, "p.csv", "\n".join([header, ",".join(cells), *rest]) + "\n")
    with pytest.raises(InputError) as err:
        read_points([path])
    assert _one_line(err).startswith(f"{path}:2: rate_per_s='9999")
    assert "is not a number (too long)" in str(err.value)
    big = json.loads(json.dumps({"completed": 10, "total_input_tokens": 10**400, "total_output_tokens": 10,
                                 "mean_ttft_ms": 1.0, "mean_tpot_ms": 1.0, "request_rate": 1.0}))
    jpath = _write(tmp_path, "r.json", json.dumps(big))
    with pytest.raises(InputError, match=r"r\.json: total_input_tokens=1000.* is invalid: must be a finite"):
        read_points([jpath])


# ---------------------------------------------------------------------------
# JSON


def test_deeply_nested_json_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "r.json", "[" * 100_000)
    with pytest.raises(InputError) as err:
        read_points([path])
    assert _one_line(err) == f"{path}: not valid JSON: nested too deeply"
    moon = _write(tmp_path, "m.jsonl", '{"timestamp": 0, "x": ' + "[" * 50_000 + "\n")
    with pytest.raises(InputError, match=r"m\.jsonl:1: not valid JSON: nested too deeply"):
        load_trace(moon)
    cfg = _write(tmp_path, "config.json", "[" * 100_000)
    with pytest.raises(InputError, match="not valid JSON: nested too deeply"):
        read_config(cfg)


def test_parse_json_messages() -> None:
    with pytest.raises(InputError, match=r"^f:2: not valid JSON \(truncated\?\): Expecting value at column"):
        parse_json('{"a":\n  1, "b": }', "f")
    with pytest.raises(InputError, match=r"^f: not valid JSON: NaN is not a JSON number$"):
        parse_json("[NaN]", "f", constants=False)
    assert math.isnan(parse_json("[NaN]", "f")[0])


# ---------------------------------------------------------------------------
# TOML


def test_binary_toml_catalog_is_refused_in_one_line(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    path = _write(tmp_path, "cat.toml", png)
    with pytest.raises(CatalogError) as err:
        load_file(path)
    assert _one_line(err) == (
        f"catalog file {str(path)!r}: line 1: byte 0 (0x89) is not UTF-8 text (a Latin-1 or Excel "
        "export?); save the file as UTF-8 (or UTF-16 with a BOM)"
    )
    with pytest.raises(CatalogError, match="is not UTF-8 text"):
        load_catalog(path)
    # Valid UTF-8 but not TOML (NUL bytes): one line too.
    nul = _write(tmp_path, "nul.toml", b"\x00\x01\x02 = 3\n")
    with pytest.raises(CatalogError) as err:
        load_file(nul)
    assert _one_line(err).startswith(f"catalog file {str(nul)!r}: not valid TOML: ")


def test_utf16_catalog_is_read(tmp_path: Path) -> None:
    path = _write(tmp_path, "cat.toml", '[link.slow]\nGBps = 1\nefficiency = 0.5\n'.encode("utf-16"))
    assert load_file(path) == {"link": {"slow": {"GBps": 1, "efficiency": 0.5}}}


def _calibration(tmp_path: Path, text: str) -> Path:
    return _write(tmp_path, "node.toml", text)


GOOD_NODE = ('model = "llama-3-70b"\nprefill_tokens_per_s = 12000.0\ndecode_tokens_per_s = 2600.0\n'
             "tpot_base_s = 0.025\nbeta = 0.5\n")


def test_calibration_toml_with_a_scalar_where_a_table_is_expected(tmp_path: Path) -> None:
    path = _calibration(tmp_path, "node = 5\n")
    with pytest.raises(CatalogError) as err:
        load_calibration(path)
    assert _one_line(err) == (
        f"calibration file {str(path)!r}: 'node' must be a table ([node] with model, prefill_tokens_per_s, "
        "decode_tokens_per_s, tpot_base_s, beta), got a number 5"
    )


def test_calibration_toml_with_a_list_of_tables_or_a_list_value(tmp_path: Path) -> None:
    path = _calibration(tmp_path, "[[node]]\n" + GOOD_NODE)
    with pytest.raises(CatalogError, match=r"'node' must be a table \(\[node\] with .*\), got a list"):
        load_calibration(path)
    path = _calibration(tmp_path, "[node]\n" + GOOD_NODE.replace('"llama-3-70b"', '["llama-3-70b"]'))
    with pytest.raises(CatalogError) as err:
        load_calibration(path)
    assert _one_line(err).startswith(
        f"calibration file {str(path)!r}: [node] key 'model' = ['llama-3-70b'] is invalid: must be one of "
    )
    path = _calibration(tmp_path, "[node]\n" + GOOD_NODE.replace("beta = 0.5", 'beta = "half"'))
    with pytest.raises(CatalogError, match=r"\[node\] key 'beta': beta='half' is invalid: must be a real"):
        load_calibration(path)
    path = _calibration(tmp_path, "[node]\n" + GOOD_NODE.replace("beta = 0.5\n", ""))
    with pytest.raises(CatalogError, match=r"\[node\] is missing 'beta'"):
        load_calibration(path)
    path = _calibration(tmp_path, "[node]\n" + GOOD_NODE)
    node, beta = load_calibration(path)
    assert beta == 0.5 and node.tpot_base_s == 0.025


def test_table_at() -> None:
    doc = parse_toml("a = [1]\n[b]\nc = 1\n", "f")
    assert table_at(doc, "b", "f") == {"c": 1}
    with pytest.raises(InputError, match=r"^f: 'a' must be a table \(\[a\]\), got a list \[1\]$"):
        table_at(doc, "a", "f")
    with pytest.raises(InputError, match=r"^f: missing table \[z\]$"):
        table_at(doc, "z", "f")
    with pytest.raises(InputError, match=r"^f: not valid TOML: "):
        parse_toml("[a\n", "f")


# ---------------------------------------------------------------------------
# Prometheus scrapes


def test_a_duplicated_series_is_refused_naming_it(tmp_path: Path) -> None:
    assert fit_alpha(parse_exposition(SCRAPE, "s")).alpha == pytest.approx(1.44 / 1.80)  # S / (S + F)
    dup = SCRAPE + 'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 1000.0\n'
    with pytest.raises(InputError) as err:
        parse_exposition(dup, "d.prom")
    assert _one_line(err) == (
        'd.prom:8: duplicated series vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} '
        "(also line 3): a scrape lists each series once (invalid exposition format; two scrapes in one file?)"
    )
    # Two scrapes concatenated into one file: refused, never summed twice.
    path = _write(tmp_path, "two.prom", SCRAPE + SCRAPE)
    with pytest.raises(InputError, match=r"two\.prom:10: duplicated series vllm:spec_decode_num_drafts"):
        read_counters([str(path)])


def test_the_same_series_in_other_labels_is_not_a_duplicate() -> None:
    lines = SCRAPE.splitlines()
    other = [line.replace('engine="0"', 'engine="1"') for line in lines if not line.startswith("#")]
    two_engines = "\n".join([*lines[:3], other[0], *lines[3:], *other[1:]]) + "\n"
    counts = parse_exposition(two_engines, "s")
    assert counts.num_drafts == 2000 and counts.accepted_per_pos == (1600.0, 1280.0)


def test_a_latin1_scrape_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "s.prom", (SCRAPE.replace("drafts.", "drafts é.")).encode("latin-1"))
    with pytest.raises(InputError) as err:
        read_counters([str(path)])
    assert _one_line(err).startswith(f"{path}: line 1: byte ")
    utf16 = _write(tmp_path, "u.prom", SCRAPE.encode("utf-16"))
    assert read_counters([str(utf16)]).num_drafts == 1000


# ---------------------------------------------------------------------------
# Degenerate traces: refused by load_trace, so by every command alike


ZERO = ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:17:03.0,0,0\n2023-11-16 18:17:04.0,0,0\n2023-11-16 18:17:05.0,0,0\n")


def test_an_all_zero_trace_is_refused_by_load_trace(tmp_path: Path) -> None:
    path = _write(tmp_path, "zero.csv", ZERO)
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert _one_line(err) == (
        f"{path}: every one of the 3 requests has 0 prompt and 0 output tokens: nothing to serve "
        "(a request has at least one prompt token); check the token-count columns"
    )
    prompts = _write(tmp_path, "p.csv", ZERO.replace(",0,0", ",0,7"))
    with pytest.raises(InputError, match="the 3 requests has 0 prompt tokens: nothing to prefill"):
        load_trace(prompts)
    outputs = _write(tmp_path, "o.csv", ZERO.replace(",0,0", ",9,0"))
    with pytest.raises(InputError, match=r"has 0 output tokens \(failed requests\?\): nothing to decode"):
        load_trace(outputs)
    # Some zeros are fine (BurstGPT keeps failed requests).
    some = _write(tmp_path, "s.csv", ZERO.replace(",0,0", ",9,4", 1))
    assert load_trace(some).requests == 3


@pytest.mark.parametrize("command", [["simulate", "--trace"], ["plan", "--trace"], ["trace", "summarize"]])
def test_every_command_refuses_an_all_zero_trace_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    from servesim.cli.main import main

    path = _write(tmp_path, "zero.csv", ZERO)
    assert main([*command, str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"servesim {command[0]}: error: {path}: every one of the 3 requests has 0 prompt and 0 output "
        "tokens: nothing to serve (a request has at least one prompt token); check the token-count columns\n"
    )


def test_a_rate_needs_two_instants(tmp_path: Path) -> None:
    one = json.dumps({"timestamp": 5, "input_length": 10, "output_length": 3}) + "\n"
    lines = one * 4
    path = _write(tmp_path, "m.jsonl", lines)
    tr = load_trace(path)  # a summary of it is fine (no rate)
    assert math.isnan(summarize_trace(tr).rate_per_s)
    msg = f"{path}: every request arrives at the same instant; the rate is undefined"
    with pytest.raises(InputError) as err:
        load_trace(path, need_rate=True)
    assert str(err.value) == msg
    with pytest.raises(InputError) as err:
        workload_from_trace(tr, slo_ttft_s=1.0, slo_tpot_s=0.05)
    assert str(err.value) == msg


# ---------------------------------------------------------------------------
# Confidence intervals


def test_an_interval_near_zero_is_clipped_to_the_range() -> None:
    wait = estimate([0.0, 0.0, 0.0, 1.2], lower=0.0)
    assert wait.mean - wait.half_width < 0  # the raw t interval crosses 0
    assert wait.low == 0.0 and wait.high == pytest.approx(wait.mean + wait.half_width)
    assert format_interval(wait.mean - wait.half_width, wait.mean + wait.half_width, ".2f", samples=4) == (
        f"[0.00, {wait.mean + wait.half_width:.2f}]"
    )
    p = estimate([0.9, 1.0, 1.0, 1.0], lower=0.0, upper=1.0)
    assert p.high == 1.0 and p.interval is not None and p.interval[1] == 1.0
    assert format_interval(0.8, 1.07, ".3f", samples=4, upper=1.0) == "[0.800, 1.000]"
    # Unbounded by default: a difference may be negative.
    assert estimate([-1.0, 0.0, 1.0]).low < 0


def test_fewer_than_three_samples_is_not_an_interval() -> None:
    two = estimate([0.0, 0.0])
    assert two.low == two.high == 0.0 and two.interval is None
    assert format_interval(two.low, two.high, ".2f", samples=2) == FEW_SAMPLES == "n/a (fewer than 3 samples)"
    # the renderer's mirror of the simulator's rule
    from servesim.render import text

    assert text.MIN_INTERVAL_SAMPLES == MIN_INTERVAL_SAMPLES
    assert estimate([1.0, 2.0, 3.0]).interval is not None
    assert Estimate.exact(0.0).interval == (0.0, 0.0)
    assert format_interval(None, None, ".2f", samples=5) == "-"
    assert Estimate(1.0, 0.5, (1.0, 1.0, 1.0)).bounded(0.0, 1.0).high == 1.0


def test_simulate_prints_clipped_intervals(capsys: pytest.CaptureFixture[str]) -> None:
    from servesim.cli.main import main

    args = ["simulate", "--servers", "4", "--rate", "1", "--requests", "200", "--no-timing"]
    assert main([*args, "--replications", "3"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("  ")[1].strip(): line for line in out.splitlines() if line.startswith("  mean wait")
            or line.startswith("  P(wait)") or line.startswith("  p99 wait")}
    assert len(rows) == 3
    for line in rows.values():
        lo, hi = (float(x) for x in line.split("[")[1].split("]")[0].split(","))
        assert 0.0 <= lo <= hi
    pw = rows["P(wait)"].split("[")[1].split("]")[0]
    assert 0.0 <= float(pw.split(",")[1]) <= 1.0
    assert main([*args, "--replications", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("n/a (fewer than 3 samples)") == 3
    assert "[" not in out.split("Kimura")[1].split("M/M/c")[0]
