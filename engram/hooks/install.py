"""`engram hooks install/uninstall/status`: engram's lifecycle hooks in each client's own settings file.

Every entry engram writes runs `<this engram> hook EVENT --client CLIENT` (behind `/bin/sh
<engram/hooks/detach.sh>` for the end of a turn in Codex and Gemini CLI), which is how uninstall and
status recognise it: nothing else in the file is read for meaning, moved or rewritten. The schemas
written here, from each client's documentation and source:

- Claude Code: `.claude/settings.json` / `~/.claude/settings.json` (`$CLAUDE_CONFIG_DIR` if set),
  `{"hooks": {EVENT: [{"matcher"?, "hooks": [{"type": "command", "command", "timeout" (seconds)}]}]}}`
  (https://docs.claude.com/en/docs/claude-code/hooks, "Configuration" and "Structure").
- Codex: `hooks.json` beside its config.toml (`.codex/` of the project, or `$CODEX_HOME`, default
  `~/.codex`), `{"hooks": {EVENT: [{"matcher"?, "hooks": [{"type": "command", "command",
  "timeout" (seconds), "statusMessage"?}]}]}}`, no other top-level key (openai/codex
  codex-rs/config/src/hook_config.rs `HooksFile`, `HookEventsToml`, whose unknown event keys an
  older release ignores; discovery in codex-rs/hooks/src/engine/discovery.rs `load_hooks_json`), and
  the `[features] hooks` flag in config.toml (codex-rs/features/src/lib.rs, key "hooks"; stable and on
  by default in current releases, off in the earlier ones, so install sets it explicitly). Codex
  runs a user's hook only once it is trusted: `[hooks.state."<hooks.json>:<event>:0:0"] trusted_hash`
  in config.toml, the hash of the entry as written, which its /hooks review stores
  (discovery.rs `hook_trust_status`; tests/e2e/test_codex_cli.py trusts them the same way). Checked
  against the real Codex 0.171.0 (tests/e2e/test_codex_cli.py).
- Gemini CLI: `.gemini/settings.json` / `~/.gemini/settings.json` (`$GEMINI_CLI_HOME` replaces the
  home), `{"hooks": {EVENT: [{"matcher"?, "hooks": [{"type": "command", "command", "name"?,
  "description"?, "timeout" (milliseconds)}]}]}}` (google-gemini/gemini-cli docs/hooks/reference.md,
  "Configuration schema"; settingsSchema `HookDefinitionArray`).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from engram.hooks.plugins import DETACH, engram_words, is_engram_hook, plugin_hooks
from engram.hooks.settings_files import InstallError, codex_feature, dump_like, read_json

__all__ = ["CLIENTS", "Change", "InstallError", "hook_command", "install", "status", "uninstall"]

Scope = Literal["project", "user"]


@dataclass(frozen=True)
class Event:
    name: str  # the client's event name, which is also what `engram hook` is given
    timeout_s: int  # the most the client waits; the hook itself answers well within it
    matcher: str | None = None
    # Run without the client waiting: Claude Code's `"async": true` (2.1.x: "hook runs in
    # background without blocking"); Codex and Gemini CLI have no such option and wait for every
    # hook, so there the command goes through detach.sh, which returns before Python starts.
    # Only for events whose output engram never writes (they capture, or checkpoint and capture).
    background: bool = False


@dataclass(frozen=True)
class Client:
    name: str
    label: str
    events: tuple[Event, ...]
    timeout_unit_ms: bool  # Gemini counts hook timeouts in milliseconds, the others in seconds
    extra: tuple[tuple[str, str], ...] = ()  # fields other than type/command/timeout, per handler

    def settings_path(self, scope: Scope, cwd: Path) -> Path:
        if self.name == "claude-code":
            if scope == "project":
                return project_root(cwd) / ".claude" / "settings.json"
            return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / "settings.json"
        if self.name == "codex":
            return codex_dir(scope, cwd) / "hooks.json"
        if scope == "project":
            return project_root(cwd) / ".gemini" / "settings.json"
        return Path(os.environ.get("GEMINI_CLI_HOME") or Path.home()) / ".gemini" / "settings.json"


# Session start loads the task, each prompt recalls, compaction and the end checkpoint the session,
# the end of each turn (Claude Code's and Codex's Stop, Gemini CLI's AfterAgent) captures it.
# Codex checkpoints at Stop (the end of each turn) and at SessionEnd (0.171; an older release ignores
# the key), which it clamps to 3 s and kills after. Stop runs in the background (detach.sh), so at
# the end of `codex exec` the two checkpoint the same transcript side by side: whichever comes first
# stores it and the other stores nothing new; SessionEnd adds a turn interrupted before its Stop.
CLIENTS: dict[str, Client] = {
    c.name: c
    for c in (
        Client(
            "claude-code",
            "Claude Code",
            (
                Event("SessionStart", 30),
                Event("UserPromptSubmit", 10),
                # SessionEnd's budget is 1.5 s unless a hook asks for more with its own timeout.
                Event("PreCompact", 60),
                Event("SessionEnd", 60),
                Event("Stop", 60, background=True),
            ),
            timeout_unit_ms=False,
        ),
        Client(
            "codex",
            "Codex",
            (
                Event("SessionStart", 30),
                Event("UserPromptSubmit", 10),
                Event("PreCompact", 60),
                Event("Stop", 60, background=True),
                Event("SessionEnd", 3),
            ),
            timeout_unit_ms=False,
        ),
        # Not PreCompress: Gemini CLI 0.61 fires it before every model call, ahead of its own check of
        # whether to compress (ChatCompressionService.compress), so it would add a checkpoint's wait to
        # each turn and report a compaction that did not happen. SessionEnd checkpoints the session.
        Client(
            "gemini",
            "Gemini CLI",
            (
                Event("SessionStart", 30),
                Event("BeforeAgent", 10),
                Event("SessionEnd", 60),
                Event("AfterAgent", 30, background=True),
            ),
            timeout_unit_ms=True,
        ),
    )
}

# How the user removes a plugin that carries engram's hooks, to install them by hand instead.
REMOVE_PLUGIN = {
    "claude-code": "claude plugin uninstall {}",
    "codex": "codex plugin remove {}",
    "gemini": "gemini extensions uninstall {}",
}


def project_root(cwd: Path) -> Path:
    """The repository's top folder (where the client looks for project settings), else cwd."""
    import subprocess  # here and below: `engram hook`, run at every prompt, builds the parser that imports this

    try:
        out = subprocess.run(
            ["git", "-C", str(cwd), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return cwd
    return Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else cwd


def codex_dir(scope: Scope, cwd: Path) -> Path:
    if scope == "project":
        return project_root(cwd) / ".codex"
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


# ---------------------------------------------------------------- the command written


def engram_argv() -> list[str]:
    """How to run this installation's engram from any directory, whatever the client's PATH."""
    script = Path(sys.executable).parent / "engram"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "engram.cli"]


def hook_command(client: str, event: str, argv: list[str] | None = None, options: Sequence[str] = ()) -> str:
    """The handler's command line; `options` (store_options) name the store the hook acts on."""
    return shlex.join([*(argv or engram_argv()), "hook", event, "--client", client, *options])


def store_options(home: Path | None, user: str | None) -> list[str]:
    """What a hook needs on its command line to reach the store the installing user meant: the
    client runs hooks with its own environment, which may lack the ENGRAM_HOME or ENGRAM_USER the
    MCP server was configured with (engram-setup prints them into the server's entry only). The
    defaults are left out, so a default install reads the same as before."""
    from engram.core.settings import Settings

    default = Settings()
    out: list[str] = []
    if home is not None and Path(home).expanduser() != default.home:
        out += ["--home", str(Path(home).expanduser())]
    if user and user != default.user_id:
        out += ["--user", user]
    return out


def _handler(client: Client, event: Event, argv: list[str] | None, options: Sequence[str]) -> dict[str, Any]:
    command = hook_command(client.name, event.name, argv, options)
    if event.background and client.name != "claude-code":
        command = f"{shlex.join(['/bin/sh', str(DETACH)])} {command}"
    h: dict[str, Any] = {"type": "command", "command": command}
    if client.name == "gemini":
        h["name"] = f"engram-{event.name}"
        h["description"] = "engram: task continuity and memory"
    h["timeout"] = event.timeout_s * 1000 if client.timeout_unit_ms else event.timeout_s
    if event.background and client.name == "claude-code":
        h["async"] = True
    if client.name == "codex" and event.name == "SessionStart":
        h["statusMessage"] = "engram: loading the task"
    return h


def _group(client: Client, event: Event, argv: list[str] | None, options: Sequence[str]) -> dict[str, Any]:
    g: dict[str, Any] = {} if event.matcher is None else {"matcher": event.matcher}
    g["hooks"] = [_handler(client, event, argv, options)]
    return g


# ---------------------------------------------------------------- engram's entries


def _strip_engram(hooks: dict[str, Any], client: str) -> bool:
    """Remove engram's handlers of this client; drop the groups and events left empty by that."""
    removed = False
    for event in list(hooks):
        groups = hooks[event]
        kept = []
        for g in groups:
            inner = g.get("hooks") if isinstance(g, dict) else None
            if not isinstance(inner, list):
                kept.append(g)
                continue
            rest = [h for h in inner if not (isinstance(h, dict) and is_engram_hook(h.get("command"), client))]
            if len(rest) == len(inner):
                kept.append(g)
                continue
            removed = True
            if rest:
                kept.append({**g, "hooks": rest})
        if len(kept) != len(groups):
            removed = True
        if kept:
            hooks[event] = kept
        elif groups:  # emptied by us (an event the user left empty stays)
            del hooks[event]
        else:
            hooks[event] = kept
    return removed


def _engram_groups(hooks: dict[str, Any], client: str) -> dict[str, list[dict]]:
    """Engram's handlers of this client per event, as they are in the file."""
    found: dict[str, list[dict]] = {}
    for event, groups in hooks.items():
        for g in groups:
            for h in handlers if isinstance(g, dict) and isinstance(handlers := g.get("hooks"), list) else []:
                if isinstance(h, dict) and is_engram_hook(h.get("command"), client):
                    found.setdefault(event, []).append(g)
    return found


def _installed(data: dict[str, Any], client: Client, argv: list[str] | None, options: Sequence[str]) -> dict[str, Any]:
    """`data` with exactly engram's current entries for this client (the rest untouched)."""
    hooks = data.get("hooks", {})
    wanted = {e.name: _group(client, e, argv, options) for e in client.events}
    have = _engram_groups(hooks, client.name)
    if have.keys() == wanted.keys() and all(have[k] == [wanted[k]] for k in wanted):
        return data  # already as install writes it: the file is not rewritten
    hooks = json.loads(json.dumps(hooks))  # a copy: the caller's dict is what the file said
    _strip_engram(hooks, client.name)
    for name, group in wanted.items():
        hooks.setdefault(name, []).append(group)
    return {**data, "hooks": hooks}


def _uninstalled(data: dict[str, Any], client: Client) -> dict[str, Any]:
    if "hooks" not in data:
        return data
    hooks = json.loads(json.dumps(data["hooks"]))
    if not _strip_engram(hooks, client.name):
        return data
    out = dict(data)
    if hooks:
        out["hooks"] = hooks
    else:
        del out["hooks"]
    return out


# ---------------------------------------------------------------- the commands


@dataclass(frozen=True)
class Change:
    """One file a command changes: its path, text before (None: absent) and after (None: deleted)."""

    path: Path
    before: str | None
    after: str | None

    def diff(self) -> str:
        import difflib

        a = (self.before or "").splitlines(keepends=True)
        b = (self.after or "").splitlines(keepends=True)
        name = str(self.path)
        return "".join(
            difflib.unified_diff(
                a, b, "/dev/null" if self.before is None else name, "/dev/null" if self.after is None else name
            )
        )

    def write(self) -> None:
        if self.after is None:
            self.path.unlink(missing_ok=True)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.engram-tmp")
        tmp.write_text(self.after, encoding="utf-8")
        if self.path.exists():
            os.chmod(tmp, self.path.stat().st_mode & 0o7777)
        os.replace(tmp, self.path)  # whole or not at all: the client never reads half a file


def _client(name: str) -> Client:
    try:
        return CLIENTS[name]
    except KeyError:
        raise InstallError(f"unknown client {name!r}; one of: {', '.join(CLIENTS)}") from None


def _plan(
    client_name: str,
    scope: Scope,
    cwd: Path | None,
    enable: bool,
    argv: list[str] | None = None,
    options: Sequence[str] = (),
) -> list[Change]:
    """Every file change install (enable) or uninstall makes, all checked before any is written."""
    client = _client(client_name)
    cwd = cwd or Path.cwd()
    path = client.settings_path(scope, cwd)
    before, data = read_json(path)
    after_data = _installed(data, client, argv, options) if enable else _uninstalled(data, client)
    changes = []
    if after_data is not data:
        after = dump_like(after_data, before) if after_data else None  # nothing left of ours: no file
        changes.append(Change(path, before, after))
    if client.name == "codex":
        toml_path = codex_dir(scope, cwd) / "config.toml"
        try:
            toml_before = toml_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            toml_before = None
        except (OSError, UnicodeDecodeError) as e:
            raise InstallError(f"cannot read {toml_path}: {e}; nothing was changed") from None
        toml_after = codex_feature(toml_before, toml_path, enable)
        if toml_after is not None:
            changes.append(Change(toml_path, toml_before, toml_after or None))
    return changes


def install(
    client: str,
    scope: Scope = "user",
    *,
    cwd: Path | None = None,
    dry_run: bool = False,
    argv: list[str] | None = None,
    options: Sequence[str] = (),
) -> list[Change]:
    """Add engram's hooks for `client`; returns the changes (written unless dry_run). `options`:
    store_options, written after each command. Refused while a plugin runs them (hooks/plugins.py)."""
    for p in plugin_hooks(_client(client).name, project_root(cwd or Path.cwd())):
        raise InstallError(
            f"engram's {CLIENTS[client].label} hooks come from the plugin {p['id']} ({p['path']}); "
            f"not adding a second copy. To manage them by hand instead, remove it first: "
            f"{REMOVE_PLUGIN[client].format(p['id'])}"
        )
    changes = _plan(client, scope, cwd, True, argv, options)
    if not dry_run:
        for c in changes:
            c.write()
    return changes


def uninstall(client: str, scope: Scope = "user", *, cwd: Path | None = None, dry_run: bool = False) -> list[Change]:
    """Remove exactly the entries install added for `client` (the rest of each file as it is)."""
    changes = _plan(client, scope, cwd, False)
    if not dry_run:
        for c in changes:
            c.write()
    return changes


def status(cwd: Path | None = None) -> list[dict[str, Any]]:
    """For each client and scope: the file, which events run engram, and whether that command runs."""
    cwd = cwd or Path.cwd()
    rows = []
    for client in CLIENTS.values():
        for scope in ("project", "user"):
            path = client.settings_path(scope, cwd)
            row: dict[str, Any] = {"client": client.name, "scope": scope, "path": str(path)}
            try:
                _, data = read_json(path)
            except InstallError as e:
                rows.append({**row, "installed": False, "error": str(e)})
                continue
            found = _engram_groups(data.get("hooks", {}), client.name)
            commands = sorted(
                {
                    h["command"]
                    for gs in found.values()
                    for g in gs
                    for h in g["hooks"]
                    if isinstance(h, dict) and is_engram_hook(h.get("command"), client.name)
                }
            )
            missing = [e.name for e in client.events if e.name not in found]
            row.update(
                installed=bool(found),
                events=sorted(found),
                missing_events=missing if found else [],
                commands=commands,
                runnable=all(_runnable(c) for c in commands) if commands else None,
                store=_store_of(commands[0]) if commands else None,
            )
            if client.name == "codex" and found:
                row["feature_flag"] = _codex_flag(codex_dir(scope, cwd) / "config.toml")
            rows.append(row)
    for client in CLIENTS.values():
        for p in plugin_hooks(client.name, project_root(cwd)):
            rows.append(
                {
                    "client": client.name,
                    "scope": "plugin",
                    "path": p["path"],
                    "plugin": p["id"],
                    "installed": True,
                    "events": p["events"],
                    "missing_events": [e.name for e in client.events if e.name not in p["events"]],
                    "commands": [],
                    "runnable": p["runnable"],
                    "store": None,
                }
            )
    return rows


def _store_of(command: str) -> dict[str, str | None]:
    """The --home and --user a hook command carries (None: the client's environment decides)."""
    words = engram_words(command) or []
    out: dict[str, str | None] = {"home": None, "user": None}
    for flag, key in (("--home", "home"), ("--user", "user")):
        if flag in words[:-1]:
            out[key] = words[words.index(flag) + 1]
    return out


def _runnable(command: str) -> bool:
    """engram's program is there, and so are the fast path's shell and script in front of it."""
    words = shlex.split(command)
    engram = engram_words(command) or [""]
    front = words[: len(words) - len(engram)]  # `/bin/sh .../detach.sh`, or nothing
    return all(os.path.isfile(w) for w in front) and os.path.isfile(engram[0]) and os.access(engram[0], os.X_OK)


def _codex_flag(path: Path) -> bool | None:
    import tomllib

    try:
        features = tomllib.loads(path.read_text(encoding="utf-8")).get("features", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return features.get("hooks") if isinstance(features, dict) else None
