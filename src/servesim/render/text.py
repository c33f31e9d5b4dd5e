"""Aligned plain-text tables for the terminal."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["FEW_SAMPLES", "MIN_INTERVAL_SAMPLES", "disagg_text", "fmt", "format_interval", "mix_rows",
           "plan_text", "ranked_rows", "sensitivity_lines", "simulated_lines", "specdec_text", "table"]


WIDTH: int | None = None
"""Terminal width the tables must fit, or None (not a terminal: every column, byte-stable output).

The command line sets it when standard output is a terminal; :func:`table` then leaves out
columns from the right (never the first two) until the table fits, and says how many it left
out.  Files, pipes and ``--format json|csv`` always carry every column.
"""


def fit_width(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str, width: int | None,
              keep: Sequence[int] = (0, -1)) -> tuple[list[str], list[list[str]], int]:
    """The columns that fit ``width``, and how many were dropped.  Detail goes first: columns are left
    out from the right, but never those in ``keep`` (by default the first, which names the row, and
    the last, which holds the answer: the winner, PASS/FAIL, a hazard mark), and at least two stay."""
    kept, dropped = _fit_columns(headers, rows, indent, width, keep)
    return [headers[i] for i in kept], [[r[i] for i in kept] for r in rows], dropped


def _fit_columns(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str, width: int | None,
                 keep: Sequence[int]) -> tuple[list[int], int]:
    cols = len(headers)
    idx = list(range(cols))
    if width is None:
        return idx, 0
    fixed = {k % cols for k in keep} if cols else set()
    ws = [max([len(headers[i]), *(len(r[i]) for r in rows)]) for i in range(cols)]

    def total(ix: list[int]) -> int:
        return len(indent) + sum(ws[i] for i in ix) + 2 * (len(ix) - 1)

    while len(idx) > 2 and total(idx) > width:
        drop = next((i for i in reversed(idx) if i not in fixed), None)
        if drop is None:
            break
        idx.remove(drop)
    return idx, cols - len(idx)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ",
          left: Sequence[int] = (0,), keep: Sequence[int] = (0, -1)) -> str:
    """Right-aligned columns (those in ``left`` left-aligned) under a rule; on a terminal narrower
    than the table, detail columns are left out from the right, never those in ``keep`` (see
    :func:`fit_width` and :data:`WIDTH`)."""
    kept, dropped = _fit_columns(headers, rows, indent, WIDTH, keep)
    lefts = {i % len(headers) for i in left} if headers else set()
    headers = [headers[i] for i in kept]
    rows = [[r[i] for i in kept] for r in rows]
    left_now = [j for j, i in enumerate(kept) if i in lefts]
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, r, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [cell.ljust(w) if i in left_now else cell.rjust(w)
                 for i, (cell, w) in enumerate(zip(cells, widths, strict=True))]
        return (indent + "  ".join(parts)).rstrip()

    rule = indent + "  ".join("-" * w for w in widths)
    note = ([f"{indent}({dropped} more column{'s' if dropped > 1 else ''}: widen, or --format csv|json)"]
            if dropped else [])
    return "\n".join([line(headers), rule, *(line(r) for r in rows), *note])


def fmt(x: float | None, spec: str, none: str = "unstable") -> str:
    """``format(x, spec)``, or ``none`` for a missing (unstable) figure."""
    return none if x is None else format(x, spec)


def mix_rows(s: dict[str, Any]) -> list[list[str]]:
    """The cells of the disagg mixes table (text and report share them)."""
    rows = []
    for r in s["rows"]:
        co, de = r["colocated"], r["disaggregated"]
        rows.append([r["mix"], f"{r['prompt_tokens']}/{r['output_tokens']}", fmt(co["ttft_ms"], ".0f"),
                     f"{co['tpot_ms']:.1f}", f"{co['goodput_rps']:.3f}",
                     f"{de['prefill_nodes']}p/{de['decode_nodes']}d", fmt(de["ttft_ms"], ".0f"),
                     f"{de['tpot_ms']:.1f}", f"{de['goodput_rps']:.3f}",
                     r["winner"] + (" (tie)" if r["tie"] else "")])
    return rows


def ranked_rows(s: dict[str, Any]) -> list[list[str]]:
    """The cells of the plan's ranked table (text and report share them)."""
    return [
        [str(i + 1), c["label"], f"{c['goodput_rps']:.3f}", f"{c['goodput_per_gpu']:.3f}",
         f"{c['attainment']:.1%}", fmt(c["ttft_ms"], ".0f"), f"{c['tpot_ms']:.1f}",
         _short(c["binding_constraint"])]
        for i, c in enumerate(s["ranked"])
    ]


