"""Writes: store (resolved against what is known: new, reinforce, merge, replace), update, forget.
Each write goes to the rows and the derived indexes together (pin and tier: engine/tiers.py)."""

from __future__ import annotations

import inspect
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any, Sequence

import numpy as np

from engram.core.documents import RECORD_TOOLS, record_document
from engram.core.ids import new_id
from engram.core.types import MEMORY_TYPES, NO_PROJECT, EngramError, Memory, Scope, StoreResult
from engram.core.validation import check_text
from engram.engine import resolution
from engram.engine.index_upkeep import Indexes
from engram.engine.state import EngineState
from engram.engine.tiers import refreshed_expiry
from engram.engine.write_items import checked_items
from engram.search.decay import recalled_stability
from engram.search.graph import nearest_edges
from engram.search.memory_index import MemoryIndex, to_days
from engram.search.vector_search import top_rows
from engram.text.chunking import chunk_spans, split_chunks

RESOLVABLE_TYPES = ("fact", "strategy", "assumption", "failure")
STORE_WAVE = 128  # texts embedded ahead while the previous wave is stored (store_many)
NEW = resolution.Resolution("new", None, None, "no similar memory")  # nothing to resolve against


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
        out = np.concatenate([self.base[col], idx.vectors[self.n0 : idx.n] @ vec])
        for r in self.dirty:
            out[r] = idx.vectors[r] @ vec
        return out


