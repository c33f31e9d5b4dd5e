"""MoE, MLA and expert-parallel tables (servesim.hardware.moe_kernels): read-back, fallbacks, checks.

The expected latencies are copied from aiconfigurator's parquet files (ai-dynamo/aiconfigurator
095f58a, ``aic-core/src/aiconfigurator_core/systems/data/<gpu>/``; the ``latency`` column in ms,
DeepEP's ``*_us`` columns in us), row numbers counted from 0 in file order as pyarrow reads them.
Every point below is its own monotone envelope (no larger point is faster), so the shipped
table holds it rounded to 4 significant digits; where a point is not, the test says so and
checks the envelope rule.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from servesim._checks import ParameterError
from servesim.hardware import moe_kernels
from servesim.hardware.kernels import ENGINE_TABLES, GPU_TABLES
from servesim.hardware.moe_kernels import MOE_DTYPES, Fit, MoETables, moe_engines_for, moe_tables

DATA = Path(moe_kernels.__file__).parent / "data" / "kernels"
ROUND = 6e-4  # 4 significant digits
DSV3 = (7168, 2048, 8, 256)  # DeepSeek-V3/R1: hidden, moe_intermediate_size, topk, routed experts


def close(a: float, b: float, rel: float = ROUND) -> bool:
    return abs(a - b) <= rel * abs(b)


def _t(gpu: str, engine: str) -> MoETables:
    t, note = moe_tables(gpu, engine)
    assert t is not None, note
    return t


# (gpu, engine, dtype, hidden, inter, topk, experts, tp, ep, tokens, latency ms); power_law_1.01 rows
MOE_POINTS = [
    # h200_sxm/moe_sglang_0.5.14_moe_perf.parquet rows 17442, 17446, 17459 (fp8_block, DeepSeek-V3 EP8)
    ("h200_sxm", "sglang", "fp8_block", *DSV3, 1, 8, 1, 0.09201343536376953),
    ("h200_sxm", "sglang", "fp8_block", *DSV3, 1, 8, 64, 0.3412518310546875),
    ("h200_sxm", "sglang", "fp8_block", *DSV3, 1, 8, 1024, 0.6664940643310546),
    # h200_sxm/moe_trtllm_1.3.0rc20_moe_perf.parquet rows 72738, 72745, 72783
    ("h200_sxm", "trtllm", "fp8_block", *DSV3, 1, 8, 1, 0.04054400026798248),
    ("h200_sxm", "trtllm", "fp8_block", *DSV3, 1, 8, 64, 0.3006079912185669),
    ("h200_sxm", "trtllm", "fp8_block", *DSV3, 1, 8, 1024, 0.55698561668396),
    # h200_sxm/moe_vllm_0.24.0_moe_perf.parquet rows 19081, 19295, 19475
    ("h200_sxm", "vllm", "fp8_block", *DSV3, 1, 8, 1, 0.0948415994644165),
    ("h200_sxm", "vllm", "fp8_block", *DSV3, 1, 8, 1024, 0.6479936122894288),
    # same file rows 23856, 23959 (bfloat16, Qwen3-235B-A22B at TP8) and 23600, 23638 (at EP8)
    ("h200_sxm", "vllm", "bf16", 4096, 1536, 8, 128, 8, 1, 1, 0.03234559893608093),
    ("h200_sxm", "vllm", "bf16", 4096, 1536, 8, 128, 8, 1, 1024, 0.3357759952545166),
    ("h200_sxm", "vllm", "bf16", 4096, 1536, 8, 128, 1, 8, 1, 0.042982399463653564),
    ("h200_sxm", "vllm", "bf16", 4096, 1536, 8, 128, 1, 8, 1024, 0.33907840251922605),
    # h100_sxm/moe_vllm_0.24.0_moe_perf.parquet rows 646, 773 (w4a16_mxfp4, gpt-oss-120b, one GPU)
    ("h100_sxm", "vllm", "mxfp4", 2880, 2880, 4, 128, 1, 1, 1, 0.06273919939994813),
    ("h100_sxm", "vllm", "mxfp4", 2880, 2880, 4, 128, 1, 1, 64, 0.5297152042388916),
    # b200_sxm/moe_trtllm_1.3.0rc20_moe_perf.parquet row 128862 (nvfp4, EP2): the default CUTLASS kernel's
    # row, a series the sibling rule leaves alone (gb200 row 129427: 0.58983, 1.02 x; the TRTLLM-gen
    # min-latency row 53991, 0.49555, is the TRTLLM backend's own table: test_trtllm_fp4_backends_...)
    ("b200_sxm", "trtllm", "fp4", *DSV3, 1, 2, 1024, 0.604204797744751),
    # a100_sxm/moe_vllm_0.14.0_moe_perf.parquet rows 0, 142 (bfloat16, Mixtral-8x7B)
    ("a100_sxm", "vllm", "bf16", 4096, 14336, 2, 8, 1, 1, 1, 0.4540544033050537),
    ("a100_sxm", "vllm", "bf16", 4096, 14336, 2, 8, 1, 1, 1024, 6.872515106201172),
]


# ------------------------------------------------------------------ files and loading


def test_every_gpu_and_engine_has_moe_tables() -> None:
    for gpu in GPU_TABLES:
        assert moe_engines_for(gpu) == ENGINE_TABLES
        for engine in ENGINE_TABLES:
            t, note = moe_tables(gpu, engine)
            assert isinstance(t, MoETables) and t is moe_tables(gpu, engine)[0]
            assert t.name == gpu and t.engine_name == engine and note.startswith("MoE tables: ")
            assert t.engine.split()[0] in ("vLLM", "SGLang", "TensorRT-LLM") and t.device.startswith("NVIDIA")
            assert t.distribution == "power_law_1.01"
            assert t.moe_dtypes and set(t.moe_dtypes) <= set(MOE_DTYPES) and "bf16" in t.moe_dtypes
    assert _t("a100_sxm", "trtllm").engine == "TensorRT-LLM 1.0.0"
    assert _t("h200", "sglang").engine == "SGLang 0.5.14"
    assert _t("b200", "vllm").engine == "vLLM 0.24.0"
    assert _t("b200", "trtllm").moe_dtypes == ("bf16", "fp8", "fp8_block", "fp4", "mxfp4", "mxfp4_mxfp8")
    # no per-tensor fp8: vLLM's Hopper rows timed the static-scale kernel (build_kernel_tables.py MOE_NOT_RUN)
    assert _t("h100", "vllm").moe_dtypes == ("bf16", "fp8_block", "mxfp4", "int4")
    assert _t("a100_sxm", "sglang").moe_dtypes == ("bf16", "int4")


def test_unknown_gpu_and_engine() -> None:
    t, note = moe_tables("mi300x", "vllm")
    assert t is None and "mi300x" in note
    assert moe_engines_for("mi300x") == ()
    with pytest.raises(ParameterError):
        moe_tables("h100", "tgi")


def test_shipped_files_and_budget() -> None:
    for gpu in GPU_TABLES:
        for engine in ENGINE_TABLES:
            name = f"{gpu}_moe.json.gz" if engine == "vllm" else f"{gpu}_{engine}_moe.json.gz"
            blob = (DATA / name).read_bytes()
            assert blob[4:8] == b"\0\0\0\0"  # gzip mtime 0: deterministic bytes
            gzip.decompress(blob)
    notice = (DATA / "NOTICE.md").read_text()
    assert "power_law_1.01" in notice and "h200_sxm_trtllm_moe.json.gz" in notice and "Apache" in notice
    shipped = sum(p.stat().st_size for p in DATA.iterdir() if p.is_file())
    assert shipped < 8_000_000  # everything under data/kernels/: dense and MoE tables, NOTICE, license


def test_loading_needs_neither_numpy_nor_pyarrow() -> None:
    code = ("import sys\n"
            "from servesim.hardware.moe_kernels import moe_tables\n"
            "t, _ = moe_tables('h200', 'trtllm')\n"
            "t.moe('fp8_block', 33.5, 7168, 2048, 8, 256, 1, 8); t.mla_decode(3, 900, 16, 'fp8')\n"
            "t.mla_prefill(2, 900, 16, 'bf16'); t.mla_bmm('pre', 7, 16, 'fp8')\n"
            "t.deepep('dispatch', 'll', 100, 7168, 8, 256, 8); t.all_gather(8, 1e6); t.alltoall(4, 1e6)\n"
            "print(sorted(m for m in ('numpy', 'pyarrow', 'scipy', 'pandas') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_efficiencies_are_fits() -> None:
    for gpu in GPU_TABLES:
        for engine in ENGINE_TABLES:
            t = _t(gpu, engine)
            for dtype in t.moe_dtypes:
                f = t.efficiency["moe"][dtype]
                assert isinstance(f, Fit) and 0.005 < f.floor_ms < 0.5
                assert 0.05 < f.memory < 1.0 and 0.01 < f.compute < 1.0, (gpu, engine, dtype, f)
            for op in ("all_gather", "alltoall"):
                for n, f in t.efficiency[op].items():
                    assert int(n) in (2, 4, 8) and 0.3 < f.bus < 1.0 and f.floor_ms < 0.05


# ------------------------------------------------------------------ MoE read-back and semantics


@pytest.mark.parametrize(("gpu", "engine", "dtype", "h", "i", "k", "e", "tp", "ep", "tokens", "ms"),
                         MOE_POINTS)
def test_moe_points_read_back(gpu: str, engine: str, dtype: str, h: int, i: int, k: int, e: int, tp: int,
                              ep: int, tokens: int, ms: float) -> None:
    lk = _t(gpu, engine).moe(dtype, tokens, h, i, k, e, tp, ep)
    assert lk.measured and lk.note == ""
    assert close(lk.ms, ms), (lk.ms, ms)


def _sibling_substitutions(gpu: str, engine: str) -> dict[str, Any]:
    """The ``moe.sibling_substitutions`` record of a shipped ``_moe`` file (empty where none)."""
    name = f"{gpu}_moe.json.gz" if engine == "vllm" else f"{gpu}_{engine}_moe.json.gz"
    with gzip.open(DATA / name, "rt", encoding="utf-8") as fh:
        subs: dict[str, Any] = json.load(fh)["moe"].get("sibling_substitutions", {})
    return subs


# (tp, ep, tokens, CUTLASS ms, whose row, TRTLLM-gen ms): DeepSeek-V3's NVFP4 layer, power_law_1.01 rows of
# <gpu>/moe_trtllm_1.3.0rc20_moe_perf.parquet.  CUTLASS: b200_sxm row 107516 (TP8, 4 tokens), and where the
# B200's series ran 1.7-1.8 x the GB200's and was replaced by it (EP8, EP4) gb200 rows 73332, 73350 and
# 201627 (the B200's own rows 73089, 73107, 200844: 0.04849, 0.33647, 0.56191 ms); TRTLLM-gen: b200_sxm
# rows 93636, 200310, 93654 and 167418
@pytest.mark.parametrize(("tp", "ep", "tokens", "cutlass", "whose", "trtllm_gen"), [
    (1, 8, 1, 0.036313599348068236, "gb200", 0.035750401020050046),
    (8, 1, 4, 0.0847104012966156, "b200_sxm", 0.031788799166679385),
    (1, 8, 1024, 0.19409919977188111, "gb200", 0.23290879726409913),
    (1, 4, 1024, 0.3209023952484131, "gb200", 0.2749504089355469),
])
def test_trtllm_fp4_backends_are_priced_apart(tp: int, ep: int, tokens: int, cutlass: float, whose: str,
                                              trtllm_gen: float) -> None:
    # TensorRT-LLM's B200 NVFP4 MoE: the table's own rows are its default CUTLASS kernel at every token
    # count (the GB200's x the two tables' median ratio where the B200's series was replaced);
    # moe_config.backend TRTLLM is its TRTLLM-gen (min-latency) row plus the finalize it was timed
    # without: 3 us + the top-k BF16 outputs read and the rows written at the B200's 7.7 TB/s
    # (system.yaml mem_bw): 2 x tokens x 7168 x (8 + 1) bytes.
    finalize = 0.003 + 2 * tokens * 7168 * 9 / 7.7e12 * 1e3
    t = _t("b200_sxm", "trtllm")
    own = t.moe("fp4", tokens, *DSV3, tp, ep)
    if whose == "gb200":
        scale = _sibling_substitutions("b200_sxm", "trtllm")["table_median_ratio"]
        cutlass = float(f"{cutlass:.3e}") * scale  # the GB200's row as built (4 digits) x the ratio
        assert "gb200" in own.note
    else:
        assert own.note == ""
    assert own.measured and abs(own.ms - cutlass) <= 6e-4 * cutlass, (own.ms, cutlass)  # 4 significant digits
    gen_tables = t.backend("trtllm")
    assert gen_tables is not None and t.moe_backends == {"trtllm": ("fp4",)}
    gen = gen_tables.moe("fp4", tokens, *DSV3, tp, ep)
    want = trtllm_gen + finalize
    assert gen.measured and gen.note == "" and abs(gen.ms - want) <= 5e-4 * want, (gen.ms, want)
    if tp == 8:  # TRTLLM-gen's min-latency kernels are the faster at a few tokens on TP8, by a margin
        assert gen.ms < 0.5 * own.ms
    assert gen_tables.moe("bf16", tokens, *DSV3, tp, ep) == t.moe("bf16", tokens, *DSV3, tp, ep)  # rest alike
    # the same TRTLLM-gen kernels, as FlashInfer ships them, measured by SGLang on the same GPU
    if tokens <= 4:
        sg = _t("b200_sxm", "sglang").moe("fp4", tokens, *DSV3, tp, ep)
        assert 0.7 < gen.ms / sg.ms < 1.4, (gen.ms, sg.ms)


def test_trtllm_backend_tables_only_where_measured() -> None:
    # the TRTLLM-gen NVFP4 rows were timed on the B200 and the GB200 (moe_torch_flow_min_latency), not on
    # the GB300 or B300, and by TensorRT-LLM only
    assert _t("gb200", "trtllm").backend("trtllm") is not None
    for gpu, engine in (("gb300", "trtllm"), ("b300_sxm", "trtllm"), ("b200_sxm", "vllm"),
                        ("h200_sxm", "trtllm")):
        assert _t(gpu, engine).backend("trtllm") is None, (gpu, engine)
    assert _t("b200_sxm", "trtllm").backend("cutlass") is None
    sources = _t("b200_sxm", "trtllm").sources["moe"]["fp4"]
    assert sources == ["moe_torch_flow_cutlass"]  # no TRTLLM-gen row priced as the default backend


def test_trtllm_fp4_never_cheaper_with_more_tokens() -> None:
    base = _t("b200_sxm", "trtllm")
    gen = base.backend("trtllm")
    assert gen is not None
    for t in (base, gen):
        for tp, ep in ((8, 1), (4, 1), (1, 8), (1, 4), (2, 4)):
            ms = [t.moe("fp4", n, *DSV3, tp, ep).ms for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)]
            assert all(b >= a for a, b in itertools.pairwise(ms)), (tp, ep, ms)


def test_moe_glitch_takes_the_larger_points_envelope() -> None:
    # h200_sxm/moe_vllm_0.24.0_moe_perf.parquet row 23616: Qwen3-235B bf16 EP8, 64 tokens, 0.18747 ms,
    # while 80 tokens took less (row 23617): the stored point is the envelope, below the raw value
    t = _t("h200_sxm", "vllm")
    at64 = t.moe("bf16", 64, 4096, 1536, 8, 128, 1, 8).ms
    at80 = t.moe("bf16", 80, 4096, 1536, 8, 128, 1, 8).ms
    assert at64 < 0.18746880292892457 * (1 - 1e-3) and at64 <= at80


def test_deepseek_v3_ep8_fp8_block_measured_on_h200() -> None:
    for engine in ENGINE_TABLES:
        t = _t("h200", engine)
        assert (*DSV3, 1, 8) in t.moe_shapes("fp8_block"), engine
        for tokens in (1, 64, 1024, 16384):
            lk = t.moe("fp8_block", tokens, *DSV3, 1, 8)
            assert lk.measured and lk.ms > 0
    # a layer of 8 x 32 local experts can not be read faster than its FP8 weights at HBM speed
    t = _t("h200", "trtllm")
    weights = 32 * 3 * 7168 * 2048
    assert t.moe("fp8_block", 4096, *DSV3, 1, 8).ms > 1e3 * weights / t.hbm_bytes_per_s


def test_attention_dp_scales_the_tokens() -> None:
    t = _t("h200", "sglang")
    assert t.moe("fp8_block", 64, *DSV3, 1, 8, attention_dp=8) == t.moe("fp8_block", 512, *DSV3, 1, 8)


def _token_axis() -> list[float]:
    return [1.5 ** j for j in range(0, 30)]  # 1 .. 127834: inside, between and above the grid


def test_moe_monotone_in_tokens_for_every_shape() -> None:
    for gpu in GPU_TABLES:
        for engine in ENGINE_TABLES:
            t = _t(gpu, engine)
            for dtype in t.moe_dtypes:
                for shape in t.moe_shapes(dtype):
                    prev = 0.0
                    for x in _token_axis():
                        ms = t.moe(dtype, x, *shape).ms
                        assert ms >= prev * (1 - 1e-9), (gpu, engine, dtype, shape, x, ms, prev)
                        prev = ms


def test_moe_roofline_fallback_continuous_at_the_edge_and_above_the_bound() -> None:
    t = _t("h100", "trtllm")
    top = 16384
    edge = t.moe("fp8_block", top, *DSV3, 1, 8)
    above = t.moe("fp8_block", top * (1 + 1e-9), *DSV3, 1, 8)
    assert edge.measured and not above.measured and "above the measured 16384" in above.note
    assert close(above.ms, edge.ms, 1e-6)
    far = t.moe("fp8_block", 8 * top, *DSV3, 1, 8)
    assert far.ms > 4 * edge.ms  # grows with the compute-bound roofline
    # never faster than the speed of light: FLOPs at the FP8 peak, every local expert at full HBM
    flops = 2 * 8 * top * 8 / 8 * 3 * 7168 * 2048
    assert far.ms > 1e3 * flops / t.flops_per_s["fp8"]
    assert far.ms > 1e3 * 32 * 3 * 7168 * 2048 / t.hbm_bytes_per_s


def test_moe_unmeasured_shape_uses_the_nearest_scaled() -> None:
    t = _t("h200", "sglang")
    # gpt-oss-120b has no bf16 rows on SGLang's H200 table (only mxfp4): nearest bf16 shape, scaled
    lk = t.moe("bf16", 64, 2880, 2880, 4, 128, 1, 1)
    assert not lk.measured and "not measured" in lk.note and "nearest measured" in lk.note
    assert lk.ms > 0
    # twice the experts per GPU (EP4 where EP8 was measured, and vice versa) costs more at large batch
    ep8 = t.moe("fp8_block", 8192, *DSV3, 1, 8).ms
    assert t.moe("fp8_block", 8192, 7168, 2048, 8, 256, 1, 6).ms > ep8  # EP6: not measured
    assert t.moe("fp8_block", 8192, 7168, 3000, 8, 256, 1, 8).ms > ep8  # wider experts
    prev = 0.0
    for x in _token_axis():  # monotone off-shape as well
        ms = t.moe("fp8_block", x, 7168, 2048, 8, 256, 1, 6).ms
        assert ms >= prev * (1 - 1e-9)
        prev = ms


def test_moe_bad_arguments() -> None:
    t = _t("h100", "vllm")
    with pytest.raises(ParameterError, match="MoE dtypes"):
        t.moe("fp4", 8, *DSV3, 1, 8)  # no NVFP4 on Hopper
    with pytest.raises(ParameterError):
        t.moe("bf16", 0, *DSV3, 1, 8)
    with pytest.raises(ParameterError):
        t.moe("bf16", 8, 7168, 2048, 300, 256, 1, 8)  # topk > experts
    with pytest.raises(ParameterError):
        t.moe("bf16", 8, *DSV3, 0, 8)


def test_engines_differ_as_measured() -> None:
    # DeepSeek-V3 EP8 FP8-block at 1 token: TensorRT-LLM's CUTLASS MoE is about twice as fast as
    # vLLM's and SGLang's Triton paths on the H200 (0.041 vs 0.092-0.095 ms, rows above)
    trt = _t("h200", "trtllm").moe("fp8_block", 1, *DSV3, 1, 8).ms
    for engine in ("vllm", "sglang"):
        assert _t("h200", engine).moe("fp8_block", 1, *DSV3, 1, 8).ms > 2 * trt


# ------------------------------------------------------------------ MLA


def test_mla_points_read_back() -> None:
    # h200_sxm/mla_trtllm_1.3.0rc20_generation_mla_perf.parquet row 2043: fp8, 16 heads, batch 64, step 4095
    lk = _t("h200", "trtllm").mla_decode(64, 4095, 16, "fp8")
    assert lk.measured and close(lk.ms, 0.07031466563542683)
    # h200_sxm/mla_sglang_0.5.14_context_mla_perf.parquet row 1372: bfloat16, 16 heads, batch 1, isl 4096
    lk = _t("h200", "sglang").mla_prefill(1, 4096, 16, "bf16")
    assert lk.measured and close(lk.ms, 0.4822383880615234)


def test_vllm_borrows_trtllm_core_mla() -> None:
    v, t = _t("h200", "vllm"), _t("h200", "trtllm")
    assert not v.has_mla and t.has_mla
    lk = v.mla_decode(64, 4095, 16, "fp8")
    assert not lk.measured and "TensorRT-LLM 1.3.0rc20's used" in lk.note
    assert close(lk.ms, t.mla_decode(64, 4095, 16, "fp8").ms, 1e-12)
    # SGLang 0.5.10 on the A100 measured no MLA: vLLM 0.14.0's
    lk = _t("a100_sxm", "sglang").mla_decode(8, 1000, 16, "bf16")
    assert not lk.measured and "vLLM 0.14.0's used" in lk.note


def test_mla_monotone_and_fallbacks() -> None:
    t = _t("b200", "sglang")
    for kv in ("bf16", "fp8"):
        for heads in (16, 12):  # 12 heads per GPU was not measured
            prev = 0.0
            for c in (1, 7, 100, 1000, 4095, 30000, 131071, 200000):
                ms = t.mla_decode(32, c, heads, kv).ms
                assert ms >= prev * (1 - 1e-9)
                prev = ms
    lo, mid, hi = (t.mla_decode(64, 8191, h, "bf16") for h in (8, 12, 16))
    assert lo.ms <= mid.ms <= hi.ms and not mid.measured and "12 heads" in mid.note
    edge = t.mla_decode(64, 131071, 16, "bf16")
    above = t.mla_decode(64, 131071 * (1 + 1e-9), 16, "bf16")
    assert close(above.ms, edge.ms, 1e-6) and not above.measured
    # the latent read bounds any decode from below
    assert t.mla_decode(128, 100000, 16, "fp8").ms > 1e3 * 128 * 100000 * 576 / t.hbm_bytes_per_s
    # A100 vLLM measured bf16 latent caches only: fp8 scaled by the roofline, flagged
    lk = _t("a100_sxm", "vllm").mla_decode(64, 4095, 16, "fp8")
    assert not lk.measured and "no fp8 latent cache" in lk.note
    with pytest.raises(ParameterError):
        t.mla_decode(1, 10, 16, "int8")


def test_mla_bmm() -> None:
    # h200_sxm/mla_bmm_trtllm_1.3.0rc20_mla_bmm_perf.parquet row 119: mla_gen_pre, fp8, 16 heads, 64 tokens
    lk = _t("h200", "trtllm").mla_bmm("pre", 64, 16, "fp8")
    assert lk.measured and close(lk.ms, 0.008560000360012055)
    lk = _t("h200", "vllm").mla_bmm("pre", 64, 16, "fp8")  # vLLM has no FP8 BMM: its bf16
    assert not lk.measured and "bf16" in lk.note
    with pytest.raises(ParameterError):
        _t("h200", "vllm").mla_bmm("middle", 64, 16)


# ------------------------------------------------------------------ expert-parallel communication


def test_deepep_points_read_back() -> None:
    t = _t("h200", "sglang")
    # h200_sxm/comm_sglang_0.5.12_wideep_deepep_ll_perf.parquet row 150: 7168/8/256, 128 tokens per rank
    assert close(t.deepep("dispatch", "ll", 128, *DSV3[:1], 8, 256, 8).ms, 35.119e-3)
    assert close(t.deepep("combine", "ll", 128, 7168, 8, 256, 8).ms, 67.745e-3)
    # h200_sxm/comm_sglang_0.5.12_wideep_deepep_normal_perf.parquet row 2179: 20 SMs, 4096 tokens
    lk = t.deepep("dispatch", "normal", 4096, 7168, 8, 256, 8)
    assert lk.measured and close(lk.ms, 494.1511847534959e-3)
    assert t.deepep_ep == 8
    assert t.deepep("dispatch", "ll", 128, 7168, 8, 256, 1) == (0.0, True, "")


def test_deepep_fallbacks() -> None:
    t = _t("h100", "trtllm")
    one_node = t.deepep("combine", "normal", 4096, 7168, 8, 256, 8).ms
    two = t.deepep("combine", "normal", 4096, 7168, 8, 256, 16)
    assert not two.measured and "optimistic" in two.note and two.ms > 2 * one_node
    prev = 0.0
    for x in _token_axis():
        ms = t.deepep("dispatch", "ll", x, 7168, 8, 256, 8).ms
        assert ms >= prev * (1 - 1e-9)
        prev = ms
    lk = _t("a100_sxm", "vllm").deepep("dispatch", "ll", 128, 7168, 8, 256, 8)
    assert not lk.measured and "no DeepEP measured" in lk.note and lk.ms > 0


def test_nccl_collectives() -> None:
    t = _t("h200", "vllm")
    # h200_sxm/comm_nccl_2.29.2_nccl_perf.parquet row 347: all_gather, half, 8 GPUs, message_size 524288
    # elements (1 MiB); row 393: alltoall, half, 8 GPUs, message_size 8388608 (16 MiB)
    lk = t.all_gather(8, 2**20)
    assert lk.measured and close(lk.ms, 0.016960000000000003)
    assert close(t.alltoall(8, 2**24).ms, 0.07344)
    assert t.all_gather(1, 1e9) == (0.0, True, "")
    big = 2**29
    edge, above = t.alltoall(8, big), t.alltoall(8, big * (1 + 1e-9))
    assert close(above.ms, edge.ms, 1e-6) and not above.measured
    assert t.alltoall(16, 2**26).ms > t.alltoall(8, 2**26).ms
    assert not t.all_gather(6, 2**24).measured
    assert 0 < t.all_gather(6, 2**24).ms


def test_lookups_are_fast() -> None:
    import timeit

    t = _t("h200", "sglang")
    t.moe("fp8_block", 33, *DSV3, 1, 8)
    per = min(timeit.repeat(lambda: t.moe("fp8_block", 33, *DSV3, 1, 8), number=2000, repeat=3)) / 2000
    assert per < 50e-6
    assert math.isfinite(per)


def test_roofline_shows_an_moe_split_of_dp_and_ep(capsys):
    import json

    from servesim.cli.main import main

    def view(*extra: str) -> dict:
        assert main(["roofline", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "h200", "--batch", "64",
                     *extra, "--format", "json"]) == 0
        return json.loads(capsys.readouterr().out)["measured"]

    tp8 = view("--tp", "8")
    dp8 = view("--tp", "1", "--dp", "8", "--ep", "8")
    assert tp8["available"] and dp8["available"]
    a, b = tp8["rows"][0], dp8["rows"][0]
    assert a["batch"] == b["batch"] == 64 and a["total_ms"] != b["total_ms"]
    assert b["speed_of_light_ms"] <= b["total_ms"]
    dense = ["roofline", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--dp", "2", "--format", "json"]
    assert main(dense) == 0
    assert json.loads(capsys.readouterr().out)["measured"]["available"] is False  # dense: no DP/EP split


def test_deepep_low_latency_across_nodes_is_deepeps_published_rdma_latency():
    """EP over two nodes or more (decode pools of DP16 + EP16): DeepEP's own published pure-RDMA
    latencies (docs/legacy.md: 128 tokens, hidden 7168, top-8, 400 Gb/s), scaled by bytes and NIC."""
    from servesim.hardware.moe_kernels import moe_tables

    h100, _ = moe_tables("h100_sxm", "sglang")
    b200, _ = moe_tables("b200_sxm", "sglang")
    args = (7168, 8, 256)
    assert h100.deepep("dispatch", "ll", 128, *args, 16).ms == pytest.approx(0.118)
    assert h100.deepep("combine", "ll", 128, *args, 16).ms == pytest.approx(0.195)
    assert h100.deepep("combine", "ll", 128, *args, 256).ms == pytest.approx(0.360)
    # twice the tokens, twice the bytes and the time (bandwidth-bound)
    assert h100.deepep("dispatch", "ll", 256, *args, 32).ms == pytest.approx(2 * 0.155)
    # between published rank counts: log-linear (24 ranks: halfway from 16 to 32 in log2 is 22.6)
    mid = h100.deepep("dispatch", "ll", 128, *args, 24).ms
    assert 0.118 < mid < 0.155
    # a GPU with twice the NIC rate (B200's 800 Gb/s in the catalog) halves it
    assert b200.deepep("dispatch", "ll", 128, *args, 16).ms == pytest.approx(0.118 / 2)
    # a few tokens cost no less than the kernel measured inside one node (its latency floor)
    intra = h100.deepep("dispatch", "ll", 2, *args, 8).ms
    assert h100.deepep("dispatch", "ll", 2, *args, 16).ms == pytest.approx(intra)
    # and across nodes it is never cheaper than inside one at the same tokens
    for tok in (8, 32, 128, 512):
        inside = h100.deepep("combine", "ll", tok, *args, 8).ms
        assert h100.deepep("combine", "ll", tok, *args, 16).ms >= inside


def test_trtllm_block_fp8_takes_trtllm_gen_without_ep() -> None:
    # TensorRT-LLM's B200 block-FP8 MoE at <= 256 tokens without EP: the faster of its DeepGEMM row
    # and SGLang's FlashInfer TRTLLM-gen row of the same shape (the TRTLLM backend's kernels); with
    # EP, or above 256 tokens, its own DeepGEMM rows.
    trt, sg = _t("b200_sxm", "trtllm"), _t("b200_sxm", "sglang")
    for tokens in (1, 4, 64, 256):
        got = trt.moe("fp8_block", tokens, *DSV3, 8, 1).ms
        assert got == sg.moe("fp8_block", tokens, *DSV3, 8, 1).ms, tokens
    # b200_sxm/moe_trtllm_1.3.0rc20_moe_perf.parquet (fp8_block, deepgemm): EP8 at 4 tokens, TP8 at 1024
    assert close(trt.moe("fp8_block", 4, *DSV3, 1, 8).ms, 0.09063680171966552)
    assert close(trt.moe("fp8_block", 1024, *DSV3, 8, 1).ms, 0.51146240234375)
    assert trt.moe("fp8_block", 4, *DSV3, 8, 1).ms < 0.5 * 0.13346560001373292  # DeepGEMM 133 us: not kept


# ------------------------------------------------------------------ sibling GPUs (one die, two products)


def test_b200_cutlass_row_replaced_by_its_gb200_sibling() -> None:
    # DeepSeek-V3's NVFP4 layer, CUTLASS, TP1 EP8, 256 tokens (power_law_1.01): b200_sxm/moe_trtllm_1.3.0rc20
    # _moe_perf.parquet row 73102, 0.29124 ms; gb200 row 73345, 0.15125 ms (both their own envelopes)
    b200_raw, gb200_raw = 0.2912384033203125, 0.1512511968612671
    subs = _sibling_substitutions("b200_sxm", "trtllm")
    m = subs["table_median_ratio"]
    # the B200 is the GB200's GPU at 1,000 W against 1,200 W: a few % slower over the table, never faster
    assert subs["sibling"] == "gb200" and 1.0 <= m <= 1.1
    assert b200_raw > subs["threshold"] * m * gb200_raw  # 1.93 x at this count: why the series was replaced
    row = next(r for r in subs["rows"] if r["dtype"] == "fp4" and r["shape"] == "7168,2048,8,256,1,8")
    assert row["backend"] == "" and row["kernel_source"] == "moe_torch_flow_cutlass"
    assert row["ratio"] > subs["threshold"] * m
    lk = _t("b200_sxm", "trtllm").moe("fp4", 256, *DSV3, 1, 8)
    want = float(f"{gb200_raw:.3e}") * m  # the GB200's row as built (4 significant digits) x the ratio
    assert lk.measured and close(lk.ms, want), (lk.ms, want)
    assert "gb200" in lk.note and "collection artifact" in lk.note
    # above its speed of light: the 32 local experts touched (uniform routing) at 3 x 7168 x 2048 NVFP4
    # values of 0.5625 bytes, plus 256 x 8 / 8 token-expert pairs' 2-byte activations (4 x hidden + 6 x
    # inter) at the B200's 7.7 TB/s
    touched = 32 * (1 - (1 - 8 / 256) ** 256)
    light_ms = (touched * 3 * 7168 * 2048 * 0.5625 + 256 * (4 * 7168 + 6 * 2048)) / 7.7e12 * 1e3
    assert lk.ms > light_ms > 0.1
    gb = _t("gb200", "trtllm").moe("fp4", 256, *DSV3, 1, 8)  # the sibling keeps its own row (3 digits)
    assert gb.note == "" and close(gb.ms, gb200_raw, 4e-3), gb.ms


def test_b200_row_its_sibling_agrees_with_is_kept() -> None:
    # TP1 EP2, 1024 tokens: b200_sxm row 128862, 0.60420 ms; gb200 row 129427, 0.58983 ms (1.02 x)
    subs = _sibling_substitutions("b200_sxm", "trtllm")
    assert not any(r["dtype"] == "fp4" and r["shape"] == "7168,2048,8,256,1,2" for r in subs["rows"])
    lk = _t("b200_sxm", "trtllm").moe("fp4", 1024, *DSV3, 1, 2)
    assert lk.measured and lk.note == "" and close(lk.ms, 0.604204797744751)


def test_b200_trtllm_gen_stretch_replaced_and_its_neighbour_kept() -> None:
    # DeepSeek-V3's NVFP4 layer, TensorRT-LLM's TRTLLM-gen rows (moe_torch_flow_min_latency + finalize),
    # TP1 EP64, power_law_1.01: a series whose median ratio to the GB200's stays near the table's, with a
    # stretch at 80-320 tokens.  At 128 tokens b200_sxm row 69886, 0.068659 ms; gb200 row 70102,
    # 0.036755 ms; at 384 b200_sxm row 69891, 0.068147 ms; gb200 row 70107, 0.048730 ms.  Finalize:
    # 3 us + the 128 x 8 expert outputs and 128 rows of 7168 BF16 values at 7.7 (B200) / 8 (GB200) TB/s
    def fin(n: int, hbm: float) -> float:
        return 0.003 + 2 * n * 7168 * 9 / hbm * 1e3

    subs = _sibling_substitutions("b200_sxm", "trtllm")
    m, slow = subs["table_median_ratio"], subs["threshold"]
    row = next(r for r in subs["rows"]
               if (r["backend"], r["dtype"], r["shape"]) == ("trtllm", "fp4", "7168,2048,8,256,1,64"))
    assert 128 in row["stretch"] and 384 not in row["stretch"] and len(row["stretch"]) >= 3
    b128, g128 = 0.06865919828414917 + fin(128, 7.7e12), 0.03675520122051239 + fin(128, 8e12)
    b384, g384 = 0.06814720034599304 + fin(384, 7.7e12), 0.04872959852218628 + fin(384, 8e12)
    assert b128 > slow * m * g128  # 1.77 x the GB200's over the median 1.043 x: inside the stretch
    assert b384 < slow * m * g384  # 1.34 x: not above 1.3 x 1.043, so kept
    trt = _t("b200_sxm", "trtllm").backend("trtllm")
    assert trt is not None
    lk = trt.moe("fp4", 128, *DSV3, 1, 64)
    want = float(f"{g128:.3e}") * m  # the GB200's row as built (4 significant digits) x the ratio
    assert lk.measured and close(lk.ms, want, 1e-3) and lk.ms < 0.62 * b128, (lk.ms, want)
    assert "gb200" in lk.note and "/128/" in lk.note
    kept = trt.moe("fp4", 384, *DSV3, 1, 64)
    assert kept.measured and close(kept.ms, b384), (kept.ms, b384)


def test_sibling_substitutions_hold_the_siblings_rows() -> None:
    # every replaced series, on every GPU of the two pairs: at each token count the sibling's value times
    # the recorded table-wide ratio (within 1%: each pair has a GPU stored to 3 significant digits, so the
    # build's 4-digit value and the shipped one differ by up to 0.5% each way), or where that is under the
    # point's speed of light (uniform-routing experts' bytes at full HBM), that bound; the measured ratio
    # above the threshold; vLLM's tables untouched.  A stretch's row: the same at its token counts, or
    # below it where the series' monotone envelope (a later, faster own point) lowered it
    pairs = {"b200_sxm": "gb200", "gb200": "b200_sxm", "b300_sxm": "gb300", "gb300": "b300_sxm"}
    seen = 0
    for gpu, sib in pairs.items():
        assert _sibling_substitutions(gpu, "vllm") == {}
        for engine in ("sglang", "trtllm"):
            subs = _sibling_substitutions(gpu, engine)
            if not subs:
                continue
            m = subs["table_median_ratio"]
            assert subs["sibling"] == sib and 0.9 <= m <= 1.1
            name = f"{gpu}_{engine}_moe.json.gz"
            with gzip.open(DATA / name, "rt", encoding="utf-8") as fh:
                tokens = json.load(fh)["moe"]["tokens"]
            for r in subs["rows"]:
                assert r["ratio"] / m > subs["threshold"] * (1 - 1e-3), r  # both to 4 significant digits
                tv, sv = _t(gpu, engine), _t(sib, engine)
                t, s = (tv.backend(r["backend"]), sv.backend(r["backend"])) if r["backend"] else (tv, sv)
                assert t is not None and s is not None, r
                shape = tuple(int(x) for x in r["shape"].split(","))
                assert s.moe_source(r["dtype"], shape) == r["kernel_source"]
                h, i, k, e, tp, ep = shape
                stretch = r.get("stretch")
                assert stretch is None or (len(stretch) >= 3 and set(stretch) <= set(tokens)), r
                for n in stretch or tokens:
                    got, base = t.moe(r["dtype"], n, *shape), s.moe(r["dtype"], n, *shape)
                    touched = e / ep * (1 - (1 - k / e) ** n)
                    nbytes = (touched * 3 * h * i / tp * {"bf16": 2, "fp8": 1, "fp8_block": 1, "fp4": 0.5625,
                                                            "mxfp4_mxfp8": 0.53125}[r["dtype"]]
                              + n * k / ep * (4 * h + 6 * i / tp))
                    light_ms = nbytes / t.hbm_bytes_per_s * 1e3
                    # a stretch's point may sit below its light where the envelope took a later own
                    # (measured, power-law routed) point outside the stretch
                    later = ([t.moe(r["dtype"], x, *shape).ms for x in tokens if x > n and x not in stretch]
                             if stretch is not None else [])
                    assert got.ms >= light_ms * (1 - 1e-9) or got.ms in later, (gpu, r, n)
                    held = (close(got.ms, base.ms * m, 1e-2) or got.ms <= light_ms * 1.01
                            or (stretch is not None and got.ms < base.ms * m and got.ms in later))
                    assert held, (gpu, r, n, got, base)
                    assert got.measured and sib in got.note
                    seen += 1
    assert seen > 100 * 27  # over a hundred series, 27 token counts each
