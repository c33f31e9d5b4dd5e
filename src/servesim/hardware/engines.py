"""Serving engines as parameter bundles: scheduler budgets and per-step host overheads.

The bundles live in ``hardware/data/engines.toml`` (data, with the evidence for
each value beside it); this module reads and checks them.  An engine profile
says how a continuous-batching engine forms its steps:

* ``max_num_batched_tokens``: the per-step token budget (decode tokens count
  against it; the rest goes to prefill chunks), chosen by GPU memory class as
  the engine itself chooses its default;
* ``max_num_seqs``: the most sequences running at once;
* the **host time** of one step, ``host_step_s + host_per_seq_s x sequences``:
  scheduling, input preparation, sampling bookkeeping and detokenization on the
  CPU.  An engine that overlaps this with the GPU's work (an "overlap"
  scheduler) hides the part that is shorter than the step: the step then costs
  ``max(gpu, host)`` instead of ``gpu + host`` (``overlap = true``);
* ``cuda_graph_max_tokens``: the largest step captured in a CUDA graph; larger
  (mixed prefill) steps pay eager launches (``eager_kernel_s`` per kernel), and an eager
  prefill step of an MLA model takes at least its layers times ``eager_mla_layer_host_s``, the
  CPU's time to launch them (launch-bound);
  ``cuda_graph_batches``: the batch sizes the engine captures (its own rule, below the limit), to
  which a decode-only graph step is padded (:meth:`EngineProfile.graph_batch`);
  ``cuda_graph_decode_only``: only steps without prefill run as graphs (SGLang,
  TensorRT-LLM), so every step with a prompt in it pays the eager launches;
  ``cuda_graph_counts_sequences``: the limit counts a decode step's sequences, not its tokens
  (SGLang ``--cuda-graph-max-bs``, TensorRT-LLM ``cuda_graph_config.max_batch_size``: a verify
  step of B sequences and k drafts each runs the graph of batch B; vLLM captures by tokens);
  ``mla_verify_per_query``: the engine's MLA attention kernel on this GPU runs a verify step's
  ``n`` query tokens per sequence as ``n`` single-query rows, each reading the sequence's latent
  cache (SGLang's ``trtllm_mla`` on Blackwell): the step's attention is priced as the decode of
  ``n B`` rows; ``mla_prefill_engine``: on this GPU the engine's MLA prefill attention is priced
  by that engine's measured kernel table instead of its own (SGLang on Hopper: its FA3 prefill is
  the kernel class TensorRT-LLM's table measures, while its own table runs at a third of that rate);
* ``scheduler``: the engine's scheduler options (:mod:`servesim.sim.schedulers`),
  e.g. SGLang's ``max_prefill_tokens`` and ``new_token_ratio`` schedule,
  TensorRT-LLM's ``enable_chunked_prefill``;
* ``request_overhead_s``: time a request spends outside the engine loop before
  its first token reaches the client (HTTP, tokenization, detokenization and
  streaming), added to its TTFT; ``front_end_*``: the serving process's event loop as a queue
  whose wait grows with the output tokens a second (:mod:`servesim.sim.frontend`);
* ``cold_start`` and ``kv_connect_s``: what a freshly started server pays once, in the first
  wave of a harness that measures one (``Client.fresh_server``): the kernels its first batched
  prefill compiles (:meth:`EngineProfile.cold_start_s`), and in a disaggregated deployment the
  KV-transfer connections its first transfer opens.

Standard library only.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cache
from typing import Any

from servesim._catalogfile import engines_file
from servesim._checks import ParameterError, check_int, check_real

# and ENGINES, CAPTURE_RULES (module __getattr__)
__all__ = ["EngineProfile", "default_engine", "display_name", "engine_aliases", "engine_flags",
           "engine_hazards", "engine_profile", "kernel_file_stem", "mla_fallback", "policy_of",
           "tables_fallback"]


def __getattr__(name: str) -> tuple[str, ...]:
    """``ENGINES``: the engines with a shipped profile, in engines.toml's order; ``CAPTURE_RULES``:
    those that state their own CUDA-graph batch sizes (:func:`capture_sizes`).  Read on first use."""
    if name == "ENGINES":
        return tuple(_raw()["engine"])
    if name == "CAPTURE_RULES":
        return _capture_rules()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_engine() -> str:
    """The engine servesim assumes where none is named (engines.toml ``default_engine``)."""
    return str(_raw()["default_engine"])


def display_name(name: str) -> str:
    """Engine ``name``'s own name as its project writes it (engines.toml ``name``: ``trtllm`` ->
    TensorRT-LLM); ``name`` itself for an engine the file does not hold."""
    return str(_raw()["engine"].get(name, {}).get("name", name))


def engine_aliases() -> dict[str, str]:
    """Every spelling of an engine's name servesim takes (its key and engines.toml ``aliases``),
    lower case, to the engine's key."""
    out: dict[str, str] = {}
    for key, entry in _raw()["engine"].items():
        out[key] = key
        for alias in entry.get("aliases", ()):
            out[str(alias).lower()] = key
    return out


