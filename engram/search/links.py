"""Links from a recall's first hits to the rest of the evidence (graph expansion).

A question often needs several memories: what was said and the reply that completes it, a
decision and the memory naming the thing it was about. Once the first stage has found one
piece, what connects it to the others is not its similarity to them (a memory similar to a hit
is similar to the query too, so the first stage ranked it already: the similarity edges this
replaced only reshuffled the top, and cost LoCoMo 0.006-0.07 Hit@5, benchmarks/RESULTS.md,
issue 47), but:
- the conversation: the turn said just before or just after a hit (a question and its answer,
  a statement and the detail that follows it), from the index's context links;
- a rare word the hit names that the query does not (a name, a place, an identifier), held by
  another memory: the thing the hit is about, mentioned elsewhere.
A chunk of a long text (a reply cut in pieces) neither starts a link nor is reached as a
neighbour: a long reply names many things and sits beside every short turn of its exchange, and
linking through it lifted long replies on the subject over the short turn holding the answer
(benchmarks/paraphrase_chat.py: Hit@5 0.420 → 0.385 with such links, 0.415 without).
Each link is worth its strength (1 for a neighbouring turn; for words, the share of the hit's
rare words' IDF the memory holds) times the hit's share of the best score.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from engram.search.memory_index import MemoryIndex

# Links are followed from the first ANCHORS candidates, and the first KEEP keep their places
# (ranking.rank): the first piece found is not pushed out.
ANCHORS = 3
KEEP = 2
# A word is rare when at most this share of the eligible memories hold it (and always when two
# or fewer do): LoCoMo's names and places, an agent store's file names and identifiers.
RARE_SHARE = 0.02


def neighbours(index: MemoryIndex, row: int) -> set[int]:
    """The turns said just before and just after `row` in its conversation (none for a memory
    outside any conversation, or with context_window 0), but no chunk of a long text."""
    out = set(index.context_of.get(row, ())[:1])
    out.update(d for d in index.borrowers(row) if index.context_of.get(d, ())[:1] == (row,))
    return {r for r in out if index.pieces[r] <= 1}


def rare_words(index: MemoryIndex, row: int, mask: np.ndarray, eligible: int, skip: set[str]) -> dict[str, list[int]]:
    """The words of `row`'s own text not in `skip` that few eligible memories hold, each with
    the other eligible memories holding it in their own text."""
    bm25 = index.bm25
    most = max(2, int(RARE_SHARE * eligible))
    lends = index.context_window > 0 and bool(index.turn[: index.n].any())  # only turns lend
    out = {}
    for t in bm25.own_terms.get(row, {}):
        if t in skip:
            continue
        rows = bm25.holders(t, mask)
        # Postings count the words of a turn's context too, lent to at most context_window + 1
        # rows: more holders than that many times `most` cannot be `most` own holders. Where no
        # row lends (no turns), every holder but the row itself holds it in its own text.
        if len(rows) > ((index.context_window + 1) * most if lends else most + 1):
            continue
        held = []
        for r in rows.tolist():
            if r != row and t in bm25.own_terms.get(r, {}):
                held.append(r)
                if len(held) > most:
                    break  # not rare: the rest of its holders need not be read
        else:
            out[t] = held
    return out


def linked(
    index: MemoryIndex,
    anchors: Iterable[tuple[int, float]],
    mask: np.ndarray,
    query_terms: set[str],
) -> dict[int, float]:
    """Row -> its strongest link to an anchor (row, share of the best score in 0..1): share ×
    link strength (module docstring). Anchors themselves are left out."""
    anchors = list(anchors)
    eligible = int(mask.sum())
    out: dict[int, float] = {}

    def offer(r: int, v: float) -> None:
        if mask[r] and v > out.get(r, 0.0):
            out[r] = v

    for a, share in anchors:
        if index.pieces[a] > 1:
            continue  # a chunk of a long text: see the module docstring
        for r in neighbours(index, a):
            offer(r, share)
        words = rare_words(index, a, mask, eligible, query_terms)
        if not words:
            continue
        idf = {t: index.bm25.idf(t) for t in words}
        total = sum(idf.values())
        held: dict[int, float] = {}
        for t, rows in words.items():
            for r in rows:
                held[r] = held.get(r, 0.0) + idf[t]
        for r, v in held.items():
            offer(r, share * v / total)
    for a, _ in anchors:
        out.pop(a, None)
    return out


def expansion(
    index: MemoryIndex,
    cand: np.ndarray,
    scores: np.ndarray,
    mask: np.ndarray,
    query_words: set[str],
    depth: int,
    bonus: float,
) -> dict[int, float]:
    """Row -> graph bonus for a ranking's candidates `cand` (first-stage `scores`): `bonus` × its
    strongest link to the first ANCHORS candidates (each worth its share of the best score), over
    `depth` hops, each further hop at half the last."""
    # Ties broken by id so the anchors do not depend on row order.
    order = sorted(range(len(cand)), key=lambda i: (-round(float(scores[i]), 9), index.ids[cand[i]]))
    best = float(scores[order[0]])
    if best <= 0:
        return {}
    frontier = [(int(cand[i]), float(scores[i]) / best) for i in order[:ANCHORS] if scores[i] > 0]
    seen = {r for r, _ in frontier}
    out: dict[int, float] = {}
    for hop in range(depth):
        reached = {r: v for r, v in linked(index, frontier, mask, query_words).items() if r not in seen}
        for r, v in reached.items():
            out[r] = max(out.get(r, 0.0), bonus * v * 0.5**hop)
        seen.update(reached)
        # The strongest links only carry on: a hub's many links would flood the next hop.
        frontier = sorted(reached.items(), key=lambda kv: (-kv[1], kv[0]))[:ANCHORS]
        if not frontier:
            break
    return out
