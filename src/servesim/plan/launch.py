"""The commands that start what a prediction assumed, and the command that measures it.

For one :class:`~servesim.hardware.pricer.Deployment` (a replica, or each pool of a disaggregated
deployment), :func:`engine_command` writes the engine's launch as a short shell script (an options
file, where the engine reads one, written by a here-document), carrying every setting the
prediction priced: the parallelism (tensor, attention data and expert parallel) and the experts'
exchange; the step token budget, the running limit and the memory share at the values the engine
profile used (:func:`servesim.hardware.engines.engine_profile`: the user's flag, else the engine's
default for this GPU, as the engine itself computes it), so that the command does not depend on a
default that moves between releases; the CUDA-graph limit, piecewise prefill graphs, the overlap
scheduler, the KV-cache dtype, the scheduler options, the speculative method with its draft length;
and the checkpoint: the model's own Hugging Face id for its own weights; for FP8 weights of a BF16
checkpoint, the publisher's own release where servesim knows one (Qwen's ``-FP8`` block-FP8,
NVIDIA's ``-NVFP4``), else the engine's online quantization where it has one (per-tensor FP8, what
servesim prices for a dense FP8 model); where no engine flag makes the weights a
``${CHECKPOINT:?...}`` line stops the script and says what to supply, as ``${DRAFT_MODEL:?...}``
does for a drafter servesim has no id for.  Quantized weights the plan chose change the outputs:
the notes say so.

Which flag, options-file key or environment variable carries each setting, with any translation of
its value, is data: ``data/engine_launch.toml``, one entry per engine (its port, its Dynamo runtime,
its ``settings`` in the order written) and per benchmark client; one writer (:func:`_write`) reads it
here and one reader reads it back (:mod:`servesim.plan.launch_parse`).  An engine without an entry
there has no launch (a :class:`~servesim._checks.ParameterError` that names it).

What no engine flag carries (servesim's model name, the GPU, the acceptance, the pools' worker
counts, the link) is written on the script's first line, ``# servesim predict ...``, so that
:mod:`servesim.plan.launch_parse` reads the scripts back into the same deployment.

:func:`benchmark_command` writes the client run as predicted, with the same lengths, range ratio,
prompts, warm-ups, rate or concurrency and seed.  A disaggregated deployment also gets a Dynamo
``DynamoGraphDeployment`` manifest and, for the engines llm-d serves, an llm-d values file
(:func:`deploy_disaggregated`).

Every emitted flag is one of the engine's own (``data/engine_flags.toml``, extracted from the
engines' sources with their provenance; :func:`unknown_flags` checks a script against them).

Nothing here prints.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from servesim._catalogfile import read_toml
from servesim._checks import InputError, ParameterError
from servesim.hardware.engines import display_name, engine_profile
from servesim.hardware.model_config import _ALIASES
from servesim.hardware.moe_step import Parallelism
from servesim.hardware.names import _catalog, canonical_gpu, canonical_model, resolve_gpu
from servesim.hardware.pricer import Deployment, model_architecture, moe_dtype
from servesim.model.kvcache import LINKS
from servesim.plan.confirm import row_deployments
from servesim.plan.launch_script import launch_data, read_yaml, split_script
from servesim.sim.batching import Benchmark

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog
    from servesim.hardware.engines import EngineProfile
    from servesim.plan.search import PlanQuestion

__all__ = [
    "Launch",
    "benchmark_command",
    "deploy_colocated",
    "deploy_disaggregated",
    "engine_command",
    "engine_launch",
    "flag_lists",
    "flag_profile",
    "options_file",
    "program",
    "row_deploy",
    "unknown_flags",
]

_DATA = Path(__file__).parent / "data" / "engine_flags.toml"

HEADS = {
    "eagle3": "an EAGLE-3 head",
    "eagle": "an EAGLE head",
    "medusa": "Medusa heads",
    "draft": "a draft model",
    "small-draft": "a draft model",
}
"""What a method's drafter is, where the engine needs its weights."""


@cache
def flag_lists() -> dict[str, Any]:
    """The engines' and clients' flag lists with their provenance (``data/engine_flags.toml``)."""
    return read_toml(_DATA)


def engine_launch(engine: str) -> dict[str, Any]:
    """Engine ``engine``'s entry of ``data/engine_launch.toml``; a ParameterError that names it where
    it has none."""
    table = launch_data()["engine"]
    if engine not in table:
        valid = f"one of {', '.join(table)} (an engine with a launch entry in data/engine_launch.toml)"
        raise ParameterError("engine", engine, valid)
    return dict(table[engine])


def program(name: str) -> str:
    """The command that starts engine ``name`` (or client ``client.NAME``): its first ``commands``."""
    if name.startswith("client."):
        return " ".join(launch_data()["client"][name.split(".", 1)[1]]["commands"][0])
    return " ".join(engine_launch(name)["commands"][0])


def options_file(engine: str) -> str | None:
    """The options file ``engine``'s launch writes by a here-document (None: it reads flags only)."""
    name = launch_data()["engine"].get(engine, {}).get("options_file")
    return None if name is None else str(name)


def _flag_table(program: str) -> dict[str, Any]:
    """``program``'s table of data/engine_flags.toml (an engine, or ``client.NAME``), following a
    client's ``flags = "client.OTHER"`` to that client's list."""
    data = flag_lists()
    if not program.startswith("client."):
        return dict(data[program])
    table = data["client"][program.split(".", 1)[1]]
    if isinstance(table["flags"], str):  # another client's list (InferenceMAX runs vLLM's client)
        table = {**data["client"][table["flags"].split(".", 1)[1]], "program": table["program"]}
    return dict(table)


