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
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.acceptance import DEFAULT_TRAFFIC, TRAFFIC_KINDS, has_acceptance, preset_for
from servesim.hardware.engines import EngineProfile, default_engine, kv_follows_checkpoint, pool_scheduler
from servesim.hardware.names import canonical_gpu
from servesim.hardware.precision import kv_bytes_of, normalize_dtype
from servesim.hardware.pricer import Deployment, Drafter, Pricer, build_step_model, model_architecture
from servesim.hardware.speculation import (
    Speculation,
    alpha_for_acceptance_length,
    beside_drafter,
    draft_model_for,
    drafter_memory,
    largest_paying_batch,
    sglang_tree_for,
    speculation_for,
    speedup_curve,
    turn_off_batch,
)
from servesim.model import speculative
from servesim.plan.capacity import colocated_at_load, decode_at_load, disaggregated_at_load, prefill_at_load
from servesim.plan.interval import prediction_interval, requests_in_flight
from servesim.plan.stepview import moe_ms
from servesim.sim.batching import Benchmark, BenchResult, run_benchmark
from servesim.sim.disaggregation import Pool, run_disaggregated

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog
    from servesim.hardware.names import ModelShape
    from servesim.sim.disaggregation import DisaggResult

__all__ = ["COMPARED_KEYS", "compare_to_measured", "harness_deployment", "harness_speculation",
           "kv_transfer_seconds", "predict", "predict_disaggregated"]

COMPARED_KEYS: tuple[str, ...] = (
    "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms",
    "output_throughput", "request_throughput", "total_token_throughput",
)
"""Metrics that ``vllm bench serve`` reports and ``predict`` predicts."""


def fresh_server_waits(sm: Pricer, bench: Benchmark, *,
                       disaggregated: bool = False) -> tuple[float, float, list[str]]:
    """What a harness that measures a fresh server (``Client.fresh_server``) makes the first wave
    wait, and the notes that say so: the engine of ``sm`` (a prefill pool's, disaggregated) takes
    its first step its cold start late (``EngineProfile.cold_start_s`` for ``sm``'s dtype), and with
    ``disaggregated`` no KV transfer starts before the link's connections open
    (``EngineProfile.kv_connect_s``).  (0, 0, []) where the server is warm."""
    if not bench.client.fresh_server:
        return 0.0, 0.0, []
    eng, dtype, who = sm.engine, sm.dtype, bench.client.name
    cold = eng.cold_start_s(dtype)
    connect = eng.kv_connect_s if disaggregated else 0.0
    notes = []
    if cold:
        notes.append(f"cold start: {who} measures a fresh server, so the first wave waits {cold:g} s while "
                     f"{eng.name} compiles the {dtype} kernels of its first batched prefill on the {sm.gpu} "
                     "(fitted: engines.toml cold_start)")
    if connect:
        notes.append(f"{who} measures a fresh deployment, so its first KV transfer waits {connect:g} s while "
                     f"{eng.name}'s transfer engine opens the prefill-decode connections (fitted: "
                     "engines.toml kv_connect_ms)")
    return cold, connect, notes


def distinct_notes(notes: list[str]) -> list[str]:
    """``notes`` in order, one of each kind: notes that differ only in the values of their
    ``name=value`` points and ``x`` ratios (a kernel table's fallback at each token count the engine
    loop met, "tokens=29743 above the measured 16384", "tokens=25985 ...") are one note, the first,
    with how many more there were; a different shape or table stays a note of its own."""
    import re

    first: dict[str, int] = {}
    out: list[str] = []
    more: list[int] = []
    for n in notes:
        key = re.sub(r"(?<=[=x])\d[\d,.]*(e[-+]?\d+)?", "#", n)
        if key in first:
            more[first[key]] += 1 if n != out[first[key]] else 0
            continue
        first[key] = len(out)
        out.append(n)
        more.append(0)
    return [n if not k else f"{n} (and {k} more like it)" for n, k in zip(out, more, strict=True)]


def _pricing_notes(sm: Pricer) -> list[str]:
    """What a step model prices from another engine's table than its own (a prefill's MLA attention:
    ``MoEStepModel.mla_prefill_note``) or scales by a fitted factor (``moe_prefill_note``), to print
    beside the figures."""
    return list(sm.pricing_notes)


def harness_deployment(bench: Benchmark, *, model: str, gpu: str, kv_dtype: str | None = None,
                       engine: str | None = None, max_num_batched_tokens: int | None = None,
                       max_num_seqs: int | None = None, scheduler: tuple[tuple[str, Any], ...] = (),
                       pool: str = "", workers: int = 1, spec: str | None = None,
                       peer_workers: int | None = None, **fields: Any) -> Deployment:
    """The :class:`Deployment` a benchmark harness ran: the fields given, and for what is left unset
    (``None`` budgets, KV dtype and overlap, scheduler options not given) the server settings of the
    harness's own launch recipe (:meth:`servesim.sim.client.Client.recipe`, keyed by the GPU's
    catalog name and the model's MoE family; for one ``pool`` of a disaggregated deployment, of
    ``workers`` workers beside ``peer_workers`` in the other pool,
    :meth:`~servesim.sim.client.Client.disagg_recipe`, whose decode batches depend on the run's
    speculation ``spec``); a plain client's are the engine's defaults.  ``engine`` None: the default
    engine (:func:`~servesim.hardware.engines.default_engine`)."""
    engine = default_engine() if engine is None else engine

    recipe: dict[str, Any] = {}
    if bench.client.name == "inferencemax":  # the one harness with recipes
        arch = model_architecture(model)
        family = arch.family if arch is not None else ""
        dtype = _recipe_dtype(fields.get("dtype"), arch)  # auto: the checkpoint's (FP8, an NVFP4 release)
        if pool:
            recipe = bench.client.disagg_recipe(engine, pool, bench.isl, bench.concurrency,
                                                gpu=canonical_gpu(gpu), family=family,
                                                tp=fields.get("tp", 1), dp=fields.get("dp", 1),
                                                ep=fields.get("ep", 1),
                                                dtype=dtype, workers=workers, spec=spec,
                                                peer_workers=peer_workers, osl=bench.osl)
        else:
            recipe = bench.client.recipe(engine, bench.isl, bench.concurrency, gpu=canonical_gpu(gpu),
                                         family=family, tp=fields.get("tp", 1), dp=fields.get("dp", 1),
                                         dtype=dtype, osl=bench.osl,
                                         model=arch.name if arch is not None else "", spec=spec)
    if fields.get("overlap") is None and "overlap" in recipe:
        fields["overlap"] = recipe["overlap"]
    options = {**dict(recipe.get("scheduler") or {}), **dict(scheduler)}  # the given ones win
    if not kv_dtype and not recipe.get("kv_dtype") and kv_follows_checkpoint(engine):
        arch = model_architecture(model)  # e.g. TensorRT-LLM on a ModelOpt NVFP4 release: an FP8 cache
        kv_dtype = arch.checkpoint_kv_dtype if arch is not None else None
    return Deployment(model=model, gpu=gpu, engine=engine,
                      kv_dtype=kv_dtype or str(recipe.get("kv_dtype") or "bf16"),
                      max_num_batched_tokens=(max_num_batched_tokens if max_num_batched_tokens is not None
                                              else recipe.get("max_num_batched_tokens")),
                      max_num_seqs=max_num_seqs if max_num_seqs is not None else recipe.get("max_num_seqs"),
                      scheduler=tuple(sorted(options.items())),
                      **{"memory_fraction": recipe.get("memory_fraction"),
                         "cuda_graph_max_tokens": recipe.get("cuda_graph_max_tokens"),
                         "moe_activations": recipe.get("moe_activations"),
                         "moe_backend": recipe.get("moe_backend"),
                         "gemm_backend": recipe.get("gemm_backend"),
                         "ep_comm": recipe.get("ep_comm"),
                         "piecewise_cuda_graphs": bool(recipe.get("piecewise_cuda_graphs", False)), **fields})


