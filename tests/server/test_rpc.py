"""The daemon/client socket layer, with real sockets and real processes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from engram.core.types import EngramError, NotFound
from engram.server import rpc, rpc_client
from engram.server.rpc import Peer, RpcError, acquire_daemon_lock, dumps, server_running
from engram.server.rpc_client import RpcClient
from engram.server.rpc_server import RpcServer

# Subprocesses import the same engram package as this test process.
REPO = Path(rpc.__file__).parents[2]
WAIT = 30.0  # generous upper bound for events; tests pass as soon as they fire


@pytest.fixture
def sock_dir():
    # tmp_path can exceed the ~107-byte limit on Unix socket paths.
    d = Path(tempfile.mkdtemp(prefix="eg", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Recorder:
    """Collects connect/disconnect callbacks; tests wait on it instead of sleeping."""

    def __init__(self):
        self.cond = threading.Condition()
        self.connected: dict[str, Peer] = {}
        self.disconnected: dict[str, bool] = {}

    def on_connect(self, peer: Peer) -> None:
        with self.cond:
            self.connected[peer.session_id] = peer
            self.cond.notify_all()

    def on_disconnect(self, peer: Peer, clean: bool) -> None:
        with self.cond:
            self.disconnected[peer.session_id] = clean
            self.cond.notify_all()

    def wait_disconnect(self, session_id: str) -> bool:
        with self.cond:
            assert self.cond.wait_for(lambda: session_id in self.disconnected, WAIT), "no disconnect seen"
            return self.disconnected[session_id]


@dataclass(frozen=True)
class Thing:
    name: str
    at: datetime


def handler(method: str, params: dict, peer: Peer):
    if method == "echo":
        return params
    if method == "whoami":
        return {
            "session_id": peer.session_id,
            "pid": peer.pid,
            "client": peer.client,
            "user_id": peer.user_id,
        }
    if method == "rich":
        return {
            "at": datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
            "f": np.float32(0.5),
            "arr": np.arange(3),
            "pair": (1, 2),
            "tags": {"b", "a"},
            "thing": Thing("x", datetime(2024, 1, 1)),
        }
    if method == "refuse":
        raise NotFound(f"no memory {params['id']}")
    if method == "crash":
        raise RuntimeError("secret detail /home/user/.engram")
    if method == "unencodable":
        return object()
    raise EngramError(f"unknown method {method}")


@pytest.fixture
def served(sock_dir):
    rec = Recorder()
    extra: dict = {}

    def dispatch(method, params, peer):
        if method in extra:
            return extra[method](params, peer)
        return handler(method, params, peer)

    path = sock_dir / "engram.sock"
    server = RpcServer(path, dispatch, on_connect=rec.on_connect, on_disconnect=rec.on_disconnect)
    server.start()
    yield path, rec, extra, server
    server.shutdown()


# ---------------------------------------------------------------- in-process server


def test_call_returns_result_and_hello_describes_the_peer(served):
    path, rec, _, _ = served
    with RpcClient(path, session_id="s1", client="cursor", user_id="ann") as c:
        assert c.call("echo", a=1, b=[1, "two"]) == {"a": 1, "b": [1, "two"]}
        assert c.call("whoami") == {
            "session_id": "s1",
            "pid": os.getpid(),
            "client": "cursor",
            "user_id": "ann",
        }
        assert c.server_pid == os.getpid()
    assert rec.connected["s1"].client == "cursor"


def test_results_with_datetimes_numpy_tuples_sets_dataclasses(served):
    path, *_ = served
    with RpcClient(path) as c:
        assert c.call("rich") == {
            "at": "2024-05-01T12:00:00+00:00",
            "f": 0.5,
            "arr": [0, 1, 2],
            "pair": [1, 2],
            "tags": ["a", "b"],
            "thing": {"name": "x", "at": "2024-01-01T00:00:00"},
        }


def test_dumps_is_one_line_and_rejects_unknown_objects():
    line = dumps({"text": "a\nb", "n": np.int64(3)})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"text": "a\nb", "n": 3}
    with pytest.raises(TypeError):
        dumps(object())


def test_engram_error_reaches_the_client_with_message_and_kind(served):
    path, *_ = served
    with RpcClient(path) as c:
        with pytest.raises(RpcError) as e:
            c.call("refuse", id="m-42")
        assert (e.value.message, e.value.kind) == ("no memory m-42", "NotFound")
        with pytest.raises(RpcError) as e:
            c.call("nope")
        assert e.value.kind == "EngramError"


def test_internal_error_hides_details_logs_them_and_server_stays_up(served, caplog):
    path, *_ = served
    with RpcClient(path) as c:
        with pytest.raises(RpcError) as e:
            c.call("crash")
        assert e.value.message == "internal error: RuntimeError"
        assert e.value.kind == "RuntimeError"
        assert "secret" not in str(e.value) and "Traceback" not in str(e.value)
        with pytest.raises(RpcError) as e:
            c.call("unencodable")
        assert e.value.message == "internal error: TypeError"
        assert c.call("echo", ok=True) == {"ok": True}
    assert "secret detail" in caplog.text and "Traceback" in caplog.text


def test_handler_calls_from_different_connections_run_concurrently(served):
    path, _, extra, _ = served
    n = 4
    # Each call waits until all n are inside the handler: a serialising server
    # would break the barrier and every call would fail.
    barrier = threading.Barrier(n, timeout=WAIT)
    extra["meet"] = lambda params, peer: (barrier.wait(), params["i"])[1]
    results: dict[int, object] = {}

    def worker(i: int) -> None:
        with RpcClient(path, session_id=f"w{i}") as c:
            try:
                results[i] = c.call("meet", i=i)
            except RpcError as e:
                results[i] = e

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert results == {i: i for i in range(n)}


def test_clean_close_reports_clean_disconnect(served):
    path, rec, _, _ = served
    c = RpcClient(path, session_id="tidy")
    c.call("echo")
    c.close()
    assert rec.wait_disconnect("tidy") is True
    with pytest.raises(RpcError) as e:
        c.call("echo")
    assert e.value.kind == "Closed"


def test_unclean_close_reports_unclean_disconnect(served):
    path, rec, _, _ = served
    c = RpcClient(path, session_id="abrupt")
    c.call("echo")
    c.close(clean=False)
    assert rec.wait_disconnect("abrupt") is False


def test_killed_client_process_is_reported_unclean(served):
    path, rec, extra, _ = served
    ready = threading.Event()
    extra["ready"] = lambda params, peer: ready.set()
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from engram.server.rpc_client import RpcClient
        c = RpcClient({str(path)!r}, session_id="victim", client="sub")
        c.call("ready")
        sys.stdin.read()  # hold the connection until killed
    """)
    with subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE) as proc:
        try:
            assert ready.wait(WAIT)
            assert "victim" not in rec.disconnected
            proc.send_signal(signal.SIGKILL)
            assert rec.wait_disconnect("victim") is False
            assert rec.connected["victim"].pid == proc.pid
            assert rec.connected["victim"].client == "sub"
        finally:
            proc.kill()


