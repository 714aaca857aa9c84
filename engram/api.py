"""The operations every entry point exposes (MCP tools, HTTP routes, CLI, the daemon's socket).

Each takes plain JSON-like arguments plus the caller's context, calls the facade once and
returns a JSON-ready dict. Nothing here knows about a transport.
"""

from __future__ import annotations

import inspect
import math
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from .clock import utc
from .continuity import estimate_tokens
from .engram import Engram
from .metrics import Metrics
from .types import EngramError

TOOLS = (
    "recall_memory", "store_memory", "update_memory", "forget_memory", "get_context",
    "session_handoff", "create_task", "update_task", "get_task", "track_failure",
    "track_progress", "session_outcome", "consolidate_memory", "memory_stats",
    "list_tasks", "resume_task", "report_interruption",
)
# Operations that are not MCP tools but that the CLI and HTTP API use.
EXTRA_OPS = ("export_memories", "import_memories", "import_from", "reindex", "run_maintenance",
             "get_memory", "health", "memory_prompt")
# Curation operations the web panel (issue 17) needs and no MCP tool has; also HTTP routes.
PANEL_OPS = ("list_memories", "pin_memory", "memory_strength", "memory_versions", "task_sessions")
# Parts of a maintenance report that name or quote memories; memory_stats shows a run without them.
PRIVATE_REPORT_KEYS = frozenset({"clusters", "pruned_ids"})


@dataclass(frozen=True)
class Ctx:
    """Who is calling: one session per client connection or process."""

    session_id: str
    user_id: str | None = None
    client: str = ""
    pid: int | None = None


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


MAX_ARG_DEPTH = 32  # JSON nesting allowed in arguments (metadata objects); generous for real use


def check_arguments(args: dict, op: str) -> None:
    """Refuse values no store can keep faithfully: lone surrogates, non-finite numbers, runaway nesting.

    Iterative, so hostile nesting cannot exhaust the interpreter's stack before it is refused.
    """
    stack: list[tuple[str, Any, int]] = [(k, v, 1) for k, v in args.items()]
    while stack:
        path, v, depth = stack.pop()
        where = path if len(path) <= 80 else path[:77] + "..."
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise EngramError(f"{op}: {where} is not valid Unicode (it holds a lone surrogate)") from None
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise EngramError(f"{op}: {where} is {v!r}; numbers must be finite")
        elif isinstance(v, dict | list | tuple):
            if depth >= MAX_ARG_DEPTH:
                raise EngramError(f"{op}: {where} nests deeper than {MAX_ARG_DEPTH} levels")
            items = v.items() if isinstance(v, dict) else enumerate(v)
            for k, x in items:
                if isinstance(v, dict) and not isinstance(k, str):
                    raise EngramError(f"{op}: {where} has a key that is not a string")
                stack.append((f"{path}.{k}" if isinstance(v, dict) else f"{path}[{k}]", x, depth + 1))


