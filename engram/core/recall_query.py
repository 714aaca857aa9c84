"""What a recall asks, as one value.

Built once where the arguments are checked (engram.api's recall_memory and get_context, from the
arguments the operation's declaration checked; or `RecallQuery.of` for a library call of
Engram.recall, recall_memory or get_context) and passed unchanged down: continuity/recall_context.py,
engine/recall.py, search/ranking.rank. Its fields are recall's parameters, declared here only;
building one checks them (the bounds are engram.core.bounds'), so no layer below checks them again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engram.core.bounds import QUERY_CHARS, RECALL_LIMIT
from engram.core.clock import utc
from engram.core.types import NO_PROJECT, SEARCH_MODES, EngramError, Scope, check_tags
from engram.core.validation import check_text, check_type


@dataclass(frozen=True)
class RecallQuery:
    """One recall's question and how to answer it.

    text: what to look for. limit: most hits. memory_type, task_id, tags (at least one of them;
    one string is one tag), as_of (the memories as they stood then; nothing is reinforced):
    filters. mode: hybrid, bm25 or vector. explain: each hit's score breakdown. user_id: whose
    memories (None: the default user). scope: the project whose memories, with those of no
    project, are searched (the default, no project, searches only those of no project).
    graph: the memory graph's bonus. reinforce: strong hits learn from the query.
    exclude_types: memory types left out. min_share: only hits scoring at least this share of
    the best one's. strong_only: only strong hits (what is pushed into a context unasked).
    rerank: False keeps the first stage's order even with the `rerank` or `late_interaction`
    setting on (to compare).
    """

    text: str
    limit: int = 10
    memory_type: str | None = None
    task_id: str | None = None
    tags: tuple[str, ...] | None = None
    as_of: datetime | None = None
    mode: str = "hybrid"
    explain: bool = False
    user_id: str | None = None
    scope: Scope = NO_PROJECT
    graph: bool = True
    reinforce: bool = True
    exclude_types: tuple[str, ...] = ()
    min_share: float = 0.0
    strong_only: bool = False
    rerank: bool | None = None

    def __post_init__(self) -> None:
        check_text(self.text, "query", QUERY_CHARS)
        RECALL_LIMIT.check(self.limit, "limit")
        if self.mode not in SEARCH_MODES:
            raise EngramError(f"mode must be one of {', '.join(SEARCH_MODES)}; got {self.mode!r}")
        if self.memory_type is not None:
            check_type(self.memory_type)
        # Frozen: the normal forms are set once, here. One string is one tag, not its characters.
        object.__setattr__(self, "tags", check_tags(self.tags) or None)
        object.__setattr__(self, "exclude_types", tuple(check_type(t) for t in self.exclude_types))
        if self.as_of is not None:
            object.__setattr__(self, "as_of", utc(self.as_of))

    @classmethod
    def of(cls, query: str | RecallQuery, **options: Any) -> RecallQuery:
        """The query a call asks: `query` itself, or the text with these fields. The fields are
        taken as callers give them (tags as a list or one string, exclude_types as a list) and
        kept in their normal form (tuples)."""
        if isinstance(query, RecallQuery):
            return dataclasses.replace(query, **options) if options else query
        return cls(query, **options)
