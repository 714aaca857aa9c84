"""The late-interaction stage's token vectors: computed when memories are written (in batches),
kept in the store's token_vectors table beside the embeddings, read back when the indexes are
built, and filled in for memories written before the stage existed or while its model was
missing. Derived like the embedding: each row names the hash of the text it was computed from,
so a changed text is encoded again rather than scored with another text's vectors.

Only turns of a conversation (memories stored with `conversation`) have them, and only turns are
reordered by the stage: MaxSim rewards the query's own words met in the memory, which is how a
question finds a chat line (names, things said; the first stage weighs BM25 fully for turns for
the same reason), while an agent's independent facts are most often asked in other words. On the
agent set's tune half, reading those too moved the answer out of the top 1 for three questions
and out of the top 3 for two (four of the five were paraphrases), for one gained at the top 1
(benchmarks/HISTORY.md, session 16)."""

from __future__ import annotations

import hashlib
import threading
from contextlib import suppress
from typing import Callable, Sequence

import numpy as np

from engram.core.errors import DiskFull
from engram.engine.state import EngineState
from engram.models.late_interaction import LateReader, from_bytes, maxsim, to_bytes
from engram.models.on_demand import OnDemand

# Memories encoded and written per transaction when filling in: a stopping daemon waits for the
# batch under way, a few seconds at 64 even on a loaded machine (256 took over 30 s, what `engram
# stop` waits), and the models still read them in batches.
FILL_BATCH = 64
SCAN_ROWS = 4096  # index rows a fill's scan reads at a time for the next batch


def text_hash(text: str) -> str:
    """Which text a memory's token vectors were computed from (16 bytes of BLAKE2b, hex)."""
    return hashlib.blake2b((text or "").encode("utf-8"), digest_size=16).hexdigest()


