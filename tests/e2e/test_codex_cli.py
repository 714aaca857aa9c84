"""The real Codex CLI (npm) against a scripted Responses API on 127.0.0.1, with engram's hooks as
`engram hooks install codex` writes them into CODEX_HOME, trusted the way Codex's /hooks review
trusts them, and engram's MCP server added with `codex mcp add`.

Session A runs a failing command, writes a file with apply_patch and creates a task through engram's
MCP tools, then exits without a handoff: its Stop or SessionEnd checkpoint is what session B's SessionStart
injection shows. A hook that cannot work leaves the session running to its end.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from clients_support import ENGRAM, client_bin, client_env, engram_cli, engram_env, git_repo, stop_daemon
from model_fakes import FakeOpenAI, custom_tool, openai_text, text, tool

from engram.hooks.plugins import is_engram_hook

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]  # real clients: one pass is enough

TASK = "Rate limiter for the public API"
GOAL = "Limit each API key to 100 requests a minute"
FAILED = "python3 -c 'import ratelimit_backend_redis'"
EDITED = "limiter.py"
REQUEST = "Add a rate limiter to the public API"
EVENTS = {"SessionStart", "UserPromptSubmit", "PreCompact", "Stop", "SessionEnd"}
KEY_VAR = "ENGRAM_TEST_OPENAI_KEY"
OBJECTIVE = "Ship the limiter behind a feature flag"


def codex_env(client_home: Path, engram_home: Path) -> dict[str, str]:
    """Codex's environment: its home (config.toml, hooks.json, sessions) under the test's folder."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(client_home),
        "CODEX_HOME": str(client_home / ".codex"),
        KEY_VAR: "sk-fake",
        **client_env(engram_home),
    }


def codex(
    repo: Path, prompt: str, fake: FakeOpenAI, client_home: Path, engram_home: Path, timeout: float = 300
) -> subprocess.CompletedProcess:
    """One unattended `codex exec` session in `repo`, the model a custom provider at the fake.

    The provider comes on the command line (`-c`), so config.toml holds only what the user's own
    commands wrote. No sandbox: bubblewrap's namespaces are not available everywhere the tests run.
    """
    provider = (
        f'{{name="fake", base_url="{fake.url}/v1", wire_api="responses", env_key="{KEY_VAR}", '
        "supports_websockets=false, request_max_retries=0, stream_max_retries=0}"
    )
    argv = [
        str(client_bin("codex")),
        "exec",
        "-c",
        f'model="{fake.model}"',
        "-c",
        'model_provider="fake"',
        "-c",
        f"model_providers.fake={provider}",
        "--dangerously-bypass-approvals-and-sandbox",
        prompt,
    ]
    return subprocess.run(
        argv,
        cwd=repo,
        env=codex_env(client_home, engram_home),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 0, f"codex exited {p.returncode}\nstdout: {p.stdout[-3000:]}\nstderr: {p.stderr[-3000:]}"
    return p.stdout


class AppServer:
    """`codex app-server` over stdio: the JSON-RPC its TUI uses for /hooks."""

    def __init__(self, repo: Path, env: dict[str, str]):
        self.proc = subprocess.Popen(
            [str(client_bin("codex")), "app-server"],
            cwd=repo,
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.next_id = 0

    def call(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}) + "\n"
        )
        self.proc.stdin.flush()
        while line := self.proc.stdout.readline():  # notifications come in between
            msg = json.loads(line)
            if msg.get("id") == self.next_id:
                assert "error" not in msg, f"{method}: {msg['error']}"
                return msg["result"]
        raise AssertionError(f"codex app-server exited during {method}")

    def __enter__(self):
        self.call("initialize", {"clientInfo": {"name": "engram-tests", "version": "0"}})
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "initialized"}) + "\n")
        return self

    def __exit__(self, *exc):
        self.proc.stdin.close()  # its end of input: it exits
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


def engram_hooks(app: AppServer, repo: Path) -> list[dict]:
    (entry,) = app.call("hooks/list", {"cwds": [str(repo)]})["data"]
    assert not entry["warnings"] and not entry["errors"], (entry["warnings"], entry["errors"])
    # As `engram hooks status` tells them: Stop's command starts with the fast path's /bin/sh.
    return [h for h in entry["hooks"] if is_engram_hook(h["command"], "codex")]


