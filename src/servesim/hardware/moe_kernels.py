"""Measured mixture-of-experts, MLA and expert-parallel communication latencies, looked up by shape.

The tables (``data/kernels/<gpu>_moe.json.gz`` for vLLM, ``<gpu>_sglang_moe.json.gz`` and
``<gpu>_trtllm_moe.json.gz``; one per GPU in :data:`~servesim.hardware.kernels.GPU_TABLES` and
engine, TensorRT-LLM 1.0.0's on the A100 included) are derived from the per-kernel timings that
NVIDIA's aiconfigurator measured with each engine (Apache-2.0; origin, license, what is kept and
every change: ``data/kernels/NOTICE.md``; ``scripts/build_kernel_tables.py`` rebuilds them).
:func:`moe_tables` returns one engine's tables, else vLLM's on that GPU, with a note.  Each holds:

* **MoE layer** (:meth:`MoETables.moe`): one MoE layer's routed experts on one GPU, by dtype and
  the shapes measured (exactly the real models' ``hidden, moe_inter, topk, experts`` at each
  ``moe_tp x moe_ep``), over num_tokens.  What the kernel includes, per engine (the collectors
  ``collector/{vllm,sglang,trtllm}/collect_moe.py`` of ai-dynamo/aiconfigurator): the top-k
  selection from given router logits (NOT the router GEMM; SGLang's EP rows get the rank's routed
  tokens and their top-k ready-made, so theirs is not timed either), the activation quantization of the
  quantized dtypes, both grouped GEMMs with the SwiGLU between them, and the weighted sum of the
  top-k outputs (TensorRT-LLM's finalize, vLLM's and SGLang's reduce).  Not included: the router
  GEMM, shared experts (none are built), any all-reduce (``reduce_results=False``) and the
  expert-parallel dispatch / combine (one rank, no all-to-all: :meth:`MoETables.deepep`).

  **num_tokens** is every token that enters the layer's routing, over the whole expert-parallel
  group: with attention data parallelism of size ``dp`` it is ``dp x`` the tokens of one
  attention rank (aiconfigurator's ``MoE.query`` passes ``x * attention_dp_size``); with
  tensor-parallel attention every GPU holds the same tokens and it is that count.  The measured
  GPU holds ``experts / moe_ep`` experts, each ``moe_inter / moe_tp`` wide, and runs the
  token-expert pairs routed to them (``num_tokens x topk / moe_ep`` on average).  ``moe(...,
  tokens, ..., attention_dp=dp)`` takes the tokens on this GPU before dispatch and looks the
  table up at ``tokens x dp``.

  **Routing**: the ``power_law_1.01`` rows (aiconfigurator's default: its models set
  ``_power_law_alpha = 1.01``): tokens per expert drawn from a power law with the busiest EP
  rank moved to rank 0, so that with EP the time is that of the hottest rank, which sets the
  step.  Against balanced routing it is a median 0.92-1.00 x at <= 64 tokens (skew touches fewer
  experts, so fewer weights are read), 0.93-1.05 x at 65-1024 tokens, and 1.01-1.11 x (EP1) or
  1.10-1.43 x (EP > 1) above 1024 (per table and class, NOTICE.md).  Balanced rows are not kept
  (vLLM's and SGLang's balanced DeepSeek-V3 rows read only about half the experts).

  **Backends**: an engine that timed one dtype with two of its MoE backends keeps each backend's own
  rows.  TensorRT-LLM 1.3.0rc20 on the B200 and GB200 timed NVFP4 with its default CUTLASS kernels
  (the table's ``fp4`` rows) and with its TRTLLM-gen kernels (``moe.backends.trtllm``, each point
  plus the finalize kernel it was timed without): :meth:`MoETables.backend` gives the tables with
  that backend's rows, which :mod:`servesim.hardware.moe_step` prices a deployment's
  ``moe_config.backend`` by.

  **Sibling GPUs**: a series (kernel, dtype, shape, layout) that one GPU of a die measured far slower
  than the same die's other product did (B200 / GB200, B300 / GB300: TensorRT-LLM 1.3.0rc20's CUTLASS
  MoE rows, e.g. DeepSeek-V3 NVFP4 EP8 on the B200 at 1.7 x the GB200's) holds the sibling's rows
  times the two tables' median ratio (``moe.sibling_substitutions``, NOTICE.md); a lookup of such a
  shape is still ``measured`` and its note says so.
* **core MLA** (:meth:`MoETables.mla_decode`, :meth:`MoETables.mla_prefill`): DeepSeek-style
  multi-head latent attention, by KV dtype and query heads per GPU, over batch x context (decode)
  or batch x prompt (prefill): only the attention kernel of the engine's MLA backend (the
  latent-cache write, RoPE where the backend fuses it, and QK / softmax / PV; decode in the
  absorbed form over the 576-value latent).  The absorbed BMMs (q_nope x W_UK before decode, the
  latent output x W_UV after it) are :meth:`MoETables.mla_bmm`; the q / kv down and up
  projections and o_proj are GEMMs (:mod:`servesim.hardware.kernels`).  vLLM 0.24 measured no
  core MLA (only whole attention modules, not shipped): its tables use TensorRT-LLM's on the same
  GPU, with a note (the two engines' whole-module times agree within 0.99-1.20 x, while SGLang's
  FA3 MLA with an fp8 latent cache on Hopper takes 9.6 x TensorRT-LLM's); SGLang 0.5.10 on the
  A100 uses vLLM 0.14.0's.
* **DeepEP** (:meth:`MoETables.deepep`): dispatch and combine of one rank of an 8-GPU node,
  low-latency (``ll``) and normal kernels, measured with SGLang 0.5.12's DeepEP (H100, H200, B200;
  the A100 has none: a roofline at its NCCL all-to-all fit).  Tokens are the rank's own.  Across
  nodes (more ranks than a node holds GPUs: decode pools of DP16 + EP16) the low-latency kernels
  are DeepEP's own published pure-RDMA latencies (``data/deepep_rdma.toml``, from DeepEP's
  docs/legacy.md, MIT) scaled by the bytes each rank sends and by the GPU's NIC rate; the normal
  kernels keep the measured node's time scaled by the roofline with the inter-node share at that rate.
* **NCCL** :meth:`MoETables.all_gather`, :meth:`MoETables.reduce_scatter` and :meth:`MoETables.alltoall`
  of half, by GPUs and bytes (nccl-tests' size: the gathered output / the whole input / each rank's
  send buffer; message_size counts 2-byte elements upstream, NOTICE.md).

Interpolation, the monotone envelope and the anchored roofline outside the grid are those of
:mod:`servesim.hardware.kernels`.  A shape that was not measured uses the nearest measured one
of the same dtype (in log scale: hidden, inter / moe_tp, experts / moe_ep and topk first, tp and
ep next) times the two shapes' ratio at each measured token count: the ratio another dtype of the
same table measured for both shapes (BF16 first) where one did, else the ratio of their fitted
rooflines (which the launch floor flattens: a block-FP8 layer at an expert width no block-FP8
checkpoint loads once took its nearest shape's time, a larger slice, 1.15 x BF16's at one token);
``measured`` is then False.  The MoE roofline: ``max(floor, bytes / (memory share x HBM), FLOPs /
(compute share x peak))``, bytes = the local experts touched, ``E_local (1 - (1 - topk / E)^tokens)``, times
their weights (3 x hidden x inter / tp at 2, 1, 0.5625 (NVFP4), 0.53125 (MXFP4), 0.515625 (int4
groups of 128) bytes per value) plus 2-byte activations in and out of each GEMM; FLOPs = 2 x
tokens x topk / ep x 3 x hidden x inter / tp, at the dtype's tensor-core peak (bf16's for the
weight-only mxfp4 and int4).  Standard library only; a table is read on first use and cached.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from servesim._catalogfile import read_toml
from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.dtypes import BYTES_PER_VALUE
from servesim.hardware.engines import kernel_file_stem, mla_fallback, tables_fallback
from servesim.hardware.kernels import (
    GPUSystem,
    Lookup,
    _engine,
    _engine_keys,
    _Grid,
    engine_label,
    nccl_domain_us,
    table_name,
)

__all__ = ["MLA_KV_VALUES", "MOE_DTYPES", "Fit", "MoETables", "moe_engines_for", "moe_tables"]

MOE_DTYPES: tuple[str, ...] = ("bf16", "fp8", "fp8_block", "fp4", "mxfp4", "int4", "mxfp4_mxfp8")
"""servesim's MoE kernel dtypes, from aiconfigurator's ``moe_dtype``: ``bfloat16`` -> ``bf16``,
``fp8`` (per-tensor) -> ``fp8``, ``fp8_block`` (128 x 128 blocks, DeepSeek) -> ``fp8_block``,
``nvfp4`` -> ``fp4``, ``w4a16_mxfp4`` (gpt-oss) -> ``mxfp4``, ``int4_wo`` (W4A16 int4 groups,
Kimi-K2.5) -> ``int4``, ``w4a8_mxfp4_mxfp8`` (MXFP4 weights with the activations quantized to
MXFP8: the kernel an MXFP4 checkpoint runs with on Blackwell where the engine chooses it, B200
tables only) -> ``mxfp4_mxfp8``."""

MLA_KV_VALUES = 512 + 64
"""Latent cache values per token per layer: kv_lora_rank + qk_rope_head_dim (DeepSeek-V3)."""

_DATA = Path(__file__).parent / "data" / "kernels"
_PEAK = {"bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "fp4": "fp4", "mxfp4": "bf16", "int4": "bf16",
         "mxfp4_mxfp8": "fp8"}
_MLA_DECODE_DIM = 576 + 512
_MLA_PREFILL_DIM = 192 + 128
_BMM = (128, 512)


@cache
def _deepep_rdma_table() -> dict[str, Any]:
    """DeepEP's published low-latency RDMA latencies (``data/deepep_rdma.toml``), ranks as ints."""
    raw = read_toml(Path(__file__).parent / "data" / "deepep_rdma.toml")
    return {**raw, "dispatch": {int(k): float(v) for k, v in raw["dispatch"].items()},
            "combine": {int(k): float(v) for k, v in raw["combine"].items()}}


