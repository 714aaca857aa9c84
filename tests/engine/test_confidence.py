"""Strong and weak hits over a store: recall marks them, only strong ones are reinforced, and what
is pushed into a context unasked (get_context, the pinned handoff) takes only strong ones.

The cross-encoder is replaced by a scorer that reads the words (the real one is tested in
tests/e2e/test_reranker_model.py); the first stage and the store are the engine's own."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engram import Engram
from engram.retrieve import STRONG_LOGIT

from conftest import memory_path


class WordScorer:
    """A logit per text: strong when the text holds `strong_word`, plausible but weak otherwise."""

    name = "word scorer"

    def __init__(self, strong_word: str):
        self.strong_word = strong_word
        self.calls: list[int] = []

    def score(self, query, texts):
        self.calls.append(len(texts))
        return np.array([STRONG_LOGIT + 5 if self.strong_word in t else STRONG_LOGIT - 1 for t in texts])


@pytest.fixture
def reng(settings, fake, clock):
    e = Engram(memory_path(settings), settings=replace(settings, rerank=True, rerank_pairs=5),
               embedder=fake, clock=clock)
    yield e
    e.close()


def recall_counts(e: Engram, ids) -> dict[str, int]:
    return {i: e.get(i).recall_count for i in ids}


def test_recall_marks_hits_and_reinforces_only_strong_ones(reng):
    a = reng.store("The staging database is refreshed from production every Sunday night").memory.id
    b = reng.store("The staging cluster runs on three nodes in Frankfurt").memory.id
    reng._ce = WordScorer("Sunday")
    hits = reng.recall("staging database refresh", explain=True)
    by_id = {h.memory.id: h for h in hits}
    assert by_id[a].confidence == "strong" and by_id[b].confidence == "weak"
    assert hits[0].memory.id == a
    assert by_id[a].to_dict()["confidence"] == "strong"
    assert "first_rank" in by_id[a].parts and "rerank" in by_id[a].parts
    assert recall_counts(reng, [a, b]) == {a: 1, b: 0}
    assert reng._ce.calls and max(reng._ce.calls) <= 5  # capped at rerank_pairs


def test_strong_only_recall_and_get_context_leave_weak_hits_out(reng):
    a = reng.store("The staging database is refreshed from production every Sunday night").memory.id
    b = reng.store("The staging cluster runs on three nodes in Frankfurt").memory.id
    reng._ce = WordScorer("Sunday")
    assert [h.memory.id for h in reng.recall("staging", strong_only=True, reinforce=False)] == [a]
    ctx = reng.context("staging")
    assert ctx["memory_ids"] == [a]
    assert b not in ctx["memory_ids"]
    reng._ce = WordScorer("nothing-holds-this")
    assert reng.context("staging")["memory_ids"] == []
    assert recall_counts(reng, [a, b]) == {a: 1, b: 0}  # the first context only


def test_a_handoff_is_pinned_only_when_strong(reng):
    reng.handoff(summary="Moved the staging refresh job to Sunday night", next_steps=["check the cron"])
    reng._ce = WordScorer("nothing-holds-this")
    assert reng.recall_context("staging refresh job")["handoff"] is None
    reng._ce = WordScorer("Sunday")
    got = reng.recall_context("staging refresh job")
    assert got["handoff"] is not None and got["memories"][0]["confidence"] == "strong"


def test_without_the_second_stage_every_hit_is_strong_by_the_floor(eng):
    a = eng.store("The staging database is refreshed from production every Sunday night").memory.id
    hits = eng.recall("staging database refreshed from production")
    assert [h.memory.id for h in hits] == [a] and hits[0].confidence == "strong"
