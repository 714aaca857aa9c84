"""Tasks, sessions, handoffs with next-step validation, failures, progress, quality."""

import pytest

from engram import Engram, EngramError, NotFound
from engram.api import Api, Ctx
from engram.models.embedding import FakeEmbedder


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
    with pytest.raises(EngramError, match="limit must be an integer from 1 to 1000"):
        eng.task_view(t.id, limit=0)


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


def test_failure_text_reads_as_sentences(eng):
    """The error, root cause and fix are separate sentences, never one run-on line; text that
    already ends a sentence gets no second full stop."""
    r = eng.track_failure("redirect_uri_mismatch from the provider", "oauth-callback",
                          "trailing slash in the registered URI", fix="register it without the slash")
    assert r.memory.content == ("Failure in oauth-callback: redirect_uri_mismatch from the provider. "
                                "Root cause: trailing slash in the registered URI. "
                                "Fix: register it without the slash")
    r = eng.track_failure("Build failed!", "ci", fix="pin the runner image.")
    assert r.memory.content == "Failure in ci: Build failed! Fix: pin the runner image."
    assert eng.track_failure("timeout", "worker").memory.content == "Failure in worker: timeout"


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


# ---------------------------------------------------------------- the plan across handoffs

def _three_step_task(eng, clock):
    t = eng.create_task("CSV export", "Export memories as CSV")
    eng.touch_session("A")
    eng.handoff("Writer works", next_steps=["add csv flag to export command", "write csv exporter tests",
                                            "support tsv output"], task_id=t.id, session_id="A")
    eng.end_session("A", clean=True)
    clock.advance(minutes=10)
    return t


def test_a_step_finished_between_handoffs_stays_done(eng, clock):
    t = _three_step_task(eng, clock)
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
    t = _three_step_task(eng, clock)
    eng.track_progress("support tsv output", "in_progress", 0.2, task_id=t.id)
    clock.advance(minutes=1)
    eng.handoff("Later", next_steps=["write csv exporter tests"], task_id=t.id)
    plan = {e["step"]: e["status"] for e in eng.task_plan(t.id)}
    assert plan["support tsv output"] == "in_progress"


def test_later_handoff_items_are_evidence_for_earlier_steps(eng, clock):
    t = _three_step_task(eng, clock)
    h2 = eng.handoff("Progress", completed=["csv flag for the export command"],
                     in_progress=["csv exporter tests"], next_steps=["write csv exporter tests"], task_id=t.id)
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
    t = _three_step_task(eng, clock)
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
    steps = {c["step"]: c["status"] for c in eng.recall_context("csv", task_id=t.id)["handoff"]
             ["next_steps_validation"]}
    assert steps["write csv exporter tests"] == "in_progress"
    eng.close()


def test_deleted_evidence_no_longer_counts(eng, clock):
    t = _three_step_task(eng, clock)
    p = eng.track_progress("csv flag on export command", "done", 1.0, task_id=t.id)
    h = eng.latest_handoff(eng.settings.user_id, t.id)
    assert eng.step_checks(h)[0].status == "done"
    eng.forget(memory_id=p.id)
    assert eng.step_checks(h)[0].status == "not_started"


# ---------------------------------------------------------------- interruptions with a reason

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


# ---------------------------------------------------------------- list_tasks, resume_task, prompt

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
    t = _three_step_task(eng, clock)
    eng.touch_session("S")
    eng.store("CSV columns follow the export JSON field order.", importance=0.9, task_id=t.id)
    eng.track_failure("UnicodeEncodeError writing CSV", "exporter", "file opened without utf-8",
                      task_id=t.id, fix="open engram/admin/export_import.py output with encoding='utf-8'")
    eng.track_progress("csv exporter tests", "in_progress", 0.4, task_id=t.id, session_id="S",
                       notes="tests/store/test_transfer.py has the first two cases")
    eng.track_progress("tsv output", "blocked", 0.1, task_id=t.id, notes="waiting on a decision")
    eng.report_interruption("S", "rate_limit", task_id=t.id)
    return t


