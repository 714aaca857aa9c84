"""Tiers (docs/lifecycle.md): every memory has one, from its type and origin or chosen; it scales
how fast the memory fades; moving one is recorded; a kept convention becomes procedural; a store
migrated from before tiers gives its rows the tier a new memory of their kind gets."""

from __future__ import annotations

import math
from datetime import timedelta

import duckdb
import pytest

from engram.api import Api
from engram.core.errors import EngramError
from engram.core.types import AUTO_CAPTURE_TAG, CONVENTION_TAG, Ctx
from engram.store.schema import SCHEMA_VERSION, migrate
from tests.conftest import START

CTX = Ctx(session_id="s1")


def tier_of(eng, memory_id: str) -> str:
    return eng.get(memory_id).tier


def test_a_memory_gets_its_tier_from_its_type_and_origin(eng):
    def stored(content: str, **kw) -> str:
        return eng.store(content, resolve_conflicts=False, **kw).memory.id

    assert tier_of(eng, stored("Deploys go out from the release branch.")) == "semantic"
    assert tier_of(eng, stored("Mid-refactor of the parser, tests red.", memory_type="progress")) == "working"
    assert tier_of(eng, stored("Asked why the export stalls; a lock.", memory_type="episode")) == "episodic"
    assert tier_of(eng, stored("Assuming the cache is cold at start.", memory_type="assumption")) == "episodic"
    assert tier_of(eng, stored("pytest -x fails on the flaky socket test.", memory_type="failure")) == "semantic"
    assert tier_of(eng, stored("To release: tag, push, wait for CI.", memory_type="strategy")) == "procedural"
    # A turn of a conversation records what was said then, whatever its type.
    assert tier_of(eng, stored("Caroline: I went to the support group.", conversation="c1")) == "episodic"
    # A convention the user stated is how work is done here; captured on its own it is not yet.
    assert tier_of(eng, stored("Install packages with uv.", tags=[CONVENTION_TAG])) == "procedural"
    captured = stored("Never push to main directly.", tags=[CONVENTION_TAG, AUTO_CAPTURE_TAG])
    assert tier_of(eng, captured) == "semantic"
    # Chosen at write, it wins.
    assert tier_of(eng, stored("Scratch: try the second index.", tier="working")) == "working"


def test_bad_tier_is_refused_naming_the_tiers_and_nothing_is_stored(eng):
    with pytest.raises(EngramError, match="tier must be one of working, episodic, semantic, procedural"):
        eng.store("A fact with a made-up tier.", tier="forever")
    assert eng.list_memories()["total"] == 0


def _decay_per_day(m: dict, importance: float, days: float) -> float:
    """-ln(strength / importance) / days: 1 / the stability in effect."""
    return -math.log(m["strength"] / importance) / days


def test_the_tier_scales_the_half_life_by_its_factor(eng, clock):
    ids = {
        tier: eng.store(f"Note number {i} about the build cache.", tier=tier, resolve_conflicts=False).memory.id
        for i, tier in enumerate(("working", "episodic", "semantic", "procedural"))
    }
    clock.advance(days=10)
    page = {m["id"]: m for m in eng.list_memories()["memories"]}
    rate = {tier: _decay_per_day(page[i], 0.5, 10) for tier, i in ids.items()}
    # Same type and importance: the stability in effect is S0 x the factor, so rate x factor is S0's.
    factors = eng.settings.tier_factors
    assert factors == {"working": 0.4, "episodic": 1.0, "semantic": 2.5, "procedural": 8.0}
    base = [rate[t] * factors[t] for t in ids]
    assert max(base) == pytest.approx(min(base), rel=1e-3)
    assert rate["working"] > rate["episodic"] > rate["semantic"] > rate["procedural"]


def test_ranking_weighs_the_tier(eng, clock):
    # Two memories saying the same (kept apart: no resolution): after two months the procedural
    # one has hardly faded, the working one has; ranking puts the durable one first. (A turn of a
    # conversation weighs at the decay floor whatever its tier: search/ranking.py.)
    text = "The staging database lives on port 5433."
    eng.store(text, tier="working", resolve_conflicts=False)
    durable = eng.store(text, tier="procedural", resolve_conflicts=False)
    clock.advance(days=60)
    hits = eng.recall("which port does the staging database use", limit=2, reinforce=False)
    assert len(hits) == 2 and hits[0].memory.id == durable.memory.id
    assert hits[0].memory.tier == "procedural" and hits[0].score > hits[1].score


