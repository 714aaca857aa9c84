"""A convention said in passing in one Codex session reaches the model in a later one.

The real Codex (npm, `codex exec`) against the scripted Responses API on 127.0.0.1, which never
calls an engram tool, with engram's hooks as `engram hooks install codex` writes them into
CODEX_HOME, trusted as Codex's /hooks review trusts them, and no engram MCP server. Session A states
a convention among requests; its Stop capture (detached) or SessionEnd checkpoint stores it.
Session B works on something else. Session C asks what the convention answers, and its
UserPromptSubmit hook gives the model the convention with the prompt; a session in another
repository, where the same user's hooks run, asking the same is not given it.
"""

from __future__ import annotations

import pytest
from clients_support import git_repo, stop_daemon
from model_fakes import FakeOpenAI, openai_text, text
from test_capture_claude import wait_until
from test_claude_code_conventions import CONVENTION, convention_stored
from test_codex_cli import codex, ok, set_up

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]  # real clients: one pass is enough

ASKED = "How do I add a dependency here?"


def test_a_convention_from_session_a_reaches_session_c_and_stays_in_its_repository(tmp_path):
    engram_home, client_home = tmp_path / "engram-home", tmp_path / "client-home"
    repo = git_repo(tmp_path / "shop", "https://github.com/acme/shop.git")
    other = git_repo(tmp_path / "blog", "https://github.com/acme/blog.git")
    try:
        set_up(repo, client_home, engram_home, mcp=False)  # the user's hooks: every repository's sessions
        with FakeOpenAI([[text("Set up; httpx is added.")]]) as fake:
            ok(
                codex(
                    repo,
                    f"Thanks! Add httpx to the project. Btw, {CONVENTION} Then run the tests.",
                    fake,
                    client_home,
                    engram_home,
                )
            )
        # Stop's capture runs detached from the agent: wait until it (or SessionEnd) stored it.
        wait_until(lambda: convention_stored(engram_home))
        with FakeOpenAI([[text("The footer typo is fixed.")]]) as fake:
            ok(codex(repo, "Fix the typo in the footer of the landing page.", fake, client_home, engram_home))
            unrelated = openai_text(fake.loop_requests()[0])
        # B starts with the project's conventions, and its unrelated prompt brings none.
        assert "Conventions of this project" in unrelated and CONVENTION in unrelated, unrelated[-3000:]
        assert "<engram-memories>" not in unrelated, unrelated[-3000:]
        with FakeOpenAI([[text("Use uv add.")]]) as fake:
            ok(codex(repo, ASKED, fake, client_home, engram_home))
            seen = openai_text(fake.loop_requests()[0])  # what the model sees before it answers
        # Given with the prompt (UserPromptSubmit's block), not only at the session's start.
        memories = seen[seen.find("<engram-memories>") : seen.find("</engram-memories>")]
        assert f"[convention] {CONVENTION}" in memories, seen[-3000:]
        with FakeOpenAI([[text("Use the project's package manager.")]]) as fake:
            ok(codex(other, ASKED, fake, client_home, engram_home))
            elsewhere = openai_text(fake.loop_requests()[0])
        assert "uv, never pip" not in elsewhere, "another repository was given the shop's convention"
    finally:
        stop_daemon(engram_home)
