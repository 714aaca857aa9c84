"""The HTTP API: JSON routes over the transport-free Api, bearer auth, Prometheus metrics, OpenAPI
(the route table and the document describing it: http_routes.py).

Sessions: a request that sends `X-Engram-Session: <id>` acts in that session, which stays
open (and, like an MCP session whose client vanished, counts as interrupted once idle for
ENGRAM_HEARTBEAT_TIMEOUT). Without the header the session is the client's connection (its
token and address), ended cleanly after each request because HTTP has no disconnect signal.
The user is `X-Engram-User`, else ENGRAM_USER; with a per-user key (engram.admin.keys), the key's
user and no other (see _Auth).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import os
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from engram import ops
from engram.admin import keys
from engram.api import Ctx
from engram.core.errors import BindRefused, DatabaseUnavailable, DiskFull, ModelUnavailable, TaskClaimed
from engram.core.project import check_project
from engram.core.types import EngramError, NotFound
from engram.core.validation import refuse_unknown
from engram.panel import is_panel_path
from engram.panel import routes as panel_routes
from engram.server.backend import KEY_USER, USER_HEADER, LocalBackend, derived_session_id, header_user
from engram.server.http_routes import OPS, PROJECT_PARAM, PUBLIC_PATHS, JsonRoute, openapi_document

__all__ = ["MAX_BODY_BYTES", "BindRefused", "build_app", "check_bind"]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024 * 1024


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback address without a token: anyone who can reach it could read every memory."""
    if token:
        return
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host.strip("[]")).is_loopback:
            return
    except ValueError:
        pass  # a host name other than localhost may resolve to anything
    raise BindRefused(
        f"refusing to serve HTTP on {host!r} without a token: anyone who can reach it could read and "
        "change every memory. Set ENGRAM_TOKEN to a long random secret (clients then send "
        "'Authorization: Bearer <token>'), or bind 127.0.0.1."
    )


# ---------------------------------------------------------------- helpers


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class JSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return ops.dumps(content, ensure_ascii=False, allow_nan=False).encode()


def error(status: int, message: str, **headers: str) -> JSON:
    return JSON({"error": message}, status_code=status, headers=headers or None)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


async def _read_json(request: Request, empty_ok: bool) -> Any:
    size = request.headers.get("content-length")
    if size and size.isdigit() and int(size) > MAX_BODY_BYTES:
        raise BadRequest(413, f"request body too large (limit {MAX_BODY_BYTES // 2**20} MiB)")
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise BadRequest(413, f"request body too large (limit {MAX_BODY_BYTES // 2**20} MiB)")
    if not raw.strip():
        if empty_ok:
            return {}
        raise BadRequest(400, "request body is empty; send a JSON object")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(400, f"request body is not valid UTF-8 (byte {e.start})") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as e:
        raise BadRequest(400, f"request body is not valid JSON: {e}") from None
    except RecursionError:
        raise BadRequest(400, "request body nests too deeply") from None


