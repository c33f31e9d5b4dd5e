"""Model and GPU names, config.json shapes, precisions and the tensor-parallel rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from servesim._catalogfile import CatalogError, load_builtin
from servesim._checks import InputError, ParameterError
from servesim.hardware.catalog import builtin_catalog, load_catalog
from servesim.hardware.model_config import dense_params, read_config
from servesim.hardware.names import (
    ModelShape,
    canonical_gpu,
    canonical_model,
    check_tp,
    dense_shape,
    kv_replication,
    model_shape,
    resolve_gpu,
    resolve_model,
    valid_tps,
)
from servesim.hardware.precision import (
    BYTES_PER_VALUE,
    KV_DTYPES,
    WEIGHT_DTYPES,
    bytes_per_value,
    check_dtype,
    check_kv_dtype,
    peak_flops,
    supported_dtypes,
    weight_bytes,
)
from servesim.hardware.stepmodel import StepModel
from servesim.model.kvcache import MODELS, kv_bytes_per_token

CAT = builtin_catalog()
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"

HF_IDS = {
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3-8b",
    "meta-llama/Llama-3.1-8B": "llama-3-8b",
    "meta-llama/Meta-Llama-3-8B": "llama-3-8b",
    "meta-llama/Meta-Llama-3-8B-Instruct": "llama-3-8b",
    "meta-llama/Llama-3.1-70B": "llama-3-70b",
    "meta-llama/Llama-3.1-70B-Instruct": "llama-3-70b",
    "meta-llama/Meta-Llama-3-70B": "llama-3-70b",
    "meta-llama/Meta-Llama-3-70B-Instruct": "llama-3-70b",
    "meta-llama/Llama-3.3-70B-Instruct": "llama-3-70b",
    "meta-llama/Llama-3.1-405B": "llama-3-405b",
    "meta-llama/Llama-3.1-405B-Instruct": "llama-3-405b",
    "Qwen/Qwen3-8B": "qwen3-8b",
    "Qwen/Qwen3-14B": "qwen3-14b",
    "Qwen/Qwen3-32B": "qwen3-32b",
    "Qwen/Qwen2.5-7B-Instruct": "qwen2.5-7b",
    "Qwen/Qwen2.5-14B-Instruct": "qwen2.5-14b",
    "Qwen/Qwen2.5-32B-Instruct": "qwen2.5-32b",
    "Qwen/Qwen2.5-72B-Instruct": "qwen2.5-72b",
    "mistralai/Mistral-7B-Instruct-v0.3": "mistral-7b-v0.3",
    "mistralai/Mistral-Small-24B-Instruct-2501": "mistral-small-24b",
}

# (hidden, heads, kv_heads, head_dim, intermediate, layers, vocab, params) from each config.json
NEW_MODELS = {
    "qwen3-8b": (4096, 32, 8, 128, 12288, 36, 151936, 8_190_735_360),
    "qwen3-14b": (5120, 40, 8, 128, 17408, 40, 151936, 14_768_307_200),
    "qwen3-32b": (5120, 64, 8, 128, 25600, 64, 151936, 32_762_123_264),
    "qwen2.5-14b": (5120, 40, 8, 128, 13824, 48, 152064, 14_770_033_664),
    "qwen2.5-32b": (5120, 40, 8, 128, 27648, 64, 152064, 32_763_876_352),
    "mistral-7b-v0.3": (4096, 32, 8, 128, 14336, 32, 32768, 7_248_023_552),
    "mistral-small-24b": (5120, 32, 8, 128, 32768, 40, 131072, 23_572_403_200),
}


# ----------------------------------------------------------------------------- model names


@pytest.mark.parametrize(("hf_id", "name"), sorted(HF_IDS.items()))
def test_every_listed_hf_id_resolves_to_its_shape(hf_id, name):
    assert resolve_model(hf_id) is CAT.model(name)
    assert resolve_model(hf_id.lower()) is CAT.model(name)
    assert resolve_model(hf_id.upper()) is CAT.model(name)
    assert canonical_model(hf_id) == name
    assert model_shape(hf_id).hf_id.lower() == hf_id.lower()


def test_short_catalog_names_still_resolve():
    for name in CAT.models:
        assert resolve_model(name) is CAT.model(name)
    assert resolve_model("LLAMA-3-70B") is CAT.model("llama-3-70b")
    assert resolve_model("  llama-3-8b ") is CAT.model("llama-3-8b")


@pytest.mark.parametrize(
    ("hf_id", "name"),
    [
        ("nvidia/Llama-3.1-8B-Instruct-FP8", "llama-3-8b"),
        ("RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8", "llama-3-70b"),
        ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "llama-3-8b"),
        ("neuralmagic/Meta-Llama-3-70B-Instruct-FP8-dynamic", "llama-3-70b"),
        ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "llama-3-70b"),
        ("nvidia/Llama-3.3-70B-Instruct-FP4", "llama-3-70b"),
        ("meta-llama/Llama-3.1-405B-Instruct-FP8", "llama-3-405b"),  # the model's own organisation
        ("Qwen/Qwen3-32B-FP8", "qwen3-32b"),
        ("nvidia/DeepSeek-R1-FP4", "deepseek-v3"),
        ("Llama-3.1-8B-Instruct", "llama-3-8b"),  # a bare repository name, unique in the catalog
    ],
)
def test_fp8_and_fp4_checkpoints_map_to_the_same_shape(hf_id, name):
    assert resolve_model(hf_id) is CAT.model(name)
    assert model_shape(hf_id).hf_id == hf_id


def test_an_untrusted_organisation_is_refused_with_the_match_named():
    with pytest.raises(ParameterError) as info:
        resolve_model("someone/Llama-3.1-8B-Instruct-FP8")
    assert info.value.name == "model"
    assert "close matches: llama-3-8b" in str(info.value)
    assert "'someone' is neither its organisation nor a known quantizer" in str(info.value)


def test_unknown_model_lists_close_matches():
    with pytest.raises(ParameterError) as info:
        resolve_model("lama-3-70b")
    msg = str(info.value)
    assert info.value.name == "model"
    assert msg.startswith("model='lama-3-70b' is invalid: must be a catalog model, a Hugging Face id or "
                          "a config.json path; close matches: llama-3-70b")
    assert "llama-3-8b" in msg.split("(catalog models")[0]
    assert "(catalog models: deepseek-v3, falcon-7b" in msg
    with pytest.raises(ParameterError, match=r"close matches: Qwen/Qwen3-32B"):
        resolve_model("Qwen/Qwen3-23B")
    with pytest.raises(ParameterError, match=r"no close match \(catalog models: "):
        resolve_model("gpt-5")
    with pytest.raises(ParameterError, match=r"close matches: qwen3-8b"):
        canonical_model("qwen3-9b")
    with pytest.raises(ParameterError, match="non-empty string"):
        resolve_model("  ")


def test_model_shapes_carry_the_mlp_width_and_flags():
    s = model_shape("meta-llama/Llama-3.1-70B-Instruct")
    assert (s.name, s.intermediate, s.gated_mlp, s.qkv_bias) == ("llama-3-70b", 28672, True, False)
    assert (s.layers, s.hidden, s.heads, s.kv_heads, s.head_dim, s.vocab) == (80, 8192, 64, 8, 128, 128256)
    assert model_shape(CAT.model("llama-3-405b")).intermediate == 53248
    assert model_shape("llama-3.2-1b").tied_embeddings and model_shape("llama-3.2-1b").intermediate == 8192
    assert model_shape("llama-2-7b").intermediate == 11008
    falcon = model_shape("falcon-7b")
    assert (falcon.intermediate, falcon.gated_mlp, falcon.attention) == (18176, False, "mqa")
    q72 = model_shape("qwen2.5-72b")
    assert (q72.intermediate, q72.qkv_bias) == (29568, True)
    assert model_shape("qwen2.5-7b").intermediate == 18944
    mx = model_shape("mixtral-8x7b")
    # models.toml's intermediate_size of a MoE entry is one routed expert's width
    assert (mx.moe_intermediate, mx.intermediate, mx.experts, mx.experts_per_token) == (14336, 0, 8, 2)
    ds = model_shape("deepseek-v3")
    # MLA: the catalog writes head_dim in the K+V form of the latent (2 x 288 = 512 + 64); the shape
    # holds the query/key head width, qk_nope_head_dim + qk_rope_head_dim, as the config.json reader
    assert (ds.attention, ds.head_dim, ds.moe_intermediate) == ("mla", 128 + 64, 2048)


def test_every_shipped_model_has_its_mlp_width_and_ids():
    for name, e in load_builtin("models.toml")["model"].items():
        assert e.get("intermediate_size", 0) >= 1, name
        assert e.get("hf_ids"), name


@pytest.mark.parametrize("name", sorted(NEW_MODELS))
def test_new_models_match_their_config_json(name):
    hidden, heads, kv, hd, inter, layers, vocab, params = NEW_MODELS[name]
    s = dense_shape(name)
    assert (s.hidden, s.heads, s.kv_heads, s.head_dim, s.intermediate, s.layers, s.vocab) == (
        hidden, heads, kv, hd, inter, layers, vocab)
    assert not s.tied_embeddings and s.attention == "gqa"
    assert s.params == pytest.approx(params, rel=5e-4)  # catalog rounds to 4 digits
    exact = dense_params(layers=layers, hidden=hidden, heads=heads, kv_heads=kv, head_dim=hd,
                         intermediate=inter, vocab=vocab, tied_embeddings=False, qkv_bias=s.qkv_bias,
                         qk_norm=name.startswith("qwen3"))
    assert exact == params  # the formula gives the checkpoint's own count
    assert MODELS[name].bytes_per_token == 2 * layers * kv * hd * 2  # servesim.model.kvcache reads them too


def test_the_formula_gives_the_shipped_dense_counts():
    for name in ("llama-3-8b", "llama-3-70b", "llama-3-405b", "llama-3.2-1b", "llama-2-7b",
                 "qwen2.5-7b", "qwen2.5-72b", "falcon-7b"):
        s = model_shape(name)
        n = dense_params(layers=s.layers, hidden=s.hidden, heads=s.heads, kv_heads=s.kv_heads,
                         head_dim=s.head_dim, intermediate=s.intermediate, vocab=s.vocab,
                         tied_embeddings=s.tied_embeddings, gated_mlp=s.gated_mlp, qkv_bias=s.qkv_bias)
        assert n == pytest.approx(s.params, rel=5e-3), name  # catalog: 3-4 digits


def test_qwen3_32b_heads_are_wider_than_hidden_over_heads():
    s = model_shape("Qwen/Qwen3-32B")
    assert s.head_dim == 128 and s.hidden // s.heads == 80
    assert s.heads * s.head_dim == 8192 and s.kv_heads * s.head_dim == 1024
    m = model_shape("mistral-small-24b")
    assert m.heads * m.head_dim == 4096  # narrower than its 5120 hidden


def test_dense_shape_refuses_moe_and_mla():
    with pytest.raises(ParameterError, match=r"model='mixtral-8x7b' is invalid: .*mixture of experts"):
        dense_shape("mixtral-8x7b")
    with pytest.raises(ParameterError,
                       match=r"model='deepseek-v3' is invalid: .*experts .* and uses multi-head latent"):
        dense_shape("deepseek-v3")
    assert dense_shape("falcon-7b").gated_mlp is False


def test_a_spec_unknown_to_the_catalog_has_unknown_mlp_width(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[model.tiny]\nlayers = 4\nhidden_size = 512\nheads = 8\nkv_heads = 2\nhead_dim = 64\n'
                 'vocab_size = 1000\nparams = 20e6\nattention = "gqa"\n')
    cat = load_catalog(f)
    s = model_shape("tiny", cat)
    assert s.intermediate == 0 and s.gated_mlp and s.hf_id == ""
    with pytest.raises(ParameterError, match=r"intermediate_size=0 is invalid: must be known"):
        dense_shape("tiny", cat)
    with pytest.raises(ParameterError, match=r"unknown model|catalog model"):
        resolve_model("tiny")  # not in the shipped catalog


# ----------------------------------------------------------------------------- catalog fields


def test_user_catalogs_take_the_new_fields(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[model.mine]\nlayers = 4\nhidden_size = 512\nheads = 8\nkv_heads = 2\nhead_dim = 64\n'
                 'vocab_size = 1000\nparams = 20e6\nattention = "gqa"\nintermediate_size = 1536\n'
                 'gated_mlp = false\nhf_ids = ["me/Mine-1B"]\n'
                 '[gpu.l40s]\nhbm_TBps = 0.864\nbf16_TFLOPS = 362\nmemory_GiB = 44.5\n'
                 'interconnect_GBps = 32\nfp8_TFLOPS = 733\n')
    cat = load_catalog(f)
    assert resolve_model("ME/mine-1b", cat) is cat.model("mine")
    s = dense_shape("me/Mine-1B", cat)
    assert (s.intermediate, s.gated_mlp) == (1536, False)
    assert canonical_gpu("L40S", cat) == "l40s"
    assert check_dtype("fp8", "l40s", cat) == "fp8"
    assert peak_flops("l40s", "fp8", cat) == pytest.approx(733e12)
    with pytest.raises(ParameterError, match=r"supports: bf16, fp8 \(l40s has no FP4 peak"):
        check_dtype("fp4", "l40s", cat)


def test_replacing_an_entry_drops_its_old_extras(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[model.llama-3-8b]\nlayers = 4\nhidden_size = 512\nheads = 8\nkv_heads = 2\n'
                 'head_dim = 64\nvocab_size = 1000\nparams = 20e6\nattention = "gqa"\n')
    cat = load_catalog(f)
    assert cat.model_extras["llama-3-8b"] == {}
    with pytest.raises(ParameterError):
        resolve_model("meta-llama/Llama-3.1-8B", cat)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("intermediate_size = -1\n",
         "[model.m] field 'intermediate_size': intermediate_size=-1 is invalid: must be an integer >= 0"),
        ("gated_mlp = 1\n", "[model.m] field 'gated_mlp': gated_mlp=1 is invalid: must be true or false"),
        ('hf_ids = "me/m"\n', "[model.m] field 'hf_ids': hf_ids='me/m' is invalid: must be a list of"),
        ('hf_ids = ["me/m", "nope"]\n',
         "[model.m] field 'hf_ids': hf_ids[1]='nope' is invalid: must be a Hugging Face id 'owner/name'"),
        ('hf_ids = ["META-LLAMA/Llama-3.1-8B"]\n',
         "[model.m] field 'hf_ids': 'META-LLAMA/Llama-3.1-8B' is already an id of model 'llama-3-8b'"),
    ],
)
def test_bad_new_fields_name_file_entry_and_field(tmp_path, extra, expected):
    f = tmp_path / "user.toml"
    f.write_text('[model.m]\nlayers = 4\nhidden_size = 512\nheads = 8\nkv_heads = 2\nhead_dim = 64\n'
                 f'vocab_size = 1000\nparams = 20e6\nattention = "gqa"\n{extra}')
    with pytest.raises(CatalogError) as info:
        load_catalog(f)
    assert str(info.value).startswith(f"{f}: ")
    assert expected in str(info.value)


def test_bad_gpu_peak_fields(tmp_path):
    f = tmp_path / "user.toml"
    f.write_text('[gpu.x]\nhbm_TBps = 2.0\nbf16_TFLOPS = 400\nmemory_GiB = 48\ninterconnect_GBps = 100\n'
                 'fp8_TFLOPS = 0\n')
    with pytest.raises(CatalogError,
                       match=r"\[gpu.x\] field 'fp8_TFLOPS': fp8_TFLOPS=0 is invalid: must be > 0"):
        load_catalog(f)


# ----------------------------------------------------------------------------- config.json


def test_llama_3_1_8b_config_matches_the_catalog_shape():
    s = read_config(FIXTURES / "llama-3.1-8b.json")
    c = model_shape("llama-3-8b")
    for f in ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "gated_mlp", "vocab",
              "tied_embeddings", "attention", "qkv_bias"):
        assert getattr(s, f) == getattr(c, f), f
    assert s.params == 8_030_261_248
    assert s.params == pytest.approx(8.03e9, rel=5e-3)
    assert (s.name, s.torch_dtype) == ("llama-3.1-8b", "bfloat16")
    assert s.source == str(FIXTURES / "llama-3.1-8b.json")


def test_qwen3_32b_config_has_head_dim_128():
    s = read_config(FIXTURES / "qwen3-32b.json")
    assert (s.head_dim, s.heads, s.kv_heads, s.hidden) == (128, 64, 8, 5120)
    assert (s.intermediate, s.layers) == (25600, 64)
    assert s.params == 32_762_123_264  # QK norms counted, no biases
    assert CAT.model("qwen3-32b").params == pytest.approx(s.params, rel=5e-4)


def test_resolve_model_takes_a_config_path_or_its_directory(tmp_path):
    spec = resolve_model(str(FIXTURES / "qwen3-32b.json"))
    assert (spec.name, spec.head_dim, spec.heads, spec.attention) == ("qwen3-32b", 128, 64, "gqa")
    assert spec.kv_bytes_per_token() == CAT.model("qwen3-32b").kv_bytes_per_token()
    assert dense_shape(spec).intermediate == 25600  # the spec finds its shape again
    d = tmp_path / "Llama-3.1-8B-Instruct"
    d.mkdir()
    shutil.copy(FIXTURES / "llama-3.1-8b.json", d / "config.json")
    spec = resolve_model(str(d))
    assert spec.name == "Llama-3.1-8B-Instruct" and spec.params == 8_030_261_248
    assert model_shape(str(d / "config.json")).intermediate == 14336
    check_tp(spec, 8)


def test_qwen2_config_counts_its_qkv_biases(tmp_path):
    f = tmp_path / "q.json"
    f.write_text(json.dumps({"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
                             "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28,
                             "vocab_size": 152064, "tie_word_embeddings": False}))
    s = read_config(f)
    assert s.qkv_bias and s.params == 7_615_616_512


def test_malformed_config_names_file_and_field():
    path = FIXTURES / "malformed.json"
    with pytest.raises(InputError) as info:
        read_config(path)
    assert str(info.value) == (f"{path}: field 'hidden_size' = -1 is invalid: must be an integer in "
                               "[1, 16777216] (the model width)")


def _bad(tmp_path, content: bytes | str, name: str = "config.json") -> str:
    f = tmp_path / name
    if isinstance(content, str):
        f.write_text(content, encoding="utf-8")
    else:
        f.write_bytes(content)
    with pytest.raises(InputError) as info:
        read_config(f)
    msg = str(info.value)
    assert msg.startswith(f"{f}: ")
    return msg


GOOD = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4, "num_hidden_layers": 2,
        "vocab_size": 1000}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"hidden_size": None}, "missing required field 'hidden_size'"),
        ({"num_hidden_layers": 2.0}, "field 'num_hidden_layers' = 2.0 is invalid: must be an integer in "),
        ({"vocab_size": True}, "field 'vocab_size' = True is invalid: must be an integer in [1, "),
        ({"intermediate_size": "512"}, "field 'intermediate_size' = '512' is invalid"),
        ({"num_attention_heads": 10**30}, "must be an integer in [1, 16777216] (query heads)"),
        ({"num_key_value_heads": 3}, "field 'num_key_value_heads' = 3 is invalid: must be a divisor of "
                                     "num_attention_heads (4)"),
        ({"hidden_size": 250}, "missing required field 'head_dim' (hidden_size 250 is not a multiple"),
        ({"tie_word_embeddings": "yes"},
         "field 'tie_word_embeddings' = 'yes' is invalid: must be true or false"),
        ({"torch_dtype": 16}, "field 'torch_dtype' = 16 is invalid: must be a string"),
        # experts or a latent KV cache without a family that reads them: every family listed
        ({"num_local_experts": 8}, "missing required field 'architectures' (or 'model_type')"),
        ({"n_routed_experts": 256}, "supported families: llama (LlamaForCausalLM); mistral"),
        ({"kv_lora_rank": 512}, "deepseek_v3 (DeepseekV3ForCausalLM"),
        ({"model_type": "llama", "num_local_experts": 8}, "field 'num_local_experts' = 8 is invalid: must be "
                                                          "absent, 0 or 1 in a dense model's config"),
        ({"architectures": ["FalconForCausalLM"]},
         "field 'architectures' = ['FalconForCausalLM'] (model_type '') is not a supported family: supported "
         "families: llama"),
    ],
)
def test_bad_config_fields(tmp_path, change, expected):
    data = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    assert expected in _bad(tmp_path, json.dumps(data))


def test_bad_config_files(tmp_path):
    assert "not valid JSON" in _bad(tmp_path, "{hidden_size: 1}")
    assert "not valid JSON: NaN is not a JSON number" in _bad(tmp_path, '{"hidden_size": NaN}')
    assert "must be a JSON object (a Hugging Face config.json), got list" in _bad(tmp_path, "[1, 2]")
    assert "not UTF-8 text" in _bad(tmp_path, b'{"hidden_size": "\xff"}')
    assert "larger than 1 MiB" in _bad(tmp_path, b" " * (2**20 + 1))
    assert "not valid JSON: nested too deeply" in _bad(tmp_path, "[" * 100_000)
    with pytest.raises(InputError, match="no such file"):
        resolve_model(str(tmp_path / "missing.json"))
    with pytest.raises(InputError, match="no such file"):
        resolve_model(str(tmp_path / "empty-dir"))  # an explicit path that does not exist
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError, match=r"config.json: no such file"):
        read_config(tmp_path / "d")


def test_a_byte_order_mark_is_accepted(tmp_path):
    f = tmp_path / "bom.json"
    f.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode())
    s = read_config(f)
    assert s.head_dim == 64 and s.kv_heads == 4 and s.attention == "mha" and s.name == "bom"


def test_a_moe_config_path_is_read_and_only_the_dense_step_model_refuses_it():
    """One reader: a model given as a MoE config.json resolves to its per-layer shape (what predict
    prices with the MoE step model); dense_shape, whose caller prices dense layers only, refuses it."""
    path = FIXTURES / "qwen3-30b-a3b.json"
    s = resolve_model(str(path))
    assert (s.family, s.experts, s.experts_per_token, s.moe_layers, s.source) == (
        "qwen3_moe", 128, 8, 48, str(path))
    with pytest.raises(ParameterError, match=r"is a mixture of experts \(128 experts, 8 per token\)"):
        dense_shape(str(path))


# ----------------------------------------------------------------------------- GPUs


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("h100-sxm", "h100-sxm"), ("h100_sxm", "h100-sxm"), ("H100", "h100-sxm"), ("h100-80gb", "h100-sxm"),
        ("NVIDIA H100 SXM5", "h100-sxm"), ("nvidia-h100", "h100-sxm"),
        ("h200", "h200"), ("h200-sxm", "h200"), ("h200_sxm", "h200"), ("H200-141GB", "h200"),
        ("b200", "b200"), ("b200-sxm", "b200"), ("b200_sxm", "b200"), ("B200", "b200"),
        ("a100-80gb", "a100-80gb"), ("a100_sxm", "a100-80gb"), ("a100-sxm", "a100-80gb"),
        ("a100", "a100-80gb"),
        ("A100-SXM4-80GB", "a100-80gb"),
        ("mi300x", "mi300x"), ("MI300X", "mi300x"), ("amd-mi300x", "mi300x"),
    ],
)
def test_gpu_aliases(alias, name):
    assert canonical_gpu(alias) == name
    assert resolve_gpu(alias) is CAT.gpu(name)


@pytest.mark.parametrize(("alias", "close"), [("h100-sxn", "h100-sxm"), ("a100-40gb", "a100-80gb"),
                                              ("h300", "h200"), ("mi300", "mi300x")])
def test_unknown_gpus_list_close_matches(alias, close):
    with pytest.raises(ParameterError) as info:
        canonical_gpu(alias)
    assert info.value.name == "gpu"
    msg = str(info.value)
    assert msg.startswith(f"gpu={alias!r} is invalid: must be a catalog GPU or an alias")
    assert close in msg.split("close matches: ")[1].split(" (")[0]


# ----------------------------------------------------------------------------- precision


def test_dtype_lists_and_bytes():
    assert WEIGHT_DTYPES == ("bf16", "fp8", "fp4") and KV_DTYPES == ("bf16", "fp8")
    assert {d: BYTES_PER_VALUE[d] for d in WEIGHT_DTYPES} == {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5625}
    assert bytes_per_value("fp4") == 0.5 + 1 / 16  # NVFP4: one FP8 scale per 16 values
    assert bytes_per_value("BF16") == 2.0 and bytes_per_value("bfloat16") == 2.0
    with pytest.raises(ParameterError, match=r"dtype='int4' is invalid: must be one of 'bf16', 'fp8', 'fp4'"):
        bytes_per_value("int4")


SUPPORT = {
    "h100-sxm": ("bf16", "fp8"),
    "h200": ("bf16", "fp8"),
    "b200": ("bf16", "fp8", "fp4"),
    "mi300x": ("bf16", "fp8"),
    "a100-80gb": ("bf16",),
}


@pytest.mark.parametrize("gpu", sorted(SUPPORT))
def test_dtype_support_matrix(gpu):
    assert supported_dtypes(gpu) == SUPPORT[gpu]
    for d in WEIGHT_DTYPES:
        if d in SUPPORT[gpu]:
            assert check_dtype(d.upper(), gpu) == d
        else:
            with pytest.raises(ParameterError) as info:
                check_dtype(d, gpu)
            assert info.value.name == "dtype"
            assert f"must be a weight dtype {gpu} supports: {', '.join(SUPPORT[gpu])} (" in str(info.value)
    kv_ok = "fp8" in SUPPORT[gpu]
    if kv_ok:
        assert check_kv_dtype("fp8", gpu) == "fp8"
    else:
        with pytest.raises(ParameterError, match=r"kv_dtype='fp8' is invalid: .*not in the measured tables"):
            check_kv_dtype("fp8", gpu)
    assert check_kv_dtype("bf16", gpu) == "bf16"


def test_a100_fp8_message_names_the_weight_only_path():
    with pytest.raises(ParameterError, match=r"W8A16 \(Marlin"):
        check_dtype("fp8", "a100")
    with pytest.raises(ParameterError, match=r"kv_dtype='fp4' is invalid: must be one of 'bf16', 'fp8'"):
        check_kv_dtype("fp4", "b200")
    with pytest.raises(ParameterError, match=r"gpu='v100'"):
        check_dtype("bf16", "v100")


def test_peak_flops():
    assert peak_flops("H100", "bf16") == pytest.approx(989.4e12)
    assert peak_flops("h100_sxm", "fp8") == pytest.approx(1978.9e12)
    assert peak_flops("h200", "fp8") == pytest.approx(1978.9e12)
    assert peak_flops("b200", "fp8") == pytest.approx(4500e12)
    assert peak_flops("b200", "fp4") == pytest.approx(9000e12)
    assert peak_flops("mi300x", "fp8") == pytest.approx(2614.9e12)
    with pytest.raises(ParameterError, match="dtype='fp8'"):
        peak_flops("a100", "fp8")


def test_weight_bytes_keep_the_tables_in_bf16():
    s = model_shape("llama-3-8b")
    tables = 2 * 128256 * 4096
    assert weight_bytes(s, "bf16") == pytest.approx(2 * s.params)
    assert weight_bytes(s, "fp8") == pytest.approx(2 * tables + (s.params - tables))
    assert weight_bytes(s, "fp4") == pytest.approx(2 * tables + 0.5625 * (s.params - tables))
    assert weight_bytes(CAT.model("llama-3-8b"), "fp8") == weight_bytes(s, "fp8")  # a spec works too
    tied = model_shape("llama-3.2-1b")
    assert weight_bytes(tied, "fp8") == pytest.approx(2 * 128256 * 2048 + (tied.params - 128256 * 2048))


def test_kv_bytes_per_token():
    def kv(s, dtype):
        return s.kv_bytes_per_token(bytes_per_value(dtype))

    assert kv(model_shape("llama-3-70b"), "bf16") == 327_680 == 2 * 80 * 8 * 128 * 2
    assert kv(CAT.model("llama-3-70b"), "fp8") == 163_840
    assert kv(model_shape("deepseek-v3"), "bf16") == 70_272 == 61 * (512 + 64) * 2  # the MLA latent
    lab = MODELS["deepseek-v3"]  # the lab's K+V form of the same latent (servesim.model.kvcache)
    assert kv_bytes_per_token(lab.layers, lab.kv_heads, lab.head_dim, 2) == 70_272
    sm = StepModel(model_shape("llama-3-70b"), "H100", 4, kv_dtype="fp8")
    assert sm.sequence_kv_bytes(10) == 10 * 163_840  # the step model's copy, over all GPUs
    assert sm.kv_bytes_per_token_per_gpu == 163_840 / 4  # 8 KV heads over TP4: 2 a GPU


# ----------------------------------------------------------------------------- tensor parallelism


def test_tp_rule():
    s70 = dense_shape("llama-3-70b")
    assert valid_tps(s70) == (1, 2, 4, 8, 16, 32, 64)
    with pytest.raises(ParameterError) as info:
        check_tp(s70, 3)
    msg = str(info.value)
    assert info.value.name == "tp"
    assert msg.startswith("tp=3 is invalid: must be a tensor-parallel size for llama-3-70b "
                          "(64 attention heads, 8 KV heads)")
    assert msg.endswith("one of 1, 2, 4, 8, 16, 32, 64")
    assert check_tp(s70, 16) == 16 and kv_replication(s70, 16) == 2  # each KV head on 2 GPUs
    assert kv_replication(s70, 4) == 1
    for bad in (0, -1, 128, 2.0, True):
        with pytest.raises(ParameterError, match=r"^tp="):
            check_tp(s70, bad)
    q7 = dense_shape("qwen2.5-7b")  # 28 heads, 4 KV heads
    assert valid_tps(q7) == (1, 2, 4, 28)
    with pytest.raises(ParameterError, match=r"tp=7 .* one of 1, 2, 4, 28$"):
        check_tp(q7, 7)
    assert valid_tps(model_shape("falcon-7b")) == (1, 71)  # MQA: the one KV head replicates
    assert check_tp(CAT.model("llama-3-8b"), 8) == 8  # the catalog's own shape works too
    assert 40 in valid_tps(model_shape("qwen3-14b")) and 16 not in valid_tps(model_shape("qwen3-14b"))


def test_shape_is_validated():
    s = model_shape("llama-3-8b")
    with pytest.raises(ParameterError, match="intermediate=-1"):
        ModelShape(**{**s.__dict__, "intermediate": -1})
    with pytest.raises(ParameterError, match="attention='x'"):
        ModelShape(**{**s.__dict__, "attention": "x"})
