"""What a coding agent's session did, read from its transcript file in one streaming pass.

The three clients' formats are read in engram.hooks.formats.

Whatever the format, the session becomes a list of events (a user request, a tool call with its
outcome) fed in order to one `Session` accumulator, so what counts as a todo list, an edited
file or a failed command is decided once. Anything unexpected (an unknown entry type, a
truncated, binary or huge line) is skipped and counted; a file that cannot be read raises
TranscriptError with a message naming the problem.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram.text.convention_sentences import conventions_in

__all__ = ["CLIENT_NAMES", "Command", "Session", "TodoItem", "TranscriptError", "lines", "text_of"]

CLIENT_NAMES = ("claude-code", "gemini", "codex")
MAX_LINE_BYTES = 16 * 1024 * 1024  # a line above this (a pasted dump) is skipped, not held in memory
MAX_JSON_DOCUMENT_BYTES = 64 * 1024 * 1024  # Gemini's older one-document files are read whole
ERROR_CHARS = 600  # of a failed command's output kept: its end, where the error usually is
REQUEST_CHARS = 2000  # of a user request kept verbatim
REQUESTS_KEPT = 3
COMMANDS_KEPT = 30
STATED_KEPT = 200  # requests with a convention kept for capture (the operation takes 500)
STATED_CHARS = 20_000
CAPTURE_CHARS = 4000  # of a request, an answer or a failed command's output kept for capture
EDIT_CHARS = 20_000  # of an edit's old and new text compared for its changed lines

# engram's MCP tools as each client names them: mcp__engram__create_task (Claude Code, Codex),
# mcp_engram_create_task (Gemini CLI); any server name containing "engram".
ENGRAM_TOOL = re.compile(
    r"engram\w*?_+(create_task|resume_task|update_task|get_task|track_progress|"
    r"track_failure|session_handoff|store_memory|report_interruption)$"
)
# Gemini CLI adds a hook's additionalContext to the prompt inside these tags.
HOOK_CONTEXT = re.compile(r"<hook_context>.*?</hook_context>\s*", re.S)
TASK_ID = re.compile(r"\bt-[0-9a-f]{12}\b")
# Shell outputs that state an exit code: "Exit code 1" (Claude Code), "Exit Code: 1" (Gemini
# CLI), "Exit code: 1", "exit_code": 1, "Process exited with code 1" (Codex).
EXIT_CODE = re.compile(r"(?i)(?:exit[ _]code\"?:?\s*|exited with code\s+)(-?\d+)")
TODO_STATUSES = {
    "pending": "pending",
    "not_started": "pending",
    "planned": "pending",
    "in_progress": "in_progress",
    "completed": "done",
    "done": "done",
    "cancelled": "cancelled",
    "canceled": "cancelled",
    "deleted": "cancelled",
    "blocked": "blocked",
}
# A Codex goal's status: it is worked on (active) until complete; paused or blocked, still open.
GOAL_STATUSES = {
    "active": "in_progress",
    "complete": "done",
    "completed": "done",
    "paused": "pending",
    "blocked": "blocked",
}


class TranscriptError(Exception):
    """The transcript file cannot be read at all (missing, a folder, unreadable)."""


@dataclass
class TodoItem:
    text: str
    status: str  # pending | in_progress | done | blocked | cancelled


@dataclass(frozen=True)
class Command:
    command: str
    failed: bool
    error: str = ""  # the end of its output when it failed


@dataclass
class Session:
    """What the session did since it started, or since the agent's own last handoff."""

    client: str
    entries: int = 0  # entries read
    skipped: int = 0  # lines or entries that could not be used
    skip_reasons: dict[str, int] = field(default_factory=dict)
    todos: OrderedDict[str, TodoItem] = field(default_factory=OrderedDict)
    changed_todos: set[str] = field(default_factory=set)  # keys changed since the agent's handoff
    files: list[str] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    commands_run: int = 0
    requests: list[str] = field(default_factory=list)
    # Every request that states a convention (engram.text.convention_sentences), kept past the agent's
    # own handoff: a convention holds for the project, not for one stretch of work.
    stated: list[str] = field(default_factory=list)
    task_id: str | None = None  # the engram task the session last worked on through the tools
    agent_handoffs: int = 0  # session_handoff calls that succeeded
    pending_calls: dict[str, tuple[str, dict]] = field(default_factory=dict)
    _task_numbers: int = 0
    # Per-turn capture (hooks.capture): the events in order, when asked for, and the byte range
    # of a JSON Lines transcript read (from `offset` to `end_offset`, the last complete line).
    timeline: list[dict] | None = None
    offset: int = 0
    end_offset: int = 0

    # -- what the checkpoint reads ------------------------------------------------
    def plan(self) -> list[TodoItem]:
        """The todo list (items changed since the agent's own handoff, after one)."""
        items = list(self.todos.items())
        if self.agent_handoffs:
            items = [(k, t) for k, t in items if k in self.changed_todos]
        return [t for _, t in items]

    def failures(self) -> list[Command]:
        return [c for c in self.commands if c.failed]

    def empty(self) -> bool:
        return not (self.plan() or self.files or self.commands or self.requests)

    def skip(self, why: str) -> None:
        self.skipped += 1
        self.skip_reasons[why] = self.skip_reasons.get(why, 0) + 1

    # -- events ---------------------------------------------------------------------
    def request(self, text: str) -> None:
        text = text.strip()
        if text:
            self.requests = (self.requests + [text[:REQUEST_CHARS]])[-REQUESTS_KEPT:]
            if len(self.stated) < STATED_KEPT and conventions_in(text):
                self.stated.append(text[:STATED_CHARS])
            self._record({"k": "request", "text": text[:CAPTURE_CHARS]})

    def answer(self, text: str) -> None:
        """The assistant's text (its last one in a turn is the turn's answer)."""
        text = (text or "").strip()
        if text:
            self._record({"k": "answer", "text": text[:CAPTURE_CHARS]})

    def _record(self, event: dict) -> None:
        if self.timeline is not None:
            self.timeline.append(event)

    def tool_call(self, call_id: str, name: str, args: Any) -> None:
        self.pending_calls[call_id] = (name, args if isinstance(args, dict) else {})

    def tool_result(self, call_id: str, output: str, failed: bool, extra: Any = None) -> None:
        name, args = self.pending_calls.pop(call_id, ("", {}))
        if name:
            self.tool(name, args, output, failed, extra)

    def tool(self, name: str, args: dict, output: str, failed: bool, extra: Any = None) -> None:  # noqa: C901 - a branch per tool of the client's transcript format
        """One finished tool call: its name, arguments, output text and whether it failed."""
        m = ENGRAM_TOOL.search(name)
        if m:
            self._engram_tool(m.group(1), args, output, failed)
        elif name in ("TodoWrite", "write_todos", "update_plan"):
            if not failed:
                self._todo_list(args.get("todos") if "todos" in args else args.get("plan"))
        elif name in ("create_goal", "update_goal", "get_goal"):
            if not failed:
                self._goal(output)
        elif name == "TaskCreate":
            if not failed:
                self._task_created(args, output, extra)
        elif name == "TaskUpdate":
            if not failed:
                self._task_updated(args)
        elif name in ("Write", "Edit", "MultiEdit", "NotebookEdit", "write_file", "replace", "edit"):
            path = args.get("file_path") or args.get("notebook_path") or args.get("path")
            if isinstance(path, str) and path and not failed:
                self._file(path)
                for old, new in _edit_pairs(args):
                    self._record({"k": "edit", "file": path, "old": old[:EDIT_CHARS], "new": new[:EDIT_CHARS]})
        elif name in ("apply_patch",):
            if not failed:
                patch = args.get("input") or args.get("patch") or ""
                for p in re.findall(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", str(patch), re.M):
                    self._file(p.strip())
                for path, old, new in _patch_pairs(str(patch)):
                    self._record({"k": "edit", "file": path, "old": old[:EDIT_CHARS], "new": new[:EDIT_CHARS]})
        elif name in ("Bash", "run_shell_command", "shell", "exec_command", "shell_command", "local_shell"):
            cmd = args.get("command", args.get("cmd"))
            if isinstance(cmd, list):
                cmd = " ".join(str(c) for c in cmd)
                cmd = re.sub(r"^(?:bash|sh|zsh) -lc ", "", cmd)
            if isinstance(cmd, str) and cmd.strip():
                self._command(cmd.strip(), output, failed)

    def _engram_tool(self, tool: str, args: dict, output: str, failed: bool) -> None:
        if failed:
            return
        given = args.get("task_id")
        found = TASK_ID.search(output or "")
        if isinstance(given, str) and TASK_ID.fullmatch(given):
            self.task_id = given
        elif tool == "create_task" and found:
            self.task_id = found.group(0)
        if tool == "session_handoff":
            # The agent wrote its own handoff: the checkpoint adds only what happens after it.
            self.agent_handoffs += 1
            self.files, self.commands, self.requests, self.commands_run = [], [], [], 0
            self.changed_todos = set()

    def _todo_list(self, todos: Any) -> None:
        if not isinstance(todos, list):
            return
        new: OrderedDict[str, TodoItem] = OrderedDict()
        for t in todos:
            if not isinstance(t, dict):
                continue
            text = t.get("content") or t.get("description") or t.get("step") or t.get("subject")
            if not isinstance(text, str) or not text.strip():
                continue
            status = TODO_STATUSES.get(str(t.get("status", "pending")).lower(), "pending")
            key = text.strip().lower()
            self._note_change(key, status)
            new[key] = TodoItem(text.strip(), status)
        self.todos = new  # the whole list each time: what it no longer holds is gone

    def _goal(self, output: str) -> None:
        """Codex's goal (0.171 offers create_goal, update_goal, get_goal, not update_plan, to
        `codex exec`): one objective with a status, read from the goal the tool returns, so a
        refused call changes nothing."""
        try:
            goal = json.loads(output).get("goal")
        except (ValueError, AttributeError):
            return
        text = goal.get("objective") if isinstance(goal, dict) else None
        if not isinstance(text, str) or not text.strip():
            return
        status = GOAL_STATUSES.get(str(goal.get("status", "")).lower(), "in_progress")
        key = f"goal:{text.strip().lower()}"
        self._note_change(key, status)
        self.todos[key] = TodoItem(text.strip(), status)

    def _note_change(self, key: str, status: str) -> None:
        """An item new to the list, or whose status moved, counts as changed since the handoff."""
        old = self.todos.get(key)
        if old is None or old.status != status:
            self.changed_todos.add(key)

    def _task_created(self, args: dict, output: str, extra: Any) -> None:
        text = args.get("subject") or args.get("content") or args.get("description")
        if not isinstance(text, str) or not text.strip():
            return
        self._task_numbers += 1
        tid = None
        if isinstance(extra, dict) and isinstance(extra.get("task"), dict):
            tid = extra["task"].get("id")
        if tid is None:
            m = re.search(r"#(\w+)", output or "")
            tid = m.group(1) if m else str(self._task_numbers)
        key = f"#{tid}"
        self.todos[key] = TodoItem(text.strip(), "pending")
        self.changed_todos.add(key)

    def _task_updated(self, args: dict) -> None:
        key = f"#{args.get('taskId', args.get('task_id', args.get('id')))}"
        item = self.todos.get(key)
        if item is None:
            return
        if isinstance(args.get("subject"), str) and args["subject"].strip():
            item.text = args["subject"].strip()
        status = args.get("status")
        if isinstance(status, str):
            item.status = TODO_STATUSES.get(status.lower(), item.status)
        self.changed_todos.add(key)

    def _file(self, path: str) -> None:
        if path in self.files:
            self.files.remove(path)
        self.files.append(path)  # most recent last

    def _command(self, cmd: str, output: str, failed: bool) -> None:
        code = EXIT_CODE.search(output or "")
        if code and code.group(1) != "0":
            failed = True
        error = _tail(output, ERROR_CHARS) if failed else ""
        self.commands_run += 1
        self._record(
            {
                "k": "command",
                "command": cmd[:2000],
                "failed": failed,
                "output": _head_tail(output, CAPTURE_CHARS) if failed else "",
            }
        )
        self.commands = (self.commands + [Command(cmd[:2000], failed, error)])[-COMMANDS_KEPT:]


def _edit_pairs(args: dict) -> list[tuple[str, str]]:
    """(old, new) text of each change an edit tool call made: Edit and Gemini's replace give
    old_string/new_string, MultiEdit a list of them, Write and write_file the whole new content."""
    edits = given if isinstance(given := args.get("edits"), list) else [args]
    out = []
    for e in edits:
        if not isinstance(e, dict):
            continue
        new = e.get("new_string", e.get("content", e.get("new_source")))
        if isinstance(new, str):
            old = e.get("old_string")
            out.append((old if isinstance(old, str) else "", new))
    return out


def _patch_pairs(patch: str) -> list[tuple[str, str, str]]:
    """(file, removed lines, added lines) of each file an apply_patch envelope changes."""
    out = []
    for m in re.finditer(r"^\*\*\* (?:Add|Update) File: (.+)\n((?:(?!\*\*\* ).*\n?)*)", patch, re.M):
        body = m.group(2).splitlines()
        old = "\n".join(ln[1:] for ln in body if ln.startswith("-"))
        new = "\n".join(ln[1:] for ln in body if ln.startswith("+"))
        out.append((m.group(1).strip(), old, new))
    return out


def _head_tail(text: str, n: int) -> str:
    """A long output's start and end (a compiler names the error first, a traceback last)."""
    text = (text or "").strip()
    return text if len(text) <= n else text[: n // 3] + "\n…\n" + text[-(n - n // 3) :]


def _tail(text: str, n: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= n else "…" + text[-n:]


def text_of(content: Any) -> str:
    """The text of a message or tool result: a string, or the text parts of a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(c) for c in content if c is not None)
    if isinstance(content, dict):
        for k in ("text", "output", "content", "error"):
            if k in content:
                return text_of(content[k])
        if "functionResponse" in content:
            return text_of((content["functionResponse"] or {}).get("response"))
        return ""
    return "" if content is None else str(content)


# ---------------------------------------------------------------- reading lines


def lines(path: Path, session: Session) -> Iterator[dict]:
    """The JSON objects of a JSON Lines file, one at a time; bad lines are counted and skipped."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; binary: a bad byte spoils one line only
    except FileNotFoundError:
        raise TranscriptError(f"transcript {path} does not exist") from None
    except IsADirectoryError:
        raise TranscriptError(f"transcript {path} is a directory") from None
    except OSError as e:
        raise TranscriptError(f"transcript {path} cannot be read: {e.strerror or e}") from None
    with f:
        # Per-turn capture reads on from where its last read stopped, and leaves a line still
        # being written (no newline yet) for the next read.
        incremental = session.timeline is not None
        if session.offset:
            f.seek(session.offset)
        session.end_offset = session.offset
        while True:
            try:
                raw = f.readline(MAX_LINE_BYTES)
            except OSError as e:
                raise TranscriptError(f"transcript {path} cannot be read: {e.strerror or e}") from None
            if not raw or (incremental and not raw.endswith(b"\n") and len(raw) < MAX_LINE_BYTES):
                return
            session.end_offset += len(raw)
            if len(raw) >= MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):  # skip the rest of the huge line
                    raw = f.readline(MAX_LINE_BYTES)
                    session.end_offset += len(raw)
                session.skip("line over 16 MB")
                continue
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except UnicodeDecodeError:
                session.skip("not UTF-8 text")
                continue
            except ValueError:
                session.skip("not JSON (truncated or corrupt line)")
                continue
            if not isinstance(obj, dict):
                session.skip("not a JSON object")
                continue
            session.entries += 1
            yield obj