def _moe_file(name: str, engine: str) -> Path:
    return _DATA / f"{kernel_file_stem(engine, name)}_moe.json.gz"


@cache
def _shipped(name: str, engine: str) -> bool:
    return _moe_file(name, engine).is_file()


@cache
def _load(name: str, engine: str) -> MoETables:
    with gzip.open(_moe_file(name, engine), "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    return MoETables(doc)


def moe_engines_for(gpu_name: str) -> tuple[str, ...]:
    """The engines with MoE tables for ``gpu_name`` (in ``ENGINE_TABLES`` order)."""
    name = table_name(gpu_name)
    if name is None:
        return ()
    return tuple(e for e in _engine_keys() if _shipped(name, e))


def moe_tables(gpu_name: str, engine: str) -> tuple[MoETables | None, str]:
    """The MoE / MLA / EP tables to price ``engine`` on ``gpu_name`` with, and a note saying which.

    The engine's own (``"MoE tables: NVIDIA H200, SGLang 0.5.14"``), else vLLM's on that GPU
    (``"no TensorRT-LLM MoE tables for ...: vLLM 0.24.0's used"``), else None (``"no measured
    MoE tables for mi300x"``).  An engine name that is none of the three raises ParameterError."""
    key = _engine(engine)
    name = table_name(gpu_name)
    if name is None:
        return None, f"no measured MoE tables for {gpu_name}"
    if _shipped(name, key):
        t = _load(name, key)
        return t, f"MoE tables: {t.device}, {t.engine}"
    fallback = tables_fallback()
    if _shipped(name, fallback):
        v = _load(name, fallback)
        return v, f"no {engine_label(key)} MoE tables for {name}: {v.engine}'s used"
    return None, f"no measured MoE tables for {name}"


@dataclass(frozen=True)
class Fit:
    """Fitted roofline numbers of one table (NOTICE.md says how each was fitted)."""

    floor_ms: float
    """The launch floor, ms."""
    memory: float = 0.0
    """Share of the HBM bandwidth the kernel reaches (0 where not fitted)."""
    compute: float = 0.0
    """Share of the tensor-core peak the kernel reaches (0 where not fitted)."""
    bus: float = 0.0
    """Share of the NVLink bandwidth (communication; 0 where not fitted)."""


def _fit(d: dict[str, float]) -> Fit:
    return Fit(floor_ms=float(d["floor_ms"]), memory=float(d.get("memory", 0.0)),
               compute=float(d.get("compute", 0.0)), bus=float(d.get("bus", 0.0)))


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _positive(name: str, value: object) -> float:
    if (type(value) is float or type(value) is int) and 0 < value < math.inf:
        return float(value)
    return check_real(name, value, lo=0.0, lo_open=True)


def _count(name: str, value: object) -> int:
    if type(value) is int and value >= 1:
        return value
    return check_int(name, value, lo=1)


def _log2(a: float, b: float) -> float:
    return abs(math.log2(a / b))


class MoETables(GPUSystem):
    """The MoE, MLA and expert-parallel communication tables of one GPU and engine.

    Attributes: ``name`` (the GPU's table name), ``device``, ``engine`` (``"SGLang 0.5.14"`` ...),
    ``engine_name``, ``nccl`` (NCCL version), ``hbm_bytes_per_s``, ``flops_per_s`` (per dtype),
    ``memory_bytes``, ``nvlink_bytes_per_s``, ``internode_bytes_per_s``, ``gpus_per_node``,
    ``moe_dtypes``, ``distribution`` (the routing measured), ``sources`` (aiconfigurator's
    kernel_source per table), ``efficiency`` (:class:`Fit` per table and key: ``moe`` by dtype,
    ``mla_decode`` / ``mla_prefill`` by KV dtype, ``mla_bmm`` by dtype, ``deepep`` by
    ``<mode>_<kind>``, ``all_gather`` / ``alltoall`` by GPU count), ``has_mla`` (this engine
    measured core MLA itself) and ``deepep_ep`` (the EP size DeepEP was measured at, 0 if not).
    """

    moe_dtypes: tuple[str, ...]
    efficiency: dict[str, dict[str, Fit]]

    def __init__(self, doc: dict[str, Any]) -> None:
        if doc.get("format") != 1 or doc.get("kind") != "moe":
            raise ValueError(f"MoE table format {doc.get('format')!r} / {doc.get('kind')!r} is not supported")
        self._read_system(doc)
        self.nccl = doc["nccl"]
        moe = doc["moe"]
        self.distribution: str = moe["distribution"]
        self.moe_dtypes = tuple(d for d in MOE_DTYPES if d in moe["dtypes"])
        self.efficiency = {kind: {key: _fit(v) for key, v in by.items()}
                           for kind, by in doc["efficiency"].items()}
        self.has_mla = "mla" in doc
        self.deepep_ep = int(doc["deepep"]["ep"]) if "deepep" in doc else 0
        self.sources: dict[str, Any] = {
            "moe": {d: list(t["kernel_sources"]) for d, t in moe["dtypes"].items()},
            "mla": doc["mla"]["kernel_source"] if self.has_mla else None,
            "mla_bmm": dict(doc["mla_bmm"]["kernel_source"]) if "mla_bmm" in doc else None,
            "deepep": doc["deepep"]["measured_with"] if "deepep" in doc else None,
        }
        self._doc = doc
        self._tokens: tuple[float, ...] = tuple(float(t) for t in moe["tokens"])
        self._grids: dict[tuple[Any, ...], _Grid] = {}
        self._nearest: dict[tuple[Any, ...], Any] = {}
        self._shape_keys: dict[str, tuple[tuple[int, ...], ...]] = {
            d: tuple(tuple(int(x) for x in k.split(",")) for k in t["shapes"])
            for d, t in moe["dtypes"].items()}
        self.backend_name: str = ""
        """The MoE backend whose own rows this view holds (:meth:`backend`); ``""``: the engine's table."""
        self.moe_backends: dict[str, tuple[str, ...]] = {
            b: tuple(d for d in MOE_DTYPES if d in t["dtypes"]) for b, t in moe.get("backends", {}).items()}
        """The MoE backends this engine measured apart (``moe.backends``: TensorRT-LLM's TRTLLM-gen
        NVFP4 rows on the B200 and GB200, ``trtllm``), each with its dtypes."""
        self._views: dict[str, MoETables] = {}
        subs = moe.get("sibling_substitutions")
        self._sibling_notes: dict[tuple[str, str, tuple[int, ...]], str] = {}
        """(backend, dtype, shape) -> the note of a series the build replaced by its sibling GPU's."""
        for r in subs["rows"] if subs else ():
            shape = tuple(int(x) for x in r["shape"].split(","))
            sib = subs["sibling"]
            at = f" at {'/'.join(str(n) for n in r['stretch'])} tokens" if "stretch" in r else ""
            self._sibling_notes[(r["backend"], r["dtype"], shape)] = (
                f"moe {r['dtype']} hidden/inter/topk/experts/tp/ep {'/'.join(str(x) for x in shape)} on "
                f"{self.name} ({self.engine}): measured {r['ratio']:g} x the same kernel on {sib}{at} (the "
                f"same GPU die; a collection artifact), priced{' there' if at else ''} as {sib}'s rows x "
                f"{subs['table_median_ratio']:g}, the two tables' median ratio (NOTICE.md, sibling GPUs)")

    def __repr__(self) -> str:
        return f"MoETables({self.name!r}: {self.device}, {self.engine})"

    def backend(self, name: str) -> MoETables | None:
        """These tables with the MoE rows of backend ``name`` in place of the engine's own for the
        dtypes that backend measured (the rest, MLA and communication unchanged), or None where
        ``name`` was not measured apart (:attr:`moe_backends`).  E.g. ``backend("trtllm")`` of
        TensorRT-LLM's B200 tables prices NVFP4 experts by its TRTLLM-gen rows, where the tables'
        own ``fp4`` rows are its default CUTLASS kernels (``scripts/build_kernel_tables.py``)."""
        if name not in self.moe_backends:
            return None
        view = self._views.get(name)
        if view is None:
            doc, part = self._doc, self._doc["moe"]["backends"][name]
            moe = {**doc["moe"], "dtypes": {**doc["moe"]["dtypes"], **part["dtypes"]}}
            eff = {**doc["efficiency"], "moe": {**doc["efficiency"]["moe"], **part["efficiency"]}}
            view = MoETables({**doc, "moe": moe, "efficiency": eff})
            view.backend_name = name
            self._views[name] = view
        return view

    # ------------------------------------------------------------------ MoE

    def moe_shapes(self, dtype: str) -> tuple[tuple[int, ...], ...]:
        """The measured ``(hidden, inter, topk, experts, moe_tp, moe_ep)`` of ``dtype``."""
        self._check_dtype(dtype)
        return self._shape_keys[dtype]

    def moe_source(self, dtype: str, shape: tuple[int, ...]) -> str:
        """The kernel that timed a measured ``shape`` of ``dtype`` (``""`` where none did)."""
        self._check_dtype(dtype)
        t = self._doc["moe"]["dtypes"][dtype]
        i = t.get("source_of", {}).get(",".join(str(x) for x in shape))
        return "" if i is None else str(t["kernel_sources"][i])

    def nearest_moe_source(self, dtype: str, shape: tuple[int, ...]) -> str:
        """The kernel that timed ``shape`` of ``dtype``, or where it was not measured, the kernel of the
        nearest measured shape :meth:`moe` prices it from."""
        self._check_dtype(dtype)
        return self.moe_source(dtype, shape) or self.moe_source(dtype, self._moe_grid(dtype, shape)[1])

    def _sibling_note(self, dtype: str, shape: tuple[int, ...]) -> str:
        """The note of a measured ``shape`` of ``dtype`` whose rows are its sibling GPU's (``""`` if none)."""
        if not self._sibling_notes:
            return ""
        backend = self.backend_name if dtype in self.moe_backends.get(self.backend_name, ()) else ""
        return self._sibling_notes.get((backend, dtype, shape), "")

    def _check_dtype(self, dtype: str) -> None:
        if dtype not in self.moe_dtypes:
            raise ParameterError("dtype", dtype, f"one of {', '.join(self.moe_dtypes)} (the MoE dtypes of "
                                 f"{self.name}, {self.engine})")

    def moe_roofline_ms(self, dtype: str, tokens: float, hidden: int, inter: int, topk: int, experts: int,
                        moe_tp: int = 1, moe_ep: int = 1) -> float:
        """Fitted roofline of one MoE layer on one GPU, ms (module docstring); ``tokens`` as the
        table's num_tokens."""
        e = self.efficiency["moe"][dtype]
        il = inter / moe_tp
        touched = experts / moe_ep * (1.0 - math.pow(1.0 - topk / experts, tokens))
        pairs = tokens * topk / moe_ep
        nbytes = touched * 3 * hidden * il * BYTES_PER_VALUE[dtype] + pairs * (4 * hidden + 6 * il)
        flops = 2 * pairs * 3 * hidden * il
        peak = float(self.flops_per_s.get(_PEAK[dtype]) or self.flops_per_s["bf16"])
        t = max(nbytes / (e.memory * self.hbm_bytes_per_s), flops / (e.compute * peak))
        return max(e.floor_ms, 1e3 * t)

    def _moe_grid(self, dtype: str, key: tuple[int, ...]) -> tuple[_Grid, tuple[int, ...]]:
        got = self._nearest.get(("moe", dtype, key))
        if got is None:
            have = self._shape_keys[dtype]
            if key in have:
                got = key
            else:
                h, i, k, e, tp, ep = key
                got = min(have, key=lambda c: (
                    _log2(h, c[0]) + _log2(i / tp, c[1] / c[4]) + _log2(e / ep, c[3] / c[5]) + _log2(k, c[2])
                    + 0.25 * (_log2(tp, c[4]) + _log2(ep, c[5])), c))
            self._nearest[("moe", dtype, key)] = got
        grid = self._grids.get(("moe", dtype, got))
        if grid is None:
            ms = self._doc["moe"]["dtypes"][dtype]["shapes"][",".join(str(x) for x in got)]
            grid = self._grids[("moe", dtype, got)] = _Grid(("tokens",), (self._tokens,), ms)
        return grid, got

    def moe(self, dtype: str, tokens: float, hidden: int, inter: int, topk: int, experts: int,
            moe_tp: int = 1, moe_ep: int = 1, *, attention_dp: int = 1) -> Lookup:
        """One MoE layer's routed experts on one GPU (ms) for ``tokens`` tokens on this GPU before
        dispatch (the table is read at ``tokens x attention_dp``: module docstring); ``inter`` is
        the expert's full intermediate size (``moe_intermediate_size``), split ``moe_tp`` ways."""
        self._check_dtype(dtype)
        t = _positive("tokens", tokens) * _count("attention_dp", attention_dp)
        key = (_count("hidden", hidden), _count("inter", inter), _count("topk", topk),
               _count("experts", experts), _count("moe_tp", moe_tp), _count("moe_ep", moe_ep))
        if key[2] > key[3]:
            raise ParameterError("topk", topk, f"at most experts={experts}")
        grid, got = self._moe_grid(dtype, key)
        e = self.efficiency["moe"][dtype]
        how = f"at fitted {_pct(e.memory)} of HBM / {_pct(e.compute)} of peak"
        sibling = self._sibling_note(dtype, got)  # rows the build took from the same die's other GPU
        if got == key:
            v = grid.interp((t,))
            if v is not None:
                return Lookup(v, True, sibling)
            lk = grid.estimate((t,), lambda p: self.moe_roofline_ms(dtype, p[0], *key),
                               f"moe {dtype} {'/'.join(str(x) for x in key)}", how)
            return lk if not sibling else Lookup(lk.ms, lk.measured, f"{lk.note}; {sibling}")
        shape = "/".join(str(x) for x in got)
        derived = self._derived_moe_grid(dtype, key, got, grid)
        twin = self._twin(dtype, key, got)
        v = derived.interp((t,))
        how_scaled = (f"the two shapes' ratio in the measured {twin} kernel" if twin
                      else "the roofline ratio")
        note = (f"moe {dtype} hidden/inter/topk/experts/tp/ep {'/'.join(str(x) for x in key)} not measured "
                f"on {self.name} ({self.engine}): nearest measured {shape} scaled by {how_scaled} at "
                "each measured token count (kept monotone)")
        if sibling:
            note = f"{note}; {sibling}"
        if v is not None:
            return Lookup(v, False, note)
        lk = derived.estimate((t,), lambda p: self.moe_roofline_ms(dtype, p[0], *key), f"moe {dtype}", how)
        return Lookup(lk.ms, False, f"{note}; {lk.note}")

    def _twin(self, dtype: str, key: tuple[int, ...], got: tuple[int, ...]) -> str:
        """Another dtype of this table that measured both the shape ``key`` and its nearest measured
        shape ``got`` of ``dtype`` (BF16 first), or ``""``."""
        for d in ("bf16", *(x for x in self.moe_dtypes if x != "bf16")):
            if d != dtype and key in self._shape_keys[d] and got in self._shape_keys[d]:
                return d
        return ""

    def _derived_moe_grid(self, dtype: str, key: tuple[int, ...], got: tuple[int, ...], grid: _Grid) -> _Grid:
        """The grid of an unmeasured shape: the nearest measured shape's value at each measured
        token count times the two shapes' ratio there, each the least monotone value (the running
        maximum over fewer tokens), so that lookups never fall with more tokens.  The ratio is the
        one another dtype of the same engine measured for the two shapes (:meth:`_twin`: e.g. block
        FP8 experts at an expert width over MoE TP that no block-FP8 checkpoint loads, 192 for
        Qwen3-235B-A22B on TP8, from BF16's rows at TP8 and TP4), where it measured both at that token
        count, else the two shapes' roofline ratio (which saturates at the launch floor, where it
        says the shapes cost the same)."""
        derived = self._grids.get(("moe-derived", dtype, key))
        if derived is None:
            twin = self._twin(dtype, key, got)
            rows = self._doc["moe"]["dtypes"][twin]["shapes"] if twin else {}
            near = rows.get(",".join(str(x) for x in key), [None] * len(self._tokens))
            far = rows.get(",".join(str(x) for x in got), [None] * len(self._tokens))
            values: list[float | None] = []
            top = 0.0
            for x, v, a, b in zip(self._tokens, grid.values, near, far, strict=True):
                if v is None:
                    values.append(None)
                    continue
                ratio = (a / b if a and b else
                         self.moe_roofline_ms(dtype, x, *key) / self.moe_roofline_ms(dtype, x, *got))
                top = max(top, v * ratio)
                values.append(top)
            derived = self._grids[("moe-derived", dtype, key)] = _Grid(("tokens",), (self._tokens,), values)
        return derived

    # ------------------------------------------------------------------ MLA

    def _mla_owner(self) -> tuple[MoETables | None, str]:
        if self.has_mla:
            return self, ""
        for eng in mla_fallback(self.engine_name):
            if _shipped(self.name, eng):
                t = _load(self.name, eng)
                if t.has_mla:
                    return t, f"no core MLA measured with {self.engine} on {self.name}: {t.engine}'s used"
        return None, f"no core MLA measured on {self.name}"

    def mla_kv_dtypes(self) -> tuple[str, ...]:
        """The KV dtypes of the core MLA tables used (this engine's or the fallback's)."""
        owner, _ = self._mla_owner()
        if owner is None:
            return ()
        return tuple(d for d in ("bf16", "fp8") if d in owner._doc["mla"]["decode"]["ms"])

    def mla_decode_roofline_ms(self, batch: float, context: float, heads: int, kv_dtype: str, *,
                               fit_kv: str | None = None) -> float:
        """Fitted roofline of absorbed MLA decode, ms: max(floor, latent read + q + out / (fitted HBM
        share x HBM), 2 x batch x heads x context x (576 + 512) / (fitted share x bf16 peak))."""
        owner = self._mla_owner()[0] or self
        e = owner.efficiency["mla_decode"][fit_kv or kv_dtype]
        nbytes = batch * (context * MLA_KV_VALUES * BYTES_PER_VALUE[kv_dtype] + heads * _MLA_DECODE_DIM * 2)
        flops = 2 * batch * heads * context * _MLA_DECODE_DIM
        t = max(nbytes / (e.memory * self.hbm_bytes_per_s), flops / (e.compute * self.flops_per_s["bf16"]))
        return max(e.floor_ms, 1e3 * t)

    def mla_prefill_roofline_ms(self, batch: float, prompt: float, heads: int, kv_dtype: str, *,
                                fit_kv: str | None = None) -> float:
        """Fitted roofline of causal MLA prefill, ms: max(floor, 2 x batch x heads x (192 + 128) x
        prompt (prompt + 1) / 2 / (fitted share x bf16 peak), bytes / (decode's HBM share x HBM))."""
        owner = self._mla_owner()[0] or self
        fk = fit_kv or kv_dtype
        e = owner.efficiency["mla_prefill"][fk]
        mem = owner.efficiency["mla_decode"][fk].memory
        flops = 2 * batch * heads * _MLA_PREFILL_DIM * prompt * (prompt + 1) / 2
        kvb = BYTES_PER_VALUE[kv_dtype]
        nbytes = batch * prompt * (heads * (192 + 192 + 128 + 128) * 2 + MLA_KV_VALUES * kvb)
        t = max(flops / (e.compute * self.flops_per_s["bf16"]), nbytes / (mem * self.hbm_bytes_per_s))
        return max(e.floor_ms, 1e3 * t)

    def _mla(self, kind: str, batch: float, length: float, heads: int, kv_dtype: str) -> Lookup:
        b = _positive("batch", batch)
        s = _positive("context" if kind == "decode" else "prompt", length)
        h = _count("heads", heads)
        if kv_dtype not in ("bf16", "fp8"):
            raise ParameterError("kv_dtype", kv_dtype, "one of bf16, fp8")
        owner, owner_note = self._mla_owner()
        if owner is None:
            raise ParameterError("gpu", self.name, "a GPU with a measured core MLA table")
        table = owner._doc["mla"][kind]
        kv = kv_dtype if kv_dtype in table["ms"] else "bf16"
        have = sorted(int(x) for x in table["ms"][kv])
        got = h if h in have else min(have, key=lambda c: (_log2(h, c), c))
        grid = owner._grids.get(("mla", kind, kv, got))
        if grid is None:
            second = "context" if kind == "decode" else "prompt"
            grid = owner._grids[("mla", kind, kv, got)] = _Grid(
                ("batch", second), (table["batch"], table[second]), table["ms"][kv][str(got)])
        roof_fn = self.mla_decode_roofline_ms if kind == "decode" else self.mla_prefill_roofline_ms
        v = grid.interp((b, s))
        if v is not None:
            lk = Lookup(v, True)
        else:
            e = owner.efficiency[f"mla_{kind}"][kv]
            how = (f"at fitted {_pct(e.memory)} of HBM / {_pct(e.compute)} of bf16 peak" if kind == "decode"
                   else f"at fitted {_pct(e.compute)} of bf16 peak")
            lk = grid.estimate((b, s), lambda p: roof_fn(p[0], p[1], got, kv), f"mla {kind} {kv}-KV", how)
        notes = [x for x in (owner_note, lk.note) if x]
        scale = 1.0
        if got != h:
            scale = roof_fn(b, s, h, kv) / roof_fn(b, s, got, kv)
            notes.append(f"mla {kind} with {h} heads per GPU not measured: {got} heads scaled by the "
                         f"roofline ratio x{scale:.3g}")
        if kv != kv_dtype:
            r = roof_fn(b, s, h, kv_dtype, fit_kv=kv) / roof_fn(b, s, h, kv, fit_kv=kv)
            scale *= r
            notes.append(f"no {kv_dtype} latent cache measured: the {kv} table scaled by the roofline "
                         f"x{r:.3g}")
        measured = lk.measured and got == h and kv == kv_dtype and owner is self
        return Lookup(lk.ms * scale, measured, "; ".join(notes))

    def mla_decode(self, batch: float, context: float, heads: int, kv_dtype: str) -> Lookup:
        """Core MLA attention of one decode step: ``batch`` sequences with ``context`` tokens each
        in the latent cache, ``heads`` query heads per GPU (128 / TP for DeepSeek-V3), latent cache
        of ``kv_dtype`` (``bf16`` or ``fp8``).  The absorbed BMMs are :meth:`mla_bmm`."""
        return self._mla("decode", batch, context, heads, kv_dtype)

    def mla_prefill(self, batch: float, prompt: float, heads: int, kv_dtype: str) -> Lookup:
        """Core MLA attention of a fresh causal prefill of ``batch`` prompts of ``prompt`` tokens."""
        return self._mla("prefill", batch, prompt, heads, kv_dtype)

    def mla_bmm_roofline_ms(self, op: str, tokens: float, heads: int, dtype: str, *,
                            fit_dtype: str | None = None) -> float:
        """Fitted roofline of one absorbed MLA BMM (``heads`` x [tokens x 128] x [128 x 512] or the
        transpose), ms."""
        e = self.efficiency["mla_bmm"][fit_dtype or dtype]
        w = heads * _BMM[0] * _BMM[1] * (1.0 if dtype == "fp8" else 2.0)
        nbytes = w + tokens * heads * sum(_BMM) * 2
        flops = 2 * tokens * heads * _BMM[0] * _BMM[1]
        peak = self.flops_per_s.get(dtype) or self.flops_per_s["bf16"]
        t = max(nbytes / (e.memory * self.hbm_bytes_per_s), flops / (e.compute * peak))
        return max(e.floor_ms, 1e3 * t)

    def mla_bmm(self, op: str, tokens: float, heads: int, dtype: str = "bf16") -> Lookup:
        """MLA's absorbed batched matmul: ``op`` ``"pre"`` (q_nope x W_UK into the latent, before
        decode attention) or ``"post"`` (the latent output x W_UV), ``tokens`` tokens, ``heads``
        heads per GPU, ``dtype`` ``bf16`` or ``fp8`` (vLLM has no FP8 BMM: its bf16 is used)."""
        if op not in ("pre", "post"):
            raise ParameterError("op", op, "'pre' or 'post'")
        t = _positive("tokens", tokens)
        h = _count("heads", heads)
        if dtype not in ("bf16", "fp8"):
            raise ParameterError("dtype", dtype, "one of bf16, fp8")
        table = self._doc["mla_bmm"]
        dt = dtype if dtype in table["ms"][op] else "bf16"
        have = sorted(int(x) for x in table["ms"][op][dt])
        got = h if h in have else min(have, key=lambda c: (_log2(h, c), c))
        grid = self._grids.get(("bmm", op, dt, got))
        if grid is None:
            grid = self._grids[("bmm", op, dt, got)] = _Grid(("tokens",), (table["tokens"],),
                                                             table["ms"][op][dt][str(got)])
        v = grid.interp((t,))
        if v is not None:
            lk = Lookup(v, True)
        else:
            e = self.efficiency["mla_bmm"][dt]
            how = f"at fitted {_pct(e.memory)} of HBM / {_pct(e.compute)} of peak"
            lk = grid.estimate((t,), lambda p: self.mla_bmm_roofline_ms(op, p[0], got, dt),
                               f"mla_bmm {op} {dt}", how)
        notes = [lk.note] if lk.note else []
        scale = 1.0
        if got != h:
            scale = self.mla_bmm_roofline_ms(op, t, h, dt) / self.mla_bmm_roofline_ms(op, t, got, dt)
            notes.append(f"mla_bmm with {h} heads not measured: {got} heads scaled by the roofline "
                         f"x{scale:.3g}")
        if dt != dtype:
            notes.append(f"no {dtype} BMM measured with {self.engine}: its {dt} BMM")
        return Lookup(lk.ms * scale, lk.measured and got == h and dt == dtype, "; ".join(notes))

    # ------------------------------------------------------------------ expert-parallel communication

    def deepep_roofline_ms(self, kind: str, mode: str, tokens: float, hidden: int, topk: int, experts: int,
                           ep: int, *, fit: Fit | None = None) -> float:
        """Fitted roofline of a DeepEP dispatch / combine, ms: max(floor, the bytes of one rank
        (NOTICE.md) over NVLink within a node and over the inter-node link for the share of ranks
        outside it, at the fitted bus share)."""
        f = fit or self.efficiency["deepep"][f"{mode}_{kind}"]
        if mode == "ll":
            per = hidden + hidden / 128 * 4 + 16 if kind == "dispatch" else 2 * hidden
            nbytes = tokens * topk * per
        else:
            per_rank = experts / ep
            miss = 1.0
            for j in range(topk):
                miss *= max(0.0, (experts - per_rank - j) / (experts - j))
            per = hidden * (1 + 1 / 32) if kind == "dispatch" else 2 * hidden
            nbytes = tokens * ep * (1.0 - miss) * per
        gpn = self.domain_gpus
        outside = max(0.0, (ep - gpn) / ep)
        t = nbytes * (1 - outside) / (f.bus * self.nvlink_bytes_per_s)
        if outside:
            t = max(t, nbytes * outside / (f.bus * self.scaleout_bytes_per_s))
        return max(f.floor_ms, 1e3 * t)

    def deepep(self, kind: str, mode: str, tokens: float, hidden: int, topk: int, experts: int, ep: int, *,
               sms: int = 20) -> Lookup:
        """DeepEP ``kind`` (``"dispatch"`` or ``"combine"``) with the ``mode`` (``"ll"`` low-latency,
        ``"normal"``) kernels for ``tokens`` tokens of this rank over ``ep`` ranks (0 on one);
        ``sms``: the SMs given to the normal kernels (4-24 measured; DeepEP's default 20)."""
        if kind not in ("dispatch", "combine"):
            raise ParameterError("kind", kind, "'dispatch' or 'combine'")
        if mode not in ("ll", "normal"):
            raise ParameterError("mode", mode, "'ll' or 'normal'")
        t = _positive("tokens", tokens)
        h, k = _count("hidden", hidden), _count("topk", topk)
        e, n = _count("experts", experts), _count("ep", ep)
        sm = _count("sms", sms)
        if n == 1:
            return Lookup(0.0, True)
        if "deepep" not in self._doc:
            f = self.efficiency["alltoall"][str(max(int(g) for g in self.efficiency["alltoall"]))]
            ms = self.deepep_roofline_ms(kind, mode, t, h, k, e, n, fit=f)
            return Lookup(ms, False, f"no DeepEP measured on {self.name}: roofline at the NCCL all-to-all "
                                     f"fit ({_pct(f.bus)} of NVLink, floor {f.floor_ms:g} ms)")
        d = self._doc["deepep"]
        have = [tuple(int(x) for x in s.split(",")) for s in d[mode]["ms"][kind]]
        q = (h, k, e)
        got = q if q in have else min(
            have, key=lambda c: (_log2(h, c[0]) + _log2(k, c[1]) + _log2(e, c[2]), c))
        grid = self._grids.get(("deepep", mode, kind, got))
        if grid is None:
            ms_list = d[mode]["ms"][kind][",".join(str(x) for x in got)]
            grid = self._grids[("deepep", mode, kind, got)] = (
                _Grid(("tokens",), (d["ll"]["tokens"],), ms_list) if mode == "ll"
                else _Grid(("sms", "tokens"), (d["normal"]["sms"], d["normal"]["tokens"]), ms_list))
        point: tuple[float, ...] = (t,) if mode == "ll" else (float(sm), t)
        m = self.deepep_ep

        def roof(p: tuple[float, ...]) -> float:
            return self.deepep_roofline_ms(kind, mode, p[-1], got[0], got[1], got[2], m)

        v = grid.interp(point)
        f = self.efficiency["deepep"][f"{mode}_{kind}"]
        lk = (Lookup(v, True) if v is not None else
              grid.estimate(point, roof, f"deepep {mode} {kind}", f"at fitted {_pct(f.bus)} of NVLink"))
        if mode == "ll" and n > self.domain_gpus:
            return self._deepep_rdma(kind, t, h, k, n, lk)
        if got == q and n == m:
            return lk
        scale = self.deepep_roofline_ms(kind, mode, t, h, k, e, n) / roof(point)
        note = (f"deepep {mode} {kind} hidden/topk/experts {h}/{k}/{e} over {n} ranks not measured: "
                f"{'/'.join(str(x) for x in got)} over {m} scaled by the roofline ratio x{scale:.3g}")
        if n > self.domain_gpus:
            note += (f" (inter-node share at the full {self.scaleout_bytes_per_s / 1e9:g} GB/s per GPU: "
                     "optimistic)")
        return Lookup(lk.ms * scale, False, "; ".join(x for x in (note, lk.note) if x))

    def _deepep_rdma(self, kind: str, tokens: float, hidden: int, topk: int, ep: int,
                     intra: Lookup) -> Lookup:
        """DeepEP's low-latency ``kind`` over ``ep`` ranks spanning nodes: its published pure-RDMA latency
        (``data/deepep_rdma.toml``: 128 tokens, hidden 7168, top-8 on 400 Gb/s NICs; log-linear in the
        ranks between the published ones) scaled by the bytes each rank sends, ``tokens x topk`` pairs
        of ``hidden + hidden / 128 x 4 + 16`` (FP8 and its scales) to dispatch or ``2 hidden`` (BF16)
        to combine, and by the published NIC's rate over this GPU's; never below the kernel's measured
        time within a node at the same tokens (``intra``: its latency floor).  Pure RDMA: since DeepEP
        #173 the peers inside a node go over NVLink, so this is an upper bound there."""
        pub = _deepep_rdma_table()
        pts = sorted(pub[kind].items())
        x = math.log2(min(max(ep, pts[0][0]), pts[-1][0]))
        us = pts[-1][1]
        for (e0, v0), (e1, v1) in itertools.pairwise(pts):
            if math.log2(e0) <= x <= math.log2(e1):
                w = (x - math.log2(e0)) / (math.log2(e1) - math.log2(e0))
                us = v0 + w * (v1 - v0)
                break

        def per(hd: int) -> float:
            return hd + hd / 128 * 4 + 16 if kind == "dispatch" else 2.0 * hd

        ratio = tokens * topk * per(hidden) / (pub["tokens"] * pub["topk"] * per(pub["hidden"]))
        ms = us * 1e-3 * ratio * pub["nic_bytes_per_s"] / self.scaleout_bytes_per_s
        gpn = self.domain_gpus
        word = self.topology.domain_word
        note = (f"deepep ll {kind} over {ep} ranks spans {math.ceil(ep / gpn)} {word} of {gpn}, not measured:"
                " "
                f"DeepEP's published pure-RDMA latency "
                f"({us:.0f} us at 128 tokens, hidden 7168, top-8, 400 Gb/s) scaled by bytes and this GPU's "
                f"{self.scaleout_bytes_per_s / 1e9:g} GB/s")
        return Lookup(max(ms, intra.ms), False, note)

    def _nccl(self, op: str, gpus: int, nbytes: float) -> Lookup:
        n = _count("gpus", gpus)
        size = _positive("nbytes", nbytes)
        if n == 1:
            return Lookup(0.0, True)
        d = self._doc["nccl_collectives"][op]
        have = [int(g) for g in d["gpus"]]

        def roof(g: int, s: float, fit_gpus: int | None = None) -> float:
            f = self.efficiency[op][str(fit_gpus or g)]
            return max(f.floor_ms, 1e3 * (g - 1) / g * s / (f.bus * self.nvlink_bytes_per_s))

        if n in have:
            grid = self._grids.get(("nccl", op, n))
            if grid is None:
                i, ns = have.index(n), len(d["bytes"])
                grid = self._grids[("nccl", op, n)] = _Grid(("bytes",), (d["bytes"],),
                                                            d["ms"][i * ns:(i + 1) * ns])
            v = grid.interp((size,))
            if v is not None:
                return Lookup(v, True)
            f = self.efficiency[op][str(n)]
            return grid.estimate((size,), lambda p: roof(n, p[0]), f"nccl {op} over {n} GPUs",
                                 f"at fitted {_pct(f.bus)} of NVLink bus bandwidth")
        if n <= self.domain_gpus:
            m = min(have, key=lambda c: (abs(math.log(n / c)), -c))
            base = self._nccl(op, m, size)
            r = roof(n, size, fit_gpus=m) / roof(m, size)
            note = f"nccl {op} over {n} GPUs not measured: {m} GPUs scaled by the traffic x{r:.3g}"
            ms = base.ms * r
            floor = nccl_domain_us(n) * 1e-3 if n > max(have) else 0.0  # one NVLink domain, more ranks
            if floor > ms:
                ms = floor
                note += f", at least NCCL's latency for {n} ranks in one NVLink domain ({floor * 1e3:.1f} us)"
            return Lookup(ms, False, "; ".join(x for x in (note, base.note) if x))
        node = self.domain_gpus
        base = self._nccl(op, node, size)
        nodes = n / node
        if op == "alltoall":  # each GPU sends the other nodes' share of its buffer over its own NIC
            inter = (n - node) / n * size / self.scaleout_bytes_per_s * 1e3
        else:  # a node takes in the other nodes' share of the gathered (or reduced) buffer over its NICs
            inter = (nodes - 1) / nodes * (size / node) / self.scaleout_bytes_per_s * 1e3
        word = self.topology.domain_word
        note = (f"nccl {op} over {n} GPUs spans {math.ceil(n / node)} {word} of {node}, not measured: the "
                f"{node}-GPU time plus "
                f"the inter-node share of the traffic at the full {self.scaleout_bytes_per_s / 1e9:g} GB/s "
                "per GPU (optimistic)")
        return Lookup(base.ms + inter, False, "; ".join(x for x in (note, base.note) if x))

    def all_gather(self, gpus: int, nbytes: float) -> Lookup:
        """NCCL all-gather over ``gpus`` GPUs whose gathered output is ``nbytes`` (0 on one GPU)."""
        return self._nccl("all_gather", gpus, nbytes)

    def reduce_scatter(self, gpus: int, nbytes: float) -> Lookup:
        """NCCL reduce-scatter over ``gpus`` GPUs whose whole input is ``nbytes`` (each keeps 1 / gpus of
        it, reduced; 0 on one GPU)."""
        return self._nccl("reduce_scatter", gpus, nbytes)

    def alltoall(self, gpus: int, nbytes: float) -> Lookup:
        """NCCL all-to-all over ``gpus`` GPUs, ``nbytes`` the send buffer of each (0 on one GPU)."""
        return self._nccl("alltoall", gpus, nbytes)

