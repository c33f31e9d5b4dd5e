"""InferenceMAX's recipes: the MoE backend each names, the MTP depth each states, and ``--dtype auto``.

Every expected value below was read from the script or recipe file itself (cited beside it), not from
servesim's tables: the tables and rules are what is checked.
"""

from __future__ import annotations

import pytest

from servesim.plan.predict import harness_deployment, harness_speculation
from servesim.sim.batching import Benchmark
from servesim.sim.client import Client, _data_file

R1 = "deepseek-ai/DeepSeek-R1-0528"
IM = Client("inferencemax")


def _bench(isl: int, osl: int, conc: int) -> Benchmark:
    return Benchmark(isl=isl, osl=osl, concurrency=conc, client=IM)


# ------------------------------------------------------------------ MTP depth (num_nextn_predict_layers)

@pytest.mark.parametrize(("gpu", "dtype", "isl", "tp", "dp", "workers", "conc", "k"), [
    # b200-fp4/1k1k/mtp/ctx1_gen2_dep8_batch64_eplb0_mtp2.yaml: speculative_config num_nextn_predict_layers 2
    # (decode: tensor_parallel_size 8 with enable_attention_dp, decode_workers 2, concurrencies "1214")
    ("b200", "fp4", 1024, 1, 8, 2, 1214, 2),
    # gb300-fp4/1k1k/mtp/ctx1_gen1_dep32_batch8_eplb0_mtp.yaml: 3 (the name has no number), 1 worker, 333
    ("gb300", "fp4", 1024, 1, 32, 1, 333, 3),
    # b200-fp4/1k1k/mtp/ctx3_gen5_dep4_batch512_eplb0_mtp1.yaml: DEP4, 5 workers, 1 layer
    ("b200", "fp4", 1024, 1, 4, 5, 10860, 1),
    # h200/1k1k/mtp/c256_ctx1_gen4_dep8_batch128_eplb0_mtp3.yaml: attention DP with 3 layers
    ("h200", "fp8", 1024, 1, 8, 4, 1024, 3),
])
def test_decode_pool_takes_its_recipe_files_mtp_depth(gpu, dtype, isl, tp, dp, workers, conc, k):
    bench = _bench(isl, 1024, conc)
    dec = harness_deployment(bench, model=R1, gpu=gpu, engine="trtllm", tp=tp, dp=dp, ep=tp * dp, dtype=dtype,
                             pool="decode", workers=workers, spec="mtp")
    how = harness_speculation(bench, model=R1, engine="trtllm", spec="mtp", decode=dec,
                              decode_workers=workers)
    assert how["k"] == k
    # the single-node scripts' rule (dsr1_*_trt_mtp.sh: 1 with attention DP, 3 without) is what a
    # deployment without the pool gets, and differs from the file in three of the four cases
    single = harness_speculation(bench, model=R1, engine="trtllm", spec="mtp", dp=dp)
    assert single["k"] == (1 if dp > 1 else 3)


def test_every_mtp_row_states_its_depth_and_no_other_row_does():
    rows = _data_file("dynamo_trtllm_decode")["recipes"]
    mtp = [r for r in rows if r.get("spec") == "mtp"]
    assert len(mtp) == 143
    assert all(r["mtp"] in (1, 2, 3) for r in mtp)
    assert not any("mtp" in r for r in rows if r.get("spec") != "mtp")
    # depth 1 only with attention DP: every tensor-parallel (tep/tp) file is mtp3 or mtp2
    assert all(r["mtp"] >= 2 for r in mtp if r["dp"] == 1)


def test_a_decode_pool_without_a_recipe_keeps_the_scripts_rule():
    bench = _bench(1024, 1024, 50_000)  # no recipe within 2x of this many clients
    dec = harness_deployment(bench, model=R1, gpu="b200", engine="trtllm", tp=1, dp=8, ep=8, dtype="fp4",
                             pool="decode", workers=1, spec="mtp")
    how = harness_speculation(bench, model=R1, engine="trtllm", spec="mtp", decode=dec, decode_workers=1)
    assert how["k"] == 1
    given = harness_speculation(bench, model=R1, engine="trtllm", spec="mtp", decode=dec, k=2)
    assert given["k"] == 2


# ------------------------------------------------------------------ MoE backends

