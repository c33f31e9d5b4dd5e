"""The commands that start what a prediction assumed, and the command that measures it.

For one :class:`~servesim.hardware.pricer.Deployment` (a replica, or each pool of a disaggregated
deployment), :func:`engine_command` writes the engine's launch as a short shell script: ``vllm
serve``, ``python -m sglang.launch_server`` or ``trtllm-serve`` with its ``--extra_llm_api_options``
YAML written by a here-document, carrying every setting the prediction priced:

* parallelism: tensor parallel, attention data parallel and expert parallel (vLLM
  ``--tensor-parallel-size``/``--data-parallel-size``/``--enable-expert-parallel``; SGLang
  ``--tp-size`` (the whole replica) with ``--dp-size``/``--enable-dp-attention``/``--ep-size``;
  TensorRT-LLM ``--tp_size`` with ``enable_attention_dp`` and ``--ep_size``), and the experts'
  exchange where attention DP meets expert parallel (vLLM ``--all2all-backend``, SGLang
  ``--moe-a2a-backend``/``--deepep-mode``, TensorRT-LLM ``TRTLLM_FORCE_ALLTOALL_METHOD``);
* the step token budget, the running limit and the memory share, at the values the engine profile
  used (:func:`servesim.hardware.engines.engine_profile`: the user's flag, else the engine's default
  for this GPU, as the engine itself computes it), so the command does not depend on a default that
  moves between releases;
* the CUDA-graph limit and piecewise prefill graphs where the deployment sets them, the overlap
  scheduler where it is set (or, for vLLM, where the engine's default and the run's would differ),
  the KV-cache dtype, the speculative method with its draft length, and the scheduler options
  (SGLang ``--enable-mixed-chunk``, ``--max-prefill-tokens``, ``--scheduler-recv-interval``;
  TensorRT-LLM ``--enable_chunked_prefill``);
* the checkpoint: the model's own Hugging Face id for its own weights; for FP8 weights of a BF16
  checkpoint, the publisher's own release where servesim knows one (Qwen's ``-FP8`` block-FP8,
  NVIDIA's ``-NVFP4``), else vLLM's and SGLang's online ``--quantization fp8`` (per-tensor, what
  servesim prices for a dense FP8 model); where no engine flag makes the weights (TensorRT-LLM, FP4
  or INT4 of a BF16 checkpoint) a ``${CHECKPOINT:?...}`` line stops the script and says what to
  supply, as ``${DRAFT_MODEL:?...}`` does for an EAGLE head or draft model servesim has no id for.
  Quantized weights the plan chose change the outputs: the notes say so.

What no engine flag carries (servesim's model name, the GPU, the acceptance, the pools' worker
counts, the link) is written on the script's first line, ``# servesim predict ...``, so that
:mod:`servesim.plan.launch_parse` reads the scripts back into the same deployment.

:func:`benchmark_command` writes the client run as predicted: ``vllm bench serve``, ``python -m
sglang.bench_serving`` or InferenceMAX's vLLM ``benchmark_serving.py`` with the same lengths, range
ratio, prompts, warm-ups, rate or concurrency and seed.  A disaggregated deployment also gets a
Dynamo ``DynamoGraphDeployment`` manifest and (vLLM) an llm-d values file (:func:`deploy_disaggregated`).

Every emitted flag is one of the engine's own (``data/engine_flags.toml``, extracted from the
engines' sources with their provenance; :func:`unknown_flags` checks a script against them).

Nothing here prints.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from servesim._catalogfile import read_toml
from servesim.hardware.pricer import Deployment, model_architecture, moe_dtype
from servesim.plan.launch_script import read_yaml, split_script

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog
    from servesim.hardware.engines import EngineProfile
    from servesim.plan.search import PlanQuestion
    from servesim.sim.batching import Benchmark

__all__ = [
    "ENGINE_PROGRAMS",
    "Launch",
    "benchmark_command",
    "deploy_colocated",
    "deploy_disaggregated",
    "engine_command",
    "engine_flags",
    "flag_profile",
    "row_deploy",
    "unknown_flags",
]

_DATA = Path(__file__).parent / "data" / "engine_flags.toml"

ENGINE_PROGRAMS: dict[str, str] = {
    "vllm": "vllm serve",
    "sglang": "python -m sglang.launch_server",
    "trtllm": "trtllm-serve",
}
"""Each engine's server command."""

CLIENT_PROGRAMS: dict[str, str] = {
    "vllm": "vllm bench serve",
    "sglang": "python -m sglang.bench_serving",
    "inferencemax": "python3 benchmarks/benchmark_serving.py",
}
"""Each benchmark client's command (InferenceMAX runs vLLM's ``benchmark_serving.py``)."""

PORTS: dict[str, int] = {"vllm": 8000, "sglang": 30000, "trtllm": 8000}
"""Each server's default port (vLLM and trtllm-serve 8000, SGLang 30000)."""

TRTLLM_YAML = "extra_llm_api_options.yaml"
"""The name of TensorRT-LLM's LLM-API options file in a launch script."""