def _known(program: str) -> tuple[set[str], set[str]]:
    """(flags, negatable flags) of ``program``'s own list: an engine or a client of the data file."""
    table = _flag_table(program)
    if "fields" in table:  # a dataclass's fields, each the flag --FIELD with '_' as '-'
        flags = {"--" + f.replace("_", "-") for f in table["fields"]} | set(table["aliases"])
        flags |= set(table.get("manual", ()))
    else:
        flags = set(table["flags"])
    return flags, set(table.get("negatable", ()))


@dataclass(frozen=True)
class Launch:
    """What starts and measures one deployment: each pool's script (``""`` for a colocated replica),
    the benchmark command, the files they need or come with, and notes on what the commands cannot
    say."""

    engine_commands: dict[str, str]
    benchmark_command: str
    files: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """``{"engine_command": ...}`` (colocated) or ``{"engine_commands": {"prefill", "decode"}}``,
        with ``benchmark_command``, ``files`` and ``notes``."""
        cmds = self.engine_commands
        out: dict[str, Any] = {"engine_command": cmds[""]} if "" in cmds else {"engine_commands": dict(cmds)}
        programs = [split_script(c).program for c in (*self.engine_commands.values(), self.benchmark_command)]
        out.update(benchmark_command=self.benchmark_command, files=dict(self.files), notes=list(self.notes),
                   flags_checked_against=_sources(programs))
        return out


def _sources(programs: list[str]) -> dict[str, str]:
    """Where each program's flag list comes from (repository, file, commit; data/engine_flags.toml)."""
    out = {}
    for prog in dict.fromkeys(programs):
        t = _flag_table(prog)
        out[str(t["program"])] = f"{t['repo']} {t['path']} at {t['commit']} ({t['version']}; {t['license']})"
    return out


# ------------------------------------------------------------------------------ the deployment


def flag_profile(dep: Deployment, catalog: Catalog | None = None) -> EngineProfile:
    """The engine profile at the level of the engine's flags: one server of ``dep`` as its flags
    are read, before attention-DP ranks share them out (``dp=1`` with the whole replica's GPUs as
    its parallelism), so that its budget, running limit and memory share are the values to pass."""
    memory_gib = resolve_gpu(dep.gpu, catalog).memory_bytes / 2**30
    return engine_profile(
        dep.engine, gpu=canonical_gpu(dep.gpu, catalog), memory_gib=memory_gib,
        max_num_batched_tokens=dep.max_num_batched_tokens, max_num_seqs=dep.max_num_seqs,
        scheduler=dict(dep.scheduler), overlap=dep.overlap, tp=dep.tp * dep.dp, dp=1,
        memory_fraction=dep.memory_fraction, cuda_graph_max_tokens=dep.cuda_graph_max_tokens,
        speculating=dep.speculating, piecewise_cuda_graphs=dep.piecewise_cuda_graphs,
    )


def _checkpoint(dep: Deployment, catalog: Catalog | None = None) -> tuple[str, str]:
    """(the checkpoint's id or path, a note): the model's own Hugging Face id (a catalog name's first
    ``hf_ids``; a config.json's folder)."""
    model = dep.model
    path = Path(model).expanduser()
    if model.endswith(".json") or path.exists():
        folder = path.parent if path.suffix == ".json" else path
        return str(folder), f"checkpoint: the folder of {model} (its weights must sit beside the config)"
    if "/" in model:
        return model, ""
    try:
        ids = _catalog(catalog).model_extras.get(canonical_model(model, catalog), {}).get("hf_ids", ())
    except (InputError, ParameterError):  # an architecture's own name (the MoE catalog): its id
        ids = ()
    arch = model_architecture(model) if not ids else None
    if arch is not None and arch.hf_id and arch.hf_id != model:  # the MoE catalog's own name
        return str(arch.hf_id), f"checkpoint: {arch.hf_id} (the Hugging Face id of servesim's {model})"
    if not ids:
        return model, ""
    return str(ids[0]), f"checkpoint: {ids[0]} (the first Hugging Face id of servesim's {model})"


def _own_dtype(dep: Deployment) -> str:
    """The weights' format of the model's own checkpoint (``bf16`` for a dense model)."""
    arch = model_architecture(dep.model)
    return str(arch.checkpoint_dtype) if arch is not None else "bf16"


@cache
def _releases() -> frozenset[str]:
    """Checkpoint ids servesim knows to be published: its shipped configs' and its aliases'."""
    folder = Path(__file__).resolve().parents[1] / "data" / "model_configs"
    shipped = {p.name[: -len("_config.json")].replace("--", "/", 1) for p in folder.glob("*_config.json")}
    return frozenset(shipped | set(_ALIASES))


def _release(dep: Deployment, resolved: str) -> str | None:
    """The publisher's own release of ``dep.model`` in the weights ``resolved`` names, where servesim
    knows one (Qwen's ``-FP8`` block-FP8 releases, NVIDIA's ``nvidia/...-NVFP4``)."""
    base = dep.model.rsplit("/", 1)[-1]
    candidates = {"fp8_block": [f"{dep.model}-FP8"], "fp4": [f"nvidia/{base}-NVFP4"]}.get(resolved, [])
    known = _releases()
    return next((c for c in candidates if c in known), None)


