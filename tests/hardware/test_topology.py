"""Topology as data (issue 49, item 2): HGX nodes of 8 joined by RDMA, NVL72 racks of 18 trays x 4
GPUs in one NVLink domain joined by InfiniBand, and the collectives priced on them.

The expectations are physical: a group inside one NVLink domain crosses no network, so it is never
slower than its ring traffic over NVLink allows and never pays the scale-out rate; a group that
leaves the domain pays at least the scale-out share of its traffic at the scale-out rate; growing
a group never makes its collective cheaper; an HGX group crossing nodes is slower than the same
group inside one NVL72 rack.
"""

from __future__ import annotations

import pytest

from servesim._checks import ParameterError
from servesim.hardware.kernels import nccl_domain_us, tables_for
from servesim.hardware.moe_kernels import moe_tables
from servesim.hardware.topology import Topology, kv_link, kv_path, links_note, rack_dep_sizes, topology_for
from servesim.hardware.wide_ep import mnnvl_alltoall, mnnvl_table

MIB = 2**20


def test_nvl72_racks_are_18_trays_of_4_in_one_nvlink_domain():
    for gpu in ("gb200", "gb300"):
        t = tables_for(gpu).topology
        assert (t.kind, t.domain_gpus, t.tray_gpus, t.mnnvl) == ("nvl72", 72, 4, True)
        assert t.domain_gpus // t.tray_gpus == 18
        assert t.scale_out == "InfiniBand" and t.scale_out_bytes_per_s == 100e9  # 800 Gb/s a GPU
        assert tables_for(gpu).nvlink_bytes_per_s == 900e9  # NVLink 5, each way


@pytest.mark.parametrize("gpu", ["h100", "h200", "b200", "b300"])
def test_hgx_nodes_hold_8_gpus_joined_by_rdma(gpu):
    t = tables_for(gpu).topology
    assert (t.kind, t.domain_gpus, t.tray_gpus, t.mnnvl, t.scale_out) == ("hgx", 8, 8, False, "RDMA")
    assert t.scale_out_bytes_per_s == tables_for(gpu).internode_bytes_per_s


def test_domains_and_links_in_words():
    t = topology_for("gb200")
    assert [t.domains(g) for g in (1, 4, 72, 73, 144)] == [1, 1, 1, 2, 2]
    assert [t.trays(g) for g in (1, 4, 5, 32, 72)] == [1, 1, 2, 8, 18]
    assert "one NVL72 domain (8 trays of 4" in t.links(32) and "InfiniBand" not in t.links(32)
    assert "spans 2 NVL72 racks of 72" in t.links(144) and "InfiniBand" in t.links(144)
    hgx = topology_for("h100_sxm")
    assert "one node of 8" in hgx.links(8)
    assert "spans 4 nodes of 8" in hgx.links(32) and "RDMA" in hgx.links(32)
    # the note names only groups that leave a tray (an HGX node's group of 8 says nothing new)
    assert links_note(hgx, {"TP8 all-reduce": 8}) == ""
    assert links_note(t, {"TP4 all-reduce": 4}) == ""
    assert links_note(t, {"TP8 all-reduce": 8}).startswith("links: TP8 all-reduce of 8 GPUs: NVLink only")


def test_a_topology_is_checked():
    with pytest.raises(ParameterError, match="tray_gpus"):
        Topology("x", "nvl72", 72, 5, "InfiniBand", 100e9)
    with pytest.raises(ParameterError, match="kind"):
        Topology("x", "torus", 8, 8, "RDMA", 50e9)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("size", [64 * 1024, 4 * MIB, 256 * MIB])
def test_allreduce_inside_the_rack_is_bounded_by_nvlink(engine, size):
    """Within the domain: at least the ring traffic 2 (n-1)/n x bytes over NVLink and NCCL's own latency
    for n ranks, at most 4x the larger of the two (the fitted bus shares are 50-90% of NVLink and the
    latency model is NCCL's); and monotone in n.  No term at the InfiniBand rate."""
    t = tables_for("gb200", engine)
    prev = 0.0
    for n in (4, 8, 16, 32, 64, 72):
        ms = t.allreduce(n, size).ms
        ring = 2 * (n - 1) / n * size / t.nvlink_bytes_per_s * 1e3
        assert ring <= ms <= 4 * max(ring, nccl_domain_us(n, 2) * 1e-3, t.allreduce(4, size).ms), (n, ms)
        assert ms >= prev
        prev = ms
        assert "spans" not in t.allreduce(n, size).note


def test_allreduce_across_racks_pays_infiniband():
    t = tables_for("gb200", "trtllm")
    size = 256 * MIB
    inside, across = t.allreduce(72, size).ms, t.allreduce(144, size).ms
    ib = 2 * (2 - 1) / 2 * (size / 72) / 100e9 * 1e3  # each rack's share over the racks' ring
    assert across >= inside + ib * 0.999
    assert "spans 2 NVL72 racks of 72" in t.allreduce(144, size).note


