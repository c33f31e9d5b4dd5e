"""The capacity plan: which deployment serves the most goodput per GPU within a GPU budget.

For a model on a GPU type, a workload (``isl`` prompt and ``osl`` output tokens)
and an SLO pair, every deployment in the space

* colocated: split per replica (TP 1-8; for a mixture of experts also TP with
  expert parallel and attention DP with expert parallel, on one node and on
  ``NODES`` whole nodes) x dtype x speculation x chunk budget, ``gpus // (tp dp)``
  replicas;
* disaggregated: prefill split x decode split x dtype x speculation (decode pool) x
  prefill and decode worker counts that fit the budget,

is priced by :mod:`servesim.plan.capacity` at the largest rate that meets the
SLOs at the attainment target (its **capacity**), and ranked by output tokens/s
per GPU at that rate (DistServe's per-GPU goodput).  Each also reports tokens/s
per user (``1 / TPOT``), TTFT, TPOT, the speculative k and dollars per million
output tokens (GPU-hour prices from the catalog).  The **Pareto front** is the
set of operating points (each deployment at 1, 1/2, 1/4 and 1/8 of its
capacity) that no other point beats on both tokens/s per GPU and tokens/s per
user.

Capacity is linear in identical independent replicas (colocated replicas, decode
workers), so one replica is solved and scaled; the prefill pool (M/D/c) is
solved per worker count.  A disaggregated split's capacity is the smaller of
its pools'.

**Known hazards** travel with the plan, each engine's own reports
(:func:`hazards_for`, engines.toml): speculative decoding with prefix caching (on by default in
vLLM V1 and SGLang) is a correctness hazard, not a tuning question, and
speculation under prefill/decode disaggregation has crashed engines or run without
its draft's cache.  Deployments that combine them carry the caveat;
``hazards=False`` leaves them out.

**Headroom**: with ``headroom`` F a row is planned at F x its sustainable rate
(the engine model's figures there); ``rate_per_s``, the customer's own rate, is
shown beside each row's capacity as the share of it that rate uses.

Nothing here prints.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from servesim._checks import InputError, ParameterError, check_int, check_real
from servesim.hardware import engines  # engines.ENGINES: engines.toml, read on first use
from servesim.hardware.acceptance import DEFAULT_TRAFFIC, TRAFFIC_KINDS, published_alphas
from servesim.hardware.catalog import Catalog, builtin_catalog
from servesim.hardware.engines import default_engine, display_name, engine_hazards, engine_profile
from servesim.hardware.kernels import KernelTables, tables_for
from servesim.hardware.names import canonical_gpu, check_tp, dense_shape, resolve_gpu, valid_tps
from servesim.hardware.precision import supported_dtypes, supported_kv_dtypes
from servesim.hardware.pricer import Deployment, Pricer, build_step_model, model_architecture
from servesim.hardware.speculation import K_MAX
from servesim.hardware.topology import kv_path, rack_dep_sizes
from servesim.plan.capacity import (
    LoadPoint,
    colocated_at_load,
    decode_at_load,
    disaggregated_at_load,
    max_rate,
    prefill_at_load,
    wait_quantile,
)
from servesim.plan.confirm import confirm_row, operating_point
from servesim.plan.predict import check_context, kv_transfer_seconds, resolve_acceptance
from servesim.sim import batching, parallel  # parallel.map_tasks through its module: a test patches it
from servesim.sim.schedulers import SCHEDULERS

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.engines import EngineProfile
    from servesim.hardware.names import ModelShape

# and HAZARDS (module __getattr__)
__all__ = ["PlanQuestion", "capacity_plan", "capacity_plan_gpus", "hazards_for", "screen_steps"]


def __getattr__(name: str) -> dict[str, dict[str, str]]:
    """``HAZARDS``: each shipped engine's hazard texts (:func:`hazards_for`), read on first use."""
    if name == "HAZARDS":
        return {e: hazards_for(e) for e in engines.ENGINES}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def hazards_for(engine: str) -> dict[str, str]:
    """The caveats attached to deployments that combine speculation with KV reuse
    (``spec+prefix-cache``) or with P/D splitting (``spec+disagg``) on ``engine``: the engine's own
    issue reports (engines.toml ``[engine.NAME.hazards]``, :func:`servesim.hardware.engines.engine_hazards`;
    an engine without a report says so and names the others')."""
    return engine_hazards(engine)


TPS: tuple[int, ...] = (1, 2, 4, 8)
"""Tensor-parallel sizes searched (one node)."""

NODES: tuple[int, ...] = (2, 4)
"""Nodes a mixture-of-experts replica may span beside the one-node sizes (``TPS``): DeepSeek-R1 is
served on 16 H100s as one replica (InferenceX's two-node TP16 and DP16 + EP16 decode workers), which
no split of one 8-GPU node holds."""


