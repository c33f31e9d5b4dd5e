"""One model-shape class (servesim.hardware.shape.ModelShape): both readers build it, one set of names,
derived figures computed one way, one validation."""

from __future__ import annotations

import dataclasses

import pytest

from servesim._checks import ParameterError
from servesim.hardware import model_config, roofline
from servesim.hardware.model_config import dense_params, find_architecture, read_config
from servesim.hardware.names import model_shape
from servesim.hardware.precision import weight_bytes
from servesim.hardware.shape import ModelShape

from .test_names import FIXTURES

SAME = ("layers", "hidden", "heads", "kv_heads", "head_dim", "vocab", "attention", "experts",
        "experts_per_token", "moe_intermediate", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
        "v_head_dim")


def _arch(name: str) -> ModelShape:
    a = find_architecture(name)
    assert a is not None, name
    return a


def test_one_class_one_name_per_quantity() -> None:
    """The catalog and the config.json reader (a dense and an MoE config) give the same class;
    the old classes and the second names of a quantity are gone."""
    shapes = (model_shape("llama-3-8b"), read_config(FIXTURES / "qwen3-32b.json"), _arch("deepseek-r1"))
    assert {type(s) for s in shapes} == {ModelShape}
    assert not hasattr(roofline, "ModelSpec") and not hasattr(model_config, "Architecture")
    fields = {f.name for f in dataclasses.fields(ModelShape)}
    assert {"hidden", "vocab", "intermediate", "moe_intermediate"} <= fields
    for gone in ("hidden_size", "vocab_size", "dense_intermediate", "model_spec", "checkpoint_bytes",
                 "head_params", "input_embedding_params"):
        assert not hasattr(shapes[2], gone), gone


@pytest.mark.parametrize("name", ["mixtral-8x7b", "deepseek-v3"])
def test_catalog_and_config_readers_agree(name: str) -> None:
    """A model in both the catalog (models.toml: counts, no layers) and the shipped configs (per layer)
    has the same shape, the same KV cache per token, and parameters within the catalog's rounding."""
    cat, cfg = model_shape(name), _arch(name)
    assert not cat.layer_moe and len(cfg.layer_moe) == cfg.layers  # per-layer detail only from config.json
    assert {f: getattr(cat, f) for f in SAME} == {f: getattr(cfg, f) for f in SAME}
    assert cat.kv_bytes_per_token(2.0) == cfg.kv_bytes_per_token(2.0)
    assert cat.params == pytest.approx(cfg.params, rel=1e-3)  # 46.7e9 and 671e9: three figures


def test_derived_figures_follow_the_breakdown() -> None:
    """Where the layers are known, params is the breakdown's sum, active params scale the routed experts
    by k / E, and dataclasses.replace derives them again (a value passed in is replaced)."""
    m = _arch("mixtral-8x7b")  # 32 MoE layers of 8 experts, 2 per token, 3 x 4096 x 14336 each
    expert = 3 * 4096 * 14336
    assert m.params == sum(m.breakdown().values())
    assert m.params - m.active_params == pytest.approx(32 * expert * (8 - 2), rel=1e-12)
    fewer = dataclasses.replace(m, experts=4, params=1.0)
    # four experts fewer in each layer, and four router columns of 4096 fewer
    assert m.params - fewer.params == 32 * 4 * (expert + 4096)
    assert fewer.params - fewer.active_params == pytest.approx(32 * expert * (4 - 2), rel=1e-12)
    assert m.weight_bytes() == pytest.approx(m.weight_bytes("bf16"), rel=1e-12) == pytest.approx(2 * m.params)


def test_kv_without_per_layer_detail_counts_every_layer() -> None:
    """A catalog shape holds KV in every layer (2 x layers x kv_heads x head_dim x bytes); the same shape
    told that half its layers are gated delta nets holds half, and a window caps a layer's share."""
    s = model_shape("llama-3-8b")  # 32 layers, 8 KV heads of 128
    assert s.kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2 == s.kv_bytes_per_token(2.0, context=10**6)
    windowed = dataclasses.replace(s, sliding_window=1024, layer_windows=(1024, 0) * 16)
    assert windowed.kv_bytes_per_token(2.0, context=4096) == pytest.approx(2 * 8 * 128 * 2 * (16 + 16 / 4))
    assert windowed.kv_bytes_per_token(2.0, context=1024) == s.kv_bytes_per_token()


