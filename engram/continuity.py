"""Task continuity: tasks, session lifecycle, handoffs with next-step validation, failures, progress."""

from __future__ import annotations

import math
import re
import uuid
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Sequence

import numpy as np

from .claims import Claims, describe_claim
from .index import to_days
from .nextsteps import Activity, StepCheck, TextVectors, same_step, stronger, validate_steps
from .project import check_project
from .types import (
    INTERRUPTION_REASONS,
    NO_PROJECT,
    OUTCOMES,
    PROGRESS_STATUSES,
    TASK_STATUSES,
    Claim,
    EngramError,
    Hit,
    Memory,
    NotFound,
    Scope,
    Session,
    Task,
    check_tags,
)
from .types import OPEN_TASK_STATUSES as OPEN_TASK_STATUSES

SENTENCE_ENDS = (".", "!", "?", "。", "！", "？")
VALIDATIONS_KEPT = 512  # handoffs whose step checks stay cached (a few hundred bytes each)

# File names in progress notes, failures and handoffs: a name with a letter and a known extension,
# optionally with its folders. Versions (5.0) and abbreviations (e.g.) have no such extension.
_FILE = re.compile(
    r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]*[A-Za-z][\w-]*\.(?:py|pyi|js|mjs|ts|tsx|jsx|go|rs|java|kt|rb|php|"
    r"c|h|cc|cpp|hpp|cs|swift|scala|sql|sh|md|rst|txt|json|jsonl|ya?ml|toml|ini|cfg|conf|lock|html|"
    r"css|scss|vue|svelte|proto|tf|dockerfile|csv)\b")


def estimate_tokens(text: str) -> int:
    """About four characters per token for English text, as most tokenizers average."""
    return math.ceil(len(text) / 4)


# get_task's list of each memory type (every other type is in "memories").
_TASK_LISTS = {"handoff": "handoffs", "failure": "failures", "progress": "progress"}


@dataclass(frozen=True)
class _Validation:
    """One handoff's step checks over the index rows before `rows_seen` (of that index, at that
    activity epoch). Rows are appended in write order, so only later rows need a look."""

    index: Any
    epoch: int
    rows_seen: int
    checks: tuple[StepCheck, ...]


