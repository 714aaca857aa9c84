"""The long-session set (tests/data/long_sessions.json): its labels hold what it promises, and
benchmarks.long_sessions scores turns, not chunks."""

from __future__ import annotations

import json

import pytest

from benchmarks import long_sessions
from engram.core.settings import Settings
from engram.text.chunking import split_chunks

DATA = long_sessions.load_set(long_sessions.default_set_path())
TURNS = {t["id"]: t for s in DATA["sessions"] for t in s["turns"]}


ANSWERED = [q for q in DATA["questions"] if q["evidence"]]


def test_every_question_is_answered_by_one_sentence_of_one_long_assistant_turn():
    for q in ANSWERED:
        assert len(q["evidence"]) == 1, q["question"]
        turn = TURNS[q["evidence"][0]]
        assert turn["role"] == "assistant"
        assert len(turn["content"].split()) >= 300, q["question"]  # several hundred words
        assert turn["content"].count(q["sentence"]) == 1
        # One sentence: the label names a part of one sentence, not a span across two.
        assert ". " not in q["sentence"].rstrip(".")


def test_the_turns_are_long_enough_to_be_chunked_and_the_halves_are_even():
    size = Settings().chunk_size
    assistant = [t for t in TURNS.values() if t["role"] == "assistant"]
    assert all(len(split_chunks(t["content"], size)) >= 2 for t in assistant)
    for sel in (ANSWERED, [q for q in DATA["questions"] if not q["evidence"]]):
        halves = [q["half"] for q in sel]
        assert halves.count("tune") == halves.count("report") >= 6
    assert len({q["question"] for q in DATA["questions"]}) == len(DATA["questions"])


def test_a_bad_label_is_refused_by_name(tmp_path):
    bad = json.loads(json.dumps(DATA))
    bad["questions"][0]["sentence"] = "A sentence no turn holds."
    path = tmp_path / "set.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(ValueError, match="its sentence is in none of its evidence turns"):
        long_sessions.load_set(path)
    bad["questions"][0]["evidence"] = ["s99:t1"]
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(ValueError, match="unknown turn 's99:t1'"):
        long_sessions.load_set(path)


def test_a_hit_on_any_chunk_counts_for_its_turn():
    from engram import Engram
    from engram.models.embedding import FakeEmbedder

    doc = {"sessions": [DATA["sessions"][0]], "questions": []}
    eng = Engram(":memory:", embedder=FakeEmbedder())
    try:
        stored = long_sessions.store_sessions(eng, doc)
        hits = eng.recall("replication slot keeps WAL around", user_id=long_sessions.USER, reinforce=False, mode="bm25")
    finally:
        eng.close()
    assert stored > len(doc["sessions"][0]["turns"])  # the long turns were chunked
    assert hits and set(hits[0].memory.provenance) == {"s01:t3"}
    assert "abandoned replication slot" in hits[0].memory.content  # the chunk, carrying its turn


@pytest.mark.parametrize("late", [True, False])
def test_the_report_gives_the_token_vectors_kept_per_memory_when_late_interaction_keeps_them(late):
    from engram.models.embedding import FakeEmbedder

    first = DATA["sessions"][0]
    doc = {
        "sessions": [first],
        "questions": [q for q in DATA["questions"] if any(e.startswith(first["id"] + ":") for e in q["evidence"])],
    }
    result = long_sessions.run_long_sessions(doc, settings=Settings(late_interaction=late), embedder=FakeEmbedder())
    size = result["token_vectors_bytes_per_memory"]
    text = long_sessions.markdown(result)
    if late:
        # int8 token vectors of 128 dims: at least one window's worth of word pieces per memory.
        assert size > 128 * 16
        assert f"{size:,.0f} bytes per memory holding them" in text
    else:
        assert size == 0 and "bytes per memory" not in text
    assert result["table"]["all"]["n"] == len(doc["questions"])
