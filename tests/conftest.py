"""Shared fixtures: an in-memory store, a deterministic fake embedder, a virtual clock, an HTTP server."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engram import Engram, Settings, VirtualClock  # noqa: E402
from engram.embedding import FakeEmbedder  # noqa: E402

START = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(START)


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings.from_env({"ENGRAM_HOME": str(tmp_path / "home")})


@pytest.fixture
def fake() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def eng(settings, fake, clock):
    e = Engram(":memory:", settings=settings, embedder=fake, clock=clock)
    yield e
    e.close()


@pytest.fixture(scope="session")
def real_embedder():
    from engram.embedding import load_embedder
    return load_embedder("all-MiniLM-L6-v2")


def _serving() -> Iterator:
    """Yields start(app) -> base URL: the ASGI app under uvicorn in a thread; stops them all after."""
    import uvicorn

    running = []

    def start(app) -> str:
        # Listening before the thread starts: requests queue in the backlog, no readiness polling needed.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        t = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        t.start()
        running.append((server, t, sock))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"

    yield start
    for server, t, sock in running:
        server.should_exit = True
        t.join(30)
        sock.close()


@pytest.fixture
def serve():
    yield from _serving()


@pytest.fixture(scope="module")
def serve_module():
    """serve, for module-scoped fixtures."""
    yield from _serving()
