"""Sessions: registered and kept alive by their heartbeat, ended or interrupted (reported once to
the next reader), their outcomes, and the task each is working on."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from engram.continuity.entries import timeline_entry
from engram.core.errors import DiskFull
from engram.core.types import INTERRUPTION_REASONS, NO_PROJECT, OUTCOMES, EngramError, NotFound, Scope, Session
from engram.core.validation import check_short
from engram.engine.state import EngineState

log = logging.getLogger(__name__)


class Sessions:
    """Sessions and their heartbeats (the last one written of each, to spare writes)."""

    def __init__(self, p: EngineState):
        self.p = p
        self.beats: dict[str, tuple[str, datetime]] = {}  # session -> (user, heartbeat last written)

    def touch_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        client: str = "",
        pid: int | None = None,
        project: str | None = None,
        branch: str | None = None,
    ) -> None:
        """Register a session or refresh its heartbeat. Called on every request. A new session
        records the project and branch its client works in.

        A busy session's heartbeat is written at most every tenth of the heartbeat timeout:
        that keeps it far from stale and spares most requests a write.
        """
        try:
            self._touch(session_id, user_id, client, pid, project, branch)
        except DiskFull as e:
            # Bookkeeping, not the caller's request: a read on a full disk must still answer. The
            # beat is not recorded, so the next request once space is freed writes it.
            log.warning("session %s: heartbeat not written: %s", session_id, e)

    def _touch(
        self,
        session_id: str,
        user_id: str | None,
        client: str,
        pid: int | None,
        project: str | None,
        branch: str | None,
    ) -> None:
        now = self.p.clock.now()
        user = self.p.user_of(user_id)
        with self.p.lock:
            beat = self.beats.get(session_id)
            if beat is not None and beat[0] == user and timedelta(0) <= now - beat[1] < self._beat_every():
                return
            s = self.p.store_db.get_session(session_id)
            if s is not None and s.user_id != user:
                # Naming another user's session must not let a caller act in it (outcomes, tasks).
                raise NotFound(f"no session with id {session_id!r} for this user")
            if s is None:
                s = Session(
                    id=session_id,
                    user_id=user,
                    client=client or "",
                    pid=pid,
                    status="active",
                    started_at=now,
                    last_heartbeat=now,
                    ended_at=None,
                    task_id=None,
                    outcome=None,
                    outcome_notes=None,
                    reported=False,
                    project=project,
                    branch=branch,
                )
                self.p.store_db.upsert_session(s)
                # A new session is written anyway: the moment to retire silent ones (not on reads).
                self.expire_stale_sessions()
            elif s.interruption:
                # It said it is about to stop (report_interruption): its last calls keep it so.
                self.p.store_db.update_session(session_id, last_heartbeat=now)
            elif s.status != "active":
                # A session that was marked interrupted but speaks again is alive after all.
                self.p.store_db.update_session(
                    session_id, status="active", last_heartbeat=now, ended_at=None, reported=False
                )
            else:
                # A silent session reported as interrupted that speaks again may be reported again.
                fields = {"reported": False} if s.reported else {}
                self.p.store_db.update_session(session_id, last_heartbeat=now, **fields)
            self.beats[session_id] = (user, now)

    def _beat_every(self) -> timedelta:
        """How often a busy session's heartbeat is written: a tenth of the shorter of the
        heartbeat and claim timeouts, so neither a session nor its claims look silent."""
        return timedelta(seconds=min(self.p.settings.heartbeat_timeout_s, self.p.settings.claim_timeout_s) / 10)

    def end_session(self, session_id: str, clean: bool = True, *, user_id: str | None = None) -> None:
        """Mark a session ended (clean exit) or interrupted (connection lost, process killed).

        Only the user's own session (user_id None: ENGRAM_USER's): a client that named another
        user's session was refused every call and must not end it on its way out either.
        """
        # Not self.p.user_of(): a malformed user id owns no session, and a disconnect must not raise.
        user = self.p.settings.user_id if user_id is None else user_id
        with self.p.lock:
            s = self.p.store_db.get_session(session_id)
            if s is None or s.status != "active" or s.user_id != user:
                return
            self.beats.pop(session_id, None)
            try:
                self.p.store_db.update_session(
                    session_id, status="ended" if clean else "interrupted", ended_at=self.p.clock.now()
                )
            except DiskFull as e:
                # The session then looks silent, and the heartbeat timeout reports it interrupted.
                log.warning("session %s: its end not written: %s", session_id, e)

    def stale_cutoff(self) -> datetime:
        return self.p.clock.now() - timedelta(seconds=self.p.settings.heartbeat_timeout_s)

    def expire_stale_sessions(self) -> int:
        """Sessions whose heartbeat is older than the timeout count as interrupted.

        Run when a session registers and by maintenance; readers do not wait for it, they treat
        a silent session as interrupted already (take_interrupted).
        """
        with self.p.lock:
            stale = self.p.store_db.stale_sessions(self.stale_cutoff())
            for s in stale:
                self.p.store_db.update_session(s.id, status="interrupted", ended_at=s.last_heartbeat)
                self.beats.pop(s.id, None)
            return len(stale)

    def report_interruption(
        self, session_id: str, reason: str, *, task_id: str | None = None, user_id: str | None = None
    ) -> Session:
        """End the session as interrupted, with why (an agent about to lose its context says so).

        The next recall of another session reports it once, as for a killed process; resume_task
        lists it with the task's other interrupted sessions.
        """
        if reason not in INTERRUPTION_REASONS:
            raise EngramError(f"reason must be one of {', '.join(INTERRUPTION_REASONS)}; got {reason!r}")
        with self.p.lock:
            if task_id is not None:
                self.p.task(task_id, user_id)
            s = self.p.store_db.get_session(session_id)
            if s is None or s.user_id != self.p.user_of(user_id):
                raise NotFound(f"no session with id {session_id!r}")
            fields: dict[str, Any] = {
                "status": "interrupted",
                "ended_at": self.p.clock.now(),
                "interruption": reason,
                "reported": False,
            }
            if task_id is not None:
                fields["task_id"] = task_id
            self.p.store_db.update_session(session_id, **fields)
            return self.p.store_db.get_session(session_id)

    def interrupted_entry(self, s: Session) -> dict:
        task = self.p.store_db.get_task(s.task_id) if s.task_id else None
        prog = self.p.store_db.last_session_progress(s.id)
        return {
            "session_id": s.id,
            "client": s.client,
            "started_at": s.started_at.isoformat(),
            "last_heartbeat": s.last_heartbeat.isoformat(),
            "ended_at": (s.ended_at or s.last_heartbeat).isoformat(),
            # reason: what the session reported; "connection_lost" for a killed or silent one
            "reason": s.interruption or "connection_lost",
            "task": task.to_dict() if task else None,
            "last_progress": timeline_entry(prog, self.p.quality(prog)) if prog else None,
        }

    def take_interrupted(
        self, user_id: str | None = None, *, exclude: str | None = None, scope: Scope = NO_PROJECT
    ) -> list[dict]:
        """Interrupted sessions not reported yet, each with its task and last progress; reported once.

        A session silent for longer than the heartbeat timeout counts as interrupted without
        waiting for expire_stale_sessions to mark it: reading does not retire sessions.
        """
        user = self.p.user_of(user_id)
        with self.p.lock:
            rows = self.p.store_db.unreported_interruptions(user, self.stale_cutoff(), exclude, scope)
            out = [self.interrupted_entry(s) for s in rows]
            for s in rows:  # reported once: the one write a recall may make, only when there is news
                self.p.store_db.update_session(s.id, reported=True)
            return out

    def set_task(self, session_id: str | None, task_id: str | None) -> None:
        """Record that a (registered) session is working on the task."""
        if session_id and task_id and self.p.store_db.get_session(session_id) is not None:
            self.p.store_db.update_session(session_id, task_id=task_id)

    def session_outcome(self, session_id: str, outcome: str, notes: str = "", *, user_id: str | None = None) -> Session:
        if outcome not in OUTCOMES:
            raise EngramError(f"outcome must be 'success' or 'failure'; got {outcome!r}")
        notes = self.p.redact(check_short(notes, "notes", 5000, required=False))
        with self.p.lock:
            s = self.p.store_db.get_session(session_id)
            if s is None or s.user_id != self.p.user_of(user_id):
                raise NotFound(f"no session with id {session_id!r}")
            self.p.store_db.add_session_outcome(session_id, outcome, notes)
            self.p.outcomes = self.p.store_db.session_outcomes()
            return self.p.store_db.get_session(session_id)

    def list_projects(self, user_id: str | None = None) -> list[dict]:
        """The projects the user's live memories and tasks belong to: {id, memories, tasks}."""
        return [{"id": p, "memories": m, "tasks": t} for p, m, t in self.p.store_db.projects(self.p.user_of(user_id))]

    def list_sessions(self, user_id: str | None = None) -> list[Session]:
        return self.p.store_db.user_sessions(self.p.user_of(user_id))
