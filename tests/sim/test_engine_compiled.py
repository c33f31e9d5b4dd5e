"""The engine loop compiled (servesim.sim._engine_loop) gives the Python loop's results, bit for bit.

The loop, the books and the policies are one text (servesim.sim.loop, servesim.sim.schedulers),
run in Python or compiled by numba; what differs is the representation (lists or arrays) and the
few functions that have a compiled twin (CPython's random generator, the price and gap tables).
Every case runs ``run_benchmark`` twice, ``loop="python"`` (the reference) and
``loop="compiled"``, and compares the two :class:`BenchResult` reprs, which spell every
float to the last bit and every type: the three engines' policies, closed loops and
Poisson rates, given lengths, prefilled decode workers, speculation, preemption under
KV pressure, chunked prefill, data-parallel MoE step models, warm-up, kept request
times, SGLang's receive interval, TensorRT-LLM's attention-DP balance and batch waiting, and
the errors the loop raises.  The growable books (finish heap, gap map, price table) are started
tiny in one case so that each grows many times.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

import pytest

from servesim._checks import ParameterError
from servesim.hardware.engines import engine_profile
from servesim.hardware.names import dense_shape, resolve_gpu
from servesim.hardware.speculation import Speculation
from servesim.hardware.stepmodel import StepModel
from servesim.plan.predict import Deployment, build_step_model
from servesim.sim.batching import Benchmark, BenchResult, run_benchmark
from servesim.sim.client import Client, arrival_times
from servesim.sim.schedulers import make_scheduler

# one xdist worker runs them all under the README's python -m pytest -n 2 --dist loadgroup: numba
# compiles once
pytestmark = pytest.mark.xdist_group("compiled-engine-loop")

H100 = resolve_gpu("h100-sxm").memory_bytes
RANGE = Client("vllm", random_range_ratio=0.5)


@cache
def _model(engine: str = "vllm", budget: int | None = None, **options: Any) -> StepModel:
    eng = engine_profile(engine, gpu="h100-sxm", memory_gib=80, max_num_batched_tokens=budget,
                         scheduler=dict(options) or None)
    return StepModel(dense_shape("llama-3-8b"), "h100-sxm", 1, engine=eng)


def _tiny_memory(sm: Any, tokens: int) -> float:
    """GPU memory that leaves room for about ``tokens`` of KV cache beside the weights."""
    eng = sm.engine
    kv = sm.kv_bytes_per_token_per_gpu
    if eng.fraction_of_free:
        return sm.weight_bytes_per_gpu + eng.reserved_bytes + (tokens + 0.5) * kv / eng.memory_fraction
    return (sm.weight_bytes_per_gpu + eng.reserved_bytes + (tokens + 0.5) * kv) / eng.memory_fraction


def _both(sm: Any, bench: Benchmark, memory: float = H100, **kw: Any) -> tuple[BenchResult, BenchResult]:
    """The run on the Python loop and on the compiled one (each on a policy of its own when one is
    given by name, so that a policy's state, SGLang's ratio, starts alike)."""
    ref = run_benchmark(sm, bench, memory, loop="python", **kw)
    got = run_benchmark(sm, bench, memory, loop="compiled", **kw)
    return ref, got


def _same(ref: BenchResult, got: BenchResult) -> None:
    assert repr(got) == repr(ref)


def _lengths(n: int, isl: int, osl: int, seed: int = 3) -> list[tuple[int, int]]:
    import random

    rng = random.Random(seed)
    return [(rng.randint(isl // 4, isl), rng.randint(1, osl)) for _ in range(n)]


# --------------------------------------------------------------------------- the three policies


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("load", [
    dict(concurrency=24, num_prompts=120),
    dict(rate_per_s=15.0, num_prompts=150),
    dict(rate_per_s=40.0, concurrency=16, num_prompts=100),
    dict(num_prompts=80),  # every request at once
])
def test_each_policy_at_each_load(engine, load):
    sm = _model(engine)
    ref, got = _both(sm, Benchmark(1024, 96, seed=7, client=RANGE, **load))
    _same(ref, got)
    assert ref.completed == load["num_prompts"]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_given_lengths_warmup_and_kept_requests(engine):
    n = 90
    bench = Benchmark(2048, 128, rate_per_s=20.0, num_prompts=n, warmup=10, seed=2)
    ref, got = _both(_model(engine), bench, lengths=_lengths(n, 2048, 128), keep_requests=True)
    _same(ref, got)
    assert len(ref.requests) == n and ref.completed == n - 10


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_prefilled_decode_workers(engine):
    n = 120
    arrivals = arrival_times(25.0, 1.0, n, 4)
    bench = Benchmark(1024, 200, rate_per_s=25.0, num_prompts=n, seed=4)
    for lengths in (None, _lengths(n, 1024, 200)):
        _same(*_both(_model(engine), bench, arrival_times=arrivals, prefilled=True, lengths=lengths,
                     keep_requests=True))


@pytest.mark.parametrize("prefilled", [False, True])
def test_thousands_of_requests(prefilled):
    """Long runs: thousands of TTFTs and TPOTs, their sums and squares, the percentiles of their
    sorted values, the weighted percentiles of thousands of gaps."""
    n = 4000
    bench = Benchmark(1024, 256, rate_per_s=40.0, num_prompts=n, seed=21, client=RANGE)
    ref, got = _both(_model("vllm"), bench, arrival_times=arrival_times(40.0, 1.0, n, 21),
                     prefilled=prefilled)
    _same(ref, got)


@pytest.mark.parametrize("loop", ["python", "compiled"])
@pytest.mark.parametrize("prefilled", [False, True])
def test_a_pools_worker_is_run_benchmark_with_arrays(loop, prefilled):
    """``run_worker`` (a disaggregated pool's worker: arrays in, each request's times out as arrays)
    is ``run_benchmark`` with ``arrival_times``, ``lengths`` and ``keep_requests``: the same report
    and the same times, to the bit, on either loop."""
    import numpy as np

    from servesim.sim.batching import run_worker

    n = 150
    sends = arrival_times(30.0, 1.0, n, 8)
    lengths = _lengths(n, 1024, 64, seed=8)
    bench = Benchmark(max(p for p, _ in lengths), max(o for _, o in lengths), num_prompts=n, seed=8)
    sm = _model("sglang")
    ref = run_benchmark(sm, bench, H100, arrival_times=sends, lengths=lengths, prefilled=prefilled,
                        keep_requests=True, loop=loop)
    got, times = run_worker(sm, bench, H100, np.array(sends), np.array([p for p, _ in lengths]),
                            np.array([o for _, o in lengths]), prefilled=prefilled, loop=loop)
    assert repr(dataclasses.replace(ref, requests=())) == repr(got)
    kept = list(zip(times.index.tolist(), times.sent.tolist(), times.first.tolist(), times.last.tolist(),
                    strict=True))
    assert kept == list(ref.requests) and len(kept) == n and times.index.dtype == np.int64


def test_the_compiled_statistics_are_the_pythons():
    """``_engine_loop.stats`` (mean, median, p99, std of a column, its percentiles read from a
    partition, not a sort) gives ``batching._mean_pct_std`` of the same values as a list, to the
    bit: many sizes (1 to 3,000, odd and even), ties, a prefix of a longer column, none."""
    import math

    import numpy as np

    from servesim.sim import _engine_loop
    from servesim.sim.batching import _mean_pct_std

    rng = np.random.default_rng(5)
    for trial in range(400):
        n = int(rng.integers(1, 3000)) if trial % 4 else int(rng.integers(1, 6))
        x = rng.random(n) * 10.0 ** rng.uniform(-4, 4)
        if trial % 3 == 0:
            x = np.round(x, 1)  # ties
        count = n if trial % 2 else int(rng.integers(1, n + 1))
        assert _engine_loop.stats(x, count) == _mean_pct_std(x[:count].tolist())
    assert all(math.isnan(v) for v in _engine_loop.stats(np.zeros(3), 0))


def test_one_token_outputs_leave_no_gaps():
    """A prefill worker's requests (output 1): no decode step at all, NaN gaps and TPOTs."""
    n = 40
    bench = Benchmark(3000, 1, rate_per_s=8.0, num_prompts=n, seed=1)
    ref, got = _both(_model("vllm"), bench, lengths=[(p, 1) for p, _ in _lengths(n, 3000, 1)])
    _same(ref, got)
    assert ref.steps > 0


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_speculation(engine):
    sm = _model(engine)
    spec = Speculation(k=3, alpha=0.7, draft_step_s=0.05 * sm.decode_step(1, 600).gpu_s)
    for bench in (Benchmark(512, 150, concurrency=12, num_prompts=60, seed=5, client=RANGE),
                  Benchmark(512, 150, rate_per_s=10.0, num_prompts=60, seed=6)):
        _same(*_both(sm, bench, spec=spec))
    arrivals = arrival_times(10.0, 1.0, 60, 8)
    _same(*_both(sm, Benchmark(512, 150, num_prompts=60, seed=8), spec=spec, arrival_times=arrivals,
                 prefilled=True))


