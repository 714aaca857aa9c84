"""The plugins' launcher (plugins/*/bin/engram-launch) run as the clients run it: which engram it runs,
and what it does when there is none (a hook exits 0 with no output; the MCP server says what to install)."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from engram import __version__

ROOT = Path(__file__).resolve().parents[2]
LAUNCHERS = sorted(ROOT.glob("plugins/*/bin/engram-launch"))
LAUNCHER = ROOT / "plugins" / "claude-code" / "bin" / "engram-launch"


def launch(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LAUNCHER), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
    )


@pytest.fixture
def bare_path(tmp_path) -> str:
    """A PATH with the shell's tools and no engram, no uvx."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "env", "cat"):
        for d in ("/usr/bin", "/bin"):
            if os.path.exists(f"{d}/{tool}"):
                os.symlink(f"{d}/{tool}", bin_dir / tool)
                break
    return str(bin_dir)


def test_engram_bin_wins_and_is_marked_as_the_plugins(tmp_path, bare_path):
    fake = tmp_path / "my-engram"
    fake.write_text('#!/bin/sh\necho "args=$* via=$ENGRAM_VIA_PLUGIN"\n')
    fake.chmod(0o755)
    r = launch(
        "hook",
        "SessionStart",
        "--client",
        "claude-code",
        env={"PATH": bare_path, "ENGRAM_BIN": str(fake)},
        cwd=tmp_path,
    )
    assert (r.returncode, r.stdout) == (0, "args=hook SessionStart --client claude-code via=1\n"), r.stderr


def test_engram_on_path_when_no_engram_bin(tmp_path, bare_path):
    (Path(bare_path) / "engram").write_text('#!/bin/sh\necho "on path: $*"\n')
    (Path(bare_path) / "engram").chmod(0o755)
    r = launch("serve", env={"PATH": bare_path}, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "on path: serve\n"), r.stderr


@pytest.mark.parametrize("client", ["claude-code", "codex", "gemini"])
def test_without_engram_session_start_tells_the_user_what_to_install_and_exits_0(tmp_path, bare_path, client):
    r = launch("hook", "SessionStart", "--client", client, env={"PATH": bare_path}, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, "")
    # The hook output's systemMessage: shown to the user by each client, not given to the agent.
    assert json.loads(r.stdout) == {
        "systemMessage": "engram: not installed, so this session has no memory. "
        "Install it with: pipx install engram-recall (or install uv, for uvx)"
    }


@pytest.mark.parametrize("event", ["UserPromptSubmit", "Stop", "SessionEnd", "BeforeAgent", "PreCompact"])
def test_without_engram_every_other_hook_says_nothing_and_exits_0(tmp_path, bare_path, event):
    r = launch("hook", event, "--client", "claude-code", env={"PATH": bare_path}, cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_without_engram_the_server_says_in_one_line_what_to_install(tmp_path, bare_path):
    r = launch(env={"PATH": bare_path}, cwd=tmp_path)
    assert r.returncode == 127 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and "pipx install engram-recall" in r.stderr, r.stderr
    bad = launch(env={"PATH": bare_path, "ENGRAM_BIN": str(tmp_path / "missing")}, cwd=tmp_path)
    assert bad.returncode == 127 and f"ENGRAM_BIN={tmp_path / 'missing'} is not an executable file" in bad.stderr


def test_every_plugin_carries_the_same_launcher_pinned_to_this_version():
    assert len(LAUNCHERS) >= 1 and all(p.read_bytes() == LAUNCHER.read_bytes() for p in LAUNCHERS), LAUNCHERS
    assert f"VERSION={__version__}\n" in LAUNCHER.read_text()
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] == __version__
    manifests = [
        ROOT / "plugins" / "claude-code" / ".claude-plugin" / "plugin.json",
        ROOT / ".claude-plugin" / "marketplace.json",
    ]
    versions = [json.loads(m.read_text()).get("version") for m in manifests[:1]]
    versions += [p["version"] for p in json.loads(manifests[1].read_text())["plugins"]]
    assert set(versions) == {__version__}, versions