def _weights(
    dep: Deployment, catalog: Catalog | None = None
) -> tuple[str | None, str | None, str | None, str]:
    """How the engine gets the weights ``dep.dtype`` names: (its ``quantization`` value or None, the
    checkpoint to load in place of the model's own or None, a ``CHECKPOINT`` the user must supply
    (its description) or None, a note).  An engine whose entry has no ``quantization`` makes no
    weights at load."""
    dtype = dep.dtype
    if dtype in ("auto", "bf16"):
        return None, None, None, ""
    table = engine_launch(dep.engine)
    arch = model_architecture(dep.model)
    own = _own_dtype(dep)
    par = Parallelism(dep.tp, dep.dp, dep.ep)  # as the pricer resolves it (block FP8 where it splits)
    resolved = moe_dtype(dtype, arch, canonical_gpu(dep.gpu, catalog), par) if arch is not None else dtype
    makes = table.get("quantization")
    quant = None if makes is None else makes.get(resolved)
    if resolved == own or (dtype == "fp8" and own in ("fp8", "fp8_block")):
        return quant, None, None, ""
    release = _release(dep, resolved)
    if release is not None:
        return quant, release, None, (
            f"checkpoint: {release}, the publisher's {resolved} release of {dep.model} (the weights "
            "servesim priced); its quality differs from the original's: check it on your own tasks")
    if dtype == "fp8" and makes is not None and resolved == "fp8":
        return quant, None, None, (
            f"--quantization fp8 quantizes the {own} checkpoint's weights to FP8 at load (per tensor, "
            "what servesim prices); a published FP8 checkpoint of the model (ModelOpt, llm-compressor) "
            "loads faster and may differ in quality: pass its id instead")
    what = {"fp8": "an FP8", "fp4": "an NVFP4", "int4": "an INT4 (weight-only)"}.get(dtype, f"a {dtype}")
    if resolved == "fp8_block":
        what = "a block-FP8 (128 x 128)"
    why = table.get("no_quantization") or (
        f"{dep.engine} does not make {resolved} weights of a {own} checkpoint at load"
    )
    return None, None, f"{what} checkpoint of {dep.model}", (
        f"{why}: servesim names no {resolved} checkpoint of {dep.model}; set CHECKPOINT to one (e.g. a "
        "ModelOpt release) before running the script")


def _served(dep: Deployment, catalog: Catalog | None = None) -> tuple[str, str]:
    """(the checkpoint the engine loads, shell-quoted or ``"$CHECKPOINT"``; its note)."""
    ckpt, note = _checkpoint(dep, catalog)
    _, release, supply, _ = _weights(dep, catalog)
    if supply is not None:
        return _Raw('"$CHECKPOINT"'), note
    return (release or ckpt), ("" if release else note)


@dataclass
class _Script:
    """A launch script being written: its comment, variables, environment and arguments."""

    servesim: list[str]
    checks: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    program: str = ""
    positional: str = ""
    args: list[tuple[str, str | None]] = field(default_factory=list)
    yaml: dict[str, Any] = field(default_factory=dict)
    options_file: str = ""
    notes: list[str] = field(default_factory=list)

    def flag(self, name: str, value: object = None) -> None:
        self.args.append(
            (name, None if value is None else value if isinstance(value, _Raw) else _text(value))
        )

    def text(self) -> str:
        lines = ["# servesim predict " + " ".join(shlex.quote(a) for a in self.servesim)]
        lines += self.checks
        if self.yaml:
            lines += [f"cat > {self.options_file} <<EOF", _yaml(self.yaml).rstrip("\n"), "EOF"]
        head = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        first = " ".join(p for p in (head, self.program, self.positional) if p)
        lines.append(_command(first, self.args))
        return "\n".join(lines) + "\n"


def _command(first: str, args: list[tuple[str, str | None]]) -> str:
    """A command and its arguments, one a line (``  --flag value``, values shell-quoted)."""
    parts = [first] + [f"  {n}" + ("" if v is None else f" {_quote(v)}") for n, v in args]
    return " \\\n".join(parts)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


class _Raw(str):
    """An argument already quoted for the shell (a JSON value in quotes, a ``"$VARIABLE"``)."""


def _quote(value: str) -> str:
    return str(value) if isinstance(value, _Raw) else shlex.quote(value)


def engine_command(
    dep: Deployment,
    *,
    spec: str | None = None,
    k: int | None = None,
    tree: tuple[int, int, int] | None = None,
    draft: str | None = None,
    servesim: tuple[str, ...] = (),
    pool: str = "",
    catalog: Catalog | None = None,
) -> tuple[str, list[str]]:
    """The launch script of ``dep`` (one server; ``pool`` "prefill" or "decode" for a disaggregated
    deployment's worker) running speculation ``spec`` at draft length ``k`` (or SGLang's ``tree``)
    with drafter ``draft``, and its notes.  ``servesim`` adds flags to the first line's ``servesim
    predict`` (what no engine flag carries)."""
    table = engine_launch(dep.engine)
    eng = flag_profile(dep, catalog)
    ckpt, ckpt_note = _served(dep, catalog)
    quant, _, supply, weights_note = _weights(dep, catalog)
    s = _Script(servesim=["--model", dep.model, "--gpu", canonical_gpu(dep.gpu, catalog), *servesim])
    s.program, s.options_file = program(dep.engine), table.get("options_file", "")
    if spec not in (None, "none") and "--spec" not in s.servesim:  # engines' names are not one to one
        s.servesim += ["--spec", str(spec)]
    if supply is not None:
        s.checks.append(f': "${{CHECKPOINT:?set CHECKPOINT to {supply}}}"')
        s.servesim += ["--dtype", dep.dtype]
        ckpt = _Raw('"$CHECKPOINT"')
    elif "quantization" not in table and dep.dtype not in ("auto", "bf16"):
        s.servesim += ["--dtype", dep.dtype]  # its checkpoint carries the format: no flag says it
    s.notes += [n for n in (ckpt_note, weights_note) if n]
    head = _drafter(s, spec, draft, dep)
    _write(s, table, _values(dep, eng, table, ckpt, quant, spec, k, tree, head, pool))
    bad = unknown_flags(s.text())
    if bad:  # pragma: no cover - the test of every emitted flag keeps this empty
        raise AssertionError(f"{dep.engine} has no flag {', '.join(bad)} (data/engine_flags.toml)")
    return s.text(), s.notes


