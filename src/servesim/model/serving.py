"""Colocated vs disaggregated serving: TTFT, TPOT and goodput (seed section 3).

Both architectures are priced with the same three ingredients:

* **Prefill queueing** as an M/M/c queue (:mod:`servesim.model.queueing`): every
  prompt of ``P`` tokens needs ``S = P / R_p`` seconds of one node's prefill
  capacity, so the service rate per node is ``mu = 1 / S``.
* **Decode capacity**: a node produces at most ``R_d`` output tokens/s across
  its batch; the pool is stable iff ``lambda O < nodes R_d``.  Inside a stable
  pool every token takes ``TPOT_base`` (the closed form does not model
  decode-side queueing; see section 7 of the seed).
* **Goodput** under an SLO pair (TTFT <= X, TPOT <= Y)::

      goodput = lambda * P(TTFT <= X) * 1[TPOT <= Y]
      P(TTFT <= X) = 1 - C exp(-(c mu - lambda)(X - S - t_xfer))

  because TTFT = W_q + S + t_xfer and W_q has the M/M/c tail
  ``P(W_q > t) = C exp(-(c mu - lambda) t)``.

Colocated (every node does both phases; chunked prefill steals decode time)::

    TTFT = W_q(N) + S,   TPOT = TPOT_base (1 + beta rho_p),   rho_p = lambda S / N

Disaggregated (N_p prefill + N_d decode nodes; the prompt's KV cache crosses a
link)::

    TTFT = W_q(N_p) + S + KV(P) / BW,   TPOT = TPOT_base

Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, TypedDict, TypeVar, Unpack

from servesim._catalogfile import load_builtin
from servesim._checks import check_counts, check_fields, check_int, check_real
from servesim.model.kvcache import KVShape, Link, shipped_links, shipped_models
from servesim.model.queueing import MMc

__all__ = [
    "CROSSOVER_LADDER_GBPS",
    "DEFAULT_NODE",
    "GOODPUT_TIE_FRACTION",
    "MIX_PROMPT_SHARES",
    "WORKLOAD_PRESETS",
    "Crossover",
    "NodeFrom",
    "NodeSpec",
    "ScenarioArgs",
    "ServingResult",
    "Workload",
    "best_split",
    "colocated",
    "compare",
    "disaggregated",
    "link_crossover",
    "mixes",
    "p_within",
    "pick_split",
    "resolve_scenario",
    "tie_step",
    "winner",
    "workload_row",
]

MIX_PROMPT_SHARES: tuple[tuple[str, float], ...] = (
    ("prefill-heavy", 0.9),
    ("balanced", 0.5),
    ("decode-heavy", 0.1),
)
"""Prompt share of the total tokens of each comparison mix (seed section 5)."""

CROSSOVER_LADDER_GBPS: tuple[float, ...] = (
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 400.0, 1000.0,
)
"""Link bandwidths (GB/s) scanned for the crossover: a 1-2.5-5 ladder up to NVLink class."""

GOODPUT_TIE_FRACTION = 1e-3
"""Goodputs closer than this fraction of the offered rate are a tie.

