"""Projects through the engine and its Api, both backends: what each caller sees, what it writes."""

from __future__ import annotations

import pytest

from engram.api import Api
from engram.core.types import EVERY_PROJECT, NO_PROJECT, Ctx, EngramError, Scope

A, B = "github.com/me/alpha", "github.com/me/beta"


@pytest.fixture
def api(eng):
    return Api(eng)


def ctx(project: str | None, session: str = "s") -> Ctx:
    return Ctx(session_id=f"{session}-{project}", client="test", project=project, branch="main")


def recalled(api: Api, c: Ctx, query: str, **kw) -> set[str]:
    return {m["content"] for m in api.call("recall_memory", {"query": query, **kw}, c)["memories"]}


def test_each_project_sees_its_own_and_the_global_memories(api):
    api.call("store_memory", {"content": "Alpha formats the code with tabs."}, ctx(A))
    api.call("store_memory", {"content": "Beta formats the code with spaces."}, ctx(B))
    api.call(
        "store_memory", {"content": "The user wants the code formatted before each commit.", "scope": "global"}, ctx(A)
    )
    api.call("store_memory", {"content": "Format the code with the house style when unsure."}, ctx(None))
    glob = {
        "The user wants the code formatted before each commit.",
        "Format the code with the house style when unsure.",
    }
    assert recalled(api, ctx(A), "how to format the code") == glob | {"Alpha formats the code with tabs."}
    assert recalled(api, ctx(B), "how to format the code") == glob | {"Beta formats the code with spaces."}
    assert recalled(api, ctx(None), "how to format the code") == glob
    assert len(recalled(api, ctx(B), "how to format the code", all_projects=True)) == 4
    ctx_block = api.call("get_context", {"query": "format the code"}, ctx(B))["context"]
    assert "spaces" in ctx_block and "tabs" not in ctx_block
    assert "tabs" in api.call("get_context", {"query": "format the code", "all_projects": True}, ctx(B))["context"]


def test_the_limit_applies_after_the_scope(api, eng):
    # Many of another project's memories rank above this project's: none may take its places.
    for i in range(30):
        eng.store(f"Deploy step {i} of beta runs the deploy script deploy.sh deploy", project=B)
    eng.store("Deploy alpha with make deploy.", project=A)
    got = recalled(api, ctx(A), "deploy", limit=3)
    assert got == {"Deploy alpha with make deploy."}


def test_resolution_stays_inside_a_project(eng):
    first = eng.store("The database is PostgreSQL 16.", project=A)
    same = eng.store("The database is PostgreSQL 16.", project=B)
    assert same.action == "new" and same.memory.id != first.memory.id  # B's fact is B's, not a reinforcement of A's
    again = eng.store("The database is PostgreSQL 16.", project=A)
    assert again.action == "reinforce" and again.memory.id == first.memory.id
    assert eng.get(first.memory.id).status == "active" and eng.get(first.memory.id).project == A


def test_tasks_are_scoped_and_a_task_by_id_works_everywhere(api):
    ta = api.call("create_task", {"name": "Alpha login page"}, ctx(A))
    tg = api.call("create_task", {"name": "Tidy the dotfiles", "scope": "global"}, ctx(A))
    tb = api.call("create_task", {"name": "Beta billing export"}, ctx(B))
    assert ta["project"] == A and tg["project"] is None and tb["project"] == B
    names = lambda c, **kw: {t["name"] for t in api.call("list_tasks", kw, c)["tasks"]}  # noqa: E731
    assert names(ctx(A)) == {"Alpha login page", "Tidy the dotfiles"}
    assert names(ctx(B)) == {"Beta billing export", "Tidy the dotfiles"}
    assert names(ctx(None)) == {"Tidy the dotfiles"}
    assert len(names(ctx(None), all_projects=True)) == 3
    # An id is explicit: B's session can open, resume and write to A's task; what it writes for
    # the task belongs to the task's project.
    assert api.call("get_task", {"task_id": ta["task_id"]}, ctx(B))["task"]["project"] == A
    api.call("track_progress", {"feature": "login form", "status": "in_progress", "task_id": ta["task_id"]}, ctx(B))
    h = api.call(
        "session_handoff",
        {"summary": "Login form half done", "next_steps": ["wire the submit"], "task_id": ta["task_id"]},
        ctx(B),
    )
    assert api.call("get_memory", {"memory_id": h["memory_id"]}, ctx(B))["project"] == A
    r = api.call("resume_task", {"task_id": ta["task_id"]}, ctx(B))
    assert r["next_step"] == "wire the submit" and "login form" in r["in_progress"]
    prompt = api.call("memory_prompt", {}, ctx(B))["prompt"]
    assert "Beta billing export" in prompt and "Alpha login page" not in prompt
    assert "Alpha login page" in api.call("memory_prompt", {"all_projects": True}, ctx(B))["prompt"]


