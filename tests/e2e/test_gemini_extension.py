"""engram's Gemini CLI extension (plugins/gemini) in the real Gemini CLI (npm), against a scripted Gemini API
on 127.0.0.1, in a fresh HOME with nothing else set up: `gemini extensions validate` and `link`, two
sessions, then `gemini extensions uninstall`.

The extension finds engram on PATH (its launcher, bin/engram-launch) and uses the default store,
~/.engram of that HOME.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from clients_support import ROOT, client_bin, client_env, engram_cli, git_repo, stop_daemon
from model_fakes import FakeGemini, gemini_text, text, tool

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]

EXTENSION = ROOT / "plugins" / "gemini"
TASK = "Retry queue for failed webhooks"
# The user's settings before the extension (API-key auth chosen, as the Gemini CLI tests do).
USER_SETTINGS = '{"security": {"auth": {"selectedType": "gemini-api-key"}}}'


def gemini(
    args: list[str], home: Path, cwd: Path, fake: FakeGemini | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    # engram on PATH, as after `pipx install engram-recall`; the venv's, which runs this test.
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        "GEMINI_API_KEY": "fake-key",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        **client_env(home / ".engram"),
    }
    if fake is not None:
        env["GOOGLE_GEMINI_BASE_URL"] = fake.url
    return subprocess.run(
        [str(client_bin("gemini")), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def ok(p: subprocess.CompletedProcess) -> str:
    """stdout and stderr: Gemini CLI prints its extension commands' messages on either."""
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {p.stdout[-3000:]}\nstderr: {p.stderr[-3000:]}"
    return p.stdout + p.stderr


def gemini_ok(p: subprocess.CompletedProcess) -> dict:
    out = ok(p)
    return json.loads(p.stdout[p.stdout.find("{") :]) if out else {}


def declared(body: dict, suffix: str) -> list[str]:
    return [
        d["name"]
        for t in body.get("tools", [])
        for d in t.get("functionDeclarations", [])
        if d["name"].endswith(suffix)
    ]


def check_status_and_install(home: Path, repo: Path) -> None:
    """`engram hooks status` names the extension's hooks; `engram hooks install gemini` adds no copy."""
    env = {"HOME": str(home), **client_env(home / ".engram")}
    rows = json.loads(engram_cli("hooks", "status", "--json", cwd=repo, env=env).stdout)
    assert [(r["client"], r["plugin"], r["events"], r["runnable"]) for r in rows if r["scope"] == "plugin"] == [
        ("gemini", "engram", ["AfterAgent", "BeforeAgent", "SessionEnd", "SessionStart"], True)
    ]
    r = engram_cli("hooks", "install", "gemini", cwd=repo, env=env)
    assert r.returncode != 0 and "come from the plugin engram" in r.stderr, r.stderr
    assert "gemini extensions uninstall engram" in r.stderr


def test_the_extension_validates(tmp_path):
    assert "successfully validated" in ok(gemini(["extensions", "validate", str(EXTENSION)], tmp_path, ROOT))


def test_linked_extension_gives_tools_start_context_and_a_checkpoint_and_leaves_settings(tmp_path):
    home, repo = tmp_path / "home", git_repo(tmp_path / "api", "https://github.com/acme/api.git")
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(USER_SETTINGS)
    try:
        ok(gemini(["extensions", "link", str(EXTENSION), "--consent"], home, repo))
        assert "engram (0.1.0)" in ok(gemini(["extensions", "list"], home, repo))
        script = [
            lambda body: [tool(declared(body, "create_task")[0], name=TASK, goal="Retry with backoff")],
            [text("Task created; stopping.")],
        ]
        with FakeGemini(script) as fake:
            gemini_ok(
                gemini(["-p", "Add a retry queue for webhooks", "--yolo", "--output-format", "json"], home, repo, fake)
            )
            assert not fake.errors and not fake.script, fake.errors
            first = fake.loop_requests()[0]
            assert declared(first, "resume_task") and declared(first, "session_handoff")
            # The extension's context file reaches the model with the tools.
            assert "engram: memory across sessions" in json.dumps(first)
        check_status_and_install(home, repo)
        # A copy of the hooks in the user's settings too (as written before the extension came):
        # each event runs once, the copy stands aside.
        engram = Path(sys.executable).parent / "engram"
        copy = {
            e: [{"hooks": [{"type": "command", "command": f"{engram} hook {e} --client gemini", "timeout": 30000}]}]
            for e in ("SessionStart", "BeforeAgent", "SessionEnd")
        }
        settings.write_text(json.dumps({**json.loads(USER_SETTINGS), "hooks": copy}))
        seen = len((home / ".engram" / "hooks.log").read_text().splitlines())
        # A's SessionEnd hook checkpointed it; B's SessionStart hook gives the task.
        with FakeGemini([[text("Carrying on.")]]) as fake:
            gemini_ok(gemini(["-p", "Carry on", "--yolo", "--output-format", "json"], home, repo, fake))
            assert TASK in gemini_text(fake.loop_requests()[0])
        settings.write_text(USER_SETTINGS)
        log = (home / ".engram" / "hooks.log").read_text().splitlines()
        assert {ln.split()[2] for ln in log[:seen] if " gemini " in ln and " ok " in ln} >= {
            "SessionStart",
            "SessionEnd",
        }
        for event in ("SessionStart", "BeforeAgent", "SessionEnd"):
            assert sorted(ln.split()[4] for ln in log[seen:] if f" gemini {event} " in ln) == ["ok", "skipped"], log[
                seen:
            ]
        ok(gemini(["extensions", "uninstall", "engram"], home, repo))
        assert settings.read_text() == USER_SETTINGS  # the extension never touched the user's settings
        assert not (home / ".gemini" / "extensions" / "engram").exists()
    finally:
        stop_daemon(home / ".engram")
