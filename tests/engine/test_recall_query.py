"""One query shape: a recall's question is one frozen RecallQuery, built once where the arguments
are checked and passed unchanged from engram.api down to search/ranking.rank; ranking answers with
named results (Ranked)."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import pytest

import engram.engine.recall
from engram.api import Api
from engram.core.bounds import MAX_TOKENS, RECALL_LIMIT
from engram.core.recall_query import RecallQuery
from engram.core.types import Ctx, EngramError, Scope
from engram.ops import OPS
from engram.search.ranking import Ranked, rank


def test_a_query_is_checked_and_normalised_once_when_built():
    q = RecallQuery("deploy target", tags="ops", exclude_types=["episode"], as_of=datetime(2025, 3, 1))
    assert q.tags == ("ops",)  # one string is one tag, not its characters
    assert q.exclude_types == ("episode",)
    assert q.as_of is not None and q.as_of.tzinfo is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.limit = 5  # type: ignore[misc]
    for bad, message in (
        ({"limit": 0}, "limit must be a whole number from 1 to 1000"),
        ({"limit": True}, "limit must be a whole number"),
        ({"mode": "fuzzy"}, "mode must be one of hybrid, bm25, vector"),
        ({"memory_type": "note"}, "memory_type must be one of"),
        ({"exclude_types": ("note",)}, "memory_type must be one of"),
    ):
        with pytest.raises(EngramError, match=message):
            RecallQuery("deploy target", **bad)
    with pytest.raises(EngramError, match="query must not be empty"):
        RecallQuery("  ")
    # RecallQuery.of: the text with fields, or a query (with fields replaced, checked again)
    assert RecallQuery.of("x", limit=3) == RecallQuery("x", limit=3)
    assert RecallQuery.of(q) is q
    assert RecallQuery.of(q, limit=3).limit == 3 and RecallQuery.of(q, limit=3).tags == ("ops",)
    with pytest.raises(EngramError, match="limit"):
        RecallQuery.of(q, limit=0)


def test_the_operations_and_the_engine_read_one_table_of_bounds(eng):
    # The declaration states the bound the engine checks: both come from engram.core.bounds.
    limit = OPS["recall_memory"].param("limit")
    assert (limit.ge, limit.le) == (RECALL_LIMIT.low, RECALL_LIMIT.high)
    tokens = OPS["get_context"].param("max_tokens")
    assert (tokens.ge, tokens.le) == (MAX_TOKENS.low, MAX_TOKENS.high)
    # A library caller, who skips the declarations, meets the same bounds.
    with pytest.raises(EngramError, match="limit must be a whole number from 1 to 1000"):
        eng.recall("deploy", limit=1001)
    with pytest.raises(EngramError, match="max_tokens must be a whole number from 50 to 100000"):
        eng.get_context("deploy", max_tokens=49)


def test_recall_memorys_query_travels_from_the_api_to_the_ranking_as_one_object(eng, monkeypatch):
    built, ranked = [], []
    real_recall_memory, real_rank = eng.recall_memory, engram.engine.recall.rank

    def recall_memory(q, **kw):
        built.append(q)
        return real_recall_memory(q, **kw)

    def counted(index, q, *args, **kwargs):
        ranked.append(q)
        return real_rank(index, q, *args, **kwargs)

    monkeypatch.setattr(eng, "recall_memory", recall_memory)
    monkeypatch.setattr(engram.engine.recall, "rank", counted)
    eng.store_memory("Deploys go to Fly.io from the main branch", tags=["ops"], project="p")
    out = Api(eng).call(
        "recall_memory", {"query": "where do deploys go", "tags": ["ops"], "limit": 3}, Ctx("s-1", project="p")
    )
    assert [m["content"] for m in out["memories"]] == ["Deploys go to Fly.io from the main branch"]
    (q,) = built
    assert ranked == [q] and ranked[0] is q  # the same object, not the arguments restated
    assert (q.text, q.limit, q.tags, q.scope) == ("where do deploys go", 3, ("ops",), Scope.of("p"))


def test_ranking_answers_with_named_results(eng):
    eng.store_memory("Deploys go to Fly.io from the main branch")
    eng.store_memory("The invoice CSV uses semicolons as separators")
    idx = eng.index
    mask = idx.mask(eng.user_of(None), None, None, None, None)
    q = RecallQuery("invoice csv separators", mode="bm25")
    got = rank(idx, q, None, mask, 0.0, weights=eng.weights, candidates=5)
    assert got and all(isinstance(t, Ranked) for t in got)
    best = got[0]
    assert idx.texts[best.row] == "The invoice CSV uses semicolons as separators"
    assert best.score == best.parts["base"] + best.parts["graph"] and best.parts["floor"] == 1.0
