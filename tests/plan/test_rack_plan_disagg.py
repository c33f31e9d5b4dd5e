"""``predict --mode disagg`` with workers spread over an NVL72 rack's trays and over racks (issue 49,
item 5): the KV link of the pair comes from the topology (hardware.topology.kv_path) and the note
says which links it crosses.

Inside one rack every pair, on one tray or between trays, moves its KV through NVSwitch at
0.89 x 900 GB/s; a deployment over two racks moves it over InfiniBand at 100 GB/s a GPU; a --link
the user gives is taken as it is.  The transfer of one prompt is checked by hand: DeepSeek-R1's
latent is 61 layers x (512 + 64) BF16 values a token.
"""

from __future__ import annotations

import json

import pytest

from servesim.cli.main import main

R1 = ["--model", "deepseek-ai/DeepSeek-R1", "--gpu", "gb200", "--engine", "trtllm", "--mode", "disagg",
      "--isl", "256", "--osl", "8", "--concurrency", "2", "--num-prompts", "8", "--format", "json"]
LATENT_BYTES = 61 * (512 + 64) * 2  # a token's KV, every layer


def _predict(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["predict", *R1, *args]) == 0
    out = json.loads(capsys.readouterr().out)
    return out[0] if isinstance(out, list) else out


def _pools(prefill_workers: int, decode_workers: int) -> list[str]:
    """TP4 prefill workers (one tray each) and DEP32 decode workers (8 trays each)."""
    return ["--prefill-tp", "4", "--prefill-workers", str(prefill_workers), "--decode-tp", "1",
            "--decode-dp", "32", "--decode-ep", "32", "--decode-workers", str(decode_workers)]


def test_the_kv_link_of_a_pair_follows_its_placement(capsys):
    trays = _predict(capsys, "--prefill-tp", "4", "--decode-tp", "4")  # 8 GPUs: two trays
    rack = _predict(capsys, *_pools(2, 1))  # 40 GPUs: one rack
    racks = _predict(capsys, *_pools(2, 3))  # 104 GPUs: two racks
    assert (trays["gpus"], rack["gpus"], racks["gpus"]) == (8, 40, 104)
    nvlink = 0.89 * 900e9
    assert trays["link_GBps"] == rack["link_GBps"] == pytest.approx(nvlink / 1e9)
    assert racks["link_GBps"] == pytest.approx(100.0)
    assert "inside one NVL72 rack (8 of 72 GPUs, 2 trays of 4)" in trays["notes"][0]
    assert "inside one NVL72 rack (40 of 72 GPUs, 10 trays of 4)" in rack["notes"][0]
    assert "NVLink" in rack["notes"][0] and "InfiniBand" not in rack["notes"][0]
    assert "different NVL72 racks (104 GPUs span 2 racks of 72): InfiniBand" in racks["notes"][0]
    # the same prompts: each transfer is the prompt's latent over the link, by hand
    for d, rate in ((rack, nvlink), (racks, 100e9)):
        assert d["mean_kv_transfer_ms"] == pytest.approx(LATENT_BYTES * 256 / rate * 1e3, rel=0.05)
    assert racks["mean_kv_transfer_ms"] / rack["mean_kv_transfer_ms"] == pytest.approx(nvlink / 100e9,
                                                                                          rel=1e-6)


def test_a_link_the_user_gives_is_taken_as_it_is(capsys):
    d = _predict(capsys, *_pools(2, 3), "--link", "rdma")
    assert d["link_GBps"] == pytest.approx(50.0)
    assert not any("KV transfer between" in n for n in d["notes"])


def _recipe(pool: str, tp: int, dp: int, *, engine: str = "sglang", gpu: str = "gb200", isl: int = 1024,
            dtype: str = "fp8_block") -> dict:
    from servesim.sim.client import harness_settings

    return harness_settings("disagg", engine=engine, pool=pool, isl=isl, concurrency=2048, gpu=gpu,
                            family="deepseek_v3", tp=tp, dp=dp, ep=dp * tp if dp > 1 else 1, dtype=dtype,
                            workers=1)


def test_sglang_rack_recipes_of_deepseek_r1_on_gb200():
    """Dynamo's srt-slurm recipes for SGLang on GB200 (recipes.toml cites gb200-fp8/{1k1k,8k1k}
    max-tpt.yaml and low-latency.yaml): attention-DP pools exchange with DeepEP, normal kernels
    in the prefill pool and low-latency ones in the decode pool; tensor-parallel pools with none;
    FP8 KV in both; nothing for NVFP4 weights or another engine, and B200's rules unchanged."""
    pre, dec = _recipe("prefill", 1, 8), _recipe("decode", 1, 32)
    assert (pre["ep_comm"], dec["ep_comm"]) == ("deepep_normal", "deepep")
    assert pre["kv_dtype"] == dec["kv_dtype"] == "fp8"
    assert pre["max_num_batched_tokens"] > dec["max_num_batched_tokens"] > 8192  # 131072, 36864
    assert dec["cuda_graph_max_tokens"] == 768 and "cuda_graph_max_tokens" not in pre  # no graphs
    tp_pre, tp_dec = _recipe("prefill", 4, 1), _recipe("decode", 4, 1)
    assert "ep_comm" not in tp_pre and "ep_comm" not in tp_dec
    assert tp_pre["max_num_seqs"] > tp_dec["max_num_seqs"] == tp_dec["cuda_graph_max_tokens"]  # 512, 128
    assert _recipe("decode", 1, 32, dtype="fp4") == {}  # the FP8 recipes only
    # at 8k prompts (8k1k/max_tpt.yaml) the decode pool runs fewer sequences and smaller graphs
    dec8k = _recipe("decode", 1, 32, isl=8192)
    assert dec8k["ep_comm"] == "deepep" and dec8k["max_num_seqs"] < dec["max_num_seqs"]
    assert dec8k["cuda_graph_max_tokens"] < dec["cuda_graph_max_tokens"]
    assert tp_pre["scheduler"] == tp_dec["scheduler"] == {"scheduler_recv_interval": 10}
    assert "ep_comm" not in _recipe("decode", 1, 32, engine="trtllm")
    assert _recipe("decode", 1, 32, gpu="b200")["memory_fraction"] == 0.85


def test_a_prediction_under_the_rack_recipe_runs_deepep_low_latency_in_the_decode_pool(capsys):
    d = _predict(capsys, "--engine", "sglang", "--client", "inferencemax", "--prefill-tp", "1",
                 "--prefill-dp", "8", "--prefill-ep", "8", "--decode-tp", "1", "--decode-dp", "32",
                 "--decode-ep", "32")
    assert d["gpus"] == 40 and d["kv_dtype"] == "fp8"
    assert "inside one NVL72 rack (40 of 72 GPUs" in d["notes"][0]
    notes = " ".join(d["notes"])
    assert "deepep normal dispatch" in notes and "over 8 ranks" in notes  # the prefill pool's
    assert "deepep ll dispatch" in notes and "over 32 ranks" in notes  # the decode pool's
    assert d["decode"]["scheduler"]["max_running"] == 45000  # the recipe's --max-running-requests
