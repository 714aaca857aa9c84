"""Documentation checks: every command and option has help, and the README covers commands, settings, routes."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from engram import cli, setup
from engram.server.http import OPS

README = Path(__file__).resolve().parents[1] / "README.md"
CONFIG = Path(cli.__file__).with_name("config.py")


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(kind, command path, name, help) for every command, positional and option in the tree."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield "command", path + (name,), name, helps.get(name)
                yield from walk(sub, path + (name,))
        elif not isinstance(action, argparse._HelpAction):
            yield "argument", path, "/".join(action.option_strings) or action.dest, action.help


def commands(parser: argparse.ArgumentParser) -> list[tuple[str, ...]]:
    """Leaf command paths, e.g. ("remember",), ("task", "create")."""
    items = [p for kind, p, _, _ in walk(parser) if kind == "command"]
    return [p for p in items if not any(q[:len(p)] == p and q != p for q in items)]


@pytest.mark.parametrize("parser", [cli.build_parser(), setup.build_parser()], ids=["engram", "engram-setup"])
def test_every_command_and_option_has_help(parser):
    entries = list(walk(parser))
    assert entries
    missing = [f"{kind} {' '.join(path)} {name}".strip() for kind, path, name, text in entries
               if not text or text == argparse.SUPPRESS or not text.strip()]
    assert not missing, f"no help text: {missing}"


def test_walk_sees_nested_commands():
    found = commands(cli.build_parser())
    assert ("task", "create") in found and ("remember",) in found and ("task",) not in found


def section(title_pattern: str) -> str | None:
    """The README section whose '## ' heading matches, up to the next '## ' heading; None if absent."""
    if not README.exists():
        return None
    text = README.read_text(encoding="utf-8")
    m = re.search(rf"^## +(?:{title_pattern})[^\n]*\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL | re.IGNORECASE)
    return m.group(1) if m else None


def test_readme_documents_every_command():
    body = section("CLI")
    if body is None:
        pytest.skip("README.md has no '## CLI' section yet (the lead writes it)")
    missing = [" ".join(p) for p in commands(cli.build_parser()) if f"engram {' '.join(p)}" not in body]
    assert not missing, f"README '## CLI' does not mention: {', '.join('engram ' + m for m in missing)}"


def test_readme_documents_every_setting():
    body = section("Settings|Configuration")
    if body is None:
        pytest.skip("README.md has no '## Settings' or '## Configuration' section yet")
    names = sorted(set(re.findall(r'"(ENGRAM_[A-Z_]+)"', CONFIG.read_text())))
    assert "ENGRAM_HOME" in names
    missing = [n for n in names if n not in body]
    assert not missing, f"README settings section does not mention: {', '.join(missing)}"


def test_readme_documents_every_http_route():
    body = section("HTTP")
    if body is None:
        pytest.skip("README.md has no '## HTTP' section yet")
    routes = [f"{s.method} {s.path}" for s in OPS] + ["GET /metrics", "GET /healthz", "GET /openapi.json"]
    missing = [r for r in routes if r not in body]
    assert not missing, f"README HTTP section does not mention: {', '.join(missing)}"


def test_readme_documents_every_mcp_tool():
    from engram.api import TOOLS
    from engram.server.mcp import TOOL_NAMES

    assert sorted(TOOLS) == sorted(TOOL_NAMES)
    body = section("Use it from an agent")
    if body is None:
        pytest.skip("README.md has no '## Use it from an agent' section yet")
    missing = [t for t in TOOL_NAMES if f"`{t}(" not in body]
    assert not missing, f"README tools table does not mention: {', '.join(missing)}"
