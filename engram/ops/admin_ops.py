"""The operations over a user's whole store (prompt, projects, export, import, reindex) and its administration."""

from __future__ import annotations

from engram.ops.declarations import ALL_PROJECTS, Cli, Http, Op, Param

STORE_WIDE = (
    Op(
        "memory_prompt",
        (ALL_PROJECTS,),
        cli=(Cli(("prompt",), "Print the memory rules for CLAUDE.md / AGENTS.md with the open tasks' state."),),
    ),
    Op(
        "list_projects",
        http=Http("GET", "/projects", "The projects the caller's memories and tasks belong to"),
        cli=(Cli(("projects",), "List the projects memories and tasks belong to, with their counts."),),
    ),
    Op(
        "export_memories",
        (Param("path", str, "File to write."),),
        cli=(
            Cli(
                ("export",),
                "Write the user's memories, tasks, sessions and edges to a JSON Lines file.",
                positional=("path",),
            ),
        ),
    ),
    Op(
        "import_memories",
        (
            Param("path", str, "An `engram export` file."),
            Param("on_conflict", str, "error: refuse a file with ids that exist; skip: keep those rows.", "error"),
            Param("reembed", bool, "Accept a file embedded with another model and embed it again.", False),
        ),
    ),
    Op(
        "import_from",
        (
            Param("source", str, "mcp-memory, mem0 or markdown."),
            Param("path", str, "The file (or folder of notes) to read."),
            Param("dry_run", bool, "Show what would be stored; store nothing.", False),
        ),
    ),
    Op(
        "reindex",
        (
            Param(
                "reembed",
                bool,
                "Also re-embed every memory with the current model (after changing ENGRAM_MODEL).",
                False,
            ),
        ),
        cli=(Cli(("reindex",), "Rebuild the derived indexes (vectors, BM25, graph) from the stored rows."),),
    ),
)

ADMINISTRATION = (
    Op("run_maintenance"),
    Op("health"),
    # `engram doctor` (engram.cli.commands.run_doctor) calls it and adds the hooks' checks.
    Op(
        "doctor",
        http=Http(
            "GET",
            "/doctor",
            "The store's integrity and the model's files: each problem with its fix (docs/lifecycle.md)",
        ),
    ),
    Op(
        "migrate_store",
        (
            Param(
                "target", str, "A postgresql:// URL or a DuckDB file path to copy the whole store into.", flag="--to"
            ),
            Param("force", bool, "Add to a target that already holds rows (ids it has are skipped).", False),
        ),
        cli=(Cli(("migrate",), "Copy the whole store (every user) into another database and verify the copy."),),
    ),
    Op(
        "backup_store",
        (
            Param(
                "dest",
                str | None,
                "File or existing folder to write the backup to (default: the "
                "backups folder beside the database, ENGRAM_HOME/backups).",
                None,
            ),
        ),
        cli=(
            Cli(
                ("backup",),
                "Write a consistent copy of the DuckDB store while the daemon serves, check it, and print where it is.",
                positional=("dest",),
            ),
        ),
    ),
    Op(
        "scrub_store",
        (
            Param(
                "apply",
                bool,
                "Rewrite what is found, after keeping a copy of the store as it was; "
                "without it, only show what would change.",
                False,
            ),
        ),
        cli=(
            Cli(
                ("scrub",),
                "Find secrets and <private> spans already stored (memories, handoffs, their "
                "history, tasks, sessions) with the redactor every write passes; --apply rewrites them.",
            ),
        ),
    ),
    # Per-user keys (engram.admin.keys): local administration only, never an HTTP route or MCP tool,
    # so a key holder cannot make, list or revoke keys.
    Op(
        "create_key",
        (
            Param("user_id", str, "The user the key acts as.", flag="--user"),
            Param("label", str | None, "Whose or what the key is for, e.g. 'alice laptop'.", None),
        ),
        cli=(Cli(("keys", "create"), "Make a key for a user: printed once, only its hash is kept."),),
    ),
    Op(
        "list_keys",
        (Param("user_id", str | None, "Only this user's keys.", None, flag="--user"),),
        cli=(Cli(("keys", "list"), "List keys: id, user, label, created, revoked (never a key)."),),
    ),
    Op(
        "revoke_key",
        (Param("key_id", str, "Id from `keys create` or `keys list`."),),
        cli=(
            Cli(("keys", "revoke"), "Revoke a key: the next request that sends it is refused.", positional=("key_id",)),
        ),
    ),
)
