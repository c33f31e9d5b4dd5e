"""Read launch and benchmark scripts back into what servesim predicts.

The inverse of :mod:`servesim.plan.launch`: :func:`parse_launch` turns a ``vllm serve``, ``python -m
sglang.launch_server`` or ``trtllm-serve`` script (with its ``--extra_llm_api_options`` YAML in a
here-document, and the ``# servesim predict ...`` first line that carries what no engine flag does:
servesim's model name, the GPU, the acceptance, the pools' workers and link) into a
:class:`~servesim.hardware.pricer.Deployment` and the speculation's arguments of
:func:`servesim.plan.predict.predict`; :func:`parse_benchmark` turns a ``vllm bench serve``, ``python
-m sglang.bench_serving`` or InferenceMAX ``benchmark_serving.py`` command into a
:class:`~servesim.sim.batching.Benchmark`.

A value that equals what the engine (or client) would use by default is read back as "the
default" (``None``), as the deployment that was written out had it: the scripts spell every value
out, so that they do not depend on a default that moves between releases.

Nothing here prints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from servesim._checks import InputError, ParameterError
from servesim.hardware.pricer import Deployment
from servesim.plan.launch import ACCEPTANCE_FLAGS, TREE_FLAGS, _overlap, flag_profile
from servesim.plan.launch import _text as _key
from servesim.plan.launch_script import Script, _pairs, launch_data, read_yaml, split_script
from servesim.sim.batching import Benchmark
from servesim.sim.client import Client

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog

__all__ = ["ParsedLaunch", "Script", "canonical", "parse_benchmark", "parse_launch", "split_script"]

# ------------------------------------------------------------------------------ launches


@dataclass(frozen=True)
class ParsedLaunch:
    """A launch script read back: the deployment, the speculation's keyword arguments of
    :func:`servesim.plan.predict.predict`, and what the first line said of the deployment around
    it (``mode``, ``prefill_workers``, ``decode_workers``, ``link``)."""

    deployment: Deployment
    speculation: dict[str, Any]
    extra: dict[str, str]


def parse_launch(
    text: str, *, gpu: str | None = None, model: str | None = None, catalog: Catalog | None = None
) -> ParsedLaunch:
    """The deployment a launch script starts (see the module docstring); ``gpu`` and ``model`` stand in
    where its first line does not name them."""
    s = split_script(text)
    engines = launch_data()["engine"]
    if s.program not in engines:
        names = [" ".join(e["commands"][0]) for e in engines.values()]
        raise InputError(f"--engine-command: no {', '.join(names[:-1])} or {names[-1]} command found in it")
    table = engines[s.program]
    sv = _pairs(s.servesim)
    o = s.options()
    got = _read(s, o, table)
    # servesim's model: the first line's, the flag's, else the checkpoint the command loads
    loaded = str(s.positional or got.get("checkpoint") or "")
    model = sv.get("--model") or model or (loaded if loaded and not loaded.startswith("$") else None)
    gpu = sv.get("--gpu") or gpu
    if not model or not gpu:
        missing = "--model" if not model else "--gpu"
        raise InputError(
            f"--engine-command: it does not say the {missing[2:]} (no '# servesim predict {missing} ...' "
            f"first line{'' if missing == '--gpu' else ' and no checkpoint id'}); give {missing}"
        )
    fields: dict[str, Any] = {"model": model, "gpu": gpu, "engine": s.program, **_fields(got, table)}
    if sv.get("--dtype"):
        fields["dtype"] = sv["--dtype"]
    spec_args = _speculation(got, table, sv)
    dep = canonical(Deployment(**fields), spec_args.get("spec"), catalog)
    around = ("--mode", "--prefill-workers", "--decode-workers", "--link")
    extra = {k[2:].replace("-", "_"): v for k, v in sv.items() if k in around and v is not None}
    return ParsedLaunch(dep, spec_args, extra)


_N = TypeVar("_N", int, float)


def _number(o: Mapping[str, object], name: str, kind: type[_N], where: str) -> _N | None:
    """Option ``name`` of a command (``where`` names its flag) as a ``kind``, None where absent; an
    InputError that names the option and its value where it is not one."""
    v = o.get(name)
    if v is None:
        return None
    try:
        return kind(str(v))
    except (TypeError, ValueError):
        what = "a whole number" if kind is int else "a number"
        raise InputError(f"{where}: {name} {v!r} is not {what}") from None


_KINDS: dict[str, type] = {
    "tp": int, "dp": int, "ep": int, "world": int, "max_num_batched_tokens": int, "max_num_seqs": int,
    "cuda_graph_max_tokens": int, "k": int, "tree_steps": int, "memory_fraction": float,
    "piecewise_cuda_graphs": bool, "overlap": bool, "overlap_run": bool, "attention_dp": bool,
    "expert_parallel": bool,
}
"""The type of each of servesim's settings read back (an entry's ``type`` names a scheduler option's)."""

