"""`engram hook` as the client sees it: wall time of each hook run as a real command (issue 26).

    python -m benchmarks.hooks_bench [--runs 20] [--out FILE.json]

In a fresh ENGRAM_HOME holding the checked ONNX graph (made once at the start by a first daemon,
whose resident memory is reported too), with a task and a few memories stored:
- session start, warm daemon: SessionStart with the daemon running;
- session start, cold daemon: SessionStart after `engram stop`, so the hook starts the daemon;
- per prompt, warm: UserPromptSubmit, a prompt a memory answers and one none does, alternating;
- checkpoint of a 20 MB Claude Code transcript: SessionEnd (the transcript read in one pass,
  git, and the daemon storing it; each run's transcript ends with a new request, so each stores).
Each figure is the wall time of the whole `engram hook` process (interpreter start included),
p50 and p95 over the runs. Prints JSON; --out writes it too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ENGRAM = [sys.executable, "-m", "engram.cli"]


def run(home: Path, *argv: str, stdin: str = "", cwd: Path | None = None) -> tuple[float, subprocess.CompletedProcess]:
    """The command in `cwd`: what it stores belongs to that directory's project (docs/projects.md)."""
    env = {**os.environ, "ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    t = time.perf_counter()
    r = subprocess.run(
        [*ENGRAM, *argv], input=stdin, capture_output=True, text=True, env=env, check=False, timeout=600, cwd=cwd
    )
    return time.perf_counter() - t, r


def pct(xs: list[float]) -> dict:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    return {
        "runs": len(xs),
        "p50_ms": round(statistics.median(xs) * 1000, 1),
        "p95_ms": round(p95 * 1000, 1),
        "min_ms": round(xs[0] * 1000, 1),
        "max_ms": round(xs[-1] * 1000, 1),
    }


def rss_kb(pid: int) -> int:
    return int(Path(f"/proc/{pid}/status").read_text().split("VmRSS:")[1].split()[0])


def big_transcript(path: Path, repo: Path, task: str, target_bytes: int) -> None:
    """A Claude Code 2.1-shaped transcript of about target_bytes: many turns of edits, commands
    with long outputs and todo updates, as a long session writes."""

    def entry(kind: str, content) -> str:
        return (
            json.dumps(
                {
                    "type": kind,
                    "uuid": "u",
                    "sessionId": "bench",
                    "cwd": str(repo),
                    "message": {"role": kind, "content": content},
                }
            )
            + "\n"
        )

    out = "x" * 4000
    with path.open("w") as f:
        f.write(entry("user", "Refactor the client and keep the tests green"))
        f.write(
            entry(
                "assistant",
                [{"type": "tool_use", "id": "t0", "name": "mcp__engram__resume_task", "input": {"task_id": task}}],
            )
        )
        f.write(entry("user", [{"type": "tool_result", "tool_use_id": "t0", "content": "{}"}]))
        i = 0
        while f.tell() < target_bytes:
            i += 1
            f.write(
                entry(
                    "assistant",
                    [
                        {
                            "type": "tool_use",
                            "id": f"e{i}",
                            "name": "Edit",
                            "input": {
                                "file_path": f"{repo}/src/mod{i % 40}.py",
                                "old_string": out[:500],
                                "new_string": out[:600],
                            },
                        }
                    ],
                )
            )
            f.write(entry("user", [{"type": "tool_result", "tool_use_id": f"e{i}", "content": "updated"}]))
            f.write(
                entry(
                    "assistant",
                    [
                        {
                            "type": "tool_use",
                            "id": f"b{i}",
                            "name": "Bash",
                            "input": {"command": f"pytest -q tests/test_mod{i % 40}.py"},
                        }
                    ],
                )
            )
            failed = i % 7 == 0
            f.write(
                entry(
                    "user",
                    [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"b{i}",
                            "is_error": failed,
                            "content": ("Exit code 1\n" if failed else "") + out,
                        }
                    ],
                )
            )
            if i % 25 == 0:
                todos = [
                    {"content": f"Step {k}", "status": "completed" if k < i // 25 else "pending", "activeForm": "x"}
                    for k in range(12)
                ]
                f.write(
                    entry(
                        "assistant",
                        [{"type": "tool_use", "id": f"w{i}", "name": "TodoWrite", "input": {"todos": todos}}],
                    )
                )
                f.write(entry("user", [{"type": "tool_result", "tool_use_id": f"w{i}", "content": "ok"}]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--transcript-mb", type=float, default=20.0)
    ap.add_argument("--out")
    a = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ehb", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="ehb-work"))
    result: dict = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_before": os.getloadavg(),
        "runs": a.runs,
    }
    try:
        repo = work / "repo"
        (repo / "src").mkdir(parents=True)
        git = ["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a"]
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        (repo / "src" / "a.py").write_text("a\n")
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-qm", "init"], check=True)
        (repo / "src" / "a.py").write_text("b\n")

        # The first daemon of a new home: it checks the ONNX graph (in a child process).
        t, r = run(home, "--json", "task", "create", "Client refactor", "--goal", "keep tests green", cwd=repo)
        assert r.returncode == 0, r.stderr
        task = json.loads(r.stdout)["task_id"]
        pid = int((home / "engram.lock").read_text().split()[0])
        result["first_daemon"] = {"wall_s": round(t, 1), "rss_kb": rss_kb(pid)}
        for text in [
            "The HTTP client retries with exponential backoff capped at 30 seconds",
            "Deploys go to Fly.io from the main branch every Thursday",
            "Tests run with pytest -q; the integration ones need DATABASE_URL",
        ]:
            run(home, "remember", text, cwd=repo)
        small = work / "small.jsonl"
        big_transcript(small, repo, task, 200_000)
        start = json.dumps(
            {"session_id": "b0", "cwd": str(repo), "hook_event_name": "SessionStart", "source": "startup"}
        )
        run(
            home,
            "hook",
            "SessionEnd",
            stdin=json.dumps({"session_id": "b0", "cwd": str(repo), "transcript_path": str(small), "reason": "other"}),
        )

        warm = []
        for _ in range(a.runs):
            t, r = run(home, "hook", "SessionStart", stdin=start)
            assert r.returncode == 0 and "additionalContext" in r.stdout, r
            warm.append(t)
        result["session_start_warm"] = pct(warm)

        cold = []
        for _ in range(max(3, a.runs // 2)):
            run(home, "stop")
            t, r = run(home, "hook", "SessionStart", stdin=start)
            assert r.returncode == 0 and "additionalContext" in r.stdout, (r.stdout, r.stderr)
            cold.append(t)
        result["session_start_cold"] = pct(cold)

        prompts = ["How should the HTTP client back off when it retries?", "write a haiku about autumn"]
        per = {p: [] for p in prompts}
        for i in range(a.runs * 2):
            p = prompts[i % 2]
            t, r = run(
                home, "hook", "UserPromptSubmit", stdin=json.dumps({"session_id": "b1", "cwd": str(repo), "prompt": p})
            )
            assert r.returncode == 0
            assert ("additionalContext" in r.stdout) == (i % 2 == 0), (p, r.stdout)
            per[p].append(t)
        result["prompt_warm_relevant"] = pct(per[prompts[0]])
        result["prompt_warm_nothing_relevant"] = pct(per[prompts[1]])
        # The same interpreter start doing nothing (an unknown event): what the hook itself adds.
        base = []
        for _ in range(a.runs):
            t, _ = run(home, "hook", "Notification", stdin="{}")
            base.append(t)
        result["process_baseline_no_op"] = pct(base)

        big = work / "big.jsonl"
        big_transcript(big, repo, task, int(a.transcript_mb * 1024 * 1024))
        result["transcript_bytes"] = big.stat().st_size
        cps = []
        for i in range(max(3, a.runs // 2)):
            with big.open("a") as f:  # a new request each time: each checkpoint stores
                ask = {"type": "user", "message": {"role": "user", "content": f"and now step {i}"}}
                f.write(json.dumps(ask) + "\n")
            end = {"session_id": f"c{i}", "cwd": str(repo), "transcript_path": str(big), "reason": "other"}
            t, r = run(home, "hook", "SessionEnd", stdin=json.dumps(end))
            assert r.returncode == 0
            cps.append(t)
        log = (home / "hooks.log").read_text().splitlines()
        stored = [line for line in log[-len(cps) :] if " ok " in line and "stored nothing" not in line]
        assert len(stored) == len(cps), log[-3:]
        result["checkpoint_20mb"] = pct(cps)
        result["load_after"] = os.getloadavg()
    finally:
        run(home, "stop")
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
