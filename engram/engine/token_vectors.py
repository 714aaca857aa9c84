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
(benchmarks/RESULTS.md, issue 40)."""

from __future__ import annotations

import hashlib
import logging
from typing import Sequence

import numpy as np

from engram.core.errors import ModelUnavailable
from engram.engine.state import EngineState
from engram.models.late_interaction import LateReader, from_bytes, maxsim, to_bytes

log = logging.getLogger(__name__)
FILL_BATCH = 256  # memories encoded and written per transaction when filling in


def text_hash(text: str) -> str:
    """Which text a memory's token vectors were computed from (16 bytes of BLAKE2b, hex)."""
    return hashlib.blake2b((text or "").encode("utf-8"), digest_size=16).hexdigest()


class TokenVectors:
    """The reader (loaded at first need, when the `late_interaction` setting is on) and every
    memory's token vectors, by memory id, with the hash of the text they were computed from."""

    def __init__(self, p: EngineState):
        self.p = p
        self._reader: LateReader | None = None
        self.failed = False
        self.kept: dict[str, tuple[str, np.ndarray]] = {}
        self.encoded = 0  # texts encoded since the store was opened (read back ones are not)

    def reader(self) -> LateReader | None:
        """The reader when the setting is on and it loads, else None (a failure to load is
        logged once; recall then keeps the first stage's order)."""
        if not self.p.settings.late_interaction or self.failed:
            return None
        if self._reader is None:
            try:
                self._reader = LateReader(threads=self.p.settings.rerank_threads)
            except (ModelUnavailable, OSError, RuntimeError) as e:
                self.failed = True
                log.warning("late-interaction reader unavailable, recall keeps the first stage's order: %s", e)
                return None
        return self._reader

    def load(self) -> None:
        """Read the kept rows of the memories in the index (called when the indexes are built).
        Nothing is encoded here: opening a store must not wait for thousands of turns written
        before the stage was on; fill_missing (maintenance) and recall (the candidates it
        reads) fill them in."""
        self.kept = {}
        if not self.p.settings.late_interaction:
            return  # nothing reads them; read when the stage is turned on (the next open)
        idx = self.p.index
        for mid, h, blob in self.p.store_db.token_vectors():
            if mid in idx.row_of:
                self.kept[mid] = (h, from_bytes(blob))

    def missing(self, limit: int) -> list[tuple[str, str, str]]:
        """Up to `limit` turns without token vectors for their current text: (id, hash, text)."""
        idx = self.p.index
        out = []
        for r in np.flatnonzero(idx.turn[: idx.n]):
            mid = idx.ids[r]
            if mid is None:
                continue
            h = text_hash(idx.texts[r])
            got = self.kept.get(mid)
            if got is None or got[0] != h:
                out.append((mid, h, idx.texts[r]))
                if len(out) >= limit:
                    break
        return out

    def fill_missing(self) -> int:
        """Encode every turn that has no token vectors for its current text, FILL_BATCH at a
        time, each batch encoded outside the lock (recall goes on meanwhile) and written in its
        own transaction; how many were encoded. Nothing when the stage is off or has no reader."""
        if not self.p.settings.late_interaction:
            return 0
        done = 0
        while True:
            with self.p.lock:
                todo = self.missing(FILL_BATCH)
            reader = self.reader() if todo else None
            if reader is None:
                return done
            vecs = reader.encode([t for _, _, t in todo])
            with self.p.lock:
                idx = self.p.index
                # A turn rewritten or deleted while its batch was encoded waits for the next round.
                rows = [(mid, h, v) for (mid, h, _), v in zip(todo, vecs)
                        if (r := idx.row_of.get(mid)) is not None and text_hash(idx.texts[r]) == h]
                self.p.store_db.put_token_vectors([(mid, h, to_bytes(v)) for mid, h, v in rows])
                for mid, h, v in rows:
                    self.kept[mid] = (h, v)
                self.encoded += len(rows)
                done += len(rows)
                if not rows:
                    return done

    def fill(self, ids: Sequence[str]) -> int:
        """Encode and keep the token vectors of these memories that are turns of a conversation
        (by their text in the index) and have none for their current text; how many were
        encoded. Nothing without the reader."""
        if not self.p.settings.late_interaction:
            return 0
        idx = self.p.index
        todo = []
        for mid in dict.fromkeys(ids):
            r = idx.row_of.get(mid)
            if r is None or not idx.turn[r]:
                continue
            h = text_hash(idx.texts[r])
            got = self.kept.get(mid)
            if got is None or got[0] != h:
                todo.append((mid, h, idx.texts[r]))
        reader = self.reader() if todo else None  # loaded only when a turn needs it
        if reader is None:
            return 0
        for start in range(0, len(todo), FILL_BATCH):
            part = todo[start:start + FILL_BATCH]
            vecs = reader.encode([t for _, _, t in part])
            self.p.store_db.put_token_vectors([(mid, h, to_bytes(v)) for (mid, h, _), v in zip(part, vecs)])
            for (mid, h, _), v in zip(part, vecs):
                self.kept[mid] = (h, v)
            self.encoded += len(part)
        return len(todo)

    def scores(self, query: str, rows: Sequence[int]) -> np.ndarray | None:
        """MaxSim of the query against each of these index rows, turns of a conversation (their
        token vectors computed now when missing: a turn another server wrote, or one whose text
        changed); None without the reader."""
        idx = self.p.index
        ids = [idx.ids[r] for r in rows]
        self.fill(ids)
        reader = self.reader()
        if reader is None:
            return None  # the wheel is missing: logged once, the first stage's order stands
        return maxsim(reader.encode_query(query), [self.kept[i][1] for i in ids])

    def mean_bytes(self) -> float:
        """The mean size of a memory's kept token vectors, in bytes (0 with none kept)."""
        if not self.kept:
            return 0.0
        return float(np.mean([v.nbytes for _, v in self.kept.values()]))