def _items(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise EngramError(f"{name} must be a list of strings")
    if len(value) > 100:
        raise EngramError(f"{name} has {len(value)} items; at most 100")
    longest = max((len(v) for v in value), default=0)
    if longest > 2000:  # a step or item, not a document: it is printed whole in every handoff view
        raise EngramError(f"{name}: an item is at most 2,000 characters; got one of {longest:,}")
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


def progress_text(doc: dict) -> str:
    """A progress snapshot as stored (and embedded): validation compares steps with this vector."""
    text = f"Progress on {doc['feature']}: {doc['status']} ({doc['completion']:.0%})"
    return text + (f". {doc['notes']}" if doc.get("notes") else "")


def render_handoff(doc: dict) -> str:
    """The handoff as searchable text."""
    lines = [f"Handoff: {doc['summary']}"]
    for key, label in (("completed", "Completed"), ("in_progress", "In progress"),
                       ("blocked", "Blocked"), ("next_steps", "Next steps")):
        if doc.get(key):
            lines.append(f"{label}: " + "; ".join(doc[key]))
    return "\n".join(lines)


# The engine's own document of a handoff, progress or failure memory, by metadata key: each
# field, the types it may hold and its value when missing (None: required). A memory stored
# through store_memory with one of these types has no such document, or one someone else
# wrote; every reader goes through document().
_DOCUMENTS: dict[str, dict[str, tuple[tuple[type, ...], Any]]] = {
    "handoff": {"summary": ((str,), None), "completed": ((list,), []), "in_progress": ((list,), []),
                "blocked": ((list,), []), "next_steps": ((list,), [])},
    "progress": {"feature": ((str,), None), "status": ((str,), None),
                 "completion": ((int, float), None), "notes": ((str,), "")},
    "failure": {"error": ((str,), None), "component": ((str,), None), "root_cause": ((str,), ""),
                "fix": ((str, type(None)), "")},
}


# The tool that writes each of those records (and so the one to call for a new one).
RECORD_TOOLS = {"handoff": "session_handoff", "failure": "track_failure", "progress": "track_progress"}


def record_document(m: Memory) -> dict | None:
    """The document of a memory written by its record tool (a handoff by session_handoff, ...):
    its text is rendered from it. None for every other memory, of these types stored as text too."""
    return document(m, m.memory_type) if m.memory_type in _DOCUMENTS else None


def document(m: Memory, key: str) -> dict | None:
    """m's engine document under `key` ("handoff", "progress", "failure") with missing optional
    fields filled in, or None when there is none or it is malformed (a field of the wrong type,
    a list holding something other than strings)."""
    doc = m.metadata.get(key)
    if not isinstance(doc, dict):
        return None
    out = dict(doc)
    for name, (types, default) in _DOCUMENTS[key].items():
        if name not in doc:
            if default is None:
                return None
            out[name] = list(default) if isinstance(default, list) else default
            continue
        v = doc[name]
        if not isinstance(v, types) or isinstance(v, bool) or \
                (isinstance(v, list) and not all(isinstance(x, str) for x in v)):
            return None
    return out


def stated_checks(h: Memory, steps: Sequence[str]) -> list[StepCheck]:
    """Each next step of handoff `h` as its own record states it: not_started, except the steps
    of an automatic checkpoint, whose todo list said done or in_progress (the evidence is the
    checkpoint itself). Later activity can only make a step's evidence stronger."""
    cp = h.metadata.get("checkpoint")
    statuses = cp.get("step_statuses") if isinstance(cp, dict) else None
    if not isinstance(statuses, list) or len(statuses) != len(steps):
        return [StepCheck(s, "not_started", None) for s in steps]
    out = []
    for step, status in zip(steps, statuses):
        if status in ("done", "in_progress"):
            out.append(StepCheck(step, status, {
                "id": h.id, "kind": "todo_list", "text": f"{status} in the agent's todo list",
                "created_at": h.created_at.isoformat(), "similarity": 1.0}))
        else:
            out.append(StepCheck(step, "not_started", None))
    return out


def _unique(items: Sequence[str]) -> list[str]:
    """Items once each (case-insensitive), in first-seen order."""
    seen: dict[str, str] = {}
    for x in items:
        seen.setdefault(x.strip().lower(), x.strip())
    return [x for k, x in seen.items() if k]


def pack_sections(sections: Sequence[tuple[str, Sequence[str]]], max_tokens: int) -> str:
    """Section headings with their lines, in order, as many lines as fit the token budget.

    A line that does not fit is left out, not cut; a heading is kept only with a line under it.
    """
    out: list[str] = []
    used = 0
    for heading, lines in sections:
        pending = [heading] if heading else []
        for line in lines:
            cost = estimate_tokens("\n".join(pending + [line])) + (1 if out else 0)
            if used + cost > max_tokens:
                continue
            out.extend(pending + [line])
            used += cost
            pending = []
    return "\n".join(out)


def _held(c: Claim | None, reader: str | None) -> dict | None:
    """A task's holder as the answers show it; this_session: the reading session holds it."""
    return None if c is None else {**c.to_dict(), "this_session": c.session_id == reader}


def render_resume(r: dict, max_tokens: int) -> str:
    """The resume_task text block: most needed first, so a small budget keeps what matters."""
    t = r["task"]
    head = [f"Task {t['id']}: {t['name']} [{t['status']}]"]
    if r.get("held_by"):
        mine = r["held_by"].get("this_session", False)
        head.append("Held by: " + ("this session, " if mine else "")
                    + describe_claim(r["held_by"])
                    + ("" if mine else ". Another agent is working on it: do not do its work twice"))
    if t.get("goal"):
        head.append(f"Goal: {t['goal']}")
    if r["latest_handoff"]:
        h = r["latest_handoff"]
        head.append(f"Latest handoff ({h['created_at'][:10]}): {h['summary']}")
    if r["next_step"]:
        head.append(f"Next step: {r['next_step']}")
    order = {"in_progress": 0, "not_started": 1, "unchecked": 1, "done": 2, "dropped": 3}
    plan = [f"- [{e['status']}] {e['step']}"
            + (f" (evidence: {e['evidence']['text']})" if e.get("evidence") else "")
            for e in sorted(r["plan"], key=lambda e: order[e["status"]])]
    pitfalls = []
    for f in r["pitfalls"]:
        line = f"- [{f['component']}] {f['error']}" if f["component"] else f"- {f['error']}"
        if f.get("root_cause"):
            line += f"; root cause: {f['root_cause']}"
        if f.get("fix"):
            line += f"; fix: {f['fix']}"
        pitfalls.append(line)
    interrupted = []
    for s in r["interrupted_sessions"]:
        line = f"- session {s['session_id']} ({s['reason']}, {s['ended_at'][:16]})"
        if s.get("last_progress"):
            line += f", last progress: {s['last_progress']['content']}"
        interrupted.append(line)
    ws = r["working_set"]
    working = ([f"- files: {', '.join(ws['files'])}"] if ws["files"] else []) + \
        ([f"- components: {', '.join(ws['components'])}"] if ws["components"] else [])
    closing = "\n</resume>"  # kept whatever the budget, so the block always ends
    return pack_sections([
        ("<resume>", head),
        ("Plan:", plan),
        ("In progress:", [f"- {x}" for x in r["in_progress"]]),
        ("Blocked:", [f"- {x}" for x in r["blocked"]]),
        ("Pitfalls (do not repeat):", pitfalls),
        ("Interrupted sessions:", interrupted),
        ("Keep (decisions and conventions):", [f"- {m['content']}" for m in r["keep"]]),
        ("Working set:", working),
    ], max_tokens - estimate_tokens(closing)) + closing


MEMORY_RULES = """\
## Memory (engram)
- At the start of every task, call recall_memory (or get_context) with what you are about to do.
  Read the pinned handoff, related_failures and interrupted_sessions before acting; resume
  interrupted work instead of restarting it.
- To continue a task, call resume_task(task_id) first (list_tasks shows the open ones): it gives
  the plan with each step done, in_progress, not_started or dropped, the next step, pitfalls
  and the working set. Do not redo a step marked done. A task held by another session
  (held_by) is being worked on: pick another unless the user asks you to take it over.
- For work that may span sessions, call create_task once and pass its task_id to every later call.
- Store durable knowledge with store_memory: decisions and why, conventions, user preferences,
  working commands. One self-contained fact per call; no secrets. If a recalled memory is wrong
  or outdated, fix it with update_memory instead of storing a contradicting one.
- Call track_progress when a step starts, finishes or gets blocked.
- Call track_failure for every error or dead end worth not repeating (with root_cause and fix).
- Before ending a session or when context runs low, call session_handoff with summary,
  completed, in_progress, blocked and concrete next_steps; then session_outcome(success|failure).
  If you are about to be cut off (context overflow, rate limit, the user stopping you), call
  report_interruption(reason, task_id) after the handoff.
"""


class ContinuityMixin:
    """Mixed into Engram: uses its store_db, clock, _lock, store() and recall()."""

    # -- tasks ---------------------------------------------------------------
    def create_task(self, name: str, goal: str = "", metadata: dict | None = None,
                    user_id: str | None = None, session_id: str | None = None,
                    project: str | None = None) -> Task:
        """A new open task of `project` (None: of no project, listed in every project)."""
        name = self.redact(_short(name, "name", 500))
        goal = self.redact(_short(goal, "goal", 5000, required=False))
        if metadata is not None and not isinstance(metadata, dict):
            raise EngramError("metadata must be an object")
        now = self.clock.now()
        t = Task(id="t-" + uuid.uuid4().hex[:12], name=name, goal=goal, status="open",
                 metadata=self.redact.value(metadata or {}), user_id=self.user_of(user_id),
                 created_at=now, updated_at=now, project=check_project(project))
        with self._lock:
            self.store_db.insert_task(t)
            self._session_task(session_id, t.id)
        return t

    def get_task_row(self, task_id: str, user_id: str | None = None) -> Task:
        if not isinstance(task_id, str) or not task_id:
            raise EngramError("task_id must be a non-empty string")
        t = self.store_db.get_task(task_id)
        if t is None or t.user_id != self.user_of(user_id):
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
        if metadata is not None and not isinstance(metadata, dict):
            raise EngramError("metadata must be an object")
        with self._lock:
            t = self.get_task_row(task_id, user_id)
            if metadata is not None:
                fields["metadata"] = {**t.metadata, **self.redact.value(metadata)}
            if not fields:
                raise EngramError("nothing to update: give status, goal, name or metadata")
            self.store_db.update_task(task_id, self.clock.now(), **fields)
            if fields.get("status") in ("done", "abandoned"):
                self.claims.drop(task_id)  # finished: nobody is working on it any more
            self._session_task(session_id, task_id)
            return self.store_db.get_task(task_id)

    def list_tasks(self, status: str | None = None, user_id: str | None = None,
                   scope: Scope = NO_PROJECT) -> list[Task]:
        """The user's tasks seen in `scope` (default: those of no project)."""
        if status is not None and status not in TASK_STATUSES:
            raise EngramError(f"status must be one of {', '.join(TASK_STATUSES)}")
        return self.store_db.list_tasks(self.user_of(user_id), status, scope)

    def task_overview(self, status: str | None = None, limit: int = 50,
                      user_id: str | None = None, scope: Scope = NO_PROJECT,
                      reader: str | None = None) -> list[dict]:
        """Tasks seen in `scope` with their last activity: open ones (open, in_progress,
        blocked) first, then each group by last activity, newest first."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise EngramError(f"limit must be a whole number from 1 to 1000, got {limit!r}")
        tasks = self.list_tasks(status, user_id, scope)
        if not tasks:
            return []
        last = self.store_db.task_last_activity(tasks[0].user_id)
        held = self.claims.holders(tasks[0].user_id)
        out = []
        for t in tasks:
            act = last.get(t.id)
            at = max(t.updated_at, act[0]) if act else t.updated_at
            d = {**t.to_dict(), "held_by": _held(held.get(t.id), reader),
                 "last_activity_at": at.isoformat(),
                 "last_activity": {"at": act[0].isoformat(), "memory_type": act[1], "content": act[2]}
                 if act else None}
            out.append((t.status not in OPEN_TASK_STATUSES, -at.timestamp(), d))
        out.sort(key=lambda x: x[:2])
        return [d for *_, d in out[:limit]]

    def task_view(self, task_id: str, limit: int = 50, user_id: str | None = None,
                  reader: str | None = None) -> dict:
        """The task, the newest `limit` of everything linked to it (and of each kind) in time
        order with the totals in counts, and the latest handoff's validation.

        Bounded because a long task's answer otherwise grows with every note: past about 500
        memories it no longer fits in one MCP message (the SDK client's 1 MiB per event).
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise EngramError(f"limit must be an integer from 1 to 1000; got {limit!r}")
        with self._lock:
            t = self.get_task_row(task_id, user_id)
            mems = self.store_db.task_memories(t.user_id, task_id)
            latest = self.latest_handoff(t.user_id, task_id)
            lists = {"timeline": mems, "handoffs": [], "failures": [], "progress": [], "memories": []}
            for m in mems:
                lists[_TASK_LISTS.get(m.memory_type, "memories")].append(m)
            holder = self.claims.holder(t.id)
            return {
                "task": t.to_dict(),
                "held_by": _held(holder, reader),
                **{name: [self._timeline_entry(m) for m in rows[-limit:]] for name, rows in lists.items()},
                "counts": {name: len(rows) for name, rows in lists.items()},
                "latest_handoff": self.handoff_view(latest) if latest else None,
                "plan": self.task_plan_of(t.user_id, t.id),
            }

    def task_sessions(self, task_id: str, user_id: str | None = None) -> list[dict]:
        """The sessions that worked on a task (named it, or wrote one of its memories), oldest first.

        state is the status, except that an active session silent for longer than the heartbeat
        timeout is already `interrupted` (as take_interrupted counts it); reason says why one was.
        """
        with self._lock:
            t = self.get_task_row(task_id, user_id)
            rows = self.store_db.sessions_of_task(t.user_id, t.id)
            cutoff = self._stale_cutoff()
            out = []
            for s in rows:
                silent = s.status == "active" and s.last_heartbeat < cutoff
                state = "interrupted" if silent else s.status
                reason = s.interruption or ("no heartbeat: the client went away"
                                            if state == "interrupted" else None)
                out.append({**s.to_dict(), "state": state, "reason": reason})
            return out

    def _timeline_entry(self, m: Memory) -> dict:
        d = {"id": m.id, "memory_type": m.memory_type, "content": m.content,
             "created_at": m.created_at.isoformat(), "status": m.status,
             "session_id": m.session_id, "quality_score": round(self.quality(m), 6)}
        for key in ("handoff", "failure", "progress"):
            doc = document(m, key)
            if doc is not None:
                d[key] = doc
        return d

    # -- sessions ------------------------------------------------------------
    def touch_session(self, session_id: str, user_id: str | None = None, client: str = "",
                      pid: int | None = None, project: str | None = None,
                      branch: str | None = None) -> None:
        """Register a session or refresh its heartbeat. Called on every request. A new session
        records the project and branch its client works in.

        A busy session's heartbeat is written at most every tenth of the heartbeat timeout:
        that keeps it far from stale and spares most requests a write.
        """
        now = self.clock.now()
        user = self.user_of(user_id)
        with self._lock:
            beat = self._beats.get(session_id)
            if (beat is not None and beat[0] == user
                    and timedelta(0) <= now - beat[1] < self._beat_every()):
                return
            s = self.store_db.get_session(session_id)
            if s is not None and s.user_id != user:
                # Naming another user's session must not let a caller act in it (outcomes, tasks).
                raise NotFound(f"no session with id {session_id!r} for this user")
            if s is None:
                s = Session(id=session_id, user_id=user, client=client or "", pid=pid,
                            status="active", started_at=now, last_heartbeat=now, ended_at=None,
                            task_id=None, outcome=None, outcome_notes=None, reported=False,
                            project=project, branch=branch)
                self.store_db.upsert_session(s)
                # A new session is written anyway: the moment to retire silent ones (not on reads).
                self.expire_stale_sessions()
            elif s.interruption:
                # It said it is about to stop (report_interruption): its last calls keep it so.
                self.store_db.update_session(session_id, last_heartbeat=now)
            elif s.status != "active":
                # A session that was marked interrupted but speaks again is alive after all.
                self.store_db.update_session(session_id, status="active", last_heartbeat=now,
                                             ended_at=None, reported=False)
            else:
                # A silent session reported as interrupted that speaks again may be reported again.
                fields = {"reported": False} if s.reported else {}
                self.store_db.update_session(session_id, last_heartbeat=now, **fields)
            self._beats[session_id] = (user, now)

    def _beat_every(self) -> timedelta:
        """How often a busy session's heartbeat is written: a tenth of the shorter of the
        heartbeat and claim timeouts, so neither a session nor its claims look silent."""
        return timedelta(seconds=min(self.settings.heartbeat_timeout_s, self.settings.claim_timeout_s) / 10)

    def end_session(self, session_id: str, clean: bool = True, user_id: str | None = None) -> None:
        """Mark a session ended (clean exit) or interrupted (connection lost, process killed).

        Only the user's own session (user_id None: ENGRAM_USER's): a client that named another
        user's session was refused every call and must not end it on its way out either.
        """
        # Not self.user_of(): a malformed user id owns no session, and a disconnect must not raise.
        user = self.settings.user_id if user_id is None else user_id
        with self._lock:
            s = self.store_db.get_session(session_id)
            if s is None or s.status != "active" or s.user_id != user:
                return
            self._beats.pop(session_id, None)
            self.store_db.update_session(session_id, status="ended" if clean else "interrupted",
                                         ended_at=self.clock.now())

    def _stale_cutoff(self) -> datetime:
        return self.clock.now() - timedelta(seconds=self.settings.heartbeat_timeout_s)

    def expire_stale_sessions(self) -> int:
        """Sessions whose heartbeat is older than the timeout count as interrupted.

        Run when a session registers and by maintenance; readers do not wait for it, they treat
        a silent session as interrupted already (take_interrupted).
        """
        with self._lock:
            stale = self.store_db.stale_sessions(self._stale_cutoff())
            for s in stale:
                self.store_db.update_session(s.id, status="interrupted", ended_at=s.last_heartbeat)
                self._beats.pop(s.id, None)
            return len(stale)

    def report_interruption(self, session_id: str, reason: str, task_id: str | None = None,
                            user_id: str | None = None) -> Session:
        """End the session as interrupted, with why (an agent about to lose its context says so).

        The next recall of another session reports it once, as for a killed process; resume_task
        lists it with the task's other interrupted sessions.
        """
        if reason not in INTERRUPTION_REASONS:
            raise EngramError(f"reason must be one of {', '.join(INTERRUPTION_REASONS)}; got {reason!r}")
        with self._lock:
            self._check_task(task_id, user_id)
            s = self.store_db.get_session(session_id)
            if s is None or s.user_id != self.user_of(user_id):
                raise NotFound(f"no session with id {session_id!r}")
            fields: dict[str, Any] = {"status": "interrupted", "ended_at": self.clock.now(),
                                      "interruption": reason, "reported": False}
            if task_id is not None:
                fields["task_id"] = task_id
            self.store_db.update_session(session_id, **fields)
            return self.store_db.get_session(session_id)

    def _interrupted_entry(self, s: Session) -> dict:
        task = self.store_db.get_task(s.task_id) if s.task_id else None
        prog = self.store_db.last_session_progress(s.id)
        return {
            "session_id": s.id, "client": s.client, "started_at": s.started_at.isoformat(),
            "last_heartbeat": s.last_heartbeat.isoformat(),
            "ended_at": (s.ended_at or s.last_heartbeat).isoformat(),
            # reason: what the session reported; "connection_lost" for a killed or silent one
            "reason": s.interruption or "connection_lost",
            "task": task.to_dict() if task else None,
            "last_progress": self._timeline_entry(prog) if prog else None,
        }

    def take_interrupted(self, user_id: str | None = None, exclude: str | None = None,
                         scope: Scope = NO_PROJECT) -> list[dict]:
        """Interrupted sessions not reported yet, each with its task and last progress; reported once.

        A session silent for longer than the heartbeat timeout counts as interrupted without
        waiting for expire_stale_sessions to mark it: reading does not retire sessions.
        """
        user = self.user_of(user_id)
        with self._lock:
            rows = self.store_db.unreported_interruptions(user, self._stale_cutoff(), exclude, scope)
            out = [self._interrupted_entry(s) for s in rows]
            for s in rows:  # reported once: the one write a recall may make, only when there is news
                self.store_db.update_session(s.id, reported=True)
            return out

    def _session_task(self, session_id: str | None, task_id: str | None) -> None:
        if session_id and task_id and self.store_db.get_session(session_id) is not None:
            self.store_db.update_session(session_id, task_id=task_id)

    def session_outcome(self, session_id: str, outcome: str, notes: str = "",
                        user_id: str | None = None) -> Session:
        if outcome not in OUTCOMES:
            raise EngramError(f"outcome must be 'success' or 'failure'; got {outcome!r}")
        notes = self.redact(_short(notes, "notes", 5000, required=False))
        with self._lock:
            s = self.store_db.get_session(session_id)
            if s is None or s.user_id != self.user_of(user_id):
                raise NotFound(f"no session with id {session_id!r}")
            self.store_db.add_session_outcome(session_id, outcome, notes)
            self.outcomes = self.store_db.session_outcomes()
            return self.store_db.get_session(session_id)

    def projects(self, user_id: str | None = None) -> list[dict]:
        """The projects the user's live memories and tasks belong to: {id, memories, tasks}."""
        return [{"id": p, "memories": m, "tasks": t} for p, m, t in self.store_db.projects(self.user_of(user_id))]

    def list_sessions(self, user_id: str | None = None) -> list[Session]:
        return self.store_db.user_sessions(self.user_of(user_id))

    # -- handoffs, failures, progress ----------------------------------------
    def _check_task(self, task_id: str | None, user_id: str | None) -> None:
        if task_id is not None:
            self.get_task_row(task_id, user_id)

    def _record_project(self, task_id: str | None, user_id: str | None, project: str | None) -> str | None:
        """The project a handoff, failure or progress record belongs to: its task's (so a task's
        story stays together wherever it is written from), else the caller's. Checks the task."""
        if task_id is None:
            return project
        return self.get_task_row(task_id, user_id).project

    def handoff(self, summary: str, completed: Sequence[str] | None = None,
                in_progress: Sequence[str] | None = None, blocked: Sequence[str] | None = None,
                next_steps: Sequence[str] | None = None, task_id: str | None = None,
                user_id: str | None = None, session_id: str | None = None,
                checkpoint: dict | None = None, tags: Sequence[str] | None = None,
                project: str | None = None) -> Memory:
        """A handoff; `checkpoint`: an automatic one's record (engram.lifecycle), kept beside the
        document, whose `step_statuses` give each next step the status the agent's todo list gave it."""
        doc = {"summary": self.redact(_short(summary, "summary", 10_000)),
               "completed": [self.redact(x) for x in _items(completed, "completed")],
               "in_progress": [self.redact(x) for x in _items(in_progress, "in_progress")],
               "blocked": [self.redact(x) for x in _items(blocked, "blocked")],
               "next_steps": [self.redact(x) for x in _items(next_steps, "next_steps")]}
        metadata: dict[str, Any] = {"handoff": doc}
        if checkpoint is not None:
            metadata["checkpoint"] = self.redact.value(checkpoint)
        with self._lock:
            project = self._record_project(task_id, user_id, project)
            res = self.store(render_handoff(doc), memory_type="handoff", importance=0.8,
                             task_id=task_id, metadata=metadata, user_id=user_id, tags=tags,
                             session_id=session_id, resolve_conflicts=False, chunk=False, project=project)
            self._session_task(session_id, task_id)
            return res.memory

    def track_failure(self, error: str, component: str, root_cause: str = "",
                      task_id: str | None = None, fix: str | None = None,
                      user_id: str | None = None, session_id: str | None = None,
                      project: str | None = None):
        doc = {"error": _short(error, "error", 10_000), "component": _short(component, "component", 200),
               "root_cause": _short(root_cause, "root_cause", 10_000, required=False),
               "fix": _short(fix, "fix", 10_000, required=False)}
        text = f"Failure in {doc['component']}: {doc['error']}"
        for label, value in (("Root cause", doc["root_cause"]), ("Fix", doc["fix"])):
            if value:  # a full stop between the parts, so they do not read as one run-on sentence
                text = f"{text if text.endswith(SENTENCE_ENDS) else text + '.'} {label}: {value}"
        with self._lock:
            project = self._record_project(task_id, user_id, project)
            res = self.store(text, memory_type="failure", importance=0.6, task_id=task_id,
                             tags=[f"component:{doc['component'].lower()}"],
                             metadata={"failure": self.redact.value(doc)}, user_id=user_id,
                             session_id=session_id, chunk=False, project=project)
            self._session_task(session_id, task_id)
            return res

    def track_progress(self, feature: str, status: str, completion: float | None = None,
                       task_id: str | None = None, notes: str = "", user_id: str | None = None,
                       session_id: str | None = None, project: str | None = None) -> Memory:
        feature = _short(feature, "feature", 2000)
        if status not in PROGRESS_STATUSES:
            raise EngramError(f"status must be one of {', '.join(PROGRESS_STATUSES)}; got {status!r}")
        if completion is None:  # not given: "done" is all of it, not "done (0%)"
            completion = 1.0 if status == "done" else 0.0
        if isinstance(completion, bool) or not isinstance(completion, int | float) \
                or not math.isfinite(completion) or not 0 <= completion <= 1:
            raise EngramError(f"completion must be a number between 0 and 1, got {completion!r}")
        notes = _short(notes, "notes", 10_000, required=False)
        doc = {"feature": self.redact(feature), "status": status, "completion": float(completion),
               "notes": self.redact(notes)}
        text = progress_text(doc)
        with self._lock:
            project = self._record_project(task_id, user_id, project)
            res = self.store(text, memory_type="progress", importance=0.5, task_id=task_id,
                             metadata={"progress": doc}, user_id=user_id, session_id=session_id,
                             resolve_conflicts=False, chunk=False, project=project)
            self._session_task(session_id, task_id)
            return res.memory

    # -- handoff validation --------------------------------------------------
    def _init_continuity(self) -> None:
        self.claims = Claims(self.store_db, self.clock, self.settings.claim_timeout_s)
        self._text_vectors = TextVectors(self.embedder)
        self._validations: OrderedDict[str, _Validation] = OrderedDict()
        self._same_steps: dict[tuple[str, str], bool] = {}  # a plan compares every pair of wordings
        # Bumped when a memory's text changes or memories are deleted: evidence may be gone.
        self.activity_epoch = 0

    def latest_handoff(self, user_id: str, task_id: str | None = None,
                       tags: Sequence[str] | None = None) -> Memory | None:
        """The newest active handoff (of the task; with one of `tags`, as recall filters)."""
        return self.store_db.latest_handoff(user_id, task_id, tags)

    def _activity_rows(self, h: Memory, start: int) -> np.ndarray:
        """Index rows from `start` on that count as later activity for handoff `h`: the same
        user, written after it, of its task or of none."""
        idx = self.index
        n = idx.n
        uc = idx.users.get(h.user_id)
        sl = slice(start, n)
        keep = idx.alive[sl] & (idx.user[sl] == (-2 if uc is None else uc)) \
            & (idx.created[sl] > to_days(h.created_at))
        if h.task_id:
            tc = idx.tasks.get(h.task_id)
            keep &= (idx.task[sl] == (-2 if tc is None else tc)) | (idx.task[sl] == -1)
        rows = np.arange(start, n)[keep]
        own = idx.row_of.get(h.id)
        return rows[rows != own] if own is not None else rows

    def _activities(self, rows: np.ndarray, read: dict[str, Memory] | None = None
                    ) -> tuple[list[Activity], list[np.ndarray | None]]:
        """The activities of index rows, each with the vector the index holds for it (handoff
        items, which are not memories of their own, get None: they are embedded once, cached).
        `read` keeps the rows already read, for a caller validating several handoffs."""
        idx = self.index
        read = {} if read is None else read
        ids = [idx.ids[r] for r in rows]
        read.update(self.store_db.get_memories([i for i in ids if i not in read]))
        acts: list[Activity] = []
        vecs: list[np.ndarray | None] = []
        for r, mid in zip(rows, ids):
            m = read.get(mid)
            if m is None:
                continue
            vec = idx.vectors[r]
            # Only a progress or handoff memory has an engine document to read.
            doc = document(m, m.memory_type) if m.memory_type in ("progress", "handoff") else None
            if m.memory_type == "progress" and doc is not None:
                text = doc["feature"] + (f". {doc['notes']}" if doc.get("notes") else "")
                acts.append(Activity(m.id, "progress", text, m.created_at, doc["status"], doc["completion"]))
                vecs.append(vec)
            elif m.memory_type == "handoff" and doc is not None:
                for kind in ("completed", "in_progress"):
                    for item in doc.get(kind, []):
                        acts.append(Activity(m.id, f"handoff_{kind}", item, m.created_at))
                        vecs.append(None)
            else:
                kind = "failure" if m.memory_type == "failure" else "memory"
                acts.append(Activity(m.id, kind, m.content, m.created_at))
                vecs.append(vec)
        return acts, vecs

    def step_checks(self, h: Memory, read: dict[str, Memory] | None = None) -> list[StepCheck]:
        """Each next step of handoff `h` checked against the activity written after it.

        Incremental: a handoff's checks are kept with the index rows they covered; a later call
        reads only rows written since, with the vectors the index already holds, and keeps the
        stronger evidence. A deletion or a rewritten memory starts the handoff over.
        """
        steps = (document(h, "handoff") or {}).get("next_steps", [])
        if not steps:
            return []
        stated = stated_checks(h, steps)
        if self.degraded:
            # The check compares meanings; without the model it cannot run (and is not cached).
            return [c if c.status != "not_started" else StepCheck(c.step, "unchecked", None) for c in stated]
        with self._lock:
            self.catch_up()  # later activity may have been written on another server
            idx = self.index
            v = self._validations.get(h.id)
            if v is None or v.index is not idx or v.epoch != self.activity_epoch:
                v = _Validation(idx, self.activity_epoch, 0, tuple(stated))
            if v.rows_seen < idx.n:
                acts, vecs = self._activities(self._activity_rows(h, v.rows_seen), read)
                checks = v.checks
                if acts:
                    new = validate_steps(steps, acts, self._text_vectors, vectors=vecs)
                    checks = tuple(stronger(a, b) for a, b in zip(checks, new))
                v = replace(v, rows_seen=idx.n, checks=checks)
            self._validations[h.id] = v
            self._validations.move_to_end(h.id)
            while len(self._validations) > VALIDATIONS_KEPT:
                self._validations.popitem(last=False)
            return list(v.checks)

    def validate_handoff(self, h: Memory) -> list[dict]:
        return [c.to_dict() for c in self.step_checks(h)]

    def handoff_view(self, h: Memory) -> dict:
        # A handoff memory stored without the engine's document (store_memory with type
        # handoff) is shown as a handoff whose summary is its text.
        doc = document(h, "handoff") or {"summary": h.content, "completed": [], "in_progress": [],
                                         "blocked": [], "next_steps": []}
        view = {"id": h.id, "task_id": h.task_id, "session_id": h.session_id,
                "created_at": h.created_at.isoformat(), **doc,
                "next_steps_validation": self.validate_handoff(h)}
        if h.task_id:
            # Steps an earlier handoff planned and nobody finished travel with the latest one.
            view["open_steps"] = [e for e in self.task_plan_of(h.user_id, h.task_id)
                                  if e["status"] in ("in_progress", "not_started")]
        return view

    # -- the plan of a task --------------------------------------------------
    def _same_step(self, a: str, b: str) -> bool:
        key = (a, b)
        got = self._same_steps.get(key)
        if got is None:
            if len(self._same_steps) >= 100_000:
                self._same_steps.clear()
            got = self._same_steps[key] = same_step(a, b, self._text_vectors)
        return got

    def _task_handoffs(self, user: str, task_id: str) -> list[Memory]:
        return self.store_db.task_handoffs(user, task_id)

    def _planned_entry(self, step: str, vec: np.ndarray | None, handoff_id: str, entries: list[dict],
                       vecs: list[np.ndarray], owner: list[int], candidates: int = 3) -> dict | None:
        """The plan entry `step` re-plans, or None: among the entries whose wordings are closest
        to it (a handful: a long task's plan holds hundreds of steps), the first that is the
        same step. Two steps of one handoff are never one entry."""
        if not entries:
            return None
        if vec is None:  # degraded (see task_plan_of)
            key = step.strip().lower()
            return next((e for e in entries if e["planned_in"][-1] != handoff_id
                         and key in (w.strip().lower() for w in e["wordings"])), None)
        sims = np.stack(vecs) @ vec
        best: dict[int, float] = {}
        for i in np.argsort(-sims):
            k = owner[i]
            if k not in best and entries[k]["planned_in"][-1] != handoff_id:
                best[k] = float(sims[i])
                if len(best) == candidates:
                    break
        for k in best:
            if any(self._same_step(w, step) for w in entries[k]["wordings"]):
                return entries[k]
        return None

    def task_plan(self, task_id: str, user_id: str | None = None) -> list[dict]:
        """Every step any handoff of the task planned, once, with its status and evidence."""
        t = self.get_task_row(task_id, user_id)
        return self.task_plan_of(t.user_id, t.id)

    def task_plan_of(self, user: str, task_id: str) -> list[dict]:
        """The plan: each step planned in any handoff of the task, re-plannings and rewordings
        folded into one entry (matched by meaning, as validation matches), in first-planned order.

        status: the strongest evidence over all its wordings, each checked against the activity
        after the handoff that planned it (done > in_progress); a step the latest handoff no longer
        plans and nobody started is `dropped`.
        """
        with self._lock:
            handoffs = self._task_handoffs(user, task_id)
            entries: list[dict] = []
            vecs: list[np.ndarray] = []  # one per wording, of entry owner[i]
            owner: list[int] = []
            read: dict[str, Memory] = {}  # rows after one handoff are read once for all of them
            for h in handoffs:
                steps = (document(h, "handoff") or {}).get("next_steps", [])
                if self.degraded:  # no model: steps fold only when worded alike
                    step_vecs: Sequence[np.ndarray | None] = [None] * len(steps)
                else:
                    step_vecs = self._text_vectors.embed_batch(steps) if steps else []
                for step, check, v in zip(steps, self.step_checks(h, read), step_vecs):
                    e = self._planned_entry(step, v, h.id, entries, vecs, owner)
                    vecs.append(v)
                    if e is None:
                        owner.append(len(entries))
                        entries.append({"step": step, "wordings": [step], "planned_in": [h.id],
                                        "first_planned_at": h.created_at.isoformat(), "check": check})
                        continue
                    owner.append(entries.index(e))
                    e["step"] = step  # the latest wording
                    if step not in e["wordings"]:
                        e["wordings"].append(step)
                    e["planned_in"].append(h.id)
                    e["check"] = stronger(e["check"], check)
            latest = handoffs[-1].id if handoffs else None
            plan = []
            for e in entries:
                check = e.pop("check")
                status = check.status
                if status == "not_started" and e["planned_in"][-1] != latest:
                    status = "dropped"
                plan.append({"step": e["step"], "status": status,
                             "evidence": dict(check.evidence) if check.evidence else None,
                             "planned_in": e["planned_in"], "wordings": e["wordings"],
                             "first_planned_at": e["first_planned_at"]})
            return plan

    # -- resuming a task -----------------------------------------------------
    def resume_task(self, task_id: str, max_tokens: int = 2000, user_id: str | None = None,
                    session_id: str | None = None, client: str = "", take_over: bool = False,
                    reader: str | None = None) -> dict:
        """Everything the agent taking over a task needs, structured and as one text block that
        fits `max_tokens`: goal and status, the plan with statuses and the next step, what is in
        progress and blocked, pitfalls, what to keep, the working set, interrupted sessions,
        and who holds the task (held_by).

        With a session_id the session claims the task (see engram.claims): when another live
        session holds it the answer still comes, with claim.claimed false and the holder named
        (take_over takes it). Without one (an MCP resource, the library) nothing is claimed;
        `reader` is then the session reading, so the block can say the holder is "this session".
        Nothing is reinforced and no interruption is marked as reported.
        """
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 50 <= max_tokens <= 100_000:
            raise EngramError("max_tokens must be a whole number from 50 to 100000")
        with self._lock:
            t = self.get_task_row(task_id, user_id)
            claim = self.work_on(t, session_id, client, take_over) if session_id else None
            mems = self.store_db.task_memories(t.user_id, t.id)
            plan = self.task_plan_of(t.user_id, t.id)
            handoffs = [m for m in mems if m.memory_type == "handoff"]
            latest = handoffs[-1] if handoffs else None
            doc = (document(latest, "handoff") or {}) if latest else {}
            features = self._progress_by_feature(mems)
            evidence = {x for e in plan if e["evidence"] for x in (e["evidence"]["id"], e["evidence"]["text"])}
            open_steps = [e for e in plan if e["status"] in ("in_progress", "not_started")]
            next_step = next((e for e in open_steps if e["status"] == "in_progress"),
                             open_steps[0] if open_steps else None)
            holder = self.claims.holder(t.id)
            out = {
                "task": t.to_dict(),
                "held_by": _held(holder, session_id or reader),
                "latest_handoff": {"id": latest.id, "created_at": latest.created_at.isoformat(),
                                   "summary": doc.get("summary", "")} if latest else None,
                "plan": plan,
                "next_step": next_step["step"] if next_step else None,
                # Plan steps first; then work in progress no step accounts for (its evidence).
                "in_progress": _unique([e["step"] for e in plan if e["status"] == "in_progress"]
                                       + [x for x in doc.get("in_progress", []) if x not in evidence]
                                       + [f for f, (m, p) in features.items()
                                          if p["status"] == "in_progress" and m.id not in evidence]),
                "blocked": _unique(doc.get("blocked", [])
                                   + [f + (f": {p['notes']}" if p.get("notes") else "")
                                      for f, (m, p) in features.items() if p["status"] == "blocked"]),
                "pitfalls": [self._failure_entry(m) for m in reversed(mems)
                             if m.memory_type == "failure" and m.status == "active"],
                "keep": [self._timeline_entry(m) for m in self._to_keep(mems)],
                "working_set": self._working_set(mems),
                "interrupted_sessions": [self._interrupted_entry(s) for s in
                                         self.store_db.task_sessions(t.id, "interrupted")],
            }
            if claim is not None:
                out["claim"] = claim
            out["context"] = render_resume(out, max_tokens)
            out["tokens"] = estimate_tokens(out["context"])
            return out

    # -- claims (engram/claims.py) -------------------------------------------
    def claim_task(self, task_id: str, session_id: str, client: str = "", take_over: bool = False,
                   user_id: str | None = None) -> dict:
        """Make the session the task's holder; TaskClaimed names the holder when another live
        session has it (unless take_over)."""
        with self._lock:
            t = self.get_task_row(task_id, user_id)
            if t.status in ("done", "abandoned"):
                raise EngramError(f"task {task_id} is {t.status}: there is nothing to claim; reopen it "
                                  "with update_task(status='open') first")
            return self.claims.claim(t.id, t.user_id, session_id, client, take_over)

    def work_on(self, t: Task | str, session_id: str | None, client: str = "", take_over: bool = False,
                user_id: str | None = None) -> dict | None:
        """The claim a session makes by working on a task (resume_task, track_progress,
        session_handoff): taken when the task is free or lapsed, never refused. None for no
        session or a finished task."""
        if session_id is None:
            return None
        with self._lock:
            if isinstance(t, str):
                t = self.get_task_row(t, user_id)
            if t.status in ("done", "abandoned"):
                return None
            return self.claims.claim(t.id, t.user_id, session_id, client, take_over, refuse=False)

    def release_task(self, task_id: str, session_id: str, user_id: str | None = None) -> dict:
        with self._lock:
            t = self.get_task_row(task_id, user_id)
            return self.claims.release(t.id, session_id)

    def claim_notices(self, session_id: str) -> list[dict]:
        """Take-overs of the session's tasks since its last call, each said once."""
        return self.claims.notices(session_id)

    @staticmethod
    def _progress_by_feature(mems: Sequence[Memory]) -> dict[str, tuple[Memory, dict]]:
        """The latest progress snapshot of each feature (named as first written), oldest first."""
        latest: dict[str, tuple[str, Memory, dict]] = {}
        for m in mems:
            p = document(m, "progress") if m.memory_type == "progress" else None
            if p:
                key = p["feature"].strip().lower()
                name = latest[key][0] if key in latest else p["feature"]
                latest.pop(key, None)
                latest[key] = (name, m, p)
        return {name: (m, p) for name, m, p in latest.values()}

    @staticmethod
    def _to_keep(mems: Sequence[Memory], limit: int = 12) -> list[Memory]:
        """The task's decisions and conventions: its facts, strategies and assumptions, the
        pinned and most important first."""
        kept = [m for m in mems if m.status == "active"
                and m.memory_type in ("fact", "strategy", "assumption")]
        kept.sort(key=lambda m: (m.pinned, m.importance, m.created_at), reverse=True)
        return kept[:limit]

    @staticmethod
    def _working_set(mems: Sequence[Memory]) -> dict[str, list[str]]:
        """Files and components named in the task's progress, failures and handoffs."""
        files: list[str] = []
        components: list[str] = []
        for m in mems:
            if m.memory_type not in ("progress", "failure", "handoff"):
                continue
            if m.memory_type == "failure":
                comp = (document(m, "failure") or {}).get("component")
                if comp:
                    components.append(comp)
            text = m.content
            if m.memory_type == "handoff":
                doc = document(m, "handoff") or {}
                text = " ".join([doc.get("summary", "")] + [x for k in ("completed", "in_progress",
                                                                        "blocked", "next_steps")
                                                            for x in doc.get(k, [])])
            files.extend(f.rstrip(".") for f in _FILE.findall(text))
        return {"files": _unique(files), "components": _unique(components)}

    def prompt_block(self, user_id: str | None = None, limit: int = 10, scope: Scope = NO_PROJECT) -> str:
        """The memory rules for CLAUDE.md / AGENTS.md, followed by the state of the open tasks seen in `scope`."""
        tasks = [t for t in self.task_overview(user_id=user_id, limit=1000, scope=scope)
                 if t["status"] in OPEN_TASK_STATUSES][:limit]
        lines = [MEMORY_RULES.rstrip()]
        if tasks:
            lines += ["", "### Open tasks (engram)",
                      "Resume one with resume_task(task_id) before working on it."]
            for t in tasks:
                held = f"; held by {describe_claim(t['held_by'])}" if t["held_by"] else ""
                lines.append(f"- {t['id']} [{t['status']}] {t['name']}"
                             f" (last activity {t['last_activity_at'][:10]}{held})")
                for e in self.task_plan_of(t["user_id"], t["id"]):
                    if e["status"] in ("in_progress", "not_started"):
                        lines.append(f"  - next: {e['step']} [{e['status']}]")
        return "\n".join(lines) + "\n"

    # -- recall with continuity context --------------------------------------
    def recall_context(self, query: str, limit: int = 10, memory_type: str | None = None,
                       task_id: str | None = None, tags: Sequence[str] | None = None,
                       as_of: datetime | None = None, mode: str = "hybrid", explain: bool = False,
                       user_id: str | None = None, session_id: str | None = None,
                       min_share: float = 0.0, scope: Scope = NO_PROJECT, strong_only: bool = False) -> dict:
        """Recall plus what a new session needs: the latest relevant handoff pinned first, the
        failures of components the hits concern, and sessions that were interrupted.

        The pinned handoff is held to the request like any hit: it has the type and one of the
        tags asked for, belongs to the task asked for (or, with no task, is relevant to the
        query), and counts towards `limit`. Everything it reads is what `scope` sees. strong_only:
        only strong hits (get_context's block, which the agent did not ask for); the pinned handoff
        is always a strong one."""
        user = self.user_of(user_id)
        tags = check_tags(tags) or None  # one string is one tag, not its characters
        with self._lock:
            hits = self.recall(query, limit=limit, memory_type=memory_type, task_id=task_id,
                               tags=tags, as_of=as_of, mode=mode, explain=explain, user_id=user,
                               min_share=min_share, scope=scope, strong_only=strong_only)
            handoff = None
            if memory_type in (None, "handoff") and as_of is None:
                handoff = self._relevant_handoff(query, user, task_id, tags, scope)
            memories = [self.hit_dict(h) for h in hits]
            if handoff is not None:
                memories = [m for m in memories if m["id"] != handoff.id][: limit - 1]
                pinned = self.hit_dict(Hit(handoff, max([h.score for h in hits], default=0.0),
                                           self.quality(handoff), confidence="strong",
                                           evidence="the latest handoff of the task asked for" if task_id
                                           else "a strong hit among the open tasks' handoffs"))
                pinned["pinned"] = True
                memories.insert(0, pinned)
            return {
                "memories": memories,
                "handoff": self.handoff_view(handoff) if handoff else None,
                "related_failures": self._related_failures(
                    hits, user, [handoff.task_id] if handoff is not None and handoff.task_id else [],
                    scope=scope),
                "interrupted_sessions": self.take_interrupted(user, exclude=session_id, scope=scope),
            }

    def hit_dict(self, h: Hit) -> dict:
        d = h.to_dict()
        for key in ("handoff", "failure", "progress"):
            doc = document(h.memory, key)
            if doc is not None:
                d[key] = doc
        return d

    def _relevant_handoff(self, query: str, user: str, task_id: str | None,
                          tags: tuple[str, ...] | None, scope: Scope) -> Memory | None:
        if task_id is not None:
            return self.latest_handoff(user, task_id, tags)
        open_tasks = {t.id for t in self.store_db.list_tasks(user)
                      if t.status not in ("done", "abandoned")}
        # recall's relevance floor applies, and only a strong hit is pinned unasked: no handoff
        # is pinned for a query it does not answer.
        cands = self.recall(query, limit=5, memory_type="handoff", tags=tags, user_id=user,
                            reinforce=False, scope=scope, strong_only=True)
        cands = [h for h in cands if h.memory.task_id is None or h.memory.task_id in open_tasks]
        if not cands:
            return None
        best = cands[0].score
        # Among the handoffs about as relevant as the best one, the newest wins.
        close = [h.memory for h in cands if h.score >= 0.6 * best]
        chosen = max(close, key=lambda m: m.created_at)
        if chosen.task_id:  # a later handoff of the same task supersedes it
            return self.latest_handoff(user, chosen.task_id, tags) or chosen
        return chosen

    def _related_failures(self, hits: list[Hit], user: str, task_ids: Sequence[str] = (),
                          limit: int = 5, scope: Scope = NO_PROJECT) -> list[dict]:
        """Earlier failures (seen in `scope`) of the components the hits concern, and of the
        tasks they belong to (a task's own failures are its, whatever the scope)."""
        components: list[str] = []
        known = self._known_components(user, scope)
        for h in hits:
            m = h.memory
            comp = (document(m, "failure") or {}).get("component")
            if comp:
                components.append(comp.lower())
            text = m.content.lower()
            components.extend(c for c in known if c in text)
        tasks = list(dict.fromkeys([*task_ids, *(h.memory.task_id for h in hits if h.memory.task_id)]))
        out: dict[str, dict] = {}
        for comp in dict.fromkeys(components):
            for m in self.store_db.active_failures_tagged(user, f"component:{comp}", scope):
                out.setdefault(m.id, self._failure_entry(m))
        for t in tasks:
            for m in self.store_db.active_failures_of_task(user, t):
                out.setdefault(m.id, self._failure_entry(m))
        return list(out.values())[:limit]

    @staticmethod
    def _failure_entry(m: Memory) -> dict:
        doc = document(m, "failure") or {"error": m.content, "component": "", "root_cause": "",
                                         "fix": None}
        return {"id": m.id, "content": m.content, "created_at": m.created_at.isoformat(),
                "task_id": m.task_id, **doc, "component": doc["component"].lower()}

    def _known_components(self, user: str, scope: Scope) -> list[str]:
        tags = self.store_db.active_failure_tags(user, "component:", scope)
        return [t.split(":", 1)[1] for t in tags if len(t) > len("component:") + 2]
