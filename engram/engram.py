"""The facade: every entry point (library, MCP, HTTP, CLI) talks to an Engram."""

from __future__ import annotations

import inspect
import logging
import math
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from . import resolve
from .chunking import chunk_spans, split_chunks
from .clock import Clock, SystemClock, utc
from .config import Settings
from .continuity import RECORD_TOOLS, ContinuityMixin, estimate_tokens, record_document
from .decay import (
    days_until_prune,
    initial_stability,
    memory_stability,
    memory_strength,
    quality_score,
    recalled_stability,
    strength_points,
)
from .embedding import Embedder, UnavailableEmbedder, load_embedder
from .errors import ModelMismatch, ModelUnavailable
from .graph import MemoryGraph, nearest_edges
from .ids import new_id
from .index import MemoryIndex, one_blas_thread, to_days, top_rows
from .ops import refuse_unknown
from .project import check_project
from .redact import Redactor
from .rerank import CrossEncoder
from .retrieve import REFERENCE_TEXTS, Weights, confidence, rank, rerank_hits
from .store import MemoryStore, open_store
from .types import (
    MEMORY_TYPES,
    NO_PROJECT,
    SEARCH_MODES,
    EngramError,
    Hit,
    Memory,
    NotFound,
    Scope,
    StoreResult,
    check_tags,
)

log = logging.getLogger(__name__)
RESOLVABLE_TYPES = ("fact", "strategy", "assumption", "failure")
MODEL_RETRY_S = 30.0  # while the model is unavailable, how often a call tries to load it again
STORE_WAVE = 128  # texts embedded ahead while the previous wave is stored (store_many)
# Several servers on one database (catch_up): a read asks for the others' writes at most this
# often, so a write on one server reaches a recall on another well within a second.
FEED_POLL_S = 0.2
# Unchecked for longer than this, the index is rebuilt from the rows instead: the feed keeps
# only recent changes (about an hour in Postgres).
FEED_MAX_GAP_S = 1800.0
OUTCOMES_POLL_S = 5.0  # session outcomes (not in the feed) are re-read at most this often


