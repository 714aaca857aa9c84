"""`engram hook EVENT --client CLIENT`: one lifecycle event of a coding agent, from its JSON on stdin.

A hook must never break the agent. Whatever happens (bad JSON, a daemon that cannot start, a
transcript that is gone or garbage, a bug here) it exits 0, writes to stdout only the client's
documented JSON (or nothing), gives up on the daemon after `hook_timeout_s`, and says what
happened in one line of ENGRAM_HOME/hooks.log.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

__all__ = ["CLIENTS", "EVENTS", "HookOutcome", "run_hook"]

MAX_STDIN_BYTES = 4 * 1024 * 1024  # a hook's input is a few hundred bytes; a prompt can be long
LOG_ROTATE_BYTES = 5 * 1024 * 1024
CHECKPOINT_EXTRA_S = 30.0  # reading a large transcript and git come on top of the daemon's budget
START_WAIT_S = 25.0  # what SessionStart waits for a daemon that is starting (the clients allow 30 s)
IGNORE_FILE = ".engramignore"  # at a work tree's top: its sessions are not captured
# `gemini -p` puts the SessionStart context (engram's conventions among it) into the prompt it then
# gives BeforeAgent, in these tags: searched with the prompt, it would bring itself back every time.
HOOK_CONTEXT = re.compile(r"<hook_context>.*?</hook_context>\s*", re.S)

CLIENTS = ("claude-code", "codex", "gemini")
# Each client's events and what engram does at each: "start" injects the session's context,
# "prompt" the memories a prompt bears on, "checkpoint" stores an automatic checkpoint, "capture"
# captures the turn that just ended (pitfalls, episodes; engram.hooks.turn_capture) in a detached
# process. From each client's hook reference.
EVENTS: dict[str, dict[str, str]] = {
    # Claude Code also captures at SessionEnd: `claude -p` exits right after its last turn, which
    # can end the asynchronous Stop hook before it has handed the capture over.
    "claude-code": {
        "SessionStart": "start",
        "UserPromptSubmit": "prompt",
        "PreCompact": "checkpoint",
        "SessionEnd": "checkpoint+capture",
        "Stop": "capture",
    },
    "gemini": {
        "SessionStart": "start",
        "BeforeAgent": "prompt",
        "PreCompress": "checkpoint",
        "SessionEnd": "checkpoint",
        "AfterAgent": "capture",
    },
    # Codex checkpoints at the end of each turn (Stop) and of the session (SessionEnd, 0.171), and
    # captures the turn at Stop too.
    "codex": {
        "SessionStart": "start",
        "UserPromptSubmit": "prompt",
        "PreCompact": "checkpoint",
        "Stop": "checkpoint+capture",
        "SessionEnd": "checkpoint",
    },
}


class HookTimeout(Exception):
    pass


@dataclass
class HookOutcome:
    """What one hook run did: its stdout text, and the log line's status and message."""

    stdout: str = ""
    status: str = "ok"  # ok | skipped | error
    message: str = ""


def canonical_event(client: str, event: str) -> str | None:
    """The client's spelling of an event given as SessionStart, sessionstart or session-start."""
    key = event.replace("-", "").replace("_", "").lower()
    return next((e for e in EVENTS[client] if e.lower() == key), None)


def _additional_context(event: str, text: str) -> str:
    # The same shape in all three clients' references: hookSpecificOutput.additionalContext.
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}, ensure_ascii=False)


def _home() -> Path:
    return Path(os.environ.get("ENGRAM_HOME") or Path.home() / ".engram").expanduser()


def _log(home: Path, line: str) -> None:
    """Append one line to home/hooks.log (rotated past 5 MB); never raises."""
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = home / "hooks.log"
        try:
            if path.stat().st_size > LOG_ROTATE_BYTES:
                path.replace(path.with_name("hooks.log.1"))
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8", errors="replace") as f:
            f.write(line.replace("\n", " ")[:4000] + "\n")
    except OSError:
        pass  # a log that cannot be written must not break the agent either


