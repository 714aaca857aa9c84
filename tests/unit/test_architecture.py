"""Boundaries: only engram/store/ speaks SQL, the engine uses only the store's interface, and
adapters reach the database and the derived indexes through the facade."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import engram
import engram.errors
from engram.store.base import MemoryStore
from engram.store.db import Store
from engram.store.pg import PgStore  # importable without psycopg: it fails only when opened
from tests.conftest import START

PACKAGE = Path(engram.__file__).parent
# Modules of the engine: they hold the store (Engram.store_db) and call its named methods.
ENGINE = {"engram.py", "parts.py", "indexes.py", "writes.py", "recall.py", "curation.py", "sessions.py",
          "handoffs.py", "tasks.py", "maintenance.py", "transfer.py", "importers.py", "scheduler.py", "keys.py",
          "admin/scrub.py"}
# Entry points: they parse, call the facade, render. No store, no index, no graph.
ADAPTERS = {"api.py", "cli.py", "setup.py", "server"}

# SQL in a string literal: statements, WHERE fragments, conditions on a bound parameter.
SQL = [re.compile(p) for p in (
    r"\bSELECT\b[\s\S]*\bFROM\b",
    r"\bINSERT\b[\s\S]*\bINTO\b",
    r"\bUPDATE\s+\w+\s+SET\b",
    r"\bDELETE\s+FROM\b",
    r"\bWHERE\b",
    r"\w+\s*(?:=|<>|!=|<=|>=|<|>)\s*\?",
    r"\w+\s*<>\s*'",
    r"\w+\s*=\s*'[^']*'\s+(?:AND|OR)\b",
    r"\w+\s+(?:NOT\s+)?IN\s*\(\s*\?",
    r"\blist_contains\(",
)]
REACH_THROUGH = {"store_db", "index", "graph"}  # Engram attributes an adapter must not touch
# The modules Engram (engram.py) opens and delegates to: they reach each other through the
# references Engram hands them (the shared engram.parts.Parts and each other), never through
# the facade.
FACADE_PARTS = {"parts.py", "indexes.py", "writes.py", "recall.py", "curation.py", "sessions.py",
                "handoffs.py", "tasks.py"}
FACADE_MAX_LINES = 400
DELEGATE_MAX_STATEMENTS = 2  # a public method of Engram: its docstring, then at most this many statements


def modules() -> list[tuple[str, str]]:
    """(path relative to engram/, source) of every module of the package."""
    return [(p.relative_to(PACKAGE).as_posix(), p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))]


def sql_in(source: str) -> list[str]:
    """String literals that hold SQL, and calls of .execute()."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if any(p.search(node.value) for p in SQL):
                found.append(f"line {node.lineno}: SQL text {node.value[:60]!r}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("execute", "executemany", "sql"):
            found.append(f"line {node.lineno}: .{node.func.attr}() call")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            for driver in ("duckdb", "psycopg", "pgvector"):
                if any(n == driver or n.startswith(f"{driver}.") for n in names):
                    found.append(f"line {node.lineno}: imports {driver}")
    return found


def attributes(source: str, names: set[str]) -> list[str]:
    """Uses of attributes with these names (a method call like list.index() aside)."""
    tree = ast.parse(source)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return [f"line {n.lineno}: .{n.attr}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr in names and id(n) not in called]


def store_calls(source: str) -> set[str]:
    """Attributes the module uses on its store: `x.store_db.NAME`, and `db.NAME` after `db = x.store_db`."""
    tree = ast.parse(source)
    aliases = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign)
               and isinstance(n.value, ast.Attribute) and n.value.attr == "store_db"
               for t in n.targets if isinstance(t, ast.Name)}
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute):
            v = n.value
            if (isinstance(v, ast.Attribute) and v.attr == "store_db") or \
                    (isinstance(v, ast.Name) and v.id in aliases):
                out.add(n.attr)
    return out


def private_reaches(source: str) -> list[str]:
    """Uses of another object's private member (`eng._lock`): an attribute starting with one
    underscore, on anything but self or cls, that this module does not define itself (a module
    may use its own classes' privates). `os._exit` is the standard library's documented exit."""
    tree = ast.parse(source)
    own = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    own |= {t.attr for n in ast.walk(tree) if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign)
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Attribute)}
    own |= {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return [f"line {n.lineno}: {ast.unparse(n)}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
            and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))
            and n.attr not in own and ast.unparse(n) != "os._exit"]


