"""`engram hooks install/uninstall/status` on settings files that already hold other things."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from engram.hooks import install as hi

ENGRAM = [str(Path(sys.executable).parent / "engram")]

# ---------------------------------------------------------------- each client's documented shape
# Claude Code: https://docs.claude.com/en/docs/claude-code/hooks ("Configuration", "Structure",
# "Hook Events"): hooks.EVENT is a list of {matcher?, hooks: [{type: "command", command, timeout?}]},
# timeout in seconds.
CLAUDE_EVENTS = {
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "UserPromptSubmit",
    "Stop",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionStart",
    "SessionEnd",
    "PermissionRequest",
}
# Codex: openai/codex codex-rs/config/src/hook_config.rs: HooksFile {hooks}, HookEventsToml's renamed
# fields, MatcherGroup {matcher?, hooks}, HookHandlerConfig::Command {command, commandWindows?,
# timeout? (u64 seconds), async?, statusMessage?} tagged by "type". The events are those of 0.171.0
# (`codex app-server generate-json-schema`, HookEventName); it clamps a SessionEnd hook's timeout to
# 3 s, with a warning at every start for a longer one (tests/e2e/test_codex_cli.py: none).
CODEX_EVENTS = {
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PreCompact",
    "PostCompact",
    "SessionStart",
    "SessionEnd",
    "UserPromptSubmit",
    "SubagentStart",
    "SubagentStop",
    "Stop",
}
# Gemini CLI: google-gemini/gemini-cli docs/hooks/reference.md ("Configuration schema") and the
# settings schema's HookDefinitionArray: {matcher?, sequential?, hooks: [{type, command, name?,
# description?, timeout? (milliseconds)}]}.
GEMINI_EVENTS = {
    "BeforeTool",
    "AfterTool",
    "BeforeAgent",
    "AfterAgent",
    "Notification",
    "SessionStart",
    "SessionEnd",
    "PreCompress",
    "BeforeModel",
    "AfterModel",
    "BeforeToolSelection",
}


def check_claude(doc: dict) -> None:
    assert isinstance(doc["hooks"], dict)
    for event, groups in doc["hooks"].items():
        assert event in CLAUDE_EVENTS, event
        for g in groups:
            assert set(g) <= {"matcher", "hooks"}, g
            for h in g["hooks"]:
                assert h["type"] == "command" and isinstance(h["command"], str)
                assert set(h) <= {"type", "command", "timeout", "async"}, h
                assert h.get("async", True) is True
                assert isinstance(h.get("timeout", 1), int | float) and 0 < h.get("timeout", 1) <= 600


def check_codex(doc: dict, config_toml: str) -> None:
    assert set(doc) == {"hooks"}, "Codex refuses any other top-level key in hooks.json"
    for event, groups in doc["hooks"].items():
        assert event in CODEX_EVENTS, event
        for g in groups:
            assert set(g) <= {"matcher", "hooks"}, g
            for h in g["hooks"]:
                assert h["type"] == "command" and isinstance(h["command"], str)
                assert set(h) <= {"type", "command", "commandWindows", "timeout", "async", "statusMessage"}, h
                assert isinstance(h.get("timeout", 1), int) and h.get("timeout", 1) > 0
                assert event != "SessionEnd" or h.get("timeout", 600) <= 3, h
    assert tomllib.loads(config_toml)["features"]["hooks"] is True


def check_gemini(doc: dict) -> None:
    for event, groups in doc["hooks"].items():
        assert event in GEMINI_EVENTS, event
        for g in groups:
            assert set(g) <= {"matcher", "sequential", "hooks"}, g
            for h in g["hooks"]:
                assert h["type"] == "command" and isinstance(h["command"], str)
                assert set(h) <= {"type", "command", "name", "description", "timeout"}, h
                assert isinstance(h.get("timeout", 1000), int | float) and h.get("timeout", 1000) >= 1000


# ---------------------------------------------------------------- fixtures: a user's existing files

CLAUDE_BEFORE = {
    "permissions": {"allow": ["Bash(npm test)"], "deny": ["Read(./.env)"]},
    "env": {"FOO": "bar"},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/check-bash"}]}],
        "SessionStart": [
            {"matcher": "startup", "hooks": [{"type": "command", "command": "cat NOTES.md", "timeout": 5}]}
        ],
    },
}
CODEX_BEFORE = {
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "^Bash$",
                "hooks": [{"type": "command", "command": "python3 ~/.codex/policy.py", "timeout": 30}],
            }
        ]
    }
}
CODEX_TOML = (
    '# my codex config\nmodel = "gpt-5"\n\n[features]\nweb_search_request = true\n\n'
    '[mcp_servers.docs]\ncommand = "docs-mcp"\n'
)
GEMINI_BEFORE = {
    "general": {"vimMode": True},
    "mcpServers": {"docs": {"command": "docs-mcp"}},
    "hooks": {
        "BeforeTool": [
            {
                "matcher": "write_file",
                "hooks": [{"name": "lint", "type": "command", "command": "./lint.sh", "timeout": 5000}],
            }
        ]
    },
}


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A user home and a git repository (cwd) for the clients' user and project settings."""
    home, repo = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    (repo / "src").mkdir()
    monkeypatch.chdir(repo / "src")  # inside the repository: project settings go to its top
    return home, repo


