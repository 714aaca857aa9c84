"""Recall at scale on PostgreSQL and DuckDB, and pgvector's in-database top-k beside the derived
index (issue 16, item 5).

For each size, the same synthetic memories (random sentences over a fixed vocabulary; their
vectors from the deterministic hashed-words embedder at 384 dimensions, so near neighbours share
words) are bulk-loaded into a private PostgreSQL (binary COPY) and a DuckDB file. An Engram opens
each (the derived index is built from the rows, as every server does at start) and answers the
same queries: recall p50/p95 (hybrid, limit 10, no reinforcement). Then pgvector's alternative
on the same rows: an HNSW index (inner product) built in the database, queried with the user
filter and `SET hnsw.iterative_scan = relaxed_order` (pgvector 0.8) so the filter does not
empty the top 10; its latency and the overlap of its top 10 with the derived index's exact
vector top 10 under the same filter.

    python -m benchmarks.pg_scale --sizes 100000,1000000
    python -m benchmarks.pg_scale --sizes 100000 --duckdb-only --turns   # the memories as chat turns

Every figure comes from one run; the machine is shared, so compare within a run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from benchmarks.multiserver import WORDS, percentile
from benchmarks.pgserver import private_postgres
from engram import Engram, Settings
from engram.models.embedding import FakeEmbedder
from engram.search.vector_search import top_rows

DIM = 384
USERS = 10  # memories are spread over users: every query filters on one
START = datetime(2026, 1, 1, tzinfo=UTC)


def synthetic(n: int, seed: int) -> tuple[list[str], list[str], np.ndarray]:
    """n (id, content, vector) rows: random 8-word sentences and their hashed-words vectors."""
    rng = random.Random(seed)
    return with_vectors([" ".join(rng.sample(WORDS, 8)) for _ in range(n)])


def with_vectors(texts: list[str]) -> tuple[list[str], list[str], np.ndarray]:
    """(ids, texts, hashed-words vectors) rows for these texts."""
    emb = FakeEmbedder(DIM, "fake-hash-384")
    n = len(texts)
    vecs = np.empty((n, DIM), dtype=np.float32)
    for i in range(0, n, 10_000):
        vecs[i : i + 10_000] = emb.embed_batch(texts[i : i + 10_000])
    return [f"m{i:08d}" for i in range(n)], texts, vecs


TURNS_PER_CONVERSATION = 20


def rows(ids, texts, vecs, start: int = 0, turns: bool = False):
    """Row tuples; `start`: the position of the first one (times and users follow it). turns:
    each user's memories are turns of conversations, TURNS_PER_CONVERSATION in each (a second
    apart, so each is searched with the turns before it), as a chat import stores them."""
    for i, (mid, text) in enumerate(zip(ids, texts), start):
        at = (START + timedelta(seconds=i)).replace(tzinfo=None)
        user = f"user{i % USERS}"
        conversation = f"{user}-c{i // USERS // TURNS_PER_CONVERSATION}" if turns else None
        yield mid, text, "fact", 0.5, 0, at, user, "active", at, False, at, conversation, vecs[i - start]


COLUMNS = (
    "id, content, memory_type, importance, recall_count, created_at, user_id, status, "
    "valid_from, pinned, updated_at, conversation, embedding"
)


def load_postgres(url: str, ids, texts, vecs, emb: FakeEmbedder, turns: bool = False) -> float:
    import psycopg
    from pgvector.psycopg import register_vector

    from engram.store.pg import PgStore

    PgStore(url, START).close()  # the schema
    t0 = time.perf_counter()
    with psycopg.connect(url) as con:
        register_vector(con)
        con.execute("SET session_replication_role = replica")  # no change-feed rows for a bulk load
        with con.cursor() as cur, cur.copy(f"COPY memories ({COLUMNS}) FROM STDIN WITH (FORMAT BINARY)") as cp:
            cp.set_types(
                [
                    "text",
                    "text",
                    "text",
                    "float8",
                    "int4",
                    "timestamp",
                    "text",
                    "text",
                    "timestamp",
                    "bool",
                    "timestamp",
                    "text",
                    "vector",
                ]
            )
            for r in rows(ids, texts, vecs, turns=turns):
                cp.write_row(r)
        con.execute(
            "INSERT INTO meta VALUES ('model_name', %s), ('model_dim', %s) ON CONFLICT (key) "
            "DO UPDATE SET value = excluded.value",
            [emb.name, str(emb.dim)],
        )
        con.commit()
        con.autocommit = True
        con.execute("VACUUM ANALYZE memories")
    return time.perf_counter() - t0


def load_duckdb(path: Path, ids, texts, vecs, emb: FakeEmbedder, turns: bool = False) -> float:
    import duckdb

    from engram.store.db import Store

    Store(str(path), START).close()  # the schema
    t0 = time.perf_counter()
    con = duckdb.connect(str(path))
    step = 50_000
    for i in range(0, len(ids), step):
        part = list(rows(ids[i : i + step], texts[i : i + step], vecs[i : i + step], i, turns))
        cols = [list(c) for c in zip(*part)]
        cols[-1] = [v.tobytes() for v in cols[-1]]
        con.execute(
            f"INSERT INTO memories ({COLUMNS}) SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
            "unnest(?::VARCHAR[]), unnest(?::DOUBLE[]), unnest(?::INTEGER[]), unnest(?::TIMESTAMP[]), "
            "unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::TIMESTAMP[]), unnest(?::BOOLEAN[]), "
            "unnest(?::TIMESTAMP[]), unnest(?::VARCHAR[]), unnest(?::BLOB[])",
            cols,
        )
    con.execute("INSERT OR REPLACE INTO meta VALUES ('model_name', ?), ('model_dim', ?)", [emb.name, str(emb.dim)])
    con.execute("CHECKPOINT")
    con.close()
    return time.perf_counter() - t0


def queries(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed + 1)
    return [(" ".join(rng.sample(WORDS, 3)), f"user{rng.randrange(USERS)}") for _ in range(n)]


def time_recalls(eng: Engram, qs) -> tuple[list[float], list[list[str]]]:
    lat, out = [], []
    for q, user in qs:
        t0 = time.perf_counter()
        hits = eng.recall(q, limit=10, user_id=user, reinforce=False)
        lat.append((time.perf_counter() - t0) * 1000)
        out.append([h.memory.id for h in hits])
    return lat, out


def exact_vector_top10(eng: Engram, emb: FakeEmbedder, qs) -> list[tuple[list[str], dict[str, float], float]]:
    """The derived index's exact top 10 by inner product under the user filter, each with the
    scores of that user's rows and the 10th best score (hashed-word vectors tie often)."""
    idx = eng.index
    out = []
    for q, user in qs:
        rows_ = np.flatnonzero(idx.mask(user))
        qv = emb.embed_query(q)
        scores = np.full(idx.n, -np.inf, dtype=np.float32)
        scores[rows_] = idx.vectors[rows_] @ qv
        top = top_rows(scores, rows_, 10)
        out.append(([idx.ids[r] for r in top], {idx.ids[r]: float(scores[r]) for r in rows_}, float(scores[top[-1]])))
    return out


