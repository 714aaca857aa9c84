"""`engram doctor` (docs/lifecycle.md#doctor): a healthy store exits 0; each fault planted in the
store is reported with its fix and exits 1; the hooks' state is read from the client's files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engram.api import Api
from engram.cli import main
from engram.core.types import Ctx
from engram.store.schema import SCHEMA_VERSION

CTX = Ctx(session_id="s1")


@pytest.fixture(autouse=True)
def _no_real_clients(tmp_path, monkeypatch):
    """The clients' settings files are read from a home of the test's own, not the machine's."""
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def stored(eng):
    api = Api(eng)
    ids = [
        api.call("store_memory", {"content": text}, CTX)["memory_id"]
        for text in ("Deploys go out from the release branch.", "The staging database listens on port 5433.")
    ]
    return api, ids


def doctor(api: Api, capsys) -> tuple[int, dict]:
    code = main(["--json", "doctor"], api_factory=lambda settings: api)
    return code, json.loads(capsys.readouterr().out)


def test_a_healthy_store_exits_0(stored, capsys):
    api, _ = stored
    code, r = doctor(api, capsys)
    assert code == 0 and r["ok"] is True and r["errors"] == 0
    assert {"daemon", "schema", "index", "embeddings", "token vectors", "orphans", "hooks"} <= set(r["checks"])
    # Nothing is installed in this home: said as a warning, which does not fail the gate.
    assert [p["check"] for p in r["problems"] if p["severity"] == "warning"] == ["hooks"]
    code = main(["doctor"], api_factory=lambda settings: api)
    out = capsys.readouterr().out
    assert code == 0 and "WARNING [hooks]" in out and "fix: engram hooks install claude-code" in out


def _schema_behind(eng, ids):
    eng.store_db._sql("DELETE FROM schema_version WHERE version = ?", [SCHEMA_VERSION])


def _index_behind(eng, ids):
    eng.index.remove(ids[0])


def _store_of_another_model(eng, ids):
    eng.store_db.set_meta("model_dim", str(eng.embedder.dim + 1))


def _embedding_of_another_dimension(eng, ids):
    with eng.store_db.transaction():
        eng.store_db.update_memory(ids[0], embedding=np.ones(eng.embedder.dim + 3, dtype=np.float32))


def _orphan_edge(eng, ids):
    with eng.store_db.transaction():
        eng.store_db.add_edges("default", [(ids[0], "0000gone00000000", 0.9)])


def _orphan_history(eng, ids):
    with eng.store_db.transaction():
        eng.store_db.add_event("0000gone00000000", eng.clock.now(), "update", {"previous": "x"})


def _orphan_token_vectors(eng, ids):
    eng.store_db.put_token_vectors([("0000gone00000000", "h", b"\x00\x00")])


FAULTS = {
    "schema": _schema_behind,
    "index": _index_behind,
    "embeddings": _store_of_another_model,
    "embedding dimension": _embedding_of_another_dimension,
    "orphan edge": _orphan_edge,
    "orphan history": _orphan_history,
    "orphan token vectors": _orphan_token_vectors,
}
CHECK = {"embedding dimension": "embeddings", "orphan edge": "orphans", "orphan history": "orphans"}
CHECK["orphan token vectors"] = "orphans"


@pytest.mark.parametrize("fault", FAULTS)
def test_each_planted_fault_is_reported_with_its_fix_and_exits_1(stored, eng, fault, capsys):
    api, ids = stored
    FAULTS[fault](eng, ids)
    code, r = doctor(api, capsys)
    errors = [p for p in r["problems"] if p["severity"] == "error"]
    assert code == 1 and r["ok"] is False
    assert [p["check"] for p in errors] == [CHECK.get(fault, fault)], errors
    assert all(p["problem"] and p["fix"] for p in errors)


def test_stale_token_vectors_are_a_warning(stored, eng, capsys):
    api, ids = stored
    eng.store_db.put_token_vectors([(ids[0], "a hash of another text", b"\x00\x00")])
    code, r = doctor(api, capsys)
    assert code == 0
    assert "token vectors" in [p["check"] for p in r["problems"] if p["severity"] == "warning"]


def test_broken_hooks_are_errors(stored, tmp_path, capsys):
    api, _ = stored
    settings = tmp_path / "user" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    gone = tmp_path / "gone" / "engram"
    hook = {"type": "command", "command": f"{gone} hook SessionStart --client claude-code"}
    settings.write_text(json.dumps({"hooks": {"SessionStart": [{"hooks": [hook]}]}}))
    code, r = doctor(api, capsys)
    hooks = [p for p in r["problems"] if p["check"] == "hooks"]
    assert code == 1
    assert any(p["severity"] == "error" and "not there any more" in p["problem"] for p in hooks), hooks
    assert any(p["severity"] == "warning" and "lacks the events" in p["problem"] for p in hooks), hooks
