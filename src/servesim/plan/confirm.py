"""The engine model confirms what the plan prints, at steady state.

The capacity plan screens its candidates with the closed form at load
(:mod:`servesim.plan.capacity`, microseconds each).  Every deployment it then
prints is confirmed by the iteration-level engine model that ``predict`` runs (the
reference).  Its **sustainable rate** is the largest Poisson rate the deployment
*holds at steady state* (:func:`steady_window`):

* a run of :data:`STEADY_PROMPTS` requests (seed 0) of which the first
  :data:`WARMUP_PROMPTS` are the warm-up (the server starts empty: its batch and
  queue are still filling) and are left out;
* the window (the rest) is long enough when the mean TTFT, the mean TPOT and the
  mean decode batch have **converged**: each, over the whole window, is within
  :data:`CONVERGED` (5%) of its mean over the window's first half (the running
  mean moved less than that over the second half).  A window that has not
  converged is doubled (up to :data:`LONGEST_PROMPTS`; the warm-up with it);
* the rate is **unstable** when the queue still grows: the time-mean number of
  requests waiting for their first token over the window's second half exceeds
  the first half's by more than :data:`CONVERGED` and one request;
* it **meets the SLO pair** when, over the window and over the whole run (the
  warm-up included: what ``predict --rate R --num-prompts 4000`` reports), the mean
  TPOT is within its SLO and the share of requests whose TTFT is within its SLO
  is at least the attainment target.

A rate *holds* when the engine model finds the deployment stable, the queue does not
grow, the window converged and the SLO pair is met.  The row's TTFT, TPOT and
attainment are the window's (``predict --rate R --num-prompts 4000
--warmup-prompts 500`` reproduces them), its decode batch predict's, and its output
tokens/s the tokens the window completed per second (not the offered rate).

A colocated row of ``n`` replicas is one replica confirmed at ``rate / n`` (replicas
share Poisson traffic evenly); a disaggregated row is the whole deployment's
engine loop.

The search: short runs (``predict --rate``'s default benchmark, 500 requests)
bracket the closed form's rate (x1.25 up, x0.8 down) and :data:`BISECT_STEPS`
bisections narrow it to ``r1``; the steady-state trials start at 0.95 ``r1``
(:data:`STEADY_START`), go up to ``r1`` if that holds or step down by x0.95 until one
holds, and :data:`STEADY_STEPS` bisection narrows the last step (to about 2.5%).
Short runs start empty and end before the queue and the batch settle, so near
capacity they promise too much (Llama-3.1-70B on TP2 fp8, 2000/300 tokens at 3.6
req/s: TPOT 49.4 ms over 500 requests, 55.6 ms over 4,000); they only find where
to start.

Nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from servesim._checks import InputError, ParameterError
from servesim.hardware.pricer import Deployment
from servesim.plan.predict import predict, predict_disaggregated
from servesim.sim.batching import Benchmark

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import NDArray

    from servesim.hardware.catalog import Catalog

__all__ = ["BISECT_STEPS", "CONVERGED", "LONGEST_PROMPTS", "STEADY_PROMPTS", "STEADY_START", "STEADY_STEPS",
           "WARMUP_PROMPTS",
           "Steady", "confirm_row", "operating_point", "row_deployments", "steady_window"]

BISECT_STEPS = 2
"""Bisections of the short runs' bracket (its width x 1/4: the starting rate to about 6%; the steady
trials narrow it)."""

STEADY_PROMPTS = 4000
"""Requests of a steady-state trial (doubled while its window has not converged)."""

WARMUP_PROMPTS = 500
"""The first requests of a steady-state trial, left out as its warm-up (an eighth of the run)."""

LONGEST_PROMPTS = 16_000
"""The longest steady-state trial: a window that has not converged by then does not hold."""

CONVERGED = 0.05
"""How far the window's running means may move over its second half, relative (see the module
docstring); also the queue growth that calls a rate unstable."""

STEADY_START = 0.95
"""The first steady-state trial's rate, as a share of the short runs' rate (which promise a few percent
too much near capacity); also the factor of each step down from it."""

STEADY_STEPS = 1
"""Bisections between the highest steady trial that holds and the lowest that does not (the x0.95
step narrowed to about 2.5%)."""

_GROW, _SHRINK, _TRIES = 1.25, 0.8, 14
_STEADY_TRIES = 20


class Question(Protocol):
    """What confirmation asks of the plan's question (:class:`servesim.plan.search.PlanQuestion`,
    which imports this module: hence a protocol, not the class)."""

    @property
    def model(self) -> str: ...
    @property
    def isl(self) -> int: ...
    @property
    def osl(self) -> int: ...
    @property
    def slo_ttft_s(self) -> float: ...
    @property
    def slo_tpot_s(self) -> float: ...
    @property
    def attainment(self) -> float: ...
    @property
    def kv_dtype(self) -> str: ...
    @property
    def engine(self) -> str: ...
    @property
    def link_bytes_per_s(self) -> float: ...
    @property
    def ep_comm(self) -> str | None: ...
    @property
    def headroom(self) -> float | None: ...
    @property
    def interval_level(self) -> float: ...


@dataclass(frozen=True)
class Steady:
    """What a steady-state trial's window says (times in seconds; see the module docstring).  Each
    pair is (over the window's first half, over the whole window), but ``queue``: (first half, second
    half)."""

    prompts: int
    warmup: int
    ttft_s: tuple[float, float]
    tpot_s: tuple[float, float]
    decode_batch: tuple[float, float]  # time-mean requests past their first token, per decode worker
    queue: tuple[float, float]  # time-mean requests waiting for their first token
    output_tokens_per_s: float  # output tokens of the requests the window completed, per second of it
    run_tpot_s: float  # mean TPOT of the whole run, the warm-up included
    run_attainment: float  # share of the whole run's requests whose TTFT met the SLO

    @property
    def converged(self) -> bool:
        """Each running mean moved at most :data:`CONVERGED` of itself over the window's second half."""
        return all(abs(whole - first) <= CONVERGED * abs(whole)
                   for first, whole in (self.ttft_s, self.tpot_s, self.decode_batch))

    @property
    def growing(self) -> bool:
        """The queue of requests waiting for their first token still grows (second half against first)."""
        first, second = self.queue
        return second > (1 + CONVERGED) * first + 1.0

    def as_dict(self) -> dict[str, Any]:
        """The window's figures by name (times in ms; ``_half``: over the window's first half)."""
        return {"prompts": self.prompts, "warmup_prompts": self.warmup, "converged": self.converged,
                "queue_growing": self.growing,
                "mean_ttft_ms_half": self.ttft_s[0] * 1e3, "mean_ttft_ms": self.ttft_s[1] * 1e3,
                "mean_tpot_ms_half": self.tpot_s[0] * 1e3, "mean_tpot_ms": self.tpot_s[1] * 1e3,
                "decode_batch_half": self.decode_batch[0], "decode_batch": self.decode_batch[1],
                "waiting_first_half": self.queue[0], "waiting_second_half": self.queue[1],
                "output_throughput": self.output_tokens_per_s, "run_mean_tpot_ms": self.run_tpot_s * 1e3,
                "run_ttft_slo_attainment": self.run_attainment}


