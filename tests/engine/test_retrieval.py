"""Hybrid retrieval beats each of its parts on a labelled set (real model)."""

import json
from pathlib import Path

import pytest

from engram import Engram

DATA = json.loads((Path(__file__).parents[1] / "data" / "retrieval_set.json").read_text())

CAUSES = [
    "the cache directory is read-only",
    "the disk is full",
    "the token expired",
    "DNS failed",
    "the schema is outdated",
    "the queue is full",
    "the certificate expired",
    "the port is taken",
]


def distractors():
    """A real store is full of look-alikes: other error codes, tickets, commits and flags."""
    out = []
    for i in range(40):
        out.append(f"Error E{1000 + i * 3} means {CAUSES[i % len(CAUSES)]}.")
        out.append(f"Ticket PAY-{2100 + i * 7} tracks the {CAUSES[(i + 3) % len(CAUSES)]} bug.")
        out.append(f"Commit {(0x1A2B3C4 + i * 7919) & 0xFFFFFFF:07x} changed the worker retry loop.")
        out.append(f"The feature flag checkout_v{3 + i} is on in staging.")
    return out


def mrr(eng, mode):
    ids = {m["key"]: m["id"] for m in DATA["memories"]}
    total, by_kind = 0.0, {}
    for q in DATA["queries"]:
        hits = [h.memory.id for h in eng.recall(q["query"], limit=10, mode=mode, reinforce=False)]
        rr = 1.0 / (hits.index(ids[q["answer"]]) + 1) if ids[q["answer"]] in hits else 0.0
        total += rr
        by_kind.setdefault(q["kind"], []).append(rr)
    return total / len(DATA["queries"]), {k: sum(v) / len(v) for k, v in by_kind.items()}


@pytest.mark.model
def test_hybrid_has_higher_mrr_than_either_part(settings, clock, real_embedder):
    eng = Engram(":memory:", settings=settings, embedder=real_embedder, clock=clock)
    for m in DATA["memories"]:
        m["id"] = eng.store(m["content"], resolve_conflicts=False).memory.id
    eng.store_many([dict(content=t, resolve_conflicts=False) for t in distractors()])
    scores = {mode: mrr(eng, mode) for mode in ("bm25", "vector", "hybrid")}
    print({mode: (round(s, 3), {k: round(v, 3) for k, v in kinds.items()}) for mode, (s, kinds) in scores.items()})
    assert scores["hybrid"][0] > scores["bm25"][0]
    assert scores["hybrid"][0] > scores["vector"][0]
    # Keywords alone cannot do paraphrases; meaning alone is weaker on exact tokens.
    assert scores["hybrid"][1]["paraphrase"] > scores["bm25"][1]["paraphrase"]
    eng.close()
