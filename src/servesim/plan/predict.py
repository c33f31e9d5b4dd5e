"""``servesim predict``: what ``vllm bench serve`` would measure on one replica.

:func:`predict` resolves the model (catalog name, Hugging Face id or
``config.json``), the GPU, the dtypes and the engine, builds the measured-kernel
step model (:mod:`servesim.hardware.stepmodel`) and runs the iteration-level
benchmark (:mod:`servesim.sim.batching`).  The result is a flat dict whose keys
follow ``vllm bench serve``'s result JSON (``mean_ttft_ms``, ``output_throughput``,
...) so that a saved benchmark result can be compared key by key
(:func:`compare_keys`).

Speculative decoding (``spec``): the draft's step and the ``k + 1``-wide verify
pass are priced by the same step model at the running batch, so the seed's
``d`` and ``c`` come out of measured kernels (and are reported).

Nothing here prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from servesim._checks import ParameterError, check_int
from servesim.hardware.engines import ENGINES, engine_profile
from servesim.hardware.names import ModelShape, canonical_gpu, dense_shape, resolve_gpu, resolve_model
from servesim.hardware.stepmodel import StepModel
from servesim.sim.batching import Benchmark, BenchResult, Speculation, run_benchmark

__all__ = ["COMPARED_KEYS", "Deployment", "build_step_model", "predict", "speculation_for"]

COMPARED_KEYS: tuple[str, ...] = (
    "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "output_throughput", "request_throughput",
)
"""Metrics that ``vllm bench serve`` reports and ``predict`` predicts."""


@dataclass(frozen=True)
class Deployment:
    """One replica: model on ``tp`` GPUs with weight and KV dtypes, served by ``engine``."""

    model: str
    gpu: str
    tp: int = 1
    dtype: str = "bf16"
    kv_dtype: str = "bf16"
    engine: str = "vllm"
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None

    def __post_init__(self) -> None:
        check_int("tp", self.tp, lo=1, hi=64)
        if self.engine not in ENGINES:
            raise ParameterError("engine", self.engine, f"one of {', '.join(ENGINES)}")


def build_step_model(dep: Deployment, catalog: Any = None) -> tuple[StepModel, ModelShape, float]:
    """The step model of ``dep``, the model's shape and each GPU's memory in bytes."""
    shape = dense_shape(dep.model, catalog)
    gpu = resolve_gpu(dep.gpu, catalog)
    gname = canonical_gpu(dep.gpu)
    eng = engine_profile(dep.engine, gpu=gname, memory_gib=gpu.memory_bytes / 2**30,
                         max_num_batched_tokens=dep.max_num_batched_tokens, max_num_seqs=dep.max_num_seqs)
    sm = StepModel(shape, gname, dep.tp, dtype=dep.dtype, kv_dtype=dep.kv_dtype, engine=eng)
    if sm.kv_capacity_tokens(gpu.memory_bytes) <= 0:
        need = (sm.weight_bytes_per_gpu + eng.reserved_bytes) / (eng.memory_fraction * 2**30)
        raise ParameterError(
            "tp", dep.tp,
            f"large enough for the weights to fit: {shape.name} in {dep.dtype} needs "
            f"{sm.weight_bytes_per_gpu / 2**30:.1f} GiB per GPU at tp {dep.tp} (about {need:.0f} GiB of "
            f"HBM at {eng.memory_fraction:g} utilization), a {dep.gpu} has "
            f"{gpu.memory_bytes / 2**30:.1f} GiB",
        )
    return sm, shape, gpu.memory_bytes


_DRAFTS = {"mtp": 1, "eagle3": 1, "medusa": 1, "small-draft": 0}


def speculation_for(sm: StepModel, preset: str, batch: float, context: float, *, k: int | None,
                    catalog: Any = None) -> tuple[Speculation, dict[str, float]]:
    """The speculative setting at a running batch, d and c from the step model.

    Drafts: ``mtp`` and ``eagle3`` run one decoder layer of the target's shape
    plus the LM head per draft token; ``medusa`` one residual layer and a head
    per draft position; ``small-draft`` the catalog's draft model on the same
    GPUs.  Acceptance is the preset's alpha (``catalog/speculative.toml``).
    Without ``k``, the k in 1..8 of the largest speedup at this batch.
    """
    from servesim.speculative import SPECDEC_PRESETS

    if preset not in SPECDEC_PRESETS:
        raise ParameterError("spec", preset, f"one of {', '.join(SPECDEC_PRESETS)}")
    alpha = SPECDEC_PRESETS[preset].alpha
    b = max(1.0, batch)
    target = sm.decode_step(b, context).total_s
    if preset == "small-draft":
        try:
            draft_name = resolve_model(sm.shape.name, catalog).draft_model
        except ParameterError:
            draft_name = ""
        if not draft_name:
            raise ParameterError("spec", preset, f"a preset with a drafter for {sm.shape.name}: it has no "
                                 "draft_model in the catalog (use mtp, eagle3 or medusa)")
        dshape = dense_shape(draft_name, catalog)
        tp = sm.tp
        while tp > 1 and (dshape.heads % tp or (dshape.kv_heads % tp and tp % dshape.kv_heads)):
            tp //= 2
        dm = StepModel(dshape, sm.gpu, tp, dtype=sm.dtype, kv_dtype=sm.kv_dtype, engine=sm.engine)
        draft = dm.decode_step(b, context).gpu_s
    else:
        one_layer = replace(sm.shape, layers=1)
        dm = StepModel(one_layer, sm.gpu, sm.tp, dtype=sm.dtype, kv_dtype=sm.kv_dtype, engine=sm.engine)
        draft = dm.decode_step(b, context).gpu_s
    best: tuple[float, int, float] | None = None
    for kk in ([k] if k is not None else list(range(1, 9))):
        verify = sm.decode_step(b, context, positions=kk + 1).total_s
        en = sum(alpha**i for i in range(kk + 1))
        s = en * target / (kk * draft + verify)
        if best is None or s > best[0]:
            best = (s, kk, verify)
    assert best is not None
    speedup, kk, verify = best
    d = draft / target
    c = (verify / target - 1.0) / kk
    return Speculation(kk, alpha, draft), {"k": kk, "alpha": alpha, "d": d, "c": c,
                                           "speedup_at_batch": speedup, "batch": b}


def predict(dep: Deployment, bench: Benchmark, *, spec: str | None = None, k: int | None = None,
            catalog: Any = None) -> dict[str, Any]:
    """Predict one benchmark run on one replica (keys as ``vllm bench serve``'s result JSON)."""
    sm, shape, memory = build_step_model(dep, catalog)
    cap = sm.kv_capacity_tokens(memory)
    per_request = bench.isl + bench.osl
    max_conc = min(sm.engine.max_num_seqs, cap // per_request)
    spec_info: dict[str, float] | None = None
    speculation = None
    if spec is not None and spec != "none":
        guess = bench.concurrency if bench.concurrency is not None else 8
        speculation, spec_info = speculation_for(sm, spec, float(min(guess, max(1, max_conc))),
                                                 bench.isl + bench.osl / 2, k=k, catalog=catalog)
    reserve = dep.engine != "vllm"
    res: BenchResult = run_benchmark(sm, bench, memory, spec=speculation, reserve=reserve)
    gpus = dep.tp
    batch1 = sm.decode_step(1, bench.isl + bench.osl / 2)
    at_batch = sm.decode_step(max(1.0, res.decode_batch), bench.isl + bench.osl / 2)
    conc = bench.concurrency
    if conc is not None and conc > max_conc:
        above = ("queue: requests wait for KV room" if reserve else
                 "preempt: vLLM evicts the newest sequences and recomputes them")
    else:
        above = ""
    out: dict[str, Any] = {
        "model": shape.name, "gpu": canonical_gpu(dep.gpu), "tp": dep.tp, "gpus": gpus,
        "dtype": dep.dtype, "kv_dtype": dep.kv_dtype, "engine": dep.engine,
        "isl": bench.isl, "osl": bench.osl, "concurrency": conc, "request_rate": bench.rate_per_s,
        "num_prompts": bench.prompts,
        "mean_ttft_ms": res.mean_ttft_s * 1e3, "median_ttft_ms": res.median_ttft_s * 1e3,
        "p99_ttft_ms": res.p99_ttft_s * 1e3,
        "mean_tpot_ms": _ms(res.mean_tpot_s), "median_tpot_ms": _ms(res.median_tpot_s),
        "p99_tpot_ms": _ms(res.p99_tpot_s), "mean_itl_ms": _ms(res.mean_itl_s),
        "output_throughput": res.output_throughput, "request_throughput": res.request_throughput,
        "output_throughput_per_gpu": res.output_throughput / gpus,
        "duration_s": res.duration_s, "completed": res.completed,
        "decode_batch": res.decode_batch, "max_concurrency": max_conc, "kv_capacity_tokens": cap,
        "above_max_concurrency": above, "preemptions": res.preemptions,
        "max_num_batched_tokens": sm.engine.max_num_batched_tokens, "max_num_seqs": sm.engine.max_num_seqs,
        "batch1_step_ms": batch1.total_s * 1e3, "speed_of_light_batch1_step_ms": batch1.sol_s * 1e3,
        "step_at_batch": at_batch.as_dict(),
        "step_model": ("measured kernel tables" if res.measured and batch1.measured else
                       "measured kernel tables with roofline fallback") + f" ({sm.tables_note})",
        "notes": list(dict.fromkeys([*res.notes, *batch1.notes])),
    }
    if spec_info is not None:
        out["speculation"] = {"preset": spec, **spec_info}
    return out


def _ms(x: float) -> float | None:
    return None if math.isnan(x) else x * 1e3
