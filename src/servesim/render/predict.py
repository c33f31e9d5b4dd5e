"""Text for ``servesim predict``: one prediction, a points file, a comparison with a measured run."""

from __future__ import annotations

from typing import Any

from servesim.render.capacity import split_label

__all__ = ["compare_text", "engine_sim_text", "points_text", "predict_disagg_text", "predict_text"]


def engine_sim_text(d: dict[str, Any]) -> str:
    cf = d["closed_form"]
    shape = (f"{d['replicas']} colocated replica(s)" if d["mode"] == "agg" else
             f"{d['prefill_workers']} prefill + {d['decode_workers']} decode workers")
    load = (f"trace {d['trace']}: {d['requests']:,} requests at {d['rate']:.3g} req/s, mean "
            f"{d['isl']}/{d['osl']} tokens" + (f" ({d['dropped']} longer than the KV cache left out)"
                                               if d.get("dropped") else "")
            if "trace" in d else f"Poisson {d['rate']:g} req/s of {d['isl']}/{d['osl']} tokens")
    lines = [f"SIMULATE (engine)  {d['model']} on {d['gpus']} x {d['gpu']}, {shape}; {load}, "
             f"{d['completed']:,} requests (seed {d['seed']})",
             f"  {'':<22}{'simulated':>12}{'closed form':>13}",
             f"  {'mean TTFT ms':<22}{_f(d['mean_ttft_ms']):>12}{_f(cf['mean_ttft_ms']):>13}",
             f"  {'p99 TTFT ms':<22}{_f(d['p99_ttft_ms']):>12}{_f(cf['p99_ttft_ms']):>13}",
             f"  {'mean TPOT ms':<22}{_f(d['mean_tpot_ms'], 2):>12}{_f(cf['mean_tpot_ms'], 2):>13}",
             f"  {'decode batch':<22}{_f(d['decode_batch']):>12}{_f(cf['decode_batch']):>13}",
             f"  output {_f(d['output_throughput'])} tok/s (simulated"
             + ("; its speed, sim_requests_per_s, is in the JSON)" if "sim_requests_per_s" in d else ")")]
    gaps = [f"{name} {100 * (cf[key] - d[key]) / d[key]:+.0f}%" for name, key in
            (("mean TTFT", "mean_ttft_ms"), ("mean TPOT", "mean_tpot_ms"))
            if cf.get("stable") and cf.get(key) and d.get(key)]
    if gaps:
        lines.append(f"  the closed form is off the engine loop (the reference) by {', '.join(gaps)}")
    if not cf["stable"]:
        lines.append(f"  the closed form calls this rate unstable ({cf['reason']}): "
                     "the finite run's queue grows")
    return "\n".join(lines) + "\n"


def _split(d: dict[str, Any]) -> str:
    """How an MoE replica splits its GPUs, where it is more than tensor parallel."""
    dp, ep = d.get("dp", 1), d.get("ep", 1)
    if dp == 1 and ep == 1:
        return ""
    return f" (tp {d['tp']} x dp {dp}, ep {ep})"


def _load(d: dict[str, Any]) -> str:
    """The client's run in words: requests, lengths as drawn, arrivals."""
    r = d.get("random_range_ratio") or 0.0
    lengths = (f"{d['isl']} prompt + {d['osl']} output tokens" if not r else
               f"~{d['isl']} prompt + ~{d['osl']} output tokens (range ratio {r:g})")
    rate = d.get("request_rate")
    conc = d.get("concurrency")
    if rate in (None, "inf"):
        load = f"{conc} concurrent clients" if conc is not None else "all at once"
    else:
        burst = d.get("burstiness", 1.0)
        load = f"{rate:g} req/s" + ("" if burst == 1.0 else f" (burstiness {burst:g})")
        load += f", at most {conc} in flight" if conc is not None else ""
    warm = f", {d['num_warmups']} warm-ups first" if d.get("num_warmups") else ""
    return f"{d['num_prompts']} requests of {lengths}, {load}{warm} ({d['client']} client)"


def _completed(d: dict[str, Any]) -> str:
    """``3.100 req/s``, and for a rate-driven run ``3.100 req/s completed over the 161 s run (offered
    4 req/s)``: what a benchmark client reports (requests done over the run, the drain after the last
    arrival included), which a short run keeps below the offered rate a stable deployment sustains."""
    done = f"{_f(d['request_throughput'], 3)} req/s"
    rate, dur = d.get("request_rate"), d.get("duration")
    if rate in (None, "inf") or not isinstance(dur, (int, float)) or not dur > 0:
        return done
    return f"{done} completed over the {dur:,.0f} s run (offered {rate:g} req/s)"


