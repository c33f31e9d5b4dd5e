"""The engine loop compiled with numba, from the text it runs in Python.

Nothing here restates a policy or a piece of the books.  The loop
(:mod:`servesim.sim.loop`), the books (:class:`~servesim.sim.schedulers.base.EngineState`)
and every policy are written once, in the part of Python numba compiles; this module
compiles that text:

* each class's annotated fields (``int``, ``float``, ``bool``, ``Ints``, ``Floats``) become
  a numba structure of the same names (:func:`struct_type`; a ``structref``, passed by
  reference), its columns numpy arrays, and each of its methods a compiled method of it
  (``overload_method`` with the method itself as the implementation); the loop's functions
  likewise (``overload``);
* :func:`core_for` compiles :func:`servesim.sim.loop.core` once per policy class (the policy's
  methods are compiled into it), cached on disk under a name that carries a digest of the
  source of every module compiled into it, so that editing a policy never loads a stale loop;
* the few functions that cannot be one text (:data:`servesim.sim.loop.TWINS`,
  :data:`servesim.sim.schedulers.base.TWINS`) have their compiled implementations here:
  CPython's Mersenne Twister (``random.random()``, from the generator's state), an
  open-addressed table of the step prices and of the gaps between tokens (dicts in Python),
  and a column's growth.

Python's ``round`` is half to even in both (numba's ``round`` uses the hardware's ``rint``),
float ``//`` is :func:`servesim.sim.loop.floordiv` in both, and sums run left to right in
both, so a compiled run gives the Python run's result to the last bit.  Compiling the loop
for a policy takes ~20 s the first time on a machine; numba's disk cache then loads it in
well under a second (:func:`compile_kernels` does either up front).  Nothing here prints.
"""

from __future__ import annotations

import inspect
import math
import sys
import types as pytypes
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar, cast

import numba
import numba.core.cgutils
import numba.core.extending
import numba.experimental.jitclass.base
import numba.experimental.structref
import numpy as np
import numpy.typing as npt
from numba.core.dispatcher import Dispatcher
from numba.core.types import StructRef as StructRefType
from numba.core.types import Tuple, Type, TypeRef, UniTuple
from numba.core.typing.templates import Signature
from numba.experimental.structref import StructRefProxy

from servesim.sim import loop as _loop
from servesim.sim.schedulers import SCHEDULERS
from servesim.sim.schedulers import base as _base
from servesim.sim.schedulers.base import EngineState, Scheduler

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Column = TypeVar("Column", F64, I64)

_NB: Any = numba  # numba's own annotations are partial: its API is used untyped here
nbtypes = _NB.core.types
cgutils = _NB.core.cgutils
intrinsic, overload, overload_method = (_NB.core.extending.intrinsic, _NB.core.extending.overload,
                                        _NB.core.extending.overload_method)
structref = _NB.experimental.structref
imp_dtor = sys.modules["numba.experimental.jitclass.base"].imp_dtor
_Utils = structref._Utils

__all__ = ["column", "compile_kernels", "core_for", "core_signature", "dump", "stats", "struct_of",
           "struct_type"]

_FIELD_TYPES: dict[str, Type] = {
    "int": nbtypes.int64, "float": nbtypes.float64, "bool": nbtypes.boolean,
    "Ints": nbtypes.int64[::1], "Floats": nbtypes.float64[::1],
}
_ARRAY_DTYPES = {"Ints": np.int64, "Floats": np.float64}
_INLINE = {"forceinline": True, "_nrt": True}
"""Each method and function is inlined into its caller by LLVM (a call would pass its structures
and arrays word by word)."""


_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def fields_of(cls: type) -> tuple[tuple[str, str], ...]:
    """``cls``'s fields: its annotations (and its bases') of a type the loop compiles, in order
    (read once a class)."""
    got = _FIELDS.get(cls)
    if got is None:
        out: dict[str, str] = {}
        for k in reversed(cls.__mro__):
            for name, ann in vars(k).get("__annotations__", {}).items():
                if isinstance(ann, str) and ann in _FIELD_TYPES:
                    out[name] = ann
        got = _FIELDS[cls] = tuple(out.items())
    return got


def _methods_of(cls: type) -> dict[str, Callable[..., Any]]:
    out: dict[str, Callable[..., Any]] = {}
    for k in reversed(cls.__mro__):
        for name, value in vars(k).items():
            if inspect.isfunction(value) and not name.startswith("__"):
                out[name] = value
    return out


