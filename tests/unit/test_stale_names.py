"""Nothing stale: every module the package's docstrings and comments, pyproject.toml and docs/ name exists.

Three shapes of name are read, each by a rule that an ordinary word cannot meet:

- a path ending in .py, .md or .sh (`engram/store/sql.py`, `docs/ranking.md`, `sql_tasks.py`). One with a
  directory resolves against the repository, the package or the text's own directory. A bare file name in
  the package resolves against the module's own directory or the package's root, so "tasks.py" written in
  engram/store/ means engram/store/tasks.py, not engram/continuity/tasks.py (a docstring names a sibling by
  its bare name, anything farther by its path); in docs/ and pyproject.toml, whose tables list files by
  their names, it must be the name of a file of the repository. FOREIGN lists the other projects' files
  and the examples the texts quote.
- a dotted name from the package's root (`engram.store.sql`, `engram.core.settings.setting`): its longest
  prefix that is a module, then a name that module binds.
- a bare dotted name `a.b` (`sql.delete_memories`, `retrieve.rerank_hits`) is a module reference when
  (1) `a` is the name of one of the package's modules or subpackages: then that module binds `b` (as a
  name, an attribute or a key it writes: `settings.token` is Settings' field); or (2) `b` is a class,
  function or constant some module defines at its top level while `a` is no module of the package: then
  the name is stale, unless `a` is a name the code itself uses (a variable, a parameter, an imported
  module or name: `eng.recall`, `json.dumps`, `timezone.utc`), in which case only a class or a constant
  (`config.Settings`) still counts. docs/ and pyproject.toml get only (2): their `a.b` are as often a
  JSON field (`maintenance.held_elsewhere`).
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "engram"
# File kinds a path may name; other extensions (.json, .toml, .rs) are data or other projects' files.
PATH = re.compile(r"(?<![\w./~$-])((?:[\w-]+/)*[\w-]+\.(?:py|md|sh))\b(?![\w/-])")
DOTTED = re.compile(r"(?<![\w./@\[-])(engram(?:\.\w+)+)")
BARE = re.compile(r"(?<![\w./@:\[-])([a-z_][a-z0-9_]*)\.([A-Za-z_]\w*)(?![\w-]*[:/@])")
# A bare dotted name whose second part is one of these is a file name (`x.py`, `index.html`).
EXTENSIONS = {"py", "md", "sh", "json", "toml", "js", "mjs", "ts", "html", "css", "txt", "yaml", "yml"}
# ... or of a file engram writes: engram.sock, engram.lock, hooks.log, memories.duckdb, engram.dump.
EXTENSIONS |= {"sock", "lock", "log", "duckdb", "db", "wal", "dump"}
# Files of other projects (the agents' instruction files) and the examples docstrings quote.
FOREIGN = {
    "CLAUDE.md",
    "AGENTS.md",
    "GEMINI.md",
    "SKILL.md",
    "x.py",
    "a.py",
    "deploy.sh",
    "parser_v2.py",
    "reference.md",
    "manage.py",
    "split.py",
    "test_money.py",
    "gcode.py",
    "test_gcode.py",
}
URL = re.compile(r"\w+://\S+|\b[\w-]+(?:\.[\w-]+)+\.(?:com|org|io|dev|net)\S*")


@dataclass(frozen=True)
class Text:
    """One piece of prose to check: where it is (file and line) and the directory its bare names start from."""

    file: Path
    line: int
    body: str


def package_texts() -> list[Text]:
    """The docstrings and comments of every module of the package."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                out.append(Text(path, tok.start[0], tok.string))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    out.append(Text(path, node.body[0].lineno, doc))
    return out


def file_texts() -> list[Text]:
    """pyproject.toml and every page of docs/, line by line."""
    files = [ROOT / "pyproject.toml", *sorted((ROOT / "docs").rglob("*.md"))]
    return [Text(f, n, line) for f in files for n, line in enumerate(f.read_text().splitlines(), 1)]


@cache
def bound_names(module: Path) -> frozenset[str]:
    """Every name a module binds anywhere: its functions, classes, assignments (a class's fields and
    `self.x` too) and imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name | ast.arg):
            names.add(node.id if isinstance(node, ast.Name) else node.arg)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)  # a key the module writes: "held_elsewhere": ...
    return frozenset(names)


@cache
def top_level_names() -> frozenset[str]:
    """The classes, functions and constants the package's modules define at their top level."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {t.id for t in targets if isinstance(t, ast.Name) and len(t.id) > 1}
    return frozenset(names)


@cache
def code_names() -> frozenset[str]:
    """The names the package's code uses for values: variables, parameters, attributes it sets, the
    modules and names it imports, and the standard library's modules (`json.dumps`, `eng.recall`,
    `timezone.utc` name those, even where a module has a `dumps` of its own)."""
    names = set(sys.stdlib_module_names)
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name | ast.arg):
                names.add(node.id if isinstance(node, ast.Name) else node.arg)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.alias) and not (node.name.startswith("engram") and not node.asname):
                names.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return frozenset(names - {"engram"} - set(modules_named()))


