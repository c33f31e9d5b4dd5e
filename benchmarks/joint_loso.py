"""The TTFT constants fitted together, leave-one-source-out, on both measured sets (issue 48 item 1).

``engines.toml`` holds the numbers that move the first token: the request overhead
(``request_overhead_us``: the client sees every token this much later), one for the three Python
servers (vLLM, SGLang and ``trtllm-serve``: ``accuracy.overhead_group``), and, for SGLang and
TensorRT-LLM each, the CPU time to launch one layer of an eager MLA prefill step
(``eager_mla_layer_host_us``: such a step takes at least the model's layers times it, less what an
overlap scheduler hides behind the step before it, :func:`servesim.sim.loop.run_step`).  Each
launch time is seen in ``benchmarks/inferencex.py``'s InferenceX DeepSeek-R1 runs, the overhead in
those and ``benchmarks/accuracy.py``'s published runs, and each moves the others' best value (a lower
launch time leaves DeepSeek's short prompts to a larger overhead).  Here they are fitted together on
both sets, leave-one-source-out:

* every row of either set (InferenceX: the colocated runs) is predicted at each launch time of the
  grid (``--grid-us``) with the overhead taken out (its TTFT less the shipped overhead, as
  ``accuracy.py`` does: the overhead adds to every TTFT); a row depends on its own engine's launch
  time only;
* a source is a campaign of ``accuracy.py`` (:func:`accuracy.campaign`) or an InferenceX run date;
* for each source, the overhead and the two launch times on the grid that minimise the median
  |error| of the mean TTFT over its group's rows of every other source (both sets and the engines of
  the group pooled; ties to the smaller launch times, then overhead) predict that source's rows;
  ``accuracy.NEVER_FITTED``'s source per engine is never fitted to and is predicted with the values
  fitted on all the others.

Prints, per group, engine and set, the out-of-sample median |error| beside the error at the shipped
constants (in sample) and at the values fitted on every source (what ``engines.toml`` should ship).
vLLM has no launch floor (its prefill is captured piecewise), nor has TensorRT-LLM's C++ front end
behind Triton or NIM, whose published runs are dense models and take an overhead of their own
(``accuracy.overhead_group``, ``trtllm-cpp``).  About five minutes with the default grid (the
InferenceX runs take ~40 s a launch time).

    python benchmarks/joint_loso.py
    python benchmarks/joint_loso.py --grid-us 0,1500,2200,3000
"""

from __future__ import annotations

import argparse
import itertools
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
    """One measured TTFT: its overhead group (``accuracy.overhead_group``: the Python servers', or
    TensorRT-LLM's C++ front end), its engine (whose launch time prices it), source and set, the
    measured mean (ms), and the TTFT predicted without the request overhead (ms) at each launch time
    of the grid."""

    group: str
    engine: str
    source: str
    dataset: str  # "published" (accuracy.py) or "inferencex"
    measured_ms: float
    bare_ms: dict[float, float]


Launches = tuple[tuple[str, float], ...]
"""A launch time per fitted engine, as (engine, us) pairs in engine order."""


def bare(item: Item, launches: Launches) -> float:
    """The TTFT ``item`` is predicted without the overhead at ``launches`` (its own engine's launch time;
    an engine with none fitted, vLLM or the C++ front end, the same at every one)."""
    own = dict(launches).get(item.engine)
    return item.bare_ms[own if own is not None else min(item.bare_ms)]


def error(item: Item, overhead_ms: float, launches: Launches) -> float:
    """Relative error of the TTFT predicted at ``overhead_ms`` and ``launches``."""
    return (bare(item, launches) + overhead_ms - item.measured_ms) / item.measured_ms


def fit(items: list[Item], overheads_ms: tuple[float, ...],
        grids: dict[str, tuple[float, ...]]) -> tuple[float, Launches]:
    """The (overhead ms, launch times) minimising the median |error| over ``items``: every combination
    of the launch times of the engines among ``items`` that ``grids`` holds (ties: the smaller launch
    times, engine by engine, then the smaller overhead), at each the overhead ``accuracy.fit_overhead``
    fits; (0, each engine's smallest launch time) without items."""
    engines = sorted({x.engine for x in items if x.engine in grids})
    best: tuple[float, Launches] = (0.0, tuple((e, min(grids[e])) for e in engines))
    best_err = math.inf
    if not items:
        return best
    for combo in itertools.product(*(sorted(grids[e]) for e in engines)):
        launches = tuple(zip(engines, combo, strict=True))
        at = [{"t0": bare(x, launches), "m": x.measured_ms} for x in items]
        o = accuracy.fit_overhead(at, overheads_ms)
        err = statistics.median(abs(error(x, o, launches)) for x in items)
        if err < best_err - 1e-12:
            best, best_err = (o, launches), err
    return best