def _short(reason: str) -> str:
    """A row's reason, short: for a deployment that meets both SLOs, the margin closest to its limit
    (the largest "X of Y", "N%" or utilization); otherwise the first reason it fails."""
    import re

    parts = [p.strip() for p in reason.split(";") if p.strip()]
    if not parts or parts[0] != "meets both SLOs":
        return parts[0] if parts else reason

    def load(p: str) -> float:
        m = re.search(r"([\d.]+) of ([\d.]+)", p)
        if m and float(m.group(2)) > 0:
            return float(m.group(1)) / float(m.group(2))
        m = re.search(r"([\d.]+)%", p)
        if m:
            return float(m.group(1)) / 100
        nums = [float(x) for x in re.findall(r"\d+\.\d+", p)]
        return max(nums) if nums else 0.0

    rest = parts[1:]
    return max(rest, key=load) if rest else parts[0]


def specdec_text(s: dict[str, Any]) -> str:
    a = s["assumptions"]
    out: list[str] = []
    out.append("SPECULATIVE DECODING ECONOMICS")
    out.append("  model: S = sum_{i<=k} alpha^i / (k d + 1 + c k g(u)),  g(u) = 1.001 / (1.001 - u);"
               " i.i.d. acceptance")
    if "case" in s:
        c = s["case"]
        out.append("")
        out.append(f"[0] Your case: alpha={c['alpha']:g} k={c['k']} d={c['d']:g} c={c['c']:g} u={c['u']:g}")
        out.append(f"  E[n] = {c['expected_tokens']:.3f} tokens/cycle")
        out.append(f"  T_cycle = {c['cycle_time_target_steps']:.3f} target steps")
        out.append(f"  speedup = {c['speedup']:.3f}x  ({c['verdict']})")
        out.append(f"  optimal k at this u = {c['optimal_k']}")
        be = c["break_even_alpha"]
        out.append(f"  break-even alpha at k={c['k']} = {be:.3f}" if be < 1.0
                   else f"  break-even alpha at k={c['k']}: none (even alpha = 1 does not pay)")
    alphas = sorted({g["alpha"] for g in s["grid"]})
    ks = sorted({g["k"] for g in s["grid"]})
    cell = {(g["k"], g["alpha"]): g for g in s["grid"]}
    out.append("")
    out.append(f"[1] Speedup grid at u={a['u']:g}, d={a['d']:g}, c={a['c']:g}"
               "  (rows k, columns alpha; * = optimal k in the column)")
    rows = []
    for k in ks:
        r = [str(k)]
        for al in alphas:
            g = cell[(k, al)]
            r.append(f"{g['speedup']:.2f}{'*' if g['optimal'] else ' '}")
        rows.append(r)
    out.append(table(["k"] + [f"a={al:g} " for al in alphas], rows))
    out.append("")
    out.append("[2] Presets, best k at u=0 and at u=0.7")
    rows = [
        [
            p["name"],
            f"{p['alpha']:g}",
            f"{p['d']:g}",
            f"{p['c']:g}",
            str(p["best_k_u0"]),
            f"{p['speedup_u0']:.2f}x",
            str(p["best_k_u07"]),
            f"{p['speedup_u07']:.2f}x",
            f"{p['turn_off_u']:.3f}",
        ]
        for p in s["presets"]
    ]
    out.append(
        table(["preset", "alpha", "d", "c", "k*(u=0)", "S(u=0)", "k*(u=.7)", "S(u=.7)", "off above u"], rows)
    )
    sp = s["sweep_preset"]
    out.append("")
    out.append(
        f"[3] Utilization sweep for {sp['name']} (alpha={sp['alpha']:g}, d={sp['d']:g}, c={sp['c']:g}):"
        " when to turn it off"
    )
    rows = [[f"{r['u']:.2f}", str(r["best_k"]), f"{r['speedup']:.3f}x", r["verdict"]]
            for r in s["utilization_sweep"]]
    out.append(table(["u", "best k", "speedup", "verdict"], rows))
    off = s["turn_off_u"]
    out.append(f"  turn speculation off above u = {off:.3f} (best-k speedup falls below 1.0)" if off > 0
               else "  speculation never pays for this preset")
    return "\n".join(out) + "\n"