# vLLM --all2all-backend, SGLang --moe-a2a-backend/--deepep-mode and TensorRT-LLM's
# TRTLLM_FORCE_ALLTOALL_METHOD for each exchange (engines.toml ep_comm; hardware.engines.EP_COMMS)
VLLM_ALL2ALL = {
    "allgather": "allgather_reducescatter",
    "deepep": "deepep_low_latency",
    "deepep_normal": "deepep_high_throughput",
}
SGLANG_A2A = {
    "allgather": ("none", None),
    "deepep": ("deepep", "low_latency"),
    "deepep_normal": ("deepep", "normal"),
}
TRTLLM_ALLTOALL = {"deepep": "DeepEPLowLatency", "deepep_normal": "DeepEP"}

# speculative methods: vLLM speculative_config "method", SGLang --speculative-algorithm, TensorRT-LLM
# speculative_config decoding_type (None: the engine runs no such method)
VLLM_SPEC = {
    "eagle3": "eagle3",
    "eagle": "eagle",
    "mtp": "deepseek_mtp",
    "medusa": "medusa",
    "ngram": "ngram",
    "draft": "draft_model",
    "small-draft": "draft_model",
}
SGLANG_SPEC = {
    "eagle3": "EAGLE3",
    "eagle": "EAGLE",
    "mtp": "EAGLE",
    "ngram": "NGRAM",
    "draft": "STANDALONE",
    "small-draft": "STANDALONE",
}
TRTLLM_SPEC = {
    "eagle3": "Eagle",
    "eagle": "Eagle",
    "mtp": "MTP",
    "ngram": "NGram",
    "draft": "DraftTarget",
    "small-draft": "DraftTarget",
    "medusa": "Medusa",
}
HEADS = {
    "eagle3": "an EAGLE-3 head",
    "eagle": "an EAGLE head",
    "medusa": "Medusa heads",
    "draft": "a draft model",
    "small-draft": "a draft model",
}
"""What a method's drafter is, where the engine needs its weights."""


@cache
def engine_flags() -> dict[str, Any]:
    """The engines' and clients' flag lists with their provenance (``data/engine_flags.toml``)."""
    return read_toml(_DATA)


def _known(program: str) -> tuple[set[str], set[str]]:
    """(flags, negatable flags) of ``program``'s own list: an engine or a client of the data file."""
    data = engine_flags()
    if not program.startswith("client."):
        table = data[program]
        if program == "sglang":
            flags = {"--" + f.replace("_", "-") for f in table["fields"]} | set(table["aliases"])
            flags |= set(table.get("manual", ()))
        else:
            flags = set(table["flags"])
        return flags, set(table.get("negatable", ()))
    table = data["client"][program.split(".", 1)[1]]
    if isinstance(table["flags"], str):  # another client's list
        table = data["client"][table["flags"].split(".", 1)[1]]
    return set(table["flags"]), set()


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
        out: dict[str, Any] = (
            {"engine_command": self.engine_commands[""]}
            if "" in self.engine_commands
            else {"engine_commands": dict(self.engine_commands)}
        )
        out.update(
            {
                "benchmark_command": self.benchmark_command,
                "files": dict(self.files),
                "notes": list(self.notes),
                "flags_checked_against": _sources(
                    [
                        split_script(c).program
                        for c in (*self.engine_commands.values(), self.benchmark_command)
                    ]
                ),
            }
        )
        return out


def _sources(programs: list[str]) -> dict[str, str]:
    """Where each program's flag list comes from (repository, file, commit; data/engine_flags.toml)."""
    data = engine_flags()
    out = {}
    for prog in dict.fromkeys(programs):
        t = data["client"][prog.split(".", 1)[1]] if prog.startswith("client.") else data[prog]
        if t.get("repo", "").startswith("InferenceMAX"):
            t = {**data["client"]["vllm"], "program": t["program"]}
        out[str(t["program"])] = f"{t['repo']} {t['path']} at {t['commit']} ({t['version']}; {t['license']})"
    return out


# ------------------------------------------------------------------------------ the deployment


def flag_profile(dep: Deployment, catalog: Catalog | None = None) -> EngineProfile:
    """The engine profile at the level of the engine's flags: one server of ``dep`` as its flags
    are read, before attention-DP ranks share them out (``dp=1`` with the whole replica's GPUs as
    its parallelism), so that its budget, running limit and memory share are the values to pass."""
    from servesim.hardware.engines import engine_profile
    from servesim.hardware.names import canonical_gpu, resolve_gpu

    gpu = resolve_gpu(dep.gpu, catalog)
    return engine_profile(
        dep.engine,
        gpu=canonical_gpu(dep.gpu, catalog),
        memory_gib=gpu.memory_bytes / 2**30,
        max_num_batched_tokens=dep.max_num_batched_tokens,
        max_num_seqs=dep.max_num_seqs,
        scheduler=dict(dep.scheduler),
        overlap=dep.overlap,
        tp=dep.tp * dep.dp,
        dp=1,
        memory_fraction=dep.memory_fraction,
        cuda_graph_max_tokens=dep.cuda_graph_max_tokens,
        speculating=dep.speculating,
        piecewise_cuda_graphs=dep.piecewise_cuda_graphs,
    )


