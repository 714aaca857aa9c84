"""Tasks: their life (create, update, refusals), the task view and its bounds, the overview
(list_tasks) and resume_task's continuation."""

from __future__ import annotations

import pytest

from engram import EngramError, NotFound
from tests.continuity.plan_support import three_step_task


def test_task_lifecycle(eng):
    t = eng.create_task("Ship export", "Users can export their memory", {"repo": "engram"})
    assert t.status == "open" and t.id.startswith("t-")
    u = eng.update_task(t.id, status="in_progress", metadata={"owner": "agent-a"})
    assert u.status == "in_progress" and u.metadata == {"repo": "engram", "owner": "agent-a"}
    with pytest.raises(EngramError, match="status must be one of"):
        eng.update_task(t.id, status="finished")
    with pytest.raises(NotFound):
        eng.update_task("t-missing", status="done")
    with pytest.raises(NotFound):
        eng.task_view(t.id, user_id="someone-else")
    assert [x.id for x in eng.task_rows(status="in_progress")] == [t.id]


def test_task_view_lists_everything_in_time_order(eng, clock):
    t = eng.create_task("Payments", "Stripe webhooks")
    eng.touch_session("s1")
    eng.track_failure("signature mismatch", "webhooks", "clock skew", task_id=t.id, session_id="s1")
    clock.advance(minutes=5)
    eng.track_progress("webhook verification", "in_progress", 0.5, task_id=t.id, session_id="s1")
    clock.advance(minutes=5)
    eng.store("Stripe sends retries for 3 days.", task_id=t.id, session_id="s1")
    clock.advance(minutes=5)
    eng.handoff("Half done", next_steps=["Add replay protection"], task_id=t.id, session_id="s1")
    v = eng.task_view(t.id)
    assert [e["memory_type"] for e in v["timeline"]] == ["failure", "progress", "fact", "handoff"]
    assert len(v["failures"]) == len(v["progress"]) == len(v["handoffs"]) == len(v["memories"]) == 1
    assert v["latest_handoff"]["next_steps"] == ["Add replay protection"]
    assert v["latest_handoff"]["next_steps_validation"][0]["status"] == "not_started"


def test_task_view_is_bounded_to_the_newest_entries_with_totals(eng, clock):
    """A long task's get_task stays small: the newest `limit` of each list, the totals in counts."""
    t = eng.create_task("Long migration")
    for i in range(7):
        clock.advance(minutes=1)
        eng.track_progress(f"table {i}", "in_progress", i / 10, task_id=t.id, session_id="s1")
    clock.advance(minutes=1)
    eng.handoff("Tables moved", next_steps=["Move the views"], task_id=t.id, session_id="s1")
    v = eng.task_view(t.id, limit=3)
    assert [e["progress"]["feature"] for e in v["progress"]] == ["table 4", "table 5", "table 6"]
    assert [e["memory_type"] for e in v["timeline"]] == ["progress", "progress", "handoff"]
    assert v["counts"] == {"timeline": 8, "handoffs": 1, "failures": 0, "progress": 7, "memories": 0}
    assert v["latest_handoff"]["next_steps"] == ["Move the views"]
    assert eng.task_view(t.id)["counts"]["timeline"] == len(eng.task_view(t.id)["timeline"]) == 8
    with pytest.raises(EngramError, match="limit must be a whole number from 1 to 1000"):
        eng.task_view(t.id, limit=0)


def test_task_overview_lists_open_tasks_first_by_last_activity(eng, clock):
    old = eng.create_task("Old open")
    clock.advance(minutes=1)
    done = eng.create_task("Finished")
    clock.advance(minutes=1)
    fresh = eng.create_task("Fresh open")
    clock.advance(minutes=1)
    eng.store("Old open task got a note", task_id=old.id)
    eng.update_task(done.id, status="done")
    got = eng.task_overview()
    assert [x["id"] for x in got] == [old.id, fresh.id, done.id]
    assert got[0]["last_activity"]["content"] == "Old open task got a note"
    assert got[1]["last_activity"] is None
    assert [x["id"] for x in eng.task_overview(limit=1)] == [old.id]
    assert [x["id"] for x in eng.task_overview(status="done")] == [done.id]
    with pytest.raises(EngramError, match="limit"):
        eng.task_overview(limit=0)


def _resumable(eng, clock):
    t = three_step_task(eng, clock)
    eng.touch_session("S")
    eng.store("CSV columns follow the export JSON field order.", importance=0.9, task_id=t.id)
    eng.track_failure(
        "UnicodeEncodeError writing CSV",
        "exporter",
        "file opened without utf-8",
        task_id=t.id,
        fix="open engram/admin/export_import.py output with encoding='utf-8'",
    )
    eng.track_progress(
        "csv exporter tests",
        "in_progress",
        0.4,
        task_id=t.id,
        session_id="S",
        notes="tests/store/test_transfer.py has the first two cases",
    )
    eng.track_progress("tsv output", "blocked", 0.1, task_id=t.id, notes="waiting on a decision")
    eng.report_interruption("S", "rate_limit", task_id=t.id)
    return t


def test_resume_task_gives_the_continuation(eng, clock):
    t = _resumable(eng, clock)
    r = eng.resume_task(t.id)
    assert r["task"]["id"] == t.id and r["latest_handoff"]["summary"] == "Writer works"
    assert {e["step"]: e["status"] for e in r["plan"]} == {
        "add csv flag to export command": "not_started",
        "write csv exporter tests": "in_progress",
        "support tsv output": "in_progress",
    }
    assert r["next_step"] == "write csv exporter tests"
    assert "tsv output: waiting on a decision" in r["blocked"]
    (pit,) = r["pitfalls"]
    assert (pit["component"], pit["root_cause"]) == ("exporter", "file opened without utf-8")
    assert [m["content"] for m in r["keep"]] == ["CSV columns follow the export JSON field order."]
    assert r["working_set"] == {
        "files": ["engram/admin/export_import.py", "tests/store/test_transfer.py"],
        "components": ["exporter"],
    }
    (s,) = r["interrupted_sessions"]
    assert s["session_id"] == "S" and s["reason"] == "rate_limit"
    text = r["context"]
    assert text.startswith("<resume>\nTask " + t.id) and text.endswith("</resume>")
    for needle in (
        "Next step: write csv exporter tests",
        "[in_progress] write csv exporter tests",
        "root cause: file opened without utf-8",
        "rate_limit",
        "tests/store/test_transfer.py",
    ):
        assert needle in text
    assert r["tokens"] <= 2000
    # Read-only: the interruption is still news for the next recall.
    eng.touch_session("B")
    assert [x["session_id"] for x in eng.recall_context("csv", session_id="B")["interrupted_sessions"]] == ["S"]


def test_resume_task_fits_the_budget_most_needed_first(eng, clock):
    t = _resumable(eng, clock)
    full = eng.resume_task(t.id)["context"]
    small = eng.resume_task(t.id, max_tokens=60)
    assert small["tokens"] <= 60 and len(small["context"]) < len(full)
    assert small["context"].startswith("<resume>") and small["context"].endswith("</resume>")
    assert "Next step" in small["context"] or "Task " in small["context"]
    assert "Working set" not in small["context"]
    with pytest.raises(EngramError, match="max_tokens"):
        eng.resume_task(t.id, max_tokens=10)
    with pytest.raises(NotFound):
        eng.resume_task("t-missing")
