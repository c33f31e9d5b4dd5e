"""The price of one prefill chunk's attention behind a cached prefix: one rule for every model family.

A chunk of ``q`` tokens behind ``c`` cached ones does the causal query-key pairs of a ``c + q``-token
prompt less those of a ``c``-token one.  Its kernel is priced as the largest of three lower bounds,

    chunk(q, c) = max( F(c + q) - F(c),  P(q),  R(c + q) )        (c > 0;  P(q) when c = 0)

* ``F`` the lower convex hull of the measured prefill times over prompt lengths
  (:func:`prefill_hull`), so that the difference grows with ``c`` as the pairs do, whatever kinks
  the table has (a raw ``P(c + q) - P(c)`` can shrink, or go negative, across a kink);
* ``P(q)`` the measured prefill of the chunk's ``q`` tokens alone (the same queries against fewer
  keys: the kernel's launch and floor are in it);
* ``R(c + q)`` the decode attention of the same sequences at context ``c + q``: the cache is read
  at least once.

Each bound grows with ``q`` and with ``c``.  (The measured kernel of ``q`` fresh tokens must not be
scaled up instead: a 1-token chunk behind 8,128 cached ones would cost a launch-bound kernel times
16,257, a 14.7 s step of Llama-3.1-70B on 8 x H200 where the bound is milliseconds.)

The dense step model (:class:`servesim.hardware.stepmodel.StepModel`) and the mixture-of-experts
one (:class:`servesim.hardware.moe_step.MoEStepModel`, GQA and MLA alike) price chunks with
:func:`chunk_attention_s`; each passes its own table lookups.  Units: seconds.
Standard library only; nothing here prints.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

__all__ = ["HULL_LENGTHS", "Hull", "chunk_attention_s", "on_hull", "prefill_hull"]

Hull = tuple[tuple[float, ...], tuple[float, ...]]
"""A piecewise-linear lower hull: its x (prompt lengths) and y (seconds)."""

HULL_LENGTHS: tuple[int, ...] = tuple(sorted({max(1, round(2 ** (i / 8))) for i in range(8 * 21 + 1)}))
"""Prompt lengths the hull is built on: 8 per octave, 1 to 2^21 tokens."""


def _cross(o: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def prefill_hull(prefill_s: Callable[[int], float]) -> Hull:
    """The lower convex hull of ``prefill_s`` (one layer's prefill time, s, of a prompt of the given
    length) over :data:`HULL_LENGTHS` (Andrew's monotone chain, lower half)."""
    hull: list[tuple[float, float]] = []
    for p in ((float(x), prefill_s(x)) for x in HULL_LENGTHS):
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], p) <= 0:
            hull.pop()
        hull.append(p)
    return tuple(x for x, _ in hull), tuple(y for _, y in hull)


def on_hull(hull: Hull, x: float) -> float:
    """The piecewise-linear hull at ``x`` (extended along its last segment beyond the end)."""
    xs, ys = hull
    i = min(max(1, bisect_left(xs, x)), len(xs) - 1)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def chunk_attention_s(tokens: int, context: int, fresh_s: float, hull: Callable[[], Hull],
                      read_s: Callable[[int], float]) -> float:
    """One layer's attention of a chunk of ``tokens`` behind ``context`` cached ones (module doc).

    ``fresh_s`` is the measured prefill of ``tokens`` alone; ``hull`` gives the prefill hull
    (:func:`prefill_hull`, asked for only when ``context > 0``); ``read_s(n)`` the decode attention
    of the chunk's sequences at context ``n``."""
    if context <= 0:
        return fresh_s
    whole = context + tokens
    h = hull()
    return max(on_hull(h, whole) - on_hull(h, context), fresh_s, read_s(whole))
