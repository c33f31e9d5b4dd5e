"""Measured kernel tables (servesim.hardware.kernels): read-back, interpolation, fallbacks, checks.

The expected latencies below are copied from aiconfigurator's parquet files (the ``latency``
column, ms) as ``scripts/build_kernel_tables.py`` reads them; the shipped tables round to 4
significant digits.  vLLM's tables are the default; SGLang's and TensorRT-LLM's are tested in
the section "other engines".
"""

from __future__ import annotations

import gzip
import math
import random
import statistics
import subprocess
import sys
import timeit
from pathlib import Path

import pytest

from servesim._checks import ParameterError
from servesim.hardware import kernels
from servesim.hardware.engines import default_engine
from servesim.hardware.kernels import (
    ENGINE_TABLES,
    GPU_TABLES,
    KernelTables,
    Lookup,
    engine_label,
    engine_tables,
    engines_for,
    table_name,
    tables_for,
)

DATA = Path(kernels.__file__).parent / "data" / "kernels"
ROUND = 6e-4  # 4 significant digits: relative rounding error <= 5e-4

# (table, dtype, m, n, k, latency ms from gemm_perf.parquet)
GEMM_POINTS = [
    ("h100_sxm", "bf16", 1, 8192, 1024, 0.009564444422721863),
    ("h100_sxm", "bf16", 1, 7168, 8192, 0.0496693319744534),
    ("h100_sxm", "bf16", 4096, 4096, 4096, 0.16602578428056505),
    ("h100_sxm", "bf16", 32768, 65536, 51200, 248.6262749565972),
    ("h100_sxm", "fp8", 16, 8192, 3584, 0.01573244399494595),
    ("b200_sxm", "fp4", 1, 7168, 8192, 0.013088000317414602),
    ("b200_sxm", "fp4", 8192, 8192, 8192, 0.25759466489156085),
    ("b200_sxm", "bf16", 64, 65536, 512, 0.014705777168273926),
    ("a100_sxm", "bf16", 1, 8192, 1024, 0.01588800052801768),
    ("a100_sxm", "bf16", 8192, 16384, 16384, 15.341437445746529),
]
# (table, kind, kv dtype, batch, step or isl, latency ms) for 8 heads, 1 KV head, head_dim 128
ATTENTION_POINTS = [
    ("h100_sxm", "decode", "bf16", 1, 4095, 0.01516266663869222),
    ("h100_sxm", "decode", "fp8", 64, 4095, 0.0440533310174942),
    ("b200_sxm", "decode", "bf16", 64, 4095, 0.031194667021433514),
    ("a100_sxm", "decode", "bf16", 64, 1023, 0.040976000328858696),
    ("h100_sxm", "prefill", "bf16", 1, 4096, 0.06947200000286102),
    ("h100_sxm", "prefill", "fp8", 64, 1024, 0.6070773204167684),
    ("b200_sxm", "prefill", "bf16", 64, 1024, 0.22544533014297485),
]
# (table, GPUs, message_size in bf16 elements as stored upstream, latency ms), vllm_graph backend
ALLREDUCE_POINTS = [
    ("h100_sxm", 2, 8192, 0.004493440091609955),
    ("h100_sxm", 8, 1048576, 0.01938976049423218),
    ("b200_sxm", 4, 1048576, 0.02375648021697998),
]


def close(a: float, b: float, rel: float = ROUND) -> bool:
    return abs(a - b) <= rel * abs(b)


# ------------------------------------------------------------------ names and loading


def test_table_name_aliases() -> None:
    for name in ("h100-sxm", "h100_sxm", "h100", "H100-SXM"):
        assert table_name(name) == "h100_sxm"
    for name in ("h200", "h200-sxm", "h200_sxm"):
        assert table_name(name) == "h200_sxm"
    for name in ("a100-80gb", "a100-sxm", "a100_sxm"):
        assert table_name(name) == "a100_sxm"
    for name in ("b200", "b200-sxm", "b200_sxm"):
        assert table_name(name) == "b200_sxm"
    for name in ("mi300x", "a100", "a100-40gb", "l40s", ""):
        assert table_name(name) is None
        assert tables_for(name) is None


def test_tables_load_and_cache() -> None:
    for name in GPU_TABLES:
        t = tables_for(name)
        assert isinstance(t, KernelTables)
        assert t is tables_for(name)
        assert t.name == name and t.engine.startswith("vLLM ")
        assert t.hbm_bytes_per_s > 1e12 and t.memory_bytes > 7e10 and t.nvlink_bytes_per_s >= 3e11
        assert t.gemm_dtypes[0] == "bf16" and set(t.gemm_dtypes) <= set(t.flops_per_s)
        assert 0.3 < t.memory_efficiency < 1.0
    assert _t("a100-80gb").gemm_dtypes == ("bf16",) and _t("a100-80gb").kv_dtypes == ("bf16",)
    assert _t("h100").gemm_dtypes == ("bf16", "fp8") and _t("h100").kv_dtypes == ("bf16", "fp8")
    assert _t("b200").gemm_dtypes == ("bf16", "fp8", "fp4") and _t("b200").kv_dtypes == ("bf16", "fp8")


