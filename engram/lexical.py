"""Tokenising and an incrementally maintained BM25 index (postings in memory)."""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache

import numpy as np
import snowballstemmer

_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_stemmer = snowballstemmer.stemmer("english")

STOPWORDS = frozenset("""
a an and are as at be been but by can could did do does for from had has have he her hers him his
how i if in into is it its me my of on or our she so that the their them then there these they this
those to was we were what when where which who whom why will with would you your yours am about
""".split())


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word)


def tokenize(text: str) -> list[str]:
    """Lower-cased, stemmed word tokens without stopwords (Porter-style, as DuckDB FTS does)."""
    out = []
    for w in _TOKEN.findall(text.lower()):
        w = w.replace("’", "'")
        if w.endswith("'s"):
            w = w[:-2]
        if w in STOPWORDS or not w:
            continue
        out.append(_stem(w))
    return out


class BM25Index:
    """Okapi BM25 over rows of the derived index. Writes are O(terms); queries read only
    the postings of the query's terms, so cost does not grow with the corpus the way a
    full scan does."""

    def __init__(self, k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.postings: dict[str, dict[int, int]] = {}
        self.doc_terms: dict[int, Counter] = {}
        self.own_terms: dict[int, Counter] = {}
        self.doc_len: dict[int, int] = {}
        self.total_len = 0

    def __len__(self) -> int:
        return len(self.doc_terms)

    def add(self, row: int, text: str, context: tuple[int, ...] = (), context_weight: float = 0.0) -> None:
        """Index a row's text; the own words of `context` rows count too, each at context_weight."""
        self._add_terms(row, Counter(tokenize(text)), context, context_weight)

    def set_context(self, row: int, context: tuple[int, ...], context_weight: float) -> None:
        """Re-index a row with another context (one of its context rows was removed)."""
        own = self.own_terms.get(row)
        if own is not None:
            self._add_terms(row, own, context, context_weight)

    def _add_terms(self, row: int, own: Counter, context: tuple[int, ...], context_weight: float) -> None:
        if row in self.doc_terms:
            self.remove(row)
        self.own_terms[row] = own
        terms: Counter = Counter(own)
        if context_weight > 0:
            for r in context:
                for t, tf in self.own_terms.get(r, {}).items():
                    terms[t] += context_weight * tf
        self.doc_terms[row] = terms
        self.doc_len[row] = sum(terms.values())
        self.total_len += self.doc_len[row]
        for t, tf in terms.items():
            self.postings.setdefault(t, {})[row] = tf

    def remove(self, row: int) -> None:
        terms = self.doc_terms.pop(row, None)
        self.own_terms.pop(row, None)
        if terms is None:
            return
        self.total_len -= self.doc_len.pop(row)
        for t in terms:
            p = self.postings.get(t)
            if p is not None:
                p.pop(row, None)
                if not p:
                    del self.postings[t]

    def idf(self, term: str) -> float:
        n = len(self.doc_terms)
        df = len(self.postings.get(term, ()))
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def ideal_score(self, query: str) -> float:
        """The score of an average-length document holding each query term once: a per-query
        scale that, unlike the best hit's score, does not inflate a weak match to 1."""
        return sum(self.idf(t) * qtf for t, qtf in Counter(tokenize(query)).items())

    def score(self, query: str, allowed: np.ndarray | None = None) -> dict[int, float]:
        """BM25 score per row for rows that share a term with the query.

        allowed: optional boolean mask over rows; rows outside it are skipped.
        """
        n = len(self.doc_terms)
        if n == 0:
            return {}
        avgdl = self.total_len / n if n else 1.0
        k1, b = self.k1, self.b
        scores: dict[int, float] = {}
        for t, qtf in Counter(tokenize(query)).items():
            p = self.postings.get(t)
            if not p:
                continue
            df = len(p)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            for row, tf in p.items():
                if allowed is not None and not allowed[row]:
                    continue
                s = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * self.doc_len[row] / avgdl))
                scores[row] = scores.get(row, 0.0) + s * qtf
        return scores

