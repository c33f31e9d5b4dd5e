"""The benchmark client: what requests it sends, with which lengths, and when.

A serving benchmark's numbers depend on the client as much as on the engine:
lengths that vary break the lock-step of closed-loop clients (every request of a
fixed-length run finishes in the same step, so the next wave's prompts all
arrive together and queue behind each other), and the tools read the same flag
differently.  :class:`Client` holds a tool's name and the flags that change what
it sends; :func:`draw_lengths` and :func:`arrival_times` produce the requests,
seeded, so a run is reproducible.  The tools and their rules are data
(``data/clients.toml``: each client's length rule, default and valid ratios,
warm-ups, and whether the harness has recipes and starts a fresh server).

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

import ast
import itertools
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import CodeType
from typing import Any

from servesim._catalogfile import read_toml
from servesim._checks import ParameterError, check_bound
from servesim._lazy import OnFirstUse

__all__ = ["CLIENTS", "LENGTH_RULES", "Client", "arrival_times", "default_client", "draw_lengths"]

def _labels() -> dict[str, str]:
    """The benchmark clients of ``data/clients.toml`` and what each is."""
    return {name: str(c["label"]) for name, c in _clients().items()}


CLIENTS: Mapping[str, str] = OnFirstUse(_labels)  # read when first used
"""Benchmark clients whose meanings servesim follows, and what each is (``data/clients.toml``)."""


@cache
def _clients() -> dict[str, dict[str, Any]]:
    """``data/clients.toml``'s clients, in the file's order."""
    return dict(_data_file("clients")["client"])


def default_client() -> str:
    """The client assumed where none is named (``data/clients.toml`` ``default_client``)."""
    return str(_data_file("clients")["default_client"])


def _ratio_range(c: dict[str, Any]) -> str:
    lo, hi = c["ratio_range"]
    return f"[{lo:g}, {hi:g}{')' if c['ratio_hi_open'] else ']'}"


def _ratio_ranges() -> str:
    """Each client's valid range ratios, clients of one range together: ``a: [0, 1); b and c: [0, 1]``."""
    groups: dict[str, list[str]] = {}
    for name, c in _clients().items():
        groups.setdefault(_ratio_range(c), []).append(name)
    return "; ".join(f"{' and '.join(names)}: {rng}" for rng, names in groups.items())


def _around(length: int, r: float, output: bool) -> tuple[int, int]:
    """``[floor(L (1 - r)), ceil(L (1 + r))]``, an output at least 1 (``vllm bench serve``)."""
    lo, hi = math.floor(length * (1 - r)), math.ceil(length * (1 + r))
    return (max(lo, 1) if output else lo), hi


def _up_to_min1(length: int, r: float, output: bool) -> tuple[int, int]:
    """``[max(1, int(r L)), L]`` (``sglang.bench_serving``)."""
    return max(int(length * r), 1), length


def _up_to(length: int, r: float, output: bool) -> tuple[int, int]:
    """``[int(r L), L]`` (vLLM's old ``benchmark_serving.py``)."""
    return int(length * r), length


LENGTH_RULES: dict[str, Callable[[int, float, bool], tuple[int, int]]] = {
    "around": _around, "up_to_min1": _up_to_min1, "up_to": _up_to}
"""How a client spreads a nominal length by its range ratio (``data/clients.toml`` ``lengths``)."""


