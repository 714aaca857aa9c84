"""Recall: one ranking of the memories for a query (search/ranking.rank, then the reranker), with
the words of the query it read as misspelt. What a session is told around those hits (the pinned
handoff, related failures, interrupted sessions) is continuity/recall_context.py, over this ranking."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from engram.core.recall_query import RecallQuery
from engram.core.types import MEMORY_TYPES, Hit, Memory
from engram.engine.index_upkeep import Indexes
from engram.engine.state import EngineState
from engram.models.on_demand import OnDemand
from engram.models.reranker import CrossEncoder
from engram.search.decay import quality_score, recalled_stability
from engram.search.memory_index import to_days
from engram.search.ranking import REFERENCE_TEXTS, confidence, late_hits, rank, rerank_hits


@dataclass(frozen=True)
class Ranking:
    """One recall's answer: the hits, best first, and the query's misspelt words with the stored
    words each was searched as (empty in vector mode), read with the same filter as the hits."""

    hits: list[Hit]
    read_as: dict[str, tuple[str, ...]] = field(default_factory=dict)


class Recall:
    """Recall over the derived indexes: the first stage, the reranker, reinforcement."""

    def __init__(self, p: EngineState, indexes: Indexes):
        self.p = p
        self.indexes = indexes
        self.reference: np.ndarray | None = None  # embeddings of ranking.REFERENCE_TEXTS
        # The reranker, loaded at the first recall needing it.
        self.ce = OnDemand(lambda: CrossEncoder(threads=p.settings.rerank_threads), "reranker")

    def recall(self, query: str | RecallQuery, /, **options: Any) -> list[Hit]:
        """Hybrid search, then (with the `rerank` setting) the cross-encoder's order of the first
        candidates. `query`: a RecallQuery, or its text with the query's other fields as keywords
        (`eng.recall("deploy", limit=5, reinforce=False)`). Each hit is `strong` or `weak`
        (ranking.confidence); only strong hits are reinforced (unless reinforce=False); a query
        nothing stored is relevant to returns nothing (see ranking's relevance floor)."""
        return self.ranking(RecallQuery.of(query, **options)).hits

    def ranking(self, q: RecallQuery) -> Ranking:
        """recall's hits with the words it read as misspelt (see recall): the filter and the
        corrections are worked out once for both. The query was checked when it was built."""
        user = self.p.user_of(q.user_id)
        if self.p.degraded:
            q = replace(q, mode="bm25")  # keyword recall only until the model is back (the result says so)
        qvec = self.p.embedder.embed_query(q.text) if q.mode != "bm25" else None
        if qvec is not None and self.reference is None:
            self.reference = self.p.embedder.embed_batch(list(REFERENCE_TEXTS))
        with self.p.lock:
            self.indexes.catch_up()
            now = self.p.clock.now()
            idx = self.p.index
            mask = idx.mask(user, q.memory_type, q.task_id, q.tags, q.as_of, scope=q.scope, now=now)
            for excluded in q.exclude_types:
                mask &= idx.mtype[: idx.n] != MEMORY_TYPES.index(excluded)
            if self.p.settings.gists and q.as_of is None:
                # Kept past its fading only in case it recurs (the gist window): as if pruned.
                mask &= ~idx.faded_episodes(now, self.p.settings.prune_threshold)
            # The query's misspelt words, among this caller's memories only, read once: the
            # ranking searches with them and the answer shows them.
            read_as = {} if q.mode == "vector" else idx.bm25.corrections(q.text, mask)
            failures = {idx.sessions[s]: f for s, (_, f) in self.p.outcomes.items() if s in idx.sessions}
            # The second stage reads the fused candidates: hybrid only (bm25 and vector are the
            # single searches, kept as they are to compare with). Late interaction first, then
            # the cross-encoder over its order, each when its setting is on.
            cfg = self.p.settings
            second = q.mode == "hybrid" and q.rerank is not False
            # Late interaction reads turns of a conversation only: a store (or filter) with none
            # ranks and answers as without it, and never loads its model.
            tokens = self.indexes.tokens
            late = second and cfg.late_interaction and not tokens.failed and bool(idx.turn[: len(mask)][mask].any())
            ce = self.cross_encoder() if second else None
            ranked = rank(
                idx,
                q,
                qvec,
                mask,
                to_days(q.as_of or now),
                weights=self.p.weights,
                candidates=max(q.limit, cfg.late_candidates if late else 0, cfg.rerank_pairs if ce else 0),
                session_failures=failures,
                reference_cos=None if qvec is None else self.reference @ qvec,
                corrections=read_as,
            )
            if late:
                # Turns of a conversation only (see engine/token_vectors.py for why).
                ranked = late_hits(
                    ranked,
                    lambda rows: tokens.scores(q.text, rows),
                    cfg.late_candidates,
                    cfg.late_weight,
                    reads=lambda r: bool(idx.turn[r]),
                )
            if ce is not None:
                ranked = rerank_hits(
                    ranked,
                    lambda rows: ce.score(q.text, [idx.live(r)[1] for r in rows]),
                    cfg.rerank_pairs,
                    cfg.rerank_weight,
                )
            ranked = ranked[: q.limit]
            if q.strong_only:
                ranked = [t for t in ranked if confidence(t.parts)[0] == "strong"]
            if q.min_share > 0 and ranked:
                # Cut before reinforcing: what is not returned must not learn from the query.
                top = ranked[0].score
                ranked = [t for t in ranked if t.score >= q.min_share * top]
            ids = [idx.live(t.row)[0] for t in ranked]
            # Only a strong hit learns from the query: a weak one was shown, not confirmed.
            strong = [t for t in ranked if confidence(t.parts)[0] == "strong"]
            mems: dict[str, Memory] = {}
            if q.reinforce and strong and q.as_of is None:
                # Each hit grows by its share of the answer: score / best score (search/decay.py).
                best = max(t.score for t in strong)
                share = {idx.live(t.row)[0]: (t.score / best if best > 0 else 1.0) for t in strong}
                mems = self.p.store_db.reinforce(
                    list(share), now, lambda m, at: recalled_stability(m, at, share.get(m.id, 1.0))
                )
                idx.touch(mems.values())
            rest = [i for i in ids if i not in mems]
            if rest:
                mems.update(self.p.store_db.get_memories(rest))
            hits = []
            for t, mid in zip(ranked, ids):
                m = mems[mid]
                s, f = self.p.outcomes.get(m.session_id, (0, 0)) if m.session_id else (0, 0)
                hits.append(
                    Hit(
                        m,
                        t.score,
                        quality_score(m.importance, m.recall_count, s, f),
                        t.parts if q.explain else None,
                        *confidence(t.parts),
                    )
                )
            return Ranking(hits, read_as)

    def cross_encoder(self) -> CrossEncoder | None:
        """The reranker when the `rerank` setting is on and it loads, else None (a failure to
        load is logged once; recall then keeps the first stage's order and floor)."""
        return self.ce.get() if self.p.settings.rerank else None
