"""ENGRAM_CAPTURE_OFF_PROJECTS as the clients' hooks read it: set where the client runs its hooks
(not in the daemon's environment), naming the repository by its path, it keeps every automatic
capture of that project (the turn's pitfalls and episodes, the conventions stated) while the
hooks still inject and checkpoint there; another repository is captured as before."""

from __future__ import annotations

import json
import time

import pytest

from tests.hooks.test_hook_command import engram, hook, log_lines, payload
from tests.hooks.test_hook_conventions import git_init, transcript

TURN = [
    {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "Why does the nightly export fail?"}},
    {
        "type": "assistant",
        "uuid": "a1",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "The export job runs out of disk in /var/tmp; point TMPDIR at /data/tmp."}
            ],
        },
    },
]


def capture_lines(home) -> list[str]:
    return [ln for ln in log_lines(home) if ":capture pid=" in ln]


def stop_with_a_turn(home, tmp_path, repo, session: str, env: dict | None = None) -> str:
    """Run Stop on a transcript of one finished turn; the detached capture's log line (it logs
    its own line when it is done, any time after the hook returned)."""
    t = tmp_path / f"{session}.jsonl"
    t.write_text("\n".join(json.dumps({**e, "cwd": str(repo), "sessionId": session}) for e in TURN) + "\n")
    before = len(capture_lines(home))
    out, line = hook(home, "Stop", payload("Stop", repo, session=session, transcript_path=str(t)), env=env)
    assert out is None and "capture handed to pid" in line, line
    end = time.monotonic() + 60
    while len(capture_lines(home)) == before:
        assert time.monotonic() < end, "the detached capture logged nothing within 60 s"
        time.sleep(0.05)
    return capture_lines(home)[before]


@pytest.mark.model
def test_a_project_named_by_path_where_the_hooks_run_is_not_captured(model_home, tmp_path):
    private, other = git_init(tmp_path / "client-work"), git_init(tmp_path / "blog")
    engram(model_home, "stats")  # the daemon starts first, from an environment without the setting
    off = {"ENGRAM_CAPTURE_OFF_PROJECTS": f"/nowhere\n{private}"}

    line = stop_with_a_turn(model_home, tmp_path, private, "p1", env=off)
    assert " skipped " in line and f"ENGRAM_CAPTURE_OFF_PROJECTS names {private}" in line, line
    end = payload(
        "SessionEnd",
        private,
        session="p2",
        transcript_path=str(transcript(tmp_path, private)),
        reason="prompt_input_exit",
    )
    _, line = hook(model_home, "SessionEnd", end, env=off)
    assert " ok " in line and "conventions" not in line, line  # the checkpoint ran, nothing captured
    assert json.loads(engram(model_home, "--json", "stats").stdout)["captured"]["episode"] == 0

    line = stop_with_a_turn(model_home, tmp_path, other, "o1", env=off)
    assert " ok " in line and "1 turns (1 stored)" in line, line
    assert json.loads(engram(model_home, "--json", "stats").stdout)["captured"]["episode"] == 1
