"""PostgreSQL full-text search beside engram's derived BM25: the lexical side of in-database
retrieval (issue 16), on quality and on latency.

What an in-database design would run for the lexical side: a generated `tsvector` column per
text-search configuration ('simple': lower-cased words; 'english': stop words dropped, Snowball
stems), a GIN index on each, and a query that is the OR of the question's words (plainto_tsquery
ANDs them, and a question's words are almost never all in one memory), ranked by ts_rank_cd,
with the user filter in the same SQL. The hybrid in the database fuses that ranking with exact
cosine order under the same filter by reciprocal rank fusion (k = 60, the top 50 of each).

1. LoCoMo (all ten conversations, categories 1-4, benchmarks/locomo's loading, ingest and
   metrics) stored through an Engram on a private PostgreSQL with the real model, so write-time
   resolution and the rows are the harness's own; every question is then asked of engram (bm25
   and hybrid) and of the database (FTS per configuration, and the fused hybrid) over the same
   rows.
2. The labelled agent-memory set (benchmarks/recall_eval's loading and storing) the same way:
   Hit@1 / Hit@3, precision and unrelated memories returned (benchmarks/precision.py) per kind,
   Chinese, typo and exact included; for `none`, the share of queries returning nothing.
3. Latency at --size memories: text drawn word by word from LoCoMo's own word frequencies (so
   the GIN posting lists have a natural, skewed distribution; lengths as LoCoMo's turns), bulk
   loaded by benchmarks.pg_scale's loader; the time to add each generated column and build its
   GIN index; then LoCoMo's questions as queries, one user's memories each: FTS p50/p95 beside
   engram's bm25 recall on the same rows in the same run.

    python -m benchmarks.pg_fts [--size 100000] [--queries 200] [--parts locomo,agent,latency]

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
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.locomo.data import CATEGORIES, SCORED_CATEGORIES, load
from benchmarks.locomo.metrics import aggregate, percentile, score_question
from benchmarks.locomo.run import RECALL_LIMIT, _dialog_ids, _ingest, default_data_path, user_for
from benchmarks.pg_scale import START, USERS, load_postgres, with_vectors
from benchmarks.pgserver import private_postgres

CONFIGS = ("simple", "english")
PARTS = ("locomo", "agent", "latency")
RRF_K = 60  # reciprocal rank fusion's usual constant
RRF_DEPTH = 50  # how many of each ranking the fusion reads


def or_of_lexemes(lexemes_sql: str) -> str:
    """SQL for the tsquery that is the OR of the lexemes in the text[] `lexemes_sql`, or NULL
    when there are none. Each lexeme is quoted (a backslash and a quote escaped, as tsquery's
    input syntax wants), so no lexeme can act as an operator (&, |, !, <->, :*, parentheses)."""
    return (
        "(SELECT string_agg('''' || replace(replace(l, '\\', '\\\\'), '''', '''''') || '''', ' | ')"
        f"::tsquery FROM unnest({lexemes_sql}) AS l WHERE l <> '')"
    )


# The question's lexemes come from the configuration that made the rows' tsvector (its parser,
# stop words and stems), so "Fly.io" or "3.13" stay one lexeme on both sides; the question is a
# bound parameter, never part of the SQL text.
OR_TSQUERY = or_of_lexemes("tsvector_to_array(to_tsvector(%(cfg)s::regconfig, %(q)s))")


def column(cfg: str) -> str:
    if cfg not in CONFIGS:
        raise ValueError(f"text-search configuration must be one of {', '.join(CONFIGS)}; got {cfg!r}")
    return f"fts_{cfg}"


def add_fts(con, cfg: str) -> dict[str, float]:
    """Add the generated tsvector column for `cfg` and its GIN index; the seconds each took."""
    col = column(cfg)
    t0 = time.perf_counter()
    con.execute(
        f"ALTER TABLE memories ADD COLUMN {col} tsvector GENERATED ALWAYS AS (to_tsvector('{cfg}', content)) STORED"
    )
    added = time.perf_counter() - t0
    t0 = time.perf_counter()
    con.execute(f"CREATE INDEX memories_{col} ON memories USING gin ({col})")
    return {"column_s": round(added, 1), "gin_s": round(time.perf_counter() - t0, 1)}


def fts_sql(cfg: str) -> str:
    col = column(cfg)
    return (
        f"SELECT m.id, m.provenance FROM memories m, {OR_TSQUERY} AS q(tq) "
        f"WHERE m.user_id = %(user)s AND m.status = 'active' AND m.{col} @@ q.tq "
        f"ORDER BY ts_rank_cd(m.{col}, q.tq) DESC, m.id LIMIT %(limit)s"
    )


VECTOR_SQL = (
    "SELECT m.id, m.provenance FROM memories m WHERE m.user_id = %(user)s AND m.status = 'active' "
    "ORDER BY m.embedding <#> %(vec)s::vector, m.id LIMIT %(limit)s"
)


def hybrid_sql(cfg: str) -> str:
    """FTS rank and exact cosine order under the same filter, fused by reciprocal rank."""
    col = column(cfg)
    return (
        f"WITH q AS (SELECT {OR_TSQUERY} AS tq), "
        f"lex AS (SELECT m.id, row_number() OVER (ORDER BY ts_rank_cd(m.{col}, q.tq) DESC, m.id) AS r "
        f"  FROM memories m, q WHERE m.user_id = %(user)s AND m.status = 'active' AND m.{col} @@ q.tq "
        f"  ORDER BY r LIMIT {RRF_DEPTH}), "
        f"vec AS (SELECT m.id, row_number() OVER (ORDER BY m.embedding <#> %(vec)s::vector, m.id) AS r "
        f"  FROM memories m WHERE m.user_id = %(user)s AND m.status = 'active' ORDER BY r LIMIT {RRF_DEPTH}), "
        f"fused AS (SELECT id, sum(1.0 / ({RRF_K} + r)) AS s FROM "
        f"  (SELECT id, r FROM lex UNION ALL SELECT id, r FROM vec) u GROUP BY id) "
        f"SELECT m.id, m.provenance FROM fused JOIN memories m USING (id) "
        f"ORDER BY fused.s DESC, m.id LIMIT %(limit)s"
    )


def fts(con, cfg: str, query: str, user: str, limit: int = RECALL_LIMIT) -> list[tuple[str, list]]:
    return con.execute(fts_sql(cfg), {"cfg": cfg, "q": query, "user": user, "limit": limit}).fetchall()


def pg_hybrid(con, cfg: str, query: str, qvec, user: str, limit: int = RECALL_LIMIT) -> list[tuple[str, list]]:
    return con.execute(hybrid_sql(cfg), {"cfg": cfg, "q": query, "vec": qvec, "user": user, "limit": limit}).fetchall()


def engram_ask(eng, mode: str):
    """ask(query, user) -> [(id, provenance)] through engram's recall in `mode`."""
    return lambda q, user: [
        (h.memory.id, h.memory.provenance)
        for h in eng.recall(q, limit=RECALL_LIMIT, user_id=user, reinforce=False, mode=mode)
    ]


