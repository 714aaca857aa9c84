"""The continuity records themselves (failures, progress, handoffs): their text, their
limits, and one record however long."""

from __future__ import annotations

import pytest

from engram import EngramError, NotFound


def test_failure_text_reads_as_sentences(eng):
    """The error, root cause and fix are separate sentences, never one run-on line; text that
    already ends a sentence gets no second full stop."""
    r = eng.track_failure(
        "redirect_uri_mismatch from the provider",
        "oauth-callback",
        "trailing slash in the registered URI",
        fix="register it without the slash",
    )
    assert r.memory.content == (
        "Failure in oauth-callback: redirect_uri_mismatch from the provider. "
        "Root cause: trailing slash in the registered URI. "
        "Fix: register it without the slash"
    )
    r = eng.track_failure("Build failed!", "ci", fix="pin the runner image.")
    assert r.memory.content == "Failure in ci: Build failed! Fix: pin the runner image."
    assert eng.track_failure("timeout", "worker").memory.content == "Failure in worker: timeout"


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


def test_a_long_handoff_failure_or_progress_is_one_record(eng, settings):
    """Over ENGRAM_CHUNK_SIZE a memory is split into chunks; a handoff, failure or progress
    record is not: split, one handoff read as two (two in get_task, the plan planned twice)."""
    t = eng.create_task("CSV export")
    steps = [f"Step {i}: implement the part of the exporter that handles case {i} carefully" for i in range(20)]
    h = eng.handoff("A long handoff", completed=["the writer core"], next_steps=steps, task_id=t.id)
    assert len(h.content) > settings.chunk_size and "chunk_group" not in h.metadata
    failure = eng.track_failure("UnicodeEncodeError " * 80, "exporter", "locale encoding " * 40, task_id=t.id)
    progress = eng.track_progress(
        "CSV exporter tests",
        "in_progress",
        0.5,
        task_id=t.id,
        notes="covered: " + "accents, emoji, right-to-left text; " * 40,
    )
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
