"""Per-turn capture in the real Gemini CLI (npm, AfterAgent) with the scripted Gemini API on
127.0.0.1, which never calls an engram tool: an error fixed in one session comes back with the
changed lines when a later session meets it; a session in another repository gets none of it."""

from __future__ import annotations

import json

import pytest
from clients_support import git_repo, stop_daemon
from model_fakes import FakeGemini, gemini_text, text, tool
from test_capture_claude import BUGGY, COMES_BACK, NEW_LINE, OLD_LINE, RUN, SCRIPT, captures, quoted, wait_until
from test_gemini_cli import gemini, ok, setup_repo

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]


@pytest.fixture(scope="module")
def after_a_fix(tmp_path_factory):
    root = tmp_path_factory.mktemp("capture-gemini")
    engram_home, client_home = root / "engram-home", root / "client-home"
    repo = git_repo(root / "ledger", "https://github.com/acme/ledger.git")
    (repo / SCRIPT).write_text(BUGGY)
    setup_repo(repo, engram_home)
    script = [
        [tool("run_shell_command", command=RUN, description="Print the totals")],
        [
            tool(
                "replace",
                file_path=str(repo / SCRIPT),
                old_string=OLD_LINE,
                new_string=NEW_LINE,
                instruction="Fall back to the total when there is no sum",
            )
        ],
        [tool("run_shell_command", command=RUN, description="Print the totals again")],
        [text("Fixed: the totals have no 'sum' key, so the script falls back to 'total'.")],
    ]
    try:
        with FakeGemini(script) as fake:
            ok(gemini(repo, "Make the totals script work", fake, client_home, engram_home))
            assert not fake.errors and not fake.script
            assert "KeyError" in json.dumps(fake.loop_requests()[-1]["contents"])  # the error was real
        assert NEW_LINE in (repo / SCRIPT).read_text()
        line = wait_until(lambda: next((ln for ln in captures(engram_home) if "1 fixes" in ln), None))
        yield root, repo, engram_home, client_home, line
    finally:
        stop_daemon(engram_home)


def test_the_turn_is_captured_after_the_agent(after_a_fix):
    line = after_a_fix[4]
    assert "AfterAgent:capture" in line and " ok " in line and "1 fixes (1 new)" in line, line


def test_the_fix_comes_back_with_the_error(after_a_fix):
    _, repo, engram_home, client_home, _ = after_a_fix
    with FakeGemini([[text("Looking at it.")]]) as fake:
        ok(gemini(repo, COMES_BACK, fake, client_home, engram_home))
        seen = gemini_text(fake.loop_requests()[0])
    assert "Pitfall (python3)" in seen and NEW_LINE in seen.replace('\\"', '"'), seen[-3000:]


def test_another_repository_gets_none_of_it(after_a_fix):
    root, _, engram_home, client_home, _ = after_a_fix
    other = git_repo(root / "website", "https://github.com/acme/website.git")
    setup_repo(other, engram_home)
    with FakeGemini([[text("Hello.")]]) as fake:
        ok(gemini(other, COMES_BACK, fake, client_home, engram_home))
        seen = gemini_text(fake.loop_requests()[0])
    assert "Pitfall" not in seen and quoted(NEW_LINE) not in seen and NEW_LINE not in seen
