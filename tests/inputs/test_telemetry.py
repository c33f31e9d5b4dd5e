"""Acceptance fits from Prometheus telemetry (servesim.inputs.telemetry).

Every exposition text here is generated with prometheus_client itself, using
vLLM's and SGLang's exact metric names and labels; malformed variants are
edited from generated text.  Acceptance draws come from a seeded numpy
Generator; statistical checks use tolerances from the estimator's own spread.
"""

from __future__ import annotations

import io
import json
import math
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from servesim.inputs.telemetry import (
    InputError,
    alpha_from_length,
    chi2_sf,
    counters_from_value,
    definitions_at,
    difference,
    fit_alpha,
    parse_exposition,
    read_counters,
    wilson_interval,
)
from servesim.model.speculative import expected_tokens, optimal_k, speedup

K = 4


class VllmEngine:
    """vLLM's four speculative counters in one registry (names and labels as vLLM registers them)."""

    def __init__(
        self, k: int = K, models: Sequence[str] = ("llama",), engines: Sequence[str] = ("0",)
    ) -> None:
        self.k = k
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        self.drafts = Counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", labels,
                              registry=self.registry)
        self.draft_tokens = Counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", labels,
                                    registry=self.registry)
        self.accepted = Counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                                labels, registry=self.registry)
        self.per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                               "Accepted tokens per draft position.", [*labels, "position"],
                               registry=self.registry)
        for m in models:
            for e in engines:
                for counter in (self.drafts, self.draft_tokens, self.accepted):
                    counter.labels(m, e)
                for pos in range(k):
                    self.per_pos.labels(m, e, str(pos))

    def observe(self, accepted_lengths: np.ndarray, model: str = "llama", engine: str = "0") -> None:
        """Record cycles with the given accepted prefix lengths A (0..k)."""
        self.drafts.labels(model, engine).inc(len(accepted_lengths))
        self.draft_tokens.labels(model, engine).inc(self.k * len(accepted_lengths))
        self.accepted.labels(model, engine).inc(int(accepted_lengths.sum()))
        for pos in range(self.k):
            self.per_pos.labels(model, engine, str(pos)).inc(int((accepted_lengths > pos).sum()))

    def restart(self, model: str = "llama", engine: str = "0") -> None:
        """One engine restarts: its series start again from 0 with a new _created time."""
        for counter in (self.drafts, self.draft_tokens, self.accepted):
            counter.remove(model, engine)
            counter.labels(model, engine)
        for pos in range(self.k):
            self.per_pos.remove(model, engine, str(pos))
            self.per_pos.labels(model, engine, str(pos))

    def text(self) -> str:
        return generate_latest(self.registry).decode()


def draw(rng: np.random.Generator, rates: Sequence[float], n: int) -> np.ndarray:
    """Accepted prefix lengths when position i is accepted with conditional probability rates[i]."""
    ok = rng.random((n, len(rates))) < np.asarray(rates)
    return np.cumprod(ok, axis=1).sum(axis=1)


def sglang_text(length: float | None, rate: float | None, ranks: int = 1) -> str:
    reg = CollectorRegistry()
    labels = ["model_name", "tp_rank"]
    if length is not None:
        g = Gauge("sglang:spec_accept_length", "The average acceptance length of speculative decoding.",
                  labels, registry=reg)
        for r in range(ranks):
            g.labels("qwen", str(r)).set(length)
    if rate is not None:
        g = Gauge("sglang:spec_accept_rate", "The average acceptance rate of speculative decoding.",
                  labels, registry=reg)
        for r in range(ranks):
            g.labels("qwen", str(r)).set(rate)
    return generate_latest(reg).decode()


# ---------------------------------------------------------------------------
# Definitions and conversions


