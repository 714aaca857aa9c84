"""The derived in-memory index: vectors, filter columns and BM25 postings per memory.

Canonical rows live in DuckDB; this is rebuilt from them at open and kept in step
with every write, so a memory stored a moment ago is found by keyword and by meaning,
and a forgotten one by neither. Filters are applied exactly (boolean masks) before
ranking, never after a top-k. The top-k math, and the bounded search that keeps it exact
without reading every vector in full, is engram.search.vector_search.

Context: a turn of a conversation often lacks its subject ("Yes, twice last month!"), which
the turns written just before it carry. A row stored with a `conversation` is searched with a
vector that mixes in its predecessors' vectors (earlier active rows of the same user and
conversation) and with their words at a lower BM25 weight. A memory without a conversation (an
agent's independent fact, decision or pitfall) has no context: it must not answer for the fact
stored before it. A predecessor that is replaced, consolidated or deleted stops lending its
words. By meaning a turn is as close to a query as the nearer of its own vector and its mixed
one (`match`): the context finds a turn that leans on the turns before it, and never blurs one
that says what it is about (a long request, a reply after another topic's reply). This is
derived only: the stored embedding and the content returned are the memory's own, and
resolution and graph edges compare plain vectors.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import numpy as np

from engram.core.clock import SECONDS_PER_DAY
from engram.core.types import MEMORY_TIERS, MEMORY_TYPES, Memory, Scope
from engram.search.bm25 import BM25Index
from engram.search.decay import TIER_FACTORS, memory_stability, strength_array
from engram.search.vector_search import best, bounded_best, principal_basis, project, score_bounds

STATUS_CODES = {"active": 0, "superseded": 1, "consolidated": 2}

# Bounded search (see MemoryIndex.top_cosine): rows are first scored in a subspace of a quarter
# of the dimensions (96 of 384); below BOUNDED_MIN_ROWS rows a full scan is as fast.
BOUNDED_MIN_ROWS = 20_000


def to_days(dt: datetime | None, default: float = np.nan) -> float:
    return default if dt is None else dt.timestamp() / SECONDS_PER_DAY


def _pieces(metadata: dict | None) -> int:
    """How many chunks the text of a chunk was cut into (engine/writes.py records it), else 1."""
    meta = metadata or {}
    n = meta.get("chunks")
    return n if meta.get("chunk_group") and isinstance(n, int) and not isinstance(n, bool) and n > 1 else 1


class _Codes(dict):
    """Key -> small integer code (for the filter columns), and back through `names`."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def code(self, key: str | None) -> int:
        if key is None:
            return -1
        c = self.get(key)
        if c is None:
            c = self[key] = len(self)
            self.names.append(key)
        return c