def paths(client: str, scope: str, home: Path, repo: Path) -> Path:
    base = repo if scope == "project" else home
    return {
        "claude-code": base / ".claude" / "settings.json",
        "codex": base / ".codex" / "hooks.json",
        "gemini": base / ".gemini" / "settings.json",
    }[client]


def write(path: Path, doc: dict, indent: int = 4) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=indent) + "\n"
    path.write_text(text)
    return text


BEFORE = {"claude-code": CLAUDE_BEFORE, "codex": CODEX_BEFORE, "gemini": GEMINI_BEFORE}


def engram_entries(doc: dict, client: str) -> dict[str, list[str]]:
    return {
        e: [h["command"] for g in gs for h in g["hooks"] if hi.is_engram_hook(h["command"], client)]
        for e, gs in doc.get("hooks", {}).items()
        if any(hi.is_engram_hook(h["command"], client) for g in gs for h in g["hooks"])
    }


def without_engram(doc: dict, client: str) -> dict:
    out = json.loads(json.dumps(doc))
    for e in list(out.get("hooks", {})):
        out["hooks"][e] = [
            {**g, "hooks": [h for h in g["hooks"] if not hi.is_engram_hook(h["command"], client)]}
            for g in out["hooks"][e]
        ]
        out["hooks"][e] = [g for g in out["hooks"][e] if g["hooks"]]
        if not out["hooks"][e]:
            del out["hooks"][e]
    return out


@pytest.mark.parametrize("scope", ["project", "user"])
@pytest.mark.parametrize("client", ["claude-code", "codex", "gemini"])
def test_install_merges_is_idempotent_and_uninstall_is_exact(env, client, scope):
    home, repo = env
    path = paths(client, scope, home, repo)
    before_text = write(path, BEFORE[client])
    toml_path = path.parent / "config.toml"
    if client == "codex":
        toml_path.write_text(CODEX_TOML)

    changes = hi.install(client, scope)
    assert {c.path for c in changes} == ({path, toml_path} if client == "codex" else {path})
    doc = json.loads(path.read_text())
    if client == "claude-code":
        check_claude(doc)
    elif client == "codex":
        check_codex(doc, toml_path.read_text())
    else:
        check_gemini(doc)
    # Everything the user had is still there, unchanged and in its place.
    assert without_engram(doc, client) == BEFORE[client]
    assert list(doc)[: len(BEFORE[client])] == list(BEFORE[client])
    ours = engram_entries(doc, client)
    assert set(ours) == {e.name for e in hi.CLIENTS[client].events}
    for event, commands in ours.items():
        assert len(commands) == 1
        argv = shlex.split(commands[0])
        assert argv[-4:] == ["hook", event, "--client", client]
        assert os.path.isabs(argv[0]) and os.access(argv[0], os.X_OK), "the command must run from any cwd"
    assert path.read_text().startswith("{\n    "), "the file's own indentation is kept"

    # Installing again writes nothing.
    after_first = path.read_text(), toml_path.read_text() if client == "codex" else None
    assert hi.install(client, scope) == []
    assert (path.read_text(), toml_path.read_text() if client == "codex" else None) == after_first

    # Uninstall takes out exactly engram's entries (and Codex's flag line it added).
    assert hi.uninstall(client, scope)
    assert json.loads(path.read_text()) == BEFORE[client]
    assert path.read_text() == before_text
    if client == "codex":
        assert toml_path.read_text() == CODEX_TOML
    assert hi.uninstall(client, scope) == []


