"""DeepSeek Sparse Attention of DeepSeek-V3.2 and GLM-5 (servesim.hardware.sparse_attention)."""

from __future__ import annotations

import dataclasses

import pytest

from servesim.hardware.engines import engine_profile
from servesim.hardware.model_config import find_architecture
from servesim.hardware.moe_step import MoEStepModel, Parallelism
from servesim.hardware.shape import ModelShape
from servesim.hardware.sparse_attention import DSA_FLOOR_S, DSA_MULTIPLE, dsa_table, indexer_work
from servesim.hardware.stepmodel import Chunk


def _arch(name: str) -> ModelShape:
    arch = find_architecture(name)
    assert arch is not None, name
    return arch


def _model(arch: ModelShape, gpu: str, engine: str, kv: str = "fp8", tp: int = 8) -> MoEStepModel:
    return MoEStepModel(arch, gpu, Parallelism(tp, 1, 1), engine=engine_profile(engine, gpu=gpu), kv_dtype=kv)


# --------------------------------------------------------------------------- config and counts


def test_dsa_fields_and_the_indexer_by_hand() -> None:
    a = _arch("deepseek-ai/DeepSeek-V3.2")
    assert (a.index_heads, a.index_head_dim, a.index_topk) == (64, 128, 2048) and a.sparse
    h, q = 7168, 1536
    # wq_b (q_lora -> 64 x 128), wk (h -> 128), weights_proj (h -> 64) in each of 61 layers
    assert a.breakdown()["indexer"] == 61 * (q * 64 * 128 + h * 128 + h * 64)
    v3 = _arch("deepseek-ai/DeepSeek-V3")
    # the same model otherwise: the difference is the indexer and its k_norm (weight and bias)
    assert a.params - v3.params == 61 * (q * 64 * 128 + h * 128 + h * 64 + 2 * 128)
    g = _arch("nvidia/GLM-5-NVFP4")
    assert (g.index_heads, g.index_topk, g.layers, g.moe_layers) == (32, 2048, 78, 75)
    # NVIDIA's NVFP4 release keeps attention and the indexer in BF16 (its exclude_modules)
    assert set(g.quantized_parts or ()) == {"experts", "shared_experts", "dense_mlp"}


PUBLISHED = [
    # DeepSeek's 685B counts the MTP layer and its stored copies of the embedding and head
    ("deepseek-ai/DeepSeek-V3.2", "params+mtp", 685e9, 0.5e9, "model card: 685B"),
    ("deepseek-ai/DeepSeek-V3.2", "active_matmul_params", 37e9, 0.5e9, "V3's 37B activated, + 0.85B indexer"),
    ("nvidia/GLM-5-NVFP4", "params", 744e9, 0.5e9, "GLM-5 report: 744B total"),
    # the report's 40B: 40.83e9 counted without the input table (41.78e9 with); its rounding unstated
    ("nvidia/GLM-5-NVFP4", "active_matmul_params", 40e9, 1.0e9, "GLM-5 report: 40B activated"),
]


@pytest.mark.parametrize(("hf_id", "prop", "published", "tol", "where"), PUBLISHED,
                         ids=[f"{r[0]}-{r[1]}" for r in PUBLISHED])
def test_dsa_counts_match_the_published_ones(hf_id: str, prop: str, published: float, tol: float,
                                             where: str) -> None:
    a = _arch(hf_id)
    if prop == "params+mtp":
        value = a.params + a.mtp_params + 2 * a.vocab * a.hidden
    else:
        value = getattr(a, prop)
    assert abs(value - published) <= tol, f"{hf_id} {prop} = {value:,.0f}, published {where}"


def test_kv_holds_the_latent_and_the_indexer_keys() -> None:
    a = _arch("deepseek-ai/DeepSeek-V3.2")
    # per layer: the 512 + 64 latent in the KV dtype, the 128 FP8 indexer key and one FP32 scale
    assert a.kv_bytes_per_token(2.0) == 61 * (576 * 2 + 128 + 4)
    assert a.kv_bytes_per_token(1.0) == 61 * (576 + 128 + 4)
    sm = _model(a, "h200", "vllm", kv="bf16")
    assert sm.kv_bytes_per_token_per_gpu == 61 * (576 * 2 + 132)  # replicated on every TP rank


def test_indexer_weights_are_replicated() -> None:
    a = _arch("deepseek-ai/DeepSeek-V3.2")
    v3 = dataclasses.replace(_arch("deepseek-ai/DeepSeek-V3"), name=a.name)
    one, eight = _model(a, "h200", "vllm", tp=1), _model(a, "h200", "vllm", tp=8)
    base1, base8 = _model(v3, "h200", "vllm", tp=1), _model(v3, "h200", "vllm", tp=8)
    # the indexer (and its norm) adds the same bytes to each GPU at TP1 and TP8
    assert one.weight_bytes_per_gpu - base1.weight_bytes_per_gpu == pytest.approx(
        eight.weight_bytes_per_gpu - base8.weight_bytes_per_gpu)


# --------------------------------------------------------------------------- the operation

