"""Weight and KV-cache precisions: bytes per value, which GPU runs which, peak FLOP/s.

**Bytes per value** (:data:`BYTES_PER_VALUE`):

* ``bf16``: 2 bytes;
* ``fp8`` (E4M3): 1 byte; its scales (one per tensor, per channel or per 128 x 128
  block) add well under 0.1% and are not counted;
* ``fp4`` (NVFP4): 4-bit E2M1 values in blocks of 16 sharing one FP8 (E4M3) scale:
  ``0.5 + 1/16 = 0.5625`` bytes per parameter (the one FP32 scale per tensor is not
  counted).

**What a GPU supports** comes from the catalog: a weight dtype other than BF16 needs
the GPU's dense peak for it (``fp8_TFLOPS`` / ``fp4_TFLOPS`` in gpus.toml).  As
shipped: FP8 on H100, H200, B200 and MI300X; FP4 on B200 only.  The A100 has no FP8
tensor cores: vLLM runs an FP8 checkpoint there only as weight-only W8A16 (Marlin
kernels dequantize to BF16 and multiply in BF16), which is not an FP8 GEMM, so
``fp8`` on an A100 is refused (price it as ``bf16`` weights).  An FP8 KV cache
likewise needs FP8 support: on an A100 vLLM can store one, but the measured
kernel tables hold no such attention kernels, so it is refused too.

**Weight bytes** (:func:`weight_bytes`): the embedding tables (the input embedding
and an untied LM head) stay in BF16 in FP8 / FP4 checkpoints (vLLM's and
ModelOpt's FP8 and NVFP4 checkpoints keep ``lm_head`` and ``embed_tokens``
unquantized); every other parameter takes the chosen dtype's bytes.  Norm weights
and biases (about 0.01% of a model) are counted at that rate too.  The result is the
weights' memory footprint, input embedding included (a decode step streams all of it
but the input table, from which it only gathers rows).

Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from servesim._checks import ParameterError
from servesim.hardware.catalog import Catalog, builtin_catalog
from servesim.hardware.dtypes import BYTES_PER_VALUE, NVFP4_BLOCK
from servesim.hardware.names import canonical_gpu
from servesim.hardware.shape import ModelShape

__all__ = [
    "BYTES_PER_VALUE",
    "KV_DTYPES",
    "NVFP4_BLOCK",
    "WEIGHT_DTYPES",
    "bytes_per_value",
    "check_dtype",
    "check_kv_dtype",
    "kv_bytes_of",
    "normalize_dtype",
    "peak_flops",
    "supported_dtypes",
    "supported_kv_dtypes",
    "weight_bytes",
]

WEIGHT_DTYPES: tuple[str, ...] = ("bf16", "fp8", "fp4")
"""Weight (and GEMM) precisions, widest first."""

KV_DTYPES: tuple[str, ...] = ("bf16", "fp8")
"""KV-cache precisions."""

_ALIASES: Mapping[str, str] = {
    "bfloat16": "bf16", "float8": "fp8", "fp8_e4m3": "fp8", "e4m3": "fp8", "float8_e4m3fn": "fp8",
    "nvfp4": "fp4", "float4": "fp4",
}
_PEAK_FIELD: Mapping[str, str] = {"fp8": "fp8_TFLOPS", "fp4": "fp4_TFLOPS"}

_WHY_NOT: Mapping[tuple[str, str], str] = {
    ("a100-80gb", "fp8"): (
        "the A100 (Ampere) has no FP8 tensor cores: vLLM runs FP8 checkpoints there only as "
        "weight-only W8A16 (Marlin kernels, BF16 math), not as FP8 GEMMs; price it as bf16"
    ),
    ("a100-80gb", "fp4"): "the A100 has no FP4 tensor cores (FP4 is Blackwell's)",
    ("h100-sxm", "fp4"): "Hopper has no FP4 tensor cores (FP4 is Blackwell's: b200)",
    ("h200", "fp4"): "Hopper has no FP4 tensor cores (FP4 is Blackwell's: b200)",
    ("mi300x", "fp4"): "the MI300X (CDNA 3) has no FP4 matrix cores",
}
_WHY_NOT_KV: Mapping[str, str] = {
    "a100-80gb": (
        "an FP8 KV cache on the A100 is not in the measured tables: the A100 has no FP8 arithmetic, "
        "so the cache would only be a storage format dequantized inside attention, a kernel these "
        "tables do not cover"
    ),
}


_USER_ALIASES: Mapping[str, str] = {
    **_ALIASES, "w4a16": "int4", "int4_wo": "int4", "int4-wo": "int4", "fp8-block": "fp8_block",
    "block_fp8": "fp8_block", "fp8_block_scaled": "fp8_block", "mx_fp4": "mxfp4", "default": "auto",
}


def normalize_dtype(text: object) -> object:
    """A dtype as users and engines spell it, in servesim's name: case and surrounding blanks
    ignored, ``bfloat16`` -> ``bf16``, ``float8`` / ``fp8_e4m3`` -> ``fp8``, ``nvfp4`` -> ``fp4``,
    ``w4a16`` -> ``int4``, ``fp8-block`` -> ``fp8_block``, ``default`` -> ``auto``; anything else
    as given (lower-cased), for the checks that name the valid ones.  Not a string: unchanged."""
    if not isinstance(text, str):
        return text
    key = text.strip().lower()
    return _USER_ALIASES.get(key, key)


def _catalog(catalog: Catalog | None) -> Catalog:
    return catalog if catalog is not None else builtin_catalog()


def _normalize(name: str, dtype: object, allowed: tuple[str, ...]) -> str:
    key = normalize_dtype(dtype) if isinstance(dtype, str) else ""
    if key not in allowed:
        raise ParameterError(name, dtype, f"one of {', '.join(repr(d) for d in allowed)}")
    return key


def bytes_per_value(dtype: str) -> float:
    """Bytes one stored value of ``dtype`` takes (NVFP4 with its block scales: 0.5625)."""
    return BYTES_PER_VALUE[_normalize("dtype", dtype, WEIGHT_DTYPES)]


def supported_dtypes(gpu_name: str, catalog: Catalog | None = None) -> tuple[str, ...]:
    """The weight dtypes ``gpu_name`` runs GEMMs in: bf16, and those it has a peak for."""
    cat = _catalog(catalog)
    gpu = canonical_gpu(gpu_name, cat)
    extras = cat.gpu_extras.get(gpu, {})
    return tuple(d for d in WEIGHT_DTYPES if d == "bf16" or _PEAK_FIELD[d] in extras)


def supported_kv_dtypes(gpu_name: str, catalog: Catalog | None = None) -> tuple[str, ...]:
    """The KV-cache dtypes priced on ``gpu_name``: bf16, and fp8 where the GPU has FP8."""
    return tuple(d for d in KV_DTYPES if d in supported_dtypes(gpu_name, catalog))


def _check(name: str, value: str, allowed: tuple[str, ...],
           supported: Callable[[str, Catalog | None], tuple[str, ...]], gpu_name: str,
           catalog: Catalog | None, why_not: Callable[[str, str], str], what: str) -> str:
    """``value`` normalized if ``gpu_name`` runs it, else a ParameterError naming what it does run."""
    d = _normalize(name, value, allowed)
    cat = _catalog(catalog)
    gpu = canonical_gpu(gpu_name, cat)
    ok = supported(gpu, cat)
    if d not in ok:
        raise ParameterError(name, value, f"{what} {gpu} supports: {', '.join(ok)} ({why_not(gpu, d)})")
    return d


def check_dtype(dtype: str, gpu_name: str, catalog: Catalog | None = None) -> str:
    """Return the weight dtype (normalized: ``bf16``, ``fp8`` or ``fp4``) if ``gpu_name`` runs it.

    Raises :class:`ParameterError` (``name='dtype'``) naming what the GPU supports.
    """
    return _check("dtype", dtype, WEIGHT_DTYPES, supported_dtypes, gpu_name, catalog,
                  lambda gpu, d: _WHY_NOT.get((gpu, d), f"{gpu} has no {d.upper()} peak in the catalog "
                                                       f"({_PEAK_FIELD[d]})"), "a weight dtype")


def check_kv_dtype(kv_dtype: str, gpu_name: str, catalog: Catalog | None = None) -> str:
    """Return the KV-cache dtype (``bf16`` or ``fp8``) if it is priced on ``gpu_name``.

    Raises :class:`ParameterError` (``name='kv_dtype'``) naming what the GPU supports.
    """
    return _check("kv_dtype", kv_dtype, KV_DTYPES, supported_kv_dtypes, gpu_name, catalog,
                  lambda gpu, d: _WHY_NOT_KV.get(gpu, f"{gpu} has no FP8 peak in the catalog (fp8_TFLOPS)"),
                  "a KV-cache dtype")


def peak_flops(gpu_name: str, dtype: str, catalog: Catalog | None = None) -> float:
    """Dense tensor-core peak of ``gpu_name`` in ``dtype``, FLOP/s (datasheet; no sparsity)."""
    cat = _catalog(catalog)
    d = check_dtype(dtype, gpu_name, cat)
    gpu = canonical_gpu(gpu_name, cat)
    if d == "bf16":
        return cat.gpus[gpu].flops_per_s
    return float(cat.gpu_extras[gpu][_PEAK_FIELD[d]]) * 1e12


def weight_bytes(shape: ModelShape, dtype: str) -> float:
    """Bytes of all the weights with ``dtype`` (one of :data:`WEIGHT_DTYPES`, as users spell it) for
    everything but the BF16 embedding tables: :meth:`~servesim.hardware.shape.ModelShape.weight_bytes`,
    ``tables x 2 + (params - tables) x bytes_per_value(dtype)`` (see the module doc)."""
    return shape.weight_bytes(_normalize("dtype", dtype, WEIGHT_DTYPES))


class _HoldsKV(Protocol):
    def sequence_kv_bytes(self, tokens: float) -> float: ...


def kv_bytes_of(sm: _HoldsKV, tokens: float) -> float:
    """KV-cache bytes of one sequence's ``tokens`` tokens over all layers, in the step model ``sm``'s
    KV dtype and layout: what a disaggregated deployment sends over its link."""
    return sm.sequence_kv_bytes(tokens)
