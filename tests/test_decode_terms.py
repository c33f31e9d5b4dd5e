"""The candidate decode-step terms that ``benchmarks/decode_terms.py`` judges leave-one-source-out
(issue 48), each against its count of kernels or all-reduces made by hand, and put back after."""

from __future__ import annotations

from types import ModuleType

import pytest

from servesim.hardware.pricer import Deployment, build_step_model
from servesim.hardware.stepmodel import StepModel
from tests.bench_helpers import load_benchmark

LLAMA_8B_LAYERS = 32


def _decode_terms() -> ModuleType:
    return load_benchmark("decode_terms")


def _model(tp: int) -> StepModel:
    sm, _, _ = build_step_model(Deployment(model="meta-llama/Llama-3.1-8B-Instruct", gpu="h100-sxm", tp=tp))
    assert isinstance(sm, StepModel)
    return sm


def test_graph_gap_adds_its_size_to_each_kernel_of_a_decode_step_only():
    terms = _decode_terms()
    before = _model(1)
    decode = before.step_price(1, 600)[0]
    prefill = before.step_price(0, 0, ((512, 0, True),))[0]
    with terms.term_added("graph-gap", 1.0):
        sm = _model(1)
        # a layer's 4 weight GEMMs, its decode attention and 4 other kernels; the LM head and sampling
        kernels = LLAMA_8B_LAYERS * (4 + 1 + 4) + 2
        assert sm.step_price(1, 600)[0] == pytest.approx(decode + kernels * 1e-6, rel=1e-12)
        assert sm.step_price(0, 0, ((512, 0, True),))[0] == prefill  # a step with a chunk is no graph
    assert _model(1).step_price(1, 600)[0] == decode  # put back


def test_allreduce_wait_adds_its_size_to_each_tensor_parallel_all_reduce():
    terms = _decode_terms()
    one, two = _model(1).step_price(8, 600)[0], _model(2).step_price(8, 600)[0]
    with terms.term_added("allreduce-wait", 5.0):
        assert _model(1).step_price(8, 600)[0] == one  # no all-reduce on one GPU
        # two all-reduces a layer (after attention, after the MLP) at 5 us each
        assert _model(2).step_price(8, 600)[0] == pytest.approx(two + 2 * LLAMA_8B_LAYERS * 5e-6, rel=1e-12)
    assert _model(2).step_price(8, 600)[0] == two


def test_a_grid_must_start_at_the_shipped_model(capsys):
    assert _decode_terms().main(["--grid", "1,2"]) == 2
    assert "--grid must start at 0" in capsys.readouterr().err