def _occupancy(starts: NDArray[np.float64], ends: NDArray[np.float64], t0: float, t1: float) -> float:
    """Time-mean number of the spans [``starts``, ``ends``) (numpy arrays) open over [t0, t1]."""
    if t1 <= t0:
        return 0.0
    return float(np.clip(np.minimum(ends, t1) - np.maximum(starts, t0), 0.0, None).sum()) / (t1 - t0)


def steady_window(requests: list[tuple[int, float, float, float]], outputs: list[int], warmup: int,
                  ttft_offset_s: float, slo_ttft_s: float, decode_workers: int = 1) -> Steady:
    """The steady-state window of one run: ``requests`` are (index, sent, first token, last token)
    in seconds, ``outputs`` each request's output tokens by index, the first ``warmup`` (by send
    order) the warm-up; ``ttft_offset_s`` is what the engine adds to ``first - sent`` (its
    per-request overhead); ``decode_workers`` divides the decode batch (a disaggregated pool's)."""
    n = len(requests)
    if not 0 <= warmup < n - 1:
        raise ParameterError("warmup", warmup, f"in [0, {n - 2}]: fewer than the run's {n} requests")
    table = np.array(sorted(requests), dtype=float)  # by index: send order
    sent, first, last = table[:, 1], table[:, 2], table[:, 3]
    out = np.asarray(outputs, dtype=float)[table[:, 0].astype(int)]
    ttft = first - sent + ttft_offset_s
    gaps = out > 1
    tpot = np.where(gaps, (last - first) / np.maximum(out - 1, 1), 0.0)
    mid = (warmup + n) // 2

    def means(a: int, b: int) -> tuple[float, float]:
        g = gaps[a:b]
        return float(ttft[a:b].mean()), (float(tpot[a:b][g].mean()) if g.any() else 0.0)

    t0, tm, t1 = float(sent[warmup]), float(sent[mid]), float(sent[-1])
    done = (last >= t0) & (last < t1)
    (h_ttft, h_tpot), (w_ttft, w_tpot) = means(warmup, mid), means(warmup, n)
    return Steady(
        prompts=n, warmup=warmup, ttft_s=(h_ttft, w_ttft), tpot_s=(h_tpot, w_tpot),
        decode_batch=(_occupancy(first, last, t0, tm) / decode_workers,
                      _occupancy(first, last, t0, t1) / decode_workers),
        queue=(_occupancy(sent, first, t0, tm), _occupancy(sent, first, tm, t1)),
        output_tokens_per_s=float(out[done].sum()) / (t1 - t0) if t1 > t0 else 0.0,
        run_tpot_s=float(tpot[gaps].mean()) if gaps.any() else 0.0,
        run_attainment=float((ttft <= slo_ttft_s).mean()))


