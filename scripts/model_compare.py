"""Encoding speed of several embedding models in one process, interleaved so all see the same load.

    python scripts/model_compare.py [--models all-MiniLM-L6-v2,all-mpnet-base-v2] [--queries 60] [--texts 64]

One query at a time (ms, p50/p90, one thread, as a recall encodes) and batches of --texts (ms per
text, as store_many encodes), through each model's backend in use (ONNX Runtime when it applies).
Uses ENGRAM_HOME's model cache, so the ONNX graphs exported there before are reused.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from embed_bench import text  # the same synthetic texts as embed_bench


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="all-MiniLM-L6-v2,all-mpnet-base-v2")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--texts", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)

    from engram.core.settings import Settings
    from engram.models.embedding import SentenceTransformerEmbedder

    settings = Settings.from_env()
    rng = random.Random(3)
    queries = [text(rng, 3, 12) for _ in range(a.queries)]
    texts = sorted((text(rng, 6, 30) for _ in range(a.texts)), key=len, reverse=True)
    out: dict = {"cpus": os.cpu_count(), "load_before": os.getloadavg()[0], "models": {}}
    models = {}
    for name in a.models.split(","):
        t = time.perf_counter()
        models[name] = SentenceTransformerEmbedder(name, settings.model_cache, threads=1)
        out["models"][name] = {
            "load_s": round(time.perf_counter() - t, 2),
            "backend": models[name].backend,
            "dim": models[name].dim,
        }
    lat: dict[str, list[float]] = {n: [] for n in models}
    for q in queries[:3]:
        for emb in models.values():
            emb._embed_one(q)
    for q in queries:
        for name, emb in models.items():
            t = time.perf_counter()
            emb._embed_one(q)
            lat[name].append((time.perf_counter() - t) * 1000)
    batch: dict[str, list[float]] = {n: [] for n in models}
    for r in range(a.rounds):
        names = list(models)
        for name in names[r % len(names) :] + names[: r % len(names)]:  # rotated order per round
            t = time.perf_counter()
            models[name].embed_batch(texts)
            batch[name].append((time.perf_counter() - t) * 1000 / len(texts))
    for name in models:
        xs = sorted(lat[name])
        out["models"][name].update(
            query_p50_ms=round(xs[len(xs) // 2], 1),
            query_p90_ms=round(xs[int(len(xs) * 0.9)], 1),
            batch_ms_per_text=round(statistics.median(batch[name]), 1),
        )
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
