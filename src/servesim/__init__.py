"""servesim: speculative decoding and prefill/decode disaggregation, priced in closed form.

The analytic core (:mod:`servesim.speculative`, :mod:`servesim.queueing`,
:mod:`servesim.kvcache`, :mod:`servesim.serving`) imports only the standard
library.
"""

from __future__ import annotations

__version__ = "0.1.0"

from servesim._checks import ParameterError
from servesim.kvcache import LINKS, MODELS, KVShape, Link, kv_bytes_per_token, kv_transfer_s
from servesim.queueing import MMc, erlang_b, erlang_c, mmc_mean_wait_s, mmc_wait_tail
from servesim.serving import (
    DEFAULT_NODE,
    WORKLOAD_PRESETS,
    NodeSpec,
    ServingResult,
    Workload,
    best_split,
    colocated,
    disaggregated,
    link_crossover,
)
from servesim.speculative import (
    SPECDEC_PRESETS,
    SpecDecPreset,
    expected_tokens,
    optimal_k,
    speedup,
)

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