def test_oversized_request_is_refused_by_the_client(served):
    path, *_ = served
    with RpcClient(path) as c:
        with pytest.raises(RpcError) as e:
            c.call("echo", blob="x" * (16 * 1024 * 1024 + 1))
        assert e.value.kind == "RequestTooLarge" and "too large" in e.value.message
        assert c.call("echo", small=1) == {"small": 1}


def test_oversized_request_is_refused_by_the_server_and_connection_survives(sock_dir):
    path = sock_dir / "s.sock"
    server = RpcServer(path, handler, max_request_bytes=1024)
    server.start()
    try:
        with RpcClient(path, max_request_bytes=10**9) as c:
            with pytest.raises(RpcError) as e:
                c.call("echo", blob="x" * 5000)
            assert e.value.kind == "RequestTooLarge"
            assert c.call("echo", small=1) == {"small": 1}
    finally:
        server.shutdown()


def test_first_message_must_be_hello(served):
    path, *_ = served
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(WAIT)
        s.connect(str(path))
        s.sendall(b'{"id": 1, "method": "echo", "params": {}}\n')
        reply = json.loads(s.makefile("rb").readline())
        assert reply["ok"] is False and reply["error"]["kind"] == "ProtocolError"
        assert s.recv(1) == b""  # server closed the connection


def test_malformed_request_gets_an_error_and_connection_continues(served):
    path, *_ = served
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(WAIT)
        s.connect(str(path))
        f = s.makefile("rb")
        s.sendall(b'{"hello": {"session_id": "raw", "pid": 1, "client": "nc", "user_id": null}}\n')
        assert json.loads(f.readline())["ok"] is True
        s.sendall(b"not json\n")
        assert json.loads(f.readline())["error"]["kind"] == "ProtocolError"
        s.sendall(b'{"id": 7, "method": "echo", "params": {"a": 1}}\n')
        assert json.loads(f.readline()) == {"id": 7, "result": {"a": 1}}