def policy_of(name: str) -> str:
    """The scheduler policy of engine ``name`` as ``"module:Class"`` (engines.toml ``policy``)."""
    entry = _raw()["engine"].get(name)
    if entry is None or "policy" not in entry:
        raise ParameterError("engine", name, f"one of {', '.join(_raw()['engine'])}")
    return str(entry["policy"])


EP_COMMS = ("allgather", "deepep", "deepep_normal")
"""How the attention-DP ranks of an expert-parallel MoE layer exchange its tokens (an engine's default:
engines.toml ``ep_comm``; :class:`servesim.hardware.moe_step.MoEStepModel` prices each):

* ``"allgather"``: every GPU gathers every rank's tokens before the experts (each runs its own
  experts on all of them) and the partial outputs are reduce-scattered back after them.  It is
  every engine's default without a multi-node NVLink domain: SGLang's ``--moe-a2a-backend`` none
  (``layers/dp_attention.py``: ``_dp_gather_via_all_gather`` then ``dp_reduce_scatter_tensor`` for a
  decode batch padded to the ranks' longest, the MAX_LEN mode; ``_dp_gather_via_all_reduce`` and the
  experts' all-reduce for a batch that extends, the SUM_LEN mode, engines.toml
  ``dp_gather_prefill``), vLLM's ``--all2all-backend allgather_reducescatter`` (``VLLM_ALL2ALL_BACKEND``'s
  default) and TensorRT-LLM's ``allgather`` / ``reducescatter`` (``fused_moe_wide_ep.py``
  ``select_alltoall_method_type``: MNNVL only on aarch64 GB200-class nodes, DeepEP only with
  ``TRTLLM_CAN_USE_DEEP_EP=1`` or ``TRTLLM_FORCE_ALLTOALL_METHOD``), which gathers NVFP4 experts'
  activations already quantized (4.5 bits a value with their scales), other dtypes' in BF16.
  InferenceMAX's SGLang and TensorRT-LLM recipes on H200 and B200 (``benchmarks/multi_node/
  srt-slurm-recipes``, ``recipes/trtllm/{h200,b200-*}``) set neither.
* ``"deepep"``: DeepEP's low-latency kernels for decode-only steps, its normal ones for steps that
  prefill (SGLang ``--moe-a2a-backend deepep`` with ``--deepep-mode auto``, vLLM
  ``deepep_low_latency`` / ``deepep_high_throughput``, TensorRT-LLM's ``DeepEPLowLatency``).
* ``"deepep_normal"``: DeepEP's normal kernels in every step: TensorRT-LLM's
  ``AlltoallMethodType.DeepEP``, which runs in CUDA graphs across nodes too since TensorRT-LLM PR
  #7514 and which ``TRTLLM_FORCE_ALLTOALL_METHOD=DeepEP`` selects (InferenceMAX's H100 recipes,
  ``recipes/trtllm/h100-fp8/*/ctx1_gen3_dep16_*``, set it for both pools)."""

DP_GATHERS = ("allgather", "allreduce")
"""How an engine gathers the attention-DP ranks' tokens in a step that prefills (engines.toml
``dp_gather_prefill``): like a decode step, or with an all-reduce of a zeroed buffer of every rank's
tokens and a second all-reduce of the experts' outputs (SGLang's SUM_LEN mode)."""


