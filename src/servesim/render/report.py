"""A report a person can hand on: one self-contained HTML file and the same content as Markdown.

The content is built once as a list of blocks (headings, paragraphs, tables,
images, lists); :func:`to_markdown` and :func:`to_html` render the same blocks,
so the two files cannot disagree.  The HTML embeds its images as data URIs and
needs no network; the Markdown refers to PNG files written beside it.  Every
file is written atomically (temporary file, then rename).
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from pathlib import Path

from servesim.render.output import write_atomic, write_set

# write_atomic is re-exported from servesim.render.output for existing callers.
__all__ = ["Block", "to_html", "to_markdown", "write_atomic", "write_report"]


@dataclass(frozen=True)
class Block:
    """One piece of report content.

    kind: "h1" | "h2" | "p" | "ul" | "table" | "img".  ``text`` holds the
    heading/paragraph text or the image caption; ``items`` list items;
    ``headers``/``rows`` a table; ``name``/``png`` an image.
    """

    kind: str
    text: str = ""
    items: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    name: str = ""
    png: bytes = b""


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if b.kind == "h1":
            out.append(f"# {b.text}\n")
        elif b.kind == "h2":
            out.append(f"## {b.text}\n")
        elif b.kind == "p":
            out.append(f"{b.text}\n")
        elif b.kind == "ul":
            out.append("\n".join(f"- {i}" for i in b.items) + "\n")
        elif b.kind == "table":
            lines = ["| " + " | ".join(_md_cell(h) for h in b.headers) + " |",
                     "|" + "|".join(" --- " for _ in b.headers) + "|"]
            lines += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in b.rows]
            out.append("\n".join(lines) + "\n")
        elif b.kind == "img":
            out.append(f"![{b.text}]({b.name})\n")
        else:
            raise ValueError(f"unknown block kind {b.kind!r}")
    return "\n".join(out)


_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #1b1f23; line-height: 1.45; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .8em 0; font-size: 90%; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f0f3f6; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; display: block; margin: .8em 0; }
figcaption { font-size: 90%; color: #555; }
"""


_NUMBER = re.compile(r"^[-+]?[\d.,]+(%|x)?$")


def _num(cell: str) -> str:
    """Right-align numeric cells, leave text left-aligned."""
    return ' class="n"' if _NUMBER.match(cell) else ""


def to_html(blocks: list[Block], title: str) -> str:
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f"<title>{e(title)}</title>", f"<style>{_CSS}</style>", "</head>", "<body>"]
    for b in blocks:
        if b.kind in ("h1", "h2"):
            out.append(f"<{b.kind}>{e(b.text)}</{b.kind}>")
        elif b.kind == "p":
            out.append(f"<p>{e(b.text)}</p>")
        elif b.kind == "ul":
            out.append("<ul>" + "".join(f"<li>{e(i)}</li>" for i in b.items) + "</ul>")
        elif b.kind == "table":
            head = "".join(f"<th>{e(h)}</th>" for h in b.headers)
            body = "".join("<tr>" + "".join(f"<td{_num(c)}>{e(c)}</td>" for c in r) + "</tr>" for r in b.rows)
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif b.kind == "img":
            data = base64.b64encode(b.png).decode("ascii")
            out.append(f'<figure><img src="data:image/png;base64,{data}" alt="{e(b.text)}">'
                       f"<figcaption>{e(b.text)}</figcaption></figure>")
        else:
            raise ValueError(f"unknown block kind {b.kind!r}")
    out += ["</body>", "</html>", ""]
    return "\n".join(out)


def write_report(blocks: list[Block], out_dir: Path, title: str, stem: str = "report") -> dict[str, Path]:
    """Write ``stem.html`` (self-contained), ``stem.md`` and its PNGs into ``out_dir``, all or none.

    Everything is rendered in memory first; :func:`servesim.render.output.write_set` then writes
    every file to a temporary name and renames them only when all were written.
    """
    files: dict[str, bytes] = {b.name: b.png for b in blocks if b.kind == "img"}
    files[f"{stem}.md"] = to_markdown(blocks).encode("utf-8")
    files[f"{stem}.html"] = to_html(blocks, title).encode("utf-8")
    paths = write_set(out_dir, files)
    written = {name: path for name, path in paths.items() if not name.startswith(f"{stem}.")}
    written["markdown"], written["html"] = paths[f"{stem}.md"], paths[f"{stem}.html"]
    return written
