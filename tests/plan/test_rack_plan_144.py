"""Plans across racks (issue 49, item 5): a 144-GPU DeepSeek-R1 plan on GB200 (two NVL72 racks).

The search adds the decode pools that leave one NVLink domain (DEP128 over two racks) only where the
budget holds them; every row says which links its groups cross; a row whose pools fit one rack moves
its KV over NVLink, one that spans racks over InfiniBand; the best decode pool stays inside one
NVLink domain; a pool that crosses racks pays the inter-rack links (the hierarchical bound), checked
by hand.  The whole screen (no engine-model confirmation, about 10 s, shared) runs under
``-m slow``; the default run checks the same placement rules on the search's own functions.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from servesim.hardware.engines import engine_profile
from servesim.hardware.kernels import tables_for
from servesim.hardware.moe_kernels import moe_tables
from servesim.hardware.moe_step import MoEStepModel, Parallelism
from servesim.hardware.pricer import model_architecture
from servesim.plan.predict import kv_transfer_seconds
from servesim.plan.search import PlanQuestion, _kv_links, _link_keys, _row_links, _shapes, capacity_plan

R1 = "deepseek-ai/DeepSeek-R1"
RACK = 72  # GPUs in one GB200 NVL72 NVLink domain
IB = 100e9  # InfiniBand (ConnectX-8, 800 Gb/s) a GPU between racks
NVLINK_KV = 0.89 * 900e9  # a KV transfer's share of NVLink 5 (the catalog's nvlink efficiency)


def _q(gpus: int) -> PlanQuestion:
    return PlanQuestion(model=R1, gpu="gb200", gpus=gpus, isl=1024, osl=1024, slo_ttft_s=1.0, slo_tpot_s=0.04,
                        dtypes=("fp8_block",), engine="trtllm", chunks=(8192,), confirm=False)


def _gpus(pool: dict) -> int:
    return int(pool["tp"]) * int(pool.get("dp", 1))


def _step(gpus: int) -> MoEStepModel:
    return MoEStepModel(model_architecture(R1), "gb200", Parallelism(1, gpus, gpus), dtype="fp8_block",
                        engine=engine_profile("trtllm", gpu="gb200"))


def test_rows_are_placed_by_their_size():
    """The search's placement of a row (the rules the whole screen below applies to every row): a
    deployment that fits one rack moves its KV over NVLink, a larger one over InfiniBand; each row
    names the links of its workers and of its KV transfer; the plan's header names both links."""
    q = _q(144)
    kv = _kv_links(q, None)
    assert kv(56)[0] == pytest.approx(NVLINK_KV) and "inside one NVL72 rack (56 of 72 GPUs" in kv(56)[1]
    assert kv(112)[0] == IB and "different NVL72 racks (112 GPUs span 2 racks of 72)" in kv(112)[1]
    row = {"architecture": "disaggregated", "prefill": {"tp": 4, "workers": 20},
           "decode": {"tp": 1, "dp": 128, "ep": 128, "workers": 1}, "gpus": 208}
    pre, dec, link = _row_links(q, None, row, kv(208))
    assert pre.startswith("prefill worker of 4 GPUs: NVLink only") and "one tray" in pre
    assert dec.startswith("decode worker of 128 GPUs spans 2 NVL72 racks of 72") and "InfiniBand" in dec
    assert "InfiniBand" in link
    colocated = {"architecture": "colocated", "prefill": {"tp": 8, "workers": 9},
                 "decode": {"tp": 8, "workers": 9}, "gpus": 72}
    assert _row_links(q, None, colocated, None) == ["replica of 8 GPUs: NVLink only, one NVL72 domain "
                                                     "(2 trays of 4, through NVSwitch)"]
    assert _link_keys(q, None)["link_GBps"] == IB / 1e9
    assert _link_keys(_q(72), None) == {"link": "nvlink", "link_GBps": pytest.approx(NVLINK_KV / 1e9)}
    fixed = _kv_links(replace(q, kv_placement=False), None)
    assert fixed(56)[0] == fixed(112)[0] == 50e9  # a --link the user gave: every row on it
    assert _kv_links(replace(q, gpu="b200"), None)(112)[0] == 50e9  # HGX: the plan's link


@pytest.fixture(scope="module")
def plan144():
    return capacity_plan(_q(144))


def test_pools_across_racks_are_searched_only_where_the_budget_holds_them():
    assert (1, 128, 128) in _shapes(_q(144), None)[2]  # DEP128 over two racks (256 experts: 2 a GPU)
    assert (1, 128, 128) not in _shapes(_q(72), None)[2]  # one rack's budget: DEP64 at most
    assert max(p[1] for p in _shapes(_q(72), None)[2]) == 64


