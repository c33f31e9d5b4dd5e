"""Paired pricing checks (issue 51, item 3): the same deployment priced twice, one thing changed.

* **Precision.**  Each operation of a step in a lower-precision dtype (bf16 -> fp8 on the GPUs with
  FP8 tables, fp8 -> fp4 on the B200) is never slower than its higher-precision twin by more than the
  engine's own tables measured for that kind of kernel on that GPU (the largest lower / higher ratio
  over the points both dtypes measured: a GEMM table's fp8 rows include the activation quantization,
  so a small GEMM can measure several times its BF16 time); an operation the dtype does not touch
  (attention, collectives, norms, host) costs the same.  And a shipped MoE table's quantized kernel
  is not slower than the same engine's BF16 kernel at the median of the points both measured (the
  per-tensor FP8 rows vLLM 0.24 timed on Hopper took 2.2-2.5x BF16's: scripts/build_kernel_tables.py
  MOE_NOT_RUN).
* **More GPUs, faster GPU.**  Doubling TP, or moving from an H100 to an H200 to a B200, never doubles
  a decode step's time.
* **Verify against decode.**  A speculative verify step is never cheaper than the plain decode step of
  the same sequences, so the verify cost ``c`` of every preset is never negative.

Hypothesis draws the deployment, batch and context; example counts are small (each draw prices a few
steps from cached step models).
"""

from __future__ import annotations

import gzip
import json
import statistics
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servesim.hardware import speculation as spm
from servesim.hardware.kernels import table_name
from servesim.hardware.pricer import Deployment, build_step_model

_KERNELS = Path(__file__).resolve().parents[2] / "src" / "servesim" / "hardware" / "data" / "kernels"
ENGINES = ("vllm", "sglang", "trtllm")
GPUS = ("h100-sxm", "h200", "b200")  # each has its own FP8 tables for every engine
FASTER = (("h100-sxm", "h200"), ("h200", "b200"))
# (model, tp): dense and mixture-of-experts, each at a TP its heads and expert widths allow
MODELS = (("llama-3-8b", 1), ("llama-3-70b", 4), ("Qwen/Qwen3-235B-A22B", 8), ("Qwen/Qwen3-30B-A3B", 2),
          ("openai/gpt-oss-120b", 4), ("mistralai/Mixtral-8x7B-v0.1", 2))
DTYPE_KINDS = {"gemm": "gemm", "mla_bmm": "gemm", "moe": "moe", "two_streams": "moe"}
"""Operation kinds whose price the weight dtype changes, and the table each is read from (two_streams:
the shared experts beside the routed ones)."""
PAIRS = (("bf16", "fp8"), ("bf16", "fp8_block"), ("fp8", "fp4"), ("fp8_block", "fp4"), ("bf16", "mxfp4"),
         ("bf16", "int4"), ("fp8", "fp8_block"))
"""(higher, lower) precision pairs compared in a table; fp8 <-> fp8_block both ways, as a step model
may price one with the other's rows."""
PROFILE = settings(max_examples=25, deadline=None, derandomize=True,
                   suppress_health_check=[HealthCheck.too_slow])


def _read(name: str) -> dict[str, Any]:
    with gzip.open(_KERNELS / name, "rt", encoding="utf-8") as fh:
        doc: dict[str, Any] = json.load(fh)
    return doc


def _files(gpu: str, engine: str) -> tuple[str, str]:
    name = table_name(gpu)
    assert name is not None
    suffix = "" if engine == "vllm" else f"_{engine}"
    return f"{name}{suffix}.json.gz", f"{name}{suffix}_moe.json.gz"


def _gemm_points(g: dict[str, Any]) -> dict[tuple[int, int, int], float]:
    coords = ((m, n, k) for m in g["m"] for n in g["n"] for k in g["k"])
    return {c: v for c, v in zip(coords, g["ms"], strict=True) if v}


def _moe_points(t: dict[str, Any], tokens: list[int]) -> dict[tuple[str, int], float]:
    return {(key, tok): v for key, row in t["shapes"].items()
            for tok, v in zip(tokens, row, strict=True) if v}


def _ratios(hi: dict[Any, float], lo: dict[Any, float]) -> list[float]:
    return [lo[p] / hi[p] for p in hi.keys() & lo.keys()]


