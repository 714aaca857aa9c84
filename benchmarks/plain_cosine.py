"""The bare model as a baseline (issue 40): one vector per stored text from the engine's own
embedding model, truncated where the model truncates (all-MiniLM-L6-v2: 256 word pieces), and
plain cosine top-k. No chunking, context, decay, BM25, floor or cue: what engram adds on top of
the model is always measured against this.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

MODE = "plain"


class PlainCosine:
    """Texts embedded once (each whole, as one vector); search() ranks their keys by cosine."""

    def __init__(self, embedder, texts: Sequence[str], keys: Sequence[Hashable]):
        if len(texts) != len(keys):
            raise ValueError("one key per text")
        self.keys = list(keys)
        vecs = np.asarray(embedder.embed_batch(list(texts)), dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        self.vecs = vecs / np.where(norms > 0, norms, 1.0)
        self.embedder = embedder

    def search(self, query: str, k: int) -> list[Hashable]:
        """The keys of the k texts closest to the query, best first (ties by position)."""
        if not self.keys:
            return []
        q = np.asarray(self.embedder.embed_query(query), dtype=np.float32)
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        cos = self.vecs @ q
        top = np.lexsort((np.arange(len(cos)), -cos))[:k]
        return [self.keys[i] for i in top]
