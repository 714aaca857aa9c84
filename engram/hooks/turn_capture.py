"""Per-turn capture: what a session did since the last capture, read from its transcript and
sent to the daemon as pitfalls (error -> fix) and episodes (a request and its answer).

Runs after each turn (Claude Code's and Codex's Stop, Gemini CLI's AfterAgent), in a process
detached from the client (engram.hooks.run), so the agent does not wait for it. A JSON Lines
transcript is read on from the byte where the last capture of the session stopped; Gemini CLI's
(whose records may be rewritten) is read whole and the events already captured are skipped. That
position and the errors still waiting for their fix are kept per session in
ENGRAM_HOME/hooks/capture/, and saved only once the daemon has stored the capture, so a crash
loses at most the turn in progress.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from engram.continuity.fixes import FixTracker
from engram.text.convention_sentences import conventions_in

__all__ = ["capture_turns", "fixes_in", "read_new_events", "turns_of"]

STATE_VERSION = 1
EPISODE_CHARS = 4000
MAX_EPISODES = 50  # a first capture of a long session sends its recent turns, not thousands
PENDING_CALLS = 20  # tool calls awaiting their result, carried to the next capture
MAX_STATED = 500  # prompts stating a convention sent at once (what capture_conventions takes)


def _state_path(home: Path, session_id: str) -> Path:
    name = hashlib.sha256(session_id.encode()).hexdigest()[:24]
    return home / "hooks" / "capture" / f"{name}.json"


def _load(path: Path, transcript: str) -> dict:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = None
    if not isinstance(state, dict) or state.get("v") != STATE_VERSION or state.get("transcript") != transcript:
        return {"v": STATE_VERSION, "transcript": transcript, "offset": 0, "events": 0, "open": [], "pending": None}
    return state


def _save(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(tmp, path)


def read_new_events(path: Path, client: str, state: dict) -> tuple[list[dict], Any]:
    """The events of the transcript after those the state says were captured, and the session read."""
    from engram.hooks.formats import READERS
    from engram.hooks.transcript import Session

    s = Session(client=client, timeline=[])
    size = path.stat().st_size
    jsonl = client != "gemini"
    if jsonl and state["offset"] <= size:
        s.offset = state["offset"]
        # Tool calls whose results had not been written at the last capture (it ran mid-turn),
        # and the agent's last message, which this capture's first prompt may answer.
        s.pending_calls = {k: (v[0], v[1]) for k, v in (state.get("calls") or {}).items()}
        offered = state.get("offered")
        s.offered = offered if isinstance(offered, str) else ""
    READERS[client](path, s)
    events = s.timeline or []
    if not jsonl:
        done = state["events"] if state["events"] <= len(events) else 0  # rewound: read again
        events = events[done:]
    return events, s


def _relative(path: str, root: str | None) -> str:
    if root and path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1 :]
    return path


def fixes_in(events: list[dict], tracker: FixTracker, root: str | None, session: Any = None) -> list:
    """The fixes the events complete, fed to `tracker` in order (edits' paths relative to root):
    a failing command's when it passes, an error the user pasted when the next prompt does not
    paste it again. With the transcript's `session`, an event the tracker fails on costs that
    event only."""
    fixes = []
    for e in events:
        with session.one_entry() if session is not None else nullcontext():
            if e["k"] == "edit":
                tracker.edit(_relative(e["file"], root), e["old"], e["new"])
            elif e["k"] == "request":
                fixes += tracker.request(e["text"])
            elif e["k"] == "command":
                fix = tracker.command(e["command"], e["failed"], e["output"], bool(e.get("unfinished")))
                if fix is not None:
                    fixes.append(fix)
    return fixes


def _stating_conventions(events: list[dict], s: Any) -> tuple[list[str], list[dict]]:
    """The requests among the events that state a convention, and those that pick an option the
    agent offered with its message ({prompt, offered}; the reader found them: see
    Session.request). One that fails costs itself only."""
    stated, answers = [], []
    for e in events:
        if e["k"] == "request":
            with s.one_entry():
                if e.get("offered"):
                    answers.append({"prompt": e["text"], "offered": e["offered"]})
                elif conventions_in(e["text"]):
                    stated.append(e["text"])
    return stated, answers


def turns_of(events: list[dict], pending: dict | None) -> tuple[list[dict], dict | None]:
    """The finished turns among the events: {request, answer} for each request followed by an
    answer; the last request when its answer has not come yet (carried to the next capture)."""
    turns, cur = [], pending
    for e in events:
        if e["k"] == "request":
            if cur and cur.get("answer"):
                turns.append(cur)
            cur = {"request": e["text"], "answer": ""}
        elif e["k"] == "answer" and cur is not None:
            cur["answer"] = e["text"]  # the last text of the turn is its answer
    if cur and cur.get("answer"):
        turns.append(cur)
        cur = None
    return turns, cur


def capture_turns(settings: Any, client: str, payload: dict, connect, root: str | None) -> str:
    """Capture what the session did since the last capture; returns what was done, for the log."""
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        return "no transcript_path in the input"
    sid = f"{client}:{payload.get('session_id') or ''}"
    state_path = _state_path(settings.home, sid)
    state_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = os.open(state_path.with_suffix(".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two turns' captures of one session, one after the other
        state = _load(state_path, transcript)
        events, s = read_new_events(Path(transcript).expanduser(), client, state)
        tracker = FixTracker.from_state(state["open"], root)
        # What is captured follows the settings where the hook runs (the client's environment), as
        # the docs say to set them; the daemon, started from another environment, applies its own too.
        fixes = [f.to_dict() for f in fixes_in(events, tracker, root, s)] if settings.capture_fixes else []
        turns, pending = turns_of(events, state.get("pending"))
        # The user's prompts new in this capture that state a convention, stored as the project's
        # facts (continuity/conventions.py: a restatement reinforces, a session's prompt counts once).
        stated, answers = _stating_conventions(events, s) if settings.capture_conventions else ([], [])
        episodes = (
            [{"request": t["request"][:EPISODE_CHARS], "answer": t["answer"][:EPISODE_CHARS]} for t in turns][
                -MAX_EPISODES:
            ]
            if settings.capture_episodes
            else []
        )
        stored: dict[str, Any] = {"fixes": 0, "episodes": 0}
        task = s.task_id or state.get("task")  # named through engram's tools in this turn or before
        if fixes or episodes or stated or answers:
            with connect() as rpc:
                if fixes or episodes:
                    stored = rpc.call("session_capture", fixes=fixes, episodes=episodes, task_id=task, client=client)
                if stated or answers:
                    said = rpc.call("capture_conventions", prompts=stated[-MAX_STATED:], answers=answers[-MAX_STATED:])
                    stored["conventions"] = len(said.get("stored") or [])
        # The errors waiting for their fix and a turn's request wait on disk: redacted as the store
        # would redact them (a failing command's output can hold a token).
        from engram.core.redaction import Redactor

        redact = Redactor(settings.redact_patterns, settings.redact_allow)
        calls = (
            {k: [name, args] for k, (name, args) in list(s.pending_calls.items())[-PENDING_CALLS:]}
            if client != "gemini"
            else {}
        )
        state.update(
            offset=s.end_offset,
            events=state["events"] + len(events),
            open=redact.value(tracker.state()),
            pending=redact.value(pending),
            calls=redact.value(calls),
            offered=redact.value(s.offered) if client != "gemini" else "",
            task=task,
        )
        _save(state_path, state)
    finally:
        os.close(lock)
    return (
        f"captured {len(events)} events: {len(fixes)} fixes ({stored.get('fixes', 0)} new), "
        f"{len(episodes)} turns ({stored.get('episodes', 0)} stored), "
        f"{len(answers)} prompts picking an option, {len(stated)} stating a convention "
        f"({stored.get('conventions', 0)} stored)"
        + (f"; {s.skipped_summary()}" if s.skipped else "")
        + (f"; the daemon skipped {'; '.join(stored['skipped'])}" if stored.get("skipped") else "")
    )
