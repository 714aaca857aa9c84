"""What the real-client tests share: the clients from npm, git repositories, an ENGRAM_HOME whose daemon stops."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engram.core.settings import Settings
from engram.server.daemon import stop_or_kill

ROOT = Path(__file__).resolve().parents[2]
# `npm ci --prefix .cache/npm` with tests/e2e/clients/package*.json copied there (see scripts/test.sh).
NPM_BIN = Path(os.environ.get("ENGRAM_E2E_NPM", ROOT / ".cache" / "npm")) / "node_modules" / ".bin"
ENGRAM = Path(sys.executable).parent / "engram"
NPM_INSTALL = (
    "mkdir -p .cache/npm && cp tests/e2e/clients/package*.json .cache/npm/ && "
    "npm ci --prefix .cache/npm --no-audit --no-fund"
)


def client_bin(name: str) -> Path:
    path = NPM_BIN / name
    if not path.exists():
        # scripts/test.sh installs the clients and sets ENGRAM_E2E_REQUIRE: there a missing client
        # is a failure, not a skip that would hide it.
        message = f"{path} is missing: install the clients with `{NPM_INSTALL}`"
        if os.environ.get("ENGRAM_E2E_REQUIRE"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def git_repo(path: Path, origin: str) -> Path:
    """A repository with one commit and an origin, as a user's checkout would be."""
    path.mkdir(parents=True)
    run = lambda *a: subprocess.run(["git", *a], cwd=path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "main")
    run("config", "user.email", "dev@example.com")
    run("config", "user.name", "Dev")
    run("remote", "add", "origin", origin)
    (path / "README.md").write_text("# project\n")
    run("add", "README.md")
    run("commit", "-q", "-m", "start")
    return path


def engram_env(home: Path) -> dict[str, str]:
    """What engram needs in the client's environment; the clients pass on only what they are
    given. The suite's shared model cache too: otherwise the first hook of each test's home
    checks the model's graph again (torch, about 30 s of CPU)."""
    # PYTHONPATH too when the tests run with one (a checkout whose engram is not the venv's install):
    # the hooks and MCP servers the clients start must run the engram under test.
    path = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    return {
        "ENGRAM_HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "ENGRAM_TORCH_THREADS": "1",
        "ENGRAM_MODEL_CACHE": os.environ["ENGRAM_MODEL_CACHE"],
        **path,
    }


def client_env(home: Path) -> dict[str, str]:
    """engram_env for the client itself: without ENGRAM_HOME, as after engram-setup, which puts it
    in the MCP server's entry only. The hooks reach the store through the --home install wrote."""
    return {k: v for k, v in engram_env(home).items() if k != "ENGRAM_HOME"}


def stop_daemon(home: Path, timeout: float = 120.0) -> None:
    """Stop the home's daemon, so that none outlives the test: once the turn captures the hooks
    handed to background processes are done, since one finishing later would start a daemon
    again (and hold the store's lock while the test reads it)."""
    end = time.monotonic() + timeout
    while running_captures(home) and time.monotonic() < end:
        time.sleep(0.05)  # polling the captures' processes, which end on their own
    stop_or_kill(Settings.from_env({"ENGRAM_HOME": str(home)}))


def running_captures(home: Path) -> list[int]:
    """The pids of this home's hooks still running: `engram hook ... --home HOME` processes (an
    asynchronous one the client did not wait for) and the detached captures they log (hooks.log:
    "capture handed to pid N") that have not logged their own line (":capture pid=N")."""
    log = home / "hooks.log"
    text = log.read_text() if log.exists() else ""
    done = set(re.findall(r":capture pid=(\d+) ", text))
    detached = [int(pid) for pid in re.findall(r"capture handed to pid (\d+)", text) if pid not in done]
    return [pid for pid in detached + _hook_processes(home) if _alive(pid)]


def _hook_processes(home: Path) -> list[int]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"hook" in argv and str(home).encode() in argv:
            found.append(int(proc.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A process that has ended but is not reaped yet still answers kill(pid, 0).
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def engram_cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ENGRAM), *args], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )


def captures(home: Path) -> list[str]:
    """The lines the detached per-turn captures logged."""
    log = home / "hooks.log"
    return [ln for ln in log.read_text().splitlines() if ":capture " in ln] if log.exists() else []


def wait_until(cond, timeout: float = 180.0):
    """The condition's value once true; fails after `timeout` (the capture runs detached)."""
    end, tick = time.monotonic() + timeout, threading.Event()
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        tick.wait(0.1)
    pytest.fail(f"not within {timeout:g}s")