def _t(name: str) -> KernelTables:
    t = tables_for(name)
    assert t is not None
    return t


def test_loading_needs_neither_numpy_nor_pyarrow() -> None:
    code = ("import sys\n"
            "from servesim.hardware.kernels import tables_for\n"
            "t = tables_for('b200')\n"
            "t.gemm('fp4', 3.5, 5000, 7000); t.decode_attention(3, 900, 8, 1, 128, 'fp8')\n"
            "t.prefill_attention(2, 900, 8, 1, 128, 'bf16'); t.allreduce(8, 1e6)\n"
            "print(sorted(m for m in ('numpy', 'pyarrow', 'scipy', 'pandas') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_shipped_files() -> None:
    vllm_total = 0
    for name in GPU_TABLES:
        blob = (DATA / f"{name}.json.gz").read_bytes()
        assert blob[4:8] == b"\0\0\0\0"  # gzip mtime 0: deterministic bytes
        gzip.decompress(blob)
        vllm_total += len(blob)
    for path in DATA.glob("*.json.gz"):
        assert path.read_bytes()[4:8] == b"\0\0\0\0", path.name
    notice = (DATA / "NOTICE.md").read_text()
    assert "095f58a51c4ca8e61b66ec108d86f223f8d559ce" in notice and "Apache" in notice
    for label in ("vLLM 0.24.0", "SGLang 0.5.14", "TensorRT-LLM 1.3.0rc20", "SGLang 0.5.10"):
        assert label in notice
    license_text = (DATA / "LICENSE-aiconfigurator-Apache-2.0.txt").read_text()
    assert "Apache License" in license_text and "Version 2.0" in license_text
    assert vllm_total < 3_000_000
    shipped = sum(p.stat().st_size for p in DATA.iterdir() if p.is_file())
    assert shipped < 8_000_000  # everything under data/kernels/, all engines


# ------------------------------------------------------------------ read-back


@pytest.mark.parametrize(("name", "dtype", "m", "n", "k", "ms"), GEMM_POINTS)
def test_gemm_grid_points_read_back(name: str, dtype: str, m: int, n: int, k: int, ms: float) -> None:
    """A grid point reads back the monotone envelope of the raw value: the raw value itself, or
    the stored time of a larger neighbour where that is less (a smaller GEMM can be padded)."""
    t = _t(name)
    lk = t.gemm(dtype, m, n, k)
    assert lk.measured and lk.note == ""
    _check_envelope(lk.ms, ms, t._gemm_grid(dtype), (m, n, k))


def _check_envelope(stored: float, raw: float, grid: kernels._Grid, point: tuple[float, ...]) -> None:
    """``stored`` is min(raw, the stored value one grid step up on each axis), within rounding."""
    ups = []
    for i, (x, axis) in enumerate(zip(point, grid.axes, strict=True)):
        j = axis.index(float(x))
        if j + 1 < len(axis):
            q = list(point)
            q[i] = axis[j + 1]
            v = grid.values[sum(axis_.index(float(c)) * st for axis_, c, st in
                                zip(grid.axes, q, grid.strides, strict=True))]
            if v is not None:
                ups.append(v)
    assert close(stored, min([raw, *ups]), rel=2 * ROUND), (stored, raw, ups)


@pytest.mark.parametrize(("name", "kind", "kv", "batch", "length", "ms"), ATTENTION_POINTS)
def test_attention_grid_points_read_back(name: str, kind: str, kv: str, batch: int, length: int,
                                         ms: float) -> None:
    t = _t(name)
    lk = (t.decode_attention if kind == "decode" else t.prefill_attention)(batch, length, 8, 1, 128, kv)
    assert lk.measured
    _check_envelope(lk.ms, ms, t._attn_grid(kind, kv, (8, 1, 128))[0], (batch, length))


@pytest.mark.parametrize(("name", "gpus", "elements", "ms"), ALLREDUCE_POINTS)
def test_allreduce_points_read_back_in_bytes(name: str, gpus: int, elements: int, ms: float) -> None:
    t = _t(name)
    lk = t.allreduce(gpus, 2 * elements)  # the upstream size counts bf16 elements
    assert lk.measured
    _check_envelope(lk.ms, ms, t._ar_grid(gpus), (2 * elements,))


def test_glitch_replaced_by_larger_shape() -> None:
    # Upstream: m=17 takes 0.0566 ms, m=32 0.00596 ms (H100 fp8, n=2048, k=768): a glitch.
    t = _t("h100")
    v17 = t.gemm("fp8", 17, 2048, 768).ms
    assert v17 <= 0.005959110955397288 * (1 + ROUND)
    assert v17 < 0.0566142201423645 / 5


# ------------------------------------------------------------------ shape of the tables


def _grids(t: KernelTables) -> list[kernels._Grid]:
    out = [t._gemm_grid(d) for d in t.gemm_dtypes]
    out += [t._ar_grid(g) for g in t.allreduce_gpus()]
    for kind in ("decode", "prefill"):
        for kv in t.kv_dtypes:
            out.append(t._attn_grid(kind, kv, (8, 1, 128))[0])
    return out


def _all_tables() -> list[KernelTables]:
    out = []
    for name in GPU_TABLES:
        for engine in ENGINE_TABLES:
            t = tables_for(name, engine)
            if t is not None:
                out.append(t)
    return out


def test_tables_are_monotone() -> None:
    rng = random.Random(1)
    for t in _all_tables():
        name = f"{t.name} {t.engine_name}"
        for grid in _grids(t):
            vals = grid.values
            for flat in rng.sample(range(len(vals)), min(3000, len(vals))):
                v = vals[flat]
                if v is None:
                    continue
                for st, size in zip(grid.strides, grid.shape, strict=True):
                    if (flat // st) % size < size - 1:
                        w = vals[flat + st]
                        if w is not None:
                            assert v <= w, (name, grid.names, flat)


def test_gemm_monotone_when_doubling() -> None:
    for name in GPU_TABLES:
        t = _t(name)
        top = 8192 if name == "a100_sxm" else 32768
        for dtype in t.gemm_dtypes:
            for n in (4096, 8192, 16384):
                for k in (4096, 8192, 16384):
                    m_series = [t.gemm(dtype, m, n, k).ms for m in (1024, 2048, 4096, 8192, top)]
                    assert m_series == sorted(m_series), (name, dtype, n, k)
            for m in (2048, 4096, 8192):
                n_series = [t.gemm(dtype, m, n, 8192).ms for n in (1024, 2048, 4096, 8192, 16384)]
                k_series = [t.gemm(dtype, m, 8192, k).ms for k in (1024, 2048, 4096, 8192, 16384)]
                assert n_series == sorted(n_series), (name, dtype, m)
                assert k_series == sorted(k_series), (name, dtype, m)


def test_decode_grows_with_context_and_batch() -> None:
    t = _t("h100")
    ctx = [t.decode_attention(32, c, 8, 1, 128, "bf16").ms for c in (1023, 4095, 16383)]
    batch = [t.decode_attention(b, 8191, 8, 1, 128, "bf16").ms for b in (16, 64, 128)]
    assert ctx == sorted(ctx) and batch == sorted(batch)


# ------------------------------------------------------------------ interpolation


def test_interpolation_between_grid_points_is_log_log() -> None:
    t = _t("h100")
    m_axis = t._gemm_grid("bf16").axes[0]
    lo, hi = 4353, 8192
    assert m_axis.index(hi) == m_axis.index(lo) + 1  # neighbours on the grid
    a, b = t.gemm("bf16", lo, 4096, 4096).ms, t.gemm("bf16", hi, 4096, 4096).ms
    for m in (4400.0, 6000.5, 8000.0):
        v = t.gemm("bf16", m, 4096, 4096)
        assert v.measured and min(a, b) <= v.ms <= max(a, b)
    mid = t.gemm("bf16", math.sqrt(lo * hi), 4096, 4096).ms  # halfway in log m: the geometric mean
    assert mid == pytest.approx(math.sqrt(a * b), rel=1e-12)
    d0 = t.decode_attention(8, 1023, 8, 1, 128, "bf16").ms
    d1 = t.decode_attention(8, 2047, 8, 1, 128, "bf16").ms
    dm = t.decode_attention(8, 1500.5, 8, 1, 128, "bf16")
    assert dm.measured and min(d0, d1) <= dm.ms <= max(d0, d1)
    r0, r1 = t.allreduce(4, 2**20).ms, t.allreduce(4, 2**21).ms
    assert min(r0, r1) <= t.allreduce(4, 1.5 * 2**20).ms <= max(r0, r1)


def test_power_law_is_exact() -> None:
    xs, ys = [1.0, 3.0, 10.0, 64.0], [2.0, 5.0, 40.0]

    def law(x: float, y: float) -> float:
        return 0.7 * x**1.3 * y**-0.4

    grid = kernels._Grid(("x", "y"), (xs, ys), [law(x, y) for x in xs for y in ys])
    rng = random.Random(2)
    for _ in range(200):
        x, y = math.exp(rng.uniform(0, math.log(64))), math.exp(rng.uniform(math.log(2), math.log(40)))
        v = grid.interp((x, y))
        assert v == pytest.approx(law(x, y), rel=1e-12)
    assert grid.interp((65.0, 3.0)) is None  # outside: no value


# ------------------------------------------------------------------ fallbacks


def test_fallback_above_range_flagged_and_near_scaled_edge() -> None:
    t = _t("h100")
    edge = t.gemm("bf16", 32768, 4096, 4096).ms
    lk = t.gemm("bf16", 65536, 4096, 4096)
    assert not lk.measured and "m=65536 above the measured 32768" in lk.note and "of peak" in lk.note
    assert 0.5 < lk.ms / (2 * edge) < 2  # compute bound: twice the work
    assert t.gemm("bf16", 32768 * 1.0001, 4096, 4096).ms == pytest.approx(edge, rel=1e-3)  # continuous
    p_edge = t.prefill_attention(1, 16384, 8, 1, 128, "bf16").ms
    p = t.prefill_attention(1, 32768, 8, 1, 128, "bf16")
    assert not p.measured and "prompt=32768 above" in p.note
    assert 0.5 < p.ms / (4 * p_edge) < 2  # prompt^2
    d_edge = t.decode_attention(4, 131071, 8, 1, 128, "bf16").ms
    d = t.decode_attention(4, 262143, 8, 1, 128, "bf16")
    assert not d.measured and 0.5 < d.ms / (2 * d_edge) < 2
    ar_edge = t.allreduce(8, 2**30).ms
    ar = t.allreduce(8, 2**31)
    assert not ar.measured and 0.5 < ar.ms / (2 * ar_edge) < 2


def test_fallback_in_unmeasured_cell() -> None:
    t = _t("h100")
    lk = t.gemm("bf16", 1, 65536, 65536)  # n = k = 65536 was not measured
    assert not lk.measured and "not measured" in lk.note
    near = t.gemm("bf16", 1, 65536, 51200).ms * 65536 / 51200  # memory bound: weight bytes
    assert 0.5 < lk.ms / near < 2
    d = t.decode_attention(64, 65535, 8, 1, 128, "bf16")  # batch x context too large upstream
    assert not d.measured
    assert 0.5 < d.ms / (2 * t.decode_attention(64, 32767, 8, 1, 128, "bf16").ms) < 2


def test_fallback_below_range_holds_the_floor() -> None:
    t = _t("h100")
    lk = t.gemm("bf16", 0.5, 4096, 4096)
    assert not lk.measured and "below the measured 1" in lk.note
    assert 0.5 < lk.ms / t.gemm("bf16", 1, 4096, 4096).ms <= 1.0
    tiny = t.allreduce(8, 16)
    assert not tiny.measured and tiny.ms == pytest.approx(t.allreduce(8, 256).ms, rel=0.01)


def test_unmeasured_heads_and_kv_dtype() -> None:
    t = _t("h100")
    exact = t.decode_attention(64, 4095, 8, 1, 128, "bf16")
    near = t.decode_attention(64, 4095, 7, 1, 128, "bf16")
    assert exact.measured and not near.measured and "nearest measured 8/1/128" in near.note
    assert near.ms == pytest.approx(exact.ms, rel=0.05)
    twice = t.decode_attention(64, 16383, 96, 16, 128, "bf16")  # 16 KV heads: not measured
    base = t.decode_attention(64, 16383, 64, 8, 128, "bf16")
    assert not twice.measured and 1.5 < twice.ms / base.ms < 2.5  # ~ twice the KV read
    a100 = _t("a100-80gb")
    fp8 = a100.decode_attention(64, 16383, 8, 1, 128, "fp8")
    bf16 = a100.decode_attention(64, 16383, 8, 1, 128, "bf16")
    assert not fp8.measured and "no fp8 KV cache measured" in fp8.note
    assert 0.4 < fp8.ms / bf16.ms < 1.0


def test_allreduce_counts() -> None:
    t = _t("h200")
    assert t.allreduce(1, 1e6) == Lookup(0.0, True)
    six = t.allreduce(6, 2**24)
    assert not six.measured and "6 GPUs not measured" in six.note
    assert t.allreduce(4, 2**24).ms * 0.5 < six.ms < t.allreduce(8, 2**24).ms * 2
    two_nodes = t.allreduce(16, 2**24)
    assert not two_nodes.measured and two_nodes.ms > t.allreduce(8, 2**24).ms


def test_allreduce_across_nodes_costs_at_least_nccls_own_latency() -> None:
    """NCCL's tree/LL latency model (data/nccl_latency.toml, from ncclTopoTuneModel): over 2 nodes of 8
    4.4 + 2 (7 x 0.52 x 1.8 + 1 x 5.0) = 27.504 us, over 4 nodes 4.4 + 2 (7 x 0.936 + 2 x 5.0) = 37.504 us;
    none on one node.  A decode step's small all-reduce over 16 GPUs (the engine's custom all-reduce
    cannot span nodes) costs that floor plus its inter-node bytes, however fast the node's own is."""
    assert kernels.nccl_multinode_allreduce_us(16, 2) == pytest.approx(27.504, abs=1e-9)
    assert kernels.nccl_multinode_allreduce_us(32, 4) == pytest.approx(37.504, abs=1e-9)
    assert kernels.nccl_multinode_allreduce_us(8, 1) == 0.0
    t = _t("h100")
    small = 16 * 7168 * 2  # 16 tokens of a 7168-wide activation in BF16
    node, two = t.allreduce(8, small), t.allreduce(16, small)
    assert node.ms < 0.0275 and "NCCL's own multi-node latency" in two.note
    inter = 2 * (2 - 1) / 2 * (small / 8) / t.internode_bytes_per_s * 1e3
    assert two.ms == pytest.approx(0.027504 + inter, rel=1e-9)
    assert t.allreduce(16, 4 * small).ms >= two.ms  # never cheaper with more bytes


# ------------------------------------------------------------------ checks


def test_unknown_gemm_dtype_names_the_dtypes_of_the_gpu() -> None:
    with pytest.raises(ParameterError) as err:
        _t("h100").gemm("fp4", 1, 4096, 4096)
    assert err.value.name == "dtype" and err.value.value == "fp4"
    assert "bf16, fp8" in err.value.valid and "h100_sxm" in err.value.valid
    with pytest.raises(ParameterError):
        _t("a100_sxm").gemm("fp8", 1, 4096, 4096)


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, True, "8", None])
def test_bad_sizes_raise(bad: object) -> None:
    t = _t("h100")
    with pytest.raises(ParameterError) as err:
        t.gemm("bf16", bad, 4096, 4096)  # type: ignore[arg-type]
    assert err.value.name == "m"
    with pytest.raises(ParameterError):
        t.allreduce(8, bad)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        t.decode_attention(8, bad, 8, 1, 128, "bf16")  # type: ignore[arg-type]


