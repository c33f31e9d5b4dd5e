"""InferenceMAX's launch recipes as data (servesim/sim/data/recipes.toml, read by
servesim.sim.client.harness_settings): every rule cites its source and can fire, the expressions
stay a small language, and the recipes give what their scripts say, worked by hand here."""

from __future__ import annotations

import itertools
import math
import re

import pytest

from servesim.sim import client as client_module
from servesim.sim.client import Client, _data_file, _recipe_expression, harness_settings

SECTIONS = ("recipe", "mtp", "speculation", "disagg")


def _rules():
    data = _data_file("recipes")
    return [(section, i, rule) for section in SECTIONS for i, rule in enumerate(data[section]["rules"])]


def test_every_rule_cites_a_repository_and_a_file_and_its_expressions_compile():
    for section, i, rule in _rules():
        assert set(rule) == {"source", "when", "set"}, (section, i)
        # owner/name, then a path in it: "SemiAnalysisAI/InferenceX benchmarks/dsr1_fp8_h200.sh"
        assert re.match(r"[\w.-]+/[\w.-]+ .*[/.]", rule["source"]), (section, i, rule["source"])
        _recipe_expression(rule["when"])
        for value in itertools.chain(rule["set"].values(), *(v.values() for v in rule["set"].values()
                                                             if isinstance(v, dict))):
            if isinstance(value, str) and value.startswith("="):
                _recipe_expression(value[1:])


@pytest.mark.parametrize("text", ["model.startswith('kimi')", "[x for x in (1, 2)]", "(lambda: 1)()",
                                  "().__class__", "c.real"])
def test_an_expression_is_arithmetic_and_comparisons_only(text):
    with pytest.raises(ValueError, match="not allowed"):
        _recipe_expression(text)


def test_expressions_see_no_builtins_and_unknown_inputs_are_refused():
    assert eval(_recipe_expression("max(1, 2)"), {"__builtins__": {}, "max": max}) == 2
    with pytest.raises(NameError):
        eval(_recipe_expression("open('x')"), {"__builtins__": {}})
    with pytest.raises(TypeError, match="unknown inputs"):
        harness_settings("recipe", engine="trtllm", concurrancy=4)


def _grid():
    """Inputs around every recipe: the GPUs, families, engines, shapes and loads the scripts name,
    and each decode table row's own shape (so that the table lookups find their row)."""
    for engine, gpu, family, dtype, spec, (tp, dp) in itertools.product(
            ("trtllm", "sglang", "vllm"), ("h200", "b200", "h100-sxm", "gb200", "gb300", "b300"),
            ("deepseek_v3", "gpt_oss", "minimax_m2", "qwen3_5_moe", ""), ("fp8", "fp4", "bf16"),
            (None, "mtp"),
            ((8, 1), (4, 1), (1, 8))):
        for isl, osl, c in ((1024, 1024, 64), (1024, 1024, 300), (8192, 1024, 64), (1024, 8192, 128),
                            (1024, 1024, 8), (1024, 1024, 0)):
            model = "kimi-k2.5" if family == "deepseek_v3" and engine == "vllm" else ""
            yield "one", {"engine": engine, "gpu": gpu, "family": family, "dtype": dtype, "spec": spec,
                          "tp": tp, "dp": dp, "isl": isl, "osl": osl, "concurrency": c, "model": model}
            for pool, ep in itertools.product(("prefill", "decode"), (1, 8)):
                yield "disagg", {"engine": engine, "gpu": gpu, "family": family, "dtype": dtype, "spec": spec,
                                 "tp": tp, "dp": dp, "ep": ep, "isl": isl, "concurrency": c, "pool": pool}
    for name, engine in (("dynamo_trtllm_decode", "trtllm"), ("dynamo_sglang_decode", "sglang")):
        for row in _data_file(name)["recipes"]:
            c = row.get("concurrency", [64])[0]
            yield "disagg", {"engine": engine, "gpu": row["gpu"], "family": "deepseek_v3",
                             "dtype": row["dtype"], "spec": row.get("spec"), "tp": row["tp"], "dp": row["dp"],
                             "isl": row["isl"], "concurrency": c, "pool": "decode", "workers": row["workers"],
                             "peer_workers": row.get("prefill_workers")}


def test_every_rule_fires_somewhere(monkeypatch):
    """No dead rule: each one's ``when`` holds for some input of :func:`_grid` (its ``set`` replaced
    by a marker naming it)."""
    data = _data_file("recipes")
    marked = {**data, **{s: {**data[s], "rules": [{**r, "set": {f"{s}{i}": True}}
                                                  for i, r in enumerate(data[s]["rules"])]}
                         for s in SECTIONS}}
    monkeypatch.setattr(client_module, "_data_file",
                        lambda name: marked if name == "recipes" else _data_file(name))
    fired: set[str] = set()
    for kind, inputs in _grid():
        sections = ("disagg", "speculation") if kind == "disagg" else ("recipe", "mtp", "speculation")
        for s in sections:  # the speculation section takes a decode pool's inputs (Client.spec_recipe)
            spec_keys = ("engine", "spec", "family", "dp", "pool", "gpu", "dtype", "isl", "osl", "tp",
                         "workers", "concurrency")
            fired |= set(harness_settings(s, **inputs)) if s != "speculation" else set(
                harness_settings(s, **{k: v for k, v in inputs.items() if k in spec_keys}))
    assert {f"{s}{i}" for s, i, _ in _rules()} - fired == set()