@dataclass(frozen=True)
class PlanQuestion:
    """What to plan: model, GPU, budget, workload and SLOs."""

    model: str
    gpu: str
    gpus: int
    isl: int
    osl: int
    slo_ttft_s: float
    slo_tpot_s: float
    attainment: float = 0.9
    dtypes: tuple[str, ...] = ()  # () = every dtype the GPU runs
    kv_dtype: str = "bf16"
    spec: str | None = None  # a preset to try beside no speculation
    engine: str = field(default_factory=default_engine)  # engines.toml default_engine
    link_bytes_per_s: float = 50e9
    link_name: str = "rdma"
    chunks: tuple[int, ...] = ()  # () = the engine's budget and 2048
    hazards: bool = True
    target_rate_per_s: float | None = None  # plan the fewest GPUs for this rate (``gpus`` is then a cap)
    k: int | None = None  # the draft length of the speculative rows (with acceptance_length)
    acceptance_length: float | None = None  # measured mean acceptance length at k (bonus included)
    traffic: str | None = None  # without acceptance_length: the traffic kind of the published preset (chat)
    confirm: bool = True  # confirm the printed rows by the engine model (servesim.plan.confirm)
    confirm_top: int = 10  # how many of the closed form's best rows are confirmed (and printed)
    ep_comm: str | None = None  # how attention-DP ranks reach the experts (EP_COMMS); None: the engine's
    headroom: float | None = None  # plan each row at this share of its sustainable rate (None: at it)
    rate_per_s: float | None = None  # the customer's own rate, shown beside each row's capacity
    kv_placement: bool = True  # each disaggregated row's KV link from where its pools sit (_kv_links)
    interval_level: float = 0.8  # the level of each confirmed row's prediction interval (plan.interval)

    def __post_init__(self) -> None:
        check_int("gpus", self.gpus, lo=1, hi=4096)
        check_int("isl", self.isl, lo=1, hi=1_000_000)
        check_int("osl", self.osl, lo=1, hi=1_000_000)
        check_real("slo_ttft_s", self.slo_ttft_s, lo=0.0, lo_open=True)
        check_real("slo_tpot_s", self.slo_tpot_s, lo=0.0, lo_open=True)
        check_real("attainment", self.attainment, lo=0.0, hi=1.0, lo_open=True)
        check_real("link_bytes_per_s", self.link_bytes_per_s, lo=0.0, lo_open=True)
        if self.target_rate_per_s is not None:
            check_real("target_rate", self.target_rate_per_s, lo=0.0, hi=1e6, lo_open=True)
        if self.headroom is not None:
            check_real("headroom", self.headroom, lo=0.0, hi=1.0, lo_open=True)
        if self.rate_per_s is not None:
            check_real("rate", self.rate_per_s, lo=0.0, hi=1e6, lo_open=True)
        check_real("interval_level", self.interval_level, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        if self.traffic is not None:
            if self.traffic not in TRAFFIC_KINDS:
                raise ParameterError("traffic", self.traffic, f"one of {', '.join(TRAFFIC_KINDS)}")


def _price(gpu: str, catalog: Catalog | None) -> tuple[float | None, str]:
    cat = catalog if catalog is not None else builtin_catalog()
    extras = getattr(cat, "gpu_extras", {}).get(gpu, {})
    p = extras.get("usd_per_gpu_hour")
    return (float(p) if p is not None else None), str(extras.get("price_source", ""))


def capacity_plan(q: PlanQuestion, catalog: Catalog | None = None,
                  progress: Callable[[], None] | None = None) -> dict[str, Any]:
    """Rank every deployment by goodput per GPU (see the module docstring); plain dicts out.
    ``progress()`` is called :func:`screen_steps` times while the screen runs, then as each confirmed
    row is done."""
    out = _screen(replace(q, confirm=False), catalog, progress, front=not q.confirm)
    if q.confirm:
        tried = min(len(out["ranked"]), max(1, q.confirm_top))
        out["ranked"], out["pareto"], off = _confirmed(out["ranked"], q, out["gpu"], catalog, progress)
        out.update(_confirmed_note(q, len(out["ranked"]), off, tried))
    return out


def _confirmed_note(q: PlanQuestion, n: int, off: int = 0, tried: int | None = None) -> dict[str, Any]:
    """``n`` rows confirmed, ``off`` speculative ones left out for not paying, of ``tried`` run through
    the engine model (the rest sustain no rate that meets the SLOs there)."""
    tried = n + off if tried is None else tried
    failed = tried - n - off
    return {"confirmed": n, "speculation_off": off, "engine_tried": tried,
            "step_model": ("closed form at load screens every deployment; the engine model (predict --rate, "
                           f"at steady state) runs the best {tried}: {n} confirmed"
                           + (f", {off} speculative no faster than without it (left out)" if off else "")
                           + (f", {failed} hold no rate that meets the SLOs" if failed > 0 else "")
                           + "; the rows and the front are its figures")}


Par = tuple[int, int, int]
"""A replica's split: (tp, dp, ep); it spans tp x dp GPUs."""


def _shapes(q: PlanQuestion, catalog: Catalog | None) -> tuple[Any, bool, list[Par]]:
    """The model's name-bearing shape, whether it is a mixture of experts, and the splits to search:
    TP 1-8 for a dense model; for an MoE model, TP, TP with expert parallel over the same GPUs, and
    attention data parallel with expert parallel (DP x EP), on 1-8 GPUs and on ``NODES`` whole nodes
    (the GPU's node size in its kernel tables), within the budget."""
    arch = model_architecture(q.model)
    check_context(arch if arch is not None else dense_shape(q.model, catalog), q.isl, q.isl + q.osl)
    if arch is None:
        shape = dense_shape(q.model, catalog)
        return shape, False, [(t, 1, 1) for t in TPS if t <= q.gpus and t in valid_tps(shape)]
    node = _node_gpus(q, catalog)
    pars: list[Par] = []
    for g in dict.fromkeys(TPS + tuple(n * node for n in NODES)):
        if g > q.gpus:
            continue
        pars += [(g, 1, 1)] + ([(g, 1, g), (1, g, g)] if g > 1 else [])
    for g in _rack_dep_sizes(q, catalog, arch.experts):  # DEP16-72 in an NVL72 domain, DEP128+ across
        if g <= q.gpus and (1, g, g) not in pars:
            pars.append((1, g, g))
    return arch, True, pars


def _rack_dep_sizes(q: PlanQuestion, catalog: Catalog | None, experts: int) -> tuple[int, ...]:
    """Wide-EP sizes inside the GPU's NVLink domain and, where the budget holds them, across domains
    (``servesim.hardware.topology.rack_dep_sizes``)."""
    tables = _tables(q, catalog)
    return rack_dep_sizes(tables.topology, experts, q.gpus) if tables is not None else ()


def _tables(q: PlanQuestion, catalog: Catalog | None) -> KernelTables | None:
    """The kernel tables of ``q.gpu`` for its engine (their topology, NVLink rate); None for a GPU
    without them (a --catalog GPU)."""
    try:
        return tables_for(canonical_gpu(q.gpu, catalog), q.engine)
    except ParameterError:
        return None


KVLink = tuple[float, str]
"""A disaggregated row's KV link: (bytes/s, the note that says which links it crosses)."""

SpecChoice = tuple[str, int | None, float | dict[int, float] | None] | None
"""The speculation the screen prices (:func:`_spec_choice`): (method, k, alpha), (method, None, alphas by k)
or None."""


def _kv_links(q: PlanQuestion, catalog: Catalog | None) -> Callable[[int], KVLink]:
    """``gpus -> KVLink``: where the GPU's topology places a disaggregated deployment of ``gpus`` GPUs
    on a multi-node NVLink domain (``servesim.hardware.topology.kv_path``: NVLink inside one NVL72
    rack, InfiniBand between racks) and ``q.kv_placement`` asks for it; else ``q``'s link for every
    size (an HGX node, a --link the user gave)."""
    fixed: KVLink = (q.link_bytes_per_s, f"KV transfer over the P/D link {q.link_name} at "
                     f"{q.link_bytes_per_s / 1e9:g} GB/s")
    tables = _tables(q, catalog) if q.kv_placement else None
    if tables is None or not tables.topology.mnnvl:
        return lambda gpus: fixed
    def link(gpus: int) -> KVLink:
        p = kv_path(tables.topology, tables.nvlink_bytes_per_s, gpus)
        return (p.bytes_per_s, p.note.removeprefix("links: ")) if p is not None else fixed

    return link


def _link_keys(q: PlanQuestion, catalog: Catalog | None) -> dict[str, Any]:
    """The plan's P/D link as its header names it: ``q``'s, or where the rows' KV links follow their
    placement on an NVL72 rack (_kv_links), NVLink for a budget inside one rack, else both."""
    out = {"link": q.link_name, "link_GBps": q.link_bytes_per_s / 1e9}
    tables = _tables(q, catalog) if q.kv_placement else None
    if tables is None or not tables.topology.mnnvl:
        return out
    t = tables.topology
    inside = kv_path(t, tables.nvlink_bytes_per_s, min(q.gpus, t.domain_gpus))
    assert inside is not None  # a multi-node NVLink domain
    if t.within(q.gpus):
        return {"link": inside.name, "link_GBps": inside.bytes_per_s / 1e9}
    return {"link": (f"NVLink inside one NVL72 rack ({inside.bytes_per_s / 1e9:.0f} GB/s), {t.scale_out} "
                     "between racks"), "link_GBps": t.scale_out_bytes_per_s / 1e9}


def _row_links(q: PlanQuestion, catalog: Catalog | None, row: dict[str, Any], kv: KVLink | None) -> list[str]:
    """Which links a row's groups cross, in words (``Topology.links``): each pool's worker (a
    colocated row's replica) and, disaggregated, the KV transfer between the pools."""
    tables = _tables(q, catalog)
    if tables is None:
        return [kv[1]] if kv is not None else []
    t = tables.topology

    def size(pool: dict[str, Any]) -> int:
        return int(pool["tp"]) * int(pool.get("dp", 1))

    if row["architecture"] == "colocated":
        return [t.links(size(row["decode"]), "replica")]
    out = [t.links(size(row["prefill"]), "prefill worker"), t.links(size(row["decode"]), "decode worker")]
    return out + ([kv[1]] if kv is not None else [])


def _node_gpus(q: PlanQuestion, catalog: Catalog | None) -> int:
    """GPUs in one node of ``q.gpu`` (its kernel tables' system; the largest one-node size where none)."""
    try:
        tables = tables_for(canonical_gpu(q.gpu, catalog), q.engine)
    except ParameterError:
        tables = None
    return tables.gpus_per_node if tables is not None else max(TPS)


def screen_steps(q: PlanQuestion, catalog: Catalog | None = None) -> int:
    """How many times the screen of ``q`` calls ``progress`` (once per split priced colocated, once
    per prefill split and dtype priced disaggregated)."""
    shape, moe, pars = _shapes(q, catalog)
    _, _, dtypes = _checked_gpu(q, shape, moe, pars, catalog)
    return len(pars) * (1 + len(dtypes))


def _screen(q: PlanQuestion, catalog: Catalog | None = None, progress: Callable[[], None] | None = None,
            front: bool = True) -> dict[str, Any]:
    """Every deployment priced by the closed form at load, ranked (the plan before confirmation);
    ``progress()`` is called :func:`screen_steps` times.  ``front=False`` leaves the closed form's
    Pareto front out (a confirmed plan's front is the engine model's)."""
    if q.acceptance_length is not None and (q.spec is None or q.k is None):
        raise ParameterError("acceptance_length", q.acceptance_length, "given with --spec METHOD and --k K "
                             "(the draft length it was measured at)")
    shape, moe, pars = _shapes(q, catalog)
    gname, mem, dtypes = _checked_gpu(q, shape, moe, pars, catalog)
    base_engine = engine_profile(q.engine, gpu=gname, memory_gib=mem / 2**30)
    chunks = q.chunks or _budgets(base_engine, q.isl)
    choice = _spec_choice(q, shape)
    price, price_source = _price(gname, catalog)
    models = _Models(q, shape, moe, gname, mem, catalog)
    space = _Space(q, pars, dtypes, chunks, [None] + ([q.spec] if q.spec else []), choice, mem, price, models,
                   progress or (lambda: None), _kv_links(q, catalog))
    rows, curves = _colocated_rows(space)
    # (an engine that runs prompts whole takes the largest budget searched: the prompt must fit it)
    default_chunk = (base_engine.max_num_batched_tokens if base_engine.chunks_prompts or q.chunks
                     else max(chunks))
    rows += _disaggregated_rows(space, default_chunk)
    default_budget = base_engine.max_num_batched_tokens
    rows = _distinct([{"gpu": gname, **r, "budget_is_default": r["max_num_batched_tokens"] == default_budget}
                      for r in rows if r["max_rate_rps"] > 0])
    for r in rows:  # which links each row's groups cross (servesim.hardware.topology)
        kv = space.kv(r["gpus"]) if r["architecture"] == "disaggregated" else None
        r["links"] = _row_links(q, catalog, r, kv)
    _sort_rows(rows, q)
    screened = len(rows)
    pareto = [{"gpu": gname, **p} for p in _pareto(rows, curves, q)] if front else []
    return {
        "model": shape.name, "gpu": gname, "gpus_budget": q.gpus, "isl": q.isl, "osl": q.osl,
        "slo_ttft_ms": q.slo_ttft_s * 1e3, "slo_tpot_ms": q.slo_tpot_s * 1e3, "attainment": q.attainment,
        "engine": q.engine, "engine_name": display_name(q.engine), "kv_dtype": q.kv_dtype,
        **_link_keys(q, catalog),
        "usd_per_gpu_hour": price, "price_source": price_source,
        "searched": screened, "confirmed": 0, "ranked": rows, "pareto": pareto,
        "fits_none": (None if any(m is not None for m in models.built.values()) else
                      _fits_none(pars, models.unfit, _node_gpus(q, catalog) if moe else 0, q.gpus)),
        "target_rate_rps": q.target_rate_per_s, "customer_rate_rps": q.rate_per_s, "headroom": q.headroom,
        "step_model": "measured-kernel step model at load (servesim.plan.capacity)",
        "hazards": hazards_for(q.engine) if q.hazards else {},
    }


def _checked_gpu(q: PlanQuestion, shape: Any, moe: bool, pars: list[Par],
                 catalog: Catalog | None) -> tuple[str, float, tuple[str, ...]]:
    """The question's checks that need the model and the GPU (a speculation the model has, a KV dtype
    the GPU runs, a split within the budget); the GPU's catalog name, its memory in bytes and the
    dtypes to search."""
    if q.spec is not None and moe and (q.spec != "mtp" or not shape.mtp_layers):
        raise ParameterError("spec", q.spec, f"mtp (its own module) or none for {shape.name}: draft heads "
                             "for mixture-of-experts models are not priced" if shape.mtp_layers else
                             f"none for {shape.name}: it has no MTP module and draft heads for "
                             "mixture-of-experts models are not priced")
    if q.spec == "mtp" and not moe:
        raise ParameterError("spec", q.spec, "a method the model has: a dense model has no MTP module (use "
                             "eagle3, medusa, small-draft or none)")
    gspec = resolve_gpu(q.gpu, catalog)
    gname = canonical_gpu(q.gpu, catalog)
    dtypes = q.dtypes or (("auto",) if moe else supported_dtypes(gname, catalog))
    if q.kv_dtype not in supported_kv_dtypes(gname, catalog):
        have = ", ".join(supported_kv_dtypes(gname, catalog))
        raise ParameterError("kv_dtype", q.kv_dtype, f"one of {have} on {gname}")
    if not pars:
        raise ParameterError("gpus", q.gpus, f"at least the smallest valid TP for {shape.name}")
    return gname, gspec.memory_bytes, tuple(dtypes)


def _spec_choice(q: PlanQuestion, shape: ModelShape) -> SpecChoice:
    """The speculation the screen prices, as predict resolves it: ``(method, k, alpha)``, or
    ``(method, None, alphas)`` where no k is asked for (each deployment then screens every k at the
    acceptance published at, or nearest, it, and the engine model confirms the k it picked:
    confirm.py); None without speculation."""
    if q.spec is None:
        return None
    alpha, k, _ = resolve_acceptance(q.spec, shape.name, k=q.k, acceptance_length=q.acceptance_length,
                                     traffic=q.traffic)
    if q.k is None and q.acceptance_length is None:
        alphas = published_alphas(q.spec, q.traffic or DEFAULT_TRAFFIC, shape.name, range(1, K_MAX + 1))
        if alphas is not None:
            return (q.spec, None, alphas)
    return (q.spec, k, alpha)


class _Models:
    """The step model of each (split, dtype, budget) the screen prices, built once: None where the
    split is invalid or leaves no room for one request's KV cache (``unfit``: why, by the GPUs of a
    replica, the last split of that size tried)."""

    def __init__(self, q: PlanQuestion, shape: Any, moe: bool, gname: str, mem: float,
                 catalog: Catalog | None) -> None:
        self.q, self.shape, self.moe, self.gname, self.mem, self.catalog = q, shape, moe, gname, mem, catalog
        self.built: dict[tuple[Par, str, int], Pricer | None] = {}
        self.unfit: dict[int, str] = {}

    def __call__(self, par: Par, dtype: str, chunk: int) -> Pricer | None:
        q, key = self.q, (par, dtype, chunk)
        if key not in self.built:
            tp, dp, ep = par
            try:
                if not self.moe:
                    check_tp(self.shape, tp)
                dep = Deployment(q.model, self.gname, tp, dtype=dtype, kv_dtype=q.kv_dtype, engine=q.engine,
                                 max_num_batched_tokens=chunk, dp=dp, ep=ep, ep_comm=q.ep_comm)
                sm = build_step_model(dep, self.catalog)[0].for_requests(q.isl + q.osl)
                fits = sm.kv_capacity_tokens(self.mem) >= q.isl + q.osl
                self.built[key] = sm if fits else None
                if not fits:
                    self.unfit[tp * dp] = (f"tp {tp} x dp {dp} (ep {ep}) leaves no room for the KV cache of "
                                           f"one request of {q.isl + q.osl} tokens")
            except ParameterError as e:
                self.built[key] = None
                self.unfit[tp * dp] = str(e)
        return self.built[key]


@dataclass(frozen=True)
class _Space:
    """What the screen searches (splits, dtypes, budgets, speculation) and prices with."""

    q: PlanQuestion
    pars: list[Par]
    dtypes: tuple[str, ...]
    chunks: tuple[int, ...]
    specs: list[str | None]
    choice: SpecChoice  # the speculation priced (_spec_choice)
    mem: float  # one GPU's memory, bytes
    price: float | None
    models: _Models
    tick: Any  # called once per colocated split and per disaggregated prefill split and dtype
    kv: Any  # gpus -> KVLink: a disaggregated deployment's KV link by its size (_kv_links)


def _label(sm: Pricer, dtype: str) -> str:
    """The dtype a row shows: the one the step model resolved where ``auto`` was searched."""
    return sm.dtype if dtype == "auto" else dtype


def _priced(s: _Space, par: Par, dtype: str, chunk: int) -> Iterator[tuple[Pricer, str | None]]:
    """The step model of split ``par``, ``dtype`` and ``chunk`` (none where it does not fit) with each
    speculation searched; ``hazards=False`` leaves speculation out (every engine caches prefixes by
    default: the spec + prefix-cache hazard applies to every speculative row)."""
    sm = s.models(par, dtype, chunk)
    if sm is None:
        return
    for spec in s.specs:
        if spec is not None and not s.q.hazards:
            continue
        yield sm, spec


def _colocated_rows(s: _Space) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Any]]]:
    """Colocated deployments: one replica solved, scaled by the replica count; the rows and each
    row's load curve (for the Pareto front)."""
    q = s.q
    rows: list[dict[str, Any]] = []
    curves: list[tuple[dict[str, Any], Any]] = []
    for par in s.pars:
        g = par[0] * par[1]
        n = q.gpus // g
        for dtype in s.dtypes:
            for chunk in s.chunks:
                for sm, spec in _priced(s, par, dtype, chunk):

                    def one(r: float, sm: Pricer = sm, spec: str | None = spec) -> LoadPoint:
                        return colocated_at_load(sm, s.mem, 1, r, q.isl, q.osl, q.slo_ttft_s,
                                                 spec=s.choice if spec else None)

                    rate1, pt = max_rate(one, q.slo_tpot_s, q.attainment)
                    if q.target_rate_per_s is not None and rate1 > 0:
                        n = math.ceil(q.target_rate_per_s / rate1 - 1e-9)  # the fewest replicas
                        if n * g > q.gpus:
                            continue
                        pt = one(q.target_rate_per_s / n)
                    pool = (par, n, _label(sm, dtype), dtype)
                    row = _row("colocated", pool, pool, n * g, n * rate1, pt, q, spec, chunk, s.price)
                    rows.append(row)
                    curves.append((row, lambda r, f=one, n=n: f(r / n)))
        s.tick()
    return rows, curves


