"""A batch of writes (store_many, store_batch: how imports, captures and the benchmarks store
history) stores what the same items stored one at a time store: the same memories, strengths and
resolution, duplicates inside the batch included; and a bad item is named without costing the
others (store_batch) or refuses the whole batch before anything is written (store_many)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from engram import Engram
from engram.core.errors import EngramError, NotFound

LONG = " ".join(f"Paragraph {i} of the deployment notes: the staging cluster drains node {i} first." for i in range(40))


def items(clock) -> list[dict]:
    t0 = clock.now() - timedelta(days=3)
    return [
        {"content": "The API server listens on port 8080.", "tags": ["infra"]},
        {"content": "Deploys go out on Thursdays after the standup.", "importance": 0.7},
        {"content": "The API server listens on port 8080.", "tags": ["api"]},  # the same fact again: reinforce
        {"content": "The API server listens on port 9090."},  # a changed value: replace
        {"content": LONG, "memory_type": "strategy"},  # chunked
        {"content": "Caroline: I adopted a gecko called Velmar.", "conversation": "s1", "created_at": t0},
        {"content": "Melanie: What does he eat?", "conversation": "s1", "created_at": t0 + timedelta(minutes=1)},
        {"content": "Caroline: I adopted a gecko called Velmar.", "conversation": "s1", "created_at": t0},  # again
        {"content": "Caroline: I adopted a gecko called Velmar.", "conversation": "s2", "created_at": t0},  # other chat
        {"content": "The fixture loads the seed data from tests/data.", "user_id": "bob"},
    ]


def stored(e: Engram) -> list[tuple]:
    """Every memory but the ids a write draws at random (a chunk group's, a memory's)."""
    out = []
    for m, _ in e.store_db.iter_index_rows():
        meta = {k: v for k, v in m.metadata.items() if k != "chunk_group"}
        out.append(
            (
                m.content,
                m.memory_type,
                m.status,
                m.user_id,
                m.conversation,
                m.created_at,
                m.importance,
                m.recall_count,
                m.stability,
                m.tags,
                tuple(sorted(meta.items())),
                m.superseded_by is not None,
            )
        )
    return sorted(out, key=repr)


def summary(results) -> list[tuple]:
    return [(r.action, r.memory.content[:60], len(r.chunks)) for r in results]


def test_a_batch_stores_what_the_items_one_at_a_time_store(eng, settings, fake, clock):
    one_by_one = [eng.store_memory(**it) for it in items(clock)]
    # the batch in a store of its own (a DuckDB one: under PostgreSQL a test has one database)
    other = Engram(":memory:", settings=replace(settings, database_url=None), embedder=fake, clock=clock)
    try:
        batch = other.store_many(items(clock))
        assert summary(batch) == summary(one_by_one)
        assert [r.action for r in batch] == [
            "new",
            "new",
            "reinforce",
            "replace",
            "new",
            "new",
            "new",
            "reinforce",
            "new",
            "new",
        ]
        assert stored(other) == stored(eng)
        # the reinforced one is the batch's own first item, as it is the first store's
        assert batch[2].memory.id == batch[0].memory.id
        assert batch[7].memory.id == batch[5].memory.id
        assert batch[3].previous.id == batch[0].memory.id
    finally:
        other.close()


def test_store_batch_names_a_bad_item_and_stores_the_others(eng, clock):
    task = eng.create_task("Ship the release", user_id="bob")
    batch = [
        {"content": "Release notes live in docs/releases."},
        {"content": ""},
        {"content": "The changelog is written before the tag.", "metadata": "not an object"},
        {"content": "Tag names start with v.", "task_id": task.id},  # bob's task, not this user's
        {"content": "Tags are signed with the release key.", "importance": 0.9},
        "not an item",
        {"content": "Builds run on the CI runner.", "colour": "blue"},
    ]
    out = eng.store_batch(batch)
    assert [type(r).__name__ for r in out] == [
        "StoreResult",
        "EngramError",
        "EngramError",
        "NotFound",
        "StoreResult",
        "EngramError",
        "InvalidArguments",
    ]
    assert "content" in str(out[1])
    assert "metadata must be an object" in str(out[2])
    assert task.id in str(out[3])
    assert "str" in str(out[5])
    assert "colour" in str(out[6])
    kept = [eng.get(r.memory.id) for r in out if not isinstance(r, EngramError)]
    assert [m.content for m in kept] == [
        "Release notes live in docs/releases.",
        "Tags are signed with the release key.",
    ]
    assert kept[1].importance == 0.9
    assert len(eng.index) == 2  # nothing of the refused items was stored


def test_store_many_refuses_a_batch_with_a_bad_item_and_names_it(eng):
    eng.store("Already known before the batch.")
    with pytest.raises(EngramError, match=r"^item 1: .*content"):
        eng.store_many([{"content": "A good item."}, {"content": "   "}, {"content": "Another good one."}])
    with pytest.raises(NotFound, match=r"^item 0: no task"):
        eng.store_many([{"content": "Names a task nobody has.", "task_id": "t-missing"}, {"content": "Fine."}])
    assert [m.content for m, _ in eng.store_db.iter_index_rows()] == ["Already known before the batch."]
    # one item: its error as the single store gives it
    with pytest.raises(EngramError, match=r"^content"):
        eng.store_many([{"content": ""}])


def chat(clock) -> list[dict]:
    """A conversation as a chat import stores it: short requests, long answers of several chunks
    whose later chunks carry words of their own."""
    t0 = clock.now() - timedelta(days=2)
    topics = ["gecko terrarium heating", "sourdough starter feeding", "bicycle chain cleaning"]
    out = []
    for i, topic in enumerate(topics):
        answer = " ".join(
            f"Step {j} for the {topic}: keep notes {j} about the {topic} and check item {i * 100 + j} twice."
            for j in range(30)
        )
        answer += f" Finally, the {topic} needs the marker word zephyr{i} at the very end."
        for k, text in enumerate([f"User: how do I manage the {topic}?", f"Assistant: {answer}"]):
            out.append(
                {
                    "content": text,
                    "conversation": "c1",
                    "provenance": (f"t{i}{k}",),
                    "created_at": t0 + timedelta(minutes=2 * i + k),
                }
            )
    return out


def by_place(e: Engram) -> dict[tuple, str]:
    """Memory id -> (turn, chunk): the same place in two stores of the same turns."""
    return {m.id: (m.provenance, m.metadata.get("chunk", 0)) for m, _ in e.store_db.iter_index_rows()}


def derived(e: Engram) -> tuple[dict, set, set]:
    """Each memory's stored embedding, the edges table and the graph recall walks (kept in step
    with the writes since it was first read), by place: ids differ by store."""
    place = by_place(e)
    vecs = {place[m.id]: blob for m, blob in e.store_db.iter_index_rows()}
    edges = {(place[s], place[d], round(w, 4)) for s, d, w, _ in e.store_db.all_edges()}
    graph = {(frozenset((place[a], place[b])), round(w, 4)) for a, b, w in e.indexes.p.graph.g.edges(data="weight")}
    return vecs, edges, graph


QUESTIONS = [
    "How should I heat the gecko terrarium?",
    "zephyr1",
    "What is the marker word for the bicycle chain?",
    "check item 228 twice",
    "sourdough starter",
]


def test_a_bulk_write_embeds_a_turns_first_chunk_and_the_fill_the_rest(settings, fake, clock):
    """store_many(fill_token_vectors=False), as an import of history writes: a long turn's first
    chunk is embedded at once and its later chunks are left to the background fill (asked for);
    meanwhile recall finds the turn by any chunk's words; once the fill has run, the store holds
    the embeddings and edges an eager write leaves, and recall returns the same."""
    eager = Engram(":memory:", settings=replace(settings, database_url=None), embedder=fake, clock=clock)
    bulk = Engram(":memory:", settings=replace(settings, database_url=None), embedder=fake, clock=clock)
    asked: list[int] = []
    bulk.indexes.tokens.fill_soon = lambda: asked.append(1)
    try:
        for e in (eager, bulk):
            assert e.indexes.p.graph.g.number_of_edges() == 0  # read now: the writes mirror theirs
        eager.store_many(chat(clock))
        results = bulk.store_many(chat(clock), fill_token_vectors=False)
        assert [len(r.chunks) for r in results] == [0, 5, 0, 5, 0, 4]
        later = {i for r in results for i in r.chunks[1:]}
        assert bulk.indexes.unembedded == later and asked
        assert {m.id for m, blob in bulk.store_db.iter_index_rows() if blob is None} == later
        # Meanwhile: a word only a later chunk holds still finds its turn (BM25).
        hit = bulk.recall("zephyr1", reinforce=False)
        assert hit and hit[0].memory.provenance == ("t11",) and hit[0].memory.id in later
        assert bulk.fill_token_vectors() >= 0
        assert bulk.indexes.unembedded == set()
        assert derived(bulk) == derived(eager)
        for q in QUESTIONS:
            a = [
                (h.memory.provenance, h.memory.metadata.get("chunk"), round(h.score, 6))
                for h in eager.recall(q, reinforce=False)
            ]
            b = [
                (h.memory.provenance, h.memory.metadata.get("chunk"), round(h.score, 6))
                for h in bulk.recall(q, reinforce=False)
            ]
            assert a == b and a
    finally:
        eager.close()
        bulk.close()


def test_the_fill_leaves_a_chunk_deleted_meanwhile_and_a_reopened_store_leaves_the_rest_to_it(
    settings, fake, clock, tmp_path
):
    """A chunk forgotten before the fill is not embedded again; a store closed before the fill
    opens without embedding what its rows lack (after a large import that would hold the daemon
    off its socket for minutes): it asks for the fill, serves those rows by keywords meanwhile,
    and once the fill has run holds what an uninterrupted fill leaves."""
    path = str(tmp_path / "bulk.duckdb")
    s = replace(settings, database_url=None)
    e = Engram(path, settings=s, embedder=fake, clock=clock)
    results = e.store_many(chat(clock), fill_token_vectors=False)
    gone = results[1].chunks[2]
    e.forget(gone)
    assert gone not in e.indexes.unembedded
    left = set(e.indexes.unembedded)
    e.close()
    whole = Engram(":memory:", settings=s, embedder=fake, clock=clock)
    done = whole.store_many(chat(clock), fill_token_vectors=False)
    whole.forget(done[1].chunks[2])
    whole.fill_token_vectors()
    again = Engram(path, settings=s, embedder=fake, clock=clock)
    asked: list[int] = []
    try:
        assert again.indexes.unembedded == left and left
        assert {m.id for m, blob in again.store_db.iter_index_rows() if blob is None} == left
        hit = again.recall("zephyr1", reinforce=False)  # a later chunk's word, by keywords meanwhile
        assert hit and hit[0].memory.id in left
        again.indexes.tokens.fill_soon = lambda: asked.append(1)
        again.indexes.rebuild()  # as at an open with the daemon's fill wired
        assert asked
        assert again.indexes.fill_vectors() == len(left)
        assert again.indexes.unembedded == set()
        assert all(blob is not None for _, blob in again.store_db.iter_index_rows())
        assert derived(again) == derived(whole)
    finally:
        again.close()
        whole.close()


def test_a_bulk_write_asks_for_the_fill_with_late_interaction_off(settings, fake, clock):
    """The later chunks' embeddings are the first stage's: the fill is asked for whether or not
    the late stage's token vectors are wanted (else they would wait for the next maintenance)."""
    e = Engram(
        ":memory:", settings=replace(settings, database_url=None, late_interaction=False), embedder=fake, clock=clock
    )
    asked: list[int] = []
    e.indexes.tokens.fill_soon = lambda: asked.append(1)
    try:
        e.store_many(chat(clock), fill_token_vectors=False)
        assert e.indexes.unembedded and asked
        assert e.fill_token_vectors() == 0  # no token vectors with the stage off...
        assert e.indexes.unembedded == set()  # ...but every chunk embedded
        assert all(blob is not None for _, blob in e.store_db.iter_index_rows())
    finally:
        e.close()


def test_rows_handed_to_the_fill_while_it_encodes_are_embedded_by_the_same_run(settings, fake, clock):
    """A bulk write while the fill encodes token vectors asks for a fill the scheduler drops (one
    is running): the running fill embeds its rows before it ends."""
    e = Engram(":memory:", settings=replace(settings, database_url=None), embedder=fake, clock=clock)
    encode = e.indexes.tokens.fill_missing
    written: list[set[str]] = []

    def a_bulk_write_meanwhile() -> int:
        if not written:
            later = e.store_many(chat(clock), fill_token_vectors=False)
            written.append({i for r in later for i in r.chunks[1:]})
        return encode()

    e.indexes.tokens.fill_missing = a_bulk_write_meanwhile
    try:
        e.store_many(chat(clock), fill_token_vectors=False)
        e.fill_token_vectors()
        assert written[0] and e.indexes.unembedded == set()
        assert all(blob is not None for _, blob in e.store_db.iter_index_rows())
    finally:
        e.close()