def harness_speculation(bench: Benchmark, *, model: str, engine: str, dp: int = 1,
                        spec: str | None = None, decode: Deployment | None = None, decode_workers: int = 1,
                        **given: Any) -> dict[str, Any]:
    """The speculation arguments of :func:`predict` / :func:`predict_disaggregated` for ``spec``:
    those ``given`` (``k``, ``tree``, ``alpha``, ``acceptance_length``, ``traffic``, ...), or where
    none of ``k``, ``tree``, ``alpha`` and ``acceptance_length`` is, the harness's own recipe's ``k``
    or ``tree`` (:meth:`servesim.sim.client.Client.spec_recipe`; InferenceMAX's DeepSeek-R1 MTP; with
    ``decode``, a disaggregated run's decode pool of ``decode_workers`` workers, that pool's recipe's
    depth); and where neither an acceptance nor a ``traffic`` is given, the traffic kind the harness
    sends (:attr:`servesim.sim.client.Client.spec_traffic`) if the acceptance presets cover it for the
    target."""
    out = {"spec": spec, **given}
    if spec in (None, "none"):
        return out
    arch = model_architecture(model)
    if all(given.get(n) is None for n in ("alpha", "acceptance_length", "traffic")):
        kind = bench.client.spec_traffic
        name = arch.name if arch is not None else model
        if kind is not None and has_acceptance(spec, kind, name):
            out["traffic"] = kind
    if any(given.get(n) is not None for n in ("k", "tree", "alpha", "acceptance_length")):
        return out
    pool: dict[str, Any] = {}
    if decode is not None:  # the decode pool's own recipe (its file's num_nextn_predict_layers)
        pool = {"pool": "decode", "gpu": canonical_gpu(decode.gpu),
                "dtype": _recipe_dtype(decode.dtype, arch),
                "isl": bench.isl, "osl": bench.osl, "tp": decode.tp, "workers": decode_workers,
                "concurrency": bench.concurrency}
        dp = decode.dp
    out.update(bench.client.spec_recipe(engine, spec, family=arch.family if arch is not None else "",
                                        dp=dp, **pool))
    return out


def _recipe_dtype(dtype: object, arch: ModelShape | None) -> str:
    """The dtype a harness recipe keys on: ``dtype`` normalized, ``auto`` read as the checkpoint's
    (DeepSeek-R1's block FP8, an NVFP4 release's FP4)."""
    name = str(normalize_dtype(dtype or ""))
    return str(normalize_dtype(arch.checkpoint_dtype)) if name == "auto" and arch is not None else name


