"""Speculative decoding from first principles: the seed's knobs (d, c, u) from the roofline.

The seed (section 2) prices a speculative cycle as ``k t_draft + t_verify`` with
free knobs: ``d = t_draft / t_target``, ``t_verify = t_target (1 + c k g(u))``.
Here every time is a roofline step (:mod:`servesim.hardware.roofline`) at the serving
batch ``B`` and context ``L``:

* ``t_target(B)`` -- a plain decode step, ``B`` tokens through the weights;
* ``t_verify(B, k)`` -- the same pass with ``k + 1`` positions per sequence
  (``B (k + 1)`` tokens).  While ``B (k + 1)`` is under the ridge point the
  weight stream dominates and verification is nearly free; past it every
  position costs compute.  This replaces the constant ``c``: the seed-equivalent
  is ``c(B, k) = (t_verify / t_target - 1) / k``;
* ``t_draft`` by draft kind (:data:`DRAFT_KINDS`):

  - ``separate``: a smaller model of the same tokenizer (e.g. Llama-3-8B for
    70B) run k times: a decode step of the draft model at batch B;
  - ``mtp``: a multi-token-prediction module (DeepSeek-V3, arXiv:2412.19437
    section 2.2): one decoder layer of the target's shape plus a 2h -> h
    projection, sharing the target's embedding and LM head; run k times;
  - ``eagle``: an EAGLE-3 head (arXiv:2503.01840): one decoder layer plus a
    3h -> h fusion of low/mid/high features and its own LM head over a
    32k-token draft vocabulary; run k times;
  - ``medusa``: k Medusa heads (arXiv:2401.10774), each a residual block
    h -> h and its own LM head h -> vocab, all computed in **one** pass from the
    last hidden state;
  - ``ngram``: prompt lookup / n-gram drafting: no weights at all, only a
    host-side search (``overhead_s``, 0 by default);

  so ``d(B) = t_draft / (k t_target)``, which is the weight ratio of draft to
  target while both are memory-bound (8.0e9 / 70.6e9 = 0.11 for 8B -> 70B);
* ``u(B)`` -- the share of a plain step the compute roof is busy
  (:func:`servesim.hardware.roofline.utilization`; the inverse map is
  :func:`servesim.hardware.roofline.batch_for_utilization`).

The speedup at batch B is then ``S = E[n] t_target / (t_draft + t_verify)``
with the seed's ``E[n] = sum_{i<=k} alpha^i`` for a chain (and the same for
every sequence of the batch, so per-sequence latency and batch throughput gain
alike).  With (d, c) as above and u = 0, the seed's formula gives exactly this S.

**Trees** (Medusa, EAGLE-2/3 token trees): the draft proposes a tree of
candidate tokens; verification scores all of its nodes in one pass (width =
nodes + 1, with a tree attention mask) and accepts the longest root path the
target agrees with.  If node i is accepted with probability ``p_i`` given its
parent was (siblings are exclusive candidates for the same position), the path
to node i survives with ``prod p`` along it, and ``E[n] = 1 + sum over nodes of
prod p`` (a chain of k nodes with p = alpha gives the seed's sum_{i<=k} alpha^i).
A tree of ``k`` nodes costs the same verify pass as a chain of ``k`` drafts but
fewer sequential draft steps (its depth), so the two can be compared at equal
verify cost (:func:`compare_chain_tree`).

Standard library only; the model never prints.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.roofline import (
    DEFAULT_EFFICIENCY,
    DEFAULT_MEMORY_FRACTION,
    Efficiency,
    GPUSpec,
    ModelSpec,
    PassCost,
    allreduce_bytes,
    batch_for_utilization,
    decode_step,
    max_batch,
    step_time,
    utilization,
)
from servesim.model.speculative import expected_tokens

__all__ = [
    "DEFAULT_BATCH_LIMIT",
    "DRAFT_KINDS",
    "EAGLE_DRAFT_VOCAB",
    "PRESET_DRAFT_KINDS",
    "Drafter",
    "SpecPoint",
    "TokenTree",
    "batch_for_utilization",
    "best_k",
    "best_tree",
    "chain",
    "compare_chain_tree",
    "draft_memory",
    "draft_time_s",
    "evaluate",
    "evaluate_tree",
    "max_batch_with_drafter",
    "paying_batches",
    "rank_acceptance",
    "turn_off_batch",
    "utilization",
]

DRAFT_KINDS: tuple[str, ...] = ("separate", "mtp", "eagle", "medusa", "ngram")
"""How the draft is produced (see the module docstring)."""

PRESET_DRAFT_KINDS: Mapping[str, str] = {
    "small-draft": "separate",
    "mtp": "mtp",
    "medusa": "medusa",
    "eagle3": "eagle",
}
"""The draft kind behind each preset of servesim.model.speculative.SPECDEC_PRESETS."""

EAGLE_DRAFT_VOCAB = 32000
"""EAGLE-3 drafts over a reduced vocabulary of the 32k most frequent tokens (its own LM head)."""

MTP_PROJECTION = 2
"""DeepSeek's MTP module projects [hidden; next-token embedding] (2h) back to h."""

