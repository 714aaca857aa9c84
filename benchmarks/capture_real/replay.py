"""A recorded transcript replayed to `engram hook` turn by turn, as its client would have run the hooks.

A recording is cut into turns where the user spoke; for each turn the transcript file is written
up to the turn's start, the client's prompt hook gets the user's words, the file is written up to
the turn's end and the client's end-of-turn hook runs (its capture is detached, as in the client:
the replay waits for it). A compaction in the recording fires the client's compaction hook first,
then a session start with source "compact"; the session's end fires its end hook.

The hooks are the real command (`engram hook EVENT --client CLIENT`) in processes of their own,
with the store in ENGRAM_HOME and the project named by ENGRAM_PROJECT (the recorded work tree is
not on this machine; paths in the transcript stay as recorded, and `cwd` is the recorded one).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENGRAM = Path(sys.executable).parent / "engram"
CAPTURE_WAIT_S = 120.0  # a detached capture of one turn; longer is a hang, reported as such
HANDED = re.compile(r"capture handed to pid (\d+)")

# Text the clients write in the user's place: not a prompt the user typed, no prompt hook runs.
CLIENT_TEXT = (
    "<local-command",
    "<bash-",
    "<task-notification",
    "<system-reminder",
    "[Request interrupted",
    "Caveat: The messages below",
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<turn_aborted>",
    "System: Please continue.",
)

# The prompt hook and the end-of-turn hook of each client (engram.hooks.run.EVENTS).
EVENTS = {
    "claude-code": {
        "start": "SessionStart",
        "prompt": "UserPromptSubmit",
        "compact": "PreCompact",
        "turn": "Stop",
        "end": "SessionEnd",
    },
    "codex": {
        "start": "SessionStart",
        "prompt": "UserPromptSubmit",
        "compact": "PreCompact",
        "turn": "Stop",
        "end": "SessionEnd",
    },
    "gemini": {
        "start": "SessionStart",
        "prompt": "BeforeAgent",
        "compact": "PreCompress",
        "turn": "AfterAgent",
        "end": "SessionEnd",
    },
}


@dataclass
class Turn:
    prompt: str  # what the prompt hook is given
    start: int  # units written before the turn (the prompt's own unit is the first of the turn)
    end: int  # units written once the turn is over
    compacted: bool = False  # the client compacted the context just before this turn


@dataclass
class Recording:
    """A transcript as units (lines of a JSON Lines file, or the messages of Gemini CLI's older
    one-document file) and the turns the user started."""

    client: str
    units: list[Any]
    turns: list[Turn]
    session_id: str
    cwd: str | None
    suffix: str = ".jsonl"
    document: dict | None = None  # Gemini's one-document form: the document around `messages`

    def write(self, path: Path, upto: int) -> None:
        if self.document is not None:
            doc = {**self.document, "messages": self.units[:upto]}
            path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        else:
            path.write_bytes(b"".join(self.units[:upto]))


def _text_blocks(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _is_client_text(text: str) -> bool:
    return not text.strip() or text.lstrip().startswith(CLIENT_TEXT)


_COMMAND = re.compile(r"<command-name>\s*(/?[^<\s]+)\s*</command-name>")
_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)


def _typed(text: str) -> str:
    """What the user typed for a slash command's wrapper (`/name args`), else the text."""
    name = _COMMAND.search(text)
    if not name:
        return text
    args = _ARGS.search(text)
    cmd = name.group(1) if name.group(1).startswith("/") else "/" + name.group(1)
    return f"{cmd} {args.group(1).strip()}".strip() if args else cmd