def test_trtllm_budget_at_8k_input_is_the_scripts_formula():
    """dsr1_fp8_b200_trt.sh at 8k/1k, TP8, 256 clients: --max_num_tokens = max(8192,
    64 ceil((256 + 8192 + 64) / 64)) = 64 x 133 = 8,512; not the 1k-input branch from 256 clients
    (graphs to C = 256, the TRTLLM MoE backend, piecewise graphs from 64 clients at 8k/1k, memory
    0.8)."""
    got = Client("inferencemax").recipe("trtllm", 8192, 256, gpu="b200", family="deepseek_v3", tp=8,
                                        dtype="fp8", osl=1024)
    assert got == {"kv_dtype": "fp8", "memory_fraction": 0.8, "cuda_graph_max_tokens": 256,
                   "moe_backend": "trtllm", "piecewise_cuda_graphs": True, "max_num_batched_tokens": 8512}
    assert 8512 == 64 * math.ceil((256 + 8192 + 64) / 64)


@pytest.mark.parametrize(("tp", "dp", "conc", "k", "mbs", "tokens"), [
    # dsr1_fp8_b200_trt_mtp.sh without attention DP: k = 3, --max_batch_size C,
    # 64 ceil((4 x 64 + 8192 + 64) / 64) = 64 x 133 = 8,512
    (8, 1, 64, 3, 64, 8512),
    # with DP_ATTENTION over 8 GPUs: k = 1, 256 / 8 = 32 a rank, 64 ceil((2 x 32 + 8192 + 64) / 64) = 8,320
    (1, 8, 256, 1, 32, 8320),
    # one client: 64 ceil((4 + 8192 + 64) / 64) = 64 x 130 = 8,320 (no 8,192 floor to hide it)
    (8, 1, 1, 3, 1, 8320),
])
def test_trtllm_mtp_recipe_at_8k_input_takes_its_depth_and_batch(tp, dp, conc, k, mbs, tokens):
    im = Client("inferencemax")
    assert im.spec_recipe("trtllm", "mtp", family="deepseek_v3", dp=dp) == {"k": k}
    got = im.recipe("trtllm", 8192, conc, gpu="b200", family="deepseek_v3", tp=tp, dp=dp, dtype="fp8",
                    osl=1024, spec="mtp")
    assert (got["max_num_seqs"], got["max_num_batched_tokens"]) == (mbs, tokens)
    assert tokens == 64 * math.ceil(((k + 1) * mbs + 8192 + 64) / 64)
    assert got["cuda_graph_max_tokens"] == 256 and got["memory_fraction"] == 0.8
    assert ("scheduler" in got) is (dp > 1)  # attention_dp_config only with attention DP


def test_sglang_mtp_runs_eagle_with_the_fp4_scripts_chunks():
    """dsr1_fp4_b200_mtp.sh: EAGLE with 2 steps, top-k 1, 3 draft tokens; 512 running requests,
    16,384-token chunks and prefill batches, CUDA graphs to 512; the receive interval 30 from 16
    clients.  The FP8 script (dsr1_fp8_b200_mtp.sh): 256 running, 32,768-token chunks, FlashInfer's
    GEMM."""
    im = Client("inferencemax")
    assert im.spec_recipe("sglang", "mtp", family="deepseek_v3") == {"tree": (2, 1, 3)}
    fp4 = im.recipe("sglang", 8192, 16, gpu="b200", family="deepseek_v3", tp=8, dtype="fp4", spec="mtp")
    assert fp4 == {"kv_dtype": "fp8", "max_num_seqs": 512, "cuda_graph_max_tokens": 512,
                   "memory_fraction": 0.85, "max_num_batched_tokens": 16384,
                   "scheduler": {"max_prefill_tokens": 16384, "scheduler_recv_interval": 30}}
    fp8 = im.recipe("sglang", 8192, 8, gpu="b200", family="deepseek_v3", tp=8, dtype="fp8", spec="mtp")
    assert (fp8["max_num_seqs"], fp8["max_num_batched_tokens"]) == (256, 32768)
    assert fp8["gemm_backend"] == "flashinfer"
    assert fp8["scheduler"]["scheduler_recv_interval"] == 10
    # no MTP script on H200 for SGLang, and attention DP keeps SGLang's defaults
    assert im.recipe("sglang", 8192, 8, gpu="h200", family="deepseek_v3", tp=8, dtype="fp8", spec="mtp") == {}
    assert im.recipe("sglang", 8192, 8, gpu="b200", family="deepseek_v3", tp=1, dp=8, dtype="fp8",
                     spec="mtp") == {}


def test_dynamo_prefill_pool_at_8k_reads_its_own_row():
    """srt-slurm recipes/trtllm/h100-fp8/8k1k: ctx max_batch_size 1, max_num_tokens 8,224 (8k plus a
    32-token margin), free_gpu_memory_fraction 0.3, with DeepEP forced for attention-DP workers;
    3,000-token prompts take the 8k rows (nearest in log scale: 3,000 > sqrt(1024 x 8192) = 2,896)."""
    im = Client("inferencemax")
    got = im.disagg_recipe("trtllm", "prefill", 3000, 64, gpu="h100-sxm", family="deepseek_v3", tp=1, dp=16,
                           ep=16, dtype="fp8")
    assert got == {"kv_dtype": "fp8", "ep_comm": "deepep_normal", "overlap": False, "max_num_seqs": 1,
                   "max_num_batched_tokens": 8224, "memory_fraction": 0.3}
    assert im.disagg_recipe("trtllm", "prefill", 2896, 64, gpu="h100-sxm", family="deepseek_v3",
                            dtype="fp8")["max_num_batched_tokens"] == 2048
