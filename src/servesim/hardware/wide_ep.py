"""Wide expert parallelism on an NVLink domain: TensorRT-LLM's MNNVL all-to-all, from its measured table.

On a GB200 / GB300 NVL72 rack TensorRT-LLM moves an attention-DP MoE layer's tokens to their experts
and back with its own all-to-all through the domain's shared NVLink memory, not DeepEP over RDMA:
``tensorrt_llm/_torch/modules/fused_moe/communication/communication_factory.py``
(``CommunicationFactory.create_strategy``) tries NVLinkOneSided first, then NVLinkTwoSided (both
need MNNVL: every NVLink of the domain up), and only then NCCL-EP, DeepEP, DeepEP low-latency and
the all-gather / reduce-scatter fallback (which it also takes whenever attention is not data
parallel or the MoE is tensor parallel).

The table (``gb200_trtllm_moe.json.gz``, ``mnnvl``; aiconfigurator's
``comm_trtllm_1.3.0rc10_trtllm_alltoall_perf``, rows of TensorRT-LLM 1.2.0rc6, NOTICE.md) times one
rank's dispatch and combine (and the two-sided kernel's routing ``prepare``) for DeepSeek-V3's
shape (hidden 7168, top-8 of 256 experts, balanced routing) by EP size (2-64) and the rank's own
tokens (1-65536), per kernel and activation dtype: one-sided NVFP4 (EP up to 32), two-sided BF16,
FP8 and NVFP4.  :func:`mnnvl_alltoall` prices a step's exchange from it:

* kernel: one-sided where it was measured for the activations (NVFP4, EP <= 32), else two-sided
  (``prepare`` + ``dispatch`` + ``combine``), as the factory's order picks where both run;
* activations: NVFP4 for NVFP4 experts, FP8 for FP8 / block-FP8 experts, else BF16 (the dispatch
  payload is the MoE's input quantized as the experts take it); the combine returns BF16;
* EP beyond the measured sizes (72): the largest measured EP's time, scaled by the kernel's
  roofline on the bytes one rank sends (which do not grow with EP: every top-k copy leaves the
  rank at most once), and said so;
* another model shape: the measured shape's time times the ratio of the two shapes' fitted
  rooflines (``max(floor, bytes / (bus x NVLink))``) at the same tokens;
* GB300 (no table of its own; the same NVLink 5 switch trays and 900 GB/s a GPU): GB200's table,
  with a note;
* an EP group that leaves the NVLink domain (DEP128 over two NVL72 racks): no MNNVL.  Both NVLink
  kernels map every rank's workspace into one fabric memory (``nvlink_one_sided.py``
  ``NVLinkOneSided.__init__``: ``MnnvlMemory(mapping, ...)``, "symmetric memory to enable
  peer-to-peer access between GPUs over NVLink"), which exists only inside one NVLink domain, so
  their constructors raise and ``create_strategy`` falls through to DeepEP (only with
  ``TRTLLM_CAN_USE_DEEP_EP=1`` and BF16 activations) or to its always-working
  ``AllGatherReduceScatter``: the step model prices the latter, NCCL's all-gather and
  reduce-scatter by the hierarchical bound across the racks (``servesim.hardware.moe_kernels``).
  TensorRT-LLM ``communication_factory.py`` and ``nvlink_one_sided.py`` at commits 673f3412 and
  439e0799 (NVIDIA/TensorRT-LLM).

Standard library only.
"""

from __future__ import annotations

import math
from typing import Any

from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware.kernels import Lookup, _Grid
from servesim.hardware.moe_kernels import MoETables, moe_tables

__all__ = ["MNNVL_ACTIVATION", "mnnvl_alltoall", "mnnvl_bytes", "mnnvl_table"]

MNNVL_ACTIVATION = {"fp4": "fp4", "fp8": "fp8", "fp8_block": "fp8"}
"""The dispatch payload's dtype by MoE weight dtype (BF16 for every other)."""

_PER_VALUE = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5625}  # NVFP4: 4 bits + one FP8 scale per 16 values


def mnnvl_bytes(op: str, dtype: str, tokens: float, hidden: int, topk: int) -> float:
    """Bytes one rank sends (``dispatch``: every top-k copy of its ``tokens`` in ``dtype``) or takes
    back (``combine``: BF16 copies; ``combine_low_precision``: NVFP4), or its routing metadata
    (``prepare``: 8 bytes a token-expert pair), as ``scripts/build_kernel_tables.py`` counts them."""
    if op == "prepare":
        return tokens * topk * 8.0
    if op == "dispatch":
        return tokens * topk * hidden * _PER_VALUE[dtype]
    return tokens * topk * hidden * (0.5625 if op == "combine_low_precision" else 2.0)


