"""Build servesim's excerpts of the measured gated-delta-net and DeepSeek-Sparse-Attention tables.

Reads aiconfigurator's (ai-dynamo/aiconfigurator, Apache-2.0, snapshot commit
095f58a51c4ca8e61b66ec108d86f223f8d559ce) ``linear_attention_<engine>_<version>_gdn_perf.parquet`` and
``sparse_attention_<engine>_<version>_dsa_generation_module_perf.parquet`` of every GPU folder that has
them and writes one small file, ``src/servesim/hardware/data/attention_kinds/attention_kinds.json.gz``
(beside it, by hand: ``NOTICE.md`` and the license) for :mod:`servesim.hardware.linear_attention` and
:mod:`servesim.hardware.sparse_attention`, which read it with the standard library only.  pyarrow is
needed by this script alone.

    python scripts/build_attention_kind_tables.py [--source DIR] [--out DIR] [--check]

What is kept, per GPU folder and engine (latencies in ms, rounded to 4 significant digits):

* **Gated delta net** (``gdn_perf``), keyed by the heads of one GPU ``"<key heads>x<value heads>"``
  (key and value head widths are 128 in every row; the kernels do not read ``d_model``, so rows of
  different models with the same heads are the same kernels and their median is kept):

  - ``decode``: by ``batch_size`` (one new token a sequence), the sum of the two kernels a decode step
    runs per layer, the causal convolution's update (``causal_conv1d_update``) and the recurrent
    state update (``fused_recurrent_gated_delta_rule*``);
  - ``prefill``: by ``batch_size`` x ``seq_len`` (tokens of each sequence), the sum of the chunked
    convolution (``causal_conv1d_fn``) and the chunked delta rule (``chunk_gated_delta_rule*``).

* **DSA decode module** (``dsa_generation_module_perf``: the whole attention module of one decode
  step, its projections, the lightning indexer over every cached token, the top-k and the sparse MLA
  over the kept tokens), keyed ``"<model>|<heads per GPU>|<kv dtype>"`` with ``<model>``
  ``deepseek_v32`` (deepseek-ai/DeepSeek-V3.2) or ``glm5`` (zai-org/GLM-5 and its -FP8), by
  ``batch_size`` x ``step`` (tokens in the cache), each batch with the cache lengths measured at it (the
  tables stop at different lengths for different batches).  Rows of the ``*_skip_indexer`` variants are
  dropped; of the module's GEMM formats the block-FP8 rows are kept where measured (else BF16); where
  the table timed several attention backends (vLLM: FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE) the faster
  of them at each point is kept.

Every grid is made monotone before it is written: a time below the one of a smaller batch or a shorter
sequence (or cache) is raised to it (measurement noise; none of these kernels does less work with
more), so that the step model never gets cheaper with more work.  Points the table lacks inside the
grid (vLLM's recurrent decode of 1,024 sequences of 64 value heads fails its grid guard) are left out
of that axis.  Output is deterministic (sorted keys, gzip mtime 0); ``--check`` rebuilds in memory and
fails if the shipped file differs.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT.parent / "shared" / "data" / "kernels"
OUT = ROOT / "src" / "servesim" / "hardware" / "data" / "attention_kinds"
FILE = "attention_kinds.json.gz"
ENGINES = ("vllm", "sglang", "trtllm")
DSA_MODELS = {"deepseek-ai/DeepSeek-V3.2": "deepseek_v32", "zai-org/GLM-5": "glm5",
              "zai-org/GLM-5-FP8": "glm5"}
KV = {"bfloat16": "bf16", "fp8": "fp8"}


def _round(x: float) -> float:
    return float(f"{x:.4g}")


def _rows(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return list(pq.read_table(path).to_pylist())


def _monotone(axes: list[list[int]], cells: dict[tuple[int, ...], float]) -> dict[tuple[int, ...], float]:
    """Raise every cell to the largest of the cells below it on every axis (running maximum)."""
    out = dict(cells)
    changed = True
    while changed:
        changed = False
        for key in sorted(out):
            for d, axis in enumerate(axes):
                i = axis.index(key[d])
                if i == 0:
                    continue
                lower = (*key[:d], axis[i - 1], *key[d + 1:])
                if lower in out and out[lower] > out[key]:
                    out[key] = out[lower]
                    changed = True
    return out


def _grid(axes: list[list[int]], cells: dict[tuple[int, ...], float]) -> dict[str, Any]:
    """A dense grid over ``axes`` (the rows of the first axis whose every point was measured)."""
    cells = _monotone(axes, cells)
    if len(axes) == 1:
        keep = [a for a in axes[0] if (a,) in cells]
        return {"x": keep, "ms": [_round(cells[(a,)]) for a in keep]}
    first = [a for a in axes[0] if all((a, b) in cells for b in axes[1])]
    return {"x": first, "y": axes[1], "ms": [[_round(cells[(a, b)]) for b in axes[1]] for a in first]}


def _gdn(path: Path) -> dict[str, Any]:
    sums: dict[tuple[str, int, int, int, int], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list))
    for r in _rows(path):
        src = r["kernel_source"]
        part = "conv" if src.startswith("causal_conv1d") else "rule"
        key = (r["phase"], r["num_k_heads"], r["num_v_heads"], r["batch_size"], r["seq_len"])
        sums[key][part].append(float(r["latency"]))
    out: dict[str, Any] = {}
    by_heads: dict[tuple[str, int, int], dict[tuple[int, ...], float]] = defaultdict(dict)
    for (phase, hk, hv, b, s), parts in sums.items():
        if set(parts) != {"conv", "rule"} or not all(math.isfinite(v) for p in parts.values() for v in p):
            continue
        ms = statistics.median(parts["conv"]) + statistics.median(parts["rule"])
        by_heads[(phase, hk, hv)][(b,) if phase == "generation" else (b, s)] = ms
    for (phase, hk, hv), cells in sorted(by_heads.items()):
        axes = [sorted({k[i] for k in cells}) for i in range(len(next(iter(cells))))]
        name = "decode" if phase == "generation" else "prefill"
        out.setdefault(f"{hk}x{hv}", {})[name] = _grid(axes, cells)
    return out


def _dsa(path: Path) -> dict[str, Any]:
    cells: dict[tuple[str, int, str, str], dict[tuple[int, int], list[float]]] = defaultdict(
        lambda: defaultdict(list))
    for r in _rows(path):
        model = DSA_MODELS.get(r["model"])
        if model is None or "skip_indexer" in r["op_name"] or r["kv_cache_dtype"] not in KV:
            continue
        if r["latency"] is None or not math.isfinite(float(r["latency"])):
            continue
        key = (model, int(r["num_heads"]), KV[r["kv_cache_dtype"]], r["gemm_type"])
        cells[key][(int(r["batch_size"]), int(r["step"]), r["kernel_source"])].append(float(r["latency"]))
    out: dict[str, Any] = {}
    for model, heads, kv in sorted({k[:3] for k in cells}):
        gemm = "fp8_block" if (model, heads, kv, "fp8_block") in cells else "bfloat16"
        got = cells.get((model, heads, kv, gemm), {})
        best: dict[tuple[int, ...], float] = {}
        for (b, step, _src), v in got.items():
            ms = statistics.median(v)
            best[(b, step)] = min(ms, best.get((b, step), math.inf))
        if best:
            out[f"{model}|{heads}|{kv}"] = _ragged(best)
    return out


def _ragged(cells: dict[tuple[int, int], float]) -> dict[str, Any]:
    """A grid whose rows (batches) each hold the contexts measured at that batch (the tables stop at
    different contexts for different batches); monotone along each row and, where the same context is
    measured at the smaller batch, down the rows."""
    batches = sorted({b for b, _ in cells})
    rows: list[dict[str, Any]] = []
    prev: dict[int, float] = {}
    keep = []
    for b in batches:
        ys = sorted(s for bb, s in cells if bb == b)
        if len(ys) < 2:
            continue
        ms, run = [], 0.0
        for s in ys:
            run = max(run, cells[(b, s)], prev.get(s, 0.0))
            ms.append(run)
        prev = dict(zip(ys, ms, strict=True))
        keep.append(b)
        rows.append({"y": ys, "ms": [_round(v) for v in ms]})
    return {"x": keep, "rows": rows}


def build(source: Path) -> dict[str, Any]:
    gpus: dict[str, Any] = {}
    for folder in sorted(p for p in source.iterdir() if p.is_dir()):
        per: dict[str, Any] = {}
        for engine in ENGINES:
            entry: dict[str, Any] = {}
            for f in sorted(folder.glob(f"linear_attention_{engine}_*_gdn_perf.parquet")):
                entry["version"] = f.name.split("_")[3]
                entry["gdn"] = _gdn(f)
            for f in sorted(folder.glob(f"sparse_attention_{engine}_*_dsa_generation_module_perf.parquet")):
                entry["dsa_version"] = f.name.split("_")[3]
                entry["dsa_decode"] = _dsa(f)
            if entry:
                per[engine] = entry
        if per:
            gpus[folder.name] = per
    return {"source": "ai-dynamo/aiconfigurator 095f58a51c4ca8e61b66ec108d86f223f8d559ce (Apache-2.0)",
            "gpus": gpus}


def _bytes(doc: dict[str, Any]) -> bytes:
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as fh:
        fh.write(raw)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=SOURCE)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    data = _bytes(build(args.source))
    target = args.out / FILE
    if args.check:
        if not target.is_file() or target.read_bytes() != data:
            print(f"{target} differs from a rebuild", file=sys.stderr)
            return 1
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    print(f"{target}: {len(data):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
