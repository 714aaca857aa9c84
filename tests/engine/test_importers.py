"""Importing from other tools (MCP memory server, mem0, markdown notes): what becomes a memory,
the dry run, and a second run that adds nothing. Fixtures are hand-written in each tool's format."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engram.admin.importers import parse_markdown, parse_mcp_memory, parse_mem0
from engram.api import Api, Ctx
from engram.cli import main
from engram.core.types import EngramError

DATA = Path(__file__).parents[1] / "data" / "import"
CTX = Ctx("import-test")


@pytest.fixture
def api(eng):
    return Api(eng)


def rows(eng) -> dict[str, int]:
    """Row counts of what an import may write (the calling session's own row aside)."""
    return {k: v for k, v in eng.store_db.table_counts().items() if k != "sessions"}


def contents(eng) -> dict[str, tuple[str, ...]]:
    return {m.content: m.tags for m, _ in eng.store_db.iter_index_rows() if m.status == "active"}


def test_mcp_memory_entities_observations_and_relations():
    items = parse_mcp_memory(DATA / "memory.json")
    assert [i.content for i in items] == [
        "John Smith: Speaks fluent Spanish",
        "John Smith: Graduated in 2019",
        "John Smith: Prefers morning meetings",
        "Anthropic: Builds the Claude models",
        "Project Atlas is a project",  # no observations: the entity itself is kept
        "John Smith works at Anthropic",
        "John Smith leads Project Atlas",
    ]
    assert items[0].tags == ("mcp-memory", "person") and items[-1].tags == ("mcp-memory", "relation")
    assert items[0].origin == {"entity": "John_Smith"}


def test_mcp_memory_older_single_object_form(tmp_path):
    f = tmp_path / "memory.json"
    f.write_text(
        json.dumps(
            {
                "entities": [{"name": "Ana", "entityType": "person", "observations": ["Owns the API"]}],
                "relations": [{"from": "Ana", "to": "Billing", "relationType": "maintains"}],
            }
        )
    )
    assert [i.content for i in parse_mcp_memory(f)] == ["Ana: Owns the API", "Ana maintains Billing"]


def test_mem0_export_memories_categories_and_origin():
    items = parse_mem0(DATA / "mem0_export.json")
    assert [i.content for i in items] == [
        "Dev works at TechCorp as a senior engineer",
        "Prefers morning meetings and async communication",
        "Is allergic to peanuts",
    ]
    assert items[1].tags == ("mem0", "preferences", "work")
    assert items[0].origin["id"] == "3c90c3cc-0d44-4b50-8888-8dd25736052a"
    assert items[0].origin["created_at"] == "2025-06-02T10:15:00.000000-07:00"
    assert "metadata" not in items[1].origin  # null and empty fields are not kept


def test_markdown_headings_bullets_paragraphs_and_tags_from_the_path():
    items = parse_markdown(DATA)
    got = [(i.content, i.tags) for i in items]
    assert got == [
        ("Project guide: This repository holds the billing service.", ("claude",)),
        ("Testing: Run the tests with `pytest -x` before every commit.", ("claude",)),
        (
            "Testing: Never mock the database; use the `pg` fixture instead. It starts a throwaway Postgres in Docker.",
            ("claude",),
        ),  # a bullet's continuation line stays with it
        ("Deploys: Deploys go to Fly.io from `main`.", ("claude",)),
        ("Deploys: Rollbacks use `fly releases rollback`.", ("claude",)),
        # A basic-memory note: front matter skipped, observations' [category] and #tags kept.
        ("engram: Store everything in one DuckDB file", ("notes", "projects", "engram", "decision", "storage")),
        (
            "engram: The daemon owns the database; clients talk to it over a Unix socket",
            ("notes", "projects", "engram", "fact"),
        ),
        (
            "engram: Warm commands answer in under half a second",
            ("notes", "projects", "engram", "requirement", "performance"),
        ),
        ("engram implements Long-term memory", ("notes", "projects", "engram", "relation")),
    ]  # the code block and the table are not memories
    one = parse_markdown(DATA / "CLAUDE.md")
    assert [i.content for i in one] == [c for c, t in got if t == ("claude",)]


@pytest.mark.parametrize(
    "source, name", [("mcp-memory", "memory.json"), ("mem0", "mem0_export.json"), ("markdown", ".")]
)
def test_import_stores_each_item_and_a_second_run_adds_nothing(api, eng, source, name):
    path = str(DATA / name)
    first = api.call("import_from", {"source": source, "path": path}, CTX)
    assert first["found"] == first["stored"] > 0 and first["skipped"] == 0 and not first["dry_run"]
    stored = contents(eng)
    for it in first["items"]:
        if it["action"] == "new":
            assert stored[it["content"]] == tuple(it["tags"])
    m = eng.get(first["items"][0]["memory_id"])
    assert m.metadata["imported_from"] == source and m.user_id == "default"
    before = rows(eng)
    second = api.call("import_from", {"source": source, "path": path}, CTX)
    assert second["stored"] == 0 and second["skipped"] == first["found"] and second["items"] == []
    assert rows(eng) == before and contents(eng) == stored


def test_the_dry_run_shows_what_resolution_would_do_and_stores_nothing(api, eng):
    known = eng.store("Deploys go to Fly.io from main.").memory
    before, indexed = rows(eng), len(eng.index)
    dry = api.call("import_from", {"source": "markdown", "path": str(DATA / "CLAUDE.md"), "dry_run": True}, CTX)
    assert dry["dry_run"] and dry["stored"] == 5
    assert rows(eng) == before and len(eng.index) == indexed
    assert eng.get(known.id).content == known.content and eng.get(known.id).recall_count == 0
    deploy = next(i for i in dry["items"] if "Fly.io" in i["content"])
    assert deploy["action"] in ("reinforce", "merge", "replace") and deploy["target_id"] == known.id
    assert all(i["memory_id"] is None for i in dry["items"])
    # The real run does what the dry run said, and a dry run after it has nothing to store.
    real = api.call("import_from", {"source": "markdown", "path": str(DATA / "CLAUDE.md")}, CTX)
    assert [(i["action"], i["content"], i["target_id"]) for i in real["items"]] == [
        (i["action"], i["content"], i["target_id"]) for i in dry["items"]
    ]
    again = api.call("import_from", {"source": "markdown", "path": str(DATA / "CLAUDE.md"), "dry_run": True}, CTX)
    assert again["stored"] == 0 and again["skipped"] == 5


def test_the_same_file_for_another_user_is_imported_again(api, eng):
    path = str(DATA / "mem0_export.json")
    api.call("import_from", {"source": "mem0", "path": path}, CTX)
    bob = api.call("import_from", {"source": "mem0", "path": path}, Ctx("bob-session", user_id="bob"))
    assert bob["stored"] == 3 and eng.get(bob["items"][0]["memory_id"], "bob").user_id == "bob"


@pytest.mark.parametrize(
    "source, text, fragment",
    [
        ("mcp-memory", '{"type":"entity","name":"A","observations":["x"]}\n{oops\n', "line 2 is not valid JSON"),
        ("mcp-memory", '{"type":"person","name":"A"}\n', "type must be 'entity' or 'relation'"),
        ("mcp-memory", '{"type":"relation","from":"A","relationType":"knows"}\n', "'to' must be a non-empty string"),
        ("mem0", '{"count": 3}', "not a mem0 export"),
        ("mem0", '[{"id": "1"}]', "'memory' must be a non-empty string"),
    ],
)
def test_malformed_files_are_refused_with_the_reason(api, tmp_path, source, text, fragment):
    f = tmp_path / "in.json"
    f.write_text(text)
    with pytest.raises(EngramError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        api.call("import_from", {"source": source, "path": str(f)}, CTX)


def test_bad_source_missing_path_and_empty_folder(api, tmp_path):
    with pytest.raises(EngramError, match="source must be one of mcp-memory, mem0, markdown"):
        api.call("import_from", {"source": "notion", "path": str(tmp_path)}, CTX)
    with pytest.raises(EngramError, match=r"cannot read .*nope\.json: No such file or directory"):
        api.call("import_from", {"source": "mem0", "path": str(tmp_path / "nope.json")}, CTX)
    with pytest.raises(EngramError, match="no markdown"):
        api.call("import_from", {"source": "markdown", "path": str(tmp_path)}, CTX)


def test_cli_dry_run_then_import(api, capsys, tmp_path):
    notes = tmp_path / "notes"
    shutil.copytree(DATA / "notes", notes)
    run = lambda *argv: (main(list(argv), api_factory=lambda s: api), *capsys.readouterr())  # noqa: E731
    code, out, err = run("import", "--from", "markdown", str(notes), "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"markdown {notes}: 4 found, 0 imported before; would store 4 (new 4)"
    assert "  new       engram: Store everything in one DuckDB file #projects #engram #decision #storage" in lines
    assert lines[-1] == "(dry run: nothing stored; run it again without --dry-run to import)"
    code, out, _ = run("--json", "import", "--from", "markdown", str(notes))
    assert code == 0 and json.loads(out)["stored"] == 4
    code, out, _ = run("import", "--from", "markdown", str(notes))
    assert code == 0 and out.startswith(f"markdown {notes}: 4 found, 4 imported before; stored 0 (nothing new)")
    code, _, err = run("import", "--from", "mem0", str(notes), "--skip-existing")
    assert code == 1 and "--skip-existing and --reembed are for engram export files" in err
    code, _, err = run("import", str(notes / "x.jsonl"), "--dry-run")
    assert code == 1 and "--dry-run needs --from" in err
