"""Injectable clocks: the only place engram reads the wall clock."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Protocol

SECONDS_PER_DAY = 86400.0


def utc(dt: datetime) -> datetime:
    """Return dt as an aware UTC datetime (naive values are taken as UTC)."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    """Real time, in UTC."""

    def now(self) -> datetime:
        return datetime.now(timezone.utc)


class VirtualClock:
    """Time that only moves when told to; for tests, benchmarks and replays."""

    def __init__(self, start: datetime | None = None):
        self._now = utc(start or datetime(2025, 1, 1, tzinfo=timezone.utc))
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, when: datetime) -> None:
        with self._lock:
            self._now = utc(when)

    def advance(self, **delta: float) -> datetime:
        """advance(days=3, hours=2): move forward and return the new time."""
        with self._lock:
            self._now += timedelta(**delta)
            return self._now
