"""engram's hooks that come from an agent plugin (plugins/ in this repository) rather than a settings file.

Claude Code keeps installed plugins in `<config>/plugins/installed_plugins.json` (`{"version": 2,
"plugins": {"NAME@MARKETPLACE": [{"scope", "installPath", "projectPath"?, ...}]}}`, config being
`$CLAUDE_CONFIG_DIR` or `~/.claude`) and turns each on or off with `enabledPlugins` in the user's
settings.json, then the project's `.claude/settings.json` and `.claude/settings.local.json`, the
later file deciding (read from Claude Code 2.1.332 as `claude plugin install/disable/uninstall`
write them; tests/e2e/test_claude_plugin.py). A plugin's hooks are its `hooks/hooks.json`, in the
settings files' shape, with `${CLAUDE_PLUGIN_ROOT}` for the plugin's folder.

`engram hooks status` lists them, `engram hooks install claude-code` refuses to add a second copy
beside them, and `engram hook` run from a settings file does nothing while such a plugin is on,
so no event is handled twice. The plugin's launcher marks its own runs (VIA_PLUGIN).
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

__all__ = ["VIA_PLUGIN", "claude_plugins"]

VIA_PLUGIN = "ENGRAM_VIA_PLUGIN"  # set by bin/engram-launch: this hook is the plugin's own


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _config_dir() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def _enabled(project: Path | None) -> dict[str, bool]:
    """Each plugin id's enabledPlugins value, the project's files overriding the user's."""
    files = [_config_dir() / "settings.json"]
    if project is not None:
        files += [project / ".claude" / "settings.json", project / ".claude" / "settings.local.json"]
    out: dict[str, bool] = {}
    for f in files:
        data = _json(f)
        enabled = data.get("enabledPlugins") if isinstance(data, dict) else None
        if isinstance(enabled, dict):
            out.update({k: v is True for k, v in enabled.items()})
    return out


def claude_plugins(project: Path | None = None) -> list[dict[str, Any]]:
    """The enabled Claude Code plugins (user scope, or `project`'s) whose hooks run engram:
    [{id, scope, path (its hooks.json), events, runnable}]."""
    from .install import is_engram_hook
    installed = _json(_config_dir() / "plugins" / "installed_plugins.json")
    plugins = installed.get("plugins") if isinstance(installed, dict) else None
    if not isinstance(plugins, dict):
        return []
    enabled = _enabled(project)
    found = []
    for pid, installs in plugins.items():
        if not enabled.get(pid) or not isinstance(installs, list):
            continue
        for inst in installs:
            if not isinstance(inst, dict) or not isinstance(inst.get("installPath"), str):
                continue
            if inst.get("scope") in ("project", "local") and (
                    project is None or inst.get("projectPath") != str(project)):
                continue  # another project's install
            root = Path(inst["installPath"])
            hooks = _json(root / "hooks" / "hooks.json")
            hooks = hooks.get("hooks") if isinstance(hooks, dict) else None
            if not isinstance(hooks, dict):
                continue
            commands = {event: [h["command"] for g in groups if isinstance(g, dict)
                                for h in g.get("hooks", []) if isinstance(h, dict)
                                and is_engram_hook(h.get("command"), "claude-code")]
                        for event, groups in hooks.items() if isinstance(groups, list)}
            commands = {e: c for e, c in commands.items() if c}
            if commands:
                found.append({"id": pid, "scope": inst.get("scope"), "path": str(root / "hooks" / "hooks.json"),
                              "events": sorted(commands),
                              "runnable": all(_runnable(c, root) for cs in commands.values() for c in cs)})
    return found


def _runnable(command: str, root: Path) -> bool:
    exe = shlex.split(command.replace("${CLAUDE_PLUGIN_ROOT}", str(root)))[0]
    return os.path.isfile(exe) and os.access(exe, os.X_OK)