@cache
def measured_ratio(gpu: str, engine: str, kind: str) -> float:
    """The largest lower / higher precision ratio the engine's ``kind`` table (gemm or moe) measured on
    ``gpu`` over the points both dtypes of a pair hold (at least 1)."""
    dense, moe = _files(gpu, engine)
    if kind == "gemm":
        g = _read(dense)["gemm"]
        worst = 1.0
        for hi, lo in PAIRS:
            if hi in g and lo in g:
                a, b = g[hi], g[lo]
                if all(a[x] == b[x] for x in "mnk"):  # the same grid: point by point
                    worst = max([worst, *(y / x for x, y in zip(a["ms"], b["ms"], strict=True) if x and y)])
                else:
                    worst = max([worst, *_ratios(_gemm_points(a), _gemm_points(b))])
        return worst
    else:
        m = _read(moe)["moe"]
        pts = {d: _moe_points(t, m["tokens"]) for d, t in m["dtypes"].items()}
    worst = 1.0
    for hi, lo in PAIRS:
        if hi in pts and lo in pts:
            worst = max([worst, *_ratios(pts[hi], pts[lo])])
    return worst


def _model(model: str, gpu: str, tp: int, dtype: str, engine: str, **kw: int) -> Any:
    return build_step_model(Deployment(model=model, gpu=gpu, tp=tp, dtype=dtype, engine=engine, **kw))[0]


deployments = st.tuples(st.sampled_from(GPUS), st.sampled_from(ENGINES), st.sampled_from(MODELS))
batches = st.sampled_from((1, 2, 5, 16, 37, 64, 128, 256))
contexts = st.sampled_from((128, 2048, 8192))


@PROFILE
@given(deployments, batches, contexts)
def test_a_lower_precision_operation_is_within_the_tables_measured_ratio(dep: Any, batch: int,
                                                                         context: int) -> None:
    gpu, engine, (model, tp) = dep
    for hi, lo in (("bf16", "fp8"), *((("fp8", "fp4"),) if gpu == "b200" else ())):
        a = _model(model, gpu, tp, hi, engine).operations(batch, context)
        b = {op.name: op for op in _model(model, gpu, tp, lo, engine).operations(batch, context)}
        for op in a:
            twin = b.get(op.name)
            if twin is None or op.seconds <= 0:
                continue
            kind = DTYPE_KINDS.get(op.kind)
            bound = 1.0 if kind is None else max(measured_ratio(gpu, engine, "gemm"),
                                                 measured_ratio(gpu, engine, "moe") if kind == "moe" else 1.0)
            assert twin.seconds <= op.seconds * bound * (1 + 1e-9), (
                f"{model} TP{tp} on {gpu} ({engine}) batch {batch}: {op.name} {lo} "
                f"{twin.seconds * 1e3:.4f} ms > {hi} {op.seconds * 1e3:.4f} ms x {bound:.3g} (the tables' "
                "largest measured ratio)")


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("engine", ENGINES)
def test_a_shipped_quantized_moe_kernel_is_not_slower_than_bf16_at_the_median(gpu: str, engine: str) -> None:
    m = _read(_files(gpu, engine)[1])["moe"]
    pts = {d: _moe_points(t, m["tokens"]) for d, t in m["dtypes"].items()}
    checked = 0
    for lo in ("fp8", "fp8_block", "fp4", "mxfp4", "int4"):
        if lo in pts:
            r = _ratios(pts["bf16"], pts[lo])
            if r:
                checked += 1
                assert statistics.median(r) <= 1.0, (
                    f"{gpu} {engine}: {lo} MoE kernel at a median {statistics.median(r):.2f}x BF16's over "
                    f"{len(r)} shared points")
    assert checked  # every table pairs at least one quantized kernel with BF16


@PROFILE
@given(deployments, batches, contexts)
def test_doubling_tp_never_doubles_a_decode_step(dep: Any, batch: int, context: int) -> None:
    gpu, engine, (model, tp) = dep
    one = _model(model, gpu, tp, "bf16", engine).decode_step(batch, context).total_s
    two = _model(model, gpu, 2 * tp, "bf16", engine).decode_step(batch, context).total_s
    assert two < 2 * one, f"{model} on {gpu} ({engine}) batch {batch}: TP{2 * tp} {two:.3g}, TP{tp} {one:.3g}"


