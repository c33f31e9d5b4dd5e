"""How close ``predict`` comes to InferenceX's own DeepSeek-R1 runs, with InferenceMAX's client and recipes.

    python benchmarks/inferencex.py [--disagg] [--mtp] [--quiet]

Reads ``benchmarks/data/inferencex_dsr1.csv`` (source, license and changes in
``benchmarks/data/SOURCES.md``, section 14): 257 colocated runs of DeepSeek-R1 on 8 x H200 and
8 x B200 with SGLang and TensorRT-LLM (FP8, FP4; TP4 to DP8+EP8; 1k/1k, 1k/8k, 8k/1k; 4 to 256
clients) and, with ``--disagg``, 158 disaggregated Dynamo runs (1-9 prefill and decode workers,
pools up to DP16+EP16).  Each row is predicted as ``servesim predict --client inferencemax``
does (:func:`servesim.plan.predict.harness_deployment`: for a colocated run the harness's server
recipe where the row does not say otherwise; a disaggregated one each pool with its Dynamo recipe,
:meth:`servesim.sim.client.Client.disagg_recipe`),
and the median |error| of mean TTFT and mean TPOT is printed per GPU, engine, dtype and shape,
then over all.  Nothing here is fitted to these rows.  The colocated set takes
about a minute on one core, the disaggregated one about six.

``--mtp`` predicts instead the runs with DeepSeek-R1's MTP module as the drafter
(``benchmarks/data/inferencex_dsr1_mtp.csv``, SOURCES.md section 14: 130 colocated on 8 x H200 and
8 x B200, TensorRT-LLM and SGLang; 220 disaggregated, on H100 as well), with ``--spec mtp`` and
the harness's own speculation (:func:`servesim.plan.predict.harness_speculation`: TensorRT-LLM at
``num_nextn_predict_layers`` 3, or 1 with attention DP; SGLang as EAGLE 2/1/3) and its MTP
recipes.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

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
    how = harness_speculation(bench, model=MODEL, engine=row["engine"], dp=int(row["dp"]), spec=spec)
    if row["mode"] == "agg":
        dep = harness_deployment(bench, tp=int(row["tp"]), dp=int(row["dp"]), ep=int(row["ep"]), **common)
        out = predict(dep, bench, **how)
    else:  # each pool with its srt-slurm recipe (Client.disagg_recipe)
        pw, dw = int(row["prefill_workers"]), int(row["decode_workers"])
        prefill = harness_deployment(bench, tp=int(row["prefill_tp"]), dp=int(row["prefill_dp"]),
                                     ep=int(row["prefill_ep"]), pool="prefill", workers=pw, **common)
        decode = harness_deployment(bench, tp=int(row["tp"]), dp=int(row["dp"]), ep=int(row["ep"]),
                                    pool="decode", workers=dw, **common)
        out = predict_disaggregated(prefill, pw, decode, dw, LINKS["rdma"].bytes_per_s, bench, **how)
    return {"ttft": float(out["mean_ttft_ms"]), "tpot": float(out["mean_tpot_ms"])}


def _med(xs: list[float]) -> str:
    return f"{100 * statistics.median(abs(x) for x in xs):5.1f}% ({100 * statistics.median(xs):+6.1f}%)"


def report(rows: list[dict[str, str]], quiet: bool) -> list[str]:
    from servesim._checks import InputError, ParameterError

    lines: list[str] = []
    groups: dict[tuple[str, ...], list[tuple[float, float]]] = defaultdict(list)
    refused: list[str] = []
    for row in rows:
        try:
            p = predict_row(row)
        except (ParameterError, InputError) as exc:
            refused.append(f"{row['id']}: {exc}")
            continue
        e = ((p["ttft"] - float(row["mean_ttft_ms"])) / float(row["mean_ttft_ms"]),
             (p["tpot"] - float(row["mean_tpot_ms"])) / float(row["mean_tpot_ms"]))
        shape = f"t{row['tp']}d{row['dp']}e{row['ep']}"
        if row["mode"] == "disagg":
            pool = f"t{row['prefill_tp']}d{row['prefill_dp']}e{row['prefill_ep']}"
            shape = f"P {pool}x{row['prefill_workers']} D {shape}x{row['decode_workers']}"
        groups[(row["mode"], row["gpu"], row["engine"], row["dtype"], shape)].append(e)
        if not quiet:
            lines.append(f"{row['id']} {row['mode']:6s} {row['gpu']:8s} {row['engine']:7s} {row['dtype']:4s} "
                         f"{shape:28s} {row['isl']:>5}/{row['osl']:<5} c{row['concurrency']:<5} "
                         f"TTFT {p['ttft']:9.1f}/{float(row['mean_ttft_ms']):9.1f}  "
                         f"TPOT {p['tpot']:7.2f}/{float(row['mean_tpot_ms']):7.2f}")
    for mode in ("agg", "disagg"):
        errs = [e for k, v in groups.items() if k[0] == mode for e in v]
        n = sum(r["mode"] == mode for r in rows)
        if not n:
            continue
        lines.append("")
        lines.append(f"{mode}: {len(errs)} of {n} predicted; median |error| (signed median) of the mean "
                     f"TTFT {_med([e[0] for e in errs]) if errs else '-'}, TPOT "
                     f"{_med([e[1] for e in errs]) if errs else '-'}")
        for k in sorted(g for g in groups if g[0] == mode):
            v = groups[k]
            lines.append(f"  {' '.join(k[1:]):44s} n={len(v):3d}  TTFT {_med([e[0] for e in v])}  "
                         f"TPOT {_med([e[1] for e in v])}")
    for r in refused:
        lines.append(f"refused: {r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--disagg", action="store_true", help="also the disaggregated runs (about six minutes)")
    ap.add_argument("--mtp", action="store_true",
                    help="the runs with DeepSeek-R1's MTP module as the drafter instead (about ten minutes "
                         "with --disagg)")
    ap.add_argument("--quiet", action="store_true", help="the summaries only, not every row")
    args = ap.parse_args(argv)
    rows = [r for r in load_rows(MTP_DATA if args.mtp else DATA) if args.disagg or r["mode"] == "agg"]
    sys.stdout.write("\n".join(report(rows, args.quiet)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
