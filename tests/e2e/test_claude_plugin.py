"""engram's Claude Code plugin (plugins/claude-code, listed by .claude-plugin/marketplace.json) in the real
Claude Code binary (npm), against a scripted model on 127.0.0.1, in a fresh HOME with nothing else set up:
`claude plugin marketplace add <this repository>`, `claude plugin install engram@engram`, two sessions,
then `claude plugin uninstall` and `marketplace remove`.

The plugin finds engram on PATH (its launcher, bin/engram-launch) and uses the default store, ~/.engram
of that HOME.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from clients_support import ROOT, client_bin, client_env, engram_cli, git_repo, stop_daemon
from model_fakes import FakeAnthropic, anthropic_text, text, tool

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]

PREFIX = "mcp__plugin_engram_engram__"  # Claude Code names a plugin's MCP tools plugin_<plugin>_<server>
TASK = "Nightly export of the ledger"
TODO = "Schedule the export job"
ALLOWED = ",".join(["TaskCreate", "TaskUpdate", f"{PREFIX}create_task", f"{PREFIX}track_progress"])
EVENTS = {"SessionStart", "UserPromptSubmit", "PreCompact", "SessionEnd"}
# The user's own settings before anything: what they must be again once the plugin is gone.
USER_SETTINGS = '{\n  "theme": "dark",\n  "permissions": {\n    "allow": ["Bash(ls:*)"]\n  }\n}\n'


def claude(
    args: list[str], home: Path, cwd: Path, fake: FakeAnthropic | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    # engram on PATH, as after `pipx install engram-recall`; the venv's, which runs this test.
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "ENABLE_TOOL_SEARCH": "false",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        **client_env(home / ".engram"),
        # The plugin's MCP server starts in about a second; on a loaded 2-core runner its start
        # can pass Claude Code's default wait, and its tools are then silently left out.
        "MCP_TIMEOUT": "120000",
    }
    if fake is not None:
        env["ANTHROPIC_BASE_URL"] = fake.url
    return subprocess.run(
        [str(client_bin("claude")), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def ok(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {p.stdout[-3000:]}\nstderr: {p.stderr[-3000:]}"
    return p.stdout


@pytest.mark.parametrize("path", ["plugins/claude-code", "."])
def test_claude_plugin_validate_passes(tmp_path, path):
    out = ok(claude(["plugin", "validate", path], tmp_path, ROOT))
    assert "Validation passed" in out and "error" not in out.lower(), out


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh HOME with the user's own settings, the marketplace added and the plugin installed."""
    root = tmp_path_factory.mktemp("plugin")
    home, repo = root / "home", git_repo(root / "ledger", "https://github.com/acme/ledger.git")
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(USER_SETTINGS)
    try:
        ok(claude(["plugin", "marketplace", "add", str(ROOT)], home, repo))
        ok(claude(["plugin", "install", "engram@engram"], home, repo))
        yield home, repo
    finally:
        stop_daemon(home / ".engram")


def hook_lines(home: Path) -> list[list[str]]:
    """hooks.log: [client, event, status] of each hook run."""
    log = home / ".engram" / "hooks.log"
    return [ln.split()[1:5] for ln in log.read_text().splitlines()] if log.exists() else []


