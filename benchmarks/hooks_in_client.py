"""engram's hooks as the real Claude Code sees them: each hook's wall time from Claude Code's own
debug log ("Hooks: SessionStart:startup [...] finished with status 0 (N ms)"), over scripted sessions
against the fake Messages API, with the daemon warm (running) and cold (stopped before the session).

    .venv/bin/python -m benchmarks.hooks_in_client --runs 10 --cold-runs 5

Needs the clients from npm (see tests/e2e/clients/package.json). Stops the daemon it started.
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

HOOK_LINE = re.compile(r"Hooks: (\w+)(?::\w+)? \[(.*?)\] finished with status (\d+) \((\d+)ms\)")
# No-op hooks measured the same way: what Claude Code's own spawning costs, and a bare interpreter's start.
BASELINES = {"true": "no-op", f"{sys.executable} -c pass": "python -c pass"}
LOG_LINE = re.compile(r"^\S+ claude-code (\w+) pid=\d+ (\w+) (\d+)ms")  # engram's own hooks.log


def hook_log(engram_home: Path) -> list[str]:
    try:
        return (engram_home / "hooks.log").read_text().splitlines()
    except FileNotFoundError:
        return []


def session(repo: Path, prompt: str, script: list, client_home: Path, engram_home: Path) -> dict[str, list[int]]:
    """One `claude -p` session: the ms of each engram hook as Claude Code logged it, per event, and
    as the hook itself logged it (`log:EVENT`, with its status), which covers SessionEnd too (Claude
    Code logs no duration for it)."""
    debug = client_home / ".claude" / "debug"
    logged = len(hook_log(engram_home))
    before = set(debug.glob("*.txt")) if debug.exists() else set()
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
        p = subprocess.run(
            [
                str(client_bin("claude")),
                "-p",
                prompt,
                "--debug",
                "hooks",
                "--allowedTools",
                "Bash,Write,TaskCreate,TaskUpdate",
            ],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if p.returncode != 0:
            raise SystemExit(f"claude failed: {p.stderr[-2000:]}")
    new = sorted(set(debug.glob("*.txt")) - before)
    out: dict[str, list[int]] = {}
    for f in new:
        for m in HOOK_LINE.finditer(f.read_text(errors="replace")):
            if (" hook " in m.group(2) and "engram" in m.group(2)) or m.group(2) in BASELINES:
                assert m.group(3) == "0", m.group(0)
                out.setdefault(m.group(1), []).append(int(m.group(4)))
    for line in hook_log(engram_home)[logged:]:
        m = LOG_LINE.match(line)
        if m:
            out.setdefault(f"log:{m.group(1)} {m.group(2)}", []).append(int(m.group(3)))
    return out


def pct(xs: list[int], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10, help="warm sessions")
    ap.add_argument("--cold-runs", type=int, default=5, help="sessions started with no daemon running")
    ap.add_argument("--baseline-runs", type=int, default=10, help="sessions whose hooks are no-ops")
    ap.add_argument("--json", help="write the samples here")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="engram-hooks-bench-"))
    engram_home, client_home = root / "engram-home", root / "client-home"
    repo = git_repo(root / "ledger", "https://github.com/acme/ledger.git")
    r = engram_cli("hooks", "install", "claude-code", "--scope", "project", cwd=repo, env=engram_env(engram_home))
    assert r.returncode == 0, r.stderr
    samples: dict[str, dict[str, list[int]]] = {"first": {}, "work": {}, "warm": {}, "cold": {}}
    base = git_repo(root / "baseline", "https://github.com/acme/baseline.git")
    (base / ".claude").mkdir()
    for command, label in BASELINES.items():
        (base / ".claude" / "settings.json").write_text(
            json.dumps(
                {
                    "hooks": {
                        e: [{"hooks": [{"type": "command", "command": command, "timeout": 30}]}]
                        for e in ("SessionStart", "UserPromptSubmit")
                    }
                }
            )
        )
        samples[label] = {}
        for _ in range(a.baseline_runs):
            for event, ms in session(base, "hello", [[text("ok")]], client_home, engram_home).items():
                samples[label].setdefault(event, []).extend(ms)
    try:
        # A session that leaves a task, a todo list and a failure, so later starts have a block to inject.
        work = [
            [tool("TaskCreate", subject="Parse the CSV header", description="header", activeForm="Parsing")],
            [tool("Write", file_path=str(repo / "ledger_import.py"), content="import csv\n")],
            [tool("Bash", command="python3 -c 'import ledger_csv_dialects'", description="check")],
            [text("Stopping.")],
        ]
        # The very first session of a new ENGRAM_HOME (no daemon ever started: model check and load).
        samples["first"] = session(repo, "Add CSV import", list(work), client_home, engram_home)
        # The same work with the daemon up, as when engram's MCP server started it.
        samples["work"] = session(repo, "Add CSV import", list(work), client_home, engram_home)
        for kind, n in (("warm", a.runs), ("cold", a.cold_runs)):
            for _ in range(n):
                if kind == "cold":
                    stop_daemon(engram_home)
                got = session(repo, "Carry on with the CSV import", [[text("ok")]], client_home, engram_home)
                for event, ms in got.items():
                    samples[kind].setdefault(event, []).extend(ms)
    finally:
        stop_daemon(engram_home)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.2f}")
    print(f"{'hooks':<14} {'event':<26} {'n':>3} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7}")
    for kind, events in samples.items():
        for event, xs in sorted(events.items()):
            print(
                f"{kind:<14} {event:<26} {len(xs):>3} {statistics.median(xs):>7.0f} {pct(xs, 0.95):>7.0f} {max(xs):>7}"
            )
    if a.json:
        Path(a.json).write_text(json.dumps(samples, indent=2))


if __name__ == "__main__":
    main()
