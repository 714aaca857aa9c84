"""The facade: every entry point (library, MCP, HTTP, CLI) talks to an Engram.

It opens the state the engine shares (the store, the model, the derived indexes, the clock, the
lock, the settings: engine/state.py) and the parts that work on it, each by concern; its public
methods are delegations, each made by `_delegate` from the part's own method, so a parameter is
declared once, in the part (a parameter with a default is keyword-only there):

    engine/index_upkeep.py        the derived indexes: rebuild, catch_up, re-embed, edges
    engine/writes.py              store, update, forget
    engine/tiers.py               pin, move a memory between tiers
    engine/recall.py              recall: one ranking per call
    engine/curation.py            a memory, a page of memories, strength, versions
    continuity/sessions.py        sessions: heartbeat, interruptions, outcomes
    continuity/handoffs.py        handoff, failure and progress records, step checks, a task's plan
    continuity/tasks.py           tasks, claims, resume_task, the prompt block
    continuity/recall_context.py  recall_context and get_context, over one recall
    continuity/keeping.py         keep: a memory captured automatically made durable
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Callable

from engram.continuity.claims import Claims
from engram.continuity.conventions import Conventions
from engram.continuity.handoffs import Handoffs
from engram.continuity.keeping import Keeping
from engram.continuity.recall_context import RecallContext
from engram.continuity.sessions import Sessions
from engram.continuity.tasks import Tasks
from engram.core.clock import Clock, SystemClock
from engram.core.errors import ModelUnavailable
from engram.core.settings import Settings
from engram.engine.curation import Curation
from engram.engine.index_upkeep import Indexes
from engram.engine.recall import Recall
from engram.engine.state import EngineState
from engram.engine.tiers import Tiers
from engram.engine.writes import Writes
from engram.models.embedding import Embedder, UnavailableEmbedder, load_embedder
from engram.search.vector_search import one_blas_thread
from engram.store import open_store

# Why an engram opened with load_model_later serves keyword recall until its model has loaded.
MODEL_LOADING = "it is still loading (exported once per machine at the first start)"


def _delegate(part: str, method: Callable) -> Callable:
    """A facade method calling `method` on the part Engram holds as `part`, with that method's own
    signature and docstring (help() and inspect show them): the parameters are the part's."""
    name = method.__name__

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        return getattr(getattr(self, part), name)(*args, **kwargs)

    return call


def _shared(name: str, doc: str) -> property:
    """An attribute of the parts, read (and set, as a test swaps the store) through the facade."""
    return property(lambda self: getattr(self.state, name), lambda self, v: setattr(self.state, name, v), doc=doc)


