"""Issue 50 item 5, speculation side: one turn-off batch in every command, the speculation lines of
``predict`` (the batch evaluated, a speedup under 1 that does not pay, the disaggregated line), one
method list for ``predict``, ``plan`` and ``specdec``, and the lab's ``disagg`` at 100 and 80 columns."""

from __future__ import annotations

import contextlib
import io
import json
import re
from typing import Any

import pytest

from servesim.cli.main import main
from servesim.render.predict import predict_disagg_text, predict_text

# Llama-3-70B on 8 x H100 with a draft model at k = 3, 2.5 tokens a step: it pays at batch 1
# (1.38x) and not at 256 (0.7x), so it turns off in between
MODEL = ("--model", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8")
SETTING = ("--k", "3", "--acceptance-length", "2.5")


def _run(*args: str) -> tuple[int, str, str]:
    """``servesim ARGS`` in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as exc:  # argparse errors exit from the parser
            rc = exc.code if isinstance(exc.code, int) else 1
    return rc, out.getvalue(), err.getvalue()


def _json(*args: str) -> Any:
    rc, out, err = _run(*args, "--format", "json")
    assert rc == 0, err
    return json.loads(out)


def _predict(*extra: str) -> Any:
    # context priced: isl + osl / 2 = 1100 tokens
    return _json("predict", *MODEL, "--spec", "small-draft", *SETTING, "--isl", "1000", "--osl", "200",
                 *extra)


def test_specdec_and_predict_name_one_turn_off_batch() -> None:
    p = _predict("--concurrency", "160", "--num-prompts", "320")["speculation"]
    s = _json("specdec", *MODEL, "--preset", "small-draft", *SETTING, "--context", "1100")
    assert 1 < p["turn_off_batch"] < 256
    assert s["turn_off_batch"] == p["turn_off_batch"] and s["turn_off_k"] == p["turn_off_k"] == 3
    # and it is the crossing of specdec's own table: paying at the table's batches up to it, not above
    for row in s["rows"]:
        assert (row["speedup"] > 1.0) == (row["batch"] <= p["turn_off_batch"]), row


def test_turn_off_batch_is_where_the_speedup_crosses_one() -> None:
    from servesim.hardware.catalog import builtin_catalog
    from servesim.hardware.pricer import Deployment, build_step_model
    from servesim.hardware.speculation import alpha_for_acceptance_length, speculation_for, turn_off_batch

    dep = Deployment("llama-3-70b", "h100-sxm", 8, "bf16", "bf16", "vllm")
    sm = build_step_model(dep, builtin_catalog())[0]
    a = alpha_for_acceptance_length(2.5, 3)
    off = turn_off_batch(sm, "small-draft", 1100.0, batch_limit=1024, alpha=a, k=3)
    assert off is not None and off > 1

    def speedup(b: int) -> float:
        return float(speculation_for(sm, "small-draft", b, 1100.0, k=3, alpha=a)[1]["speedup_at_batch"])

    assert speedup(off) > 1.0 >= speedup(off + 1)


def test_predict_prints_the_batch_it_priced_and_a_speedup_under_one_does_not_pay() -> None:
    d = _predict("--concurrency", "160", "--num-prompts", "320")
    s = d["speculation"]
    # priced at the run's decode batch (within 10%: plan/predict._same_batch), not a first guess
    assert abs(s["batch"] - d["decode_batch"]) <= max(0.5, 0.1 * s["batch"])
    assert s["batch"] > s["turn_off_batch"] and s["speedup_at_batch"] < 1.0
    shown = predict_text(d)  # what the command prints from the same result
    line = next(x for x in shown.splitlines() if x.startswith("  speculation small-draft"))
    assert f"at batch {s['batch']:,.1f}:" in line  # rounded as the decode batch is printed
    assert "does not pay at this batch" in line
    assert f"stops paying above batch {s['turn_off_batch']}" in shown
    assert "pays at every batch" not in shown


def test_the_speculation_lines_never_say_a_speedup_under_one_pays() -> None:
    from servesim.render.predict import _speculation_lines

    base = {"preset": "eagle3", "k": 3, "alpha": 0.6, "acceptance_length": 2.2, "acceptance": "given",
            "d": 0.05, "c": 0.3, "batch": 25.8538, "speedup_at_batch": 0.99,
            "speedup_by_batch": [{"batch": 1.0, "speedup": 1.5}, {"batch": 16.0, "speedup": 1.05}],
            "turn_off_batch": 24, "fits_batch": 31}
    text = "\n".join(_speculation_lines(base))
    assert "at batch 25.9: 0.99x per step (does not pay at this batch)" in text
    assert "stops paying above batch 24" in text and "every batch" not in text
    text = "\n".join(_speculation_lines({**base, "speedup_at_batch": 1.2, "turn_off_batch": None}))
    assert "does not pay" not in text and "pays at every batch that fits (up to 31)" in text


def test_predict_disagg_prints_its_speculation() -> None:
    args = ("predict", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm", "--mode", "disagg",
            "--prefill-tp", "1", "--decode-tp", "1", "--isl", "1000", "--osl", "200", "--concurrency", "16",
            "--num-prompts", "64", "--spec", "eagle3")
    d = _json(*args)
    shown = predict_disagg_text(d)
    line = next(x for x in shown.splitlines() if x.startswith("  speculation eagle3"))
    assert f"k={d['speculative_k']}" in line and f"at batch {d['speculation']['batch']:,.1f}:" in line
    assert abs(d["speculation"]["batch"] - d["decode_batch"]) <= max(0.5, 0.1 * d["speculation"]["batch"])
    assert "speedup by running batch" in shown


def test_one_method_list_for_predict_plan_and_specdec() -> None:
    import argparse

    from servesim.cli import lab, plan, predict
    from servesim.hardware.speculation import METHODS
    from servesim.model.speculative import SPEC_METHODS

    assert METHODS is SPEC_METHODS and predict.SPEC_METHODS is SPEC_METHODS
    assert {"eagle", "ngram", "eagle3", "mtp", "draft"} <= set(SPEC_METHODS)
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    for mod in (lab, plan, predict):
        mod.register(sub)
    for m in SPEC_METHODS:
        assert parser.parse_args(["predict", "--spec", m]).spec == m
        assert parser.parse_args(["plan", "--spec", m]).spec == m
        assert parser.parse_args(["specdec", "--preset", m]).preset == m


@pytest.mark.parametrize("preset", ["eagle", "ngram"])
def test_specdec_prices_eagle_and_ngram_on_a_model_with_traffic(preset: str) -> None:
    s = _json("specdec", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm",
              "--preset", preset, "--traffic", "chat")
    assert s["preset"] == preset and s["rows"][0]["speedup"] > 1.0
    # the turn-off batch, if any, is where its own setting stops paying (k, alpha as predict runs them)
    # at specdec's default context, 2048 tokens = isl + osl / 2
    p = _json("predict", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm", "--isl", "1500",
              "--osl", "1096", "--concurrency", "8", "--num-prompts", "16", "--spec", preset,
              "--traffic", "chat")
    assert p["speculation"]["turn_off_batch"] == s["turn_off_batch"]
    assert p["speculation"]["k"] == s["turn_off_k"]


def test_specdec_refuses_eagle_without_a_model_and_traffic_on_the_lab() -> None:
    rc, _, err = _run("specdec", "--preset", "ngram")
    assert rc == 2 and "Traceback" not in err and "ngram" in err and "--model" in err
    rc, _, err = _run("specdec", "--traffic", "code")
    assert rc == 2 and "--traffic" in err and "code" in err


def test_specdec_traffic_is_checked_where_it_is_used() -> None:
    rc, _, err = _run("specdec", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm",
                      "--traffic", "poetry")
    assert rc == 2 and "poetry" in err and "chat" in err and "Traceback" not in err


@pytest.mark.parametrize("width", [100, 80])
def test_disagg_keeps_both_goodputs_at_narrow_widths(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from servesim.plan.summary import disagg_summary
    from servesim.render import text

    monkeypatch.setattr(text, "WIDTH", width)
    out = text.disagg_text(disagg_summary("chat"))
    block = out.split("[MIXES]")[1].split("TTFT (mean)")[0].splitlines()[1:]
    header = block[0]
    assert "co good" in header and "dis good" in header and "winner" in header and "mix" in header
    assert all(len(x) <= width for x in block), [x for x in block if len(x) > width]
    # the goodputs are the summary's own (each row: its co and dis figures, rounded as printed)
    cols = re.split(r"\s{2,}", header.strip())
    for line, row in zip(block[2:], disagg_summary("chat")["rows"], strict=False):
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == len(cols):
            assert float(cells[cols.index("dis good")]) == pytest.approx(row["disaggregated"]["goodput_rps"],
                                                                                 abs=5e-4)


def test_predict_at_a_rate_prices_the_batch_the_run_keeps() -> None:
    # the case: priced at batch 25.85 (the closed form's batch without speculation) where the
    # run kept 11.0; now the batch of Little's law with speculation, then the run's own
    d = _json("predict", "--model", "Qwen/Qwen3-32B", "--gpu", "h100-sxm", "--spec", "eagle3",
              "--isl", "1000", "--osl", "300", "--rate", "2", "--num-prompts", "200")
    s = d["speculation"]
    assert abs(s["batch"] - d["decode_batch"]) <= max(0.5, 0.1 * s["batch"])
    assert f"at batch {s['batch']:,.1f}:" in predict_text(d)
