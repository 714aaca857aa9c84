"""What the web panel's pages cost at 1k and 100k memories: the Api operations behind them, in process.

    python -m benchmarks.panel_bench [--sizes 1000,100000] [--samples 30]

The memories are planted with the fake embedder (these operations embed nothing, so the model
would only slow the set-up) in a DuckDB file in a temporary folder, with resolution off so each
stays its own row. Prints p50/p95 per operation and size, and the ratio of the largest size to
the smallest (a page that loaded every memory would grow with the count).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engram import Engram, Settings
from engram.api import Api, Ctx
from engram.models.embedding import FakeEmbedder

from .engine_bench import sentence

CTX = Ctx(session_id="panel-bench")
TYPES = ["fact", "strategy", "assumption", "failure"]


def plant(eng: Engram, n: int, task: str, rng: random.Random) -> list[str]:
    ids: list[str] = []
    for start in range(0, n, 5000):
        batch = [
            dict(
                content=f"{sentence(rng)} (#{i})",
                memory_type=TYPES[i % 4],
                tags=[f"tag{i % 50}"],
                task_id=task if i % 100 == 0 else None,
                resolve_conflicts=False,
            )
            for i in range(start, min(n, start + 5000))
        ]
        ids += [r.memory.id for r in eng.store_many(batch)]
    return ids


def timed(fn, samples: int) -> tuple[float, float]:
    fn()  # warm
    xs = []
    for _ in range(samples):
        t = time.perf_counter()
        fn()
        xs.append((time.perf_counter() - t) * 1000)
    xs.sort()
    return statistics.median(xs), xs[min(len(xs) - 1, int(0.95 * len(xs)))]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--samples", type=int, default=30)
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows: dict[str, dict[int, tuple[float, float]]] = {}
    for n in sizes:
        with tempfile.TemporaryDirectory() as d:
            settings = Settings.from_env({"ENGRAM_HOME": d})
            with Engram(Path(d) / "bench.duckdb", settings=settings, embedder=FakeEmbedder()) as eng:
                api = Api(eng)
                rng = random.Random(7)
                task = api.call("create_task", {"name": "bench"}, CTX)["task_id"]
                t0 = time.perf_counter()
                ids = plant(eng, n, task, rng)
                print(f"planted {n} in {time.perf_counter() - t0:.1f} s")
                mid = ids[len(ids) // 2]
                ops = {
                    "GET /memories (first page)": ("list_memories", {}),
                    "GET /memories (last page)": ("list_memories", {"offset": n - 50}),
                    "GET /memories?tag=&memory_type=": ("list_memories", {"tag": "tag7", "memory_type": "strategy"}),
                    "GET /memories/{id}": ("get_memory", {"memory_id": mid}),
                    "GET /memories/{id}/strength": ("memory_strength", {"memory_id": mid}),
                    "GET /memories/{id}/versions": ("memory_versions", {"memory_id": mid}),
                    "GET /tasks/{id}/sessions": ("task_sessions", {"task_id": task}),
                    "GET /stats": ("memory_stats", {}),
                }
                for label, (op, a) in ops.items():
                    call = lambda op=op, a=a, api=api: api.call(op, a, CTX)  # noqa: E731 - bound now, timed below
                    rows.setdefault(label, {})[n] = timed(call, args.samples)
    head = " | ".join(f"{n:,} p50 / p95 ms" for n in sizes)
    print(f"\n| operation | {head} | p50 ratio {sizes[-1]:,} / {sizes[0]:,} |")
    print("|---|" + "---|" * len(sizes) + "---|")
    for label, by in rows.items():
        cells = " | ".join(f"{by[n][0]:.2f} / {by[n][1]:.2f}" for n in sizes)
        print(f"| `{label}` | {cells} | {by[sizes[-1]][0] / by[sizes[0]][0]:.1f}× |")


if __name__ == "__main__":
    main()
