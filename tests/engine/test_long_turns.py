"""Recall over long conversation turns (issue 40): a long turn is one hit however many chunks it
was cut into, and what is meant for short chat lines does not blur long ones."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import ClassVar

from engram import Engram

WHEN = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
PARAGRAPH = (
    "The lighthouse keeper logged the weather every hour and wrote the ferry times in the "
    "margin of the harbour book, which the harbour office kept for ten years. "
)


def test_a_long_turn_is_one_hit_and_leaves_the_other_places_to_other_turns(eng):
    long_turn = PARAGRAPH * 30  # about 5,000 characters: several chunks, each about the harbour
    results = eng.store_many(
        [{"content": long_turn, "conversation": "c1", "created_at": WHEN, "provenance": ("c1:t1",)}]
        + [
            {
                "content": f"The harbour book {i} lists the ferry times for the island route.",
                "conversation": f"c{i + 2}",
                "created_at": WHEN + timedelta(days=i),
                "provenance": (f"c{i + 2}:t0",),
            }
            for i in range(4)
        ]
    )
    assert len(results[0].chunks) >= 4
    for mode in ("bm25", "vector", "hybrid"):
        hits = eng.recall("harbour book ferry times", limit=5, mode=mode, reinforce=False)
        turns = [h.memory.provenance for h in hits]
        assert len(turns) == len(set(turns)), (mode, turns)  # no turn twice
        assert ("c1:t1",) in turns, mode
        assert len(hits) == 5, mode  # the long turn's other chunks gave their places away


def test_the_best_chunk_stands_for_its_turn(eng):
    filler = "The committee met on Tuesday and discussed the budget for the coming year at length. " * 14
    text = filler + "The spare key is hidden under the blue flowerpot by the back door. " + filler
    r = eng.store(text, conversation="c1", created_at=WHEN)
    hits = eng.recall("where is the spare key hidden", limit=3, mode="bm25", reinforce=False)
    assert hits and hits[0].memory.id in r.chunks
    assert "spare key" in hits[0].memory.content  # the chunk that holds the answer, not the first


def test_long_texts_outside_conversations_are_one_hit_too(settings, fake, clock):
    eng = Engram(":memory:", settings=settings, embedder=fake, clock=clock)
    try:
        eng.store(PARAGRAPH * 20)
        eng.store("The harbour office opens at eight.")
        hits = eng.recall("harbour office", limit=10, mode="bm25", reinforce=False)
    finally:
        eng.close()
    groups = [h.memory.metadata.get("chunk_group") for h in hits]
    assert len(hits) == 2 and len([g for g in groups if g]) == 1


def test_a_turn_is_kept_as_said_and_never_replaces_or_joins_another(eng, clock):
    """Turns of conversations are records of what was said: the later one on the same subject
    replaces nothing (outside a conversation the same two texts are an update)."""
    first = eng.store("The API timeout is 30 seconds.", conversation="c1", created_at=WHEN)
    later = eng.store("The API timeout is 60 seconds.", conversation="c2", created_at=WHEN + timedelta(days=3))
    assert (first.action, later.action) == ("new", "new")
    assert eng.get(first.memory.id).status == "active"
    turns = {h.memory.id for h in eng.recall("API timeout", mode="bm25", reinforce=False)}
    assert turns == {first.memory.id, later.memory.id}
    fact = eng.store("The API timeout is 30 seconds.")  # a statement, not a turn: resolved as before
    assert eng.store("The API timeout is 60 seconds.").action == "replace"
    assert eng.get(fact.memory.id).status == "superseded"


def test_the_same_turn_stored_again_is_one_turn_but_the_same_words_elsewhere_are_another(eng):
    a = eng.store("Sounds good, see you at the lake on Saturday!", conversation="c1", created_at=WHEN)
    again = eng.store("Sounds good, see you at the lake on Saturday!", conversation="c1", created_at=WHEN)
    elsewhere = eng.store("Sounds good, see you at the lake on Saturday!", conversation="c2", created_at=WHEN)
    assert again.action == "reinforce" and again.memory.id == a.memory.id
    assert elsewhere.action == "new" and elsewhere.memory.id != a.memory.id


def test_a_turn_weighs_the_same_whatever_its_age_or_use(eng, clock):
    """Neither age nor reinforcement moves a turn's decay weight off the floor; a statement
    recalled a moment ago weighs above it (decay demotes what faded)."""
    old = eng.store(
        "We planted the apple tree by the north fence.", conversation="c1", created_at=clock.now() - timedelta(days=900)
    ).memory
    new = eng.store(
        "We planted the pear tree by the south fence.", conversation="c2", created_at=clock.now() - timedelta(hours=2)
    ).memory
    fact = eng.store("The plum tree grows by the east fence.").memory
    for _ in range(3):  # reinforcing: each strong hit is touched now
        eng.recall("apple tree north fence", mode="vector")
    floor = eng.settings.decay_floor
    hits = {h.memory.id: h for h in eng.recall("tree by the fence", explain=True, reinforce=False, mode="vector")}
    assert hits[old.id].parts["decay"] == hits[new.id].parts["decay"] == floor
    assert eng.get(old.id).recall_count >= 1  # reinforced all the same (it keeps the turn from fading)
    assert hits[fact.id].parts["decay"] > floor


class _Placed:
    """An embedder putting each text where its marker word says: the query on axis 0, a text
    with `closeness` c on axis 0 at cosine c (the rest of it on an axis of its own)."""

    name, dim, backend = "placed", 8, "fake"
    # The first word found counts.
    closeness: ClassVar[dict] = {"standout": (0.90, 3), "answerturn": (0.60, 1), "replypart": (0.62, 2)}

    def _one(self, text: str):
        import numpy as np

        v = np.zeros(self.dim, dtype=np.float32)
        for word, (c, axis) in self.closeness.items():
            if word in text.lower():
                v[0], v[axis] = c, (1 - c * c) ** 0.5
                return v
        v[7] = 1.0  # anything else (the reference texts): unrelated to the query
        return v

    def embed_batch(self, texts):
        import numpy as np

        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, self.dim), dtype=np.float32)

    def embed_query(self, text):
        import numpy as np

        return np.eye(self.dim, dtype=np.float32)[0]


def test_a_long_reply_does_not_outrank_a_closer_short_turn_by_its_many_chunks(settings, clock):
    """Nine chunks each a little closer than the short turn that answers: the reply's best chunk
    is close by chance as often as it has chunks, so it ranks below; one chunk far closer than
    the short turn still ranks first (the answer in one sentence of a long reply is found)."""
    reply = " ".join(f"The replypart paragraph {i} goes on about the subject at some length." for i in range(120))
    standout = reply.replace("replypart paragraph 60 ", "standout paragraph 60 ", 1)
    eng = Engram(":memory:", settings=settings, embedder=_Placed(), clock=clock)
    try:
        short = eng.store("The answerturn says it in a line.", conversation="c1", created_at=WHEN)
        long = eng.store(reply, conversation="c2", created_at=WHEN)
        assert len(long.chunks) >= 8
        hits = eng.recall("where is it", mode="vector", limit=2, reinforce=False, explain=True)
        assert hits[0].memory.id == short.memory.id
        assert hits[1].memory.id in long.chunks
        assert hits[1].parts["cosine"] > hits[0].parts["cosine"]  # its own cosine is still shown as it is
        other = eng.store(standout, conversation="c3", created_at=WHEN)
        first = eng.recall("where is it", mode="vector", limit=1, reinforce=False)[0]
        assert first.memory.id in other.chunks and "standout" in first.memory.content
    finally:
        eng.close()
