"""Maintenance: consolidation of near-duplicates, pruning with protections, stats."""

from __future__ import annotations

from datetime import timedelta

import pytest

from engram import Engram, Settings
from engram.admin.maintenance import run_maintenance
from engram.admin.stats import memory_stats
from engram.search.decay import recalled_stability

PG = "The staging database runs PostgreSQL 16 on port 5433"
PG_MORE = "The staging database runs PostgreSQL 16 on port 5433 with daily backups"
PG_SAME = "Staging database runs PostgreSQL 16 on port 5433"
CHAIN = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango"
).split()


def put(eng: Engram, text: str, **kw):
    # Planted rows bypass write-time resolution: consolidation exists for what that let through.
    return eng.store(text, resolve_conflicts=False, **kw).memory


def statuses(eng: Engram) -> dict[str, str]:
    return {m.id: m.status for m, _ in eng.store_db.iter_memory_rows()}


def test_near_duplicates_merge_into_one_memory_with_all_provenance(eng, clock):
    a = put(eng, PG, importance=0.4, tags=["db"], provenance=["chat:1"])
    b = put(eng, PG_MORE, importance=0.7, tags=["ops"], provenance=["chat:2"])
    c = put(eng, PG_SAME, importance=0.5)
    eng.store_db.reinforce([a.id, b.id], clock.now(), recalled_stability)
    eng.store_db.reinforce([a.id], clock.now(), recalled_stability)
    eng.rebuild_indexes()
    other = put(eng, "The office coffee machine is broken again")
    clock.advance(days=1)

    report = run_maintenance(eng)

    assert report["applied"] and report["consolidated"] == 3
    [cluster] = report["clusters"]
    assert sorted(cluster["sources"]) == sorted([a.id, b.id, c.id])
    new = eng.get(cluster["into"])
    assert new.status == "active"
    assert "daily backups" in new.content and "5433" in new.content
    assert new.content.count("5433") == 1  # merged without repeating
    assert new.importance == 0.7
    assert new.recall_count == 3
    assert set(new.tags) == {"db", "ops"}
    assert set(new.provenance) == {"chat:1", "chat:2", a.id, b.id, c.id}
    for src in (a, b, c):
        row = eng.store_db.get_memory(src.id)
        assert row.status == "consolidated"
        assert row.superseded_by == new.id
        assert row.valid_to == clock.now()
    assert eng.store_db.get_memory(other.id).status == "active"
    # Normal recall sees only the merged memory; as_of before the run still sees the sources.
    hits = [h.memory.id for h in eng.recall("staging database port", reinforce=False)]
    assert new.id in hits and not {a.id, b.id, c.id} & set(hits)
    before = [
        h.memory.id
        for h in eng.recall("staging database port", reinforce=False, as_of=clock.now() - timedelta(hours=1))
    ]
    assert {a.id, b.id, c.id} <= set(before) and new.id not in before
    assert [e["action"] for e in eng.history(a.id)][-1] == "consolidated"
    assert eng.history(new.id)[0]["action"] == "consolidate"


def test_what_must_not_merge(eng):
    alice = put(eng, PG)
    put(eng, PG_SAME)
    bob_copy = put(eng, PG, user_id="bob")
    strategy = put(eng, PG, memory_type="strategy")
    h1 = eng.handoff("Staging database runs PostgreSQL 16 on port 5433", next_steps=["check backups"])
    h2 = eng.handoff("Staging database runs PostgreSQL 16 on port 5433", next_steps=["check backups"])
    swap_a = put(eng, "Alice prefers dark mode in the editor")
    swap_b = put(eng, "Bob prefers dark mode in the editor")
    unrelated = put(eng, "The office coffee machine is broken again")
    pinned = put(eng, PG_MORE, pinned=True)
    # Turns of conversations are records of what was said, each kept as said.
    turns = [put(eng, PG, conversation=c) for c in ("chat-1", "chat-2")]

    report = run_maintenance(eng, apply=False)

    assert len(report["clusters"]) == 1
    merged = set(report["clusters"][0]["sources"])
    assert alice.id in merged and len(merged) == 2
    for kept in (bob_copy, strategy, h1, h2, swap_a, swap_b, unrelated, pinned, *turns):
        assert kept.id not in merged


def test_complete_linkage_stops_chains(eng):
    a = put(eng, " ".join(CHAIN[0:12]), importance=0.5)
    b = put(eng, " ".join(CHAIN[3:15]), importance=0.9)  # the seed: close to both ends
    c = put(eng, " ".join(CHAIN[6:18]), importance=0.5)
    va, vb, vc = (eng.index.vector(m.id) for m in (a, b, c))
    thr = eng.settings.consolidate_threshold
    assert va @ vb >= thr and vb @ vc >= thr and va @ vc < thr  # the planted chain

    report = run_maintenance(eng, apply=False)

    for cluster in report["clusters"]:
        assert not {a.id, c.id} <= set(cluster["sources"])
    assert any(b.id in cl["sources"] for cl in report["clusters"])


