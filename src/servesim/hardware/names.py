"""Names of models and GPUs: catalog names, Hugging Face ids, ``config.json`` files, GPU aliases.

**Models.**  :func:`resolve_model` turns what a user types into a
:class:`~servesim.hardware.shape.ModelShape`:

* a catalog name (``llama-3-70b``; exact, then case-insensitive);
* a Hugging Face id listed in an entry's ``hf_ids`` (``meta-llama/Llama-3.1-8B-Instruct``),
  case-insensitively, or a bare repository name when only one entry has it
  (``Llama-3.1-8B-Instruct``);
* an FP8 / FP4 re-packaging of such a checkpoint (``nvidia/Llama-3.1-8B-Instruct-FP8``,
  ``RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8``, ``neuralmagic/...-FP8-dynamic``,
  ``Qwen/Qwen3-32B-FP8``): the suffix and a leading ``Meta-`` are dropped and the rest
  matched, from a quantizing organisation (:data:`QUANTIZER_ORGS`) or the model's own.
  The *shape* is returned; the weight dtype is a separate choice
  (:mod:`servesim.hardware.precision`);
* the path of a Hugging Face ``config.json`` (or of a directory holding one) of any family
  servesim reads, dense or mixture of experts
  (:func:`servesim.hardware.model_config.read_config`).  Text ending in
  ``.json`` or starting with ``/``, ``./``, ``../`` or ``~`` is always a path; any other
  text is looked up as a name first and read as a directory only when no name matches.

An unknown name raises :class:`~servesim._checks.ParameterError` (``name='model'``)
listing the close matches (:func:`difflib.get_close_matches` over every name and id).

**Shapes.**  :func:`model_shape` fills in what a per-GEMM step model needs beside the catalog's
fields (the MLP width ``intermediate``, or a MoE entry's ``moe_intermediate``, ``gated_mlp``,
``qkv_bias``, kept in the catalog's ``model_extras``) for any model; :func:`dense_shape` refuses the
ones a dense step model cannot price (MoE, MLA, unknown MLP width).

**Tensor parallelism.**  :func:`check_tp` applies vLLM's rule: ``tp`` divides the
attention heads, and either divides the KV heads or is a multiple of them (each
KV head is then replicated ``tp / kv_heads`` times, :func:`kv_replication`).

**GPUs.**  :func:`canonical_gpu` / :func:`resolve_gpu` accept the catalog's names
in any case with ``_`` or ``-`` (``H100_SXM``), an optional ``nvidia-`` / ``amd-``
prefix, an optional ``-sxm`` form factor and the memory size (``h100-80gb``,
``h200-141gb``).  ``h100`` means the SXM part and ``a100`` the 80 GB SXM part (the
catalog's only ones: an ``h100-pcie`` or ``a100-40gb`` is a different GPU and is
refused, with the close matches).

Standard library only.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from servesim._checks import ParameterError
from servesim._textfile import path_kind
from servesim.hardware.catalog import Catalog, builtin_catalog
from servesim.hardware.model_config import read_config
from servesim.hardware.roofline import GPUSpec
from servesim.hardware.shape import ModelShape, attention_kind

__all__ = [
    "QUANTIZER_ORGS",
    "ModelShape",
    "attention_kind",
    "canonical_gpu",
    "canonical_model",
    "check_tp",
    "dense_shape",
    "kv_replication",
    "model_shape",
    "resolve_gpu",
    "resolve_model",
    "valid_tps",
]

QUANTIZER_ORGS: tuple[str, ...] = ("nvidia", "redhatai", "neuralmagic", "amd")
"""Organisations whose FP8 / FP4 re-packagings of a catalog checkpoint resolve to its shape."""

_QUANT_SUFFIX = re.compile(r"[-_](?:fp8|nvfp4|mxfp4|fp4)(?:[-_](?:dynamic|static|kv|block|e4m3))*$")
_PATH_PREFIXES = ("/", "./", "../", "~", ".\\", "..\\")


def _catalog(catalog: Catalog | None) -> Catalog:
    return catalog if catalog is not None else builtin_catalog()


# --------------------------------------------------------------------------- shapes


def _from_spec(spec: ModelShape, extras: Mapping[str, Any], hf_id: str = "") -> ModelShape:
    ids = extras.get("hf_ids", ())
    context = int(extras.get("context_length", 0))
    if hf_id and hf_id.lower() in {i.lower() for i in extras.get("short_context_ids", ())}:
        context = int(extras["short_context_length"])
    width = int(extras.get("intermediate_size", 0))  # models.toml: a MoE entry's is a routed expert's
    moe = spec.experts > 1
    return replace(spec, context_length=context, hf_id=hf_id or (ids[0] if ids else ""),
                   intermediate=0 if moe else width, moe_intermediate=width if moe else 0,
                   gated_mlp=bool(extras.get("gated_mlp", True)),
                   qkv_bias=bool(extras.get("qkv_bias", False)))


_SHAPE_FIELDS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "vocab", "attention")


def model_shape(spec_or_name: ModelShape | str, catalog: Catalog | None = None) -> ModelShape:
    """The :class:`ModelShape` of a catalog spec, a name, an HF id or a ``config.json`` path.

    A catalog shape takes its MLP width from the catalog
    entry of the same name when the two agree on the shape (``intermediate`` is 0 otherwise); a
    shape read from a ``config.json`` or filled in already is returned as it is.
    """
    if isinstance(spec_or_name, str):
        return _resolve(spec_or_name, _catalog(catalog))
    spec = spec_or_name
    if spec.source != "catalog" or spec.hf_id or spec.intermediate or spec.moe_intermediate:
        return spec
    cat = _catalog(catalog)
    extras: Mapping[str, Any] = {}
    known = cat.models.get(spec.name)
    if known is not None and all(getattr(known, f) == getattr(spec, f) for f in _SHAPE_FIELDS):
        extras = cat.model_extras.get(spec.name, {})
    return _from_spec(spec, extras)


def dense_shape(spec_or_name: ModelShape | str, catalog: Catalog | None = None) -> ModelShape:
    """:func:`model_shape`, refusing what a dense per-GEMM step model cannot price.

    Raises :class:`ParameterError` (``name='model'``) for a mixture of experts or
    multi-head latent attention, and (``name='intermediate_size'``) for an unknown MLP width.
    """
    s = model_shape(spec_or_name, catalog)
    why = []
    if s.experts > 1:
        why.append(f"is a mixture of experts ({s.experts} experts, {s.experts_per_token} per token)")
    if s.attention == "mla":
        why.append("uses multi-head latent attention (MLA)")
    if why:
        raise ParameterError(
            "model", s.name,
            f"a dense model for the step model: {s.name} {' and '.join(why)}, which it does not price "
            "(the roofline does)",
        )
    if s.intermediate == 0:
        raise ParameterError(
            "intermediate_size", 0,
            f"known for the step model: set intermediate_size in the catalog entry of {s.name} "
            "(config.json's intermediate_size, the MLP width)",
        )
    return s


# --------------------------------------------------------------------------- model names


def _repo_key(hf_id: str) -> tuple[str, str]:
    """(organisation, repository) of an id, lower case, the repository without FP8 / FP4 suffix or 'Meta-'."""
    org, _, repo = hf_id.lower().rpartition("/")
    repo = _QUANT_SUFFIX.sub("", repo)
    if repo.startswith("meta-"):
        repo = repo[len("meta-"):]
    return org, repo


@dataclass(frozen=True)
class _Index:
    names: Mapping[str, str]  # lower-case catalog name -> name
    ids: Mapping[str, tuple[str, str]]  # lower-case HF id -> (name, id as the catalog spells it)
    repos: Mapping[str, tuple[str, ...]]  # normalized repository -> names (more than one: ambiguous)
    orgs: Mapping[str, frozenset[str]]  # normalized repository -> organisations of the catalog's ids


def _index(cat: Catalog) -> _Index:
    names = {n.lower(): n for n in cat.models}
    ids: dict[str, tuple[str, str]] = {}
    repos: dict[str, tuple[str, ...]] = {}
    orgs: dict[str, frozenset[str]] = {}
    for name in cat.models:
        for hf_id in cat.model_extras.get(name, {}).get("hf_ids", ()):
            ids.setdefault(hf_id.lower(), (name, hf_id))
            org, repo = _repo_key(hf_id)
            if name not in repos.get(repo, ()):
                repos[repo] = (*repos.get(repo, ()), name)
            orgs[repo] = orgs.get(repo, frozenset()) | {org}
    return _Index(names, ids, repos, orgs)


def _lookup_name(text: str, cat: Catalog) -> tuple[str, str] | None:
    """(catalog name, HF id or '') for a catalog name or HF id, or None."""
    if text in cat.models:
        return text, ""
    idx = _index(cat)
    low = text.lower()
    if low in idx.names:
        return idx.names[low], ""
    if low in idx.ids:
        return idx.ids[low]
    org, repo = _repo_key(text)
    found = idx.repos.get(repo, ())
    if len(found) != 1:
        return None
    if "/" not in text or org in QUANTIZER_ORGS or org in idx.orgs.get(repo, frozenset()):
        return found[0], text
    return None


def _unknown_model(text: str, cat: Catalog) -> ParameterError:
    candidates = list(cat.models)
    for name in cat.models:
        candidates += list(cat.model_extras.get(name, {}).get("hf_ids", ()))
    by_lower = {c.lower(): c for c in candidates}
    close = [by_lower[c] for c in difflib.get_close_matches(text.lower(), list(by_lower), n=5, cutoff=0.6)]
    org, repo = _repo_key(text)
    same_repo = _index(cat).repos.get(repo, ())
    if "/" in text and len(same_repo) == 1:  # a known repository from an organisation not trusted
        close = [same_repo[0], *(c for c in close if c != same_repo[0])]
        orgs = ", ".join(QUANTIZER_ORGS)
        hint = (f"close matches: {', '.join(close)} (the repository name is {same_repo[0]}'s, but "
                f"{org!r} is neither its organisation nor a known quantizer ({orgs}): name the catalog "
                "model or give the checkpoint's config.json)")
    else:
        hint = f"close matches: {', '.join(close)}" if close else "no close match"
    return ParameterError(
        "model", text,
        f"a catalog model, a Hugging Face id or a config.json path; {hint} "
        f"(catalog models: {', '.join(sorted(cat.models))})",
    )


def _looks_like_path(text: str) -> bool:
    return text.lower().endswith(".json") or text.startswith(_PATH_PREFIXES)


def _resolve(name_or_path: str, cat: Catalog) -> ModelShape:
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise ParameterError("model", name_or_path,
                             "a catalog model, a Hugging Face id or a config.json path (a non-empty string)")
    text = name_or_path.strip()
    if _looks_like_path(text):
        return read_config(text)
    found = _lookup_name(text, cat)
    if found is not None:
        name, hf_id = found
        return _from_spec(cat.models[name], cat.model_extras.get(name, {}), hf_id)
    if path_kind(text) == "dir":
        return read_config(text)
    raise _unknown_model(text, cat)


def resolve_model(name_or_path: str, catalog: Catalog | None = None) -> ModelShape:
    """The :class:`~servesim.hardware.shape.ModelShape` a name, HF id or ``config.json`` path names.

    A catalog name or HF id returns the catalog's own spec (``catalog`` defaults to the
    shipped one); a ``config.json`` builds one (:func:`~servesim.hardware.model_config.read_config`).
    Raises :class:`ParameterError` (``name='model'``, with close matches) for an unknown
    name and :class:`~servesim._checks.InputError` for a bad file.
    """
    cat = _catalog(catalog)
    shape = _resolve(name_or_path, cat)
    if shape.source == "catalog":
        return cat.models[shape.name]
    return shape


def canonical_model(name: str, catalog: Catalog | None = None) -> str:
    """The catalog name of a catalog name or HF id (``meta-llama/Llama-3.1-8B`` -> ``llama-3-8b``)."""
    cat = _catalog(catalog)
    found = _lookup_name(name.strip(), cat) if isinstance(name, str) else None
    if found is None:
        raise _unknown_model(str(name), cat)
    return found[0]


# --------------------------------------------------------------------------- tensor parallelism


def _tp_ok(heads: int, kv: int, tp: int) -> bool:
    return heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)


def valid_tps(shape: ModelShape) -> tuple[int, ...]:
    """Every tensor-parallel size :func:`check_tp` accepts for this model, ascending."""
    return tuple(t for t in range(1, shape.heads + 1) if _tp_ok(shape.heads, shape.kv_heads, t))


def check_tp(shape: ModelShape, tp: int) -> int:
    """Return ``tp`` after checking it splits the model's heads (vLLM's rule, see the module doc).

    Raises :class:`ParameterError` (``name='tp'``) listing the valid sizes.
    """
    heads, kv = shape.heads, shape.kv_heads
    valid = (f"a tensor-parallel size for {shape.name} ({heads} attention heads, {kv} KV heads): it must "
             f"divide the attention heads, and divide the KV heads or be a multiple of them (each KV head "
             f"then replicated tp / {kv} times): one of {', '.join(map(str, valid_tps(shape)))}")
    if isinstance(tp, bool) or not isinstance(tp, int):
        raise ParameterError("tp", tp, valid)
    if not (1 <= tp <= heads and _tp_ok(heads, kv, tp)):
        raise ParameterError("tp", tp, valid)
    return tp


def kv_replication(shape: ModelShape, tp: int) -> int:
    """How many GPUs hold each KV head at ``tp``: ``tp / kv_heads`` past the KV heads, else 1."""
    check_tp(shape, tp)
    return max(1, tp // shape.kv_heads)


# --------------------------------------------------------------------------- GPUs

_GPU_FAMILIES: Mapping[str, tuple[str, tuple[str, ...]]] = {
    # family -> (catalog name, memory sizes that name it)
    "h100": ("h100-sxm", ("80gb",)),
    "h200": ("h200", ("141gb",)),
    "b200": ("b200", ("180gb", "192gb")),
    "a100": ("a100-80gb", ("80gb",)),
    "mi300x": ("mi300x", ("192gb",)),
}
_GPU_FORM = re.compile(
    r"(?P<family>[a-z0-9]+?)(?:-(?P<form>sxm[0-9]?))?(?:-(?P<mem>[0-9]+gb))?(?:-(?P<form2>sxm[0-9]?))?"
)
_GPU_PREFIXES = ("nvidia-", "amd-instinct-", "amd-", "instinct-")


def _gpu_norm(name: str) -> str:
    s = re.sub(r"[\s_]+", "-", name.strip().lower())
    s = re.sub(r"-+", "-", s).strip("-")
    for prefix in _GPU_PREFIXES:
        if s.startswith(prefix):
            s = s[len(prefix):]
            break
    return s


def canonical_gpu(name: str, catalog: Catalog | None = None) -> str:
    """The catalog name of a GPU name or alias (``H100``, ``h100_sxm`` -> ``h100-sxm``).

    Raises :class:`ParameterError` (``name='gpu'``) with the close matches.
    """
    cat = _catalog(catalog)
    if isinstance(name, str) and name in cat.gpus:
        return name
    key = _gpu_norm(name) if isinstance(name, str) else ""
    by_norm = {_gpu_norm(g): g for g in cat.gpus}
    if key in by_norm:
        return by_norm[key]
    m = _GPU_FORM.fullmatch(key)
    if m and m["family"] in _GPU_FAMILIES and not (m["form"] and m["form2"]):
        canonical, sizes = _GPU_FAMILIES[m["family"]]
        if (m["mem"] is None or m["mem"] in sizes) and canonical in cat.gpus:
            return canonical
    aliases = {**by_norm, **{f: c for f, (c, _) in _GPU_FAMILIES.items() if c in cat.gpus}}
    close = difflib.get_close_matches(key, list(aliases), n=5, cutoff=0.5)
    picks = list(dict.fromkeys(aliases[c] for c in close))
    hint = f"close matches: {', '.join(picks)}" if picks else "no close match"
    raise ParameterError(
        "gpu", name,
        f"a catalog GPU or an alias of one (any case, '_' or '-', e.g. H100, h200_sxm, a100-80gb); "
        f"{hint} (catalog GPUs: {', '.join(sorted(cat.gpus))})",
    )


def resolve_gpu(name: str, catalog: Catalog | None = None) -> GPUSpec:
    """The :class:`~servesim.hardware.roofline.GPUSpec` of a GPU name or alias (see :func:`canonical_gpu`)."""
    cat = _catalog(catalog)
    return cat.gpus[canonical_gpu(name, cat)]
