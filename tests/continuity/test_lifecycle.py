"""engram.workflows.lifecycle over an engine: the session-start block, checkpoints as handoffs and
the task each belongs to."""

from __future__ import annotations

import threading

import pytest

from engram.api import Api
from engram.continuity.rendering import estimate_tokens
from engram.core.types import Ctx
from engram.engram import Engram
from tests.conftest import memory_path


@pytest.fixture
def api(eng):
    return Api(eng)


def ctx(sid: str = "claude-code:s1") -> Ctx:
    return Ctx(session_id=sid, client="claude-code")


def checkpoint_args(digest: str = "d1", task_id: str | None = None, session: str = "claude-code:s1", **kw) -> dict:
    args = {
        "summary": "Automatic checkpoint at SessionEnd of a claude-code session.\nFiles edited: src/retry.py.",
        "completed": ["Add retry with backoff"],
        "in_progress": ["Write the retry tests"],
        "blocked": [],
        "next_steps": ["Add retry with backoff", "Write the retry tests", "Update the changelog"],
        "step_statuses": ["done", "in_progress", "pending"],
        "failures": [{"error": "`pytest -q` failed: 1 failed", "component": "pytest"}],
        "task_id": task_id,
        "checkpoint": {
            "automatic": True,
            "digest": digest,
            "session": session,
            "client": "claude-code",
            "event": "SessionEnd",
            "plan": [{"step": "Add retry with backoff", "status": "done"}],
        },
    }
    return {**args, **kw}


def test_a_checkpoint_is_a_handoff_of_the_transcripts_task_with_the_todo_statuses_as_its_plan(api):
    t = api.call("create_task", {"name": "HTTP client retry"}, ctx("other"))
    r = api.call("session_checkpoint", checkpoint_args(task_id=t["task_id"]), ctx())
    assert r["stored"] and r["task_id"] == t["task_id"] and r["task_from"] == "transcript"
    assert r["failures_recorded"] == 1
    resume = api.call("resume_task", {"task_id": t["task_id"]}, ctx("reader"))
    plan = {e["step"]: e["status"] for e in resume["plan"]}
    assert plan == {
        "Add retry with backoff": "done",
        "Write the retry tests": "in_progress",
        "Update the changelog": "not_started",
    }
    assert resume["next_step"] == "Write the retry tests"
    assert [p["component"] for p in resume["pitfalls"]] == ["pytest"]
    assert "src/retry.py" in resume["working_set"]["files"]
    view = api.call("get_task", {"task_id": t["task_id"]}, ctx("reader"))
    (h,) = view["handoffs"]
    stored = api.eng.get(h["id"])
    assert stored.metadata["checkpoint"]["automatic"] is True  # marked automatic
    assert stored.metadata["checkpoint"]["step_statuses"] == ["done", "in_progress", "pending"]


def test_the_same_checkpoint_twice_stores_nothing_new(api):
    t = api.call("create_task", {"name": "HTTP client retry"}, ctx("other"))
    first = api.call("session_checkpoint", checkpoint_args(task_id=t["task_id"]), ctx())
    again = api.call("session_checkpoint", checkpoint_args(task_id=t["task_id"]), ctx())
    assert first["stored"] and not again["stored"] and again["reason"].startswith("unchanged")
    view = api.call("get_task", {"task_id": t["task_id"]}, ctx("reader"))
    assert view["counts"]["handoffs"] == 1 and view["counts"]["failures"] == 1
    # Something new: stored, and the failure already recorded by this session is not recorded again.
    later = api.call("session_checkpoint", checkpoint_args("d2", task_id=t["task_id"]), ctx())
    assert later["stored"] and later["failures_recorded"] == 0
    view = api.call("get_task", {"task_id": t["task_id"]}, ctx("reader"))
    assert view["counts"]["handoffs"] == 2 and view["counts"]["failures"] == 1


def test_two_checkpoints_of_one_session_at_once_store_one(api, settings, fake, clock, backend):
    """Two threads of one server, and on PostgreSQL two servers on one database, race the same
    checkpoint: the digest check and the write are one step (engram.workflows.lifecycle, Engram.exclusive)."""
    t = api.call("create_task", {"name": "HTTP client retry"}, ctx("other"))
    second = (
        Engram(memory_path(settings), settings=settings, embedder=fake, clock=clock) if backend == "postgres" else None
    )
    apis = [api, Api(second) if second else api]
    start, results = threading.Barrier(2), [None, None]

    def run(i: int) -> None:
        start.wait()
        results[i] = apis[i].call("session_checkpoint", checkpoint_args(task_id=t["task_id"]), ctx())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        if second:
            second.close()
    assert sorted(r["stored"] for r in results) == [False, True], results
    view = api.call("get_task", {"task_id": t["task_id"]}, ctx("reader"))
    assert view["counts"]["handoffs"] == 1 and view["counts"]["failures"] == 1