def recall_at_10(got: list[list[str]], exact) -> float:
    """Share of the returned ids that belong in an exact top 10: score at least the 10th best
    (so a tie at the boundary, broken another way, still counts)."""
    return float(
        np.mean(
            [sum(1 for i in g if scores.get(i, -np.inf) >= kth - 1e-5) / 10 for g, (_, scores, kth) in zip(got, exact)]
        )
    )


def hnsw(url: str, emb: FakeEmbedder, qs, ef_search: int) -> dict:
    import psycopg
    from pgvector.psycopg import register_vector

    with psycopg.connect(url, autocommit=True) as con:
        register_vector(con)
        con.execute("SET maintenance_work_mem = '2GB'")
        t0 = time.perf_counter()
        con.execute(
            f"CREATE INDEX IF NOT EXISTS memories_hnsw ON memories USING hnsw "
            f"((embedding::vector({DIM})) vector_ip_ops)"
        )
        build_s = time.perf_counter() - t0
        con.execute("SET hnsw.iterative_scan = relaxed_order")
        con.execute(f"SET hnsw.ef_search = {int(ef_search)}")
        lat, out = [], []
        for q, user in qs:
            qv = emb.embed_query(q)
            t0 = time.perf_counter()
            got = con.execute(
                f"SELECT id FROM memories WHERE user_id = %s AND status = 'active' "
                f"ORDER BY embedding::vector({DIM}) <#> %s::vector({DIM}) LIMIT 10",
                [user, qv],
            ).fetchall()
            lat.append((time.perf_counter() - t0) * 1000)
            out.append([r[0] for r in got])
        plan = "\n".join(
            r[0]
            for r in con.execute(
                f"EXPLAIN SELECT id FROM memories WHERE user_id = 'user0' AND status = 'active' "
                f"ORDER BY embedding::vector({DIM}) <#> %s::vector({DIM}) LIMIT 10",
                [emb.embed_query("a b")],
            ).fetchall()
        )
    return {"build_s": round(build_s, 1), "latency_ms": lat, "top10": out, "uses_index": "memories_hnsw" in plan}