_FIELDS = (
    "kv_dtype", "max_num_batched_tokens", "max_num_seqs", "memory_fraction", "cuda_graph_max_tokens",
    "piecewise_cuda_graphs", "moe_backend", "moe_activations", "gemm_backend", "ep_comm",
)
"""The deployment's fields read back as they are named."""

_ABSENT = object()


def _raw(entry: Mapping[str, Any], s: Script, o: dict[str, str | None],
         files: dict[str, dict[str, Any]]) -> object:
    """What the command says where ``entry`` writes (:data:`_ABSENT` where it says nothing): a flag's
    value (None for a flag without one), the positional argument, an options-file or JSON key, a
    variable."""
    if entry.get("positional"):
        names = entry.get("aliases", [])
        return s.positional or next((o[n] for n in names if o.get(n) is not None), _ABSENT)
    if "flag" in entry:
        for name in (entry["flag"], *entry.get("aliases", ())):
            if name in o:
                return o[name]
        return _ABSENT
    if "env" in entry:
        return s.env.get(entry["env"], _ABSENT)
    if "yaml" in entry:
        node: object = files["yaml"]
        path = entry["yaml"]
    elif "json" in entry:
        flag, path = entry["json"].split(".", 1)
        if flag not in files:
            try:
                files[flag] = json.loads(str(o[flag])) if o.get(flag) else {}
            except ValueError:
                raise InputError(f"--engine-command: {flag} is not JSON") from None
        node = files[flag]
    else:
        return _ABSENT
    for key in path.split("."):
        node = node.get(key, _ABSENT) if isinstance(node, dict) else _ABSENT
    return node


def _back(entry: Mapping[str, Any], raw: object) -> object:
    """The servesim value an entry's engine value ``raw`` reads as (its ``map`` inverted, ``default``
    where it matches none)."""
    if "switch" in entry:
        return bool(entry["switch"])
    if raw is None and "flag" in entry:
        return entry.get("default")
    if "map" in entry:
        text = _key(raw)
        back = {str(v): k for k, v in entry["map"].items()}
        if text in back:
            return back[text]
        if text in entry["map"]:
            return text
        if entry.get("read_prefix"):
            hit = next((k for k in entry["map"] if text.startswith(k)), None)
            if hit is not None:
                return hit
        return entry.get("default")
    if entry.get("negate"):
        return not raw
    if entry.get("upper"):
        return str(raw).lower()
    return raw


