"""The three clients' transcript formats, each read into a transcript.Session in one pass.

Three formats, each from its client's source and real files:
- Claude Code (2.1.x): JSON Lines, one entry per line (`type` user / assistant / system /
  summary / ...); assistant entries carry `tool_use` blocks, user entries the `tool_result`
  blocks answering them (`is_error` for a failed call) or the prompt the user typed.
- Gemini CLI: JSON Lines of message records (`id`, `type` user / gemini / info ...,
  `toolCalls` with `status` and `result`), a record written again under the same id
  replacing the first, `{"$rewindTo": id}` dropping that message and every later one, and
  `{"$set": ...}` metadata; older versions wrote one JSON document with a `messages` list.
- Codex CLI: rollout JSON Lines (`type` response_item / event_msg / ..., with a `payload`):
  `function_call` / `custom_tool_call` items (an MCP tool's call carries its server as `namespace`
  in 0.171) and their `*_output` (0.171: a "Wall time: ..." header, then "Output:"), the user's
  prompt as a `user_message` event (older releases) or an `item_completed` event of a
  `UserMessage` item (0.171, which writes no `user_message`).
"""

from __future__ import annotations

import json
import os
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any

from engram.hooks.transcript import (
    CLIENT_NAMES,
    HOOK_CONTEXT,
    MAX_JSON_DOCUMENT_BYTES,
    Session,
    TranscriptError,
    lines,
    text_of,
)

# ---------------------------------------------------------------- Claude Code

