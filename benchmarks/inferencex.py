"""How close ``predict`` comes to InferenceX's own DeepSeek-R1 runs, with InferenceMAX's client and recipes.

    python benchmarks/inferencex.py [--disagg] [--mtp] [--quiet] [--rows FILE]

Reads ``benchmarks/data/inferencex_dsr1.csv`` (source, license and changes in
``benchmarks/data/SOURCES.md``, section 14): 257 colocated runs of DeepSeek-R1 on 8 x H200 and
8 x B200 with SGLang and TensorRT-LLM (FP8, FP4; TP4 to DP8+EP8; 1k/1k, 1k/8k, 8k/1k; 4 to 256
clients) and, with ``--disagg``, 158 disaggregated Dynamo runs (1-9 prefill and decode workers,
pools up to DP16+EP16).  Each row is predicted as ``servesim predict --client inferencemax``
does (:func:`servesim.plan.predict.harness_deployment`: for a colocated run the harness's server
recipe where the row does not say otherwise; a disaggregated one each pool with its Dynamo recipe,
:meth:`servesim.sim.client.Client.disagg_recipe`),
and the median |error| of mean TTFT and mean TPOT is printed per GPU, engine, dtype and shape,
then over all, beside two columns that tell a latency error from a capacity error:

* ``med``: the error of the median TTFT (the rows hold both; the mean carries the first wave
  of ``C`` prompts sent at once, the median the steady state);
* ``rate``: the signed median error of the request throughput.  A row's measured rate is its
  ``tput_per_gpu`` (input plus output tokens a second, per GPU of the deployment) times its GPUs
  over the client's mean prompt plus output tokens (``Client.mean_lengths``); Little's law,
  ``C = rate x (mean TTFT + (mean output - 1) x mean TPOT)``, holds to 0.94-1.0 on 404 of the 415
  runs with that reading (0.71-0.94 on the other 11, eight of them H100 runs whose mean TTFT is
  seconds above its median), which is how the column's meaning was checked.  Where the prefill pool is
  the bottleneck, TTFT is ``C / rate`` less the decode time, so a few percent of rate is tens of
  percent of TTFT: a ``rate`` error beside a large TTFT error says the pool's capacity is off,
  not its latency.

``--rows FILE`` writes every row's prediction (mean, median and p99 TTFT, TPOT, request rate,
the prefill pool's utilisation) beside the measurement as CSV.  Nothing here is fitted to these
rows.  The colocated set takes
about a minute on one core, the disaggregated one about six.

``--mtp`` predicts instead the runs with DeepSeek-R1's MTP module as the drafter
(``benchmarks/data/inferencex_dsr1_mtp.csv``, SOURCES.md section 14: 130 colocated on 8 x H200 and
8 x B200, TensorRT-LLM and SGLang; 220 disaggregated, on H100 as well), with ``--spec mtp`` and
the harness's own speculation (:func:`servesim.plan.predict.harness_speculation`: TensorRT-LLM at
``num_nextn_predict_layers`` 3, or 1 with attention DP, a disaggregated decode pool at its recipe
file's own depth, 1-3; SGLang as EAGLE 2/1/3) and its MTP
recipes, on the client's synthetic traffic (random-token prompts in the chat template): the
acceptance is the chat preset's with a share of its drafts accepted that was fitted to the
colocated MTP runs (``hardware/data/acceptance.toml``, ``[[derived]]``), so that of those runs is
in sample and the disaggregated ones' is not.
"""

from __future__ import annotations

import argparse
import csv
import math
import multiprocessing
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "inferencex_dsr1.csv"
MTP_DATA = Path(__file__).parent / "data" / "inferencex_dsr1_mtp.csv"
MODEL = "deepseek-ai/DeepSeek-R1-0528"