def test_dry_run_changes_nothing(eng, clock):
    put(eng, PG, importance=0.9)
    put(eng, PG_SAME, importance=0.9)
    weak = put(eng, "Lunch order was pasta", importance=0.1)
    clock.advance(days=40)
    before = {m.id: m for m, _ in eng.store_db.iter_memory_rows()}
    edges = eng.store_db.all_edges()

    report = run_maintenance(eng, apply=False)

    assert not report["applied"]
    assert report["consolidated"] == 2 and report["clusters"][0]["into"] is None
    assert weak.id in report["pruned_ids"]
    assert {m.id: m for m, _ in eng.store_db.iter_memory_rows()} == before
    assert eng.store_db.all_edges() == edges
    assert memory_stats(eng)["totals"]["runs"] == 0


def test_prune_spares_protected_and_deletes_weak(eng, clock):
    open_task = eng.create_task("migrate billing")
    done_task = eng.create_task("old spike")
    eng.update_task(done_task.id, status="done")
    weak = put(eng, "Lunch order was pasta", importance=0.1)
    pinned = put(eng, "The user's cat is called Miso", importance=0.1, pinned=True)
    on_open = put(eng, "Billing export uses the v2 CSV layout", importance=0.1, task_id=open_task.id)
    on_done = put(eng, "Spike result: the old queue drops messages", importance=0.1, task_id=done_task.id)
    old_handoff = eng.handoff("Spike started", task_id=done_task.id)
    clock.advance(days=1)
    last_handoff = eng.handoff("Spike wrapped up", task_id=done_task.id)
    loose_handoff = eng.handoff("Notes without a task")

    clock.advance(days=400)
    report = run_maintenance(eng)

    gone = set(report["pruned_ids"])
    assert {weak.id, on_done.id, old_handoff.id} <= gone
    for kept in (pinned, on_open, last_handoff, loose_handoff):
        assert kept.id not in gone
        assert eng.store_db.get_memory(kept.id) is not None
    assert eng.store_db.get_memory(weak.id) is None
    assert report["protected"] == 4
    assert report["pruned_by_reason"]["weak"] == len(gone)
    assert memory_stats(eng)["totals"]["pruned"] == len(gone)


def test_consolidated_sources_go_after_retention(eng, clock):
    a = put(eng, PG, importance=0.9)
    b = put(eng, PG_SAME, importance=0.9)
    into = run_maintenance(eng)["clusters"][0]["into"]
    retention = eng.settings.consolidated_retention_days

    clock.advance(days=retention - 1)
    assert run_maintenance(eng)["pruned"] == 0
    assert eng.store_db.get_memory(a.id).status == "consolidated"

    clock.advance(days=2)
    report = run_maintenance(eng)
    assert sorted(report["pruned_ids"]) == sorted([a.id, b.id])
    assert report["pruned_by_reason"]["consolidated_expired"] == 2
    assert eng.store_db.get_memory(into) is not None


def test_superseded_history_lives_as_long_as_its_replacement(eng, clock):
    old = eng.store("The API rate limit is 100 requests per minute", importance=0.9).memory
    r = eng.store("The API rate limit is 250 requests per minute", importance=0.9)
    assert r.action == "replace" and r.previous.id == old.id
    clock.advance(days=eng.settings.consolidated_retention_days + 5)
    eng.recall("API rate limit")  # keeps the replacement strong
    assert old.id not in run_maintenance(eng)["pruned_ids"]
    assert eng.store_db.get_memory(old.id).status == "superseded"

    eng.forget(memory_id=r.memory.id)
    report = run_maintenance(eng)
    assert old.id in report["pruned_ids"]
    assert report["pruned_by_reason"]["superseded_expired"] == 1


def test_merged_memory_keeps_decaying_from_its_sources_last_use(eng, clock):
    put(eng, PG, importance=0.2)
    put(eng, PG_SAME, importance=0.2)
    clock.advance(days=5)
    into = run_maintenance(eng)["clusters"][0]["into"]
    assert eng.get(into).last_recalled_at == clock.now() - timedelta(days=5)
    clock.advance(days=30)
    assert into in run_maintenance(eng)["pruned_ids"]


