"""Where MCP tool calls go: an in-process Api (tests, HTTP) or the daemon over its socket (stdio)."""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from typing import Any, Protocol

from engram.server.rpc import RpcClient

__all__ = ["Backend", "LocalBackend", "RemoteBackend", "SessionBackends"]


class Backend(Protocol):
    """Runs one operation for one caller; raises EngramError or RpcError with a readable message."""

    def call(self, name: str, args: dict[str, Any]) -> dict: ...


class LocalBackend:
    """Calls an in-process Api as one session (the Api's owner keeps the database)."""

    def __init__(self, api: Any, ctx: Any):
        self.api = api
        self.ctx = ctx

    def call(self, name: str, args: dict[str, Any]) -> dict:
        return self.api.call(name, args, self.ctx)


class RemoteBackend:
    """Forwards calls to the daemon; the RpcClient's connection is this process's session."""

    def __init__(self, client: RpcClient):
        self.client = client

    def call(self, name: str, args: dict[str, Any]) -> dict:
        return self.client.call(name, **args)


class SessionBackends:
    """Backend factory for a multi-session transport (streamable HTTP): one engram session per MCP session.

    The MCP session is named by the `mcp-session-id` header when the transport sends one, else by the
    connection object. Sessions seen here end by heartbeat timeout (HTTP has no disconnect signal).
    """

    def __init__(self, api: Any, client: str = "http", user_id: str | None = None, max_sessions: int = 1024):
        self.api = api
        self.client = client
        self.user_id = user_id
        self.max_sessions = max_sessions
        self._by_key: OrderedDict[Any, LocalBackend] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, mcp_ctx: Any) -> LocalBackend:
        from engram.api import Ctx

        key = _session_key(mcp_ctx)
        with self._lock:
            backend = self._by_key.get(key)
            if backend is None:
                backend = LocalBackend(self.api, Ctx(f"{self.client}-{uuid.uuid4().hex}", self.user_id,
                                                     self.client))
                self._by_key[key] = backend
                while len(self._by_key) > self.max_sessions:
                    self._by_key.popitem(last=False)
            else:
                self._by_key.move_to_end(key)
            return backend


def _session_key(mcp_ctx: Any) -> Any:
    headers = None
    try:
        headers = mcp_ctx.headers
    except (AttributeError, ValueError):
        pass
    if headers:
        sid = headers.get("mcp-session-id")
        if sid:
            return ("header", sid)
    try:
        return ("conn", id(mcp_ctx.session))
    except (AttributeError, ValueError):
        return ("conn", None)
