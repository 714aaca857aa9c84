"""Conventions the user states: captured as facts of the project, resolved, given back when a prompt needs them.

The real model: resolution and the per-prompt rule are what the figures in RESULTS.md come from.
"""

from __future__ import annotations

import pytest

from benchmarks.conventions_noise import load_sessions, run
from engram import Engram
from engram.continuity.conventions import CANDIDATE_TAG, CONVENTION_TAG, project_conventions
from engram.core.errors import EngramError
from engram.workflows.lifecycle import prompt_memories, session_start
from tests.conftest import memory_path

HERE, ELSEWHERE = "example.com/me/shop", "example.com/me/blog"
UV = "In this repo we install packages with uv, never pip."


@pytest.fixture
def real(settings, real_embedder, clock):
    e = Engram(memory_path(settings), settings=settings, embedder=real_embedder, clock=clock)
    yield e
    e.close()


def _captured(eng, project=HERE) -> list[dict]:
    return eng.list_memories(tags=[CONVENTION_TAG], in_project=project)["memories"]


@pytest.mark.model
def test_a_convention_said_in_passing_is_a_fact_of_the_project_marked_automatic(real):
    r = real.capture_conventions(
        ["Thanks! " + UV + " Can you add httpx?", "please run the tests"], session_id="claude-code:a", project=HERE
    )
    assert (r["found"], [s["action"] for s in r["stored"]]) == (1, ["new"])
    (m,) = _captured(real)
    mem = real.get(m["id"])
    assert (mem.content, mem.memory_type, mem.project) == (UV, "fact", HERE)
    assert mem.metadata["captured"] == "auto" and CONVENTION_TAG in mem.tags
    # The same session checkpointed again (PreCompact, then SessionEnd): nothing counted twice.
    again = real.capture_conventions([UV], session_id="claude-code:a", project=HERE)
    assert (again["stored"], again["already"]) == ([], 1)
    assert real.get(m["id"]).recall_count == 0


@pytest.mark.model
def test_a_restatement_reinforces_and_a_correction_replaces(real):
    first = real.capture_conventions(["We target Python 3.11 in this project."], session_id="s1", project=HERE)
    said = real.capture_conventions(
        ["From now on remember: we target Python 3.11 in this project."], session_id="s2", project=HERE
    )
    assert said["stored"][0]["action"] == "reinforce", said
    assert said["stored"][0]["memory_id"] == first["stored"][0]["memory_id"]
    fixed = real.capture_conventions(["We target Python 3.12 in this project."], session_id="s3", project=HERE)
    assert fixed["stored"][0]["action"] == "replace", fixed
    assert [m["content"] for m in _captured(real)] == ["We target Python 3.12 in this project."]


@pytest.mark.model
def test_outside_a_project_nothing_is_captured(real):
    r = real.capture_conventions([UV], session_id="s1", project=None)
    assert r["found"] == 1 and r["stored"] == [] and "no project" in r["reason"]
    assert real.list_memories()["total"] == 0


def test_prompts_that_are_not_text_are_refused_by_name(eng):
    with pytest.raises(EngramError, match=r"prompts\[1\] must be a string; got int"):
        eng.capture_conventions(["We use uv.", 3], project=HERE)
    with pytest.raises(EngramError, match="prompts must be a list of strings; got dict"):
        eng.capture_conventions({"a": 1}, project=HERE)


@pytest.mark.model
def test_the_prompt_that_needs_it_gets_it_and_another_repository_gets_nothing(real):
    real.capture_conventions([UV, "Never commit directly to main."], session_id="s1", project=HERE)
    got = prompt_memories(real, None, "How do I add a dependency here?", 300, 3, HERE)
    assert "[convention] " + UV in got["context"]
    assert prompt_memories(real, None, "How do I add a dependency here?", 300, 3, ELSEWHERE)["context"] == ""
    assert session_start(real, None, None, 1500, ELSEWHERE)["context"] == ""


