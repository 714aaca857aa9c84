"""Next-step validation: matching steps to later activity and reading its status."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engram.continuity.next_steps import (
    Activity,
    StepCheck,
    content_words,
    match_score,
    same_step,
    stronger,
    validate_steps,
)
from engram.continuity.rendering import progress_text
from engram.models.embedding import FakeEmbedder, TextVectors

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
CASES = Path(__file__).parents[1] / "data" / "nextstep_cases.json"
STEP = "Add retry with backoff to the payment webhook client"


def act(
    text: str,
    kind: str = "progress",
    status: str | None = None,
    completion: float | None = None,
    hours: int = 0,
    id: str = "a1",
) -> Activity:
    return Activity(id, kind, text, T0 + timedelta(hours=hours), status, completion)


def check(step: str, *activities: Activity, **kw) -> StepCheck:
    return validate_steps([step], list(activities), FakeEmbedder(), **kw)[0]


# ---------------------------------------------------------------- status from progress


def test_progress_done_is_done_with_evidence():
    c = check(STEP, act("payment webhook client retry with backoff", status="done", completion=1.0, id="p7"))
    assert c.status == "done"
    assert c.evidence["id"] == "p7"
    assert c.evidence["kind"] == "progress"
    assert c.evidence["text"] == "payment webhook client retry with backoff"
    assert c.evidence["created_at"] == T0.isoformat()
    assert 0.5 < c.evidence["similarity"] <= 1.0


def test_full_completion_counts_as_done_whatever_the_status():
    assert (
        check(STEP, act("payment webhook client retry backoff", status="in_progress", completion=1.0)).status == "done"
    )


@pytest.mark.parametrize("status,completion", [("in_progress", 0.4), ("blocked", None), (None, 0.5)])
def test_started_progress_is_in_progress(status, completion):
    c = check(STEP, act("payment webhook client retry backoff", status=status, completion=completion))
    assert c.status == "in_progress"
    assert c.evidence is not None


def test_planned_progress_is_not_started_and_has_no_evidence():
    c = check(STEP, act("payment webhook client retry backoff", status="planned", completion=0.0))
    assert c == StepCheck(STEP, "not_started", None)


# ---------------------------------------------------------------- other kinds


def test_handoff_items():
    done = check(STEP, act("retry with backoff in the payment webhook client", "handoff_completed"))
    doing = check(STEP, act("retry with backoff in the payment webhook client", "handoff_in_progress"))
    assert (done.status, done.evidence["kind"]) == ("done", "handoff_completed")
    assert (doing.status, doing.evidence["kind"]) == ("in_progress", "handoff_in_progress")


def test_a_failure_is_an_attempt_not_a_completion():
    c = check(STEP, act("payment webhook client retry with backoff loops forever", "failure"))
    assert c.status == "in_progress"
    assert c.evidence["kind"] == "failure"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Implemented retry with backoff in the payment webhook client", "done"),
        ("Payment webhook client now retries with backoff; merged", "done"),
        ("Started retry with backoff for the payment webhook client", "in_progress"),
        ("Retry with backoff for the payment webhook client is not implemented yet", "not_started"),
        ("Retry with backoff for the payment webhook client is still todo", "not_started"),
        ("The payment webhook client has no retry or backoff", "not_started"),
    ],
)
def test_memory_status_is_read_from_its_wording(text, expected):
    assert check(STEP, act(text, "memory")).status == expected


def test_memory_status_comes_from_the_clause_about_the_step():
    text = "Finished the payment webhook client retry with backoff; started on the refund report"
    assert check(STEP, act(text, "memory")).status == "done"
    assert check("Write the refund report", act(text, "memory")).status == "in_progress"


def test_unknown_activity_kind_is_refused():
    with pytest.raises(ValueError, match="unknown activity kind"):
        check(STEP, act("payment webhook retry", kind="note"))


# ---------------------------------------------------------------- choosing among matches


def test_strongest_status_wins_over_newer_weaker_evidence():
    c = check(
        STEP,
        act("payment webhook client retry backoff", status="done", hours=1, id="old-done"),
        act("payment webhook client retry backoff", status="in_progress", completion=0.5, hours=5, id="new-partial"),
    )
    assert (c.status, c.evidence["id"]) == ("done", "old-done")


def test_newest_breaks_ties():
    c = check(
        STEP,
        act("payment webhook client retry backoff", status="done", hours=1, id="first"),
        act("payment webhook client retry backoff", "handoff_completed", hours=9, id="latest"),
        act("payment webhook client retry backoff", status="done", hours=4, id="middle"),
    )
    assert c.evidence["id"] == "latest"
    assert c.evidence["created_at"] == (T0 + timedelta(hours=9)).isoformat()


def test_each_step_gets_its_own_evidence():
    steps = [STEP, "Write integration tests for the export endpoint", "Rotate the staging API keys"]
    acts = [
        act("export endpoint integration tests", status="done", id="tests"),
        act("payment webhook client retry backoff", status="in_progress", completion=0.3, id="retry"),
    ]
    got = validate_steps(steps, acts, FakeEmbedder())
    assert [(c.step, c.status) for c in got] == [(STEP, "in_progress"), (steps[1], "done"), (steps[2], "not_started")]
    assert [c.evidence and c.evidence["id"] for c in got] == ["retry", "tests", None]


# ---------------------------------------------------------------- what does not match


@pytest.mark.parametrize(
    "step,text,why",
    [
        ("Write integration tests for the import endpoint", "export endpoint integration tests", "contrast"),
        ("Deploy the new build to staging", "Deployed the new build to production", "contrast"),
        ("Upgrade Django to 5.0", "Django 4.2 upgrade", "identifier"),
        ("Fix the crash in parser_v2.py", "Fixed the crash in parser_v3.py", "identifier"),
        (STEP, "Add retry with backoff to the email webhook client", "substitution"),
    ],
)
def test_near_misses_conflict(step, text, why):
    assert check(step, act(text, status="done")).status == "not_started"
    assert match_score(step, text, FakeEmbedder())["conflict"].startswith(why)


def test_same_identifier_does_not_conflict():
    assert check("Upgrade Django to 5.0", act("Upgraded Django from 4.2 to 5.0", "memory")).status == "done"


def test_unrelated_activity_does_not_match():
    assert check(STEP, act("Fix typo in the login page footer", status="done")).status == "not_started"


def test_threshold_is_respected():
    a = act("payment webhook client retry backoff", status="done")
    assert check(STEP, a).status == "done"
    assert check(STEP, a, threshold=1.01).status == "not_started"


def test_empty_inputs():
    assert validate_steps([], [act("anything", status="done")], FakeEmbedder()) == []
    assert validate_steps([STEP], [], FakeEmbedder()) == [StepCheck(STEP, "not_started", None)]


def test_to_dict_round_trips_through_json():
    c = check(STEP, act("payment webhook client retry backoff", status="done", id="p1"))
    d = json.loads(json.dumps(c.to_dict()))
    assert d["step"] == STEP and d["status"] == "done" and d["evidence"]["id"] == "p1"
    assert StepCheck(STEP, "not_started", None).to_dict()["evidence"] is None


def test_content_words_expand_abbreviations_and_keep_nouns():
    assert content_words("Document the CLI flags") == content_words("document the command-line flags")
    # "settings" stems to "set"; it must survive as a content word, not as the verb "set"
    assert len(content_words("the settings page")) == 2
    assert content_words("Added it, done and merged") == []
    assert "parser_v2.py" in content_words("Fix parser_v2.py")


# ---------------------------------------------------------------- labelled set, real model


def _cases() -> list[dict]:
    return json.loads(CASES.read_text())


def _case_activities(c: dict) -> list[dict]:
    """A case has one activity, or a chain of them (several handoffs), oldest first."""
    return c.get("activities") or [c["activity"]]


def test_labelled_cases_are_well_formed():
    cases = _cases()
    assert len(cases) >= 150
    for c in cases:
        assert c["expected"] in ("done", "in_progress", "not_started")
        assert ("activity" in c) != ("activities" in c)
        for a in _case_activities(c):
            assert a["kind"] in ("progress", "memory", "handoff_completed", "handoff_in_progress", "failure")
            assert a["text"].strip()
        assert c["step"].strip() and c["note"].strip()
    assert {c["expected"] for c in cases} == {"done", "in_progress", "not_started"}
    notes = " ".join(c["note"] for c in cases)
    for kind in ("chain", "re-planned", "near miss", "started", "contrast", "identifier"):
        assert kind in notes, f"no labelled case of kind {kind!r}"


def _engine_activities(c: dict, i: int, embedder) -> tuple[list[Activity], list]:
    """The case's activities as the engine passes them: a progress snapshot is compared through
    the vector stored for it (its rendered text), the rest by their own text."""
    acts, vecs = [], []
    for j, a in enumerate(_case_activities(c)):
        acts.append(
            Activity(
                f"case{i}.{j}", a["kind"], a["text"], T0 + timedelta(hours=j), a.get("status"), a.get("completion")
            )
        )
        if a["kind"] == "progress":
            doc = {
                "feature": a["text"],
                "status": a.get("status") or "in_progress",
                "completion": a.get("completion") or 0.0,
                "notes": "",
            }
            vecs.append(embedder.embed_batch([progress_text(doc)])[0])
        else:
            vecs.append(None)
    return acts, vecs


@pytest.mark.model
def test_labelled_cases_accuracy_with_real_model(real_embedder):
    cases = _cases()
    failures = []
    for i, c in enumerate(cases):
        acts, vecs = _engine_activities(c, i, real_embedder)
        got = validate_steps([c["step"]], acts, real_embedder, vectors=vecs)[0]
        if got.status != c["expected"]:
            last = acts[-1].text
            detail = match_score(c["step"], last, real_embedder)
            failures.append(
                f"expected {c['expected']}, got {got.status} "
                f"(score {detail['score']:.2f}, conflict {detail['conflict']}): "
                f"{c['step']!r} vs {last!r} [{c['note']}]"
            )
    accuracy = 1 - len(failures) / len(cases)
    print(f"\nnext-step accuracy {accuracy:.3f} ({len(cases) - len(failures)}/{len(cases)})")
    for f in failures:
        print("  FAIL", f)
    assert accuracy >= 0.95


# ---------------------------------------------------------------- engine support


def test_given_vectors_are_used_instead_of_embedding_the_activity():
    class Refusing(FakeEmbedder):
        def embed_batch(self, texts):
            assert "payment webhook client retry backoff" not in texts, "activity embedded again"
            return super().embed_batch(texts)

    a = act("payment webhook client retry backoff", status="done")
    vec = FakeEmbedder().embed_batch([a.text])[0]
    assert validate_steps([STEP], [a], Refusing(), vectors=[vec])[0].status == "done"
    with pytest.raises(ValueError, match="vectors for"):
        validate_steps([STEP], [a], FakeEmbedder(), vectors=[])


def test_text_vectors_embed_each_text_once():
    calls = []

    class Counting(FakeEmbedder):
        def embed_batch(self, texts):
            calls.append(list(texts))
            return super().embed_batch(texts)

    tv = TextVectors(Counting(), size=2)
    first = tv.embed_batch(["a b", "c d", "a b"])
    again = tv.embed_batch(["a b"])
    assert calls == [["a b", "c d"]] and (first[0] == again[0]).all()
    tv.embed_batch(["e f"])  # over the size: the least recently used ("c d") goes
    tv.embed_batch(["c d"])
    assert calls[-1] == ["c d"]


def test_stronger_keeps_the_evidence_validate_steps_would_pick():
    old_done = check(STEP, act("payment webhook client retry backoff", status="done", hours=1, id="d"))
    new_partial = check(
        STEP, act("payment webhook client retry backoff", status="in_progress", completion=0.5, hours=5, id="p")
    )
    nothing = StepCheck(STEP, "not_started", None)
    assert stronger(old_done, new_partial) is old_done
    assert stronger(nothing, new_partial) is new_partial
    newer_done = check(STEP, act("payment webhook client retry backoff", status="done", hours=9, id="n"))
    assert stronger(old_done, newer_done) is newer_done


def test_same_step_folds_rewordings_not_near_misses():
    fake = FakeEmbedder()
    assert same_step("write csv exporter tests", "csv exporter tests: write them", fake)
    assert not same_step("Deploy the new build to staging", "Deploy the new build to production", fake)
    assert not same_step("Upgrade Django to 5.0", "Upgrade Django to 4.2", fake)
    assert not same_step(STEP, "Fix typo in the login page footer", fake)


def test_words_that_name_the_same_thing_agree():
    assert content_words("cache for one hour") == content_words("cache for 1 hour")
    assert content_words("one-hour cache") == content_words("1 hour cache")
    assert content_words("e2e tests") == content_words("end-to-end tests")
    # inflected members of a contrast set still conflict
    assert match_score("Enable gzip on the server", "gzip disabled on the server", FakeEmbedder())[
        "conflict"
    ].startswith("contrast")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Retry with backoff for the payment webhook client has not started yet", "not_started"),
        ("Backfilled retry with backoff for the payment webhook client", "done"),
        ("Blocked retry with backoff for the payment webhook client on review", "not_started"),
    ],
)
def test_memory_status_reads_negated_starts_and_past_tense_reports(text, expected):
    assert check(STEP, act(text, "memory")).status == expected