@dataclass(frozen=True)
class Client:
    """A benchmark tool and the flags that change what it sends (see the module docstring).

    ``name`` empty is the default client (``data/clients.toml`` ``default_client``);
    ``random_range_ratio`` and ``num_warmups`` are None for the tool's own default.
    """

    name: str = ""
    random_range_ratio: float | None = None
    num_warmups: int | None = None
    burstiness: float = 1.0
    warm_server: bool = False  # the server already ran these shapes: no fresh-server cold start

    def __post_init__(self) -> None:
        if self.name == "":
            object.__setattr__(self, "name", default_client())
        if self.name not in CLIENTS:
            raise ParameterError("client", self.name, f"one of {', '.join(CLIENTS)}")
        if self.random_range_ratio is not None:
            c = self._data
            lo, hi = c["ratio_range"]
            r = self.random_range_ratio
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not (
                    lo <= r < hi if c["ratio_hi_open"] else lo <= r <= hi):
                raise ParameterError("random_range_ratio", r,
                                     f"in {_ratio_range(c)} for the {self.name} client ({_ratio_ranges()})")
        if self.num_warmups is not None:
            check_bound("num_warmups", self.num_warmups)  # the flag's range (_checks.BOUNDS)
        check_bound("burstiness", self.burstiness)
        if not isinstance(self.warm_server, bool):
            raise ParameterError("warm_server", self.warm_server, "true or false")

    @property
    def _data(self) -> dict[str, Any]:
        """This client's entry of ``data/clients.toml``."""
        return _clients()[self.name]

    @property
    def ratio(self) -> float:
        """The range ratio in force (the tool's default where none was given)."""
        r = self.random_range_ratio
        return float(self._data["default_ratio"]) if r is None else r

    @property
    def fresh_server(self) -> bool:
        """Whether the harness measures a freshly started server with warm-ups that leave its
        batched prefill cold (InferenceMAX: one server per run, every warm-up the first prompt), so
        that the measured first wave pays the engine's cold start (``EngineProfile.cold_start_s``);
        ``warm_server`` says the server has already run these shapes (a long-running deployment)."""
        return bool(self._data["fresh_server"]) and not self.warm_server

    def warmups(self, concurrency: int | None) -> int:
        """Warm-up requests sent first (InferenceMAX: 2 x concurrency; the others: none)."""
        if self.num_warmups is not None:
            return self.num_warmups
        per = int(self._data["warmups_per_concurrency"])
        return per * concurrency if per and concurrency else 0

    def length_range(self, length: int, *, output: bool = False) -> tuple[int, int]:
        """Smallest and largest length drawn for a nominal ``length`` (inclusive)."""
        lo, hi = LENGTH_RULES[self._data["lengths"]](length, self.ratio, output)
        return max(lo, 1), max(hi, 1)  # a zero-token prompt or output is not a request

    def mean_lengths(self, isl: int, osl: int) -> tuple[float, float]:
        """Mean prompt and output length of the drawn requests."""
        a, b = self.length_range(isl)
        c, d = self.length_range(osl, output=True)
        return (a + b) / 2, (c + d) / 2

    def disagg_recipe(self, engine: str, pool: str, isl: int, concurrency: int | None, *, gpu: str = "",
                      family: str = "", tp: int = 1, dp: int = 1, ep: int = 1, dtype: str = "",
                      workers: int = 1, spec: str | None = None,
                      peer_workers: int | None = None, osl: int = 0) -> dict[str, object]:
        """Server settings of one pool (``pool`` ``"prefill"`` or ``"decode"``) of the harness's own
        disaggregated recipes, where the engine's defaults differ (empty for the plain clients and
        the models the recipes do not cover): the keys of :meth:`recipe`, ``overlap``, and
        ``ep_comm`` where a recipe forces an expert-parallel exchange.  ``concurrency`` is the whole
        deployment's, ``workers`` the pool's worker count, ``tp`` and ``dp`` a worker's attention
        tensor and data parallel, ``ep`` its expert parallel, ``spec`` the speculation the run uses
        (the MTP recipes have decode batches of their own), ``peer_workers`` the other pool's worker
        count where known (SGLang's recipes of one decode shape differ by their prefill pool),
        ``osl`` the output length (0: unknown; the 1k8k recipes have decode pools of their own).

        InferenceMAX runs DeepSeek-R1 disaggregated with NVIDIA Dynamo from the srt-slurm recipes its
        ``nvidia-master.yaml`` names: section ``disagg`` of ``data/recipes.toml`` (each rule cites its
        recipe file), with the decode workers' batches from :func:`dynamo_trtllm_decode_batch` and
        :func:`dynamo_sglang_decode`."""
        return self._settings("disagg", engine=engine, pool=pool, isl=isl, concurrency=concurrency, gpu=gpu,
                              family=family, tp=tp, dp=dp, ep=ep, dtype=dtype, workers=workers, spec=spec,
                              peer_workers=peer_workers, osl=osl)

    @property
    def spec_traffic(self) -> str | None:
        """The traffic kind a speculative run of this harness sends (the acceptance presets'
        ``traffic``, :mod:`servesim.hardware.acceptance`), or None for the default (chat).

        InferenceMAX sends random token ids and, in its speculative runs, wraps them in the
        target's chat template (SemiAnalysisAI/InferenceX ``AGENTS.md``: every ``*_mtp.sh`` passes
        ``--use-chat-template``; ``dsr1_fp8_b200_trt_mtp.sh``): ``synthetic``.  The plain clients
        leave it to ``--traffic``."""
        return str(self._data["spec_traffic"]) or None

    def spec_recipe(self, engine: str, spec: str | None, *, family: str = "", dp: int = 1,
                    pool: str = "", gpu: str = "", dtype: str = "", isl: int = 0, osl: int = 0,
                    tp: int = 1, workers: int = 1, concurrency: int | None = None) -> dict[str, object]:
        """The speculation settings of the harness's own recipe for ``spec`` (empty where it has none):
        ``k`` (a chain of k drafts) or ``tree`` (SGLang's ``speculative_num_steps``,
        ``speculative_eagle_topk``, ``speculative_num_draft_tokens``).

        InferenceMAX runs DeepSeek-R1's MTP module with TensorRT-LLM at ``num_nextn_predict_layers``
        1 with attention DP and 3 without (``dsr1_*_trt_mtp.sh``), and with SGLang as EAGLE with 2
        steps, top-k 1 and 3 draft tokens (``dsr1_fp{4,8}_b200_mtp.sh``): section ``speculation`` of
        ``data/recipes.toml``.  For a disaggregated decode pool (``pool`` ``"decode"`` with the
        pool's ``gpu``, ``dtype``, ``tp``, ``dp``, ``workers`` and the run's ``isl``, ``osl`` and
        ``concurrency``, as :meth:`disagg_recipe` takes them) the depth of its Dynamo recipe file
        where the file states it (``mtp`` of its row of ``data/dynamo_trtllm_decode.toml``: 1, 2 or
        3, e.g. 3 in most DEP32 files, 1 in the DEP8 ones with batches of 256 and more)."""
        return self._settings("speculation", engine=engine, spec=spec, family=family, dp=dp, pool=pool,
                              gpu=gpu, dtype=dtype, isl=isl, osl=osl, tp=tp, workers=workers,
                              concurrency=concurrency)

    def recipe(self, engine: str, isl: int, concurrency: int | None, *, gpu: str = "",
               family: str = "", tp: int = 1, dp: int = 1, dtype: str = "",
               osl: int = 0, model: str = "", spec: str | None = None) -> dict[str, object]:
        """Server settings the harness's own launch recipe passes where the engine's defaults differ
        (empty for the plain clients): ``max_num_batched_tokens`` and ``max_num_seqs`` (the engine's
        budget and running limit under its own flag names), ``kv_dtype``, ``moe_backend``
        (TensorRT-LLM's ``moe_config.backend``: ``"trtllm"``, ``"deepgemm"`` or ``"triton"``),
        ``gemm_backend``, ``memory_fraction`` (the engine's memory flag: SGLang
        ``--mem-fraction-static``, TensorRT-LLM ``free_gpu_memory_fraction``), ``moe_activations``
        (``"mxfp8"``: MXFP4 experts run with MXFP8 activations), ``cuda_graph_max_tokens`` (its
        CUDA-graph limit: TensorRT-LLM ``cuda_graph_config.max_batch_size``, SGLang
        ``--cuda-graph-max-bs``, vLLM ``--max-cudagraph-capture-size``), ``piecewise_cuda_graphs``,
        and scheduler options.  ``gpu`` is the catalog name, ``family`` the MoE family
        (``deepseek_v3``, ...; empty for a dense model), ``tp`` the attention tensor parallel,
        ``dtype`` the weights as typed, ``model`` the architecture's name (``kimi-k2.5``, ...).

        InferenceMAX's launch scripts (SemiAnalysisAI/InferenceX ``benchmarks/*.sh``: DeepSeek-R1 on
        TensorRT-LLM and SGLang, gpt-oss on vLLM, TensorRT-LLM and SGLang, MiniMax-M2.5 and Kimi-K2.5
        on vLLM, Qwen3.5 on SGLang and TensorRT-LLM, and Llama-3.3-70B, its one dense model, on vLLM
        and TensorRT-LLM) are sections ``recipe`` and, with ``spec`` ``"mtp"`` for DeepSeek-R1 (its own MTP
        module, :meth:`spec_recipe`), ``mtp`` of ``data/recipes.toml``; each rule cites its script.
        E.g. TensorRT-LLM's ``--max_num_tokens = max(8192, 64 ceil((C + ISL + 64) / 64))``, so that a
        whole prompt and every running sequence fit in one step."""
        inputs: dict[str, object] = {"engine": engine, "isl": isl, "concurrency": concurrency, "gpu": gpu,
                                     "family": family, "tp": tp, "dp": dp, "dtype": dtype, "osl": osl,
                                     "model": model, "spec": spec}
        return {**self._settings("recipe", **inputs), **self._settings("mtp", **inputs)}

    def _settings(self, section: str, **inputs: object) -> dict[str, object]:
        """:func:`harness_settings` for InferenceMAX, the one harness with recipes; empty for the rest."""
        return harness_settings(section, **inputs) if self._data["recipes"] else {}

    @property
    def label(self) -> str:
        return CLIENTS[self.name]


