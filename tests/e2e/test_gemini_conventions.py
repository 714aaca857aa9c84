"""A convention said in passing in one Gemini CLI session reaches the model in a later one.

The real Gemini CLI (npm) against the scripted Gemini API on 127.0.0.1, which never calls an engram
tool, with engram's hooks installed (`engram hooks install gemini --scope project`). Session A
states a convention among requests; its AfterAgent capture (detached) or SessionEnd checkpoint
stores it. Session B works on something else. Session C asks what the convention answers, and its
BeforeAgent hook gives the model the convention with the prompt; a session in another repository
asking the same is not given it.
"""

from __future__ import annotations

import html

import pytest
from clients_support import git_repo, stop_daemon
from model_fakes import FakeGemini, gemini_text, text
from test_capture_claude import wait_until
from test_claude_code_conventions import CONVENTION, convention_stored
from test_gemini_cli import gemini, ok, setup_repo

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]  # real clients: one pass is enough

ASKED = "How do I add a dependency here?"


def sent(fake: FakeGemini) -> str:
    """What the model sees before it answers: Gemini CLI wraps a hook's text in <hook_context>,
    escaping its markup (`&lt;engram-memories&gt;`), so the markup is read back unescaped."""
    return html.unescape(gemini_text(fake.loop_requests()[0]))


def test_a_convention_from_session_a_reaches_session_c_and_stays_in_its_repository(tmp_path):
    engram_home, client_home = tmp_path / "engram-home", tmp_path / "client-home"
    repo = git_repo(tmp_path / "shop", "https://github.com/acme/shop.git")
    other = git_repo(tmp_path / "blog", "https://github.com/acme/blog.git")
    setup_repo(repo, engram_home)
    setup_repo(other, engram_home)
    try:
        with FakeGemini([[text("Set up; httpx is added.")]]) as fake:
            ok(
                gemini(
                    repo,
                    f"Thanks! Add httpx to the project. Btw, {CONVENTION} Then run the tests.",
                    fake,
                    client_home,
                    engram_home,
                )
            )
        # AfterAgent's capture runs detached from the agent: wait until it (or SessionEnd) stored it.
        wait_until(lambda: convention_stored(engram_home))
        with FakeGemini([[text("The footer typo is fixed.")]]) as fake:
            ok(gemini(repo, "Fix the typo in the footer of the landing page.", fake, client_home, engram_home))
            unrelated = sent(fake)
        # B starts with the project's conventions, and its unrelated prompt brings none.
        assert "Conventions of this project" in unrelated and CONVENTION in unrelated, unrelated[-3000:]
        assert "<engram-memories>" not in unrelated, unrelated[-3000:]
        with FakeGemini([[text("Use uv add.")]]) as fake:
            ok(gemini(repo, ASKED, fake, client_home, engram_home))
            seen = sent(fake)
        # Given with the prompt (BeforeAgent's block), not only at the session's start.
        memories = seen[seen.find("<engram-memories>") : seen.find("</engram-memories>")]
        assert f"[convention] {CONVENTION}" in memories, seen[-3000:]
        with FakeGemini([[text("Use the project's package manager.")]]) as fake:
            ok(gemini(other, ASKED, fake, client_home, engram_home))
            elsewhere = sent(fake)
        assert "uv, never pip" not in elsewhere, "another repository was given the shop's convention"
    finally:
        stop_daemon(engram_home)