def _connect(settings: Any, client: str, session_id: str, project: Any, timeout: float, spawn_timeout: float = 0):
    """The hook's session with the daemon, starting it when none runs: the one place the hook
    tells engram who is calling, and in which project (that of the client's cwd, as the stdio
    server and the CLI detect theirs)."""
    from engram.server.backend import daemon_command
    from engram.server.rpc_client import RpcClient

    return RpcClient(
        settings.socket_path,
        spawn=daemon_command(settings),
        session_id=session_id,
        client=client,
        user_id=settings.user_id,
        store=settings.store,
        timeout=timeout,
        spawn_timeout=spawn_timeout or timeout,  # how long a daemon being started may take to listen
        project=project.id if project else None,
        branch=project.branch if project else None,
    )


def _read_shared(rpc: Any, project: Any) -> str:
    """The project's shared records the work tree gained (a pull, a checkout), read into the
    store before the session's block is built (docs/sharing.md); what happened, for the log."""
    from engram.admin.share_git import START_READ_MAX
    from engram.server.rpc import RpcError

    if project is None or not project.root or not (Path(project.root) / ".engram" / "shared").is_dir():
        return ""
    try:
        r = rpc.call("sync_project", read_only=True, at_most=START_READ_MAX, path=project.root)
    except RpcError as e:  # the session starts anyway, with what the store holds
        return f"; shared records not read: {e}"
    if r["read"] < r["arrived"]:
        return f"; {r['read']} of {r['arrived']} shared records arrived (the rest at the next start)"
    return f"; {r['arrived']} shared records arrived" if r["arrived"] else ""


def _start(settings: Any, rpc: Any, event: str, payload: dict, project: Any = None) -> HookOutcome:
    if not settings.hook_start:
        return HookOutcome(status="skipped", message="ENGRAM_HOOK_START is off")
    shared = _read_shared(rpc, project)
    r = rpc.call("session_start", max_tokens=settings.hook_start_tokens)
    if not r["context"]:
        return HookOutcome(message=f"source={payload.get('source')}: nothing to inject{shared}")
    return HookOutcome(
        _additional_context(event, r["context"]),
        message=f"source={payload.get('source')}: injected {r['tokens']} tokens "
        f"({len(r['task_ids'])} open tasks, resumed {r['resumed']}){shared}",
    )


def _prompt(settings: Any, rpc: Any, event: str, payload: dict) -> HookOutcome:
    if not settings.hook_prompt:
        return HookOutcome(status="skipped", message="ENGRAM_HOOK_PROMPT is off")
    prompt = payload.get("prompt")
    if isinstance(prompt, str):
        prompt = HOOK_CONTEXT.sub("", prompt)
    if not isinstance(prompt, str) or not prompt.strip():
        return HookOutcome(status="skipped", message="no prompt in the input")
    r = rpc.call("prompt_memories", prompt=prompt, max_tokens=settings.hook_prompt_tokens)
    if not r["context"]:
        return HookOutcome(message="no memory clearly relevant")
    return HookOutcome(
        _additional_context(event, r["context"]),
        message=f"added {len(r['memory_ids'])} memories ({r['tokens']} tokens)",
    )


