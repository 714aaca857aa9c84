"""Recall over long chat sessions (issue 27): assistant turns of several hundred words, each
question answered by one sentence of one of them (tests/data/long_sessions.json).

Each session is stored as a chat importer stores it: one memory per turn through store_many,
with the session as `conversation`, the session's date (a minute per turn) and the turn's id as
provenance. A turn over ENGRAM_CHUNK_SIZE characters is split into chunks, and each chunk
carries the turn's provenance, so a hit on any chunk is a hit on its turn. Every question is
asked in each mode at recall's default limit (10), with reinforce=False, or with --reinforce as
the MCP tool and the CLI ask (each strong hit reinforced, in the set's order, each mode on a store
of its own: a stream of questions whose hits grow stronger); Hit@k counts a question
when its evidence turn is among the top k hits, and Hit@k (session) when a turn of its session is.
A question with no evidence is one no turn answers (near-topic): it counts when it returns nothing.
Beside the engine's modes, `plain` is the bare model (benchmarks.plain_cosine: one vector per whole
turn, plain cosine), which returns ten turns for every question.
Run alone: python -m benchmarks.long_sessions [--set PATH]; benchmarks.recall_eval reports it
with the other sets.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from engram import Engram, Settings, VirtualClock

MODES = ("bm25", "vector", "hybrid", "plain")  # plain: the bare model (benchmarks.plain_cosine)
HALVES = ("tune", "report", "all")
KS = (1, 5, 10)
LIMIT = 10
USER = "long-sessions"


def default_set_path() -> Path:
    return Path(__file__).resolve().parents[1] / "tests" / "data" / "long_sessions.json"


def load_set(path: Path) -> dict:
    """The set, checked: every question names a turn of the set and its sentence is in it."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    turns = {t["id"]: t["content"] for s in doc["sessions"] for t in s["turns"]}
    for q in doc["questions"]:
        if not q["evidence"]:
            if q.get("sentence") is not None:
                raise ValueError(f"{q['question']!r}: a question without evidence has no sentence")
            continue
        for e in q["evidence"]:
            if e not in turns:
                raise ValueError(f"{q['question']!r} names unknown turn {e!r}")
        if not any(q["sentence"] in turns[e] for e in q["evidence"]):
            raise ValueError(f"{q['question']!r}: its sentence is in none of its evidence turns")
        if q["half"] not in ("tune", "report"):
            raise ValueError(f"{q['question']!r}: half must be tune or report")
    return doc


def session_items(session: dict, user: str = USER) -> list[dict]:
    """A session's turns as store_many items of `user`: one memory per turn, a minute apart
    from the session's date, the turn's id as provenance."""
    start = datetime.fromisoformat(session["date"])
    return [
        {
            "content": t["content"],
            "provenance": (t["id"],),
            "user_id": user,
            "created_at": start + timedelta(minutes=i),
            "conversation": session["id"],
            "metadata": {"role": t["role"]},
        }
        for i, t in enumerate(session["turns"])
    ]


def store_sessions(eng, doc: dict) -> int:
    """Store every session, one memory per turn; returns the number of memories (chunks count)."""
    stored = 0
    for s in doc["sessions"]:
        results = eng.store_many(session_items(s))
        stored += sum(len(r.chunks) or 1 for r in results)
    return stored


def run_long_sessions(
    doc: dict, settings=None, embedder=None, embed_cache: Path | None = None, reinforce: bool = False
) -> dict[str, Any]:
    """Store the set, ask every question in each mode and the plain baseline, score.
    embed_cache: keep the turns' embeddings in this .npz file (speed only).
    reinforce: ask as the MCP tool and the CLI do, each strong hit reinforced, the questions in
    the set's order; each mode then gets a store of its own, so that no mode's recalls weigh on
    another's ranking."""
    from engram.models.embedding import load_embedder

    from .locomo.run import CachedEmbedder
    from .plain_cosine import PlainCosine

    settings = settings or Settings.from_env()
    embedder = embedder or load_embedder(settings.model, cache_dir=settings.model_cache, threads=settings.torch_threads)
    if embed_cache is not None:
        embedder = CachedEmbedder(embedder, Path(embed_cache))
    engine_modes = [m for m in MODES if m != "plain"]
    ranks: dict[str, list[list[set]]] = {}
    try:
        eng, memories = _stored(doc, settings, embedder)
        # The late-interaction stage's token vectors kept per memory (0 with the stage off).
        token_bytes = eng.indexes.tokens.mean_bytes()
        try:
            for mode in engine_modes:
                if reinforce and mode != engine_modes[0]:
                    eng.close()
                    eng, _ = _stored(doc, settings, embedder)
                ranks[mode] = [
                    [
                        set(h.memory.provenance)
                        for h in eng.recall(q["question"], limit=LIMIT, user_id=USER, reinforce=reinforce, mode=mode)
                    ]
                    for q in doc["questions"]
                ]
        finally:
            eng.close()
        turns_all = [t for s in doc["sessions"] for t in s["turns"]]
        plain = PlainCosine(embedder, [t["content"] for t in turns_all], [t["id"] for t in turns_all])
        ranks["plain"] = [[{t} for t in plain.search(q["question"], LIMIT)] for q in doc["questions"]]
    finally:
        if isinstance(embedder, CachedEmbedder):
            embedder.save()
    rows = []
    for i, q in enumerate(doc["questions"]):
        want = set(q["evidence"])
        sessions = {e.split(":")[0] for e in want}
        row = {"question": q["question"], "half": q["half"], "none": not want, "modes": {}}
        for mode in MODES:
            turns = ranks[mode][i]
            first = next((j for j, t in enumerate(turns) if t & want), None)
            first_s = next((j for j, t in enumerate(turns) if {x.split(":")[0] for x in t} & sessions), None)
            row["modes"][mode] = {"rank": first, "session_rank": first_s, "n": len(turns)}
        rows.append(row)
    return {
        "memories": memories,
        "turns": sum(len(s["turns"]) for s in doc["sessions"]),
        "sessions": len(doc["sessions"]),
        "reinforce": reinforce,
        "token_vectors_bytes_per_memory": token_bytes,
        "rows": rows,
        "table": score(rows),
    }


