"""The spaced-stability model: pure math, then the engine on a virtual clock."""

import math
from datetime import timedelta

import numpy as np
import pytest

from engram.admin.maintenance import run_maintenance
from engram.search import decay
from tests.conftest import START


def test_initial_stability_by_type_and_importance():
    # fact, importance 0.5: S₀ = 1 / (0.16 × (1 − 0.4)) = 10.42 days
    assert decay.initial_stability("fact", 0.5) == pytest.approx(1 / 0.096, rel=1e-12)
    # strategy, importance 0.9: 1 / (0.1 × 0.28)
    assert decay.initial_stability("strategy", 0.9) == pytest.approx(1 / 0.028, rel=1e-12)
    assert decay.stability_of("fact", 0.5, None) == decay.initial_stability("fact", 0.5)
    assert decay.stability_of("fact", 0.5, 250.0) == 250.0  # a stored stability wins


def test_strength_matches_hand_computed_values():
    s = decay.strength(0.5, 10.0, START, START + timedelta(days=10))
    assert s == pytest.approx(0.5 * math.exp(-1.0), rel=1e-12)
    s0 = decay.initial_stability("failure", 0.5)
    assert decay.strength(0.5, s0, START, START + timedelta(days=5)) == pytest.approx(
        0.5 * math.exp(-0.35 * 0.6 * 5), rel=1e-12
    )


def test_days_count_from_last_touch_and_never_negative():
    assert decay.strength(0.5, 10.0, START, START) == pytest.approx(0.5)
    assert decay.strength(0.5, 10.0, START, START - timedelta(days=3)) == pytest.approx(0.5)


def test_type_order_strategy_outlasts_failure():
    later = START + timedelta(days=20)
    vals = {t: decay.strength(0.5, decay.initial_stability(t, 0.5), START, later) for t in decay.BASE_LAMBDA}
    assert vals["handoff"] > vals["strategy"] > vals["fact"] > vals["assumption"] > vals["failure"]


def test_vectorised_strength_agrees_with_scalar():
    imp = np.array([0.2, 0.5, 0.9])
    stab = np.array([3.0, 40.0, 900.0])
    days = np.array([1.0, 12.5, 40.0])
    got = decay.strength_array(imp, stab, days)
    for i in range(3):
        want = decay.strength(imp[i], stab[i], START, START + timedelta(days=float(days[i])))
        assert got[i] == pytest.approx(want, rel=1e-12)


def test_growth_formula_spaced_beats_crammed():
    s = 10.0
    # Recalled when e^(−t/S) = 1/2: S × (1 + 3 × 0.5)
    t = s * math.log(2)
    assert decay.grown_stability(s, START, START + timedelta(days=t)) == pytest.approx(25.0, rel=1e-9)
    crammed = decay.grown_stability(s, START, START + timedelta(minutes=5))
    assert s < crammed < s * 1.002
    # However long the wait, a recall multiplies stability by at most 1 + GROWTH.
    assert decay.grown_stability(s, START, START + timedelta(days=10_000)) == pytest.approx(s * (1 + decay.GROWTH))
    assert decay.grown_stability(decay.MAX_STABILITY, START, START + timedelta(days=1e5)) == decay.MAX_STABILITY


def test_days_until_threshold():
    d = decay.days_until(0.05, 0.5, 10.0)
    assert decay.strength(0.5, 10.0, START, START + timedelta(days=d)) == pytest.approx(0.05, rel=1e-9)
    assert decay.days_until(0.9, 0.5, 10.0) == 0.0
    assert decay.days_until(0.05, 0.5, 100.0) == pytest.approx(10 * d)  # ten times the stability


def test_quality_score_formula():
    assert decay.quality_score(0.5, 0) == pytest.approx(0.5)
    assert decay.quality_score(0.5, 3) == pytest.approx(0.65)
    assert decay.quality_score(0.5, 10) == pytest.approx(0.75)  # recall bonus capped at 0.5
    assert decay.quality_score(0.9, 10) == 1.0  # clamped
    assert decay.quality_score(0.5, 0, failures=2) == pytest.approx(0.25)
    assert decay.quality_score(0.5, 0, successes=1) == pytest.approx(0.55)
    assert decay.ranking_penalty(1) == 1.0 and decay.ranking_penalty(2) < 1.0


