"""The bounds of the numbers a caller passes, in one table: the operations' declarations (engram.ops)
state them in each tool's schema and refuse a value outside them before the call, and the engine
checks the same bounds for a library caller, who does not go through the declarations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engram.core.validation import check_whole


@dataclass(frozen=True)
class Bound:
    """Inclusive bounds of a number."""

    low: int | float
    high: int | float

    def check(self, value: Any, name: str) -> int:
        """`value` when it is a whole number within the bounds, else EngramError naming `name`."""
        return check_whole(value, name, int(self.low), int(self.high))


RECALL_LIMIT = Bound(1, 1000)  # memories a recall returns (recall_memory, get_context)
TASK_LIMIT = Bound(1, 1000)  # entries of each list of get_task, tasks of list_tasks
PAGE_LIMIT = Bound(1, 500)  # memories per page of list_memories
OFFSET = Bound(0, 1_000_000_000)  # matches list_memories skips
MAX_TOKENS = Bound(50, 100_000)  # a text block's token budget (get_context, resume_task, the hooks)
PROMPT_LIMIT = Bound(1, 20)  # memories shown for one prompt (prompt_memories)
AROUND = Bound(0, 20)  # neighbours of a memory in its session (get_memory)
STRENGTH_DAYS = Bound(1, 3650)  # days memory_strength projects ahead
IMPORTANCE = Bound(0, 1)  # a memory's importance
COMPLETION = Bound(0, 1)  # a progress record's completion
QUERY_CHARS = 10_000  # the longest query a recall reads
