"""Chunk attention is priced one way for every family (servesim.hardware.chunk_attention).

A dense model and a mixture-of-experts model whose attention is the same (heads, KV heads, head
width, tensor parallel, engine, GPU) must price a prefill chunk behind a cached prefix to the same
second: the convex hull of the measured prefill times, the fresh prefill and the cache read, the
largest.  Before one rule held for both, the MoE path took the raw ``P(c + q) - P(c)`` of the table,
without the hull or the read bound.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from servesim.hardware.chunk_attention import chunk_attention_s, on_hull, prefill_hull
from servesim.hardware.engines import engine_profile
from servesim.hardware.model_config import find_architecture
from servesim.hardware.moe_step import MoEStepModel, Parallelism
from servesim.hardware.names import dense_shape
from servesim.hardware.stepmodel import Chunk, StepModel, bucket_context


def _pair(tp: int) -> tuple[StepModel, MoEStepModel]:
    """Qwen3-30B-A3B (GQA: 32 query heads, 4 KV heads of 128) beside a dense shape with its attention."""
    arch = find_architecture("Qwen/Qwen3-30B-A3B")
    assert arch is not None and arch.attention != "mla" and not any(arch.layer_windows)
    eng = engine_profile("vllm", gpu="h200", memory_gib=131)
    moe = MoEStepModel(arch, "h200", Parallelism(tp, 1, 1), engine=eng)
    shape = dataclasses.replace(dense_shape("llama-3-8b"), heads=arch.heads, kv_heads=arch.kv_heads,
                                head_dim=arch.head_dim)
    dense = StepModel(shape, "h200", tp, engine=eng, tables=moe.tables)
    return dense, moe


@pytest.mark.parametrize("tp", [1, 4])
@pytest.mark.parametrize(("tokens", "context", "count"),
                         [(512, 0, 1), (512, 1536, 1), (1, 8128, 1), (2048, 30000, 1), (256, 4096, 3),
                          (8192, 120000, 1)])
def test_dense_and_moe_with_the_same_attention_price_a_chunk_identically(tp, tokens, context, count):
    dense, moe = _pair(tp)
    d = dense._chunk_attention(count, tokens, context)[0]
    m, _ = moe._attention(0.0, 0.0, (Chunk(tokens, context, count),), 0)
    assert m == pytest.approx(d, rel=1e-12)
    assert d > 0


def test_the_rule_by_hand_and_its_bounds():
    dense, _ = _pair(1)
    t, s = dense.tables, dense.shape
    heads, kvh, d = s.heads, s.kv_heads, s.head_dim

    def pre(n: int) -> float:
        return t.prefill_attention(1, n, heads, kvh, d, "bf16").ms * 1e-3

    hull = prefill_hull(pre)
    # The hull lies on or under every point it was built from, and is convex (slopes never fall).
    xs, ys = hull
    assert all(on_hull(hull, x) <= pre(round(x)) * (1 + 1e-12) for x in xs)
    slopes = [(ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i]) for i in range(len(xs) - 1)]
    assert all(b >= a - 1e-18 for a, b in itertools.pairwise(slopes))
    # A 1-token chunk behind 8,128 cached ones: the hull's difference is tiny, so the cache read
    # (decode attention of one sequence at 8,129) is what it costs, not 8,129 x a launch.
    read = t.decode_attention(1, bucket_context(8129), heads, kvh, d, "bf16").ms * 1e-3
    one = chunk_attention_s(1, 8128, pre(1), lambda: hull, lambda n: read)
    assert one == max(on_hull(hull, 8129) - on_hull(hull, 8128), pre(1), read)
    assert one < 10 * max(pre(1), read)
    # Never cheaper with more work: more tokens, or a longer prefix.
    prices = [dense._chunk_attention(1, q, c)[0] for q in (64, 256, 1024) for c in (0, 1000, 10000)]
    by_q = [prices[i::3] for i in range(3)]
    assert all(a <= b for col in by_q for a, b in itertools.pairwise(col))
    assert all(a <= b for i in range(3) for a, b in itertools.pairwise(prices[3 * i:3 * i + 3]))
