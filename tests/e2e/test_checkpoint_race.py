"""Two checkpoints of one session arriving together store one: real `engram hook` processes race."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.hooks.test_hook_command import ENGRAM, engram, hook, log_lines, payload
from tests.hooks.test_hook_transcripts import claude_entry, tool_result, tool_use, write_jsonl

pytestmark = pytest.mark.model
RACERS = 4


def test_concurrent_checkpoints_of_one_session_store_one(model_home, tmp_path):
    home, repo = model_home, tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "-C", str(repo), "init", "-q"], check=True)
    task = json.loads(engram(home, "--json", "task", "create", "Race work", cwd=repo).stdout)["task_id"]
    transcript = write_jsonl(
        tmp_path / "s.jsonl",
        [
            claude_entry("user", "Make the flaky upload test pass"),
            tool_use("b1", "Bash", {"command": "pytest -q tests/test_upload.py"}),
            tool_result("b1", "Exit code 1\nFAILED tests/test_upload.py::test_retry - expected 3 attempts", error=True),
        ],
    )
    hook(home, "SessionStart", payload("SessionStart", repo, source="startup"))  # the daemon is up
    env = {**os.environ, "ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    env.pop("ENGRAM_PROJECT", None)
    events = ["PreCompact", "SessionEnd"] * (RACERS // 2)
    procs = [
        subprocess.Popen(
            [*ENGRAM, "hook", ev, "--client", "claude-code"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=repo,
        )
        for ev in events
    ]
    for p, ev in zip(procs, events):  # every input written before any is closed: they start together
        p.stdin.write(
            json.dumps(payload(ev, repo, transcript_path=str(transcript), trigger="manual", reason="other")).encode()
        )
    for p in procs:
        p.stdin.close()
        p.stdin = None  # closed: communicate() only reads
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0 and err == b"", err
    lines = [ln for ln in log_lines(home) if "checkpoint of" in ln]
    assert len(lines) == RACERS, lines
    assert sum("stored nothing (unchanged since the last checkpoint)" in ln for ln in lines) == RACERS - 1, lines
    view = json.loads(engram(home, "--json", "task", "show", task, cwd=repo).stdout)
    assert view["counts"]["handoffs"] == 1 and view["counts"]["failures"] == 1, view["counts"]
