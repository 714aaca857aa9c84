"""Top-k by dot product, the math of the index's vector search (engram.search.memory_index holds
the vectors and calls it): the best rows of a set, and the bounded search that finds the same rows
without reading every vector in full. Pure functions of arrays.

The bounded search: each row is kept projected onto a subspace of a quarter of the dimensions (its
top principal directions), with the norm the projection leaves out. Scored against its projection
(a quarter of the bytes), a row's dot product with q can gain at most |q⊥|·|v⊥| from the rest of
the vector (Cauchy–Schwarz); exact scores are computed only for the rows whose bound reaches the
k-th best exact score among the most promising. The answer is the full scan's.
"""

from __future__ import annotations

import numpy as np


def one_blas_thread() -> None:
    """Run numpy's BLAS on one thread. The index's products are matrix-vector: a second thread
    gains nothing, and waiting for it while another process holds that core cost about 8 ms per
    product here (measured: a 100k x 96 product took 8 ms on two threads, 1.4 ms on one)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - installed with engram
        return
    threadpool_limits(1, user_api="blas")


def top_rows(scores: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    """The k of `rows` with the highest scores (indexed by row), best first."""
    return best(rows, scores[rows], k)[0]


def best(rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k (row, score) pairs with the highest scores (one per row), best first, ties by row;
    a partial sort, as rows can number 100k."""
    top = np.argpartition(-scores, k)[:k] if len(rows) > k else np.arange(len(rows))
    top = top[np.lexsort((rows[top], -scores[top]))]
    return rows[top], scores[top]


def principal_basis(vectors: np.ndarray, dims: int) -> np.ndarray:
    """The subspace: the top `dims` principal directions of `vectors`, one a column."""
    x = vectors.astype(np.float64)
    w, v = np.linalg.eigh(x.T @ x)
    return np.ascontiguousarray(v[:, np.argsort(-w)[:dims]], dtype=np.float32)


def project(full: np.ndarray, basis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of vectors projected onto `basis`, transposed (a column per row, as the index keeps
    them), and the norm each projection leaves out."""
    p = full @ basis
    left = np.einsum("ij,ij->i", full, full) - np.einsum("ij,ij->i", p, p)
    return p.T, np.sqrt(np.maximum(left, 0.0))


def score_bounds(q: np.ndarray, basis: np.ndarray, proj: np.ndarray, resid: np.ndarray) -> np.ndarray:
    """An upper bound of each row's dot product with q, from its projection and residual norm."""
    qp = q @ basis
    q_rest = float(np.sqrt(max(float(q @ q) - float(qp @ qp), 0.0)))
    bound = qp @ proj
    bound += q_rest * resid
    return bound


def bounded_best(
    full: np.ndarray, q: np.ndarray, mask: np.ndarray, bound: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The k rows of `mask` with the highest dot product with q, best first, and those exact
    values, reading in full only the rows whose bound can reach the k-th best."""
    b = np.where(mask, bound, -np.inf)
    first = np.argpartition(-b, 4 * k)[: 4 * k]
    kth = np.partition(full[first] @ q, -k)[-k]
    # The tolerance covers float32 rounding in the two ways of computing a score.
    cand = np.flatnonzero(b >= kth - 1e-4)
    return best(cand, full[cand] @ q, k)
