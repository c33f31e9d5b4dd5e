"""Published acceptance presets (hardware/data/acceptance.toml): the data, the lookup, and what
``predict --spec`` does with them when no acceptance is given."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from servesim._checks import ParameterError
from servesim.hardware.acceptance import (
    FIELDS,
    TRAFFIC_KINDS,
    load_presets,
    preset_for,
    presets_for,
)
from servesim.hardware.speculation import METHODS
from tests.cli_helpers import ROOT, run_cli

PRESETS = load_presets()


def test_the_data_file_loads_and_ships_as_package_data():
    assert len(PRESETS) >= 10
    assert len({p.id for p in PRESETS}) == len(PRESETS)
    # pyproject ships hardware/data/*.toml, which covers the file
    text = (ROOT / "pyproject.toml").read_text()
    assert '"hardware/data/*.toml"' in text
    assert (Path(__file__).resolve().parents[2] / "src/servesim/hardware/data/acceptance.toml").is_file()


@pytest.mark.parametrize("p", PRESETS, ids=lambda p: p.id)
def test_every_row_cites_a_source_and_is_a_length_at_its_k(p):
    assert p.source.startswith("https://") and " " not in p.source
    assert p.where and p.short and p.target and p.draft and p.dataset
    assert 1.0 <= p.length <= p.k + 1
    assert p.method in METHODS and p.traffic and set(p.traffic) <= set(TRAFFIC_KINDS)
    # alpha is the i.i.d. acceptance with that mean at that k
    assert sum(p.alpha**i for i in range(p.k + 1)) == pytest.approx(p.length, abs=1e-9)


def test_the_header_names_every_field():
    head = (ROOT / "src/servesim/hardware/data/acceptance.toml").read_text().split("\n[[preset]]")[0]
    for field in FIELDS:
        assert re.search(rf"^#\s+{field}\s", head, re.M), field


def test_one_default_per_method_and_kind():
    for method in {p.method for p in PRESETS}:
        for kind in TRAFFIC_KINDS:
            rows = [p for p in PRESETS if p.method == method and kind in p.traffic]
            assert not rows or sum(p.default for p in rows) == 1, (method, kind)


def test_lookup_takes_the_default_then_the_targets_own_family():
    chat = preset_for("eagle3", "chat")
    assert chat.default and chat.k == 3 and chat.length == pytest.approx(2.60)
    assert preset_for("eagle3") == chat  # chat is the default kind
    # a target of the family gets its own measurement, the longest family prefix first
    assert preset_for("eagle3", "code", "llama-3-70b").target == "meta-llama/Llama-3.3-70B-Instruct"
    assert preset_for("eagle3", "code", "llama-3-8b").draft == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert preset_for("eagle3", "code", "mistral-7b") == presets_for("eagle3")["code"]
    assert preset_for("eagle3", "chat", "llama-3-8b") == chat  # a tie goes to the default row
    assert preset_for("mtp", "summarization", "deepseek-r1").k == 1
    # every measured kind; synthetic traffic has no measurement of its own (derived rows only)
    assert set(presets_for("eagle3")) == set(TRAFFIC_KINDS) - {"synthetic"}


@pytest.mark.parametrize(("args", "name", "fragments"), [
    (("eagle3", "poetry"), "traffic", ("chat", "code", "summarization", "math")),
    (("medusa", "chat"), "spec", ("eagle3", "--acceptance-length")),
    (("small-draft", "math"), "traffic", ("chat, code", "--acceptance-length")),
    (("ngram", "summarization"), "traffic", ("chat, code", "--acceptance-length")),
])
def test_bad_lookups_name_the_parameter_the_value_and_the_choices(args, name, fragments):
    with pytest.raises(ParameterError) as err:
        preset_for(*args)
    assert err.value.name == name and err.value.value in args
    for f in fragments:
        assert f in err.value.valid


def _predict(**kw):
    from servesim.hardware.pricer import Deployment
    from servesim.plan.predict import predict
    from servesim.sim.batching import Benchmark

    return predict(Deployment("llama-3-8b", "h100-sxm", 1, dtype="bf16"),
                   Benchmark(isl=256, osl=32, concurrency=1, num_prompts=2), **kw)


def test_predict_with_eagle3_and_no_acceptance_reports_the_presets_source():
    s = _predict(spec="eagle3")["speculation"]
    p = preset_for("eagle3", "chat", "llama-3-8b")
    assert s["acceptance"] == (f"preset: eagle3 chat — mean acceptance length {p.length:g} at k = {p.k} "
                               f"({p.short})")
    assert s["k"] == p.k and s["alpha"] == pytest.approx(p.alpha)  # the preset's own k, no k search
    assert s["acceptance_length"] == pytest.approx(p.length)
    code = _predict(spec="eagle3", traffic="code")["speculation"]
    assert code["acceptance"].startswith("preset: eagle3 code") and "HumanEval" in code["acceptance"]
    given = _predict(spec="eagle3", k=2, acceptance_length=2.2)["speculation"]
    assert given["acceptance"].startswith("given")


def test_predict_says_when_a_method_has_no_published_acceptance():
    s = _predict(spec="medusa")["speculation"]
    assert s["acceptance"].startswith("preset (the lab's illustration")
    with pytest.raises(ParameterError, match="traffic"):
        _predict(spec="ngram", traffic="summarization")
    with pytest.raises(ParameterError, match="traffic"):
        _predict(spec="eagle3", traffic="poetry")


def test_the_cli_takes_traffic_as_a_flag_and_a_points_column(tmp_path):
    res = run_cli("predict", "--help")
    assert "--traffic" in res.stdout and "summarization" in res.stdout
    pts = tmp_path / "p.csv"
    pts.write_text("model,gpu,tp,dtype,isl,osl,concurrency,spec,traffic\n"
                   "llama-3-8b,h100-sxm,1,bf16,256,32,1,eagle3,code\n"
                   "llama-3-8b,h100-sxm,1,bf16,256,32,1,eagle3,poetry\n")
    res = run_cli("predict", "--points", str(pts), "--num-prompts", "2", "--format", "json", "--quiet")
    assert res.returncode == 0, res.stderr
    import json

    rows = json.loads(res.stdout)
    assert rows[0]["speculation"]["acceptance"].startswith("preset: eagle3 code")
    assert "traffic" in rows[1]["error"] and ":3:" in rows[1]["error"]


def test_the_labs_specdec_defaults_are_unchanged():
    from servesim.model.speculative import SPECDEC_PRESETS

    assert {n: (p.alpha, p.d, p.c) for n, p in SPECDEC_PRESETS.items()} == {
        "small-draft": (0.75, 0.12, 0.05), "mtp": (0.85, 0.1, 0.05), "medusa": (0.56, 0.0444, 0.05),
        "eagle3": (0.9, 0.06, 0.06)}
    res = run_cli("specdec")
    assert res.returncode == 0 and res.stdout == (ROOT / "tests/golden/specdec.txt").read_text()


def test_a_preset_measured_at_the_engines_k_comes_before_the_default_one():
    # DeepSeek-R1's MTP: the report's k = 1 figure is the default; at k = 3 TensorRT-LLM's own
    # measurement (2.82 tokens a step) stands, not the k = 1 alpha extrapolated (3.31)
    assert preset_for("mtp", "chat", "deepseek-r1").k == 1
    assert preset_for("mtp", "chat", "deepseek-r1", k=1).id == "mtp-deepseek-v3-report"
    three = preset_for("mtp", "chat", "deepseek-r1", k=3)
    assert (three.k, three.length) == (3, 2.82)
    one = preset_for("mtp", "chat", "deepseek-r1")
    assert sum(one.alpha ** i for i in range(4)) == pytest.approx(3.31, abs=0.01)


def test_a_k_no_preset_measured_takes_the_nearest_measured_k():
    # none at k = 6-8: TensorRT-LLM's k = 5 measurement (3.01) is extrapolated one to three steps,
    # not the report's k = 1 figure five to seven (its alpha 0.875 would accept 4.86 at k = 6)
    for k in (6, 7, 8):
        assert preset_for("mtp", "chat", "deepseek-r1", k=k).id == "mtp-deepseek-r1-trtllm-k5"
    five = preset_for("mtp", "chat", "deepseek-r1", k=6)
    # by hand: alpha solves 1 + a + ... + a^5 = 3.01 (a = 0.7105); at k = 6 add a^6 = 0.129
    assert sum(five.alpha ** i for i in range(6)) == pytest.approx(3.01, abs=1e-6)
    assert five.alpha == pytest.approx(0.7105, abs=5e-4)
    assert sum(five.alpha ** i for i in range(7)) == pytest.approx(3.139, abs=0.002)
    one = preset_for("mtp", "chat", "deepseek-r1", k=1)
    assert sum(one.alpha ** i for i in range(7)) == pytest.approx(4.86, abs=0.01)
    # no k asked for: the default row, as before
    assert preset_for("mtp", "chat", "deepseek-r1").id == "mtp-deepseek-v3-report"


def test_a_derived_kind_scales_the_measured_kinds_accepted_drafts():
    from servesim.hardware.acceptance import load_derived

    (rule,) = [r for r in load_derived() if r.id == "mtp-deepseek-synthetic"]
    r = rule.draft_ratio
    assert 0.0 < r < 1.0 and rule.from_traffic == "chat" and rule.source.startswith("https://")
    # by hand: A' = 1 + r (A - 1) of TensorRT-LLM's k = 2 and k = 3 figures (2.58, 2.82) and the
    # report's k = 1 figure (1.875)
    for k, a in ((1, 1.875), (2, 2.58), (3, 2.82)):
        got = preset_for("mtp", "synthetic", "deepseek-r1", k=k)
        assert (got.k, got.length) == (k, pytest.approx(1 + r * (a - 1)))
        chat = preset_for("mtp", "chat", "deepseek-r1", k=k)
        assert got.traffic == ("synthetic",) and got.length < chat.length
        assert got.describe("synthetic").startswith("preset: mtp synthetic") and "x " in got.short
    # no derived row for another method or another family: the kind is refused, naming the parameter
    with pytest.raises(ParameterError, match="traffic='synthetic'"):
        preset_for("eagle3", "synthetic", "llama-3-8b")
    with pytest.raises(ParameterError, match="traffic='synthetic'"):
        preset_for("mtp", "synthetic", "qwen3-next")


@pytest.mark.parametrize("row, field", [
    ('draft_ratio = 1.2', "draft_ratio"),
    ('draft_ratio = 0', "draft_ratio"),
    ('from_traffic = "synthetic"', "from_traffic"),
    ('traffic = "poetry"', "traffic"),
    ('source = "http://x"', "source"),
])
def test_a_bad_derived_row_names_the_file_the_row_and_the_field(tmp_path, row, field):
    from servesim.hardware.acceptance import load_derived

    good = {"id": '"d1"', "method": '"mtp"', "traffic": '"synthetic"', "family": '"deepseek"',
            "from_traffic": '"chat"', "draft_ratio": "0.5", "fitted_to": '"x"', "source": '"https://x"',
            "where": '"x"', "short": '"x"', "note": '"x"'}
    name = row.split(" = ")[0]
    good[name] = row.split(" = ")[1]
    path = tmp_path / "acc.toml"
    path.write_text("[[derived]]\n" + "".join(f"{k} = {v}\n" for k, v in good.items()))
    with pytest.raises(ValueError, match=rf"acc.toml: derived 1 \(d1\): {field}"):
        load_derived(path)


def test_the_inferencemax_client_runs_mtp_on_synthetic_traffic_and_pays_for_it():
    from servesim.plan.predict import harness_speculation
    from servesim.sim.batching import Benchmark
    from servesim.sim.client import Client

    def how(client: str, **given: object) -> dict:
        bench = Benchmark(isl=1024, osl=256, concurrency=4, client=Client(client))
        return harness_speculation(bench, model="deepseek-ai/DeepSeek-R1", engine="trtllm", spec="mtp",
                                   **given)

    assert how("inferencemax")["traffic"] == "synthetic" and how("inferencemax")["k"] == 3
    assert how("vllm").get("traffic") is None  # a plain client: the default kind (chat)
    assert how("inferencemax", traffic="code")["traffic"] == "code"  # what the user names wins
    assert "traffic" not in how("inferencemax", acceptance_length=2.5, k=3)  # a given acceptance
    # a target the derived kind does not cover keeps the default kind
    bench = Benchmark(isl=1024, osl=256, concurrency=4, client=Client("inferencemax"))
    assert harness_speculation(bench, model="llama-3-8b", engine="vllm", spec="eagle3").get("traffic") is None