def _decode_capacities(s: _Space, chunk: int) -> dict[tuple[Par, str, str | None], tuple[float, LoadPoint]]:
    """Each decode worker's capacity (decode pools scale linearly), by split, dtype and speculation."""
    q = s.q
    dec: dict[tuple[Par, str, str | None], tuple[float, LoadPoint]] = {}
    for dtype in s.dtypes:
        for par in s.pars:
            for sm, spec in _priced(s, par, dtype, chunk):

                def dpoint(r: float, sm: Pricer = sm, spec: str | None = spec) -> LoadPoint:
                    d = decode_at_load(sm, s.mem, r, q.isl, q.osl, prefill=False,
                                       spec=s.choice if spec else None)
                    if not d.stable:
                        return LoadPoint(r, False, math.nan, math.nan, 0.0, math.nan, math.nan, 0.0, d.reason)
                    return LoadPoint(r, True, 0.0, 0.0, 1.0, d.tpot_s, d.batch, 0.0, "", d.k)

                dec[(par, dtype, spec)] = max_rate(dpoint, q.slo_tpot_s, q.attainment)
    return dec


class _PrefillAt:
    """A prefill split's KV transfer time (s) of one prompt and its pool's capacity by worker count,
    each by KV link, computed once."""

    def __init__(self, psm: Pricer, q: PlanQuestion) -> None:
        self.psm, self.q = psm, q
        self._xfer: dict[float, float] = {}
        self._cap: dict[tuple[int, float], float] = {}

    def xfer(self, link: KVLink) -> float:
        if link[0] not in self._xfer:
            self._xfer[link[0]] = kv_transfer_seconds(self.psm, link[0])(self.q.isl)
        return self._xfer[link[0]]

    def capacity(self, workers: int, link: KVLink) -> float:
        key = (workers, link[0])
        if key not in self._cap:
            self._cap[key] = _prefill_capacity(self.psm, workers, self.q, self.xfer(link))
        return self._cap[key]