def test_moving_a_memory_between_tiers_is_recorded_and_changes_its_decay(eng, clock):
    api = Api(eng)
    mid = eng.store("Scratch: the bisect points at commit 41.", tier="working").memory.id
    clock.advance(days=5)
    before = api.call("memory_strength", {"memory_id": mid, "days": 30}, CTX)
    moved = api.call("set_tier", {"memory_id": mid, "tier": "procedural"}, CTX)
    assert moved == {"memory_id": mid, "tier": "procedural", "was": "working", "action": "tier"}
    after = api.call("memory_strength", {"memory_id": mid, "days": 30}, CTX)
    assert after["stability_days"] == pytest.approx(before["stability_days"] * 8.0 / 0.4, rel=1e-3)
    assert after["strength_now"] > before["strength_now"]
    events = [e for e in eng.history(mid) if e["action"] == "tier"]
    assert [e["detail"] for e in events] == [{"from": "working", "to": "procedural"}]
    again = api.call("set_tier", {"memory_id": mid, "tier": "procedural"}, CTX)
    assert again["action"] == "unchanged" and len([e for e in eng.history(mid) if e["action"] == "tier"]) == 1
    with pytest.raises(EngramError, match="tier"):
        api.call("set_tier", {"memory_id": mid, "tier": "eternal"}, CTX)
    assert tier_of(eng, mid) == "procedural"


def test_a_kept_captured_convention_becomes_procedural_and_the_move_is_recorded(eng):
    mid = eng.store(
        "In this repo we install packages with uv, never pip.",
        tags=[CONVENTION_TAG, AUTO_CAPTURE_TAG],
        metadata={"captured": "auto"},
    ).memory.id
    assert tier_of(eng, mid) == "semantic"
    kept = eng.keep(mid)
    assert kept["tier"] == "procedural"
    tier_events = [e["detail"] for e in eng.history(mid) if e["action"] == "tier"]
    assert tier_events == [{"from": "semantic", "to": "procedural", "by": "keep"}]


def test_stats_count_memories_by_tier(eng):
    eng.store("Deploys go out from the release branch.")
    eng.store("Half-way through the parser rewrite.", memory_type="progress")
    stats = Api(eng).call("memory_stats", {}, CTX)
    assert stats["by_tier"] == {"working": 1, "episodic": 0, "semantic": 1, "procedural": 0}
    assert stats["tier_factors"]["procedural"] == 8.0


def test_export_and_import_carry_the_tier(eng, tmp_path, settings, fake, clock):
    from engram.admin.export_import import export_jsonl, import_jsonl

    mid = eng.store("Scratch: the bisect points at commit 41.", tier="working", ttl_days=3).memory.id
    path = tmp_path / "out.jsonl"
    export_jsonl(eng, path)
    eng.forget(mid)
    import_jsonl(eng, path)
    m = eng.get(mid)
    assert m.tier == "working" and m.expires_at == START + timedelta(days=3)


# ---------------------------------------------------------------- the migration of older stores

OLD_ROWS = [
    # (id, memory_type, tags, conversation, want)
    ("m1", "fact", [], None, "semantic"),
    ("m2", "handoff", [], None, "working"),
    ("m3", "episode", [AUTO_CAPTURE_TAG, "episode"], None, "episodic"),
    ("m4", "fact", [CONVENTION_TAG, AUTO_CAPTURE_TAG], None, "semantic"),
    ("m5", "fact", [CONVENTION_TAG], None, "procedural"),
    ("m6", "strategy", [], None, "procedural"),
    ("m7", "fact", [], "chat-1", "episodic"),
    ("m8", "failure", None, None, "semantic"),
]
INSERT = (
    "INSERT INTO memories (id, content, memory_type, importance, recall_count, created_at, user_id, tags, "
    "status, conversation) VALUES ({ph})"
)


def _old_values(row) -> list:
    mid, mtype, tags, conversation, _ = row
    return [mid, f"text {mid}", mtype, 0.5, 0, START.replace(tzinfo=None), "u", tags, "active", conversation]


@pytest.mark.duckdb_only
def test_duckdb_migration_gives_existing_rows_their_tier():
    con = duckdb.connect(":memory:")
    migrate(con, START, target=15)
    for row in OLD_ROWS:
        con.execute(INSERT.format(ph=", ".join("?" * 10)), _old_values(row))
    assert migrate(con, START) == list(range(16, SCHEMA_VERSION + 1))
    got = dict(con.execute("SELECT id, tier FROM memories").fetchall())
    assert got == {r[0]: r[4] for r in OLD_ROWS}
    assert con.execute("SELECT count(*) FROM memories WHERE expires_at IS NOT NULL").fetchone()[0] == 0


def test_postgres_migration_gives_existing_rows_their_tier(pg_server):
    from engram.store.pg import connect
    from engram.store.pg import migrate as pg_migrate

    url = pg_server.new_database(migrated=False)
    try:
        con = connect(url)
        pg_migrate(con, START, target=15)
        for row in OLD_ROWS:
            con.execute(INSERT.format(ph=", ".join(["%s"] * 10)), _old_values(row))
        assert pg_migrate(con, START) == list(range(16, SCHEMA_VERSION + 1))
        got = dict(con.execute("SELECT id, tier FROM memories").fetchall())
        assert got == {r[0]: r[4] for r in OLD_ROWS}
        con.close()
    finally:
        pg_server.drop(url)