def test_file_is_compacted_so_deleted_text_leaves_it(tmp_path, fake, clock):
    s = Settings.from_env({"ENGRAM_HOME": str(tmp_path)})
    path = tmp_path / "m.duckdb"
    e = Engram(path, settings=s, embedder=fake, clock=clock)
    secret = "zq" + "x7" * 30  # long and random-looking: stored verbatim, not dictionary-shared
    doomed = put(e, f"Temporary note {secret}", importance=0.05)
    for i in range(12):
        put(e, f"Durable fact number {i} about component c{i}", importance=0.9, pinned=True)
    e.store_db.flush_wal()
    clock.advance(days=30)
    report = run_maintenance(e)
    assert doomed.id in report["pruned_ids"] and report["compacted"]
    assert len(e.recall("durable fact component", limit=100, reinforce=False)) == 12
    e.close()
    assert secret.encode() not in path.read_bytes()
    reopened = Engram(path, settings=s, embedder=fake, clock=clock)
    assert reopened.store_db.count("memories") == 12
    reopened.close()


def test_stats(eng, clock):
    task = eng.create_task("ship v2")
    put(eng, PG, importance=0.9, task_id=task.id)
    put(eng, "Lunch order was pasta", importance=0.06)
    put(eng, "Bob likes tea", user_id="bob")
    eng.touch_session("s1")
    eng.end_session("s1", clean=False)

    st = memory_stats(eng)
    assert st["total"] == 3 and st["by_user"] == {"default": 2, "bob": 1}
    assert st["by_status"] == {"active": 3}
    assert st["by_type"] == {"fact": 3}
    assert sum(st["strength"]["buckets"].values()) == 3
    assert st["fading_soon"]["count"] == 1
    assert "pasta" in st["fading_soon"]["memories"][0]["content"]
    assert st["sessions"] == {"interrupted": 1} and st["tasks"] == {"open": 1}
    assert st["index"]["fresh"] and st["index"]["rows"] == 3
    if eng.path == ":memory:":
        assert st["disk_bytes"] is None
    else:  # the PostgreSQL database's size
        assert st["disk_bytes"] > 0

    mine = memory_stats(eng, user_id="bob")
    assert mine["total"] == 1 and mine["by_user"] == {"bob": 1}
    assert sum(mine["strength"]["buckets"].values()) == 1

    clock.advance(days=60)
    run_maintenance(eng)
    st = memory_stats(eng)
    assert st["totals"]["pruned"] >= 1 and st["totals"]["runs"] == 1


def test_fading_soon_and_prune_follow_stability_on_a_virtual_clock(eng, clock):
    import math

    from engram.search.decay import initial_stability, memory_stability

    # Episodic: the type's own decay (tier factor 1, docs/lifecycle.md).
    used = put(eng, "The release train leaves every second Tuesday", importance=0.5, tier="episodic")
    idle = put(eng, "The office plant needs water on Fridays", importance=0.5, tier="episodic")
    for gap in (3, 6, 12):  # spaced uses of one, none of the other
        clock.advance(days=gap)
        assert [h.memory.id for h in eng.recall("release train Tuesday", limit=1, mode="bm25")] == [used.id]
    s0 = initial_stability("fact", 0.5)
    left = s0 * math.log(0.5 / eng.settings.prune_threshold) - 21  # idle: 21 days since it was written
    assert 0 < left < 7  # within the week memory_stats looks ahead
    fading = {f["id"]: f for f in memory_stats(eng)["fading_soon"]["memories"]}
    assert set(fading) == {idle.id}
    assert fading[idle.id]["days_until_prune"] == pytest.approx(left, abs=0.01)
    assert run_maintenance(eng)["pruned_ids"] == []  # not yet
    clock.advance(days=math.ceil(left))
    assert run_maintenance(eng)["pruned_ids"] == [idle.id]
    kept = eng.get(used.id)
    assert memory_stability(kept) > 4 * s0


@pytest.mark.parametrize("apply", [True, False])
def test_report_shape(eng, apply):
    r = run_maintenance(eng, apply=apply)
    for key in (
        "applied",
        "consolidated",
        "clusters",
        "pruned",
        "pruned_ids",
        "protected",
        "edges_refreshed",
        "started_at",
        "finished_at",
        "duration_s",
    ):
        assert key in r
    assert r["applied"] is apply


def test_a_run_that_changes_nothing_keeps_the_indexes_and_one_after_a_forget_rebuilds_them(eng, clock):
    keep = put(eng, PG)
    gone = put(eng, "The office coffee machine is broken again")
    clock.advance(days=1)
    first = run_maintenance(eng)  # a fresh store: nothing to prune or merge
    assert (first["pruned"], first["consolidated"], first["reindexed"]) == (0, 0, False)
    built = eng.index
    assert run_maintenance(eng)["reindexed"] is False and eng.index is built
    assert [h.memory.id for h in eng.recall("staging database port", reinforce=False)] == [keep.id]

    eng.forget(memory_id=gone.id)  # leaves an empty slot in the index: the next run reclaims it
    assert len(eng.index) < eng.index.n
    report = run_maintenance(eng)
    assert report["reindexed"] is True and eng.index is not built
    assert len(eng.index) == eng.index.n == 1
    assert [h.memory.id for h in eng.recall("staging database port", reinforce=False)] == [keep.id]
