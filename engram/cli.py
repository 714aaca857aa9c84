"""The `engram` command: each subcommand parses input, makes one Api call and renders the result.

With no command it runs the stdio MCP server. Every other command goes through the daemon's
socket, starting the daemon when none runs, so this process never loads the embedding model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from engram import __version__
from engram.core.settings import DEFAULT_HTTP_HOST, DEFAULT_HTTP_PORT, Settings
from engram.core.types import Ctx, EngramError
from engram.ops import OPS, OPS_LIST, Param, dumps

__all__ = ["build_parser", "main"]

IMPORT_SOURCES = ("engram", "mcp-memory", "mem0", "markdown")  # engram.admin.importers.SOURCES, plus our own


class CliError(Exception):
    """Bad input caught before any call (unreadable JSON option, stdin)."""


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="engram",
        description="Long-term memory and task continuity for AI agents. "
        "Run without a command to serve MCP over stdio.",
        epilog="Commands go through the daemon that owns ENGRAM_HOME/memories.duckdb, and start it "
        "when none runs; it exits after ENGRAM_IDLE_EXIT seconds without a client.",
    )
    p.add_argument("--home", help="data folder (default: ENGRAM_HOME or ~/.engram)")
    p.add_argument("--database-url", dest="database_url",
                   help="use this PostgreSQL database (postgresql://...) instead of the DuckDB file "
                        "(default: ENGRAM_DATABASE_URL)")
    p.add_argument("--user", help="user whose memories to use (default: ENGRAM_USER or 'default')")
    p.add_argument("--json", action="store_true", help="print results as JSON for scripts")
    p.add_argument("--session", help="act in this session (default: a new one per command); give every "
                   "command of one agent session the same id so outcome applies to it")
    p.add_argument("--version", action="version", version=f"engram {__version__}",
                   help="print the version and exit")
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: `engram --json recall x` and `engram recall x --json` both work.
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print the result as JSON for scripts")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    def cmd(parent, name: str, text: str) -> argparse.ArgumentParser:
        return parent.add_parser(name, help=text, description=text, parents=[common])

    # The commands that run one operation, with arguments derived from its declaration (engram.ops).
    groups: dict[str, Any] = {}
    for op in OPS_LIST:
        for spec in op.cli:
            parent = sub
            if len(spec.command) == 2:
                group = spec.command[0]
                if group not in groups:
                    text = GROUPS[group]
                    g = sub.add_parser(group, help=text, description=text)
                    groups[group] = g.add_subparsers(dest=f"{group}_command", metavar="ACTION", title="actions",
                                                     required=True)
                parent = groups[group]
            c = cmd(parent, spec.command[-1], spec.help)
            c.set_defaults(op=op.name)
            for param in op.params:
                if spec.params is None or param.name in spec.params:
                    _add_param(c, param, spec.command, positional=param.name in spec.positional)

    c = cmd(sub, "import", "Load a file written by `engram export` (the user's rows only), or memories "
            "from another tool with --from.")
    c.add_argument("path", help="file to read (a file or folder with --from markdown)")
    c.add_argument("--from", dest="source", choices=IMPORT_SOURCES, default="engram",
                   help="what the file is: engram (an `engram export` file, the default), mcp-memory (the "
                   "MCP memory server's memory.json), mem0 (a mem0 export), markdown (notes: headings and "
                   "bullets become memories, tagged from the path)")
    c.add_argument("--dry-run", dest="dry_run", action="store_true",
                   help="with --from: show what would be stored and what resolution would do; store nothing")
    c.add_argument("--skip-existing", dest="on_conflict", action="store_const", const="skip", default="error",
                   help="keep rows whose ids already exist and import the rest (default: refuse the file)")
    c.add_argument("--reembed", action="store_true",
                   help="accept a file embedded with another model and embed it again with this one")

    c = cmd(sub, "serve", "Run the daemon that owns the database (and optionally the HTTP API) in the "
            "foreground, until stopped (it does not exit when idle).")
    c.add_argument("--http", action="store_true", help="also serve the HTTP API and MCP over streamable HTTP")
    c.add_argument("--host", default=DEFAULT_HTTP_HOST,
                   help=f"HTTP address (default {DEFAULT_HTTP_HOST}; others need ENGRAM_TOKEN)")
    c.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, help=f"HTTP port (default {DEFAULT_HTTP_PORT})")

    c = cmd(sub, "restore", "Check a backup, stop the daemon, and put the backup in place of the DuckDB "
            "store (the current file is kept aside).")
    c.add_argument("backup", help="the backup file (from `engram backup` or ENGRAM_HOME/backups)")

    _hook_arguments(cmd(sub, "hook", HOOK_HELP))
    _add_hooks_commands(sub, common)
    cmd(sub, "stop", "Ask the running daemon to shut down, and wait until it has.")
    cmd(sub, "version", "Print the engram version.")
    return p


HOOK_HELP = ("Run one lifecycle hook of a coding agent: its event's JSON on stdin, the client's JSON on "
             "stdout (see docs/hooks.md). Always exits 0; logs to ENGRAM_HOME/hooks.log.")


def _hook_arguments(c: argparse.ArgumentParser) -> argparse.ArgumentParser:
    c.add_argument("event", help="the client's event name: SessionStart, UserPromptSubmit, PreCompact, "
                   "SessionEnd, Stop (Claude Code, Codex); SessionStart, BeforeAgent, PreCompress, "
                   "SessionEnd (Gemini CLI)")
    c.add_argument("--client", choices=("claude-code", "codex", "gemini"), default="claude-code",
                   help="which agent runs the hook (default: claude-code)")
    # Written by `hooks install` when the store is not the default one. Own dests: a subcommand's
    # default would otherwise overwrite the global --home / --user.
    c.add_argument("--home", dest="hook_home", help="data folder (default: ENGRAM_HOME or ~/.engram)")
    c.add_argument("--user", dest="hook_user", help="user whose memories to use (default: ENGRAM_USER)")
    return c


def _run_hook(a: argparse.Namespace) -> int:
    # Before the settings are read: a hook reports a bad one itself, and exits 0.
    home = getattr(a, "hook_home", None) or getattr(a, "home", None)
    if home:
        os.environ["ENGRAM_HOME"] = str(Path(home).expanduser())
    user = getattr(a, "hook_user", None) or getattr(a, "user", None)
    if user:
        os.environ["ENGRAM_USER"] = user
    from engram.hooks.run import main as hook_main
    return hook_main(a.event, a.client)


def _add_hooks_commands(sub, common: argparse.ArgumentParser) -> None:
    from engram.hooks.install import CLIENTS
    text = ("Put engram's lifecycle hooks (session start, each prompt, compaction, session end) into an "
            "agent client's settings, take them out, or show where they are.")
    g = sub.add_parser("hooks", help=text, description=text)
    actions = g.add_subparsers(dest="hooks_command", metavar="ACTION", title="actions", required=True)
    for name, verb in (("install", "Add engram's hooks to"), ("uninstall", "Remove exactly engram's hooks from")):
        t = (f"{verb} CLIENT's settings file (other settings and hooks stay as they are).")
        c = actions.add_parser(name, help=t, description=t, parents=[common])
        c.add_argument("client", choices=list(CLIENTS), help="the agent client")
        c.add_argument("--scope", choices=("project", "user"), default="user",
                       help="project: this repository's settings (.claude/, .codex/, .gemini/ at its top); "
                            "user: your own, for every project (default: user)")
        c.add_argument("--dry-run", dest="dry_run", action="store_true",
                       help="print the change as a diff and write nothing")
    t = "Show, for each client and scope, whether engram's hooks are installed and their command runs."
    actions.add_parser("status", help=t, description=t, parents=[common])


GROUPS = {"task": "Create, list, show and update tasks.",
          "keys": "Per-user keys for a team: make, list and revoke the keys HTTP clients send."}
# Presentation only the CLI has, added to the declared description of a parameter.
EXTRA_HELP = {(("remember",), "content"): "; '-' reads it from stdin"}


def _shape(t: Any) -> tuple[Any, tuple | None, bool]:
    """A declared type as (base type, choices, repeatable) for argparse; None is never typed in."""
    args = [a for a in get_args(t) if a is not type(None)] if get_origin(t) in (Union, UnionType) else [t]
    if any(get_origin(a) is list for a in args):
        return str, None, True  # a list of strings (a lone one is fine too): repeat the option
    base = args[0]
    if get_origin(base) is Literal:
        return str, get_args(base), False
    return get_origin(base) or base, None, False  # dict[str, Any] -> dict


def _add_param(c: argparse.ArgumentParser, p: Param, command: tuple[str, ...], positional: bool) -> None:
    base, choices, repeatable = _shape(p.type)
    # On unless said otherwise: the option is the way to turn it off (`--no-claim`), and its help
    # is what turning it off does.
    negated = base is bool and p.default is True and not positional
    text = p.description.rstrip(".") + EXTRA_HELP.get((command, p.name), "")
    if negated:
        text = text.removeprefix("false: ")
    if repeatable:
        text += "; repeatable"
    if not p.required and not negated and p.default not in (None, "", False):
        text += f" (default: {p.default})"
    # SUPPRESS: an option not given is left out, so the declared default applies.
    kw: dict[str, Any] = {"help": text, "default": argparse.SUPPRESS}
    if choices:
        kw["choices"] = choices
    if negated:
        c.add_argument("--no-" + p.option.removeprefix("--"), dest=p.name, action="store_false", **kw)
        return
    if base is bool:
        kw["action"] = "store_true"
    elif repeatable:
        kw["action"] = "append"
    elif base in (int, float):
        kw["type"] = base
    if positional:
        c.add_argument(p.name, **({} if p.required else {"nargs": "?"}), **kw)
    else:
        c.add_argument(p.option, dest=p.name, **({"required": True} if p.required else {}), **kw)


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


def _request(a: argparse.Namespace) -> tuple[str, dict]:
    """The Api operation and arguments a parsed command line asks for."""
    if hasattr(a, "op"):
        op = OPS[a.op]
        args = {p.name: getattr(a, p.name) for p in op.params if hasattr(a, p.name)}
        for p in op.params:
            if p.name in args and _shape(p.type)[0] is dict:
                args[p.name] = _json_option(args[p.name], p.option)
        if "path" in args:
            # Absolute: through the daemon the path is opened by another process, in another directory.
            args["path"] = str(Path(args["path"]).expanduser().resolve())
        if a.op == "migrate_store" and "://" not in args["target"] and args["target"] != ":memory:":
            args["target"] = str(Path(args["target"]).expanduser().resolve())  # as above
        if a.op == "backup_store" and args.get("dest"):
            args["dest"] = str(Path(args["dest"]).expanduser().resolve())  # as above
        if a.op == "store_memory" and args["content"] == "-":
            # The one newline that ends piped input (echo, a file's last line) is framing, not
            # text; everything before it is stored as it is.
            content = sys.stdin.read()
            args["content"] = content[:-2] if content.endswith("\r\n") else content.removesuffix("\n")
        return a.op, args
    c = a.command
    if c == "import":  # two operations, picked by --from
        path = str(Path(a.path).expanduser().resolve())  # absolute, as above
        if a.source != "engram":
            if a.on_conflict != "error" or a.reembed:
                raise CliError("--skip-existing and --reembed are for engram export files, not --from "
                               f"{a.source} (which skips what it imported before)")
            return "import_from", {"source": a.source, "path": path, "dry_run": a.dry_run}
        if a.dry_run:
            raise CliError("--dry-run needs --from (an engram export file is checked whole before it is stored)")
        return "import_memories", {"path": path, "on_conflict": a.on_conflict, "reembed": a.reembed}
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


def _indent(text: str, pad: str) -> str:
    """A multi-line memory (a handoff) with its later lines under the entry, not at column 0."""
    return text.replace("\n", "\n" + pad)


def _render_store(r: dict) -> str:
    line = f"{r['action']}: {r['memory_id']} [{r['memory_type']}] {r['content']}"
    return line + (f"\n  ({r['reason']})" if r.get("reason") else "")


def _render_recall(r: dict) -> str:
    lines = []
    for s in r.get("interrupted_sessions") or []:
        task = (s.get("task") or {}).get("name") or "no task"
        lines.append(f"! interrupted session {s['session_id']} ({s.get('client') or '?'}, {task}), "
                     f"last seen {_day(s.get('last_heartbeat'))}")
    if r.get("read_as"):
        lines.append("searched " + ", ".join(f"{w!r} as {' or '.join(cs)}" for w, cs in r["read_as"].items()))
    if not r["memories"]:
        lines.append("no memories found")
    for i, m in enumerate(r["memories"], 1):
        pin = " (latest handoff)" if m.get("pinned") else ""
        if "line" in m:  # --compact: one line each; `engram show ID` gives the full text
            lines.append(f"{i:>2}. {m['id']}  [{m['memory_type']}] {m['when']}  {m['tokens']} tokens  {m['line']}{pin}")
            continue
        lines.append(f"{i:>2}. [{m['memory_type']}] {_indent(m['content'], '    ')}{pin}")
        lines.append(f"    id {m['id']}  score {m['score']:.3f}  {_day(m.get('created_at'))}  {_where(m)}")
        if m.get("confidence"):  # strong: rely on it; weak: only plausibly related (docs/ranking.md)
            lines.append(f"    {m['confidence']}: {m.get('evidence') or ''}".rstrip(": "))
        if m.get("explain"):
            lines.append(f"    explain: {json.dumps(m['explain'])}")
    for f in r.get("related_failures") or []:
        label = f"pitfall [{f['component']}]" if f.get("component") else "pitfall"
        lines.append(f"{label}: {f.get('content', f.get('line', ''))}")
    return "\n".join(lines)


def _render_forget(r: dict) -> str:
    ids = r["would_delete"] if r["dry_run"] else r["deleted"]
    verb = "would delete" if r["dry_run"] else "deleted"
    return f"{verb} {r['count']} memor{'y' if r['count'] == 1 else 'ies'}" + \
        "".join(f"\n  {i}" for i in ids)


def _where(row: dict) -> str:
    """Which project a memory or task belongs to, as the CLI prints it."""
    return f"project {row['project']}" if row.get("project") else "global"


def _task_line(t: dict) -> str:
    goal = f" - {t['goal']}" if t.get("goal") else ""
    return f"{t['id']}  [{t['status']}]  {t['name']}{goal}  ({_where(t)})"


def _render_task_view(r: dict) -> str:
    lines = [_task_line(r["task"]), *_held_line(r)]
    for e in r.get("timeline") or []:
        lines.append(f"  {_day(e['created_at'])} [{e['memory_type']}] {_indent(e['content'], '    ')}")
    h = r.get("latest_handoff")
    if h:
        lines.append(f"latest handoff ({_day(h['created_at'])}): {h.get('summary', '')}")
        for v in h.get("next_steps_validation") or []:
            lines.append(f"  next: {v.get('step')} [{v.get('status')}]")
    if r.get("plan"):
        lines.append("plan:")
        lines.extend(_plan_lines(r["plan"]))
    return "\n".join(lines)


def _held_line(t: dict) -> list[str]:
    from engram.continuity.claims import describe_claim
    held = t.get("held_by")
    return [f"    held by {describe_claim(held)}" + (" (this session)" if held.get("this_session") else "")] \
        if held else []


def _render_claim(r: dict) -> str:
    from engram.continuity.claims import describe_claim
    line = f"claimed {r['claim']['task_id']} for {describe_claim(r['claim'])}"
    if r.get("taken_over"):
        line += f"\n  taken over from {describe_claim(r['taken_over'])} (it is told on its next call)"
    return line


def _render_tasks(r: dict) -> str:
    lines = []
    for t in r["tasks"]:
        lines.append(_task_line(t))
        lines.extend(_held_line(t))
        if t.get("last_activity"):
            la = t["last_activity"]
            lines.append(f"    last: {_day(la['at'])} [{la['memory_type']}] {_indent(la['content'][:100], '      ')}")
    return "\n".join(lines) or "no tasks"


def _render_projects(r: dict) -> str:
    lines = [f"{'*' if p['id'] == r.get('current') else ' '} {p['id']}  "
             f"{p['memories']} memor{'y' if p['memories'] == 1 else 'ies'}, "
             f"{p['tasks']} task{'' if p['tasks'] == 1 else 's'}" for p in r["projects"]]
    if r.get("current") and all(p["id"] != r["current"] for p in r["projects"]):
        lines.append(f"* {r['current']}  (this directory's; nothing stored yet)")
    return "\n".join(lines) or "no project holds anything yet (every row is global)"


def _plan_lines(plan: list[dict]) -> list[str]:
    return [f"  [{e['status']}] {e['step']}"
            + (f"  <- {e['evidence']['kind']}: {e['evidence']['text'][:80]}" if e.get("evidence") else "")
            for e in plan]


def _render_handoff(r: dict) -> str:
    return f"handoff saved: {r['handoff_id']}" + (f" (task {r['task_id']})" if r.get("task_id") else "")


def _bytes(n: Any) -> str:
    if not isinstance(n, int | float):
        return "-"
    for unit in ("bytes", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _when(iso: Any) -> str:
    """An ISO time as 'YYYY-MM-DD HH:MM UTC' (naive times are UTC, as the daemon writes them)."""
    if not iso:
        return "never"
    try:
        when = datetime.fromisoformat(str(iso))
    except ValueError:
        return str(iso)
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _counts(d: Any) -> str:
    if not isinstance(d, dict) or not d:
        return "none"
    return ", ".join(f"{k.replace('_', ' ')} {_scalar(v)}" for k, v in d.items())


def _table(rows: list[tuple[str, str]]) -> str:
    """Label and value columns, labels padded to the longest."""
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" if k else f"{'':<{width}}  {v}" for k, v in rows)


def _render_stats(r: dict) -> str:
    r = dict(r)
    rows: list[tuple[str, str]] = []
    by_type = r.pop("by_type", {})
    by_status = r.pop("by_status", {})
    active = by_status.get("active", 0) if isinstance(by_status, dict) else 0
    rows.append(("memories", f"{active:,} active of {r.pop('total', 0):,}"))
    rows.append(("", f"by type: {_counts(by_type)}"))
    rows.append(("", f"by status: {_counts(by_status)}"))
    users = r.pop("by_user", {})
    if users:
        rows.append(("users", _counts(users)))
    st = r.pop("strength", None)
    if isinstance(st, dict):
        mean = st.get("mean")
        rows.append(("strength", f"mean {mean:.2f}" if isinstance(mean, float) else "mean -"))
        rows.append(("", f"buckets: {_counts(st.get('buckets'))} (pruned below {_scalar(st.get('prune_threshold'))})"))
    fading = r.pop("fading_soon", None)
    if isinstance(fading, dict):
        rows.append(("fading soon", f"{fading.get('count', 0)} within {fading.get('within_days')} days "
                                    f"(strength below {_scalar(fading.get('below'))})"))
        for m in fading.get("memories") or []:
            rows.append(("", f"{m['id']} [{m['memory_type']}] {m['days_until_prune']:g} d left: {m['content']}"))
    captured = r.pop("captured", None)
    if isinstance(captured, dict):
        rows.append(("captured", f"automatically, without a model: {_counts(captured)}"))
    rows.append(("tasks", _counts(r.pop("tasks", {}))))
    rows.append(("sessions", _counts(r.pop("sessions", {}))))
    idx = r.pop("index", None)
    if isinstance(idx, dict):
        fresh = "fresh" if idx.get("fresh") else "stale: run `engram reindex`"
        rows.append(("index", f"{idx.get('rows', 0):,} of {idx.get('table_rows', 0):,} rows indexed ({fresh}), "
                              f"{idx.get('graph_edges', 0):,} graph edges, built {_when(idx.get('built_at'))}"))
    m = r.pop("maintenance", None)
    if isinstance(m, dict):
        rows.append(("maintenance", f"every {m.get('interval_hours', 0):g} h, next {_when(m.get('next_run'))}, "
                                    f"last {_when(m.get('last_run'))}"))
        rows.append(("", f"{m.get('runs', 0)} runs since the daemon started, {m.get('errors', 0)} errors"
                         + (f" (last: {m['last_error']})" if m.get("last_error") else "")))
    t = r.pop("totals", None)
    if isinstance(t, dict):
        rows.append(("all time", f"{t.get('runs', 0):,} maintenance runs, {t.get('consolidated', 0):,} "
                                 f"consolidated, {t.get('pruned', 0):,} pruned, last {_when(t.get('last_run'))}"))
    rows.append(("disk", _bytes(r.pop("disk_bytes", None))))
    model = r.pop("model", None)
    if isinstance(model, dict):
        rows.append(("model", f"{model.get('name')} ({model.get('dim')} dims, {model.get('backend') or '-'})"))
    out = _table(rows)
    return out + ("\n" + "\n".join(_plain(r)) if r else "")  # fields added later, as key: value


def _render_consolidate(r: dict) -> str:
    r = dict(r)
    clusters = r.pop("clusters", []) or []
    n = r.pop("consolidated", 0)
    verb = "merged" if r.get("applied") else "would merge"
    rows: list[tuple[str, str]] = [("consolidate", f"{verb} {n} memor{'y' if n == 1 else 'ies'} "
                                                   f"into {len(clusters)} cluster{'' if len(clusters) == 1 else 's'}")]
    for i, c in enumerate(clusters, 1):
        into = f" -> {c['into']}" if c.get("into") else ""
        rows.append(("", f"{i}. {len(c.get('sources') or [])} memories{into}: {c.get('preview', '')}"))
    pruned = r.pop("pruned", 0)
    rows.append(("prune", f"{'pruned' if r.get('applied') else 'would prune'} {pruned} "
                          f"({_counts(r.pop('pruned_by_reason', {}))})"))
    for mid in r.pop("pruned_ids", []) or []:
        rows.append(("", mid))
    rows.append(("protected", f"{r.pop('protected', 0)} kept although faded (pinned, open task, latest handoff)"))
    rows.append(("edges", f"{r.pop('edges_refreshed', 0)} refreshed"))
    rows.append(("compacted", "yes" if r.pop("compacted", False) else "no"))
    took = r.pop("duration_s", None)
    rows.append(("took", f"{took * 1000:,.0f} ms" if isinstance(took, int | float) else "-"))
    for k in ("applied", "user_id", "started_at", "finished_at"):
        r.pop(k, None)
    out = _table(rows)
    return out + ("\n" + "\n".join(_plain(r)) if r else "")


def _render_import_from(r: dict) -> str:
    head = "would store" if r["dry_run"] else "stored"
    actions = ", ".join(f"{k} {v}" for k, v in sorted(r["actions"].items())) or "nothing new"
    lines = [f"{r['source']} {r['path']}: {r['found']} found, {r['skipped']} imported before; "
             f"{head} {r['stored']} ({actions})"]
    for it in r["items"]:
        target = f" -> {it['target_id']}" if it.get("target_id") else ""
        tags = f" #{' #'.join(it['tags'])}" if it["tags"] else ""
        lines.append(f"  {it['action']:<9}{target} {it['content']}{tags}")
        if it["action"] != "new" and it.get("reason"):
            lines.append(f"  {'':<9} ({it['reason']})")
    return "\n".join(lines)


def _render_new_key(r: dict) -> str:
    label = f" ({r['label']})" if r.get("label") else ""
    return (f"key {r['key_id']} for user {r['user_id']}{label}:\n{r['key']}\n"
            "It is shown this once (only its hash is kept): give it to its holder now. "
            "Clients send it as 'Authorization: Bearer <key>'.")


def _render_migrate(r: dict) -> str:
    rows = [("from", r["source"]), ("to", r["target"]),
            ("copied", _counts(r["copied"]) + (f" (skipped {r['skipped']} ids it had)" if r["skipped"] else ""))]
    rows.append(("meta", ", ".join(r["meta"]) or "none"))
    rec = r["verified"]["recalls"]
    rows.append(("verified", f"row counts {r['verified']['counts']}; "
                 + (f"{rec['same']} of {rec['sampled']} sample recalls return the same top {rec['top']} ids"
                    if rec is not None else "sample recalls not compared (the target held rows before)")))
    return _table(rows)


def _render_backup(r: dict) -> str:
    return _table([("backup", r["path"]), ("size", _bytes(r["bytes"])), ("schema", f"v{r['schema_version']}"),
                   ("checked", _counts(r["counts"])), ("took", f"{r['seconds']:g} s")])


def _render_scrub(r: dict) -> str:
    counts = ", ".join(f"{r[k]} {k}" for k in ("memories", "events", "tasks", "sessions"))
    lines = [f"{'rewritten' if r['applied'] else 'would rewrite'}: {counts}"]
    lines += [f"  {c['kind']} {c['id']}: {', '.join(c['fields'])}" + (f"  {c['preview']}" if c.get("preview") else "")
              for c in r["changes"]]
    if r["backup"]:
        lines.append(f"the store as it was (secrets included; delete it once checked): {r['backup']}")
    elif not r["applied"] and any(r[k] for k in ("memories", "events", "tasks", "sessions")):
        lines.append("nothing changed: run `engram scrub --apply` to rewrite them (a copy is kept first)")
    return "\n".join(lines)


def _render_restore(r: dict) -> str:
    rows = [("restored", f"{r['path']} -> {r['restored_to']}"), ("schema", f"v{r['schema_version']}"),
            ("checked", _counts(r["counts"]))]
    if r["previous"]:
        rows.append(("previous file kept", r["previous"]))
    return _table(rows)


def _render_keys(r: dict) -> str:
    rows = [f"{k['key_id']}  {k['user_id']}  {k['label'] or '-'}  created {_when(k['created_at'])}  "
            + (f"revoked {_when(k['revoked_at'])}" if k["revoked_at"] else "active") for k in r["keys"]]
    return "\n".join(rows) or "no keys"


def _render_memory(r: dict) -> str:
    lines = [f"{r['id']} [{r['memory_type']}] {_day(r.get('created_at'))}  {_where(r)}", r["content"]]
    if r.get("around"):
        lines.append("in its session:")
        lines += [f"  {'>' if a['position'] == 0 else ' '} {a['position']:+d} {a['id']} [{a['memory_type']}] "
                  f"{a['when']}  {a['line']}" for a in r["around"]]
    return "\n".join(lines)


RENDER: dict[str, Callable[[dict], str]] = {
    "get_memory": _render_memory,
    "store_memory": _render_store,
    "recall_memory": _render_recall,
    "get_context": lambda r: r["context"],
    "forget_memory": _render_forget,
    "create_task": _task_line,
    "update_task": _task_line,
    "get_task": _render_task_view,
    "list_tasks": _render_tasks,
    "list_projects": _render_projects,
    "session_handoff": _render_handoff,
    "resume_task": lambda r: r["context"],
    "claim_task": _render_claim,
    "release_task": lambda r: f"released {r['task_id']}" if r["released"] else
    f"{r['task_id']} was not held by this session: nothing to release",
    "memory_prompt": lambda r: r["prompt"].rstrip("\n"),
    "track_progress": lambda r: f"progress saved: {r['memory_id']} {r['feature']} [{r['status']}]",
    "track_failure": _render_store,
    "session_outcome": lambda r: f"session {r['session_id']}: {r['outcome']}",
    "memory_stats": _render_stats,
    "consolidate_memory": _render_consolidate,
    "import_from": _render_import_from,
    "migrate_store": _render_migrate,
    "backup_store": _render_backup,
    "scrub_store": _render_scrub,
    "restore": _render_restore,
    "create_key": _render_new_key,
    "list_keys": _render_keys,
    "revoke_key": lambda r: f"revoked key {r['key_id']} of user {r['user_id']} at {_when(r['revoked_at'])}",
}


def _render(op: str, result: Any, as_json: bool) -> str:
    if as_json:
        return dumps(result, indent=2, ensure_ascii=False)
    fn = RENDER.get(op)
    text = fn(result) if fn else "\n".join(_plain(result))
    if isinstance(result, dict):  # what claims tell the caller, whatever the command (engram.continuity.claims)
        said = [n["message"] for n in result.get("claim_notices") or []]
        claim = result.get("claim")
        if isinstance(claim, dict) and claim.get("claimed") is False:
            said.append(claim["message"])
        text += "".join(f"\n! {m}" for m in said)
    return text


# ---------------------------------------------------------------- backends


@dataclass
class _Conn:
    """One CLI session: a call function and how to end the session cleanly."""

    call: Callable[[str, dict], Any]
    close: Callable[[], None]


# Through the daemon a command waits for the whole operation (an import, a re-embedding).
CLI_TIMEOUT = 3600.0


def _connect(settings: Settings, user: str | None, api_factory: Callable[[Settings], Any] | None,
             session: str | None = None, allow_model_change: bool = False) -> _Conn:
    if session is not None and not 1 <= len(session.strip()) <= 200:
        raise CliError("--session must be 1 to 200 characters")
    session_id = session.strip() if session else f"cli-{uuid.uuid4().hex}"
    from engram.core.project import detect_project
    project = detect_project()  # the working directory's (docs/projects.md); ENGRAM_PROJECT overrides
    proj, branch = (project.id, project.branch) if project else (None, None)
    if api_factory is None:
        from engram.server.backend import daemon_command
        from engram.server.rpc import server_running
        from engram.server.rpc_client import RpcClient
        if allow_model_change and not server_running(settings.socket_path):
            # `reindex --reembed` after changing ENGRAM_MODEL: a daemon refuses a store embedded
            # with another model, so this one command opens the store itself.
            return _in_process(settings, user, session_id, proj, branch)
        # The daemon owns the file (DuckDB allows one writer) and keeps the model loaded between
        # commands: go through it, starting it when none runs, as the stdio server does.
        client = RpcClient(settings.socket_path, spawn=daemon_command(settings), session_id=session_id,
                           client="cli", user_id=user, store=settings.store, timeout=CLI_TIMEOUT,
                           project=proj, branch=branch, version=__version__)
        return _Conn(lambda op, args: client.call(op, **args), lambda: client.close(clean=True))
    api = api_factory(settings)  # the caller keeps ownership of it
    ctx = Ctx(session_id=session_id, user_id=user, client="cli", pid=os.getpid(), project=proj, branch=branch)
    return _Conn(lambda op, args: api.call(op, args, ctx),
                 lambda: api.eng.end_session(session_id, clean=True, user_id=user))


def _in_process(settings: Settings, user: str | None, session_id: str, project: str | None,
                branch: str | None) -> _Conn:
    """An engine of this process's own, opened to re-embed a store made with another model."""
    from engram.api import Api
    from engram.engram import Engram
    eng = Engram(None, settings=settings, allow_model_change=True)  # database_url, else the file
    api = Api(eng)
    ctx = Ctx(session_id=session_id, user_id=user, client="cli", pid=os.getpid(), project=project, branch=branch)

    def close() -> None:
        try:
            eng.end_session(session_id, clean=True, user_id=user)
        finally:
            eng.close()

    return _Conn(lambda op, args: api.call(op, args, ctx), close)