@dataclass(frozen=True)
class EngineProfile:
    """How one engine forms and pays for its steps (see the module docstring)."""

    name: str
    max_num_batched_tokens: int
    max_num_seqs: int
    host_step_s: float
    host_per_seq_s: float
    overlap: bool
    cuda_graph_max_tokens: int
    eager_kernel_s: float
    memory_fraction: float
    reserved_bytes: float
    fraction_of_free: bool = False
    request_overhead_s: float = 0.0
    # the serving process's event loop (servesim.sim.frontend): its time per streamed response and per
    # new request, and the stream interval each benchmark client's harness launches it with (else 1)
    front_end_response_s: float = 0.0
    front_end_request_s: float = 0.0
    front_end_stream_intervals: tuple[tuple[str, int], ...] = ()
    description: str = ""
    cuda_graph_decode_only: bool = False
    cuda_graph_counts_sequences: bool = False
    scheduler: tuple[tuple[str, float | bool], ...] = ()
    version: str = ""
    dp_ranks: int = 1  # attention data-parallel ranks, each with a scheduler of its own
    chunk_tokens: int = 0  # most prompt tokens of one request in a step (one rank's budget); 0: the budget
    spec_overlap_methods: tuple[str, ...] | None = None  # speculative methods keeping the overlap; None: all
    profile_nontorch_bytes: float | None = None  # vLLM: the reserve beside a dense model's profiled peak
    eager_mla_layer_host_s: float = 0.0  # CPU time to launch one MLA layer of an eager prefill step
    mla_verify_per_query: bool = False  # an MLA verify step reads each sequence's cache once per query row
    mla_prefill_engine: str = ""  # the engine whose measured MLA prefill kernel prices this one's ("": own)
    moe_prefill_scale: tuple[tuple[str, str, float], ...] = ()  # (MoE family, experts' dtype, factor) here
    cold_start: tuple[tuple[str, float], ...] = ()  # (weights' dtype, seconds) of a fresh server here
    graph_batches: str = ""  # the engine whose CUDA-graph batch sizes are captured (capture_sizes); "": any
    kv_connect_s: float = 0.0  # a fresh disaggregated deployment's first KV transfer waits this long
    ep_comm: str = "allgather"  # how attention-DP ranks reach the experts (EP_COMMS): the default
    dp_gather_prefill: str = "allgather"  # "allreduce": a step that prefills gathers with all-reduces
    above_kv_limit: str = ""  # what the engine does with requests beyond what its KV cache holds
    # MoE choices the engine makes (servesim.hardware.moe_step documents each, with its source):
    shared_experts_overlap: str = ""  # attention kind whose shared experts run on a second stream
    moe_mxfp8_activations: bool = False  # MXFP4 experts with MXFP8 activations where measured
    mxfp8_moe_tables_from: str = ""  # whose MXFP4 x MXFP8 MoE rows stand in where its own lack the shape
    moe_backend_tables_from: str = ""  # whose MoE rows price its moe_config.backend choices
    gemm_backend_tables_from: str = ""  # whose block-FP8 GEMMs price its FlashInfer GEMM backend
    gathers_nvfp4: bool = False  # attention-DP tokens gathered quantized to NVFP4 for NVFP4 experts
    memory_flag: str = ""  # its own flag for the memory share (Deployment.memory_fraction)

    def __post_init__(self) -> None:
        check_int("max_num_batched_tokens", self.max_num_batched_tokens, lo=1)
        check_int("max_num_seqs", self.max_num_seqs, lo=1)
        check_real("host_step_s", self.host_step_s, lo=0.0)
        check_real("host_per_seq_s", self.host_per_seq_s, lo=0.0)
        check_int("cuda_graph_max_tokens", self.cuda_graph_max_tokens, lo=0)
        check_real("eager_kernel_s", self.eager_kernel_s, lo=0.0)
        check_real("memory_fraction", self.memory_fraction, lo=0.0, hi=1.0, lo_open=True)
        check_real("reserved_bytes", self.reserved_bytes, lo=0.0)
        check_real("request_overhead_s", self.request_overhead_s, lo=0.0)
        check_real("front_end_response_s", self.front_end_response_s, lo=0.0, hi=0.1)
        check_real("front_end_request_s", self.front_end_request_s, lo=0.0, hi=1.0)
        for client, interval in self.front_end_stream_intervals:
            check_int(f"front_end_stream_intervals[{client}]", interval, lo=1, hi=100_000)
        check_real("eager_mla_layer_host_s", self.eager_mla_layer_host_s, lo=0.0, hi=0.1)
        for family, dtype, factor in self.moe_prefill_scale:
            check_real(f"moe_prefill_scale[{family}, {dtype}]", factor, lo=1.0, hi=4.0)
        for dtype, seconds in self.cold_start:
            check_real(f"cold_start[{dtype}]", seconds, lo=0.0, hi=60.0)
        check_real("kv_connect_s", self.kv_connect_s, lo=0.0, hi=60.0)
        if self.ep_comm not in EP_COMMS:
            raise ParameterError("ep_comm", self.ep_comm, f"one of {', '.join(EP_COMMS)}")
        if self.dp_gather_prefill not in DP_GATHERS:
            raise ParameterError("dp_gather_prefill", self.dp_gather_prefill,
                                 f"one of {', '.join(DP_GATHERS)}")

    def moe_prefill_factor(self, family: str, dtype: str) -> float:
        """How much slower than its measured kernel table a prefill step's routed experts of a
        ``family`` model in ``dtype`` run on this profile's GPU (``engines.toml``
        ``moe_prefill_scale``; 1: as measured)."""
        return next((f for fam, d, f in self.moe_prefill_scale if fam == family and d == dtype), 1.0)

    def cold_start_s(self, dtype: str) -> float:
        """Seconds a freshly started server of this engine on this profile's GPU spends before its
        first batched prefill of a model with ``dtype`` weights, compiling the kernels of shapes its
        own warm-up did not run (``engines.toml`` ``cold_start``; 0: none known).  Paid once, by the
        first wave of a harness that measures a fresh server (``Client.fresh_server``)."""
        return next((x for d, x in self.cold_start if d == dtype), 0.0)

    def kv_room_bytes(self, memory_bytes: float, weight_bytes: float,
                      reserved_bytes: float | None = None) -> float:
        """HBM left for the KV cache on one GPU holding ``weight_bytes`` of weights.

        Most engines cap weights + KV at a fraction of the whole memory
        (``fraction x total - weights - reserved``); TensorRT-LLM takes its
        fraction of what is free after the weights (``fraction x (total -
        weights - reserved)``, ``fraction_of_free``).  ``reserved_bytes`` replaces the engine's
        constant where the caller models the reserve (vLLM's profile run, :attr:`profile_nontorch_bytes`).
        """
        r = self.reserved_bytes if reserved_bytes is None else reserved_bytes
        if self.fraction_of_free:
            return self.memory_fraction * (memory_bytes - weight_bytes - r)
        return self.memory_fraction * memory_bytes - weight_bytes - r

    def graph_size(self, tokens: float, sequences: float, prefill: bool) -> float:
        """What the CUDA-graph limit is compared with for a step of ``tokens`` tokens and
        ``sequences`` decoding sequences: the sequences of a decode-only step where the engine's
        graphs are captured by batch (``cuda_graph_counts_sequences``), else the tokens."""
        return sequences if self.cuda_graph_counts_sequences and not prefill and sequences > 0 else tokens

    @property
    def chunks_prompts(self) -> bool:
        """Whether the engine cuts a prompt into chunks (TensorRT-LLM's ``enable_chunked_prefill`` is
        off by default: it runs a prompt whole, beside the decoding batch, within the budget)."""
        return bool(dict(self.scheduler).get("enable_chunked_prefill", True))

    def graph_batch(self, sequences: float) -> float:
        """The batch a decode-only CUDA-graph step of ``sequences`` sequences runs: the smallest size
        the engine captured that holds them (the padded rows run every kernel but attention, which
        reads no cache for them); ``sequences`` itself above the largest, where the step runs
        eagerly, or where the engine names no rule."""
        if not self.graph_batches or sequences <= 0:
            return sequences
        sizes = capture_sizes(self.graph_batches, self.cuda_graph_max_tokens)
        i = bisect.bisect_left(sizes, sequences - 1e-9)
        return float(sizes[i]) if i < len(sizes) else sequences

    def overlaps_speculation(self, method: str) -> bool:
        """Whether a step of speculative ``method`` still hides host time behind the GPU (the
        overlap scheduler on and kept by this method; ``spec_overlap_methods``).  servesim's
        ``draft`` and ``small-draft`` (the engines' draft-model method) are in no engine's list."""
        if not self.overlap:
            return False
        if self.spec_overlap_methods is None:
            return True
        return method in self.spec_overlap_methods

    def host_s(self, sequences: float) -> float:
        """CPU time of one step with ``sequences`` sequences in it."""
        return self.host_step_s + self.host_per_seq_s * sequences


