"""Every write path stores redacted text: the store's funnel (engram/store/redacting.py) under a
write that skips the engine's own redaction, an importer, and the import of an export written by a
store that holds secrets."""

from __future__ import annotations

import json
from pathlib import Path

from engram.admin.export_import import export_jsonl, import_jsonl
from engram.api import Api
from engram.core.ids import new_id
from engram.core.types import Ctx, Memory, Session, Task
from engram.engram import Engram
from tests.conftest import START

SET = json.loads((Path(__file__).resolve().parents[1] / "data" / "secrets_set.json").read_text(encoding="utf-8"))
ITEMS = [it for it in SET["items"] if it["secrets"]]
CTX = Ctx(session_id="cli:test")


def secret_in(eng: Engram, secrets: list[str]) -> list[str]:
    db = eng.store_db
    text = json.dumps(
        [[m.content, m.tags, m.metadata] for m, _ in db.iter_memory_rows()]
        + [db.events_by_memory()]
        + [t.to_dict() for t in db.all_tasks()]
        + [s.outcome_notes for s, _, _ in db.sessions_with_counts()],
        default=str,
    )
    return [s[:10] for s in secrets if s in text]


def memory(text: str, **kw) -> Memory:
    return Memory(
        id=new_id(),
        content=text,
        memory_type="fact",
        importance=0.5,
        recall_count=0,
        created_at=START,
        last_recalled_at=None,
        user_id="default",
        **kw,
    )


def test_a_write_that_skips_the_engines_redaction_is_redacted_by_the_store(eng, fake):
    db, it = eng.store_db, iter(ITEMS)
    used = []

    def text() -> str:
        item = next(it)
        used.append(item["secrets"][0])
        return item["text"]

    m = memory(text(), tags=(text(),), metadata={"doc": {"summary": text()}})
    db.insert_memory(m, fake.embed_batch([m.content])[0])
    db.update_memory(m.id, metadata={"cmd": [text()]})
    db.add_event(m.id, START, "update", {"previous": text()})
    db.set_event_detail(m.id, START, "update", {"previous": text()})
    t = Task(
        id="t-" + new_id()[:12],
        name=text(),
        goal=text(),
        status="open",
        metadata={"e": text()},
        user_id="default",
        created_at=START,
        updated_at=START,
    )
    db.insert_task(t)
    db.update_task(t.id, START, goal=text(), metadata={"e": text()})
    db.upsert_session(
        Session(
            id="s1",
            user_id="default",
            client="cli",
            pid=None,
            status="active",
            started_at=START,
            last_heartbeat=START,
            ended_at=None,
            task_id=None,
            outcome=None,
            outcome_notes=text(),
            reported=False,
        )
    )
    db.add_session_outcome("s1", "failure", text())
    db.update_session("s1", outcome_notes=text())
    assert len(used) == 14 and not secret_in(eng, used)
    assert "[REDACTED]" in db.get_memory(m.id).content


def test_an_importer_and_the_import_of_an_export_store_no_secret(eng, settings, fake, clock, tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("# Ops\n\n" + "\n".join(f"- {it['text']}" for it in ITEMS[:10] if "\n" not in it["text"]))
    Api(eng).call("import_from", {"source": "markdown", "path": str(notes)}, CTX)
    assert not secret_in(eng, [it["secrets"][0] for it in ITEMS[:10]])
    # An export written by a store that holds secrets (an older release's), imported here.
    old = Engram(str(tmp_path / "old.duckdb"), settings=settings, embedder=fake, clock=clock)
    for item in ITEMS[10:30]:
        m = memory(item["text"], metadata={"cmd": item["text"]})
        old.store_db.inner.insert_memory(m, fake.embed_batch([m.content])[0])
    path = tmp_path / "old.jsonl"
    export_jsonl(old, path)
    old.close()
    secrets = [it["secrets"][0] for it in ITEMS[10:30]]
    assert all(s in path.read_text() for s in secrets)  # the file carries them
    before = eng.store_db.count("memories")
    import_jsonl(eng, path, reembed=True)  # into the store of the backend under test
    assert eng.store_db.count("memories") == before + 20 and not secret_in(eng, secrets)
