"""The package as a user installs it: build the wheel, install it with the locked dependencies into
a fresh venv, run `engram-setup` there and list the MCP tools over stdio from the installed `engram`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from engram.core.settings import Settings
from engram.server.daemon import stop_daemon
from engram.server.mcp import TOOL_NAMES

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]  # the wheel is installed without the postgres extra

REPO = Path(__file__).resolve().parents[2]
DIST = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["name"]


def run(*cmd: str | Path, cwd: Path, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def work():
    d = Path(tempfile.mkdtemp(prefix="egw", dir="/tmp"))  # short: the daemon's socket lives under it
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_the_wheel_installs_into_a_fresh_venv_and_serves_mcp(work):
    # Built from a copy of the sources, so the build leaves nothing in the repository.
    src = work / "src"
    shutil.copytree(REPO / "engram", src / "engram", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        work / "dist",
        src,
        cwd=work,
    )
    (wheel,) = (work / "dist").glob("*.whl")
    assert wheel.name.startswith(DIST.replace("-", "_") + "-")

    venv = work / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=work)
    py = venv / "bin" / "python"
    pip = [py, "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check"]
    run(*pip, "torch==2.13.0", cwd=work)  # first and pinned: an unpinned torch pulls a CUDA build
    run(*pip, "-r", REPO / "requirements.lock", wheel, cwd=work)
    shown = run(py, "-m", "pip", "show", DIST, cwd=work).stdout
    assert f"Name: {DIST}" in shown
    # The installed package, not the repository's sources.
    where = run(py, "-c", "import engram; print(engram.__file__)", cwd=work).stdout.strip()
    assert where.startswith(str(venv))
    # The web panel's static files are package data: every one of them is in the installed package.
    panel = Path(where).parent / "panel" / "static"
    shipped = sorted(
        p.relative_to(REPO / "engram" / "panel" / "static").as_posix()
        for p in (REPO / "engram" / "panel" / "static").rglob("*")
        if p.is_file()
    )
    assert shipped and all((panel / rel).is_file() for rel in shipped), shipped

    home = work / "home"
    # A user's fresh install: its own model cache, not the suite's shared one (ENGRAM_MODEL_CACHE).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ENGRAM_MODEL_CACHE")}
    env.update(
        ENGRAM_HOME=str(home),
        XDG_CACHE_HOME=str(work / "xdg-cache"),  # the machine's model cache of a machine new to engram
        HF_HUB_OFFLINE="1",
        PATH=f"{venv / 'bin'}:{env.get('PATH', '')}",
    )
    report = json.loads(run(venv / "bin" / "engram-setup", "--json", cwd=work, env=env).stdout)
    assert report["ok"] and report["model"]["backend"] == "onnx" and report["selfcheck"]["ok"]
    assert report["mcp"]["command"] == str(venv / "bin" / "engram")

    async def tools() -> tuple[list[str], dict]:
        params = StdioServerParameters(command=str(venv / "bin" / "engram"), args=[], env=env, cwd=str(work))
        async with Client(params, read_timeout_seconds=120) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            stats = await client.call_tool("memory_stats", {})
            return names, stats.structured_content

    try:
        names, stats = anyio.run(tools)
    finally:
        stop_daemon(Settings.from_env({"ENGRAM_HOME": str(home)}))
    assert sorted(names) == sorted(TOOL_NAMES)
    assert stats["model"]["backend"] == "onnx" and stats["total"] == 0
