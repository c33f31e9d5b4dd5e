"""Plans at rack scale (issue 49, item 5): a 72-GPU DeepSeek-R1 plan on GB200 searches decode pools
across the NVLink domain (DEP16-DEP64 beside one node's sizes) and its best decode pool is priced
inside one NVLink domain.  One screen (no engine-model confirmation) of about 10 s, shared."""

from __future__ import annotations

import pytest

from servesim.hardware.engines import engine_profile
from servesim.hardware.kernels import tables_for
from servesim.hardware.moe_step import MoEStepModel, Parallelism
from servesim.hardware.pricer import model_architecture
from servesim.hardware.topology import rack_dep_sizes
from servesim.plan.search import PlanQuestion, _shapes, capacity_plan

R1 = "deepseek-ai/DeepSeek-R1"


def _q(gpu: str, gpus: int) -> PlanQuestion:
    return PlanQuestion(model=R1, gpu=gpu, gpus=gpus, isl=1024, osl=1024, slo_ttft_s=1.0, slo_tpot_s=0.04,
                        dtypes=("fp8_block",), engine="trtllm", chunks=(8192,), confirm=False)


def test_the_search_spans_the_nvlink_domain_on_a_rack_only():
    assert rack_dep_sizes(tables_for("gb200").topology, 256) == (16, 32, 64)  # 24, 48, 72 do not divide 256
    assert rack_dep_sizes(tables_for("gb200").topology, 384) == (16, 24, 32, 48, 64)  # Kimi-K2's 384
    assert rack_dep_sizes(tables_for("b200").topology, 256) == ()
    rack = {p for p in _shapes(_q("gb200", 72), None)[2] if p[0] == 1}
    node = {p for p in _shapes(_q("b200", 72), None)[2] if p[0] == 1}
    assert {(1, 16, 16), (1, 32, 32), (1, 64, 64)} <= rack  # DEP16-64 in one NVL72 domain
    assert (1, 64, 64) not in node  # HGX: whole nodes of 8 up to 4 (DEP32 over RDMA at most)
    assert max(p[1] for p in _shapes(_q("gb200", 36), None)[2]) == 32  # a 36-GPU budget: up to DEP32


@pytest.fixture(scope="module")
def plan72():
    return capacity_plan(_q("gb200", 72))


def test_a_72_gpu_plan_prices_its_best_decode_pool_inside_one_nvlink_domain(plan72):
    rows = plan72["ranked"]
    assert rows and any(r.get("decode", {}).get("dp", 1) >= 32 for r in rows)  # wide DEP screened
    best = rows[0]
    assert best["gpus"] <= 72
    dec = best.get("decode") or best  # disaggregated: its decode pool; colocated: the replica
    par = Parallelism(dec["tp"], dec.get("dp", 1), dec.get("ep", 1))
    assert tables_for("gb200").topology.within(par.gpus * dec.get("workers", 1))
    arch = model_architecture(R1)
    sm = MoEStepModel(arch, "gb200", par, dtype="fp8_block", engine=engine_profile("trtllm", gpu="gb200"))
    st = sm.decode_step(32 * par.gpus, 2048)
    notes = " ".join((*st.notes, *sm.pricing_notes))
    assert "spans" not in notes and "InfiniBand" not in notes  # no link leaves the rack
