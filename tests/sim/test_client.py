"""The benchmark client (servesim.sim.client): each tool's length ranges, arrivals, checks.

The ranges are the tools' own formulas evaluated by hand; the arrivals are checked against
the gamma law's mean and coefficient of variation (1 / sqrt(shape)).
"""

from __future__ import annotations

import itertools
import math
import statistics

import pytest

from servesim._checks import ParameterError
from servesim.sim.batching import Benchmark
from servesim.sim.client import (
    Client,
    arrival_times,
    draw_lengths,
    dynamo_sglang_decode,
    dynamo_trtllm_decode_batch,
)


@pytest.mark.parametrize(("name", "ratio", "length", "expect"), [
    ("vllm", 0.0, 1024, (1024, 1024)),
    ("vllm", 0.5, 1000, (500, 1500)),  # floor(L (1 - r)), ceil(L (1 + r))
    ("vllm", 0.25, 1023, (767, 1279)),  # 767.25 -> 767, 1278.75 -> 1279
    ("sglang", 0.0, 1024, (1, 1024)),  # the default: uniform on [1, L]
    ("sglang", 0.5, 1001, (500, 1001)),  # int(500.5) = 500
    ("inferencemax", None, 1024, (819, 1024)),  # r = 0.8 by default: int(819.2)
    ("inferencemax", 1.0, 8192, (8192, 8192)),
])
def test_length_ranges_follow_each_tool(name, ratio, length, expect):
    c = Client(name, random_range_ratio=ratio)
    assert c.length_range(length) == expect


def test_drawn_lengths_stay_in_range_cover_it_and_repeat_with_the_seed():
    c = Client("inferencemax")
    got = draw_lengths(c, 1024, 8192, 2000, seed=3)
    assert got is not None and len(got) == 2000
    ins, outs = [p for p, _ in got], [o for _, o in got]
    assert min(ins) >= 819 and max(ins) <= 1024 and min(outs) >= 6553 and max(outs) <= 8192
    assert statistics.mean(ins) == pytest.approx((819 + 1024) / 2, rel=0.01)  # uniform: the midpoint
    assert min(ins) < 830 and max(ins) > 1010  # both ends reached
    assert draw_lengths(c, 1024, 8192, 2000, seed=3) == got
    assert draw_lengths(c, 1024, 8192, 2000, seed=4) != got
    assert draw_lengths(Client("vllm"), 1024, 128, 10, seed=0) is None  # fixed lengths: nothing drawn


def test_sglang_default_halves_the_mean_lengths():
    assert Client("sglang").mean_lengths(1000, 200) == pytest.approx((500.5, 100.5))


@pytest.mark.parametrize("burstiness", [1.0, 0.25, 4.0])
def test_gamma_arrivals_have_the_rate_and_the_spread_of_their_shape(burstiness):
    t = arrival_times(5.0, burstiness, 20001, seed=1)
    gaps = [b - a for a, b in itertools.pairwise(t)]
    mean = statistics.mean(gaps)
    assert mean == pytest.approx(0.2, rel=0.05)
    cv = statistics.pstdev(gaps) / mean
    assert cv == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)
    assert t[0] == 0.0 and t == sorted(t)


@pytest.mark.parametrize(("kw", "name"), [
    ({"name": "genai-perf"}, "client"),
    ({"name": "vllm", "random_range_ratio": 1.0}, "random_range_ratio"),  # vLLM refuses 1
    ({"name": "sglang", "random_range_ratio": 1.5}, "random_range_ratio"),
    ({"name": "vllm", "burstiness": 0.0}, "burstiness"),
    ({"name": "vllm", "num_warmups": -1}, "num_warmups"),
])
def test_bad_client_raises_naming_the_flag(kw, name):
    with pytest.raises(ParameterError) as exc:
        Client(**kw)
    assert exc.value.name == name


def test_inferencemax_defaults_and_warmups_beyond_the_prompts():
    b = Benchmark(1024, 1024, concurrency=16, client=Client("inferencemax"))
    assert b.prompts == 160 and b.warmups == 32  # 10 x C measured, 2 x C warm-ups
    with pytest.raises(ParameterError) as exc:
        Benchmark(1024, 1024, concurrency=4, num_prompts=10, client=Client("vllm", num_warmups=11))
    assert exc.value.name == "num_warmups"


@pytest.mark.parametrize(("engine", "isl", "conc", "expect"), [
    ("trtllm", 8192, 64, 8320),    # 64 x ceil((64 + 8192 + 64) / 64) = 64 x 130
    ("trtllm", 1024, 4, 8192),     # 1,092 rounds to 1,152: the recipe keeps at least 8,192
    ("trtllm", 8192, 250, 8512),   # 8,506 -> 64 x 133
    ("sglang", 8192, 64, None),    # the other engines' recipes keep their default budgets
    ("trtllm", 8192, None, None),  # no client slots: nothing to size it by
])
def test_inferencemax_recipe_sizes_trtllm_budget_for_a_prompt_and_every_sequence(engine, isl, conc, expect):
    recipe = Client("inferencemax").recipe(engine, isl, conc, family="deepseek_v3")  # dsr1_*_trt.sh
    assert recipe.get("max_num_batched_tokens") == expect
    assert recipe.get("kv_dtype") == ("fp8" if engine == "trtllm" else None)  # its TRT-LLM recipes' KV
    assert Client("vllm").recipe(engine, isl, conc, family="deepseek_v3") == {}
    if expect is not None:
        assert expect >= isl + conc and expect % 64 == 0


