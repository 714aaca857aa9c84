"""The curation operations behind the web panel (issue 17), through the Api as every transport calls
them: a paged memory list, pin, the strength curve, versions, a task's sessions."""

from __future__ import annotations

from datetime import datetime

import pytest

from engram.admin.maintenance import run_maintenance
from engram.admin.stats import memory_stats
from engram.api import Api, Ctx
from engram.core.types import EngramError, NotFound
from engram.search.decay import days_until, initial_stability, strength

CTX = Ctx(session_id="panel-test")


@pytest.fixture
def api(eng):
    return Api(eng)


def call(api: Api, op: str, ctx: Ctx = CTX, **args):
    return api.call(op, args, ctx)


def put(eng, text: str, **kw):
    # Planted rows bypass write-time resolution, so each text stays its own memory.
    return eng.store(text, resolve_conflicts=False, **kw).memory


def test_list_memories_pages_newest_first_with_a_total(api, eng, clock):
    ids = []
    for i in range(7):
        ids.append(put(eng, f"memory number {i}").id)
        clock.advance(minutes=1)
    first = call(api, "list_memories", limit=3)
    assert first["total"] == 7 and first["offset"] == 0 and first["limit"] == 3
    assert [m["id"] for m in first["memories"]] == ids[::-1][:3]
    last = call(api, "list_memories", limit=3, offset=6)
    assert [m["id"] for m in last["memories"]] == [ids[0]]
    assert call(api, "list_memories", offset=7)["memories"] == []
    m = first["memories"][0]
    assert m["content"] == "memory number 6" and m["status"] == "active" and m["pinned"] is False
    got = eng.get(m["id"])
    assert m["strength"] == round(
        strength(
            got.importance,
            initial_stability("fact", got.importance) * eng.settings.tier_factors[got.tier],  # docs/lifecycle.md
            got.created_at,
            clock.now(),
        ),
        6,
    )


def test_list_memories_filters_by_type_tag_task_status_and_as_of(api, eng, clock):
    task = call(api, "create_task", name="t")["task_id"]
    early = put(eng, "an early fact", tags=["a"])
    mark = clock.advance(hours=1)
    clock.advance(hours=1)
    put(eng, "a strategy", memory_type="strategy", tags=["b"])
    in_task = put(eng, "a fact of the task", tags=["a", "b"], task_id=task)

    def ids(**f):
        return {m["id"] for m in call(api, "list_memories", **f)["memories"]}

    assert call(api, "list_memories", memory_type="strategy")["total"] == 1
    assert ids(tag="a") == {early.id, in_task.id}
    assert ids(task_id=task) == {in_task.id}
    assert ids(as_of=mark.isoformat()) == {early.id}
    assert ids(status="superseded") == set()
    assert len(ids(status="any")) == 3
    # Another user sees none of them.
    assert call(api, "list_memories", Ctx(session_id="other", user_id="someone-else"))["total"] == 0


@pytest.mark.parametrize(
    "args, message",
    [
        ({"limit": 0}, "limit must be a whole number from 1 to 500"),
        ({"limit": 501}, "limit must be a whole number from 1 to 500"),
        ({"offset": -1}, "offset must be a whole number from 0"),
        ({"limit": "ten"}, "limit: Input should be a valid integer.*got 'ten'"),
        ({"status": "deleted"}, "status: Input should be 'active', 'superseded', 'consolidated' or 'any'"),
        ({"memory_type": "opinion"}, "memory_type"),
        ({"as_of": "yesterday"}, "not an ISO 8601"),
    ],
)
def test_list_memories_names_bad_arguments(api, args, message):
    with pytest.raises(EngramError, match=message):
        call(api, "list_memories", **args)


