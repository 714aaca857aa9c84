"""The first session of a new install (issue 46), in the real Claude Code binary (npm) against a
scripted model on 127.0.0.1: an ENGRAM_HOME no daemon ever served and a machine whose model cache
is empty, so the first hook starts the daemon, which must export the model's graph (about 87 MB,
torch in a child process). The daemon listens before that export, and the first SessionStart
gives the session its context (here an open task of the repository) instead of "did not start
listening within 8s"."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from clients_support import client_bin, client_env, engram_cli, engram_env, git_repo, stop_daemon
from model_fakes import FakeAnthropic, anthropic_text, text

from engram import Engram, Settings
from engram.core.project import detect_project
from tests.conftest import wait_until

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]

TASK = "Reconcile the March ledger"


def test_the_first_session_start_of_a_new_install_gives_its_context(tmp_path):
    engram_home, client_home, cache = tmp_path / "engram-home", tmp_path / "client-home", tmp_path / "machine-cache"
    repo = git_repo(tmp_path / "ledger", "https://github.com/acme/ledger.git")
    env = {**engram_env(engram_home), "ENGRAM_MODEL_CACHE": str(cache)}  # no graph exported on this "machine"
    # Something for the first session to be told: an open task of the repository, stored by the
    # library without the model (no daemon ran, nothing was exported).
    with Engram(settings=Settings.from_env(env), degraded_ok=True, load_model_later=True) as eng:
        eng.create_task(TASK, "Match bank lines to entries", project=detect_project(repo).id)
    assert not (engram_home / "engram.sock").exists() and not cache.exists()
    r = engram_cli("hooks", "install", "claude-code", "--scope", "project", cwd=repo, env=env)
    assert r.returncode == 0, r.stderr
    try:
        with FakeAnthropic([[text("Starting on the ledger.")]]) as fake:
            p = subprocess.run(
                [str(client_bin("claude")), "-p", "Carry on", "--output-format", "json"],
                cwd=repo,
                env={
                    "PATH": os.environ["PATH"],
                    "HOME": str(client_home),
                    "ANTHROPIC_BASE_URL": fake.url,
                    "ANTHROPIC_API_KEY": "sk-ant-fake",
                    "ENABLE_TOOL_SEARCH": "false",
                    "DISABLE_AUTOUPDATER": "1",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                    **client_env(engram_home),
                    "ENGRAM_MODEL_CACHE": str(cache),
                },
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert p.returncode == 0, p.stderr[-3000:]
            assert json.loads(p.stdout)["is_error"] is False
            first = anthropic_text(fake.loop_requests()[0])  # what the model sees before it does anything
        assert TASK in first, first[-3000:]
        starts = [ln for ln in (engram_home / "hooks.log").read_text().splitlines() if " SessionStart " in ln]
        assert len(starts) == 1 and " ok " in starts[0] and "injected" in starts[0], starts
        # The model is exported after the daemon began answering, and then serves.
        log = wait_until(
            lambda: "embedding model loaded" in (t := (engram_home / "daemon.log").read_text()) and t,
            timeout=600,
            what="the daemon to load the model it exported",
        )
        assert log.index("serving") < log.index("embedding model loaded"), log[-3000:]
        assert any(Path(cache, "onnx").glob("*.onnx"))  # kept for every other home of the machine
    finally:
        stop_daemon(engram_home)