def load_rows(path: Path = DATA) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def predict_row(row: dict[str, str]) -> dict[str, float]:
    """Mean TTFT and TPOT (ms) of one run as servesim predicts it."""
    from servesim.model.kvcache import LINKS
    from servesim.plan.predict import harness_deployment, harness_speculation, predict, predict_disaggregated
    from servesim.sim.batching import Benchmark
    from servesim.sim.client import Client

    bench = Benchmark(isl=int(row["isl"]), osl=int(row["osl"]), concurrency=int(row["concurrency"]),
                      client=Client("inferencemax"))
    spec = row.get("spec") or None
    common = {"model": MODEL, "gpu": row["gpu"], "dtype": row["dtype"], "engine": row["engine"], "spec": spec}
    if row["mode"] == "agg":
        dep = harness_deployment(bench, tp=int(row["tp"]), dp=int(row["dp"]), ep=int(row["ep"]), **common)
        how = harness_speculation(bench, model=MODEL, engine=row["engine"], dp=int(row["dp"]), spec=spec)
        out = predict(dep, bench, **how)
    else:  # each pool with its srt-slurm recipe (Client.disagg_recipe), the MTP depth the decode pool's
        pw, dw = int(row["prefill_workers"]), int(row["decode_workers"])
        prefill = harness_deployment(bench, tp=int(row["prefill_tp"]), dp=int(row["prefill_dp"]),
                                     ep=int(row["prefill_ep"]), pool="prefill", workers=pw, peer_workers=dw,
                                     **common)
        decode = harness_deployment(bench, tp=int(row["tp"]), dp=int(row["dp"]), ep=int(row["ep"]),
                                    pool="decode", workers=dw, peer_workers=pw, **common)
        how = harness_speculation(bench, model=MODEL, engine=row["engine"], spec=spec, decode=decode,
                                  decode_workers=dw)
        out = predict_disaggregated(prefill, pw, decode, dw, LINKS["rdma"].bytes_per_s, bench, **how)
    return {"ttft": float(out["mean_ttft_ms"]), "tpot": float(out["mean_tpot_ms"]),
            "median_ttft": float(out["median_ttft_ms"]), "p99_ttft": float(out["p99_ttft_ms"]),
            "rate": float(out["request_throughput"]),
            "prefill_utilization": float(out.get("prefill_utilization", math.nan))}


def gpus(row: dict[str, str]) -> int:
    """GPUs of the measured deployment (both pools of a disaggregated one)."""
    g = int(row["tp"]) * int(row["dp"])
    if row["mode"] == "agg":
        return g
    return int(row["prefill_tp"]) * int(row["prefill_dp"]) * int(row["prefill_workers"]) + g * int(
        row["decode_workers"])


def measured_rate(row: dict[str, str]) -> float:
    """Requests a second the run measured: ``tput_per_gpu`` (input plus output tokens a second a GPU)
    times its GPUs, over the InferenceMAX client's mean prompt plus output tokens (module docstring)."""
    from servesim.sim.client import Client

    isl, osl = Client("inferencemax").mean_lengths(int(row["isl"]), int(row["osl"]))
    return float(row["tput_per_gpu"]) * gpus(row) / (isl + osl)


def _med(xs: list[float]) -> str:
    return f"{100 * statistics.median(abs(x) for x in xs):5.1f}% ({100 * statistics.median(xs):+6.1f}%)"


def _signed(xs: list[float]) -> str:
    return f"{100 * statistics.median(xs):+6.1f}%"


ROW_FIELDS = ("id", "mode", "gpu", "engine", "dtype", "shape", "isl", "osl", "concurrency",
              "mean_ttft_ms", "pred_mean_ttft_ms", "median_ttft_ms", "pred_median_ttft_ms",
              "pred_p99_ttft_ms", "mean_tpot_ms", "pred_mean_tpot_ms", "rate_per_s", "pred_rate_per_s",
              "pred_prefill_utilization")
"""Columns of ``--rows``: each measured figure beside its prediction (``pred_``)."""


def _shape(row: dict[str, str]) -> str:
    shape = f"t{row['tp']}d{row['dp']}e{row['ep']}"
    if row["mode"] == "disagg":
        pool = f"t{row['prefill_tp']}d{row['prefill_dp']}e{row['prefill_ep']}"
        shape = f"P {pool}x{row['prefill_workers']} D {shape}x{row['decode_workers']}"
    return shape


