"""Bytes per stored value of every precision servesim prices: the one table every pricer reads.

Block and group scales are included, as the checkpoints store them:

* ``bf16``: 2 bytes;
* ``fp8``: 1 byte (per-tensor or per-channel scales, a handful of values a matrix, not counted);
* ``fp8_block``: 1 byte + one FP32 scale per 128 x 128 block = ``1 + 4 / 16384`` (DeepSeek-V3's
  ``weight_block_size``);
* ``fp4`` (NVFP4): 4 bits + one FP8 scale per 16 values = ``0.5 + 1/16``;
* ``mxfp4``: 4 bits + one E8M0 scale per 32 values = ``0.5 + 1/32`` (OCP MX);
* ``mxfp4_mxfp8``: the MXFP4 weights of a kernel that quantizes its activations to MXFP8
  (the weights are what is stored: ``0.5 + 1/32``);
* ``int4``: 4 bits + one BF16 scale per group of 32 = ``0.5 + 2/32`` (W4A16 groups).

Standard library only; nothing here prints.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["BYTES_PER_VALUE", "FP8_BLOCK", "NVFP4_BLOCK"]

NVFP4_BLOCK = 16
"""Values sharing one FP8 scale in NVFP4."""

FP8_BLOCK = 128
"""Rows (and columns) of a block-FP8 checkpoint's weight that share one FP32 scale: its
``quantization_config`` ``weight_block_size`` [128, 128] (DeepSeek-V3/R1, Kimi-K2, Qwen3-MoE's
-FP8 releases, MiniMax-M2)."""

BYTES_PER_VALUE: Mapping[str, float] = {
    "bf16": 2.0,
    "fp8": 1.0,
    "fp8_block": 1.0 + 4.0 / (FP8_BLOCK * FP8_BLOCK),
    "fp4": 0.5 + 1.0 / NVFP4_BLOCK,
    "mxfp4": 0.5 + 1.0 / 32,
    "mxfp4_mxfp8": 0.5 + 1.0 / 32,
    "int4": 0.5 + 2.0 / 32,
}
"""Bytes per stored value, scales included (see the module doc)."""
