"""The facade's write and read paths with the fake embedder."""

from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from engram import Engram, EngramError, NotFound
from engram.models.embedding import FakeEmbedder
from engram.search.decay import memory_stability, retrieval_weight, strength


def test_store_returns_action_and_memory(eng):
    r = eng.store("Deploys go to Fly.io from main.", importance=0.7, tags=["deploy"])
    assert r.action == "new"
    assert r.memory.content == "Deploys go to Fly.io from main."
    assert r.memory.tags == ("deploy",) and r.memory.importance == 0.7
    assert eng.get(r.memory.id).content == r.memory.content


def test_reinforce_adds_no_row(eng):
    a = eng.store("The user prefers dark mode in the editor.")
    b = eng.store("The user prefers dark mode in the editor.")
    assert b.action == "reinforce" and b.memory.id == a.memory.id
    assert b.memory.recall_count == 1
    assert eng.store_db.count("memories") == 1


def test_replace_supersedes_and_as_of_still_sees_old(eng, clock):
    old = eng.store("The API timeout is 30 seconds.").memory
    t_before = clock.now()
    clock.advance(days=2)
    r = eng.store("The API timeout is 60 seconds.")
    assert r.action == "replace" and r.previous.id == old.id
    assert r.memory.supersedes == old.id
    prev = eng.get(old.id)
    assert prev.status == "superseded" and prev.superseded_by == r.memory.id
    assert prev.valid_to == clock.now()
    now_hits = [h.memory.id for h in eng.recall("API timeout", reinforce=False)]
    assert old.id not in now_hits and r.memory.id in now_hits
    then = [h.memory.id for h in eng.recall("API timeout", as_of=t_before + timedelta(hours=1))]
    assert then == [old.id]


def test_replace_carries_the_old_sources(eng):
    eng.store("The API timeout is 30 seconds.", provenance=["chat:1"])
    r = eng.store("The API timeout is 60 seconds.", provenance=["chat:9"])
    assert r.action == "replace"
    # The current version answers for every source that stated the fact.
    assert r.memory.provenance == ("chat:1", "chat:9")
    assert eng.get(r.memory.id).provenance == ("chat:1", "chat:9")


def test_an_old_memory_that_matches_still_outranks_a_fresh_one_that_does_not(eng, clock):
    old = eng.store("The staging database password rotates every quarter.").memory
    clock.advance(days=400)  # raw strength is now ~1e-17
    eng.store("Lunch options near the office include ramen.")
    hits = eng.recall("staging database password rotation", mode="vector", reinforce=False)
    assert hits[0].memory.id == old.id


def test_merge_keeps_both_facts_with_provenance(eng):
    a = eng.store("The user is allergic to peanuts.", provenance=["chat:1"]).memory
    r = eng.store("The user is also allergic to shellfish.", provenance=["chat:2"])
    assert r.action == "merge" and r.memory.id == a.id
    assert "peanut" in r.memory.content and "shellfish" in r.memory.content
    assert set(r.memory.provenance) == {"chat:1", "chat:2"}
    assert [e["action"] for e in eng.history(a.id)] == ["new", "merge"]


def test_keyword_search_sees_a_write_at_once_and_forget_removes_it(eng):
    eng.store("Postgres listens on port 5433 in staging.")
    m = eng.store("The zebrafish pipeline retries thrice.").memory
    assert [h.memory.id for h in eng.recall("zebrafish", mode="bm25")] == [m.id]
    assert eng.forget(memory_id=m.id) == [m.id]
    for mode in ("bm25", "vector", "hybrid"):
        assert m.id not in [h.memory.id for h in eng.recall("zebrafish pipeline retries", mode=mode)]
    with pytest.raises(NotFound):
        eng.get(m.id)
    assert eng.store_db.count_where("edges", "src = ? OR dst = ?", [m.id, m.id]) == 0


def test_forget_by_query_deletes_only_memories_with_all_words(eng):
    a = eng.store("Flight LH 401 leaves at 9am.").memory
    b = eng.store("The flight booking portal is slow.").memory
    c = eng.store("Hotel is near the station.").memory
    assert eng.forget(query="flight leaves", dry_run=True) == [a.id]
    assert set(eng.forget(query="flight")) == {a.id, b.id}
    assert eng.recall("flight", mode="bm25") == []
    assert eng.get(c.id)
    with pytest.raises(EngramError, match="exactly one"):
        eng.forget()