def _checkpoint(dep: Deployment, catalog: Catalog | None = None) -> tuple[str, str]:
    """(the checkpoint's id or path, a note): the model's own Hugging Face id (a catalog name's first
    ``hf_ids``; a config.json's folder)."""
    from servesim._checks import InputError, ParameterError
    from servesim.hardware.names import _catalog, canonical_model

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
    from servesim.hardware.architectures import _ALIASES

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
    dep: Deployment, engine: str, catalog: Catalog | None = None
) -> tuple[str | None, str | None, str | None, str]:
    """How the engine gets the weights ``dep.dtype`` names: (``--quantization`` value or None, the
    checkpoint to load in place of the model's own or None, a ``CHECKPOINT`` the user must supply
    (its description) or None, a note)."""
    from servesim.hardware.moe_step import Parallelism
    from servesim.hardware.names import canonical_gpu

    dtype = dep.dtype
    if dtype in ("auto", "bf16"):
        return None, None, None, ""
    arch = model_architecture(dep.model)
    own = _own_dtype(dep)
    par = Parallelism(dep.tp, dep.dp, dep.ep)  # as the pricer resolves it (block FP8 where it splits)
    resolved = moe_dtype(dtype, arch, canonical_gpu(dep.gpu, catalog), par) if arch is not None else dtype
    flag = {"fp8": "fp8", "fp8_block": "fp8", "mxfp4": "mxfp4", "fp4": "modelopt_fp4"}.get(resolved)
    quant = flag if engine != "trtllm" else None
    if resolved == own or (dtype == "fp8" and own in ("fp8", "fp8_block")):
        return quant, None, None, ""
    release = _release(dep, resolved)
    if release is not None:
        return (
            quant,
            release,
            None,
            (
                f"checkpoint: {release}, the publisher's {resolved} release of {dep.model} (the weights "
                "servesim priced); its quality differs from the original's: check it on your own tasks"
            ),
        )
    if dtype == "fp8" and engine != "trtllm" and resolved == "fp8":
        return (
            "fp8",
            None,
            None,
            (
                f"--quantization fp8 quantizes the {own} checkpoint's weights to FP8 at load (per tensor, "
                "what servesim prices); a published FP8 checkpoint of the model (ModelOpt, llm-compressor) "
                "loads faster and may differ in quality: pass its id instead"
            ),
        )
    what = {"fp8": "an FP8", "fp4": "an NVFP4", "int4": "an INT4 (weight-only)"}.get(dtype, f"a {dtype}")
    if resolved == "fp8_block":
        what = "a block-FP8 (128 x 128)"
    why = (
        "trtllm-serve quantizes no weights itself"
        if engine == "trtllm"
        else f"{engine} does not make {resolved} weights of a {own} checkpoint at load"
    )
    return (
        None,
        None,
        f"{what} checkpoint of {dep.model}",
        (
            f"{why}: servesim names no {resolved} checkpoint of {dep.model}; set CHECKPOINT to one (e.g. a "
            "ModelOpt release) before running the script"
        ),
    )


def _served(dep: Deployment, catalog: Catalog | None = None) -> tuple[str, str]:
    """(the checkpoint the engine loads, shell-quoted or ``"$CHECKPOINT"``; its note)."""
    ckpt, note = _checkpoint(dep, catalog)
    _, release, supply, _ = _weights(dep, dep.engine, catalog)
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
    notes: list[str] = field(default_factory=list)

    def flag(self, name: str, value: object = None) -> None:
        self.args.append(
            (name, None if value is None else value if isinstance(value, _Raw) else _text(value))
        )

    def text(self) -> str:
        lines = ["# servesim predict " + " ".join(shlex.quote(a) for a in self.servesim)]
        lines += self.checks
        if self.yaml:
            lines += [f"cat > {TRTLLM_YAML} <<EOF", _yaml(self.yaml).rstrip("\n"), "EOF"]
        head = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        first = " ".join(p for p in (head, self.program, self.positional) if p)
        parts = [first] + [f"  {n}" + ("" if v is None else f" {_quote(v)}") for n, v in self.args]
        lines.append(" \\\n".join(parts))
        return "\n".join(lines) + "\n"


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


def _yaml(data: dict[str, Any], indent: int = 0) -> str:
    """``data`` as block YAML (str, int, float, bool and nested dicts: what the options file holds)."""
    out = []
    for key, value in data.items():
        if isinstance(value, dict):
            out.append(" " * indent + f"{key}:\n" + _yaml(value, indent + 2))
        else:
            text = _text(value) if not isinstance(value, str) else json.dumps(value)
            out.append(" " * indent + f"{key}: {text}\n")
    return "".join(out)


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
    from servesim.hardware.names import canonical_gpu

    eng = flag_profile(dep, catalog)
    ckpt, ckpt_note = _served(dep, catalog)
    quant, _, supply, weights_note = _weights(dep, dep.engine, catalog)
    s = _Script(servesim=["--model", dep.model, "--gpu", canonical_gpu(dep.gpu, catalog), *servesim])
    s.program = ENGINE_PROGRAMS[dep.engine]
    if spec not in (None, "none") and "--spec" not in s.servesim:  # engines' names are not one to one
        s.servesim += ["--spec", str(spec)]
    if supply is not None:
        s.checks.append(f': "${{CHECKPOINT:?set CHECKPOINT to {supply}}}"')
        s.servesim += ["--dtype", dep.dtype]
        ckpt = _Raw('"$CHECKPOINT"')
    elif dep.engine == "trtllm" and dep.dtype not in ("auto", "bf16"):
        s.servesim += ["--dtype", dep.dtype]  # its checkpoint carries the format: no flag says it
    s.notes += [n for n in (ckpt_note, weights_note) if n]
    head = _drafter(s, spec, draft, dep)
    {"vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm}[dep.engine](
        s, _Launch(dep, eng, ckpt, quant, spec, k, tree, head, pool)
    )
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


