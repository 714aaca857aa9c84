"""Reading Claude Code, Gemini CLI and Codex transcripts, and building a checkpoint from one (engram.hooks)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engram.hooks.checkpoint import _component, build_checkpoint, git_state
from engram.hooks.formats import READERS, read_transcript
from engram.hooks.transcript import MAX_LINE_BYTES, Session, TranscriptError

DATA = Path(__file__).resolve().parents[1] / "data" / "hooks"


def statuses(s) -> list[tuple[str, str]]:
    return [(t.text, t.status) for t in s.plan()]


def claude_entry(kind: str, content, **kw) -> dict:
    return {
        "type": kind,
        "uuid": "u",
        "sessionId": "s",
        "cwd": "/r",
        "message": {"role": kind, "content": content},
        **kw,
    }


def tool_use(i: str, name: str, inp: dict) -> dict:
    return claude_entry("assistant", [{"type": "tool_use", "id": i, "name": name, "input": inp}])


def tool_result(i: str, content, error: bool = False, **kw) -> dict:
    block = {"type": "tool_result", "tool_use_id": i, "content": content, "is_error": error}
    return claude_entry("user", [block], **kw)


def write_jsonl(path: Path, entries: list) -> Path:
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in entries))
    return path


# ---------------------------------------------------------------- Claude Code


def test_claude_code_session_todo_list_files_commands_requests_and_task():
    s = read_transcript(DATA / "claude_session.jsonl", "claude-code")
    assert s.skipped == 0 and s.entries == 29
    # TaskCreate / TaskUpdate (Claude Code 2.1): each item with its status.
    assert statuses(s) == [("Add retry with backoff to client.py", "done"), ("Make the test suite pass", "pending")]
    assert s.files == ["/tmp/demo-repo/src/retry.py", "/tmp/demo-repo/src/client.py"]
    assert [(c.command, c.failed) for c in s.commands] == [
        ("python -m pytest -q tests/test_client.py", True),
        ("git status --short", False),
    ]
    assert "AssertionError: expected 3 attempts, got 1" in s.failures()[0].error
    # The user's own words, verbatim; not the meta caveat, the compact summary or command output.
    assert s.requests == [
        "Add a retry to the HTTP client and make the tests pass",
        "Also keep the token sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA out of the logs",
    ]
    assert s.task_id == "t-0123456789ab"  # created through engram's tools, then progress on it


def test_claude_code_todowrite_keeps_the_latest_list(tmp_path):
    p = write_jsonl(
        tmp_path / "t.jsonl",
        [
            tool_use(
                "a",
                "TodoWrite",
                {
                    "todos": [
                        {"content": "Step one", "status": "in_progress", "activeForm": "x"},
                        {"content": "Step two", "status": "pending", "activeForm": "y"},
                    ]
                },
            ),
            tool_result("a", "Todos have been modified successfully."),
            tool_use(
                "b",
                "TodoWrite",
                {
                    "todos": [
                        {"content": "Step one", "status": "completed", "activeForm": "x"},
                        {"content": "Step two", "status": "in_progress", "activeForm": "y"},
                        {"content": "Step three", "status": "pending", "activeForm": "z"},
                    ]
                },
            ),
            tool_result("b", "Todos have been modified successfully."),
            tool_use("c", "TodoWrite", {"todos": "not a list"}),  # malformed: the list stays
            tool_result("c", "ok"),
        ],
    )
    s = read_transcript(p, "claude-code")
    assert statuses(s) == [("Step one", "done"), ("Step two", "in_progress"), ("Step three", "pending")]


def test_a_failed_edit_or_a_call_without_result_is_not_an_edited_file(tmp_path):
    p = write_jsonl(
        tmp_path / "t.jsonl",
        [
            tool_use("a", "Edit", {"file_path": "/r/a.py", "old_string": "x", "new_string": "y"}),
            tool_result("a", "String to replace not found in file.", error=True),
            tool_use("b", "Write", {"file_path": "/r/b.py", "content": "x"}),  # cut off before its result
        ],
    )
    s = read_transcript(p, "claude-code")
    assert s.files == [] and s.empty()


def test_after_the_agents_own_handoff_only_what_happened_since_counts(tmp_path):
    handoff = json.dumps({"handoff_id": "h1", "task_id": "t-0123456789ab"})
    p = write_jsonl(
        tmp_path / "t.jsonl",
        [
            claude_entry("user", "first request"),
            tool_use(
                "a",
                "TodoWrite",
                {"todos": [{"content": "A", "status": "completed"}, {"content": "B", "status": "pending"}]},
            ),
            tool_result("a", "ok"),
            tool_use("b", "Write", {"file_path": "/r/before.py", "content": "x"}),
            tool_result("b", "ok"),
            tool_use("h", "mcp__engram__session_handoff", {"summary": "done A", "task_id": "t-0123456789ab"}),
            tool_result("h", [{"type": "text", "text": handoff}]),
        ],
    )
    s = read_transcript(p, "claude-code")
    assert s.agent_handoffs == 1 and s.empty()  # nothing since the agent's handoff: nothing to add
    assert build_checkpoint(s, None, client="claude-code", event="SessionEnd") is None
    with p.open("a") as f:
        for e in [
            claude_entry("user", "second request"),
            tool_use(
                "c",
                "TodoWrite",
                {"todos": [{"content": "A", "status": "completed"}, {"content": "B", "status": "in_progress"}]},
            ),
            tool_result("c", "ok"),
            tool_use("d", "Edit", {"file_path": "/r/after.py", "old_string": "x", "new_string": "y"}),
            tool_result("d", "ok"),
        ]:
            f.write(json.dumps(e) + "\n")
    s = read_transcript(p, "claude-code")
    assert s.files == ["/r/after.py"] and s.requests == ["second request"]
    assert statuses(s) == [("B", "in_progress")]  # only the item that changed since
    cp = build_checkpoint(s, None, client="claude-code", event="SessionEnd")
    assert cp["checkpoint"]["after_agent_handoff"] and "after the agent's own handoff" in cp["summary"]


def test_a_failed_engram_call_does_not_name_the_task(tmp_path):
    p = write_jsonl(
        tmp_path / "t.jsonl",
        [
            tool_use("a", "mcp__engram__resume_task", {"task_id": "t-111111111111"}),
            tool_result("a", "no task with id 't-111111111111'", error=True),
            tool_use("b", "mcp__engram__resume_task", {"task_id": "t-222222222222"}),
            tool_result("b", [{"type": "text", "text": "{}"}]),
        ],
    )
    assert read_transcript(p, "claude-code").task_id == "t-222222222222"


# ---------------------------------------------------------------- Gemini CLI and Codex


def test_gemini_records_replace_by_id_and_rewind():
    s = read_transcript(DATA / "gemini_session.jsonl", "gemini")
    assert s.skipped == 0
    assert statuses(s) == [
        ("Reproduce the flaky test", "done"),
        ("Fix dates.py", "in_progress"),
        ("Drop the old shim", "cancelled"),
    ]
    assert s.files == ["/tmp/gem-repo/dates.py"]  # notes.txt was rewound away
    (c,) = s.commands
    assert c.failed and "day is out of range" in c.error  # "Exit Code: 1" in a successful call's output
    assert s.requests == ["Fix the flaky date parser test", "Now also handle time zones"]
    assert s.task_id == "t-aaaaaaaaaaaa"  # mcp_engram_track_progress with the task's id


def test_gemini_older_one_document_file():
    s = read_transcript(DATA / "gemini_session_legacy.json", "gemini")
    assert statuses(s) == [("Reproduce the flaky test", "in_progress"), ("Fix dates.py", "pending")]
    assert s.requests == ["Fix the flaky date parser test"]


def test_codex_rollout_plan_patch_commands_and_task():
    s = read_transcript(DATA / "codex_rollout.jsonl", "codex")
    assert statuses(s) == [("Parse --verbose in cli.py", "in_progress"), ("Document the flag", "pending")]
    assert s.files == ["src/cli.py", "src/verbose.py"]
    assert [(c.command, c.failed) for c in s.commands] == [("cargo test", True), ("git status --short", False)]
    assert "cannot find value `verbose`" in s.commands[0].error
    assert s.requests == ["Add a --verbose flag to the CLI"]  # not the environment context
    assert s.task_id == "t-bbbbbbbbbbbb"


def test_codex_0_171_requests_namespaced_mcp_calls_and_output_headers(tmp_path):
    def item(payload: dict) -> dict:
        return {"timestamp": "2026-12-04T11:00:00Z", "type": "response_item", "payload": payload}

    def user(text: str) -> list[dict]:  # 0.171 writes no user_message, but older files and both kinds may come
        return [
            item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}),
            {"type": "event_msg", "payload": {"type": "user_message", "message": text}},
            {
                "type": "event_msg",
                "payload": {
                    "type": "item_completed",
                    "item": {
                        "type": "UserMessage",
                        "id": "u1",
                        "content": [{"type": "text", "text": text, "text_elements": []}],
                    },
                },
            },
        ]

    p = write_jsonl(
        tmp_path / "rollout.jsonl",
        [
            *user("Add a rate limiter"),
            item(
                {
                    "type": "function_call",
                    "name": "create_task",
                    "namespace": "mcp__engram",
                    "arguments": '{"name": "limiter"}',
                    "call_id": "c1",
                }
            ),
            item(
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": 'Wall time: 0.02 seconds\nOutput:\n{"task_id":"t-cccccccccccc","status":"open"}',
                }
            ),
            item(
                {"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "make lint"}', "call_id": "c2"}
            ),
            item(
                {
                    "type": "function_call_output",
                    "call_id": "c2",
                    "output": (
                        "Chunk ID: 1f\nWall time: 0.2 seconds\nProcess exited with code 2\nOriginal token count: 9\n"
                        "Output:\nlint.py:3: E501 line too long\n"
                    ),
                }
            ),
            item(
                {"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "sleep 600"}', "call_id": "c3"}
            ),
            item(
                {
                    "type": "function_call_output",
                    "call_id": "c3",
                    "output": ("Chunk ID: 2a\nWall time: 10.0 seconds\nProcess running with session ID 7\nOutput:\n"),
                }
            ),
            *user("Add a rate limiter"),  # the same prompt again, after work: a request of its own
        ],
    )
    s = read_transcript(p, "codex")
    assert s.requests == ["Add a rate limiter", "Add a rate limiter"]
    assert s.task_id == "t-cccccccccccc"
    assert [(c.command, c.failed) for c in s.commands] == [("make lint", True), ("sleep 600", False)]
    assert s.commands[0].error == "lint.py:3: E501 line too long\nexit code: 2"  # not Codex's header


def test_codex_0_171_goal_is_the_plan(tmp_path):
    """codex exec 0.171 offers create_goal / update_goal / get_goal, not update_plan: the goal the
    tool returns is the plan's one item, with its status; a refused call changes nothing."""

    def item(payload: dict) -> dict:
        return {"timestamp": "2026-12-04T11:00:00Z", "type": "response_item", "payload": payload}

    def goal(call_id: str, name: str, args: str, status: str | None) -> list[dict]:
        out = (
            '{"goal":{"threadId":"th1","objective":"Limit each API key to 100 requests a minute",'
            f'"status":"{status}","tokensUsed":0}},"remainingTokens":null}}'
            if status
            else "cannot create a goal: an unfinished goal exists"
        )
        return [
            item({"type": "function_call", "name": name, "arguments": args, "call_id": call_id}),
            item({"type": "function_call_output", "call_id": call_id, "output": out}),
            # What Codex adds on its own: no call of the model's answers it.
            item(
                {
                    "type": "function_call_output",
                    "call_id": call_id + "x",
                    "name": "goal_objective",
                    "namespace": "agent",
                    "output": "Limit each API key to 100 requests a minute",
                }
            ),
        ]

    objective = '{"objective": "Limit each API key to 100 requests a minute"}'
    p = write_jsonl(tmp_path / "rollout.jsonl", goal("g1", "create_goal", objective, "active"))
    assert statuses(read_transcript(p, "codex")) == [("Limit each API key to 100 requests a minute", "in_progress")]
    p = write_jsonl(
        tmp_path / "rollout.jsonl",
        [
            *goal("g1", "create_goal", objective, "active"),
            *goal("g2", "create_goal", '{"objective": "Something else"}', None),  # refused: changes nothing
            *goal("g3", "update_goal", '{"status": "complete"}', "complete"),
        ],
    )
    assert statuses(read_transcript(p, "codex")) == [("Limit each API key to 100 requests a minute", "done")]