def test_definitions_at_alpha() -> None:
    a, k = 0.8, 3
    d = definitions_at(a, k)
    assert d.marginal == pytest.approx((0.8, 0.64, 0.512))
    assert d.conditional == pytest.approx((0.8, 0.8, 0.8))
    assert d.mean_accepted_no_bonus == pytest.approx(0.8 + 0.64 + 0.512)
    assert d.mean_accepted_with_bonus == pytest.approx(expected_tokens(k, a))
    assert d.vllm_acceptance_rate == pytest.approx(1.952 / 3)
    assert d.sglang_accept_rate == pytest.approx(2.952 / 4)


def test_a_fourth_engines_metrics_are_an_entry_in_the_data_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine whose counters are vLLM's under other names is read from engines.toml alone."""
    from servesim._catalogfile import engines_file
    from servesim.inputs import telemetry

    roles = ("drafts", "draft_tokens", "accepted", "accepted_per_pos")
    vllm = engines_file()["engine"]["vllm"]["telemetry"]
    toy = {"name": "Toy", "telemetry": {"kind": "counters", "rate": "vllm_acceptance_rate",
                                        "metrics": {r: f"toy:{r}" for r in roles}}}
    eng = VllmEngine()
    eng.observe(draw(np.random.default_rng(3), [0.7] * K, 2000))
    text = eng.text()
    for r in sorted(roles, key=lambda r: -len(vllm["metrics"][r])):  # the longest first: none is cut short
        text = text.replace(vllm["metrics"][r], f"toy:{r}")
    assert "vllm:" not in text
    monkeypatch.setitem(engines_file()["engine"], "toy", toy)
    telemetry._exporters.cache_clear()  # the engines read again, with the toy (and again at the end)
    telemetry._metric_engines.cache_clear()
    try:
        assert "toy" in telemetry.ENGINES
        ours = fit_alpha(parse_exposition(text, "toy"))
        theirs = fit_alpha(parse_exposition(eng.text(), "vllm"))
        assert ours.engine == "toy" and ours.alpha == theirs.alpha and ours.k == theirs.k == K
        assert ours.observed == theirs.observed
        with pytest.raises(InputError, match="both vLLM and Toy"):
            parse_exposition(eng.text() + text, "both")
    finally:
        telemetry._exporters.cache_clear()
        telemetry._metric_engines.cache_clear()


@pytest.mark.parametrize("alpha", [0.0, 0.05, 0.5, 0.9, 0.999, 1.0])
@pytest.mark.parametrize("k", [1, 4, 9])
def test_alpha_from_length_inverts_expected_tokens(alpha: float, k: int) -> None:
    assert alpha_from_length(expected_tokens(k, alpha), k) == pytest.approx(alpha, abs=1e-9)


def test_typed_in_figures_in_every_definition_agree() -> None:
    """E[n] = 3 with k = 4 given as a length, a vLLM rate, an SGLang rate or without the bonus."""
    alpha = fit_alpha(counters_from_value("accept-length", [3.0]), k=4).alpha
    assert expected_tokens(4, alpha) == pytest.approx(3.0)
    variants = [
        fit_alpha(counters_from_value("accept-length", [2.0], length_includes_bonus=False), k=4),
        fit_alpha(counters_from_value("accept-rate", [0.5]), k=4),  # vLLM: E[A]/k = 2/4
        fit_alpha(counters_from_value("accept-rate", [0.6], engine="sglang"), k=4),  # E[n]/(k+1) = 3/5
    ]
    for fit in variants:
        assert fit.alpha == pytest.approx(alpha, abs=1e-12)
        assert fit.alpha_lo is None  # no cycle count behind a typed-in figure
    per_pos = fit_alpha(counters_from_value("per-position", [0.8, 0.64, 0.512]))
    assert per_pos.alpha == pytest.approx(0.8)
    assert per_pos.k == 3 and per_pos.iid_test is None


def test_the_naive_rate_is_not_alpha() -> None:
    """accepted/drafted divides by every drafted token and understates alpha."""
    fit = fit_alpha(counters_from_value("accept-rate", [0.6]), k=4)
    assert fit.alpha > 0.6
    assert fit.iid.vllm_acceptance_rate == pytest.approx(0.6)


# ---------------------------------------------------------------------------
# Statistics


