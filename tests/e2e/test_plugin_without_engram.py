"""engram's Claude Code plugin on a machine with neither `engram` nor `uvx` (issue 46), in the real
Claude Code binary (npm) against a scripted model on 127.0.0.1: the session runs to its end, the
SessionStart hook tells the user what to install (its `systemMessage`, which Claude Code shows the
user and does not give the model), and the other hooks say nothing."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from clients_support import ROOT, client_bin, git_repo
from model_fakes import FakeAnthropic, anthropic_text, text

pytestmark = [pytest.mark.duckdb_only]

MESSAGE = (
    "engram: not installed, so this session has no memory. "
    "Install it with: pipx install engram-recall (or install uv, for uvx)"
)


def test_a_plugin_with_no_engram_tells_the_user_once_and_the_session_goes_on(tmp_path):
    home, repo = tmp_path / "home", git_repo(tmp_path / "ledger", "https://github.com/acme/ledger.git")
    (home / ".claude").mkdir(parents=True)
    bare = tmp_path / "bin"  # the tools the launcher and Claude Code use, and no engram, no uvx
    bare.mkdir()
    for tool in ("sh", "env", "cat", "git", "node", "mktemp", "rm", "setsid", "printf"):
        found = next(
            (f"{d}/{tool}" for d in ("/usr/local/bin", "/usr/bin", "/bin") if os.path.exists(f"{d}/{tool}")), None
        )
        if found:
            (bare / tool).symlink_to(found)
    env = {
        "PATH": str(bare),
        "HOME": str(home),
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "ENABLE_TOOL_SEARCH": "false",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }

    def claude(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(client_bin("claude")), *args],
            cwd=repo,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=300,
        )

    for args in (["plugin", "marketplace", "add", str(ROOT)], ["plugin", "install", "engram@engram"]):
        r = claude(*args)
        assert r.returncode == 0, r.stderr[-2000:]
    with FakeAnthropic([[text("Hello.")]]) as fake:
        p = claude("-p", "Say hello", "--output-format", "stream-json", "--verbose", ANTHROPIC_BASE_URL=fake.url)
        assert p.returncode == 0, p.stderr[-3000:]
        seen = anthropic_text(fake.loop_requests()[0])
    events = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    hooks = [e for e in events if e.get("subtype") == "hook_response"]
    starts = [e for e in hooks if e["hook_event"] == "SessionStart"]
    assert len(starts) == 1 and starts[0]["exit_code"] == 0, starts
    assert json.loads(starts[0]["stdout"]) == {"systemMessage": MESSAGE}
    assert all(e["stdout"] == "" and e["exit_code"] == 0 for e in hooks if e["hook_event"] != "SessionStart"), hooks
    assert events[-1]["type"] == "result" and events[-1]["is_error"] is False, events[-1]
    assert "pipx install engram-recall" not in seen  # said to the user, not to the model
    assert not Path(home, ".engram").exists()
