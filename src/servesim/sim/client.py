"""The benchmark client: what requests it sends, with which lengths, and when.

A serving benchmark's numbers depend on the client as much as on the engine:
lengths that vary break the lock-step of closed-loop clients (every request of a
fixed-length run finishes in the same step, so the next wave's prompts all
arrive together and queue behind each other), and the tools read the same flag
differently.  :class:`Client` holds a tool's name and the flags that change what
it sends; :func:`draw_lengths` and :func:`arrival_times` produce the requests,
seeded, so a run is reproducible.

``--random-range-ratio r`` for a prompt (or output) length ``L``, integer lengths
drawn uniformly and inclusively:

=================  ===========================================  =========  =============
client             lengths                                      default r  valid r
=================  ===========================================  =========  =============
``vllm``           ``[floor(L (1 - r)), ceil(L (1 + r))]``      0          ``[0, 1)``
``sglang``         ``[max(1, int(r L)), L]``                    0          ``[0, 1]``
``inferencemax``   ``[int(r L), L]``                            0.8        ``[0, 1]``
=================  ===========================================  =========  =============

* ``vllm``: ``vllm bench serve`` (``vllm/benchmarks/datasets.py``,
  ``RandomDataset.sample``: ``input_low = floor(L * (1 - range_ratio))``,
  ``input_high = ceil(L * (1 + range_ratio))``, ``rng.integers(low, high + 1)``;
  it refuses ``range_ratio`` outside ``[0, 1)``; output lengths at least 1).
  Default ``--num-prompts`` 1000 (servesim's default is smaller, see
  :attr:`Benchmark.prompts`), ``--request-rate inf``, ``--burstiness 1``.
* ``sglang``: ``python -m sglang.bench_serving`` (``python/sglang/bench_serving.py``,
  ``sample_random_requests``: ``np.random.randint(max(int(L * range_ratio), 1), L + 1)``
  for inputs and outputs alike, ``--random-range-ratio`` default 0.0): with its
  default every length is uniform on ``[1, L]``, half of ``L`` on average.
* ``inferencemax``: InferenceMAX (``benchmarks/benchmark_lib.sh``,
  ``.github/workflows/benchmark-tmpl.yml``) runs vLLM's old
  ``benchmarks/benchmark_serving.py``, whose random dataset draws
  ``np.random.randint(int(L * range_ratio), L + 1)``, with
  ``--random-range-ratio 0.8 --num-prompts 10C --num-warmups 2C --request-rate inf
  --ignore-eos`` at ``--max-concurrency C``: lengths uniform on ``[0.8 L, L]``.

Arrivals.  ``request_rate`` ``None`` (``inf``) sends every request at once, gated
only by ``max_concurrency``; a finite rate spaces them by gamma-distributed gaps of
shape ``burstiness`` and mean ``1 / rate`` (``vllm bench serve``:
``theta = 1 / (rate * burstiness)``, ``np.random.gamma(shape=burstiness,
scale=theta)``; burstiness 1 is Poisson, below 1 burstier).  With
``max_concurrency`` as well, a request waits for a free client slot (an asyncio
semaphore) and its TTFT counts from when it is sent.

Warm-ups (``--num-warmups``): sent before the measured requests, run to the end
and then awaited, so the measured run starts on an idle engine.  InferenceMAX's
warm-ups all repeat the first prompt (``benchmark()`` sends ``input_requests[0]``
each time), so they warm the one-prompt path but not a batched prefill of C
different prompts: the measured first wave is the engine's first, and any kernel
compiled or tuned for its shapes is paid there.  InferenceMAX also measures a freshly
started server (``Client.fresh_server``), so ``predict`` makes the engine take its first
step its fitted cold start late (``EngineProfile.cold_start_s``: DeepGEMM's just-in-time
block-FP8 kernels on Hopper), and a disaggregated deployment's first KV transfer wait while
the transfer engine opens its connections (``EngineProfile.kv_connect_s``): every request
of the first wave waits that long.  The warm-ups themselves are checked (at most the
prompts) but not simulated.

Standard library only; deterministic for a given seed.  Nothing here prints.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from servesim._checks import ParameterError, check_int, check_real

__all__ = ["CLIENTS", "Client", "arrival_times", "draw_lengths"]

CLIENTS: dict[str, str] = {
    "vllm": "vllm bench serve",
    "sglang": "python -m sglang.bench_serving",
    "inferencemax": "InferenceMAX (vLLM benchmark_serving.py, range ratio 0.8)",
}
"""Benchmark clients whose meanings servesim follows, and what each is."""

_DEFAULT_RATIO = {"vllm": 0.0, "sglang": 0.0, "inferencemax": 0.8}
_RATIO_RANGE = {"vllm": (0.0, 1.0, True), "sglang": (0.0, 1.0, False), "inferencemax": (0.0, 1.0, False)}


def _trtllm_adp_balance() -> dict[str, object]:
    """InferenceMAX's TensorRT-LLM ``attention_dp_config`` with attention DP (a fresh dict a recipe):
    ``enable_balance: true``, ``timeout_iters: 60``, ``batching_wait_iters: 0``."""
    return {"attention_dp_balance": True, "attention_dp_timeout_iters": 60,
            "attention_dp_batching_wait_iters": 0}


def _trtllm_mtp_depth(dp: int) -> int:
    """``num_nextn_predict_layers`` of InferenceMAX's TensorRT-LLM MTP scripts: 1 with attention DP,
    else 3 (``dsr1_*_trt_mtp.sh``)."""
    return 1 if dp > 1 else 3


@dataclass(frozen=True)
class Client:
    """A benchmark tool and the flags that change what it sends (see the module docstring).

    ``random_range_ratio`` and ``num_warmups`` are None for the tool's own default.
    """

    name: str = "vllm"
    random_range_ratio: float | None = None
    num_warmups: int | None = None
    burstiness: float = 1.0
    warm_server: bool = False  # the server already ran these shapes: no fresh-server cold start

    def __post_init__(self) -> None:
        if self.name not in CLIENTS:
            raise ParameterError("client", self.name, f"one of {', '.join(CLIENTS)}")
        if self.random_range_ratio is not None:
            lo, hi, hi_open = _RATIO_RANGE[self.name]
            r = self.random_range_ratio
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not (
                    lo <= r < hi if hi_open else lo <= r <= hi):
                raise ParameterError("random_range_ratio", r,
                                     f"in [{lo:g}, {hi:g}{')' if hi_open else ']'} for the "
                                     f"{self.name} client "
                                     "(vllm: [0, 1); sglang and inferencemax: [0, 1])")
        if self.num_warmups is not None:
            check_int("num_warmups", self.num_warmups, lo=0, hi=1_000_000)
        check_real("burstiness", self.burstiness, lo=0.0, hi=1e3, lo_open=True)
        if not isinstance(self.warm_server, bool):
            raise ParameterError("warm_server", self.warm_server, "true or false")

    @property
    def ratio(self) -> float:
        """The range ratio in force (the tool's default where none was given)."""
        return _DEFAULT_RATIO[self.name] if self.random_range_ratio is None else self.random_range_ratio

    @property
    def fresh_server(self) -> bool:
        """Whether the harness measures a freshly started server with warm-ups that leave its
        batched prefill cold (InferenceMAX: one server per run, every warm-up the first prompt), so
        that the measured first wave pays the engine's cold start (``EngineProfile.cold_start_s``);
        ``warm_server`` says the server has already run these shapes (a long-running deployment)."""
        return self.name == "inferencemax" and not self.warm_server

    def warmups(self, concurrency: int | None) -> int:
        """Warm-up requests sent first (InferenceMAX: 2 x concurrency; the others: none)."""
        if self.num_warmups is not None:
            return self.num_warmups
        return 2 * concurrency if self.name == "inferencemax" and concurrency else 0

    def length_range(self, length: int, *, output: bool = False) -> tuple[int, int]:
        """Smallest and largest length drawn for a nominal ``length`` (inclusive)."""
        r = self.ratio
        if self.name == "vllm":
            lo, hi = math.floor(length * (1 - r)), math.ceil(length * (1 + r))
            lo = max(lo, 1) if output else lo
        elif self.name == "sglang":
            lo, hi = max(int(length * r), 1), length
        else:
            lo, hi = int(length * r), length
        return max(lo, 1), max(hi, 1)  # a zero-token prompt or output is not a request

    def mean_lengths(self, isl: int, osl: int) -> tuple[float, float]:
        """Mean prompt and output length of the drawn requests."""
        a, b = self.length_range(isl)
        c, d = self.length_range(osl, output=True)
        return (a + b) / 2, (c + d) / 2

    def disagg_recipe(self, engine: str, pool: str, isl: int, concurrency: int | None, *, gpu: str = "",
                      family: str = "", tp: int = 1, dp: int = 1, ep: int = 1, dtype: str = "",
                      workers: int = 1, spec: str | None = None,
                      peer_workers: int | None = None) -> dict[str, object]:
        """Server settings of one pool (``pool`` ``"prefill"`` or ``"decode"``) of the harness's own
        disaggregated recipes, where the engine's defaults differ (empty for the plain clients and
        the models the recipes do not cover): the keys of :meth:`recipe`, and ``overlap``.
        ``concurrency`` is the whole deployment's, ``workers`` the pool's worker count, ``tp`` and
        ``dp`` a worker's attention tensor and data parallel, ``ep`` its expert parallel, ``spec`` the
        speculation the run
        uses (the MTP recipes have decode batches of their own), ``peer_workers`` the other pool's
        worker count where known (SGLang's recipes of one decode shape differ by their prefill pool).
        ``ep_comm`` is among the keys where a recipe forces an expert-parallel exchange.

        InferenceMAX runs DeepSeek-R1 disaggregated with NVIDIA Dynamo from the srt-slurm recipes its
        ``nvidia-master.yaml`` names (ishandhanani/srt-slurm ``sa-submission-q1-2026``,
        ``recipes/trtllm/{h100-fp8,h200,b200-fp8,b200-fp4}``, ``recipes/{h100,h200,b200-fp8,b200-fp4}``):

        * TensorRT-LLM on H100 (two nodes a worker): ``TRTLLM_FORCE_ALLTOALL_METHOD=DeepEP`` in both
          pools' environment (``recipes/trtllm/h100-fp8/1k1k/stp/ctx1_gen3_dep16_batch4_eplb0_mtp0.yaml``),
          so attention-DP workers exchange their experts' tokens with DeepEP's normal kernels in every
          step (``ep_comm`` ``"deepep_normal"``); the other GPUs' recipes leave TensorRT-LLM's
          all-gather (:data:`servesim.hardware.engines.EP_COMMS`);
        * TensorRT-LLM prefill ("ctx") workers: FP8 KV, no overlap scheduler
          (``disable_overlap_scheduler: true``) and small batches with large token budgets,
          ``max_batch_size`` / ``max_num_tokens`` / ``free_gpu_memory_fraction`` by GPU, dtype and
          prompt: H200 8 / 8,192 / 0.6 at 1k, 2 / 16,640 / 0.85 at 8k; B200 FP8 16 / 16,384 / 0.4 and
          1 / 8,320 / 0.4; B200 FP4 8 / 10,240 / 0.75 and 2 / 16,896 / 0.75; H100 2 / 2,048 / 0.6 and
          1 / 8,224 / 0.3 (per attention-DP rank); on B200 in FP8, ``moe_config.backend`` TRTLLM where
          the experts are not expert-parallel (``moe_expert_parallel_size: 1``, e.g.
          ``b200-fp8/8k1k/stp/ctx1_gen1_dep8_batch128_eplb0_mtp0_128.yaml``) and DEEPGEMM with EP8
          (``b200-fp8/1k1k/stp/ctx2_gen5_dep8_batch128_eplb0_mtp0_5152.yaml``) (``moe_backend``);
          the gen workers likewise TRTLLM without expert parallel and at 8k prompts
          (``ctx1_gen2_dep8_batch64``, ``ctx1_gen1_dep8_batch128``), DEEPGEMM with EP8 at 1k
          (``ctx1_gen1_dep8_batch512``, ``ctx1_gen5_dep8_batch48``); on B200 in FP4
          (``recipes/trtllm/b200-fp4``) the ctx workers run TRTLLM (``ctx4_gen1_dep8_batch192``,
          ``ctx1_gen5_tep8_batch32``) and so do the tensor-parallel gen workers (``tep8``), while
          the attention-DP ones run CUTLASS (``ctx1_gen2_dep8_batch128``), TensorRT-LLM's own table;
        * TensorRT-LLM decode ("gen") workers: FP8 KV, the overlap scheduler,
          ``free_gpu_memory_fraction`` 0.9 (B200: 0.8), the recipe's ``max_batch_size`` a rank
          (:func:`dynamo_trtllm_decode_batch`; the low-latency files run one sequence a worker and
          H100's run 1.2 clients a slot, so requests wait at the decode workers) and CUDA graphs up
          to each rank's batch (its share of the clients, rounded up to a power of two, at most that
          ``max_batch_size``);
        * SGLang prefill workers: ``--chunked-prefill-size`` / ``--max-prefill-tokens`` /
          ``--max-running-requests`` / ``--mem-fraction-static``: H200 163,840 / 163,840 / 256 /
          0.82 at 1k and 32,768 / 32,768 / 16 / 0.82 at 8k with tensor parallel, 262,144 / 65,536 /
          512 / 0.75 with DP attention; B200 32,768 / 32,768 / 512 (1,024 with DP attention) / 0.85
          and FP8 KV; H100 2,048 / 2,048 / 2 / 0.6;
        * SGLang decode workers: CUDA graphs (``--cuda-graph-max-bs``) up to the worker's share of
          the clients (a power of two, per DP rank), memory 0.82 (H200), 0.85 and FP8 KV (B200), 0.9
          (H100); where the recipe of the pool is known (:func:`dynamo_sglang_decode`: InferenceX's
          staged srt-slurm recipes, ``data/dynamo_sglang_decode.toml``) its ``--max-running-requests``
          (the worker's; its graphs stop there a rank) and ``--mem-fraction-static`` instead: 2 to
          1,024 requests (H200 8k MTP ``bs4-1p7d-mtp``: 2; ``bs64-2p3d-mtp``: 16), memory 0.75-0.9."""
        if self.name != "inferencemax" or family != "deepseek_v3" or pool not in ("prefill", "decode"):
            return {}
        c = concurrency or 0
        key = 1024 if isl <= 2896 else 8192  # the recipes' two prompt lengths, nearest in log scale
        fp4 = dtype in ("fp4", "nvfp4")
        b200_fp8 = gpu == "b200" and not fp4 and bool(dtype)  # the recipes that name a MoE backend
        share = max(1, math.ceil(c / max(1, workers) / max(1, dp))) if c else 0
        graph = 2 ** math.ceil(math.log2(share)) if share else None
        out: dict[str, object] = {}
        if engine == "trtllm":
            out["kv_dtype"] = "fp8"
            if gpu == "h100-sxm" and dp > 1 and ep > 1:
                # recipes/trtllm/h100-fp8: TRTLLM_FORCE_ALLTOALL_METHOD=DeepEP in both pools' environment
                out["ep_comm"] = "deepep_normal"
            if pool == "prefill":
                ctx = {("h200", False, 1024): (8, 8192, 0.6), ("h200", False, 8192): (2, 16640, 0.85),
                       ("b200", False, 1024): (16, 16384, 0.4), ("b200", False, 8192): (1, 8320, 0.4),
                       ("b200", True, 1024): (8, 10240, 0.75), ("b200", True, 8192): (2, 16896, 0.75),
                       ("h100-sxm", False, 1024): (2, 2048, 0.6), ("h100-sxm", False, 8192): (1, 8224, 0.3)}
                got = ctx.get((gpu, fp4, key))
                out["overlap"] = False
                if got is not None:
                    out.update(max_num_seqs=got[0], max_num_batched_tokens=got[1], memory_fraction=got[2])
                if b200_fp8:
                    out["moe_backend"] = "trtllm" if ep == 1 else "deepgemm"
                elif gpu == "b200" and fp4:
                    out["moe_backend"] = "trtllm"
            else:
                out["memory_fraction"] = 0.8 if gpu == "b200" else 0.9
                if b200_fp8:
                    out["moe_backend"] = "trtllm" if ep == 1 or key == 8192 else "deepgemm"
                elif gpu == "b200" and fp4 and dp == 1:
                    out["moe_backend"] = "trtllm"
                mbs = dynamo_trtllm_decode_batch(gpu, "fp4" if fp4 else "fp8", key, tp, dp, workers, c, spec)
                if mbs is not None:
                    out["max_num_seqs"] = mbs
                    graph = min(graph, mbs) if graph else mbs
                if graph:
                    out["cuda_graph_max_tokens"] = graph
        elif engine == "sglang":
            if pool == "prefill":
                if gpu == "h200":
                    if dp > 1:
                        out.update(max_num_batched_tokens=262144, max_num_seqs=512, memory_fraction=0.75,
                                   scheduler={"max_prefill_tokens": 65536})
                    else:
                        budget = 163840 if key == 1024 else 32768
                        out.update(max_num_batched_tokens=budget, max_num_seqs=256 if key == 1024 else 16,
                                   memory_fraction=0.82, scheduler={"max_prefill_tokens": budget})
                elif gpu == "b200":
                    out.update(kv_dtype="fp8", max_num_batched_tokens=32768, memory_fraction=0.85,
                               max_num_seqs=1024 if dp > 1 else 512, scheduler={"max_prefill_tokens": 32768})
                elif gpu == "h100-sxm":
                    out.update(max_num_batched_tokens=2048, max_num_seqs=2, memory_fraction=0.6,
                               scheduler={"max_prefill_tokens": 2048})
            else:
                if gpu == "b200":
                    out.update(kv_dtype="fp8", memory_fraction=0.85)
                elif gpu in ("h200", "h100-sxm"):
                    out["memory_fraction"] = 0.82 if gpu == "h200" else 0.9
                dec = dynamo_sglang_decode(gpu, "fp4" if fp4 else "fp8", key, tp, dp, workers, peer_workers,
                                           spec) if dtype else None
                if dec is not None:  # the recipe's running limit (the worker's) and memory fraction
                    out["max_num_seqs"], out["memory_fraction"] = dec
                    rank_cap = max(1, dec[0] // max(1, dp))
                    graph = min(graph, rank_cap) if graph else rank_cap
                if graph and gpu in ("h200", "b200", "h100-sxm"):
                    out["cuda_graph_max_tokens"] = graph
        return out

    @property
    def spec_traffic(self) -> str | None:
        """The traffic kind a speculative run of this harness sends (the acceptance presets'
        ``traffic``, :mod:`servesim.hardware.acceptance`), or None for the default (chat).

        InferenceMAX sends random token ids and, in its speculative runs, wraps them in the
        target's chat template (SemiAnalysisAI/InferenceX ``AGENTS.md``: every ``*_mtp.sh`` passes
        ``--use-chat-template``; ``dsr1_fp8_b200_trt_mtp.sh``): ``synthetic``.  The plain clients
        leave it to ``--traffic``."""
        return "synthetic" if self.name == "inferencemax" else None

    def spec_recipe(self, engine: str, spec: str | None, *, family: str = "",
                    dp: int = 1) -> dict[str, object]:
        """The speculation settings of the harness's own recipe for ``spec`` (empty where it has none):
        ``k`` (a chain of k drafts) or ``tree`` (SGLang's ``speculative_num_steps``,
        ``speculative_eagle_topk``, ``speculative_num_draft_tokens``).

        InferenceMAX runs DeepSeek-R1's MTP module with TensorRT-LLM at ``num_nextn_predict_layers``
        1 with attention DP and 3 without (``dsr1_*_trt_mtp.sh``), and with SGLang as EAGLE with 2
        steps, top-k 1 and 3 draft tokens (``dsr1_fp{4,8}_b200_mtp.sh``)."""
        if self.name != "inferencemax" or family != "deepseek_v3" or spec != "mtp":
            return {}
        if engine == "trtllm":
            return {"k": _trtllm_mtp_depth(dp)}
        if engine == "sglang":
            return {"tree": (2, 1, 3)}
        return {}

    def recipe(self, engine: str, isl: int, concurrency: int | None, *, gpu: str = "",
               family: str = "", tp: int = 1, dp: int = 1, dtype: str = "",
               osl: int = 0, model: str = "", spec: str | None = None) -> dict[str, object]:
        """Server settings the harness's own launch recipe passes where the engine's defaults differ
        (empty for the plain clients): ``max_num_batched_tokens`` and ``max_num_seqs`` (the engine's
        budget and running limit under its own flag names), ``kv_dtype``, ``moe_backend``
        (TensorRT-LLM's ``moe_config.backend``: ``"trtllm"``, ``"deepgemm"`` or ``"triton"``),
        ``memory_fraction`` (the engine's memory flag: SGLang ``--mem-fraction-static``, TensorRT-LLM
        ``free_gpu_memory_fraction``), ``moe_activations`` (``"mxfp8"``: MXFP4 experts run with
        MXFP8 activations), ``cuda_graph_max_tokens`` (its CUDA-graph limit: TensorRT-LLM
        ``cuda_graph_config.max_batch_size``, SGLang ``--cuda-graph-max-bs``, vLLM
        ``--max-cudagraph-capture-size``), and scheduler options.
        ``gpu`` is the catalog name, ``family`` the MoE family (``deepseek_v3``, ...; empty for a
        dense model), ``tp`` the attention tensor parallel, ``dtype`` the weights as typed, ``model``
        the architecture's name (``kimi-k2.5``, ...).

        InferenceMAX (SemiAnalysisAI/InferenceX ``benchmarks/*.sh``) launches

        * TensorRT-LLM (``dsr1_fp4_b200_trt.sh``, ``dsr1_fp8_*_trt.sh``, ``gptoss_fp4_*_trt.sh``) with
          ``kv_cache_config: dtype: fp8`` and, for DeepSeek-R1, ``free_gpu_memory_fraction`` 0.75 on
          H200 and 0.8 on B200 (0.7 in FP8 from 256 clients at 1k input), CUDA graphs up to
          ``cuda_graph_config: max_batch_size`` 128 on H200, 512 in FP4 on B200 and C in FP8 on B200
          (C / 8 from 256 clients at 1k input), and ``--max_num_tokens = max(8192,
          64 ceil((C + ISL + 64) / 64))``, so that a whole prompt and every running sequence fit in
          one step (without chunked prefill an 8k prompt beside 64 sequences would wait at the
          default 8,192); with attention data parallel (``dp`` > 1) its ``attention_dp_config`` has
          ``enable_balance: true``, ``timeout_iters: 60`` and ``batching_wait_iters: 0``, and in
          FP8 on B200 at 1k/1k from 64 to 255 clients ``batch_wait_timeout_iters: 40`` and
          ``batch_wait_max_tokens_ratio: 0.8`` (``dsr1_fp8_b200_trt.sh``), whose ``moe_config.backend``
          is TRTLLM, or DEEPGEMM from 256 clients at 1k input, and whose prefill steps replay
          piecewise CUDA graphs (``piecewise_cuda_graphs``) from 64 clients at 1k/1k and 8k/1k and
          128 at 1k/8k (below 256 at 1k input);
        * SGLang with DeepSeek-R1 on H200 (``dsr1_fp8_h200.sh``) with ``--chunked-prefill-size`` and
          ``--max-prefill-tokens`` 32,768, ``--max-running-requests`` 512 at 1k/1k, else 256, and
          ``--mem-fraction-static 0.82`` (SGLang would reserve 1.5 MiB a chunk token beside the
          weights: 48 GiB at 32,768);
        * SGLang with DeepSeek-R1 on B200 with ``--kv-cache-dtype fp8_e4m3`` and
          ``--scheduler-recv-interval`` 10, or 30 from 16 clients (the scheduler then polls for new
          requests every 30 decode steps; in FP8 only at TP8: ``dsr1_fp8_b200.sh`` keeps 10 at
          TP4); in FP8 at TP8 with chunks and prefill batches of 32,768, 128 running requests and
          memory fraction 0.82, at TP4 8,192, 32 and 0.95; in FP4 (``dsr1_fp4_b200.sh``) with 256
          running requests and 0.85.

        * gpt-oss (``gptoss_fp4_*.sh``, ``gptoss_fp4_*_trt.sh``): vLLM with 8,192-token budgets, CUDA
          graphs up to 2,048 tokens and memory 0.9, on B200 FP8 KV, 512 sequences and MXFP8 expert
          activations (``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1``), on Hopper C;
          TensorRT-LLM with ``--max_num_tokens 20000``, memory fraction 0.85 and CUDA graphs up to C,
          on B200 FP8 KV and ``--max_batch_size 512``, on H200 the model's own KV and C (its
          attention DP balances with the engine's other defaults);
        * MiniMax-M2.5 on vLLM (``minimaxm2.5_fp8_*.sh``): memory 0.95 on B200; 0.90 and 256
          sequences on H100; on H200 (the later script, the one read) 0.95, 512 sequences, FP8 KV and
          budgets of 16,384 up to 32 clients, 32,768 from 64;
        * Kimi-K2.5 on vLLM (``kimik2.5_{int4,fp4}_*.sh``): ``--max-num-seqs C`` and memory 0.95
          (0.90 for the NVFP4 release).

        The SGLang recipes run tensor parallel only (``--data-parallel-size=1``): with ``dp`` > 1
        SGLang keeps its defaults.  Its other recipes keep the budgets servesim's defaults carry.

        With ``spec`` ``"mtp"`` (DeepSeek-R1's own MTP module, :meth:`spec_recipe`), the MTP
        scripts: TensorRT-LLM (``dsr1_fp8_{b200,h200}_trt_mtp.sh``, ``dsr1_fp4_b200_trt_mtp.sh``)
        with ``--max_batch_size`` C (C / GPUs a rank with attention DP), ``--max_num_tokens =
        64 ceil(((k + 1) max_batch_size + ISL + 64) / 64)`` (no 8,192 floor), CUDA graphs up to 256
        in FP8 and 512 in FP4 on B200, 128 on H200, memory fraction 0.8 (H200: 0.75); SGLang on
        B200 (``dsr1_fp{8,4}_b200_mtp.sh``) with 256 running requests and CUDA graphs in FP8, 512
        and 16,384-token chunks in FP4."""
        if self.name != "inferencemax":
            return {}
        if spec == "mtp" and family == "deepseek_v3":
            return self._mtp_recipe(engine, isl, concurrency or 0, gpu=gpu, tp=tp, dp=dp, dtype=dtype)
        out: dict[str, object] = {}
        c = concurrency or 0
        if engine == "trtllm" and family == "gpt_oss":
            # gptoss_fp4_{b200,h200}_trt.sh: --max_num_tokens 20000, free_gpu_memory_fraction 0.85,
            # CUDA graphs up to C; on B200 FP8 KV and --max_batch_size 512, attention DP with
            # enable_balance (its other fields default); on H200 the model's own KV, --max_batch_size
            # C, moe_config.backend TRITON and no attention_dp_config
            out.update(max_num_batched_tokens=20000, memory_fraction=0.85)
            if gpu == "b200":
                out.update(kv_dtype="fp8", max_num_seqs=512)
                if dp > 1:
                    out["scheduler"] = {"attention_dp_balance": True}
            else:
                if c:
                    out["max_num_seqs"] = c
                if gpu == "h200":
                    out["moe_backend"] = "triton"
            if c:
                out["cuda_graph_max_tokens"] = c
        elif engine == "trtllm":
            out["kv_dtype"] = "fp8"
            if family == "deepseek_v3" and gpu in ("h200", "b200"):  # free_gpu_memory_fraction
                big = c >= 256 and isl == 1024 and dtype in ("fp8", "fp8_block")
                tp4_8k = tp == 4 and (isl, osl) == (8192, 1024) and dtype in ("fp8", "fp8_block")
                out["memory_fraction"] = 0.75 if gpu == "h200" or tp4_8k else (0.7 if big else 0.8)
                # cuda_graph_config.max_batch_size: 128 on H200, 512 in FP4 on B200, the clients in FP8
                # on B200 (an eighth of them from 256 clients at 1k input, one DP rank's share)
                if gpu == "h200":
                    out["cuda_graph_max_tokens"] = 128
                elif dtype in ("fp4", "nvfp4"):
                    out["cuda_graph_max_tokens"] = 512
                elif c:
                    out["cuda_graph_max_tokens"] = c // 8 if big else c
                    if dtype in ("fp8", "fp8_block"):
                        out["moe_backend"] = "deepgemm" if big else "trtllm"
                        # torch_compile_config.enable_piecewise_cuda_graph: 1k/1k from 64 clients, 1k/8k
                        # from 128, 8k/1k from 64 (the 1k branches from 256 clients run DEEPGEMM without)
                        lo = {(1024, 1024): 64, (1024, 8192): 128, (8192, 1024): 64}.get((isl, osl))
                        if lo is not None and c >= lo and not big:
                            out["piecewise_cuda_graphs"] = True
            if c:
                out["max_num_batched_tokens"] = max(8192, 64 * math.ceil((c + isl + 64) / 64))
            if dp > 1:
                out["scheduler"] = _trtllm_adp_balance()
            elif (family == "deepseek_v3" and gpu == "b200" and dtype in ("fp8", "fp8_block")
                  and (isl, osl) == (1024, 1024) and 64 <= c < 256):
                out["scheduler"] = {"batch_wait_timeout_iters": 40, "batch_wait_max_tokens_ratio": 0.8}
        elif engine == "vllm" and family == "gpt_oss":
            # gptoss_fp4_{b200,h200,h100}.sh: --max-num-batched-tokens 8192,
            # --max-cudagraph-capture-size 2048, --gpu-memory-utilization 0.9; on B200 FP8 KV and
            # --max-num-seqs 512, on Hopper --max-num-seqs C
            out.update(max_num_batched_tokens=8192, cuda_graph_max_tokens=2048, memory_fraction=0.9)
            if gpu == "b200":  # and VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1: MXFP8 activations
                out.update(kv_dtype="fp8", max_num_seqs=512, moe_activations="mxfp8")
            elif c:
                out["max_num_seqs"] = c
        elif engine == "vllm" and family == "minimax_m2":
            # minimaxm2.5_fp8_{b200,h100,h200}.sh: B200 --gpu-memory-utilization 0.95; H100 0.90 and
            # --max-num-seqs 256; H200 0.95, 512 sequences, FP8 KV and --max-num-batched-tokens 16384
            # at 2-32 clients, 32768 at 64-256 and twice the prompt at any other count (its ``case``)
            if gpu == "b200":
                out["memory_fraction"] = 0.95
            elif gpu == "h100-sxm":
                out.update(memory_fraction=0.9, max_num_seqs=256)
            elif gpu == "h200":
                budget = 16384 if c in (2, 4, 8, 16, 32) else 32768 if c in (64, 128, 256) else 2 * isl
                out.update(memory_fraction=0.95, max_num_seqs=512, kv_dtype="fp8",
                           max_num_batched_tokens=budget)
        elif engine == "vllm" and family == "deepseek_v3" and model.startswith("kimi"):
            # kimik2.5_{int4,fp4}_{b200,h200}.sh: --max-num-seqs C, --gpu-memory-utilization 0.95
            # (0.90 for the NVFP4 release)
            out["memory_fraction"] = 0.9 if dtype in ("fp4", "nvfp4") else 0.95
            if c:
                out["max_num_seqs"] = c
        elif engine == "sglang" and family == "deepseek_v3" and gpu == "h200" and dp == 1:
            out.update(max_num_batched_tokens=32768, max_num_seqs=512 if (isl, osl) == (1024, 1024) else 256,
                       memory_fraction=0.82, scheduler={"max_prefill_tokens": 32768})
        elif (engine == "sglang" and family == "deepseek_v3" and gpu == "b200" and dp > 1
              and dtype in ("fp4", "nvfp4")):
            # single_node/fixed_seq_len/dsr1_fp4_b200.sh with DP_ATTENTION: --enable-dp-attention,
            # chunks of 32,768 (the group's), --scheduler-recv-interval 1, 256 running, memory 0.85,
            # FP8 KV and --schedule-conservativeness 3.33 (init_new_token_ratio min(0.7 x 3.33, 1),
            # its floor 0.14 x that, the decay over 600 steps); --enable-prefill-delayer is not modelled
            out.update(kv_dtype="fp8", max_num_batched_tokens=32768, max_num_seqs=256, memory_fraction=0.85,
                       scheduler={"scheduler_recv_interval": 1, "init_new_token_ratio": 1.0,
                                  "min_new_token_ratio": 0.14, "new_token_ratio_decay": 0.86 / 600})
        elif engine == "sglang" and family == "deepseek_v3" and gpu == "b200" and dp == 1:
            out["kv_dtype"] = "fp8"
            fp4 = dtype in ("fp4", "nvfp4")
            if not fp4:  # dsr1_fp8_b200.sh: SGLANG_ENABLE_FLASHINFER_GEMM=true, SGL_ENABLE_JIT_DEEPGEMM=false
                out["gemm_backend"] = "flashinfer"
            recv = 30 if c >= 16 and (fp4 or tp >= 8) else 10  # the FP8 script: 10 at TP4 always
            if fp4:
                out.update(max_num_seqs=256, memory_fraction=0.85,
                           scheduler={"scheduler_recv_interval": recv})
            elif tp >= 8:
                out.update(max_num_batched_tokens=32768, max_num_seqs=128, memory_fraction=0.82,
                           scheduler={"max_prefill_tokens": 32768, "scheduler_recv_interval": recv})
            else:
                out.update(max_num_batched_tokens=8192, max_num_seqs=32, memory_fraction=0.95,
                           scheduler={"max_prefill_tokens": 8192, "scheduler_recv_interval": 10})
        return out

    def _mtp_recipe(self, engine: str, isl: int, c: int, *, gpu: str, tp: int, dp: int,
                    dtype: str) -> dict[str, object]:
        """InferenceMAX's DeepSeek-R1 MTP launch scripts (:meth:`recipe`, ``spec="mtp"``)."""
        fp4 = dtype in ("fp4", "nvfp4")
        out: dict[str, object] = {}
        if engine == "trtllm" and gpu in ("h200", "b200"):
            k = _trtllm_mtp_depth(dp)
            mbs = max(1, c // (tp * dp)) if dp > 1 else max(1, c)
            out.update(kv_dtype="fp8", max_num_seqs=mbs,
                       max_num_batched_tokens=64 * math.ceil(((k + 1) * mbs + isl + 64) / 64),
                       memory_fraction=0.75 if gpu == "h200" else 0.8,
                       cuda_graph_max_tokens=128 if gpu == "h200" else (512 if fp4 else 256))
            if dp > 1:
                out["scheduler"] = _trtllm_adp_balance()
        elif engine == "sglang" and gpu == "b200" and dp == 1:
            recv = 30 if c >= 16 else 10
            if fp4:
                out.update(kv_dtype="fp8", max_num_seqs=512, cuda_graph_max_tokens=512, memory_fraction=0.85,
                           max_num_batched_tokens=16384,
                           scheduler={"max_prefill_tokens": 16384, "scheduler_recv_interval": recv})
            else:  # dsr1_fp8_b200_mtp.sh also exports SGLANG_ENABLE_FLASHINFER_GEMM=true
                out.update(kv_dtype="fp8", max_num_seqs=256, cuda_graph_max_tokens=256, memory_fraction=0.82,
                           max_num_batched_tokens=32768, gemm_backend="flashinfer",
                           scheduler={"max_prefill_tokens": 32768, "scheduler_recv_interval": recv})
        return out

    @property
    def label(self) -> str:
        return CLIENTS[self.name]


@cache
def _recipes(name: str) -> tuple[dict[str, Any], ...]:
    """The ``recipes`` rows of the data file ``data/<name>.toml`` (read once)."""
    from servesim._catalogfile import read_toml

    return tuple(read_toml(Path(__file__).parent / "data" / f"{name}.toml")["recipes"])


def _recipes_for(name: str, gpu: str, dtype: str, isl: int, tp: int, dp: int, workers: int,
                 spec: str | None) -> list[dict[str, Any]]:
    """The rows of ``data/<name>.toml`` for this decode pool: the same GPU, dtype, prompt length,
    worker shape, worker count and speculation (``None`` and ``"none"`` alike: a row without
    ``spec``)."""
    want = (gpu, dtype, isl, tp, dp, workers, "none" if spec in (None, "none") else spec)
    keys = ("gpu", "dtype", "isl", "tp", "dp", "workers")
    return [r for r in _recipes(name) if (*(r[x] for x in keys), r.get("spec", "none")) == want]


def dynamo_trtllm_decode_batch(gpu: str, dtype: str, isl: int, tp: int, dp: int, workers: int,
                               concurrency: int, spec: str | None = None) -> int | None:
    """``max_batch_size`` (one attention-DP rank's running limit) of the decode workers of
    InferenceMAX's Dynamo + TensorRT-LLM recipe for this pool (``data/dynamo_trtllm_decode.toml``):
    among the recipes of the same GPU, dtype (``fp8``/``fp4``), prompt length (1024 or 8192),
    worker shape (``tp``, ``dp``), ``workers`` and speculation (``spec``: ``None`` or ``"none"``,
    or ``"mtp"``: its MTP recipes; other methods have none), the one whose benchmark concurrency
    is nearest ``concurrency`` in ratio, if within 2x; ``None`` where no recipe is that near."""
    if concurrency <= 0:
        return None
    best: tuple[float, int] | None = None
    for r in _recipes_for("dynamo_trtllm_decode", gpu, dtype, isl, tp, dp, workers, spec):
        for c in r["concurrency"]:
            d = abs(math.log(concurrency / c))
            if d <= math.log(2) and (best is None or d < best[0]):
                best = (d, int(r["max_batch_size"]))
    return None if best is None else best[1]


def dynamo_sglang_decode(gpu: str, dtype: str, isl: int, tp: int, dp: int, workers: int,
                         prefill_workers: int | None = None,
                         spec: str | None = None) -> tuple[int, float] | None:
    """``(max_running_requests, memory_fraction)`` of the decode workers of InferenceMAX's Dynamo +
    SGLang recipe for this deployment (``data/dynamo_sglang_decode.toml``): the recipe of the same
    GPU, dtype (``fp8``), prompt length (1024 or 8192), worker shape (``tp``, ``dp``), decode
    ``workers``, ``prefill_workers`` and speculation (``spec``: ``None``/``"none"`` or ``"mtp"``);
    with ``prefill_workers`` None, the one recipe of that decode pool if only one has it.  ``None``
    where no recipe matches."""
    rows = [r for r in _recipes_for("dynamo_sglang_decode", gpu, dtype, isl, tp, dp, workers, spec)
            if prefill_workers is None or r["prefill_workers"] == prefill_workers]
    if len(rows) != 1:
        return None
    return int(rows[0]["max_running_requests"]), float(rows[0]["memory_fraction"])


def draw_lengths(client: Client, isl: int, osl: int, n: int, seed: int) -> list[tuple[int, int]] | None:
    """``n`` (prompt, output) lengths as ``client`` draws them; None when every request has ``isl``
    and ``osl`` exactly (the range is a single point)."""
    pin, pax = client.length_range(isl)
    oin, oax = client.length_range(osl, output=True)
    if pin == pax == isl and oin == oax == osl:
        return None
    rng = random.Random(seed * 1_000_003 + 17)
    prompts = [rng.randint(pin, pax) for _ in range(n)]
    outputs = [rng.randint(oin, oax) for _ in range(n)]
    return list(zip(prompts, outputs, strict=True))


def arrival_times(rate_per_s: float, burstiness: float, n: int, seed: int) -> list[float]:
    """``n`` send times at ``rate_per_s``: gamma gaps of shape ``burstiness`` and mean ``1/rate``
    (exponential, i.e. Poisson arrivals, at burstiness 1).  The first request goes at 0."""
    rng = random.Random(seed)
    out, t = [], 0.0
    theta = 1.0 / (rate_per_s * burstiness)
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate_per_s) if burstiness == 1.0 else rng.gammavariate(burstiness, theta)
    return out
