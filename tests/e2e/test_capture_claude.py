"""Per-turn capture in the real Claude Code (npm) with the scripted model on 127.0.0.1, which never
calls an engram tool: an error fixed in one session comes back with its fix (the changed lines)
when a later session meets the error again; a session in another repository gets none of it.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from clients_support import engram_cli, engram_env, git_repo, stop_daemon
from model_fakes import FakeAnthropic, anthropic_text, text, tool, tool_results
from test_claude_code import claude, install_hooks, result_of

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]

SCRIPT = "ledger_totals.py"
BUGGY = 'TOTALS = {"total": 3}\nprint(TOTALS["sum"])\n'
OLD_LINE = 'print(TOTALS["sum"])'
NEW_LINE = 'print(TOTALS.get("sum", TOTALS["total"]))'
RUN = f"python3 {SCRIPT}"
COMES_BACK = "python3 ledger_totals.py fails again with KeyError: 'sum', what do I do?"


def quoted(line: str) -> str:
    return json.dumps(line)[1:-1]


def captures(home: Path) -> list[str]:
    """The lines the detached per-turn captures logged."""
    log = home / "hooks.log"
    return [ln for ln in log.read_text().splitlines() if ":capture " in ln] if log.exists() else []


def wait_until(cond, timeout: float = 180.0):
    """The condition's value once true; fails after `timeout` (the capture runs detached)."""
    end, tick = time.monotonic() + timeout, threading.Event()
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        tick.wait(0.1)
    pytest.fail(f"not within {timeout:g}s")


@pytest.fixture(scope="module")
def after_a_fix(tmp_path_factory):
    root = tmp_path_factory.mktemp("capture-a")
    engram_home, client_home = root / "engram-home", root / "client-home"
    repo = git_repo(root / "ledger", "https://github.com/acme/ledger.git")
    (repo / SCRIPT).write_text(BUGGY)
    install_hooks(repo, engram_home)
    script = [
        [tool("Bash", command=RUN, description="Print the totals")],
        [tool("Edit", file_path=str(repo / SCRIPT), old_string=OLD_LINE, new_string=NEW_LINE)],
        [tool("Bash", command=RUN, description="Print the totals again")],
        [text("Fixed: the totals have no 'sum' key, so the script falls back to 'total'.")],
    ]
    try:
        with FakeAnthropic(script) as fake:
            started = time.monotonic()
            result_of(claude(repo, "Make the totals script work", fake, client_home, engram_home))
            wall = time.monotonic() - started
            assert not fake.errors and not fake.script
            results = tool_results(fake.loop_requests()[-1])
            assert any("KeyError" in r for r in results), results  # the error was real
        assert NEW_LINE in (repo / SCRIPT).read_text()
        line = wait_until(lambda: next((ln for ln in captures(engram_home) if "fixes" in ln), None))
        yield root, repo, engram_home, client_home, line, wall
    finally:
        stop_daemon(engram_home)


def test_the_turn_is_captured_in_the_background(after_a_fix):
    line = after_a_fix[4]
    assert " ok " in line and "1 fixes (1 new)" in line and "1 turns (1 stored)" in line, line
    assert " ok " in line and ("Stop:capture" in line or "SessionEnd:capture" in line), line


def test_the_fix_comes_back_with_the_error(after_a_fix):
    _, repo, engram_home, client_home, _, _ = after_a_fix
    with FakeAnthropic([[text("Looking at it.")]]) as fake:
        result_of(claude(repo, COMES_BACK, fake, client_home, engram_home))
        seen = anthropic_text(fake.loop_requests()[0])
    # The request body is JSON: the lines are there with their quotes escaped.
    assert "KeyError: 'sum'" in seen and quoted(f"+ {NEW_LINE}") in seen and quoted(f"- {OLD_LINE}") in seen, seen[
        -3000:
    ]
    assert "Pitfall (python3)" in seen


def test_another_repository_gets_none_of_it(after_a_fix):
    root, _, engram_home, client_home, _, _ = after_a_fix
    other = git_repo(root / "website", "https://github.com/acme/website.git")
    install_hooks(other, engram_home)
    with FakeAnthropic([[text("Hello.")]]) as fake:
        result_of(claude(other, COMES_BACK, fake, client_home, engram_home))
        seen = anthropic_text(fake.loop_requests()[0])
    assert quoted(NEW_LINE) not in seen and "Pitfall" not in seen
    assert json.dumps(seen).count("TOTALS") <= 1  # only the prompt's own words, never the fix


def test_capture_turned_off_in_the_clients_settings_captures_nothing(tmp_path):
    # Set where the docs say (the `env` of the project's .claude/settings.json, which Claude Code
    # gives its hooks), naming the repository by its path, with the daemon already running from
    # an environment without it: the fix and the turn are not captured; the checkpoint still is.
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
        script = [
            [tool("Bash", command=RUN, description="Print the totals")],
            [tool("Edit", file_path=str(repo / SCRIPT), old_string=OLD_LINE, new_string=NEW_LINE)],
            [tool("Bash", command=RUN, description="Print the totals again")],
            [text("Fixed: the totals have no 'sum' key, so the script falls back to 'total'.")],
        ]
        with FakeAnthropic(script) as fake:
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
