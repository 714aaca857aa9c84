"""What the engine's modules share: the store, the derived indexes, the model, the clock, the lock
and the settings, and the lookups every one of them makes (the user a call acts for, a memory or a
task of that user). Engram opens it and hands it to each module; the derived indexes (index,
graph, outcomes) are replaced by engram.engine.index_upkeep, so a module reads them from here at each call."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from engram.core.clock import Clock
from engram.core.redaction import Redactor
from engram.core.settings import Settings
from engram.core.types import EngramError, Memory, NotFound, Task
from engram.models.embedding import Embedder, TextVectors
from engram.search.decay import quality_score
from engram.search.graph import MemoryGraph
from engram.search.memory_index import MemoryIndex
from engram.search.ranking import Weights
from engram.store import MemoryStore
from engram.store.redacting import RedactingStore


class EngineState:
    """The state every module of the engine shares (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        clock: Clock,
        store_db: MemoryStore,
        embedder: Embedder,
        degraded: str | None,
        path: str,
    ):
        self.settings = settings
        self.clock = clock
        self.redact = Redactor(settings.redact_patterns, settings.redact_allow)
        # Every write reaches SQL through the redactor (engram.store.redacting), whichever path made it.
        self.store_db = RedactingStore(store_db, self.redact)
        self.embedder = embedder
        self.degraded = degraded  # why the model is unavailable; None when it serves
        self.path = path
        # Reentrant: a caller that reads and writes in several steps (maintenance, export,
        # import) holds it across them.
        self.lock = threading.RLock()
        self.weights = Weights.from_settings(settings)
        self.model_changed = False
        self.text_vectors = TextVectors(embedder)
        # The derived indexes, built by engram.engine.index_upkeep.Indexes.rebuild, which Engram
        # runs before it answers anything (so they are declared here, never None).
        self.index: MemoryIndex
        self.graph: MemoryGraph
        self.outcomes: dict[str, tuple[int, int]] = {}
        self.index_built_at: datetime | None = None
        # Bumped when a memory's text changes or memories are deleted: evidence may be gone.
        self.activity_epoch = 0

    @contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        """A block that runs alone among blocks of the same name, in this server and in every
        server sharing the database, its writes committed together (a check and the write it
        decides: workflows/lifecycle.py's session_checkpoint)."""
        with self.lock, self.store_db.transaction():
            self.store_db.hold_lock(name)
            yield

    def user_of(self, user_id: str | None) -> str:
        """The user a call acts for: user_id checked, ENGRAM_USER's when None."""
        if user_id is None:
            return self.settings.user_id
        if not isinstance(user_id, str) or not user_id.strip() or len(user_id) > 200:
            raise EngramError("user_id must be a non-empty string of at most 200 characters")
        return user_id

    def memory(self, memory_id: str, user_id: str | None = None) -> Memory:
        """The user's memory (not deleted), or NotFound."""
        if not isinstance(memory_id, str) or not memory_id:
            raise EngramError("memory_id must be a non-empty string")
        m = self.store_db.get_memory(memory_id)
        if m is None or m.user_id != self.user_of(user_id) or m.status == "deleted":
            raise NotFound(f"no memory with id {memory_id!r}")
        return m

    def task(self, task_id: str, user_id: str | None = None) -> Task:
        """The user's task, or NotFound."""
        if not isinstance(task_id, str) or not task_id:
            raise EngramError("task_id must be a non-empty string")
        t = self.store_db.get_task(task_id)
        if t is None or t.user_id != self.user_of(user_id):
            raise NotFound(f"no task with id {task_id!r}")
        return t

    def quality(self, m: Memory) -> float:
        s, f = self.outcomes.get(m.session_id, (0, 0)) if m.session_id is not None else (0, 0)
        return quality_score(m.importance, m.recall_count, s, f)
