"""Boundaries: the package's layers (each may import only itself and the layers before it), no import
circle, only engram/store/ speaks SQL, the engine uses only the store's interface, adapters reach the
database and the derived indexes through the facade, no mixin, no module over 500 lines.

The layers are docs/architecture.md's; tests/unit/test_docs.py checks that page names the same."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import engram
import engram.core.errors
from engram.store.base import MemoryStore
from engram.store.db import Store
from engram.store.pg import PgStore  # importable without psycopg: it fails only when opened
from tests.conftest import START

PACKAGE = Path(engram.__file__).parent
# The layers, lowest first: a module may import modules of its own layer and of the layers before
# it, never one after it. A path is a subpackage (every module in it) or a module of the package.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__.py", "core"),
    ("text",),
    ("models",),
    ("search",),
    ("store",),
    ("engine",),
    ("continuity",),
    ("engram.py",),
    ("workflows",),
    ("admin",),
    ("ops",),
    ("api.py",),
    ("panel",),
    ("server",),
    ("hooks",),
    ("setup_command.py", "cli", "__main__.py"),
)
# Modules that hold the store (Engram.store_db) and call its named methods: the facade and the
# layers between the store and the entry points.
ENGINE = ("engram.py", "engine", "continuity", "admin")
# Entry points: they parse, call the facade, render. No store, no index, no graph.
ADAPTERS = ("ops", "api.py", "cli", "setup_command.py", "__main__.py", "server", "hooks", "panel")
# Modules that call the facade: above it, they reach nothing through it (its store, index, graph,
# state), only its public methods. admin/ is the exception the engine's rules allow (maintenance
# plans over the index it holds under the engine's lock).
FACADE_CALLERS = ("workflows", *ADAPTERS)
FACADE_PARAMS = {"eng", "engram", "engine"}  # what a function that takes the facade calls it

# SQL in a string literal: statements, WHERE fragments, conditions on a bound parameter.
SQL = [
    re.compile(p)
    for p in (
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
    )
]
REACH_THROUGH = {"store_db", "index", "graph"}  # Engram attributes an adapter must not touch
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
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("execute", "executemany", "sql")
        ):
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
    return [
        f"line {n.lineno}: .{n.attr}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr in names and id(n) not in called
    ]


def store_calls(source: str) -> set[str]:
    """Attributes the module uses on its store: `x.store_db.NAME`, and `db.NAME` after `db = x.store_db`."""
    tree = ast.parse(source)
    aliases = {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute) and n.value.attr == "store_db"
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute):
            v = n.value
            if (isinstance(v, ast.Attribute) and v.attr == "store_db") or (isinstance(v, ast.Name) and v.id in aliases):
                out.add(n.attr)
    return out


def private_reaches(source: str) -> list[str]:
    """Uses of another object's private member (`eng._lock`): an attribute starting with one
    underscore, on anything but self or cls, that this module does not define itself (a module
    may use its own classes' privates). `os._exit` is the standard library's documented exit."""
    tree = ast.parse(source)
    own = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    # Attributes this module's classes give themselves (self._x = ...): writing `other._x = ...`
    # into another object does not make its private state this module's.
    own |= {
        t.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in ("self", "cls")
    }
    own |= {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return [
        f"line {n.lineno}: {ast.unparse(n)}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and n.attr.startswith("_")
        and not n.attr.startswith("__")
        and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))
        and n.attr not in own
        and ast.unparse(n) != "os._exit"
    ]


def private_imports(source: str) -> list[str]:
    """Names starting with one underscore imported from an engram module: another module's private
    helper (what it needs is public in the module it lives in)."""
    return [
        f"line {n.lineno}: from {n.module} import {a.name}"
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith("engram"))
        for a in n.names
        if a.name.startswith("_") and not a.name.startswith("__")
    ]


def test_no_module_imports_another_modules_private_names():
    bad = [f"engram/{path} {hit}" for path, src in modules() for hit in private_imports(src)]
    assert not bad, "make it public where it lives, or keep it where it is used:\n" + "\n".join(bad)
    assert private_imports("from engram.hooks.transcript import Session, _lines\nfrom os import _exit") == [
        "line 1: from engram.hooks.transcript import _lines"
    ]


def interface() -> set[str]:
    return {n for n in dir(MemoryStore) if not n.startswith("_")} | set(MemoryStore.__annotations__)


def under(path: str, places: tuple[str, ...]) -> bool:
    """path (relative to engram/) is one of `places` or inside one of them."""
    return any(path == p or path.startswith(p + "/") for p in places)


def in_store(path: str) -> bool:
    return under(path, ("store",))


def is_adapter(path: str) -> bool:
    return under(path, ADAPTERS)


def layer_of(path: str) -> int:
    """The index in LAYERS of a module's layer, by its path relative to engram/."""
    found = [i for i, places in enumerate(LAYERS) if under(path, places)]
    assert found, f"engram/{path} is in no layer: add its folder or file to LAYERS (and docs/architecture.md)"
    return found[0]


def module_path(name: str) -> str | None:
    """The path relative to engram/ of an engram module (engram.core.types -> core/types.py), or None
    when `name` is not one of the package's modules (a name imported from a module)."""
    parts = name.split(".")
    if parts[0] != "engram":
        return None
    rel = Path(*parts[1:]) if len(parts) > 1 else Path()
    if (PACKAGE / rel / "__init__.py").exists():
        return (rel / "__init__.py").as_posix()
    if (PACKAGE / rel).with_suffix(".py").exists():
        return rel.with_suffix(".py").as_posix()
    return None


def engram_imports(path: str, source: str) -> list[tuple[int, str]]:
    """(line, path relative to engram/) of every engram module this module imports, at module level
    or inside a function: a function-level import is an import all the same."""
    here = ["engram", *Path(path).with_suffix("").parts]
    package = here[:-1]  # a module's package; for an __init__.py, the package itself
    out = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Import):
            names = [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:
                base = ".".join(package[: len(package) - n.level + 1] + ([n.module] if n.module else []))
            # "from engram.x import y": y may be a module of x, or a name defined in x.
            names = [f"{base}.{a.name}" if module_path(f"{base}.{a.name}") else base for a in n.names]
        else:
            continue
        for name in names:
            target = module_path(name)
            if target is None and name.startswith("engram."):
                target = module_path(name.rsplit(".", 1)[0])
            if target is not None and target != path:
                out.append((n.lineno, target))
    return out


def upward_imports(path: str, source: str) -> list[str]:
    """The imports of `path` that reach a later layer than its own."""
    mine = layer_of(path)
    return [
        f"engram/{path} line {line}: imports engram/{target} (a later layer)"
        for line, target in engram_imports(path, source)
        if layer_of(target) > mine
    ]


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module in an import graph (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def import_graph() -> dict[str, set[str]]:
    # A package's __init__ is imported with every module in it, but importing a module does not
    # import the package's other modules: an edge is module -> module.
    return {path: {t for _, t in engram_imports(path, src)} for path, src in modules()}


def test_every_module_imports_only_its_layer_and_those_before_it():
    bad = [hit for path, src in modules() for hit in upward_imports(path, src)]
    assert not bad, "an import that runs upward (docs/architecture.md, the layers):\n" + "\n".join(bad)


def test_no_two_modules_import_each_other_even_through_others():
    circles = import_circles(import_graph())
    assert not circles, "import circles (put what both need in a module below them):\n" + "\n".join(
        " -> ".join(c) for c in circles
    )


def test_the_layer_rule_catches_what_it_guards():
    # A check that cannot fail guards nothing: a planted upward import, at module level and in a
    # function, relative and absolute, is found; a downward one is not.
    assert upward_imports("core/types.py", "from engram.api import Api") == [
        "engram/core/types.py line 1: imports engram/api.py (a later layer)"
    ]
    assert upward_imports("engine/writes.py", "def f():\n    from engram.continuity import tasks") == [
        "engram/engine/writes.py line 2: imports engram/continuity/tasks.py (a later layer)"
    ]
    assert upward_imports("store/db.py", "from ..ops import check") == [
        "engram/store/db.py line 1: imports engram/ops/__init__.py (a later layer)"
    ]
    assert upward_imports("hooks/run.py", "from engram.server.rpc import RpcClient\nimport engram.core.types") == []
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("nowhere/x.py")


def test_only_the_store_speaks_sql():
    bad = [f"engram/{path} {hit}" for path, src in modules() if not in_store(path) for hit in sql_in(src)]
    assert not bad, "SQL outside engram/store/ (add a named method to store/base.py and db.py):\n" + "\n".join(bad)


def test_nothing_outside_the_store_touches_its_connection():
    bad = [
        f"engram/{path} {hit}"
        for path, src in modules()
        if not in_store(path)
        for hit in attributes(src, {"con", "_con"})
    ]
    assert not bad, "\n".join(bad)


def test_only_the_engine_holds_the_store():
    bad = [
        f"engram/{path} {hit}"
        for path, src in modules()
        if not in_store(path) and not under(path, ENGINE)
        for hit in attributes(src, {"store_db"})
    ]
    assert not bad, "the store is the engine's (add a facade method to engram.py):\n" + "\n".join(bad)


def test_adapters_reach_nothing_through_the_facade():
    bad = [
        f"engram/{path} {hit}"
        for path, src in modules()
        if under(path, FACADE_CALLERS)
        for hit in attributes(src, REACH_THROUGH | {"state"})
    ]
    assert not bad, "what calls the facade calls its methods, not its parts:\n" + "\n".join(bad)


# Modules below the facade that still take it, each with what blocks its move: none may be added.
TAKES_THE_FACADE_PENDING = {
    # Conventions(self) in Engram: its functions call the facade (store, recall, list_memories). To
    # become a part over the engine's parts once branch s45-conventions, which rewrites this module,
    # has landed (moving it now would conflict with every line of that work).
    "continuity/conventions.py",
}


def facade_takers(path: str, source: str) -> list[str]:
    """Functions of a module below the facade (engram.py) that take the facade: a parameter named
    as the facade is named (eng) or annotated Engram. What calls the facade sits above it."""
    if layer_of(path) >= layer_of("engram.py"):
        return []
    return [
        f"engram/{path} line {fn.lineno}: {fn.name}({a.arg})"
        for fn in ast.walk(ast.parse(source))
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        if a.arg in FACADE_PARAMS
        or (a.annotation is not None and ast.unparse(a.annotation).strip("'\"").endswith("Engram"))
    ]


def test_what_calls_the_facade_sits_above_it():
    bad = [hit for path, src in modules() if path not in TAKES_THE_FACADE_PENDING for hit in facade_takers(path, src)]
    assert not bad, "a function that takes the facade belongs above it (engram/workflows/, admin/):\n" + "\n".join(bad)
    # A check that cannot fail guards nothing: the shapes the issue found, planted.
    assert facade_takers("continuity/listing.py", "def around(eng: Any, memory, n): ...") == [
        "engram/continuity/listing.py line 1: around(eng)"
    ]
    assert facade_takers("store/backup.py", "def take(x: 'Engram', dest=None): ...") == [
        "engram/store/backup.py line 1: take(x)"
    ]
    assert facade_takers("workflows/lifecycle.py", "def start(eng: Engram): ...") == []


def test_no_module_reaches_into_another_modules_private_members():
    bad = [f"engram/{path} {hit}" for path, src in modules() for hit in private_reaches(src)]
    assert not bad, "what another module needs is public (a method or property of its own):\n" + "\n".join(bad)


def test_the_engine_calls_only_the_store_interface():
    used = {(path, name) for path, src in modules() if under(path, ENGINE) for name in store_calls(src)}
    assert {name for _, name in used} >= {"transaction", "get_memories", "latest_handoff"}  # the scan sees calls
    bad = sorted(f"engram/{path}: .{name}" for path, name in used if name not in interface())
    assert not bad, "not declared in store/base.py MemoryStore:\n" + "\n".join(bad)


@pytest.mark.parametrize("backend", [Store, PgStore], ids=["duckdb", "postgres"])
@pytest.mark.parametrize("name", sorted(n for n in interface() if callable(getattr(MemoryStore, n, None))))
def test_store_implements_the_interface(name, backend):
    want = inspect.signature(getattr(MemoryStore, name))
    got = inspect.signature(getattr(backend, name))
    assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == [
        (p.name, p.kind, p.default) for p in want.parameters.values()
    ], name


def class_nodes(sources: list[tuple[str, str]]) -> dict[str, ast.ClassDef]:
    """Every class defined at the top level of these modules, by name."""
    return {n.name: n for _, src in sources for n in ast.parse(src).body if isinstance(n, ast.ClassDef)}


def base_names(node: ast.ClassDef) -> list[str]:
    return [ast.unparse(b).split(".")[-1] for b in node.bases]


def own_names(node: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> set[str] | None:
    """What a class defines for itself: its methods, class attributes and annotations, what its
    methods assign to self, and the same of its engram bases. None when a base comes from outside
    engram (what that base provides is not known here)."""
    names: set[str] = set()
    for n in node.body:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(n.name)
        elif isinstance(n, ast.Assign):
            names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
        ):
            names.add(n.attr)
    for b in base_names(node):
        if b in ("object", "Protocol"):
            continue
        if b not in classes:
            return None
        inherited = own_names(classes[b], classes)
        if inherited is None:
            return None
        names |= inherited
    return names


def subclass_reads(sources: list[tuple[str, str]]) -> list[str]:
    """Classes that inherit from an engram class which reads an attribute of self it does not
    define: what only a subclass provides (a mixin, whatever its name). A base that declares what
    it reads (a method, even an abstract one, or an annotation) is a plain base class."""
    classes = class_nodes(sources)
    out = []
    for node in classes.values():
        for b in base_names(node):
            base = classes.get(b)
            if base is None:
                continue
            defined = own_names(base, classes)
            if defined is None:
                continue
            read = sorted(
                {
                    n.attr
                    for n in ast.walk(base)
                    if isinstance(n, ast.Attribute)
                    and isinstance(n.ctx, ast.Load)
                    and isinstance(n.value, ast.Name)
                    and n.value.id == "self"
                    and not n.attr.startswith("__")
                }
                - defined
            )
            if read:
                out.append(
                    f"class {node.name}({b}): {b} reads self.{', self.'.join(read)}, which only a subclass defines"
                )
    return out


def self_chain(node: ast.expr) -> bool:
    """node is an attribute of self, or of one of its attributes (self.part, self.parts.store_db)."""
    return isinstance(node, ast.Attribute) and (
        (isinstance(node.value, ast.Name) and node.value.id == "self") or self_chain(node.value)
    )


def long_methods(source: str, cls: str, most: int) -> list[str]:
    """Public methods of class `cls` (__init__ aside) whose body, its docstring aside, has more
    than `most` statements, or that call no method of one of self's attributes (self.part.f())."""
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls)
    out = []
    for fn in node.body:
        if (
            not isinstance(fn, ast.FunctionDef)
            or fn.name == "__init__"
            or (fn.name.startswith("_") and not fn.name.startswith("__"))
        ):
            continue
        body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
        delegates = any(
            isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and self_chain(c.func.value)
            for c in ast.walk(fn)
        )
        if len(body) > most or not (delegates or fn.name in ("__enter__", "__exit__", "lock", "claims")):
            out.append(f"{fn.name} ({len(body)} statements{'' if delegates else ', delegates nothing'})")
    return out


def made_otherwise(source: str, cls: str) -> list[str]:
    """Attributes of class `cls` assigned a call other than _delegate(part, Method) or _shared(...):
    a facade method is a delegation made from the part's own method, so its parameters are the part's."""
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls)
    return [
        f"{t.id} = {ast.unparse(n.value)[:60]}"
        for n in node.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
        for t in n.targets
        if isinstance(t, ast.Name) and ast.unparse(n.value.func) not in ("_delegate", "_shared")
    ]