def trust_hooks(repo: Path, env: dict[str, str]) -> list[dict]:
    """Trust engram's hooks as the /hooks review's "trust" does: hooks/list gives each hook's key and
    current hash, config/batchWrite stores `hooks.state.<key>.trusted_hash` in the user's config.toml
    (openai/codex codex-rs/tui/src/hooks_rpc.rs `write_hook_trusts`)."""
    with AppServer(repo, env) as app:
        hooks = engram_hooks(app, repo)
        # Codex read every event install wrote, each new to it: untrusted, so not run yet.
        assert {h["eventName"] for h in hooks} == {e[0].lower() + e[1:] for e in EVENTS}, hooks
        assert {h["trustStatus"] for h in hooks} == {"untrusted"}
        app.call(
            "config/batchWrite",
            {
                "edits": [
                    {
                        "keyPath": "hooks.state",
                        "mergeStrategy": "upsert",
                        "value": {h["key"]: {"trusted_hash": h["currentHash"]} for h in hooks},
                    }
                ],
                "reloadUserConfig": True,
            },
        )
        hooks = engram_hooks(app, repo)
        assert {h["trustStatus"] for h in hooks} == {"trusted"} and all(h["enabled"] for h in hooks), hooks
        return hooks


def set_up(repo: Path, client_home: Path, engram_home: Path, mcp: bool = True) -> None:
    """What a user does: install the hooks, add the MCP server, trust the hooks."""
    env = codex_env(client_home, engram_home)
    r = engram_cli("--home", str(engram_home), "hooks", "install", "codex", cwd=repo, env=env)  # as engram-setup says
    assert r.returncode == 0, r.stderr
    assert "/hooks" in r.stdout  # it tells the user that Codex runs them only once trusted
    hooks = json.loads((client_home / ".codex" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == EVENTS
    if mcp:
        # What README's `codex mcp add engram -- engram` writes, with this test's home for engram
        # (Codex passes an MCP server only the variables it is given).
        extra = [f"--env={k}={v}" for k, v in engram_env(engram_home).items()]
        r = subprocess.run(
            [str(client_bin("codex")), "mcp", "add", "engram", *extra, "--", str(ENGRAM)],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
    trust_hooks(repo, env)


def when_offered(fake: FakeOpenAI, namespace: str, step: list, wait_s: int = 60) -> object:
    """`step` once Codex offers the namespace's tools to the model (or after `wait_s`). Codex 0.171
    starts MCP servers in the background, and a call before engram's is up fails ("unsupported
    call"); until then the model waits a second in the shell."""
    waited = []

    def run(body: dict) -> list:
        offered = namespace in json.dumps(body.get("tools")) or namespace in json.dumps(body.get("input"))
        if offered or len(waited) >= wait_s:
            return step
        waited.append(1)
        fake.script.insert(0, run)
        return [tool("exec_command", cmd="sleep 1")]

    return run


def log_lines(engram_home: Path, event: str) -> list[str]:
    return [ln for ln in (engram_home / "hooks.log").read_text().splitlines() if f" codex {event} " in ln]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """Session A in a new repository, then session B there: what B's model was sent first."""
    root = tmp_path_factory.mktemp("codex-ab")
    engram_home, client_home = root / "engram-home", root / "client-home"
    repo = git_repo(root / "api", "https://github.com/acme/api.git")
    try:
        set_up(repo, client_home, engram_home)
        with FakeOpenAI() as fake:
            fake.script = [
                [tool("exec_command", cmd=FAILED)],
                [
                    custom_tool(
                        "apply_patch",
                        f"*** Begin Patch\n*** Add File: {EDITED}\n+class Limiter:\n+    pass\n*** End Patch\n",
                    )
                ],
                when_offered(fake, "mcp__engram", [tool("mcp__engram/create_task", name=TASK, goal=GOAL)]),
                [tool("create_goal", objective=OBJECTIVE)],  # 0.171's plan tool for codex exec
                [text("The redis backend module is missing; stopping.")],
            ]
            ok(codex(repo, REQUEST, fake, client_home, engram_home))
            assert not fake.errors, fake.errors
            assert not fake.script, "session A ended before its script did"
            first_a, last_a = fake.loop_requests()[0], openai_text(fake.loop_requests()[-1])
        assert (repo / EDITED).exists()
        assert "ratelimit_backend_redis" in last_a  # the command really ran and failed
        m = re.search(r"\\\"task_id\\\":\\\"(t-[0-9a-f]{12})", last_a)
        assert m, f"no create_task result in A's last request: {last_a[-2000:]}"
        with FakeOpenAI([[text("Resuming the rate limiter.")]]) as fake:
            ok(codex(repo, "Carry on", fake, client_home, engram_home))
            first_b = openai_text(fake.loop_requests()[0])
        rollouts = sorted((client_home / ".codex" / "sessions").rglob("rollout-*.jsonl"))  # named by time
        assert len(rollouts) == 2
        meta = json.loads(rollouts[0].read_text().splitlines()[0])
        yield {
            "repo": repo,
            "engram_home": engram_home,
            "task_id": m.group(1),
            "first_a": first_a,
            "first_b": first_b,
            "session_a": meta["payload"]["id"],
        }
    finally:
        stop_daemon(engram_home)


def test_the_hooks_run_once_trusted(sessions):
    home = sessions["engram_home"]
    # Each session: SessionStart, the prompt, the turn's Stop, then SessionEnd as codex exec exits.
    for event in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"):
        lines = log_lines(home, event)
        assert len(lines) == 2 and all(" ok " in ln for ln in lines), (event, lines)
    start_a, start_b = log_lines(home, "SessionStart")
    assert "source=startup: nothing to inject" in start_a, start_a
    assert "source=startup: injected" in start_b, start_b
    assert "<engram>" not in openai_text(sessions["first_a"])


def test_session_b_starts_with_what_session_a_did(sessions):
    first = sessions["first_b"]  # what the model sees before it does anything
    assert TASK in first and sessions["task_id"] in first, "session B's first request lacks A's task"
    assert 0 <= first.lower().find("pitfall") < first.rfind("ratelimit_backend_redis"), (
        "A's failed command is not given as a pitfall"
    )
    assert EDITED in first, "A's patched file is missing"
    assert REQUEST in first, "A's request is missing"
    # A's goal (Codex's plan in codex exec) is the plan's open item: "[in_progress] objective".
    m = re.search(r"\[(\w+)\] " + re.escape(OBJECTIVE), first)
    assert m and m.group(1).lower() not in ("done", "completed"), f"A's open goal is missing: {first[-3000:]}"


def test_the_checkpoint_is_stored_against_the_task_the_session_created(sessions):
    home, tid = sessions["engram_home"], sessions["task_id"]
    # Stop runs in the background (the fast path) while `codex exec` ends with SessionEnd: the two
    # checkpoint the same transcript, whichever comes first stores it, the other stores nothing.
    ends = sorted([log_lines(home, "Stop")[0], log_lines(home, "SessionEnd")[0]], key=lambda ln: "stored nothing" in ln)
    stored, again = ends
    # The task is the one A created through the MCP tools (read from the transcript), not a guess.
    assert f"task {tid} (transcript)" in stored and "1 failures" in stored, ends
    assert "stored nothing" in again, ends
    r = engram_cli("--json", "task", "show", tid, cwd=sessions["repo"], env=engram_env(home))
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)
    session = f"codex:{sessions['session_a']}"
    (handoff,) = [h for h in shown["handoffs"] if h["session_id"] == session]
    summary = handoff["handoff"]["summary"]
    event = stored.split()[2]
    # SessionEnd's names its reason, "SessionEnd (other)".
    assert summary.startswith(f"Automatic checkpoint at {event}") and " of a codex session." in summary, summary
    assert f"Last request: {REQUEST}" in summary and f"Files edited: {EDITED}." in summary, summary
    (failure,) = [f for f in shown["failures"] if f["session_id"] == session]
    assert failure["failure"]["component"] == "python3"
    assert failure["failure"]["error"].startswith(f"`{FAILED}` failed: Traceback"), failure  # no Codex header


def test_a_failing_hook_leaves_the_codex_session_running(tmp_path, engram_home):
    client_home = tmp_path / "client-home"
    repo = git_repo(tmp_path / "api", "https://github.com/acme/api.git")
    set_up(repo, client_home, engram_home, mcp=False)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where ENGRAM_HOME's parent should be\n")
    broken_home = blocker / "home"  # nothing can be created under a file: every hook fails
    script = [[tool("exec_command", cmd="echo tidy")], [text("Tidied.")]]
    with FakeOpenAI(script) as fake:
        out = ok(codex(repo, "Tidy the README", fake, client_home, broken_home))
        assert "Tidied." in out
        assert not fake.script, "the session stopped before its script's end"
        sent = openai_text(fake.loop_requests()[-1])
    # A failing hook adds nothing Codex would pass to the model.
    assert "<engram>" not in sent and "Traceback" not in sent