# --------------------------------------------------------------------------- KV pressure, chunks


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_preemption_under_kv_pressure(engine):
    sm = _model(engine)
    memory = _tiny_memory(sm, 9000)
    bench = Benchmark(600, 400, concurrency=40, num_prompts=120, seed=9, client=RANGE)
    ref, got = _both(sm, bench, memory)
    _same(ref, got)
    if engine != "trtllm":  # TensorRT-LLM reserves and never evicts
        assert ref.preemptions > 0
    arrivals = arrival_times(60.0, 1.0, 120, 9)
    ref, got = _both(sm, bench, memory, arrival_times=arrivals, prefilled=True)
    _same(ref, got)


def test_vllm_reserving_and_sglang_long_outputs_past_the_clip():
    _same(*_both(_model("vllm"), Benchmark(800, 300, concurrency=30, num_prompts=90, seed=3, client=RANGE),
                 _tiny_memory(_model("vllm"), 12000), reserve=True))
    # Outputs longer than SGLang's clip (4,096): its reservation sums the running requests one by one.
    sm = _model("sglang")
    n = 24
    lengths = [(256 + 32 * i, 5000 if i % 3 else 300) for i in range(n)]
    _same(*_both(sm, Benchmark(1024, 5000, concurrency=12, num_prompts=n, seed=1), lengths=lengths))


