"""Text for ``servesim plan --gpus``: the deployments ranked by goodput per GPU, and the Pareto front."""

from __future__ import annotations

from typing import Any

__all__ = ["capacity_text"]


def _shape(r: dict[str, Any]) -> str:
    p, d = r["prefill"], r["decode"]
    if r["architecture"] == "colocated":
        return f"{d['workers']} x TP{d['tp']} {d['dtype']}"
    return f"{p['workers']}xTP{p['tp']} -> {d['workers']}xTP{d['tp']} {d['dtype']}"


def _n(x: Any, nd: int = 0) -> str:
    return "-" if x is None else f"{x:,.{nd}f}"


def capacity_text(d: dict[str, Any], top: int = 10) -> str:
    from servesim.render.text import table

    price = (f"${d['usd_per_gpu_hour']:.2f}/GPU-hour ({d['price_source'].split(',')[0]}; source in the "
             "JSON)" if d["usd_per_gpu_hour"] else "no GPU-hour price in the catalog")
    out = [f"CAPACITY PLAN  {d['model']} on up to {d['gpus_budget']} x {d['gpu']}, {d['engine']}, "
           f"{d['isl']}/{d['osl']} tokens",
           f"  SLOs: TTFT <= {d['slo_ttft_ms']:g} ms for {100 * d['attainment']:g}% of requests, "
           f"mean TPOT <= {d['slo_tpot_ms']:g} ms; KV {d['kv_dtype']}; P/D link {d['link']} "
           f"({d['link_GBps']:g} GB/s)",
           f"  {d['searched']} deployments, each at the largest rate it sustains; {price}", ""]
    rows = []
    for i, r in enumerate(d["ranked"][:top], start=1):
        rows.append([str(i), r["architecture"][:5], _shape(r), str(r["gpus"]), _n(r["max_rate_rps"], 2),
                     _n(r["output_throughput_per_gpu"]), _n(r["tokens_per_s_per_user"], 1),
                     _n(r["mean_ttft_ms"]), _n(r["mean_tpot_ms"], 1),
                     "-" if r["speculation"] == "none" else f"{r['speculation']} k={r['speculative_k']}",
                     _n(r["dollars_per_million_output_tokens"], 2) + ("!" if r["hazards"] else "")])
    out.append(table(["#", "arch", "pools", "GPUs", "req/s", "tok/s/GPU", "tok/s/user", "TTFT", "TPOT",
                      "spec", "$/Mtok"], rows))
    if not d["ranked"]:
        out.append("  no deployment meets both SLOs at any rate")
    if any(r["hazards"] for r in d["ranked"][:top]):
        out.append("  ! known hazards (plan --no-hazards leaves these out):")
        out += [f"    {k}: {v}" for k, v in d["hazards"].items()]
    out += ["", "PARETO FRONT  output tok/s per GPU against tok/s per user (each deployment at 1, 1/2, 1/4, "
            "1/8 of its capacity)"]
    rows = [[_n(p["output_throughput_per_gpu"]), _n(p["tokens_per_s_per_user"], 1), _n(p["rate_rps"], 2),
             p["architecture"][:5], _shape(p),
             "-" if p["speculation"] == "none" else p["speculation"]] for p in d["pareto"]]
    out.append(table(["tok/s/GPU", "tok/s/user", "req/s", "arch", "pools", "spec"], rows))
    out.append(f"  model: {d['step_model']}")
    return "\n".join(out) + "\n"
