"""Expiry (docs/lifecycle.md): a memory with a time to live is never returned once it is past,
by recall, context or list; show says it expired; maintenance removes it; a restatement pushes
the expiry back instead of adding a memory; defaults come from ENGRAM_TTL_DAYS."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from engram import Engram
from engram.admin.maintenance import run_maintenance
from engram.admin.stats import memory_stats
from engram.api import Api
from engram.core.errors import EngramError
from engram.core.types import Ctx
from tests.conftest import START, memory_path

CTX = Ctx(session_id="s1")
TEXT = "The staging certificate is renewed by the ops rota this week."


def returned(api: Api, query: str) -> dict[str, list[str]]:
    """The ids each read returns for `query`."""
    return {
        "recall": [m["id"] for m in api.call("recall_memory", {"query": query}, CTX)["memories"]],
        "context": api.call("get_context", {"query": query}, CTX)["memory_ids"],
        "list": [m["id"] for m in api.call("list_memories", {}, CTX)["memories"]],
    }


def test_an_expired_memory_is_never_returned_and_maintenance_removes_it(eng, clock):
    api = Api(eng)
    mid = api.call("store_memory", {"content": TEXT, "ttl_days": 3}, CTX)["memory_id"]
    lasting = api.call("store_memory", {"content": "The staging certificate is issued by our own CA."}, CTX)
    assert eng.get(mid).expires_at == START + timedelta(days=3)
    clock.advance(days=2, hours=23)
    assert all(mid in ids for ids in returned(api, "staging certificate renewed").values())
    clock.advance(hours=1)  # the moment it expires
    for read, ids in returned(api, "staging certificate renewed").items():
        assert mid not in ids, read
    assert lasting["memory_id"] in returned(api, "staging certificate")["list"]
    shown = api.call("get_memory", {"memory_id": mid}, CTX)
    assert shown["expired"] is True and shown["expires_at"] == (START + timedelta(days=3)).isoformat()
    assert memory_stats(eng)["expiry"] == {"with_expiry": 1, "expired": 1, "within_7_days": 0}
    preview = run_maintenance(eng, apply=False)
    assert preview["pruned_by_reason"]["expired"] == 1 and eng.get(mid)
    report = run_maintenance(eng)
    assert mid in report["pruned_ids"] and lasting["memory_id"] not in report["pruned_ids"]
    with pytest.raises(EngramError):
        eng.get(mid)


def test_a_pinned_memory_expires_too(eng, clock):
    api = Api(eng)
    mid = api.call("store_memory", {"content": TEXT, "ttl_days": 1, "pinned": True}, CTX)["memory_id"]
    clock.advance(days=2)
    assert mid not in returned(api, "staging certificate renewed")["recall"]
    assert mid in run_maintenance(eng)["pruned_ids"]


def test_a_restatement_refreshes_the_expiry_instead_of_adding_a_memory(eng, clock):
    api = Api(eng)
    first = api.call("store_memory", {"content": TEXT, "ttl_days": 10}, CTX)
    clock.advance(days=8)
    again = api.call("store_memory", {"content": TEXT}, CTX)
    assert again["action"] == "reinforce" and again["memory_id"] == first["memory_id"]
    # A full time to live from the restatement (its first span: 10 days).
    assert eng.get(first["memory_id"]).expires_at == START + timedelta(days=18)
    assert api.call("list_memories", {}, CTX)["total"] == 1
    clock.advance(days=5)  # past the first expiry, before the refreshed one
    assert first["memory_id"] in returned(api, "staging certificate renewed")["recall"]
    clock.advance(days=6)
    assert first["memory_id"] not in returned(api, "staging certificate renewed")["recall"]
    # Once expired it is gone for resolution too: stating it again makes a new memory.
    third = api.call("store_memory", {"content": TEXT, "ttl_days": 10}, CTX)
    assert third["action"] == "new" and third["memory_id"] != first["memory_id"]


def test_defaults_by_type_and_tier_from_settings_and_bad_ones_refused(settings, fake, clock):
    s = replace(settings, ttl_days=("progress=2", "working=5", "semantic=30"))
    with Engram(memory_path(settings), settings=s, embedder=fake, clock=clock) as eng:
        progress = eng.store("Half the parser is ported.", memory_type="progress").memory
        scratch = eng.store("Scratch: try the second index.", tier="working").memory
        fact = eng.store("Deploys go out from the release branch.").memory
        own = eng.store("The freeze ends on Friday.", ttl_days=1.5).memory
        rule = eng.store("To release: tag, push, wait for CI.", memory_type="strategy").memory
        assert progress.expires_at == START + timedelta(days=2)  # its type's, before its tier's
        assert scratch.expires_at == START + timedelta(days=5)
        assert fact.expires_at == START + timedelta(days=30)
        assert own.expires_at == START + timedelta(days=1.5)
        assert rule.expires_at is None  # procedural: no default given
        with pytest.raises(EngramError, match="ttl_days"):
            eng.store("A fact that should never be stored.", ttl_days=0)
        assert eng.list_memories()["total"] == 5
    with pytest.raises(ValueError, match="ENGRAM_TTL_DAYS line 'forever=3'"):
        replace(settings, ttl_days=("forever=3",)).validate()
    with pytest.raises(ValueError, match="ENGRAM_TTL_DAYS line 'working=soon'"):
        replace(settings, ttl_days=("working=soon",)).validate()


def test_an_expired_handoff_is_not_the_one_a_session_resumes_from(eng, clock):
    api = Api(eng)
    task = api.call("create_task", {"name": "Port the exporter to async"}, CTX)["task_id"]
    older = api.call("session_handoff", {"task_id": task, "summary": "Exporter half async."}, CTX)["memory_id"]
    clock.advance(hours=1)
    newer = api.call("session_handoff", {"task_id": task, "summary": "Writer ported too."}, CTX)["memory_id"]
    assert eng.latest_handoff(eng.user_of(None), task).id == newer
    with eng.store_db.transaction():  # the newer one given a time to live that has run out
        eng.store_db.update_memory(newer, expires_at=clock.now())
    eng.rebuild_indexes()
    assert eng.latest_handoff(eng.user_of(None), task).id == older
    got = api.call("recall_memory", {"query": "exporter async writer", "task_id": task}, CTX)
    assert got["handoff"]["id"] == older and newer not in [m["id"] for m in got["memories"]]