def test_bad_attention_arguments_raise() -> None:
    t = _t("h100")
    with pytest.raises(ParameterError) as err:
        t.decode_attention(8, 100, 8, 1, 128, "int4")
    assert err.value.name == "kv_dtype"
    with pytest.raises(ParameterError) as err:
        t.decode_attention(8, 100, 8, 16, 128, "bf16")
    assert err.value.name == "kv_heads"
    with pytest.raises(ParameterError):
        t.prefill_attention(8, 100, 8.5, 1, 128, "bf16")  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        t.allreduce(0, 1e6)


# ------------------------------------------------------------------ fits and speed


def test_fitted_gemm_efficiency_matches_the_stored_grid() -> None:
    t = _t("h100")
    g = t._gemm_grid("bf16")
    ms_, ns, ks = g.axes
    samples = []
    for i, m in enumerate(ms_):
        if m > 16:
            break
        for j, n in enumerate(ns):
            for k_i, k in enumerate(ks):
                v = g.values[i * g.strides[0] + j * g.strides[1] + k_i]
                if v is not None and n * k >= 2**24:
                    samples.append(n * k * 2 / t.hbm_bytes_per_s / (v * 1e-3))
    fit = t.efficiency["gemm"]["bf16"]["memory"]
    assert statistics.median(samples) == pytest.approx(fit, rel=1e-3)
    assert 0.6 < fit < 0.95
    for name in GPU_TABLES:
        for kind in t.efficiency:
            for fits in _t(name).efficiency[kind].values():
                for value in fits.values():
                    assert 0 < value < 1.2


