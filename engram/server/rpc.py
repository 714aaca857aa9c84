"""Process sharing: one daemon owns the database, clients forward calls over a Unix socket.

DuckDB lets one process at a time open a file for writing, yet every MCP client
starts its own engram process. So one long-running daemon serves requests on a
Unix domain socket and each client process forwards its calls to it, starting
the daemon when none answers. This module is generic: it knows nothing about
memories, only methods, params and sessions.

Wire protocol: newline-delimited JSON, one connection per client session.

    client -> {"hello": {"session_id", "pid", "client", "user_id", "store", "project", "branch", "version"}}
    server -> {"ok": true, "server_pid": int, "session_id": str, "version": str, "schema": int}
           | {"ok": false, "error": {"message": str, "kind": str}}   (on_connect refused it)

"store" names the store the client means (engram.core.settings.store_identity), so a daemon serving
another one can refuse instead of acting on the wrong rows; a client that sends none (older
ones, `engram stop`) is served whatever the daemon serves. "project" and "branch": where the
client works (engram.core.project.detect_project, run in the client's own directory); the session
reads and writes in that project. None (or left out): no project. "version" is the package version of
each side and "schema" the store's schema version: a client that finds an older daemon (or one
that sends no version: it predates the field) asks it to finish and exit ("__shutdown__" with
{"reason": "upgrade"}), then starts its own (RpcClient(version=...)). A daemon that stops lets
every request it already received finish and answer before it closes the connections.
    client -> {"id": n, "method": str, "params": {...}}
    server -> {"id": n, "result": ...} | {"id": n, "error": {"message": str, "kind": str}}
    client -> {"bye": true}      (clean end of session; EOF without it means interrupted)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import json
import logging
import os
import select
import selectors
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Self

from engram.core.types import EngramError
from engram.ops import json_default

__all__ = [
    "MAX_REQUEST_BYTES",
    "Peer",
    "RpcClient",
    "RpcError",
    "RpcServer",
    "acquire_daemon_lock",
    "dumps",
    "lock_path_for",
    "server_running",
]

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 16 * 1024 * 1024
# Responses (search results, exports) may be larger than requests; still bounded.
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
SPAWN_TIMEOUT = 60.0  # the daemon loads an embedding model before it listens


class RpcError(Exception):
    """A call that failed: the handler raised, or the daemon could not be reached.

    `kind` is the handler's exception class name (e.g. "NotFound"), or one of
    "ConnectionLost", "Timeout", "DaemonUnavailable", "RequestTooLarge",
    "ProtocolError", "Closed" for transport failures.
    """

    def __init__(self, message: str, kind: str = "RpcError"):
        super().__init__(message)
        self.message = message
        self.kind = kind


@dataclass(frozen=True)
class Peer:
    """One client connection, as announced in its hello."""

    session_id: str
    pid: int | None
    client: str
    user_id: str | None
    conn_id: int
    store: str | None = None  # the store the client expects (None: any, as older clients)
    project: str | None = None  # the project the client works in (None: none)
    branch: str | None = None
    version: str | None = None  # the client's package version (None: a client older than the field)


# ---------------------------------------------------------------- encoding


def dumps(obj: Any) -> bytes:
    """One wire line: compact JSON plus newline; handles datetimes, numpy, dataclasses, sets."""
    return json.dumps(obj, default=json_default, separators=(",", ":")).encode() + b"\n"


def _too_large(limit: int) -> str:
    size = f"{limit / 2**20:g} MiB" if limit >= 2**20 else f"{limit} bytes"
    return f"request too large (limit {size})"


def _parse_reply(line: bytes) -> dict:
    try:
        msg = json.loads(line)
    except ValueError:
        msg = None
    if not isinstance(msg, dict):
        raise RpcError("the engram daemon sent a malformed reply", "ProtocolError")
    return msg


def _read_line(f: IO[bytes], limit: int) -> bytes | None:
    """Read one newline-terminated line of at most `limit` bytes.

    Returns None at EOF (a partial last line without newline is dropped: the
    sender died mid-write, so it was never a whole request). Raises
    OverflowError after discarding the rest of an over-long line, so the
    connection stays in step.
    """
    line = f.readline(limit + 1)
    if not line.endswith(b"\n"):
        if len(line) <= limit:
            return None
        while True:
            rest = f.readline(1024 * 1024)
            if not rest or rest.endswith(b"\n"):
                break
        raise OverflowError
    return line


# ---------------------------------------------------------------- daemon side


def lock_path_for(socket_path: Path | str) -> Path:
    """The daemon lock file next to the socket: engram.sock -> engram.lock."""
    return Path(socket_path).with_suffix(".lock")


def acquire_daemon_lock(path: Path | str) -> IO | None:
    """Take the exclusive daemon lock, or return None if another daemon holds it.

    `path` is the socket path (or the lock path itself). Call it first thing in
    the daemon entry point, before loading models, and exit quietly (code 0)
    on None: the holder serves. Keep the returned handle open for the life of
    the process; the kernel releases the lock when the process dies.
    """
    lock_path = lock_path_for(path)
    lock_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fh = open(lock_path, "a+")  # noqa: SIM115 - must outlive this function
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        fh.close()
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        raise
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    return fh


def _lock_is_free(socket_path: Path) -> bool:
    """True when no daemon holds the lock (none running, none starting)."""
    fh = acquire_daemon_lock(socket_path)
    if fh is None:
        return False
    fh.close()
    return True


def server_running(socket_path: Path | str) -> bool:
    """True when something accepts connections on the socket."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2.0)
    try:
        s.connect(str(socket_path))
        return True
    except OSError:
        return False
    finally:
        s.close()


