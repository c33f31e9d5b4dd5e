"""servesim: speculative decoding and prefill/decode disaggregation, priced in closed form.

The analytic core (:mod:`servesim.speculative`, :mod:`servesim.queueing`,
:mod:`servesim.kvcache`, :mod:`servesim.serving`) imports only the standard
library.
"""

from __future__ import annotations

__version__ = "0.1.0"

# Public names resolve lazily (PEP 562), so that ``import servesim.queueing``
# does not also load the serving catalogs.
_EXPORTS = {
    "ParameterError": "servesim._checks",
    "LINKS": "servesim.kvcache",
    "MODELS": "servesim.kvcache",
    "KVShape": "servesim.kvcache",
    "Link": "servesim.kvcache",
    "kv_bytes_per_token": "servesim.kvcache",
    "kv_transfer_s": "servesim.kvcache",
    "MMc": "servesim.queueing",
    "erlang_b": "servesim.queueing",
    "erlang_c": "servesim.queueing",
    "mmc_mean_wait_s": "servesim.queueing",
    "mmc_wait_tail": "servesim.queueing",
    "DEFAULT_NODE": "servesim.serving",
    "WORKLOAD_PRESETS": "servesim.serving",
    "NodeSpec": "servesim.serving",
    "ServingResult": "servesim.serving",
    "Workload": "servesim.serving",
    "best_split": "servesim.serving",
    "colocated": "servesim.serving",
    "disaggregated": "servesim.serving",
    "link_crossover": "servesim.serving",
    "SPECDEC_PRESETS": "servesim.speculative",
    "SpecDecPreset": "servesim.speculative",
    "expected_tokens": "servesim.speculative",
    "optimal_k": "servesim.speculative",
    "speedup": "servesim.speculative",
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
