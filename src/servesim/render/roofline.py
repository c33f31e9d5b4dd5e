"""The text of ``servesim roofline``: where a decode step's time goes, the roofline tables and the
speculation presets, from :func:`servesim.plan.roofline.roofline_summary`'s dict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servesim.render.text import table

__all__ = ["roofline_text"]


def _levels(sizes: Sequence[int]) -> str:
    """Nodes per tree level as '2-2-1', or 'chain' when every level has one node."""
    return "chain" if all(n == 1 for n in sizes) else "-".join(map(str, sizes))


def _g(x: float) -> str:
    """A number in 3-4 significant digits without exponent for everyday sizes."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def roofline_text(d: dict[str, Any]) -> str:
    """The whole text of ``servesim roofline``: the header, the measured view [0] when there is one,
    and sections [1] to [6]."""
    out = _header_lines(d)
    if "measured" in d:
        out += _measured_text(d["measured"])
    out += _hardware_lines(d)
    out += _intensity_lines(d)
    out += _speedup_lines(d)
    out += _turn_off_lines(d)
    out += _utilization_lines(d)
    out += _tree_lines(d)
    return "\n".join(out) + "\n"


def _header_lines(d: dict[str, Any]) -> list[str]:
    """The title (model, GPUs, parallel split, context), the efficiencies assumed and what a step is."""
    a = d["assumptions"]
    tp = d["tp"]
    out: list[str] = []
    par = d.get("parallel") or {}
    if par.get("dp", 1) > 1 or par.get("ep", 1) > 1:
        split = (f"tp {par['tp']} x dp {par['dp']}, ep {par['ep']}; the pure roofline of [1], [2] and [5] "
                 f"splits every weight over the {tp} GPUs")
    else:
        split = f"tp={tp}"
    out.append(f"ROOFLINE: {d['model']} on {tp} x {d['gpu']} ({split}), "
               f"{d['context_tokens']:,} tokens of context")
    out.append(
        f"  efficiency: {a['memory_efficiency']:.0%} of HBM bandwidth, {a['compute_efficiency']:.0%} of "
        f"dense BF16, {a['interconnect_efficiency']:.0%} of GPU-to-GPU links; "
        f"{a['memory_fraction']:.0%} of HBM usable"
    )
    out.append("  a step = weight GEMMs + attention + all-reduces, each max(FLOPs / roof, bytes / roof)")
    out.append("")
    return out


def _hardware_lines(d: dict[str, Any]) -> list[str]:
    """Section [1]: ridge point, weights, KV cache, memory and batch cap, the batch-1 decode step and
    the prefill of one prompt."""
    a, g = d["assumptions"], d["gpu_peaks"]
    bw, fl = g["hbm_bytes_per_s"], g["flops_per_s"]
    tp = d["tp"]
    out: list[str] = []
    out.append("[1] Hardware and model")
    out.append(f"  ridge point     = {fl / 1e12:g}e12 FLOP/s / {bw / 1e12:g}e12 B/s = "
               f"{d['ridge_flops_per_byte']:.0f} FLOP/byte (at the stated efficiencies: "
               f"{d['ridge_effective_flops_per_byte']:.0f})")
    wpp = d["weight_bytes"] / d["params"]
    out.append(
        f"  weights         = {d['params'] / 1e9:g}e9 params x {wpp:g} B = {d['weight_bytes'] / 1e9:.1f} GB, "
        f"{d['weight_bytes_per_gpu'] / 1e9:.1f} GB per GPU"
        + (f" ({d['active_params'] / 1e9:g}e9 active per token)" if d["active_params"] < d["params"] else "")
    )
    out.append(f"  KV cache        = {d['kv_bytes_per_token']:,.0f} B/token ({d['attention'].upper()}), "
               f"split over {d['kv_shards']} of the {tp} GPUs")
    room = d["kv_room_bytes_per_gpu"]
    mem = (f"{a['memory_fraction']:g} x {g['memory_bytes'] / 1e9:.1f} GB - "
           f"{d['weight_bytes_per_gpu'] / 1e9:.1f} GB")
    if d["max_batch"] >= 1:
        out.append(f"  memory          = {mem} = {room / 1e9:.1f} GB of KV room per GPU -> "
                   f"max batch {d['max_batch']:,} at {d['context_tokens']:,} tokens")
    else:
        out.append(f"  memory          = {mem} = {room / 1e9:.1f} GB: DOES NOT FIT (raise --tp)")
    parts = d["decode_step_parts_ms"]
    out.append(f"  decode, batch 1 = {d['decode_step_ms']:.2f} ms ({d['decode_bound']}-bound): weights "
               f"{parts['weights']:.2f} + attention {parts['attention']:.2f} + all-reduce "
               f"{parts['allreduce']:.3f} ms; ~ {d['decode_streamed_bytes_per_gpu'] / 1e9:.2f} GB / "
               f"({bw / 1e12:g} TB/s x {a['memory_efficiency']:g})")
    out.append(f"  prefill         = one {d['context_tokens']:,}-token prompt in {d['prefill_ms']:.1f} ms -> "
               f"{d['prefill_tokens_per_s']:,.0f} tokens/s ({d['prefill_bound']}-bound)")
    return out