def test_a_session_gets_the_tools_the_start_context_and_a_checkpoint(installed):
    home, repo = installed
    script = [
        [tool(f"{PREFIX}create_task", name=TASK, goal="A CSV of the day's entries at 02:00")],
        [tool("TaskCreate", subject=TODO, description="cron at 02:00", activeForm="Scheduling")],
        [text("Task set up; stopping here.")],
    ]
    with FakeAnthropic(script) as fake:
        a = json.loads(
            ok(
                claude(
                    ["-p", "Set up the nightly export", "--output-format", "json", "--allowedTools", ALLOWED],
                    home,
                    repo,
                    fake,
                )
            )
        )
        assert a["is_error"] is False and not fake.errors and not fake.script, (a, fake.errors)
        tools = {t["name"] for t in fake.loop_requests()[0]["tools"]}
        assert {f"{PREFIX}create_task", f"{PREFIX}resume_task", f"{PREFIX}session_handoff"} <= tools, tools
    # The SessionEnd hook checkpointed A (its todo item is nowhere else); B's SessionStart hook gives it.
    with FakeAnthropic([[text("Carrying on.")]]) as fake:
        ok(claude(["-p", "Carry on", "--output-format", "json"], home, repo, fake))
        first = anthropic_text(fake.loop_requests()[0])
    assert TASK in first and TODO in first, first[-3000:]
    runs = hook_lines(home)
    assert {e for c, e, *_ in runs if c == "claude-code"} >= {"SessionStart", "UserPromptSubmit", "SessionEnd"}


def test_hooks_status_sees_the_plugin_and_install_adds_no_second_copy(installed):
    home, repo = installed
    env = {"HOME": str(home), **client_env(home / ".engram")}
    rows = json.loads(engram_cli("hooks", "status", "--json", cwd=repo, env=env).stdout)
    plugin = [r for r in rows if r["scope"] == "plugin"]
    assert [(r["client"], r["plugin"], set(r["events"]), r["runnable"]) for r in plugin] == [
        ("claude-code", "engram@engram", EVENTS, True)
    ]
    before = (home / ".claude" / "settings.json").read_bytes()
    r = engram_cli("hooks", "install", "claude-code", cwd=repo, env=env)
    assert r.returncode != 0 and "come from the plugin engram@engram" in r.stderr, r.stderr
    assert "claude plugin uninstall engram@engram" in r.stderr
    assert (home / ".claude" / "settings.json").read_bytes() == before


def test_a_copy_in_the_settings_beside_the_plugin_runs_no_hook_twice(installed):
    home, repo = installed
    # A copy written before the plugin came (install refuses now): as the user's file would hold it.
    settings = home / ".claude" / "settings.json"
    before = settings.read_text()
    data = json.loads(before)
    engram = Path(sys.executable).parent / "engram"
    data["hooks"] = {
        e: [{"hooks": [{"type": "command", "command": f"{engram} hook {e} --client claude-code", "timeout": 30}]}]
        for e in EVENTS
    }
    settings.write_text(json.dumps(data, indent=2))
    try:
        seen = len(hook_lines(home))
        with FakeAnthropic([[text("Hello.")]]) as fake:
            ok(claude(["-p", "Say hello", "--output-format", "json"], home, repo, fake))
        runs = [r for r in hook_lines(home)[seen:] if r[0] == "claude-code"]
        for event in ("SessionStart", "UserPromptSubmit", "SessionEnd"):
            statuses = sorted(s for _, e, _, s in runs if e == event)
            assert statuses == ["ok", "skipped"], (event, runs)  # the plugin's ran, the copy stood aside
    finally:
        settings.write_text(before)


def test_uninstalling_leaves_no_engram_entry_and_the_users_settings(installed):
    home, repo = installed
    settings = home / ".claude" / "settings.json"
    ok(claude(["plugin", "disable", "engram@engram"], home, repo))
    assert json.loads(settings.read_text())["enabledPlugins"] == {"engram@engram": False}
    ok(claude(["plugin", "uninstall", "engram@engram"], home, repo))
    ok(claude(["plugin", "marketplace", "remove", "engram"], home, repo))
    after = json.loads(settings.read_text())
    assert "engram" not in json.dumps(after), after
    # Claude Code rewrites the file itself and leaves its emptied tables behind (enabledPlugins: {},
    # extraKnownMarketplaces: {}); everything the user had is there, unchanged.
    assert {k: v for k, v in after.items() if v != {}} == json.loads(USER_SETTINGS)
    installs = json.loads((home / ".claude" / "plugins" / "installed_plugins.json").read_text())
    assert installs["plugins"] == {}