def interface() -> set[str]:
    return {n for n in dir(MemoryStore) if not n.startswith("_")} | set(MemoryStore.__annotations__)


def in_store(path: str) -> bool:
    return path.startswith("store/")


def is_adapter(path: str) -> bool:
    return path in ADAPTERS or path.split("/")[0] in ADAPTERS


def test_only_the_store_speaks_sql():
    bad = [f"engram/{path} {hit}" for path, src in modules() if not in_store(path) for hit in sql_in(src)]
    assert not bad, "SQL outside engram/store/ (add a named method to store/base.py and db.py):\n" + "\n".join(bad)


def test_nothing_outside_the_store_touches_its_connection():
    bad = [f"engram/{path} {hit}" for path, src in modules() if not in_store(path)
           for hit in attributes(src, {"con", "_con"})]
    assert not bad, "\n".join(bad)


def test_only_the_engine_holds_the_store():
    bad = [f"engram/{path} {hit}" for path, src in modules()
           if not in_store(path) and path not in ENGINE for hit in attributes(src, {"store_db"})]
    assert not bad, "the store is the engine's (add a facade method to engram.py):\n" + "\n".join(bad)


def test_adapters_reach_nothing_through_the_facade():
    bad = [f"engram/{path} {hit}" for path, src in modules() if is_adapter(path)
           for hit in attributes(src, REACH_THROUGH)]
    assert not bad, "adapters call the facade, not its parts:\n" + "\n".join(bad)


def test_no_module_reaches_into_another_modules_private_members():
    bad = [f"engram/{path} {hit}" for path, src in modules() for hit in private_reaches(src)]
    assert not bad, "what another module needs is public (a method or property of its own):\n" + "\n".join(bad)


def test_the_engine_calls_only_the_store_interface():
    used = {(path, name) for path, src in modules() if path in ENGINE for name in store_calls(src)}
    assert {name for _, name in used} >= {"transaction", "get_memories", "latest_handoff"}  # the scan sees calls
    bad = sorted(f"engram/{path}: .{name}" for path, name in used if name not in interface())
    assert not bad, "not declared in store/base.py MemoryStore:\n" + "\n".join(bad)


@pytest.mark.parametrize("backend", [Store, PgStore], ids=["duckdb", "postgres"])
@pytest.mark.parametrize("name", sorted(n for n in interface() if callable(getattr(MemoryStore, n, None))))
def test_store_implements_the_interface(name, backend):
    want = inspect.signature(getattr(MemoryStore, name))
    got = inspect.signature(getattr(backend, name))
    assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == \
        [(p.name, p.kind, p.default) for p in want.parameters.values()], name


def engram_bases(source: str, classes: set[str]) -> list[str]:
    """Classes that inherit from a class defined in engram/ (by the base's name), other than an
    error (engram.errors) or a record model of the export (pydantic, in transfer.py): the rule
    "no mixin": the engine shares code through references to its parts, not through a base
    class whose methods call back into the subclass."""
    tree = ast.parse(source)
    allowed = {"EngramError", "_Line"} | {n for n in dir(engram.errors) if n[:1].isupper()}
    return [f"line {n.lineno}: class {n.name}({ast.unparse(b)})" for n in ast.walk(tree)
            if isinstance(n, ast.ClassDef) for b in n.bases
            if ast.unparse(b).split(".")[-1] in classes - allowed]


def engram_classes() -> set[str]:
    return {n.name for _, src in modules() for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ClassDef)}


ENGRAM_CLASSES = engram_classes()


def self_chain(node: ast.expr) -> bool:
    """node is an attribute of self, or of one of its attributes (self.part, self.parts.store_db)."""
    return isinstance(node, ast.Attribute) and (
        (isinstance(node.value, ast.Name) and node.value.id == "self") or self_chain(node.value))


