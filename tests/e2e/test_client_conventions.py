"""A convention said in passing in one session of a real agent client reaches the model in a later one,
the same test for Claude Code, Codex and Gemini CLI (tests/e2e/agents.py).

The real client (npm) against its scripted model on 127.0.0.1, which never calls an engram tool,
with engram's hooks set up as a user sets them up and no engram MCP server in use. Session A states a
convention among requests; its turn's capture (detached: Stop, AfterAgent) or its SessionEnd
checkpoint stores it. Session B works on something else and starts with the project's conventions,
its unrelated prompt bringing no memories. Session C asks what the convention answers, and the
per-prompt hook (UserPromptSubmit, BeforeAgent) gives the model the convention with the prompt; a
session in another repository, where the same user's hooks run, asking the same is not given it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from agents import AGENTS, Agent
from clients_support import git_repo, stop_daemon, wait_until
from model_fakes import text

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]  # real clients: one pass is enough

CONVENTION = "In this repo we install packages with uv, never pip."
ASKED = "How do I add a dependency here?"


def convention_stored(home: Path) -> bool:
    """Whether a hook logged storing a convention: a turn's capture ("a convention (1 stored)") or a
    checkpoint ("conventions: 1 stored"). The clients whose capture runs detached need to wait for it."""
    log = home / "hooks.log"
    return log.exists() and re.search(r"conventions?:? \(?[1-9]\d* stored", log.read_text()) is not None


@pytest.mark.parametrize("agent", AGENTS, ids=str)
def test_a_convention_from_session_a_reaches_session_c_and_stays_in_its_repository(tmp_path, agent: Agent):
    engram_home, client_home = tmp_path / "engram-home", tmp_path / "client-home"
    repo = git_repo(tmp_path / "shop", "https://github.com/acme/shop.git")
    other = git_repo(tmp_path / "blog", "https://github.com/acme/blog.git")
    try:
        agent.set_up_in([repo, other], client_home, engram_home)
        with agent.model([[text("Set up; httpx is added.")]]) as model:
            prompt = f"Thanks! Add httpx to the project. Btw, {CONVENTION} Then run the tests."
            agent.session(repo, prompt, model, client_home, engram_home)
        wait_until(lambda: convention_stored(engram_home))  # the turn's capture may still run, detached
        with agent.model([[text("The footer typo is fixed.")]]) as model:
            agent.session(repo, "Fix the typo in the footer of the landing page.", model, client_home, engram_home)
            unrelated = agent.seen(model)
        # B starts with the project's conventions, and its unrelated prompt brings none.
        assert "Conventions of this project" in unrelated and CONVENTION in unrelated, unrelated[-3000:]
        assert "<engram-memories>" not in unrelated, unrelated[-3000:]
        with agent.model([[text("Use uv add.")]]) as model:
            agent.session(repo, ASKED, model, client_home, engram_home)
            seen = agent.seen(model)  # what the model sees before it answers
        # Given with the prompt (the per-prompt block), not only at the session's start.
        memories = seen[seen.find("<engram-memories>") : seen.find("</engram-memories>")]
        assert f"[convention] {CONVENTION}" in memories, seen[-3000:]
        with agent.model([[text("Use the project's package manager.")]]) as model:
            agent.session(other, ASKED, model, client_home, engram_home)
            elsewhere = agent.seen(model)
        assert "uv, never pip" not in elsewhere, "another repository was given the shop's convention"
    finally:
        stop_daemon(engram_home)