def test_no_class_is_a_mixin():
    bad = subclass_reads(modules())
    bad += [
        f"engram/{path}: class {n.name}"
        for path, src in modules()
        for n in ast.walk(ast.parse(src))
        if isinstance(n, ast.ClassDef) and n.name.lower().endswith("mixin")
    ]
    assert not bad, "no mixin: hand the class what it needs (engine/state.py), do not inherit it:\n" + "\n".join(bad)


# Every module, the entry points' tables (ops/, cli/), the engine and the stores among them, stays
# at most MODULE_MAX_LINES long: a longer one holds two concerns.
MODULE_MAX_LINES = 500


def long_modules(sources: list[tuple[str, str]], limit: int = MODULE_MAX_LINES) -> list[str]:
    return [f"{name}: {len(src.splitlines())} lines" for name, src in sources if len(src.splitlines()) > limit]


def test_no_module_is_over_500_lines():
    assert long_modules(modules()) == [], "split a module over 500 lines along its seam (docs/architecture.md)"


def test_the_facade_is_small_and_its_public_methods_delegate():
    src = (PACKAGE / "engram.py").read_text()
    assert len(src.splitlines()) <= FACADE_MAX_LINES, "engram.py is the facade: put the logic in a module by concern"
    bad = long_methods(src, "Engram", DELEGATE_MAX_STATEMENTS) + made_otherwise(src, "Engram")
    assert not bad, "Engram's public methods delegate to its parts:\n" + "\n".join(bad)


