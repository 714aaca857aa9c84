"""The bounded vector search against a full scan, on the vectors of an existing store.

    python -m benchmarks.experiments.vector_search_bench STORE.duckdb [--queries 200] [--k 50]

Loads the store's memories into an index (as opening it does), encodes synthetic queries
with the real model, and times MemoryIndex.top_cosine (bounded above 20k rows) and a full
matrix-vector scan for the same queries, checking that both give the same top k. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=50)
    args = ap.parse_args(argv)
    from engram import Engram, Settings
    from engram.models.embedding import load_embedder
    from engram.search.vector_search import one_blas_thread, top_rows

    from ..engine_bench import sentence

    one_blas_thread()
    settings = Settings.from_env()
    emb = load_embedder(settings.model, settings.model_cache, settings.torch_threads)
    eng = Engram(args.store, settings=settings, embedder=emb)
    idx = eng.index
    rng = random.Random(5)
    queries = emb.embed_batch([sentence(rng).rstrip(".").split(" ", 2)[2] for _ in range(args.queries)])
    user = idx.users.names[int(np.bincount(idx.user[: idx.n][idx.alive[: idx.n]]).argmax())]
    mask = idx.mask(user)
    bounded, full, same = [], [], 0
    for q in queries:
        t = time.perf_counter()
        rows, _ = idx.top_cosine(q, mask, args.k)
        bounded.append(time.perf_counter() - t)
        t = time.perf_counter()
        s = idx.search[: idx.n] @ q
        cand = np.flatnonzero(mask)
        want = top_rows(s, cand, args.k)  # the engine's partial sort, over every row
        full.append(time.perf_counter() - t)
        same += set(rows.tolist()) == set(want.tolist())
    eng.close()
    out = {
        "memories": int(mask.sum()),
        "k": args.k,
        "queries": args.queries,
        "bounded": idx.basis is not None,
        "same_top_k": same,
        "bounded_p50_ms": statistics.median(bounded) * 1000,
        "full_scan_p50_ms": statistics.median(full) * 1000,
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