# ---------------------------------------------------------------- hostile transcripts


def test_truncated_binary_and_unknown_lines_are_skipped_and_counted(tmp_path):
    good = json.dumps(claude_entry("user", "a real request"))
    p = tmp_path / "t.jsonl"
    p.write_bytes(
        b"\n".join(
            [
                good.encode(),
                b'{"type": "assistant", "message": {"content": [{"type": "tool_u',  # truncated
                b"\xff\xfe\x00\x01binary\x00",  # read as UTF-16 (its BOM): garbage, not JSON
                b"\x80\x81\x82 binary",
                b"[1, 2, 3]",
                json.dumps({"type": "mystery-v9", "payload": {"a": 1}}).encode(),
                json.dumps({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": 5}]}}).encode(),
                json.dumps(
                    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "nope"}]}}
                ).encode(),
                b'{"type": "user", "message": {"content": "half a line',  # the last line, cut mid-write
            ]
        )
    )
    s = read_transcript(p, "claude-code")
    assert s.requests == ["a real request"]
    assert s.skipped == 5 and s.skip_reasons == {
        "not JSON (truncated or corrupt line)": 3,
        "not UTF-8 text": 1,
        "not a JSON object": 1,
    }


def test_a_huge_line_is_skipped_without_holding_it(tmp_path):
    p = tmp_path / "t.jsonl"
    with p.open("wb") as f:
        f.write(json.dumps(claude_entry("user", "before")).encode() + b"\n")
        f.write(b'{"type": "user", "message": {"content": "' + b"x" * (MAX_LINE_BYTES + 10) + b'"}}\n')
        f.write(json.dumps(claude_entry("user", "after")).encode() + b"\n")
    s = read_transcript(p, "claude-code")
    assert s.requests == ["before", "after"] and s.skip_reasons == {"line over 16 MB": 1}