@pytest.mark.parametrize(("engine", "options"), [
    ("vllm", {}),
    ("sglang", {}),
    ("sglang", {"enable_mixed_chunk": True}),
    ("trtllm", {"enable_chunked_prefill": True}),
])
def test_chunked_prefill(engine, options):
    sm = _model(engine, 512, **options)
    bench = Benchmark(3000, 64, rate_per_s=6.0, num_prompts=60, seed=11, client=RANGE)
    ref, got = _both(sm, bench)
    _same(ref, got)
    assert ref.steps > 0


@pytest.mark.parametrize(("model", "engine", "dp", "ep"), [
    ("deepseek-ai/DeepSeek-V3", "sglang", 8, 8),
    ("deepseek-ai/DeepSeek-V3", "vllm", 4, 4),
    ("Qwen/Qwen3-30B-A3B", "trtllm", 1, 1),
])
def test_moe_step_models_with_dp_ranks(model, engine, dp, ep):
    sm, _, memory = build_step_model(Deployment(model, "h200-sxm", 8 // dp, dtype="auto", engine=engine,
                                                dp=dp, ep=ep))
    bench = Benchmark(2048, 128, rate_per_s=30.0, num_prompts=80, seed=12, client=RANGE)
    _same(*_both(sm, bench, memory))
    _same(*_both(sm, dataclasses.replace(bench, rate_per_s=None, concurrency=32), memory))


@pytest.mark.parametrize("gpu", ["a100-80gb", "l40s"])
def test_unmeasured_steps_give_the_same_notes_in_the_same_order(gpu):
    sm, _, memory = build_step_model(Deployment("llama-3-8b", gpu, 1))
    bench = Benchmark(2048, 128, rate_per_s=30.0, num_prompts=80, seed=12, client=RANGE)
    ref, got = _both(sm, bench, memory)
    _same(ref, got)
    assert not ref.measured and ref.notes


# --------------------------------------------------------------------------- books that grow