class Engram:
    """Long-term memory in one DuckDB file (or a PostgreSQL database).

    >>> eng = Engram(":memory:")           # or a path; default ENGRAM_HOME/memories.duckdb
    >>> eng.store_memory("Deploys go to Fly.io from main.").action
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
    weights = _shared("weights", "The ranking weights (ranking.Weights).")
    index = _shared("index", "The derived memory index (vectors, BM25, filters).")
    graph = _shared("graph", "The memory graph (edges between related memories).")
    outcomes = _shared("outcomes", "Session outcomes: session id -> (successes, failures).")
    index_built_at = _shared("index_built_at", "When the derived indexes were last rebuilt.")
    activity_epoch = _shared("activity_epoch", "Bumped when a memory's text changes or memories go.")

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        clock: Clock | None = None,
        allow_model_change: bool = False,
        degraded_ok: bool = False,
        load_model_later: bool = False,
    ):
        """degraded_ok: if the model cannot load, serve keyword recall (see `degraded`) instead
        of failing; the daemon runs so, a library user gets ModelUnavailable.

        load_model_later: open without the model (serving as degraded, MODEL_LOADING) until
        load_model() is called: the daemon listens first and loads it then, since a first start
        on a machine exports the model's graph (seconds to tens of seconds), longer than a hook waits."""
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
            if embedder is None and load_model_later:
                degraded = MODEL_LOADING
            else:
                embedder = embedder or _load_model(settings)
        except ModelUnavailable as e:
            if not degraded_ok:
                store_db.close()
                raise
            degraded = str(e)
        except BaseException:
            store_db.close()
            raise
        if degraded is not None or embedder is None:  # the model did not load: keyword recall until it does
            embedder = UnavailableEmbedder(
                settings.model, int(store_db.get_meta("model_dim") or 0), degraded or "the model did not load"
            )
        # store_db.path: a URL without its password, as shown in health and errors.
        self.state = p = EngineState(settings, clock, store_db, embedder, degraded, store_db.path)
        self.indexes = Indexes(p, allow_model_change)
        self.writes = Writes(p, self.indexes)
        self.tiers = Tiers(p)
        self.sessions = Sessions(p)
        self.handoffs = Handoffs(p, self.indexes, self.writes, self.sessions)
        self.tasks = Tasks(p, self.handoffs, self.sessions)
        self.recaller = Recall(p, self.indexes)
        self.context_recall = RecallContext(p, self.recaller, self.sessions, self.handoffs)
        self.curation = Curation(p, self.indexes)
        self.conventions = Conventions(self)
        self.keeping = Keeping(p)
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
        return self.indexes.retry_model(lambda: _load_model(self.state.settings), force=force)

    def load_model(self) -> bool:
        """Load the model of an engram opened with load_model_later (see retry_model); raises
        ModelMismatch when the store was embedded with another one (keyword recall goes on)."""
        return self.indexes.retry_model(lambda: _load_model(self.state.settings), force=True)

    def backup(self, dest: Path) -> int:
        """A consistent copy of the store's file at dest (engram.admin.backups.backup_store checks it)."""
        return self.state.store_db.backup(dest)

    def schema_version(self) -> int:
        return self.state.store_db.schema_version()

    def close(self) -> None:
        with self.state.lock:
            self.state.store_db.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def lock(self) -> threading.RLock:
        """The engine's lock (reentrant): a caller that reads and writes in several steps
        (maintenance, export, import) holds it across them."""
        return self.state.lock

    @property
    def claims(self) -> Claims:
        """Who holds which task (continuity/claims.py)."""
        return self.tasks.claims

    # -- the user a call acts for, a memory, a task (engine/state.py) --------
    user_of = _delegate("state", EngineState.user_of)
    exclusive = _delegate("state", EngineState.exclusive)
    get = _delegate("state", EngineState.memory)
    quality = _delegate("state", EngineState.quality)
    get_task_row = _delegate("state", EngineState.task)

    # -- the derived indexes (engine/index_upkeep.py) -----------------------
    rebuild_indexes = _delegate("indexes", Indexes.rebuild)
    catch_up = _delegate("indexes", Indexes.catch_up)
    reembed_all = _delegate("indexes", Indexes.reembed_all)
    rebuild_edges = _delegate("indexes", Indexes.rebuild_edges)
    fill_token_vectors = _delegate("indexes", Indexes.fill_token_vectors)
    index_status = _delegate("indexes", Indexes.status)
    index_counts = _delegate("indexes", Indexes.counts)

    # -- writes (engine/writes.py) -------------------------------------------
    store_memory = _delegate("writes", Writes.store_memory)
    store_many = _delegate("writes", Writes.store_many)
    store_batch = _delegate("writes", Writes.store_batch)
    update_memory = _delegate("writes", Writes.update_memory)
    forget_memory = _delegate("writes", Writes.forget_memory)
    remove_memories = _delegate("writes", Writes.remove_memories)
    pin_memory = _delegate("tiers", Tiers.pin_memory)
    set_tier = _delegate("tiers", Tiers.set_tier)

    # -- recall (engine/recall.py, continuity/recall_context.py) -------------
    recall = _delegate("recaller", Recall.recall)
    get_context = _delegate("context_recall", RecallContext.get_context)
    recall_memory = _delegate("context_recall", RecallContext.recall_memory)
    hit_dict = _delegate("context_recall", RecallContext.hit_dict)

    # -- curation (engine/curation.py) ---------------------------------------
    get_memory = _delegate("curation", Curation.get_memory)
    neighbours = _delegate("curation", Curation.neighbours)
    history = _delegate("curation", Curation.history)
    list_memories = _delegate("curation", Curation.list_memories)
    memory_summary = _delegate("curation", Curation.memory_summary)
    memory_strength = _delegate("curation", Curation.memory_strength)
    memory_versions = _delegate("curation", Curation.memory_versions)

    # -- sessions (continuity/sessions.py) -----------------------------------
    touch_session = _delegate("sessions", Sessions.touch_session)
    end_session = _delegate("sessions", Sessions.end_session)
    expire_stale_sessions = _delegate("sessions", Sessions.expire_stale_sessions)
    report_interruption = _delegate("sessions", Sessions.report_interruption)
    take_interrupted = _delegate("sessions", Sessions.take_interrupted)
    session_outcome = _delegate("sessions", Sessions.session_outcome)
    list_projects = _delegate("sessions", Sessions.list_projects)
    list_sessions = _delegate("sessions", Sessions.list_sessions)

    # -- handoffs and plans (continuity/handoffs.py) -------------------------
    session_handoff = _delegate("handoffs", Handoffs.session_handoff)
    track_failure = _delegate("handoffs", Handoffs.track_failure)
    track_progress = _delegate("handoffs", Handoffs.track_progress)
    latest_handoff = _delegate("handoffs", Handoffs.latest_handoff)
    step_checks = _delegate("handoffs", Handoffs.step_checks)
    validate_handoff = _delegate("handoffs", Handoffs.validate_handoff)
    # A handoff memory stored without the engine's document (store_memory with type handoff) is
    # shown as a handoff whose summary is its text.
    handoff_view = _delegate("handoffs", Handoffs.view)
    task_plan = _delegate("handoffs", Handoffs.plan)
    task_plan_of = _delegate("handoffs", Handoffs.plan_of)

    # -- tasks and claims (continuity/tasks.py) ------------------------------
    create_task = _delegate("tasks", Tasks.create_task)
    update_task = _delegate("tasks", Tasks.update_task)
    task_rows = _delegate("tasks", Tasks.task_rows)
    list_tasks = _delegate("tasks", Tasks.list_tasks)
    get_task = _delegate("tasks", Tasks.get_task)
    task_sessions = _delegate("tasks", Tasks.task_sessions)
    resume_task = _delegate("tasks", Tasks.resume_task)
    claim_task = _delegate("tasks", Tasks.claim_task)
    work_on = _delegate("tasks", Tasks.work_on)
    release_task = _delegate("tasks", Tasks.release_task)
    claim_notices = _delegate("tasks", Tasks.claim_notices)
    memory_prompt = _delegate("tasks", Tasks.memory_prompt)

    # -- conventions the user states (continuity/conventions.py) ------------
    capture_conventions = _delegate("conventions", Conventions.capture_conventions)

    # -- keeping what capture stored (continuity/keeping.py) -----------------
    keep_memory = _delegate("keeping", Keeping.keep_memory)
    confirm_convention = _delegate("keeping", Keeping.confirm_convention)

    # -- the names of the previous release, kept for one release (see the changelog): each operation has
    # one name from the operation table (engram.ops) down to the part that does it.
    store = store_memory
    update = update_memory
    forget = forget_memory
    set_pinned = pin_memory
    context = get_context
    recall_context = recall_memory
    memory_view = get_memory
    strength_curve = memory_strength
    versions = memory_versions
    projects = list_projects
    handoff = session_handoff
    task_overview = list_tasks
    task_view = get_task
    prompt_block = memory_prompt
    keep = keep_memory


def _load_model(settings: Settings) -> Embedder:
    return load_embedder(settings.model, settings.model_cache, settings.torch_threads, onnx=settings.onnx)
