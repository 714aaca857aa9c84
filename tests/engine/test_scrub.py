"""`scrub_store` on a store written before redaction covered its rows (engram/admin/scrub.py), on both backends."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from engram.api import Api
from engram.core.ids import new_id
from engram.core.types import Ctx, Memory, Session, Task
from engram.engram import Engram
from tests.conftest import START

SET = json.loads((Path(__file__).resolve().parents[1] / "data" / "secrets_set.json").read_text(encoding="utf-8"))
PLANTED = [it for it in SET["items"] if it["secrets"]][:30]
CLEAN = [it for it in SET["items"] if not it["secrets"]][:30]


@pytest.fixture
def old_store(settings, fake, clock, tmp_path):
    """An Engram over a store whose rows were written as an older release wrote them: straight to
    the database, not through the redactor."""
    path = settings.database_url or str(tmp_path / "memories.duckdb")
    eng = Engram(path, settings=settings, embedder=fake, clock=clock)
    raw = eng.store_db.inner  # what the previous release wrote through: no redaction
    task = Task(
        id="t-" + new_id()[:12],
        name=f"deploy with {PLANTED[0]['secrets'][0]}",
        goal=PLANTED[1]["text"],
        status="open",
        metadata={"env": PLANTED[2]["text"]},
        user_id="default",
        created_at=START,
        updated_at=START,
    )
    raw.insert_task(task)
    for it in PLANTED[3:] + CLEAN:
        m = Memory(
            id=new_id(),
            content=it["text"],
            memory_type="fact",
            importance=0.5,
            recall_count=0,
            created_at=START,
            last_recalled_at=None,
            user_id="default",
            tags=("import",),
            metadata={"cmd": it["text"]} if it["secrets"] else {"n": 1},
        )
        raw.insert_memory(m, fake.embed_batch([m.content])[0])
        raw.add_event(m.id, START, "update", {"previous": it["text"]})
    raw.upsert_session(
        Session(
            id="s-old",
            user_id="default",
            client="cli",
            pid=None,
            status="ended",
            started_at=START,
            last_heartbeat=START,
            ended_at=START,
            task_id=None,
            outcome="failure",
            outcome_notes=PLANTED[4]["text"],
            reported=True,
        )
    )
    eng.rebuild_indexes()
    yield eng
    eng.close()


def rows(eng: Engram) -> dict[str, tuple]:
    return {m.id: (m, blob) for m, blob in eng.store_db.iter_memory_rows()}


def stored_text(eng: Engram) -> str:
    db = eng.store_db
    return json.dumps(
        [[m.content, m.tags, m.metadata] for m, _ in db.iter_memory_rows()]
        + [db.events_by_memory()]
        + [t.to_dict() for t in db.all_tasks()]
        + [s.outcome_notes for s, _, _ in db.sessions_with_counts()],
        default=str,
    )


def test_scrub_finds_the_planted_secrets_then_removes_them_after_a_copy_and_changes_nothing_else(old_store):
    api, eng = Api(old_store), old_store
    secrets = [s for it in PLANTED for s in it["secrets"]]
    assert all(s in stored_text(eng) for s in secrets)  # the old release stored them verbatim
    before = rows(eng)

    dry = api.call("scrub_store", {}, Ctx(session_id="cli:admin"))
    assert not dry["applied"] and dry["backup"] is None
    assert dry["memories"] == len(PLANTED) - 3 and dry["events"] == len(PLANTED) - 3
    assert dry["tasks"] == 1 and dry["sessions"] == 1
    assert not any(s in json.dumps(dry) for s in secrets)  # the report shows no secret
    assert rows(eng).keys() == before.keys() and all(s in stored_text(eng) for s in secrets)  # nothing written

    done = api.call("scrub_store", {"apply": True}, Ctx(session_id="cli:admin"))
    assert done["applied"] and done["memories"] == dry["memories"]
    text = stored_text(eng)
    assert not [s[:10] for s in secrets if s in text]
    after = rows(eng)
    for mid, (m, blob) in before.items():
        new, new_blob = after[mid]
        clean = eng.redact(m.content)
        if clean == m.content and eng.redact.value(m.metadata) == m.metadata:
            assert (new, new_blob) == (m, blob)  # a memory without a secret keeps every byte
        else:  # only the redacted fields changed, and the vector, embedded again from the new text
            assert new == replace(m, content=clean, metadata=eng.redact.value(m.metadata))
            assert new_blob != blob
    assert api.call("scrub_store", {}, Ctx(session_id="cli:admin"))["memories"] == 0  # nothing left to find
    # The copy kept first holds the store as it was.
    copy = Path(done["backup"])
    assert copy.exists() and copy.name.startswith("pre-scrub-")
    if copy.suffix == ".jsonl":
        assert secrets[5] in copy.read_text()
    else:
        import duckdb

        con = duckdb.connect(str(copy), read_only=True)
        assert con.execute("SELECT count(*) FROM memories WHERE content = ?", [PLANTED[5]["text"]]).fetchone()[0] == 1
        con.close()


def test_scrub_finds_keys_in_urls_sentences_and_field_names_an_older_release_kept(settings, fake, clock, tmp_path):
    """Issue 46's shapes, as a release before it stored them: a checkpoint whose commands hold a URL
    with an `appid=` key, a hex key named in a sentence, a key used as a metadata field's name."""
    appid, news, field = (
        "5f3a9c2e1b7d4f6a8c0e2b4d6f8a0c1e",
        "8d2f6a01c4b9e37f5a6c0d18e2b4f9a3",
        "q7Rt2XvL9pMw4ZbN8cKd3HsY6aJf1GeU",
    )
    url = f"https://api.openweathermap.org/data/2.5/weather?q=Lagos&appid={appid}&units=metric"
    eng = Engram(settings.database_url or str(tmp_path / "m.duckdb"), settings=settings, embedder=fake, clock=clock)
    try:
        m = Memory(
            id=new_id(),
            content=f"auto-checkpoint: this is the NewsAPI key {news}",
            memory_type="handoff",
            importance=0.5,
            recall_count=0,
            created_at=START,
            last_recalled_at=None,
            user_id="default",
            metadata={"checkpoint": {"commands": [{"command": f"curl -s '{url}'", "failed": True}]}, field: "the key"},
        )
        eng.store_db.inner.insert_memory(m, fake.embed_batch([m.content])[0])
        api = Api(eng)
        dry = api.call("scrub_store", {}, Ctx(session_id="cli:admin"))
        assert dry["memories"] == 1 and dry["changes"][0]["fields"] == ["content", "metadata"]
        assert api.call("scrub_store", {"apply": True}, Ctx(session_id="cli:admin"))["applied"]
        text = stored_text(eng)
        assert appid not in text and news not in text and field not in text
        (new, _) = rows(eng)[m.id]
        assert new.metadata["checkpoint"]["commands"][0]["command"] == (
            "curl -s 'https://api.openweathermap.org/data/2.5/weather?q=Lagos&appid=[REDACTED]&units=metric'"
        )
        assert new.metadata["[REDACTED]"] == "the key" and new.content.endswith("NewsAPI key [REDACTED]")
    finally:
        eng.close()
