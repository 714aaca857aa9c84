"""Process sharing: one daemon owns the database, clients forward calls over a Unix socket.

DuckDB lets one process at a time open a file for writing, yet every MCP client
starts its own engram process. So one long-running daemon serves requests on a
Unix domain socket and each client process forwards its calls to it, starting
the daemon when none answers. This module is generic: it knows nothing about
memories, only methods, params and sessions. It holds what both sides share (the wire format, its
limits, the daemon's lock file); the daemon's side is rpc_server.py, the clients' rpc_client.py.

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

import errno
import fcntl
import json
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from engram.ops import json_default

__all__ = [
    "MAX_REQUEST_BYTES",
    "MAX_RESPONSE_BYTES",
    "SPAWN_TIMEOUT",
    "Peer",
    "RpcError",
    "acquire_daemon_lock",
    "dumps",
    "lock_is_free",
    "lock_path_for",
    "parse_reply",
    "read_line",
    "server_running",
    "too_large",
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


def too_large(limit: int) -> str:
    size = f"{limit / 2**20:g} MiB" if limit >= 2**20 else f"{limit} bytes"
    return f"request too large (limit {size})"


def parse_reply(line: bytes) -> dict:
    try:
        msg = json.loads(line)
    except ValueError:
        msg = None
    if not isinstance(msg, dict):
        raise RpcError("the engram daemon sent a malformed reply", "ProtocolError")
    return msg


def read_line(f: IO[bytes], limit: int) -> bytes | None:
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


def lock_is_free(socket_path: Path) -> bool:
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