def methods(eng, con, embedder):
    """{name: ask(query, user) -> [(id, provenance)]}: engram's modes and the database's."""
    out = {"engram_bm25": engram_ask(eng, "bm25")}
    for cfg in CONFIGS:
        out[f"pg_fts_{cfg}"] = lambda q, user, cfg=cfg: fts(con, cfg, q, user)
    out["engram_vector"] = engram_ask(eng, "vector")
    # Exact cosine order in SQL (inner product of unit vectors): the vector half of the fusion.
    out["pg_vector"] = lambda q, user: con.execute(
        VECTOR_SQL, {"vec": embedder.embed_query(q), "user": user, "limit": RECALL_LIMIT}
    ).fetchall()
    out["engram_hybrid"] = engram_ask(eng, "hybrid")
    out["pg_hybrid_english"] = lambda q, user: pg_hybrid(con, "english", q, embedder.embed_query(q), user)
    return out


def connect(url: str):
    import psycopg
    from pgvector.psycopg import register_vector

    con = psycopg.connect(url, autocommit=True)
    register_vector(con)
    return con


def open_engram(url: str, home: Path, embedder, clock=None):
    """An Engram on `url` whose memories table has the FTS columns and indexes, and its settings."""
    from engram import Engram, Settings
    from engram.store.pg import PgStore

    PgStore(url, START).close()  # the schema, so the columns can be added before the first write
    with connect(url) as con:
        for cfg in CONFIGS:
            add_fts(con, cfg)
    settings = Settings.from_env({"ENGRAM_HOME": str(home)})
    return Engram(url, settings=settings, embedder=embedder, clock=clock), settings


def _timed(lat: list[float], fn, *args):
    """fn(*args), its milliseconds appended to lat."""
    t0 = time.perf_counter()
    got = fn(*args)
    lat.append((time.perf_counter() - t0) * 1000)
    return got