def test_chi2_sf_known_values() -> None:
    # 95th percentiles of the chi-square distribution (standard tables).
    for df, q95 in ((1, 3.841458820694124), (2, 5.991464547107979), (3, 7.814727903251178),
                    (5, 11.070497693516351), (10, 18.307038053275146)):
        assert chi2_sf(q95, df) == pytest.approx(0.05, rel=1e-9)
    assert chi2_sf(4.0, 2) == pytest.approx(math.exp(-2.0))
    assert chi2_sf(0.0, 3) == 1.0
    assert chi2_sf(2000.0, 7) < 1e-300  # far tail: no overflow, no error


def test_wilson_interval_known_values() -> None:
    z = 1.959963984540054
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(z * z / (10 + z * z))
    lo, hi = wilson_interval(50, 100)
    assert lo == pytest.approx(1 - hi) and lo < 0.5 < hi


def test_mle_from_vllm_counters(tmp_path: Path) -> None:
    rng = np.random.default_rng(20250501)
    eng = VllmEngine(engines=("0", "1"))
    alpha_true = 0.72
    eng.observe(draw(rng, [alpha_true] * K, 6000), engine="0")
    eng.observe(draw(rng, [alpha_true] * K, 4000), engine="1")
    counts = parse_exposition(eng.text(), "scrape")
    assert counts.num_drafts == 10000 and counts.positions == K  # summed over engines
    fit = fit_alpha(counts, util=0.7)
    c = counts.accepted_per_pos
    s, f = sum(c), counts.num_drafts - c[-1]
    assert fit.input_definition == "per-position"
    assert fit.alpha == pytest.approx(s / (s + f), rel=1e-12)  # the closed-form MLE
    sigma = math.sqrt(alpha_true * (1 - alpha_true) / (s + f))
    assert abs(fit.alpha - alpha_true) < 4 * sigma
    assert fit.alpha_lo is not None and fit.alpha_hi is not None
    assert fit.alpha_hi - fit.alpha_lo == pytest.approx(2 * 1.96 * sigma, rel=0.05)
    assert fit.iid_test is not None and fit.iid_test.df == K - 1
    assert fit.iid_test.p_value > 1e-3  # i.i.d. data: not rejected at any sensible level
    u0, u7 = fit.optimal
    assert (u0.u, u7.u) == (0.0, 0.7)
    assert u0.k == optimal_k(fit.alpha, 0.1, 0.05, 0.0)
    assert u7.k == optimal_k(fit.alpha, 0.1, 0.05, 0.7)
    assert u7.speedup == pytest.approx(speedup(u7.k, fit.alpha, 0.1, 0.05, 0.7))
    assert fit.observed["mean_accepted_with_bonus"] == pytest.approx(1 + counts.num_accepted_tokens / 1e4)
    assert fit.warnings == ()


def test_position_dependent_acceptance_is_detected() -> None:
    rng = np.random.default_rng(7)
    eng = VllmEngine()
    eng.observe(draw(rng, [0.9, 0.7, 0.5, 0.3], 5000))
    fit = fit_alpha(parse_exposition(eng.text(), "s"))
    assert fit.iid_test is not None
    assert fit.iid_test.p_value < 1e-6 and not fit.iid_test.consistent_at_5pct
    assert any("reject i.i.d." in w for w in fit.warnings)
    q = fit.observed["conditional"]
    assert q[0] > q[-1] + 0.4


def test_moment_interval_covers_the_mle() -> None:
    rng = np.random.default_rng(11)
    eng = VllmEngine()
    eng.observe(draw(rng, [0.6] * K, 3000))
    counts = parse_exposition(eng.text(), "s")
    mle = fit_alpha(counts)
    mom = fit_alpha(counts, definition="accept-length")
    rate = fit_alpha(counts, definition="accept-rate")
    assert mom.alpha == pytest.approx(rate.alpha, abs=1e-12)
    assert mom.alpha_lo is not None and mom.alpha_hi is not None
    assert mom.alpha_lo < mle.alpha < mom.alpha_hi
    assert any("--from per-position gives the MLE" in w for w in mom.warnings)


