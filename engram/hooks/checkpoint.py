"""An automatic checkpoint of a session, built without any model from its transcript and the git work tree.

The checkpoint is a handoff: its next steps are the agent's own todo list in order, each with
the status the list gave it (engram's plan reads them as any handoff's steps); completed and in
progress repeat the done and started items, so they also count as work on an earlier handoff's
steps. The summary says what the session touched: the last requests verbatim, the files it
edited, the commands it ran and the ones that failed, and the work tree's branch, HEAD and
uncommitted files. Failed commands are also recorded as failures (the pitfalls a resume shows).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

from engram.hooks.transcript import Session, TodoItem

__all__ = ["build_checkpoint", "git_state"]

GIT_TIMEOUT = 2.0  # git answers in milliseconds; a hung one must not eat the hook's budget
FILES_SHOWN = 20
SUMMARY_REQUEST_CHARS = 400
FAILURES_RECORDED = 5


def _git(cwd: Path, *args: str) -> str | None:
    try:
        r = subprocess.run(
            ["git", "-C", str(cwd), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def git_state(cwd: str | Path | None) -> dict | None:
    """{branch, head, subject, uncommitted: [paths]} of the work tree at cwd; None outside one."""
    if not cwd or not Path(cwd).is_dir():
        return None
    where = Path(cwd)
    top = _git(where, "rev-parse", "--show-toplevel")
    if top is None:
        return None
    branch = (_git(where, "rev-parse", "--abbrev-ref", "HEAD") or "").strip()
    head = (_git(where, "log", "-1", "--format=%h%x00%s") or "").strip()
    sha, _, subject = head.partition("\x00")
    status = _git(where, "status", "--porcelain=v1", "--untracked-files=all") or ""
    changed = []
    for line in status.splitlines():
        path = line[3:]
        if " -> " in path:  # a rename: the new name
            path = path.split(" -> ", 1)[1]
        changed.append(path.strip('"'))
    return {
        "root": top.strip(),
        "branch": None if branch in ("", "HEAD") else branch,
        "head": sha or None,
        "subject": subject or None,
        "uncommitted": changed,
    }


def _component(command: str) -> str:
    """The program a shell command ran (pytest, npm, make), for the failure's component."""
    last = command.split("&&")[-1].split("|")[0].strip()
    try:
        words = shlex.split(last)
    except ValueError:
        words = last.split()
    for w in words:
        if "=" in w.split("/")[0] or w in ("sudo", "env", "time", "uv", "poetry", "npx", "pnpm", "exec"):
            continue
        name = w.rsplit("/", 1)[-1]
        if name in ("python", "python3") and "-m" in words:  # python -m pytest: the module
            i = words.index("-m")
            return words[i + 1] if i + 1 < len(words) else name
        return name[:60] or "shell"
    return "shell"


def _relative(path: str, root: str | None) -> str:
    if root and path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1 :]
    return path


def build_checkpoint(
    s: Session,
    git: dict | None,
    *,
    client: str,
    event: str,
    detail: str = "",
    session_id: str = "",
    transcript: str = "",
    cwd: str | None = None,
) -> dict | None:
    """The checkpoint operation's arguments for the session, or None when it did nothing to record.
    Paths are shown relative to the work tree (else to cwd)."""
    if s.empty():
        return None
    root = (git or {}).get("root") or cwd
    # A handoff holds at most 100 steps of 2,000 characters (core/validation.py, check_items).
    plan = [TodoItem(t.text[:2000], t.status) for t in s.plan() if t.status != "cancelled"][:100]
    files = [_relative(f, root) for f in s.files]
    failures = s.failures()
    when = f"{event} ({detail})" if detail else event
    lines = [
        f"Automatic checkpoint at {when} of a {client} session"
        + (" (after the agent's own handoff)" if s.agent_handoffs else "")
        + "."
    ]
    if s.requests:
        last = s.requests[-1]
        cut = last if len(last) <= SUMMARY_REQUEST_CHARS else last[:SUMMARY_REQUEST_CHARS] + "…"
        lines.append(f"Last request: {cut}")
    if files:
        shown = ", ".join(files[-FILES_SHOWN:])
        more = f" and {len(files) - FILES_SHOWN} more" if len(files) > FILES_SHOWN else ""
        lines.append(f"Files edited: {shown}{more}.")
    if s.commands_run:
        failed = "; ".join(f"`{c.command[:200]}`" for c in failures[-3:])
        lines.append(
            f"Commands: {s.commands_run} run, {len(failures)} failed" + (f": {failed}" if failed else "") + "."
        )
    if git:
        where = f"branch {git['branch']}" if git.get("branch") else "a detached HEAD"
        head = f" at {git['head']} ({git['subject']})" if git.get("head") else ""
        dirty = git.get("uncommitted") or []
        lines.append(
            f"Git: {where}{head}; "
            + (
                f"uncommitted: {', '.join(dirty[:FILES_SHOWN])}"
                + (f" and {len(dirty) - FILES_SHOWN} more" if len(dirty) > FILES_SHOWN else "")
                if dirty
                else "nothing uncommitted"
            )
            + "."
        )
    record = {
        "requests": s.requests,
        "plan": [{"step": t.text, "status": t.status} for t in plan],
        "files": files,
        "commands": [{"command": c.command, "failed": c.failed, "error": c.error} for c in s.commands],
        "commands_run": s.commands_run,
        "git": git,
        "task_from_transcript": s.task_id,
    }
    # What the session did, without when or why it was checkpointed: the same transcript read
    # again (PreCompact, then SessionEnd with nothing in between) gives the same digest.
    digest = hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()[:32]
    meta: dict[str, Any] = {
        "automatic": True,
        "client": client,
        "event": event,
        "detail": detail,
        "session": session_id,
        "transcript": transcript,
        "entries": s.entries,
        "skipped": s.skipped,
        "after_agent_handoff": bool(s.agent_handoffs),
        "digest": digest,
        **record,
    }
    return {
        "summary": "\n".join(lines),
        "completed": [t.text for t in plan if t.status == "done"],
        "in_progress": [t.text for t in plan if t.status == "in_progress"],
        "blocked": [t.text for t in plan if t.status == "blocked"],
        "next_steps": [t.text for t in plan],
        "step_statuses": [t.status for t in plan],
        "failures": [
            {
                "error": f"`{c.command[:500]}` failed" + (f": {c.error}" if c.error else ""),
                "component": _component(c.command),
            }
            for c in failures[-FAILURES_RECORDED:]
        ],
        "task_id": s.task_id,
        "checkpoint": meta,
    }
