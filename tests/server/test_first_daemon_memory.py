"""A daemon's first start in a new ENGRAM_HOME checks the model's ONNX graph in a child process,
so torch's memory is given back instead of staying resident for the daemon's life (issue 26)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from engram.core.settings import Settings
from engram.server.daemon import stop_daemon
from tests.conftest import wait_until

REPO = Path(__file__).resolve().parents[2]


def rss_kb(pid: int) -> int:
    return int(Path(f"/proc/{pid}/status").read_text().split("VmRSS:")[1].split()[0])


@pytest.mark.model
def test_a_first_daemon_does_not_keep_torch_resident():
    """Two homes on one new model cache (ENGRAM_MODEL_CACHE), their first daemons started at once:
    one checks the graph in a child process, the other waits for it and opens what it checked;
    neither keeps torch."""
    root = Path(tempfile.mkdtemp(prefix="egf", dir="/tmp"))  # short: the daemons' sockets live in it
    homes = [root / "a", root / "b"]
    try:
        env = {k: v for k, v in os.environ.items() if k != "ENGRAM_MODEL_CACHE"}  # not the suite's cache
        env.update(HF_HUB_OFFLINE="1", ENGRAM_MODEL_CACHE=str(root / "cache"))
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "engram.cli", "stats"],
                env={**env, "ENGRAM_HOME": str(h)},
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for h in homes
        ]
        errs = [p.communicate(timeout=600)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], errs
        # A first start on a new cache answers before its model has loaded (issue 46), and loads it after.
        logs = wait_until(
            lambda: (
                (ls := [(h / "daemon.log").read_text() for h in homes])
                and all("embedding model loaded" in log for log in ls)
                and ls
            ),
            timeout=600,
            what="both daemons to load the model",
        )
        assert sum("checked in a child process" in log for log in logs) == 1, logs
        assert sum("checked by another process" in log for log in logs) == 1, logs
        for h in homes:
            pid = int((h / "engram.lock").read_text().split()[0])
            assert not any(m.startswith("libtorch") for m in _modules(pid))  # torch never imported
            # ~880 MB with torch loaded, ~265 MB without (benchmarks/HISTORY.md); the bound leaves room.
            assert rss_kb(pid) < 500_000
    finally:
        for h in homes:
            stop_daemon(Settings.from_env({"ENGRAM_HOME": str(h)}))
        shutil.rmtree(root, ignore_errors=True)


def _modules(pid: int) -> list[str]:
    """The shared libraries mapped into the process (torch's libtorch*.so when it was imported)."""
    names = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        path = line.split()[-1] if "/" in line else ""
        if path.endswith(".so") or ".so." in path:
            names.add(Path(path).name)
    return sorted(names)
