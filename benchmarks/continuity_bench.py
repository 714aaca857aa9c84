"""Recall and get_context on a task with 0, 100 and 1,000 memories written after its handoff.

One store holds a task per size (each: a handoff with five next steps, then that many memories:
progress notes, facts and failures of the task) beside some unrelated background. Each size is
measured in the same run, interleaved, through the Api (as MCP and HTTP call it):

- cold: the first recall_memory after the store is opened (validation has nothing cached);
- warm: recall_memory / get_context repeated, nothing written in between (the task then
  gains only the notes the next mode writes, one per round);
- after a write: one progress note of the task written (not timed) before each recall_memory,
  the loop of an agent that tracks its progress as the memory rules ask.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.continuity_bench [--sizes 0,100,1000] [--samples 30]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engram import Engram, Settings
from engram.api import Api, Ctx

STEPS = [
    "Add a --csv flag to the export command",
    "Write tests for the CSV exporter",
    "Document CSV export in the README",
    "Stream rows instead of loading the whole table",
    "Escape formula characters in CSV cells",
]
PARTS = [
    "parser",
    "exporter",
    "scheduler",
    "billing client",
    "auth middleware",
    "search index",
    "upload worker",
    "settings page",
    "report builder",
    "cache layer",
]
VERBS = [
    "tightened",
    "refactored",
    "measured",
    "documented",
    "renamed",
    "profiled",
    "reviewed",
    "simplified",
    "logged",
    "retried",
]


def _note(rng: random.Random, i: int) -> str:
    return f"{rng.choice(VERBS)} the {rng.choice(PARTS)} for case {i} ({rng.randint(1, 999)} ms)"


def build(eng: Engram, api: Api, sizes: list[int], background: int, rng: random.Random) -> dict[int, str]:
    ctx = Ctx("bench-writer", client="bench")
    eng.store_many(
        [{"content": f"Background fact {i}: the {rng.choice(PARTS)} uses setting {i}."} for i in range(background)]
    )
    tasks = {}
    for n in sizes:
        tid = api.call("create_task", {"name": f"CSV export ({n} after handoff)"}, ctx)["task_id"]
        api.call("session_handoff", {"summary": "CSV writer core works", "next_steps": STEPS, "task_id": tid}, ctx)
        for i in range(n):
            kind = i % 10
            if kind < 6:
                api.call(
                    "track_progress",
                    {"feature": _note(rng, i), "status": "in_progress", "completion": 0.5, "task_id": tid},
                    ctx,
                )
            elif kind < 9:
                api.call("store_memory", {"content": f"Task {n} note {i}: {_note(rng, i)}.", "task_id": tid}, ctx)
            else:
                api.call(
                    "track_failure",
                    {"error": f"timeout in case {i}", "component": rng.choice(PARTS), "task_id": tid},
                    ctx,
                )
        tasks[n] = tid
    return tasks


def _ms(fn) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0,100,1000", help="memories after the handoff, comma-separated")
    ap.add_argument("--samples", type=int, default=30, help="timed calls per size and operation")
    ap.add_argument("--background", type=int, default=500, help="unrelated memories in the store")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=None, help="write the result as JSON here")
    a = ap.parse_args(argv)
    sizes = [int(x) for x in a.sizes.split(",")]
    rng = random.Random(a.seed)
    home = Path(tempfile.mkdtemp(prefix="engram-continuity-bench-"))
    settings = Settings.from_env({**os.environ, "ENGRAM_HOME": str(home)})
    path = home / "memories.duckdb"

    t = time.perf_counter()
    eng = Engram(path, settings=settings)
    tasks = build(eng, Api(eng), sizes, a.background, rng)
    build_s = time.perf_counter() - t
    eng.close()

    # Reopened: the derived state (indexes, validation caches) is rebuilt, as after a restart.
    eng = Engram(path, settings=settings, embedder=eng.embedder)
    api = Api(eng)
    reader = Ctx("bench-reader", client="bench")
    writer = Ctx("bench-writer-2", client="bench")
    query = "CSV export next steps"

    def recall(n: int) -> None:
        r = api.call("recall_memory", {"query": query, "task_id": tasks[n]}, reader)
        assert r["handoff"] is not None and len(r["handoff"]["next_steps_validation"]) == len(STEPS)

    def context(n: int) -> None:
        api.call("get_context", {"query": query, "task_id": tasks[n]}, reader)

    cold = {n: _ms(lambda n=n: recall(n)) for n in sizes}
    times: dict[str, dict[int, list[float]]] = {
        k: {n: [] for n in sizes} for k in ("recall", "get_context", "recall_after_write")
    }
    for i in range(a.samples):
        # Interleaved and in a new order each round, so the machine's noise (and whatever the
        # first call of a round pays) falls on every size alike.
        for n in rng.sample(sizes, len(sizes)):
            times["recall"][n].append(_ms(lambda n=n: recall(n)))
            times["get_context"][n].append(_ms(lambda n=n: context(n)))
            api.call(
                "track_progress",
                {"feature": _note(rng, 10_000 + i), "status": "in_progress", "completion": 0.5, "task_id": tasks[n]},
                writer,
            )
            times["recall_after_write"][n].append(_ms(lambda n=n: recall(n)))
    eng.close()
    shutil.rmtree(home, ignore_errors=True)

    rows = []
    for n in sizes:
        row = {"after_handoff": n, "cold_recall_ms": round(cold[n], 1)}
        for k, per in times.items():
            row[f"{k}_p50_ms"] = round(statistics.median(per[n]), 1)
            row[f"{k}_p95_ms"] = round(_pct(per[n], 0.95), 1)
        rows.append(row)
    base = rows[0]
    for row in rows:
        for k in times:
            row[f"{k}_p50_ratio"] = round(row[f"{k}_p50_ms"] / base[f"{k}_p50_ms"], 2)
    out = {
        "sizes": sizes,
        "samples": a.samples,
        "background": a.background,
        "build_s": round(build_s, 1),
        "backend": getattr(eng.embedder, "backend", None),
        "rows": rows,
    }
    print(json.dumps(out, indent=2))
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
