"""Gated-delta-net (linear attention) layers as operations of a step, priced from measured tables.

Qwen3.5 (and Qwen3-Next) run a gated delta net in three of every four layers and full attention in the
fourth (:class:`~servesim.hardware.shape.ModelShape` ``layer_linear``).  A gated-delta-net
layer keeps no KV cache: each request holds a fixed recurrent state, ``Hv / T`` heads of ``d_v x d_k``
values in ``mamba_ssm_dtype`` and the causal convolution's last ``K - 1`` inputs
(:meth:`~servesim.hardware.shape.ModelShape.state_bytes_per_request`), whatever its length.

**Operations of a hybrid step** (:func:`hybrid_attention_ops`, the attention part of
:class:`~servesim.hardware.moe_step.MoEStepModel`'s operation list; the MoE layers, LM head and
collectives are the step model's own):

* full-attention layers, as every GQA layer (the step model's GEMM and attention tables): the QKV
  projection ``(m, (g H / T + 2 max(1, G / T)) d, h)``, ``g = 2`` with ``attn_output_gate`` (vLLM
  ``model_executor/models/qwen3_next.py`` ``Qwen3NextAttention``: ``qkv_proj`` outputs ``q`` and its
  gate together), the attention of the rank's sequences and chunks, and ``O (m, h, H d / T)``;
* gated-delta-net layers: ``in_proj_qkvz (m, (2 Hk dk + 2 Hv dv) / T, h)`` and ``in_proj_ba (m, 2 Hv /
  T, h)`` (vLLM ``Qwen3NextGatedDeltaNet`` / Qwen3.5's ``in_proj_qkvz`` and ``in_proj_ba``, column
  parallel), the **gated delta net** itself and ``out_proj (m, h, Hv dv / T)``.

**The gated delta net's price** (:class:`GDNTable`): the engine's measured ``gdn_perf`` table on the
GPU (build: ``scripts/build_attention_kind_tables.py``), by the heads of one GPU: a decode step's
causal-convolution update plus recurrent update of ``b`` sequences (``positions`` tokens each in a
verify step: ``b x positions`` rows), plus each prefill chunk's chunked convolution and chunked delta
rule (``count`` sequences of ``tokens``; a chunk behind a cached prefix costs what a fresh one of its
length does: the state carries the prefix).  Between grid points the time is interpolated linearly,
past the grid extrapolated along the last interval; the grid was made monotone at build time, so more
sequences or more tokens never cost less.  Where the GPU or engine has no table (the A100 has SGLang's
only; another engine's table on the same GPU stands in first), the op is its roofline at the kernel
tables' fitted HBM share plus two launch floors, marked unmeasured.

**Speed of light** (:attr:`~servesim.hardware.ops.Op.light_s`): the state read and written once per
sequence, ``2 (Hv / T) d_v d_k s`` bytes (``s`` the state's bytes per value) plus the convolution
state's ``2 (conv / T) (K - 1) 2``, and each token's q, k, v in and output out in BF16; FLOPs ``6 (Hv /
T) d_k d_v`` per token (``k^T S``, the rank-one update and ``q^T S``: two FLOPs per multiply-add each).
The state's bytes per value are the engine's (:func:`state_bytes`).  The engine's price lies between
that bound and ``GDN_MULTIPLE x bound + GDN_FLOOR_S`` (the launch of the two kernels), plus, for a
prefill, :data:`GDN_CHUNK_S` for each chunk of 64 tokens of each sequence (the chunked delta rule walks
them in order: a serial latency no bandwidth removes), which the tests check over the tables' grids
(:func:`gdn_ceiling_s`).

**KV capacity**: only the full-attention layers hold KV (``ModelShape.kv_bytes_per_token`` skips the
others); each request's state is counted on top, spread over the request's tokens
(:func:`state_bytes_per_token`: the request length the step model is made for, ``for_requests``, else
the model's longest context), so that ``tokens x (KV + state / tokens)`` is what a request holds.

Standard library only; nothing prints.
"""

from __future__ import annotations

import gzip
import json
import math
from bisect import bisect_right
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from servesim.hardware import engines
from servesim.hardware.dtypes import BYTES_PER_VALUE
from servesim.hardware.ops import Op
from servesim.hardware.shape import ModelShape

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.engines import EngineProfile
    from servesim.hardware.kernels import KernelTables
    from servesim.hardware.stepmodel import Chunk

__all__ = ["GDN_CHUNK_S", "GDN_FLOOR_S", "GDN_MULTIPLE", "GDNTable", "Grid",
           "attention_kind_tables", "gdn_ceiling_s", "gdn_op", "gdn_table", "gdn_work",
           "hybrid_attention_ops", "state_bytes", "state_bytes_per_token", "table_folder"]

_FILE = Path(__file__).parent / "data" / "attention_kinds" / "attention_kinds.json.gz"