def _capture_rules() -> tuple[str, ...]:
    return tuple(key for key, entry in _raw()["engine"].items() if "cuda_graph_batches" in entry)


@cache
def capture_sizes(rule: str, top: int) -> tuple[int, ...]:
    """The batch sizes engine ``rule`` captures as CUDA graphs, up to its limit ``top``: its own rule,
    engines.toml ``cuda_graph_batches`` (each cites the engine's source), made of the ``sizes`` listed,
    runs ``{ from, to, by }`` (a run without ``to`` goes up to the limit) and the powers of two from
    ``powers_of_two_from``, each kept up to ``top``; and ``top`` itself where ``adds_limit``
    (TensorRT-LLM adds the limit; SGLang and vLLM keep their pattern's sizes up to it, SGLang then
    taking the largest as its limit: a batch above it is not padded here).
    """
    entry = _raw()["engine"].get(rule, {}).get("cuda_graph_batches")
    if entry is None:
        raise ParameterError("cuda_graph_batches", rule, f"one of {', '.join(_capture_rules())}")
    sizes = [int(x) for x in entry.get("sizes", ())]
    for run in entry.get("steps", ()):
        sizes += range(int(run["from"]), int(run.get("to", top)) + 1, int(run["by"]))
    if "powers_of_two_from" in entry:
        power = int(entry["powers_of_two_from"])
        while power <= top:
            sizes.append(power)
            power *= 2
    kept = {x for x in sizes if x <= top} | ({top} if entry.get("adds_limit", False) else set())
    return tuple(sorted(kept)) or (top,)