_COMMAND_NAME = re.compile(r"<command-name>\s*(/[^<\s]+)\s*</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)


def _slash_command(text: str) -> str:
    """What the user typed when a prompt is Claude Code's wrapper of a slash command: "/name the
    arguments" (the expanded template follows as the client's own text); the text itself otherwise,
    and "" for a command without arguments (/clear, /exit: nothing was asked)."""
    name = _COMMAND_NAME.search(text) if "<command-name>" in text else None
    if not name:
        return text
    args = _COMMAND_ARGS.search(text)
    return f"{name.group(1)} {args.group(1).strip()}" if args and args.group(1).strip() else ""


def _claude(path: Path, s: Session) -> None:
    for e in lines(path, s):
        with s.one_entry():
            _claude_entry(e, s)


def _claude_entry(e: dict, s: Session) -> None:
    kind = e.get("type")
    msg = e.get("message")
    if kind not in ("user", "assistant") or not isinstance(msg, dict):
        return  # summary, system, file-history-snapshot, attachment, ...: nothing to use
    content = msg.get("content")
    if kind == "assistant" and msg.get("model") == "<synthetic>":
        return  # the client's own stand-in ("No response requested.", "API Error: ..."), no answer
    if kind == "assistant":
        for b in content if isinstance(content, list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("name"), str):
                s.tool_call(str(b.get("id")), b["name"], b.get("input"))
            elif (
                isinstance(b, dict)
                and b.get("type") == "text"
                and isinstance(b.get("text"), str)
                and not e.get("isSidechain")
            ):
                s.answer(b["text"])
        return
    if e.get("isMeta") or e.get("isCompactSummary") or e.get("isSidechain"):
        return  # text the client wrote into the conversation, not the user's
    if isinstance(content, str):
        s.request(_slash_command(content))
        return
    results = (
        [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if isinstance(content, list)
        else []
    )
    for b in results:
        s.tool_result(
            str(b.get("tool_use_id")), text_of(b.get("content")), bool(b.get("is_error")), e.get("toolUseResult")
        )
    if not results and isinstance(content, list):
        text = "\n".join(
            b.get("text", "")
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
        s.request(_slash_command(text))


# ---------------------------------------------------------------- Gemini CLI


def _gemini_message(m: dict, s: Session) -> list[tuple]:
    """The events of one Gemini message record."""
    kind = m.get("type")
    if kind == "user":
        # Only the text parts: a user record also carries the function responses sent back.
        content = m.get("content")
        parts = content if isinstance(content, list) else [content]
        text = "\n".join(
            p if isinstance(p, str) else p["text"]
            for p in parts
            if isinstance(p, str) or (isinstance(p, dict) and isinstance(p.get("text"), str))
        )
        text = HOOK_CONTEXT.sub("", text).strip()  # what hooks added to the prompt is not the user's
        if not text or text.startswith(("/", "<session_context>")):
            return []
        return [("request", text)]
    if kind != "gemini":
        return []
    events: list[tuple] = []
    said = text_of(m.get("content"))
    if said.strip():
        events.append(("answer", said))
    calls = m.get("toolCalls")
    for c in calls if isinstance(calls, list) else []:
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            continue
        status = str(c.get("status", ""))
        if status in ("cancelled", "executing", "scheduled", "validating", "awaiting_approval"):
            continue  # never ran, or has not finished
        output = text_of(c.get("result")) or text_of(c.get("resultDisplay"))
        events.append(
            ("tool", c["name"], c.get("args") if isinstance(c.get("args"), dict) else {}, output, status == "error")
        )
    return events


def _gemini(path: Path, s: Session) -> None:
    # Records are replayed once the file is read: a later record may replace or rewind earlier ones.
    messages: OrderedDict[str, list[tuple]] = OrderedDict()

    def add(m: dict) -> None:
        # The same id again is that message updated (a tool call finished): it keeps its place.
        with s.one_entry():
            messages[str(m["id"])] = _gemini_message(m, s)

    if path.suffix == ".json":  # the older format: one JSON document
        try:
            size = path.stat().st_size
        except OSError as e:
            raise TranscriptError(f"transcript {path} cannot be read: {e.strerror or e}") from None
        if size > MAX_JSON_DOCUMENT_BYTES:
            raise TranscriptError(
                f"transcript {path} is {size:,} bytes, over the {MAX_JSON_DOCUMENT_BYTES:,} "
                "read whole for a one-document Gemini session"
            )
        try:
            doc = json.loads(path.read_bytes())
        except (OSError, ValueError) as e:
            raise TranscriptError(f"transcript {path} is not a JSON document ({type(e).__name__})") from None
        records = doc.get("messages") if isinstance(doc, dict) else None
        if not isinstance(records, list):
            raise TranscriptError(f"transcript {path} holds no messages list")
        found: Any = [r for r in records if isinstance(r, dict)]
        s.entries += len(found)
    else:
        found = lines(path, s)
    for r in found:
        with s.one_entry():
            _gemini_record(r, messages, add)
    for events in messages.values():
        for ev in events:
            with s.one_entry():
                if ev[0] == "request":
                    s.request(ev[1])
                elif ev[0] == "answer":
                    s.answer(ev[1])
                else:
                    s.tool(*ev[1:])


def _gemini_record(r: dict, messages: OrderedDict[str, list[tuple]], add) -> None:
    """One record of the file: a message (added or replaced), a rewind, or a checkpoint."""
    if isinstance(r.get("$rewindTo"), str):
        rid = r["$rewindTo"]
        if rid in messages:
            keys = list(messages)
            for k in keys[keys.index(rid) :]:
                del messages[k]
        else:
            messages.clear()
    elif isinstance(r.get("$set"), dict):
        if isinstance(r["$set"].get("messages"), list):  # a checkpoint: the history rebuilt
            messages.clear()
            for m in r["$set"]["messages"]:
                if isinstance(m, dict) and "id" in m:
                    add(m)
    elif "id" in r and "type" in r:
        add(r)
    elif isinstance(r.get("messages"), list):  # one line holding a whole older document
        for m in r["messages"]:
            if isinstance(m, dict) and "id" in m:
                add(m)


# ---------------------------------------------------------------- Codex


def _codex_args(raw: Any) -> dict:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            v = json.loads(raw)
        except ValueError:
            return {"input": raw}  # custom tools (apply_patch) take their input as text
        return v if isinstance(v, dict) else {"input": raw}
    return {}


# Codex 0.171 puts a header before each tool's output: "Chunk ID: 38b664", "Wall time: 0.0000 seconds",
# "Process exited with code 1" (a command) or "Exit code: 0" (apply_patch), "Original token count: 31",
# then "Output:" and the output itself.
CODEX_OUTPUT_HEADER = re.compile(r"\A((?:[A-Z][^\n]{0,200}\n){1,8}?)Output:\n")
CODEX_HEADER_RUNNING = re.compile(r"(?m)^Process running with session ID \d+$")
CODEX_HEADER_EXIT = re.compile(r"(?m)^(?:Process exited with code|Exit code:)\s*(-?\d+)\s*$")


def _codex_output(raw: Any) -> tuple[str, bool]:
    """A function_call_output's text and whether it says the call failed."""
    if isinstance(raw, dict):
        text = text_of(raw.get("content", raw.get("output", "")))
        return text, raw.get("success") is False
    text = text_of(raw)
    head = CODEX_OUTPUT_HEADER.match(text)
    if head:
        code = CODEX_HEADER_EXIT.search(head.group(1))
        out = text[head.end() :]
        running = CODEX_HEADER_RUNNING.search(head.group(1))
        if running:  # exec_command left it running: write_stdin calls read the rest and its exit code
            return f"{running.group(0)}\n{out}", False
        if code and code.group(1) != "0":
            return f"{out.rstrip()}\nexit code: {code.group(1)}", True
        return out, False
    try:
        v = json.loads(text) if text.lstrip().startswith("{") else None
    except ValueError:
        v = None
    if isinstance(v, dict):
        code = (v.get("metadata") or {}).get("exit_code") if isinstance(v.get("metadata"), dict) else None
        out = text_of(v.get("output", text))
        return (out + (f"\nexit code: {code}" if code not in (None, 0) else "")), False
    return text, False


def _codex(path: Path, s: Session) -> None:
    last_request = [None]  # a prompt written both ways (user_message, item_completed) counts once
    for e in lines(path, s):
        with s.one_entry():
            _codex_entry(e, s, last_request)


def _codex_entry(e: dict, s: Session, last_request: list) -> None:
    """One rollout line; `last_request` holds the prompt just read, from one line to the next."""
    p = e.get("payload")
    if not isinstance(p, dict):
        return
    kind, ptype = e.get("type"), p.get("type")
    request = None
    if kind == "event_msg" and ptype == "user_message" and isinstance(p.get("message"), str):
        request = p["message"]
    elif (
        kind == "event_msg"
        and ptype == "item_completed"
        and isinstance(p.get("item"), dict)
        and p["item"].get("type") == "UserMessage"
    ):
        request = text_of(p["item"].get("content"))
    if request is not None:
        if request != last_request[0]:
            s.request(request)
        last_request[0] = request
        return
    if kind != "response_item":
        return
    if ptype != "message":
        last_request[0] = None
    elif p.get("role") == "assistant":
        s.answer(text_of(p.get("content")))
    if ptype in ("function_call", "custom_tool_call") and isinstance(p.get("name"), str):
        name, namespace = p["name"], p.get("namespace")
        if isinstance(namespace, str) and namespace and not name.startswith(namespace):
            name = f"{namespace}__{name}"  # mcp__engram + create_task: mcp__engram__create_task
        s.tool_call(str(p.get("call_id")), name, _codex_args(p.get("arguments", p.get("input"))))
    elif ptype == "local_shell_call":
        action = given if isinstance(given := p.get("action"), dict) else {}
        s.tool_call(str(p.get("call_id")), "local_shell", {"command": action.get("command")})
    elif ptype in ("function_call_output", "custom_tool_call_output"):
        text, failed = _codex_output(p.get("output"))
        s.tool_result(str(p.get("call_id")), text, failed)


READERS = {"claude-code": _claude, "gemini": _gemini, "codex": _codex}


def read_transcript(path: str | os.PathLike, client: str) -> Session:
    """What the session in the transcript at `path` did; raises TranscriptError when it cannot be read."""
    if client not in READERS:
        raise ValueError(f"client must be one of {', '.join(CLIENT_NAMES)}; got {client!r}")
    s = Session(client=client)
    READERS[client](Path(path), s)
    return s
