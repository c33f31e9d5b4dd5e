"""A request longer than the model serves is refused (issue 19): prompt + output against the
checkpoint's max_position_embeddings, by catalog name, Hugging Face id or config.json."""

from __future__ import annotations

import json

import pytest

from servesim._catalogfile import CatalogError
from servesim._checks import ParameterError
from servesim.hardware.catalog import load_catalog
from servesim.hardware.model_config import find_architecture, read_config
from servesim.hardware.names import model_shape
from servesim.plan.predict import check_context
from tests.cli_helpers import run_cli


@pytest.mark.parametrize(("model", "context"), [
    ("llama-3-8b", 131072),  # the catalog name: the largest of its checkpoints (Llama-3.1)
    ("meta-llama/Llama-3.1-70B-Instruct", 131072),
    ("meta-llama/Meta-Llama-3-8B-Instruct", 8192),  # Llama-3 (not 3.1): 8k
    ("Qwen/Qwen2.5-7B-Instruct", 32768),  # instruct without YaRN
    ("Qwen/Qwen2.5-7B", 131072),
    ("llama-2-7b", 4096),
])
def test_catalog_context_lengths(model, context):
    assert model_shape(model).context_length == context


def test_config_json_gives_max_position_embeddings(tmp_path):
    assert find_architecture("deepseek-ai/DeepSeek-R1").context_length == 163840
    assert find_architecture("Qwen/Qwen3-235B-A22B").context_length == 40960
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
           "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 2,
           "intermediate_size": 1024, "vocab_size": 1000, "max_position_embeddings": 2048}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    assert read_config(f).context_length == 2048
    del cfg["max_position_embeddings"]
    f.write_text(json.dumps(cfg))
    assert read_config(f).context_length == 0  # unknown: not checked


def test_check_context_names_the_length_at_fault():
    shape = model_shape("meta-llama/Meta-Llama-3-8B-Instruct")
    check_context(shape, 8000, 8192)  # exactly the context: served
    with pytest.raises(ParameterError) as e:
        check_context(shape, 8000, 8300)
    assert (e.value.name, e.value.value) == ("osl", 300)
    assert "at most 192" in str(e.value)
    with pytest.raises(ParameterError) as e:
        check_context(shape, 9000, 9100)
    assert (e.value.name, e.value.value) == ("isl", 9000)
    assert "at most 8191" in str(e.value)
    check_context(model_shape("meta-llama/Llama-3.1-8B-Instruct"), 8000, 8300)


def test_short_context_ids_must_be_the_models_own(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[model.tiny]\nlayers = 4\nhidden_size = 512\nheads = 8\nkv_heads = 2\nhead_dim = 64\n'
                 'vocab_size = 1000\nparams = 20e6\nattention = "gqa"\ncontext_length = 4096\n'
                 'hf_ids = ["a/tiny"]\nshort_context_ids = ["b/other"]\nshort_context_length = 2048\n')
    with pytest.raises(CatalogError, match=r"short_context_ids.*'b/other' is not one of its hf_ids"):
        load_catalog(f)


@pytest.mark.parametrize("argv", [
    ("predict", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm", "--isl", "200000",
     "--osl", "100", "--concurrency", "1"),
    ("plan", "--model", "llama-3-8b", "--gpus", "2", "--gpu", "h100-sxm", "--isl", "200000", "--osl", "100"),
    ("simulate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "200000", "--osl", "100",
     "--rate", "1"),
    ("predict", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--tp", "8", "--isl", "170000",
     "--osl", "10", "--concurrency", "1"),
])
def test_every_command_refuses_a_prompt_beyond_the_context(argv):
    r = run_cli(*argv)
    assert r.returncode == 2, r.stderr
    assert "isl=" in r.stderr and "max_position_embeddings" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_model_too_big_for_its_tp_says_what_would_hold_it():
    r = run_cli("predict", "--model", "llama-3-405b", "--gpu", "h100-sxm", "--tp", "4", "--isl", "128",
                "--osl", "16", "--concurrency", "1")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    # 405e9 x 2 B / 4 = 189 GiB a GPU; at tp 8 still 94.5 GiB > 0.9 x 79.6; tp 16 holds it
    assert "in bf16 needs 189.0 GiB per GPU at tp 4" in r.stderr and "tp 16 would hold it" in r.stderr