def _run_call(a: argparse.Namespace, settings: Settings, api_factory) -> int:
    op, args = _request(a)
    if op == "session_outcome" and a.session is None:
        # Without --session the outcome would score this command's own new, empty session.
        raise CliError("engram outcome needs --session ID: the session whose work it scores "
                       "(the id its other commands were given)")
    # `reindex --reembed` is what the model guard tells a user to run after changing ENGRAM_MODEL,
    # so it alone opens a store embedded with another model.
    conn = _connect(settings, a.user, api_factory, a.session,
                    allow_model_change=op == "reindex" and bool(args.get("reembed")))
    try:
        result = conn.call(op, args)
    finally:
        conn.close()
    print(_render(op, result, a.json))
    if isinstance(result, dict) and result.get("degraded") and not a.json:
        # Keyword-only results look like any others: say so (on stderr, so a context block
        # piped into a prompt stays clean).
        print(f"warning: {result['degraded']}", file=sys.stderr)
    if op == "consolidate_memory" and not args.get("apply") and not a.json:
        print("(dry run: nothing changed; add --apply to make these changes)")
    if op == "import_from" and args["dry_run"] and not a.json:
        print("(dry run: nothing stored; run it again without --dry-run to import)")
    return 0


def _restore(a: argparse.Namespace, settings: Settings) -> int:
    """Check the backup, stop the daemon (it holds the file), swap the backup in.

    Runs here, not in the daemon: the daemon cannot replace the file it has open. The backup is
    checked before the daemon is stopped, so a bad one costs nothing; the next command starts a
    daemon on the restored store.
    """
    from engram.core.clock import SystemClock
    from engram.server.daemon import stop_daemon
    from engram.server.rpc import acquire_daemon_lock
    from engram.store.backup import check_backup, restore

    if settings.database_url:
        raise CliError("engram restore puts back a DuckDB file; restore a PostgreSQL database with its "
                       "own tools (pg_restore, psql; see docs/backups.md)")
    check_backup(a.backup)
    # Hold the daemon lock while the file is swapped: a client that reconnects meanwhile would
    # start a daemon on the old file, and its writes would go to the file moved aside.
    for _ in range(5):
        stop_daemon(settings)
        lock = acquire_daemon_lock(settings.socket_path)
        if lock is not None:
            break
    else:
        raise CliError("a client keeps starting the engram daemon again; stop the agents using "
                       f"{settings.home} and run engram restore again (nothing was changed)")
    try:
        result = restore(Path(a.backup).expanduser().resolve(), settings.db_path, SystemClock().now())
    finally:
        lock.close()
    print(_render("restore", result, a.json))
    return 0


