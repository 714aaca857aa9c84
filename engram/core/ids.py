"""Row ids: short, unique, and in creation order (light: no engine imports)."""

from __future__ import annotations

import secrets
import threading
import time

_id_lock = threading.Lock()
_last_us = 0


def new_id() -> str:
    """16 hex digits that sort in creation order within a process (microseconds, then random).

    Rows written at one timestamp (a batch with an explicit created_at) then rebuild in the
    order they were written, which the index's context window depends on.
    """
    global _last_us
    with _id_lock:
        us = max(time.time_ns() // 1000, _last_us + 1)
        _last_us = us
    return f"{us:013x}{secrets.randbelow(16**3):03x}"
