"""Text for ``servesim plan --gpus``: the deployments ranked by goodput per GPU, and the Pareto front."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servesim.render import text as texts
from servesim.render.formats import wrap_long_lines
from servesim.render.report import Block
from servesim.render.text import table

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["capacity_report_blocks", "capacity_text", "pareto_figure", "plot_pareto", "split_label"]


def split_label(x: dict[str, Any], sep: str = "") -> str:
    """A pool's split: ``TP8``, ``TP1DP8EP8`` (``sep`` between the parts)."""
    parts = [f"TP{x['tp']}"]
    if x.get("dp", 1) > 1:
        parts.append(f"DP{x['dp']}")
    if x.get("ep", 1) > 1:
        parts.append(f"EP{x['ep']}")
    return sep.join(parts)


def _shape(r: dict[str, Any], with_gpu: bool = False, budget: bool | None = False) -> str:
    """A deployment's pools; ``budget`` adds its step token budget (where rows differ only in it; a
    budget other than the engine's default is shown unless ``budget`` is None: none is)."""
    if with_gpu:
        return f"{r['gpu']}: {_shape(r, budget=budget)}"
    p, d = r["prefill"], r["decode"]
    split = split_label

    odd = budget is not None and not r.get("budget_is_default", True)
    # (a disaggregated row's pools run one budget, the engine's unless it ran prompts whole)
    shown = odd or (budget and r["architecture"] == "colocated")
    tail = f" b{r['max_num_batched_tokens']}" if shown and r.get("max_num_batched_tokens") else ""
    if r["architecture"] == "colocated":
        return f"{d['workers']} x {split(d)} {d['dtype']}{tail}"
    if p["dtype"] == d["dtype"]:
        return f"{p['workers']}x{split(p)} -> {d['workers']}x{split(d)} {d['dtype']}{tail}"
    return f"{p['workers']}x{split(p)} {p['dtype']} -> {d['workers']}x{split(d)} {d['dtype']}{tail}"


