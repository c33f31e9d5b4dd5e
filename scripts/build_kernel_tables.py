"""Build servesim's compact kernel tables from aiconfigurator's measured vLLM kernel timings.

Reads the parquet tables that ai-dynamo/aiconfigurator (Apache-2.0) measured with vLLM on four
GPUs and writes ``<gpu>.json.gz`` (plus ``NOTICE.md`` and the license) for
:mod:`servesim.hardware.kernels`, which reads them with the standard library only.  pyarrow is
needed by this script alone, never by the installed package.

    python scripts/build_kernel_tables.py [--source DIR] [--out DIR] [--check]

``--source`` defaults to ``../shared/data/kernels`` relative to the repository root, ``--out`` to
``src/servesim/hardware/data/kernels``.  The output is byte-for-byte deterministic: sorted keys,
latencies rounded to 4 significant digits, gzip with mtime 0.  ``--check`` rebuilds in memory and
fails if a shipped file differs.

What is kept (per GPU; NOTICE.md repeats this text):

* GEMM (``gemm_perf``): ``bfloat16`` -> ``bf16`` (torch.nn.functional.linear, i.e. cuBLAS; on
  the A100 table ``vllm_default``), ``fp8`` (per-tensor scaled, CutlassFP8ScaledMMLinearKernel)
  -> ``fp8``, ``nvfp4`` (FlashInferCuteDslNvFp4LinearKernel) -> ``fp4`` (B200 only).  Each
  (dtype, m, n, k) has exactly one row upstream (asserted), so no kernel choice is made.  Full
  m, n, k grids (m 1..32768, 74 values on Hopper/Blackwell; n, k 32..65536).  ``fp8_block``
  (128 x 128 block-scaled) is DROPPED: its times are not GEMM times (at n = k = 4096, B200
  DeepGemm takes 0.16-0.28 ms for every m from 1 to 4352, where the FP8 weight read alone is
  2 us and the per-tensor fp8 GEMM takes 0.009-0.026 ms for m 1..1024; H100 FlashInfer/DeepGemm
  takes 0.06-0.10 ms where per-tensor fp8 takes 0.012-0.039 ms), so they would mislead a step
  model.
* Decode attention (``generation_attention_perf``): ``window_size`` 0 (no sliding window; the
  128 / 1024 / 8192 window rows are dropped) and the kernel_source a default vLLM deployment runs
  on the GPU: A100 (vLLM 0.14) ``vllm_flash_attn`` (FlashAttention 2, the only one measured);
  H100 and H200 ``vllm_flash_attn_fa3`` (FlashAttention 3; the few ``vllm_flash_attn_fa4`` bf16
  rows are dropped); B200 ``vllm_flashinfer_trtllmdecode`` (FlashInfer's TRT-LLM kernels; the
  ``vllm_triton_attn`` fp8 rows are dropped).  Keyed by (kv_cache_dtype bf16/fp8, num_heads,
  num_key_value_heads, head_dim), each a grid batch_size x step (step = tokens already in the
  KV cache: 1, 3, 7, ..., 131071).
* Prefill attention (``context_attention_perf``): the same, grid batch_size x isl; B200 keeps
  ``vllm_flashinfer_trtllmprefill`` (its ``trtllmdecode`` and ``triton`` rows are dropped), the
  others the same source as for decode.  Repeated measurements of one point (A100 only: 408
  points measured twice) -> their median.
* All-reduce: vLLM's custom all-reduce under CUDA graphs (backend ``vllm_graph``, what serving
  runs), grid num_gpus x message size; and NCCL ``all_reduce`` of ``half`` for reference.
* ``system.yaml``: mem_bw, mem_capacity, tensor-core FLOP/s of bf16 / fp8 / fp4, intra- and
  inter-node bandwidth; the device name and vLLM version from the parquet rows.

Changes made to the measured numbers:

1. Latency stays in milliseconds, rounded to 4 significant digits.
2. Glitches removed.  The raw tables are noisy: some points are 2-10x slower than a larger
   neighbour (e.g. H100 fp8 m=17, n=2048, k=768: 0.0566 ms where m=32 takes 0.0060 ms; B200 fp8
   flips between ~0.005 and ~0.02-0.3 ms at small m).  A smaller problem can always be run by
   padding it to a larger one, so a point whose latency exceeds GLITCH = 1.5 times its monotone
   envelope (the least latency measured at any grid point >= it on every axis: m, n, k for
   GEMMs; batch and context/prompt for attention; size for all-reduce) is replaced by that
   envelope.  Every other point keeps its measured value, including the smaller systematic
   effects vLLM really shows (e.g. H100 bf16 m=1 GEMVs up to 1.2x slower than m=32).  After this
   every table is monotone within a factor 1.5: latency(p) <= 1.5 x latency(q) whenever q >= p
   on every axis.  The script prints the share of points replaced (bf16/fp8/fp4 GEMMs on
   A100/H100/H200 and fp4 on B200 under 1%, B200 fp8 about 12%, attention and all-reduce
   under 1%).  Points that were not measured stay missing (null).
3. All-reduce ``message_size`` is converted from ELEMENTS to BYTES (x 2 for bf16 / half); the
   evidence follows.

The unit of all-reduce ``message_size``: elements, not bytes.

a) NCCL half vs int8 at the same message_size: half takes 1.5-1.9x as long at large sizes
   (H100 2 GPUs, 2^28: 1.686 ms half vs 0.908 ms int8).  If the unit were bytes, the same bytes
   of either dtype would take about the same time; as elements, half moves twice the bytes.  And
   half at S elements vs int8 at 2 S elements (the same bytes) agree within 1-7% on 2 and 4 GPUs
   of every machine and on 8 A100s (3%); on 8 B200s int8 is 10% slower per byte and on 8
   H100/H200s 27-31% slower (H100: 2.677 vs 2.111 ms for 2^29 bytes): NCCL's algorithm differs
   by dtype there, plausibly NVLink SHARP, which reduces half in the switch but not int8.
b) Bus bandwidth at the largest sizes, busbw = 2 (N-1)/N x bytes / time, as elements of 2 bytes:
   H100 8 GPUs 445 GB/s and H200 8 GPUs 460 GB/s of the 450 GB/s NVLink (intra_node_bw; in-switch
   reduction lets an all-reduce reach ~100%), A100 8 GPUs 222 of 300 GB/s (74%, the usual
   nccl-tests figure for A100), B200 8 GPUs 704 of 900 GB/s (78%); 2 GPUs 59-71%.  Read as
   bytes, every machine would reach only 30-51% of NVLink, far below what NCCL reaches there.
c) The vLLM custom table (bf16) equals NCCL half at the same message_size at large sizes within
   1% (H100 2 GPUs at 2^28: 1.706 vs 1.686 ms; 8 GPUs 2.117 vs 2.111 ms): above its size limit
   vLLM hands the all-reduce to NCCL, so the two tables share the unit.
d) That limit: vLLM's custom all-reduce runs while the tensor is < 8 MiB; the A100 (vLLM 0.14)
   graph table jumps 3.6x between message_size 2^21 and 2^22 (0.0252 -> 0.0897 ms, 2 GPUs), i.e.
   between 4 MiB and 8 MiB if the unit is bf16 elements (it would be 2 -> 4 MiB as bytes, below
   the limit).

The script prints this evidence (busbw per GPU count) when it runs.

Fitted roofline efficiencies (stored under ``efficiency``, used by servesim outside the measured
range), from the STORED grid values:

* GEMM per dtype: ``memory`` = median over m <= 16 and n k >= 2^24 of
  (weight bytes / mem_bw) / latency, weight bytes = n k x (2 bf16, 1 fp8, 0.5625 fp4: 4 bits +
  one FP8 scale per 16 values); ``compute`` = median over m, n, k >= 4096 of
  (2 m n k / peak) / latency (peak of the dtype: bf16, fp8 or fp4 tensor-core FLOP/s);
  ``floor_ms`` = median latency over m <= 4, n <= 128, k <= 128 (launch-bound shapes).
* Decode attention per KV dtype: ``memory`` = median over points that read >= 2^27 bytes of KV
  of (KV bytes / mem_bw) / latency, KV bytes = batch x step x kv_heads x head_dim x 2 (K and V)
  x (2 bf16, 1 fp8); ``floor_ms`` = median over batch <= 2, step <= 15.
* Prefill attention per KV dtype: ``compute`` = median over isl >= 4096 of
  (FLOPs / bf16 peak) / latency, FLOPs = 4 batch heads head_dim isl (isl + 1) / 2 (causal);
  ``floor_ms`` = median over batch 1, isl <= 16.
* All-reduce per GPU count: ``bus`` = busbw / intra_node_bw at the largest size, ``floor_ms`` =
  latency at the smallest size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "kernels"
DEFAULT_OUT = ROOT / "src" / "servesim" / "hardware" / "data" / "kernels"

UPSTREAM_REPO = "ai-dynamo/aiconfigurator"
UPSTREAM_COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
UPSTREAM_FOLDER = ("aic-core/src/aiconfigurator_core/systems/data/<gpu>/ and "
                   "aic-core/src/aiconfigurator_core/systems/<gpu>.yaml")
LICENSE_FILE = "LICENSE-aiconfigurator-Apache-2.0.txt"

GPUS = ("a100_sxm", "h100_sxm", "h200_sxm", "b200_sxm")
FORMAT = 1
SIG_DIGITS = 4
GLITCH = 1.5

# upstream gemm_dtype -> (servesim name, the kernel_source expected for it, or None: per shape)
GEMM_DTYPES: dict[str, tuple[str, frozenset[str]]] = {
    "bfloat16": ("bf16", frozenset({"torch.nn.functional.linear", "vllm_default"})),
    "fp8": ("fp8", frozenset({"CutlassFP8ScaledMMLinearKernel"})),
    "nvfp4": ("fp4", frozenset({"FlashInferCuteDslNvFp4LinearKernel"})),
}
DROPPED_GEMM_DTYPES = {"fp8_block"}  # see the module docstring
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5625}
PEAK_KEY = {"bf16": "bfloat16_tc_flops", "fp8": "fp8_tc_flops", "fp4": "fp4_tc_flops"}
KV_DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}
KV_BYTES = {"bf16": 2.0, "fp8": 1.0}

# The attention kernel a default vLLM deployment runs on each GPU (vLLM 0.24 on Hopper: FlashAttention 3;
# on Blackwell: FlashInfer's TRT-LLM kernels; vLLM 0.14 on Ampere: FlashAttention 2).
DECODE_SOURCE = {"a100_sxm": "vllm_flash_attn", "h100_sxm": "vllm_flash_attn_fa3",
                 "h200_sxm": "vllm_flash_attn_fa3", "b200_sxm": "vllm_flashinfer_trtllmdecode"}
PREFILL_SOURCE = {"a100_sxm": "vllm_flash_attn", "h100_sxm": "vllm_flash_attn_fa3",
                  "h200_sxm": "vllm_flash_attn_fa3", "b200_sxm": "vllm_flashinfer_trtllmprefill"}
ALLREDUCE_BACKEND = "vllm_graph"
ALLREDUCE_ELEMENT_BYTES = 2  # bf16 (custom) and half (NCCL): message_size counts elements


def log(msg: str) -> None:
    sys.stderr.write(msg + "\n")


def r4(x: float) -> float:
    """Round to SIG_DIGITS significant digits (the stored precision)."""
    return float(f"{x:.{SIG_DIGITS - 1}e}")


def read_rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


def one_file(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise SystemExit(f"{folder}: expected one file matching {pattern}, found {[p.name for p in found]}")
    return found[0]


def read_system(path: Path) -> dict[str, float | str]:
    """The numbers servesim keeps from system.yaml (a flat 'key: value  # comment' reader)."""
    keep = {"mem_bw", "mem_capacity", "bfloat16_tc_flops", "fp8_tc_flops", "fp4_tc_flops",
            "intra_node_bw", "inter_node_bw", "num_gpus_per_node"}
    out: dict[str, float | str] = {}
    for line in path.read_text().splitlines():
        body = line.split("#", 1)[0].strip()
        if ":" not in body:
            continue
        key, value = (s.strip() for s in body.split(":", 1))
        if key in keep and value:
            out[key] = float(value)
    missing = {"mem_bw", "mem_capacity", "bfloat16_tc_flops", "intra_node_bw"} - out.keys()
    if missing:
        raise SystemExit(f"{path}: missing {sorted(missing)}")
    return out


def envelope(grid: list[float | None], shape: Sequence[int], pad_axes: Sequence[int]) -> list[float | None]:
    """Suffix minimum along the ``pad_axes`` of a C-ordered grid: each value becomes the least
    measured value at any point >= it on those axes (padding a smaller problem to a larger one is
    always possible).  Missing points (None) stay missing and do not take part."""
    inf = math.inf
    vals = [inf if v is None else v for v in grid]
    strides = [1] * len(shape)
    for a in range(len(shape) - 2, -1, -1):
        strides[a] = strides[a + 1] * shape[a + 1]
    for a in pad_axes:
        size, st = shape[a], strides[a]
        for flat in range(len(vals) - 1, -1, -1):  # from the top so the minimum propagates down
            if (flat // st) % size < size - 1:
                nxt = vals[flat + st]
                if nxt < vals[flat]:
                    vals[flat] = nxt
    return [None if g is None else v for g, v in zip(grid, vals, strict=True)]


def dense(points: dict[tuple[int, ...], float], axes: Sequence[Sequence[int]]) -> list[float | None]:
    """C-ordered flat grid over ``axes`` with None where a point was not measured."""
    out: list[float | None] = []

    def rec(prefix: tuple[int, ...], depth: int) -> None:
        if depth == len(axes):
            out.append(points.get(prefix))
            return
        for v in axes[depth]:
            rec((*prefix, v), depth + 1)

    rec((), 0)
    return out


def finish(raw: list[float | None], shape: Sequence[int], stats: dict[str, list[float]],
           label: str, pad_axes: Sequence[int] | None = None) -> list[float | None]:
    """Replace glitches (> GLITCH x the monotone envelope) by the envelope, then round.

    Records raw / envelope of every measured point (for the summary the script prints)."""
    env = envelope(raw, shape, range(len(shape)) if pad_axes is None else pad_axes)
    ratios = stats.setdefault(label, [])
    out: list[float | None] = []
    for a, e in zip(raw, env, strict=True):
        if a is None or e is None:
            out.append(None)
            continue
        ratios.append(a / e)
        out.append(r4(e if a > GLITCH * e else a))
    return out


def median(xs: Iterable[float]) -> float:
    lst = list(xs)
    if not lst:
        raise SystemExit("empty selection for a fitted efficiency")
    return statistics.median(lst)


def points_of(grid: list[float | None],
              axes: Sequence[Sequence[int]]) -> Iterable[tuple[tuple[int, ...], float]]:
    idx = 0

    def rec(prefix: tuple[int, ...], depth: int) -> Iterable[tuple[tuple[int, ...], float]]:
        nonlocal idx
        if depth == len(axes):
            v = grid[idx]
            idx += 1
            if v is not None:
                yield prefix, v
            return
        for a in axes[depth]:
            yield from rec((*prefix, a), depth + 1)

    yield from rec((), 0)


# --------------------------------------------------------------------------- tables


def build_gemm(rows: list[dict[str, Any]], system: dict[str, float | str],
               stats: dict[str, list[float]]) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    by_dtype: dict[str, dict[tuple[int, int, int], float]] = defaultdict(dict)
    sources: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        if r["gemm_dtype"] in DROPPED_GEMM_DTYPES:
            continue
        if r["gemm_dtype"] not in GEMM_DTYPES:
            raise SystemExit(f"unknown gemm_dtype {r['gemm_dtype']!r}")
        name, allowed = GEMM_DTYPES[r["gemm_dtype"]]
        if r["kernel_source"] not in allowed:
            raise SystemExit(f"unexpected kernel_source {r['kernel_source']!r} for {r['gemm_dtype']}")
        key = (r["m"], r["n"], r["k"])
        if key in by_dtype[name]:
            raise SystemExit(f"two rows for {name} {key}: a kernel choice would be needed")
        by_dtype[name][key] = float(r["latency"])
        sources[name].add(r["kernel_source"])
    tables: dict[str, Any] = {}
    eff: dict[str, Any] = {}
    for name, pts in sorted(by_dtype.items()):
        axes = [sorted({p[i] for p in pts}) for i in range(3)]
        shape = [len(a) for a in axes]
        grid = finish(dense(pts, axes), shape, stats, f"gemm {name}")
        tables[name] = {"m": axes[0], "n": axes[1], "k": axes[2], "ms": grid}
        mem_bw = float(system["mem_bw"])
        peak = float(system[PEAK_KEY[name]])
        wb = WEIGHT_BYTES[name]
        pts_s = list(points_of(grid, axes))
        memory = median(n * k * wb / mem_bw / (v * 1e-3) for (m, n, k), v in pts_s
                        if m <= 16 and n * k >= 2**24)
        compute = median(2 * m * n * k / peak / (v * 1e-3) for (m, n, k), v in pts_s
                         if m >= 4096 and n >= 4096 and k >= 4096)
        floor = median(v for (m, n, k), v in pts_s if m <= 4 and n <= 128 and k <= 128)
        eff[name] = {"memory": r4(memory), "compute": r4(compute), "floor_ms": r4(floor)}
    return tables, eff, {k: ", ".join(sorted(v)) for k, v in sorted(sources.items())}


def build_attention(rows: list[dict[str, Any]], source: str, axis: str, system: dict[str, float | str],
                    stats: dict[str, list[float]], label: str) -> tuple[dict[str, Any], dict[str, Any]]:
    pts: dict[str, dict[tuple[int, int], list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["kernel_source"] != source or r.get("window_size", 0) != 0:
            continue
        if r["attn_dtype"] != "bfloat16" or r["beam_width"] != 1:
            raise SystemExit(f"unexpected attention row {r}")
        kv = KV_DTYPES[r["kv_cache_dtype"]]
        key = f"{kv}/{r['num_heads']},{r['num_key_value_heads']},{r['head_dim']}"
        pts[key][(r["batch_size"], r[axis])].append(float(r["latency"]))
    if not pts:
        raise SystemExit(f"no {label} rows for {source}")
    batches = sorted({p[0] for d in pts.values() for p in d})
    lengths = sorted({p[1] for d in pts.values() for p in d})
    shape = [len(batches), len(lengths)]
    grids: dict[str, dict[str, list[float | None]]] = defaultdict(dict)
    for key in sorted(pts):
        kv, heads = key.split("/")
        med = {p: statistics.median(v) for p, v in pts[key].items()}
        grids[kv][heads] = finish(dense(med, [batches, lengths]), shape, stats, label)
    mem_bw = float(system["mem_bw"])
    peak = float(system["bfloat16_tc_flops"])
    eff: dict[str, Any] = {}
    for kv, by_heads in sorted(grids.items()):
        samples_eff: list[float] = []
        samples_floor: list[float] = []
        for heads, grid in by_heads.items():
            h, g, d = (int(x) for x in heads.split(","))
            for (b, s), v in points_of(grid, [batches, lengths]):
                if label == "decode":
                    kv_bytes = b * s * g * d * 2 * KV_BYTES[kv]
                    if kv_bytes >= 2**27:
                        samples_eff.append(kv_bytes / mem_bw / (v * 1e-3))
                    if b <= 2 and s <= 15:
                        samples_floor.append(v)
                else:
                    flops = 4 * b * h * d * s * (s + 1) / 2
                    if s >= 4096:
                        samples_eff.append(flops / peak / (v * 1e-3))
                    if b == 1 and s <= 16:
                        samples_floor.append(v)
        kind = "memory" if label == "decode" else "compute"
        eff[kv] = {kind: r4(median(samples_eff)), "floor_ms": r4(median(samples_floor))}
    table = {"kernel_source": source, "batch": batches,
             ("context" if label == "decode" else "prompt"): lengths, "ms": grids}
    return table, eff


def build_allreduce(custom: list[dict[str, Any]], nccl: list[dict[str, Any]], system: dict[str, float | str],
                    stats: dict[str, list[float]]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    def grid_of(rows: list[dict[str, Any]], label: str) -> dict[str, Any]:
        pts: dict[tuple[int, int], list[float]] = defaultdict(list)
        for r in rows:
            pts[(r["num_gpus"], r["message_size"] * ALLREDUCE_ELEMENT_BYTES)].append(float(r["latency"]))
        gpus = sorted({p[0] for p in pts})
        sizes = sorted({p[1] for p in pts})
        med = {p: statistics.median(v) for p, v in pts.items()}
        grid = finish(dense(med, [gpus, sizes]), [len(gpus), len(sizes)], stats, label, pad_axes=[1])
        return {"gpus": gpus, "bytes": sizes, "ms": grid}

    sel = [r for r in custom if r["backend"] == ALLREDUCE_BACKEND]
    if {r["allreduce_dtype"] for r in sel} != {"bfloat16"}:
        raise SystemExit("custom all-reduce: expected bfloat16 only")
    ar = grid_of(sel, "allreduce")
    ar["kernel_source"] = ", ".join(sorted({r["kernel_source"] for r in sel}))
    nc_rows = [r for r in nccl if r["op_name"] == "all_reduce" and r["nccl_dtype"] == "half"]
    nc = grid_of(nc_rows, "nccl allreduce")
    nc["kernel_source"] = "NCCL all_reduce, half"
    nvl = float(system["intra_node_bw"])
    eff: dict[str, Any] = {}
    ns = len(ar["bytes"])
    for i, n in enumerate(ar["gpus"]):
        row = ar["ms"][i * ns:(i + 1) * ns]
        last = row[-1]
        first = row[0]
        assert last is not None and first is not None
        busbw = 2 * (n - 1) / n * ar["bytes"][-1] / (last * 1e-3)
        eff[str(n)] = {"bus": r4(busbw / nvl), "floor_ms": r4(first)}
    return ar, nc, eff


def unit_evidence(nccl: list[dict[str, Any]], system: dict[str, float | str], gpu: str) -> str:
    """Bus bandwidth of NCCL all-reduce at the largest sizes, reading message_size as elements."""
    lines = []
    nvl = float(system["intra_node_bw"])
    by: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for r in nccl:
        if r["op_name"] == "all_reduce":
            by[(r["nccl_dtype"], r["num_gpus"])][r["message_size"]] = float(r["latency"])
    for n in sorted({k[1] for k in by}):
        half, int8 = by[("half", n)], by[("int8", n)]
        s = max(half)
        t_half, t_int8 = half[s], int8[s]
        bus_el = 2 * (n - 1) / n * s * 2 / (t_half * 1e-3)
        same_bytes = int8.get(2 * s)
        per_byte = ("" if same_bytes is None
                    else f"; int8 at {2 * s} (same bytes as elements) {same_bytes:.4g} ms")
        lines.append(f"{gpu} NCCL {n} GPUs, message_size {s}: half {t_half:.4g} ms, int8 {t_int8:.4g} ms "
                     f"(ratio {t_half / t_int8:.2f}){per_byte}; busbw as elements {bus_el / 1e9:.0f} GB/s = "
                     f"{bus_el / nvl:.0%} of NVLink, as bytes {bus_el / 2e9:.0f} GB/s = "
                     f"{bus_el / 2 / nvl:.0%}")
    return "\n".join(lines)


def build_gpu(folder: Path, gpu: str, all_stats: dict[str, list[float]]) -> tuple[dict[str, Any], str]:
    stats: dict[str, list[float]] = {}
    system = read_system(folder / "system.yaml")
    gemm_rows = read_rows(one_file(folder, "gemm_*_gemm_perf.parquet"))
    decode_rows = read_rows(one_file(folder, "attention_*_generation_attention_perf.parquet"))
    prefill_rows = read_rows(one_file(folder, "attention_*_context_attention_perf.parquet"))
    custom_rows = read_rows(one_file(folder, "comm_*_custom_allreduce_perf.parquet"))
    nccl_rows = read_rows(one_file(folder, "comm_nccl_*_nccl_perf.parquet"))
    devices = {r["device"] for r in gemm_rows} | {r["device"] for r in decode_rows}
    versions = {r["version"] for r in gemm_rows} | {r["version"] for r in decode_rows}
    if len(devices) != 1 or len(versions) != 1:
        raise SystemExit(f"{gpu}: mixed devices {devices} or versions {versions}")
    nccl_version = {r["version"] for r in nccl_rows}
    gemm, gemm_eff, gemm_src = build_gemm(gemm_rows, system, stats)
    decode, dec_eff = build_attention(decode_rows, DECODE_SOURCE[gpu], "step", system, stats, "decode")
    prefill, pre_eff = build_attention(prefill_rows, PREFILL_SOURCE[gpu], "isl", system, stats, "prefill")
    ar, nc, ar_eff = build_allreduce(custom_rows, nccl_rows, system, stats)
    all_stats.update({f"{gpu} {k}": v for k, v in stats.items()})
    flops = {name: float(system[key]) for name, key in PEAK_KEY.items() if key in system and name in gemm}
    doc = {
        "format": FORMAT,
        "name": gpu,
        "device": devices.pop(),
        "engine": f"vLLM {versions.pop()}",
        "nccl": ", ".join(sorted(nccl_version)),
        "source": {"repo": UPSTREAM_REPO, "commit": UPSTREAM_COMMIT,
                   "folder": UPSTREAM_FOLDER.replace("<gpu>", gpu)},
        "system": {
            "hbm_bytes_per_s": float(system["mem_bw"]),
            "memory_bytes": float(system["mem_capacity"]),
            "nvlink_bytes_per_s": float(system["intra_node_bw"]),
            "internode_bytes_per_s": float(system.get("inter_node_bw", 0.0)),
            "gpus_per_node": int(float(system.get("num_gpus_per_node", 8))),
            "flops_per_s": flops,
        },
        "gemm": {name: {**t, "kernel_source": gemm_src[name]} for name, t in gemm.items()},
        "decode": decode,
        "prefill": prefill,
        "allreduce": ar,
        "nccl_allreduce": nc,
        "efficiency": {"gemm": gemm_eff, "decode": dec_eff, "prefill": pre_eff, "allreduce": ar_eff},
    }
    return doc, unit_evidence(nccl_rows, system, gpu)


def encode(doc: dict[str, Any]) -> bytes:
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


# --------------------------------------------------------------------------- NOTICE


def notice(docs: dict[str, dict[str, Any]], evidence: str) -> str:
    src_lines = []
    for gpu, d in docs.items():
        g = ", ".join(f"{k}: {v['kernel_source']}" for k, v in d["gemm"].items())
        src_lines.append(f"| {gpu} | {d['device']} | {d['engine']} | {g} | {d['decode']['kernel_source']} | "
                         f"{d['prefill']['kernel_source']} | {d['allreduce']['kernel_source']} |")
    module_doc = __doc__ or ""
    start = module_doc.index("What is kept")
    body = module_doc[module_doc.index("\n", start) + 1:]
    return f"""# Measured kernel tables: origin, license and changes

