"""The daemon's side of the socket protocol (rpc.py): accept connections, one session each, and
dispatch each request to the handler the daemon gives."""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import selectors
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from engram.core.types import EngramError
from engram.server.rpc import (
    MAX_REQUEST_BYTES,
    Peer,
    dumps,
    read_line,
    server_running,
    too_large,
)

log = logging.getLogger(__name__)


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
                    line = read_line(f, self.max_request_bytes)
                except OverflowError:
                    self._send(
                        conn,
                        {
                            "id": None,
                            "error": {
                                "message": too_large(self.max_request_bytes),
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
            line = read_line(f, self.max_request_bytes)
        except OverflowError:
            line = b"{}"
        if line is None:
            return None
        try:
            hello = json.loads(line).get("hello")
        except (ValueError, AttributeError):
            hello = None
        if not isinstance(hello, dict):
            self._send(conn, {"ok": False, "error": {"message": "expected hello first", "kind": "ProtocolError"}})
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
