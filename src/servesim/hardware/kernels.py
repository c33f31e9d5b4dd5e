"""Measured kernel latencies of three serving engines on four NVIDIA GPUs, looked up by shape.

The tables (``data/kernels/<gpu>.json.gz`` for vLLM, ``<gpu>_sglang.json.gz`` for SGLang and
``<gpu>_trtllm.json.gz`` for TensorRT-LLM; one per GPU in :data:`GPU_TABLES` and engine in
:data:`ENGINE_TABLES`) are derived from per-kernel timings that NVIDIA's aiconfigurator project
measured with each engine (Apache-2.0; origin, license, the kernels kept per engine and every
change made: ``data/kernels/NOTICE.md``; ``scripts/build_kernel_tables.py`` rebuilds them).
Versions: vLLM 0.24.0, SGLang 0.5.14 and TensorRT-LLM 1.3.0rc20 on the H100, H200, B200, B300
(HGX), GB200 and GB300 (NVL72; SGLang's dense tables are not shipped for the B300: its folder's
were measured on a GB300, so SGLang is priced there with vLLM's, with a note);
vLLM 0.14.0 and SGLang 0.5.10 on the A100 (TensorRT-LLM 1.0.0 was measured there too but is not
shipped: its decode attention reads the KV cache up to 1.7x faster than the A100's HBM allows,
NOTICE.md).  :func:`tables_for` returns one engine's tables (vLLM's by default) or None,
:func:`engine_tables` the engine's or else vLLM's, with a note saying which.  Each holds, for
one GPU and engine:

* **GEMM** latency by dtype (``bf16``; ``fp8`` per-tensor scaled, not on the A100; ``fp4``
  NVFP4, B200 only; ``fp8_block``, 128 x 128 block-scaled FP8, SGLang and TensorRT-LLM on the
  H100, H200 and B200 only) and shape: an ``(m x k)`` activation times a ``(k x n)`` weight,
  ``m`` = tokens in the batch.  Grid: m 1..32768 (1..8192 for vLLM and TensorRT-LLM on the
  A100), n and k 32..65536 (128..65536 for fp8_block and SGLang / TensorRT-LLM fp4).
* **decode attention**: one decode step of ``batch`` sequences with ``context`` tokens each
  already in the KV cache, by (kv dtype, query heads, KV heads, head dim) per GPU, in the
  attention kernel a default deployment of the engine runs there; grid batch 1..2048 x context
  1..131071 (minus the largest batch x context, which did not fit).
* **prefill attention**: a fresh causal prefill of ``batch`` prompts of ``prompt`` tokens each,
  same keys; grid batch 1..256 x prompt 1..16384 (minus the largest).
* **all-reduce**: the engine's own all-reduce under CUDA graphs (NCCL above its size limit), by
  GPU count (2, 4, 8) and message size in bytes (256 B .. 1 GiB).  Over more GPUs than a node
  holds, the node's time, no less than NCCL's own multi-node latency model
  (:func:`nccl_multinode_allreduce_us`: 27.5 us over two nodes of 8), plus the inter-node ring.
* the GPU's datasheet numbers as aiconfigurator states them, and **fitted roofline
  efficiencies** (:attr:`KernelTables.efficiency`).

Units: latency in milliseconds (``Lookup.ms``); sizes in bytes; rates in bytes/s and FLOP/s;
powers of ten throughout (GB = 1e9 bytes) except where a name says GiB/MiB.

Interpolation.  Between grid points a lookup is multilinear in ``log(latency)`` over
``log(axis)``: a kernel's time is close to a power law of each size (flat at the launch floor,
proportional to m, n k, batch x context, prompt^2 ... once it is bound by bandwidth or FLOPs),
and log-log interpolation is exact for any power law, so it follows each regime between points
where linear interpolation would bend.  The result lies between the values of the cell's
corners, and a grid point reads back its stored value exactly.  The stored tables are each
point's monotone envelope (the least time measured at any point at least as large on every axis,
NOTICE.md), so lookups inside a grid never fall when a size grows.  ``m``,
``batch`` and ``context`` may be non-integer (averages).

Outside the measured grid (above or below an axis, or a grid cell that was not measured) a
lookup is a **roofline estimate anchored to the table**: the table's time at the nearest point
of the grid (the query clamped to the axes) multiplied by ``roofline(query) /
roofline(clamped)``, where ``roofline`` is ``max(floor, bytes / (memory efficiency x HBM),
FLOPs / (compute efficiency x peak))`` with the efficiencies and floor fitted to that table.
Where the clamped point's cell was not measured (the largest batch x context of the attention
grids did not fit on the GPU), the grid's unmeasured points are first filled, in order, from
their neighbours one step below scaled by the roofline ratio (:meth:`_Grid.filled`), and the
filled grid is interpolated: monotone like the measured one.  Every estimate is continuous at
the edge of the grid and follows the fitted roofline away from it; ``Lookup.measured`` is then
False and ``Lookup.note`` says why.

Attention head shapes.  A (heads, kv_heads, head_dim) that was not measured uses the nearest
measured one of the same KV dtype (nearest head_dim first, then nearest heads and kv_heads in
log scale) times the ratio of the two shapes' roofline times at the query: decode work is the
KV read, ``batch x context x kv_heads x head_dim x 2 x kv bytes`` plus ``batch x heads x
head_dim x 4`` bytes for q and the output; prefill work is ``4 x batch x heads x head_dim x
prompt (prompt + 1) / 2`` causal FLOPs.  (The ratio is the work ratio once both are past the
fitted floor.)  Such a lookup has ``measured = False``.  A KV dtype a GPU has no table for (fp8
on the A100) uses the bf16 table, decode scaled by the KV bytes, also ``measured = False``.

GPUs without tables.  A GPU with no measured tables (an MI300X, an L40S, a GPU of a
``--catalog`` file) is priced with the tables of the **nearest measured GPU** scaled by the
roofline (:class:`ScaledTables`, chosen by :func:`nearest_measured`): every kernel time
looked up in the borrowed table is multiplied by ``roofline_target(kernel) /
roofline_measured(kernel)``, the table's own fitted roofline (the ``*_roofline_ms`` methods:
launch floor, bytes over the fitted share of HBM, FLOPs over the fitted share of the dtype's
peak, all-reduce bytes over the fitted share of the interconnect) evaluated once on the target
GPU's datasheet peaks and once on the measured GPU's.  So a memory-bound kernel scales by the
HBM-bandwidth ratio, a compute-bound one by the dtype's FLOP/s ratio, an all-reduce by the
interconnect ratio, and a launch-bound one not at all (the floor is the same on both sides):
each kernel by the bound that limits it, at the borrowed table's measured efficiency.  The
nearest measured GPU is one of the same family by name (``h``/``gh`` + digits: Hopper;
``b``/``gb`` + digits: Blackwell; ``a`` + digits: Ampere) whose tables cover the target's
tensor-core dtypes, else any that covers them; among those the closest in
``|log(HBM ratio)| + |log(BF16 peak ratio)|`` (an MI300X borrows the H200's).  A target
peak more than :data:`SCALE_LIMIT` (1e4) times from the borrowed GPU's, either way, is refused
(:class:`ParameterError`) rather than priced at times no measurement supports.

Standard library only; a table is read on first use (about 15 ms; the logs of a grid are taken
once, on its first off-grid lookup) and cached.  A lookup inside the grid takes 1.5-3 us.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from servesim._catalogfile import read_toml
from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.dtypes import BYTES_PER_VALUE
from servesim.hardware.engines import (
    default_engine,
    display_name,
    engine_aliases,
    kernel_file_stem,
    tables_fallback,
)
from servesim.hardware.topology import Topology, topology_for

__all__ = ["ENGINE_TABLES",  # noqa: F822 (module __getattr__)
           "GPU_TABLES", "MEASURED_PEAKS", "SCALE_LIMIT", "KernelTables", "Lookup", "ScaledTables",
           "borrowed_tables", "engine_label", "engine_tables", "engines_for", "nearest_measured",
           "table_name", "tables_for"]

GPU_TABLES: tuple[str, ...] = ("a100_sxm", "h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300")
"""GPUs with measured kernel tables (vLLM's; see :func:`engines_for` for the other engines)."""

MEASURED_PEAKS: Mapping[str, tuple[float, float, tuple[str, ...]]] = {
    # table -> (HBM bytes/s, dense BF16 FLOP/s, weight dtypes with tensor cores), as each table's
    # ``system`` block states them (tests/hardware/test_gpu_fallback.py checks they agree)
    "a100_sxm": (2.039e12, 312e12, ("bf16",)),
    "h100_sxm": (3.35e12, 989e12, ("bf16", "fp8")),
    "h200_sxm": (4.8e12, 989e12, ("bf16", "fp8")),
    "b200_sxm": (7.7e12, 2250e12, ("bf16", "fp8", "fp4")),
    "b300_sxm": (7.75e12, 2250e12, ("bf16", "fp8", "fp4")),
    "gb200": (8e12, 2500e12, ("bf16", "fp8", "fp4")),
    "gb300": (8e12, 2500e12, ("bf16", "fp8", "fp4")),
}
"""The peaks :func:`nearest_measured` compares a GPU without tables to (no table is read to choose)."""

_TABLE_FAMILY = {"a100_sxm": "ampere", "h100_sxm": "hopper", "h200_sxm": "hopper", "b200_sxm": "blackwell",
                 "b300_sxm": "blackwell", "gb200": "blackwell", "gb300": "blackwell"}
_FAMILY_NAMES = (  # a GPU name (any case, after an optional vendor prefix) -> its family
    (re.compile(r"(?:nvidia[-_ ]?)?g?h\d{2,3}"), "hopper"),
    (re.compile(r"(?:nvidia[-_ ]?)?g?b\d{3}"), "blackwell"),
    (re.compile(r"(?:nvidia[-_ ]?)?a\d{2,3}"), "ampere"),
)


def __getattr__(name: str) -> tuple[str, ...]:
    """``ENGINE_TABLES``: the serving engines whose kernels were measured (``KernelTables.engine_name``):
    every engine of engines.toml (read on first use)."""
    if name == "ENGINE_TABLES":
        return _engine_keys()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@cache
def _engine_keys() -> tuple[str, ...]:
    return tuple(dict.fromkeys(engine_aliases().values()))


@cache
def _engine_aliases() -> dict[str, str]:
    return engine_aliases()

_DATA = Path(__file__).parent / "data" / "kernels"

_ALIASES: dict[str, str] = {
    "h100": "h100_sxm", "h100-sxm": "h100_sxm", "h100_sxm": "h100_sxm",
    "h200": "h200_sxm", "h200-sxm": "h200_sxm", "h200_sxm": "h200_sxm",
    "a100-80gb": "a100_sxm", "a100-sxm": "a100_sxm", "a100_sxm": "a100_sxm",
    "b200": "b200_sxm", "b200-sxm": "b200_sxm", "b200_sxm": "b200_sxm",
    "b300": "b300_sxm", "b300-sxm": "b300_sxm", "b300_sxm": "b300_sxm",
    "gb200": "gb200", "gb300": "gb300",
}

KV_DTYPES_KNOWN: tuple[str, ...] = ("bf16", "fp8")
_GEMM_ORDER = ("bf16", "fp8", "fp4", "fp8_block")
_ACT_BYTES = {d: BYTES_PER_VALUE["fp8" if d == "fp8_block" else d] for d in _GEMM_ORDER}
"""Bytes per activation value read by the GEMM (quantized GEMMs quantize their input; a block-FP8
GEMM's input is FP8 with one scale per 128 values, not counted); weights and KV values are
:data:`~servesim.hardware.dtypes.BYTES_PER_VALUE`."""
_OUT_BYTES = 2.0


def table_name(gpu_name: str) -> str | None:
    """The kernel table for a servesim GPU name (``h100-sxm``, ``h200``, ``a100-80gb``, ``b200``
    and the table names themselves), or None when there is none."""
    if not isinstance(gpu_name, str):
        return None
    return _ALIASES.get(gpu_name.strip().lower())


def _engine(engine: str) -> str:
    """The engine key (``vllm``, ``sglang``, ``trtllm``) of ``engine``; ParameterError if unknown."""
    key = _engine_aliases().get(engine.strip().lower()) if isinstance(engine, str) else None
    if key is None:
        raise ParameterError("engine", engine, f"one of {', '.join(_engine_keys())}")
    return key


def engine_label(engine: str) -> str:
    """The display name of an engine: ``vLLM``, ``SGLang`` or ``TensorRT-LLM``."""
    return display_name(_engine(engine))


def _file(name: str, engine: str) -> Path:
    return _DATA / f"{kernel_file_stem(engine, name)}.json.gz"


@cache
def _shipped(name: str, engine: str) -> bool:
    return _file(name, engine).is_file()


def engines_for(gpu_name: str) -> tuple[str, ...]:
    """The engines with measured tables for ``gpu_name`` (in :data:`ENGINE_TABLES` order)."""
    name = table_name(gpu_name)
    if name is None:
        return ()
    return tuple(e for e in _engine_keys() if _shipped(name, e))


def tables_for(gpu_name: str, engine: str | None = None) -> KernelTables | None:
    """The measured tables of ``engine`` (an engine of engines.toml; None: the default engine,
    :func:`~servesim.hardware.engines.default_engine`) on ``gpu_name`` (loaded once, then cached), or
    None if that GPU has none for that engine.  Any other engine name raises :class:`ParameterError`."""
    key = _engine(default_engine() if engine is None else engine)
    name = table_name(gpu_name)
    if name is None or not _shipped(name, key):
        return None
    return _load(name, key)


def engine_tables(gpu_name: str, engine: str) -> tuple[KernelTables | None, str]:
    """The tables to price ``engine`` on ``gpu_name`` with, and a one-line note saying which.

    The engine's own tables where there are some (note ``"kernel tables: NVIDIA H200,
    TensorRT-LLM 1.3.0rc20"``); else vLLM's on that GPU (``"no SGLang tables for a100_sxm:
    vLLM 0.14.0's used"``); else None (``"no measured kernel tables for mi300x"``)."""
    key = _engine(engine)
    t = tables_for(gpu_name, key)
    if t is not None:
        return t, f"kernel tables: {t.device}, {t.engine}"
    name = table_name(gpu_name) or str(gpu_name)
    v = tables_for(gpu_name, tables_fallback())
    if v is not None:
        return v, f"no {display_name(key)} tables for {name}: {v.engine}'s used"
    return None, f"no measured kernel tables for {name}"


@cache
def _load(name: str, engine: str) -> KernelTables:
    with gzip.open(_file(name, engine), "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    return KernelTables(doc)


class Lookup(NamedTuple):
    """One kernel's latency."""

    ms: float
    """Latency in milliseconds."""
    measured: bool
    """True: interpolated inside the measured grid; False: estimated (see ``note``)."""
    note: str = ""
    """For estimates: why, and how it was made."""


# --------------------------------------------------------------------------- grids


class _Grid:
    """A dense grid of latencies (ms) over sorted positive axes, C order, None where not measured."""

    __slots__ = ("_log", "axes", "laxes", "names", "shape", "strides", "values")

    def __init__(self, names: Sequence[str], axes: Sequence[Sequence[float]],
                 values: list[float | None]) -> None:
        self.names = tuple(names)
        self.axes = tuple(tuple(float(x) for x in a) for a in axes)
        self.laxes = tuple(tuple(math.log(x) for x in a) for a in self.axes)
        self.shape = tuple(len(a) for a in self.axes)
        strides = [1] * len(self.shape)
        for i in range(len(self.shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * self.shape[i + 1]
        self.strides = tuple(strides)
        if len(values) != math.prod(self.shape):
            raise ValueError("grid size does not match its axes")
        self.values = values
        self._log: list[float | None] | None = None

    def logs(self) -> list[float | None]:
        if self._log is None:
            self._log = [None if v is None else math.log(v) for v in self.values]
        return self._log

    def clamp(self, point: Sequence[float]) -> tuple[float, ...]:
        return tuple(min(max(x, a[0]), a[-1]) for x, a in zip(point, self.axes, strict=True))

    def interp(self, point: Sequence[float]) -> float | None:
        """Log-log multilinear value at ``point``; None if it is outside the axes or a needed corner
        was not measured."""
        base = 0
        corners: list[tuple[int, float]] | None = None  # (flat index, weight), built only off-grid
        for x, ax, la, st in zip(point, self.axes, self.laxes, self.strides, strict=True):
            i = bisect_right(ax, x) - 1
            if i < 0:
                return None
            last = len(ax) - 1
            if i >= last:
                if x > ax[last]:
                    return None
                base += last * st
                continue
            base += i * st
            if x == ax[i]:
                continue
            w = (math.log(x) - la[i]) / (la[i + 1] - la[i])
            if corners is None:
                corners = [(0, 1.0 - w), (st, w)]
            else:
                corners = [(f, c * (1.0 - w)) for f, c in corners] + [(f + st, c * w) for f, c in corners]
        if corners is None:  # a grid point
            return self.values[base]
        logs = self._log if self._log is not None else self.logs()
        acc = 0.0
        for off, weight in corners:
            if weight == 0.0:
                continue
            v = logs[base + off]
            if v is None:
                return None
            acc += weight * v
        return math.exp(acc)

    def filled(self, roof: Callable[[tuple[float, ...]], float]) -> _Grid:
        """This grid with every unmeasured point filled (computed once per grid, on first need).

        In C order, so that the points below come first, an unmeasured point takes the largest of
        its measured or filled neighbours one step below on each axis, scaled by the roofline
        ratio ``roof(point) / roof(neighbour)`` (at least 1).  The measured points are the
        monotone envelope (``scripts/build_kernel_tables.py``) and the unmeasured ones lie at the
        top of the grid (the largest batch x context that did not fit), so the filled grid stays
        monotone, and so does its interpolation.  A point with no neighbour below stays empty."""
        got = _FILLED.get(id(self))
        if got is not None and got[0] is self:
            return got[1]
        values = list(self.values)
        for flat, v in enumerate(values):
            if v is not None:
                continue
            idx, rest = [], flat
            for st in self.strides:
                idx.append(rest // st)
                rest %= st
            p = tuple(a[i] for a, i in zip(self.axes, idx, strict=True))
            best = None
            for axis, i in enumerate(idx):
                if i == 0:
                    continue
                nb = values[flat - self.strides[axis]]
                if nb is None:
                    continue
                q = tuple(a[j - (1 if k == axis else 0)]
                          for k, (a, j) in enumerate(zip(self.axes, idx, strict=True)))
                est = nb * max(1.0, roof(p) / roof(q))
                best = est if best is None else max(best, est)
            values[flat] = best
        grid = _Grid(self.names, self.axes, values)
        _FILLED[id(self)] = (self, grid)
        return grid

    def estimate(self, point: tuple[float, ...], roof: Callable[[tuple[float, ...]], float],
                 what: str, how: str) -> Lookup:
        """The anchored roofline estimate where :meth:`interp` has no value (module docstring)."""
        clamped = self.clamp(point)
        v = self.interp(clamped)
        reasons = []
        for name, x, c, a in zip(self.names, point, clamped, self.axes, strict=True):
            if x > c:
                reasons.append(f"{name}={x:g} above the measured {a[-1]:g}")
            elif x < c:
                reasons.append(f"{name}={x:g} below the measured {a[0]:g}")
        inside = ", ".join(f"{n}={x:g}" for n, x in zip(self.names, clamped, strict=True))
        if v is None:
            v = self.filled(roof).interp(clamped)
            reasons.append(f"({inside}) not measured: filled from the measured points below")
            if v is None:
                return Lookup(roof(point), False, f"{what}: {'; '.join(reasons)}: roofline {how}")
        ms = v * roof(point) / roof(clamped)
        why = "; ".join(reasons)
        return Lookup(ms, False, f"{what}: {why}: ({inside}) scaled by the roofline {how}")


_FILLED: dict[int, tuple[_Grid, _Grid]] = {}
"""Filled copies of grids, keyed by the grid's identity (grids live as long as their tables)."""


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


# --------------------------------------------------------------------------- tables


class GPUSystem:
    """The identity and datasheet numbers every shipped table file holds in its ``system`` block,
    shared by the dense :class:`KernelTables` and the MoE tables (:mod:`servesim.hardware.moe_kernels`)."""

    name: str
    device: str
    engine: str
    engine_name: str
    hbm_bytes_per_s: float
    flops_per_s: dict[str, float]
    memory_bytes: float
    nvlink_bytes_per_s: float
    internode_bytes_per_s: float
    gpus_per_node: int
    topology: Topology
    domain_gpus: int
    scaleout_bytes_per_s: float

    def _read_system(self, doc: dict[str, Any]) -> None:
        sysd = doc["system"]
        self.name = doc["name"]
        self.device = doc["device"]
        self.engine = doc["engine"]
        self.engine_name = doc["engine_name"]
        self.hbm_bytes_per_s = float(sysd["hbm_bytes_per_s"])
        self.flops_per_s = {k: float(v) for k, v in sysd["flops_per_s"].items()}
        self.memory_bytes = float(sysd["memory_bytes"])
        self.nvlink_bytes_per_s = float(sysd["nvlink_bytes_per_s"])
        self.internode_bytes_per_s = float(sysd["internode_bytes_per_s"])
        self.gpus_per_node = int(sysd["gpus_per_node"])
        self.topology = topology_for(self.name, self.gpus_per_node, self.internode_bytes_per_s)
        self.domain_gpus = self.topology.domain_gpus  # one NVLink domain (72 on an NVL72 rack)
        self.scaleout_bytes_per_s = self.topology.scale_out_bytes_per_s  # between domains, a GPU


class KernelTables(GPUSystem):
    """The measured kernel tables of one GPU and engine (see the module docstring).

    Attributes: ``name`` (table name, the GPU's), ``device`` (as the measuring GPU reported
    itself), ``engine`` (``"vLLM 0.24.0"``, ``"SGLang 0.5.14"``, ``"TensorRT-LLM 1.3.0rc20"``
    ...), ``engine_name`` (``"vllm"``, ``"sglang"`` or ``"trtllm"``), ``hbm_bytes_per_s``,
    ``flops_per_s`` (dense tensor-core peak per GEMM dtype), ``memory_bytes``,
    ``nvlink_bytes_per_s`` (per GPU, each direction), ``gemm_dtypes``, ``kv_dtypes``,
    ``efficiency`` (the fitted numbers, as stored) and ``memory_efficiency`` (the share of HBM
    bandwidth a streaming kernel reaches: the bf16 GEMM fit, for kernels no table holds).
    ``sources`` names the kernel (aiconfigurator's ``kernel_source``) behind each table, and
    ``attn_dtype`` the query dtype of each attention table by kind and KV dtype (bf16 everywhere
    except SGLang's fp8-KV prefill, measured with fp8 queries as SGLang runs it:
    ``attn_dtype["prefill"]["fp8"] == "fp8"``).
    """

    gemm_dtypes: tuple[str, ...]
    kv_dtypes: tuple[str, ...]
    efficiency: dict[str, Any]
    memory_efficiency: float
    attn_dtype: dict[str, dict[str, str]]

    def __init__(self, doc: dict[str, Any]) -> None:
        if doc.get("format") != 1:
            raise ValueError(f"kernel table format {doc.get('format')!r} is not supported")
        self._read_system(doc)
        self.gemm_dtypes = tuple(d for d in _GEMM_ORDER if d in doc["gemm"])
        self.kv_dtypes = tuple(d for d in KV_DTYPES_KNOWN if d in doc["decode"]["ms"])
        self.efficiency = doc["efficiency"]
        self._eff: dict[str, dict[str, dict[str, float]]] = {
            kind: {key: {f: float(v) for f, v in fits.items()} for key, fits in by_key.items()}
            for kind, by_key in self.efficiency.items()}
        self.memory_efficiency = self._eff["gemm"]["bf16"]["memory"]
        self.sources = {"gemm": {k: v["kernel_source"] for k, v in doc["gemm"].items()},
                        "decode": doc["decode"]["kernel_source"], "prefill": doc["prefill"]["kernel_source"],
                        "allreduce": doc["allreduce"]["kernel_source"]}
        self.attn_dtype = {kind: dict(doc[kind].get("attn_dtype", {kv: "bf16" for kv in self.kv_dtypes}))
                           for kind in ("decode", "prefill")}
        self._doc = doc
        self._gemm: dict[str, _Grid] = {}
        self._attn: dict[tuple[str, str, tuple[int, int, int]], _Grid] = {}
        self._nearest: dict[tuple[str, str, tuple[int, int, int]], tuple[int, int, int]] = {}
        self._ar: dict[int, _Grid] = {}

    def __repr__(self) -> str:
        return f"KernelTables({self.name!r}: {self.device}, {self.engine})"

    # ------------------------------------------------------------------ GEMM

    def _gemm_grid(self, dtype: str) -> _Grid:
        g = self._gemm.get(dtype)
        if g is None:
            if dtype not in self.gemm_dtypes:
                have = ", ".join(self.gemm_dtypes)
                raise ParameterError("dtype", dtype, f"one of {have} (the GEMM dtypes of {self.name})")
            t = self._doc["gemm"][dtype]
            g = self._gemm[dtype] = _Grid(("m", "n", "k"), (t["m"], t["n"], t["k"]), t["ms"])
        return g

    def gemm_roofline_ms(self, dtype: str, m: float, n: float, k: float) -> float:
        """Fitted roofline of a GEMM in ms: max(floor, bytes / (fitted share x HBM), FLOPs / (fitted
        share x peak)); bytes are the weights, the activations in (quantized for fp8/fp4) and the
        bf16 output."""
        e = self._eff["gemm"][dtype]
        nbytes = n * k * BYTES_PER_VALUE[dtype] + m * k * _ACT_BYTES[dtype] + m * n * _OUT_BYTES
        t = max(nbytes / (e["memory"] * self.hbm_bytes_per_s),
                2 * m * n * k / (e["compute"] * self.flops_per_s[dtype]))
        return max(e["floor_ms"], 1e3 * t)

    def gemm(self, dtype: str, m: float, n: int, k: int) -> Lookup:
        """Latency of an (m x k) by (k x n) GEMM in ``dtype`` (weights and math; output bf16)."""
        grid = self._gemm.get(dtype) or self._gemm_grid(dtype)
        point = (_positive("m", m), _positive("n", n), _positive("k", k))
        v = grid.interp(point)
        if v is not None:
            return Lookup(v, True)
        e = self._eff["gemm"][dtype]
        return grid.estimate(point, lambda p: self.gemm_roofline_ms(dtype, *p), f"gemm {dtype}",
                             f"at fitted {_pct(e['memory'])} of HBM / {_pct(e['compute'])} of peak")

    # ------------------------------------------------------------------ attention

    def _attn_grid(self, kind: str, kv: str, key: tuple[int, int, int]) -> tuple[_Grid, tuple[int, int, int]]:
        """The grid of ``key`` (or of the nearest measured key) and the key it holds."""
        got = self._nearest.get((kind, kv, key))
        if got is None:
            tables = self._doc[kind]["ms"][kv]
            if f"{key[0]},{key[1]},{key[2]}" in tables:
                got = key
            else:
                h, g, d = key
                have = [(int(a), int(b), int(c)) for a, b, c in (s.split(",") for s in tables)]
                got = min(have, key=lambda c: (abs(math.log2(d / c[2])),
                                               abs(math.log2(h / c[0])) + abs(math.log2(g / c[1])), c))
            self._nearest[(kind, kv, key)] = got
        grid = self._attn.get((kind, kv, got))
        if grid is None:
            t = self._doc[kind]
            second = "context" if kind == "decode" else "prompt"
            grid = self._attn[(kind, kv, got)] = _Grid(("batch", second), (t["batch"], t[second]),
                                                       t["ms"][kv][f"{got[0]},{got[1]},{got[2]}"])
        return grid, got

    def decode_roofline_ms(self, batch: float, context: float, heads: int, kv_heads: int, head_dim: int,
                           kv_dtype: str, *, fit_kv: str | None = None) -> float:
        """Fitted roofline of decode attention, ms: max(floor, bytes read / (fitted HBM share x HBM))."""
        e = self._eff["decode"][fit_kv or kv_dtype]
        kvb = BYTES_PER_VALUE[kv_dtype]
        nbytes = batch * (context * kv_heads * head_dim * 2 * kvb + heads * head_dim * 4)
        return max(e["floor_ms"], 1e3 * nbytes / (e["memory"] * self.hbm_bytes_per_s))

    def prefill_roofline_ms(self, batch: float, prompt: float, heads: int, kv_heads: int, head_dim: int,
                            kv_dtype: str, *, fit_kv: str | None = None) -> float:
        """Fitted roofline of causal prefill attention, ms: max(floor, FLOPs / (fitted share x bf16 peak),
        bytes / (decode's fitted HBM share x HBM))."""
        fk = fit_kv or kv_dtype
        e = self._eff["prefill"][fk]
        flops = 4 * batch * heads * head_dim * prompt * (prompt + 1) / 2
        nbytes = batch * prompt * head_dim * (heads * 4 + kv_heads * 2 * BYTES_PER_VALUE[kv_dtype])
        mem = self._eff["decode"][fk]["memory"]
        t = max(flops / (e["compute"] * self.flops_per_s["bf16"]), nbytes / (mem * self.hbm_bytes_per_s))
        return max(e["floor_ms"], 1e3 * t)

    def _attention(self, kind: str, batch: float, length: float, heads: int, kv_heads: int, head_dim: int,
                   kv_dtype: str) -> Lookup:
        b = _positive("batch", batch)
        s = _positive("context" if kind == "decode" else "prompt", length)
        h = _count("heads", heads)
        g = _count("kv_heads", kv_heads, h)
        d = _count("head_dim", head_dim)
        if kv_dtype not in KV_DTYPES_KNOWN:
            raise ParameterError("kv_dtype", kv_dtype, f"one of {', '.join(KV_DTYPES_KNOWN)}")
        kv = kv_dtype if kv_dtype in self.kv_dtypes else "bf16"
        grid, got = self._attn_grid(kind, kv, (h, g, d))
        v = grid.interp((b, s))
        if v is not None and got == (h, g, d) and kv == kv_dtype:
            return Lookup(v, True)
        roof = self.decode_roofline_ms if kind == "decode" else self.prefill_roofline_ms
        gh, gg, gd = got
        if v is not None:
            lk = Lookup(v, True)
        else:
            e = self._eff[kind][kv]
            how = (f"at fitted {_pct(e['memory'])} of HBM" if kind == "decode"
                   else f"at fitted {_pct(e['compute'])} of bf16 peak")
            lk = grid.estimate((b, s), lambda p: roof(p[0], p[1], gh, gg, gd, kv),
                               f"{kind} attention {kv}-KV", how)
        notes = [lk.note] if lk.note else []
        scale = 1.0
        if got != (h, g, d):
            scale = roof(b, s, h, g, d, kv) / roof(b, s, gh, gg, gd, kv)
            notes.append(f"{kind} attention heads/kv_heads/head_dim {h}/{g}/{d} not measured on {self.name}: "
                         f"nearest measured {gh}/{gg}/{gd} scaled by the work ratio x{scale:.3g}")
        if kv != kv_dtype:
            r = roof(b, s, h, g, d, kv_dtype, fit_kv=kv) / roof(b, s, h, g, d, kv, fit_kv=kv)
            scale *= r
            notes.append(f"no {kv_dtype} KV cache measured on {self.name}: the {kv}-KV table scaled by "
                         f"the KV bytes x{r:.3g}")
        if scale == 1.0 and not notes:
            return lk
        return Lookup(lk.ms * scale, lk.measured and got == (h, g, d) and kv == kv_dtype, "; ".join(notes))

    def decode_attention(self, batch: float, context: float, heads: int, kv_heads: int, head_dim: int,
                         kv_dtype: str) -> Lookup:
        """One decode step's attention for ``batch`` sequences with ``context`` tokens each in the KV
        cache; ``heads`` and ``kv_heads`` per GPU (after tensor parallelism)."""
        return self._attention("decode", batch, context, heads, kv_heads, head_dim, kv_dtype)

    def prefill_attention(self, batch: float, prompt: float, heads: int, kv_heads: int, head_dim: int,
                          kv_dtype: str) -> Lookup:
        """Causal attention of a fresh prefill of ``batch`` prompts of ``prompt`` tokens each (no cached
        prefix); heads per GPU."""
        return self._attention("prefill", batch, prompt, heads, kv_heads, head_dim, kv_dtype)

    # ------------------------------------------------------------------ all-reduce

    def _ar_grid(self, gpus: int) -> _Grid:
        g = self._ar.get(gpus)
        if g is None:
            t = self._doc["allreduce"]
            i = t["gpus"].index(gpus)
            ns = len(t["bytes"])
            g = self._ar[gpus] = _Grid(("bytes",), (t["bytes"],), t["ms"][i * ns:(i + 1) * ns])
        return g

    def allreduce_gpus(self) -> tuple[int, ...]:
        """The GPU counts the all-reduce was measured at."""
        return tuple(self._doc["allreduce"]["gpus"])

    def allreduce_roofline_ms(self, gpus: int, message_bytes: float, *, fit_gpus: int | None = None) -> float:
        """Fitted roofline of a ring all-reduce, ms: max(floor, 2 (N-1)/N bytes / (fitted share x NVLink))."""
        e = self._eff["allreduce"][str(fit_gpus or gpus)]
        bus = 2 * (gpus - 1) / gpus * message_bytes
        return max(e["floor_ms"], 1e3 * bus / (e["bus"] * self.nvlink_bytes_per_s))

    def allreduce(self, gpus: int, message_bytes: float) -> Lookup:
        """All-reduce of ``message_bytes`` (bf16 activations) over ``gpus`` GPUs; 0 on one GPU."""
        n = _count("gpus", gpus)
        size = _positive("message_bytes", message_bytes)
        if n == 1:
            return Lookup(0.0, True)
        have = self.allreduce_gpus()
        if n in have:
            grid = self._ar.get(n) or self._ar_grid(n)
            v = grid.interp((size,))
            if v is not None:
                return Lookup(v, True)
            e = self._eff["allreduce"][str(n)]
            return grid.estimate((size,), lambda p: self.allreduce_roofline_ms(n, p[0]),
                                 f"all-reduce over {n} GPUs",
                                 f"at fitted {_pct(e['bus'])} of NVLink bus bandwidth")
        if n <= self.domain_gpus:
            m = min(have, key=lambda c: (abs(math.log(n / c)), -c))
            base = self.allreduce(m, size)
            r = self.allreduce_roofline_ms(n, size, fit_gpus=m) / self.allreduce_roofline_ms(m, size)
            note = f"all-reduce over {n} GPUs not measured: {m} GPUs scaled by the ring traffic x{r:.3g}"
            ms = base.ms * r
            if n > max(have):  # more ranks than measured, one NVLink domain: NCCL's latency for them
                floor = nccl_domain_us(n, 2) * 1e-3
                if floor > ms:
                    ms = floor
                    note += (f", at least NCCL's latency for {n} ranks in one NVLink domain "
                             f"({floor * 1e3:.1f} us, data/nccl_latency.toml)")
            return Lookup(ms, False, "; ".join(x for x in (note, base.note) if x))
        node = self.domain_gpus
        base = self.allreduce(node, size)
        nodes = n / node
        inter = 2 * (nodes - 1) / nodes * (size / node) / self.scaleout_bytes_per_s * 1e3
        floor = nccl_multinode_allreduce_us(n, max(1, math.ceil(nodes))) * 1e-3
        word = self.topology.domain_word
        link = "inter-node ring" if word == "nodes" else f"{self.topology.scale_out} ring between racks"
        note = (f"all-reduce over {n} GPUs spans {math.ceil(nodes)} {word} of {node}, not measured: the "
                f"{node}-GPU time, at "
                f"least NCCL's own multi-node latency ({floor * 1e3:.1f} us, data/nccl_latency.toml), plus "
                f"the {link} at the full {self.scaleout_bytes_per_s / 1e9:g} GB/s per GPU "
                "(optimistic)")
        return Lookup(max(base.ms, floor) + inter, False, "; ".join(x for x in (note, base.note) if x))


@cache
def _nccl_latency() -> dict[str, float]:
    return {k: float(v) for k, v in read_toml(Path(__file__).parent / "data" / "nccl_latency.toml").items()}


def nccl_multinode_allreduce_us(gpus: int, nodes: int) -> float:
    """NCCL's own latency model of an all-reduce of ``gpus`` ranks over ``nodes`` nodes, microseconds:
    the tree algorithm with the LL protocol (``data/nccl_latency.toml``, from NCCL's
    ``ncclTopoTuneModel``), ``base + 2 ((ppn - 1) x nvlink x 1.8 + log2(nodes) x net)``; 0 on one node."""
    if nodes <= 1:
        return 0.0
    c = _nccl_latency()
    ppn = gpus / nodes
    return c["tree_ll_base_us"] + 2 * ((ppn - 1) * c["tree_ll_nvlink_us"] * c["multinode_intra_factor"]
                                       + math.floor(math.log2(nodes)) * c["tree_ll_net_us"])


def nccl_domain_us(gpus: int, passes: int = 1) -> float:
    """NCCL's own latency model of a collective over ``gpus`` ranks in one NVLink domain (one node to
    NCCL: an NVL72 rack is one MNNVL clique), microseconds: ``base + passes x (gpus - 1) x nvlink``
    (``data/nccl_latency.toml``; ``passes`` 2 for an all-reduce's reduce and broadcast, 1 for an
    all-gather, reduce-scatter or all-to-all).  72 ranks, all-reduce: 4.4 + 2 x 71 x 0.52 = 78.2 us."""
    c = _nccl_latency()
    return c["tree_ll_base_us"] + passes * (gpus - 1) * c["tree_ll_nvlink_us"]


def _positive(name: str, value: object) -> float:
    """``value`` as a float if it is a positive finite real (fast path for int and float)."""
    if (type(value) is float or type(value) is int) and 0 < value < math.inf:
        return float(value)
    return check_real(name, value, lo=0.0, lo_open=True)


def _count(name: str, value: object, hi: int | None = None) -> int:
    """``value`` if it is an integer >= 1 (and <= ``hi``)."""
    if type(value) is int and value >= 1 and (hi is None or value <= hi):
        return value
    return check_int(name, value, lo=1, hi=hi)


# --------------------------------------------------------------------------- GPUs without tables


def _family(gpu_name: str) -> str | None:
    name = gpu_name.strip().lower()
    for pattern, family in _FAMILY_NAMES:
        if pattern.match(name):
            return family
    return None


def nearest_measured(gpu_name: str, hbm_bytes_per_s: float, bf16_flops_per_s: float,
                     dtypes: Sequence[str] = ("bf16",)) -> str:
    """The measured table (:data:`GPU_TABLES`) a GPU without tables borrows (module docstring).

    Candidates are the tables whose GPU has tensor cores for every weight dtype in ``dtypes``
    (the target's: ``bf16``, ``fp8``, ``fp4``; a Blackwell table covers all three); among
    them those of the target's family by name (Hopper ``h100-nvl``, ``gh200-96gb``, ``h20``;
    Blackwell ``b300``, ``gb200``; Ampere ``a40``) when there are any, and of those the one
    closest in ``|log(HBM ratio)| + |log(BF16 ratio)|`` (ties: the first in :data:`GPU_TABLES`).
    """
    hbm = _positive("hbm_bytes_per_s", hbm_bytes_per_s)
    flops = _positive("bf16_flops_per_s", bf16_flops_per_s)
    want = set(dtypes)
    covering = [n for n in GPU_TABLES if want <= set(MEASURED_PEAKS[n][2])] or list(GPU_TABLES)
    family = _family(gpu_name) if isinstance(gpu_name, str) else None
    pool = [n for n in covering if _TABLE_FAMILY[n] == family] or covering

    def distance(n: str) -> float:
        h, f, _ = MEASURED_PEAKS[n]
        return abs(math.log(hbm / h)) + abs(math.log(flops / f))

    return min(pool, key=distance)


SCALE_LIMIT = 1e4
"""The most a :class:`ScaledTables` scales a measured GPU's peaks by, either way: a target whose HBM
bandwidth, interconnect or a tensor-core peak is further than this from the borrowed table's is
refused (ParameterError) rather than priced at times no measurement supports (a 1e-300 TB/s GPU
would otherwise step in 1e299 s and overflow the simulation's arithmetic)."""


class ScaledTables(KernelTables):
    """Another GPU's measured tables, every lookup scaled by the roofline to ``gpu``'s peaks.

    ``source`` is the measured :class:`KernelTables` borrowed; the peaks are the target's
    datasheet figures (``flops_per_s`` by weight dtype: ``bf16`` and those the target has
    tensor cores for).  Each lookup (:meth:`gemm`, :meth:`decode_attention`,
    :meth:`prefill_attention`, :meth:`allreduce`) is the source's times
    ``roofline(target) / roofline(source)`` of that kernel, both the source table's fitted
    roofline (same floor and efficiencies, each GPU's peaks: the module docstring), and is
    reported ``measured = False``.  The attributes read like a :class:`KernelTables`' with
    the target's peaks (``name`` is the target's; the fitted ``efficiency`` and
    ``gpus_per_node`` and the inter-node bandwidth are the source's); ``source`` and
    ``note`` say what was borrowed and how it is scaled.
    """

    source: KernelTables
    note: str

    def __init__(self, source: KernelTables, gpu: str, *, hbm_bytes_per_s: float,
                 flops_per_s: Mapping[str, float], interconnect_bytes_per_s: float,
                 memory_bytes: float) -> None:
        if isinstance(source, ScaledTables):
            source = source.source
        super().__init__(source._doc)
        self.source = source
        self.name = str(gpu)
        # an HGX node of 8 (an NVL72 rack is its own entry of data/topology.toml, never borrowed)
        hgx = source.topology.kind == "hgx"
        self.topology = topology_for(self.name, source.domain_gpus if hgx else 8,
                                     source.scaleout_bytes_per_s)
        self.domain_gpus = self.topology.domain_gpus
        self.scaleout_bytes_per_s = self.topology.scale_out_bytes_per_s
        self.device = f"{gpu} (no measured tables: {source.device}'s scaled by the roofline)"
        self.hbm_bytes_per_s = check_real("hbm_bytes_per_s", hbm_bytes_per_s, lo=0.0, lo_open=True)
        self.nvlink_bytes_per_s = check_real("interconnect_bytes_per_s", interconnect_bytes_per_s, lo=0.0,
                                             lo_open=True)
        self.memory_bytes = check_real("memory_bytes", memory_bytes, lo=0.0, lo_open=True)
        peaks = {d: check_real(f"flops_per_s[{d!r}]", v, lo=0.0, lo_open=True)
                 for d, v in flops_per_s.items()}
        if "bf16" not in peaks:
            raise ParameterError("flops_per_s", dict(flops_per_s), "a mapping with a 'bf16' peak")
        if "fp8" in peaks:
            peaks.setdefault("fp8_block", peaks["fp8"])  # block-scaled FP8 runs on the FP8 tensor cores
        self.flops_per_s = {d: peaks[d] for d in source.flops_per_s if d in peaks}
        for what, mine, theirs in (("hbm_bytes_per_s", self.hbm_bytes_per_s, source.hbm_bytes_per_s),
                                   ("interconnect_bytes_per_s", self.nvlink_bytes_per_s,
                                    source.nvlink_bytes_per_s),
                                   *((f"flops_per_s[{d!r}]", v, source.flops_per_s[d])
                                     for d, v in self.flops_per_s.items())):
            if not 1 / SCALE_LIMIT <= mine / theirs <= SCALE_LIMIT:
                raise ParameterError(
                    what, mine, f"within {SCALE_LIMIT:g}x of the {theirs:.4g} of {source.name}, the "
                    f"measured GPU whose kernel tables {gpu} borrows ({mine / theirs:.3g}x it: no measured "
                    "kernel time is scaled that far; check the catalog's units: hbm_TBps in TB/s, "
                    "bf16_TFLOPS in TFLOP/s, interconnect_GBps in GB/s)")
        self.gemm_dtypes = tuple(d for d in source.gemm_dtypes if d in self.flops_per_s)
        self.kv_dtypes = tuple(d for d in source.kv_dtypes if d == "bf16" or d in self.flops_per_s)
        s_bf16 = source.flops_per_s["bf16"]
        self.note = (
            f"no measured kernel tables for {gpu}: {source.device}'s ({source.engine}) borrowed, every "
            f"kernel time scaled by its roofline on {gpu}'s peaks over {source.name}'s (HBM "
            f"{self.hbm_bytes_per_s / 1e12:.3g}/{source.hbm_bytes_per_s / 1e12:.3g} TB/s, BF16 "
            f"{self.flops_per_s['bf16'] / 1e12:.4g}/{s_bf16 / 1e12:.4g} TFLOP/s, interconnect "
            f"{self.nvlink_bytes_per_s / 1e9:.3g}/{source.nvlink_bytes_per_s / 1e9:.3g} GB/s)")

    def __repr__(self) -> str:
        return f"ScaledTables({self.name!r}: {self.source!r} scaled)"

    def _scaled(self, lk: Lookup, ratio: float) -> Lookup:
        return Lookup(lk.ms * ratio, False, lk.note or self.note)

    def _gemm_grid(self, dtype: str) -> _Grid:
        if dtype not in self.gemm_dtypes:
            have = ", ".join(self.gemm_dtypes)
            raise ParameterError("dtype", dtype, f"one of {have} (the GEMM dtypes {self.name} has tensor "
                                 "cores for)")
        return self.source._gemm_grid(dtype)

    def gemm(self, dtype: str, m: float, n: int, k: int) -> Lookup:
        self._gemm_grid(dtype)
        lk = self.source.gemm(dtype, m, n, k)
        mf, nf, kf = float(m), float(n), float(k)
        ratio = self.gemm_roofline_ms(dtype, mf, nf, kf) / self.source.gemm_roofline_ms(dtype, mf, nf, kf)
        return self._scaled(lk, ratio)

    def _attention(self, kind: str, batch: float, length: float, heads: int, kv_heads: int, head_dim: int,
                   kv_dtype: str) -> Lookup:
        src = self.source
        lk = src._attention(kind, batch, length, heads, kv_heads, head_dim, kv_dtype)
        fit = kv_dtype if kv_dtype in src.kv_dtypes else "bf16"
        args = (batch, length, heads, kv_heads, head_dim, kv_dtype)
        if kind == "decode":
            ratio = self.decode_roofline_ms(*args, fit_kv=fit) / src.decode_roofline_ms(*args, fit_kv=fit)
        else:
            ratio = self.prefill_roofline_ms(*args, fit_kv=fit) / src.prefill_roofline_ms(*args, fit_kv=fit)
        return self._scaled(lk, ratio)

    def allreduce(self, gpus: int, message_bytes: float) -> Lookup:
        n = _count("gpus", gpus)
        size = _positive("message_bytes", message_bytes)
        if n == 1:
            return Lookup(0.0, True)
        if n in self.allreduce_gpus():
            ratio = self.allreduce_roofline_ms(n, size) / self.source.allreduce_roofline_ms(n, size)
            return self._scaled(self.source.allreduce(n, size), ratio)
        # other counts: KernelTables' own scaling of the measured counts, which are scaled here
        lk = super().allreduce(n, size)
        return Lookup(lk.ms, False, lk.note or self.note)


@cache
def _borrowed(gpu: str, engine: str, hbm: float, flops: tuple[tuple[str, float], ...], interconnect: float,
              memory: float) -> tuple[ScaledTables, str]:
    peaks = dict(flops)
    name = nearest_measured(gpu, hbm, peaks["bf16"], tuple(peaks))
    source, how = engine_tables(name, engine)
    assert source is not None  # every table of GPU_TABLES ships vLLM's
    scaled = ScaledTables(source, gpu, hbm_bytes_per_s=hbm, flops_per_s=peaks,
                          interconnect_bytes_per_s=interconnect, memory_bytes=memory)
    note = scaled.note if how.startswith("kernel tables:") else f"{scaled.note}; {how}"
    return scaled, note


def borrowed_tables(gpu: str, engine: str, *, hbm_bytes_per_s: float, flops_per_s: Mapping[str, float],
                    interconnect_bytes_per_s: float, memory_bytes: float) -> tuple[ScaledTables, str]:
    """The tables to price ``engine`` on ``gpu``, a GPU without measured tables, and the note saying so.

    The nearest measured GPU's tables (:func:`nearest_measured`; its ``engine`` tables, else its
    vLLM ones) scaled by the roofline to the given peaks (:class:`ScaledTables`); cached by
    arguments.  ``flops_per_s`` holds the dense peak of each weight dtype the GPU has tensor
    cores for (``bf16`` at least; ``fp8``, ``fp4``)."""
    key = _engine(engine)
    peaks = tuple(sorted((str(d), float(v)) for d, v in flops_per_s.items()))
    return _borrowed(str(gpu), key, float(hbm_bytes_per_s), peaks, float(interconnect_bytes_per_s),
                     float(memory_bytes))