def _scheduler(d: dict[str, Any]) -> str:
    """The engine's scheduler and the defaults it ran with."""
    s = dict(d.get("scheduler") or {})
    name = s.pop("scheduler", d.get("engine", ""))
    parts = [f"token budget {s.pop('token_budget', d.get('max_num_batched_tokens'))}",
             f"at most {s.pop('max_running', d.get('max_num_seqs'))} running",
             "overlap scheduler" if s.pop("overlap", False) else "host time between steps"]
    parts += [f"{k} {v}" for k, v in s.items() if k not in ("init_new_token_ratio", "min_new_token_ratio",
                                                          "new_token_ratio_decay", "clip_max_new_tokens")
              and not (k == "scheduler_recv_interval" and v == 1)
              and not (k.startswith("attention_dp_") and not s.get("attention_dp_balance"))
              and not (k.startswith("batch_wait_") and not s.get("batch_wait_timeout_iters"))]
    version = f" {d['engine_version']}" if d.get("engine_version") else ""
    return f"{name}{version}: " + ", ".join(parts)


def _pool(p: dict[str, Any]) -> str:
    """A pool's shape: ``2 x TP8`` or ``1 x TP1 DP8 EP8``."""
    return f"{p['workers']} x {split_label(p, ' ')}"


def _running_cap(pool: dict[str, Any]) -> str:
    """`` (at most N running)``: a decode worker's running limit (its engine's max_num_seqs over its
    attention-DP ranks), where the scheduler reports it."""
    cap = (pool.get("scheduler") or {}).get("max_running")
    return f" (at most {cap:,} running)" if isinstance(cap, int) else ""


def predict_disagg_text(d: dict[str, Any]) -> str:
    p, q = d["prefill"], d["decode"]
    if d.get("num_prompts") is not None:
        load = f"benchmark: {_load(d)}"
    else:
        load = (f"{d['isl']} prompt + {d['osl']} output tokens, "
                + (f"{d['concurrency']} concurrent clients" if d.get("concurrency") is not None
                   else f"{d['request_rate']:g} req/s" if isinstance(d.get("request_rate"), (int, float))
                   else "every request at once"))
    lines = [f"PREDICT (disaggregated)  {d['model']} on {d['gpu']}: prefill {_pool(p)} -> decode {_pool(q)} "
             f"({d['gpus']} GPUs, {q['dtype']}, {d['kv_dtype']} KV), {d['engine']}, "
             f"link {d['link_GBps']:g} GB/s",
             f"  {load}"]
    if not d["stable"]:
        lines.append(f"  unstable: {d['unstable_reason']} (goodput 0)")
    else:
        lines += [
            f"  TTFT   mean {_f(d['mean_ttft_ms'])} ms   median {_f(d['median_ttft_ms'])} ms   "
            f"p99 {_f(d['p99_ttft_ms'])} ms",
            f"         prefill wait {_f(d['mean_prefill_wait_ms'])} ms, KV transfer "
            f"{_f(d['mean_kv_transfer_ms'], 2)} ms, decode admission {_f(d['mean_decode_wait_ms'])} ms "
            "(means)",
            f"  TPOT   mean {_f(d['mean_tpot_ms'], 2)} ms   p99 {_f(d['p99_tpot_ms'], 2)} ms",
            f"  output {_f(d['output_throughput'])} tok/s ({_f(d['output_throughput_per_gpu'])} per GPU), "
            f"{_completed(d)}",
            f"  decode batch {_f(d['decode_batch'])} per decode worker{_running_cap(q)}; prefill pool "
            f"{100 * d['prefill_utilization']:.0f}% busy",
            *_interval(d),
        ]
        cf = d.get("closed_form")
        if cf and cf.get("stable"):
            lines.append(f"  closed form at this rate: TTFT {_f(cf['mean_ttft_ms'])} ms, TPOT "
                         f"{_f(cf['mean_tpot_ms'], 2)} ms")
    if "speculation" in d:  # the decode pool's
        lines += _speculation_lines(d["speculation"])
    lines.append(f"  model: {d['step_model']}")
    lines += [f"  note: {n}" for n in d.get("notes", [])[:5]]
    return "\n".join(lines) + "\n"


