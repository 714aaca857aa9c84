"""An incrementally maintained BM25 index (postings in memory) over the terms of text/tokens.py,
and the spelling correction of a query's words against the stored words."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np

from engram.text.tokens import CJK, SPELL_MIN_LEN, STOPWORDS, term, tokenize

# Spelling correction of a query's words against the store's own words (BM25Index.corrections):
# a word is corrected only when it is at least this long, holds letters only, and no row holds
# its term, to stored words one edit away (a letter deleted, inserted or replaced, or two
# neighbours swapped), at most SPELL_ALTERNATIVES of them. Shorter words have too many neighbours
# one edit away ("cat": car, bat, cut), and a number one digit off is another number, not a typo.
SPELL_ALTERNATIVES = 3
# Words tried per query: a typed question has a few misspellings; a prompt of 10,000 characters of
# identifiers (a hook's query) would otherwise cost about 0.2 s here.
SPELL_MAX_WORDS = 8
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")
_WORD = re.compile(r"[^\W\d_]+")


def _edits1(w: str) -> set[str]:
    """Every string one edit away from `w` (Norvig's spelling corrector): a letter deleted, two
    neighbours swapped, a letter replaced or inserted (a-z and the word's own letters)."""
    letters = _LETTERS | set(w)
    splits = [(w[:i], w[i:]) for i in range(len(w) + 1)]
    out = {a + b[1:] for a, b in splits if b}
    out |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    out |= {a + c + b[1:] for a, b in splits if b for c in letters}
    out |= {a + c + b for a, b in splits for c in letters}
    out.discard(w)
    return out


def _idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class _Postings:
    """One term's postings as growable arrays, so a query scores them without a Python loop.

    A removed row keeps its slot with tf 0 (it scores nothing) until compaction.
    """

    __slots__ = ("rows", "tfs", "n", "live")

    def __init__(self) -> None:
        self.rows = np.empty(4, dtype=np.int32)
        self.tfs = np.empty(4, dtype=np.float32)
        self.n = 0
        self.live = 0

    def extend(self, rows: list[int], tfs: list[float]) -> None:
        k = self.n + len(rows)
        if k > len(self.rows):
            self.rows = np.resize(self.rows, max(k, 2 * len(self.rows)))
            self.tfs = np.resize(self.tfs, max(k, 2 * len(self.tfs)))
        self.rows[self.n : k] = rows
        self.tfs[self.n : k] = tfs
        self.n = k
        self.live += len(rows)

    def remove(self, row: int) -> None:
        hit = np.flatnonzero((self.rows[: self.n] == row) & (self.tfs[: self.n] > 0))
        self.tfs[hit] = 0.0
        self.live -= len(hit)
        if self.n > 32 and 2 * self.live < self.n:
            keep = np.flatnonzero(self.tfs[: self.n] > 0)
            self.rows[: len(keep)] = self.rows[keep]
            self.tfs[: len(keep)] = self.tfs[keep]
            self.n = len(keep)

    def row_set(self) -> set[int]:
        return set(self.rows[: self.n][self.tfs[: self.n] > 0].tolist())


class BM25Index:
    """Okapi BM25 over rows of the derived index. Writes are O(terms); queries read only
    the postings of the query's terms, vectorised, so a common word in 100k rows stays cheap."""

    def __init__(self, k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.postings: dict[str, _Postings] = {}
        self.doc_terms: dict[int, dict[str, float]] = {}  # own counts plus the context's, weighted
        self.own_terms: dict[int, Counter] = {}
        self.doc_len = np.zeros(1024, dtype=np.float32)
        self.total_len = 0.0
        # The stored texts' words as written (lower-cased), each with its term: what a misspelt
        # query word is corrected to. Kept when a row goes; a word whose term no row holds any
        # more is not offered.
        self.surface: dict[str, str] = {}
        # Words the embedding model's vocabulary holds whole (set by the engine): such a word is
        # a real word, not a typo, even when nothing stored has it ("hiking" is not "biking").
        self.known_words: frozenset[str] = frozenset()

    def __len__(self) -> int:
        return len(self.doc_terms)

    def add(self, row: int, text: str, context: tuple[int, ...] = (), context_weight: float = 0.0) -> None:
        """Index a row's text; the own words of `context` rows count too, each at context_weight."""
        self.add_many([(row, text, context)], context_weight)

    def add_many(self, items: list[tuple[int, str, tuple[int, ...]]], context_weight: float = 0.0) -> None:
        """add() for many rows (row, text, context rows), postings appended per term at once."""
        self._index(
            [(row, Counter(tokenize(text, seen=self.surface)), context) for row, text, context in items], context_weight
        )

    def set_context(self, row: int, context: tuple[int, ...], context_weight: float) -> None:
        """Re-index a row with another context (one of its context rows was removed)."""
        own = self.own_terms.get(row)
        if own is not None:
            self._index([(row, own, context)], context_weight)

    def _index(self, items: list[tuple[int, Counter, tuple[int, ...]]], context_weight: float) -> None:
        # Every row's own terms first: a row may take its context from another row of the batch.
        for row, own, _ in items:
            if row in self.doc_terms:
                self.remove(row)
            self.own_terms[row] = own
        top = max(row for row, _, _ in items)
        if top >= len(self.doc_len):
            self.doc_len = np.resize(self.doc_len, max(2 * len(self.doc_len), top + 1))
        grouped: dict[str, tuple[list[int], list[float]]] = {}
        for row, own, context in items:
            for t, tf in self._terms(row, own, context, context_weight).items():
                g = grouped.get(t)
                if g is None:
                    g = grouped[t] = ([], [])
                g[0].append(row)
                g[1].append(tf)
        for t, (rows, tfs) in grouped.items():
            p = self.postings.get(t)
            if p is None:
                p = self.postings[t] = _Postings()
            p.extend(rows, tfs)

    def _terms(self, row: int, own: Counter, context: tuple[int, ...], context_weight: float) -> dict[str, float]:
        """A row's term frequencies (its own plus its context's, weighted), recorded with its length."""
        terms: dict[str, float] = dict(own)
        if context_weight > 0:
            for r in context:
                for t, tf in self.own_terms.get(r, {}).items():
                    terms[t] = terms.get(t, 0) + context_weight * tf
        self.doc_terms[row] = terms
        self.doc_len[row] = dl = sum(terms.values())
        self.total_len += dl
        return terms

    def remove(self, row: int) -> None:
        terms = self.doc_terms.pop(row, None)
        self.own_terms.pop(row, None)
        if terms is None:
            return
        self.total_len -= float(self.doc_len[row])
        self.doc_len[row] = 0.0
        for t in terms:
            p = self.postings.get(t)
            if p is not None:
                p.remove(row)
                if not p.live:
                    del self.postings[t]

    def rows_with(self, term: str) -> set[int]:
        p = self.postings.get(term)
        return p.row_set() if p is not None else set()

    def holders(self, term: str, allowed: np.ndarray) -> np.ndarray:
        """The rows of `allowed` whose postings hold `term` (in their own words or their context's)."""
        p = self.postings.get(term)
        if p is None:
            return np.zeros(0, dtype=np.int64)
        rows = p.rows[: p.n][p.tfs[: p.n] > 0].astype(np.int64)
        return rows[allowed[rows]]

    def idf(self, term: str) -> float:
        p = self.postings.get(term)
        return _idf(len(self.doc_terms), p.live if p is not None else 0)

    def corrections(self, query: str, allowed: np.ndarray | None = None) -> dict[str, tuple[str, ...]]:
        """The query's misspelt words, each with the stored words it may stand for: a word of
        letters only, at least SPELL_MIN_LEN long, whose term no row holds, which the model's
        vocabulary does not hold whole, and which is one edit away from a word of a row in
        `allowed` (all rows when None: another user's words are neither offered nor shown). Up to
        SPELL_ALTERNATIVES such words, those whose terms most of those rows hold first ("clen" may
        be "clean" or "chen": the rest of the query decides which row it finds). The first
        SPELL_MAX_WORDS words that might be misspelt are tried."""
        out: dict[str, tuple[str, ...]] = {}
        tried: set[str] = set()
        for w in _WORD.findall(query.lower()):
            if (
                len(w) < SPELL_MIN_LEN
                or w in tried
                or w in STOPWORDS
                or w in self.known_words
                or CJK.search(w)
                or term(w) in self.postings
            ):
                continue
            if len(tried) == SPELL_MAX_WORDS:
                break  # a pasted log or listing: its first words are tried, not every one
            tried.add(w)
            found: dict[str, tuple[int, str]] = {}  # term -> (rows holding it, a word with it)
            for c in _edits1(w):
                t = self.surface.get(c)
                p = self.postings.get(t) if t is not None else None
                if t is None or p is None or (t in found and c >= found[t][1]):
                    continue
                rows = p.rows[: p.n][p.tfs[: p.n] > 0]
                if allowed is not None:
                    rows = rows[rows < len(allowed)]
                    rows = rows[allowed[rows]]
                if len(rows):
                    found[t] = (len(rows), c)
            if found:
                # Ties go to the word first in order, so the choice does not depend on set order.
                best = sorted(found.values(), key=lambda x: (-x[0], x[1]))[:SPELL_ALTERNATIVES]
                out[w] = tuple(c for _, c in best)
        return out

    def query_terms(
        self, query: str, allowed: np.ndarray | None = None, corrections: dict[str, tuple[str, ...]] | None = None
    ) -> list[tuple[tuple[str, ...], int]]:
        """The query's distinct terms (tokenize(query=True)), each as (the terms it is read as,
        how often the query has it): itself, or for a misspelt word the terms of the stored words
        it may stand for (see corrections; `corrections`: theirs, when the caller has them)."""
        if corrections is None:
            corrections = self.corrections(query, allowed)
        fixed = {term(w): tuple(dict.fromkeys(term(c) for c in cs)) for w, cs in corrections.items()}
        return [(fixed.get(t, (t,)), qtf) for t, qtf in Counter(tokenize(query, query=True)).items()]

    def ideal_score(
        self, query: str, allowed: np.ndarray | None = None, terms: list[tuple[tuple[str, ...], int]] | None = None
    ) -> float:
        """The score of an average-length document holding each query term once: a per-query
        scale that, unlike the best hit's score, does not inflate a weak match to 1. `terms`:
        query_terms(query, allowed), when the caller has them already."""
        if terms is None:
            terms = self.query_terms(query, allowed)
        return sum(max(self.idf(t) for t in alts) * qtf for alts, qtf in terms)

    def scores(
        self, query: str, size: int, allowed: np.ndarray | None = None, k1: float | None = None, b: float | None = None
    ) -> np.ndarray:
        """BM25 score of every row below `size` (0 where no query term occurs or not allowed);
        k1 and b default to the index's own."""
        return self.match(query, size, allowed, k1, b)[0]

    def match(
        self,
        query: str,
        size: int,
        allowed: np.ndarray | None = None,
        k1: float | None = None,
        b: float | None = None,
        terms: list[tuple[tuple[str, ...], int]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(BM25 score, coverage, words held) of every row below `size`. Coverage is the share
        of the query's IDF mass that the row holds: 1.0 when it has every query term, and a term
        it only borrows from its context counts at the context weight. A term no row has counts
        with the highest IDF, so a query about something never stored covers little of anything.
        Words held: how many distinct query terms the row has, a borrowed one counting at the
        context weight (BM25's own evidence for the relevance floor in bm25 mode). `terms`:
        query_terms(query, allowed), when the caller has them already."""
        out = np.zeros(size)
        cover = np.zeros(size)
        held = np.zeros(size)
        n = len(self.doc_terms)
        if n == 0:
            return out, cover, held
        avgdl = self.total_len / n or 1.0
        k1 = self.k1 if k1 is None else k1
        b = self.b if b is None else b
        mass = 0.0
        for alts, qtf in self.query_terms(query, allowed) if terms is None else terms:
            found = [(t, p) for t in alts if (p := self.postings.get(t)) is not None]
            if not found:
                # About half the bigrams of a CJK question straddle two words and are in no text:
                # one no row has counts half, so a full match of its words still covers most of it.
                mass += _idf(n, 0) * qtf * (0.5 if CJK.match(alts[0]) else 1.0)
                continue
            # A misspelt word read as several stored words counts once per row: the best of them.
            slot = [self._term_match(p, _idf(n, p.live), qtf, size, k1, b, avgdl) for _, p in found]
            s, c, h = slot[0] if len(slot) == 1 else (np.maximum.reduce(x) for x in zip(*slot))
            mass += max(_idf(n, p.live) for _, p in found) * qtf
            out += s
            cover += c
            held += h
        if mass > 0:
            cover /= mass
        if allowed is not None:
            out[~allowed[:size]] = 0.0
            cover[~allowed[:size]] = 0.0
            held[~allowed[:size]] = 0.0
        return out, cover, held

    def _term_match(
        self, p: _Postings, idf: float, qtf: int, size: int, k1: float, b: float, avgdl: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One query term's (BM25 score, IDF held, held) per row below `size` (see match)."""
        rows, tf = p.rows[: p.n], p.tfs[: p.n]
        inside = rows < size
        rows, tf = rows[inside], tf[inside]
        s = idf * qtf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * self.doc_len[rows] / avgdl))
        return (
            np.bincount(rows, weights=s, minlength=size),
            np.bincount(rows, weights=idf * qtf * np.minimum(tf, 1.0), minlength=size),
            np.bincount(rows, weights=np.minimum(tf, 1.0), minlength=size),
        )

    def score(self, query: str, allowed: np.ndarray | None = None) -> dict[int, float]:
        """BM25 score per row for rows that share a term with the query."""
        size = len(self.doc_len) if allowed is None else len(allowed)
        arr = self.scores(query, size, allowed)
        return {int(r): float(arr[r]) for r in np.flatnonzero(arr > 0)}