def _ms(lat: list[float]) -> dict:
    return {"p50": round(percentile(lat, 50), 2), "p95": round(percentile(lat, 95), 2), "n": len(lat)}


def locomo_part(url: str, home: Path, embedder, data: Path, conversations: list[int] | None) -> dict:
    from tqdm import tqdm

    from engram import VirtualClock

    convs = load(data)
    convs = [convs[i] for i in conversations] if conversations is not None else convs
    clock = VirtualClock()
    eng, _ = open_engram(url, home, embedder, clock)
    con = connect(url)
    asks = methods(eng, con, embedder)
    scores: dict[str, list] = {m: [] for m in asks}
    lat: dict[str, list[float]] = {m: [] for m in asks}
    bar = tqdm(total=sum(len(c.turns) for c in convs), desc="locomo", file=sys.stderr)
    try:
        for conv in convs:  # as benchmarks.locomo does: store a conversation, then ask its questions
            _ingest(eng, clock, conv, bar)
            clock.set(conv.last_time)
            user = user_for(conv.index)
            for q in conv.questions:
                if not q.evidence:
                    continue
                # Encoded once before timing, as benchmarks.locomo does: every method after it
                # finds the vector in the embedder's query cache, so none pays for encoding.
                embedder.embed_query(q.question)
                for m, ask in asks.items():
                    ranked = [_dialog_ids(p or ()) for _, p in _timed(lat[m], ask, q.question, user)]
                    scores[m].append(score_question(ranked, q.evidence, q.category))
    finally:
        bar.close()
        con.close()
        eng.close()
    out = {}
    for m in asks:
        agg = aggregate(scores[m], CATEGORIES, SCORED_CATEGORIES)
        out[m] = {"overall_1_4": agg["overall"], "by_category": agg["by_category"], "latency_ms": _ms(lat[m])}
    return {"turns": sum(len(c.turns) for c in convs), "methods": out}


def agent_part(url: str, home: Path, embedder) -> dict:
    from benchmarks.precision import precision
    from benchmarks.recall_eval import KINDS, SET_START, default_set_path, load_set, store_set
    from engram import VirtualClock

    doc = load_set(default_set_path())
    clock = VirtualClock(SET_START)
    eng, settings = open_engram(url, home, embedder, clock)
    con = connect(url)
    asks = methods(eng, con, embedder)
    rows = []
    try:
        ids, actions = store_set(eng, clock, doc)
        for q in doc["queries"]:
            want = {ids[k] for k in q["expect"]}
            got = {m: [i for i, _ in ask(q["query"], settings.user_id)] for m, ask in asks.items()}
            rows.append((q["kind"], want, got))
    finally:
        con.close()
        eng.close()
    table = {}
    for kind in KINDS:
        sel = [(w, g) for k, w, g in rows if k == kind]
        if not sel:
            continue
        cell: dict = {"n": len(sel)}
        for m in asks:
            p = precision((kind, [i in w for i in g[m]]) for w, g in sel)
            if kind == "none":  # nothing stored answers these: a hit is returning nothing
                cell[m] = {"empty": p["none_empty"], "returned": p["none_returned"]}
            else:
                cell[m] = {f"hit@{k}": sum(bool(w & set(g[m][:k])) for w, g in sel) / len(sel) for k in (1, 3)}
                cell[m].update(precision=p["precision"], unrelated=p["unrelated"])
        table[kind] = cell
    return {"memories": len(doc["memories"]), "actions": actions, "by_kind": table}


def locomo_like_texts(data: Path, n: int, seed: int) -> list[str]:
    """n texts drawn word by word from LoCoMo's turns (so each word comes as often as it does
    there), each as many words as a random turn."""
    turns = [t.content for c in load(data) for t in c.turns]
    words = [w for t in turns for w in t.split()]
    lengths = [len(t.split()) for t in turns]
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=rng.choice(lengths))) for _ in range(n)]


