"""What the end of a turn waits for engram inside the real Codex (Stop) and Gemini CLI (AfterAgent),
which wait for every hook: the entry `engram hooks install` writes (the fast path, `/bin/sh
engram/hooks/detach.sh` in front of the command) beside the same command run directly, as it was
installed before the fast path.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.turn_wait --runs 10

The end-of-turn entry is wrapped in a shim that times its command from its start until every copy
of its output is closed, which is what the client waits for (the shim's own start, a few ms of sh,
is not counted). Each session runs a failing command, fixes the file and runs it again (one error
-> fix) against the scripted model API on 127.0.0.1; the daemon is warm (a first session is not
counted). Needs the clients from npm (tests/e2e/clients/package.json, or ENGRAM_E2E_NPM).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
os.environ.setdefault("ENGRAM_MODEL_CACHE", str(ROOT / ".cache" / "model_cache"))

from clients_support import captures, engram_cli, engram_env, git_repo, stop_daemon, wait_until  # noqa: E402
from model_fakes import FakeGemini, FakeOpenAI, custom_tool, text, tool  # noqa: E402
from test_client_capture import BUGGY, NEW_LINE, OLD_LINE, RUN, SCRIPT  # noqa: E402

from engram.hooks.plugins import DETACH  # noqa: E402

EVENT = {"codex": "Stop", "gemini": "AfterAgent"}
# Times the command as the client waits for it: until the last copy of its stdout and stderr closes.
SHIM = """#!/bin/sh
log=$1
shift
start=$(date +%s%N)
out=$("$@" 2>&1)
end=$(date +%s%N)
echo $(((end - start) / 1000000)) >>"$log"
[ -z "$out" ] || printf '%s\\n' "$out"
exit 0
"""


def settings_file(client: str, repo: Path, client_home: Path) -> Path:
    return client_home / ".codex" / "hooks.json" if client == "codex" else repo / ".gemini" / "settings.json"


def set_up(client: str, repo: Path, client_home: Path, engram_home: Path, shim: Path, log: Path, fast: bool) -> None:
    """Install the hooks as a user does, then time the end-of-turn entry (without its fast path
    when not `fast`)."""
    if client == "codex":
        from test_codex_cli import set_up as codex_set_up

        codex_set_up(repo, client_home, engram_home, mcp=False)
    else:
        r = engram_cli("hooks", "install", "gemini", "--scope", "project", cwd=repo, env=engram_env(engram_home))
        assert r.returncode == 0, r.stderr
    path = settings_file(client, repo, client_home)
    doc = json.loads(path.read_text())
    for group in doc["hooks"][EVENT[client]]:
        for h in group["hooks"]:
            front = shlex.join(["/bin/sh", str(DETACH)]) + " "
            assert h["command"].startswith(front), h["command"]
            command = h["command"] if fast else h["command"].removeprefix(front)
            h["command"] = f"{shlex.join(['/bin/sh', str(shim), str(log)])} {command}"
    path.write_text(json.dumps(doc, indent=2))
    if client == "codex":
        trust_all(repo, client_home, engram_home)


def trust_all(repo: Path, client_home: Path, engram_home: Path) -> None:
    """Trust the entries as they now are (a changed command is untrusted again in Codex)."""
    from test_codex_cli import AppServer, codex_env

    with AppServer(repo, codex_env(client_home, engram_home)) as app:
        (entry,) = app.call("hooks/list", {"cwds": [str(repo)]})["data"]
        app.call(
            "config/batchWrite",
            {
                "edits": [
                    {
                        "keyPath": "hooks.state",
                        "mergeStrategy": "upsert",
                        "value": {h["key"]: {"trusted_hash": h["currentHash"]} for h in entry["hooks"]},
                    }
                ],
                "reloadUserConfig": True,
            },
        )


def session(client: str, repo: Path, client_home: Path, engram_home: Path) -> float:
    """One unattended session with one error -> fix; its wall time in seconds."""
    (repo / SCRIPT).write_text(BUGGY)
    start = time.monotonic()
    if client == "codex":
        from test_codex_cli import codex, ok

        patch = f"*** Begin Patch\n*** Update File: {SCRIPT}\n@@\n-{OLD_LINE}\n+{NEW_LINE}\n*** End Patch\n"
        script = [
            [tool("exec_command", cmd=RUN)],
            [custom_tool("apply_patch", patch)],
            [tool("exec_command", cmd=RUN)],
            [text("Fixed.")],
        ]
        with FakeOpenAI(script) as fake:
            ok(codex(repo, "Make the totals script work", fake, client_home, engram_home))
    else:
        from test_gemini_cli import gemini, ok

        script = [
            [tool("run_shell_command", command=RUN, description="Print the totals")],
            [
                tool(
                    "replace",
                    file_path=str(repo / SCRIPT),
                    old_string=OLD_LINE,
                    new_string=NEW_LINE,
                    instruction="Fall back to the total",
                )
            ],
            [tool("run_shell_command", command=RUN, description="Print the totals again")],
            [text("Fixed.")],
        ]
        with FakeGemini(script) as fake:
            ok(gemini(repo, "Make the totals script work", fake, client_home, engram_home))
    return time.monotonic() - start


def pct(xs: list, q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))] if xs else float("nan")


def measure(client: str, fast: bool, runs: int, root: Path) -> dict:
    name = f"{client}-{'fast' if fast else 'direct'}"
    engram_home, client_home = root / f"eh-{name}", root / f"ch-{name}"
    repo = git_repo(root / f"ledger-{name}", "https://github.com/acme/ledger.git")
    shim, log = root / "timed.sh", root / f"{name}.ms"
    shim.write_text(SHIM)
    try:
        set_up(client, repo, client_home, engram_home, shim, log, fast)
        session(client, repo, client_home, engram_home)  # starts the daemon: not counted
        log.unlink(missing_ok=True)
        walls = [session(client, repo, client_home, engram_home) for _ in range(runs)]
        waits = [int(x) for x in log.read_text().split()]
        # Every counted turn was captured, fast path or not (the detached work finishes after).
        done = wait_until(lambda: len([c for c in captures(engram_home) if " ok " in c]) >= runs + 1 or None)
    finally:
        stop_daemon(engram_home)
    return {
        "client": client,
        "entry": "fast path (detach.sh)" if fast else "direct (engram hook)",
        "turns": len(waits),
        "p50_ms": statistics.median(waits),
        "p95_ms": pct(waits, 0.95),
        "max_ms": max(waits),
        "session_wall_p50_s": round(statistics.median(walls), 2),
        "captured_ok": bool(done),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="sessions per client and entry")
    ap.add_argument("--client", choices=tuple(EVENT), action="append")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="engram-turn-wait-"))
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.2f}")
    for client in a.client or tuple(EVENT):
        for fast in (False, True):
            print(json.dumps(measure(client, fast, a.runs, root)), flush=True)


if __name__ == "__main__":
    main()
