"""The memory graph: a networkx view of the edges table (each memory's most similar peers).

Recall does not read it: graph expansion follows a hit's conversation neighbours and rare words
(search/links.py), as similarity edges only reshuffled what the query had ranked already
(benchmarks/RESULTS.md, issue 47). The edges are kept for the stats and the export."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import networkx as nx
import numpy as np

from engram.search.vector_search import top_rows


def nearest_edges(
    new_id: str, sims: np.ndarray, ids: list, candidates: np.ndarray, threshold: float, max_edges: int
) -> list[tuple[str, str, float]]:
    """Edges from a new memory to its most similar peers (sim >= threshold, at most max_edges)."""
    if max_edges <= 0 or not len(candidates):
        return []
    s = sims[candidates]
    keep = candidates[s >= threshold]
    if not len(keep):
        return []
    order = top_rows(sims, keep, max_edges)
    return [(new_id, ids[r], float(sims[r])) for r in order if ids[r] not in (None, new_id)]


def _add(g: nx.Graph, edges: Iterable[tuple[str, str, float]]) -> None:
    for a, b, w in edges:
        g.add_edge(a, b, weight=float(w))


class MemoryGraph:
    """The edges as a networkx graph. With `load` (the edges table), built on first use: recall
    never reads it, so a large store pays for it (4 s at 300k edges) only when its stats are asked.
    Until then writes need no mirroring, as the table already holds them when it is read."""

    def __init__(self, load: Callable[[], Iterable[tuple[str, str, float]]] | None = None) -> None:
        self._load = load
        self._g: nx.Graph | None = None if load is not None else nx.Graph()

    @property
    def g(self) -> nx.Graph:
        if self._g is None:
            g = nx.Graph()
            if self._load is not None:  # always: without a loader the graph is built empty at once
                _add(g, self._load())
            self._g = g
        return self._g

    def add_edges(self, edges: Iterable[tuple[str, str, float]], keep_existing: bool = False) -> None:
        """Mirror edges just written to the table. keep_existing: a pair already linked keeps its
        weight (a chunk's link to the next, written before the fill gives the chunk its edges)."""
        if self._g is not None:
            g = self._g
            _add(g, [e for e in edges if not g.has_edge(e[0], e[1])] if keep_existing else edges)

    def set_edges(self, edges: Iterable[tuple[str, str, float | None]]) -> None:
        """Mirror changed pairs: (a, b, weight), or (a, b, None) for a pair no longer linked."""
        if self._g is not None:
            for a, b, w in edges:
                if w is not None:
                    self._g.add_edge(a, b, weight=float(w))
                elif self._g.has_edge(a, b):
                    self._g.remove_edge(a, b)

    def remove_nodes(self, ids: Iterable[str]) -> None:
        if self._g is not None:
            self._g.remove_nodes_from([i for i in ids if i in self._g])

    def edge_count(self) -> int:
        return self.g.number_of_edges()
