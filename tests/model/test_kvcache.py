"""KV bytes per token and transfer time."""

from __future__ import annotations

import pytest

from servesim import ParameterError
from servesim.model.kvcache import LINKS, MODELS, KVShape, kv_bytes_per_token, kv_transfer_s


def test_bytes_per_token_scales_with_every_factor():
    base = kv_bytes_per_token(80, 8, 128, 2)
    assert kv_bytes_per_token(40, 8, 128, 2) == base / 2
    assert kv_bytes_per_token(80, 1, 128, 2) == base / 8  # MQA: one KV head
    assert kv_bytes_per_token(80, 8, 128, 1) == base / 2  # FP8 cache


def test_seed_links_and_the_three_orders_of_magnitude():
    assert {"nvlink", "rdma", "tcp"} <= set(LINKS)
    assert LINKS["nvlink"].GBps == 400 and LINKS["tcp"].GBps == 1.25
    kb = MODELS["llama-3-70b"].bytes_for(6144)
    assert round(kb / 2.5e9 * 1e3) == 805  # the RAG prompt at 2.5 GB/s
    assert LINKS["tcp"].transfer_s(kb) / LINKS["nvlink"].transfer_s(kb) == 320


def test_transfer_time_is_bytes_over_bandwidth():
    assert kv_transfer_s(1e9, 1e9) == 1.0
    assert kv_transfer_s(0.0, 1e9) == 0.0


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: kv_bytes_per_token(0, 8, 128, 2), "layers"),
        (lambda: kv_bytes_per_token(80, 8, 128, 0), "bytes_per_value"),
        (lambda: kv_transfer_s(1.0, 0.0), "link_bytes_per_s"),
        (lambda: KVShape("x", 80, -8, 128), "kv_heads"),
        (lambda: MODELS["llama-3-70b"].bytes_for(-1), "tokens"),
    ],
)
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ParameterError) as info:
        call()
    assert info.value.name == name
