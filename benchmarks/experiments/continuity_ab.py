"""The continuity benchmark's calls, timed in two checkouts in lockstep: a before/after ratio on a noisy machine.

continuity_bench runs one tree at a time, so on a shared machine two runs minutes apart see
different neighbours. Here each tree gets a child process that builds the same store as
continuity_bench (same seed, sizes and background) with engram imported from that tree; then
the parent asks the children for one call at a time, alternating which goes first, so both
time each call within the same second. Reports each tree's medians and their ratio.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.experiments.continuity_ab OTHER_TREE [--sizes 0,100] [--samples 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]

# Runs inside each tree: builds the store as continuity_bench does, then serves timed calls.
CHILD = r"""
import json, os, random, sys, tempfile, time
from pathlib import Path
from benchmarks import continuity_bench as cb
from engram import Engram, Settings
from engram.api import Api, Ctx
import engram
sizes, background, seed = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
home = Path(tempfile.mkdtemp(prefix="engram-continuity-ab-"))
settings = Settings.from_env({**os.environ, "ENGRAM_HOME": str(home)})
eng = Engram(home / "m.duckdb", settings=settings)
tasks = cb.build(eng, Api(eng), sizes, background, random.Random(seed))
eng.close()
eng = Engram(home / "m.duckdb", settings=settings, embedder=eng.embedder)
api, reader, writer = Api(eng), Ctx("bench-reader", client="bench"), Ctx("bench-writer-2", client="bench")
query = "CSV export next steps"
def recall(n):
    r = api.call("recall_memory", {"query": query, "task_id": tasks[n]}, reader)
    assert r["handoff"] is not None and len(r["handoff"]["next_steps_validation"]) == len(cb.STEPS)
ops = {
    "recall": recall,
    "get_context": lambda n: api.call("get_context", {"query": query, "task_id": tasks[n]}, reader),
    "write": lambda n, i: api.call("track_progress", {"feature": f"note {i} of round", "status": "in_progress",
                                                     "completion": 0.5, "task_id": tasks[n]}, writer),
}
print(json.dumps({"ready": engram.__file__}), flush=True)
for line in sys.stdin:
    op, *args = json.loads(line)
    t = time.perf_counter()
    ops[op](*args)
    print(json.dumps((time.perf_counter() - t) * 1000), flush=True)
eng.close()
"""


class Child:
    def __init__(self, tree: Path, sizes: list[int], background: int, seed: int):
        env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
        self.tree = tree
        self.p = subprocess.Popen(
            [sys.executable, "-c", CHILD, json.dumps(sizes), str(background), str(seed)],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        ready = json.loads(self.p.stdout.readline())
        if not Path(ready["ready"]).resolve().is_relative_to(tree):
            raise SystemExit(f"{tree}: imported {ready['ready']}")

    def call(self, *msg) -> float:
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=60)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("other", help="the checkout to compare with this one (e.g. the commit before a change)")
    ap.add_argument("--sizes", default="0,100")
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--background", type=int, default=500)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    sizes = [int(x) for x in a.sizes.split(",")]
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory():
        kids = [Child(HERE, sizes, a.background, a.seed), Child(Path(a.other).resolve(), sizes, a.background, a.seed)]
        modes = ("cold_recall", "recall", "get_context", "recall_after_write")
        times = {str(k.tree): {m: {n: [] for n in sizes} for m in modes} for k in kids}
        for n in sizes:
            for k in kids:
                times[str(k.tree)]["cold_recall"][n].append(k.call("recall", n))
        for i in range(a.samples):
            order = kids if i % 2 == 0 else kids[::-1]
            for n in rng.sample(sizes, len(sizes)):
                for mode, op in (("recall", "recall"), ("get_context", "get_context")):
                    for k in order:
                        times[str(k.tree)][mode][n].append(k.call(op, n))
                for k in order:
                    k.call("write", n, i)
                for k in order:
                    times[str(k.tree)]["recall_after_write"][n].append(k.call("recall", n))
        for k in kids:
            k.close()
    med = {
        t: {m: {n: round(statistics.median(v), 1) for n, v in per.items()} for m, per in d.items()}
        for t, d in times.items()
    }
    this, other = str(HERE), str(kids[1].tree)
    ratio = {m: {n: round(med[this][m][n] / med[other][m][n], 2) for n in sizes} for m in modes}
    out = {"samples": a.samples, "sizes": sizes, "median_ms": med, "this_over_other": ratio}
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
