"""Step times from measured kernels: one engine step of a dense transformer, part by part.

An engine step (one forward pass of a tensor-parallel group, all GPUs in
lockstep) runs a batch of ``m`` tokens: one per decoding sequence (``k + 1``
when speculation verifies ``k`` drafts) plus the prefill chunks scheduled in the
step.  Its time is the sum of what the GPU runs, layer by layer, plus the host:

* **GEMMs** (:meth:`KernelTables.gemm`, measured by m, n, k and dtype), per
  layer with ``H`` query heads, ``G`` KV heads of width ``d``, hidden ``h`` and
  MLP width ``I`` on ``tp`` GPUs (Megatron split: column-parallel QKV and
  gate/up, row-parallel O and down):

  - QKV   ``(m, (H/tp + 2 max(1, G/tp)) d, h)`` (KV heads replicate when ``tp > G``)
  - O     ``(m, h, H d / tp)``
  - gate/up ``(m, 2 I / tp, h)`` (``I / tp`` for a non-gated MLP)
  - down  ``(m, h, I / tp)``

  plus the LM head once per step, ``(s, V / tp, h)`` in BF16 (quantized
  checkpoints keep it in BF16) for the ``s`` sequences that sample;
  The tables time a quantized layer (fp8, fp4) fed BF16 activations, so each lookup includes
  quantizing the input, a kernel of its own (TensorRT-LLM's fp8 floor is 12 us against 2.5 us
  for BF16 on H100; vLLM's 4.6 us).  A served model fuses that quantization into the RMSNorm
  or the activation before the GEMM, so each quantized GEMM is priced at its table time less
  the difference of the table's fitted fp8 (or fp4) and BF16 floors, never below the BF16
  floor;
* **attention** per layer: decode attention of the ``b`` decoding sequences at
  their mean context (measured by batch and context), and prefill attention of
  each chunk (measured by batch and prompt length).  A chunk of ``q`` tokens
  behind ``c`` cached ones does the causal query-key pairs of a ``c + q``-token
  prompt less those of a ``c``-token one: it is priced as ``F(c + q) - F(c)``,
  ``F`` the lower convex hull of the measured prefill times (so the price grows
  with ``c`` as the pairs do), and never less than the measured prefill of its
  ``q`` tokens alone (same queries, fewer keys) or the decode attention of one
  sequence at context ``c + q`` (the cache is read at least once).  (The
  measured kernel of ``q`` fresh tokens must not be scaled up instead: a 1-token
  chunk behind 8,128 cached ones would cost a launch-bound kernel times 16,257,
  a 14.7 s step of Llama-3.1-70B on 8 x H200 where the bound is milliseconds.);
* **all-reduce**: two per layer (after attention and after the MLP) of
  ``m h`` BF16 activations (measured by GPU count and message bytes), none at tp = 1;
* **other kernels**, which no table holds: the two fused residual-add +
  RMSNorms, RoPE and the SiLU-and-multiply of each layer, each a
  memory-bound pass (bytes below / HBM at the tables' fitted efficiency) with a
  floor of :data:`OTHER_KERNEL_FLOOR_S` per kernel, and sampling (logits
  softmax over ``s x V``).  Evidence for the floor: the per-operation
  breakdown of Llama-3-70B on 8 x H100 at batch 1 (issue 9) puts norms,
  activations and RoPE at about 0.7 ms per step = 8.75 us per layer for 4
  kernels, about 2.2 us each, the launch-to-launch gap of a small kernel in a
  CUDA graph;
* **host** time of the engine (:mod:`servesim.hardware.engines`), added, or
  overlapped when the engine overlaps scheduling with the GPU.

A decode-only step that runs as a CUDA graph runs the graph of the smallest batch the engine
captured that holds its sequences (``EngineProfile.graph_batch``; the engines' capture lists in
``capture_sizes``): every kernel but attention works on the padded rows, attention reads only the
real sequences' caches.  Verify steps (speculation) and steps with a prefill chunk are not padded.

The GEMM tables are used as measured, also where they are not monotone in
``m``: cuBLAS runs a one-row GEMM as a GEMV that can be slower than the kernel
it picks for a few rows (gate/up of Llama-3-70B at TP8 on H100: 0.0497 ms at
m = 1, 0.0434 ms at m = 8), and a batch-1 engine step runs exactly that kernel.
A verify pass of k + 1 positions can therefore cost a hair less than a plain
batch-1 step (a slightly negative ``c``).

The **speed-of-light** bound beside it is the same step's operations
(:meth:`StepModel.operations`, :mod:`servesim.hardware.ops`) at 100% of the datasheet peaks,
summed: every GEMM at ``max(FLOPs / peak, bytes / HBM)`` (weights and activations), attention
the same, all-reduces' wire bytes at NVLink rate, the memory-bound kernels' bytes at HBM rate:
no engine can beat it.

Outside a table's measured range each lookup falls back to the roofline at
efficiencies fitted to that table (:mod:`servesim.hardware.kernels`); the step
then reports ``measured = False`` with the reason.  A GPU without tables (e.g.
MI300X, or one from ``--catalog FILE``) is priced with the nearest measured GPU's tables, each
kernel scaled by its roofline on the two GPUs' peaks (:class:`servesim.hardware.kernels.ScaledTables`;
:func:`pricing_tables`), and every step of it reports ``measured = False`` with a note saying
which GPU's tables were borrowed.

Units: seconds and bytes (the tables are in ms and converted here).
Standard library only; nothing here prints.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Protocol, TypeVar

from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.catalog import Catalog, builtin_catalog
from servesim.hardware.chunk_attention import Hull, chunk_attention_s, prefill_hull
from servesim.hardware.engines import EngineProfile, default_engine, engine_profile
from servesim.hardware.kernels import KernelTables, Lookup, ScaledTables, borrowed_tables, engine_tables
from servesim.hardware.names import ModelShape, canonical_gpu, check_tp
from servesim.hardware.ops import (
    ACTIVATION_BYTES,
    Op,
    Peaks,
    PriceCache,
    StepPrice,
    StepTime,
    light_s,
    ring_bytes,
)
from servesim.hardware.precision import (
    bytes_per_value,
    check_dtype,
    check_kv_dtype,
    weight_bytes,
)
from servesim.hardware.topology import links_note
from servesim.model.kvcache import kv_bytes_per_token

__all__ = [
    "ACTIVATION_BYTES",
    "OTHER_KERNELS_PER_LAYER",
    "OTHER_KERNEL_FLOOR_S",
    "SAMPLING_FLOOR_S",
    "STEP_CEILING",
    "Chunk",
    "StepModel",
    "StepTime",
    "bucket_context",
    "column_blocks",
    "pricing_tables",
    "prompt_in_chunks",
]

OTHER_KERNELS_PER_LAYER = 4
"""Two fused residual-add + RMSNorm, RoPE, SiLU-and-multiply."""

OTHER_KERNEL_FLOOR_S = 2.2e-6
"""Shortest time of one small kernel inside a CUDA graph (see the module docstring)."""

STEP_CEILING = 10.0
"""A priced step's GPU time is at most this multiple of its lower bound
(:attr:`StepTime.bound_s`: the larger of the work's speed of light and the kernels' launch
floor, :data:`OTHER_KERNEL_FLOOR_S` each).  Launch-bound steps sit 3-8x above the floor (a
GEMM's shortest measured time is 2.5-14 us, an eager step adds 4 us a kernel); bandwidth- and
compute-bound steps sit 1.2-3x above their roofline.  ``tests/hardware/test_step_bounds.py``
holds every shipped table (GPU and engine) to it."""

SAMPLING_FLOOR_S = 60e-6
"""Sampling a step's tokens: a handful of small kernels (temperature, softmax,
top-k/p, argmax) on the logits, about 60 us for a few sequences in vLLM's
sampler profiles; the logits' bytes are added on top."""