def _memory_gauges(api: Any) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Memories by type and status, counted from the derived index (no database round trip)."""
    series = [
        ({"memory_type": mtype, "status": status}, count) for (mtype, status), count in api.eng.index_counts().items()
    ]
    return {"engram_memories": series}


# ---------------------------------------------------------------- the app


def _guard(fn: Callable) -> Callable:
    """Errors become {"error": message} with the matching status; bugs a bare 500, traceback in the log."""

    async def endpoint(request: Request) -> Response:
        try:
            return await fn(request)
        except BadRequest as e:
            return error(e.status, e.message)
        except NotFound as e:
            return error(404, str(e))
        except ModelUnavailable as e:
            return error(503, str(e))
        except TaskClaimed as e:  # another session holds the task: a conflict, not bad input
            return error(409, str(e))
        except DiskFull as e:  # 507 Insufficient Storage: retry once space is freed
            return error(507, str(e))
        except DatabaseUnavailable as e:  # the database restarting: retry in a moment
            return error(503, str(e), **{"Retry-After": "1"})
        except EngramError as e:
            return error(422, str(e))
        except Exception:
            log.exception("HTTP %s %s failed", request.method, request.url.path)
            return error(500, "internal error")

    endpoint.__name__ = fn.__name__
    return endpoint


class _Auth:
    """Pure ASGI middleware (streaming-safe for the MCP transport): who a request is, on every
    path but /healthz and the panel's files.

    - `Authorization: Bearer <ENGRAM_TOKEN>`: the owner (the admin once keys exist): acts for
      X-Engram-User, else ENGRAM_USER, as before keys.
    - `Authorization: Bearer <key>` (engram keys create): the key's user and no other. The
      request goes on with that user in its scope (KEY_USER), which every route and the MCP
      transport act for; an X-Engram-User naming another user is refused (403), not ignored.
    - Nothing: allowed only while there is no ENGRAM_TOKEN and no key was ever made (one
      person on loopback, as before keys); otherwise 401.
    The key is looked up on every request (a SHA-256 and an indexed read, nothing cached), so a
    revoked key is refused on the next request. Once a key exists, keys_in_use stays true, so
    that answer alone is remembered.
    """

    def __init__(self, app: Any, token: str | None, eng: Any):
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None
        self.eng = eng
        self._keys_seen = False

    def keys_in_use(self) -> bool:
        if not self._keys_seen:
            self._keys_seen = keys.keys_in_use(self.eng)
        return self._keys_seen

    def identify(self, got: bytes, claimed: set[str]) -> tuple[str | None, JSON | None]:
        """(the key's user, or None for the owner or an open server; a refusal, or None)."""
        if self.expected is not None and hmac.compare_digest(got, self.expected):
            return None, None
        scheme, _, credential = got.partition(b" ")
        user = None
        if scheme.lower() == b"bearer" and credential:
            user = keys.user_of(self.eng, credential.decode("latin-1"))
        if user is None:
            if self.expected is None and not self.keys_in_use():
                return None, None  # one person on loopback, as before keys: headers are not checked
            why = "missing bearer token" if not got else "invalid bearer token (wrong, unknown or revoked)"
            return None, _unauthorized(why)
        other = sorted(claimed - {user})
        if other:
            return None, error(
                403,
                f"this key acts for user {user!r} only, and X-Engram-User names "
                f"{other[0]!r}: leave X-Engram-User out (the key is the user)",
            )
        return user, None

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path", "")
        # The panel's files are code, not data (engram.panel): its data comes from the routes here.
        public = path in PUBLIC_PATHS or is_panel_path(path)
        if scope["type"] != "http" or public:
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers") or ()
        got = next((v for k, v in headers if k == b"authorization"), b"")
        claimed = {_text(v).strip() for k, v in headers if k == USER_HEADER_BYTES}
        try:
            user, refusal = await run_in_threadpool(self.identify, got, claimed)
        except DatabaseUnavailable as e:  # the keys cannot be read: refuse (fail closed), retryable
            user, refusal = None, error(503, str(e), **{"Retry-After": "1"})
        except Exception:  # the database failed: refuse (fail closed), as any route's bug would
            log.exception("HTTP %s %s: could not check the credentials", scope.get("method"), path)
            user, refusal = None, error(500, "internal error")
        if refusal is None and user is not None and path == "/metrics":
            refusal = error(403, "/metrics counts every user's memories: it needs ENGRAM_TOKEN, not a key")
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if user is not None:
            scope = {**scope, KEY_USER: user}
        await self.app(scope, receive, send)


USER_HEADER_BYTES = USER_HEADER.encode()


def _text(raw: bytes) -> str:
    """A header value as a client most likely meant it: UTF-8, else Latin-1 (what HTTP defines)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _unauthorized(why: str) -> JSON:
    return error(
        401,
        f"{why}: send 'Authorization: Bearer <key>' (a key from `engram keys create`) "
        "or 'Authorization: Bearer <ENGRAM_TOKEN>'",
        **{"WWW-Authenticate": "Bearer"},
    )


_FROM_SETTINGS: Any = object()


class _EndingSessions:
    """ASGI wrapper of the MCP app: when it accepts a DELETE (a client closing its session),
    call `end(headers, key_user)` before the response's last byte goes out, so a client that heard back
    finds the session ended. A class, not a function, so Starlette's Route passes ASGI through."""

    def __init__(self, app: Any, end: Callable[[dict[str, str], str | None], None]):
        self.app, self.end = app, end

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("method") != "DELETE":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        status = 0

        async def capture(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif (
                message["type"] == "http.response.body"
                and not message.get("more_body")
                and 200 <= status < 300
                and headers.get("mcp-session-id")
            ):
                await run_in_threadpool(self.end, headers, scope.get(KEY_USER))
            await send(message)

        await self.app(scope, receive, capture)


def build_app(  # noqa: C901 - the route table and its handlers
    api: Any,
    *,
    token: str | None = _FROM_SETTINGS,
    mcp_app: Any = None,
    settings: Any = None,
    end_mcp_session: Callable[[dict[str, str], str | None], None] | None = None,
) -> Starlette:
    """The HTTP API over `api` (an engram.api.Api). With `mcp_app`, also serves MCP at /mcp;
    `end_mcp_session(headers, key_user)` runs when a client closes its MCP session.

    `token` set: every route except /healthz needs `Authorization: Bearer <token>`. Not given,
    it is settings.token, so a caller that forgets it still gets the configured protection.
    """
    if token is _FROM_SETTINGS:
        token = getattr(settings, "token", None)
    default_user = settings.user_id if settings is not None else None
    nonce = os.urandom(16)  # implicit session ids differ between server runs
    token_hash = hashlib.blake2b((token or "").encode(), digest_size=8).hexdigest()

    def backend_for(request: Request) -> LocalBackend:
        """The caller's session; an implicit one (no X-Engram-Session) ends after the request.

        Its project is the `project` query parameter (docs/projects.md): HTTP has no working
        directory, so a caller names it; none given is no project."""
        h = request.headers
        user = request.scope.get(KEY_USER) or header_user(h, default_user)
        try:
            project = check_project(request.query_params.get(PROJECT_PARAM), "the project query parameter")
        except EngramError as e:
            raise BadRequest(422, str(e)) from None
        explicit = h.get("x-engram-session")
        if explicit is not None:
            explicit = explicit.strip()
            if not explicit or len(explicit) > 200:
                raise BadRequest(400, "X-Engram-Session must be 1 to 200 characters")
            return LocalBackend(api, Ctx(session_id=explicit, user_id=user, client="http", project=project))
        client = request.client
        peer = f"{client.host}:{client.port}" if client else "?"
        # The user is part of the key: one connection may act for several users, each in its own session.
        session_id = derived_session_id("http", nonce, token_hash, peer, user or "")
        return LocalBackend(
            api, Ctx(session_id=session_id, user_id=user, client="http", project=project), end_after=True
        )

    def make_endpoint(spec: JsonRoute) -> Callable:
        async def endpoint(request: Request) -> Response:
            args: dict[str, Any] = dict(spec.defaults)
            if spec.body is not None:
                data = await _read_json(request, spec.empty_body_ok)
                if not isinstance(data, dict):
                    raise BadRequest(422, f"{spec.op}: the request body must be a JSON object")
                # Path parameters come from the path only; the Api checks everything else.
                refuse_unknown(spec.op, data, spec.body_fields)
                args.update(data)
            # A misspelt filter (`?type=fact` for memory_type) must not vanish into an unfiltered answer.
            refuse_unknown(spec.op, request.query_params.keys(), spec.query + (PROJECT_PARAM,))
            # Only one value is read per parameter: a second must not be dropped without a word.
            repeated = sorted(
                {k for k, _ in request.query_params.multi_items() if len(request.query_params.getlist(k)) > 1}
            )
            if repeated:
                raise BadRequest(
                    422, f"{spec.op}: query parameter(s) given more than once: {', '.join(repeated)}; give each once"
                )
            args.update((k, v) for k, v in request.query_params.items() if k != PROJECT_PARAM)
            args.update(request.path_params)
            result = await run_in_threadpool(backend_for(request).call, spec.op, args)
            return JSON(result, status_code=spec.status)

        endpoint.__name__ = spec.op
        return endpoint

    async def metrics(request: Request) -> Response:
        gauges = await run_in_threadpool(_memory_gauges, api)
        return PlainTextResponse(api.metrics.render(gauges), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def healthz(request: Request) -> Response:
        result = await run_in_threadpool(api.call, "health", {}, Ctx(session_id="http-health", client="http"))
        # Liveness only: the path of the database file is nobody's business without a token.
        return JSON({"status": result["status"], "memories": result["memories"], "model": result["model"]})

    doc = openapi_document(secured=bool(token), with_mcp=mcp_app is not None)

    async def openapi(request: Request) -> Response:
        return JSON(doc)

    routes = [Route(s.path, _guard(make_endpoint(s)), methods=[s.method]) for s in OPS]
    routes += [
        Route("/metrics", _guard(metrics), methods=["GET"]),
        Route("/healthz", _guard(healthz), methods=["GET"]),
        Route("/openapi.json", _guard(openapi), methods=["GET"]),
    ]
    routes += panel_routes()  # the web panel at /ui
    lifespan = None
    if mcp_app is not None:
        # The SDK's app routes /mcp itself; a Route (not a Mount) passes the path through unchanged.
        routes.append(Route("/mcp", mcp_app if end_mcp_session is None else _EndingSessions(mcp_app, end_mcp_session)))

        @contextlib.asynccontextmanager
        async def lifespan(app):
            # A mounted app's lifespan does not run on its own; its session manager needs it.
            async with mcp_app.router.lifespan_context(mcp_app):
                yield

    async def on_http(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, HTTPException):  # registered for HTTPException only
            raise exc
        return error(exc.status_code, exc.detail or "error", **(exc.headers or {}))

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: on_http},
    )
    app.add_middleware(_Auth, token=token, eng=api.eng)
    return app
