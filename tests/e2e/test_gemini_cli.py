"""The real Gemini CLI (npm) against a scripted Gemini API on 127.0.0.1, with engram's hooks as
`engram hooks install gemini --scope project` writes them and engram's MCP server in its settings.

Session A creates a task through engram's tools, writes a file and runs a failing command, then exits
without a handoff: its SessionEnd checkpoint is what session B's SessionStart injection shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from clients_support import client_bin, client_env, engram_cli, engram_env, git_repo, stop_daemon
from model_fakes import FakeGemini, gemini_text, text, tool

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]  # real clients: one pass is enough

TASK = "Rate limiter for the public API"
FAILED = "python3 -c 'import ratelimit_backend_redis'"
EDITED = "limiter.py"
REQUEST = "Add a rate limiter to the public API"


def gemini(
    repo: Path, prompt: str, fake: FakeGemini, client_home: Path, engram_home: Path, timeout: float = 300
) -> subprocess.CompletedProcess:
    """One unattended `gemini -p` session in `repo` (API-key auth selected in its user settings)."""
    settings = client_home / ".gemini" / "settings.json"
    if not settings.exists():
        settings.parent.mkdir(parents=True)
        settings.write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(client_home),
        "GOOGLE_GEMINI_BASE_URL": fake.url,
        "GEMINI_API_KEY": "fake-key",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        **client_env(engram_home),
    }
    argv = [str(client_bin("gemini")), "-p", prompt, "--yolo", "--output-format", "json"]
    return subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)


def ok(p: subprocess.CompletedProcess) -> dict:
    assert p.returncode == 0, f"gemini exited {p.returncode}\nstdout: {p.stdout[-3000:]}\nstderr: {p.stderr[-3000:]}"
    return json.loads(p.stdout[p.stdout.find("{") :])


def setup_repo(repo: Path, engram_home: Path) -> None:
    r = engram_cli("hooks", "install", "gemini", "--scope", "project", cwd=repo, env=engram_env(engram_home))
    assert r.returncode == 0, r.stderr
    path = repo / ".gemini" / "settings.json"
    settings = json.loads(path.read_text())
    assert {"SessionStart", "BeforeAgent", "SessionEnd"} <= set(settings["hooks"])
    # engram's MCP server beside the hooks, as a user adds it (`gemini mcp add engram ...` writes the same).
    settings["mcpServers"] = {
        "engram": {"command": sys.executable, "args": ["-m", "engram"], "env": engram_env(engram_home), "trust": True}
    }
    path.write_text(json.dumps(settings, indent=2))


def declared(body: dict, suffix: str) -> str:
    """The name Gemini CLI gives one of engram's MCP tools (it prefixes the server's name)."""
    names = [d["name"] for t in body.get("tools", []) for d in t.get("functionDeclarations", [])]
    hits = [n for n in names if n.endswith(suffix)]
    assert hits, f"no {suffix} among the declared tools {names}"
    return hits[0]


@pytest.fixture(scope="module")
def session_b_start(tmp_path_factory):
    """Session A in a new repository, then the first request session B's model receives there."""
    root = tmp_path_factory.mktemp("gemini-ab")
    engram_home, client_home = root / "engram-home", root / "client-home"
    repo = git_repo(root / "api", "https://github.com/acme/api.git")
    setup_repo(repo, engram_home)
    script = [
        lambda body: [tool(declared(body, "create_task"), name=TASK, goal="Limit each key to 100 requests a minute")],
        [tool("write_file", file_path=str(repo / EDITED), content="class Limiter:\n    pass\n")],
        [tool("run_shell_command", command=FAILED, description="check the redis backend")],
        [text("The redis backend module is missing; stopping.")],
    ]
    try:
        with FakeGemini(script) as fake:
            ok(gemini(repo, REQUEST, fake, client_home, engram_home))
            assert not fake.errors, fake.errors
            assert not fake.script, "session A ended before its script did"
            last = json.dumps(fake.loop_requests()[-1]["contents"])
            assert "ratelimit_backend_redis" in last  # the command really ran and failed
        assert (repo / EDITED).exists()
        with FakeGemini([[text("Resuming the rate limiter.")]]) as fake:
            ok(gemini(repo, "Carry on", fake, client_home, engram_home))
            yield gemini_text(fake.loop_requests()[0])
    finally:
        stop_daemon(engram_home)


def test_session_end_checkpoint_reaches_the_next_session_start(session_b_start):
    first = session_b_start
    assert TASK in first, "session B's first request lacks A's task"
    assert "ratelimit_backend_redis" in first, "A's failed command is missing"
    assert 0 <= first.lower().find("pitfall") < first.rfind("ratelimit_backend_redis"), (
        "A's failed command is not given as a pitfall"
    )
    assert EDITED in first, "A's written file is missing"


# Gemini CLI 0.61 records each tool result (functionResponse) as a "type": "user" message: the
# checkpoint's last request must still be the user's (it once showed the failed command's output).
def test_the_last_request_shown_is_the_users(session_b_start):
    assert REQUEST in session_b_start


def test_a_failing_hook_leaves_the_gemini_session_running(tmp_path, engram_home):
    client_home = tmp_path / "client-home"
    repo = git_repo(tmp_path / "api", "https://github.com/acme/api.git")
    r = engram_cli("hooks", "install", "gemini", "--scope", "project", cwd=repo, env=engram_env(engram_home))
    assert r.returncode == 0, r.stderr
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where ENGRAM_HOME's parent should be\n")
    script = [[tool("run_shell_command", command="echo tidy", description="tidy")], [text("Tidied.")]]
    with FakeGemini(script) as fake:
        out = ok(gemini(repo, "Tidy the README", fake, client_home, blocker / "home"))
        assert out["response"] == "Tidied."
        assert not fake.script, "the session stopped before its script's end"
        contents = json.dumps(fake.loop_requests()[0]["contents"])
    # A failing hook adds nothing the client would pass to the model.
    assert "<hook_context>" not in contents and "Traceback" not in contents
