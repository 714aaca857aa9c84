"""`python -m engram`: the same as the `engram` command (no arguments: the stdio MCP server)."""

import sys
from collections.abc import Callable

main: Callable[[], int | None]  # the CLI's, or the MCP server's while the CLI is not installed
try:
    from engram.cli import main
except ModuleNotFoundError as e:  # pragma: no cover - only while the CLI is not installed
    if e.name != "engram.cli":
        raise
    from engram.server.mcp import main

if __name__ == "__main__":
    sys.exit(main())
