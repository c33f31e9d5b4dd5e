"""Plain-text tables for ``servesim simulate`` and ``servesim validate``.

Each function takes the dict built by :mod:`servesim.sim.report` or
:mod:`servesim.plan.validate` and returns a string; printing is the CLI's job.
"""

from __future__ import annotations

import math
from typing import Any

from servesim.render.text import format_interval, table

__all__ = ["queue_text", "replay_text", "serving_text", "validate_text"]


def _f(x: object, spec: str, none: str = "-") -> str:
    return none if x is None else format(x, spec)


def _ci(pair: list[float | None], spec: str, samples: int | None, *, probability: bool = False) -> str:
    """A 95% interval clipped to the quantity's range (a probability to [0, 1], anything else to
    >= 0: every figure these tables show is a time, a rate or a probability), or ``n/a (fewer than 3
    samples)`` when fewer than 3 replications are behind it."""
    lo, hi = pair
    return format_interval(lo, hi, spec, samples=samples, upper=1.0 if probability else math.inf)


def queue_text(d: dict[str, Any]) -> str:
    out = [f"G/G/c SIMULATION: {d['model']} (FCFS), utilization {d['utilization']:.3f}"]
    out.append(f"  rate {d['rate_per_s']:g} req/s, service {d['service']} mean {d['service_mean_s']:g} s"
               f" (c_s^2 = {d['service_scv']:.3g}), arrivals c_a^2 = {d['arrival_scv']:.3g}")
    if not d["stable"]:
        out.append("  UNSTABLE: utilization >= 1, waits grow without bound (not simulated)")
        return "\n".join(out) + "\n"
    out.append(f"  {d['requests']:,} requests in {d['replications']} replications, warm-up"
               f" {d['warmup_fraction']:g} dropped ({d['measured_requests']:,} measured), seed {d['seed']}")
    cf = d["closed_form"]
    rows = []
    for key, label, spec in (("mean_wait_s", "mean wait (s)", ".4f"), ("p_wait", "P(wait)", ".4f"),
                             ("wait_p99_s", "p99 wait (s)", ".4f")):
        ci = d.get(
            {"mean_wait_s": "mean_wait_ci95_s", "p_wait": "p_wait_ci95", "wait_p99_s": "wait_p99_ci95_s"}[
                key
            ],
            [None, None],
        )
        rows.append(
            [label, _f(d[key], spec), _ci(ci, spec, d.get("replications"), probability=key == "p_wait"),
             _f(cf["erlang_c"][key], spec), _f(cf["allen_cunneen"][key], spec), _f(cf["kimura"][key], spec)]
        )
    out.append("")
    out.append(table(["", "simulated", "95% interval", "Erlang-C", "Allen-Cunneen", "Kimura"], rows))
    if cf["erlang_c"]["exact"]:
        out.append("  M/M/c: Erlang-C is exact, and the approximations reduce to it")
    else:
        out.append(
            "  Erlang-C assumes Poisson arrivals and exponential service; the approximations correct the"
            " mean wait and take P(wait) from Erlang-C and p99 from an exponential conditional wait"
        )
    out.append(f"  wait percentiles: p50 {_f(d['wait_p50_s'], '.4f')} s, p90 {_f(d['wait_p90_s'], '.4f')} s")
    if "sim_requests_per_s" in d and d["sim_requests_per_s"] is not None:
        out.append(f"  simulated {d['sim_requests_per_s']:,.0f} requests/s ({d['sim_wall_s']:.3f} s wall)")
    return "\n".join(out) + "\n"


def _lat(x: dict[str, Any]) -> str:
    return f"{_f(x['mean'], '.1f')} / {_f(x['p50'], '.1f')} / {_f(x['p90'], '.1f')} / {_f(x['p99'], '.1f')}"


