"""servesim: speculative decoding and prefill/decode disaggregation, priced in closed form.

The package is built in layers, each a subpackage that imports only the ones below it:
``model`` (the closed forms, standard library only), ``hardware`` (what a step costs),
``inputs`` (traces, telemetry, calibration points), ``sim`` (the simulators), ``plan``
(search, capacity, the numbers each command shows), ``render`` (tables, plots, report)
and ``cli``.  The public names below resolve lazily, and the closed-form modules keep
their 0.1 paths (``servesim.speculative``, ``servesim.queueing``, ``servesim.kvcache``,
``servesim.serving``) as aliases of ``servesim.model.*``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from typing import TYPE_CHECKING, cast

from servesim._version import __version__

if TYPE_CHECKING:  # pragma: no cover
    import importlib.abc
    import types

_MOVED = {f"servesim.{m}": f"servesim.model.{m}" for m in ("speculative", "queueing", "kvcache", "serving")}
"""Old module paths (0.1) and their homes: ``import servesim.serving`` gives servesim.model.serving itself."""


class _Alias:
    """A meta-path finder and loader: an old module path loads as the module at its new home, the
    same object (its name and spec stay the new home's)."""

    def find_spec(self, name: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if name not in _MOVED:
            return None
        return importlib.machinery.ModuleSpec(name, cast("importlib.abc.Loader", self))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(_MOVED[spec.name])
        self.home = module.__spec__  # the import system sets __spec__ to the alias's; exec_module restores it
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self.home


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.append(_Alias())

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