def _ranks(xs: list[int]) -> str:
    """1, 2, 3, 5 -> '1-3, 5'."""
    parts: list[str] = []
    start = prev = xs[0]
    for x in [*xs[1:], None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ", ".join(parts)


def _n(x: float | None, nd: int = 0) -> str:
    return "-" if x is None else f"{x:,.{nd}f}"


def capacity_text(d: dict[str, Any], top: int = 10) -> str:
    if isinstance(d["usd_per_gpu_hour"], dict):  # several GPU types
        price = "$/GPU-hour " + ", ".join(f"{g} {v:.2f}" for g, v in d["usd_per_gpu_hour"].items() if v)
    else:
        price = (f"${d['usd_per_gpu_hour']:.2f}/GPU-hour ({d['price_source'].split(',')[0]}; source in the "
                 "JSON)" if d["usd_per_gpu_hour"] else "no GPU-hour price in the catalog")
    goal = (f"the fewest GPUs for {d['target_rate_rps']:g} req/s (up to {d['gpus_budget']})"
            if d.get("target_rate_rps") else f"up to {d['gpus_budget']}")
    confirmed = bool(d.get("confirmed"))
    if d.get("target_rate_rps"):
        how = (", ranked by GPUs; req/s is each one's capacity" + (", TTFT and TPOT there" if confirmed else
                                                                  ", TTFT and TPOT at the target"))
    elif d["ranked"] and d["ranked"][0].get("headroom"):
        how = (f", each planned at {100 * d['ranked'][0]['headroom']:g}% of the largest rate it holds at "
               "steady state (cap)")
    elif confirmed:
        how = ", each at the largest rate it holds at steady state"
    else:
        how = ", each at the largest rate it sustains"
    off = d.get("speculation_off", 0)
    failed = d.get("engine_tried", 0) - d.get("confirmed", 0) - off
    if confirmed and (failed > 0 or off):
        how = (f" screened; of the best {d['engine_tried']} run through the engine model, {d['confirmed']} "
               f"confirmed" + (f", {failed} sustain no rate that meets the SLOs there" if failed > 0 else "")
               + (f", {off} speculative left out (no faster than without it)" if off else "") + how)
    elif confirmed:
        how = f" screened; the best {d['confirmed']} confirmed by the engine model{how}"
    out = [f"CAPACITY PLAN  {d['model']} on {goal} x {d['gpu']}, {d['engine']}, "
           f"{d['isl']}/{d['osl']} tokens",
           f"  SLOs: TTFT <= {d['slo_ttft_ms']:g} ms for {100 * d['attainment']:g}% of requests, "
           f"mean TPOT <= {d['slo_tpot_ms']:g} ms; KV {d['kv_dtype']}; P/D link {d['link']} "
           f"({d['link_GBps']:g} GB/s)",
           f"  {d['searched']} deployment{'' if d['searched'] == 1 else 's'}{how}; {price}", ""]
    several = "," in d["gpu"]
    shown = d["ranked"][:top]
    labels = [_shape(r, several, None) for r in shown]
    budget = len(set(labels)) < len(labels)  # rows alike but for the step budget: show it
    headers, rows, keep = _ranked_table(shown, several, budget)
    if d.get("customer_rate_rps") is not None:
        out.append(f"  load: your {d['customer_rate_rps']:g} req/s as a share of each deployment's capacity "
                   "(over 100%: it does not hold your rate)")
    out.append(table(headers, rows, keep=keep))
    same = [i + 1 for i, r in enumerate(shown) if r.get("indistinguishable_from_best")]
    if len(same) > 1:
        level = shown[0].get("prediction_interval", {}).get("level", 0.8)
        out.append(f"  rows {_ranks(same)} are indistinguishable from row 1 on tok/s/GPU: their "
                   f"{100 * level:g}% prediction intervals overlap (the order among them is the point "
                   "figures' only)")
    if not d["ranked"]:
        out.append(f"  {d['fits_none']}" if d.get("fits_none") else
                   "  no deployment meets both SLOs at any rate")
    if d.get("speculation_off"):
        n = d["speculation_off"]
        out.append(f"  speculation off: {n} speculative deployment{'s' if n > 1 else ''} confirmed no faster "
                   "than the same without speculation at the load it sustains, left out")
    if any(r["hazards"] for r in d["ranked"][:top]):
        out.append("  ! known hazards, on the rows ranked 1!, 2!, ... (plan --no-hazards leaves these out):")
        out += [f"    {k}: {v}" for k, v in d["hazards"].items()]
    out += ["", "PARETO FRONT  output tok/s per GPU against tok/s per user (each deployment at 1, 1/2, 1/4, "
            "1/8 of its capacity)"]
    rows = [[_n(p["output_throughput_per_gpu"]), _n(p["tokens_per_s_per_user"], 1), _n(p["rate_rps"], 2),
             p["architecture"][:5], _shape(p, several, budget),
             "-" if p["speculation"] == "none" else p["speculation"]] for p in d["pareto"]]
    out.append(table(["tok/s/GPU", "tok/s/user", "req/s", "arch", "pools", "spec"], rows))
    out.append(f"  model: {d['step_model']}")
    return _wrapped("\n".join(out)) + "\n"


def _wrapped(text: str) -> str:
    """On a terminal (:data:`servesim.render.text.WIDTH` set), each line longer than the terminal
    wrapped at its words, the continuation indented two more spaces (the tables already fit); else
    ``text`` as it is (files and pipes stay byte-stable)."""
    width = texts.WIDTH
    if width is None:
        return text
    return wrap_long_lines(text, width, break_long_words=True)


def _ranked_table(shown: list[dict[str, Any]], several: bool, budget: bool
                  ) -> tuple[list[str], list[list[str]], tuple[int, ...]]:
    """The ranked table's headers, cells and the columns it keeps at any width: the rank (``!``: a
    known hazard), the deployment (the pools say colocated ``4 x TP2`` or disaggregated ``2xTP2 ->
    1xTP4``), its rate, the capacity and your rate's share of it where asked, throughput, TTFT, TPOT
    and speculation; tok/s/user (1 / TPOT), $/Mtok, the capacity beside a planned rate and the GPU count
    are left out first on a narrow terminal, so that the table fits 100 columns and 80."""
    planned = any(r.get("headroom") for r in shown)
    load = any(r.get("customer_load") is not None for r in shown)
    headers = ["#", "pools", "GPUs", "req/s", *(["cap"] if planned else []), *(["load"] if load else []),
               "tok/s/GPU", "TTFT", "TPOT", "spec", "$/Mtok", "tok/s/user"]
    rows = []
    for i, r in enumerate(shown, start=1):
        rows.append([f"{i}!" if r["hazards"] else str(i), _shape(r, several, budget), str(r["gpus"]),
                     _n(r.get("planned_rate_rps", r["max_rate_rps"]), 2),
                     *([_n(r["max_rate_rps"], 2)] if planned else []),
                     *([_n(100 * r["customer_load"]) + "%" if r.get("customer_load") is not None else "-"]
                       if load else []),
                     _n(r["output_throughput_per_gpu"]), _n(r["mean_ttft_ms"]), _n(r["mean_tpot_ms"], 1),
                     "-" if r["speculation"] == "none" else f"{r['speculation']} k{r['speculative_k']}",
                     _n(r["dollars_per_million_output_tokens"], 2), _n(r["tokens_per_s_per_user"], 1)])
    # all but tok/s/user, $/Mtok, the capacity beside a planned rate (the load says it too) and the GPUs
    keep = tuple(i for i, h in enumerate(headers) if h not in ("GPUs", "cap", "$/Mtok", "tok/s/user"))
    return headers, rows, keep


def plot_pareto(ax: Axes, d: dict[str, Any]) -> None:
    """Every ranked deployment at its capacity, the Pareto front, and the recommendation marked."""
    rows = d["ranked"]
    ax.scatter([r["tokens_per_s_per_user"] or 0 for r in rows],
               [r["output_throughput_per_gpu"] for r in rows], s=14, color="0.7",
               label="deployments at capacity")
    front = sorted(d["pareto"], key=lambda p: p["tokens_per_s_per_user"])
    ax.plot([p["tokens_per_s_per_user"] for p in front], [p["output_throughput_per_gpu"] for p in front],
            "o-", color="C0", label="Pareto front")
    if rows:
        best = rows[0]
        ax.scatter([best["tokens_per_s_per_user"] or 0], [best["output_throughput_per_gpu"]], s=90,
                   marker="*", color="C3", zorder=5, label=f"recommended: {_shape(best)}")
    ax.set_xlabel("tokens/s per user (1 / TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(f"{d['model']} on {d['gpu']}, {d['isl']}/{d['osl']} tokens")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")


def pareto_figure(d: dict[str, Any]) -> Figure:
    """The capacity plan's Pareto front (:func:`plot_pareto`) as a figure of its own."""
    from servesim.render.plots import figure  # lazy: matplotlib only to draw; plan's table needs none

    fig, axes = figure(1, width_in=8.0)
    plot_pareto(axes[0], d)
    return fig


def capacity_report_blocks(d: dict[str, Any], command: str) -> list[Block]:
    """The capacity plan as report blocks (HTML and Markdown from the same content)."""
    from servesim.render.plots import png_bytes  # lazy: matplotlib only to draw; plan's table needs none

    b: list[Block] = [Block("h1", f"Capacity plan: {d['model']} on {d['gpu']}")]
    b.append(Block("p", f"Workload {d['isl']} prompt + {d['osl']} output tokens; "
                   f"TTFT <= {d['slo_ttft_ms']:g} ms for {100 * d['attainment']:g}% of requests, "
                   f"mean TPOT <= {d['slo_tpot_ms']:g} ms; "
                   f"{d['engine']}; GPU budget {d['gpus_budget']}."
                   + (f" Target rate {d['target_rate_rps']:g} req/s." if d.get("target_rate_rps") else "")))
    if d["ranked"]:
        r = d["ranked"][0]
        b.append(Block("h2", "Recommendation"))
        hz = ("; known hazards: " + ", ".join(r["hazards"])) if r["hazards"] else ""
        planned = (f"{r['planned_rate_rps']:.2f} req/s ({100 * r['headroom']:g}% of the "
                   f"{r['max_rate_rps']:.2f} it holds at steady state)" if r.get("headroom")
                   else f"{r['max_rate_rps']:.2f} req/s")
        b.append(Block("p", f"{r['architecture']} {_shape(r)} on {r['gpus']} GPUs: {planned}, "
                       f"{r['output_throughput_per_gpu']:,.0f} output tok/s per GPU, "
                       f"{(r['tokens_per_s_per_user'] or 0):.1f} tok/s per user, "
                       f"${_n(r['dollars_per_million_output_tokens'], 2)} per million output tokens{hz}."))
        pi = r.get("prediction_interval") or {}
        shown = [(k, name, nd, unit) for k, name, nd, unit in
                 (("output_throughput_per_gpu", "output tok/s per GPU", 0, ""),
                  ("mean_ttft_ms", "TTFT", 0, " ms"), ("mean_tpot_ms", "TPOT", 1, " ms")) if pi.get(k)]
        if shown:
            same = sum(1 for x in d["ranked"] if x.get("indistinguishable_from_best"))
            b.append(Block("p", f"{100 * pi['level']:g}% prediction interval (the out-of-sample errors of "
                           "published runs, servesim/plan/interval.py): "
                           + ", ".join(f"{name} {_n(pi[k][0], nd)}-{_n(pi[k][1], nd)}{unit}"
                                       for k, name, nd, unit in shown)
                           + (f"; the best {same} rows are indistinguishable on tokens/s per GPU (their "
                              "intervals overlap)." if same > 1 else ".")))
    b.append(Block("h2", "Ranked deployments"))
    b.append(Block("table", headers=("#", "architecture", "pools", "GPUs", "req/s", "tok/s/GPU", "tok/s/user",
                                      "TTFT ms", "TPOT ms", "speculation", "$/M tokens", "hazards"),
                   rows=tuple((str(i), r["architecture"], _shape(r), str(r["gpus"]),
                               _n(r.get("planned_rate_rps", r["max_rate_rps"]), 2),
                               _n(r["output_throughput_per_gpu"]), _n(r["tokens_per_s_per_user"], 1),
                               _n(r["mean_ttft_ms"]), _n(r["mean_tpot_ms"], 1),
                               r["speculation"] if r["speculation"] == "none"
                               else f"{r['speculation']} k={r['speculative_k']}",
                               _n(r["dollars_per_million_output_tokens"], 2), ", ".join(r["hazards"]) or "-")
                              for i, r in enumerate(d["ranked"][:20], start=1))))
    b.append(Block("img", "Output tokens/s per GPU against tokens/s per user", name="pareto.png",
                   png=png_bytes(pareto_figure(d))))
    if d["hazards"] and any(r["hazards"] for r in d["ranked"]):
        b.append(Block("h2", "Known hazards"))
        b.append(Block("ul", items=tuple(f"{k}: {v}" for k, v in d["hazards"].items())))
    b.append(Block("h2", "How these numbers were made"))
    b.append(Block("ul", items=(
        f"Model: {d['step_model']}: step times from {d.get('engine_name', d['engine'])}'s measured "
        "kernel tables; the decode batch from the traffic (Little's law); prefill queues M/D/1 per "
        "colocated replica, M/D/c per prefill pool.",
        f"GPU price: {(d['price_source'] or 'none in the catalog').rstrip('.')}.",
        f"Command: {command}",
    )))
    return b
