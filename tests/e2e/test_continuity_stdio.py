"""Continuity across five real stdio MCP sessions: three handoffs, seven planned steps, a kill,
a reported interruption; the last session's get_task and resume_task tell the whole story."""

from __future__ import annotations

import contextlib
import os
import signal

import anyio
import pytest

from tests.stdio_support import child_pids, ok, stdio, stop_engram_daemon

pytestmark = [pytest.mark.model, pytest.mark.anyio]

USER = "user-continuity"
FLAG = "Add a --csv flag to the export command"
TESTS = "Write tests for the CSV exporter"
TESTS_REWORDED = "Cover the CSV exporter with tests"
DOCS = "Document CSV export in the README"
TSV = "Support TSV output as well"
STREAM = "Stream rows instead of loading the whole table"
ESCAPE = "Escape formula characters in CSV cells"
PROGRESS_BAR = "Add a progress bar for large exports"


@pytest.fixture
def home(tmp_path):
    yield tmp_path
    stop_engram_daemon(tmp_path)


async def recall_until_reported(client, query: str) -> list[dict]:
    """The daemon notices a dropped connection on its own thread: poll until it has."""
    with anyio.fail_after(60):
        while True:
            got = (await ok(client, "recall_memory", {"query": query}))["interrupted_sessions"]
            if got:
                return got