class Writes:
    """Every write of a memory: rows and derived indexes together, under the lock."""

    def __init__(self, p: EngineState, indexes: Indexes):
        self.p = p
        self.indexes = indexes
        self.batch: _BatchSims | None = None  # the similarities of the store_many batch being stored

    def store_memory(
        self,
        content: str,
        *,
        memory_type: str = "fact",
        importance: float = 0.5,
        tags: Sequence[str] | None = None,
        task_id: str | None = None,
        metadata: dict | None = None,
        provenance: Sequence[str] = (),
        user_id: str | None = None,
        session_id: str | None = None,
        pinned: bool = False,
        created_at: datetime | None = None,
        resolve_conflicts: bool = True,
        conversation: str | None = None,
        chunk: bool = True,
        project: str | None = None,
        tier: str | None = None,
        ttl_days: float | None = None,
    ) -> StoreResult:
        """Store one memory, resolving it against what is already known.

        Returns the action taken (new, reinforce, merge, replace) and the memory touched.
        Content over ENGRAM_CHUNK_SIZE characters is split into linked chunks unless `chunk` is
        False (a handoff, failure or progress record is one memory however long). `conversation`
        marks the memory as a turn of that conversation (a chat import): turns of one
        conversation are searched with the turns just before them, and a turn is stored as said,
        never resolved against other memories; a memory without one stands alone. `project`: the
        project it belongs to (None: none, seen from every project); it is resolved only against
        memories of the same project, so one project's convention never replaces another's.
        `tier` and `ttl_days`: how long it lasts (engine/tiers.py; None: the defaults); a
        restatement of a memory that expires pushes its expiry back instead of adding one.
        """
        return self.store_many(
            [
                dict(
                    content=content,
                    memory_type=memory_type,
                    importance=importance,
                    tags=tags,
                    task_id=task_id,
                    metadata=metadata,
                    provenance=provenance,
                    user_id=user_id,
                    session_id=session_id,
                    pinned=pinned,
                    created_at=created_at,
                    resolve_conflicts=resolve_conflicts,
                    conversation=conversation,
                    chunk=chunk,
                    project=project,
                    tier=tier,
                    ttl_days=ttl_days,
                )
            ]
        )[0]

    def store_many(self, items: Sequence[dict], *, fill_token_vectors: bool = True) -> list[StoreResult]:
        """Store several memories in one transaction, all or nothing: an item that is refused
        (bad input, another user's task) refuses the batch before anything is written, and the
        error names the item. Embeddings are computed in batches (_write).

        `fill_token_vectors`: False is a bulk write (history imported, a transcript captured):
        the turns' token vectors (recall computes its candidates' meanwhile) and a long turn's
        later chunks' embeddings (its first chunk finds it by meaning, every chunk's words by
        BM25) are left to the background fill (Indexes.fill_token_vectors), after which the
        store is as an eager write leaves it."""
        prepared = checked_items(self.p, items, STORE_FIELDS)
        refused = [(i, e) for i, e in enumerate(prepared) if isinstance(e, EngramError)]
        if refused:
            i, e = refused[0]
            raise e if len(items) == 1 else type(e)(f"item {i}: {e}")
        return self._write([p for p in prepared if not isinstance(p, EngramError)], fill_token_vectors)

    def store_batch(self, items: Sequence[dict], *, fill_token_vectors: bool = True) -> list[StoreResult | EngramError]:
        """Store several memories as store_many does, except that an item refused (bad input,
        another user's task) costs only itself: its place in the answer holds the error that
        refused it, and the others are stored (a whole transcript captured, a history
        imported). A fault of the store itself (a full disk, a lock) still fails the call."""
        prepared = checked_items(self.p, items, STORE_FIELDS)
        stored = iter(self._write([p for p in prepared if not isinstance(p, EngramError)], fill_token_vectors))
        return [p if isinstance(p, EngramError) else next(stored) for p in prepared]

    def _write(self, prepared: Sequence[dict], fill_token_vectors: bool) -> list[StoreResult]:
        """Write checked items in one transaction, in order (an item is resolved against the
        ones before it). A large batch is stored in waves: while one wave is resolved and
        written (Python, one core), the next is embedded on another thread (the model releases
        the GIL)."""
        if not prepared:
            return []
        # (item, its chunks, how many embedded now: a bulk write's turn, its first one; store_many)
        waves: list[list[tuple[dict, list[str], int]]] = [[]]
        size, overlap = self.p.settings.chunk_size, self.p.settings.chunk_overlap
        for p in prepared:
            chunks = split_chunks(p["content"], size, overlap) if p["chunk"] else [p["content"]]
            embedded = 1 if not fill_token_vectors and p["conversation"] is not None else len(chunks)
            if sum(k for _, _, k in waves[-1]) >= STORE_WAVE:
                waves.append([])
            waves[-1].append((p, chunks, embedded))

        def embed(wave: list[tuple[dict, list[str], int]]) -> np.ndarray | None:
            if self.p.degraded:
                return None  # stored without vectors; embedded when the model is back
            return self.p.embedder.embed_batch([t for _, chunks, k in wave for t in chunks[:k]])

        out: list[StoreResult] = []
        vecs = embed(waves[0])
        with ThreadPoolExecutor(1) if len(waves) > 1 else nullcontext() as pool, self.p.lock:
            self.indexes.catch_up(force=True)  # resolve against what every server stored
            try:
                with self.p.store_db.transaction(), self.p.store_db.buffered():
                    ahead: list[Future] = []
                    for i, wave in enumerate(waves):
                        if ahead:
                            vecs = ahead.pop().result()
                        if pool is not None and i + 1 < len(waves):  # a pool when there are waves ahead
                            ahead.append(pool.submit(embed, waves[i + 1]))
                        self.batch = _BatchSims(self.p.index, vecs) if vecs is not None and len(vecs) > 1 else None
                        k = 0
                        for p, chunks, embedded in wave:
                            part = [None] * len(chunks) if vecs is None else [*vecs[k : k + embedded]]
                            part += [None] * (len(chunks) - len(part))  # left to the fill
                            if len(chunks) == 1:
                                out.append(self._store_one(p, part[0], k))
                            else:
                                out.append(self._store_chunks(p, chunks, part, k))
                            k += embedded
            except BaseException:
                # The rows rolled back; the derived indexes must follow them.
                self.indexes.rebuild()
                raise
            finally:
                self.batch = None
        # The late-interaction stage's token vectors, once the rows are in, encoded outside the
        # lock (a turn left without them is filled in by the daemon, maintenance or recall).
        ids = [i for r in out for i in (r.chunks or (r.memory.id,))]
        if fill_token_vectors:
            self.indexes.tokens.fill(ids)
        else:
            self.indexes.tokens.defer(ids)
        return out

    def _store_chunks(self, p: dict, chunks: list[str], vecs: list[np.ndarray | None], col: int) -> StoreResult:
        group = new_id()
        results = []
        # chunk_start: where the chunk's text begins in the stored text (chunks overlap), so the
        # whole text can be put back together byte for byte.
        starts = [a for a, _ in chunk_spans(p["content"], self.p.settings.chunk_size, self.p.settings.chunk_overlap)]
        for i, (text, v, at) in enumerate(zip(chunks, vecs, starts, strict=True)):
            q = dict(
                p,
                content=text,
                resolve_conflicts=False,
                metadata=dict(p["metadata"], chunk_group=group, chunk=i + 1, chunks=len(chunks), chunk_start=at),
            )
            if v is None and not self.p.degraded:  # a bulk write's: the fill embeds it, gives its edges
                results.append(self._insert(NEW, q, None, q["created_at"] or self.p.clock.now(), None, ()))
                self.indexes.defer_vectors([results[-1].memory.id])
            else:
                results.append(self._store_one(q, v, col + i))
        ids = [r.memory.id for r in results]
        links = [(a, b, 1.0) for a, b in pairwise(ids)]
        with self.p.store_db.transaction():
            self.p.store_db.add_edges(p["user_id"], links)
        self.p.graph.add_edges(links)
        first = results[0]
        return StoreResult("new", first.memory, reason=f"split into {len(ids)} chunks", chunks=tuple(ids))

    def _store_one(self, p: dict, vec: np.ndarray | None, col: int = 0) -> StoreResult:
        now = p["created_at"] or self.p.clock.now()
        if vec is None:  # degraded: nothing to compare with, so no resolution and no edges
            why = (
                f"stored without a vector (the embedding model is unavailable: {self.p.degraded}); "
                "it is embedded when the model is back"
            )
            return self._insert(resolution.Resolution("new", None, None, why), p, None, now, None, ())
        idx = self.p.index
        user_code = idx.users.get(p["user_id"])
        # A turn of a conversation is a record of what was said then, not a statement of what is
        # true now: a later turn on the same subject neither replaces it nor is merged into it
        # (both were said; a question about either needs its own turn), as a captured episode is
        # never resolved either. Only the same turn stored again is recognised (_same_turn).
        resolving = p["resolve_conflicts"] and p["memory_type"] in RESOLVABLE_TYPES and p["conversation"] is None
        peers = same_type = np.zeros(0, dtype=np.int64)
        sims = None
        if user_code is not None and idx.n:
            mine = (
                idx.alive[: idx.n]
                & (idx.user[: idx.n] == user_code)
                & (idx.status[: idx.n] == 0)
                & idx.in_project(p["project"], exact=True)
                & (idx.expires[: idx.n] > to_days(now))  # expired: gone for every read, resolution too
            )
            # A statement is resolved against statements only: a turn stays as it was said.
            same = mine & (idx.mtype[: idx.n] == MEMORY_TYPES.index(p["memory_type"])) & ~idx.turn[: idx.n]
            peers, same_type = np.flatnonzero(mine), np.flatnonzero(same)
            if self.batch is not None:
                sims = self.batch.sims(vec, col)
            else:
                # Only the nearest are read below: five of the same type, and the edges.
                sims = np.full(idx.n, -np.inf, dtype=np.float32)
                masks = [mine, same] if resolving else [mine]
                for rows, s in idx.nearest(vec, masks, max(5, self.p.settings.max_edges), "vectors"):
                    sims[rows] = s
        decision = NEW
        again = self._same_turn(p, sims, peers) if p["conversation"] is not None and p["resolve_conflicts"] else None
        if again is not None and sims is not None:  # a turn found again: sims were computed
            decision = resolution.Resolution(
                "reinforce", idx.ids[again], float(sims[again]), "the same turn of this conversation, stored again"
            )
        elif resolving and len(same_type) and sims is not None:
            top = top_rows(sims, same_type, 5)
            top = top[sims[top] >= min(resolution.SIMILARITY_FLOOR, self.p.settings.dedup_threshold)]
            candidates = [(idx.ids[r], idx.texts[r], float(sims[r])) for r in top]
            if candidates:
                decision = resolution.decide(
                    p["content"],
                    candidates,
                    reinforce_threshold=self.p.settings.reinforce_threshold,
                    dedup_threshold=self.p.settings.dedup_threshold,
                )
        if decision.action == "reinforce":
            return self._reinforce(decision, p, now)
        if decision.action == "merge":
            return self._merge(decision, p, now)
        return self._insert(decision, p, vec, now, sims, peers)

    def _same_turn(self, p: dict, sims: np.ndarray | None, peers: np.ndarray) -> int | None:
        """The row of an active turn of the same conversation with exactly this text (a client
        retrying a write, a chat imported twice), or None: storing a turn again is a use of it,
        not a second turn."""
        idx = self.p.index
        code = idx.conversations.get(p["conversation"])
        if sims is None or code is None or not len(peers):
            return None
        for r in peers[(idx.conversation[peers] == code) & (sims[peers] >= 0.99)]:
            if idx.texts[r] == p["content"]:
                return int(r)
        return None

    def _insert(self, decision, p: dict, vec: np.ndarray | None, now: datetime, sims, peers) -> StoreResult:
        old = None
        mem = Memory(
            id=new_id(),
            content=p["content"],
            memory_type=p["memory_type"],
            importance=p["importance"],
            recall_count=0,
            created_at=now,
            last_recalled_at=None,
            user_id=p["user_id"],
            task_id=p["task_id"],
            session_id=p["session_id"],
            tags=p["tags"],
            metadata=p["metadata"],
            provenance=p["provenance"],
            status="active",
            valid_from=now,
            pinned=p["pinned"],
            updated_at=now,
            conversation=p["conversation"],
            project=p["project"],
            tier=p["tier"],
            expires_at=None if p["ttl_days"] is None else now + timedelta(days=p["ttl_days"]),
        )
        edges = []
        if sims is not None and len(peers):
            edges = nearest_edges(
                mem.id, sims, self.p.index.ids, peers, self.p.settings.edge_threshold, self.p.settings.max_edges
            )
        with self.p.store_db.transaction():
            if decision.action == "replace":
                old = self.p.store_db.get_memory(decision.target_id)
                # The current version answers for the sources of the one it replaces.
                mem = Memory(
                    **{
                        **mem.__dict__,
                        "supersedes": old.id,
                        "importance": max(mem.importance, old.importance),
                        "provenance": tuple(dict.fromkeys(old.provenance + mem.provenance)),
                    }
                )
                self.p.store_db.update_memory(
                    old.id, status="superseded", valid_to=now, superseded_by=mem.id, updated_at=now
                )
                self.p.store_db.add_event(old.id, now, "superseded", {"by": mem.id, "reason": decision.reason})
            self.p.store_db.insert_memory(mem, vec)
            self.p.store_db.add_event(
                mem.id, now, decision.action, {"reason": decision.reason, "target": decision.target_id}
            )
            self.p.store_db.add_edges(mem.user_id, edges, new_source=True)
        self.p.index.upsert(mem, vec)
        self.p.graph.add_edges(edges)
        if old is not None:
            old = replace(old, status="superseded", valid_to=now, superseded_by=mem.id, updated_at=now)
            self.p.index.upsert(old, None)
        return StoreResult(decision.action, mem, old, decision.similarity, decision.reason)

    @staticmethod
    def _absorbed(old: Memory, p: dict, now: datetime, **changes: Any) -> tuple[Memory, dict]:
        """`old` after taking in a new store `p` (reinforce, merge): the higher importance, both
        sets of sources and tags, its expiry refreshed, plus `changes`. Returns it and the fields to write."""
        fields = dict(
            importance=max(old.importance, p["importance"]),
            provenance=tuple(dict.fromkeys(old.provenance + p["provenance"])),
            tags=tuple(dict.fromkeys(old.tags + p["tags"])),
            updated_at=now,
            **changes,
        )
        if old.expires_at is not None:
            fields["expires_at"] = refreshed_expiry(old, p["ttl_days"], now)
        return replace(old, **fields), fields

    def _reinforce(self, decision, p: dict, now: datetime) -> StoreResult:
        old = self.p.store_db.get_memory(decision.target_id)
        # Storing a known fact again is a use of it, as a recall is (search/decay.py).
        mem, fields = self._absorbed(
            old, p, now, recall_count=old.recall_count + 1, last_recalled_at=now, stability=recalled_stability(old, now)
        )
        with self.p.store_db.transaction():
            self.p.store_db.update_memory(old.id, **fields)
            self.p.store_db.add_event(old.id, now, "reinforce", {"reason": decision.reason, "added": p["content"]})
        self.p.index.upsert(mem, None)
        return StoreResult("reinforce", mem, old, decision.similarity, decision.reason)

    def _merge(self, decision, p: dict, now: datetime) -> StoreResult:
        old = self.p.store_db.get_memory(decision.target_id)
        content = decision.merged_content or resolution.merge_contents(old.content, p["content"])
        vec = self.p.embedder.embed_batch([content])[0]
        mem, fields = self._absorbed(old, p, now, content=content)
        with self.p.store_db.transaction():
            self.p.store_db.update_memory(old.id, embedding=vec, **fields)
            self.p.store_db.add_event(
                old.id, now, "merge", {"reason": decision.reason, "previous": old.content, "added": p["content"]}
            )
        row = self.p.index.upsert(mem, vec)
        self.p.activity_epoch += 1  # a memory's text changed: validations that read it are stale
        if self.batch is not None:
            self.batch.dirty.add(row)
        return StoreResult("merge", mem, old, decision.similarity, decision.reason)

    def update_memory(self, memory_id: str, content: str, *, user_id: str | None = None) -> StoreResult:
        """Rewrite a memory's content (the agent's own merge or correction). History keeps the old text."""
        content = self.p.redact(check_text(content, "content", self.p.settings.max_content_chars))
        with self.p.lock:
            self.indexes.catch_up(force=True)  # its new edges are computed against every server's rows
            old = self.p.memory(memory_id, user_id)
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
                    f"{RECORD_TOOLS[old.memory_type]} instead of rewriting its text"
                )
            now = self.p.clock.now()
            vec = self.p.embedder.embed_batch([content])[0]
            with self.p.store_db.transaction():
                self.p.store_db.update_memory(old.id, embedding=vec, content=content, updated_at=now)
                self.p.store_db.add_event(old.id, now, "update", {"previous": old.content})
            mem = self.p.store_db.get_memory(old.id)
            self.p.index.upsert(mem, vec)
            self.indexes.unembedded.discard(mem.id)
            self.p.activity_epoch += 1
        self.indexes.tokens.fill([mem.id])
        self.indexes.rebuild_edges([mem.id])
        return StoreResult("update", mem, old, None, "content rewritten")

    def forget_memory(
        self,
        memory_id: str | None = None,
        *,
        query: str | None = None,
        user_id: str | None = None,
        dry_run: bool = False,
        scope: Scope = NO_PROJECT,
    ) -> list[str]:
        """Delete a memory by id (any project's), or every memory in `scope` that contains all
        the words of `query`.

        Irreversible: the rows, their edges and history go, and so do the derived indexes' entries.
        """
        if (memory_id is None) == (query is None):
            raise EngramError("give exactly one of memory_id or query")
        user = self.p.user_of(user_id)
        with self.p.lock:
            if memory_id is not None:
                ids = [self.p.memory(memory_id, user).id]
            else:
                text = check_text(query, "query", 10_000)
                self.indexes.catch_up(force=True)
                ids = self._matching_all_terms(text, user, scope)
            if dry_run or not ids:
                return ids
            self.remove_memories(ids)
            return ids

    def _matching_all_terms(self, query: str, user: str, scope: Scope) -> list[str]:
        from engram.text.tokens import tokenize

        terms = set(tokenize(query, query=True))
        if not terms:
            raise EngramError("query has no searchable words")
        idx = self.p.index
        mask = idx.mask(user, statuses=("active", "superseded", "consolidated"), scope=scope)
        rows = None
        for t in terms:
            p = idx.bm25.rows_with(t)
            rows = p if rows is None else rows & p
        # Postings also hold words a row borrows from its context; forget only its own.
        own = idx.bm25.own_terms
        return [idx.live(r)[0] for r in sorted(rows or ()) if mask[r] and terms <= own.get(r, {}).keys()]

    def remove_memories(self, ids: Sequence[str]) -> None:
        """Delete memories for good: their rows, index entries and graph nodes (their edges go too)."""
        with self.p.store_db.transaction():
            self.p.store_db.delete_memories(ids)
        for i in ids:
            self.p.index.remove(i)
        self.indexes.tokens.forget(ids)
        self.indexes.unembedded.difference_update(ids)
        self.p.graph.remove_nodes(ids)
        self.p.activity_epoch += 1


# The fields an item of store_many may carry: Engram.store's parameters.
STORE_FIELDS: tuple[str, ...] = tuple(inspect.signature(Writes.store_memory).parameters)[1:]