class MemoryIndex:
    def __init__(
        self,
        dim: int,
        capacity: int = 1024,
        *,
        context_window: int = 0,
        context_weight: float = 0.0,
        context_terms: float = 0.0,
        context_gap_days: float = 1.0 / 24,
        bounded_min_rows: int | None = None,
        tier_factors: dict[str, float] | None = None,
    ):
        self.dim = dim
        self.tier_factors = dict(TIER_FACTORS if tier_factors is None else tier_factors)
        # Up to context_window earlier memories of the same user and conversation, created at
        # most context_gap_days before, give a row its context.
        self.context_window = context_window
        self.context_weight = context_weight
        self.context_terms = context_terms
        self.context_gap_days = context_gap_days
        self.context_of: dict[int, tuple[int, ...]] = {}
        self._borrowers: dict[int, set[int]] = {}  # row -> rows that use it as context
        self._recent: dict[tuple[int, str], list[int]] = {}
        self.n = 0  # rows used (including dead ones)
        self.ids: list[str | None] = []
        self.texts: list[str | None] = []  # content per row, so write-time resolution needs no read
        self.row_of: dict[str, int] = {}
        self.users, self.tasks, self.sessions, self.projects = _Codes(), _Codes(), _Codes(), _Codes()
        self.groups = _Codes()  # chunk groups: the chunks of one long text (writes._store_chunks)
        self.conversations = _Codes()
        self.tag_rows: dict[str, set[int]] = {}
        self.row_tags: dict[int, tuple[str, ...]] = {}
        self.bm25 = BM25Index()
        # Projections of `vectors` and `search` onto `basis`, and the norm each leaves out.
        # Stored a column per row: a product with a wide matrix runs 1.5x faster than a tall one.
        self.bounded_min_rows = BOUNDED_MIN_ROWS if bounded_min_rows is None else bounded_min_rows
        self.basis: np.ndarray | None = None
        self.proj_dims = max(1, dim // 4)
        self._fit_rows = 0
        self.proj: dict[str, np.ndarray] = {}
        self.resid: dict[str, np.ndarray] = {}
        self._alloc(capacity)

    def _alloc(self, cap: int) -> None:
        # The columns, one entry per row: the model's vectors, the search vectors (context mixed
        # in), then what the filters and the ranking read.
        def grow(name: str, dtype: type | np.dtype, fill: float | bool) -> np.ndarray:
            old = getattr(self, name, None)
            shape = (cap, self.dim) if name in ("vectors", "search") else (cap,)
            new = np.full(shape, fill, dtype=dtype)
            if old is not None:
                new[: len(old)] = old
            return new

        self.vectors = grow("vectors", np.float32, 0.0)
        self.search = grow("search", np.float32, 0.0)
        self.alive = grow("alive", bool, False)
        self.status = grow("status", np.int8, -1)
        self.user = grow("user", np.int32, -1)
        self.mtype = grow("mtype", np.int8, -1)
        self.task = grow("task", np.int32, -1)
        self.session = grow("session", np.int32, -1)
        self.project = grow("project", np.int32, -1)  # -1: no project
        self.importance = grow("importance", np.float64, 0.0)
        self.recall = grow("recall", np.float64, 0.0)
        self.stability = grow("stability", np.float64, 1.0)  # days (decay.py)
        self.touched = grow("touched", np.float64, 0.0)
        self.created = grow("created", np.float64, 0.0)
        self.valid_to = grow("valid_to", np.float64, np.inf)
        self.expires = grow("expires", np.float64, np.inf)  # days; inf: never
        self.tier = grow("tier", np.int8, -1)  # MEMORY_TIERS position
        self.pinned = grow("pinned", bool, False)
        self.turn = grow("turn", bool, False)  # a turn of a conversation (stored with one)
        self.conversation = grow("conversation", np.int32, -1)  # which one; -1: none
        self.group = grow("group", np.int32, -1)  # the text a chunk was cut from; -1: not a chunk
        self.pieces = grow("pieces", np.int32, 1)  # how many chunks that text was cut into (1: not cut)
        self.contextual = grow("contextual", bool, False)  # its search vector mixes in context (differs from its own)
        for name in self.proj:
            old_cap = len(self.resid[name])
            proj = np.zeros((self.proj_dims, cap), dtype=np.float32)
            proj[:, :old_cap] = self.proj[name]
            resid = np.zeros(cap, dtype=np.float32)
            resid[:old_cap] = self.resid[name]
            self.proj[name], self.resid[name] = proj, resid
        self.capacity = cap

    def type_status_counts(self) -> dict[tuple[str, str], int]:
        """Rows held by (memory_type, status), every pair listed, zeros included."""
        n = self.n
        alive = self.alive[:n]
        return {
            (mtype, status): int((alive & (self.status[:n] == scode) & (self.mtype[:n] == tcode)).sum())
            for status, scode in STATUS_CODES.items()
            for tcode, mtype in enumerate(MEMORY_TYPES)
        }

    def tier_counts(self) -> dict[str, int]:
        """Active rows by tier, every tier listed."""
        n = self.n
        active = self.alive[:n] & (self.status[:n] == 0)
        return {tier: int((active & (self.tier[:n] == code)).sum()) for code, tier in enumerate(MEMORY_TIERS)}

    def __len__(self) -> int:
        return len(self.row_of)

    def live(self, row: int) -> tuple[str, str]:
        """(id, text) of a row in use; asking for a removed row is the caller's error (KeyError)."""
        mid, text = self.ids[row], self.texts[row]
        if mid is None or text is None:
            raise KeyError(f"index row {row} was removed")
        return mid, text

    def load(self, items: Iterable[tuple[Memory, np.ndarray | None]]) -> None:
        """Add many memories at once (opening a store): as upsert() one by one, but the search
        vectors and BM25 postings are built in bulk, which start-up at 100k rows needs."""
        deferred: list[tuple[int, str]] = []
        for m, vec in items:
            row = self.upsert(m, vec, defer=True)
            if row >= 0:
                deferred.append((row, m.content))
        if not deferred:
            return
        rows = np.array([r for r, _ in deferred], dtype=np.int64)
        self._refresh_search(rows)
        self.bm25.add_many([(r, text, self._context_text(r)) for r, text in deferred], self.context_terms)
        self._maybe_fit()

    def upsert(self, m: Memory, vector: np.ndarray | None, defer: bool = False) -> int:
        """Add or refresh a memory's row; vector None keeps the stored one.

        defer (load() only): leave the search vector and BM25 postings to the caller.
        """
        known = self.row_of.get(m.id)
        if m.status not in STATUS_CODES:
            self.remove(m.id)
            return -1
        fresh = known is None
        if known is not None:
            row = known
        else:
            if self.n == self.capacity:
                self._alloc(self.capacity * 2)
            row = self.n
            self.n += 1
            self.ids.append(m.id)
            self.texts.append(m.content)
            self.row_of[m.id] = row
        self.alive[row] = True
        self.texts[row] = m.content
        self.status[row] = STATUS_CODES[m.status]
        self.user[row] = self.users.code(m.user_id)
        self.mtype[row] = MEMORY_TYPES.index(m.memory_type)
        self.task[row] = self.tasks.code(m.task_id)
        self.session[row] = self.sessions.code(m.session_id)
        self.project[row] = self.projects.code(m.project)
        self.importance[row] = m.importance
        self.recall[row] = m.recall_count
        self.stability[row] = memory_stability(m, self.tier_factors)
        self.touched[row] = to_days(m.last_recalled_at or m.created_at)
        self.created[row] = to_days(m.created_at)
        self.valid_to[row] = to_days(m.valid_to, np.inf)
        self.expires[row] = to_days(m.expires_at, np.inf)
        self.tier[row] = MEMORY_TIERS.index(m.tier) if m.tier in MEMORY_TIERS else -1
        self.pinned[row] = m.pinned
        self.turn[row] = m.conversation is not None
        self.conversation[row] = self.conversations.code(m.conversation)
        self.group[row] = self.groups.code((m.metadata or {}).get("chunk_group"))
        self.pieces[row] = _pieces(m.metadata)
        if fresh:
            self.context_of[row] = self._context_rows(row, m.conversation)
            for r in self.context_of[row]:
                self._borrowers.setdefault(r, set()).add(row)
        elif self.status[row] != 0:
            self._stop_lending(row)  # replaced or consolidated: its words are no longer true
        if vector is not None:
            self._set("vectors", row, vector)
            if not defer:
                self._refresh_search(self._with_borrowers(row))
        for t in self.row_tags.pop(row, ()):
            self.tag_rows.get(t, set()).discard(row)
        self.row_tags[row] = m.tags
        for t in m.tags:
            self.tag_rows.setdefault(t, set()).add(row)
        if not defer:
            self.bm25.add(row, m.content, self._context_text(row), self.context_terms)
            if fresh:
                self._maybe_fit()
        return row

    def set_vector(self, row: int, vector: np.ndarray) -> None:
        """Give a row its vector (one written without it: a bulk write's later chunk); the rows
        that borrow it as context search with it from now on too."""
        self._set("vectors", row, vector)
        self._refresh_search(self._with_borrowers(row))

    def _with_borrowers(self, row: int) -> np.ndarray:
        """The row and the live rows that mix its vector into theirs (their search vectors follow it)."""
        return np.array([row, *sorted(r for r in self._borrowers.get(row, ()) if self.alive[r])], dtype=np.int64)

    def _context_rows(self, row: int, conversation: str | None) -> tuple[int, ...]:
        """The earlier active rows of this row's user and conversation that give it context
        (newest first); none for a memory outside any conversation."""
        if self.context_window <= 0 or conversation is None:
            return ()
        key = (int(self.user[row]), conversation)
        recent = self._recent.setdefault(key, [])
        t = self.created[row]
        ctx = tuple(
            r
            for r in reversed(recent[-self.context_window :])
            if self.alive[r] and self.status[r] == 0 and 0.0 <= t - self.created[r] <= self.context_gap_days
        )
        recent.append(row)
        del recent[: -self.context_window]
        return ctx

    def _refresh_search(self, rows: np.ndarray) -> None:
        """Recompute the search vectors of `rows` (see _search_vectors) and which of them mix."""
        search, mixed = self._search_vectors(rows)
        self._set("search", rows, search)
        self.contextual[rows] = mixed

    def _search_vectors(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row's vector plus context_weight × the mean of its context rows' vectors,
        normalised, and whether each row had context to mix in."""
        own = self.vectors[rows]
        if self.context_weight <= 0 or self.context_window <= 0:
            return own, np.zeros(len(rows), dtype=bool)
        total = np.zeros_like(own)
        count = np.zeros(len(rows), dtype=np.float32)
        contexts = [self.context_of.get(r, ()) for r in rows.tolist()]
        for j in range(self.context_window):
            ctx = np.array([c[j] if len(c) > j else -1 for c in contexts])
            has = ctx >= 0
            total[has] += self.vectors[ctx[has]]
            count += has
        with_ctx = count > 0
        mixed = own.copy()
        mixed[with_ctx] += self.context_weight * total[with_ctx] / count[with_ctx, None]
        norm = np.linalg.norm(mixed, axis=1)
        ok = with_ctx & (norm > 0)
        out = own.copy()
        out[ok] = mixed[ok] / norm[ok, None]
        return out, ok

    def borrowers(self, row: int) -> tuple[int, ...]:
        """The rows that take `row` as context: the turns said after it in its conversation."""
        return tuple(sorted(self._borrowers.get(row, ())))

    def _context_text(self, row: int) -> tuple[int, ...]:
        """Context rows whose words count towards this row in BM25 (none when switched off)."""
        return self.context_of.get(row, ()) if self.context_terms > 0 else ()

    def _set(self, name: str, rows, values) -> None:
        """Write rows of `vectors` or `search`, keeping their projections in step."""
        getattr(self, name)[rows] = values
        if self.basis is not None:
            self._project(name, np.atleast_1d(rows))

    def _project(self, name: str, rows: np.ndarray) -> None:
        assert self.basis is not None  # called once the subspace is chosen
        self.proj[name][:, rows], self.resid[name][rows] = project(getattr(self, name)[rows], self.basis)

    def _maybe_fit(self) -> None:
        """Choose the subspace (again) once there are enough rows, and each time they double:
        its top principal directions, from up to 50k rows. Costs about 0.5 s at 100k."""
        live = len(self.row_of)
        if live < self.bounded_min_rows or live < 2 * self._fit_rows:
            return
        rows = np.flatnonzero(self.alive[: self.n])
        self.basis = principal_basis(self.vectors[rows[:: max(1, len(rows) // 50_000)]], self.proj_dims)
        self._fit_rows = live
        every = np.arange(self.n)
        for name in ("vectors", "search"):
            self.proj[name] = np.zeros((self.proj_dims, self.capacity), dtype=np.float32)
            self.resid[name] = np.zeros(self.capacity, dtype=np.float32)
            self._project(name, every)

    def top_cosine(
        self, q: np.ndarray, mask: np.ndarray, k: int, name: str = "search"
    ) -> tuple[np.ndarray, np.ndarray]:
        """The k rows of `mask` whose `name` vectors (search or vectors) have the highest dot
        product with q, best first, and those exact values: the same answer as a full scan."""
        return self.nearest(q, [mask], k, name)[0]

    def top_match(self, q: np.ndarray, mask: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k rows of `mask` with the highest match() with q, best first, and those values.
        Exact: a row among the k best by the larger of two scores is among the k best by one;
        and a row without context has one vector, so its own is read only for rows with one."""
        rows = self.top_cosine(q, mask, k)[0]
        mixed = mask[: self.n] & self.contextual[: self.n]
        if mixed.any():
            rows = np.union1d(rows, self.top_cosine(q, mixed, k, "vectors")[0]).astype(np.int64)
        return best(rows, self.match(rows, q), k)

    def match(self, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
        """How close each row is to q by meaning: the larger of its own vector's and its search
        vector's dot product with q (the module docstring)."""
        return np.maximum(self.vectors[rows] @ q, self.search[rows] @ q)

    def nearest(
        self, q: np.ndarray, masks: list[np.ndarray], k: int, name: str = "search"
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """top_cosine for several masks, reading the rows once: a full scan, or with many rows
        the bounded search over the subspace (engram.search.vector_search.bounded_best)."""
        n = self.n
        full = getattr(self, name)
        scan = bound = None  # every row's score, or its bound; computed once for all masks
        out = []
        for mask in masks:
            rows = np.flatnonzero(mask[:n])
            if self.basis is None or len(rows) <= max(4 * k, n // 50):
                if 2 * len(rows) <= n:  # few rows: gather them
                    out.append(best(rows, full[rows] @ q, k))
                    continue
                if scan is None:
                    scan = full[:n] @ q
                out.append(best(rows, scan[rows], k))
                continue
            if bound is None:
                bound = score_bounds(q, self.basis, self.proj[name][:, :n], self.resid[name][:n])
            out.append(bounded_best(full, q, mask[:n], bound, k))
        return out

    def touch(self, memories: Iterable[Memory]) -> None:
        """Mirror a recall's reinforcement (memories as the store returned them)."""
        for m in memories:
            r = self.row_of.get(m.id)
            if r is not None:
                self.recall[r] = m.recall_count
                self.stability[r] = memory_stability(m, self.tier_factors)
                self.expires[r] = to_days(m.expires_at, np.inf)
                self.touched[r] = to_days(m.last_recalled_at or m.created_at)

    def remove(self, memory_id: str) -> None:
        row = self.row_of.pop(memory_id, None)
        if row is None:
            return
        # A forgotten memory must not stay findable through the rows that borrowed its words.
        self._stop_lending(row)
        for r in self.context_of.pop(row, ()):
            self._borrowers.get(r, set()).discard(row)
        self.ids[row] = None
        self.texts[row] = None
        self.alive[row] = False
        self.status[row] = -1
        self._set("vectors", row, 0.0)
        self._set("search", row, 0.0)
        self.contextual[row] = False
        for t in self.row_tags.pop(row, ()):
            self.tag_rows.get(t, set()).discard(row)
        self.bm25.remove(row)

    def _stop_lending(self, row: int) -> None:
        """Take `row` out of the context of every row that borrowed from it."""
        for d in sorted(self._borrowers.pop(row, ())):
            self.context_of[d] = tuple(r for r in self.context_of.get(d, ()) if r != row)
            if self.alive[d]:
                self.bm25.set_context(d, self._context_text(d), self.context_terms)
                self._refresh_search(np.array([d]))

    def vector(self, memory_id: str) -> np.ndarray | None:
        r = self.row_of.get(memory_id)
        return None if r is None else self.vectors[r]

    def mask(
        self,
        user_id: str,
        memory_type: str | None = None,
        task_id: str | None = None,
        tags: tuple[str, ...] | None = None,
        as_of: datetime | None = None,
        statuses: tuple[str, ...] = ("active",),
        scope: Scope | None = None,
        now: datetime | None = None,
    ) -> np.ndarray:
        """Rows eligible for a read; `scope` None: every project's (engram.core.types.Scope).
        With `now`, a memory expired by then is left out (an expired memory is never returned)."""
        n = self.n
        uc = self.users.get(user_id)
        if uc is None:
            return np.zeros(n, dtype=bool)
        m = self.alive[:n] & (self.user[:n] == uc)
        if now is not None:
            m &= self.expires[:n] > to_days(now)
        if as_of is not None:
            t = to_days(as_of)
            m &= (self.created[:n] <= t) & (self.valid_to[:n] > t)
        else:
            m &= np.isin(self.status[:n], [STATUS_CODES[s] for s in statuses])
        if memory_type is not None:
            m &= self.mtype[:n] == MEMORY_TYPES.index(memory_type)
        if scope is not None and not scope.everything:
            m &= self.in_project(scope.project)
        if task_id is not None:
            tc = self.tasks.get(task_id)
            m &= self.task[:n] == (-2 if tc is None else tc)
        if tags:
            rows: set[int] = set()
            for tag in tags:
                rows |= self.tag_rows.get(tag, set())
            tm = np.zeros(n, dtype=bool)
            if rows:
                tm[list(rows)] = True
            m &= tm
        return m

    def faded_episodes(self, now: datetime, floor: float) -> np.ndarray:
        """Rows of captured episodes, not pinned, whose strength fell below `floor` (the prune's):
        with gists on, maintenance keeps them past it only as what a gist may yet be made of
        (docs/lifecycle.md#gists), and recall leaves them out as the prune would have."""
        n = self.n
        st = strength_array(self.importance[:n], self.stability[:n], to_days(now) - self.touched[:n])
        return (self.mtype[:n] == MEMORY_TYPES.index("episode")) & ~self.pinned[:n] & (st < floor)

    def in_project(self, project: str | None, exact: bool = False) -> np.ndarray:
        """Rows of `project` and of no project (exact: of `project` only; None: of no project)."""
        n = self.n
        none = self.project[:n] == -1
        if project is None:
            return none
        pc = self.projects.get(project)
        own = self.project[:n] == (-2 if pc is None else pc)
        return own if exact else own | none

    def cosine(self, q: np.ndarray) -> np.ndarray:
        """Dot product of q with every row's own vector (a full scan, for maintenance)."""
        return self.vectors[: self.n] @ q
