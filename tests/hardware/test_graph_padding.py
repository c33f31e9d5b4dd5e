"""A decode step replays the CUDA graph of the smallest batch its engine captured that holds it.

The capture lists are the engines' own (servesim.hardware.engines.capture_sizes cites each source);
the padded rows run every kernel but attention, which reads no cache for them.
"""

from __future__ import annotations

import pytest

from servesim._checks import ParameterError
from servesim.hardware.engines import capture_sizes, engine_profile
from servesim.hardware.names import dense_shape
from servesim.hardware.pricer import Deployment, build_step_model
from servesim.hardware.stepmodel import StepModel


def test_capture_lists_as_the_engines_write_them():
    # vLLM: [1, 2, 4] + range(8, 256, 8) + range(256, 513, 16): 3 + 31 + 17 = 51 sizes at 512
    v = capture_sizes("vllm", 512)
    assert v[:5] == (1, 2, 4, 8, 16) and v[-3:] == (480, 496, 512) and len(v) == 51
    # SGLang without speculation: [1, 2, 4, 8, 12] + every 8 from 16 to 256, then every 16 from 272
    s = capture_sizes("sglang", 512)
    assert s[:7] == (1, 2, 4, 8, 12, 16, 24) and s[-2:] == (496, 512)
    assert 256 in s and 264 not in s and 272 in s
    assert len(s) == 5 + 31 + 15 + 1
    # TensorRT-LLM with enable_padding: [1, 2, 4] + every 8 to 128, then powers of 2, and the limit
    assert capture_sizes("trtllm", 128) == (1, 2, 4, *range(8, 129, 8))
    assert capture_sizes("trtllm", 512)[-4:] == (120, 128, 256, 512)
    assert capture_sizes("trtllm", 48)[-2:] == (40, 48)  # nothing above the limit, the limit itself
    # SGLang keeps its pattern below its limit (--cuda-graph-max-bs 22 captures up to 16)
    assert capture_sizes("sglang", 22) == (1, 2, 4, 8, 12, 16)
    with pytest.raises(ParameterError, match="cuda_graph_batches"):
        capture_sizes("tgi", 256)


def test_a_capture_rule_is_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fourth engine's capture rule is its engines.toml entry: listed sizes, runs, powers of two."""
    from servesim._catalogfile import engines_file

    rule = {"sizes": [1, 3], "steps": [{"from": 4, "to": 12, "by": 4}, {"from": 20, "by": 10}],
            "powers_of_two_from": 64, "adds_limit": True}
    monkeypatch.setitem(engines_file()["engine"], "toy-capture", {"cuda_graph_batches": rule})
    # 1, 3; 4, 8, 12; 20, 30 ... up to 100; 64; and the limit 100 itself
    assert capture_sizes("toy-capture", 100) == (1, 3, 4, 8, 12, 20, 30, 40, 50, 60, 64, 70, 80, 90, 100)
    # below every run's start: the listed sizes up to the limit, then the limit
    assert capture_sizes("toy-capture", 2) == (1, 2)


@pytest.mark.parametrize(("engine", "n", "padded"), [
    ("sglang", 3, 4), ("sglang", 9, 12), ("sglang", 13, 16), ("sglang", 250, 256),
    ("vllm", 9, 16), ("vllm", 257, 272), ("trtllm", 9, 16), ("trtllm", 100, 104), ("trtllm", 128, 128),
])
def test_a_batch_is_padded_to_the_next_captured_size(engine, n, padded):
    eng = engine_profile(engine, gpu="h100-sxm", memory_gib=80)
    assert eng.graph_batch(n) == padded
    assert eng.graph_batch(eng.cuda_graph_max_tokens + 1) == eng.cuda_graph_max_tokens + 1  # eager: as is


def test_a_padded_decode_step_runs_the_captured_batchs_kernels_but_its_own_attention():
    sm = StepModel(dense_shape("llama-3-8b"), "h100-sxm", 1, engine=engine_profile("sglang", gpu="h100-sxm",
                                                                                      memory_gib=80))
    nine, twelve = sm.step(9, 2000), sm.step(12, 2000)
    assert nine.gemm_s == twelve.gemm_s and nine.other_s == twelve.other_s
    assert nine.attention_s < twelve.attention_s  # 9 caches read, not 12
    assert nine.tokens == 9 and twelve.tokens == 12
    assert sm.step(8, 2000).gemm_s < nine.gemm_s  # 8 is captured: no padding
    # A step with a prefill chunk runs eagerly (SGLang graphs decode only): not padded.
    from servesim.hardware.stepmodel import Chunk

    with_chunk = sm.step(9, 2000, (Chunk(512),))
    assert with_chunk.tokens == 9 + 512


def test_each_attention_dp_rank_pads_its_own_batch():
    # DeepSeek-R1 on 8 H200s, SGLang, DP8 + EP8: 40 sequences are 5 a rank, padded to 8 a rank, so the
    # experts see 64 tokens, as a step of 64 sequences does; attention reads only the 40 caches.
    sm, _, _ = build_step_model(Deployment("deepseek-ai/DeepSeek-R1", "h200", 1, dtype="auto", dp=8, ep=8,
                                         engine="sglang"))
    forty, sixty_four = sm.step(40, 2000), sm.step(64, 2000)

    def op(st, name):
        return next(o for o in st.ops if o.name.startswith(name)).priced_s

    assert op(forty, "moe") == op(sixty_four, "moe")
    assert op(forty, "attention") < op(sixty_four, "attention")
    assert forty.total_s <= sixty_four.total_s and forty.tokens == 40


@pytest.mark.parametrize(("engine", "tp", "dp", "ep"), [("trtllm", 1, 8, 8), ("sglang", 8, 1, 8)])
def test_a_step_never_gets_cheaper_with_more_sequences(engine, tp, dp, ep):
    # Padded GEMMs are flat between captured sizes and attention grows: the sum never falls.  A DP
    # rank's share is fractional (12 sequences on 8 ranks: 1.5 a rank); its attention is priced
    # between the whole batches around it (it was 1.5 x a table scaled from 2, cheaper than 1.375 of 1).
    sm, _, _ = build_step_model(Deployment("deepseek-ai/DeepSeek-R1", "h200", tp, dtype="auto", dp=dp, ep=ep,
                                           engine=engine))
    prev = 0.0
    for tenth in range(5, 1200, 5):
        t = sm.step(tenth / 10, 3000, bound=False).total_s
        assert t >= prev, tenth / 10
        prev = t