def _drafter(s: _Script, spec: str | None, draft: str | None, dep: Deployment) -> str | None:
    """The drafter's weights an engine loads for ``spec`` (a quoted ``$DRAFT_MODEL`` the user sets
    where servesim has no id), or None for a method without separate weights."""
    if spec in (None, "none") or spec not in HEADS:
        return None
    if draft is not None and not draft.endswith(".json"):
        s.servesim += ["--draft", draft]
        return draft
    if draft is not None:
        s.servesim += ["--draft", draft]
    s.checks.append(f': "${{DRAFT_MODEL:?set DRAFT_MODEL to {HEADS[spec]} trained for {dep.model}}}"')
    s.notes.append(
        f"speculation {spec}: servesim prices {HEADS[spec]} of the shape it derives for "
        f"{dep.model} but names no checkpoint; set DRAFT_MODEL to one"
    )
    return _Raw('"$DRAFT_MODEL"')


def _overlap(dep: Deployment, eng: EngineProfile, spec: str | None) -> bool | None:
    """The overlap (async) scheduler the run priced: the deployment's own setting, else the engine's
    default with the method's rule (engines.toml spec_overlap_methods); None where unset."""
    if dep.overlap is not None:
        return dep.overlap
    if spec in (None, "none"):
        return bool(eng.overlap)
    return bool(eng.overlaps_speculation(spec))


def _values(
    dep: Deployment, eng: EngineProfile, table: Mapping[str, Any], ckpt: str, quant: str | None,
    spec: str | None, k: int | None, tree: tuple[int, int, int] | None, head: str | None, pool: str,
) -> dict[str, object]:
    """Every setting the prediction assumed, by the names ``data/engine_launch.toml`` gives them (see
    its header); None where unset."""
    spec = None if spec in (None, "none") else spec
    steps, topk, tokens = tree if tree is not None else (k, 1, (k or 0) + 1)
    draft = table.get("draft_variable", head) if isinstance(head, _Raw) else head
    return {
        "checkpoint": ckpt, "tp": dep.tp, "dp": dep.dp, "ep": dep.ep, "world": dep.tp * dep.dp,
        "attention_dp": True if dep.dp > 1 else None, "expert_parallel": True if dep.ep > 1 else None,
        "ep_comm": dep.ep_comm or eng.ep_comm, "dtype": dep.dtype, "quantization": quant,
        "kv_dtype": dep.kv_dtype, "max_num_batched_tokens": eng.max_num_batched_tokens,
        "max_num_seqs": eng.max_num_seqs, "memory_fraction": eng.memory_fraction,
        "cuda_graph_max_tokens": dep.cuda_graph_max_tokens,
        "piecewise_cuda_graphs": dep.piecewise_cuda_graphs,
        "overlap": dep.overlap, "overlap_run": _overlap(dep, eng, spec), "moe_backend": dep.moe_backend,
        "moe_activations": dep.moe_activations, "gemm_backend": dep.gemm_backend,
        **{f"scheduler.{name}": value for name, value in dep.scheduler},
        "spec": spec, "method": table.get("speculation", {}).get(spec) if spec else None, "k": k,
        "draft": head, "draft_in_file": draft, "tree": tree, "tree_steps": steps, "tree_topk": topk,
        "tree_tokens": tokens, "pool": pool or None, "options_file": table.get("options_file"),
    }


_CONDITION = re.compile(r"(\w+)(?:(>|!=|==)([\w.-]+))?")


def _holds(condition: str, values: Mapping[str, object]) -> bool:
    """A ``when`` condition of data/engine_launch.toml: ``NAME`` (set: not None, not False),
    ``NAME>N``, ``NAME!=OTHER`` or ``NAME==WORD`` (OTHER a setting's name, else a number or a word)."""
    m = _CONDITION.fullmatch(condition)
    if m is None:  # pragma: no cover - the data file's test reads every condition
        raise ValueError(f"data/engine_launch.toml: cannot read the condition {condition!r}")
    name, op, rhs = m.groups()
    value = values.get(name)
    if op is None:
        return value is not None and value is not False
    other: object = values[rhs] if rhs in values else int(rhs) if rhs.isdigit() else rhs
    if op == ">":
        return value is not None and float(str(value)) > float(str(other))
    return (value != other) if op == "!=" else (value == other)


def _key(value: object) -> str:
    """A value as a key of a ``map`` (TOML keys are text: booleans as true and false)."""
    return _text(value)


