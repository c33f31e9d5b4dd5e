"""Engine scheduler policies (servesim.sim.schedulers): each engine's rules, seen in its steps.

Each test records the plans a policy makes during a run and checks the rule its engine's
source states (SGLang never mixes prefill into a decode step by default; TensorRT-LLM runs
prompts whole and never evicts; vLLM keeps every step within its token budget and preempts
when the cache runs out), plus what must hold for any engine: every request completes with
all its tokens, and a run is reproducible byte for byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache

import pytest

from servesim._checks import ParameterError
from servesim.hardware.engines import engine_profile
from servesim.hardware.names import dense_shape, resolve_gpu
from servesim.hardware.stepmodel import StepModel
from servesim.sim.batching import Benchmark, run_benchmark
from servesim.sim.client import Client
from servesim.sim.schedulers import SCHEDULERS, EngineState, Scheduler, StepPlan, make_scheduler
from tests.cli_helpers import RECORD_TOML_READS, ROOT

H100 = resolve_gpu("h100-sxm").memory_bytes


@cache
def _model(engine: str, **options: object) -> StepModel:
    eng = engine_profile(engine, gpu="h100-sxm", memory_gib=80, scheduler=dict(options) or None)
    return StepModel(dense_shape("llama-3-8b"), "h100-sxm", 1, engine=eng)


def _tiny_memory(sm: StepModel, tokens: int) -> float:
    eng = sm.engine
    kv = sm.kv_bytes_per_token_per_gpu
    if eng.fraction_of_free:
        return sm.weight_bytes_per_gpu + eng.reserved_bytes + (tokens + 0.5) * kv / eng.memory_fraction
    return (sm.weight_bytes_per_gpu + eng.reserved_bytes + (tokens + 0.5) * kv) / eng.memory_fraction


def _recorded(sm: StepModel, bench: Benchmark, memory: float = H100):  # type: ignore[no-untyped-def]
    """Run ``bench`` and return (result, [(plan, decoding before the step, prompt lengths)])."""
    policy = make_scheduler(sm.engine.name, sm.engine)
    seen = []
    inner = policy.schedule

    def schedule(s: EngineState) -> None:
        decoding = s.decoding_n
        inner(s)
        plan = s.plan()
        seen.append((plan, decoding, [(q, s.prompt_left[r], s.context[r]) for r, q in plan.chunks]))

    policy.schedule = schedule  # type: ignore[method-assign]
    return run_benchmark(sm, bench, memory, scheduler=policy), seen


LOADED = Benchmark(1024, 64, rate_per_s=12.0, num_prompts=60, seed=5,
                   client=Client("vllm", random_range_ratio=0.5))


def test_sglang_runs_prefill_in_steps_of_its_own_and_stalls_the_decodes():
    res, seen = _recorded(_model("sglang"), LOADED)
    prefill_steps = [p for p, dec, _ in seen if p.chunks]
    assert prefill_steps and all(not p.decode for p in prefill_steps)
    stalled = sum(1 for p, dec, _ in seen if p.chunks and dec > 0)
    assert stalled > 10  # arrivals met running decodes, which waited
    assert res.completed == 60
    # Stalls are in TPOT and the mean ITL (gaps that straddle a prefill step), not in the median
    # gap, which is a decode step's.
    assert res.mean_tpot_s > 1.05 * res.median_itl_s
    assert res.mean_itl_s > 1.05 * res.median_itl_s


def test_sglang_with_mixed_chunk_lets_decodes_ride_along():
    _, seen = _recorded(_model("sglang", enable_mixed_chunk=True), LOADED)
    assert any(p.decode and p.chunks and dec > 0 for p, dec, _ in seen)


def test_sglang_cuts_prompts_at_its_chunk_size():
    sm = StepModel(dense_shape("llama-3-8b"), "h100-sxm", 1,
                   engine=engine_profile("sglang", memory_gib=80, max_num_batched_tokens=2048))
    _, seen = _recorded(sm, Benchmark(5000, 8, concurrency=1, num_prompts=2))
    assert [q for _, _, ch in seen for q, _, _ in ch][:3] == [2048, 2048, 904]


def test_trtllm_runs_prompts_whole_and_never_evicts():
    sm = _model("trtllm")
    tight = _tiny_memory(sm, 6000)  # room for about four 1024 + 64 requests at once
    res, seen = _recorded(sm, Benchmark(1024, 256, concurrency=16, num_prompts=48), tight)
    chunks = [c for _, _, ch in seen for c in ch]
    assert chunks and all(q == left for q, left, _ in chunks)  # each a whole prompt
    assert res.preemptions == 0 and res.completed == 48
    vllm = _model("vllm")
    assert run_benchmark(vllm, Benchmark(1024, 256, concurrency=16, num_prompts=48),
                         _tiny_memory(vllm, 6000)).preemptions > 0


def test_trtllm_refuses_a_prompt_beyond_its_budget_unless_chunked():
    with pytest.raises(ParameterError) as exc:
        run_benchmark(_model("trtllm"), Benchmark(9000, 8, concurrency=1, num_prompts=2), H100)
    assert exc.value.name == "max_num_tokens"
    res = run_benchmark(_model("trtllm", enable_chunked_prefill=True),
                        Benchmark(9000, 8, concurrency=1, num_prompts=2), H100)
    assert res.completed == 2


@pytest.mark.parametrize("engine", sorted(SCHEDULERS))
def test_every_step_keeps_to_the_budget_and_every_token_is_served(engine):
    sm = _model(engine)
    res, seen = _recorded(sm, LOADED)
    budget = sm.engine.max_num_batched_tokens
    for plan, dec, chunks in seen:
        assert (dec if plan.decode else 0) + sum(q for q, _, _ in chunks) <= budget
    lengths = LOADED.lengths()
    assert lengths is not None
    assert res.completed == 60 and res.total_output_tokens == sum(o for _, o in lengths)
    assert res.total_input_tokens == sum(p for p, _ in lengths)


@pytest.mark.parametrize("engine", sorted(SCHEDULERS))
def test_runs_with_preemption_repeat_exactly(engine):
    sm = _model(engine)
    mem = _tiny_memory(sm, 5000)
    b = Benchmark(1024, 200, concurrency=12, num_prompts=36, seed=7, client=Client("inferencemax"))
    first = run_benchmark(sm, b, mem)
    assert all(run_benchmark(sm, b, mem) == first for _ in range(3))


def test_varied_lengths_break_the_lock_step_of_closed_loop_clients():
    """Fixed lengths keep C clients in waves whose prompts queue behind each other; lengths drawn
    on [0.8 L, L] spread the finishes, and with them the sends, so TTFT falls."""
    sm = _model("vllm")
    fixed = run_benchmark(sm, Benchmark(1024, 256, concurrency=64, num_prompts=640), H100)
    drawn = run_benchmark(sm, Benchmark(1024, 256, concurrency=64, num_prompts=640,
                                        client=Client("inferencemax")), H100)
    assert drawn.median_ttft_s < 0.5 * fixed.median_ttft_s
    assert drawn.mean_tpot_s == pytest.approx(fixed.mean_tpot_s, rel=0.15)


def test_running_sums_equal_the_sums_over_the_sequences():
    """EngineState keeps the decoding sequences' remaining output as running sums (SGLang's
    reservation reads them every step): they must equal the sums computed one by one."""
    s = EngineState(10**6, 100, 8192, 1, 1.0, 6)
    s.long_output = 300
    for i in range(6):
        s.context[i], s.generated[i], s.osl[i] = 100 + i, 1.0, 50 + 100 * i
        s.join(i)
        s.G += 3 + i
    s.leave(2)
    s.G += 5
    s.leave(4)
    live = [r for r in range(6) if s.decoding[r]]
    assert live == [0, 1, 3, 5]
    assert s.remaining_output() == pytest.approx(sum(s.osl[r] - s.generated_of(r) for r in live))
    assert s.long_count == sum(s.osl[r] > 300 for r in live)


def test_sglang_receive_interval_makes_a_request_wait_for_the_next_poll():
    # SGLang's --scheduler-recv-interval R (managers/scheduler_recv_skipper.py): a prefill step
    # counts 1,000, a decode step 1, and the scheduler polls when the count reaches R.  Request 0
    # runs alone; request 1 is sent 1.5 decode steps after request 0's first token, i.e. just after
    # the poll that followed request 0's prefill.  At R = 1 it is taken at the step after next (the
    # overlap scheduler planned the next one before it came: tests/sim/test_late_admission.py); at
    # R = 30 it waits for the poll 30 decode steps after that one, which plans at once: 27-29 steps
    # later.
    lengths = [(512, 400), (512, 8)]
    bench = Benchmark(512, 400, num_prompts=2, seed=1, client=Client("vllm"))

    def run(interval: int, sent: float):  # type: ignore[no-untyped-def]
        sm = _model("sglang", scheduler_recv_interval=interval)
        return run_benchmark(sm, bench, H100, lengths=lengths, arrival_times=[0.0, sent],
                             keep_requests=True, loop="python")

    probe = run(1, 1e6)  # request 1 far away: request 0's own times
    first0 = next(r for r in probe.requests if r[0] == 0)[2]
    step = probe.median_itl_s
    sent = first0 + 1.5 * step
    one = {r[0]: r for r in run(1, sent).requests}
    thirty = {r[0]: r for r in run(30, sent).requests}
    extra = (thirty[1][2] - one[1][2]) / step
    assert 26.5 <= extra <= 29.5, extra
    assert thirty[0][2] == one[0][2]  # request 0 is not delayed: an idle scheduler polls at once


def test_sglang_receive_interval_is_checked():
    with pytest.raises(ParameterError, match="scheduler_recv_interval"):
        make_scheduler("sglang", _model("sglang").engine, {"scheduler_recv_interval": 0})


def _adp_state(ranks: int, decoding: int, waiting: int) -> EngineState:
    s = EngineState(10**6, 1000, 8192, 1, 1.0, decoding + waiting)
    s.ranks = ranks
    for i in range(decoding):
        s.context[i], s.osl[i] = 100, 200
        s.admit(i)
        s.chunk_done(i)
        s.join(i)
    for j in range(waiting):
        s.add_request(decoding + j, 0.0, 512, 64)
    return s


def _plan(policy: Scheduler, s: EngineState) -> StepPlan:
    """The step ``policy`` plans on the books ``s``."""
    s.plan_n = 0
    policy.schedule(s)
    return s.plan()


@pytest.mark.parametrize(("waiting", "decoding", "held"), [
    (1, 4, 4),   # one rank holds a context, every rank generates: the 5th iteration reaches the timeout
    (4, 4, 2),   # every rank holds one and generates: batch 2 more iterations, then go
    (1, 2, 0),   # a rank without generation requests: go at once
])
def test_trtllm_attention_dp_balance_holds_contexts(waiting, decoding, held):
    # py_executor.py _balance_adp_requests with enable_balance, timeout_iters 5, batching_wait_iters 2
    eng = engine_profile("trtllm", gpu="h100-sxm", memory_gib=80, dp=4,
                         scheduler={"attention_dp_balance": True, "attention_dp_timeout_iters": 5,
                                    "attention_dp_batching_wait_iters": 2})
    policy = make_scheduler("trtllm", eng)
    s = _adp_state(4, decoding, waiting)
    plans = [_plan(policy, s) for _ in range(held + 1)]
    assert [bool(p.chunks) for p in plans] == [False] * held + [True]
    assert all(p.decode for p in plans)  # the generation requests go on meanwhile
    assert policy.quiet_steps(_adp_state(4, 4, 1)) == 1.0  # the balance decides every iteration


def test_trtllm_attention_dp_balance_counts_iterations_with_nothing_waiting():
    """_schedule calls _balance_adp_requests every iteration: with no context request on any rank
    the count runs 1, 2, ... and starts again at the timeout (5).  A stretch of three iterations with
    nothing waiting (its plan counts the first), then a lone request: the count stands at 3, so it
    waits 1 iteration (4), not 4, and goes on the 5th.  A stretch while a rank has no generation
    request starts the count again."""
    eng = engine_profile("trtllm", gpu="h100-sxm", memory_gib=80, dp=4,
                         scheduler={"attention_dp_balance": True, "attention_dp_timeout_iters": 5,
                                    "attention_dp_batching_wait_iters": 2})
    policy = make_scheduler("trtllm", eng)
    idle = _adp_state(4, 4, 0)
    assert not _plan(policy, idle).chunks and policy.waited == 1
    policy.after_step(idle, 3)  # the stretch's second and third iterations count here
    assert policy.waited == 3
    s = _adp_state(4, 4, 1)
    plans = [_plan(policy, s) for _ in range(2)]
    assert [bool(p.chunks) for p in plans] == [False, True]
    policy.after_step(_adp_state(4, 2, 0), 7)  # two ranks without generation requests
    assert policy.waited == 0
    policy.after_step(idle, 8)  # 7 more iterations: 7 % 5
    assert policy.waited == 2


def test_trtllm_attention_dp_balance_is_off_by_default_and_without_dp():
    policy = make_scheduler("trtllm", engine_profile("trtllm", gpu="h100-sxm", memory_gib=80, dp=4))
    assert _plan(policy, _adp_state(4, 4, 1)).chunks  # TensorRT-LLM's default: no balance
    one = make_scheduler("trtllm", engine_profile("trtllm", gpu="h100-sxm", memory_gib=80,
                                                  scheduler={"attention_dp_balance": True}))
    assert _plan(one, _adp_state(1, 4, 1)).chunks and not one.balancing  # one rank: no balance


@pytest.mark.parametrize(("waiting", "held"), [
    (2, 3),   # 2 x 512 + 4 generation tokens < 0.5 x 8192: wait out the 3-iteration timeout
    (9, 0),   # 9 x 512 + 4 = 4,612 >= 0.5 x 8,192: go at once
])
def test_trtllm_batch_waiting_holds_contexts_for_tokens(waiting, held):
    # py_executor.py _waiting_requests: batch_wait_timeout_iters 3, batch_wait_max_tokens_ratio 0.5
    # (new_requests_per_iteration 0: every waiting request already handed to the executor)
    eng = engine_profile("trtllm", gpu="h100-sxm", memory_gib=80,
                         scheduler={"batch_wait_timeout_iters": 3, "batch_wait_max_tokens_ratio": 0.5,
                                    "new_requests_per_iteration": 0})
    policy = make_scheduler("trtllm", eng)
    s = _adp_state(1, 4, waiting)
    plans = [_plan(policy, s) for _ in range(held + 1)]
    assert [bool(p.chunks) for p in plans] == [False] * held + [True]
    assert len(plans[-1].chunks) == waiting  # then every context that fits goes at once
    idle = _adp_state(1, 0, 1)  # no generation requests: no waiting
    assert _plan(make_scheduler("trtllm", eng), idle).chunks


def test_trtllm_hands_the_executor_one_new_request_an_iteration():
    """Without attention DP the waiting requests reach TensorRT-LLM's scheduler one an iteration
    (TrtllmScheduler item 5): six prompts of 512 tokens that one 8,192-token step could hold go one
    a step; batch waiting gathers those handed over; with attention DP, or the limit at 0, all six
    go at once."""
    eng = engine_profile("trtllm", gpu="h100-sxm", memory_gib=80)
    policy = make_scheduler("trtllm", eng)
    assert policy.options["new_requests_per_iteration"] == 1
    s = _adp_state(1, 4, 6)

    def admitted(p, state):  # requests the step took off the waiting queue
        before = state.waiting_n
        _plan(p, state)
        return before - state.waiting_n

    assert [admitted(policy, s) for _ in range(7)] == [1, 1, 1, 1, 1, 1, 0]
    for sched in ({"new_requests_per_iteration": 0}, {"new_requests_per_iteration": 6}):
        free = make_scheduler("trtllm", engine_profile("trtllm", gpu="h100-sxm", memory_gib=80,
                                                       scheduler=sched))
        assert len(_plan(free, _adp_state(1, 4, 6)).chunks) == 6
    adp = make_scheduler("trtllm", engine_profile("trtllm", gpu="h100-sxm", memory_gib=80, tp=8, dp=8))
    assert adp.new_per_step == 0
    # batch waiting (3 iterations, half the budget) gathers what was handed over: 3 at its timeout
    wait = make_scheduler("trtllm", engine_profile(
        "trtllm", gpu="h100-sxm", memory_gib=80,
        scheduler={"batch_wait_timeout_iters": 3, "batch_wait_max_tokens_ratio": 0.5}))
    s = _adp_state(1, 4, 6)
    assert [admitted(wait, s) for _ in range(4)] == [0, 0, 0, 4]


def test_memory_flag_replaces_the_engines_own_fraction():
    # SGLang on an H200 (139.8 GiB) with --chunked-prefill-size 32768 would reserve 512 MiB +
    # 1.5 x 32768 MiB + ... beside the weights (fraction about 0.64); --mem-fraction-static 0.82
    # takes 0.82 of the memory for weights and KV, nothing reserved beside it.
    gib = 139.8
    own = engine_profile("sglang", gpu="h200", memory_gib=gib, max_num_batched_tokens=32768, tp=8)
    flag = engine_profile("sglang", gpu="h200", memory_gib=gib, max_num_batched_tokens=32768, tp=8,
                          memory_fraction=0.82)
    assert own.memory_fraction < 0.66 and flag.memory_fraction == 0.82 and flag.reserved_bytes == 0.0
    total, weights = gib * 2**30, 85 * 2**30
    assert flag.kv_room_bytes(total, weights) == pytest.approx(0.82 * total - weights)
    # TensorRT-LLM's free_gpu_memory_fraction: of what the weights (and its reserve) leave
    trt = engine_profile("trtllm", gpu="h200", memory_gib=gib, memory_fraction=0.75)
    assert trt.kv_room_bytes(total, weights) == pytest.approx(0.75 * (total - weights - trt.reserved_bytes))
    with pytest.raises(ParameterError, match="memory_fraction"):
        engine_profile("vllm", memory_fraction=1.5)


def test_trtllm_refuses_a_whole_prompt_over_one_attention_dp_ranks_budget():
    from servesim.plan.predict import Deployment, build_step_model

    # 4 ranks of 8,192: the group's 32,768 would hold a 9,000-token prompt, a rank's budget does not
    sm, _, memory = build_step_model(Deployment("Qwen/Qwen3-30B-A3B", "h200-sxm", 1, dtype="auto",
                                                engine="trtllm", dp=4, ep=4))
    assert sm.engine.max_num_batched_tokens == 32768 and sm.engine.chunk_tokens == 8192
    with pytest.raises(ParameterError, match="max_num_tokens=8192 is invalid: must be at least the longest "
                                             "prompt \\(9000 tokens\\)"):
        run_benchmark(sm, Benchmark(9000, 16, concurrency=1, num_prompts=2), memory, loop="python")


READS = RECORD_TOML_READS + """
import json
from servesim.sim.schedulers import SCHEDULERS
at_import = list(read)
first = SCHEDULERS["sglang"].__name__
names = list(SCHEDULERS)
print(json.dumps([at_import, first, names, read]))
"""


def test_the_policies_read_the_engines_data_file_on_first_lookup_once():
    """Importing the policies reads no data file (issue 47 item 7: ``servesim all`` and the lab's
    other commands import no engine data they do not print from); the first lookup reads
    engines.toml, once, and later ones read nothing more (a fresh interpreter, so that no other test
    has read it before)."""
    res = subprocess.run([sys.executable, "-c", READS], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    at_import, first, names, read = json.loads(res.stdout.splitlines()[-1])
    assert at_import == []
    assert first == "SglangScheduler" and names == ["vllm", "sglang", "trtllm"]  # engines.toml's order
    assert read == ["engines.toml"]