@pytest.mark.parametrize("client", ["claude-code", "gemini", "codex"])
def test_a_missing_path_or_a_directory_is_a_clear_error(tmp_path, client):
    with pytest.raises(TranscriptError, match="does not exist"):
        read_transcript(tmp_path / "gone.jsonl", client)
    with pytest.raises(TranscriptError, match="is a directory"):
        read_transcript(tmp_path, client)


def test_an_empty_or_garbage_gemini_document_is_a_clear_error(tmp_path):
    (tmp_path / "s.json").write_text("{not json")
    with pytest.raises(TranscriptError, match="not a JSON document"):
        read_transcript(tmp_path / "s.json", "gemini")
    (tmp_path / "s.json").write_text('{"sessionId": "x"}')
    with pytest.raises(TranscriptError, match="no messages list"):
        read_transcript(tmp_path / "s.json", "gemini")


# ---------------------------------------------------------------- the checkpoint


def test_the_checkpoint_of_a_session(tmp_path):
    s = read_transcript(DATA / "claude_session.jsonl", "claude-code")
    git = {
        "root": "/tmp/demo-repo",
        "branch": "main",
        "head": "abc1234",
        "subject": "init",
        "uncommitted": ["src/client.py", "src/retry.py"],
    }
    cp = build_checkpoint(s, git, client="claude-code", event="PreCompact", detail="auto", session_id="claude-code:s")
    assert cp["next_steps"] == ["Add retry with backoff to client.py", "Make the test suite pass"]
    assert cp["step_statuses"] == ["done", "pending"] and cp["completed"] == ["Add retry with backoff to client.py"]
    assert cp["task_id"] == "t-0123456789ab"
    summary = cp["summary"]
    assert summary.startswith("Automatic checkpoint at PreCompact (auto) of a claude-code session.")
    assert "Files edited: src/retry.py, src/client.py." in summary  # relative to the work tree
    assert "Commands: 2 run, 1 failed: `python -m pytest -q tests/test_client.py`." in summary
    assert "Git: branch main at abc1234 (init); uncommitted: src/client.py, src/retry.py." in summary
    assert "Last request: Also keep the token" in summary
    (f,) = cp["failures"]
    assert f["component"] == "pytest" and "expected 3 attempts" in f["error"]
    assert cp["checkpoint"]["automatic"] and cp["checkpoint"]["requests"] == s.requests
    # The same transcript read again (another event) has the same digest; new work changes it.
    again = build_checkpoint(
        read_transcript(DATA / "claude_session.jsonl", "claude-code"),
        git,
        client="claude-code",
        event="SessionEnd",
        detail="other",
    )
    assert again["checkpoint"]["digest"] == cp["checkpoint"]["digest"]
    copy = tmp_path / "t.jsonl"
    shutil.copy(DATA / "claude_session.jsonl", copy)
    with copy.open("a") as fh:
        fh.write(json.dumps(claude_entry("user", "one more thing")) + "\n")
    more = build_checkpoint(read_transcript(copy, "claude-code"), git, client="claude-code", event="SessionEnd")
    assert more["checkpoint"]["digest"] != cp["checkpoint"]["digest"]


