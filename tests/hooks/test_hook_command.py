"""`engram hook` as a real command: the client's JSON on stdin, a real daemon in a temporary ENGRAM_HOME.

Also every way it must not break the agent: bad JSON, a missing or hostile transcript, a daemon
that cannot start or does not answer, an unknown event. Each ends with exit 0, nothing on stdout
the client would misread, and one clear line in hooks.log.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "hooks"
ENGRAM = [sys.executable, "-m", "engram.cli"]


def engram(
    home: Path,
    *argv: str,
    stdin: str | bytes = "",
    env: dict | None = None,
    timeout: float = 120,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess:
    """The command run in `cwd` (its project is that directory's; default: outside any repository)."""
    e = {**os.environ, "ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1", **(env or {})}
    e.pop("ENGRAM_PROJECT", None)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run(
        [*ENGRAM, *argv], input=data, capture_output=True, env=e, cwd=cwd or "/", timeout=timeout, check=False
    )


def hook(
    home: Path, event: str, payload: dict | str | bytes, client: str = "claude-code", env: dict | None = None
) -> tuple[dict | None, str]:
    """Run one hook; returns (its stdout JSON or None when it printed nothing, its log line)."""
    before = log_lines(home)
    raw = payload if isinstance(payload, str | bytes) else json.dumps(payload)
    r = engram(home, "hook", event, "--client", client, stdin=raw, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stderr == b"", r.stderr  # nothing for the client to show as an error
    # The turn's capture runs detached and logs its own line when it is done (any time later).
    lines = [ln for ln in log_lines(home)[len(before) :] if ":capture " not in ln]
    assert len(lines) == 1, lines
    out = r.stdout.decode()
    return (json.loads(out) if out.strip() else None), lines[0]


def log_lines(home: Path) -> list[str]:
    p = home / "hooks.log"
    return p.read_text().splitlines() if p.exists() else []


def context_of(out: dict | None, event: str) -> str:
    assert out is not None
    assert set(out) == {"hookSpecificOutput"}
    spec = out["hookSpecificOutput"]
    assert spec["hookEventName"] == event and set(spec) == {"hookEventName", "additionalContext"}
    return spec["additionalContext"]


@pytest.fixture
def repo(tmp_path) -> Path:
    """A git work tree with a commit, an edited file and a new one."""
    r = tmp_path / "demo-repo"
    (r / "src").mkdir(parents=True)
    (r / "src" / "client.py").write_text("x\n")
    git = ["git", "-C", str(r), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    (r / "src" / "client.py").write_text("y\n")
    (r / "src" / "retry.py").write_text("r\n")
    return r


def transcript_for(tmp_path: Path, repo: Path, task_id: str, name: str = "t.jsonl") -> Path:
    """The sample Claude Code session, about this repository and this task."""
    text = (DATA / "claude_session.jsonl").read_text()
    p = tmp_path / name
    p.write_text(text.replace("/tmp/demo-repo", str(repo)).replace("t-0123456789ab", task_id))
    return p


def payload(event: str, repo: Path, session: str = "s1", **kw) -> dict:
    return {
        "session_id": session,
        "transcript_path": "",
        "cwd": str(repo),
        "hook_event_name": event,
        "permission_mode": "default",
        **kw,
    }


@pytest.mark.model
def test_a_session_checkpointed_at_its_end_is_what_the_next_one_starts_with(model_home, repo, tmp_path):
    # An empty home: the first hook starts the daemon and has nothing to inject.
    out, line = hook(model_home, "SessionStart", payload("SessionStart", repo, source="startup"))
    assert out is None and " ok " in line and "nothing to inject" in line
    r = engram(model_home, "--json", "task", "create", "HTTP client retry", "--goal", "retries with backoff", cwd=repo)
    task = json.loads(r.stdout)["task_id"]
    t = transcript_for(tmp_path, repo, task)

    out, line = hook(
        model_home, "SessionEnd", payload("SessionEnd", repo, transcript_path=str(t), reason="prompt_input_exit")
    )
    assert out is None and f"task {task} (transcript)" in line and "1 failures" in line
    # The same transcript again (SessionEnd after PreCompact, a retried hook): nothing new.
    out, line = hook(model_home, "SessionEnd", payload("SessionEnd", repo, transcript_path=str(t), reason="other"))
    assert "stored nothing (unchanged since the last checkpoint)" in line
    view = json.loads(engram(model_home, "--json", "task", "show", task, cwd=repo).stdout)
    assert view["counts"]["handoffs"] == 1 and view["counts"]["failures"] == 1
    stored = json.dumps(view)
    assert "sk-ant-api03-AAAA" not in stored and "[REDACTED]" in stored  # the request's token

    out, line = hook(model_home, "SessionStart", payload("SessionStart", repo, session="s2", source="startup"))
    text = context_of(out, "SessionStart")
    assert f"{task} [open] HTTP client retry" in text  # the open task with its last activity
    assert f"Task {task}: HTTP client retry [open]" in text and "Goal: retries with backoff" in text
    assert "- [done] Add retry with backoff to client.py" in text  # the todo list, with statuses
    assert "- [not_started] Make the test suite pass" in text
    assert "Next step: Make the test suite pass" in text
    assert "[pytest] `python -m pytest -q tests/test_client.py` failed" in text  # a pitfall
    assert "src/retry.py" in text and "src/client.py" in text  # the edited files
    assert "Git: branch main at" in text and "uncommitted: src/client.py, src/retry.py" in text
    assert f"resumed {task}" in line
    # A session in another repository does not see this project's task, nor its memories.
    other = tmp_path / "other-repo"
    other.mkdir()
    subprocess.run(["git", "-C", str(other), "init", "-q"], check=True)
    out, line = hook(model_home, "SessionStart", payload("SessionStart", other, session="s3", source="startup"))
    assert out is None and "nothing to inject" in line
    # A prompt brings what bears on it: a memory of the project, not the checkpoint's bare failed
    # command (no cause, no fix: the resume block above already shows it); another project: nothing.
    why = "test_retry expects 3 attempts: the client retries twice after the first call fails"
    engram(model_home, "remember", why, cwd=repo)
    ask = "Why does test_retry in tests/test_client.py fail with expected 3 attempts, got 1?"
    out, line = hook(model_home, "UserPromptSubmit", payload("UserPromptSubmit", repo, session="s2", prompt=ask))
    text = context_of(out, "UserPromptSubmit")
    assert "the client retries twice" in text and "` failed" not in text
    out, line = hook(model_home, "UserPromptSubmit", payload("UserPromptSubmit", other, session="s3", prompt=ask))
    assert out is None and "no memory clearly relevant" in line  # not in another project


@pytest.mark.model
def test_auto_compaction_checkpoints_and_reports_context_overflow(model_home, repo, tmp_path):
    task = json.loads(engram(model_home, "--json", "task", "create", "Compaction work", cwd=repo).stdout)["task_id"]
    t = transcript_for(tmp_path, repo, task)
    out, line = hook(
        model_home,
        "PreCompact",
        payload("PreCompact", repo, transcript_path=str(t), trigger="auto", custom_instructions=""),
    )
    assert out is None and "reported context_overflow" in line
    sessions = json.loads(engram(model_home, "--json", "resume", task, cwd=repo).stdout)["interrupted_sessions"]
    assert [(s["session_id"], s["reason"]) for s in sessions] == [("claude-code:s1", "context_overflow")]
    # A manual compaction checkpoints but is no interruption.
    out, line = hook(
        model_home, "PreCompact", payload("PreCompact", repo, session="s9", transcript_path=str(t), trigger="manual")
    )
    assert "context_overflow" not in line


@pytest.mark.model
def test_the_prompt_hook_adds_only_clearly_relevant_memories(model_home, repo):
    engram(model_home, "remember", "The HTTP client retries with exponential backoff capped at 30 seconds", cwd=repo)
    engram(model_home, "remember", "Deploys go to Fly.io from the main branch every Thursday", cwd=repo)
    out, line = hook(
        model_home,
        "UserPromptSubmit",
        payload("UserPromptSubmit", repo, prompt="How should the HTTP client back off when it retries?"),
    )
    text = context_of(out, "UserPromptSubmit")
    assert "exponential backoff capped at 30 seconds" in text and "Fly.io" not in text
    out, line = hook(
        model_home, "UserPromptSubmit", payload("UserPromptSubmit", repo, prompt="write a haiku about cats")
    )
    assert out is None and "no memory clearly relevant" in line
    out, line = hook(
        model_home,
        "UserPromptSubmit",
        payload("UserPromptSubmit", repo, prompt="How should the HTTP client back off?"),
        env={"ENGRAM_HOOK_PROMPT": "0"},
    )
    assert out is None and "ENGRAM_HOOK_PROMPT is off" in line


@pytest.mark.model
def test_a_memory_is_injected_once_per_context_of_a_session(model_home, repo):
    """On real sessions the same memory came back at prompt after prompt of one session: once
    injected, the context holds it. Another session gets it; a new context of the session (a
    SessionStart after a compaction, a resume, a clear) gets it again."""
    engram(model_home, "remember", "The HTTP client retries with exponential backoff capped at 30 seconds", cwd=repo)
    prompt = "How should the HTTP client back off when it retries?"

    def injected(session: str) -> bool:
        out, line = hook(model_home, "UserPromptSubmit", payload("UserPromptSubmit", repo, session, prompt=prompt))
        if out is None:
            assert "no memory clearly relevant" in line
            return False
        return "exponential backoff capped at 30 seconds" in context_of(out, "UserPromptSubmit")

    assert injected("s1") and not injected("s1")
    assert injected("s2")
    hook(model_home, "SessionStart", payload("SessionStart", repo, "s1", source="compact"))
    assert injected("s1")


@pytest.mark.model
def test_codex_stop_says_it_checkpointed_and_which_process_captures_the_turn(model_home, repo, tmp_path):
    """Codex's Stop both checkpoints and hands the turn's capture to a detached process: its log
    line says both (it once said only the checkpoint, so nothing showed the capture was running)."""
    t = tmp_path / "rollout.jsonl"
    t.write_text((DATA / "codex_rollout.jsonl").read_text())
    base = {"session_id": "cx-1", "transcript_path": str(t), "cwd": str(repo), "hook_event_name": "Stop"}
    out, line = hook(model_home, "Stop", base, client="codex")
    m = re.search(r"; capture handed to pid (\d+)$", line)
    assert out is None and " ok " in line and m, line
    assert "checkpoint" in line or "stored" in line, line
    end = time.monotonic() + 60
    while f"capture pid={m.group(1)} " not in "".join(log_lines(model_home)):  # its own line, when done
        assert time.monotonic() < end, "the detached capture logged nothing within 60 s"
        time.sleep(0.05)


@pytest.mark.model
def test_gemini_cli_events(model_home, repo, tmp_path):
    task = json.loads(engram(model_home, "--json", "task", "create", "Date parser", cwd=repo).stdout)["task_id"]
    t = tmp_path / "session-gem.jsonl"
    t.write_text(
        (DATA / "gemini_session.jsonl").read_text().replace("t-aaaaaaaaaaaa", task).replace("/tmp/gem-repo", str(repo))
    )
    base = {"session_id": "gem-1", "transcript_path": str(t), "cwd": str(repo), "timestamp": "2026-12-01T10:00:00Z"}
    out, line = hook(
        model_home, "PreCompress", {**base, "hook_event_name": "PreCompress", "trigger": "auto"}, client="gemini"
    )
    assert out is None and f"task {task} (transcript)" in line and "reported context_overflow" in line
    out, line = hook(
        model_home, "SessionStart", {**base, "hook_event_name": "SessionStart", "source": "startup"}, client="gemini"
    )
    text = context_of(out, "SessionStart")
    assert "- [done] Reproduce the flaky test" in text and "- [in_progress] Fix dates.py" in text
    assert "day is out of range for month" in text and "dates.py" in text
    engram(model_home, "remember", "Dates are parsed with dateutil, never strptime", cwd=repo)
    out, line = hook(
        model_home,
        "BeforeAgent",
        {**base, "hook_event_name": "BeforeAgent", "prompt": "which library parses dates here?"},
        client="gemini",
    )
    assert "dateutil" in context_of(out, "BeforeAgent")
    out, line = hook(
        model_home, "SessionEnd", {**base, "hook_event_name": "SessionEnd", "reason": "exit"}, client="gemini"
    )
    assert "stored nothing (unchanged" in line


@pytest.mark.model
def test_hostile_transcripts_are_logged_and_the_session_goes_on(model_home, repo, tmp_path):
    missing = tmp_path / "gone.jsonl"
    out, line = hook(model_home, "SessionEnd", payload("SessionEnd", repo, transcript_path=str(missing)))
    assert out is None and " skipped " in line and f"transcript {missing} does not exist" in line
    out, line = hook(model_home, "SessionEnd", payload("SessionEnd", repo, transcript_path=str(tmp_path)))
    assert "is a directory" in line
    out, line = hook(model_home, "SessionEnd", payload("SessionEnd", repo))
    assert "no transcript_path in the input" in line
    # Truncated, binary, huge and unknown lines around real ones: what can be read is checkpointed.
    bad = tmp_path / "bad.jsonl"
    with bad.open("wb") as f:
        f.write(b'{"type": "user", "message": {"content": "Fix the login bug"}, "uuid": "1"}\n')
        f.write(b'{"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "a", "na\n')
        f.write(b"\x80\x81\x82\x00 binary \xff\n")
        f.write(b'{"type": "user", "message": {"content": "' + b"y" * (17 * 1024 * 1024) + b'"}}\n')
        f.write(b'{"type": "a-future-entry", "whatever": [1, 2]}\n')
        f.write(
            b'{"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "w", "name": "Write", '
            b'"input": {"file_path": "' + str(repo).encode() + b'/src/login.py", "content": "x"}}]}}\n'
        )
        f.write(
            b'{"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "w", '
            b'"content": "ok"}]}}\n'
        )
        f.write(b'{"type": "user", "message": {"content": "cut mid-wri')
    out, line = hook(model_home, "SessionEnd", payload("SessionEnd", repo, transcript_path=str(bad)))
    assert out is None and " ok " in line and "stored " in line
    assert "skipped 4 unreadable entries" in line and "line over 16 MB: 1" in line
    # Binary garbage as a whole file: nothing to checkpoint, said so.
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(os.urandom(200_000))
    out, line = hook(model_home, "SessionEnd", payload("SessionEnd", repo, transcript_path=str(junk)))
    assert out is None and "nothing to checkpoint" in line and "skipped" in line


def test_bad_input_never_breaks_the_agent(tmp_path):
    home = tmp_path / "home"
    for raw, why in [
        ("{not json", "input is not JSON"),
        ("[1, 2]", "input is not a JSON object (got list)"),
        ("", "input is not a JSON object (got NoneType)"),
        (b"\xff\xfe\x00", "input is not JSON"),
    ]:
        out, line = hook(home, "SessionStart", raw)
        assert out is None and " error " in line and why in line, line
    out, line = hook(home, "Notification", {"session_id": "s"})
    assert out is None and "claude-code has no hook event 'Notification'" in line
    out, line = hook(home, "Stop", {"session_id": "s"})  # a turn's capture needs the transcript
    assert out is None and "no transcript_path in the input" in line
    out, line = hook(home, "SessionStart", {"session_id": "s"}, env={"ENGRAM_W_BM25": "lots"})
    assert out is None and "bad setting: ENGRAM_W_BM25='lots' is not a number" in line
    assert not (home / "engram.sock").exists()  # none of these started a daemon


@pytest.mark.model
def test_a_daemon_that_cannot_start_is_logged_and_the_hook_exits_0(model_home, tmp_path):
    (model_home / "memories.duckdb").mkdir()  # the database path is a folder: the daemon exits
    out, line = hook(
        model_home,
        "SessionStart",
        {"session_id": "s", "cwd": str(tmp_path), "source": "startup"},
        env={"ENGRAM_HOOK_TIMEOUT": "30"},
    )
    assert out is None and " error " in line and "engram daemon" in line and "exited with code" in line, line


def test_a_daemon_that_does_not_answer_is_given_up_on_within_the_timeout(tmp_path):
    home = Path(__import__("tempfile").mkdtemp(prefix="egh", dir="/tmp"))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(home / "engram.sock"))
    sock.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # accepts and never answers, as a hung daemon would
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except TimeoutError:
                continue

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    try:
        out, line = hook(
            home, "UserPromptSubmit", {"session_id": "s", "prompt": "anything"}, env={"ENGRAM_HOOK_TIMEOUT": "1"}
        )
        assert out is None and " error " in line and "engram daemon" in line and "timed out" in line, line
        ms = int(line.split(" error ")[1].split("ms")[0])
        # The 1 s budget plus the interpreter's start, not the socket's default 30 s: well within
        # the client's own timeout (Claude Code: 60 s).
        assert ms < 20_000
    finally:
        stop.set()
        th.join(5)
        for c in held:
            c.close()
        sock.close()
        shutil.rmtree(home, ignore_errors=True)
