"""Published acceptance of speculative decoding, per method and kind of traffic.

The presets live in ``hardware/data/acceptance.toml`` (data, each value with its source: the URL,
the table or section, the target, the draft, k, the temperature and the dataset); this module
reads and checks them and looks one up.  A preset is a *mean acceptance length* ``A`` (tokens per
verify step, the bonus token included, as vLLM's spec-decode metrics and SGLang's ``accept
length`` print it) measured at a draft length ``k``; :attr:`AcceptancePreset.alpha` is the i.i.d.
per-token acceptance with the same mean at that k,

    sum_{i=0}^{k} alpha^i = A        (:func:`alpha_for_acceptance_length`)

Lookup (:func:`preset_for`): the rows of the method that stand for the traffic kind; among them
the one whose ``family`` is the longest start of the target's canonical name (a head measured on
the target's own family), else the row marked ``default``; asked for a draft length ``k``, a row
of those measured at that k comes first (a published acceptance at the k the engine runs, not the
i.i.d. extrapolation of another k's: DeepSeek-R1's MTP at k = 3 accepts 2.82 tokens a step in
TensorRT-LLM's measurement, where the k = 1 figure extrapolates to 3.31); asked for a k that none
of them measured, the row measured at the nearest k, whose alpha then extrapolates the fewest steps
(DeepSeek-R1's MTP at k = 6: 3.14 tokens a step from TensorRT-LLM's k = 5 measurement of 3.01,
where the k = 1 figure's alpha gives 4.86).  A kind with no
measured rows for the method takes a ``[[derived]]`` row's (:class:`DerivedAcceptance`): the
measured kind it names, looked up the same way, with fewer of its drafts accepted.

These are not the lab's presets: ``servesim.model.speculative.SPECDEC_PRESETS`` (the alphas the
``specdec``, ``disagg`` and ``all`` commands illustrate with) do not change.

Standard library only; nothing here prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from servesim._catalogfile import read_toml
from servesim._checks import ParameterError, check_choice, check_int, check_real

__all__ = ["DEFAULT_TRAFFIC", "DERIVED_FIELDS", "FIELDS", "TRAFFIC_KINDS", "AcceptancePreset",
           "DerivedAcceptance", "alpha_for_acceptance_length", "has_acceptance", "load_derived",
           "load_presets", "preset_for", "presets_for", "published_alphas"]

TRAFFIC_KINDS: tuple[str, ...] = ("chat", "code", "summarization", "math", "synthetic")
"""Kinds of traffic a preset can stand for (MT-Bench-like chat, HumanEval-like code, CNN/DM-like
summarization, GSM8K-like math) and ``synthetic``: random token ids wrapped in the target's chat
template, what a benchmark client's random dataset sends with ``--use-chat-template``
(InferenceMAX's speculative runs); no published measurement stands for it, so its presets are
derived from a measured kind's (:class:`DerivedAcceptance`)."""

DEFAULT_TRAFFIC = "chat"
"""The traffic kind assumed when none is named."""

METHODS: tuple[str, ...] = ("small-draft", "mtp", "medusa", "eagle", "eagle3", "ngram")
"""Methods a preset may be for (servesim.hardware.speculation.METHODS; ``draft`` is ``small-draft``)."""

_DATA = Path(__file__).parent / "data" / "acceptance.toml"


def alpha_for_acceptance_length(length: float, k: int) -> float:
    """The i.i.d. per-token acceptance ``alpha`` whose mean accepted length at draft length ``k`` is
    ``length``: ``sum_{i=0}^{k} alpha^i = length`` (increasing in alpha; bisection to 1e-12).

    ``length`` is in ``[1, k + 1]``: 1 when no draft is ever accepted (alpha 0), ``k + 1`` when
    every one is (alpha 1)."""
    kk = check_int("k", k, lo=1, hi=64)
    a = check_real("acceptance_length", length, lo=1.0, hi=kk + 1.0)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(mid**i for i in range(kk + 1)) < a:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class AcceptancePreset:
    """One published measurement: mean acceptance length ``length`` at draft length ``k``."""

    id: str
    method: str
    traffic: tuple[str, ...]
    family: str
    default: bool
    length: float
    k: int
    target: str
    draft: str
    engine: str
    temperature: str
    dataset: str
    source: str
    where: str
    short: str
    note: str

    @property
    def alpha(self) -> float:
        """The i.i.d. per-token acceptance with mean accepted length ``length`` at ``k``."""
        return alpha_for_acceptance_length(self.length, self.k)

    def describe(self, traffic: str) -> str:
        """One line for predict's ``acceptance`` field."""
        return (f"preset: {self.method} {traffic} — mean acceptance length {self.length:g} at k = {self.k} "
                f"({self.short})")


@dataclass(frozen=True)
class DerivedAcceptance:
    """A traffic kind no published measurement stands for, derived from a measured kind's presets:
    each preset's accepted drafts (its length less the bonus token) scaled by ``draft_ratio``,

        A' = 1 + draft_ratio (A - 1)        (the bonus token is always accepted)

    so the derived kind keeps the measured kind's k and its shape over k, with fewer drafts
    accepted.  ``fitted_to`` names the measurements the ratio was fitted to."""

    id: str
    method: str
    traffic: str
    family: str
    from_traffic: str
    draft_ratio: float
    fitted_to: str
    source: str
    where: str
    short: str
    note: str

    def apply(self, base: AcceptancePreset) -> AcceptancePreset:
        """``base`` (a preset of ``from_traffic``) as this kind accepts it."""
        return replace(base, id=f"{base.id}+{self.id}", traffic=(self.traffic,),
                       length=1.0 + self.draft_ratio * (base.length - 1.0),
                       short=(f"{base.short} {base.length:g}, its accepted drafts x {self.draft_ratio:g} "
                              f"{self.short}"),
                       note=f"{base.note} Derived ({self.id}): {self.note}")


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(AcceptancePreset))
"""The fields of a ``[[preset]]`` row of the data file: :class:`AcceptancePreset`'s (the file's header
says what each means)."""