def _checkpoint(
    settings: Any, client: str, event: str, payload: dict, session_id: str, project: Any, connect
) -> HookOutcome:
    from engram.hooks.checkpoint import build_checkpoint, git_state
    from engram.hooks.formats import read_transcript
    from engram.hooks.transcript import TranscriptError

    if not settings.hook_checkpoint:
        return HookOutcome(status="skipped", message="ENGRAM_HOOK_CHECKPOINT is off")
    path = payload.get("transcript_path")
    if not isinstance(path, str) or not path:
        return HookOutcome(status="skipped", message="no transcript_path in the input")
    try:
        s = read_transcript(Path(path).expanduser(), client)
    except TranscriptError as e:
        return HookOutcome(status="skipped", message=f"no checkpoint: {e}")
    bad = f"; {s.skipped_summary()}" if s.skipped else ""
    detail = str(payload.get("trigger") or payload.get("reason") or "")
    args = build_checkpoint(
        s,
        git_state(payload.get("cwd")),
        client=client,
        event=event,
        detail=detail,
        session_id=session_id,
        transcript=path,
        cwd=payload.get("cwd") if isinstance(payload.get("cwd"), str) else None,
    )
    capture = settings.capture_conventions and not capture_off(settings, project)
    stated, answers = (s.stated, s.answers) if capture else ([], [])
    if args is None and not stated and not answers:
        return HookOutcome(message=f"nothing to checkpoint in {s.entries} entries{bad}")
    auto = event in ("PreCompact", "PreCompress") and detail == "auto"
    said = ""
    with connect() as rpc:
        if args is not None:
            args["checkpoint"]["project"] = getattr(project, "id", None)
            r = rpc.call("session_checkpoint", interrupted=auto, **args)
        if stated or answers:
            c = rpc.call("capture_conventions", prompts=stated, answers=answers)
            said = f", conventions: {len(c['stored'])} stored, {c['already']} already" + (
                f" ({c['reason']})" if c["reason"] else ""
            )
    if args is None:
        return HookOutcome(message=f"nothing to checkpoint in {s.entries} entries{said}{bad}")
    what = f"stored {r['handoff_id']}" if r["stored"] else f"stored nothing ({r.get('reason')})"
    return HookOutcome(
        message=f"checkpoint of {s.entries} entries: {what}, task {r['task_id']} "
        f"({r['task_from']}), {r['failures_recorded']} failures"
        + (", reported context_overflow" if r["interrupted"] else "")
        + said
        + bad
    )


def _detach_capture(settings: Any, client: str, event: str, payload: dict, session_id: str) -> HookOutcome:
    """Capture the turn in a child process the client does not wait for: the hook returns at
    once (Codex and Gemini CLI wait for every hook; Claude Code runs this one asynchronously
    anyway). The child logs its own line when done."""
    if not (settings.capture_fixes or settings.capture_episodes):
        return HookOutcome(status="skipped", message="ENGRAM_CAPTURE_FIXES and ENGRAM_CAPTURE_EPISODES are off")
    if not isinstance(payload.get("transcript_path"), str):
        return HookOutcome(status="skipped", message="no transcript_path in the input")
    pid = os.fork()
    if pid:
        return HookOutcome(message=f"capture handed to pid {pid}")
    code = 0
    try:
        os.setsid()  # out of the client's process group: a closing terminal does not end it
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # the client reads the hook's output until every copy is closed
            os.dup2(null, fd)
        start = time.monotonic()
        from engram.core.project import detect_project  # in the child: git's answer is not worth the agent's wait

        cwd = payload.get("cwd")
        project = detect_project(cwd) if isinstance(cwd, str) and cwd else None
        out = _capture_now(settings, client, payload, session_id, project)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _log(
            settings.home,
            f"{stamp} {client} {event}:capture pid={os.getpid()} {out.status} "
            f"{(time.monotonic() - start) * 1000:.0f}ms: {out.message}",
        )
    except BaseException:  # noqa: BLE001 - the child must never return into the hook's code
        code = 1
    finally:
        os._exit(code)


