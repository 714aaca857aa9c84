"""The one funnel every stored text passes: a store whose writes are redacted before they reach SQL.

engram.engine.state wraps the opened store in RedactingStore, so every write the engine, the importers,
the import of an export and maintenance make goes through it, and a new write path cannot forget
to redact. The engine still redacts a memory's content where it is prepared (engram.engine.writes):
the vector and the in-memory index are computed from the text before it reaches the store, and
they must be computed from what is stored. Redaction is idempotent, and the Redactor remembers
its recent outputs, so the second pass over the same text costs a dictionary lookup.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from engram.core.types import Memory, Session, Task

__all__ = ["RedactingStore"]

_MEMORY_TEXT = ("content", "tags", "metadata")
_TASK_TEXT = ("name", "goal", "metadata")
_SESSION_TEXT = ("outcome_notes",)


class RedactingStore:
    """A MemoryStore (engram.store.base) whose writes of text are redacted; reads and everything
    else pass to the store it wraps."""

    def __init__(self, inner: Any, redact: Any):
        self.inner = inner
        self._redact = redact  # engram.core.redaction.Redactor: __call__ for a text, .value for JSON

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _fields(self, fields: dict[str, Any], text: tuple[str, ...]) -> dict[str, Any]:
        return {k: self._redact.value(v) if k in text and v is not None else v for k, v in fields.items()}

    def _row(self, row: Any, text: tuple[str, ...]) -> Any:
        return replace(row, **self._fields({k: getattr(row, k) for k in text}, text))

    # -- the writes that carry text --------------------------------------------
    def insert_memory(self, m: Memory, embedding: np.ndarray | None) -> None:
        self.inner.insert_memory(self._row(m, _MEMORY_TEXT), embedding)

    def update_memory(self, memory_id: str, embedding: np.ndarray | None = None, **fields: Any) -> None:
        self.inner.update_memory(memory_id, embedding, **self._fields(fields, _MEMORY_TEXT))

    def add_event(self, memory_id: str, now: datetime, action: str, detail: dict | None = None) -> None:
        self.inner.add_event(memory_id, now, action, self._redact.value(detail))

    def set_event_detail(self, memory_id: str, at: datetime, action: str, detail: dict | None) -> None:
        self.inner.set_event_detail(memory_id, at, action, self._redact.value(detail))

    def insert_task(self, t: Task) -> None:
        self.inner.insert_task(self._row(t, _TASK_TEXT))

    def update_task(self, task_id: str, now: datetime, **fields: Any) -> None:
        self.inner.update_task(task_id, now, **self._fields(fields, _TASK_TEXT))

    def upsert_session(self, s: Session) -> None:
        self.inner.upsert_session(self._row(s, _SESSION_TEXT))

    def update_session(self, session_id: str, **fields: Any) -> None:
        self.inner.update_session(session_id, **self._fields(fields, _SESSION_TEXT))

    def add_session_outcome(self, session_id: str, outcome: str, notes: str) -> None:
        self.inner.add_session_outcome(session_id, outcome, self._redact(notes) if notes else notes)
