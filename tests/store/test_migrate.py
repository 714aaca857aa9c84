"""`engram migrate --to`: a whole store (every user's rows of every table, embeddings, history,
edges, sessions with outcomes, meta, keys) copied into another database and checked there;
export and import between DuckDB and PostgreSQL both ways.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from engram import Engram
from engram.admin.export_import import NOT_COPIED_META, export_jsonl, import_jsonl, migrate_store
from engram.api import Api, Ctx
from engram.core.errors import EngramError, MigrationMismatch, TargetNotEmpty

ADMIN = Ctx("s-admin", client="cli")


def plant(api: Api, clock, tmp_path: Path) -> None:
    """Two users' worth of everything: memories of every status, pinned ones, history, edges,
    tasks, sessions (one active, one interrupted, outcomes), keys (one revoked), meta."""
    firsts = {}
    for user in ("alice", "bob"):
        ctx = Ctx(f"s-{user}", user, "test")

        def call(op, ctx=ctx, **kw):
            return api.call(op, kw, ctx)

        task = call("create_task", name=f"{user}'s billing rewrite", goal="ship invoices v2")["task_id"]
        firsts[user] = call(
            "store_memory",
            content=f"{user}: invoices are generated nightly at 02:00 UTC",
            task_id=task,
            tags=["billing"],
            importance=0.8,
        )["memory_id"]
        for i, text in enumerate(
            [
                "the ledger table is append-only",
                "refunds go through Stripe",
                "tax rates live in config/tax.yaml",
                "the staging database is Postgres 16",
                "deploys happen from the main branch",
                "on-call rotates every Monday",
            ]
        ):
            call("store_memory", content=f"{user}: {text}", pinned=i == 0, task_id=task if i % 2 else None)
        call(
            "track_failure",
            error="invoice PDF timed out",
            component="pdf-renderer",
            task_id=task,
            root_cause="fonts loaded per page",
        )
        call("track_progress", feature="invoice PDFs", status="in_progress", completion=0.4, task_id=task)
        call(
            "session_handoff",
            summary=f"{user} stopped at the PDF renderer",
            task_id=task,
            next_steps=["cache the fonts", "add a PDF test"],
        )
        call("session_outcome", outcome="success")
        clock.advance(minutes=5)
    api.call("report_interruption", {"reason": "rate_limit", "task_id": None}, Ctx("s-bob-2", "bob", "test"))
    # Near-duplicates a consolidation merges (a consolidated status and maintenance totals in meta).
    for text in ("The CI cache key includes the lockfile hash", "CI cache key includes the lockfile's hash"):
        api.eng.store(text, user_id="alice", resolve_conflicts=False, importance=0.9)
    clock.advance(days=40)
    api.call("consolidate_memory", {"apply": True}, Ctx("s-alice", "alice", "test"))
    for user, mid in firsts.items():  # after the upkeep, which prunes old superseded versions
        ctx = Ctx(f"s-{user}", user, "test")
        api.call(
            "update_memory", {"memory_id": mid, "content": f"{user}: invoices are generated nightly at 03:00 UTC"}, ctx
        )
        api.call("store_memory", {"content": "The API timeout is 30 seconds."}, ctx)
        clock.advance(days=2)
        assert api.call("store_memory", {"content": "The API timeout is 60 seconds."}, ctx)["action"] == "replace"
    notes = tmp_path / "notes.md"
    notes.write_text("# Testing\n\n- run pytest with -x\n", encoding="utf-8")
    api.call("import_from", {"source": "markdown", "path": str(notes)}, Ctx("s-alice", "alice", "test"))
    api.call("forget_memory", {"query": "on-call rotates"}, Ctx("s-bob", "bob", "test"))  # erasure_pending
    made = [api.call("create_key", {"user_id": u, "label": f"{u} laptop"}, ADMIN) for u in ("alice", "bob")]
    api.call("revoke_key", {"key_id": made[1]["key_id"]}, ADMIN)


def rows(eng: Engram) -> dict:
    """Everything a store holds, read through the MemoryStore interface."""
    db = eng.store_db
    return {
        "memories": {m.id: (m, blob) for m, blob in db.iter_memory_rows()},
        "events": db.events_by_memory(),
        "tasks": db.all_tasks(),
        "sessions": db.sessions_with_counts(),
        "edges": db.user_edges(),
        "keys": db.list_keys(None),
        "meta": {k: v for k, v in db.meta_items().items() if k not in NOT_COPIED_META},
    }


def assert_same_store(src: dict, dst: dict) -> None:
    assert src["memories"].keys() == dst["memories"].keys()
    for mid, (m, blob) in src["memories"].items():
        assert dst["memories"][mid][0] == m, mid
        assert dst["memories"][mid][1] == blob, mid  # the vector, byte for byte
    assert dst["events"] == src["events"]
    assert dst["tasks"] == src["tasks"]
    assert dst["edges"] == [(a, b, pytest.approx(w), u) for a, b, w, u in src["edges"]]
    assert dst["keys"] == src["keys"]
    assert dst["meta"] == src["meta"]
    # Sessions: as an import makes them, one still active here arrives ended when it was last heard from.
    assert len(dst["sessions"]) == len(src["sessions"])
    for (s, ok, bad), (d, ok2, bad2) in zip(src["sessions"], dst["sessions"], strict=True):
        assert (ok, bad) == (ok2, bad2)
        if s.status == "active":
            assert (d.status, d.ended_at) == ("ended", s.last_heartbeat)
            d = replace(d, status=s.status, ended_at=s.ended_at)
        assert d == s


@pytest.fixture
def source(tmp_path, settings, fake, clock):
    """A DuckDB file holding two users' everything (the source of a migration)."""
    eng = Engram(tmp_path / "source.duckdb", settings=replace(settings, database_url=""), embedder=fake, clock=clock)
    api = Api(eng)
    plant(api, clock, tmp_path)
    yield api
    eng.close()