def overlap(a: list[list[str]], b: list[list[str]]) -> float:
    return float(np.mean([len(set(x) & set(y)) / max(1, len(y)) for x, y in zip(a, b)]))


def one_size(
    n: int, url: str | None, work: Path, nq: int, seed: int, ef_search: int, with_hnsw: bool, turns: bool = False
) -> dict:
    """One size's figures; url None: DuckDB only (recall latency before and after a change to the engine)."""
    emb = FakeEmbedder(DIM, "fake-hash-384")
    t0 = time.perf_counter()
    ids, texts, vecs = synthetic(n, seed)
    gen_s = time.perf_counter() - t0
    qs = queries(nq, seed)
    # The ENGRAM_* variables of the run apply (ENGRAM_LATE_INTERACTION=0 ...); the home is its own.
    settings = Settings.from_env({**os.environ, "ENGRAM_HOME": str(work / "home")})
    res: dict = {"memories": n, "queries": nq, "generate_s": round(gen_s, 1), "turns": turns}
    duck_path = work / f"scale{n}.duckdb"
    res["duckdb_load_s"] = round(load_duckdb(duck_path, ids, texts, vecs, emb, turns), 1)
    if url is not None:
        res["postgres_load_s"] = round(load_postgres(url, ids, texts, vecs, emb, turns), 1)
    del texts, vecs
    out = {}
    for backend, path in (("duckdb", str(duck_path)), ("postgres", url)):
        if path is None:
            continue
        t0 = time.perf_counter()
        eng = Engram(path, settings=settings, embedder=emb)
        open_s = time.perf_counter() - t0
        if turns and settings.late_interaction:
            # Turns bulk-loaded here have no token vectors yet; the daemon fills them in after it
            # starts (engine/token_vectors.py). Timed recalls are those of a store that has them.
            t0 = time.perf_counter()
            res[f"{backend}_token_vectors_filled"] = eng.fill_token_vectors()
            res[f"{backend}_token_vectors_fill_s"] = round(time.perf_counter() - t0, 1)
        time_recalls(eng, qs[:20])  # warm
        lat, top = time_recalls(eng, qs)
        out[backend] = top
        res[backend] = {
            "open_s": round(open_s, 1),
            "recall_p50_ms": round(percentile(lat, 50), 2),
            "recall_p95_ms": round(percentile(lat, 95), 2),
        }
        if backend == "postgres":
            exact = exact_vector_top10(eng, emb, qs)
        eng.close()
    if url is None:
        return res
    res["same_hits_both_backends"] = round(overlap(out["postgres"], out["duckdb"]), 4)
    if not with_hnsw:
        return res
    h = hnsw(url, emb, qs, ef_search)
    res["pgvector_hnsw"] = {
        "build_s": h["build_s"],
        "ef_search": ef_search,
        "uses_index": h["uses_index"],
        "topk_p50_ms": round(percentile(h["latency_ms"], 50), 2),
        "topk_p95_ms": round(percentile(h["latency_ms"], 95), 2),
        "overlap_top10_with_exact": round(overlap(h["top10"], [e[0] for e in exact]), 4),
        "recall_at_10_ties_counted": round(recall_at_10(h["top10"], exact), 4),
        "full_top10": round(float(np.mean([len(t) == 10 for t in h["top10"]])), 4),
    }
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.pg_scale", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", default="100000,1000000")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--ef-search", type=int, default=40, help="hnsw.ef_search (pgvector's default is 40)")
    p.add_argument("--seed", type=int, default=16)
    p.add_argument(
        "--hnsw-max", type=int, default=10**9, help="build and query the pgvector HNSW index only at sizes up to this"
    )
    p.add_argument("--duckdb-only", action="store_true", help="no PostgreSQL: the DuckDB store's recall alone")
    p.add_argument(
        "--turns",
        action="store_true",
        help=f"store the memories as turns of conversations ({TURNS_PER_CONVERSATION} in each); "
        "with late interaction on, their token vectors are filled in before recall is timed",
    )
    a = p.parse_args(argv)
    results = []
    work = Path(tempfile.mkdtemp(prefix="egscale", dir="/tmp"))
    try:
        for n in (int(x) for x in a.sizes.split(",")):
            if a.duckdb_only:
                results.append(one_size(n, None, work, a.queries, a.seed, a.ef_search, False, a.turns))
            else:
                with private_postgres("engram_scale") as url:  # a fresh server per size: nothing cached
                    results.append(one_size(n, url, work, a.queries, a.seed, a.ef_search, n <= a.hnsw_max, a.turns))
            print(json.dumps(results[-1]), flush=True)
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(work)
    print(json.dumps({"date": datetime.now(UTC).isoformat(timespec="seconds"), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
