"""Candidate terms of the decode step, judged leave-one-source-out on the published runs (issue 48).

``benchmarks/accuracy.py`` predicts the mean TPOT of its published runs 9.3% off out of sample,
too fast in the signed median almost everywhere (TensorRT-LLM v0.14's dense runs -9.8%, the SGLang
cookbook's MiniMax-M2.5 -27.5% and Qwen3-235B -22.2%).  This script adds one candidate term at a
time to every step the engine loop prices, at each size on a grid, re-predicts every row of
``benchmarks/data/published_measurements.csv`` as ``accuracy.py`` does, and fits the size
leave-one-source-out: each source (a campaign such as ``trt014``) gets the size that minimises the
median |TPOT error| of the other sources (the never-fitted sources of ``accuracy.NEVER_FITTED``
take the size fitted on all the others), and its errors at that size are its out-of-sample errors.
A term is worth keeping only if that lowers the out-of-sample TPOT error without raising TTFT's.

    python benchmarks/decode_terms.py                      # both terms, their default grids
    python benchmarks/decode_terms.py --term graph-gap --grid 0,1,2,3
    python benchmarks/decode_terms.py --point trt014-041 332 600   # one step's parts, by hand
    python benchmarks/decode_terms.py --eager-cpp          # the C++ backend's steps all eager
    python benchmarks/decode_terms.py --eager-cpp --eager-gap-us 0 --waits 0,10,20,30

The terms (microseconds each):

* ``graph-gap``: a gap after every kernel of a decode-only step (a CUDA-graph replay), the kernels
  counted as the step's launch floor counts them (``StepTime.floor_s / OTHER_KERNEL_FLOOR_S``);
* ``allreduce-wait``: a wait at every tensor-parallel all-reduce of any step (the ranks arrive
  skewed, which the kernel tables' all-reduce, timed with the ranks in lockstep, does not see).

``--eager-cpp`` prices every step of the TensorRT (C++) backend rows (TensorRT-LLM v0.14 behind
Triton, NIM 1.8) eagerly, in place of CUDA graphs (triton-inference-server/tensorrtllm_backend
``inflight_batcher_llm/src/model_instance_state.cc``: "cuda_graph_mode is not specified, will be set
to false"; TensorRT-LLM ``executor.h`` ``ExtendedRuntimePerfKnobConfig(..., cudaGraphMode = false)``),
at the engine's eager launch gap or ``--eager-gap-us``, with ``--waits`` more at each all-reduce (the
ranks launch each kernel from their own process, so a collective waits for the last), and prints
the median TPOT and TTFT error per source and tensor-parallel size beside the shipped prediction
(in sample: two sources, one of them never fitted, so no size can be fitted leave-one-source-out).

The terms are added from outside the step models for the experiment only (the step models' own
``step_price`` is wrapped for the run and restored after it); nothing here changes what servesim
ships.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import accuracy as acc

TERMS: dict[str, tuple[float, ...]] = {
    "graph-gap": (0.0, 0.5, 1.0, 2.0, 3.0),
    "allreduce-wait": (0.0, 2.5, 5.0, 10.0, 20.0),
}
"""Each candidate term and the grid of its size (microseconds a kernel or an all-reduce)."""


def _extra_s(term: str, model: Any, decode: int, context: int, chunks: tuple[tuple[int, int, bool], ...],
             positions: int, size_us: float) -> float:
    """The seconds ``term`` adds to one step at ``size_us``."""
    from servesim.hardware.stepmodel import OTHER_KERNEL_FLOOR_S, Chunk

    cs = tuple(Chunk(q, c, 1, x) for q, c, x in chunks)
    if term == "graph-gap":
        if chunks:
            return 0.0
        st = model.step(decode, context, cs, positions, bound=False)
        return size_us * 1e-6 * st.floor_s / OTHER_KERNEL_FLOOR_S
    st = model.step(decode, context, cs, positions, bound=True)
    return size_us * 1e-6 * sum(op.count for op in st.ops if op.kind == "allreduce")


@contextlib.contextmanager
def term_added(term: str, size_us: float) -> Iterator[None]:
    """Every step model's ``step_price`` with ``term`` at ``size_us`` added, for the duration; the
    step models built before are dropped (``pricer._BUILT``) so no price of another size is kept."""
    from servesim.hardware import pricer
    from servesim.hardware.moe_step import MoEStepModel
    from servesim.hardware.stepmodel import StepModel

    originals: dict[type, Callable[..., Any]] = {c: c.step_price for c in (StepModel, MoEStepModel)}

    def wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
        def step_price(self: Any, decode: int, context: int, chunks: tuple[tuple[int, int, bool], ...] = (),
                       positions: int = 1) -> Any:
            t, ok, notes, wait, launch = orig(self, decode, context, chunks, positions)
            if size_us:
                t += _extra_s(term, self, decode, context, chunks, positions, size_us)
            return t, ok, notes, wait, launch
        return step_price

    pricer._BUILT.clear()
    for cls, orig in originals.items():
        cls.step_price = wrap(orig)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for cls, orig in originals.items():
            cls.step_price = orig  # type: ignore[method-assign]
        pricer._BUILT.clear()


def run_grid(rows: list[dict[str, str]], term: str, grid: tuple[float, ...]) -> dict[float, dict[str, Any]]:
    """Every row's result (``accuracy.evaluate``, its TTFT overhead refitted leave-one-source-out) at
    each size of ``grid``, by row id."""
    out: dict[float, dict[str, Any]] = {}
    for size in grid:
        with term_added(term, size):
            res, _ = acc.evaluate(rows)
        acc.leave_one_source_out(res)
        out[size] = {x["row"]["id"]: x for x in res}
    return out


def _med(xs: list[float]) -> float:
    return statistics.median(abs(x) for x in xs) if xs else float("nan")


def loso(runs: dict[float, dict[str, Any]]) -> list[str]:
    """The size fitted leave-one-source-out on TPOT and the out-of-sample errors it gives, beside the
    shipped model (size 0), overall and per engine, family and load band."""
    grid = sorted(runs)
    base = runs[grid[0]]
    ids = sorted(i for i in base if all(runs[g].get(i, {}).get("e_tpot") is not None for g in grid))
    src = {i: base[i]["source"] for i in ids}
    never = set(acc.NEVER_FITTED.values())
    fit_on = [i for i in ids if src[i] not in never]

    def med_tpot(g: float, keep: list[str]) -> float:
        return _med([runs[g][i]["e_tpot"] for i in keep]) if keep else float("inf")

    full = min(grid, key=lambda g: (med_tpot(g, fit_on), g))
    size_of = {s: full if s in never
               else min(grid, key=lambda g: (med_tpot(g, [i for i in fit_on if src[i] != s]), g))
               for s in sorted(set(src.values()))}
    def med_ttft(g: float) -> float:
        return _med([x["e_ttft"] for x in runs[g].values() if x["e_ttft"] is not None])

    lines = ["  in sample, median |error| by size: " + "; ".join(
        f"{g:g} us TPOT {100 * med_tpot(g, ids):.1f}% TTFT {100 * med_ttft(g):.1f}%" for g in grid)]
    lines.append(f"  fitted on every source: {full:g} us; leave-one-source-out: " + ", ".join(
        f"{s} {g:g}" for s, g in size_of.items()))
    per_source = []
    for s, g in size_of.items():
        mine = [i for i in ids if src[i] == s]
        per_source.append(f"{s} {100 * med_tpot(0.0, mine):.1f}% -> {100 * med_tpot(g, mine):.1f}% "
                          f"(n={len(mine)})")
    lines.append("  TPOT per source, none -> fitted without it: " + ", ".join(per_source))
    pick = {i: runs[size_of.get(base[i]["source"], full)][i] for i in base}
    for key, name in (("e_tpot", "TPOT"), ("e_ttft", "TTFT"), ("e_tput", "output tok/s")):
        a = [x[key] for x in pick.values() if x[key] is not None]
        b = [x[key] for x in base.values() if x[key] is not None]
        lines.append(f"  {name:<12} out of sample {100 * _med(a):5.1f}% "
                     f"(signed {100 * statistics.median(a):+5.1f}%)   none {100 * _med(b):5.1f}% "
                     f"(signed {100 * statistics.median(b):+5.1f}%)   n={len(a)}")
    groups: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("engine", lambda x: x["row"]["engine"]), ("family", lambda x: acc.family_of(x["row"]["model"])),
        ("load", acc.band_of)]
    for label, f in groups:
        for g in sorted({f(x) for x in base.values()}):
            a = [x["e_tpot"] for i, x in pick.items() if f(base[i]) == g and x["e_tpot"] is not None]
            b = [x["e_tpot"] for x in base.values() if f(x) == g and x["e_tpot"] is not None]
            if a:
                lines.append(f"    TPOT {label:<6} {g:<12} n={len(a):<3} out of sample {100 * _med(a):5.1f}% "
                             f"(signed {100 * statistics.median(a):+5.1f}%)   none {100 * _med(b):5.1f}% "
                             f"(signed {100 * statistics.median(b):+5.1f}%)")
    return lines


def _deployment(row: dict[str, str]) -> Any:
    from servesim.hardware.pricer import Deployment

    dp, ep = acc.parallelism_of(row)
    return Deployment(model=row["model"], gpu=row["gpu"], tp=int(row["tp"] or 1),
                      dtype=row["dtype"] or "auto", kv_dtype=row["kv_dtype"] or "bf16", engine=row["engine"],
                      overlap=acc.overlap_of(row),
                      dp=dp, ep=ep, scheduler=acc.scheduler_of(row))


def point(row_id: str, decode: float, context: float) -> list[str]:
    """One decode step of the row's deployment, part by part, beside the row's measured ITL/TPOT."""
    from servesim.hardware.pricer import build_step_model

    row = {r["id"]: r for r in acc.load_rows()}[row_id]
    sm, _, _ = build_step_model(_deployment(row))
    st = sm.step(decode, context)
    m = acc._num(row["mean_itl_ms"]) or acc._num(row["mean_tpot_ms"])
    lines = [f"{row_id}: {row['model']} on {row['tp']} x {row['gpu']} ({row['engine']}), "
             f"{row['isl']}/{row['osl']} tokens, load {row['concurrency'] or '@' + row['request_rate']}; "
             f"measured ITL {m} ms",
             f"  decode step of {decode:g} sequences at context {context:g}: "
             f"total {1e3 * st.total_s:.2f} ms = GEMMs {1e3 * st.gemm_s:.2f} + attention "
             f"{1e3 * st.attention_s:.2f} + all-reduce "
             f"{1e3 * st.allreduce_s:.2f} + other {1e3 * st.other_s:.2f} (GPU {1e3 * st.gpu_s:.2f}) and host "
             f"{1e3 * st.host_s:.2f} ({'overlapped' if sm.engine.overlap else 'added'}); speed of light "
             f"{1e3 * st.sol_s:.2f} ms, launch floor {1e3 * st.floor_s:.2f} ms "
             f"({st.floor_s / 2.2e-6:.0f} kernels)"]
    for op in st.ops:
        lines.append(f"    {op.name:<44} {op.kind:<11} x{op.count:<5g} {1e6 * op.priced_s:9.2f} us each "
                     f"{1e3 * op.count * op.priced_s:8.3f} ms")
    return lines


def eager_cpp(rows: list[dict[str, str]], gap_us: float | None, waits: tuple[float, ...]) -> list[str]:
    """The TensorRT (C++) backend rows (TensorRT-LLM behind Triton or NIM: no serving loop, and the
    scheduler options of ``accuracy.scheduler_of``) with every step eager (no CUDA graph: the Triton
    backend's ``cuda_graph_mode`` defaults to false), each kernel paying ``gap_us`` (None: engines.toml's
    ``eager_kernel_us``) and each tensor-parallel all-reduce ``wait`` more for each wait of ``waits``:
    the median TPOT and TTFT error per source and tensor-parallel size, beside the shipped prediction
    (CUDA graphs, no wait)."""
    from servesim.hardware.pricer import build_step_model
    from servesim.sim.batching import Benchmark, run_benchmark
    from servesim.sim.client import Client

    cases: list[tuple[dict[str, str], Any, float, float | None]] = []
    for r in rows:
        if acc.serving_loop(r) or not acc.scheduler_of(r):
            continue  # not the C++ backend (accuracy.scheduler_of gives options to its rows alone)
        conc, rate = acc._num(r["concurrency"]), acc._num(r["request_rate"])
        m = acc._num(r["mean_tpot_ms"]) or acc._num(r["mean_itl_ms"])
        if m is None or (conc is None and rate is None) or not acc._num(r["isl"]) or not acc._num(r["osl"]):
            continue
        name, ratio, nominal = acc.client_of(r)
        isl, osl = nominal or (int(float(r["isl"])), int(float(r["osl"])))
        bench = Benchmark(isl=isl, osl=osl, concurrency=int(conc) if conc is not None else None,
                          rate_per_s=rate if conc is None else None, num_prompts=None, warmup=acc.warmup(r),
                          client=Client(name, random_range_ratio=ratio))
        cases.append((r, bench, m, acc._num(r["mean_ttft_ms"])))

    def run(eager: bool, wait: float) -> dict[str, tuple[float, float | None]]:
        out: dict[str, tuple[float, float | None]] = {}
        with term_added("allreduce-wait", wait):
            for r, bench, m, mt in cases:
                sm, _, memory = build_step_model(_deployment(r))
                acc._without_serving_loop(sm)
                if eager:
                    gap = sm.engine.eager_kernel_s if gap_us is None else gap_us * 1e-6
                    sm.engine = replace(sm.engine, cuda_graph_max_tokens=0, eager_kernel_s=gap)
                res = run_benchmark(sm, bench, memory)
                out[r["id"]] = ((res.mean_tpot_s * 1e3 - m) / m,
                                None if not mt else (res.mean_ttft_s * 1e3 - mt) / mt)
        return out

    def cells(errs: dict[str, tuple[float, float | None]]) -> str:
        parts = []
        for src in sorted({acc.campaign(r) for r, *_ in cases}):
            for tp in sorted({r["tp"] for r, *_ in cases if acc.campaign(r) == src}, key=int):
                ids = [r["id"] for r, *_ in cases if acc.campaign(r) == src and r["tp"] == tp]
                e = [errs[i][0] for i in ids]
                f = [t for i in ids if (t := errs[i][1]) is not None]
                parts.append(f"{src} TP{tp} TPOT {100 * _med(e):.1f}% ({100 * statistics.median(e):+.1f}%)"
                             + (f" TTFT {100 * _med(f):.1f}%" if f else ""))
        return "; ".join(parts)

    gap_said = "engines.toml's eager_kernel_us" if gap_us is None else f"{gap_us:g} us"
    lines = [f"  CUDA graphs (shipped): {cells(run(False, 0.0))}"]
    for wait in waits:
        lines.append(f"  eager at {gap_said} a kernel, {wait:g} us an all-reduce: {cells(run(True, wait))}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--term", choices=sorted(TERMS), action="append",
                    help="the term(s) to scan (default both)")
    ap.add_argument("--grid", help="sizes in us, comma-separated, 0 first (default: the term's grid)")
    ap.add_argument("--point", nargs=3, metavar=("ID", "BATCH", "CONTEXT"), help="one step of a row by hand")
    ap.add_argument("--eager-cpp", action="store_true", help="the C++ backend rows with every step eager")
    ap.add_argument("--eager-gap-us", type=float,
                    help="--eager-cpp's launch gap a kernel (default engines.toml's)")
    ap.add_argument("--waits", default="0", help="--eager-cpp's waits an all-reduce, us, comma-separated")
    args = ap.parse_args(argv)
    if args.point:
        print("\n".join(point(args.point[0], float(args.point[1]), float(args.point[2]))))
        return 0
    rows = acc.load_rows()
    if args.eager_cpp:
        waits = tuple(float(v) for v in args.waits.split(","))
        print("TensorRT (C++) backend rows (median |TPOT error|, signed; TTFT with the shipped overhead):")
        print("\n".join(eager_cpp(rows, args.eager_gap_us, waits)))
        return 0
    for term in args.term or sorted(TERMS):
        grid = tuple(float(v) for v in args.grid.split(",")) if args.grid else TERMS[term]
        if grid[0] != 0.0:
            print(f"error: --grid must start at 0 (the shipped model), got {args.grid}", file=sys.stderr)
            return 2
        print(f"{term} (us), fitted leave-one-source-out on TPOT:")
        print("\n".join(loso(run_grid(rows, term, grid))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