@pytest.mark.slow
def test_every_row_states_its_links_and_the_kv_rides_nvlink_only_inside_one_rack(plan144):
    rows = plan144["ranked"]
    assert rows and any(r["gpus"] > RACK for r in rows) and any(r["gpus"] <= RACK for r in rows)
    assert "InfiniBand between racks" in plan144["link"] and plan144["link_GBps"] == IB / 1e9
    for r in rows:
        links = r["links"]
        if r["architecture"] == "colocated":
            assert len(links) == 1 and links[0].startswith("replica of")
            continue
        pre, dec, kv = links
        assert pre.startswith(f"prefill worker of {_gpus(r['prefill'])} GPU")
        assert dec.startswith(f"decode worker of {_gpus(r['decode'])} GPU")
        assert ("spans 2 NVL72 racks" in dec) == (_gpus(r["decode"]) > RACK)
        if r["gpus"] <= RACK:
            assert "inside one NVL72 rack" in kv and "NVLink" in kv and "InfiniBand" not in kv
            assert r["kv_link_GBps"] == pytest.approx(NVLINK_KV / 1e9)
        else:
            assert "different NVL72 racks" in kv and "InfiniBand" in kv
            assert r["kv_link_GBps"] == pytest.approx(IB / 1e9)


@pytest.mark.slow
def test_the_best_decode_pool_is_priced_inside_one_nvlink_domain(plan144):
    best = plan144["ranked"][0]
    dec = best["decode"]
    colocated = best["architecture"] == "colocated"
    assert _gpus(dec) <= RACK and "NVLink only, one NVL72 domain" in best["links"][0 if colocated else 1]
    if dec.get("dp", 1) > 1:
        notes = " ".join(_step(_gpus(dec)).decode_step(32 * _gpus(dec), 2048).notes)
        assert "spans" not in notes and "InfiniBand" not in notes
    if colocated:
        return
    # the best row may span racks (two DEP16 decode workers beside 20 TP4 prefill workers: 112 GPUs)
    # or not; its KV transfer of one 1024-token prompt by hand either way: DeepSeek-R1's latent is
    # 61 layers x (512 + 64) values of 2 bytes (BF16 KV) a token
    rate = IB if best["gpus"] > RACK else NVLINK_KV
    by_hand = 61 * (512 + 64) * 2 * 1024 / rate
    priced = kv_transfer_seconds(_step(16), best["kv_link_GBps"] * 1e9)(1024)
    assert priced == pytest.approx(by_hand, rel=1e-9)


@pytest.mark.slow
def test_a_decode_pool_across_racks_pays_the_inter_rack_bound(plan144):
    """DEP128 on two racks: TensorRT-LLM's MNNVL all-to-all runs inside one NVLink domain only, so it
    gathers and reduce-scatters with NCCL (its AllGatherReduceScatter fallback), priced as the 72-GPU
    time plus the other rack's share of the gathered buffer over each GPU's InfiniBand NIC."""
    row = next(r for r in plan144["ranked"] if _gpus(r["decode"]) == 128)
    assert "spans 2 NVL72 racks of 72" in row["links"][1] and "InfiniBand" in row["links"][1]
    sm = _step(128)
    assert sm.ep_comm == "allgather" and _step(64).ep_comm == "mnnvl"
    notes = " ".join(sm.decode_step(32 * 128, 2048).notes)
    assert "spans 2 NVL72 racks" in notes and "InfiniBand" in notes
    mt, _ = moe_tables("gb200", "trtllm")
    size = 32 * 128 * 7168 * 2  # 32 tokens a rank, hidden 7168, BF16: the gathered buffer, bytes
    # by hand: 56 of the 128 ranks sit in the other rack; their share of the buffer enters each rack
    # once, spread over its 72 NICs at 100 GB/s: 56/128 x 58.7 MB / 72 / 100 GB/s = 3.57 us
    inter_ms = 56 / 128 * size / 72 / IB * 1e3
    assert inter_ms == pytest.approx(3.568e-3, rel=1e-3)
    assert mt.all_gather(128, size).ms == pytest.approx(mt.all_gather(72, size).ms + inter_ms, rel=1e-9)
    # and the whole step is slower than the same load per GPU inside one rack (DEP64, MNNVL)
    assert sm.decode_step(32 * 128, 2048).total_s > _step(64).decode_step(32 * 64, 2048).total_s
    assert tables_for("gb200").topology.domains(128) == 2