# ---------------------------------------------------------------------------
# Two scrapes, resets, SGLang


def test_two_scrapes_give_the_interval() -> None:
    rng = np.random.default_rng(3)
    eng = VllmEngine()
    eng.observe(draw(rng, [0.3] * K, 2000))  # before: a poor-acceptance period
    first = parse_exposition(eng.text(), "a", time_s=1000.0)
    eng.observe(draw(rng, [0.8] * K, 3000))
    second = parse_exposition(eng.text(), "b", time_s=1060.0)
    delta = difference(first, second)
    assert delta.num_drafts == 3000 and delta.interval_s == 60.0
    fit = fit_alpha(delta)
    assert fit.drafts_per_s == pytest.approx(50.0)
    assert abs(fit.alpha - 0.8) < 0.03  # the interval's alpha, not the cumulative mixture
    assert abs(fit_alpha(second).alpha - 0.8) > 0.05


def test_counter_reset_uses_the_counts_since_the_reset() -> None:
    rng = np.random.default_rng(5)
    old = VllmEngine()
    old.observe(draw(rng, [0.5] * K, 5000))
    restarted = VllmEngine()
    restarted.observe(draw(rng, [0.85] * K, 800))
    delta = difference(parse_exposition(old.text(), "a"), parse_exposition(restarted.text(), "b"))
    assert delta.num_drafts == 800
    assert any("counters were reset" in w for w in delta.warnings)
    fit = fit_alpha(delta)
    assert abs(fit.alpha - 0.85) < 0.04
    assert any("a restart" in w for w in fit.warnings)


@pytest.mark.parametrize("after_restart", [1000, 4000])  # fewer cycles than before, or more
def test_one_engine_restarting_is_detected(after_restart: int) -> None:
    """Engine 1 restarts between scrapes; with 4000 cycles its counters even end higher than before,
    and only its new _created time shows the restart."""
    import time

    rng = np.random.default_rng(8)
    eng = VllmEngine(engines=("0", "1"))
    for e in ("0", "1"):
        eng.observe(draw(rng, [0.5] * K, 3000), engine=e)
    first = parse_exposition(eng.text(), "a", time_s=0.0)
    time.sleep(0.01)  # a later creation time for the restarted series
    eng.restart(engine="1")
    eng.observe(draw(rng, [0.8] * K, 2000), engine="0")
    eng.observe(draw(rng, [0.8] * K, after_restart), engine="1")
    delta = difference(first, parse_exposition(eng.text(), "b", time_s=60.0))
    assert delta.num_drafts == 2000 + after_restart
    assert delta.interval_s is None
    assert any("counters were reset" in w and "engine=1" in w for w in delta.warnings)
    fit = fit_alpha(delta)
    sigma = math.sqrt(0.8 * 0.2 / ((2000 + after_restart) * 3))
    assert abs(fit.alpha - 0.8) < 5 * sigma


def test_no_drafts_in_the_interval_is_an_error() -> None:
    eng = VllmEngine()
    eng.observe(draw(np.random.default_rng(1), [0.5] * K, 100))
    a = parse_exposition(eng.text(), "a")
    with pytest.raises(InputError, match=r"vllm:spec_decode_num_drafts is 0 \(no speculative cycles"):
        fit_alpha(difference(a, parse_exposition(eng.text(), "b")))
    with pytest.raises(InputError, match="is 0"):
        fit_alpha(parse_exposition(VllmEngine().text(), "fresh"))  # a just-started engine