def test_retrieval_weight_demotes_but_never_buries():
    from engram.search.decay import retrieval_weight, retrieval_weight_array, strength

    assert retrieval_weight(0.0, 0.5) == 0.5  # a fully faded memory keeps the floor
    assert retrieval_weight(1.3, 0.5) == 1.0  # capped
    assert retrieval_weight(0.5, 0.5) == pytest.approx(0.75)
    assert retrieval_weight(0.2, 0.0) == pytest.approx(0.2)  # floor 0: raw strength
    assert retrieval_weight(0.0, 1.0) == 1.0  # floor 1: decay off
    s0 = decay.initial_stability("fact", 0.5)
    old = strength(0.5, s0, START, START + timedelta(days=365))
    fresh = strength(0.5, s0, START, START)
    assert old < 1e-10
    assert 0.5 <= retrieval_weight(old, 0.5) < retrieval_weight(fresh, 0.5)
    xs = np.array([0.0, 0.25, 0.5, 2.0])
    assert retrieval_weight_array(xs, 0.3).tolist() == pytest.approx([retrieval_weight(x, 0.3) for x in xs])


# --- the engine on a virtual clock ---------------------------------------------------------------
# Each memory below has words of its own, so a recall of one finds only that one. The tests of the
# type's decay store episodic memories (tier factor 1: docs/lifecycle.md), so the figures are the
# type's own; tests/engine/test_tiers.py has the factors.


def _strength(eng, memory_id: str) -> float:
    m = eng.get(memory_id)
    return decay.strength(m.importance, decay.memory_stability(m), m.last_recalled_at or m.created_at, eng.clock.now())


def _recall(eng, query: str, memory_id: str) -> None:
    hits = eng.recall(query, limit=1, mode="bm25")
    assert [h.memory.id for h in hits] == [memory_id]


def test_issue_example_spaced_recalls_survive_sixty_idle_days(eng, clock):
    # Issue 13: importance 0.8, recalled four times at spaced intervals, then idle 60 days.
    used = eng.store("The user is allergic to peanuts.", importance=0.8, tier="episodic").memory
    unused = eng.store("The printer on floor three jams on Wednesdays.", importance=0.8, tier="episodic").memory
    for gap in (2, 5, 10, 20):
        clock.advance(days=gap)
        _recall(eng, "peanuts allergic", used.id)
    clock.advance(days=60)
    s_used, s_unused = _strength(eng, used.id), _strength(eng, unused.id)
    assert eng.get(used.id).recall_count == 4
    assert decay.memory_stability(eng.get(used.id)) > 5 * decay.initial_stability("fact", 0.8)
    assert s_used > 0.3 > eng.settings.prune_threshold > s_unused
    report = run_maintenance(eng)
    assert unused.id in report["pruned_ids"] and used.id not in report["pruned_ids"]
    assert eng.get(used.id).content == "The user is allergic to peanuts."


def test_spaced_recalls_count_for_more_than_crammed_ones(eng, clock):
    spaced = eng.store("Spaced: the staging database lives in eu-west-1.", importance=0.5, tier="episodic").memory
    crammed = eng.store("Crammed: the vault unseal key has five shares.", importance=0.5, tier="episodic").memory
    for _ in range(4):  # four recalls within the first hour
        clock.advance(minutes=15)
        _recall(eng, "vault unseal shares", crammed.id)
    clock.set(START)
    for gap in (3, 6, 12, 24):  # four recalls spread over six weeks
        clock.advance(days=gap)
        _recall(eng, "staging database eu-west-1", spaced.id)
    s0 = decay.initial_stability("fact", 0.5)
    s_spaced = decay.memory_stability(eng.get(spaced.id))
    s_crammed = decay.memory_stability(eng.get(crammed.id))
    assert eng.get(spaced.id).recall_count == eng.get(crammed.id).recall_count == 4
    assert s_crammed < 1.1 * s0  # four crammed recalls: about where it started
    assert s_spaced > 8 * s0
    clock.advance(days=30)
    assert _strength(eng, spaced.id) > 10 * _strength(eng, crammed.id)