def test_the_checks_catch_violations():
    # A check that cannot fail guards nothing: each one flags a line written to break it.
    assert sql_in("rows = db.query(\"status = 'active' AND last_heartbeat < ?\")")
    assert sql_in('eng.store_db.execute("x")')
    assert sql_in('q = f"SELECT id FROM {t} ORDER BY id"')
    assert sql_in("import duckdb")
    assert sql_in("from psycopg import sql")
    assert sql_in("from pgvector.psycopg import register_vector")
    assert sql_in('n = store.count("memories", "id IN (?, ?)")')
    assert sql_in('n = store.count("memories", "status <> \'deleted\'")')
    assert sql_in("w = \"memory_type = 'handoff' AND status = 'active'\"")
    assert not sql_in('msg = "select a memory from the list, then update it"')
    assert not sql_in("msg = \"skip existing ids with on_conflict='skip'\"")
    assert attributes("n = api.eng.index.n", REACH_THROUGH) == ["line 1: .index"]
    assert attributes("i = MEMORY_TYPES.index(t)", REACH_THROUGH) == []
    assert attributes("c = eng.store_db.con", {"con"}) == ["line 1: .con"]
    assert store_calls("db = eng.store_db\ndb.drop_everything()\neng.store_db.get_meta('k')") == {
        "drop_everything",
        "get_meta",
    }
    assert "drop_everything" not in interface()
    assert private_reaches("with eng._lock:\n    eng._delete(ids)") == ["line 1: eng._lock", "line 2: eng._delete"]
    # Another layer's private state stays its own even when this module writes into it.
    assert private_reaches("eng.index._vectors = v\nrows = eng.index._vectors[:3]") == [
        "line 1: eng.index._vectors",
        "line 2: eng.index._vectors",
    ]
    assert attributes("idx = eng.index\nrow = idx.row_of[m.id]", REACH_THROUGH) == ["line 1: .index"]
    assert attributes("p = eng.state\n", REACH_THROUGH | {"state"}) == ["line 1: .state"]
    assert private_reaches("class A:\n    def _f(self): ...\n\ndef g(a):\n    return a._f() + self._x") == []
    mixin = (
        "class Backend:\n    def run(self):\n        return self._model.go()\n"
        "class Embedder(Backend):\n    def __init__(self):\n        self._model = 1\n"
    )
    assert subclass_reads([("m.py", mixin)]) == [
        "class Embedder(Backend): Backend reads self._model, which only a subclass defines"
    ]
    plain = (
        "class Base:\n    _model: int\n    def run(self):\n        return self.go(self._model)\n"
        "    def go(self, x):\n        raise NotImplementedError\n"
        "class Impl(Base):\n    def go(self, x):\n        return x\nclass E(ValueError): ...\n"
    )
    assert subclass_reads([("m.py", plain)]) == []
    facade = (
        "class Engram:\n    def a(self):\n        return self.p.a()\n    def b(self):\n        x = 1\n"
        "        y = x\n        return self.p.b(y)\n    def c(self):\n        return 3\n"
    )
    assert long_methods(facade, "Engram", 2) == ["b (3 statements)", "c (1 statements, delegates nothing)"]
    assert long_modules(
        [("engine/writes.py", "x\n" * 501), ("cli/__init__.py", "x\n" * 900), ("ops/table.py", "x\n" * 500)]
    ) == ["engine/writes.py: 501 lines", "cli/__init__.py: 900 lines"]  # no module is exempt


