"""Build servesim's compact kernel tables from aiconfigurator's measured kernel timings of three engines.

Reads the parquet tables that ai-dynamo/aiconfigurator (Apache-2.0) measured with vLLM, SGLang and
TensorRT-LLM on seven GPUs and writes one table per (GPU, engine), plus ``NOTICE.md`` and the
license, for :mod:`servesim.hardware.kernels`, which reads them with the standard library only.
pyarrow is needed by this script alone, never by the installed package.

    python scripts/build_kernel_tables.py [--source DIR] [--out DIR] [--check]

``--source`` defaults to ``../shared/data/kernels`` relative to the repository root, ``--out`` to
``src/servesim/hardware/data/kernels``.  The output is byte-for-byte deterministic: sorted keys,
latencies rounded to 4 significant digits, gzip with mtime 0.  ``--check`` rebuilds in memory and
fails if a shipped file differs (or a stale table is left in the folder).

Engines, versions and files (one per GPU and engine; the vLLM file keeps its old name):

| engine (``engine_name``) | A100 | H100, H200, B200, B300, GB200, GB300 | file |
|---|---|---|---|
| vLLM (``vllm``) | 0.14.0 | 0.24.0 | ``<gpu>.json.gz`` |
| SGLang (``sglang``) | 0.5.10 | 0.5.14 (B300: MoE file only, see below) | ``<gpu>_sglang.json.gz`` |
| TensorRT-LLM (``trtllm``) | 1.0.0 (not shipped, see below) | 1.3.0rc20 | ``<gpu>_trtllm.json.gz`` |

The rack-scale and Blackwell Ultra folders (``gb200``: GB200 NVL72; ``gb300``: GB300 NVL72;
``b300_sxm``: HGX B300) are read exactly as the B200's: same kernel sources per engine (the
Blackwell defaults below), same NCCL 2.29.2 table (2 and 4 GPUs on GB200 / GB300, one tray;
2, 4 and 8 on the B300), same DeepEP tables (one node: the 4 GPUs of a tray on GB200 / GB300).
Two exceptions: (1) ``b300_sxm/``'s SGLang GEMM and attention parquet files name the device
'NVIDIA GB300' and are byte-identical to ``gb300/``'s, so a GB300 measured them: no
``b300_sxm_sglang.json.gz`` is built (MEASURED_ELSEWHERE; servesim prices SGLang's dense kernels
on the B300 with vLLM 0.24.0's B300 tables and says so); its MoE / MLA file is built (those rows
name the B300).  (2) ``gb200/`` alone holds TensorRT-LLM's MNNVL all-to-all
(``comm_trtllm_1.3.0rc10_trtllm_alltoall_perf``; its rows say version 1.2.0rc6), kept in
``gb200_trtllm_moe.json.gz`` (``mnnvl``, below).

The engine's parquet files are the ones named ``<kind>_<engine>_<version>_...``; every row of
one table must name the same device and version (asserted).  The NCCL table and ``system.yaml``
belong to the GPU and are the same in its three files.

What is kept (per GPU and engine; NOTICE.md repeats this text):

* GEMM (``gemm_perf``), by upstream ``gemm_dtype`` -> servesim dtype, with the kernel_source of
  each engine (exactly one source per dtype and GPU; each (dtype, m, n, k) has exactly one row
  upstream, asserted, so no kernel choice is made):

  - ``bfloat16`` -> ``bf16``: vLLM torch.nn.functional.linear (cuBLAS; ``vllm_default`` on the
    A100), SGLang ``sglang_torch_linear`` (``sglang`` on the A100), TensorRT-LLM ``torch_flow``.
  - ``fp8`` (per-tensor scaled) -> ``fp8``: vLLM CutlassFP8ScaledMMLinearKernel, SGLang
    ``sglang_sgl_kernel_fp8_scaled_mm``, TensorRT-LLM ``torch_flow``.  Not on the A100.
  - ``nvfp4`` -> ``fp4`` (B200 only): vLLM FlashInferCuteDslNvFp4LinearKernel, SGLang
    ``sglang_flashinfer_cutedsl_nvfp4``, TensorRT-LLM ``torch_flow``.
  - ``fp8_block`` (128 x 128 block-scaled weights, DeepSeek-V3 / Qwen3-FP8 style) -> ``fp8_block``
    for SGLang (``sglang_deepgemm_gemm_nt_f8f8bf16``) and TensorRT-LLM (``torch_flow`` on Hopper,
    ``deepgemm`` on the B200); DROPPED for vLLM.  Checked against the same engine's per-tensor fp8
    GEMM at the same shape (n k >= 2^22): SGLang's and TensorRT-LLM's are sane, median ratio
    0.64-1.14 per m range (1-16, 17-256, 257-2048, > 2048) on every GPU, except SGLang on the B200
    at m <= 256 (1.7x, plausible for DeepGEMM's small-m path); their fitted HBM share at
    m <= 16 is 0.52-0.64 on Hopper (H100 n = k = 8192, m = 1: 0.031 ms for 64 MiB of weights),
    0.42 (TensorRT-LLM) and 0.23 (SGLang) on the B200.  vLLM's are not GEMM
    times (median 3-3.5x per-tensor fp8 at m <= 256 on Hopper, 12-14x on the B200; at n = k =
    4096 the B200 DeepGemm takes 0.16-0.28 ms for every m from 1 to 4352, where the FP8 weight
    read alone is 2 us), so they would mislead a step model.
  - DROPPED: TensorRT-LLM 1.0.0's A100 ``int8_wo`` / ``int4_wo`` (weight-only) and ``sq``
    (SmoothQuant) GEMMs: servesim has no such dtypes.

  Grids: m 1..32768 (74 values; 21 values 1..8192 on the A100 for vLLM and TensorRT-LLM), n and
  k 32..65536 (22 values; 21 on the A100 for vLLM and TensorRT-LLM; 20 values 128..65536 for
  fp8_block and fp4 of SGLang and TensorRT-LLM).  TensorRT-LLM 1.3.0rc20 lacks 42 of the
  points of each Hopper/Blackwell dtype (null, like any point not measured).
* Decode attention (``generation_attention_perf``): ``window_size`` 0 (no sliding window; the
  128 / 1024 / 8192 window rows are dropped) and the kernel_source a default deployment of the
  engine runs on the GPU (the other sources' rows are dropped):

  - vLLM: A100 (0.14) ``vllm_flash_attn`` (FlashAttention 2, the only one measured); H100 and
    H200 ``vllm_flash_attn_fa3`` (FlashAttention 3; the few ``vllm_flash_attn_fa4`` bf16 rows are
    dropped); B200 ``vllm_flashinfer_trtllmdecode`` (FlashInfer's TRT-LLM kernels; the
    ``vllm_triton_attn`` fp8 rows are dropped).
  - SGLang: for a standard (MHA/GQA) model its server picks ``fa3`` on Hopper and ``trtllm_mha``
    on Blackwell when no ``--attention-backend`` is given, so H100 and H200 keep ``fa3``
    (``triton`` dropped) and the B200 ``trtllm_mha`` (``flashinfer`` and ``triton`` dropped).
    A100 (0.5.10): the only source measured is ``flash_attention``, SGLang's FlashAttention
    backend; a default A100 deployment would run FlashInfer, which was not measured, so the
    A100 SGLang attention is the nearest measured stand-in, not the default kernel.
  - TensorRT-LLM: ``torch_flow``, the PyTorch flow's default attention backend (``TRTLLM``:
    TensorRT-LLM's own FMHA context kernels and XQA / masked-MHA generation kernels) on every
    GPU; the B200's ``torch_flow_flashinfer`` rows (the opt-in FLASHINFER backend) are dropped.

  Keyed by (kv_cache_dtype bf16/fp8, num_heads, num_key_value_heads, head_dim), each a grid
  batch_size x step (step = tokens already in the KV cache: 1, 3, 7, ..., 131071).
* Prefill attention (``context_attention_perf``): the same, grid batch_size x isl; the B200's vLLM
  table keeps ``vllm_flashinfer_trtllmprefill`` (its ``trtllmdecode`` and ``triton`` rows are
  dropped), everything else the same source as for decode.
* Query dtype.  Per KV dtype, the rows with bf16 queries (``attn_dtype`` bfloat16) are kept where
  that source measured any, else the fp8-query rows; the choice is stored per KV dtype as
  ``attn_dtype``.  So every decode table and every bf16-KV table has bf16 queries; TensorRT-LLM's
  fp8-KV prefill keeps its bf16-query rows and drops the fp8-query ones (FP8 context FMHA, which
  TensorRT-LLM turns on for FP8/NVFP4-quantized checkpoints); SGLang measured fp8-KV prefill only
  with fp8 queries (its FA3 and trtllm_mha backends quantize q to the cache's FP8), so those are
  kept (``attn_dtype`` fp8).  Repeated measurements of one point (A100 vLLM only: 408 points
  measured twice) -> their median.
* All-reduce: each engine's own all-reduce as serving runs it, under CUDA graphs, grid num_gpus x
  message size: vLLM's custom all-reduce (backend ``vllm_graph``), SGLang's
  (``sglang_graph``; the ``sglang_eager`` rows are dropped), TensorRT-LLM's AllReduce op
  (kernel_source ``TRTLLM``, the only set measured: strategy AUTO, its own one-/two-shot kernels
  and NCCL for large messages; the collector captures it in a CUDA graph); and NCCL
  ``all_reduce`` of ``half`` for reference.  Each hands large messages to NCCL: above a few MiB
  all four agree within a few %.
* ``system.yaml``: mem_bw, mem_capacity, tensor-core FLOP/s of bf16 / fp8 / fp4, intra- and
  inter-node bandwidth; the device name and engine version from the parquet rows.
* Plausibility.  A table is not built when its decode attention cannot be what it claims:
  measured points with at least 2^27 bytes of KV (far beyond any L2) that finish sooner than
  reading that KV at HBM_PLAUSIBLE = 1.1 x the GPU's HBM bandwidth.  Only TensorRT-LLM 1.0.0 on
  the A100 fails: 288 such points (348 above 1.0 x), up to 1.69 x HBM (16 heads, 8 KV heads, batch 64, context
  16383: 4.3 GB of KV in 2.5 ms), and its GQA rows take a median 0.61 x the time of MHA rows
  with the same KV heads (same KV read, less work per byte is impossible at that size; vLLM and
  SGLang read 0.97-1.00 x); its context-255 column also reads at up to 1.23 x HBM.  So there is
  no ``a100_sxm_trtllm.json.gz``: servesim prices TensorRT-LLM on the A100 with vLLM 0.14.0's
  tables and says so.  (The highest share shipped: SGLang's H100 bf16 decode at 1.07 x HBM,
  23 points of head_dim 192 at batch 128; every other table stays at or under 1.0 x.)

Size: everything shipped (the dense tables, the ``_moe`` files below, NOTICE.md and the license)
is about 6.4 MB of the 8 MB budget (3.8 MB before the B300, GB200 and GB300 were added; their
latencies to 3 significant digits, below), so every grid is kept in full (no shapes dropped, no
axis thinned).

Changes made to the measured numbers:

1. Latency stays in milliseconds, rounded to 4 significant digits; on the B300, GB200 and GB300
   (COARSE_GPUS) to 3 (at most 0.5% off, far inside the measurements' own scatter), which keeps
   the wheel under its 8 MB budget: 3.4 MB of their tables at 4 digits, 2.5 MB at 3.  Rounding is
   monotone, so the envelope below stays monotone.
2. Made monotone.  The raw tables are noisy: some points are 2-10x slower than a larger
   neighbour (e.g. H100 vLLM fp8 m=17, n=2048, k=768: 0.0566 ms where m=32 takes 0.0060 ms; B200
   vLLM fp8 flips between ~0.005 and ~0.02-0.3 ms at small m; SGLang's 8-GPU H100 all-reduce
   takes 0.038 ms at 1 KiB and 0.0035 ms at 2 KiB).  A smaller problem can always be run by
   padding it to a larger one, so every point is replaced by its monotone envelope (the least
   latency measured at any grid point >= it on every axis: m, n, k for GEMMs; batch and
   context/prompt for attention; size for all-reduce), GLITCH = 1.0.  This also removes the
   smaller systematic effects the engines show (e.g. H100 vLLM bf16 m=1 GEMVs up to 1.2x slower
   than m=32: an engine step is priced as if it padded to the cheaper shape).  After this every
   table is monotone: latency(p) <= latency(q) whenever q >= p on every axis, and so is its
   log-log multilinear interpolation, so that a priced engine step never gets cheaper with more
   tokens, context or batch (``tests/hardware/test_step_bounds.py``).  The script prints the
   share of points above their envelope per table (most under 1% by more than 5%; B200 vLLM
   fp8 about 12%).  Points that were not measured stay missing (null).
3. All-reduce ``message_size`` is converted from ELEMENTS to BYTES (x 2 for bf16 / half), for
   every engine; the evidence follows.

The unit of all-reduce ``message_size``: elements, not bytes, in every engine's table.

a) NCCL half vs int8 at the same message_size: half takes 1.5-1.9x as long at large sizes
   (H100 2 GPUs, 2^28: 1.686 ms half vs 0.908 ms int8).  If the unit were bytes, the same bytes
   of either dtype would take about the same time; as elements, half moves twice the bytes.  And
   half at S elements vs int8 at 2 S elements (the same bytes) agree within 1-7% on 2 and 4 GPUs
   of every machine and on 8 A100s (3%); on 8 B200s int8 is 10% slower per byte and on 8
   H100/H200s 27-31% slower (H100: 2.677 vs 2.111 ms for 2^29 bytes): NCCL's algorithm differs
   by dtype there, plausibly NVLink SHARP, which reduces half in the switch but not int8.
b) Bus bandwidth at the largest sizes, busbw = 2 (N-1)/N x bytes / time, as elements of 2 bytes:
   H100 8 GPUs 445 GB/s and H200 8 GPUs 460 GB/s of the 450 GB/s NVLink (intra_node_bw; in-switch
   reduction lets an all-reduce reach ~100%), A100 8 GPUs 222 of 300 GB/s (74%, the usual
   nccl-tests figure for A100), B200 8 GPUs 704 of 900 GB/s (78%); 2 GPUs 59-71%.  Read as
   bytes, every machine would reach only 30-51% of NVLink, far below what NCCL reaches there.
c) Every engine's table (bf16) equals NCCL half at the same message_size at large sizes: at
   2^28 the vLLM, SGLang and TensorRT-LLM tables are within 2% of NCCL on every GPU and GPU
   count (H100 2 GPUs: vLLM 1.706, SGLang 1.686, TensorRT-LLM 1.683, NCCL 1.686 ms), except 4
   B200s (SGLang 6%, TensorRT-LLM 8% slower): above their size limits the engines hand the
   all-reduce to NCCL, so the tables share NCCL's unit.  The script prints the ratio for every
   table.
d) The limits: vLLM's custom all-reduce runs while the tensor is < 8 MiB; the A100 (vLLM 0.14)
   graph table jumps 3.6x between message_size 2^21 and 2^22 (0.0252 -> 0.0897 ms, 2 GPUs), i.e.
   between 4 MiB and 8 MiB if the unit is bf16 elements (it would be 2 -> 4 MiB as bytes, below
   the limit).  SGLang's runs while the tensor is <= 8 MiB; its A100 (0.5.10) table jumps 2.8x
   between 2^22 and 2^23 (0.0447 -> 0.127 ms, 2 GPUs), i.e. between 8 and 16 MiB as elements (4
   -> 8 MiB as bytes would both be inside the limit).  (SGLang 0.5.14 on the H100, H200 and B200
   hands over one size later, between 2^23 and 2^24: a larger limit there, which this evidence
   does not pin down; (c) does.)
e) The aiconfigurator all-reduce collector builds a bf16 tensor of ``message_size`` elements
   (shape [size / 4096, 4096]) and logs that count as ``message_size`` for every engine.

The script prints this evidence (busbw per GPU count, each table against NCCL) when it runs.

Fitted roofline efficiencies (stored under ``efficiency``, used by servesim outside the measured
range), from the STORED grid values, per table:

* GEMM per dtype: ``memory`` = median over m <= 16 and n k >= 2^24 of
  (weight bytes / mem_bw) / latency, weight bytes = n k x (2 bf16, 1 fp8 and fp8_block, 0.5625
  fp4: 4 bits + one FP8 scale per 16 values); ``compute`` = median over m, n, k >= 4096 of
  (2 m n k / peak) / latency (peak of the dtype: bf16, fp8 (also for fp8_block) or fp4
  tensor-core FLOP/s); ``floor_ms`` = median latency over m <= 4, n <= 128, k <= 128
  (launch-bound shapes).
* Decode attention per KV dtype: ``memory`` = median over points that read >= 2^27 bytes of KV
  of (KV bytes / mem_bw) / latency, KV bytes = batch x step x kv_heads x head_dim x 2 (K and V)
  x (2 bf16, 1 fp8); ``floor_ms`` = median over batch <= 2, step <= 15.
* Prefill attention per KV dtype: ``compute`` = median over isl >= 4096 of
  (FLOPs / bf16 peak) / latency, FLOPs = 4 batch heads head_dim isl (isl + 1) / 2 (causal);
  ``floor_ms`` = median over batch 1, isl <= 16.
* All-reduce per GPU count: ``bus`` = busbw / intra_node_bw at the largest size, ``floor_ms`` =
  latency at the smallest size.

MoE, MLA and expert-parallel communication: one more file per GPU and engine,
``<gpu>_moe.json.gz`` (vLLM), ``<gpu>_sglang_moe.json.gz``, ``<gpu>_trtllm_moe.json.gz``, read by
:mod:`servesim.hardware.moe_kernels`.  All twelve are built, TensorRT-LLM 1.0.0's on the A100
too: its MoE rows pass the plausibility check below (its dense tables are not shipped for their
decode attention alone).  Each holds:

* MoE layer (``moe_perf``): rows of one routing distribution, MOE_DISTRIBUTION =
  ``power_law_1.01``, keyed by servesim dtype and the measured shape ``hidden,inter,topk,experts,
  moe_tp,moe_ep`` (exactly the real models' shapes, e.g. DeepSeek-V3/R1 ``7168,2048,8,256``,
  Kimi-K2 ``7168,2048,8,384``, Qwen3-235B-A22B ``4096,1536,8,128``, Qwen3-30B-A3B
  ``2048,768,8,128``, gpt-oss-120b / 20b ``2880,2880,4,128`` / ``2880,2880,4,32``, Mixtral
  ``4096,14336,2,8`` / ``6144,16384,2,8``, Llama-4 Scout / Maverick ``5120,8192,1,16`` /
  ``5120,8192,1,128``, MiniMax-M2.5 ``3072,1536,8,256``), each a grid over num_tokens (1..16384,
  27 values; 1..65536, 30 values, for vLLM 0.14.0 and TensorRT-LLM 1.0.0 on the A100).

  - What is timed (ai-dynamo/aiconfigurator ``collector/vllm/collect_moe.py``,
    ``collector/sglang/collect_moe.py``, ``collector/trtllm/collect_moe.py``): one rank's MoE
    layer called with router logits: the top-k selection (grouped top-k where the model's config
    asks for it, vLLM; SGLang's EP rows are handed the rank's routed tokens and top-k
    ready-made), the activation quantization of the quantized dtypes, the two grouped
    GEMMs with SwiGLU between them, and the weighted sum over the top-k (TensorRT-LLM's
    finalize).  Not timed: the router GEMM, shared experts, any all-reduce
    (``reduce_results=False``) and the EP dispatch / combine.  ``num_tokens`` is every token the
    layer routes over the whole EP group (aiconfigurator's ``MoE.query`` passes the tokens of
    one attention rank times ``attention_dp_size``); the rank holds ``experts / moe_ep`` experts
    of ``inter / moe_tp`` each and runs the pairs routed to them.
  - dtypes: ``bfloat16`` -> ``bf16``, ``fp8`` (per-tensor) -> ``fp8``, ``fp8_block`` ->
    ``fp8_block``, ``nvfp4`` -> ``fp4``, ``w4a16_mxfp4`` -> ``mxfp4``, ``int4_wo`` -> ``int4``,
    ``w4a8_mxfp4_mxfp8`` (B200: MXFP4 weights, activations quantized to MXFP8, the kernel
    TensorRT-LLM runs an MXFP4 checkpoint with on Blackwell) -> ``mxfp4_mxfp8``.  The
    kernel_source of each point is
    the one the engine's own dispatch chose (vLLM's collector builds ``FusedMoE`` and logs the
    backend vLLM's oracle selected; e.g. Hopper fp8_block runs Triton without EP and FlashInfer
    CUTLASS with it), so no point has two sources and none is chosen here; NOTICE.md lists them
    per file.  One exception, TensorRT-LLM's MoE backends (``moe_config.backend``): on the B200
    and the GB200 it measured NVFP4 twice, with the CUTLASS kernels (``moe_torch_flow_cutlass``,
    CUTLASS being ``MoeConfig.backend``'s default in ``tensorrt_llm/llmapi/llm_args.py``, and what
    ``ModelConfig.resolve_moe_backend`` resolves AUTO to for DeepSeek) and with the TRTLLM-gen
    kernels (``moe_torch_flow_min_latency``, the ``TRTLLM`` backend, timed without the finalize
    kernel: aiconfigurator ``collector/trtllm/collect_moe.py`` runs it with ``do_finalize=False``).
    Each backend is priced by its own rows: the ``fp4`` grid is CUTLASS's alone, and the TRTLLM-gen
    rows are a table of their own, ``moe.backends.trtllm`` (the same grid format and fitted
    efficiencies, every measured token count, each point plus its finalize: ``finalize_ms``, the
    top-k BF16 outputs read and the rows written at HBM speed, at least one 3 us kernel), which
    :mod:`servesim.hardware.moe_kernels` hands a deployment whose ``moe_config.backend`` is TRTLLM
    (a recipe rule: InferenceMAX ``benchmarks/dsr1_fp4_b200_trt.sh`` sets TRTLLM below 256 clients
    at 1k input and up to 32 at 8k/1k, CUTLASS above; the Dynamo recipes name theirs).  The two
    agree with the FlashInfer TRTLLM-gen rows SGLang and vLLM measured on the same GPU (DeepSeek-V3
    shape, TP8, 4 tokens: 32 us TensorRT-LLM TRTLLM-gen, 31 us SGLang, 85 us CUTLASS).  Until
    this build the ``fp4`` grid took the faster of the two up to 256 tokens, which priced the
    default CUTLASS backend by TRTLLM-gen's rows.  Block FP8 runs on TRTLLM-gen kernels under
    that backend too (InferenceMAX ``dsr1_fp8_b200_trt.sh``: TRTLLM below 256 clients, DeepGEMM
    above), which TensorRT-LLM's own B200 table did not time (only DeepGEMM): its points at <= 256
    tokens without expert parallelism are still the faster of DeepGEMM and SGLang's FlashInfer
    TRTLLM-gen rows of the same GPU and shape (``BORROW_TRTLLM_GEN``; SGLang's EP rows are handed
    ready-made routing, a different layer, and are not borrowed).  That prices the DEEPGEMM backend
    there by TRTLLM-gen's rows; DeepGEMM's own rows alone were tried and not kept: the 18 colocated
    B200 FP8 TP8 MTP runs of ``benchmarks/inferencex.py --mtp`` (``dsr1_fp8_b200_trt_mtp.sh``:
    MOE_BACKEND DEEPGEMM) went from 10.1% to 40.4% median |TPOT error| (+40% signed), DeepGEMM's TP8
    rows at 1-256 tokens being 0.098-0.40 ms against SGLang's TRTLLM-gen 0.035-0.27 ms.
  - Rows dropped: non-gated (ReLU^2) shapes (NONGATED_SHAPES, the Nemotron-3 / Nemotron-H shapes
    TensorRT-LLM labels ``moe_torch_flow_nongated``; vLLM and SGLang measured the same shapes
    unlabelled, and their rows read 1.4-1.5x HBM if counted as 3 GEMMs: every model servesim
    prices is gated); TensorRT-LLM's ``moe_torch_flow_min_latency`` NVFP4 rows of the other
    routing distributions (the rest are the TRTLLM backend's table, above); on the B200
    vLLM table, 972 rows of a preview build (``0.1.dev19262``, Kimi-K3) whose version is not the
    table's; the Kimi-K3 rows timed with SiLU standing in for its SiTU activation (kernel sources
    ending ``_situ_as_silu``, vLLM and SGLang on Hopper; SGLang's leave gaps in num_tokens where
    cells crashed), a model servesim does not price; the ``balanced`` and ``power_law_1.2`` rows.
    Repeats of a point (SGLang 0.5.10 on the A100 measured the Kimi-K2 shape twice) -> their
    median.
  - vLLM's per-tensor ``fp8`` rows on Hopper are DROPPED (MOE_NOT_RUN).  They time
    ``vllm_modeloptfp8moe_flashinfer_cutlass_flashinferexperts``: FlashInfer's CUTLASS MoE, which
    takes per-tensor FP8 only with static activation scales (vLLM
    ``fused_moe/experts/flashinfer_cutlass_moe.py`` ``FlashInferExperts._supports_quant_scheme``:
    ``(kFp8StaticTensorSym, kFp8StaticTensorSym)``), i.e. a ModelOpt FP8 checkpoint.  servesim's
    ``fp8`` experts are an FP8 deployment with dynamic activation scales (``--dtype fp8`` of a BF16
    checkpoint is vLLM's online ``--quantization fp8``; the ``-FP8-dynamic`` releases): for those
    ``fused_moe/oracle/fp8.py`` ``select_fp8_moe_backend`` finds no FlashInfer or DeepGEMM kernel
    on SM 90 and runs Triton's ``fused_moe`` (``use_fp8_w8a8`` without a block shape), the kernel
    of vLLM's own Hopper ``fp8_block`` rows without EP, which servesim then prices them with (the
    fallback of per-tensor FP8 to the engine's block-FP8 table, as for SGLang).  The rows are also
    not plausible as an FP8 kernel: a median 2.2x (H100) and 2.5x (H200) the time of vLLM's BF16
    Triton rows at the same shape and tokens (2.1-3.1x in every tokens range) while reading half
    the weight bytes, 2.9-3.1x the same FlashInfer CUTLASS kernel's block-FP8 rows (EP > 1), a
    fitted 18% (H100) and 13% (H200) of HBM against BF16's 80% and 74%.  The B200's rows
    (FlashInfer TRTLLM-gen, and CUTLASS for one shape) take 0.64x BF16's and are kept.
  - Routing distribution.  aiconfigurator measured balanced routing and power laws of alpha
    1.01 and 1.2, where the busiest EP rank's experts are moved onto the measured rank.
    ``power_law_1.01`` is kept because it is aiconfigurator's default (its models set
    ``_power_law_alpha = 1.01``), the only distribution measured on the A100 for vLLM and
    TensorRT-LLM, and with EP the time of the hottest rank, which sets the step (real routing
    is skewed; EPLB evens it out only partly); and because vLLM's and SGLang's balanced rows of
    the DeepSeek-V3 shape are not balanced: from 32 tokens on they plateau at about half the
    time of reading every expert (up to 1.8x HBM if all 256 were read), as grouped top-k
    (n_group 8, topk_group 4) sending equally scored tokens to the same 4 of 8 groups would
    (TensorRT-LLM, routed with plain renormalized top-k, shows no such plateau).  The ratio to
    balanced, median over points per table (NOTICE.md has each): 0.92-1.00x at <= 64 tokens (skew
    touches fewer experts, so fewer weights are read), 0.93-1.05x at 65-1024, and above 1024
    1.01-1.11x without EP, 1.10-1.43x with EP (the hot rank's larger GEMMs; power_law_1.2: up to
    1.61x).
  - Plausibility (MOE_PLAUSIBLE = 1.1): points that must read every local expert's weights
    (balanced routing with tokens >= ceil(experts / topk); without balanced rows, tokens x topk
    >= 8 x experts) and hold >= 2^27 bytes of them do not finish sooner than that read at 1.1x
    HBM, except the DeepSeek-V3 balanced plateau above (not kept).  Any other point would stop
    the build.
  - Monotone envelope along num_tokens, GLITCH = 1.0, rounding to 4 significant digits, as for
    the dense tables.
  - Sibling GPUs.  The B200 and the GB200 are one GPU die (Blackwell) in two products, as are the B300
    and the GB300 (Blackwell Ultra): an HGX part and the same GPU in a Grace superchip of an NVL72 rack
    at a higher power limit, with the same HBM3e (``scripts/gpu_siblings.toml`` lists the pairs with
    NVIDIA's datasheets; system.yaml: the same sm_version, 100 and 103).  Each MoE series (kernel
    source, dtype, shape and layout, each backend's apart) of one GPU is compared with the same series
    of its sibling: the median ratio over the token counts both measured (at least SIBLING_MIN_POINTS =
    3).  Over a whole table the pair agrees to within a few %: the median of those ratios (B200 / GB200)
    is 1.047 (vLLM), 1.039 (SGLang), 1.043 (TensorRT-LLM); B300 / GB300 1.030, 1.027, 1.023.  Around it,
    vLLM's and SGLang's series stay within 1.04-1.05 x (99th percentile of max(r / median, median / r);
    SGLang B200 / GB200 1.15 x, seven Triton BF16 series on the GB200 up to 1.5 x), while TensorRT-LLM
    1.3.0rc20's have a long tail on both pairs: 95th percentile 1.29-1.32 x, 99th 1.73-1.76 x, up to
    2.0-2.1 x, all in its CUTLASS MoE kernels (``moe_torch_flow_cutlass``: BF16, FP8, NVFP4) but two
    MXFP4 x MXFP8 series (``moe_torch_flow``) on the B200 and two on the B300, none in DeepGEMM or
    TRTLLM-gen.  E.g. DeepSeek-V3's NVFP4 layer at EP8, 256 tokens: 0.291 ms on the B200 (2.9 x the
    0.100 ms of its 803 MB of weights and activations at 8 TB/s), 0.151 ms on the GB200; its B200 /
    GB200 medians by layout: TP1 EP1 1.76, EP4 1.84, EP8 1.71, EP16 1.65, TP2 EP1 1.68, TP2 EP8 1.50,
    TP4 EP1 1.58, while TP1 EP2 1.04, TP8 1.05, EP32 0.99.  One die cannot run the same kernel 1.7 x
    slower in one product at some layouts and not at their neighbours: it is the collected row
    (plausibly a poorly tuned tactic), not the hardware.  So where the table-wide median ratio m lies
    within SIBLING_TABLE_BAND = 0.9-1.1, a series more than SIBLING_SLOW = 1.3 x its sibling's over m
    (ratio / m > 1.3; for the sibling's side m / ratio > 1.3), in log terms five times the controls'
    99th percentile, is replaced by the sibling's series times m (its own points where the sibling
    measured none), never under its speed of light (bytes at the full HBM bandwidth or FLOPs at the full
    peak, as for the fitted efficiencies: 39 B200 and 6 B300 points are held there, where the sibling's
    power-law row reads fewer experts than uniform routing would touch), kept monotone, and the table's
    fitted efficiencies are refit.  Stretches: inside a series whose median ratio stays under that, a
    run of at least SIBLING_STRETCH = 3 consecutive token counts both measured, each more than
    SIBLING_SLOW x its sibling's over m, is replaced point by point the same way (the rest of the series
    kept; the series' monotone envelope taken again), listed with the token counts of the stretch.
    E.g. TensorRT-LLM's TRTLLM-gen NVFP4 rows for DeepSeek-V3 at EP64 on the B200 run 1.37-1.82 x the
    GB200's at 80-320 tokens (a stretch), 0.86-1.21 x at 1-64 and 0.96-1.34 x from 384.  Whole series
    replaced: TensorRT-LLM on the B200 109 series (52 NVFP4, 27 FP8, 28
    BF16, 2 MXFP4 x MXFP8; 1.36-2.11 x), on the GB200 18 (1.27-1.86 x), on the B300 76 (9 NVFP4, 38 FP8,
    27 BF16, 2 MXFP4 x MXFP8; 1.34-2.13 x), on the GB300 22 (1.27-1.84 x); SGLang on the GB200 7 Triton
    BF16 series (1.25-1.46 x); none of vLLM's.  Each ``_moe`` file lists its replaced series under
    ``moe.sibling_substitutions`` (the sibling, the median ratio used, the threshold, and per series the
    backend, dtype, shape, kernel source and measured ratio); NOTICE.md lists them all, and servesim's
    lookups of such a shape carry a note.

* Core MLA (``context_mla_perf``, ``generation_mla_perf``; ``mla_dtype`` bfloat16 only): the
  attention kernel of the engine's MLA backend for DeepSeek-V3's dimensions (kv_lora_rank 512,
  rope 64, nope 128, v 128), by kv_cache_dtype (bf16, fp8) and query heads per GPU (1..128),
  grid batch 1..1024 x step 1..131071 (decode; step = tokens already in the latent cache) and
  batch 1..256 x isl 1..32768 (prefill; batch x isl <= 65536 measured, the rest filled at lookup
  as for attention).  Sources: SGLang ``flash_attention`` (FA3) on Hopper, ``trtllm_mla`` on the
  B200; TensorRT-LLM ``default`` (its TRTLLM backend, FlashMLA-enabled metadata); vLLM 0.14.0
  ``vllm_triton_mla`` on the A100 (bf16 latent cache only).  The absorbed BMMs and all
  projections are not in these times (aiconfigurator ``collector/*/collect_mla.py``).  Repeats
  (the same heads per GPU at several tp_size, TensorRT-LLM 1.0.0; H100 SGLang measured twice) ->
  their median.  NOT measured: vLLM 0.24.0's core MLA (it timed only whole attention modules,
  ``mla_*_module_perf``, projections included, DeepSeek-V3 only, with the backend switching
  between points: not shipped, they would double count the GEMMs servesim prices) and SGLang
  0.5.10's on the A100.  servesim prices those with another engine's core MLA on the same GPU
  (MLA_FALLBACK): vLLM with TensorRT-LLM's, because the two engines' whole-module tables agree
  (median vLLM / TensorRT-LLM 0.99-1.20x at batch x context >= 2^18, NOTICE.md) while SGLang's
  FA3 MLA with an fp8 latent cache on H100 and H200 takes a median 9.6x TensorRT-LLM's (it reads
  the cache at 6-8% of HBM; its bf16 one is 1.02x); SGLang on the A100 with vLLM 0.14.0's.
* MLA BMM (``mla_bmm_perf``): ``mla_gen_pre`` (q_nope x W_UK) -> ``pre`` and ``mla_gen_post``
  (latent x W_UV) -> ``post``, by dtype (bf16; fp8 for SGLang and TensorRT-LLM) and heads per GPU,
  over num_tokens 1..20480 (28 values).  Repeats (H100 SGLang) -> median.
* DeepEP (``comm_sglang_0.5.12_wideep_deepep_{ll,normal}_perf``, H100, H200, B200; none on the
  A100): dispatch and combine times of one rank of one node (``node_num`` 1: EP 8), ``us`` ->
  ms, by ``hidden,topk,experts``; low-latency over tokens per rank (1..1024), normal over SMs
  (4..24, DeepEP's default 20) x tokens per rank (1..131072; ``*_transmit_us``, notify 0).  The
  low-latency tables' own bandwidth column times their latency equals tokens x topk x (hidden +
  hidden / 128 x 4 + 16) bytes for dispatch (FP8 with scales) and tokens x topk x 2 hidden for
  combine (BF16) at every row, so tokens are per rank.  The normal dispatch moves FP8: on the H100
  and H200 BF16 would exceed NVLink (7168 hidden, 131072 tokens, top-8 over 256 experts in 15.5-15.9
  ms is 283-289 GB/s to the other ranks as FP8, 550-561 GB/s of the 450 as BF16; the B200, with
  the same collector and the same time, reaches 31% of its NVLink); combine BF16.  Envelope along
  tokens only.
* MNNVL all-to-all (GB200 only: ``comm_trtllm_*_trtllm_alltoall_perf``): TensorRT-LLM's wide-EP
  dispatch and combine through the NVLink domain's shared memory (``communication_factory.py``
  picks NVLinkOneSided first, then NVLinkTwoSided, before NCCL-EP and DeepEP), per kernel
  (``NVLinkOneSided`` -> ``one_sided``: NVFP4 dispatch and combine, EP 2-32; ``NVLinkTwoSided`` ->
  ``two_sided``: prepare, dispatch, combine (and NVFP4's low-precision combine) of BF16, FP8 and
  NVFP4 activations, EP 2-64), by moe_dtype, grid EP x tokens per rank (1..65536), DeepSeek-V3's
  shape (7168, top-8, 256 experts) with balanced routing, the only ones measured.  Tokens are each
  rank's own: the bytes one rank sends (``mnnvl_bytes``) over the latency reach 62-85% of NVLink
  at the largest sizes (``efficiency.mnnvl``); as a total over the EP group they would be 2-3%.
  Envelope along tokens.  ``bus`` per key = the median over EP of those bytes / NVLink / latency
  at the largest tokens, ``floor_ms`` the median latency at 1 token.
* MoE token gaps: SGLang 0.5.14 on GB200 did not time 2 tokens of one shape (fp8_block
  5120,8192,1,128 at TP8 EP8, power_law_1.01); such an interior gap takes the next measured
  count's time (its envelope) and is listed under ``moe.filled_from_next_count``.
* NCCL ``all_gather``, ``reduce_scatter`` and ``alltoall`` of ``half`` (``comm_nccl_*_nccl_perf``),
  grid num_gpus (2, 4, 8) x bytes; the int8 rows are not kept.  ``message_size`` is converted
  from ELEMENTS to BYTES (x 2), as for all-reduce: aiconfigurator's ``collector/collect_nccl.py``
  logs nccl-tests' byte size divided by the element size; half at S takes the time of int8 at 2 S
  (within 0.5% at the largest size for both ops and every GPU count, NOTICE.md; mid sizes scatter
  both ways by up to 25%); and read as elements the bus bandwidths at the largest size are
  37-75% of NVLink (as bytes they would be 18-37%).  The size is nccl-tests': the
  gathered output of all_gather, the whole input of reduce_scatter (each rank keeps 1 / N of it
  reduced), each rank's send buffer of alltoall.  Envelope along bytes.

Fitted efficiencies of the ``_moe`` files (under ``efficiency``, from the stored values):

* MoE per dtype, with bytes = E_local (1 - (1 - topk / E)^tokens) x 3 hidden (inter / tp) x
  weight bytes (2 bf16, 1 fp8 / fp8_block, 0.5625 fp4, 0.53125 mxfp4 (4 bits + an E8M0 scale per
  32), 0.515625 int4 (4 bits + a bf16 scale per 128)) + tokens x topk / ep x (4 hidden + 6 inter /
  tp) activation bytes, and FLOPs = 6 tokens x topk / ep x hidden x inter / tp: ``memory`` =
  median (bytes / mem_bw) / latency over points with tokens x topk >= 4 E (every expert
  touched), <= 16 pairs per expert and >= 2^27 bytes of local weights (else all points with
  tokens <= 16); ``compute`` = median (FLOPs / peak) / latency over >= 256 pairs per expert and
  >= 2^36 FLOPs (else each shape's largest token count), peak of the dtype (bf16 for the
  weight-only mxfp4 and int4); ``floor_ms`` = the least latency of the dtype.
* Core MLA per KV dtype: decode ``memory`` over heads <= 16 and >= 2^27 bytes of latent cache,
  bytes = batch (context x 576 x KV bytes + heads x 1088 x 2); ``compute`` over heads >= 64 and
  batch x context >= 2^18, FLOPs = 2 batch heads context (576 + 512); ``floor_ms`` = median over
  batch <= 2, context <= 15.  Prefill ``compute`` over isl >= 4096 with FLOPs = 2 batch heads
  (192 + 128) isl (isl + 1) / 2; ``floor_ms`` over batch 1, isl <= 16.  Peak: bf16.
* MLA BMM per dtype: ``memory`` over tokens <= 16, heads >= 16 (weights heads x 128 x 512 x dtype
  bytes, at most 16 MiB, so L2 can push it above 1), ``compute`` over tokens >= 4096, heads >= 32,
  ``floor_ms`` the least latency.
* DeepEP per mode and kind: ``bus`` = median over shapes of bytes / intra_node_bw / latency at the
  largest tokens (normal: at 20 SMs), bytes as above (normal: one copy per destination rank, the
  expected distinct ranks of a uniform top-k); ``floor_ms`` = median latency at the fewest tokens.
* all_gather, reduce_scatter and alltoall per GPU count: ``bus`` = (N - 1) / N x bytes / latency /
  intra_node_bw at the largest size, ``floor_ms`` = latency at the smallest.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the backport (pyproject's tomli dependency)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "kernels"
DEFAULT_OUT = ROOT / "src" / "servesim" / "hardware" / "data" / "kernels"

UPSTREAM_REPO = "ai-dynamo/aiconfigurator"
UPSTREAM_COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
UPSTREAM_FOLDER = ("aic-core/src/aiconfigurator_core/systems/data/<gpu>/ and "
                   "aic-core/src/aiconfigurator_core/systems/<gpu>.yaml")
LICENSE_FILE = "LICENSE-aiconfigurator-Apache-2.0.txt"

GPUS = ("a100_sxm", "h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300")
BLACKWELL = ("b200_sxm", "b300_sxm", "gb200", "gb300")  # the same engine defaults on every Blackwell GPU
ENGINES = ("vllm", "sglang", "trtllm")
ENGINE_LABEL = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
FORMAT = 1
SIG_DIGITS = 4
GLITCH = 1.0
COARSE_GPUS = ("b300_sxm", "gb200", "gb300")  # latencies stored to 3 significant digits (module docstring)
HBM_PLAUSIBLE = 1.10  # a decode step cannot read its KV cache faster than this x HBM (see implausible_decode)
SIZE_BUDGET = 8_000_000  # bytes, everything shipped in the folder

# per engine: upstream gemm_dtype -> (servesim name, the kernel_sources allowed for it)
GEMM_DTYPES: dict[str, dict[str, tuple[str, frozenset[str]]]] = {
    "vllm": {
        "bfloat16": ("bf16", frozenset({"torch.nn.functional.linear", "vllm_default"})),
        "fp8": ("fp8", frozenset({"CutlassFP8ScaledMMLinearKernel"})),
        "nvfp4": ("fp4", frozenset({"FlashInferCuteDslNvFp4LinearKernel"})),
    },
    "sglang": {
        "bfloat16": ("bf16", frozenset({"sglang_torch_linear", "sglang"})),
        "fp8": ("fp8", frozenset({"sglang_sgl_kernel_fp8_scaled_mm"})),
        "fp8_block": ("fp8_block", frozenset({"sglang_deepgemm_gemm_nt_f8f8bf16"})),
        "nvfp4": ("fp4", frozenset({"sglang_flashinfer_cutedsl_nvfp4"})),
    },
    "trtllm": {
        "bfloat16": ("bf16", frozenset({"torch_flow"})),
        "fp8": ("fp8", frozenset({"torch_flow"})),
        "fp8_block": ("fp8_block", frozenset({"torch_flow", "deepgemm"})),
        "nvfp4": ("fp4", frozenset({"torch_flow"})),
    },
}
DROPPED_GEMM_DTYPES = {  # see the module docstring
    "vllm": frozenset({"fp8_block"}),
    "sglang": frozenset(),
    "trtllm": frozenset({"int8_wo", "int4_wo", "sq"}),
}
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "fp4": 0.5625}
PEAK_KEY = {"bf16": "bfloat16_tc_flops", "fp8": "fp8_tc_flops", "fp8_block": "fp8_tc_flops",
            "fp4": "fp4_tc_flops"}
KV_DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}
KV_BYTES = {"bf16": 2.0, "fp8": 1.0}
QUERY_DTYPES = ("bfloat16", "fp8")  # preference order of attn_dtype per KV dtype

# The attention kernel a default deployment of each engine runs on each GPU (module docstring).
DECODE_SOURCE = {
    "vllm": {"a100_sxm": "vllm_flash_attn", "h100_sxm": "vllm_flash_attn_fa3",
             "h200_sxm": "vllm_flash_attn_fa3", **dict.fromkeys(BLACKWELL, "vllm_flashinfer_trtllmdecode")},
    "sglang": {"a100_sxm": "flash_attention", "h100_sxm": "fa3", "h200_sxm": "fa3",
               **dict.fromkeys(BLACKWELL, "trtllm_mha")},
    "trtllm": dict.fromkeys(GPUS, "torch_flow"),
}
PREFILL_SOURCE = {
    "vllm": {"a100_sxm": "vllm_flash_attn", "h100_sxm": "vllm_flash_attn_fa3",
             "h200_sxm": "vllm_flash_attn_fa3", **dict.fromkeys(BLACKWELL, "vllm_flashinfer_trtllmprefill")},
    "sglang": DECODE_SOURCE["sglang"],
    "trtllm": DECODE_SOURCE["trtllm"],
}
# The all-reduce serving runs: (backend column value or None where the table has one set, kernel_source)
ALLREDUCE = {
    "vllm": ("vllm_graph", "vLLM_custom_graph"),
    "sglang": ("sglang_graph", "SGLang_CustomAllReduce_graph"),
    "trtllm": (None, "TRTLLM"),
}
ALLREDUCE_ELEMENT_BYTES = 2  # bf16 (engines) and half (NCCL): message_size counts elements
# Dense tables not built because their GEMM and attention rows were measured on another GPU (the
# parquet files are byte-identical to that GPU's): servesim prices the engine there with the GPU's
# vLLM tables, as for a table not built for implausibility (module docstring, "Not built")
MEASURED_ELSEWHERE = {
    ("b300_sxm", "sglang"): ("SGLang 0.5.14's GEMM and attention tables in b300_sxm/ name the device "
                             "'NVIDIA GB300' and are byte-identical to gb300/'s (its all-reduce, MoE and "
                             "MLA tables name 'NVIDIA B300 SXM6 AC'): a GB300 (2.5 PFLOP/s BF16) measured "
                             "them, not a B300 (2.25), so they are not shipped as the B300's"),
}


def log(msg: str) -> None:
    sys.stderr.write(msg + "\n")


def r4(x: float) -> float:
    """Round to SIG_DIGITS significant digits (the stored precision)."""
    return float(f"{x:.{SIG_DIGITS - 1}e}")


def read_rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


def one_file(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise SystemExit(f"{folder}: expected one file matching {pattern}, found {[p.name for p in found]}")
    return found[0]


def table_file(gpu: str, engine: str) -> str:
    """The shipped file of one (GPU, engine); vLLM's keeps the name it had before other engines."""
    return f"{gpu}.json.gz" if engine == "vllm" else f"{gpu}_{engine}.json.gz"