def _setting(entry: Mapping[str, Any], values: Mapping[str, object]) -> object:
    """The value an entry writes: its constant, else the setting translated (None: nothing)."""
    if "const" in entry:
        return entry["const"]
    value = values.get(entry["value"])
    if value is None:
        return None
    if "map" in entry:
        value = entry["map"].get(_key(value), entry.get("otherwise"))
    if value is None:
        return None
    if entry.get("negate"):
        value = not value
    if entry.get("upper"):
        value = str(value).upper()
    if entry.get("type") == "int":
        value = int(str(value)) if not isinstance(value, (int, float)) else int(value)
    return value


def _write(s: _Script, table: Mapping[str, Any], values: Mapping[str, object]) -> None:
    """Each entry of ``table["settings"]`` whose conditions hold, in order, into ``s``: its flags,
    positional argument, options-file keys, JSON-valued flags, environment and notes."""
    docs: dict[str, dict[str, object]] = {}
    quotes: dict[str, str] = {}
    missing = values.get("spec") is not None and values.get("method") is None
    for entry in table["settings"]:
        if not all(_holds(c, values) for c in entry.get("when", ())):
            continue
        if "no_method" in entry:
            if missing:
                _no_method(s, values, entry["no_method"])
                missing = False
            continue
        if "note" in entry:
            s.notes.append(entry["note"].format(**values))
            continue
        if "switch" in entry:
            on = entry["const"] if "const" in entry else values.get(entry["value"])
            if (on is not None and on is not False) if entry["switch"] else on is False:
                s.flag(entry["flag"])
            continue
        value = _setting(entry, values)
        if value is None:
            continue
        if entry.get("value") == "draft" and ("yaml" in entry or "json" in entry):
            value = values["draft_in_file"]  # the drafter's variable as the engine reads it in a file
        if entry.get("positional"):
            s.positional = str(value)
        elif "flag" in entry:
            s.flag(entry["flag"], value)
        elif "env" in entry:
            s.env[entry["env"]] = str(value)
        elif "yaml" in entry:
            *parents, key = entry["yaml"].split(".")
            node = s.yaml
            for p in parents:
                node = node.setdefault(p, {})
            node[key] = value
        else:
            flag, key = entry["json"].split(".", 1)
            if flag not in docs:
                docs[flag] = {}
                s.args.append((flag, flag))  # its place: the JSON is written below
            docs[flag][key] = value
            quotes[flag] = entry.get("quote", quotes.get(flag, "single"))
    if missing:  # an engine whose entry says nothing of the methods it lacks
        _no_method(s, values, "the engine has no name for it (data/engine_launch.toml)")
    for i, (name, value) in enumerate(s.args):
        if name in docs and value == name:
            body = json.dumps(docs[name], separators=(",", ":"))
            quoted = '"' + body.replace('"', '\\"') + '"' if quotes[name] == "double" else shlex.quote(body)
            s.args[i] = (name, _Raw(quoted))


def _no_method(s: _Script, values: Mapping[str, object], why: str) -> None:
    """The engine cannot run the method: no speculation flag, the draft length on the first line,
    a note."""
    s.notes.append(f"speculation {values['spec']}: {why}; the command starts the engine without it")
    if values.get("k") is not None:
        s.servesim += ["--k", str(values["k"])]


# ------------------------------------------------------------------------------ the benchmark


def benchmark_command(bench: Benchmark, dep: Deployment, *, replicas: int = 1,
                      catalog: Catalog | None = None) -> str:
    """The client's command that measures ``bench`` against ``dep``'s server (one of ``replicas``
    replicas: the rate is that replica's share), as the prediction ran it."""
    client = bench.client
    name = client.name
    table = launch_data()["client"][name]
    extra = ["--warmup-prompts", str(bench.warmup)] if bench.warmup else []
    if table.get("warm_server") and client.warm_server:
        extra.append("--warm-server")
    lines = [" ".join([f"# servesim predict --client {name}", *extra])]
    if replicas > 1:
        lines.append(f"# one of {replicas} replicas: its share of the load")
    if bench.warmup:
        lines.append(f"# servesim leaves the first {bench.warmup} requests out of its figures (a warm-up the "
                     "client does not know): compare the rest of the saved per-request times")
    s = _Script(servesim=[])
    _write(s, table, _bench_values(bench, dep, table, catalog))
    lines.append(_command(program(f"client.{name}"), s.args))
    return "\n".join(lines) + "\n"


def _bench_values(bench: Benchmark, dep: Deployment, table: Mapping[str, Any],
                  catalog: Catalog | None = None) -> dict[str, object]:
    """The benchmark's values by the names the clients' entries of data/engine_launch.toml give them."""
    client, rate = bench.client, bench.rate_per_s
    return {
        "backend": table.get("backends", {}).get(dep.engine, table["backend"]),
        "port": engine_launch(dep.engine)["port"], "model": _served(dep, catalog)[0], "isl": bench.isl,
        "osl": bench.osl, "ratio": float(client.ratio), "prompts": bench.prompts,
        "rate": "inf" if rate is None else float(rate), "concurrency": bench.concurrency,
        "warmups": bench.warmups, "seed": bench.seed, "burstiness": float(client.burstiness),
        "warmup": bench.warmup,
    }


# ------------------------------------------------------------------------------ whole deployments


TREE_FLAGS = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
"""The first line's flags of an SGLang draft tree (steps, top-k, draft tokens): a tree was asked for."""

ACCEPTANCE_FLAGS = (
    ("--acceptance-length", "acceptance_length"), ("--alpha", "alpha"), ("--traffic", "traffic"),
)
"""The first line's flags of the acceptance the prediction assumed, and their keyword arguments."""


