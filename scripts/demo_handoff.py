"""Two agents, one task: agent A works and hands off; agent B, a new process, picks it up.

Each agent is a real MCP client session talking to `engram` over stdio, exactly as
Claude Code or Cursor would. Run by scripts/demo.sh; ENGRAM_HOME selects the store.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters


def agent() -> Client:
    params = StdioServerParameters(command=sys.executable, args=["-m", "engram"], env=dict(os.environ))
    return Client(params, read_timeout_seconds=180)


async def call(client: Client, tool: str, **args) -> dict:
    r = await client.call_tool(tool, args)
    if r.is_error:
        raise SystemExit(f"{tool} failed: {r.content[0].text}")
    return r.structured_content


async def main() -> None:
    async with agent() as a:
        task = (await call(a, "create_task", name="Add CSV export", goal="Users can export their memories as CSV"))[
            "task_id"
        ]
        await call(
            a,
            "store_memory",
            content="Exports must be UTF-8 with a header row.",
            memory_type="fact",
            importance=0.8,
            task_id=task,
        )
        await call(
            a,
            "track_failure",
            error="UnicodeEncodeError when writing names with accents",
            component="exporter",
            root_cause="file opened with the locale encoding",
            fix="open(path, 'w', encoding='utf-8', newline='')",
            task_id=task,
        )
        await call(a, "track_progress", feature="CSV writer", status="in_progress", completion=0.6, task_id=task)
        await call(
            a,
            "session_handoff",
            summary="CSV writer works; CLI flag, tests and docs are missing",
            completed=["CSV writer core"],
            in_progress=["unicode handling"],
            next_steps=[
                "Add a --csv flag to the export command",
                "Write tests for the CSV exporter",
                "Document CSV export in the README",
            ],
            task_id=task,
        )
        await call(a, "session_outcome", outcome="success", notes="handed off cleanly")
    print(f"agent A: created task {task}, recorded a failure and progress, handed off with 3 next steps")

    async with agent() as b:
        r = await call(b, "recall_memory", query="CSV export")
        h = r["handoff"]
        print("\nagent B recalls 'CSV export' and learns:")
        print(f"  handoff: {h['summary']}")
        for s in h["next_steps_validation"]:
            print(f"  next step [{s['status']}]: {s['step']}")
        for f in r["related_failures"]:
            print(f"  pitfall in {f['component']}: {f['error']} (fix: {f.get('fix') or '-'})")
        for m in r["memories"][:4]:
            print(f"  memory [{m['memory_type']}] {m['content'].replace(chr(10), ' | ')[:90]}")
        await call(b, "track_progress", feature="CSV exporter tests", status="done", completion=1.0, task_id=task)
        view = await call(b, "get_task", task_id=task)
        print("\nafter agent B finished the tests, the handoff's next steps read:")
        for s in view["latest_handoff"]["next_steps_validation"]:
            ev = s["evidence"]["text"] if s.get("evidence") else ""
            print(f"  [{s['status']}] {s['step']}" + (f"  <- {ev}" if ev else ""))


if __name__ == "__main__":
    anyio.run(main)
