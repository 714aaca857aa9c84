"""Helpers for tests that run `python -m engram` as a real stdio MCP server through the SDK's client."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from engram.core.settings import Settings
from engram.server.daemon import stop_or_kill

# The first call may wait for the daemon to start and load the embedding model.
TIMEOUT = 180


# The database of a module's home under --backend postgres: its one daemon serves one store, and a
# client naming another (each test's own ENGRAM_DATABASE_URL) would be refused (StoreMismatch).
DATABASES: dict[Path, str] = {}


def stop_engram_daemon(home: Path) -> None:
    stop_or_kill(Settings.from_env({"ENGRAM_HOME": str(home)}))  # no daemon may outlive the tests


def engram_env(home: Path, user: str) -> dict[str, str]:
    db = {"ENGRAM_DATABASE_URL": DATABASES[home]} if home in DATABASES else {}
    return {
        **os.environ,
        "ENGRAM_HOME": str(home),
        "ENGRAM_USER": user,
        "HF_HUB_OFFLINE": "1",
        "ENGRAM_TORCH_THREADS": "1",
        **db,
    }


def stdio(home: Path, user: str) -> Client:
    params = StdioServerParameters(command=sys.executable, args=["-m", "engram"], env=engram_env(home, user))
    return Client(params, read_timeout_seconds=TIMEOUT)


async def ok(client: Client, tool: str, args: dict | None = None) -> dict:
    r = await client.call_tool(tool, args or {})
    assert not r.is_error, f"{tool} failed: {r.content[0].text}"
    return r.structured_content


def child_pids() -> set[int]:
    """Direct children of this process (Linux /proc), to find the stdio server the SDK spawned."""
    me, out = os.getpid(), set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            out.add(int(stat.parent.name))
    return out