def _intensity_lines(d: dict[str, Any]) -> list[str]:
    """Section [2]: the arithmetic intensity of the weight GEMMs, plain and speculative, by batch,
    against the ridge point."""
    wpp = d["weight_bytes"] / d["params"]
    k = d["intensity_k"]
    out: list[str] = []
    out.append("")
    out.append("[2] Arithmetic intensity of the weight GEMMs (FLOP per byte of weights)")
    coef = 2 / wpp  # FLOP per byte per token: 2 FLOPs per weight over its bytes
    times = "B" if coef == 1 else f"{coef:g} B"
    out.append(f"  plain step:       2 FLOPs x B tokens x P weights / ({wpp:g} bytes x P) = {times}")
    out.append(f"  speculative step: each of the B sequences verifies k+1 = {k + 1} positions: {times} (k+1)"
               "   (the rule of thumb B + k counts as if one sequence speculated)")
    out.append(f"  the verify GEMMs cross the ridge ({d['ridge_flops_per_byte']:.0f}) at B = "
               f"{d['ridge_flops_per_byte']:.0f} / ({coef:g} x {k + 1}) = {d['verify_ridge_batch']:.0f};"
               f" plain ones at B = {d['ridge_flops_per_byte'] / coef:.0f}"
               + ("  (MoE: the table counts the experts each batch touches)"
                  if d["active_params"] < d["params"] else ""))
    rows = []
    for r in d["rows"]:
        rows.append([
            str(r["batch"]),
            _g(r["weights_intensity_flops_per_byte"]),
            _g(r["spec_weights_intensity_flops_per_byte"]),
            str(r["seed_spec_intensity_b_plus_k"]),
            f"{d['ridge_flops_per_byte']:.0f}",
            "above" if r["spec_weights_intensity_flops_per_byte"] > d["ridge_flops_per_byte"] else "below",
            _g(r["intensity_flops_per_byte"]),
        ])
    out.append(table(["batch", "plain", f"spec k={k}", "B+k", "ridge", "spec vs ridge", "whole step"],
                     rows))
    out.append("  (whole step: all FLOPs over all HBM bytes, the KV cache included)")
    return out


def _speedup_lines(d: dict[str, Any]) -> list[str]:
    """Section [3]: each preset's speculative speedup and best k by batch, beside the plain step."""
    a = d["assumptions"]
    out: list[str] = []
    names = [p["name"] for p in d["presets"]]
    out.append("")
    out.append("[3] Speedup by batch (best k in parentheses); acceptance alpha from the lab's presets;"
               if not any("acceptance" in p for p in d["presets"]) else
               "[3] Speedup by batch (best k in parentheses); acceptance published per k where a source "
               "measured it on this model ([4] says which), else the lab's presets;")
    out.append(f"    priced by the {a['speculation_priced_by']}, as predict --spec prices it"
               + ("; step ms and tokens/s are its plain step's, u the pure roofline's"
                  if d["rows"] and "priced_step_ms" in d["rows"][0] else ""))
    rows = []
    for r in d["rows"]:
        cells = [str(r["batch"]) + ("" if r["fits_memory"] else "!"),
                 f"{r.get('priced_step_ms', r['decode_step_ms']):.2f}",
                 f"{r.get('priced_tokens_per_s', r['decode_tokens_per_s']):,.0f}", f"{r['u']:.3f}"]
        for n in names:
            s = r["speedup"][n]
            cells.append("n/a" if s is None else f"{s:.2f}x (k={r['best_k'][n]})")
        rows.append(cells)
    out.append(table(["batch", "step ms", "tokens/s", "u", *names], rows))
    if any(not r["fits_memory"] for r in d["rows"]):
        out.append(f"  ! beyond the memory cap of {d['max_batch']:,} sequences at this context")
    return out


