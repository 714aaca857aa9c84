"""DuckDB extensions: none is loaded by the store; fts and vss load from their PyPI packages on request.

engram's BM25 (search/bm25.py) and vector search (search/memory_index.py) run in memory, so opening a store loads
no extension (loading fts and vss cost about 240 ms of a 290 ms open). The fts extension is the
reference the BM25 test checks search/bm25.py against; load_extensions serves it and anything else
that asks, from the duckdb-extension-* packages, never the network.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Protocol

import duckdb

from engram.core.errors import ExtensionError


class Connection(Protocol):
    """A DuckDB connection as opening a store uses it: the driver's own, or engram.store.db's
    wrapper that names a full disk or a damaged file."""

    def execute(self, sql: str, params: Any = ..., /) -> Any: ...


EXTENSIONS = ("vss", "fts")  # vss first: a table with an HNSW index needs it before any write
LOADED_BY_STORE: tuple[str, ...] = ()  # what Store() loads when it opens a database


def extension_file(name: str) -> Path:
    """Path of the .duckdb_extension file shipped by duckdb-extension-<name>."""
    version = duckdb.__version__
    hint = f"pip install duckdb=={version} duckdb-extension-{name}=={version}"
    try:
        mod = importlib.import_module(f"duckdb_extension_{name}")
    except ImportError:
        raise ExtensionError(f"DuckDB extension {name!r} is not installed; run: {hint}") from None
    if mod.__file__ is None:  # a namespace package: not the extension's wheel
        raise ExtensionError(f"DuckDB extension {name!r} is not installed properly; run: {hint}")
    root = Path(mod.__file__).parent / "extensions"
    path = root / f"v{version}" / f"{name}.duckdb_extension"
    if not path.exists():
        found = sorted(p.parent.name for p in root.glob(f"*/{name}.duckdb_extension"))
        raise ExtensionError(
            f"duckdb-extension-{name} ships {', '.join(found) or 'nothing'} but duckdb is v{version}; run: {hint}"
        )
    return path


def no_autoload(con: Connection) -> None:
    """Turn off autoinstall/autoload: a statement that needs an extension fails at once
    instead of downloading it."""
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")


def load_extensions(con: Connection, names: tuple[str, ...] = EXTENSIONS) -> None:
    no_autoload(con)
    for name in names:
        path = extension_file(name)
        try:
            con.execute(f"LOAD '{path}'")
        except duckdb.Error as e:
            raise ExtensionError(f"cannot load DuckDB extension {name} from {path}: {e}") from e
