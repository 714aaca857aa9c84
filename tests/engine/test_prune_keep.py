"""Keep the strongest N (`engram prune --keep N`, docs/lifecycle.md): a dry run changes nothing;
applied, it leaves the N strongest unprotected memories of the scope and every protected one."""

from __future__ import annotations

import pytest

from engram.api import Api
from engram.core.errors import EngramError
from engram.core.types import Ctx

PROJECT = "example.com/prune"
NOTES = [
    "Postgres listens on port 5433 in staging.",
    "The frontend bundles with esbuild, not webpack.",
    "Nightly backups land in the cold bucket.",
    "Feature flags live in flags.yaml at the root.",
    "The mobile app pins OpenSSL to three dot one.",
    "Invoices render through a headless Chromium.",
    "Grafana dashboards are provisioned from JSON.",
    "Kafka topics carry a retention of seven days.",
    "Translations sync from Crowdin every Monday.",
    "Rate limits are enforced at the nginx edge.",
]
CTX = Ctx(session_id="s1", project=PROJECT)
OTHER = Ctx(session_id="s2", project="example.com/other")


def ids_of(api: Api, ctx: Ctx = CTX) -> set[str]:
    page = api.call("list_memories", {"in_project": ctx.project, "limit": 500}, ctx)
    return {m["id"] for m in page["memories"]}


@pytest.fixture
def api(eng):
    return Api(eng)


@pytest.fixture
def store(api, clock):
    """Ten plain memories of the project, one a day, the later ones stronger (less faded), plus
    one protected memory of each kind and one memory of another project."""
    made: dict[str, str] = {}
    for i in range(10):
        r = api.call(
            "store_memory",
            # Each a turn of its own conversation: stored as said, never resolved against another
            # (the fake embedder's hashed words make unrelated notes look alike).
            {"content": NOTES[i], "importance": 0.3 + 0.05 * i, "conversation": f"notes-{i}"},
            CTX,
        )
        made[f"plain{i}"] = r["memory_id"]
        clock.advance(days=1)
    made["pinned"] = api.call(
        "store_memory",
        {"content": "Release tags are signed with the team key.", "pinned": True, "importance": 0.1},
        CTX,
    )["memory_id"]
    task = api.call("create_task", {"name": "Port the exporter to async"}, CTX)["task_id"]
    made["of_open_task"] = api.call(
        "store_memory",
        {"content": "The exporter's retry loop swallows timeouts.", "task_id": task, "importance": 0.1},
        CTX,
    )["memory_id"]
    made["handoff"] = api.call(
        "session_handoff",
        {"task_id": task, "summary": "Half the exporter is async.", "next_steps": ["Port the writer"]},
        CTX,
    )["memory_id"]
    captured = api.call(
        "store_memory",
        {
            "content": "Run the linter before pushing.",
            "tags": ["convention", "auto-capture"],
            "metadata": {"captured": "auto"},
            "importance": 0.1,
        },
        CTX,
    )["memory_id"]
    api.call("keep_memory", {"memory_id": captured}, CTX)
    made["kept"] = captured
    made["other_project"] = api.call(
        "store_memory", {"content": "Another project's deploy runs on Fridays.", "importance": 0.1}, OTHER
    )["memory_id"]
    clock.advance(days=30)
    return made


def test_a_dry_run_lists_the_weakest_and_changes_nothing(api, eng, store):
    before = ids_of(api)
    stats_before = api.call("memory_stats", {}, CTX)["total"]
    r = api.call("prune_memories", {"keep": 3}, CTX)
    assert r["applied"] is False and r["candidates"] == 10 and r["would_remove"] == 7
    # The weakest go: the earliest, least important notes.
    assert {m["id"] for m in r["memories"]} == {store[f"plain{i}"] for i in range(7)}
    assert r["protected"] == {"pinned": 1, "open_task": 2, "latest_handoff": 1, "kept": 1}
    assert ids_of(api) == before and api.call("memory_stats", {}, CTX)["total"] == stats_before


def test_applied_it_keeps_the_strongest_n_and_every_protected_memory(api, eng, store):
    r = api.call("prune_memories", {"keep": 3, "apply": True}, CTX)
    assert r["applied"] is True and r["removed"] == 7
    left = ids_of(api)
    assert {store[f"plain{i}"] for i in (7, 8, 9)} <= left
    assert not {store[f"plain{i}"] for i in range(7)} & left
    for kind in ("pinned", "of_open_task", "handoff", "kept"):
        assert store[kind] in left, kind
    # Another project's memory is out of this scope.
    assert store["other_project"] in ids_of(api, OTHER)
    # Run again: nothing more goes.
    assert api.call("prune_memories", {"keep": 3, "apply": True}, CTX)["removed"] == 0


def test_keep_zero_removes_every_unprotected_memory_and_bad_n_is_refused(api, store):
    with pytest.raises(EngramError, match="keep"):
        api.call("prune_memories", {"keep": -1}, CTX)
    r = api.call("prune_memories", {"keep": 0, "apply": True}, CTX)
    assert r["removed"] == 10
    assert ids_of(api) == {store[k] for k in ("pinned", "of_open_task", "handoff", "kept")}


def test_the_tier_counts_in_strength(api, eng, clock):
    # Same text, importance and age: the procedural one is the stronger, so it is the one kept.
    working = api.call("store_memory", {"content": "Scratch: bisect points at commit 41.", "tier": "working"}, CTX)[
        "memory_id"
    ]
    durable = api.call(
        "store_memory", {"content": "Always bisect with the flaky tests skipped.", "tier": "procedural"}, CTX
    )["memory_id"]
    clock.advance(days=20)
    r = api.call("prune_memories", {"keep": 1, "apply": True}, CTX)
    assert [m["id"] for m in r["memories"]] == [working]
    assert ids_of(api) == {durable}
