"""The closed form keeps each step model's cycle times between the rates of a search (capacity._kept):
the same answers to the last bit as priced afresh, fewer steps priced, and no price shared between two
step models."""

from __future__ import annotations

import pytest


def _model(tp: int):
    from servesim.hardware.pricer import Deployment, build_step_model

    sm, _, memory = build_step_model(Deployment("llama-3-8b", "h100-sxm", tp))
    return sm, memory


def _capacity(sm, memory, spec=None):
    from servesim.plan.capacity import colocated_at_load, max_rate

    return max_rate(lambda r: colocated_at_load(sm, memory, 1, r, 2000, 300, 0.5, spec=spec), 0.03, 0.9)


@pytest.mark.parametrize("spec", [None, ("eagle3", 3, 0.7)])
def test_kept_prices_give_the_same_answer_with_fewer_steps(spec, monkeypatch):
    from servesim.hardware.stepmodel import StepModel
    from servesim.plan import capacity

    sm, memory = _model(1)
    steps = []
    real = StepModel.step

    def counted(self, *a, **k):  # the class's step, counted for this model (a drafter's not)
        if self is sm:
            steps.append(a[0])
        return real(self, *a, **k)

    monkeypatch.setattr(StepModel, "step", counted)
    monkeypatch.setattr(capacity, "_KEPT", {})
    first = _capacity(sm, memory, spec)
    cold = len(steps)
    again = _capacity(sm, memory, spec)
    assert again == first  # bit for bit: rate and every figure of its load point
    assert len(steps) == cold  # the second search prices nothing new
    monkeypatch.setattr(capacity, "_KEPT", {})  # forgotten: priced afresh, the same answer
    steps.clear()
    assert _capacity(sm, memory, spec) == first and len(steps) == cold
    # nothing kept (each solve of a rate starts afresh): the same answer, and without speculation more
    # steps priced, since the rates of one search meet batches another rate priced (the same grid, the
    # same first halvings; a speculative step adds a draft time that moves with the rate)
    monkeypatch.setattr(capacity, "_kept", lambda model: capacity._Kept(model))
    steps.clear()
    assert _capacity(sm, memory, spec) == first
    assert len(steps) > cold > 0 if spec is None else len(steps) >= cold > 0


def test_two_step_models_never_share_a_price(monkeypatch):
    from servesim.plan import capacity

    monkeypatch.setattr(capacity, "_KEPT", {})
    one, m1 = _model(1)
    two, m2 = _model(2)
    r1, r2 = _capacity(one, m1)[0], _capacity(two, m2)[0]
    assert r2 > r1  # twice the GPUs sustain more: tp 2's own prices, not tp 1's kept ones
    monkeypatch.setattr(capacity, "_KEPT", {})
    assert _capacity(two, m2)[0] == r2
    assert len(capacity._KEPT) == 1 and capacity._KEPT[id(two)].sm is two


def test_the_kept_prices_are_bounded_and_forgetting_them_changes_no_answer(monkeypatch):
    from servesim.plan import capacity

    monkeypatch.setattr(capacity, "_KEPT", {})
    monkeypatch.setattr(capacity._Kept, "entries", 0)
    sm, memory = _model(1)
    free = _capacity(sm, memory)
    kept_free = capacity._Kept.entries
    assert kept_free > 200
    monkeypatch.setattr(capacity, "_KEPT", {})
    monkeypatch.setattr(capacity._Kept, "entries", 0)
    monkeypatch.setattr(capacity, "_KEPT_ENTRIES", 100)  # forgotten many times over within one search
    assert _capacity(sm, memory) == free
    # one solve of a rate adds at most a few dozen prices past the bound before the next forgets them
    assert capacity._Kept.entries < 100 + kept_free // 4