_TRT70 = {"kv_dtype": "fp8", "max_num_batched_tokens": 16384, "cuda_graph_max_tokens": 1024}


@pytest.mark.parametrize(("engine", "isl", "osl", "tp", "expect"), [
    # 70b_*_trt_*.sh: --max_num_tokens 16384, CUDA graphs to 1024, an FP8 cache, and batch waiting
    # (ratio 0.9, 20 iterations) at 1k/1k below TP 8 only
    ("trtllm", 1024, 1024, 4, {**_TRT70, "scheduler": {"batch_wait_timeout_iters": 20,
                                                       "batch_wait_max_tokens_ratio": 0.9}}),
    ("trtllm", 1024, 1024, 8, _TRT70),
    ("trtllm", 8192, 1024, 2, _TRT70),
    # 70b_fp8_{h100,h200}_slurm.sh: --kv-cache-dtype fp8, 8,192 tokens, 0.9 of HBM, --max-num-seqs C
    ("vllm", 1024, 8192, 1, {"kv_dtype": "fp8", "max_num_batched_tokens": 8192, "memory_fraction": 0.9,
                             "max_num_seqs": 32}),
    ("sglang", 1024, 1024, 4, {}),  # InferenceMAX ran its dense model on vLLM and TensorRT-LLM only
])
def test_inferencemax_dense_recipes_are_llama_70bs(engine, isl, osl, tp, expect):
    assert Client("inferencemax").recipe(engine, isl, 32, family="", tp=tp, osl=osl) == expect


@pytest.mark.parametrize(("gpu", "dtype", "tp", "conc", "isl", "expect"), [
    # dsr1_fp8_b200.sh: TP8 chunks of 32,768, 128 running, recv every 30 steps from 16 clients;
    # SGLANG_ENABLE_FLASHINFER_GEMM=true
    ("b200", "fp8", 8, 64, 1024, {"kv_dtype": "fp8", "max_num_batched_tokens": 32768, "max_num_seqs": 128,
                                  "memory_fraction": 0.82, "gemm_backend": "flashinfer",
                                  "scheduler": {"max_prefill_tokens": 32768, "scheduler_recv_interval": 30}}),
    ("b200", "fp8", 8, 8, 1024, {"kv_dtype": "fp8", "max_num_batched_tokens": 32768, "max_num_seqs": 128,
                                 "memory_fraction": 0.82, "gemm_backend": "flashinfer",
                                 "scheduler": {"max_prefill_tokens": 32768, "scheduler_recv_interval": 10}}),
    ("b200", "fp8", 4, 64, 8192, {"kv_dtype": "fp8", "max_num_batched_tokens": 8192, "max_num_seqs": 32,
                                  "memory_fraction": 0.95, "gemm_backend": "flashinfer",
                                  "scheduler": {"max_prefill_tokens": 8192, "scheduler_recv_interval": 10}}),
    # dsr1_fp4_b200.sh: the default chunk, 256 running
    ("b200", "fp4", 8, 64, 1024, {"kv_dtype": "fp8", "max_num_seqs": 256, "memory_fraction": 0.85,
                                  "scheduler": {"scheduler_recv_interval": 30}}),
    # ... whose receive interval is 30 from 16 clients at TP4 as well (the FP8 script's is 10 there)
    ("b200", "fp4", 4, 16, 1024, {"kv_dtype": "fp8", "max_num_seqs": 256, "memory_fraction": 0.85,
                                  "scheduler": {"scheduler_recv_interval": 30}}),
    ("b200", "fp4", 4, 8, 1024, {"kv_dtype": "fp8", "max_num_seqs": 256, "memory_fraction": 0.85,
                                 "scheduler": {"scheduler_recv_interval": 10}}),
    # dsr1_fp8_h200.sh: chunks of 32,768, 512 running at 1k/1k, 256 otherwise, SGLang's own KV
    ("h200", "fp8", 8, 64, 1024, {"max_num_batched_tokens": 32768, "max_num_seqs": 512,
                                  "memory_fraction": 0.82, "scheduler": {"max_prefill_tokens": 32768}}),
    ("h200", "fp8", 8, 64, 8192, {"max_num_batched_tokens": 32768, "max_num_seqs": 256,
                                  "memory_fraction": 0.82, "scheduler": {"max_prefill_tokens": 32768}}),
])
def test_inferencemax_sglang_recipes_for_deepseek(gpu, dtype, tp, conc, isl, expect):
    got = Client("inferencemax").recipe("sglang", isl, conc, gpu=gpu, family="deepseek_v3", tp=tp,
                                        dtype=dtype, osl=1024)
    assert got == expect
    # no recipe read for the other families or GPUs: SGLang's defaults
    assert Client("inferencemax").recipe("sglang", isl, conc, gpu=gpu, family="qwen3_moe", tp=tp) == {}
    assert Client("inferencemax").recipe("sglang", isl, conc, gpu="h100-sxm", family="deepseek_v3") == {}
    dpa = Client("inferencemax").recipe("sglang", isl, conc, gpu=gpu, family="deepseek_v3", tp=1, dp=8,
                                        dtype=dtype, osl=1024)
    if gpu == "b200" and dtype == "fp4":  # fixed_seq_len/dsr1_fp4_b200.sh with DP_ATTENTION
        assert dpa == {"kv_dtype": "fp8", "max_num_batched_tokens": 32768, "max_num_seqs": 256,
                       "memory_fraction": 0.85,
                       "scheduler": {"scheduler_recv_interval": 1, "init_new_token_ratio": 1.0,
                                     "min_new_token_ratio": 0.14, "new_token_ratio_decay": 0.86 / 600}}
    else:
        assert dpa == {}  # the other recipes run TP only


