"""Recall: one ranking of the memories for a query (retrieve.rank, then the reranker), and
recall_context, which adds to those hits what a new session needs: the pinned handoff (taken from
the same hits, or fetched by its task), related failures and interrupted sessions."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Sequence

import numpy as np

from .checks import check_text, check_type, check_whole
from .clock import utc
from .decay import quality_score, recalled_stability
from .errors import ModelUnavailable
from .handoffs import Handoffs
from .index import to_days
from .indexes import Indexes
from .parts import Parts
from .records import document, failure_entry, with_documents
from .render import estimate_tokens, pack_context
from .rerank import CrossEncoder
from .retrieve import REFERENCE_TEXTS, confidence, rank, rerank_hits
from .sessions import Sessions
from .types import MEMORY_TYPES, NO_PROJECT, SEARCH_MODES, EngramError, Hit, Memory, Scope, check_tags

log = logging.getLogger(__name__)


class Recall:
    """Recall over the derived indexes; recall_context and get_context over one recall."""

    def __init__(self, p: Parts, indexes: Indexes, sessions: Sessions, handoffs: Handoffs):
        self.p = p
        self.indexes = indexes
        self.sessions = sessions
        self.handoffs = handoffs
        self.reference: np.ndarray | None = None  # embeddings of retrieve.REFERENCE_TEXTS
        self.ce: CrossEncoder | None = None  # the reranker, loaded at the first recall needing it
        self.ce_failed = False

    def context(self, query: str, max_tokens: int = 1500, task_id: str | None = None, limit: int = 20,
                tags: Sequence[str] | str | None = None, user_id: str | None = None,
                session_id: str | None = None, scope: Scope = NO_PROJECT) -> dict:
        """One ready-to-read <memory> block within `max_tokens`: the latest handoff with its next
        steps' status, then the relevant memories, then pitfalls, each kept only if it still fits.
        `tags`: only memories (and a handoff) with at least one of them.

        Returns {context, tokens, memory_ids, interrupted_sessions}.
        """
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 50 <= max_tokens <= 100_000:
            raise EngramError("max_tokens must be a whole number from 50 to 100000")
        r = self.recall_context(query, limit=limit, task_id=task_id, tags=check_tags(tags) or None,
                                user_id=user_id, session_id=session_id,
                                min_share=self.p.settings.context_min_share, scope=scope, strong_only=True,
                                exclude_types=("episode",))  # a captured turn is not a durable fact
        text, ids = pack_context(r, max_tokens)
        return {"context": text, "tokens": estimate_tokens(text), "memory_ids": ids,
                "interrupted_sessions": r["interrupted_sessions"]}

    def recall(self, query: str, limit: int = 10, memory_type: str | None = None,
               task_id: str | None = None, tags: Sequence[str] | None = None,
               as_of: datetime | None = None, mode: str = "hybrid", explain: bool = False,
               user_id: str | None = None, graph: bool = True, reinforce: bool = True,
               exclude_types: Sequence[str] = (), min_share: float = 0.0,
               scope: Scope = NO_PROJECT, strong_only: bool = False, rerank: bool | None = None) -> list[Hit]:
        """Hybrid search, then (with the `rerank` setting) the cross-encoder's order of the first
        candidates. Each hit is `strong` or `weak` (retrieve.confidence); only strong hits are
        reinforced (unless reinforce=False); a query nothing stored is relevant to returns
        nothing (see retrieve's relevance floor).
        min_share: return only hits scoring at least this share of the best hit's score.
        scope: the project whose memories (with those of no project) are searched; the default,
        no project, searches only the memories of no project (engram.types.Scope).
        strong_only: return only strong hits (what is pushed into a context unasked).
        rerank: False keeps the first stage's order even with the setting on (to compare)."""
        check_text(query, "query", 10_000)
        check_whole(limit, "limit", 1, 1000)
        if mode not in SEARCH_MODES:
            raise EngramError(f"mode must be one of {', '.join(SEARCH_MODES)}; got {mode!r}")
        if memory_type is not None:
            check_type(memory_type)
        tags = check_tags(tags) or None
        if as_of is not None:
            as_of = utc(as_of)
        user = self.p.user_of(user_id)
        if self.p.degraded:
            mode = "bm25"  # keyword recall only until the model is back (the result says so)
        qvec = self.p.embedder.embed_query(query) if mode != "bm25" else None
        if qvec is not None and self.reference is None:
            self.reference = self.p.embedder.embed_batch(list(REFERENCE_TEXTS))
        with self.p.lock:
            self.indexes.catch_up()
            now = self.p.clock.now()
            idx = self.p.index
            mask = idx.mask(user, memory_type, task_id, tags, as_of, scope=scope)
            for t in exclude_types:
                mask &= idx.mtype[: idx.n] != MEMORY_TYPES.index(t)
            failures = {idx.sessions[s]: f for s, (_, f) in self.p.outcomes.items() if s in idx.sessions}
            # The second stage reads the fused candidates: hybrid only (bm25 and vector are the
            # single searches, kept as they are to compare with).
            ce = self.cross_encoder() if mode == "hybrid" and rerank is not False else None
            pairs = self.p.settings.rerank_pairs
            ranked = rank(idx, self.p.graph, query, qvec, mask, to_days(as_of or now), mode=mode,
                          weights=self.p.weights, limit=max(limit, pairs) if ce else limit,
                          session_failures=failures, use_graph=graph,
                          reference_cos=None if qvec is None else self.reference @ qvec)
            if ce is not None:
                ranked = rerank_hits(ranked, lambda rows: ce.score(query, [idx.texts[r] for r in rows]),
                                     pairs, self.p.settings.rerank_weight)[:limit]
            if strong_only:
                ranked = [t for t in ranked if confidence(t[2])[0] == "strong"]
            if min_share > 0 and ranked:
                # Cut before reinforcing: what is not returned must not learn from the query.
                top = ranked[0][1]
                ranked = [t for t in ranked if t[1] >= min_share * top]
            ids = [idx.ids[r] for r, _, _ in ranked]
            # Only a strong hit learns from the query: a weak one was shown, not confirmed.
            strong = [t for t in ranked if confidence(t[2])[0] == "strong"]
            mems: dict[str, Memory] = {}
            if reinforce and strong and as_of is None:
                # Each hit grows by its share of the answer: score / best score (decay.py).
                best = max(score for _, score, _ in strong)
                share = {idx.ids[r]: (score / best if best > 0 else 1.0) for r, score, _ in strong}
                mems = self.p.store_db.reinforce(
                    list(share), now, lambda m, at: recalled_stability(m, at, share.get(m.id, 1.0)))
                idx.touch(mems.values())
            rest = [i for i in ids if i not in mems]
            if rest:
                mems.update(self.p.store_db.get_memories(rest))
            hits = []
            for (_, score, parts), mid in zip(ranked, ids):
                m = mems[mid]
                s, f = self.p.outcomes.get(m.session_id, (0, 0))
                hits.append(Hit(m, score, quality_score(m.importance, m.recall_count, s, f),
                                parts if explain else None, *confidence(parts)))
            return hits

    def cross_encoder(self):
        """The reranker when the `rerank` setting is on and it loads, else None (a failure to
        load is logged once; recall then keeps the first stage's order and floor)."""
        if not self.p.settings.rerank or self.ce_failed:
            return None
        if self.ce is None:
            try:
                self.ce = CrossEncoder(threads=self.p.settings.rerank_threads)
            except (ModelUnavailable, OSError, RuntimeError) as e:
                self.ce_failed = True
                log.warning("reranker unavailable, recall keeps the first stage's order: %s", e)
                return None
        return self.ce

    def recall_context(self, query: str, limit: int = 10, memory_type: str | None = None,
                       task_id: str | None = None, tags: Sequence[str] | None = None,
                       as_of: datetime | None = None, mode: str = "hybrid", explain: bool = False,
                       user_id: str | None = None, session_id: str | None = None,
                       min_share: float = 0.0, scope: Scope = NO_PROJECT, strong_only: bool = False,
                       exclude_types: Sequence[str] = ()) -> dict:
        """Recall plus what a new session needs: the latest relevant handoff pinned first, the
        failures of components the hits concern, and sessions that were interrupted.

        The pinned handoff is held to the request like any hit: it has the type and one of the
        tags asked for, belongs to the task asked for (or, with no task, is relevant to the
        query), and counts towards `limit`. Everything it reads is what `scope` sees. strong_only:
        only strong hits (get_context's block, which the agent did not ask for); the pinned handoff
        is always a strong one."""
        user = self.p.user_of(user_id)
        tags = check_tags(tags) or None  # one string is one tag, not its characters
        with self.p.lock:
            hits = self.recall(query, limit=limit, memory_type=memory_type, task_id=task_id,
                               tags=tags, as_of=as_of, mode=mode, explain=explain, user_id=user,
                               min_share=min_share, scope=scope, strong_only=strong_only,
                               exclude_types=exclude_types)
            handoff, why = None, ""
            if memory_type in (None, "handoff") and as_of is None:
                handoff, why = self._pinned_handoff(hits, user, task_id, tags)
            memories = [self.hit_dict(h) for h in hits]
            idx = self.p.index
            # The query's misspelt words and the stored words they were read as (lexical.py),
            # so the agent sees what was searched for; among this caller's memories only.
            read_as = {} if mode == "vector" else idx.bm25.corrections(
                query, idx.mask(user, memory_type, task_id, tags, as_of, scope=scope))
            if handoff is not None:
                memories = [m for m in memories if m["id"] != handoff.id][: limit - 1]
                pinned = self.hit_dict(Hit(handoff, max([h.score for h in hits], default=0.0),
                                           self.p.quality(handoff), confidence="strong", evidence=why))
                pinned["pinned"] = True
                memories.insert(0, pinned)
            out = {
                "memories": memories,
                "handoff": self.handoffs.view(handoff) if handoff else None,
                "related_failures": self.related_failures(
                    hits, user, [handoff.task_id] if handoff is not None and handoff.task_id else [],
                    scope=scope),
                "interrupted_sessions": self.sessions.take_interrupted(user, exclude=session_id, scope=scope),
            }
            if read_as:
                out["read_as"] = {w: list(cs) for w, cs in read_as.items()}
            return out

    def hit_dict(self, h: Hit) -> dict:
        return with_documents(h.to_dict(), h.memory)

    def _pinned_handoff(self, hits: list[Hit], user: str, task_id: str | None,
                        tags: tuple[str, ...] | None) -> tuple[Memory | None, str]:
        """The handoff recall_context pins, and why: the task's latest (fetched by task), or with no task
        the best strong handoff among the hits just ranked, of an open task or of none; failing
        that, the latest handoff of the open task the best strong hit belongs to (fetched by that
        task: a query about a task's work is about where its last session stopped). All from that
        one ranking: recall's relevance floor applies, and only a strong hit leads to a pin, so no
        handoff is pinned for a query it does not answer."""
        if task_id is not None:
            return self.handoffs.latest_handoff(user, task_id, tags), "the latest handoff of the task asked for"
        strong = [h for h in hits if h.confidence == "strong"]
        if not any(h.memory.task_id for h in strong):
            open_tasks: set[str] = set()
        else:
            open_tasks = {t.id for t in self.p.store_db.list_tasks(user) if t.status not in ("done", "abandoned")}
        cands = [h for h in strong if h.memory.memory_type == "handoff"
                 and (h.memory.task_id is None or h.memory.task_id in open_tasks)]
        if not cands:
            task = next((h.memory.task_id for h in strong if h.memory.task_id in open_tasks), None)
            found = self.handoffs.latest_handoff(user, task, tags) if task else None
            return found, "the latest handoff of the open task a strong hit belongs to"
        best = cands[0].score
        # Among the handoffs about as relevant as the best one, the newest wins.
        close = [h.memory for h in cands if h.score >= 0.6 * best]
        chosen = max(close, key=lambda m: m.created_at)
        if chosen.task_id:  # a later handoff of the same task supersedes it
            chosen = self.handoffs.latest_handoff(user, chosen.task_id, tags) or chosen
        return chosen, "a strong hit among the open tasks' handoffs"

    def related_failures(self, hits: list[Hit], user: str, task_ids: Sequence[str] = (),
                          limit: int = 5, scope: Scope = NO_PROJECT) -> list[dict]:
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
