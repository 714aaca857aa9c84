"""One daemon per ENGRAM_HOME serves one store: a command, the stdio MCP server or engram-setup that
names another store (--database-url, ENGRAM_DATABASE_URL, or none while the daemon serves a URL) is
refused with both stores named, and nothing is written anywhere. Older clients (no store in their
hello) are served as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engram.core.settings import Settings, store_identity
from engram.server.rpc import RpcError
from engram.server.rpc_client import RpcClient
from engram.store import open_store

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-pw"  # the private server trusts its socket, so any password connects


def with_password(url: str) -> str:
    assert "postgres:@" in url, url  # pgserver's URL: user postgres, empty password
    return url.replace("postgres:@", f"postgres:{PASSWORD}@", 1)


def engram(home: Path, *argv: str, url: str | None = None) -> subprocess.CompletedProcess:
    """`engram ARGV` as a command; ENGRAM_DATABASE_URL is `url` or unset (whatever the backend run)."""
    env = {k: v for k, v in os.environ.items() if k != "ENGRAM_DATABASE_URL"}
    env |= {"ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1", **({"ENGRAM_DATABASE_URL": url} if url else {})}
    return subprocess.run(
        [sys.executable, "-m", "engram", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
        check=False,
    )


def count_memories(path_or_url: str | Path) -> int:
    store = open_store(path_or_url, datetime.now(UTC))
    try:
        return store.count("memories")
    finally:
        store.close()


def refused(r: subprocess.CompletedProcess, serves: str, asked: str) -> None:
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout == ""
    err = r.stderr
    assert err.startswith("error: the engram daemon for ") and "Traceback" not in err
    assert f"serves {serves}, not {asked}; nothing was done" in err
    assert "engram stop" in err and "ENGRAM_HOME" in err
    assert PASSWORD not in err


# ---------------------------------------------------------------- the identity


def test_store_identity_names_where_the_rows_are_and_never_the_password(tmp_path):
    url = "postgresql://alice:hunter2@DB.example.com/engram"
    assert store_identity(url) == "postgresql://alice@db.example.com:5432/engram"
    # Spellings of the same database are one store: scheme alias, default port, a changed
    # password, connection options that do not pick the database.
    same = [
        "postgres://alice@db.example.com:5432/engram",
        "postgresql://alice:new-pw@db.example.com/engram",
        "postgresql://alice@db.example.com/engram?sslmode=require&connect_timeout=5",
        "postgresql://db.example.com/engram?user=alice&password=hunter2",
    ]
    assert {store_identity(u) for u in same} == {store_identity(url)}
    for other in [
        "postgresql://alice@db.example.com/engram2",
        "postgresql://bob@db.example.com/engram",
        "postgresql://alice@db.example.com:5433/engram",
        "postgresql://alice@replica/engram",
        "postgresql://alice@db.example.com/x?dbname=engram2",
    ]:
        assert store_identity(other) != store_identity(url), other
    sock = store_identity("postgresql://postgres:pw@/postgres?host=/tmp/pg1&password=pw")
    assert sock == "postgresql://postgres@:5432/postgres?host=/tmp/pg1" and "pw@" not in sock
    # A file: its resolved absolute path, however it is reached.
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    f = tmp_path / "real" / "memories.duckdb"
    assert store_identity(tmp_path / "link" / "memories.duckdb") == store_identity(f) == str(f.resolve())
    assert store_identity(":memory:") == ":memory:"
    s = Settings.from_env({"ENGRAM_HOME": str(tmp_path), "ENGRAM_DATABASE_URL": url})
    assert s.store == store_identity(url)
    assert Settings.from_env({"ENGRAM_HOME": str(tmp_path)}).store == str((tmp_path / "memories.duckdb").resolve())


# ---------------------------------------------------------------- real daemons, commands


@pytest.mark.model
@pytest.mark.anyio
async def test_a_daemon_on_the_file_refuses_commands_naming_a_database(model_home, pg_url):
    url = with_password(pg_url)
    file = model_home / "memories.duckdb"
    r = engram(model_home, "--json", "remember", "Written to the DuckDB file")
    assert r.returncode == 0, r.stderr  # started the daemon, on the file
    serves, asked = str(file.resolve()), store_identity(url)

    # --database-url, ENGRAM_DATABASE_URL, the stdio MCP server: all refused, none written.
    refused(engram(model_home, "--database-url", url, "remember", "Meant for PostgreSQL"), serves, asked)
    refused(engram(model_home, "remember", "Meant for PostgreSQL too", url=url), serves, asked)
    refused(engram(model_home, "recall", "PostgreSQL", url=url), serves, asked)
    message = await stdio_tool_error(model_home, url)
    assert f"serves {serves}, not {asked}; nothing was done" in message and PASSWORD not in message

    # A client that names no store (older clients) is served as before; one naming the file too.
    with RpcClient(model_home / "engram.sock", client="old") as old:
        assert old.call("health")["memories"] == 1
    r = engram(model_home, "--json", "stats")
    assert r.returncode == 0, r.stderr
    log = (model_home / "daemon.log").read_text()
    assert f"it asked for {asked}, this daemon serves {serves}" in log and PASSWORD not in log

    r = engram(model_home, "stop")
    assert r.returncode == 0 and r.stdout.strip() == "engram daemon stopped"
    assert count_memories(url) == 0  # nothing reached the database...
    assert count_memories(file) == 1  # ...nor the file beyond its one memory

    # Once stopped, the same command starts a daemon for the database and writes there.
    r = engram(model_home, "--json", "--database-url", url, "remember", "Meant for PostgreSQL")
    assert r.returncode == 0, r.stderr
    r = engram(model_home, "stop")
    assert r.returncode == 0
    assert count_memories(url) == 1 and count_memories(file) == 1


@pytest.mark.model
def test_a_daemon_on_a_database_refuses_the_file_and_other_databases(model_home, pg_url, pg_server):
    url = with_password(pg_url)
    other = pg_server.new_database()
    file = model_home / "memories.duckdb"
    try:
        r = engram(model_home, "--json", "remember", "Written to PostgreSQL", url=url)
        assert r.returncode == 0, r.stderr
        serves = store_identity(url)
        refused(engram(model_home, "remember", "Meant for the file"), serves, str(file.resolve()))
        refused(
            engram(model_home, "--database-url", other, "remember", "Meant for the other database"),
            serves,
            store_identity(other),
        )
        # The same database spelt otherwise (another password, an option) is the same store.
        respelt = pg_url.replace("postgres:@", "postgres:another@", 1) + "&connect_timeout=7"
        r = engram(
            model_home, "--json", "--database-url", respelt, "remember", "The deploy window is Thursday 14:00 UTC"
        )
        assert r.returncode == 0, r.stderr
        # engram-setup's self-check through the daemon is refused as well (it writes a probe).
        env = {k: v for k, v in os.environ.items() if k != "ENGRAM_DATABASE_URL"}
        s = subprocess.run(
            [sys.executable, "-m", "engram.setup_command", "--home", str(model_home), "--json"],
            capture_output=True,
            text=True,
            env={**env, "HF_HUB_OFFLINE": "1"},
            cwd=REPO,
            timeout=300,
            check=False,
        )
        assert s.returncode == 1, s.stdout + s.stderr
        report = json.loads(s.stdout)
        assert report["ok"] is False and f"serves {serves}, not {file.resolve()}" in report["error"]
        r = engram(model_home, "stop")
        assert r.returncode == 0, r.stderr
        assert count_memories(url) == 2 and count_memories(other) == 0
        assert not file.exists()  # the refused command never opened the file
    finally:
        pg_server.drop(other)


async def stdio_tool_error(home: Path, url: str) -> str:
    """`python -m engram` (stdio MCP) with ENGRAM_DATABASE_URL=url: the error text of a store_memory call."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k != "ENGRAM_DATABASE_URL"}
    env |= {"ENGRAM_HOME": str(home), "ENGRAM_DATABASE_URL": url, "HF_HUB_OFFLINE": "1"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "engram"], env=env)
    async with Client(params, read_timeout_seconds=180) as c:
        r = await c.call_tool("store_memory", {"content": "Meant for PostgreSQL over MCP"})
        assert r.is_error
        return r.content[0].text


def test_rpc_error_kind_is_store_mismatch(tmp_path):
    """The refusal reaches a client as RpcError kind StoreMismatch (what scripts can test for)."""
    import shutil
    import tempfile

    from engram import Engram
    from engram.models.embedding import FakeEmbedder
    from engram.server.daemon import Daemon

    home = Path(tempfile.mkdtemp(prefix="egx", dir="/tmp"))  # socket paths are short
    try:
        settings = Settings.from_env({"ENGRAM_HOME": str(home)})
        daemon = Daemon(settings, engram=Engram(str(settings.db_path), settings=settings, embedder=FakeEmbedder()))
        daemon.start()
        try:
            with pytest.raises(RpcError) as e, RpcClient(settings.socket_path, store="postgresql://x@h:5432/d") as c:
                c.call("health")
            assert e.value.kind == "StoreMismatch"
            assert f"serves {settings.db_path.resolve()}, not postgresql://x@h:5432/d" in e.value.message
            with RpcClient(settings.socket_path, store=settings.store) as c:
                assert c.call("store_memory", content="Same store")["action"] == "new"
            assert daemon.eng.store_db.count("memories") == 1
        finally:
            daemon.stop_requested.set()
            daemon.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)
