"""Rows <-> domain values, both backends, and the memories table declared once.

MEMORY_TABLE is the one place a memory's columns are written: the row mapping here
(row_to_memory, memory_values), the migrations that create and extend the table
(schema.memory_ddl) and the export format (engram/admin/export_format.py's MemoryLine) derive from it, and
tests/unit/test_architecture.py checks that engram.core.types.Memory has the same fields in the same
order. A new column is one Column here (with the schema version that adds it) and that
version's migration entry in schema.py.
"""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Sequence, overload

from engram.core.types import Claim, Memory, Session, Task

# What a column holds; each dialect names its SQL type (schema.SQL_TYPES) and the row mapping
# converts by it. "key": the text primary key; "list": an array of text; "json": a JSON object
# kept as text; "vector": the embedding (not a field of Memory).
KINDS = ("key", "text", "float", "int", "bool", "time", "list", "json", "vector")


@dataclass(frozen=True)
class Column:
    name: str
    kind: str
    required: bool = False  # NOT NULL
    default: str | None = None  # an SQL literal both dialects read alike
    since: int = 1  # the schema version (schema.MIGRATIONS position, from 1) that added it


MEMORY_TABLE: tuple[Column, ...] = (
    Column("id", "key", required=True),
    Column("content", "text", required=True),
    Column("memory_type", "text", required=True),
    Column("importance", "float", required=True),
    Column("recall_count", "int", required=True, default="0"),
    Column("created_at", "time", required=True),
    Column("last_recalled_at", "time"),
    Column("user_id", "text", required=True),
    Column("task_id", "text"),
    Column("session_id", "text"),
    Column("tags", "list"),
    Column("metadata", "json"),
    Column("provenance", "list"),
    Column("status", "text", required=True),
    Column("valid_from", "time"),
    Column("valid_to", "time"),
    Column("supersedes", "text"),
    Column("superseded_by", "text"),
    Column("embedding", "vector"),
    Column("pinned", "bool", default="false", since=2),
    Column("updated_at", "time", since=3),
    # Only memories of one conversation share neighbour context (see search/memory_index.py).
    Column("conversation", "text", since=6),
    # Spaced stability (search/decay.py); NULL until the first recall: the initial stability applies.
    Column("stability", "float", since=7),
    # Projects (docs/projects.md): NULL is "no project", seen from inside and outside any.
    Column("project", "text", since=10),
    # Tiers (docs/lifecycle.md): set at write from type and origin, moved by the user.
    Column("tier", "text", default="'semantic'", since=16),
    # Expiry: NULL never; from then on never returned, and removed by maintenance.
    Column("expires_at", "time", since=17),
)
MEMORY_FIELDS: tuple[Column, ...] = tuple(c for c in MEMORY_TABLE if c.kind != "vector")  # Memory's, in order
MEMORY_COLUMNS: tuple[str, ...] = tuple(c.name for c in MEMORY_FIELDS)
MEM_SELECT = ", ".join(MEMORY_COLUMNS)

TASK_COLUMNS = ("id", "name", "goal", "status", "metadata", "user_id", "created_at", "updated_at", "project")
SESSION_COLUMNS = (
    "id",
    "user_id",
    "client",
    "pid",
    "status",
    "started_at",
    "last_heartbeat",
    "ended_at",
    "task_id",
    "outcome",
    "outcome_notes",
    "reported",
    "interruption",
    "project",
    "branch",
)
KEY_COLUMNS = ("id", "user_id", "key_hash", "label", "created_at", "revoked_at")
TABLES = ("memories", "tasks", "sessions", "edges", "memory_events", "meta", "api_keys")


def ts(dt: datetime | None) -> datetime | None:
    """Aware datetime -> naive UTC for storage."""
    if dt is None:
        return None
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt


@overload
def aware(dt: datetime) -> datetime: ...
@overload
def aware(dt: None) -> None: ...
def aware(dt: datetime | None) -> datetime | None:
    """A stored (naive UTC) time as an aware one."""
    return None if dt is None else dt.replace(tzinfo=timezone.utc)