@dataclass(frozen=True)
class _Launch:
    """What an engine's launch writer reads: the deployment, its engine profile, the checkpoint and
    quantization flag, speculation ``spec`` at draft length ``k`` (or SGLang's ``tree``) with drafter
    ``head``, and the disaggregated ``pool`` ("" for a colocated server)."""

    dep: Deployment
    eng: Any
    ckpt: str
    quant: str | None
    spec: str | None
    k: int | None
    tree: Any
    head: str | None
    pool: str


def _weights_and_budgets(s: _Script, a: _Launch, kv_fp8: str, budgets: tuple[str, str, str]) -> None:
    """The flags vLLM and SGLang share under their own names: the weights' dtype and quantization,
    the KV cache's dtype (``kv_fp8`` the engine's name of FP8), and ``budgets``, the flags of the
    step's token budget, the most running sequences and the memory share."""
    s.flag("--dtype", "auto" if a.dep.dtype != "bf16" else "bfloat16")
    if a.quant is not None:
        s.flag("--quantization", a.quant)
    s.flag("--kv-cache-dtype", kv_fp8 if a.dep.kv_dtype == "fp8" else "auto")
    values = (a.eng.max_num_batched_tokens, a.eng.max_num_seqs, a.eng.memory_fraction)
    for flag, value in zip(budgets, values, strict=True):
        s.flag(flag, value)


def _vllm(s: _Script, a: _Launch) -> None:
    """vLLM (vllm/engine/arg_utils.py EngineArgs.add_cli_args)."""
    dep, eng, ckpt = a.dep, a.eng, a.ckpt
    spec, k, tree, head, pool = a.spec, a.k, a.tree, a.head, a.pool
    s.positional = ckpt
    s.flag("--tensor-parallel-size", dep.tp)
    if dep.dp > 1:
        s.flag("--data-parallel-size", dep.dp)
    if dep.ep > 1:
        s.flag("--enable-expert-parallel")
        if dep.ep != dep.tp * dep.dp:
            s.notes.append(
                f"vLLM's expert parallel spans all tp x dp = {dep.tp * dep.dp} ranks, not ep {dep.ep}"
            )
        if dep.dp > 1:
            s.flag("--all2all-backend", VLLM_ALL2ALL[dep.ep_comm or eng.ep_comm])
    _weights_and_budgets(
        s, a, "fp8", ("--max-num-batched-tokens", "--max-num-seqs", "--gpu-memory-utilization")
    )
    if dep.cuda_graph_max_tokens is not None:
        s.flag("--max-cudagraph-capture-size", dep.cuda_graph_max_tokens)
    overlap = _overlap(dep, eng, spec)
    s.flag("--async-scheduling" if overlap else "--no-async-scheduling")
    if dep.moe_activations == "mxfp8":
        s.env["VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8"] = "1"
    for option in ("moe_backend", "gemm_backend"):
        if getattr(dep, option) is not None:
            s.notes.append(f"{option} {getattr(dep, option)}: no vLLM flag; the prediction priced it")
    if spec not in (None, "none"):
        method = VLLM_SPEC.get(str(spec))
        config: dict[str, Any] = {"method": method, "num_speculative_tokens": k}
        if head is not None:
            config["model"] = "$DRAFT_MODEL" if isinstance(head, _Raw) else head
        if spec == "ngram":
            config["prompt_lookup_max"] = 4
        body = json.dumps(config, separators=(",", ":"))
        s.flag("--speculative-config", _Raw('"' + body.replace('"', '\\"') + '"'))
        if tree is not None:
            s.notes.append("vLLM drafts chains, not SGLang's trees: the tree's draft length is given as k")
    if pool:
        s.flag(
            "--kv-transfer-config",
            _Raw(
                shlex.quote(
                    json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":"))
                )
            ),
        )