def test_pin_keeps_a_memory_from_fading_and_unpin_undoes_it(api, eng, clock):
    m = put(eng, "a memory about to fade", importance=0.2, tier="episodic")
    clock.advance(days=20)
    fading = {f["id"] for f in memory_stats(eng)["fading_soon"]["memories"]}
    assert m.id in fading
    assert call(api, "pin_memory", memory_id=m.id) == {"memory_id": m.id, "pinned": True}
    assert eng.get(m.id).pinned and eng.index.pinned[eng.index.row_of[m.id]]
    assert m.id not in {f["id"] for f in memory_stats(eng)["fading_soon"]["memories"]}
    assert run_maintenance(eng, apply=False)["pruned_ids"] == []
    assert call(api, "list_memories")["memories"][0]["pinned"] is True
    assert call(api, "pin_memory", memory_id=m.id, pinned=False)["pinned"] is False
    assert m.id in run_maintenance(eng, apply=False)["pruned_ids"]
    assert [e["action"] for e in eng.history(m.id)][-2:] == ["pin", "unpin"]
    with pytest.raises(EngramError, match="pinned must be true or false"):
        eng.set_pinned(m.id, "yes")
    with pytest.raises(EngramError, match="pin_memory: invalid arguments: pinned"):
        call(api, "pin_memory", memory_id=m.id, pinned="perhaps")
    with pytest.raises(NotFound):
        call(api, "pin_memory", memory_id="nope")


def test_the_strength_curve_is_decay_sampled_from_the_last_touch_and_projected(api, eng, clock):
    m = put(eng, "a fact to chart", importance=0.6)
    clock.advance(days=3)
    eng.recall("a fact to chart")  # the last touch: the past starts here
    touched = eng.get(m.id)
    clock.advance(days=2)
    c = call(api, "memory_strength", memory_id=m.id, days=30)
    stab = touched.stability * eng.settings.tier_factors[touched.tier]  # the tier scales it when read
    assert c["last_touched_at"] == touched.last_recalled_at.isoformat()
    assert c["stability_days"] == round(stab, 4) and c["stability_days"] > c["initial_stability_days"]
    assert c["past"][0]["at"] == c["last_touched_at"] and c["past"][0]["strength"] == 0.6
    assert c["past"][-1]["at"] == c["now"] == c["projected"][0]["at"]
    for p in c["past"] + c["projected"]:
        at = datetime.fromisoformat(p["at"])
        assert p["strength"] == round(strength(0.6, stab, touched.last_recalled_at, at), 6)
    assert (datetime.fromisoformat(c["projected"][-1]["at"]) - clock.now()).days == 30
    assert c["strength_now"] == c["past"][-1]["strength"]
    assert c["days_until_prune"] == round(days_until(c["prune_threshold"], 0.6, stab) - 2, 2)
    call(api, "pin_memory", memory_id=m.id)
    assert call(api, "memory_strength", memory_id=m.id)["days_until_prune"] is None
    with pytest.raises(EngramError, match="days must be a whole number from 1 to 3650"):
        call(api, "memory_strength", memory_id=m.id, days=0)


PG = "The staging database runs PostgreSQL 16 on port 5433"
PG_MORE = "The staging database runs PostgreSQL 16 on port 5433 with daily backups"


def test_versions_follow_an_update_and_a_consolidation(api, eng, clock):
    a = put(eng, PG)
    b = put(eng, PG_MORE)
    lone = call(api, "memory_versions", memory_id=a.id)
    assert [v["id"] for v in lone["chain"]] == [a.id] and lone["consolidated_from"] == []
    clock.advance(days=1)
    [cluster] = run_maintenance(eng)["clusters"]
    into = cluster["into"]
    v = call(api, "memory_versions", memory_id=a.id)
    assert [x["id"] for x in v["chain"]] == [a.id, into]
    assert v["chain"][0]["status"] == "consolidated" and v["chain"][0]["superseded_by"] == into
    assert v["chain"][0]["valid_to"] is not None and v["chain"][1]["status"] == "active"
    merged = call(api, "memory_versions", memory_id=into)
    assert {x["id"] for x in merged["consolidated_from"]} == {a.id, b.id}
    assert merged["consolidated_from_missing"] == []
    eng.forget(memory_id=b.id)
    assert call(api, "memory_versions", memory_id=into)["consolidated_from_missing"] == [b.id]


