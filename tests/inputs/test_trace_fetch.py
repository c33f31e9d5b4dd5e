"""Shipped trace excerpts and ``servesim trace fetch`` (servesim.inputs.fetch).

No test touches the internet: downloads are served from ``file://`` URLs and
from an HTTP server on 127.0.0.1; "offline" is a DNS failure (getaddrinfo
made to fail), a refused connection to a closed local port, and a local
server that never answers.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from servesim.cli.main import main
from servesim.inputs import fetch
from servesim.inputs.fetch import EXCERPT_DIR, EXCERPTS, SOURCES, excerpt_path, fetch_trace
from servesim.inputs.traces import InputError, load_trace

from .test_traces import _full


def _plain(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _serve_excerpt_as(monkeypatch: pytest.MonkeyPatch, name: str, url: str | None = None,
                      data: bytes | None = None) -> bytes:
    """Point SOURCES[name] at its own excerpt (a file:// URL), pinned to the excerpt's checksum."""
    body = _plain(EXCERPTS[name]) if data is None else data
    src = SOURCES[name]
    monkeypatch.setitem(SOURCES, name, dataclasses.replace(
        src, url=url or EXCERPTS[name].as_uri(), sha256=_sha(body), size=len(body)))
    return body


# ---------------------------------------------------------------------------
# Excerpts


def test_every_excerpt_ships_with_its_licence_and_readme() -> None:
    assert set(EXCERPTS) == {"azure-code", "azure-conv", "mooncake-conversation", "mooncake-synthetic"}
    names = {p.name for p in EXCERPT_DIR.iterdir()}
    licences = {"LICENSE-AzurePublicDataset-CC-BY-4.0.txt", "LICENSE-Mooncake-Apache-2.0.txt"}
    assert {"README.md", *licences} <= names
    rows: dict[str, list[str]] = {}
    commit = ""
    for line in (EXCERPT_DIR / "README.md").read_text().splitlines():
        # | `file` | repo : `path` | commit or "same" | licence | what was kept | bytes | sha256 |
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            commit = commit if cells[2] == "same" else cells[2]
            rows[cells[0].strip("`")] = [*cells, commit]
    assert sorted(rows) == sorted(p.name for p in EXCERPTS.values())
    for name, path in EXCERPTS.items():
        assert path.is_file() and path == excerpt_path(name)
        assert path.stat().st_size < 150_000  # small enough to vendor
        *cells, commit = rows[path.name]
        assert cells[-1] == _sha(_plain(path)), name  # the README's checksum of the uncompressed text
        assert cells[-2] == f"{len(_plain(path)):,}"
        src = SOURCES[name]
        assert src.url.endswith(cells[1].split("`")[1])  # same upstream path
        assert f"/{commit}/" in src.url  # same commit


def test_excerpts_are_whole_lines() -> None:
    for name, path in EXCERPTS.items():
        text = _plain(path)
        assert text.endswith(b"\n")
        lines = text.splitlines()
        header = 1 if SOURCES[name].format == "azure" else 0
        assert len(lines) == header + SOURCES[name].excerpt_requests == header + load_trace(path).requests


@pytest.mark.parametrize("name", sorted(EXCERPTS))
def test_excerpt_is_a_prefix_of_the_pinned_full_trace(name: str) -> None:
    data = _full(name).read_bytes()  # skips where the full trace is not at hand
    assert _sha(data) == SOURCES[name].sha256 and len(data) == SOURCES[name].size
    assert data.startswith(_plain(EXCERPTS[name]))


def test_excerpt_path_errors() -> None:
    with pytest.raises(InputError, match="no excerpt of burstgpt ships with servesim"):
        excerpt_path("burstgpt")
    with pytest.raises(InputError, match="unknown trace 'nope': must be one of azure-code,"):
        excerpt_path("nope")


def test_cli_names_are_the_sources() -> None:
    from servesim.cli import inputs as cli_inputs

    assert cli_inputs._FETCH_NAMES == tuple(SOURCES)


# ---------------------------------------------------------------------------
# Downloads that work (file:// and a local HTTP server)


def test_fetch_from_a_file_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    body = _serve_excerpt_as(monkeypatch, "azure-code")
    res = fetch_trace("azure-code", tmp_path)
    out = tmp_path / "AzureLLMInferenceTrace_code.csv"
    assert res.path == str(out) and out.read_bytes() == body
    assert res.bytes == len(body) and res.sha256 == _sha(body) and res.sha256_pinned
    assert res.format == "azure" and res.requests_checked == 100 and not res.compressed
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # no temporary file left
    assert load_trace(out).requests == 1000


def test_fetch_compresses_a_gz_destination(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plain = tmp_path / "synthetic_trace.jsonl"  # the excerpt decompressed: what the server would send
    plain.write_bytes(_plain(EXCERPTS["mooncake-synthetic"]))
    body = _serve_excerpt_as(monkeypatch, "mooncake-synthetic", plain.as_uri())
    out = tmp_path / "syn.jsonl.gz"
    res = fetch_trace("mooncake-synthetic", out)
    assert res.compressed and res.sha256 == _sha(body)  # the checksum is of what was downloaded
    assert gzip.decompress(out.read_bytes()) == body
    assert load_trace(out).requests == 1000


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTP server on 127.0.0.1 serving a fresh folder; yields (base URL, folder)."""
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a: object, **kw: object) -> None:
            super().__init__(*a, directory=str(root), **kw)  # type: ignore[arg-type]

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_over_http_and_the_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                     http_root: tuple[str, Path], capsys: pytest.CaptureFixture[str],
                                     ) -> None:
    base, root = http_root
    body = _plain(EXCERPTS["mooncake-conversation"])
    (root / "conversation_trace.jsonl").write_bytes(body)
    _serve_excerpt_as(monkeypatch, "mooncake-conversation", f"{base}/conversation_trace.jsonl")
    out = tmp_path / "conv.jsonl"
    assert main(["trace", "fetch", "mooncake-conversation", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(
        "FETCHED mooncake-conversation: Mooncake FAST'25 conversation trace (Apache-2.0)\n")
    assert f"  from    {base}/conversation_trace.jsonl\n" in text
    assert f"  bytes   {len(body):,} downloaded, sha256 {_sha(body)} (matches the pinned sha256)\n" in text
    assert "the first 100 requests parse" in text
    assert out.read_bytes() == body
    # HTTP errors are not "offline"
    assert main(["trace", "fetch", "mooncake-conversation", "--out", str(tmp_path / "x.jsonl"),
                 "--url", f"{base}/missing.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err == (f"servesim trace: error: cannot download mooncake-conversation from {base}/missing.jsonl: "
                   "HTTP 404 File not found\n")
    assert not (tmp_path / "x.jsonl").exists()


# ---------------------------------------------------------------------------
# Refusals: existing file, wrong checksum, wrong format, empty, truncated


def test_existing_file_needs_force(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    body = _serve_excerpt_as(monkeypatch, "azure-conv")
    out = tmp_path / "conv.csv"
    out.write_text("mine\n")
    assert main(["trace", "fetch", "azure-conv", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"servesim trace: error: {out}: already exists; pass --force to replace it\n"
    assert out.read_text() == "mine\n"
    assert main(["trace", "fetch", "azure-conv", "--out", str(out), "--force"]) == 0
    assert out.read_bytes() == body
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conv.csv"]


def test_checksum_mismatch_writes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    url = EXCERPTS["azure-code"].as_uri()  # not the full file the real entry pins
    with pytest.raises(InputError) as err:
        fetch_trace("azure-code", tmp_path / "a.csv", url=url)
    assert str(err.value) == (
        f"{url}: the download (36,292 bytes, sha256 16df89f7036835ac...) is not the pinned file "
        "(320,117 bytes, sha256 54e9a6d2a4bd06ba...); nothing was written"
    )
    assert list(tmp_path.iterdir()) == []


def test_wrong_format_writes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(SOURCES, "burstgpt", dataclasses.replace(
        SOURCES["burstgpt"], url=EXCERPTS["azure-code"].as_uri()))
    with pytest.raises(InputError, match=r"the download does not read as a trace in the burstgpt format: "
                                         r"its first line is that of the azure format; nothing was written"):
        fetch_trace("burstgpt", tmp_path)
    bad = tmp_path / "src" / "bad.csv"
    bad.parent.mkdir()
    lines = _plain(EXCERPTS["azure-code"]).decode().splitlines(keepends=True)
    bad.write_text("".join(lines[:5]) + "2023-11-16 18:17:05.0,12\n")  # line 6 truncated
    _serve_excerpt_as(monkeypatch, "azure-code", bad.as_uri(), bad.read_bytes())
    with pytest.raises(InputError, match=r"AzureLLMInferenceTrace_code\.csv:6: truncated line"):
        fetch_trace("azure-code", tmp_path / "a.csv")
    assert [p.name for p in tmp_path.iterdir()] == ["src"]


def test_empty_download(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    monkeypatch.setitem(SOURCES, "burstgpt", dataclasses.replace(SOURCES["burstgpt"], url=empty.as_uri()))
    with pytest.raises(InputError, match=r"empty\.csv: the download is empty; nothing was written"):
        fetch_trace("burstgpt", tmp_path / "b.csv")
    assert [p.name for p in tmp_path.iterdir()] == ["empty.csv"]


def test_truncated_transfer_and_size_cap() -> None:
    class Response:
        def __init__(self) -> None:
            self.headers = {"Content-Length": "100"}
            self.chunks = [b"x" * 40]

        def read(self, n: int) -> bytes:
            return self.chunks.pop() if self.chunks else b""

    import io

    src = SOURCES["burstgpt"]
    with pytest.raises(InputError, match=r"is truncated: 40 of 100 bytes; nothing was written"):
        fetch._copy(src, "u", Response(), io.BytesIO().write, 1000, None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"u: more than 10 bytes: refused"):
        fetch._copy(src, "u", Response(), io.BytesIO().write, 10, None)  # type: ignore[arg-type]


def test_connection_closed_mid_transfer(tmp_path: Path) -> None:
    with socket.socket() as listener:  # promises 1,000 bytes, sends 10, hangs up
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)

        def serve() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/BurstGPT_1.csv"
        # http.client returns the short body (3.11) or raises IncompleteRead, by version: both refuse
        with pytest.raises(InputError, match=r"download of burstgpt from \S+ (is truncated: 10 of 1,000 "
                                             r"bytes|broke off after 10 bytes: .*); nothing was written"):
            fetch_trace("burstgpt", tmp_path, url=url, timeout_s=5)
        thread.join(5)
    assert list(tmp_path.iterdir()) == []


def test_bad_destinations(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"folder '.*nope' does not exist"):
        fetch_trace("azure-code", tmp_path / "nope" / "a.csv")


# ---------------------------------------------------------------------------
# Offline: one line naming the URL, "offline", and the shipped excerpt; exit status 2


def _offline_line(name: str, url: str, reason: str, host: str) -> str:
    return (f"servesim trace: error: cannot download {name} from {url}: {reason} (this machine seems to "
            f"be offline, or cannot reach {host}); a 1,000-request excerpt ships with servesim: "
            f"{EXCERPTS[name]}\n")


def test_offline_dns_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    def no_dns(*args: object, **kwargs: object) -> None:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.chdir(tmp_path)
    assert main(["trace", "fetch", "azure-code"]) == 2
    url = SOURCES["azure-code"].url
    assert capsys.readouterr().err == _offline_line(
        "azure-code", url, "[Errno -2] Name or service not known", "raw.githubusercontent.com")
    assert list(tmp_path.iterdir()) == []
    assert main(["trace", "fetch", "burstgpt"]) == 2
    err = capsys.readouterr().err
    assert err.endswith("(this machine seems to be offline, or cannot reach github.com); "
                        "no excerpt of burstgpt ships with servesim\n")
    assert err.count("\n") == 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_offline_refused_connection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/conversation_trace.jsonl"
    assert main(["trace", "fetch", "mooncake-conversation", "--out", str(tmp_path), "--url", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"servesim trace: error: cannot download mooncake-conversation from {url}: ")
    assert "Connection refused (this machine seems to be offline, or cannot reach 127.0.0.1); " in err
    assert err.endswith(f"ships with servesim: {EXCERPTS['mooncake-conversation']}\n")
    assert list(tmp_path.iterdir()) == []


def test_offline_timeout(tmp_path: Path) -> None:
    with socket.socket() as listener:  # accepts (the kernel's backlog) but never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/x.csv"
        with pytest.raises(InputError) as err:
            fetch_trace("azure-conv", tmp_path, url=url, timeout_s=0.2)
    line = _offline_line("azure-conv", url, "no answer within 0.2 s", "127.0.0.1")
    assert str(err.value) == line.removeprefix("servesim trace: error: ").rstrip()
    assert list(tmp_path.iterdir()) == []


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "fetch", "--list"]) == 0
    text = capsys.readouterr().out
    for name, src in SOURCES.items():
        assert f"  {name}: {src.title} " in text and f"    source   {src.url}\n" in text
    for path in EXCERPTS.values():
        assert f"    excerpt  {path} (1,000 requests)\n" in text
    assert main(["trace", "fetch", "--list", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list(SOURCES)
    assert rows[0]["excerpt"] == str(EXCERPTS["azure-code"]) and rows[-1]["excerpt"] is None
    assert main(["trace", "fetch"]) == 2
    assert "give a trace NAME (azure-code, " in capsys.readouterr().err
