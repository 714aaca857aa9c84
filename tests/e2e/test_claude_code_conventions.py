"""A convention said in passing in one Claude Code session reaches the model in a later one.

The real Claude Code binary (npm) against a scripted model on 127.0.0.1 that never calls an engram
tool, with engram's hooks installed (`engram hooks install claude-code --scope project`). Session A
states a convention among requests; its SessionEnd checkpoint captures it. Session B works on
something else. Session C asks what the convention answers, and the model is given it with the
prompt; a session in another repository asking the same is not.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from clients_support import git_repo, stop_daemon
from model_fakes import FakeAnthropic, anthropic_text, text
from test_claude_code import claude, install_hooks, result_of

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]  # real clients: one pass is enough

CONVENTION = "In this repo we install packages with uv, never pip."


def convention_stored(home: Path) -> bool:
    """Whether a hook logged storing a convention: a turn's capture ("a convention (1 stored)") or a
    checkpoint ("conventions: 1 stored"). The clients whose capture runs detached need to wait for it."""
    log = home / "hooks.log"
    return log.exists() and re.search(r"conventions?:? \(?[1-9]\d* stored", log.read_text()) is not None


def test_a_convention_from_session_a_reaches_session_c_and_stays_in_its_repository(tmp_path):
    engram_home, client_home = tmp_path / "engram-home", tmp_path / "client-home"
    repo = git_repo(tmp_path / "shop", "https://github.com/acme/shop.git")
    other = git_repo(tmp_path / "blog", "https://github.com/acme/blog.git")
    install_hooks(repo, engram_home)
    install_hooks(other, engram_home)
    try:
        with FakeAnthropic([[text("Set up; httpx is added.")]]) as fake:
            result_of(
                claude(
                    repo,
                    f"Thanks! Add httpx to the project. Btw, {CONVENTION} Then run the tests.",
                    fake,
                    client_home,
                    engram_home,
                    mcp=False,
                )
            )
        with FakeAnthropic([[text("The footer typo is fixed.")]]) as fake:
            result_of(
                claude(
                    repo, "Fix the typo in the footer of the landing page.", fake, client_home, engram_home, mcp=False
                )
            )
            unrelated = anthropic_text(fake.loop_requests()[0])
        # B starts with the project's conventions, and its unrelated prompt brings none.
        assert "Conventions of this project" in unrelated and CONVENTION in unrelated, unrelated[-3000:]
        assert "<engram-memories>" not in unrelated, unrelated[-3000:]
        with FakeAnthropic([[text("Use uv add.")]]) as fake:
            result_of(claude(repo, "How do I add a dependency here?", fake, client_home, engram_home, mcp=False))
            seen = anthropic_text(fake.loop_requests()[0])  # what the model sees before it answers
        # Given with the prompt (the per-prompt block), not only at the session's start.
        memories = seen[seen.find("<engram-memories>") : seen.find("</engram-memories>")]
        assert f"[convention] {CONVENTION}" in memories, seen[-3000:]
        with FakeAnthropic([[text("Use the project's package manager.")]]) as fake:
            result_of(claude(other, "How do I add a dependency here?", fake, client_home, engram_home, mcp=False))
            elsewhere = anthropic_text(fake.loop_requests()[0])
        assert "uv, never pip" not in elsewhere, "another repository was given the shop's convention"
    finally:
        stop_daemon(engram_home)