def test_recall_reinforces_what_it_returns(eng, clock):
    m = eng.store("Use ruff for linting Python code.", memory_type="strategy").memory
    clock.advance(days=1)
    hits = eng.recall("linting python")
    assert hits[0].memory.id == m.id
    again = eng.get(m.id)
    assert again.recall_count == 1 and again.last_recalled_at == clock.now()
    eng.recall("linting python", reinforce=False)
    assert eng.get(m.id).recall_count == 1


def test_explain_gives_score_parts(eng):
    eng.store("Redis caches the session tokens.")
    h = eng.recall("redis session cache", explain=True)[0]
    assert set(h.parts) >= {"bm25", "cosine", "strength", "decay", "graph"}
    assert h.parts["decay"] == pytest.approx(retrieval_weight(h.parts["strength"], eng.settings.decay_floor))
    w = eng.settings
    assert h.score == pytest.approx(
        w.w_bm25 * h.parts["bm25"]
        + w.w_vector * h.parts["cosine"] * h.parts["decay"]
        + h.parts["date"]
        + h.parts["speaker"]
        + h.parts["when"]
        + h.parts["graph"],
        rel=1e-6,
    )


def test_filters_are_exact_not_after_top_k(eng):
    # Many strong matches of another type must not crowd out the one filtered match.
    for i in range(60):
        eng.store(f"deployment checklist item {i} for the api", resolve_conflicts=False)
    target = eng.store("deployment checklist failed on the api", memory_type="failure").memory
    hits = eng.recall("deployment checklist api", memory_type="failure", limit=3)
    assert [h.memory.id for h in hits] == [target.id]
    tagged = eng.store("cache warmup steps", tags=["ops"]).memory
    assert [h.memory.id for h in eng.recall("deployment cache", tags=["ops"])] == [tagged.id]


def test_vector_results_equal_exact_search_after_deletes(settings, fake, clock):
    # Without context the search vector is the memory's own, so ranking must equal exact cosine.
    eng = Engram(":memory:", settings=replace(settings, context_window=0), embedder=fake, clock=clock)
    ids = [
        eng.store(f"note {i} about topic {i % 7} and item {i % 11}", resolve_conflicts=False).memory.id
        for i in range(80)
    ]
    gone = set(ids[::3])
    for i in gone:
        eng.forget(memory_id=i)
    q = "topic 3 and item 5"
    hits = eng.recall(q, mode="vector", limit=10, reinforce=False)
    assert not gone & {h.memory.id for h in hits}
    qv = fake.embed_query(q)
    exact = []
    for i in ids:
        if i in gone:
            continue
        m = eng.get(i)
        cos = max(float(np.dot(fake.embed_query(m.content), qv)), 0.0)
        st = strength(m.importance, memory_stability(m), m.created_at, eng.clock.now())
        exact.append(cos * retrieval_weight(st, eng.settings.decay_floor))
    exact.sort(reverse=True)
    assert [round(h.score, 5) for h in hits] == [round(x, 5) for x in exact[:10]]


