"""Schema migrations, extensions, redaction and the BM25 implementation against DuckDB FTS."""

import duckdb
import pytest

from engram import Engram
from engram.core.errors import SchemaTooNew
from engram.core.redaction import REDACTED, Redactor
from engram.models.embedding import FakeEmbedder
from engram.search.bm25 import BM25Index
from engram.store import extensions
from engram.store.schema import SCHEMA_VERSION, current_version, migrate
from tests.conftest import START, memory_path


@pytest.mark.duckdb_only
def test_migrate_from_empty_file(tmp_path):
    con = duckdb.connect(str(tmp_path / "a.duckdb"))
    assert migrate(con, START) == list(range(1, SCHEMA_VERSION + 1))
    assert current_version(con) == SCHEMA_VERSION
    assert migrate(con, START) == []  # idempotent
    rows = con.execute("SELECT version, description FROM schema_version ORDER BY version").fetchall()
    assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1))


@pytest.mark.duckdb_only
@pytest.mark.parametrize("start", range(1, SCHEMA_VERSION))
def test_migrate_from_each_older_schema_keeps_data(tmp_path, settings, clock, start):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    migrate(con, START, target=start)
    # A row written by the old schema (v1 columns only).
    con.execute(
        "INSERT INTO memories (id, content, memory_type, importance, recall_count, created_at, "
        "user_id, status) VALUES ('old1', 'Legacy fact about the build server.', 'fact', 0.5, 0, "
        "'2025-01-01', 'default', 'active')"
    )
    con.close()
    e = Engram(path, settings=settings, embedder=FakeEmbedder(), clock=clock)
    assert e.store_db.schema_version() == SCHEMA_VERSION
    assert e.get("old1").content.startswith("Legacy")  # re-embedded on open: it had no vector
    assert e.recall("legacy build server", reinforce=False)[0].memory.id == "old1"
    e.close()


@pytest.mark.duckdb_only
def test_stability_migration_keeps_what_recalls_earned(tmp_path, settings, clock):
    from engram.search.decay import initial_stability
    from engram.store.schema import MIGRATIONS

    before = [d for d, _ in MIGRATIONS].index("memory stability")  # versions are 1-based
    path = tmp_path / "pre.duckdb"
    con = duckdb.connect(str(path))
    migrate(con, START, target=before)
    for mid, mtype, imp, n in (("used", "strategy", 0.8, 3), ("unused", "fact", 0.5, 0)):
        con.execute(
            "INSERT INTO memories (id, content, memory_type, importance, recall_count, created_at, "
            "user_id, status) VALUES (?, ?, ?, ?, ?, '2025-01-01', 'default', 'active')",
            [mid, f"Legacy {mid} memory", mtype, imp, n],
        )
    con.close()
    e = Engram(path, settings=settings, embedder=FakeEmbedder(), clock=clock)
    assert e.get("used").stability == pytest.approx(initial_stability("strategy", 0.8) * 1.6)
    assert e.get("unused").stability is None  # S₀ applies until its first recall
    e.close()


@pytest.mark.duckdb_only
def test_newer_schema_is_refused(tmp_path):
    con = duckdb.connect(str(tmp_path / "n.duckdb"))
    migrate(con, START)
    con.execute("INSERT INTO schema_version VALUES (999, 'future', '2030-01-01')")
    with pytest.raises(SchemaTooNew, match="newer than this engram"):
        migrate(con, START)


@pytest.mark.duckdb_only
def test_missing_extension_says_what_to_install(monkeypatch):
    import importlib

    real = importlib.import_module

    def fake_import(name, *a, **k):
        if name == "duckdb_extension_fts":
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", fake_import)
    with pytest.raises(extensions.ExtensionError, match=r"pip install duckdb==1\.5\.5 duckdb-extension-fts==1\.5\.5"):
        extensions.extension_file("fts")


@pytest.mark.duckdb_only
def test_mismatched_extension_version_is_refused(monkeypatch):
    monkeypatch.setattr(duckdb, "__version__", "9.9.9")
    with pytest.raises(extensions.ExtensionError, match=r"ships v1\.5\.5 but duckdb is v9\.9\.9"):
        extensions.extension_file("vss")


