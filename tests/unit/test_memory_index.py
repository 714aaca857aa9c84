"""The bounded vector search (MemoryIndex.top_cosine) must give what a full scan gives."""

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from engram import Engram
from engram.core.types import Memory
from engram.search import memory_index as index_mod
from engram.search.memory_index import MemoryIndex

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _vectors(rng, n, dim=384, rank=24):
    # Real embeddings have most of their energy in few directions; so do these.
    basis = rng.standard_normal((rank, dim))
    x = rng.standard_normal((n, rank)) @ basis + 0.3 * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _memory(i, user, mtype):
    return Memory(
        id=f"m{i}",
        content=f"memory {i}",
        memory_type=mtype,
        importance=0.5,
        recall_count=0,
        created_at=T0 + timedelta(seconds=i),
        last_recalled_at=None,
        user_id=user,
        task_id=None,
        session_id=None,
        tags=(),
        metadata={},
        provenance=(),
        status="active",
        valid_from=T0,
        conversation="c",
    )


def _exact(idx, q, mask, k, name="search"):
    s = getattr(idx, name)[: idx.n] @ q
    rows = np.flatnonzero(mask[: idx.n])
    order = np.lexsort((rows, -s[rows]))[:k]
    return rows[order], s[rows][order]


def _check(idx, q, mask, k, name="search"):
    got_rows, got = idx.top_cosine(q, mask, k, name)
    want_rows, want = _exact(idx, q, mask, k, name)
    assert np.allclose(got, want, atol=1e-5)
    assert set(got_rows) == set(want_rows) or np.allclose(got[-1], want[-1], atol=1e-5)


@pytest.mark.parametrize("context", [0, 2])
def test_bounded_search_equals_a_full_scan(context):
    rng = np.random.default_rng(3)
    vecs = _vectors(rng, 3000)
    idx = MemoryIndex(384, 64, context_window=context, context_weight=0.5, bounded_min_rows=1000)
    for i, v in enumerate(vecs[:2500]):
        idx.upsert(_memory(i, "alice" if i % 5 else "bob", "fact" if i % 3 else "strategy"), v)
    assert idx.basis is not None and idx._fit_rows == 2000  # fitted at 1000, again at 2000
    queries = [vecs[7] + 0.05 * rng.standard_normal(384).astype(np.float32)] + list(_vectors(rng, 20))
    alice = idx.mask("alice")
    facts = idx.mask("alice", memory_type="fact")
    bob = idx.mask("bob")
    for q in queries:
        for mask in (alice, facts, bob):
            for k in (5, 50):
                _check(idx, q, mask, k)
                _check(idx, q, mask, k, "vectors")
        # Several masks at once (what a store asks for) give what each would alone.
        for mask, (rows, s) in zip((alice, facts, bob), idx.nearest(q, [alice, facts, bob], 20)):
            _, want = _exact(idx, q, mask, 20)
            assert np.allclose(s, want, atol=1e-5) and len(rows) == 20

    # Forget the nearest rows and add more: projections stay in step with every write.
    near, _ = idx.top_cosine(queries[0], alice, 30)
    for r in near:
        idx.remove(idx.ids[r])
    for i, v in enumerate(vecs[2500:], start=2500):
        idx.upsert(_memory(i, "alice", "fact"), v)
    alice = idx.mask("alice")
    assert not set(near) & set(idx.top_cosine(queries[0], alice, 50)[0])
    for q in queries:
        _check(idx, q, alice, 50)
        _check(idx, q, alice, 10, "vectors")


def test_bulk_load_fits_the_subspace_and_matches(tmp_path):
    rng = np.random.default_rng(5)
    vecs = _vectors(rng, 1500)
    idx = MemoryIndex(384, 2048, bounded_min_rows=1000)
    idx.load((_memory(i, "u", "fact"), v) for i, v in enumerate(vecs))
    assert idx.basis is not None
    q = _vectors(rng, 1)[0]
    _check(idx, q, idx.mask("u"), 50)


def test_recall_and_store_use_it_with_the_same_results(settings, fake, clock, monkeypatch):
    """Through the engine: the vector ranking and the write-time resolution see what an exact
    search sees, once the bounded search is in use."""
    monkeypatch.setattr(index_mod, "BOUNDED_MIN_ROWS", 100)
    eng = Engram(":memory:", settings=replace(settings, context_window=0), embedder=fake, clock=clock)
    texts = [f"note {i} about topic {i % 7} item {i % 11} and part {i % 13}" for i in range(400)]
    eng.store_many([dict(content=t, resolve_conflicts=False) for t in texts])
    assert eng.index.basis is not None
    q = "topic 3 item 5 part 2"
    qv = fake.embed_query(q)
    hits = eng.recall(q, mode="vector", limit=10, reinforce=False)
    mask = eng.index.mask("default")
    rows, _ = _exact(eng.index, qv, mask, 10)
    assert [h.memory.id for h in hits] == [eng.index.ids[r] for r in rows]
    # A store that repeats a memory finds it (reinforce), through the bounded path.
    again = eng.store(texts[123])
    assert again.action == "reinforce" and again.memory.content == texts[123]
    eng.close()


@pytest.mark.parametrize("bounded", [False, True])
def test_match_is_the_nearer_of_a_turns_own_vector_and_its_mixed_one(bounded):
    """By meaning a turn is as close as the nearer of its own vector and its context-mixed one;
    top_match gives what a full scan of that larger score gives, bounded search or not."""
    rng = np.random.default_rng(5)
    vecs = _vectors(rng, 1500)
    idx = MemoryIndex(384, 64, context_window=2, context_weight=0.5, bounded_min_rows=1000 if bounded else None)
    for i, v in enumerate(vecs):
        idx.upsert(_memory(i, "alice", "fact"), v)
    assert (idx.basis is not None) == bounded
    assert idx.contextual[1 : idx.n].all() and not idx.contextual[0]  # the first turn has no context
    mask = idx.mask("alice")
    for q in [vecs[40]] + list(_vectors(rng, 10)):
        full = np.maximum(idx.vectors[: idx.n] @ q, idx.search[: idx.n] @ q)
        rows, got = idx.top_match(q, mask, 20)
        want = np.sort(full)[::-1][:20]
        assert np.allclose(got, want, atol=1e-5)
        assert np.allclose(idx.match(rows, q), got, atol=1e-6)
    # A turn that says what it is about keeps its own meaning after a turn on another topic.
    r = idx.row_of["m40"]
    assert idx.match(np.array([r]), vecs[40])[0] == pytest.approx(1.0, abs=1e-5)
    assert float(idx.search[r] @ vecs[40]) < 0.95  # its mixed vector alone would have blurred it


def test_a_turn_without_context_or_whose_context_is_forgotten_is_not_contextual():
    rng = np.random.default_rng(6)
    vecs = _vectors(rng, 3)
    idx = MemoryIndex(384, 8, context_window=2, context_weight=0.5)
    for i, v in enumerate(vecs):
        idx.upsert(_memory(i, "alice", "fact"), v)
    assert idx.contextual[:3].tolist() == [False, True, True]
    idx.remove("m0")
    idx.remove("m1")
    assert not idx.contextual[2]  # its predecessors stopped lending: one vector again
    assert np.allclose(idx.search[2], idx.vectors[2])
    plain = MemoryIndex(384, 8)  # no context at all (an agent's store)
    for i, v in enumerate(vecs):
        plain.upsert(_memory(i, "alice", "fact"), v)
    assert not plain.contextual[:3].any()
