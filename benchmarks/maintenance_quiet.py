"""How long a maintenance run takes when it has nothing to do (the common case: every 12 hours
on a store whose memories are neither fading nor near-duplicates).

    python -m benchmarks.maintenance_quiet [--memories 20000] [--runs 3]

Stores `memories` distinct synthetic memories (twelve words drawn from 3,000, plus a number;
the fake embedder, 384 dimensions: the vectors' values do not change the work), runs maintenance
once a day later, then times `runs` more runs, each of which finds nothing to prune or merge.
"""

from __future__ import annotations

import argparse
import json
import random
import time


def run(memories: int, runs: int) -> dict:
    from engram import Engram, Settings, VirtualClock
    from engram.admin.maintenance import run_maintenance
    from engram.models.embedding import FakeEmbedder

    rng = random.Random(0)
    words = [f"w{i}" for i in range(3000)]
    clock = VirtualClock()
    eng = Engram(":memory:", settings=Settings.from_env(), embedder=FakeEmbedder(dim=384), clock=clock)
    try:
        for start in range(0, memories, 500):
            eng.store_many(
                [
                    {
                        "content": " ".join(rng.choice(words) for _ in range(12)) + f" item {i}",
                        "resolve_conflicts": False,
                    }
                    for i in range(start, min(start + 500, memories))
                ]
            )
        clock.advance(days=1)
        run_maintenance(eng)
        times, report = [], {}
        for _ in range(runs):
            t0 = time.perf_counter()
            report = run_maintenance(eng)
            times.append(round(time.perf_counter() - t0, 2))
        return {
            "memories": memories,
            "quiet_run_s": times,
            "pruned": report["pruned"],
            "consolidated": report["consolidated"],
            "reindexed": report.get("reindexed"),
        }
    finally:
        eng.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--memories", type=int, default=20_000)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    print(json.dumps(run(a.memories, a.runs)))


if __name__ == "__main__":
    main()
