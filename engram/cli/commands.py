"""The commands that are not one operation: a hook, installing hooks, restore, stop, doctor."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from engram.cli.calls import CliError
from engram.cli.render import render
from engram.core.settings import Settings
from engram.core.types import EngramError


def run_hook(a: argparse.Namespace) -> int:
    """`engram hook EVENT`: one lifecycle hook, with the store --home and --user name."""
    # Before the settings are read: a hook reports a bad one itself, and exits 0.
    home = getattr(a, "hook_home", None) or getattr(a, "home", None)
    if home:
        os.environ["ENGRAM_HOME"] = str(Path(home).expanduser())
    user = getattr(a, "hook_user", None) or getattr(a, "user", None)
    if user:
        os.environ["ENGRAM_USER"] = user
    from engram.hooks.run import main as hook_main

    return hook_main(a.event, a.client)


def run_restore(a: argparse.Namespace, settings: Settings) -> int:
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
        raise CliError(
            "engram restore puts back a DuckDB file; restore a PostgreSQL database with its "
            "own tools (pg_restore, psql; see docs/backups.md)"
        )
    check_backup(a.backup)
    # Hold the daemon lock while the file is swapped: a client that reconnects meanwhile would
    # start a daemon on the old file, and its writes would go to the file moved aside.
    for _ in range(5):
        stop_daemon(settings)
        lock = acquire_daemon_lock(settings.socket_path)
        if lock is not None:
            break
    else:
        raise CliError(
            "a client keeps starting the engram daemon again; stop the agents using "
            f"{settings.home} and run engram restore again (nothing was changed)"
        )
    try:
        result = restore(Path(a.backup).expanduser().resolve(), settings.db_path, SystemClock().now())
    finally:
        lock.close()
    print(render("restore", result, a.json))
    return 0


def run_stop(a: argparse.Namespace, settings: Settings) -> int:
    """`engram stop`: ask the daemon to shut down."""
    from engram.server.daemon import stop_daemon

    # Returns once the daemon released its lock, so a command run next can open the database.
    stopped = stop_daemon(settings)
    if a.json:
        print(json.dumps({"stopped": stopped}))
    else:
        print("engram daemon stopped" if stopped else f"no engram daemon is running at {settings.socket_path}")
    return 0


def run_hooks(a: argparse.Namespace) -> int:
    """The settings files of the clients, edited here: no daemon, no store."""
    from engram.hooks import install as hi

    if a.hooks_command == "status":
        return _hooks_status(a)
    try:
        settings = Settings.from_env(home=Path(a.home).expanduser()) if a.home else Settings.from_env()
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
        print(
            json.dumps(
                {
                    "client": a.client,
                    "scope": a.scope,
                    "dry_run": a.dry_run,
                    "changes": [{"path": str(c.path), "diff": c.diff()} for c in changes],
                },
                indent=2,
            )
        )
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
            print(
                f"They act on the store in {settings.home}"
                + (f", as user {user}" if user != "default" else "")
                + ": give the MCP server the same ENGRAM_HOME (engram-setup prints its entry)."
            )
        else:
            print(
                f"They act on the default store ({settings.home}), or on the one ENGRAM_HOME names "
                "where the client runs."
            )
        if settings.database_url:
            print(
                "ENGRAM_DATABASE_URL is not written into the client's settings (it may hold a password): "
                "the hooks reach PostgreSQL only where the client runs with it set."
            )
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
                state += (
                    f"; missing {', '.join(r['missing_events'])}: run `engram hooks install "
                    f"{r['client']} --scope {r['scope']}`"
                )
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
    note = (
        "Codex runs a hook only once you trust it, and skips an untrusted one without a word (codex "
        "exec too): open Codex, type /hooks and trust engram's (again after a reinstall changes them)."
    )
    if scope == "project":
        note += (
            "\nCodex reads a project's .codex/ only once you trust the project itself (its prompt "
            "when you first open Codex there, or codex exec --trust)."
        )
    return note


def run_doctor(a: argparse.Namespace, settings: Settings, api_factory: Any) -> int:
    """`engram doctor`: the store's checks through the daemon (reaching it is the first check),
    then the hooks', from here. Exits 1 when a check found an error (a CI gate), else 0."""
    from engram.admin.doctor import finding
    from engram.cli.calls import connect
    from engram.cli.render_lifecycle import render_doctor
    from engram.hooks.checks import installation_problems
    from engram.server.rpc import RpcError

    checks, problems = ["daemon"], []
    try:
        conn = connect(settings, a.user, api_factory)
        try:
            r = conn.call("doctor", {})
        finally:
            conn.close()
        checks += r["checks"]
        problems += r["problems"]
    except (RpcError, EngramError, OSError) as e:
        problems.append(
            finding(
                "daemon",
                "error",
                f"the daemon cannot be reached or cannot open the store ({settings.store}): {e}",
                f"engram stop, then run engram stats; the daemon's log is {settings.home / 'daemon.log'}",
            )
        )
    checks.append("hooks")
    problems += installation_problems()
    errors = [p for p in problems if p["severity"] == "error"]
    report: dict[str, Any] = {"ok": not errors, "errors": len(errors), "warnings": len(problems) - len(errors)}
    report |= {"checks": checks, "problems": problems}
    print(json.dumps(report, indent=2) if a.json else render_doctor(report))
    return 1 if errors else 0