def read_system(path: Path) -> dict[str, float | str]:
    """The numbers servesim keeps from system.yaml (a flat 'key: value  # comment' reader)."""
    keep = {"mem_bw", "mem_capacity", "bfloat16_tc_flops", "fp8_tc_flops", "fp4_tc_flops",
            "intra_node_bw", "inter_node_bw", "num_gpus_per_node"}
    out: dict[str, float | str] = {}
    for line in path.read_text().splitlines():
        body = line.split("#", 1)[0].strip()
        if ":" not in body:
            continue
        key, value = (s.strip() for s in body.split(":", 1))
        if key in keep and value:
            out[key] = float(value)
    missing = {"mem_bw", "mem_capacity", "bfloat16_tc_flops", "intra_node_bw"} - out.keys()
    if missing:
        raise SystemExit(f"{path}: missing {sorted(missing)}")
    return out


def envelope(grid: list[float | None], shape: Sequence[int], pad_axes: Iterable[int]) -> list[float | None]:
    """Suffix minimum along the ``pad_axes`` of a C-ordered grid: each value becomes the least
    measured value at any point >= it on those axes (padding a smaller problem to a larger one is
    always possible).  Missing points (None) stay missing and do not take part."""
    inf = math.inf
    vals = [inf if v is None else v for v in grid]
    strides = [1] * len(shape)
    for a in range(len(shape) - 2, -1, -1):
        strides[a] = strides[a + 1] * shape[a + 1]
    for a in pad_axes:
        size, st = shape[a], strides[a]
        for flat in range(len(vals) - 1, -1, -1):  # from the top so the minimum propagates down
            if (flat // st) % size < size - 1:
                nxt = vals[flat + st]
                if nxt < vals[flat]:
                    vals[flat] = nxt
    return [None if g is None else v for g, v in zip(grid, vals, strict=True)]


def dense(points: dict[tuple[int, ...], float], axes: Sequence[Sequence[int]]) -> list[float | None]:
    """C-ordered flat grid over ``axes`` with None where a point was not measured."""
    out: list[float | None] = []

    def rec(prefix: tuple[int, ...], depth: int) -> None:
        if depth == len(axes):
            out.append(points.get(prefix))
            return
        for v in axes[depth]:
            rec((*prefix, v), depth + 1)

    rec((), 0)
    return out


def finish(raw: list[float | None], shape: Sequence[int], stats: dict[str, list[float]],
           label: str, pad_axes: Sequence[int] | None = None) -> list[float | None]:
    """Replace glitches (> GLITCH x the monotone envelope) by the envelope, then round.

    Records raw / envelope of every measured point (for the summary the script prints)."""
    env = envelope(raw, shape, range(len(shape)) if pad_axes is None else pad_axes)
    ratios = stats.setdefault(label, [])
    out: list[float | None] = []
    for a, e in zip(raw, env, strict=True):
        if a is None or e is None:
            out.append(None)
            continue
        ratios.append(a / e)
        out.append(r4(e if a > GLITCH * e else a))
    return out


def median(xs: Iterable[float]) -> float:
    lst = list(xs)
    if not lst:
        raise SystemExit("empty selection for a fitted efficiency")
    return statistics.median(lst)


def points_of(grid: list[float | None],
              axes: Sequence[Sequence[int]]) -> Iterable[tuple[tuple[int, ...], float]]:
    idx = 0

    def rec(prefix: tuple[int, ...], depth: int) -> Iterable[tuple[tuple[int, ...], float]]:
        nonlocal idx
        if depth == len(axes):
            v = grid[idx]
            idx += 1
            if v is not None:
                yield prefix, v
            return
        for a in axes[depth]:
            yield from rec((*prefix, a), depth + 1)

    yield from rec((), 0)


# --------------------------------------------------------------------------- tables


def build_gemm(rows: list[dict[str, Any]], engine: str, system: dict[str, float | str],
               stats: dict[str, list[float]]) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    by_dtype: dict[str, dict[tuple[int, int, int], float]] = defaultdict(dict)
    sources: dict[str, set[str]] = defaultdict(set)
    known = GEMM_DTYPES[engine]
    for r in rows:
        if r["gemm_dtype"] in DROPPED_GEMM_DTYPES[engine]:
            continue
        if r["gemm_dtype"] not in known:
            raise SystemExit(f"{engine}: unknown gemm_dtype {r['gemm_dtype']!r}")
        name, allowed = known[r["gemm_dtype"]]
        if r["kernel_source"] not in allowed:
            raise SystemExit(f"{engine}: unexpected kernel_source {r['kernel_source']!r} "
                             f"for {r['gemm_dtype']}")
        key = (r["m"], r["n"], r["k"])
        if key in by_dtype[name]:
            raise SystemExit(f"{engine}: two rows for {name} {key}: a kernel choice would be needed")
        by_dtype[name][key] = float(r["latency"])
        sources[name].add(r["kernel_source"])
    for name, srcs in sources.items():
        if len(srcs) != 1:
            raise SystemExit(f"{engine}: {name} GEMMs from several kernels {sorted(srcs)}")
    tables: dict[str, Any] = {}
    eff: dict[str, Any] = {}
    for name, pts in sorted(by_dtype.items()):
        axes = [sorted({p[i] for p in pts}) for i in range(3)]
        shape = [len(a) for a in axes]
        grid = finish(dense(pts, axes), shape, stats, f"gemm {name}")
        tables[name] = {"m": axes[0], "n": axes[1], "k": axes[2], "ms": grid}
        mem_bw = float(system["mem_bw"])
        peak = float(system[PEAK_KEY[name]])
        wb = WEIGHT_BYTES[name]
        pts_s = list(points_of(grid, axes))
        memory = median(n * k * wb / mem_bw / (v * 1e-3) for (m, n, k), v in pts_s
                        if m <= 16 and n * k >= 2**24)
        compute = median(2 * m * n * k / peak / (v * 1e-3) for (m, n, k), v in pts_s
                         if m >= 4096 and n >= 4096 and k >= 4096)
        floor = median(v for (m, n, k), v in pts_s if m <= 4 and n <= 128 and k <= 128)
        eff[name] = {"memory": r4(memory), "compute": r4(compute), "floor_ms": r4(floor)}
    return tables, eff, {k: ", ".join(sorted(v)) for k, v in sorted(sources.items())}


def build_attention(rows: list[dict[str, Any]], source: str, axis: str, system: dict[str, float | str],
                    stats: dict[str, list[float]], label: str) -> tuple[dict[str, Any], dict[str, Any]]:
    # (kv dtype, query dtype) -> "heads,kv_heads,head_dim" -> (batch, length) -> latencies
    pts: dict[tuple[str, str], dict[str, dict[tuple[int, int], list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for r in rows:
        if r["kernel_source"] != source or (r.get("window_size") or 0) != 0:
            continue
        if r["attn_dtype"] not in QUERY_DTYPES or r["beam_width"] != 1:
            raise SystemExit(f"unexpected attention row {r}")
        kv = KV_DTYPES[r["kv_cache_dtype"]]
        key = f"{r['num_heads']},{r['num_key_value_heads']},{r['head_dim']}"
        pts[(kv, r["attn_dtype"])][key][(r["batch_size"], r[axis])].append(float(r["latency"]))
    if not pts:
        raise SystemExit(f"no {label} rows for {source}")
    query: dict[str, str] = {}  # kv dtype -> the query dtype kept
    for kv in sorted({k for k, _ in pts}):
        query[kv] = next(q for q in QUERY_DTYPES if (kv, q) in pts)
    kept = {kv: pts[(kv, q)] for kv, q in query.items()}
    batches = sorted({p[0] for d in kept.values() for by in d.values() for p in by})
    lengths = sorted({p[1] for d in kept.values() for by in d.values() for p in by})
    shape = [len(batches), len(lengths)]
    grids: dict[str, dict[str, list[float | None]]] = defaultdict(dict)
    for kv in sorted(kept):
        for heads in sorted(kept[kv]):
            med = {p: statistics.median(v) for p, v in kept[kv][heads].items()}
            grids[kv][heads] = finish(dense(med, [batches, lengths]), shape, stats, label)
    mem_bw = float(system["mem_bw"])
    peak = float(system["bfloat16_tc_flops"])
    eff: dict[str, Any] = {}
    for kv, by_heads in sorted(grids.items()):
        samples_eff: list[float] = []
        samples_floor: list[float] = []
        for heads, grid in by_heads.items():
            h, g, d = (int(x) for x in heads.split(","))
            for (b, s), v in points_of(grid, [batches, lengths]):
                if label == "decode":
                    kv_bytes = b * s * g * d * 2 * KV_BYTES[kv]
                    if kv_bytes >= 2**27:
                        samples_eff.append(kv_bytes / mem_bw / (v * 1e-3))
                    if b <= 2 and s <= 15:
                        samples_floor.append(v)
                else:
                    flops = 4 * b * h * d * s * (s + 1) / 2
                    if s >= 4096:
                        samples_eff.append(flops / peak / (v * 1e-3))
                    if b == 1 and s <= 16:
                        samples_floor.append(v)
        kind = "memory" if label == "decode" else "compute"
        eff[kv] = {kind: r4(median(samples_eff)), "floor_ms": r4(median(samples_floor))}
    table = {"kernel_source": source, "batch": batches,
             ("context" if label == "decode" else "prompt"): lengths, "ms": grids,
             "attn_dtype": {kv: KV_DTYPES[q] for kv, q in sorted(query.items())}}
    return table, eff


def allreduce_rows(custom: list[dict[str, Any]], engine: str) -> list[dict[str, Any]]:
    """The rows of the all-reduce a serving deployment of ``engine`` runs (CUDA graphs)."""
    backend, source = ALLREDUCE[engine]
    sel = [r for r in custom if r.get("backend") == backend]
    if not sel or {r["kernel_source"] for r in sel} != {source}:
        raise SystemExit(f"{engine} all-reduce: expected kernel_source {source}, got "
                         f"{sorted({r['kernel_source'] for r in sel})}")
    if {r["allreduce_dtype"] for r in sel} != {"bfloat16"}:
        raise SystemExit(f"{engine} all-reduce: expected bfloat16 only")
    return sel


def build_allreduce(sel: list[dict[str, Any]], nccl: list[dict[str, Any]], system: dict[str, float | str],
                    stats: dict[str, list[float]]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    def grid_of(rows: list[dict[str, Any]], label: str) -> dict[str, Any]:
        pts: dict[tuple[int, int], list[float]] = defaultdict(list)
        for r in rows:
            pts[(r["num_gpus"], r["message_size"] * ALLREDUCE_ELEMENT_BYTES)].append(float(r["latency"]))
        gpus = sorted({p[0] for p in pts})
        sizes = sorted({p[1] for p in pts})
        med = {p: statistics.median(v) for p, v in pts.items()}
        grid = finish(dense(med, [gpus, sizes]), [len(gpus), len(sizes)], stats, label, pad_axes=[1])
        return {"gpus": gpus, "bytes": sizes, "ms": grid}

    ar = grid_of(sel, "allreduce")
    ar["kernel_source"] = ", ".join(sorted({r["kernel_source"] for r in sel}))
    nc_rows = [r for r in nccl if r["op_name"] == "all_reduce" and r["nccl_dtype"] == "half"]
    nc = grid_of(nc_rows, "nccl allreduce")
    nc["kernel_source"] = "NCCL all_reduce, half"
    nvl = float(system["intra_node_bw"])
    eff: dict[str, Any] = {}
    ns = len(ar["bytes"])
    for i, n in enumerate(ar["gpus"]):
        row = ar["ms"][i * ns:(i + 1) * ns]
        last = row[-1]
        first = row[0]
        assert last is not None and first is not None
        busbw = 2 * (n - 1) / n * ar["bytes"][-1] / (last * 1e-3)
        eff[str(n)] = {"bus": r4(busbw / nvl), "floor_ms": r4(first)}
    return ar, nc, eff


def unit_evidence(nccl: list[dict[str, Any]], system: dict[str, float | str], gpu: str) -> str:
    """Bus bandwidth of NCCL all-reduce at the largest sizes, reading message_size as elements."""
    lines = []
    nvl = float(system["intra_node_bw"])
    by: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for r in nccl:
        if r["op_name"] == "all_reduce":
            by[(r["nccl_dtype"], r["num_gpus"])][r["message_size"]] = float(r["latency"])
    for n in sorted({k[1] for k in by}):
        half, int8 = by[("half", n)], by[("int8", n)]
        s = max(half)
        t_half, t_int8 = half[s], int8[s]
        bus_el = 2 * (n - 1) / n * s * 2 / (t_half * 1e-3)
        same_bytes = int8.get(2 * s)
        per_byte = ("" if same_bytes is None
                    else f"; int8 at {2 * s} (same bytes as elements) {same_bytes:.4g} ms")
        lines.append(f"{gpu} NCCL {n} GPUs, message_size {s}: half {t_half:.4g} ms, int8 {t_int8:.4g} ms "
                     f"(ratio {t_half / t_int8:.2f}){per_byte}; busbw as elements {bus_el / 1e9:.0f} GB/s = "
                     f"{bus_el / nvl:.0%} of NVLink, as bytes {bus_el / 2e9:.0f} GB/s = "
                     f"{bus_el / 2 / nvl:.0%}")
    return "\n".join(lines)


def engine_unit_evidence(sel: list[dict[str, Any]], nccl: list[dict[str, Any]], gpu: str, label: str) -> str:
    """An engine's all-reduce against NCCL half at the same message_size (large sizes), and where
    the engine's table jumps most between neighbouring sizes (its hand-over to NCCL)."""
    mine: dict[int, dict[int, float]] = defaultdict(dict)
    ref: dict[int, dict[int, float]] = defaultdict(dict)
    for r in sel:
        mine[r["num_gpus"]][r["message_size"]] = float(r["latency"])
    for r in nccl:
        if r["op_name"] == "all_reduce" and r["nccl_dtype"] == "half":
            ref[r["num_gpus"]][r["message_size"]] = float(r["latency"])
    parts = []
    for n in sorted(mine):
        common = sorted(set(mine[n]) & set(ref[n]))
        s = max(common)
        sizes = sorted(mine[n])
        jump = max(range(len(sizes) - 1), key=lambda i: mine[n][sizes[i + 1]] / mine[n][sizes[i]])
        a, b = sizes[jump], sizes[jump + 1]
        parts.append(f"{n} GPUs at {s}: {mine[n][s]:.4g} vs NCCL {ref[n][s]:.4g} ms "
                     f"(x{mine[n][s] / ref[n][s]:.3f}), largest step x{mine[n][b] / mine[n][a]:.2f} "
                     f"between {a} and {b}")
    return f"{gpu} {label}: " + "; ".join(parts)


def build_table(folder: Path, gpu: str, engine: str,
                all_stats: dict[str, list[float]]) -> tuple[dict[str, Any], str]:
    stats: dict[str, list[float]] = {}
    system = read_system(folder / "system.yaml")
    gemm_rows = read_rows(one_file(folder, f"gemm_{engine}_*_gemm_perf.parquet"))
    decode_rows = read_rows(one_file(folder, f"attention_{engine}_*_generation_attention_perf.parquet"))
    prefill_rows = read_rows(one_file(folder, f"attention_{engine}_*_context_attention_perf.parquet"))
    custom_rows = read_rows(one_file(folder, f"comm_{engine}_*_custom_allreduce_perf.parquet"))
    nccl_rows = read_rows(one_file(folder, "comm_nccl_*_nccl_perf.parquet"))
    tables = (gemm_rows, decode_rows, prefill_rows, custom_rows)
    devices = {r["device"] for rows in tables for r in rows}
    versions = {r["version"] for rows in tables for r in rows}
    if len(devices) != 1 or len(versions) != 1:
        raise SystemExit(f"{gpu} {engine}: mixed devices {devices} or versions {versions}")
    nccl_version = {r["version"] for r in nccl_rows}
    gemm, gemm_eff, gemm_src = build_gemm(gemm_rows, engine, system, stats)
    decode, dec_eff = build_attention(decode_rows, DECODE_SOURCE[engine][gpu], "step", system, stats,
                                      "decode")
    prefill, pre_eff = build_attention(prefill_rows, PREFILL_SOURCE[engine][gpu], "isl", system, stats,
                                       "prefill")
    sel = allreduce_rows(custom_rows, engine)
    ar, nc, ar_eff = build_allreduce(sel, nccl_rows, system, stats)
    all_stats.update({f"{gpu} {engine} {k}": v for k, v in stats.items()})
    flops = {name: float(system[key]) for name, key in PEAK_KEY.items() if key in system and name in gemm}
    doc = {
        "format": FORMAT,
        "name": gpu,
        "device": devices.pop(),
        "engine": f"{ENGINE_LABEL[engine]} {versions.pop()}",
        "engine_name": engine,
        "nccl": ", ".join(sorted(nccl_version)),
        "source": {"repo": UPSTREAM_REPO, "commit": UPSTREAM_COMMIT,
                   "folder": UPSTREAM_FOLDER.replace("<gpu>", gpu)},
        "system": system_block(system, flops),
        "gemm": {name: {**t, "kernel_source": gemm_src[name]} for name, t in gemm.items()},
        "decode": decode,
        "prefill": prefill,
        "allreduce": ar,
        "nccl_allreduce": nc,
        "efficiency": {"gemm": gemm_eff, "decode": dec_eff, "prefill": pre_eff, "allreduce": ar_eff},
    }
    return doc, engine_unit_evidence(sel, nccl_rows, gpu, doc["engine"])


def coarse(value: Any, inside: bool = False) -> Any:
    """``value`` with every latency (a float in a list under a key ``ms`` or ``shapes``) rounded to 3
    significant digits (COARSE_GPUS)."""
    if isinstance(value, dict):
        return {k: coarse(v, inside or k in ("ms", "shapes")) for k, v in value.items()}
    if isinstance(value, list):
        return [coarse(v, inside) for v in value]
    if inside and isinstance(value, float):
        return float(f"{value:.2e}")
    return value


def encode(doc: dict[str, Any]) -> bytes:
    if doc.get("name") in COARSE_GPUS:
        doc = coarse(doc)
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


# --------------------------------------------------------------------------- MoE, MLA, EP communication

MOE_FORMAT = 1
MOE_DISTRIBUTION = "power_law_1.01"  # the routing kept (module docstring: "Routing distribution")
MOE_OTHER_DISTRIBUTIONS = ("balanced", "power_law_1.2")
# upstream moe_dtype -> servesim dtype
MOE_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "fp4",
              "w4a16_mxfp4": "mxfp4", "int4_wo": "int4", "w4a8_mxfp4_mxfp8": "mxfp4_mxfp8"}
MOE_ORDER = ("bf16", "fp8", "fp8_block", "fp4", "mxfp4", "int4", "mxfp4_mxfp8")
MOE_UNMAPPED: dict[str, str] = {}  # upstream moe_dtypes servesim has no name for (none now)
# TensorRT-LLM's TRTLLM-gen NVFP4 MoE (moe_config.backend TRTLLM, min-latency mode), timed without its
# finalize: the TRTLLM backend's own table (moe.backends.trtllm), each point plus finalize_ms
MIN_LATENCY_SOURCE = "moe_torch_flow_min_latency"
MIN_LATENCY_MAX_TOKENS = 256  # the borrowed block-FP8 TRTLLM-gen rows (BORROW_TRTLLM_GEN) stop here
FINALIZE_FLOOR_MS = 0.003  # one small CUDA-graphed kernel
# TensorRT-LLM's TRTLLM backend runs block-FP8 MoE on TRTLLM-gen kernels too, which its own B200 table
# did not time (only DeepGEMM): the same kernels as FlashInfer ships them, timed by SGLang on the same
# GPU, without expert parallelism (its EP rows are handed ready-made routing: not the same layer)
BORROW_TRTLLM_GEN = dict.fromkeys(BLACKWELL, ("sglang", "sglang_flashinfer_trtllm_moe"))
MOE_DROPPED_SOURCES = {
    "moe_torch_flow_nongated": "non-gated (ReLU^2, Nemotron-H) MoE rows of TensorRT-LLM: the key has no "
                               "activation field and every model servesim prices is gated (SwiGLU)",
    "sglang_marlin_moe_situ_as_silu": "Kimi-K3 rows timed with SiLU standing in for its SiTU activation "
                                      "(upstream's approximation), a model servesim does not price; SGLang's "
                                      "H100/H200 rows also leave gaps in num_tokens (crashed cells)",
    "vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts_situ_as_silu": "the same Kimi-K3 approximation "
                                                                             "in vLLM's Hopper tables",
}
# kernels an engine's deployment of that dtype does not run on that GPU (module docstring: vLLM's per-tensor
# FP8 on Hopper), dropped by (engine, GPU)
MOE_NOT_RUN = dict.fromkeys((("vllm", "h100_sxm"), ("vllm", "h200_sxm")),
                            "vllm_modeloptfp8moe_flashinfer_cutlass_flashinferexperts")
# (hidden, inter, topk, experts) of non-gated (ReLU^2) MoE models: TensorRT-LLM's moe_torch_flow_nongated rows
# (Nemotron-3 / Nemotron-H shapes); vLLM and SGLang measured the same shapes without saying so
NONGATED_SHAPES = frozenset({(1024, 2688, 22, 512), (2048, 5120, 22, 512), (2688, 1856, 6, 128),
                             (4096, 2688, 22, 512), (8192, 5120, 22, 512)})
MOE_WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "fp4": 0.5625, "mxfp4": 0.53125,
                    "int4": 0.515625, "mxfp4_mxfp8": 0.53125}
MOE_PEAK_KEY = {"bf16": "bfloat16_tc_flops", "fp8": "fp8_tc_flops", "fp8_block": "fp8_tc_flops",
                "fp4": "fp4_tc_flops", "mxfp4": "bfloat16_tc_flops", "int4": "bfloat16_tc_flops",
                "mxfp4_mxfp8": "fp8_tc_flops"}
MOE_PLAUSIBLE = 1.10  # an MoE layer cannot read its local experts' weights faster than this x HBM
# DeepSeek-V3/R1's shape: vLLM's and SGLang's balanced rows plateau from 32 tokens at about half the time of
# reading every expert (TensorRT-LLM's, routed with plain renormalized top-k, do not), as grouped top-k
# (n_group 8, topk_group 4) sending equally scored tokens to the same 4 of 8 groups would (module docstring)
GROUPED_TOPK_SHAPES = frozenset({(7168, 2048, 8, 256)})
MOE_KEY = ("hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size")
MLA_KV = 512 + 64  # latent cache values per token (kv_lora_rank + qk_rope_head_dim)
MLA_DECODE_DIM = 576 + 512  # QK over the 576-value latent and PV into the 512-value latent, per head
MLA_PREFILL_DIM = 192 + 128  # QK (128 nope + 64 rope) and PV (v_head_dim 128), per head
MLA_BMM_DIMS = (128, 512)  # W_UK / W_UV per head: qk_nope_head_dim x kv_lora_rank
DEEPEP_VERSION_GLOB = "comm_sglang_*_wideep_deepep_{mode}_perf.parquet"
DEEPEP_DEFAULT_SMS = 20  # DeepEP's Buffer default (normal kernels)
NCCL_OPS = ("all_gather", "alltoall", "reduce_scatter")
# the core-MLA table servesim uses where an engine measured none (vLLM 0.24 on H100/H200/B200 timed only
# whole attention modules; SGLang 0.5.10 on the A100 no MLA at all): the first of these that has one
MLA_FALLBACK = {"vllm": ("trtllm", "sglang"), "sglang": ("vllm", "trtllm"), "trtllm": ("vllm", "sglang")}


def system_block(system: dict[str, float | str], flops: dict[str, float]) -> dict[str, Any]:
    """The ``system`` block of a table file: the datasheet numbers of ``system.yaml`` that
    servesim.hardware.kernels.GPUSystem reads, and the peaks ``flops`` of the dtypes kept."""
    return {
        "hbm_bytes_per_s": float(system["mem_bw"]),
        "memory_bytes": float(system["mem_capacity"]),
        "nvlink_bytes_per_s": float(system["intra_node_bw"]),
        "internode_bytes_per_s": float(system.get("inter_node_bw", 0.0)),
        "gpus_per_node": int(float(system.get("num_gpus_per_node", 8))),
        "flops_per_s": flops,
    }


def moe_file(gpu: str, engine: str) -> str:
    """The shipped MoE/MLA file of one (GPU, engine), named like the dense tables plus ``_moe``."""
    return f"{gpu}_moe.json.gz" if engine == "vllm" else f"{gpu}_{engine}_moe.json.gz"


def moe_roofline_parts(dtype: str, tokens: float, h: int, i: int, k: int, e: int, tp: int,
                       ep: int) -> tuple[float, float, float]:
    """(bytes, FLOPs, local weight bytes) of one MoE layer on one GPU of a (tp, ep) group fed
    ``tokens`` tokens: weights of the local experts touched (expected count under uniform
    routing), activations in and out of each GEMM at 2 bytes, 3 GEMMs (gate, up, down)."""
    il = i / tp
    el = e / ep
    touched = el * (1.0 - (1.0 - k / e) ** tokens)
    pairs = tokens * k / ep
    wbytes = 3 * h * il * MOE_WEIGHT_BYTES[dtype]
    nbytes = touched * wbytes + pairs * (4 * h + 6 * il)
    return nbytes, 2 * pairs * 3 * h * il, el * wbytes


def moe_key(r: dict[str, Any]) -> str:
    """A MoE row's shape key ``hidden,inter,topk,experts,moe_tp,moe_ep`` (MOE_KEY)."""
    return ",".join(str(r[c]) for c in MOE_KEY)


def parse_shape(key: str) -> tuple[int, ...]:
    return tuple(int(x) for x in key.split(","))


def build_moe(rows: list[dict[str, Any]], system: dict[str, float | str], stats: dict[str, list[float]],
              label: str, borrowed: Sequence[dict[str, Any]] = ()) -> tuple[dict[str, Any], dict[str, Any],
                                                                           list[str]]:
    """The MoE grids of one engine on one GPU: per servesim dtype and measured shape
    ``hidden,inter,topk,experts,moe_tp,moe_ep``, latency over num_tokens (MOE_DISTRIBUTION rows),
    the fitted efficiencies per dtype, and evidence lines (plausibility, distributions)."""
    pts: dict[str, dict[str, dict[int, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    src: dict[str, dict[str, str]] = defaultdict(dict)
    fast: dict[str, dict[str, dict[int, list[tuple[float, str]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for r in borrowed:  # TRTLLM-gen points another engine measured (build_moe_table)
        key = moe_key(r)
        fast[MOE_DTYPES[r["moe_dtype"]]][key][int(r["num_tokens"])].append(
            (float(r["latency"]), f"{r['kernel_source']} ({r['framework']} {r['version']})"))
    dropped: dict[str, int] = defaultdict(int)
    kept_rows: list[dict[str, Any]] = []
    # TensorRT-LLM's TRTLLM-gen rows (moe_config.backend TRTLLM), a table of their own ("backends")
    gen_pts: dict[str, dict[str, dict[int, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for r in rows:
        shape4 = (r["hidden_size"], r["inter_size"], r["topk"], r["num_experts"])
        if r["distribution"] not in (MOE_DISTRIBUTION, *MOE_OTHER_DISTRIBUTIONS):
            raise SystemExit(f"{label}: unknown MoE distribution {r['distribution']!r}")
        if r["moe_dtype"] not in MOE_DTYPES and r["moe_dtype"] not in MOE_UNMAPPED:
            raise SystemExit(f"{label}: unknown moe_dtype {r['moe_dtype']!r}")
        if r["kernel_source"] == "moe_torch_flow_nongated" and shape4 not in NONGATED_SHAPES:
            raise SystemExit(f"{label}: non-gated rows of an unlisted shape {shape4}")
        if shape4 in NONGATED_SHAPES:
            why = "non-gated (ReLU^2) shapes"
        elif r["moe_dtype"] in MOE_UNMAPPED:
            why = f"moe_dtype {r['moe_dtype']}"
        elif r["kernel_source"] == MIN_LATENCY_SOURCE:
            if r["distribution"] == MOE_DISTRIBUTION:  # the TRTLLM backend's own rows, plus the finalize
                t = int(r["num_tokens"])
                ms = float(r["latency"]) + finalize_ms(t, int(r["hidden_size"]), int(r["topk"]),
                                                       float(system["mem_bw"]))
                gen_pts[MOE_DTYPES[r["moe_dtype"]]][moe_key(r)][t].append(ms)
                continue
            why = f"kernel_source {MIN_LATENCY_SOURCE} not {MOE_DISTRIBUTION}"
        elif r["kernel_source"] in MOE_DROPPED_SOURCES:
            why = f"kernel_source {r['kernel_source']}"
        else:
            kept_rows.append(r)
            if r["distribution"] != MOE_DISTRIBUTION:
                continue
            name = MOE_DTYPES[r["moe_dtype"]]
            key = moe_key(r)
            if src[name].setdefault(key, r["kernel_source"]) != r["kernel_source"]:
                raise SystemExit(f"{label}: {name} {key} measured with two kernels")
            pts[name][key][int(r["num_tokens"])].append(float(r["latency"]))
            continue
        dropped[why] += 1
    hbm = float(system["mem_bw"])
    merge_trtllm_gen(pts, src, fast, hbm)
    tokens = sorted({t for by in pts.values() for d in by.values() for t in d})
    filled: dict[str, int] = {}
    dtypes, eff = moe_grids(pts, src, tokens, system, stats, label, filled)
    table = {"distribution": MOE_DISTRIBUTION, "tokens": tokens, "dtypes": dtypes,
             "dropped_rows": dict(sorted(dropped.items()))}
    if gen_pts:  # TensorRT-LLM's TRTLLM-gen rows, priced apart (module docstring, "MoE backends")
        if {t for by in gen_pts.values() for d in by.values() for t in d} - set(tokens):
            raise SystemExit(f"{label}: {MIN_LATENCY_SOURCE} rows at token counts the table lacks")
        gen_src = {name: dict.fromkeys(by, f"{MIN_LATENCY_SOURCE} + finalize")
                   for name, by in gen_pts.items()}
        gen_dtypes, gen_eff = moe_grids(gen_pts, gen_src, tokens, system, stats, label, filled)
        table["backends"] = {"trtllm": {"dtypes": gen_dtypes, "efficiency": gen_eff}}
    if filled:  # only where a gap was found, so that the tables built before stay byte-identical
        table["filled_from_next_count"] = sorted(filled)
    return table, eff, moe_evidence(kept_rows, hbm, label)


def moe_grids(pts: dict[str, dict[str, dict[int, list[float]]]], src: dict[str, dict[str, str]],
              tokens: list[int], system: dict[str, float | str], stats: dict[str, list[float]], label: str,
              filled: dict[str, int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per servesim dtype of ``pts``: the grids over ``tokens`` of each measured shape (repeats'
    median, the monotone envelope, an interior gap filled from the next count and recorded in
    ``filled``), their kernel sources and the fitted efficiencies."""
    dtypes: dict[str, Any] = {}
    eff: dict[str, Any] = {}
    for name in [d for d in MOE_ORDER if d in pts]:
        sources = sorted(set(src[name].values()))
        shapes: dict[str, list[float | None]] = {}
        for key in sorted(pts[name], key=parse_shape):
            med = {(t,): statistics.median(v) for t, v in pts[name][key].items()}  # repeats: median
            shapes[key] = finish(dense(med, [tokens]), [len(tokens)], stats, f"moe {name}")
            have = [j for j, v in enumerate(shapes[key]) if v is not None]
            if have[0] != 0:  # the smallest token count must be measured
                raise SystemExit(f"{label}: {name} {key} has gaps in num_tokens")
            grid = shapes[key]
            for j in range(have[-1] - 1, 0, -1):  # an interior gap: its envelope, the next count's time
                if grid[j] is None:
                    grid[j] = grid[j + 1]
                    filled[f"{name} {key} tokens {tokens[j]}"] = 1
        dtypes[name] = {"kernel_sources": sources,
                        "source_of": {key: sources.index(src[name][key]) for key in shapes},
                        "shapes": shapes}
        eff[name] = moe_fit(name, shapes, tokens, system)
    return dtypes, eff


def merge_trtllm_gen(pts: dict[str, dict[str, dict[int, list[float]]]], src: dict[str, dict[str, str]],
                      fast: dict[str, dict[str, dict[int, list[tuple[float, str]]]]], hbm: float) -> None:
    """TensorRT-LLM's TRTLLM-gen block-FP8 MoE points at <= MIN_LATENCY_MAX_TOKENS tokens (the
    FlashInfer TRTLLM-gen rows another engine measured on the same GPU, BORROW_TRTLLM_GEN) in place
    of the default kernel's point of the same shape and tokens where that is faster (module
    docstring, "TensorRT-LLM's MoE backends")."""
    for name, by_key in fast.items():
        for key, by_t in by_key.items():
            if key not in pts[name]:
                continue  # a shape TensorRT-LLM's own kernels were not measured on: not added
            used: set[str] = set()
            for t, vals in by_t.items():
                if t not in pts[name][key]:  # both sources are cut at MIN_LATENCY_MAX_TOKENS already
                    continue
                ms = statistics.median(v for v, _ in vals)
                if ms < statistics.median(pts[name][key][t]):
                    pts[name][key][t] = [ms]
                    used.add(vals[0][1])
            if used:
                cap = MIN_LATENCY_MAX_TOKENS
                src[name][key] = f"{src[name][key]} + {', '.join(sorted(used))} (<= {cap} tokens)"


def finalize_ms(tokens: int, hidden: int, topk: int, hbm: float) -> float:
    """TensorRT-LLM's MoE finalize (the top-k weighted sum back into token order), which the
    min-latency rows were timed without: it reads the ``tokens x topk`` BF16 expert outputs and
    writes ``tokens`` BF16 rows at HBM speed, and costs at least one small kernel
    (FINALIZE_FLOOR_MS)."""
    nbytes = 2.0 * tokens * hidden * (topk + 1)
    return FINALIZE_FLOOR_MS + nbytes / hbm * 1e3


def moe_fit(name: str, shapes: dict[str, list[float | None]], tokens: list[int],
            system: dict[str, float | str]) -> dict[str, float]:
    """Fitted memory and compute shares and the floor of one MoE dtype (module docstring)."""
    hbm = float(system["mem_bw"])
    peak = float(system.get(MOE_PEAK_KEY[name], system["bfloat16_tc_flops"]))
    mem_s, loose_mem, comp_s, last_s, values = [], [], [], [], []
    for key, grid in shapes.items():
        h, i, k, e, tp, ep = parse_shape(key)
        have = list(points_of(grid, [tokens]))
        for (t,), v in have:
            values.append(v)
            nbytes, flops, local_w = moe_roofline_parts(name, t, h, i, k, e, tp, ep)
            share = nbytes / hbm / (v * 1e-3)
            if t * k >= 4 * e and t * k / e <= 16 and local_w >= 2**27:
                mem_s.append(share)
            if t <= 16 and nbytes >= 2**24:
                loose_mem.append(share)
            if t * k / e >= 256 and flops >= 2**36:
                comp_s.append(flops / peak / (v * 1e-3))
        (t, ), v = have[-1]
        last_s.append(moe_roofline_parts(name, t, h, i, k, e, tp, ep)[1] / peak / (v * 1e-3))
    return {"memory": r4(median(mem_s or loose_mem)), "compute": r4(median(comp_s or last_s)),
            "floor_ms": r4(min(values))}


def moe_evidence(rows: list[dict[str, Any]], hbm: float, label: str) -> list[str]:
    """Plausibility of the MoE rows kept (all distributions) and the ratio of each power-law
    distribution to balanced routing, as lines for NOTICE.md.

    Plausibility: a point that must read every local expert's weights (balanced routing with
    tokens >= ceil(experts / topk): the collector's balanced_logits then covers every expert; on
    tables without balanced rows, power-law rows with tokens x topk >= 8 x experts) and holds >=
    2^27 bytes of them cannot finish sooner than that read at MOE_PLAUSIBLE x HBM.  The only
    points that do are explained by the routing (GROUPED_TOPK_SHAPES); any other stops the build."""
    lines = []
    balanced = [r for r in rows if r["distribution"] == "balanced"]
    check = balanced or [r for r in rows if r["distribution"] == MOE_DISTRIBUTION]
    bad: list[tuple[float, str]] = []
    explained: list[float] = []
    checked = 0
    for r in check:
        name = MOE_DTYPES[r["moe_dtype"]]
        h, i, k, e, tp, ep, t = (int(r[c]) for c in (*MOE_KEY, "num_tokens"))
        full = t >= math.ceil(e / k) if balanced else t * k >= 8 * e
        local_w = moe_roofline_parts(name, t, h, i, k, e, tp, ep)[2]
        if not full or local_w < 2**27:
            continue
        checked += 1
        share = local_w / hbm / (float(r["latency"]) * 1e-3)
        if share <= MOE_PLAUSIBLE:
            continue
        if (h, i, k, e) in GROUPED_TOPK_SHAPES and r["distribution"] == "balanced":
            explained.append(share)
        else:
            bad.append((share, f"{name} {h},{i},{k},{e},{tp},{ep} tokens {t} ({r['distribution']})"))
    if bad:
        raise SystemExit(f"{label}: {len(bad)} MoE points read their experts faster than {MOE_PLAUSIBLE} "
                         f"x HBM, e.g. {max(bad)[1]} at {max(bad)[0]:.2f} x")
    what = "balanced" if balanced else f"{MOE_DISTRIBUTION} (no balanced rows)"
    line = f"{label}: {checked} {what} points that read every local expert: none above {MOE_PLAUSIBLE} x HBM"
    if explained:
        line += (f" except {len(explained)} balanced DeepSeek-V3-shape points (up to {max(explained):.2f} x: "
                 "grouped top-k routing, see GROUPED_TOPK_SHAPES)")
    lines.append(line)
    by: dict[tuple[Any, ...], dict[str, float]] = defaultdict(dict)
    for r in rows:
        point = (r["moe_dtype"], *(r[c] for c in MOE_KEY), r["num_tokens"])
        by[point][r["distribution"]] = float(r["latency"])
    parts = []
    for dist in (MOE_DISTRIBUTION, "power_law_1.2"):
        for ep_cls in ("EP1", "EP>1"):
            for lo, hi in ((1, 64), (65, 1024), (1025, 10**9)):
                ratios = [v[dist] / v["balanced"] for key, v in by.items()
                          if "balanced" in v and dist in v and (key[6] == 1) == (ep_cls == "EP1")
                          and lo <= key[7] <= hi]
                if ratios:
                    rng = f"{lo}-{hi}" if hi < 10**9 else f">{lo - 1}"
                    parts.append(f"{dist} {ep_cls} tokens {rng}: x{statistics.median(ratios):.2f}")
    if parts:
        lines.append(f"{label}: median latency / balanced: " + "; ".join(parts))
    return lines


def mla_decode_parts(batch: float, context: float, heads: int, kv: str) -> tuple[float, float]:
    """(bytes, FLOPs) of one absorbed MLA decode step: the latent cache read (576 values per token),
    q (576) and the output (512) per head in bf16; QK and PV over the latent per head."""
    nbytes = batch * (context * MLA_KV * KV_BYTES[kv] + heads * MLA_DECODE_DIM * 2)
    return nbytes, 2 * batch * heads * context * MLA_DECODE_DIM


def mla_prefill_parts(batch: float, prompt: float, heads: int, kv: str) -> tuple[float, float]:
    """(bytes, FLOPs) of a causal MLA prefill in DeepSeek's non-absorbed form: q and k of 192,
    v and the output of 128 values per head in bf16, the latent cache written; QK (192) and PV
    (128) over the causal triangle."""
    nbytes = batch * prompt * (heads * (192 + 192 + 128 + 128) * 2 + MLA_KV * KV_BYTES[kv])
    return nbytes, 2 * batch * heads * MLA_PREFILL_DIM * prompt * (prompt + 1) / 2


def build_mla(ctx_rows: list[dict[str, Any]], gen_rows: list[dict[str, Any]], system: dict[str, float | str],
              stats: dict[str, list[float]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Core MLA attention of one engine: per kv dtype and query heads per GPU, a grid batch x
    context (decode) and batch x prompt (prefill).  Repeats of a point (other tp_size at the same
    heads per GPU, or measured twice) -> their median."""
    hbm = float(system["mem_bw"])
    peak = float(system["bfloat16_tc_flops"])
    out: dict[str, Any] = {}
    eff: dict[str, Any] = {}
    sources = {r["kernel_source"] for r in ctx_rows + gen_rows}
    if len(sources) != 1 or {r["mla_dtype"] for r in ctx_rows + gen_rows} != {"bfloat16"}:
        raise SystemExit(f"MLA: expected one kernel_source and bf16 queries, got {sorted(sources)}")
    for kind, rows, axis in (("decode", gen_rows, "step"), ("prefill", ctx_rows, "isl")):
        pts: dict[str, dict[str, dict[tuple[int, int], list[float]]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(list)))
        for r in rows:
            pts[KV_DTYPES[r["kv_cache_dtype"]]][str(r["num_heads"])][(r["batch_size"], r[axis])].append(
                float(r["latency"]))
        batches = sorted({p[0] for d in pts.values() for by in d.values() for p in by})
        lengths = sorted({p[1] for d in pts.values() for by in d.values() for p in by})
        grids: dict[str, dict[str, list[float | None]]] = {}
        for kv in sorted(pts):
            grids[kv] = {}
            for heads in sorted(pts[kv], key=int):
                med = {p: statistics.median(v) for p, v in pts[kv][heads].items()}
                grids[kv][heads] = finish(dense(med, [batches, lengths]), [len(batches), len(lengths)], stats,
                                          f"mla {kind}")
        second = "context" if kind == "decode" else "prompt"
        out[kind] = {"batch": batches, second: lengths, "ms": grids}
        eff[kind] = {}
        for kv, by_heads in grids.items():
            mem, comp, floor = [], [], []
            for heads, grid in by_heads.items():
                h = int(heads)
                for (b, s), v in points_of(grid, [batches, lengths]):
                    if kind == "decode":
                        nbytes, flops = mla_decode_parts(b, s, h, kv)
                        if h <= 16 and b * s * MLA_KV * KV_BYTES[kv] >= 2**27:
                            mem.append(nbytes / hbm / (v * 1e-3))
                        if h >= 64 and b * s >= 2**18:
                            comp.append(flops / peak / (v * 1e-3))
                        if b <= 2 and s <= 15:
                            floor.append(v)
                    else:
                        nbytes, flops = mla_prefill_parts(b, s, h, kv)
                        if s >= 4096:
                            comp.append(flops / peak / (v * 1e-3))
                        if b == 1 and s <= 16:
                            floor.append(v)
            fit = {"compute": r4(median(comp)), "floor_ms": r4(median(floor))}
            if kind == "decode":
                fit["memory"] = r4(median(mem))
            eff[kind][kv] = fit
    out["kernel_source"] = sources.pop()
    return out, eff


def build_mla_bmm(rows: list[dict[str, Any]], system: dict[str, float | str],
                  stats: dict[str, list[float]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """MLA's absorbed batched matmuls per op (pre: q_nope x W_UK, post: latent out x W_UV), dtype
    and heads per GPU, over num_tokens.  Repeats -> median."""
    ops = {"mla_gen_pre": "pre", "mla_gen_post": "post"}
    pts: dict[str, dict[str, dict[str, dict[int, list[float]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list))))
    srcs: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        dt = KV_DTYPES[r["bmm_dtype"]]
        pts[ops[r["op_name"]]][dt][str(r["num_heads"])][int(r["num_tokens"])].append(float(r["latency"]))
        srcs[dt].add(r["kernel_source"])
    tokens = sorted({t for a in pts.values() for b in a.values() for c in b.values() for t in c})
    ms: dict[str, Any] = {}
    hbm = float(system["mem_bw"])
    eff: dict[str, Any] = {}
    samples: dict[str, tuple[list[float], list[float], list[float]]] = defaultdict(lambda: ([], [], []))
    for op in sorted(pts):
        ms[op] = {}
        for dt in sorted(pts[op]):
            ms[op][dt] = {}
            peak = float(system[PEAK_KEY[dt]])
            for heads in sorted(pts[op][dt], key=int):
                med = {(t,): statistics.median(v) for t, v in pts[op][dt][heads].items()}
                grid = finish(dense(med, [tokens]), [len(tokens)], stats, f"mla_bmm {dt}")
                ms[op][dt][heads] = grid
                h = int(heads)
                for (t,), v in points_of(grid, [tokens]):
                    w = h * MLA_BMM_DIMS[0] * MLA_BMM_DIMS[1] * WEIGHT_BYTES[dt]
                    mem, comp, floor = samples[dt]
                    floor.append(v)
                    if t <= 16 and h >= 16:
                        mem.append((w + t * h * sum(MLA_BMM_DIMS) * 2) / hbm / (v * 1e-3))
                    if t >= 4096 and h >= 32:
                        comp.append(2 * t * h * MLA_BMM_DIMS[0] * MLA_BMM_DIMS[1] / peak / (v * 1e-3))
    for dt, (mem, comp, floor) in sorted(samples.items()):
        eff[dt] = {"memory": r4(median(mem)), "compute": r4(median(comp)), "floor_ms": r4(min(floor))}
    sources = {dt: ", ".join(sorted(s)) for dt, s in sorted(srcs.items())}
    return {"tokens": tokens, "ms": ms, "kernel_source": sources}, eff


def deepep_ranks_hit(topk: int, experts: int, ep: int) -> float:
    """Expected distinct EP ranks a token's top-k experts land on (uniform top-k without repeats)."""
    per = experts / ep
    miss = 1.0
    for j in range(topk):
        miss *= max(0.0, (experts - per - j) / (experts - j))
    return ep * (1.0 - miss)


def deepep_bytes(mode: str, kind: str, tokens: float, hidden: int, topk: int, experts: int, ep: int) -> float:
    """Bytes one rank sends (dispatch) or receives back (combine) for ``tokens`` tokens of its own:
    low-latency kernels move every top-k selection (FP8 dispatch: hidden + hidden/128 x 4 + 16
    bytes, as the collector counts; BF16 combine: 2 hidden), normal kernels one copy per
    destination rank (FP8 dispatch hidden x (1 + 1/32), BF16 combine 2 hidden)."""
    if mode == "ll":
        per = hidden + hidden / 128 * 4 + 16 if kind == "dispatch" else 2 * hidden
        return tokens * topk * per
    per = hidden * (1 + 1 / 32) if kind == "dispatch" else 2 * hidden
    return tokens * deepep_ranks_hit(topk, experts, ep) * per


def build_deepep(ll_rows: list[dict[str, Any]], normal_rows: list[dict[str, Any]],
                 system: dict[str, float | str],
                 stats: dict[str, list[float]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """DeepEP dispatch / combine (us upstream -> ms) of one GPU: low-latency by (hidden, topk,
    experts) over tokens per rank; normal by (hidden, topk, experts) over SMs x tokens."""
    gpn = int(float(system.get("num_gpus_per_node", 8)))
    nodes = {r["node_num"] for r in ll_rows + normal_rows}
    if nodes != {1}:
        raise SystemExit(f"DeepEP: expected single-node rows, got node_num {sorted(nodes)}")
    nvl = float(system["intra_node_bw"])
    out: dict[str, Any] = {"ep": gpn}
    eff: dict[str, Any] = {}
    ll: dict[str, dict[str, dict[int, float]]] = {"dispatch": defaultdict(dict), "combine": defaultdict(dict)}
    for r in ll_rows:
        key = f"{r['hidden_size']},{r['num_topk']},{r['num_experts']}"
        for kind in ll:
            if int(r["num_token"]) in ll[kind][key]:
                raise SystemExit(f"DeepEP ll: two rows for {key} {r['num_token']}")
            ll[kind][key][int(r["num_token"])] = float(r[f"{kind}_avg_t_us"]) * 1e-3
    tok_ll = sorted({int(r["num_token"]) for r in ll_rows})
    nm: dict[str, dict[str, dict[tuple[int, int], float]]] = {"dispatch": defaultdict(dict),
                                                              "combine": defaultdict(dict)}
    for r in normal_rows:
        if r["dispatch_sms"] != r["combine_sms"] or r["dispatch_notify_us"] or r["combine_notify_us"]:
            raise SystemExit(f"DeepEP normal: unexpected row {r}")
        key = f"{r['hidden_size']},{r['num_topk']},{r['num_experts']}"
        for kind in nm:
            p = (int(r[f"{kind}_sms"]), int(r["num_token"]))
            if p in nm[kind][key]:
                raise SystemExit(f"DeepEP normal: two rows for {key} {p}")
            nm[kind][key][p] = float(r[f"{kind}_transmit_us"]) * 1e-3
    sms = sorted({p[0] for d in nm.values() for by in d.values() for p in by})
    tok_nm = sorted({p[1] for d in nm.values() for by in d.values() for p in by})
    out["ll"] = {"tokens": tok_ll, "ms": {}}
    out["normal"] = {"sms": sms, "tokens": tok_nm, "ms": {}}
    for kind in ("dispatch", "combine"):
        out["ll"]["ms"][kind] = {k: finish(dense({(t,): v for t, v in d.items()}, [tok_ll]), [len(tok_ll)],
                                           stats, f"deepep ll {kind}") for k, d in sorted(ll[kind].items())}
        out["normal"]["ms"][kind] = {k: finish(dense(d, [sms, tok_nm]), [len(sms), len(tok_nm)], stats,
                                               f"deepep normal {kind}", pad_axes=[1])
                                     for k, d in sorted(nm[kind].items())}
        for mode in ("ll", "normal"):
            bus, floor = [], []
            for key, grid in out[mode]["ms"][kind].items():
                h, k, e = (int(x) for x in key.split(","))
                if mode == "ll":
                    row = grid
                else:
                    i = sms.index(DEEPEP_DEFAULT_SMS)
                    row = grid[i * len(tok_nm):(i + 1) * len(tok_nm)]
                toks = tok_ll if mode == "ll" else tok_nm
                have = [(t, v) for t, v in zip(toks, row, strict=True) if v is not None]
                t, v = have[-1]
                bus.append(deepep_bytes(mode, kind, t, h, k, e, gpn) / nvl / (v * 1e-3))
                floor.append(have[0][1])
            eff[f"{mode}_{kind}"] = {"bus": r4(median(bus)), "floor_ms": r4(median(floor))}
    return out, eff


def build_nccl(rows: list[dict[str, Any]], system: dict[str, float | str],
               stats: dict[str, list[float]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """NCCL all_gather, reduce_scatter and alltoall of half (nccl-tests sizes): grid GPUs x bytes
    (message_size is elements of 2 bytes, the module docstring)."""
    nvl = float(system["intra_node_bw"])
    out: dict[str, Any] = {}
    eff: dict[str, Any] = {}
    for op in NCCL_OPS:
        pts = {(r["num_gpus"], r["message_size"] * ALLREDUCE_ELEMENT_BYTES): float(r["latency"])
               for r in rows if r["op_name"] == op and r["nccl_dtype"] == "half"}
        gpus = sorted({p[0] for p in pts})
        sizes = sorted({p[1] for p in pts})
        grid = finish(dense(pts, [gpus, sizes]), [len(gpus), len(sizes)], stats, f"nccl {op}", pad_axes=[1])
        out[op] = {"gpus": gpus, "bytes": sizes, "ms": grid}
        eff[op] = {}
        for i, n in enumerate(gpus):
            row = grid[i * len(sizes):(i + 1) * len(sizes)]
            last, first = row[-1], row[0]
            assert last is not None and first is not None
            busbw = (n - 1) / n * sizes[-1] / (last * 1e-3)
            eff[op][str(n)] = {"bus": r4(busbw / nvl), "floor_ms": r4(first)}
    return out, eff


MNNVL_GLOB = "comm_trtllm_*_trtllm_alltoall_perf.parquet"
MNNVL_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "nvfp4": "fp4"}
MNNVL_OPS = {"alltoall_prepare": "prepare", "alltoall_dispatch": "dispatch", "alltoall_combine": "combine",
             "alltoall_combine_low_precision": "combine_low_precision"}
MNNVL_SOURCES = {"NVLinkOneSided": "one_sided", "NVLinkTwoSided": "two_sided"}


def mnnvl_bytes(op: str, dtype: str, tokens: float, hidden: int, topk: int) -> float:
    """Bytes one rank sends (dispatch: every top-k copy of its tokens, in the MoE's activation dtype
    with NVFP4's one FP8 scale per 16 values) or receives back (combine: BF16 per copy; the
    low-precision combine NVFP4); ``prepare`` moves routing metadata only (8 bytes a pair)."""
    per = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5625}[dtype]
    if op == "prepare":
        return tokens * topk * 8.0
    if op == "dispatch":
        return tokens * topk * hidden * per
    return tokens * topk * hidden * (0.5625 if op == "combine_low_precision" else 2.0)


def build_mnnvl(rows: list[dict[str, Any]], system: dict[str, float | str],
                stats: dict[str, list[float]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """TensorRT-LLM's MNNVL all-to-all (its wide-EP path on an NVLink domain): per kernel (one- or
    two-sided), op and dtype, a grid EP size x tokens per rank (the tables' bandwidth: the
    bytes of mnnvl_bytes over the latency reach 60-75% of NVLink at the largest sizes only if
    ``num_tokens`` is each rank's own, so it is), balanced routing (the only one measured)."""
    shapes = {(r["hidden_size"], r["topk"], r["num_experts"]) for r in rows}
    dists = {r["distribution"] for r in rows}
    if len(shapes) != 1 or dists != {"balanced"}:
        raise SystemExit(f"MNNVL all-to-all: expected one shape, balanced routing; got {shapes}, {dists}")
    hidden, topk, experts = shapes.pop()
    nvl = float(system["intra_node_bw"])
    pts: dict[str, dict[tuple[int, int], float]] = defaultdict(dict)
    for r in rows:
        key = f"{MNNVL_SOURCES[r['kernel_source']]},{MNNVL_OPS[r['op_name']]},{MNNVL_DTYPES[r['moe_dtype']]}"
        p = (int(r["moe_ep_size"]), int(r["num_tokens"]))
        if p in pts[key]:
            raise SystemExit(f"MNNVL all-to-all: two rows for {key} {p}")
        pts[key][p] = float(r["latency"])
    tokens = sorted({int(r["num_tokens"]) for r in rows})
    out: dict[str, Any] = {"shape": [hidden, topk, experts], "tokens": tokens, "distribution": "balanced",
                           "version": ", ".join(sorted({f"TensorRT-LLM {r['version']}" for r in rows})),
                           "grids": {}}
    eff: dict[str, Any] = {}
    for key, d in sorted(pts.items()):
        eps = sorted({p[0] for p in d})
        grid = finish(dense(d, [eps, tokens]), [len(eps), len(tokens)], stats, f"mnnvl {key}", pad_axes=[1])
        out["grids"][key] = {"ep": eps, "ms": grid}
        _, op, dtype = key.split(",")
        bus, floor = [], []
        for i in range(len(eps)):
            row = grid[i * len(tokens):(i + 1) * len(tokens)]
            have = [(t, v) for t, v in zip(tokens, row, strict=True) if v is not None]
            t, v = have[-1]
            bus.append(mnnvl_bytes(op, dtype, t, hidden, topk) / nvl / (v * 1e-3))
            floor.append(have[0][1])
        eff[key] = {"bus": r4(median(bus)), "floor_ms": r4(median(floor))}
    return out, eff


def optional_file(folder: Path, pattern: str) -> Path | None:
    found = sorted(folder.glob(pattern))
    if len(found) > 1:
        raise SystemExit(f"{folder}: more than one file matches {pattern}")
    return found[0] if found else None


def build_moe_table(folder: Path, gpu: str, engine: str,
                    all_stats: dict[str, list[float]]) -> tuple[dict[str, Any], list[str]]:
    """One ``<gpu>[_<engine>]_moe.json.gz``: the engine's MoE, core MLA and MLA BMM tables, the GPU's
    DeepEP and NCCL all_gather / reduce_scatter / alltoall tables, the system numbers and the fitted
    efficiencies."""
    stats: dict[str, list[float]] = {}
    system = read_system(folder / "system.yaml")
    label = f"{gpu} {engine}"
    moe_path = one_file(folder, f"moe_{engine}_*_moe_perf.parquet")
    version = moe_path.name.split("_")[2]
    moe_rows = read_rows(moe_path)
    other = [r for r in moe_rows if r["version"] != version]  # B200 vLLM: 972 preview-build (Kimi-K3) rows
    moe_rows = [r for r in moe_rows if r["version"] == version]
    not_run = [r for r in moe_rows if r["kernel_source"] == MOE_NOT_RUN.get((engine, gpu))]
    moe_rows = [r for r in moe_rows if r["kernel_source"] != MOE_NOT_RUN.get((engine, gpu))]
    ctx_path = optional_file(folder, f"mla_{engine}_*_context_mla_perf.parquet")
    gen_path = optional_file(folder, f"mla_{engine}_*_generation_mla_perf.parquet")
    bmm_path = optional_file(folder, f"mla_bmm_{engine}_*_mla_bmm_perf.parquet")
    ctx_rows = read_rows(ctx_path) if ctx_path else []
    gen_rows = read_rows(gen_path) if gen_path else []
    bmm_rows = read_rows(bmm_path) if bmm_path else []
    if bool(ctx_rows) != bool(gen_rows):
        raise SystemExit(f"{label}: MLA context and generation tables must come together")
    engine_rows = moe_rows + ctx_rows + gen_rows + bmm_rows
    devices = {r["device"] for r in engine_rows}
    versions = {r["version"] for r in engine_rows}
    if len(devices) != 1 or len(versions) != 1:
        raise SystemExit(f"{label}: mixed devices {devices} or versions {versions}")
    nccl_rows = read_rows(one_file(folder, "comm_nccl_*_nccl_perf.parquet"))
    borrowed: list[dict[str, Any]] = []
    if engine == "trtllm" and gpu in BORROW_TRTLLM_GEN:
        path = one_file(folder, f"moe_{BORROW_TRTLLM_GEN[gpu][0]}_*_moe_perf.parquet")
        borrowed = [r for r in read_rows(path)
                    if r["kernel_source"] == BORROW_TRTLLM_GEN[gpu][1] and r["moe_dtype"] == "fp8_block"
                    and r["distribution"] == MOE_DISTRIBUTION and int(r["moe_ep_size"]) == 1
                    and int(r["num_tokens"]) <= MIN_LATENCY_MAX_TOKENS]
    moe, moe_eff, evidence = build_moe(moe_rows, system, stats, label, borrowed)
    for v in sorted({r["version"] for r in other}):
        why = f"version {v} (not the table's {version})"
        moe["dropped_rows"][why] = sum(r["version"] == v for r in other)
    if not_run:
        why = f"kernel_source {MOE_NOT_RUN[(engine, gpu)]} (not what the dtype runs)"
        moe["dropped_rows"][why] = len(not_run)
    efficiency: dict[str, Any] = {"moe": moe_eff}
    doc: dict[str, Any] = {
        "format": MOE_FORMAT,
        "kind": "moe",
        "name": gpu,
        "device": devices.pop(),
        "engine": f"{ENGINE_LABEL[engine]} {versions.pop()}",
        "engine_name": engine,
        "nccl": ", ".join(sorted({r["version"] for r in nccl_rows})),
        "source": {"repo": UPSTREAM_REPO, "commit": UPSTREAM_COMMIT,
                   "folder": UPSTREAM_FOLDER.replace("<gpu>", gpu)},
        "system": system_block(system, {name: float(system[key]) for name, key in PEAK_KEY.items()
                                        if key in system}),
        "moe": moe,
    }
    if ctx_rows:
        doc["mla"], mla_eff = build_mla(ctx_rows, gen_rows, system, stats)
        efficiency["mla_decode"], efficiency["mla_prefill"] = mla_eff["decode"], mla_eff["prefill"]
    if bmm_rows:
        doc["mla_bmm"], efficiency["mla_bmm"] = build_mla_bmm(bmm_rows, system, stats)
    ll_path = optional_file(folder, DEEPEP_VERSION_GLOB.format(mode="ll"))
    normal_path = optional_file(folder, DEEPEP_VERSION_GLOB.format(mode="normal"))
    if ll_path and normal_path:
        ll_rows, normal_rows = read_rows(ll_path), read_rows(normal_path)
        doc["deepep"], efficiency["deepep"] = build_deepep(ll_rows, normal_rows, system, stats)
        doc["deepep"]["measured_with"] = ", ".join(sorted({f"SGLang {r['version']} (DeepEP)"
                                                           for r in ll_rows + normal_rows}))
    mnnvl_path = optional_file(folder, MNNVL_GLOB) if engine == "trtllm" else None
    if mnnvl_path:
        doc["mnnvl"], efficiency["mnnvl"] = build_mnnvl(read_rows(mnnvl_path), system, stats)
    nccl, nccl_eff = build_nccl(nccl_rows, system, stats)
    doc["nccl_collectives"] = nccl
    efficiency.update(nccl_eff)
    doc["efficiency"] = efficiency
    all_stats.update({f"{gpu} {engine} {k}": v for k, v in stats.items()})
    return doc, evidence


def mla_fallback_evidence(folder: Path, gpu: str) -> str | None:
    """Why vLLM borrows TensorRT-LLM's core MLA: the two engines' whole-module MLA tables (same
    gemm_type, KV dtype, heads, batch, step) against each other, and SGLang's core MLA against
    TensorRT-LLM's, at the large points (batch x context >= 2^18)."""
    vm = optional_file(folder, "mla_vllm_*_mla_generation_module_perf.parquet")
    tm = optional_file(folder, "mla_trtllm_*_mla_generation_module_perf.parquet")
    sc = optional_file(folder, "mla_sglang_*_generation_mla_perf.parquet")
    tc = optional_file(folder, "mla_trtllm_*_generation_mla_perf.parquet")
    if not (vm and tm and sc and tc):
        return None
    parts = []
    for kind, a_path, b_path, keys in (("module", vm, tm, ("gemm_type", "kv_cache_dtype")),
                                       ("core", sc, tc, ("kv_cache_dtype",))):
        def index(path: Path, keys: tuple[str, ...] = keys) -> dict[tuple[Any, ...], list[float]]:
            out: dict[tuple[Any, ...], list[float]] = defaultdict(list)
            for r in read_rows(path):
                if r["batch_size"] * r["step"] >= 2**18:
                    out[(*(r[k] for k in keys), r["num_heads"], r["batch_size"], r["step"])].append(
                        float(r["latency"]))
            return out
        a, b = index(a_path), index(b_path)
        for kv in ("bfloat16", "fp8"):
            ratios = [statistics.median(a[k]) / statistics.median(b[k]) for k in a if k in b and k[-4] == kv]
            if ratios:
                who = "vLLM / TensorRT-LLM whole module" if kind == "module" else "SGLang / TensorRT-LLM core"
                parts.append(f"{who} {KV_DTYPES[kv]}-KV x{statistics.median(ratios):.2f} (n={len(ratios)})")
    return f"{gpu} MLA decode, median at batch x context >= 2^18: " + "; ".join(parts)


def deepep_evidence(folder: Path, system: dict[str, float | str], gpu: str) -> str | None:
    """The DeepEP units: the low-latency tables' bandwidth column x latency against the bytes
    deepep_bytes counts, and the NVLink rate the largest normal dispatch implies as FP8 or BF16."""
    ll_path = optional_file(folder, DEEPEP_VERSION_GLOB.format(mode="ll"))
    normal_path = optional_file(folder, DEEPEP_VERSION_GLOB.format(mode="normal"))
    if not (ll_path and normal_path):
        return None
    ratios = []
    for r in read_rows(ll_path):
        for kind in ("dispatch", "combine"):
            counted = deepep_bytes("ll", kind, r["num_token"], r["hidden_size"], r["num_topk"],
                                   r["num_experts"], 8)
            ratios.append(float(r[f"{kind}_bandwidth_gbps"]) * 1e3 * float(r[f"{kind}_avg_t_us"]) / counted)
    rows = [r for r in read_rows(normal_path) if r["dispatch_sms"] == DEEPEP_DEFAULT_SMS
            and (r["hidden_size"], r["num_topk"], r["num_experts"]) == (7168, 8, 256)]
    big = max(rows, key=lambda r: r["num_token"])
    fp8 = deepep_bytes("normal", "dispatch", big["num_token"], 7168, 8, 256, 8) * 7 / 8
    t = float(big["dispatch_transmit_us"]) * 1e-6
    nvl = float(system["intra_node_bw"])
    return (f"{gpu} DeepEP: low-latency bandwidth x latency / counted bytes "
            f"{min(ratios):.4f}..{max(ratios):.4f} over {len(ratios)} values; normal dispatch 7168/8/256 at "
            f"{big['num_token']} tokens, 20 SMs: {t * 1e3:.4g} ms = {fp8 / t / 1e9:.0f} GB/s to other ranks "
            f"as FP8 ({fp8 / t / nvl:.0%} of NVLink), {fp8 / t / 1e9 * 2 / (1 + 1 / 32):.0f} GB/s as BF16")


def nccl_unit_evidence(rows: list[dict[str, Any]], system: dict[str, float | str], gpu: str) -> str:
    """NCCL all_gather / reduce_scatter / alltoall: half against int8 at the same message_size and at
    twice it, and the bus bandwidth at the largest size read as 2-byte elements."""
    nvl = float(system["intra_node_bw"])
    by: dict[tuple[str, str, int], dict[int, float]] = defaultdict(dict)
    for r in rows:
        by[(r["op_name"], r["nccl_dtype"], r["num_gpus"])][r["message_size"]] = float(r["latency"])
    parts = []
    for op in NCCL_OPS:
        for n in sorted({k[2] for k in by if k[0] == op}):
            half, int8 = by[(op, "half", n)], by[(op, "int8", n)]
            s = max(half)
            bus = (n - 1) / n * 2 * s / (half[s] * 1e-3)
            parts.append(f"{op} {n} GPUs at {s}: half {half[s]:.4g} ms, int8 {int8[s]:.4g} ms, int8 at "
                         f"{2 * s} {int8.get(2 * s, math.nan):.4g} ms; busbw as elements "
                         f"{bus / 1e9:.0f} GB/s = {bus / nvl:.0%} of NVLink (as bytes {bus / 2 / nvl:.0%})")
    return f"{gpu} NCCL: " + "; ".join(parts)


# --------------------------------------------------------------------------- sibling GPUs

SIBLINGS_FILE = Path(__file__).resolve().parent / "gpu_siblings.toml"  # pairs of one die (sources there)
SIBLING_SLOW = 1.3  # a series this many times its sibling's, over the table-wide median ratio, is replaced
SIBLING_TABLE_BAND = (0.9, 1.1)  # ... only where the table-wide median ratio of the pair lies in this band
SIBLING_MIN_POINTS = 3  # token counts both GPUs measured, at least
SIBLING_STRETCH = 3  # consecutive shared token counts each above SIBLING_SLOW: a stretch, replaced pointwise


def sibling_pairs(path: Path = SIBLINGS_FILE) -> list[tuple[str, str]]:
    """The (gpu, sibling) pairs of ``gpu_siblings.toml``: one GPU die in two products."""
    with path.open("rb") as fh:
        doc = tomllib.load(fh)
    pairs = [(str(p["gpu"]), str(p["sibling"])) for p in doc.get("pair", [])]
    for a, b in pairs:
        if a not in GPUS or b not in GPUS or a == b:
            raise SystemExit(f"{path.name}: pair {a!r} / {b!r} must name two of {', '.join(GPUS)}")
    return pairs


def moe_series(doc: dict[str, Any]) -> dict[tuple[str, str, str], tuple[str, list[float | None]]]:
    """Every MoE series of a ``_moe`` document: (backend, dtype, shape key) -> (kernel source, grid over
    ``moe.tokens``); backend ``""`` is the engine's own table, else ``moe.backends``' key."""
    parts = [("", doc["moe"]), *doc["moe"].get("backends", {}).items()]
    out: dict[tuple[str, str, str], tuple[str, list[float | None]]] = {}
    for backend, part in parts:
        for name, t in part["dtypes"].items():
            for key, grid in t["shapes"].items():
                out[(backend, name, key)] = (t["kernel_sources"][t["source_of"][key]], grid)
    return out


def series_ratio(a: list[float | None], b: list[float | None]) -> tuple[float, int]:
    """Median of ``a / b`` over the token counts both measured, and how many there were."""
    ratios = [x / y for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    return (statistics.median(ratios) if ratios else math.nan), len(ratios)


def slow_stretches(a: list[float | None], b: list[float | None], slow: float) -> list[list[int]]:
    """The runs of at least SIBLING_STRETCH consecutive token counts both measured (indices into the
    grids) at each of which ``a / b > slow``; a count only one of them measured breaks no run."""
    runs: list[list[int]] = []
    run: list[int] = []
    for j, (x, y) in enumerate(zip(a, b, strict=True)):
        if x is None or y is None:
            continue
        if x / y > slow:
            run.append(j)
            continue
        if len(run) >= SIBLING_STRETCH:
            runs.append(run)
        run = []
    if len(run) >= SIBLING_STRETCH:
        runs.append(run)
    return runs


def moe_light_ms(name: str, tokens: float, key: str, system: dict[str, float | str]) -> float:
    """An MoE point's speed of light on ``system``'s GPU, ms: its bytes (moe_roofline_parts) at the full
    HBM bandwidth or its FLOPs at the dtype's full tensor-core peak, whichever takes longer."""
    h, i, k, e, tp, ep = parse_shape(key)
    nbytes, flops, _ = moe_roofline_parts(name, tokens, h, i, k, e, tp, ep)
    peak = float(system.get(MOE_PEAK_KEY[name], system["bfloat16_tc_flops"]))
    return 1e3 * max(nbytes / float(system["mem_bw"]), flops / peak)


def no_faster_than_light(ms: float, light_ms: float, digits: int) -> float:
    """``ms`` rounded to ``digits`` significant digits, or where that is under ``light_ms`` (the point's
    speed of light) ``light_ms`` rounded up to them, so that neither rounding here nor the 3-digit
    rounding of COARSE_GPUS (:func:`coarse`) puts a point below its speed of light."""
    out = float(f"{ms:.{digits - 1}e}")
    if out >= light_ms:
        return out
    step = 10.0 ** (math.floor(math.log10(light_ms)) - digits + 1)
    return float(f"{math.ceil(light_ms / step) * step:.{digits - 1}e}")


def substitute_siblings(moe_docs: dict[str, dict[str, Any]], systems: dict[str, dict[str, float | str]],
                        pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Replace, in place, each MoE series of a GPU that runs more than SIBLING_SLOW x the same series
    of its sibling (one die, ``gpu_siblings.toml``) once the pair's table-wide median ratio is taken
    out, by the sibling's series times that median ratio (module docstring, "Sibling GPUs"); refit the
    changed tables' efficiencies; record every substitution under ``moe.sibling_substitutions`` and
    return the lines NOTICE.md lists them with.  Both GPUs of a pair are compared on the tables as
    built, before either is changed."""
    lines: list[str] = []
    for gpu_a, gpu_b in pairs:
        for engine in ENGINES:
            fa, fb = moe_file(gpu_a, engine), moe_file(gpu_b, engine)
            if fa not in moe_docs or fb not in moe_docs:
                continue
            da, db = moe_docs[fa], moe_docs[fb]
            if da["moe"]["tokens"] != db["moe"]["tokens"]:
                raise SystemExit(f"{fa} / {fb}: different num_tokens grids")
            tokens = da["moe"]["tokens"]
            sa, sb = moe_series(da), moe_series(db)
            ratios: dict[tuple[str, str, str], float] = {}
            for key, (src_a, grid_a) in sa.items():
                if key in sb and sb[key][0] == src_a:  # the same kernel, dtype, shape and layout
                    r, n = series_ratio(grid_a, sb[key][1])
                    if n >= SIBLING_MIN_POINTS:
                        ratios[key] = r
            label = f"{ENGINE_LABEL[engine]} {gpu_a} / {gpu_b}"
            if not ratios:
                lines.append(f"{label}: no MoE series measured on both")
                continue
            m = float(f"{statistics.median(ratios.values()):.4g}")
            lo, hi = SIBLING_TABLE_BAND
            head = (f"{label}: {len(ratios)} MoE series of the same kernel, dtype, shape and layout; "
                    f"table-wide median ratio {m:.4g}")
            if not lo <= m <= hi:
                lines.append(f"{head}: outside {lo:g}-{hi:g}, no series replaced")
                continue
            lines.append(head)
            # gpu_a's series are gpu_b's x m where they run > SIBLING_SLOW x m x gpu_b's; gpu_b's are
            # gpu_a's / m where they run > SIBLING_SLOW / m x gpu_a's (ratio a / b under m / SIBLING_SLOW)
            m_b = float(f"{1.0 / m:.4g}")
            for gpu, sib, doc, scale, series, slow, own_series in (
                    (gpu_a, gpu_b, da, m, sb, {k: r / m for k, r in ratios.items()}, sa),
                    (gpu_b, gpu_a, db, m_b, sa, {k: m / r for k, r in ratios.items()}, sb)):
                ratio_of = {k: (r if gpu == gpu_a else 1.0 / r) for k, r in ratios.items()}
                lines += _replace_slow_series(doc, gpu, sib, scale, slow, ratio_of, own_series, series,
                                              tokens, systems[gpu], len(ratios))
    return lines


def _slow_series(slow: dict[tuple[str, str, str], float], own_series: dict[tuple[str, str, str], Any],
                 series: dict[tuple[str, str, str], Any], scale: float
                 ) -> tuple[list[tuple[str, str, str]], dict[tuple[str, str, str], list[list[int]]]]:
    """The series to replace whole (median ratio over the table's > SIBLING_SLOW) and, among the others,
    those with stretches (SIBLING_STRETCH or more consecutive shared counts each > SIBLING_SLOW x the
    sibling's over the median), each in the tables' order."""
    order = {k: (k[0], MOE_ORDER.index(k[1]), parse_shape(k[2])) for k in slow}
    flagged = sorted((k for k, x in slow.items() if x > SIBLING_SLOW), key=order.__getitem__)
    stretches = {k: runs for k in sorted(set(slow) - set(flagged), key=order.__getitem__)
                 if (runs := slow_stretches(own_series[k][1], series[k][1], SIBLING_SLOW * scale))}
    return flagged, stretches


def _replace_slow_series(doc: dict[str, Any], gpu: str, sib: str, scale: float,
                         slow: dict[tuple[str, str, str], float], ratio_of: dict[tuple[str, str, str], float],
                         own_series: dict[tuple[str, str, str], Any], series: dict[tuple[str, str, str], Any],
                         tokens: list[int], system: dict[str, float | str], compared: int) -> list[str]:
    """Replace, in ``doc`` (``gpu``'s table), its slow series and stretches by ``sib``'s x ``scale``
    (never under a point's speed of light), record them under ``moe.sibling_substitutions``, refit the
    changed dtypes' efficiencies, and return the NOTICE lines."""
    flagged, stretches = _slow_series(slow, own_series, series, scale)
    lines = [f"  {gpu}: {len(flagged)} of {len(slow)} series above {SIBLING_SLOW:g} x "
             f"{sib}'s (over the median), replaced by {sib}'s x {scale:.4g}; stretches of "
             f"{SIBLING_STRETCH}+ token counts above it in {len(stretches)} more, replaced "
             f"point by point"]
    if not flagged and not stretches:
        return lines
    digits = 3 if gpu in COARSE_GPUS else SIG_DIGITS
    rows = []
    for key in sorted([*flagged, *stretches], key=lambda k: (k[0], MOE_ORDER.index(k[1]), parse_shape(k[2]))):
        backend, name, shape = key
        part = doc["moe"] if not backend else doc["moe"]["backends"][backend]
        source, sib_grid = series[key]
        at = ({j for run in stretches[key] for j in run} if key in stretches else set(range(len(tokens))))
        grid: list[float | None] = [
            # a count the sibling did not measure, or outside a stretch, keeps the GPU's own point
            own if w is None or j not in at else no_faster_than_light(
                w * scale, moe_light_ms(name, t, shape, system), digits)
            for j, (t, own, w) in enumerate(zip(tokens, part["dtypes"][name]["shapes"][shape], sib_grid,
                                                strict=True))]
        part["dtypes"][name]["shapes"][shape] = envelope(grid, [len(tokens)], [0])
        counts: list[int] = []
        if key in stretches:
            pairs = enumerate(zip(own_series[key][1], sib_grid, strict=True))
            r = statistics.median(x / y for j, (x, y) in pairs if j in at and x is not None and y is not None)
            counts = [tokens[j] for j in sorted(at)]
        else:
            r = ratio_of[key]
        rows.append({"backend": backend, "dtype": name, "shape": shape, "kernel_source": source,
                     "ratio": float(f"{r:.4g}")})
        if counts:
            rows[-1]["stretch"] = counts
        where = f", stretch at {', '.join(str(c) for c in counts)} tokens" if counts else ""
        lines.append(f"    {(backend.upper() + ' backend ') if backend else ''}{name} {shape} "
                     f"({source}): {rows[-1]['ratio']:.3g} x {sib}'s{where}")
    doc["moe"]["sibling_substitutions"] = {
        "sibling": sib, "table_median_ratio": float(f"{scale:.4g}"), "threshold": SIBLING_SLOW,
        "series_compared": compared, "rows": rows}
    for backend in sorted({r["backend"] for r in rows}):
        part = doc["moe"] if not backend else doc["moe"]["backends"][backend]
        shapes = {n: t["shapes"] for n, t in part["dtypes"].items()}
        eff = doc["efficiency"]["moe"] if not backend else part["efficiency"]
        for name in {r["dtype"] for r in rows if r["backend"] == backend}:
            eff[name] = moe_fit(name, shapes[name], tokens, system)
    return lines


# --------------------------------------------------------------------------- NOTICE


HEADER = ("| file | device | engine | GEMM kernel_source per dtype | decode attention | prefill attention "
          "| all-reduce | bytes |\n|---|---|---|---|---|---|---|---|")


MOE_HEADER = ("| file | device | engine | MoE kernel_source per dtype | core MLA | MLA BMM | DeepEP "
              "| bytes |\n|---|---|---|---|---|---|---|---|")


def moe_notice_lines(moe_docs: dict[str, dict[str, Any]], sizes: dict[str, int]) -> list[str]:
    lines = []
    for file, d in moe_docs.items():
        per = "; ".join(f"{name}: {', '.join(t['kernel_sources'])}" for name, t in d["moe"]["dtypes"].items())
        for backend, part in d["moe"].get("backends", {}).items():  # a backend's own rows, priced apart
            per += "; " + "; ".join(f"{name} (moe_config.backend {backend.upper()}): "
                                    f"{', '.join(t['kernel_sources'])}" for name, t in part["dtypes"].items())
        mla = d["mla"]["kernel_source"] if "mla" in d else "none measured"
        bmm = (", ".join(f"{k}: {v}" for k, v in d["mla_bmm"]["kernel_source"].items()) if "mla_bmm" in d
               else "none")
        ep = d["deepep"]["measured_with"] if "deepep" in d else "none measured"
        lines.append(f"| `{file}` | {d['device']} | {d['engine']} | {per} | {mla} | {bmm} | {ep} "
                     f"| {sizes[file]:,} |")
    return lines


def notice(docs: dict[str, dict[str, Any]], sizes: dict[str, int], evidence: str,
           skipped: dict[str, str], moe_docs: dict[str, dict[str, Any]] | None = None,
           moe_evidence_text: str = "", sibling_text: str = "") -> str:
    moe_docs = moe_docs or {}
    src_lines = []
    for file, d in docs.items():
        g = ", ".join(f"{k}: {v['kernel_source']}" for k, v in d["gemm"].items())
        q = ", ".join(f"{kv}-KV {q}" for kv, q in d["prefill"]["attn_dtype"].items())
        src_lines.append(f"| `{file}` | {d['device']} | {d['engine']} | {g} | "
                         f"{d['decode']['kernel_source']} | {d['prefill']['kernel_source']} ({q} queries) | "
                         f"{d['allreduce']['kernel_source']} | {sizes[file]:,} |")
    module_doc = __doc__ or ""
    start = module_doc.index("Engines, versions and files")
    end = module_doc.index("The engine's parquet files")
    engines = module_doc[module_doc.index("\n", start) + 1:end].strip()
    start = module_doc.index("What is kept")
    body = module_doc[module_doc.index("\n", start) + 1:]
    return f"""# Measured kernel tables: origin, license and changes

The files `<gpu>.json.gz` (vLLM), `<gpu>_sglang.json.gz` (SGLang) and `<gpu>_trtllm.json.gz`
(TensorRT-LLM), and their mixture-of-experts companions `<gpu>_moe.json.gz`, `<gpu>_sglang_moe.json.gz`
and `<gpu>_trtllm_moe.json.gz`, in this folder are derived from measured GPU kernel timings published by the
NVIDIA project **{UPSTREAM_REPO}** (https://github.com/{UPSTREAM_REPO}), licensed under the
Apache License 2.0 (full text: `{LICENSE_FILE}` in this folder).

- Source commit: `{UPSTREAM_COMMIT}`
- Source: `{UPSTREAM_FOLDER}`, for gpu in {", ".join(GPUS)}:
  for each engine (vllm, sglang, trtllm) the parquet tables `gemm_<engine>_<version>_gemm_perf`,
  `attention_<engine>_<version>_generation_attention_perf`,
  `attention_<engine>_<version>_context_attention_perf` and
  `comm_<engine>_<version>_custom_allreduce_perf`, the NCCL table `comm_nccl_<version>_nccl_perf`,
  and the system description `<gpu>.yaml`; for the `_moe` files `moe_<engine>_<version>_moe_perf`,
  `mla_<engine>_<version>_{{context,generation}}_mla_perf`, `mla_bmm_<engine>_<version>_mla_bmm_perf`,
  `comm_sglang_0.5.12_wideep_deepep_{{ll,normal}}_perf` (all but the A100), TensorRT-LLM's MNNVL all-to-all
  `comm_trtllm_1.3.0rc10_trtllm_alltoall_perf` (GB200 only) and the same NCCL table.
- Copyright: NVIDIA CORPORATION & AFFILIATES (SPDX headers of the source YAML files).

The files here are **modified** versions of the source: reduced to the rows below, reshaped into
dense grids, rounded and smoothed as described.  They were produced by
`scripts/build_kernel_tables.py` in the servesim repository; rerunning it on the source
reproduces them byte for byte.

## Engines

{engines}

## Kernel sources kept

{HEADER}
{chr(10).join(src_lines)}

Not built (servesim falls back to the GPU's vLLM tables, with a note):

{chr(10).join(f"- `{f}`: {why}" for f, why in skipped.items()) or "- none"}

MoE, MLA and expert-parallel communication (`_moe` files; MoE routing {MOE_DISTRIBUTION}):

{MOE_HEADER}
{chr(10).join(moe_notice_lines(moe_docs, sizes))}

## What is kept and what was changed

{body.strip()}

## Evidence for the all-reduce unit (computed by the script)

```
{evidence}
```

## MoE plausibility, routing distributions and the NCCL collectives' unit (computed by the script)

```
{moe_evidence_text}
```

## Sibling GPUs: MoE series replaced by their sibling's (computed by the script)

Pairs of one die (`scripts/gpu_siblings.toml`: {", ".join(f"{a} / {b}" for a, b in sibling_pairs())}); each
MoE series (kernel, dtype, shape and layout) of one GPU against the same series of its sibling, median
ratio over the token counts both measured; a series more than {SIBLING_SLOW:g} x its sibling's over the
pair's table-wide median ratio is its sibling's times that median ratio (never under its speed of light),
and so is, point by point, a stretch of {SIBLING_STRETCH} or more consecutive shared token counts each above
that in any other series ('stretch at' lists the counts); each `_moe` file lists its replaced series and
stretches under `moe.sibling_substitutions` (a stretch's row with its `stretch` token counts).

```
{sibling_text}
```
"""


# --------------------------------------------------------------------------- main


def implausible_decode(doc: dict[str, Any]) -> str | None:
    """Why a table's decode attention cannot be what it claims, or None: measured points (of at
    least 2^27 bytes of KV, far beyond any L2) that finish sooner than reading their KV cache at
    HBM_PLAUSIBLE x the GPU's HBM bandwidth."""
    d = doc["decode"]
    hbm = float(doc["system"]["hbm_bytes_per_s"])
    n_big = 0
    bad: list[tuple[float, str]] = []
    for kv, by_heads in sorted(d["ms"].items()):
        for heads, grid in sorted(by_heads.items()):
            _, g, hd = (int(x) for x in heads.split(","))
            for (b, c), v in points_of(grid, [d["batch"], d["context"]]):
                kv_bytes = b * c * g * hd * 2 * KV_BYTES[kv]
                if kv_bytes < 2**27:
                    continue
                n_big += 1
                share = kv_bytes / hbm / (v * 1e-3)
                if share > HBM_PLAUSIBLE:
                    bad.append((share, f"{kv}-KV heads/kv_heads/head_dim {heads}, batch {b}, context {c}"))
    if not bad:
        return None
    worst = max(bad)
    return (f"{len(bad)} of {n_big} decode points with >= 2^27 bytes of KV read it faster than "
            f"{HBM_PLAUSIBLE:g} x HBM (up to {worst[0]:.2f} x, at {worst[1]})")


def build(source: Path) -> tuple[dict[str, bytes], dict[str, dict[str, Any]], str, dict[str, list[float]],
                                 dict[str, str]]:
    stats: dict[str, list[float]] = {}
    blobs: dict[str, bytes] = {}
    docs: dict[str, dict[str, Any]] = {}
    moe_docs: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    evidence = []
    moe_ev: list[str] = []
    systems: dict[str, dict[str, float | str]] = {}
    for gpu in GPUS:
        nccl_rows = read_rows(one_file(source / gpu, "comm_nccl_*_nccl_perf.parquet"))
        system = systems[gpu] = read_system(source / gpu / "system.yaml")
        evidence.append(unit_evidence(nccl_rows, system, gpu))
        moe_ev.append(nccl_unit_evidence(nccl_rows, system, gpu))
        for line in (mla_fallback_evidence(source / gpu, gpu), deepep_evidence(source / gpu, system, gpu)):
            if line:
                moe_ev.append(line)
        for engine in ENGINES:
            file = table_file(gpu, engine)
            elsewhere = MEASURED_ELSEWHERE.get((gpu, engine))
            if elsewhere is not None:
                skipped[file] = f"{ENGINE_LABEL[engine]} on {gpu}: {elsewhere}"
            else:
                doc, ev = build_table(source / gpu, gpu, engine, stats)
                evidence.append(ev)
                why = implausible_decode(doc)
                if why is not None:
                    skipped[file] = f"{doc['engine']} on {gpu}: {why}"
                else:
                    docs[file] = doc
                    blobs[file] = encode(doc)
            if optional_file(source / gpu, f"moe_{engine}_*_moe_perf.parquet") is not None:
                mdoc, lines = build_moe_table(source / gpu, gpu, engine, stats)
                moe_ev.extend(lines)
                mfile = moe_file(gpu, engine)
                moe_docs[mfile] = mdoc
    sibling_lines = substitute_siblings(moe_docs, systems, sibling_pairs())
    for mfile, mdoc in moe_docs.items():
        blobs[mfile] = encode(mdoc)
    ev_text = "\n".join(evidence)
    sizes = {f: len(blobs[f]) for f in [*docs, *moe_docs]}
    blobs["NOTICE.md"] = notice(docs, sizes, ev_text, skipped, moe_docs, "\n".join(moe_ev),
                                "\n".join(sibling_lines)).encode()
    blobs[LICENSE_FILE] = (source / LICENSE_FILE).read_bytes()
    return (blobs, {**docs, **moe_docs}, "\n".join([ev_text, *moe_ev, *sibling_lines]), stats, skipped)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="aiconfigurator kernel data folder")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the tables")
    ap.add_argument("--check", action="store_true", help="fail if the files in --out differ from a rebuild")
    args = ap.parse_args(argv)
    blobs, docs, evidence, stats, skipped = build(args.source)
    total = sum(len(b) for b in blobs.values())
    if total >= SIZE_BUDGET:
        log(f"error: the tables ({total:,} bytes) exceed the {SIZE_BUDGET:,} byte budget")
        return 1
    if args.check:
        stale = [n for n, b in blobs.items()
                 if not (args.out / n).is_file() or (args.out / n).read_bytes() != b]
        extra = sorted(p.name for p in args.out.glob("*") if p.name not in blobs) if args.out.is_dir() else []
        if stale or extra:
            log(f"out of date: {stale}" + (f"; not built by this script: {extra}" if extra else ""))
            return 1
        log("kernel tables up to date")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for old in sorted(args.out.glob("*.json.gz")):
        if old.name not in blobs:  # a table this build no longer makes (e.g. found implausible)
            log(f"removing {old.name}")
            old.unlink()
    for name, blob in blobs.items():
        (args.out / name).write_bytes(blob)
    for name, blob in blobs.items():
        log(f"{name:40s} {len(blob):>9,d} bytes")
    log(f"{'total':40s} {total:>9,d} bytes")
    for file, why in skipped.items():
        log(f"not built: {file}: {why}")
    log("\nall-reduce unit evidence:\n" + evidence)
    log(f"\nglitches: share of measured points above {GLITCH} x (replaced), 1.2 x and 1.05 x their envelope")
    for label, ratios in sorted(stats.items()):
        n = len(ratios)
        shares = [sum(r > t for r in ratios) / n for t in (GLITCH, 1.2, 1.05)]
        log(f"  {label:32s} {shares[0]:6.2%} {shares[1]:6.2%} {shares[2]:6.2%}  of {n}")
    log("\nfitted efficiencies:")
    for file, d in docs.items():
        log(f"  {file}: {json.dumps(d['efficiency'], sort_keys=True)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