async def test_five_sessions_three_handoffs_seven_steps(home):
    # Session 1: the task, a decision, a pitfall, the first plan (five steps).
    async with stdio(home, USER) as s1:
        tid = (await ok(s1, "create_task", {"name": "CSV export", "goal": "Users can export their memories as CSV"}))[
            "task_id"
        ]
        await ok(
            s1,
            "store_memory",
            {"content": "CSV columns follow the export JSON field order.", "importance": 0.9, "task_id": tid},
        )
        await ok(
            s1,
            "track_failure",
            {
                "error": "UnicodeEncodeError writing CSV",
                "component": "exporter",
                "root_cause": "file opened without utf-8",
                "fix": "open the file with encoding='utf-8' in engram/admin/export_import.py",
                "task_id": tid,
            },
        )
        h1 = await ok(
            s1,
            "session_handoff",
            {
                "summary": "CSV writer core works for ASCII",
                "next_steps": [FLAG, TESTS, DOCS, TSV, STREAM],
                "task_id": tid,
            },
        )

    # Session 2: finishes the flag and the streaming, re-plans the rest (TSV no longer planned).
    async with stdio(home, USER) as s2:
        rec = await ok(s2, "recall_memory", {"query": "CSV export", "task_id": tid})
        assert rec["handoff"]["id"] == h1["handoff_id"]
        flag_done = await ok(
            s2,
            "track_progress",
            {"feature": "--csv flag on the export command", "status": "done", "completion": 1.0, "task_id": tid},
        )
        stream_done = await ok(
            s2,
            "track_progress",
            {
                "feature": "CSV export streams rows instead of loading the whole table",
                "status": "done",
                "completion": 1.0,
                "task_id": tid,
            },
        )
        h2 = await ok(
            s2,
            "session_handoff",
            {"summary": "Flag and streaming done", "next_steps": [TESTS_REWORDED, DOCS, ESCAPE], "task_id": tid},
        )

    # Session 3: starts escaping and is killed mid-step.
    async with stdio(home, USER) as s4:
        await ok(s4, "memory_stats")  # session 4 is up before session 3 dies
        before = child_pids()
        s3 = stdio(home, USER)
        await s3.__aenter__()
        (s3_pid,) = child_pids() - before
        escape_started = await ok(
            s3,
            "track_progress",
            {
                "feature": "escaping formula characters in CSV cells",
                "status": "in_progress",
                "completion": 0.3,
                "task_id": tid,
            },
        )
        os.kill(s3_pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await s3.__aexit__(None, None, None)

        # Session 4: told of the kill once, works on the tests, hands off, then runs out of context.
        (killed,) = await recall_until_reported(s4, "CSV export")
        assert killed["task"]["id"] == tid and killed["reason"] == "connection_lost"
        assert killed["last_progress"]["id"] == escape_started["memory_id"]
        tests_started = await ok(
            s4,
            "track_progress",
            {"feature": "CSV exporter tests", "status": "in_progress", "completion": 0.5, "task_id": tid},
        )
        h3 = await ok(
            s4,
            "session_handoff",
            {
                "summary": "Tests half written; escaping was interrupted",
                "next_steps": [TESTS_REWORDED, DOCS, ESCAPE, PROGRESS_BAR],
                "task_id": tid,
            },
        )
        gone = await ok(s4, "report_interruption", {"reason": "context_overflow", "task_id": tid})
        assert gone["status"] == "interrupted" and gone["reason"] == "context_overflow"
        s4_id = gone["session_id"]

    # Session 5: starts fresh, finds the task, and resumes it.
    async with stdio(home, USER) as s5:
        tasks = (await ok(s5, "list_tasks"))["tasks"]
        assert tasks[0]["id"] == tid and tasks[0]["last_activity"]["memory_type"] == "handoff"
        rec = await ok(s5, "recall_memory", {"query": "CSV export"})
        assert [(s["session_id"], s["reason"]) for s in rec["interrupted_sessions"]] == [
            (s4_id, "context_overflow")
        ]  # the kill was reported to session 4 already: not again
        assert (await ok(s5, "recall_memory", {"query": "CSV export"}))["interrupted_sessions"] == []

        view = await ok(s5, "get_task", {"task_id": tid})
        resume = await ok(s5, "resume_task", {"task_id": tid})

    for plan in (view["plan"], resume["plan"]):
        assert len(plan) == 7
        by_step = {e["step"]: e for e in plan}
        assert set(by_step) == {FLAG, TESTS_REWORDED, DOCS, TSV, STREAM, ESCAPE, PROGRESS_BAR}
        expect = {
            FLAG: ("done", flag_done["memory_id"]),
            STREAM: ("done", stream_done["memory_id"]),
            TESTS_REWORDED: ("in_progress", tests_started["memory_id"]),
            ESCAPE: ("in_progress", escape_started["memory_id"]),
            DOCS: ("not_started", None),
            PROGRESS_BAR: ("not_started", None),
            TSV: ("dropped", None),
        }
        for step, (status, evidence) in expect.items():
            e = by_step[step]
            assert e["status"] == status, (step, e)
            assert (e["evidence"] or {}).get("id") == evidence, (step, e)
        # The re-planned step is one entry with both wordings and every handoff that planned it.
        assert by_step[TESTS_REWORDED]["wordings"] == [TESTS, TESTS_REWORDED]
        assert by_step[TESTS_REWORDED]["planned_in"] == [h1["handoff_id"], h2["handoff_id"], h3["handoff_id"]]
        assert by_step[TSV]["planned_in"] == [h1["handoff_id"]]

    assert resume["next_step"] == TESTS_REWORDED  # the first step in progress, in plan order
    assert resume["in_progress"] == [TESTS_REWORDED, ESCAPE]  # the progress notes are their evidence
    interrupted = {s["session_id"]: s for s in resume["interrupted_sessions"]}
    assert len(interrupted) == 2 and interrupted[s4_id]["reason"] == "context_overflow"
    assert interrupted[s4_id]["last_progress"]["id"] == tests_started["memory_id"]
    (killed_again,) = [s for k, s in interrupted.items() if k != s4_id]
    assert killed_again["reason"] == "connection_lost"
    assert killed_again["last_progress"]["id"] == escape_started["memory_id"]
    (pitfall,) = resume["pitfalls"]
    assert pitfall["component"] == "exporter" and pitfall["root_cause"] == "file opened without utf-8"
    assert "engram/admin/export_import.py" in resume["working_set"]["files"]
    assert [m["content"] for m in resume["keep"]] == ["CSV columns follow the export JSON field order."]
    text = resume["context"]
    for needle in (
        f"[done] {FLAG}",
        f"[dropped] {TSV}",
        f"[in_progress] {ESCAPE}",
        "context_overflow",
        "connection_lost",
        "root cause: file opened without utf-8",
    ):
        assert needle in text, needle
    assert resume["tokens"] <= 2000
    print("\n" + text)
