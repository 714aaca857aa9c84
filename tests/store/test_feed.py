"""Several servers on one database: each keeps its derived indexes fresh from the change feed.

Two Engram instances share one store here. `Shared` gives them one DuckDB connection plus a
change log filled by the writes themselves, as Postgres's triggers fill its `changes` table: the
engine's side of the feed (catch_up) is tested without a Postgres server. The same behaviour on a
real Postgres database is tested in test_multiserver.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import engram.engine.index_upkeep as indexes_mod
from engram import Engram


class Shared:
    """One process's view of a store shared with others: every write is logged (memory ids, or
    None for an edge) and changes_since reads the log, as PgStore reads its changes table."""

    def __init__(self, store, log: list):
        self._store, self.log = store, log

    def __getattr__(self, name):
        return getattr(self._store, name)

    def change_mark(self) -> int:
        return len(self.log)

    def changes_since(self, mark: int):
        new = self.log[mark:]
        return len(self.log), list(dict.fromkeys(i for i in new if i is not None)), None in new

    def try_lease(self, name, holder, now, seconds):
        return self._store.try_lease(name, holder, now, seconds)

    def insert_memory(self, m, embedding):
        self._store.insert_memory(m, embedding)
        self.log.append(m.id)

    def update_memory(self, memory_id, embedding=None, **fields):
        self._store.update_memory(memory_id, embedding, **fields)
        self.log.append(memory_id)

    def reinforce(self, ids, now, grow):
        out = self._store.reinforce(ids, now, grow)
        self.log.extend(ids)
        return out

    def delete_memories(self, ids):
        self._store.delete_memories(ids)
        self.log.extend(ids)
        self.log.append(None)

    def add_edges(self, user_id, edges, new_source=False):
        self._store.add_edges(user_id, edges, new_source)
        if edges:
            self.log.append(None)

    def delete_edges_of(self, ids):
        self._store.delete_edges_of(ids)
        self.log.append(None)

    def close(self):
        pass  # the last engine closes the real store


@pytest.fixture
def pair(settings, fake, clock):
    """Engines a and b on one database, as two servers would be."""
    log: list = []
    a = Engram(":memory:", settings=settings, embedder=fake, clock=clock)
    real = a.store_db
    a.store_db = Shared(real, log)
    b = Engram(":memory:", settings=settings, embedder=fake, clock=clock)
    b.store_db.close()
    b.store_db = Shared(real, log)
    b.rebuild_indexes()
    yield a, b
    real.close()


@pytest.fixture
def always(monkeypatch):
    """Every read asks the feed (no throttle), so a test need not wait FEED_POLL_S."""
    monkeypatch.setattr(indexes_mod, "FEED_POLL_S", 0.0)


def ranking(e: Engram, query: str) -> list[tuple[str, float]]:
    return [(h.memory.id, round(h.score, 9)) for h in e.recall(query, limit=20, reinforce=False)]


def test_a_write_on_one_server_is_recalled_on_the_other(pair, always):
    a, b = pair
    m = a.store("The staging database password rotates every Monday").memory
    assert b.recall("staging database password")[0].memory.id == m.id
    assert b.list_memories()["total"] == 1
    assert b.index_counts()[("fact", "active")] == 1


def test_reads_ask_the_feed_at_most_every_poll_interval(pair, monkeypatch):
    a, b = pair
    monkeypatch.setattr(indexes_mod, "FEED_POLL_S", 3600.0)
    b.recall("anything at all")  # b looked just now
    a.store("The build cache lives on the second disk")
    assert b.recall("build cache second disk") == []  # within the interval: not asked again
    b.indexes.feed_checked -= 3601.0  # the interval has passed
    assert [h.memory.content for h in b.recall("build cache second disk")] == [
        "The build cache lives on the second disk"
    ]


def test_a_write_resolves_against_a_memory_another_server_stored_a_moment_ago(pair, monkeypatch):
    a, b = pair
    monkeypatch.setattr(indexes_mod, "FEED_POLL_S", 3600.0)  # only the write's own check may find it
    b.recall("warm up")
    first = a.store("The API rate limit is 100 requests per minute").memory
    again = b.store("The API rate limit is 100 requests per minute")
    assert again.action == "reinforce" and again.memory.id == first.id
    assert b.list_memories()["total"] == 1 and a.get(first.id).recall_count == 1


def test_updates_supersessions_and_deletions_reach_the_other_server(pair, always):
    a, b = pair
    old = a.store("The office is on the third floor").memory
    keep = a.store("Lunch is served at noon in the cafeteria").memory
    assert b.recall("office floor")[0].memory.id == old.id
    a.update(old.id, "The office moved to the fifth floor")
    assert b.recall("office fifth floor")[0].memory.content == "The office moved to the fifth floor"
    a.forget(old.id)
    assert old.id not in [h.memory.id for h in b.recall("office fifth floor")]
    assert b.list_memories()["total"] == 1
    assert b.recall("lunch cafeteria")[0].memory.id == keep.id
    # A forget by words on b reads b's index: a memory a wrote must be found there.
    gone = a.store("Temporary note about the zebra migration").memory
    assert b.forget(query="zebra migration") == [gone.id]
    assert a.recall("zebra migration") == []


def test_every_server_ranks_as_one_built_from_the_rows(pair, always, settings, fake, clock):
    """Interleaved writes on both servers leave each with the index a fresh server builds."""
    a, b = pair
    texts = [
        "Postgres runs on port 5432 in staging",
        "Redis caches session tokens for an hour",
        "The deploy pipeline runs on every merge to main",
        "Backups are written to S3 nightly",
        "The search service indexes documents every ten minutes",
        "Alerts go to the on-call phone after five minutes",
        "Postgres replicas lag by a second",
    ]
    for i, t in enumerate(texts):
        (a if i % 2 else b).store(t, importance=0.3 + 0.1 * i)
    a.recall("postgres port")  # a recall reinforces: another change to carry
    fresh = Engram(":memory:", settings=settings, embedder=fake, clock=clock)
    fresh.store_db.close()
    fresh.store_db = a.store_db
    fresh.rebuild_indexes()
    for q in ("postgres", "deploy pipeline merge", "backups nightly", "alerts on-call"):
        want = ranking(fresh, q)
        assert want and ranking(a, q) == want and ranking(b, q) == want
    assert a.graph.edge_count() == b.graph.edge_count() == fresh.graph.edge_count()


def test_meeting_its_own_writes_in_the_feed_changes_nothing(pair, monkeypatch):
    a, _ = pair
    monkeypatch.setattr(indexes_mod, "FEED_POLL_S", 3600.0)
    a.catch_up(force=True)
    a.store_many(
        [
            {"content": t}
            for t in (
                "Grafana dashboards live in the ops folder",
                "Grafana alerts page the on-call",
                "The ops folder is backed up weekly",
            )
        ]
    )
    before, rows = ranking(a, "grafana ops"), a.index.n
    assert a.catch_up(force=True) == 3  # its own writes come back from the feed
    assert a.index.n == rows and len(a.index) == 3 and ranking(a, "grafana ops") == before


@pytest.mark.duckdb_only
def test_a_duckdb_file_has_an_empty_feed_and_reads_nothing_for_it(eng, monkeypatch):
    m = eng.store("Only one process writes a DuckDB file").memory
    assert eng.store_db.change_mark() == 0 and eng.store_db.changes_since(0) == (0, [], False)

    def unexpected(ids):
        raise AssertionError("index_rows read with an empty feed")

    monkeypatch.setattr(eng.store_db, "index_rows", unexpected)
    assert eng.catch_up(force=True) == 0
    assert eng.recall("one process writes")[0].memory.id == m.id


def test_a_bulk_writes_later_chunks_reach_the_other_server_once_the_fill_embeds_them(pair, always):
    """A bulk write stores a long turn's later chunks without an embedding: the other server
    finds them by their words meanwhile, and takes their embeddings from the feed once the
    writer's fill has written them (the text did not change, the vector did)."""
    a, b = pair
    long = " ".join(f"Step {j}: the staging cluster drains node {j} first, then checks." for j in range(60))
    later = a.store_many([{"content": long, "conversation": "c1"}], fill_token_vectors=False)[0].chunks[1:]
    assert later and b.recall("drains node 55", reinforce=False)[0].memory.id in later
    idx_b = b.indexes.p.index
    assert not any(idx_b.vector(i).any() for i in later)
    assert a.indexes.fill_vectors() == len(later)
    b.recall("staging cluster", reinforce=False)  # reads the feed
    assert all(np.array_equal(idx_b.vector(i), a.indexes.p.index.vector(i)) for i in later)
    assert all(idx_b.vector(i).any() for i in later)