def test_resume_task_gives_the_continuation(eng, clock):
    t = _resumable(eng, clock)
    r = eng.resume_task(t.id)
    assert r["task"]["id"] == t.id and r["latest_handoff"]["summary"] == "Writer works"
    assert {e["step"]: e["status"] for e in r["plan"]} == {
        "add csv flag to export command": "not_started", "write csv exporter tests": "in_progress",
        "support tsv output": "in_progress"}
    assert r["next_step"] == "write csv exporter tests"
    assert "tsv output: waiting on a decision" in r["blocked"]
    (pit,) = r["pitfalls"]
    assert (pit["component"], pit["root_cause"]) == ("exporter", "file opened without utf-8")
    assert [m["content"] for m in r["keep"]] == ["CSV columns follow the export JSON field order."]
    assert r["working_set"] == {"files": ["engram/admin/export_import.py", "tests/store/test_transfer.py"],
                                "components": ["exporter"]}
    (s,) = r["interrupted_sessions"]
    assert s["session_id"] == "S" and s["reason"] == "rate_limit"
    text = r["context"]
    assert text.startswith("<resume>\nTask " + t.id) and text.endswith("</resume>")
    for needle in ("Next step: write csv exporter tests", "[in_progress] write csv exporter tests",
                   "root cause: file opened without utf-8", "rate_limit", "tests/store/test_transfer.py"):
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


def test_prompt_block_has_the_rules_and_open_tasks(eng, clock):
    from engram.continuity.rendering import MEMORY_RULES
    t = _three_step_task(eng, clock)
    closed = eng.create_task("Closed one")
    eng.update_task(closed.id, status="done")
    text = eng.prompt_block()
    assert text.startswith(MEMORY_RULES.rstrip())
    assert t.id in text and closed.id not in text
    assert "  - next: write csv exporter tests [not_started]" in text


def test_readme_memory_rules_block_is_the_one_engram_prompt_prints():
    from pathlib import Path

    from engram.continuity.rendering import MEMORY_RULES
    readme = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text(encoding="utf-8")
    assert "```markdown\n" + MEMORY_RULES + "```" in readme


def test_pitfalls_are_listed_once_and_without_empty_brackets(eng):
    """A failure stored with store_memory has no component: get_context and resume_task print it
    without `[]`; a pitfall get_context already packed as a memory is not printed again."""
    t = eng.create_task("OAuth2 login", goal="Replace session cookies with OAuth2")
    eng.store("Never log the OAuth2 refresh token; debug logs leaked it once.", memory_type="failure",
              task_id=t.id)
    eng.track_failure("redirect_uri_mismatch from the OAuth2 provider", "oauth-callback",
                      "trailing slash in the registered URI", task_id=t.id)
    text = eng.context("OAuth2 refresh token and redirect", task_id=t.id)["context"]
    assert "[]" not in text
    for needle in ("Never log the OAuth2 refresh token", "redirect_uri_mismatch"):
        assert text.count(needle) == 1, text
    resume = eng.resume_task(t.id)["context"]
    assert "[]" not in resume
    assert "- Never log the OAuth2 refresh token; debug logs leaked it once." in resume
    assert "- [oauth-callback] redirect_uri_mismatch from the OAuth2 provider" in resume


def test_a_long_handoff_failure_or_progress_is_one_record(eng, settings):
    """Over ENGRAM_CHUNK_SIZE a memory is split into chunks; a handoff, failure or progress
    record is not: split, one handoff read as two (two in get_task, the plan planned twice)."""
    t = eng.create_task("CSV export")
    steps = [f"Step {i}: implement the part of the exporter that handles case {i} carefully" for i in range(20)]
    h = eng.handoff("A long handoff", completed=["the writer core"], next_steps=steps, task_id=t.id)
    assert len(h.content) > settings.chunk_size and "chunk_group" not in h.metadata
    failure = eng.track_failure("UnicodeEncodeError " * 80, "exporter", "locale encoding " * 40, task_id=t.id)
    progress = eng.track_progress("CSV exporter tests", "in_progress", 0.5, task_id=t.id,
                                  notes="covered: " + "accents, emoji, right-to-left text; " * 40)
    assert failure.action == "new" and failure.chunks == () and "chunk_group" not in progress.metadata
    view = eng.task_view(t.id)
    assert view["counts"] == {"timeline": 3, "handoffs": 1, "failures": 1, "progress": 1, "memories": 0}
    assert view["handoffs"][0]["content"] == h.content
    assert [e["step"] for e in view["plan"]] == steps and all(e["planned_in"] == [h.id] for e in view["plan"])
    # A plain long memory is still chunked.
    assert len(eng.store("A long note. " * 200, task_id=t.id).chunks) > 1