def mnnvl_table(mt: MoETables, gpus: int | None = None) -> tuple[dict[str, Any], MoETables, str] | None:
    """The MNNVL all-to-all table for ``mt``'s GPU and engine: its own (``mnnvl`` in the file), else
    the one measured with the same engine on another GPU of an NVL72 domain (GB300 borrows GB200's),
    with a note; None where the GPU has no multi-node NVLink domain, no such table exists, or the EP
    group of ``gpus`` GPUs leaves the domain (module docstring: MNNVL runs inside one rack only)."""
    if gpus is not None and not mt.topology.within(check_int("gpus", gpus, lo=1)):
        return None
    if "mnnvl" in mt._doc:
        return mt._doc["mnnvl"], mt, ""
    if not mt.topology.mnnvl:
        return None
    for other in ("gb200", "gb300"):
        if other == mt.name:
            continue
        t, _ = moe_tables(other, mt.engine_name)
        if t is not None and t.engine_name == mt.engine_name and "mnnvl" in t._doc:
            version = t._doc["mnnvl"]["version"]
            note = (f"MNNVL all-to-all not measured on {mt.name}: {t.device}'s ({version}; "
                    f"the same NVLink 5 domain at {t.nvlink_bytes_per_s / 1e9:g} GB/s a GPU)")
            return t._doc["mnnvl"], t, note
    return None


def _roof(owner: MoETables, key: str, op: str, dtype: str, tokens: float, hidden: int, topk: int) -> float:
    f = owner.efficiency["mnnvl"][key]
    nbytes = mnnvl_bytes(op, dtype, tokens, hidden, topk)
    return max(f.floor_ms, 1e3 * nbytes / (f.bus * owner.nvlink_bytes_per_s))


def _op(table: dict[str, Any], owner: MoETables, kernel: str, op: str, dtype: str, tokens: float, hidden: int,
        topk: int, ep: int) -> Lookup:
    key = f"{kernel},{op},{dtype}"
    g = table["grids"][key]
    eps = [int(e) for e in g["ep"]]
    grid = _Grid(("ep", "tokens"), (eps, table["tokens"]), g["ms"])
    e_used = float(min(ep, eps[-1]))
    mh, mk = int(table["shape"][0]), int(table["shape"][1])
    v = grid.interp((e_used, tokens))
    notes = []
    if v is None:
        lk = grid.estimate((e_used, tokens), lambda p: _roof(owner, key, op, dtype, p[1], mh, mk),
                           f"mnnvl {kernel} {op} {dtype}", "at its fitted share of NVLink")
        v, notes = lk.ms, [lk.note]
    if ep > eps[-1]:
        notes.append(f"mnnvl {kernel} {op} over EP{ep} not measured: EP{eps[-1]}'s time (a rank's bytes do "
                     "not grow with EP)")
    if (hidden, topk) != (mh, mk):
        v *= _roof(owner, key, op, dtype, tokens, hidden, topk) / _roof(owner, key, op, dtype, tokens, mh, mk)
        notes.append(f"mnnvl {op} hidden/topk {hidden}/{topk} not measured: {mh}/{mk} scaled by the roofline")
    return Lookup(v, not notes, "; ".join(n for n in notes if n))


def mnnvl_alltoall(mt: MoETables, moe_dtype: str, tokens: float, hidden: int, topk: int,
                   ep: int) -> Lookup | None:
    """One MoE layer's MNNVL dispatch + combine (ms) for ``tokens`` tokens of this rank over ``ep``
    ranks (module docstring), or None where there is no MNNVL table for ``mt``'s GPU and engine or
    the ``ep`` ranks leave one NVLink domain."""
    t = check_real("tokens", tokens, lo=0.0, lo_open=True)
    n = check_int("ep", ep, lo=1)
    check_int("hidden", hidden, lo=1)
    check_int("topk", topk, lo=1)
    if n == 1:
        return Lookup(0.0, True)
    got = mnnvl_table(mt, n)
    if got is None:
        return None
    table, owner, borrowed = got
    act = MNNVL_ACTIVATION.get(moe_dtype, "bf16")
    grids = table["grids"]
    one = f"one_sided,dispatch,{act}"
    ops: tuple[str, ...]
    if one in grids and n <= max(int(e) for e in grids[one]["ep"]):
        kernel, ops = "one_sided", ("dispatch", "combine")
    elif f"two_sided,dispatch,{act}" in grids:
        kernel, ops = "two_sided", ("prepare", "dispatch", "combine")
    else:
        raise ParameterError("moe_dtype", moe_dtype, "a dtype whose MNNVL all-to-all was measured")
    lks = [_op(table, owner, kernel, op, act, max(1.0, t), hidden, topk, n) for op in ops]
    ms = math.fsum(lk.ms for lk in lks)
    notes = [borrowed, *(lk.note for lk in lks)]
    head = f"TensorRT-LLM MNNVL all-to-all ({kernel.replace('_', '-')}, {act} dispatch) over EP{n}"
    return Lookup(ms, all(lk.measured for lk in lks) and not borrowed,
                  "; ".join(x for x in (head, *notes) if x))