EAGLE_FUSION = 3
"""EAGLE-3 fuses low-, mid- and high-level target features (3h) into h."""

DEFAULT_BATCH_LIMIT = 1 << 16
"""Largest batch :func:`turn_off_batch` searches (beyond any memory cap in the catalog)."""


@dataclass(frozen=True)
class Drafter:
    """A way of drafting: its kind, the draft model for ``separate``, a host overhead."""

    kind: str
    model: ModelSpec | None = None  # the draft model (kind "separate" only)
    draft_vocab: int | None = None  # eagle's LM head width (default min(target vocab, 32000))
    overhead_s: float = 0.0  # host time per draft step (per lookup for ngram)

    def __post_init__(self) -> None:
        if self.kind not in DRAFT_KINDS:
            raise ParameterError("kind", self.kind, f"one of {', '.join(DRAFT_KINDS)}")
        if (self.kind == "separate") != (self.model is not None):
            raise ParameterError("model", self.model, "a ModelSpec for kind 'separate' and None otherwise")
        if self.draft_vocab is not None:
            check_int("draft_vocab", self.draft_vocab, lo=1)
        check_real("overhead_s", self.overhead_s, lo=0.0)


# --------------------------------------------------------------------------- draft costs


def _head_cost(drafter: Drafter, target: ModelSpec, *, tp: int, batch: float, context_tokens: float,
               width: int) -> PassCost:
    """One MTP/EAGLE step: one target-shaped layer + projection + LM head, ``width`` tokens/sequence.

    Layer weights streamed = (all layers streamed at T tokens - LM head) / layers,
    so an MoE layer touches experts as the target's do.  KV: one layer's cache.
    """
    t = batch * width
    h = float(target.hidden_size)
    wb = target.weight_bytes_per_param
    if drafter.kind == "mtp":
        proj, vocab = MTP_PROJECTION * h * h, float(target.vocab_size)
    else:
        proj = EAGLE_FUSION * h * h
        vocab = float(drafter.draft_vocab or min(target.vocab_size, EAGLE_DRAFT_VOCAB))
    layer_bytes = (target.weight_bytes_streamed(t) - target.head_params * wb) / target.layers
    layer_kv = target.kv_bytes_per_token / target.layers
    attended = context_tokens + (width + 1) / 2.0
    return PassCost(
        tokens=t,
        weight_bytes=(layer_bytes + (proj + vocab * h) * wb) / tp,
        kv_bytes=(batch * context_tokens + t) * layer_kv / target.kv_shards(tp),
        linear_flops=2.0 * (target.active_layer_params + proj + vocab * h) * t / tp,
        attention_flops=t * attended * target.attention_flops_per_position() / target.layers / tp,
        comm_bytes=allreduce_bytes(target, tp, t) / target.layers,
    )


def _medusa_cost(target: ModelSpec, *, tp: int, batch: float, heads: int) -> PassCost:
    """All ``heads`` Medusa heads in one pass on B last hidden states: heads x (h^2 + vocab h) weights."""
    h = float(target.hidden_size)
    per_head = h * h + target.vocab_size * h
    return PassCost(
        tokens=batch,
        weight_bytes=heads * per_head * target.weight_bytes_per_param / tp,
        kv_bytes=0.0,
        linear_flops=2.0 * heads * per_head * batch / tp,
        attention_flops=0.0,
        comm_bytes=0.0,
    )


def _level_sizes(k: int | None, tree: TokenTree | None) -> tuple[int, ...]:
    if tree is not None:
        return tree.level_sizes
    if k is None:
        raise ParameterError("k", k, "an integer >= 1 when no tree is given")
    return (1,) * check_int("k", k, lo=1)