def _sglang(s: _Script, a: _Launch) -> None:
    """SGLang (python/sglang/srt/server_args.py ServerArgs)."""
    dep, eng, ckpt = a.dep, a.eng, a.ckpt
    spec, k, tree, head, pool = a.spec, a.k, a.tree, a.head, a.pool
    s.flag("--model-path", ckpt)
    s.flag("--tp-size", dep.tp * dep.dp)  # SGLang's tp_size is the whole replica's GPUs
    if dep.dp > 1:
        s.flag("--dp-size", dep.dp)
        s.flag("--enable-dp-attention")
    if dep.ep > 1:
        s.flag("--ep-size", dep.ep)
        if dep.dp > 1:
            backend, mode = SGLANG_A2A[dep.ep_comm or eng.ep_comm]
            s.flag("--moe-a2a-backend", backend)
            if mode is not None:
                s.flag("--deepep-mode", mode)
    _weights_and_budgets(
        s, a, "fp8_e4m3", ("--chunked-prefill-size", "--max-running-requests", "--mem-fraction-static")
    )
    options = dict(dep.scheduler)
    if "max_prefill_tokens" in options:
        s.flag("--max-prefill-tokens", int(options["max_prefill_tokens"]))
    if options.get("enable_mixed_chunk"):
        s.flag("--enable-mixed-chunk")
    if "scheduler_recv_interval" in options:
        s.flag("--scheduler-recv-interval", int(options["scheduler_recv_interval"]))
    if dep.cuda_graph_max_tokens is not None:
        s.flag("--cuda-graph-max-bs", dep.cuda_graph_max_tokens)  # 0.5's own; an alias later
    if dep.piecewise_cuda_graphs:
        s.flag("--cuda-graph-backend-prefill", "tc_piecewise")
    if dep.overlap is False:
        s.flag("--disable-overlap-schedule")
    elif dep.overlap is True:
        s.notes.append("overlap scheduler on: SGLang's default (no flag turns it on)")
    if dep.gemm_backend == "flashinfer":
        s.env["SGLANG_ENABLE_FLASHINFER_GEMM"] = "true"
    for option in ("moe_backend", "moe_activations"):
        if getattr(dep, option) is not None:
            s.notes.append(f"{option} {getattr(dep, option)}: no SGLang flag; the prediction priced it")
    if spec not in (None, "none") and spec not in SGLANG_SPEC:
        _no_method(
            s,
            spec,
            k,
            "SGLang has no such --speculative-algorithm (server_args.py: EAGLE, EAGLE3, "
            "NEXTN, STANDALONE, NGRAM, ...)",
        )
    elif spec not in (None, "none"):
        s.flag("--speculative-algorithm", SGLANG_SPEC[str(spec)])
        if head is not None:
            s.flag("--speculative-draft-model-path", head)
        steps, topk, tokens = tree if tree is not None else (k, 1, (k or 0) + 1)
        s.flag("--speculative-num-steps", steps)
        s.flag("--speculative-eagle-topk", topk)
        s.flag("--speculative-num-draft-tokens", tokens)
    if pool:
        s.flag("--disaggregation-mode", pool)
        s.flag("--disaggregation-transfer-backend", "nixl")


def _no_method(s: _Script, spec: str | None, k: int | None, why: str) -> None:
    """The engine cannot run the method: no speculation flag, the draft length on the first line,
    a note."""
    s.notes.append(f"speculation {spec}: {why}; the command starts the engine without it")
    if k is not None:
        s.servesim += ["--k", str(k)]


def _trtllm(s: _Script, a: _Launch) -> None:
    """TensorRT-LLM (tensorrt_llm/commands/serve.py serve; tensorrt_llm/llmapi/llm_args.py TorchLlmArgs)."""
    dep, eng, ckpt = a.dep, a.eng, a.ckpt
    spec, k, head, pool = a.spec, a.k, a.head, a.pool
    s.positional = ckpt
    s.flag("--tp_size", dep.tp * dep.dp)  # attention DP runs every rank as its own attention replica
    if dep.ep > 1:
        s.flag("--ep_size", dep.ep)
    s.flag("--max_num_tokens", eng.max_num_batched_tokens)
    s.flag("--max_batch_size", eng.max_num_seqs)
    s.flag("--kv_cache_free_gpu_memory_fraction", eng.memory_fraction)
    if dict(dep.scheduler).get("enable_chunked_prefill"):
        s.flag("--enable_chunked_prefill")
    y: dict[str, Any] = {"dtype": "bfloat16" if dep.dtype == "bf16" else "auto"}
    if dep.dp > 1:
        y["enable_attention_dp"] = True
        if dep.tp > 1:
            s.notes.append(
                f"TensorRT-LLM's attention DP runs one attention rank a GPU: tp {dep.tp} x dp "
                f"{dep.dp} is launched as {dep.tp * dep.dp} attention-DP ranks"
            )
    y["kv_cache_config"] = {
        "dtype": "fp8" if dep.kv_dtype == "fp8" else "auto",
        "free_gpu_memory_fraction": eng.memory_fraction,
    }
    if dep.cuda_graph_max_tokens is not None:
        y["cuda_graph_config"] = {"max_batch_size": dep.cuda_graph_max_tokens, "enable_padding": True}
    if dep.overlap is not None:
        y["disable_overlap_scheduler"] = not dep.overlap
    if dep.moe_backend is not None:
        y["moe_config"] = {"backend": dep.moe_backend.upper()}
    if dep.piecewise_cuda_graphs:
        y["torch_compile_config"] = {"enable_piecewise_cuda_graph": True}
    comm = dep.ep_comm
    if comm in TRTLLM_ALLTOALL and dep.dp > 1:
        s.env["TRTLLM_FORCE_ALLTOALL_METHOD"] = TRTLLM_ALLTOALL[comm]
    for option in ("moe_activations", "gemm_backend"):
        if getattr(dep, option) is not None:
            s.notes.append(
                f"{option} {getattr(dep, option)}: no TensorRT-LLM option; the prediction priced it"
            )
    if spec == "medusa":
        _no_method(
            s,
            spec,
            k,
            "TensorRT-LLM's PyTorch backend runs no Medusa (llm_args.py "
            "MedusaDecodingConfig.supports_backend)",
        )
    elif spec not in (None, "none"):
        sc: dict[str, Any] = {"decoding_type": TRTLLM_SPEC[str(spec)], "max_draft_len": k}
        if spec == "mtp":
            sc["num_nextn_predict_layers"] = k
        if head is not None:
            sc["speculative_model_dir"] = "${DRAFT_MODEL}" if isinstance(head, _Raw) else head
        y["speculative_config"] = sc
    if pool:
        s.notes.append(
            f"{pool} worker: Dynamo's TensorRT-LLM recipes add cache_transceiver_config "
            "(the KV transfer backend) to this file"
        )
    s.yaml = y
    s.flag("--extra_llm_api_options", TRTLLM_YAML)


