"""Tasks: created, updated, listed with their last activity and holder, viewed with their
timeline, claimed by the session working on them (engram.continuity.claims), and resumed (resume_task)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from engram.continuity.claims import Claims
from engram.continuity.entries import failure_entry, progress_by_feature, timeline_entry, to_keep, unique, working_set
from engram.continuity.handoffs import Handoffs
from engram.continuity.rendering import estimate_tokens, held, render_prompt, render_resume
from engram.continuity.sessions import Sessions
from engram.core.bounds import MAX_TOKENS, TASK_LIMIT
from engram.core.documents import document
from engram.core.project import check_project
from engram.core.types import NO_PROJECT, OPEN_TASK_STATUSES, TASK_STATUSES, EngramError, Scope, Task
from engram.core.validation import check_short
from engram.engine.state import EngineState

# get_task's list of each memory type (every other type is in "memories").
_TASK_LISTS = {"handoff": "handoffs", "failure": "failures", "progress": "progress"}


class Tasks:
    """Tasks, their claims, their views and the resume block."""

    def __init__(self, p: EngineState, handoffs: Handoffs, sessions: Sessions):
        self.p = p
        self.handoffs = handoffs
        self.sessions = sessions
        self.claims = Claims(p.store_db, p.clock, p.settings.claim_timeout_s)

    def create_task(
        self,
        name: str,
        goal: str = "",
        metadata: dict | None = None,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        project: str | None = None,
    ) -> Task:
        """A new open task of `project` (None: of no project, listed in every project)."""
        name = self.p.redact(check_short(name, "name", 500))
        goal = self.p.redact(check_short(goal, "goal", 5000, required=False))
        if metadata is not None and not isinstance(metadata, dict):
            raise EngramError("metadata must be an object")
        now = self.p.clock.now()
        t = Task(
            id="t-" + uuid.uuid4().hex[:12],
            name=name,
            goal=goal,
            status="open",
            metadata=self.p.redact.value(metadata or {}),
            user_id=self.p.user_of(user_id),
            created_at=now,
            updated_at=now,
            project=check_project(project),
        )
        with self.p.lock:
            self.p.store_db.insert_task(t)
            self.sessions.set_task(session_id, t.id)
        return t

    def update_task(
        self,
        task_id: str,
        *,
        status: str | None = None,
        goal: str | None = None,
        metadata: dict | None = None,
        name: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
    ) -> Task:
        fields: dict[str, Any] = {}
        if status is not None:
            if status not in TASK_STATUSES:
                raise EngramError(f"status must be one of {', '.join(TASK_STATUSES)}; got {status!r}")
            fields["status"] = status
        if goal is not None:
            fields["goal"] = self.p.redact(check_short(goal, "goal", 5000, required=False))
        if name is not None:
            fields["name"] = self.p.redact(check_short(name, "name", 500))
        if metadata is not None and not isinstance(metadata, dict):
            raise EngramError("metadata must be an object")
        with self.p.lock:
            t = self.p.task(task_id, user_id)
            if metadata is not None:
                fields["metadata"] = {**t.metadata, **self.p.redact.value(metadata)}
            if not fields:
                raise EngramError("nothing to update: give status, goal, name or metadata")
            self.p.store_db.update_task(task_id, self.p.clock.now(), **fields)
            if fields.get("status") in ("done", "abandoned"):
                self.claims.drop(task_id)  # finished: nobody is working on it any more
            self.sessions.set_task(session_id, task_id)
            return self.p.store_db.get_task(task_id)

    def task_rows(
        self, *, status: str | None = None, user_id: str | None = None, scope: Scope = NO_PROJECT
    ) -> list[Task]:
        """The user's tasks seen in `scope` (default: those of no project)."""
        if status is not None and status not in TASK_STATUSES:
            raise EngramError(f"status must be one of {', '.join(TASK_STATUSES)}")
        return self.p.store_db.list_tasks(self.p.user_of(user_id), status, scope)

    def list_tasks(
        self,
        *,
        status: str | None = None,
        limit: int = 50,
        user_id: str | None = None,
        scope: Scope = NO_PROJECT,
        reader: str | None = None,
    ) -> list[dict]:
        """Tasks seen in `scope` with their last activity: open ones (open, in_progress,
        blocked) first, then each group by last activity, newest first."""
        TASK_LIMIT.check(limit, "limit")
        tasks = self.task_rows(status=status, user_id=user_id, scope=scope)
        if not tasks:
            return []
        last = self.p.store_db.task_last_activity(tasks[0].user_id)
        holders = self.claims.holders(tasks[0].user_id)
        out = []
        for t in tasks:
            act = last.get(t.id)
            at = max(t.updated_at, act[0]) if act else t.updated_at
            d = {
                **t.to_dict(),
                "held_by": held(holders.get(t.id), reader),
                "last_activity_at": at.isoformat(),
                "last_activity": {"at": act[0].isoformat(), "memory_type": act[1], "content": act[2]} if act else None,
            }
            out.append((t.status not in OPEN_TASK_STATUSES, -at.timestamp(), d))
        out.sort(key=lambda x: x[:2])
        return [d for *_, d in out[:limit]]

    def get_task(self, task_id: str, *, limit: int = 50, user_id: str | None = None, reader: str | None = None) -> dict:
        """The task, the newest `limit` of everything linked to it (and of each kind) in time
        order with the totals in counts, and the latest handoff's validation.

        Bounded because a long task's answer otherwise grows with every note: past about 500
        memories it no longer fits in one MCP message (the SDK client's 1 MiB per event).
        """
        TASK_LIMIT.check(limit, "limit")
        with self.p.lock:
            t = self.p.task(task_id, user_id)
            mems = self.p.store_db.task_memories(t.user_id, task_id)
            latest = self.handoffs.latest_handoff(t.user_id, task_id)
            lists = {"timeline": mems, "handoffs": [], "failures": [], "progress": [], "memories": []}
            for m in mems:
                lists[_TASK_LISTS.get(m.memory_type, "memories")].append(m)
            holder = self.claims.holder(t.id)
            return {
                "task": t.to_dict(),
                "held_by": held(holder, reader),
                **{name: [timeline_entry(m, self.p.quality(m)) for m in rows[-limit:]] for name, rows in lists.items()},
                "counts": {name: len(rows) for name, rows in lists.items()},
                "latest_handoff": self.handoffs.view(latest) if latest else None,
                "plan": self.handoffs.plan_of(t.user_id, t.id),
            }

    def task_sessions(self, task_id: str, *, user_id: str | None = None) -> list[dict]:
        """The sessions that worked on a task (named it, or wrote one of its memories), oldest first.

        state is the status, except that an active session silent for longer than the heartbeat
        timeout is already `interrupted` (as take_interrupted counts it); reason says why one was.
        """
        with self.p.lock:
            t = self.p.task(task_id, user_id)
            rows = self.p.store_db.sessions_of_task(t.user_id, t.id)
            cutoff = self.sessions.stale_cutoff()
            out = []
            for s in rows:
                silent = s.status == "active" and s.last_heartbeat < cutoff
                state = "interrupted" if silent else s.status
                reason = s.interruption or ("no heartbeat: the client went away" if state == "interrupted" else None)
                out.append({**s.to_dict(), "state": state, "reason": reason})
            return out

    def resume_task(
        self,
        task_id: str,
        *,
        max_tokens: int = 2000,
        user_id: str | None = None,
        session_id: str | None = None,
        client: str = "",
        take_over: bool = False,
        reader: str | None = None,
    ) -> dict:
        """Everything the agent taking over a task needs, structured and as one text block that
        fits `max_tokens`: goal and status, the plan with statuses and the next step, what is in
        progress and blocked, pitfalls, what to keep, the working set, interrupted sessions,
        and who holds the task (held_by).

        With a session_id the session claims the task (see engram.continuity.claims): when another live
        session holds it the answer still comes, with claim.claimed false and the holder named
        (take_over takes it). Without one (an MCP resource, the library) nothing is claimed;
        `reader` is then the session reading, so the block can say the holder is "this session".
        Nothing is reinforced and no interruption is marked as reported.
        """
        MAX_TOKENS.check(max_tokens, "max_tokens")
        with self.p.lock:
            t = self.p.task(task_id, user_id)
            claim = self.work_on(t, session_id, client=client, take_over=take_over) if session_id else None
            mems = self.p.store_db.task_memories(t.user_id, t.id)
            plan = self.handoffs.plan_of(t.user_id, t.id)
            handoffs = [m for m in mems if m.memory_type == "handoff"]
            latest = handoffs[-1] if handoffs else None
            doc = (document(latest, "handoff") or {}) if latest else {}
            features = progress_by_feature(mems)
            evidence = {x for e in plan if e["evidence"] for x in (e["evidence"]["id"], e["evidence"]["text"])}
            open_steps = [e for e in plan if e["status"] in ("in_progress", "not_started")]
            next_step = next(
                (e for e in open_steps if e["status"] == "in_progress"), open_steps[0] if open_steps else None
            )
            holder = self.claims.holder(t.id)
            out = {
                "task": t.to_dict(),
                "held_by": held(holder, session_id or reader),
                "latest_handoff": {
                    "id": latest.id,
                    "created_at": latest.created_at.isoformat(),
                    "summary": doc.get("summary", ""),
                }
                if latest
                else None,
                "plan": plan,
                "next_step": next_step["step"] if next_step else None,
                # Plan steps first; then work in progress no step accounts for (its evidence).
                "in_progress": unique(
                    [e["step"] for e in plan if e["status"] == "in_progress"]
                    + [x for x in doc.get("in_progress", []) if x not in evidence]
                    + [f for f, (m, p) in features.items() if p["status"] == "in_progress" and m.id not in evidence]
                ),
                "blocked": unique(
                    doc.get("blocked", [])
                    + [
                        f + (f": {p['notes']}" if p.get("notes") else "")
                        for f, (m, p) in features.items()
                        if p["status"] == "blocked"
                    ]
                ),
                "pitfalls": [
                    failure_entry(m) for m in reversed(mems) if m.memory_type == "failure" and m.status == "active"
                ],
                "keep": [timeline_entry(m, self.p.quality(m)) for m in to_keep(mems)],
                "working_set": working_set(mems),
                "interrupted_sessions": [
                    self.sessions.interrupted_entry(s) for s in self.p.store_db.task_sessions(t.id, "interrupted")
                ],
            }
            if claim is not None:
                out["claim"] = claim
            elsewhere = t.metadata.get("claimed_elsewhere")
            if isinstance(elsewhere, dict) and holder is None:
                # Read from the project's shared records (docs/sharing.md): a session on another
                # machine said it works on this task; advisory, with its age.
                age = (self.p.clock.now() - datetime.fromisoformat(elsewhere["at"])).total_seconds()
                out["claimed_elsewhere"] = {**elsewhere, "age_s": round(age)}
            out["context"] = context = render_resume(out, max_tokens)
            out["tokens"] = estimate_tokens(context)
            return out

    # -- claims (engram/continuity/claims.py) -------------------------------------------
    def claim_task(
        self, task_id: str, session_id: str, *, client: str = "", take_over: bool = False, user_id: str | None = None
    ) -> dict:
        """Make the session the task's holder; TaskClaimed names the holder when another live
        session has it (unless take_over)."""
        with self.p.lock:
            t = self.p.task(task_id, user_id)
            if t.status in ("done", "abandoned"):
                raise EngramError(
                    f"task {task_id} is {t.status}: there is nothing to claim; reopen it "
                    "with update_task(status='open') first"
                )
            return self.claims.claim(t.id, t.user_id, session_id, client, take_over)

    def work_on(
        self,
        t: Task | str,
        session_id: str | None,
        *,
        client: str = "",
        take_over: bool = False,
        user_id: str | None = None,
    ) -> dict | None:
        """The claim a session makes by working on a task (resume_task, track_progress,
        session_handoff): taken when the task is free or lapsed, never refused. None for no
        session or a finished task."""
        if session_id is None:
            return None
        with self.p.lock:
            if isinstance(t, str):
                t = self.p.task(t, user_id)
            if t.status in ("done", "abandoned"):
                return None
            return self.claims.claim(t.id, t.user_id, session_id, client, take_over, refuse=False)

    def release_task(self, task_id: str, session_id: str, *, user_id: str | None = None) -> dict:
        with self.p.lock:
            t = self.p.task(task_id, user_id)
            return self.claims.release(t.id, session_id)

    def claim_notices(self, session_id: str) -> list[dict]:
        """Take-overs of the session's tasks since its last call, each said once."""
        return self.claims.notices(session_id)

    def memory_prompt(self, *, user_id: str | None = None, limit: int = 10, scope: Scope = NO_PROJECT) -> str:
        """The memory rules for CLAUDE.md / AGENTS.md, followed by the state of the open tasks seen in `scope`."""
        tasks = [
            t for t in self.list_tasks(user_id=user_id, limit=1000, scope=scope) if t["status"] in OPEN_TASK_STATUSES
        ][:limit]
        return render_prompt(
            tasks,
            lambda t: [
                e for e in self.handoffs.plan_of(t["user_id"], t["id"]) if e["status"] in ("in_progress", "not_started")
            ],
        )