def _turn_off_verdict(d: dict[str, Any], p: dict[str, Any]) -> str:
    """Where preset ``p`` stops paying: the batch to turn it off above, or the batches it pays at."""
    off, cap, first = p["turn_off_batch"], p["max_batch_with_draft"], p["pays_from_batch"]
    if off == 0:
        verdict = f"pays at no batch up to {p['batch_limit']:,}"
    elif cap >= 1 and (off is None or off >= cap):
        verdict = f"pays at every batch that fits (memory cap {cap:,})"
        verdict += f"; would turn off above B = {off:,}" if off is not None else ""
    elif off is None:
        verdict = f"pays at every batch up to {p['batch_limit']:,}"
    else:
        verdict = f"turn it off above B = {off:,}"
    if first is not None and first > 1:
        verdict += f"; it pays only from B = {first:,} up"
        if d["active_params"] < d["params"]:
            verdict += " (below, verifying k+1 positions touches more experts than a plain step)"
    return verdict


def _turn_off_lines(d: dict[str, Any]) -> list[str]:
    """Section [4]: per preset, the largest batch at which speculation still pays, and its drafter's
    cost and memory."""
    out: list[str] = []
    out.append("")
    out.append("[4] When to turn it off (the largest batch at which the best k still pays)")
    for p in d["presets"]:
        head = f"  {p['name']:<12}"
        if not p["available"]:
            out.append(f"{head}{p['note']}")
            continue
        cap = p["max_batch_with_draft"]
        verdict = _turn_off_verdict(d, p)
        out.append(f"{head}alpha {p['alpha']:g}: {verdict}" if "acceptance" not in p else
                   f"{head}alpha {p['alpha']:.3g} at k = {p['best_k_batch1']} ({p['acceptance']}): {verdict}")
        draft = f" ({p['draft_model']})" if p["draft_model"] else ""
        out.append(f"  {'':<12}draft{draft}: d = {p['d_batch1']:.4f} (preset {p['seed_d']:g}), "
                   f"c = {p['c_batch1']:.4f} (preset {p['seed_c']:g}) at B = 1; "
                   f"{p['draft_weight_bytes_per_gpu'] / 1e9:.2f} GB/GPU of weights, "
                   f"max batch {p.get('max_batch_without_draft', d['max_batch']):,} -> {cap:,}")
    return out


def _utilization_lines(d: dict[str, Any]) -> list[str]:
    """Section [5]: the lab's utilizations u as decode batches, and where u saturates."""
    out: list[str] = []
    out.append("")
    out.append("[5] The utilization u as a batch (u = compute time / step time of a plain step)")
    parts_u = []
    for m in d["u_to_batch"]:
        parts_u.append(f"u = {m['u']:g} at B = {m['batch']:,.0f}" if m["batch"] is not None
                       else f"u = {m['u']:g} never")
    out.append("  " + "; ".join(parts_u))
    out.append(f"  u saturates at {d['u_max']:.2f}: attention (memory-bound at any batch) and the "
               "all-reduces keep the compute roof partly idle")
    return out


def _tree_lines(d: dict[str, Any]) -> list[str]:
    """Section [6]: chain against tree drafting at equal verify width, and the closing notes on what
    prices which section and what is not modelled."""
    a = d["assumptions"]
    out: list[str] = []
    out.append("")
    out.append("[6] Chain vs tree at equal verify width (batch 1; tree from top-4 candidates, "
               "rank r accepted with alpha (1-alpha)^(r-1))")
    rows = []
    for p in d["presets"]:
        if not p["available"]:
            continue
        t = p["tree_vs_chain"]
        rows.append([p["name"], str(t["width"]), f"{t['chain_expected_tokens']:.2f}",
                     f"{t['chain_speedup']:.2f}x", _levels(t["tree_levels"]),
                     f"{t['tree_expected_tokens']:.2f}", f"{t['tree_speedup']:.2f}x"])
    out.append(table(["preset", "width", "chain E[n]", "chain S", "tree levels", "tree E[n]", "tree S"],
                     rows))
    out.append("")
    out.append("  [3], [4] and [6] are the measured-kernel step model's (its d, c, host time and the")
    out.append("  drafter's memory, as predict --spec prices them); extra host time per draft step:")
    out.append("  --draft-overhead-us.")
    out.append("  not modelled by the pure roofline of [1], [2] and [5] ([0], [3], [4] and [6] include "
               f"them): {a['not_modelled']}")
    return out