def _implemented_by(fn: Callable[..., Any]) -> Callable[..., Callable[..., Any]]:
    """A typing function for numba's ``overload`` with ``fn``'s parameters, whose implementation is
    ``fn`` itself (numba binds a call's arguments by the typing function's signature)."""
    params = ", ".join(inspect.signature(fn).parameters)
    scope: dict[str, Any] = {"fn": fn}
    exec(f"def typer({params}):\n    return fn\n", scope)
    return cast(Callable[..., Callable[..., Any]], scope["typer"])


_STRUCTS: dict[type, StructRefType] = {}


def _preprocess(self: StructRefType, fields: Iterable[tuple[str, Type]]) -> tuple[tuple[str, Type], ...]:
    return tuple((name, nbtypes.unliteral(typ)) for name, typ in fields)


def struct_type(cls: type) -> StructRefType:
    """The numba structure of ``cls`` (its fields; its methods compiled as methods of it)."""
    st = _STRUCTS.get(cls)
    if st is not None:
        return st
    name = f"{cls.__module__}.{cls.__qualname__}".replace(".", "_").replace("<", "_").replace(">", "_")
    typeclass = type(name, (nbtypes.StructRef,), {"preprocess_fields": _preprocess, "__module__": __name__})
    setattr(sys.modules[__name__], name, typeclass)  # importable, so that numba's cache can name it
    structref.register(typeclass)
    proxy = type(name + "Proxy", (structref.StructRefProxy,), {"__module__": __name__})
    setattr(sys.modules[__name__], name + "Proxy", proxy)
    structref.define_boxing(typeclass, proxy)
    for method, fn in _methods_of(cls).items():
        overload_method(typeclass, method, jit_options=_INLINE, strict=False)(_implemented_by(fn))
    new: StructRefType = typeclass([(f, _FIELD_TYPES[a]) for f, a in fields_of(cls)])
    _STRUCTS[cls] = new
    return new


Codegen = Callable[[Any, Any, Signature, Sequence[object]], object]
"""An intrinsic's code generator: numba's target context and an llvmlite ``IRBuilder`` (numba's
codegen API is unannotated and llvmlite has no types: ``Any``), the call's signature and its
arguments' LLVM values; the result's LLVM value."""


def _pack_typing(typingctx: object, tref: TypeRef, values: Tuple | UniTuple) -> tuple[Signature, Codegen]:
    """A new structure of type ``tref`` holding ``values`` (a tuple, one per field in order)."""
    inst_type: Any = tref.instance_type  # a StructRef type, whose codegen methods numba leaves unannotated

    def codegen(context: Any, builder: Any, sig: Signature, args: Sequence[object]) -> object:
        model = context.data_model_manager[inst_type.get_data_type()]
        alloc_type = model.get_value_type()
        size = context.get_abi_sizeof(alloc_type)
        meminfo = context.nrt.meminfo_alloc_dtor(builder, context.get_constant(nbtypes.uintp, size),
                                                 imp_dtor(context, builder.module, inst_type))
        ptr = builder.bitcast(context.nrt.meminfo_data(builder, meminfo), alloc_type.as_pointer())
        builder.store(cgutils.get_null_value(alloc_type), ptr)
        inst = context.make_helper(builder, inst_type)
        inst.meminfo = meminfo
        data = _Utils(context, builder, inst_type).get_data_struct(inst._getvalue())
        for i, (name, fty) in enumerate(inst_type._fields):
            val = context.cast(builder, builder.extract_value(args[1], i), values.types[i], fty)
            context.nrt.incref(builder, fty, val)
            setattr(data, name, val)
        return inst._getvalue()

    return inst_type(tref, values), codegen


_pack = intrinsic(_pack_typing)


def _unpack_typing(typingctx: object, st: StructRefType) -> tuple[Signature, Codegen]:
    """Every field of the structure ``st``, as a tuple in order."""
    tup = nbtypes.Tuple([fty for _, fty in st._fields])

    def codegen(context: Any, builder: Any, sig: Signature, args: Sequence[object]) -> object:
        data = _Utils(context, builder, st).get_data_struct(args[0])
        vals = []
        for name, fty in st._fields:
            v = getattr(data, name)
            context.nrt.incref(builder, fty, v)
            vals.append(v)
        return context.make_tuple(builder, tup, vals)

    return tup(st), codegen


_unpack = intrinsic(_unpack_typing)


def _build_py(tref: TypeRef, values: tuple[object, ...]) -> object:
    return _pack(tref, values)


def _dump_py(st: object) -> object:
    return _unpack(st)


def _digest(*modules: str) -> str:
    """A digest of the modules' source files: part of every cached kernel's name
    (:func:`servesim.sim.schedulers.base.source_digest`)."""
    return _base.source_digest(*modules)


