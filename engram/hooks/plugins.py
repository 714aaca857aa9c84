"""engram's hooks that come from an agent plugin (plugins/ in this repository) rather than a settings file.

Where each client keeps what is installed, read from the clients as their own install, disable and
remove commands write it (tests/e2e/test_claude_plugin.py, tests/e2e/test_codex_plugin.py,
tests/e2e/test_gemini_extension.py):

- Claude Code 2.1.332: `<config>/plugins/installed_plugins.json` (`{"version": 2, "plugins":
  {"NAME@MARKETPLACE": [{"scope", "installPath", "projectPath"?}]}}`, config being `$CLAUDE_CONFIG_DIR`
  or `~/.claude`), each on or off by `enabledPlugins` in the user's settings.json, then the project's
  `.claude/settings.json` and `.claude/settings.local.json`, the later file deciding.
- Codex 0.171: `[plugins."NAME@MARKETPLACE"] enabled = true` in `$CODEX_HOME/config.toml` (default
  `~/.codex`), the plugin under `plugins/cache/MARKETPLACE/NAME/VERSION/`.
- Gemini CLI 0.61: `~/.gemini/extensions/NAME/` (`$GEMINI_CLI_HOME` replaces the home), the extension
  itself or, once linked, `.gemini-extension-install.json` naming its folder (`{"source", "type":
  "link"}`); `extensions/extension-enablement.json` holds path globs, a `!` one turning it off there.

A plugin's hooks are its `hooks/hooks.json`, in the client's settings shape. `engram hooks status`
lists them, `engram hooks install` refuses to add a second copy beside them, and `engram hook` run
from a settings file does nothing while such a plugin is on, so no event is handled twice: the
plugin's launcher marks its own runs (VIA_PLUGIN).
"""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
from pathlib import Path
from typing import Any

__all__ = ["DETACH", "VIA_PLUGIN", "engram_words", "is_engram_hook", "plugin_hooks"]

# The fast path `engram hooks install` puts in front of a hook the client need not wait for.
DETACH = Path(__file__).with_name("detach.sh")
VIA_PLUGIN = "ENGRAM_VIA_PLUGIN"  # set by bin/engram-launch: this hook is the plugin's own
# The variable each client replaces with the plugin's folder in a hook's command.
ROOT_VARS = {"claude-code": "${CLAUDE_PLUGIN_ROOT}", "codex": "${PLUGIN_ROOT}", "gemini": "${extensionPath}"}


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def plugin_hooks(client: str, project: Path | None = None) -> list[dict[str, Any]]:
    """The enabled plugins of `client` (user-wide, or `project`'s) whose hooks run engram:
    [{id, path (its hooks.json), events, runnable}]."""
    roots = {"claude-code": _claude_roots, "codex": _codex_roots, "gemini": _gemini_roots}[client](project)
    found = []
    for pid, root in roots:
        events = _engram_events(root, client)
        if events:
            found.append(
                {
                    "id": pid,
                    "path": str(root / "hooks" / "hooks.json"),
                    "events": sorted(events),
                    "runnable": all(_runnable(c, root, client) for cs in events.values() for c in cs),
                }
            )
    return found


def _engram_events(root: Path, client: str) -> dict[str, list[str]]:
    data = _json(root / "hooks" / "hooks.json")
    hooks = data.get("hooks") if isinstance(data, dict) else None
    if not isinstance(hooks, dict):
        return {}
    events = {
        event: [
            h["command"]
            for g in groups
            if isinstance(g, dict) and isinstance(g.get("hooks"), list)
            for h in g["hooks"]
            if isinstance(h, dict) and is_engram_hook(h.get("command"), client)
        ]
        for event, groups in hooks.items()
        if isinstance(groups, list)
    }
    return {e: cs for e, cs in events.items() if cs}


def _runnable(command: str, root: Path, client: str) -> bool:
    exe = (engram_words(command.replace(ROOT_VARS[client], str(root))) or [""])[0]
    return os.path.isfile(exe) and os.access(exe, os.X_OK)


