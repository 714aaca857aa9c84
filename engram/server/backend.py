"""Where MCP tool calls go: an in-process Api (tests, HTTP) or the daemon over its socket (stdio)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from engram import __version__
from engram.core.types import Ctx
from engram.server.rpc import RpcError
from engram.server.rpc_client import RpcClient

# The RPC method a stdio server sends as its "still here" while its agent works (mcp.keep_alive);
# the daemon answers it without calling the Api.
HEARTBEAT = "__heartbeat__"

log = logging.getLogger(__name__)

__all__ = [
    "KEY_USER",
    "Backend",
    "LocalBackend",
    "RemoteBackend",
    "SessionBackends",
    "daemon_command",
    "derived_session_id",
    "header_user",
    "stdio_client",
]


class Backend(Protocol):
    """Runs one operation for one caller; raises EngramError or RpcError with a readable message."""

    def call(self, name: str, args: dict[str, Any]) -> dict: ...


class LocalBackend:
    """Calls an in-process Api as one session (the Api's owner keeps the database).

    end_after: the session is implicit (nothing identifies the client beyond this request), so
    it ends cleanly after each call, as on the REST routes, instead of being found interrupted.
    """

    def __init__(self, api: Any, ctx: Any, end_after: bool = False):
        self.api = api
        self.ctx = ctx
        self.end_after = end_after

    def call(self, name: str, args: dict[str, Any]) -> dict:
        try:
            return self.api.call(name, args, self.ctx)
        finally:
            if self.end_after:
                self.api.eng.end_session(self.ctx.session_id, clean=True, user_id=self.ctx.user_id)


def daemon_command(settings: Any) -> list[str]:
    """argv that starts the daemon with this interpreter, for the same home as this client."""
    return [sys.executable, "-m", "engram.server.daemon", "--home", str(settings.home)]


def stdio_client(settings: Any) -> RpcClient:
    """The stdio server's session with the daemon, already reaching for it on another thread.

    Made before the MCP SDK is even imported: the daemon starts (and loads the model) while this
    process imports the SDK and the host initialises, so the first tool call does not wait for
    both one after the other. Errors surface on that call instead.
    """
    from engram.core.project import detect_project

    # The host (Claude Code, Codex, Gemini CLI) starts this server in the directory it works in:
    # that directory's project is this session's (docs/projects.md).
    project = detect_project()
    client = RpcClient(
        settings.socket_path,
        spawn=daemon_command(settings),
        session_id=uuid.uuid4().hex,
        client="stdio",
        user_id=settings.user_id,
        store=settings.store,
        project=project.id if project else None,
        branch=project.branch if project else None,
        version=__version__,
    )

    def warm_up() -> None:
        try:
            client.call("health")
        except RpcError as e:
            log.warning("engram daemon not ready yet: %s", e.message)

    threading.Thread(target=warm_up, name="engram-warm-up", daemon=True).start()
    return client


class RemoteBackend:
    """Forwards calls to the daemon; the RpcClient's connection is this process's session."""

    def __init__(self, client: RpcClient):
        self.client = client

    def call(self, name: str, args: dict[str, Any]) -> dict:
        return self.client.call(name, **args)


class SessionBackends:
    """Backend factory for a multi-session transport (streamable HTTP): one engram session per MCP session
    and user.

    The user is the request's X-Engram-User header, else `user_id` (ENGRAM_USER), as on the REST
    routes. The engram session id is derived from the `mcp-session-id` header (else the connection
    object) and the user, so nothing is kept per session here however many clients come and go.
    A session ends cleanly when its client closes it (DELETE /mcp); one that just goes away
    ends by heartbeat timeout (HTTP has no disconnect signal).
    """

    def __init__(self, api: Any, client: str = "http", user_id: str | None = None):
        self.api = api
        self.client = client
        self.user_id = user_id
        self.nonce = os.urandom(16)  # derived ids differ between server runs

    def __call__(self, mcp_ctx: Any) -> LocalBackend:
        headers, conn, key_user = None, None, None
        try:
            headers = mcp_ctx.headers
            request = mcp_ctx.request_context.request
            key_user = request.scope.get(KEY_USER)
            client = getattr(request, "client", None)
            conn = f"{client.host}:{client.port}" if client else id(mcp_ctx.session)
        except (AttributeError, ValueError):
            pass
        return self.for_request(headers, conn, key_user)

    def for_request(
        self, headers: Mapping[str, str] | None, conn: Any = None, key_user: str | None = None
    ) -> LocalBackend:
        """The backend for one request, from its headers (and its connection when no session header).

        A handshake-era client sends `mcp-session-id`: one engram session per MCP session, ended
        when the client closes it. A sessionless (2026) client has no such id: its calls run in
        an implicit per-connection session, ended cleanly after each call. `key_user`: the user
        of the request's key (KEY_USER), which no header overrides.
        """
        user = key_user or header_user(headers, self.user_id)
        mcp_session = headers.get("mcp-session-id") if headers else None
        who = ["header", mcp_session] if mcp_session else ["conn", str(conn)]
        session_id = derived_session_id(self.client, self.nonce, *who, user or "")
        return LocalBackend(self.api, Ctx(session_id, user, self.client), end_after=not mcp_session)

    def end(self, headers: Mapping[str, str], key_user: str | None = None) -> None:
        """The client closed its MCP session (DELETE /mcp): end the engram session cleanly."""
        ctx = self.for_request(headers, key_user=key_user).ctx
        self.api.eng.end_session(ctx.session_id, clean=True, user_id=ctx.user_id)


USER_HEADER = "x-engram-user"
# The ASGI scope entry where the HTTP auth (server/http.py) puts the user of the request's key:
# a key acts as its user whatever X-Engram-User says (and the auth refuses one naming another).
KEY_USER = "engram.key_user"


def header_user(headers: Mapping[str, str] | None, default: str | None) -> str | None:
    """The user an HTTP request acts for (REST and MCP alike): X-Engram-User, else `default`."""
    return (headers.get(USER_HEADER) if headers else None) or default


def derived_session_id(prefix: str, nonce: bytes, *parts: str) -> str:
    """A session id for what identifies a client, unguessable without the per-process nonce.

    JSON keeps the parts apart, so no choice of one part can collide with another's.
    """
    digest = hashlib.blake2b(json.dumps(parts).encode(), key=nonce, digest_size=8).hexdigest()
    return f"{prefix}-{digest}"