def test_llama70b_tp8_decode_gemms_near_hbm_bound() -> None:
    # One layer's weight GEMMs at batch 1 on 8 H100s stream their weights at ~65-75% of HBM.
    t = _t("h100")
    shapes = [(1280, 8192), (8192, 1024), (7168, 8192), (8192, 3584)]
    looks = [t.gemm("bf16", 1, n, k) for n, k in shapes]
    assert all(lk.measured for lk in looks)
    share = sum(n * k * 2 for n, k in shapes) / t.hbm_bytes_per_s / (sum(lk.ms for lk in looks) * 1e-3)
    assert 0.6 < share < 0.8


def test_lookups_are_fast() -> None:
    t = _t("h100")
    t.gemm("bf16", 3.7, 1280, 8192)
    per = timeit.timeit(lambda: t.gemm("bf16", 3.7, 1280, 8192), number=2000) / 2000
    assert per < 50e-6  # a few microseconds in practice; loose for slow CI machines


# ------------------------------------------------------------------ other engines

# (table, engine, dtype, m, n, k, latency ms): the upstream parquet file (ai-dynamo/aiconfigurator
# 095f58a, aic-core/src/aiconfigurator_core/systems/data/<table>/) and its row (0-based, in file
# order) in the comment.
ENGINE_GEMM_POINTS = [
    # h100_sxm/gemm_trtllm_1.3.0rc20_gemm_perf.parquet row 24320 (bfloat16, torch_flow)
    ("h100_sxm", "trtllm", "bf16", 64, 8192, 8192, 0.05042133231957754),
    # h100_sxm/gemm_trtllm_1.3.0rc20_gemm_perf.parquet row 29126 (fp8, torch_flow)
    ("h100_sxm", "trtllm", "fp8", 64, 7168, 8192, 0.037621334195137024),
    # h100_sxm/gemm_sglang_0.5.14_gemm_perf.parquet row 9970 (fp8, sglang_sgl_kernel_fp8_scaled_mm)
    ("h100_sxm", "sglang", "fp8", 1, 8192, 8192, 0.02829866607983907),
    # h200_sxm/gemm_sglang_0.5.14_gemm_perf.parquet row 82004 (fp8_block, sglang_deepgemm_gemm_nt_f8f8bf16)
    ("h200_sxm", "sglang", "fp8_block", 16, 8192, 8192, 0.02199555602338579),
    # b200_sxm/gemm_trtllm_1.3.0rc20_gemm_perf.parquet row 32417 (nvfp4, torch_flow)
    ("b200_sxm", "trtllm", "fp4", 1, 8192, 8192, 0.022253334522247314),
    # b200_sxm/gemm_sglang_0.5.14_gemm_perf.parquet row 81872 (bfloat16, sglang_torch_linear)
    ("b200_sxm", "sglang", "bf16", 1024, 8192, 8192, 0.09469244215223525),
    # a100_sxm/gemm_sglang_0.5.10_gemm_perf.parquet row 16232 (bfloat16, sglang)
    ("a100_sxm", "sglang", "bf16", 1024, 8192, 8192, 0.5453813340928819),
]
# (table, engine, kind, kv dtype, batch, step or isl, latency ms) for 8 heads, 1 KV head, head_dim 128
ENGINE_ATTENTION_POINTS = [
    # h100_sxm/attention_trtllm_1.3.0rc20_generation_attention_perf.parquet row 20042 (torch_flow)
    ("h100_sxm", "trtllm", "decode", "bf16", 64, 2047, 0.04374399781227112),
    # b200_sxm/attention_sglang_0.5.14_generation_attention_perf.parquet row 15998 (trtllm_mha, fp8 KV)
    ("b200_sxm", "sglang", "decode", "fp8", 64, 4095, 0.020662400126457214),
    # h100_sxm/attention_sglang_0.5.14_context_attention_perf.parquet row 12678 (fa3, fp8 q and KV)
    ("h100_sxm", "sglang", "prefill", "fp8", 1, 8192, 0.20406560897827147),
    # h200_sxm/attention_trtllm_1.3.0rc20_context_attention_perf.parquet row 47565 (torch_flow)
    ("h200_sxm", "trtllm", "prefill", "bf16", 1, 8192, 0.3444480101267497),
    # a100_sxm/attention_sglang_0.5.10_generation_attention_perf.parquet row 4083 (flash_attention)
    ("a100_sxm", "sglang", "decode", "bf16", 64, 1023, 0.07240639925003052),
]
# (table, engine, GPUs, message_size in bf16 elements as stored upstream, latency ms)
ENGINE_ALLREDUCE_POINTS = [
    # h100_sxm/comm_sglang_0.5.14_custom_allreduce_perf.parquet row 118 (SGLang_CustomAllReduce_graph)
    ("h100_sxm", "sglang", 8, 1048576, 0.02008255958557129),
    # b200_sxm/comm_trtllm_1.3.0rc20_custom_allreduce_perf.parquet row 6 (TRTLLM)
    ("b200_sxm", "trtllm", 2, 8192, 0.005215039849281311),
]

