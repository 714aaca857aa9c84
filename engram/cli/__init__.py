"""The `engram` command: each subcommand parses input, makes one Api call and renders the result.

With no command it runs the stdio MCP server. Every other command goes through the daemon's
socket, starting the daemon when none runs, so this process never loads the embedding model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engram import __version__
from engram.cli.calls import CliError, run_call
from engram.cli.commands import run_doctor, run_hook, run_hooks, run_restore, run_stop
from engram.cli.parser import HOOK_HELP, build_parser, hook_arguments
from engram.core.settings import Settings
from engram.core.types import EngramError

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None, *, api_factory: Callable[[Settings], Any] | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 error, 2 usage).

    `api_factory(settings) -> Api` replaces opening the database (tests inject an
    Api over an in-memory Engram); the caller keeps ownership of it.
    """
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["hook"]:
        # A client runs this at every prompt: parse it alone rather than build every command's parser.
        return run_hook(
            hook_arguments(argparse.ArgumentParser(prog="engram hook", description=HOOK_HELP)).parse_args(args[1:])
        )
    a = build_parser().parse_args(argv)
    if a.command == "hook":
        return run_hook(a)
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
            return run_stop(a, settings)
        if a.command == "restore":
            return run_restore(a, settings)
        if a.command == "hooks":
            return run_hooks(a)
        if a.command == "doctor":
            return run_doctor(a, settings, api_factory)
        return run_call(a, settings, api_factory)
    except (EngramError, RpcError, CliError, ValueError, OSError) as e:
        # EngramError covers NotFound, ModelUnavailable, DatabaseLocked; ValueError bad ENGRAM_* values.
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
