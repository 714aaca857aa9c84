"""The `engram` command's parser: the operations' commands built from their declarations, and the others."""

from __future__ import annotations

import argparse
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from engram import __version__
from engram.core.settings import DEFAULT_HTTP_HOST, DEFAULT_HTTP_PORT
from engram.ops import OPS_LIST, Param

IMPORT_SOURCES = ("engram", "mcp-memory", "mem0", "markdown")  # engram.admin.importers.SOURCES, plus our own


def build_parser() -> argparse.ArgumentParser:
    """The parser of every `engram` command."""
    p = argparse.ArgumentParser(
        prog="engram",
        description="Long-term memory and task continuity for AI agents. "
        "Run without a command to serve MCP over stdio.",
        epilog="Commands go through the daemon that owns ENGRAM_HOME/memories.duckdb, and start it "
        "when none runs; it exits after ENGRAM_IDLE_EXIT seconds without a client.",
    )
    p.add_argument("--home", help="data folder (default: ENGRAM_HOME or ~/.engram)")
    p.add_argument(
        "--database-url",
        dest="database_url",
        help="use this PostgreSQL database (postgresql://...) instead of the DuckDB file "
        "(default: ENGRAM_DATABASE_URL)",
    )
    p.add_argument("--user", help="user whose memories to use (default: ENGRAM_USER or 'default')")
    p.add_argument("--json", action="store_true", help="print results as JSON for scripts")
    p.add_argument(
        "--session",
        help="act in this session (default: a new one per command); give every "
        "command of one agent session the same id so outcome applies to it",
    )
    p.add_argument("--version", action="version", version=f"engram {__version__}", help="print the version and exit")
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: `engram --json recall x` and `engram recall x --json` both work.
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the result as JSON for scripts"
    )
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
                    groups[group] = g.add_subparsers(
                        dest=f"{group}_command", metavar="ACTION", title="actions", required=True
                    )
                parent = groups[group]
            c = cmd(parent, spec.command[-1], spec.help)
            c.set_defaults(op=op.name)
            for param in op.params:
                if spec.params is None or param.name in spec.params:
                    _add_param(c, param, spec.command, positional=param.name in spec.positional)

    c = cmd(
        sub,
        "import",
        "Load a file written by `engram export` (the user's rows only), or memories from another tool with --from.",
    )
    c.add_argument("path", help="file to read (a file or folder with --from markdown)")
    c.add_argument(
        "--from",
        dest="source",
        choices=IMPORT_SOURCES,
        default="engram",
        help="what the file is: engram (an `engram export` file, the default), mcp-memory (the "
        "MCP memory server's memory.json), mem0 (a mem0 export), markdown (notes: headings and "
        "bullets become memories, tagged from the path)",
    )
    c.add_argument(
        "--dry-run",
        dest="dry_run",
        action="store_true",
        help="with --from: show what would be stored and what resolution would do; store nothing",
    )
    c.add_argument(
        "--skip-existing",
        dest="on_conflict",
        action="store_const",
        const="skip",
        default="error",
        help="keep rows whose ids already exist and import the rest (default: refuse the file)",
    )
    c.add_argument(
        "--reembed",
        action="store_true",
        help="accept a file embedded with another model and embed it again with this one",
    )

    c = cmd(
        sub,
        "serve",
        "Run the daemon that owns the database (and optionally the HTTP API) in the "
        "foreground, until stopped (it does not exit when idle).",
    )
    c.add_argument("--http", action="store_true", help="also serve the HTTP API and MCP over streamable HTTP")
    c.add_argument(
        "--host",
        default=DEFAULT_HTTP_HOST,
        help=f"HTTP address (default {DEFAULT_HTTP_HOST}; others need ENGRAM_TOKEN)",
    )
    c.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, help=f"HTTP port (default {DEFAULT_HTTP_PORT})")

    c = cmd(
        sub,
        "restore",
        "Check a backup, stop the daemon, and put the backup in place of the DuckDB "
        "store (the current file is kept aside).",
    )
    c.add_argument("backup", help="the backup file (from `engram backup` or ENGRAM_HOME/backups)")

    hook_arguments(cmd(sub, "hook", HOOK_HELP))
    _add_hooks_commands(sub, common)
    cmd(sub, "stop", "Ask the running daemon to shut down, and wait until it has.")
    cmd(
        sub,
        "doctor",
        "Check the store's integrity and engram's installation; print each problem with its fix "
        "and exit 1 on an error (a CI gate).",
    )
    cmd(sub, "version", "Print the engram version.")
    return p