DERIVED_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(DerivedAcceptance))
"""The fields of a ``[[derived]]`` row of the data file: :class:`DerivedAcceptance`'s (the file's header
says what each means)."""


def _check_fields(raw: dict[str, Any], fields: tuple[str, ...], where: str) -> None:
    """The fields a row of the data file must have and no others, a known method and a https source:
    the message names the file, the row (``where``) and the field."""
    missing = [f for f in fields if f not in raw]
    extra = sorted(set(raw) - set(fields))
    if missing or extra:
        raise ValueError(f"{where}: missing {missing} / unknown {extra} field(s)")
    if raw["method"] not in METHODS:
        raise ValueError(f"{where}: method {raw['method']!r} must be one of {', '.join(METHODS)}")
    if not str(raw["source"]).startswith("https://"):
        raise ValueError(f"{where}: source {raw['source']!r} must be a https:// URL")


def _derived_row(raw: dict[str, Any], path: Path, i: int) -> DerivedAcceptance:
    """A ``[[derived]]`` row of the data file, checked: the message names the file, the row and the field."""
    where = f"{path}: derived {i + 1} ({raw.get('id', '?')})"
    _check_fields(raw, DERIVED_FIELDS, where)
    for name in ("traffic", "from_traffic"):
        if raw[name] not in TRAFFIC_KINDS:
            raise ValueError(f"{where}: {name} {raw[name]!r} must be one of {', '.join(TRAFFIC_KINDS)}")
    if raw["traffic"] == raw["from_traffic"]:
        raise ValueError(f"{where}: from_traffic {raw['from_traffic']!r} must be another kind than "
                         "its traffic")
    r = raw["draft_ratio"]
    if not isinstance(r, (int, float)) or isinstance(r, bool) or not 0.0 < r <= 1.0:
        # above 1 a derived length could pass k + 1
        raise ValueError(f"{where}: draft_ratio = {r!r} must be in (0, 1]")
    return DerivedAcceptance(**{**raw, "draft_ratio": float(r)})


def _row(raw: dict[str, Any], path: Path, i: int) -> AcceptancePreset:
    """A row of the data file, checked: the message names the file, the row and the field."""
    where = f"{path}: preset {i + 1} ({raw.get('id', '?')})"
    _check_fields(raw, FIELDS, where)
    traffic = tuple(raw["traffic"])
    bad = [t for t in traffic if t not in TRAFFIC_KINDS]
    if not traffic or bad:
        raise ValueError(f"{where}: traffic {list(traffic)} must be among {', '.join(TRAFFIC_KINDS)}")
    k, length = raw["k"], raw["length"]
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 16:
        raise ValueError(f"{where}: k = {k!r} must be an integer in [1, 16]")
    if not isinstance(length, (int, float)) or isinstance(length, bool) or not 1.0 <= length <= k + 1:
        raise ValueError(f"{where}: length = {length!r} must be in [1, k + 1] = [1, {k + 1}]")
    return AcceptancePreset(**{**raw, "traffic": traffic, "length": float(length),
                               "default": bool(raw["default"])})


@cache
def _document(path: Path) -> dict[str, Any]:
    """The data file, parsed once for both its ``[[preset]]`` and its ``[[derived]]`` rows."""
    return read_toml(path)