@pytest.mark.parametrize("client", ["claude-code", "codex", "gemini"])
def test_install_into_nothing_and_uninstall_leaves_nothing(env, client):
    home, repo = env
    path = paths(client, "project", home, repo)
    hi.install(client, "project")
    assert path.exists()
    doc = json.loads(path.read_text())
    if client == "claude-code":
        check_claude(doc)
    elif client == "codex":
        check_codex(doc, (path.parent / "config.toml").read_text())
    else:
        check_gemini(doc)
    hi.uninstall(client, "project")
    assert not path.exists()
    if client == "codex":
        assert not (path.parent / "config.toml").exists()


def test_a_moved_installation_replaces_its_old_command(env):
    home, repo = env
    path = paths("claude-code", "user", home, repo)
    write(path, CLAUDE_BEFORE)
    hi.install("claude-code", "user", argv=["/old/venv/bin/engram"])
    hi.install("claude-code", "user")
    commands = [c for cs in engram_entries(json.loads(path.read_text()), "claude-code").values() for c in cs]
    assert len(commands) == len(hi.CLIENTS["claude-code"].events) and not any("/old/venv" in c for c in commands)


@pytest.mark.parametrize("client", ["claude-code", "codex", "gemini"])
def test_dry_run_shows_the_diff_and_writes_nothing(env, client):
    home, repo = env
    path = paths(client, "user", home, repo)
    before = write(path, BEFORE[client])
    changes = hi.install(client, "user", dry_run=True)
    assert path.read_text() == before
    assert not (path.parent / "config.toml").exists()
    diff = changes[0].diff()
    assert diff.startswith(f"--- {path}\n+++ {path}\n") and "+" in diff and "hook SessionStart" in diff
    hi.install(client, "user")
    installed = path.read_text()
    assert hi.uninstall(client, "user", dry_run=True)[0].diff().count("\n-") > 0
    assert path.read_text() == installed


@pytest.mark.parametrize("client", ["claude-code", "codex", "gemini"])
@pytest.mark.parametrize("bad", ['{"hooks": {', "[1, 2]", '{"hooks": []}', '{"hooks": {"SessionStart": {}}}'])
def test_unusable_settings_are_refused_untouched(env, client, bad):
    home, repo = env
    path = paths(client, "project", home, repo)
    path.parent.mkdir(parents=True)
    path.write_text(bad)
    with pytest.raises(hi.InstallError, match=str(path).replace("/", ".") + r".*nothing was changed"):
        hi.install(client, "project")
    with pytest.raises(hi.InstallError):
        hi.uninstall(client, "project")
    assert path.read_text() == bad
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_codex_toml_edits_keep_the_users_file(env):
    home, _ = env
    codex = home / ".codex"
    codex.mkdir()
    (codex / "config.toml").write_text('model = "gpt-5"\n')
    hi.install("codex", "user")
    text = (codex / "config.toml").read_text()
    assert text.startswith('model = "gpt-5"\n') and tomllib.loads(text)["features"]["hooks"] is True
    hi.uninstall("codex", "user")
    assert (codex / "config.toml").read_text() == 'model = "gpt-5"\n'
    # A user who turned hooks off is told, not overruled; broken TOML is refused.
    (codex / "config.toml").write_text("[features]\nhooks = false\n")
    with pytest.raises(hi.InstallError, match="turns Codex hooks off"):
        hi.install("codex", "user")
    assert not (codex / "hooks.json").exists()
    (codex / "config.toml").write_text("[features\n")
    with pytest.raises(hi.InstallError, match="not valid TOML"):
        hi.install("codex", "user")
    # Already on: the file is not touched.
    (codex / "config.toml").write_text("[features]\nhooks = true\n")
    hi.install("codex", "user")
    assert (codex / "config.toml").read_text() == "[features]\nhooks = true\n"


