"""Sessions: interruptions (a crash, a silent heartbeat, a reported reason) told once, and a
session's outcome weighing what it wrote."""

from __future__ import annotations

import pytest

from engram import EngramError, NotFound


def test_interrupted_session_reported_once(eng, clock):
    eng.touch_session("A", client="agent-a")
    t = eng.create_task("Refactor", session_id="A")
    eng.track_progress("split module", "in_progress", 0.3, task_id=t.id, session_id="A")
    eng.end_session("A", clean=False)
    eng.touch_session("B")
    first = eng.recall_context("refactor", session_id="B")["interrupted_sessions"]
    assert [s["session_id"] for s in first] == ["A"]
    assert first[0]["task"]["id"] == t.id
    assert first[0]["last_progress"]["progress"]["feature"] == "split module"
    assert eng.recall_context("refactor", session_id="B")["interrupted_sessions"] == []


def test_clean_end_is_not_reported_and_stale_heartbeat_is(eng, clock, settings):
    eng.touch_session("clean")
    eng.end_session("clean", clean=True)
    eng.touch_session("silent")
    clock.advance(seconds=settings.heartbeat_timeout_s + 1)
    eng.touch_session("now")
    got = eng.recall_context("anything", session_id="now")["interrupted_sessions"]
    assert [s["session_id"] for s in got] == ["silent"]


def test_session_outcome_downweights_failing_sessions(eng):
    eng.touch_session("good")
    eng.touch_session("bad")
    g = eng.store("Cache invalidation uses version keys.", session_id="good").memory
    b = eng.store("Cache invalidation uses TTL keys only.", session_id="bad", resolve_conflicts=False).memory
    before = {h.memory.id: h.score for h in eng.recall("cache invalidation keys", reinforce=False)}
    eng.session_outcome("bad", "failure", "broke prod")
    eng.session_outcome("bad", "failure", "broke prod again")
    eng.session_outcome("good", "success")
    hits = {h.memory.id: h for h in eng.recall("cache invalidation keys", reinforce=False)}
    assert hits[b.id].score == pytest.approx(before[b.id] * 0.7)
    assert hits[b.id].quality_score < hits[g.id].quality_score
    assert hits[g.id].quality_score == pytest.approx(0.5 * 1.1)
    with pytest.raises(EngramError, match="success"):
        eng.session_outcome("good", "meh")


def test_report_interruption_is_reported_once_with_its_reason(eng, clock):
    eng.touch_session("A", client="agent-a")
    t = eng.create_task("Refactor", session_id="A")
    eng.track_progress("split module", "in_progress", 0.3, task_id=t.id, session_id="A")
    s = eng.report_interruption("A", "context_overflow", task_id=t.id)
    assert (s.status, s.interruption, s.task_id) == ("interrupted", "context_overflow", t.id)
    # Its last calls (a handoff after the report) do not bring it back, nor does its clean exit.
    eng.handoff("Stopping", next_steps=["finish split"], task_id=t.id, session_id="A")
    eng.touch_session("A")
    eng.end_session("A", clean=True)
    assert eng.store_db.get_session("A").status == "interrupted"
    eng.touch_session("B")
    got = eng.recall_context("refactor", session_id="B")["interrupted_sessions"]
    assert [(x["session_id"], x["reason"]) for x in got] == [("A", "context_overflow")]
    assert got[0]["last_progress"]["progress"]["feature"] == "split module"
    assert eng.recall_context("refactor", session_id="B")["interrupted_sessions"] == []
    with pytest.raises(EngramError, match="reason must be one of"):
        eng.report_interruption("B", "tired")
    with pytest.raises(NotFound):
        eng.report_interruption("nobody", "other")


def test_a_killed_session_reads_connection_lost(eng):
    eng.touch_session("A")
    eng.end_session("A", clean=False)
    eng.touch_session("B")
    (s,) = eng.recall_context("x", session_id="B")["interrupted_sessions"]
    assert s["reason"] == "connection_lost"


def test_recall_reports_a_silent_session_without_retiring_it(eng, clock, settings):
    eng.touch_session("silent")
    eng.touch_session("reader")
    clock.advance(seconds=settings.heartbeat_timeout_s + 1)
    eng.sessions.beats.clear()
    got = eng.take_interrupted(exclude="reader")
    assert [s["session_id"] for s in got] == ["silent"]
    assert eng.store_db.get_session("silent").status == "active"  # reading wrote no expiry
    assert eng.take_interrupted(exclude="reader") == []
    eng.touch_session("newcomer")  # a new session registering retires the silent ones
    assert eng.store_db.get_session("silent").status == "interrupted"
