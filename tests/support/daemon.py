"""engram's daemon for tests and benchmarks: the same Daemon class `engram` runs, optionally on the
fake embedder, started through the client's own spawn path and stopped by its home.

    python -m tests.support.daemon --home DIR [--fake] [--port N]   # what start_daemon spawns
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def daemon_env(home: Path, user: str = "default") -> dict[str, str]:
    """This process's environment, pointed at `home`, offline, one torch thread, this checkout importable."""
    return {
        **os.environ,
        "ENGRAM_HOME": str(home),
        "ENGRAM_USER": user,
        "HF_HUB_OFFLINE": "1",
        "ENGRAM_TORCH_THREADS": "1",
        "PYTHONPATH": str(REPO),
    }


@contextlib.contextmanager
def repo_env(home: Path) -> Iterator[None]:
    """os.environ as a spawned daemon needs it (RpcClient spawns with this process's environment)."""
    saved = dict(os.environ)
    os.environ.update(daemon_env(home))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def serve(home: Path, fake: bool, port: int | None) -> int:
    """Run engram's daemon on `home` until SIGTERM (HTTP too when `port` is given)."""
    import faulthandler

    from engram.core.settings import Settings
    from engram.server.daemon import Daemon
    from engram.server.rpc import acquire_daemon_lock

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 PID`: every thread's stack to the log
    settings = Settings.from_env({**os.environ, "ENGRAM_HOME": str(home)})
    lock = acquire_daemon_lock(settings.socket_path)
    if lock is None:
        return 0  # another daemon serves this home
    engram = None
    if fake:
        from engram import Engram
        from engram.models.embedding import FakeEmbedder

        engram = Engram(settings=settings, embedder=FakeEmbedder())
    daemon = Daemon(settings, engram=engram)
    signal.signal(signal.SIGTERM, lambda *_: daemon.stop_requested.set())
    try:
        daemon.start(http=port is not None, port=port or 0)
        daemon.wait()
    finally:
        daemon.close()
        lock.close()
    return 0


def serve_argv(home: Path, fake: bool = True, port: int | None = None) -> list[str]:
    argv = [sys.executable, "-m", "tests.support.daemon", "--home", str(home)]
    if fake:
        argv.append("--fake")
    if port is not None:
        argv += ["--port", str(port)]
    return argv


def start_daemon(home: Path, fake: bool = True, port: int | None = None) -> int:
    """Start the daemon (via the client's own spawn path) and return its pid once it answers."""
    from engram.core.settings import Settings
    from engram.server.rpc_client import RpcClient

    settings = Settings.from_env({"ENGRAM_HOME": str(home)})
    with (
        repo_env(home),
        RpcClient(
            settings.socket_path, spawn=serve_argv(home, fake, port), client="starter", spawn_timeout=180, timeout=180
        ) as c,
    ):
        c.call("health")
        return int(c.server_pid)


def kill_daemon(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def stop_daemon(home: Path) -> None:
    """Stop the daemon of `home` (SIGKILLed when it does not stop in time); nothing when none runs.
    Errors are not raised: this runs in a `finally`, where it must not hide the test's own failure."""
    from engram.core.settings import Settings
    from engram.server.daemon import stop_or_kill

    with contextlib.suppress(Exception):
        stop_or_kill(Settings.from_env({"ENGRAM_HOME": str(home)}), timeout=60)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.support.daemon", description=__doc__)
    p.add_argument("--home", required=True)
    p.add_argument("--fake", action="store_true", help="the fake embedder (no model)")
    p.add_argument("--port", type=int, help="serve HTTP on this port too")
    a = p.parse_args(argv)
    return serve(Path(a.home), a.fake, a.port)


if __name__ == "__main__":
    sys.exit(main())