@pytest.mark.model
def test_a_rule_said_once_is_a_searchable_candidate_never_injected_until_said_again_in_another_session(real):
    rule = "In the Dockerfiles, run `npm ci` before copying the sources."
    first = real.capture_conventions(["ok so " + rule], session_id="codex:a", project=HERE)
    (stored,) = first["stored"]
    assert stored["candidate"] and stored["content"] == rule
    mem = real.get(stored["memory_id"])
    assert {CANDIDATE_TAG, CONVENTION_TAG} <= set(mem.tags) and mem.metadata["captured"] == "auto"
    assert project_conventions(real, None, HERE, 5) == []
    # Searchable, as any fact, when asked for; never pushed into a prompt or a session's start.
    assert stored["memory_id"] in [h.memory.id for h in real.recall("npm ci in the Dockerfiles", scope=None)]
    prompt = "Write the Dockerfile for the web app: npm ci, then copy the sources"
    assert stored["memory_id"] not in prompt_memories(real, None, prompt, 300, 3, HERE)["memory_ids"]
    assert "npm ci" not in session_start(real, None, None, 1500, HERE)["context"]
    # The same session again (a later checkpoint rereads the transcript) confirms nothing.
    assert real.capture_conventions([rule], session_id="codex:a", project=HERE)["already"] == 1
    # Said again in another session: confirmed, the same memory, now a convention.
    again = real.capture_conventions([rule], session_id="codex:b", project=HERE)["stored"][0]
    assert again["memory_id"] == stored["memory_id"] and not again["candidate"]
    assert [c["id"] for c in project_conventions(real, None, HERE, 5)] == [stored["memory_id"]]
    assert "npm ci" in session_start(real, None, None, 1500, HERE)["context"]
    mem = real.get(stored["memory_id"])
    assert CANDIDATE_TAG not in mem.tags and "auto-capture" in mem.tags  # confirmed, still automatic
    assert [e["action"] for e in real.history(mem.id)][-1] == "confirm"


@pytest.mark.model
def test_a_candidate_restated_as_standing_is_confirmed(real):
    first = real.capture_conventions(["Store game state in Redis."], session_id="s1", project=HERE)
    assert first["stored"][0]["candidate"]
    again = real.capture_conventions(
        ["From now on we always store game state in Redis."], session_id="s1", project=HERE
    )
    assert again["stored"][0]["memory_id"] == first["stored"][0]["memory_id"], again
    assert not again["stored"][0]["candidate"]


@pytest.mark.model
def test_a_session_starts_with_the_most_used_conventions_within_its_budget(real):
    for i in range(3):  # said in three sessions: the most used
        real.capture_conventions(["We always squash-merge feature branches."], session_id=f"s{i}", project=HERE)
    for i, rule in enumerate(
        [
            "Never commit directly to main.",
            "Use Decimal for money, never float.",
            UV,
            "Tests should never hit the network.",
            "We deploy only from the release branch.",
            "Always add a changelog entry for user-facing changes.",
        ]
    ):
        real.capture_conventions([rule], session_id=f"t{i}", project=HERE)
    start = session_start(real, None, None, 300, HERE)
    lines = start["context"].splitlines()
    assert lines[1] == "Conventions of this project (said by the user):"
    assert lines[2] == "- We always squash-merge feature branches."
    assert 2 < sum(ln.startswith("- ") for ln in lines) <= 6 and start["tokens"] <= 300


@pytest.mark.model
def test_twenty_sessions_of_capture_leave_unrelated_prompts_alone(real):
    out = run(real, load_sessions(), HERE)
    assert out["captured"] >= 10 and out["unrelated"] >= 50
    assert out["unrelated_clean_share"] >= 0.95, out["noisy"]
    assert out["needs_served_share"] >= 0.7, out["missed"]
    assert out["start_tokens"] <= 1500
