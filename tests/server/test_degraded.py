"""A model that does not load: the daemon's engram serves keyword recall and says so in health and
in every recall; stores are kept without a vector and embedded when the model is back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from engram import Engram
from engram import engram as engram_mod
from engram.api import Api, Ctx
from engram.core.types import EngramError
from engram.models.embedding import ModelUnavailable

CTX = Ctx("degraded-test")


@pytest.fixture
def broken(monkeypatch):
    """load_embedder fails as it does with a missing package or corrupt files."""

    def fail(*args, **kwargs):
        raise ModelUnavailable("cannot load embedding model 'all-MiniLM-L6-v2' (package: OSError)")

    monkeypatch.setattr(engram_mod, "load_embedder", fail)
    return monkeypatch


def test_without_degraded_ok_a_broken_model_is_an_error(broken, settings, clock):
    with pytest.raises(ModelUnavailable, match="cannot load embedding model"):
        Engram(":memory:", settings=settings, clock=clock)


def test_degraded_serves_keyword_recall_keeps_stores_and_recovers(broken, settings, clock, fake):
    # A store made while the model worked, so the file has vectors of the model's width; the
    # configured model is that one (a store of another is refused before the model loads).
    settings = replace(settings, model=fake.name)
    path = settings.home / "m.duckdb"
    settings.home.mkdir(parents=True)
    with Engram(path, settings=settings, embedder=fake, clock=clock) as ok:
        before = ok.store("The staging database runs PostgreSQL 16 on port 5433").memory

    eng = Engram(path, settings=settings, clock=clock, degraded_ok=True)
    api = Api(eng)
    try:
        health = api.call("health", {}, CTX)
        assert health["status"] == "degraded" and health["backend"] == "unavailable"
        assert "cannot load embedding model" in health["model_error"] and "bm25" in health["serving"]

        stored = api.call("store_memory", {"content": "Deploys go to Fly.io from the main branch"}, CTX)
        assert stored["action"] == "new" and "stored without a vector" in stored["reason"]
        # Stored twice while degraded: nothing to resolve against, so kept as it is.
        again = api.call("store_memory", {"content": "Deploys go to Fly.io from the main branch"}, CTX)
        assert again["action"] == "new"

        r = api.call("recall_memory", {"query": "where do deploys go", "mode": "hybrid"}, CTX)
        assert r["degraded"].startswith("keyword (bm25) recall only: the embedding model is unavailable")
        assert r["memories"] and "Fly.io" in r["memories"][0]["content"]
        r = api.call("recall_memory", {"query": "PostgreSQL port"}, CTX)
        assert r["memories"][0]["id"] == before.id and "degraded" in r
        assert "degraded" in api.call("get_context", {"query": "deploys"}, CTX)
        h = api.call("session_handoff", {"summary": "Half way", "next_steps": ["Add the index"]}, CTX)
        view = api.call("recall_memory", {"query": "half way"}, CTX)["handoff"]
        assert view["id"] == h["handoff_id"] and view["next_steps_validation"][0]["status"] == "unchecked"
        with pytest.raises(EngramError, match="needs the embedding model, which is unavailable"):
            api.call("update_memory", {"memory_id": stored["memory_id"], "content": "Deploys go to Render"}, CTX)
        missing = [m.id for m, blob in eng.store_db.iter_index_rows() if blob is None]
        assert stored["memory_id"] in missing and before.id not in missing

        # The model is fixed: the next call after the retry interval loads it and embeds the rows.
        broken.setattr(engram_mod, "load_embedder", lambda *a, **k: fake)
        eng.indexes.model_retry_at = 0.0
        health = api.call("health", {}, CTX)
        assert health["status"] == "ok" and "model_error" not in health and eng.degraded is None
        assert not [m.id for m, blob in eng.store_db.iter_index_rows() if blob is None]
        v = eng.index.vector(stored["memory_id"])
        assert np.allclose(v, fake.embed_query("Deploys go to Fly.io from the main branch"))
        r = api.call("recall_memory", {"query": "where do deploys go", "mode": "vector", "memory_type": "fact"}, CTX)
        assert "degraded" not in r and "Fly.io" in r["memories"][0]["content"]
    finally:
        eng.close()


def test_a_new_database_while_degraded(broken, settings, clock, fake):
    settings = replace(settings, model=fake.name)  # the model that will load
    eng = Engram(":memory:", settings=settings, clock=clock, degraded_ok=True)
    try:
        api = Api(eng)
        mid = api.call("store_memory", {"content": "The API timeout is 30 seconds"}, CTX)["memory_id"]
        assert api.call("recall_memory", {"query": "API timeout"}, CTX)["memories"][0]["id"] == mid
        # The configured name is recorded at once, the dimensions once the model is known.
        assert eng.store_db.get_meta("model_name") == fake.name and eng.store_db.get_meta("model_dim") is None
        broken.setattr(engram_mod, "load_embedder", lambda *a, **k: fake)
        assert eng.retry_model(force=True) and eng.store_db.get_meta("model_dim") == str(fake.dim)
        assert eng.index.vector(mid) is not None and float(np.linalg.norm(eng.index.vector(mid))) > 0.99
    finally:
        eng.close()


@pytest.mark.model
def test_the_daemon_serves_keyword_recall_when_the_model_is_missing(model_home):
    env = {
        **os.environ,
        "ENGRAM_HOME": str(model_home),
        "HF_HUB_OFFLINE": "1",
        "ENGRAM_MODEL": str(model_home / "no-such-model"),
    }

    def engram(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "engram.cli", *argv], env=env, capture_output=True, text=True, timeout=300
        )

    r = engram("--json", "remember", "The on-call rotation changes every Monday")
    assert r.returncode == 0, r.stderr
    assert "stored without a vector" in json.loads(r.stdout)["reason"]
    r = engram("--json", "recall", "on-call rotation")
    out = json.loads(r.stdout)
    assert r.returncode == 0 and "keyword (bm25) recall only" in out["degraded"]
    assert out["memories"][0]["content"] == "The on-call rotation changes every Monday"
    r = engram("--json", "stats")
    assert json.loads(r.stdout)["model"]["backend"] == "unavailable"


def test_the_cli_says_when_results_are_keyword_only(broken, settings, clock, capsys):
    """Readable output looks the same degraded or not, so the CLI warns on stderr (stdout stays
    a clean result: a context block piped into a prompt gets no warning in it)."""
    from engram.cli import main

    eng = Engram(":memory:", settings=settings, clock=clock, degraded_ok=True)
    api = Api(eng)
    try:
        assert main(["remember", "The backup runs at 2am"], api_factory=lambda s: api) == 0
        capsys.readouterr()
        for argv in (["recall", "backup"], ["context", "backup"]):
            assert main(argv, api_factory=lambda s: api) == 0
            out, err = capsys.readouterr()
            assert "The backup runs at 2am" in out and "degraded" not in out and "bm25" not in out
            assert err.startswith("warning: keyword (bm25) recall only: the embedding model is unavailable")
        assert main(["--json", "recall", "backup"], api_factory=lambda s: api) == 0
        out, err = capsys.readouterr()
        assert "degraded" in json.loads(out) and err == ""
    finally:
        eng.close()
