"""Tasks, sessions, handoffs with next-step validation, failures, progress, quality."""

import pytest

from engram import Engram, EngramError, NotFound
from engram.api import Api, Ctx


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
    assert [x.id for x in eng.list_tasks(status="in_progress")] == [t.id]


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
    b = eng.store("Cache invalidation uses TTL keys only.", session_id="bad",
                  resolve_conflicts=False).memory
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


def test_related_failures_attached_for_a_component(eng):
    eng.track_failure("OOM while resizing images", "image-worker", "no size cap")
    eng.store("The image-worker runs on two replicas.")
    r = eng.recall_context("how many replicas does the worker run", memory_type="fact")
    assert r["related_failures"] and r["related_failures"][0]["component"] == "image-worker"


def test_bad_continuity_input(eng):
    with pytest.raises(EngramError, match="completion"):
        eng.track_progress("x", "done", 1.5)
    with pytest.raises(EngramError, match="status must be one of"):
        eng.track_progress("x", "finished", 0.5)
    with pytest.raises(EngramError, match="next_steps must be a list"):
        eng.handoff("s", next_steps=[1, 2])
    with pytest.raises(NotFound):
        eng.handoff("s", task_id="t-nope")
    with pytest.raises(EngramError, match="name must not be empty"):
        eng.create_task("  ")


@pytest.mark.model
def test_two_session_handoff_scenario(tmp_path, settings, clock, real_embedder):
    eng = Engram(tmp_path / "m.duckdb", settings=settings, embedder=real_embedder, clock=clock)
    api = Api(eng)
    A = Ctx("session-A", client="agent-a")
    B = Ctx("session-B", client="agent-b")
    C = Ctx("session-C", client="agent-c")

    # Session A: a task, a failure, progress, a handoff with three next steps...
    task = api.call("create_task", {"name": "CSV export", "goal": "Export memories as CSV"}, A)["task_id"]
    api.call("track_failure", {"error": "UnicodeEncodeError writing CSV", "component": "exporter",
                               "root_cause": "file opened without utf-8", "task_id": task}, A)
    clock.advance(minutes=10)
    api.call("track_progress", {"feature": "CSV writer", "status": "in_progress", "completion": 0.6,
                                "task_id": task}, A)
    clock.advance(minutes=10)
    steps = ["Add a --csv flag to the export command", "Write tests for the CSV exporter",
             "Document CSV export in the README"]
    api.call("session_handoff", {"summary": "CSV writer works for ASCII; flag and docs missing",
                                 "completed": ["CSV writer core"], "in_progress": ["unicode fix"],
                                 "next_steps": steps, "task_id": task}, A)
    # ...then starts on a second task without ending (a crash).
    api.call("create_task", {"name": "Unrelated cleanup"}, A)
    eng.end_session("session-A", clean=False)

    # Session B: recall gets the handoff first, the failure, the interruption once.
    clock.advance(hours=1)
    r = api.call("recall_memory", {"query": "CSV export exporter"}, B)
    assert r["memories"][0]["id"] == r["handoff"]["id"] and r["memories"][0]["pinned"]
    assert [s["status"] for s in r["handoff"]["next_steps_validation"]] == ["not_started"] * 3
    assert any(f["component"] == "exporter" for f in r["related_failures"])
    assert [s["session_id"] for s in r["interrupted_sessions"]] == ["session-A"]
    assert api.call("recall_memory", {"query": "CSV export"}, B)["interrupted_sessions"] == []

    clock.advance(minutes=30)
    api.call("track_progress", {"feature": "CSV exporter tests written and passing", "status": "done",
                                "completion": 1.0, "task_id": task}, B)
    api.call("session_handoff", {"summary": "Tests done", "completed": ["CSV exporter tests"],
                                 "next_steps": [steps[0], steps[2]], "task_id": task}, B)
    eng.end_session("session-B", clean=True)

    # Session C sees step 2 done (with evidence) and the other two not started.
    clock.advance(hours=2)
    view = api.call("get_task", {"task_id": task}, C)
    first = [h for h in view["handoffs"]][0]
    checks = eng.handoff_view(eng.get(first["id"]))["next_steps_validation"]
    assert [c["status"] for c in checks] == ["not_started", "done", "not_started"]
    assert checks[1]["evidence"]["kind"] in ("progress", "handoff_completed")
    latest = view["latest_handoff"]
    assert latest["summary"] == "Tests done"
    assert [c["status"] for c in latest["next_steps_validation"]] == ["not_started", "not_started"]
    r = api.call("recall_memory", {"query": "CSV export"}, C)
    assert r["handoff"]["id"] == latest["id"] and r["interrupted_sessions"] == []
    eng.close()