@dataclass(frozen=True)
class Chunk:
    """A prefill chunk in a step: ``tokens`` new prompt tokens behind ``context`` cached ones."""

    tokens: int
    context: int = 0
    count: int = 1  # identical chunks in the step
    samples: bool = True  # the chunk ends its prompt and so yields a first token


_M = TypeVar("_M")


class StepModel:
    """Prices steps of one replica: a dense model on ``tp`` GPUs in ``dtype`` (see module doc)."""

    def __init__(self, shape: ModelShape, gpu: str, tp: int, *, dtype: str = "bf16",
                 kv_dtype: str = "bf16", engine: EngineProfile | None = None,
                 tables: KernelTables | None = None, catalog: Catalog | None = None) -> None:
        check_tp(shape, tp)
        self.shape = shape
        self.gpu = gpu
        self.tp = tp
        self.dtype = check_dtype(dtype, gpu, catalog)
        self.kv_dtype = check_kv_dtype(kv_dtype, gpu, catalog)
        self._kv_token_bytes = kv_bytes_per_token(shape.layers, shape.kv_heads, shape.head_dim,
                                                  bytes_per_value(self.kv_dtype))
        """KV bytes of one token over all layers (an MLA model's latent: ``kv_heads x head_dim``)."""
        self.engine = engine if engine is not None else engine_profile(default_engine(), gpu=gpu)
        self.tables, self.tables_note, self._foreign = pricing_tables(gpu, self.engine.name, tables,
                                                                      catalog=catalog)
        t = self.tables
        eff = t.efficiency["gemm"]
        self._floor_s = eff["bf16"]["floor_ms"] * 1e-3
        self._quant_s = (max(0.0, eff[self.dtype]["floor_ms"] * 1e-3 - self._floor_s)
                         if self.dtype != "bf16" and self.dtype in eff else 0.0)
        s = shape
        self.heads = s.heads // tp
        self.kv_heads = max(1, s.kv_heads // tp)
        d = s.head_dim
        self._gemms: tuple[tuple[int, int], ...] = (  # (n, k) of the weight GEMMs of one layer
            ((self.heads + 2 * self.kv_heads) * d, s.hidden),
            (s.hidden, self.heads * d),
            ((2 if s.gated_mlp else 1) * s.intermediate // tp, s.hidden),
            (s.hidden, s.intermediate // tp),
        )
        self._cache_gemm_sum = lru_cache(maxsize=4096)(self._gemm_sum)
        self._cache_padded_parts = lru_cache(maxsize=16384)(self._padded_parts)
        self._cache_decode_part = lru_cache(maxsize=65536)(self._decode_part)
        self._cache_gemm_one = lru_cache(maxsize=16384)(self._gemm_s)
        self._cache_decode = lru_cache(maxsize=65536)(self._decode_attention)
        self._cache_head = lru_cache(maxsize=4096)(self._head)
        self._cache_prefill = lru_cache(maxsize=16384)(self._prefill_attention)
        self._cache_chunk = lru_cache(maxsize=65536)(self._chunk_attention)
        self._hulls: dict[int, Hull] = {}
        self._cache_allreduce = lru_cache(maxsize=16384)(self._allreduce)
        self._cache_prompt = lru_cache(maxsize=1024)(self._prompt)
        self.price_cache = PriceCache()  # the engine loop's step prices (shared by copies: with_drafter)

    # ------------------------------------------------------------------ memory

    @property
    def weight_bytes_per_gpu(self) -> float:
        return weight_bytes(self.shape, self.dtype) / self.tp

    @property
    def kv_bytes_per_token_per_gpu(self) -> float:
        """KV bytes one token holds on each GPU: the KV heads each GPU keeps (replicated past G)."""
        return self._kv_token_bytes * self.kv_heads / self.shape.kv_heads

    def sequence_kv_bytes(self, tokens: float) -> float:
        """KV bytes of one sequence's ``tokens`` tokens over all layers and GPUs (what a disaggregated
        deployment sends over its link)."""
        return self._kv_token_bytes * tokens

    drafter_bytes: tuple[float, float] = (0.0, 0.0)
    """A speculative drafter's (weight bytes per GPU, KV bytes per token per GPU) sharing the GPUs
    (:func:`servesim.hardware.speculation.drafter_memory`; see :meth:`with_drafter`)."""

    is_moe = False
    kv_context: int | None = None  # a dense model's KV per token does not depend on the request's length
    """A dense model (the :class:`~servesim.hardware.pricer.Pricer` seam: the lab's closed forms
    price dense models only)."""

    pricing_notes: tuple[str, ...] = ()
    """What the step model prices from another engine's table or a fitted factor: nothing here."""

    @cached_property
    def links_note(self) -> str:
        """Which links the TP group crosses where it leaves a tray (servesim.hardware.topology): the last
        note of every step."""
        return links_note(self.tables.topology, {f"TP{self.tp} all-reduce": self.tp})

    has_mtp = False  # no multi-token-prediction module (DeepSeek-V3 family MoE models have one)

    @property
    def model_name(self) -> str:
        return self.shape.name

    def with_drafter(self, drafter_bytes: tuple[float, float]) -> StepModel:
        """A copy whose KV cache makes room for a drafter's (weight bytes per GPU, KV bytes per token
        per GPU); its pricing is this model's."""
        return copied(self, drafter_bytes=drafter_bytes)

    def for_requests(self, tokens: int) -> StepModel:
        """The step model for requests of ``tokens`` tokens: this one (every layer of a dense model
        keeps the whole sequence's KV, whatever its length)."""
        check_int("tokens", tokens, lo=1)
        return self

    @property
    def profiled_reserve_bytes(self) -> float | None:
        """What vLLM keeps back from the KV cache beside the weights, or None for an engine whose
        reserve is its constant ``reserved_GiB``.

        vLLM sizes the KV cache after a profile run (``gpu_worker.determine_available_memory``:
        ``gpu_memory_utilization x total - weights - peak activation - non-torch memory``):
        ``_dummy_run`` of ``max_num_batched_tokens`` T tokens, whose peak is one layer's
        intermediates, ``T (gate_up 2I/tp + act I/tp + qkv (H + 2G) d / tp + 4 h)`` BF16 values (the
        residual, norm and attention outputs as 4 h), and ``_dummy_sampler_run`` over
        ``min(max_num_seqs, T)`` rows of FP32 logits and probabilities, ``2 x 4 S V`` bytes;
        non-torch memory (cuBLAS workspaces, NCCL buffers) is the engine's
        ``profile_nontorch_GiB``.  Llama-3.3-70B at tp 2 with 256 sequences: 1.33 + 0.26 GB + 1 GiB
        = 2.5 GiB; vLLM logged 2.4 GiB there (71.19 GiB requested, 65.7 of weights, 0.6 of draft
        weights, 2.5 of KV cache)."""
        e, s = self.engine, self.shape
        if e.profile_nontorch_bytes is None:
            return None
        t = float(e.max_num_batched_tokens)
        inter = s.intermediate / self.tp
        per_token = ((2 if s.gated_mlp else 1) * inter + inter + (self.heads + 2 * self.kv_heads) * s.head_dim
                     + 4 * s.hidden)
        rows = min(float(e.max_num_seqs), t)
        return e.profile_nontorch_bytes + t * per_token * 2.0 + 2 * 4.0 * rows * s.vocab

    @property
    def reserve_bytes(self) -> float:
        """What each GPU keeps back from the KV cache beside the weights: the profiled reserve where
        the engine has one, else its constant ``reserved_GiB``."""
        p = self.profiled_reserve_bytes
        return self.engine.reserved_bytes if p is None else p

    def kv_capacity_tokens(self, memory_bytes: float) -> int:
        """Tokens of KV cache that fit beside the weights (and a drafter's) on each GPU of
        ``memory_bytes``, past the engine's reserve (:attr:`reserve_bytes`)."""
        w, kv = self.drafter_bytes
        room = self.engine.kv_room_bytes(memory_bytes, self.weight_bytes_per_gpu + w, self.reserve_bytes)
        return max(0, int(room // (self.kv_bytes_per_token_per_gpu + kv)))

    # ------------------------------------------------------------------ parts

    def _sum(self, lookups: list[tuple[Lookup, float]]) -> tuple[float, bool, list[str]]:
        total, ok, notes = 0.0, True, []
        for lk, times in lookups:
            total += lk.ms * 1e-3 * times
            if not lk.measured or self._foreign:
                ok = False
                if lk.note:
                    notes.append(lk.note)
        return total, ok, notes

    def _gemm_s(self, m: int, n: int, k: int) -> tuple[float, Lookup]:
        """One weight GEMM ``(m, n, k)``: its table time, a quantized one without the input
        quantization its table includes (never under the BF16 floor), and the lookup."""
        lk = self.tables.gemm(self.dtype, m, n, k)
        sec = lk.ms * 1e-3
        if self._quant_s:
            sec = max(sec - self._quant_s, self._floor_s)
        return sec, lk

    def _decode_attention(self, b: int, ctx: int) -> tuple[float, bool, tuple[str, ...]]:
        lk = self.tables.decode_attention(b, ctx, self.heads, self.kv_heads, self.shape.head_dim,
                                          self.kv_dtype)
        t, ok, notes = self._sum([(lk, 1.0)])
        return t, ok, tuple(notes)

    def _head(self, samples: int) -> tuple[float, bool, tuple[str, ...]]:
        """The LM head (BF16 in quantized checkpoints too) for ``samples`` sampled rows."""
        t, ok, notes = self._sum(column_blocks(self.tables, "bf16", samples, self.shape.vocab // self.tp,
                                               self.shape.hidden))
        return t, ok, tuple(notes)

    def _prefill_attention(self, count: int, tokens: int) -> tuple[float, bool, tuple[str, ...]]:
        """One layer's prefill attention of ``count`` fresh prompts of ``tokens`` tokens."""
        lk = self.tables.prefill_attention(count, tokens, self.heads, self.kv_heads, self.shape.head_dim,
                                           self.kv_dtype)
        t, ok, notes = self._sum([(lk, 1.0)])
        return t, ok, tuple(notes)

    def _chunk_attention(self, count: int, tokens: int, context: int) -> tuple[float, bool, tuple[str, ...]]:
        """One layer's attention of ``count`` chunks of ``tokens`` behind ``context`` cached ones,
        priced as every family prices a chunk (:func:`servesim.hardware.chunk_attention.chunk_attention_s`:
        the prefill hull's difference, the fresh prefill and the cache read, the largest)."""
        fresh, ok, notes = self._cache_prefill(count, tokens)
        if context <= 0:
            return fresh, ok, notes
        P = context + tokens
        _, ok2, n2 = self._cache_prefill(count, P)
        _, ok3, n3 = self._cache_decode(count, bucket_context(P))
        price = chunk_attention_s(tokens, context, fresh, lambda: self._prefill_hull(count),
                                  lambda n: self._cache_decode(count, bucket_context(n))[0])
        return price, ok and ok2 and ok3, tuple(dict.fromkeys((*notes, *n2, *n3)))

    def _prefill_hull(self, count: int) -> Hull:
        """The lower convex hull of one layer's prefill time (s) of ``count`` prompts against the
        prompt length (:func:`~servesim.hardware.chunk_attention.prefill_hull`, cached)."""
        got = self._hulls.get(count)
        if got is None:
            got = self._hulls[count] = prefill_hull(lambda x: self._cache_prefill(count, x)[0])
        return got

    def _allreduce(self, m: int) -> tuple[float, bool, tuple[str, ...]]:
        """One all-reduce of the activations of ``m`` tokens."""
        t, ok, notes = self._sum([(self.tables.allreduce(self.tp, m * self.shape.hidden * ACTIVATION_BYTES),
                                   1.0)])
        return t, ok, tuple(notes)

    @property
    def _elementwise_bytes_per_token(self) -> float:
        s = self.shape
        return ACTIVATION_BYTES * (
            8 * s.hidden  # two fused add + RMSNorm: read x and residual, write both
            + 2 * (self.heads + self.kv_heads) * s.head_dim  # RoPE on q and k, in place
            + 3 * s.intermediate // self.tp  # SiLU-and-multiply: read 2 I, write I
        )

    def _elementwise(self, m: float, samples: float) -> tuple[float, float, float, float]:
        """(one layer's norms, RoPE and activation, their bytes; sampling, its bytes): each at the
        launch floor plus its bytes at the tables' HBM efficiency (FP32 logits read ~3 times)."""
        bw = self.tables.hbm_bytes_per_s * self.tables.memory_efficiency
        nbytes = m * self._elementwise_bytes_per_token
        logits = samples * self.shape.vocab / self.tp * 4 * 3
        return (OTHER_KERNELS_PER_LAYER * OTHER_KERNEL_FLOOR_S + nbytes / bw, nbytes,
                SAMPLING_FLOOR_S + logits / bw, logits)

    def _eager_kernels(self, m: float, prefill: bool, seqs: float = 0.0) -> int:
        """Kernels that pay the eager launch gap: every kernel of a step too large for a CUDA graph
        (:meth:`~servesim.hardware.engines.EngineProfile.graph_size`), or with a prefill where
        graphs run decode only; none otherwise."""
        if (self.engine.graph_size(m, seqs, prefill) > self.engine.cuda_graph_max_tokens
                or (prefill and self.engine.cuda_graph_decode_only)):
            return self.shape.layers * (4 + 2 + OTHER_KERNELS_PER_LAYER + (2 if self.tp > 1 else 0))
        return 0

    # ------------------------------------------------------------------ the step

    def step(self, decode: float = 0.0, context: float = 0.0, chunks: tuple[Chunk, ...] = (),
             positions: int = 1, *, bound: bool = True) -> StepTime:
        """A step with ``decode`` sequences at mean ``context`` and the given prefill ``chunks``: the
        sum of its operations (:meth:`operations`), as a mixture-of-experts step is.

        ``positions`` > 1 verifies ``positions - 1`` drafts per decoding sequence.  The parts are
        :meth:`_priced`'s, the one sum the engine loop's :meth:`step_price` reads too; with
        ``bound=False`` the speed-of-light bound is not computed (``sol_s`` is NaN) and no operation
        is built (the engine loop's closed forms price many steps and report no bound).
        """
        if bound:  # the public path checks its input; the engine loop passes its own counts
            b = check_real("decode", decode, lo=0.0)
            ctx = check_real("context", context, lo=0.0)
            pos = check_int("positions", positions, lo=1)
        else:
            b, ctx, pos = decode, context, positions
        m = b * pos + sum(c.tokens * c.count for c in chunks) if chunks else b * pos
        if m <= 0:
            raise ParameterError("tokens", m, "> 0: a step needs a decoding sequence or a prefill chunk")
        keys = tuple((c.tokens, c.context, c.count, c.samples) for c in chunks)
        gemm, attn, ar, other, gpu, host, total, ok, notes = self._priced(b, ctx, keys, pos)
        L = self.shape.layers
        kernels = L * (4 + (1 if b > 0 else 0) + len(chunks) + OTHER_KERNELS_PER_LAYER
                       + (2 if self.tp > 1 else 0)) + 2  # the layers' kernels, the LM head, sampling
        ops = _as_ops(self._rows(b, ctx, keys, pos)) if bound else ()
        return StepTime(gemm_s=gemm, attention_s=attn, allreduce_s=ar, other_s=other, host_s=host,
                        gpu_s=gpu, total_s=total, sol_s=light_s(ops, self.peaks) if bound else math.nan,
                        tokens=m, measured=ok, notes=notes, floor_s=kernels * OTHER_KERNEL_FLOOR_S, ops=ops)

    def step_price(self, decode: int, context: int, chunks: tuple[tuple[int, int, bool], ...] = (),
                   positions: int = 1) -> StepPrice:
        """What the engine loop asks of a step (the :class:`~servesim.hardware.pricer.Pricer` seam):
        ``step(decode, context, chunks, positions, bound=False)``'s ``(total_s, measured, notes,
        launch_wait_s, launch_s)`` for chunks given as (tokens, context, samples) of one prompt each,
        from the same sum (:meth:`_priced`) without building the :class:`StepTime` (a dense step has
        no launch-bound floor: both 0)."""
        keys = tuple((q, c, 1, x) for q, c, x in chunks) if chunks else ()
        total, ok, notes = self._priced(decode, context, keys, positions)[6:]
        return total, ok, notes, 0.0, 0.0

    def _priced(self, b: float, ctx: float, chunks: _Chunks, pos: int) -> _Parts:
        """A step's parts (GEMMs, attention, all-reduces, other kernels), GPU, host and total time,
        whether every lookup was measured, and its notes: the one sum of a dense step, each part from
        0.0 in :meth:`_rows`' order (``tests/hardware/test_stepmodel.py`` holds the operations'
        prices summed by part to it, to the last bit).  ``chunks`` as (tokens, context, count,
        samples)."""
        m, samples = self._padded(b, chunks, pos)
        if m <= 0:
            raise ParameterError("tokens", m, "> 0: a step needs a decoding sequence or a prefill chunk")
        gemm, comm, other, ok, first, last = self._cache_padded_parts(m, samples, bool(chunks), b)
        notes = list(first)
        L = self.shape.layers
        attn = 0.0
        if b > 0:
            a, one_ok, one_notes = self._cache_decode_part(b, ctx, pos)
            ok = ok and one_ok
            notes += one_notes
            attn += L * a
        for q, c, n, _ in chunks:
            a, one_ok, one_notes = self._cache_chunk(n, q, c)
            ok = ok and one_ok
            notes += one_notes
            attn += L * a
        notes += last
        gpu = gemm + attn + comm + other
        eng = self.engine
        host = eng.host_s(b + sum(n for _, _, n, _ in chunks) if chunks else b)
        total = max(gpu, host) if eng.overlap else gpu + host
        if self.links_note:
            notes.append(self.links_note)
        if self._foreign:
            notes.insert(0, self.tables_note)
        return gemm, attn, comm, other, gpu, host, total, ok, tuple(dict.fromkeys(notes))

    def _padded_parts(self, m: float, samples: float, prefill: bool,
                      b: float) -> tuple[float, float, float, bool, tuple[str, ...], tuple[str, ...]]:
        """The parts of a step that depend on its padded rows ``m`` and sampled rows ``samples``
        alone (and, for its launch gaps, on whether it prefills and its decoding sequences ``b``),
        each summed from 0.0 in :meth:`_rows`' order: the GEMMs (the layers', then the LM head), the
        all-reduces, the other kernels; whether all were measured; the notes that come before
        attention's (GEMMs, LM head) and after it (all-reduce)."""
        L = self.shape.layers
        mi = max(1, round(m))
        gemm, ok, gnotes = self._cache_gemm_sum(mi)
        h, head_ok, head_notes = self._cache_head(max(1, round(samples)))
        ok = ok and head_ok
        gemm += 1 * h  # the LM head, after the layers' GEMMs (as _rows lists it)
        comm = 0.0
        last: tuple[str, ...] = ()
        if self.tp > 1:
            a, ar_ok, last = self._cache_allreduce(mi)
            ok = ok and ar_ok
            comm += 2 * L * a
        layer, _, sampling, _ = self._elementwise(m, samples)
        other = 0.0
        other += L * layer
        other += 1 * sampling
        eager = self._eager_kernels(m, prefill, b)
        if eager:
            other += eager * self.engine.eager_kernel_s
        return gemm, comm, other, ok, (*gnotes, *head_notes), last

    def _decode_part(self, b: float, ctx: float, pos: int) -> tuple[float, bool, tuple[str, ...]]:
        """One layer's decode attention of ``b`` sequences at context ``ctx`` scoring ``pos``
        positions each (between the whole batches around ``b``), whether it was measured, and its
        notes."""
        cb = max(1, bucket_context(ctx + (pos - 1) / 2 + 1))
        decode_s = self._cache_decode
        a = between_batches(lambda n: decode_s(n, cb)[0], b)
        _, ok, notes = decode_s(max(1, math.ceil(b)), cb)
        return a, ok, notes

    def _gemm_sum(self, m: int) -> tuple[float, bool, tuple[str, ...]]:
        """The weight GEMMs of every layer at ``m`` rows summed from 0.0 in :meth:`_rows`' order,
        whether all were measured, and the notes of those that were not."""
        priced = [self._cache_gemm_one(m, n, k) for n, k in self._gemms]
        L = self.shape.layers
        total = 0.0
        for sec, _ in priced:
            total += L * sec
        _, ok, notes = self._sum([(lk, 1.0) for _, lk in priced])
        return total, ok, tuple(notes)

    def _padded(self, b: float, chunks: _Chunks, pos: int) -> tuple[float, float]:
        """The rows (tokens, sampled rows) the step's kernels run: a decode step replays the CUDA graph
        of the smallest captured batch that holds its sequences (one above every captured size runs
        eagerly, as it is), whose padded rows run every kernel but attention (no cache to read)."""
        if not chunks:
            if pos == 1:
                padded = self.engine.graph_batch(b)
                return padded, padded
            return b * pos, b * pos
        return (b * pos + sum(q * n for q, _, n, _ in chunks),
                b * pos + sum(n for _, _, n, x in chunks if x))

    @property
    def peaks(self) -> Peaks:
        """The GPU's datasheet peaks (what the speed of light of each operation is priced at)."""
        return Peaks.of(self.tables)

    def operations(self, decode: float, context: float, chunks: tuple[Chunk, ...] = (),
                   positions: int = 1) -> tuple[Op, ...]:
        """The step's operations (:mod:`servesim.hardware.ops`), each at its engine price (what
        :meth:`step` sums) and with the bytes and FLOPs of its speed of light: the four weight GEMMs
        of a layer (weights at the dtype's bytes, BF16 activations in and out), decode attention (each
        sequence's cache read once, ``4 H/tp d`` FLOPs per query-key pair), each prefill chunk (its
        cache and its own keys read, its causal pairs), the LM head, the two all-reduces of a layer (a
        ring's ``2 (tp - 1) / tp`` of ``m h`` activations on the wire) and the memory-bound kernels
        (norms, RoPE, activation, sampling; launch gaps of an eager step).  A decode step's kernels
        but attention run its CUDA graph's padded rows (:meth:`_padded`)."""
        keys = tuple((c.tokens, c.context, c.count, c.samples) for c in chunks)
        return _as_ops(self._rows(decode, context, keys, positions))

    def _rows(self, b: float, ctx: float, chunks: _Chunks, pos: int) -> list[_Row]:
        """The step's operations as rows (name, kind, count, engine price of one, measured, work: bytes,
        FLOPs, wire bytes, the peak's dtype), in :meth:`operations`' order, each priced by the lookup
        :meth:`_priced` sums."""
        s = self.shape
        m, samples = self._padded(b, chunks, pos)
        L = s.layers
        mi = max(1, round(m))
        # each weight GEMM's weights at the dtype's bytes, BF16 activations in and out
        wb = bytes_per_value(self.dtype)
        peak = "fp8" if self.dtype == "fp8" else ("fp4" if self.dtype == "fp4" else "bf16")
        rows: list[_Row] = []
        for (n, k), name in zip(self._gemms, _GEMM_NAMES, strict=False):
            sec, lk = self._cache_gemm_one(mi, n, k)
            rows.append((name, "gemm", L, sec, lk.measured and not self._foreign,
                         (n * k * wb + m * (n + k) * ACTIVATION_BYTES, 2.0 * m * n * k, 0.0, peak)))
        kv_layer = self.kv_bytes_per_token_per_gpu / L
        heads, d = self.heads, s.head_dim
        if b > 0:
            a, one_ok, _ = self._cache_decode_part(b, ctx, pos)
            pairs = b * pos * (ctx + (pos + 1) / 2)
            rows.append(("attention (decode)", "attention", L, a, one_ok,
                         (kv_layer * b * (ctx + pos), 4.0 * heads * d * pairs, 0.0, "bf16")))
        for q, c, count, _ in chunks:
            a, one_ok, _ = self._cache_chunk(count, q, c)
            pairs = count * q * (c + q / 2)
            rows.append(("attention (prefill)", "attention", L, a, one_ok,
                         (kv_layer * count * (c + q), 4.0 * heads * d * pairs, 0.0, "bf16")))
        head_rows = max(1, round(samples))
        h, head_ok, _ = self._cache_head(head_rows)
        head_n = s.vocab // self.tp
        rows.append(("lm head", "gemm", 1, h, head_ok,
                     (head_n * s.hidden * 2.0 + head_rows * (head_n + s.hidden) * ACTIVATION_BYTES,
                      2.0 * samples * head_n * s.hidden, 0.0, "bf16")))
        if self.tp > 1:
            a, one_ok, _ = self._cache_allreduce(mi)
            msg = mi * s.hidden * ACTIVATION_BYTES
            rows.append(("all-reduce", "allreduce", 2 * L, a, one_ok,
                         (0.0, 0.0, ring_bytes(self.tp, msg), "bf16")))
        layer, layer_bytes, sampling, logits = self._elementwise(m, samples)
        rows.append(("norms, rope, activation", "elementwise", L, layer, True,
                     (layer_bytes, 0.0, 0.0, "bf16")))
        rows.append(("sampling", "elementwise", 1, sampling, True, (logits, 0.0, 0.0, "bf16")))
        eager = self._eager_kernels(m, bool(chunks), b)
        if eager:
            rows.append(("launch gaps (eager step)", "elementwise", eager, self.engine.eager_kernel_s, True,
                         (0.0, 0.0, 0.0, "bf16")))
        return rows

    def speed_of_light(self, decode: float, context: float, chunks: tuple[Chunk, ...] = (),
                       positions: int = 1) -> float:
        """The step's operations at 100% of the datasheet peaks, summed (a lower bound; the same
        list the engine's price sums, :meth:`operations`)."""
        return light_s(self.operations(decode, context, chunks, positions), self.peaks)

    # ------------------------------------------------------------------ shortcuts

    def decode_step(self, batch: float, context: float, positions: int = 1) -> StepTime:
        """A decode-only step (the TPOT of a batch with no prefill in it)."""
        return self.step(batch, context, (), positions)

    def prompt_s(self, tokens: int) -> float:
        """Time to prefill one prompt alone: chunks of the engine's token budget, one per step,
        each behind the ones before it."""
        return self._cache_prompt(check_int("tokens", tokens, lo=1))

    def _prompt(self, tokens: int) -> float:
        return prompt_in_chunks(self, tokens)

    def prefill_step(self, prompt: int, sequences: int = 1) -> StepTime:
        """Prefill ``sequences`` whole prompts of ``prompt`` tokens in one step (no decode)."""
        return self.step(0.0, 0.0, (Chunk(prompt, 0, sequences),))


def copied(model: _M, **attrs: object) -> _M:
    """A shallow copy of a step model with ``attrs`` set (its prices and their caches are the
    original's): how a pricer makes room for a drafter or sizes the KV of a request length without
    changing a model the pricer factory shares."""
    run = copy.copy(model)
    for name, value in attrs.items():
        setattr(run, name, value)
    return run


_GEMM_NAMES = ("qkv proj", "o proj", "gate/up proj", "down proj", "fc")  # fc: an EAGLE head's

_Row = tuple[str, str, int, float, bool, tuple[float, float, float, str]]
"""One operation of a dense step before it is an :class:`~servesim.hardware.ops.Op`: name, kind,
count, engine price of one, measured, and its work (bytes, FLOPs, wire bytes, the peak's dtype)."""

_Chunks = tuple[tuple[int, int, int, bool], ...]
"""A step's prefill chunks inside :class:`StepModel`: (tokens, context, count, samples) of each."""

_Parts = tuple[float, float, float, float, float, float, float, bool, tuple[str, ...]]
"""A priced dense step (:meth:`StepModel._priced`): GEMMs, attention, all-reduces, other kernels,
GPU, host, total (s), measured, notes."""


def _as_ops(rows: list[_Row]) -> tuple[Op, ...]:
    """The operations of a step's rows (:meth:`StepModel._rows`)."""
    ops = []
    for name, kind, count, sec, ok, (nbytes, flops, wire, dtype) in rows:
        ops.append(Op(name, kind, count, sec, nbytes=nbytes, flops=flops, dtype=dtype, wire_bytes=wire,
                      measured=ok))
    return tuple(ops)


class EngineStep(Protocol):
    """What the helpers below ask of a step model (:class:`~servesim.hardware.pricer.Pricer` asks
    more; pricer.py imports this module, hence the protocol here)."""

    engine: EngineProfile

    def kv_capacity_tokens(self, memory_bytes: float) -> int: ...

    def step(self, decode: float = 0.0, context: float = 0.0, chunks: tuple[Chunk, ...] = (),
             positions: int = 1, *, bound: bool = True) -> StepTime: ...


def sequences_held(sm: EngineStep, memory_bytes: float, tokens: float) -> int:
    """Sequences of ``tokens`` tokens a step model's replica runs at once on GPUs of ``memory_bytes``:
    what its KV cache holds (:meth:`StepModel.kv_capacity_tokens`), at most the engine's
    ``max_num_seqs``."""
    return int(min(sm.engine.max_num_seqs, sm.kv_capacity_tokens(memory_bytes) // max(1, int(tokens))))


def pricing_tables(gpu: str, engine: str, tables: KernelTables | None = None, *,
                   catalog: Catalog | None = None) -> tuple[KernelTables, str, bool]:
    """The kernel tables a step model of ``engine`` on ``gpu`` prices with, the note that says so,
    and whether they are another GPU's.

    ``tables`` given: those (another GPU's if they are :class:`ScaledTables`).  Else the GPU's
    own measured tables (:func:`servesim.hardware.kernels.engine_tables`), or, for a GPU with
    none, the nearest measured GPU's scaled by the roofline to this GPU's catalog peaks
    (:func:`servesim.hardware.kernels.borrowed_tables`; ``catalog`` defaults to the shipped
    one, so a ``--catalog`` GPU needs its catalog here).  A GPU the catalog does not know
    raises :class:`ParameterError` (``name='gpu'``)."""
    if tables is not None:
        if isinstance(tables, ScaledTables):
            return tables, tables.note, True
        return tables, f"kernel tables: {tables.device}, {tables.engine}", False
    t, note = engine_tables(gpu, engine)
    if t is not None:
        return t, note, False
    if catalog is None:
        catalog = builtin_catalog()
    try:
        name = canonical_gpu(gpu, catalog)
    except ParameterError:
        raise ParameterError(
            "gpu", gpu, "a GPU of the catalog the step model is given: it has no measured kernel tables, and "
            "without its catalog entry there are no peaks to scale a measured GPU's tables to (a --catalog "
            "GPU needs that catalog here)") from None
    spec = catalog.gpus[name]
    extras = catalog.gpu_extras.get(name, {})
    peaks = {"bf16": spec.flops_per_s}
    for dtype, key in (("fp8", "fp8_TFLOPS"), ("fp4", "fp4_TFLOPS")):
        if key in extras:
            peaks[dtype] = float(extras[key]) * 1e12
    scaled, how = borrowed_tables(name, engine, hbm_bytes_per_s=spec.hbm_bytes_per_s, flops_per_s=peaks,
                                  interconnect_bytes_per_s=spec.interconnect_bytes_per_s,
                                  memory_bytes=spec.memory_bytes)
    return scaled, how, True


def column_blocks(tables: KernelTables, dtype: str, m: float, n: int, k: int) -> list[tuple[Lookup, float]]:
    """A GEMM wider than the tables' measured ``n`` (the LM head of a 128k vocabulary on one GPU) as
    equal column blocks within it, each a measured GEMM: the same weights and FLOPs, split.  A GEMM
    within the grid is one lookup.  Returns (lookup, count) pairs."""
    widest = int(tables._gemm_grid(dtype).axes[1][-1])
    if n <= widest:
        return [(tables.gemm(dtype, m, n, k), 1.0)]
    blocks = math.ceil(n / widest)
    return [(tables.gemm(dtype, m, math.ceil(n / blocks), k), float(blocks))]


def prompt_in_chunks(model: EngineStep, tokens: int) -> float:
    """One prompt of ``tokens`` prefilled alone by ``model`` (a step pricer with an ``engine``): chunks
    of the engine's token budget, one per step, each behind the ones before it."""
    budget = model.engine.max_num_batched_tokens
    t, done = 0.0, 0
    while done < tokens:
        q = min(budget, tokens - done)
        t += model.step(0.0, 0.0, (Chunk(q, done, 1, done + q == tokens),), bound=False).total_s
        done += q
    return float(t)


def between_batches(price: Callable[[int], float], b: float) -> float:
    """A per-batch price at a mean batch ``b`` (a closed form's, or one DP rank's share): linear between
    the whole batches around it, ``b`` x the one-sequence price below one.  Monotone wherever the
    measured table is (scaling the nearest whole batch's price by ``b / round(b)`` was not: with the
    fixed cost of a small batch, 1.5 sequences priced as 0.75 of two came out cheaper than 1.375 of one)."""
    lo = max(1, math.floor(b))
    one = price(lo)
    if b <= 1:
        return float(one * b)
    hi = math.ceil(b)
    return float(one if hi == lo else one + (b - lo) * (price(hi) - one))


def bucket_context(x: float) -> int:
    """Round a context length to 1/64 of an octave (about 1%) so that step prices can be cached."""
    if x <= 64:
        return max(0, round(x))
    return round(2 ** (round(math.log2(x) * 64) / 64))
