"""The paraphrase set (benchmarks.paraphrase_chat) holds what it promises: answers in short user
turns among long on-subject replies, questions that share no word of their evidence's key, the
same seed gives the same set."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from benchmarks import long_sessions, paraphrase_chat
from engram.text.tokens import tokenize

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "locomo" / "locomo10.json"
needs_data = pytest.mark.skipif(not DATA.exists(), reason=f"LoCoMo data not found at {DATA}")


@pytest.fixture(scope="module")
def doc():
    return paraphrase_chat.build(DATA)


@needs_data
def test_answers_sit_in_short_user_turns_among_long_replies(doc, tmp_path):
    turns = {t["id"]: t for s in doc["sessions"] for t in s["turns"]}
    assert len(turns) >= 2000
    long = [t for t in turns.values() if len(t["content"]) > 2000]
    assert all(t["role"] == "assistant" for t in long) and len(long) >= 0.3 * len(turns)
    dates = [datetime.fromisoformat(s["date"]) for s in doc["sessions"]]
    assert (max(dates) - min(dates)).days > 2 * 365 and dates == sorted(dates)
    answered = [q for q in doc["questions"] if q["evidence"]]
    assert len(answered) == paraphrase_chat.FACTS
    for q in answered:
        turn = turns[q["evidence"][0]]
        assert turn["role"] == "user" and len(turn["content"]) < 1000
        assert turn["content"].count(q["sentence"]) == 1
    near = [q for q in doc["questions"] if not q["evidence"]]
    assert len(near) == paraphrase_chat.NEAR
    assert len({q["question"] for q in doc["questions"]}) == len(doc["questions"])
    assert abs(Counter(q["half"] for q in answered)["tune"] - len(answered) / 2) <= len(answered) // 5
    path = tmp_path / "set.json"  # benchmarks.long_sessions reads it and checks every label
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert long_sessions.load_set(path)["seed"] == paraphrase_chat.SEED


def test_no_question_repeats_the_word_its_fact_turns_on():
    """A question names its fact's key in other words: the key's own words never appear in it."""
    for _topic, pool, fact, question in paraphrase_chat.TEMPLATES:
        for word, para in paraphrase_chat.POOLS[pool]:
            asked = set(tokenize(question.format(q=para)))
            assert not asked & set(tokenize(word)), (word, para, question)
            assert "{k}" in fact and "{q}" in question


@needs_data
def test_the_same_seed_gives_the_same_set_and_another_seed_another(doc):
    assert paraphrase_chat.build(DATA) == doc
    assert paraphrase_chat.build(DATA, seed=48)["questions"] != doc["questions"]
