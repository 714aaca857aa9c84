"""The export file's format (engram-jsonl, see engram/admin/export_import.py): one pydantic model per kind of
line, validated as the file is read (the file is a boundary), the reading itself, and the domain
value each line becomes.

A memory line's fields are the memories table's declaration (engram.store.rows.MEMORY_FIELDS)
plus its embedding and history: a column declared there is exported and imported without an
edit here. What an import checks beyond a field's type is in _MEMORY_CHECKS.
"""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from engram.core.clock import utc
from engram.core.project import MAX_PROJECT_CHARS
from engram.core.redaction import Redactor
from engram.core.types import (
    MEMORY_STATUSES,
    MEMORY_TIERS,
    MEMORY_TYPES,
    TASK_STATUSES,
    EngramError,
    Memory,
    Session,
    Task,
    default_tier,
)
from engram.search.decay import MAX_STABILITY
from engram.store.rows import MEMORY_FIELDS, Column

FORMAT = "engram-jsonl"
FORMAT_VERSION = 1
TABLES = ("memories", "tasks", "sessions", "edges", "memory_events")  # what a file holds, counted in its end line
KIND_TABLE = {"memory": "memories", "task": "tasks", "session": "sessions", "edge": "edges"}  # a line's table


class Line(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ModelInfo(Line):
    name: str
    dim: int


class HeaderLine(Line):
    kind: Literal["header"]
    format: Literal["engram-jsonl"]
    format_version: int
    engram_version: str
    model: ModelInfo
    schema_version: int
    exported_at: datetime
    user_id: str | None = None


class EventLine(Line):
    at: datetime
    action: str
    detail: dict[str, Any] = Field(default_factory=dict)


# Each column kind (engram.store.rows.KINDS) as a field: its type, and its default when the
# column may be NULL (a line from an older export may lack a later column).
_FIELD_TYPES: dict[str, tuple[Any, Any]] = {
    "key": (str, None),
    "text": (str, None),
    "float": (float, None),
    "int": (int, None),
    "bool": (bool, False),
    "time": (datetime, None),
    "list": (list[str], list),
    "json": (dict[str, Any], dict),
}
_MEMORY_CHECKS: dict[str, dict[str, Any]] = {
    "id": {"min_length": 1},
    "user_id": {"min_length": 1},
    "importance": {"ge": 0.0, "le": 1.0},
    "recall_count": {"ge": 0},
    "stability": {"gt": 0.0, "le": MAX_STABILITY},  # absent in older exports
    "project": {"min_length": 1, "max_length": MAX_PROJECT_CHARS},  # absent before projects: none
}


# The store's INTEGER columns hold 32 bits: a larger number in a file is refused by name, not
# by the database's conversion error halfway through the import.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT32: dict[str, Any] = {"ge": INT32_MIN, "le": INT32_MAX}


def _memory_field(c: Column) -> tuple[Any, Any]:
    kind, default = _FIELD_TYPES[c.kind]
    checks = {**(INT32 if c.kind == "int" else {}), **_MEMORY_CHECKS.get(c.name, {})}
    if c.required:
        return kind, Field(**checks)
    if callable(default):
        return kind, Field(default_factory=default, **checks)
    return (kind if default is not None else kind | None), Field(default, **checks)


# Field definitions: (a type, its Field or default), built from the columns' declaration.
_MEMORY_LINE_FIELDS: dict[str, Any] = {
    "kind": (Literal["memory"], ...),
    **{c.name: _memory_field(c) for c in MEMORY_FIELDS},
    "embedding": (str | None, None),
    "events": (list[EventLine], Field(default_factory=list)),
}
MemoryLine = create_model(
    "MemoryLine",
    __base__=Line,
    **_MEMORY_LINE_FIELDS,
)


class TaskLine(Line):
    kind: Literal["task"]
    id: str = Field(min_length=1)
    name: str
    goal: str = ""
    status: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    user_id: str
    created_at: datetime
    updated_at: datetime
    project: str | None = Field(None, min_length=1, max_length=MAX_PROJECT_CHARS)


class SessionLine(Line):
    kind: Literal["session"]
    id: str = Field(min_length=1)
    user_id: str
    client: str = ""
    pid: int | None = Field(None, ge=INT32_MIN, le=INT32_MAX)
    status: str
    started_at: datetime
    last_heartbeat: datetime
    ended_at: datetime | None = None
    task_id: str | None = None
    outcome: str | None = None
    outcome_notes: str | None = None
    reported: bool = False
    interruption: str | None = None
    project: str | None = Field(None, min_length=1, max_length=MAX_PROJECT_CHARS)
    branch: str | None = None
    successes: int = Field(0, ge=INT32_MIN, le=INT32_MAX)
    failures: int = Field(0, ge=INT32_MIN, le=INT32_MAX)


class EdgeLine(Line):
    kind: Literal["edge"]
    src: str
    dst: str
    weight: float
    user_id: str


class EndLine(Line):
    kind: Literal["end"]
    counts: dict[str, int]


MODELS: dict[str, type[Line]] = {
    "memory": MemoryLine,
    "task": TaskLine,
    "session": SessionLine,
    "edge": EdgeLine,
    "end": EndLine,
    "header": HeaderLine,
}


class Rereadable(Protocol):
    """A file of lines that read_lines can read from its start again: an open file, or a stream
    rewound to where the import found it."""

    def seek(self, offset: int, /) -> object: ...

    def __iter__(self) -> Iterator[str]: ...


def read_lines(f: Rereadable) -> Iterator[tuple[str, Any]]:
    """Every line of the file from its start, validated: (kind, line model)."""
    f.seek(0)
    ended = False
    for no, raw in enumerate(_text_lines(f), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as e:
            raise EngramError(f"line {no}: not JSON ({e.msg})") from None
        kind = obj.get("kind") if isinstance(obj, dict) else None
        model = MODELS.get(kind) if isinstance(kind, str) else None
        if model is None or not isinstance(kind, str):
            raise EngramError(f"line {no}: unknown kind {kind!r}")
        if (no == 1) != (kind == "header"):
            raise EngramError(f"line {no}: the header must be the first line, and only it")
        if ended:
            raise EngramError(f"line {no}: data after the end line")
        try:
            line = model.model_validate(obj)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            raise EngramError(f"line {no} ({kind}): {where}: {err['msg']}") from None
        ended = kind == "end"
        yield kind, line


def _text_lines(f: Any) -> Iterator[str]:
    """The file's lines; bytes that are not UTF-8 end the read with a clear error."""
    lines = iter(f)
    no = 0
    while True:
        no += 1
        try:
            yield next(lines)
        except StopIteration:
            return
        except UnicodeDecodeError as e:
            raise EngramError(f"the file is not UTF-8 text (byte {e.start} of a block near line {no})") from None


@contextmanager
def rereadable(path: str | Path | IO[str]) -> Iterator[Rereadable]:
    """The file, open so that it can be read twice: a path is opened, a seekable stream read from
    where it stands, any other stream copied to a temporary file first."""
    if isinstance(path, str | Path):
        with open_file(path) as f:
            yield f
        return
    if path.seekable():
        yield _Rewinding(path, path.tell())
        return
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        shutil.copyfileobj(path, spool)
        spool.seek(0)
        yield spool


class _Rewinding:
    """A stream that read_lines rewinds to where the import found it (not to byte 0)."""

    def __init__(self, f: IO[str], start: int):
        self.f, self.start = f, start

    def seek(self, _offset: int) -> None:
        self.f.seek(self.start)

    def __iter__(self) -> Iterator[str]:
        return iter(self.f)


def open_file(path: str | Path, mode: str = "r") -> IO[str]:
    """open() whose failure is a user's error (missing file, no permission), named as such: the
    same words whether the file is opened in the CLI's process or in the daemon."""
    try:
        return open(path, mode, encoding="utf-8")  # the caller closes it
    except OSError as e:
        verb = "read" if mode == "r" else "write"
        raise EngramError(f"cannot {verb} {path}: {e.strerror or type(e).__name__}") from None


def _utc(dt: datetime | None) -> datetime | None:
    return None if dt is None else utc(dt)


# -- what a line becomes: the domain value, its texts redacted again --------------------------------------
def memory_of(m: Any, redact: Redactor, dim: int, use_vector: bool) -> tuple[Memory, np.ndarray | None]:
    """The memory of a MemoryLine and its embedding (None: to embed again, when the text changed
    or use_vector is False or the vector is not `dim` long)."""
    if m.memory_type not in MEMORY_TYPES:
        raise EngramError(f"memory {m.id}: unknown memory_type {m.memory_type!r}")
    if m.status not in MEMORY_STATUSES:
        raise EngramError(f"memory {m.id}: unknown status {m.status!r}")
    if m.tier is not None and m.tier not in MEMORY_TIERS:
        raise EngramError(f"memory {m.id}: unknown tier {m.tier!r} (one of {', '.join(MEMORY_TIERS)})")
    content = redact(m.content)
    vec = None
    if use_vector and m.embedding is not None and content == m.content:
        vec = np.frombuffer(base64.b64decode(m.embedding), dtype=np.float32)
        if vec.shape[0] != dim:
            vec = None
    # Every declared column as the line has it (times in UTC, lists as tuples), the texts redacted.
    fields = {c.name: getattr(m, c.name) for c in MEMORY_FIELDS}
    fields.update(
        {k: tuple(v) if isinstance(v, list) else _utc(v) for k, v in fields.items() if isinstance(v, datetime | list)}
    )
    if fields["tier"] is None:  # an export from before tiers: the tier a memory of its kind gets
        fields["tier"] = default_tier(m.memory_type, tuple(m.tags), m.conversation)
    mem = Memory(
        **{**fields, "content": content, "tags": tuple(redact(t) for t in m.tags), "metadata": redact.value(m.metadata)}
    )
    return mem, vec


def task_of(t: TaskLine, redact: Redactor) -> Task:
    if t.status not in TASK_STATUSES:
        raise EngramError(f"task {t.id}: unknown status {t.status!r}")
    return Task(
        id=t.id,
        name=redact(t.name),
        goal=redact(t.goal),
        status=t.status,
        metadata=redact.value(t.metadata),
        user_id=t.user_id,
        created_at=utc(t.created_at),
        updated_at=utc(t.updated_at),
        project=t.project,
    )


def session_of(s: SessionLine, redact: Redactor) -> Session:
    status, ended = s.status, _utc(s.ended_at)
    if status == "active":  # its process is not here: it ended when it was last heard from
        status, ended = "ended", utc(s.last_heartbeat)
    return Session(
        id=s.id,
        user_id=s.user_id,
        client=s.client,
        pid=s.pid,
        status=status,
        started_at=utc(s.started_at),
        last_heartbeat=utc(s.last_heartbeat),
        ended_at=ended,
        task_id=s.task_id,
        outcome=s.outcome,
        outcome_notes=redact(s.outcome_notes) if s.outcome_notes else s.outcome_notes,
        reported=s.reported,
        interruption=s.interruption,
        project=s.project,
        branch=s.branch,
    )
