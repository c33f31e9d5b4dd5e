"""The text of the input commands: ``trace summarize``, ``trace fetch --list``, ``fit-alpha`` and
``calibrate``, from their result dicts."""

from __future__ import annotations

import math
from typing import Any

from servesim.render.text import table

__all__ = ["calibrate_text", "fit_text", "sources_text", "trace_text"]


def _g(x: float | None, spec: str) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)

def trace_text(d: dict[str, Any]) -> str:
    out = [f"TRACE {d['path']} ({d['format']})"]
    lines = [
        ("requests", f"{d['requests']:,}"),
        ("duration", f"{d['duration_s']:,.1f} s ({d['duration_s'] / 60:.1f} min)"),
        ("rate", f"{_g(d['rate_per_s'], '.4g')} req/s (1 / mean interarrival)"),
        ("interarrival CV", f"{_g(d['interarrival_cv'], '.3f')} (1 = Poisson, > 1 burstier)"),
        ("peak / mean rate", f"{d['peak_to_mean']:.3f} (peak {d['peak_rate_per_s']:.4g} req/s over "
                             f"{d['windows']} whole {d['window_s']:g} s windows)"),
    ]
    if d["zero_output_requests"]:
        lines.append(("zero-output requests", f"{d['zero_output_requests']:,} (failed requests?)"))
    width = max(len(k) for k, _ in lines)
    out += [f"  {k.ljust(width)}  {v}" for k, v in lines]
    out.append("")
    rows = []
    for name in ("prompt_tokens", "output_tokens"):
        st = d[name]
        rows.append([name.replace("_tokens", ""), f"{st['mean']:.1f}", str(st["min"]), f"{st['p50']:g}",
                     f"{st['p90']:g}", f"{st['p99']:g}", str(st["max"])])
    out.append(table(["tokens", "mean", "min", "p50", "p90", "p99", "max"], rows))
    pf = d["prefix"]
    if pf is not None:
        cap = "unbounded" if pf["cache_blocks"] is None else f"LRU of {pf['cache_blocks']:,} blocks"
        out.append("")
        out.append(f"  prefix cache from hash_ids ({pf['block_tokens']}-token blocks, {cap} cache):")
        out.append(f"    prompt tokens reusable  {pf['reuse_rate']:.1%} "
                   f"({pf['cached_tokens']:,} of {pf['prompt_tokens']:,})")
        out.append(f"    block hit rate          {pf['block_hit_rate']:.1%}")
        out.append(f"    requests with a hit     {pf['requests_with_hit']:.2%}")
    if "plot" in d:
        out.append("")
        out.append(f"  plot: {d['plot']}")
    return "\n".join(out) + "\n"

def sources_text(rows: list[dict[str, Any]]) -> str:
    out = ["TRACES servesim trace fetch NAME downloads (excerpts: the first requests, shipped with servesim)"]
    for r in rows:
        out.append("")
        out.append(f"  {r['name']}: {r['title']} ({r['format']}, {r['license']})")
        out.append(f"    source   {r['url']}")
        if r["sha256"] is not None:
            out.append(f"    pinned   {r['bytes']:,} bytes, sha256 {r['sha256']}")
        excerpt = "none" if r["excerpt"] is None else f"{r['excerpt']} ({r['excerpt_requests']:,} requests)"
        out.append(f"    excerpt  {excerpt}")
    return "\n".join(out) + "\n"

_INPUT_WORDS = {"per-position": "per-position acceptance counts (maximum likelihood)",
                "accept-length": "mean accepted length, bonus token included (method of moments)",
                "accept-rate": "acceptance rate (method of moments)"}

_RATES = {
    # the fit's observed acceptance-rate fields, each an engine's definition (the field's first word is
    # the engine's name, as the fit's ``engine`` says it): the table's row name, the definition
    "vllm_acceptance_rate": ("vLLM acceptance rate E[A]/k", "vLLM accepted/drafted = E[A]/k"),
    "sglang_accept_rate": ("SGLang accept rate E[n]/(k+1)", "SGLang spec_accept_rate = E[n]/(k+1)"),
}