class _SpecOptions(TypedDict, total=False):
    """Speculation as the prediction ran it (each absent key None): the method ``spec`` at draft
    length ``k`` (or SGLang's ``tree``), the drafter ``draft``, and the acceptance the prediction
    assumed (``alpha``, ``acceptance_length`` or the ``traffic`` preset)."""

    spec: str | None
    k: int | None
    tree: tuple[int, int, int] | None
    draft: str | None
    alpha: float | None
    acceptance_length: float | None
    traffic: str | None


def _speculation(sp: _SpecOptions) -> list[str]:
    """The servesim flags of a speculative run's method, SGLang tree and acceptance (no engine flag
    holds the acceptance; the tree's flags say that a tree, not a chain, was asked for)."""
    spec, tree = sp.get("spec"), sp.get("tree")
    if spec in (None, "none"):
        return []
    out = ["--spec", str(spec)]
    if tree is not None:
        out += [t for flag, n in zip(TREE_FLAGS, tree, strict=True) for t in (flag, str(n))]
    for flag, name in ACCEPTANCE_FLAGS:
        value = sp.get(name)
        if value is not None:
            out += [flag, repr(value) if isinstance(value, float) else str(value)]
    return out


def deploy_colocated(
    dep: Deployment,
    bench: Benchmark,
    *,
    replicas: int = 1,
    catalog: Catalog | None = None,
    **sp: Unpack[_SpecOptions],
) -> Launch:
    """The launch and benchmark of one colocated replica (of ``replicas``) as predicted, with
    speculation ``sp`` (:class:`_SpecOptions`; ``k`` is the draft length the prediction ran)."""
    spec = sp.get("spec")
    cmd, notes = engine_command(
        dep, spec=spec, k=sp.get("k"), tree=sp.get("tree"), draft=sp.get("draft"),
        servesim=tuple(_speculation(sp)), catalog=catalog,
    )
    if replicas > 1:  # a comment under the first line: servesim predicts one replica
        first, rest = cmd.split("\n", 1)
        cmd = f"{first}\n# one of {replicas} replicas, each on its own GPUs behind a load balancer\n{rest}"
    files = {
        "launch.sh": cmd,
        "benchmark.sh": benchmark_command(bench, dep, replicas=replicas, catalog=catalog),
    }
    options = options_file(dep.engine)
    if options and options in cmd:
        files[options] = _heredoc(cmd)
    notes = [*notes, *_spec_notes(spec)]
    if replicas > 1:
        notes.append(
            f"{replicas} replicas, each started by launch.sh on its own GPUs behind a load balancer; "
            "benchmark.sh measures one at its share of the rate"
        )
    return Launch({"": cmd}, files["benchmark.sh"], files, tuple(notes))


def _spec_notes(spec: str | None) -> list[str]:
    if spec in (None, "none"):
        return []
    return [
        "the acceptance on the first line (servesim's --acceptance-length/--traffic) is what the "
        "prediction assumed; the engine measures its own (vLLM's spec-decode metrics, SGLang's accept "
        "length)"
    ]


def _heredoc(cmd: str) -> str:
    """The here-document's body of a launch script (an engine's options file)."""
    lines = cmd.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("cat > "))
    end = lines.index("EOF", start + 1)
    return "\n".join(lines[start + 1 : end]) + "\n"


def _link_text(link_bytes_per_s: float) -> str:
    for name, ln in LINKS.items():
        if ln.bytes_per_s == link_bytes_per_s:
            return name
    return repr(link_bytes_per_s / 1e9)


def deploy_disaggregated(
    prefill: Deployment,
    prefill_workers: int,
    decode: Deployment,
    decode_workers: int,
    link_bytes_per_s: float,
    bench: Benchmark,
    *,
    catalog: Catalog | None = None,
    **sp: Unpack[_SpecOptions],
) -> Launch:
    """Each pool's worker launch (the decode pool's with speculation ``sp``, :class:`_SpecOptions`),
    the benchmark of the whole deployment through its front end, a Dynamo
    ``DynamoGraphDeployment`` and, for an engine llm-d serves (an ``llmd`` table in its entry), an
    llm-d values file."""
    spec = sp.get("spec")
    common = ("--mode", "disagg", "--prefill-workers", str(prefill_workers),
              "--decode-workers", str(decode_workers), "--link", _link_text(link_bytes_per_s))
    sv = tuple(_speculation(sp))
    pcmd, pnotes = engine_command(prefill, servesim=common, pool="prefill", catalog=catalog)
    dcmd, dnotes = engine_command(
        decode, spec=spec, k=sp.get("k"), tree=sp.get("tree"), draft=sp.get("draft"),
        servesim=common + sv, pool="decode", catalog=catalog,
    )
    bcmd = benchmark_command(bench, decode, catalog=catalog)
    dynamo, dynamo_files = _dynamo(prefill, prefill_workers, pcmd, decode, decode_workers, dcmd)
    files = {"prefill.sh": pcmd, "decode.sh": dcmd, "benchmark.sh": bcmd, "dynamo.yaml": dynamo}
    files.update(dynamo_files)
    notes = [
        *dict.fromkeys([*pnotes, *dnotes]),
        *_spec_notes(spec),
        f"{prefill_workers} prefill and {decode_workers} decode workers, KV moved over "
        f"{_link_text(link_bytes_per_s)} ({link_bytes_per_s / 1e9:g} GB/s) as predicted; benchmark.sh "
        "measures the whole deployment through its front end (Dynamo's or llm-d's)",
    ]
    if prefill.dtype != decode.dtype:
        notes.append(f"the pools differ in weights: prefill {prefill.dtype}, decode {decode.dtype}")
    if "llmd" in engine_launch(decode.engine):
        files["llm-d-values.yaml"] = _llmd(prefill, prefill_workers, pcmd, decode, decode_workers, dcmd)
    else:
        served = [display_name(e) for e, t in launch_data()["engine"].items() if "llmd" in t]
        notes.append(
            f"llm-d serves {' and '.join(served)} only: no llm-d values file for a {decode.engine} deployment"
        )
    return Launch({"prefill": pcmd, "decode": dcmd}, bcmd, files, tuple(notes))