SECRETS = {
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "openai": "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
    "anthropic": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345",
    "github": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_redaction_patterns(kind):
    text = f"the key is {SECRETS[kind]} ok"
    out = Redactor()(text)
    assert SECRETS[kind] not in out and REDACTED in out and out.endswith(" ok")


def test_user_patterns_and_every_write_path(settings, clock):
    from dataclasses import replace

    s = replace(settings, redact_patterns=(r"EMP-\d{6}",))
    e = Engram(memory_path(s), settings=s, embedder=FakeEmbedder(), clock=clock)
    secret = SECRETS["openai"]
    m = e.store(f"token {secret} for EMP-123456", tags=[secret], metadata={"k": secret}).memory
    assert secret not in m.content and "EMP-123456" not in m.content
    assert m.tags == (REDACTED,) and m.metadata == {"k": REDACTED}
    e.update(m.id, f"rotated to {SECRETS['github']}")
    t = e.create_task(f"task {secret}", goal=f"goal {secret}")
    h = e.handoff(f"summary {secret}", next_steps=[f"use {secret}"], task_id=t.id)
    f = e.track_failure(f"error {secret}", "auth", f"cause {secret}", fix=f"fix {secret}").memory
    p = e.track_progress(f"feature {secret}", "done", 1.0, notes=f"notes {secret}")
    dump = (
        str(e.store_db.execute("SELECT * FROM memories").fetchall())
        + str(e.store_db.execute("SELECT * FROM tasks").fetchall())
        + str(e.store_db.execute("SELECT * FROM memory_events").fetchall())
    )
    assert secret not in dump and SECRETS["github"] not in dump
    assert h.id and f.id and p.id
    with pytest.raises(ValueError, match="invalid pattern"):
        Redactor(["(unclosed"])
    e.close()


@pytest.mark.duckdb_only
def test_opening_a_store_loads_no_extension(eng):
    db = eng.store_db
    loaded = {r[0] for r in db.execute("SELECT extension_name FROM duckdb_extensions() WHERE loaded").fetchall()}
    assert loaded and not loaded & set(extensions.EXTENSIONS), loaded
    assert db.execute("SELECT current_setting('autoload_known_extensions')").fetchone()[0] is False
    # What would need fts fails at once: autoloading is off, so nothing is fetched.
    with pytest.raises(duckdb.Error, match="fts"):
        db.execute("PRAGMA create_fts_index('memories', 'id', 'content')")


@pytest.mark.duckdb_only
def test_bm25_agrees_with_duckdb_fts():
    docs = [
        "the quick brown fox jumps over the lazy dog",
        "a quick brown dog outpaces a quick fox",
        "lazy dogs sleep all day",
        "foxes are quick and clever animals",
        "brown bears eat fish",
        "the dog barks at the brown fox",
        "clever dogs learn quick tricks",
    ]
    con = duckdb.connect()
    extensions.load_extensions(con, ("fts",))  # the one place engram loads an extension
    con.execute("CREATE TABLE d (id INTEGER, body VARCHAR)")
    con.executemany("INSERT INTO d VALUES (?, ?)", list(enumerate(docs)))
    con.execute("PRAGMA create_fts_index('d', 'id', 'body', stemmer='english', stopwords='english')")
    idx = BM25Index()
    for i, t in enumerate(docs):
        idx.add(i, t)
    for q in ["quick fox", "lazy dog", "clever", "brown bears fish"]:
        ref = con.execute(
            "SELECT id, score FROM (SELECT id, fts_main_d.match_bm25(id, ?) AS score FROM d) "
            "WHERE score IS NOT NULL ORDER BY score DESC, id",
            [q],
        ).fetchall()
        mine = sorted(idx.score(q).items(), key=lambda kv: (-kv[1], kv[0]))
        assert {i for i, _ in ref} == {i for i, _ in mine}
        assert ref[0][0] == mine[0][0]


@pytest.mark.duckdb_only
def test_recall_counts_are_deferred_but_never_lost_or_stale(tmp_path, settings, clock, monkeypatch):
    """A recall's reinforcement is held and written later (with a write transaction after
    RECALL_WRITE_DELAY_S, before any other statement, or at close); every read sees it."""
    from engram.store import db as store_db

    path = tmp_path / "r.duckdb"
    e = Engram(path, settings=settings, embedder=FakeEmbedder(), clock=clock)
    m = e.store("The staging cluster runs on three nodes.").memory

    def on_disk() -> int:  # the raw connection: no flush of held counts
        return e.store_db.con.execute("SELECT recall_count FROM memories WHERE id = ?", [m.id]).fetchone()[0]

    for expected in (1, 2, 3):
        hits = e.recall("staging cluster nodes", mode="bm25")
        assert hits[0].memory.id == m.id and hits[0].memory.recall_count == expected
    assert on_disk() == 0
    assert e.store_db.count_where("memories", "recall_count = 3") == 1  # a SQL read writes them first
    e.recall("staging cluster nodes", mode="bm25")
    assert e.get(m.id).recall_count == 4 and on_disk() == 3  # get() adds what is held
    monkeypatch.setattr(store_db, "RECALL_WRITE_DELAY_S", 3600.0)
    e.recall("staging cluster nodes", mode="bm25")
    e.store("Deploys happen on Tuesdays.")  # too soon: the counts stay held
    assert on_disk() == 3 and e.get(m.id).recall_count == 5
    monkeypatch.setattr(store_db, "RECALL_WRITE_DELAY_S", 0.0)
    e.store("Backups run nightly at two.")  # now they ride on this write's commit
    assert on_disk() == 5
    e.recall("staging cluster nodes", mode="bm25")
    e.close()  # and the last one on the close
    e = Engram(path, settings=settings, embedder=FakeEmbedder(), clock=clock)
    assert e.get(m.id).recall_count == 6
    e.close()


@pytest.mark.duckdb_only
def test_recall_counts_of_many_recalls_are_written_together(tmp_path, settings, clock, monkeypatch):
    from engram.store import db as store_db

    monkeypatch.setattr(store_db, "RECALL_WRITE_DELAY_S", 3600.0)
    e = Engram(tmp_path / "r.duckdb", settings=settings, embedder=FakeEmbedder(), clock=clock)
    ids = [
        e.store(f"Service {w} runs on port {i}.", resolve_conflicts=False).memory.id
        for i, w in enumerate(["alpha", "bravo", "charlie", "delta"])
    ]
    for w, times in (("alpha", 3), ("bravo", 1), ("charlie", 2)):
        for _ in range(times):
            e.recall(f"service {w}", mode="bm25", limit=1)
            clock.advance(minutes=1)
    monkeypatch.setattr(store_db, "RECALL_WRITE_MAX", 3)  # three memories held: due
    e.store("Service echo runs on port 9.")
    rows = dict(e.store_db.con.execute("SELECT id, recall_count FROM memories").fetchall())
    assert [rows[i] for i in ids] == [3, 1, 2, 0]
    e.close()


@pytest.mark.duckdb_only
@pytest.mark.parametrize("due", [False, True])
def test_a_rolled_back_write_keeps_the_held_recall_counts_once(tmp_path, settings, clock, monkeypatch, due):
    from engram.store import db as store_db

    monkeypatch.setattr(store_db, "RECALL_WRITE_DELAY_S", 0.0 if due else 3600.0)
    e = Engram(tmp_path / "r.duckdb", settings=settings, embedder=FakeEmbedder(), clock=clock)
    m = e.store("The staging cluster runs on three nodes.").memory
    e.recall("staging cluster", mode="bm25")
    with pytest.raises(RuntimeError), e.store_db.transaction():  # writes the counts when due, then rolls them back
        raise RuntimeError("boom")
    assert e.get(m.id).recall_count == 1
    e.close()
    e = Engram(tmp_path / "r.duckdb", settings=settings, embedder=FakeEmbedder(), clock=clock)
    assert e.get(m.id).recall_count == 1
    e.close()