def test_the_memory_columns_are_declared_once():
    # engram.store.rows.MEMORY_TABLE is the memory's shape: the domain value, the row mapping,
    # the migrations and the export format all follow it, so a column added there (with its
    # migration) is read, written, created and exported without another list to edit.
    from dataclasses import fields

    from engram.admin.export_format import MemoryLine
    from engram.core.types import Memory
    from engram.store.rows import MEMORY_COLUMNS, MEMORY_TABLE, memory_values, row_to_memory
    from engram.store.schema import MIGRATIONS, PG_MIGRATIONS, column_sql

    assert tuple(f.name for f in fields(Memory)) == MEMORY_COLUMNS
    assert list(MemoryLine.model_fields) == ["kind", *MEMORY_COLUMNS, "embedding", "events"]
    m = Memory(
        id="m",
        content="c",
        memory_type="fact",
        importance=0.5,
        recall_count=0,
        created_at=START,
        last_recalled_at=None,
        user_id="u",
        tags=("a",),
        metadata={"k": 1},
    )
    assert len(memory_values(m)) == len(MEMORY_COLUMNS) and row_to_memory(memory_values(m)) == m
    for backend, migrations in (("duckdb", MIGRATIONS), ("postgres", PG_MIGRATIONS)):
        for c in MEMORY_TABLE:
            statements = " ".join(migrations[c.since - 1][1])
            assert column_sql(c, backend) in statements, (backend, c.name, c.since)


