"""Handoffs and plans: the handoff, failure and progress records, each handoff's next steps checked
against the activity written after it (incrementally, cached), and a task's plan (every step any of
its handoffs planned, folded by meaning, with its status and evidence)."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Sequence, cast

import numpy as np

from engram.continuity.entries import stated_checks
from engram.continuity.next_steps import Activity, StepCheck, same_step, stronger, validate_steps
from engram.continuity.rendering import progress_text, render_handoff
from engram.continuity.sessions import Sessions
from engram.core.documents import document
from engram.core.types import PROGRESS_STATUSES, EngramError, Memory
from engram.core.validation import check_items, check_short
from engram.engine.index_upkeep import Indexes
from engram.engine.state import EngineState
from engram.engine.writes import Writes
from engram.search.memory_index import to_days

SENTENCE_ENDS = (".", "!", "?", "。", "！", "？")
VALIDATIONS_KEPT = 512  # handoffs whose step checks stay cached (a few hundred bytes each)


@dataclass(frozen=True)
class _Validation:
    """One handoff's step checks over the index rows before `rows_seen` (of that index, at that
    activity epoch). Rows are appended in write order, so only later rows need a look."""

    index: Any
    epoch: int
    rows_seen: int
    checks: tuple[StepCheck, ...]


class Handoffs:
    """Handoff, failure and progress records (stored through Writes), step checks and plans."""

    def __init__(self, p: EngineState, indexes: Indexes, writes: Writes, sessions: Sessions):
        self.p = p
        self.indexes = indexes
        self.writes = writes
        self.sessions = sessions
        self.validations: OrderedDict[str, _Validation] = OrderedDict()
        self.same_steps: dict[tuple[str, str], bool] = {}  # a plan compares every pair of wordings

    def _record_project(self, task_id: str | None, user_id: str | None, project: str | None) -> str | None:
        """The project a handoff, failure or progress record belongs to: its task's (so a task's
        story stays together wherever it is written from), else the caller's. Checks the task."""
        if task_id is None:
            return project
        return self.p.task(task_id, user_id).project

    def session_handoff(
        self,
        summary: str,
        *,
        completed: Sequence[str] | None = None,
        in_progress: Sequence[str] | None = None,
        blocked: Sequence[str] | None = None,
        next_steps: Sequence[str] | None = None,
        task_id: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        checkpoint: dict | None = None,
        tags: Sequence[str] | None = None,
        project: str | None = None,
    ) -> Memory:
        """A handoff; `checkpoint`: an automatic one's record (engram.workflows.lifecycle), kept beside the
        document, whose `step_statuses` give each next step the status the agent's todo list gave it."""
        doc = {
            "summary": self.p.redact(check_short(summary, "summary", 10_000)),
            "completed": [self.p.redact(x) for x in check_items(completed, "completed")],
            "in_progress": [self.p.redact(x) for x in check_items(in_progress, "in_progress")],
            "blocked": [self.p.redact(x) for x in check_items(blocked, "blocked")],
            "next_steps": [self.p.redact(x) for x in check_items(next_steps, "next_steps")],
        }
        metadata: dict[str, Any] = {"handoff": doc}
        if checkpoint is not None:
            metadata["checkpoint"] = self.p.redact.value(checkpoint)
        with self.p.lock:
            project = self._record_project(task_id, user_id, project)
            res = self.writes.store_memory(
                render_handoff(doc),
                memory_type="handoff",
                importance=0.8,
                task_id=task_id,
                metadata=metadata,
                user_id=user_id,
                tags=tags,
                session_id=session_id,
                resolve_conflicts=False,
                chunk=False,
                project=project,
            )
            self.sessions.set_task(session_id, task_id)
            return res.memory

    def track_failure(
        self,
        error: str,
        component: str,
        root_cause: str = "",
        *,
        task_id: str | None = None,
        fix: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        project: str | None = None,
    ):
        doc = {
            "error": check_short(error, "error", 10_000),
            "component": check_short(component, "component", 200),
            "root_cause": check_short(root_cause, "root_cause", 10_000, required=False),
            "fix": check_short(fix, "fix", 10_000, required=False),
        }
        text = f"Failure in {doc['component']}: {doc['error']}"
        for label, value in (("Root cause", doc["root_cause"]), ("Fix", doc["fix"])):
            if value:  # a full stop between the parts, so they do not read as one run-on sentence
                text = f"{text if text.endswith(SENTENCE_ENDS) else text + '.'} {label}: {value}"
        with self.p.lock:
            project = self._record_project(task_id, user_id, project)
            res = self.writes.store_memory(
                text,
                memory_type="failure",
                importance=0.6,
                task_id=task_id,
                tags=[f"component:{doc['component'].lower()}"],
                metadata={"failure": self.p.redact.value(doc)},
                user_id=user_id,
                session_id=session_id,
                chunk=False,
                project=project,
            )
            self.sessions.set_task(session_id, task_id)
            return res

    def track_progress(
        self,
        feature: str,
        status: str,
        completion: float | None = None,
        *,
        task_id: str | None = None,
        notes: str = "",
        user_id: str | None = None,
        session_id: str | None = None,
        project: str | None = None,
    ) -> Memory:
        feature = check_short(feature, "feature", 2000)
        if status not in PROGRESS_STATUSES:
            raise EngramError(f"status must be one of {', '.join(PROGRESS_STATUSES)}; got {status!r}")
        if completion is None:  # not given: "done" is all of it, not "done (0%)"
            completion = 1.0 if status == "done" else 0.0
        if (
            isinstance(completion, bool)
            or not isinstance(completion, int | float)
            or not math.isfinite(completion)
            or not 0 <= completion <= 1
        ):
            raise EngramError(f"completion must be a number between 0 and 1, got {completion!r}")
        notes = check_short(notes, "notes", 10_000, required=False)
        doc = {
            "feature": self.p.redact(feature),
            "status": status,
            "completion": float(completion),
            "notes": self.p.redact(notes),
        }
        text = progress_text(doc)
        with self.p.lock:
            project = self._record_project(task_id, user_id, project)
            res = self.writes.store_memory(
                text,
                memory_type="progress",
                importance=0.5,
                task_id=task_id,
                metadata={"progress": doc},
                user_id=user_id,
                session_id=session_id,
                resolve_conflicts=False,
                chunk=False,
                project=project,
            )
            self.sessions.set_task(session_id, task_id)
            return res.memory

    def latest_handoff(
        self, user_id: str, task_id: str | None = None, *, tags: Sequence[str] | None = None
    ) -> Memory | None:
        """The newest active handoff not expired (of the task; with one of `tags`, as recall filters)."""
        return self.p.store_db.latest_handoff(user_id, task_id, tags, now=self.p.clock.now())

    def _activity_rows(self, h: Memory, start: int) -> np.ndarray:
        """Index rows from `start` on that count as later activity for handoff `h`: the same
        user, written after it, of its task or of none."""
        idx = self.p.index
        n = idx.n
        uc = idx.users.get(h.user_id)
        sl = slice(start, n)
        keep = idx.alive[sl] & (idx.user[sl] == (-2 if uc is None else uc)) & (idx.created[sl] > to_days(h.created_at))
        if h.task_id:
            tc = idx.tasks.get(h.task_id)
            keep &= (idx.task[sl] == (-2 if tc is None else tc)) | (idx.task[sl] == -1)
        rows = np.arange(start, n)[keep]
        own = idx.row_of.get(h.id)
        return rows[rows != own] if own is not None else rows

    def _activities(
        self, rows: np.ndarray, read: dict[str, Memory] | None = None
    ) -> tuple[list[Activity], list[np.ndarray | None]]:
        """The activities of index rows, each with the vector the index holds for it (handoff
        items, which are not memories of their own, get None: they are embedded once, cached).
        `read` keeps the rows already read, for a caller validating several handoffs."""
        idx = self.p.index
        read = {} if read is None else read
        ids = [idx.ids[r] for r in rows]
        read.update(self.p.store_db.get_memories([i for i in ids if i not in read]))
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
        if self.p.degraded:
            # The check compares meanings; without the model it cannot run (and is not cached).
            return [c if c.status != "not_started" else StepCheck(c.step, "unchecked", None) for c in stated]
        with self.p.lock:
            self.indexes.catch_up()  # later activity may have been written on another server
            idx = self.p.index
            v = self.validations.get(h.id)
            if v is None or v.index is not idx or v.epoch != self.p.activity_epoch:
                v = _Validation(idx, self.p.activity_epoch, 0, tuple(stated))
            if v.rows_seen < idx.n:
                acts, vecs = self._activities(self._activity_rows(h, v.rows_seen), read)
                checks = v.checks
                if acts:
                    new = validate_steps(steps, acts, self.p.text_vectors, vectors=vecs)
                    checks = tuple(stronger(a, b) for a, b in zip(checks, new))
                v = replace(v, rows_seen=idx.n, checks=checks)
            self.validations[h.id] = v
            self.validations.move_to_end(h.id)
            while len(self.validations) > VALIDATIONS_KEPT:
                self.validations.popitem(last=False)
            return list(v.checks)

    def validate_handoff(self, h: Memory) -> list[dict]:
        return [c.to_dict() for c in self.step_checks(h)]

    def view(self, h: Memory) -> dict:
        # A handoff memory stored without the engine's document (store_memory with type
        # handoff) is shown as a handoff whose summary is its text.
        doc = document(h, "handoff") or {
            "summary": h.content,
            "completed": [],
            "in_progress": [],
            "blocked": [],
            "next_steps": [],
        }
        view = {
            "id": h.id,
            "task_id": h.task_id,
            "session_id": h.session_id,
            "created_at": h.created_at.isoformat(),
            **doc,
            "next_steps_validation": self.validate_handoff(h),
        }
        if h.task_id:
            # Steps an earlier handoff planned and nobody finished travel with the latest one.
            view["open_steps"] = [
                e for e in self.plan_of(h.user_id, h.task_id) if e["status"] in ("in_progress", "not_started")
            ]
        return view

    # -- the plan of a task --------------------------------------------------
    def _same_step(self, a: str, b: str) -> bool:
        key = (a, b)
        got = self.same_steps.get(key)
        if got is None:
            if len(self.same_steps) >= 100_000:
                self.same_steps.clear()
            got = self.same_steps[key] = same_step(a, b, self.p.text_vectors)
        return got

    def _task_handoffs(self, user: str, task_id: str) -> list[Memory]:
        return self.p.store_db.task_handoffs(user, task_id)

    def _planned_entry(
        self,
        step: str,
        vec: np.ndarray | None,
        handoff_id: str,
        entries: list[dict],
        vecs: list[np.ndarray | None],
        owner: list[int],
        candidates: int = 3,
    ) -> dict | None:
        """The plan entry `step` re-plans, or None: among the entries whose wordings are closest
        to it (a handful: a long task's plan holds hundreds of steps), the first that is the
        same step. Two steps of one handoff are never one entry."""
        if not entries:
            return None
        if vec is None:  # degraded (see task_plan_of)
            key = step.strip().lower()
            return next(
                (
                    e
                    for e in entries
                    if e["planned_in"][-1] != handoff_id and key in (w.strip().lower() for w in e["wordings"])
                ),
                None,
            )
        # Every wording has its vector: a plan is read degraded (all None, above) or not, as a whole.
        sims = np.stack(cast(list[np.ndarray], vecs)) @ vec
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

    def plan(self, task_id: str, *, user_id: str | None = None) -> list[dict]:
        """Every step any handoff of the task planned, once, with its status and evidence."""
        t = self.p.task(task_id, user_id)
        return self.plan_of(t.user_id, t.id)

    def plan_of(self, user: str, task_id: str) -> list[dict]:
        """The plan: each step planned in any handoff of the task, re-plannings and rewordings
        folded into one entry (matched by meaning, as validation matches), in first-planned order.

        status: the strongest evidence over all its wordings, each checked against the activity
        after the handoff that planned it (done > in_progress); a step the latest handoff no longer
        plans and nobody started is `dropped`.
        """
        with self.p.lock:
            handoffs = self._task_handoffs(user, task_id)
            entries: list[dict] = []
            vecs: list[np.ndarray | None] = []  # one per wording, of entry owner[i]; all None when degraded
            owner: list[int] = []
            read: dict[str, Memory] = {}  # rows after one handoff are read once for all of them
            for h in handoffs:
                steps = (document(h, "handoff") or {}).get("next_steps", [])
                if self.p.degraded:  # no model: steps fold only when worded alike
                    step_vecs: Sequence[np.ndarray | None] = [None] * len(steps)
                else:
                    step_vecs = list(self.p.text_vectors.embed_batch(steps)) if steps else []
                for step, check, v in zip(steps, self.step_checks(h, read), step_vecs):
                    e = self._planned_entry(step, v, h.id, entries, vecs, owner)
                    vecs.append(v)
                    if e is None:
                        owner.append(len(entries))
                        entries.append(
                            {
                                "step": step,
                                "wordings": [step],
                                "planned_in": [h.id],
                                "first_planned_at": h.created_at.isoformat(),
                                "check": check,
                            }
                        )
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
                plan.append(
                    {
                        "step": e["step"],
                        "status": status,
                        "evidence": dict(check.evidence) if check.evidence else None,
                        "planned_in": e["planned_in"],
                        "wordings": e["wordings"],
                        "first_planned_at": e["first_planned_at"],
                    }
                )
            return plan