def open_copy(target: str, source: Api) -> Engram:
    return Engram(target, settings=source.eng.settings, embedder=source.eng.embedder, clock=source.eng.clock)


def check_planted(before: dict) -> None:
    """The planted store really holds every kind of row (else the comparison proves little)."""
    statuses = {m.status for m, _ in before["memories"].values()}
    assert {"active", "superseded", "consolidated"} <= statuses
    assert any(m.pinned for m, _ in before["memories"].values())
    assert before["edges"] and before["events"] and len(before["tasks"]) == 2
    assert {s.status for s, _, _ in before["sessions"]} >= {"active", "interrupted"}
    assert any(ok for _, ok, _ in before["sessions"])
    assert [k["revoked_at"] is None for k in before["keys"]] == [True, False]
    assert "maintenance_totals" in before["meta"] and len(before["meta"]) >= 2


def migrate_and_compare(source: Api, target: str) -> dict:
    before = rows(source.eng)
    check_planted(before)
    report = source.call("migrate_store", {"target": target}, ADMIN)
    assert report["verified"]["counts"] == "equal"
    rec = report["verified"]["recalls"]
    assert rec["sampled"] >= 15 and rec["same"] == rec["sampled"] and rec["differ"] == []
    copy = open_copy(target, source)
    try:
        after_src = rows(source.eng)
        assert_same_store(after_src, rows(copy))
        assert report["copied"] == {**copy.store_db.table_counts(), "api_keys": 2}
        # The copy answers as the source does: recall, tasks, keys.
        for user in ("alice", "bob"):
            q = "when are invoices generated"
            assert [h.memory.id for h in copy.recall(q, user_id=user, reinforce=False)] == [
                h.memory.id for h in source.eng.recall(q, user_id=user, reinforce=False)
            ]
        from engram.admin import keys

        assert keys.keys_in_use(copy)
    finally:
        copy.close()
    return report


def test_migrate_duckdb_to_a_duckdb_file(source, tmp_path):
    report = migrate_and_compare(source, str(tmp_path / "copy.duckdb"))
    assert report["target"] == str(tmp_path / "copy.duckdb") and report["keys"] == 2


def test_a_target_with_rows_is_refused_unless_forced(source, tmp_path):
    target = str(tmp_path / "copy.duckdb")
    source.call("migrate_store", {"target": target}, ADMIN)
    copy = open_copy(target, source)
    copy.store("A row only the target has", user_id="carol")
    copy.close()
    with pytest.raises(TargetNotEmpty, match=r"is not empty \(\d+ memories.*--force"):
        source.call("migrate_store", {"target": target}, ADMIN)
    forced = source.call("migrate_store", {"target": target, "force": True}, ADMIN)
    assert forced["skipped"] > 0 and forced["verified"]["recalls"] is None
    assert forced["copied"]["memories"] == source.eng.store_db.table_counts()["memories"] + 1


