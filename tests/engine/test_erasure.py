"""Erasure: forget removes a memory from the rows, the indexes, the exports and, after the next
maintenance run, from the bytes of the database file and its write-ahead log.

DuckDB's CHECKPOINT and VACUUM only mark a deleted row's blocks free (measured on 1.5.5: the
text stays in the file until the blocks happen to be reused), so forget flags the file and the
next maintenance run rewrites it. Compression is switched off here so that leftover text is
plain in the file's bytes: with FSST it would still be there, only harder to grep for.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from engram import Engram
from engram.admin.export_import import export_jsonl
from engram.admin.maintenance import run_maintenance
from tests.support.texts import salad

MARK = b"zqxj"


def uncompressed(eng: Engram) -> None:
    eng.store_db.con.execute("PRAGMA force_compression='uncompressed'")


def file_hits(path: Path) -> int:
    return sum(p.read_bytes().count(MARK) for p in (path, Path(f"{path}.wal")) if p.exists())


@pytest.fixture
def db(tmp_path, settings, fake, clock):
    path = tmp_path / "erase.duckdb"
    eng = Engram(path, settings=settings, embedder=fake, clock=clock)
    uncompressed(eng)
    rng = random.Random(3)
    # Distinct texts: near-duplicates would make the maintenance run consolidate them, not the point here.
    eng.store_many([{"content": salad(rng, f"filler{i}") + " deploy pipeline stage"} for i in range(300)])
    yield path, eng
    eng.close()


def test_forget_leaves_no_trace_in_rows_indexes_exports_or_file_bytes(db, tmp_path):
    path, eng = db
    secret = eng.store("The vault code word is zqxjalpha for the deploy pipeline stage").memory
    eng.update(secret.id, "The vault code word is zqxjbravo for the deploy pipeline stage now")
    eng.recall("zqxjbravo vault", limit=3)  # reinforce it, so it has recall history as well
    assert eng.graph.g.degree(secret.id) > 0  # linked to the filler: edges to erase too
    export_jsonl(eng, tmp_path / "before.jsonl")
    eng.store_db.flush_wal()
    # The checks below can fail: the text is in every place they look.
    assert MARK in (tmp_path / "before.jsonl").read_bytes()
    assert file_hits(path) > 0

    assert eng.forget(memory_id=secret.id) == [secret.id]

    db = eng.store_db
    assert db.get_memory(secret.id) is None
    assert db.count_where("memory_events", "memory_id = ?", [secret.id]) == 0
    assert db.count_where("edges", "src = ? OR dst = ?", [secret.id, secret.id]) == 0
    for table, col in (("memories", "content"), ("memories", "metadata"), ("memory_events", "detail")):
        assert db.count_where(table, f"lower({col}) LIKE '%zqxj%'") == 0, table
    assert secret.id not in eng.index.row_of and secret.id not in eng.graph.g
    assert not any(t.startswith("zqxj") for t in eng.index.bm25.postings)
    assert eng.recall("zqxjbravo", mode="bm25") == []
    export_jsonl(eng, tmp_path / "after.jsonl")
    assert MARK not in (tmp_path / "after.jsonl").read_bytes().lower()

    report = run_maintenance(eng, apply=True)
    assert report["compacted"] is True
    uncompressed(eng)
    db.flush_wal()
    assert file_hits(path) == 0
    # The flag is spent: the next run with nothing deleted does not rewrite the file again.
    assert run_maintenance(eng, apply=True)["compacted"] is False
    assert db.count("memories") == 300


def test_forget_by_query_is_erased_from_the_file_after_reopening(db, settings, fake, clock):
    path, eng = db
    ids = [eng.store(f"Customer zqxj{c} asked for a refund of order {c}{c}").memory.id for c in "abc"]
    eng.store_db.flush_wal()
    assert file_hits(path) > 0
    assert sorted(eng.forget(query="refund order asked")) == sorted(ids)
    eng.close()  # the flag survives a restart: the next run still rewrites the file

    eng = Engram(path, settings=settings, embedder=fake, clock=clock)
    uncompressed(eng)
    assert eng.store_db.erasure_pending()
    assert run_maintenance(eng, apply=True)["compacted"] is True
    eng.close()
    assert file_hits(path) == 0
