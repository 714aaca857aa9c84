"""Where a store's and a recall's time goes in DuckDB, per kind of statement.

    python -m benchmarks.experiments.statement_profile STORE.duckdb [--ops 100]

Works on a copy of the store. Alternates single stores and recalls of synthetic facts (as
benchmarks.engine_bench does), timing every statement sent to DuckDB by its first words,
and prints the mean milliseconds per operation of each kind, the store/recall p50, and
the actions taken. Prints JSON.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


class _Timed:
    """A DuckDB connection whose execute() is timed per statement kind."""

    def __init__(self, con, stats):
        self._con, self._stats = con, stats

    def execute(self, sql, *args):
        t = time.perf_counter()
        out = self._con.execute(sql, *args)
        key = " ".join(sql.split()[:3])
        self._stats[key][0] += 1
        self._stats[key][1] += time.perf_counter() - t
        return out

    def __getattr__(self, name):
        return getattr(self._con, name)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--ops", type=int, default=100)
    args = ap.parse_args(argv)
    from engram import Engram, Settings
    from engram.models.embedding import load_embedder

    from ..engine_bench import pct, sentence

    tmp = Path(tempfile.mkdtemp(prefix="engram-profile-"))
    try:
        shutil.copy(args.store, tmp / "s.duckdb")
        settings = Settings.from_env({**os.environ, "ENGRAM_HOME": str(tmp)})
        emb = load_embedder(settings.model, settings.model_cache, settings.torch_threads)
        eng = Engram(tmp / "s.duckdb", settings=settings, embedder=emb)
        stats: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
        db = getattr(eng.store_db, "inner", eng.store_db)  # the DuckDB store behind the redacting one
        db.con = _Timed(db.con, stats)
        rng = random.Random(34)
        actions: collections.Counter = collections.Counter()
        store_t, recall_t = [], []
        for _ in range(args.ops):
            t = time.perf_counter()
            actions[eng.store(sentence(rng)).action] += 1
            store_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            eng.recall(sentence(rng).rstrip(".").split(" ", 2)[2], limit=10)
            recall_t.append(time.perf_counter() - t)
        eng.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = {
        "memories": len(eng.index),
        "ops": args.ops,
        "actions": dict(actions),
        "store_p50_ms": pct(store_t, 50),
        "recall_p50_ms": pct(recall_t, 50),
        "ms_per_op": {k: round(v[1] * 1000 / args.ops, 2) for k, v in sorted(stats.items(), key=lambda kv: -kv[1][1])},
        "calls": {k: v[0] for k, v in stats.items()},
    }
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
