"""The `engram` command: in-process over a fake-embedder Engram, through a daemon socket, and as a real process."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest

from engram import Engram
from engram.api import Api, Ctx
from engram.cli import main
from engram.models.embedding import FakeEmbedder
from engram.server.rpc import lock_is_free
from engram.server.rpc_server import RpcServer
from tests.conftest import wait_until

REPO = Path(__file__).resolve().parents[2]
ENGRAM = [sys.executable, "-m", "engram.cli"]


@pytest.fixture
def api(eng):
    return Api(eng)


@pytest.fixture
def cli(api, capsys, tmp_path, monkeypatch):
    """Run `engram <argv>` in-process against the test Engram; returns (exit code, stdout, stderr).
    It runs outside any git repository (and ENGRAM_PROJECT), so its rows belong to no project."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ENGRAM_PROJECT", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv), api_factory=lambda settings: api)
        out, err = capsys.readouterr()
        return code, out, err

    return run


def cli_json(cli, *argv: str):
    code, out, err = cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_remember_then_recall(cli):
    stored = cli_json(
        cli,
        "remember",
        "The release branch is cut every second Tuesday",
        "--type",
        "fact",
        "--tag",
        "release",
        "--importance",
        "0.9",
    )
    assert stored["action"] == "new"
    hits = cli_json(cli, "recall", "release branch cut")["memories"]
    assert hits[0]["id"] == stored["memory_id"]
    assert hits[0]["tags"] == ["release"] and hits[0]["importance"] == 0.9
    # The same result, rendered for people.
    code, out, _ = cli("recall", "release branch cut")
    assert code == 0
    assert "The release branch is cut every second Tuesday" in out and stored["memory_id"] in out


def test_recall_says_how_it_read_a_misspelt_word(cli):
    cli_json(cli, "remember", "The release branch is cut every second Tuesday")
    code, out, _ = cli("recall", "relase brnach")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "searched 'relase' as release, 'brnach' as branch"
    assert "The release branch is cut every second Tuesday" in lines[1]
    # Each memory says how sure the match is, and why.
    assert lines[3] == "    strong: holds 100% of the query's words (by IDF)"


def test_json_flag_works_before_the_command_too(cli):
    code, out, _ = cli("--json", "remember", "Logs ship to Loki")
    assert code == 0 and json.loads(out)["action"] == "new"


def test_remember_reads_stdin(cli, api, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("Piped in: the cache TTL is 300 seconds\n"))
    mid = cli_json(cli, "remember", "-")["memory_id"]
    m = api.call("get_memory", {"memory_id": mid}, Ctx("check"))
    assert m["content"] == "Piped in: the cache TTL is 300 seconds"  # the closing newline frames it
    text = "  Indented first line\n\nlast line with trailing spaces  \n\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(text + "\n"))
    mid = cli_json(cli, "remember", "-")["memory_id"]
    assert api.call("get_memory", {"memory_id": mid}, Ctx("check"))["content"] == text


def test_remember_metadata_and_pin(cli, api):
    mid = cli_json(
        cli, "remember", "Never force-push main", "--type", "strategy", "--pin", "--metadata", '{"source": "team wiki"}'
    )["memory_id"]
    m = api.call("get_memory", {"memory_id": mid}, Ctx("check"))
    assert m["memory_type"] == "strategy" and m["pinned"] is True
    assert m["metadata"]["source"] == "team wiki"


def test_context_prints_the_block(cli):
    cli("remember", "Tests run with pytest -q")
    code, out, _ = cli("context", "how do tests run", "--max-tokens", "200")
    assert code == 0
    assert out.startswith("<memory>") and "pytest -q" in out and out.rstrip().endswith("</memory>")


def test_task_commands(cli):
    t = cli_json(cli, "task", "create", "ship v2", "--goal", "v2 on PyPI")
    tid = t["task_id"]
    assert t["status"] == "open"
    assert cli_json(cli, "task", "update", tid, "--status", "in_progress")["status"] == "in_progress"
    listed = cli_json(cli, "task", "list", "--status", "in_progress")["tasks"]
    assert [x["id"] for x in listed] == [tid]
    code, out, _ = cli("task", "list")
    assert code == 0 and tid in out and "ship v2" in out and "[in_progress]" in out
    h = cli_json(
        cli,
        "handoff",
        "Wheel builds; upload pending",
        "--completed",
        "build wheel",
        "--next",
        "upload to PyPI",
        "--task",
        tid,
    )
    view = cli_json(cli, "task", "show", tid)
    assert view["latest_handoff"]["id"] == h["handoff_id"]
    assert view["latest_handoff"]["next_steps"] == ["upload to PyPI"]
    code, out, _ = cli("task", "show", tid)
    assert "latest handoff" in out and "next: upload to PyPI" in out