def test_inferencemax_trtllm_recipe_balances_attention_dp():
    # dsr1_*_trt.sh with DP_ATTENTION: attention_dp_config enable_balance, timeout_iters 60,
    # batching_wait_iters 0
    got = Client("inferencemax").recipe("trtllm", 1024, 64, dp=8)
    assert got["scheduler"] == {"attention_dp_balance": True, "attention_dp_timeout_iters": 60,
                                "attention_dp_batching_wait_iters": 0}
    assert "scheduler" not in Client("inferencemax").recipe("trtllm", 1024, 64, dp=1)


@pytest.mark.parametrize(("gpu", "dtype", "conc", "fraction"), [
    ("h200", "fp8", 64, 0.75),    # dsr1_fp8_h200_trt.sh: free_gpu_memory_fraction 0.75
    ("b200", "fp4", 256, 0.8),    # dsr1_fp4_b200_trt.sh: 0.8 at every load
    ("b200", "fp8", 64, 0.8),     # dsr1_fp8_b200_trt.sh: 0.8 ...
    ("b200", "fp8", 256, 0.7),    # ... 0.7 from 256 clients at 1k input
])
def test_inferencemax_trtllm_recipe_memory_fraction_for_deepseek(gpu, dtype, conc, fraction):
    got = Client("inferencemax").recipe("trtllm", 1024, conc, gpu=gpu, family="deepseek_v3", dtype=dtype,
                                        osl=1024)
    assert got["memory_fraction"] == fraction and got["kv_dtype"] == "fp8"
    assert "memory_fraction" not in Client("inferencemax").recipe("trtllm", 1024, conc, gpu=gpu,
                                                                  family="qwen3_moe")


@pytest.mark.parametrize(("gpu", "dtype", "conc", "isl", "graph"), [
    ("h200", "fp8", 64, 1024, 128),    # dsr1_fp8_h200_trt.sh: cuda_graph_config max_batch_size 128
    ("b200", "fp4", 256, 1024, 512),   # dsr1_fp4_b200_trt.sh: 512 at every load
    ("b200", "fp8", 64, 1024, 64),     # dsr1_fp8_b200_trt.sh: the clients ...
    ("b200", "fp8", 256, 1024, 32),    # ... an eighth of them from 256 clients at 1k input
    ("b200", "fp8", 256, 8192, 256),
])
def test_inferencemax_trtllm_recipe_cuda_graphs_for_deepseek(gpu, dtype, conc, isl, graph):
    got = Client("inferencemax").recipe("trtllm", isl, conc, gpu=gpu, family="deepseek_v3", dtype=dtype,
                                        osl=1024)
    assert got["cuda_graph_max_tokens"] == graph
    assert "cuda_graph_max_tokens" not in Client("inferencemax").recipe("trtllm", isl, conc, gpu=gpu,
                                                                        family="qwen3_moe")


