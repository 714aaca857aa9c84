"""The error -> fix cases of tests/data/fixes/specs.json: rendered as transcripts of the three clients,
and read back as the hook reads them (captured_fix).

Each case becomes one session per client: the user asks for the command to pass, the agent runs
it (it fails with the case's output), makes the case's edits, runs the passing command and says
it is fixed. Deterministic: the same specs give byte-identical files. Usage:

    python -m tests.support.fix_transcripts          # writes tests/data/fixes/<client>/<id>.jsonl
    python -m tests.support.fix_transcripts --check   # exits 1 when a written file is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "data" / "fixes"
ROOT = "/repo"  # the work tree the sessions run in
CLIENTS = ("claude-code", "codex", "gemini")


def cases() -> list[dict]:
    return json.loads((HERE / "specs.json").read_text(encoding="utf-8"))["cases"]


def captured_fix(client: str, case: dict):
    """The one fix the case's transcript yields, read as the hook reads it (or None)."""
    from engram.continuity.fixes import FixTracker
    from engram.hooks.turn_capture import fixes_in, read_new_events

    events, _ = read_new_events(HERE / client / f"{case['id']}.jsonl", client, {"offset": 0, "events": 0})
    fixes = fixes_in(events, FixTracker(root=ROOT), ROOT)
    return fixes[0] if len(fixes) == 1 else None


def _stamp(i: int) -> str:
    return f"2026-12-01T10:{i // 60:02d}:{i % 60:02d}.000Z"


def steps(case: dict) -> list[tuple]:
    """The session as client-neutral steps: ("request", text), ("run", cmd, output, failed),
    ("edit", file, old, new), ("answer", text)."""
    passed = case.get("pass", case["cmd"])
    out = [("request", f"`{case['cmd']}` fails, please fix it."), ("run", case["cmd"], case["out"], True)]
    out += [("edit", f, old, new) for f, old, new in case["edits"]]
    out += [
        ("run", passed, "ok", False),
        ("answer", f"Fixed: `{passed}` passes now after changing {', '.join(f for f, _, _ in case['edits'])}."),
    ]
    return out


def claude(case: dict) -> list[dict]:
    lines = []
    base = {"isSidechain": False, "userType": "external", "cwd": ROOT, "sessionId": case["id"], "version": "2.1.332"}
    for n, step in enumerate(steps(case), 1):
        if step[0] == "request":
            lines.append(
                {
                    **base,
                    "type": "user",
                    "uuid": f"u{n}",
                    "timestamp": _stamp(n),
                    "message": {"role": "user", "content": step[1]},
                }
            )
        elif step[0] == "answer":
            lines.append(
                {
                    **base,
                    "type": "assistant",
                    "uuid": f"a{n}",
                    "timestamp": _stamp(n),
                    "message": {"role": "assistant", "content": [{"type": "text", "text": step[1]}]},
                }
            )
        else:
            if step[0] == "run":
                call = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": step[1]}}
                result = {
                    "type": "tool_result",
                    "tool_use_id": f"toolu_{n}",
                    "content": f"Exit code 1\n{step[2]}" if step[3] else step[2],
                    "is_error": step[3],
                }
            else:
                _, f, old, new = step
                args = (
                    {"file_path": f"{ROOT}/{f}", "old_string": old, "new_string": new}
                    if old
                    else {"file_path": f"{ROOT}/{f}", "content": new}
                )
                call = {"type": "tool_use", "id": f"toolu_{n}", "name": "Edit" if old else "Write", "input": args}
                result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "The file was updated."}
            lines.append(
                {
                    **base,
                    "type": "assistant",
                    "uuid": f"a{n}",
                    "timestamp": _stamp(n),
                    "message": {"role": "assistant", "content": [call]},
                }
            )
            lines.append(
                {
                    **base,
                    "type": "user",
                    "uuid": f"r{n}",
                    "timestamp": _stamp(n),
                    "message": {"role": "user", "content": [result]},
                }
            )
    return lines


