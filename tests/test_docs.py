"""Documentation checks: every command and option has help, and the README covers commands, settings, routes."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from engram import cli, setup
from engram.config import SETTINGS
from engram.server.http import OPS

README = Path(__file__).resolve().parents[1] / "README.md"


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


def settings_table(body: str) -> dict[str, str]:
    """{variable: default} from the README settings table; a row may pair names and defaults ("A / B")."""
    table = {}
    for row in re.findall(r"^\|(.+)\|$", body, re.MULTILINE):
        cells = [c.strip() for c in row.split("|")]
        names = re.findall(r"`(ENGRAM_[A-Z0-9_]+)`", cells[0])
        defaults = [d.strip().strip("`") for d in cells[1].split(" / ")] if len(cells) > 1 else []
        if names and len(defaults) == len(names):
            table.update(zip(names, defaults))
        else:
            table.update((n, "?") for n in names)  # names without a matching default each
    return table


def same_default(shown: str, declared: str) -> bool:
    try:
        return float(shown) == float(declared)
    except ValueError:
        return shown == declared


def test_readme_documents_every_setting():
    body = section("Settings|Configuration")
    if body is None:
        pytest.skip("README.md has no '## Settings' or '## Configuration' section yet")
    table = settings_table(body)
    assert "ENGRAM_HOME" in table
    missing = [s.env for s in SETTINGS if s.env not in table]
    assert not missing, f"README settings section does not mention: {', '.join(missing)}"
    wrong = [f"{s.env}: README says {table[s.env]!r}, engram/config.py {s.shown_default()!r}"
             for s in SETTINGS if not same_default(table[s.env], s.shown_default())]
    assert not wrong, f"README settings table gives other defaults: {'; '.join(wrong)}"
    unknown = sorted(set(table) - {s.env for s in SETTINGS})
    assert not unknown, f"README settings table names variables engram does not read: {', '.join(unknown)}"


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


def test_the_quick_start_leaves_the_clone_clean():
    """scripts/demo.sh keeps its store in the clone (README quick start): git must ignore it, or
    a `git add -A` after the demo commits a database, a model cache and a daemon log."""
    root = README.parent
    demo = (root / "scripts" / "demo.sh").read_text()
    home = re.search(r'ENGRAM_HOME="\$\{ENGRAM_HOME:-\$ROOT/([^}"]+)\}"', demo).group(1)
    ignored = [line.strip() for line in (root / ".gitignore").read_text().splitlines()]
    assert f"{home.rstrip('/')}/" in ignored