def _measured_text(m: dict[str, Any]) -> list[str]:
    """Section [0]: the measured-kernel step model, part by part, beside the speed of light."""
    if not m.get("available"):
        return [f"[0] Measured-kernel step model: not available ({m.get('note', '')})", ""]
    out = [f"[0] Where a decode step's time goes: measured kernels ({m['tables']}),",
           f"    {m['dtype']} weights, {m['kv_dtype']} KV, {m['engine']} host time; "
           f"light = its operations at 100% of the peaks, summed"]
    # A mixture-of-experts model's MoE layers get their own column (out of the GEMMs), and its
    # communication (all-reduce, all-to-all, DP gather) one column: where the time goes by kind.
    moe = any(r.get("moe_ms", 0.0) > 0 for r in m["rows"])
    rows = []
    for r in m["rows"]:
        gemm = [f"{r['gemm_ms'] - r['moe_ms']:.2f}", f"{r['moe_ms']:.2f}"] if moe else [f"{r['gemm_ms']:.2f}"]
        rows.append([str(r["batch"]) + ("" if r["fits_memory"] else "!"), f"{r['total_ms']:.2f}",
                     *gemm, f"{r['attention_ms']:.2f}", f"{r['allreduce_ms']:.2f}",
                     f"{r['other_ms']:.2f}", f"{r['host_ms']:.2f}", f"{r['speed_of_light_ms']:.2f}",
                     f"{r['tokens_per_s']:,.0f}", "yes" if r["measured"] else "part*"])
    head = ["batch", "step ms", *(["GEMM", "MoE"] if moe else ["GEMM"]), "attn", "comm" if moe else "allred",
            "other", "host", "light", "tok/s", "measured"]
    out.append(table(head, rows))
    if moe:
        out.append("  GEMM: attention projections, MLA matmuls, dense layers, LM head; MoE: the experts and")
        out.append("  router (shared experts beside them); comm: all-reduce and the expert/data-parallel "
                   "exchange")
    # One line per kind of fallback: the shape it was scaled from differs by batch.
    notes = list(dict.fromkeys(n.split(": measured (")[0] for r in m["rows"] for n in r["notes"]))
    for n in notes[:3]:
        out.append(f"  * outside the tables: {n}; priced as the nearest measured shape scaled by the "
                   "roofline at the tables' fitted efficiencies")
    if len(notes) > 3:
        out.append(f"  * and {len(notes) - 3} more fallbacks (--format json lists them)")
    p = m["prefill"]
    out.append(f"  prefill of {p['tokens']:,.0f} tokens: {p['total_ms']:.1f} ms "
               f"({p['tokens'] / p['total_ms'] * 1e3:,.0f} tok/s; "
               f"speed of light {p['speed_of_light_ms']:.1f} ms)")
    if any(not r["fits_memory"] for r in m["rows"]):
        out.append(f"  ! beyond the KV-cache limit of {m['max_batch']:,} sequences at this context")
    ops = m.get("operations") or {}
    if ops:
        batches = list(ops)
        out.append(f"  by operation (ms per step at batch {' and '.join(batches)}; light = the same "
                   "operation at 100% of the peaks):")
        names = list(dict.fromkeys(r["name"] for b in batches for r in ops[b]))
        got = {b: {r["name"]: r for r in ops[b]} for b in batches}
        rows2 = []
        for name in names:
            first = next(got[b][name] for b in batches if name in got[b])
            cells = [name, first["kind"], f"{first['count']:.0f}"]
            for b in batches:
                r = got[b].get(name)
                cells += ["-", "-"] if r is None else [f"{r['ms']:.3f}", f"{r['light_ms']:.3f}"]
            rows2.append(cells)
        head = ["operation", "kind", "count"]
        for b in batches:
            head += [f"B={b} ms", "light"]
        out.append(table(head, rows2))
    out.append("")
    return out
