"""Speculative decoding economics: E[n], cycle time, speedup, optimal k.

Mechanism: a draft proposes ``k`` tokens one after another; the target model
verifies all of them in one forward pass and keeps the longest accepted prefix
plus one token of its own (the correction at the first rejection, or a bonus
token when all ``k`` were accepted).  Rejection sampling (Leviathan et al.,
arXiv:2211.17192; Chen et al., arXiv:2302.01318) keeps the output distribution
exactly the target's, so speculation moves latency, never quality.

Model (seed section 2):

* each draft is accepted independently with probability ``alpha`` (i.i.d.);
* one cycle costs ``k t_draft + t_verify`` with
  ``t_verify = t_target (1 + c k g(u))``: the k extra verified positions ride
  under the memory-bound weight stream and cost only the small compute term
  ``c`` per position, inflated by the utilization gate ``g(u)``;
* ``d = t_draft / t_target``.

Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from servesim._catalogfile import load_builtin
from servesim._checks import ParameterError, check_choice, check_int, check_real

__all__ = [
    "DEFAULT_C",
    "DEFAULT_D",
    "DEFAULT_K_MAX",
    "GATE_EPSILON",
    "SPECDEC_PRESETS",
    "SPEC_METHODS",
    "SpecDecPreset",
    "SpecDecResult",
    "alpha_at_tokens",
    "break_even_alpha",
    "cycle_time",
    "evaluate",
    "expected_tokens",
    "lab_preset",
    "optimal_k",
    "speedup",
    "turn_off_utilization",
    "utilization_gate",
]

SPEC_METHODS: tuple[str, ...] = ("small-draft", "draft", "mtp", "medusa", "eagle", "eagle3", "ngram")
"""The speculative methods every command takes (``predict --spec``, ``plan --spec``, ``specdec
--preset``): the lab's four presets (``draft`` another name of ``small-draft``: a named draft
model), EAGLE-1/2 and n-gram; those the lab has no alpha for are priced on a real model
(``--model``) at a published or given acceptance."""

DEFAULT_D = 0.1
"""Default draft-cost ratio t_draft / t_target (seed section 6, experiment 1)."""
DEFAULT_C = 0.05
"""Default marginal verify cost per extra verified position, in target steps (seed 2.2)."""
DEFAULT_K_MAX = 16
"""Largest draft length searched by :func:`optimal_k` unless told otherwise."""
GATE_EPSILON = 1e-3
"""The epsilon of the seed's utilization gate 1 / (1 - u + epsilon)."""


def _check_alpha(alpha: float) -> float:
    return check_real("alpha", alpha, lo=0.0, hi=1.0)


def _check_u(u: float) -> float:
    return check_real("u", u, lo=0.0, hi=1.0, hi_open=True)


def expected_tokens(k: int, alpha: float) -> float:
    """E[n], tokens emitted per cycle: ``sum_{i=0}^{k} alpha^i``.

    The accepted prefix A reaches length i only if the first i drafts are all
    accepted, so P(A >= i) = alpha^i and E[A] = sum_{i>=1} P(A >= i); add the
    bonus token.  Closed form ``(1 - alpha^(k+1)) / (1 - alpha)``, evaluated as
    ``-expm1((k+1) log alpha) / (1 - alpha)`` so that it stays accurate as
    alpha -> 1 (both numerator and denominator vanish there); alpha = 1 gives
    exactly ``k + 1`` and alpha = 0 exactly 1.
    """
    return _expected_tokens(check_int("k", k, lo=0), _check_alpha(alpha))


def _expected_tokens(k: int, a: float) -> float:
    """:func:`expected_tokens` of checked arguments (an int k >= 0, a float alpha in [0, 1])."""
    if a == 0.0 or k == 0:
        return 1.0
    if a == 1.0:
        return float(k + 1)
    return -math.expm1((k + 1) * math.log(a)) / (1.0 - a)


def utilization_gate(u: float) -> float:
    """g(u) = (1 + eps) / (1 - u + eps): how much the verify width term inflates.

    The seed's gate is ``1 / (1 - u + eps)`` with eps = 1e-3; it is multiplied
    here by ``1 + eps`` so that g(0) = 1 exactly and ``speedup(..., u=0)`` is
    exactly the section 2.2 formula.  The change is 0.1% of the gate, smaller
    than any figure the seed prints.  g is monotone, g(0) = 1 and
    g(u) -> (1 + eps) / eps = 1001 as u -> 1: spare compute vanishes and the k
    extra verified positions queue behind the batch's own work.
    """
    uu = _check_u(u)
    return (1.0 + GATE_EPSILON) / (1.0 - uu + GATE_EPSILON)


