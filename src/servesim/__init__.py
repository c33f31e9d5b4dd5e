"""servesim: speculative decoding and prefill/decode disaggregation, priced in closed form.

The analytic core (:mod:`servesim.model.speculative`, :mod:`servesim.model.queueing`,
:mod:`servesim.model.kvcache`, :mod:`servesim.model.serving`) imports only the standard
library.
"""

from __future__ import annotations

__version__ = "0.1.0"

# Public names resolve lazily (PEP 562), so that ``import servesim.model.queueing``
# does not also load the serving catalogs.
_EXPORTS = {
    "ParameterError": "servesim._checks",
    "LINKS": "servesim.model.kvcache",
    "MODELS": "servesim.model.kvcache",
    "KVShape": "servesim.model.kvcache",
    "Link": "servesim.model.kvcache",
    "kv_bytes_per_token": "servesim.model.kvcache",
    "kv_transfer_s": "servesim.model.kvcache",
    "MMc": "servesim.model.queueing",
    "erlang_b": "servesim.model.queueing",
    "erlang_c": "servesim.model.queueing",
    "mmc_mean_wait_s": "servesim.model.queueing",
    "mmc_wait_tail": "servesim.model.queueing",
    "DEFAULT_NODE": "servesim.model.serving",
    "WORKLOAD_PRESETS": "servesim.model.serving",
    "NodeSpec": "servesim.model.serving",
    "ServingResult": "servesim.model.serving",
    "Workload": "servesim.model.serving",
    "best_split": "servesim.model.serving",
    "colocated": "servesim.model.serving",
    "disaggregated": "servesim.model.serving",
    "link_crossover": "servesim.model.serving",
    "SPECDEC_PRESETS": "servesim.model.speculative",
    "SpecDecPreset": "servesim.model.speculative",
    "expected_tokens": "servesim.model.speculative",
    "optimal_k": "servesim.model.speculative",
    "speedup": "servesim.model.speculative",
}


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'servesim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "DEFAULT_NODE",
    "LINKS",
    "MODELS",
    "SPECDEC_PRESETS",
    "WORKLOAD_PRESETS",
    "KVShape",
    "Link",
    "MMc",
    "NodeSpec",
    "ParameterError",
    "ServingResult",
    "SpecDecPreset",
    "Workload",
    "__version__",
    "best_split",
    "colocated",
    "disaggregated",
    "erlang_b",
    "erlang_c",
    "expected_tokens",
    "kv_bytes_per_token",
    "kv_transfer_s",
    "link_crossover",
    "mmc_mean_wait_s",
    "mmc_wait_tail",
    "optimal_k",
    "speedup",
]
