"""Gists (docs/lifecycle.md#gists): recurring captured episodes and pitfalls of one project become
one memory of what they share, traceable line by line; a second run writes none again; projects
never mix; the members fade to the working tier. On the virtual clock, through the capture path."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from engram import Engram
from engram.admin.gists import GIST_TAG, trace, units_of
from engram.admin.maintenance import consolidate_memory
from engram.admin.stats import memory_stats
from engram.api import Api
from engram.core.types import Ctx, Scope
from engram.search.decay import base_stability
from engram.workflows.lifecycle import prompt_memories
from tests.conftest import memory_path

PROJECT = "example.com/shop"
OTHER = "example.com/blog"
FLAKY = "The checkout test fails because the clock in tests/test_checkout.py is not frozen."
FIX = "Freeze the clock with the frozen_clock fixture before computing the total."
NEW_QUESTION = "checkout test keeps failing, what fixes it"
QUESTIONS = [
    "why does test_checkout fail on CI again",
    "test_checkout is red once more, what is wrong",
    "checkout total test failing in the pipeline, any idea",
    "the checkout test broke again today",
]


@pytest.fixture
def api(eng):
    return Api(eng)


SEEN: dict[str, str] = {}  # every memory's text as it was before a run (sources pruned since included)


@pytest.fixture(autouse=True)
def _seen():
    SEEN.clear()


def maintain(eng, apply: bool = True) -> dict:
    """One maintenance run, as the scheduler does, recording every text stored before it."""
    SEEN.update((m.id, m.content) for m, _ in eng.store_db.iter_memory_rows())
    return consolidate_memory(eng, apply=apply)


def episode(api: Api, session: str, request: str, answer: str, project: str = PROJECT) -> None:
    ctx = Ctx(session_id=session, project=project, client="claude-code")
    r = api.call("session_capture", {"episodes": [{"request": request, "answer": answer}]}, ctx)
    assert r["episodes"] == 1, r


def recurring(api: Api, clock, n: int = 4, project: str = PROJECT, start: int = 0, days: float = 3) -> None:
    """The same problem, asked in other words in each of `n` sessions `days` apart, with
    maintenance every 12 virtual hours in between."""
    for i in range(start, start + n):
        answer = f"{FLAKY} {FIX} Run `pytest tests/test_checkout.py -x` to check it, attempt {i}."
        episode(api, f"{project}-s{i}", QUESTIONS[i % len(QUESTIONS)], answer, project)
        for _ in range(int(days * 2)):
            clock.advance(hours=12)
            maintain(api.eng)


def gists(eng) -> list:
    page = eng.list_memories(tags=[GIST_TAG], limit=100, in_project=None)
    return [eng.get(m["id"]) for m in page["memories"]]


def texts(eng) -> dict[str, str]:
    return {**SEEN, **{m.id: m.content for m, _ in eng.store_db.iter_memory_rows()}}


def test_a_burst_becomes_one_traceable_gist_and_the_dry_run_writes_nothing(eng, api, clock):
    recurring(api, clock, n=3, days=0)  # three sessions in one day, no run in between
    episode(api, "other-s", "what colour is the logo", "The logo is teal on white, see brand/logo.svg.")

    dry = maintain(eng, apply=False)
    assert [g["action"] for g in dry["gists"]] == ["new"] and dry["gists"][0]["into"] is None
    assert gists(eng) == []  # the dry run wrote nothing
    assert all(m.tier == "episodic" for m, _ in eng.store_db.iter_memory_rows())

    report = maintain(eng)
    [entry] = report["gists"]
    assert entry["sources"] == 3 and entry["sessions"] == 3
    [g] = gists(eng)
    meta = g.metadata["gist"]
    assert g.id == entry["into"] and g.tier == "semantic" and g.project == PROJECT
    lines = g.content.splitlines()
    assert lines[0] == f"Gist of 3 episodes in 3 sessions, {meta['first'][:10]}..{meta['last'][:10]}:"
    assert f"- {FLAKY} (3 of 3)" in lines and f"- {FIX} (3 of 3)" in lines
    assert "- pytest tests/test_checkout.py -x (3 of 3)" in lines
    # What it answers: each question its sources were asked, as asked, in the order asked, after
    # what it says (a block that cuts the gist short keeps the answer).
    assert lines[-3:] == [f"- User: {q} (1 of 3)" for q in QUESTIONS[:3]]
    assert "logo" not in g.content  # not a member
    # Every line is the verbatim text of what each source it names says.
    src = texts(eng)
    assert trace(g.content, meta, src) == []
    for line in meta["lines"]:
        assert any(line["text"] in src[i] for i in line["sources"])
    # Linked to its sources, which fade to the working tier (recorded); its stability is theirs combined.
    members = [eng.get(i) for i in meta["sources"]]
    assert set(g.provenance) == {m.id for m in members}
    assert all(m.tier == "working" for m in members)
    assert eng.history(members[0].id)[-1]["detail"] == {
        "from": "episodic",
        "to": "working",
        "by": "gist",
        "gist": g.id,
    }
    assert g.stability == pytest.approx(sum(base_stability(m) for m in members))
    assert [e["action"] for e in eng.history(g.id)] == ["consolidate"]
    # Findable by a new phrasing of the question its sources answered.
    hits = [h.memory.id for h in eng.recall(NEW_QUESTION, limit=5, reinforce=False, scope=Scope(PROJECT))]
    assert g.id in hits
    assert memory_stats(eng)["gists"] == 1
    assert memory_stats(eng)["totals"]["gists_written"] == 1


def test_a_problem_back_every_week_makes_its_gist_though_each_episode_fades_in_days(eng, api, clock):
    # An episode alone fades below the prune floor in about three days; a captured memory waits
    # ENGRAM_GIST_WINDOW_DAYS for its next occurrence, and a pair from two sessions PENDING_DAYS for a third.
    episode(api, "lone", "what colour is the logo", "The logo is teal on white, see brand/logo.svg.")
    recurring(api, clock, n=4, days=7)
    [g] = gists(eng)
    assert g.content.startswith("Gist of 4 episodes in 4 sessions")
    assert f"- {FLAKY} (4 of 4)" in g.content
    assert trace(g.content, g.metadata["gist"], texts(eng)) == []
    # The episodes themselves are gone or going: faded, then pruned; the gist stays.
    for _ in range(10):
        clock.advance(hours=12)
        maintain(eng)
    left = {m.id for m, _ in eng.store_db.iter_memory_rows()}
    assert not left & set(g.metadata["gist"]["sources"])
    assert not any("logo" in SEEN[i] for i in left if i in SEEN)  # the lone episode went after its window
    assert eng.get(g.id).status == "active"
    hits = [h.memory.id for h in eng.recall(NEW_QUESTION, limit=5, reinforce=False, scope=Scope(PROJECT))]
    assert g.id in hits


def test_a_second_run_writes_no_gist_and_a_new_member_joins_the_one_there(eng, api, clock):
    recurring(api, clock, n=4, days=0)
    maintain(eng)
    [g] = gists(eng)
    before = eng.get(g.id)

    again = maintain(eng)
    assert again["gists"] == []
    assert [x.id for x in gists(eng)] == [g.id] and eng.get(g.id).content == before.content

    clock.advance(days=1)
    recurring(api, clock, n=1, start=4, days=0)  # the problem comes back in a fifth session
    third = maintain(eng)
    assert [(x["action"], x["into"]) for x in third["gists"]] == [("update", g.id)]
    [after] = gists(eng)
    assert after.id == g.id
    assert after.content.startswith("Gist of 5 episodes in 5 sessions")
    assert f"- {FLAKY} (5 of 5)" in after.content
    assert after.stability > before.stability
    assert trace(after.content, after.metadata["gist"], texts(eng)) == []
    assert maintain(eng)["gists"] == []
    assert len(gists(eng)) == 1


def test_what_pruned_sources_said_still_counts(eng, api, clock):
    recurring(api, clock, n=4, days=0)
    maintain(eng)
    [g] = gists(eng)
    gone = g.metadata["gist"]["sources"][:2]
    eng.remove_memories(gone)
    recurring(api, clock, n=1, start=4, days=0)
    maintain(eng)
    after = eng.get(g.id)
    assert f"- {FLAKY} (5 of 5)" in after.content
    assert set(gone) <= set(after.metadata["gist"]["sources"])
    assert trace(after.content, after.metadata["gist"], texts(eng)) == []


def test_projects_never_share_a_gist(eng, api, clock):
    # Two occurrences in each project: four alike episodes, but no project has three.
    recurring(api, clock, n=2, project=PROJECT, days=0)
    recurring(api, clock, n=2, project=OTHER, start=2, days=0)
    assert maintain(eng)["gists"] == []
    recurring(api, clock, n=1, project=OTHER, start=0, days=0)
    maintain(eng)
    [g] = gists(eng)
    assert g.project == OTHER
    members = [eng.get(i) for i in g.metadata["gist"]["sources"]]
    assert {m.project for m in members} == {OTHER} and len(members) == 3


def test_one_session_is_no_recurrence(eng, api, clock):
    for i in range(4):  # four times in one session: a conversation, not a recurrence
        episode(api, "only", QUESTIONS[i], f"{FLAKY} {FIX} attempt {i}.")
    assert maintain(eng, apply=False)["gists"] == []
    episode(api, "later", QUESTIONS[0], f"{FLAKY} {FIX} attempt 9.")  # a second session: now it recurs
    [entry] = maintain(eng, apply=False)["gists"]
    assert entry["sources"] == 5 and entry["sessions"] == 2


def test_redacted_sentences_are_never_in_a_gist(eng, api, clock):
    for i in range(3):
        answer = f"{FLAKY} Set API_TOKEN=sk-live-{'x' * 20}{i} in the shell first. {FIX}"
        episode(api, f"s{i}", QUESTIONS[i], answer)
    maintain(eng)
    [g] = gists(eng)
    assert "[REDACTED]" not in g.content and "sk-live" not in g.content
    assert FLAKY in g.content


def test_recurring_pitfalls_gist_as_a_failure(eng, api, clock):
    for i in range(3):
        fix = {
            "program": "pytest",
            "signature": "AssertionError: assert 99 == 100",
            "location": "tests/test_checkout.py:42",
            "command": "pytest tests/test_checkout.py",
            "passed": "pytest tests/test_checkout.py",
            "edits": [{"file": "shop/cart.py", "hunk": f"- total = round(total)\n+ total = round(total, {i + 2})"}],
            "key": f"key{i}",
        }
        ctx = Ctx(session_id=f"fix-s{i}", project=PROJECT, client="claude-code")
        assert api.call("session_capture", {"fixes": [fix]}, ctx)["fixes"] == 1
        clock.advance(days=5)
        maintain(eng)
    [g] = gists(eng)
    assert g.memory_type == "failure" and g.content.startswith("Gist of 3 failures in 3 sessions")
    assert "shop/cart.py" in g.content and "AssertionError: assert 99 == 100" in g.content
    assert trace(g.content, g.metadata["gist"], texts(eng)) == []
    # The prompt hook injects it, as it would a pitfall: what the fixes share, once the pitfalls are gone.
    clock.advance(days=20)
    maintain(eng)
    assert [m.id for m, _ in eng.store_db.iter_memory_rows()] == [g.id]
    shown = prompt_memories(
        eng, None, "AssertionError: assert 99 == 100 in pytest tests/test_checkout.py", 300, 5, PROJECT
    )
    assert shown["memory_ids"] == [g.id] and "shop/cart.py" in shown["context"]


def test_trace_catches_an_invented_line(eng, api, clock):
    recurring(api, clock, n=3, days=0)
    maintain(eng)
    [g] = gists(eng)
    meta = g.metadata["gist"]
    forged = dict(meta, lines=[{**meta["lines"][0], "text": "The checkout test is fine."}, *meta["lines"][1:]])
    bad = g.content.replace(meta["lines"][0]["text"], "The checkout test is fine.")
    assert trace(bad, forged, texts(eng)) != []
    assert units_of("User: short\nAssistant: ok") == []


def test_export_and_import_carry_a_gist_whole(eng, api, clock, fake, tmp_path):
    from engram import Engram, Settings
    from engram.admin.export_import import export_memories, import_memories

    recurring(api, clock, n=3, days=0)
    maintain(eng)
    [g] = gists(eng)
    path = tmp_path / "out.jsonl"
    export_memories(eng, path)
    there = Engram(":memory:", settings=Settings.from_env({"ENGRAM_HOME": str(tmp_path)}), embedder=fake, clock=clock)
    try:
        import_memories(there, path)
        copy = there.get(g.id)
        assert (copy.content, copy.tags, copy.metadata, copy.tier, copy.provenance) == (
            g.content,
            g.tags,
            g.metadata,
            g.tier,
            g.provenance,
        )
        assert memory_stats(there)["gists"] == 1
        assert maintain(there)["gists"] == []  # imported, it is the same gist: nothing to write again
    finally:
        there.close()


@pytest.fixture
def with_command(settings, fake, clock):
    """An engine whose settings name a gist command: with_command(cmd) -> (engine, api)."""
    opened = []

    def make(command: str):
        e = Engram(memory_path(settings), settings=replace(settings, gist_command=command), embedder=fake, clock=clock)
        opened.append(e)
        return e, Api(e)

    yield make
    for e in opened:
        e.close()


def test_a_summariser_command_rewrites_the_gist_and_the_extractive_text_stays_checkable(with_command, clock, tmp_path):
    script = tmp_path / "summarise.py"
    script.write_text(
        "import sys\n"
        "lines = sys.stdin.read().splitlines()\n"
        "print(f'Checkout test failures, summarised from {len(lines) - 1} shared lines: freeze the clock.')\n"
    )
    eng, api = with_command(f"{sys.executable} {script}")
    recurring(api, clock, n=3, days=0)
    maintain(eng)
    [g] = gists(eng)
    assert g.content.startswith("Checkout test failures, summarised from 6 shared lines")
    meta = g.metadata["gist"]
    assert meta["summarised_by"] == f"{sys.executable} {script}"
    assert meta["extractive"].startswith("Gist of 3 episodes in 3 sessions")
    assert trace(g.content, meta, texts(eng)) == []


def test_a_failing_summariser_leaves_the_extractive_gist(with_command, clock):
    eng, api = with_command(f"{sys.executable} -c 'raise SystemExit(3)'")
    recurring(api, clock, n=3, days=0)
    report = maintain(eng)
    [g] = gists(eng)
    assert report["gists"][0]["into"] == g.id
    assert g.content.startswith("Gist of 3 episodes in 3 sessions") and "extractive" not in g.metadata["gist"]


def test_two_gists_of_one_recurrence_become_one_and_another_problem_keeps_its_own(eng, api, clock, fake, tmp_path):
    from engram import Engram, Settings
    from engram.admin.export_import import export_memories, import_memories

    recurring(api, clock, n=3, days=0)
    for i in range(3):  # another problem of the project, with its own gist
        answer = f"The logo is teal on white, see brand/logo.svg. Export it with `make logo` first, try {i}."
        episode(api, f"logo-s{i}", "what colour is the logo", answer)
    maintain(eng)
    [a] = [g for g in gists(eng) if FLAKY in g.content]
    # The same problem gisted in a teammate's store, brought in (export and import, as sharing does).
    there = Engram(":memory:", settings=Settings.from_env({"ENGRAM_HOME": str(tmp_path)}), embedder=fake, clock=clock)
    try:
        recurring(Api(there), clock, n=3, start=3, days=0)
        maintain(there)
        [b] = gists(there)
        export_memories(there, tmp_path / "out.jsonl")
    finally:
        there.close()
    import_memories(eng, tmp_path / "out.jsonl")
    assert len(gists(eng)) == 3

    dry = maintain(eng, apply=False)
    assert [(x["into"], x["absorbed"]) for x in dry["gists"]] == [(a.id, [b.id])] and len(gists(eng)) == 3
    report = maintain(eng)
    assert [(x["into"], x["absorbed"], x["new_sources"]) for x in report["gists"]] == [(a.id, [b.id], [])]
    assert len(gists(eng)) == 2 and eng.store_db.get_memories([b.id]) == {}
    g = eng.get(a.id)
    assert g.content.startswith("Gist of 6 episodes in 6 sessions")
    assert f"- {FLAKY} (6 of 6)" in g.content and "logo" not in g.content
    assert g.stability == pytest.approx(a.stability + b.stability)  # they reinforce one another
    assert set(g.metadata["gist"]["sources"]) == set(a.metadata["gist"]["sources"]) | set(b.metadata["gist"]["sources"])
    assert trace(g.content, g.metadata["gist"], texts(eng)) == []
    assert eng.history(g.id)[-1]["detail"] == {"sources": [], "gist": True, "merged": [b.id]}
    assert maintain(eng)["gists"] == []  # one gist now: nothing more to merge
    assert memory_stats(eng)["totals"]["gists_merged"] == 1


def test_an_episode_kept_for_its_recurrence_is_not_recalled_and_a_window_of_zero_keeps_none(settings, fake, clock):
    def logo_after(days: float, window: float) -> tuple[bool, bool, int]:
        """(stored, recalled, spared) for a lone episode `days` after it, with that window."""
        e = Engram(
            memory_path(settings), settings=replace(settings, gist_window_days=window), embedder=fake, clock=clock
        )
        try:
            episode(
                Api(e), f"lone-{window}", "what colour is the logo", "The logo is teal on white, see brand/logo.svg."
            )
            clock.advance(days=days)
            report = maintain(e)
            stored = any("logo" in m.content for m, _ in e.store_db.iter_memory_rows())
            hits = e.recall("what colour is the logo", limit=5, reinforce=False, scope=Scope(PROJECT))
            return stored, any("logo" in h.memory.content for h in hits), report["spared_recurring"]
        finally:
            e.remove_memories([m.id for m, _ in e.store_db.iter_memory_rows()])  # a backend's database is shared
            e.close()

    assert logo_after(1, 14) == (True, True, 0)  # fresh: an ordinary episode
    # Faded below the prune floor (about three days) but within the window: kept for a gist, as if gone.
    assert logo_after(5, 14) == (True, False, 1)
    assert logo_after(5, 0) == (False, False, 0)  # no window: pruned once faded, as with gists off
    assert logo_after(15, 14) == (False, False, 0)  # past the window it goes
