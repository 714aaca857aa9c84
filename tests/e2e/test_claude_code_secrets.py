"""Through the real Claude Code (npm) and its hooks: a session whose prompt and commands carry secrets
and a <private> span leaves none of them in the store or the hooks log; a repository with a
.engramignore file leaves nothing at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clients_support import git_repo, stop_daemon
from model_fakes import FakeAnthropic, text, tool
from test_claude_code import claude, install_hooks, result_of

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]

SET = json.loads((Path(__file__).resolve().parents[1] / "data" / "secrets_set.json").read_text(encoding="utf-8"))
ITEMS = {(it["kind"], it["where"]): it for it in SET["items"] if it["secrets"]}
PRIVATE = "the on-call phone is 555-0199"
PROMPT = (
    "\n".join(ITEMS[(k, "prompt")]["text"] for k in ("url_password", "stripe_key", "huggingface_token", "jwt"))
    + f"\n<private>{PRIVATE}</private>\nPlease check the staging database."
)
COMMAND = ITEMS[("env_password", "command")]["text"]  # PGPASSWORD=... psql -h db -U app
OUTPUT = ITEMS[("slack_bot_token", "output")]["text"]  # echoed by the failing command
SECRETS = [
    ITEMS[(k, w)]["secrets"][0]
    for k, w in (
        ("url_password", "prompt"),
        ("stripe_key", "prompt"),
        ("huggingface_token", "prompt"),
        ("jwt", "prompt"),
        ("env_password", "command"),
        ("slack_bot_token", "output"),
    )
]


def script() -> list:
    failing = f"echo '{OUTPUT}' >&2; {COMMAND} || exit 3"
    return [
        [tool("Bash", command=failing, description="Try the staging database")],
        [text("The database refused the login; stopping here.")],
    ]


@pytest.fixture
def client_home(tmp_path):
    return tmp_path / "client-home"


def test_a_session_with_secrets_leaves_none_in_the_store_or_the_log(tmp_path, engram_home, client_home):
    import duckdb

    repo = git_repo(tmp_path / "shop", "https://github.com/acme/shop.git")
    install_hooks(repo, engram_home)
    try:
        with FakeAnthropic(script()) as fake:
            result_of(claude(repo, PROMPT, fake, client_home, engram_home, mcp=False))
            assert not fake.errors, fake.errors
            assert not fake.script, "the session ended before its script did"
    finally:
        stop_daemon(engram_home)
    log = (engram_home / "hooks.log").read_text()
    assert "SessionEnd" in log and "checkpoint of" in log and "stored " in log, log
    con = duckdb.connect(str(engram_home / "memories.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT content, tags, metadata FROM memories").fetchall()
        events = con.execute("SELECT detail FROM memory_events").fetchall()
        tasks = con.execute("SELECT name, goal, metadata FROM tasks").fetchall()
        sessions = con.execute("SELECT outcome_notes FROM sessions").fetchall()
    finally:
        con.close()
    stored = json.dumps([rows, events, tasks, sessions], default=str)
    assert "Please check the staging database" in stored  # the request was stored, redacted
    assert "postgres://deploy:[REDACTED]@db.staging.internal:5432/app" in stored
    assert "PGPASSWORD=[REDACTED] psql" in stored  # the failed command, kept as a failure
    assert "slack_sdk.errors.SlackApiError" in stored  # and its output
    for where, body in (("store", stored), ("hooks.log", log)):
        assert not [s[:10] for s in SECRETS if s in body], where
        assert PRIVATE not in body and "<private>" not in body, where


def test_a_repository_with_engramignore_leaves_nothing(tmp_path, engram_home, client_home):
    repo = git_repo(tmp_path / "client-work", "https://github.com/acme/client-work.git")
    (repo / ".engramignore").write_text("")
    install_hooks(repo, engram_home)
    with FakeAnthropic(script()) as fake:
        result_of(claude(repo, PROMPT, fake, client_home, engram_home, mcp=False))
        assert not fake.errors, fake.errors
    lines = (engram_home / "hooks.log").read_text().splitlines()
    assert {ln.split()[2] for ln in lines} >= {"SessionStart", "UserPromptSubmit", "SessionEnd"}, lines
    assert all(" skipped " in ln and "project excluded from capture" in ln for ln in lines), lines
    assert sorted(p.name for p in engram_home.iterdir()) == ["hooks.log"]  # no store, no daemon
