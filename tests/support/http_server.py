"""engram's HTTP server on a fresh home, and Debian's Chromium through Playwright: the set-up of the
panel's and the HTTP tests (and of scripts/screenshots.py)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.support.daemon import free_port

CHROMIUM = "/usr/bin/chromium"
# Playwright's own browser download does not work offline: Debian's chromium, with what keeps it quiet.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextlib.contextmanager
def serving(home: Path, token: str, extra_env: dict[str, str] | None = None) -> Iterator[tuple[str, dict]]:
    """`engram serve --http` with `token` on `home`; yields (base URL, the environment of that home).
    Stops it, and any daemon left for the home, on the way out."""
    from engram.core.settings import Settings
    from engram.server.daemon import stop_or_kill

    port = free_port()
    env = {
        **os.environ,
        "ENGRAM_HOME": str(home),
        "ENGRAM_TOKEN": token,
        "HF_HUB_OFFLINE": "1",
        "ENGRAM_TORCH_THREADS": "1",
        **(extra_env or {}),
    }
    log = open(home / "serve.log", "wb")  # noqa: SIM115 - closed in the finally below, after the server stops
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram", "serve", "--http", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise RuntimeError("engram serve --http exited:\n" + (home / "serve.log").read_text()[-3000:])
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(base + "/healthz", timeout=5).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("engram serve --http did not come up in 300 s")
            time.sleep(0.3)
        yield base, env
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
        stop_or_kill(Settings.from_env({"ENGRAM_HOME": str(home)}))


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
