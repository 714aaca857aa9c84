"""Time and speaker cues in ranking: date ranges a query names, opening labels, "when" questions."""

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from engram import Engram
from engram.search.memory_index import to_days
from engram.text.dates import asks_when, match, mentions_time, query_dates


def day(y, m, d):
    return to_days(datetime(y, m, d, 12, tzinfo=timezone.utc))


@pytest.mark.parametrize(
    "text,inside,outside",
    [
        ("What did we decide on October 13, 2023?", [day(2023, 10, 13), day(2023, 10, 14)], [day(2023, 10, 16)]),
        ("notes from 13 Oct 2023", [day(2023, 10, 13)], [day(2023, 11, 13)]),
        ("the 2023-10-13 release", [day(2023, 10, 12)], [day(2023, 10, 20)]),
        ("what happened in October 2023", [day(2023, 10, 1), day(2023, 10, 31)], [day(2023, 11, 1), day(2022, 10, 5)]),
        ("camping in June", [day(2021, 6, 3), day(2023, 6, 30)], [day(2023, 7, 1)]),
        ("anything in 2022?", [day(2022, 1, 1), day(2022, 12, 31)], [day(2023, 1, 1)]),
    ],
)
def test_query_dates_select_the_named_range(text, inside, outside):
    sel = query_dates(text)
    assert sel
    assert match(sel, np.array(inside)).all()
    assert not match(sel, np.array(outside)).any()


@pytest.mark.parametrize(
    "text",
    ["What may I do next?", "May I ask a question?", "the mar on the table", "no dates here", "February 30, 2023"],
)
def test_words_that_are_not_dates_select_nothing(text):
    assert query_dates(text) == []


def test_when_questions_and_time_mentions():
    assert asks_when("When did the deploy break?") and asks_when("what date was the launch")
    assert not asks_when("Whenever it rains, what breaks?") and not asks_when("Why did it break?")
    assert mentions_time("I fixed it yesterday") and mentions_time("We met two weeks ago")
    assert mentions_time("The launch is on 3 May 2024")
    assert not mentions_time("The deploy pipeline uses canary releases")


@pytest.fixture
def plain(settings):
    """No context window and no relevance floor (see test_relevance): each memory stands alone
    and every match counts, so the cue is the only difference."""
    return replace(settings, context_window=0, relevance_cosine=-1.0, relevance_coverage=0.0)


def test_memory_written_on_the_named_date_ranks_first(plain, fake, clock):
    eng = Engram(":memory:", settings=plain, embedder=fake, clock=clock)
    t0 = datetime(2024, 3, 3, 10, tzinfo=timezone.utc)
    a = eng.store("Decided the rollout plan for the billing service", created_at=t0, resolve_conflicts=False).memory
    b = eng.store(
        "Decided the rollout plan for the search service", created_at=t0 + timedelta(days=20), resolve_conflicts=False
    ).memory
    hits = eng.recall("What rollout plan did we decide on 3 March 2024?", explain=True, reinforce=False)
    assert hits[0].memory.id == a.id and hits[0].parts["date"] == plain.date_bonus
    assert {h.memory.id: h.parts["date"] for h in hits}[b.id] == 0.0
    off = Engram(":memory:", settings=replace(plain, date_bonus=0.0), embedder=fake, clock=clock)
    off.store("x", created_at=t0)
    assert off.recall("x on 3 March 2024", explain=True, reinforce=False)[0].parts["date"] == 0.0
    eng.close(), off.close()


def test_opening_label_named_in_the_query_gets_the_speaker_bonus(plain, fake, clock):
    eng = Engram(":memory:", settings=plain, embedder=fake, clock=clock)
    ann = eng.store("Ann: the staging database moves to the new cluster", resolve_conflicts=False).memory
    bob = eng.store("Bob: the staging database moves to the new cluster next", resolve_conflicts=False).memory
    hits = {
        h.memory.id: h
        for h in eng.recall("What did Ann say about the staging database?", explain=True, reinforce=False)
    }
    assert hits[ann.id].parts["speaker"] == plain.speaker_bonus
    assert hits[bob.id].parts["speaker"] == 0.0
    assert hits[ann.id].score > hits[bob.id].score
    eng.close()


def test_a_captured_episodes_role_label_is_no_speaker(plain, fake, clock):
    # Every captured episode opens with "User:" (engram.workflows.capture): a question about what
    # the user wants must not lift every episode above the fact that answers it.
    eng = Engram(":memory:", settings=plain, embedder=fake, clock=clock)
    eng.weights = replace(eng.weights, hit_share=0.0, hit_cosine=-2.0, hit_coverage=0.0)  # every hit returned
    fact = eng.store("The user wants tests run with pytest -x", resolve_conflicts=False).memory
    ep = eng.store(
        "User: next: ran the unit tests\nAssistant: Ran the unit tests at 10:15; 87 passed.",
        memory_type="episode",
        conversation="s1",
        resolve_conflicts=False,
    ).memory
    labelled = eng.store("User: the staging tests run nightly", resolve_conflicts=False).memory
    hits = {
        h.memory.id: h for h in eng.recall("which flags does the user like for tests", explain=True, reinforce=False)
    }
    assert hits[ep.id].parts["speaker"] == 0.0
    assert hits[fact.id].parts["speaker"] == 0.0
    assert hits[labelled.id].parts["speaker"] == plain.speaker_bonus  # a label of any other memory still counts
    eng.close()


def test_when_question_prefers_a_memory_that_says_when(plain, fake, clock):
    eng = Engram(":memory:", settings=plain, embedder=fake, clock=clock)
    timed = eng.store("The payment outage happened yesterday evening", resolve_conflicts=False).memory
    other = eng.store("The payment outage happened in the eu region", resolve_conflicts=False).memory
    hits = {h.memory.id: h for h in eng.recall("When did the payment outage happen?", explain=True, reinforce=False)}
    assert hits[timed.id].parts["when"] == plain.when_bonus and hits[other.id].parts["when"] == 0.0
    plainq = {h.memory.id: h for h in eng.recall("Where did the payment outage happen?", explain=True, reinforce=False)}
    assert plainq[timed.id].parts["when"] == 0.0
    eng.close()


def test_cues_apply_to_hybrid_search_only(plain, fake, clock):
    eng = Engram(":memory:", settings=plain, embedder=fake, clock=clock)
    # The fake embedder's cosines are hash collisions: let every hit pass the floor.
    eng.weights = replace(eng.weights, hit_share=0.0, hit_cosine=-2.0, hit_coverage=0.0)
    eng.store("Ann: lunch was ramen", created_at=datetime(2024, 3, 3, 12, tzinfo=timezone.utc))
    q = "When did Ann have ramen on 3 March 2024?"
    hybrid = eng.recall(q, explain=True, reinforce=False)[0].parts
    assert hybrid["date"] > 0 and hybrid["speaker"] > 0 and hybrid["when"] == 0.0
    for mode in ("bm25", "vector"):
        p = eng.recall(q, mode=mode, explain=True, reinforce=False)[0].parts
        assert p["date"] == p["speaker"] == p["when"] == 0.0
    eng.close()
