"""Per-turn capture in the real Codex (npm, Stop) with the scripted Responses API on 127.0.0.1,
which never calls an engram tool: an error fixed in one session (apply_patch) comes back with the
changed lines when a later session meets it; a session in another repository gets none of it."""

from __future__ import annotations

import pytest
from clients_support import git_repo, stop_daemon
from model_fakes import FakeOpenAI, custom_tool, openai_text, text, tool
from test_capture_claude import BUGGY, COMES_BACK, NEW_LINE, OLD_LINE, RUN, SCRIPT, captures, wait_until
from test_codex_cli import codex, ok, set_up

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]

PATCH = f"*** Begin Patch\n*** Update File: {SCRIPT}\n@@\n-{OLD_LINE}\n+{NEW_LINE}\n*** End Patch\n"


def plain(sent: str) -> str:
    return sent.replace('\\\\\\"', '"').replace('\\"', '"')


@pytest.fixture(scope="module")
def after_a_fix(tmp_path_factory):
    root = tmp_path_factory.mktemp("capture-codex")
    engram_home, client_home = root / "engram-home", root / "client-home"
    repo = git_repo(root / "ledger", "https://github.com/acme/ledger.git")
    (repo / SCRIPT).write_text(BUGGY)
    try:
        set_up(repo, client_home, engram_home, mcp=False)
        script = [
            [tool("exec_command", cmd=RUN)],
            [custom_tool("apply_patch", PATCH)],
            [tool("exec_command", cmd=RUN)],
            [text("Fixed: the totals have no 'sum' key, so the script falls back to 'total'.")],
        ]
        with FakeOpenAI(script) as fake:
            ok(codex(repo, "Make the totals script work", fake, client_home, engram_home))
            assert not fake.errors and not fake.script
            assert "KeyError" in openai_text(fake.loop_requests()[-1])  # the error was real
        assert NEW_LINE in (repo / SCRIPT).read_text()
        line = wait_until(lambda: next((ln for ln in captures(engram_home) if "1 fixes" in ln), None))
        yield root, repo, engram_home, client_home, line
    finally:
        stop_daemon(engram_home)


def test_the_turn_is_captured_at_stop(after_a_fix):
    line = after_a_fix[4]
    assert "Stop:capture" in line and " ok " in line and "1 fixes (1 new)" in line, line


def test_the_fix_comes_back_with_the_error(after_a_fix):
    _, repo, engram_home, client_home, _ = after_a_fix
    with FakeOpenAI([[text("Looking at it.")]]) as fake:
        ok(codex(repo, COMES_BACK, fake, client_home, engram_home))
        seen = plain(openai_text(fake.loop_requests()[0]))
    assert "Pitfall (python3)" in seen and f"+ {NEW_LINE}" in seen and f"- {OLD_LINE}" in seen, seen[-3000:]


def test_another_repository_gets_none_of_it(after_a_fix):
    root, _, engram_home, client_home, _ = after_a_fix
    other = git_repo(root / "website", "https://github.com/acme/website.git")  # the user's hooks run here too
    with FakeOpenAI([[text("Hello.")]]) as fake:
        ok(codex(other, COMES_BACK, fake, client_home, engram_home))
        seen = plain(openai_text(fake.loop_requests()[0]))
    assert "Pitfall" not in seen and NEW_LINE not in seen