def check_text(value: Any, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise EngramError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise EngramError(f"{name} must not be empty")
    if len(value) > limit:
        raise EngramError(f"{name} is {len(value):,} characters; the limit is {limit:,}")
    if "\x00" in value:
        raise EngramError(f"{name} contains a NUL character")
    return value


def check_importance(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise EngramError(f"importance must be a number between 0 and 1, got {v!r}")
    if not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise EngramError(f"importance must be between 0 and 1, got {v!r}")
    return float(v)


def check_type(v: Any) -> str:
    if v not in MEMORY_TYPES:
        raise EngramError(f"memory_type must be one of {', '.join(MEMORY_TYPES)}; got {v!r}")
    return v


def check_conversation(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str) or not v.strip() or len(v) > 200:
        raise EngramError("conversation must be a non-empty string of at most 200 characters")
    return v


def pack_context(r: dict, max_tokens: int) -> tuple[str, list[str]]:  # noqa: C901 - one budgeted pass over the sections in priority order
    """A recall_context result as a <memory> text block within `max_tokens`, and the ids it holds.

    The handoff goes first, whole or not at all; then interrupted sessions, memories and pitfalls
    in rank order, each skipped when it does not fit (a shorter one further down may still fit).
    """
    lines, used, ids = ["<memory>"], 0, []
    budget = max_tokens - 4  # the <memory> tags
    h = r["handoff"]
    if h:
        block = [f"Latest handoff ({h['created_at'][:10]}): {h['summary']}"]
        steps = {s["step"]: s["status"] for s in h["next_steps_validation"]}
        for key in ("completed", "in_progress", "blocked"):
            if h.get(key):
                block.append(f"  {key.replace('_', ' ')}: " + "; ".join(h[key]))
        for step in h.get("next_steps", []):
            block.append(f"  next: {step} [{steps.get(step, 'not_started')}]")
        for e in h.get("open_steps", []):  # planned earlier, still open, not re-planned here
            if h["id"] not in e["planned_in"]:
                block.append(f"  still open from an earlier handoff: {e['step']} [{e['status']}]")
        text = "\n".join(block)
        if estimate_tokens(text) <= budget:
            lines.append(text)
            used += estimate_tokens(text)
            ids.append(h["id"])
    # Reported once (the next recall no longer has them): in the text too, or an agent that reads
    # only the block never learns that the last session was cut off mid-step.
    for s in r.get("interrupted_sessions") or []:
        line = (f"- interrupted session {s['session_id']} ({s.get('reason') or 'interrupted'}, "
                f"{(s.get('ended_at') or s.get('last_heartbeat') or '')[:16]})")
        if (s.get("task") or {}).get("name"):
            line += f", task: {s['task']['name']}"
        if s.get("last_progress"):
            line += f", last progress: {s['last_progress']['content']}"
        t = estimate_tokens(line)
        if used + t <= budget:
            lines.append(line)
            used += t
    for m in r["memories"]:
        if m["id"] in ids:
            continue
        line = f"- ({m['created_at'][:10]}) [{m['memory_type']}] {m['content']}"
        t = estimate_tokens(line)
        if used + t > budget:
            continue
        lines.append(line)
        used += t
        ids.append(m["id"])
    for f in r["related_failures"]:
        if f["id"] in ids:  # already in the block as a memory: the budget is not spent twice on it
            continue
        # A failure stored with store_memory has no component: no empty brackets for it.
        line = f"- pitfall [{f['component']}]: {f['content']}" if f["component"] else f"- pitfall: {f['content']}"
        t = estimate_tokens(line)
        if used + t <= budget:
            lines.append(line)
            used += t
    lines.append("</memory>")
    return "\n".join(lines), ids


class _BatchSims:
    """Similarities of a batch of new vectors to the index, from one matrix product.

    Rows added or re-embedded while the batch is stored are compared as they come.
    """

    def __init__(self, index: MemoryIndex, vecs: np.ndarray):
        self.index = index
        self.n0 = index.n
        self.base = vecs @ index.vectors[: self.n0].T  # a row per new vector: read contiguously
        self.dirty: set[int] = set()

    def sims(self, vec: np.ndarray, col: int) -> np.ndarray:
        idx = self.index
        out = np.concatenate([self.base[col], idx.vectors[self.n0: idx.n] @ vec])
        for r in self.dirty:
            out[r] = idx.vectors[r] @ vec
        return out


class Engram(ContinuityMixin):
    """Long-term memory in one DuckDB file.

    >>> eng = Engram(":memory:")           # or a path; default ENGRAM_HOME/memories.duckdb
    >>> eng.store("Deploys go to Fly.io from main.").action
    'new'
    """

    def __init__(self, path: str | Path | None = None, *, settings: Settings | None = None,
                 embedder: Embedder | None = None, clock: Clock | None = None,
                 allow_model_change: bool = False, degraded_ok: bool = False):
        """degraded_ok: if the model cannot load, serve keyword recall (see `degraded`) instead
        of failing; the daemon runs so, a library user gets ModelUnavailable."""
        self.settings = settings or Settings.from_env()
        self.clock = clock or SystemClock()
        one_blas_thread()
        # A PostgreSQL URL (path, or settings.database_url when no path is given) or a DuckDB file.
        self.path = str(path if path is not None else self.settings.database_url or self.settings.db_path)
        self.degraded: str | None = None  # why the model is unavailable; None when it serves
        self._allow_model_change = allow_model_change
        self._model_retry_at = time.monotonic() + MODEL_RETRY_S
        # The store first: a damaged, locked or too new one is refused at once, not after the
        # seconds the model takes to load.
        self.store_db: MemoryStore = open_store(self.path, self.clock.now())
        self.path = self.store_db.path  # a URL without its password: shown in health and errors
        try:
            self.embedder = embedder or self._load_model()
        except ModelUnavailable as e:
            if not degraded_ok:
                self.store_db.close()
                raise
            self.degraded = str(e)
        except BaseException:
            self.store_db.close()
            raise
        if self.degraded:
            dim = int(self.store_db.get_meta("model_dim") or 0)
            self.embedder = UnavailableEmbedder(self.settings.model, dim, self.degraded)
        self._lock = threading.RLock()
        self.redact = Redactor(self.settings.redact_patterns)
        self.weights = Weights.from_settings(self.settings)
        self._reference: np.ndarray | None = None  # embeddings of retrieve.REFERENCE_TEXTS
        self._ce: CrossEncoder | None = None  # the reranker, loaded at the first recall needing it
        self._ce_failed = False
        try:
            self.model_changed = self._check_model(allow_model_change)
        except BaseException:
            self.store_db.close()  # refused (another model): no connection may outlive it
            raise
        self._batch: _BatchSims | None = None
        self._beats: dict[str, tuple[str, datetime]] = {}  # session -> (user, heartbeat last written)
        self._feed_mark = 0  # the change number the derived indexes are up to (catch_up)
        self._feed_checked = self._outcomes_read = time.monotonic()
        try:
            self._init_continuity()
            self.rebuild_indexes()  # reads every memory: a damaged block is found here (DatabaseDamaged)
        except BaseException:
            self.store_db.close()
            raise

    # -- lifecycle -----------------------------------------------------------
    def _load_model(self) -> Embedder:
        s = self.settings
        return load_embedder(s.model, s.model_cache, s.torch_threads, onnx=s.onnx)

    def retry_model(self, force: bool = False) -> bool:
        """While degraded, try to load the model again (at most every MODEL_RETRY_S unless
        force); on success embed the rows stored without a vector. True when it came back."""
        if not self.degraded or (not force and time.monotonic() < self._model_retry_at):
            return False
        self._model_retry_at = time.monotonic() + MODEL_RETRY_S
        import importlib
        importlib.invalidate_caches()  # a model package installed since the last try
        try:
            emb = self._load_model()
        except ModelUnavailable as e:
            self.degraded = str(e)
            self.embedder.reason = self.degraded
            return False
        with self._lock:
            self.embedder, self.degraded = emb, None
            self.model_changed = self._check_model(self._allow_model_change)
            self.rebuild_indexes()  # re-embeds every row stored while the model was away
        return True

    def _check_model(self, allow_change: bool) -> bool:
        if self.degraded:
            return False  # checked when the model is back (retry_model)
        name, dim = self.store_db.get_meta("model_name"), self.store_db.get_meta("model_dim")
        mine = (self.embedder.name, str(self.embedder.dim))
        if name is None:
            self.store_db.set_meta("model_name", mine[0])
            self.store_db.set_meta("model_dim", mine[1])
            return False
        if (name, dim) != mine:
            if allow_change:
                return True
            raise ModelMismatch(
                f"{self.path} was embedded with {name} ({dim} dims) but this engram uses "
                f"{mine[0]} ({mine[1]} dims); vectors from two models must not be mixed. "
                f"Run `engram reindex --reembed` to re-embed every memory with {mine[0]}, "
                f"or set ENGRAM_MODEL={name}."
            )
        return False

    def rebuild_indexes(self) -> None:
        """Rebuild the derived indexes (vectors, BM25, graph) from the rows."""
        with self._lock:
            # Taken before the rows are read: a change committed meanwhile is applied again by
            # the next catch_up, which is harmless (applying a change twice is applying it once).
            mark = self.store_db.change_mark()
            # Sized once: growing by doubling would copy every column about log2(n) times.
            idx = self._new_index(self.store_db.count_live_memories() + 1024)
            missing: list[Memory] = []

            def rows():
                for m, blob in self.store_db.iter_index_rows():
                    vec = None
                    if blob is not None:
                        vec = np.frombuffer(blob, dtype=np.float32)
                        if vec.shape[0] != self.embedder.dim:
                            vec = None
                    if vec is None:
                        missing.append(m)
                    yield m, vec
            idx.load(rows())
            if missing and not self.model_changed and not self.degraded:
                self._reembed(missing, idx)
            self.index = idx
            self.graph = MemoryGraph(lambda: ((s, d, w) for s, d, w, _ in self.store_db.all_edges()))
            self.outcomes = self.store_db.session_outcomes()
            self.index_built_at = self.clock.now()
            self._feed_mark = mark
            self._feed_checked = self._outcomes_read = time.monotonic()

    def catch_up(self, force: bool = False) -> int:
        """Apply the writes other servers committed to the database since the last look, so a
        read here ranks over the rows every server sees. Asks at most every FEED_POLL_S unless
        `force` (a write about to be resolved must meet a memory stored elsewhere a moment ago).
        This server's own writes are in the indexes already; meeting them again in the feed
        changes nothing. A DuckDB file has no other writer: its feed is empty, nothing is read.
        Returns how many memories were applied."""
        with self._lock:
            t = time.monotonic()
            if not force and t - self._feed_checked < FEED_POLL_S:
                return 0
            if self._feed_mark and t - self._feed_checked > FEED_MAX_GAP_S:
                self.rebuild_indexes()  # changes older than the feed keeps may be gone from it
                return len(self.index)
            self._feed_checked = t
            mark, ids, edges = self.store_db.changes_since(self._feed_mark)
            if ids or edges:
                self._apply_changes(ids, edges)
            self._feed_mark = mark
            if mark and t - self._outcomes_read >= OUTCOMES_POLL_S:
                self.outcomes = self.store_db.session_outcomes()
                self._outcomes_read = t
            return len(ids)

    def _apply_changes(self, ids: Sequence[str], edges: bool) -> None:
        """Bring the indexes in step with these memories' rows (a missing row was deleted)."""
        idx = self.index
        rows = {m.id: (m, blob) for m, blob in self.store_db.index_rows(ids)} if ids else {}
        stale = False  # a text changed or a memory went: handoff validations must start over
        for mid in ids:
            got = rows.get(mid)
            r = idx.row_of.get(mid)
            if got is None:
                if r is not None:
                    idx.remove(mid)
                    self.graph.remove_nodes([mid])
                    stale = True
                continue
            m, blob = got
            vec = None
            if blob is not None and (r is None or idx.texts[r] != m.content):
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape[0] != self.embedder.dim:
                    vec = None  # written by a server on another model: kept out of vector search
            stale |= r is not None and idx.texts[r] != m.content
            idx.upsert(m, vec)
        if edges:
            # Which edges changed is not in the feed: the table is read again, when next needed.
            self.graph = MemoryGraph(lambda: ((s, d, w) for s, d, w, _ in self.store_db.all_edges()))
        if stale:
            self.activity_epoch += 1

    def _new_index(self, capacity: int = 1024) -> MemoryIndex:
        s = self.settings
        return MemoryIndex(self.embedder.dim, capacity, context_window=s.context_window,
                           context_weight=s.context_weight, context_terms=s.context_terms)

    def _reembed(self, memories: Sequence[Memory], idx: MemoryIndex) -> None:
        for i in range(0, len(memories), 256):
            batch = memories[i:i + 256]
            vecs = self.embedder.embed_batch([m.content for m in batch])
            with self.store_db.transaction():
                for m, v in zip(batch, vecs):
                    self.store_db.update_memory(m.id, embedding=v)
            for m, v in zip(batch, vecs):
                idx.upsert(m, v)

    def reembed_all(self) -> int:
        """Re-embed every memory with the current model and record it as the model of record."""
        with self._lock:
            mems = [m for m, _ in self.store_db.iter_index_rows()]
            idx = self._new_index()
            self._reembed(mems, idx)
            self.store_db.set_meta("model_name", self.embedder.name)
            self.store_db.set_meta("model_dim", str(self.embedder.dim))
            self.model_changed = False
            self.rebuild_edges()
            self.rebuild_indexes()
            return len(mems)

    def rebuild_edges(self, ids: Sequence[str] | None = None) -> int:
        """Recompute graph edges for the given memories (default: all active)."""
        with self._lock:
            idx = self.index
            if ids is None:
                ids = [i for i in idx.ids if i is not None and idx.status[idx.row_of[i]] == 0]
            n = 0
            with self.store_db.transaction():
                self.store_db.delete_edges_of(ids)
                self.graph.remove_nodes(ids)
                for mid in ids:
                    r = idx.row_of.get(mid)
                    if r is None:
                        continue
                    cand = np.flatnonzero((idx.user[: idx.n] == idx.user[r]) & (idx.status[: idx.n] == 0))
                    cand = cand[cand != r]
                    edges = nearest_edges(mid, idx.cosine(idx.vectors[r]), idx.ids, cand,
                                          self.settings.edge_threshold, self.settings.max_edges)
                    self.store_db.add_edges(idx.users.names[idx.user[r]], edges)
                    self.graph.add_edges(edges)
                    n += len(edges)
            return n

    def index_status(self) -> dict[str, Any]:
        """The derived indexes: memory rows and graph edges held, and when they were built."""
        self.catch_up()
        return {"rows": len(self.index), "edges": self.graph.edge_count(),
                "built_at": self.index_built_at}

    def index_counts(self) -> dict[tuple[str, str], int]:
        """Memories by (memory_type, status) as the index holds them (after catch_up)."""
        self.catch_up()
        return self.index.type_status_counts()

    def backup(self, dest: Path) -> int:
        """A consistent copy of the store's file at dest (engram.backup.take_backup checks it)."""
        return self.store_db.backup(dest)

    def schema_version(self) -> int:
        return self.store_db.schema_version()

    def close(self) -> None:
        with self._lock:
            self.store_db.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def lock(self) -> threading.RLock:
        """The engine's lock (reentrant): a caller that reads and writes in several steps
        (maintenance, export, import) holds it across them."""
        return self._lock

    def user_of(self, user_id: str | None) -> str:
        """The user a call acts for: user_id checked, ENGRAM_USER's when None."""
        if user_id is None:
            return self.settings.user_id
        if not isinstance(user_id, str) or not user_id.strip() or len(user_id) > 200:
            raise EngramError("user_id must be a non-empty string of at most 200 characters")
        return user_id

    # -- write path ----------------------------------------------------------
    def store(self, content: str, memory_type: str = "fact", importance: float = 0.5,
              tags: Sequence[str] | None = None, task_id: str | None = None,
              metadata: dict | None = None, provenance: Sequence[str] = (),
              user_id: str | None = None, session_id: str | None = None, pinned: bool = False,
              created_at: datetime | None = None, resolve_conflicts: bool = True,
              conversation: str | None = None, chunk: bool = True,
              project: str | None = None) -> StoreResult:
        """Store one memory, resolving it against what is already known.

        Returns the action taken (new, reinforce, merge, replace) and the memory touched.
        Content over ENGRAM_CHUNK_SIZE characters is split into linked chunks unless `chunk` is
        False (a handoff, failure or progress record is one memory however long). `conversation`
        marks the memory as a turn of that conversation (a chat import): turns of one
        conversation are searched with the turns just before them; a memory without one stands
        alone. `project`: the project it belongs to (None: none, seen from every project); it is
        resolved only against memories of the same project, so one project's convention never
        replaces another's.
        """
        return self.store_many([dict(content=content, memory_type=memory_type, importance=importance,
                                     tags=tags, task_id=task_id, metadata=metadata,
                                     provenance=provenance, user_id=user_id, session_id=session_id,
                                     pinned=pinned, created_at=created_at,
                                     resolve_conflicts=resolve_conflicts,
                                     conversation=conversation, chunk=chunk, project=project)])[0]

    def _prepare(self, item: dict) -> dict:
        s = self.settings
        refuse_unknown("store", item, STORE_FIELDS)
        content = check_text(item.get("content"), "content", s.max_content_chars)
        metadata = item.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise EngramError("metadata must be an object")
        prov = item.get("provenance") or ()
        if isinstance(prov, str):
            prov = (prov,)
        task_id = item.get("task_id")
        if task_id is not None and not isinstance(task_id, str):
            raise EngramError("task_id must be a string")
        created = item.get("created_at")
        return dict(
            content=self.redact(content),  # verbatim: no strip, no re-casing
            memory_type=check_type(item.get("memory_type", "fact")),
            importance=check_importance(item.get("importance", 0.5)),
            tags=tuple(self.redact(t) for t in check_tags(item.get("tags"))),
            task_id=task_id,
            metadata=self.redact.value(metadata),
            provenance=tuple(str(p) for p in prov),
            user_id=self.user_of(item.get("user_id")),
            session_id=item.get("session_id"),
            pinned=bool(item.get("pinned", False)),
            created_at=utc(created) if created is not None else None,
            resolve_conflicts=bool(item.get("resolve_conflicts", True)),
            conversation=check_conversation(item.get("conversation")),
            chunk=bool(item.get("chunk", True)),
            project=check_project(item.get("project")),
        )

    def store_many(self, items: Sequence[dict]) -> list[StoreResult]:
        """Store several memories in one transaction; embeddings are computed in batches.

        A large batch is stored in waves: while one wave is resolved and written (Python, one
        core), the next is embedded on another thread (the model releases the GIL).
        """
        prepared = [self._prepare(dict(it)) for it in items]
        # A memory may only name a task of its own user (handoff and track_failure refuse the same).
        for task_id, user in {(p["task_id"], p["user_id"]) for p in prepared if p["task_id"] is not None}:
            self.get_task_row(task_id, user)
        waves: list[list[tuple[dict, list[str]]]] = [[]]
        for p in prepared:
            chunks = (split_chunks(p["content"], self.settings.chunk_size, self.settings.chunk_overlap)
                      if p["chunk"] else [p["content"]])
            if sum(len(c) for _, c in waves[-1]) >= STORE_WAVE:
                waves.append([])
            waves[-1].append((p, chunks))

        def embed(wave: list[tuple[dict, list[str]]]) -> np.ndarray | None:
            if self.degraded:
                return None  # stored without vectors; embedded when the model is back
            return self.embedder.embed_batch([t for _, chunks in wave for t in chunks])

        out: list[StoreResult] = []
        vecs = embed(waves[0])
        with ThreadPoolExecutor(1) if len(waves) > 1 else nullcontext() as pool, self._lock:
            self.catch_up(force=True)  # resolve against what every server stored
            try:
                with self.store_db.transaction(), self.store_db.buffered():
                    ahead: list[Future] = []
                    for i, wave in enumerate(waves):
                        if ahead:
                            vecs = ahead.pop().result()
                        if i + 1 < len(waves):
                            ahead.append(pool.submit(embed, waves[i + 1]))
                        self._batch = _BatchSims(self.index, vecs) if vecs is not None and len(vecs) > 1 \
                            else None
                        k = 0
                        for p, chunks in wave:
                            part = [None] * len(chunks) if vecs is None else vecs[k:k + len(chunks)]
                            if len(chunks) == 1:
                                out.append(self._store_one(p, part[0], k))
                            else:
                                out.append(self._store_chunks(p, chunks, part, k))
                            k += len(chunks)
            except BaseException:
                # The rows rolled back; the derived indexes must follow them.
                self.rebuild_indexes()
                raise
            finally:
                self._batch = None
        return out

    def _store_chunks(self, p: dict, chunks: list[str], vecs: np.ndarray, col: int) -> StoreResult:
        group = new_id()
        results = []
        # chunk_start: where the chunk's text begins in the stored text (chunks overlap), so the
        # whole text can be put back together byte for byte.
        starts = [a for a, _ in chunk_spans(p["content"], self.settings.chunk_size, self.settings.chunk_overlap)]
        for i, (text, v, at) in enumerate(zip(chunks, vecs, starts, strict=True)):
            q = dict(p, content=text, resolve_conflicts=False,
                     metadata=dict(p["metadata"], chunk_group=group, chunk=i + 1, chunks=len(chunks),
                                   chunk_start=at))
            results.append(self._store_one(q, v, col + i))
        ids = [r.memory.id for r in results]
        links = [(a, b, 1.0) for a, b in pairwise(ids)]
        with self.store_db.transaction():
            self.store_db.add_edges(p["user_id"], links)
        self.graph.add_edges(links)
        first = results[0]
        return StoreResult("new", first.memory, reason=f"split into {len(ids)} chunks",
                           chunks=tuple(ids))

    def _store_one(self, p: dict, vec: np.ndarray | None, col: int = 0) -> StoreResult:
        now = p["created_at"] or self.clock.now()
        if vec is None:  # degraded: nothing to compare with, so no resolution and no edges
            why = f"stored without a vector (the embedding model is unavailable: {self.degraded}); " \
                "it is embedded when the model is back"
            return self._insert(resolve.Resolution("new", None, None, why), p, None, now, None, ())
        idx = self.index
        user_code = idx.users.get(p["user_id"])
        resolving = p["resolve_conflicts"] and p["memory_type"] in RESOLVABLE_TYPES
        peers = same_type = np.zeros(0, dtype=np.int64)
        sims = None
        if user_code is not None and idx.n:
            mine = idx.alive[: idx.n] & (idx.user[: idx.n] == user_code) & (idx.status[: idx.n] == 0) \
                & idx.in_project(p["project"], exact=True)
            same = mine & (idx.mtype[: idx.n] == MEMORY_TYPES.index(p["memory_type"]))
            peers, same_type = np.flatnonzero(mine), np.flatnonzero(same)
            if self._batch is not None:
                sims = self._batch.sims(vec, col)
            else:
                # Only the nearest are read below: five of the same type, and the edges.
                sims = np.full(idx.n, -np.inf, dtype=np.float32)
                masks = [mine, same] if resolving else [mine]
                for rows, s in idx.nearest(vec, masks, max(5, self.settings.max_edges), "vectors"):
                    sims[rows] = s
        decision = resolve.Resolution("new", None, None, "no similar memory")
        if resolving and len(same_type):
            top = top_rows(sims, same_type, 5)
            top = top[sims[top] >= min(resolve.SIMILARITY_FLOOR, self.settings.dedup_threshold)]
            candidates = [(idx.ids[r], idx.texts[r], float(sims[r])) for r in top]
            if candidates:
                decision = resolve.decide(p["content"], candidates,
                                          reinforce_threshold=self.settings.reinforce_threshold,
                                          dedup_threshold=self.settings.dedup_threshold)
        if decision.action == "reinforce":
            return self._reinforce(decision, p, now)
        if decision.action == "merge":
            return self._merge(decision, p, now)
        return self._insert(decision, p, vec, now, sims, peers)

    def _insert(self, decision, p: dict, vec: np.ndarray, now: datetime, sims, peers) -> StoreResult:
        old = None
        mem = Memory(id=new_id(), content=p["content"], memory_type=p["memory_type"],
                     importance=p["importance"], recall_count=0, created_at=now,
                     last_recalled_at=None, user_id=p["user_id"], task_id=p["task_id"],
                     session_id=p["session_id"], tags=p["tags"], metadata=p["metadata"],
                     provenance=p["provenance"], status="active", valid_from=now,
                     pinned=p["pinned"], updated_at=now, conversation=p["conversation"],
                     project=p["project"])
        edges = []
        if sims is not None and len(peers):
            edges = nearest_edges(mem.id, sims, self.index.ids, peers,
                                  self.settings.edge_threshold, self.settings.max_edges)
        with self.store_db.transaction():
            if decision.action == "replace":
                old = self.store_db.get_memory(decision.target_id)
                # The current version answers for the sources of the one it replaces.
                mem = Memory(**{**mem.__dict__, "supersedes": old.id,
                                "importance": max(mem.importance, old.importance),
                                "provenance": tuple(dict.fromkeys(old.provenance + mem.provenance))})
                self.store_db.update_memory(old.id, status="superseded", valid_to=now,
                                            superseded_by=mem.id, updated_at=now)
                self.store_db.add_event(old.id, now, "superseded", {"by": mem.id, "reason": decision.reason})
            self.store_db.insert_memory(mem, vec)
            self.store_db.add_event(mem.id, now, decision.action,
                                    {"reason": decision.reason, "target": decision.target_id})
            self.store_db.add_edges(mem.user_id, edges, new_source=True)
        self.index.upsert(mem, vec)
        self.graph.add_edges(edges)
        if old is not None:
            old = replace(old, status="superseded", valid_to=now, superseded_by=mem.id, updated_at=now)
            self.index.upsert(old, None)
        return StoreResult(decision.action, mem, old, decision.similarity, decision.reason)

    @staticmethod
    def _absorbed(old: Memory, p: dict, now: datetime, **changes: Any) -> tuple[Memory, dict]:
        """`old` after taking in a new store `p` (reinforce, merge): the higher importance, both
        sets of sources and tags, plus `changes`. Returns it and the fields to write."""
        fields = dict(importance=max(old.importance, p["importance"]),
                      provenance=tuple(dict.fromkeys(old.provenance + p["provenance"])),
                      tags=tuple(dict.fromkeys(old.tags + p["tags"])), updated_at=now, **changes)
        return replace(old, **fields), fields

    def _reinforce(self, decision, p: dict, now: datetime) -> StoreResult:
        old = self.store_db.get_memory(decision.target_id)
        # Storing a known fact again is a use of it, as a recall is (decay.py).
        mem, fields = self._absorbed(old, p, now, recall_count=old.recall_count + 1, last_recalled_at=now,
                                     stability=recalled_stability(old, now))
        with self.store_db.transaction():
            self.store_db.update_memory(old.id, **fields)
            self.store_db.add_event(old.id, now, "reinforce", {"reason": decision.reason, "added": p["content"]})
        self.index.upsert(mem, None)
        return StoreResult("reinforce", mem, old, decision.similarity, decision.reason)

    def _merge(self, decision, p: dict, now: datetime) -> StoreResult:
        old = self.store_db.get_memory(decision.target_id)
        content = decision.merged_content or resolve.merge_contents(old.content, p["content"])
        vec = self.embedder.embed_batch([content])[0]
        mem, fields = self._absorbed(old, p, now, content=content)
        with self.store_db.transaction():
            self.store_db.update_memory(old.id, embedding=vec, **fields)
            self.store_db.add_event(old.id, now, "merge",
                                    {"reason": decision.reason, "previous": old.content,
                                     "added": p["content"]})
        row = self.index.upsert(mem, vec)
        self.activity_epoch += 1  # a memory's text changed: validations that read it are stale
        if self._batch is not None:
            self._batch.dirty.add(row)
        return StoreResult("merge", mem, old, decision.similarity, decision.reason)

    def update(self, memory_id: str, content: str, user_id: str | None = None) -> StoreResult:
        """Rewrite a memory's content (the agent's own merge or correction). History keeps the old text."""
        content = self.redact(check_text(content, "content", self.settings.max_content_chars))
        with self._lock:
            self.catch_up(force=True)  # its new edges are computed against every server's rows
            old = self.get(memory_id, user_id)
            if old.status != "active":
                raise EngramError(f"memory {memory_id} is {old.status}; only active memories can be updated")
            if content == old.content:  # no new version, no history event, no step re-checked
                return StoreResult("update", old, old, None, "content unchanged; nothing written")
            if record_document(old) is not None:
                # Its text is written from its fields, which the plan and the timeline read: a new
                # text would leave them saying something else.
                raise EngramError(
                    f"memory {memory_id} is a {old.memory_type} record, whose text is written from "
                    f"its fields (read by the task's plan and timeline); record a new one with "
                    f"{RECORD_TOOLS[old.memory_type]} instead of rewriting its text")
            now = self.clock.now()
            vec = self.embedder.embed_batch([content])[0]
            with self.store_db.transaction():
                self.store_db.update_memory(old.id, embedding=vec, content=content, updated_at=now)
                self.store_db.add_event(old.id, now, "update", {"previous": old.content})
            mem = self.store_db.get_memory(old.id)
            self.index.upsert(mem, vec)
            self.activity_epoch += 1
        self.rebuild_edges([mem.id])
        return StoreResult("update", mem, old, None, "content rewritten")

    # -- read path -----------------------------------------------------------
    def context(self, query: str, max_tokens: int = 1500, task_id: str | None = None, limit: int = 20,
                tags: Sequence[str] | str | None = None, user_id: str | None = None,
                session_id: str | None = None, scope: Scope = NO_PROJECT) -> dict:
        """One ready-to-read <memory> block within `max_tokens`: the latest handoff with its next
        steps' status, then the relevant memories, then pitfalls, each kept only if it still fits.
        `tags`: only memories (and a handoff) with at least one of them.

        Returns {context, tokens, memory_ids, interrupted_sessions}.
        """
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 50 <= max_tokens <= 100_000:
            raise EngramError("max_tokens must be a whole number from 50 to 100000")
        r = self.recall_context(query, limit=limit, task_id=task_id, tags=check_tags(tags) or None,
                                user_id=user_id, session_id=session_id,
                                min_share=self.settings.context_min_share, scope=scope, strong_only=True)
        text, ids = pack_context(r, max_tokens)
        return {"context": text, "tokens": estimate_tokens(text), "memory_ids": ids,
                "interrupted_sessions": r["interrupted_sessions"]}

    def get(self, memory_id: str, user_id: str | None = None) -> Memory:
        if not isinstance(memory_id, str) or not memory_id:
            raise EngramError("memory_id must be a non-empty string")
        m = self.store_db.get_memory(memory_id)
        if m is None or m.user_id != self.user_of(user_id) or m.status == "deleted":
            raise NotFound(f"no memory with id {memory_id!r}")
        return m

    def memory_view(self, memory_id: str, user_id: str | None = None) -> dict:
        """One memory as the clients show it: its fields, quality score and history."""
        m = self.get(memory_id, user_id)
        return {**m.to_dict(), "quality_score": self.quality(m), "history": self.store_db.events(m.id)}

    def history(self, memory_id: str, user_id: str | None = None) -> list[dict]:
        self.get(memory_id, user_id)
        return self.store_db.events(memory_id)

    def recall(self, query: str, limit: int = 10, memory_type: str | None = None,
               task_id: str | None = None, tags: Sequence[str] | None = None,
               as_of: datetime | None = None, mode: str = "hybrid", explain: bool = False,
               user_id: str | None = None, graph: bool = True, reinforce: bool = True,
               exclude_types: Sequence[str] = (), min_share: float = 0.0,
               scope: Scope = NO_PROJECT, strong_only: bool = False, rerank: bool | None = None) -> list[Hit]:
        """Hybrid search, then (with the `rerank` setting) the cross-encoder's order of the first
        candidates. Each hit is `strong` or `weak` (retrieve.confidence); only strong hits are
        reinforced (unless reinforce=False); a query nothing stored is relevant to returns
        nothing (see retrieve's relevance floor).
        min_share: return only hits scoring at least this share of the best hit's score.
        scope: the project whose memories (with those of no project) are searched; the default,
        no project, searches only the memories of no project (engram.types.Scope).
        strong_only: return only strong hits (what is pushed into a context unasked).
        rerank: False keeps the first stage's order even with the setting on (to compare)."""
        check_text(query, "query", 10_000)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise EngramError(f"limit must be a whole number from 1 to 1000, got {limit!r}")
        if mode not in SEARCH_MODES:
            raise EngramError(f"mode must be one of {', '.join(SEARCH_MODES)}; got {mode!r}")
        if memory_type is not None:
            check_type(memory_type)
        tags = check_tags(tags) or None
        if as_of is not None:
            as_of = utc(as_of)
        user = self.user_of(user_id)
        if self.degraded:
            mode = "bm25"  # keyword recall only until the model is back (the result says so)
        qvec = self.embedder.embed_query(query) if mode != "bm25" else None
        if qvec is not None and self._reference is None:
            self._reference = self.embedder.embed_batch(list(REFERENCE_TEXTS))
        with self._lock:
            self.catch_up()
            now = self.clock.now()
            idx = self.index
            mask = idx.mask(user, memory_type, task_id, tags, as_of, scope=scope)
            for t in exclude_types:
                mask &= idx.mtype[: idx.n] != MEMORY_TYPES.index(t)
            failures = {idx.sessions[s]: f for s, (_, f) in self.outcomes.items() if s in idx.sessions}
            # The second stage reads the fused candidates: hybrid only (bm25 and vector are the
            # single searches, kept as they are to compare with).
            ce = self._cross_encoder() if mode == "hybrid" and rerank is not False else None
            pairs = self.settings.rerank_pairs
            ranked = rank(idx, self.graph, query, qvec, mask, to_days(as_of or now), mode=mode,
                          weights=self.weights, limit=max(limit, pairs) if ce else limit,
                          session_failures=failures, use_graph=graph,
                          reference_cos=None if qvec is None else self._reference @ qvec)
            if ce is not None:
                ranked = rerank_hits(ranked, lambda rows: ce.score(query, [idx.texts[r] for r in rows]),
                                     pairs, self.settings.rerank_weight)[:limit]
            if strong_only:
                ranked = [t for t in ranked if confidence(t[2])[0] == "strong"]
            if min_share > 0 and ranked:
                # Cut before reinforcing: what is not returned must not learn from the query.
                top = ranked[0][1]
                ranked = [t for t in ranked if t[1] >= min_share * top]
            ids = [idx.ids[r] for r, _, _ in ranked]
            # Only a strong hit learns from the query: a weak one was shown, not confirmed.
            strong = [t for t in ranked if confidence(t[2])[0] == "strong"]
            mems: dict[str, Memory] = {}
            if reinforce and strong and as_of is None:
                # Each hit grows by its share of the answer: score / best score (decay.py).
                best = max(score for _, score, _ in strong)
                share = {idx.ids[r]: (score / best if best > 0 else 1.0) for r, score, _ in strong}
                mems = self.store_db.reinforce(
                    list(share), now, lambda m, at: recalled_stability(m, at, share.get(m.id, 1.0)))
                idx.touch(mems.values())
            rest = [i for i in ids if i not in mems]
            if rest:
                mems.update(self.store_db.get_memories(rest))
            hits = []
            for (_, score, parts), mid in zip(ranked, ids):
                m = mems[mid]
                s, f = self.outcomes.get(m.session_id, (0, 0))
                hits.append(Hit(m, score, quality_score(m.importance, m.recall_count, s, f),
                                parts if explain else None, *confidence(parts)))
            return hits

    def _cross_encoder(self):
        """The reranker when the `rerank` setting is on and it loads, else None (a failure to
        load is logged once; recall then keeps the first stage's order and floor)."""
        if not self.settings.rerank or self._ce_failed:
            return None
        if self._ce is None:
            try:
                self._ce = CrossEncoder(threads=self.settings.rerank_threads)
            except (ModelUnavailable, OSError, RuntimeError) as e:
                self._ce_failed = True
                log.warning("reranker unavailable, recall keeps the first stage's order: %s", e)
                return None
        return self._ce

    def quality(self, m: Memory) -> float:
        s, f = self.outcomes.get(m.session_id, (0, 0))
        return quality_score(m.importance, m.recall_count, s, f)

    # -- forget --------------------------------------------------------------
    def forget(self, memory_id: str | None = None, query: str | None = None,
               user_id: str | None = None, dry_run: bool = False, scope: Scope = NO_PROJECT) -> list[str]:
        """Delete a memory by id (any project's), or every memory in `scope` that contains all
        the words of `query`.

        Irreversible: the rows, their edges and history go, and so do the derived indexes' entries.
        """
        if (memory_id is None) == (query is None):
            raise EngramError("give exactly one of memory_id or query")
        user = self.user_of(user_id)
        with self._lock:
            if memory_id is not None:
                ids = [self.get(memory_id, user).id]
            else:
                check_text(query, "query", 10_000)
                self.catch_up(force=True)
                ids = self._matching_all_terms(query, user, scope)
            if dry_run or not ids:
                return ids
            self.remove_memories(ids)
            return ids

    def _matching_all_terms(self, query: str, user: str, scope: Scope) -> list[str]:
        from .lexical import tokenize
        terms = set(tokenize(query, query=True))
        if not terms:
            raise EngramError("query has no searchable words")
        idx = self.index
        mask = idx.mask(user, statuses=("active", "superseded", "consolidated"), scope=scope)
        rows = None
        for t in terms:
            p = idx.bm25.rows_with(t)
            rows = p if rows is None else rows & p
        # Postings also hold words a row borrows from its context; forget only its own.
        own = idx.bm25.own_terms
        return [idx.ids[r] for r in sorted(rows or ()) if mask[r] and terms <= own.get(r, {}).keys()]

    def remove_memories(self, ids: Sequence[str]) -> None:
        """Delete memories for good: their rows, index entries and graph nodes (their edges go too)."""
        with self.store_db.transaction():
            self.store_db.delete_memories(ids)
        for i in ids:
            self.index.remove(i)
        self.graph.remove_nodes(ids)
        self.activity_epoch += 1

    # -- curation (the web panel, issue 17) ------------------------------------
    def list_memories(self, memory_type: str | None = None, task_id: str | None = None,
                      tags: Sequence[str] | None = None, as_of: datetime | None = None,
                      status: str = "active", offset: int = 0, limit: int = 50,
                      user_id: str | None = None, in_project: str | None = None) -> dict:
        """One page of the user's memories, newest first, filtered from the derived index (no scan
        of the table, so a page costs the same at 100k memories), each with its strength now.
        in_project: None every project's; "" only those of no project; else only that project's."""
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= 10**9:
            raise EngramError(f"offset must be a whole number from 0 to 1000000000, got {offset!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 500:
            raise EngramError(f"limit must be a whole number from 1 to 500, got {limit!r}")
        listable = ("active", "superseded", "consolidated")
        if status != "any" and status not in listable:
            raise EngramError(f"status must be one of {', '.join(listable)} or any; got {status!r}")
        if memory_type is not None:
            check_type(memory_type)
        tags = check_tags(tags) or None
        user = self.user_of(user_id)
        with self._lock:
            self.catch_up()
            idx = self.index
            eligible = idx.mask(user, memory_type, task_id, tags, as_of,
                                listable if status == "any" else (status,))
            if in_project is not None:
                eligible &= idx.in_project(in_project or None, exact=True)
            rows = np.flatnonzero(eligible)
            # Newest first; the row number breaks ties (rows are appended in creation order).
            order = np.lexsort((-rows, -idx.created[rows]))
            page = [idx.ids[r] for r in rows[order][offset:offset + limit]]
            mems = self.store_db.get_memories(page)
            now = self.clock.now()
            items = [self.memory_summary(mems[i], now) for i in page if i in mems]
        return {"total": len(rows), "offset": offset, "limit": limit, "memories": items}

    def memory_summary(self, m: Memory, now: datetime) -> dict:
        return {"id": m.id, "content": m.content, "memory_type": m.memory_type, "status": m.status,
                "importance": m.importance, "tags": list(m.tags), "task_id": m.task_id,
                "pinned": m.pinned, "created_at": m.created_at.isoformat(),
                "recall_count": m.recall_count, "project": m.project,
                "strength": round(memory_strength(m, now), 6)}

    def set_pinned(self, memory_id: str, pinned: bool, user_id: str | None = None) -> Memory:
        """Pin (never decays in ranking, never pruned or consolidated) or unpin a memory."""
        if not isinstance(pinned, bool):
            raise EngramError(f"pinned must be true or false, got {pinned!r}")
        with self._lock:
            old = self.get(memory_id, user_id)
            now = self.clock.now()
            with self.store_db.transaction():
                self.store_db.update_memory(old.id, pinned=pinned, updated_at=now)
                self.store_db.add_event(old.id, now, "pin" if pinned else "unpin")
            mem = self.store_db.get_memory(old.id)
            self.index.upsert(mem, None)
            self.activity_epoch += 1
        return mem

    def strength_curve(self, memory_id: str, days: int = 90, user_id: str | None = None) -> dict:
        """A memory's strength from its last recall (or creation) until now, and projected `days`
        ahead if nothing recalls it. Before the last recall the stability in effect is not
        recorded, so the past starts there."""
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 3650:
            raise EngramError(f"days must be a whole number from 1 to 3650, got {days!r}")
        m = self.get(memory_id, user_id)
        now = self.clock.now()
        stab = memory_stability(m)
        touched = m.last_recalled_at or m.created_at
        threshold = self.settings.prune_threshold
        return {
            "memory_id": m.id, "importance": m.importance, "pinned": m.pinned,
            "stability_days": round(stab, 4),
            "initial_stability_days": round(initial_stability(m.memory_type, m.importance), 4),
            "recall_count": m.recall_count, "last_touched_at": touched.isoformat(), "now": now.isoformat(),
            "strength_now": round(memory_strength(m, now), 6),
            "prune_threshold": threshold,
            "days_until_prune": None if m.pinned else round(days_until_prune(m, threshold, now), 2),
            "past": strength_points(m.importance, stab, touched, touched, now),
            "projected": strength_points(m.importance, stab, touched, now, now + timedelta(days=days)),
        }

    def versions(self, memory_id: str, user_id: str | None = None) -> dict:
        """The supersession chain through this memory (oldest first: what it replaced, what replaced
        it, the consolidation it went into) and the memories a consolidation merged into it."""
        m = self.get(memory_id, user_id)
        chain, seen = [m], {m.id}
        for link in ("supersedes", "superseded_by"):
            cur = m
            while getattr(cur, link) and getattr(cur, link) not in seen and len(seen) < 1000:
                nxt = self.store_db.get_memory(getattr(cur, link))
                if nxt is None or nxt.user_id != m.user_id:
                    break  # pruned or erased: the chain ends here
                seen.add(nxt.id)
                if link == "supersedes":
                    chain.insert(0, nxt)
                else:
                    chain.append(nxt)
                cur = nxt
        sources: list[str] = []
        for e in self.store_db.events(m.id):
            if e["action"] == "consolidate":
                sources += e["detail"].get("sources", [])
        found = self.store_db.get_memories(sources)
        now = self.clock.now()
        return {"memory_id": m.id,
                "chain": [{**self.memory_summary(x, now), "valid_from": _iso(x.valid_from),
                           "valid_to": _iso(x.valid_to), "supersedes": x.supersedes,
                           "superseded_by": x.superseded_by} for x in chain],
                "consolidated_from": [self.memory_summary(found[i], now) for i in sources if i in found],
                "consolidated_from_missing": [i for i in sources if i not in found]}


def _iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt else None

# The fields an item of store_many may carry: Engram.store's parameters.
STORE_FIELDS: tuple[str, ...] = tuple(inspect.signature(Engram.store).parameters)[1:]
