"""Handoffs and the plan across them: next-step validation, what counts as evidence, the
vectors it reuses, and a task handed over between three sessions."""

from __future__ import annotations

import pytest

from engram import Engram
from engram.api import Api, Ctx
from engram.models.embedding import FakeEmbedder
from tests.continuity.plan_support import three_step_task


@pytest.mark.model
def test_two_session_handoff_scenario(tmp_path, settings, clock, real_embedder):
    eng = Engram(tmp_path / "m.duckdb", settings=settings, embedder=real_embedder, clock=clock)
    api = Api(eng)
    A = Ctx("session-A", client="agent-a")
    B = Ctx("session-B", client="agent-b")
    C = Ctx("session-C", client="agent-c")

    # Session A: a task, a failure, progress, a handoff with three next steps...
    task = api.call("create_task", {"name": "CSV export", "goal": "Export memories as CSV"}, A)["task_id"]
    api.call(
        "track_failure",
        {
            "error": "UnicodeEncodeError writing CSV",
            "component": "exporter",
            "root_cause": "file opened without utf-8",
            "task_id": task,
        },
        A,
    )
    clock.advance(minutes=10)
    api.call(
        "track_progress", {"feature": "CSV writer", "status": "in_progress", "completion": 0.6, "task_id": task}, A
    )
    clock.advance(minutes=10)
    steps = [
        "Add a --csv flag to the export command",
        "Write tests for the CSV exporter",
        "Document CSV export in the README",
    ]
    api.call(
        "session_handoff",
        {
            "summary": "CSV writer works for ASCII; flag and docs missing",
            "completed": ["CSV writer core"],
            "in_progress": ["unicode fix"],
            "next_steps": steps,
            "task_id": task,
        },
        A,
    )
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
    api.call(
        "track_progress",
        {"feature": "CSV exporter tests written and passing", "status": "done", "completion": 1.0, "task_id": task},
        B,
    )
    api.call(
        "session_handoff",
        {
            "summary": "Tests done",
            "completed": ["CSV exporter tests"],
            "next_steps": [steps[0], steps[2]],
            "task_id": task,
        },
        B,
    )
    eng.end_session("session-B", clean=True)

    # Session C sees step 2 done (with evidence) and the other two not started.
    clock.advance(hours=2)
    view = api.call("get_task", {"task_id": task}, C)
    first = view["handoffs"][0]
    checks = eng.handoff_view(eng.get(first["id"]))["next_steps_validation"]
    assert [c["status"] for c in checks] == ["not_started", "done", "not_started"]
    assert checks[1]["evidence"]["kind"] in ("progress", "handoff_completed")
    latest = view["latest_handoff"]
    assert latest["summary"] == "Tests done"
    assert [c["status"] for c in latest["next_steps_validation"]] == ["not_started", "not_started"]
    r = api.call("recall_memory", {"query": "CSV export"}, C)
    assert r["handoff"]["id"] == latest["id"] and r["interrupted_sessions"] == []
    eng.close()


def test_a_step_finished_between_handoffs_stays_done(eng, clock):
    t = three_step_task(eng, clock)
    done = eng.track_progress("csv flag on export command", "done", 1.0, task_id=t.id, session_id="A")
    clock.advance(minutes=10)
    # The second handoff re-plans what remains, as agents do: the flag and TSV are gone from it.
    eng.handoff("Flag done", next_steps=["write csv exporter tests"], task_id=t.id, session_id="A")
    plan = {e["step"]: e for e in eng.task_plan(t.id)}
    assert list(plan) == ["add csv flag to export command", "write csv exporter tests", "support tsv output"]
    flag = plan["add csv flag to export command"]
    assert flag["status"] == "done" and flag["evidence"]["id"] == done.id
    assert plan["support tsv output"]["status"] == "dropped"
    assert plan["support tsv output"]["evidence"] is None
    tests = plan["write csv exporter tests"]
    assert tests["status"] == "not_started" and len(tests["planned_in"]) == 2
    view = eng.task_view(t.id)
    assert view["plan"] == eng.task_plan(t.id)
    # The latest handoff carries the plan's open steps.
    assert [e["step"] for e in view["latest_handoff"]["open_steps"]] == ["write csv exporter tests"]


def test_a_step_started_then_no_longer_planned_is_not_dropped(eng, clock):
    t = three_step_task(eng, clock)
    eng.track_progress("support tsv output", "in_progress", 0.2, task_id=t.id)
    clock.advance(minutes=1)
    eng.handoff("Later", next_steps=["write csv exporter tests"], task_id=t.id)
    plan = {e["step"]: e["status"] for e in eng.task_plan(t.id)}
    assert plan["support tsv output"] == "in_progress"


def test_later_handoff_items_are_evidence_for_earlier_steps(eng, clock):
    t = three_step_task(eng, clock)
    h2 = eng.handoff(
        "Progress",
        completed=["csv flag for the export command"],
        in_progress=["csv exporter tests"],
        next_steps=["write csv exporter tests"],
        task_id=t.id,
    )
    plan = {e["step"]: e for e in eng.task_plan(t.id)}
    assert plan["add csv flag to export command"]["status"] == "done"
    assert plan["add csv flag to export command"]["evidence"]["kind"] == "handoff_completed"
    assert plan["write csv exporter tests"]["status"] == "in_progress"
    assert plan["write csv exporter tests"]["evidence"]["id"] == h2.id


class CountingEmbedder:
    """The fake embedder, recording every text it was asked to embed."""

    def __init__(self):
        self.inner = FakeEmbedder()
        self.dim, self.name, self.backend = self.inner.dim, self.inner.name, "fake"
        self.texts: list[str] = []

    def embed_batch(self, texts):
        self.texts.extend(texts)
        return self.inner.embed_batch(texts)

    def embed_query(self, text):
        self.texts.append(text)
        return self.inner.embed_query(text)


def test_validation_reuses_stored_vectors_and_reads_only_new_rows(settings, clock):
    emb = CountingEmbedder()
    eng = Engram(":memory:", settings=settings, embedder=emb, clock=clock)
    t = three_step_task(eng, clock)
    for i in range(30):
        eng.track_progress(f"unrelated chore number {i}", "done", 1.0, task_id=t.id, notes=f"note {i}")
    eng.store("The export writes UTF-8 with a BOM for spreadsheet tools.", task_id=t.id)
    emb.texts.clear()
    eng.recall_context("csv export", task_id=t.id)
    # Steps and single words are embedded (once); no memory is embedded again.
    assert not [x for x in emb.texts if "chore" in x and " " in x.strip()]
    assert not [x for x in emb.texts if "BOM" in x]
    emb.texts.clear()
    eng.recall_context("csv export", task_id=t.id)
    assert emb.texts == ["csv export"]  # the query only: checks, steps and words are kept
    # New evidence after the cached look is picked up.
    eng.track_progress("csv exporter tests", "in_progress", 0.5, task_id=t.id)
    steps = {
        c["step"]: c["status"] for c in eng.recall_context("csv", task_id=t.id)["handoff"]["next_steps_validation"]
    }
    assert steps["write csv exporter tests"] == "in_progress"
    eng.close()


def test_deleted_evidence_no_longer_counts(eng, clock):
    t = three_step_task(eng, clock)
    p = eng.track_progress("csv flag on export command", "done", 1.0, task_id=t.id)
    h = eng.latest_handoff(eng.settings.user_id, t.id)
    assert eng.step_checks(h)[0].status == "done"
    eng.forget(memory_id=p.id)
    assert eng.step_checks(h)[0].status == "not_started"
