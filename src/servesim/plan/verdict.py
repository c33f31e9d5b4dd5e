"""Where a measurement that falls outside its prediction interval points (``predict --compare``).

:func:`likely_causes` reads the rows of :func:`servesim.plan.predict.compare_to_measured` beside the
prediction's own decode step (``step_at_batch``: the step at the run's mean decode batch, in parts)
and says which phase is off and what the size of the gap points to.  The rules are plain
arithmetic on those figures, no fit:

* the measured ITL 30% or more above the measured TPOT (and no speculation predicted): the run
  streamed several tokens a chunk (speculative decoding emits the accepted drafts together);
* TPOT off by more than half again either way (measured / predicted above 1.5 or below 1/1.5): a
  gap the kernel tables' errors (tens of percent) do not reach; the deployment the file ran is
  likely not the one assumed (GPU, TP, dtype, engine), so check those first;
* TPOT below the step's speed of light: more or faster GPUs or a lighter dtype than assumed;
* else: the kernels or host time of the run's engine version on that GPU run slower (faster) than
  the tables;
* TTFT outside with TPOT inside: the prefill steps and the wait before them, not the decode step.

Any verdict outside its interval adds the refit: ``servesim calibrate`` on a sweep of such files.
Computes and never prints.
"""

from __future__ import annotations

from typing import Any

__all__ = ["likely_causes"]

_PARTS = (("gemm_ms", "GEMM"), ("moe_ms", "of which MoE"), ("attention_ms", "attention"),
          ("allreduce_ms", "communication"), ("other_ms", "other kernels"), ("host_ms", "host"))
_DEPLOYMENT_GAP = 1.5  # measured / predicted TPOT beyond which the deployment, not the kernels, is suspect
_CHUNKED_ITL = 1.3  # measured ITL / TPOT from which the run streamed several tokens a chunk


def _outside(rows: list[dict[str, Any]], metric: str) -> dict[str, Any] | None:
    row = next((r for r in rows if r["metric"] == metric), None)
    return row if row is not None and str(row.get("verdict", "")).startswith("outside") else None


def likely_causes(prediction: dict[str, Any], rows: list[dict[str, Any]],
                  measured: dict[str, float]) -> list[str]:
    """One line per phase whose verdict is outside its interval, saying what the gap points to (see
    the module's rules), and the refit line; empty when every verdict is inside."""
    out: list[str] = []
    step = prediction.get("step_at_batch") or {}
    tpot = _outside(rows, "mean_tpot_ms") or _outside(rows, "mean_itl_ms")
    if tpot is not None and tpot["predicted"]:
        m, p = tpot["measured"], tpot["predicted"]
        what = "TPOT" if tpot["metric"] == "mean_tpot_ms" else "ITL"
        parts = ", ".join(f"{label} {step[k]:.2f}" for k, label in _PARTS if step.get(k))
        priced = (f"the decode step at batch {prediction.get('decode_batch') or 0:.1f} is priced "
                  f"{step['total_ms']:.2f} ms ({parts}; speed of light {step['speed_of_light_ms']:.2f})"
                  if step.get("total_ms") else "the decode step")
        itl, tpot_m = measured.get("mean_itl_ms"), measured.get("mean_tpot_ms")
        gap = f"{what} {m:.2f} ms measured, {p:.2f} predicted ({m / p:.2f}x): {priced}"
        if itl and tpot_m and itl >= _CHUNKED_ITL * tpot_m and not prediction.get("speculation"):
            out.append(f"the measured ITL {itl:.2f} ms is {itl / tpot_m:.1f}x its TPOT {tpot_m:.2f}: the run "
                       "streamed several tokens a chunk (speculative decoding emits the accepted drafts "
                       "together), which the prediction did not have")
        elif max(m / p, p / m) > _DEPLOYMENT_GAP:
            out.append(f"{gap}; a gap this size points past the kernels: check that the run had the GPU, "
                       "TP, dtype and engine assumed")
        elif m < step.get("speed_of_light_ms", 0.0):
            out.append(f"{gap}; below the step's speed of light: the run had more or faster GPUs, or a "
                       "lighter dtype, than assumed")
        else:
            out.append(f"{gap}; the run's kernels or host time are {'slower' if m > p else 'faster'} than "
                       "the tables")
    ttft = _outside(rows, "mean_ttft_ms") or _outside(rows, "p99_ttft_ms")
    if ttft is not None and tpot is None:
        out.append("TTFT only (TPOT inside): the prefill steps and the wait before them (queueing, the "
                   "engine's request overhead), not the decode step")
    if any(str(r.get("verdict", "")).startswith("outside") for r in rows):
        out.append("to refit the node to your deployment: servesim calibrate RESULT.json ... (a rate sweep "
                   "of such files)")
    return out
