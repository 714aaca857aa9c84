"""The operations every entry point exposes (MCP tools, HTTP routes, CLI, the daemon's socket).

Their arguments are declared in engram.ops and checked there by `Api.call`; each method takes
them complete plus the caller's context, calls the facade once and returns a JSON-ready dict.
Nothing here knows about a transport.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engram import ops
from engram.admin.store_operations import StoreOperations
from engram.continuity import listing
from engram.core.clock import utc
from engram.core.metrics import Metrics
from engram.core.recall_query import RecallQuery
from engram.core.types import Ctx, EngramError, Scope
from engram.engram import Engram
from engram.workflows.hook_operations import HookOperations

if TYPE_CHECKING:
    from engram.admin.scheduler import MaintenanceScheduler

# The MCP tools, in the order the calling model sees them (declared in engram.ops).
TOOLS = ops.TOOLS


def scope_of(ctx: Ctx, all_projects: bool) -> Scope:
    """What a read sees: the caller's project and the global rows, or every project's."""
    return Scope.of(ctx.project, all_projects)


def owner(ctx: Ctx, scope: str) -> str | None:
    """The project a write belongs to: the caller's, or none when it is marked global."""
    return None if scope == "global" else ctx.project


def parse_time(value: Any, name: str = "as_of") -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return utc(value)
    if not isinstance(value, str):
        raise EngramError(f"{name} must be an ISO 8601 date or datetime string")
    try:
        return utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        raise EngramError(f"{name}={value!r} is not an ISO 8601 date or datetime") from None


def _served_by(part: str, method: Callable) -> Callable:
    """An operation of Api served by `method` of the object Api holds as `part`, with that method's
    own signature and docstring: its parameters are declared once, there."""
    name = method.__name__

    @functools.wraps(method)
    def call(self: Api, *args: Any, **kwargs: Any) -> Any:
        return getattr(getattr(self, part), name)(*args, **kwargs)

    return call


