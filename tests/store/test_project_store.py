"""Projects in the store, both backends: the scope filter in the queries, and a store from before
projects keeping every row visible after its migration."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import duckdb

from engram import Engram
from engram.core.types import EVERY_PROJECT, NO_PROJECT, Scope, Session, Task
from engram.models.embedding import FakeEmbedder
from engram.store.schema import SCHEMA_VERSION, migrate
from tests.conftest import START

# The schema before projects: the four project migrations are the last ones.
BEFORE_PROJECTS = SCHEMA_VERSION - 4
OLD_ROWS = [
    # v1 columns only, literal values: the same statements on both backends.
    "INSERT INTO memories (id, content, memory_type, importance, recall_count, created_at, user_id, status) "
    "VALUES ('old-fact', 'The build server compiles with clang seventeen.', 'fact', 0.5, 0, "
    "'2025-01-01 10:00:00', 'default', 'active')",
    "INSERT INTO memories (id, content, memory_type, importance, recall_count, created_at, user_id, status) "
    "VALUES ('old-pref', 'The user prefers terse build server logs.', 'fact', 0.7, 0, "
    "'2025-01-02 10:00:00', 'default', 'active')",
    "INSERT INTO memories (id, content, memory_type, importance, recall_count, created_at, user_id, task_id, "
    "status) VALUES ('old-note', 'Build cache lives on the build server disk.', 'fact', 0.5, 0, "
    "'2025-01-03 10:00:00', 'default', 't-old', 'active')",
    "INSERT INTO tasks (id, name, goal, status, metadata, user_id, created_at, updated_at) VALUES "
    "('t-old', 'Speed up the build', 'under five minutes', 'open', '{}', 'default', "
    "'2025-01-01 09:00:00', '2025-01-03 10:00:00')",
    "INSERT INTO sessions (id, user_id, client, status, started_at, last_heartbeat) VALUES "
    "('s-old', 'default', 'stdio', 'ended', '2025-01-01 09:00:00', '2025-01-01 11:00:00')",
]


def _old_store(tmp_path, backend, pg_server_or_none) -> str:
    """A database at the last version before projects, holding rows written then."""
    if backend == "postgres":
        from engram.store.pg import connect
        from engram.store.pg import migrate as pg_migrate

        url = pg_server_or_none.new_database(migrated=False)
        con = connect(url)
        pg_migrate(con, START, target=BEFORE_PROJECTS)
        for sql in OLD_ROWS:
            con.execute(sql)
        con.commit()
        con.close()
        return url
    path = str(tmp_path / "old.duckdb")
    con = duckdb.connect(path)
    migrate(con, START, target=BEFORE_PROJECTS)
    for sql in OLD_ROWS:
        con.execute(sql)
    con.close()
    return path


def test_a_store_from_before_projects_keeps_every_memory_visible(tmp_path, settings, clock, backend, request):
    pg = request.getfixturevalue("pg_server") if backend == "postgres" else None
    where = _old_store(tmp_path, backend, pg)
    s = replace(settings, database_url=where) if backend == "postgres" else settings
    e = Engram(where, settings=s, embedder=FakeEmbedder(), clock=clock)
    try:
        assert e.store_db.schema_version() == SCHEMA_VERSION
        assert {m.project for m, _ in e.store_db.iter_memory_rows()} == {None}
        assert e.store_db.get_task("t-old").project is None and e.store_db.get_session("s-old").project is None
        everything = {"old-fact", "old-pref", "old-note"}
        # Outside any project, inside one, and widened: the rows of no project are in every view.
        for scope in (NO_PROJECT, Scope("github.com/me/app"), Scope("/home/me/other"), EVERY_PROJECT):
            ids = {h.memory.id for h in e.recall("build server", limit=10, scope=scope, reinforce=False)}
            assert ids == everything, scope
            assert [t.id for t in e.task_rows(scope=scope)] == ["t-old"]
        page = e.list_memories(limit=50)
        assert {m["id"] for m in page["memories"]} == everything
    finally:
        e.close()
        if pg is not None:
            pg.drop(where)


def _task(tid: str, project: str | None, at) -> Task:
    return Task(
        id=tid,
        name=tid,
        goal="",
        status="open",
        metadata={},
        user_id="default",
        created_at=at,
        updated_at=at,
        project=project,
    )


def test_list_tasks_filters_by_scope_in_the_query(eng):
    db = eng.store_db
    for i, (tid, project) in enumerate([("t-a", "github.com/me/a"), ("t-b", "github.com/me/b"), ("t-g", None)]):
        db.insert_task(_task(tid, project, START + timedelta(minutes=i)))
    ids = lambda scope: {t.id for t in db.list_tasks("default", None, scope)}  # noqa: E731
    assert ids(Scope("github.com/me/a")) == {"t-a", "t-g"}
    assert ids(Scope("github.com/me/b")) == {"t-b", "t-g"}
    assert ids(NO_PROJECT) == {"t-g"}
    assert ids(EVERY_PROJECT) == {"t-a", "t-b", "t-g"}
    assert ids(Scope("github.com/me/none-such")) == {"t-g"}
    assert db.get_task("t-b").project == "github.com/me/b"


def test_failures_and_interruptions_are_scoped_in_the_query(eng):
    for project, text in (
        ("p/a", "Failure in cache: stale key in A"),
        ("p/b", "Failure in cache: stale key in B"),
        (None, "Failure in cache: stale key everywhere"),
    ):
        eng.store(text, memory_type="failure", tags=["component:cache"], project=project)
    db = eng.store_db
    seen = lambda scope: sorted(m.content[-1] for m in db.active_failures_tagged("default", "component:cache", scope))  # noqa: E731
    assert seen(Scope("p/a")) == ["A", "e"] and seen(Scope("p/b")) == ["B", "e"] and seen(NO_PROJECT) == ["e"]
    assert len(db.active_failures_tagged("default", "component:cache", EVERY_PROJECT)) == 3
    assert db.active_failure_tags("default", "component:", Scope("p/zzz")) == ["component:cache"]  # the global one
    for sid, project in (("s-a", "p/a"), ("s-b", "p/b")):
        db.upsert_session(
            Session(
                id=sid,
                user_id="default",
                client="stdio",
                pid=None,
                status="interrupted",
                started_at=START,
                last_heartbeat=START,
                ended_at=START,
                task_id=None,
                outcome=None,
                outcome_notes=None,
                reported=False,
                project=project,
                branch="main",
            )
        )
    later = START + timedelta(days=1)
    assert [s.id for s in db.unreported_interruptions("default", later, None, Scope("p/a"))] == ["s-a"]
    assert [s.id for s in db.unreported_interruptions("default", later, None, NO_PROJECT)] == []
    assert {s.id for s in db.unreported_interruptions("default", later, None, EVERY_PROJECT)} == {"s-a", "s-b"}
    assert db.get_session("s-a").branch == "main"


def test_projects_lists_what_each_project_holds(eng):
    eng.store("Alpha uses tabs.", project="p/a")
    eng.store("Alpha deploys on Fridays.", project="p/a")
    eng.store("Beta uses spaces.", project="p/b")
    eng.store("The user writes British English.")
    eng.create_task("Beta release", project="p/b")
    assert eng.projects() == [{"id": "p/a", "memories": 2, "tasks": 0}, {"id": "p/b", "memories": 1, "tasks": 1}]
    assert eng.projects(user_id="someone-else") == []
