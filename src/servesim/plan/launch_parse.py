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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from servesim._checks import InputError
from servesim.hardware.pricer import Deployment
from servesim.plan.launch_script import Script, _pairs, read_yaml, split_script

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog
    from servesim.sim.batching import Benchmark

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


def _servesim(args: list[str]) -> dict[str, str | None]:
    return _pairs(args)


def parse_launch(
    text: str, *, gpu: str | None = None, model: str | None = None, catalog: Catalog | None = None
) -> ParsedLaunch:
    """The deployment a launch script starts (see the module docstring); ``gpu`` and ``model`` stand in
    where its first line does not name them."""
    s = split_script(text)
    if s.program not in ("vllm", "sglang", "trtllm"):
        raise InputError(
            "--engine-command: no vllm serve, python -m sglang.launch_server or trtllm-serve "
            "command found in it"
        )
    sv = _servesim(s.servesim)
    o = s.options()
    # servesim's model: the first line's, the flag's, else the checkpoint the command loads
    loaded = s.positional or o.get("--model") or o.get("--model-path")
    model = sv.get("--model") or model or (loaded if loaded and not loaded.startswith("$") else None)
    gpu = sv.get("--gpu") or gpu
    if not model or not gpu:
        missing = "--model" if not model else "--gpu"
        raise InputError(
            f"--engine-command: it does not say the {missing[2:]} (no '# servesim predict {missing} ...' "
            f"first line{'' if missing == '--gpu' else ' and no checkpoint id'}); give {missing}"
        )
    fields: dict[str, Any] = {"model": model, "gpu": gpu, "engine": s.program}
    fields.update({"vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm}[s.program](s, o))
    if sv.get("--dtype"):
        fields["dtype"] = sv["--dtype"]
    spec_args = _speculation(s, o, sv)
    dep = canonical(Deployment(**fields), spec_args.get("spec"), catalog)
    extra = {
        k[2:].replace("-", "_"): v
        for k, v in sv.items()
        if k in ("--mode", "--prefill-workers", "--decode-workers", "--link") and v is not None
    }
    return ParsedLaunch(dep, spec_args, extra)


_N = TypeVar("_N", int, float)


def _number(o: dict[str, str | None], name: str, kind: type[_N], where: str,
            default: _N | None = None) -> _N | None:
    """Option ``name`` of a command (``where`` names its flag) as a ``kind``, ``default`` where absent;
    an InputError that names the option and its value where it is not one."""
    v = o.get(name)
    if v is None:
        return default
    try:
        return kind(v)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise InputError(f"{where}: {name} {v!r} is not {what}") from None


def _int(o: dict[str, str | None], name: str, default: int | None = None) -> int | None:
    return _number(o, name, int, "--engine-command", default)


def _float(o: dict[str, str | None], name: str) -> float | None:
    return _number(o, name, float, "--engine-command")


def _dtype(o: dict[str, str | None]) -> str:
    quant = o.get("--quantization")
    if quant is not None:
        return {"fp8": "fp8", "mxfp4": "fp4", "modelopt_fp4": "fp4"}.get(quant, quant)
    return "bf16" if o.get("--dtype") in ("bfloat16", "bf16") else "auto"


def _vllm(s: Script, o: dict[str, str | None]) -> dict[str, Any]:
    from servesim.plan.launch import VLLM_ALL2ALL

    tp = _int(o, "--tensor-parallel-size", _int(o, "-tp", 1)) or 1
    dp = _int(o, "--data-parallel-size", _int(o, "-dp", 1)) or 1
    out: dict[str, Any] = {
        "tp": tp,
        "dp": dp,
        "ep": tp * dp if "--enable-expert-parallel" in o else 1,
        "dtype": _dtype(o),
        "kv_dtype": "fp8" if str(o.get("--kv-cache-dtype", "auto")).startswith("fp8") else "bf16",
        "max_num_batched_tokens": _int(o, "--max-num-batched-tokens"),
        "max_num_seqs": _int(o, "--max-num-seqs"),
        "memory_fraction": _float(o, "--gpu-memory-utilization"),
        "cuda_graph_max_tokens": _int(o, "--max-cudagraph-capture-size"),
    }
    if "--async-scheduling" in o:
        out["overlap"] = True
    if "--no-async-scheduling" in o:
        out["overlap"] = False
    backend = o.get("--all2all-backend")
    if backend is not None:
        out["ep_comm"] = {v: k for k, v in VLLM_ALL2ALL.items()}.get(backend)
    if s.env.get("VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8") == "1":
        out["moe_activations"] = "mxfp8"
    return out


def _sglang(s: Script, o: dict[str, str | None]) -> dict[str, Any]:
    from servesim.plan.launch import SGLANG_A2A

    world = _int(o, "--tp-size", _int(o, "--tensor-parallel-size", 1)) or 1
    dp = _int(o, "--dp-size", _int(o, "--data-parallel-size", 1)) or 1
    out: dict[str, Any] = {
        "tp": max(1, world // dp),
        "dp": dp,
        "ep": _int(o, "--ep-size", 1) or 1,
        "dtype": _dtype(o),
        "kv_dtype": "fp8" if str(o.get("--kv-cache-dtype", "auto")).startswith("fp8") else "bf16",
        "max_num_batched_tokens": _int(o, "--chunked-prefill-size"),
        "max_num_seqs": _int(o, "--max-running-requests"),
        "memory_fraction": _float(o, "--mem-fraction-static"),
        "cuda_graph_max_tokens": _int(o, "--cuda-graph-max-bs", _int(o, "--cuda-graph-max-bs-decode")),
        "piecewise_cuda_graphs": o.get("--cuda-graph-backend-prefill") == "tc_piecewise",
    }
    options: dict[str, float | bool] = {}
    if "--max-prefill-tokens" in o:
        options["max_prefill_tokens"] = int(o["--max-prefill-tokens"] or 0)
    if "--enable-mixed-chunk" in o:
        options["enable_mixed_chunk"] = True
    if "--scheduler-recv-interval" in o:
        options["scheduler_recv_interval"] = int(o["--scheduler-recv-interval"] or 1)
    out["scheduler"] = tuple(sorted(options.items()))
    if "--disable-overlap-schedule" in o:
        out["overlap"] = False
    a2a = o.get("--moe-a2a-backend")
    if a2a is not None:
        out["ep_comm"] = {v: k for k, v in SGLANG_A2A.items()}.get((a2a, o.get("--deepep-mode")))
    if s.env.get("SGLANG_ENABLE_FLASHINFER_GEMM") == "true":
        out["gemm_backend"] = "flashinfer"
    return out


def _trtllm(s: Script, o: dict[str, str | None]) -> dict[str, Any]:
    from servesim.plan.launch import TRTLLM_ALLTOALL, TRTLLM_YAML

    y = read_yaml(s.files.get(str(o.get("--extra_llm_api_options") or TRTLLM_YAML), ""))
    world = _int(o, "--tp_size", 1) or 1
    adp = bool(y.get("enable_attention_dp"))
    kv = y.get("kv_cache_config", {})
    out: dict[str, Any] = {
        "tp": 1 if adp else world,
        "dp": world if adp else 1,
        "ep": _int(o, "--ep_size", 1) or 1,
        "dtype": "bf16" if y.get("dtype") == "bfloat16" else "auto",
        "kv_dtype": "fp8" if kv.get("dtype") == "fp8" else "bf16",
        "max_num_batched_tokens": _int(o, "--max_num_tokens"),
        "max_num_seqs": _int(o, "--max_batch_size"),
        "memory_fraction": _float(o, "--kv_cache_free_gpu_memory_fraction"),
        "piecewise_cuda_graphs": bool(y.get("torch_compile_config", {}).get("enable_piecewise_cuda_graph")),
    }
    if "--enable_chunked_prefill" in o:
        out["scheduler"] = (("enable_chunked_prefill", True),)
    graphs = y.get("cuda_graph_config", {})
    if "max_batch_size" in graphs:
        out["cuda_graph_max_tokens"] = int(graphs["max_batch_size"])
    if "disable_overlap_scheduler" in y:
        out["overlap"] = not bool(y["disable_overlap_scheduler"])
    backend = y.get("moe_config", {}).get("backend")
    if backend is not None:
        out["moe_backend"] = str(backend).lower()
    method = s.env.get("TRTLLM_FORCE_ALLTOALL_METHOD")
    if method is not None:
        out["ep_comm"] = {v: k for k, v in TRTLLM_ALLTOALL.items()}.get(method)
    return out


def _speculation(s: Script, o: dict[str, str | None], sv: dict[str, str | None]) -> dict[str, Any]:
    """The speculation's arguments: servesim's method and acceptance from the first line, the draft
    length (or SGLang's tree) from the engine's own flags."""
    from servesim.plan.launch import SGLANG_SPEC, TRTLLM_SPEC, TRTLLM_YAML, VLLM_SPEC

    spec, k = sv.get("--spec"), None
    tree: tuple[int, ...] | None = None
    if s.program == "vllm" and o.get("--speculative-config"):
        try:
            config = json.loads(str(o["--speculative-config"]))
        except ValueError:
            raise InputError("--engine-command: --speculative-config is not JSON") from None
        spec = spec or {v: key for key, v in VLLM_SPEC.items()}.get(config.get("method"))
        k = config.get("num_speculative_tokens")
    elif s.program == "sglang" and o.get("--speculative-algorithm"):
        spec = spec or {v: key for key, v in SGLANG_SPEC.items()}.get(str(o["--speculative-algorithm"]))
        k = _int(o, "--speculative-num-steps")
    names = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
    if all(sv.get(n) is not None for n in names):  # a tree was asked for (the first line says so)
        tree, k = tuple(int(str(sv[n])) for n in names), None
    elif s.program == "trtllm":
        sc = read_yaml(s.files.get(str(o.get("--extra_llm_api_options") or TRTLLM_YAML), "")).get(
            "speculative_config"
        )
        if isinstance(sc, dict):
            spec = spec or {v: key for key, v in TRTLLM_SPEC.items()}.get(str(sc.get("decoding_type")))
            k = sc.get("max_draft_len")
    out: dict[str, Any] = {"spec": spec}
    if spec in (None, "none"):
        return out
    k = sv.get("--k") or k  # where the engine runs no such method, the first line keeps its k
    out.update({"k": None if k is None else int(k), "tree": tree, "draft": sv.get("--draft")})
    for flag, name, kind in (
        ("--acceptance-length", "acceptance_length", float),
        ("--alpha", "alpha", float),
        ("--traffic", "traffic", str),
    ):
        value = sv.get(flag)
        out[name] = None if value is None else kind(value)
    return out


def canonical(dep: Deployment, spec: str | None = None, catalog: Catalog | None = None) -> Deployment:
    """``dep`` with each setting that equals the engine's default for it read as the default
    (None): the budget, the running limit, the memory share, the overlap scheduler (for a run of
    speculation ``spec``) and the experts' exchange.  Two deployments with the same canonical form
    price alike; a launch script read back gives the canonical form of the one written out."""
    from servesim.plan.launch import _overlap, flag_profile

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
    from servesim.sim.batching import Benchmark
    from servesim.sim.client import Client

    s = split_script(text)
    if not s.program.startswith("client."):
        raise InputError(
            "--bench-command: no vllm bench serve, python -m sglang.bench_serving or "
            "benchmarks/benchmark_serving.py command found in it"
        )
    name = s.program.split(".", 1)[1]
    o = s.options()
    sv = _servesim(s.servesim)
    # what the tool does with a flag left out: vllm/benchmarks/datasets.py add_dataset_parser (random
    # dataset, 1,000 prompts, seed 0, 1,024 / 128 tokens); sglang's bench_serving (ShareGPT by default,
    # 1,000 prompts, seed 1, the same lengths); InferenceMAX's benchmark_serving.py (ShareGPT)
    dataset = o.get("--dataset-name") or ("random" if name == "vllm" else "sharegpt")
    if dataset != "random":
        raise InputError(
            f"--bench-command: dataset {dataset}{'' if '--dataset-name' in o else ' (the default)'}: "
            "servesim predicts the random dataset (--dataset-name random with --random-input-len and "
            "--random-output-len)"
        )
    isl = _bint(o, "--random-input-len") or _bint(o, "--input-len") or 1024
    osl = _bint(o, "--random-output-len") or _bint(o, "--output-len") or 128
    rate_text = o.get("--request-rate")
    rate = None if rate_text in (None, "inf") else float(str(rate_text))
    conc = _bint(o, "--max-concurrency")
    ratio = o.get("--random-range-ratio")
    warm = o.get("--warmup-requests" if name == "sglang" else "--num-warmups")
    burst = o.get("--burstiness")
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
    prompts = _bint(o, "--num-prompts") or 1000
    bench = Benchmark(
        isl=isl,
        osl=osl,
        concurrency=conc,
        rate_per_s=rate,
        num_prompts=prompts,
        seed=_bint(o, "--seed") or 0 if "--seed" in o else (1 if name == "sglang" else 0),
        warmup=int(sv.get("--warmup-prompts") or 0),
        client=client,
    )
    if prompts is not None:
        from servesim._checks import ParameterError

        try:  # the client's default count, where it is the same (and leaves the warm-up valid)
            plain = replace(bench, num_prompts=None)
        except ParameterError:
            plain = bench
        if plain.prompts == prompts:
            bench = plain
    return bench


def _bint(o: dict[str, str | None], name: str) -> int | None:
    return _number(o, name, int, "--bench-command")
