"""No secret is kept, through the real stack: `engram remember`, the MCP server as a subprocess, a
Claude Code transcript checkpointed by `engram hook PreCompact`, then `engram export` and
`engram backup`. Every text column of every table, the hooks log, the export and the backup are
read back afterwards, and no secret value of the labelled set is in any of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import duckdb
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from engram.core.settings import Settings
from engram.server.daemon import stop_daemon
from tests.hooks.test_hook_command import engram, hook, payload
from tests.hooks.test_hook_transcripts import claude_entry, tool_result, tool_use, write_jsonl
from tests.stdio_support import engram_env, ok

pytestmark = pytest.mark.model

SET = json.loads((Path(__file__).resolve().parents[1] / "data" / "secrets_set.json").read_text(encoding="utf-8"))
PRIVATE = "my home address is 12 Elm Street"


def texts(where: str) -> list[tuple[str, str]]:
    """(text, secret) of every kind's item placed in a prompt, a command or an output."""
    return [(it["text"], it["secrets"][0]) for it in SET["items"] if it["where"] == where]


def dump_duckdb(path: Path) -> str:
    """Every value of every table of a DuckDB file, as text."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        out = []
        for (table,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        ).fetchall():
            cols = [
                c
                for (c, t) in con.execute(
                    "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?", [table]
                ).fetchall()
                if "FLOAT" not in t and "BLOB" not in t
            ]
            select = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in cols)
            for row in con.execute(f'SELECT {select} FROM "{table}"').fetchall():
                out.append(" ".join(str(v) for v in row))
        return "\n".join(out)
    finally:
        con.close()


async def through_mcp(home: Path, secrets: list[tuple[str, str]]) -> str:
    params = StdioServerParameters(command=sys.executable, args=["-m", "engram"], env=engram_env(home, "default"))
    async with Client(params, read_timeout_seconds=180) as c:
        task = await ok(
            c,
            "create_task",
            {"name": f"deploy with {secrets[0][1]}", "goal": secrets[1][0], "metadata": {"env": secrets[2][0]}},
        )
        tid = task["task_id"]
        await ok(
            c,
            "store_memory",
            {
                "content": secrets[3][0] + f" <private>{PRIVATE}</private>",
                "tags": ["deploy"],
                "metadata": {"cmd": secrets[4][0]},
                "task_id": tid,
            },
        )
        await ok(c, "track_failure", {"error": secrets[5][0], "component": "deploy", "task_id": tid})
        await ok(
            c,
            "session_handoff",
            {"summary": secrets[6][0], "next_steps": [secrets[7][0]], "blocked": [secrets[8][0]], "task_id": tid},
        )
        await ok(c, "session_outcome", {"outcome": "failure", "notes": secrets[9][0]})
        return tid


def test_no_secret_reaches_any_stored_column_the_log_the_export_or_the_backup(model_home, tmp_path):
    home = model_home
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "app.py").write_text("x\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()

    prompts, commands, outputs = texts("prompt"), texts("command"), texts("output")
    every = prompts + commands + outputs
    # The CLI: each prompt-shaped text remembered as a user would.
    for text, _ in prompts[:12]:
        r = engram(home, "remember", text + f" <private>{PRIVATE}</private>", cwd=repo)
        assert r.returncode == 0, r.stderr
    # The MCP server as a subprocess.
    anyio.run(through_mcp, home, outputs)
    # A Claude Code session: the user pastes secrets, the agent runs commands carrying them, and
    # they fail with the secrets echoed in their output; then auto-compaction.
    entries = [claude_entry("user", "\n".join(t for t, _ in prompts) + f"\n<private>{PRIVATE}</private>")]
    for i, ((cmd, _), (out, _)) in enumerate(zip(commands, outputs)):
        entries.append(tool_use(f"b{i}", "Bash", {"command": cmd, "description": "run it"}))
        entries.append(tool_result(f"b{i}", f"Exit code 1\n{out}", error=True))
    entries.append(tool_use("g", "Bash", {"command": "git rev-parse HEAD"}))
    entries.append(tool_result("g", head))
    transcript = write_jsonl(tmp_path / "session.jsonl", entries)
    _, line = hook(home, "PreCompact", payload("PreCompact", repo, transcript_path=str(transcript), trigger="auto"))
    assert " ok " in line and "stored " in line, line

    export = tmp_path / "export.jsonl"
    assert engram(home, "export", str(export), cwd=repo).returncode == 0
    backup = tmp_path / "backup.duckdb"
    r = engram(home, "backup", str(backup), cwd=repo)
    assert r.returncode == 0, r.stderr
    stop_daemon(Settings.from_env({"ENGRAM_HOME": str(home)}))

    places = {
        "store": dump_duckdb(home / "memories.duckdb"),
        "backup": dump_duckdb(backup),
        "export": export.read_text(),
        "hooks.log": (home / "hooks.log").read_text(),
    }
    for where, text in places.items():
        kept = sorted({s[:12] + "…" for _, s in every if s in text})
        assert not kept, f"secrets found in the {where}: {kept}"
        assert PRIVATE not in text and "<private>" not in text, where
    store = places["store"]
    # Not an empty store: what was written is there, redacted where it was secret.
    assert store.count("[REDACTED]") >= len(every) and "auto-checkpoint" in store
    assert "postgres://deploy:[REDACTED]@db.staging.internal:5432/app" in store
    assert "export STRIPE_KEY=[REDACTED]" in store
    short = head[:7]  # the checkpoint names the commit as git log %h does
    assert short in store and short in places["export"]  # a git SHA in a checkpoint stays intact


@pytest.mark.parametrize("how", ["file", "setting"])
def test_an_excluded_project_stores_nothing_and_the_log_says_so(tmp_path, how):
    home, repo = tmp_path / "home", tmp_path / "client-repo"
    repo.mkdir()
    subprocess.run(["git", "-C", str(repo), "init", "-q"], check=True)
    env = {}
    if how == "file":
        (repo / ".engramignore").write_text("")
    else:
        env["ENGRAM_HOOK_EXCLUDE"] = f"/nowhere\n{repo}"
    text, secret = texts("prompt")[0]
    transcript = write_jsonl(tmp_path / "s.jsonl", [claude_entry("user", text)])
    for event, extra in (
        ("SessionStart", {"source": "startup"}),
        ("UserPromptSubmit", {"prompt": text}),
        ("PreCompact", {"transcript_path": str(transcript), "trigger": "auto"}),
        ("SessionEnd", {"transcript_path": str(transcript), "reason": "other"}),
    ):
        out, line = hook(home, event, payload(event, repo, **extra), env=env)
        assert out is None and " skipped " in line and "project excluded from capture" in line, line
        assert "nothing stored" in line and secret not in line
    # No daemon was asked: no store, no socket, nothing but the log.
    assert sorted(p.name for p in home.iterdir()) == ["hooks.log"]


def test_engram_scrub_on_a_store_an_older_release_wrote(model_home, real_embedder, tmp_path):
    from engram import Engram
    from engram.core.ids import new_id
    from engram.core.types import Memory

    home = model_home
    planted = [it for it in SET["items"] if it["secrets"]][:6]
    clean = [it for it in SET["items"] if not it["secrets"]][:6]
    # Rows as the previous release stored them: straight to the database, unredacted.
    eng = Engram(
        home / "memories.duckdb", settings=Settings.from_env({"ENGRAM_HOME": str(home)}), embedder=real_embedder
    )
    for it in planted + clean:
        m = Memory(
            id=new_id(),
            content=it["text"],
            memory_type="fact",
            importance=0.5,
            recall_count=0,
            created_at=eng.clock.now(),
            last_recalled_at=None,
            user_id="default",
        )
        eng.store_db.inner.insert_memory(m, real_embedder.embed_batch([m.content])[0])
    eng.close()
    secrets = [it["secrets"][0] for it in planted]

    dry = engram(home, "scrub")
    assert dry.returncode == 0, dry.stderr
    out = dry.stdout.decode()
    assert out.startswith(f"would rewrite: {len(planted)} memories") and "engram scrub --apply" in out
    assert "[REDACTED]" in out and not any(s in out for s in secrets)
    done = engram(home, "--json", "scrub", "--apply")
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    assert r["applied"] and r["memories"] == len(planted) and Path(r["backup"]).exists()
    again = json.loads(engram(home, "--json", "scrub").stdout)
    assert again["memories"] == 0
    # Recall reads the rewritten rows: the daemon's index was rebuilt from them.
    hits = json.loads(engram(home, "--json", "recall", planted[0]["text"][:40]).stdout)
    assert hits["memories"] and not any(s in json.dumps(hits) for s in secrets)
    stop_daemon(Settings.from_env({"ENGRAM_HOME": str(home)}))
    store = dump_duckdb(home / "memories.duckdb")
    assert not [s[:10] for s in secrets if s in store]
    assert all(it["text"] in store for it in clean)


# Fake values in the shapes real sessions leaked (issue 46): a 32-hex key in a URL's appid, a hex key
# named in a sentence, a client secret before its name, a key used as a metadata field's name.
APPID = "5f3a9c2e1b7d4f6a8c0e2b4d6f8a0c1e"
NEWS = "8d2f6a01c4b9e37f5a6c0d18e2b4f9a3"
SPOTIFY = "e1c7b04d9a2f6e83c5d1a7f09b4e2c68"
FIELD = "q7Rt2XvL9pMw4ZbN8cKd3HsY6aJf1GeU"
WEATHER = f"https://api.openweathermap.org/data/2.5/weather?q=Lagos&appid={APPID}&units=metric"
KEPT = "weather?q=Lagos&appid=[REDACTED]&units=metric"


async def remember_through_mcp(home: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "engram"], env=engram_env(home, "default"))
    async with Client(params, read_timeout_seconds=180) as c:
        await ok(
            c,
            "store_memory",
            {
                "content": f"{SPOTIFY} this is the spotify client secret; the forecast comes from curl '{WEATHER}'",
                "metadata": {FIELD: "the TMDB key", "cmd": f"curl -s '{WEATHER}'"},
            },
        )
        await ok(
            c,
            "session_handoff",
            {"summary": f"weather works: {WEATHER}", "next_steps": [f"rotate the NewsAPI key {NEWS}"]},
        )


def test_a_url_key_and_keys_in_sentences_leave_nothing_in_the_store_the_checkpoint_or_the_export(model_home, tmp_path):
    home, repo = model_home, tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "-C", str(repo), "init", "-q"], check=True)
    r = engram(home, "remember", f"this is the NewsAPI key {NEWS} and the weather call is curl '{WEATHER}'", cwd=repo)
    assert r.returncode == 0, r.stderr
    anyio.run(remember_through_mcp, home)
    # A Claude Code session: the user pastes the key in a sentence, the agent runs the URL, which
    # fails and echoes it; auto-compaction checkpoints the session (its commands in the metadata).
    entries = [
        claude_entry("user", f"this is the NewsAPI key {NEWS}, {SPOTIFY} this is the spotify client secret"),
        tool_use("w1", "Bash", {"command": f"curl -s '{WEATHER}'", "description": "get the weather"}),
        tool_result("w1", f'Exit code 1\n{{"cod":401,"message":"Invalid API key {APPID}"}}', error=True),
    ]
    transcript = write_jsonl(tmp_path / "session.jsonl", entries)
    _, line = hook(home, "PreCompact", payload("PreCompact", repo, transcript_path=str(transcript), trigger="auto"))
    assert " ok " in line and "stored " in line, line
    export = tmp_path / "export.jsonl"
    assert engram(home, "export", str(export), cwd=repo).returncode == 0
    backup = tmp_path / "backup.duckdb"
    assert engram(home, "backup", str(backup), cwd=repo).returncode == 0
    stop_daemon(Settings.from_env({"ENGRAM_HOME": str(home)}))

    places = {
        "store": dump_duckdb(home / "memories.duckdb"),
        "backup": dump_duckdb(backup),
        "export": export.read_text(),
        "hooks.log": (home / "hooks.log").read_text(),
    }
    for where, text in places.items():
        assert not [s[:6] for s in (APPID, NEWS, SPOTIFY, FIELD) if s in text], where
    # What was stored is there, and the URL keeps all but the key.
    for where in ("store", "export"):
        assert places[where].count(KEPT) >= 4, where  # remember, MCP content and metadata, handoff
    exported = [json.loads(x) for x in places["export"].splitlines() if x.strip()]
    checkpoints = [
        x["metadata"]["checkpoint"]
        for x in exported
        if isinstance(x.get("metadata"), dict) and isinstance(x["metadata"].get("checkpoint"), dict)
    ]
    commands = [c["command"] for cp in checkpoints for c in cp.get("commands", [])]
    assert any(KEPT in c for c in commands), commands  # metadata.checkpoint.commands