def serving_text(d: dict[str, Any]) -> str:
    """The text of ``servesim simulate --preset``: the setup, closed form against simulation per
    architecture, the simulated latencies, the prefill queue, and the winner."""
    out = _serving_header(d)
    out += _serving_comparison(d)
    out += _serving_latency(d)
    out += _serving_prefill_queue(d)
    out.append("")
    win = d["winner"]
    out.append(f"  winner: closed form {win['closed_form']}, simulation {win['simulated']}")
    if "sim_requests_per_s" in d and d["sim_requests_per_s"] is not None:
        out.append(f"  simulated {d['sim_requests_per_s']:,.0f} requests/s "
                   f"({d['sim_wall_ms'] / 1e3:.2f} s wall)")
    return "\n".join(out) + "\n"


def _serving_header(d: dict[str, Any]) -> list[str]:
    """The simulation's setup: preset, nodes, link, the node's rates, the workload and SLOs, the
    assumptions relaxed and the run's size."""
    w, a = d["workload"], d["assumptions"]
    out = [f"SERVING SIMULATION: preset {d['preset']}, {d['nodes']} nodes, link {d['link']['name']}"
           f" ({d['link']['GBps']:g} GB/s), beta={d['beta']:g}"]
    nd = d["node"]
    out.append(f"  node: {nd['source']}; prefill {nd['prefill_tokens_per_s']:g} tok/s, decode"
               f" {nd['decode_tokens_per_s']:g} tok/s, TPOT_base {nd['tpot_base_ms']:g} ms")
    out.append(f"  rate {w['rate_per_s']:g} req/s; P/O {w['prompt_tokens']}/{w['output_tokens']} tokens;"
               f" SLOs TTFT <= {w['slo_ttft_ms']:g} ms, TPOT <= {w['slo_tpot_ms']:g} ms;"
               f" attainment target {w['attainment_target']:.0%}")
    slots = a["decode_slots_per_node"]
    out.append(
        f"  prefill {a['prefill_service']}, arrivals {a['arrivals']}, prompts {a['prompt_tokens']},"
        f" link contention {a['link_contention']}, KV streaming {'on' if a['kv_streaming'] else 'off'},"
        f" decode slots {'unlimited' if slots is None else f'{slots}/node'}"
    )
    out.append(
        f"  {d['requests_per_architecture']:,} requests per architecture in {d['replications']} replications,"
        f" seed {d['seed']}"
    )
    out.append("")
    return out


def _serving_comparison(d: dict[str, Any]) -> list[str]:
    """Per architecture, the closed form's row and the simulation's: TTFT, TPOT, attainment, goodput."""
    rows = []
    for arch in ("colocated", "disaggregated"):
        cf, sm = d[arch]["closed_form"], d[arch]["simulated"]
        rows.append(
            [f"{arch} {cf['split']} closed", _f(cf["ttft_mean_ms"], ".1f", "unstable"),
             _f(cf["ttft_p99_ms"], ".1f", "unstable"), f"{cf['tpot_ms']:.2f}", "-", "-",
             f"{cf['goodput_rps']:.3f}", "-"]
        )
        if not sm["stable"]:
            rows.append([f"{arch} {sm['split']} sim", "unstable", "unstable", "-", "-", "-", "0.000", "-"])
            continue
        rows.append(
            [f"{arch} {sm['split']} sim", _f(sm["ttft_ms"]["mean"], ".1f"), _f(sm["ttft_ms"]["p99"], ".1f"),
             _f(sm["tpot_ms"]["mean"], ".2f"), _f(sm["tpot_ms"]["p99"], ".2f"), f"{sm['attainment']:.4f}",
             f"{sm['goodput_rps']:.3f}", f"{sm['goodput_at_target_rps']:.3f}"]
        )
    return [
        table(
            ["", "TTFT mean", "TTFT p99", "TPOT mean", "TPOT p99", "attain", "goodput", "good@target"], rows
        ),
        "  times in ms, goodput in req/s; good@target: the rate if the attainment target is met, else 0",
    ]


def _serving_latency(d: dict[str, Any]) -> list[str]:
    """[SIMULATED LATENCY]: mean / p50 / p90 / p99 of TTFT and TPOT and the mean waits, per stable
    architecture."""
    out = ["", "[SIMULATED LATENCY] mean / p50 / p90 / p99 (ms)"]
    rows = []
    for arch in ("colocated", "disaggregated"):
        sm = d[arch]["simulated"]
        if not sm["stable"]:
            continue
        rows.append(
            [f"{arch} {sm['split']}", _lat(sm["ttft_ms"]), _lat(sm["tpot_ms"]),
             f"{_f(sm['prefill_wait_ms'], '.1f')} / {_f(sm['link_wait_ms'], '.1f')} /"
             f" {_f(sm['decode_wait_ms'], '.1f')}"]
        )
    out.append(table(["", "TTFT", "TPOT", "wait prefill / link / decode"], rows))
    return out


