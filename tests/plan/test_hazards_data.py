"""The plan's hazards are each engine's own, read from engines.toml; the plan's engine is the default one."""

from __future__ import annotations


def test_every_engine_states_both_hazards_in_its_own_name():
    from servesim.hardware.engines import ENGINES, display_name, engine_hazards

    assert len(ENGINES) >= 3
    for engine in ENGINES:
        texts = engine_hazards(engine)
        assert set(texts) == {"spec+prefix-cache", "spec+disagg"}, engine
        for text in texts.values():
            # a report of the engine's own, or a line saying that none of it is known
            assert display_name(engine) in text, (engine, text)
            assert "#" in text  # an issue number, the engine's or the others'


def test_the_plan_reads_the_hazards_and_the_default_engine_from_the_data():
    from servesim.hardware.engines import ENGINES, default_engine, engine_hazards
    from servesim.plan import search
    from servesim.plan.search import PlanQuestion, hazards_for

    assert search.HAZARDS == {e: engine_hazards(e) for e in ENGINES}
    assert all(hazards_for(e) == engine_hazards(e) for e in ENGINES)
    args = ("llama-3-8b", "h100-sxm", 8, 1000, 100, 1.0, 0.05)
    q = PlanQuestion(*args)
    assert q.engine == default_engine()
    other = next(e for e in ENGINES if e != q.engine)
    assert PlanQuestion(*args, engine=other).engine == other


def test_an_engine_the_data_does_not_hold_has_no_hazard_text():
    from servesim.hardware.engines import engine_hazards

    assert engine_hazards("no-such-engine") == {}
