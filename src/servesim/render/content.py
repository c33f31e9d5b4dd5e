"""What the report says: the question, the recommendation, the tables, the figures, the caveats."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from servesim.render.report import Block
from servesim.render.text import fmt, mix_rows, ranked_rows, sensitivity_lines

__all__ = ["CAVEATS", "report_blocks"]

CAVEATS: tuple[tuple[str, str], ...] = (
    ("i.i.d. acceptance",
     "Each draft is accepted independently with probability alpha. Real acceptance is bursty and "
     "position-dependent, so real E[n] is lower at the same average alpha: the speedups are optimistic."),
    ("The utilization gate",
     "1 / (1 - u) is a monotone stand-in for the scheduler and roofline; the direction is right, the "
     "knee must be measured."),
    ("Poisson arrivals, exponential service, one prompt length",
     "Real arrivals are burstier than Poisson and prefill times are nearly deterministic per prompt "
     "length; TTFT tails come from the mix of lengths, which the closed form collapses to one."),
    ("Mean TPOT instead of a distribution",
     "TPOT is deterministic in the closed form; a p99 TPOT SLO interacts with interference differently."),
    ("Free KV-transfer machinery",
     "The whole cache is sent after prefill with no overlap and no transfer-engine cost; layer-by-layer "
     "streaming can hide most of it, contention on a shared link can add to it."),
    ("No decode-side queueing",
     "A decode pool is stable iff lambda x O < nodes x R_d; slot limits and admission control are absent."),
    ("No scheduling effects",
     "Continuous batching, preemption, prefix-cache hits, draft-model memory pressure and pipeline "
     "bubbles are not modelled."),
)


def _g4(x: float | None) -> str:
    return f"{x:.4g}" if x is not None else "-"


def report_blocks(
    req: Any,
    plan: dict[str, Any],
    dis: dict[str, Any],
    spec: dict[str, Any],
    curves: Mapping[str, Any],
    *,
    command: str,
    biases: list[dict[str, Any]] | None = None,  # the bias rows of validate_summary
    ttft_png: bytes | None = None,
) -> list[Block]:
    """Assemble the report from the plan, disagg and specdec summaries; ``curves`` holds the ``plan``,
    ``disagg`` and ``specdec`` figures' curves (:mod:`servesim.plan.figures`), drawn here."""
    from servesim.render.figures import disagg_figure, plan_figure, specdec_figure
    from servesim.render.plots import png_bytes

    wl = req.workload
    r = plan["recommendation"]
    b: list[Block] = [Block("h1", f"Deployment report: {plan['preset']} traffic on {req.nodes} nodes")]
    b.append(Block("h2", "The question"))
    b.append(Block("p", plan["question"]))

    b.append(Block("h2", "Recommendation"))
    b.append(Block("p", f"Deploy {r['label']}."))
    fleet = plan["smallest_fleet"]
    b.append(Block("ul", items=(
        f"Goodput {r['goodput_rps']:.3f} req/s of {wl.rate_per_s:g} offered "
        f"({r['goodput_per_gpu']:.3f} per GPU); {r['attainment']:.2%} of requests meet both SLOs.",
        f"Mean TTFT {fmt(r['ttft_ms'], '.0f')} ms (SLO {wl.slo_ttft_s * 1e3:g} ms); "
        f"TPOT {r['tpot_ms']:.1f} ms (SLO {wl.slo_tpot_s * 1e3:g} ms).",
        f"Binding constraint: {r['binding_constraint']}.",
        (f"Smallest fleet that meets the {req.attainment_target:.0%} target at this rate: {fleet} nodes."
         if fleet is not None else "No fleet up to 256 nodes meets the target at this rate."),
    )))

    b.append(Block("h2", "Ranked deployments"))
    b.append(Block("table", headers=("#", "deployment", "goodput (req/s)", "per GPU", "attainment",
                                     "TTFT (ms)", "TPOT (ms)", "binding constraint"),
                   rows=tuple(tuple(r) for r in ranked_rows(plan))))
    if plan["sensitivity"]:
        b.append(Block("h2", "How robust is the choice?"))
        b.append(Block("ul", items=tuple(line.strip() for line in sensitivity_lines(plan))))
    b.append(Block("img", f"Goodput vs arrival rate: colocated and the best split without speculation, and "
                          f"the recommended deployment ({r['label']}), at the planned rate",
                   name="goodput_vs_rate.png",
                   png=png_bytes(plan_figure(curves["plan"]))))

    b.append(Block("h2", "Colocated vs disaggregated, by prompt/output mix"))
    headers: tuple[str, ...] = ("mix", "P/O tokens", "colocated TTFT", "colocated TPOT", "colocated goodput",
                                "best split", "split TTFT", "split TPOT", "split goodput", "winner")
    rows = [tuple(r) for r in mix_rows(dis)]
    if all("with_speculation" in r for r in dis["rows"]):  # the plan weighs speculation: so does this table
        headers += ("best with speculation considered", "its goodput")
        rows = [(*r, x["with_speculation"]["label"], f"{x['with_speculation']['goodput_rps']:.3f}")
                for r, x in zip(rows, dis["rows"], strict=True)]
    b.append(Block("table", headers=headers, rows=tuple(rows)))
    kv_header = f"KV transfer of a {wl.prompt_tokens}-token prompt (ms)"
    b.append(Block("table", headers=("link", "GB/s", kv_header),
                   rows=tuple((k["link"], f"{k['GBps']:g}", f"{k['transfer_ms']:.1f}")
                              for k in dis["kv_transfer"])))
    xo = dis["crossover_link_GBps"]
    b.append(Block("p", (
        f"Disaggregation strictly beats colocation when the link is at least {xo:g} GB/s "
        f"(exact break-even {dis['crossover_exact_GBps']:.3f} GB/s)."
        if xo is not None else
        "At no link bandwidth does the best split serve more goodput than colocation.")))
    b.append(Block("img", f"Goodput vs arrival rate and vs link bandwidth, at {wl.rate_per_s:g} req/s over "
                          f"{req.link.name} (marked), with the crossover", name="disaggregation.png",
                   png=png_bytes(disagg_figure(curves["disagg"]))))
    if ttft_png is not None:
        b.append(Block("img", "Simulated TTFT, cumulative distribution: the SLO (dashed) and the fraction of "
                              "requests within it (marked)", name="ttft_distribution.png", png=ttft_png))

    b.append(Block("h2", "Speculative decoding"))
    if plan["assumptions"].get("speculation_priced_on") == "model":
        b.append(Block("p", "The ranked deployments above price speculation on the model as predict --spec "
                            f"does: {plan['assumptions']['speculation']}. The presets below are the lab's "
                            "illustrations, not measurements of this model."))
    b.append(Block("table", headers=("preset", "alpha", "d", "c", "best k (u=0)", "speedup (u=0)",
                                     "best k (u=0.7)", "speedup (u=0.7)", "turn off above u"),
                   rows=tuple((p["name"], f"{p['alpha']:g}", f"{p['d']:g}", f"{p['c']:g}",
                               str(p["best_k_u0"]), f"{p['speedup_u0']:.2f}", str(p["best_k_u07"]),
                               f"{p['speedup_u07']:.2f}", f"{p['turn_off_u']:.3f}")
                              for p in spec["presets"])))
    b.append(Block("img", "Speedup over alpha and k (optimal k marked) and the utilization sweep",
                   name="speculative.png", png=png_bytes(specdec_figure(curves["specdec"]))))

    b.append(Block("h2", "Assumptions and caveats"))
    b.append(Block("p", "Every figure above is a closed form under these assumptions (the lab's "
                   "'model vs reality' list)."))
    b.append(Block("ul", items=tuple(f"{name}: {text}" for name, text in CAVEATS)))
    if biases:
        b.append(Block("p", "Measured by the simulator (servesim validate): how far each assumption moves "
                            "the headline figures."))
        bias_headers = ("assumption", "relaxed as", "case", "figure", "closed form", "simulated, relaxed",
                        "change (95% CI)")
        bias_rows = tuple(
            (b["assumption"], b["relaxation"], b["case"], b["figure"], _g4(b["closed_form"]),
             _g4(b["sim_relaxed"]),
             f"{b['change']:+.4g} +- {b['change_ci95']:.2g}" if b["change"] is not None else "-")
            for b in biases
        )
        b.append(Block("table", headers=bias_headers, rows=bias_rows))
    b.append(Block("h2", "Reproduce"))
    b.append(Block("p", f"Generated by: {command}"))
    return b
