"""A client's settings file, edited in place and nothing else of it: a JSON settings file read only
when it is the shape engram expects and written back in its own indentation, and Codex's config.toml
given its `[features] hooks` flag as text, so the user's comments and layout stay. What engram's
entries are is engram.hooks.install's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

CODEX_FEATURE_MARK = "# added by engram hooks install"


class InstallError(Exception):
    """A settings file engram will not touch (unreadable, not JSON, not the client's shape)."""


def read_json(path: Path) -> tuple[str | None, dict[str, Any]]:
    """The file's text (None when absent) and its object; a file engram cannot read safely raises."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except (OSError, UnicodeDecodeError) as e:
        raise InstallError(f"cannot read {path}: {e}; nothing was changed") from None
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except ValueError as e:
        raise InstallError(f"{path} is not valid JSON ({e}); fix it or move it away, nothing was changed") from None
    if not isinstance(data, dict):
        raise InstallError(f"{path} holds a JSON {type(data).__name__}, not an object; nothing was changed")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise InstallError(f'{path}: "hooks" is a {type(hooks).__name__}, not an object; nothing was changed')
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise InstallError(f'{path}: "hooks.{event}" is not a list of matcher groups; nothing was changed')
    return text, data


def _indent_of(text: str | None) -> int | str:
    """The indentation the file already uses (2 spaces for a new file)."""
    for line in (text or "").splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else len(lead)
    return 2


def dump_like(data: dict[str, Any], like: str | None) -> str:
    """The object as JSON, indented as the file it replaces (`like`: its text) was."""
    return json.dumps(data, indent=_indent_of(like), ensure_ascii=False) + "\n"


def codex_feature(text: str | None, path: Path, enable: bool) -> str | None:
    """config.toml with `[features] hooks = true` added (enable) or engram's line removed; None: as is.

    Edited as text, so the user's comments and layout stay; only lines marked as engram's are removed.
    """
    import tomllib

    text = text or ""
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InstallError(f"{path} is not valid TOML ({e}); fix it or move it away, nothing was changed") from None
    lines = text.splitlines(keepends=True)
    if not enable:
        kept = [ln for ln in lines if not ln.rstrip().endswith(CODEX_FEATURE_MARK)]
        return "".join(kept) if len(kept) != len(lines) else None
    features = config.get("features", {})
    if not isinstance(features, dict):
        raise InstallError(f'{path}: "features" is not a table; nothing was changed')
    if features.get("hooks") is True:
        return None
    if "hooks" in features:
        raise InstallError(
            f"{path} turns Codex hooks off ([features] hooks = {features['hooks']!r}); set it "
            "to true yourself to use engram's hooks (nothing was changed)"
        )
    header = re.compile(r"^\s*\[\s*features\s*\]\s*(#.*)?$")
    for i, ln in enumerate(lines):
        if header.match(ln):
            lines.insert(i + 1, f"hooks = true  {CODEX_FEATURE_MARK}\n")
            return "".join(lines)
    if "features" in config:  # dotted keys or an inline table: no header to add a line under
        raise InstallError(
            f"{path} defines features without a [features] table; add hooks = true to them "
            "yourself (nothing was changed)"
        )
    sep = "" if not text or text.endswith("\n") else "\n"  # no blank line: uninstall leaves no trace
    return f"{text}{sep}[features]  {CODEX_FEATURE_MARK}\nhooks = true  {CODEX_FEATURE_MARK}\n"
