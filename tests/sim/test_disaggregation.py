"""The disaggregated engine loop: prefill workers, the KV transfer, decode workers (sim.disaggregation)."""

from __future__ import annotations

import pytest

from servesim._checks import ParameterError
from servesim.plan.predict import Deployment, build_step_model, kv_transfer_seconds, predict_disaggregated
from servesim.sim.batching import Benchmark
from servesim.sim.client import Client
from servesim.sim.disaggregation import FIXED_POINT_ROUNDS, Pool, run_disaggregated

LINK = 50e9  # bytes/s (RDMA, 400 Gb/s)


def _pools(prefill_tp: int = 2, prefill_workers: int = 2, decode_tp: int = 4, decode_workers: int = 1):
    psm, _, pmem = build_step_model(Deployment("llama-3-70b", "h100-sxm", prefill_tp, dtype="fp8"))
    dsm, _, dmem = build_step_model(Deployment("llama-3-70b", "h100-sxm", decode_tp, dtype="fp8"))
    return Pool(psm, prefill_workers, pmem), Pool(dsm, decode_workers, dmem), psm, dsm


def test_a_lone_request_costs_its_prefill_transfer_and_decode_steps():
    pre, dec, psm, dsm = _pools()
    bench = Benchmark(isl=2048, osl=64, concurrency=1, num_prompts=3)
    xfer = kv_transfer_seconds(dsm, LINK)
    res = run_disaggregated(pre, dec, bench, xfer)
    # By hand: 70B has 80 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes = 327,680 bytes a token.
    assert xfer(2048) == pytest.approx(80 * 8 * 128 * 2 * 2 * 2048 / LINK)
    ttft = psm.prompt_s(2048) + xfer(2048) + psm.engine.request_overhead_s
    assert res.mean_ttft_s == pytest.approx(ttft, rel=0.02)
    step = dsm.decode_step(1, 2048 + 32).total_s
    assert res.mean_tpot_s == pytest.approx(step, rel=0.03)
    assert res.completed == 3 and res.total_output_tokens == 3 * 64 and res.total_input_tokens == 3 * 2048


def test_closed_loop_keeps_littles_law_and_settles():
    pre, dec, _, dsm = _pools()
    bench = Benchmark(isl=1024, osl=256, concurrency=32, num_prompts=320)
    res = run_disaggregated(pre, dec, bench, kv_transfer_seconds(dsm, LINK))
    assert 1 < res.rounds <= FIXED_POINT_ROUNDS
    in_system = res.request_throughput * (res.mean_ttft_s + 255 * res.mean_tpot_s)
    assert in_system == pytest.approx(32, rel=0.05)
    again = run_disaggregated(pre, dec, bench, kv_transfer_seconds(dsm, LINK))
    assert again == res  # deterministic, to the bit


def test_more_prefill_workers_shorten_the_wait_and_agree_with_the_closed_form():
    bench = Benchmark(isl=4096, osl=128, rate_per_s=2.0, num_prompts=400)  # one worker 68% busy
    one = predict_disaggregated(Deployment("llama-3-70b", "h100-sxm", 2, dtype="fp8"), 1,
                                Deployment("llama-3-70b", "h100-sxm", 4, dtype="fp8"), 1, LINK, bench)
    two = predict_disaggregated(Deployment("llama-3-70b", "h100-sxm", 2, dtype="fp8"), 2,
                                Deployment("llama-3-70b", "h100-sxm", 4, dtype="fp8"), 1, LINK, bench)
    assert one["stable"] and two["stable"]
    assert two["mean_prefill_wait_ms"] < one["mean_prefill_wait_ms"]
    assert two["mean_ttft_ms"] < one["mean_ttft_ms"]
    for d in (one, two):  # the engine loop and the closed form at load tell the same decode story
        assert d["mean_tpot_ms"] == pytest.approx(d["closed_form"]["mean_tpot_ms"], rel=0.1)
        assert d["mean_ttft_ms"] == pytest.approx(d["closed_form"]["mean_ttft_ms"], rel=0.2)


def test_an_overloaded_prefill_pool_is_unstable_not_a_number():
    bench = Benchmark(isl=8192, osl=64, rate_per_s=50.0, num_prompts=100)
    d = predict_disaggregated(Deployment("llama-3-70b", "h100-sxm", 2, dtype="fp8"), 1,
                              Deployment("llama-3-70b", "h100-sxm", 4, dtype="fp8"), 1, LINK, bench)
    assert d["stable"] is False and d["mean_ttft_ms"] is None and "prefill pool" in d["unstable_reason"]