def loso(items: list[Item], overheads_ms: tuple[float, ...], grids: dict[str, tuple[float, ...]],
         never: set[str]) -> dict[str, tuple[tuple[float, Launches], dict[str, tuple[float, Launches]]]]:
    """Per overhead group: the (overhead, launch times) fitted on every fitted source, and per source
    those its rows are predicted with (fitted without it; a source in ``never`` is never fitted to and
    takes the full fit)."""
    out: dict[str, tuple[tuple[float, Launches], dict[str, tuple[float, Launches]]]] = {}
    for group in sorted({x.group for x in items}):
        mine = [x for x in items if x.group == group]
        fit_on = [x for x in mine if x.source not in never]
        full = fit(fit_on, overheads_ms, grids)
        picks = {src: full if src in never else
                 fit([x for x in fit_on if x.source != src], overheads_ms, grids)
                 for src in sorted({x.source for x in mine})}
        out[group] = (full, picks)
    return out


def _shipped() -> tuple[dict[str, float], Launches]:
    """The overhead each group ships (ms) and each fitted engine's launch time (us)."""
    from servesim.hardware import engines

    raw = engines._raw()["engine"]
    overheads = {g: accuracy.shipped_overhead_ms(g)
                 for g in (accuracy.PYTHON_FRONT_END, accuracy.CPP_FRONT_END)}
    return overheads, tuple((e, float(raw[e].get(KEY, 0.0))) for e in FITTED)


def collect(grid_us: tuple[float, ...]) -> list[Item]:
    """Every row of both sets predicted at each launch time of ``grid_us`` (for SGLang and
    TensorRT-LLM at once: each row depends on its own engine's only; vLLM's rows at its own 0), the
    shipped values restored after."""
    from servesim.hardware import engines, pricer

    raw = engines._raw()["engine"]
    shipped = {e: raw[e].get(KEY, 0.0) for e in FITTED}
    bares: dict[tuple[str, str], dict[float, float]] = {}
    meta: dict[tuple[str, str], tuple[str, str, str, float]] = {}
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
                bares.setdefault(key, {})[launch] = x["t0"]
                cpp = x["group"] == accuracy.CPP_FRONT_END
                engine = accuracy.CPP_FRONT_END if cpp else x["row"]["engine"]
                meta[key] = (x["group"], engine, x["source"], x["m"])
            for x in accuracy.inferencex_items():
                key = ("inferencex", x["id"])
                bares.setdefault(key, {})[launch] = x["t0"]
                meta[key] = (accuracy.overhead_group(x["engine"]), x["engine"], x["source"], x["m"])
    finally:
        for e in FITTED:
            raw[e][KEY] = shipped[e]
        pricer._BUILT.clear()
    return [Item(group=meta[k][0], engine=meta[k][1], source=meta[k][2], dataset=k[0], measured_ms=meta[k][3],
                 bare_ms=v) for k, v in sorted(bares.items())]


def _us(launches: Launches) -> str:
    return ", ".join(f"{e} {v:g} us" for e, v in launches) or "none"


def _pick_range(engine: str, picks: dict[str, tuple[float, Launches]]) -> str:
    """The range of ``engine``'s launch time over the per-source picks that fitted one."""
    vs = [dict(p[1])[engine] for p in picks.values() if engine in dict(p[1])]
    return f", {engine} {min(vs):g}-{max(vs):g} us" if vs else ""


def report(items: list[Item], grid_us: tuple[float, ...]) -> list[str]:
    overheads, launches_shipped = _shipped()
    grids = {e: grid_us for e in FITTED}
    fits = loso(items, accuracy.OVERHEAD_GRID_MS, grids, set(accuracy.NEVER_FITTED.values()))
    grid_text = ", ".join(f"{v:g}" for v in grid_us)
    lines = [f"request overhead (ms, 0-150, one per group) and {KEY} (grid {grid_text}, "
             "one per engine) fitted together leave-one-source-out; median |error| of the mean TTFT:"]
    for group, (full, picks) in fits.items():
        os_ = [p[0] for p in picks.values()]
        lines.append(f"  {group}: fitted on every source {full[0]:g} ms, {_us(full[1])} (ships "
                     f"{overheads[group]:g} ms, {_us(launches_shipped)}); per-source picks: overhead "
                     f"{min(os_):g}-{max(os_):g} ms" + "".join(_pick_range(e, picks) for e, _ in full[1]))
        for engine in sorted({x.engine for x in items if x.group == group}):
            for ds in ("published", "inferencex", "both"):
                xs = [x for x in items if x.group == group and x.engine == engine
                      and (ds == "both" or x.dataset == ds)]
                if not xs:
                    continue
                oos = statistics.median(abs(error(x, *picks[x.source])) for x in xs)
                ins = statistics.median(abs(error(x, overheads[group], launches_shipped)) for x in xs) if all(
                    v in xs[0].bare_ms for _, v in launches_shipped) else math.nan
                at_full = statistics.median(abs(error(x, *full)) for x in xs)
                lines.append(f"    {engine:<7} {ds:<10} n={len(xs):<4} out of sample {100 * oos:5.1f}%   "
                             f"at the shipped {100 * ins:5.1f}%   at the full fit {100 * at_full:5.1f}%")
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
