"""Task claims: which session is working on a task, so two agents do not do the same work twice.

A session holds a task from its first claim (claim_task, or implicitly resume_task,
track_progress and session_handoff for a task nobody holds) until it releases it, or the claim
lapses: its session ended or was interrupted (a killed stdio server: at once, the daemon sees
the connection drop), or it was silent for `claim_timeout_s`. A lapsed claim is taken by the
next session that asks; a live one only with take_over, and then its holder is told on its
next call (a claim_notices entry in that call's result). Nothing is refused for writing: a
progress note or handoff for a task another session holds is stored, with a `claim` entry in
its result saying who holds the task.

The store decides who wins (store/sql_tasks.py): an insert that finds no row, or an update conditional
on the holder read just before, so of two sessions racing for one task exactly one wins, on
one DuckDB file or on a PostgreSQL database several servers share.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from engram.core.errors import TaskClaimed

if TYPE_CHECKING:  # the CLI imports describe_claim, and must not load the store (numpy) for it
    from engram.core.clock import Clock
    from engram.core.types import Claim
    from engram.store.base import MemoryStore

__all__ = ["Claims", "describe_claim"]

ATTEMPTS = 5  # compare-and-swap rounds before giving up: each lost round means another session won


def describe_claim(c: dict, now: datetime | None = None) -> str:
    """'session abc (stdio) since 2026-12-01 23:50:01 UTC, last heard 12 s ago': a claim for a person or a model."""
    text = f"session {c['session_id']} ({c['client'] or 'unknown client'}) since {_when(c['since'])}"
    if c.get("last_heard"):
        text += f", last heard {_when(c['last_heard'])}"
        if now is not None:
            ago = (now - datetime.fromisoformat(c["last_heard"])).total_seconds()
            text += f" ({max(0, round(ago))} s ago)"
    return text


def _when(iso: str) -> str:
    return iso[:19].replace("T", " ") + " UTC"


class Claims:
    """Claims on tasks over a store: who holds what, taking, releasing, the notices of take-overs.

    Callers check that the task exists and is the caller's (Engram.get_task_row) first.
    """

    def __init__(self, store: MemoryStore, clock: Clock, timeout_s: float):
        self.store = store
        self.clock = clock
        self.timeout = timedelta(seconds=timeout_s)

    def live(self, c: Claim | None, now: datetime | None = None) -> bool:
        """Held: its session is active and was heard from within the claim timeout."""
        if c is None or c.session_status != "active" or c.last_heard is None:
            return False
        return c.last_heard >= (now or self.clock.now()) - self.timeout

    def holder(self, task_id: str) -> Claim | None:
        """The live claim on the task, or None."""
        c = self.store.get_claim(task_id)
        return c if self.live(c) else None

    def holders(self, user_id: str) -> dict[str, Claim]:
        """The live claims on the user's tasks, by task id."""
        now = self.clock.now()
        return {t: c for t, c in self.store.task_claims(user_id).items() if self.live(c, now)}

    def claim(
        self, task_id: str, user_id: str, session_id: str, client: str, take_over: bool = False, refuse: bool = True
    ) -> dict[str, Any]:
        """Make session_id the task's holder: free or lapsed, or with take_over from a live holder.

        Returns {claimed: true, claim, taken_over: the live holder replaced or null}. Held by
        another live session without take_over: raises TaskClaimed naming it (refuse), or
        returns {claimed: false, claim: the holder's, message}.
        """
        with self.store.transaction():
            for _ in range(ATTEMPTS):
                now = self.clock.now()
                current = self.store.get_claim(task_id)
                if current is None:
                    if self.store.insert_claim(task_id, user_id, session_id, client, now):
                        return self._won(task_id, None)
                    continue  # another session inserted first: look at its claim
                if current.session_id == session_id:
                    return self._won(task_id, None)
                was_live = self.live(current, now)
                if was_live and not take_over:
                    return self._refused(current, now, refuse)
                if self.store.swap_claim(task_id, current.session_id, session_id, client, now):
                    # The previous holder learns it on its next call, lapsed or not: a session
                    # that speaks again after a lapse must not believe it still holds the task.
                    self.store.add_claim_notice(current.session_id, task_id, session_id, client, now)
                    return self._won(task_id, current if was_live else None)
            current = self.store.get_claim(task_id)
            return self._refused(current, self.clock.now(), refuse)

    def _won(self, task_id: str, taken: Claim | None) -> dict[str, Any]:
        c = self.store.get_claim(task_id)
        return {"claimed": True, "claim": c.to_dict() if c else None, "taken_over": taken.to_dict() if taken else None}

    def _refused(self, holder: Claim | None, now: datetime, refuse: bool) -> dict[str, Any]:
        held = holder.to_dict() if holder else None
        message = (
            f"task {holder.task_id} is held by {describe_claim(held, now)}; work on another task, or "
            "call claim_task with take_over=true if the user asked you to take it over or that "
            "session is stuck"
            if holder and held
            else "the task's claim changed while claiming it; try again"
        )
        if refuse:
            raise TaskClaimed(message)
        return {"claimed": False, "claim": held, "message": message}

    def release(self, task_id: str, session_id: str) -> dict[str, Any]:
        """Give the task up. Only its holder can: another session's live claim is refused
        (TaskClaimed), a lapsed one is dropped, and releasing a free task says it was not held."""
        with self.store.transaction():
            current = self.store.get_claim(task_id)
            if current is not None and current.session_id != session_id and self.live(current):
                raise TaskClaimed(
                    f"task {task_id} is held by {describe_claim(current.to_dict(), self.clock.now())}, "
                    "not by this session: only its holder releases it (claim_task with "
                    "take_over=true takes it over)"
                )
            released = current is not None and current.session_id == session_id and self.live(current)
            if current is not None:
                self.store.delete_claim(task_id, current.session_id)
            return {"task_id": task_id, "released": released}

    def drop(self, task_id: str) -> None:
        """The task is finished (done or abandoned): nobody holds it any more."""
        self.store.delete_claim(task_id)

    def notices(self, session_id: str) -> list[dict]:
        """Take-overs of the session's tasks since its last call, each said once."""
        out = []
        for n in self.store.take_claim_notices(session_id):
            out.append(
                {
                    "task_id": n["task_id"],
                    "taken_over_by": n["by_session"],
                    "client": n["by_client"],
                    "at": n["at"].isoformat(),
                    "message": f"task {n['task_id']} was taken over by session {n['by_session']} "
                    f"({n['by_client'] or 'unknown client'}) at {_when(n['at'].isoformat())}: "
                    "you no longer hold it; stop working on it (what you record for it "
                    "is still kept)",
                }
            )
        return out
