"""Bulk ingest speed (issue 47, gap 3): N long chat turns stored the way history is stored, timed
path against path in one run, then the same questions asked of every path's store.

The turns are benchmarks.paraphrase_chat's sessions (short user turns, assistant replies of
2,000-6,000 characters cut into 1,000-character chunks), generated with its seed, then the
next seeds, until N turns are reached (session and turn ids carry the seed). Each path stores
them in a new in-memory store (all-MiniLM-L6-v2, the late-interaction stage on, its reader
loaded before the clock starts):

- `one`: one store_many per session, each turn's token vectors encoded as it is written (how
  every benchmark and importer wrote before this issue);
- `deferred`: one store_many per session, a bulk write (store_many(..., fill_token_vectors=False)):
  a long turn's first chunk embedded, its later chunks' embeddings and the token vectors left to
  the background fill;
- `bulk`: one such store_many per --batch-sessions sessions.

A path that defers runs the fill (Engram.fill_token_vectors, what the daemon runs a second
after the writes: the embeddings first, timed apart too, then the token vectors) after its
writes, timed apart: turns/s is the writes, "with fill" both. --ask-before-fill asks the
questions between the writes and the fill too (recall meanwhile). The
process's CPU seconds (all threads) are reported beside the wall clock: on a shared machine they
measure the work more steadily.
Then every answered question of the sets whose evidence was stored is asked of each store
(hybrid, limit 10, no reinforcement): turn recall@5/@10, and how many questions get exactly
the top 10 of the first path. The stores are also compared memory by memory (text, type,
conversation, date, provenance, metadata but the chunk group's random id, write action).

The machine is shared: compare paths within one run (the load average is reported per path).

    python -m benchmarks.ingest_bench [--turns 10000] [--paths one,bulk] [--batch-sessions 50]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

PATHS = {"one": (1, True), "deferred": (1, False), "bulk": (None, False)}  # (sessions a call, fill at write)
USER = "ingest-bench"
LIMIT = 10


def pool(locomo: Path, turns: int) -> dict:
    """Sessions of paraphrase_chat's sets (its seed, then the next) until `turns` turns, and the
    answered questions whose evidence is among them."""
    from . import paraphrase_chat

    sessions: list[dict] = []
    questions: list[dict] = []
    seed = paraphrase_chat.SEED
    total = 0
    while total < turns:
        doc = paraphrase_chat.build(locomo, seed)
        kept = set()
        for s in doc["sessions"]:
            if total >= turns:
                break
            sid = f"s{seed}-{s['id']}"
            sessions.append(
                {
                    "id": sid,
                    "date": s["date"],
                    "turns": [dict(t, id=f"s{seed}-{t['id']}") for t in s["turns"]],
                }
            )
            kept.add(s["id"])
            total += len(s["turns"])
        for q in doc["questions"]:
            if q["evidence"] and all(e.split(":")[0] in kept for e in q["evidence"]):
                questions.append(dict(q, evidence=[f"s{seed}-{e}" for e in q["evidence"]]))
        seed += 1
    return {"sessions": sessions, "questions": questions}


def run_path(
    name: str, doc: dict, settings, embedder, batch_sessions: int, ask_before_fill: bool = False
) -> tuple[Any, dict, list[list[str]] | None]:
    """A new store holding the pool, written by path `name`; (the engine, its figures, and with
    ask_before_fill the questions' top 10 after the writes, before the fill)."""
    from engram import Engram, VirtualClock

    from .long_sessions import session_items

    per_call, fill_now = PATHS[name]
    per_call = per_call or batch_sessions
    last = max(datetime.fromisoformat(s["date"]) for s in doc["sessions"])
    eng = Engram(":memory:", settings=settings, embedder=embedder, clock=VirtualClock(last + timedelta(days=1)))
    eng.indexes.tokens.reader()  # loaded before the clock starts, as a daemon has it
    sessions = doc["sessions"]
    load_before = os.getloadavg()[0]
    c0 = _cpu()
    t0 = time.perf_counter()
    actions: Counter = Counter()
    for i in range(0, len(sessions), per_call):
        items = [it for s in sessions[i : i + per_call] for it in session_items(s, USER)]
        # The `one` path calls store_many as before this issue, so the script runs on main too.
        stored_now = eng.store_many(items) if fill_now else eng.store_many(items, fill_token_vectors=False)
        actions.update(r.action for r in stored_now)
    writes = time.perf_counter() - t0
    c1 = _cpu()
    load_writes = os.getloadavg()[0]
    _progress(name, "writes", writes, c1 - c0)
    before = ask(eng, doc) if ask_before_fill else None
    encoded = eng.indexes.tokens.encoded  # at write (`one`), or by the recalls before the fill
    t1 = time.perf_counter()
    cf = _cpu()
    embedded = eng.indexes.fill_vectors()  # the later chunks' embeddings (nothing on `one`)
    fill_vectors = time.perf_counter() - t1
    _progress(name, "fill of the embeddings", fill_vectors, _cpu() - cf)
    filled = eng.fill_token_vectors()  # then the token vectors (nothing on `one`)
    fill = time.perf_counter() - t1
    c2 = _cpu()
    turns = sum(len(s["turns"]) for s in sessions)
    return (
        eng,
        {
            "path": name,
            "sessions_per_call": per_call,
            "token_vectors_at_write": fill_now,
            "turns": turns,
            "memories": len(eng.index),
            "writes_s": round(writes, 1),
            "fill_s": round(fill, 1),
            "fill_vectors_s": round(fill_vectors, 1),
            "embedded_by_fill": embedded,
            "filled": filled,
            "token_vectors_before_fill": encoded,
            "writes_cpu_s": round(c1 - c0, 1),
            "fill_cpu_s": round(c2 - cf, 1),
            "turns_per_s": round(turns / writes, 2),
            "turns_per_cpu_s": round(turns / (c1 - c0), 2),
            "turns_per_s_with_fill": round(turns / (writes + fill), 2),
            "load_before": round(load_before, 2),
            "load_after_writes": round(load_writes, 2),
            "load_after_fill": round(os.getloadavg()[0], 2),
            "actions": dict(actions),
        },
        before,
    )


def _progress(path: str, step: str, wall: float, cpu: float) -> None:
    """A step's time on stderr as it ends: a long run's figures so far."""
    print(f"{path}: {step} {wall:.1f} s ({cpu:.1f} CPU s), load {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)


def _cpu() -> float:
    """CPU seconds this process has used, every thread's (the model's included): on a shared
    machine a steadier measure of the work than the wall clock."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def stored(eng) -> list[tuple]:
    """Every memory as a comparable tuple: its fields but the ids a write draws at random."""
    out = []
    for m, _ in eng.store_db.iter_index_rows():
        meta = {k: v for k, v in m.metadata.items() if k != "chunk_group"}
        out.append(
            (
                m.provenance,
                m.metadata.get("chunk", 0),
                m.content,
                m.memory_type,
                m.conversation,
                m.created_at.isoformat(),
                json.dumps(meta, sort_keys=True),
                m.status,
            )
        )
    return sorted(out)


def ask(eng, doc: dict) -> list[list[str]]:
    return [
        [h.memory.provenance[0] for h in eng.recall(q["question"], limit=LIMIT, user_id=USER, reinforce=False)]
        for q in doc["questions"]
    ]


def recall_figures(doc: dict, ranks: list[list[str]], first: list[list[str]]) -> dict:
    qs = doc["questions"]
    n = max(len(qs), 1)
    return {
        "questions": len(qs),
        "recall@5": round(sum(bool(set(r[:5]) & set(q["evidence"])) for q, r in zip(qs, ranks)) / n, 3),
        "recall@10": round(sum(bool(set(r[:10]) & set(q["evidence"])) for q, r in zip(qs, ranks)) / n, 3),
        "same_top10_as_first": sum(a == b for a, b in zip(ranks, first)),
    }


def markdown(result: dict) -> str:
    rows = result["paths"]
    base = rows[0]
    lines = [
        f"{result['turns']} turns ({result['memories']} memories), {result['questions']} questions; "
        f"batch of {result['batch_sessions']} sessions for `bulk`.",
        "",
        "| path | writes s | turns/s | × first | writes CPU s | turns per CPU s | fill s (CPU s) "
        "| turns/s with fill | load avg (before/after) | recall@5 | recall@10 | same top 10 | same memories |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['path']} | {r['writes_s']} | {r['turns_per_s']} | "
            f"{r['turns_per_s'] / base['turns_per_s']:.2f} | {r['writes_cpu_s']} | {r['turns_per_cpu_s']} | "
            f"{r['fill_s']} ({r['fill_cpu_s']}) | {r['turns_per_s_with_fill']} | "
            f"{r['load_before']}/{r['load_after_fill']} | {r['recall']['recall@5']} | {r['recall']['recall@10']} | "
            f"{r['recall']['same_top10_as_first']}/{r['recall']['questions']} | {r['same_memories']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from engram import Settings
    from engram.models.embedding import load_embedder

    from .locomo.run import default_data_path

    ap = argparse.ArgumentParser(prog="python -m benchmarks.ingest_bench", description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=default_data_path(), help="locomo10.json (the sets' small talk)")
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--paths", default="one,bulk", help=f"comma-separated, first is the baseline: {', '.join(PATHS)}")
    ap.add_argument("--batch-sessions", type=int, default=50, help="sessions per store_many on the bulk path")
    ap.add_argument("--json", type=Path, default=None, help="write the full result here")
    ap.add_argument(
        "--ask-before-fill", action="store_true", help="also ask the questions after the writes, before the fill"
    )
    args = ap.parse_args(argv)
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [p for p in paths if p not in PATHS]
    if unknown or not paths:
        print(f"error: --paths takes {', '.join(PATHS)}; got {args.paths!r}", file=sys.stderr)
        return 2
    if not args.data.exists():
        print(f"error: LoCoMo data not found at {args.data}; pass --data PATH", file=sys.stderr)
        return 2
    doc = pool(args.data, args.turns)
    settings = Settings.from_env()
    if not settings.late_interaction:
        print("error: the late-interaction stage is off (ENGRAM_LATE_INTERACTION): nothing to defer", file=sys.stderr)
        return 2
    embedder = load_embedder(settings.model, cache_dir=settings.model_cache, threads=settings.torch_threads)
    embedder.embed_batch(["warm up", "the model"])
    rows: list[dict] = []
    first_ranks: list[list[str]] | None = None
    first_stored: list[tuple] | None = None
    for name in paths:
        eng, row, before = run_path(name, doc, settings, embedder, args.batch_sessions, args.ask_before_fill)
        try:
            mems = stored(eng)
            ranks = ask(eng, doc)
        finally:
            eng.close()
        first_ranks = first_ranks or ranks
        first_stored = first_stored or mems
        row["same_memories"] = mems == first_stored
        row["recall"] = recall_figures(doc, ranks, first_ranks)
        if before is not None:
            row["recall_before_fill"] = recall_figures(doc, before, first_ranks)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    result = {
        "turns": rows[0]["turns"],
        "memories": rows[0]["memories"],
        "questions": len(doc["questions"]),
        "batch_sessions": args.batch_sessions,
        "paths": rows,
    }
    print(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