def test_client_dirs_follow_their_environment_variables(env, tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cc"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "cx"))
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "gh"))
    for client in hi.CLIENTS:
        hi.install(client, "user")
    assert (tmp_path / "cc" / "settings.json").exists()
    assert (tmp_path / "cx" / "hooks.json").exists() and (tmp_path / "cx" / "config.toml").exists()
    assert (tmp_path / "gh" / ".gemini" / "settings.json").exists()


def test_is_engram_hook_recognises_only_engram():
    assert hi.is_engram_hook("/v/bin/engram hook SessionStart --client claude-code", "claude-code")
    assert hi.is_engram_hook("'/a b/python' -m engram.cli hook Stop --client codex", "codex")
    assert not hi.is_engram_hook("/v/bin/engram hook Stop --client codex", "claude-code")
    assert not hi.is_engram_hook("echo engram hook SessionStart --client claude-code")
    assert not hi.is_engram_hook("my-hook SessionStart")
    assert not hi.is_engram_hook("unbalanced 'quote")
    # Behind the fast path (install's for Codex and Gemini CLI, and the plugins' launcher).
    assert hi.is_engram_hook("/bin/sh /v/engram/hooks/detach.sh /v/bin/engram hook Stop --client codex", "codex")
    assert hi.is_engram_hook('"${extensionPath}/bin/engram-launch" --detach hook AfterAgent --client gemini', "gemini")
    assert not hi.is_engram_hook("/bin/sh /v/other.sh /v/bin/engram hook Stop --client codex")
    assert not hi.is_engram_hook("/bin/sh /v/engram/hooks/detach.sh my-hook Stop")


@pytest.mark.parametrize("client", ["claude-code", "codex", "gemini"])
def test_the_end_of_a_turn_does_not_wait_for_python(env, client):
    """Claude Code runs Stop asynchronously; Codex and Gemini CLI wait for every hook, so their
    end-of-turn entry goes through detach.sh, and no other entry does (the others' output counts)."""
    home, repo = env
    hi.install(client, "project")
    doc = json.loads(paths(client, "project", home, repo).read_text())
    fronted = {
        e
        for e, gs in doc["hooks"].items()
        for g in gs
        for h in g["hooks"]
        if shlex.split(h["command"])[:2] == ["/bin/sh", str(hi.DETACH)]
    }
    assert fronted == ({"Stop"} if client == "codex" else {"AfterAgent"} if client == "gemini" else set())
    assert os.access(hi.DETACH, os.R_OK)
    row = next(r for r in hi.status() if r["client"] == client and r["scope"] == "project")
    assert row["installed"] and row["runnable"] and not row["missing_events"], row
    moved = f"/bin/sh /nowhere/detach.sh {ENGRAM[0]} hook Stop --client codex"
    assert hi.is_engram_hook(moved, "codex") and not hi._runnable(moved)  # engram reinstalled elsewhere
    hi.uninstall(client, "project")
    assert not paths(client, "project", home, repo).exists()


