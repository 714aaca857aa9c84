"""The generated long-conversation set (benchmarks.long_chat) holds what it promises, the same
seed gives the same set, and the plain-cosine baseline ranks by cosine alone."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from benchmarks import long_chat, long_sessions
from benchmarks.plain_cosine import PlainCosine
from engram.models.embedding import FakeEmbedder

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "locomo" / "locomo10.json"
needs_data = pytest.mark.skipif(not DATA.exists(), reason=f"LoCoMo data not found at {DATA}")


@pytest.fixture(scope="module")
def doc():
    return long_chat.build(DATA)


@needs_data
def test_the_set_has_the_held_out_benchmarks_shape(doc, tmp_path):
    turns = {t["id"]: t for s in doc["sessions"] for t in s["turns"]}
    assert len(turns) >= 5000 and len(doc["sessions"]) >= 300
    dates = [datetime.fromisoformat(s["date"]) for s in doc["sessions"]]
    assert (max(dates) - min(dates)).days > 2 * 365 and dates == sorted(dates)
    answered = [q for q in doc["questions"] if q["evidence"]]
    assert Counter(q["role"] for q in answered) == {"user": 150, "assistant": 150}
    for q in answered:
        turn = turns[q["evidence"][0]]
        assert turn["role"] == q["role"] and turn["content"].count(q["sentence"]) == 1
        if q["role"] == "assistant":  # the answer is one sentence of a reply of thousands of characters
            assert len(turn["content"]) >= 1400
        else:  # the long reply right after it is on the user's subject, without the answer
            sid, t = q["evidence"][0].split(":t")
            reply = turns[f"{sid}:t{int(t) + 1}"]["content"]
            assert len(reply) >= 1400 and q["sentence"] not in reply
            assert q["key"] in q["question"] and q["key"] in reply.split("\n\n")[0], q["question"]
    near = [q for q in doc["questions"] if not q["evidence"]]
    assert len(near) >= 40
    assert len({q["question"] for q in doc["questions"]}) == len(doc["questions"])
    for sel in (answered, near):
        halves = Counter(q["half"] for q in sel)
        assert abs(halves["tune"] - halves["report"]) <= len(sel) // 5
    path = tmp_path / "set.json"  # benchmarks.long_sessions reads it and checks every label
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert long_sessions.load_set(path)["seed"] == long_chat.SEED


@needs_data
def test_the_same_seed_gives_the_same_set_and_another_seed_another(doc):
    assert long_chat.build(DATA) == doc
    assert long_chat.build(DATA, seed=41)["questions"] != doc["questions"]


def test_plain_cosine_ranks_keys_by_cosine_alone():
    texts = ["the ferry leaves at noon", "a recipe for lemon cake", "ferry times to the island"]
    plain = PlainCosine(FakeEmbedder(), texts, ["a", "b", "c"])
    emb = FakeEmbedder()
    q = emb.embed_query("ferry times")
    want = np.argsort(-(emb.embed_batch(texts) @ q), kind="stable")
    assert plain.search("ferry times", 2) == [["a", "b", "c"][i] for i in want[:2]]
    with pytest.raises(ValueError, match="one key per text"):
        PlainCosine(FakeEmbedder(), texts, ["a"])