def test_mla_latent_crosses_the_link_and_dp_pools_run():
    bench = Benchmark(isl=1024, osl=128, concurrency=64, num_prompts=128)
    ds = "deepseek-ai/DeepSeek-V3"
    d = predict_disaggregated(Deployment(ds, "h200-sxm", 8, dtype="auto", engine="sglang"), 1,
                              Deployment(ds, "h200-sxm", 1, dtype="auto", engine="sglang", dp=8, ep=8), 1,
                              LINK, bench)
    # By hand: (512 latent + 64 rope) values x 61 layers x 2 bytes x 1,024 tokens over 50 GB/s.
    assert d["mean_kv_transfer_ms"] == pytest.approx((512 + 64) * 61 * 2 * 1024 / LINK * 1e3, rel=1e-9)
    assert d["gpus"] == 16 and d["decode"]["dp"] == 8 and d["decode"]["ep"] == 8
    assert d["stable"] and d["mean_tpot_ms"] > 0 and d["mean_ttft_ms"] > 0
    assert d["completed"] == 128


def test_a_pools_bad_shape_names_the_pools_flag():

    bench = Benchmark(isl=1024, osl=128, concurrency=8)
    with pytest.raises(ParameterError, match="decode_tp"):
        predict_disaggregated(Deployment("llama-3-70b", "h100-sxm", 2), 1,
                              Deployment("llama-3-70b", "h100-sxm", 3), 1, LINK, bench)
    with pytest.raises(ParameterError, match="decode_ep"):
        predict_disaggregated(Deployment("deepseek-ai/DeepSeek-V3", "h200-sxm", 8, dtype="auto"), 1,
                              Deployment("deepseek-ai/DeepSeek-V3", "h200-sxm", 1, dtype="auto", dp=8, ep=3),
                              1, LINK, bench)


def test_a_full_decode_worker_holds_the_request_and_ttft_counts_the_wait():
    # Two decode workers of one slot each (TensorRT-LLM max_batch_size 1, as the Dynamo low-latency
    # recipes run) and four clients: in the closed loop two requests decode while two wait, each
    # for about the remaining decode of the one ahead of it; with eight slots nobody waits.
    bench = Benchmark(isl=1024, osl=128, concurrency=4, num_prompts=24)
    pre = Deployment("llama-3-70b", "h100-sxm", 4, dtype="fp8", engine="trtllm")
    out = {}
    for slots in (1, 8):
        dec = Deployment("llama-3-70b", "h100-sxm", 4, dtype="fp8", engine="trtllm", max_num_seqs=slots)
        out[slots] = predict_disaggregated(pre, 1, dec, 2, LINK, bench)
    one = 127 * out[1]["mean_tpot_ms"]  # one request's decode, ms
    assert 0.5 * one < out[1]["mean_decode_wait_ms"] < 1.1 * one
    assert out[1]["mean_ttft_ms"] > out[1]["mean_decode_wait_ms"]
    assert out[8]["mean_decode_wait_ms"] < 0.05 * one
    assert out[1]["mean_tpot_ms"] < out[8]["mean_tpot_ms"]  # a batch of one steps faster


def test_a_fresh_deployment_delays_its_first_wave_by_the_cold_start_and_the_connection():
    """A fresh deployment: the prefill workers start ``cold`` late and no KV transfer starts before
    the link's connections open, ``connect`` after the first prompt is ready.  One client, so the
    first request alone carries both (the others are timed as in a warm run)."""
    pre, dec, _, dsm = _pools()
    bench = Benchmark(isl=2048, osl=64, concurrency=1, num_prompts=5)
    xfer = kv_transfer_seconds(dsm, LINK)
    warm = run_disaggregated(pre, dec, bench, xfer)
    cold, connect = 0.7, 1.2
    res = run_disaggregated(pre, dec, bench, xfer, cold_start_s=cold, connect_s=connect)
    assert res.ttfts_s[0] == pytest.approx(warm.ttfts_s[0] + cold + connect, rel=1e-6)
    assert res.ttfts_s[1:] == pytest.approx(warm.ttfts_s[1:], rel=1e-6)
    assert res.mean_tpot_s == pytest.approx(warm.mean_tpot_s, rel=1e-6)
    # the breakdown carries the connection wait in the transfer: the first of 5 requests waits `connect`
    assert res.mean_transfer_s == pytest.approx(warm.mean_transfer_s + connect / 5, rel=1e-6)
    with pytest.raises(ParameterError, match="connect_s"):
        run_disaggregated(pre, dec, bench, xfer, connect_s=-0.1)


