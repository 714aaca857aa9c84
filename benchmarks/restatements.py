"""Restatements of one fact: do they end as one memory after write time plus one consolidation run?

The set is tests/data/restatement_cases.json: each case stores `old`, then `new`, then any `more`
(further restatements), as one user of its own, through Engram.store; then one maintenance run
(prune, consolidate) covers every user. A case is scored by its kind:

- a restatement (expected "reinforce": paraphrase, reorder, abbreviation, tense, voice) ends as
  one active memory, and every text it was stored as is kept on that memory (its content, or
  its history: a reinforce or merge records the text it took in, a consolidation its sources);
- a new detail (expected "merge") keeps the new text findable: some active memory holds it;
- a counter-case (same words, another fact; expected "new" or "replace") is merged when the new
  text was folded into the old memory (reinforce, merge) or consolidated with it.

    HF_HUB_OFFLINE=1 python -m benchmarks.restatements [--cases PATH] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

CASES_PATH = Path(__file__).resolve().parents[1] / "tests" / "data" / "restatement_cases.json"


def load_cases(path: Path = CASES_PATH) -> list[dict]:
    return json.loads(Path(path).read_text())


def group(kind: str) -> str:
    """paraphrase, reorder, ... -> restatement; detail; counter-* -> counter."""
    if kind.startswith("counter"):
        return "counter"
    return "detail" if kind == "detail" else "restatement"


def _kept_texts(eng, memory_id: str, user: str, seen: set[str] | None = None) -> set[str]:
    """Every text a memory holds or took in: its content, what its history recorded, and the same
    for each memory a consolidation made it from."""
    seen = seen if seen is not None else set()
    if memory_id in seen:
        return set()
    seen.add(memory_id)
    mem = eng.get(memory_id, user)
    texts = {mem.content}
    for event in eng.history(memory_id, user_id=user):
        data = event.get("detail") or {}
        texts.update(v for k, v in data.items() if k in ("added", "previous") and isinstance(v, str))
    for source in mem.metadata.get("consolidated_from", ()):
        texts |= _kept_texts(eng, source, user, seen)
    return texts


def run_cases(eng, clock, cases: list[dict], resolve_conflicts: bool = True) -> list[dict[str, Any]]:
    """Store every case (one user each), run maintenance once, score each case.

    resolve_conflicts=False stores every text as new (as a store that skipped resolution, or
    data from before it): then the consolidation run alone has to make each restatement one."""
    from engram.admin.maintenance import run_maintenance

    stored = []
    for i, case in enumerate(cases):
        user = f"restate-{i}"
        texts = [case["old"], case["new"], *case.get("more", ())]
        actions = []
        for text in texts:
            clock.advance(minutes=1)
            actions.append(eng.store(text, user_id=user, resolve_conflicts=resolve_conflicts).action)
        stored.append((user, texts, actions))
    maintenance = run_maintenance(eng, apply=True)
    rows = []
    for case, (user, texts, actions) in zip(cases, stored, strict=True):
        active = eng.list_memories(user_id=user, limit=50)["memories"]
        ids = [m["id"] for m in active]
        contents = {m["id"]: eng.get(m["id"], user).content for m in active}
        kind = group(case["kind"])
        row = {
            "kind": case["kind"],
            "group": kind,
            "split": case["split"],
            "texts": texts,
            "actions": actions,
            "active": len(active),
            "contents": list(contents.values()),
        }
        if kind == "restatement":
            kept = _kept_texts(eng, ids[0], user) if len(ids) == 1 else set()
            row["ok"] = len(ids) == 1 and all(t in kept for t in texts)
        elif kind == "detail":
            row["ok"] = any(case["new"] in c for c in contents.values())
        else:
            folded = actions[1] in ("reinforce", "merge")  # at write time
            together = any(case["new"] in c and case["old"] in c for c in contents.values())
            row["merged"] = folded or together or not any(case["new"] in c for c in contents.values())
            row["ok"] = not row["merged"]
        rows.append(row)
    for row in rows:
        row["consolidated_runs"] = maintenance["consolidated"]
    return rows


def summary(rows: list[dict]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split in ("tune", "report"):
        part = [r for r in rows if r["split"] == split]
        res = [r for r in part if r["group"] == "restatement"]
        det = [r for r in part if r["group"] == "detail"]
        cnt = [r for r in part if r["group"] == "counter"]
        out[split] = {
            "restatements": len(res),
            "one_memory": sum(r["ok"] for r in res),
            "one_memory_share": round(sum(r["ok"] for r in res) / max(len(res), 1), 3),
            # One active memory, whether or not it kept every text it was stored as.
            "one_active": sum(r["active"] == 1 for r in res),
            "details": len(det),
            "detail_kept": sum(r["ok"] for r in det),
            "counters": len(cnt),
            "counters_merged": sum(r["merged"] for r in cnt),
            "actions": dict(Counter(a for r in part for a in r["actions"][1:])),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    from engram import Engram, Settings, VirtualClock
    from engram.models.embedding import load_embedder

    ap = argparse.ArgumentParser(prog="python -m benchmarks.restatements", description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=str(CASES_PATH))
    ap.add_argument("--json", help="write every case's outcome here")
    ap.add_argument(
        "--no-write-resolution", action="store_true", help="store every text as new: the consolidation run alone"
    )
    args = ap.parse_args(argv)
    settings = Settings.from_env()
    embedder = load_embedder(settings.model, cache_dir=settings.model_cache, threads=settings.torch_threads)
    from datetime import datetime, timezone

    clock = VirtualClock(datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc))
    eng = Engram(":memory:", settings=settings, embedder=embedder, clock=clock)
    try:
        rows = run_cases(eng, clock, load_cases(Path(args.cases)), not args.no_write_resolution)
    finally:
        eng.close()
    result = summary(rows)
    print(json.dumps(result, indent=1))
    for r in rows:
        if not r["ok"]:
            print(f"MISS [{r['split']} {r['kind']}] actions={r['actions']} active={r['active']}", file=sys.stderr)
            for t in r["texts"]:
                print(f"    {t}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": result, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
