"""A store whose background fill was cut short, met again through the `engram` command (issue 47,
bulk ingest): how soon the daemon serves it, how soon `engram stop` returns while the daemon fills
it, and how long the fill takes to finish once the daemon is back.

N long chat turns (benchmarks.paraphrase_chat's sessions, as benchmarks.ingest_bench builds its
pool) are written in bulk, one store_many per session with fill_token_vectors=False, into the
store of a new ENGRAM_HOME, and that process ends before any fill: a long turn's later chunks are
left without their embedding, every turn without its token vectors, as after a crash or a stop
right after a large import. Then, with the real command and the daemon it starts:

1. the first `engram stats` (the daemon starts and opens the store): its wall time, and how many
   rows the daemon says await their embedding;
2. `engram stop` asked --stop-after seconds later, while the daemon's fill runs: its wall time and
   how many rows still lack their embedding in the file afterwards;
3. `engram stats` again (a new daemon), then polled every second until no row awaits its
   embedding: the time the fill's embeddings take to finish;
4. `engram stop` at the end (the token vectors' fill under way): its wall time.

    python -m benchmarks.reopen_bench [--turns 1000] [--stop-after 5] [--json X.json]

The machine is shared: the load average is reported with each step.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .ingest_bench import USER, pool


def engram(home: Path, *argv: str) -> tuple[float, dict]:
    """`engram --json ARGV` in `home`: (wall seconds, its JSON answer)."""
    env = {**os.environ, "ENGRAM_HOME": str(home), "ENGRAM_USER": USER, "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "engram.cli", "--json", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=900,
        check=False,
    )
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"engram {' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
    return wall, json.loads(r.stdout) if r.stdout.strip() else {}


def write_cut_short(home: Path, doc: dict) -> dict:
    """The pool written in bulk into home's store by this process, closed before any fill."""
    from engram import Engram
    from engram.core.settings import Settings

    from .long_sessions import session_items

    settings = Settings.from_env({**os.environ, "ENGRAM_HOME": str(home)})
    t0 = time.perf_counter()
    with Engram(settings.db_path, settings=settings) as eng:
        for s in doc["sessions"]:
            eng.store_many(session_items(s, USER), fill_token_vectors=False)
        left = len(eng.indexes.unembedded)
        rows = len(eng.index)
    return {"rows": rows, "left_to_the_fill": left, "write_s": round(time.perf_counter() - t0, 1)}


def unembedded_in_file(home: Path) -> int:
    """Rows of the store's file without their embedding (read with the daemon stopped)."""
    import duckdb

    with duckdb.connect(str(home / "memories.duckdb"), read_only=True) as c:
        row = c.execute("SELECT count(*) - count(embedding) FROM memories").fetchone()
    return int(row[0]) if row else 0


def run(turns: int, stop_after: float, data: Path) -> dict:
    doc = pool(data, turns)
    home = Path(tempfile.mkdtemp(prefix="egr", dir="/tmp"))  # short: a Unix socket's path is limited
    out: dict = {"turns": sum(len(s["turns"]) for s in doc["sessions"])}
    try:
        out["written"] = write_cut_short(home, doc)
        load = os.getloadavg()[0]
        wall, st = engram(home, "stats")
        out["first_call"] = {"s": round(wall, 2), "awaiting": st["index"]["awaiting_embedding"], "load": load}
        time.sleep(stop_after)
        load = os.getloadavg()[0]
        wall, _ = engram(home, "stop")
        out["stop_mid_fill"] = {"s": round(wall, 2), "unembedded_after": unembedded_in_file(home), "load": load}
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        wall, st = engram(home, "stats")
        out["second_start"] = {"s": round(wall, 2), "awaiting": st["index"]["awaiting_embedding"], "load": load}
        while st["index"]["awaiting_embedding"]:
            time.sleep(1)
            _, st = engram(home, "stats")
        out["embeddings_done_s"] = round(time.perf_counter() - t0, 1)
        load = os.getloadavg()[0]
        wall, _ = engram(home, "stop")
        out["final_stop"] = {"s": round(wall, 2), "unembedded_after": unembedded_in_file(home), "load": load}
    finally:
        subprocess.run(
            [sys.executable, "-m", "engram.cli", "stop"],
            env={**os.environ, "ENGRAM_HOME": str(home)},
            capture_output=True,
            timeout=120,
            check=False,
        )
        import shutil

        shutil.rmtree(home, ignore_errors=True)
    return out


def main() -> None:
    from .locomo.run import default_data_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=default_data_path(), help="locomo10.json (the sets' small talk)")
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--stop-after", type=float, default=5.0, help="seconds after the first call to ask the stop")
    ap.add_argument("--json", type=Path, default=None, help="write the result here")
    a = ap.parse_args()
    result = run(a.turns, a.stop_after, a.data)
    text = json.dumps(result, indent=1)
    print(text)
    if a.json:
        a.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
