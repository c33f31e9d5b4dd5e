"""What a step costs (imports only :mod:`servesim.model`).

Submodules (imported on use, none eagerly): :mod:`~servesim.hardware.catalog` (GPUs, models and
links, shipped and ``--catalog``), :mod:`~servesim.hardware.names` (Hugging Face ids, config.json,
GPU aliases), :mod:`~servesim.hardware.precision` (dtypes), :mod:`~servesim.hardware.roofline`
(step times from bytes and FLOPs), :mod:`~servesim.hardware.speculation_physics` (speculation on
the roofline), :mod:`~servesim.hardware.kernels` (measured kernel latencies of vLLM on A100, H100,
H200 and B200), :mod:`~servesim.hardware.stepmodel` (one engine step priced part by part),
:mod:`~servesim.hardware.speculation` (d and c from the step model),
:mod:`~servesim.hardware.engines` (serving-engine profiles) and :mod:`~servesim.hardware.node`
(a reference-model node from either).
"""