def _number(kind: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else kind(v)


# Stored value -> field value, by kind (None: as it comes).
_FROM_ROW: dict[str, Callable[[Any], Any] | None] = {
    "key": None,
    "text": None,
    "float": _number(float),
    "int": _number(int),
    "bool": bool,
    "time": aware,
    "list": lambda v: tuple(v or ()),
    "json": lambda v: json.loads(v) if v else {},
}
# Field value -> stored value, by kind.
_TO_ROW: dict[str, Callable[[Any], Any] | None] = {
    "key": None,
    "text": None,
    "float": None,
    "int": None,
    "bool": None,
    "time": ts,
    "list": list,
    "json": lambda v: json.dumps(v) if v else None,
}
# (position, converter) of the columns whose stored value is not the field's as it comes.
_MEMORY_FROM = tuple((i, f) for i, c in enumerate(MEMORY_FIELDS) if (f := _FROM_ROW[c.kind]) is not None)
_MEMORY_TO = tuple((i, f) for i, c in enumerate(MEMORY_FIELDS) if (f := _TO_ROW[c.kind]) is not None)
_MEMORY_GET = operator.attrgetter(*MEMORY_COLUMNS)
_MEMORY_KIND = {c.name: c.kind for c in MEMORY_FIELDS}


def row_to_memory(r: Sequence[Any]) -> Memory:
    """A row of MEMORY_COLUMNS as a Memory."""
    v = list(r)
    for i, f in _MEMORY_FROM:
        v[i] = f(v[i])
    return Memory(*v)


def memory_values(m: Memory) -> list[Any]:
    """The stored values of MEMORY_COLUMNS for m (the embedding aside)."""
    v = list(_MEMORY_GET(m))
    for i, f in _MEMORY_TO:
        v[i] = f(v[i])
    return v


def memory_field_values(fields: dict[str, Any]) -> list[tuple[str, Any]]:
    """(column, stored value) of an update_memory's fields: KeyError for a field that is not a
    column (or is the id)."""
    out = []
    for k, v in fields.items():
        kind = _MEMORY_KIND.get(k)
        if kind is None or kind == "key":
            raise KeyError(k)
        if isinstance(v, datetime):
            v = ts(v)
        elif kind in ("list", "json") and (to_row := _TO_ROW[kind]) is not None:
            v = to_row(v)
        out.append((k, v))
    return out


def session_field_values(fields: dict[str, Any]) -> list[tuple[str, Any]]:
    """(column, stored value) of an update_session's fields: KeyError for a field that is not a
    column."""
    out = []
    for k, v in fields.items():
        if k not in SESSION_COLUMNS + ("successes", "failures"):
            raise KeyError(k)
        out.append((k, ts(v) if isinstance(v, datetime) else v))
    return out


def row_to_key(r: Sequence[Any]) -> dict:
    """An api_keys row (KEY_COLUMNS) as list_keys gives it."""
    return {**dict(zip(KEY_COLUMNS, r, strict=True)), "created_at": aware(r[4]), "revoked_at": aware(r[5])}


def row_to_task(r: Sequence[Any]) -> Task:
    return Task(
        id=r[0],
        name=r[1],
        goal=r[2] or "",
        status=r[3],
        metadata=json.loads(r[4]) if r[4] else {},
        user_id=r[5],
        created_at=aware(r[6]),
        updated_at=aware(r[7]),
        project=r[8],
    )


def task_values(t: Task) -> list[Any]:
    return [
        t.id,
        t.name,
        t.goal,
        t.status,
        json.dumps(t.metadata),
        t.user_id,
        ts(t.created_at),
        ts(t.updated_at),
        t.project,
    ]


def row_to_session(r: Sequence[Any]) -> Session:
    return Session(
        id=r[0],
        user_id=r[1],
        client=r[2] or "",
        pid=r[3],
        status=r[4],
        started_at=aware(r[5]),
        last_heartbeat=aware(r[6]),
        ended_at=aware(r[7]),
        task_id=r[8],
        outcome=r[9],
        outcome_notes=r[10],
        reported=bool(r[11]),
        interruption=r[12],
        project=r[13],
        branch=r[14],
    )


def session_values(s: Session) -> list[Any]:
    return [
        s.id,
        s.user_id,
        s.client,
        s.pid,
        s.status,
        ts(s.started_at),
        ts(s.last_heartbeat),
        ts(s.ended_at),
        s.task_id,
        s.outcome,
        s.outcome_notes,
        s.reported,
        s.interruption,
        s.project,
        s.branch,
    ]


def row_to_claim(r: Sequence[Any]) -> Claim:
    # Claiming is hearing from the session: its heartbeat row is written at most every few
    # seconds (Engram._beat_every), so it may be older than the claim itself.
    since, beat = aware(r[4]), aware(r[5])
    return Claim(
        task_id=r[0],
        user_id=r[1],
        session_id=r[2],
        client=r[3] or "",
        since=since,
        last_heard=None if beat is None else max(beat, since),
        session_status=r[6],
    )


def event_dict(at: datetime, action: str, detail: str | None) -> dict:
    """A memory_events row as events() and the export give it."""
    return {"at": aware(at).isoformat(), "action": action, "detail": json.loads(detail) if detail else {}}