def _claude_roots(project: Path | None) -> list[tuple[str, Path]]:
    config = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
    files = [config / "settings.json"]
    if project is not None:
        files += [project / ".claude" / "settings.json", project / ".claude" / "settings.local.json"]
    enabled: dict[str, bool] = {}
    for f in files:
        data = _json(f)
        table = data.get("enabledPlugins") if isinstance(data, dict) else None
        if isinstance(table, dict):
            enabled.update({k: v is True for k, v in table.items()})
    installed = _json(config / "plugins" / "installed_plugins.json")
    plugins = installed.get("plugins") if isinstance(installed, dict) else None
    out = []
    for pid, installs in plugins.items() if isinstance(plugins, dict) else ():
        for inst in installs if enabled.get(pid) and isinstance(installs, list) else ():
            if not isinstance(inst, dict) or not isinstance(inst.get("installPath"), str):
                continue
            elsewhere = project is None or inst.get("projectPath") != str(project)
            if inst.get("scope") in ("project", "local") and elsewhere:
                continue  # another project's install
            out.append((pid, Path(inst["installPath"])))
    return out


def _codex_roots(project: Path | None) -> list[tuple[str, Path]]:
    import tomllib

    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    try:
        plugins = tomllib.loads((home / "config.toml").read_text(encoding="utf-8")).get("plugins", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    out = []
    for pid, entry in plugins.items() if isinstance(plugins, dict) else ():
        name, _, market = pid.partition("@")
        if isinstance(entry, dict) and entry.get("enabled") is True and market:
            out += [
                (pid, version)
                for version in sorted((home / "plugins" / "cache" / market / name).glob("*"))
                if version.is_dir()
            ]
    return out


def _gemini_roots(project: Path | None) -> list[tuple[str, Path]]:
    base = Path(os.environ.get("GEMINI_CLI_HOME") or Path.home()) / ".gemini" / "extensions"
    rules = _json(base / "extension-enablement.json")
    where = f"{project or Path.cwd()}/"
    out = []
    for folder in sorted(p for p in base.glob("*") if p.is_dir()):
        link = _json(folder / ".gemini-extension-install.json")
        root = (
            Path(link["source"])
            if isinstance(link, dict) and link.get("type") == "link" and isinstance(link.get("source"), str)
            else folder
        )
        overrides = rules.get(folder.name, {}).get("overrides", []) if isinstance(rules, dict) else []
        on = True
        for rule in overrides if isinstance(overrides, list) else ():
            if isinstance(rule, str) and fnmatch.fnmatch(where, rule.removeprefix("!")):
                on = not rule.startswith("!")  # the last rule that matches decides
        if on:
            out.append((folder.name, root))
    return out


def engram_words(command: Any) -> list[str] | None:
    """The words of a handler's command from the engram it runs on (`<engram> hook EVENT --client
    CLIENT ...`), past the fast path that may front it (`/bin/sh .../detach.sh`, `engram-launch
    --detach`); None when the command is not one install or a plugin wrote."""
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) > 2 and Path(words[0]).name == "sh" and Path(words[1]).name == DETACH.name:
        words = words[2:]
    if words[1:2] == ["--detach"] and Path(words[0]).name == "engram-launch":
        words = [words[0], *words[2:]]
    return words


def is_engram_hook(command: Any, client: str | None = None) -> bool:
    """Whether a handler's command is one install wrote (any engram path, any event)."""
    words = engram_words(command)
    if not words:
        return False
    if Path(words[0]).name in ("engram", "engram-launch"):  # the latter: a plugin's launcher
        rest = words[1:]  # <engram> hook EVENT --client CLIENT
    elif words[1:3] in (["-m", "engram"], ["-m", "engram.cli"]):
        rest = words[3:]  # <python> -m engram.cli hook EVENT --client CLIENT
    else:
        return False
    if len(rest) < 4 or rest[0] != "hook" or rest[2] != "--client":
        return False
    return client is None or rest[3] == client
