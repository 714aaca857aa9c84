"""The three clients' transcript readers over generated files (Hypothesis): entries of the right
shapes with the wrong types, truncated and corrupt lines, bytes that are not UTF-8, odd Unicode.
Reading never raises (a file that exists is always readable), a bad entry costs that entry only,
and what capture does with what was read (fixes, turns, conventions) never raises either."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from engram.continuity.fixes import FixTracker
from engram.hooks.formats import read_transcript
from engram.hooks.transcript import TranscriptError
from engram.hooks.turn_capture import fixes_in, read_new_events, turns_of
from engram.text.convention_sentences import conventions_in
from tests.strategies import json_values, odd_text, shaped

CALL_IDS = st.sampled_from(["c1", "c2", "c3"])  # few ids, so results meet their calls
TOOLS = st.sampled_from(
    [
        "Bash",
        "shell",
        "exec_command",
        "run_shell_command",
        "local_shell",
        "apply_patch",
        "Write",
        "Edit",
        "MultiEdit",
        "write_file",
        "replace",
        "TodoWrite",
        "write_todos",
        "update_plan",
        "create_goal",
        "TaskCreate",
        "TaskUpdate",
        "mcp__engram__create_task",
        "mcp__engram__session_handoff",
        "mcp_engram_update_task",
    ]
)
PATCH = st.lists(
    st.sampled_from(["*** Begin Patch", "*** Update File: a.py", "*** Add File: b.py", "-old", "+new", "@@", "x"]),
    max_size=8,
).map("\n".join)
ARGS = shaped(
    {
        "command": st.one_of(odd_text, st.lists(odd_text, max_size=3), st.just(["bash", "-lc", "pytest -q"])),
        "cmd": odd_text,
        "file_path": st.sampled_from(["/r/a.py", "a.py", ""]),
        "path": odd_text,
        "old_string": odd_text,
        "new_string": odd_text,
        "content": odd_text,
        "edits": [{"old_string": odd_text, "new_string": odd_text}],
        "input": PATCH,
        "patch": PATCH,
        "todos": [{"content": odd_text, "status": st.sampled_from(["pending", "completed", "in_progress", "x"])}],
        "plan": [{"step": odd_text, "status": odd_text}],
        "subject": odd_text,
        "taskId": st.sampled_from(["1", "2"]),
        "status": st.sampled_from(["completed", "in_progress", "x"]),
        "task_id": st.sampled_from(["t-0123456789ab", "t-x"]),
    }
)
OUTPUT = st.one_of(odd_text, st.sampled_from(["Exit code 1\nFAILED tests/test_a.py::t", "Exit code: 0", "ok"]))

CODEX_HEADERS = st.sampled_from(["Process exited with code 1\n", "Exit code: 0\n", "Wall time: 1\n"])

CLAUDE = st.one_of(
    shaped(
        {
            "type": st.sampled_from(["assistant", "user", "system", "summary"]),
            "isMeta": st.booleans(),
            "isSidechain": st.booleans(),
            "message": {
                "role": st.sampled_from(["user", "assistant"]),
                "content": st.one_of(
                    odd_text,
                    shaped(
                        [
                            {
                                "type": st.sampled_from(["text", "tool_use", "tool_result"]),
                                "text": odd_text,
                                "id": CALL_IDS,
                                "name": TOOLS,
                                "input": ARGS,
                                "tool_use_id": CALL_IDS,
                                "content": st.one_of(OUTPUT, shaped([{"type": st.just("text"), "text": OUTPUT}])),
                                "is_error": st.booleans(),
                            }
                        ]
                    ),
                ),
            },
            "toolUseResult": shaped({"task": {"id": st.sampled_from(["1", "2"])}}),
        }
    ),
    json_values,
)
GEMINI_MESSAGE = shaped(
    {
        "id": st.sampled_from(["m1", "m2", "m3", 4]),
        "type": st.sampled_from(["user", "gemini", "info"]),
        "content": st.one_of(odd_text, shaped([{"text": odd_text}])),
        "toolCalls": [
            {
                "name": TOOLS,
                "args": ARGS,
                "status": st.sampled_from(["success", "error", "cancelled"]),
                "result": st.one_of(OUTPUT, shaped([{"functionResponse": {"response": {"output": OUTPUT}}}])),
                "resultDisplay": OUTPUT,
            }
        ],
    }
)
GEMINI = st.one_of(
    GEMINI_MESSAGE,
    shaped({"$rewindTo": st.sampled_from(["m1", "m2", "zz"])}),
    shaped({"$set": {"messages": [GEMINI_MESSAGE]}}),
    shaped({"messages": [GEMINI_MESSAGE]}),
    json_values,
)
CODEX = st.one_of(
    shaped(
        {
            "type": st.sampled_from(["response_item", "event_msg", "session_meta"]),
            "payload": {
                "type": st.sampled_from(
                    [
                        "message",
                        "user_message",
                        "item_completed",
                        "function_call",
                        "custom_tool_call",
                        "local_shell_call",
                        "function_call_output",
                        "custom_tool_call_output",
                    ]
                ),
                "role": st.sampled_from(["user", "assistant"]),
                "message": odd_text,
                "item": {"type": st.just("UserMessage"), "content": shaped([{"text": odd_text}])},
                "content": shaped([{"type": st.just("output_text"), "text": odd_text}]),
                "name": TOOLS,
                "namespace": st.sampled_from(["mcp__engram", "", None]),
                "call_id": CALL_IDS,
                "arguments": st.one_of(ARGS.map(json.dumps), ARGS, odd_text),
                "input": PATCH,
                "action": {"command": st.lists(odd_text, max_size=3)},
                "output": st.one_of(
                    OUTPUT,
                    st.builds(lambda h, o: f"{h}Output:\n{o}", CODEX_HEADERS, OUTPUT),
                    shaped({"output": OUTPUT, "metadata": {"exit_code": st.integers(-1, 2)}}).map(json.dumps),
                    shaped({"content": OUTPUT, "success": st.booleans()}),
                ),
            },
        }
    ),
    json_values,
)
ENTRIES = {"claude-code": CLAUDE, "gemini": GEMINI, "codex": CODEX}


def _line(entry, cut: int | None, garbage: bytes | None) -> bytes:
    """One line of the file: the entry as JSON, maybe cut short (a line being written, a disk
    that filled), or bytes that are not JSON or not UTF-8."""
    if garbage is not None:
        return garbage.replace(b"\n", b" ")
    raw = json.dumps(entry).encode("utf-8", "surrogatepass")  # a lone surrogate as JSON writes it: escaped
    return raw[:cut] if cut is not None else raw


def lines_for(client: str):
    return st.lists(
        st.tuples(ENTRIES[client], st.none() | st.integers(0, 200), st.none() | st.binary(max_size=40)),
        max_size=25,
    )


def _write(rows, final_newline: bool) -> Path:
    path = Path(tempfile.mkdtemp(prefix="engram-fuzz-")) / "t.jsonl"
    body = b"\n".join(_line(*row) for row in rows)
    path.write_bytes(body + (b"\n" if final_newline else b""))
    return path


def _capture(client: str, path: Path) -> None:
    """What turn_capture does with a transcript, up to the call to the daemon."""
    state = {"offset": 0, "events": 0, "open": [], "pending": None}
    events, s = read_new_events(path, client, state)
    fixes_in(events, FixTracker.from_state([], "/r"), "/r")
    turns_of(events, None)
    for e in events:
        if e["k"] == "request":
            conventions_in(e["text"])
    s.plan(), s.failures(), s.empty()
    json.dumps(s.timeline)  # what capture sends must be JSON


def assert_read_as_expected(s) -> None:
    """The readers check each field's type themselves: an entry that reached Session.one_entry's
    safety net (a fault in a reader) is a bug, even though the capture went on without it."""
    faults = {k: n for k, n in s.skip_reasons.items() if k.startswith("entry of an unexpected shape")}
    assert not faults, faults


def check(client: str, rows, final_newline: bool) -> None:
    path = _write(rows, final_newline)
    try:
        s = read_transcript(path, client)
        assert_read_as_expected(s)
        _capture(client, path)
    finally:
        path.unlink()
        path.parent.rmdir()


@given(lines_for("claude-code"), st.booleans())
def test_claude_code_transcripts(rows, final_newline):
    check("claude-code", rows, final_newline)


@given(lines_for("gemini"), st.booleans())
def test_gemini_transcripts(rows, final_newline):
    check("gemini", rows, final_newline)


@given(lines_for("codex"), st.booleans())
def test_codex_transcripts(rows, final_newline):
    check("codex", rows, final_newline)


@given(st.one_of(shaped({"messages": [GEMINI_MESSAGE]}), json_values), st.none() | st.integers(0, 300))
def test_gemini_one_document_transcripts(doc, cut):
    path = Path(tempfile.mkdtemp(prefix="engram-fuzz-")) / "session.json"
    raw = json.dumps(doc).encode("utf-8", "surrogatepass")
    path.write_bytes(raw[:cut] if cut is not None else raw)
    try:
        try:
            s = read_transcript(path, "gemini")
        except TranscriptError as e:  # the one error a whole-document reader gives: it names the file
            assert str(path) in str(e)
        else:
            assert_read_as_expected(s)
            _capture("gemini", path)
    finally:
        path.unlink()
        path.parent.rmdir()