HOOK_HELP = (
    "Run one lifecycle hook of a coding agent: its event's JSON on stdin, the client's JSON on "
    "stdout (see docs/hooks.md). Always exits 0; logs to ENGRAM_HOME/hooks.log."
)


def hook_arguments(c: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`engram hook`'s arguments, added to `c` (the whole parser's subcommand, or a parser of its own)."""
    c.add_argument(
        "event",
        help="the client's event name: SessionStart, UserPromptSubmit, PreCompact, "
        "SessionEnd, Stop (Claude Code, Codex); SessionStart, BeforeAgent, PreCompress, "
        "SessionEnd (Gemini CLI)",
    )
    c.add_argument(
        "--client",
        choices=("claude-code", "codex", "gemini"),
        default="claude-code",
        help="which agent runs the hook (default: claude-code)",
    )
    # Written by `hooks install` when the store is not the default one. Own dests: a subcommand's
    # default would otherwise overwrite the global --home / --user.
    c.add_argument("--home", dest="hook_home", help="data folder (default: ENGRAM_HOME or ~/.engram)")
    c.add_argument("--user", dest="hook_user", help="user whose memories to use (default: ENGRAM_USER)")
    return c


def _add_hooks_commands(sub, common: argparse.ArgumentParser) -> None:
    from engram.hooks.install import CLIENTS

    text = (
        "Put engram's lifecycle hooks (session start, each prompt, compaction, session end) into an "
        "agent client's settings, take them out, or show where they are."
    )
    g = sub.add_parser("hooks", help=text, description=text)
    actions = g.add_subparsers(dest="hooks_command", metavar="ACTION", title="actions", required=True)
    for name, verb in (("install", "Add engram's hooks to"), ("uninstall", "Remove exactly engram's hooks from")):
        t = f"{verb} CLIENT's settings file (other settings and hooks stay as they are)."
        c = actions.add_parser(name, help=t, description=t, parents=[common])
        c.add_argument("client", choices=list(CLIENTS), help="the agent client")
        c.add_argument(
            "--scope",
            choices=("project", "user"),
            default="user",
            help="project: this repository's settings (.claude/, .codex/, .gemini/ at its top); "
            "user: your own, for every project (default: user)",
        )
        c.add_argument(
            "--dry-run", dest="dry_run", action="store_true", help="print the change as a diff and write nothing"
        )
    t = "Show, for each client and scope, whether engram's hooks are installed and their command runs."
    actions.add_parser("status", help=t, description=t, parents=[common])


GROUPS = {
    "task": "Create, list, show and update tasks.",
    "keys": "Per-user keys for a team: make, list and revoke the keys HTTP clients send.",
}
# Presentation only the CLI has, added to the declared description of a parameter.
EXTRA_HELP: dict[tuple[tuple[str, ...], str], str] = {(("remember",), "content"): "; '-' reads it from stdin"}


def shape(t: Any) -> tuple[Any, tuple | None, bool]:
    """A declared type as (base type, choices, repeatable) for argparse; None is never typed in."""
    args = [a for a in get_args(t) if a is not type(None)] if get_origin(t) in (Union, UnionType) else [t]
    if any(get_origin(a) is list for a in args):
        return str, None, True  # a list of strings (a lone one is fine too): repeat the option
    base = args[0]
    if get_origin(base) is Literal:
        return str, get_args(base), False
    return get_origin(base) or base, None, False  # dict[str, Any] -> dict


def _add_param(c: argparse.ArgumentParser, p: Param, command: tuple[str, ...], positional: bool) -> None:
    base, choices, repeatable = shape(p.type)
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
        if not p.required:
            kw["nargs"] = "?"
        c.add_argument(p.name, **kw)
    else:
        if p.required:
            kw["required"] = True
        c.add_argument(p.option, dest=p.name, **kw)