GDN_MULTIPLE = 4.0
"""The gated delta net's engine price is at most this multiple of its speed of light plus
:data:`GDN_FLOOR_S` (checked over every shipped table's grid by the tests)."""

GDN_FLOOR_S = 40e-6
"""The launch floor of a gated-delta-net layer's kernels (convolution and delta rule: about 20 us
each at one sequence in the tables)."""

GDN_CHUNK_S = 40e-6
"""The chunked delta rule walks each sequence's chunks of 64 tokens in order: a prefill's price is
at most :data:`GDN_MULTIPLE` x its light + :data:`GDN_FLOOR_S` + this per chunk of each sequence (the
slowest shipped table, SGLang 0.5.14 on the H200 at 64 value heads, takes 35 us a chunk; vLLM's
kernels 2-3 us)."""

_FOLDERS = {"h100": "h100_sxm", "h100-sxm": "h100_sxm", "h200": "h200_sxm", "h200-sxm": "h200_sxm",
            "b200": "b200_sxm", "b200-sxm": "b200_sxm", "b300": "b300_sxm", "b300-sxm": "b300_sxm",
            "gb200": "gb200", "gb300": "gb300", "a100-80gb": "a100_sxm", "a100-sxm": "a100_sxm"}


@cache
def attention_kind_tables() -> dict[str, Any]:
    """The shipped excerpts (``data/attention_kinds/attention_kinds.json.gz``), read once."""
    with gzip.open(_FILE, "rt", encoding="utf-8") as fh:
        doc: dict[str, Any] = json.load(fh)
    return doc


def table_folder(gpu: str) -> str | None:
    """The table folder of a servesim GPU name (``h200``, ``b200``, ``gb200`` ...), None if none."""
    if not isinstance(gpu, str):
        return None
    key = gpu.strip().lower()
    gpus = attention_kind_tables()["gpus"]
    name = _FOLDERS.get(key, key)
    return name if name in gpus else None