def _stop(a: argparse.Namespace, settings: Settings) -> int:
    from engram.server.daemon import stop_daemon
    # Returns once the daemon released its lock, so a command run next can open the database.
    stopped = stop_daemon(settings)
    if a.json:
        print(json.dumps({"stopped": stopped}))
    else:
        print("engram daemon stopped" if stopped else f"no engram daemon is running at {settings.socket_path}")
    return 0


def _hooks(a: argparse.Namespace) -> int:
    """The settings files of the clients, edited here: no daemon, no store."""
    from engram.hooks import install as hi
    if a.hooks_command == "status":
        return _hooks_status(a)
    try:
        settings = Settings.from_env(**({"home": Path(a.home).expanduser()} if a.home else {}))
        user = a.user or settings.user_id
        options = hi.store_options(settings.home, user)  # what the commands carry beside the event
        if a.hooks_command == "install":
            changes = hi.install(a.client, a.scope, dry_run=a.dry_run, options=options)
        else:
            changes = hi.uninstall(a.client, a.scope, dry_run=a.dry_run)
    except hi.InstallError as e:
        raise CliError(str(e)) from None
    label = hi.CLIENTS[a.client].label
    if a.json:
        print(json.dumps({"client": a.client, "scope": a.scope, "dry_run": a.dry_run,
                          "changes": [{"path": str(c.path), "diff": c.diff()} for c in changes]}, indent=2))
        return 0
    for c in changes:
        print(c.diff(), end="")
    done = "installed" if a.hooks_command == "install" else "removed"
    if not changes:
        state = "already installed" if done == "installed" else "none installed"
        print(f"engram's {label} hooks: nothing to change ({state})")
    elif a.dry_run:
        print("(dry run: nothing written)")
    else:
        print(f"engram's {label} hooks {done}: {', '.join(str(c.path) for c in changes)}")
    if done == "installed" and changes:
        # The client runs hooks with its own environment: say which store they will use.
        if options:
            print(f"They act on the store in {settings.home}" + (f", as user {user}" if user != "default" else "")
                  + ": give the MCP server the same ENGRAM_HOME (engram-setup prints its entry).")
        else:
            print(f"They act on the default store ({settings.home}), or on the one ENGRAM_HOME names "
                  "where the client runs.")
        if settings.database_url:
            print("ENGRAM_DATABASE_URL is not written into the client's settings (it may hold a password): "
                  "the hooks reach PostgreSQL only where the client runs with it set.")
        if a.client == "codex" and not a.dry_run:
            print(codex_trust_note(a.scope))
    return 0