def resolve_acceptance(spec: str, family: str, *, k: int | None = None, alpha: float | None = None,
                       acceptance_length: float | None = None,
                       traffic: str | None = None) -> tuple[float | None, int | None, str]:
    """The acceptance a speculative prediction runs with: (alpha or None for the lab's preset, the
    draft length or None to search it, where it came from), as :func:`speculation_setting` describes."""
    if acceptance_length is not None:
        if k is None:
            raise ParameterError("k", None, "the draft length the acceptance length was measured at (--k K "
                                 "with --acceptance-length)")
        a: float | None = alpha_for_acceptance_length(acceptance_length, k)
        source = f"given: mean acceptance length {acceptance_length:g} at k = {k}"
    elif alpha is not None:
        a = check_real("alpha", alpha, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        source = f"given: alpha {alpha:g}"
    else:
        kind = DEFAULT_TRAFFIC if traffic is None else traffic
        try:
            found = preset_for(spec, kind, family, k=k)
        except ParameterError:
            if spec in ("eagle", "ngram"):  # the lab has no alpha for these either
                raise
            found = None
        if found is not None:
            a, source = found.alpha, found.describe(kind)
            k = found.k if k is None else k
        else:
            a, source = None, (f"preset (the lab's illustration, not a measurement: no published {spec} "
                               f"acceptance for {kind})")
    return a, k, source


def speculation_setting(sm: Pricer, spec: str, batch: float, context: float, *, k: int | None = None,
                        alpha: float | None = None, acceptance_length: float | None = None,
                        draft: str | None = None, catalog: Catalog | None = None,
                        kv_max: int = 1, traffic: str | None = None,
                        tree: tuple[int, int, int] | None = None) -> tuple[Any, dict[str, Any]]:
    """The speculation ``spec`` on step model ``sm`` at a running ``batch``, with the acceptance as
    given (a measured mean acceptance length at ``k``, or alpha) or a preset's, and its speedup
    curve over the batch up to ``kv_max`` (where it stops paying).

    With no acceptance given, the preset is the published one for ``spec`` and the ``traffic`` kind
    (:func:`servesim.hardware.acceptance.preset_for`, default chat; the target's own family first):
    alpha from its mean acceptance length A at its k (``sum_{i<=k} alpha^i = A``), run at that same
    k unless ``k`` is given (no k search: the engine was measured at the preset's k, and the i.i.d.
    alpha extrapolates a chain's acceptance poorly far from it; DeepSeek's k = 1 MTP figure would
    claim 5.3 tokens a step at k = 7, where TensorRT-LLM measures 3.0 at k = 5).  A given ``k``
    other than the preset's takes the i.i.d. extrapolation.  A method with no published acceptance
    for the kind (medusa; small-draft for summarization or math) keeps the lab's alpha and the k
    search, and says so; eagle and ngram, which the lab has none for, are refused naming the kinds
    that have one.

    ``tree`` (SGLang's ``speculative_num_steps``, ``speculative_eagle_topk``,
    ``speculative_num_draft_tokens``) drafts a token tree instead of a chain
    (:func:`servesim.hardware.speculation.sglang_tree_for`): a measured acceptance length is the
    tree's own (no ``k``), else the acceptance's alpha grows the best tree."""
    if spec == "mtp" and not sm.is_moe:
        raise ParameterError("spec", spec, f"a method {sm.model_name} has: it has no MTP module (DeepSeek-V3 "
                             "family models do); use eagle3, eagle, medusa, ngram or a draft model")
    if traffic is not None:
        if traffic not in TRAFFIC_KINDS:
            raise ParameterError("traffic", traffic, f"one of {', '.join(TRAFFIC_KINDS)}")
    if acceptance_length is not None and alpha is not None:
        raise ParameterError("alpha", alpha, "left out when the acceptance length is given (one of the two)")
    if tree is not None:
        return _tree_setting(sm, spec, batch, context, tree, k=k, alpha=alpha,
                             acceptance_length=acceptance_length, draft=draft, catalog=catalog, kv_max=kv_max,
                             traffic=traffic)
    family = sm.model_name
    a, k, source = resolve_acceptance(spec, family, k=k, alpha=alpha, acceptance_length=acceptance_length,
                                      traffic=traffic)
    dm = draft_model_for(sm, spec, catalog, draft)
    speculation, info = speculation_for(sm, spec, batch, context, k=k, draft=dm, alpha=a)
    batches = [1]
    while batches[-1] * 2 <= max(1, kv_max):
        batches.append(batches[-1] * 2)
    curve = speedup_curve(sm, spec, context, batches, k=k, alpha=speculation.alpha, draft=dm)
    off = next((c["batch"] for c in curve if c["speedup"] <= 1.0), None)
    limit = sm.engine.max_num_seqs
    turn_off = turn_off_batch(sm, spec, context, batch_limit=limit, draft=dm, alpha=speculation.alpha, k=k)
    note = str(getattr(dm, "note", ""))  # a published EAGLE head's: its shape derived from the target
    return speculation, {"method": spec, **({"draft": draft} if draft else {}),
                         **({"draft_note": note} if note else {}), "acceptance": source, **info,
                         "speedup_by_batch": curve, "stops_paying_at_batch": off,
                         "turn_off_batch": turn_off, "turn_off_k": k, "turn_off_limit": limit,
                         "fits_batch": max(1, kv_max),
                         **_drafter_keys(dm, sm, speculation.k)}


def _drafter_keys(dm: Drafter, sm: Pricer, k: int) -> dict[str, float]:
    """The drafter's memory beside the target (:func:`servesim.hardware.speculation.drafter_memory`)."""
    w, kv = drafter_memory(dm, sm, k)
    return {"drafter_weight_bytes_per_gpu": w, "drafter_kv_bytes_per_token_per_gpu": kv}


def _tree_setting(sm: Pricer, spec: str, batch: float, context: float, tree: tuple[int, int, int], *,
                  k: int | None, alpha: float | None, acceptance_length: float | None, draft: str | None,
                  catalog: Catalog | None, kv_max: int, traffic: str | None) -> tuple[Any, dict[str, Any]]:
    """:func:`speculation_setting` for SGLang's EAGLE tree (its three flags in ``tree``)."""
    if spec not in ("eagle", "eagle3", "mtp"):
        raise ParameterError("speculative_eagle_topk", tree[1], f"given with --spec eagle, eagle3 or mtp "
                             f"(SGLang's EAGLE worker drafts trees), not {spec}")
    if k is not None:
        raise ParameterError("k", k, "left out with a tree: it verifies speculative_num_draft_tokens - 1 "
                             "drafts")
    source = None
    if acceptance_length is None and alpha is None:
        kind = DEFAULT_TRAFFIC if traffic is None else traffic
        family = sm.model_name
        try:  # a chain (top-k 1) of `steps` drafts takes a preset measured at k = steps first
            found = preset_for(spec, kind, family, k=tree[0] if tree[1] == 1 else None)
            alpha, source = found.alpha, found.describe(kind) + "; its alpha grows the tree"
        except ParameterError:
            if spec == "eagle":
                raise
            alpha = speculative.SPECDEC_PRESETS[spec].alpha
            source = f"preset (the lab's illustration, not a measurement): alpha {alpha:g} grows the tree"
    steps, topk, tokens = tree
    dm = draft_model_for(sm, spec, catalog, draft)
    speculation, info = sglang_tree_for(sm, spec, batch, context, steps=steps, topk=topk, draft_tokens=tokens,
                                        alpha=alpha, acceptance_length=acceptance_length, draft=dm)
    batches = [1]
    while batches[-1] * 2 <= max(1, kv_max):
        batches.append(batches[-1] * 2)
    curve = []
    for b in batches:
        at = sglang_tree_for(sm, spec, float(b), context, steps=steps, topk=topk, draft_tokens=tokens,
                             alpha=alpha, acceptance_length=acceptance_length, draft=dm)[1]
        curve.append({"batch": float(b), "k": at["k"], "speedup": at["speedup_at_batch"]})
    off = next((c["batch"] for c in curve if c["speedup"] <= 1.0), None)

    def pays(b: int) -> bool:
        return bool(sglang_tree_for(sm, spec, float(b), context, steps=steps, topk=topk, draft_tokens=tokens,
                                    alpha=alpha, acceptance_length=acceptance_length,
                                    draft=dm)[1]["speedup_at_batch"] > 1.0)

    limit = sm.engine.max_num_seqs
    return speculation, {"method": spec, **({"draft": draft} if draft else {}), **info,
                         "acceptance": source or info["acceptance"], "speedup_by_batch": curve,
                         "stops_paying_at_batch": off, "turn_off_batch": largest_paying_batch(pays, limit),
                         "turn_off_k": speculation.k, "turn_off_limit": limit, "fits_batch": max(1, kv_max),
                         **_drafter_keys(dm, sm, speculation.k)}


def _running_batch(sm: Pricer, memory: float, bench: Benchmark, isl: float, osl: float, kv_max: int,
                   workers: int = 1, prefill: bool = True) -> float:
    """The decode batch a speculative run is priced at (its draft's and verify's cost depend on it):
    the client's concurrency; at a request rate the batch the closed form keeps running there
    (:func:`servesim.plan.capacity.decode_at_load`, without speculation: an upper bound, as
    speculation shortens each request), at most the concurrency; every request at once: as many
    as the KV cache holds.  ``workers`` decode workers share the load (a disaggregated decode pool,
    ``prefill`` False)."""
    if bench.rate_per_s is None:
        n = bench.concurrency if bench.concurrency is not None else min(bench.prompts, kv_max * workers)
        return max(1.0, min(float(kv_max), n / workers))

    d = decode_at_load(sm, memory, bench.rate_per_s / workers, max(1, round(isl)), max(1, round(osl)),
                       prefill=prefill)
    at_rate = d.batch if d.stable else float(kv_max)
    if bench.concurrency is not None:
        at_rate = min(at_rate, bench.concurrency / workers)
    return max(1.0, min(float(kv_max), at_rate))


SPEC_BATCH_ROUNDS = 2
"""Runs at most of a speculative prediction: the first prices the drafter and the verify at the batch
the closed form keeps running (:func:`_running_batch`, over the speedup at a request rate:
:func:`_sped_up_batch`), the second, where the first run's decode batch (time mean) is another
(:func:`_same_batch`), at that batch.  A third would move the figures by under 1% (the speedup curve
is flat over such steps) and costs a run: a speculative plan confirms hundreds."""


def _sped_up_batch(sm: Pricer, spec: str, batch: float, bench: Benchmark, context: float,
                   **setting: Any) -> float:
    """The first batch a speculative run at a request rate is priced at: Little's law with
    speculation, ``B = rate x osl x TPOT(B)`` with ``TPOT(B) = t_target(B) / speedup(B)`` (the
    decode step over the tokens a speculative step makes), solved by a few substitutions from the
    closed form's batch without speculation (``batch``), within ``[1, batch]``: the closed form's is
    an upper bound, as speculation shortens each request.  With clients in a closed loop (no rate)
    the batch as given, each client holding its request."""
    if bench.rate_per_s is None or setting.get("tree") is not None:
        return batch

    workers = int(setting.pop("workers", 1))  # a disaggregated decode pool's, sharing the rate
    _, info = speculation_setting(sm, spec, batch, context, **setting)
    dm = draft_model_for(sm, spec, setting.get("catalog"), setting.get("draft"))
    per_s = bench.rate_per_s * bench.mean_lengths()[1] / max(1, workers)
    b = batch
    for _ in range(4):
        at = speculation_for(sm, spec, b, context, k=int(info["k"]), draft=dm, alpha=float(info["alpha"]))[1]
        tpot_s = sm.decode_step(b, context).total_s / max(1e-9, float(at["speedup_at_batch"]))
        b = min(batch, max(1.0, per_s * tpot_s))
    return b


def _same_batch(run_batch: float, priced_batch: float) -> bool:
    """Whether a run's decode batch is the one its speculation was priced at: within 10% or half a
    sequence (the speedup curve is flat on that scale: under 1% between batches 16 and 18 of
    Llama-3.1-8B's EAGLE-3 on an H100)."""
    b = max(1.0, run_batch)
    return abs(b - priced_batch) <= max(0.5, 0.1 * priced_batch)


def check_context(shape: ModelShape, isl: int, longest: int) -> None:
    """Refuse requests longer than the model serves: ``longest`` prompt + output tokens against its
    context length (config.json's ``max_position_embeddings``, which vLLM and SGLang take as the
    default ``max_model_len``; engines reject a longer request outright).  Unknown (0): no check."""
    ctx = int(getattr(shape, "context_length", 0) or 0)
    if not ctx or longest <= ctx:
        return
    if isl >= ctx:
        raise ParameterError("isl", isl, f"at most {ctx - 1}: {shape.name} serves {ctx:,} tokens per request "
                             "(prompt + output; max_position_embeddings)")
    raise ParameterError("osl", longest - isl, f"at most {ctx - isl} with isl={isl}: {shape.name} serves "
                         f"{ctx:,} tokens per request (prompt + output; max_position_embeddings)")


def _client_keys(bench: Benchmark) -> dict[str, Any]:
    """The benchmark client's keys of a prediction (as ``vllm bench serve``'s result JSON names them)."""
    client = bench.client
    return {
        "client": client.name, "random_range_ratio": client.ratio, "num_warmups": bench.warmups,
        "isl": bench.isl, "osl": bench.osl, "concurrency": bench.concurrency,
        "max_concurrency": bench.concurrency,
        "request_rate": "inf" if bench.rate_per_s is None else bench.rate_per_s,
        "burstiness": client.burstiness, "num_prompts": bench.prompts,
    }


def _longest_fits(shape: ModelShape, bench: Benchmark, lengths: list[tuple[int, int]] | None,
                  cap: int) -> int:
    """The longest request (prompt and output tokens), checked against the model's context and the
    replica's KV cache of ``cap`` tokens."""
    per_request = bench.isl + bench.osl
    longest = max((p + o for p, o in lengths), default=per_request) if lengths else per_request
    check_context(shape, bench.isl, longest)
    if bench.isl < cap and longest > cap:
        raise ParameterError("osl", bench.osl, f"at most {max(1, cap - bench.isl)}: a request's prompt and "
                             f"output must fit in the KV cache of this replica ({cap:,} tokens)")
    return longest


@dataclass(frozen=True)
class _Rounds:
    """What the speculation rounds of a run hold fixed: the (decode) step model ``sm`` of ``dep``
    with ``memory`` bytes, the method ``spec`` at mean context ``context``, the KV cache's tokens and
    sequences without a drafter (``plain``), a request's nominal and longest tokens, and the
    speculation keywords ``sk`` (k, alpha, acceptance_length, draft, catalog, traffic, tree)."""

    sm: Pricer
    dep: Deployment
    memory: float
    spec: str | None
    context: float
    plain: tuple[int, int]
    per_request: int
    longest: int
    sk: dict[str, Any]


class _Ran(Protocol):
    @property
    def decode_batch(self) -> float: ...


_Run = TypeVar("_Run", bound=_Ran)


def _spec_rounds(r: _Rounds, spec_batch: float, run: Callable[[Pricer, Any], _Run]
                 ) -> tuple[_Run, Any, dict[str, Any] | None, int, int]:
    """Run at the speculation setting of ``spec_batch`` and again, up to :data:`SPEC_BATCH_ROUNDS`
    times, at the decode batch the run kept (``run(step model, speculation)`` runs it); the result,
    the speculation, its setting (None without speculation: one run), and the KV cache's tokens and
    sequences beside the drafter."""
    speculation, spec_info = None, None
    cap, kv_max = r.plain
    for _ in range(SPEC_BATCH_ROUNDS):
        if r.spec is not None and r.spec != "none":
            speculation, spec_info = speculation_setting(r.sm, r.spec, spec_batch, r.context,
                                                         kv_max=r.plain[1], **r.sk)
        run_sm = speculating_step_model(r.sm, r.dep, r.spec, spec_info, r.sk["catalog"])
        cap, kv_max = r.plain
        if spec_info is not None:
            cap, kv_max = _room_beside_drafter(run_sm, r.memory, r.per_request, r.longest, r.spec,
                                               r.sk["draft"], spec_info)
        res = run(run_sm, speculation)
        if spec_info is None or _same_batch(res.decode_batch, spec_batch):
            break
        spec_batch = max(1.0, min(res.decode_batch, float(max(1, r.plain[1]))))
    if spec_info is not None:  # the batch the run's requests fit, the drafter beside them
        spec_info["fits_batch"] = max(1, kv_max)
    return res, speculation, spec_info, cap, kv_max


def predict(dep: Deployment, bench: Benchmark, *, spec: str | None = None, k: int | None = None,
            catalog: Catalog | None = None, lengths: list[tuple[int, int]] | None = None,
            alpha: float | None = None,
            acceptance_length: float | None = None, draft: str | None = None,
            slo_ttft_s: float | None = None, traffic: str | None = None,
            tree: tuple[int, int, int] | None = None, keep_requests: bool = False,
            interval_level: float = 0.8) -> dict[str, Any]:
    """Predict one benchmark run on one replica (keys as ``vllm bench serve``'s result JSON).

    ``lengths`` gives each request's (prompt, output) tokens (a saved result's own), else the
    benchmark's client draws them.  ``spec`` (a method of
    :data:`servesim.hardware.speculation.METHODS`) with ``k`` and the measured ``acceptance_length``
    (or ``alpha``; else the published preset for the ``traffic`` kind, chat by default) and ``draft``
    (a draft model) adds speculative decoding.  ``keep_requests`` adds ``requests``: each request's
    (index, sent, first token, last token) in seconds (the steady-state window of plan/confirm.py).
    ``prediction_interval`` gives each figure's range at ``interval_level``
    (:mod:`servesim.plan.interval`)."""
    sm, shape, memory = build_step_model(dep, catalog)
    isl_mean, osl_mean = bench.mean_lengths()
    sm = sm.for_requests(max(1, round(isl_mean + osl_mean)))  # windowed layers hold at most their window
    cap = sm.kv_capacity_tokens(memory)
    per_request = bench.isl + bench.osl
    longest = _longest_fits(shape, bench, lengths, cap)
    kv_max = min(sm.engine.max_num_seqs, cap // per_request)
    sk: dict[str, Any] = dict(k=k, alpha=alpha, acceptance_length=acceptance_length, draft=draft,
                              catalog=catalog, traffic=traffic, tree=tree)
    spec_batch = 1.0  # read only with speculation
    if spec is not None and spec != "none":
        spec_batch = float(min(_running_batch(sm, memory, bench, isl_mean, osl_mean, kv_max), max(1, kv_max)))
        spec_batch = _sped_up_batch(sm, spec, spec_batch, bench, isl_mean + osl_mean / 2, **sk)
    else:
        _refuse_without_spec(alpha=alpha, acceptance_length=acceptance_length, draft=draft, tree=tree)
    stable, why = _stable_at_rate(sm, memory, bench)
    cold_s, _, fresh = fresh_server_waits(sm, bench)

    def run(run_sm: Pricer, speculation: Speculation | None) -> BenchResult:
        return run_benchmark(run_sm, bench, memory, spec=speculation,
                             lengths=lengths, cold_start_s=cold_s, keep_requests=keep_requests)

    res, _, spec_info, cap, kv_max = _spec_rounds(
        _Rounds(sm, dep, memory, spec, isl_mean + osl_mean / 2, (cap, kv_max), per_request, longest, sk),
        spec_batch, run)
    gpus = dep.tp * dep.dp
    batch1 = sm.decode_step(1, isl_mean + osl_mean / 2)
    at_batch = sm.decode_step(max(1.0, res.decode_batch), isl_mean + osl_mean / 2)
    conc = bench.concurrency
    above = _above_kv_limit(sm.engine, conc or bench.prompts, kv_max, cap // per_request)
    sched = res.scheduler
    out: dict[str, Any] = {
        "mode": "agg", "stable": stable,
        "model": shape.name, "gpu": sm.gpu, "tp": dep.tp, "dp": dep.dp, "ep": dep.ep, "gpus": gpus,
        "dtype": sm.dtype, "kv_dtype": dep.kv_dtype, "engine": dep.engine,
        "engine_version": sm.engine.version, "scheduler": sched,
        **_client_keys(bench),
        **_result_keys(res, gpus),
        "decode_batch": res.decode_batch, "kv_max_requests": kv_max, "kv_capacity_tokens": cap,
        "above_kv_limit": above, "preemptions": res.preemptions,
        "max_num_batched_tokens": sm.engine.max_num_batched_tokens, "max_num_seqs": sm.engine.max_num_seqs,
        "batch1_step_ms": batch1.total_s * 1e3, "speed_of_light_batch1_step_ms": batch1.sol_s * 1e3,
        "step_at_batch": {**at_batch.as_dict(), "moe_ms": moe_ms(at_batch.ops)},
        "step_model": ("measured kernel tables" if res.measured and batch1.measured else
                       "measured kernel tables with roofline fallback") + f" ({sm.tables_note})",
        "cold_start_s": cold_s,
        # the deployment's own notes first: the printout keeps five
        "notes": distinct_notes([*_pricing_notes(sm), *fresh, *res.notes, *batch1.notes]),
    }
    if not stable:
        out["unstable_reason"] = why
    if keep_requests:
        out["requests"] = res.requests
    return _finish(out, res, stable, spec, spec_info, slo_ttft_s,
                   (interval_level, sm.is_moe, not (res.measured and batch1.measured)))


def _refuse_without_spec(**given: object) -> None:
    """Refuse a speculation setting (the first given, as ``--acceptance-length`` before ``--alpha``)
    asked for without a speculative method."""
    names = {"acceptance_length": "acceptance_length", "alpha": "alpha", "draft": "draft",
             "tree": "speculative_num_steps"}
    for key in ("acceptance_length", "alpha", "draft", "tree"):
        if given.get(key) is not None:
            raise ParameterError(names[key], given[key],
                                 "given with a speculative method (--spec METHOD; spec is none)")


def _above_kv_limit(engine: EngineProfile, wanted: int, kv_max: int, fit: int) -> str:
    """What the engine does with the ``wanted`` requests beyond the ``kv_max`` it runs at once (``fit``
    fit in its KV cache): wait for a slot where the running limit binds first, else the engine's own
    policy (engines.toml ``above_kv_limit``); ``""`` when they all run."""
    if wanted > kv_max and kv_max == engine.max_num_seqs and fit > kv_max:
        return (f"queue: at most {kv_max} requests run at once (the engine's running limit); the others "
                "wait for a slot")
    return engine.above_kv_limit if wanted > kv_max else ""


def _room_beside_drafter(run: Pricer, memory: float, per_request: int, longest: int, spec: str | None,
                         draft: str | None, info: dict[str, Any]) -> tuple[int, int]:
    """The KV cache the drafter leaves on ``run`` (tokens) and the requests of ``per_request``
    tokens it holds within the running limit; a request of ``longest`` tokens must fit (refused
    naming the drafter)."""
    cap = run.kv_capacity_tokens(memory)
    if longest > cap:
        w = info["drafter_weight_bytes_per_gpu"] / 2**30
        raise ParameterError("draft" if draft else "spec", draft or spec,
                             f"a drafter that leaves the KV cache room for a request of {longest:,} tokens: "
                             f"with its {w:.1f} GiB of weights per GPU and its KV beside the target's, "
                             f"the cache holds {cap:,} tokens (a GPU with more memory, a larger tp or a "
                             "smaller drafter would)")
    return cap, min(run.engine.max_num_seqs, cap // per_request)


def speculating_step_model(sm: Pricer, dep: Deployment, spec: str | None, spec_info: dict[str, Any] | None,
                            catalog: Catalog | None) -> Pricer:
    """The step model the engine loop runs speculation ``spec`` on: ``sm`` itself, or ``dep``'s
    with the overlap scheduler off where the engine turns it off for the method and the user left
    it at its default (vLLM: draft-model, n-gram and Medusa drafting; SGLang: its default
    speculative worker; engines.toml ``spec_overlap_methods``; ``spec_info`` gains a note), in
    either case a copy whose KV cache makes room for the drafter's weights and KV
    (:func:`servesim.hardware.speculation.drafter_memory`)."""
    if spec is None or spec == "none" or spec_info is None:
        return sm
    sync = dep.overlap is None and sm.engine.overlap and not sm.engine.overlaps_speculation(spec)
    drafter = (spec_info["drafter_weight_bytes_per_gpu"], spec_info["drafter_kv_bytes_per_token_per_gpu"])
    base = sm
    if sync:  # the engine's step without its overlap scheduler, for the requests ``sm`` is for
        base = build_step_model(replace(dep, overlap=False, speculating=True), catalog)[0]
        base = base if sm.kv_context is None else base.for_requests(sm.kv_context)
    run = beside_drafter(base, drafter)
    if sync:
        spec_info["overlap"] = (f"off: {sm.engine.description} runs {spec} speculation without its overlap "
                                "scheduler, so every step pays its host time after the GPU's "
                                f"({run.engine.host_step_s * 1e3:g} ms a step; the plain decode it is "
                                "compared with keeps the overlap)")
    return run


def _stable_at_rate(sm: Pricer, memory: float, bench: Benchmark) -> tuple[bool, str]:
    """Whether one replica serves ``bench.rate_per_s`` in the long run (the closed form at load)."""
    if bench.rate_per_s is None or bench.concurrency is not None:
        return True, ""  # a closed loop (or a capped one) cannot outrun the replica
    isl, osl = bench.mean_lengths()
    p = colocated_at_load(sm, memory, 1, bench.rate_per_s, max(1, round(isl)), max(1, round(osl)), math.inf)
    return p.stable, p.reason


def kv_transfer_seconds(sm: Pricer, link_bytes_per_s: float) -> Callable[[int], float]:
    """``p -> seconds`` to move a ``p``-token prompt's KV cache over the link: every layer's cache in
    the KV dtype, one copy (an MLA model's latent, ``kv_lora_rank + rope`` values a layer; a GQA
    model's ``2 G d``; a sliding-window layer at most its window)."""
    return lambda p: kv_bytes_of(sm, p) / link_bytes_per_s


def _pools_stable(psm: Pricer, wp: int, dsm: Pricer, dmem: float, wd: int, rate: float, isl: float,
                  osl: float) -> tuple[bool, str, float]:
    """Whether the pools keep up with ``rate`` in the long run, by the closed form at load: the prefill
    pool (M/D/c, :func:`servesim.plan.capacity.prefill_at_load`) below full utilization, and a decode
    worker's batch fixed point within its KV and running limits
    (:func:`servesim.plan.capacity.decode_at_load`).  Returns (stable, why, prefill share)."""
    i, o = max(1, round(isl)), max(1, round(osl))
    p = prefill_at_load(psm, wp, rate, i)
    if not p.stable:
        return False, f"the prefill pool is {100 * p.utilization:.0f}% busy", p.utilization
    d = decode_at_load(dsm, dmem, rate / wd, i, o, prefill=False)
    if not d.stable:
        return False, f"decode pool: {d.reason}", p.utilization
    return True, "", p.utilization


def _pool_intake(dep: Deployment) -> Deployment:
    """``dep`` as a disaggregated pool's worker: the engine's pool scheduler options
    (:func:`servesim.hardware.engines.pool_scheduler`; TensorRT-LLM's one new request an iteration is
    trtllm-serve's front end, which a pool's worker does not run) where the deployment does not set
    them."""
    own = {k for k, _ in dep.scheduler}
    extra = tuple((k, v) for k, v in pool_scheduler(dep.engine) if k not in own)
    return replace(dep, scheduler=tuple(sorted((*dep.scheduler, *extra)))) if extra else dep


def predict_disaggregated(prefill: Deployment, prefill_workers: int, decode: Deployment, decode_workers: int,
                          link_bytes_per_s: float, bench: Benchmark, *, spec: str | None = None,
                          catalog: Catalog | None = None, lengths: list[tuple[int, int]] | None = None,
                          k: int | None = None, alpha: float | None = None,
                          acceptance_length: float | None = None, draft: str | None = None,
                          slo_ttft_s: float | None = None, traffic: str | None = None,
                          tree: tuple[int, int, int] | None = None, keep_requests: bool = False,
                          interval_level: float = 0.8) -> dict[str, Any]:
    """A disaggregated deployment under ``bench``: the engine loop of every worker of each pool
    (:func:`servesim.sim.disaggregation.run_disaggregated`), each pool with its own shape
    (``tp``, ``dp``, ``ep``, dtype) and scheduler.  ``bench.concurrency`` is the whole
    deployment's.  For a dense model the closed form at load
    (:func:`servesim.plan.capacity.disaggregated_at_load`) is reported beside it."""
    check_int("prefill_workers", prefill_workers, lo=1, hi=4096)
    check_int("decode_workers", decode_workers, lo=1, hi=4096)
    prefill, decode = _pool_intake(prefill), _pool_intake(decode)
    (psm, pshape, pmem), (dsm, dmem) = _pool_pricers(prefill, decode, bench, catalog, lengths)
    isl_mean, osl_mean = bench.mean_lengths()
    dcap = dsm.kv_capacity_tokens(dmem)
    kv_max = min(dsm.engine.max_num_seqs, dcap // (bench.isl + bench.osl))
    sk: dict[str, Any] = dict(k=k, alpha=alpha, acceptance_length=acceptance_length, draft=draft,
                              catalog=catalog, traffic=traffic, tree=tree)
    spec_batch = 1.0  # read only with speculation
    if spec is not None and spec != "none":
        spec_batch = float(max(1.0, min(_running_batch(dsm, dmem, bench, isl_mean, osl_mean, kv_max,
                                                        decode_workers, prefill=False), kv_max)))
        spec_batch = _sped_up_batch(dsm, spec, spec_batch, bench, isl_mean + osl_mean / 2, **sk,
                                    workers=decode_workers)
    stable, why, share = True, "", 0.0
    if bench.rate_per_s is not None:
        stable, why, share = _pools_stable(psm, prefill_workers, dsm, dmem, decode_workers,
                                           bench.rate_per_s, isl_mean, osl_mean)
    xfer = kv_transfer_seconds(dsm, link_bytes_per_s)
    cold_s, connect_s, fresh = fresh_server_waits(psm, bench, disaggregated=True)

    def run(dsm_run: Pricer, speculation: Speculation | None) -> DisaggResult:
        return run_disaggregated(Pool(psm, prefill_workers, pmem),
                                 Pool(dsm_run, decode_workers, dmem, speculation), bench, xfer,
                                 lengths=lengths, cold_start_s=cold_s, connect_s=connect_s)

    per_request = bench.isl + bench.osl
    longest = max((p + o for p, o in lengths), default=0) if lengths else per_request
    res, speculation, spec_info, dcap, kv_max = _spec_rounds(  # at the decode batch the run keeps
        _Rounds(dsm, decode, dmem, spec, isl_mean + osl_mean / 2, (dcap, kv_max), per_request, longest, sk),
        spec_batch, run)
    gpus = prefill.tp * prefill.dp * prefill_workers + decode.tp * decode.dp * decode_workers
    out: dict[str, Any] = {
        "mode": "disagg", "model": pshape.name, "gpu": psm.gpu, "gpus": gpus, "stable": stable,
        "prefill": {"tp": prefill.tp, "dp": prefill.dp, "ep": prefill.ep, "workers": prefill_workers,
                    "dtype": psm.dtype, "scheduler": res.prefill_scheduler},
        "decode": {"tp": decode.tp, "dp": decode.dp, "ep": decode.ep, "workers": decode_workers,
                   "dtype": dsm.dtype, "scheduler": res.decode_scheduler},
        "kv_dtype": decode.kv_dtype, "engine": decode.engine, "engine_version": dsm.engine.version,
        "link_GBps": link_bytes_per_s / 1e9,
        **_client_keys(bench),
        **_result_keys(res, gpus),
        "decode_batch": res.decode_batch, "prefill_utilization": res.prefill_busy if not share else share,
        "kv_max_requests": decode_workers * kv_max, "kv_capacity_tokens": dcap,
        "preemptions": res.preemptions,
        "mean_prefill_wait_ms": res.mean_prefill_wait_s * 1e3,
        "mean_kv_transfer_ms": res.mean_transfer_s * 1e3,
        "mean_decode_wait_ms": res.mean_decode_wait_s * 1e3, "fixed_point_rounds": res.rounds,
        "speculative_k": speculation.k if speculation is not None else 0, "unstable_reason": why,
        "step_model": ("engine loop per worker on the measured-kernel step models "
                       f"({dsm.tables_note})" + ("" if res.measured else ", with roofline fallback")),
        "cold_start_s": cold_s, "kv_connect_s": connect_s,
        # its own first: the prefill pool's, then the decode pool's where they differ (its MoE backend)
        "notes": distinct_notes([*_pricing_notes(psm), *(n for n in _pricing_notes(dsm) if n not in
                                                         _pricing_notes(psm)), *fresh, *res.notes]),
    }
    if not psm.is_moe and not dsm.is_moe and bench.rate_per_s is not None and \
            speculation is None:  # the closed form's speculation is the lab's presets only
        out["closed_form"] = _disaggregated_closed_form(psm, prefill_workers, dsm, dmem, decode_workers,
                                                        link_bytes_per_s, bench, bench.rate_per_s)
    if keep_requests:  # as predict's
        out["requests"] = res.requests
    return _finish(out, res, stable, spec, spec_info, slo_ttft_s,
                   (interval_level, psm.is_moe or dsm.is_moe, not res.measured))


def _disaggregated_closed_form(psm: Pricer, wp: int, dsm: Pricer, dmem: float, wd: int,
                               link_bytes_per_s: float, bench: Benchmark, rate: float) -> dict[str, Any]:
    """The closed form at load beside the engine loop
    (:func:`servesim.plan.capacity.disaggregated_at_load`): mean TTFT and TPOT (ms; None where the
    pools are unstable)."""
    cf = disaggregated_at_load(psm, wp, dsm, dmem, wd, link_bytes_per_s, rate, bench.isl, bench.osl, math.inf)
    return {"mean_ttft_ms": cf.ttft_mean_s * 1e3 if cf.stable else None,
            "mean_tpot_ms": cf.tpot_s * 1e3 if cf.stable else None, "stable": cf.stable}


def _pool_pricers(prefill: Deployment, decode: Deployment, bench: Benchmark, catalog: Catalog | None,
                  lengths: list[tuple[int, int]] | None
                  ) -> tuple[tuple[Pricer, Any, float], tuple[Pricer, float]]:
    """The two pools' pricers for the benchmark's requests, the model's shape and each pool's GPU
    memory; an error names the pool it is about."""
    try:
        psm, pshape, pmem = build_step_model(prefill, catalog)
    except ParameterError as exc:
        raise _pool_error(exc, "prefill") from None
    try:
        dsm, _, dmem = build_step_model(decode, catalog)
    except ParameterError as exc:
        raise _pool_error(exc, "decode") from None
    check_context(pshape, bench.isl, max((p + o for p, o in lengths), default=0) if lengths
                  else bench.isl + bench.osl)
    isl_mean, osl_mean = bench.mean_lengths()
    psm, dsm = (m.for_requests(max(1, round(isl_mean + osl_mean))) for m in (psm, dsm))
    if psm.engine.name != dsm.engine.name:  # pragma: no cover - one --engine for both pools
        raise ParameterError("engine", dsm.engine.name, f"{psm.engine.name}, as the prefill pool's")
    return (psm, pshape, pmem), (dsm, dmem)


def _pool_error(exc: ParameterError, pool: str) -> ParameterError:
    """``exc`` of one pool's deployment, naming the pool's flag (``--decode-tp`` for ``tp``)."""
    name = exc.name if exc.name not in ("tp", "dp", "ep", "dtype") else f"{pool}_{exc.name}"
    return ParameterError(name, exc.value, exc.valid)


def _result_keys(res: BenchResult | DisaggResult, gpus: int) -> dict[str, Any]:
    """What a run measured, under ``vllm bench serve``'s names and units (times in ms, duration in s);
    ``res`` is a colocated or a disaggregated engine-loop result."""
    d = res.duration_s
    return {
        "duration": d, "completed": res.completed,
        "total_input_tokens": res.total_input_tokens, "total_output_tokens": res.total_output_tokens,
        "request_throughput": res.request_throughput, "output_throughput": res.output_throughput,
        "total_token_throughput": (res.total_input_tokens + res.total_output_tokens) / d,
        "mean_ttft_ms": res.mean_ttft_s * 1e3, "median_ttft_ms": res.median_ttft_s * 1e3,
        "std_ttft_ms": _ms(res.std_ttft_s), "p99_ttft_ms": res.p99_ttft_s * 1e3,
        "mean_tpot_ms": _ms(res.mean_tpot_s), "median_tpot_ms": _ms(res.median_tpot_s),
        "std_tpot_ms": _ms(res.std_tpot_s), "p99_tpot_ms": _ms(res.p99_tpot_s),
        "mean_itl_ms": _ms(res.mean_itl_s), "median_itl_ms": _ms(res.median_itl_s),
        "std_itl_ms": _ms(res.std_itl_s), "p99_itl_ms": _ms(res.p99_itl_s),
        "mean_e2el_ms": _ms(res.mean_e2el_s), "median_e2el_ms": _ms(res.median_e2el_s),
        "std_e2el_ms": _ms(res.std_e2el_s), "p99_e2el_ms": _ms(res.p99_e2el_s),
        "output_throughput_per_gpu": res.output_throughput / gpus,
    }


_TIMES = ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "std_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
          "p99_tpot_ms", "std_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "std_itl_ms",
          "mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms", "std_e2el_ms")
"""The latencies a run reports: none of them means anything when the queue grows without bound."""


def _finish(out: dict[str, Any], res: BenchResult | DisaggResult, stable: bool, spec: str | None,
            spec_info: dict[str, Any] | None,
            slo_ttft_s: float | None, interval: tuple[float, bool, bool]) -> dict[str, Any]:
    """What a colocated and a disaggregated prediction end with alike: the speculation's setting, the
    TTFT SLO attainment where one is given, no latencies for an unstable run, and the prediction
    interval (``interval``: its level, whether the model is a mixture of experts (or MLA), whether a
    price fell back to a roofline)."""
    if spec_info is not None:
        out["speculation"] = {"preset": spec, **spec_info}
    if slo_ttft_s is not None:
        out["ttft_slo_attainment"] = _attainment(res.ttfts_s, slo_ttft_s) if stable else 0.0
    if not stable:  # the finite run's times mean nothing
        out.update(dict.fromkeys(_TIMES))
    level, moe, fallback = interval
    rate = out.get("request_rate")  # "inf": every request at once
    rate_per_s = float(rate) if isinstance(rate, float | int) else None
    flight = requests_in_flight(out.get("concurrency"), rate_per_s, out.get("mean_ttft_ms"),
                                out.get("mean_tpot_ms"), int(out["osl"]))
    out["prediction_interval"] = prediction_interval(out, level=level, engine=str(out["engine"]), moe=moe,
                                                     in_flight=flight, fallback=fallback)
    return out


def _attainment(ttfts: tuple[float, ...], slo_s: float) -> float:
    """Share of the measured requests whose TTFT met ``slo_s``."""
    return sum(1 for t in ttfts if t <= slo_s) / len(ttfts) if ttfts else 0.0


def _ms(x: float) -> float | None:
    return None if math.isnan(x) else x * 1e3


def compare_to_measured(prediction: dict[str, Any], measured: dict[str, float]) -> list[dict[str, Any]]:
    """Predicted beside measured for each of :data:`COMPARED_KEYS` present in both, with the
    relative error (predicted - measured) / measured (None when the measurement is 0) and, where the
    prediction has an interval for the metric (``prediction_interval``), the interval and a verdict:
    ``inside``, or ``outside by N%`` (how far the measurement lies beyond the nearer bound, relative
    to that bound).  A measured metric that an unstable prediction (``stable`` False: the rate is past
    capacity) leaves out is listed with ``predicted`` None and says so."""
    pi = prediction.get("prediction_interval") or {}
    rows = []
    for key in COMPARED_KEYS:
        m, p = measured.get(key), prediction.get(key)
        if m is not None and p is None and prediction.get("stable") is False:
            rows.append({"metric": key, "predicted": None, "measured": m, "relative_error": None,
                         "verdict": "not predicted: past capacity at this rate, the queue grows"})
            continue
        if m is None or p is None:
            continue
        row: dict[str, Any] = {"metric": key, "predicted": p, "measured": m,
                               "relative_error": (p - m) / m if m else None}
        bounds = pi.get(key)
        if bounds:
            lo, hi = bounds
            row["interval"] = bounds
            row["verdict"] = ("inside" if lo <= m <= hi else
                              f"outside by {100 * (lo - m) / lo:.0f}% (below)" if m < lo else
                              f"outside by {100 * (m - hi) / hi:.0f}% (above)")
        rows.append(row)
    return rows
