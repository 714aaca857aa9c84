"""The e2e tests' ENGRAM_HOME: its daemon is stopped after each test."""

from __future__ import annotations

import pytest
from clients_support import stop_daemon


@pytest.fixture
def engram_home(tmp_path):
    home = tmp_path / "engram-home"
    yield home
    stop_daemon(home)
