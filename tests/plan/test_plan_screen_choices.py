"""What the plan's screen takes from its question, checked without the engine model's confirmation.

The long tests of tests/plan/test_plan_confirmed.py (marked slow) confirm the same choices row by
row with ``predict``; these keep each choice in the default run at a second or two apiece: the
attention-DP exchange (``plan --ep-comm``) reaches the screen's MoE step model, and an MTP plan
without ``--k`` screens each k at its own measured acceptance.
"""

from __future__ import annotations

from servesim.plan.search import PlanQuestion, capacity_plan

R1 = "deepseek-ai/DeepSeek-R1"


def _dp8_row(ep_comm: str | None) -> dict:
    q = PlanQuestion(R1, "h200", 8, 1024, 1024, 2.0, 0.2, engine="sglang", confirm=False, ep_comm=ep_comm,
                     chunks=(8192,))
    rows = [r for r in capacity_plan(q)["ranked"]
            if r["architecture"] == "colocated" and r["decode"].get("dp", 1) == 8]
    assert rows, ep_comm
    return rows[0]


def test_the_plans_ep_comm_reaches_the_screen():
    """SGLang's default exchange is the all-gather (engines.toml ``ep_comm``; predict's
    tests/hardware/test_ep_comm.py shows the same for one deployment): the screen's DP8 + EP8 row is
    the same asked for it by name, and another with DeepEP's normal kernels."""
    default, allgather, deepep = _dp8_row(None), _dp8_row("allgather"), _dp8_row("deepep_normal")
    key = ("max_rate_rps", "mean_tpot_ms", "mean_ttft_ms")
    assert [default[k] for k in key] == [allgather[k] for k in key]
    assert [default[k] for k in key] != [deepep[k] for k in key]
    assert deepep["decode"]["dp"] == 8 and deepep["decode"]["ep"] == 8


def test_an_mtp_plan_without_k_screens_deeper_than_k_1():
    """DeepSeek-R1's MTP is measured at k = 1-5 (1.875, 2.58, 2.82, 2.99, 3.01 tokens a step): the
    screen weighs each k at its own acceptance, so its speculative rows lie in 1..5 and some go past
    the k = 1 default."""
    q = PlanQuestion(R1, "h200", 8, 1024, 1024, 2.0, 0.05, engine="trtllm", spec="mtp", confirm=False,
                     chunks=(8192,))
    rows = capacity_plan(q)["ranked"]
    spec = [r["speculative_k"] for r in rows if r["speculation"] == "mtp"]
    assert spec and all(1 <= k <= 5 for k in spec)
    assert any(k > 1 for k in spec)
    assert all(r["speculative_k"] == 0 for r in rows if r["speculation"] == "none")