CASES = [(arch, gpu, engine, kv) for arch in ("deepseek-ai/DeepSeek-V3.2", "nvidia/GLM-5-NVFP4")
         for gpu in ("h100", "h200", "b200") for engine in ("vllm", "sglang", "trtllm")
         for kv in ("bf16", "fp8")]


@pytest.mark.parametrize(("hf_id", "gpu", "engine", "kv"), CASES)
def test_indexer_between_its_bound_and_the_multiple_and_monotone(hf_id: str, gpu: str, engine: str,
                                                                 kv: str) -> None:
    sm = _model(_arch(hf_id), gpu, engine, kv)
    grid = []
    for b in (1, 4, 16, 64, 256, 700):
        row = []
        for c in (100, 2048, 3000, 4096, 16384, 65536, 131072):
            op = next(o for o in sm.step(b, c, bound=False).ops if o.name == "dsa indexer + top-k")
            light = op.light_one(sm.peaks)
            assert light <= op.priced_s <= DSA_MULTIPLE * light + DSA_FLOOR_S, (b, c, op.priced_s, light)
            row.append(op.priced_s)
        assert row == sorted(row), b  # a longer cache never costs less
        grid.append(row)
    for col in zip(*grid, strict=True):
        assert list(col) == sorted(col)  # nor more sequences


def test_indexer_bytes_by_hand() -> None:
    a = _arch("deepseek-ai/DeepSeek-V3.2")
    nbytes, flops = indexer_work(a, 32, 10_000)
    assert nbytes == 32 * 10_000 * (128 + 4)
    assert flops == 2 * 64 * 128 * 32 * 10_000


def test_a_table_that_does_not_grow_is_not_used_for_the_indexer() -> None:
    # TensorRT-LLM 1.3.0rc20's DSA module on the H200 is flat from 2,048 to 32,768 cached tokens
    sm = _model(_arch("deepseek-ai/DeepSeek-V3.2"), "h200", "trtllm", kv="bf16")
    op = next(o for o in sm.step(32, 32768, bound=False).ops if o.name == "dsa indexer + top-k")
    assert not op.measured and "grows less" in op.note
    vllm = _model(_arch("deepseek-ai/DeepSeek-V3.2"), "h200", "vllm", kv="bf16")
    op = next(o for o in vllm.step(32, 32768, bound=False).ops if o.name == "dsa indexer + top-k")
    assert op.measured and dsa_table("h200", "vllm") is not None


def test_sparse_decode_grows_less_with_context_than_dense_mla() -> None:
    a = _arch("deepseek-ai/DeepSeek-V3.2")
    dense = dataclasses.replace(a, index_heads=0, index_head_dim=0, index_topk=0,
                                quantized_parts=tuple(p for p in a.quantized_parts or () if p != "indexer"))
    sparse_sm, dense_sm = _model(a, "h200", "vllm"), _model(dense, "h200", "vllm")
    grow_sparse = sparse_sm.step(64, 65536).attention_s - sparse_sm.step(64, 4096).attention_s
    grow_dense = dense_sm.step(64, 65536).attention_s - dense_sm.step(64, 4096).attention_s
    assert 0 < grow_sparse < grow_dense
    # below the top-k the sparse MLA reads what dense MLA reads
    ops = {o.name: o for o in sparse_sm.step(64, 1000).ops}
    dense_ops = {o.name: o for o in dense_sm.step(64, 1000).ops}
    assert ops["sparse mla (top 2048)"].priced_s == dense_ops["attention"].priced_s


def test_dsa_steps_within_their_bound() -> None:
    for hf_id, gpu in (("deepseek-ai/DeepSeek-V3.2", "h200"), ("nvidia/GLM-5-NVFP4", "b200")):
        sm = _model(_arch(hf_id), gpu, "vllm")
        prev = 0.0
        for b in (1, 16, 64):
            st = sm.step(b, 8192)
            assert st.sol_s <= st.total_s and st.total_s >= prev
            prev = st.total_s


def test_sparse_prefill_never_above_dense_and_monotone() -> None:
    a = _arch("deepseek-ai/DeepSeek-V3.2")
    dense = dataclasses.replace(a, index_heads=0, index_head_dim=0, index_topk=0,
                                quantized_parts=tuple(p for p in a.quantized_parts or () if p != "indexer"))
    sparse_sm, dense_sm = _model(a, "h200", "vllm"), _model(dense, "h200", "vllm")

    def mla(sm: MoEStepModel, tokens: int, context: int = 0) -> float:
        ops = sm.step(0, 0, (Chunk(tokens, context, 1),)).ops
        return sum(o.priced_s for o in ops if o.name in ("attention", "sparse mla (top 2048)"))

    prev = 0.0
    for tokens in (512, 2048, 4096, 16384, 32768):
        s = mla(sparse_sm, tokens)
        assert s <= mla(dense_sm, tokens) * (1 + 1e-12) and s >= prev
        prev = s
        st = sparse_sm.step(0, 0, (Chunk(tokens, 0, 1),))
        assert st.sol_s <= st.total_s
    # up to the top-k the sparse kernel attends to every key, as dense MLA does
    assert mla(sparse_sm, 2048) == mla(dense_sm, 2048)
    assert mla(sparse_sm, 4096, 4096) <= mla(dense_sm, 4096, 4096)