def _table(sm: Any) -> dict[str, Any]:
    """The compiled price table's fields, for the step model's steps at one position."""
    from servesim.sim import _engine_loop, loop

    return _engine_loop.dump(loop.Prices, sm.price_cache.tables[((1, None, sm.engine), True)].table)


def test_the_growing_books(monkeypatch):
    """A finish heap, a gap map and a price table that start with room for almost nothing grow
    as they fill, many times over, and the run still matches."""
    from servesim.sim import _engine_loop, batching, loop
    from servesim.sim.schedulers import base

    monkeypatch.setattr(base, "HEAP_START", 0)
    monkeypatch.setattr(loop, "GAPS_START", 2)
    monkeypatch.setattr(batching, "_PriceTable", _SmallTable)
    sm = StepModel(dense_shape("llama-3-8b"), "h100-sxm", 1,
                   engine=engine_profile("vllm", gpu="h100-sxm", memory_gib=80))
    memory = _tiny_memory(sm, 6000)
    bench = Benchmark(700, 300, concurrency=48, num_prompts=150, seed=13, client=RANGE)
    ref, got = _both(sm, bench, memory)
    _same(ref, got)
    assert ref.preemptions > 20
    table = _table(sm)
    assert table["entries"] > 100 and table["dt"].shape[0] >= table["entries"] > 2
    assert _engine_loop.dump(loop.Prices, _SmallTable(True).table)["dt"].shape[0] == 2


class _SmallTable:
    """A price table with room for two entries at first."""

    def __init__(self, compiled: bool) -> None:
        from servesim.sim import _engine_loop, loop

        self.table = _engine_loop.struct_of(loop.Prices(2)) if compiled else loop.Prices(2)
        self.notes: list[tuple[str, ...]] = []
        self.runs = 0


def test_a_second_run_on_the_same_step_model_reads_the_prices_it_left():
    sm = StepModel(dense_shape("llama-3-8b"), "h100-sxm", 1,
                   engine=engine_profile("sglang", gpu="h100-sxm", memory_gib=80))
    bench = Benchmark(1024, 64, rate_per_s=12.0, num_prompts=60, seed=14)
    first = run_benchmark(sm, bench, H100, loop="compiled")
    entries = _table(sm)["entries"]
    again = run_benchmark(sm, bench, H100, loop="compiled")
    assert repr(again) == repr(first) == repr(run_benchmark(sm, bench, H100, loop="python"))
    assert _table(sm)["entries"] == entries > 0


# --------------------------------------------------------------------------- policies and errors


def test_a_policy_object_keeps_its_state_across_runs_alike():
    """SGLang's ratio carries over from one run to the next on the same policy object."""
    sm = _model("sglang")
    bench = Benchmark(1024, 200, concurrency=32, num_prompts=96, seed=15, client=RANGE)
    memory = _tiny_memory(sm, 20000)
    ref_policy, got_policy = make_scheduler("sglang", sm.engine), make_scheduler("sglang", sm.engine)
    for _ in range(2):
        ref = run_benchmark(sm, bench, memory, scheduler=ref_policy, loop="python")
        got = run_benchmark(sm, bench, memory, scheduler=got_policy, loop="compiled")
        _same(ref, got)
        assert got_policy.ratio == ref_policy.ratio  # type: ignore[attr-defined]


def test_a_policy_with_a_replaced_method_runs_in_python():
    sm = _model("vllm")
    policy = make_scheduler("vllm", sm.engine)
    calls = []
    inner = policy.schedule

    def schedule(s):  # type: ignore[no-untyped-def]
        calls.append(1)
        return inner(s)

    policy.schedule = schedule  # type: ignore[method-assign]
    bench = Benchmark(512, 32, concurrency=4, num_prompts=12)
    got = run_benchmark(sm, bench, H100, scheduler=policy, loop="compiled")
    assert calls and repr(got) == repr(run_benchmark(sm, bench, H100, loop="python"))