def row_deployments(row: dict[str, Any], q: Question, gpu: str) -> tuple[Deployment, Deployment]:
    """The prefill and decode :class:`~servesim.plan.predict.Deployment` of a plan row."""
    def dep(pool: dict[str, Any]) -> Deployment:
        return Deployment(q.model, gpu, pool["tp"], dtype=pool.get("dtype_flag", pool["dtype"]),
                          kv_dtype=q.kv_dtype, engine=q.engine, dp=pool.get("dp", 1), ep=pool.get("ep", 1),
                          max_num_batched_tokens=row["max_num_batched_tokens"], ep_comm=q.ep_comm)

    return dep(row["prefill"]), dep(row["decode"])


def _replicas(row: dict[str, Any]) -> int:
    """Replicas that share the row's traffic in the engine model's run: a colocated row's (one is
    run), 1 for a disaggregated row (the whole deployment is run)."""
    return int(row["prefill"]["workers"]) if row["architecture"] == "colocated" else 1


def _bench(q: Question, rate: float, prompts: int | None = None, warmup: int = 0) -> Benchmark:
    return Benchmark(isl=q.isl, osl=q.osl, rate_per_s=rate, num_prompts=prompts, warmup=warmup)


def _run(row: dict[str, Any], q: Question, gpu: str, rate: float, catalog: Catalog | None,
         prompts: int | None = None, warmup: int = 0) -> dict[str, Any]:
    """``predict --rate`` of the row at ``rate`` (its whole deployment's), SLO attainment included;
    with ``prompts``, that many requests, the first ``warmup`` left out, each request's times kept."""
    pre, dec = row_deployments(row, q, gpu)
    spec = None if row["speculation"] == "none" else row["speculation"]
    # the k the screen picked where it searched k (no --k), which predict prices at the acceptance
    # published at (or nearest) it
    k = getattr(q, "k", None) or (row.get("speculative_k") or None)
    acc: dict[str, Any] = {} if spec is None else {"k": k,
                                   "acceptance_length": getattr(q, "acceptance_length", None),
                                   "traffic": getattr(q, "traffic", None)}
    bench = _bench(q, rate / _replicas(row), prompts, warmup)
    keep = prompts is not None
    level = q.interval_level
    if row["architecture"] == "colocated":
        return predict(dec, bench, spec=spec, catalog=catalog, slo_ttft_s=q.slo_ttft_s, keep_requests=keep,
                       interval_level=level, **acc)
    return predict_disaggregated(pre, row["prefill"]["workers"], dec, row["decode"]["workers"],
                                 q.link_bytes_per_s, bench, spec=spec, catalog=catalog,
                                 slo_ttft_s=q.slo_ttft_s, keep_requests=keep, interval_level=level, **acc)