def test_sglang_gauges() -> None:
    # EAGLE chain with 3 steps: num_draft_tokens = 4; accept length 2.6 -> rate 2.6 / 4 = 0.65.
    counts = parse_exposition(sglang_text(2.6, 0.65), "sg")
    fit = fit_alpha(counts)
    assert fit.engine == "sglang" and fit.k == 3
    assert fit.input_definition == "accept-length"
    assert expected_tokens(3, fit.alpha) == pytest.approx(2.6)
    assert fit.alpha_lo is None
    assert fit_alpha(counts, definition="accept-rate").alpha == pytest.approx(fit.alpha)
    assert fit.observed["vllm_acceptance_rate"] == pytest.approx(1.6 / 3)
    with pytest.raises(InputError, match="no per-position data"):
        fit_alpha(counts, definition="per-position")
    only_length = parse_exposition(sglang_text(2.6, None), "sg")
    with pytest.raises(InputError, match="give it with --k"):
        fit_alpha(only_length)
    assert fit_alpha(only_length, k=3).alpha == pytest.approx(fit.alpha)
    ranks = parse_exposition(sglang_text(2.6, 0.65, ranks=2), "sg")
    assert any("2 series" in w for w in ranks.warnings)
    with pytest.raises(InputError, match="is below 1"):
        fit_alpha(parse_exposition(sglang_text(0.0, 0.0), "off"))
    two = difference(counts, parse_exposition(sglang_text(3.0, 0.75), "sg2"))
    assert two.accept_length == 3.0 and any("gauges" in w for w in two.warnings)


# ---------------------------------------------------------------------------
# Malformed and ambiguous input


def test_malformed_line_is_named() -> None:
    eng = VllmEngine()
    lines = eng.text().splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("vllm:spec_decode_num_drafts_total"))
    lines[i] = lines[i].replace("}", "", 1)  # an unterminated label set
    with pytest.raises(InputError) as err:
        parse_exposition("\n".join(lines) + "\n", "m.txt")
    assert str(err.value).startswith(f"m.txt:{i + 1}: malformed line 'vllm:spec_decode_num_drafts_total{{")
    assert "not Prometheus exposition format" in str(err.value)


def test_no_speculative_metrics() -> None:
    reg = CollectorRegistry()
    Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", ["model_name"], registry=reg)
    with pytest.raises(InputError, match="no speculative-decoding metrics: expected vLLM counters"):
        parse_exposition(generate_latest(reg).decode(), "plain")
    with pytest.raises(InputError, match="empty: no speculative-decoding metrics"):
        parse_exposition("", "empty")


def test_inconsistent_counters_never_give_an_alpha() -> None:
    eng = VllmEngine()
    eng.drafts.labels("llama", "0").inc(100)
    eng.draft_tokens.labels("llama", "0").inc(400)
    eng.accepted.labels("llama", "0").inc(90)
    eng.per_pos.labels("llama", "0", "0").inc(40)
    eng.per_pos.labels("llama", "0", "1").inc(50)  # more accepts at position 1 than at 0
    with pytest.raises(InputError, match="position 1 accepted more often \\(50\\) than position 0 \\(40\\)"):
        fit_alpha(parse_exposition(eng.text(), "bad"))
    gauge = sglang_text(-1.0, 0.5)
    with pytest.raises(InputError, match=r"sglang:spec_accept_length\{.*\} = -1.0 is invalid"):
        parse_exposition(gauge, "neg")


def test_several_models_need_a_choice() -> None:
    rng = np.random.default_rng(2)
    eng = VllmEngine(models=("a", "b"))
    eng.observe(draw(rng, [0.5] * K, 500), model="a")
    eng.observe(draw(rng, [0.9] * K, 500), model="b")
    with pytest.raises(InputError, match=r"metrics for several models \['a', 'b'\]: choose one with --model"):
        parse_exposition(eng.text(), "two")
    assert fit_alpha(parse_exposition(eng.text(), "two", model="b")).alpha > 0.8
    with pytest.raises(InputError, match="no speculative metrics for model_name='c'"):
        parse_exposition(eng.text(), "two", model="c")


def test_k_must_agree_with_the_positions() -> None:
    eng = VllmEngine()
    eng.observe(draw(np.random.default_rng(4), [0.5] * K, 100))
    with pytest.raises(InputError, match="--k 3 contradicts s: it has 4 draft positions"):
        fit_alpha(parse_exposition(eng.text(), "s"), k=3)