def _hooks_status(a: argparse.Namespace) -> int:
    from engram.hooks import install as hi
    rows = hi.status()
    if a.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        if r.get("error"):
            state = f"unreadable: {r['error']}"
        elif not r["installed"]:
            state = "not installed"
        else:
            state = f"installed ({', '.join(r['events'])})"
            if r.get("plugin"):
                state += f" by the plugin {r['plugin']}"
            if r["missing_events"]:
                state += f"; missing {', '.join(r['missing_events'])}: run `engram hooks install " \
                         f"{r['client']} --scope {r['scope']}`"
            if r["runnable"] is False:
                state += f"; its command does not run any more: {r['commands'][0]}"
            if "feature_flag" in r and r["feature_flag"] is not True:  # Codex runs no hook without it
                state += "; [features] hooks is not true in config.toml: Codex runs none of them"
            store = r["store"] or {}
            state += f"\n  store: {store.get('home') or 'ENGRAM_HOME where the client runs, else ~/.engram'}"
            if store.get("user"):
                state += f", user {store['user']}"
        print(f"{hi.CLIENTS[r['client']].label:<12} {r['scope']:<8} {r['path']}\n  {state}")
    return 0


def codex_trust_note(scope: str) -> str:
    """What Codex asks before it runs the hooks install wrote (tests/e2e/test_codex_cli.py)."""
    note = ("Codex runs a hook only once you trust it, and skips an untrusted one without a word (codex "
            "exec too): open Codex, type /hooks and trust engram's (again after a reinstall changes them).")
    if scope == "project":
        note += ("\nCodex reads a project's .codex/ only once you trust the project itself (its prompt "
                 "when you first open Codex there, or codex exec --trust).")
    return note