@pytest.mark.parametrize(
    "target, message",
    [
        ("mysql://db/x", "not a database engram knows"),
        ("", "target must be"),
    ],
)
def test_bad_targets_are_refused(source, target, message):
    with pytest.raises(EngramError, match=message):
        source.call("migrate_store", {"target": target}, ADMIN)


def test_the_source_itself_is_refused(source):
    with pytest.raises(EngramError, match="is the store being migrated"):
        source.call("migrate_store", {"target": source.eng.path}, ADMIN)


def test_a_copy_that_differs_is_reported(source, tmp_path, monkeypatch):
    """The check can fail: a copy that lost a row is refused by name."""
    from engram.admin import export_import as transfer

    real = transfer.import_memories

    def lossy(eng, path, **kw):
        out = real(eng, path, **kw)
        some = next(m.id for m, _ in eng.store_db.iter_memory_rows())
        eng.store_db.delete_memories([some])
        return out

    monkeypatch.setattr(transfer, "import_memories", lossy)
    with pytest.raises(MigrationMismatch, match=r"memories: \d+ of \d+"):
        migrate_store(source.eng, str(tmp_path / "copy.duckdb"))


# ---------------------------------------------------------------- across backends


def test_migrate_duckdb_to_postgres(source, pg_url):
    migrate_and_compare(source, pg_url)


def test_migrate_postgres_to_duckdb(tmp_path, settings, fake, clock, pg_url):
    pg = Engram(pg_url, settings=settings, embedder=fake, clock=clock)
    api = Api(pg)
    try:
        plant(api, clock, tmp_path)
        migrate_and_compare(api, str(tmp_path / "from-pg.duckdb"))
    finally:
        pg.close()


def test_export_and_import_between_the_backends_both_ways(source, tmp_path, pg_url):
    to_pg = tmp_path / "duck.jsonl"
    export_jsonl(source.eng, to_pg)
    pg = open_copy(pg_url, source)
    try:
        import_jsonl(pg, to_pg)
        duck = rows(source.eng)
        duck["keys"], duck["meta"] = [], {}  # an export carries neither (migrate copies them)
        in_pg = rows(pg)
        in_pg["meta"] = {}
        assert_same_store(duck, in_pg)
        back = tmp_path / "pg.jsonl"
        export_jsonl(pg, back)
    finally:
        pg.close()
    again = Engram(
        tmp_path / "again.duckdb", settings=source.eng.settings, embedder=source.eng.embedder, clock=source.eng.clock
    )
    try:
        import_jsonl(again, back)
        returned = rows(again)
        returned["meta"] = {}
        # Twice through an import: every session is ended now, on both sides of the comparison.
        first = rows(source.eng)
        first["keys"], first["meta"] = [], {}
        assert_same_store(first, returned)
    finally:
        again.close()


# ---------------------------------------------------------------- as a command

REPO = Path(__file__).resolve().parents[2]


def run_engram(home: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    env.pop("ENGRAM_DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "engram.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=300,
        check=False,
    )  # outside any project (docs/projects.md)


@pytest.mark.model
def test_migrate_as_a_command(model_home, tmp_path, real_embedder, settings):
    for text in (
        "The release train leaves every second Tuesday",
        "Feature flags live in LaunchDarkly",
        "The API gateway is Envoy with a Lua filter for auth",
    ):
        assert run_engram(model_home, "remember", text).returncode == 0
    assert run_engram(model_home, "keys", "create", "--user", "alice").returncode == 0
    target = tmp_path / "moved.duckdb"
    r = run_engram(model_home, "migrate", "--to", str(target))
    assert r.returncode == 0, r.stderr
    assert "memories 3" in r.stdout and "api keys 1" in r.stdout
    assert "3 of 3 sample recalls return the same top 5 ids" in r.stdout
    r = run_engram(model_home, "migrate", "--to", str(target))
    assert r.returncode == 1 and "is not empty" in r.stderr and "--force" in r.stderr
    r = run_engram(model_home, "--json", "migrate", "--to", str(target), "--force")
    assert r.returncode == 0 and json.loads(r.stdout)["skipped"] >= 3
    moved = Engram(target, settings=replace(settings, database_url=""), embedder=real_embedder)
    try:
        hits = moved.recall("when does the release train leave", reinforce=False)
        assert hits[0].memory.content == "The release train leaves every second Tuesday"
    finally:
        moved.close()