def _meets(d: dict[str, Any], q: Question) -> bool:
    return bool(d["stable"]) and d["mean_tpot_ms"] is not None and d["mean_tpot_ms"] <= q.slo_tpot_s * 1e3 \
        and d["ttft_slo_attainment"] >= q.attainment


def _steady(row: dict[str, Any], q: Question, gpu: str, rate: float, catalog: Catalog | None
            ) -> tuple[dict[str, Any], Steady | None]:
    """A steady-state trial at ``rate``: the run of the longest window tried (see the module
    docstring) and its :class:`Steady`, None where the engine model finds the rate unstable."""
    n, w = STEADY_PROMPTS, WARMUP_PROMPTS
    while True:
        d = _run(row, q, gpu, rate, catalog, n, w)
        reqs = d.pop("requests", ())
        if not d["stable"] or d["mean_ttft_ms"] is None:
            return d, None
        lengths = _bench(q, rate, n).lengths()
        outputs = [o for _, o in lengths] if lengths is not None else [q.osl] * n
        window = [r for r in reqs if r[0] >= w]
        offset = d["mean_ttft_ms"] / 1e3 - sum(r[2] - r[1] for r in window) / len(window)
        workers = 1 if row["architecture"] == "colocated" else int(row["decode"]["workers"])
        s = steady_window(list(reqs), outputs, w, offset, q.slo_ttft_s, workers)
        if s.converged or s.growing or not _meets(d, q) or 2 * n > LONGEST_PROMPTS:
            return d, s
        n, w = 2 * n, 2 * w


def _holds(d: dict[str, Any], s: Steady | None, q: Question) -> bool:
    """Whether a steady-state trial holds the rate (see the module docstring)."""
    return s is not None and not s.growing and s.converged and _meets(d, q) \
        and s.run_tpot_s <= q.slo_tpot_s and s.run_attainment >= q.attainment


def _short_rate(at: Callable[[float], dict[str, Any]], r0: float, q: Question) -> float | None:
    """The largest rate whose short run meets the SLO pair, bracketed from ``r0`` and bisected."""
    good = bad = None
    r = r0
    for _ in range(_TRIES):
        if _meets(at(r), q):
            good = r
            if bad is not None:
                break
            r *= _GROW
        else:
            bad = r
            if good is not None:
                break
            r *= _SHRINK
    if good is None:
        return None
    if bad is not None:
        lo, hi = min(good, bad), max(good, bad)
        for _ in range(BISECT_STEPS):
            mid = (lo + hi) / 2
            if _meets(at(mid), q):
                lo = mid
            else:
                hi = mid
        good = lo
    return good


def _steady_rate(hold: Callable[[float], bool], r1: float) -> float | None:
    """The largest rate a steady trial holds, at most ``r1`` (the short runs' rate): tried first at
    :data:`STEADY_START` x ``r1`` (short runs promise a few percent too much), then ``r1`` above it or
    steps of that factor below it until one holds and one does not, narrowed by
    :data:`STEADY_STEPS` bisections."""
    r = r1 * STEADY_START
    if hold(r):
        if hold(r1):
            return r1
        lo, hi = r, r1
    else:
        found = None
        hi = r
        for _ in range(_STEADY_TRIES):
            r *= STEADY_START
            if hold(r):
                found = r
                break
            hi = r
        if found is None:
            return None
        lo = found
    for _ in range(STEADY_STEPS):
        mid = (lo + hi) / 2
        if hold(mid):
            lo = mid
        else:
            hi = mid
    return lo