def cycle_time(k: int, d: float, c: float, u: float = 0.0) -> float:
    """T_cycle / t_target = k d + 1 + c k g(u): k draft steps plus one verify pass."""
    k = check_int("k", k, lo=0)
    dd = check_real("d", d, lo=0.0)
    cc = check_real("c", c, lo=0.0)
    return _cycle_time(k, dd, cc, utilization_gate(u))


def _cycle_time(k: int, dd: float, cc: float, g: float) -> float:
    """:func:`cycle_time` of checked arguments, with the gate g = g(u) already taken."""
    return k * dd + 1.0 + cc * k * g


def speedup(k: int, alpha: float, d: float, c: float, u: float = 0.0) -> float:
    """S = E[n] / (T_cycle / t_target): tokens per unit time vs plain decoding.

    Plain decoding emits one token per ``t_target``; a speculative cycle emits
    E[n] tokens per T_cycle, so ``S = sum_{i<=k} alpha^i / (k d + 1 + c k g(u))``.
    S > 1 iff sum_{i<=k} alpha^i > 1 + k (d + c g(u)).
    """
    return expected_tokens(k, alpha) / cycle_time(k, d, c, u)


def _checked(alpha: float, d: float, c: float, u: float) -> tuple[float, float, float, float]:
    """alpha, d, c and the gate g(u), checked in the order :func:`speedup` checks them."""
    a = _check_alpha(alpha)
    dd = check_real("d", d, lo=0.0)
    cc = check_real("c", c, lo=0.0)
    return a, dd, cc, utilization_gate(u)


def optimal_k(
    alpha: float, d: float, c: float, u: float = 0.0, k_max: int = DEFAULT_K_MAX
) -> int:
    """The draft length in 1..k_max with the highest speedup (smallest on ties).

    A finite optimum exists because the k-th draft adds alpha^k to the numerator
    (geometric decay) but a constant d + c g(u) to the denominator.  The answer
    is at least 1 even when every k hurts: whether to speculate at all is the
    verdict ``speedup(optimal_k(...)) > 1``.
    """
    k_max = check_int("k_max", k_max, lo=1)
    return _optimal_k(*_checked(alpha, d, c, u), k_max)


def _optimal_k(a: float, dd: float, cc: float, g: float, k_max: int) -> int:
    """:func:`optimal_k` of checked arguments: the arguments are checked once, not once per k."""
    best_k, best_s = 1, -math.inf
    for k in range(1, k_max + 1):
        s = _expected_tokens(k, a) / _cycle_time(k, dd, cc, g)
        if s > best_s:
            best_k, best_s = k, s
    return best_k


def break_even_alpha(k: int, d: float, c: float, u: float = 0.0) -> float:
    """The acceptance alpha at which speedup(k, alpha, d, c, u) = 1.

    Solves sum_{i<=k} alpha^i = 1 + k (d + c g(u)) by bisection (the left side
    is increasing in alpha).  Returns 1.0 when even alpha = 1 cannot pay, i.e.
    when k + 1 <= 1 + k (d + c g(u)).
    """
    k = check_int("k", k, lo=1)
    target = cycle_time(k, d, c, u)
    if _expected_tokens(k, 1.0) <= target:
        return 1.0
    return alpha_at_tokens(k, target)


def alpha_at_tokens(k: int, target: float) -> float:
    """The alpha in [0, 1] with ``E[n] = sum_{i=0}^{k} alpha^i`` equal to ``target``, by 100 steps of
    bisection (E[n] rises in alpha from 1 to k + 1); a target outside (1, k + 1) gives an end."""
    return _bisect(lambda a: _expected_tokens(k, a) < target, 0.0, 1.0, 100)


