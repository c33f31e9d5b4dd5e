"""Trace replay: closed form from the trace's means beside the replay, and the prefix-cache effect."""

from __future__ import annotations

import json

import pytest

from servesim.inputs.traces import load_trace, workload_from_trace
from servesim.model.kvcache import LINKS
from servesim.model.serving import DEFAULT_NODE, colocated, disaggregated
from servesim.sim.replay import trace_replay_summary
from tests.cli_helpers import ROOT, run_cli


def _mooncake(tmp_path, n: int = 400):
    """A Mooncake-format trace: 4,096-token prompts whose first 6 of 8 blocks repeat in pairs."""
    lines = []
    for i in range(n):
        shared = [1000 + (i // 2) * 10 + j for j in range(6)]
        lines.append(json.dumps({"timestamp": i * 250, "input_length": 4096, "output_length": 128,
                                 "hash_ids": [*shared, 90_000 + 2 * i, 90_001 + 2 * i]}))
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _summary(path, **kw):
    tr = load_trace(path)
    wl = workload_from_trace(tr, slo_ttft_s=2.0, slo_tpot_s=0.04)
    return tr, trace_replay_summary(tr, DEFAULT_NODE, workload=wl, nodes=4, link=LINKS["rdma"], beta=0.5,
                                    **kw)


def test_closed_form_columns_price_the_trace_means(tmp_path):
    tr, s = _summary(_mooncake(tmp_path))
    wl = workload_from_trace(tr, slo_ttft_s=2.0, slo_tpot_s=0.04)
    assert [r["deployment"] for r in s["rows"]] == ["colocated x4", "1p/3d", "2p/2d", "3p/1d"]
    co = colocated(wl, DEFAULT_NODE, 4, 0.5)
    assert s["rows"][0]["closed_form"]["tpot_ms"] == pytest.approx(co.tpot_s * 1e3)
    de = disaggregated(wl, DEFAULT_NODE, 2, 2, LINKS["rdma"])
    assert s["rows"][2]["closed_form"]["goodput_rps"] == pytest.approx(de.goodput_rps)
    assert s["trace"]["requests"] == 400


def test_prefix_cache_skips_work_on_both_architectures(tmp_path):
    _, s = _summary(_mooncake(tmp_path), prefix_cache=True)
    # Every second request reuses its partner's 6 leading blocks: 3,072 of 4,096 tokens.
    assert s["trace"]["cached_prompt_fraction"] == pytest.approx(200 * 3072 / (400 * 4096))
    archs = {e["architecture"] for e in s["prefix_cache"]}
    assert archs == {"colocated", "disaggregated"}
    for e in s["prefix_cache"]:
        assert e["with_cache"]["ttft_ms"]["mean"] < e["without_cache"]["ttft_ms"]["mean"]
        assert e["with_cache"]["goodput_rps"] >= e["without_cache"]["goodput_rps"]


def test_prefix_cache_needs_hash_ids():
    _, s = _summary(ROOT / "tests" / "data" / "azure_code_head.csv", prefix_cache=True)
    assert s["prefix_cache"] is None and s["trace"]["prefix_info"] is False


def test_replay_cli_is_deterministic(tmp_path):
    path = _mooncake(tmp_path, 200)
    args = ("simulate", "--trace", str(path), "--nodes", "4", "--prefix-cache", "--format", "json")
    a, b = run_cli(*args), run_cli(*args)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    assert "PREFIX CACHE" in run_cli(*args[:-2]).stdout


def test_bad_trace_is_one_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,-5,3\n")
    res = run_cli("simulate", "--trace", str(bad))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "bad.csv" in res.stderr