# The tables each engine ships: every GPU except TensorRT-LLM 1.0.0 on the A100 (not shipped: its
# decode attention reads the KV cache faster than the A100's HBM allows, see NOTICE.md).
# Nor SGLang's dense tables on the B300: its b300_sxm/ GEMM and attention files were measured on a GB300.
SHIPPED = ({(g, e) for g in GPU_TABLES for e in ENGINE_TABLES}
           - {("a100_sxm", "trtllm"), ("b300_sxm", "sglang")})
NVL72 = ("gb200", "gb300")  # all-reduce measured on one tray of 4 GPUs
VERSIONS = {"vllm": ("vLLM 0.14.0", "vLLM 0.24.0"), "sglang": ("SGLang 0.5.10", "SGLang 0.5.14"),
            "trtllm": ("TensorRT-LLM 1.0.0", "TensorRT-LLM 1.3.0rc20")}


def _e(name: str, engine: str) -> KernelTables:
    t = tables_for(name, engine)
    assert t is not None, (name, engine)
    return t


def test_every_engine_table_loads() -> None:
    for name in GPU_TABLES:
        vllm = _t(name)
        assert engines_for(name) == tuple(e for e in ENGINE_TABLES if (name, e) in SHIPPED)
        for engine in ENGINE_TABLES:
            t = tables_for(name, engine)
            if (name, engine) not in SHIPPED:
                assert t is None
                continue
            assert isinstance(t, KernelTables) and t is tables_for(name, engine)
            assert t.name == name and t.engine_name == engine and t.device == vllm.device
            assert t.engine == VERSIONS[engine][0 if name == "a100_sxm" else 1]
            assert t.engine.startswith(engine_label(engine) + " ")
            assert t.hbm_bytes_per_s == vllm.hbm_bytes_per_s and t.kv_dtypes == vllm.kv_dtypes
            assert t.gemm_dtypes[0] == "bf16" and set(t.gemm_dtypes) <= set(t.flops_per_s)
            assert t.allreduce_gpus() == ((2, 4) if name in NVL72 else (2, 4, 8))
            assert 0.3 < t.memory_efficiency < 1.0
    assert tables_for("h100") is _t("h100") is tables_for("h100", "vllm")  # the default is vLLM's
    assert tables_for("h100", "TensorRT-LLM") is tables_for("h100", "trtllm")
    assert _e("h100", "sglang").gemm_dtypes == ("bf16", "fp8", "fp8_block")
    assert _e("b200", "trtllm").gemm_dtypes == ("bf16", "fp8", "fp4", "fp8_block")
    assert _e("a100-80gb", "sglang").gemm_dtypes == ("bf16",)
    for name in ("h100", "h200", "b200"):  # vLLM's fp8_block GEMM times are not GEMM times: dropped
        assert "fp8_block" not in _t(name).gemm_dtypes