def test_a_shared_link_queues_the_transfers_in_the_order_the_prefills_end():
    # All 8 prompts sent at once to 4 prefill workers on a slow link (1 GB/s: 2048 tokens of 70B's
    # 327,680 B/token take 0.67 s, longer than a prefill).  Own links: each cache takes exactly its
    # transfer.  One shared link: the k-th cache to leave waits for the k - 1 before it, so the mean
    # transfer (wait included) is the mean of 1..8 transfers, 4.5 x, within the prefills' stagger.
    pre, dec, _, dsm = _pools(prefill_workers=4, decode_workers=2)
    bench = Benchmark(isl=2048, osl=16, num_prompts=8)
    xfer = kv_transfer_seconds(dsm, 1e9)
    own = run_disaggregated(pre, dec, bench, xfer)
    shared = run_disaggregated(pre, dec, bench, xfer, link_contention=True)
    assert own.mean_transfer_s == pytest.approx(xfer(2048), rel=1e-12)
    assert shared.mean_transfer_s == pytest.approx(4.5 * xfer(2048), rel=0.1)
    assert shared.mean_ttft_s > own.mean_ttft_s + 3 * xfer(2048)


def test_simulate_disaggregated_is_the_pools_run_under_poisson_traffic():
    # engine.simulate_disaggregated is a front end: the same run as run_disaggregated on a Poisson
    # benchmark of the same seed, to the bit; its percentiles are per request (the p99 TPOT is not
    # the mean, as it was when every request was given its worker's mean).
    from servesim.sim.engine import simulate_disaggregated

    pre, dec, psm, dsm = _pools()
    d = simulate_disaggregated(psm, 2, dsm, dec.memory_bytes, 1, LINK, 3.0, 1024, 256, requests=300, seed=5,
                               prefill_memory_bytes=pre.memory_bytes)
    res = run_disaggregated(pre, dec, Benchmark(1024, 256, rate_per_s=3.0, num_prompts=300, seed=5),
                            kv_transfer_seconds(dsm, LINK))
    assert d["mean_ttft_ms"] == 1e3 * res.mean_ttft_s and d["p99_tpot_ms"] == 1e3 * res.p99_tpot_s
    assert d["completed"] == 300 and d["mode"] == "disagg"
    assert d["p99_tpot_ms"] > d["mean_tpot_ms"]


def test_the_reported_figures_are_the_requests_times_summed_in_order():
    """The result's means are the per-request times of ``requests`` added left to right as Python
    adds a list (the pools' arrays are summed in that order, not numpy's pairwise one), to the bit;
    its percentiles those of the sorted values; the counts the lengths'."""
    import math

    pre, dec, psm, dsm = _pools()
    bench = Benchmark(isl=1024, osl=96, rate_per_s=6.0, num_prompts=400, warmup=25, seed=9,
                      client=Client("vllm", random_range_ratio=0.5))
    res = run_disaggregated(pre, dec, bench, kv_transfer_seconds(dsm, LINK))
    overhead = psm.engine.request_overhead_s
    lengths = bench.lengths()
    kept = [r for r in res.requests if r[0] >= 25]
    ttfts = [first - sent + overhead for _, sent, first, _ in kept]
    assert res.mean_ttft_s == sum(ttfts) / len(ttfts)
    assert list(res.ttfts_s) == ttfts
    ordered = sorted(ttfts)
    pos = (len(ordered) - 1) * 99 / 100.0  # as batching._pct_sorted
    lo = math.floor(pos)
    assert res.p99_ttft_s == ordered[lo] + (ordered[lo + 1] - ordered[lo]) * (pos - lo)
    e2els = [last - sent + overhead for _, sent, _, last in kept]
    assert res.mean_e2el_s == sum(e2els) / len(e2els)
    tpots = [(last - first) / (lengths[i][1] - 1) for i, _, first, last in kept if lengths[i][1] > 1]
    assert res.mean_tpot_s == sum(tpots) / len(tpots)
    gaps = sum(lengths[i][1] - 1 for i, *_ in kept)
    assert res.mean_itl_s == sum(last - first for _, _, first, last in kept) / gaps
    assert res.total_output_tokens == sum(lengths[i][1] for i, *_ in kept)
    assert res.completed == 375 and len(res.requests) == 400
