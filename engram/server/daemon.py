"""The one long-running process that owns the database and serves every client.

Stdio MCP processes, the CLI and (with --http) HTTP clients all reach the same Engram through it.
A stdio client or a CLI command starts it on demand. It keeps running while any client is
connected and exits after ENGRAM_IDLE_EXIT seconds with none (not when it serves HTTP, whose
clients it cannot count), so an idle machine gets its memory back; `engram stop` (the
"__shutdown__" request) or SIGTERM ends it cleanly.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from engram import __version__
from engram.api import Api, Ctx
from engram.core.errors import ModelMismatch, StoreMismatch
from engram.core.project import check_project
from engram.core.settings import DEFAULT_HTTP_HOST, DEFAULT_HTTP_PORT, Settings, store_identity
from engram.core.types import EngramError
from engram.models.embedding import loads_quickly
from engram.server.backend import HEARTBEAT
from engram.server.rpc import Peer, RpcError, acquire_daemon_lock
from engram.server.rpc_client import RpcClient
from engram.server.rpc_server import RpcServer

__all__ = ["SHUTDOWN", "Daemon", "build_http_app", "run_daemon", "stop_daemon"]

log = logging.getLogger(__name__)

SHUTDOWN = "__shutdown__"  # the RPC method that stops the daemon (not an Api operation)
# How often an idle daemon applies other servers' writes (Engram.catch_up), so the first read
# after a quiet spell finds its indexes current. On a DuckDB file there are none: nothing is read.
FRESH_EVERY_S = 0.5
# How long a stopping daemon lets the requests it already received finish (an import may be
# long); after that their connections are cut.
DRAIN_S = 60.0


class Daemon:
    """Engram + Api + maintenance scheduler behind the RPC socket (and optionally HTTP)."""

    def __init__(self, settings: Settings, engram: Any = None):
        from engram.engram import Engram

        self.settings = settings
        # degraded_ok: a model that does not load leaves keyword recall serving, not a dead daemon.
        # load_model_later: the daemon listens first and loads the model after (start()): a first
        # start on a machine exports the model's graph, longer than a hook waits for the daemon.
        # Only then: a model that loads in a second is loaded first, so a client finds it serving.
        self._model_after_listening = engram is None and not loads_quickly(
            settings.model, settings.model_cache, settings.torch_threads, settings.onnx
        )
        self.eng = (
            engram
            if engram is not None
            else Engram(settings=settings, degraded_ok=True, load_model_later=self._model_after_listening)
        )
        self.api = Api(self.eng)
        self.scheduler = _start_scheduler(self.eng, settings, self.api)
        self.api.scheduler = self.scheduler
        # What this daemon serves, as clients name it (Engram.path: the file, or the URL without password).
        self.store = store_identity(self.eng.path)
        # The versions every client is told in the hello: a newer client replaces this daemon.
        self.versions = {"version": __version__, "schema": self.eng.schema_version()}
        self.rpc = RpcServer(
            settings.socket_path,
            self.handle,
            on_connect=self.on_connect,
            on_disconnect=self.on_disconnect,
            hello=self.versions,
        )
        self.stop_requested = threading.Event()
        self.idle_exit = False  # set when wait() returned because no client came for idle_exit_s
        self._last_active = time.monotonic()
        self._stopping = False
        self._http: Any = None
        self._http_thread: threading.Thread | None = None
        self._fresh_thread: threading.Thread | None = None

    # -- requests

    def handle(self, method: str, params: dict, peer: Peer) -> Any:
        self._last_active = time.monotonic()
        if method == SHUTDOWN:
            if params.get("reason") == "upgrade":
                log.info(
                    "%s (pid %s) of engram %s asks this daemon (engram %s) to finish and exit",
                    peer.client,
                    peer.pid,
                    params.get("version"),
                    __version__,
                )
            else:
                log.info("shutdown requested by %s (pid %s)", peer.client, peer.pid)
            self.stop_requested.set()
            return {"stopping": True, "pid": os.getpid()}
        if method == HEARTBEAT:
            self.eng.touch_session(
                peer.session_id,
                user_id=peer.user_id,
                client=peer.client,
                pid=peer.pid,
                project=peer.project,
                branch=peer.branch,
            )
            # The claim timeout that counts is this daemon's: the client beats at its pace.
            return {"next_in_s": self.settings.claim_timeout_s / 5}
        return self.api.call(
            method, params, Ctx(peer.session_id, peer.user_id, peer.client, peer.pid, peer.project, peer.branch)
        )

    def on_connect(self, peer: Peer) -> None:
        """Refuse a client that means another store: its calls would land in this one.

        One daemon per ENGRAM_HOME, so `--database-url` (or ENGRAM_DATABASE_URL) given to a command
        while this daemon serves the file (or another URL) would otherwise reach this store.
        """
        check_project(peer.project, "the hello's project")  # refused with the reason, before any call
        if peer.store is not None and peer.store != self.store:
            log.warning(
                "refused %s (pid %s): it asked for %s, this daemon serves %s",
                peer.client,
                peer.pid,
                peer.store,
                self.store,
            )
            raise StoreMismatch(
                f"the engram daemon for {self.settings.home} (pid {os.getpid()}) serves {self.store}, "
                f"not {peer.store}; nothing was done. Run `engram stop` (same ENGRAM_HOME) so the next "
                f"command starts a daemon for {peer.store}, or give that store its own ENGRAM_HOME "
                "(--home)"
            )

    def on_disconnect(self, peer: Peer, clean: bool) -> None:
        self._last_active = time.monotonic()
        if self._stopping:
            # We are closing the connection, not the client: its session is not over.
            return
        self.eng.end_session(peer.session_id, clean, user_id=peer.user_id)
        if not clean:
            log.info("session %s (%s, pid %s) interrupted", peer.session_id, peer.client, peer.pid)

    # -- lifecycle

    def start(self, http: bool = False, host: str = DEFAULT_HTTP_HOST, port: int = DEFAULT_HTTP_PORT) -> None:
        # HTTP first: a daemon that answers on its socket must already serve every transport it was
        # asked for, or clients started right after it (told "it is up") find no HTTP listener.
        if http:
            self._start_http(host, port)
        self.rpc.start()
        if self._model_after_listening:
            threading.Thread(target=self._load_model_now, name="engram-model", daemon=True).start()
        self._fresh_thread = threading.Thread(target=self._keep_fresh, name="engram-feed", daemon=True)
        self._fresh_thread.start()
        log.info("engram daemon %d serving %s (db %s)", os.getpid(), self.settings.socket_path, self.eng.path)

    def _load_model_now(self) -> None:
        """Load the model while the daemon already answers (keyword recall meanwhile)."""
        start = time.monotonic()
        try:
            if self.eng.load_model():
                log.info("embedding model loaded in %.1f s", time.monotonic() - start)
            elif self.eng.degraded:
                log.warning("embedding model unavailable, keyword recall only: %s", self.eng.degraded)
        except ModelMismatch as e:
            log.error("%s", e)
        except Exception as e:  # a model that fails to load leaves keyword recall serving
            log.exception("the embedding model failed to load")
            self.eng.degraded = f"it failed to load ({type(e).__name__}: {e}); see the daemon's log"

    def _start_http(self, host: str, port: int) -> None:
        import uvicorn

        app = build_http_app(self.api, self.settings, host)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        self._http = uvicorn.Server(config)
        self._http_thread = threading.Thread(target=self._http.run, name="engram-http", daemon=True)
        self._http_thread.start()
        while not self._http.started:  # bind errors end the thread before it starts
            if not self._http_thread.is_alive():
                raise EngramError(f"could not serve HTTP on {host}:{port}; see the log above")
            time.sleep(0.05)
        log.info("HTTP API and MCP (streamable HTTP at /mcp) on http://%s:%d", host, port)

    def _keep_fresh(self) -> None:
        failing = False  # logged once when the feed becomes unreadable and once when it is back
        while not self.stop_requested.wait(FRESH_EVERY_S) and not self._stopping:
            try:
                self.eng.catch_up()
            except Exception as e:  # noqa: BLE001 - the database away a moment: the next look retries
                if not failing and not self._stopping:
                    log.warning(
                        "could not read the change feed: %s: %s (retrying every %g s)",
                        type(e).__name__,
                        e,
                        FRESH_EVERY_S,
                    )
                failing = True
            else:
                if failing:
                    log.info("the change feed is readable again")
                failing = False

    def wait(self) -> None:
        """Block until SIGTERM/SIGINT, a shutdown request, the HTTP server stopping, or
        settings.idle_exit_s with no client connected (without HTTP)."""
        idle_after = self.settings.idle_exit_s if self._http is None else 0.0
        tick = min(1.0, idle_after / 4) if idle_after else 1.0
        while not self.stop_requested.wait(tick):
            if self._http_thread is not None and not self._http_thread.is_alive():
                break
            if idle_after and self.idle_for() >= idle_after:
                log.info("no client for %gs (ENGRAM_IDLE_EXIT): exiting", idle_after)
                self.idle_exit = True
                break

    def idle_for(self) -> float:
        """Seconds since the last request or disconnect, 0 while a client is connected."""
        if self.rpc.connections():
            return 0.0
        return time.monotonic() - self._last_active

    def close(self) -> None:
        """Stop the HTTP server, the socket, the scheduler; checkpoint and close the database."""
        self._stopping = True
        if self._fresh_thread is not None:
            self._fresh_thread.join(10)
        if self._http is not None:
            self._http.should_exit = True
            if self._http_thread is not None:
                self._http_thread.join(10)
        self.rpc.shutdown(DRAIN_S)
        if self.scheduler is not None:
            with contextlib.suppress(Exception):
                self.scheduler.shutdown()
        self.eng.close()
        log.info("engram daemon %d stopped", os.getpid())


def _start_scheduler(eng: Any, settings: Settings, api: Api) -> Any:
    try:
        from engram.admin.scheduler import MaintenanceScheduler
    except ModuleNotFoundError as e:
        if e.name != "engram.admin.scheduler":
            raise
        return None
    scheduler = MaintenanceScheduler(eng, settings, api_metrics=api.metrics)
    scheduler.start()
    return scheduler


def build_http_app(api: Api, settings: Settings, host: str = DEFAULT_HTTP_HOST) -> Any:
    """The REST API plus streamable-HTTP MCP at /mcp (one engram session per MCP session and user), one token."""
    from engram.server.backend import SessionBackends
    from engram.server.http import build_app
    from engram.server.mcp import build_mcp

    sessions = SessionBackends(api, client="http", user_id=settings.user_id)
    mcp = build_mcp(sessions)
    return build_app(
        api,
        token=settings.token,
        mcp_app=mcp.streamable_http_app(host=host),
        settings=settings,
        end_mcp_session=sessions.end,
    )


def run_daemon(
    settings: Settings | None = None,
    http: bool = False,
    host: str = DEFAULT_HTTP_HOST,
    port: int = DEFAULT_HTTP_PORT,
    idle_exit: bool = True,
) -> int:
    """Serve until stopped; returns the exit code. Returns 0 at once if another daemon already serves.

    idle_exit False: never exit for want of clients (`engram serve`, run by hand in the foreground).
    """
    settings = settings or Settings.from_env()
    if not idle_exit:
        settings = replace(settings, idle_exit_s=0.0)
    if http:
        from engram.server.http import check_bind

        check_bind(host, settings.token)  # before anything else: a refusal must not start a daemon
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    lock = acquire_daemon_lock(settings.socket_path)
    if lock is None:
        holder = _lock_holder(settings.socket_path)
        log.warning(
            "another engram daemon%s already serves %s; not starting a second one",
            f" (pid {holder})" if holder else "",
            settings.socket_path,
        )
        if http:
            print(
                f"engram: a daemon{f' (pid {holder})' if holder else ''} is already running; run "
                "`engram stop` first to restart it with these options",
                file=sys.stderr,
            )
        return 0
    try:
        daemon = Daemon(settings)
        stop = daemon.stop_requested.set
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: stop())
            signal.signal(signal.SIGINT, lambda *_: stop())
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the terminal that started it may close
        try:
            daemon.start(http, host, port)
            daemon.wait()
        finally:
            daemon.close()
        return 0
    finally:
        lock.close()


def _lock_holder(socket_path: Path) -> int | None:
    from engram.server.rpc import lock_path_for

    try:
        return int(lock_path_for(socket_path).read_text().strip() or 0) or None
    except (OSError, ValueError):
        return None


def stop_daemon(settings: Settings, timeout: float = 30.0) -> bool:
    """Ask the running daemon to stop and wait until it released the database. False if none ran."""
    client = RpcClient(settings.socket_path, client="stop")
    try:
        client.call(SHUTDOWN)
    except RpcError as e:
        if e.kind == "DaemonUnavailable":
            return False
        if e.kind != "ConnectionLost":  # it may close the socket before answering
            raise
    finally:
        client.close(clean=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fh = acquire_daemon_lock(settings.socket_path)
        if fh is not None:
            fh.close()
            return True
        time.sleep(0.05)  # waiting on another process; there is nothing to block on
    raise RpcError(f"the engram daemon did not stop within {timeout:g}s", "Timeout")


def stop_or_kill(settings: Settings, timeout: float = 60.0) -> None:
    """stop_daemon(); a daemon that will not stop politely is SIGKILLed and the error re-raised.

    For tests and benchmarks, which must leave no daemon of theirs running."""
    try:
        stop_daemon(settings, timeout)
    except Exception:
        pid = _lock_holder(settings.socket_path)
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engram.server.daemon", description=__doc__)
    parser.add_argument("--home", help="engram home directory (default: ENGRAM_HOME or ~/.engram)")
    parser.add_argument("--http", action="store_true", help="also serve MCP and REST over HTTP")
    parser.add_argument("--host", default=DEFAULT_HTTP_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT)
    a = parser.parse_args(argv)
    try:
        settings = Settings.from_env(home=Path(a.home).expanduser()) if a.home else Settings.from_env()
        return run_daemon(settings, http=a.http, host=a.host, port=a.port)
    except (EngramError, ValueError) as e:
        print(f"engram daemon: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