def test_forget(cli):
    first = cli_json(cli, "remember", "Temporary: the payments integration test is flaky")
    second = cli_json(cli, "remember", "Docs build on Windows runners is flaky, temporary workaround in CI")
    assert first["action"] == second["action"] == "new"
    a = first["memory_id"]
    dry = cli_json(cli, "forget", "--query", "temporary flaky", "--dry-run")
    assert dry["count"] == 2 and dry["deleted"] == []
    gone = cli_json(cli, "forget", a)
    assert gone["deleted"] == [a]
    code, out, _ = cli("forget", "--query", "temporary flaky")
    assert code == 0 and out.startswith("deleted 1 memory")
    assert cli_json(cli, "recall", "flaky")["memories"] == []


def test_stats_consolidate_reindex(cli):
    cli("remember", "Backups run nightly at 02:00 UTC")
    stats = cli_json(cli, "stats")
    assert isinstance(stats, dict) and stats
    report = cli_json(cli, "consolidate")
    assert report["applied"] is False
    code, out, _ = cli("consolidate")
    assert code == 0 and "dry run" in out
    assert cli_json(cli, "reindex")["indexed"] == 1


def test_stats_and_consolidate_read_as_aligned_labelled_lines(cli):
    cli("remember", "Backups run nightly at 02:00 UTC")
    cli("remember", "The staging database runs PostgreSQL 16", "--type", "strategy")
    code, out, _ = cli("stats")
    assert code == 0
    lines = out.splitlines()
    labels = {ln.split("  ")[0] for ln in lines if ln and not ln.startswith(" ")}
    assert {"memories", "strength", "tasks", "sessions", "index", "disk", "model"} <= labels
    assert lines[0] == "memories     2 active of 2"  # labels padded to the longest ("fading soon")
    assert "             by type: fact 1, strategy 1" in lines
    assert any(
        ln.startswith("index        2 of 2 rows indexed (fresh), 0 graph edges, built 2025-03-01 09:00 UTC")
        for ln in lines
    )
    assert any(ln.startswith("model        fake-hash (64 dims, fake)") for ln in lines)
    assert "late reader  on; no turns of a conversation yet (it reads only those)" in lines
    assert "{" not in out and "disk_bytes" not in out  # no raw keys or dicts
    code, out, _ = cli("consolidate")
    lines = out.splitlines()
    assert lines[0] == "consolidate  would merge 0 memories into 0 clusters"
    assert lines[1] == "gists        would write or update 0 gists"
    assert lines[2] == "recurring    0 kept although faded: alike, awaiting a gist"
    assert lines[3] == (
        "prune        would prune 0 (expired 0, weak 0, consolidated expired 0, superseded expired 0, "
        "episodes over budget 0)"
    )
    assert lines[-1] == "(dry run: nothing changed; add --apply to make these changes)"
    assert any(ln.startswith("took         ") and ln.endswith(" ms") for ln in lines)


def test_stats_say_how_many_turns_the_late_reader_has_read(cli):
    cli("remember", "--conversation", "chat-1", "user: I bought a silver hatchback in Krakow last spring.")
    cli("remember", "The staging database runs PostgreSQL 16")  # not a turn: never read
    assert cli_json(cli, "stats")["late_interaction"] == {"on": True, "turns": 1, "turns_read": 1}
    code, out, _ = cli("stats")
    assert code == 0 and "late reader  on; 1 of 1 turns read (token vectors kept)" in out.splitlines()


