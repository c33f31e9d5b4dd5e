"""On a terminal, output fits its width; into a file or a pipe it stays whole and byte-stable."""

from __future__ import annotations

import pytest

from servesim.cli.main import _wrap, main
from servesim.render import text


@pytest.fixture
def narrow():
    old = text.WIDTH
    text.WIDTH = 60
    yield 60
    text.WIDTH = old


def test_tables_drop_detail_columns_and_keep_the_answer(narrow):
    headers = ["deployment", "goodput", "TTFT", "a long detail column", "winner"]
    rows = [["colocated x8, spec k=5", "3.000", "559", "TPOT 13.3 of 28 ms, more", "disaggregated"]]
    out = text.table(headers, rows)
    lines = out.splitlines()
    assert all(len(line) <= narrow for line in lines)
    # The row's name and its answer stay; the detail next to the answer goes first.
    assert "deployment" in lines[0] and "winner" in lines[0] and "disaggregated" in lines[2]
    assert "a long detail column" not in out
    assert "more column" in lines[-1] and "--format csv|json" in lines[-1]
    # never fewer than two columns, even when two do not fit; a table may name more columns to keep
    two = text.table(["x" * 50, "y" * 50, "z"], [["1", "2", "3"]])
    assert "x" * 50 in two and "z" in two.splitlines()[0] and "y" * 50 not in two
    kept = text.table(["a", "b" * 30, "c" * 30, "d"], [["1", "2", "3", "4"]], keep=(0, 1, -1))
    assert "b" * 30 in kept and "c" * 30 not in kept


def test_without_a_terminal_every_column_stays():
    assert text.WIDTH is None  # tests run with stdout captured: not a terminal
    out = text.table(["a" * 80, "b" * 80], [["1", "2"]])
    assert "a" * 80 in out and "b" * 80 in out and "more column" not in out


def test_long_lines_wrap_at_words_with_indented_continuations():
    line = "  " + " ".join(["word"] * 40)
    wrapped = _wrap(line + "\nshort", 50).splitlines()
    assert all(len(w) <= 50 for w in wrapped)
    assert wrapped[0].startswith("  word") and wrapped[1].startswith("    word")
    assert wrapped[-1] == "short"
    assert " ".join(w.strip() for w in wrapped[:-1]) == line.strip()


def test_piped_output_is_byte_stable(capsys):
    main(["plan", "--preset", "rag", "--quiet"])
    a = capsys.readouterr().out
    main(["plan", "--preset", "rag", "--quiet"])
    assert capsys.readouterr().out == a and "more column" not in a