def _args_of(cmd: str) -> tuple[str, list[str], dict[str, str]]:
    """(the checkpoint, the engine's arguments, its environment) of one launch script."""
    script = split_script(cmd)
    return script.positional or "", script.args, script.env


def _llm_api_options(cmd: str, table: Mapping[str, Any]) -> dict[str, Any]:
    """A launch script's settings as the engine's options file (what Dynamo's worker reads in place
    of the command line): its options file with the command line's flags as the keys they set
    (``table["dynamo"]["options_from_flags"]``, in that order; a flag without a value sets true)."""
    script = split_script(cmd)
    o = script.options()
    out: dict[str, Any] = {}
    for flag, key in table["dynamo"]["options_from_flags"]:
        if flag in o:
            out[key] = True if o[flag] is None else int(str(o[flag]))
    return {**out, **read_yaml(script.files.get(table.get("options_file", ""), ""))}


def _dynamo(
    prefill: Deployment, wp: int, pcmd: str, decode: Deployment, wd: int, dcmd: str
) -> tuple[str, dict[str, str]]:
    """A ``DynamoGraphDeployment`` (nvidia.com/v1alpha1, after data/engine_launch.toml [dynamo]
    ``example``) with a front end and the two pools, each worker running Dynamo's engine module with
    the pool's settings (the engine entry's ``dynamo.args``: its own flags, or an options file per
    pool returned beside it), and those files."""
    engine = decode.engine
    table = engine_launch(engine)
    dynamo = launch_data()["dynamo"]
    ns, image = dynamo["namespace"], dynamo["image"].format(runtime=table["dynamo_runtime"])
    front = {"dynamoNamespace": ns, "componentType": "frontend", "replicas": 1,
             "extraPodSpec": {"mainContainer": {"image": image}}}
    services: dict[str, Any] = {"Frontend": front}
    files: dict[str, str] = {}
    for pool, dep, workers, cmd in (("prefill", prefill, wp, pcmd), ("decode", decode, wd, dcmd)):
        ckpt, own, env = _args_of(cmd)
        fill = {"checkpoint": ckpt, "pool": pool}
        if "options_file" in table["dynamo"]:
            fill["options_file"] = table["dynamo"]["options_file"].format(pool=pool)
            files[fill["options_file"]] = _yaml(_llm_api_options(cmd, table))
        args: list[str] = []
        for arg in table["dynamo"]["args"]:
            args += own if arg == "{args}" else [arg.format(**fill)]
        if pool == "prefill":
            args += table["dynamo"].get("prefill_args", [])
        container: dict[str, Any] = {"image": image, "command": ["python3", "-m", f"dynamo.{engine}"]}
        container["args"] = args
        if env:
            container["env"] = [{"name": k, "value": v} for k, v in sorted(env.items())]
        services[f"{engine.capitalize()}{pool.capitalize()}Worker"] = {
            "dynamoNamespace": ns,
            "envFromSecret": "hf-token-secret",
            "componentType": "worker",
            "subComponentType": pool,
            "replicas": workers,
            "resources": {"limits": {"gpu": str(dep.tp * dep.dp)}},
            "extraPodSpec": {"mainContainer": container},
        }
    doc = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": ns},
           "spec": {"services": services}}
    head = (
        f"# servesim: the predicted pools as a Dynamo DynamoGraphDeployment (after {dynamo['example']});\n"
        "# the image is that example's release: use your Dynamo release's, and check its workers' flags\n"
    )
    if files:
        head += "# mount " + " and ".join(sorted(files)) + " at /config in the workers (a ConfigMap)\n"
    return head + _yaml(doc), files


def _llmd(prefill: Deployment, wp: int, pcmd: str, decode: Deployment, wd: int, dcmd: str) -> str:
    """An llm-d ``modelservice`` Helm values file (after data/engine_launch.toml [llmd] ``example``,
    with the engine entry's
    ``llmd`` container) with the two pools' replicas, GPUs and flags.  llm-d starts both pools on
    ``modelArtifacts.name``."""
    llmd, values = engine_launch(decode.engine)["llmd"], launch_data()["llmd"]
    ckpt, _, _ = _args_of(dcmd)
    doc: dict[str, Any] = {"multinode": False, "modelArtifacts": {"name": ckpt, "uri": f"hf://{ckpt}"},
                           "routing": values["routing"]}
    for pool, dep, workers, cmd in (("decode", decode, wd, dcmd), ("prefill", prefill, wp, pcmd)):
        _, args, env = _args_of(cmd)
        gpus = str(dep.tp * dep.dp)
        container: dict[str, Any] = {"name": llmd["container"], "image": llmd["image"],
                                     "modelCommand": llmd["model_command"], "args": args}
        if env:
            container["env"] = [{"name": k, "value": v} for k, v in sorted(env.items())]
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}}
        container["mountModelVolume"] = True
        doc[pool] = {"create": True, "replicas": workers, "containers": [container]}
    head = f"# servesim: the predicted pools as llm-d modelservice values (after {values['example']})\n"
    if _args_of(pcmd)[0] != ckpt:
        head += f"# llm-d starts both pools on {ckpt}: the prefill pool's {_args_of(pcmd)[0]} is not used\n"
    return head + _yaml(doc)