@pytest.mark.parametrize(
    "command, component",
    [
        ("python -m pytest -q tests", "pytest"),
        ("cd web && npm test", "npm"),
        ("FOO=1 make check", "make"),
        ("/usr/bin/cargo build | tee log", "cargo"),
        ("uv run ruff check .", "run"),
        ("'unclosed", "'unclosed"),
    ],
)
def test_the_component_of_a_failed_command(command, component):
    assert _component(command) == component


def test_git_state_of_a_work_tree(tmp_path):
    import subprocess

    assert git_state(tmp_path) is None and git_state(tmp_path / "nope") is None and git_state(None) is None
    run = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "work")
    run("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "first commit")
    (tmp_path / "new.py").write_text("x")
    g = git_state(tmp_path)
    assert g["branch"] == "work" and g["subject"] == "first commit" and len(g["head"]) >= 7
    assert g["uncommitted"] == ["new.py"]


# ---------------------------------------------------------------- files the real clients wrote


def test_a_real_claude_code_2_1_transcript():
    # Written by Claude Code 2.1.332 against a scripted model (tests/e2e); only long built-in texts
    # (attachments, request shapes) trimmed. queue-operation, attachment, api-request, tools-used,
    # last-prompt, cost-state ... entries are not the session's work.
    s = read_transcript(DATA / "claude_real_2_1.jsonl", "claude-code")
    assert s.skipped == 0 and s.entries == 36
    assert statuses(s) == [("Parse the CSV header", "pending")]
    assert [Path(f).name for f in s.files] == ["ledger_import.py"]
    (c,) = s.commands
    assert c.failed and c.command == "python3 -c 'import ledger_csv_dialects'"
    assert "ModuleNotFoundError: No module named 'ledger_csv_dialects'" in c.error
    assert s.requests == ["Add CSV import"]


def test_a_real_codex_0_171_rollout():
    # Written by Codex 0.171.0 (`codex exec`, model gpt-5.5) against a scripted model, engram's MCP
    # server added with `codex mcp add`; only long built-in texts trimmed. The prompt is in an
    # item_completed event (no user_message), engram's tool is create_task in namespace mcp__engram,
    # and each tool output starts with Codex's "Wall time: ..." header.
    s = read_transcript(DATA / "codex_real_0_171.jsonl", "codex")
    assert s.skipped == 0 and s.entries == 37
    assert s.requests == ["Add a rate limiter to the public API"]  # not the environment context
    assert s.task_id == "t-502905b767f1"
    assert s.files == ["limiter.py"]
    assert [(c.command, c.failed) for c in s.commands] == [
        ("python3 -c 'import ratelimit_backend_redis'", True),
        ("sleep 3", False),
    ]
    assert s.commands[0].error.startswith("Traceback") and "exit code: 1" in s.commands[0].error


def test_a_real_gemini_cli_0_61_session():
    # Written by Gemini CLI 0.61 against a scripted model: the first user message (session context)
    # arrives in a $set, tool results come back as user records of functionResponse parts, and
    # a hook's additionalContext is inside the prompt's <hook_context> tags.
    s = read_transcript(DATA / "gemini_real_0_61.jsonl", "gemini")
    assert s.skipped == 0
    assert s.requests == ["do the task"]
    assert [Path(f).name for f in s.files] == ["x.py"]
    (c,) = s.commands
    assert c.command == "false" and c.failed and "Exit Code: 1" in c.error


# ---------------------------------------------------------------- text the client wrote as the user


def test_claude_code_client_text_in_the_users_role_is_no_request_and_a_synthetic_reply_no_answer(tmp_path):
    def answer(text: str, model: str = "claude-sonnet-4-5") -> dict:
        e = claude_entry("assistant", [{"type": "text", "text": text}])
        e["message"]["model"] = model
        return e

    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            claude_entry("user", "Add a retry to the uploader"),
            answer("Added a retry with backoff."),
            claude_entry(
                "user",
                "<task-notification>\n<task-id>b0ea071</task-id>\n<status>completed</status>\n</task-notification>",
            ),
            claude_entry("user", "[Request interrupted by user for tool use]"),
            claude_entry("user", [{"type": "text", "text": "[Request interrupted by user]"}]),
            claude_entry(
                "user",
                "<local-command-caveat>Caveat: The messages below were generated by the user while running "
                "local commands. DO NOT respond to these messages.</local-command-caveat>",
            ),
            claude_entry("user", "Caveat: The messages below were generated by the user while running local commands."),
            claude_entry("user", "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n"),
            claude_entry("user", "<local-command-stdout>See ya!</local-command-stdout>"),
            answer("No response requested.", model="<synthetic>"),
            claude_entry("user", "Implement the following plan:\n\n# Plan: Tree view\n\n1. Add the component"),
            claude_entry(
                "user",
                "<command-message>speckit.specify</command-message>\n<command-name>/speckit.specify</command-name>\n"
                "<command-args>a CLI that syncs photos; we use Go</command-args>",
            ),
            answer("Spec written."),
        ],
    )
    s = read_transcript(path, "claude-code")
    assert s.requests[-2:] == ["Add a retry to the uploader", "/speckit.specify a CLI that syncs photos; we use Go"]
    s = Session(client="claude-code", timeline=[])
    READERS["claude-code"](path, s)
    assert [(e["k"], e["text"]) for e in s.timeline] == [
        ("request", "Add a retry to the uploader"),
        ("answer", "Added a retry with backoff."),
        ("request", "/speckit.specify a CLI that syncs photos; we use Go"),
        ("answer", "Spec written."),
    ]


