"""engram's Codex plugin (plugins/codex, listed by .agents/plugins/marketplace.json) in the real Codex CLI
(npm), against a scripted Responses API on 127.0.0.1, in a fresh HOME with nothing else set up:
`codex plugin marketplace add <this repository>`, `codex plugin add engram@engram`, the plugin's hooks
trusted as Codex's /hooks review trusts them (Codex runs no hook it has not been told to trust, a
plugin's included), two sessions, then `codex plugin remove` and `marketplace remove`.

The plugin finds engram on PATH (its launcher, bin/engram-launch) and uses the default store, ~/.engram
of that HOME.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from clients_support import ROOT, client_bin, client_env, engram_cli, git_repo, stop_daemon
from model_fakes import FakeOpenAI, openai_text, text, tool
from test_codex_cli import KEY_VAR, AppServer, when_offered

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]

TASK = "Archive old invoices to cold storage"
EVENTS = {"sessionStart", "userPromptSubmit", "preCompact", "stop", "sessionEnd"}


def env_of(home: Path) -> dict[str, str]:
    # engram on PATH, as after `pipx install engram-recall`; the venv's, which runs this test.
    return {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        KEY_VAR: "sk-fake",
        **client_env(home / ".engram"),
    }


def codex(args: list[str], home: Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(client_bin("codex")), *args],
        cwd=cwd,
        env=env_of(home),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


def session(prompt: str, fake: FakeOpenAI, home: Path, repo: Path) -> subprocess.CompletedProcess:
    provider = (
        f'{{name="fake", base_url="{fake.url}/v1", wire_api="responses", env_key="{KEY_VAR}", '
        "supports_websockets=false, request_max_retries=0, stream_max_retries=0}"
    )
    return codex(
        [
            "exec",
            "-c",
            f'model="{fake.model}"',
            "-c",
            'model_provider="fake"',
            "-c",
            f"model_providers.fake={provider}",
            "--dangerously-bypass-approvals-and-sandbox",
            prompt,
        ],
        home,
        repo,
    )


def ok(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {p.stdout[-3000:]}\nstderr: {p.stderr[-3000:]}"
    return p.stdout + p.stderr


def plugin_hooks(app: AppServer, repo: Path) -> list[dict]:
    (entry,) = app.call("hooks/list", {"cwds": [str(repo)]})["data"]
    assert not entry["errors"], entry["errors"]
    return [h for h in entry["hooks"] if "engram-launch" in h["command"]]


def trust_plugin_hooks(home: Path, repo: Path) -> None:
    with AppServer(repo, env_of(home)) as app:
        hooks = plugin_hooks(app, repo)
        assert {h["eventName"] for h in hooks} == EVENTS, hooks
        app.call(
            "config/batchWrite",
            {
                "edits": [
                    {
                        "keyPath": "hooks.state",
                        "mergeStrategy": "upsert",
                        "value": {h["key"]: {"trusted_hash": h["currentHash"]} for h in hooks},
                    }
                ],
                "reloadUserConfig": True,
            },
        )
        assert {h["trustStatus"] for h in plugin_hooks(app, repo)} == {"trusted"}


def test_the_plugin_in_codex_gives_tools_start_context_and_a_checkpoint(tmp_path):
    home, repo = tmp_path / "home", git_repo(tmp_path / "api", "https://github.com/acme/api.git")
    home.mkdir()
    try:
        ok(codex(["plugin", "marketplace", "add", str(ROOT)], home, repo))
        assert "engram@engram" in ok(codex(["plugin", "list"], home, repo))
        ok(codex(["plugin", "add", "engram@engram"], home, repo))
        config_installed = (home / ".codex" / "config.toml").read_text()
        trust_plugin_hooks(home, repo)
        with FakeOpenAI() as fake:
            fake.script = [
                when_offered(fake, "mcp__engram", [tool("mcp__engram/create_task", name=TASK)]),
                [text("Task created; stopping.")],
            ]
            ok(session("Archive the old invoices", fake, home, repo))
            assert not fake.errors and not fake.script, fake.errors
            last = json.dumps(fake.loop_requests()[-1]["input"])
            assert "task_id" in last, last[-3000:]  # create_task answered through the plugin's server
        # A's Stop hook checkpointed it; B's SessionStart hook gives the task.
        with FakeOpenAI() as fake:
            fake.script = [[text("Carrying on.")]]
            ok(session("Carry on", fake, home, repo))
            assert TASK in openai_text(fake.loop_requests()[0])
        cli_env = {"HOME": str(home), **client_env(home / ".engram")}
        rows = json.loads(engram_cli("hooks", "status", "--json", cwd=repo, env=cli_env).stdout)
        assert [
            (r["client"], r["plugin"], set(r["events"]), r["runnable"]) for r in rows if r["scope"] == "plugin"
        ] == [
            ("codex", "engram@engram", {"SessionStart", "UserPromptSubmit", "PreCompact", "Stop", "SessionEnd"}, True)
        ]
        r = engram_cli("hooks", "install", "codex", cwd=repo, env=cli_env)
        assert r.returncode != 0 and "codex plugin remove engram@engram" in r.stderr, r.stderr
        ok(codex(["plugin", "remove", "engram@engram"], home, repo))
        ok(codex(["plugin", "marketplace", "remove", "engram"], home, repo))
        after = (home / ".codex" / "config.toml").read_text()
        # What remains is the trust the user gave the plugin's hooks (hooks.state, keyed by their
        # file), as Codex keeps it for any hook: no plugin, marketplace or server entry.
        assert "[plugins." not in after and "[marketplaces." not in after and "mcp_servers" not in after, after
        assert '[plugins."engram@engram"]' in config_installed
        assert not list((home / ".codex" / "plugins" / "cache").glob("engram/*"))
    finally:
        stop_daemon(home / ".engram")


def test_the_marketplace_and_manifest_are_what_codex_reads():
    market = json.loads((ROOT / ".agents" / "plugins" / "marketplace.json").read_text())
    (entry,) = market["plugins"]
    root = ROOT / entry["source"]["path"]
    manifest = json.loads((root / ".codex-plugin" / "plugin.json").read_text())
    assert manifest["name"] == entry["name"] == "engram"
    assert (root / manifest["mcpServers"]).is_file() and (root / manifest["skills"] / "engram" / "SKILL.md").is_file()
