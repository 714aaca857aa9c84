"""The `engram` command: each subcommand parses input, makes one Api call and renders the result.

With no command it runs the stdio MCP server. When a daemon owns the database the
commands go through its socket; otherwise they open the file in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .config import Settings
from .types import MEMORY_TYPES, SEARCH_MODES, TASK_STATUSES, EngramError

__all__ = ["build_parser", "main"]

DEFAULT_HTTP_HOST = "127.0.0.1"
DEFAULT_HTTP_PORT = 8765


class CliError(Exception):
    """Bad input caught before any call (unreadable JSON option, stdin)."""


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="engram",
        description="Long-term memory and task continuity for AI agents. "
        "Run without a command to serve MCP over stdio.",
        epilog="Commands use the running daemon when there is one (engram serve), "
        "else they open ENGRAM_HOME/memories.duckdb themselves.",
    )
    p.add_argument("--home", help="data folder (default: ENGRAM_HOME or ~/.engram)")
    p.add_argument("--user", help="user whose memories to use (default: ENGRAM_USER or 'default')")
    p.add_argument("--json", action="store_true", help="print results as JSON for scripts")
    p.add_argument("--version", action="version", version=f"engram {__version__}",
                   help="print the version and exit")
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: `engram --json recall x` and `engram recall x --json` both work.
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print the result as JSON for scripts")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    def cmd(parent, name: str, text: str) -> argparse.ArgumentParser:
        return parent.add_parser(name, help=text, description=text, parents=[common])

    c = cmd(sub, "remember", "Store a memory (resolved against what is already known).")
    c.add_argument("content", help="the text to remember; '-' reads it from stdin")
    c.add_argument("--type", dest="memory_type", choices=MEMORY_TYPES, default="fact",
                   help="kind of memory (default: fact)")
    c.add_argument("--importance", type=float, help="0 to 1; higher decays slower (default 0.5)")
    c.add_argument("--tag", dest="tags", action="append", help="a tag; repeat for several")
    c.add_argument("--task", dest="task_id", help="id of the task this memory belongs to")
    c.add_argument("--pin", action="store_true", help="never decay or prune this memory")
    c.add_argument("--metadata", help="extra fields as a JSON object")

    c = cmd(sub, "recall", "Search memories by meaning and keywords.")
    c.add_argument("query", help="what to look for")
    c.add_argument("--limit", type=int, help="most results to return (default 10)")
    c.add_argument("--type", dest="memory_type", choices=MEMORY_TYPES, help="only this kind of memory")
    c.add_argument("--task", dest="task_id", help="only memories of this task")
    c.add_argument("--tag", dest="tags", action="append", help="only memories with this tag; repeatable")
    c.add_argument("--as-of", dest="as_of", help="what was believed at this ISO date or datetime")
    c.add_argument("--mode", choices=SEARCH_MODES, help="hybrid (default), bm25 or vector")
    c.add_argument("--explain", action="store_true", help="include each hit's score breakdown")

    c = cmd(sub, "context", "Print a token-budgeted memory block to paste into a prompt.")
    c.add_argument("query", help="what the next piece of work is about")
    c.add_argument("--max-tokens", dest="max_tokens", type=int, help="token budget (default 1500)")
    c.add_argument("--task", dest="task_id", help="the task being resumed")
    c.add_argument("--limit", type=int, help="most memories to consider (default 20)")

    c = cmd(sub, "forget", "Delete memories for good: one by id, or all that match every word of --query.")
    c.add_argument("memory_id", nargs="?", help="id of the memory to delete")
    c.add_argument("--query", help="delete every memory containing all these words")
    c.add_argument("--dry-run", dest="dry_run", action="store_true", help="show what would go, delete nothing")

    task = sub.add_parser("task", help="Create, list, show and update tasks.",
                          description="Create, list, show and update tasks.")
    tsub = task.add_subparsers(dest="task_command", metavar="ACTION", title="actions", required=True)
    c = cmd(tsub, "create", "Start tracking a task.")
    c.add_argument("name", help="short name of the task")
    c.add_argument("--goal", help="what done looks like")
    c.add_argument("--metadata", help="extra fields as a JSON object")
    c = cmd(tsub, "list", "List tasks, newest first.")
    c.add_argument("--status", choices=TASK_STATUSES, help="only tasks with this status")
    c = cmd(tsub, "show", "Show a task with its timeline and latest handoff.")
    c.add_argument("task_id", help="id of the task")
    c = cmd(tsub, "update", "Change a task's status, goal or name.")
    c.add_argument("task_id", help="id of the task")
    c.add_argument("--status", choices=TASK_STATUSES, help="new status")
    c.add_argument("--goal", help="new goal")
    c.add_argument("--name", help="new name")
    c.add_argument("--metadata", help="fields to merge into the metadata, as a JSON object")

    c = cmd(sub, "handoff", "Record where the work stands, for the next session to pick up.")
    c.add_argument("summary", help="one paragraph on the state of the work")
    c.add_argument("--completed", action="append", help="something finished; repeatable")
    c.add_argument("--in-progress", dest="in_progress", action="append",
                   help="something half done; repeatable")
    c.add_argument("--blocked", action="append", help="something stuck, and on what; repeatable")
    c.add_argument("--next", dest="next_steps", action="append", help="a next step; repeatable")
    c.add_argument("--task", dest="task_id", help="id of the task this handoff is for")

    cmd(sub, "stats", "Show counts, sizes and maintenance status.")

    c = cmd(sub, "consolidate", "Merge near-duplicates and prune faded memories (dry run by default).")
    c.add_argument("--apply", action="store_true", help="make the changes instead of only reporting them")

    c = cmd(sub, "export", "Write the user's memories, tasks, sessions and edges to a JSON Lines file.")
    c.add_argument("path", help="file to write")
    c = cmd(sub, "import", "Load a JSON Lines file written by `engram export` (the user's rows only).")
    c.add_argument("path", help="file to read")
    c.add_argument("--skip-existing", dest="on_conflict", action="store_const", const="skip", default="error",
                   help="keep rows whose ids already exist and import the rest (default: refuse the file)")
    c.add_argument("--reembed", action="store_true",
                   help="accept a file embedded with another model and embed it again with this one")

    c = cmd(sub, "reindex", "Rebuild the derived indexes (vectors, BM25, graph) from the stored rows.")
    c.add_argument("--reembed", action="store_true",
                   help="also re-embed every memory with the current model (after changing ENGRAM_MODEL)")

    c = cmd(sub, "serve", "Run the daemon that owns the database (and optionally the HTTP API).")
    c.add_argument("--http", action="store_true", help="also serve the HTTP API and MCP over streamable HTTP")
    c.add_argument("--host", default=DEFAULT_HTTP_HOST,
                   help=f"HTTP address (default {DEFAULT_HTTP_HOST}; others need ENGRAM_TOKEN)")
    c.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, help=f"HTTP port (default {DEFAULT_HTTP_PORT})")

    cmd(sub, "stop", "Ask the running daemon to shut down, and wait until it has.")
    cmd(sub, "version", "Print the engram version.")
    return p


def _json_option(raw: str | None, name: str) -> dict | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise CliError(f"{name} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise CliError(f"{name} must be a JSON object")
    return value


def _given(**kw: Any) -> dict:
    """Only the options the user gave, so the Api's defaults apply to the rest."""
    return {k: v for k, v in kw.items() if v is not None}