def _serving_prefill_queue(d: dict[str, Any]) -> list[str]:
    """[PREFILL QUEUE]: the prefill queue's mean wait by M/M/c and the M/G/c approximations against the
    simulation, per architecture."""
    out = ["", "[PREFILL QUEUE] mean wait (ms): M/M/c and the M/G/c approximations vs the simulation"]
    rows = []
    for arch in ("colocated", "disaggregated"):
        m = d["prefill_queue"][arch]
        rows.append(
            [f"{arch} c={m['servers']}", f"{m['service_scv']:.3g}", f"{m['arrival_scv']:.3g}",
             _f(m["erlang_c_ms"], ".2f"), _f(m["allen_cunneen_ms"], ".2f"), _f(m["kimura_ms"], ".2f"),
             _f(m["simulated_ms"], ".2f"), _ci(m["simulated_ci95_ms"], ".2f", d.get("replications"))]
        )
    out.append(
        table(
            ["", "c_s^2", "c_a^2", "Erlang-C", "Allen-Cunneen", "Kimura", "simulated", "95% interval"], rows
        )
    )
    return out


def _g(x: object) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, (int, float)):
        return f"{x:.4g}"
    return str(x)


def _validate_ci(r: dict[str, Any], samples: int | None) -> str:
    """The agreement row's interval: every quantity checked is >= 0, a probability (``p_...``,
    ``P(...)``) also <= 1."""
    q = str(r["quantity"])
    lo, hi = r["ci95_low"], r["ci95_high"]
    if lo is None or hi is None:
        return f"[{_g(lo)}, {_g(hi)}]"
    return format_interval(lo, hi, ".4g", samples=samples,
                           upper=1.0 if q.startswith(("p_", "P(")) else math.inf)


def validate_text(d: dict[str, Any]) -> str:
    st = d["settings"]
    out = ["VALIDATE: closed forms against the simulation"]
    out.append(f"  tolerance: exact closed forms {st['exact_tolerance']}; approximations"
               f" {st['approximation_tolerance']}")
    out.append(f"  {st['replications']} replications, seed {st['seed']}; {st['warmup']}")
    out.append("")
    out.append(f"[AGREEMENT] {d['agreement_passed']} PASS, {d['agreement_failed']} FAIL")
    rows = [
        [r["group"], r["case"], r["quantity"], _g(r["closed_form"]), _g(r["simulated"]),
         _validate_ci(r, st.get("replications")), _g(r["z"]), r["tolerance"], "PASS" if r["pass"] else "FAIL"]
        for r in d["agreement"]
    ]
    out.append(
        table(
            ["group", "case", "quantity", "closed", "simulated", "95% interval", "z", "tolerance", "result"],
            rows,
        )
    )
    out.append("")
    out.append("[BIAS] what each 'model vs reality' assumption hides: baseline vs the same run, relaxed")
    groups: list[tuple[str, str, str, str]] = []
    rows = []
    for r in d["bias"]:
        key = (r["assumption"], r["relaxation"], r["case"], r["baseline"])
        label = ""
        if key not in groups:
            groups.append(key)
            label = f"{len(groups)}. {r['assumption']}"
        ci = "" if r["change_ci95"] is None else f" +- {r['change_ci95']:.3g}"
        rows.append(
            [label, r["figure"], _g(r["closed_form"]), _g(r["sim_baseline"]), _g(r["sim_relaxed"]),
             f"{_g(r['change'])}{ci}", r["sign"]]
        )
    out.append(
        table(["assumption", "figure", "closed", "sim baseline", "sim relaxed", "change", "sign"], rows)
    )
    out.append("  change = relaxed - baseline (95% interval from paired replications); sign shown when the"
               " interval excludes 0")
    out.append("")
    for i, (_, relaxation, case, baseline) in enumerate(groups, 1):
        out.append(f"  {i}. relaxed: {relaxation}")
        out.append(f"     case: {case}")
        out.append(f"     baseline: {baseline}")
    return "\n".join(out) + "\n"