def test_task_sessions_mark_interrupted_ones_with_their_reason(api, eng, clock):
    a, b, c = Ctx(session_id="agent-a"), Ctx(session_id="agent-b"), Ctx(session_id="agent-c")
    task = call(api, "create_task", a, name="ship it")["task_id"]
    call(api, "report_interruption", a, reason="rate_limit", task_id=task)
    call(api, "track_progress", b, feature="build", status="in_progress", task_id=task)
    call(api, "store_memory", c, content="unrelated to the task")
    clock.advance(seconds=eng.settings.heartbeat_timeout_s + 60)  # b falls silent
    got = {s["id"]: s for s in call(api, "task_sessions", CTX, task_id=task)["sessions"]}
    assert set(got) == {"agent-a", "agent-b"}
    assert got["agent-a"]["state"] == "interrupted" and got["agent-a"]["reason"] == "rate_limit"
    assert got["agent-b"]["state"] == "interrupted"  # (a new session's start marks it so too)
    assert "no heartbeat" in got["agent-b"]["reason"]
    with pytest.raises(NotFound):
        call(api, "task_sessions", Ctx(session_id="x", user_id="someone-else"), task_id=task)


def test_the_list_route_reads_its_query_and_keeps_text_filters_as_text(api, eng, settings, serve):
    import httpx

    from engram.server.http import build_app

    put(eng, "tagged with a year", tags=["2024"])
    put(eng, "another memory")
    base = serve(build_app(api, token=None, settings=settings))
    with httpx.Client(base_url=base, timeout=30) as c:
        r = c.get("/memories", params={"tag": "2024", "limit": "5"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["total"] == 1 and body["limit"] == 5
        assert body["memories"][0]["content"] == "tagged with a year"
        r = c.get("/memories", params={"limit": "many"})
        assert r.status_code == 422 and "limit: Input should be a valid integer" in r.json()["error"]
        mid = body["memories"][0]["id"]
        assert c.get(f"/memories/{mid}/strength", params={"days": "7"}).json()["memory_id"] == mid
        assert c.post(f"/memories/{mid}/pin").json() == {"memory_id": mid, "pinned": True}  # body optional
        r = c.patch(f"/memories/{mid}", json={"content": "tagged with a year, edited"})
        assert r.status_code == 200 and r.json()["action"] == "update"
        assert c.patch(f"/memories/{mid}", json={}).status_code == 422


def test_update_with_the_same_text_writes_nothing(api, eng, clock):
    m = put(eng, "Staging resets every Sunday at 02:00 UTC.")
    clock.advance(hours=1)
    r = call(api, "update_memory", memory_id=m.id, content=m.content)
    assert r["action"] == "update" and "unchanged" in r["reason"]
    after = eng.get(m.id)
    assert after.updated_at == m.updated_at
    assert "update" not in [e["action"] for e in eng.store_db.events(m.id)]


def test_a_continuity_record_is_not_rewritten_as_text(api, eng):
    # Its text is rendered from the fields the plan reads: a new text would contradict them.
    h = eng.handoff("Parser done", next_steps=["write the CSV writer"])
    with pytest.raises(EngramError, match=r"handoff record.*session_handoff"):
        call(api, "update_memory", memory_id=h.id, content="Everything is finished, nothing left to do")
    assert eng.get(h.id).content == h.content
    f = eng.track_failure("KeyError: 'id'", component="importer", root_cause="old export", fix="skip it")
    with pytest.raises(EngramError, match=r"failure record.*track_failure"):
        call(api, "update_memory", memory_id=f.memory.id, content="no failure")
    # A memory of that type stored as plain text (store_memory) has no fields: its text is all there is.
    plain = put(eng, "Handoff: the parser is done.", memory_type="handoff")
    r = call(api, "update_memory", memory_id=plain.id, content="Handoff: parser and writer done.")
    assert r["action"] == "update" and eng.get(plain.id).content == "Handoff: parser and writer done."
