"""Documentation checks: every command and option has help, docs/ covers commands, settings, routes and tools,
and every link in the README and docs/ leads somewhere."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from engram import cli
from engram import setup_command as setup
from engram.core.settings import SETTINGS
from engram.server.http_routes import OPS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
BENCHMARKS = ROOT / "benchmarks"


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
    return [p for p in items if not any(q[: len(p)] == p and q != p for q in items)]


@pytest.mark.parametrize("parser", [cli.build_parser(), setup.build_parser()], ids=["engram", "engram-setup"])
def test_every_command_and_option_has_help(parser):
    entries = list(walk(parser))
    assert entries
    missing = [
        f"{kind} {' '.join(path)} {name}".strip()
        for kind, path, name, text in entries
        if not text or text == argparse.SUPPRESS or not text.strip()
    ]
    assert not missing, f"no help text: {missing}"


def test_walk_sees_nested_commands():
    found = commands(cli.build_parser())
    assert ("task", "create") in found and ("remember",) in found and ("task",) not in found


def doc(name: str) -> str:
    """The text of docs/NAME; a missing page fails the test that needs it."""
    path = DOCS / name
    assert path.is_file(), f"docs/{name} is missing"
    return path.read_text(encoding="utf-8")


def test_cli_doc_documents_every_command():
    body = doc("cli.md")
    missing = [" ".join(p) for p in commands(cli.build_parser()) if f"engram {' '.join(p)}" not in body]
    assert not missing, f"docs/cli.md does not mention: {', '.join('engram ' + m for m in missing)}"


def settings_table(body: str) -> dict[str, str]:
    """{variable: default} from the settings table in docs/settings.md; a row may pair names and defaults ("A / B")."""
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


def test_settings_doc_documents_every_setting():
    body = doc("settings.md")
    table = settings_table(body)
    assert "ENGRAM_HOME" in table
    missing = [s.env for s in SETTINGS if s.env not in table]
    assert not missing, f"docs/settings.md does not mention: {', '.join(missing)}"
    wrong = [
        f"{s.env}: docs say {table[s.env]!r}, engram/core/settings.py {s.shown_default()!r}"
        for s in SETTINGS
        if not same_default(table[s.env], s.shown_default())
    ]
    assert not wrong, f"docs/settings.md gives other defaults: {'; '.join(wrong)}"
    unknown = sorted(set(table) - {s.env for s in SETTINGS})
    assert not unknown, f"docs/settings.md names variables engram does not read: {', '.join(unknown)}"


def test_http_doc_documents_every_route():
    body = doc("http.md")
    routes = [f"{s.method} {s.path}" for s in OPS] + ["GET /metrics", "GET /healthz", "GET /openapi.json"]
    missing = [r for r in routes if r not in body]
    assert not missing, f"docs/http.md does not mention: {', '.join(missing)}"


def test_mcp_doc_documents_every_tool():
    from engram.api import TOOLS
    from engram.server.mcp import TOOL_NAMES

    assert sorted(TOOLS) == sorted(TOOL_NAMES)
    body = doc("mcp.md")
    missing = [t for t in TOOL_NAMES if f"`{t}(" not in body]
    assert not missing, f"docs/mcp.md tools table does not mention: {', '.join(missing)}"


def test_the_quick_start_leaves_the_clone_clean():
    """scripts/demo.sh keeps its store in the clone (README quick start): git must ignore it, or
    a `git add -A` after the demo commits a database, a model cache and a daemon log."""
    root = README.parent
    demo = (root / "scripts" / "demo.sh").read_text()
    home = re.search(r'ENGRAM_HOME="\$\{ENGRAM_HOME:-\$ROOT/([^}"]+)\}"', demo).group(1)
    ignored = [line.strip() for line in (root / ".gitignore").read_text().splitlines()]
    assert f"{home.rstrip('/')}/" in ignored


def test_the_readme_is_short_and_its_links_and_the_docs_links_resolve():
    """The README is what a newcomer reads in five minutes; the rest is in docs/, and no link of
    either points at a file or a heading that is not there."""
    assert len(README.read_text(encoding="utf-8").splitlines()) < 250
    pages = [README, *sorted(DOCS.glob("*.md"))]
    assert len(pages) > 5
    broken = broken_links(pages + sorted(BENCHMARKS.rglob("*.md")))
    assert not broken, f"broken links: {broken}"


def broken_links(pages: list[Path]) -> list[str]:
    """Each link of these pages to a file or a heading that is not there, as `page: target`."""
    broken = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
                broken.append(f"{page.name}: {target} (no such heading)")
    return broken


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    out, fence = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"#{1,6} +(.*)", line)):
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def test_the_architecture_page_names_the_layers_of_the_architecture_test():
    # docs/architecture.md's table is the layer rule tests/unit/test_architecture.py enforces: the
    # same layers in the same order, each a folder or module that exists, and every file path the
    # page names exists, so the page cannot drift from the code.
    from tests.unit.test_architecture import LAYERS, PACKAGE

    text = doc("architecture.md")
    rows = [re.findall(r"`([^`]+)`", line.split("|")[1]) for line in text.splitlines() if line.startswith("| `")]
    named = [tuple(p.rstrip("/") for p in row) for row in rows]
    # The package's own __init__.py sits with core/ in the test's first layer; the page leaves it out.
    assert named == [tuple(p for p in layer if p != "__init__.py") for layer in LAYERS]
    folders = [PACKAGE, *(p for p in PACKAGE.iterdir() if p.is_dir())]
    for path in re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", text):
        # A path is the repository's (tests/...), the package's (store/db.py) or a layer's module
        # named inside its own row (db.py).
        found = (ROOT / path).is_file() or any((f / path).is_file() for f in folders)
        assert found, f"docs/architecture.md names {path}, which does not exist"


def test_results_open_with_todays_figures_and_name_no_machine_path():
    """benchmarks/RESULTS.md is today's figures, each with its command, date and commit, in one
    table a newcomer reads first; the sessions' logs are in HISTORY.md. A command names paths
    relative to the repository, never one machine's folders."""
    lines = (BENCHMARKS / "RESULTS.md").read_text(encoding="utf-8").splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    rows = list(range(first, end))  # the first table: today's figures (the issues' sections follow it)
    assert rows and rows[-1] < 60, "today's figures, one table, in under 60 lines"
    for line in lines[rows[0] + 2 : rows[-1] + 1]:
        *_, command, date, commit = [c.strip() for c in line.strip("|").split("|")]
        assert "`" in command or command == "the same", f"no command: {line}"
        assert re.fullmatch(r"20\d\d-\d\d-\d\d", date) and re.search(r"\b[0-9a-f]{7,}\b", commit), line
    assert "(HISTORY.md)" in "\n".join(lines)
    machine = [
        f"{page.relative_to(ROOT)}:{n}"
        for page in sorted(BENCHMARKS.rglob("*.md"))
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"(?<![\w.$])/(work|root|home|tmp)/", line)
    ]
    assert not machine, f"absolute machine paths: {machine}"


def test_testing_doc_gives_each_living_benchmark_its_command():
    """Every script left in benchmarks/ is a living benchmark with its command in docs/testing.md;
    the shared parts are not benchmarks, and experiments live in benchmarks/experiments/."""
    body = doc("testing.md")
    shared = {"__init__", "pgserver", "precision", "plain_cosine"}  # parts the benchmarks share
    living = sorted({p.stem for p in BENCHMARKS.glob("*.py")} - shared | {"locomo"})
    missing = [name for name in living if f"python -m benchmarks.{name}" not in body]
    assert not missing, f"docs/testing.md gives no command for: {missing}"
