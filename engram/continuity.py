"""Task continuity: tasks, session lifecycle, handoffs with next-step validation, failures, progress."""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timedelta
from typing import Any, Sequence

from .nextsteps import Activity, validate_steps
from .types import TASK_STATUSES, EngramError, Hit, Memory, NotFound, Session, Task

PROGRESS_STATUSES = ("planned", "in_progress", "blocked", "done")
OUTCOMES = ("success", "failure")


def _items(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise EngramError(f"{name} must be a list of strings")
    if len(value) > 100:
        raise EngramError(f"{name} has {len(value)} items; at most 100")
    return [v.strip() for v in value if v.strip()]


def _short(value: Any, name: str, limit: int = 2000, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise EngramError(f"{name} must be a string")
    if required and not value.strip():
        raise EngramError(f"{name} must not be empty")
    if len(value) > limit:
        raise EngramError(f"{name} is {len(value):,} characters; the limit is {limit:,}")
    return value.strip()


def render_handoff(doc: dict) -> str:
    """The handoff as searchable text."""
    lines = [f"Handoff: {doc['summary']}"]
    for key, label in (("completed", "Completed"), ("in_progress", "In progress"),
                       ("blocked", "Blocked"), ("next_steps", "Next steps")):
        if doc.get(key):
            lines.append(f"{label}: " + "; ".join(doc[key]))
    return "\n".join(lines)


class ContinuityMixin:
    """Mixed into Engram: uses its store_db, clock, _lock, store() and recall()."""

    # -- tasks ---------------------------------------------------------------
    def create_task(self, name: str, goal: str = "", metadata: dict | None = None,
                    user_id: str | None = None, session_id: str | None = None) -> Task:
        name = self.redact(_short(name, "name", 500))
        goal = self.redact(_short(goal, "goal", 5000, required=False))
        if metadata is not None and not isinstance(metadata, dict):
            raise EngramError("metadata must be an object")
        now = self.clock.now()
        t = Task(id="t-" + uuid.uuid4().hex[:12], name=name, goal=goal, status="open",
                 metadata=self.redact.value(metadata or {}), user_id=self._user(user_id),
                 created_at=now, updated_at=now)
        with self._lock:
            self.store_db.insert_task(t)
            self._session_task(session_id, t.id)
        return t

    def get_task_row(self, task_id: str, user_id: str | None = None) -> Task:
        if not isinstance(task_id, str) or not task_id:
            raise EngramError("task_id must be a non-empty string")
        t = self.store_db.get_task(task_id)
        if t is None or t.user_id != self._user(user_id):
            raise NotFound(f"no task with id {task_id!r}")
        return t

    def update_task(self, task_id: str, status: str | None = None, goal: str | None = None,
                    metadata: dict | None = None, name: str | None = None,
                    user_id: str | None = None, session_id: str | None = None) -> Task:
        fields: dict[str, Any] = {}
        if status is not None:
            if status not in TASK_STATUSES:
                raise EngramError(f"status must be one of {', '.join(TASK_STATUSES)}; got {status!r}")
            fields["status"] = status
        if goal is not None:
            fields["goal"] = self.redact(_short(goal, "goal", 5000, required=False))
        if name is not None:
            fields["name"] = self.redact(_short(name, "name", 500))
        if metadata is not None:
            if not isinstance(metadata, dict):
                raise EngramError("metadata must be an object")
        with self._lock:
            t = self.get_task_row(task_id, user_id)
            if metadata is not None:
                fields["metadata"] = {**t.metadata, **self.redact.value(metadata)}
            if not fields:
                raise EngramError("nothing to update: give status, goal, name or metadata")
            self.store_db.update_task(task_id, self.clock.now(), **fields)
            self._session_task(session_id, task_id)
            return self.store_db.get_task(task_id)

    def list_tasks(self, status: str | None = None, user_id: str | None = None) -> list[Task]:
        if status is not None and status not in TASK_STATUSES:
            raise EngramError(f"status must be one of {', '.join(TASK_STATUSES)}")
        return self.store_db.list_tasks(self._user(user_id), status)

    def task_view(self, task_id: str, user_id: str | None = None) -> dict:
        """The task, everything linked to it in time order, and the latest handoff's validation."""
        with self._lock:
            t = self.get_task_row(task_id, user_id)
            mems = self.store_db.query_memories("task_id = ? AND user_id = ? AND status <> 'deleted'",
                                                [task_id, t.user_id])
            latest = self.latest_handoff(t.user_id, task_id)
            return {
                "task": t.to_dict(),
                "timeline": [self._timeline_entry(m) for m in mems],
                "handoffs": [self._timeline_entry(m) for m in mems if m.memory_type == "handoff"],
                "failures": [self._timeline_entry(m) for m in mems if m.memory_type == "failure"],
                "progress": [self._timeline_entry(m) for m in mems if m.memory_type == "progress"],
                "memories": [self._timeline_entry(m) for m in mems
                             if m.memory_type not in ("handoff", "failure", "progress")],
                "latest_handoff": self.handoff_view(latest) if latest else None,
            }

    def _timeline_entry(self, m: Memory) -> dict:
        d = {"id": m.id, "memory_type": m.memory_type, "content": m.content,
             "created_at": m.created_at.isoformat(), "status": m.status,
             "session_id": m.session_id, "quality_score": round(self.quality(m), 6)}
        for key in ("handoff", "failure", "progress"):
            if key in m.metadata:
                d[key] = m.metadata[key]
        return d

    # -- sessions ------------------------------------------------------------
    def touch_session(self, session_id: str, user_id: str | None = None, client: str = "",
                      pid: int | None = None) -> None:
        """Register a session or refresh its heartbeat. Called on every request.

        A busy session's heartbeat is written at most every tenth of the heartbeat timeout:
        that keeps it far from stale and spares most requests a write.
        """
        now = self.clock.now()
        user = self._user(user_id)
        with self._lock:
            beat = self._beats.get(session_id)
            if (beat is not None and beat[0] == user
                    and timedelta(0) <= now - beat[1] < timedelta(seconds=self.settings.heartbeat_timeout_s / 10)):
                return
            s = self.store_db.get_session(session_id)
            if s is not None and s.user_id != user:
                # Naming another user's session must not let a caller act in it (outcomes, tasks).
                raise NotFound(f"no session with id {session_id!r} for this user")
            if s is None:
                s = Session(id=session_id, user_id=user, client=client or "", pid=pid,
                            status="active", started_at=now, last_heartbeat=now, ended_at=None,
                            task_id=None, outcome=None, outcome_notes=None, reported=False)
                self.store_db.upsert_session(s)
            elif s.status != "active":
                # A session that was marked interrupted but speaks again is alive after all.
                self.store_db.update_session(session_id, status="active", last_heartbeat=now,
                                             ended_at=None)
            else:
                self.store_db.update_session(session_id, last_heartbeat=now)
            self._beats[session_id] = (user, now)

    def end_session(self, session_id: str, clean: bool = True, user_id: str | None = None) -> None:
        """Mark a session ended (clean exit) or interrupted (connection lost, process killed).

        Only the user's own session (user_id None: ENGRAM_USER's): a client that named another
        user's session was refused every call and must not end it on its way out either.
        """
        # Not self._user(): a malformed user id owns no session, and a disconnect must not raise.
        user = self.settings.user_id if user_id is None else user_id
        with self._lock:
            s = self.store_db.get_session(session_id)
            if s is None or s.status != "active" or s.user_id != user:
                return
            self._beats.pop(session_id, None)
            self.store_db.update_session(session_id, status="ended" if clean else "interrupted",
                                         ended_at=self.clock.now())

    def expire_stale_sessions(self) -> int:
        """Sessions whose heartbeat is older than the timeout count as interrupted."""
        cutoff = self.clock.now() - timedelta(seconds=self.settings.heartbeat_timeout_s)
        with self._lock:
            stale = self.store_db.query_sessions("status = 'active' AND last_heartbeat < ?",
                                                 [cutoff.replace(tzinfo=None)])
            for s in stale:
                self.store_db.update_session(s.id, status="interrupted", ended_at=s.last_heartbeat)
                self._beats.pop(s.id, None)
            return len(stale)

    def take_interrupted(self, user_id: str | None = None, exclude: str | None = None) -> list[dict]:
        """Interrupted sessions not reported yet, each with its task and last progress; reported once."""
        self.expire_stale_sessions()
        user = self._user(user_id)
        with self._lock:
            rows = self.store_db.query_sessions(
                "status = 'interrupted' AND NOT reported AND user_id = ?", [user])
            out = []
            for s in rows:
                if s.id == exclude:
                    continue
                task = self.store_db.get_task(s.task_id) if s.task_id else None
                prog = self.store_db.query_memories(
                    "session_id = ? AND memory_type = 'progress' AND status <> 'deleted'", [s.id],
                    order="created_at DESC")
                out.append({
                    "session_id": s.id, "client": s.client, "started_at": s.started_at.isoformat(),
                    "last_heartbeat": s.last_heartbeat.isoformat(),
                    "ended_at": s.ended_at.isoformat() if s.ended_at else None,
                    "task": task.to_dict() if task else None,
                    "last_progress": self._timeline_entry(prog[0]) if prog else None,
                })
                self.store_db.update_session(s.id, reported=True)
            return out

    def _session_task(self, session_id: str | None, task_id: str | None) -> None:
        if session_id and task_id and self.store_db.get_session(session_id) is not None:
            self.store_db.update_session(session_id, task_id=task_id)

    def session_outcome(self, session_id: str, outcome: str, notes: str = "") -> Session:
        if outcome not in OUTCOMES:
            raise EngramError(f"outcome must be 'success' or 'failure'; got {outcome!r}")
        notes = self.redact(_short(notes, "notes", 5000, required=False))
        with self._lock:
            s = self.store_db.get_session(session_id)
            if s is None:
                raise NotFound(f"no session with id {session_id!r}")
            col = "successes" if outcome == "success" else "failures"
            self.store_db.execute(f"UPDATE sessions SET {col} = coalesce({col}, 0) + 1, outcome = ?, "
                                  "outcome_notes = ? WHERE id = ?", [outcome, notes, session_id])
            self.outcomes = self.store_db.session_outcomes()
            return self.store_db.get_session(session_id)

    def list_sessions(self, user_id: str | None = None) -> list[Session]:
        return self.store_db.query_sessions("user_id = ?", [self._user(user_id)])

    # -- handoffs, failures, progress ----------------------------------------
    def _check_task(self, task_id: str | None, user_id: str | None) -> None:
        if task_id is not None:
            self.get_task_row(task_id, user_id)

    def handoff(self, summary: str, completed: Sequence[str] | None = None,
                in_progress: Sequence[str] | None = None, blocked: Sequence[str] | None = None,
                next_steps: Sequence[str] | None = None, task_id: str | None = None,
                user_id: str | None = None, session_id: str | None = None) -> Memory:
        doc = {"summary": self.redact(_short(summary, "summary", 10_000)),
               "completed": [self.redact(x) for x in _items(completed, "completed")],
               "in_progress": [self.redact(x) for x in _items(in_progress, "in_progress")],
               "blocked": [self.redact(x) for x in _items(blocked, "blocked")],
               "next_steps": [self.redact(x) for x in _items(next_steps, "next_steps")]}
        with self._lock:
            self._check_task(task_id, user_id)
            res = self.store(render_handoff(doc), memory_type="handoff", importance=0.8,
                             task_id=task_id, metadata={"handoff": doc}, user_id=user_id,
                             session_id=session_id, resolve_conflicts=False)
            self._session_task(session_id, task_id)
            return res.memory

    def track_failure(self, error: str, component: str, root_cause: str = "",
                      task_id: str | None = None, fix: str | None = None,
                      user_id: str | None = None, session_id: str | None = None):
        doc = {"error": _short(error, "error", 10_000), "component": _short(component, "component", 200),
               "root_cause": _short(root_cause, "root_cause", 10_000, required=False),
               "fix": _short(fix, "fix", 10_000, required=False)}
        text = f"Failure in {doc['component']}: {doc['error']}"
        if doc["root_cause"]:
            text += f" Root cause: {doc['root_cause']}"
        if doc["fix"]:
            text += f" Fix: {doc['fix']}"
        with self._lock:
            self._check_task(task_id, user_id)
            res = self.store(text, memory_type="failure", importance=0.6, task_id=task_id,
                             tags=[f"component:{doc['component'].lower()}"],
                             metadata={"failure": self.redact.value(doc)}, user_id=user_id,
                             session_id=session_id)
            self._session_task(session_id, task_id)
            return res

    def track_progress(self, feature: str, status: str, completion: float = 0.0,
                       task_id: str | None = None, notes: str = "", user_id: str | None = None,
                       session_id: str | None = None) -> Memory:
        feature = _short(feature, "feature", 2000)
        if status not in PROGRESS_STATUSES:
            raise EngramError(f"status must be one of {', '.join(PROGRESS_STATUSES)}; got {status!r}")
        if isinstance(completion, bool) or not isinstance(completion, int | float) \
                or not math.isfinite(completion) or not 0 <= completion <= 1:
            raise EngramError(f"completion must be a number between 0 and 1, got {completion!r}")
        notes = _short(notes, "notes", 10_000, required=False)
        doc = {"feature": self.redact(feature), "status": status, "completion": float(completion),
               "notes": self.redact(notes)}
        text = f"Progress on {doc['feature']}: {status} ({completion:.0%})"
        if notes:
            text += f". {doc['notes']}"
        with self._lock:
            self._check_task(task_id, user_id)
            res = self.store(text, memory_type="progress", importance=0.5, task_id=task_id,
                             metadata={"progress": doc}, user_id=user_id, session_id=session_id,
                             resolve_conflicts=False)
            self._session_task(session_id, task_id)
            return res.memory

    # -- handoff validation --------------------------------------------------
    def latest_handoff(self, user_id: str, task_id: str | None = None) -> Memory | None:
        where, params = "user_id = ? AND memory_type = 'handoff' AND status = 'active'", [user_id]
        if task_id is not None:
            where += " AND task_id = ?"
            params.append(task_id)
        rows = self.store_db.query_memories(where, params, order="created_at DESC, id DESC")
        return rows[0] if rows else None

    def _activities_after(self, h: Memory) -> list[Activity]:
        where = "user_id = ? AND created_at > ? AND status <> 'deleted' AND id <> ?"
        params: list[Any] = [h.user_id, h.created_at.replace(tzinfo=None), h.id]
        if h.task_id:
            where += " AND (task_id = ? OR task_id IS NULL)"
            params.append(h.task_id)
        acts = []
        for m in self.store_db.query_memories(where, params):
            if m.memory_type == "progress" and "progress" in m.metadata:
                p = m.metadata["progress"]
                text = p["feature"] + (f". {p['notes']}" if p.get("notes") else "")
                acts.append(Activity(m.id, "progress", text, m.created_at, p["status"], p["completion"]))
            elif m.memory_type == "handoff" and "handoff" in m.metadata:
                doc = m.metadata["handoff"]
                for item in doc.get("completed", []):
                    acts.append(Activity(m.id, "handoff_completed", item, m.created_at))
                for item in doc.get("in_progress", []):
                    acts.append(Activity(m.id, "handoff_in_progress", item, m.created_at))
            elif m.memory_type == "failure":
                acts.append(Activity(m.id, "failure", m.content, m.created_at))
            else:
                acts.append(Activity(m.id, "memory", m.content, m.created_at))
        return acts

    def validate_handoff(self, h: Memory) -> list[dict]:
        steps = h.metadata.get("handoff", {}).get("next_steps", [])
        if not steps:
            return []
        if self.degraded:  # the check compares meanings; without the model it cannot run
            return [{"step": s, "status": "unchecked", "reason": "the embedding model is unavailable"}
                    for s in steps]
        return [c.to_dict() for c in validate_steps(steps, self._activities_after(h), self.embedder)]

    def handoff_view(self, h: Memory) -> dict:
        doc = h.metadata.get("handoff", {})
        return {"id": h.id, "task_id": h.task_id, "session_id": h.session_id,
                "created_at": h.created_at.isoformat(), **doc,
                "next_steps_validation": self.validate_handoff(h)}

    # -- recall with continuity context --------------------------------------
    def recall_context(self, query: str, limit: int = 10, memory_type: str | None = None,
                       task_id: str | None = None, tags: Sequence[str] | None = None,
                       as_of: datetime | None = None, mode: str = "hybrid", explain: bool = False,
                       user_id: str | None = None, session_id: str | None = None) -> dict:
        """Recall plus what a new session needs: the latest relevant handoff pinned first, the
        failures of components the hits concern, and sessions that were interrupted."""
        user = self._user(user_id)
        with self._lock:
            hits = self.recall(query, limit=limit, memory_type=memory_type, task_id=task_id,
                               tags=tags, as_of=as_of, mode=mode, explain=explain, user_id=user)
            handoff = None
            if memory_type in (None, "handoff") and as_of is None:
                handoff = self._relevant_handoff(query, user, task_id, hits)
            memories = [self.hit_dict(h) for h in hits]
            if handoff is not None:
                memories = [m for m in memories if m["id"] != handoff.id]
                pinned = self.hit_dict(Hit(handoff, 1.0 + (hits[0].score if hits else 0.0),
                                           self.quality(handoff)))
                pinned["pinned"] = True
                memories.insert(0, pinned)
            return {
                "memories": memories,
                "handoff": self.handoff_view(handoff) if handoff else None,
                "related_failures": self._related_failures(
                    hits, user, [handoff.task_id] if handoff is not None and handoff.task_id else []),
                "interrupted_sessions": self.take_interrupted(user, exclude=session_id),
            }

    def hit_dict(self, h: Hit) -> dict:
        d = h.to_dict()
        for key in ("handoff", "failure", "progress"):
            if key in h.memory.metadata:
                d[key] = h.memory.metadata[key]
        return d

    def _relevant_handoff(self, query: str, user: str, task_id: str | None,
                          hits: list[Hit]) -> Memory | None:
        if task_id is not None:
            return self.latest_handoff(user, task_id)
        open_tasks = {t.id for t in self.store_db.list_tasks(user)
                      if t.status not in ("done", "abandoned")}
        cands = self.recall(query, limit=5, memory_type="handoff", user_id=user, reinforce=False)
        cands = [h for h in cands if h.memory.task_id is None or h.memory.task_id in open_tasks]
        if not cands:
            return None
        best = cands[0].score
        # Among the handoffs about as relevant as the best one, the newest wins.
        close = [h.memory for h in cands if h.score >= 0.6 * best]
        chosen = max(close, key=lambda m: m.created_at)
        if chosen.task_id:  # a later handoff of the same task supersedes it
            return self.latest_handoff(user, chosen.task_id)
        return chosen

    def _related_failures(self, hits: list[Hit], user: str, task_ids: Sequence[str] = (),
                          limit: int = 5) -> list[dict]:
        """Earlier failures of the components the hits concern, and of the tasks they belong to."""
        components: list[str] = []
        known = self._known_components(user)
        for h in hits:
            m = h.memory
            comp = (m.metadata.get("failure") or {}).get("component")
            if comp:
                components.append(comp.lower())
            text = m.content.lower()
            components.extend(c for c in known if c in text)
        tasks = list(dict.fromkeys([*task_ids, *(h.memory.task_id for h in hits if h.memory.task_id)]))
        out: dict[str, dict] = {}
        for comp in dict.fromkeys(components):
            for m in self.store_db.query_memories(
                    "user_id = ? AND memory_type = 'failure' AND status = 'active' "
                    "AND list_contains(tags, ?)", [user, f"component:{comp}"], order="created_at DESC"):
                out.setdefault(m.id, self._failure_entry(m))
        for t in tasks:
            for m in self.store_db.query_memories(
                    "user_id = ? AND memory_type = 'failure' AND status = 'active' AND task_id = ?",
                    [user, t], order="created_at DESC"):
                out.setdefault(m.id, self._failure_entry(m))
        return list(out.values())[:limit]

    @staticmethod
    def _failure_entry(m: Memory) -> dict:
        doc = m.metadata.get("failure", {})
        return {"id": m.id, "content": m.content, "created_at": m.created_at.isoformat(),
                "task_id": m.task_id, **doc, "component": doc.get("component", "").lower()}

    def _known_components(self, user: str) -> list[str]:
        rows = self.store_db.execute(
            "SELECT DISTINCT t FROM (SELECT unnest(tags) AS t FROM memories WHERE user_id = ? "
            "AND memory_type = 'failure' AND status = 'active') WHERE t LIKE 'component:%'", [user]
        ).fetchall()
        return [r[0].split(":", 1)[1] for r in rows if len(r[0]) > len("component:") + 2]