def test_codex_and_gemini_client_text_is_no_request(tmp_path):
    def user(text: str) -> dict:
        return {"type": "event_msg", "payload": {"type": "user_message", "message": text}}

    codex = write_jsonl(
        tmp_path / "r.jsonl",
        [
            user("<environment_context>\n  <cwd>/home/u/app</cwd>\n</environment_context>"),
            user("<user_instructions>\nAlways answer briefly.\n</user_instructions>"),
            user("# AGENTS.md instructions for /home/u/app\n\n<INSTRUCTIONS>Use pnpm.</INSTRUCTIONS>"),
            user("<turn_aborted>\nThe user interrupted the previous turn.\n</turn_aborted>"),
            user("Make the build reproducible"),
        ],
    )
    assert read_transcript(codex, "codex").requests == ["Make the build reproducible"]
    gemini = tmp_path / "g.json"
    gemini.write_text(
        json.dumps(
            {
                "sessionId": "g",
                "messages": [
                    {"id": "1", "type": "user", "content": "Tighten the blocklist"},
                    {"id": "2", "type": "gemini", "content": "Done."},
                    {"id": "3", "type": "user", "content": "System: Please continue."},
                ],
            }
        )
    )
    assert read_transcript(gemini, "gemini").requests == ["Tighten the blocklist"]
