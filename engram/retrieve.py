"""Hybrid ranking: BM25 + vector × decay weight + graph bonus, with a score breakdown.

score = w_bm25 × BM25 + w_vector × (cosine × decay) + graph bonus, where
decay = floor + (1 − floor) × min(1, strength) (see decay.retrieval_weight).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .decay import ranking_penalty, retrieval_weight_array, strength_array
from .graph import MemoryGraph
from .index import MemoryIndex, top_rows


@dataclass(frozen=True)
class Weights:
    w_bm25: float = 0.5
    w_vector: float = 0.5
    graph_depth: int = 0
    graph_bonus: float = 0.1
    decay_floor: float = 0.8


def rank(index: MemoryIndex, graph: MemoryGraph | None, query: str, qvec: np.ndarray | None,
         mask: np.ndarray, now_days: float, *, mode: str, weights: Weights, limit: int,
         session_failures: dict[int, int] | None = None, use_graph: bool = True
         ) -> list[tuple[int, float, dict[str, float]]]:
    """Rank eligible rows (mask) for a query. Returns (row, score, parts), best first."""
    rows = np.flatnonzero(mask)
    if not len(rows) or limit <= 0:
        return []
    pool = max(limit * 5, 50)
    n = index.n
    bm25 = np.zeros(n)
    if mode in ("hybrid", "bm25"):
        raw = index.bm25.scores(query, n, allowed=mask)
        top = float(raw.max()) if n else 0.0
        if top > 0:
            bm25 = np.minimum(1.0, raw / (index.bm25.ideal_score(query) or top))
    cos = np.zeros(n, dtype=np.float32)
    vec_rows = np.zeros(0, dtype=np.int64)
    if mode in ("hybrid", "vector") and qvec is not None:
        cos = index.search_cosine(qvec)
        vec_rows = top_rows(cos, rows, pool)
    lex_rows = np.flatnonzero(bm25 > 0)
    if len(lex_rows) > pool:
        lex_rows = top_rows(bm25, lex_rows, pool)
    cand = np.union1d(lex_rows, vec_rows).astype(np.int64)
    if not len(cand):
        return []

    def base_scores(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        strength = strength_array(index.importance[c], index.base_lambda[c], index.recall[c],
                                  now_days - index.touched[c])
        decay = retrieval_weight_array(strength, weights.decay_floor)
        decay = np.where(index.pinned[c], 1.0, decay)  # a pinned memory does not fade
        c_cos = np.maximum(cos[c].astype(np.float64), 0.0)
        if mode == "bm25":
            s = bm25[c].copy()
        elif mode == "vector":
            s = c_cos * decay
        else:
            s = weights.w_bm25 * bm25[c] + weights.w_vector * c_cos * decay
        if session_failures:
            pen = np.array([ranking_penalty(session_failures.get(int(x), 0)) for x in index.session[c]])
            s = s * pen
        return s, strength, decay

    scores, strength, decay = base_scores(cand)
    info = {int(r): (float(s), float(st), float(d)) for r, s, st, d in zip(cand, scores, strength, decay)}
    bonus: dict[int, tuple[float, int]] = {}
    if use_graph and graph is not None and mode == "hybrid" and weights.graph_depth > 0:
        # Ties broken by id so the seeds do not depend on row order.
        order = sorted(range(len(cand)), key=lambda i: (-round(float(scores[i]), 9), index.ids[cand[i]]))[:5]
        best = float(scores[order[0]]) if len(order) else 0.0
        if best > 0:
            seeds = {index.ids[int(cand[i])]: float(scores[i]) / best for i in order if scores[i] > 0}
            reached = graph.expand(seeds, weights.graph_depth, weights.graph_bonus)
            extra = []
            for mid, (b, hops) in reached.items():
                r = index.row_of.get(mid)
                if r is not None and mask[r]:
                    bonus[r] = (b, hops)
                    if r not in info:
                        extra.append(r)
            if extra:
                ex = np.array(extra, dtype=np.int64)
                s2, st2, d2 = base_scores(ex)
                for r, s, st, d in zip(ex, s2, st2, d2):
                    info[int(r)] = (float(s), float(st), float(d))
    out = []
    for r, (s, st, d) in info.items():
        b = bonus.get(r, (0.0, 0))[0]
        parts = {"bm25": float(bm25[r]), "cosine": float(max(cos[r], 0.0)), "strength": st,
                 "decay": d, "graph": b, "base": s}
        out.append((r, s + b, parts))
    out.sort(key=lambda t: (-round(t[1], 9), -index.created[t[0]], index.ids[t[0]]))
    return out[:limit]
