"""Every single-node NVIDIA deployment InferenceMAX benchmarks is predicted, within physical bounds.

The shapes are those of SemiAnalysisAI/InferenceX ``.github/configs/nvidia-master.yaml`` (commit
0004cf5f; Apache-2.0): each single-node H100, H200 and B200 entry's model, GPU, precision, engine
and search-space element (``tp``, ``ep``, ``dp-attn``, ``spec-decoding``), with ``dp-attn`` spelled
as servesim's attention data parallel (TP GPUs as DP ranks).  Qwen3.5-397B (a hybrid linear-attention
model servesim does not price) is left out.  A refusal here is a deployment the issue's held-out
set would count as not predicted.
"""

from __future__ import annotations

import math

import pytest

from servesim.plan.predict import harness_deployment, harness_speculation, predict
from servesim.sim.batching import Benchmark
from servesim.sim.client import Client

R1, R1_FP4 = "deepseek-ai/DeepSeek-R1-0528", "nvidia/DeepSeek-R1-0528-FP4-V2"
OSS, MM, KIMI = "openai/gpt-oss-120b", "MiniMaxAI/MiniMax-M2.5", "moonshotai/Kimi-K2.5"

# (model, gpu, dtype, engine, tp, dp, ep, spec)
SHAPES = [
    (MM, "b200", "fp8", "vllm", 2, 1, 1, None), (MM, "b200", "fp8", "vllm", 4, 1, 1, None),
    (MM, "h100-sxm", "fp8", "vllm", 4, 1, 4, None), (MM, "h200", "fp8", "vllm", 4, 1, 1, None),
    (KIMI, "b200", "int4", "vllm", 8, 1, 1, None), (KIMI, "h200", "int4", "vllm", 8, 1, 1, None),
    *[(OSS, "b200", "fp4", "trtllm", t, d, e, None)
      for t, d, e in ((1, 1, 1), (1, 2, 2), (1, 4, 4), (2, 1, 1), (4, 1, 1), (8, 1, 1))],
    *[(OSS, "h200", "fp4", "trtllm", t, 1, t, None) for t in (1, 2, 4, 8)],
    *[(OSS, gpu, "fp4", "vllm", t, 1, 1, None) for gpu in ("b200", "h200") for t in (1, 2, 4, 8)],
    *[(OSS, "h100-sxm", "fp4", "vllm", t, 1, 1, None) for t in (2, 4, 8)],
    (R1, "b200", "fp8", "sglang", 4, 1, 1, None), (R1, "b200", "fp8", "sglang", 8, 1, 1, None),
    (R1, "b200", "fp8", "sglang", 8, 1, 1, "mtp"), (R1, "h200", "fp8", "sglang", 8, 1, 1, None),
    *[(R1, "b200", "fp8", "trtllm", t, d, e, s) for t, d, e in ((1, 8, 8), (8, 1, 1)) for s in (None, "mtp")],
    (R1, "b200", "fp8", "trtllm", 4, 1, 1, None),
    *[(R1, "h200", "fp8", "trtllm", t, d, 8, s) for t, d in ((1, 8), (8, 1)) for s in (None, "mtp")],
    (R1_FP4, "b200", "fp4", "sglang", 4, 1, 4, None), (R1_FP4, "b200", "fp4", "sglang", 8, 1, 8, None),
    *[(R1_FP4, "b200", "fp4", "trtllm", t, d, e, s)
      for t, d, e in ((1, 4, 4), (1, 8, 8), (4, 1, 1), (4, 1, 4), (8, 1, 1), (8, 1, 8))
      for s in (None, "mtp")],
]


@pytest.mark.parametrize(("model", "gpu", "dtype", "engine", "tp", "dp", "ep", "spec"), SHAPES)
def test_inferencemax_single_node_shape_is_predicted(model: str, gpu: str, dtype: str, engine: str,
                                                     tp: int, dp: int, ep: int, spec: str | None) -> None:
    bench = Benchmark(isl=1024, osl=256, concurrency=4, client=Client("inferencemax"))
    dep = harness_deployment(bench, model=model, gpu=gpu, dtype=dtype, engine=engine, tp=tp, dp=dp, ep=ep,
                             spec=spec)
    out = predict(dep, bench, **harness_speculation(bench, model=model, engine=engine, dp=dp, spec=spec))
    assert out["stable"] and out["completed"] == out["num_prompts"]
    assert ("speculation" in out) == (spec is not None)
    assert out["kv_max_requests"] >= 4  # four clients' prompts and outputs fit the KV cache
    tpot, ttft = float(out["mean_tpot_ms"]), float(out["mean_ttft_ms"])
    assert math.isfinite(tpot) and math.isfinite(ttft) and ttft > 0
    # a plain step at the running batch costs at least the batch-1 step; a speculative cycle yields at
    # most 4 tokens (InferenceMAX's MTP verifies at most 3 drafts), each no faster than light allows
    floor = out["batch1_step_ms"] if spec is None else out["speed_of_light_batch1_step_ms"] / 4
    assert tpot >= 0.999 * floor
    # four clients each receive at most one token a TPOT (time to first token only slows them)
    assert out["output_throughput"] <= 1.1 * 4 * 1000.0 / tpot
