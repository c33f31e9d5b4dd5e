"""InferenceMAX's Dynamo + TensorRT-LLM rack recipes (issue 49, item 3): the decode workers of its
disaggregated DeepSeek-R1 runs on GB200 and GB300 NVL72 racks and on B300 nodes
(``sim/data/dynamo_trtllm_decode.toml``; nvidia-master.yaml @48f302cc and the srt-slurm files it
names).

Each expected batch below was read from the recipe file itself (``trtllm_config.decode.max_batch_size``
beside ``tensor_parallel_size``, ``enable_attention_dp`` and the worker counts of ``resources``), not
from the table: the table is what is checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servesim.cli.main import main
from servesim.sim import client
from servesim.sim.client import Client, _data_file, dynamo_trtllm_decode_batch, dynamo_trtllm_decode_recipe

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


# --- the rack recipes' other settings (issue 49 item 3): each value below was read by hand from the
# recipe file named beside it (connorcarpenter15/srt-slurm @5a156f6b, recipes/trtllm/...), not from
# the table.

@pytest.mark.parametrize(("gpu", "dtype", "isl", "dp", "workers", "conc", "spec", "fraction", "backend"), [
    # gb200-fp8/1k1k/stp/ctx1_gen1_dep32_batch32_eplb0_mtp0_1127.yaml: decode kv_cache_config
    # free_gpu_memory_fraction 0.7, moe_config.backend DEEPGEMM
    ("gb200", "fp8", 1024, 32, 1, 1127, None, 0.7, "deepgemm"),
    # gb200-fp8/1k1k/stp/ctx1_gen1_dep16_batch128_eplb0_mtp0_2151.yaml: 0.75, DEEPGEMM
    ("gb200", "fp8", 1024, 16, 1, 2151, None, 0.75, "deepgemm"),
    # gb200-fp4/1k1k/stp/ctx1_gen2_dep4_batch768_eplb0_mtp0.yaml: 0.8, CUTLASS
    ("gb200", "fp4", 1024, 4, 2, 6144, None, 0.8, "cutlass"),
    # gb200-fp4/8k1k/stp/ctx2_gen1_dep32_batch8_eplb0_mtp0.yaml: 0.75, WIDEEP
    ("gb200", "fp4", 8192, 32, 1, 333, None, 0.75, "wideep"),
    # gb200-fp4/1k1k/mtp/ctx1_gen1_dep32_batch4_eplb0_mtp3.yaml: 0.6, CUTEDSL
    ("gb200", "fp4", 1024, 32, 1, 180, "mtp", 0.6, "cutedsl"),
    # gb300-fp4/8k1k/stp/ctx11_gen3_dep4_batch256_eplb0_mtp0.yaml: 0.9, CUTLASS
    ("gb300", "fp4", 8192, 4, 3, 3228, None, 0.9, "cutlass"),
    # b300-fp4/1k1k/stp/ctx3_gen1_dep8_batch1024_eplb0_mtp0.yaml: 0.8, CUTLASS
    ("b300", "fp4", 1024, 8, 1, 8192, None, 0.8, "cutlass"),
])
def test_rack_decode_memory_and_moe_backend_are_the_recipe_files(gpu, dtype, isl, dp, workers, conc, spec,
                                                                  fraction, backend):
    row = dynamo_trtllm_decode_recipe(gpu, dtype, isl, 1, dp, workers, conc, spec)
    assert row is not None and (row["memory_fraction"], row["moe_backend"]) == (fraction, backend)


def test_every_rack_attention_dp_row_holds_its_files_memory_and_backend():
    """The columns are on every attention-DP row of the rack and B300 recipes and on every 1k8k row,
    within the values their files use (0.6-0.9; DEEPGEMM in FP8 and CUTLASS/CUTEDSL/WIDEEP in NVFP4
    with attention DP, TRTLLM without), and on no other row."""
    for r in _data_file("dynamo_trtllm_decode")["recipes"]:
        held = r["gpu"] in (*RACK, "b300") and (r["dp"] > 1 or r.get("osl") == 8192)
        assert ("memory_fraction" in r) == ("moe_backend" in r) == held, r
        if held:
            assert 0.6 <= r["memory_fraction"] <= 0.9, r
            fp4_backends = {"cutlass", "cutedsl", "wideep"}
            dep = {"deepgemm"} if r["dtype"] == "fp8" else fp4_backends
            assert r["moe_backend"] in (dep if r["dp"] > 1 else {"trtllm"}), r


def test_the_two_gb200_fp4_8k_tep8_matrix_entries_follow_their_files():
    """nvidia-master.yaml gives them dp-attn true, their files (gb200-fp4/8k1k/stp/
    ctx1_gen4_tep8_batch{1,16}_eplb0_mtp0.yaml) enable_attention_dp false: the rows are tp 8, dp 1, and
    the header says so."""
    assert dynamo_trtllm_decode_batch("gb200", "fp4", 8192, 8, 1, 4, 5) == 1
    assert dynamo_trtllm_decode_batch("gb200", "fp4", 8192, 8, 1, 4, 76) == 16
    assert dynamo_trtllm_decode_batch("gb200", "fp4", 8192, 1, 8, 4, 76) is None
    header = (Path(client.__file__).parent / "data" / "dynamo_trtllm_decode.toml").read_text()
    assert "ctx1_gen4_tep8_batch{1,16}_eplb0_mtp0.yaml) set enable_attention_dp false" in header


IM = Client("inferencemax")


def _pool(pool, gpu, dtype, isl, conc, tp, dp, workers=1, spec=None):
    return IM.disagg_recipe("trtllm", pool, isl, conc, gpu=gpu, family="deepseek_v3", tp=tp, dp=dp,
                            ep=tp * dp, dtype=dtype, workers=workers, spec=spec)


@pytest.mark.parametrize(("gpu", "dtype", "isl", "dp", "want"), [
    # gb200-fp8/1k1k/stp/ctx1_gen1_dep32_batch32_eplb0_mtp0_1127.yaml prefill: tensor_parallel_size 8 with
    # enable_attention_dp, max_batch_size 16, max_num_tokens 16384, free_gpu_memory_fraction 0.5, DEEPGEMM
    ("gb200", "fp8_block", 1024, 8, (16, 16384, 0.5, "deepgemm")),
    # gb200-fp8/8k1k/stp/ctx4_gen1_dep32_batch16_eplb0_mtp0_666.yaml prefill: 2, 16384, 0.4, DEEPGEMM
    ("gb200", "fp8_block", 8192, 8, (2, 16384, 0.4, "deepgemm")),
    # gb200-fp4/8k1k/stp/ctx10_gen1_dep16_batch256_eplb256_mtp0.yaml prefill (TP4 + attention DP): 2,
    # 16640, 0.6, TRTLLM
    ("gb200", "fp4", 8192, 4, (2, 16640, 0.6, "trtllm")),
    # gb300-fp8/1k1k/stp/ctx2_gen1_dep32_batch32_eplb0_mtp0_1229.yaml prefill (TP4 + attention DP): 16,
    # 16384, 0.1, DEEPGEMM
    ("gb300", "fp8_block", 1024, 4, (16, 16384, 0.1, "deepgemm")),
    # b300-fp4/1k1k/stp/ctx1_gen2_dep8_batch64_eplb0_mtp0.yaml prefill (TP2 + attention DP): 8, 10240,
    # 0.75, TRTLLM
    ("b300", "fp4", 1024, 2, (8, 10240, 0.75, "trtllm")),
])
def test_rack_prefill_workers_run_the_recipe_files_settings(gpu, dtype, isl, dp, want):
    got = _pool("prefill", gpu, dtype, isl, 1000, 1, dp)
    keys = ("max_num_seqs", "max_num_batched_tokens", "memory_fraction", "moe_backend")
    assert tuple(got[k] for k in keys) == want
    assert got["overlap"] is False  # disable_overlap_scheduler: true


def test_rack_decode_settings_reach_the_pool():
    # the DEP32 file above: 0.7 and DEEPGEMM (was 0.9 and TensorRT-LLM's default)
    dep32 = _pool("decode", "gb200", "fp8_block", 1024, 1127, 1, 32)
    assert (dep32["memory_fraction"], dep32["moe_backend"], dep32["max_num_seqs"]) == (0.7, "deepgemm", 32)
    # gb200-fp4/1k1k/stp/ctx1_gen2_dep4_batch768_eplb0_mtp0.yaml: 0.8 with CUTLASS, TensorRT-LLM's own table
    # (its NVFP4 rows on GB200 are moe_torch_flow_cutlass)
    dep4 = _pool("decode", "gb200", "fp4", 1024, 6144, 1, 4, workers=2)
    assert (dep4["memory_fraction"], dep4["moe_backend"]) == (0.8, "cutlass")
    # gb200-fp8/1k1k/stp/ctx1_gen3_tep8_batch8_eplb0_mtp0_27.yaml (TEP8): 0.9 with TRTLLM
    tep8 = _pool("decode", "gb200", "fp8_block", 1024, 27, 8, 1, workers=3)
    assert (tep8["memory_fraction"], tep8["moe_backend"], tep8["max_num_seqs"]) == (0.9, "trtllm", 8)
    # B200 keeps its own recipes' rule (b200-fp8 DEP8 at 1k: DEEPGEMM, 0.8)
    b200 = _pool("decode", "b200", "fp8_block", 1024, 5152, 1, 8, workers=5)
    assert (b200["memory_fraction"], b200["moe_backend"]) == (0.8, "deepgemm")


def test_the_output_length_picks_the_1k8k_recipes_only_where_the_table_has_them():
    """A 1k/8k run on B200 (whose table holds no 1k8k rows) keeps the 1k1k recipe's batch, as before the
    table knew output lengths; a row with ``osl`` is chosen only for that output length."""
    b200_1k1k = dynamo_trtllm_decode_batch("b200", "fp8", 1024, 8, 1, 3, 128)
    assert b200_1k1k == 48 and dynamo_trtllm_decode_batch("b200", "fp8", 1024, 8, 1, 3, 128, osl=8192) == 48
    assert _pool("decode", "b200", "fp8_block", 1024, 128, 8, 1, workers=3)["max_num_seqs"] == 48


def test_a_gb200_disaggregated_inferencemax_prediction_launches_the_recipes_settings(capsys):
    """predict --mode disagg --gpu gb200 --engine trtllm --client inferencemax on the 1,127-client DEP32
    recipe: the launch commands it prints carry the files' prefill (16 sequences, 16,384 tokens, 0.5,
    DEEPGEMM) and decode settings (32 a rank, 0.7, DEEPGEMM)."""
    code = main(["predict", "--mode", "disagg", "--gpu", "gb200", "--engine", "trtllm",
                 "--client", "inferencemax", "--model", "deepseek-ai/DeepSeek-R1", "--isl", "1024",
                 "--osl", "1024", "--concurrency", "1127", "--prefill-dp", "8", "--prefill-ep", "8",
                 "--decode-dp", "32", "--decode-ep", "32", "--num-prompts", "1127", "--num-warmups", "0",
                 "--format", "json"])
    assert code in (0, None)
    out = json.loads(capsys.readouterr().out)
    prefill, decode = out["deploy"]["engine_commands"]["prefill"], out["deploy"]["engine_commands"]["decode"]
    assert "free_gpu_memory_fraction: 0.5" in prefill and "--max_batch_size 16 " in prefill
    assert "--max_num_tokens 16384 " in prefill and 'backend: "DEEPGEMM"' in prefill
    assert "free_gpu_memory_fraction: 0.7" in decode and "--max_batch_size 32 " in decode
    assert 'backend: "DEEPGEMM"' in decode


def test_the_1k8k_recipes_are_rows_of_their_own():
    """gb200-fp8/1k8k/stp/ctx1_gen1_dep32_batch16_eplb0_mtp0_564.yaml: DEP32, max_batch_size 16,
    free_gpu_memory_fraction 0.75, concurrencies 564 (its ctx worker 0.4); the 1k1k recipe nearest 564
    clients is ctx1_gen1_dep32_batch32_eplb0_mtp0_1127.yaml (32, 0.7; ctx 0.5).
    gb200-fp8/1k8k/mtp/ctx1_gen4_tep8_batch2_eplb0_mtp3_8.yaml: TEP8 x 4, 2 a worker, 0.8 with TRTLLM,
    concurrencies 4 and 8 (the 1k1k and 8k1k tep files run 0.9)."""
    def pool(name, osl, tp=1, dp=32, conc=564, **kw):
        return IM.disagg_recipe("trtllm", name, 1024, conc, gpu="gb200", family="deepseek_v3", tp=tp, dp=dp,
                                ep=tp * dp, dtype="fp8_block", osl=osl, **kw)

    long_out, short_out = pool("decode", 8192), pool("decode", 1024)
    assert (long_out["max_num_seqs"], long_out["memory_fraction"]) == (16, 0.75)
    assert (short_out["max_num_seqs"], short_out["memory_fraction"]) == (32, 0.7)
    ctx = [pool("prefill", o, dp=8)["memory_fraction"] for o in (8192, 1024)]
    assert ctx == [0.4, 0.5]
    tep = pool("decode", 8192, tp=8, dp=1, conc=8, workers=4, spec="mtp")
    assert (tep["max_num_seqs"], tep["memory_fraction"], tep["moe_backend"]) == (2, 0.8, "trtllm")