def test_export_then_import(cli, tmp_path, settings, api):
    cli("remember", "Exported memory about the build cache")
    path = tmp_path / "dump.jsonl"
    cli_json(cli, "export", str(path))
    assert path.exists() and "build cache" in path.read_text()
    other = Engram(":memory:", settings=settings, embedder=FakeEmbedder())
    try:
        code = main(["--json", "import", str(path)], api_factory=lambda s: Api(other))
        assert code == 0
        hits = Api(other).call("recall_memory", {"query": "build cache"}, Ctx("check"))["memories"]
        assert [h["content"] for h in hits] == ["Exported memory about the build cache"]
    finally:
        other.close()


def test_cli_session_ends_cleanly(cli, eng):
    cli("remember", "Session bookkeeping check")
    sessions = [s for s in eng.list_sessions() if s.client == "cli"]
    assert len(sessions) == 1
    assert sessions[0].id.startswith("cli-") and sessions[0].status == "ended"


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["task", "show", "t-missing"], "no task with id 't-missing'"),
        (["remember", "x", "--importance", "2"], "importance"),
        (["remember", "x", "--metadata", "{oops"], "--metadata is not valid JSON"),
        (["forget"], "exactly one of memory_id or query"),
        (["recall", "q", "--as-of", "yesterday"], "ISO 8601"),
    ],
)
def test_errors_exit_1_with_a_message(cli, argv, fragment):
    code, out, err = cli(*argv)
    assert code == 1
    assert err.startswith("error: ") and fragment in err
    assert "Traceback" not in err and out == ""


