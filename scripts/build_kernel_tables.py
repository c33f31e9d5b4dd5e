"""Build servesim's compact kernel tables from aiconfigurator's measured kernel timings of three engines.

Reads the parquet tables that ai-dynamo/aiconfigurator (Apache-2.0) measured with vLLM, SGLang and
TensorRT-LLM on four GPUs and writes one table per (GPU, engine), plus ``NOTICE.md`` and the
license, for :mod:`servesim.hardware.kernels`, which reads them with the standard library only.
pyarrow is needed by this script alone, never by the installed package.

    python scripts/build_kernel_tables.py [--source DIR] [--out DIR] [--check]

``--source`` defaults to ``../shared/data/kernels`` relative to the repository root, ``--out`` to
``src/servesim/hardware/data/kernels``.  The output is byte-for-byte deterministic: sorted keys,
latencies rounded to 4 significant digits, gzip with mtime 0.  ``--check`` rebuilds in memory and
fails if a shipped file differs (or a stale table is left in the folder).

Engines, versions and files (one per GPU and engine; the vLLM file keeps its old name):

| engine (``engine_name``) | A100 | H100, H200, B200 | file |
|---|---|---|---|
| vLLM (``vllm``) | 0.14.0 | 0.24.0 | ``<gpu>.json.gz`` |
| SGLang (``sglang``) | 0.5.10 | 0.5.14 | ``<gpu>_sglang.json.gz`` |
| TensorRT-LLM (``trtllm``) | 1.0.0 (not shipped, see below) | 1.3.0rc20 | ``<gpu>_trtllm.json.gz`` |

The engine's parquet files are the ones named ``<kind>_<engine>_<version>_...``; every row of
one table must name the same device and version (asserted).  The NCCL table and ``system.yaml``
belong to the GPU and are the same in its three files.

What is kept (per GPU and engine; NOTICE.md repeats this text):

* GEMM (``gemm_perf``), by upstream ``gemm_dtype`` -> servesim dtype, with the kernel_source of
  each engine (exactly one source per dtype and GPU; each (dtype, m, n, k) has exactly one row
  upstream, asserted, so no kernel choice is made):

  - ``bfloat16`` -> ``bf16``: vLLM torch.nn.functional.linear (cuBLAS; ``vllm_default`` on the
    A100), SGLang ``sglang_torch_linear`` (``sglang`` on the A100), TensorRT-LLM ``torch_flow``.
  - ``fp8`` (per-tensor scaled) -> ``fp8``: vLLM CutlassFP8ScaledMMLinearKernel, SGLang
    ``sglang_sgl_kernel_fp8_scaled_mm``, TensorRT-LLM ``torch_flow``.  Not on the A100.
  - ``nvfp4`` -> ``fp4`` (B200 only): vLLM FlashInferCuteDslNvFp4LinearKernel, SGLang
    ``sglang_flashinfer_cutedsl_nvfp4``, TensorRT-LLM ``torch_flow``.
  - ``fp8_block`` (128 x 128 block-scaled weights, DeepSeek-V3 / Qwen3-FP8 style) -> ``fp8_block``
    for SGLang (``sglang_deepgemm_gemm_nt_f8f8bf16``) and TensorRT-LLM (``torch_flow`` on Hopper,
    ``deepgemm`` on the B200); DROPPED for vLLM.  Checked against the same engine's per-tensor fp8
    GEMM at the same shape (n k >= 2^22): SGLang's and TensorRT-LLM's are sane, median ratio
    0.64-1.14 per m range (1-16, 17-256, 257-2048, > 2048) on every GPU, except SGLang on the B200
    at m <= 256 (1.7x, plausible for DeepGEMM's small-m path); their fitted HBM share at
    m <= 16 is 0.52-0.64 on Hopper (H100 n = k = 8192, m = 1: 0.031 ms for 64 MiB of weights),
    0.42 (TensorRT-LLM) and 0.23 (SGLang) on the B200.  vLLM's are not GEMM
    times (median 3-3.5x per-tensor fp8 at m <= 256 on Hopper, 12-14x on the B200; at n = k =
    4096 the B200 DeepGemm takes 0.16-0.28 ms for every m from 1 to 4352, where the FP8 weight
    read alone is 2 us), so they would mislead a step model.
  - DROPPED: TensorRT-LLM 1.0.0's A100 ``int8_wo`` / ``int4_wo`` (weight-only) and ``sq``
    (SmoothQuant) GEMMs: servesim has no such dtypes.

  Grids: m 1..32768 (74 values; 21 values 1..8192 on the A100 for vLLM and TensorRT-LLM), n and
  k 32..65536 (22 values; 21 on the A100 for vLLM and TensorRT-LLM; 20 values 128..65536 for
  fp8_block and fp4 of SGLang and TensorRT-LLM).  TensorRT-LLM 1.3.0rc20 lacks 42 of the
  points of each Hopper/Blackwell dtype (null, like any point not measured).
* Decode attention (``generation_attention_perf``): ``window_size`` 0 (no sliding window; the
  128 / 1024 / 8192 window rows are dropped) and the kernel_source a default deployment of the
  engine runs on the GPU (the other sources' rows are dropped):

  - vLLM: A100 (0.14) ``vllm_flash_attn`` (FlashAttention 2, the only one measured); H100 and
    H200 ``vllm_flash_attn_fa3`` (FlashAttention 3; the few ``vllm_flash_attn_fa4`` bf16 rows are
    dropped); B200 ``vllm_flashinfer_trtllmdecode`` (FlashInfer's TRT-LLM kernels; the
    ``vllm_triton_attn`` fp8 rows are dropped).
  - SGLang: for a standard (MHA/GQA) model its server picks ``fa3`` on Hopper and ``trtllm_mha``
    on Blackwell when no ``--attention-backend`` is given, so H100 and H200 keep ``fa3``
    (``triton`` dropped) and the B200 ``trtllm_mha`` (``flashinfer`` and ``triton`` dropped).
    A100 (0.5.10): the only source measured is ``flash_attention``, SGLang's FlashAttention
    backend; a default A100 deployment would run FlashInfer, which was not measured, so the
    A100 SGLang attention is the nearest measured stand-in, not the default kernel.
  - TensorRT-LLM: ``torch_flow``, the PyTorch flow's default attention backend (``TRTLLM``:
    TensorRT-LLM's own FMHA context kernels and XQA / masked-MHA generation kernels) on every
    GPU; the B200's ``torch_flow_flashinfer`` rows (the opt-in FLASHINFER backend) are dropped.

  Keyed by (kv_cache_dtype bf16/fp8, num_heads, num_key_value_heads, head_dim), each a grid
  batch_size x step (step = tokens already in the KV cache: 1, 3, 7, ..., 131071).
* Prefill attention (``context_attention_perf``): the same, grid batch_size x isl; the B200's vLLM
  table keeps ``vllm_flashinfer_trtllmprefill`` (its ``trtllmdecode`` and ``triton`` rows are
  dropped), everything else the same source as for decode.
* Query dtype.  Per KV dtype, the rows with bf16 queries (``attn_dtype`` bfloat16) are kept where
  that source measured any, else the fp8-query rows; the choice is stored per KV dtype as
  ``attn_dtype``.  So every decode table and every bf16-KV table has bf16 queries; TensorRT-LLM's
  fp8-KV prefill keeps its bf16-query rows and drops the fp8-query ones (FP8 context FMHA, which
  TensorRT-LLM turns on for FP8/NVFP4-quantized checkpoints); SGLang measured fp8-KV prefill only
  with fp8 queries (its FA3 and trtllm_mha backends quantize q to the cache's FP8), so those are
  kept (``attn_dtype`` fp8).  Repeated measurements of one point (A100 vLLM only: 408 points
  measured twice) -> their median.
* All-reduce: each engine's own all-reduce as serving runs it, under CUDA graphs, grid num_gpus x
  message size: vLLM's custom all-reduce (backend ``vllm_graph``), SGLang's
  (``sglang_graph``; the ``sglang_eager`` rows are dropped), TensorRT-LLM's AllReduce op
  (kernel_source ``TRTLLM``, the only set measured: strategy AUTO, its own one-/two-shot kernels
  and NCCL for large messages; the collector captures it in a CUDA graph); and NCCL
  ``all_reduce`` of ``half`` for reference.  Each hands large messages to NCCL: above a few MiB
  all four agree within a few %.
* ``system.yaml``: mem_bw, mem_capacity, tensor-core FLOP/s of bf16 / fp8 / fp4, intra- and
  inter-node bandwidth; the device name and engine version from the parquet rows.
* Plausibility.  A table is not built when its decode attention cannot be what it claims:
  measured points with at least 2^27 bytes of KV (far beyond any L2) that finish sooner than
  reading that KV at HBM_PLAUSIBLE = 1.1 x the GPU's HBM bandwidth.  Only TensorRT-LLM 1.0.0 on
  the A100 fails: 288 such points (348 above 1.0 x), up to 1.69 x HBM (16 heads, 8 KV heads, batch 64, context
  16383: 4.3 GB of KV in 2.5 ms), and its GQA rows take a median 0.61 x the time of MHA rows
  with the same KV heads (same KV read, less work per byte is impossible at that size; vLLM and
  SGLang read 0.97-1.00 x); its context-255 column also reads at up to 1.23 x HBM.  So there is
  no ``a100_sxm_trtllm.json.gz``: servesim prices TensorRT-LLM on the A100 with vLLM 0.14.0's
  tables and says so.  (The highest share shipped: SGLang's H100 bf16 decode at 1.07 x HBM,
  23 points of head_dim 192 at batch 128; every other table stays at or under 1.0 x.)

Size: everything shipped is about 3.8 MB of the 8 MB budget, so every grid is kept in full (no
shapes dropped, no axis thinned).

Changes made to the measured numbers:

1. Latency stays in milliseconds, rounded to 4 significant digits.
2. Made monotone.  The raw tables are noisy: some points are 2-10x slower than a larger
   neighbour (e.g. H100 vLLM fp8 m=17, n=2048, k=768: 0.0566 ms where m=32 takes 0.0060 ms; B200
   vLLM fp8 flips between ~0.005 and ~0.02-0.3 ms at small m; SGLang's 8-GPU H100 all-reduce
   takes 0.038 ms at 1 KiB and 0.0035 ms at 2 KiB).  A smaller problem can always be run by
   padding it to a larger one, so every point is replaced by its monotone envelope (the least
   latency measured at any grid point >= it on every axis: m, n, k for GEMMs; batch and
   context/prompt for attention; size for all-reduce), GLITCH = 1.0.  This also removes the
   smaller systematic effects the engines show (e.g. H100 vLLM bf16 m=1 GEMVs up to 1.2x slower
   than m=32: an engine step is priced as if it padded to the cheaper shape).  After this every
   table is monotone: latency(p) <= latency(q) whenever q >= p on every axis, and so is its
   log-log multilinear interpolation, so that a priced engine step never gets cheaper with more
   tokens, context or batch (``tests/hardware/test_step_bounds.py``).  The script prints the
   share of points above their envelope per table (most under 1% by more than 5%; B200 vLLM
   fp8 about 12%).  Points that were not measured stay missing (null).
3. All-reduce ``message_size`` is converted from ELEMENTS to BYTES (x 2 for bf16 / half), for
   every engine; the evidence follows.

The unit of all-reduce ``message_size``: elements, not bytes, in every engine's table.

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
c) Every engine's table (bf16) equals NCCL half at the same message_size at large sizes: at
   2^28 the vLLM, SGLang and TensorRT-LLM tables are within 2% of NCCL on every GPU and GPU
   count (H100 2 GPUs: vLLM 1.706, SGLang 1.686, TensorRT-LLM 1.683, NCCL 1.686 ms), except 4
   B200s (SGLang 6%, TensorRT-LLM 8% slower): above their size limits the engines hand the
   all-reduce to NCCL, so the tables share NCCL's unit.  The script prints the ratio for every
   table.
d) The limits: vLLM's custom all-reduce runs while the tensor is < 8 MiB; the A100 (vLLM 0.14)
   graph table jumps 3.6x between message_size 2^21 and 2^22 (0.0252 -> 0.0897 ms, 2 GPUs), i.e.
   between 4 MiB and 8 MiB if the unit is bf16 elements (it would be 2 -> 4 MiB as bytes, below
   the limit).  SGLang's runs while the tensor is <= 8 MiB; its A100 (0.5.10) table jumps 2.8x
   between 2^22 and 2^23 (0.0447 -> 0.127 ms, 2 GPUs), i.e. between 8 and 16 MiB as elements (4
   -> 8 MiB as bytes would both be inside the limit).  (SGLang 0.5.14 on the H100, H200 and B200
   hands over one size later, between 2^23 and 2^24: a larger limit there, which this evidence
   does not pin down; (c) does.)
e) The aiconfigurator all-reduce collector builds a bf16 tensor of ``message_size`` elements
   (shape [size / 4096, 4096]) and logs that count as ``message_size`` for every engine.

The script prints this evidence (busbw per GPU count, each table against NCCL) when it runs.

Fitted roofline efficiencies (stored under ``efficiency``, used by servesim outside the measured
range), from the STORED grid values, per table:

* GEMM per dtype: ``memory`` = median over m <= 16 and n k >= 2^24 of
  (weight bytes / mem_bw) / latency, weight bytes = n k x (2 bf16, 1 fp8 and fp8_block, 0.5625
  fp4: 4 bits + one FP8 scale per 16 values); ``compute`` = median over m, n, k >= 4096 of
  (2 m n k / peak) / latency (peak of the dtype: bf16, fp8 (also for fp8_block) or fp4
  tensor-core FLOP/s); ``floor_ms`` = median latency over m <= 4, n <= 128, k <= 128
  (launch-bound shapes).
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
ENGINES = ("vllm", "sglang", "trtllm")
ENGINE_LABEL = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
FORMAT = 1
SIG_DIGITS = 4
GLITCH = 1.0
HBM_PLAUSIBLE = 1.10  # a decode step cannot read its KV cache faster than this x HBM (see implausible_decode)
SIZE_BUDGET = 8_000_000  # bytes, everything shipped in the folder

# per engine: upstream gemm_dtype -> (servesim name, the kernel_sources allowed for it)
GEMM_DTYPES: dict[str, dict[str, tuple[str, frozenset[str]]]] = {
    "vllm": {
        "bfloat16": ("bf16", frozenset({"torch.nn.functional.linear", "vllm_default"})),
        "fp8": ("fp8", frozenset({"CutlassFP8ScaledMMLinearKernel"})),
        "nvfp4": ("fp4", frozenset({"FlashInferCuteDslNvFp4LinearKernel"})),
    },
    "sglang": {
        "bfloat16": ("bf16", frozenset({"sglang_torch_linear", "sglang"})),
        "fp8": ("fp8", frozenset({"sglang_sgl_kernel_fp8_scaled_mm"})),
        "fp8_block": ("fp8_block", frozenset({"sglang_deepgemm_gemm_nt_f8f8bf16"})),
        "nvfp4": ("fp4", frozenset({"sglang_flashinfer_cutedsl_nvfp4"})),
    },
    "trtllm": {
        "bfloat16": ("bf16", frozenset({"torch_flow"})),
        "fp8": ("fp8", frozenset({"torch_flow"})),
        "fp8_block": ("fp8_block", frozenset({"torch_flow", "deepgemm"})),
        "nvfp4": ("fp4", frozenset({"torch_flow"})),
    },
}
DROPPED_GEMM_DTYPES = {  # see the module docstring
    "vllm": frozenset({"fp8_block"}),
    "sglang": frozenset(),
    "trtllm": frozenset({"int8_wo", "int4_wo", "sq"}),
}
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "fp4": 0.5625}
PEAK_KEY = {"bf16": "bfloat16_tc_flops", "fp8": "fp8_tc_flops", "fp8_block": "fp8_tc_flops",
            "fp4": "fp4_tc_flops"}
KV_DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}
KV_BYTES = {"bf16": 2.0, "fp8": 1.0}
QUERY_DTYPES = ("bfloat16", "fp8")  # preference order of attn_dtype per KV dtype

# The attention kernel a default deployment of each engine runs on each GPU (module docstring).
DECODE_SOURCE = {
    "vllm": {"a100_sxm": "vllm_flash_attn", "h100_sxm": "vllm_flash_attn_fa3",
             "h200_sxm": "vllm_flash_attn_fa3", "b200_sxm": "vllm_flashinfer_trtllmdecode"},
    "sglang": {"a100_sxm": "flash_attention", "h100_sxm": "fa3", "h200_sxm": "fa3",
               "b200_sxm": "trtllm_mha"},
    "trtllm": dict.fromkeys(GPUS, "torch_flow"),
}
PREFILL_SOURCE = {
    "vllm": {"a100_sxm": "vllm_flash_attn", "h100_sxm": "vllm_flash_attn_fa3",
             "h200_sxm": "vllm_flash_attn_fa3", "b200_sxm": "vllm_flashinfer_trtllmprefill"},
    "sglang": DECODE_SOURCE["sglang"],
    "trtllm": DECODE_SOURCE["trtllm"],
}
# The all-reduce serving runs: (backend column value or None where the table has one set, kernel_source)
ALLREDUCE = {
    "vllm": ("vllm_graph", "vLLM_custom_graph"),
    "sglang": ("sglang_graph", "SGLang_CustomAllReduce_graph"),
    "trtllm": (None, "TRTLLM"),
}
ALLREDUCE_ELEMENT_BYTES = 2  # bf16 (engines) and half (NCCL): message_size counts elements


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


def table_file(gpu: str, engine: str) -> str:
    """The shipped file of one (GPU, engine); vLLM's keeps the name it had before other engines."""
    return f"{gpu}.json.gz" if engine == "vllm" else f"{gpu}_{engine}.json.gz"


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