def latency_part(url: str, home: Path, data: Path, n: int, nq: int, seed: int) -> dict:
    from benchmarks.pg_scale import DIM
    from engram import Engram, Settings
    from engram.models.embedding import FakeEmbedder
    from engram.store.pg import PgStore

    emb = FakeEmbedder(DIM, "fake-hash-384")
    ids, texts, vecs = with_vectors(locomo_like_texts(data, n, seed))
    rng = random.Random(seed + 1)
    questions = [q.question for c in load(data) for q in c.questions]
    qs = [(rng.choice(questions), f"user{rng.randrange(USERS)}") for _ in range(nq)]
    res: dict = {"memories": n, "queries": nq, "load_s": round(load_postgres(url, ids, texts, vecs, emb), 1)}
    del ids, texts, vecs
    PgStore(url, START).close()
    con = connect(url)
    try:
        res["build"] = {cfg: add_fts(con, cfg) for cfg in CONFIGS}
        con.execute("VACUUM ANALYZE memories")
        for cfg in CONFIGS:
            plan = "\n".join(
                r[0]
                for r in con.execute(
                    "EXPLAIN " + fts_sql(cfg), {"cfg": cfg, "q": qs[0][0], "user": qs[0][1], "limit": 10}
                ).fetchall()
            )
            lat: list[float] = []
            matched: list[int] = []
            for q, user in qs[:20]:  # warm
                fts(con, cfg, q, user)
            for q, user in qs:
                _timed(lat, fts, con, cfg, q, user)
            for q, user in qs:  # how many rows each query's OR matches: what ts_rank_cd has to rank
                matched.append(
                    con.execute(
                        f"SELECT count(*) FROM memories m, {OR_TSQUERY} AS q(tq) WHERE m.user_id = %(user)s "
                        f"AND m.status = 'active' AND m.{column(cfg)} @@ q.tq",
                        {"cfg": cfg, "q": q, "user": user},
                    ).fetchone()[0]
                )
            res[f"pg_fts_{cfg}"] = {
                "latency_ms": _ms(lat),
                "uses_gin": f"memories_fts_{cfg}" in plan,
                "rows_matched_p50": percentile(matched, 50),
                "rows_matched_p95": percentile(matched, 95),
            }
        size = con.execute("SELECT " + ", ".join(f"pg_relation_size('memories_fts_{c}')" for c in CONFIGS)).fetchone()
        res["gin_mb"] = {c: round(s / 2**20, 1) for c, s in zip(CONFIGS, size)}
    finally:
        con.close()
    t0 = time.perf_counter()
    eng = Engram(url, settings=Settings.from_env({"ENGRAM_HOME": str(home)}), embedder=emb)
    res["engram_open_s"] = round(time.perf_counter() - t0, 1)
    try:
        bm25 = engram_ask(eng, "bm25")
        for q, user in qs[:20]:
            bm25(q, user)
        lat = []
        for q, user in qs:
            _timed(lat, bm25, q, user)
        res["engram_bm25"] = {"latency_ms": _ms(lat)}
    finally:
        eng.close()
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.pg_fts", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, from {','.join(PARTS)}")
    p.add_argument("--size", type=int, default=100_000, help="memories for the latency part")
    p.add_argument("--queries", type=int, default=200, help="queries for the latency part")
    p.add_argument("--seed", type=int, default=16)
    p.add_argument(
        "--conversations",
        default=None,
        help="LoCoMo conversation indexes, e.g. 0,3, for a quick check (default: all ten)",
    )
    p.add_argument("--data", type=Path, default=None, help=f"locomo10.json (default {default_data_path()})")
    p.add_argument("--out", type=Path, default=None, help="write the result JSON here too")
    a = p.parse_args(argv)
    parts = [x.strip() for x in a.parts.split(",") if x.strip()]
    if not parts or any(x not in PARTS for x in parts):
        p.error(f"parts are {', '.join(PARTS)}; got {a.parts!r}")
    data = a.data or default_data_path()
    convs = None if a.conversations is None else [int(x) for x in a.conversations.split(",")]
    embedder = None
    if "locomo" in parts or "agent" in parts:
        from engram import Settings
        from engram.models.embedding import load_embedder

        s = Settings.from_env()
        embedder = load_embedder(s.model, cache_dir=s.model_cache, threads=s.torch_threads)
    results: dict = {"date": datetime.now(UTC).isoformat(timespec="seconds")}
    work = Path(tempfile.mkdtemp(prefix="egfts", dir="/tmp"))
    try:
        for part in parts:
            with private_postgres(f"engram_fts_{part}") as url:  # a fresh server per part
                if part == "locomo":
                    results[part] = locomo_part(url, work / part, embedder, data, convs)
                elif part == "agent":
                    results[part] = agent_part(url, work / part, embedder)
                else:
                    results[part] = latency_part(url, work / part, data, a.size, a.queries, a.seed)
            print(json.dumps({part: results[part]}), flush=True)
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(work)
    text = json.dumps(results, indent=2, ensure_ascii=False)
    print(text)
    if a.out:
        a.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