# ---------------------------------------------------------------- entry point


def main(argv: list[str] | None = None, *, api_factory: Callable[[Settings], Any] | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 error, 2 usage).

    `api_factory(settings) -> Api` replaces opening the database (tests inject an
    Api over an in-memory Engram); the caller keeps ownership of it.
    """
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["hook"]:
        # A client runs this at every prompt: parse it alone rather than build every command's parser.
        return _run_hook(_hook_arguments(argparse.ArgumentParser(prog="engram hook", description=HOOK_HELP))
                         .parse_args(args[1:]))
    a = build_parser().parse_args(argv)
    if a.command == "hook":
        return _run_hook(a)
    from engram.server.rpc import RpcError
    try:
        overrides: dict[str, Any] = {"home": Path(a.home).expanduser()} if a.home else {}
        if a.database_url:
            overrides["database_url"] = a.database_url
            # A daemon this command starts inherits the environment (not argv: `ps` shows argv).
            os.environ["ENGRAM_DATABASE_URL"] = a.database_url
        settings = Settings.from_env(**overrides)
        if a.command is None:
            from engram.server.backend import stdio_client
            client = stdio_client(settings)  # reaches for the daemon while the MCP SDK imports
            from engram.server.mcp import run_stdio
            run_stdio(settings, client)
            return 0
        if a.command == "version":
            print(json.dumps({"version": __version__}) if a.json else f"engram {__version__}")
            return 0
        if a.command == "serve":
            from engram.server.daemon import run_daemon
            # Started by hand in the foreground: it stays until stopped, idle or not.
            code = run_daemon(settings, http=a.http, host=a.host, port=a.port, idle_exit=False)
            return code if isinstance(code, int) else 0
        if a.command == "stop":
            return _stop(a, settings)
        if a.command == "restore":
            return _restore(a, settings)
        if a.command == "hooks":
            return _hooks(a)
        return _run_call(a, settings, api_factory)
    except (EngramError, RpcError, CliError, ValueError, OSError) as e:
        # EngramError covers NotFound, ModelUnavailable, DatabaseLocked; ValueError bad ENGRAM_* values.
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