def test_forget_by_query_deletes_only_what_the_caller_sees(api, eng):
    a = eng.store("Old staging password rotation note alpha", project=A).memory.id
    b = eng.store("Old staging password rotation note beta", project=B).memory.id
    g = eng.store("Old staging password rotation note global").memory.id
    r = api.call("forget_memory", {"query": "staging password rotation", "dry_run": True}, ctx(A))
    assert set(r["would_delete"]) == {a, g}
    r = api.call("forget_memory", {"query": "staging password rotation", "all_projects": True, "dry_run": True}, ctx(A))
    assert set(r["would_delete"]) == {a, b, g}
    api.call("forget_memory", {"memory_id": b}, ctx(A))  # by id: any project's
    assert set(eng.forget(query="staging password rotation", scope=EVERY_PROJECT, dry_run=True)) == {a, g}


def test_pitfalls_and_interrupted_sessions_are_the_projects(api, eng):
    api.call("track_failure", {"error": "pip timeout", "component": "installer"}, ctx(A))
    api.call("track_failure", {"error": "npm ERESOLVE", "component": "installer"}, ctx(B))
    api.call("store_memory", {"content": "The installer needs the lock file."}, ctx(A))
    api.call("store_memory", {"content": "The installer needs the lock file, in beta too."}, ctx(B))

    def fails(c: Ctx) -> set[str]:
        return {f["error"] for f in api.call("recall_memory", {"query": "installer lock file"}, c)["related_failures"]}

    assert fails(ctx(A)) == {"pip timeout"} and fails(ctx(B)) == {"npm ERESOLVE"}
    # A session of A that went away is reported to A's next session, not to B's.
    eng.touch_session("gone", client="stdio", project=A, branch="main")
    eng.end_session("gone", clean=False)
    assert api.call("recall_memory", {"query": "installer"}, ctx(B, "b2"))["interrupted_sessions"] == []
    got = api.call("recall_memory", {"query": "installer"}, ctx(A, "a2"))["interrupted_sessions"]
    assert [s["session_id"] for s in got] == ["gone"]


def test_sessions_record_project_and_branch(api, eng):
    api.call("memory_stats", {}, ctx(A, "rec"))
    s = eng.store_db.get_session(f"rec-{A}")
    assert (s.project, s.branch) == (A, "main")


def test_list_memories_filters_by_project(api, eng):
    eng.store("alpha row", project=A)
    eng.store("beta row", project=B)
    eng.store("global row")
    page = lambda **kw: {m["content"] for m in api.call("list_memories", kw, ctx(None))["memories"]}  # noqa: E731
    assert page() == {"alpha row", "beta row", "global row"}
    assert page(in_project=A) == {"alpha row"}
    assert page(in_project="") == {"global row"}
    assert api.call("list_projects", {}, ctx(A)) == {
        "projects": [{"id": A, "memories": 1, "tasks": 0}, {"id": B, "memories": 1, "tasks": 0}],
        "current": A,
    }


def test_engine_defaults_to_no_project_and_refuses_a_bad_project(eng):
    eng.store("Scoped convention about retries.", project=A)
    eng.store("Global convention about retries.")
    assert [h.memory.content for h in eng.recall("convention about retries", reinforce=False)] == [
        "Global convention about retries."
    ]
    assert len(eng.recall("convention about retries", reinforce=False, scope=Scope(A))) == 2
    assert len(eng.recall("convention about retries", reinforce=False, scope=NO_PROJECT)) == 1
    with pytest.raises(EngramError, match="project"):
        eng.store("x", project="")
    with pytest.raises(EngramError, match="scope"):
        Api(eng).call("store_memory", {"content": "x", "scope": "everywhere"}, ctx(A))