In this model goodput is lambda times a probability that is often 1 - 1e-9;
calling a 1e-9 difference a win would be noise.  Ties go to colocation, the
simpler deployment (no KV-transfer layer, one pool to scale)."""


@dataclass(frozen=True)
class NodeSpec:
    """What one serving node (a replica of the model) can do."""

    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    tpot_base_s: float
    kv: KVShape
    gpus: int = 1  # GPUs in one node (replica), for goodput per GPU

    def __post_init__(self) -> None:
        check_counts(self, "gpus")
        check_fields(self, "prefill_tokens_per_s", "decode_tokens_per_s", "tpot_base_s")


@dataclass(frozen=True)
class Workload:
    """A request mix, its arrival rate and the SLO pair it must meet."""

    name: str
    prompt_tokens: int
    output_tokens: int
    rate_per_s: float
    slo_ttft_s: float
    slo_tpot_s: float

    def __post_init__(self) -> None:
        check_counts(self, "prompt_tokens", "output_tokens")
        check_fields(self, "rate_per_s", "slo_ttft_s", "slo_tpot_s")

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class ServingResult:
    """TTFT, TPOT and goodput of one deployment of one workload."""

    architecture: str  # "colocated" or "disaggregated"
    prefill_nodes: int
    decode_nodes: int
    prefill_utilization: float
    decode_utilization: float
    prefill_s: float
    kv_transfer_s: float
    mean_wait_s: float
    ttft_mean_s: float
    tpot_s: float
    p_ttft_ok: float
    tpot_ok: bool
    goodput_rps: float

    @property
    def stable(self) -> bool:
        return self.prefill_utilization < 1.0 and self.decode_utilization < 1.0

    @property
    def split(self) -> str:
        """``8`` for colocated, ``2p/6d`` for disaggregated."""
        if self.architecture == "colocated":
            return f"{self.prefill_nodes}"
        return f"{self.prefill_nodes}p/{self.decode_nodes}d"


def p_within(queue: MMc, budget_s: float) -> float:
    """P(W_q <= budget): 0 when the budget is negative or the queue unstable."""
    if not queue.stable or budget_s < 0:
        return 0.0
    return 1.0 - queue.wait_tail(budget_s)


def _result(
    architecture: str,
    wl: Workload,
    prefill_nodes: int,
    decode_nodes: int,
    node: NodeSpec,
    tpot_s: float,
    kv_transfer_s: float,
) -> ServingResult:
    prefill_s = wl.prompt_tokens / node.prefill_tokens_per_s
    queue = MMc(prefill_nodes, wl.rate_per_s, 1.0 / prefill_s)
    rho_d = wl.rate_per_s * wl.output_tokens / (decode_nodes * node.decode_tokens_per_s)
    stable = queue.stable and rho_d < 1.0
    wait = queue.mean_wait_s() if stable else math.inf
    p_ok = p_within(queue, wl.slo_ttft_s - prefill_s - kv_transfer_s) if stable else 0.0
    tpot_ok = tpot_s <= wl.slo_tpot_s
    return ServingResult(
        architecture=architecture,
        prefill_nodes=prefill_nodes,
        decode_nodes=decode_nodes,
        prefill_utilization=queue.utilization,
        decode_utilization=rho_d,
        prefill_s=prefill_s,
        kv_transfer_s=kv_transfer_s,
        mean_wait_s=wait,
        ttft_mean_s=wait + prefill_s + kv_transfer_s,
        tpot_s=tpot_s,
        p_ttft_ok=p_ok,
        tpot_ok=tpot_ok,
        goodput_rps=wl.rate_per_s * p_ok if (stable and tpot_ok) else 0.0,
    )


def colocated(wl: Workload, node: NodeSpec, nodes: int, beta: float = 0.5) -> ServingResult:
    """Every node runs prefill and decode (seed 3.3).

    TPOT_coloc = TPOT_base (1 + beta rho_p): the more prefill work a node
    carries, the more chunks are interleaved between its decode steps.
    ``beta`` bundles chunk size and scheduler policy into one knob.
    """
    n = check_int("nodes", nodes, lo=1)
    b = check_real("beta", beta, lo=0.0)
    rho_p = wl.rate_per_s * wl.prompt_tokens / (n * node.prefill_tokens_per_s)
    tpot = node.tpot_base_s * (1.0 + b * rho_p)
    return _result("colocated", wl, n, n, node, tpot, 0.0)


def disaggregated(
    wl: Workload, node: NodeSpec, prefill_nodes: int, decode_nodes: int, link: Link
) -> ServingResult:
    """Dedicated prefill and decode pools joined by ``link`` (seed 3.4).

    Decode runs interference-free at TPOT_base; TTFT gains the KV shipment
    KV(P) / BW and queues on the smaller prefill pool only.
    """
    n_p = check_int("prefill_nodes", prefill_nodes, lo=1)
    n_d = check_int("decode_nodes", decode_nodes, lo=1)
    return _result("disaggregated", wl, n_p, n_d, node, node.tpot_base_s, _transfer_s(wl, node, link))


def _transfer_s(wl: Workload, node: NodeSpec, link: Link) -> float:
    """Seconds to ship one prompt's KV cache over ``link``."""
    return link.transfer_s(node.kv.bytes_for(wl.prompt_tokens))


def best_split(wl: Workload, node: NodeSpec, nodes: int, link: Link) -> ServingResult:
    """Scan every N_p + N_d = N split (N_p, N_d >= 1) and keep the goodput-best one.

    Goodputs within GOODPUT_TIE_FRACTION of the rate are a tie (as in
    :func:`compare`); a tie goes to the stable split with the most headroom
    (the least utilized busiest pool), then to the lowest mean TTFT.  The
    planner ranks with the same rule.
    """
    n = check_int("nodes", nodes, lo=2)
    xfer = _transfer_s(wl, node, link)  # the same for every split
    candidates = [_result("disaggregated", wl, p, n - p, node, node.tpot_base_s, xfer) for p in range(1, n)]
    return pick_split(candidates, wl.rate_per_s, lambda r: (r.goodput_rps, r.stable, r.prefill_utilization,
                                                            r.decode_utilization, r.ttft_mean_s))