def test_a_tag_or_handoff_item_of_a_document_length_is_refused(eng):
    """Tags are labels and handoff items steps: both are printed whole wherever they show up, so
    one of document length is refused with its length, not stored."""
    with pytest.raises(EngramError, match="a tag is at most 200 characters; got one of 5,000"):
        eng.store("Deploys go to Fly.io", tags=["ops", "a" * 5000])
    assert eng.store("Deploys go to Fly.io", tags=["a" * 200]).memory.tags == ("a" * 200,)
    t = eng.create_task("CSV export")
    with pytest.raises(EngramError, match="next_steps: an item is at most 2,000 characters; got one of 50,000"):
        eng.handoff("s", next_steps=["Add a flag", "x" * 50_000], task_id=t.id)
    assert eng.task_view(t.id)["counts"]["handoffs"] == 0


def test_get_context_text_tells_of_an_interrupted_session(eng):
    """The interruption is reported once: the <memory> block says it too, with the reason, the task
    and the last progress, so an agent that reads only the text learns the last session was cut off."""
    eng.touch_session("A", client="agent-a")
    t = eng.create_task("Rate limiter", session_id="A")
    eng.track_progress("token bucket middleware", "in_progress", 0.5, task_id=t.id, session_id="A")
    eng.handoff("Bucket half done", next_steps=["finish the token bucket middleware"], task_id=t.id,
                session_id="A")
    eng.report_interruption("A", "context_overflow", task_id=t.id)
    eng.touch_session("B")
    out = eng.context("rate limiter", task_id=t.id, session_id="B")
    assert [s["session_id"] for s in out["interrupted_sessions"]] == ["A"]
    line = next(x for x in out["context"].splitlines() if x.startswith("- interrupted session A "))
    assert "(context_overflow, " in line and "task: Rate limiter" in line
    assert "last progress: Progress on token bucket middleware: in_progress (50%)" in line
    assert out["tokens"] <= 1500
    assert "interrupted session" not in eng.context("rate limiter", task_id=t.id, session_id="B")["context"]


def test_recall_context_ranks_once_and_pins_the_handoff_from_those_hits(eng, monkeypatch):
    import engram.engine.recall
    from engram.search import ranking as retrieve
    calls = []

    def counted(*args, **kwargs):
        calls.append(kwargs.get("limit"))
        return retrieve.rank(*args, **kwargs)
    monkeypatch.setattr(engram.engine.recall, "rank", counted)
    task = eng.create_task("Billing export")
    h = eng.handoff("Billing export writes the invoice CSV; the totals row is missing",
                    next_steps=["Add the totals row to the invoice CSV"], task_id=task.id)
    eng.store("The invoice CSV uses semicolons as separators")
    eng.store("Deploys go to Fly.io from the main branch")
    r = eng.recall_context("invoice CSV totals row")
    assert len(calls) == 1  # the hits and the pinned handoff come from one ranking
    assert r["memories"][0]["id"] == h.id and r["memories"][0]["pinned"] and r["handoff"]["id"] == h.id
    # A later handoff of the same task is what is pinned (fetched by its task, not ranked again).
    later = eng.handoff("Totals row added", next_steps=["Ship the billing export"], task_id=task.id)
    calls.clear()
    r = eng.recall_context("invoice CSV totals row")
    assert len(calls) == 1 and r["handoff"]["id"] == later.id
    # Nothing relevant: no handoff is pinned.
    calls.clear()
    assert eng.recall_context("kubernetes ingress certificates")["handoff"] is None and len(calls) == 1


def test_a_hit_of_an_open_task_pins_that_tasks_latest_handoff(eng):
    """The handoff itself need not rank: a strong hit of an open task's own work leads to where
    that task's last session stopped (fetched by the task); a done task's does not."""
    task = eng.create_task("Search tuning")
    h = eng.handoff("Stopped halfway through the session", next_steps=["Measure again"], task_id=task.id)
    eng.track_failure("The reindex job ran out of memory on the 2 GB runner", component="reindex",
                      task_id=task.id)
    r = eng.recall_context("reindex job out of memory runner")
    assert r["handoff"] is not None and r["handoff"]["id"] == h.id
    assert r["memories"][0]["pinned"] and "open task" in r["memories"][0]["evidence"]
    eng.update_task(task.id, status="done")
    assert eng.recall_context("reindex job out of memory runner")["handoff"] is None