def codex(case: dict) -> list[dict]:
    lines = [
        {
            "timestamp": _stamp(0),
            "type": "session_meta",
            "payload": {"id": case["id"], "cwd": ROOT, "cli_version": "0.171.0"},
        }
    ]
    for n, step in enumerate(steps(case), 1):
        t = _stamp(n)
        if step[0] == "request":
            lines.append({"timestamp": t, "type": "event_msg", "payload": {"type": "user_message", "message": step[1]}})
        elif step[0] == "answer":
            lines.append(
                {
                    "timestamp": t,
                    "type": "response_item",
                    "payload": {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": step[1]}],
                    },
                }
            )
        elif step[0] == "run":
            lines.append(
                {
                    "timestamp": t,
                    "type": "response_item",
                    "payload": {
                        "type": "function_call",
                        "name": "exec_command",
                        "call_id": f"call_{n}",
                        "arguments": json.dumps({"cmd": step[1]}),
                    },
                }
            )
            code = 1 if step[3] else 0
            lines.append(
                {
                    "timestamp": t,
                    "type": "response_item",
                    "payload": {
                        "type": "function_call_output",
                        "call_id": f"call_{n}",
                        "output": f"Chunk ID: c{n}\nWall time: 0.1000 seconds\nProcess exited with code {code}\n"
                        f"Original token count: 10\nOutput:\n{step[2]}\n",
                    },
                }
            )
        else:
            _, f, old, new = step
            body = "".join(f"-{ln}\n" for ln in old.splitlines()) + "".join(f"+{ln}\n" for ln in new.splitlines())
            verb = "Update" if old else "Add"
            patch = f"*** Begin Patch\n*** {verb} File: {f}\n{'@@' + chr(10) if old else ''}{body}*** End Patch\n"
            lines.append(
                {
                    "timestamp": t,
                    "type": "response_item",
                    "payload": {
                        "type": "custom_tool_call",
                        "name": "apply_patch",
                        "call_id": f"call_{n}",
                        "input": patch,
                    },
                }
            )
            lines.append(
                {
                    "timestamp": t,
                    "type": "response_item",
                    "payload": {
                        "type": "custom_tool_call_output",
                        "call_id": f"call_{n}",
                        "output": "Exit code: 0\nWall time: 0 seconds\nOutput:\n"
                        f"Success. Updated the following files:\nM {f}\n",
                    },
                }
            )
    return lines


def gemini(case: dict) -> list[dict]:
    lines: list[dict] = [{"sessionId": case["id"], "projectHash": "fixes", "startTime": _stamp(0), "kind": "main"}]
    for n, step in enumerate(steps(case), 1):
        t, mid = _stamp(n), f"m{n}"
        if step[0] == "request":
            lines.append({"id": mid, "timestamp": t, "type": "user", "content": [{"text": step[1]}]})
            continue
        if step[0] == "answer":
            lines.append({"id": mid, "timestamp": t, "type": "gemini", "content": [{"text": step[1]}]})
            continue
        if step[0] == "run":
            name, args = "run_shell_command", {"command": step[1]}
            output = f"Output: {step[2]}\nExit Code: {1 if step[3] else 0}"
        else:
            _, f, old, new = step
            name = "replace" if old else "write_file"
            args = (
                {"file_path": f"{ROOT}/{f}", "old_string": old, "new_string": new}
                if old
                else {"file_path": f"{ROOT}/{f}", "content": new}
            )
            output = "Successfully modified file"
        call = {
            "id": f"c{n}",
            "name": name,
            "args": args,
            "status": "success",
            "timestamp": t,
            "result": [{"functionResponse": {"id": f"c{n}", "name": name, "response": {"output": output}}}],
        }
        lines.append({"id": mid, "timestamp": t, "type": "gemini", "content": [], "toolCalls": [call]})
    return lines


RENDER = {"claude-code": claude, "codex": codex, "gemini": gemini}


def render(case: dict, client: str) -> str:
    return "".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n" for line in RENDER[client](case))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check the written files are up to date")
    args = ap.parse_args(argv)
    stale = []
    for client in CLIENTS:
        for case in cases():
            path = HERE / client / f"{case['id']}.jsonl"
            text = render(case, client)
            if args.check:
                if not path.exists() or path.read_text(encoding="utf-8") != text:
                    stale.append(str(path))
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if stale:
        print("out of date (run python -m tests.support.fix_transcripts):\n" + "\n".join(stale), file=sys.stderr)
        return 1
    print(f"{len(cases())} cases x {len(CLIENTS)} clients " + ("up to date" if args.check else "written"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