def _raw() -> dict[str, Any]:
    return engines_file()


def kernel_file_stem(name: str, gpu_table: str) -> str:
    """The file name, without ``.json.gz`` (or ``_moe.json.gz``), of engine ``name``'s measured kernel
    tables of GPU ``gpu_table`` in ``hardware/data/kernels``: engines.toml ``kernel_tables`` with
    ``{gpu}`` replaced, by default ``{gpu}_<engine>``."""
    return str(_raw()["engine"].get(name, {}).get("kernel_tables", "{gpu}_" + name)).format(gpu=gpu_table)


def tables_fallback() -> str:
    """The engine whose measured kernel tables price an engine that has none on a GPU (engines.toml
    ``kernel_tables_fallback``)."""
    return str(_raw()["kernel_tables_fallback"])


def mla_fallback(name: str) -> tuple[str, ...]:
    """The engines, in order, whose core MLA tables price engine ``name``'s where its own measured
    none on a GPU (engines.toml ``mla_fallback``; none listed: no fallback)."""
    return tuple(str(x) for x in _raw()["engine"].get(name, {}).get("mla_fallback", ()))


def kv_follows_checkpoint(name: str) -> bool:
    """Whether engine ``name``'s default KV dtype ("auto") is the one the checkpoint's quantization
    config states (engines.toml ``kv_dtype_auto = "checkpoint"``), rather than the model's dtype."""
    return str(_raw()["engine"].get(name, {}).get("kv_dtype_auto", "model")) == "checkpoint"


def ssm_state_bytes(name: str) -> int | None:
    """Bytes per value of the recurrent state engine ``name`` keeps whatever the model's
    ``mamba_ssm_dtype`` says (engines.toml ``ssm_state_bytes``); None: the model's."""
    value = _raw()["engine"].get(name, {}).get("ssm_state_bytes")
    return None if value is None else int(value)


def moe_backends() -> dict[str, dict[str, str]]:
    """The MoE kernel backends an engine's flag selects that servesim prices apart (engines.toml
    ``moe_backends``: TensorRT-LLM's ``moe_config.backend``), each with, by the experts' dtype, the
    kernel of the ``moe_backend_tables_from`` engine's rows that prices it (a substring of its source)."""
    return {str(backend): {str(d): str(k) for d, k in kernels.items()}
            for entry in _raw()["engine"].values()
            for backend, kernels in entry.get("moe_backends", {}).items()}


def moe_backend_stand_ins() -> dict[str, str]:
    """The MoE backends no table measured, each with the measured backend that prices it (engines.toml
    ``moe_backend_stand_ins``: TensorRT-LLM's CUTEDSL and WIDEEP as CUTLASS)."""
    return {str(b): str(s) for entry in _raw()["engine"].values()
            for b, s in entry.get("moe_backend_stand_ins", {}).items()}