def report(rows: list[dict[str, str]], quiet: bool,
           table: list[dict[str, object]] | None = None) -> list[str]:
    """The printed lines; with ``table`` a list, each predicted row is appended to it as a dict of
    :data:`ROW_FIELDS`."""
    from servesim._checks import InputError, ParameterError

    lines: list[str] = []
    # per group: (mean TTFT, median TTFT, mean TPOT, request rate) relative errors
    groups: dict[tuple[str, ...], list[tuple[float, float, float, float]]] = defaultdict(list)
    refused: list[str] = []
    for row in rows:
        try:
            p = predict_row(row)
        except (ParameterError, InputError) as exc:
            refused.append(f"{row['id']}: {exc}")
            continue
        mean_t, med_t = float(row["mean_ttft_ms"]), float(row["median_ttft_ms"])
        tpot, rate = float(row["mean_tpot_ms"]), measured_rate(row)
        e = (p["ttft"] / mean_t - 1, p["median_ttft"] / med_t - 1, p["tpot"] / tpot - 1, p["rate"] / rate - 1)
        shape = _shape(row)
        groups[(row["mode"], row["gpu"], row["engine"], row["dtype"], shape)].append(e)
        if table is not None:
            table.append({"id": row["id"], "mode": row["mode"], "gpu": row["gpu"], "engine": row["engine"],
                          "dtype": row["dtype"], "shape": shape, "isl": row["isl"], "osl": row["osl"],
                          "concurrency": row["concurrency"], "mean_ttft_ms": mean_t,
                          "pred_mean_ttft_ms": round(p["ttft"], 3), "median_ttft_ms": med_t,
                          "pred_median_ttft_ms": round(p["median_ttft"], 3),
                          "pred_p99_ttft_ms": round(p["p99_ttft"], 3), "mean_tpot_ms": tpot,
                          "pred_mean_tpot_ms": round(p["tpot"], 4), "rate_per_s": round(rate, 4),
                          "pred_rate_per_s": round(p["rate"], 4),
                          "pred_prefill_utilization": round(p["prefill_utilization"], 4)})
        if not quiet:
            lines.append(f"{row['id']} {row['mode']:6s} {row['gpu']:8s} {row['engine']:7s} {row['dtype']:4s} "
                         f"{shape:28s} {row['isl']:>5}/{row['osl']:<5} c{row['concurrency']:<5} "
                         f"TTFT {p['ttft']:9.1f}/{mean_t:9.1f} "
                         f"(median {p['median_ttft']:9.1f}/{med_t:9.1f})  "
                         f"TPOT {p['tpot']:7.2f}/{tpot:7.2f}  rate {p['rate']:8.3f}/{rate:8.3f}")
    for mode in ("agg", "disagg"):
        errs = [e for k, v in groups.items() if k[0] == mode for e in v]
        n = sum(r["mode"] == mode for r in rows)
        if not n:
            continue
        lines.append("")
        lines.append(f"{mode}: {len(errs)} of {n} predicted; median |error| (signed median) of the mean "
                     f"TTFT {_med([e[0] for e in errs]) if errs else '-'}, TPOT "
                     f"{_med([e[2] for e in errs]) if errs else '-'}; of the median TTFT "
                     f"{_med([e[1] for e in errs]) if errs else '-'}; request rate "
                     f"{_signed([e[3] for e in errs]) if errs else '-'} (signed median)")
        for k in sorted(g for g in groups if g[0] == mode):
            v = groups[k]
            lines.append(f"  {' '.join(k[1:]):44s} n={len(v):3d}  TTFT {_med([e[0] for e in v])}  "
                         f"med {_med([e[1] for e in v])}  TPOT {_med([e[2] for e in v])}  "
                         f"rate {_signed([e[3] for e in v])}")
    for r in refused:
        lines.append(f"refused: {r}")
    return lines


