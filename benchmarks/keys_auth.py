"""What a per-user key costs a request: the key's hash looked up on every request, nothing cached.

    python -m benchmarks.keys_auth [--requests 300] [--keys 1000]

A DuckDB file in a temporary folder with `--keys` keys of as many users (the fake embedder: no
request here embeds). The daemon's HTTP app (REST + MCP + panel) runs under uvicorn in a thread;
one client sends `GET /tasks` with ENGRAM_TOKEN and with a key, alternating, so both see the same
machine load. Prints p50/p95 of each, their ratio, and the lookup alone (SHA-256 plus the
indexed read) timed in process.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx
import uvicorn

from engram import Engram, Settings
from engram.admin import keys
from engram.api import Api, Ctx
from engram.models.embedding import FakeEmbedder
from engram.server.daemon import build_http_app

TOKEN = "bench-token-0123456789abcdef0123"


def quantiles(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(0.95 * len(xs)))]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--keys", type=int, default=1000)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        settings = replace(Settings.from_env({"ENGRAM_HOME": tmp}), token=TOKEN)
        eng = Engram(Path(tmp) / "bench.duckdb", settings=settings, embedder=FakeEmbedder())
        api = Api(eng)
        admin = Ctx("bench-admin", client="cli")
        made = [api.call("create_key", {"user_id": f"user{i}", "label": None}, admin) for i in range(a.keys)]
        mine = made[len(made) // 2]
        key = mine["key"]
        api.call("create_task", {"name": "a task", "goal": "", "metadata": None}, Ctx("s", mine["user_id"]))

        lookups = []
        for _ in range(2000):
            t = time.perf_counter()
            keys.user_of(eng, key)
            lookups.append((time.perf_counter() - t) * 1e6)

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        server = uvicorn.Server(uvicorn.Config(build_http_app(api, settings), log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        times: dict[str, list[float]] = {"ENGRAM_TOKEN": [], "key": []}
        creds = {"ENGRAM_TOKEN": TOKEN, "key": key}
        try:
            with httpx.Client(base_url=base, timeout=30) as c:
                for cred in creds.values():  # warm
                    assert c.get("/tasks", headers={"Authorization": f"Bearer {cred}"}).status_code == 200
                for _ in range(a.requests):
                    for name, cred in creds.items():
                        t = time.perf_counter()
                        r = c.get("/tasks", headers={"Authorization": f"Bearer {cred}"})
                        times[name].append((time.perf_counter() - t) * 1000)
                        assert r.status_code == 200, r.text
        finally:
            server.should_exit = True
            thread.join(30)
            sock.close()
            eng.close()
    lp50, lp95 = quantiles(lookups)
    print(f"{a.keys} keys; key lookup in process: p50 {lp50:.0f} us, p95 {lp95:.0f} us")
    for name, xs in times.items():
        p50, p95 = quantiles(xs)
        print(f"GET /tasks with {name:<12}: p50 {p50:.2f} ms, p95 {p95:.2f} ms ({len(xs)} requests)")
    ratio = statistics.median(times["key"]) / statistics.median(times["ENGRAM_TOKEN"])
    print(f"key / token p50 ratio: {ratio:.2f}")


if __name__ == "__main__":
    main()