def test_a_version_adds_at_most_one_memory_column(monkeypatch):
    # DuckDB cannot commit two ALTERs of one table holding rows in one transaction.
    from engram.store import rows, schema

    assert schema.memory_ddl("duckdb", 2) == ["ALTER TABLE memories ADD COLUMN pinned BOOLEAN DEFAULT false"]
    monkeypatch.setattr(
        schema,
        "MEMORY_TABLE",
        schema.MEMORY_TABLE + (rows.Column("a", "text", since=99), rows.Column("b", "text", since=99)),
    )
    with pytest.raises(ValueError, match="one a version"):
        schema.memory_ddl("duckdb", 99)


# -- tests own their helpers: what they share lives under tests/ (tests/support), a test imports
# from benchmarks/ or scripts/ only a benchmark's public names, to run the benchmark it tests.
TESTS = Path(__file__).resolve().parents[1]
OUTSIDE = ("benchmarks", "scripts")


def private_names_from_outside(source: str) -> list[str]:
    """A test's private names from benchmarks/ or scripts/: `from benchmarks.x import _y`, or `m._y`
    where `m` is a module of theirs that the test imported."""
    tree = ast.parse(source)
    modules: set[str] = set()  # how the test names what it imported from there: `faults`, `benchmarks.faults`
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            modules |= {a.asname or a.name for a in n.names if a.name.split(".")[0] in OUTSIDE}
        elif isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] in OUTSIDE:
            for a in n.names:
                if a.name.startswith("_"):
                    found.append(f"line {n.lineno}: from {n.module} import {a.name}")
                modules.add(a.asname or a.name)
    found += [
        f"line {n.lineno}: {ast.unparse(n)}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and n.attr.startswith("_")
        and not n.attr.startswith("__")
        and ast.unparse(n.value) in modules
    ]
    return found


def test_no_test_imports_a_private_name_from_benchmarks_or_scripts():
    bad = {
        p.relative_to(TESTS).as_posix(): found
        for p in sorted(TESTS.rglob("*.py"))
        if (found := private_names_from_outside(p.read_text()))
    }
    assert bad == {}


@pytest.mark.parametrize(
    "source",
    [
        "from benchmarks.faults import _env, _start\n",
        "from benchmarks import faults\nfaults._head()\n",
        "import scripts.screenshots as shots\nshots._seed()\n",
        "def t():\n    from scripts.make_fix_transcripts import _stamp\n",
    ],
)
def test_a_private_import_from_benchmarks_is_refused(source):
    assert private_names_from_outside(source) != []


def test_a_public_benchmark_entry_point_is_allowed():
    assert (
        private_names_from_outside("from benchmarks import faults\nfaults.upgrade_run(ops=2)\nfaults.__file__\n") == []
    )
