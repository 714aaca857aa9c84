"""The derived indexes (vectors and BM25, the graph, session outcomes): built from the rows, kept up
with other servers' writes (catch_up), re-embedded for a new model, and the graph's edges recomputed.
The model of record (the store's model_name and model_dim) is checked here too."""

from __future__ import annotations

import importlib
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np

from engram.core.errors import ModelMismatch, ModelUnavailable
from engram.core.types import Memory
from engram.engine.state import EngineState
from engram.engine.token_vectors import TokenVectors
from engram.models.embedding import Embedder, TextVectors, UnavailableEmbedder
from engram.models.model_files import model_words
from engram.search.graph import MemoryGraph, nearest_edges
from engram.search.memory_index import MemoryIndex

# Several servers on one database (catch_up): a read asks for the others' writes at most this
# often, so a write on one server reaches a recall on another well within a second.
FEED_POLL_S = 0.2
# Unchecked for longer than this, the index is rebuilt from the rows instead: the feed keeps
# only recent changes (about an hour in Postgres).
FEED_MAX_GAP_S = 1800.0
OUTCOMES_POLL_S = 5.0  # session outcomes (not in the feed) are re-read at most this often
MODEL_RETRY_S = 30.0  # while the model is unavailable, how often a call tries to load it again
FILL_BATCH = 64  # memories embedded and written per transaction by fill_vectors (see token_vectors.py)