def engine_hazards(name: str) -> dict[str, str]:
    """Engine ``name``'s known hazards of features in combination (``spec+prefix-cache``,
    ``spec+disagg``), each a caveat citing the engine's own issue reports (engines.toml
    ``[engine.NAME.hazards]``); none for an engine the file gives none."""
    return {str(k): str(v) for k, v in _raw()["engine"].get(name, {}).get("hazards", {}).items()}


def engine_flags(name: str) -> tuple[tuple[str, str, bool, str], ...]:
    """Engine ``name``'s own server flags that ``servesim predict`` takes, in engines.toml's order
    (``[[engine.NAME.flags]]``): each as (flag, what it sets, whether it is a switch, its help); what
    it sets is ``budget``, ``seqs``, ``no_overlap``, ``memory_fraction`` or a scheduler option's name."""
    return tuple((str(f["flag"]), str(f["sets"]), bool(f.get("switch", False)), str(f["help"]))
                 for f in _raw()["engine"].get(name, {}).get("flags", ()))


def pool_scheduler(name: str) -> tuple[tuple[str, float | bool], ...]:
    """Scheduler options a disaggregated pool's worker runs with unless the deployment sets them
    (engines.toml ``pool_scheduler``): the serving runtime that feeds a pool (NVIDIA Dynamo) replaces
    the engine's own front end."""
    table = _raw()["engine"].get(name, {}).get("pool_scheduler", {})
    return tuple(sorted((str(k), v) for k, v in table.items()))


def engine_profile(name: str, *, gpu: str = "", memory_gib: float = 80.0,
                   max_num_batched_tokens: int | None = None,
                   max_num_seqs: int | None = None,
                   scheduler: dict[str, float | bool] | None = None,
                   overlap: bool | None = None, tp: int = 1, dp: int = 1,
                   memory_fraction: float | None = None,
                   cuda_graph_max_tokens: int | None = None,
                   speculating: bool = False, piecewise_cuda_graphs: bool = False) -> EngineProfile:
    """The shipped profile of ``name`` for a GPU of ``memory_gib`` GiB, with optional overrides.

    Budgets depend on the GPU's memory class as the engines' own defaults do:
    the ``large`` values apply from ``large_memory_gib`` up (except the GPUs
    named in ``small_gpus``), the ``small`` ones below.  ``scheduler`` overrides the engine's
    scheduler options (names as in its ``[engine.NAME.scheduler]`` table); ``overlap``
    turns the overlap (async) scheduler on or off.  An engine with a ``memory`` table (SGLang)
    sizes its chunk, its CUDA-graph batch and its static memory fraction from the GPU's memory and
    the tensor-parallel degree ``tp`` (the server's, the GPUs of a replica) as its server does.
    ``dp`` attention data-parallel ranks each run a scheduler: the profile's budget and running
    limit are then the whole group's, either as given (SGLang divides its flags among the ranks)
    or ``dp`` times them (vLLM, TensorRT-LLM schedule each rank under the full flags), and one
    request's chunk is at most one rank's budget (``chunk_tokens``).  ``memory_fraction`` is the
    engine's own memory flag where one was given (SGLang ``--mem-fraction-static``, vLLM
    ``--gpu-memory-utilization``: of the whole memory, nothing reserved beside it; TensorRT-LLM
    ``kv_cache_config.free_gpu_memory_fraction``: of what the weights leave), in (0, 1].
    ``cuda_graph_max_tokens`` is the engine's CUDA-graph limit where one was given (vLLM
    ``--max-cudagraph-capture-size``, SGLang ``--cuda-graph-max-bs``, TensorRT-LLM
    ``cuda_graph_config.max_batch_size``; per attention-DP rank): a decode step of more tokens runs
    eagerly; 0 captures none.  ``speculating`` True builds the profile a speculative run's steps
    are priced with where the method turns the overlap scheduler off: its host time a step is the
    engine's ``spec_host_step_us`` where it has one (SGLang's EAGLE v1 worker), else ``host_step_us``.
    ``piecewise_cuda_graphs`` True: steps that prefill replay piecewise CUDA graphs too
    (TensorRT-LLM ``torch_compile_config.enable_piecewise_cuda_graph``, as vLLM's torch.compile'd
    steps always do), so an MLA model's eager prefill launch floor (``eager_mla_layer_host_us``)
    does not apply.
    """
    if memory_fraction is not None:
        check_real("memory_fraction", memory_fraction, lo=0.0, hi=1.0, lo_open=True)
    if cuda_graph_max_tokens is not None:
        check_int("cuda_graph_max_tokens", cuda_graph_max_tokens, lo=0, hi=65536)
    raw = _raw()["engine"]
    if name not in raw:
        raise ParameterError("engine", name, f"one of {', '.join(_raw()['engine'])}")
    e = raw[name]
    large = memory_gib >= float(e["large_memory_gib"]) and gpu not in e["small_gpus"]
    tokens = int(e["max_num_batched_tokens_large" if large else "max_num_batched_tokens_small"])
    options = _scheduler_options(name, e, scheduler)
    seqs = int(e["max_num_seqs_large" if large else "max_num_seqs_small"])
    fraction, reserved = float(e["memory_fraction"]), float(e["reserved_GiB"]) * 2.0**30
    # the flag replaces the default (in SGLang it also sizes the reserve, as its server does)
    graph = int(e["cuda_graph_max_tokens"] if cuda_graph_max_tokens is None else cuda_graph_max_tokens)
    if "memory" in e:  # SGLang's _handle_gpu_memory_settings
        tokens, graph, fraction, reserved = _memory_class(
            e["memory"], memory_gib, tp, max_num_batched_tokens, cuda_graph_max_tokens, graph
        )
    if memory_fraction is not None:  # the flag replaces the computed fraction (and SGLang's reserve in it)
        fraction = float(memory_fraction)
        if "memory" in e:
            reserved = 0.0
    tokens = tokens if max_num_batched_tokens is None else max_num_batched_tokens
    seqs = seqs if max_num_seqs is None else max_num_seqs
    chunk, tokens, seqs = _dp_budgets(e, dp, tokens, seqs, options)
    return EngineProfile(
        name=name,
        max_num_batched_tokens=tokens,
        max_num_seqs=seqs,
        overlap=bool(e["overlap"]) if overlap is None else bool(overlap),
        cuda_graph_max_tokens=graph,
        memory_fraction=fraction,
        reserved_bytes=reserved,
        scheduler=tuple(sorted(options.items())),
        dp_ranks=dp,
        chunk_tokens=chunk,
        **_table_fields(name, e, gpu, speculating=speculating, piecewise_cuda_graphs=piecewise_cuda_graphs),
    )


