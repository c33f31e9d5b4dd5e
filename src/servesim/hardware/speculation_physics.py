"""Draft token trees and the draft kind of each lab preset: what speculation drafts, not what it costs.

What a speculative step costs (the draft's passes, the verify pass of ``k + 1`` positions or of a
tree's nodes, the engine's host time and the drafter's memory) is priced by the measured-kernel
step model, in one module: :mod:`servesim.hardware.speculation` (``predict --spec``, ``specdec
--model``, ``roofline``'s speculation sections and the plan's screen all use it).  Here:

* the **draft kinds** (:data:`DRAFT_KINDS`) and which one each lab preset uses
  (:data:`PRESET_DRAFT_KINDS`): ``separate`` (a smaller model of the same tokenizer, e.g.
  Llama-3-8B for 70B), ``mtp`` (a multi-token-prediction module, DeepSeek-V3 arXiv:2412.19437
  section 2.2), ``eagle`` (an EAGLE-3 head, arXiv:2503.01840), ``medusa`` (k heads in one pass,
  arXiv:2401.10774) and ``ngram`` (prompt lookup, no weights);
* **token trees** (Medusa, EAGLE-2/3): the draft proposes a tree of candidate tokens;
  verification scores all of its nodes in one pass (width = nodes + 1, with a tree attention
  mask) and accepts the longest root path the target agrees with.  If node i is accepted with
  probability ``p_i`` given its parent was (siblings are exclusive candidates for the same
  position), the path to node i survives with ``prod p`` along it, and ``E[n] = 1 + sum over
  nodes of prod p`` (a chain of k nodes with p = alpha gives the seed's sum_{i<=k} alpha^i).  A
  tree of ``k`` nodes costs the same verify pass as a chain of ``k`` drafts but fewer
  sequential draft steps (its depth) (:func:`servesim.hardware.speculation.tree_speedup`).

Standard library only; the model never prints.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from servesim._checks import ParameterError, check_int, check_real

__all__ = ["DRAFT_KINDS", "PRESET_DRAFT_KINDS", "TokenTree", "best_tree", "chain", "rank_acceptance"]

DRAFT_KINDS: tuple[str, ...] = ("separate", "mtp", "eagle", "medusa", "ngram")
"""How the draft is produced (see the module docstring)."""

PRESET_DRAFT_KINDS: Mapping[str, str] = {
    "small-draft": "separate",
    "mtp": "mtp",
    "medusa": "medusa",
    "eagle3": "eagle",
}
"""The draft kind behind each preset of servesim.model.speculative.SPECDEC_PRESETS."""


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
