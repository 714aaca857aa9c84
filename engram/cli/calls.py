"""A command that is one operation: its request from the command line, the connection (the daemon,
or an engine of this process), the call and its rendered result."""

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

from engram import __version__
from engram.cli.parser import shape
from engram.cli.render import render
from engram.core.settings import Settings
from engram.core.types import Ctx
from engram.ops import OPS


class CliError(Exception):
    """Bad input caught before any call (unreadable JSON option, stdin)."""


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
            if p.name in args and shape(p.type)[0] is dict:
                args[p.name] = _json_option(args[p.name], p.option)
        if (work_tree := op.param("path")) is not None and work_tree.default == ".":
            args.setdefault("path", ".")  # the work tree the command runs in (engram share, sync)
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
                raise CliError(
                    "--skip-existing and --reembed are for engram export files, not --from "
                    f"{a.source} (which skips what it imported before)"
                )
            return "import_from", {"source": a.source, "path": path, "dry_run": a.dry_run}
        if a.dry_run:
            raise CliError("--dry-run needs --from (an engram export file is checked whole before it is stored)")
        return "import_memories", {"path": path, "on_conflict": a.on_conflict, "reembed": a.reembed}
    raise AssertionError(f"unhandled command {c}")


@dataclass
class _Conn:
    """One CLI session: a call function and how to end the session cleanly."""

    call: Callable[[str, dict], Any]
    close: Callable[[], None]


# Through the daemon a command waits for the whole operation (an import, a re-embedding).
CLI_TIMEOUT = 3600.0


def connect(
    settings: Settings,
    user: str | None,
    api_factory: Callable[[Settings], Any] | None,
    session: str | None = None,
    allow_model_change: bool = False,
) -> _Conn:
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
        client = RpcClient(
            settings.socket_path,
            spawn=daemon_command(settings),
            session_id=session_id,
            client="cli",
            user_id=user,
            store=settings.store,
            timeout=CLI_TIMEOUT,
            project=proj,
            branch=branch,
            version=__version__,
        )
        return _Conn(lambda op, args: client.call(op, **args), lambda: client.close(clean=True))
    api = api_factory(settings)  # the caller keeps ownership of it
    ctx = Ctx(session_id=session_id, user_id=user, client="cli", pid=os.getpid(), project=proj, branch=branch)
    return _Conn(
        lambda op, args: api.call(op, args, ctx), lambda: api.eng.end_session(session_id, clean=True, user_id=user)
    )


def _in_process(
    settings: Settings, user: str | None, session_id: str, project: str | None, branch: str | None
) -> _Conn:
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


def run_call(a: argparse.Namespace, settings: Settings, api_factory) -> int:
    """A command that is one operation: call it once and print its result."""
    op, args = _request(a)
    if op == "session_outcome" and a.session is None:
        # Without --session the outcome would score this command's own new, empty session.
        raise CliError(
            "engram outcome needs --session ID: the session whose work it scores (the id its other commands were given)"
        )
    # `reindex --reembed` is what the model guard tells a user to run after changing ENGRAM_MODEL,
    # so it alone opens a store embedded with another model.
    conn = connect(
        settings, a.user, api_factory, a.session, allow_model_change=op == "reindex" and bool(args.get("reembed"))
    )
    try:
        result = conn.call(op, args)
    finally:
        conn.close()
    print(render(op, result, a.json))
    if isinstance(result, dict) and result.get("degraded") and not a.json:
        # Keyword-only results look like any others: say so (on stderr, so a context block
        # piped into a prompt stays clean).
        print(f"warning: {result['degraded']}", file=sys.stderr)
    if op == "consolidate_memory" and not args.get("apply") and not a.json:
        print("(dry run: nothing changed; add --apply to make these changes)")
    if op == "import_from" and args["dry_run"] and not a.json:
        print("(dry run: nothing stored; run it again without --dry-run to import)")
    return 0