class Api:
    def __init__(self, engram: Engram, scheduler: MaintenanceScheduler | None = None):
        self.eng = engram
        self.metrics = Metrics()
        self.store_wide = StoreOperations(engram, self.metrics, scheduler)
        self.hooks = HookOperations(engram)
        self._ops: dict[str, Callable] = {n: getattr(self, n) for n in ops.OPS}
        self._lock = threading.RLock()

    @property
    def scheduler(self) -> MaintenanceScheduler | None:
        """The daemon's maintenance scheduler (None in a library or CLI call): its runs are
        recorded with the ones the operations apply, and memory_stats shows its status."""
        return self.store_wide.scheduler

    @scheduler.setter
    def scheduler(self, scheduler: MaintenanceScheduler | None) -> None:
        self.store_wide.scheduler = scheduler

    def call(self, name: str, args: dict | None, ctx: Ctx) -> dict:
        """Run one operation for a caller. Raises EngramError with a clear message on bad input.

        The arguments are checked against the operation's declaration (engram.ops) and reach
        the method complete, defaults filled in: the declaration is the one place they live.
        """
        args = ops.check(name, args)
        fn = self._ops[name]
        if self.eng.degraded:
            self.eng.retry_model()  # rate-limited; recovers as soon as the model loads again
        start = time.perf_counter()
        ok = False
        try:
            if name != "health":
                self.eng.touch_session(
                    ctx.session_id,
                    user_id=ctx.user_id,
                    client=ctx.client,
                    pid=ctx.pid,
                    project=ctx.project,
                    branch=ctx.branch,
                )
            result = fn(ctx, **args)
            if name != "health" and isinstance(result, dict):
                notices = self.eng.claim_notices(ctx.session_id)
                if notices:  # another session took a task of this one's over: said once
                    result["claim_notices"] = notices
            ok = True
            return result
        finally:
            self.metrics.observe(name, time.perf_counter() - start, ok)

    # -- memories ------------------------------------------------------------
    def store_memory(
        self,
        ctx: Ctx,
        content: str,
        memory_type: str,
        importance: float,
        tags: list[str] | str | None,
        task_id: str | None,
        metadata: dict | None,
        pinned: bool,
        conversation: str | None,
        scope: str,
        tier: str | None,
        ttl_days: float | None,
    ) -> dict:
        r = self.eng.store_memory(
            content,
            memory_type=memory_type,
            importance=importance,
            tags=tags,
            task_id=task_id,
            metadata=metadata,
            user_id=ctx.user_id,
            session_id=ctx.session_id,
            pinned=pinned,
            conversation=conversation,
            project=owner(ctx, scope),
            tier=tier,
            ttl_days=ttl_days,
        )
        self.metrics.stored(r.action)
        return r.to_dict()

    def update_memory(self, ctx: Ctx, memory_id: str, content: str) -> dict:
        r = self.eng.update_memory(memory_id, content, user_id=ctx.user_id)
        return r.to_dict()

    def forget_memory(
        self, ctx: Ctx, memory_id: str | None, query: str | None, dry_run: bool, all_projects: bool
    ) -> dict:
        ids = self.eng.forget_memory(
            memory_id=memory_id,
            query=query,
            user_id=ctx.user_id,
            dry_run=bool(dry_run),
            scope=scope_of(ctx, all_projects),
        )
        return {
            "deleted": [] if dry_run else ids,
            "would_delete": ids if dry_run else [],
            "count": len(ids),
            "dry_run": bool(dry_run),
        }

    def get_memory(self, ctx: Ctx, memory_id: str, around: int) -> dict:
        view = self.eng.get_memory(memory_id, user_id=ctx.user_id)
        if around:
            view["around"] = listing.around(self.eng.neighbours(memory_id, around, user_id=ctx.user_id))
        return view

    def recall_memory(
        self,
        ctx: Ctx,
        query: str,
        limit: int,
        memory_type: str | None,
        task_id: str | None,
        tags: list[str] | None,
        as_of: str | None,
        mode: str,
        explain: bool,
        all_projects: bool,
        compact: bool,
    ) -> dict:
        q = RecallQuery.of(
            query,
            limit=limit,
            memory_type=memory_type,
            task_id=task_id,
            tags=tags,
            as_of=parse_time(as_of),
            mode=mode,
            explain=bool(explain),
            user_id=ctx.user_id,
            scope=scope_of(ctx, all_projects),
        )
        out = self.eng.recall_memory(q, session_id=ctx.session_id)
        self.metrics.recalled()
        if compact:  # one line per memory; the full text of those wanted comes from get_memory
            out["memories"] = listing.compact_rows(out["memories"])
            out["related_failures"] = listing.compact_rows(out["related_failures"])
            out["handoff"] = {"id": out["handoff"]["id"]} if out.get("handoff") else None
        return self._say_degraded(out)

    def _say_degraded(self, out: dict) -> dict:
        """Results of a keyword-only recall say so, and why (the model did not load)."""
        if self.eng.degraded:
            out["degraded"] = f"keyword (bm25) recall only: the embedding model is unavailable ({self.eng.degraded})"
        return out

    def get_context(
        self,
        ctx: Ctx,
        query: str,
        max_tokens: int,
        task_id: str | None,
        limit: int,
        tags: list[str] | str | None,
        all_projects: bool,
    ) -> dict:
        q = RecallQuery.of(
            query, limit=limit, task_id=task_id, tags=tags, user_id=ctx.user_id, scope=scope_of(ctx, all_projects)
        )
        return self._say_degraded(self.eng.get_context(q, max_tokens=max_tokens, session_id=ctx.session_id))

    # -- tasks and continuity --------------------------------------------------
    def create_task(self, ctx: Ctx, name: str, goal: str, metadata: dict | None, scope: str) -> dict:
        t = self.eng.create_task(
            name, goal, metadata, user_id=ctx.user_id, session_id=ctx.session_id, project=owner(ctx, scope)
        )
        return {"task_id": t.id, **t.to_dict()}

    def update_task(
        self, ctx: Ctx, task_id: str, status: str | None, goal: str | None, metadata: dict | None, name: str | None
    ) -> dict:
        t = self.eng.update_task(
            task_id,
            status=status,
            goal=goal,
            metadata=metadata,
            name=name,
            user_id=ctx.user_id,
            session_id=ctx.session_id,
        )
        return {"task_id": t.id, **t.to_dict()}

    def get_task(self, ctx: Ctx, task_id: str, limit: int) -> dict:
        return self.eng.get_task(task_id, limit=limit, user_id=ctx.user_id, reader=ctx.session_id)

    def list_tasks(self, ctx: Ctx, status: str | None, limit: int, all_projects: bool) -> dict:
        return {
            "tasks": self.eng.list_tasks(
                status=status,
                limit=limit,
                user_id=ctx.user_id,
                scope=scope_of(ctx, all_projects),
                reader=ctx.session_id,
            ),
            "project": ctx.project,
        }

    def resume_task(self, ctx: Ctx, task_id: str, max_tokens: int, take_over: bool, claim: bool) -> dict:
        return self.eng.resume_task(
            task_id,
            max_tokens=max_tokens,
            user_id=ctx.user_id,
            session_id=ctx.session_id if claim else None,
            client=ctx.client,
            take_over=bool(take_over),
            reader=ctx.session_id,
        )

    def claim_task(self, ctx: Ctx, task_id: str, take_over: bool) -> dict:
        return self.eng.claim_task(
            task_id, ctx.session_id, client=ctx.client, take_over=bool(take_over), user_id=ctx.user_id
        )

    def release_task(self, ctx: Ctx, task_id: str) -> dict:
        return self.eng.release_task(task_id, ctx.session_id, user_id=ctx.user_id)

    def _working(self, ctx: Ctx, out: dict) -> dict:
        """A write for a task claims it for the caller when nobody holds it; when another
        session does, the write is kept and `claim` says who holds the task."""
        if out.get("task_id"):
            claim = self.eng.work_on(out["task_id"], ctx.session_id, client=ctx.client, user_id=ctx.user_id)
            if claim is not None:
                out["claim"] = claim
        return out

    def report_interruption(self, ctx: Ctx, reason: str, task_id: str | None) -> dict:
        s = self.eng.report_interruption(ctx.session_id, reason, task_id=task_id, user_id=ctx.user_id)
        return {
            "session_id": s.id,
            "status": s.status,
            "reason": s.interruption,
            "task_id": s.task_id,
            "ended_at": s.ended_at.isoformat() if s.ended_at else None,
        }

    def memory_prompt(self, ctx: Ctx, all_projects: bool) -> dict:
        return {"prompt": self.eng.memory_prompt(user_id=ctx.user_id, scope=scope_of(ctx, all_projects))}

    def list_projects(self, ctx: Ctx) -> dict:
        """The projects the caller's memories and tasks belong to, and how many rows each holds."""
        return {"projects": self.eng.list_projects(ctx.user_id), "current": ctx.project}

    def session_handoff(
        self,
        ctx: Ctx,
        summary: str,
        completed: list[str] | None,
        in_progress: list[str] | None,
        blocked: list[str] | None,
        next_steps: list[str] | None,
        task_id: str | None,
    ) -> dict:
        m = self.eng.session_handoff(
            summary,
            completed=completed,
            in_progress=in_progress,
            blocked=blocked,
            next_steps=next_steps,
            task_id=task_id,
            user_id=ctx.user_id,
            session_id=ctx.session_id,
            project=ctx.project,
        )
        self.metrics.stored("new")
        return self._working(
            ctx, {"handoff_id": m.id, "memory_id": m.id, "task_id": m.task_id, "created_at": m.created_at.isoformat()}
        )

    def track_failure(
        self, ctx: Ctx, error: str, component: str, root_cause: str, task_id: str | None, fix: str | None
    ) -> dict:
        r = self.eng.track_failure(
            error,
            component,
            root_cause,
            task_id=task_id,
            fix=fix,
            user_id=ctx.user_id,
            session_id=ctx.session_id,
            project=ctx.project,
        )
        self.metrics.stored(r.action)
        return r.to_dict()

    def track_progress(
        self, ctx: Ctx, feature: str, status: str, completion: float | None, task_id: str | None, notes: str
    ) -> dict:
        m = self.eng.track_progress(
            feature,
            status,
            completion,
            task_id=task_id,
            notes=notes,
            user_id=ctx.user_id,
            session_id=ctx.session_id,
            project=ctx.project,
        )
        self.metrics.stored("new")
        return self._working(ctx, {"memory_id": m.id, "task_id": m.task_id, **m.metadata["progress"]})

    def session_outcome(self, ctx: Ctx, outcome: str, notes: str) -> dict:
        s = self.eng.session_outcome(ctx.session_id, outcome, notes, user_id=ctx.user_id)
        return {"session_id": s.id, "outcome": s.outcome, "notes": s.outcome_notes}

    # -- the agents' lifecycle hooks (engram/workflows/hook_operations.py) -------------------------
    session_start = _served_by("hooks", HookOperations.session_start)
    prompt_memories = _served_by("hooks", HookOperations.prompt_memories)
    session_capture = _served_by("hooks", HookOperations.session_capture)
    session_checkpoint = _served_by("hooks", HookOperations.session_checkpoint)

    def capture_conventions(self, ctx: Ctx, prompts: list[str], answers: list[dict[str, str]] | None) -> dict:
        """The conventions the prompts state, and the decisions of the answers that pick an option
        the agent offered, stored as facts of the caller's project (engram.continuity.conventions);
        the hooks' capture and checkpoint call it."""
        return self.eng.capture_conventions(
            prompts, answers=answers, user_id=ctx.user_id, session_id=ctx.session_id, project=ctx.project
        )

    # -- curation (issue 17: the web panel) ------------------------------------
    def list_memories(
        self,
        ctx: Ctx,
        memory_type: str | None,
        task_id: str | None,
        tag: str | None,
        as_of: str | None,
        status: str,
        offset: int,
        limit: int,
        in_project: str | None,
    ) -> dict:
        """A page of memories, newest first, with filters; total counts every match."""
        return self.eng.list_memories(
            memory_type=memory_type,
            task_id=task_id,
            tags=[tag] if tag else None,
            as_of=parse_time(as_of),
            status=status,
            offset=offset,
            limit=limit,
            user_id=ctx.user_id,
            in_project=in_project,
        )

    def pin_memory(self, ctx: Ctx, memory_id: str, pinned: bool) -> dict:
        m = self.eng.pin_memory(memory_id, pinned, user_id=ctx.user_id)
        return {"memory_id": m.id, "pinned": m.pinned}

    def set_tier(self, ctx: Ctx, memory_id: str, tier: str) -> dict:
        return self.eng.set_tier(memory_id, tier, user_id=ctx.user_id)

    def keep_memory(self, ctx: Ctx, memory_id: str) -> dict:
        return self.eng.keep_memory(memory_id, user_id=ctx.user_id)

    def memory_strength(self, ctx: Ctx, memory_id: str, days: int) -> dict:
        """Strength since the last recall and projected `days` ahead, with when it would be pruned."""
        return self.eng.memory_strength(memory_id, days=days, user_id=ctx.user_id)

    def memory_versions(self, ctx: Ctx, memory_id: str) -> dict:
        """The supersession chain through a memory and what a consolidation merged into it."""
        return self.eng.memory_versions(memory_id, user_id=ctx.user_id)

    def task_sessions(self, ctx: Ctx, task_id: str) -> dict:
        """The sessions that worked on a task, interrupted ones with their reason."""
        return {"sessions": self.eng.task_sessions(task_id, user_id=ctx.user_id)}

    # -- the store as a whole and its administration (engram/admin/store_operations.py) ------------
    consolidate_memory = _served_by("store_wide", StoreOperations.consolidate_memory)
    run_maintenance = _served_by("store_wide", StoreOperations.run_maintenance)
    memory_stats = _served_by("store_wide", StoreOperations.memory_stats)
    export_memories = _served_by("store_wide", StoreOperations.export_memories)
    import_memories = _served_by("store_wide", StoreOperations.import_memories)
    import_from = _served_by("store_wide", StoreOperations.import_from)
    migrate_store = _served_by("store_wide", StoreOperations.migrate_store)
    backup_store = _served_by("store_wide", StoreOperations.backup_store)
    scrub_store = _served_by("store_wide", StoreOperations.scrub_store)
    reindex = _served_by("store_wide", StoreOperations.reindex)
    create_key = _served_by("store_wide", StoreOperations.create_key)
    list_keys = _served_by("store_wide", StoreOperations.list_keys)
    revoke_key = _served_by("store_wide", StoreOperations.revoke_key)
    health = _served_by("store_wide", StoreOperations.health)
    doctor = _served_by("store_wide", StoreOperations.doctor)
    prune_memories = _served_by("store_wide", StoreOperations.prune_memories)
    share_project = _served_by("store_wide", StoreOperations.share_project)
    sync_project = _served_by("store_wide", StoreOperations.sync_project)