def test_user_isolation(eng):
    a = eng.store("Alice's secret project is called Falcon.", user_id="alice").memory
    assert eng.recall("Falcon project", user_id="bob") == []
    with pytest.raises(NotFound):
        eng.get(a.id, user_id="bob")
    with pytest.raises(NotFound):
        eng.forget(memory_id=a.id, user_id="bob")
    with pytest.raises(NotFound):
        eng.update(a.id, "hijacked", user_id="bob")
    assert eng.get(a.id, user_id="alice").content.startswith("Alice")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(content=""), "must not be empty"),
        (dict(content=42), "must be a string"),
        (dict(content="x", importance=1.5), "between 0 and 1"),
        (dict(content="x", importance=float("nan")), "between 0 and 1"),
        (dict(content="x", memory_type="opinion"), "memory_type must be one of"),
        (dict(content="x", tags="a,b".split(",") + [3]), "tags must be a list of strings"),
        (dict(content="x" * 100_001), "the limit is 100,000"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_lost(eng, kwargs, message):
    keep = eng.store("A memory that must survive bad input.").memory
    with pytest.raises(EngramError, match=message):
        eng.store(**kwargs)
    assert eng.get(keep.id).content == keep.content
    assert eng.store_db.count("memories") == 1


def test_sql_looking_content_is_stored_verbatim(eng):
    text = "Robert'); DROP TABLE memories;-- said hi"
    m = eng.store(text).memory
    assert eng.get(m.id).content == text
    assert eng.store_db.count("memories") == 1


def test_long_content_is_chunked_and_linked(eng):
    text = " ".join(f"Sentence {i} explains part {i} of the design." for i in range(80))
    r = eng.store(text)
    assert len(r.chunks) >= 3
    mems = [eng.get(i) for i in r.chunks]
    assert all(len(m.content) <= 1000 for m in mems)
    assert [m.metadata["chunk"] for m in mems] == list(range(1, len(mems) + 1))
    for a, b in zip(r.chunks, r.chunks[1:]):
        assert eng.graph.g.has_edge(a, b)


def _whole_text(eng, chunk_ids) -> str:
    """A chunked memory's text put back together from its chunks and their chunk_start."""
    mems = [eng.get(i) for i in chunk_ids]
    out = ""
    for m in mems:
        out += m.content[len(out) - m.metadata["chunk_start"] :]
    return out


@pytest.mark.parametrize(
    "text",
    [
        " ".join(f"Sentence {i} explains part {i} of the design." for i in range(80)),
        "\n\n".join(
            f"  Paragraph {i}:\tindented,  double  spaced   text, with a trailing space. " * 4 for i in range(12)
        )
        + "\n",
        "x" * 2500 + " tail",  # no sentence or word boundary for 2,500 characters
    ],
)
def test_chunks_are_verbatim_slices_that_rebuild_the_text(eng, text):
    r = eng.store(text)
    assert len(r.chunks) >= 3
    for i in r.chunks:
        m = eng.get(i)
        start = m.metadata["chunk_start"]
        assert text[start : start + len(m.content)] == m.content
        assert len(m.content) <= eng.settings.chunk_size
    assert _whole_text(eng, r.chunks) == text


@pytest.mark.parametrize(
    "text",
    [
        "  leading and trailing spaces  ",
        "lower-case start, no final stop",
        "Tabs\tand\nnew lines\r\nkept",
        "ünïcödé — 部署 ✓ emoji 🚀",
    ],
)
def test_stored_and_updated_text_comes_back_byte_for_byte(eng, text):
    m = eng.store(text).memory
    assert eng.get(m.id).content == text
    assert [h.memory.content for h in eng.recall(text, limit=1, reinforce=False)] == [text]
    changed = " " + text + " (edited) "
    assert eng.update(m.id, changed).memory.content == changed
    assert eng.get(m.id).content == changed


def test_merge_keeps_both_texts_verbatim_and_findable(settings, fake, clock):
    # A low dedup threshold lets the fake embedder's similarity reach the merge rule.
    eng = Engram(":memory:", settings=replace(settings, dedup_threshold=0.01), embedder=fake, clock=clock)
    old = eng.store("the user speaks english (tok-aaa1)").memory
    r = eng.store("The user also speaks Spanish (tok-bbb2) ")
    assert r.action == "merge", r.reason
    got = eng.get(old.id).content
    assert got == "the user speaks english (tok-aaa1)\nThe user also speaks Spanish (tok-bbb2) "
    for token in ("tok-aaa1", "tok-bbb2", "english", "spanish"):
        assert [h.memory.id for h in eng.recall(token, mode="bm25", reinforce=False)][:1] == [old.id]
    eng.close()


def test_replace_stores_the_new_text_verbatim(eng):
    eng.store("The API timeout is 30 seconds.")
    r = eng.store("the API timeout is 60 seconds now ")
    assert r.action == "replace"
    assert eng.get(r.memory.id).content == "the API timeout is 60 seconds now "


def test_update_rewrites_and_keeps_history(eng):
    m = eng.store("The staging database is Postgres 14.").memory
    r = eng.update(m.id, "The staging database is Postgres 16.")
    assert r.action == "update" and eng.get(m.id).content.endswith("16.")
    hist = eng.history(m.id)
    assert hist[-1]["action"] == "update" and hist[-1]["detail"]["previous"].endswith("14.")
    assert [h.memory.id for h in eng.recall("postgres 16", mode="bm25")] == [m.id]


def test_reopen_file_keeps_rows_and_indexes(tmp_path, settings, clock):
    path = tmp_path / "m.duckdb"
    e = Engram(path, settings=settings, embedder=FakeEmbedder(), clock=clock)
    ids = [e.store(f"fact number {i} about widget {i}", resolve_conflicts=False).memory.id for i in range(20)]
    e.forget(memory_id=ids[0])
    edges = e.graph.edge_count()
    before = [h.memory.id for h in e.recall("widget 7", reinforce=False)]
    e.close()
    e2 = Engram(path, settings=settings, embedder=FakeEmbedder(), clock=clock)
    assert len(e2.index) == 19 and e2.graph.edge_count() == edges
    assert [h.memory.id for h in e2.recall("widget 7", reinforce=False)] == before
    assert [h.memory.id for h in e2.recall("widget", mode="bm25", limit=50)].count(ids[0]) == 0
    e2.close()


def test_model_identity_guard(tmp_path, settings, clock):
    from engram import ModelMismatch

    path = tmp_path / "m.duckdb"
    e = Engram(path, settings=settings, embedder=FakeEmbedder(64, "model-a"), clock=clock)
    m = e.store("kept across a model change").memory
    e.close()
    with pytest.raises(ModelMismatch, match="engram reindex --reembed"):
        Engram(path, settings=settings, embedder=FakeEmbedder(32, "model-b"), clock=clock)
    e = Engram(path, settings=settings, embedder=FakeEmbedder(32, "model-b"), clock=clock, allow_model_change=True)
    assert e.reembed_all() == 1
    e.close()
    e = Engram(path, settings=settings, embedder=FakeEmbedder(32, "model-b"), clock=clock)
    assert e.recall("kept across", reinforce=False)[0].memory.id == m.id
    e.close()


def _linking_engram(settings, fake, clock):
    """An in-memory engine whose links weigh enough to reorder (graph_bonus 0.5), late stage off."""
    return Engram(
        ":memory:",
        settings=replace(settings, graph_depth=1, graph_bonus=0.5, late_interaction=False),
        embedder=fake,
        clock=clock,
    )


def test_graph_brings_the_second_piece_without_pushing_the_first(settings, fake, clock):
    # The hit names the orion queue; the memory saying what happens there holds the query's words
    # too, yet ranks below four lookalikes: the link to the hit lifts it, below the first two.
    eng = _linking_engram(settings, fake, clock)
    first = eng.store("Kestrel events that fail go to the orion queue").memory
    for job in ("billing", "mail", "search", "upload"):
        eng.store(f"Events of the {job} job are retried when they fail", resolve_conflicts=False)
    second = eng.store(
        "Events of the orion job are retried when they fail, with a pause of a minute between tries"
    ).memory
    query = "how are kestrel events retried when they fail"
    without = eng.recall(query, explain=True, graph=False, reinforce=False, limit=10)
    linked = eng.recall(query, explain=True, reinforce=False, limit=10)
    before, after = [h.memory.id for h in without], [h.memory.id for h in linked]
    assert before[-1] == second.id and without[-1].parts["graph"] == 0
    assert after[:2] == before[:2] and after[0] == first.id  # the first two hold their places
    assert after.index(second.id) < before.index(second.id)  # above a lookalike it trailed
    got = linked[after.index(second.id)]
    assert got.parts["graph"] > 0 and got.score == pytest.approx(got.parts["base"] + got.parts["graph"])
    assert set(after) == set(before)  # reordered, none added


def test_graph_brings_the_turns_said_around_a_hit(settings, fake, clock):
    # The reply is found first; the request it answers (naming the conference) and the turn after
    # it come up with it, above a lookalike reply of another conversation.
    eng = _linking_engram(settings, fake, clock)
    ask, reply, after = (
        r.memory
        for r in eng.store_many(
            [
                {"content": c, "conversation": "trip", "resolve_conflicts": False}
                for c in (
                    "Ana: I still have to book a hotel for the Lisbon conference",
                    "Ben: Take the Alfama Lodge, it was quiet when we stayed there",
                    "Ana: Thanks, and the flights are booked already",
                )
            ]
        )
    )
    for i, town in enumerate(("Porto", "Madrid", "Rome", "Paris")):
        eng.store_many(
            [
                {"content": c, "conversation": f"office-{i}", "resolve_conflicts": False}
                for c in (
                    f"Ana: The {town} office moved last spring",
                    f"Ben: A hotel near the {town} office is always quiet",
                )
            ]
        )
    query = "which quiet hotel did Ben suggest for the conference"
    without = eng.recall(query, explain=True, graph=False, reinforce=False, limit=10)
    linked = eng.recall(query, explain=True, reinforce=False, limit=10)
    before, now = [h.memory.id for h in without], [h.memory.id for h in linked]
    assert before[0] == now[0] == reply.id and now[:2] == before[:2]
    for turn in (ask, after):
        assert now.index(turn.id) < before.index(turn.id)
        assert linked[now.index(turn.id)].parts["graph"] > 0


def test_graph_link_needs_evidence_of_its_own(settings, fake, clock):
    # Linked to the hit by "orion" but holding nothing of the query: not returned, as before.
    eng = Engram(
        ":memory:", settings=replace(settings, graph_depth=1, late_interaction=False), embedder=fake, clock=clock
    )
    eng.store("Kestrel events that fail go to the orion queue")
    unrelated = eng.store("The orion dashboard is green on Mondays").memory
    hits = eng.recall("how are kestrel events retried when they fail", reinforce=False, limit=10)
    assert hits and unrelated.id not in {h.memory.id for h in hits}


def test_context_finds_a_reply_by_the_subject_said_just_before(settings, fake, clock):
    eng = Engram(":memory:", settings=replace(settings, context_window=2), embedder=fake, clock=clock)
    eng.store("Has anyone tried the kestrel deployment pipeline?", conversation="c1", resolve_conflicts=False)
    reply = eng.store(
        "Yes, twice last week, and it broke both times.", conversation="c1", resolve_conflicts=False
    ).memory
    eng.store("Lunch options near the office include ramen.", conversation="c2", resolve_conflicts=False)
    got = [h.memory.id for h in eng.recall("kestrel deployment pipeline", mode="bm25", reinforce=False)]
    assert reply.id in got  # found through its context ...
    assert eng.recall("broke twice", reinforce=False)[0].memory.content == reply.content
    assert eng.forget(query="kestrel", dry_run=True) != [reply.id]  # ... but forget reads own words only
    assert reply.id not in eng.forget(query="kestrel", dry_run=True)
    # Another conversation gives no context.
    other = eng.store("It broke again.", conversation="c2", resolve_conflicts=False).memory
    got = [h.memory.id for h in eng.recall("kestrel", mode="bm25", reinforce=False)]
    assert other.id not in got
    eng.close()


def test_pinned_memory_does_not_fade_in_ranking(eng, clock):
    pinned = eng.store("The staging password rotates on the first Monday.", pinned=True).memory
    plain = eng.store("The staging password policy is in the wiki.", resolve_conflicts=False).memory
    clock.advance(days=400)
    hits = {h.memory.id: h.parts for h in eng.recall("staging password", explain=True, reinforce=False)}
    assert hits[pinned.id]["decay"] == 1.0
    assert hits[plain.id]["decay"] < 1.0


def test_opening_builds_the_same_index_as_writing_one_by_one(settings, fake, clock):
    """Start-up loads the index in bulk; it must equal the index kept in step with each write."""
    s = replace(settings, context_window=2, context_weight=0.5, context_terms=0.3)
    eng = Engram(":memory:", settings=s, embedder=fake, clock=clock)
    words = "kestrel deploy pipeline broke twice lunch ramen office canary rollback alert pager".split()
    for i in range(60):
        text = " ".join(words[(i * 7 + k) % len(words)] for k in range(3 + i % 4)) + f" item{i}."
        eng.store(text, conversation=f"c{i // 7}", resolve_conflicts=False)
        clock.advance(minutes=1)
    eng.forget(memory_id=eng.recall("item13", mode="bm25", reinforce=False)[0].memory.id)
    before = eng.index
    eng.rebuild_indexes()
    after = eng.index
    assert after is not before and len(after) == len(before) == 59
    for mid, r in before.row_of.items():
        a = after.row_of[mid]
        assert np.allclose(before.search[r], after.search[a], atol=1e-6)
        assert after.context_of[a] == tuple(after.row_of[before.ids[c]] for c in before.context_of[r])
    for q in ["kestrel pipeline", "ramen lunch office", "item7 canary"]:
        old = {before.ids[r]: v for r, v in before.bm25.score(q).items()}
        new = {after.ids[r]: v for r, v in after.bm25.score(q).items()}
        assert old.keys() == new.keys() and all(abs(old[k] - new[k]) < 1e-9 for k in old)
    eng.close()


def test_a_large_batch_is_stored_in_waves_in_order(eng, monkeypatch):
    import engram.engine.writes as writes_module

    monkeypatch.setattr(writes_module, "STORE_WAVE", 16)  # several waves, embedded ahead
    items = [
        {"content": f"Service number {i} runs the {w} job nightly.", "resolve_conflicts": False}
        for i, w in enumerate(["billing", "search", "mail", "backup"] * 10)
    ]
    items.append({"content": items[3]["content"]})  # in a later wave: the same text as the fourth
    results = eng.store_many(items)
    assert [r.memory.content for r in results[:40]] == [it["content"] for it in items[:40]]
    assert [r.action for r in results[:40]] == ["new"] * 40
    assert results[40].action == "reinforce" and results[40].memory.id == results[3].memory.id
    assert len(eng.index) == 40


def test_independent_memories_borrow_no_words(settings, fake, clock):
    """Facts stored one after another outside a conversation stand alone, and a replaced memory
    lends its words to nothing (issue 13: recall("Saigon") returned the next memory)."""
    eng = Engram(":memory:", settings=replace(settings, context_window=2), embedder=fake, clock=clock)
    eng.store("The user moved to Saigon.", resolve_conflicts=False)
    dog = eng.store("The user's dog is called Biscuit.", resolve_conflicts=False).memory
    assert dog.conversation is None
    got = [h.memory.content for h in eng.recall("Saigon", mode="bm25", reinforce=False)]
    assert got == ["The user moved to Saigon."]
    eng.close()


def test_a_replaced_turn_stops_lending_its_words(settings, fake, clock):
    eng = Engram(":memory:", settings=replace(settings, context_window=2), embedder=fake, clock=clock)
    first = eng.store("We are moving the kestrel cluster.", conversation="chat-1", resolve_conflicts=False).memory
    reply = eng.store("Yes, next week.", conversation="chat-1", resolve_conflicts=False).memory
    assert reply.id in [h.memory.id for h in eng.recall("kestrel", mode="bm25", reinforce=False)]
    eng.store_db.update_memory(first.id, status="superseded")  # what a replace does to it
    eng.index.upsert(eng.get(first.id), None)
    assert reply.id not in [h.memory.id for h in eng.recall("kestrel", mode="bm25", reinforce=False)]
    eng.rebuild_indexes()  # and the same after a restart
    assert eng.index.context_of[eng.index.row_of[reply.id]] == ()
    eng.close()


def test_conversation_must_be_a_string(eng):
    with pytest.raises(EngramError, match="conversation"):
        eng.store("A fact.", conversation=7)
    with pytest.raises(EngramError, match="conversation"):
        eng.store("A fact.", conversation=" ")


def test_index_status_and_counts_are_read_from_the_index(eng):
    from engram.core.types import MEMORY_TYPES

    eng.store("Deploys go to Fly.io from the main branch.")
    eng.store("Run the migrations before restarting the web workers.", memory_type="strategy")
    st = eng.index_status()
    assert st["rows"] == 2 and st["built_at"] == eng.index_built_at and st["edges"] >= 0
    counts = eng.index_counts()
    assert len(counts) == 3 * len(MEMORY_TYPES)  # every (type, status) pair, zeros included
    assert counts[("fact", "active")] == 1 and counts[("strategy", "active")] == 1
    assert sum(counts.values()) == 2
