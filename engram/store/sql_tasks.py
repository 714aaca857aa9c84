"""The tasks, sessions and task claims (what continuity keeps), SQL written once for both
backends: the part of SqlStore (sql.py) that reads and writes those tables."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Sequence

from engram.core.types import EVERY_PROJECT, Claim, Scope, Session, Task
from engram.store.dialect import of_user, project_filter
from engram.store.rows import (
    SESSION_COLUMNS,
    TASK_COLUMNS,
    aware,
    row_to_claim,
    row_to_session,
    row_to_task,
    session_field_values,
    session_values,
    task_values,
    ts,
)

_SESSION_SELECT = f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions"
_TASK_SELECT = f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks"
# The claim with its holder's heartbeat and status (a LEFT JOIN: a session row may be gone).
_CLAIM_SELECT = (
    "SELECT c.task_id, c.user_id, c.session_id, c.client, c.claimed_at, s.last_heartbeat, "
    "s.status FROM claims c LEFT JOIN sessions s ON s.id = c.session_id"
)


class TaskRows:
    """Tasks, sessions and claims; the store provides `_sql` (see SqlStore)."""

    def _sql(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        raise NotImplementedError

    # -- tasks ---------------------------------------------------------------
    def insert_task(self, t: Task) -> None:
        self._sql(
            f"INSERT INTO tasks ({', '.join(TASK_COLUMNS)}) VALUES ({', '.join('?' * len(TASK_COLUMNS))})",
            task_values(t),
        )

    def update_task(self, task_id: str, now: datetime, **fields: Any) -> None:
        sets: list[str] = ["updated_at = ?"]
        params: list[Any] = [ts(now)]
        for k, v in fields.items():
            if k not in ("name", "goal", "status", "metadata"):
                raise KeyError(k)
            sets.append(f"{k} = ?")
            params.append(json.dumps(v) if k == "metadata" else v)
        self._sql(f"UPDATE tasks SET {', '.join(sets)} WHERE id = ?", params + [task_id])

    def get_task(self, task_id: str) -> Task | None:
        r = self._sql(f"{_TASK_SELECT} WHERE id = ?", [task_id])
        return row_to_task(r[0]) if r else None

    def list_tasks(self, user_id: str, status: str | None = None, scope: Scope = EVERY_PROJECT) -> list[Task]:
        scoped, params = project_filter(scope)
        where, params = f"user_id = ? AND {scoped}", [user_id, *params]
        if status:
            where += " AND status = ?"
            params.append(status)
        return [row_to_task(r) for r in self._sql(f"{_TASK_SELECT} WHERE {where} ORDER BY updated_at DESC", params)]

    def task_last_activity(self, user_id: str) -> dict[str, tuple[datetime, str, str]]:
        # Ties on the time (a batch, a virtual clock) go to the later id: ids sort in write order.
        rows = self._sql(
            "SELECT task_id, created_at, memory_type, content FROM ("
            "SELECT task_id, created_at, memory_type, content, row_number() OVER "
            "(PARTITION BY task_id ORDER BY created_at DESC, id DESC) AS k FROM memories "
            "WHERE user_id = ? AND task_id IS NOT NULL AND status <> 'deleted') ranked WHERE k = 1",
            [user_id],
        )
        return {r[0]: (aware(r[1]), r[2], r[3]) for r in rows}

    def task_sessions(self, task_id: str, status: str) -> list[Session]:
        return self._sessions_where("task_id = ? AND status = ?", [task_id, status], "started_at, id")

    def open_task_ids(self) -> set[str]:
        return {r[0] for r in self._sql("SELECT id FROM tasks WHERE status NOT IN ('done', 'abandoned')")}

    def all_tasks(self, user_id: str | None = None) -> list[Task]:
        where, params = of_user(user_id)
        return [row_to_task(r) for r in self._sql(f"{_TASK_SELECT} WHERE {where} ORDER BY created_at, id", params)]

    # -- sessions ------------------------------------------------------------
    def get_session(self, session_id: str) -> Session | None:
        r = self._sql(f"{_SESSION_SELECT} WHERE id = ?", [session_id])
        return row_to_session(r[0]) if r else None

    def upsert_session(self, s: Session) -> None:
        self._sql(
            f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)}) VALUES "
            f"({', '.join('?' * len(SESSION_COLUMNS))}) ON CONFLICT (id) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in SESSION_COLUMNS[1:]),
            session_values(s),
        )

    def update_session(self, session_id: str, **fields: Any) -> None:
        values = session_field_values(fields)
        if values:
            self._sql(
                f"UPDATE sessions SET {', '.join(f'{k} = ?' for k, _ in values)} WHERE id = ?",
                [v for _, v in values] + [session_id],
            )

    def _sessions_where(self, where: str, params: Sequence[Any] = (), order: str = "started_at") -> list[Session]:
        return [row_to_session(r) for r in self._sql(f"{_SESSION_SELECT} WHERE {where} ORDER BY {order}", params)]

    def user_sessions(self, user_id: str) -> list[Session]:
        return self._sessions_where("user_id = ?", [user_id])

    def sessions_of_task(self, user_id: str, task_id: str) -> list[Session]:
        return self._sessions_where(
            "user_id = ? AND (task_id = ? OR id IN (SELECT DISTINCT session_id FROM memories "
            "WHERE task_id = ? AND user_id = ? AND session_id IS NOT NULL))",
            [user_id, task_id, task_id, user_id],
        )

    def stale_sessions(self, before: datetime) -> list[Session]:
        return self._sessions_where("status = 'active' AND last_heartbeat < ?", [ts(before)])

    def unreported_interruptions(
        self, user_id: str, stale_before: datetime, exclude: str | None = None, scope: Scope = EVERY_PROJECT
    ) -> list[Session]:
        """Interrupted sessions, and active ones silent since `stale_before` (as good as
        interrupted), not reported yet, but `exclude`."""
        where, params = project_filter(scope)
        return self._sessions_where(
            "NOT reported AND user_id = ? AND id <> ? AND (status = 'interrupted' OR "
            f"(status = 'active' AND last_heartbeat < ?)) AND {where}",
            [user_id, exclude or "", ts(stale_before), *params],
        )

    def projects(self, user_id: str) -> list[tuple[str, int, int]]:
        rows = self._sql(
            "SELECT project, sum(m), sum(t) FROM (SELECT project, 1 AS m, 0 AS t FROM memories "
            "WHERE user_id = ? AND project IS NOT NULL AND status <> 'deleted' UNION ALL "
            "SELECT project, 0, 1 FROM tasks WHERE user_id = ? AND project IS NOT NULL) u "
            "GROUP BY project ORDER BY project",
            [user_id, user_id],
        )
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    def add_session_outcome(self, session_id: str, outcome: str, notes: str) -> None:
        col = {"success": "successes", "failure": "failures"}[outcome]
        self._sql(
            f"UPDATE sessions SET {col} = coalesce({col}, 0) + 1, outcome = ?, outcome_notes = ? WHERE id = ?",
            [outcome, notes, session_id],
        )

    def session_outcomes(self) -> dict[str, tuple[int, int]]:
        rows = self._sql(
            "SELECT id, coalesce(successes, 0), coalesce(failures, 0) FROM sessions "
            "WHERE coalesce(successes, 0) + coalesce(failures, 0) > 0"
        )
        return {r[0]: (int(r[1]), int(r[2])) for r in rows}

    def sessions_with_counts(self, user_id: str | None = None) -> list[tuple[Session, int, int]]:
        where, params = of_user(user_id)
        rows = self._sql(
            f"SELECT {', '.join(SESSION_COLUMNS)}, coalesce(successes, 0), "
            f"coalesce(failures, 0) FROM sessions WHERE {where} ORDER BY started_at, id",
            params,
        )
        return [(row_to_session(r[:-2]), int(r[-2]), int(r[-1])) for r in rows]

    # -- task claims (engram/continuity/claims.py) ------------------------------------------
    # Exactly one session holds a task: the primary key on task_id refuses a second insert, and
    # a take-over is an update conditional on the holder the caller read, so of two sessions
    # racing for one task one wins and the other finds no row changed (Claims retries it).
    def get_claim(self, task_id: str) -> Claim | None:
        rows = self._sql(f"{_CLAIM_SELECT} WHERE c.task_id = ?", [task_id])
        return row_to_claim(rows[0]) if rows else None

    def task_claims(self, user_id: str) -> dict[str, Claim]:
        return {r[0]: row_to_claim(r) for r in self._sql(f"{_CLAIM_SELECT} WHERE c.user_id = ?", [user_id])}

    def insert_claim(self, task_id: str, user_id: str, session_id: str, client: str, now: datetime) -> bool:
        return bool(
            self._sql(
                "INSERT INTO claims VALUES (?, ?, ?, ?, ?) ON CONFLICT (task_id) DO NOTHING RETURNING task_id",
                [task_id, user_id, session_id, client, ts(now)],
            )
        )

    def swap_claim(self, task_id: str, holder: str, session_id: str, client: str, now: datetime) -> bool:
        return bool(
            self._sql(
                "UPDATE claims SET session_id = ?, client = ?, claimed_at = ? WHERE task_id = ? AND session_id = ? "
                "RETURNING task_id",
                [session_id, client, ts(now), task_id, holder],
            )
        )

    def delete_claim(self, task_id: str, session_id: str | None = None) -> bool:
        if session_id is None:
            return bool(self._sql("DELETE FROM claims WHERE task_id = ? RETURNING task_id", [task_id]))
        return bool(
            self._sql(
                "DELETE FROM claims WHERE task_id = ? AND session_id = ? RETURNING task_id", [task_id, session_id]
            )
        )

    def delete_session_claims(self, session_id: str) -> list[str]:
        return [r[0] for r in self._sql("DELETE FROM claims WHERE session_id = ? RETURNING task_id", [session_id])]

    def add_claim_notice(self, session_id: str, task_id: str, by_session: str, by_client: str, now: datetime) -> None:
        self._sql(
            "INSERT INTO claim_notices VALUES (?, ?, ?, ?, ?)", [session_id, task_id, by_session, by_client, ts(now)]
        )

    def take_claim_notices(self, session_id: str) -> list[dict]:
        # Read first: every call asks, and a DELETE that finds nothing still costs a write.
        if not self._sql("SELECT 1 FROM claim_notices WHERE session_id = ? LIMIT 1", [session_id]):
            return []
        rows = self._sql(
            "DELETE FROM claim_notices WHERE session_id = ? RETURNING task_id, by_session, by_client, happened_at",
            [session_id],
        )
        return sorted(
            ({"task_id": r[0], "by_session": r[1], "by_client": r[2] or "", "at": aware(r[3])} for r in rows),
            key=lambda n: n["at"],
        )
