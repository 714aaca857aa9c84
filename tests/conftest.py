"""Shared fixtures: an in-memory store, a deterministic fake embedder, a virtual clock."""

from __future__ import annotations

import os
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