def confirm_row(row: dict[str, Any], q: Question, gpu: str,
                catalog: Catalog | None = None) -> dict[str, Any] | None:
    """``row`` with the engine model's sustainable rate at steady state, and its TTFT, TPOT,
    attainment and completed throughput there (see the module docstring); with ``q.headroom`` F,
    those figures at F x the sustainable rate (the rate planned).  None when the engine model
    sustains no rate for it or cannot price it."""
    short: dict[float, dict[str, Any]] = {}
    steady: dict[float, tuple[dict[str, Any], Steady | None]] = {}

    def at(r: float) -> dict[str, Any]:
        if r not in short:
            short[r] = _run(row, q, gpu, r, catalog)
        return short[r]

    def trial(r: float) -> tuple[dict[str, Any], Steady | None]:
        if r not in steady:
            steady[r] = _steady(row, q, gpu, r, catalog)
        return steady[r]

    try:
        r1 = _short_rate(at, row["max_rate_rps"], q)
        cap = None if r1 is None else _steady_rate(lambda r: _holds(*trial(r), q), r1)
        if cap is None:
            return None
        headroom = getattr(q, "headroom", None)
        planned = cap * headroom if headroom else cap
        d, s = trial(planned)
    except (ParameterError, InputError):
        return None
    if s is None or d["mean_tpot_ms"] is None:  # pragma: no cover - below a rate that holds
        return None
    n = _replicas(row)
    out_tps = s.output_tokens_per_s * n
    return {
        **row,
        "max_rate_rps": cap, "planned_rate_rps": planned, "headroom": headroom,
        "output_throughput_per_gpu": out_tps / row["gpus"],
        "offered_output_throughput_per_gpu": planned * q.osl / row["gpus"],
        "tokens_per_s_per_user": 1e3 / d["mean_tpot_ms"] if d["mean_tpot_ms"] else None,
        "mean_ttft_ms": d["mean_ttft_ms"], "p99_ttft_ms": d["p99_ttft_ms"], "mean_tpot_ms": d["mean_tpot_ms"],
        "ttft_attainment": d["ttft_slo_attainment"], "decode_batch": d["decode_batch"],
        **({"speculative_k": d["speculation"]["k"], "acceptance": d["speculation"]["acceptance"]}
           if "speculation" in d else {}),
        # the screen's price per token, at the tokens the engine model completes instead
        "dollars_per_million_output_tokens": (row["dollars_per_million_output_tokens"] * row["max_rate_rps"]
                                              * q.osl / out_tps
                                              if row["dollars_per_million_output_tokens"] and out_tps > 0
                                              else None),
        "closed_form": {"max_rate_rps": row["max_rate_rps"], "mean_ttft_ms": row["mean_ttft_ms"],
                        "mean_tpot_ms": row["mean_tpot_ms"]},
        "short_run": {"max_rate_rps": r1, "mean_tpot_ms": at(r1)["mean_tpot_ms"] if r1 else None},
        "prediction_interval": _row_interval(d, out_tps / row["gpus"]),
        "steady_state": s.as_dict(),
        "confirmed_by": (f"engine model at steady state (predict --rate {planned / n:.6g} --num-prompts "
                         f"{s.prompts} --warmup-prompts {s.warmup}" + (" per replica)" if n > 1 else ")")),
        "engine_trials": len(short) + len(steady),
    }


def _row_interval(d: dict[str, Any], per_gpu: float) -> dict[str, Any]:
    """The planned-rate run's prediction interval (:mod:`servesim.plan.interval`), with its output
    throughput's interval carried over to the row's tokens/s per GPU (the same relative range)."""
    pi = dict(d.get("prediction_interval") or {})
    tput = pi.get("output_throughput")
    if tput and d.get("output_throughput"):
        pi["output_throughput_per_gpu"] = [per_gpu * tput[0] / d["output_throughput"],
                                           per_gpu * tput[1] / d["output_throughput"]]
    return pi


def operating_point(row: dict[str, Any], q: Question, gpu: str, rate: float,
                    catalog: Catalog | None = None) -> dict[str, Any]:
    """The engine model's run of a confirmed row at a lower ``rate`` (a Pareto operating point)."""
    return _run(row, q, gpu, rate, catalog)
