"""Every priced step within its physical bounds, and never cheaper with more work.

For each shipped kernel table (GPU and engine) and models from 8B to 70B at TP 1-8:

* the step costs at least its speed-of-light bound (pure roofline at 100% of the datasheet
  peaks, which no kernel beats) and its GPU time at most :data:`STEP_CEILING` times the larger
  of that bound and the launch floor of its kernels;
* adding a decoding sequence, growing the decode context, adding a prompt token to a chunk or
  putting a chunk behind a longer cached prefix never makes the step cheaper.

The grid is chosen to cross every regime the engine loop visits: launch-bound (batch 1, one
token), bandwidth-bound decode, compute-bound prefill chunks of up to 8,192 tokens, and the
chunk-behind-a-long-prefix case that once cost 14.7 s (a 1-token chunk behind 8,128 tokens).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servesim.hardware.engines import ENGINES, engine_profile
from servesim.hardware.kernels import tables_for
from servesim.hardware.names import dense_shape
from servesim.hardware.stepmodel import STEP_CEILING, Chunk, StepModel

DEPLOYMENTS = [
    ("llama-3-8b", "h100-sxm", 1, "bf16"),
    ("llama-3-8b", "h100-sxm", 8, "fp8"),
    ("llama-3-70b", "h200", 8, "fp8"),
    ("llama-3-70b", "h100-sxm", 4, "bf16"),
    ("llama-3-70b", "a100-80gb", 8, "bf16"),
    ("llama-3-8b", "b200", 1, "fp4"),
    ("llama-3-70b", "b200", 2, "fp8"),
]


def _models() -> list[tuple[str, StepModel]]:
    out = []
    for (name, gpu, tp, dtype), engine in itertools.product(DEPLOYMENTS, ENGINES):
        eng = engine_profile(engine, gpu=gpu)
        tables = tables_for(gpu, engine)
        if tables is None or dtype not in tables.gemm_dtypes:
            continue
        out.append((f"{name}-{gpu}-tp{tp}-{dtype}-{engine}",
                    StepModel(dense_shape(name), gpu, tp, dtype=dtype, engine=eng, tables=tables)))
    return out


MODELS = _models()
IDS = [i for i, _ in MODELS]

BATCHES = (0, 1, 3, 64, 255, 700)
CONTEXTS = (1, 100, 4096, 32768)
CHUNKS = (0, 1, 17, 500, 2048, 8192)
PREFIXES = (0, 1, 4000, 8128, 30000)


def _step(sm: StepModel, b: float, ctx: float, q: int, c: int):  # type: ignore[no-untyped-def]
    return sm.step(b, ctx, (Chunk(q, c),) if q else ())


@pytest.mark.parametrize("sm", [m for _, m in MODELS], ids=IDS)
def test_every_step_lies_between_its_speed_of_light_and_the_ceiling(sm: StepModel) -> None:
    for b, ctx, q, c in itertools.product(BATCHES, CONTEXTS, CHUNKS, PREFIXES):
        if b == 0 and q == 0:
            continue
        st_ = _step(sm, b, ctx, q, c)
        where = (b, ctx, q, c)
        assert st_.total_s >= st_.sol_s, where
        assert st_.total_s >= st_.floor_s, where
        assert st_.gpu_s <= STEP_CEILING * st_.bound_s, (where, st_.gpu_s / st_.bound_s)


@pytest.mark.parametrize("sm", [m for _, m in MODELS], ids=IDS)
def test_more_work_never_makes_a_step_cheaper(sm: StepModel) -> None:
    for b, ctx, q, c in itertools.product(BATCHES, CONTEXTS, CHUNKS, PREFIXES):
        if b == 0 and q == 0:
            continue
        t = _step(sm, b, ctx, q, c).total_s
        grown = [(b + 1, ctx, q, c), (b, ctx * 1.3, q, c)]
        if q:
            grown += [(b, ctx, q + 1, c), (b, ctx, q, c + 100)]
        for g in grown:
            assert _step(sm, *g).total_s >= t * (1 - 1e-12), (b, ctx, q, c, "->", g)  # float rounding


def test_a_one_token_chunk_behind_a_long_prefix_costs_about_a_decode_read() -> None:
    """The 14.7 s step: Llama-3.1-70B on 8 x H200 in fp8, a 1-token chunk behind 8,128 tokens."""
    sm = StepModel(dense_shape("llama-3-70b"), "h200", 8, dtype="fp8")
    st_ = sm.step(3, 8000, (Chunk(1, 8128),))
    decode = sm.step(4, 8000)  # the same 4 sequences' tokens, all decoding
    assert st_.total_s < 2 * decode.total_s
    assert st_.total_s < 0.05  # milliseconds, not seconds


@settings(max_examples=60, deadline=None)
@given(b=st.integers(0, 1024), ctx=st.integers(1, 100_000), q=st.integers(0, 16384),
       c=st.integers(0, 100_000), i=st.integers(0, len(MODELS) - 1))
def test_random_steps_respect_both_bounds(b: int, ctx: int, q: int, c: int, i: int) -> None:
    sm = MODELS[i][1]
    if b == 0 and q == 0:
        q = 1
    st_ = _step(sm, b, ctx, q, c)
    assert st_.sol_s <= st_.total_s
    assert st_.gpu_s <= STEP_CEILING * st_.bound_s
    assert _step(sm, b + 1, ctx, q, c).total_s >= st_.total_s * (1 - 1e-12)
    if q:
        assert _step(sm, b, ctx, q, c + 1000).total_s >= st_.total_s * (1 - 1e-12)
