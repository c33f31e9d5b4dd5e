"""DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5) as operations of a step, priced from measured tables.

A DSA layer is an MLA layer whose attention reads only ``index_topk`` of the cached tokens: a
lightning indexer scores every cached token (``H_I`` heads of width ``d_I`` over an FP8 key cache of
``d_I`` values a token), a top-k keeps the best ``index_topk`` (2,048), and MLA attends to those
(DeepSeek ``inference/model.py`` ``Indexer`` and ``MLA.forward``; vLLM
``model_executor/models/deepseek_v2.py`` ``Indexer`` and the ``FLASHMLA_SPARSE`` backend; SGLang
``layers/attention/nsa``).

**Operations** (:func:`dsa_attention_ops`, appended to the MLA projections the step model lists as
for every MLA layer):

* **indexer projections** (GEMMs, the step model's tables): ``wq_b (m, H_I d_I, q_lora)``, ``wk (m, d_I,
  h)`` and ``weights_proj (m, H_I, h)`` on every rank (the indexer is not split by tensor parallelism:
  vLLM builds them as ``ReplicatedLinear``);
* **sparse MLA**: the MLA decode kernel of the step model's tables at a context of ``min(c, index_topk)``
  (what the sparse kernel reads: the kept tokens' latents), MLA's absorbed matmuls as for MLA; a prefill
  chunk's queries up to position ``index_topk`` as dense MLA prefill, each later one over ``index_topk``
  keys (:func:`sparse_chunk_s`: the MLA prefill tables' chunk of ``k`` tokens behind ``k``, scaled to
  its query-key pairs);
* **indexer and top-k**: the engine's measured DSA decode module (``dsa_generation_module_perf``: the
  whole module at ``b`` sequences of ``c`` cached tokens, build: ``scripts/build_attention_kind_tables.py``)
  gives what the indexer adds past the top-k, ``T(b, c) - T(b, min(c, k))`` (the rest of the module,
  projections and the sparse MLA over ``k`` tokens, does not grow past ``c = k``), on top of the
  indexer's own roofline at ``min(c, k)`` at the tables' fitted HBM share and two kernel launches
  (the logits and the top-k); past the longest cache the table timed at that batch, the indexer's
  roofline (the tables stop at 1,024-163,839 cached tokens depending on the batch); a table that grows
  less past the top-k than reading the keys at the HBM peak allows does not time the indexer over the
  cache (TensorRT-LLM 1.3.0rc20's rows are flat from 2,048 to 32,768 tokens) and is not used for it;
  a prefill chunk's indexer (``q`` queries over ``c + q / 2`` keys each) is
  its roofline the same way.  Where no table holds the engine, GPU and heads, the whole op is its
  roofline (marked unmeasured).

**Not used** (an open question, stated so): the measured DSA *context* modules.  vLLM 0.24.0's on the H200
(heads 16, FP8 KV) take 1.48 ms a layer for one prompt token and 48.4 ms at 32,768, where its dense MLA
context module takes 0.10 and 10.15 ms and the composite above 0.24 and 10.2 ms (projections included);
SGLang 0.5.14 keys its rows by the cached prefix and switches from dense MHA to the indexer path at 2,048.
Whether that fixed cost and growth are the engines' prefill or the collector's is not settled here, so a
DSA prefill is priced from the MLA tables as above (likely low for vLLM at long prompts).

**Speed of light**: the indexer reads each cached token's key, ``d_I + 4`` bytes (FP8 and a scale),
once per sequence and does ``2 H_I d_I`` FLOPs per query-key pair (FP8 rate); the sparse MLA reads the
kept tokens' latents (:meth:`MoEStepModel._attention_work` at a window of ``index_topk``).  The
indexer's engine price lies between its bound and ``DSA_MULTIPLE x bound + DSA_FLOOR_S``.

**Memory**: the indexer's key cache, ``d_I + 4`` bytes a token a layer whatever the KV dtype, is part of
a token's KV (:attr:`~servesim.hardware.shape.ModelShape.indexer_bytes_per_token`).

Standard library only; nothing prints.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from servesim.hardware.dtypes import BYTES_PER_VALUE
from servesim.hardware.linear_attention import (
    Grid,
    LayerPricer,
    StepRows,
    attention_kind_tables,
    table_folder,
)
from servesim.hardware.ops import Op
from servesim.hardware.stepmodel import Chunk

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.shape import ModelShape

__all__ = ["DSA_FLOOR_S", "DSA_LAUNCH_S", "DSA_MULTIPLE", "DSATable", "dsa_attention_ops", "dsa_table",
           "indexer_work", "sparse_chunk_s"]

DSA_MULTIPLE = 4.0
"""The indexer and top-k's engine price is at most this multiple of its speed of light plus
:data:`DSA_FLOOR_S` (checked over the shipped tables' grids by the tests)."""

DSA_LAUNCH_S = 2 * 2.2e-6
"""Two kernel launches (the logits, the top-k) at the step model's shortest kernel gap."""

DSA_FLOOR_S = 80e-6
"""What the measured modules add past the top-k at one sequence beyond the key read: up to 63 us over
four times the bound (SGLang 0.5.14 on the H200 at 131,072 cached tokens, 75 -> 155 us for a 17 MB key
read), the kernels' grid growing with the cache, not their bytes."""

_MODELS = {(64, 128, 2048): "deepseek_v32", (32, 128, 2048): "glm5"}
"""The tables' models by their indexer (heads, width, top-k): DeepSeek-V3.2's and GLM-5's."""


class DSATable:
    """One engine's measured DSA decode modules on one GPU, by model, heads per GPU and KV dtype."""

    def __init__(self, gpu: str, engine: str, entry: dict[str, Any]) -> None:
        self.gpu, self.engine, self.version = gpu, engine, str(entry.get("dsa_version", ""))
        self._grids = {k: Grid(v) for k, v in entry.get("dsa_decode", {}).items()}

    def grid(self, model: str, heads: int, kv_dtype: str) -> Grid | None:
        return self._grids.get(f"{model}|{heads}|{kv_dtype}")


@cache
def dsa_table(gpu: str, engine: str) -> DSATable | None:
    """The DSA tables of ``engine`` on ``gpu``, None where that engine has none there."""
    folder = table_folder(gpu)
    if folder is None:
        return None
    entry = attention_kind_tables()["gpus"][folder].get(engine, {})
    return DSATable(folder, engine, entry) if "dsa_decode" in entry else None


def indexer_work(arch: ModelShape, rows: float, context: float,
                 chunks: tuple[Chunk, ...] = ()) -> tuple[float, float]:
    """The indexer's HBM bytes and FLOPs on one GPU: ``rows`` decoding queries over ``context`` cached
    keys each, and each chunk's ``q`` queries over ``c + q / 2`` keys (its cache read once)."""
    key = arch.index_head_dim + arch.index_head_dim // 128 * 4
    pair = 2.0 * arch.index_heads * arch.index_head_dim
    nbytes = rows * context * key + sum(c.count * (c.context + c.tokens) * key for c in chunks)
    pairs = rows * context + sum(c.count * c.tokens * (c.context + c.tokens / 2) for c in chunks)
    return nbytes, pair * pairs


def _indexer_projections(model: LayerPricer, x: StepRows) -> list[Op]:
    a, h, m = model.arch, model.arch.hidden, x.m
    quantized = "indexer" in model._quantized
    d = model._table_dtype(quantized)
    w = BYTES_PER_VALUE[model.dtype] if quantized else 2.0
    ops = []
    for name, n, k in (("indexer wq_b", a.index_heads * a.index_head_dim, a.q_lora_rank),
                       ("indexer wk", a.index_head_dim, h), ("indexer weights_proj", a.index_heads, h)):
        g, good, note = model._gemm(m, n, k, d if name != "indexer weights_proj" else "bf16")
        ops.append(model._gemm_op(name, a.layers, g, m, n, k, w if name != "indexer weights_proj" else 2.0,
                                  d, good, note))
    return ops


def dsa_attention_ops(model: LayerPricer, x: StepRows) -> list[Op]:
    """The indexer projections, the indexer and top-k, and the sparse MLA of a DSA step's layers."""
    a = model.arch
    L, k = a.layers, a.index_topk
    ops = _indexer_projections(model, x)
    ctx = x.context + (x.positions - 1) / 2 + 1
    t_attn, good = model._attention(x.b, ctx, (), k, x.positions) if x.b > 0 else (0.0, True)
    for ch in x.rank_chunks:
        t, ok = sparse_chunk_s(model, ch)
        t_attn, good = t_attn + t, good and ok
    nbytes, flops = model._attention_work(x.b, x.context, x.positions, x.rank_chunks, k)
    note = model.mla_prefill_note if x.rank_chunks else ""
    ops.append(Op(f"sparse mla (top {k})", "attention", L, t_attn, nbytes=nbytes, flops=flops,
                  measured=good, note=note))
    ops.append(_indexer_op(model, x, ctx))
    return ops


def sparse_chunk_s(model: LayerPricer, ch: Chunk) -> tuple[float, bool]:
    """One layer's sparse MLA of a prefill chunk (seconds, measured): its queries up to the top-k
    position attend causally as dense MLA does (the step model's MLA prefill tables); each later query
    attends to ``index_topk`` keys, priced as chunks of ``k`` tokens behind ``k`` cached ones scaled to
    their query-key pairs (``k x k`` of the measured ``k x 1.5 k``)."""
    k = model.arch.index_topk
    if ch.context + ch.tokens <= k:
        t, good = model._attention(0.0, 0.0, (ch,), 0)
        return float(t), bool(good)
    dense = max(0, k - ch.context)
    total, ok = 0.0, True
    if dense:
        total, ok = model._attention(0.0, 0.0, (Chunk(dense, ch.context, ch.count, False),), 0)
    block, block_ok = model._attention(0.0, 0.0, (Chunk(k, k, ch.count, False),), 0)
    return total + block * (ch.tokens - dense) / k * (2.0 / 3.0), ok and block_ok


def _times_the_indexer(grid: Grid, arch: ModelShape, hbm_bytes_per_s: float) -> bool:
    """Whether every batch the table timed past the top-k grows at least by reading the indexer's
    keys past it at the HBM peak: one that grows less does not time the indexer over the whole cache
    (TensorRT-LLM 1.3.0rc20's rows are flat from 2,048 cached tokens on)."""
    k = arch.index_topk
    for b in grid.x:
        top = grid.y_max(b)
        if top <= k:
            continue
        grows = (grid(b, top) - grid(b, k)) * 1e-3
        keys = (indexer_work(arch, b, top)[0] - indexer_work(arch, b, k)[0]) / hbm_bytes_per_s
        if grows < keys:
            return False
    return True


def _indexer_op(model: LayerPricer, x: StepRows, ctx: float) -> Op:
    """The indexer and top-k of every layer: the measured module's growth past the top-k plus the
    indexer's roofline below it (module docstring)."""
    a, t = model.arch, model.tables
    k = a.index_topk
    rows = x.b * x.positions
    nbytes, flops = indexer_work(a, rows, ctx, x.rank_chunks)
    bw = t.hbm_bytes_per_s * t.memory_efficiency
    fp8 = t.flops_per_s.get("fp8", t.flops_per_s["bf16"])
    low_bytes, low_flops = indexer_work(a, rows, min(ctx, k), x.rank_chunks)
    base = max(low_bytes / bw, low_flops / fp8) + DSA_LAUNCH_S
    table = dsa_table(model.gpu, model.engine.name)
    model_key = _MODELS.get((a.index_heads, a.index_head_dim, k))
    grid = (table.grid(model_key, a.heads // model.par.tp, model.kv_dtype)
            if table is not None and model_key is not None else None)
    if not (rows > 0 and ctx > k):
        return Op("dsa indexer + top-k", "attention", a.layers, base, nbytes=nbytes, flops=flops, dtype="fp8")
    why = (f"no measured DSA module for {a.heads // model.par.tp} heads, {model.kv_dtype} KV, "
           f"{model.engine.name} on {model.gpu}")
    if grid is not None and table is not None and not _times_the_indexer(grid, a, t.hbm_bytes_per_s):
        why = (f"{table.engine} {table.version}'s DSA module grows less past the top-k than reading the "
               "indexer's keys allows")
    elif grid is not None and grid.y_max(x.b) > k:
        # measured up to the longest cache timed at this batch, no less than at any smaller batch (the
        # difference of two monotone rows need not be monotone down the batches); the indexer's
        # roofline past the longest cache timed
        top = min(ctx, grid.y_max(x.b))
        past = max(max(0.0, grid(v, min(ctx, grid.y_max(v))) - grid(v, k))
                   for v in (x.b, *(v for v in grid.x if v < x.b))) * 1e-3
        top_bytes, _ = indexer_work(a, rows, top, x.rank_chunks)
        beyond = (nbytes - top_bytes) / bw
        return Op("dsa indexer + top-k", "attention", a.layers, base + past + beyond, nbytes=nbytes,
                  flops=flops, dtype="fp8")
    rough = max(nbytes / bw, flops / fp8) + DSA_LAUNCH_S
    return Op("dsa indexer + top-k", "attention", a.layers, rough, nbytes=nbytes, flops=flops,
              dtype="fp8", measured=False, note=f"DSA indexer on its roofline: {why.strip()}")