def fit_text(d: dict[str, Any]) -> str:
    out = [f"ACCEPTANCE FIT {d['source']} ({d['engine']})"]
    n = d["num_drafts"]
    span = ""
    if d["interval_s"]:
        span = f" over {d['interval_s']:,.1f} s (from {d['interval_from']})"
        if d["drafts_per_s"] is not None:
            span += f" ({d['drafts_per_s']:,.1f} cycles/s)"
    cycles = f", N = {n:,.0f} cycles{span}" if n is not None else ""
    out.append(f"  k = {d['k']} draft tokens per cycle{cycles}")
    rate_def = next(words for key, (_, words) in _RATES.items() if key.startswith(f"{d['engine']}_"))
    word = _INPUT_WORDS[d["input_definition"]]
    if d["input_definition"] == "accept-rate":
        word += f"; {rate_def}"
    out.append(f"  input: {word}")
    iv = d["input_value"]
    shown = ", ".join(f"{x:.4g}" for x in iv) if isinstance(iv, (list, tuple)) else f"{iv:.4g}"
    out.append(f"         value {shown}")
    ci = ""
    if d["alpha_lo"] is not None:
        ci = f"   95% interval [{d['alpha_lo']:.4f}, {d['alpha_hi']:.4f}]"
    out.append(f"  alpha (conditional, i.i.d. model) = {d['alpha']:.4f}{ci}")
    out.append(f"    interval: {d['interval']}")
    if d.get("predict_flags"):
        out.append(f"  mean acceptance length {d['acceptance_length']:.3f} tokens per verify step (bonus "
                   f"included): servesim predict ... --spec METHOD {d['predict_flags']}")
    t = d["iid_test"]
    if t is not None:
        verdict = "consistent with i.i.d." if t["consistent_at_5pct"] else "NOT i.i.d. (p < 0.05)"
        out.append(f"  i.i.d. test (likelihood ratio): G = {t['statistic']:.3g}, df = {t['df']}, "
                   f"p = {t['p_value']:.3g}: {verdict}; max |q_i - alpha| = {t['max_abs_deviation']:.4f}")
    obs, iid = d["observed"], d["iid"]
    out.append("")
    heads = ["position i", *(str(i) for i in range(1, d["k"] + 1))]
    rows = []
    if obs["marginal"] is not None:
        rows.append(["observed p_i = P(A>=i)", *(f"{x:.4f}" for x in obs["marginal"])])
    rows.append(["i.i.d. alpha^i", *(f"{x:.4f}" for x in iid["marginal"])])
    if obs["conditional"] is not None:
        rows.append(["observed q_i = p_i/p_(i-1)", *(_g(x, ".4f") for x in obs["conditional"])])
    out.append(table(heads, rows))
    out.append("")
    defs = [
        ("conditional alpha", None, d["alpha"]),
        ("mean accepted length, no bonus E[A]", obs["mean_accepted_no_bonus"], iid["mean_accepted_no_bonus"]),
        ("mean accepted length + bonus E[n]", obs["mean_accepted_with_bonus"],
         iid["mean_accepted_with_bonus"]),
        *((name, obs[key], iid[key]) for key, (name, _) in _RATES.items()),
    ]
    out.append(table(["definition", "observed", "i.i.d. at alpha"],
                     [[name, _g(o, ".4f") if o is not None else "-", f"{m:.4f}"] for name, o, m in defs]))
    out.append("")
    out.append(f"  optimal k (servesim.model.speculative, d = {d['d']:g}, c = {d['c']:g}):")
    if d.get("util_from_batch"):
        b = d["util_from_batch"]
        out.append(f"  (u = {b['u']:.3f} is batch {b['batch']} of {b['target']} on {b['tp']} x {b['gpu']} at"
                   f" {b['context_tokens']} tokens of context, from the roofline)")
    rows = []
    for o in d["optimal"]:
        band = "-"
        if o["k_at_alpha_lo"] is not None:
            band = f"{o['k_at_alpha_lo']}..{o['k_at_alpha_hi']}"
        rows.append([f"{o['u']:.2f}", str(o["k"]), f"{o['speedup']:.3f}x",
                     f"{o['speedup_at_measured_k']:.3f}x", band])
    out.append(table(["u", "k*", "speedup at k*", f"speedup at k={d['k']}", "k* over interval"], rows))
    return "\n".join(out + _warnings(d)) + "\n"

def calibrate_text(d: dict[str, Any]) -> str:
    nd = d["node"]
    out = [f"CALIBRATION from {len(d['points'])} measured points (the lab's colocated closed form)",
           "  TTFT = W_q(M/M/N) + P/R_p,  TPOT = TPOT_base (1 + beta rho_p),  rho_p = lambda P / (N R_p)",
           f"  prefill R_p   {nd['prefill_tokens_per_s']:,.0f} tokens/s per node",
           f"  TPOT_base     {nd['tpot_base_s'] * 1e3:.3f} ms",
           f"  beta          {d['beta']:.4f}",
           f"  decode R_d    {nd['decode_tokens_per_s']:,.0f} tokens/s per node (given, not fitted)",
           f"  KV shape      {nd['model']}",
           ""]
    rows = [
        [p["source"], f"{p['rate_per_s']:.3g}", f"{p['prefill_utilization']:.3f}",
         f"{p['ttft_s'] * 1e3:.1f}", f"{p['ttft_model_s'] * 1e3:.1f}", f"{p['ttft_rel_residual']:+.1%}",
         f"{p['tpot_s'] * 1e3:.2f}", f"{p['tpot_model_s'] * 1e3:.2f}", f"{p['tpot_rel_residual']:+.1%}"]
        for p in d["points"]
    ]
    out.append(table(["point", "req/s", "rho_p", "TTFT ms", "model", "resid", "TPOT ms", "model", "resid"],
                     rows))
    out.append(f"  rms relative residual: TTFT {d['ttft_rms_rel']:.1%}, TPOT {d['tpot_rms_rel']:.1%}")
    if "saved" in d:
        out.append(f"  saved: {d['saved']}")
    return "\n".join(out + _warnings(d)) + "\n"


def _warnings(d: dict[str, Any]) -> list[str]:
    return ["", "  warnings:", *(f"  - {w}" for w in d["warnings"])] if d["warnings"] else []
