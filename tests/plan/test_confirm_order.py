"""The plan confirms its costliest rows first (no worker left with one at the end) and gives every
row back in its own place: the order in which rows run changes nothing the plan prints."""

from __future__ import annotations


def _row(rank: int, arch: str, spec: str) -> dict[str, object]:
    pool = {"tp": 2, "workers": 4, "dtype": "fp8"}
    return {"rank": rank, "gpu": "h100-sxm", "architecture": arch, "speculation": spec, "prefill": pool,
            "decode": {**pool, "tp": 2 + rank}, "max_num_batched_tokens": 2048, "gpus": 8,
            "max_rate_rps": 10.0, "planned_rate_rps": 10.0, "output_throughput_per_gpu": 400.0,
            "tokens_per_s_per_user": 20.0}


def test_rows_run_costliest_first_and_come_back_in_rank_order(monkeypatch):
    from servesim.plan import search
    from servesim.plan.search import PlanQuestion
    from servesim.sim import parallel

    kinds = [("disaggregated", "none"), ("colocated", "none"), ("disaggregated", "eagle3"),
             ("colocated", "eagle3"), ("colocated", "none")]
    rows = [_row(i, a, s) for i, (a, s) in enumerate(kinds)]
    ran: list[int] = []

    def confirm(row, q, gname, catalog):  # every row ties on the figures that rank them
        return {**row, "ran": len(ran)}, []

    def in_order(fn, args, *, jobs=1, ray_address=None, progress=None):
        out = []
        for a in args:
            ran.append(a[0]["rank"])
            out.append(fn(*a))
        return out

    monkeypatch.setattr(search, "_confirm_task", confirm)
    monkeypatch.setattr(parallel, "map_tasks", in_order)
    q = PlanQuestion("llama-3-70b", "h100-sxm", 8, 2000, 300, 0.8, 0.05, confirm_top=len(rows))
    out, _, off = search._confirmed(rows, q, "h100-sxm", None)
    # speculative colocated, speculative disaggregated, colocated, disaggregated; by rank within each
    assert ran == [3, 2, 1, 4, 0]
    # every row is its own confirmation's, and the ranking (colocated first where the figures tie)
    # keeps the rows' own order within a tie
    assert [r["rank"] for r in out] == [1, 3, 4, 0, 2] and off == 0
    assert all(r["ran"] == ran.index(r["rank"]) + 1 for r in out)