def _interval(d: dict[str, Any]) -> list[str]:
    """One line: the prediction interval of TTFT, TPOT and output throughput (plan/interval.py)."""
    pi = d.get("prediction_interval") or {}
    shown = (("mean_ttft_ms", "TTFT", 1, " ms"), ("mean_tpot_ms", "TPOT", 2, " ms"),
             ("output_throughput", "output", 0, " tok/s"))
    parts = [f"{name} {_f(pi[key][0], nd)}-{_f(pi[key][1], nd)}{unit}" for key, name, nd, unit in shown
             if pi.get(key)]
    if not parts:
        return []
    wide = ", widened: a roofline price" if "widened" in pi.get("basis", "") else ""
    return [f"  {100 * pi['level']:g}% interval (out-of-sample errors of published runs{wide}): "
            + ", ".join(parts)]


def _f(x: object, nd: int = 1) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        if x != x:
            return "n/a"
        if x == float("inf"):
            return "inf"
        return f"{x:,.{nd}f}"
    return str(x)


def predict_text(d: dict[str, Any]) -> str:
    lines = [
        f"PREDICT  {d['model']} on {d.get('gpus', d['tp'])} x {d['gpu']}{_split(d)} ({d['dtype']} weights, "
        f"{d['kv_dtype']} KV), {d['engine']}",
        *([f"  UNSTABLE at this rate: {d.get('unstable_reason', '')}; the times of a finite run are not "
           "shown (goodput 0)"] if not d.get("stable", True) else []),
        f"  benchmark: {_load(d)}",
        f"  scheduler: {_scheduler(d)}",
        "",
        f"  TTFT   mean {_f(d['mean_ttft_ms'])} ms   p99 {_f(d['p99_ttft_ms'])} ms",
        f"  TPOT   mean {_f(d['mean_tpot_ms'], 2)} ms   ITL mean {_f(d['mean_itl_ms'], 2)} ms",
        f"  output {_f(d['output_throughput'])} tok/s ({_f(d['output_throughput_per_gpu'])} per GPU), "
        f"{_completed(d)}",
        *_interval(d),
        f"  decode batch {_f(d['decode_batch'])} (time mean); the KV cache holds {d['kv_capacity_tokens']:,} "
        f"tokens: at most {d['kv_max_requests']} requests of {d['isl'] + d['osl']} tokens",
    ]
    if d.get("above_kv_limit"):
        lines.append(f"  above that: {d['above_kv_limit']} "
                     f"({d['preemptions']} preemptions in this run)")
    st = d["step_at_batch"]
    moe = st.get("moe_ms", 0.0) or 0.0
    gemm = (f"GEMM {_f(st['gemm_ms'] - moe, 2)} + MoE {_f(moe, 2)}" if moe > 0
            else f"GEMM {_f(st['gemm_ms'], 2)}")
    lines += [
        "",
        f"  one decode step at that batch: {_f(st['total_ms'], 2)} ms = {gemm}"
        f" + attention {_f(st['attention_ms'], 2)} + {'communication' if moe > 0 else 'all-reduce'} "
        f"{_f(st['allreduce_ms'], 2)}",
        f"    + other kernels {_f(st['other_ms'], 2)} + host {_f(st['host_ms'], 2)} ms "
        f"(speed of light {_f(st['speed_of_light_ms'], 2)} ms); batch 1: {_f(d['batch1_step_ms'], 2)} ms",
    ]
    if "speculation" in d:
        lines += _speculation_lines(d["speculation"])
    lines.append(f"  step model: {d['step_model']}")
    lines += [f"  note: {n}" for n in d.get("notes", [])[:5]]
    return "\n".join(lines) + "\n"


def _speculation_lines(s: dict[str, Any]) -> list[str]:
    """The speculation of a prediction (colocated, or a disaggregated run's decode pool): its setting
    and figures at the batch it was priced at (the run's decode batch, rounded as that is), the
    speedup by running batch and the turn-off batch every command shares
    (:func:`servesim.hardware.speculation.turn_off_batch`)."""
    tr = s.get("tree")
    shape = (f"SGLang tree of {tr['steps']} steps x top-{tr['topk']}, {tr['draft_tokens']} tokens "
             f"verified (as a chain: k={s['k']}, alpha" if tr else f"k={s['k']}, alpha")
    x = s["speedup_at_batch"]
    lines = [f"  speculation {s['preset']}: {shape} {s['alpha']:.3f}{')' if tr else ''} (acceptance length "
             f"{s.get('acceptance_length', 0):.2f}; {s.get('acceptance', 'preset')}), d {s['d']:.3f}, "
             f"c {s['c']:.3f} at batch {_f(float(s['batch']))}: {x:.2f}x per step"
             + ("" if x > 1.0 else " (does not pay at this batch)")]
    if s.get("draft_note"):
        lines.append(f"    {s['draft_note']}")
    curve = s.get("speedup_by_batch") or []
    if curve:
        pts = ", ".join(f"{c['batch']:g}: {c['speedup']:.2f}x" for c in curve)
        lines.append(f"    speedup by running batch: {pts}; {_turn_off(s)}")
    if s.get("overlap"):
        lines.append(f"    overlap scheduler {s['overlap']}")
    return lines


