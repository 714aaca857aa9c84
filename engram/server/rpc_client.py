"""The clients' side of the socket protocol (rpc.py): forward calls to the daemon, starting it (or a
newer one) when none answers."""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import select
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Self

from engram.server.rpc import (
    MAX_REQUEST_BYTES,
    MAX_RESPONSE_BYTES,
    SPAWN_TIMEOUT,
    RpcError,
    dumps,
    lock_is_free,
    parse_reply,
    read_line,
    too_large,
)

log = logging.getLogger(__name__)


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
            raise RpcError(too_large(self.max_request_bytes), "RequestTooLarge")
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
            line = read_line(self._file, MAX_RESPONSE_BYTES)
        except TimeoutError:
            self._drop()  # a late reply would be mistaken for the next one's
            raise RpcError(f"engram daemon did not answer {method} within {self.timeout:g}s", "Timeout") from None
        except OverflowError:
            self._drop()
            raise RpcError("response too large", "ProtocolError") from None
        except OSError:
            line = None
        if line is None:
            self._drop()
            raise RpcError(f"the engram daemon went away during {method}", "ConnectionLost")
        try:
            msg = parse_reply(line)
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
            line = read_line(f, MAX_RESPONSE_BYTES)
        except (OSError, OverflowError) as e:
            f.close()
            sock.close()
            raise RpcError(
                f"handshake with the engram daemon failed: {e or type(e).__name__}", "ConnectionLost"
            ) from None
        try:
            reply = parse_reply(line) if line else None
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
        log.warning(
            "the engram daemon (pid %s) runs version %s, this client %s: asking it to finish and "
            "exit, then starting this version's",
            self.server_pid,
            self.server_version or "older",
            self.version,
        )
        req_id = next(self._ids)
        try:
            assert self._sock is not None
            self._sock.sendall(
                dumps(
                    {"id": req_id, "method": "__shutdown__", "params": {"reason": "upgrade", "version": self.version}}
                ),
                _SEND_FLAGS,
            )
            self._read_reply(req_id, "__shutdown__")
        except (RpcError, OSError):
            pass  # it may close before answering
        self._drop()
        deadline = time.monotonic() + self.spawn_timeout
        while not lock_is_free(self.socket_path):
            if time.monotonic() > deadline:
                raise RpcError(
                    f"the older engram daemon (pid {old['pid']}) did not exit within {self.spawn_timeout:g}s",
                    "DaemonUnavailable",
                )
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
            if code == 0 and lock_is_free(self.socket_path):
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