class RpcServer:
    """Serves `handler(method, params, peer)` on a Unix socket, one thread per connection.

    Handler calls from different connections run concurrently; the handler
    does its own locking. Calls on one connection run in order.
    `on_disconnect(peer, clean)` gets clean=True only when the client said bye.
    """

    def __init__(
        self,
        socket_path: Path,
        handler: Callable[[str, dict, Peer], Any],
        *,
        on_connect: Callable[[Peer], None] | None = None,
        on_disconnect: Callable[[Peer, bool], None] | None = None,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        hello: dict[str, Any] | None = None,
    ):
        self.socket_path = Path(socket_path)
        self.hello = dict(hello or {})  # added to every accepted hello's reply (versions)
        self.handler = handler
        self.on_connect = on_connect
        self.on_disconnect = on_disconnect
        self.max_request_bytes = max_request_bytes
        self._listener: socket.socket | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._conn_ids = itertools.count(1)
        self._conns: dict[int, tuple[socket.socket, threading.Thread]] = {}
        self._conns_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._serving = False
        self._fds_closed = False

    # -- lifecycle

    def bind(self) -> None:
        """Create the listening socket (mode 0600). Idempotent; serve_forever calls it."""
        if self._listener is not None:
            return
        path = self.socket_path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.exists() or path.is_symlink():
            if server_running(path):
                raise RuntimeError(f"another server is listening on {path}")
            # Left by a killed daemon. Callers hold the daemon lock, so no live
            # daemon can be binding this path at the same time.
            path.unlink()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Bind under a private name, restrict it, then move it into place, so
        # the socket is never reachable with the umask's looser mode.
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        if len(os.fsencode(tmp)) > 100:
            tmp = path.with_name(f".eg{os.getpid()}")
        try:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            s.bind(str(tmp))
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
            s.listen(64)
        except BaseException:
            s.close()
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        self._listener = s

    def serve_forever(self) -> None:
        """Accept connections until shutdown(); blocks."""
        self.bind()
        listener = self._listener
        assert listener is not None
        sel = selectors.DefaultSelector()
        sel.register(listener, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        self._serving = True
        self._ready.set()
        try:
            while not self._stopping.is_set():
                for key, _ in sel.select():
                    if key.fileobj is not listener or self._stopping.is_set():
                        continue
                    try:
                        conn, _ = listener.accept()
                    except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                        continue
                    conn_id = next(self._conn_ids)
                    t = threading.Thread(
                        target=self._serve_conn,
                        args=(conn, conn_id),
                        name=f"engram-rpc-{conn_id}",
                        daemon=True,
                    )
                    with self._conns_lock:
                        self._conns[conn_id] = (conn, t)
                    t.start()
        finally:
            # The serving thread owns these; shutdown() may run in a signal
            # handler on this very thread, so it must not close them under us.
            sel.close()
            self._close_fds()

    def start(self) -> None:
        """Bind now (errors surface here) and serve in a background thread."""
        self.bind()
        self._thread = threading.Thread(target=self.serve_forever, name="engram-rpc", daemon=True)
        self._thread.start()
        self._ready.wait()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop accepting, close open connections, remove the socket file.

        Open connections end as unclean (on_disconnect(peer, False)). Waits up
        to `timeout` for their threads so callbacks finish before the caller
        closes the database. Safe to call from a signal handler or a handler.
        """
        if self._stopping.is_set():
            return
        self._stopping.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._listener is not None:
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
        if not self._serving:
            self._close_fds()
        elif self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        with self._conns_lock:
            conns = list(self._conns.values())
        # Reading side only: a request already received (or queued on the socket) is still
        # answered, then the reader sees EOF; a client sending more gets EPIPE before any byte
        # is taken, so it knows the request was never seen and sends it to the next daemon.
        for conn, _ in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RD)
        deadline = time.monotonic() + timeout
        for _, t in conns:
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))
        for conn, t in conns:  # a handler still running after the timeout: cut it off
            if t.is_alive():
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)

    def connections(self) -> int:
        """How many client connections are open now."""
        with self._conns_lock:
            return len(self._conns)

    def _close_fds(self) -> None:
        with self._conns_lock:
            if self._fds_closed:
                return  # closing twice could hit an fd number reused meanwhile
            self._fds_closed = True
        if self._listener is not None:
            self._listener.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    # -- one connection

    def _serve_conn(self, conn: socket.socket, conn_id: int) -> None:
        peer: Peer | None = None
        clean = False
        f = conn.makefile("rb")
        try:
            peer = self._handshake(conn, f, conn_id)
            if peer is None:
                return
            while True:
                try:
                    line = _read_line(f, self.max_request_bytes)
                except OverflowError:
                    self._send(
                        conn,
                        {
                            "id": None,
                            "error": {
                                "message": _too_large(self.max_request_bytes),
                                "kind": "RequestTooLarge",
                            },
                        },
                    )
                    continue
                if line is None:
                    return
                try:
                    msg = json.loads(line)
                except ValueError:
                    self._send(
                        conn,
                        {"id": None, "error": {"message": "malformed JSON request", "kind": "ProtocolError"}},
                    )
                    continue
                if isinstance(msg, dict) and msg.get("bye"):
                    clean = True
                    return
                self._send(conn, self._dispatch(msg, peer))
        except OSError:
            pass  # the client vanished mid-write; treated as EOF
        except Exception:
            log.exception("rpc connection %d failed", conn_id)
        finally:
            f.close()
            conn.close()
            with self._conns_lock:
                self._conns.pop(conn_id, None)
            if peer is not None and self.on_disconnect is not None:
                try:
                    self.on_disconnect(peer, clean)
                except Exception:
                    log.exception("on_disconnect failed for session %s", peer.session_id)

    def _handshake(self, conn: socket.socket, f: IO[bytes], conn_id: int) -> Peer | None:
        try:
            line = _read_line(f, self.max_request_bytes)
        except OverflowError:
            line = b"{}"
        if line is None:
            return None
        try:
            hello = json.loads(line).get("hello")
        except (ValueError, AttributeError):
            hello = None
        if not isinstance(hello, dict):
            self._send(
                conn, {"ok": False, "error": {"message": "expected hello first", "kind": "ProtocolError"}}
            )
            return None
        pid = hello.get("pid")
        peer = Peer(
            session_id=str(hello.get("session_id") or uuid.uuid4().hex),
            pid=pid if isinstance(pid, int) else None,
            client=str(hello.get("client") or "unknown"),
            user_id=hello.get("user_id") if isinstance(hello.get("user_id"), str) else None,
            conn_id=conn_id,
            store=hello.get("store") if isinstance(hello.get("store"), str) else None,
            project=hello.get("project") if isinstance(hello.get("project"), str) else None,
            branch=hello.get("branch") if isinstance(hello.get("branch"), str) else None,
            version=hello.get("version") if isinstance(hello.get("version"), str) else None,
        )
        if self.on_connect is not None:
            try:
                self.on_connect(peer)
            except Exception as e:  # noqa: BLE001 - refuse the session, keep serving
                self._send(conn, {"ok": False, "error": _error_body(e)})
                return None
        self._send(conn, {**self.hello, "ok": True, "server_pid": os.getpid(), "session_id": peer.session_id})
        return peer

    def _dispatch(self, msg: Any, peer: Peer) -> dict:
        req_id = msg.get("id") if isinstance(msg, dict) else None
        method = msg.get("method") if isinstance(msg, dict) else None
        params = msg.get("params", {}) if isinstance(msg, dict) else None
        if not isinstance(method, str) or not isinstance(params, dict):
            return {
                "id": req_id,
                "error": {
                    "message": "request needs a method name and a params object",
                    "kind": "ProtocolError",
                },
            }
        try:
            result = self.handler(method, params, peer)
            # Encode here so an unencodable result becomes an error reply, not a dead connection.
            dumps(result)
        except Exception as e:  # noqa: BLE001 - a handler bug must not take the daemon down
            return {"id": req_id, "error": _error_body(e, method)}
        return {"id": req_id, "result": result}

    @staticmethod
    def _send(conn: socket.socket, msg: dict) -> None:
        conn.sendall(dumps(msg))


def _error_body(e: Exception, method: str = "hello") -> dict:
    if isinstance(e, EngramError):
        return {"message": str(e), "kind": type(e).__name__}
    # Anything else is a bug: the traceback stays in the daemon log.
    log.exception("rpc %s failed", method)
    return {"message": f"internal error: {type(e).__name__}", "kind": type(e).__name__}


# ---------------------------------------------------------------- client side


class RpcClient:
    """Forwards calls to the daemon, starting it (via `spawn` argv) when none answers.

    One connection is one session; `session_id` survives reconnects, so a
    respawned daemon sees the same session. Thread-safe: calls are serialised.
    `store`: the store this client means (engram.core.settings.store_identity); a daemon serving
    another refuses the session (kind "StoreMismatch") rather than act on the wrong rows.
    """

    def __init__(
        self,
        socket_path: Path,
        *,
        spawn: Sequence[str] | None = None,
        session_id: str | None = None,
        client: str = "engram",
        user_id: str | None = None,
        store: str | None = None,
        project: str | None = None,
        branch: str | None = None,
        timeout: float = 30.0,
        spawn_timeout: float = SPAWN_TIMEOUT,
        log_path: Path | None = None,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        version: str | None = None,
    ):
        self.socket_path = Path(socket_path)
        self.spawn = list(spawn) if spawn else None
        # This client's package version: a daemon older than it (with `spawn`) is replaced.
        self.version = version
        self.server_version: str | None = None
        self.server_schema: int | None = None
        self.replaced: list[dict] = []  # the older daemons this client asked to exit
        self.session_id = session_id or uuid.uuid4().hex
        self.client = client
        self.user_id = user_id
        self.store = store
        self.project = project
        self.branch = branch
        self.timeout = timeout
        self.spawn_timeout = spawn_timeout
        self.log_path = Path(log_path) if log_path else self.socket_path.parent / "daemon.log"
        self.max_request_bytes = max_request_bytes
        self.server_pid: int | None = None
        self._sock: socket.socket | None = None
        self._file: IO[bytes] | None = None
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._closed = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(clean=exc_type is None)

    def call(self, method: str, **params: Any) -> Any:
        """Run `method` in the daemon and return its result; raises RpcError.

        If the daemon is gone before the request is sent, reconnects (spawning
        it if configured) and tries once more. Once a request is sent it is
        never repeated: the daemon may have acted on it.
        """
        req_id = next(self._ids)
        data = dumps({"id": req_id, "method": method, "params": params})
        if len(data) > self.max_request_bytes:
            raise RpcError(_too_large(self.max_request_bytes), "RequestTooLarge")
        with self._lock:
            if self._closed:
                raise RpcError("client is closed", "Closed")
            for attempt in (1, 2):
                sock = self._ensure_connected()
                try:
                    sock.sendall(data, _SEND_FLAGS)
                except OSError:
                    # Not fully written, so the daemon never saw a whole request.
                    self._drop()
                    if attempt == 2:
                        raise RpcError("lost the connection to the engram daemon", "ConnectionLost") from None
                    continue
                return self._read_reply(req_id, method)
        raise AssertionError("unreachable")

    def beat(self, method: str) -> Any:
        """Send `method` (the daemon's heartbeat) if connected now; never connects or spawns,
        so a stopped daemon is not started again by a client that is only idling. The daemon's
        answer, or None when nothing was sent or it failed."""
        if not self._lock.acquire(blocking=False):
            return None  # a call is running: it is a heartbeat of its own
        try:
            if self._closed or self._sock is None:
                return None
            req_id = next(self._ids)
            try:
                self._sock.sendall(dumps({"id": req_id, "method": method, "params": {}}), _SEND_FLAGS)
            except OSError:
                self._drop()  # not fully written: the next call reconnects
                return None
            try:
                return self._read_reply(req_id, method)
            except RpcError:  # refused, or a transport failure _read_reply already dealt with
                return None
        finally:
            self._lock.release()

    def close(self, clean: bool = True) -> None:
        """End the session; clean=True tells the daemon it ended on purpose."""
        with self._lock:
            self._closed = True
            if self._sock is not None and clean:
                with contextlib.suppress(OSError):
                    self._sock.sendall(dumps({"bye": True}), _SEND_FLAGS)
            self._drop()

    # -- internals

    def _read_reply(self, req_id: int, method: str) -> Any:
        assert self._file is not None
        try:
            line = _read_line(self._file, MAX_RESPONSE_BYTES)
        except TimeoutError:
            self._drop()  # a late reply would be mistaken for the next one's
            raise RpcError(
                f"engram daemon did not answer {method} within {self.timeout:g}s", "Timeout"
            ) from None
        except OverflowError:
            self._drop()
            raise RpcError("response too large", "ProtocolError") from None
        except OSError:
            line = None
        if line is None:
            self._drop()
            raise RpcError(f"the engram daemon went away during {method}", "ConnectionLost")
        try:
            msg = _parse_reply(line)
        except RpcError:
            self._drop()
            raise
        if "error" in msg:
            err = msg["error"] if isinstance(msg["error"], dict) else {}
            if msg.get("id") not in (req_id, None):
                self._drop()
                raise RpcError("reply out of order", "ProtocolError")
            raise RpcError(str(err.get("message", "")), str(err.get("kind", "RpcError")))
        if msg.get("id") != req_id:
            self._drop()
            raise RpcError("reply out of order", "ProtocolError")
        return msg.get("result")

    def _drop(self) -> None:
        for c in (self._file, self._sock):
            if c is not None:
                with contextlib.suppress(OSError):
                    c.close()
        self._file = None
        self._sock = None

    def _ensure_connected(self) -> socket.socket:
        if self._sock is not None and _peer_closed(self._sock):
            self._drop()
        if self._sock is None:
            self._connect()
        assert self._sock is not None
        return self._sock

    def _connect(self) -> None:
        sock = _try_connect(self.socket_path, self.timeout)
        if sock is None:
            if not self.spawn:
                raise RpcError(f"no engram daemon at {self.socket_path}", "DaemonUnavailable")
            sock = self._spawn_and_wait()
        f = sock.makefile("rb")
        try:
            sock.sendall(
                dumps(
                    {
                        "hello": {
                            "session_id": self.session_id,
                            "pid": os.getpid(),
                            "client": self.client,
                            "user_id": self.user_id,
                            "store": self.store,
                            "project": self.project,
                            "branch": self.branch,
                            "version": self.version,
                        }
                    }
                ),
                _SEND_FLAGS,
            )
            line = _read_line(f, MAX_RESPONSE_BYTES)
        except (OSError, OverflowError) as e:
            f.close()
            sock.close()
            raise RpcError(
                f"handshake with the engram daemon failed: {e or type(e).__name__}", "ConnectionLost"
            ) from None
        try:
            reply = _parse_reply(line) if line else None
        except RpcError:
            reply = None
        if not reply or not reply.get("ok"):
            f.close()
            sock.close()
            err = (reply or {}).get("error") or {}
            raise RpcError(
                err.get("message", "the engram daemon refused the session"), err.get("kind", "ProtocolError")
            )
        self.server_pid = reply.get("server_pid")
        self.server_version = reply.get("version") if isinstance(reply.get("version"), str) else None
        self.server_schema = reply.get("schema") if isinstance(reply.get("schema"), int) else None
        self._sock, self._file = sock, f
        if self._should_replace():
            self._replace_daemon()

    def _should_replace(self) -> bool:
        """An older daemon (or one predating the version field) serving a client that can start
        its own: once per client, so a spawn that still runs old code cannot loop."""
        if not self.version or not self.spawn or self.replaced:
            return False
        return self.server_version is None or _older(self.server_version, self.version)

    def _replace_daemon(self) -> None:
        """Ask the older daemon to finish and exit, wait until it released the store, start ours.

        The daemon answers every request it already received before it closes (an older one
        may cut off a reply in flight: that client sees ConnectionLost, as on any daemon exit).
        """
        old = {"pid": self.server_pid, "version": self.server_version, "schema": self.server_schema}
        self.replaced.append(old)
        log.warning("the engram daemon (pid %s) runs version %s, this client %s: asking it to finish and "
                    "exit, then starting this version's", self.server_pid, self.server_version or "older",
                    self.version)
        req_id = next(self._ids)
        try:
            assert self._sock is not None
            self._sock.sendall(dumps({"id": req_id, "method": "__shutdown__",
                                      "params": {"reason": "upgrade", "version": self.version}}), _SEND_FLAGS)
            self._read_reply(req_id, "__shutdown__")
        except (RpcError, OSError):
            pass  # it may close before answering
        self._drop()
        deadline = time.monotonic() + self.spawn_timeout
        while not _lock_is_free(self.socket_path):
            if time.monotonic() > deadline:
                raise RpcError(f"the older engram daemon (pid {old['pid']}) did not exit within "
                               f"{self.spawn_timeout:g}s", "DaemonUnavailable")
            time.sleep(0.05)  # waiting on another process to exit; there is nothing to block on
        self._connect()

    def _spawn_and_wait(self) -> socket.socket:
        assert self.spawn is not None
        deadline = time.monotonic() + self.spawn_timeout
        pid = self._start_daemon()
        delay = 0.02
        while time.monotonic() < deadline:
            sock = _try_connect(self.socket_path, self.timeout)
            if sock is not None:
                return sock
            code = _exit_code(pid)
            if code not in (None, 0):
                why = _last_line(self.log_path)
                raise RpcError(
                    f"the engram daemon exited with code {code} before listening"
                    f"{f' ({why})' if why else ''}; see {self.log_path}",
                    "DaemonUnavailable",
                )
            # Code 0 means it lost the lock race and another daemon will serve.
            # If no daemon holds the lock any more (the holder died or was
            # shutting down), nobody will: start one again.
            if code == 0 and _lock_is_free(self.socket_path):
                pid = self._start_daemon()
            time.sleep(delay)  # polling another process; there is no event to wait on
            delay = min(delay * 2, 0.25)
        raise RpcError(
            f"the engram daemon did not start listening within {self.spawn_timeout:g}s; see {self.log_path}",
            "DaemonUnavailable",
        )

    def _start_daemon(self) -> int:
        assert self.spawn is not None
        _reap_spawned()
        self.log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # posix_spawn, not Popen: the daemon outlives this client, and a Popen
        # object dropped while its child runs warns and keeps nothing useful.
        pid = os.posix_spawnp(
            self.spawn[0],
            self.spawn,
            os.environ,
            setsid=True,  # its own session: no signals from this client's terminal
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, str(self.log_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
            ],
        )
        with _spawned_lock:
            _spawned.add(pid)
        return pid


def _older(a: str, b: str) -> bool:
    """Version a is older than b (release numbers compared as numbers; anything else as text)."""
    def key(v: str) -> tuple:
        parts = []
        for x in v.replace("-", ".").replace("+", ".").split("."):
            parts.append((0, int(x), "") if x.isdigit() else (1, 0, x))
        return tuple(parts)
    return key(a) < key(b)


# Daemons this process spawned; reaped when they exit so they leave no zombies.
_spawned: set[int] = set()
_spawned_lock = threading.Lock()


def _exit_code(pid: int) -> int | None:
    """The spawned daemon's exit code, or None while it runs."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return 0  # already reaped elsewhere; its fate is unknown, treat as a quiet exit
    if done == 0:
        return None
    with _spawned_lock:
        _spawned.discard(pid)
    return os.waitstatus_to_exitcode(status)


def _reap_spawned() -> None:
    with _spawned_lock:
        pids = list(_spawned)
    for pid in pids:
        _exit_code(pid)


def _last_line(path: Path, tail: int = 4096) -> str:
    """The last non-empty line of a log file (why a daemon failed to start), or ''."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - tail))
            lines = [x.strip() for x in f.read().decode("utf-8", "replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1][:1000] if lines else ""  # long enough for the advice a start error carries


_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)  # EPIPE instead of a SIGPIPE that kills the client


def _try_connect(path: Path, timeout: float) -> socket.socket | None:
    """A connected socket, or None when no daemon is listening there."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        s.close()
        return None
    except OSError as e:
        s.close()
        raise RpcError(f"cannot connect to {path}: {e}", "DaemonUnavailable") from None
    return s


def _peer_closed(sock: socket.socket) -> bool:
    """True when the daemon closed the connection (EOF pending), checked without blocking."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        data = sock.recv(1, socket.MSG_PEEK)
    except OSError:
        return True
    return data == b""
