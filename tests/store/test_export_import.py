"""Export / import as JSON Lines: complete, faithful, refusing what it cannot do safely."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace

import pytest

from engram import Engram, ModelMismatch
from engram.admin.export_import import ImportConflict, export_jsonl, import_jsonl
from engram.admin.maintenance import run_maintenance
from engram.core.types import EngramError
from engram.models.embedding import FakeEmbedder

QUERIES = [
    "staging database port",
    "deploy target",
    "billing export",
    "rate limit",
    "user preferences editor",
    "handoff billing",
]


def populate(eng: Engram, clock) -> None:
    task = eng.create_task("migrate billing", "move invoices to v2")
    eng.touch_session("s1")
    eng.store(
        "The staging database runs PostgreSQL 16 on port 5433",
        importance=0.8,
        tags=["db"],
        provenance=["chat:1"],
        resolve_conflicts=False,
    )
    eng.store("Staging database runs PostgreSQL 16 on port 5433", resolve_conflicts=False)
    eng.store("Deploys go to Fly.io from the main branch", memory_type="strategy", session_id="s1")
    eng.store("The API rate limit is 100 requests per minute", importance=0.9)
    clock.advance(days=2)
    eng.store("The API rate limit is 250 requests per minute", importance=0.9)
    eng.store("Billing export uses the v2 CSV layout", task_id=task.id, pinned=True)
    eng.store("Alice prefers dark mode in the editor", user_id="alice")
    eng.track_failure("CSV export times out", "billing", "unindexed join", task_id=task.id)
    eng.handoff(
        "Billing export half done",
        completed=["schema"],
        next_steps=["write the CSV writer"],
        task_id=task.id,
        session_id="s1",
    )
    eng.session_outcome("s1", "success")
    eng.end_session("s1")
    clock.advance(days=1)
    run_maintenance(eng)  # consolidates the two database facts
    eng.recall("deploy target")


def recall_all(eng: Engram, **kw) -> list:
    out = []
    for q in QUERIES:
        for user in (None, "alice"):
            out.append(
                [
                    (h.memory.id, round(h.score, 9), h.memory.content)
                    for h in eng.recall(q, reinforce=False, user_id=user, **kw)
                ]
            )
    return out


def lines(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(x) for x in f]


@pytest.fixture
def target(settings, fake, clock):
    e = Engram(":memory:", settings=settings, embedder=fake, clock=clock)
    yield e
    e.close()


def test_round_trip_gives_identical_recall(eng, target, clock, tmp_path):
    populate(eng, clock)
    path = tmp_path / "dump.jsonl"
    counts = export_jsonl(eng, path)

    assert {k: counts[k] for k in eng.store_db.table_counts()} == eng.store_db.table_counts()
    assert counts["memories"] == eng.store_db.count("memories")
    statuses = {x["status"] for x in lines(path) if x["kind"] == "memory"}
    assert statuses == {"active", "consolidated", "superseded"}
    assert any(x["stability"] for x in lines(path) if x["kind"] == "memory")  # recalled: it travels

    got = import_jsonl(target, path)
    assert got["memories"] == counts["memories"] and got["reembedded"] == 0
    assert got["edges"] == counts["edges"] and got["memory_events"] == counts["memory_events"]
    assert recall_all(target) == recall_all(eng)
    assert recall_all(target, as_of=clock.now().replace(day=1)) == recall_all(eng, as_of=clock.now().replace(day=1))
    # Exporting the copy gives the same rows.
    again = tmp_path / "again.jsonl"
    export_jsonl(target, again)
    assert lines(again)[1:] == lines(path)[1:]
    task = target.task_rows()[0]
    view = target.task_view(task.id)
    assert view["latest_handoff"]["next_steps"] == ["write the CSV writer"]
    assert target.store_db.session_outcomes() == eng.store_db.session_outcomes()


def test_export_to_a_stream_and_per_user(eng, clock):
    populate(eng, clock)
    buf = io.StringIO()
    counts = export_jsonl(eng, buf, user_id="alice")
    rows = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert rows[0]["kind"] == "header" and rows[0]["user_id"] == "alice"
    assert rows[0]["model"] == {"name": "fake-hash", "dim": 64}
    assert rows[-1] == {"kind": "end", "counts": counts}
    assert counts["memories"] == 1 and counts["tasks"] == 0
    assert {r["user_id"] for r in rows[1:-1]} == {"alice"}


def test_forgotten_memory_is_not_exported(eng, clock, tmp_path):
    populate(eng, clock)
    victim = eng.store("My old phone number is 555-0199", resolve_conflicts=False).memory
    eng.forget(memory_id=victim.id)
    path = tmp_path / "dump.jsonl"
    export_jsonl(eng, path)
    text = path.read_text()
    assert victim.id not in text and "555-0199" not in text


def test_import_over_existing_ids_is_refused_or_skipped(eng, clock, tmp_path):
    populate(eng, clock)
    path = tmp_path / "dump.jsonl"
    export_jsonl(eng, path)
    before = eng.store_db.table_counts()
    with pytest.raises(ImportConflict, match="already exist"):
        import_jsonl(eng, path)
    assert eng.store_db.table_counts() == before
    skipped = import_jsonl(eng, path, on_conflict="skip")
    assert skipped["memories"] == 0 and skipped["skipped"] > 0
    assert eng.store_db.table_counts() == before


def test_model_mismatch_is_refused_unless_reembedding(eng, clock, settings, tmp_path):
    populate(eng, clock)
    path = tmp_path / "dump.jsonl"
    export_jsonl(eng, path)
    other = Engram(":memory:", settings=settings, embedder=FakeEmbedder(dim=32, name="other"), clock=clock)
    with pytest.raises(ModelMismatch, match="reembed"):
        import_jsonl(other, path)
    assert other.store_db.count("memories") == 0
    got = import_jsonl(other, path, reembed=True)
    assert got["reembedded"] == got["memories"] == eng.store_db.count("memories")
    hits = other.recall("staging database port", reinforce=False)
    assert "5433" in hits[0].memory.content
    other.close()


def test_import_redacts_again_and_reembeds_what_changed(target, tmp_path, eng):
    eng.store("Deploy key note", resolve_conflicts=False)
    path = tmp_path / "dump.jsonl"
    export_jsonl(eng, path)
    rows = lines(path)
    token = "ghp_" + "a" * 36
    rows[1]["content"] = f"Deploy with token {token}"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = import_jsonl(target, path)
    m = target.get(rows[1]["id"])
    assert token not in m.content and "[REDACTED]" in m.content
    assert got["reembedded"] == 1


def test_damaged_files_import_nothing(eng, target, tmp_path, clock):
    populate(eng, clock)
    path = tmp_path / "dump.jsonl"
    export_jsonl(eng, path)
    rows = path.read_text().splitlines(keepends=True)
    cases = {
        "truncated": rows[:-3],
        "row missing": rows[:2] + rows[3:],
        "bad type": [rows[0], rows[1].replace('"memory_type":"', '"memory_type":"x'), *rows[2:]],
        "no header": rows[1:],
        # A number the store's 32-bit columns cannot hold (found by the long fuzz run).
        "too large": [rows[0], re.sub(r'"recall_count":\d+', '"recall_count":2147483648.0', rows[1]), *rows[2:]],
    }
    for name, body in cases.items():
        bad = tmp_path / f"{name}.jsonl"
        bad.write_text("".join(body))
        with pytest.raises(EngramError):
            import_jsonl(target, bad)
        assert target.store_db.count("memories") == 0, name


def test_import_holds_a_batch_of_rows_not_the_file(target, fake, clock, settings, tmp_path, monkeypatch):
    """Memories of 20 KB each, 25 a batch: the Python objects the import keeps alive at its peak
    stay far below the file's size (they were the whole file when it was parsed at once). The
    rebuild of the derived index after the rows are in is left out: the index holds every text by
    design (engram/search/memory_index.py), whatever the import does."""
    import tracemalloc

    from engram.admin import jsonl_import
    from tests.conftest import memory_path

    whole = replace(settings, chunk_size=30_000)  # each memory one row, not chunks
    src = Engram(memory_path(settings), settings=whole, embedder=fake, clock=clock)
    try:
        filler = " ".join(f"word{i % 50}" for i in range(3000))  # ~20 KB of few distinct words
        src.store_many(
            [dict(content=f"Memory {i}: {filler}", user_id=f"u{i % 3}", resolve_conflicts=False) for i in range(400)]
        )
        path = tmp_path / "big.jsonl"
        export_jsonl(src, path)
        texts = sorted(m.content for m, _ in src.store_db.iter_memory_rows())
    finally:
        src.close()
    size = path.stat().st_size
    assert size > 8_000_000
    monkeypatch.setattr(jsonl_import, "IMPORT_BATCH", 25)
    rebuild = target.rebuild_indexes
    monkeypatch.setattr(target, "rebuild_indexes", lambda: None)
    tracemalloc.start()
    try:
        got = import_jsonl(target, path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got["memories"] == 400 and got["edges"] > 0
    assert peak < size / 4, f"peak {peak:,} bytes for a {size:,}-byte file"
    assert sorted(m.content for m, _ in target.store_db.iter_memory_rows()) == texts  # byte for byte
    rebuild()
    assert target.recall("Memory 123", limit=1, user_id="u0")[0].memory.content.startswith("Memory 123:")


def test_import_reads_a_stream_from_where_it_stands_or_one_it_cannot_rewind(eng, clock, settings, fake):
    populate(eng, clock)
    buf = io.StringIO()
    counts = export_jsonl(eng, buf)
    text = buf.getvalue()

    class OneWay(io.StringIO):  # a pipe: read once, no seeking
        def seekable(self) -> bool:
            return False

        def seek(self, *a):
            raise io.UnsupportedOperation("seek")

    for stream in (OneWay(text), io.StringIO("ignored preamble\n" + text)):
        if stream.seekable():
            stream.readline()  # positioned after the preamble: the import starts there
        e = Engram(":memory:", settings=settings, embedder=fake, clock=clock)
        try:
            got = import_jsonl(e, stream)
            assert {t: got[t] for t in counts} == counts
            assert recall_all(e) == recall_all(eng)
        finally:
            e.close()