def write_rows(path: Path, table: list[dict[str, object]]) -> None:
    """``table`` as CSV at ``path``, whole or not at all (:func:`servesim._textfile.save_through_temp`)."""
    from servesim._textfile import save_through_temp

    def write(tmp: str) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=ROW_FIELDS)
            w.writeheader()
            w.writerows(table)

    save_through_temp(path, write, "rows file")


def _set(raw: dict[str, Any], key: str, value: float) -> None:
    """Set engines.toml ``key`` of one engine's table ``raw`` to ``value``: a number (``name``), or a
    field of every entry of a list of tables (``name.field``: ``moe_prefill_scale.factor``)."""
    name, _, field = key.partition(".")
    if not field:
        raw[name] = value
        return
    for entry in raw.get(name, ()):
        entry[field] = value


def _get(raw: dict[str, Any], key: str) -> float | None:
    """What :func:`_set` sets, as shipped (the first entry's field); ``None`` where the engine has none."""
    name, _, field = key.partition(".")
    if not field:
        return float(raw.get(name, 0.0))
    entries = raw.get(name) or []
    return float(entries[0][field]) if entries else None


def _errors_at(rows: list[dict[str, str]], key: str, names: list[str], value: float) -> dict[str, float]:
    """Each row's relative error of the mean TTFT with ``key`` of every engine in ``names`` at
    ``value`` (the shipped values restored after)."""
    from servesim.hardware import engines, pricer

    raw = engines._raw()["engine"]
    shipped = {e: _get(raw[e], key) for e in names}
    try:
        for e in names:
            _set(raw[e], key, value)
        pricer._BUILT.clear()
        out = {}
        for r in rows:
            p = predict_row(r)
            out[r["id"]] = (p["ttft"] - float(r["mean_ttft_ms"])) / float(r["mean_ttft_ms"])
        return out
    finally:
        for e in names:
            _set(raw[e], key, float(shipped[e] or 0.0))
        pricer._BUILT.clear()