@pytest.mark.parametrize(("isl", "osl", "conc", "tp", "dp", "backend"), [
    # dsr1_fp4_b200_trt.sh: MOE_BACKEND TRTLLM; CUTLASS at TP 4 or 8 from 256 clients at 1k/1k and
    # 1k/8k, above 32 at 8k/1k
    (1024, 1024, 128, 8, 1, "trtllm"),
    (1024, 1024, 256, 8, 1, "cutlass"),
    (1024, 8192, 256, 4, 1, "cutlass"),
    (8192, 1024, 32, 4, 1, "trtllm"),
    (8192, 1024, 64, 4, 1, "cutlass"),
    (1024, 1024, 256, 1, 8, "cutlass"),  # TP=8 with DP_ATTENTION: attention DP 8 here
    (1024, 1024, 256, 2, 1, "trtllm"),  # the script switches at TP 4 and 8 only
])
def test_single_node_fp4_b200_trtllm_names_its_moe_backend(isl, osl, conc, tp, dp, backend):
    r = IM.recipe("trtllm", isl, conc, gpu="b200", family="deepseek_v3", tp=tp, dp=dp, dtype="fp4", osl=osl)
    assert r["moe_backend"] == backend


@pytest.mark.parametrize(("dtype", "dp", "backend"), [
    ("fp4", 8, "cutlass"), ("fp4", 1, "trtllm"),  # dsr1_fp4_b200_trt_mtp.sh: by DP_ATTENTION
    ("fp8", 8, "deepgemm"), ("fp8", 1, "deepgemm"),  # dsr1_fp8_b200_trt_mtp.sh: MOE_BACKEND="DEEPGEMM"
])
def test_single_node_mtp_b200_names_its_moe_backend(dtype, dp, backend):
    r = IM.recipe("trtllm", 1024, 64, gpu="b200", family="deepseek_v3", tp=8 // dp, dp=dp, dtype=dtype,
                  osl=1024, spec="mtp")
    assert r["moe_backend"] == backend


@pytest.mark.parametrize(("gpu", "dtype", "isl", "dp", "workers", "conc", "spec", "backend"), [
    # gb200-fp4/1k1k/mtp/ctx1_gen1_dep32_batch4_eplb0_mtp3.yaml: moe_config.backend CUTEDSL
    ("gb200", "fp4", 1024, 32, 1, 180, "mtp", "cutedsl"),
    # gb200-fp4/8k1k/stp/ctx2_gen1_dep32_batch8_eplb0_mtp0.yaml: WIDEEP
    ("gb200", "fp4", 8192, 32, 1, 333, None, "wideep"),
    # b300-fp4/1k1k/mtp/ctx1_gen1_dep8_batch64_eplb0_mtp3.yaml: CUTLASS
    ("b300", "fp4", 1024, 8, 1, 654, "mtp", "cutlass"),
    # b200-fp4/1k1k/stp/ctx1_gen2_dep8_batch128_eplb0_mtp0.yaml: CUTLASS in the attention-DP gen workers
    ("b200", "fp4", 1024, 8, 2, 2192, None, "cutlass"),
])
def test_every_backend_a_decode_recipe_names_reaches_the_deployment(gpu, dtype, isl, dp, workers, conc, spec,
                                                                    backend):
    dec = harness_deployment(_bench(isl, 1024, conc), model=R1, gpu=gpu, engine="trtllm", tp=1, dp=dp, ep=dp,
                             dtype=dtype, pool="decode", workers=workers, spec=spec)
    assert dec.moe_backend == backend


# ------------------------------------------------------------------ --dtype auto

@pytest.mark.parametrize(("conc", "backend", "fraction", "graph"), [
    # dsr1_fp8_b200_trt.sh: from 256 clients at 1k input DEEPGEMM, free_gpu_memory_fraction 0.7, CUDA graphs
    # to C / 8; below, TRTLLM, 0.8 and C
    (256, "deepgemm", 0.7, 32),
    (64, "trtllm", 0.8, 64),
])
def test_dtype_auto_takes_the_checkpoints_fp8_recipe(conc, backend, fraction, graph):
    bench = _bench(1024, 1024, conc)
    kw = {"model": R1, "gpu": "b200", "engine": "trtllm", "tp": 8, "dp": 1, "ep": 8}
    auto = harness_deployment(bench, dtype="auto", **kw)
    fp8 = harness_deployment(bench, dtype="fp8", **kw)
    assert (auto.moe_backend, auto.memory_fraction, auto.cuda_graph_max_tokens) == (backend, fraction, graph)
    assert (fp8.moe_backend, fp8.memory_fraction, fp8.cuda_graph_max_tokens) == (backend, fraction, graph)
    assert auto.dtype == "auto"  # the weights stay as typed: the checkpoint's