@PROFILE
@given(st.sampled_from(FASTER), st.sampled_from(ENGINES), st.sampled_from(MODELS), batches, contexts)
def test_a_faster_gpu_never_doubles_a_decode_step(pair: tuple[str, str], engine: str, mt: tuple[str, int],
                                                  batch: int, context: int) -> None:
    model, tp = mt
    slow, fast = pair
    for dtype in ("bf16", "fp8"):
        before = _model(model, slow, tp, dtype, engine).decode_step(batch, context).total_s
        after = _model(model, fast, tp, dtype, engine).decode_step(batch, context).total_s
        assert after < 2 * before, (f"{model} TP{tp} {dtype} ({engine}) batch {batch}: {fast} {after:.3g} s, "
                                    f"{slow} {before:.3g} s")


DSR1 = "deepseek-ai/DeepSeek-R1"
VERIFY = ((DSR1, "h200", 1, 8, 8, "fp8_block"), (DSR1, "h200", 8, 8, 8, "fp8_block"),
          (DSR1, "b200", 1, 8, 8, "fp4"), (DSR1, "h200", 8, 1, 1, "fp8_block"),
          ("Qwen/Qwen3-235B-A22B", "h200", 1, 8, 8, "bf16"),
          ("llama-3-8b", "h100-sxm", 1, 1, 1, "bf16"), ("llama-3-70b", "b200", 4, 1, 1, "fp8"))
"""(model, gpu, tp, dp, ep, dtype): attention DP with an idle rank's padding, and plain TP."""


@pytest.mark.parametrize("model,gpu,tp,dp,ep,dtype", VERIFY)
@pytest.mark.parametrize("engine", ENGINES)
def test_a_verify_step_is_never_cheaper_than_a_decode_step(model: str, gpu: str, tp: int, dp: int, ep: int,
                                                           dtype: str, engine: str) -> None:
    sm = _model(model, gpu, tp, dtype, engine, dp=dp, ep=ep)
    for batch in (1, 2, 8, 64):
        plain = sm.decode_step(batch, 2048).total_s
        for positions in (2, 4, 6):
            assert spm.verify_s(sm, "mtp", batch, 2048, positions) >= plain
            if getattr(sm, "is_moe", False):  # the MoE step model itself pads a verify step's rows
                assert sm.decode_step(batch, 2048, positions=positions).total_s >= plain


@pytest.mark.parametrize("gpu,tp,dp,ep", [("h200", 1, 8, 8), ("h200", 8, 8, 8), ("b200", 1, 8, 8)])
def test_mtp_verify_cost_is_never_negative_with_attention_dp(gpu: str, tp: int, dp: int, ep: int) -> None:
    sm = _model(DSR1, gpu, tp, "fp4" if gpu == "b200" else "fp8_block", "vllm", dp=dp, ep=ep)
    for batch in (1, 4):
        for k in (1, 2, 3, 4):  # the roofline command's best k at batch 1 (3-4) and shorter drafts
            _, info = spm.speculation_for(sm, "mtp", batch, 2048, k=k)
            assert info["c"] >= 0.0
            assert info["speedup_at_batch"] < info["acceptance_length"]


def test_an_unmeasured_moe_shape_takes_the_shape_ratio_another_dtype_measured() -> None:
    """vLLM's H200 table has no block-FP8 Qwen3-235B-A22B layer at MoE TP8 (an expert width of 192, no
    whole number of 128-wide blocks): it is the TP4 block-FP8 time times BF16's TP8 / TP4 ratio at the
    same tokens, from the stored rows (the roofline ratio is 1 at the launch floor)."""
    from servesim.hardware.moe_kernels import moe_tables

    tab, _ = moe_tables("h200", "vllm")
    assert tab is not None
    m = _read("h200_sxm_moe.json.gz")["moe"]
    block, bf16 = m["dtypes"]["fp8_block"]["shapes"], m["dtypes"]["bf16"]["shapes"]
    tp4, tp8 = "4096,1536,8,128,4,1", "4096,1536,8,128,8,1"
    for i, tokens in enumerate(m["tokens"][:8]):
        want = block[tp4][i] * bf16[tp8][i] / bf16[tp4][i]
        lk = tab.moe("fp8_block", tokens, 4096, 1536, 8, 128, 8, 1)
        assert not lk.measured and "bf16" in lk.note
        assert lk.ms >= want * (1 - 1e-9)  # kept monotone: the running maximum over fewer tokens
        if i == 0:
            assert lk.ms == pytest.approx(want, rel=1e-12)
        assert lk.ms < tab.moe("bf16", tokens, 4096, 1536, 8, 128, 8, 1).ms