def loso(rows: list[dict[str, str]], key: str, grid: list[float], jobs: int = 1) -> list[str]:
    """``key`` of engines.toml fitted leave-one-source-out on the rows' mean TTFT: a number each
    engine of the rows has (``eager_mla_layer_host_us``), or a field of each entry of a list of tables
    (``moe_prefill_scale.factor``, ``cold_start.seconds``: engines without that list are left out).
    Every row (colocated, and the disaggregated ones where given) is predicted at each value of
    ``grid`` (for every engine at once; an engine's rows depend on its own value only), a source is a
    campaign (the run's date), and each source's rows take the value that minimises the median
    |error| of the other sources' rows of their engine, both modes pooled.  Prints, per engine and
    mode, that out-of-sample error beside the error at the shipped value (in sample), at the value
    fitted on every source and at ``grid``'s smallest value (for a factor, 1: none), over every row
    and over the rows the value moves (``moved``: those whose prediction differs across the grid; a
    constant of one GPU or dtype leaves the others as they are).  ``jobs`` > 1 predicts the values in
    that many processes."""
    from servesim.hardware import engines

    raw = engines._raw()["engine"]
    names = sorted(e for e in {r["engine"] for r in rows} if _get(raw[e], key) is not None)
    shipped = {e: _get(raw[e], key) for e in names}
    off = min(grid)
    values = sorted({*grid, *(x for x in shipped.values() if x is not None)})
    mine = [r for r in rows if r["engine"] in names]
    if jobs > 1:
        with multiprocessing.get_context("fork").Pool(min(jobs, len(values))) as pool:
            errs = dict(zip(values, pool.starmap(_errors_at, [(mine, key, names, v) for v in values]),
                            strict=True))
    else:
        errs = {v: _errors_at(mine, key, names, v) for v in values}
    lines = [f"{key} fitted leave-one-source-out on the mean TTFT (source: the run's date; grid "
             f"{', '.join(f'{v:g}' for v in grid)}; modes pooled):"]

    def med(v: float, rs: list[dict[str, str]]) -> float:
        return statistics.median(abs(errs[v][r["id"]]) for r in rs) if rs else math.inf

    for e in names:
        mine = [r for r in rows if r["engine"] == e]
        oos: dict[str, float] = {}
        picks = []
        for src in sorted({r["date"] for r in mine}):
            rest = [r for r in mine if r["date"] != src]
            v = min(grid, key=lambda g: (med(g, rest), g))
            picks.append(v)
            oos.update((r["id"], abs(errs[v][r["id"]])) for r in mine if r["date"] == src)
        full = min(grid, key=lambda g: (med(g, mine), g))
        lines.append(f"  {e}: fitted on every source {full:g} (ships {shipped[e]:g}); per-source picks "
                     f"{min(picks):g}-{max(picks):g}")
        for mode in ("agg", "disagg"):
            every = [r for r in mine if r["mode"] == mode]
            moved = [r for r in every if len({round(errs[v][r["id"]], 12) for v in grid}) > 1]
            for label, rs in (("", every), (" moved", moved)):
                if rs:
                    lines.append(f"    {mode + label:<12} n={len(rs):<3} out of sample "
                                 f"{100 * statistics.median(oos[r['id']] for r in rs):5.1f}%; in sample at "
                                 f"the shipped {100 * med(float(shipped[e] or 0.0), rs):5.1f}%, at the full "
                                 f"fit {100 * med(full, rs):5.1f}%, at {off:g} {100 * med(off, rs):5.1f}%")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--disagg", action="store_true", help="also the disaggregated runs (about six minutes)")
    ap.add_argument("--mtp", action="store_true",
                    help="the runs with DeepSeek-R1's MTP module as the drafter instead (about ten minutes "
                         "with --disagg)")
    ap.add_argument("--quiet", action="store_true", help="the summaries only, not every row")
    ap.add_argument("--loso", metavar="KEY=V1,V2,...",
                    help="fit an engines.toml number leave-one-source-out on the colocated runs' TTFT (with "
                         "--disagg the disaggregated ones too), e.g. eager_mla_layer_host_us=0,750,1500,3000 "
                         "or a field of a list of tables, moe_prefill_scale.factor=1,1.5,1.7,2")
    ap.add_argument("--with-mtp", action="store_true",
                    help="with --loso: the MTP runs pooled in (a source is still a run date)")
    ap.add_argument("--only-disagg", action="store_true",
                    help="with --loso: the disaggregated runs only (kv_connect_ms: a number only they use)")
    ap.add_argument("--jobs", type=int, default=1, help="with --loso: processes to predict the values in")
    ap.add_argument("--rows", type=Path, metavar="FILE",
                    help="also write every row's prediction beside its measurement as CSV (ROW_FIELDS)")
    args = ap.parse_args(argv)
    if args.rows is not None and not args.rows.resolve().parent.is_dir():
        ap.error(f"--rows {args.rows}: its folder does not exist")
    rows = [r for r in load_rows(MTP_DATA if args.mtp else DATA) if args.disagg or r["mode"] == "agg"]
    if args.loso:
        key, _, values = args.loso.partition("=")
        try:
            grid = [float(v) for v in values.split(",") if v.strip()]
        except ValueError:
            ap.error(f"--loso {args.loso!r}: KEY=V1,V2,... with numbers")
        if not grid:
            ap.error(f"--loso {args.loso!r}: KEY=V1,V2,... with numbers")
        if args.with_mtp:
            rows += [r for r in load_rows(MTP_DATA) if args.disagg or r["mode"] == "agg"]
        if args.only_disagg:
            rows = [r for r in rows if r["mode"] == "disagg"]
        sys.stdout.write("\n".join(loso(rows, key, grid, max(1, args.jobs))) + "\n")
        return 0
    table: list[dict[str, object]] = []
    sys.stdout.write("\n".join(report(rows, args.quiet, table if args.rows is not None else None)) + "\n")
    if args.rows is not None:
        from servesim._checks import OutputError

        try:
            write_rows(args.rows, table)
        except OutputError as exc:
            sys.stderr.write(f"inferencex.py: {exc}\n")
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