def test_one_validation_names_the_field() -> None:
    s = model_shape("llama-3-8b")
    bad = (({"layer_moe": (True,)}, "layer_moe"), ({"layer_windows": (0, 0)}, "layer_windows"),
           ({"kv_heads": 3}, "kv_heads"), ({"hidden": 0}, "hidden"), ({"family": "x"}, "family"),
           ({"params": 1e6}, "params"), ({"experts": 0, "experts_per_token": 1}, "experts_per_token"))
    for change, field in bad:
        with pytest.raises(ParameterError) as info:
            dataclasses.replace(s, **change)
        assert info.value.name == field, change
    with pytest.raises(ParameterError, match="moe_intermediate"):  # a MoE layer needs an expert width
        dataclasses.replace(_arch("mixtral-8x7b"), moe_intermediate=0)


def test_weight_bytes_by_dtype_one_method() -> None:
    """Weights in a dtype: the catalog's shape keeps its two embedding tables in bf16 and the rest in the
    dtype (precision.weight_bytes is this method, after reading the user's spelling); a shape with its
    layers known keeps norms, router and tables in bf16 and only the quantized parts in the dtype."""
    s = model_shape("llama-3-8b")  # untied: 2 tables of 128,256 x 4,096
    tables = 2 * 128256 * 4096
    assert s.weight_bytes("fp8") == 2 * tables + (s.params - tables) * 1 == weight_bytes(s, "FP8")
    assert s.weight_bytes("bf16") == 2 * s.params == s.weight_bytes()
    m = _arch("mixtral-8x7b")
    linear = sum(m.linear_counts().values())
    assert m.weight_bytes("fp8") == pytest.approx(linear * 1 + (m.params - linear) * 2, rel=1e-12)


def test_one_parameter_formula_for_dense_layers() -> None:
    """architectures.dense_params (a dense family's count in the config.json reader) is the breakdown
    of dense layers: a two-layer MQA model with a plain MLP, Q/K/V biases and MLP biases, counted by hand."""
    n = dense_params(layers=2, hidden=8, heads=2, kv_heads=1, head_dim=4, intermediate=16, vocab=10,
                     tied_embeddings=False, gated_mlp=False, qkv_bias=True, mlp_bias=True)
    tables = 10 * 8 * 2
    attention = 8 * 8 + 2 * 8 * 4 + 8 * 8 + (8 + 2 * 4)  # Q, K, V, O and the Q, K, V biases
    mlp = 2 * 8 * 16 + (16 + 8)  # up, down and their biases
    assert n == tables + 2 * (attention + mlp + 2 * 8) + 8 == 1176
    assert dense_params(layers=2, hidden=8, heads=2, kv_heads=1, head_dim=4, intermediate=16, vocab=10,
                        tied_embeddings=True, o_bias=True, qkv_bias=True) == (
        10 * 8 + 2 * (8 * 8 + 2 * 8 * 4 + 8 * 8 + (8 + 2 * 4 + 8) + 3 * 8 * 16 + 2 * 8) + 8)


def test_roofline_prices_the_kv_cache_the_shape_holds() -> None:
    """The roofline reads the shape's KV per token: a gated-delta-net layer holds none (Qwen3.5-27B: 16
    full-attention layers of 64, 4 KV heads of 256) and a DSA layer adds its indexer key (DeepSeek-V3.2:
    128 FP8 values and one FP32 scale), as the MoE step model counts them."""
    q = _arch("Qwen/Qwen3.5-27B")
    assert q.kv_bytes_per_token() == 16 * 2 * 4 * 256 * 2
    cost = roofline.decode_cost(q, tp=1, batch=1, context_tokens=1000)
    assert cost.kv_bytes == (1000 + 1) * 16 * 2 * 4 * 256 * 2  # read 1,000 cached tokens, write one
    ds = _arch("deepseek-ai/DeepSeek-V3.2")
    assert ds.kv_bytes_per_token() == 61 * ((512 + 64) * 2 + 128 + 4)
