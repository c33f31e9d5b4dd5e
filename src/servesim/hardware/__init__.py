"""What a step costs (imports only :mod:`servesim.model`).

Submodules (imported on use, none eagerly): :mod:`~servesim.hardware.catalog` (GPUs, models and
links, shipped and ``--catalog``), :mod:`~servesim.hardware.names` (Hugging Face ids, config.json,
GPU aliases), :mod:`~servesim.hardware.precision` (dtypes), :mod:`~servesim.hardware.roofline`
(the analytic roofline of seed 003: arithmetic intensity, the ridge, utilization),
:mod:`~servesim.hardware.kernels` and :mod:`~servesim.hardware.moe_kernels` (measured kernel
latencies of vLLM, SGLang and TensorRT-LLM), :mod:`~servesim.hardware.ops` (a step as a list of
operations, each priced by the engine's tables and at the speed of light: one cost model, two
pricers), :mod:`~servesim.hardware.stepmodel` and :mod:`~servesim.hardware.moe_step` (the steps of
dense and MoE/MLA models as those operations), :mod:`~servesim.hardware.speculation` (what
speculation costs, from the step model; :mod:`~servesim.hardware.speculation_physics` holds the
draft kinds and token trees), :mod:`~servesim.hardware.engines` (serving-engine profiles) and
:mod:`~servesim.hardware.node` (the lab's reference-model node from the step model).
"""