def _read(s: Script, o: dict[str, str | None], table: Mapping[str, Any]) -> dict[str, object]:
    """Each setting the command carries, by its name in data/engine_launch.toml (a later entry's
    value over an earlier one's, as an options file's over a flag's)."""
    named: Mapping[str, Any] = next((e for e in table["settings"] if e.get("value") == "options_file"), {})
    options = o.get(named.get("flag", "")) or table.get("options_file") or ""
    files: dict[str, dict[str, Any]] = {"yaml": read_yaml(s.files.get(str(options), ""))}
    got: dict[str, object] = {}
    by_map: dict[str, list[Mapping[str, Any]]] = {}
    for entry in table["settings"]:
        name = entry.get("value")
        if name is None or "const" in entry:
            continue
        if "map" in entry and "switch" not in entry:
            by_map.setdefault(name, []).append(entry)
        raw = _raw(entry, s, o, files)
        if raw is _ABSENT:
            if "default" in entry:
                got.setdefault(name, entry["default"])
            continue
        value = _back(entry, raw)
        kind = int if entry.get("type") == "int" else _KINDS.get(name)
        if kind is bool:
            value = bool(value)
        elif kind is not None and value is not None:
            where = str(entry.get("flag") or entry.get("yaml") or entry.get("json"))
            value = _number({where: value}, where, kind, "--engine-command")
        got[name] = value
    for name, entries in by_map.items():  # a setting that several entries carry (SGLang's exchange)
        if len(entries) > 1:
            raws = [_raw(e, s, o, files) for e in entries]
            raws = [None if r is _ABSENT else r for r in raws]
            if any(r is not None for r in raws):
                keys = dict.fromkeys(k for e in entries for k in e["map"])
                pairs = list(zip(entries, raws, strict=True))
                got[name] = next((k for k in keys if all(e["map"].get(k) == r for e, r in pairs)), None)
    return got