def _request(a: argparse.Namespace) -> tuple[str, dict]:
    """The Api operation and arguments a parsed command line asks for."""
    c = a.command
    if c == "remember":
        content = sys.stdin.read() if a.content == "-" else a.content
        return "store_memory", _given(content=content, memory_type=a.memory_type, importance=a.importance,
                                      tags=a.tags, task_id=a.task_id, pinned=a.pin or None,
                                      metadata=_json_option(a.metadata, "--metadata"))
    if c == "recall":
        return "recall_memory", _given(query=a.query, limit=a.limit, memory_type=a.memory_type,
                                       task_id=a.task_id, tags=a.tags, as_of=a.as_of, mode=a.mode,
                                       explain=a.explain or None)
    if c == "context":
        return "get_context", _given(query=a.query, max_tokens=a.max_tokens, task_id=a.task_id, limit=a.limit)
    if c == "forget":
        return "forget_memory", _given(memory_id=a.memory_id, query=a.query, dry_run=a.dry_run or None)
    if c == "task":
        t = a.task_command
        if t == "create":
            return "create_task", _given(name=a.name, goal=a.goal,
                                         metadata=_json_option(a.metadata, "--metadata"))
        if t == "list":
            return "list_tasks", _given(status=a.status)
        if t == "show":
            return "get_task", {"task_id": a.task_id}
        return "update_task", _given(task_id=a.task_id, status=a.status, goal=a.goal, name=a.name,
                                     metadata=_json_option(a.metadata, "--metadata"))
    if c == "handoff":
        return "session_handoff", _given(summary=a.summary, completed=a.completed, in_progress=a.in_progress,
                                         blocked=a.blocked, next_steps=a.next_steps, task_id=a.task_id)
    if c == "stats":
        return "memory_stats", {}
    if c == "consolidate":
        return "consolidate_memory", {"apply": a.apply}
    if c in ("export", "import"):
        # Absolute: through the daemon the path is opened by another process, in another directory.
        path = str(Path(a.path).expanduser().resolve())
        if c == "export":
            return "export_memories", {"path": path}
        return "import_memories", {"path": path, "on_conflict": a.on_conflict, "reembed": a.reembed}
    if c == "reindex":
        return "reindex", {"reembed": a.reembed}
    raise AssertionError(f"unhandled command {c}")


