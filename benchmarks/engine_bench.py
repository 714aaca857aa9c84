"""Store and recall latency at 1k, 10k and 100k synthetic memories, and bulk ingest throughput.

    python -m benchmarks.engine_bench [--sizes 1000,10000,100000] [--samples 200] [--out FILE]
    python -m benchmarks.engine_bench --from-db big.duckdb   # measure on a copy of an existing store
    python -m benchmarks.engine_bench --from-db big.duckdb --sizes 100000 --handoffs 100
        # also recall_context (what recall_memory and get_context run) with 100 handoffs stored

Uses the real embedding model and a DuckDB file in a temporary folder, end to end
(the query's embedding included). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SYL = [
    "ka",
    "lo",
    "mi",
    "ren",
    "tor",
    "vak",
    "zu",
    "bel",
    "dra",
    "fin",
    "gor",
    "hul",
    "jex",
    "nor",
    "pim",
    "quo",
    "sal",
    "tev",
    "ulm",
    "wix",
    "yor",
    "bra",
    "cli",
    "dun",
]
KINDS = ["service", "library", "pipeline", "dashboard", "cluster", "team", "customer", "script"]
FACTS = [
    "runs on {n} replicas in {env}",
    "is owned by {person}",
    "logs to {sink}",
    "was upgraded to version {n}.{m}",
    "retries failed jobs {n} times",
    "is deployed every {day}",
    "stores its data in {store}",
    "alerts {person} when latency passes {n} ms",
    "depends on the {other} {kind2}",
    "uses {lang} and is tested with {tool}",
]
VALUES = dict(
    env=["staging", "production", "eu-west", "us-east"],
    person=["Maria", "Kenji", "Aisha", "Tom", "Priya", "Lars", "Chen", "Olu"],
    sink=["Loki", "Datadog", "stdout", "S3", "Elastic"],
    day=["Monday", "Tuesday", "night", "weekend", "sprint"],
    store=["Postgres", "Redis", "DuckDB", "S3", "Cassandra"],
    lang=["Python", "Go", "Rust", "TypeScript", "Java"],
    tool=["pytest", "go test", "cargo test", "vitest", "JUnit"],
)


def name(rng: random.Random) -> str:
    return "".join(rng.choice(SYL) for _ in range(rng.randint(2, 3))).capitalize()


def sentence(rng: random.Random) -> str:
    kind = rng.choice(KINDS)
    tpl = rng.choice(FACTS)
    vals = {k: rng.choice(v) for k, v in VALUES.items()}
    text = tpl.format(n=rng.randint(2, 90), m=rng.randint(0, 9), other=name(rng), kind2=rng.choice(KINDS), **vals)
    return f"The {name(rng)} {kind} {text}."


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))] * 1000


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--from-db",
        default=None,
        help="start from a copy of this store (e.g. 100k memories built by benchmarks.reliability)",
    )
    ap.add_argument(
        "--handoffs",
        type=int,
        default=0,
        help="after the last size, store this many handoffs and time recall_context too",
    )
    args = ap.parse_args(argv)
    from engram import Engram, Settings
    from engram.models.embedding import load_embedder

    rng = random.Random(7)
    tmp = Path(tempfile.mkdtemp(prefix="engram-bench-"))
    settings = Settings.from_env({"ENGRAM_HOME": str(tmp)})
    emb = load_embedder(settings.model, threads=settings.torch_threads)
    if args.from_db:
        import shutil

        shutil.copy(args.from_db, tmp / "bench.duckdb")
    t = time.perf_counter()
    eng = Engram(tmp / "bench.duckdb", settings=settings, embedder=emb)
    print(
        json.dumps(
            {
                "opened_memories": len(eng.index),
                "open_s": time.perf_counter() - t,
                "backend": getattr(emb, "backend", "torch"),
            }
        ),
        flush=True,
    )
    rows: list[dict] = []
    ingested, ingest_s = 0, 0.0
    for size in [int(s) for s in args.sizes.split(",")]:
        while len(eng.index) < size:
            batch = [dict(content=sentence(rng)) for _ in range(min(256, size - len(eng.index)))]
            t = time.perf_counter()
            eng.store_many(batch)
            ingest_s += time.perf_counter() - t
            ingested += len(batch)
        store_t, recall_t = [], []
        for _ in range(args.samples):
            text = sentence(rng)
            t = time.perf_counter()
            eng.store(text)
            store_t.append(time.perf_counter() - t)
            q = sentence(rng).rstrip(".").split(" ", 2)[2]  # a fact phrased without its subject
            t = time.perf_counter()
            eng.recall(q, limit=10)
            recall_t.append(time.perf_counter() - t)
        row = {
            "memories": len(eng.index),
            "store_p50_ms": pct(store_t, 50),
            "store_p95_ms": pct(store_t, 95),
            "recall_p50_ms": pct(recall_t, 50),
            "recall_p95_ms": pct(recall_t, 95),
            "ingest_per_s": ingested / ingest_s if ingest_s else None,
            "ingested": ingested,
            "db_mb": sum(p.stat().st_size for p in tmp.glob("bench.duckdb*")) / 1e6,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.handoffs and rows:
        # recall_context pins a relevant handoff: with handoffs stored, the path that ranked twice
        # (hits, then the handoffs alone) before issue 24 and ranks once since.
        for _ in range(args.handoffs):
            eng.handoff(sentence(rng), next_steps=[sentence(rng)])
        context_t = []
        for _ in range(args.samples):
            q = sentence(rng).rstrip(".").split(" ", 2)[2]
            t = time.perf_counter()
            eng.recall_context(q, limit=10)
            context_t.append(time.perf_counter() - t)
        rows[-1].update(
            handoffs=args.handoffs, recall_context_p50_ms=pct(context_t, 50), recall_context_p95_ms=pct(context_t, 95)
        )
        print(json.dumps(rows[-1]), flush=True)
    eng.close()
    print("\n| memories | store p50 | store p95 | recall p50 | recall p95 | bulk ingest |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ingest = f"{r['ingest_per_s']:.0f}/s" if r["ingest_per_s"] else "-"
        print(
            f"| {r['memories']:,} | {r['store_p50_ms']:.1f} ms | {r['store_p95_ms']:.1f} ms | "
            f"{r['recall_p50_ms']:.1f} ms | {r['recall_p95_ms']:.1f} ms | {ingest} |"
        )
    result = {
        "rows": rows,
        "model": emb.name,
        "backend": getattr(emb, "backend", "torch"),
        "threads": settings.torch_threads,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