def _stored(doc: dict, settings, embedder):
    """A new in-memory engine holding the set, its clock a day after the last session; and the
    number of memories stored."""
    last = max(datetime.fromisoformat(s["date"]) for s in doc["sessions"])
    eng = Engram(":memory:", settings=settings, embedder=embedder, clock=VirtualClock(last + timedelta(days=1)))
    return eng, store_sessions(eng, doc)


def score(rows: list[dict]) -> dict:
    """{half: {"n": n, "n_none": n, mode: {"hit@k": share, "session_hit@5": share, "none_empty":
    share of the no-evidence questions that returned nothing}}}."""
    out: dict = {}
    for half in HALVES:
        inhalf = [r for r in rows if half == "all" or r["half"] == half]
        sel = [r for r in inhalf if not r["none"]]
        none = [r for r in inhalf if r["none"]]
        cell: dict[str, Any] = {"n": len(sel), "n_none": len(none)}
        for mode in MODES:
            ranks = [r["modes"][mode]["rank"] for r in sel]
            c = {f"hit@{k}": sum(x is not None and x < k for x in ranks) / max(len(sel), 1) for k in KS}
            c["session_hit@5"] = sum(
                r["modes"][mode]["session_rank"] is not None and r["modes"][mode]["session_rank"] < 5 for r in sel
            ) / max(len(sel), 1)
            c["none_empty"] = sum(r["modes"][mode]["n"] == 0 for r in none) / max(len(none), 1)
            cell[mode] = c
        out[half] = cell
    return out


def markdown(result: dict) -> str:
    asked = "reinforcing strong hits, as MCP asks" if result.get("reinforce") else "reinforce off"
    lines = [
        f"Long sessions: {result['sessions']} sessions, {result['turns']} turns stored as "
        f"{result['memories']} memories (chunks counted), limit {LIMIT}, {asked}. Turn level Hit@1 / Hit@5 / "
        "Hit@10, then session Hit@5; for the questions no turn answers, the share that returned nothing.",
        "",
        "| half | n | " + " | ".join(MODES) + " |",
        "|---|---:|" + "---|" * len(MODES),
    ]
    none_rows = []
    for half in HALVES:
        cell = result["table"][half]
        vals = [
            " / ".join(f"{cell[m][f'hit@{k}']:.3f}" for k in KS) + f" ({cell[m]['session_hit@5']:.3f})" for m in MODES
        ]
        lines.append(f"| {half} | {cell['n']} | " + " | ".join(vals) + " |")
        none_rows.append(
            f"| {half}, none | {cell['n_none']} | " + " | ".join(f"{cell[m]['none_empty']:.3f}" for m in MODES) + " |"
        )
    lines += none_rows
    if result.get("token_vectors_bytes_per_memory"):
        size = result["token_vectors_bytes_per_memory"]
        lines += ["", f"Late interaction's token vectors: {size:,.0f} bytes per memory holding them."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.long_sessions", description=__doc__.split("\n")[0])
    ap.add_argument("--set", default=str(default_set_path()), help="the long-session set")
    ap.add_argument("--json", default=None, help="write the full result (per question) here")
    ap.add_argument("--reinforce", action="store_true", help="reinforce strong hits, as MCP recall does")
    args = ap.parse_args(argv)
    result = run_long_sessions(load_set(Path(args.set)), reinforce=args.reinforce)
    print(markdown(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