# ------------------------------------------------------------------------------ the benchmark


def benchmark_command(bench: Benchmark, dep: Deployment, *, replicas: int = 1,
                      catalog: Catalog | None = None) -> str:
    """The client's command that measures ``bench`` against ``dep``'s server (one of ``replicas``
    replicas: the rate is that replica's share), as the prediction ran it."""
    client = bench.client
    name = client.name
    served = _served(dep, catalog)[0]
    model = served if isinstance(served, _Raw) else shlex.quote(served)
    extra = ["--warmup-prompts", str(bench.warmup)] if bench.warmup else []
    if name == "inferencemax" and client.warm_server:
        extra.append("--warm-server")
    lines = [
        f"# servesim predict --client {name} " + " ".join(extra)
        if extra
        else f"# servesim predict --client {name}"
    ]
    if replicas > 1:
        lines.append(f"# one of {replicas} replicas: its share of the load")
    if bench.warmup:
        lines.append(
            f"# servesim leaves the first {bench.warmup} requests out of its figures (a warm-up the "
            "client does not know): compare the rest of the saved per-request times"
        )
    rate = "inf" if bench.rate_per_s is None else repr(float(bench.rate_per_s))
    ratio = client.ratio
    args: list[tuple[str, str]] = []
    if name == "sglang":
        args += [
            ("--backend", "sglang" if dep.engine == "sglang" else "vllm"),
            ("--port", str(PORTS[dep.engine])),
        ]
    else:
        args += [("--backend", "vllm"), ("--port", str(PORTS[dep.engine]))]
    args += [
        ("--model", model),
        ("--dataset-name", "random"),
        ("--random-input-len", str(bench.isl)),
        ("--random-output-len", str(bench.osl)),
        ("--random-range-ratio", repr(float(ratio))),
        ("--num-prompts", str(bench.prompts)),
        ("--request-rate", rate),
    ]
    if bench.concurrency is not None:
        args.append(("--max-concurrency", str(bench.concurrency)))
    if name == "sglang":
        args += [("--warmup-requests", str(bench.warmups)), ("--seed", str(bench.seed))]
    else:
        if client.burstiness != 1.0:
            args.append(("--burstiness", repr(float(client.burstiness))))
        args += [
            ("--num-warmups", str(bench.warmups)),
            ("--seed", str(bench.seed)),
            ("--ignore-eos", ""),
            ("--percentile-metrics", "ttft,tpot,itl,e2el"),
            ("--save-result", ""),
            *([("--save-detailed", "")] if bench.warmup else []),
        ]
    parts = [CLIENT_PROGRAMS[name]] + [f"  {n}" + (f" {v}" if v else "") for n, v in args]
    lines.append(" \\\n".join(parts))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ whole deployments


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
        out += [
            "--speculative-num-steps",
            str(tree[0]),
            "--speculative-eagle-topk",
            str(tree[1]),
            "--speculative-num-draft-tokens",
            str(tree[2]),
        ]
    for flag, value in (
        ("--acceptance-length", sp.get("acceptance_length")),
        ("--alpha", sp.get("alpha")),
        ("--traffic", sp.get("traffic")),
    ):
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
    if TRTLLM_YAML in cmd:
        files[TRTLLM_YAML] = _heredoc(cmd)
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
    """The here-document's body of a launch script (TensorRT-LLM's options file)."""
    lines = cmd.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("cat > "))
    end = lines.index("EOF", start + 1)
    return "\n".join(lines[start + 1 : end]) + "\n"