def test_used_keeps_and_unused_fades_over_120_days(eng, clock):
    facts = {
        "used": "Deploys go to Fly.io from the main branch.",
        "unused": "The office coffee machine descales on Fridays.",
        "once": "Lunch on day two was ramen with the design team.",
    }
    ids = {k: eng.store(v, importance=0.6).memory.id for k, v in facts.items()}
    day = 0
    for day in range(1, 121):
        clock.advance(days=1)
        if day % 10 == 0 and day <= 90:  # the agent needs its deploy fact every ten days, then not
            _recall(eng, "deploys Fly.io", ids["used"])
        if day == 2:
            _recall(eng, "ramen lunch design", ids["once"])
        if day % 12 == 0:
            run_maintenance(eng)
    alive = {m.id for m, _ in eng.store_db.iter_memory_rows() if m.status == "active"}
    assert ids["used"] in alive
    assert ids["unused"] not in alive and ids["once"] not in alive
    assert _strength(eng, ids["used"]) > 0.4  # 30 idle days after its last use
    assert eng.recall("deploys Fly.io", limit=1, reinforce=False)[0].memory.content == facts["used"]


def test_stability_survives_reopen_and_held_recall_counts(tmp_path, settings, fake, clock):
    from engram import Engram

    path = tmp_path / "s.duckdb"
    with Engram(path, settings=settings, embedder=fake, clock=clock) as eng:
        mid = eng.store("Backups run at 03:00 UTC to the cold bucket.", importance=0.5, tier="episodic").memory.id
        clock.advance(days=7)
        _recall(eng, "backups cold bucket", mid)
        clock.advance(days=7)
        _recall(eng, "backups cold bucket", mid)  # on top of the first, still held
        held = eng.get(mid)
    assert held.recall_count == 2 and held.stability is not None
    s0 = decay.initial_stability("fact", 0.5)
    first = decay.grown_stability(s0, START, START + timedelta(days=7))
    assert held.stability == pytest.approx(decay.grown_stability(first, START, START + timedelta(days=7)))
    with Engram(path, settings=settings, embedder=fake, clock=clock) as eng:
        again = eng.get(mid)
        assert (again.recall_count, again.stability) == (2, pytest.approx(held.stability))
        row = eng.index.row_of[mid]
        assert eng.index.stability[row] == pytest.approx(held.stability)


def test_storing_a_known_fact_again_is_a_spaced_use(eng, clock):
    first = eng.store("The user prefers dark mode.", importance=0.5).memory
    clock.advance(days=10)
    again = eng.store("The user prefers dark mode.", importance=0.5)
    assert again.action == "reinforce"
    assert again.memory.stability == pytest.approx(
        decay.grown_stability(decay.initial_stability("fact", 0.5), START, START + timedelta(days=10))
    )
    assert eng.get(first.id).stability == pytest.approx(again.memory.stability)


def test_a_hit_grows_by_its_share_of_the_answer(eng, clock):
    answer = eng.store("Alpha bravo charlie: the deploy checklist lives in the wiki.").memory
    # Shares most of the query (enough to pass the relevance floor and be a strong hit: over half
    # its IDF mass, which needs a store of more than two memories), but not all of it.
    along = eng.store("Alpha bravo team lunch is on Thursdays; bring the checklist.").memory
    for topic in ("printer", "parking", "coffee", "badges", "plants", "invoices", "backups", "laptops"):
        eng.store(f"The {topic} policy is on the intranet.")
    clock.advance(days=10)
    hits = eng.recall("alpha bravo charlie checklist", limit=2, mode="bm25")
    assert [h.memory.id for h in hits] == [answer.id, along.id]
    share = hits[1].score / hits[0].score
    assert 0 < share < 1
    s0 = decay.initial_stability("fact", 0.5)
    later = START + timedelta(days=10)
    assert eng.get(answer.id).stability == pytest.approx(decay.grown_stability(s0, START, later))
    assert eng.get(along.id).stability == pytest.approx(decay.grown_stability(s0, START, later, share))
    assert eng.get(along.id).stability < eng.get(answer.id).stability