@pytest.mark.parametrize(("engine", "gpu", "model", "family", "dtype", "conc", "dp", "expect"), [
    # gptoss_fp4_b200.sh / gptoss_fp4_h200.sh: 8,192 budgets, graphs to 2,048, B200 FP8 KV and 512 seqs
    ("vllm", "b200", "gpt-oss-120b", "gpt_oss", "mxfp4", 64, 1,
     {"max_num_batched_tokens": 8192, "cuda_graph_max_tokens": 2048, "memory_fraction": 0.9,
      "kv_dtype": "fp8", "max_num_seqs": 512, "moe_activations": "mxfp8"}),
    ("vllm", "h200", "gpt-oss-120b", "gpt_oss", "mxfp4", 32, 1,
     {"max_num_batched_tokens": 8192, "cuda_graph_max_tokens": 2048, "memory_fraction": 0.9,
      "max_num_seqs": 32}),
    # gptoss_fp4_b200_trt.sh with attention DP: 20,000 tokens, 0.85, graphs to C, balance on
    ("trtllm", "b200", "gpt-oss-120b", "gpt_oss", "mxfp4", 256, 2,
     {"max_num_batched_tokens": 20000, "memory_fraction": 0.85, "kv_dtype": "fp8", "max_num_seqs": 512,
      "cuda_graph_max_tokens": 256, "scheduler": {"attention_dp_balance": True}}),
    # gptoss_fp4_h200_trt.sh: the model's own KV, --max_batch_size C, the TRITON MoE backend and, with
    # attention DP, no attention_dp_config
    ("trtllm", "h200", "gpt-oss-120b", "gpt_oss", "mxfp4", 16, 1,
     {"max_num_batched_tokens": 20000, "memory_fraction": 0.85, "max_num_seqs": 16,
      "cuda_graph_max_tokens": 16, "moe_backend": "triton"}),
    ("trtllm", "h200", "gpt-oss-120b", "gpt_oss", "mxfp4", 16, 2,
     {"max_num_batched_tokens": 20000, "memory_fraction": 0.85, "max_num_seqs": 16,
      "cuda_graph_max_tokens": 16, "moe_backend": "triton"}),
    # minimaxm2.5_fp8_*.sh
    ("vllm", "b200", "minimax-m2.5", "minimax_m2", "fp8", 64, 1,
     {"memory_fraction": 0.9, "kv_dtype": "fp8", "max_num_batched_tokens": 2048,
      "cuda_graph_max_tokens": 2048}),
    ("vllm", "h100-sxm", "minimax-m2.5", "minimax_m2", "fp8", 64, 1,
     {"memory_fraction": 0.9, "max_num_seqs": 256}),
    ("vllm", "h200", "minimax-m2.5", "minimax_m2", "fp8", 32, 1,
     {"memory_fraction": 0.95, "max_num_seqs": 512, "kv_dtype": "fp8",
      "max_num_batched_tokens": 16384}),
    ("vllm", "h200", "minimax-m2.5", "minimax_m2", "fp8", 64, 1,
     {"memory_fraction": 0.95, "max_num_seqs": 512, "kv_dtype": "fp8",
      "max_num_batched_tokens": 32768}),
    # ... and twice the prompt at a count its case does not list
    ("vllm", "h200", "minimax-m2.5", "minimax_m2", "fp8", 1, 1,
     {"memory_fraction": 0.95, "max_num_seqs": 512, "kv_dtype": "fp8",
      "max_num_batched_tokens": 2048}),
    # kimik2.5_int4_*.sh and kimik2.5_fp4_b200.sh
    ("vllm", "b200", "kimi-k2.5", "deepseek_v3", "int4", 64, 1,
     {"memory_fraction": 0.95, "max_num_seqs": 64}),
    ("vllm", "b200", "kimi-k2.5-nvfp4", "deepseek_v3", "fp4", 8, 1,
     {"memory_fraction": 0.9, "max_num_seqs": 8}),
    # DeepSeek on vLLM: no InferenceMAX script, the engine's defaults
    ("vllm", "b200", "deepseek-r1", "deepseek_v3", "fp8", 64, 1, {}),
    # qwen3.5_{fp8,bf16}_b200.sh, qwen3.5_fp8_h200.sh (fixed_seq_len, 8eec0d4)
    ("sglang", "b200", "qwen3.5-397b-a17b", "qwen3_5_moe", "fp8", 64, 1,
     {"cuda_graph_max_tokens": 64, "kv_dtype": "fp8", "max_num_batched_tokens": 16384, "memory_fraction": 0.8,
      "scheduler": {"max_prefill_tokens": 16384, "scheduler_recv_interval": 30}}),
    ("sglang", "b200", "qwen3.5-397b-a17b", "qwen3_5_moe", "bf16", 8, 1,
     {"cuda_graph_max_tokens": 8, "max_num_batched_tokens": 32768, "max_num_seqs": 128,
      "memory_fraction": 0.82, "scheduler": {"max_prefill_tokens": 32768, "scheduler_recv_interval": 10}}),
    ("sglang", "h200", "qwen3.5-397b-a17b", "qwen3_5_moe", "fp8", 32, 1,
     {"cuda_graph_max_tokens": 32, "kv_dtype": "fp8", "max_num_batched_tokens": 16384, "max_num_seqs": 128,
      "memory_fraction": 0.8}),
    # gptoss_fp4_{b200,h100}_sglang.sh (a branch's scripts, d04b625)
    ("sglang", "b200", "gpt-oss-120b", "gpt_oss", "mxfp4", 64, 1,
     {"max_num_batched_tokens": 32768, "memory_fraction": 0.85, "max_num_seqs": 128,
      "cuda_graph_max_tokens": 128, "kv_dtype": "fp8",
      "scheduler": {"max_prefill_tokens": 32768, "scheduler_recv_interval": 30}}),
    ("sglang", "h100-sxm", "gpt-oss-120b", "gpt_oss", "mxfp4", 8, 1,
     {"max_num_batched_tokens": 32768, "memory_fraction": 0.85, "max_num_seqs": 256,
      "cuda_graph_max_tokens": 256, "scheduler": {"max_prefill_tokens": 32768}}),
    # Kimi-K2.5 and GLM-5 on SGLang: DeepSeek-R1's scripts do not stand for them (Kimi has none there)
    ("sglang", "b200", "kimi-k2.5", "deepseek_v3", "int4", 64, 1, {}),
    ("sglang", "h200", "glm-5-nvfp4", "deepseek_v3", "fp8", 64, 1, {}),
    ("sglang", "b200", "deepseek-r1", "deepseek_v3", "fp8", 4, 1,  # dsr1_fp8_b200.sh below TP 8
     {"kv_dtype": "fp8", "gemm_backend": "flashinfer", "max_num_batched_tokens": 8192, "max_num_seqs": 32,
      "memory_fraction": 0.95, "scheduler": {"max_prefill_tokens": 8192, "scheduler_recv_interval": 10}}),
])
def test_inferencemax_recipes_for_gpt_oss_minimax_and_kimi(engine, gpu, model, family, dtype, conc, dp,
                                                           expect):
    got = Client("inferencemax").recipe(engine, 1024, conc, gpu=gpu, family=family, dtype=dtype, dp=dp,
                                        osl=1024, model=model)
    assert got == expect
    assert Client("sglang").recipe(engine, 1024, conc, gpu=gpu, family=family, model=model) == {}


