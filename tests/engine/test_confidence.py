"""Strong and weak hits over a store: recall marks them with the evidence that decided, only
strong ones are reinforced, and what is pushed into a context unasked (get_context, the pinned
handoff) takes only strong ones. The second stage (rerank) reorders within its cap and leaves
the first stage's order in `explain`; its cross-encoder is replaced here by a scorer that reads
the words (the real one: tests/e2e/test_reranker_model.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engram import Engram
from engram.models.on_demand import OnDemand
from tests.conftest import memory_path

FACTS = [
    "The staging database is refreshed from production every Sunday night",
    "Lunch is at noon in the cafeteria",
    "Deploys go out on Tuesdays after review",
    "The office plants are watered by Anna",
    "Invoices are sent monthly by accounting",
    "The printer on floor two jams often",
]
CLEAR = "staging database refreshed Sunday night"
# Shares one or two words with several facts and answers none: plausible hits, none strong.
VAGUE = "what about the staging printer invoices plants lunch"


def store(e: Engram) -> list[str]:
    return [e.store(t).memory.id for t in FACTS]


def counts(e: Engram, ids) -> list[int]:
    return [e.get(i).recall_count for i in ids]


def test_recall_marks_each_hit_and_reinforces_only_strong_ones(eng):
    ids = store(eng)
    clear = eng.recall(CLEAR)
    assert clear[0].memory.id == ids[0]
    assert clear[0].confidence == "strong" and "words" in clear[0].evidence
    assert clear[0].to_dict()["confidence"] == "strong"
    vague = eng.recall(VAGUE)
    assert len(vague) >= 3 and {h.confidence for h in vague} == {"weak"}
    assert all(h.evidence for h in vague)
    # The clear query reinforced its strong hits; the vague one reinforced nothing.
    strong = {h.memory.id for h in clear if h.confidence == "strong"}
    assert counts(eng, ids) == [int(i in strong) for i in ids]


def test_get_context_and_strong_only_recall_leave_weak_hits_out(eng):
    ids = store(eng)
    assert eng.recall(VAGUE, strong_only=True) == []
    assert eng.context(VAGUE)["memory_ids"] == []
    packed = eng.context(CLEAR)["memory_ids"]
    assert ids[0] in packed
    strong = {h.memory.id for h in eng.recall(CLEAR, reinforce=False) if h.confidence == "strong"}
    assert set(packed) <= strong
    assert {i for i, c in zip(ids, counts(eng, ids)) if c} <= strong


def test_a_handoff_is_pinned_only_for_a_strong_hit(eng):
    store(eng)
    eng.handoff(summary="Moved the staging database refresh to Sunday night", next_steps=["check the cron"])
    assert eng.recall_context(VAGUE)["handoff"] is None
    got = eng.recall_context("staging database refresh Sunday night")
    assert got["handoff"] is not None and got["memories"][0]["confidence"] == "strong"


class WordScorer:
    """The cross-encoder's place: a high logit for a text holding `word`, a low one otherwise."""

    name = "word scorer"

    def __init__(self, word: str):
        self.word = word
        self.calls: list[int] = []

    def score(self, query, texts):
        self.calls.append(len(texts))
        return np.array([8.0 if self.word in t else -11.0 for t in texts])


@pytest.fixture
def reng(settings, fake, clock):
    e = Engram(
        memory_path(settings),
        settings=replace(settings, rerank=True, rerank_pairs=3, rerank_weight=5.0),
        embedder=fake,
        clock=clock,
    )
    yield e
    e.close()


def test_the_second_stage_reorders_within_its_cap_and_explain_keeps_the_first_order(reng):
    store(reng)
    # Equal logits: the first stage's order.
    reng.recaller.ce = OnDemand(lambda: WordScorer("no text holds this"), "scorer")
    first = reng.recall(VAGUE, reinforce=False, explain=True)
    assert [h.parts["first_rank"] for h in first[:3]] == [0.0, 1.0, 2.0]
    first = [h.memory.id for h in first]
    word = reng.get(first[2]).content.split()[1]  # in the third of the first stage's order
    reng.recaller.ce = OnDemand(lambda: WordScorer(word), "scorer")
    hits = reng.recall(VAGUE, reinforce=False, explain=True)
    assert word in hits[0].memory.content
    assert hits[0].parts["first_rank"] == 2.0 and "rerank" in hits[0].parts
    assert max(reng.recaller.ce.model.calls) <= 3
    assert sorted(h.memory.id for h in hits) == sorted(first)  # reordered, not refiltered
