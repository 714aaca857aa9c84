"""APScheduler wiring for periodic maintenance; the work itself is engram.admin.maintenance.consolidate_memory."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from engram.admin.maintenance import consolidate_memory
from engram.core.clock import Clock, SystemClock
from engram.core.settings import Settings

if TYPE_CHECKING:
    from engram.engram import Engram

log = logging.getLogger(__name__)

JOB_ID = "engram-maintenance"
FILL_JOB_ID = "engram-token-vectors"
# Several servers on one database run the upkeep once between them: a run needs this lease
# (store.try_lease), taken for half the interval, longer than any run and shorter than the time
# to the next. A server whose run falls due while another holds it skips that run.
LEASE = "maintenance"
LEASE_SHARE = 0.5
# When the next scheduled run is due, kept in the database: a daemon that exits when idle (or a
# machine that was off) must not restart the interval at every start and so never run.
META_NEXT_DUE = "maintenance_next_due"
# A run that fell due while no daemon ran starts this long after the next start, once the
# daemon serves its first client.
CATCH_UP_DELAY = timedelta(seconds=5)
FILL_DELAY = timedelta(seconds=1)  # the daemon is serving by then


class MaintenanceScheduler:
    """Runs maintenance every settings.maintenance_hours; a run never overlaps another.

    With the system clock (clock=None) start() hands the job to an APScheduler
    BackgroundScheduler (max_instances=1, coalesce: runs missed while the machine slept
    collapse into one). With any other clock (a VirtualClock in tests and benchmarks)
    nothing runs in the background: tick() fires what is due at that clock's time, using
    the same APScheduler trigger to compute fire times.
    """

    def __init__(
        self, eng: Engram, settings: Settings | None = None, api_metrics: Any = None, clock: Clock | None = None
    ):
        self.eng = eng
        self.settings = settings or eng.settings
        self.metrics = api_metrics
        self.clock = clock or SystemClock()
        self.virtual = not isinstance(self.clock, SystemClock)
        self.interval = timedelta(hours=self.settings.maintenance_hours)
        self._run_lock = threading.Lock()  # a second run waits for nothing: it is skipped
        self._state_lock = threading.Lock()
        self._scheduler: BackgroundScheduler | None = None
        self._trigger: IntervalTrigger | None = None
        self._next: datetime | None = None
        self.last_run: str | None = None
        self.last_report: dict | None = None
        self.runs = 0
        self.skipped = 0
        self.errors = 0
        self.last_error: str | None = None
        self.held_elsewhere = 0  # runs skipped because another server held the lease
        # Who takes the lease: this process on this host (pids repeat across hosts).
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Schedule the first run when the database says the next one is due (soon after now if
        that time passed while no daemon ran), else one interval from now."""
        now = self.clock.now()
        first = self._due()
        if first is None:
            first = now + self.interval
            self._set_due(first)
        elif first <= now + CATCH_UP_DELAY:
            first = now + CATCH_UP_DELAY
        self._trigger = IntervalTrigger(seconds=self.interval.total_seconds(), start_date=first, timezone=UTC)
        if self.virtual:
            self._next = self._trigger.get_next_fire_time(None, self.clock.now())
            return
        self._scheduler = BackgroundScheduler(timezone=UTC)
        self._scheduler.add_job(
            self.run_once,
            trigger=self._trigger,
            id=JOB_ID,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            replace_existing=True,
        )
        # Turns written before the late-interaction stage (or while its model was missing) get
        # their token vectors soon after start, in the background, rather than at the next run
        # (hours away) or one recall's candidates at a time; so do the turns of a bulk import,
        # which leaves them to this fill (engine/token_vectors.py: defer).
        self.fill_soon()
        self._scheduler.start()
        self.eng.indexes.tokens.fill_soon = self.fill_soon

    def fill_soon(self) -> None:
        """Fill in the turns' missing token vectors FILL_DELAY from now, in the background. Asked
        again before then (a bulk import in several calls), the fill moves to FILL_DELAY after
        the last ask, so it does not take the cores from the writes it follows; asked while it
        runs, the run takes in the new turns too (fill_missing reads what is missing until
        nothing is)."""
        scheduler = self._scheduler
        if scheduler is None:
            return
        scheduler.add_job(
            self.fill_token_vectors,
            "date",
            run_date=self.clock.now() + FILL_DELAY,
            id=FILL_JOB_ID,
            replace_existing=True,
            misfire_grace_time=None,
        )

    def fill_token_vectors(self) -> int:
        """Fill in the turns' missing token vectors (engine/token_vectors.py); how many. A failure
        is logged, not raised: recall fills in its own candidates all the same."""
        try:
            return self.eng.fill_token_vectors()
        except Exception as e:  # noqa: BLE001 - a background job must not take the daemon down
            log.warning("filling in the turns' token vectors failed: %s", e)
            return 0

    def shutdown(self) -> None:
        """Stop scheduling; waits for a run in progress so the database is left consistent."""
        tokens = self.eng.indexes.tokens
        if tokens.fill_soon == self.fill_soon:
            tokens.fill_soon = None
        if self._scheduler is not None:
            tokens.halt.set()  # a fill under way ends after its batch: the rest is the next start's
            try:
                self._scheduler.shutdown(wait=True)
            finally:
                tokens.halt.clear()
            self._scheduler = None
        self._next = None

    # -- running -----------------------------------------------------------------------------------
    def run_once(self) -> dict | None:
        """One maintenance run now, unless one is already running (then None)."""
        if not self._run_lock.acquire(blocking=False):
            with self._state_lock:
                self.skipped += 1
            return None
        try:
            now = self.clock.now()
            lease_s = max(self.interval.total_seconds() * LEASE_SHARE, 1.0)
            if not self.eng.store_db.try_lease(LEASE, self.holder, now, lease_s):
                with self._state_lock:
                    self.skipped += 1
                    self.held_elsewhere += 1
                log.info(
                    "maintenance due at %s: another server holds the %r lease and runs it; skipped here",
                    now.isoformat(),
                    LEASE,
                )
                return None
            try:
                report = consolidate_memory(self.eng, apply=True)
            except Exception as e:  # a failed run must not kill the schedule
                with self._state_lock:
                    self.errors += 1
                    self.last_error = f"{type(e).__name__}: {e}"
                if not self.virtual:
                    return None
                raise
            if self.metrics is not None:
                self.metrics.maintained(report)
            self.record(report)
            self._set_due(self.clock.now() + self.interval)
            return report
        finally:
            self._run_lock.release()

    def tick(self, now: datetime | None = None) -> list[dict]:
        """Virtual-clock mode: run the job if it is due at `now` (default: the clock's time).

        Several missed fire times coalesce into one run, as with the background scheduler.
        Returns the reports of the runs made (zero or one).
        """
        if not self.virtual:
            raise RuntimeError("tick() drives a virtual clock; the system clock runs in the background")
        if self._trigger is None:
            raise RuntimeError("call start() first")
        now = now or self.clock.now()
        if self._next is None or now < self._next:
            return []
        fire = self._next
        # Advance past every fire time <= now: missed runs coalesce.
        while fire is not None and fire <= now:
            fire = self._trigger.get_next_fire_time(fire, now)
        self._next = fire
        report = self.run_once()
        return [] if report is None else [report]

    def _due(self) -> datetime | None:
        raw = self.eng.store_db.get_meta(META_NEXT_DUE)
        try:
            return datetime.fromisoformat(raw) if raw else None
        except ValueError:
            return None  # unreadable: start the interval again

    def _set_due(self, when: datetime) -> None:
        self.eng.store_db.set_meta(META_NEXT_DUE, when.isoformat())

    def record(self, report: dict) -> None:
        """Remember a finished run (scheduled or requested through the API)."""
        with self._state_lock:
            self.last_report = report
            self.last_run = report.get("finished_at")
            self.runs += 1

    # -- status ------------------------------------------------------------------------------------
    def next_run(self) -> datetime | None:
        if self._scheduler is not None:
            job = self._scheduler.get_job(JOB_ID)
            return job.next_run_time if job else None
        return self._next

    def status(self) -> dict:
        nxt = self.next_run()
        with self._state_lock:
            return {
                "interval_hours": self.settings.maintenance_hours,
                "next_run": nxt.isoformat() if nxt else None,
                "last_run": self.last_run,
                "last_report": self.last_report,
                "runs": self.runs,
                "skipped": self.skipped,
                "held_elsewhere": self.held_elsewhere,
                "errors": self.errors,
                "last_error": self.last_error,
                "mode": "virtual" if self.virtual else "background",
            }
