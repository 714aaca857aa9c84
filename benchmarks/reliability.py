"""Reliability figures: crash safety under SIGKILL, concurrent agents, start-up at 100k, RSS, disk.

    python -m benchmarks.reliability crash [--kills 50] [--seed 1]
    python -m benchmarks.reliability concurrent [--clients 6] [--ops 1000] [--fake]
    python -m benchmarks.reliability startup [--memories 100000] [--db FILE]
    python -m benchmarks.reliability soak [--ops 100000]
    python -m benchmarks.reliability serve --home DIR [--fake] [--port N]   (a daemon; used by the tests)

crash and soak run the daemon with the deterministic fake embedder (the model's cost says nothing
about durability or leaks); concurrent uses the real model unless --fake; startup writes a
100k-memory file (rows, history, edges, 384-dim vectors) straight through Store and times
opening it with the embedder already loaded, so model load is excluded.
The tests in tests/e2e/test_crash.py and tests/e2e/test_concurrent_agents.py drive the same code, smaller.
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
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The daemon these runs start, and the texts they store, are the tests' (tests/support).
from tests.support.daemon import (
    REPO,
    free_port,
    kill_daemon,
    serve,
    start_daemon,
    stop_daemon,
)
from tests.support.daemon import daemon_env as env_for
from tests.support.texts import salad

os.environ.setdefault("HF_HUB_OFFLINE", "1")


# ---------------------------------------------------------------- crash safety


@dataclass
class Ledger:
    """What the daemon acknowledged, and what was in flight when it died."""

    memories: dict[str, str] = field(default_factory=dict)  # memory id -> token its content must hold
    forgotten: set[str] = field(default_factory=set)  # acknowledged forgets
    handoffs: dict[str, str] = field(default_factory=dict)  # handoff memory id -> token
    task_meta: dict[str, int] = field(default_factory=dict)  # metadata key -> last acknowledged value
    uncertain: list[tuple] = field(default_factory=list)  # ops sent but not answered
    owned: dict[int, list[str]] = field(default_factory=dict)  # worker -> its memories to update/forget
    refusals: Counter = field(default_factory=Counter)
    task_id: str = ""
    acks: int = 0
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def crash_worker(
    socket_path: Path,
    ledger: Ledger,
    worker: int,
    cycle: int,
    task_id: str,
    rng: random.Random,
    acked: threading.Condition,
) -> None:
    """Stores, updates, handoffs, task updates and forgets until the daemon dies under it."""
    from engram.server.rpc import RpcError
    from engram.server.rpc_client import RpcClient

    with ledger.lock:
        mine = ledger.owned.setdefault(worker, [])
    client = RpcClient(socket_path, client=f"crash-{worker}", timeout=120)
    seq = 0
    try:
        while True:
            seq += 1
            token = f"c{cycle}w{worker}n{seq}q"
            kind = rng.choices(["store", "update", "handoff", "task", "forget"], [5, 2, 2, 2, 1])[0]
            with ledger.lock:
                mine[:] = [m for m in mine if m in ledger.memories]
            if kind in ("update", "forget") and not mine:
                kind = "store"
            if kind == "store":
                op = ("store", None, token)
                call = ("store_memory", {"content": salad(rng, token), "task_id": task_id})
            elif kind == "update":
                mid = rng.choice(mine)
                op = ("update", mid, token, ledger.memories[mid])
                call = ("update_memory", {"memory_id": mid, "content": salad(rng, token)})
            elif kind == "handoff":
                op = ("handoff", None, token)
                call = (
                    "session_handoff",
                    {
                        "summary": f"Session {token} stopped mid-way",
                        "next_steps": [f"continue {token}"],
                        "task_id": task_id,
                    },
                )
            elif kind == "task":
                key = f"w{worker}"
                op = ("task", key, seq, ledger.task_meta.get(key))
                call = ("update_task", {"task_id": task_id, "metadata": {key: seq}})
            else:
                mid = mine.pop(rng.randrange(len(mine)))
                op = ("forget", mid, ledger.memories[mid])
                call = ("forget_memory", {"memory_id": mid})
            with ledger.lock:
                ledger.uncertain.append(op)
            try:
                r = client.call(call[0], **call[1])
            except RpcError as e:
                if e.kind in ("ConnectionLost", "DaemonUnavailable", "Timeout", "ProtocolError"):
                    return  # the daemon died: this op stays uncertain
                with ledger.lock:  # a refusal (e.g. the memory was superseded): nothing changed
                    ledger.refusals[f"{call[0]}: {e.kind}: {e.message[:60]}"] += 1
                    ledger.uncertain.remove(op)
                    ledger.refused += 1
                continue
            with ledger.lock:
                ledger.uncertain.remove(op)
                if kind == "store":
                    if r["action"] in ("new", "replace", "merge"):
                        ledger.memories[r["memory_id"]] = token
                        mine.append(r["memory_id"])
                        if r.get("previous_id") and r["action"] == "replace":
                            ledger.memories.pop(r["previous_id"], None)
                elif kind == "update":
                    ledger.memories[op[1]] = token
                elif kind == "handoff":
                    ledger.handoffs[r["handoff_id"]] = token
                elif kind == "task":
                    ledger.task_meta[op[1]] = seq
                else:
                    ledger.memories.pop(op[1], None)
                    ledger.forgotten.add(op[1])
                ledger.acks += 1
            with acked:
                acked.notify_all()
    finally:
        client.close(clean=False)


def verify_after_crash(db_path: Path, settings: Any, ledger: Ledger, task_id: str) -> dict:
    """Open the file the killed daemon left and check it against the ledger. Raises AssertionError."""
    from engram import Engram
    from engram.core.settings import is_database_url
    from engram.models.embedding import FakeEmbedder

    t0 = time.perf_counter()
    eng = Engram(db_path, settings=settings, embedder=FakeEmbedder())
    opened = time.perf_counter() - t0
    try:
        db = eng.store_db
        uncertain_ids = {op[1] for op in ledger.uncertain if op[0] in ("update", "forget")}
        # Acknowledged writes are there and findable by keyword and by vector.
        forgetting = {op[1] for op in ledger.uncertain if op[0] == "forget"}
        for mid, token in ledger.memories.items():
            m = db.get_memory(mid)
            if m is None and mid in forgetting:  # a forget in flight went through: wholly
                assert db.count_where("memory_events", "memory_id = ?", [mid]) == 0
                assert mid not in eng.index.row_of
                continue
            assert m is not None and m.status != "deleted", f"acknowledged memory {mid} lost"
            if mid in uncertain_ids:
                # Sent but unanswered: the old text or the new one, whole, never a mix.
                tokens = [op[2:] for op in ledger.uncertain if op[1] == mid and op[0] == "update"]
                assert not tokens or any(t in m.content for t in tokens[0]), (mid, m.content)
                continue
            assert token in m.content, f"{mid}: acknowledged content {token} not there: {m.content!r}"
            if m.status == "active":
                hits = [h.memory.id for h in eng.recall(token, mode="bm25", limit=3, reinforce=False, graph=False)]
                assert mid in hits, f"{mid} not found by keyword {token}"
                hits = [
                    h.memory.id for h in eng.recall(m.content, mode="vector", limit=3, reinforce=False, graph=False)
                ]
                assert mid in hits, f"{mid} not found by its vector"
        for hid, token in ledger.handoffs.items():
            h = db.get_memory(hid)
            assert h is not None and token in h.content, f"acknowledged handoff {hid} lost"
            assert h.metadata["handoff"]["summary"] == f"Session {token} stopped mid-way"
        # Acknowledged forgets are gone everywhere.
        for mid in ledger.forgotten:
            assert db.get_memory(mid) is None, f"forgotten {mid} came back"
            assert mid not in eng.index.row_of and mid not in eng.graph.g
            assert db.count_where("memory_events", "memory_id = ?", [mid]) == 0
            assert db.count_where("edges", "src = ? OR dst = ?", [mid, mid]) == 0
        # The task holds every acknowledged metadata write (or the one in flight after it).
        meta = db.get_task(task_id).metadata
        in_flight = {op[1]: op[2] for op in ledger.uncertain if op[0] == "task"}
        for key, value in ledger.task_meta.items():
            assert meta.get(key) in (value, in_flight.get(key)), (key, meta.get(key), value)
        # Nothing half-written: every row whole, no dangling references.
        dim = eng.embedder.dim
        pg = is_database_url(db_path)  # the conditions in its dialect
        size, arg = ("vector_dims(embedding)", dim) if pg else ("octet_length(embedding)", dim * 4)
        summary = (
            "metadata::json #>> '{handoff,summary}'" if pg else "json_extract_string(metadata, '$.handoff.summary')"
        )
        assert db.count_where("memories", f"embedding IS NULL OR {size} <> ?", [arg]) == 0
        assert db.count_where("memories m", "NOT EXISTS (SELECT 1 FROM memory_events e WHERE e.memory_id = m.id)") == 0
        assert db.count_where("memory_events e", "NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = e.memory_id)") == 0
        assert (
            db.count_where(
                "edges e",
                "NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = e.src) "
                "OR NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = e.dst)",
            )
            == 0
        )
        assert db.count_where("memories", f"memory_type = 'handoff' AND {summary} IS NULL") == 0
        assert (
            db.count_where("memories", "status = 'superseded' AND superseded_by NOT IN (SELECT id FROM memories)") == 0
        )
        # Derived indexes agree with the rows.
        rows = db.count_where("memories", "status IN ('active', 'superseded', 'consolidated')")
        assert len(eng.index) == rows, (len(eng.index), rows)
        table_edges = {frozenset((s, d)) for s, d, _, _ in db.all_edges()}
        graph_edges = {frozenset(e) for e in eng.graph.g.edges()}
        assert graph_edges == table_edges
        return {"open_s": opened, "rows": rows, "edges": len(table_edges)}
    finally:
        eng.close()


def settle_uncertain(ledger: Ledger, db_path: Path, settings: Any) -> None:
    """After verification, fold what the dead daemon did with in-flight ops into the ledger."""
    from engram.core.clock import SystemClock
    from engram.store import open_store

    store = open_store(db_path, SystemClock().now())
    try:
        for op in ledger.uncertain:
            if op[0] == "update":
                m = store.get_memory(op[1])
                ledger.memories[op[1]] = op[2] if op[2] in m.content else op[3]
            elif op[0] == "forget":
                if store.get_memory(op[1]) is None:
                    ledger.memories.pop(op[1], None)
                    ledger.forgotten.add(op[1])
            elif op[0] == "task":
                value = store.get_task(ledger.task_id).metadata.get(op[1])
                if value is not None:
                    ledger.task_meta[op[1]] = value
        ledger.uncertain.clear()
    finally:
        store.close()


def crash_run(home: Path, kills: int, seed: int = 1, workers: int = 3, log: Any = None) -> dict:
    """Kill the daemon with SIGKILL `kills` times mid-stream; verify the file after each kill."""
    from engram.core.settings import Settings
    from engram.server.rpc_client import RpcClient

    rng = random.Random(seed)
    settings = Settings.from_env({**os.environ, "ENGRAM_HOME": str(home)})  # as the daemon reads them
    ledger = Ledger()
    pid = start_daemon(home)
    with RpcClient(settings.socket_path, client="setup") as c:
        task_id = c.call("create_task", name="crash test", goal="survive")["task_id"]
    ledger.task_id = task_id
    stats = Counter()
    opens = []
    for cycle in range(kills):
        if cycle:
            pid = start_daemon(home)
        acked = threading.Condition()
        target = ledger.acks + rng.randint(5, 40)
        threads = [
            threading.Thread(
                target=crash_worker,
                args=(settings.socket_path, ledger, w, cycle, task_id, random.Random(rng.random()), acked),
                daemon=True,
            )
            for w in range(workers)
        ]
        for t in threads:
            t.start()

        def enough(target=target, threads=threads) -> bool:
            return ledger.acks >= target or not any(t.is_alive() for t in threads)

        with acked:
            acked.wait_for(enough)
        kill_daemon(pid)
        for t in threads:
            t.join(120)
        stats["in_flight_at_kill"] += len(ledger.uncertain)
        where = settings.database_url or settings.db_path  # PostgreSQL when ENGRAM_DATABASE_URL is set
        checked = verify_after_crash(where, settings, ledger, task_id)
        opens.append(checked["open_s"])
        settle_uncertain(ledger, where, settings)
        if log:
            log(
                f"kill {cycle + 1}/{kills}: {ledger.acks} acks, {len(ledger.memories)} memories, "
                f"{checked['edges']} edges, reopened in {checked['open_s']:.2f}s"
            )
    return {
        "kills": kills,
        "acknowledged_ops": ledger.acks,
        "memories": len(ledger.memories),
        "forgotten": len(ledger.forgotten),
        "handoffs": len(ledger.handoffs),
        "in_flight_at_kill": stats["in_flight_at_kill"],
        "refused": ledger.refused,
        "refusals": dict(ledger.refusals),
        "lost_writes": 0,
        "reopen_median_s": round(statistics.median(opens), 3),
    }


# ---------------------------------------------------------------- concurrent agents

CLIENT_KINDS = ("stdio", "rest", "mcp-http")


async def _client(kind: str, cid: int, ops: int, home: Path, port: int, task_id: str, seed: int) -> dict:
    """One agent: stores, recalls of its own writes, task updates and handoffs on the shared task."""
    import anyio  # noqa: F401 - the caller runs this under anyio
    import httpx

    rng = random.Random(seed)
    lat: list[float] = []
    stored: list[list[str]] = []
    handoffs: list[str] = []
    errors: list[str] = []
    meta_last = None

    if kind == "rest":
        http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120)

        async def call(tool: str, args: dict) -> dict:
            route = {
                "store_memory": ("POST", "/memories"),
                "recall_memory": ("POST", "/search"),
                "session_handoff": ("POST", "/handoffs"),
                "update_task": ("PATCH", f"/tasks/{args.get('task_id')}"),
            }[tool]
            body = {k: v for k, v in args.items() if not (tool == "update_task" and k == "task_id")}
            r = await http.request(*route, json=body)
            if r.status_code >= 400:
                raise RuntimeError(f"{tool}: HTTP {r.status_code}: {r.text[:200]}")
            return r.json()

        closer = http
    else:
        from mcp.client import Client

        if kind == "stdio":
            from mcp.client.stdio import StdioServerParameters

            target: Any = StdioServerParameters(command=sys.executable, args=["-m", "engram"], env=env_for(home))
        else:
            target = f"http://127.0.0.1:{port}/mcp"
        closer = Client(target, read_timeout_seconds=180)

        async def call(tool: str, args: dict) -> dict:
            r = await mcp.call_tool(tool, args)
            if r.is_error:
                raise RuntimeError(f"{tool}: {r.content[0].text[:200]}")
            return r.structured_content

    async with closer as mcp:
        for i in range(ops):
            kind_of = rng.choices(["store", "recall", "task", "handoff"], [4, 3, 2, 1])[0]
            # Recall checks only memories stored as new: a store the resolver judged already known
            # (reinforce) or folded into a close memory (merge) need not keep this text verbatim.
            own = [x for x in stored if x[2] == "new"]
            if kind_of == "recall" and not own:
                kind_of = "store"
            token = f"k{cid}o{i}x"
            t0 = time.perf_counter()
            try:
                if kind_of == "store":
                    r = await call("store_memory", {"content": salad(rng, token), "tags": [f"client-{cid}"]})
                    stored.append([token, r["memory_id"], r["action"]])
                elif kind_of == "recall":
                    want_token, want_id, _ = rng.choice(own)
                    r = await call("recall_memory", {"query": want_token, "mode": "bm25", "limit": 3})
                    if want_id not in [m["id"] for m in r["memories"]]:
                        errors.append(f"recall {want_token}: own write not found")
                elif kind_of == "task":
                    await call("update_task", {"task_id": task_id, "metadata": {f"client{cid}": i}})
                    meta_last = i
                else:
                    r = await call(
                        "session_handoff",
                        {
                            "summary": f"Client {cid} handoff {token}",
                            "next_steps": [f"continue {token}"],
                            "task_id": task_id,
                        },
                    )
                    handoffs.append(r["handoff_id"])
            except Exception as e:  # noqa: BLE001 - every failure is counted and reported
                errors.append(f"{kind_of}: {type(e).__name__}: {e}")
            lat.append(time.perf_counter() - t0)
    return {
        "kind": kind,
        "client": cid,
        "ops": ops,
        "stored": stored,
        "handoffs": handoffs,
        "meta_last": meta_last,
        "errors": errors,
        "latencies": lat,
    }


def client_main(kind: str, cid: int, ops: int, home: Path, port: int, task_id: str, seed: int) -> int:
    import anyio

    out = anyio.run(_client, kind, cid, ops, home, port, task_id, seed)
    print(json.dumps(out))
    return 0


def concurrent_run(home: Path, clients: int, ops: int, fake: bool = True, log: Any = None) -> dict:
    """`clients` agent processes at once (stdio MCP, REST and streamable-HTTP MCP in turn), `ops` each."""
    from engram.core.settings import Settings
    from engram.server.rpc_client import RpcClient

    settings = Settings.from_env({"ENGRAM_HOME": str(home)})
    port = free_port()
    start_daemon(home, fake=fake, port=port)
    with RpcClient(settings.socket_path, client="setup") as c:
        task_id = c.call("create_task", name="shared work", goal="many agents, one task")["task_id"]
    kinds = [CLIENT_KINDS[i % len(CLIENT_KINDS)] for i in range(clients)]
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.reliability",
                "client",
                "--kind",
                k,
                "--id",
                str(i),
                "--ops",
                str(ops),
                "--home",
                str(home),
                "--port",
                str(port),
                "--task",
                task_id,
                "--seed",
                str(1000 + i),
            ],
            env=env_for(home),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, k in enumerate(kinds)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise RuntimeError(f"client failed ({p.returncode}): {err[-3000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    wall = time.perf_counter() - t0
    # Final state, read back through the daemon.
    lost: list[str] = []
    with RpcClient(settings.socket_path, client="verify", timeout=300) as c:
        for r in results:
            for token, mid, action in r["stored"]:
                m = c.call("get_memory", memory_id=mid)
                if action == "new" and token not in m["content"]:
                    lost.append(token)
        task = c.call("get_task", task_id=task_id)
        stats = c.call("memory_stats")
    handoff_ids = {h["id"] for h in task["handoffs"]}
    lost += [h for r in results for h in r["handoffs"] if h not in handoff_ids]
    meta = task["task"]["metadata"]
    inconsistent = [
        r["client"]
        for r in results
        if r["meta_last"] is not None and meta.get(f"client{r['client']}") != r["meta_last"]
    ]
    lat = sorted(x for r in results for x in r["latencies"])
    total = sum(r["ops"] for r in results)
    out = {
        "clients": clients,
        "kinds": dict(Counter(kinds)),
        "ops_per_client": ops,
        "operations": total,
        "errors": [e for r in results for e in r["errors"]],
        "lost_writes": len(lost),
        "inconsistent_task_metadata": inconsistent,
        "stored": sum(len(r["stored"]) for r in results),
        "store_actions": dict(Counter(a for r in results for _, _, a in r["stored"])),
        "handoffs": sum(len(r["handoffs"]) for r in results),
        "index_fresh": stats["index"]["fresh"],
        "wall_s": round(wall, 2),
        "throughput_ops_s": round(total / wall, 1),
        "p50_ms": round(lat[len(lat) // 2] * 1000, 1),
        "p95_ms": round(lat[int(len(lat) * 0.95)] * 1000, 1),
    }
    if log:
        log(json.dumps({k: v for k, v in out.items() if k != "errors"}))
    return out


# ---------------------------------------------------------------- start-up, disk, RSS


def build_rows(
    db_path: Path, memories: int, dim: int = 384, name: str = "fake-hash", edges_per_memory: int = 3
) -> float:
    """Write `memories` rows (memory, one history event, a few edges each) straight through Store.

    The engine's own write path (resolution, per-memory edges) runs at ~40-90 memories/s on the
    shared 2-core test VM, so a 100k file would take most of an hour; start-up work depends only
    on the rows, so the rows are written directly, with random unit vectors of the model's size.
    """
    import numpy as np

    from benchmarks.engine_bench import sentence
    from engram.core.clock import SystemClock
    from engram.core.types import Memory
    from engram.store import Store

    rng = random.Random(7)
    nrng = np.random.default_rng(7)
    now = SystemClock().now()
    store = Store(db_path, now)
    store.set_meta("model_name", name)
    store.set_meta("model_dim", str(dim))
    ids: list[str] = []
    t0 = time.perf_counter()
    for lo in range(0, memories, 5000):
        vecs = nrng.standard_normal((min(5000, memories - lo), dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        with store.transaction(), store.buffered():
            for v in vecs:
                mid = f"m{len(ids):015d}"
                m = Memory(
                    id=mid,
                    content=sentence(rng),
                    memory_type="fact",
                    importance=0.5,
                    recall_count=0,
                    created_at=now,
                    last_recalled_at=None,
                    user_id="default",
                    valid_from=now,
                    updated_at=now,
                )
                store.insert_memory(m, v)
                ids.append(mid)
    # History and edges in bulk: one event per memory, edges to random earlier memories.
    with store.transaction():
        store.execute(
            "INSERT INTO memory_events SELECT id, created_at, 'new', "
            '\'{"reason": "no similar memory"}\' FROM memories'
        )
        for _ in range(edges_per_memory):
            store.execute(
                "INSERT OR IGNORE INTO edges SELECT id, printf('m%015d', CAST(floor(random() * i) AS BIGINT)), "
                "0.5, 'default' FROM (SELECT id, CAST(substr(id, 2) AS BIGINT) AS i FROM memories) WHERE i > 0"
            )
    store.close()
    return time.perf_counter() - t0


def startup_run(memories: int, db: Path | None, log: Any = print) -> dict:
    """Time opening a file of `memories` memories (embedder preloaded: model load excluded); disk per 10k."""
    from engram import Engram, Settings
    from engram.models.embedding import FakeEmbedder

    tmp = Path(tempfile.mkdtemp(prefix="engram-startup-"))
    db = db or tmp / "startup.duckdb"
    settings = Settings.from_env({"ENGRAM_HOME": str(tmp)})
    emb = FakeEmbedder(dim=384)  # all-MiniLM-L6-v2's size; the values do not change the work
    sizes: dict[int, int] = {}
    build_s = 0.0
    if not db.exists():
        for n in range(10_000, memories + 1, 10_000) if memories % 10_000 == 0 else [memories]:
            part = db.with_name(f"{db.stem}-{n}.duckdb") if n < memories else db
            if n in (10_000, memories):
                build_s = build_rows(part, n)
                sizes[n] = part.stat().st_size + (
                    Path(f"{part}.wal").stat().st_size if Path(f"{part}.wal").exists() else 0
                )
                log(f"{n:,} memories: {sizes[n] / 1e6:.1f} MB, built in {build_s:.0f}s", flush=True)
    opens = []
    for _ in range(3):
        t0 = time.perf_counter()
        eng = Engram(db, settings=settings, embedder=emb)
        opens.append(time.perf_counter() - t0)
        n, edges = len(eng.index), eng.graph.edge_count()
        rss = rss_kb(os.getpid())
        eng.close()
    out = {
        "memories": n,
        "graph_edges": edges,
        "open_s": [round(x, 2) for x in opens],
        "open_median_s": round(statistics.median(opens), 2),
        "process_rss_mib_after_open": round(rss / 1024),
        "db": str(db),
        "build_s": round(build_s, 1),
    }
    if sizes:
        out["file_mb"] = {k: round(v / 1e6, 1) for k, v in sizes.items()}
        out["mb_per_10k_memories"] = round((sizes[max(sizes)] / max(sizes)) * 10_000 / 1e6, 2)
    return out


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def soak_run(home: Path, ops: int, log: Any = print) -> dict:
    """`ops` operations from two clients against one daemon; the daemon's RSS every 10k operations.

    Stores and forgets balance, so the data stays about the same size and RSS should level off.
    """
    from engram.core.settings import Settings
    from engram.server.rpc_client import RpcClient

    settings = Settings.from_env({"ENGRAM_HOME": str(home)})
    pid = start_daemon(home)
    with RpcClient(settings.socket_path, client="setup") as c:
        task_id = c.call("create_task", name="soak", goal="run long")["task_id"]
    done = Counter()
    samples: list[tuple[int, int]] = [(0, rss_kb(pid))]
    lock = threading.Lock()
    errors: list[str] = []

    def worker(w: int, n: int) -> None:
        rng = random.Random(w)
        mine: list[str] = []
        with RpcClient(settings.socket_path, client=f"soak-{w}", timeout=300) as c:
            for i in range(n):
                token = f"s{w}o{i}x"
                kind = rng.choices(["store", "recall", "forget", "task", "handoff"], [30, 40, 25, 4, 1])[0]
                try:
                    if kind == "forget" and mine:
                        c.call("forget_memory", memory_id=mine.pop(rng.randrange(len(mine))))
                    elif kind == "recall" and mine:
                        c.call("recall_memory", query=salad(rng, "q", 3), limit=5)
                    elif kind == "task":
                        c.call("update_task", task_id=task_id, metadata={f"w{w}": i})
                    elif kind == "handoff":
                        c.call("session_handoff", summary=f"soak {token}", task_id=task_id)
                    else:
                        r = c.call("store_memory", content=salad(rng, token))
                        if r["action"] == "new":  # a reinforce or merge returns a memory it may share
                            mine.append(r["memory_id"])
                except Exception as e:  # noqa: BLE001 - counted and reported
                    errors.append(f"{kind}: {e}")
                with lock:
                    done["ops"] += 1
                    if done["ops"] % 10_000 == 0:
                        samples.append((done["ops"], rss_kb(pid)))
                        log(f"{done['ops']:,} ops, daemon RSS {samples[-1][1] / 1024:.0f} MiB", flush=True)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(w, ops // 2)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    with RpcClient(settings.socket_path, client="verify") as c:
        stats = c.call("memory_stats")
    return {
        "operations": done["ops"],
        "errors": len(errors),
        "error_samples": errors[:5],
        "wall_s": round(wall, 1),
        "ops_per_s": round(done["ops"] / wall, 1),
        "memories_at_end": stats["total"],
        "rss_mib": {k: round(v / 1024, 1) for k, v in samples},
    }


# ---------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.reliability",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("serve", help="run a daemon (tests use --fake)")
    p.add_argument("--home", required=True)
    p.add_argument("--fake", action="store_true")
    p.add_argument("--port", type=int)
    p = sub.add_parser("crash", help="SIGKILL the daemon mid-stream, verify after each kill")
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("concurrent", help="several agent processes at once; throughput, p95, lost writes")
    p.add_argument("--clients", type=int, default=6)
    p.add_argument("--ops", type=int, default=1000)
    p.add_argument("--fake", action="store_true", help="fake embedder (default: the real model)")
    p = sub.add_parser("client", help="one agent process (used by concurrent)")
    p.add_argument("--kind", choices=CLIENT_KINDS, required=True)
    for name in ("--id", "--ops", "--port", "--seed"):
        p.add_argument(name, type=int, required=True)
    p.add_argument("--home", required=True)
    p.add_argument("--task", required=True)
    p = sub.add_parser("startup", help="open time and disk per 10k at 100k memories (real model)")
    p.add_argument("--memories", type=int, default=100_000)
    p.add_argument("--db", help="keep (or reuse) the built file here")
    p = sub.add_parser("soak", help="daemon RSS over a long run (fake embedder)")
    p.add_argument("--ops", type=int, default=100_000)
    a = parser.parse_args(argv)
    if a.cmd == "startup":
        print(json.dumps(startup_run(a.memories, Path(a.db) if a.db else None), indent=2))
        return 0
    if a.cmd == "serve":
        return serve(Path(a.home), a.fake, a.port)
    if a.cmd == "client":
        return client_main(a.kind, a.id, a.ops, Path(a.home), a.port, a.task, a.seed)
    with tempfile.TemporaryDirectory(prefix="engram-rel-") as tmp:
        home = Path(tmp) / "home"
        t0 = time.perf_counter()
        try:
            if a.cmd == "crash":
                out = crash_run(home, a.kills, a.seed, log=print)
            elif a.cmd == "soak":
                out = soak_run(home, a.ops)
            elif a.cmd == "concurrent":
                out = concurrent_run(home, a.clients, a.ops, fake=a.fake, log=print)
                out["errors"] = out["errors"][:20]
        finally:
            stop_daemon(home)
        out["wall_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