@pytest.mark.parametrize(("gpu", "dtype", "isl", "expect"), [
    # srt-slurm recipes/trtllm/*: ctx workers' max_batch_size, max_num_tokens, free_gpu_memory_fraction
    ("h200", "fp8", 1024, (8, 8192, 0.6)),
    ("h200", "fp8", 8192, (2, 16640, 0.85)),
    ("b200", "fp8", 1024, (16, 16384, 0.4)),
    ("b200", "fp8", 8192, (1, 8320, 0.4)),
    ("b200", "fp4", 1024, (8, 10240, 0.75)),
    ("b200", "fp4", 8192, (2, 16896, 0.75)),
    ("h100-sxm", "fp8", 1024, (2, 2048, 0.6)),
    ("h100-sxm", "fp8", 8192, (1, 8224, 0.3)),
])
def test_inferencemax_dynamo_trtllm_prefill_recipes(gpu, dtype, isl, expect):
    got = Client("inferencemax").disagg_recipe("trtllm", "prefill", isl, 64, gpu=gpu, family="deepseek_v3",
                                               dp=8, dtype=dtype, workers=2)
    assert (got["max_num_seqs"], got["max_num_batched_tokens"], got["memory_fraction"]) == expect
    assert got["overlap"] is False and got["kv_dtype"] == "fp8"  # disable_overlap_scheduler: true
    assert Client("vllm").disagg_recipe("trtllm", "prefill", isl, 64, gpu=gpu, family="deepseek_v3") == {}
    assert Client("inferencemax").disagg_recipe("trtllm", "prefill", isl, 64, gpu=gpu,
                                                family="qwen3_moe") == {}


@pytest.mark.parametrize(("engine", "conc", "workers", "dp", "graph"), [
    ("trtllm", 64, 3, 1, 32),     # 22 sequences a worker -> graphs to 32
    ("trtllm", 1024, 1, 8, 128),  # DP8: 128 a rank
    ("trtllm", 1, 9, 1, 1),
    ("sglang", 512, 6, 1, 128),   # 86 a worker -> 128
])
def test_inferencemax_dynamo_decode_graphs_cover_each_ranks_share(engine, conc, workers, dp, graph):
    got = Client("inferencemax").disagg_recipe(engine, "decode", 1024, conc, gpu="h200", family="deepseek_v3",
                                               dp=dp, workers=workers)
    assert got["cuda_graph_max_tokens"] == graph
    assert graph >= conc / workers / dp > graph / 2 or graph == 1
    assert "overlap" not in got  # decode workers keep the overlap scheduler


def test_inferencemax_dynamo_sglang_prefill_recipes():
    h200 = Client("inferencemax").disagg_recipe("sglang", "prefill", 1024, 64, gpu="h200",
                                                family="deepseek_v3")
    assert h200 == {"max_num_batched_tokens": 163840, "max_num_seqs": 256, "memory_fraction": 0.82,
                    "scheduler": {"max_prefill_tokens": 163840}}
    dep = Client("inferencemax").disagg_recipe("sglang", "prefill", 1024, 64, gpu="h200",
                                               family="deepseek_v3", dp=8)
    assert dep["max_num_batched_tokens"] == 262144 and dep["scheduler"] == {"max_prefill_tokens": 65536}
    h100 = Client("inferencemax").disagg_recipe("sglang", "prefill", 8192, 8, gpu="h100-sxm",
                                                family="deepseek_v3")
    assert h100["max_num_batched_tokens"] == 2048  # an 8k prompt in four chunks
    b200 = Client("inferencemax").disagg_recipe("sglang", "prefill", 8192, 8, gpu="b200",
                                                family="deepseek_v3")
    assert b200["kv_dtype"] == "fp8" and b200["max_num_batched_tokens"] == 32768


@pytest.mark.parametrize(("gpu", "dtype", "isl", "tp", "dp", "workers", "conc", "mbs"), [
    ("h100-sxm", "fp8", 1024, 16, 1, 3, 6, 1),       # gen3 tep16 b1: 3 slots for 6 clients
    ("h100-sxm", "fp8", 1024, 1, 16, 3, 231, 4),     # gen3 dep16 b4: 192 slots for 231
    ("h200", "fp8", 8192, 8, 1, 7, 9, 1),            # nearest recipe of that shape: c7 (b1), not c28
    ("h200", "fp8", 8192, 8, 1, 7, 20, 32),          # nearer c28 (b32)
    ("b200", "fp4", 1024, 8, 1, 5, 180, 32),
    ("b200", "fp4", 1024, 8, 1, 5, 1000, None),      # beyond 2x of every recipe of that shape
    ("b200", "fp4", 1024, 8, 1, 4, 180, None),       # no recipe with four gen workers
    ("b200", "fp8", 1024, 8, 1, 3, 0, None),         # no concurrency
])
def test_dynamo_trtllm_decode_batch_is_the_nearest_recipe_of_the_same_shape(gpu, dtype, isl, tp, dp, workers,
                                                                           conc, mbs):
    assert dynamo_trtllm_decode_batch(gpu, dtype, isl, tp, dp, workers, conc) == mbs


def test_inferencemax_dynamo_trtllm_decode_takes_the_recipes_batch_and_graphs_within_it():
    got = Client("inferencemax").disagg_recipe("trtllm", "decode", 1024, 6, gpu="h100-sxm",
                                               family="deepseek_v3", tp=16, workers=3)
    assert got["max_num_seqs"] == 1 and got["cuda_graph_max_tokens"] == 1  # share 2, graphs to mbs
    wide = Client("inferencemax").disagg_recipe("trtllm", "decode", 1024, 36, gpu="h200",
                                                family="deepseek_v3", tp=8, workers=9)
    assert wide["max_num_seqs"] == 256 and wide["cuda_graph_max_tokens"] == 4  # 4 a worker
    assert "max_num_seqs" not in Client("inferencemax").disagg_recipe(
        "sglang", "decode", 1024, 6, gpu="h100-sxm", family="deepseek_v3", tp=16, workers=3)


