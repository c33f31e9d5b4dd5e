"""Re-released checkpoints resolve to their base shape with the release's own format and context,
and ``--dtype fp8`` names the FP8 release a model's publisher ships (block FP8 for Qwen3-MoE)."""

from __future__ import annotations

import pytest

from servesim.hardware.model_config import find_architecture
from servesim.hardware.pricer import moe_dtype


def test_kimi_k2_thinking_is_k2_with_int4_experts() -> None:
    k2 = find_architecture("moonshotai/Kimi-K2-Instruct")
    th = find_architecture("moonshotai/Kimi-K2-Thinking")
    assert th is not None and k2 is not None
    assert (th.layers, th.experts, th.kv_lora_rank) == (k2.layers, k2.experts, k2.kv_lora_rank)
    assert th.checkpoint_dtype == "int4" and th.quantized_parts == ("experts",)
    assert th.context_length == 262144
    # int4 experts (0.515625 B/value with group scales) against K2's block FP8 everywhere: the
    # checkpoint is well under K2's ~1.03 TB and above the experts' 4-bit floor
    experts = th.breakdown()["experts"]
    assert th.weight_bytes() < 0.6 * k2.weight_bytes()
    assert th.weight_bytes() > experts * 0.5


@pytest.mark.parametrize("name", ["Qwen/Qwen3-235B-A22B-Instruct-2507",
                                  "Qwen/Qwen3-235B-A22B-Thinking-2507-FP8",
                                  "Qwen/Qwen3-30B-A3B-Instruct-2507"])
def test_qwen3_2507_releases_serve_256k(name: str) -> None:
    a = find_architecture(name)
    assert a is not None and a.context_length == 262144
    base = find_architecture(name.split("-Instruct")[0].split("-Thinking")[0])
    assert base is not None and base.context_length == 40960


@pytest.mark.parametrize("name", ["nvidia/DeepSeek-R1-0528-FP4-V2", "nvidia/DeepSeek-R1-0528-NVFP4-v2",
                                  "nvidia/DeepSeek-R1-0528-NVFP4"])
def test_nvidia_fp4_releases_of_r1_0528_are_its_nvfp4_repackaging(name: str) -> None:
    """NVIDIA has published the same NVFP4 checkpoint as ``-FP4-V2`` and ``-NVFP4-v2`` (InferenceMAX's
    B200 and GB200 recipes name one each): both are R1-0528 with ModelOpt's NVFP4 parts."""
    base = find_architecture("deepseek-ai/DeepSeek-R1-0528")
    a = find_architecture(name)
    assert a is not None and base is not None
    assert (a.family, a.layers, a.experts) == ("deepseek_v3", base.layers, base.experts)
    assert a.checkpoint_dtype == "fp4"
    assert a.quantized_parts == ("o_proj", "experts", "shared_experts", "dense_mlp")


def test_fp8_means_the_publishers_fp8_release() -> None:
    qwen = find_architecture("Qwen/Qwen3-235B-A22B-Instruct-2507")  # a BF16 checkpoint
    assert qwen is not None and qwen.checkpoint_dtype == "bf16"
    assert moe_dtype("fp8", qwen, "h200") == "fp8_block"  # Qwen's -FP8 release: 128 x 128 blocks
    assert moe_dtype("auto", qwen, "h200") == "bf16"
    oss = find_architecture("openai/gpt-oss-120b")
    assert oss is not None and moe_dtype("fp8", oss, "h200") == "fp8"  # no block release: per-tensor
    mixtral = find_architecture("mistralai/Mixtral-8x7B-v0.1")
    assert mixtral is not None and moe_dtype("fp8", mixtral, "h100-sxm") == "fp8"


SPELLINGS = [("FP8", "fp8"), (" nvfp4 ", "fp4"), ("NVFP4", "fp4"), ("bfloat16", "bf16"), ("w4a16", "int4"),
             ("fp8-block", "fp8_block"), ("AUTO", "auto"), ("mxfp4", "mxfp4"), ("fp6", "fp6")]


@pytest.mark.parametrize(("typed", "meant"), SPELLINGS)
def test_dtypes_as_users_spell_them(typed: str, meant: str) -> None:
    from servesim.hardware.precision import normalize_dtype
    from servesim.hardware.pricer import Deployment

    assert normalize_dtype(typed) == meant
    assert Deployment("openai/gpt-oss-120b", "b200", 1, typed, "FP8").dtype == meant
    assert Deployment("openai/gpt-oss-120b", "b200", 1, typed, "FP8").kv_dtype == "fp8"


def test_fp4_is_gpt_oss_own_mxfp4_on_any_gpu_and_nvfp4_elsewhere_on_blackwell() -> None:
    from servesim._checks import ParameterError

    oss = find_architecture("openai/gpt-oss-120b")
    ds = find_architecture("deepseek-ai/DeepSeek-R1")
    assert oss is not None and ds is not None
    assert moe_dtype("fp4", oss, "b200") == moe_dtype("fp4", oss, "h100-sxm") == "mxfp4"
    assert moe_dtype("fp4", ds, "b200") == "fp4"
    with pytest.raises(ParameterError, match="Blackwell"):
        moe_dtype("fp4", ds, "h200")


@pytest.mark.parametrize("base, release", [("deepseek-ai/DeepSeek-R1-0528", "nvidia/DeepSeek-R1-0528-FP4-v2"),
                                           ("Qwen/Qwen3-235B-A22B", "nvidia/Qwen3-235B-A22B-NVFP4")])
def test_fp4_on_a_base_id_is_nvidias_nvfp4_release(base: str, release: str) -> None:
    """``--dtype fp4`` on the base id and the NVFP4 release's own id are one deployment: the same
    weights per GPU and the same step, with the projections the release keeps in BF16 priced from
    the BF16 GEMM table (DeepSeek: MLA's q_a/kv_a and q_b; o_proj is NVFP4)."""
    from servesim.hardware.moe_step import MoEStepModel, Parallelism

    a, r = find_architecture(base), find_architecture(release)
    assert a is not None and r is not None and r.checkpoint_dtype == "fp4"
    models = [MoEStepModel(x, "b200", Parallelism(8, 1, 1), dtype="fp4", kv_dtype="fp8") for x in (a, r)]
    assert models[0].weight_bytes_per_gpu == pytest.approx(models[1].weight_bytes_per_gpu, rel=1e-12)
    steps = [m.step(decode=16, context=1500) for m in models]
    assert steps[0].total_s == pytest.approx(steps[1].total_s, rel=1e-12)
    dtypes = {op.name: op.dtype for op in steps[0].ops if op.kind == "gemm"}
    if a.family == "deepseek_v3":
        assert dtypes["qkv_a proj"] == "bf16" and dtypes["q_b proj"] == "bf16"
        assert dtypes["o proj"] == "fp4"
    else:  # Qwen3's NVFP4 release quantizes every attention projection
        assert set(dtypes[n] for n in ("qkv proj", "o proj")) == {"fp4"}