_T = TypeVar("_T")


def pick_split(
    splits: Sequence[_T], rate_per_s: float, figures: Callable[[_T], tuple[float, bool, float, float, float]]
) -> _T:
    """The best of ``splits`` (closed forms or simulations) by their ``figures`` (goodput, stable,
    prefill and decode utilization, mean TTFT): the most goodput (ties by :func:`tie_step`), then
    stable first, then the most headroom (the least utilized busiest pool), then the least TTFT."""
    top = max(figures(s)[0] for s in splits)
    tied = [s for s in splits if tie_step(figures(s)[0], top, rate_per_s) == 0]

    def rank(s: _T) -> tuple[bool, float, float]:
        _, stable, prefill_util, decode_util, ttft = figures(s)
        return not stable, max(prefill_util, decode_util), ttft

    return min(tied, key=rank)


def tie_step(goodput_rps: float, best_rps: float, rate_per_s: float) -> int:
    """How many tie tolerances (GOODPUT_TIE_FRACTION x rate) ``goodput_rps`` lies below the best.

    Step 0 holds exactly the goodputs tied with the best; counting down from
    the best (not from 0) keeps a bucket edge from splitting a tie.  Used by
    every ranking (best split, planner, simulated re-scoring, trace replay).
    """
    return math.floor((best_rps - goodput_rps) / (GOODPUT_TIE_FRACTION * rate_per_s))


def mixes(wl: Workload) -> list[tuple[str, Workload]]:
    """The workload's own mix, then prefill-heavy, balanced, decode-heavy at equal total tokens."""
    total = wl.total_tokens
    out = [("own", wl)]
    for label, share in MIX_PROMPT_SHARES:
        prompt = max(1, min(total - 1, round(total * share)))
        out.append((label, replace(wl, prompt_tokens=prompt, output_tokens=total - prompt)))
    return out


def compare(coloc: ServingResult, disagg: ServingResult, rate_per_s: float) -> str:
    """:func:`winner` of the two closed forms' goodputs."""
    return winner(coloc.goodput_rps, disagg.goodput_rps, rate_per_s)


def winner(colocated_rps: float, disaggregated_rps: float, rate_per_s: float) -> str:
    """Which architecture serves more goodput: 'colocated', 'disaggregated' or 'neither'.

    A difference below GOODPUT_TIE_FRACTION x rate is a tie and goes to
    colocation; when both serve nothing the answer is 'neither'.
    """
    if disaggregated_rps > colocated_rps + GOODPUT_TIE_FRACTION * rate_per_s:
        return "disaggregated"
    if colocated_rps == 0.0 and disaggregated_rps == 0.0:
        return "neither"
    return "colocated"


@dataclass(frozen=True)
class Crossover:
    """The smallest link at which disaggregation strictly beats colocation."""

    ladder_GBps: float | None  # smallest rung of CROSSOVER_LADDER_GBPS that wins, or None
    exact_GBps: float | None  # bisection threshold, or None if no bandwidth wins
    colocated_goodput_rps: float


def link_crossover(
    wl: Workload,
    node: NodeSpec,
    nodes: int,
    beta: float = 0.5,
    ladder_GBps: Sequence[float] = CROSSOVER_LADDER_GBPS,
) -> Crossover:
    """Scan link bandwidth for the point where the best split beats colocated goodput.

    "Beats" means by more than the tie tolerance of :func:`compare`.

    Best-split goodput is non-decreasing in bandwidth (each split's TTFT budget
    X - S - t_xfer grows with it) and colocated goodput does not depend on the
    link, so the set of winning bandwidths is an interval [b*, inf): the ladder
    reports its first rung and bisection (in log space) the threshold b*.
    """
    coloc = colocated(wl, node, nodes, beta)

    def wins(gbps: float) -> bool:
        link = Link(f"{gbps:g} GB/s", gbps * 1e9)
        best = best_split(wl, node, nodes, link)
        return compare(coloc, best, wl.rate_per_s) == "disaggregated"

    ladder = next((b for b in ladder_GBps if wins(b)), None)
    top = 1e6  # 1 PB/s: the transfer term is then below a nanosecond per token
    if not wins(top):
        return Crossover(ladder, None, coloc.goodput_rps)
    exact = _bisect_log(wins, 1e-6, top)
    return Crossover(ladder, exact, coloc.goodput_rps)