def _link_text(link_bytes_per_s: float) -> str:
    from servesim.model.kvcache import LINKS

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
    ``DynamoGraphDeployment`` and (vLLM) an llm-d values file."""
    spec = sp.get("spec")
    common = (
        "--mode",
        "disagg",
        "--prefill-workers",
        str(prefill_workers),
        "--decode-workers",
        str(decode_workers),
        "--link",
        _link_text(link_bytes_per_s),
    )
    sv = tuple(_speculation(sp))
    pcmd, pnotes = engine_command(prefill, servesim=common, pool="prefill", catalog=catalog)
    dcmd, dnotes = engine_command(
        decode, spec=spec, k=sp.get("k"), tree=sp.get("tree"), draft=sp.get("draft"),
        servesim=common + sv, pool="decode", catalog=catalog,
    )
    bcmd = benchmark_command(bench, decode, catalog=catalog)
    dynamo, dynamo_files = _dynamo(prefill, prefill_workers, pcmd, decode, decode_workers, dcmd)
    files = {
        "prefill.sh": pcmd,
        "decode.sh": dcmd,
        "benchmark.sh": bcmd,
        "dynamo.yaml": dynamo,
        **dynamo_files,
    }
    notes = [
        *dict.fromkeys([*pnotes, *dnotes]),
        *_spec_notes(spec),
        f"{prefill_workers} prefill and {decode_workers} decode workers, KV moved over "
        f"{_link_text(link_bytes_per_s)} ({link_bytes_per_s / 1e9:g} GB/s) as predicted; benchmark.sh "
        "measures the whole deployment through its front end (Dynamo's or llm-d's)",
    ]
    if prefill.dtype != decode.dtype:
        notes.append(f"the pools differ in weights: prefill {prefill.dtype}, decode {decode.dtype}")
    if decode.engine == "vllm":
        files["llm-d-values.yaml"] = _llmd(prefill, prefill_workers, pcmd, decode, decode_workers, dcmd)
    else:
        notes.append(f"llm-d serves vLLM only: no llm-d values file for a {decode.engine} deployment")
    return Launch({"prefill": pcmd, "decode": dcmd}, bcmd, files, tuple(notes))


def _args_of(cmd: str) -> tuple[str, list[str], dict[str, str]]:
    """(the checkpoint, the engine's arguments, its environment) of one launch script."""
    script = split_script(cmd)
    return script.positional or "", script.args, script.env


DYNAMO_EXAMPLE = (
    "ai-dynamo/dynamo components/backends/vllm/deploy/disagg.yaml at 416ff06e7feabbebb220e56a2e5dfed656ec4bbd"
)
"""The manifest :func:`_dynamo` follows (services Frontend, VllmDecodeWorker, VllmPrefillWorker with
dynamoNamespace, componentType/subComponentType, resources.limits.gpu, extraPodSpec.mainContainer with
command ``python3 -m dynamo.vllm`` and list args; runtime images 0.6.1)."""

_RUNTIME = {"vllm": "vllm-runtime", "sglang": "sglang-runtime", "trtllm": "tensorrtllm-runtime"}


def _trtllm_options(cmd: str) -> dict[str, Any]:
    """A trtllm-serve script's settings as LLM-API options (what ``dynamo.trtllm --extra-engine-args``
    reads): its YAML with the command line's flags as the keys they set (serve.py get_llm_args)."""
    script = split_script(cmd)
    o = script.options()
    y = read_yaml(script.files.get(TRTLLM_YAML, ""))
    keys = {
        "--tp_size": "tensor_parallel_size",
        "--ep_size": "moe_expert_parallel_size",
        "--max_batch_size": "max_batch_size",
        "--max_num_tokens": "max_num_tokens",
    }
    out: dict[str, Any] = {key: int(str(o[flag])) for flag, key in keys.items() if o.get(flag) is not None}
    if "--enable_chunked_prefill" in o:
        out["enable_chunked_prefill"] = True
    return {**out, **y}


def _dynamo(
    prefill: Deployment, wp: int, pcmd: str, decode: Deployment, wd: int, dcmd: str
) -> tuple[str, dict[str, str]]:
    """A ``DynamoGraphDeployment`` (nvidia.com/v1alpha1, as :data:`DYNAMO_EXAMPLE`) with a front end and
    the two pools, each worker running Dynamo's engine module with the pool's settings (vLLM and SGLang:
    the engine's own flags; TensorRT-LLM: an LLM-API options file per pool, returned beside it), and
    those files."""
    engine = decode.engine
    ns = "servesim-disagg"
    image = f"nvcr.io/nvidia/ai-dynamo/{_RUNTIME[engine]}:0.6.1"
    services: dict[str, Any] = {
        "Frontend": {
            "dynamoNamespace": ns,
            "componentType": "frontend",
            "replicas": 1,
            "extraPodSpec": {"mainContainer": {"image": image}},
        }
    }
    files: dict[str, str] = {}
    for pool, dep, workers, cmd in (("prefill", prefill, wp, pcmd), ("decode", decode, wd, dcmd)):
        ckpt, args, env = _args_of(cmd)
        if engine == "vllm":
            args = ["--model", ckpt, *args] + (["--is-prefill-worker"] if pool == "prefill" else [])
        elif engine == "trtllm":
            name = f"dynamo-{pool}-llm-api.yaml"
            files[name] = _yaml(_trtllm_options(cmd))
            args = [
                "--model-path",
                ckpt,
                "--extra-engine-args",
                f"/config/{name}",
                "--disaggregation-mode",
                pool,
            ]
        container: dict[str, Any] = {
            "image": image,
            "command": ["python3", "-m", f"dynamo.{engine}"],
            "args": args,
        }
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
    doc = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": ns},
        "spec": {"services": services},
    }
    head = (
        f"# servesim: the predicted pools as a Dynamo DynamoGraphDeployment (after {DYNAMO_EXAMPLE});\n"
        "# the image is that example's release: use your Dynamo release's, and check its workers' flags\n"
    )
    if files:
        head += "# mount " + " and ".join(sorted(files)) + " at /config in the workers (a ConfigMap)\n"
    return head + _yaml_any(doc), files