def replay_text(d: dict[str, Any]) -> str:
    t, w, nd = d["trace"], d["workload"], d["node"]
    out = [
        f"TRACE REPLAY: {t['path']} ({t['format']}, {t['requests']:,} requests, {t['rate_per_s']:.3f} req/s)",
        f"  {d['nodes']} nodes, link {d['link']['name']} ({d['link']['GBps']:g} GB/s), beta={d['beta']:g};"
        f" node: {nd['source']}",
        f"  SLOs TTFT <= {w['slo_ttft_ms']:g} ms, TPOT <= {w['slo_tpot_ms']:g} ms;"
        f" attainment target {w['attainment_target']:.0%}",
        f"  closed form from the trace's means: P/O {w['prompt_tokens']}/{w['output_tokens']} tokens at"
        f" {w['rate_per_s']:.3f} req/s, Poisson; replay: the trace's own arrivals and lengths",
        "",
    ]
    rows = []
    for r in d["rows"]:
        cf, rp = r["closed_form"], r["replay"]
        # An overloaded replay (offered work above capacity) only ends because the trace does: its
        # TTFTs measure the trace's length, not the deployment, so they print as "unstable"
        # (the finite run's figures stay in the JSON).
        tt = rp["ttft_ms"] if rp.get("stable", True) else {k: None for k in ("mean", "p50", "p90", "p99")}
        rows.append([r["deployment"], _f(cf["ttft_mean_ms"], ".0f", "unstable"),
                     _f(tt["mean"], ".0f", "unstable"), _f(tt["p50"], ".0f", "unstable"),
                     _f(tt["p90"], ".0f", "unstable"), _f(tt["p99"], ".0f", "unstable"),
                     f"{cf['tpot_ms']:.1f}", _f(rp["tpot_ms"]["mean"], ".1f"),
                     _f(rp["tpot_ms"]["p99"], ".1f"), f"{cf['goodput_rps']:.3f}", f"{rp['goodput_rps']:.3f}",
                     f"{rp['attainment']:.1%}"])
    out.append(table(["deployment", "cf TTFT", "TTFT mean", "p50", "p90", "p99", "cf TPOT", "TPOT mean",
                      "p99", "cf good", "goodput", "attain"], rows))
    out.append("  ms and req/s; cf = closed form from the trace's means; the other columns replay the trace")
    b = d["best"]
    out.append("")
    for src in ("closed_form", "replay"):
        x = b[src]
        out.append(f"  best by {src.replace('_', ' ')}: colocated {x['colocated_goodput_rps']:.3f} req/s vs"
                   f" {x['split']} {x['split_goodput_rps']:.3f} req/s -> {x['winner']}")
    if "prefix_cache" in d:
        out.append("")
        if d["prefix_cache"] is None:
            out.append("[PREFIX CACHE] this trace has no hash_ids: nothing to reuse")
        else:
            out.append(f"[PREFIX CACHE] {d['trace']['cached_prompt_fraction']:.1%} of prompt tokens are"
                       " cached prefixes: their prefill (and, split, their transfer) is skipped")
            rows = []
            for e in d["prefix_cache"]:
                a, c = e["without_cache"], e["with_cache"]
                rows.append([e["deployment"],
                             _f(a["ttft_ms"]["mean"], ".0f"), _f(c["ttft_ms"]["mean"], ".0f"),
                             _f(a["ttft_ms"]["p99"], ".0f"), _f(c["ttft_ms"]["p99"], ".0f"),
                             _f(a["tpot_ms"]["mean"], ".1f"), _f(c["tpot_ms"]["mean"], ".1f"),
                             f"{a['goodput_rps']:.3f}", f"{c['goodput_rps']:.3f}"])
            out.append(table(["deployment", "TTFT", "cached", "p99", "cached", "TPOT", "cached",
                              "goodput", "cached"], rows))
    return "\n".join(out) + "\n"