def _bisect_log(pred: Callable[[float], bool], lo: float, hi: float) -> float:
    """Smallest x in [lo, hi] with pred(x) true, pred monotone false->true."""
    if pred(lo):
        return lo
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if pred(mid):
            hi = mid
        else:
            lo = mid
        if hi / lo < 1 + 1e-12:
            break
    return hi




@cache
def _catalog() -> tuple[NodeSpec, dict[str, Workload]]:
    """The reference node and the workload presets of workloads.toml, read on first use, once."""
    table = load_builtin("workloads.toml")
    n = table["node"]
    node = NodeSpec(
        prefill_tokens_per_s=n["prefill_tokens_per_s"],
        decode_tokens_per_s=n["decode_tokens_per_s"],
        tpot_base_s=n["tpot_base_s"],
        kv=shipped_models()[n["model"]],
        gpus=n["gpus"],
    )
    fields = ("prompt_tokens", "output_tokens", "rate_per_s", "slo_ttft_s", "slo_tpot_s")
    workloads = {
        name: Workload(name, **{f: w[f] for f in fields}) for name, w in table["workload"].items()
    }
    return node, workloads


if TYPE_CHECKING:  # pragma: no cover - the names as the type checker sees them; __getattr__ gives them
    DEFAULT_NODE: NodeSpec
    """The seed's node (Llama-3-70B replica) of workloads.toml."""
    WORKLOAD_PRESETS: dict[str, Workload]
    """The seed's workload presets chat, rag, agent (workloads.toml)."""


def __getattr__(name: str) -> object:
    """``DEFAULT_NODE`` and ``WORKLOAD_PRESETS``, read from workloads.toml when first asked for
    (PEP 562), so that importing this module parses no file."""
    if name in ("DEFAULT_NODE", "WORKLOAD_PRESETS"):
        node, workloads = _catalog()
        globals().update(DEFAULT_NODE=node, WORKLOAD_PRESETS=workloads)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


NodeFrom = Callable[[Workload], tuple[NodeSpec, float, str]]


class ScenarioArgs(TypedDict, total=False):
    """What a lab command may change of its workload, and the link and node it runs on: the keyword
    arguments of :func:`resolve_scenario` and of the summaries that resolve one (None: the default)."""

    rate_per_s: float | None
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    link: Link | None
    node: NodeSpec | None
    beta: float | None
    node_from: NodeFrom | None
    node_source: str | None
    prompt_tokens: int | None
    output_tokens: int | None


def _or(value: _T | None, default: _T) -> _T:
    return default if value is None else value


def resolve_scenario(
    wl: Workload, **given: Unpack[ScenarioArgs]
) -> tuple[Workload, Link, NodeSpec, float, str]:
    """The workload with its overrides, the link (default rdma), the node, beta and the node's source.

    ``node_from(workload) -> (node, beta, source)`` derives the node from the
    final workload; without it ``node`` (default the reference node, :data:`DEFAULT_NODE`) and
    ``beta`` (default 0.5) are used, with ``node_source`` (if given) as the description of the node.
    """
    g = given
    wl = replace(
        wl,
        prompt_tokens=_or(g.get("prompt_tokens"), wl.prompt_tokens),
        output_tokens=_or(g.get("output_tokens"), wl.output_tokens),
        rate_per_s=_or(g.get("rate_per_s"), wl.rate_per_s),
        slo_ttft_s=_or(g.get("slo_ttft_s"), wl.slo_ttft_s),
        slo_tpot_s=_or(g.get("slo_tpot_s"), wl.slo_tpot_s),
    )
    ln = g.get("link") or shipped_links()["rdma"]
    node_from, node = g.get("node_from"), g.get("node")
    if node_from is not None:
        return wl, ln, *node_from(wl)
    reference = _catalog()[0]
    default = "reference node (workloads.toml)" if node is None or node is reference else "given"
    return wl, ln, _or(node, reference), _or(g.get("beta"), 0.5), _or(g.get("node_source"), default)


def workload_row(wl: Workload, attainment_target: float | None = None) -> dict[str, float]:
    """A workload as the commands' JSON shows it: lengths, rate and the SLOs in ms (and the
    attainment target, when the command has one)."""
    row: dict[str, float] = {
        "prompt_tokens": wl.prompt_tokens,
        "output_tokens": wl.output_tokens,
        "rate_per_s": wl.rate_per_s,
        "slo_ttft_ms": wl.slo_ttft_s * 1e3,
        "slo_tpot_ms": wl.slo_tpot_s * 1e3,
    }
    if attainment_target is not None:
        row["attainment_target"] = attainment_target
    return row