def _json_lines(path: Path) -> list[tuple[bytes, Any]]:
    out = []
    with path.open("rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                raw += b"\n"
            try:
                entry = json.loads(raw)
            except ValueError:
                entry = None
            out.append((raw, entry))
    return out


def _turns(starts: list[tuple[int, str, bool]], n: int) -> list[Turn]:
    turns = []
    for i, (at, prompt, compacted) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else n
        turns.append(Turn(prompt, at, end, compacted))
    return turns


def claude(path: Path) -> Recording:
    rows = _json_lines(path)
    starts: list[tuple[int, str, bool]] = []
    sid, cwd, compacted = "", None, False
    for i, (_, e) in enumerate(rows):
        if not isinstance(e, dict):
            continue
        sid = sid or str(e.get("sessionId") or "")
        cwd = cwd or (e.get("cwd") if isinstance(e.get("cwd"), str) else None)
        if e.get("isCompactSummary") or (e.get("type") == "system" and e.get("subtype") == "compact_boundary"):
            compacted = True
            continue
        if e.get("type") != "user" or e.get("isMeta") or e.get("isSidechain"):
            continue
        content = (e.get("message") or {}).get("content")
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            continue
        text = _text_blocks(content)
        if _is_client_text(text):
            continue
        starts.append((i, _typed(text), compacted))
        compacted = False
    return Recording("claude-code", [r for r, _ in rows], _turns(starts, len(rows)), sid or path.stem, cwd)


def codex(path: Path) -> Recording:
    rows = _json_lines(path)
    starts: list[tuple[int, str, bool]] = []
    sid, cwd, compacted = "", None, False
    for i, (_, e) in enumerate(rows):
        p = e.get("payload") if isinstance(e, dict) else None
        if not isinstance(p, dict):
            continue
        if e.get("type") == "session_meta":
            sid = sid or str(p.get("id") or "")
            cwd = cwd or (p.get("cwd") if isinstance(p.get("cwd"), str) else None)
        if e.get("type") == "compacted" or (e.get("type") == "event_msg" and p.get("type") == "context_compacted"):
            compacted = True
        if e.get("type") == "event_msg" and p.get("type") == "user_message" and isinstance(p.get("message"), str):
            if _is_client_text(p["message"]):
                continue
            starts.append((i, p["message"], compacted))
            compacted = False
    return Recording("codex", [r for r, _ in rows], _turns(starts, len(rows)), sid or path.stem, cwd)


def gemini(path: Path) -> Recording:
    if path.suffix == ".json":
        doc = json.loads(path.read_bytes())
        if isinstance(doc, list):  # logs.json: the prompts alone, of many sessions
            return _gemini_logs(doc, path)
        msgs = [m for m in doc.get("messages") or [] if isinstance(m, dict)]
        starts = [
            (i, _text_blocks(m.get("content")), False)
            for i, m in enumerate(msgs)
            if m.get("type") == "user" and not _is_client_text(_text_blocks(m.get("content")))
        ]
        rest = {k: v for k, v in doc.items() if k != "messages"}
        return Recording(
            "gemini", msgs, _turns(starts, len(msgs)), str(doc.get("sessionId") or path.stem), None, ".json", rest
        )
    rows = _json_lines(path)
    starts, sid = [], ""
    for i, (_, e) in enumerate(rows):
        if not isinstance(e, dict):
            continue
        sid = sid or str(e.get("sessionId") or "")
        if e.get("type") == "user" and "id" in e:
            text = _text_blocks(e.get("content"))
            if not _is_client_text(text):
                starts.append((i, text, False))
    return Recording("gemini", [r for r, _ in rows], _turns(starts, len(rows)), sid or path.stem, None)


def _gemini_logs(entries: list, path: Path) -> Recording:
    """Gemini CLI's logs.json holds only what the user typed: replayed as a one-document chat of
    those prompts (no answers, no tool calls), which is all the client's hooks would have seen of it."""
    msgs = [
        {"id": f"m{i}", "type": "user", "timestamp": e.get("timestamp"), "content": [{"text": e["message"]}]}
        for i, e in enumerate(entries)
        if isinstance(e, dict) and e.get("type") == "user" and isinstance(e.get("message"), str)
    ]
    starts = [
        (i, m["content"][0]["text"], False) for i, m in enumerate(msgs) if not _is_client_text(m["content"][0]["text"])
    ]
    return Recording("gemini", msgs, _turns(starts, len(msgs)), path.stem, None, ".json", {"sessionId": path.stem})


READERS: dict[str, Callable[[Path], Recording]] = {"claude-code": claude, "codex": codex, "gemini": gemini}


@dataclass
class Replay:
    """What the hooks did over one recording."""

    turns: int = 0
    hooks: int = 0
    injections: list[dict] = field(default_factory=list)  # {turn, prompt, context}
    start_context: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # hook runs that did not exit 0, or logged an error
    seconds: float = 0.0


def _hook(env: dict, client: str, event: str, payload: dict, out: Replay) -> str:
    p = subprocess.run(
        [str(ENGRAM), "hook", event, "--client", client],
        input=json.dumps({**payload, "hook_event_name": event}).encode(),
        env=env,
        capture_output=True,
        timeout=600,
    )
    out.hooks += 1
    if p.returncode != 0:
        out.errors.append(f"{event}: exit {p.returncode}: {p.stderr.decode(errors='replace')[-300:]}")
    text = p.stdout.decode(errors="replace").strip()
    if not text:
        return ""
    try:
        return json.loads(text)["hookSpecificOutput"]["additionalContext"]
    except (ValueError, KeyError, TypeError):
        out.errors.append(f"{event}: stdout is not the client's JSON: {text[:200]}")
        return ""


def _log_tail(home: Path, offset: int) -> tuple[str, int]:
    path = home / "hooks.log"
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return "", offset
    return data.decode(errors="replace"), offset + len(data)


def _status(log_line: str) -> str:
    """A hooks.log line's status: `STAMP CLIENT EVENT[:capture] pid=N STATUS MSms: message`."""
    words = log_line.split(" ")
    return words[4] if len(words) > 4 else ""


def _wait_pid(pid: int, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def replay(rec: Recording, env: dict, workdir: Path, home: Path) -> Replay:
    """Run the client's hooks over the recording; the transcript is written under workdir."""
    out = Replay()
    names = EVENTS[rec.client]
    transcript = workdir / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', rec.session_id)[:80]}{rec.suffix}"
    base = {"session_id": rec.session_id, "transcript_path": str(transcript), "cwd": rec.cwd or str(workdir)}
    _, log_at = _log_tail(home, 0)
    started = time.monotonic()

    def end_of_turn(event: str, extra: dict) -> None:
        nonlocal log_at
        _hook(env, rec.client, event, {**base, **extra}, out)
        text, log_at = _log_tail(home, log_at)
        for m in HANDED.finditer(text):
            if not _wait_pid(int(m.group(1)), CAPTURE_WAIT_S):
                out.errors.append(f"{event}: capture pid {m.group(1)} still running after {CAPTURE_WAIT_S:g}s")
        # The detached capture logs its own line once done.
        more, log_at = _log_tail(home, log_at)
        out.errors += [line[:400] for line in (text + more).splitlines() if _status(line) == "error"]

    rec.write(transcript, rec.turns[0].start if rec.turns else len(rec.units))
    ctx = _hook(env, rec.client, names["start"], {**base, "source": "startup"}, out)
    if ctx:
        out.start_context.append(ctx)
    for k, turn in enumerate(rec.turns):
        if turn.compacted and k:
            end_of_turn(names["compact"], {"trigger": "auto"})
            ctx = _hook(env, rec.client, names["start"], {**base, "source": "compact"}, out)
            if ctx:
                out.start_context.append(ctx)
        rec.write(transcript, turn.start)
        ctx = _hook(env, rec.client, names["prompt"], {**base, "prompt": turn.prompt}, out)
        out.injections.append({"turn": k + 1, "prompt": turn.prompt[:2000], "context": ctx})
        rec.write(transcript, turn.end)
        end_of_turn(names["turn"], {"stop_hook_active": False})
        out.turns += 1
    end_of_turn(names["end"], {"reason": "other"})
    out.seconds = time.monotonic() - started
    return out


def hook_env(home: Path, project: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_") and k not in ("VIRTUAL_ENV",)}
    env.update(ENGRAM_HOME=str(home), ENGRAM_PROJECT=project, HF_HUB_OFFLINE="1")
    return env