# ---------------------------------------------------------------- rendering


def _plain(value: Any, indent: int = 0) -> list[str]:
    """Readable nested key: value lines for results without a dedicated renderer."""
    pad = "  " * indent
    if isinstance(value, dict):
        lines = []
        for k, v in value.items():
            if isinstance(v, dict | list) and v:
                lines.append(f"{pad}{k}:")
                lines.extend(_plain(v, indent + 1))
            else:
                lines.append(f"{pad}{k}: {_scalar(v)}")
        return lines
    if isinstance(value, list):
        lines = []
        for v in value:
            if isinstance(v, dict | list):
                sub = _plain(v, indent + 1)
                lines.append(f"{pad}- {sub[0].strip()}" if sub else f"{pad}-")
                lines.extend(sub[1:])
            else:
                lines.append(f"{pad}- {_scalar(v)}")
        return lines
    return [f"{pad}{_scalar(value)}"]


def _scalar(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list | dict):
        return "none" if not v else json.dumps(v)
    return str(v)


def _day(iso: str | None) -> str:
    return (iso or "")[:10]


def _render_store(r: dict) -> str:
    line = f"{r['action']}: {r['memory_id']} [{r['memory_type']}] {r['content']}"
    return line + (f"\n  ({r['reason']})" if r.get("reason") else "")


def _render_recall(r: dict) -> str:
    lines = []
    for s in r.get("interrupted_sessions") or []:
        task = (s.get("task") or {}).get("name") or "no task"
        lines.append(f"! interrupted session {s['session_id']} ({s.get('client') or '?'}, {task}), "
                     f"last seen {_day(s.get('last_heartbeat'))}")
    if not r["memories"]:
        lines.append("no memories found")
    for i, m in enumerate(r["memories"], 1):
        pin = " (latest handoff)" if m.get("pinned") else ""
        lines.append(f"{i:>2}. [{m['memory_type']}] {m['content']}{pin}")
        lines.append(f"    id {m['id']}  score {m['score']:.3f}  {_day(m.get('created_at'))}")
        if m.get("explain"):
            lines.append(f"    explain: {json.dumps(m['explain'])}")
    for f in r.get("related_failures") or []:
        lines.append(f"pitfall [{f.get('component', '?')}]: {f.get('content', '')}")
    return "\n".join(lines)


def _render_forget(r: dict) -> str:
    ids = r["would_delete"] if r["dry_run"] else r["deleted"]
    verb = "would delete" if r["dry_run"] else "deleted"
    return f"{verb} {r['count']} memor{'y' if r['count'] == 1 else 'ies'}" + \
        "".join(f"\n  {i}" for i in ids)


def _task_line(t: dict) -> str:
    goal = f" - {t['goal']}" if t.get("goal") else ""
    return f"{t['id']}  [{t['status']}]  {t['name']}{goal}"


def _render_task_view(r: dict) -> str:
    lines = [_task_line(r["task"])]
    for e in r.get("timeline") or []:
        lines.append(f"  {_day(e['created_at'])} [{e['memory_type']}] {e['content']}")
    h = r.get("latest_handoff")
    if h:
        lines.append(f"latest handoff ({_day(h['created_at'])}): {h.get('summary', '')}")
        for v in h.get("next_steps_validation") or []:
            lines.append(f"  next: {v.get('step')} [{v.get('status')}]")
    return "\n".join(lines)


def _render_tasks(r: dict) -> str:
    return "\n".join(_task_line(t) for t in r["tasks"]) or "no tasks"


def _render_handoff(r: dict) -> str:
    return f"handoff saved: {r['handoff_id']}" + (f" (task {r['task_id']})" if r.get("task_id") else "")