@cache
def modules_named() -> dict[str, list[Path]]:
    """File name without .py (or a package's directory name) -> the modules (a package's files) so named."""
    out: dict[str, list[Path]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "__init__.py":
            out.setdefault(path.parent.name, []).extend(path.parent.rglob("*.py"))
        else:
            out.setdefault(path.stem, []).append(path)
    return out


def module_of(dotted: list[str]) -> tuple[Path | None, list[str]]:
    """The longest prefix of engram.a.b.c that is a module or package, and the rest."""
    for cut in range(len(dotted), 0, -1):
        base = ROOT.joinpath(*dotted[:cut])
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py"), dotted[cut:]
        if (base / "__init__.py").is_file():
            return base / "__init__.py", dotted[cut:]
    return None, dotted


@cache
def repository_file_names() -> frozenset[str]:
    """The names of the repository's files (the hidden directories, the venv and caches aside)."""
    return frozenset(
        p.name for p in ROOT.rglob("*") if not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
    )


def stale_path(name: str, text: Text) -> bool:
    if Path(name).name in FOREIGN:
        return False
    here = text.file.parent
    if "/" in name:
        return not any((base / name).exists() for base in (ROOT, PACKAGE, here))
    if text.file.is_relative_to(PACKAGE):
        return not any((base / name).exists() for base in (here, PACKAGE))
    return name not in repository_file_names()


def stale_dotted(name: str) -> bool:
    module, rest = module_of(name.split("."))
    if module is None:
        return True
    if not rest:
        return False
    if module.name == "__init__.py" and (module.parent / rest[0]).with_suffix(".py").is_file():
        return False
    return rest[0] not in bound_names(module)


def stale_bare(module: str, attr: str, known_modules: bool) -> bool:
    """Whether `module.attr` names a module, or a module's name, that does not exist (rules (1) and (2)
    above; (1) only with known_modules)."""
    named = modules_named().get(module)
    if named is None:
        if attr not in top_level_names():
            return False
        return module not in code_names() or attr[0].isupper()
    return known_modules and not any(attr in bound_names(m) or m.stem == attr for m in named)


def stale_names(text: Text) -> list[str]:
    """The stale module names in one text, each as `file:line: name`."""
    body = URL.sub(" ", text.body)
    found = [m.group(1) for m in PATH.finditer(body) if stale_path(m.group(1), text)]
    found += [
        m.group(1)
        for m in DOTTED.finditer(body)
        if m.group(1).rsplit(".", 1)[1] not in EXTENSIONS and stale_dotted(m.group(1))
    ]
    found += [
        m.group(0)
        for m in BARE.finditer(body)
        if m.group(1) != "engram"
        and m.group(2) not in EXTENSIONS
        and stale_bare(m.group(1), m.group(2), text.file.is_relative_to(PACKAGE))
    ]
    where = text.file.relative_to(ROOT)
    return [f"{where}:{text.line}: {name}" for name in found]


def test_every_module_the_package_and_docs_name_exists():
    stale = [s for text in package_texts() + file_texts() for s in stale_names(text)]
    assert stale == []


@pytest.mark.parametrize(
    "planted",
    [
        "The second stage (retrieve.rerank_hits) reads the pairs.",  # a module the move deleted
        "see lexical.BM25Index.ideal_score",  # a class that lives on, under a module that does not
        "Its statements live in tasks.py.",  # store/tasks.py is gone; continuity/tasks.py is no excuse
        "the known secret formats (engram/redact.py)",
        "engram.store.transfer moves the rows",
        "engram.core.settings.no_such_setting",
        "the late stage (ranking.no_such_stage)",
        "the defaults declared in config.Settings",  # `config` is a variable elsewhere: a class still counts
    ],
)
def test_a_planted_stale_name_is_flagged(planted):
    assert stale_names(Text(PACKAGE / "store" / "sql.py", 1, planted)) != []


@pytest.mark.parametrize(
    "live",
    [
        "Every statement here (and in sql_tasks.py) is written with `?`",
        "the pairs (ranking.rerank_hits) and engram/models/reranker.py",
        "engram.core.settings.setting returns a field; engram.store is the package",
        "e.g. the file, i.e. the row; settings.token; eng.path; os.environ; json.dumps; timezone.utc",
        "eng.capture_conventions(prompts); config.setting; engram.sock, hooks.log and CLAUDE.md",
        "postgres://deploy:x@db.internal:5432/app and git@github.com:Me/Repo.git",
        'a stack line: File "x.rs", line 3; np.ndarray',
    ],
)
def test_live_names_and_ordinary_words_pass(live):
    assert stale_names(Text(PACKAGE / "store" / "sql.py", 1, live)) == []
