"""Validation of the hardware catalogs: GPUs, models and links (shipped files and ``--catalog FILE``).

A catalog file holds any of three tables of entries::

    [gpu.NAME]    hbm_TBps, bf16_TFLOPS, memory_GiB, interconnect_GBps
    [model.NAME]  layers, hidden_size, heads, kv_heads, head_dim, vocab_size, params, attention, ...
    [link.NAME]   GBps, nominal_GBps, efficiency

(the shipped gpus.toml, models.toml and links.toml document every field).  Each
entry is checked field by field (kind, bounds, unknown names), then as a whole
(:class:`servesim.hardware.shape.ModelShape` checks the attention shape against its
kind, MoE sizes, ...).  Every problem raises :class:`servesim._catalogfile.CatalogError`
naming the file, the entry and the field, e.g.::

    my.toml: [model.tiny] field 'layers': layers=0 is invalid: must be an integer >= 1

A user's entries are added to the shipped ones; an entry with a shipped name
replaces it.

Some optional fields describe a model or GPU beyond what
:class:`~servesim.hardware.shape.ModelShape` and :class:`~servesim.hardware.roofline.GPUSpec`
hold (``intermediate_size``, ``gated_mlp``, ``qkv_bias`` and ``hf_ids`` of a
model, ``fp8_TFLOPS``, ``fp4_TFLOPS``, ``usd_per_gpu_hour`` and ``price_source``
of a GPU: :data:`EXTRA_FIELDS`).  They are checked like every field and kept
beside the specs, in :attr:`Catalog.model_extras` and :attr:`Catalog.gpu_extras`
(read by :mod:`servesim.hardware.names` and :mod:`servesim.hardware.precision`;
a GPU's price by :meth:`Catalog.usd_per_gpu_hour`).
Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from servesim._catalogfile import CatalogError, load_builtin, load_file
from servesim._checks import ParameterError, check_fields, check_int, check_real
from servesim.hardware.roofline import GPUSpec
from servesim.hardware.shape import ATTENTION_KINDS, ModelShape
from servesim.model.kvcache import Link
from servesim.model.serving import Workload

__all__ = [
    "BUILTIN_FILES",
    "EXTRA_FIELDS",
    "FIELDS",
    "Catalog",
    "FieldSpec",
    "LinkSpec",
    "builtin_catalog",
    "load_catalog",
    "validate",
]

BUILTIN_FILES: tuple[str, ...] = ("gpus.toml", "models.toml", "links.toml")
"""The shipped hardware catalogs (speculative.toml and workloads.toml are checked by their own loaders)."""

GIB = 2**30
"""Bytes in a GiB (binary: HBM capacity)."""


@dataclass(frozen=True)
class FieldSpec:
    """One field of a catalog entry: its kind, whether it is required, its bounds and its meaning."""

    kind: str  # "int", "real", "str", "bool", "choice" or "ids" (a list of Hugging Face ids)
    meaning: str
    required: bool = True
    lo: float | None = None
    lo_open: bool = False
    hi: float | None = None
    choices: tuple[str, ...] = ()


def _pos(meaning: str, required: bool = True) -> FieldSpec:
    return FieldSpec("real", meaning, required, lo=0.0, lo_open=True)


def _count(meaning: str, required: bool = True, lo: int = 1) -> FieldSpec:
    return FieldSpec("int", meaning, required, lo=lo)


_TEXT = {
    "why": FieldSpec("str", "the reasoning behind the values", required=False),
    "source": FieldSpec("str", "where the values come from", required=False),
}

FIELDS: Mapping[str, Mapping[str, FieldSpec]] = {
    "gpu": {
        "hbm_TBps": _pos("HBM bandwidth in TB/s (1e12 bytes/s)"),
        "bf16_TFLOPS": _pos("dense BF16 throughput in TFLOP/s (1e12 FLOP/s, no sparsity)"),
        "memory_GiB": _pos("HBM capacity in GiB (2^30 bytes)"),
        "interconnect_GBps": _pos("GPU-to-GPU bandwidth per direction in GB/s (1e9 bytes/s)"),
        "fp8_TFLOPS": _pos("dense FP8 throughput in TFLOP/s (absent: no FP8 tensor cores)", required=False),
        "fp4_TFLOPS": _pos("dense FP4 throughput in TFLOP/s (absent: no FP4 tensor cores)", required=False),
        "usd_per_gpu_hour": _pos("on-demand cloud price of one GPU for one hour, US dollars "
                                 "(absent: no price)", required=False),
        "price_source": FieldSpec("str", "where usd_per_gpu_hour comes from: provider, offering, "
                                  "URL and the date it was read", required=False),
        **_TEXT,
    },
    "model": {
        "layers": _count("decoder layers"),
        "hidden_size": _count("model width"),
        "heads": _count("query heads"),
        "kv_heads": _count("KV heads (MLA: see models.toml)"),
        "head_dim": _count("width of one head (MLA: see models.toml)"),
        "vocab_size": _count("vocabulary size"),
        "params": _pos("total parameters"),
        "attention": FieldSpec("choice", "attention kind", choices=ATTENTION_KINDS),
        "active_params": _pos("parameters one token uses (default: params)", required=False),
        "bytes_per_value": _pos("bytes per KV-cache value (default 2)", required=False),
        "weight_bytes_per_param": _pos("bytes per weight (default 2)", required=False),
        "tied_embeddings": FieldSpec("bool", "LM head shares the input embedding", required=False),
        "experts": _count("routed experts per MoE layer (default 1)", required=False),
        "experts_per_token": _count("experts each token uses (default 1)", required=False),
        "kv_lora_rank": _count("MLA latent width", required=False),
        "qk_rope_head_dim": _count("MLA decoupled RoPE key width", required=False),
        "qk_nope_head_dim": _count("MLA per-head key width without RoPE", required=False),
        "v_head_dim": _count("MLA per-head value width", required=False),
        "draft_model": FieldSpec("str", "catalog model drafting for this one", required=False),
        "intermediate_size": _count("MLP width (MoE: one routed expert's; 0 = unknown, the default)",
                                    required=False, lo=0),
        "gated_mlp": FieldSpec("bool", "gated MLP: gate, up and down projections (default true)",
                               required=False),
        "qkv_bias": FieldSpec("bool", "the Q, K and V projections carry biases (default false)",
                              required=False),
        "hf_ids": FieldSpec("ids", "Hugging Face repository ids of checkpoints with this shape",
                            required=False),
        "context_length": _count("longest request (prompt + output tokens) the checkpoints serve: the "
                                 "largest config.json max_position_embeddings of hf_ids (0 = unknown)",
                                 required=False, lo=0),
        "short_context_ids": FieldSpec("ids", "hf_ids whose max_position_embeddings is short_context_length",
                                       required=False),
        "short_context_length": _count("max_position_embeddings of short_context_ids", required=False, lo=0),
        **_TEXT,
    },
    "link": {
        "GBps": _pos("effective bandwidth of the link, GB/s (1e9 bytes/s)"),
        "nominal_GBps": _pos("datasheet rate per direction, GB/s (default: GBps)", required=False),
        "efficiency": FieldSpec("real", "fraction of nominal_GBps a bulk transfer reaches (default 1)",
                                required=False, lo=0.0, lo_open=True, hi=1.0),
        **_TEXT,
    },
    "workload": {
        "prompt_tokens": _count("prompt tokens per request"),
        "output_tokens": _count("output tokens per request"),
        "rate_per_s": _pos("arrival rate, requests/s"),
        "slo_ttft_s": _pos("TTFT SLO in seconds"),
        "slo_tpot_s": _pos("TPOT SLO in seconds"),
        **_TEXT,
    },
}
"""Every field of every kind of entry, with its meaning (unknown fields are errors)."""

EXTRA_FIELDS: Mapping[str, tuple[str, ...]] = {
    "gpu": ("fp8_TFLOPS", "fp4_TFLOPS", "usd_per_gpu_hour", "price_source"),
    "model": ("intermediate_size", "gated_mlp", "qkv_bias", "hf_ids", "context_length", "short_context_ids",
              "short_context_length"),
}
"""Fields kept beside the specs (``Catalog.gpu_extras`` / ``Catalog.model_extras``), not in them."""

_HF_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class LinkSpec:
    """A prefill-to-decode link as the catalog describes it."""

    name: str
    GBps: float  # unit spelling, as in links.toml
    nominal_GBps: float
    efficiency: float = 1.0
    description: str = ""

    def __post_init__(self) -> None:
        check_fields(self, "GBps", "nominal_GBps")
        check_real("efficiency", self.efficiency, lo=0.0, hi=1.0, lo_open=True)

    @property
    def effective_bytes_per_s(self) -> float:
        """nominal x efficiency: what a bulk transfer reaches by our stated default."""
        return self.nominal_GBps * 1e9 * self.efficiency

    def link(self) -> Link:
        """The :class:`servesim.model.kvcache.Link` at ``GBps`` (the seed's convention)."""
        return Link(self.name, self.GBps * 1e9, self.description)


@dataclass(frozen=True)
class Catalog:
    """GPUs, models and links by name."""

    gpus: Mapping[str, GPUSpec] = field(default_factory=dict)
    models: Mapping[str, ModelShape] = field(default_factory=dict)
    links: Mapping[str, LinkSpec] = field(default_factory=dict)
    # the EXTRA_FIELDS an entry sets, by entry name (every entry of a file has one, maybe empty)
    gpu_extras: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    model_extras: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    workloads: Mapping[str, Workload] = field(default_factory=dict)  # by name

    def __post_init__(self) -> None:
        # read-only views, so that the cached built-in catalog cannot be changed by a caller
        for name in ("gpus", "models", "links", "workloads"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        for name in ("gpu_extras", "model_extras"):
            table = {k: MappingProxyType(dict(v)) for k, v in getattr(self, name).items()}
            object.__setattr__(self, name, MappingProxyType(table))

    def gpu(self, name: str) -> GPUSpec:
        return _lookup(self.gpus, name, "GPU")

    def model(self, name: str) -> ModelShape:
        return _lookup(self.models, name, "model")

    def link(self, name: str) -> LinkSpec:
        return _lookup(self.links, name, "link")

    def usd_per_gpu_hour(self, name: str) -> float | None:
        """GPU ``name``'s on-demand price per GPU-hour in US dollars, or None where the catalog has none.

        Its source is ``gpu_extras[name]["price_source"]``; an unknown GPU raises CatalogError.
        """
        _lookup(self.gpus, name, "GPU")
        price = self.gpu_extras.get(name, {}).get("usd_per_gpu_hour")
        return None if price is None else float(price)

    def merged(self, other: Catalog) -> Catalog:
        """This catalog with ``other``'s entries added (same names replaced)."""
        return Catalog(
            gpus={**self.gpus, **other.gpus},
            models={**self.models, **other.models},
            links={**self.links, **other.links},
            gpu_extras={**self.gpu_extras, **other.gpu_extras},
            model_extras={**self.model_extras, **other.model_extras},
            workloads={**self.workloads, **other.workloads},
        )


_T = TypeVar("_T")


def _lookup(table: Mapping[str, _T], name: str, what: str) -> _T:
    if name not in table:
        known = ", ".join(sorted(table)) or "none"
        raise CatalogError(f"unknown {what} {name!r}: known {what}s are {known} "
                           f"(add your own with --catalog FILE)")
    return table[name]


def _describe(kind: str) -> str:
    return ", ".join(f"{k}" for k in FIELDS[kind])


def _check_field(name: str, spec: FieldSpec, value: object) -> object:
    """Return the value in its Python kind, or raise ParameterError naming the field."""
    if spec.kind == "str":
        if not isinstance(value, str):
            raise ParameterError(name, value, "a string")
        return value
    if spec.kind == "bool":
        if not isinstance(value, bool):
            raise ParameterError(name, value, "true or false")
        return value
    if spec.kind == "ids":
        if not isinstance(value, list):
            raise ParameterError(name, value,
                                 "a list of Hugging Face ids such as ['meta-llama/Llama-3.1-8B']")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not _HF_ID.fullmatch(item):
                raise ParameterError(f"{name}[{i}]", item, "a Hugging Face id 'owner/name', "
                                     "e.g. 'meta-llama/Llama-3.1-8B'")
        return tuple(value)
    if spec.kind == "choice":
        if value not in spec.choices:
            raise ParameterError(name, value, f"one of {', '.join(repr(c) for c in spec.choices)}")
        return value
    if spec.kind == "int":
        return check_int(name, value, lo=None if spec.lo is None else int(spec.lo))
    return check_real(name, value, lo=spec.lo, lo_open=spec.lo_open, hi=spec.hi)


def _entry(kind: str, name: str, raw: object, where: str) -> dict[str, Any]:
    """Check one entry's fields: a table, no unknown fields, every required one, each in range."""
    here = f"{where}: [{kind}.{name}]"
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{here} must be a table of fields, got {raw!r}")
    specs = FIELDS[kind]
    for key in raw:
        if key not in specs:
            raise CatalogError(f"{here} unknown field {key!r} (known fields: {_describe(kind)})")
    out: dict[str, Any] = {}
    for key, spec in specs.items():
        if key not in raw:
            if spec.required:
                raise CatalogError(f"{here} missing required field {key!r} ({spec.meaning})")
            continue
        try:
            out[key] = _check_field(key, spec, raw[key])
        except ParameterError as exc:
            raise CatalogError(f"{here} field {key!r}: {exc}") from None
    return out


def _gpu(name: str, e: Mapping[str, Any]) -> GPUSpec:
    text = e.get("why", "") or e.get("source", "")
    return GPUSpec(
        name=name,
        hbm_bytes_per_s=e["hbm_TBps"] * 1e12,
        flops_per_s=e["bf16_TFLOPS"] * 1e12,
        memory_bytes=e["memory_GiB"] * GIB,
        interconnect_bytes_per_s=e["interconnect_GBps"] * 1e9,
        description=text,
    )


def _head_dim(e: Mapping[str, Any]) -> int:
    """The shape's head width: ``head_dim``, or for MLA the query/key head width ``qk_nope_head_dim +
    qk_rope_head_dim`` (models.toml writes MLA's cached latent in the K+V form of
    servesim.model.kvcache, ``2 x kv_heads x head_dim = kv_lora_rank + qk_rope_head_dim``: checked)."""
    head_dim: int = e["head_dim"]
    rank, rope, nope = (e.get(k, 0) for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim"))
    if e["attention"] != "mla" or not (rank and rope and nope):
        return head_dim
    if 2 * e["kv_heads"] * head_dim != rank + rope:
        raise ParameterError(
            "head_dim", head_dim,
            f"such that 2 x kv_heads x head_dim = kv_lora_rank + qk_rope_head_dim = "
            f"{rank + rope} for attention 'mla' (the cached latent in the K+V form "
            f"servesim.model.kvcache uses; e.g. kv_heads = 1, head_dim = {(rank + rope) / 2:g})",
        )
    return int(nope + rope)


def _model(name: str, e: Mapping[str, Any]) -> ModelShape:
    passthrough = {
        k: e[k]
        for k in (
            "bytes_per_value", "weight_bytes_per_param", "tied_embeddings", "experts",
            "experts_per_token", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
            "v_head_dim", "draft_model",
        )
        if k in e
    }
    return ModelShape(
        name=name,
        layers=e["layers"],
        hidden=e["hidden_size"],
        heads=e["heads"],
        kv_heads=e["kv_heads"],
        head_dim=_head_dim(e),
        vocab=e["vocab_size"],
        params=e["params"],
        active_params=e.get("active_params", e["params"]),
        attention=e["attention"],
        description=e.get("why", "") or e.get("source", ""),
        **passthrough,
    )


def _link(name: str, e: Mapping[str, Any]) -> LinkSpec:
    return LinkSpec(
        name=name,
        GBps=e["GBps"],
        nominal_GBps=e.get("nominal_GBps", e["GBps"]),
        efficiency=e.get("efficiency", 1.0),
        description=e.get("why", "") or e.get("source", ""),
    )


def _workload(name: str, e: Mapping[str, Any]) -> Workload:
    return Workload(name, e["prompt_tokens"], e["output_tokens"], e["rate_per_s"], e["slo_ttft_s"],
                    e["slo_tpot_s"])


_BUILD = {"gpu": _gpu, "model": _model, "link": _link, "workload": _workload}


def validate(data: Mapping[str, Any], where: str) -> Catalog:
    """Check one parsed catalog file (``where`` names it in errors) and build its entries."""
    tables: dict[str, dict[str, Any]] = {"gpu": {}, "model": {}, "link": {}, "workload": {}}
    extras: dict[str, dict[str, Mapping[str, Any]]] = {"gpu": {}, "model": {}}
    for top, entries in data.items():
        if top not in tables:
            raise CatalogError(
                f"{where}: unknown table {top!r}: a catalog file holds [gpu.NAME], "
                f"[model.NAME], [link.NAME] and [workload.NAME] entries"
            )
        if not isinstance(entries, Mapping):
            raise CatalogError(f"{where}: {top!r} must be a table of entries such as [{top}.NAME]")
        for name, raw in entries.items():
            fields = _entry(top, name, raw, where)
            try:
                tables[top][name] = _BUILD[top](name, fields)
            except ParameterError as exc:
                raise CatalogError(f"{where}: [{top}.{name}] field {exc.name!r}: {exc}") from None
            if top in extras:
                extras[top][name] = {k: fields[k] for k in EXTRA_FIELDS[top] if k in fields}
    return Catalog(gpus=tables["gpu"], models=tables["model"], links=tables["link"],
                   gpu_extras=extras["gpu"], model_extras=extras["model"], workloads=tables["workload"])


def _check_references(cat: Catalog, where: str) -> None:
    for name, m in cat.models.items():
        if m.draft_model and m.draft_model not in cat.models:
            raise CatalogError(
                f"{where}: [model.{name}] field 'draft_model': unknown model {m.draft_model!r} "
                f"(known models: {', '.join(sorted(cat.models))})"
            )
    for name in cat.models:
        ex = cat.model_extras.get(name, {})
        ids = {i.lower() for i in ex.get("hf_ids", ())}
        stray = [i for i in ex.get("short_context_ids", ()) if i.lower() not in ids]
        if stray:
            raise CatalogError(f"{where}: [model.{name}] field 'short_context_ids': {stray[0]!r} is not "
                               "one of its hf_ids")
        if ex.get("short_context_ids") and not 0 < ex.get("short_context_length", 0) <= ex.get(
                "context_length", 0):
            raise CatalogError(f"{where}: [model.{name}] field 'short_context_length' = "
                               f"{ex.get('short_context_length', 0)!r} is invalid: must be in "
                               f"[1, context_length = {ex.get('context_length', 0)}]")
    owner: dict[str, str] = {}
    for name in cat.models:
        for hf_id in cat.model_extras.get(name, {}).get("hf_ids", ()):
            first = owner.setdefault(hf_id.lower(), name)
            if first != name:
                raise CatalogError(
                    f"{where}: [model.{name}] field 'hf_ids': {hf_id!r} is already an id of model "
                    f"{first!r} (an id names one shape; replace [model.{first}] to change it)"
                )


@lru_cache(maxsize=1)
def builtin_catalog() -> Catalog:
    """The shipped gpus.toml, models.toml and links.toml, validated (cached)."""
    cat = Catalog()
    for fname in BUILTIN_FILES:
        cat = cat.merged(validate(load_builtin(fname), f"servesim/data/catalog/{fname}"))
    _check_references(cat, "servesim/data/catalog/models.toml")
    return cat


def load_catalog(*paths: str | Path) -> Catalog:
    """The shipped catalog plus each user file in order (later entries replace earlier ones)."""
    cat = builtin_catalog()
    for path in paths:
        where = str(path)
        cat = cat.merged(validate(load_file(path), where))
        _check_references(cat, where)
    return cat