@cache
def _data_file(name: str) -> dict[str, Any]:
    """The data file ``data/<name>.toml`` (read once)."""
    return read_toml(Path(__file__).parent / "data" / f"{name}.toml")


def _recipes_for(name: str, gpu: str, dtype: str, isl: int, tp: int, dp: int, workers: int,
                 spec: str | None, osl: int = 1024) -> list[dict[str, Any]]:
    """The rows of ``data/<name>.toml`` for this decode pool: the same GPU, dtype, prompt length,
    output length (a row without ``osl``: 1024), worker shape, worker count and speculation
    (``None`` and ``"none"`` alike: a row without ``spec``).  Where the file has no row of that
    GPU, dtype, prompt and output length at all, the 1,024-token output's rows stand in (e.g. the
    1k8k recipes of GPUs whose table holds only 1k1k and 8k1k)."""
    rows = _data_file(name)["recipes"]
    if not any((r["gpu"], r["dtype"], r["isl"], r.get("osl", 1024)) == (gpu, dtype, isl, osl) for r in rows):
        osl = 1024
    want = (gpu, dtype, isl, osl, tp, dp, workers, "none" if spec in (None, "none") else spec)
    keys = ("gpu", "dtype", "isl")
    return [r for r in rows if (*(r[x] for x in keys), r.get("osl", 1024), r["tp"], r["dp"], r["workers"],
                                r.get("spec", "none")) == want]