class Api:
    def __init__(self, engram: Engram, scheduler: Any = None):
        self.eng = engram
        self.scheduler = scheduler
        self.metrics = Metrics()
        self._ops: dict[str, Callable] = {n: getattr(self, n) for n in TOOLS + EXTRA_OPS + PANEL_OPS}
        self._params = {n: inspect.signature(f).parameters for n, f in self._ops.items()}
        self._lock = threading.RLock()

    def call(self, name: str, args: dict | None, ctx: Ctx) -> dict:
        """Run one operation for a caller. Raises EngramError with a clear message on bad input."""
        fn = self._ops.get(name)
        if fn is None:
            raise EngramError(f"unknown operation {name!r}")
        if args is not None and not isinstance(args, dict):
            raise EngramError("arguments must be an object")
        args = dict(args or {})
        params = self._params[name]
        unknown = [k for k in args if k not in params or k == "ctx"]
        if unknown:
            raise EngramError(f"{name}: unknown argument(s): {', '.join(sorted(map(str, unknown)))}")
        missing = [k for k, p in params.items()
                   if k != "ctx" and p.default is inspect.Parameter.empty and k not in args]
        if missing:
            raise EngramError(f"{name}: missing required argument(s): {', '.join(missing)}")
        check_arguments(args, name)
        if self.eng.degraded:
            self.eng.retry_model()  # rate-limited; recovers as soon as the model loads again
        start = time.perf_counter()
        ok = False
        try:
            if name != "health":
                self.eng.touch_session(ctx.session_id, ctx.user_id, ctx.client, ctx.pid)
            result = fn(ctx, **args)
            ok = True
            return result
        finally:
            self.metrics.observe(name, time.perf_counter() - start, ok)

    # -- memories ------------------------------------------------------------
    def store_memory(self, ctx: Ctx, content: str, memory_type: str = "fact", importance: float = 0.5,
                     tags: list[str] | None = None, task_id: str | None = None,
                     metadata: dict | None = None, pinned: bool = False,
                     conversation: str | None = None) -> dict:
        if task_id is not None:
            self.eng.get_task_row(task_id, ctx.user_id)
        r = self.eng.store(content, memory_type=memory_type, importance=importance, tags=tags,
                           task_id=task_id, metadata=metadata, user_id=ctx.user_id,
                           session_id=ctx.session_id, pinned=bool(pinned), conversation=conversation)
        self.metrics.stored(r.action)
        return r.to_dict()

    def update_memory(self, ctx: Ctx, memory_id: str, content: str) -> dict:
        r = self.eng.update(memory_id, content, user_id=ctx.user_id)
        return r.to_dict()

    def forget_memory(self, ctx: Ctx, memory_id: str | None = None, query: str | None = None,
                      dry_run: bool = False) -> dict:
        ids = self.eng.forget(memory_id=memory_id, query=query, user_id=ctx.user_id, dry_run=bool(dry_run))
        return {"deleted": [] if dry_run else ids, "would_delete": ids if dry_run else [],
                "count": len(ids), "dry_run": bool(dry_run)}

    def get_memory(self, ctx: Ctx, memory_id: str) -> dict:
        m = self.eng.get(memory_id, ctx.user_id)
        return {**m.to_dict(), "quality_score": self.eng.quality(m),
                "history": self.eng.store_db.events(m.id)}

    def recall_memory(self, ctx: Ctx, query: str, limit: int = 10, memory_type: str | None = None,
                      task_id: str | None = None, tags: list[str] | None = None, as_of: str | None = None,
                      mode: str = "hybrid", explain: bool = False) -> dict:
        out = self.eng.recall_context(query, limit=limit, memory_type=memory_type, task_id=task_id,
                                      tags=tags, as_of=parse_time(as_of), mode=mode,
                                      explain=bool(explain), user_id=ctx.user_id,
                                      session_id=ctx.session_id)
        self.metrics.recalled()
        return self._say_degraded(out)

    def _say_degraded(self, out: dict) -> dict:
        """Results of a keyword-only recall say so, and why (the model did not load)."""
        if self.eng.degraded:
            out["degraded"] = f"keyword (bm25) recall only: the embedding model is unavailable ({self.eng.degraded})"
        return out

    def get_context(self, ctx: Ctx, query: str, max_tokens: int = 1500, task_id: str | None = None,
                    limit: int = 20) -> dict:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 50 <= max_tokens <= 100_000:
            raise EngramError("max_tokens must be a whole number from 50 to 100000")
        r = self.eng.recall_context(query, limit=limit, task_id=task_id, user_id=ctx.user_id,
                                    session_id=ctx.session_id,
                                    min_share=self.eng.settings.context_min_share)
        lines, used, ids = ["<memory>"], 0, []
        budget = max_tokens - 4
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
            line = f"- pitfall [{f['component']}]: {f['content']}"
            t = estimate_tokens(line)
            if used + t <= budget:
                lines.append(line)
                used += t
        lines.append("</memory>")
        text = "\n".join(lines)
        return self._say_degraded({"context": text, "tokens": estimate_tokens(text), "memory_ids": ids,
                                   "interrupted_sessions": r["interrupted_sessions"]})

    # -- tasks and continuity --------------------------------------------------
    def create_task(self, ctx: Ctx, name: str, goal: str = "", metadata: dict | None = None) -> dict:
        t = self.eng.create_task(name, goal, metadata, user_id=ctx.user_id, session_id=ctx.session_id)
        return {"task_id": t.id, **t.to_dict()}

    def update_task(self, ctx: Ctx, task_id: str, status: str | None = None, goal: str | None = None,
                    metadata: dict | None = None, name: str | None = None) -> dict:
        t = self.eng.update_task(task_id, status=status, goal=goal, metadata=metadata, name=name,
                                 user_id=ctx.user_id, session_id=ctx.session_id)
        return {"task_id": t.id, **t.to_dict()}

    def get_task(self, ctx: Ctx, task_id: str) -> dict:
        return self.eng.task_view(task_id, user_id=ctx.user_id)

    def list_tasks(self, ctx: Ctx, status: str | None = None, limit: int = 50) -> dict:
        return {"tasks": self.eng.task_overview(status, limit, user_id=ctx.user_id)}

    def resume_task(self, ctx: Ctx, task_id: str, max_tokens: int = 2000) -> dict:
        return self.eng.resume_task(task_id, max_tokens, user_id=ctx.user_id)

    def report_interruption(self, ctx: Ctx, reason: str, task_id: str | None = None) -> dict:
        s = self.eng.report_interruption(ctx.session_id, reason, task_id, user_id=ctx.user_id)
        return {"session_id": s.id, "status": s.status, "reason": s.interruption, "task_id": s.task_id,
                "ended_at": s.ended_at.isoformat() if s.ended_at else None}

    def memory_prompt(self, ctx: Ctx) -> dict:
        return {"prompt": self.eng.prompt_block(user_id=ctx.user_id)}

    def session_handoff(self, ctx: Ctx, summary: str, completed: list[str] | None = None,
                        in_progress: list[str] | None = None, blocked: list[str] | None = None,
                        next_steps: list[str] | None = None, task_id: str | None = None) -> dict:
        m = self.eng.handoff(summary, completed, in_progress, blocked, next_steps, task_id,
                             user_id=ctx.user_id, session_id=ctx.session_id)
        self.metrics.stored("new")
        return {"handoff_id": m.id, "memory_id": m.id, "task_id": m.task_id,
                "created_at": m.created_at.isoformat()}

    def track_failure(self, ctx: Ctx, error: str, component: str, root_cause: str = "",
                      task_id: str | None = None, fix: str | None = None) -> dict:
        r = self.eng.track_failure(error, component, root_cause, task_id, fix,
                                   user_id=ctx.user_id, session_id=ctx.session_id)
        self.metrics.stored(r.action)
        return r.to_dict()

    def track_progress(self, ctx: Ctx, feature: str, status: str, completion: float = 0.0,
                       task_id: str | None = None, notes: str = "") -> dict:
        m = self.eng.track_progress(feature, status, completion, task_id, notes,
                                    user_id=ctx.user_id, session_id=ctx.session_id)
        self.metrics.stored("new")
        return {"memory_id": m.id, "task_id": m.task_id, **m.metadata["progress"]}

    def session_outcome(self, ctx: Ctx, outcome: str, notes: str = "") -> dict:
        s = self.eng.session_outcome(ctx.session_id, outcome, notes)
        return {"session_id": s.id, "outcome": s.outcome, "notes": s.outcome_notes}

    # -- curation (issue 17: the web panel) ------------------------------------
    def list_memories(self, ctx: Ctx, memory_type: str | None = None, task_id: str | None = None,
                      tag: str | None = None, as_of: str | None = None, status: str = "active",
                      offset: int = 0, limit: int = 50) -> dict:
        """A page of memories, newest first, with filters; total counts every match."""
        return self.eng.list_memories(memory_type, task_id, [tag] if tag else None, parse_time(as_of),
                                      status, offset, limit, user_id=ctx.user_id)

    def pin_memory(self, ctx: Ctx, memory_id: str, pinned: bool = True) -> dict:
        m = self.eng.set_pinned(memory_id, pinned, user_id=ctx.user_id)
        return {"memory_id": m.id, "pinned": m.pinned}

    def memory_strength(self, ctx: Ctx, memory_id: str, days: int = 90) -> dict:
        """Strength since the last recall and projected `days` ahead, with when it would be pruned."""
        return self.eng.strength_curve(memory_id, days, user_id=ctx.user_id)

    def memory_versions(self, ctx: Ctx, memory_id: str) -> dict:
        """The supersession chain through a memory and what a consolidation merged into it."""
        return self.eng.versions(memory_id, user_id=ctx.user_id)

    def task_sessions(self, ctx: Ctx, task_id: str) -> dict:
        """The sessions that worked on a task, interrupted ones with their reason."""
        return {"sessions": self.eng.task_sessions(task_id, user_id=ctx.user_id)}

    # -- maintenance -----------------------------------------------------------
    def _user(self, ctx: Ctx) -> str:
        """The caller's user, ENGRAM_USER when the transport named none."""
        return self.eng._user(ctx.user_id)

    def consolidate_memory(self, ctx: Ctx, apply: bool = False) -> dict:
        from .maintenance import run_maintenance
        # Only the caller's memories: a report names memories and quotes them, and apply deletes.
        # The scheduled job (MaintenanceScheduler) covers every user.
        report = run_maintenance(self.eng, apply=bool(apply), user_id=self._user(ctx))
        if apply:
            self.metrics.maintained(report)
            if self.scheduler is not None:
                self.scheduler.record(report)
        return report

    def run_maintenance(self, ctx: Ctx) -> dict:
        return self.consolidate_memory(ctx, apply=True)

    def memory_stats(self, ctx: Ctx) -> dict:
        from .maintenance import memory_stats
        stats = memory_stats(self.eng, user_id=self._user(ctx))
        if self.scheduler is not None:
            status = self.scheduler.status()
            last = status.get("last_report")
            if last:  # another user's run, or the all-user one: counts only, no ids or texts
                status["last_report"] = {k: v for k, v in last.items() if k not in PRIVATE_REPORT_KEYS}
            stats["maintenance"] = status
        return stats

    def export_memories(self, ctx: Ctx, path: str) -> dict:
        from .transfer import export_jsonl
        return export_jsonl(self.eng, path, user_id=self._user(ctx))

    def import_memories(self, ctx: Ctx, path: str, on_conflict: str = "error", reembed: bool = False) -> dict:
        from .transfer import import_jsonl
        return import_jsonl(self.eng, path, on_conflict=on_conflict, reembed=bool(reembed),
                            user_id=self._user(ctx))

    def import_from(self, ctx: Ctx, source: str, path: str, dry_run: bool = False) -> dict:
        """Memories from another tool's file (mcp-memory, mem0, markdown); see engram.importers."""
        from .importers import import_from
        return import_from(self.eng, source, path, dry_run=bool(dry_run), user_id=self._user(ctx))

    def reindex(self, ctx: Ctx, reembed: bool = False) -> dict:
        if reembed:
            n = self.eng.reembed_all()
            return {"reembedded": n, "model": self.eng.embedder.name}
        self.eng.rebuild_indexes()
        return {"indexed": len(self.eng.index), "edges": self.eng.graph.edge_count()}

    def health(self, ctx: Ctx) -> dict:
        out = {"status": "degraded" if self.eng.degraded else "ok", "memories": len(self.eng.index),
               "model": self.eng.embedder.name, "backend": getattr(self.eng.embedder, "backend", None),
               "db": self.eng.path}
        if self.eng.degraded:
            out["model_error"] = self.eng.degraded
            out["serving"] = "keyword (bm25) recall; stores are kept and embedded when the model is back"
        return out