def _compiled_copy(fn: Callable[..., object], tag: str, **options: bool) -> Dispatcher:
    """``fn`` compiled under a name of its own (``fn_tag``), so that numba caches each apart."""
    copy = pytypes.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__qualname__ = f"{fn.__name__}_{tag}"
    copy.__module__ = fn.__module__
    jit: Any = numba.njit
    compiled: Dispatcher = jit(cache=True, **options)(copy)
    return compiled


_BUILDERS: dict[type, tuple[Dispatcher, Dispatcher]] = {}


def _builders(cls: type) -> tuple[Dispatcher, Dispatcher]:
    got = _BUILDERS.get(cls)
    if got is None:
        tag = cls.__name__ + "_" + _digest(cls.__module__, __name__)
        got = _BUILDERS[cls] = (_compiled_copy(_build_py, tag), _compiled_copy(_dump_py, tag))
    return got


_SCALARS: dict[str, type] = {"int": int, "float": float, "bool": bool}


def struct_of(obj: object) -> StructRefProxy:
    """A compiled structure holding ``obj``'s fields (its lists as numpy arrays)."""
    cls = type(obj)
    st = struct_type(cls)
    values = []
    for name, ann in fields_of(cls):
        v = getattr(obj, name)
        dtype = _ARRAY_DTYPES.get(ann)
        if dtype is None:
            v = _SCALARS[ann](v)
        elif not isinstance(v, np.ndarray):
            v = np.array(v, dtype)
        values.append(v)
    packed: StructRefProxy = _builders(cls)[0](nbtypes.TypeRef(st), tuple(values))
    return packed


def dump(cls: type, compiled: StructRefProxy) -> dict[str, Any]:
    """The fields of the compiled structure of ``cls``, by name (arrays as numpy arrays, scalars as
    Python numbers)."""
    out = {}
    for (name, ann), v in zip(fields_of(cls), _builders(cls)[1](compiled), strict=True):
        out[name] = v if ann in _ARRAY_DTYPES else _SCALARS[ann](v)
    return out


def column(value: float, n: int) -> F64 | I64:
    """A column of ``n`` values, as the books run compiled (in Python:
    :func:`servesim.sim.schedulers.base.list_column`)."""
    return np.full(n, value, np.float64 if isinstance(value, float) else np.int64)


# --------------------------------------------------------------------------- the twins
#
# They run compiled only, on the compiled structures, whose columns are arrays: the Protocols below
# name the fields each reads (the Python classes declare them as lists, as the Python loop holds them).


class _Generator(Protocol):
    """The books' acceptance generator, compiled: CPython's Mersenne Twister words and position."""

    mt: I64
    mt_i: int


class _PriceColumns(Protocol):
    """:class:`servesim.sim.loop.Prices`, compiled."""

    dt: F64
    wait: F64
    launch: F64
    ok: I64
    seen: I64
    entries: int
    slots: I64
    hashes: I64
    kstart: I64
    klen: I64
    kpool: I64
    kused: int


class _GapColumns(Protocol):
    """The map of gaps between tokens of :class:`servesim.sim.loop.LoopState`, compiled."""

    gap_keys: F64
    gap_tokens: F64
    gap_slots: I64
    gaps_n: int



def _mt_u32(s: _Generator) -> int:
    """The next 32-bit word of CPython's Mersenne Twister (``genrand_uint32`` in ``_randommodule.c``)."""
    mt = s.mt
    i = s.mt_i
    if i >= 624:
        for kk in range(624):
            y = (mt[kk] & 0x80000000) | (mt[(kk + 1) % 624] & 0x7FFFFFFF)
            v = mt[(kk + 397) % 624] ^ (y >> 1)
            if y & 1:
                v ^= 0x9908B0DF
            mt[kk] = v
        i = 0
    y = mt[i]
    s.mt_i = i + 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return int(y)


def _mt_random(s: _Generator) -> float:
    """CPython's ``random.random()``: 53 bits from two words, ``(a 2^26 + b) / 2^53``."""
    a = _mt_u32(s) >> 5
    b = _mt_u32(s) >> 6
    return float((a * 67108864.0 + b) * (1.0 / 9007199254740992.0))


def _grown(column: Column) -> Column:
    out = np.empty(2 * column.shape[0], column.dtype)
    out[: column.shape[0]] = column
    return out