def _scheduler_options(
    name: str, e: dict[str, Any], scheduler: dict[str, float | bool] | None
) -> dict[str, float | bool]:
    """Engine ``name``'s scheduler options (its table ``e``'s) with ``scheduler``'s overrides; an
    option the engine lacks is a :class:`ParameterError`."""
    options: dict[str, float | bool] = dict(e.get("scheduler", {}))
    for key, value in (scheduler or {}).items():
        if key not in options:
            raise ParameterError(key, value,
                                 f"an option of {name}'s scheduler: {', '.join(options) or 'none'}")
        options[key] = value
    return options


def _dp_budgets(
    e: dict[str, Any], dp: int, tokens: int, seqs: int, options: dict[str, float | bool]
) -> tuple[int, int, int]:
    """(one request's chunk, the group's token budget, its running limit) of ``dp`` attention-DP
    ranks (chunk 0 without DP): the flags are the group's (``dp_budget = "group"``) or each rank's;
    ``options``' prefill batch becomes one a rank (updated in place)."""
    chunk = 0
    if dp > 1:
        if e["dp_budget"] == "group":
            chunk = max(1, tokens // dp)
        else:
            chunk, tokens, seqs = tokens, tokens * dp, seqs * dp
        if "max_prefill_tokens" in options:  # one prefill batch per rank
            options["max_prefill_tokens"] = int(options["max_prefill_tokens"]) * dp
    return chunk, tokens, seqs


def _memory_class(
    m: dict[str, Any], memory_gib: float, tp: int, max_num_batched_tokens: int | None,
    cuda_graph_max_tokens: int | None, graph: int,
) -> tuple[int, int, float, float]:
    """SGLang's sizing by GPU memory (server_args.py ``_handle_gpu_memory_settings``, engines.toml
    ``[engine.sglang.memory]``): the chunk, the CUDA-graph batch (``graph`` where the flag gave one),
    the static memory fraction after the reserve the chunk and the graph need, and no further
    reserve."""
    cls = next(c for c in m["classes"] if memory_gib < float(c[0]))
    tokens = int(cls[1])
    if cuda_graph_max_tokens is None:
        graph = int(cls[2] if tp < 4 else cls[3])
    chunk = tokens if max_num_batched_tokens is None else max_num_batched_tokens
    mib = float(m["reserved_base_MiB"]) + 1.5 * max(chunk, 2048) + 2 * graph + tp / 8 * 1024
    if memory_gib > 60:
        mib = max(mib, float(m["reserved_min_GiB_above_60"]) * 1024)
    return tokens, graph, round((memory_gib * 1024 - mib) / (memory_gib * 1024), 3), 0.0


def _table_fields(
    name: str, e: dict[str, Any], gpu: str, *, speculating: bool, piecewise_cuda_graphs: bool
) -> dict[str, Any]:
    """The profile's fields read from engine ``name``'s table ``e`` alone, for ``gpu`` (see
    :func:`engine_profile` for ``speculating`` and ``piecewise_cuda_graphs``)."""
    return dict(
        host_step_s=float(e["spec_host_step_us" if speculating and "spec_host_step_us" in e
                            else "host_step_us"]) * 1e-6,
        host_per_seq_s=float(e["host_per_seq_us"]) * 1e-6,
        eager_kernel_s=float(e["eager_kernel_us"]) * 1e-6,
        fraction_of_free=bool(e.get("fraction_of_free", False)),
        request_overhead_s=float(e.get("request_overhead_us", 0.0)) * 1e-6,
        front_end_response_s=float(e.get("front_end", {}).get("response_us", 0.0)) * 1e-6,
        front_end_request_s=float(e.get("front_end", {}).get("request_us", 0.0)) * 1e-6,
        front_end_stream_intervals=tuple(sorted((str(c), int(n)) for c, n in
                                                e.get("front_end", {}).get("stream_interval", {}).items())),
        description=str(e.get("label", name)),
        cuda_graph_decode_only=bool(e.get("cuda_graph_decode_only", False)),
        cuda_graph_counts_sequences=bool(e.get("cuda_graph_counts_sequences", False)),
        version=str(e.get("version", "")),
        spec_overlap_methods=(tuple(str(m) for m in e["spec_overlap_methods"])
                              if "spec_overlap_methods" in e else None),
        profile_nontorch_bytes=(float(e["profile_nontorch_GiB"]) * 2.0**30
                                if "profile_nontorch_GiB" in e else None),
        eager_mla_layer_host_s=(0.0 if piecewise_cuda_graphs
                                else float(e.get("eager_mla_layer_host_us", 0.0)) * 1e-6),
        mla_verify_per_query=gpu in e.get("mla_verify_per_query_gpus", ()),
        mla_prefill_engine=(str(e["mla_prefill_from"]["engine"])
                            if gpu in e.get("mla_prefill_from", {}).get("gpus", ()) else ""),
        moe_prefill_scale=tuple((str(fam), str(x["dtype"]), float(x["factor"]))
                                for x in e.get("moe_prefill_scale", ()) if gpu in x["gpus"]
                                for fam in x["families"]),
        cold_start=tuple((str(x["dtype"]), float(x["seconds"]))
                         for x in e.get("cold_start", ()) if gpu in x["gpus"]),
        graph_batches=name if "cuda_graph_batches" in e else "",
        kv_connect_s=float(e.get("kv_connect_ms", 0.0)) * 1e-3,
        ep_comm=str(e.get("ep_comm", "allgather")),
        dp_gather_prefill=str(e.get("dp_gather_prefill", "allgather")),
        above_kv_limit=str(e.get("above_kv_limit", "")),
        shared_experts_overlap=str(e.get("shared_experts_overlap", "")),
        moe_mxfp8_activations=bool(e.get("moe_mxfp8_activations", False)),
        mxfp8_moe_tables_from=str(e.get("mxfp8_moe_tables_from", "")),
        moe_backend_tables_from=str(e.get("moe_backend_tables_from", "")),
        gemm_backend_tables_from=str(e.get("gemm_backend_tables_from", "")),
        gathers_nvfp4=bool(e.get("gathers_nvfp4", False)),
        memory_flag=str(e.get("memory_flag", "")),
    )
