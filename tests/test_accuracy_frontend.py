"""The first-token path's candidate terms that ``benchmarks/accuracy.py --frontend`` scans
(:func:`frontend_term_ms`), each against its formula evaluated by hand."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from tests.bench_helpers import load_benchmark


def _accuracy() -> ModuleType:
    return load_benchmark("accuracy")


def _result(engine: str = "vllm", note: str = "", isl: str = "1024", in_flight: float = 64.0,
            tput: float = 5000.0) -> dict[str, Any]:
    return {"row": {"engine": engine, "note": note, "isl": isl}, "in_flight": in_flight,
            "pred": {"tput": tput}}


def test_each_term_is_its_formula():
    term = _accuracy().frontend_term_ms
    x = _result()
    assert term("tokenize", x, 2.0) == pytest.approx(1024 * 2e-3)  # 1,024 tokens at 2 us: 2.048 ms
    assert term("burst", x, 100.0) == pytest.approx(64 * 0.1 / 2)  # half of 64 chunks at 0.1 ms: 3.2 ms
    # busy 5,000 tok/s x 100 us = 0.5 of the time; a step's work S = 6.4 ms: S / 2 + 0.5 S / 0.5
    assert term("queue", x, 100.0) == pytest.approx(3.2 + 6.4)
    # saturated: rho is held at 0.95 (20,000 tok/s x 100 us would be 2)
    assert term("queue", _result(tput=20000.0), 100.0) == pytest.approx(3.2 + 0.95 * 6.4 / 0.05)
    assert term("burst", x, 0.0) == term("queue", x, 0.0) == term("tokenize", x, 0.0) == 0.0


def test_python_only_terms_skip_the_cpp_backend_and_grow_with_load():
    acc = _accuracy()
    term = acc.frontend_term_ms
    triton = _result(engine="trtllm", note="Triton TensorRT-LLM backend v0.14")
    assert acc.overlap_of(triton["row"]) is False  # the C++ backend: no Python front end
    assert term("burst-py", triton, 100.0) == 0.0 and term("burst", triton, 100.0) > 0.0
    assert term("burst-py", _result(), 100.0) == term("burst", _result(), 100.0)
    loads = [term("queue", _result(in_flight=b, tput=80.0 * b), 100.0) for b in (1, 8, 32, 64, 100)]
    assert loads == sorted(loads) and loads[0] < loads[-1]  # more in flight, a longer wait