RENDER: dict[str, Callable[[dict], str]] = {
    "store_memory": _render_store,
    "recall_memory": _render_recall,
    "get_context": lambda r: r["context"],
    "forget_memory": _render_forget,
    "create_task": _task_line,
    "update_task": _task_line,
    "get_task": _render_task_view,
    "list_tasks": _render_tasks,
    "session_handoff": _render_handoff,
}


def _render(op: str, result: Any, as_json: bool) -> str:
    if as_json:
        return json.dumps(result, indent=2, ensure_ascii=False, default=str)
    fn = RENDER.get(op)
    return fn(result) if fn else "\n".join(_plain(result))


# ---------------------------------------------------------------- backends


@dataclass
class _Conn:
    """One CLI session: a call function and how to end the session cleanly."""

    call: Callable[[str, dict], Any]
    close: Callable[[], None]


def _connect(settings: Settings, user: str | None, api_factory: Callable[[Settings], Any] | None,
             allow_model_change: bool = False) -> _Conn:
    session_id = f"cli-{uuid.uuid4().hex}"
    if api_factory is None:
        from .server.rpc import RpcClient, server_running
        if server_running(settings.socket_path):
            # The daemon owns the file (DuckDB allows one writer): go through it, never spawn one.
            client = RpcClient(settings.socket_path, session_id=session_id, client="cli", user_id=user)
            return _Conn(lambda op, args: client.call(op, **args), lambda: client.close(clean=True))
    from .api import Api, Ctx
    if api_factory is not None:
        api, owned = api_factory(settings), False
    else:
        from huggingface_hub.utils import disable_progress_bars

        from .engram import Engram
        disable_progress_bars()  # a "Loading weights" bar on every command is noise
        api, owned = Api(Engram(settings.db_path, settings=settings, allow_model_change=allow_model_change)), True
    ctx = Ctx(session_id=session_id, user_id=user, client="cli", pid=os.getpid())

    def close() -> None:
        try:
            api.eng.end_session(session_id, clean=True, user_id=user)
        finally:
            if owned:
                api.eng.close()

    return _Conn(lambda op, args: api.call(op, args, ctx), close)


def _run_call(a: argparse.Namespace, settings: Settings, api_factory) -> int:
    op, args = _request(a)
    # `reindex --reembed` is what the model guard tells a user to run after changing ENGRAM_MODEL,
    # so it alone opens a store embedded with another model.
    conn = _connect(settings, a.user, api_factory,
                    allow_model_change=op == "reindex" and bool(args.get("reembed")))
    try:
        result = conn.call(op, args)
    finally:
        conn.close()
    print(_render(op, result, a.json))
    if op == "consolidate_memory" and not args["apply"] and not a.json:
        print("(dry run: nothing changed; add --apply to make these changes)")
    return 0


def _stop(a: argparse.Namespace, settings: Settings) -> int:
    from .server.daemon import stop_daemon
    # Returns once the daemon released its lock, so a command run next can open the database.
    stopped = stop_daemon(settings)
    if a.json:
        print(json.dumps({"stopped": stopped}))
    else:
        print("engram daemon stopped" if stopped else f"no engram daemon is running at {settings.socket_path}")
    return 0


# ---------------------------------------------------------------- entry point


def main(argv: list[str] | None = None, *, api_factory: Callable[[Settings], Any] | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 error, 2 usage).

    `api_factory(settings) -> Api` replaces opening the database (tests inject an
    Api over an in-memory Engram); the caller keeps ownership of it.
    """
    a = build_parser().parse_args(argv)
    from .server.rpc import RpcError
    try:
        overrides = {"home": Path(a.home).expanduser()} if a.home else {}
        settings = Settings.from_env(**overrides)
        if a.command is None:
            from .server.mcp import run_stdio
            run_stdio(settings)
            return 0
        if a.command == "version":
            print(json.dumps({"version": __version__}) if a.json else f"engram {__version__}")
            return 0
        if a.command == "serve":
            from .server.daemon import run_daemon
            code = run_daemon(settings, http=a.http, host=a.host, port=a.port)
            return code if isinstance(code, int) else 0
        if a.command == "stop":
            return _stop(a, settings)
        return _run_call(a, settings, api_factory)
    except (EngramError, RpcError, CliError, ValueError, OSError) as e:
        # EngramError covers NotFound, ModelUnavailable, DatabaseLocked; ValueError bad ENGRAM_* values.
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
