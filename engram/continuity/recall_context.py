"""What a session is told for a query: recall's hits (one ranking, engine/recall.py) with the latest
relevant handoff pinned first (taken from the same hits, or fetched by its task), the failures of the
components the hits concern, and the sessions that were interrupted; and get_context's <memory>
block, the same within a token budget."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from engram.continuity.entries import failure_entry
from engram.continuity.handoffs import Handoffs
from engram.continuity.rendering import estimate_tokens, pack_context
from engram.continuity.sessions import Sessions
from engram.core.bounds import MAX_TOKENS
from engram.core.documents import document, shared_origin, with_documents
from engram.core.recall_query import RecallQuery
from engram.core.types import NO_PROJECT, Hit, Memory, Scope
from engram.engine.recall import Recall
from engram.engine.state import EngineState

CONTEXT_LIMIT = 20  # memories get_context considers unless asked otherwise (the operation's default)


class RecallContext:
    """recall_memory and get_context over one recall."""

    def __init__(self, p: EngineState, recall: Recall, sessions: Sessions, handoffs: Handoffs):
        self.p = p
        self.recall = recall
        self.sessions = sessions
        self.handoffs = handoffs

    def get_context(
        self, query: str | RecallQuery, /, *, max_tokens: int = 1500, session_id: str | None = None, **options: Any
    ) -> dict:
        """One ready-to-read <memory> block within `max_tokens`: the latest handoff with its next
        steps' status, then the relevant memories, then pitfalls, each kept only if it still fits.
        `query`: a RecallQuery, or its text with its other fields as keywords (limit 20 unless
        given; `tags`: only memories, and a handoff, with at least one of them). Only strong hits
        go in, at least the context_min_share setting of the best one's score, and no captured
        turn (an episode is not a durable fact).

        Returns {context, tokens, memory_ids, interrupted_sessions}.
        """
        MAX_TOKENS.check(max_tokens, "max_tokens")
        if not isinstance(query, RecallQuery):
            options = {"limit": CONTEXT_LIMIT, **options}
        q = replace(
            RecallQuery.of(query, **options),
            min_share=self.p.settings.context_min_share,
            strong_only=True,
            exclude_types=("episode",),
        )
        r = self.recall_memory(q, session_id=session_id)
        text, ids = pack_context(r, max_tokens)
        return {
            "context": text,
            "tokens": estimate_tokens(text),
            "memory_ids": ids,
            "interrupted_sessions": r["interrupted_sessions"],
        }

    def recall_memory(self, query: str | RecallQuery, /, *, session_id: str | None = None, **options: Any) -> dict:
        """Recall plus what a new session needs: the latest relevant handoff pinned first, the
        failures of components the hits concern, and sessions that were interrupted (other than
        `session_id`, the caller's). `query`: a RecallQuery, or its text with its other fields as
        keywords (engram.core.recall_query).

        The pinned handoff is held to the request like any hit: it has the type and one of the
        tags asked for, belongs to the task asked for (or, with no task, is relevant to the
        query), and counts towards `limit`. Everything it reads is what the query's scope sees.
        strong_only: only strong hits (get_context's block, which the agent did not ask for); the
        pinned handoff is always a strong one. One ranking (engine/recall.py) gives the hits and
        the words read as misspelt."""
        q = RecallQuery.of(query, **options)
        user = self.p.user_of(q.user_id)
        with self.p.lock:
            ranking = self.recall.ranking(q)
            hits = ranking.hits
            handoff, why = None, ""
            if q.memory_type in (None, "handoff") and q.as_of is None:
                handoff, why = self._pinned_handoff(hits, user, q.task_id, q.tags)
            memories = [self.hit_dict(h) for h in hits]
            if handoff is not None:
                memories = [m for m in memories if m["id"] != handoff.id][: q.limit - 1]
                pinned = self.hit_dict(
                    Hit(
                        handoff,
                        max([h.score for h in hits], default=0.0),
                        self.p.quality(handoff),
                        confidence="strong",
                        evidence=why,
                    )
                )
                pinned["pinned"] = True
                memories.insert(0, pinned)
            out = {
                "memories": memories,
                "handoff": self.handoffs.view(handoff) if handoff else None,
                "related_failures": self.related_failures(
                    hits, user, [handoff.task_id] if handoff is not None and handoff.task_id else [], scope=q.scope
                ),
                "interrupted_sessions": self.sessions.take_interrupted(user, exclude=session_id, scope=q.scope),
            }
            if ranking.read_as:
                out["read_as"] = {w: list(cs) for w, cs in ranking.read_as.items()}
            return out

    def hit_dict(self, h: Hit) -> dict:
        d = with_documents(h.to_dict(), h.memory)
        origin = shared_origin(h.memory)
        if origin:  # a teammate's memory (docs/sharing.md): who wrote it, where and when
            d["shared_by"] = {k: origin.get(k) for k in ("by", "machine", "at")}
        return d

    def _pinned_handoff(
        self, hits: list[Hit], user: str, task_id: str | None, tags: tuple[str, ...] | None
    ) -> tuple[Memory | None, str]:
        """The handoff recall_memory pins, and why: the task's latest (fetched by task), or with no task
        the best strong handoff among the hits just ranked, of an open task or of none; failing
        that, the latest handoff of the open task the best strong hit belongs to (fetched by that
        task: a query about a task's work is about where its last session stopped). All from that
        one ranking: recall's relevance floor applies, and only a strong hit leads to a pin, so no
        handoff is pinned for a query it does not answer."""
        if task_id is not None:
            return self.handoffs.latest_handoff(user, task_id, tags=tags), "the latest handoff of the task asked for"
        strong = [h for h in hits if h.confidence == "strong"]
        if not any(h.memory.task_id for h in strong):
            open_tasks: set[str] = set()
        else:
            open_tasks = {t.id for t in self.p.store_db.list_tasks(user) if t.status not in ("done", "abandoned")}
        cands = [
            h
            for h in strong
            if h.memory.memory_type == "handoff" and (h.memory.task_id is None or h.memory.task_id in open_tasks)
        ]
        if not cands:
            task = next((h.memory.task_id for h in strong if h.memory.task_id in open_tasks), None)
            found = self.handoffs.latest_handoff(user, task, tags=tags) if task else None
            return found, "the latest handoff of the open task a strong hit belongs to"
        best = cands[0].score
        # Among the handoffs about as relevant as the best one, the newest wins.
        close = [h.memory for h in cands if h.score >= 0.6 * best]
        chosen = max(close, key=lambda m: m.created_at)
        if chosen.task_id:  # a later handoff of the same task supersedes it
            chosen = self.handoffs.latest_handoff(user, chosen.task_id, tags=tags) or chosen
        return chosen, "a strong hit among the open tasks' handoffs"

    def related_failures(
        self, hits: list[Hit], user: str, task_ids: Sequence[str] = (), *, limit: int = 5, scope: Scope = NO_PROJECT
    ) -> list[dict]:
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
            for m in self.p.store_db.active_failures_tagged(user, f"component:{comp}", scope):
                out.setdefault(m.id, failure_entry(m))
        for t in tasks:
            for m in self.p.store_db.active_failures_of_task(user, t):
                out.setdefault(m.id, failure_entry(m))
        return list(out.values())[:limit]

    def _known_components(self, user: str, scope: Scope) -> list[str]:
        tags = self.p.store_db.active_failure_tags(user, "component:", scope)
        return [t.split(":", 1)[1] for t in tags if len(t) > len("component:") + 2]
