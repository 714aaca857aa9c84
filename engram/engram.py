"""The facade: every entry point (library, MCP, HTTP, CLI) talks to an Engram.

It opens the parts (the store, the model, the derived indexes, the clock, the lock, the settings:
engram.parts) and the modules that work on them, each by concern; its public methods delegate.

    indexes.py   the derived indexes: rebuild, catch_up, re-embed, edges
    writes.py    store, update, forget, pin
    recall.py    recall and recall_context (one ranking per call), get_context
    curation.py  a memory, a page of memories, strength, versions
    sessions.py  sessions: heartbeat, interruptions, outcomes
    handoffs.py  handoff, failure and progress records, step checks, a task's plan
    tasks.py     tasks, claims, resume_task, the prompt block
    render.py    the texts (pure): the <memory> block, the handoff and resume texts, the prompt
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator, Sequence

from .clock import Clock, SystemClock
from .config import Settings
from .curation import Curation
from .embedding import Embedder, UnavailableEmbedder, load_embedder
from .errors import ModelUnavailable
from .handoffs import Handoffs
from .index import one_blas_thread
from .indexes import Indexes
from .nextsteps import StepCheck
from .parts import Parts
from .recall import Recall
from .sessions import Sessions
from .store import open_store
from .tasks import Tasks
from .types import NO_PROJECT, Hit, Memory, Scope, Session, StoreResult, Task
from .writes import Writes


def _shared(name: str, doc: str) -> property:
    """An attribute of the parts, read (and set, as a test swaps the store) through the facade."""
    return property(lambda self: getattr(self.parts, name), lambda self, v: setattr(self.parts, name, v), doc=doc)


class Engram:
    """Long-term memory in one DuckDB file (or a PostgreSQL database).

    >>> eng = Engram(":memory:")           # or a path; default ENGRAM_HOME/memories.duckdb
    >>> eng.store("Deploys go to Fly.io from main.").action
    'new'
    """

    settings = _shared("settings", "The settings this engram runs with.")
    clock = _shared("clock", "The clock every timestamp comes from.")
    path = _shared("path", "The DuckDB file, or the PostgreSQL URL without its password.")
    store_db = _shared("store_db", "The store (engram.store): the engine's modules only.")
    embedder = _shared("embedder", "The embedding model (UnavailableEmbedder while degraded).")
    degraded = _shared("degraded", "Why the model is unavailable; None when it serves.")
    model_changed = _shared("model_changed", "The store was embedded with another model (allow_model_change).")
    redact = _shared("redact", "The redactor applied to every text stored.")
    weights = _shared("weights", "The ranking weights (retrieve.Weights).")
    index = _shared("index", "The derived memory index (vectors, BM25, filters).")
    graph = _shared("graph", "The memory graph (edges between related memories).")
    outcomes = _shared("outcomes", "Session outcomes: session id -> (successes, failures).")
    index_built_at = _shared("index_built_at", "When the derived indexes were last rebuilt.")
    claims = _shared("claims", "Who holds which task (engram.claims).")
    activity_epoch = _shared("activity_epoch", "Bumped when a memory's text changes or memories go.")

    def __init__(self, path: str | Path | None = None, *, settings: Settings | None = None,
                 embedder: Embedder | None = None, clock: Clock | None = None,
                 allow_model_change: bool = False, degraded_ok: bool = False):
        """degraded_ok: if the model cannot load, serve keyword recall (see `degraded`) instead
        of failing; the daemon runs so, a library user gets ModelUnavailable."""
        settings = settings or Settings.from_env()
        clock = clock or SystemClock()
        one_blas_thread()
        # A PostgreSQL URL (path, or settings.database_url when no path is given) or a DuckDB file.
        path = str(path if path is not None else settings.database_url or settings.db_path)
        # The store first: a damaged, locked or too new one is refused at once, not after the
        # seconds the model takes to load.
        store_db = open_store(path, clock.now())
        degraded = None
        try:
            embedder = embedder or _load_model(settings)
        except ModelUnavailable as e:
            if not degraded_ok:
                store_db.close()
                raise
            degraded = str(e)
        except BaseException:
            store_db.close()
            raise
        if degraded:
            embedder = UnavailableEmbedder(settings.model, int(store_db.get_meta("model_dim") or 0), degraded)
        # store_db.path: a URL without its password, as shown in health and errors.
        self.parts = p = Parts(settings, clock, store_db, embedder, degraded, store_db.path)
        self.indexes = Indexes(p, allow_model_change)
        self.writes = Writes(p, self.indexes)
        self.sessions = Sessions(p)
        self.handoffs = Handoffs(p, self.indexes, self.writes, self.sessions)
        self.tasks = Tasks(p, self.handoffs, self.sessions)
        self.recaller = Recall(p, self.indexes, self.sessions, self.handoffs)
        self.curation = Curation(p, self.indexes)
        try:
            p.model_changed = self.indexes.check_model()
            self.indexes.rebuild()  # reads every memory: a damaged block is found here (DatabaseDamaged)
        except BaseException:
            store_db.close()  # refused (another model, a damaged file): no connection may outlive it
            raise

    # -- lifecycle -----------------------------------------------------------
    def retry_model(self, force: bool = False) -> bool:
        """While degraded, try to load the model again (at most every MODEL_RETRY_S unless
        force); on success embed the rows stored without a vector. True when it came back."""
        return self.indexes.retry_model(lambda: _load_model(self.parts.settings), force)

    def backup(self, dest: Path) -> int:
        """A consistent copy of the store's file at dest (engram.backup.take_backup checks it)."""
        return self.parts.store_db.backup(dest)

    def schema_version(self) -> int:
        return self.parts.store_db.schema_version()

    def close(self) -> None:
        with self.parts.lock:
            self.parts.store_db.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        """A block that runs alone among blocks of the same name, in this server and in every
        server sharing the database, its writes committed together (a check and the write it
        decides: engram.lifecycle.session_checkpoint)."""
        with self.parts.lock, self.parts.store_db.transaction():
            self.parts.store_db.hold_lock(name)
            yield

    @property
    def lock(self) -> threading.RLock:
        """The engine's lock (reentrant): a caller that reads and writes in several steps
        (maintenance, export, import) holds it across them."""
        return self.parts.lock

    # -- the user a call acts for, a memory, a task (engram.parts) ---------
    def user_of(self, user_id: str | None) -> str:
        return self.parts.user_of(user_id)

    def get(self, memory_id: str, user_id: str | None = None) -> Memory:
        return self.parts.memory(memory_id, user_id)

    def quality(self, m: Memory) -> float:
        return self.parts.quality(m)

    def get_task_row(self, task_id: str, user_id: str | None = None) -> Task:
        return self.parts.task(task_id, user_id)

    # -- the derived indexes (engram.indexes) ------------------------------
    def rebuild_indexes(self) -> None:
        return self.indexes.rebuild()

    def catch_up(self, force: bool = False) -> int:
        return self.indexes.catch_up(force)

    def reembed_all(self) -> int:
        return self.indexes.reembed_all()

    def rebuild_edges(self, ids: Sequence[str] | None = None) -> int:
        return self.indexes.rebuild_edges(ids)

    def index_status(self) -> dict[str, Any]:
        return self.indexes.status()

    def index_counts(self) -> dict[tuple[str, str], int]:
        return self.indexes.counts()

    # -- writes (engram.writes) --------------------------------------------
    def store(self, content: str, memory_type: str = "fact", importance: float = 0.5,
              tags: Sequence[str] | None = None, task_id: str | None = None,
              metadata: dict | None = None, provenance: Sequence[str] = (),
              user_id: str | None = None, session_id: str | None = None, pinned: bool = False,
              created_at: datetime | None = None, resolve_conflicts: bool = True,
              conversation: str | None = None, chunk: bool = True,
              project: str | None = None) -> StoreResult:
        return self.writes.store(content, memory_type, importance, tags, task_id, metadata, provenance, user_id,
                                 session_id, pinned, created_at, resolve_conflicts, conversation, chunk, project)

    def store_many(self, items: Sequence[dict]) -> list[StoreResult]:
        return self.writes.store_many(items)

    def update(self, memory_id: str, content: str, user_id: str | None = None) -> StoreResult:
        return self.writes.update(memory_id, content, user_id)

    def forget(self, memory_id: str | None = None, query: str | None = None,
               user_id: str | None = None, dry_run: bool = False, scope: Scope = NO_PROJECT) -> list[str]:
        return self.writes.forget(memory_id, query, user_id, dry_run, scope)

    def remove_memories(self, ids: Sequence[str]) -> None:
        return self.writes.remove_memories(ids)

    def set_pinned(self, memory_id: str, pinned: bool, user_id: str | None = None) -> Memory:
        return self.writes.set_pinned(memory_id, pinned, user_id)

    # -- recall (engram.recall) --------------------------------------------
    def context(self, query: str, max_tokens: int = 1500, task_id: str | None = None, limit: int = 20,
                tags: Sequence[str] | str | None = None, user_id: str | None = None,
                session_id: str | None = None, scope: Scope = NO_PROJECT) -> dict:
        return self.recaller.context(query, max_tokens, task_id, limit, tags, user_id, session_id, scope)

    def recall(self, query: str, limit: int = 10, memory_type: str | None = None,
               task_id: str | None = None, tags: Sequence[str] | None = None,
               as_of: datetime | None = None, mode: str = "hybrid", explain: bool = False,
               user_id: str | None = None, graph: bool = True, reinforce: bool = True,
               exclude_types: Sequence[str] = (), min_share: float = 0.0,
               scope: Scope = NO_PROJECT, strong_only: bool = False, rerank: bool | None = None) -> list[Hit]:
        return self.recaller.recall(query, limit, memory_type, task_id, tags, as_of, mode, explain, user_id, graph,
                                    reinforce, exclude_types, min_share, scope, strong_only, rerank)

    def recall_context(self, query: str, limit: int = 10, memory_type: str | None = None,
                       task_id: str | None = None, tags: Sequence[str] | None = None,
                       as_of: datetime | None = None, mode: str = "hybrid", explain: bool = False,
                       user_id: str | None = None, session_id: str | None = None,
                       min_share: float = 0.0, scope: Scope = NO_PROJECT, strong_only: bool = False) -> dict:
        return self.recaller.recall_context(query, limit, memory_type, task_id, tags, as_of, mode, explain, user_id,
                                            session_id, min_share, scope, strong_only)

    def hit_dict(self, h: Hit) -> dict:
        return self.recaller.hit_dict(h)

    # -- curation (engram.curation) ----------------------------------------
    def memory_view(self, memory_id: str, user_id: str | None = None) -> dict:
        return self.curation.memory_view(memory_id, user_id)

    def history(self, memory_id: str, user_id: str | None = None) -> list[dict]:
        return self.curation.history(memory_id, user_id)

    def list_memories(self, memory_type: str | None = None, task_id: str | None = None,
                      tags: Sequence[str] | None = None, as_of: datetime | None = None,
                      status: str = "active", offset: int = 0, limit: int = 50,
                      user_id: str | None = None, in_project: str | None = None) -> dict:
        return self.curation.list_memories(memory_type, task_id, tags, as_of, status, offset, limit, user_id,
                                           in_project)

    def memory_summary(self, m: Memory, now: datetime) -> dict:
        return self.curation.memory_summary(m, now)

    def strength_curve(self, memory_id: str, days: int = 90, user_id: str | None = None) -> dict:
        return self.curation.strength_curve(memory_id, days, user_id)

    def versions(self, memory_id: str, user_id: str | None = None) -> dict:
        return self.curation.versions(memory_id, user_id)

    # -- sessions (engram.sessions) ----------------------------------------
    def touch_session(self, session_id: str, user_id: str | None = None, client: str = "",
                      pid: int | None = None, project: str | None = None,
                      branch: str | None = None) -> None:
        return self.sessions.touch_session(session_id, user_id, client, pid, project, branch)

    def end_session(self, session_id: str, clean: bool = True, user_id: str | None = None) -> None:
        return self.sessions.end_session(session_id, clean, user_id)

    def expire_stale_sessions(self) -> int:
        return self.sessions.expire_stale_sessions()

    def report_interruption(self, session_id: str, reason: str, task_id: str | None = None,
                            user_id: str | None = None) -> Session:
        return self.sessions.report_interruption(session_id, reason, task_id, user_id)

    def take_interrupted(self, user_id: str | None = None, exclude: str | None = None,
                         scope: Scope = NO_PROJECT) -> list[dict]:
        return self.sessions.take_interrupted(user_id, exclude, scope)

    def session_outcome(self, session_id: str, outcome: str, notes: str = "",
                        user_id: str | None = None) -> Session:
        return self.sessions.session_outcome(session_id, outcome, notes, user_id)

    def projects(self, user_id: str | None = None) -> list[dict]:
        return self.sessions.projects(user_id)

    def list_sessions(self, user_id: str | None = None) -> list[Session]:
        return self.sessions.list_sessions(user_id)

    # -- handoffs and plans (engram.handoffs) ------------------------------
    def handoff(self, summary: str, completed: Sequence[str] | None = None,
                in_progress: Sequence[str] | None = None, blocked: Sequence[str] | None = None,
                next_steps: Sequence[str] | None = None, task_id: str | None = None,
                user_id: str | None = None, session_id: str | None = None,
                checkpoint: dict | None = None, tags: Sequence[str] | None = None,
                project: str | None = None) -> Memory:
        return self.handoffs.handoff(summary, completed, in_progress, blocked, next_steps, task_id, user_id,
                                     session_id, checkpoint, tags, project)

    def track_failure(self, error: str, component: str, root_cause: str = "",
                      task_id: str | None = None, fix: str | None = None,
                      user_id: str | None = None, session_id: str | None = None,
                      project: str | None = None):
        return self.handoffs.track_failure(error, component, root_cause, task_id, fix, user_id, session_id, project)

    def track_progress(self, feature: str, status: str, completion: float | None = None,
                       task_id: str | None = None, notes: str = "", user_id: str | None = None,
                       session_id: str | None = None, project: str | None = None) -> Memory:
        return self.handoffs.track_progress(feature, status, completion, task_id, notes, user_id, session_id, project)

    def latest_handoff(self, user_id: str, task_id: str | None = None,
                       tags: Sequence[str] | None = None) -> Memory | None:
        return self.handoffs.latest_handoff(user_id, task_id, tags)

    def step_checks(self, h: Memory, read: dict[str, Memory] | None = None) -> list[StepCheck]:
        return self.handoffs.step_checks(h, read)

    def validate_handoff(self, h: Memory) -> list[dict]:
        return self.handoffs.validate_handoff(h)

    def handoff_view(self, h: Memory) -> dict:
        # A handoff memory stored without the engine's document (store_memory with type
        # handoff) is shown as a handoff whose summary is its text.
        return self.handoffs.view(h)

    def task_plan(self, task_id: str, user_id: str | None = None) -> list[dict]:
        return self.handoffs.plan(task_id, user_id)

    def task_plan_of(self, user: str, task_id: str) -> list[dict]:
        return self.handoffs.plan_of(user, task_id)

    # -- tasks and claims (engram.tasks) -----------------------------------
    def create_task(self, name: str, goal: str = "", metadata: dict | None = None,
                    user_id: str | None = None, session_id: str | None = None,
                    project: str | None = None) -> Task:
        return self.tasks.create_task(name, goal, metadata, user_id, session_id, project)

    def update_task(self, task_id: str, status: str | None = None, goal: str | None = None,
                    metadata: dict | None = None, name: str | None = None,
                    user_id: str | None = None, session_id: str | None = None) -> Task:
        return self.tasks.update_task(task_id, status, goal, metadata, name, user_id, session_id)

    def list_tasks(self, status: str | None = None, user_id: str | None = None,
                   scope: Scope = NO_PROJECT) -> list[Task]:
        return self.tasks.list_tasks(status, user_id, scope)

    def task_overview(self, status: str | None = None, limit: int = 50,
                      user_id: str | None = None, scope: Scope = NO_PROJECT,
                      reader: str | None = None) -> list[dict]:
        return self.tasks.task_overview(status, limit, user_id, scope, reader)

    def task_view(self, task_id: str, limit: int = 50, user_id: str | None = None,
                  reader: str | None = None) -> dict:
        return self.tasks.task_view(task_id, limit, user_id, reader)

    def task_sessions(self, task_id: str, user_id: str | None = None) -> list[dict]:
        return self.tasks.task_sessions(task_id, user_id)

    def resume_task(self, task_id: str, max_tokens: int = 2000, user_id: str | None = None,
                    session_id: str | None = None, client: str = "", take_over: bool = False,
                    reader: str | None = None) -> dict:
        return self.tasks.resume_task(task_id, max_tokens, user_id, session_id, client, take_over, reader)

    def claim_task(self, task_id: str, session_id: str, client: str = "", take_over: bool = False,
                   user_id: str | None = None) -> dict:
        return self.tasks.claim_task(task_id, session_id, client, take_over, user_id)

    def work_on(self, t: Task | str, session_id: str | None, client: str = "", take_over: bool = False,
                user_id: str | None = None) -> dict | None:
        return self.tasks.work_on(t, session_id, client, take_over, user_id)

    def release_task(self, task_id: str, session_id: str, user_id: str | None = None) -> dict:
        return self.tasks.release_task(task_id, session_id, user_id)

    def claim_notices(self, session_id: str) -> list[dict]:
        return self.tasks.claim_notices(session_id)

    def prompt_block(self, user_id: str | None = None, limit: int = 10, scope: Scope = NO_PROJECT) -> str:
        return self.tasks.prompt_block(user_id, limit, scope)


def _load_model(settings: Settings) -> Embedder:
    return load_embedder(settings.model, settings.model_cache, settings.torch_threads, onnx=settings.onnx)
