"""Shapes from Hugging Face config.json files, every family by one reader (hardware.model_config)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from servesim._checks import InputError, ParameterError
from servesim.hardware.dtypes import BYTES_PER_VALUE
from servesim.hardware.model_config import find_architecture, read_config, shipped_ids
from servesim.hardware.shape import CHECKPOINT_DTYPES, LINEAR_PARTS, MOE_FAMILIES, ModelShape

DATA = Path(__file__).resolve().parents[2] / "src" / "servesim" / "data" / "model_configs"


def _arch(name: str) -> ModelShape:
    arch = find_architecture(name)
    assert arch is not None, name
    return arch


def _config(hf_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{hf_id.replace('/', '--')}_config.json").read_text())
    return data


def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


# --------------------------------------------------------------------------- shipped configs

EXPECTED = {  # hf id -> (family, attention, checkpoint dtype, quantization scope)
    "deepseek-ai/DeepSeek-V3": ("deepseek_v3", "mla", "fp8_block", "all_linear"),
    "deepseek-ai/DeepSeek-R1": ("deepseek_v3", "mla", "fp8_block", "all_linear"),
    "nvidia/DeepSeek-V3.1-NVFP4": ("deepseek_v3", "mla", "fp4", "partial"),
    "moonshotai/Kimi-K2-Instruct": ("deepseek_v3", "mla", "fp8_block", "all_linear"),
    "moonshotai/Kimi-K2.5": ("deepseek_v3", "mla", "int4", "experts"),
    "Qwen/Qwen3-235B-A22B": ("qwen3_moe", "gqa", "bf16", "all_linear"),
    "Qwen/Qwen3-235B-A22B-FP8": ("qwen3_moe", "gqa", "fp8_block", "all_linear"),
    "nvidia/Qwen3-235B-A22B-NVFP4": ("qwen3_moe", "gqa", "fp4", "all_linear"),
    "Qwen/Qwen3-30B-A3B": ("qwen3_moe", "gqa", "bf16", "all_linear"),
    "openai/gpt-oss-120b": ("gpt_oss", "gqa", "mxfp4", "experts"),
    "openai/gpt-oss-20b": ("gpt_oss", "gqa", "mxfp4", "experts"),
    "MiniMaxAI/MiniMax-M2.5": ("minimax_m2", "gqa", "fp8_block", "all_linear"),
    "mistralai/Mixtral-8x7B-v0.1": ("mixtral", "gqa", "bf16", "all_linear"),
    "mistralai/Mixtral-8x22B-v0.1": ("mixtral", "gqa", "bf16", "all_linear"),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": ("llama4", "gqa", "bf16", "all_linear"),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": ("llama4", "gqa", "bf16", "all_linear"),
    # the 2026 attention kinds (tests/hardware/test_linear_attention.py, test_sparse_attention.py)
    "Qwen/Qwen3.5-397B-A17B": ("qwen3_5_moe", "gqa", "bf16", "all_linear"),
    "Qwen/Qwen3.5-122B-A10B": ("qwen3_5_moe", "gqa", "bf16", "all_linear"),
    "Qwen/Qwen3.5-35B-A3B": ("qwen3_5_moe", "gqa", "bf16", "all_linear"),
    "Qwen/Qwen3.5-27B": ("qwen3_5", "gqa", "bf16", "all_linear"),
    "deepseek-ai/DeepSeek-V3.2": ("deepseek_v3", "mla", "fp8_block", "all_linear"),
    "nvidia/DeepSeek-V3.2-NVFP4": ("deepseek_v3", "mla", "fp4", "partial"),
    "nvidia/GLM-5-NVFP4": ("deepseek_v3", "mla", "fp4", "partial"),
}


def test_every_shipped_config_is_expected_and_has_its_notice() -> None:
    assert sorted(shipped_ids()) == sorted(EXPECTED)
    assert (DATA / "NOTICE.md").is_file()
    assert (DATA / "LICENSE-aiconfigurator-Apache-2.0.txt").is_file()
    notice = (DATA / "NOTICE.md").read_text()
    for f in DATA.glob("*.json"):
        assert f"`{f.name}`" in notice


@pytest.mark.parametrize("hf_id", sorted(EXPECTED))
def test_every_shipped_config_parses(hf_id: str) -> None:
    arch = _arch(hf_id)
    family, attention, dtype, scope = EXPECTED[hf_id]
    got = (arch.family, arch.attention, arch.checkpoint_dtype, arch.quant_scope)
    assert got == (family, attention, dtype, scope)
    assert arch.family in MOE_FAMILIES and arch.checkpoint_dtype in CHECKPOINT_DTYPES
    assert arch.hf_id == hf_id and arch.source.endswith("_config.json")
    assert len(arch.layer_moe) == len(arch.layer_windows) == arch.layers
    assert arch.params == sum(arch.breakdown().values())
    assert set(arch.quantized_parts or ()) <= set(LINEAR_PARTS)
    if not arch.moe_layers:  # Qwen3.5's dense hybrids: no experts, every parameter active
        assert arch.experts == arch.experts_per_token == 0 and arch.active_params == arch.params
        return
    assert arch.experts > 1 and 1 <= arch.experts_per_token < arch.experts
    assert arch.embedding_params < arch.active_matmul_params < arch.active_params < arch.params
    assert "experts" in (arch.quantized_parts or ())
    assert arch.weight_bytes("bf16") == pytest.approx(2 * arch.params)
    assert arch.kv_bytes_per_token(2.0) > 0
    assert find_architecture(hf_id.lower()) == arch == find_architecture(hf_id.upper())
    assert read_config(arch.source) == arch


# --------------------------------------------------------------------------- published totals

# (hf id, property, published count, tolerance, where it is published).  The tolerance is half a
# unit in the last digit the publisher gave (671e9 -> +-0.5e9): a correct count rounds to the
# published one.  Publishers differ on whether the input embedding table is "active": Mistral, Meta
# and Qwen count it (active_params, servesim's convention), DeepSeek, OpenAI, Moonshot and MiniMax
# do not (active_matmul_params).  Each row uses the publisher's own convention; for DeepSeek only
# that one rounds to 37e9 (36.6e9; 37.6e9 with the table).  Looser rows say why.
PUBLISHED = [
    ("deepseek-ai/DeepSeek-V3", "params", 671e9, 0.5e9, "DeepSeek-V3 report: 671B (main model, no MTP)"),
    ("deepseek-ai/DeepSeek-V3", "active_matmul_params", 37e9, 0.5e9, "DeepSeek-V3 report: 37B activated"),
    ("Qwen/Qwen3-235B-A22B", "params", 235e9, 0.5e9, "Qwen3 model card: 235B"),
    ("Qwen/Qwen3-235B-A22B", "active_params", 22e9, 0.5e9, "Qwen3 model card: 22B activated"),
    ("Qwen/Qwen3-30B-A3B", "params", 30.5e9, 0.05e9, "Qwen3 model card: 30.5B"),
    # 3.353e9 is given as 3.3B (truncated, not rounded): 2% covers it
    ("Qwen/Qwen3-30B-A3B", "active_params", 3.3e9, 0.066e9, "Qwen3 model card: 3.3B activated"),
    ("openai/gpt-oss-120b", "params", 116.83e9, 0.005e9, "gpt-oss model card: 116.83B"),
    ("openai/gpt-oss-120b", "active_matmul_params", 5.13e9, 0.005e9, "gpt-oss model card: 5.13B active"),
    ("openai/gpt-oss-20b", "params", 20.91e9, 0.005e9, "gpt-oss model card: 20.91B"),
    ("openai/gpt-oss-20b", "active_matmul_params", 3.61e9, 0.005e9, "gpt-oss model card: 3.61B active"),
    ("mistralai/Mixtral-8x7B-v0.1", "params", 46.7e9, 0.05e9, "Mixtral paper: 46.7B (47B)"),
    ("mistralai/Mixtral-8x7B-v0.1", "active_params", 12.9e9, 0.05e9, "Mixtral paper: 12.9B (13B) active"),
    ("moonshotai/Kimi-K2-Instruct", "params", 1.0e12, 0.05e12, "Kimi K2: 1T total"),
    ("moonshotai/Kimi-K2-Instruct", "active_matmul_params", 32e9, 0.5e9, "Kimi K2: 32B activated"),
    ("MiniMaxAI/MiniMax-M2.5", "params", 230e9, 5e9, "MiniMax-M2: 230B total"),
    ("MiniMaxAI/MiniMax-M2.5", "active_matmul_params", 10e9, 0.5e9, "MiniMax-M2: 10B active"),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "active_params", 17e9, 0.5e9, "Llama 4: 17B active"),
    # Meta's totals (109B, 400B) include the vision encoder, which is not modelled: 2%
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "params", 109e9, 2.2e9, "Llama 4: 109B total"),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "params", 400e9, 8e9, "Llama 4: 400B total"),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "active_params", 17e9, 0.5e9, "Llama 4: 17B active"),
]


@pytest.mark.parametrize(("hf_id", "prop", "published", "tol", "where"), PUBLISHED,
                         ids=[f"{r[0]}-{r[1]}" for r in PUBLISHED])
def test_parameter_counts_match_the_published_ones(hf_id: str, prop: str, published: float, tol: float,
                                                    where: str) -> None:
    value = getattr(_arch(hf_id), prop)
    assert abs(value - published) <= tol, f"{hf_id} {prop} = {value:,.0f}, published {where}"


def test_exact_counts_of_the_checkpoints() -> None:
    # Mixtral-8x7B's safetensors hold 46,702,792,704 parameters (the catalog's source line)
    assert _arch("mistralai/Mixtral-8x7B-v0.1").params == 46_702_792_704
    # DeepSeek-V3 by hand: 61 layers of MLA + 3 dense + 58 MoE layers, embeddings, final norm
    h, H, V = 7168, 128, 129280
    attn = h * 1536 + 1536 + 1536 * H * 192 + h * 576 + 512 + 512 * H * 256 + H * 128 * h
    moe = 256 * 3 * h * 2048 + 3 * h * 2048 + h * 256 + 256
    dense = 3 * h * 18432
    total = 2 * V * h + 61 * (attn + 2 * h) + 3 * dense + 58 * moe + h
    assert _arch("deepseek-ai/DeepSeek-V3").params == total == 671_026_419_200
    active = total - 58 * (256 - 8) * 3 * h * 2048
    assert _arch("deepseek-ai/DeepSeek-V3").active_params == active
    # the MTP module: one more MoE layer, eh_proj (2h x h) and three norms (11.6e9).  The checkpoint
    # also stores copies of the embedding and head in it (2 V h) and one FP32 scale per 128 x 128
    # block of every FP8 matrix (~0.04e9): 684.5e9 tensor elements, the "685B" of the model card
    mtp = attn + 2 * h + moe + 2 * h * h + 3 * h
    assert _arch("deepseek-ai/DeepSeek-V3").mtp_params == mtp
    assert abs(total + mtp + 2 * V * h - 685e9) <= 1e9


# --------------------------------------------------------------------------- DeepSeek / MLA


def test_deepseek_v3_mla_kv_and_layers() -> None:
    ds = _arch("deepseek-ai/DeepSeek-V3")
    assert ds.layer_moe == (False,) * 3 + (True,) * 58
    assert (ds.moe_layers, ds.dense_layers) == (58, 3)
    assert (ds.q_lora_rank, ds.kv_lora_rank, ds.qk_nope_head_dim, ds.qk_rope_head_dim, ds.v_head_dim) == (
        1536, 512, 128, 64, 128)
    assert (ds.experts, ds.experts_per_token, ds.moe_intermediate) == (256, 8, 2048)
    assert ds.intermediate == 18432
    assert (ds.shared_experts, ds.shared_intermediate, ds.mtp_layers) == (1, 2048, 1)
    assert ds.kv_heads == 1 and ds.layer_windows == (0,) * 61
    # one latent of 512 + the 64-wide RoPE key per layer, one copy for all 128 heads
    assert ds.kv_bytes_per_token(2) == 61 * (512 + 64) * 2 == 70_272
    assert ds.kv_bytes_per_token(1) == 61 * 576
    assert ds.kv_bytes_per_token(2, context=100_000) == 70_272  # no window: context changes nothing


def test_deepseek_fp8_block_weight_bytes() -> None:
    ds = _arch("deepseek-ai/DeepSeek-V3")
    b = ds.breakdown()
    bf16_parts = b["embed"] + b["lm_head"] + b["norms"] + b["router"] + b["biases"]
    linear = ds.params - bf16_parts
    assert ds.weight_bytes() == pytest.approx(linear * (1 + 4 / 16384) + 2 * bf16_parts)
    assert 670e9 < ds.weight_bytes() < 676e9


def test_deepseek_v31_nvfp4_keeps_the_attention_down_projections_in_bf16() -> None:
    # hf_quant_config.json excludes q_a, q_b, kv_a, kv_b in every layer (not o_proj) and layer 61 (MTP)
    nv = _arch("nvidia/DeepSeek-V3.1-NVFP4")
    assert nv.checkpoint_dtype == "fp4"
    assert nv.quantized_parts == ("o_proj", "experts", "shared_experts", "dense_mlp")
    b = nv.breakdown()
    fp4 = b["o_proj"] + b["experts"] + b["shared_experts"] + b["dense_mlp"]
    assert nv.weight_bytes("fp4") == pytest.approx(fp4 * (0.5 + 1 / 16) + (nv.params - fp4) * 2)
    ds = _arch("deepseek-ai/DeepSeek-V3")
    assert dataclass_shape(nv) == dataclass_shape(ds)


def dataclass_shape(a: ModelShape) -> tuple[object, ...]:
    return (a.layers, a.hidden, a.vocab, a.heads, a.kv_lora_rank, a.layer_moe, a.experts, a.params)


def test_kimi_k25_nested_text_config_and_int4_experts() -> None:
    k25 = _arch("moonshotai/Kimi-K2.5")
    assert _config("moonshotai/Kimi-K2.5")["architectures"] == ["KimiK25ForConditionalGeneration"]
    assert (k25.family, k25.attention, k25.layers, k25.hidden) == ("deepseek_v3", "mla", 61, 7168)
    assert k25.heads == 64
    assert (k25.experts, k25.experts_per_token, k25.shared_experts, k25.mtp_layers) == (384, 8, 1, 0)
    assert k25.layer_moe == (False,) + (True,) * 60
    # compressed-tensors int4 groups of 32; ignore: lm_head, self_attn, shared_experts, dense MLPs
    assert (k25.checkpoint_dtype, k25.quantized_parts) == ("int4", ("experts",))
    b = k25.breakdown()
    int4 = b["experts"] * (0.5 + 2 / 32) + (k25.params - b["experts"]) * 2
    assert k25.weight_bytes() == pytest.approx(int4)
    k2 = _arch("moonshotai/Kimi-K2-Instruct")
    assert dataclass_shape(k2) == dataclass_shape(k25)
    assert k2.checkpoint_dtype == "fp8_block"
    assert k25.kv_bytes_per_token(2) == 61 * 576 * 2


# --------------------------------------------------------------------------- GQA families


def test_gpt_oss_120b_windows_experts_sinks_mxfp4() -> None:
    g = _arch("openai/gpt-oss-120b")
    assert g.layer_windows == (128, 0) * 18 and g.sliding_window == 128
    assert (g.experts, g.experts_per_token, g.moe_intermediate) == (128, 4, 2880)
    assert g.attention_sinks and g.attention_bias and g.layer_moe == (True,) * 36
    assert (g.checkpoint_dtype, g.quantized_parts, g.quant_scope) == ("mxfp4", ("experts",), "experts")
    per_layer = 2 * 8 * 64  # K and V, 8 heads of 64
    assert g.kv_bytes_per_token(2) == 36 * per_layer * 2 == 73_728
    assert g.kv_bytes_per_token(2, context=128) == 73_728
    L = 131_072
    assert g.kv_bytes_per_token(2, context=L) == pytest.approx((18 + 18 * 128 / L) * per_layer * 2)
    # MXFP4 experts (4 bits + an E8M0 scale per 32), the rest bf16: about the 65 GB download
    b = g.breakdown()
    assert g.weight_bytes() == pytest.approx(b["experts"] * (0.5 + 1 / 32) + (g.params - b["experts"]) * 2)
    assert 64e9 < g.weight_bytes() < 66e9


def test_llama4_chunked_attention_and_interleaved_moe() -> None:
    scout = _arch("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    mav = _arch("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    # default no_rope_layers: every 4th layer NoPE with full attention, the others chunks of 8192
    windows = (8192, 8192, 8192, 0) * 12
    assert scout.layer_windows == mav.layer_windows == windows
    assert scout.attention_chunk == 8192 and scout.sliding_window == 0
    assert scout.layer_moe == (True,) * 48 and (scout.experts, scout.experts_per_token) == (16, 1)
    assert mav.layer_moe == (False, True) * 24 and mav.intermediate == 16384
    assert (mav.shared_experts, mav.shared_intermediate) == (1, 8192)
    per_layer = 2 * 8 * 128
    assert scout.kv_bytes_per_token(2) == 48 * per_layer * 2
    L = 65_536
    assert scout.kv_bytes_per_token(2, context=L) == pytest.approx((12 + 36 * 8192 / L) * per_layer * 2)


def test_qwen3_minimax_mixtral_shapes_and_kv() -> None:
    q = _arch("Qwen/Qwen3-235B-A22B")
    assert (q.layers, q.experts, q.experts_per_token, q.moe_intermediate) == (94, 128, 8, 1536)
    assert q.shared_experts == 0 and q.qk_norm == "per_head"
    assert q.kv_bytes_per_token(2) == 94 * 2 * 4 * 128 * 2
    m = _arch("MiniMaxAI/MiniMax-M2.5")
    assert (m.experts, m.experts_per_token, m.qk_norm) == (256, 8, "per_layer")
    assert m.router_bias and m.mtp_layers == 3
    assert m.layer_windows == (0,) * 62 and m.kv_bytes_per_token(2) == 62 * 2 * 8 * 128 * 2
    x = _arch("mistralai/Mixtral-8x7B-v0.1")
    assert x.kv_bytes_per_token(2) == 32 * 2 * 8 * 128 * 2 == 131_072
    # fp8 for every linear layer; embeddings (2 x 32000 x 4096), norms and router stay bf16
    bf16 = 2 * 32000 * 4096 + 32 * 2 * 4096 + 4096 + 32 * 4096 * 8
    assert x.weight_bytes("fp8") == (x.params - bf16) * 1 + bf16 * 2
    assert x.weight_bytes("FP4") == pytest.approx((x.params - bf16) * 0.5625 + bf16 * 2)
    qf = _arch("Qwen/Qwen3-235B-A22B-FP8")
    assert qf.quantized_parts == ("q_proj", "k_proj", "v_proj", "o_proj", "experts")


def test_bytes_per_value() -> None:
    assert BYTES_PER_VALUE == {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1 + 4 / (128 * 128),
                               "fp4": 0.5 + 1 / 16, "mxfp4": 0.5 + 1 / 32, "mxfp4_mxfp8": 0.5 + 1 / 32,
                               "int4": 0.5 + 2 / 32}


def test_one_bytes_per_value_table() -> None:
    """Every pricer reads the same table (servesim.hardware.dtypes): the copies once disagreed on
    fp8_block (1.0 against 1 + 4/128^2) and int4 (0.515625 against Kimi-K2.5's groups of 32)."""
    from servesim.hardware import dtypes, moe_step, precision

    assert precision.BYTES_PER_VALUE is dtypes.BYTES_PER_VALUE
    assert moe_step.BYTES_PER_VALUE is dtypes.BYTES_PER_VALUE
    assert not hasattr(moe_step, "MOE_DTYPES")  # the copy that was


def test_parameters_are_checked() -> None:
    g = _arch("gpt-oss-120b")
    with pytest.raises(ParameterError, match="kv_dtype_bytes"):
        g.kv_bytes_per_token(0)
    with pytest.raises(ParameterError, match="context"):
        g.kv_bytes_per_token(2, context=0)
    with pytest.raises(ParameterError, match="dtype='fp16'"):
        g.weight_bytes("fp16")
    with pytest.raises(ParameterError, match="experts_per_token"):
        ModelShape(name="x", hf_id="", family="mixtral", layers=1, hidden=8, vocab=8, tied_embeddings=False,
                   attention="mqa", heads=2, kv_heads=1, head_dim=4, layer_windows=(0,), layer_moe=(True,),
                   experts=2, experts_per_token=3, moe_intermediate=8)
    with pytest.raises(ParameterError, match="family"):
        ModelShape(name="x", hf_id="", family="llama", layers=1, hidden=8, vocab=8, tied_embeddings=False,
                   attention="mqa", heads=2, kv_heads=1, head_dim=4, layer_windows=(0,), layer_moe=(True,),
                   experts=2, experts_per_token=1, moe_intermediate=8)


# --------------------------------------------------------------------------- names

ALIASES = {
    "deepseek-ai/DeepSeek-R1-0528": ("deepseek-ai/DeepSeek-R1", "fp8_block"),
    "deepseek-ai/DeepSeek-V3-0324": ("deepseek-ai/DeepSeek-V3", "fp8_block"),
    "deepseek-ai/DeepSeek-V3.1": ("deepseek-ai/DeepSeek-V3", "fp8_block"),
    "deepseek-r1": ("deepseek-ai/DeepSeek-R1", "fp8_block"),
    "DeepSeek-V3": ("deepseek-ai/DeepSeek-V3", "fp8_block"),
    "deepseek-v3.1-nvfp4": ("nvidia/DeepSeek-V3.1-NVFP4", "fp4"),
    "kimi-k2.5": ("moonshotai/Kimi-K2.5", "int4"),
    "kimi-k2": ("moonshotai/Kimi-K2-Instruct", "fp8_block"),
    "moonshotai/Kimi-K2-Instruct-0905": ("moonshotai/Kimi-K2-Instruct", "fp8_block"),
    "gpt-oss-120b": ("openai/gpt-oss-120b", "mxfp4"),
    "qwen3-235b-a22b": ("Qwen/Qwen3-235B-A22B", "bf16"),
    "qwen3-235b-a22b-fp8": ("Qwen/Qwen3-235B-A22B-FP8", "fp8_block"),
    "Qwen/Qwen3-235B-A22B-Instruct-2507": ("Qwen/Qwen3-235B-A22B", "bf16"),
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": ("Qwen/Qwen3-235B-A22B-FP8", "fp8_block"),
    "qwen/qwen3-30b-a3b-fp8": ("Qwen/Qwen3-30B-A3B", "fp8_block"),
    "minimax-m2.5": ("MiniMaxAI/MiniMax-M2.5", "fp8_block"),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": ("mistralai/Mixtral-8x7B-v0.1", "bf16"),
    "mixtral-8x7b": ("mistralai/Mixtral-8x7B-v0.1", "bf16"),
    "llama-4-scout": ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "bf16"),
    " META-LLAMA/llama-4-scout-17b-16e-instruct ": ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "bf16"),
}


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_aliases_resolve(alias: str) -> None:
    base_id, dtype = ALIASES[alias]
    arch, base = _arch(alias), _arch(base_id)
    assert dataclass_shape(arch) == dataclass_shape(base)
    assert arch.checkpoint_dtype == dtype
    if "/" in alias and alias.strip().lower() != base_id.lower():
        assert arch.hf_id.lower() == alias.strip().lower()  # its own id (canonical case)