# ---------------------------------------------------------------------------
# Sources: file, stdin, URL; CLI


def test_read_counters_from_file_stdin_and_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    eng = VllmEngine()
    eng.observe(draw(np.random.default_rng(9), [0.7] * K, 1000))
    text = eng.text()
    path = tmp_path / "m.prom"
    path.write_text(text)
    from_file = read_counters([str(path)])
    assert from_file.num_drafts == 1000 and from_file.time_s is not None
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    assert read_counters(["-"]).num_drafts == 1000

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        assert read_counters([url]).num_drafts == 1000
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(InputError, match="cannot read"):
        read_counters([str(tmp_path / "missing.prom")])


def test_cli_fit_alpha(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from servesim.cli.main import main

    rng = np.random.default_rng(12)
    eng = VllmEngine()
    eng.observe(draw(rng, [0.75] * K, 2000))
    a = tmp_path / "a.prom"
    a.write_text(eng.text())
    eng.observe(draw(rng, [0.75] * K, 2000))
    b = tmp_path / "b.prom"
    b.write_text(eng.text())
    assert main(["fit-alpha", str(a), str(b), "--interval-s", "30", "--util", "0.5", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["num_drafts"] == 2000 and data["drafts_per_s"] == pytest.approx(2000 / 30)
    assert [o["u"] for o in data["optimal"]] == [0.0, 0.5]
    assert main(["fit-alpha", str(a)]) == 0
    text = capsys.readouterr().out
    assert "alpha (conditional, i.i.d. model) = 0.7" in text and "i.i.d. test" in text
    argv = ["fit-alpha", "--value", "3.0", "--from", "accept-length", "--k", "4", "--format", "csv"]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("table,source,engine,input,k,num_drafts,alpha")
    assert main(["fit-alpha", "--value", "3.0", "--k", "4"]) == 2
    assert capsys.readouterr().err == (
        "servesim fit-alpha: error: --value needs --from: which definition the figure is "
        "(per-position, accept-length, accept-rate)\n"
    )


def test_interval_from_file_times(tmp_path: Path) -> None:
    import os

    rng = np.random.default_rng(21)
    eng = VllmEngine()
    eng.observe(draw(rng, [0.7] * K, 500))
    a = tmp_path / "a.prom"
    a.write_text(eng.text())
    eng.observe(draw(rng, [0.7] * K, 600))
    b = tmp_path / "b.prom"
    b.write_text(eng.text())
    os.utime(a, (1_700_000_000, 1_700_000_000))
    os.utime(b, (1_700_000_120, 1_700_000_120))
    fit = fit_alpha(read_counters([str(a), str(b)]))
    assert fit.interval_s == 120 and fit.interval_from == "file time"
    assert fit.drafts_per_s == pytest.approx(5.0)
    os.utime(b, (1_700_000_000.2, 1_700_000_000.2))  # copies made together: times mean nothing
    fit = fit_alpha(read_counters([str(a), str(b)]))
    assert fit.interval_s is None and fit.drafts_per_s is None
    assert any("too short to trust" in w for w in fit.warnings)


def test_fit_alpha_batch_maps_to_u_by_the_roofline():
    import json

    from servesim.hardware.catalog import builtin_catalog
    from servesim.hardware.roofline import utilization
    from tests.cli_helpers import run_cli

    res = run_cli("fit-alpha", "--value", "3.2", "--from", "accept-length", "--k", "4", "--batch", "64",
                  "--target", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8", "--format", "json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    cat = builtin_catalog()
    u = utilization(cat.model("llama-3-70b"), cat.gpu("h100-sxm"), tp=8, batch=64, context_tokens=2048)
    assert data["util_from_batch"]["u"] == u and 0 < u < 1
    assert [o["u"] for o in data["optimal"]][-1] == u
    bad = run_cli("fit-alpha", "--value", "3.2", "--from", "accept-length", "--k", "4", "--batch", "64")
    assert bad.returncode == 2 and "--batch needs --target" in bad.stderr