def test_without_a_task_in_the_transcript_the_most_recently_active_open_task_gets_it(api, clock):
    old = api.call("create_task", {"name": "Old work"}, ctx("a"))
    clock.advance(seconds=60)
    recent = api.call("create_task", {"name": "Recent work"}, ctx("b"))
    done = api.call("create_task", {"name": "Finished"}, ctx("c"))
    api.call("update_task", {"task_id": done["task_id"], "status": "done"}, ctx("c"))
    r = api.call("session_checkpoint", checkpoint_args(), ctx())
    assert (r["task_id"], r["task_from"]) == (recent["task_id"], "most_recent_open_task")
    # A task id the transcript names that does not exist (or is another user's) is not used.
    r = api.call("session_checkpoint", checkpoint_args("d3", task_id="t-000000000000"), ctx())
    assert r["task_from"] == "most_recent_open_task"
    assert old["task_id"] != r["task_id"]


def test_with_no_open_task_the_checkpoint_belongs_to_the_project_and_is_shown_at_the_next_start(api):
    assert api.call("session_start", {}, ctx("s0"))["context"] == ""  # nothing: nothing injected
    r = api.call("session_checkpoint", checkpoint_args(), ctx())
    assert r["stored"] and r["task_id"] is None and r["task_from"] == "none"
    start = api.call("session_start", {}, ctx("s2"))
    assert "no task" in start["context"] and "Files edited: src/retry.py" in start["context"]
    assert "[done] Add retry with backoff" in start["context"]
    # The plan's steps are said once each: what is done is not also listed as a next step.
    assert "Next steps: Update the changelog\n" in start["context"]
    assert api.call("session_checkpoint", checkpoint_args(), ctx())["stored"] is False


def test_session_start_resumes_the_task_the_last_session_worked_on_within_the_budget(api, clock):
    a = api.call("create_task", {"name": "Task A", "goal": "ship A"}, ctx("x"))
    b = api.call("create_task", {"name": "Task B"}, ctx("x"))
    api.call("session_checkpoint", checkpoint_args(task_id=a["task_id"]), ctx("claude-code:old"))
    clock.advance(seconds=30)
    api.call(
        "track_progress",
        {"feature": "poke B", "status": "in_progress", "task_id": b["task_id"]},
        ctx("claude-code:last"),
    )  # the last session worked on B
    start = api.call("session_start", {"max_tokens": 1500}, ctx("claude-code:new"))
    assert start["resumed"] == b["task_id"]
    assert set(start["task_ids"]) == {a["task_id"], b["task_id"]}
    text = start["context"]
    assert text.startswith("<engram>") and text.endswith("</engram>")
    assert f"Task {b['task_id']}: Task B" in text and a["task_id"] in text
    assert estimate_tokens(text) <= 1500
    small = api.call("session_start", {"max_tokens": 120}, ctx("claude-code:new2"))
    assert estimate_tokens(small["context"]) <= 120 and small["context"].endswith("</engram>")


def test_auto_compaction_reports_the_interruption(api):
    t = api.call("create_task", {"name": "HTTP client retry"}, ctx("other"))
    r = api.call("session_checkpoint", checkpoint_args(task_id=t["task_id"], interrupted=True), ctx())
    assert r["interrupted"]
    sessions = api.call("task_sessions", {"task_id": t["task_id"]}, ctx("reader"))["sessions"]
    mine = next(s for s in sessions if s["id"] == "claude-code:s1")
    assert mine["state"] == "interrupted" and mine["reason"] == "context_overflow"


def test_secrets_in_a_checkpoint_are_redacted(api):
    secret = "sk-ant-api03-" + "A" * 30
    args = checkpoint_args(summary=f"Last request: keep {secret} out of the logs")
    args["checkpoint"]["requests"] = [f"keep {secret} out"]
    r = api.call("session_checkpoint", args, ctx())
    m = api.eng.get(r["handoff_id"])
    assert secret not in m.content and secret not in str(m.metadata)
    assert "[REDACTED]" in m.content


def test_a_checkpoint_with_misaligned_statuses_is_refused(api):
    with pytest.raises(Exception, match="step_statuses has 1 items for 3 next_steps"):
        api.call("session_checkpoint", checkpoint_args(step_statuses=["done"]), ctx())
    args = checkpoint_args()
    args["checkpoint"].pop("digest")
    with pytest.raises(Exception, match=r"checkpoint\.digest"):
        api.call("session_checkpoint", args, ctx())