def test_the_mtp_recipes_have_decode_batches_of_their_own():
    # H100 1k tep16 x3: STP recipes stop at 60 clients (b16), the MTP ones run 117 clients at b32
    assert dynamo_trtllm_decode_batch("h100-sxm", "fp8", 1024, 16, 1, 3, 117) == 16
    assert dynamo_trtllm_decode_batch("h100-sxm", "fp8", 1024, 16, 1, 3, 117, "mtp") == 32
    assert dynamo_trtllm_decode_batch("h100-sxm", "fp8", 1024, 16, 1, 3, 117, "none") == 16
    assert dynamo_trtllm_decode_batch("h100-sxm", "fp8", 1024, 16, 1, 3, 117, "eagle3") is None
    # H200 1k: the MTP low-latency file runs 11 gen workers (STP: 9)
    assert dynamo_trtllm_decode_batch("h200", "fp8", 1024, 8, 1, 11, 11, "mtp") == 1
    assert dynamo_trtllm_decode_batch("h200", "fp8", 1024, 8, 1, 11, 11) is None
    got = Client("inferencemax").disagg_recipe("trtllm", "decode", 1024, 117, gpu="h100-sxm",
                                               family="deepseek_v3", tp=16, workers=3, spec="mtp")
    assert got["max_num_seqs"] == 32


def test_inferencemax_mtp_recipes_set_the_engines_speculation_and_budgets():
    im = Client("inferencemax")
    # dsr1_*_trt_mtp.sh: num_nextn_predict_layers 3 without attention DP, 1 with it
    assert im.spec_recipe("trtllm", "mtp", family="deepseek_v3") == {"k": 3}
    assert im.spec_recipe("trtllm", "mtp", family="deepseek_v3", dp=8) == {"k": 1}
    assert im.spec_recipe("sglang", "mtp", family="deepseek_v3") == {"tree": (2, 1, 3)}
    assert im.spec_recipe("trtllm", "eagle3", family="deepseek_v3") == {}
    assert Client("vllm").spec_recipe("trtllm", "mtp", family="deepseek_v3") == {}
    # --max_batch_size C, --max_num_tokens 64 ceil(((k + 1) C + ISL + 64) / 64): 4 x 64 + 1024 + 64 -> 1344
    got = im.recipe("trtllm", 1024, 64, gpu="b200", family="deepseek_v3", tp=8, dtype="fp8", osl=1024,
                    spec="mtp")
    assert (got["max_num_seqs"], got["max_num_batched_tokens"]) == (64, 1344)
    assert got["cuda_graph_max_tokens"] == 256
    dep = im.recipe("trtllm", 1024, 256, gpu="b200", family="deepseek_v3", tp=1, dp=8, dtype="fp4", osl=1024,
                    spec="mtp")
    assert (dep["max_num_seqs"], dep["max_num_batched_tokens"]) == (32, 1152)  # 256 / 8 a rank, k = 1
    assert dep["scheduler"]["attention_dp_balance"] is True


def test_inferencemax_trtllm_b200_fp8_recipes_name_their_moe_backend():
    """dsr1_fp8_b200_trt.sh: moe_config.backend TRTLLM, DEEPGEMM from 256 clients at 1k input; the
    Dynamo ctx recipes: TRTLLM without expert parallel, DEEPGEMM with EP8; the gen recipes TRTLLM
    without EP and at 8k, DEEPGEMM with EP8 at 1k; none for H200 or SGLang.  In FP4 the colocated
    script (dsr1_fp4_b200_trt.sh) runs TRTLLM below 256 clients, the Dynamo ctx workers and the
    tensor-parallel gen workers run TRTLLM (recipes/trtllm/b200-fp4) and the attention-DP gen workers
    CUTLASS (ctx1_gen2_dep8_batch128_eplb0_mtp0.yaml)."""
    im = Client("inferencemax")
    kw = {"gpu": "b200", "family": "deepseek_v3", "dtype": "fp8"}
    assert im.recipe("trtllm", 1024, 64, tp=8, **kw)["moe_backend"] == "trtllm"
    assert im.recipe("trtllm", 1024, 256, tp=8, **kw)["moe_backend"] == "deepgemm"
    assert im.recipe("trtllm", 8192, 256, tp=8, **kw)["moe_backend"] == "trtllm"
    assert im.recipe("trtllm", 1024, 64, tp=8, gpu="b200", family="deepseek_v3", dtype="fp4")["moe_backend"] \
        == "trtllm"
    assert "moe_backend" not in im.recipe("trtllm", 1024, 64, tp=8, gpu="h200", family="deepseek_v3",
                                          dtype="fp8")
    assert "moe_backend" not in im.recipe("sglang", 1024, 64, tp=8, **kw)
    ctx = {e: im.disagg_recipe("trtllm", "prefill", 8192, 128, dp=8, ep=e, **kw) for e in (1, 8)}
    assert ctx[1]["moe_backend"] == "trtllm" and ctx[8]["moe_backend"] == "deepgemm"
    gen = {(isl, e): im.disagg_recipe("trtllm", "decode", isl, 128, dp=8 if e > 1 else 1,
                                      tp=8 if e == 1 else 1, ep=e, **kw)["moe_backend"]
           for isl in (1024, 8192) for e in (1, 8)}
    assert gen == {(1024, 1): "trtllm", (1024, 8): "deepgemm", (8192, 1): "trtllm", (8192, 8): "trtllm"}
    assert im.disagg_recipe("trtllm", "decode", 8192, 128, dp=8, ep=8, gpu="b200", family="deepseek_v3",
                            dtype="fp4")["moe_backend"] == "cutlass"
    fp4 = {"gpu": "b200", "family": "deepseek_v3", "dtype": "fp4"}
    assert im.disagg_recipe("trtllm", "prefill", 8192, 1606, dp=4, ep=4, **fp4)["moe_backend"] == "trtllm"
    tep = im.disagg_recipe("trtllm", "decode", 1024, 90, tp=8, ep=8, workers=5, **fp4)
    assert tep["moe_backend"] == "trtllm"
    assert "moe_backend" not in im.disagg_recipe("trtllm", "prefill", 8192, 128, dp=8, ep=8, gpu="h200",
                                                 family="deepseek_v3", dtype="fp8")


