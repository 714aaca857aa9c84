"""Per-turn capture as the real Claude Code sees it: what the turn's end waits for the Stop hook
(Claude Code's debug log: "Hooks: Stop [...] moved to the background (N ms)" for the asynchronous
entry `hooks install` writes; "finished with status 0 (N ms)" when made synchronous to compare),
and what the detached capture itself took (engram's hooks.log, "Stop:capture" / "SessionEnd:capture").

    .venv/bin/python -m benchmarks.capture_in_client --runs 10

Each session runs a failing command, edits the file and runs it again (one error -> fix, one turn)
against the scripted Messages API. Needs the clients from npm (tests/e2e/clients/package.json).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from clients_support import client_bin, engram_cli, engram_env, git_repo, stop_daemon  # noqa: E402
from model_fakes import FakeAnthropic, text, tool  # noqa: E402

STOP_LINE = re.compile(r"Hooks: Stop \[(.*?)\] (?:moved to the background|finished with status \d+) \((\d+)ms\)")
CAPTURE_LINE = re.compile(r"^\S+ claude-code (\w+):capture pid=\d+ (\w+) (\d+)ms")


def session(repo: Path, i: int, client_home: Path, engram_home: Path) -> tuple[list[int], float]:
    """One `claude -p` session; the Stop hook's waits as Claude Code logged them, and the wall time."""
    debug = client_home / ".claude" / "debug"
    before = set(debug.glob("*.txt")) if debug.exists() else set()
    name = f"totals_{i}.py"
    (repo / name).write_text('T = {"total": 3}\nprint(T["sum"])\n')
    script = [
        [tool("Bash", command=f"python3 {name}", description="run")],
        [
            tool(
                "Edit",
                file_path=str(repo / name),
                old_string='print(T["sum"])',
                new_string='print(T.get("sum", T["total"]))',
            )
        ],
        [tool("Bash", command=f"python3 {name}", description="run again")],
        [text("Fixed.")],
    ]
    with FakeAnthropic(script) as fake:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(client_home),
            "ANTHROPIC_BASE_URL": fake.url,
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "ENABLE_TOOL_SEARCH": "false",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            **engram_env(engram_home),
        }
        start = time.monotonic()
        p = subprocess.run(
            [
                str(client_bin("claude")),
                "-p",
                "Make the totals script work",
                "--debug",
                "hooks",
                "--allowedTools",
                "Bash,Edit",
            ],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        wall = time.monotonic() - start
        if p.returncode != 0:
            raise SystemExit(f"claude failed: {p.stderr[-2000:]}")
    waits = [
        int(m.group(2))
        for f in sorted(set(debug.glob("*.txt")) - before)
        for m in STOP_LINE.finditer(f.read_text(errors="replace"))
        if "engram" in m.group(1)
    ]
    return waits, wall


def pct(xs: list, q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))] if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10, help="sessions per configuration")
    ap.add_argument("--sync", action="store_true", help="also run with the Stop entry made synchronous")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="engram-capture-bench-"))
    rows = []
    try:
        for mode in ("async", "sync") if a.sync else ("async",):
            engram_home, client_home = root / f"eh-{mode}", root / f"ch-{mode}"
            repo = git_repo(root / f"ledger-{mode}", "https://github.com/acme/ledger.git")
            r = engram_cli(
                "hooks", "install", "claude-code", "--scope", "project", cwd=repo, env=engram_env(engram_home)
            )
            assert r.returncode == 0, r.stderr
            if mode == "sync":
                path = repo / ".claude" / "settings.json"
                doc = json.loads(path.read_text())
                for g in doc["hooks"]["Stop"]:
                    for h in g["hooks"]:
                        h.pop("async", None)
                path.write_text(json.dumps(doc))
            session(repo, -1, client_home, engram_home)  # starts the daemon: not counted
            waits, walls = [], []
            for i in range(a.runs):
                w, wall = session(repo, i, client_home, engram_home)
                waits += w
                walls.append(wall)
            log = (engram_home / "hooks.log").read_text().splitlines()
            caps = [m for m in (CAPTURE_LINE.match(ln) for ln in log) if m]
            took = [int(m.group(3)) for m in caps]
            stop_daemon(engram_home)
            rows.append((mode, waits, walls, took, sum(m.group(2) == "ok" for m in caps), len(caps)))
    finally:
        for mode in ("async", "sync"):
            if (root / f"eh-{mode}").exists():
                stop_daemon(root / f"eh-{mode}")
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.2f}")
    for mode, waits, walls, took, ok, n in rows:
        print(
            f"{mode}: Stop wait n={len(waits)} p50={statistics.median(waits) if waits else 'nan'} ms "
            f"p95={pct(waits, 0.95)} ms; session wall p50={statistics.median(walls):.2f} s; "
            f"detached captures ok {ok}/{n}, p50={statistics.median(took) if took else 'nan'} ms "
            f"p95={pct(took, 0.95)} ms"
        )


if __name__ == "__main__":
    main()
