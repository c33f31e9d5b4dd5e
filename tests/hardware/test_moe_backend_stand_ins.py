"""TensorRT-LLM's MoE backends without a measured table of their own (``moe_config.backend`` CUTEDSL and
WIDEEP, which InferenceMAX's GB200/GB300 Dynamo recipes name): priced as the nearest measured backend,
CUTLASS (engines.toml ``moe_backend_stand_ins``), never silently."""

from __future__ import annotations

import pytest

from servesim._checks import ParameterError
from servesim.hardware.engines import engine_profile, moe_backend_stand_ins, moe_backends
from servesim.hardware.model_config import find_architecture
from servesim.hardware.moe_step import MoEStepModel, Parallelism


def _sm(backend: str | None, gpu: str = "gb200", dtype: str = "fp4", dp: int = 16) -> MoEStepModel:
    a = find_architecture("deepseek-ai/DeepSeek-R1")
    assert a is not None
    return MoEStepModel(a, gpu, Parallelism(1, dp, dp), dtype=dtype, kv_dtype="fp8", moe_backend=backend,
                        engine=engine_profile("trtllm", gpu=gpu, tp=1, dp=dp))


def test_every_stand_in_is_a_backend_and_stands_for_a_measured_one():
    stand = moe_backend_stand_ins()
    assert stand == {"cutedsl": "cutlass", "wideep": "cutlass"}
    assert set(stand) <= set(moe_backends()) and set(stand.values()) <= set(moe_backends())
    assert not set(stand.values()) & set(stand)  # a stand-in is itself measured


@pytest.mark.parametrize("backend", ["cutedsl", "wideep"])
@pytest.mark.parametrize("gpu", ["gb200", "gb300", "b300"])
def test_an_unmeasured_backend_costs_what_cutlass_costs_and_says_so(backend, gpu):
    got, cutlass, default = _sm(backend, gpu), _sm("cutlass", gpu), _sm(None, gpu)
    for tokens in (16.0, 512.0, 4096.0):
        assert got._moe(tokens) == cutlass._moe(tokens) == default._moe(tokens)
    note = got.moe_backend_note
    assert f"moe_config.backend {backend.upper()}: no measured" in note and "priced as CUTLASS" in note
    assert "moe_torch_flow_cutlass" in note and note in got.pricing_notes
    assert cutlass.moe_backend_note == "" and default.moe_backend_note == ""  # CUTLASS's own rows: no note


def test_cutlass_where_the_table_timed_another_kernel_says_which():
    # block-FP8 experts on Blackwell: TensorRT-LLM's table times DEEPGEMM (aiconfigurator's collector runs
    # fp8_block on SM >= 100 through it), so CUTLASS is priced by those rows, with a note
    got = _sm("cutlass", "b200", "fp8_block", 8)
    assert got._moe(512.0) == _sm(None, "b200", "fp8_block", 8)._moe(512.0)
    assert "no CUTLASS fp8_block MoE rows measured on b200" in got.moe_backend_note
    assert "deepgemm" in got.moe_backend_note
    assert _sm("deepgemm", "b200", "fp8_block", 8).moe_backend_note == ""


def test_trtllm_gen_rows_price_the_trtllm_backend_only():
    # GB200: TRTLLM-gen rows (vLLM's of FlashInfer's kernel at DeepSeek-R1's DEP16 shape), cheaper than
    # CUTLASS's at a small decode batch
    gen, cutlass = _sm("trtllm"), _sm("cutlass")
    assert gen._moe(64.0)[0] < cutlass._moe(64.0)[0]
    assert "trtllmnvfp4" in gen.moe_backend_note
    with pytest.raises(ParameterError, match="moe_backend"):
        _sm("vanilla")
