"""Continuous batching with chunked prefill (servesim.sim.batching): limits, laws and policies.

The expectations are independent of the simulator: at vanishing load a request sees one
prefill step and then batch-1 decode steps; a closed loop of C clients obeys Little's law;
more clients cannot lower throughput or TPOT; above the KV limit vLLM preempts and an
engine that reserves does not; a prompt longer than the token budget takes several steps.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from functools import cache

import pytest

from servesim._checks import ParameterError
from servesim.hardware.names import dense_shape, resolve_gpu
from servesim.hardware.stepmodel import Chunk, StepModel
from servesim.sim.batching import Benchmark, BenchResult, Speculation, _gap_stats, run_benchmark

H100 = resolve_gpu("h100-sxm").memory_bytes


@cache
def _model(name: str = "llama-3-8b", tp: int = 1, dtype: str = "bf16") -> StepModel:
    return StepModel(dense_shape(name), "h100-sxm", tp, dtype=dtype)


def _tiny_memory(sm: StepModel, tokens: int) -> float:
    """GPU memory that leaves room for exactly ``tokens`` of KV cache beside the weights."""
    eng = sm.engine
    kv = sm.kv_bytes_per_token_per_gpu
    mem = (sm.weight_bytes_per_gpu + sm.reserve_bytes + (tokens + 0.5) * kv) / eng.memory_fraction
    assert sm.kv_capacity_tokens(mem) == tokens
    return mem


# --------------------------------------------------------------------------- vanishing load


@pytest.mark.parametrize(("name", "tp", "dtype", "isl"), [
    ("llama-3-8b", 1, "bf16", 512),
    ("llama-3-8b", 1, "bf16", 4000),
    ("llama-3-70b", 4, "fp8", 1024),
])
def test_vanishing_load_is_one_prefill_then_batch_1_decode(name, tp, dtype, isl):
    sm = _model(name, tp, dtype)
    osl = 64
    assert isl < sm.engine.max_num_batched_tokens
    res = run_benchmark(sm, Benchmark(isl, osl, concurrency=1, num_prompts=4), H100)
    decode = sm.decode_step(1, isl + osl / 2).total_s
    prefill = sm.prefill_step(isl).total_s
    overhead = sm.engine.request_overhead_s  # HTTP, tokenization, streaming: TTFT only
    assert res.mean_tpot_s == pytest.approx(decode, rel=0.03)
    assert res.mean_itl_s == pytest.approx(decode, rel=0.03)
    assert res.mean_ttft_s == pytest.approx(prefill + overhead, rel=0.03)
    assert res.p99_ttft_s == pytest.approx(prefill + overhead, rel=0.03)  # nobody queues behind anybody
    assert res.preemptions == 0 and res.completed == 4
    assert res.decode_batch <= 1.0
    # One request at a time: the engine is busy 4 x (prefill + (osl - 1) x TPOT), and the client
    # sends each next request when it has the last token, the overhead after the engine made it.
    engine_ttft = res.mean_ttft_s - overhead
    assert res.duration_s == pytest.approx(4 * (engine_ttft + (osl - 1) * res.mean_tpot_s) + 3 * overhead,
                                           rel=1e-9)


# --------------------------------------------------------------------------- closed loop


@pytest.mark.parametrize("concurrency", [4, 32])
def test_littles_law_in_the_closed_loop(concurrency):
    isl, osl = 512, 64
    res = run_benchmark(_model(), Benchmark(isl, osl, concurrency=concurrency,
                                            num_prompts=10 * concurrency), H100)
    in_flight = res.request_throughput * (res.mean_ttft_s + (osl - 1) * res.mean_tpot_s)
    assert in_flight == pytest.approx(concurrency, rel=0.05)


@cache
def _sweep() -> dict[int, BenchResult]:
    return {c: run_benchmark(_model(), Benchmark(512, 64, concurrency=c, num_prompts=max(20, 8 * c)), H100)
            for c in (1, 4, 16, 64)}


def test_throughput_and_tpot_non_decreasing_in_concurrency():
    runs = _sweep()
    cs = sorted(runs)
    thr = [runs[c].output_throughput for c in cs]
    tpot = [runs[c].mean_tpot_s for c in cs]
    assert all(a <= b for a, b in itertools.pairwise(thr)), thr
    assert all(a <= b for a, b in itertools.pairwise(tpot)), tpot
    assert thr[-1] > 10 * thr[0]  # batching pays: 64 clients, far more than 10x one client


@pytest.mark.parametrize("concurrency", [1, 4, 16, 64])
def test_decode_batch_at_most_concurrency_and_everything_completes(concurrency):
    res = _sweep()[concurrency]
    assert 0 < res.decode_batch <= concurrency
    assert res.completed == max(20, 8 * concurrency)
    assert res.preemptions == 0
    assert all(math.isfinite(x) and x > 0 for x in (
        res.mean_ttft_s, res.mean_tpot_s, res.mean_itl_s, res.output_throughput))


def test_output_throughput_is_tokens_over_duration():
    res = _sweep()[16]
    assert res.output_throughput == pytest.approx(res.completed * 64 / res.duration_s, rel=1e-12)
    assert res.request_throughput == pytest.approx(res.completed / res.duration_s, rel=1e-12)


# --------------------------------------------------------------------------- determinism


def test_same_inputs_same_result():
    b = Benchmark(512, 32, concurrency=8, num_prompts=40)
    assert run_benchmark(_model(), b, H100) == run_benchmark(_model(), b, H100)


def test_rate_runs_are_seeded():
    def run(seed: int):
        return run_benchmark(_model(), Benchmark(1024, 32, rate_per_s=5.0, num_prompts=30, seed=seed), H100)

    a, b, c = run(0), run(0), run(1)
    assert a == b
    assert a != c and a.mean_ttft_s != c.mean_ttft_s
    assert a.completed == c.completed == 30


@pytest.mark.parametrize(("kw", "name"), [
    ({"concurrency": 4, "rate_per_s": -1.0}, "rate"),
    ({"concurrency": 0}, "concurrency"),
    ({"concurrency": None, "rate_per_s": 0.0}, "rate"),
    ({"concurrency": 4, "num_prompts": 0}, "num_prompts"),
])
def test_bad_benchmark_raises(kw, name):
    with pytest.raises(ParameterError) as exc:
        Benchmark(512, 64, **kw)
    assert exc.value.name == name


def test_prompt_larger_than_the_kv_cache_raises_naming_isl():
    sm = _model()
    with pytest.raises(ParameterError) as exc:
        run_benchmark(sm, Benchmark(2000, 8, concurrency=1, num_prompts=1), _tiny_memory(sm, 1000))
    assert exc.value.name == "isl"


# --------------------------------------------------------------------------- above the KV limit

ISL, OSL = 512, 64


def test_above_the_kv_limit_vllm_preempts_and_a_reserving_engine_queues():
    sm = _model()
    # Room for three prompts but not for three whole requests: vLLM admits the third prompt (its
    # blocks are free) and must preempt when the three outgrow the cache; a reserving engine waits.
    mem = _tiny_memory(sm, 2 * (ISL + OSL) + ISL + 40)
    bench = Benchmark(ISL, OSL, concurrency=8, num_prompts=24)
    preempt = run_benchmark(sm, bench, mem, reserve=False)
    queue = run_benchmark(sm, bench, mem, reserve=True)
    assert preempt.preemptions > 0
    assert queue.preemptions == 0
    assert preempt.completed == queue.completed == 24
    assert queue.decode_batch <= 2.0
    # Below the limit neither policy changes anything.
    roomy = Benchmark(ISL, OSL, concurrency=2, num_prompts=12)
    a, b = run_benchmark(sm, roomy, mem), run_benchmark(sm, roomy, mem, reserve=True)
    assert a.preemptions == b.preemptions == 0
    assert a.mean_tpot_s == pytest.approx(b.mean_tpot_s, rel=1e-12)


def test_preemption_takes_the_newest_sequence():
    # KV for three whole requests, four clients: the documented policy ("the newest sequence is
    # preempted", vLLM's) sacrifices the fourth request's partial prefill, so the three admitted
    # first decode undisturbed, at about a batch-3 decode step (plus the fourth's small chunks).
    sm = _model()
    mem = _tiny_memory(sm, 3 * (ISL + OSL))
    res = run_benchmark(sm, Benchmark(ISL, OSL, concurrency=4, num_prompts=4), mem)
    step3 = sm.decode_step(3, ISL + OSL / 2).total_s
    assert res.median_tpot_s <= 1.5 * step3
    assert res.preemptions <= OSL  # at most one partial prefill thrown away per decode step


# --------------------------------------------------------------------------- chunked prefill


def test_prompt_longer_than_the_budget_is_prefilled_in_chunks():
    sm = _model()
    budget = sm.engine.max_num_batched_tokens
    assert budget == 8192
    isl = 20000  # chunks of 8192, 8192 and 3616 tokens
    res = run_benchmark(sm, Benchmark(isl, 8, concurrency=1, num_prompts=2), H100)
    chunks = [Chunk(8192, 0, 1, False), Chunk(8192, 8192, 1, False), Chunk(3616, 16384, 1, True)]
    expect = sum(sm.step(0, 0, (c,)).total_s for c in chunks)
    engine_ttft = res.mean_ttft_s - sm.engine.request_overhead_s
    assert engine_ttft == pytest.approx(expect, rel=1e-9)
    assert engine_ttft >= 2 * sm.prefill_step(budget).total_s + sm.prefill_step(3616).total_s
    assert engine_ttft > sm.prefill_step(isl).total_s  # one giant step would be cheaper (no re-reads)


def test_a_much_smaller_budget_means_more_chunks_and_a_later_first_token():
    # Chunks do the prompt's query-key pairs once in all (prefill(c + q) - prefill(c) telescopes),
    # so what a small budget costs is the steps' fixed parts: host time, launch floors, the
    # weights read once per step (512-token GEMMs are not yet compute-bound).
    sm = _model()
    small = StepModel(sm.shape, "h100-sxm", 1,
                      engine=dataclasses.replace(sm.engine, max_num_batched_tokens=256))
    b = Benchmark(8000, 8, concurrency=1, num_prompts=2)
    assert run_benchmark(small, b, H100).mean_ttft_s > run_benchmark(sm, b, H100).mean_ttft_s


# --------------------------------------------------------------------------- speculation


def test_speculation_lowers_tpot_at_low_load():
    sm = _model()
    draft = 0.05 * sm.decode_step(1, 600).gpu_s
    spec = Speculation(k=3, alpha=0.8, draft_step_s=draft)
    b = Benchmark(512, 64, concurrency=1, num_prompts=4)
    plain, fast = run_benchmark(sm, b, H100), run_benchmark(sm, b, H100, spec=spec)
    assert fast.mean_tpot_s < plain.mean_tpot_s
    # Each step yields E[n] = 1 + a + a^2 + a^3 tokens for one verify of 4 positions plus 3 drafts.
    per_step = sm.decode_step(1, 512 + 32, positions=4).total_s + 3 * draft
    assert fast.mean_tpot_s == pytest.approx(per_step / spec.tokens_per_step, rel=0.05)


# --------------------------------------------------------------------------- a cold start


@pytest.mark.parametrize("loop", ["python", "compiled"])
def test_a_cold_start_delays_exactly_the_first_wave(loop):
    """A closed loop of C clients sends C requests at 0: with the engine's first step at S, each of
    those C waits S longer for its first token and every later request is timed as before (the
    whole run is the warm one shifted by S)."""
    sm, c, s = _model(), 4, 1.5
    bench = Benchmark(512, 32, concurrency=c, num_prompts=10 * c)
    warm = run_benchmark(sm, bench, H100, keep_requests=True, loop=loop)
    cold = run_benchmark(sm, bench, H100, keep_requests=True, loop=loop, cold_start_s=s)
    w = {i: (sent, first, last) for i, sent, first, last in warm.requests}
    k = {i: (sent, first, last) for i, sent, first, last in cold.requests}
    for i in range(10 * c):
        ttft_w, ttft_k = w[i][1] - w[i][0], k[i][1] - k[i][0]
        assert ttft_k == pytest.approx(ttft_w + (s if i < c else 0.0), abs=1e-9)
        assert k[i][2] - k[i][1] == pytest.approx(w[i][2] - w[i][1], abs=1e-9)  # decode unchanged
    assert cold.mean_ttft_s == pytest.approx(warm.mean_ttft_s + s * c / (10 * c), rel=1e-9)
    assert cold.median_ttft_s == pytest.approx(warm.median_ttft_s, rel=1e-9)
    assert cold.mean_tpot_s == pytest.approx(warm.mean_tpot_s, rel=1e-9)
    assert cold.duration_s == pytest.approx(warm.duration_s + s, rel=1e-9)


def test_a_cold_start_runs_the_same_in_both_loops_and_refuses_a_negative_wait():
    sm = _model()
    bench = Benchmark(2048, 64, rate_per_s=20.0, num_prompts=60)
    a = run_benchmark(sm, bench, H100, loop="python", cold_start_s=0.8)
    b = run_benchmark(sm, bench, H100, loop="compiled", cold_start_s=0.8)
    assert a == b
    # Requests sent by a rate while the engine is cold queue: the first one waits about 0.8 s.
    assert a.p99_ttft_s > 0.5 > run_benchmark(sm, bench, H100, loop="python").p99_ttft_s
    with pytest.raises(ParameterError, match="cold_start_s"):
        run_benchmark(sm, bench, H100, cold_start_s=-1.0)


# --------------------------------------------------------------------------- the pricer's seam


@pytest.mark.parametrize("model", ["llama-3-8b", "Qwen/Qwen3-30B-A3B"])
def test_a_run_keeps_its_prices_in_the_pricers_own_slot_and_sets_nothing_on_it(model):
    """The engine loop keeps its step prices in the slot every pricer declares (Pricer.price_cache),
    not in attributes it hangs on the pricer: a run leaves the pricer's attributes as they were; a
    copy with room for a drafter shares the prices (same step prices), and a run on it finds them
    all (no new price) and gives the same result."""
    from servesim.hardware.pricer import Deployment, build_step_model

    sm, _, memory = build_step_model(Deployment(model, "h200", 1, dtype="auto"))
    sm = sm.with_drafter((0.0, 0.0))  # a copy of its own: the shared step model stays as it was
    sm.step(1, 100, (Chunk(64, 0),))  # its own cached properties filled
    before = dict(vars(sm))
    bench = Benchmark(512, 32, concurrency=4, num_prompts=12)
    first = run_benchmark(sm, bench, memory, loop="python")
    assert vars(sm).keys() == before.keys() and all(vars(sm)[k] is v for k, v in before.items())
    kept = sum(map(len, sm.price_cache.steps.values()))
    assert kept > 0
    twin = sm.with_drafter((1e9, 0.0))  # a GB of draft weights: less KV room, the same step prices
    assert twin.price_cache is sm.price_cache
    assert twin.kv_capacity_tokens(memory) < sm.kv_capacity_tokens(memory)
    again = run_benchmark(twin, bench, memory, loop="python")
    assert sum(map(len, sm.price_cache.steps.values())) == kept
    assert dataclasses.replace(again, kv_capacity_tokens=first.kv_capacity_tokens) == first


@pytest.mark.parametrize("model", ["llama-3-8b", "Qwen/Qwen3-30B-A3B"])
@pytest.mark.parametrize("loop", ["python", "compiled"])
def test_the_loop_prices_each_new_step_once_through_the_pricers_step_price(model, loop):
    """The engine loop asks a pricer (dense or MoE alike) for a step's price through ``step_price``,
    the Pricer seam: one call a price it keeps, none for a step it has seen (counted on the class
    with patch.object, which sees every call on any instance)."""
    from unittest import mock

    from servesim.hardware.catalog import builtin_catalog
    from servesim.hardware.pricer import Deployment, build_step_model

    # the catalog given: a model built anew, whose price cache no other test has filled
    sm, _, memory = build_step_model(Deployment(model, "h200", 1, dtype="auto"), builtin_catalog())
    kind = type(sm)
    bench = Benchmark(512, 32, concurrency=4, num_prompts=12)
    with mock.patch.object(kind, "step_price", autospec=True, side_effect=kind.step_price) as priced:
        run_benchmark(sm, bench, memory, loop=loop)
        new = sum(map(len, sm.price_cache.steps.values()))
        assert priced.call_count == new >= 2  # at least a prefill step and a decode step
        run_benchmark(sm, bench, memory, loop=loop)  # every step seen: nothing priced again
        assert priced.call_count == new
    assert all(c.args[0] is sm for c in priced.call_args_list)


def test_the_gaps_between_tokens_give_their_weighted_percentiles_and_spread():
    """Gaps held by token counts, by hand: 0.1 s by 2 tokens, 0.2 and 0.3 s by one each (4 in all).
    Running counts in sorted order 2, 3, 4: the median (2 of 4) is the first to reach 2, 0.1 s; the
    99th (3.96) is reached only at 0.3 s.  Mean 0.7 / 4 = 0.175 s; squared deviations weighted
    (0.125² + 2 x 0.075² + 0.025²) / 4 = 0.006875."""
    med, p99, std = _gap_stats([0.3, 0.1, 0.2], [1.0, 2.0, 1.0])
    assert (med, p99) == (0.1, 0.3)
    assert std == pytest.approx(0.006875 ** 0.5, rel=1e-12)
    assert all(math.isnan(x) for x in _gap_stats([], []))