def _floordiv(a: float, b: float) -> float:
    """CPython's float ``a // b`` (``float_floor_div``: fmod, then the floor of the exact quotient)."""
    mod = np.fmod(a, b)
    div = (a - mod) / b
    if mod != 0.0:
        if (b < 0.0) != (mod < 0.0):
            div -= 1.0
    if div != 0.0:
        floordiv = np.floor(div)
        if div - floordiv > 0.5:
            floordiv += 1.0
    else:
        floordiv = np.copysign(0.0, a / b)
    return float(floordiv)


def _hash(key: I64, klen: int) -> int:
    """A 64-bit hash of ``key[:klen]`` (FNV-1a over the words, then a splitmix finalizer)."""
    h = -3750763034362895579  # 0xcbf29ce484222325 as int64
    for j in range(klen):
        h ^= key[j]
        h *= 1099511628211
    h ^= (h >> 31) & 0x1FFFFFFFF
    h *= -4658895280553007687  # 0xbf58476d1ce4e5b9
    h ^= (h >> 29) & 0x7FFFFFFFF
    return h


def _price_find(t: _PriceColumns, key: I64, klen: int) -> int:
    h = _hash(key, klen)
    slots = t.slots
    mask = slots.shape[0] - 1
    i = h & mask
    while True:
        e = slots[i]
        if e < 0:
            return -1
        if t.hashes[e] == h and t.klen[e] == klen:
            st = t.kstart[e]
            same = True
            for j in range(klen):
                if t.kpool[st + j] != key[j]:
                    same = False
                    break
            if same:
                return int(e)
        i = (i + 1) & mask


def _place(slots: I64, h: int, e: int) -> None:
    mask = slots.shape[0] - 1
    i = h & mask
    while slots[i] >= 0:
        i = (i + 1) & mask
    slots[i] = e


def _price_add(t: _PriceColumns, key: I64, klen: int) -> int:
    e = t.entries
    if e == t.dt.shape[0]:  # twice the room, and the index built anew at most half full
        t.dt = _grown(t.dt)
        t.wait = _grown(t.wait)
        t.launch = _grown(t.launch)
        t.ok = _grown(t.ok)
        t.seen = _grown(t.seen)
        t.hashes = _grown(t.hashes)
        t.kstart = _grown(t.kstart)
        t.klen = _grown(t.klen)
        t.slots = np.full(2 * t.dt.shape[0], -1, np.int64)
        for j in range(e):
            _place(t.slots, t.hashes[j], j)
    while t.kused + klen > t.kpool.shape[0]:
        t.kpool = _grown(t.kpool)
    h = _hash(key, klen)
    st = t.kused
    for j in range(klen):
        t.kpool[st + j] = key[j]
    t.hashes[e] = h
    t.kstart[e] = st
    t.klen[e] = klen
    t.entries = e + 1
    t.kused = st + klen
    _place(t.slots, h, e)
    return int(e)


def _gap_slot(gap: float, mask: int) -> int:
    """Where the gap map looks for ``gap`` first (a hash of its mantissa and exponent)."""
    m, ex = math.frexp(gap)
    h = (int(m * 9007199254740992.0) * 31 + ex) * -4658895280553007687
    return (h ^ ((h >> 32) & 0xFFFFFFFF)) & mask


def _gap_add(L: _GapColumns, gap: float, tokens: float) -> None:
    if 2 * (L.gaps_n + 1) > L.gap_slots.shape[0]:  # twice the room, the index built anew
        L.gap_keys = _grown(L.gap_keys)
        L.gap_tokens = _grown(L.gap_tokens)
        L.gap_slots = np.full(2 * L.gap_keys.shape[0], -1, np.int64)
        mask = L.gap_slots.shape[0] - 1
        for e in range(L.gaps_n):
            i = _gap_slot(L.gap_keys[e], mask)
            while L.gap_slots[i] >= 0:
                i = (i + 1) & mask
            L.gap_slots[i] = e
    slots = L.gap_slots
    mask = slots.shape[0] - 1
    i = _gap_slot(gap, mask)
    while True:
        e = slots[i]
        if e < 0:
            e = L.gaps_n
            L.gaps_n = e + 1
            L.gap_keys[e] = gap
            L.gap_tokens[e] = 0.0 + tokens
            slots[i] = e
            return
        if L.gap_keys[e] == gap:
            L.gap_tokens[e] = L.gap_tokens[e] + tokens
            return
        i = (i + 1) & mask


_TWINS: dict[Callable[..., Any], Callable[..., Any]] = {
    _base.draw: _mt_random, _base.grown: _grown,
    _loop.price_find: _price_find, _loop.price_add: _price_add, _loop.gap_add: _gap_add,
    _loop.floordiv: _floordiv,
}
for _py, _compiled in _TWINS.items():
    overload(_py, jit_options=_INLINE, strict=False)(_implemented_by(_compiled))
