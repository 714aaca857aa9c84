"""MCP logging: `logging/setLevel`, and engram's log records sent to the client that asked, as notifications/message."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import threading
import warnings
import weakref
from typing import Any

import anyio.from_thread
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import LoggingLevel
from mcp_types import EmptyResult, SetLevelRequestParams

__all__ = ["LEVELS", "ClientLogs", "client_logs", "mcp_level", "python_level"]

# The MCP levels (RFC 5424's), least severe first, and the Python level each starts at.
LEVELS: tuple[LoggingLevel, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_PYTHON = dict(
    zip(
        LEVELS, (logging.DEBUG, logging.INFO, 25, logging.WARNING, logging.ERROR, logging.CRITICAL, 60, 70), strict=True
    )
)

# The request being handled, set by ClientLogs.middleware: a record logged while it runs (on the event
# loop or in the worker thread a tool runs in, which copies this) goes to that request's client.
_request: contextvars.ContextVar[ServerRequestContext[Any, Any] | None] = contextvars.ContextVar(
    "engram_mcp_request", default=None
)


def python_level(level: LoggingLevel) -> int:
    """The Python logging level an MCP level starts at."""
    return _PYTHON[level]


def mcp_level(levelno: int) -> LoggingLevel:
    """The most severe MCP level at or below a Python record's level."""
    return next(name for name in reversed(LEVELS) if _PYTHON[name] <= levelno) if levelno >= logging.DEBUG else "debug"


@functools.cache
def client_logs() -> ClientLogs:
    """The one handler on the `engram` logger, shared by every MCP server of this process (tests
    build many): the levels are per connection, so one handler serves them all."""
    return ClientLogs(logging.getLogger("engram"))


def _connection(ctx: ServerRequestContext[Any, Any]) -> Any:
    # The request context offers no public handle to its connection (the SDK's ServerSession is
    # built per request, its Connection lives across them): the level is the connection's.
    return getattr(ctx.session, "_connection", None)


class ClientLogs(logging.Handler):
    """Sends the records of `logger` (engram's) to each MCP client at or above the level it set.

    A client that never calls logging/setLevel gets nothing. A record goes only to the client of
    the request it was logged in: over HTTP several users share one server, and one user's log
    line must not reach another. The logger's own level is lowered to the lowest level a client
    asked for, so those records are made at all (other handlers, e.g. stderr, then see them too).
    """

    def __init__(self, logger: logging.Logger):
        super().__init__(logging.DEBUG)
        self.logger = logger
        self.levels: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self.tasks: set[asyncio.Task[None]] = set()  # sends scheduled from the loop, kept until done
        self.sending = threading.local()  # a record logged while sending one is not sent again
        logger.addHandler(self)

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        """Server middleware: marks the request every record logged while it runs belongs to."""
        token = _request.set(ctx)
        try:
            return await call_next(ctx)
        finally:
            _request.reset(token)

    async def set_level(self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
        """The logging/setLevel handler: this connection's records from `params.level` up."""
        conn = _connection(ctx)
        if conn is not None:
            self.levels[conn] = python_level(params.level)
            self.logger.debug("MCP client log level set to %s", params.level)
        lowest = min(self.levels.values(), default=logging.NOTSET)
        if lowest and (self.logger.level == logging.NOTSET or lowest < self.logger.level):
            self.logger.setLevel(lowest)
        return EmptyResult()

    def emit(self, record: logging.LogRecord) -> None:
        ctx = _request.get()
        if ctx is None or getattr(self.sending, "on", False):
            return
        conn = _connection(ctx)
        wanted = self.levels.get(conn) if conn is not None else None
        if wanted is None or record.levelno < wanted:
            return
        send = self._sender(ctx, record)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            # A worker thread: wait until it is sent, so it reaches the client before the result.
            self.sending.on = True
            try:
                anyio.from_thread.run(send)
            except Exception:  # noqa: BLE001 - not an anyio worker, or the client has gone
                pass
            finally:
                self.sending.on = False
            return
        task = asyncio.get_running_loop().create_task(send())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _sender(self, ctx: ServerRequestContext[Any, Any], record: logging.LogRecord) -> Any:
        level, data, name = mcp_level(record.levelno), self.format(record), record.name
        with warnings.catch_warnings():
            # SEP-2577 retires logging/setLevel in protocol 2026-07-28; the handshake-era clients this
            # serves still use it, and on a 2026 connection the SDK sends only what a request opted into.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            send_log = ctx.session.send_log_message

        async def send() -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                coro = send_log(level, data, logger=name, related_request_id=ctx.request_id)
            with contextlib.suppress(Exception):  # a client that went away misses its log line, nothing more
                await coro

        return send
