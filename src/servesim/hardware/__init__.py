"""What a step costs: kernel tables, step model, names.

Submodules (imported on use, none eagerly): :mod:`servesim.hardware.kernels` (measured kernel
latencies of vLLM on A100, H100, H200 and B200), :mod:`servesim.hardware.stepmodel` (one engine
step priced part by part) and :mod:`servesim.hardware.engines` (serving-engine profiles).
"""