def specdec_model_text(s: dict[str, Any]) -> str:
    """``specdec --model``: the speedup by running batch on a real model, and where it stops paying."""
    out = [f"SPECULATIVE DECODING on {s['model']}: {s['preset']} on {s['tp']} x {s['gpu']} ({s['engine']}), "
           f"{s['context_tokens']:,} tokens of context per sequence",
           f"  acceptance: {s['acceptance']}",
           f"  priced by {s['priced_by']}: d = t_draft / t_target, c = verify cost per extra position", ""]
    rows = [[str(r["batch"]), f"{r['target_step_ms']:.2f}", str(r["k"]), f"{r['acceptance_length']:.2f}",
             f"{r['d']:.4f}", f"{r['c']:.4f}", f"{r['speedup']:.2f}x"] for r in s["rows"]]
    out.append(table(["batch", "step ms", "k", "E[n]", "d", "c", "speedup"], rows, keep=(0, -1)))
    out.append("")
    out.append(_turn_off_line(s))
    if "max_batch_without_draft" in s:
        gb, cap, plain = s["draft_weight_bytes_per_gpu"] / 1e9, s["max_batch"], s["max_batch_without_draft"]
        out.append(f"  the drafter's {gb:.2f} GB/GPU of weights and its KV leave room for {cap:,} sequences "
                   f"({plain:,} without it)")
    return "\n".join(out) + "\n"


def _turn_off_line(s: dict[str, Any]) -> str:
    """Where ``specdec --model``'s setting stops paying: the turn-off batch ``predict --spec`` names for
    the same acceptance and k (its ``turn_off_batch``); a saved result without it: the table's."""
    if "turn_off_batch" not in s:
        off = s["stops_paying_at_batch"]
        return (f"  stops paying at batch {off:,}: turn it off there" if off is not None else
                f"  pays at every batch the KV cache holds (up to {s['max_batch']:,} sequences)")
    t, kk, cap = s["turn_off_batch"], s.get("turn_off_k"), s["max_batch"]
    at = (f"at k = {kk}, alpha {s['turn_off_alpha']:.3f} (as predict --spec runs it)" if kk else
          "at the best k at each batch (as predict --spec runs it)")
    if t == 0:
        return f"  {at}: pays at no batch: leave it off"
    if t is None or t >= cap:
        return f"  {at}: pays at every batch the KV cache holds (up to {cap:,} sequences)"
    return f"  {at}: stops paying above batch {t:,}: turn it off there"