def test_unknown_names_are_none() -> None:
    for name in ("", "deepseek-v2", "meta-llama/Llama-3.1-8B", "gpt-oss", "deepseek-ai/DeepSeek-V2.5"):
        assert find_architecture(name) is None, name
    with pytest.raises(ParameterError, match="name"):
        find_architecture(3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- a user's config


def test_a_users_own_config(tmp_path: Path) -> None:
    data = _config("deepseek-ai/DeepSeek-V3")
    data |= {"num_hidden_layers": 30, "first_k_dense_replace": 1, "n_routed_experts": 64,
             "_name_or_path": "me/Small-V3"}
    del data["quantization_config"]
    path = _write(tmp_path / "small-v3" / "config.json", data)
    for arch in (read_config(path), read_config(path.parent), find_architecture(str(path)),
                 find_architecture(str(path.parent))):
        assert arch is not None
        assert (arch.layers, arch.experts, arch.moe_layers, arch.checkpoint_dtype) == (30, 64, 29, "bf16")
        assert (arch.name, arch.hf_id, arch.source) == ("small-v3", "me/Small-V3", str(path))
        assert arch.kv_bytes_per_token(2) == 30 * 576 * 2
    # a ModelOpt checkpoint's hf_quant_config.json beside its config.json
    quant = tmp_path / "nvfp4"
    shutil.copy(DATA / "nvidia--DeepSeek-V3.1-NVFP4_config.json", _write(quant / "config.json", {}))
    shutil.copy(DATA / "nvidia--DeepSeek-V3.1-NVFP4_hf_quant_config.json", quant / "hf_quant_config.json")
    assert read_config(quant).quantized_parts == _arch("nvidia/DeepSeek-V3.1-NVFP4").quantized_parts
    assert find_architecture(str(quant / "config.json")) is not None


def test_a_users_gqa_config_with_its_own_layer_types(tmp_path: Path) -> None:
    data = _config("openai/gpt-oss-20b")
    data["layer_types"] = ["full_attention"] * 24
    arch = read_config(_write(tmp_path / "config.json", data))
    assert arch.layer_windows == (0,) * 24 and arch.kv_bytes_per_token(1, context=10**6) == 24 * 2 * 8 * 64


# --------------------------------------------------------------------------- bad input


def _error(tmp_path: Path, data: object, *fragments: str) -> None:
    path = tmp_path / "bad" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    with pytest.raises(InputError) as err:
        read_config(path)
    message = str(err.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message


def test_unknown_architecture(tmp_path: Path) -> None:
    dense = ("llama", "mistral", "qwen2", "qwen3", "LlamaForCausalLM", "Qwen2ForCausalLM")
    falcon = {"architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 4544}
    _error(tmp_path, falcon, "'architectures'", "FalconForCausalLM", *MOE_FAMILIES, *dense)
    _error(tmp_path, {"model_type": "deepseek_v2"}, "'model_type'", "deepseek_v2", "deepseek_v3", *dense)
    _error(tmp_path, {"hidden_size": 8, "num_experts": 8}, "missing required field 'architectures'",
           *MOE_FAMILIES, *dense)
    # neither field and no experts: a Llama-style dense decoder, its own fields then required
    _error(tmp_path, {"hidden_size": 8}, "missing required field 'num_hidden_layers'")


def test_missing_and_bad_fields(tmp_path: Path) -> None:
    ds = _config("deepseek-ai/DeepSeek-V3")
    _error(tmp_path, {k: v for k, v in ds.items() if k != "kv_lora_rank"},
           "missing required field 'kv_lora_rank'")
    _error(tmp_path, ds | {"num_experts_per_tok": 300}, "'num_experts_per_tok' = 300", "n_routed_experts")
    _error(tmp_path, ds | {"hidden_size": "7168"}, "'hidden_size' = '7168'", "integer")
    _error(tmp_path, ds | {"quantization_config": {"quant_method": "gptq"}},
           "'quantization_config.quant_method' = 'gptq'", "not supported")
    k25 = _config("moonshotai/Kimi-K2.5")
    k25["text_config"] = {k: v for k, v in k25["text_config"].items() if k != "hidden_size"}
    _error(tmp_path, k25, "missing required field 'text_config.hidden_size'")
    no_text = {k: v for k, v in k25.items() if k != "text_config"}
    _error(tmp_path, no_text, "missing required field 'text_config'")
    oss = _config("openai/gpt-oss-20b")
    _error(tmp_path, oss | {"layer_types": ["sliding_attention"] * 3}, "'layer_types'", "24 of them")
    _error(tmp_path, oss | {"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.mlp.experts"]}}, "leaves the routed experts unquantized")


def test_files_that_are_not_configs(tmp_path: Path) -> None:
    _error(tmp_path, '{"architectures": ["MixtralForCausalLM"], ', "not valid JSON")
    _error(tmp_path, "[1, 2]", "must be a JSON object")
    with pytest.raises(InputError, match="no such file"):
        read_config(tmp_path / "missing" / "config.json")
    with pytest.raises(InputError, match="no such file"):
        find_architecture(str(tmp_path / "missing.json"))


@pytest.mark.parametrize(("name", "family", "dtype"), [
    ("nvidia/DeepSeek-R1-0528-FP4-v2", "deepseek_v3", "fp4"),
    ("nvidia/DeepSeek-R1-FP4", "deepseek_v3", "fp4"),
    ("nvidia/Qwen3-235B-A22B-FP4", "qwen3_moe", "fp4"),
    ("RedHatAI/Qwen3-235B-A22B-Instruct-2507-FP8-dynamic", "qwen3_moe", "fp8"),
    ("someone/MiniMax-M2.5-AWQ", "minimax_m2", "int4"),
])
def test_a_quantized_repackaging_is_its_base_model_in_the_checkpoints_dtype(name, family, dtype):
    from servesim.hardware.model_config import find_architecture

    arch = find_architecture(name)
    base = find_architecture(name.rpartition("/")[2].rsplit("-", 2 if name.endswith("-v2") or
                                                              name.endswith("-dynamic") else 1)[0])
    assert arch is not None and base is not None
    assert (arch.family, arch.checkpoint_dtype, arch.hf_id) == (family, dtype, name)
    assert (arch.layers, arch.experts, arch.hidden) == (base.layers, base.experts, base.hidden)
    if family == "deepseek_v3" and dtype == "fp4":  # as nvidia/DeepSeek-V3.1-NVFP4's hf_quant_config
        assert arch.quantized_parts == find_architecture("nvidia/DeepSeek-V3.1-NVFP4").quantized_parts
    assert find_architecture("someone/Unknown-Model-FP4") is None