def test_inputs_of_other_types_run_in_python():
    """Integer send times and numpy lengths reach the reference loop's results as they are (an int
    arrival in the kept times, numpy integers in the token counts): those runs stay in Python."""
    import numpy as np

    sm = _model("vllm")
    n = 24
    bench = Benchmark(512, 64, num_prompts=n, seed=3)
    _same(*_both(sm, bench, arrival_times=[i // 6 for i in range(n)], keep_requests=True))
    lengths = [(np.int64(p), np.int64(o)) for p, o in _lengths(n, 512, 64)]
    ref, got = _both(sm, bench, lengths=lengths)  # type: ignore[arg-type]
    _same(ref, got)
    assert type(ref.total_input_tokens) is not int


def test_auto_picks_a_loop_and_a_bad_loop_is_refused():
    sm = _model("trtllm")
    bench = Benchmark(512, 32, concurrency=4, num_prompts=12)
    assert repr(run_benchmark(sm, bench, H100)) == repr(run_benchmark(sm, bench, H100, loop="python"))
    with pytest.raises(ParameterError, match="loop"):
        run_benchmark(sm, bench, H100, loop="numba")


@pytest.mark.parametrize("loop", ["python", "compiled"])
def test_the_same_errors(loop):
    sm = _model("vllm")
    with pytest.raises(ParameterError, match="engine steps"):
        run_benchmark(sm, Benchmark(512, 400, concurrency=8, num_prompts=40), H100, max_steps=50, loop=loop)


@pytest.mark.parametrize("budget", [8192, 8384])
def test_trtllm_whole_prompts_under_each_attention_dp_ranks_budget(budget):
    # 8k prompts on 4 attention-DP ranks of max_num_tokens 8192: a rank holds no prompt beside its
    # own decodes, so each rank decodes about one sequence at a time; 8,384 leaves room for 192
    sm, _, memory = build_step_model(Deployment("Qwen/Qwen3-30B-A3B", "h200-sxm", 1, dtype="auto",
                                                engine="trtllm", dp=4, ep=4, max_num_batched_tokens=budget))
    bench = Benchmark(8192, 256, concurrency=16, num_prompts=64, seed=1)
    ref, got = _both(sm, bench, memory)
    _same(ref, got)
    if budget == 8192:
        assert ref.decode_batch <= 4.0  # one sequence a rank at most
    else:
        assert ref.decode_batch > 8.0


# --------------------------------------------------------------------------- options compiled as well


@pytest.mark.parametrize(("engine", "options"), [
    ("sglang", {"scheduler_recv_interval": 30}),
    ("trtllm", {"batch_wait_timeout_iters": 3, "batch_wait_max_tokens_ratio": 0.5,
                "new_requests_per_iteration": 0}),
])
def test_options_the_old_compiled_loop_left_to_python(engine, options):
    """SGLang's receive interval and TensorRT-LLM's batch waiting run compiled too: one text."""
    sm = _model(engine, None, **options)
    bench = Benchmark(512, 96, rate_per_s=30.0, num_prompts=80, seed=3, client=RANGE)
    ref, got = _both(sm, bench)
    _same(ref, got)
    assert ref.completed == 80


def test_trtllm_attention_dp_balance_compiled():
    eng = engine_profile("trtllm", gpu="h200", memory_gib=139.8, dp=4, tp=4,
                         scheduler={"attention_dp_balance": True, "attention_dp_timeout_iters": 5,
                                    "attention_dp_batching_wait_iters": 2})
    sm = StepModel(dense_shape("llama-3-8b"), "h200", 4, engine=eng)
    bench = Benchmark(1024, 96, rate_per_s=30.0, num_prompts=80, seed=3, client=RANGE)
    _same(*_both(sm, bench, 139.8 * 2**30))


def test_compile_kernels_compiles_at_the_signature_the_loop_calls():
    """``compile_kernels`` (what benchmarks/bench_engine.py warms up with) and the run's entry point
    use one signature (``core_signature``): warming a policy leaves the entry point a compiled
    version at it, so nothing compiles again (the disk cache may serve either)."""
    from servesim.sim import _engine_loop
    from servesim.sim.schedulers.trtllm import TrtllmScheduler

    assert _engine_loop.compile_kernels((TrtllmScheduler,)) >= 0
    core = _engine_loop.core_for(TrtllmScheduler)
    assert _engine_loop.core_signature(TrtllmScheduler) in core.overloads
    assert len(_engine_loop.core_signature(TrtllmScheduler)) == 8  # books, price, measured, wait, launch