def _yaml(data: Mapping[str, object] | Sequence[object], indent: int = 0) -> str:
    """``data`` (dicts, lists, scalars) as block YAML, strings quoted as JSON: a manifest, or an
    engine's options file."""
    pad = " " * indent
    if isinstance(data, dict):
        out = []
        for key, value in data.items():
            if isinstance(value, (dict, list)) and value:
                out.append(f"{pad}{key}:\n" + _yaml(value, indent + 2))
            else:
                out.append(f"{pad}{key}: {_scalar(value)}\n")
        return "".join(out)
    out = []
    for item in data:
        if isinstance(item, dict):
            body = _yaml(item, indent + 2)
            out.append(f"{pad}- " + body[indent + 2 :])
        else:
            out.append(f"{pad}- {_scalar(item)}\n")
    return "".join(out)


def _scalar(value: object) -> str:
    if isinstance(value, (dict, list)):
        return "{}" if isinstance(value, dict) else "[]"
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return _text(value)
    return json.dumps(str(value))


# ------------------------------------------------------------------------------ plan rows


def row_deploy(row: dict[str, Any], q: PlanQuestion, gpu: str,
               catalog: Catalog | None = None) -> dict[str, Any]:
    """The launch and benchmark of a confirmed capacity-plan row (:mod:`servesim.plan.confirm`):
    the deployments :func:`~servesim.plan.confirm.row_deployments` builds, and the benchmark its
    confirmation ran at the row's (planned) rate, a colocated row's replica at its share, with the
    steady-state run's prompts and warm-up where the row records them (``steady_state``)."""
    pre, dec = row_deployments(row, q, gpu)
    spec = None if row["speculation"] == "none" else row["speculation"]
    k = getattr(q, "k", None) or (row.get("speculative_k") or None)
    acc = {} if spec is None else {name: getattr(q, name, None) for name in ("acceptance_length", "traffic")}
    rate = float(row.get("planned_rate_rps") or row["max_rate_rps"])
    steady = row.get("steady_state") or {}
    run: dict[str, Any] = {"num_prompts": steady.get("prompts"),
                           "warmup": int(steady.get("warmup_prompts") or 0)}
    if row["architecture"] == "colocated":
        n = int(row["prefill"]["workers"])
        bench = Benchmark(isl=q.isl, osl=q.osl, rate_per_s=rate / n, **run)
        out = deploy_colocated(dec, bench, spec=spec, k=k, replicas=n, catalog=catalog, **acc).as_dict()
    else:
        bench = Benchmark(isl=q.isl, osl=q.osl, rate_per_s=rate, **run)
        w = (int(row["prefill"]["workers"]), int(row["decode"]["workers"]))
        out = deploy_disaggregated(pre, w[0], dec, w[1], q.link_bytes_per_s, bench, spec=spec, k=k,
                                   catalog=catalog, **acc).as_dict()
    out["notes"] += _dtype_change(q, pre, dec)
    return out


def _dtype_change(q: PlanQuestion, *deps: Deployment) -> list[str]:
    """Where the plan chose weights other than the checkpoint's own without being asked (no
    ``--dtype``), a note that says so and what it may cost."""
    if getattr(q, "dtypes", ()):
        return []
    own = _own_dtype(deps[0])
    chosen = sorted({d.dtype for d in deps} - {"auto", own, "bf16" if own == "bf16" else own})
    if not chosen:
        return []
    return [
        f"the plan chose {' and '.join(chosen)} weights where the checkpoint's own are {own}: quantized "
        "weights change the model's outputs, so check the quality on your own tasks before serving "
        f"(plan --dtype {own} keeps the checkpoint's weights)"
    ]


# ------------------------------------------------------------------------------ checks


def unknown_flags(script: str) -> list[str]:
    """The flags (and options-file keys) of a launch or benchmark script that its program's own list
    (``data/engine_flags.toml``) lacks, in order; empty when every one is the engine's."""
    s = split_script(script)
    if not s.program:
        return []
    known, negatable = _known(s.program)
    bad = []
    for tok in s.tokens:
        if not tok.startswith("-"):
            continue
        flag = tok.split("=", 1)[0]
        if flag in known or (flag.startswith("--no-") and "--" + flag[5:] in negatable):
            continue
        bad.append(flag)
    table = _flag_table(s.program)
    if "llm_api" in table:  # the keys of the engine's options file
        keys = set(table["llm_api"]["keys"])
        text = s.files.get(options_file(s.program) or "", "")
        bad += [f"{k} (LLM-API option)" for k in _yaml_keys(text) if k not in keys]
    env_known = set(table.get("env", ()))
    bad += [f"{k} (environment)" for k in s.env if k not in env_known]
    return bad


def _yaml_keys(text: str) -> list[str]:
    """The dotted keys of a two-level block YAML as :func:`_yaml` writes it."""
    return [f"{k}.{sub}" if sub else k for k, v in read_yaml(text).items()
            for sub in ("", *(v if isinstance(v, dict) else ()))]