def envelope(grid: list[float | None], shape: Sequence[int], pad_axes: Iterable[int]) -> list[float | None]:
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


def build_gemm(rows: list[dict[str, Any]], engine: str, system: dict[str, float | str],
               stats: dict[str, list[float]]) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    by_dtype: dict[str, dict[tuple[int, int, int], float]] = defaultdict(dict)
    sources: dict[str, set[str]] = defaultdict(set)
    known = GEMM_DTYPES[engine]
    for r in rows:
        if r["gemm_dtype"] in DROPPED_GEMM_DTYPES[engine]:
            continue
        if r["gemm_dtype"] not in known:
            raise SystemExit(f"{engine}: unknown gemm_dtype {r['gemm_dtype']!r}")
        name, allowed = known[r["gemm_dtype"]]
        if r["kernel_source"] not in allowed:
            raise SystemExit(f"{engine}: unexpected kernel_source {r['kernel_source']!r} "
                             f"for {r['gemm_dtype']}")
        key = (r["m"], r["n"], r["k"])
        if key in by_dtype[name]:
            raise SystemExit(f"{engine}: two rows for {name} {key}: a kernel choice would be needed")
        by_dtype[name][key] = float(r["latency"])
        sources[name].add(r["kernel_source"])
    for name, srcs in sources.items():
        if len(srcs) != 1:
            raise SystemExit(f"{engine}: {name} GEMMs from several kernels {sorted(srcs)}")
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
    # (kv dtype, query dtype) -> "heads,kv_heads,head_dim" -> (batch, length) -> latencies
    pts: dict[tuple[str, str], dict[str, dict[tuple[int, int], list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for r in rows:
        if r["kernel_source"] != source or (r.get("window_size") or 0) != 0:
            continue
        if r["attn_dtype"] not in QUERY_DTYPES or r["beam_width"] != 1:
            raise SystemExit(f"unexpected attention row {r}")
        kv = KV_DTYPES[r["kv_cache_dtype"]]
        key = f"{r['num_heads']},{r['num_key_value_heads']},{r['head_dim']}"
        pts[(kv, r["attn_dtype"])][key][(r["batch_size"], r[axis])].append(float(r["latency"]))
    if not pts:
        raise SystemExit(f"no {label} rows for {source}")
    query: dict[str, str] = {}  # kv dtype -> the query dtype kept
    for kv in sorted({k for k, _ in pts}):
        query[kv] = next(q for q in QUERY_DTYPES if (kv, q) in pts)
    kept = {kv: pts[(kv, q)] for kv, q in query.items()}
    batches = sorted({p[0] for d in kept.values() for by in d.values() for p in by})
    lengths = sorted({p[1] for d in kept.values() for by in d.values() for p in by})
    shape = [len(batches), len(lengths)]
    grids: dict[str, dict[str, list[float | None]]] = defaultdict(dict)
    for kv in sorted(kept):
        for heads in sorted(kept[kv]):
            med = {p: statistics.median(v) for p, v in kept[kv][heads].items()}
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
             ("context" if label == "decode" else "prompt"): lengths, "ms": grids,
             "attn_dtype": {kv: KV_DTYPES[q] for kv, q in sorted(query.items())}}
    return table, eff


def allreduce_rows(custom: list[dict[str, Any]], engine: str) -> list[dict[str, Any]]:
    """The rows of the all-reduce a serving deployment of ``engine`` runs (CUDA graphs)."""
    backend, source = ALLREDUCE[engine]
    sel = [r for r in custom if r.get("backend") == backend]
    if not sel or {r["kernel_source"] for r in sel} != {source}:
        raise SystemExit(f"{engine} all-reduce: expected kernel_source {source}, got "
                         f"{sorted({r['kernel_source'] for r in sel})}")
    if {r["allreduce_dtype"] for r in sel} != {"bfloat16"}:
        raise SystemExit(f"{engine} all-reduce: expected bfloat16 only")
    return sel


def build_allreduce(sel: list[dict[str, Any]], nccl: list[dict[str, Any]], system: dict[str, float | str],
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


def engine_unit_evidence(sel: list[dict[str, Any]], nccl: list[dict[str, Any]], gpu: str, label: str) -> str:
    """An engine's all-reduce against NCCL half at the same message_size (large sizes), and where
    the engine's table jumps most between neighbouring sizes (its hand-over to NCCL)."""
    mine: dict[int, dict[int, float]] = defaultdict(dict)
    ref: dict[int, dict[int, float]] = defaultdict(dict)
    for r in sel:
        mine[r["num_gpus"]][r["message_size"]] = float(r["latency"])
    for r in nccl:
        if r["op_name"] == "all_reduce" and r["nccl_dtype"] == "half":
            ref[r["num_gpus"]][r["message_size"]] = float(r["latency"])
    parts = []
    for n in sorted(mine):
        common = sorted(set(mine[n]) & set(ref[n]))
        s = max(common)
        sizes = sorted(mine[n])
        jump = max(range(len(sizes) - 1), key=lambda i: mine[n][sizes[i + 1]] / mine[n][sizes[i]])
        a, b = sizes[jump], sizes[jump + 1]
        parts.append(f"{n} GPUs at {s}: {mine[n][s]:.4g} vs NCCL {ref[n][s]:.4g} ms "
                     f"(x{mine[n][s] / ref[n][s]:.3f}), largest step x{mine[n][b] / mine[n][a]:.2f} "
                     f"between {a} and {b}")
    return f"{gpu} {label}: " + "; ".join(parts)


def build_table(folder: Path, gpu: str, engine: str,
                all_stats: dict[str, list[float]]) -> tuple[dict[str, Any], str]:
    stats: dict[str, list[float]] = {}
    system = read_system(folder / "system.yaml")
    gemm_rows = read_rows(one_file(folder, f"gemm_{engine}_*_gemm_perf.parquet"))
    decode_rows = read_rows(one_file(folder, f"attention_{engine}_*_generation_attention_perf.parquet"))
    prefill_rows = read_rows(one_file(folder, f"attention_{engine}_*_context_attention_perf.parquet"))
    custom_rows = read_rows(one_file(folder, f"comm_{engine}_*_custom_allreduce_perf.parquet"))
    nccl_rows = read_rows(one_file(folder, "comm_nccl_*_nccl_perf.parquet"))
    tables = (gemm_rows, decode_rows, prefill_rows, custom_rows)
    devices = {r["device"] for rows in tables for r in rows}
    versions = {r["version"] for rows in tables for r in rows}
    if len(devices) != 1 or len(versions) != 1:
        raise SystemExit(f"{gpu} {engine}: mixed devices {devices} or versions {versions}")
    nccl_version = {r["version"] for r in nccl_rows}
    gemm, gemm_eff, gemm_src = build_gemm(gemm_rows, engine, system, stats)
    decode, dec_eff = build_attention(decode_rows, DECODE_SOURCE[engine][gpu], "step", system, stats,
                                      "decode")
    prefill, pre_eff = build_attention(prefill_rows, PREFILL_SOURCE[engine][gpu], "isl", system, stats,
                                       "prefill")
    sel = allreduce_rows(custom_rows, engine)
    ar, nc, ar_eff = build_allreduce(sel, nccl_rows, system, stats)
    all_stats.update({f"{gpu} {engine} {k}": v for k, v in stats.items()})
    flops = {name: float(system[key]) for name, key in PEAK_KEY.items() if key in system and name in gemm}
    doc = {
        "format": FORMAT,
        "name": gpu,
        "device": devices.pop(),
        "engine": f"{ENGINE_LABEL[engine]} {versions.pop()}",
        "engine_name": engine,
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
    return doc, engine_unit_evidence(sel, nccl_rows, gpu, doc["engine"])


def encode(doc: dict[str, Any]) -> bytes:
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


# --------------------------------------------------------------------------- NOTICE


HEADER = ("| file | device | engine | GEMM kernel_source per dtype | decode attention | prefill attention "
          "| all-reduce | bytes |\n|---|---|---|---|---|---|---|---|")


def notice(docs: dict[str, dict[str, Any]], sizes: dict[str, int], evidence: str,
           skipped: dict[str, str]) -> str:
    src_lines = []
    for file, d in docs.items():
        g = ", ".join(f"{k}: {v['kernel_source']}" for k, v in d["gemm"].items())
        q = ", ".join(f"{kv}-KV {q}" for kv, q in d["prefill"]["attn_dtype"].items())
        src_lines.append(f"| `{file}` | {d['device']} | {d['engine']} | {g} | "
                         f"{d['decode']['kernel_source']} | {d['prefill']['kernel_source']} ({q} queries) | "
                         f"{d['allreduce']['kernel_source']} | {sizes[file]:,} |")
    module_doc = __doc__ or ""
    start = module_doc.index("Engines, versions and files")
    end = module_doc.index("The engine's parquet files")
    engines = module_doc[module_doc.index("\n", start) + 1:end].strip()
    start = module_doc.index("What is kept")
    body = module_doc[module_doc.index("\n", start) + 1:]
    return f"""# Measured kernel tables: origin, license and changes

The files `<gpu>.json.gz` (vLLM), `<gpu>_sglang.json.gz` (SGLang) and `<gpu>_trtllm.json.gz`
(TensorRT-LLM) in this folder are derived from measured GPU kernel timings published by the
NVIDIA project **{UPSTREAM_REPO}** (https://github.com/{UPSTREAM_REPO}), licensed under the
Apache License 2.0 (full text: `{LICENSE_FILE}` in this folder).

- Source commit: `{UPSTREAM_COMMIT}`
- Source: `{UPSTREAM_FOLDER}`, for gpu in {", ".join(GPUS)}:
  for each engine (vllm, sglang, trtllm) the parquet tables `gemm_<engine>_<version>_gemm_perf`,
  `attention_<engine>_<version>_generation_attention_perf`,
  `attention_<engine>_<version>_context_attention_perf` and
  `comm_<engine>_<version>_custom_allreduce_perf`, the NCCL table `comm_nccl_<version>_nccl_perf`,
  and the system description `<gpu>.yaml`.
- Copyright: NVIDIA CORPORATION & AFFILIATES (SPDX headers of the source YAML files).

The files here are **modified** versions of the source: reduced to the rows below, reshaped into
dense grids, rounded and smoothed as described.  They were produced by
`scripts/build_kernel_tables.py` in the servesim repository; rerunning it on the source
reproduces them byte for byte.

## Engines

{engines}

## Kernel sources kept

{HEADER}
{chr(10).join(src_lines)}

Not built (servesim falls back to the GPU's vLLM tables, with a note):

{chr(10).join(f"- `{f}`: {why}" for f, why in skipped.items()) or "- none"}

## What is kept and what was changed

{body.strip()}

## Evidence for the all-reduce unit (computed by the script)

```
{evidence}
```
"""


# --------------------------------------------------------------------------- main


def implausible_decode(doc: dict[str, Any]) -> str | None:
    """Why a table's decode attention cannot be what it claims, or None: measured points (of at
    least 2^27 bytes of KV, far beyond any L2) that finish sooner than reading their KV cache at
    HBM_PLAUSIBLE x the GPU's HBM bandwidth."""
    d = doc["decode"]
    hbm = float(doc["system"]["hbm_bytes_per_s"])
    n_big = 0
    bad: list[tuple[float, str]] = []
    for kv, by_heads in sorted(d["ms"].items()):
        for heads, grid in sorted(by_heads.items()):
            _, g, hd = (int(x) for x in heads.split(","))
            for (b, c), v in points_of(grid, [d["batch"], d["context"]]):
                kv_bytes = b * c * g * hd * 2 * KV_BYTES[kv]
                if kv_bytes < 2**27:
                    continue
                n_big += 1
                share = kv_bytes / hbm / (v * 1e-3)
                if share > HBM_PLAUSIBLE:
                    bad.append((share, f"{kv}-KV heads/kv_heads/head_dim {heads}, batch {b}, context {c}"))
    if not bad:
        return None
    worst = max(bad)
    return (f"{len(bad)} of {n_big} decode points with >= 2^27 bytes of KV read it faster than "
            f"{HBM_PLAUSIBLE:g} x HBM (up to {worst[0]:.2f} x, at {worst[1]})")


def build(source: Path) -> tuple[dict[str, bytes], dict[str, dict[str, Any]], str, dict[str, list[float]],
                                 dict[str, str]]:
    stats: dict[str, list[float]] = {}
    blobs: dict[str, bytes] = {}
    docs: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    evidence = []
    for gpu in GPUS:
        evidence.append(unit_evidence(read_rows(one_file(source / gpu, "comm_nccl_*_nccl_perf.parquet")),
                                      read_system(source / gpu / "system.yaml"), gpu))
        for engine in ENGINES:
            doc, ev = build_table(source / gpu, gpu, engine, stats)
            file = table_file(gpu, engine)
            evidence.append(ev)
            why = implausible_decode(doc)
            if why is not None:
                skipped[file] = f"{doc['engine']} on {gpu}: {why}"
                continue
            docs[file] = doc
            blobs[file] = encode(doc)
    ev_text = "\n".join(evidence)
    blobs["NOTICE.md"] = notice(docs, {f: len(blobs[f]) for f in docs}, ev_text, skipped).encode()
    blobs[LICENSE_FILE] = (source / LICENSE_FILE).read_bytes()
    return blobs, docs, ev_text, stats, skipped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="aiconfigurator kernel data folder")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the tables")
    ap.add_argument("--check", action="store_true", help="fail if the files in --out differ from a rebuild")
    args = ap.parse_args(argv)
    blobs, docs, evidence, stats, skipped = build(args.source)
    total = sum(len(b) for b in blobs.values())
    if total >= SIZE_BUDGET:
        log(f"error: the tables ({total:,} bytes) exceed the {SIZE_BUDGET:,} byte budget")
        return 1
    if args.check:
        stale = [n for n, b in blobs.items()
                 if not (args.out / n).is_file() or (args.out / n).read_bytes() != b]
        extra = sorted(p.name for p in args.out.glob("*") if p.name not in blobs) if args.out.is_dir() else []
        if stale or extra:
            log(f"out of date: {stale}" + (f"; not built by this script: {extra}" if extra else ""))
            return 1
        log("kernel tables up to date")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for old in sorted(args.out.glob("*.json.gz")):
        if old.name not in blobs:  # a table this build no longer makes (e.g. found implausible)
            log(f"removing {old.name}")
            old.unlink()
    for name, blob in blobs.items():
        (args.out / name).write_bytes(blob)
    for name, blob in blobs.items():
        log(f"{name:40s} {len(blob):>9,d} bytes")
    log(f"{'total':40s} {total:>9,d} bytes")
    for file, why in skipped.items():
        log(f"not built: {file}: {why}")
    log("\nall-reduce unit evidence:\n" + evidence)
    log(f"\nglitches: share of measured points above {GLITCH} x (replaced), 1.2 x and 1.05 x their envelope")
    for label, ratios in sorted(stats.items()):
        n = len(ratios)
        shares = [sum(r > t for r in ratios) / n for t in (GLITCH, 1.2, 1.05)]
        log(f"  {label:32s} {shares[0]:6.2%} {shares[1]:6.2%} {shares[2]:6.2%}  of {n}")
    log("\nfitted efficiencies:")
    for file, d in docs.items():
        log(f"  {file}: {json.dumps(d['efficiency'], sort_keys=True)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