def test_a_32_gpu_group_is_cheaper_in_one_rack_than_over_four_hgx_nodes():
    """The issue's example: 32 GPUs all-reduce on GB200 was priced as 4 nodes of 8 at 100 GB/s; in one
    NVL72 domain it stays on NVLink (900 GB/s), so a large message is faster than on B200 nodes
    joined by RDMA (same NVLink rate inside a node, and their inter-node ring is the optimistic bound)."""
    size = 256 * MIB
    gb = tables_for("gb200", "trtllm").allreduce(32, size)
    hgx = tables_for("b200", "trtllm").allreduce(32, size)
    assert gb.ms < hgx.ms
    assert "spans 4 nodes of 8" in hgx.note and "spans" not in gb.note


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter", "alltoall"])
def test_nccl_collectives_inside_the_rack(op):
    mt, _ = moe_tables("gb200", "sglang")
    size = 64 * MIB
    prev = 0.0
    for n in (4, 8, 32, 72):
        lk = getattr(mt, op)(n, size)
        ring = (n - 1) / n * size / mt.nvlink_bytes_per_s * 1e3
        assert ring <= lk.ms <= 4 * max(ring, nccl_domain_us(n) * 1e-3, getattr(mt, op)(4, size).ms)
        assert lk.ms >= prev and "spans" not in lk.note
        prev = lk.ms
    assert "spans 2 NVL72 racks" in getattr(mt, op)(144, size).note


def test_kv_transfer_inside_one_rack_rides_nvlink():
    gb, hgx = tables_for("gb200"), tables_for("b200")
    rate, note = kv_link(gb.topology, gb.nvlink_bytes_per_s, 36)
    assert rate == pytest.approx(0.89 * 900e9) and "NVLink" in note
    assert kv_link(gb.topology, gb.nvlink_bytes_per_s, 144) is None  # two racks: the scale-out network
    assert kv_link(hgx.topology, hgx.nvlink_bytes_per_s, 8) is None  # HGX pools sit in different chassis


def test_kv_path_of_a_pair_on_one_tray_in_one_rack_and_across_racks():
    """Inside one NVL72 rack every pair goes through NVSwitch at 0.89 x 900 GB/s, on one tray or
    between trays (the note says which); a deployment over two racks moves its KV over InfiniBand at
    the NIC's 100 GB/s a GPU; an HGX node has no placement of its own (the caller's link)."""
    gb = tables_for("gb200")
    tray, rack, two = (kv_path(gb.topology, gb.nvlink_bytes_per_s, n) for n in (4, 40, 104))
    assert tray is not None and rack is not None and two is not None
    assert tray.bytes_per_s == rack.bytes_per_s == pytest.approx(0.89 * 900e9)
    assert (tray.name, tray.within, rack.name, rack.within) == ("nvlink", True, "nvlink", True)
    assert "(4 of 72 GPUs, one tray)" in tray.note and "(40 of 72 GPUs, 10 trays of 4)" in rack.note
    assert (two.name, two.within, two.bytes_per_s) == ("infiniband", False, 100e9)
    assert "104 GPUs span 2 racks of 72" in two.note and "InfiniBand at 100 GB/s" in two.note
    assert two.bytes_per_s < rack.bytes_per_s  # leaving the rack is never faster
    assert kv_link(gb.topology, gb.nvlink_bytes_per_s, 104) is None  # kv_link: NVLink only
    assert kv_path(tables_for("b200").topology, 900e9, 16) is None


def test_rack_dep_sizes_across_racks_need_a_budget_of_several_racks():
    gb = tables_for("gb200").topology
    assert rack_dep_sizes(gb, 256, 72) == (16, 32, 64)
    assert rack_dep_sizes(gb, 256, 144) == (16, 32, 64, 128)  # DEP128 over two racks
    assert rack_dep_sizes(gb, 384, 144) == (16, 24, 32, 48, 64, 96, 128)  # Kimi-K2's 384 experts
    assert rack_dep_sizes(gb, 256, 288) == (16, 32, 64, 128, 256)
    assert rack_dep_sizes(tables_for("b200").topology, 256, 144) == ()


def test_mnnvl_stops_at_the_nvlink_domain():
    """TensorRT-LLM's MNNVL workspace is one fabric memory of the NVLink domain: no table, and no
    all-to-all, for an EP group that leaves it."""
    mt, _ = moe_tables("gb200", "trtllm")
    assert mnnvl_table(mt, 64) is not None and mnnvl_table(mt, 72) is not None
    assert mnnvl_table(mt, 128) is None
    assert mnnvl_alltoall(mt, "fp8_block", 32, 7168, 8, 64) is not None
    assert mnnvl_alltoall(mt, "fp8_block", 32, 7168, 8, 128) is None