for _helper in (_mt_u32, _hash, _place, _gap_slot, _grown):
    overload(_helper, jit_options=_INLINE, strict=False)(_implemented_by(_helper))
for _fn in _loop.FUNCTIONS:
    overload(_fn, jit_options=_INLINE, strict=False)(_implemented_by(_fn))
assert {f.__name__ for f in _TWINS} == set(_loop.TWINS) | set(_base.TWINS)

def _pct_sorted_py(s: F64, count: int, q: int) -> float:
    """``batching._pct_sorted``: the q-th percentile of sorted values, interpolated linearly."""
    pos = (count - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, count - 1)
    return float(s[lo] + (s[hi] - s[lo]) * (pos - lo))


def _sample_stats_py(x: F64, s: F64, count: int, two: float) -> tuple[float, float, float, float]:
    """Mean, median, 99th percentile and standard deviation of ``x[:count]`` (``s``: the same values
    sorted, or partitioned at the places the percentiles read), computed as
    ``batching._mean_pct_std`` computes them from a list: sums left to right, percentiles
    interpolated between sorted values, and the squares by the C library's ``pow``
    (``two`` is 2.0, given at run time so that the compiler keeps the call: ``pow(d, 2.0)`` and
    ``d * d`` differ in the last bit for about one value in a thousand)."""
    total = 0.0
    for i in range(count):
        total += x[i]
    mean = total / count
    sq = 0.0
    for i in range(count):
        sq += abs(x[i] - mean) ** two  # CPython's float ** int: pow() of the absolute value
    return mean, _pct_sorted(s, count, 50), _pct_sorted(s, count, 99), math.sqrt(sq / count)


_pct_sorted = numba.njit(cache=True)(_pct_sorted_py)
_sample_stats = numba.njit(cache=True)(_sample_stats_py)


def _ranks(count: int, q: int) -> tuple[int, int]:
    """The places in sorted order that the q-th percentile of ``count`` values reads
    (:func:`_pct_sorted_py`'s ``lo`` and ``hi``)."""
    lo = math.floor((count - 1) * q / 100.0)
    return lo, min(lo + 1, count - 1)


def stats(x: F64, count: int) -> tuple[float, float, float, float]:
    """``batching._mean_pct_std`` of ``x[:count]``, compiled (the statistics of a long run take
    longer than its loop in Python).  The percentiles read only the four places of the sorted
    values they interpolate between, so the values are partitioned at those places (each holds
    what a full sort would put there), not sorted: a tenth of the time."""
    if count == 0:
        return math.nan, math.nan, math.nan, math.nan
    part = np.partition(x[:count], sorted({*_ranks(count, 50), *_ranks(count, 99)}))
    mean, med, p99, std = _sample_stats(x, part, count, 2.0)
    return float(mean), float(med), float(p99), float(std)


# --------------------------------------------------------------------------- the loop, per policy

_CORES: dict[type, Dispatcher] = {}


def core_for(policy: type[Scheduler]) -> Dispatcher:
    """:func:`servesim.sim.loop.core` compiled for the policy class ``policy`` (cached on disk under
    a name with the policy's, and a digest of every module compiled into it)."""
    got = _CORES.get(policy)
    if got is None:
        for cls in (EngineState, _loop.LoopState, _loop.Prices, policy):
            struct_type(cls)
            _builders(cls)
        got = _CORES[policy] = _compiled_copy(_loop.core, _base.core_tag(policy), _nrt=True)
    return got


def core_signature(policy: type[Scheduler]) -> tuple[Any, ...]:
    """The one signature :func:`servesim.sim.loop.core` is compiled and called at for ``policy``: the
    four books' structures, then the price (float), whether it was measured (int), its launch wait
    and launch time (floats)."""
    books = tuple(struct_type(c) for c in (EngineState, _loop.LoopState, policy, _loop.Prices))
    return (*books, nbtypes.float64, nbtypes.int64, nbtypes.float64, nbtypes.float64)


def compile_kernels(policies: tuple[type[Scheduler], ...] | None = None) -> int:
    """Compile (or load from numba's disk cache) the loop for each shipped policy (or each of
    ``policies``), e.g. before timing a run; how many were compiled afresh."""
    fresh = 0
    for cls in policies or tuple(SCHEDULERS.values()):
        core = core_for(cls)
        core.compile(core_signature(cls))
        fresh += sum(core.stats.cache_misses.values())
    return fresh


_base.remember_source(__name__)