def test_socket_is_private_to_the_user(served):
    path, *_ = served
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_stale_socket_is_replaced_and_shutdown_removes_the_file(sock_dir):
    path = sock_dir / "engram.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, as after a SIGKILL
    assert path.exists() and not server_running(path)
    server = RpcServer(path, handler)
    server.start()
    assert server_running(path)
    with RpcClient(path) as c:
        assert c.call("echo", a=1) == {"a": 1}
    server.shutdown()
    assert not path.exists() and not server_running(path)


def test_second_server_on_a_live_socket_refuses_to_bind(served):
    path, *_ = served
    with pytest.raises(RuntimeError, match="another server"):
        RpcServer(path, handler).bind()
    assert server_running(path)


def test_shutdown_ends_open_sessions_as_unclean(sock_dir):
    rec = Recorder()
    path = sock_dir / "engram.sock"
    server = RpcServer(path, handler, on_disconnect=rec.on_disconnect)
    server.start()
    c = RpcClient(path, session_id="open")
    c.call("echo")
    server.shutdown()
    assert rec.wait_disconnect("open") is False
    c.close()


def test_call_times_out_when_the_handler_does_not_answer(served):
    path, _, extra, _ = served
    release = threading.Event()
    extra["hang"] = lambda params, peer: release.wait(WAIT)
    try:
        with RpcClient(path, timeout=0.3) as c:
            with pytest.raises(RpcError) as e:
                c.call("hang")
            assert e.value.kind == "Timeout"
    finally:
        release.set()


def test_no_daemon_and_no_spawn_is_an_error(sock_dir):
    with pytest.raises(RpcError) as e:
        RpcClient(sock_dir / "none.sock").call("echo")
    assert e.value.kind == "DaemonUnavailable"


# ---------------------------------------------------------------- spawned daemon

DAEMON = """
import os, signal, sys
sys.path.insert(0, {repo!r})
from pathlib import Path
from engram.server.rpc_server import RpcServer
from engram.server.rpc import acquire_daemon_lock

sock = Path(sys.argv[1])
lock = acquire_daemon_lock(sock)
if lock is None:
    sys.exit(0)  # another daemon serves
with open(sock.parent / "starts", "a") as f:
    f.write(f"{{os.getpid()}}\\n")

def handler(method, params, peer):
    if method == "pid":
        return os.getpid()
    if method == "whoami":
        return peer.session_id
    if method == "die":
        with open(sock.parent / "die-calls", "a") as f:
            f.write("x\\n")
        os._exit(3)
    return params

server = RpcServer(sock, handler)
signal.signal(signal.SIGTERM, lambda *a: server.shutdown())
server.serve_forever()
"""


@pytest.fixture
def daemon(sock_dir):
    script = sock_dir / "daemon.py"
    script.write_text(DAEMON.format(repo=str(REPO)))
    path = sock_dir / "engram.sock"
    yield path, [sys.executable, str(script), str(path)]
    # Kill every daemon these clients spawned, including a late starter that
    # would take the lock once the winner is gone. Only live children of this
    # process are signalled, so a reused pid is never hit.
    for pid in list(rpc_client._spawned):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        rpc_client._spawned.discard(pid)


def starts(d: Path) -> list[int]:
    f = d / "starts"
    return [int(x) for x in f.read_text().split()] if f.exists() else []