LLMD_EXAMPLE = (
    "llm-d-incubation/llm-d-modelservice examples/values-pd.yaml at 91b5bb0c32f1abc977fcc77b717866ec040cced3"
)
"""The values file :func:`_llmd` follows (modelArtifacts, routing with the P/D inference scheduler,
prefill and decode pods of vLLM containers started by ``modelCommand: vllmServe``)."""


def _llmd(prefill: Deployment, wp: int, pcmd: str, decode: Deployment, wd: int, dcmd: str) -> str:
    """An llm-d ``modelservice`` Helm values file (vLLM; as :data:`LLMD_EXAMPLE`) with the two pools'
    replicas, GPUs and flags.  llm-d starts both pools on ``modelArtifacts.name``."""
    ckpt, _, _ = _args_of(dcmd)
    doc: dict[str, Any] = {
        "multinode": False,
        "modelArtifacts": {"name": ckpt, "uri": f"hf://{ckpt}"},
        "routing": {
            "servicePort": 8000,
            "inferencePool": {"create": True},
            "httpRoute": {"create": True},
            "epp": {"create": True, "pluginsConfigFile": "default-pd-config.yaml"},
        },
    }
    for pool, dep, workers, cmd in (("decode", decode, wd, dcmd), ("prefill", prefill, wp, pcmd)):
        _, args, env = _args_of(cmd)
        gpus = str(dep.tp * dep.dp)
        container: dict[str, Any] = {
            "name": "vllm",
            "image": "vllm/vllm-openai:latest",
            "modelCommand": "vllmServe",
            "args": args,
        }
        if env:
            container["env"] = [{"name": k, "value": v} for k, v in sorted(env.items())]
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}}
        container["mountModelVolume"] = True
        doc[pool] = {"create": True, "replicas": workers, "containers": [container]}
    head = f"# servesim: the predicted pools as llm-d modelservice values (after {LLMD_EXAMPLE})\n"
    if _args_of(pcmd)[0] != ckpt:
        head += f"# llm-d starts both pools on {ckpt}: the prefill pool's {_args_of(pcmd)[0]} is not used\n"
    return head + _yaml_any(doc)


def _yaml_any(data: Mapping[str, object] | Sequence[object], indent: int = 0) -> str:
    """``data`` (dicts, lists, scalars) as block YAML, strings quoted as JSON."""
    pad = " " * indent
    if isinstance(data, dict):
        out = []
        for key, value in data.items():
            if isinstance(value, (dict, list)) and value:
                out.append(f"{pad}{key}:\n" + _yaml_any(value, indent + 2))
            else:
                out.append(f"{pad}{key}: {_scalar(value)}\n")
        return "".join(out)
    out = []
    for item in data:
        if isinstance(item, dict):
            body = _yaml_any(item, indent + 2)
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
    from servesim.plan.confirm import row_deployments
    from servesim.sim.batching import Benchmark

    pre, dec = row_deployments(row, q, gpu)
    spec = None if row["speculation"] == "none" else row["speculation"]
    k = getattr(q, "k", None) or (row.get("speculative_k") or None)
    acc = (
        {}
        if spec is None
        else {
            "acceptance_length": getattr(q, "acceptance_length", None),
            "traffic": getattr(q, "traffic", None),
        }
    )
    rate = float(row.get("planned_rate_rps") or row["max_rate_rps"])
    steady = row.get("steady_state") or {}
    run: dict[str, Any] = {
        "num_prompts": steady.get("prompts"),
        "warmup": int(steady.get("warmup_prompts") or 0),
    }
    if row["architecture"] == "colocated":
        n = int(row["prefill"]["workers"])
        bench = Benchmark(isl=q.isl, osl=q.osl, rate_per_s=rate / n, **run)
        out = deploy_colocated(dec, bench, spec=spec, k=k, replicas=n, catalog=catalog, **acc).as_dict()
    else:
        bench = Benchmark(isl=q.isl, osl=q.osl, rate_per_s=rate, **run)
        w = (int(row["prefill"]["workers"]), int(row["decode"]["workers"]))
        launch = deploy_disaggregated(
            pre, w[0], dec, w[1], q.link_bytes_per_s, bench, spec=spec, k=k, catalog=catalog, **acc
        )
        out = launch.as_dict()
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
    """The flags (and LLM-API keys) of a launch or benchmark script that its program's own list
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
    if s.program == "trtllm":
        table = engine_flags()["trtllm"]["llm_api"]
        keys = set(table["keys"])
        bad += [f"{k} (LLM-API option)" for k in _yaml_keys(s.files.get(TRTLLM_YAML, "")) if k not in keys]
    env_known = set(engine_flags().get(s.program, {}).get("env", ()))
    bad += [f"{k} (environment)" for k in s.env if k not in env_known]
    return bad


def _yaml_keys(text: str) -> list[str]:
    """The dotted keys of a two-level block YAML as :func:`_yaml` writes it."""
    out, parent = [], ""
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key = line.strip().split(":", 1)[0]
        if line.startswith("  "):
            out.append(f"{parent}.{key}")
        else:
            parent = key
            out.append(key)
    return out