def test_usage_errors_exit_2(cli):
    with pytest.raises(SystemExit) as e:
        main(["recall"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["remember", "x", "--type", "gossip"])
    assert e.value.code == 2


def test_version(cli):
    from engram import __version__

    assert cli("version") == (0, f"engram {__version__}\n", "")
    assert cli_json(cli, "version") == {"version": __version__}


HOLD_DB = "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); sys.stdin.read()"


def test_locked_database_is_a_clean_error(tmp_path, capsys):
    """Another process holds the file: the CLI says so and exits 1."""
    home = tmp_path / "home"
    home.mkdir()
    db = home / "memories.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_DB, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "ready"

        def factory(settings):
            return Api(Engram(settings.db_path, settings=settings, embedder=FakeEmbedder()))

        code = main(["--home", str(home), "stats"], api_factory=factory)
        err = capsys.readouterr().err
        assert code == 1
        assert err.startswith("error: ") and "another process" in err and "Traceback" not in err
    finally:
        holder.stdin.close()
        holder.wait(30)
        holder.stdout.close()


# ---------------------------------------------------------------- through a daemon


@pytest.fixture
def short_home():
    # Unix socket paths are limited to ~107 bytes; tmp_path can be longer.
    d = Path(tempfile.mkdtemp(prefix="egc", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_commands_go_through_a_running_daemon(short_home, api, eng, capsys):
    """With something serving the socket, the CLI must not open the database file itself."""
    from engram import Settings

    settings = Settings.from_env({"ENGRAM_HOME": str(short_home)})
    ended: dict[str, bool] = {}
    done = threading.Event()

    def handler(method, params, peer):
        return api.call(method, params, Ctx(peer.session_id, peer.user_id, peer.client, peer.pid))

    def on_disconnect(peer, clean):
        ended[peer.session_id] = clean
        done.set()

    # It announces this version, as the real daemon does: a server that announces none is an older
    # daemon, which the CLI asks to exit (and that first session would end unclean).
    from engram import __version__

    server = RpcServer(settings.socket_path, handler, on_disconnect=on_disconnect, hello={"version": __version__})
    server.start()
    try:
        code = main(["--home", str(short_home), "--json", "remember", "Served through the daemon socket"])
        out = capsys.readouterr().out
        assert code == 0, out
        mid = json.loads(out)["memory_id"]
        assert eng.get(mid).content == "Served through the daemon socket"
        assert not settings.db_path.exists()
        assert done.wait(30)
        ((sid, clean),) = ended.items()
        assert sid.startswith("cli-") and clean is True
        # Errors from the daemon come back as clean messages too.
        code = main(["--home", str(short_home), "task", "show", "t-nope"])
        assert code == 1 and "no task with id" in capsys.readouterr().err
    finally:
        server.shutdown()


STUB_DAEMON = textwrap.dedent("""
    import os, sys, threading
    from pathlib import Path
    from engram.server.rpc_server import RpcServer
    from engram.server.rpc import acquire_daemon_lock
    lock = acquire_daemon_lock(sys.argv[1])  # held until this process exits, like the real daemon
    stop = threading.Event()
    def handler(method, params, peer):
        if method == "__shutdown__":
            stop.set()
            return {"stopping": True}
        return {"method": method}
    server = RpcServer(Path(sys.argv[1]), handler)
    server.start()
    print("ready", flush=True)
    stop.wait()
    server.shutdown()
""")


def test_stop_asks_the_daemon_to_exit_and_waits(short_home, capsys):
    sock = short_home / "engram.sock"
    proc = subprocess.Popen([sys.executable, "-c", STUB_DAEMON, str(sock)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert proc.stdout.readline().strip() == "ready"
        code = main(["--home", str(short_home), "--json", "stop"])
        assert code == 0
        assert json.loads(capsys.readouterr().out) == {"stopped": True}
        # stop returned only after the daemon let go of its lock, i.e. after it exited.
        assert proc.wait(30) == 0
        # Nothing is running now: stop says so and succeeds.
        assert main(["--home", str(short_home), "stop"]) == 0
        assert "no engram daemon is running" in capsys.readouterr().out
        assert main(["--home", str(short_home), "--json", "stop"]) == 0
        assert json.loads(capsys.readouterr().out) == {"stopped": False}
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        proc.stdout.close()


# ---------------------------------------------------------------- as a real command


def run_engram(home: Path, *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, "ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1", **(env or {})}
    # cwd: outside any git repository, so the rows belong to no project (docs/projects.md).
    return subprocess.run([*ENGRAM, *argv], capture_output=True, text=True, env=e, cwd=home, timeout=300, check=False)


def test_help_and_version_as_a_command(tmp_path):
    r = run_engram(tmp_path, "--help")
    assert r.returncode == 0 and "remember" in r.stdout and "consolidate" in r.stdout
    r = run_engram(tmp_path, "version")
    assert r.returncode == 0 and r.stdout.startswith("engram ")
    assert not (tmp_path / "memories.duckdb").exists()


def test_bad_setting_exits_1_as_a_command(tmp_path):
    r = run_engram(tmp_path, "stats", env={"ENGRAM_W_BM25": "lots"})
    assert r.returncode == 1
    assert r.stderr.strip() == "error: ENGRAM_W_BM25='lots' is not a number"


def test_missing_subcommand_is_a_usage_error(tmp_path):
    r = run_engram(tmp_path, "task")
    assert r.returncode == 2 and "usage:" in r.stderr


@pytest.mark.model
def test_real_model_round_trip_as_a_command(model_home):
    """Each command starts the daemon when none runs, or uses the one that does."""
    r = run_engram(model_home, "--json", "remember", "The on-call rotation changes every Monday at 10:00")
    assert r.returncode == 0, r.stderr
    mid = json.loads(r.stdout)["memory_id"]
    assert (model_home / "engram.sock").exists()  # the first command left a daemon serving
    r = run_engram(model_home, "recall", "when does on-call rotate", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["memories"][0]["id"] == mid
    r = run_engram(model_home, "forget", mid)
    assert r.returncode == 0 and "deleted 1 memory" in r.stdout
    r = run_engram(model_home, "task", "show", "t-none")
    assert r.returncode == 1
    assert r.stderr.startswith("error: ") and "Traceback" not in r.stderr
    r = run_engram(model_home, "stop")
    assert r.returncode == 0 and r.stdout.strip() == "engram daemon stopped"


@pytest.mark.model
def test_a_missing_file_reads_the_same_through_the_daemon_as_in_process(model_home, cli, tmp_path):
    missing = str(tmp_path / "nofile.jsonl")
    r = run_engram(model_home, "import", missing)
    code, out, err = cli("import", missing)
    assert r.returncode == code == 1 and out == r.stdout == ""
    assert r.stderr == err == f"error: cannot read {missing}: No such file or directory\n"
    r = run_engram(model_home, "export", "/proc/no/such/dir/out.jsonl")
    assert r.returncode == 1 and r.stderr.startswith("error: cannot write /proc/no/such/dir")


@pytest.mark.model
def test_the_daemon_a_command_started_exits_when_idle(model_home):
    from engram.server.rpc import lock_path_for

    r = run_engram(model_home, "stats", env={"ENGRAM_IDLE_EXIT": "1"})
    assert r.returncode == 0, r.stderr
    assert "memories" in r.stdout and "onnx" in r.stdout
    lock = lock_path_for(model_home / "engram.sock")
    pid = int(lock.read_text())
    wait_until(lambda: lock_is_free(model_home / "engram.sock"), timeout=60, what="the daemon to exit when idle")
    log = (model_home / "daemon.log").read_text()
    assert (
        f"{pid} INFO engram.server.daemon: no client for 1s (ENGRAM_IDLE_EXIT): exiting" in log
        or f"{pid} INFO __main__: no client for 1s (ENGRAM_IDLE_EXIT): exiting" in log
    )
    assert not (model_home / "engram.sock").exists()
    # The next command starts a new one, which reads the checked graph without torch.
    r = run_engram(model_home, "--json", "stats")
    assert r.returncode == 0 and json.loads(r.stdout)["model"]["backend"] == "onnx"


def test_continuity_commands(cli, eng, clock):
    tid = cli_json(cli, "task", "create", "CSV export")["task_id"]
    cli_json(cli, "handoff", "Writer works", "--next", "add csv flag", "--next", "write csv tests", "--task", tid)
    clock.advance(minutes=1)
    p = cli_json(
        cli,
        "progress",
        "add csv flag",
        "--status",
        "done",
        "--completion",
        "1",
        "--task",
        tid,
        "--notes",
        "engram/cli.py",
    )
    assert p["status"] == "done" and p["task_id"] == tid
    f = cli_json(
        cli,
        "failure",
        "UnicodeEncodeError",
        "--component",
        "exporter",
        "--root-cause",
        "no utf-8",
        "--fix",
        "open with utf-8",
        "--task",
        tid,
    )
    assert f["action"] == "new"
    tasks = cli_json(cli, "tasks")["tasks"]
    assert tasks[0]["id"] == tid and tasks[0]["last_activity"]["memory_type"] == "failure"
    r = cli_json(cli, "resume", tid)
    assert {e["step"]: e["status"] for e in r["plan"]} == {"add csv flag": "done", "write csv tests": "not_started"}
    code, out, _ = cli("resume", tid, "--max-tokens", "500")
    assert code == 0 and out.startswith("<resume>") and "[done] add csv flag" in out
    assert r["held_by"]["this_session"] and "claim" in r  # resume claims by default; --no-claim only reads
    code, out, _ = cli("resume", tid, "--no-claim")
    r = cli_json(cli, "resume", tid, "--no-claim")
    assert code == 0 and "[done] add csv flag" in out and "Held by" not in out
    assert "claim" not in r and r["held_by"] is None
    code, out, _ = cli("task", "show", tid)
    assert "plan:" in out and "[not_started] write csv tests" in out
    code, out, _ = cli("tasks")
    assert code == 0 and tid in out and "last:" in out
    code, out, _ = cli("prompt")
    assert code == 0 and out.startswith("## Memory (engram)") and tid in out
    assert "next: write csv tests [not_started]" in out
    # outcome applies to the session named by --session
    cli_json(cli, "--session", "agent-shell-1", "remember", "Exports are UTF-8")
    o = cli_json(cli, "--session", "agent-shell-1", "outcome", "success", "--notes", "shipped")
    assert o == {"session_id": "agent-shell-1", "outcome": "success", "notes": "shipped"}
    assert eng.store_db.get_session("agent-shell-1").outcome == "success"
    # without --session there is no session of the caller's to score: refused, nothing recorded
    sessions = len(eng.store_db.user_sessions("default"))
    code, _, err = cli("outcome", "failure")
    assert code == 1 and "needs --session" in err
    assert len(eng.store_db.user_sessions("default")) == sessions
    with pytest.raises(SystemExit) as usage:
        cli("progress", "x", "--status", "finished")
    assert usage.value.code == 2
    code, _, err = cli("--session", " ", "tasks")
    assert code == 1 and "--session" in err


def test_recall_prints_a_pitfall_without_a_component_plainly(cli):
    task = cli_json(cli, "task", "create", "OAuth2 login")["task_id"]
    cli_json(cli, "remember", "Never log the OAuth2 refresh token", "--type", "failure", "--task", task)
    code, out, _ = cli("recall", "OAuth2 refresh token", "--task", task)
    assert code == 0
    assert "pitfall: Never log the OAuth2 refresh token" in out and "[?]" not in out


def test_progress_done_without_completion_is_complete(cli):
    """`engram progress X --status done` is all of X, not "done (0%)"; other statuses start at 0."""
    done = cli_json(cli, "progress", "Write the docs", "--status", "done")
    assert done["completion"] == 1.0
    started = cli_json(cli, "progress", "Write the tests", "--status", "in_progress")
    assert started["completion"] == 0.0
    partly = cli_json(cli, "progress", "Write the changelog", "--status", "done", "--completion", "0.5")
    assert partly["completion"] == 0.5
    code, out, _ = cli("recall", "write the docs progress")
    assert code == 0 and "Progress on Write the docs: done (100%)" in out


def test_a_handoff_prints_indented_under_its_entry(cli):
    """Readable output keeps a multi-line memory's later lines under its entry; --json keeps the
    text as stored."""
    task = cli_json(cli, "task", "create", "CSV export")["task_id"]
    cli("handoff", "Writer works", "--completed", "CSV writer", "--next", "Add a --csv flag", "--task", task)
    for argv in (("task", "show", task), ("recall", "CSV writer handoff", "--task", task), ("tasks",)):
        code, out, _ = cli(*argv)
        assert code == 0
        lines = out.splitlines()
        assert any("Handoff: Writer works" in x for x in lines), out
        assert not [x for x in lines if x.startswith(("Completed:", "Next steps:"))], out
    view = cli_json(cli, "task", "show", task)
    assert view["handoffs"][0]["content"] == (
        "Handoff: Writer works\nCompleted: CSV writer\nNext steps: Add a --csv flag"
    )


@pytest.mark.model
def test_three_restatements_end_as_one_memory_as_commands(model_home):
    """Issue 27: the same fact remembered three ways, then `engram consolidate`: one memory."""
    texts = [
        "The staging database is refreshed from production every Sunday night.",
        "Every Sunday night the staging DB gets refreshed from prod.",
        "Staging database refresh from production happens on Sunday nights.",
    ]
    results = []
    for text in texts:
        r = run_engram(model_home, "--json", "remember", text)
        assert r.returncode == 0, r.stderr
        results.append(json.loads(r.stdout))
    assert [x["action"] for x in results] == ["new", "reinforce", "reinforce"]
    assert {x["memory_id"] for x in results} == {results[0]["memory_id"]}
    preview = run_engram(model_home, "--json", "consolidate")
    assert preview.returncode == 0, preview.stderr
    assert json.loads(preview.stdout)["clusters"] == []
    r = run_engram(model_home, "--json", "consolidate", "--apply")
    assert r.returncode == 0, r.stderr
    stats = run_engram(model_home, "--json", "stats")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["by_status"] == {"active": 1}
    hits = json.loads(run_engram(model_home, "--json", "recall", "when is staging refreshed").stdout)["memories"]
    assert [(h["id"], h["content"]) for h in hits] == [(results[0]["memory_id"], texts[0])]
    assert run_engram(model_home, "stop").returncode == 0


def test_projects_text_counts_in_the_singular_and_plural():
    from engram.cli.render import _render_projects

    out = _render_projects(
        {
            "current": "/r/a",
            "projects": [{"id": "/r/a", "memories": 1, "tasks": 1}, {"id": "/r/b", "memories": 3, "tasks": 0}],
        }
    )
    assert out.splitlines() == ["* /r/a  1 memory, 1 task", "  /r/b  3 memories, 0 tasks"]


def test_stats_says_how_many_rows_await_their_embedding_only_when_some_do():
    from engram.cli.render import render

    index = {"rows": 5, "table_rows": 5, "fresh": True, "graph_edges": 0, "built_at": None}
    waiting = render("memory_stats", {"index": {**index, "awaiting_embedding": 1234}}, as_json=False)
    assert "5 of 5 rows indexed (fresh)" in waiting and "; 1,234 await their embedding" in waiting
    assert "await their embedding" not in render(
        "memory_stats", {"index": {**index, "awaiting_embedding": 0}}, as_json=False
    )