_RECIPE_INPUTS: dict[str, object] = {
    "engine": "", "pool": "", "isl": 0, "osl": 0, "concurrency": None, "gpu": "", "family": "", "model": "",
    "tp": 1, "dp": 1, "ep": 1, "dtype": "", "workers": 1, "peer_workers": None, "spec": None}
_RECIPE_NODES = (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.IfExp, ast.Call,
                 ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.Subscript, ast.boolop, ast.operator,
                 ast.unaryop, ast.cmpop)


@cache
def _recipe_expression(text: str) -> CodeType:
    """One expression of ``data/recipes.toml``, compiled once: arithmetic, comparisons,
    ``a if b else c``, tuples, indexing and calls of the functions :func:`harness_settings` names;
    an attribute, a lambda or a comprehension is refused."""
    tree = ast.parse(text, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _RECIPE_NODES) or (isinstance(node, ast.Call)
                                                   and not isinstance(node.func, ast.Name)):
            raise ValueError(f"data/recipes.toml: {text!r}: {type(node).__name__} is not allowed")
    return compile(tree, "data/recipes.toml", "eval")


def harness_settings(section: str, **inputs: object) -> dict[str, object]:
    """The settings ``section`` of ``data/recipes.toml`` (InferenceMAX's launch recipes) gives for
    these inputs (the keys of ``_RECIPE_INPUTS``; the rest at their defaults): empty unless the
    section's ``when`` holds; else every rule whose ``when`` holds sets its ``set``, in file order
    (a later rule overriding a key), after the file's and the section's ``vars``.  A ``set`` value
    that is a string starting with ``=`` is an expression (a nested table is read the same way)."""
    if inputs.keys() - _RECIPE_INPUTS.keys():
        raise TypeError(f"harness_settings: unknown inputs {sorted(inputs.keys() - _RECIPE_INPUTS.keys())}")
    data = _data_file("recipes")
    part, namespace = data[section], {"__builtins__": {}, **_RECIPE_FUNCTIONS, **_RECIPE_INPUTS, **inputs}

    def ev(text: str) -> Any:
        return eval(_recipe_expression(text), namespace)

    def settings(table: dict[str, Any]) -> dict[str, object]:
        return {k: settings(v) if isinstance(v, dict) else ev(v[1:]) if str(v).startswith("=") else v
                for k, v in table.items()}

    for name, text in data["vars"].items():  # in order: a var may use the ones above it
        namespace[name] = ev(text)
    if not ev(part["when"]):
        return {}
    for name, text in part.get("vars", {}).items():
        namespace[name] = ev(text)
    return {k: v for rule in part["rules"] if ev(rule["when"]) for k, v in settings(rule["set"]).items()}


