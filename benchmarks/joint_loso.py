"""The two TTFT constants fitted together, leave-one-source-out, on both measured sets (issue 48 item 1).

``engines.toml`` holds two fitted numbers per engine that move the first token: the request
overhead (``request_overhead_us``: the client sees every token this much later) and, for SGLang and
TensorRT-LLM, the CPU time to launch one layer of an eager MLA prefill step
(``eager_mla_layer_host_us``: such a step takes at least the model's layers times it, less what an
overlap scheduler hides behind the step before it, :func:`servesim.sim.loop.run_step`).  Each was
fitted on one set: the overhead on ``benchmarks/accuracy.py``'s published runs, the launch time on
``benchmarks/inferencex.py``'s InferenceX DeepSeek-R1 runs; each moves the other's best value (a
lower launch time leaves DeepSeek's short prompts to a larger overhead).  Here both are fitted
together on both sets, per engine, leave-one-source-out:

* every row of either set (InferenceX: the colocated runs) is predicted at each launch time of the
  grid (``--grid-us``) with the overhead taken out (its TTFT less the shipped overhead, as
  ``accuracy.py`` does: the overhead adds to every TTFT);
* a source is a campaign of ``accuracy.py`` (:func:`accuracy.campaign`) or an InferenceX run date;
* for each source, the (overhead, launch time) pair on the grid that minimises the median |error|
  of the mean TTFT over the engine's rows of every other source (both sets pooled; ties to the
  smaller launch time, then overhead) predicts that source's rows; ``accuracy.NEVER_FITTED``'s
  source per engine is never fitted to and is predicted with the pair fitted on all the others.

Prints, per engine and set, the out-of-sample median |error| beside the error at the shipped
constants (in sample) and the pair fitted on every source (what ``engines.toml`` should ship).
vLLM has no launch floor (its prefill is captured piecewise): only its overhead is fitted; nor has
TensorRT-LLM's C++ front end behind Triton or NIM, whose published runs are dense models and take an
overhead of their own (``accuracy.overhead_group``, ``trtllm-cpp``).  About
five minutes with the default grid (the InferenceX runs take ~40 s a launch time).

    python benchmarks/joint_loso.py
    python benchmarks/joint_loso.py --grid-us 0,1500,2200,3000
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import accuracy  # noqa: E402  (a sibling script)

KEY = "eager_mla_layer_host_us"
FITTED = ("sglang", "trtllm")
"""Engines whose launch time is fitted (vLLM's is 0: no eager MLA prefill)."""
GRID_US: tuple[float, ...] = (0.0, 1000.0, 1500.0, 2200.0, 3000.0, 4000.0)


@dataclass(frozen=True)
class Item:
    """One measured TTFT: its engine, source and set, the measured mean (ms), and the TTFT predicted
    without the request overhead (ms) at each launch time of the grid."""

    engine: str  # the overhead group (accuracy.overhead_group): an engine, or TensorRT-LLM's C++ front end
    source: str
    dataset: str  # "published" (accuracy.py) or "inferencex"
    measured_ms: float
    bare_ms: dict[float, float]


def error(item: Item, overhead_ms: float, launch_us: float) -> float:
    """Relative error of the TTFT predicted at ``(overhead_ms, launch_us)``."""
    return (item.bare_ms[launch_us] + overhead_ms - item.measured_ms) / item.measured_ms


def fit(items: list[Item], overheads_ms: tuple[float, ...],
        launches_us: tuple[float, ...]) -> tuple[float, float]:
    """The (overhead ms, launch us) minimising the median |error| over ``items`` (ties: the smaller
    launch time, then the smaller overhead): at each launch time the overhead ``accuracy.fit_overhead``
    fits; (0, the smallest launch time) without items."""
    best, best_err = (0.0, min(launches_us)), math.inf
    if not items:
        return best
    for launch in sorted(launches_us):
        at = [{"t0": x.bare_ms[launch], "m": x.measured_ms} for x in items]
        o = accuracy.fit_overhead(at, overheads_ms)
        err = statistics.median(abs(error(x, o, launch)) for x in items)
        if err < best_err - 1e-12:
            best, best_err = (o, launch), err
    return best


def loso(items: list[Item], overheads_ms: tuple[float, ...], launches: dict[str, tuple[float, ...]],
         never: set[str]) -> dict[str, tuple[tuple[float, float], dict[str, tuple[float, float]]]]:
    """Per engine: the pair fitted on every fitted source, and per source the pair its rows are
    predicted with (fitted without it; a source in ``never`` is never fitted to and takes the full
    pair)."""
    out: dict[str, tuple[tuple[float, float], dict[str, tuple[float, float]]]] = {}
    for engine in sorted({x.engine for x in items}):
        mine = [x for x in items if x.engine == engine]
        fit_on = [x for x in mine if x.source not in never]
        grid = launches.get(engine, (0.0,))
        full = fit(fit_on, overheads_ms, grid)
        picks = {src: full if src in never else
                 fit([x for x in fit_on if x.source != src], overheads_ms, grid)
                 for src in sorted({x.source for x in mine})}
        out[engine] = (full, picks)
    return out


def _shipped() -> dict[str, tuple[float, float]]:
    from servesim.hardware import engines

    raw = engines._raw()["engine"]
    out = {e: (accuracy.shipped_overhead_ms(e), float(raw[e].get(KEY, 0.0)))
           for e in ("sglang", "trtllm", "vllm")}
    out[accuracy.CPP_FRONT_END] = (accuracy.CPP_FRONT_END_OVERHEAD_MS, out["trtllm"][1])
    return out


def collect(grid_us: tuple[float, ...]) -> list[Item]:
    """Every row of both sets predicted at each launch time of ``grid_us`` (for SGLang and
    TensorRT-LLM at once; vLLM's rows at its own 0), the shipped values restored after."""
    from servesim.hardware import engines, pricer

    raw = engines._raw()["engine"]
    shipped = {e: raw[e].get(KEY, 0.0) for e in FITTED}
    bare: dict[tuple[str, str], dict[float, float]] = {}
    meta: dict[tuple[str, str], tuple[str, str, float]] = {}
    pub = accuracy.load_rows()
    try:
        for launch in grid_us:
            for e in FITTED:
                raw[e][KEY] = launch
            pricer._BUILT.clear()
            for x in accuracy.evaluate(pub)[0]:
                if "t0" not in x:
                    continue
                key = ("published", x["row"]["id"])
                bare.setdefault(key, {})[launch] = x["t0"]
                meta[key] = (x["group"], x["source"], x["m"])
            for x in accuracy.inferencex_items():
                key = ("inferencex", x["id"])
                bare.setdefault(key, {})[launch] = x["t0"]
                meta[key] = (accuracy.overhead_group(x["engine"]), x["source"], x["m"])
    finally:
        for e in FITTED:
            raw[e][KEY] = shipped[e]
        pricer._BUILT.clear()
    return [Item(engine=meta[k][0], source=meta[k][1], dataset=k[0], measured_ms=meta[k][2], bare_ms=v)
            for k, v in sorted(bare.items())]


def report(items: list[Item], grid_us: tuple[float, ...]) -> list[str]:
    shipped = _shipped()
    launches = {e: grid_us for e in FITTED}
    for e, (_, launch) in shipped.items():  # vLLM (or any engine not fitted) at its shipped launch time
        launches.setdefault(e, (launch,))
    fits = loso(items, accuracy.OVERHEAD_GRID_MS, launches, set(accuracy.NEVER_FITTED.values()))
    lines = [f"request overhead (ms, 0-150) and {KEY} (grid {', '.join(f'{v:g}' for v in grid_us)}) fitted "
             "together leave-one-source-out; median |error| of the mean TTFT:"]
    for engine, (full, picks) in fits.items():
        mine = [x for x in items if x.engine == engine]
        o_s, l_s = shipped[engine]
        os_, ls_ = [p[0] for p in picks.values()], [p[1] for p in picks.values()]
        lines.append(f"  {engine}: fitted on every source {full[0]:g} ms / {full[1]:g} us "
                     f"(ships {o_s:g} ms / {l_s:g} us); per-source picks: overhead "
                     f"{min(os_):g}-{max(os_):g} ms, launch {min(ls_):g}-{max(ls_):g} us")
        for ds in ("published", "inferencex", "both"):
            xs = [x for x in mine if ds == "both" or x.dataset == ds]
            if not xs:
                continue
            oos = statistics.median(abs(error(x, *picks[x.source])) for x in xs)
            ins = statistics.median(abs(error(x, o_s, l_s)) for x in xs) if l_s in xs[0].bare_ms else math.nan
            at_full = statistics.median(abs(error(x, *full)) for x in xs)
            lines.append(f"    {ds:<10} n={len(xs):<4} out of sample {100 * oos:5.1f}%   at the shipped "
                         f"{100 * ins:5.1f}%   at the full fit {100 * at_full:5.1f}%")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--grid-us", default=",".join(f"{v:g}" for v in GRID_US),
                    help="launch times a layer to scan, us (comma-separated)")
    args = ap.parse_args(argv)
    try:
        grid = tuple(sorted({float(v) for v in args.grid_us.split(",") if v.strip()}))
    except ValueError:
        ap.error(f"--grid-us {args.grid_us!r}: numbers separated by commas")
    if not grid or min(grid) < 0:
        ap.error(f"--grid-us {args.grid_us!r}: one or more launch times >= 0")
    sys.stdout.write("\n".join(report(collect(grid), grid)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