def reap(pid: int) -> None:
    """Wait for a killed daemon (our child: this process spawned it) to be gone."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def test_client_spawns_the_daemon_and_respawns_it_after_sigkill(daemon):
    path, argv = daemon
    with RpcClient(path, spawn=argv, session_id="keep") as c:
        first = c.call("pid")
        assert first != os.getpid() and c.server_pid == first
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        os.kill(first, signal.SIGKILL)
        reap(first)
        assert path.exists()  # stale socket left behind
        second = c.call("pid")
        assert second != first and c.server_pid == second
        assert c.call("whoami") == "keep"  # the session id survives the respawn
    assert starts(path.parent) == [first, second]


def test_two_clients_racing_to_spawn_end_with_one_daemon(daemon):
    path, argv = daemon
    n = 3
    barrier = threading.Barrier(n, timeout=WAIT)
    pids: dict[int, object] = {}

    def worker(i: int) -> None:
        with RpcClient(path, spawn=argv) as c:
            barrier.wait()
            try:
                pids[i] = c.call("pid")
            except RpcError as e:
                pids[i] = e

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 2)
    assert len(set(pids.values())) == 1, pids
    assert starts(path.parent) == [pids[0]]


def test_daemon_that_loses_the_lock_exits_quietly(daemon):
    path, argv = daemon
    held = acquire_daemon_lock(path)
    assert held is not None
    try:
        assert acquire_daemon_lock(path) is None
        done = subprocess.run(argv, check=False, capture_output=True, timeout=WAIT)
        assert done.returncode == 0 and done.stderr == b""
        assert not path.exists() and starts(path.parent) == []
    finally:
        held.close()
    again = acquire_daemon_lock(path)
    assert again is not None  # released with the holder's handle
    again.close()


def test_request_is_not_repeated_when_the_daemon_dies_handling_it(daemon):
    path, argv = daemon
    with RpcClient(path, spawn=argv) as c:
        first = c.call("pid")
        with pytest.raises(RpcError) as e:
            c.call("die")
        assert e.value.kind == "ConnectionLost"
        assert (path.parent / "die-calls").read_text() == "x\n"
        reap(first)
        assert c.call("pid") != first


def test_spawn_that_fails_is_reported_with_the_log_path(sock_dir):
    argv = [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(5)"]
    with pytest.raises(RpcError) as e:
        RpcClient(sock_dir / "engram.sock", spawn=argv).call("echo")
    assert e.value.kind == "DaemonUnavailable"
    assert "code 5" in e.value.message and "daemon.log" in e.value.message
    assert "boom" in (sock_dir / "daemon.log").read_text()


def test_a_stopping_server_answers_the_request_it_is_running(sock_dir):
    """shutdown() while a handler runs: its reply still reaches the client (a daemon asked to exit
    by a newer client must not cut off a write it already did)."""
    started, release = threading.Event(), threading.Event()

    def handler(method, params, peer):
        if method == "slow":
            started.set()
            release.wait(WAIT)
        return {"done": method}

    server = RpcServer(sock_dir / "s.sock", handler, hello={"version": "9.9.9", "schema": 42})
    server.start()
    client = RpcClient(sock_dir / "s.sock", client="t")
    assert client.call("fast") == {"done": "fast"}
    assert (client.server_version, client.server_schema) == ("9.9.9", 42)
    got = {}
    t = threading.Thread(target=lambda: got.update(r=client.call("slow")))
    t.start()
    assert started.wait(WAIT)
    stopper = threading.Thread(target=server.shutdown, kwargs={"timeout": WAIT})
    stopper.start()
    release.set()
    t.join(WAIT)
    stopper.join(WAIT)
    assert got["r"] == {"done": "slow"}
    client.close()


def test_a_newer_client_replaces_an_older_server(sock_dir):
    """A client whose version is newer asks the server to exit (the daemon's __shutdown__) and
    spawns its own; an equal or newer server is used as it is."""
    from engram.server.rpc_client import _older

    assert _older("0.1.0", "0.2.0") and _older("0.9.0", "0.10.0") and not _older("0.2.0", "0.1.0")
    assert not _older("1.0.0", "1.0.0")
    calls = []

    def handler(method, params, peer):
        calls.append((method, params))
        if method == "__shutdown__":
            threading.Thread(target=stop).start()
        return {"ok": True}

    def stop():
        # As the real daemon: it lets go of the lock when it has stopped listening (at its exit),
        # not before, so the client that waits for the lock cannot reach the old server again.
        server.shutdown()
        lock.close()

    server = RpcServer(sock_dir / "s.sock", handler, hello={"version": "0.0.1", "schema": 1})
    lock = acquire_daemon_lock(sock_dir / "s.sock")
    server.start()
    spawn = [
        sys.executable,
        "-c",
        textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(REPO)!r})
        from engram.server.rpc_server import RpcServer
        from engram.server.rpc import acquire_daemon_lock
        lock = acquire_daemon_lock({str(sock_dir / "s.sock")!r})
        s = RpcServer({str(sock_dir / "s.sock")!r}, lambda m, p, peer: "new", hello={{"version": "0.2.0"}})
        # Not a wait: the new server lives until the test kills it, 20 s at most if it never does.
        s.start(); import time; time.sleep(20)
    """),
    ]
    client = RpcClient(sock_dir / "s.sock", client="t", version="0.2.0", spawn=spawn)
    try:
        assert client.call("health") == "new"
        assert client.server_version == "0.2.0"
        assert calls[0] == ("__shutdown__", {"reason": "upgrade", "version": "0.2.0"})
        assert client.replaced[0]["version"] == "0.0.1"
    finally:
        if client.server_pid != os.getpid():  # the old server is this process: never signal it
            with contextlib.suppress(Exception):
                os.kill(client.server_pid, signal.SIGTERM)
        client.close()
        server.shutdown()
        lock.close()
