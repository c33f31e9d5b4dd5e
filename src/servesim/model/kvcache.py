"""KV-cache size per token and the time to ship it over a link.

For a decoder with grouped-query attention every layer stores one key and one
value vector per KV head for every token (K01 section 3):

    bytes/token = 2 * layers * kv_heads * head_dim * bytes_per_value
                  ^ one K and one V

Llama-70B (80 layers, 8 KV heads of 128, FP16) gives 2*80*8*128*2 = 327,680
B/token = 320 KiB/token.  Shipping a prompt's cache from a prefill node to a
decode node takes ``bytes/token * prompt_tokens / link_bytes_per_s``.

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from servesim._catalogfile import load_builtin
from servesim._checks import check_int, check_real

__all__ = ["LINKS", "MODELS", "KVShape", "Link", "kv_bytes_per_token", "kv_transfer_s", "shipped_links",
           "shipped_models"]


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_value: float) -> float:
    """2 * layers * kv_heads * head_dim * bytes_per_value (K and V, every layer)."""
    n_layers = check_int("layers", layers, lo=1)
    n_heads = check_int("kv_heads", kv_heads, lo=1)
    dim = check_int("head_dim", head_dim, lo=1)
    width = check_real("bytes_per_value", bytes_per_value, lo=0.0, lo_open=True)
    return 2 * n_layers * n_heads * dim * width


def kv_transfer_s(kv_bytes: float, link_bytes_per_s: float) -> float:
    """Seconds to move ``kv_bytes`` over a link of ``link_bytes_per_s`` (no overlap)."""
    size = check_real("kv_bytes", kv_bytes, lo=0.0)
    bw = check_real("link_bytes_per_s", link_bytes_per_s, lo=0.0, lo_open=True)
    return size / bw


@dataclass(frozen=True)
class KVShape:
    """The attention shape that fixes KV bytes per token."""

    name: str
    layers: int
    kv_heads: int
    head_dim: int
    bytes_per_value: float = 2.0

    def __post_init__(self) -> None:
        kv_bytes_per_token(self.layers, self.kv_heads, self.head_dim, self.bytes_per_value)

    @property
    def bytes_per_token(self) -> float:
        return kv_bytes_per_token(self.layers, self.kv_heads, self.head_dim, self.bytes_per_value)

    def bytes_for(self, tokens: float) -> float:
        """KV bytes of a ``tokens``-long prompt."""
        return self.bytes_per_token * check_real("tokens", tokens, lo=0.0)


@dataclass(frozen=True)
class Link:
    """An interconnect between a prefill node and a decode node (effective bytes/s)."""

    name: str
    bytes_per_s: float
    description: str = ""

    def __post_init__(self) -> None:
        check_real("link_bytes_per_s", self.bytes_per_s, lo=0.0, lo_open=True)

    @property
    def GBps(self) -> float:
        """Bandwidth in GB/s (10^9 bytes per second)."""
        return self.bytes_per_s / 1e9

    def transfer_s(self, kv_bytes: float) -> float:
        return kv_transfer_s(kv_bytes, self.bytes_per_s)


@cache
def shipped_links() -> dict[str, Link]:
    """The named links (nvlink, rdma, tcp, ...) of links.toml, read on first use, once."""
    return {
        name: Link(name, e["GBps"] * 1e9, e.get("why", ""))
        for name, e in load_builtin("links.toml")["link"].items()
    }


@cache
def shipped_models() -> dict[str, KVShape]:
    """The models' KV shapes of models.toml, read on first use, once."""
    return {
        name: KVShape(name, e["layers"], e["kv_heads"], e["head_dim"], e["bytes_per_value"])
        for name, e in load_builtin("models.toml")["model"].items()
    }


if TYPE_CHECKING:  # pragma: no cover - the names as the type checker sees them; __getattr__ gives them
    LINKS: dict[str, Link]
    """Named links (nvlink, rdma, tcp, ...) from links.toml: :func:`shipped_links`."""
    MODELS: dict[str, KVShape]
    """Model KV shapes from models.toml: :func:`shipped_models`."""

_LAZY = {"LINKS": shipped_links, "MODELS": shipped_models}


def __getattr__(name: str) -> object:
    """``LINKS`` and ``MODELS``, each read from its data file when first asked for (PEP 562), so
    that importing this module parses no file."""
    if name in _LAZY:
        value = globals()[name] = _LAZY[name]()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