def draft_time_s(
    drafter: Drafter,
    target: ModelSpec,
    gpu: GPUSpec,
    *,
    tp: int,
    batch: float,
    context_tokens: float,
    k: int | None = None,
    tree: TokenTree | None = None,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> float:
    """Seconds to draft one cycle: a chain of ``k`` tokens, or ``tree``.

    Autoregressive drafters (separate, mtp, eagle) run one pass per tree level;
    the pass for level l takes the n_{l-1} nodes of the level above (1 for the
    root) as its positions.  A chain is a tree of k levels of one node.  Medusa
    computes one head per level, all in one pass.  n-gram pays ``overhead_s``
    once per cycle.
    """
    levels = _level_sizes(k, tree)
    if drafter.kind == "ngram":
        return drafter.overhead_s
    if drafter.kind == "medusa":
        cost = _medusa_cost(target, tp=tp, batch=batch, heads=len(levels))
        return step_time(cost, gpu, efficiency).total_s + drafter.overhead_s
    total = 0.0
    for width in (1, *levels[:-1]):
        if drafter.kind == "separate":
            assert drafter.model is not None  # checked in Drafter
            total += decode_step(drafter.model, gpu, tp=tp, batch=batch, context_tokens=context_tokens,
                                 positions=width, efficiency=efficiency).total_s
        else:
            cost = _head_cost(drafter, target, tp=tp, batch=batch, context_tokens=context_tokens,
                              width=width)
            total += step_time(cost, gpu, efficiency).total_s
        total += drafter.overhead_s
    return total


def draft_memory(drafter: Drafter, target: ModelSpec, *, tp: int, k: int = 1) -> tuple[float, float]:
    """(weight bytes per GPU, KV bytes per token per GPU) the drafter adds beside the target.

    separate: the draft model's weights and its own KV cache; mtp: one layer and
    the projection (embedding and LM head shared) and one layer of KV; eagle: one
    layer, the fusion and its draft-vocab LM head, one layer of KV; medusa: k
    heads of h^2 + vocab h, no KV; ngram: nothing (the lookup lives on the host).
    """
    tp = check_int("tp", tp, lo=1)
    k = check_int("k", k, lo=1)
    h = float(target.hidden_size)
    wb = target.weight_bytes_per_param
    layer_kv = target.kv_bytes_per_token / target.layers / target.kv_shards(tp)
    if drafter.kind == "separate":
        assert drafter.model is not None
        m = drafter.model
        return m.weight_bytes / tp, m.kv_bytes_per_token / m.kv_shards(tp)
    if drafter.kind == "mtp":
        return (target.layer_params + MTP_PROJECTION * h * h) * wb / tp, layer_kv
    if drafter.kind == "eagle":
        vocab = float(drafter.draft_vocab or min(target.vocab_size, EAGLE_DRAFT_VOCAB))
        return (target.layer_params + EAGLE_FUSION * h * h + vocab * h) * wb / tp, layer_kv
    if drafter.kind == "medusa":
        return k * (h * h + target.vocab_size * h) * wb / tp, 0.0
    return 0.0, 0.0


def max_batch_with_drafter(
    drafter: Drafter,
    target: ModelSpec,
    gpu: GPUSpec,
    *,
    tp: int,
    context_tokens: float,
    k: int = 1,
    memory_fraction: float = DEFAULT_MEMORY_FRACTION,
) -> int:
    """The largest batch that fits when the drafter's weights and KV share the HBM."""
    w, kv = draft_memory(drafter, target, tp=tp, k=k)
    return max_batch(target, gpu, tp=tp, context_tokens=context_tokens, memory_fraction=memory_fraction,
                     extra_weight_bytes=w, extra_kv_bytes_per_token=kv)


# --------------------------------------------------------------------------- operating points


@dataclass(frozen=True)
class SpecPoint:
    """One priced speculative configuration at one batch."""

    kind: str
    batch: float
    drafted: int  # tokens drafted per sequence per cycle (chain length k, or tree nodes)
    depth: int  # sequential draft levels (k for a chain)
    expected_tokens: float  # E[n] per sequence per cycle
    plain_s: float  # t_target(B): a plain decode step
    draft_s: float
    verify_s: float
    utilization: float  # u of the plain step at this batch

    @property
    def width(self) -> int:
        """Positions verified per sequence: drafted + 1."""
        return self.drafted + 1

    @property
    def cycle_s(self) -> float:
        return self.draft_s + self.verify_s

    @property
    def speedup(self) -> float:
        """E[n] t_target / (t_draft + t_verify)."""
        return self.expected_tokens * self.plain_s / self.cycle_s

    @property
    def d(self) -> float:
        """The seed's d: draft time per drafted token over t_target."""
        return self.draft_s / (self.drafted * self.plain_s)

    @property
    def c(self) -> float:
        """The seed's c at u = 0: (t_verify / t_target - 1) / drafted."""
        return (self.verify_s / self.plain_s - 1.0) / self.drafted

    @property
    def verdict(self) -> str:
        return "HELPS" if self.speedup > 1.0 else "HURTS"


def _point(drafter: Drafter, en: float, drafted: int, depth: int, target: ModelSpec, gpu: GPUSpec,
           tp: int, batch: float, context_tokens: float, efficiency: Efficiency,
           tree: TokenTree | None, k: int | None) -> SpecPoint:
    plain = decode_step(target, gpu, tp=tp, batch=batch, context_tokens=context_tokens,
                        efficiency=efficiency)
    verify = decode_step(target, gpu, tp=tp, batch=batch, context_tokens=context_tokens,
                         positions=drafted + 1, efficiency=efficiency)
    draft = draft_time_s(drafter, target, gpu, tp=tp, batch=batch, context_tokens=context_tokens,
                         k=k, tree=tree, efficiency=efficiency)
    return SpecPoint(drafter.kind, float(batch), drafted, depth, en, plain.total_s, draft,
                     verify.total_s, plain.compute_utilization)


def evaluate(
    drafter: Drafter,
    alpha: float,
    k: int,
    target: ModelSpec,
    gpu: GPUSpec,
    *,
    tp: int,
    batch: float,
    context_tokens: float,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> SpecPoint:
    """A chain of ``k`` drafts with i.i.d. acceptance ``alpha`` at batch ``batch``."""
    k = check_int("k", k, lo=1)
    en = expected_tokens(k, alpha)
    return _point(drafter, en, k, k, target, gpu, tp, batch, context_tokens, efficiency, None, k)


def evaluate_tree(
    drafter: Drafter,
    tree: TokenTree,
    target: ModelSpec,
    gpu: GPUSpec,
    *,
    tp: int,
    batch: float,
    context_tokens: float,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> SpecPoint:
    """A token tree at batch ``batch``: E[n] from its node probabilities, verify width nodes + 1."""
    if tree.nodes < 1:
        raise ParameterError("tree", tree.nodes, "a tree with at least one node")
    return _point(drafter, tree.expected_tokens, tree.nodes, tree.depth, target, gpu, tp, batch,
                  context_tokens, efficiency, tree, None)


def best_k(
    drafter: Drafter,
    alpha: float,
    target: ModelSpec,
    gpu: GPUSpec,
    *,
    tp: int,
    batch: float,
    context_tokens: float,
    k_max: int = 16,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> SpecPoint:
    """The chain length in 1..k_max with the highest speedup at this batch (smallest on ties)."""
    k_max = check_int("k_max", k_max, lo=1)
    best: SpecPoint | None = None
    for k in range(1, k_max + 1):
        p = evaluate(drafter, alpha, k, target, gpu, tp=tp, batch=batch, context_tokens=context_tokens,
                     efficiency=efficiency)
        if best is None or p.speedup > best.speedup:
            best = p
    assert best is not None
    return best


def paying_batches(
    drafter: Drafter,
    alpha: float,
    target: ModelSpec,
    gpu: GPUSpec,
    *,
    tp: int,
    context_tokens: float,
    k_max: int = 16,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    batch_limit: int = DEFAULT_BATCH_LIMIT,
) -> tuple[int, int | None] | None:
    """The first and the last batch at which the best chain pays (speedup > 1), or None if none does.

    The last is None when it still pays at ``batch_limit``.  For a dense target
    the speedup falls with the batch (the verify pass leaves the weight-bound
    regime at B (k + 1) ~ ridge), so the first is 1.  For an MoE target it can
    rise first: at batch 1 verifying k + 1 positions touches up to (k + 1)
    times the experts, while at a moderate batch the plain step already reads
    most of them.  Search: the batches 1, 2, 4, ... up to the limit, then
    bisection on each side of the paying stretch (one stretch assumed).
    """
    limit = check_int("batch_limit", batch_limit, lo=1)

    def pays(b: int) -> bool:
        p = best_k(drafter, alpha, target, gpu, tp=tp, batch=b, context_tokens=context_tokens,
                   k_max=k_max, efficiency=efficiency)
        return p.speedup > 1.0

    ladder = [1]
    while ladder[-1] * 2 < limit:
        ladder.append(ladder[-1] * 2)
    ladder.append(limit)
    verdicts = [pays(b) for b in ladder]
    if not any(verdicts):
        return None
    first_i = verdicts.index(True)
    last_i = len(verdicts) - 1 - verdicts[::-1].index(True)
    # first: bisect between the last losing rung before it and the paying rung
    first = ladder[first_i]
    if first_i > 0:
        lo, hi = ladder[first_i - 1], first  # pays(lo) false, pays(hi) true
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if pays(mid) else (mid, hi)
        first = hi
    if last_i == len(ladder) - 1:
        return first, None
    lo, hi = ladder[last_i], ladder[last_i + 1]  # pays(lo) true, pays(hi) false
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if pays(mid) else (lo, mid)
    return first, lo


def turn_off_batch(
    drafter: Drafter,
    alpha: float,
    target: ModelSpec,
    gpu: GPUSpec,
    *,
    tp: int,
    context_tokens: float,
    k_max: int = 16,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    batch_limit: int = DEFAULT_BATCH_LIMIT,
) -> int | None:
    """The largest batch at which the best chain still pays (speedup > 1): "turn it off above B".

    0 when it pays at no batch; None when it still pays at ``batch_limit``
    (see :func:`paying_batches`).
    """
    stretch = paying_batches(drafter, alpha, target, gpu, tp=tp, context_tokens=context_tokens,
                             k_max=k_max, efficiency=efficiency, batch_limit=batch_limit)
    return 0 if stretch is None else stretch[1]


# --------------------------------------------------------------------------- trees


@dataclass(frozen=True)
class TokenTree:
    """A draft token tree: node i hangs under ``parents[i]`` (-1: under the last committed token).

    ``accept[i]`` is P(node i accepted | its parent accepted).  Siblings are
    alternative candidates for the same position, so their probabilities are
    exclusive and sum to at most 1.  Parents come before children.
    """

    parents: tuple[int, ...]
    accept: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.parents) != len(self.accept):
            raise ParameterError("accept", len(self.accept),
                                 f"one probability per node ({len(self.parents)} nodes)")
        children: dict[int, float] = {}
        for i, (parent, p) in enumerate(zip(self.parents, self.accept, strict=True)):
            check_int(f"parents[{i}]", parent, lo=-1, hi=i - 1)
            check_real(f"accept[{i}]", p, lo=0.0, hi=1.0)
            children[parent] = children.get(parent, 0.0) + p
        for parent, total in children.items():
            if total > 1.0 + 1e-12:
                raise ParameterError(f"accept (children of node {parent})", total,
                                     "<= 1 in sum: siblings are exclusive candidates")

    @property
    def nodes(self) -> int:
        return len(self.parents)

    @property
    def width(self) -> int:
        """Positions verified per sequence: every node plus the bonus position."""
        return self.nodes + 1

    def _depths(self) -> list[int]:
        depth: list[int] = []
        for parent in self.parents:
            depth.append(1 if parent < 0 else depth[parent] + 1)
        return depth

    @property
    def depth(self) -> int:
        """Levels below the root: sequential draft passes for an autoregressive drafter."""
        return max(self._depths(), default=0)

    @property
    def level_sizes(self) -> tuple[int, ...]:
        """Nodes at depth 1, 2, ..., depth."""
        sizes = [0] * self.depth
        for d in self._depths():
            sizes[d - 1] += 1
        return tuple(sizes)

    def path_probabilities(self) -> tuple[float, ...]:
        """P(the accepted path reaches node i) = product of accept along the path."""
        out: list[float] = []
        for parent, p in zip(self.parents, self.accept, strict=True):
            out.append(p if parent < 0 else out[parent] * p)
        return tuple(out)

    @property
    def expected_tokens(self) -> float:
        """E[n] = 1 + sum_i P(path to i accepted): E[A] = sum_i P(node i on the accepted path)."""
        return 1.0 + sum(self.path_probabilities())


def chain(k: int, alpha: float) -> TokenTree:
    """A linear chain of ``k`` drafts, each accepted with ``alpha``: E[n] = sum_{i<=k} alpha^i."""
    k = check_int("k", k, lo=0)
    a = check_real("alpha", alpha, lo=0.0, hi=1.0)
    return TokenTree(tuple(range(-1, k - 1)), (a,) * k)


def rank_acceptance(alpha: float, ranks: int) -> tuple[float, ...]:
    """P(the target's token is the draft's r-th guess), r = 1..ranks: alpha (1 - alpha)^(r-1).

    A stated assumption: the top guess is right with alpha (the chain's
    acceptance) and each further guess catches a fraction alpha of what the
    guesses before it missed.  Sums to 1 - (1 - alpha)^ranks <= 1.  Pass measured
    top-r acceptance rates to :func:`best_tree` instead where you have them.
    """
    a = check_real("alpha", alpha, lo=0.0, hi=1.0)
    r = check_int("ranks", ranks, lo=1)
    return tuple(a * (1.0 - a) ** i for i in range(r))


def best_tree(nodes: int, rank_probs: Sequence[float], max_depth: int | None = None) -> TokenTree:
    """The tree of ``nodes`` nodes with the largest E[n], children drawing on ``rank_probs``.

    A node's value is its path probability, and a child's is never above its
    parent's (nor a lower-ranked sibling's above a higher-ranked one's), so taking
    the ``nodes`` most probable candidates greedily always yields a valid tree,
    and the best one (the dynamic-tree construction of EAGLE-2 and Sequoia).
    """
    n = check_int("nodes", nodes, lo=0)
    probs = tuple(check_real(f"rank_probs[{i}]", p, lo=0.0, hi=1.0) for i, p in enumerate(rank_probs))
    if not probs:
        raise ParameterError("rank_probs", rank_probs, "at least one probability")
    if any(b > a for a, b in itertools.pairwise(probs)):
        raise ParameterError("rank_probs", rank_probs, "non-increasing (rank 1 the most likely)")
    if sum(probs) > 1.0 + 1e-12:
        raise ParameterError("rank_probs", rank_probs, "<= 1 in sum")
    limit = max_depth if max_depth is None else check_int("max_depth", max_depth, lo=1)
    parents: list[int] = []
    accept: list[float] = []
    # heap of candidates: (-path probability, tie order, parent, rank, depth, parent path prob)
    heap: list[tuple[float, int, int, int, int, float]] = [(-probs[0], 0, -1, 0, 1, 1.0)]
    order = 1
    while heap and len(parents) < n:
        neg, _, parent, rank, depth, base = heapq.heappop(heap)
        me = len(parents)
        parents.append(parent)
        accept.append(probs[rank])
        if rank + 1 < len(probs):  # the next sibling becomes a candidate
            heapq.heappush(heap, (-base * probs[rank + 1], order, parent, rank + 1, depth, base))
            order += 1
        if limit is None or depth < limit:  # so does this node's first child
            heapq.heappush(heap, (neg * probs[0], order, me, 0, depth + 1, -neg))
            order += 1
    return TokenTree(tuple(parents), tuple(accept))


def compare_chain_tree(
    drafter: Drafter,
    alpha: float,
    width: int,
    target: ModelSpec,
    gpu: GPUSpec,
    *,
    tp: int,
    batch: float,
    context_tokens: float,
    ranks: int = 4,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> tuple[SpecPoint, SpecPoint]:
    """A chain and the best tree that verify the same ``width`` positions per sequence.

    Same verify pass; the tree spends its width on alternatives (top-``ranks``
    candidates, :func:`rank_acceptance`) instead of depth.  Returns (chain, tree).
    """
    w = check_int("width", width, lo=2)
    chain_point = evaluate(drafter, alpha, w - 1, target, gpu, tp=tp, batch=batch,
                           context_tokens=context_tokens, efficiency=efficiency)
    tree = best_tree(w - 1, rank_acceptance(alpha, ranks))
    tree_point = evaluate_tree(drafter, tree, target, gpu, tp=tp, batch=batch,
                               context_tokens=context_tokens, efficiency=efficiency)
    return chain_point, tree_point