def _disaggregated_rows(s: _Space, chunk: int) -> list[dict[str, Any]]:
    """Disaggregated deployments: decode capacity per worker (linear), prefill capacity per worker
    count; each pool has its own split and dtype (the KV cache crosses in the shared KV dtype)."""
    q = s.q
    dec = _decode_capacities(s, chunk)
    rows: list[dict[str, Any]] = []
    for pdtype in s.dtypes:
        for ppar in s.pars:
            psm = s.models(ppar, pdtype, chunk)
            s.tick()
            if psm is None:
                continue
            pg = ppar[0] * ppar[1]
            pre = _PrefillAt(psm, q)
            for pw in _prefill_counts(psm, pg, q, pre.xfer(s.kv(q.gpus))):
                left = q.gpus - pw * pg
                for (dpar, ddtype, spec), (lam1, _) in dec.items():
                    dg = dpar[0] * dpar[1]
                    if lam1 <= 0 or left < dg:
                        continue
                    # The fewest decode workers that keep up with the prefill pool (or with the target
                    # rate), within the budget, with the KV link of the deployment's size: sized first
                    # at the link of the prefill pool and one decode worker, again at the link of the
                    # size that gives where that leaves the NVLink domain (_kv_links); the row is priced
                    # at its own size's link.
                    link = s.kv(pw * pg + dg)
                    sized = _decode_workers(pre.capacity(pw, link), lam1, left // dg, q)
                    if sized is not None and s.kv(pw * pg + sized * dg)[0] != link[0]:
                        link = s.kv(pw * pg + sized * dg)
                        sized = _decode_workers(pre.capacity(pw, link), lam1, left // dg, q)
                    if sized is None:
                        continue
                    dw = sized
                    gpus = pw * pg + dw * dg
                    link = s.kv(gpus)
                    lam_p = pre.capacity(pw, link)
                    if lam_p <= 0:
                        continue
                    rate = min(lam_p, dw * lam1)
                    at = rate if q.target_rate_per_s is None else q.target_rate_per_s
                    dsm = s.models(dpar, ddtype, chunk)
                    assert dsm is not None  # it has a decode capacity, so it fits
                    qq = q if link[0] == q.link_bytes_per_s else replace(q, link_bytes_per_s=link[0])
                    pt = _disagg_point(psm, pw, dsm, s.mem, dw, qq, at, s.choice if spec else None,
                                       pre.xfer(link))
                    row = _row("disaggregated", (ppar, pw, _label(psm, pdtype), pdtype),
                               (dpar, dw, _label(dsm, ddtype), ddtype), gpus, rate, pt, q, spec, chunk,
                               s.price)
                    if link[0] != q.link_bytes_per_s:
                        row["kv_link_GBps"] = link[0] / 1e9
                    rows.append(row)
    return rows


def _decode_workers(lam_p: float, lam1: float, most: int, q: PlanQuestion) -> int | None:
    """The fewest decode workers of capacity ``lam1`` each that keep up with a prefill pool of
    capacity ``lam_p`` (or with the target rate), at most ``most``; None where none do (the prefill
    pool or the budget falls short of the target) or the prefill pool sustains nothing."""
    if lam_p <= 0:
        return None
    need = lam_p if q.target_rate_per_s is None else q.target_rate_per_s
    if q.target_rate_per_s is not None and lam_p < need:
        return None
    dw = min(most, max(1, math.ceil(need / lam1 - 1e-9)))
    if q.target_rate_per_s is not None and dw * lam1 < need:
        return None
    return dw


def _budgets(engine: EngineProfile, isl: int) -> tuple[int, ...]:
    """The step budgets searched: the engine's default and 2,048; for an engine that runs prompts whole
    (TensorRT-LLM without ``enable_chunked_prefill``), the default and the budget InferenceMAX's
    recipes size so that a whole prompt and a batch of running sequences fit in one step
    (``max(8192, 64 ceil((C + ISL + 64) / 64))``, C here the engine's CUDA-graph batch), none
    below the prompt (it could never run)."""
    default = engine.max_num_batched_tokens
    if engine.chunks_prompts:
        return tuple(dict.fromkeys((default, 2048)))
    fit = max(8192, 64 * math.ceil((engine.cuda_graph_max_tokens + isl + 64) / 64))
    return tuple(b for b in dict.fromkeys((default, fit)) if b > isl) or (fit,)


def _fits_none(pars: list[Par], unfit: dict[int, str], node: int, budget: int) -> str:
    """Why no split searched holds the model: the largest replica's reason, the sizes tried and, for a
    mixture of experts (``node`` > 0), the budget that would search the next multi-node size."""
    sizes = sorted({tp * dp for tp, dp, _ in pars})
    big = sizes[-1]
    more = [n * node for n in NODES if n * node > budget] if node else []
    hint = f"; --gpus {more[0]} or more would also search {more[0]}-GPU replicas" if more else ""
    def gpus(n: int) -> str:
        return "GPU" if n == 1 else "GPUs"

    return (f"no split of {', '.join(map(str, sizes))} {gpus(big)} holds the model: at {big} {gpus(big)}, "
            f"{unfit.get(big, 'it does not fit')}{hint}")


def _disagg_point(psm: Pricer, pw: int, dsm: Pricer, mem: float, dw: int, q: PlanQuestion, rate: float,
                  spec: SpecChoice, xfer: float) -> LoadPoint:
    """The closed form of a split at ``rate``: the dense one, or for an MoE model its two pools (M/D/c
    prefill, decode fixed point) joined by the latent's transfer time ``xfer``."""
    if not psm.is_moe and not dsm.is_moe:
        return disaggregated_at_load(psm, pw, dsm, mem, dw, q.link_bytes_per_s, rate, q.isl, q.osl,
                                     q.slo_ttft_s, spec=spec)
    p = prefill_at_load(psm, pw, rate, q.isl)
    d = decode_at_load(dsm, mem, rate / dw, q.isl, q.osl, prefill=False)
    if not p.stable or not d.stable:
        return LoadPoint(rate, False, math.nan, math.nan, 0.0, math.nan, math.nan, p.utilization,
                         "a pool cannot keep up")
    base = p.service_s + xfer + psm.engine.request_overhead_s
    att = 1.0 - p.wait_tail(q.slo_ttft_s - base) if q.slo_ttft_s >= base else 0.0
    return LoadPoint(rate, True, base + p.wait_mean_s, base + wait_quantile(p.wait_tail, 0.99, p.service_s),
                     att, d.tpot_s, d.batch, p.utilization, "", d.k)


def capacity_plan_gpus(q: PlanQuestion, gpus: list[str], catalog: Catalog | None = None,
                       progress: Callable[[], None] | None = None) -> dict[str, Any]:
    """:func:`capacity_plan` for each GPU type, merged: one ranking and one Pareto front over all."""
    plans = [_screen(replace(q, gpu=g, confirm=False), catalog, progress, front=not q.confirm) for g in gpus]
    out = dict(plans[0])
    rows = [r for p in plans for r in p["ranked"]]
    _sort_rows(rows, q)
    tried = min(len(rows), max(1, q.confirm_top))
    if q.confirm:
        rows, front, off = _confirmed(rows, q, "", catalog, progress)
    else:
        front = _front([p for pl in plans for p in pl["pareto"]])
    unfit = [p["fits_none"] for p in plans]  # said only where no GPU type holds the model
    why = None if None in unfit else "; ".join(f"{p['gpu']}: {u}" for p, u in zip(plans, unfit, strict=True))
    out.update({"gpu": ",".join(p["gpu"] for p in plans), "ranked": rows, "pareto": front, "fits_none": why,
                "searched": sum(p["searched"] for p in plans),
                "usd_per_gpu_hour": {p["gpu"]: p["usd_per_gpu_hour"] for p in plans},
                "price_source": {p["gpu"]: p["price_source"] for p in plans}})
    if q.confirm:
        out.update(_confirmed_note(q, len(rows), off, tried))
    return out


def _sort_rows(rows: list[dict[str, Any]], q: PlanQuestion) -> None:
    if q.target_rate_per_s is None:
        rows.sort(key=lambda r: (-r["output_throughput_per_gpu"], r["gpus"], r["architecture"] != "colocated",
                                 -(r["tokens_per_s_per_user"] or 0.0)))
    else:
        rows.sort(key=lambda r: (r["gpus"], -r["max_rate_rps"], r["architecture"] != "colocated",
                                 -(r["tokens_per_s_per_user"] or 0.0)))


def _confirmed(rows: list[dict[str, Any]], q: PlanQuestion, gname: str, catalog: Catalog | None,
               progress: Callable[[], None] | None = None
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """The closed form's best rows confirmed by the engine model (:mod:`servesim.plan.confirm`), ranked
    again, the Pareto front of their engine-model operating points (1, 1/2, 1/4, 1/8 of each
    confirmed rate), and how many speculative rows were left out for not paying."""
    jobs = max(1, min(2, os.cpu_count() or 1, q.confirm_top))
    tasks = [(r, q, r.get("gpu") or gname, catalog) for r in rows[:max(1, q.confirm_top)]]
    if _compiled_loop(len(tasks), q.engine) and jobs > 1 and tasks:
        _load_compiled_loop(tasks[0], q, catalog)
    # the costliest rows first, so that no worker is left with one at the end (a speculative row
    # costs several plain ones: each run sets its speculation; a colocated one runs its prompts'
    # chunks beside the decode batch); the results in the rows' order
    order = sorted(range(len(tasks)), key=lambda i: -_confirm_cost(tasks[i][0]))
    ran = parallel.map_tasks(_confirm_task, [tasks[i] for i in order], jobs=jobs, progress=progress)
    done = [d for _, d in sorted(zip(order, ran, strict=True), key=lambda x: x[0])]
    out: list[dict[str, Any]] = []
    pts: list[dict[str, Any]] = []
    for c, points in done:
        if c is None:
            continue
        out.append(c)
        pts += points
    n = len(out)
    out, pts = _speculation_off(out, pts)
    _sort_rows(out, q)
    _mark_indistinguishable(out, q)
    return out, _front(pts), n - len(out)


def _mark_indistinguishable(rows: list[dict[str, Any]], q: PlanQuestion) -> None:
    """Mark the confirmed rows the model cannot tell from the best on the figure that ranks them
    (tokens/s per GPU): a row whose prediction interval of it reaches the best row's interval
    (``indistinguishable_from_best``; the best row is one of them).  Ranking by GPUs (a target
    rate) marks none."""
    for r in rows:
        r["indistinguishable_from_best"] = False
    if not rows or q.target_rate_per_s is not None:
        return
    best = (rows[0].get("prediction_interval") or {}).get("output_throughput_per_gpu")
    if not best:
        return
    for r in rows:
        mine = (r.get("prediction_interval") or {}).get("output_throughput_per_gpu")
        r["indistinguishable_from_best"] = mine is not None and mine[1] >= best[0] and mine[0] <= best[1]


_REQUESTS_PER_ROW = 30_000
"""About how many requests the engine model simulates to confirm one row (short runs, three or four
steady-state trials of 4,000, the front's three operating points; a disaggregated row's pools each)."""


def _compiled_loop(rows: int, engine: str) -> bool:
    """Load the compiled engine loop (:mod:`servesim.sim._engine_loop`) before the rows are confirmed,
    so that every run takes it (``run_benchmark``'s ``loop="auto"`` does once it is loaded) and the
    worker processes fork with it, where the confirmation simulates past
    :data:`servesim.sim.batching.AUTO_COMPILE_REQUESTS` and numba's disk cache holds its kernels (about
    a second to load; without the cache of ``engine``'s policy compiled from the current sources,
    compiling costs more than the Python loop saves, and the Python loop runs).  The same results to
    the last bit either way.  Whether it loaded it."""
    policy = SCHEDULERS.get(engine)
    if rows * _REQUESTS_PER_ROW >= batching.AUTO_COMPILE_REQUESTS and policy is not None \
            and batching._kernels_cached(policy):
        import servesim.sim._engine_loop  # noqa: F401  # here on purpose: loaded, loop='auto' compiles
        return True
    return False


def _confirm_cost(row: dict[str, Any]) -> int:
    """A row's confirmation cost, roughly, to order the rows by (speculative colocated, speculative
    disaggregated, colocated, disaggregated: the 8-GPU EAGLE-3 plan's rows took about 1.0-1.5, 0.5-0.8,
    0.1-0.3 and 0.15 s of CPU each)."""
    return 2 * int(row["speculation"] != "none") + int(row["architecture"] == "colocated")


def _load_compiled_loop(task: tuple[dict[str, Any], PlanQuestion, str, Catalog | None], q: PlanQuestion,
                        catalog: Catalog | None) -> None:
    """Run the compiled loop once here, before the worker processes fork: numba loads its cached
    kernels at a process's first compiled run (about 0.4 s of CPU), which each worker would
    otherwise pay again.  The run is the cheapest of ``task``'s row's own (its front's point at an
    eighth of its rate), so its step prices are ones that row's confirmation asks for; its result
    is not used (prices are kept exactly, so every row's figures are the same to the last bit)."""
    row, _, gname, _ = task
    try:
        operating_point(row, q, gname, row["max_rate_rps"] / 8, catalog)
    except (ParameterError, InputError):  # pragma: no cover - the row's confirmation says why
        pass


def _twin(r: dict[str, Any]) -> tuple[Any, ...]:
    """What names a deployment apart from its speculation (a row or a front point)."""
    return (r.get("gpu"), r["architecture"], tuple(sorted(r["prefill"].items())),
            tuple(sorted(r["decode"].items())), r["max_num_batched_tokens"])


def _speculation_off(rows: list[dict[str, Any]], pts: list[dict[str, Any]]
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Leave out a speculative row whose confirmed rate does not beat the same deployment without
    speculation (confirmed too): at the load it sustains, speculation does not pay, so it is off."""
    plain = {_twin(r): r["max_rate_rps"] for r in rows if r["speculation"] == "none"}
    off = {_twin(r) for r in rows if r["speculation"] != "none" and _twin(r) in plain
           and r["max_rate_rps"] <= plain[_twin(r)]}
    keep = [r for r in rows if r["speculation"] == "none" or _twin(r) not in off]
    return keep, [p for p in pts if p["speculation"] == "none" or _twin(p) not in off]


def _confirm_task(row: dict[str, Any], q: PlanQuestion, gname: str, catalog: Catalog | None
                  ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """One row confirmed and its operating points (a task of its own: rows confirm in parallel)."""
    if row.get("kv_link_GBps") is not None:  # its own KV link where its size places it (_kv_links)
        q = replace(q, link_bytes_per_s=row["kv_link_GBps"] * 1e9)
    c = confirm_row(row, q, gname, catalog)
    if c is None or c["max_rate_rps"] <= 0:
        return None, []
    if q.target_rate_per_s is not None and c["planned_rate_rps"] < q.target_rate_per_s * (1 - 1e-9):
        return None, []  # the engine model does not sustain the target with these GPUs (and headroom)
    c["customer_load"] = q.rate_per_s / c["max_rate_rps"] if q.rate_per_s is not None else None
    pts = [{"gpu": gname, **_brief(c), "rate_rps": c["planned_rate_rps"],
            "output_throughput_per_gpu": c["output_throughput_per_gpu"],
            "tokens_per_s_per_user": c["tokens_per_s_per_user"] or 0.0}]
    for frac in (0.5, 0.25, 0.125):
        rate = c["max_rate_rps"] * frac
        d = operating_point(c, q, gname, rate, catalog)
        if d["stable"] and d["mean_tpot_ms"]:
            pts.append({"gpu": gname, **_brief(c), "rate_rps": rate,
                        "output_throughput_per_gpu": rate * q.osl / c["gpus"],
                        "tokens_per_s_per_user": 1e3 / d["mean_tpot_ms"]})
    return c, pts


def _front(pts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points no other beats on both output tok/s per GPU and tok/s per user, best first."""
    front = [p for p in pts if not any(
        o["output_throughput_per_gpu"] >= p["output_throughput_per_gpu"]
        and o["tokens_per_s_per_user"] >= p["tokens_per_s_per_user"]
        and (o["output_throughput_per_gpu"] > p["output_throughput_per_gpu"]
             or o["tokens_per_s_per_user"] > p["tokens_per_s_per_user"]) for o in pts)]
    front.sort(key=lambda p: -p["output_throughput_per_gpu"])
    uniq: list[dict[str, Any]] = []
    for p in front:
        if not uniq or (p["output_throughput_per_gpu"], p["tokens_per_s_per_user"]) != (
                uniq[-1]["output_throughput_per_gpu"], uniq[-1]["tokens_per_s_per_user"]):
            uniq.append(p)
    return uniq


def _distinct(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop a row that differs from an earlier one only in a chunk budget that did not bind."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for r in rows:
        key = (r["architecture"], tuple(r["prefill"].values()), tuple(r["decode"].values()), r["speculation"],
               round(r["max_rate_rps"], 9), r["mean_tpot_ms"])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def _prefill_counts(psm: Pricer, ptp: int, q: PlanQuestion, xfer: float) -> range:
    """Prefill worker counts to try: every count within the budget; for a target rate, the fewest that
    sustain it (a pool's capacity grows with its workers: bisection) and the next three (more prefill
    workers only shorten TTFT, and the ranking takes the fewest GPUs first)."""
    top = q.gpus // ptp - 1
    if q.target_rate_per_s is None or top < 1:
        return range(1, top + 1)
    target = q.target_rate_per_s
    if _prefill_capacity(psm, top, q, xfer) < target:
        return range(0)
    lo, hi = 0, top  # capacity(lo) < target <= capacity(hi), with capacity(0) = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _prefill_capacity(psm, mid, q, xfer) >= target else (mid, hi)
    return range(hi, min(hi + 4, top + 1))


def _prefill_capacity(psm: Pricer, workers: int, q: PlanQuestion, xfer: float) -> float:
    """The largest rate at which a prefill pool of ``workers`` meets the TTFT attainment target."""

    def pt(r: float) -> LoadPoint:
        p = prefill_at_load(psm, workers, r, q.isl)
        if not p.stable:
            return LoadPoint(r, False, math.nan, math.nan, 0.0, math.nan, math.nan, p.utilization)
        base = p.service_s + xfer + psm.engine.request_overhead_s
        att = 1.0 - p.wait_tail(q.slo_ttft_s - base) if q.slo_ttft_s >= base else 0.0
        return LoadPoint(r, True, base + p.wait_mean_s, math.nan, att, 0.0, 0.0, p.utilization)

    return max_rate(pt, math.inf, q.attainment)[0]


def _pool(p: tuple[Par, int, str, str]) -> dict[str, Any]:
    """A pool of a row: its split, workers and weight format (the checkpoint's own for ``auto``)."""
    (tp, dp, ep), workers, dtype, flag = p
    out: dict[str, Any] = {"tp": tp, "workers": workers, "dtype": dtype}
    if dp > 1 or ep > 1:
        out.update({"dp": dp, "ep": ep})
    if flag != dtype:
        out["dtype_flag"] = flag
    return out


def _row(arch: str, pre: tuple[Par, int, str, str], dec: tuple[Par, int, str, str], gpus: int, rate: float,
         pt: LoadPoint, q: PlanQuestion, spec: str | None, chunk: int, price: float | None) -> dict[str, Any]:
    out_tps = rate * q.osl
    hazards = []
    if spec is not None:
        hazards.append("spec+prefix-cache")
        if arch == "disaggregated":
            hazards.append("spec+disagg")
    return {
        "architecture": arch,
        "prefill": _pool(pre),
        "decode": _pool(dec),
        "gpus": gpus,
        "max_rate_rps": rate,
        "output_throughput_per_gpu": out_tps / gpus if gpus else 0.0,
        "tokens_per_s_per_user": 1.0 / pt.tpot_s if pt.tpot_s and pt.tpot_s > 0 else None,
        "mean_ttft_ms": pt.ttft_mean_s * 1e3 if pt.stable else None,
        "p99_ttft_ms": pt.ttft_p99_s * 1e3 if pt.stable and not math.isnan(pt.ttft_p99_s) else None,
        "mean_tpot_ms": pt.tpot_s * 1e3 if pt.stable else None,
        "ttft_attainment": pt.attainment,
        "decode_batch": pt.decode_batch if pt.stable else None,
        "speculative_k": pt.speculative_k if spec is not None else 0,
        "speculation": spec or "none",
        "max_num_batched_tokens": chunk,
        "dollars_per_million_output_tokens": (price * gpus / (out_tps * 3600) * 1e6
                                              if price is not None and out_tps > 0 else None),
        "hazards": hazards,
        "customer_load": q.rate_per_s / rate if q.rate_per_s is not None and rate > 0 else None,
    }


def _pareto(rows: list[dict[str, Any]], curves: list[tuple[dict[str, Any], Any]], q: PlanQuestion
            ) -> list[dict[str, Any]]:
    """Non-dominated operating points on (output tok/s per GPU, tok/s per user)."""
    pts: list[dict[str, Any]] = []
    for r in rows:
        pts.append({**_brief(r), "rate_rps": r["max_rate_rps"],
                    "output_throughput_per_gpu": r["output_throughput_per_gpu"],
                    "tokens_per_s_per_user": r["tokens_per_s_per_user"] or 0.0})
    for r, f in curves:
        if r["max_rate_rps"] <= 0:
            continue
        for frac in (0.5, 0.25, 0.125):
            rate = r["max_rate_rps"] * frac
            p = f(rate)
            if p.stable and p.tpot_s > 0:
                pts.append({**_brief(r), "rate_rps": rate,
                            "output_throughput_per_gpu": rate * q.osl / r["gpus"],
                            "tokens_per_s_per_user": 1.0 / p.tpot_s})
    return _front(pts)


def _brief(r: dict[str, Any]) -> dict[str, Any]:
    return {"architecture": r["architecture"], "prefill": r["prefill"], "decode": r["decode"],
            "gpus": r["gpus"], "speculation": r["speculation"],
            "max_num_batched_tokens": r["max_num_batched_tokens"]}
