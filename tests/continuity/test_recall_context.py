"""What an agent reads: recall_context and get_context (the pinned handoff, related failures,
interruptions in the text, pitfalls once) and the prompt block with the memory rules."""

from __future__ import annotations

from tests.continuity.plan_support import three_step_task


def test_related_failures_attached_for_a_component(eng):
    eng.track_failure("OOM while resizing images", "image-worker", "no size cap")
    eng.store("The image-worker runs on two replicas.")
    r = eng.recall_context("how many replicas does the worker run", memory_type="fact")
    assert r["related_failures"] and r["related_failures"][0]["component"] == "image-worker"


def test_get_context_text_tells_of_an_interrupted_session(eng):
    """The interruption is reported once: the <memory> block says it too, with the reason, the task
    and the last progress, so an agent that reads only the text learns the last session was cut off."""
    eng.touch_session("A", client="agent-a")
    t = eng.create_task("Rate limiter", session_id="A")
    eng.track_progress("token bucket middleware", "in_progress", 0.5, task_id=t.id, session_id="A")
    eng.handoff("Bucket half done", next_steps=["finish the token bucket middleware"], task_id=t.id, session_id="A")
    eng.report_interruption("A", "context_overflow", task_id=t.id)
    eng.touch_session("B")
    out = eng.context("rate limiter", task_id=t.id, session_id="B")
    assert [s["session_id"] for s in out["interrupted_sessions"]] == ["A"]
    line = next(x for x in out["context"].splitlines() if x.startswith("- interrupted session A "))
    assert "(context_overflow, " in line and "task: Rate limiter" in line
    assert "last progress: Progress on token bucket middleware: in_progress (50%)" in line
    assert out["tokens"] <= 1500
    assert "interrupted session" not in eng.context("rate limiter", task_id=t.id, session_id="B")["context"]


def test_pitfalls_are_listed_once_and_without_empty_brackets(eng):
    """A failure stored with store_memory has no component: get_context and resume_task print it
    without `[]`; a pitfall get_context already packed as a memory is not printed again."""
    t = eng.create_task("OAuth2 login", goal="Replace session cookies with OAuth2")
    eng.store("Never log the OAuth2 refresh token; debug logs leaked it once.", memory_type="failure", task_id=t.id)
    eng.track_failure(
        "redirect_uri_mismatch from the OAuth2 provider",
        "oauth-callback",
        "trailing slash in the registered URI",
        task_id=t.id,
    )
    text = eng.context("OAuth2 refresh token and redirect", task_id=t.id)["context"]
    assert "[]" not in text
    for needle in ("Never log the OAuth2 refresh token", "redirect_uri_mismatch"):
        assert text.count(needle) == 1, text
    resume = eng.resume_task(t.id)["context"]
    assert "[]" not in resume
    assert "- Never log the OAuth2 refresh token; debug logs leaked it once." in resume
    assert "- [oauth-callback] redirect_uri_mismatch from the OAuth2 provider" in resume


def test_recall_context_ranks_once_and_pins_the_handoff_from_those_hits(eng, monkeypatch):
    import engram.engine.recall
    from engram.search import ranking as retrieve

    calls = []

    def counted(*args, **kwargs):
        calls.append(kwargs.get("limit"))
        return retrieve.rank(*args, **kwargs)

    monkeypatch.setattr(engram.engine.recall, "rank", counted)
    task = eng.create_task("Billing export")
    h = eng.handoff(
        "Billing export writes the invoice CSV; the totals row is missing",
        next_steps=["Add the totals row to the invoice CSV"],
        task_id=task.id,
    )
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
    eng.track_failure("The reindex job ran out of memory on the 2 GB runner", component="reindex", task_id=task.id)
    r = eng.recall_context("reindex job out of memory runner")
    assert r["handoff"] is not None and r["handoff"]["id"] == h.id
    assert r["memories"][0]["pinned"] and "open task" in r["memories"][0]["evidence"]
    eng.update_task(task.id, status="done")
    assert eng.recall_context("reindex job out of memory runner")["handoff"] is None


def test_prompt_block_has_the_rules_and_open_tasks(eng, clock):
    from engram.continuity.rendering import MEMORY_RULES

    t = three_step_task(eng, clock)
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