def _fields(got: Mapping[str, object], table: Mapping[str, Any]) -> dict[str, Any]:
    """The deployment's fields from the settings read back: the parallelism (a whole-replica width
    shared out by the attention-DP ranks where the engine writes one), the weights, the scheduler."""
    writes = {e.get("value") for e in table["settings"]}
    if "tp" in writes:
        tp, dp = int(str(got.get("tp") or 1)), int(str(got.get("dp") or 1))
    else:
        world = int(str(got.get("world") or 1))
        dp = int(str(got.get("dp") or (world if got.get("attention_dp") and "dp" not in writes else 1)))
        tp = max(1, world // dp)
    out: dict[str, Any] = {
        "tp": tp,
        "dp": dp,
        "ep": int(str(got.get("ep") or (tp * dp if got.get("expert_parallel") else 1))),
    }
    out.update({name: got[name] for name in _FIELDS if name in got})
    quant = got.get("quantization")
    if quant is not None:
        out["dtype"] = table.get("quantization_reads", {}).get(quant, quant)
    elif "dtype" in got:
        out["dtype"] = got["dtype"]
    for name in ("overlap_run", "overlap"):
        if name in got:
            out["overlap"] = got[name]
    options = {k.split(".", 1)[1]: v for k, v in got.items() if k.startswith("scheduler.")}
    if options:
        out["scheduler"] = tuple(sorted(options.items()))
    return out


def _speculation(got: Mapping[str, object], table: Mapping[str, Any],
                 sv: dict[str, str | None]) -> dict[str, Any]:
    """The speculation's arguments: servesim's method and acceptance from the first line, the draft
    length (or SGLang's tree) from the engine's own flags."""
    methods = {v: key for key, v in table.get("speculation", {}).items()}
    spec = sv.get("--spec") or (methods.get(str(got["method"])) if got.get("method") is not None else None)
    k = got.get("k", got.get("tree_steps"))
    tree: tuple[int, ...] | None = None
    if all(sv.get(n) is not None for n in TREE_FLAGS):  # a tree was asked for (the first line says so)
        tree, k = tuple(int(str(sv[n])) for n in TREE_FLAGS), None
    out: dict[str, Any] = {"spec": spec}
    if spec in (None, "none"):
        return out
    k = sv.get("--k") or k  # where the engine runs no such method, the first line keeps its k
    out.update({"k": None if k is None else int(str(k)), "tree": tree, "draft": sv.get("--draft")})
    for flag, name in ACCEPTANCE_FLAGS:
        value = sv.get(flag)
        out[name] = None if value is None else value if name == "traffic" else float(value)
    return out


def canonical(dep: Deployment, spec: str | None = None, catalog: Catalog | None = None) -> Deployment:
    """``dep`` with each setting that equals the engine's default for it read as the default
    (None): the budget, the running limit, the memory share, the overlap scheduler (for a run of
    speculation ``spec``) and the experts' exchange.  Two deployments with the same canonical form
    price alike; a launch script read back gives the canonical form of the one written out."""
    base = flag_profile(
        replace(dep, max_num_batched_tokens=None, max_num_seqs=None, memory_fraction=None, overlap=None),
        catalog,
    )
    if dep.max_num_batched_tokens == base.max_num_batched_tokens:
        dep = replace(dep, max_num_batched_tokens=None)
    if dep.max_num_seqs == base.max_num_seqs:
        dep = replace(dep, max_num_seqs=None)
    mem = flag_profile(replace(dep, memory_fraction=None), catalog).memory_fraction
    if dep.memory_fraction == mem:
        dep = replace(dep, memory_fraction=None)
    if dep.overlap is not None and dep.overlap == _overlap(replace(dep, overlap=None), base, spec):
        dep = replace(dep, overlap=None)
    if dep.ep_comm is not None and dep.ep_comm == base.ep_comm:
        dep = replace(dep, ep_comm=None)
    return dep


# ------------------------------------------------------------------------------ benchmarks


def parse_benchmark(text: str) -> Benchmark:
    """The :class:`~servesim.sim.batching.Benchmark` a client command runs (see the module docstring)."""
    s = split_script(text)
    clients = launch_data()["client"]
    if not s.program.startswith("client."):
        names = [" ".join(c["commands"][0]) for c in clients.values()]
        raise InputError(f"--bench-command: no {', '.join(names[:-1])} or {names[-1]} command found in it")
    name = s.program.split(".", 1)[1]
    table = clients[name]
    flag = {e["value"]: e["flag"] for e in table["settings"] if "value" in e}
    o = {**s.options()}
    for e in table["settings"]:  # a flag's other spellings (--input-len) as its own
        for alias in e.get("aliases", ()):
            if o.get(e["flag"]) is None and alias in o:
                o[e["flag"]] = o[alias]
    sv = _pairs(s.servesim)
    # what the tool does with a flag left out (data/engine_launch.toml default_dataset, default_seed)
    dataset = o.get("--dataset-name") or table["default_dataset"]
    if dataset != "random":
        raise InputError(
            f"--bench-command: dataset {dataset}{'' if '--dataset-name' in o else ' (the default)'}: "
            "servesim predicts the random dataset (--dataset-name random with --random-input-len and "
            "--random-output-len)"
        )
    isl = _bint(o, flag["isl"]) or 1024
    osl = _bint(o, flag["osl"]) or 128
    rate_text = o.get(flag["rate"])
    rate = None if rate_text in (None, "inf") else float(str(rate_text))
    conc = _bint(o, flag["concurrency"])
    ratio = o.get(flag["ratio"])
    warm = o.get(flag["warmups"])
    burst = o.get(flag["burstiness"]) if "burstiness" in flag else None
    client = Client(
        name=name,
        random_range_ratio=None if ratio is None else float(ratio),
        num_warmups=None if warm is None else int(warm),
        burstiness=1.0 if burst is None else float(burst),
        warm_server="--warm-server" in sv,
    )
    default = Client(name=name, burstiness=client.burstiness, warm_server=client.warm_server)
    if client.ratio == default.ratio:
        client = replace(client, random_range_ratio=None)
    if client.warmups(conc) == default.warmups(conc):
        client = replace(client, num_warmups=None)
    prompts = _bint(o, flag["prompts"]) or 1000
    seed = flag["seed"]
    bench = Benchmark(
        isl=isl,
        osl=osl,
        concurrency=conc,
        rate_per_s=rate,
        num_prompts=prompts,
        seed=(_bint(o, seed) or 0) if seed in o else int(table["default_seed"]),
        warmup=int(sv.get("--warmup-prompts") or 0),
        client=client,
    )
    try:  # the client's default count, where it is the same (and leaves the warm-up valid)
        plain = replace(bench, num_prompts=None)
    except ParameterError:
        plain = bench
    if plain.prompts == prompts:
        bench = plain
    return bench


def _bint(o: Mapping[str, object], name: str) -> int | None:
    return _number(o, name, int, "--bench-command")
