"""Per-turn capture in a real agent client with its scripted model on 127.0.0.1, which never calls an
engram tool, the same test for Claude Code, Codex and Gemini CLI (tests/e2e/agents.py): an error
fixed in one session (the client's own shell and edit tools) comes back with its fix (the changed
lines) when a later session meets the error again; a session in another repository gets none of it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agents import AGENTS
from clients_support import captures, engram_cli, engram_env, git_repo, stop_daemon, wait_until
from model_fakes import FakeAnthropic, custom_tool, text, tool
from test_claude_code import claude, install_hooks, result_of

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]

SCRIPT = "ledger_totals.py"
BUGGY = 'TOTALS = {"total": 3}\nprint(TOTALS["sum"])\n'
OLD_LINE = 'print(TOTALS["sum"])'
NEW_LINE = 'print(TOTALS.get("sum", TOTALS["total"]))'
RUN = f"python3 {SCRIPT}"
COMES_BACK = "python3 ledger_totals.py fails again with KeyError: 'sum', what do I do?"
FIXED = "Fixed: the totals have no 'sum' key, so the script falls back to 'total'."
PATCH = f"*** Begin Patch\n*** Update File: {SCRIPT}\n@@\n-{OLD_LINE}\n+{NEW_LINE}\n*** End Patch\n"


def fix_session(client: str, repo: Path) -> list[list]:
    """The scripted model's turns: run the script (it fails), fix it with the client's edit tool, run
    it again, say so."""
    if client == "claude-code":
        run = lambda why: tool("Bash", command=RUN, description=why)  # noqa: E731
        edit = tool("Edit", file_path=str(repo / SCRIPT), old_string=OLD_LINE, new_string=NEW_LINE)
    elif client == "codex":
        run = lambda why: tool("exec_command", cmd=RUN)  # noqa: E731
        edit = custom_tool("apply_patch", PATCH)
    else:
        run = lambda why: tool("run_shell_command", command=RUN, description=why)  # noqa: E731
        edit = tool(
            "replace",
            file_path=str(repo / SCRIPT),
            old_string=OLD_LINE,
            new_string=NEW_LINE,
            instruction="Fall back to the total when there is no sum",
        )
    return [[run("Print the totals")], [edit], [run("Print the totals again")], [text(FIXED)]]


@pytest.fixture(scope="module", params=AGENTS, ids=str)
def after_a_fix(request, tmp_path_factory):
    agent = request.param
    root = tmp_path_factory.mktemp(f"capture-{agent}")
    engram_home, client_home = root / "engram-home", root / "client-home"
    repo = git_repo(root / "ledger", "https://github.com/acme/ledger.git")
    (repo / SCRIPT).write_text(BUGGY)
    try:
        agent.set_up_in([repo], client_home, engram_home)
        with agent.model(fix_session(agent.name, repo)) as model:
            agent.session(repo, "Make the totals script work", model, client_home, engram_home)
            assert not model.errors and not model.script
            # The error was real: the first run's output is in what the model was sent last.
            assert "KeyError" in json.dumps(model.loop_requests()[-1])
        assert NEW_LINE in (repo / SCRIPT).read_text()
        line = wait_until(lambda: next((ln for ln in captures(engram_home) if "1 fixes" in ln), None))
        yield agent, root, repo, engram_home, client_home, line
    finally:
        stop_daemon(engram_home)


def test_the_turn_is_captured_when_it_ends(after_a_fix):
    agent, *_, line = after_a_fix
    assert " ok " in line and "1 fixes (1 new)" in line, line
    # The end-of-turn hook runs detached; the session's end captures a turn it has not read yet.
    assert f"{agent.turn_end}:capture" in line or "SessionEnd:capture" in line, line


def test_the_fix_comes_back_with_the_error(after_a_fix):
    agent, _, repo, engram_home, client_home, _ = after_a_fix
    with agent.model([[text("Looking at it.")]]) as model:
        agent.session(repo, COMES_BACK, model, client_home, engram_home)
        seen = agent.seen(model)
    assert "Pitfall (python3)" in seen and f"+ {NEW_LINE}" in seen and f"- {OLD_LINE}" in seen, seen[-3000:]


def test_another_repository_gets_none_of_it(after_a_fix):
    agent, root, _, engram_home, client_home, _ = after_a_fix
    other = git_repo(root / "website", "https://github.com/acme/website.git")
    agent.set_up_in([other], client_home, engram_home, again=True)
    with agent.model([[text("Hello.")]]) as model:
        agent.session(other, COMES_BACK, model, client_home, engram_home)
        seen = agent.seen(model)
    assert "Pitfall" not in seen and NEW_LINE not in seen
    assert seen.count("TOTALS") <= 1  # only the prompt's own words, never the fix


def test_capture_turned_off_in_the_clients_settings_captures_nothing(tmp_path):
    # Claude Code only: its project settings give the hooks an `env`. Set where the docs say (the
    # `env` of the project's .claude/settings.json, which Claude Code gives its hooks), naming the
    # repository by its path, with the daemon already running from an environment without it: the
    # fix and the turn are not captured; the checkpoint still is.
    engram_home, client_home = tmp_path / "engram-home", tmp_path / "client-home"
    repo = git_repo(tmp_path / "client-work", "https://github.com/acme/client-work.git")
    (repo / SCRIPT).write_text(BUGGY)
    install_hooks(repo, engram_home)
    settings_path = repo / ".claude" / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings["env"] = {"ENGRAM_CAPTURE_OFF_PROJECTS": f"acme/elsewhere\n{repo}"}
    settings_path.write_text(json.dumps(settings))
    env = engram_env(engram_home)
    try:
        assert engram_cli("stats", cwd=repo, env=env).returncode == 0  # the daemon, started without it
        with FakeAnthropic(fix_session("claude-code", repo)) as fake:
            result_of(
                claude(
                    repo,
                    "Make the totals script work. In this repo we always run scripts with python3, never python.",
                    fake,
                    client_home,
                    engram_home,
                )
            )
            assert not fake.errors and not fake.script
        line = wait_until(lambda: next(iter(captures(engram_home)), None))
        assert " skipped " in line and f"ENGRAM_CAPTURE_OFF_PROJECTS names {repo}" in line, line
        end = wait_until(
            lambda: next(
                (ln for ln in (engram_home / "hooks.log").read_text().splitlines() if " SessionEnd pid=" in ln), None
            )
        )
        assert " ok " in end and "checkpoint of" in end and "conventions" not in end, end
        stats = json.loads(engram_cli("--json", "stats", cwd=repo, env=env).stdout)
        assert stats["captured"] == {"pitfall": 0, "episode": 0}, (engram_home / "hooks.log").read_text()
    finally:
        stop_daemon(engram_home)
