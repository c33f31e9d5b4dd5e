"""InferenceMAX's Dynamo + TensorRT-LLM rack recipes (issue 49, item 3): the decode workers of its
disaggregated DeepSeek-R1 runs on GB200 and GB300 NVL72 racks and on B300 nodes
(``sim/data/dynamo_trtllm_decode.toml``; nvidia-master.yaml @48f302cc and the srt-slurm files it
names).

Each expected batch below was read from the recipe file itself (``trtllm_config.decode.max_batch_size``
beside ``tensor_parallel_size``, ``enable_attention_dp`` and the worker counts of ``resources``), not
from the table: the table is what is checked.
"""

from __future__ import annotations

import pytest

from servesim.sim.client import Client, _data_file, dynamo_trtllm_decode_batch

RACK = ("gb200", "gb300")


@pytest.mark.parametrize(("gpu", "dtype", "isl", "tp", "dp", "workers", "conc", "spec", "mbs"), [
    # gb200-fp8/1k1k/stp/ctx1_gen1_dep32_batch32_eplb0_mtp0_1127.yaml: max_batch_size 32,
    # tensor_parallel_size 32 with enable_attention_dp (a rank's), decode_workers 1, concurrencies 1127
    ("gb200", "fp8", 1024, 1, 32, 1, 1127, None, 32),
    # gb200-fp4/8k1k/stp/ctx1_gen4_tep8_batch16_eplb0_mtp0.yaml: max_batch_size 16, TP8 without
    # attention DP, 4 decode workers, concurrencies "12x44x76"
    ("gb200", "fp4", 8192, 8, 1, 4, 44, None, 16),
    # gb200-fp4/1k1k/stp/ctx1_gen2_dep4_batch768_eplb0_mtp0.yaml: 768 a rank of DEP4, 2 workers, 6144
    ("gb200", "fp4", 1024, 1, 4, 2, 6144, None, 768),
    # b300-fp4/1k1k/stp/ctx3_gen1_dep8_batch1024_eplb0_mtp0.yaml: 1024 a rank of DEP8, 1 worker, 8192
    ("b300", "fp4", 1024, 1, 8, 1, 8192, None, 1024),
])
def test_rack_decode_batch_is_the_recipe_files(gpu, dtype, isl, tp, dp, workers, conc, spec, mbs):
    assert dynamo_trtllm_decode_batch(gpu, dtype, isl, tp, dp, workers, conc, spec) == mbs


def test_rack_recipes_keep_their_speculation_apart():
    # gb200-fp8 1k1k DEP8 x1 at 4301 clients: 512 a rank with and without MTP (two files); at
    # 2151 only the MTP file exists (b256) and the STP lookup falls to 4301's, within 2x
    assert dynamo_trtllm_decode_batch("gb200", "fp8", 1024, 1, 8, 1, 4301, "mtp") == 512
    assert dynamo_trtllm_decode_batch("gb200", "fp8", 1024, 1, 8, 1, 2151, "mtp") == 256
    assert dynamo_trtllm_decode_batch("gb200", "fp8", 1024, 1, 8, 1, 2151) == 512
    # no recipe of two DEP32 decode workers on GB200: nothing is invented
    assert dynamo_trtllm_decode_batch("gb200", "fp8", 1024, 1, 32, 2, 1127) is None


def test_every_rack_decode_worker_is_whole_trays_inside_one_nvlink_domain():
    """A GB200 / GB300 decode worker is 4 (one tray) to 32 GPUs (8 trays) of one NVL72 rack; a B300
    worker is one HGX node of 8 at most: the recipes' resources (gpus_per_node 4 or 8)."""
    rows = [r for r in _data_file("dynamo_trtllm_decode")["recipes"] if r["gpu"] in (*RACK, "b300")]
    assert {r["gpu"] for r in rows} == {"gb200", "gb300", "b300"}
    for r in rows:
        gpus = r["tp"] * r["dp"]
        assert 1 in (r["tp"], r["dp"]), r  # TEP (tp = the worker's GPUs) or DEP (dp = its GPUs)
        if r["gpu"] in RACK:
            assert gpus % 4 == 0 and gpus <= 72, r
        else:
            assert gpus <= 8, r
        assert r["max_batch_size"] >= 1 and all(c >= 1 for c in r["concurrency"])


def test_a_gb200_disaggregated_prediction_runs_the_recipes_batch():
    """The DEP32 decode pool of InferenceMAX's 1,127-client GB200 FP8 run holds at most 32 sequences a
    rank (1,024 in the worker) and graphs no larger than that."""
    im = Client("inferencemax")
    dec = im.disagg_recipe("trtllm", "decode", 1024, 1127, gpu="gb200", family="deepseek_v3", tp=1, dp=32,
                           ep=32, dtype="fp8_block", workers=1)
    assert dec["max_num_seqs"] == 32 and dec["cuda_graph_max_tokens"] <= 32