def test_inferencemax_trtllm_b200_fp8_tp4_at_8k_keeps_three_quarters_of_free_memory():
    """dsr1_fp8_b200_trt.sh: KV_CACHE_FREE_MEM_FRACTION 0.75 at 8k/1k with TP 4, else 0.8 below 256
    clients."""
    im = Client("inferencemax")
    kw = {"gpu": "b200", "family": "deepseek_v3", "dtype": "fp8"}
    assert im.recipe("trtllm", 8192, 32, tp=4, osl=1024, **kw)["memory_fraction"] == 0.75
    assert im.recipe("trtllm", 8192, 32, tp=8, osl=1024, **kw)["memory_fraction"] == 0.8
    assert im.recipe("trtllm", 1024, 32, tp=4, osl=1024, **kw)["memory_fraction"] == 0.8


@pytest.mark.parametrize(("isl", "osl", "conc", "piecewise"), [
    (1024, 1024, 32, False), (1024, 1024, 64, True), (1024, 1024, 256, False),
    (1024, 8192, 64, False), (1024, 8192, 128, True), (8192, 1024, 64, True), (8192, 1024, 256, True),
])
def test_inferencemax_trtllm_b200_fp8_piecewise_cuda_graphs(isl, osl, conc, piecewise):
    """dsr1_fp8_b200_trt.sh: PIECEWISE_CUDA_GRAPHS from 64 clients at 1k/1k (below the DEEPGEMM branch
    at 256), from 128 at 1k/8k, from 64 at 8k/1k; never for FP4 or H200 here."""
    got = Client("inferencemax").recipe("trtllm", isl, conc, gpu="b200", family="deepseek_v3", tp=8,
                                        dtype="fp8", osl=osl)
    assert got.get("piecewise_cuda_graphs", False) is piecewise
    assert "piecewise_cuda_graphs" not in Client("inferencemax").recipe(
        "trtllm", isl, conc, gpu="h200", family="deepseek_v3", tp=8, dtype="fp8", osl=osl)


@pytest.mark.parametrize(("gpu", "isl", "tp", "dp", "workers", "prefill", "spec", "want"), [
    ("h200", 8192, 8, 1, 3, 1, None, (32, 0.82)),     # 8k1k/disagg/stp/bs16-1p3d.yaml
    ("h200", 8192, 8, 1, 3, 2, None, (128, 0.82)),    # bs64-2p3d.yaml: same decode pool, two prefill workers
    ("h200", 8192, 8, 1, 3, None, None, None),        # the two recipes of that decode pool: not known which
    ("h200", 8192, 8, 1, 3, 2, "mtp", (16, 0.75)),    # bs64-2p3d-mtp.yaml
    ("h200", 8192, 8, 1, 7, 1, "mtp", (2, 0.75)),     # bs4-1p7d-mtp.yaml
    ("h200", 8192, 1, 8, 1, 1, None, (256, 0.88)),    # bs128-1p1d-dep.yaml
    ("h200", 1024, 8, 1, 9, None, None, (256, 0.82)),  # low-latency-1p9d.yaml: the only one of its pool
    ("h100-sxm", 8192, 1, 16, 1, 1, "mtp", (64, 0.85)),
    ("b200", 8192, 8, 1, 6, 1, None, (22, 0.75)),     # 8k1k_stp_lowlat_2.yaml
    ("h200", 8192, 8, 1, 4, 1, None, None),           # no recipe with four decode workers
    ("h200", 8192, 8, 1, 3, 2, "eagle3", None),       # no recipe speculates with EAGLE-3
])
def test_dynamo_sglang_decode_is_the_recipe_of_the_same_pools(gpu, isl, tp, dp, workers, prefill, spec, want):
    assert dynamo_sglang_decode(gpu, "fp8", isl, tp, dp, workers, prefill, spec) == want


