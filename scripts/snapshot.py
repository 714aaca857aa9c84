"""The public surface as one JSON document, to diff before and after a structural change.

    python scripts/snapshot.py > /tmp/before.json   # on the old commit
    python scripts/snapshot.py > /tmp/after.json    # on the new one
    diff /tmp/before.json /tmp/after.json           # nothing: the public behaviour did not change

It holds the MCP tools (name, description, input schema), prompts and resource templates, the
HTTP API's OpenAPI document, every CLI command's help, and every setting (variable, default,
help), and the tables and columns of a new store. Nothing here loads a model.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sys
from pathlib import Path

# A stable terminal width: argparse wraps help to $COLUMNS.
os.environ["COLUMNS"] = "100"


def mcp_surface() -> dict:
    from engram.server.mcp import build_mcp

    mcp = build_mcp(lambda ctx: None)  # the backend is only asked for when a tool runs

    async def read() -> dict:
        tools = await mcp.list_tools()
        prompts = await mcp.list_prompts()
        resources = await mcp.list_resources()
        templates = await mcp.list_resource_templates()
        return {
            "tools": [t.model_dump(mode="json", exclude_none=True) for t in sorted(tools, key=lambda t: t.name)],
            "prompts": [p.model_dump(mode="json", exclude_none=True) for p in prompts],
            "resources": [r.model_dump(mode="json", exclude_none=True) for r in resources],
            "templates": [t.model_dump(mode="json", exclude_none=True) for t in templates],
        }

    return asyncio.run(read())


def cli_surface() -> dict:
    import argparse

    from engram.cli import build_parser

    helps: dict[str, str] = {}

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        helps[path] = parser.format_help()
        for action in parser._actions:  # argparse offers no public walk of its subcommands
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in sorted(action.choices.items()):
                    walk(sub, f"{path} {name}")

    walk(build_parser(), "engram")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        from engram.cli import main

        main(["hook", "--help"])
    helps["engram hook"] = out.getvalue()
    return helps


def settings_surface() -> list[dict]:
    from engram.core.settings import SETTINGS

    # The home's default is the running user's: shown as documented, not as resolved here.
    return [
        {
            "name": x.name,
            "env": x.env,
            "type": str(x.type),
            "default": x.shown_default(),
            "help": x.help,
            "bounds": [repr(x.ge), repr(x.gt), repr(x.le)],
        }
        for x in SETTINGS
    ]


def store_surface() -> dict:
    """The tables and columns of a new DuckDB store, as the migrations leave them."""
    import tempfile
    from datetime import datetime, timezone

    import duckdb

    from engram.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memories.duckdb"
        open_store(path, datetime.now(timezone.utc)).close()
        con = duckdb.connect(str(path), read_only=True)
        rows = con.execute(
            "SELECT table_name, column_name, data_type, column_default, is_nullable "
            "FROM information_schema.columns ORDER BY table_name, ordinal_position"
        ).fetchall()
        con.close()
    tables: dict[str, list] = {}
    for table, *column in rows:
        tables.setdefault(table, []).append(column)
    return tables


def main() -> None:
    from engram.server.http_routes import openapi_document

    doc = {
        "mcp": mcp_surface(),
        "openapi": openapi_document(secured=True, with_mcp=True),
        "cli": cli_surface(),
        "settings": settings_surface(),
        "store": store_surface(),
    }
    json.dump(doc, sys.stdout, indent=1, sort_keys=True, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
