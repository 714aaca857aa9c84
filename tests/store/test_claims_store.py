"""Task claims in the store, on both backends: one holder per task even with racing writers."""

from __future__ import annotations

import threading

import pytest

from engram.continuity.claims import Claims
from engram.core.errors import TaskClaimed
from engram.core.types import Session, Task
from engram.store import open_store
from tests.conftest import START, memory_path


def _session(store, sid: str, at=START, status: str = "active") -> None:
    store.upsert_session(
        Session(
            id=sid,
            user_id="u",
            client="stdio",
            pid=None,
            status=status,
            started_at=at,
            last_heartbeat=at,
            ended_at=None,
            task_id=None,
            outcome=None,
            outcome_notes=None,
            reported=False,
        )
    )


def _task(store, tid: str = "t-1") -> None:
    store.insert_task(
        Task(id=tid, name="n", goal="", status="open", metadata={}, user_id="u", created_at=START, updated_at=START)
    )


@pytest.fixture
def store(settings, clock):
    s = open_store(memory_path(settings), clock.now())
    _task(s)
    for sid in ("a", "b", "c"):
        _session(s, sid)
    yield s
    s.close()


def test_insert_is_refused_while_a_claim_row_exists(store):
    assert store.insert_claim("t-1", "u", "a", "stdio", START)
    assert not store.insert_claim("t-1", "u", "b", "stdio", START)
    c = store.get_claim("t-1")
    assert (c.session_id, c.client, c.since, c.last_heard, c.session_status) == ("a", "stdio", START, START, "active")


def test_swap_is_conditional_on_the_holder_read(store):
    store.insert_claim("t-1", "u", "a", "stdio", START)
    assert not store.swap_claim("t-1", "c", "b", "http", START)  # c never held it: nothing changes
    assert store.get_claim("t-1").session_id == "a"
    assert store.swap_claim("t-1", "a", "b", "http", START)
    assert not store.swap_claim("t-1", "a", "c", "http", START)  # a lost it to b meanwhile
    assert store.get_claim("t-1").session_id == "b"


def test_notices_are_taken_once(store):
    store.add_claim_notice("a", "t-1", "b", "http", START)
    assert store.take_claim_notices("b") == []
    got = store.take_claim_notices("a")
    assert [(n["task_id"], n["by_session"], n["by_client"], n["at"]) for n in got] == [("t-1", "b", "http", START)]
    assert store.take_claim_notices("a") == []


def test_claims_lapse_with_their_session(store, clock):
    claims = Claims(store, clock, timeout_s=60)
    assert claims.claim("t-1", "u", "a", "stdio")["claimed"]
    with pytest.raises(TaskClaimed, match=r"held by session a \(stdio\) since"):
        claims.claim("t-1", "u", "b", "stdio")
    clock.advance(seconds=61)  # a is silent for longer than the claim timeout
    assert claims.holder("t-1") is None
    _session(store, "b", at=clock.now())
    won = claims.claim("t-1", "u", "b", "stdio")
    assert won["claimed"] and won["taken_over"] is None  # a had lapsed: no take-over
    assert [n["taken_over_by"] for n in claims.notices("a")] == ["b"]  # still told, should it speak again
    store.update_session("b", status="ended")
    assert claims.holder("t-1") is None
    assert claims.claim("t-1", "u", "c", "stdio")["claimed"]  # b's session ended: its claim with it


def test_take_over_and_release(store, clock):
    claims = Claims(store, clock, timeout_s=60)
    claims.claim("t-1", "u", "a", "stdio")
    got = claims.claim("t-1", "u", "b", "http", take_over=True)
    assert got["claimed"] and got["taken_over"]["session_id"] == "a"
    assert got["claim"]["session_id"] == "b" and got["claim"]["client"] == "http"
    assert claims.notices("a")[0]["message"].startswith("task t-1 was taken over by session b (http)")
    with pytest.raises(TaskClaimed, match=r"held by session b .*not by this session"):
        claims.release("t-1", "a")
    assert store.get_claim("t-1").session_id == "b"  # the refused release changed nothing
    assert claims.release("t-1", "b") == {"task_id": "t-1", "released": True}
    assert store.get_claim("t-1") is None
    assert claims.release("t-1", "b") == {"task_id": "t-1", "released": False}


def _race(stores, clock, rounds: int) -> list[list[str]]:
    """Each round, one thread per store claims t-1 for its own session at the same moment."""
    sessions = [f"s{i}" for i in range(len(stores))]
    for sid in sessions:
        _session(stores[0], sid)
    winners = []
    for _ in range(rounds):
        stores[0].delete_claim("t-1")
        barrier = threading.Barrier(len(stores))
        won: list[str] = []
        errors: list[str] = []

        def go(store, sid, barrier=barrier, won=won, errors=errors):
            barrier.wait()
            try:
                Claims(store, clock, timeout_s=60).claim("t-1", "u", sid, "test")
                won.append(sid)
            except TaskClaimed as refused:
                errors.append(str(refused))

        threads = [threading.Thread(target=go, args=(st, sid)) for st, sid in zip(stores, sessions)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1, won
        assert len(errors) == len(stores) - 1
        assert all(f"held by session {won[0]} (test)" in e for e in errors)
        assert stores[0].get_claim("t-1").session_id == won[0]
        winners.append(won)
    return winners


def test_racing_threads_on_one_store_get_one_holder(store, clock):
    _race([store] * 4, clock, rounds=20)


def test_racing_connections_to_one_database_get_one_holder(settings, clock, store, backend):
    """Four connections, as four servers sharing one database: the primary key and the
    conditional update decide, not a lock in this process."""
    if backend != "postgres":
        pytest.skip("one DuckDB file has one writer process: only PostgreSQL has several connections")
    others = [open_store(settings.database_url, clock.now()) for _ in range(3)]
    try:
        winners = _race([store, *others], clock, rounds=30)
        assert len({w[0] for w in winners}) > 1  # a real race: not always the same connection first
    finally:
        for s in others:
            s.close()