def test_inferencemax_dynamo_sglang_decode_takes_the_recipes_running_limit_and_graphs_within_it():
    im = Client("inferencemax")
    got = im.disagg_recipe("sglang", "decode", 8192, 128, gpu="h200", family="deepseek_v3", tp=8, workers=3,
                           dtype="fp8", spec="mtp", peer_workers=2)
    # bs64-2p3d-mtp: 16 running a worker (its clients' share is 43), graphs to 16, memory 0.75
    assert (got["max_num_seqs"], got["cuda_graph_max_tokens"], got["memory_fraction"]) == (16, 16, 0.75)
    dep = im.disagg_recipe("sglang", "decode", 8192, 64, gpu="h200", family="deepseek_v3", tp=1, dp=8,
                           workers=1, dtype="fp8", peer_workers=1)
    # bs128-1p1d-dep: 256 running over 8 ranks; 64 clients give 8 a rank, so graphs to 8
    assert (dep["max_num_seqs"], dep["cuda_graph_max_tokens"], dep["memory_fraction"]) == (256, 8, 0.88)
    plain = im.disagg_recipe("sglang", "decode", 8192, 128, gpu="h200", family="deepseek_v3", tp=8,
                             workers=3, dtype="fp8")  # which of two recipes is not known: the defaults
    assert "max_num_seqs" not in plain and plain["memory_fraction"] == 0.82


def test_inferencemax_sglang_b200_fp8_scripts_run_flashinfers_gemm():
    """dsr1_fp8_b200.sh and dsr1_fp8_b200_mtp.sh export SGLANG_ENABLE_FLASHINFER_GEMM=true (and
    SGL_ENABLE_JIT_DEEPGEMM=false): their block-FP8 linear layers run FlashInfer's GEMM, at TP4 and
    TP8, with and without MTP.  The FP4 scripts, the H200 script, the Dynamo disaggregated recipes
    (whose decode environment does not set it), other engines and other clients keep the default."""
    im = Client("inferencemax")
    kw = {"gpu": "b200", "family": "deepseek_v3", "dtype": "fp8"}
    assert im.recipe("sglang", 1024, 4, tp=8, **kw)["gemm_backend"] == "flashinfer"
    assert im.recipe("sglang", 8192, 4, tp=4, **kw)["gemm_backend"] == "flashinfer"
    assert im.recipe("sglang", 1024, 64, tp=8, spec="mtp", **kw)["gemm_backend"] == "flashinfer"
    assert "gemm_backend" not in im.recipe("sglang", 1024, 4, tp=8, gpu="b200", family="deepseek_v3",
                                           dtype="fp4")
    assert "gemm_backend" not in im.recipe("sglang", 1024, 4, tp=8, gpu="h200", family="deepseek_v3",
                                           dtype="fp8")
    assert "gemm_backend" not in im.recipe("trtllm", 1024, 4, tp=8, **kw)
    for pool in ("prefill", "decode"):
        assert "gemm_backend" not in im.disagg_recipe("sglang", pool, 8192, 128, tp=1, dp=8, ep=8, **kw)
    assert Client("vllm").recipe("sglang", 1024, 4, tp=8, **kw) == {}


def test_clients_are_data_with_a_known_rule_and_a_valid_default():
    """data/clients.toml: every client has a length rule servesim knows, a default ratio inside its
    own valid range, and the default client is one of them (Client() is that client)."""
    from servesim.sim.client import CLIENTS, LENGTH_RULES, _clients, default_client

    assert default_client() in CLIENTS and Client() == Client(default_client())
    for name, c in _clients().items():
        assert c["lengths"] in LENGTH_RULES, name
        lo, hi = c["ratio_range"]
        assert lo <= c["default_ratio"] < hi if c["ratio_hi_open"] else lo <= c["default_ratio"] <= hi
        Client(name, random_range_ratio=c["default_ratio"])  # accepted
        assert CLIENTS[name] == Client(name).label


def test_client_module_writes_no_engine_name():
    """Issue 47: the client module names no engine (the clients' rules are data/clients.toml's)."""
    import ast
    from pathlib import Path

    import servesim.sim.client as module
    from servesim.hardware.engines import ENGINES

    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    literals = {n.value for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings}
    assert not literals & set(ENGINES)


@pytest.mark.parametrize(("tp", "dp", "conc", "isl", "mbs", "scheduler"), [
    # qwen3.5_fp4_b200_trt.sh: --max_batch_size (and the CUDA graphs) 512 from TP 4, max(C, 16) at TP 1;
    # batch waiting (50 iterations, ratio 0.45) without attention DP, the balance (500, 10) with it
    (8, 1, 64, 1024, 512, {"batch_wait_timeout_iters": 50, "batch_wait_max_tokens_ratio": 0.45}),
    (1, 1, 8, 1024, 16, {"batch_wait_timeout_iters": 50, "batch_wait_max_tokens_ratio": 0.45}),
    (1, 8, 256, 1024, 128, {"attention_dp_balance": True, "attention_dp_timeout_iters": 500,
                            "attention_dp_batching_wait_iters": 10}),
    (1, 4, 64, 8192, 256, {"attention_dp_balance": True, "attention_dp_timeout_iters": 500,
                           "attention_dp_batching_wait_iters": 10}),
])
def test_inferencemax_qwen35_trtllm_recipe(tp, dp, conc, isl, mbs, scheduler):
    got = Client("inferencemax").recipe("trtllm", isl, conc, gpu="b200", family="qwen3_5_moe", dtype="fp4",
                                        tp=tp, dp=dp, model="qwen3.5-397b-a17b", osl=1024)
    budget = 16384 if isl == 1024 else 32768  # its --max_num_tokens at 1k/1k and 8k/1k
    assert got == {"kv_dtype": "fp8", "max_num_batched_tokens": budget, "max_num_seqs": mbs,
                   "cuda_graph_max_tokens": mbs, "scheduler": scheduler}