def long_methods(source: str, cls: str, most: int) -> list[str]:
    """Public methods of class `cls` (__init__ aside) whose body, its docstring aside, has more
    than `most` statements, or that call no method of one of self's attributes (self.part.f())."""
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls)
    out = []
    for fn in node.body:
        if not isinstance(fn, ast.FunctionDef) or fn.name == "__init__" or \
                (fn.name.startswith("_") and not fn.name.startswith("__")):
            continue
        body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
        delegates = any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and self_chain(c.func.value)
                        for c in ast.walk(fn))
        if len(body) > most or not (delegates or fn.name in ("__enter__", "__exit__", "lock")):
            out.append(f"{fn.name} ({len(body)} statements{'' if delegates else ', delegates nothing'})")
    return out


def facade_imports(source: str) -> list[str]:
    """Imports of the facade (engram.engram, or the package's Engram)."""
    out = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Import):
            hit = any(a.name == "engram.engram" for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            mod = ("engram." * (n.level > 0) + (n.module or "")).rstrip(".") if n.level <= 1 else "?"
            hit = mod == "engram.engram" or (mod == "engram" and any(a.name in ("engram", "Engram") for a in n.names))
        else:
            continue
        if hit:
            out.append(f"line {n.lineno}: {ast.unparse(n)}")
    return out


def test_no_class_is_a_mixin():
    bad = [f"engram/{path} {hit}" for path, src in modules() if path in ENGINE
           for hit in engram_bases(src, ENGRAM_CLASSES)]
    bad += [f"engram/{path}: class {n.name}" for path, src in modules() for n in ast.walk(ast.parse(src))
            if isinstance(n, ast.ClassDef) and n.name.lower().endswith("mixin")]
    assert not bad, "no mixin: hand the class what it needs (engram.parts), do not inherit it:\n" + "\n".join(bad)


# The entry points' long tables: the operations' declarations (ops.py), the CLI's commands
# (cli.py) and the daemon protocol (server/rpc.py). Every other module, the engine and the
# stores among them, stays at most MODULE_MAX_LINES long: a longer one holds two concerns.
LONG_ADAPTERS = {"ops.py", "cli.py", "server/rpc.py"}
MODULE_MAX_LINES = 500


def long_modules(sources: list[tuple[str, str]], limit: int = MODULE_MAX_LINES) -> list[str]:
    return [f"{name}: {len(src.splitlines())} lines" for name, src in sources
            if name not in LONG_ADAPTERS and len(src.splitlines()) > limit]


def test_no_engine_module_is_over_500_lines():
    assert long_modules(modules()) == []


def test_the_facade_is_small_and_its_public_methods_delegate():
    src = (PACKAGE / "engram.py").read_text()
    assert len(src.splitlines()) <= FACADE_MAX_LINES, "engram.py is the facade: put the logic in a module by concern"
    bad = long_methods(src, "Engram", DELEGATE_MAX_STATEMENTS)
    assert not bad, "Engram's public methods delegate to its parts:\n" + "\n".join(bad)


def test_the_facade_parts_never_call_back_into_the_facade():
    bad = [f"engram/{path} {hit}" for path, src in modules() if path in FACADE_PARTS for hit in facade_imports(src)]
    assert not bad, "a part of the facade gets what it needs from Engram's constructor:\n" + "\n".join(bad)
    assert {path for path, _ in modules()} >= FACADE_PARTS, "FACADE_PARTS names a module that is gone"
    assert FACADE_PARTS <= ENGINE


def test_the_checks_catch_violations():
    # A check that cannot fail guards nothing: each one flags a line written to break it.
    assert sql_in('rows = db.query("status = \'active\' AND last_heartbeat < ?")')
    assert sql_in('eng.store_db.execute("x")')
    assert sql_in('q = f"SELECT id FROM {t} ORDER BY id"')
    assert sql_in("import duckdb")
    assert sql_in("from psycopg import sql")
    assert sql_in("from pgvector.psycopg import register_vector")
    assert sql_in('n = store.count("memories", "id IN (?, ?)")')
    assert sql_in('n = store.count("memories", "status <> \'deleted\'")')
    assert sql_in('w = "memory_type = \'handoff\' AND status = \'active\'"')
    assert not sql_in('msg = "select a memory from the list, then update it"')
    assert not sql_in('msg = "skip existing ids with on_conflict=\'skip\'"')
    assert attributes("n = api.eng.index.n", REACH_THROUGH) == ["line 1: .index"]
    assert attributes("i = MEMORY_TYPES.index(t)", REACH_THROUGH) == []
    assert attributes("c = eng.store_db.con", {"con"}) == ["line 1: .con"]
    assert store_calls("db = eng.store_db\ndb.drop_everything()\neng.store_db.get_meta('k')") \
        == {"drop_everything", "get_meta"}
    assert "drop_everything" not in interface()
    assert private_reaches("with eng._lock:\n    eng._delete(ids)") == ["line 1: eng._lock", "line 2: eng._delete"]
    assert private_reaches("class A:\n    def _f(self): ...\n\ndef g(a):\n    return a._f() + self._x") == []
    mixins = {"ContinuityMixin", "ClaimRows", "EngramError"}
    assert engram_bases("class Engram(ContinuityMixin):\n    pass", mixins) == ["line 1: class Engram(ContinuityMixin)"]
    assert engram_bases("class Gone(db.ClaimRows): ...", mixins) == ["line 1: class Gone(db.ClaimRows)"]
    assert engram_bases("class Wrong(EngramError): ...\nclass Fine(Exception): ...", mixins) == []
    facade = "class Engram:\n    def a(self):\n        return self.p.a()\n    def b(self):\n        x = 1\n" \
             "        y = x\n        return self.p.b(y)\n    def c(self):\n        return 3\n"
    assert long_methods(facade, "Engram", 2) == ["b (3 statements)", "c (1 statements, delegates nothing)"]
    assert facade_imports("from .engram import Engram\nfrom . import engram\nimport engram.engram") == \
        ["line 1: from .engram import Engram", "line 2: from . import engram", "line 3: import engram.engram"]
    assert facade_imports("from . import resolve\nfrom .types import Hit\nimport engram.types") == []
    assert long_modules([("writes.py", "x\n" * 501), ("cli.py", "x\n" * 900), ("ok.py", "x\n" * 500)]) == \
        ["writes.py: 501 lines"]


def test_the_memory_columns_are_declared_once():
    # engram.store.rows.MEMORY_TABLE is the memory's shape: the domain value, the row mapping,
    # the migrations and the export format all follow it, so a column added there (with its
    # migration) is read, written, created and exported without another list to edit.
    from dataclasses import fields

    from engram.exchange import MemoryLine
    from engram.store.rows import MEMORY_COLUMNS, MEMORY_TABLE, memory_values, row_to_memory
    from engram.store.schema import MIGRATIONS, PG_MIGRATIONS, column_sql
    from engram.types import Memory

    assert tuple(f.name for f in fields(Memory)) == MEMORY_COLUMNS
    assert list(MemoryLine.model_fields) == ["kind", *MEMORY_COLUMNS, "embedding", "events"]
    m = Memory(id="m", content="c", memory_type="fact", importance=0.5, recall_count=0,
               created_at=START, last_recalled_at=None, user_id="u", tags=("a",), metadata={"k": 1})
    assert len(memory_values(m)) == len(MEMORY_COLUMNS) and row_to_memory(memory_values(m)) == m
    for backend, migrations in (("duckdb", MIGRATIONS), ("postgres", PG_MIGRATIONS)):
        for c in MEMORY_TABLE:
            statements = " ".join(migrations[c.since - 1][1])
            assert column_sql(c, backend) in statements, (backend, c.name, c.since)


def test_a_version_adds_at_most_one_memory_column(monkeypatch):
    # DuckDB cannot commit two ALTERs of one table holding rows in one transaction.
    from engram.store import rows, schema

    assert schema.memory_ddl("duckdb", 2) == ["ALTER TABLE memories ADD COLUMN pinned BOOLEAN DEFAULT false"]
    monkeypatch.setattr(schema, "MEMORY_TABLE", schema.MEMORY_TABLE + (
        rows.Column("a", "text", since=99), rows.Column("b", "text", since=99)))
    with pytest.raises(ValueError, match="one a version"):
        schema.memory_ddl("duckdb", 99)
