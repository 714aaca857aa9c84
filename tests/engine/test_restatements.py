"""Restatements of one fact end as one memory: write-time resolution, then one consolidation run.

The set is tests/data/restatement_cases.json (benchmarks/restatements.py stores and scores it);
these run it through the engine with the real model, the one the figures come from.
"""

from __future__ import annotations

import pytest

from benchmarks.restatements import load_cases, run_cases, summary
from engram import Engram
from engram.admin.maintenance import run_maintenance
from tests.conftest import memory_path

STAGING = (
    "The staging database is refreshed from production every Sunday night.",
    "Every Sunday night the staging DB gets refreshed from prod.",
    "Staging database refresh from production happens on Sunday nights.",
)


@pytest.fixture
def real(settings, real_embedder, clock):
    e = Engram(memory_path(settings), settings=settings, embedder=real_embedder, clock=clock)
    yield e
    e.close()


def _texts(eng, memory_id: str) -> list[str]:
    """What a memory's history recorded it took in (reinforce, merge)."""
    return [e["detail"]["added"] for e in eng.history(memory_id) if "added" in (e["detail"] or {})]


@pytest.mark.model
def test_the_restatement_set_by_kind(real, clock):
    rows = run_cases(real, clock, load_cases())
    by_group = {g: [r for r in rows if r["group"] == g] for g in ("restatement", "detail", "counter")}
    assert len(rows) >= 40 and all(by_group.values())
    misses = [r["texts"] for r in by_group["restatement"] if not r["ok"]]
    report = summary(rows)["report"]
    assert report["one_memory_share"] >= 0.95, misses
    # Every restatement on either half: one memory, each text kept on it or its sources.
    assert len(misses) <= 1, misses
    # A new detail stays findable: it merged in as written or stands on its own.
    assert all(r["ok"] for r in by_group["detail"]), [r["texts"] for r in by_group["detail"] if not r["ok"]]
    # Same words, another fact: never reinforced into, merged with or consolidated with the old.
    merged = [(r["kind"], r["texts"], r["actions"]) for r in by_group["counter"] if r["merged"]]
    assert merged == []


@pytest.mark.model
def test_three_restatements_reinforce_one_memory_and_keep_their_texts(real):
    first = real.store(STAGING[0])
    assert first.action == "new"
    for text in STAGING[1:]:
        r = real.store(text)
        assert (r.action, r.memory.id) == ("reinforce", first.memory.id), r.reason
    mem = real.get(first.memory.id)
    assert mem.content == STAGING[0] and mem.recall_count == 2
    assert _texts(real, mem.id) == list(STAGING[1:])
    assert real.list_memories()["total"] == 1
    assert run_maintenance(real, apply=False)["clusters"] == []


@pytest.mark.model
def test_a_restatement_of_one_line_of_a_merged_memory_reinforces_it(real):
    real.store(STAGING[0])
    merged = real.store("The staging database is refreshed from production every Sunday night at 23:00 UTC.")
    assert merged.action == "merge"
    r = real.store(STAGING[1])
    assert (r.action, r.memory.id) == ("reinforce", merged.memory.id), r.reason
    assert real.list_memories()["total"] == 1


@pytest.mark.model
def test_consolidation_makes_what_write_time_let_through_one_memory(real, clock):
    # A merged memory, a restatement of it and two more, all stored past resolution (as an
    # older version or a store with resolve_conflicts=False leaves them).
    merged = STAGING[0] + "\nThe refresh takes about 40 minutes."
    ids = [real.store(t, resolve_conflicts=False).memory.id for t in (merged, *STAGING)]
    assert real.list_memories()["total"] == 4
    report = run_maintenance(real, apply=True)
    assert [sorted(c["sources"]) for c in report["clusters"]] == [sorted(ids)]
    (only,) = real.list_memories()["memories"]
    mem = real.get(only["id"])
    # The longest text, as written; the restatements are taken in, not appended.
    assert mem.content == merged
    assert sorted(mem.metadata["consolidated_from"]) == sorted(ids)
    assert {real.get(i).content for i in ids} == {merged, *STAGING}  # each source kept, retired
    assert run_maintenance(real, apply=False)["clusters"] == []


@pytest.mark.model
def test_same_words_another_fact_stay_apart_through_consolidation(real):
    kept = [
        (
            "The staging database is refreshed from production every Sunday night.",
            "The production database is refreshed from staging every Sunday night.",
        ),
        ("Alice reviews Bob's pull requests.", "Bob reviews Alice's pull requests."),
        ("The platform team owns the ingress controller.", "The ingress controller team owns the platform."),
    ]
    for i, (old, new) in enumerate(kept):
        user = f"u{i}"
        real.store(old, user_id=user)
        r = real.store(new, user_id=user)
        assert r.action == "new", r.reason
    run_maintenance(real, apply=True)
    for i, (old, new) in enumerate(kept):
        contents = {m["content"] for m in real.list_memories(user_id=f"u{i}")["memories"]}
        assert contents == {old, new}