def test_each_engine_keeps_its_default_kernels() -> None:
    for name in ("h100", "h200"):
        sg, trt = _e(name, "sglang"), _e(name, "trtllm")
        assert sg.sources["decode"] == sg.sources["prefill"] == "fa3"
        assert sg.sources["allreduce"] == "SGLang_CustomAllReduce_graph"
        assert sg.attn_dtype == {"decode": {"bf16": "bf16", "fp8": "bf16"},
                                 "prefill": {"bf16": "bf16", "fp8": "fp8"}}
        assert trt.sources["decode"] == trt.sources["prefill"] == "torch_flow"
        assert trt.sources["allreduce"] == "TRTLLM"
        assert trt.attn_dtype["prefill"] == {"bf16": "bf16", "fp8": "bf16"}
    assert _e("b200", "sglang").sources["decode"] == "trtllm_mha"
    assert _e("b200", "trtllm").sources["gemm"]["fp8_block"] == "deepgemm"
    assert _e("a100-80gb", "sglang").sources["decode"] == "flash_attention"
    assert _t("b200").sources["prefill"] == "vllm_flashinfer_trtllmprefill"


def test_engine_tables_notes_and_fallback() -> None:
    t, note = engine_tables("h200", "trtllm")
    assert t is _e("h200", "trtllm") and note == "kernel tables: NVIDIA H200, TensorRT-LLM 1.3.0rc20"
    t, note = engine_tables("h100-sxm", "sglang")
    assert t is _e("h100", "sglang") and note == "kernel tables: NVIDIA H100 80GB HBM3, SGLang 0.5.14"
    t, note = engine_tables("a100-80gb", "trtllm")
    assert t is _t("a100-80gb") and note == "no TensorRT-LLM tables for a100_sxm: vLLM 0.14.0's used"
    t, note = engine_tables("a100-80gb", "vllm")
    assert t is _t("a100-80gb") and note == "kernel tables: NVIDIA A100-SXM4-80GB, vLLM 0.14.0"
    assert engine_tables("mi300x", "sglang") == (None, "no measured kernel tables for mi300x")
    assert tables_for("mi300x", "trtllm") is None and engines_for("mi300x") == ()
    for bad in ("tgi", "", None):
        if bad is not None:  # tables_for's None is the default engine's (engines.toml default_engine)
            with pytest.raises(ParameterError) as err:
                tables_for("h100", bad)
            assert err.value.name == "engine" and "vllm, sglang, trtllm" in err.value.valid
        with pytest.raises(ParameterError):
            engine_tables("h100", bad)  # type: ignore[arg-type]
    assert tables_for("h100", None) is tables_for("h100", default_engine()) is not None