The files `<gpu>.json.gz` in this folder are derived from measured GPU kernel timings published by
the NVIDIA project **{UPSTREAM_REPO}** (https://github.com/{UPSTREAM_REPO}), licensed under the
Apache License 2.0 (full text: `{LICENSE_FILE}` in this folder).

- Source commit: `{UPSTREAM_COMMIT}`
- Source: `{UPSTREAM_FOLDER}`, for gpu in {", ".join(GPUS)}:
  the parquet tables `gemm_perf`, `generation_attention_perf`, `context_attention_perf`,
  `custom_allreduce_perf` (vLLM) and `nccl_perf` (NCCL), and the system description `<gpu>.yaml`.
- Copyright: NVIDIA CORPORATION & AFFILIATES (SPDX headers of the source YAML files).

The files here are **modified** versions of the source: reduced to the rows below, reshaped into
dense grids, rounded and smoothed as described.  They were produced by
`scripts/build_kernel_tables.py` in the servesim repository; rerunning it on the source
reproduces them byte for byte.

## Kernel sources kept

| table | device | engine | GEMM kernel_source per dtype | decode attention | prefill attention | all-reduce |
|---|---|---|---|---|---|---|
{chr(10).join(src_lines)}

## What is kept and what was changed

{body.strip()}

## Evidence for the all-reduce unit (computed by the script)

```
{evidence}
```
"""


# --------------------------------------------------------------------------- main


def build(source: Path) -> tuple[dict[str, bytes], dict[str, dict[str, Any]], str, dict[str, list[float]]]:
    stats: dict[str, list[float]] = {}
    blobs: dict[str, bytes] = {}
    docs: dict[str, dict[str, Any]] = {}
    evidence = []
    for gpu in GPUS:
        doc, ev = build_gpu(source / gpu, gpu, stats)
        docs[gpu] = doc
        blobs[f"{gpu}.json.gz"] = encode(doc)
        evidence.append(ev)
    ev_text = "\n".join(evidence)
    blobs["NOTICE.md"] = notice(docs, ev_text).encode()
    blobs[LICENSE_FILE] = (source / LICENSE_FILE).read_bytes()
    return blobs, docs, ev_text, stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="aiconfigurator kernel data folder")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the tables")
    ap.add_argument("--check", action="store_true", help="fail if the files in --out differ from a rebuild")
    args = ap.parse_args(argv)
    blobs, docs, evidence, stats = build(args.source)
    if args.check:
        stale = [n for n, b in blobs.items()
                 if not (args.out / n).is_file() or (args.out / n).read_bytes() != b]
        if stale:
            log(f"out of date: {stale}")
            return 1
        log("kernel tables up to date")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, blob in blobs.items():
        (args.out / name).write_bytes(blob)
    total = sum(len(b) for b in blobs.values())
    for name, blob in blobs.items():
        log(f"{name:40s} {len(blob):>9,d} bytes")
    log(f"{'total':40s} {total:>9,d} bytes")
    if total >= 3_000_000:
        log("error: the tables exceed the 3 MB budget")
        return 1
    log("\nall-reduce unit evidence:\n" + evidence)
    log(f"\nglitches: share of measured points above {GLITCH} x (replaced), 1.2 x and 1.05 x their envelope")
    for label, ratios in sorted(stats.items()):
        n = len(ratios)
        shares = [sum(r > t for r in ratios) / n for t in (GLITCH, 1.2, 1.05)]
        log(f"  {label:24s} {shares[0]:6.2%} {shares[1]:6.2%} {shares[2]:6.2%}  of {n}")
    log("\nfitted efficiencies:")
    for gpu, d in docs.items():
        log(f"  {gpu}: {json.dumps(d['efficiency'], sort_keys=True)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
