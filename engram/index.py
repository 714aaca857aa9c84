"""The derived in-memory index: vectors, filter columns and BM25 postings per memory.

Canonical rows live in DuckDB; this is rebuilt from them at open and kept in step
with every write, so a memory stored a moment ago is found by keyword and by meaning,
and a forgotten one by neither. Filters are applied exactly (boolean masks) before
ranking, never after a top-k.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from .decay import BASE_LAMBDA, SECONDS_PER_DAY
from .lexical import BM25Index
from .types import MEMORY_TYPES, Memory

STATUS_CODES = {"active": 0, "superseded": 1, "consolidated": 2}


def to_days(dt: datetime | None, default: float = np.nan) -> float:
    return default if dt is None else dt.timestamp() / SECONDS_PER_DAY


class _Codes(dict):
    def code(self, key: str | None) -> int:
        if key is None:
            return -1
        c = self.get(key)
        if c is None:
            c = self[key] = len(self)
        return c


class MemoryIndex:
    def __init__(self, dim: int, capacity: int = 1024):
        self.dim = dim
        self.n = 0  # rows used (including dead ones)
        self.ids: list[str | None] = []
        self.row_of: dict[str, int] = {}
        self.users, self.tasks, self.sessions = _Codes(), _Codes(), _Codes()
        self.tag_rows: dict[str, set[int]] = {}
        self.row_tags: dict[int, tuple[str, ...]] = {}
        self.bm25 = BM25Index()
        self._alloc(capacity)

    def _alloc(self, cap: int) -> None:
        def grow(name, dtype, fill):
            old = getattr(self, name, None)
            shape = (cap, self.dim) if name == "vectors" else (cap,)
            new = np.full(shape, fill, dtype=dtype)
            if old is not None:
                new[: len(old)] = old
            setattr(self, name, new)
        grow("vectors", np.float32, 0.0)
        grow("alive", bool, False)
        grow("status", np.int8, -1)
        grow("user", np.int32, -1)
        grow("mtype", np.int8, -1)
        grow("task", np.int32, -1)
        grow("session", np.int32, -1)
        grow("importance", np.float64, 0.0)
        grow("recall", np.float64, 0.0)
        grow("base_lambda", np.float64, BASE_LAMBDA["fact"])
        grow("touched", np.float64, 0.0)
        grow("created", np.float64, 0.0)
        grow("valid_to", np.float64, np.inf)
        grow("pinned", bool, False)
        self.capacity = cap

    def __len__(self) -> int:
        return len(self.row_of)

    def upsert(self, m: Memory, vector: np.ndarray | None) -> int:
        """Add or refresh a memory's row; vector None keeps the stored one."""
        row = self.row_of.get(m.id)
        if m.status not in STATUS_CODES:
            self.remove(m.id)
            return -1
        if row is None:
            if self.n == self.capacity:
                self._alloc(self.capacity * 2)
            row = self.n
            self.n += 1
            self.ids.append(m.id)
            self.row_of[m.id] = row
        if vector is not None:
            self.vectors[row] = vector
        self.alive[row] = True
        self.status[row] = STATUS_CODES[m.status]
        self.user[row] = self.users.code(m.user_id)
        self.mtype[row] = MEMORY_TYPES.index(m.memory_type)
        self.task[row] = self.tasks.code(m.task_id)
        self.session[row] = self.sessions.code(m.session_id)
        self.importance[row] = m.importance
        self.recall[row] = m.recall_count
        self.base_lambda[row] = BASE_LAMBDA.get(m.memory_type, BASE_LAMBDA["fact"])
        self.touched[row] = to_days(m.last_recalled_at or m.created_at)
        self.created[row] = to_days(m.created_at)
        self.valid_to[row] = to_days(m.valid_to, np.inf)
        self.pinned[row] = m.pinned
        for t in self.row_tags.pop(row, ()):
            self.tag_rows.get(t, set()).discard(row)
        self.row_tags[row] = m.tags
        for t in m.tags:
            self.tag_rows.setdefault(t, set()).add(row)
        self.bm25.add(row, m.content)
        return row

    def touch(self, ids: list[str], now: datetime) -> None:
        """Mirror a recall's reinforcement."""
        d = to_days(now)
        for i in ids:
            r = self.row_of.get(i)
            if r is not None:
                self.recall[r] += 1
                self.touched[r] = d

    def remove(self, memory_id: str) -> None:
        row = self.row_of.pop(memory_id, None)
        if row is None:
            return
        self.ids[row] = None
        self.alive[row] = False
        self.status[row] = -1
        self.vectors[row] = 0.0
        for t in self.row_tags.pop(row, ()):
            self.tag_rows.get(t, set()).discard(row)
        self.bm25.remove(row)

    def vector(self, memory_id: str) -> np.ndarray | None:
        r = self.row_of.get(memory_id)
        return None if r is None else self.vectors[r]

    def mask(self, user_id: str, memory_type: str | None = None, task_id: str | None = None,
             tags: tuple[str, ...] | None = None, as_of: datetime | None = None,
             statuses: tuple[str, ...] = ("active",)) -> np.ndarray:
        n = self.n
        uc = self.users.get(user_id)
        if uc is None:
            return np.zeros(n, dtype=bool)
        m = self.alive[:n] & (self.user[:n] == uc)
        if as_of is not None:
            t = to_days(as_of)
            m &= (self.created[:n] <= t) & (self.valid_to[:n] > t)
        else:
            m &= np.isin(self.status[:n], [STATUS_CODES[s] for s in statuses])
        if memory_type is not None:
            m &= self.mtype[:n] == MEMORY_TYPES.index(memory_type)
        if task_id is not None:
            tc = self.tasks.get(task_id)
            m &= self.task[:n] == (-2 if tc is None else tc)
        if tags:
            rows: set[int] = set()
            for t in tags:
                rows |= self.tag_rows.get(t, set())
            tm = np.zeros(n, dtype=bool)
            if rows:
                tm[list(rows)] = True
            m &= tm
        return m

    def cosine(self, q: np.ndarray) -> np.ndarray:
        return self.vectors[: self.n] @ q