def disagg_text(s: dict[str, Any]) -> str:
    w, nd = s["workload"], s["node"]
    out: list[str] = []
    what = s["preset"] if s["preset"].startswith("custom") else f"preset {s['preset']}"
    out.append(f"COLOCATED vs DISAGGREGATED: {what}")
    out.append(f"  {s['nodes']} nodes of {nd['model']} on {nd['gpus']} GPUs each "
               f"(prefill {nd['prefill_tokens_per_s']:,.0f} tok/s,"
               f" decode {nd['decode_tokens_per_s']:,.0f} tok/s, TPOT_base {nd['tpot_base_ms']:.3g} ms),"
               f" beta={s['beta']:g}, link {s['link']['name']} ({s['link']['GBps']:g} GB/s)")
    out.append(f"  rate {w['rate_per_s']:g} req/s; SLOs: TTFT <= {w['slo_ttft_ms']:g} ms,"
               f" TPOT <= {w['slo_tpot_ms']:g} ms")
    out.append(f"  node: {nd['source']}")
    out.append("")
    kv = s["kv_transfer"]
    out.append(f"[KV] {w['prompt_tokens']}-token prompt = {kv[0]['kv_bytes'] / 1e9:.3f} GB of KV"
               f" ({nd['kv_bytes_per_token']:,.0f} B/token)")
    out.append(
        table(["link", "GB/s", "transfer ms"],
              [[x["link"], f"{x['GBps']:g}", f"{x['transfer_ms']:.1f}"] for x in kv])
    )
    out.append("")
    out.append("[MIXES] colocated vs the best disaggregated split (goodput = req/s meeting both SLOs)")
    rows = mix_rows(s)
    out.append(
        table(
            ["mix", "P/O tokens", "co TTFT", "co TPOT", "co good", "split", "dis TTFT",
             "dis TPOT", "dis good", "winner"],
            rows,
            keep=(0, 4, 8, -1),  # narrow terminals lose latencies and the split, never a goodput
        )
    )
    out.append("  TTFT (mean) and TPOT in ms, goodput in req/s; 'unstable': utilization >= 1, goodput 0;")
    out.append("  a tie (goodputs within 0.1% of the rate) goes to colocation, the simpler deployment")
    out.extend(_mix_interval_lines(s["rows"][0]))
    out.append("")
    out.append("[CROSSOVER] link bandwidth at which disaggregation strictly beats colocation (own mix)")
    xo, at = s["crossover_link_GBps"], s["crossover_at"]
    if xo is None:
        out.append("  none: at no link bandwidth does the best split serve more goodput than colocation")
    else:
        out.append(f"  disaggregation wins when link >= {xo:g} GB/s (best split {at['split']};"
                   f" KV transfer {at['kv_transfer_ms']:.0f} ms of the {w['slo_ttft_ms']:g} ms TTFT budget)")
        out.append(f"  exact break-even: {s['crossover_exact_GBps']:.3f} GB/s")
    return "\n".join(out) + "\n"


def _mix_interval_lines(row: dict[str, Any]) -> list[str]:
    """The own mix's prediction intervals (``disagg --model``), two lines; none without them."""
    co, de = row["colocated"].get("prediction_interval"), row["disaggregated"].get("prediction_interval")
    if co is None or de is None:
        return []

    def rng(pi: dict[str, Any], key: str) -> str:
        lo_hi = pi.get(key)
        return "n/a" if lo_hi is None else f"{lo_hi[0]:.3g}-{lo_hi[1]:.3g}"

    cell = co["basis"].split(" for ", 1)[1].split(":", 1)[0]
    return [f"  {100 * co['level']:g}% prediction interval of the own mix (out-of-sample errors, {cell}):",
            f"    colocated TTFT {rng(co, 'mean_ttft_ms')} ms, TPOT {rng(co, 'mean_tpot_ms')} ms; "
            f"disaggregated TTFT {rng(de, 'mean_ttft_ms')} ms, TPOT {rng(de, 'mean_tpot_ms')} ms"]


_SENS_NAMES = {"link_GBps": ("link bandwidth", "GB/s"), "rate_per_s": ("arrival rate", "req/s"),
               "prompt_share": ("prompt share of tokens", ""), "alpha": ("acceptance alpha", "")}


def sensitivity_lines(s: dict[str, Any]) -> list[str]:
    """One sentence per input: how far it can move before the recommendation flips."""
    lines = []
    for x in s["sensitivity"]:
        name, unit = _SENS_NAMES.get(x["parameter"], (x["parameter"], ""))
        unit = f" {unit}" if unit else ""
        if x["flips_at"] is None:
            lines.append(f"  {name}: {x['baseline']:.4g}{unit}; the choice holds over the range scanned")
        else:
            lines.append(
                f"  {name}: {x['baseline']:.4g}{unit}; {'below' if x['direction'] == 'down' else 'above'} "
                f"{x['flips_at']:.4g}{unit}: {x['new_choice']}"
            )
    return lines