class TokenVectors:
    """The reader (loaded at first need, when the `late_interaction` setting is on) and which
    text each turn's kept token vectors were computed from. The vectors themselves stay in the
    store (int8: 4.8 KB a LoCoMo turn on average, 13.8 KB a memory of the long-conversation
    set) and are read for the candidates a recall scores, so a large store costs no memory for
    them."""

    def __init__(self, p: EngineState):
        self.p = p
        self._reader = OnDemand(lambda: LateReader(threads=p.settings.rerank_threads), "late-interaction reader")
        self.hashes: dict[str, str] = {}  # memory id -> hash of the text its kept vectors are of
        self.encoded = 0  # texts encoded since the store was opened (read back ones are not)
        # Asks for a background fill_missing soon (set by whoever runs one: the daemon's
        # scheduler); None: deferred turns wait for maintenance, the next start, or recall.
        self.fill_soon: Callable[[], None] | None = None
        # Set while the daemon stops: a fill in progress ends after the batch it is on (the rest
        # waits for the next start), so a stop does not wait for thousands of turns.
        self.halt = threading.Event()

    def reader(self) -> LateReader | None:
        """The reader when the setting is on and it loads, else None (a failure to load is
        logged once; recall then keeps the first stage's order)."""
        return self._reader.get() if self.p.settings.late_interaction else None

    @property
    def failed(self) -> bool:
        """The reader could not load (and will not be tried again in this process)."""
        return self._reader.failed

    def load(self) -> None:
        """Read which turns have kept vectors, and of which text (called when the indexes are
        built). Nothing is encoded here: opening a store must not wait for thousands of turns
        written before the stage was on; fill_missing (the daemon a second after it starts, and
        maintenance) and recall (the candidates it reads) fill them in."""
        self.hashes = {}
        if self.p.settings.late_interaction:
            self.hashes = self.p.store_db.token_hashes()

    def forget(self, ids: Sequence[str]) -> None:
        """These memories are gone (their rows went with them: sql.delete_memories)."""
        for i in ids:
            self.hashes.pop(i, None)

    def _todo(self, rows: Sequence[int], limit: int | None = None) -> list[tuple[str, str, str]]:
        """(id, hash, text) of these index rows that are turns without vectors of their text."""
        return self._scan(rows, limit)[0]

    def _scan(self, rows: Sequence[int], limit: int | None) -> tuple[list[tuple[str, str, str]], int]:
        """_todo's answer, and how many of `rows` it read to find it (a scan goes on from there)."""
        idx = self.p.index
        out = []
        read = 0
        for r in rows:
            read += 1
            mid, text = idx.ids[r], idx.texts[r]
            if mid is None or text is None or not idx.turn[r]:
                continue
            h = text_hash(text)
            if self.hashes.get(mid) != h:
                out.append((mid, h, text))
                if limit is not None and len(out) >= limit:
                    break
        return out, read

    def _next_batch(self, start: int) -> tuple[list[tuple[str, str, str]], int]:
        """The next FILL_BATCH turns without vectors at or after index row `start`, and the row
        the scan goes on from (call it holding the engine's lock)."""
        idx = self.p.index
        todo: list[tuple[str, str, str]] = []
        while start < idx.n and len(todo) < FILL_BATCH:
            end = min(idx.n, start + SCAN_ROWS)
            rows = (np.flatnonzero(idx.turn[start:end]) + start).tolist()
            got, read = self._scan(rows, FILL_BATCH - len(todo))
            todo += got
            start = rows[read - 1] + 1 if len(todo) >= FILL_BATCH else end
        return todo, start

    def _keep(self, todo: Sequence[tuple[str, str, str]], vecs: Sequence[np.ndarray]) -> None:
        self.p.store_db.put_token_vectors([(mid, h, to_bytes(v)) for (mid, h, _), v in zip(todo, vecs)])
        for mid, h, _ in todo:
            self.hashes[mid] = h
        self.encoded += len(todo)

    def _keep_if_room(self, todo: Sequence[tuple[str, str, str]], vecs: Sequence[np.ndarray]) -> None:
        """Keep what a recall encoded, unless the disk is full: the recall scores with the vectors
        anyway, and the background fill keeps them once there is room (their hashes stay unset)."""
        with suppress(DiskFull):
            self._keep(todo, vecs)

    def fill(self, ids: Sequence[str]) -> int:
        """Encode and keep the token vectors of these memories that are turns of a conversation
        (by their text in the index) and have none for their current text; how many were kept.
        Call it without holding the engine's lock: the encoding runs outside it (_encode).
        Nothing when the stage is off or has no reader."""
        if not self.p.settings.late_interaction:
            return 0
        with self.p.lock:
            idx = self.p.index
            todo = self._todo([r for i in dict.fromkeys(ids) if (r := idx.row_of.get(i)) is not None])
        return self._encode(todo)

    def defer(self, ids: Sequence[str]) -> None:
        """These memories were written without their token vectors (a bulk import): ask for the
        background fill when one runs. Until it has run, recall encodes the candidates it reads
        that lack them (scores), so what a recall returns is the same, only slower."""
        if ids:
            self.request_fill()

    def request_fill(self) -> None:
        """Ask for the background fill, when one runs (turns were written without their token
        vectors: a bulk write, an import of an export)."""
        if self.p.settings.late_interaction and self.fill_soon is not None:
            self.fill_soon()

    def fill_missing(self) -> int:
        """Encode every turn that has no token vectors for its current text, FILL_BATCH at a
        time (see _encode); how many were kept. Nothing when the stage is off or has no reader.
        A pass reads the turns in row order, each batch from where the last one stopped (from
        the first turn again, a fill of n turns hashed about n^2 / FILL_BATCH texts); turns
        written or rewritten behind it get another pass, when this one kept any."""
        if not self.p.settings.late_interaction:
            return 0
        done = 0
        while True:
            start, kept_in_pass = 0, 0
            while True:
                with self.p.lock:
                    todo, start = self._next_batch(start)
                if not todo:
                    break
                kept = self._encode(todo)
                done += kept
                kept_in_pass += kept
                if self.halt.is_set():
                    return done
            if not kept_in_pass:
                return done

    def _encode(self, todo: Sequence[tuple[str, str, str]]) -> int:
        """Encode `todo` ((id, hash, text) of turns) FILL_BATCH at a time outside the lock, so
        recall goes on meanwhile (about 10 ms a turn), and keep each batch in its own transaction;
        a turn rewritten or deleted while its batch was encoded waits for its next fill. How many
        were kept."""
        reader = self.reader() if todo else None  # loaded only when a turn needs it
        if reader is None:
            return 0
        done = 0
        for start in range(0, len(todo), FILL_BATCH):
            if self.halt.is_set():
                break
            part = todo[start : start + FILL_BATCH]
            vecs = reader.encode([t for _, _, t in part])
            with self.p.lock:
                idx = self.p.index
                still = [
                    (t, v)
                    for t, v in zip(part, vecs)
                    if (r := idx.row_of.get(t[0])) is not None and text_hash(idx.live(r)[1]) == t[1]
                ]
                if still:
                    self._keep([t for t, _ in still], [v for _, v in still])
                    done += len(still)
        return done

    def scores(self, query: str, rows: Sequence[int]) -> np.ndarray | None:
        """MaxSim of the query against each of these index rows, turns of a conversation, their
        vectors read from the store (computed now when missing: a turn another server wrote, or
        one whose text changed); None without the reader."""
        idx = self.p.index
        ids = [idx.live(r)[0] for r in rows]
        todo = self._todo(rows)
        reader = self.reader()
        if reader is None:
            return None  # the wheel is missing: logged once, the first stage's order stands
        fresh = dict(zip((mid for mid, _, _ in todo), reader.encode([t for _, _, t in todo])))
        if todo:
            self._keep_if_room(todo, list(fresh.values()))
        got = {
            mid: from_bytes(blob) for mid, _, blob in self.p.store_db.token_vectors([i for i in ids if i not in fresh])
        }
        gone = []
        for i, r in zip(ids, rows):
            if i not in fresh and i not in got:
                text = idx.live(r)[1]
                gone.append((i, text_hash(text), text))
        if gone:  # another server rewrote the text (its row went) before this index heard of it
            vecs = reader.encode([t for _, _, t in gone])
            self._keep_if_room(gone, vecs)
            fresh.update(zip((i for i, _, _ in gone), vecs))
        return maxsim(reader.encode_query(query), [fresh[i] if i in fresh else got[i] for i in ids])

    def coverage(self, rows: Sequence[int]) -> tuple[int, int]:
        """(turns, turns read): of these index rows, the turns of a conversation, and those with
        token vectors of their current text (the rest wait for the background fill)."""
        idx = self.p.index
        turns = [r for r in rows if idx.turn[r]]
        return len(turns), len(turns) - len(self._todo(turns))

    def mean_bytes(self) -> float:
        """The mean size of a turn's kept token vectors, in bytes (0 with none kept)."""
        rows = self.p.store_db.token_vectors()
        return float(np.mean([len(b) for _, _, b in rows])) if rows else 0.0