def _bisect(low: Callable[[float], bool], lo: float, hi: float, steps: int) -> float:
    """The midpoint of [lo, hi] after ``steps`` halvings that keep ``low`` true at lo, false at hi."""
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if low(mid):
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def turn_off_utilization(
    alpha: float, d: float, c: float, k_max: int = DEFAULT_K_MAX
) -> float:
    """The utilization u* at which the best-k speedup falls to 1.

    Above u* no draft length pays: the point a scheduler should disable
    speculation.  Best-k speedup is decreasing in u (every k's is), so bisection
    applies.  Returns 0.0 if speculation never helps, and the largest u below 1
    we can resolve if it helps all the way (only when d = c = 0).
    """
    k_max = check_int("k_max", k_max, lo=1)
    a, dd, cc, _ = _checked(alpha, d, c, 0.0)

    def best(u: float) -> float:
        g = (1.0 + GATE_EPSILON) / (1.0 - u + GATE_EPSILON)  # utilization_gate(u); u in [0, 1) here
        k = _optimal_k(a, dd, cc, g, k_max)
        return _expected_tokens(k, a) / _cycle_time(k, dd, cc, g)

    if best(0.0) <= 1.0:
        return 0.0
    top = 1.0 - 1e-12
    if best(top) > 1.0:
        return top
    return _bisect(lambda u: best(u) > 1.0, 0.0, top, 80)


@dataclass(frozen=True)
class SpecDecPreset:
    """A speculative-decoding family as the bundle (alpha, d, c) with its reasoning."""

    name: str
    alpha: float
    d: float
    c: float
    description: str = ""

    def __post_init__(self) -> None:
        _check_alpha(self.alpha)
        check_real("d", self.d, lo=0.0)
        check_real("c", self.c, lo=0.0)


@dataclass(frozen=True)
class SpecDecResult:
    """One priced operating point."""

    k: int
    alpha: float
    d: float
    c: float
    u: float
    expected_tokens: float
    cycle_time: float
    speedup: float

    @property
    def verdict(self) -> str:
        return "HELPS" if self.speedup > 1.0 else "HURTS"


def evaluate(k: int, alpha: float, d: float, c: float, u: float = 0.0) -> SpecDecResult:
    """Price one (k, alpha, d, c, u) point: E[n], T_cycle / t_target and speedup."""
    en = expected_tokens(k, alpha)
    tc = cycle_time(k, d, c, u)
    return SpecDecResult(k, float(alpha), float(d), float(c), float(u), en, tc, en / tc)


@cache
def _load_presets() -> Mapping[str, SpecDecPreset]:
    """The presets of speculative.toml, read on first use, once."""
    table = load_builtin("speculative.toml")
    out: dict[str, SpecDecPreset] = {}
    for name, entry in table["preset"].items():
        try:
            out[name] = SpecDecPreset(
                name=name,
                alpha=entry["alpha"],
                d=entry["d"],
                c=entry["c"],
                description=entry.get("why", ""),
            )
        except (KeyError, ParameterError) as exc:  # pragma: no cover - shipped data
            raise RuntimeError(f"speculative.toml: preset {name!r}: {exc}") from exc
    return out


def lab_preset(method: str, *, on_model: bool = False) -> SpecDecPreset | None:
    """The lab's preset (alpha, d, c) of a method of :data:`SPEC_METHODS` (``draft`` is
    ``small-draft``'s); None for one the lab has none for (``eagle``, ``ngram``) when it is priced on
    a real model (``on_model``: its published or given acceptance), else refused naming it."""
    presets = _load_presets()
    name = "small-draft" if method == "draft" else method
    if name in presets:
        return presets[name]
    check_choice("spec", method, SPEC_METHODS)
    if on_model:
        return None
    raise ParameterError("spec", method, f"one of {', '.join(presets)} or draft on the lab's reference or a "
                         f"calibrated node: {method} has no lab alpha (give --model M --gpu G: it is priced "
                         "there at its published or given acceptance)")


if TYPE_CHECKING:  # pragma: no cover - the name as the type checker sees it; __getattr__ gives it
    SPECDEC_PRESETS: Mapping[str, SpecDecPreset]
    """The seed's draft families: small-draft, mtp, medusa, eagle3 (see speculative.toml)."""


def __getattr__(name: str) -> object:
    """``SPECDEC_PRESETS``, read from speculative.toml when first asked for (PEP 562), so that
    importing this module parses no file."""
    if name == "SPECDEC_PRESETS":
        value = globals()[name] = _load_presets()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