def _turn_off(s: dict[str, Any]) -> str:
    """Where speculation stops paying: the largest batch it pays at, against the batch that fits."""
    if "turn_off_batch" not in s:  # a saved prediction from before the shared turn-off
        off = s.get("stops_paying_at_batch")
        return f"stops paying at batch {off:g}" if off else "pays at every batch that fits"
    t, fits = s["turn_off_batch"], int(s.get("fits_batch") or 1)
    if t == 0:
        return "pays at no batch: turn it off"
    if t is None or t >= fits:
        return f"pays at every batch that fits (up to {fits:,})"
    return f"stops paying above batch {t:,}: turn it off there"


def points_text(rows: list[dict[str, Any]]) -> str:
    head = f"{'#':>4} {'model':<28} {'gpu':<9} {'tp':>2} {'dt':<9} {'isl/osl':>11} {'conc':>5} " \
           f"{'TTFT ms':>9} {'TPOT ms':>8} {'tok/s':>9}"
    out = [head]
    for i, r in enumerate(rows, start=1):
        if "error" in r:
            out.append(f"{i:>4} error: {r['error']}")
            continue
        conc = r.get("concurrency")
        if conc is None:
            rate = r.get("request_rate")
            conc = f"@{rate:g}" if isinstance(rate, (int, float)) else "all"
        tp = r["tp"] if r.get("mode") != "disagg" else "PD"
        dtype = r["dtype"] if r.get("mode") != "disagg" else r["decode"]["dtype"]
        out.append(f"{i:>4} {r['model'][:28]:<28} {r['gpu'][:9]:<9} {tp:>2} {dtype:<9} "
                   f"{str(r['isl']) + '/' + str(r['osl']):>11} {conc!s:>5} {_f(r['mean_ttft_ms']):>9} "
                   f"{_f(r['mean_tpot_ms'], 2):>8} {_f(r['output_throughput'], 0):>9}")
    return "\n".join(out) + "\n"


def compare_text(d: dict[str, Any]) -> str:
    p = d["prediction"]
    if p.get("mode") == "disagg":
        shape = (f"{p['gpu']}, prefill {_pool(p['prefill'])} -> decode {_pool(p['decode'])} "
                 f"({p['decode']['dtype']})")
    else:
        shape = f"{p.get('gpus', p['tp'])} x {p['gpu']}{_split(p)} ({p['dtype']})"
    rate = p.get("request_rate")
    load = (f"concurrency {p['concurrency']}" if p.get("concurrency") is not None
            else f"{rate:g} req/s" if isinstance(rate, (int, float)) else "every request at once")
    pi = p.get("prediction_interval") or {}
    level = f"{100 * pi['level']:g}% interval" if pi else "interval"
    how = d.get("assumed") or {}
    why = f" (engine: {how['engine']}; client: {how['client']})" if how else ""
    out = [f"COMPARE  {d['result_file']}: {p['model']} on {shape}, {p['isl']}/{p['osl']} tokens, {load}",
           f"  assumed: engine {p.get('engine', '?')}, client {p.get('client', '?')}{why}"]
    if d.get("read"):
        out.append("  from the file: " + ", ".join(f"{k} {v}" for k, v in d["read"].items()))
    out += [f"  note: {n}" for n in d.get("notes", ())]
    out.append(f"  {'metric':<20} {'predicted':>12} {'measured':>12} {'error':>8}  {level}: verdict")
    for r in d["comparison"]:
        err = "n/a" if r["relative_error"] is None else f"{100 * r['relative_error']:+.1f}%"
        verdict = (f"  {_f(r['interval'][0], 2)}-{_f(r['interval'][1], 2)}: {r['verdict']}"
                   if r.get("interval") else f"  {r['verdict']}" if r.get("verdict") else "")
        out.append(f"  {r['metric']:<20} {_f(r['predicted'], 2):>12} {_f(r['measured'], 2):>12} {err:>8}"
                   + verdict)
    if not d["comparison"]:
        out.append("  (the result file has none of the predicted metrics)")
    out += [f"  likely cause: {c}" for c in d.get("likely_causes", ())]
    return "\n".join(out) + "\n"
