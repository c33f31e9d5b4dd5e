"""The report: Markdown tables parse, HTML renders in headless Chromium with every image loaded."""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from servesim.render.report import Block, to_html, to_markdown, write_report
from tests.cli_helpers import run_cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    res = run_cli("report", "--preset", "rag", "--out", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    assert "report.html" in res.stdout
    return out


def test_markdown_tables_parse(report_dir):
    from markdown_it import MarkdownIt

    text = (report_dir / "report.md").read_text()
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    tables = [t for t in tokens if t.type == "table_open"]
    assert len(tables) >= 4
    # Every body row has as many cells as its header.
    widths: list[int] = []
    cells = 0
    for t in tokens:
        if t.type in ("th_open", "td_open"):
            cells += 1
        elif t.type == "tr_close":
            widths.append(cells)
            cells = 0
        elif t.type == "table_close":
            assert len(set(widths)) == 1, widths
            widths = []
    for name in ("goodput_vs_rate.png", "disaggregation.png", "speculative.png", "ttft_distribution.png"):
        assert f"]({name})" in text and (report_dir / name).stat().st_size > 10_000


def test_plan_chart_shows_the_recommended_deployment(report_dir):
    import re

    text = (report_dir / "report.md").read_text()
    label = re.search(r"^Deploy (.+)\.$", text, re.M)
    assert label is not None
    # rag's plan recommends speculation; the goodput chart draws that deployment, not only plain ones.
    assert "spec k=" in label.group(1)
    assert f"the recommended deployment ({label.group(1)}), at the planned rate](goodput_vs_rate.png)" in text


def test_html_is_self_contained(report_dir):
    page = (report_dir / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 4
    assert "http://" not in page and "https://" not in page
    assert "colocated" in page and "Assumptions and caveats" in page
    # The measured biases of `servesim validate`, one row per assumption and figure.
    assert "Measured by the simulator" in page and page.count("free KV-transfer machinery") >= 3
    assert "<th>change (95% CI)</th>" in page and " +- " in page


def test_blocks_render_the_same_content_in_both_formats():
    blocks = [Block("h1", "T"), Block("p", "a | b <c>"), Block("ul", items=("x",)),
              Block("table", headers=("h1", "h2"), rows=(("1", "p|q"),))]
    md, page = to_markdown(blocks), to_html(blocks, "T")
    assert "a | b <c>" in md and "a | b &lt;c&gt;" in page
    assert "| 1 | p\\|q |" in md and '<td class="n">1</td><td>p|q</td>' in page


def test_write_is_atomic_and_leaves_no_temporary_files(tmp_path):
    write_report([Block("h1", "T")], tmp_path, "T")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "report.md"]
    assert oct((tmp_path / "report.md").stat().st_mode & 0o777) != "0o600"


def _png_pixels_vary(path: Path) -> bool:
    """Decode an 8-bit RGB(A) PNG (no filters needed for a variance check) and see if it is not blank."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    return len(set(raw[i:i + 3] for i in range(0, min(len(raw), 3_000_000), 997))) > 20


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs it)")
def test_html_renders_in_headless_chromium(report_dir, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    errors: list[str] = []
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((report_dir / "report.html").as_uri())
            page.wait_for_load_state("load")
            images = page.evaluate(
                "Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight])"
            )
            shot = tmp_path / "shot.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert len(images) == 4
    assert all(ok and w > 100 and h > 100 for ok, w, h in images), images
    assert errors == []
    assert shot.stat().st_size > 50_000 and _png_pixels_vary(shot)


def test_report_bad_input_is_one_line():
    res = run_cli("report", "--attainment", "0", "--out", os.devnull)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "--attainment" in res.stderr


def test_a_capacity_report_names_its_engine_and_ends_its_price_sentence_once(tmp_path):
    """The "How these numbers were made" list names the engine whose tables priced the plan (not
    vLLM whatever the engine), and the price source's own closing period is not doubled."""
    out = tmp_path / "rep"
    res = run_cli("report", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--gpus", "8", "--engine",
                  "sglang", "--isl", "512", "--osl", "64", "--top", "2", "--out", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    text = (out / "report.md").read_text()
    assert "from SGLang's measured kernel tables" in text and "vLLM kernel tables" not in text
    assert ".." not in text.split("GPU price:", 1)[1].split("\n- ", 1)[0]
    # the recommendation carries its prediction interval (servesim/plan/interval.py)
    assert "80% prediction interval (the out-of-sample errors of published runs" in text
