"""How attention-DP ranks reach an expert-parallel MoE layer's experts (servesim.hardware.engines.EP_COMMS).

Every engine's default without DeepEP gathers every rank's tokens to every GPU and reduce-scatters
the experts' outputs back; each check prices the same operation independently from the NCCL tables
and DeepEP's measured kernels, by hand.
"""

from __future__ import annotations

import pytest

from servesim._checks import ParameterError
from servesim.hardware.engines import EP_COMMS, engine_profile
from servesim.hardware.model_config import find_architecture
from servesim.hardware.moe_kernels import moe_tables
from servesim.hardware.moe_step import MoEStepModel, Parallelism
from servesim.hardware.pricer import Deployment
from servesim.hardware.stepmodel import Chunk
from servesim.plan.predict import harness_deployment
from servesim.sim.batching import Benchmark
from servesim.sim.client import Client

R1 = "deepseek-ai/DeepSeek-R1"
HIDDEN = 7168


DEP8 = Parallelism(1, 8, 8)


def _sm(engine: str, gpu: str = "h200", comm: str | None = None, dtype: str | None = None,
        par: Parallelism = DEP8) -> MoEStepModel:
    arch = find_architecture(R1)
    assert arch is not None
    eng = engine_profile(engine, gpu=gpu, tp=par.tp * par.dp, dp=par.dp)
    return MoEStepModel(arch, gpu, par, engine=eng, ep_comm=comm, dtype=dtype)


def _op(step, name: str):
    return {o.name: o for o in step.ops}[name]


@pytest.mark.parametrize("engine", ["sglang", "trtllm", "vllm"])
def test_every_engine_gathers_and_reduce_scatters_by_default(engine: str) -> None:
    """DP8 + EP8 of DeepSeek-R1 on H200, 64 sequences a rank (a captured batch): the default is the
    all-gather of the 512 tokens' BF16 activations (7.3 MB) and the reduce-scatter of their outputs
    over the 8 GPUs, NCCL's measured times added, once per MoE layer; no DeepEP operation."""
    assert engine_profile(engine, gpu="h200").ep_comm == "allgather"
    sm = _sm(engine)
    step = sm.decode_step(512, 2000)
    op = _op(step, "dp gather + scatter")
    mt, _ = moe_tables("h200", engine)
    assert mt is not None
    size = 512 * HIDDEN * 2.0
    want = (mt.all_gather(8, size).ms + mt.reduce_scatter(8, size).ms) * 1e-3
    assert op.priced_s == pytest.approx(want, rel=1e-12)
    assert op.count == 58 and op.measured
    assert op.wire_bytes == pytest.approx(7 / 8 * 2 * size)
    assert "ep dispatch + combine" not in {o.name for o in step.ops}
    # 30-45 us for two 7.3 MB collectives over NVLink: between NVLink's bound and a few times it
    assert 2 * 7 / 8 * size / 450e9 < op.priced_s < 6 * 2 * 7 / 8 * size / 450e9


def test_deepep_prices_its_low_latency_kernels_in_decode_and_normal_ones_when_forced() -> None:
    """The same step with DeepEP: the low-latency dispatch and combine of the rank's 64 tokens; forced
    to the normal kernels (TensorRT-LLM's TRTLLM_FORCE_ALLTOALL_METHOD=DeepEP), the normal ones, dearer
    for 64 tokens; with a prefill chunk in the step both take the normal kernels."""
    mt, _ = moe_tables("h200", "trtllm")
    assert mt is not None

    def pair(mode: str, tokens: float) -> float:
        args = (tokens, HIDDEN, 8, 256, 8)
        return (mt.deepep("dispatch", mode, *args).ms + mt.deepep("combine", mode, *args).ms) * 1e-3

    ll = _op(_sm("trtllm", comm="deepep").decode_step(512, 2000), "ep dispatch + combine")
    normal = _op(_sm("trtllm", comm="deepep_normal").decode_step(512, 2000), "ep dispatch + combine")
    assert ll.priced_s == pytest.approx(pair("ll", 64), rel=1e-12)
    assert normal.priced_s == pytest.approx(pair("normal", 64), rel=1e-12)
    assert normal.priced_s > ll.priced_s
    chunk = (Chunk(tokens=1024),)
    mixed = _op(_sm("trtllm", comm="deepep").step(8, 2000, chunk), "ep dispatch + combine")
    assert mixed.priced_s == pytest.approx(pair("normal", (8 + 1024) / 8), rel=1e-12)


def test_sglang_gathers_a_prefilling_step_with_two_all_reduces() -> None:
    """SGLang's SUM_LEN mode: a step that extends copies its tokens into a zeroed buffer of every rank's
    tokens, all-reduces it and all-reduces the experts' output again, two all-reduces of the step's
    BF16 activations; TensorRT-LLM gathers and reduce-scatters the same step as it does a decode."""
    chunk = (Chunk(tokens=2048),)
    tokens = 8 + 2048
    size = tokens * HIDDEN * 2.0
    sg = _sm("sglang")
    op = _op(sg.step(8, 2000, chunk), "dp gather + scatter")
    assert op.priced_s == pytest.approx(2 * sg.tables.allreduce(8, size).ms * 1e-3, rel=1e-12)
    trt = _sm("trtllm")
    mt, _ = moe_tables("h200", "trtllm")
    assert mt is not None
    op = _op(trt.step(8, 2000, chunk), "dp gather + scatter")
    want = (mt.all_gather(8, size).ms + mt.reduce_scatter(8, size).ms) * 1e-3
    assert op.priced_s == pytest.approx(want, rel=1e-12)