@pytest.mark.parametrize(("name", "engine", "dtype", "m", "n", "k", "ms"), ENGINE_GEMM_POINTS)
def test_engine_gemm_grid_points_read_back(name: str, engine: str, dtype: str, m: int, n: int, k: int,
                                           ms: float) -> None:
    t = _e(name, engine)
    lk = t.gemm(dtype, m, n, k)
    assert lk.measured and lk.note == ""
    _check_envelope(lk.ms, ms, t._gemm_grid(dtype), (m, n, k))


@pytest.mark.parametrize(("name", "engine", "kind", "kv", "batch", "length", "ms"), ENGINE_ATTENTION_POINTS)
def test_engine_attention_grid_points_read_back(name: str, engine: str, kind: str, kv: str, batch: int,
                                                length: int, ms: float) -> None:
    t = _e(name, engine)
    lk = (t.decode_attention if kind == "decode" else t.prefill_attention)(batch, length, 8, 1, 128, kv)
    assert lk.measured
    assert close(lk.ms, ms)


@pytest.mark.parametrize(("name", "engine", "gpus", "elements", "ms"), ENGINE_ALLREDUCE_POINTS)
def test_engine_allreduce_points_read_back_in_bytes(name: str, engine: str, gpus: int, elements: int,
                                                    ms: float) -> None:
    t = _e(name, engine)
    lk = t.allreduce(gpus, 2 * elements)  # the upstream size counts bf16 elements
    assert lk.measured
    _check_envelope(lk.ms, ms, t._ar_grid(gpus), (2 * elements,))