def _interp(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """Piecewise-linear ``y(x)``: the first value below the grid, the last interval's line past it
    (never below the last value)."""
    if len(xs) == 1 or x <= xs[0]:
        return float(ys[0])
    i = min(bisect_right(xs, x) - 1, len(xs) - 2)
    x0, x1, y0, y1 = xs[i], xs[i + 1], ys[i], ys[i + 1]
    y = y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return float(max(y, ys[-1]) if x > xs[-1] else y)


class Grid:
    """A measured grid of ms over one axis (``x``) or two (``x`` by ``y``), monotone in each."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.x: list[float] = [float(v) for v in doc["x"]]
        if "rows" in doc:  # ragged: each row its own y
            self.rows: list[tuple[list[float], list[float]]] = [
                ([float(v) for v in r["y"]], [float(v) for v in r["ms"]]) for r in doc["rows"]]
        elif "y" in doc:
            y = [float(v) for v in doc["y"]]
            self.rows = [(y, [float(v) for v in row]) for row in doc["ms"]]
        else:
            self.rows = []
            self.ms = [float(v) for v in doc["ms"]]

    def y_max(self, x: float) -> float:
        """The longest ``y`` measured at ``x``: the shorter of the two rows around it."""
        if not self.rows:
            return math.inf
        i = min(max(bisect_right(self.x, x) - 1, 0), len(self.x) - 1)
        j = min(i + 1, len(self.x) - 1) if x > self.x[i] else i
        return min(self.rows[i][0][-1], self.rows[j][0][-1])

    def __call__(self, x: float, y: float = 1.0) -> float:
        """ms at ``(x, y)``: linear in each axis, extrapolated past the grid."""
        if not self.rows:
            return _interp(self.x, self.ms, x)
        col = [_interp(ys, ms, y) for ys, ms in self.rows]
        return _interp(self.x, col, x)


class GDNTable:
    """One engine's measured gated-delta-net kernels on one GPU (see the module docstring)."""

    def __init__(self, gpu: str, engine: str, entry: dict[str, Any]) -> None:
        self.gpu, self.engine, self.version = gpu, engine, str(entry.get("version", ""))
        self._grids = {k: {p: Grid(g) for p, g in v.items()} for k, v in entry.get("gdn", {}).items()}

    def has(self, key_heads: int, value_heads: int) -> bool:
        return f"{key_heads}x{value_heads}" in self._grids

    def decode_s(self, rows: float, key_heads: int, value_heads: int) -> float:
        """Convolution update plus recurrent update of ``rows`` sequences, one layer, seconds."""
        return self._grids[f"{key_heads}x{value_heads}"]["decode"](max(1.0, rows)) * 1e-3

    def prefill_s(self, count: float, tokens: float, key_heads: int, value_heads: int) -> float:
        """Chunked convolution plus chunked delta rule of ``count`` sequences of ``tokens``, seconds."""
        return self._grids[f"{key_heads}x{value_heads}"]["prefill"](max(1.0, count), max(1.0, tokens)) * 1e-3


@cache
def gdn_table(gpu: str, engine: str, heads: tuple[int, int] | None = None) -> GDNTable | None:
    """The gated-delta-net table of ``engine`` on ``gpu`` (that times ``heads``, key x value heads of
    one GPU, when given): its own, else another engine's on the same GPU in engines.toml's order (vLLM's,
    SGLang's, TensorRT-LLM's: TensorRT-LLM 1.3.0rc20 timed only one GPU's 16 key heads), else None."""
    folder = table_folder(gpu)
    if folder is None:
        return None
    per = attention_kind_tables()["gpus"][folder]
    for e in dict.fromkeys((engine, *engines.ENGINES)):
        if "gdn" in per.get(e, {}):
            table = GDNTable(folder, e, per[e])
            if heads is None or table.has(*heads):
                return table
    return None


def state_bytes(arch: ModelShape, engine: str) -> int:
    """Bytes of one recurrent-state value as ``engine`` keeps it: engines.toml ``ssm_state_bytes``
    (:func:`servesim.hardware.engines.ssm_state_bytes`: TensorRT-LLM's BF16, with its source), else the
    config's ``mamba_ssm_dtype``, which vLLM and SGLang follow."""
    own = engines.ssm_state_bytes(engine)
    return arch.ssm_state_bytes if own is None else own


def state_bytes_per_token(arch: ModelShape, tp: int, kv_context: int | None, engine: str) -> float:
    """Each request's recurrent state on one GPU, spread over its tokens (module docstring): the
    request length ``kv_context`` (``for_requests``), else the model's longest context, else one."""
    if not arch.linear_layers:
        return 0.0
    tokens = kv_context or arch.context_length or 1
    return float(arch.state_bytes_per_request(tp, state_bytes(arch, engine))) / tokens


def gdn_work(arch: ModelShape, tp: int, rows: float, chunks: Sequence[Chunk],
             ssm_bytes: int | None = None) -> tuple[float, float]:
    """One gated-delta-net layer's HBM bytes and FLOPs on one GPU (the speed of light, module
    docstring) for ``rows`` decoding sequences (one token each) and the prefill ``chunks``, the state
    at ``ssm_bytes`` a value (default the config's)."""
    hv = arch.linear_value_heads / tp
    s = arch.ssm_state_bytes if ssm_bytes is None else ssm_bytes
    state = 2 * hv * arch.linear_value_head_dim * arch.linear_key_head_dim * s
    conv = 2 * arch.linear_conv_dim / tp * (arch.linear_conv_kernel - 1) * 2.0
    per_token = (arch.linear_conv_dim / tp + hv * arch.linear_value_head_dim) * 2.0
    sequences = rows + sum(c.count for c in chunks)
    tokens = rows + sum(c.count * c.tokens for c in chunks)
    flops = 6.0 * hv * arch.linear_key_head_dim * arch.linear_value_head_dim * tokens
    return sequences * (state + conv) + tokens * per_token, flops


class StepRows(Protocol):
    """What the attention pricers here and in :mod:`servesim.hardware.sparse_attention` read of a step
    (``moe_step._Batch``, which imports them: hence a protocol): the busiest rank's decoding
    sequences ``b`` at mean ``context``, its tokens ``m``, positions a sequence and prefill chunks."""

    @property
    def b(self) -> float: ...
    @property
    def m(self) -> float: ...
    @property
    def context(self) -> float: ...
    @property
    def positions(self) -> int: ...
    @property
    def rank_chunks(self) -> tuple[Chunk, ...]: ...


class _Ranks(Protocol):
    @property
    def tp(self) -> int: ...


class LayerPricer(Protocol):
    """What the attention pricers here and in :mod:`servesim.hardware.sparse_attention` ask of the
    step model that lists them (:class:`~servesim.hardware.moe_step.MoEStepModel`, which imports them:
    hence a protocol): its shape, ranks, GPU, engine and tables, and its GEMM and attention lookups."""

    arch: ModelShape
    gpu: str
    dtype: str
    kv_dtype: str
    engine: EngineProfile
    tables: KernelTables
    mla_prefill_note: str
    _quantized: frozenset[str]

    @property
    def par(self) -> _Ranks: ...
    def _table_dtype(self, quantized: bool) -> str: ...
    def _gemm(self, m: float, n: int, k: int, dtype: str | None = None) -> tuple[float, bool, str]: ...
    def _gemm_op(self, name: str, count: float, seconds: float, m: float, n: int, k: int, wbytes: float,
                 dtype: str, measured: bool, note: str) -> Op: ...
    def _attention(self, b: float, ctx: float, chunks: tuple[Chunk, ...], window: int,
                   positions: int = 1) -> tuple[float, bool]: ...
    def _attention_work(self, b: float, context: float, positions: int, chunks: tuple[Chunk, ...],
                        window: int) -> tuple[float, float]: ...


def _projections(model: LayerPricer, x: StepRows,
                 specs: Sequence[tuple[str, int, int, int, frozenset[str]]]) -> list[Op]:
    """Weight GEMMs ``(name, count, n, k, parts)`` of the busiest rank's ``m`` tokens, each from the
    GEMM table of its checkpoint format (the step model's lookups)."""
    ops = []
    for name, count, n, k, parts in specs:
        quantized = bool(model._quantized & parts)
        d = model._table_dtype(quantized)
        g, good, note = model._gemm(x.m, n, k, d)
        wbytes = BYTES_PER_VALUE[model.dtype] if quantized else 2.0
        ops.append(model._gemm_op(name, count, g, x.m, n, k, wbytes, d, good, note))
    return ops


def hybrid_attention_ops(model: LayerPricer, x: StepRows) -> list[Op]:
    """The attention part of a hybrid step (module docstring): full-attention layers' projections
    and attention, gated-delta-net layers' projections and the gated delta net."""
    a, tp = model.arch, model.par.tp
    full, lin = a.attention_layers, a.linear_layers
    heads, kvh, d, h = a.heads // tp, max(1, a.kv_heads // tp), a.head_dim, a.hidden
    gate = 2 if a.attn_output_gate else 1
    kd = a.linear_key_heads * a.linear_key_head_dim
    vd = a.linear_value_heads * a.linear_value_head_dim
    specs: list[tuple[str, int, int, int, frozenset[str]]] = [
        ("qkv proj", full, (gate * heads + 2 * kvh) * d, h, frozenset({"q_proj", "k_proj", "v_proj"})),
        ("o proj", full, h, heads * d, frozenset({"o_proj"})),
        ("gdn in_proj_qkvz", lin, (2 * kd + 2 * vd) // tp, h, frozenset({"in_proj_qkvz"})),
        ("gdn in_proj_ba", lin, 2 * a.linear_value_heads // tp, h, frozenset({"in_proj_ba"})),
        ("gdn out_proj", lin, h, vd // tp, frozenset({"out_proj"})),
    ]
    ops = _projections(model, x, [s for s in specs if s[1]])
    if full:
        ctx = x.context + (x.positions - 1) / 2 + 1
        t_attn, good = model._attention(x.b, ctx, x.rank_chunks, 0, x.positions)
        nbytes, flops = model._attention_work(x.b, x.context, x.positions, x.rank_chunks, 0)
        ops.append(Op("attention", "attention", full, t_attn, nbytes=nbytes, flops=flops, measured=good))
    if lin:
        ops.append(gdn_op(model, x, lin))
    return ops


def gdn_op(model: LayerPricer, x: StepRows, count: int) -> Op:
    """The gated delta net of ``count`` layers for the busiest rank's sequences and chunks."""
    a, tp = model.arch, model.par.tp
    hk, hv = a.linear_key_heads // tp, a.linear_value_heads // tp
    rows = x.b * x.positions
    table = gdn_table(model.gpu, model.engine.name, (hk, hv))
    engine = table.engine if table is not None else model.engine.name
    nbytes, flops = gdn_work(a, tp, rows, x.rank_chunks, state_bytes(a, engine))
    if table is not None and table.has(hk, hv):
        s = table.decode_s(rows, hk, hv) if rows > 0 else 0.0
        s += sum(table.prefill_s(c.count, c.tokens, hk, hv) for c in x.rank_chunks)
        note = "" if table.engine == model.engine.name else (
            f"gated delta net priced by {table.engine} {table.version}'s measured kernels on {table.gpu}")
        return Op("gated delta net", "attention", count, s, nbytes=nbytes, flops=flops, note=note)
    t = model.tables
    rough = max(nbytes / (t.hbm_bytes_per_s * t.memory_efficiency), flops / t.flops_per_s["bf16"])
    return Op("gated delta net", "attention", count, rough + GDN_FLOOR_S, nbytes=nbytes, flops=flops,
              measured=False, note=f"gated delta net on its roofline: no measured gdn table for {hk} x {hv} "
                                   f"heads on {model.gpu}")


def gdn_ceiling_s(light_s: float, chunks: Sequence[Chunk] = ()) -> float:
    """The most a gated-delta-net layer's price may be for work of speed of light ``light_s`` (the
    stated multiple, the launch floor and the prefill chunks' serial walk; module docstring)."""
    walk = sum(c.count * math.ceil(c.tokens / 64) for c in chunks)
    return float(GDN_MULTIPLE * light_s + GDN_FLOOR_S + GDN_CHUNK_S * walk)
