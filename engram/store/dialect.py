"""What the SQL shared by both backends (sql.py, sql_tasks.py) spells per backend, and the small values
it passes around: the Dialect of each, the conditions of a project scope and of a user, the rows
a query returns and the inserts a store holds back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from engram.core.types import Scope


@dataclass(frozen=True)
class Dialect:
    """What the shared SQL spells differently per backend (`{col}` names the column)."""

    one_of: str  # the column's value is in the list bound to ?
    holds: str  # the array column holds the value bound to ?
    collate: str  # after a text sort key: byte order (DuckDB's own), whatever the locale

    def key_in(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """`column` is one of `values`: the condition and its parameters."""
        return self.one_of.format(col=column), [list(values)]


class _DuckDialect(Dialect):
    def key_in(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        # `id IN (?, ?, ...)`: unlike list_contains it can use the primary-key index.
        return f"{column} IN ({', '.join('?' * len(values))})", list(values)


DUCKDB = _DuckDialect(one_of="list_contains(?, {col})", holds="list_contains({col}, ?)", collate="")
POSTGRES = Dialect(one_of="{col} = ANY(?)", holds="? = ANY({col})", collate=' COLLATE "C"')


def project_filter(scope: Scope) -> tuple[str, list[Any]]:
    """The SQL condition (and its parameters) for the rows a Scope sees. A row of no project
    (NULL) is seen from every project."""
    if scope.everything:
        return "true", []
    if scope.project is None:
        return "project IS NULL", []
    return "(project IS NULL OR project = ?)", [scope.project]


def of_user(user_id: str | None, column: str = "user_id") -> tuple[str, list[Any]]:
    """The rows of the user, or every row when None."""
    return (f"{column} = ?", [user_id]) if user_id is not None else ("true", [])


class Rows:
    """A query's rows, already fetched (what the backends' execute() returns)."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[tuple]):
        self.rows = rows

    def fetchall(self) -> list[tuple]:
        return self.rows

    def fetchone(self) -> tuple | None:
        return self.rows[0] if self.rows else None


class Pending:
    """Inserts held back by buffered(), sent together by the backend's _flush."""

    def __init__(self) -> None:
        self.memories: list[list[Any]] = []
        self.events: list[list[Any]] = []
        self.edges: dict[tuple[str, str], list[Any]] = {}
        self.new_edges: dict[tuple[str, str], list[Any]] = {}  # from new memories: no pair exists yet

    def __bool__(self) -> bool:
        return bool(self.memories or self.events or self.edges or self.new_edges)
