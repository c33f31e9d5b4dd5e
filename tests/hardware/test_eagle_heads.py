"""Published EAGLE / EAGLE-3 heads by Hugging Face id (issue 50 item 5): the head's shape derived
from its target, a note saying so, the user's config.json still winning, unknown ids refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servesim._checks import ParameterError
from servesim.hardware.catalog import builtin_catalog
from servesim.hardware.pricer import Deployment, build_step_model
from servesim.hardware.speculation import EagleHead, draft_model_for, drafter_memory, published_heads
from tests.cli_helpers import run_cli

QWEN_HEAD = "RedHatAI/Qwen3-32B-speculator.eagle3"
LLAMA_HEAD = "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"


def _target(model: str, tp: int = 1):  # type: ignore[no-untyped-def]
    return build_step_model(Deployment(model, "h100-sxm", tp, "bf16", "bf16", "vllm"), builtin_catalog())[0]


@pytest.mark.parametrize(("model", "tp", "head"), [("Qwen/Qwen3-32B", 1, QWEN_HEAD),
                                                    ("meta-llama/Llama-3.3-70B-Instruct", 4, LLAMA_HEAD)])
def test_a_head_id_is_one_layer_of_its_targets_width(model: str, tp: int, head: str) -> None:
    sm = _target(model, tp)
    dm = draft_model_for(sm, "eagle3", None, head)
    assert isinstance(dm, EagleHead)
    assert dm.shape.layers == 1 and dm.shape.hidden == sm.shape.hidden and dm.tp == sm.tp
    assert head in dm.note and "derived from the target" in dm.note
    # one layer of the target's (plus its own LM head) costs less than a quarter of the target's step
    # at batch 1, and more than nothing
    t_head, t_target = dm.decode_step(1, 2048).gpu_s, sm.decode_step(1, 2048).gpu_s
    assert 0 < t_head < t_target / 4
    # its weights: more than the one layer's attention + MLP GEMMs, less than 1/10 of the target's
    w, _ = drafter_memory(dm, sm, 3)
    s = sm.shape
    layer_bytes = 2 * (s.hidden * s.intermediate * 3) / sm.tp  # the MLP alone, bf16
    assert layer_bytes < w < sm.weight_bytes_per_gpu / 10


def test_the_ids_match_without_regard_to_case_and_the_head_is_the_configless_one() -> None:
    sm = _target("Qwen/Qwen3-32B")
    by_id = draft_model_for(sm, "eagle3", None, QWEN_HEAD.lower())
    plain = draft_model_for(sm, "eagle3")
    assert isinstance(by_id, EagleHead) and isinstance(plain, EagleHead)
    assert by_id.shape == plain.shape
    assert by_id.decode_step(8, 1500).gpu_s == plain.decode_step(8, 1500).gpu_s


def test_the_users_config_json_still_wins(tmp_path: Path) -> None:
    sm = _target("Qwen/Qwen3-32B")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": sm.shape.hidden, "draft_vocab_size": 64000}))
    own = draft_model_for(sm, "eagle3", None, str(cfg))
    by_id = draft_model_for(sm, "eagle3", None, QWEN_HEAD)
    assert isinstance(own, EagleHead) and isinstance(by_id, EagleHead)
    assert own.shape.vocab == 64000 and by_id.shape.vocab == 32000 and not own.note
    # a wider LM head costs more at the same batch
    assert own.decode_step(64, 1500).gpu_s > by_id.decode_step(64, 1500).gpu_s


def test_a_typo_a_wrong_method_or_a_wrong_target_is_refused_naming_the_value() -> None:
    sm = _target("Qwen/Qwen3-32B")
    typo = "RedHatAI/Qwen3-32B-speculatr.eagle3"
    with pytest.raises(ParameterError) as e:
        draft_model_for(sm, "eagle3", None, typo)
    assert e.value.value == typo and QWEN_HEAD in e.value.valid
    with pytest.raises(ParameterError, match="is an eagle3 head"):
        draft_model_for(sm, "eagle", None, QWEN_HEAD)
    with pytest.raises(ParameterError, match="hidden size 8192"):
        draft_model_for(sm, "eagle3", None, LLAMA_HEAD)


def test_every_shipped_head_names_its_card() -> None:
    heads = published_heads()
    assert QWEN_HEAD.lower() in heads and LLAMA_HEAD.lower() in heads
    for key, h in heads.items():
        assert key == h["id"].lower() and h["method"] in ("eagle", "eagle3")
        assert h["source"] == f"https://huggingface.co/{h['id']}"
        assert h["target_hidden"] in (2880, 4096, 5120, 8192)


@pytest.mark.parametrize(("model", "tp", "head"), [("Qwen/Qwen3-32B", "1", QWEN_HEAD),
                                                    ("meta-llama/Llama-3.3-70B-Instruct", "4", LLAMA_HEAD)])
def test_predict_takes_both_ids(model: str, tp: str, head: str) -> None:
    r = run_cli("predict", "--model", model, "--gpu", "h100-sxm", "--tp", tp, "--isl", "500", "--osl", "100",
                "--concurrency", "4", "--num-prompts", "20", "--spec", "eagle3", "--draft", head)
    assert r.returncode == 0, r.stderr
    assert "speculation eagle3" in r.stdout and f"draft {head}" in r.stdout


def test_predict_refuses_a_typo_with_exit_2_and_no_traceback() -> None:
    typo = "yuhuili/EAGLE3-LLaMA3.3-Instruct-7OB"
    r = run_cli("predict", "--model", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "h100-sxm", "--tp", "4",
                "--isl", "500", "--osl", "100", "--concurrency", "4", "--spec", "eagle3", "--draft", typo)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert typo in r.stderr and "--draft" in r.stderr


def test_a_points_files_draft_column_takes_both_ids(tmp_path: Path) -> None:
    pts = tmp_path / "points.csv"
    pts.write_text("model,gpu,tp,isl,osl,concurrency,num_prompts,spec,draft\n"
                   f"Qwen/Qwen3-32B,h100-sxm,1,500,100,4,20,eagle3,{QWEN_HEAD}\n"
                   f"meta-llama/Llama-3.3-70B-Instruct,h100-sxm,4,500,100,4,20,eagle3,{LLAMA_HEAD}\n")
    r = run_cli("predict", "--points", str(pts), "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["model"] for row in rows] == ["qwen3-32b", "llama-3-70b"]
    for row, head in zip(rows, (QWEN_HEAD, LLAMA_HEAD), strict=True):
        assert row["speculation"]["draft"] == head and head in row["speculation"]["draft_note"]
