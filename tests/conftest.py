"""Shared fixtures: an in-memory store, a deterministic fake embedder, a virtual clock, an HTTP server."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engram import Engram, Settings, VirtualClock
from engram.embedding import FakeEmbedder

START = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)


@pytest.fixture
def anyio_backend() -> str:
    """The async tests (MCP clients) run on asyncio only: the SDK's transports are tested there."""
    return "asyncio"


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


@pytest.fixture(scope="session")
def checked_model_cache(tmp_path_factory):
    """A model cache holding the real model's checked ONNX graph (and its manifest), made once, so
    a daemon started on a new home loads in about a second instead of exporting the graph again."""
    from engram.embedding import SentenceTransformerEmbedder
    cache = tmp_path_factory.mktemp("checked_model_cache")
    emb = SentenceTransformerEmbedder(Settings().model, cache)
    assert emb.checked == "checked" and emb.onnx_file.with_suffix(".json").exists()
    return cache


@pytest.fixture
def model_home(checked_model_cache):
    """A short ENGRAM_HOME (Unix socket paths are limited) with the checked graph in its cache;
    any daemon started in it is stopped afterwards."""
    import shutil
    import tempfile
    from pathlib import Path

    from engram.server.daemon import stop_daemon
    home = Path(tempfile.mkdtemp(prefix="egm", dir="/tmp"))
    shutil.copytree(checked_model_cache, home / "model_cache")
    yield home
    stop_daemon(Settings.from_env({"ENGRAM_HOME": str(home)}))
    shutil.rmtree(home, ignore_errors=True)