def dynamo_trtllm_decode_recipe(gpu: str, dtype: str, isl: int, tp: int, dp: int, workers: int,
                                concurrency: int, spec: str | None = None,
                                osl: int = 1024) -> dict[str, Any] | None:
    """The row of ``data/dynamo_trtllm_decode.toml`` (InferenceMAX's Dynamo + TensorRT-LLM recipe
    of this decode pool: ``max_batch_size`` a rank and, where read from the recipe file, the
    decode worker's ``memory_fraction`` and ``moe_backend``, and of an MTP recipe its ``mtp``:
    ``num_nextn_predict_layers``): among the recipes of the same GPU,
    dtype (``fp8``/``fp4``), prompt length (1024 or 8192), output length (1024 or 8192),
    worker shape (``tp``, ``dp``), ``workers`` and speculation (``spec``: ``None`` or ``"none"``,
    or ``"mtp"``: its MTP recipes; other methods have none), the one whose benchmark concurrency
    is nearest ``concurrency`` in ratio, if within 2x; ``None`` where no recipe is that near."""
    if concurrency <= 0:
        return None
    best: tuple[float, dict[str, Any]] | None = None
    for r in _recipes_for("dynamo_trtllm_decode", gpu, dtype, isl, tp, dp, workers, spec, osl):
        for c in r["concurrency"]:
            d = abs(math.log(concurrency / c))
            if d <= math.log(2) and (best is None or d < best[0]):
                best = (d, r)
    return None if best is None else best[1]


def dynamo_trtllm_decode_batch(gpu: str, dtype: str, isl: int, tp: int, dp: int, workers: int,
                               concurrency: int, spec: str | None = None, osl: int = 1024) -> int | None:
    """``max_batch_size`` (one attention-DP rank's running limit) of the decode workers of
    InferenceMAX's Dynamo + TensorRT-LLM recipe for this pool: :func:`dynamo_trtllm_decode_recipe`'s
    row's; ``None`` where no recipe is near."""
    row = dynamo_trtllm_decode_recipe(gpu, dtype, isl, tp, dp, workers, concurrency, spec, osl)
    return None if row is None else int(row["max_batch_size"])


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


_RECIPE_FUNCTIONS: dict[str, object] = {
    "min": min, "max": max, "ceil": math.ceil, "log2": math.log2, "startswith": str.startswith,
    "dynamo_trtllm_decode_batch": dynamo_trtllm_decode_batch,
    "dynamo_trtllm_decode_recipe": dynamo_trtllm_decode_recipe, "dynamo_sglang_decode": dynamo_sglang_decode}
"""The functions an expression of ``data/recipes.toml`` may call."""


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
    if n <= 0:
        return []
    rng = random.Random(seed)
    if burstiness == 1.0:  # Random.expovariate's own formula, without a call a gap (a third of the time)
        draw, log = rng.random, math.log
        gaps = [-log(1.0 - draw()) / rate_per_s for _ in range(n - 1)]
    else:
        theta = 1.0 / (rate_per_s * burstiness)
        gaps = [rng.gammavariate(burstiness, theta) for _ in range(n - 1)]
    return list(itertools.accumulate(gaps, initial=0.0))  # each send the one before plus its gap