def run_cli(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME")}
    return subprocess.run(
        [*ENGRAM, *args], cwd=cwd, env={**env, "HOME": str(home)}, capture_output=True, text=True, timeout=60
    )


def test_the_commands(env):
    home, repo = env
    path = paths("claude-code", "project", home, repo)
    write(path, CLAUDE_BEFORE)
    r = run_cli("hooks", "install", "claude-code", "--scope", "project", "--dry-run", cwd=repo, home=home)
    assert r.returncode == 0 and "(dry run: nothing written)" in r.stdout and "+++ " in r.stdout
    assert json.loads(path.read_text()) == CLAUDE_BEFORE
    r = run_cli("hooks", "install", "claude-code", "--scope", "project", cwd=repo, home=home)
    assert r.returncode == 0 and "hooks installed" in r.stdout, r.stderr
    r = run_cli("--json", "hooks", "status", cwd=repo, home=home)
    rows = {(x["client"], x["scope"]): x for x in json.loads(r.stdout)}
    assert rows["claude-code", "project"]["installed"] and rows["claude-code", "project"]["runnable"]
    assert rows["claude-code", "project"]["missing_events"] == []
    assert not rows["claude-code", "user"]["installed"] and not rows["gemini", "project"]["installed"]
    path.write_text("{broken")
    r = run_cli("hooks", "install", "claude-code", "--scope", "project", cwd=repo, home=home)
    assert r.returncode == 1 and "is not valid JSON" in r.stderr and path.read_text() == "{broken"
    r = run_cli("hooks", "status", cwd=repo, home=home)
    assert r.returncode == 0 and "unreadable" in r.stdout
    r = run_cli("hooks", "install", "cursor", cwd=repo, home=home)
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_a_store_other_than_the_default_is_written_into_each_command(env, tmp_path):
    home, repo = env
    path = paths("claude-code", "user", home, repo)
    store = tmp_path / "my store"
    hi.install("claude-code", "user", options=hi.store_options(store, "bob"))
    commands = [c for cs in engram_entries(json.loads(path.read_text()), "claude-code").values() for c in cs]
    assert len(commands) == len(hi.CLIENTS["claude-code"].events)
    for c in commands:
        words = shlex.split(c)
        assert words[words.index("--home") + 1] == str(store) and words[words.index("--user") + 1] == "bob"
    row = next(r for r in hi.status() if r["client"] == "claude-code" and r["scope"] == "user")
    assert row["store"] == {"home": str(store), "user": "bob"}
    # Installed again for the default store: the same entries, without the options.
    hi.install("claude-code", "user", options=hi.store_options(Path("~/.engram"), "default"))
    commands = [c for cs in engram_entries(json.loads(path.read_text()), "claude-code").values() for c in cs]
    assert len(commands) == len(hi.CLIENTS["claude-code"].events)
    assert not any("--home" in c or "--user" in c for c in commands)
    assert hi.store_options(None, None) == []


def test_the_install_command_writes_the_home_it_was_given_and_the_hook_uses_it(env, tmp_path):
    home, repo = env
    store = tmp_path / "store"
    r = run_cli("--home", str(store), "hooks", "install", "claude-code", cwd=repo, home=home)
    assert r.returncode == 0 and f"They act on the store in {store}" in r.stdout, r.stderr
    doc = json.loads(paths("claude-code", "user", home, repo).read_text())
    start = engram_entries(doc, "claude-code")["SessionStart"][0]
    assert shlex.split(start)[-2:] == ["--home", str(store)]
    r = run_cli("hooks", "status", cwd=repo, home=home)
    assert f"store: {store}" in r.stdout
    # The command as the client runs it, with a payload it cannot read: the hook still exits 0,
    # and its log line goes to the store named on its command line, not to ENGRAM_HOME's.
    env_home = tmp_path / "env home"
    p = subprocess.run(
        shlex.split(start),
        input="not json",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": str(home), "ENGRAM_HOME": str(env_home)},
    )
    assert p.returncode == 0
    assert "claude-code SessionStart" in (store / "hooks.log").read_text()
    assert not (env_home / "hooks.log").exists()