class Indexes:
    """The derived indexes over the parts' store, and the model they are embedded with."""

    def __init__(self, p: EngineState, allow_model_change: bool = False):
        self.p = p
        self.allow_model_change = allow_model_change
        self.model_retry_at = time.monotonic() + MODEL_RETRY_S  # the next try while degraded
        self.model_loading = threading.Lock()  # held while retry_model loads the model
        self.feed_mark = 0  # the change number the derived indexes are up to (catch_up)
        self.feed_checked = self.outcomes_read = time.monotonic()  # when the feed, the outcomes were read
        self.tokens = TokenVectors(p)  # the late-interaction stage's token vectors
        # Memories a bulk write stored without their embedding (a long turn's later chunks),
        # in the index without a vector until fill_vectors embeds them. A rebuild embeds every
        # row the store holds without one, so it starts this over.
        self.unembedded: set[str] = set()

    def check_model(self) -> bool:
        """Whether the store was embedded with another model (allow_model_change: True; else
        ModelMismatch). A new store records this model as its model of record."""
        p = self.p
        name, dim = p.store_db.get_meta("model_name"), p.store_db.get_meta("model_dim")
        mine = (p.embedder.name, str(p.embedder.dim))
        # The configured name is known before the model loads, its dimensions only after: a store
        # of another model is refused at once, not served by keyword recall until the load ends,
        # and a store first written while the model loads records the name then, the dimensions
        # when the model is back (retry_model checks again).
        if name is None:
            p.store_db.set_meta("model_name", mine[0])
            if not p.degraded:
                p.store_db.set_meta("model_dim", mine[1])
            return False
        if dim is None and not p.degraded:
            p.store_db.set_meta("model_dim", mine[1])
            dim = mine[1]
        if name == mine[0] and (p.degraded or dim == mine[1]):
            return False
        if self.allow_model_change:
            return True
        raise ModelMismatch(
            f"{p.path} was embedded with {name} ({dim or '?'} dims) but this engram uses "
            f"{mine[0]}{'' if p.degraded else f' ({mine[1]} dims)'}; vectors from two models must not be mixed. "
            f"Run `engram reindex --reembed` to re-embed every memory with {mine[0]}, "
            f"or set ENGRAM_MODEL={name}."
        )

    def retry_model(self, load: Callable[[], Embedder], *, force: bool = False) -> bool:
        """While degraded, try to load the model again with `load` (at most every MODEL_RETRY_S
        unless force); on success embed the rows stored without a vector. True when it came back."""
        p = self.p
        if not p.degraded or (not force and time.monotonic() < self.model_retry_at):
            return False
        # One load at a time: a call arriving while the daemon loads the model at its start
        # (engram.server.daemon) goes on with keyword recall instead of waiting for the load.
        if not self.model_loading.acquire(blocking=False):
            return False
        try:
            self.model_retry_at = time.monotonic() + MODEL_RETRY_S
            importlib.invalidate_caches()  # a model package installed since the last try
            try:
                emb = load()
            except ModelUnavailable as e:
                p.degraded = str(e)
                if isinstance(p.embedder, UnavailableEmbedder):  # as it is while degraded
                    p.embedder.reason = p.degraded
                return False
            with p.lock:
                away = p.embedder
                p.embedder, p.degraded = emb, None
                try:
                    p.model_changed = self.check_model()
                except ModelMismatch as e:  # the store's vectors are another model's: keyword recall goes on
                    p.embedder, p.degraded = away, str(e)
                    if isinstance(away, UnavailableEmbedder):
                        away.reason = p.degraded
                    self.model_retry_at = float("inf")  # loading the same model again will not help
                    raise
                p.text_vectors = TextVectors(emb)
                self.rebuild()  # hands the rows stored while the model was away to the fill
            if self.tokens.fill_soon is None:
                self.fill_vectors()  # no background fill here (no daemon): embedded now
            return True
        finally:
            self.model_loading.release()

    def rebuild(self) -> None:
        """Rebuild the derived indexes (vectors, BM25, graph) from the rows."""
        p = self.p
        with p.lock:
            # Taken before the rows are read: a change committed meanwhile is applied again by
            # the next catch_up, which is harmless (applying a change twice is applying it once).
            mark = p.store_db.change_mark()
            # Sized once: growing by doubling would copy every column about log2(n) times.
            idx = self.new_index(p.store_db.count_live_memories() + 1024)
            missing: list[Memory] = []

            def rows():
                for m, blob in p.store_db.iter_index_rows():
                    vec = None
                    if blob is not None:
                        vec = np.frombuffer(blob, dtype=np.float32)
                        if vec.shape[0] != p.embedder.dim:
                            vec = None
                    if vec is None:
                        missing.append(m)
                    yield m, vec

            idx.load(rows())
            # Rows without an embedding (a bulk write's later chunks whose fill a stop cut short,
            # rows stored while the model was away) are left to the fill: a store opened after a
            # large import serves at once, by keywords for those rows until the fill reaches them.
            self.unembedded = set() if p.model_changed or p.degraded else {m.id for m in missing}
            p.index = idx
            self.tokens.load()
            p.graph = self.read_graph()
            p.outcomes = p.store_db.session_outcomes()
            p.index_built_at = p.clock.now()
            self.feed_mark = mark
            self.feed_checked = self.outcomes_read = time.monotonic()
        if self.unembedded:
            self.request_fill()

    def request_fill(self) -> None:
        """Ask for the background fill (fill_token_vectors) when one runs: the daemon's starts a
        second after the ask; without one, maintenance or a call of fill_token_vectors fills."""
        if self.tokens.fill_soon is not None:
            self.tokens.fill_soon()

    def fill_token_vectors(self) -> int:
        """The background fill: embed what bulk writes left without an embedding (fill_vectors),
        then encode the late-interaction token vectors of every turn that lacks them (a bulk
        write's, or written before the stage was on, or while its model was missing); how many
        token vectors were encoded. Rows handed to the fill while it encoded (a bulk write, the
        model back) are this run's too: an ask while it runs finds it running and is dropped."""
        encoded = 0
        while True:
            self.fill_vectors()
            encoded += self.tokens.fill_missing()
            if not self.unembedded or self.p.degraded or self.tokens.halt.is_set():
                return encoded

    def defer_vectors(self, ids: Sequence[str]) -> None:
        """These memories were stored without their embedding (Writes._store_chunks): embedded by
        the background fill, which is asked for."""
        self.unembedded.update(ids)
        self.request_fill()  # late interaction on or off: these are the first stage's vectors

    def fill_vectors(self) -> int:
        """Embed the memories bulk writes stored without an embedding, oldest first, FILL_BATCH
        at a time outside the lock (recall goes on meanwhile), and give each the similarity edges
        its write would have: to its nearest earlier peers (same user and project, active, not
        expired when it was written). How many were embedded. A memory rewritten or deleted
        meanwhile is left to its own write."""
        p = self.p
        done = 0
        while True:
            with p.lock:
                idx = p.index
                rows = sorted(r for i in self.unembedded if (r := idx.row_of.get(i)) is not None)
                self.unembedded = {idx.live(r)[0] for r in rows}  # the deleted ones are gone
                todo = [(r, *idx.live(r)) for r in rows[:FILL_BATCH]]
                if not todo or p.degraded or self.tokens.halt.is_set():
                    return done
            vecs = p.embedder.embed_batch([text for _, _, text in todo])
            with p.lock:
                idx = p.index
                still = [
                    (r, mid, v)
                    for (r, mid, text), v in zip(todo, vecs)
                    if mid in self.unembedded and idx.row_of.get(mid) == r and idx.texts[r] == text
                ]
                try:
                    with p.store_db.transaction():
                        for r, mid, v in still:
                            p.store_db.update_memory(mid, embedding=v)
                            idx.set_vector(r, v)
                            self.unembedded.discard(mid)
                        with p.store_db.buffered():  # the edges sent together
                            for r, _, v in still:
                                edges = self._write_edges(r, v)
                                p.store_db.add_edges(idx.users.names[idx.user[r]], edges)
                                p.graph.add_edges(edges, keep_existing=True)
                            self._relink_later([r for r, _, _ in still])
                except BaseException:
                    self.rebuild()  # the rows rolled back; the derived indexes follow them
                    raise
                done += len(still)

    def _relink_later(self, filled: Sequence[int]) -> None:
        """The rows written with their vector after a row just filled were written while it had
        none, so their nearest peers could not include it: each such row's similarity edges (to
        rows before it; a chunk's link to the next is to a row after it) become its nearest of
        those and the filled rows that are its peers, as its write would have chosen them."""
        p, idx, s = self.p, self.p.index, self.p.settings
        if not filled or s.max_edges <= 0:
            return
        f = np.array(sorted(filled), dtype=np.int64)
        n = idx.n
        later = np.zeros(n, dtype=bool)
        later[f[0] + 1 :] = idx.alive[f[0] + 1 : n]
        later[f] = False
        for mid in self.unembedded:  # written without a vector too: its own fill sees these rows
            if (r := idx.row_of.get(mid)) is not None:
                later[r] = False
        ys = np.flatnonzero(later)
        if not len(ys):
            return
        sims = idx.vectors[ys] @ idx.vectors[f].T
        ok = (
            (sims >= s.edge_threshold)
            & (f[None, :] < ys[:, None])
            & (idx.user[f][None, :] == idx.user[ys][:, None])
            & (idx.project[f][None, :] == idx.project[ys][:, None])
            & (idx.status[f] == 0)[None, :]
            & (idx.expires[f][None, :] > idx.created[ys][:, None])
        )
        touched = np.flatnonzero(ok.any(axis=1))
        if not len(touched):
            return
        ids = idx.ids
        have: dict[str, dict[str, float]] = {ids[ys[j]]: {} for j in touched}
        for src, dst, w in p.store_db.edges_from(list(have)):
            r = idx.row_of.get(dst)
            if r is not None and r < idx.row_of[src]:  # a similarity edge (a chunk's link goes forward)
                have[src][dst] = w
        gone: list[tuple[str, str]] = []
        mirror: list[tuple[str, str, float | None]] = []
        for j in touched:
            y = ids[ys[j]]
            old = have[y]
            pool = dict(old)
            pool.update({ids[f[k]]: float(sims[j, k]) for k in np.flatnonzero(ok[j])})
            keep = dict(sorted(pool.items(), key=lambda kv: -kv[1])[: s.max_edges])
            gone += [(y, d) for d in old if d not in keep]
            added = [(y, d, w) for d, w in keep.items() if d not in old]
            p.store_db.add_edges(idx.users.names[idx.user[ys[j]]], added)
            mirror += added
            for d in old:
                if d not in keep:  # a chunk's link to the one before it stays in the graph
                    rd = idx.row_of[d]
                    linked = idx.group[rd] != -1 and idx.group[rd] == idx.group[ys[j]] and abs(rd - ys[j]) == 1
                    mirror.append((y, d, 1.0 if linked else None))
        p.store_db.delete_edges(gone)
        p.graph.set_edges(mirror)

    def _write_edges(self, r: int, v: np.ndarray) -> list[tuple[str, str, float]]:
        """The similarity edges row r would have been given when it was written (Writes._insert):
        to its nearest peers among the rows written before it."""
        idx, s = self.p.index, self.p.settings
        peers = np.flatnonzero(
            idx.alive[:r]
            & (idx.user[:r] == idx.user[r])
            & (idx.status[:r] == 0)
            & (idx.project[:r] == idx.project[r])
            & (idx.expires[:r] > idx.created[r])
        )
        sims = np.full(idx.n, -np.inf, dtype=np.float32)
        sims[peers] = idx.vectors[peers] @ v
        return nearest_edges(idx.live(r)[0], sims, idx.ids, peers, s.edge_threshold, s.max_edges)

    def read_graph(self) -> MemoryGraph:
        """The graph over the edges table, read when first needed."""
        return MemoryGraph(lambda: ((s, d, w) for s, d, w, _ in self.p.store_db.all_edges()))

    def catch_up(self, force: bool = False) -> int:
        """Apply the writes other servers committed to the database since the last look, so a
        read here ranks over the rows every server sees. Asks at most every FEED_POLL_S unless
        `force` (a write about to be resolved must meet a memory stored elsewhere a moment ago).
        This server's own writes are in the indexes already; meeting them again in the feed
        changes nothing. A DuckDB file has no other writer: its feed is empty, nothing is read.
        Returns how many memories were applied."""
        p = self.p
        with p.lock:
            t = time.monotonic()
            if not force and t - self.feed_checked < FEED_POLL_S:
                return 0
            if self.feed_mark and t - self.feed_checked > FEED_MAX_GAP_S:
                self.rebuild()  # changes older than the feed keeps may be gone from it
                return len(p.index)
            self.feed_checked = t
            mark, ids, edges = p.store_db.changes_since(self.feed_mark)
            if ids or edges:
                self._apply_changes(ids, edges)
            self.feed_mark = mark
            if mark and t - self.outcomes_read >= OUTCOMES_POLL_S:
                p.outcomes = p.store_db.session_outcomes()
                self.outcomes_read = t
            return len(ids)

    def _apply_changes(self, ids: Sequence[str], edges: bool) -> None:
        """Bring the indexes in step with these memories' rows (a missing row was deleted)."""
        p = self.p
        idx = p.index
        rows = {m.id: (m, blob) for m, blob in p.store_db.index_rows(ids)} if ids else {}
        stale = False  # a text changed or a memory went: handoff validations must start over
        for mid in ids:
            got = rows.get(mid)
            r = idx.row_of.get(mid)
            if got is None:
                if r is not None:
                    idx.remove(mid)
                    p.graph.remove_nodes([mid])
                    stale = True
                continue
            m, blob = got
            vec = None
            # A row without a vector here: another server's bulk write, embedded by its fill since.
            if blob is not None and (r is None or idx.texts[r] != m.content or not idx.vectors[r].any()):
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape[0] != p.embedder.dim:
                    vec = None  # written by a server on another model: kept out of vector search
            stale |= r is not None and idx.texts[r] != m.content
            idx.upsert(m, vec)
        if edges:
            # Which edges changed is not in the feed: the table is read again, when next needed.
            p.graph = self.read_graph()
        if stale:
            p.activity_epoch += 1

    def new_index(self, capacity: int = 1024) -> MemoryIndex:
        s = self.p.settings
        idx = MemoryIndex(
            self.p.embedder.dim,
            capacity,
            context_window=s.context_window,
            context_weight=s.context_weight,
            context_terms=s.context_terms,
            tier_factors=s.tier_factors,
        )
        # A query word the model knows is a real word, never corrected as a typo (search/bm25.py).
        # Read from the model's files, so keyword recall keeps it while the model cannot load.
        idx.bm25.known_words = model_words(s.model, s.model_cache)
        return idx

    def reembed(self, memories: Sequence[Memory], idx: MemoryIndex) -> None:
        p = self.p
        for i in range(0, len(memories), 256):
            batch = memories[i : i + 256]
            vecs = p.embedder.embed_batch([m.content for m in batch])
            with p.store_db.transaction():
                for m, v in zip(batch, vecs):
                    p.store_db.update_memory(m.id, embedding=v)
            for m, v in zip(batch, vecs):
                idx.upsert(m, v)

    def reembed_all(self) -> int:
        """Re-embed every memory with the current model and record it as the model of record."""
        p = self.p
        with p.lock:
            mems = [m for m, _ in p.store_db.iter_index_rows()]
            idx = self.new_index()
            self.reembed(mems, idx)
            p.store_db.set_meta("model_name", p.embedder.name)
            p.store_db.set_meta("model_dim", str(p.embedder.dim))
            p.model_changed = False
            self.rebuild_edges()
            self.rebuild()
            return len(mems)

    def rebuild_edges(self, ids: Sequence[str] | None = None) -> int:
        """Recompute graph edges for the given memories (default: all active)."""
        p = self.p
        with p.lock:
            idx = p.index
            if ids is None:
                ids = [i for i in idx.ids if i is not None and idx.status[idx.row_of[i]] == 0]
            n = 0
            with p.store_db.transaction():
                p.store_db.delete_edges_of(ids)
                p.graph.remove_nodes(ids)
                for mid in ids:
                    r = idx.row_of.get(mid)
                    if r is None:
                        continue
                    cand = np.flatnonzero((idx.user[: idx.n] == idx.user[r]) & (idx.status[: idx.n] == 0))
                    cand = cand[cand != r]
                    edges = nearest_edges(
                        mid, idx.cosine(idx.vectors[r]), idx.ids, cand, p.settings.edge_threshold, p.settings.max_edges
                    )
                    p.store_db.add_edges(idx.users.names[idx.user[r]], edges)
                    p.graph.add_edges(edges)
                    n += len(edges)
            return n

    def status(self) -> dict[str, Any]:
        """The derived indexes: memory rows and graph edges held, and when they were built."""
        self.catch_up()
        return {"rows": len(self.p.index), "edges": self.p.graph.edge_count(), "built_at": self.p.index_built_at}

    def counts(self) -> dict[tuple[str, str], int]:
        """Memories by (memory_type, status) as the index holds them (after catch_up)."""
        self.catch_up()
        return self.p.index.type_status_counts()