def test_tensorrt_llm_gathers_nvfp4_activations_quantized() -> None:
    """TensorRT-LLM quantizes NVFP4 experts' activations before its all-gather (4 bits and an FP8 scale
    per 16 values: 0.5625 bytes a value) and reduce-scatters BF16 outputs; SGLang gathers BF16."""
    mt, _ = moe_tables("b200", "trtllm")
    assert mt is not None
    tokens = 8 * 64
    op = _op(_sm("trtllm", gpu="b200", dtype="fp4").decode_step(tokens, 2000), "dp gather + scatter")
    want = (mt.all_gather(8, tokens * HIDDEN * 0.5625).ms + mt.reduce_scatter(8, tokens * HIDDEN * 2.0).ms)
    assert op.priced_s == pytest.approx(want * 1e-3, rel=1e-12)
    assert op.wire_bytes == pytest.approx(7 / 8 * tokens * HIDDEN * 2.5625)


def test_the_step_never_gets_cheaper_with_more_sequences_whatever_the_exchange() -> None:
    """A DP8 + EP8 decode step walked over 1-600 sequences never falls, for each exchange."""
    for comm in EP_COMMS:
        sm = _sm("sglang", comm=comm)
        last = 0.0
        for n in range(1, 601, 7):
            t = sm.decode_step(n, 2000).total_s
            assert t >= last - 1e-12, (comm, n)
            last = t


def test_an_unknown_exchange_is_refused_by_name() -> None:
    with pytest.raises(ParameterError, match="ep_comm"):
        _sm("sglang", comm="nccl")
    with pytest.raises(ParameterError, match="ep_comm"):
        Deployment(model=R1, gpu="h200", engine="sglang", dp=8, ep=8, ep_comm="mnnvl")


def test_inferencemax_h100_tensorrt_llm_recipes_force_deepep() -> None:
    """InferenceMAX's H100 Dynamo + TensorRT-LLM recipes set TRTLLM_FORCE_ALLTOALL_METHOD=DeepEP for both
    pools: an attention-DP pool there runs DeepEP's normal kernels; the H200 recipes keep the
    all-gather, and so does a tensor-parallel pool (no attention DP, nothing to exchange)."""
    bench = Benchmark(isl=1024, osl=1024, concurrency=231, client=Client("inferencemax"))
    kw = dict(model=R1, dtype="fp8", engine="trtllm", workers=3, peer_workers=1)
    dep = harness_deployment(bench, gpu="h100-sxm", tp=1, dp=16, ep=16, pool="decode", **kw)
    assert dep.ep_comm == "deepep_normal"
    pre = harness_deployment(bench, gpu="h100-sxm", tp=1, dp=16, ep=16, pool="prefill", **kw)
    assert pre.ep_comm == "deepep_normal"
    assert harness_deployment(bench, gpu="h200", tp=1, dp=8, ep=8, pool="decode", **kw).ep_comm is None
    assert harness_deployment(bench, gpu="h100-sxm", tp=16, dp=1, ep=16, pool="decode", **kw).ep_comm is None


def test_the_cli_flag_chooses_the_exchange_and_refuses_another() -> None:
    """``predict --ep-comm``: DeepEP forced to its normal kernels costs the DP8 + EP8 decode more than
    the default all-gather (the step's communication grows), and an unknown value exits 2 naming the
    flag and the choices."""
    import json

    from tests.cli_helpers import run_cli

    base = ["predict", "--model", R1, "--gpu", "h200", "--tp", "1", "--dp", "8", "--ep", "8", "--isl", "1024",
            "--osl", "1024", "--concurrency", "64", "--engine", "sglang", "--format", "json"]
    got: dict[str | None, float] = {}
    for comm in (None, "allgather", "deepep-normal"):
        res = run_cli(*base, *(["--ep-comm", comm] if comm else []))
        assert res.returncode == 0, res.stderr
        got[comm] = json.loads(res.stdout)["mean_tpot_ms"]
    assert got[None] == got["allgather"]
    assert got["deepep-normal"] > got["allgather"]
    bad = run_cli(*base, "--ep-comm", "nccl")
    assert bad.returncode == 2 and "--ep-comm" in bad.stderr and "deepep-normal" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_gather_across_two_nodes_adds_the_other_nodes_share_over_the_nics() -> None:
    """An all-gather or reduce-scatter over 16 H100s (two nodes of 8) is the node's measured time plus
    the other node's half of the buffer taken in over the node's 8 NICs (S / 2 / 8 at the NIC rate: the
    hierarchical bound, so optimistic, and said so); an all-to-all sends each GPU's other-node half over
    its own NIC (S / 2)."""
    mt, _ = moe_tables("h100-sxm", "sglang")
    assert mt is not None
    nic = mt.internode_bytes_per_s
    for size in (1e5, 1.4e7):
        for op in ("all_gather", "reduce_scatter"):
            two, one = getattr(mt, op)(16, size), getattr(mt, op)(8, size)
            assert two.ms == pytest.approx(one.ms + size / 2 / 8 / nic * 1e3, rel=1e-12)
            assert not two.measured and "spans 2 nodes of 8" in two.note and "optimistic" in two.note
        a2a = mt.alltoall(16, size)
        assert a2a.ms == pytest.approx(mt.alltoall(8, size).ms + size / 2 / nic * 1e3, rel=1e-12)