def test_engine_allreduce_hands_large_messages_to_nccl() -> None:
    # Above their size limits all engines run NCCL: at 512 MiB (2^28 elements) each table is the
    # NCCL half table within 10% (this is the evidence that message_size counts elements in all).
    # Except vLLM on GB200: 2.6-2.7x NCCL from 32 MiB up on two GPUs, 1.14x on four, as measured.
    for t in _all_tables():
        nc = t._doc["nccl_allreduce"]
        ns = len(nc["bytes"])
        for i, n in enumerate(nc["gpus"]):
            if (t.name, t.engine_name) == ("gb200", "vllm"):
                assert 1.0 < t.allreduce(n, 2**29).ms / nc["ms"][i * ns + nc["bytes"].index(2**29)] < 3.0
                continue
            ref = nc["ms"][i * ns + nc["bytes"].index(2**29)]
            assert 0.9 < t.allreduce(n, 2**29).ms / ref < 1.1, (t, n)


def test_shipped_decode_never_beats_hbm() -> None:
    # Reading the KV cache bounds a decode step: no shipped point with >= 2^27 bytes of KV runs
    # faster than 1.1 x HBM bandwidth (the rule that keeps TensorRT-LLM 1.0.0's A100 table out).
    for t in _all_tables():
        d = t._doc["decode"]
        nb, nc = len(d["batch"]), len(d["context"])
        for kv, by_heads in d["ms"].items():
            for heads, grid in by_heads.items():
                g, hd = (int(x) for x in heads.split(",")[1:])
                for i in range(nb):
                    for j in range(nc):
                        v = grid[i * nc + j]
                        kv_bytes = d["batch"][i] * d["context"][j] * g * hd * 2 * (2 if kv == "bf16" else 1)
                        if v is not None and kv_bytes >= 2**27:
                            assert kv_bytes / t.hbm_bytes_per_s / (v * 1e-3) <= 1.1, (t, kv, heads, i, j)


def test_fp8_block_gemms_are_sane_where_kept() -> None:
    # SGLang's and TensorRT-LLM's block-scaled FP8 GEMMs stream their weights like the per-tensor
    # ones (vLLM's, dropped, took 0.06-0.27 ms for this shape at every m).
    for name in ("h100_sxm", "h200_sxm", "b200_sxm"):
        for engine in ("sglang", "trtllm"):
            t = _e(name, engine)
            for m in (1, 64):
                r = t.gemm("fp8_block", m, 8192, 8192).ms / t.gemm("fp8", m, 8192, 8192).ms
                assert 0.5 < r < 2.0, (name, engine, m, r)


def test_trtllm_fp8_decode_gemms_slower_than_vllm_as_measured() -> None:
    # Llama-3-70B at TP8, batch 64 decode: TensorRT-LLM 1.3.0rc20's per-tensor FP8 linear (torch_flow)
    # is NOT faster than vLLM's CUTLASS kernel in these tables: 1.46x on the H100, 1.45x on the H200,
    # 1.75x on the B200 (its small-shape floor is ~12-14 us where vLLM's is ~5 us).
    shapes = [(1280, 8192), (8192, 1024), (7168, 8192), (8192, 3584)]
    for name, lo, hi in (("h100_sxm", 1.3, 1.6), ("h200_sxm", 1.3, 1.6), ("b200_sxm", 1.5, 2.0)):
        trt = sum(_e(name, "trtllm").gemm("fp8", 64, n, k).ms for n, k in shapes)
        vllm = sum(_t(name).gemm("fp8", 64, n, k).ms for n, k in shapes)
        assert lo < trt / vllm < hi, (name, trt / vllm)
    # ... while its bf16 GEMMs match vLLM's within 20% at the same shapes
    trt = sum(_e("h100", "trtllm").gemm("bf16", 64, n, k).ms for n, k in shapes)
    vllm = sum(_t("h100").gemm("bf16", 64, n, k).ms for n, k in shapes)
    assert 0.8 < trt / vllm < 1.2


def test_engine_lookups_off_grid_and_nearest_heads() -> None:
    t = _e("b200", "trtllm")
    lk = t.gemm("fp8_block", 1, 64, 4096)  # n = 64: below its measured 128
    assert not lk.measured and "n=64 below the measured 128" in lk.note
    d = t.decode_attention(64, 4095, 7, 1, 128, "fp8")
    assert not d.measured and "nearest measured" in d.note
    sg = _e("h100", "sglang")
    assert 0.5 < sg.prefill_attention(1, 8192, 8, 1, 128, "fp8").ms / sg.prefill_attention(
        1, 8192, 8, 1, 128, "bf16").ms < 1.5
