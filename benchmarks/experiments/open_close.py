"""Open and close an in-memory Engram: the median time, for this tree and others, interleaved.

Each tree is timed in a child process that imports engram from it (so an older checkout can be
compared with this one in the same run), in rounds that alternate between the trees so a noisy
neighbour slows them alike. The engine gets the fake embedder, as in the test suite, which opens
about a hundred engines: what is timed is the store (connect, extensions, migrations) and the
empty indexes, not the model.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.experiments.open_close [--samples 20] [--rounds 5]
        [--compare DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys, time
import engram
from engram import Engram
from engram.core.settings import Settings
from engram.models.embedding import FakeEmbedder
settings, fake = Settings.from_env(), FakeEmbedder()
Engram(":memory:", settings=settings, embedder=fake).close()  # imports and first-use costs
out = []
for _ in range(int(sys.argv[1])):
    t = time.perf_counter()
    Engram(":memory:", settings=settings, embedder=fake).close()
    out.append(time.perf_counter() - t)
print(json.dumps({"engram": engram.__file__, "times": out}))
"""


def sample(tree: Path, n: int, home: str) -> list[float]:
    """n open+close times (seconds) with engram imported from `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree), "ENGRAM_HOME": home, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(n)], cwd=tree, env=env, capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if not Path(got["engram"]).resolve().is_relative_to(tree):
        raise SystemExit(f"timed {got['engram']}, not the engram of {tree}")
    return got["times"]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20, help="open+close per round and tree")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--compare",
        nargs="*",
        default=[],
        metavar="DIR",
        help="other engram checkouts to time beside this one (e.g. one made with git worktree)",
    )
    a = ap.parse_args(argv)
    trees = [HERE] + [Path(d).resolve() for d in a.compare]
    times: dict[Path, list[float]] = {t: [] for t in trees}
    with tempfile.TemporaryDirectory(prefix="engram-open-close-") as home:
        for _ in range(a.rounds):
            for t in trees:
                times[t] += sample(t, a.samples, home)
    report = {
        str(t): {
            "median_ms": round(1000 * statistics.median(v), 1),
            "p90_ms": round(1000 * statistics.quantiles(v, n=10)[-1], 1),
            "n": len(v),
        }
        for t, v in times.items()
    }
    base = statistics.median(times[HERE])
    for t in trees[1:]:
        report[str(t)]["ratio_to_this_tree"] = round(statistics.median(times[t]) / base, 2)
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