@cache
def load_presets(path: Path = _DATA) -> tuple[AcceptancePreset, ...]:
    """Every row of the data file, checked; exactly one ``default`` row per (method, traffic kind)
    that has rows, and unique ids."""
    rows = tuple(_row(r, path, i) for i, r in enumerate(_document(path).get("preset", [])))
    ids = [r.id for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: preset ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    for method in METHODS:
        for t in TRAFFIC_KINDS:
            of = [r for r in rows if r.method == method and t in r.traffic]
            n = sum(r.default for r in of)
            if of and n != 1:
                raise ValueError(f"{path}: {method} {t} has {n} default rows (one is needed)")
    return rows


@cache
def load_derived(path: Path = _DATA) -> tuple[DerivedAcceptance, ...]:
    """Every ``[[derived]]`` row of the data file, checked: unique ids, at most one row per (method,
    traffic, family), and none for a (method, traffic) that measured presets already stand for."""
    rows = tuple(_derived_row(r, path, i) for i, r in enumerate(_document(path).get("derived", [])))
    measured = {(p.method, t) for p in load_presets(path) for t in p.traffic}
    ids: set[str] = set()
    keys: set[tuple[str, str, str]] = set()
    for r in rows:
        if (r.method, r.traffic) in measured:
            raise ValueError(f"{path}: derived {r.id}: {r.method} {r.traffic} has measured presets")
        key = (r.method, r.traffic, r.family)
        if r.id in ids or key in keys:
            raise ValueError(f"{path}: derived {r.id}: its id or its (method, traffic, family) repeats")
        ids.add(r.id)
        keys.add(key)
    return rows


def _derived_for(method: str, traffic: str, family: str | None) -> DerivedAcceptance | None:
    """The derived row of ``method`` for ``traffic`` whose family is the longest start of ``family``
    (a row with an empty family stands for any target), or None."""
    rows = [r for r in load_derived() if r.method == method and r.traffic == traffic
            and (not r.family or (family or "").lower().startswith(r.family))]
    return max(rows, key=lambda r: len(r.family)) if rows else None


def has_acceptance(method: str, traffic: str, family: str | None = None) -> bool:
    """Whether :func:`preset_for` has a preset of ``method`` for ``traffic`` on ``family``'s target."""
    try:
        preset_for(method, traffic, family)
    except ParameterError:
        return False
    return True


def _method(method: str) -> str:
    return "small-draft" if method == "draft" else method


def presets_for(method: str) -> dict[str, AcceptancePreset]:
    """The default preset of ``method`` for each traffic kind that has one."""
    m = _method(method)
    return {t: r for t in TRAFFIC_KINDS for r in load_presets()
            if r.method == m and t in r.traffic and r.default}


def preset_for(method: str, traffic: str = DEFAULT_TRAFFIC, family: str | None = None,
               k: int | None = None) -> AcceptancePreset:
    """The sourced preset of ``method`` for ``traffic`` (see the module docstring); ``family`` is the
    target's canonical name (``llama-3-8b``, ``deepseek-r1``) or None; ``k`` the draft length the
    engine runs (None: any).

    Raises ParameterError naming the parameter, the value and the valid choices: ``traffic`` not a
    known kind, or ``spec`` a method with no preset, or ``traffic`` a kind the method has no
    published acceptance for."""
    check_choice("traffic", traffic, TRAFFIC_KINDS)
    m = _method(method)
    rows = load_presets()
    have = sorted({r.method for r in rows})
    if m not in have:
        raise ParameterError("spec", method, f"one of {', '.join(have)} for a sourced acceptance preset "
                             "(give --acceptance-length A with --k K for the others)")
    of = [r for r in rows if r.method == m and traffic in r.traffic]
    if not of:
        rule = _derived_for(m, traffic, family)
        if rule is not None:
            return rule.apply(preset_for(method, rule.from_traffic, family, k=k))
        kinds = [t for t in TRAFFIC_KINDS if any(r.method == m and t in r.traffic for r in rows)
                 or _derived_for(m, t, family) is not None]
        raise ParameterError("traffic", traffic, f"one of {', '.join(kinds)} for {method} without a measured "
                             f"acceptance (no published {method} acceptance for {traffic}; give "
                             "--acceptance-length A with --k K)")
    def pick(rows: list[AcceptancePreset]) -> AcceptancePreset | None:
        """Of ``rows``: one measured at ``k`` (the default first); for a ``k`` none of them measured,
        one measured at the nearest k (the shorter of two as near; the default first); None when
        ``k`` is None or ``rows`` is empty."""
        if k is None or not rows:
            return None
        near = min(rows, key=lambda r: (abs(r.k - k), r.k)).k
        at_k = [r for r in rows if r.k == near]
        return next((r for r in at_k if r.default), at_k[0])

    if family:
        own = [r for r in of if r.family and family.lower().startswith(r.family)]
        if own:
            longest = max(len(r.family) for r in own)
            own = [r for r in own if len(r.family) == longest]
            return pick(own) or next((r for r in own if r.default), own[0])
    return pick([r for r in of if not r.family]) or next(r for r in of if r.default)


def published_alphas(method: str, traffic: str, family: str | None,
                     ks: Iterable[int]) -> dict[int, float] | None:
    """Each draft length of ``ks`` with the alpha of the preset :func:`preset_for` takes at it (the
    one measured at that k, or at the nearest k measured), so that a search over k weighs each k at
    the acceptance engines measured near it rather than one alpha's geometric series; None when no
    acceptance of ``method`` is published for ``traffic`` on ``family``."""
    if not has_acceptance(method, traffic, family):
        return None
    return {k: preset_for(method, traffic, family, k=k).alpha for k in ks}
