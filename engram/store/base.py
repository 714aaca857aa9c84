"""What the engine asks of a database: the interface every storage backend implements.

Store (db.py, DuckDB) is the first implementation. Each method is named for what the engine
needs, never for a query: no SQL text crosses this line, so a second backend implements these
methods in its own dialect without reading a string from outside store/. Rows go in and come
out as the domain values of engram.core.types (Memory, Task, Session); times are aware UTC
datetimes; embeddings go in as float32 vectors and come out as their bytes.

tests/unit/test_architecture.py checks that the engine calls nothing on its store that is not
declared here, and that Store implements all of it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, Sequence

import numpy as np

from engram.core.types import EVERY_PROJECT, Claim, Memory, Scope, Session, Task


class MemoryStore(Protocol):
    """Canonical rows of memories, their history and edges, tasks and sessions, and meta keys."""

    path: str  # ":memory:" for a database that lives only as long as the store

    # -- lifetime and transactions ------------------------------------------
    def close(self) -> None:
        """Write what is held and release the database."""

    def transaction(self) -> AbstractContextManager[None]:
        """All writes inside commit together or not at all; nested blocks join the outer one."""

    def buffered(self) -> AbstractContextManager[None]:
        """Inserts of memories, events and edges may be held and sent together; every read
        inside still sees them."""

    # -- several servers on one database ----------------------------------------
    # Each server keeps derived indexes (engram/search/memory_index.py, search/graph.py) built from the rows; when
    # other processes write to the same database it catches up from this feed of changes.
    def change_mark(self) -> int:
        """The newest change number now: a later changes_since(mark) returns only newer writes."""

    def changes_since(self, mark: int) -> tuple[int, list[str], bool]:
        """Writes committed by any process after `mark`: (the new mark, ids of memories inserted,
        updated or deleted, in change order without repeats, whether any edge changed)."""

    def try_lease(self, name: str, holder: str, now: datetime, seconds: float) -> bool:
        """Take the named lease for `seconds` when it is free, expired or already `holder`'s;
        True when `holder` holds it now."""

    def hold_lock(self, name: str) -> None:
        """Inside a transaction: wait until no other transaction holds the lock `name`, then hold
        it until this one ends (a check and the write it decides, made once however many callers
        race; PostgreSQL: an advisory lock every server sharing the database sees)."""

    # -- meta ----------------------------------------------------------------
    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def schema_version(self) -> int: ...

    def meta_items(self) -> dict[str, str]:
        """Every meta key and value (what a migration copies)."""

    # -- memories ------------------------------------------------------------
    def insert_memory(self, m: Memory, embedding: np.ndarray | None) -> None: ...

    def update_memory(self, memory_id: str, embedding: np.ndarray | None = None, **fields: Any) -> None:
        """Set fields of Memory (by name; not id) and optionally the embedding."""

    def reinforce(
        self, ids: Sequence[str], now: datetime, grow: Callable[[Memory, datetime], float]
    ) -> dict[str, Memory]:
        """Count a recall of each memory, set its stability to grow(memory, now), return them as
        they are now. The counts may be written later (see Store.reinforce), never lost to a read."""

    def get_memories(self, ids: Sequence[str]) -> dict[str, Memory]: ...

    def get_memory(self, memory_id: str) -> Memory | None: ...

    def delete_memories(self, ids: Sequence[str]) -> None:
        """Delete the memories with their events and edges, for good."""

    def put_token_vectors(self, rows: Sequence[tuple[str, str, bytes]]) -> None:
        """Keep (memory_id, text_hash, vectors) rows of the late-interaction reader."""

    def token_hashes(self) -> dict[str, str]:
        """The text hash of every kept token-vector row, by memory id (without the vectors)."""

    def token_vectors(self, ids: Sequence[str] | None = None) -> list[tuple[str, str, bytes]]:
        """The kept (memory_id, text_hash, vectors) rows: every one, or those of `ids`."""

    def iter_index_rows(self, batch: int = 5000) -> Iterable[tuple[Memory, bytes | None]]:
        """Every memory but deleted ones with its embedding, oldest first (the index's rows)."""

    def index_rows(self, ids: Sequence[str]) -> list[tuple[Memory, bytes | None]]:
        """These memories (deleted or missing ones aside) with their embeddings, as
        iter_index_rows gives them: what a server re-reads to apply another's writes."""

    def count_live_memories(self) -> int:
        """Memories of every user and status but deleted: the rows the index holds."""

    def count(self, table: str) -> int:
        """Rows of memories, tasks, sessions, edges, memory_events or meta."""

    def orphan_counts(self) -> dict[str, int]:
        """Rows of edges, memory_events and token_vectors that name a memory not stored (doctor)."""

    # -- what continuity reads -------------------------------------------------
    def task_memories(self, user_id: str, task_id: str) -> list[Memory]:
        """The task's memories of any type but deleted ones, oldest first."""

    def task_handoffs(self, user_id: str, task_id: str) -> list[Memory]:
        """The task's handoffs but deleted ones, oldest first."""

    def latest_handoff(
        self,
        user_id: str,
        task_id: str | None = None,
        tags: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> Memory | None:
        """The newest active handoff of the user (of the task; carrying one of `tags`; with `now`,
        not expired by then)."""

    def last_session_progress(self, session_id: str) -> Memory | None:
        """The newest progress note the session wrote (deleted ones aside)."""

    def active_failures_tagged(self, user_id: str, tag: str, scope: Scope = EVERY_PROJECT) -> list[Memory]:
        """The user's active failures carrying `tag` seen in `scope` (engram.core.types.Scope), newest first."""

    def active_failures_of_task(self, user_id: str, task_id: str) -> list[Memory]:
        """The task's active failures, newest first."""

    def active_failure_tags(self, user_id: str, prefix: str, scope: Scope = EVERY_PROJECT) -> list[str]:
        """The distinct tags starting with `prefix` on the user's active failures seen in `scope`."""

    def task_last_activity(self, user_id: str) -> dict[str, tuple[datetime, str, str]]:
        """Per task of the user: when its newest memory was written, its type and its content."""

    # -- memory history and edges --------------------------------------------
    def add_event(self, memory_id: str, now: datetime, action: str, detail: dict | None = None) -> None: ...

    def events(self, memory_id: str) -> list[dict]:
        """The memory's history, oldest first: {"at", "action", "detail"}."""

    def set_event_detail(self, memory_id: str, at: datetime, action: str, detail: dict | None) -> None:
        """Replace the detail of the memory's `action` event at `at` (engram scrub rewrites history)."""

    def add_edges(self, user_id: str, edges: Sequence[tuple[str, str, float]], new_source: bool = False) -> None:
        """Insert or replace (src, dst, weight) edges; new_source: every src was inserted just now."""

    def delete_edges_of(self, ids: Sequence[str]) -> None:
        """Delete every edge that starts or ends at one of the ids."""

    def delete_edges(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Delete these (src, dst) edges."""

    def edges_from(self, ids: Sequence[str]) -> list[tuple[str, str, float]]:
        """(src, dst, weight) of every edge that starts at one of the ids."""

    def all_edges(self) -> list[tuple[str, str, float, str]]:
        """(src, dst, weight, user_id) of every edge."""

    # -- tasks ---------------------------------------------------------------
    def insert_task(self, t: Task) -> None: ...

    def update_task(self, task_id: str, now: datetime, **fields: Any) -> None:
        """Set name, goal, status or metadata; updated_at becomes `now`."""

    def get_task(self, task_id: str) -> Task | None: ...

    def list_tasks(self, user_id: str, status: str | None = None, scope: Scope = EVERY_PROJECT) -> list[Task]:
        """The user's tasks (of that status) seen in `scope`, last updated first."""

    def task_sessions(self, task_id: str, status: str) -> list[Session]:
        """The task's sessions of that status, oldest first."""

    # -- sessions ------------------------------------------------------------
    def get_session(self, session_id: str) -> Session | None: ...

    def upsert_session(self, s: Session) -> None: ...

    def update_session(self, session_id: str, **fields: Any) -> None:
        """Set fields of Session by name."""

    def user_sessions(self, user_id: str) -> list[Session]:
        """The user's sessions, oldest first."""

    def sessions_of_task(self, user_id: str, task_id: str) -> list[Session]:
        """The user's sessions that named the task or wrote one of its memories, oldest first."""

    def stale_sessions(self, before: datetime) -> list[Session]:
        """Active sessions of any user whose last heartbeat is older than `before`."""

    def unreported_interruptions(
        self, user_id: str, stale_before: datetime, exclude: str | None = None, scope: Scope = EVERY_PROJECT
    ) -> list[Session]:
        """The user's sessions (seen in `scope`) not reported yet that are interrupted, or active
        with a last heartbeat older than `stale_before`, but `exclude`; oldest first."""

    def projects(self, user_id: str) -> list[tuple[str, int, int]]:
        """(project, memories, tasks) of each project the user's live memories or tasks belong to."""

    def add_session_outcome(self, session_id: str, outcome: str, notes: str) -> None:
        """Count one "success" or "failure" of the session and keep it as its latest outcome."""

    def session_outcomes(self) -> dict[str, tuple[int, int]]:
        """(successes, failures) of every session that reported any."""

    # -- task claims (engram/continuity/claims.py) ------------------------------------------
    def get_claim(self, task_id: str) -> Claim | None:
        """The task's claim with its holder's last heartbeat and status, or None."""

    def task_claims(self, user_id: str) -> dict[str, Claim]:
        """The claims on the user's tasks, by task id."""

    def insert_claim(self, task_id: str, user_id: str, session_id: str, client: str, now: datetime) -> bool:
        """Claim a task nobody holds; False (and nothing written) when a claim row exists."""

    def swap_claim(self, task_id: str, holder: str, session_id: str, client: str, now: datetime) -> bool:
        """Give the task's claim to session_id if `holder` still holds it (a compare-and-swap);
        False when another session changed the claim first."""

    def delete_claim(self, task_id: str, session_id: str | None = None) -> bool:
        """Drop the task's claim (only session_id's when given); True when one was dropped."""

    def delete_session_claims(self, session_id: str) -> list[str]:
        """Drop every claim the session holds; the task ids."""

    def add_claim_notice(self, session_id: str, task_id: str, by_session: str, by_client: str, now: datetime) -> None:
        """Tell session_id, on its next call, that by_session took task_id over."""

    def take_claim_notices(self, session_id: str) -> list[dict]:
        """The session's notices ({task_id, by_session, by_client, at}), oldest first, removed."""

    # -- maintenance and stats -------------------------------------------------
    def open_task_ids(self) -> set[str]:
        """Ids of tasks neither done nor abandoned, of every user."""

    def latest_handoff_ids(self) -> set[str]:
        """The newest active handoff of every (user, task) pair, the task-less ones included."""

    def retired_memories(self, statuses: Sequence[str]) -> list[tuple[str, str, str | None, datetime | None]]:
        """(id, status, superseded_by, valid_to) of memories of these statuses."""

    def memory_counts(self, user_id: str | None = None) -> list[tuple[str, str, str, int]]:
        """(user_id, memory_type, status, count) groups, of every user when user_id is None."""

    def status_counts(self, table: str, user_id: str | None = None) -> dict[str, int]:
        """Rows of "tasks" or "sessions" by status."""

    def file_size(self) -> int | None:
        """Bytes on disk (None in memory)."""

    def flush_wal(self) -> None:
        """Make every committed write durable in the main file (fold the write-ahead log into it)."""

    def backup(self, dest: Path) -> int:
        """A consistent copy of the whole database at dest (bytes written); PostgreSQL refuses:
        its own tools (pg_dump) back it up."""

    def compact(self) -> bool:
        """Rewrite the database so deleted rows' bytes leave the disk; False in memory."""

    def erasure_pending(self) -> bool:
        """True when deleted rows may still have bytes on disk (compact clears it)."""

    # -- export and import -----------------------------------------------------
    def table_counts(self, user_id: str | None = None) -> dict[str, int]:
        """Rows per exported table: memories, tasks, sessions, edges, memory_events."""

    def existing_ids(self, table: str, ids: Sequence[str]) -> set[str]:
        """Which of the ids exist in "memories", "tasks" or "sessions"."""

    def iter_memory_rows(self, user_id: str | None = None, batch: int = 2000) -> Iterable[tuple[Memory, bytes | None]]:
        """Every memory row of any status, with its embedding, oldest first."""

    def events_by_memory(self, user_id: str | None = None) -> dict[str, list[dict]]: ...

    def all_tasks(self, user_id: str | None = None) -> list[Task]:
        """Tasks, oldest first."""

    def sessions_with_counts(self, user_id: str | None = None) -> list[tuple[Session, int, int]]:
        """Sessions, oldest first, with their success and failure counts."""

    def user_edges(self, user_id: str | None = None) -> list[tuple[str, str, float, str]]:
        """(src, dst, weight, user_id) of the user's edges (every user's when None), sorted."""

    # -- per-user keys (engram/admin/keys.py) ------------------------------------------
    def insert_key(self, key_id: str, user_id: str, key_hash: str, label: str | None, now: datetime) -> None:
        """Keep a new key's hash (never the key) for the user."""

    def key_user(self, key_hash: str) -> str | None:
        """The user of the key with this hash; None when no key has it or it was revoked."""

    def list_keys(self, user_id: str | None) -> list[dict]:
        """Keys (of the user; every user's when None), oldest first: {id, user_id, key_hash,
        label, created_at, revoked_at}. engram.admin.keys shows them without the hash."""

    def revoke_key(self, key_id: str, now: datetime) -> bool:
        """Mark the key revoked from `now`; False when no unrevoked key has that id."""

    def keys_in_use(self) -> bool:
        """True once any key was made, revoked ones included: revoking the last key must not
        open the server to requests without one."""