def _capture_now(settings: Any, client: str, payload: dict, session_id: str, project: Any) -> HookOutcome:
    from engram.hooks.checkpoint import git_state
    from engram.hooks.turn_capture import capture_turns
    from engram.server.rpc import RpcError

    off = capture_off(settings, project)
    if off:
        return HookOutcome(status="skipped", message=f"capture is off in this project ({off})")
    budget = settings.hook_timeout_s + CHECKPOINT_EXTRA_S
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
        root = (git_state(cwd) or {}).get("root") or cwd
        return HookOutcome(
            message=capture_turns(
                settings, client, payload, lambda: _connect(settings, client, session_id, project, budget), root
            )
        )
    except HookTimeout:
        return HookOutcome(status="error", message=f"capture gave up after {budget:g}s")
    except RpcError as e:
        return HookOutcome(status="error", message=f"engram daemon: {e}")
    except Exception as e:  # noqa: BLE001 - said in the log, never raised
        return HookOutcome(status="error", message=f"capture: {type(e).__name__}: {e}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def excluded(settings: Any, project: Any) -> str | None:
    """Why the project's sessions are not captured (its .engramignore file, ENGRAM_HOOK_EXCLUDE), or None."""
    if project is None:
        return None
    root = Path(project.root).resolve() if project.root else None
    if root is not None and (root / IGNORE_FILE).exists():
        return f"{root / IGNORE_FILE}"
    entry = _naming(settings.hook_exclude, project)
    return f"ENGRAM_HOOK_EXCLUDE names {entry}" if entry else None


def capture_off(settings: Any, project: Any) -> str | None:
    """Why nothing of the project's sessions is captured automatically (pitfalls, episodes,
    conventions) though the hooks still inject and checkpoint (ENGRAM_CAPTURE_OFF_PROJECTS), or None."""
    entry = _naming(settings.capture_off_projects, project) if project is not None else None
    return f"ENGRAM_CAPTURE_OFF_PROJECTS names {entry}" if entry else None


def _naming(entries: Any, project: Any) -> str | None:
    """The first of `entries` that names the project: its id, its name, or a path its work tree
    is at or under (`~` expanded)."""
    root = Path(project.root).resolve() if project.root else None
    for entry in entries:
        entry = entry.strip()
        if entry in (project.id, project.name):
            return entry
        if root is not None and entry.startswith(("/", "~")):
            path = Path(entry).expanduser().resolve()
            if root == path or path in root.parents:
                return entry
    return None


def _on_alarm(signum, frame):
    raise HookTimeout()


def _read_event(stdin: IO[bytes]) -> dict | HookOutcome:
    """The event's JSON object from stdin, or the outcome that says why there is none."""
    raw = stdin.read(MAX_STDIN_BYTES + 1)
    if len(raw) > MAX_STDIN_BYTES:
        return HookOutcome(status="error", message=f"input over {MAX_STDIN_BYTES:,} bytes; ignored")
    try:
        payload = json.loads(raw or b"null")
    except ValueError as e:
        return HookOutcome(status="error", message=f"input is not JSON ({e}); ignored")
    if not isinstance(payload, dict):
        return HookOutcome(
            status="error", message=f"input is not a JSON object (got {type(payload).__name__}); ignored"
        )
    return payload


def _plugin_handles(client: str, payload: dict) -> bool:
    """This hook is a copy in a settings file beside the engram plugin's own hooks, which handle
    the event (the plugin's launcher marks its runs with VIA_PLUGIN)."""
    from engram.hooks.plugins import VIA_PLUGIN, plugin_hooks

    if os.environ.get(VIA_PLUGIN):
        return False
    from engram.hooks.install import project_root

    cwd = payload.get("cwd")
    return bool(plugin_hooks(client, project_root(Path(cwd)) if isinstance(cwd, str) and cwd else None))


def _waits(settings: Any, kind: str) -> tuple[float, float, float]:
    """(the hook's whole budget, the wait for a running daemon, the wait for one it starts).

    A checkpoint waits for a daemon that is still starting as long as its whole budget allows
    (the clients give these events 60 s): it is the only record of the session, and the first
    daemon of a new home can take longer than hook_timeout_s to start on a loaded machine. So does
    a session's start, within the 30 s every client gives it: without the daemon the session
    begins without its context (issue 46: a daemon's start took 9-12 s on this machine under load).
    """
    budget = settings.hook_timeout_s + (CHECKPOINT_EXTRA_S if kind == "checkpoint" else 1.0)
    wait = budget if kind == "checkpoint" else settings.hook_timeout_s
    spawn_wait = wait
    if kind == "start":
        spawn_wait = max(wait, START_WAIT_S)
        budget = max(budget, spawn_wait + 1.0)
    return budget, wait, spawn_wait


def run_hook(event: str, client: str, stdin: IO[bytes], settings: Any = None) -> HookOutcome:
    """Handle one hook event; never raises (everything ends as an outcome)."""
    from engram.core.project import detect_project
    from engram.core.settings import Settings

    try:
        settings = settings or Settings.from_env()
    except ValueError as e:
        return HookOutcome(status="error", message=f"bad setting: {e}")
    name = canonical_event(client, event)
    if name is None:
        return HookOutcome(
            status="skipped",
            message=f"{client} has no hook event {event!r} engram handles (it handles {', '.join(EVENTS[client])})",
        )
    payload = _read_event(stdin)
    if isinstance(payload, HookOutcome):
        return payload
    kind = EVENTS[client][name]
    if kind == "none":
        return HookOutcome(status="skipped", message=f"{name}: nothing to do for {client}")
    if _plugin_handles(client, payload):
        return HookOutcome(status="skipped", message=f"{name}: the engram plugin's own hook handles it")
    sid = str(payload.get("session_id") or "")[:150] or f"unknown-{os.getpid()}"
    session_id = f"{client}:{sid}"
    cwd = payload.get("cwd")
    project = detect_project(cwd) if isinstance(cwd, str) and cwd else None
    why = excluded(settings, project)
    if why:
        return HookOutcome(status="skipped", message=f"project excluded from capture ({why}); nothing stored")
    if kind.endswith("capture"):
        captured = _detach_capture(settings, client, name, payload, session_id)
        if kind == "capture":
            return captured
        # An event that also checkpoints (Codex's Stop): its log line says both, so a reader of
        # hooks.log sees which process captures the turn.
        out = _run_hook(settings, client, name, payload, session_id, project, "checkpoint")
        return replace(out, message=f"{out.message}; {captured.message}")
    return _run_hook(settings, client, name, payload, session_id, project, kind)


def _run_hook(
    settings: Any, client: str, name: str, payload: dict, session_id: str, project: Any, kind: str
) -> HookOutcome:
    """A hook that talks to the daemon (a session's start, a prompt, a checkpoint) within its budget."""
    budget, wait, spawn_wait = _waits(settings, kind)
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, budget)
    from engram.server.rpc import RpcError

    try:

        def connect():
            return _connect(settings, client, session_id, project, wait, spawn_wait)

        if kind == "checkpoint":
            # Gemini CLI does not wait for SessionEnd hooks, and a closing terminal hangs up on
            # its children: the checkpoint (a few seconds at most) finishes anyway.
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            return _checkpoint(settings, client, name, payload, session_id, project, connect)
        with connect() as rpc:
            if kind == "start":
                return _start(settings, rpc, name, payload, project)
            return _prompt(settings, rpc, name, payload)
    except HookTimeout:
        return HookOutcome(status="error", message=f"gave up after {budget:g}s")
    except RpcError as e:
        return HookOutcome(status="error", message=f"engram daemon: {e}")
    except Exception as e:  # noqa: BLE001 - a hook never breaks the agent: say it, exit 0
        return HookOutcome(status="error", message=f"{type(e).__name__}: {e}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def main(event: str, client: str, stdin: IO[bytes] | None = None, stdout: IO[str] | None = None) -> int:
    """The `engram hook` command: run the hook, print its output, log one line; always 0."""
    start = time.monotonic()
    home = _home()
    try:
        from engram.core.settings import Settings

        settings = Settings.from_env()
        home = settings.home
    except Exception:  # noqa: BLE001 - run_hook reports the bad setting
        settings = None
    try:
        out = run_hook(event, client, stdin or sys.stdin.buffer, settings)
    except BaseException as e:  # noqa: BLE001 - even an interrupt must leave the agent running
        out = HookOutcome(status="error", message=f"{type(e).__name__}: {e}")
    if out.stdout:
        try:
            (stdout or sys.stdout).write(out.stdout + "\n")
            (stdout or sys.stdout).flush()
        except OSError:
            pass
    ms = (time.monotonic() - start) * 1000
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    message = _redacted(out.message, settings)
    _log(home, f"{stamp} {client} {event} pid={os.getpid()} {out.status} {ms:.0f}ms: {message}")
    return 0


def _redacted(message: str, settings: Any) -> str:
    """The message as the store would keep it: an error can quote a command with its password."""
    try:
        from engram.core.redaction import Redactor

        if settings is not None:
            return Redactor(settings.redact_patterns, settings.redact_allow)(message)
        return Redactor()(message)
    except Exception:  # noqa: BLE001 - a pattern that fails here failed the run already: say little
        return message.split(":", 1)[0] + ": (message withheld: the redactor failed)"