def plan_text(s: dict[str, Any]) -> str:
    w = s["workload"]
    out = ["DEPLOYMENT PLAN", f"  {s['question']}", ""]
    r = s["recommendation"]
    out.append(f"[RECOMMENDATION] {r['label']}")
    out.append(
        f"  goodput {r['goodput_rps']:.3f} req/s ({r['goodput_per_gpu']:.3f} per GPU), "
        f"attainment {r['attainment']:.2%}, TTFT {fmt(r['ttft_ms'], '.0f')} ms, TPOT {r['tpot_ms']:.1f} ms"
    )
    out.append(f"  {r['binding_constraint']}")
    sf = s["smallest_fleet"]
    out.append(f"  smallest fleet meeting the target at {w['rate_per_s']:g} req/s: {sf} nodes"
               if sf is not None else "  no fleet up to 256 nodes meets the target at this rate")
    out.append("")
    out.append(f"[RANKED] top {len(s['ranked'])} of {s['candidates_evaluated']} deployments")
    rows = ranked_rows(s)
    headers = ["#", "deployment", "goodput", "per GPU", "attain", "TTFT", "TPOT", "binding constraint"]
    out.append(table(headers, rows, left=(1, 7)))
    if s["sensitivity"]:
        out.append("")
        out.append("[SENSITIVITY] how far each input can move before the recommendation flips")
        out.extend(sensitivity_lines(s))
    if "simulated" in s:
        out.extend(["", *simulated_lines(s["simulated"])])
    return "\n".join(out) + "\n"


def simulated_lines(sim: dict[str, Any]) -> list[str]:
    """The re-scored candidates: closed-form rank beside simulated rank and figures."""
    st = sim["settings"]
    out = [f"[SIMULATED] the top {len(sim['rows'])} re-scored by simulation ({st['requests']:,} requests,"
           f" {st['replications']} replications, seed {st['seed']}; prefill {st['prefill_service']},"
           f" link contention {st['link_contention']}, decode slots {'on' if st['decode_slots'] else 'off'})"]
    rows = []
    for r in sim["rows"]:
        sm = r["simulated"]
        lo, hi = sm["goodput_ci95"]
        ci = "" if lo is None or hi is None else f" [{lo:.3f}, {hi:.3f}]"
        rows.append([
            r["label"], str(r["closed_form_rank"]), str(r["simulated_rank"]),
            f"{r['closed_form_goodput_rps']:.3f}", f"{sm['goodput_rps']:.3f}{ci}", f"{sm['attainment']:.1%}",
            fmt(sm["ttft_ms"]["p99"], ".0f"), fmt(sm["tpot_ms"]["p99"], ".1f"),
        ])
    out.append(table(["deployment", "cf rank", "sim rank", "cf goodput", "sim goodput [95% CI]", "attain",
                      "TTFT p99", "TPOT p99"], rows))
    if sim["top_changed"]:
        out.append(f"  the simulation changes the choice: {sim['rows'][0]['label']} comes first")
    elif sim["ranking_changed"]:
        out.append("  the simulation keeps the choice but reorders the runners-up")
    else:
        out.append("  the simulation keeps the closed form's ranking")
    return out


MIN_INTERVAL_SAMPLES = 3
"""Fewest replications behind a shown interval: the simulator's own rule
(:data:`servesim.sim.stats.MIN_INTERVAL_SAMPLES`, not imported: rendering knows no model; a test checks
they agree)."""

FEW_SAMPLES = f"n/a (fewer than {MIN_INTERVAL_SAMPLES} samples)"
"""What is shown instead of an interval from fewer than :data:`MIN_INTERVAL_SAMPLES` samples."""


def format_interval(low: float | None, high: float | None, spec: str, *, samples: int | None,
                    lower: float = 0.0, upper: float = math.inf) -> str:
    """``[low, high]`` clipped to [``lower``, ``upper``] and formatted with ``spec``.

    ``-`` when there is no interval (None or non-finite ends: one replication,
    an unstable system); :data:`FEW_SAMPLES` when ``samples`` (the
    replications behind it) is below :data:`MIN_INTERVAL_SAMPLES`.  The
    default range is a time's or a rate's (>= 0); pass ``upper=1`` for a
    probability.
    """
    if samples is not None and samples < MIN_INTERVAL_SAMPLES:
        return FEW_SAMPLES
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return "-"
    lo = min(max(low, lower), upper)
    hi = max(min(high, upper), lower)
    return f"[{lo:{spec}}, {hi:{spec}}]"
