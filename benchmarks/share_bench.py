"""What sharing a project's memory through git costs (docs/sharing.md): bytes in the repository per
1,000 memories, the time to read N records into an empty store, and to read 100 new ones at the
start of a session.

    python -m benchmarks.share_bench [--records 10000] [--new 100]

Machine A plants N memories of one project (the real model; resolution off, so each is its own
row; every tenth one a pitfall, every fiftieth a handoff of one task) in a clone of a bare remote
and runs `engram share on` (in process: engram.admin.share_git); machine B, an empty store with a
home of its own, pulls and reads them all (`engram sync`: every record through write-time
resolution). Then A stores `--new` more and syncs, B pulls, and the session-start read (what the
SessionStart hook asks the daemon for) is timed. The bytes are the record files' on disk, and the
same files zlib-compressed, as git keeps a blob.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import tempfile
import time
import zlib
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engram import Engram, Settings
from engram.admin.share_git import SHARED_DIR, read_at_start, share_project, sync_project
from engram.core.project import detect_project

from .engine_bench import sentence


def _git(cwd: Path, *args: str) -> str:
    r = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"git {' '.join(args)} in {cwd}: {r.stderr.strip()}")
    return r.stdout


def _clone(remote: Path, dest: Path, name: str) -> Path:
    subprocess.run(["git", "clone", "-q", str(remote), str(dest)], check=True, capture_output=True)
    _git(dest, "config", "user.name", name)
    _git(dest, "config", "user.email", f"{name}@example.org")
    _git(dest, "config", "pull.rebase", "false")
    return dest


def _plant(eng: Engram, rng: random.Random, n: int, project: str, task: str, start: int) -> None:
    items = []
    for i in range(start, start + n):
        kind = "handoff" if i % 50 == 0 else "failure" if i % 10 == 0 else "fact"
        items.append(
            dict(
                content=f"{sentence(rng)} (#{i})",
                memory_type=kind,
                task_id=task if kind != "fact" else None,
                project=project,
                resolve_conflicts=False,
            )
        )
    for at in range(0, len(items), 2000):
        eng.store_many(items[at : at + 2000])


def _record_bytes(root: Path) -> tuple[int, int]:
    """The record files' bytes on disk, and zlib-compressed (as git keeps a loose blob)."""
    files = list((root / SHARED_DIR).glob("*/*.jsonl"))
    return sum(f.stat().st_size for f in files), sum(len(zlib.compress(f.read_bytes())) for f in files)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--new", type=int, default=100)
    a = ap.parse_args(argv)
    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="engram-share-bench-") as tmp:
        tmp = Path(tmp)
        remote = tmp / "remote.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
        ca, cb = _clone(remote, tmp / "a", "alice"), _clone(remote, tmp / "b", "bob")
        (ca / "app.py").write_text("x = 1\n")
        _git(ca, "add", "app.py")
        _git(ca, "commit", "-qm", "first")
        project = detect_project(str(ca)).id
        ea = Engram(tmp / "a.duckdb", settings=Settings.from_env({"ENGRAM_HOME": str(tmp / "home-a")}))
        task = ea.create_task("Ship the importer", project=project).id
        t0 = time.perf_counter()
        _plant(ea, rng, a.records, project, task, 0)
        planted = time.perf_counter() - t0
        t0 = time.perf_counter()
        on = share_project(ea, ea.user_of(None), project, str(ca), "on")
        wrote = time.perf_counter() - t0
        _git(ca, "push", "-q", "origin", "main")
        raw, zipped = _record_bytes(ca)
        eb = Engram(tmp / "b.duckdb", settings=Settings.from_env({"ENGRAM_HOME": str(tmp / "home-b")}))
        _git(cb, "pull", "-q", "origin", "main")
        t0 = time.perf_counter()
        got = sync_project(eb, eb.user_of(None), project, str(cb))
        imported = time.perf_counter() - t0
        _plant(ea, rng, a.new, project, task, a.records)
        sync_project(ea, ea.user_of(None), project, str(ca))
        _git(ca, "push", "-q", "origin", "main")
        _git(cb, "pull", "-q", "origin", "main")
        t0 = time.perf_counter()
        start = read_at_start(eb, eb.user_of(None), project, str(cb))
        at_start = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = read_at_start(eb, eb.user_of(None), project, str(cb))
        nothing = time.perf_counter() - t0
        n = on["written"]
        lines = [
            f"records written by share on: {n} ({a.records} memories + 1 task) in {wrote:.2f} s",
            f"  (planting the memories took {planted:.1f} s)",
            f"bytes per 1,000 memories: {raw / a.records * 1000:,.0f} on disk,",
            f"  {zipped / a.records * 1000:,.0f} zlib-compressed (as git stores a blob)",
            f"import of {n} records into an empty store: {imported:.1f} s ({n / imported:.0f}/s)",
            f"  {got['applied']}; records B wrote back (memories merged here): {got['written']}",
            f"session start reading {start['arrived']} new records: {at_start * 1000:.0f} ms",
            f"  with none new: {nothing * 1000:.1f} ms ({again['arrived']} arrived)",
        ]
        print("\n".join(lines))
        ea.close()
        eb.close()


if __name__ == "__main__":
    main()
