"""Error -> fix: is the pitfall captured from a session brought back when its error comes back?

Each case of tests/data/fixes/specs.json is read from its transcript (rendered for one client by
tests/support/fix_transcripts.py) exactly as the Stop hook reads it (engram.hooks.turn_capture), the
fix it yields is stored as the daemon stores it (engram.workflows.capture.session_capture), all
cases of a client in one project so each is a distractor for the others; then the case's
recurrence (`recur`) is asked as recall_memory would (top 3) and as the per-prompt injection
would (lifecycle.prompt_memories). Usage:

    python -m benchmarks.fix_recall [--client claude-code|codex|gemini] [--model all-MiniLM-L6-v2]
    python -m benchmarks.fix_recall --throughput 60   # the reading's speed on one long transcript
    python -m benchmarks.fix_recall --noise           # unrelated prompts get nothing captured injected
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from tests.support.fix_transcripts import HERE as DATA
from tests.support.fix_transcripts import ROOT, captured_fix, cases

PROJECT = "example.com/fixes"


def measure(eng: Any, client: str, top: int = 3) -> dict:
    """Store every case's fix, then ask for each with its recurrence: the share found in the top
    `top` of recall and injected with the prompt, per split, and the cases missed."""
    from engram.core.types import Scope
    from engram.workflows.capture import session_capture
    from engram.workflows.lifecycle import prompt_memories

    keys = {}
    for case in cases():
        fix = captured_fix(client, case)
        if fix is not None:
            session_capture(eng, None, f"{client}:{case['id']}", client, [fix.to_dict()], [], None, PROJECT)
            keys[case["id"]] = f"fix:{fix.key}"
    out: dict[str, Any] = {"client": client, "cases": len(cases()), "captured": len(keys), "splits": {}}
    for case in cases():
        split = out["splits"].setdefault(case["split"], {"n": 0, "top": 0, "injected": 0, "missed": []})
        split["n"] += 1
        key = keys.get(case["id"])
        hits = eng.recall(case["recur"], limit=top, scope=Scope.of(PROJECT), reinforce=False)
        found = key is not None and any(key in h.memory.tags for h in hits)
        shown = prompt_memories(eng, None, case["recur"], 300, 3, PROJECT)
        injected = key is not None and any(key in eng.get(m).tags for m in shown["memory_ids"])
        split["top"] += found
        split["injected"] += injected
        if not found:
            split["missed"].append(case["id"])
    for split in out["splits"].values():
        split[f"top{top}_rate"] = round(split["top"] / split["n"], 3)
        split["injected_rate"] = round(split["injected"] / split["n"], 3)
    return out


def noise(eng: Any, client: str) -> dict:
    """After every case's session is captured (its fix and its turn, through the transcript as
    the hook reads it), the share of unrelated prompts that get nothing captured injected."""
    from engram.admin.stats import memory_stats
    from engram.hooks.turn_capture import read_new_events, turns_of
    from engram.workflows.capture import session_capture
    from engram.workflows.lifecycle import prompt_memories

    before = memory_stats(eng)["disk_bytes"]
    for case in cases():
        events, _ = read_new_events(DATA / client / f"{case['id']}.jsonl", client, {"offset": 0, "events": 0})
        fix = captured_fix(client, case)
        turns, _ = turns_of(events, None)
        session_capture(
            eng, None, f"{client}:{case['id']}", client, [fix.to_dict()] if fix else [], turns, None, PROJECT
        )
    stats = memory_stats(eng)
    grown = (stats["disk_bytes"] or 0) - (before or 0)  # the file and its write-ahead log
    prompts = json.loads((DATA / "unrelated_prompts.json").read_text(encoding="utf-8"))["prompts"]
    leaked = []
    for p in prompts:
        shown = prompt_memories(eng, None, p, 300, 3, PROJECT)
        captured = [m for m in shown["memory_ids"] if "auto-capture" in eng.get(m).tags]
        if captured:
            leaked.append(p)
    return {
        "client": client,
        "sessions": len(cases()),
        "captured": stats["captured"],
        "disk_bytes_per_session": round(grown / len(cases())),
        "prompts": len(prompts),
        "nothing_injected_rate": round(1 - len(leaked) / len(prompts), 3),
        "leaked": leaked,
    }


def throughput(client: str, sessions: int) -> dict:
    """How fast the hook's reading finds the fixes and turns of one long transcript: every case's
    session, one after another, `sessions` times over, read in one pass."""
    import time

    from engram.continuity.fixes import FixTracker
    from engram.hooks.turn_capture import fixes_in, read_new_events, turns_of

    text = "".join((DATA / client / f"{c['id']}.jsonl").read_text(encoding="utf-8") for c in cases())
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "long.jsonl"
        path.write_text(text * sessions, encoding="utf-8")
        start = time.perf_counter()
        events, _ = read_new_events(path, client, {"offset": 0, "events": 0})
        fixes = fixes_in(events, FixTracker(root=ROOT), ROOT)
        turns, _ = turns_of(events, None)
        took = time.perf_counter() - start
        size = path.stat().st_size
    return {
        "client": client,
        "bytes": size,
        "events": len(events),
        "turns": len(turns),
        "fixes": len(fixes),
        "seconds": round(took, 3),
        "mb_per_s": round(size / took / 1e6, 2),
        "turns_per_s": round(len(turns) / took),
    }


def hook_wait(runs: int) -> dict:
    """What the client waits for at the end of a turn: `engram hook Stop --client claude-code`
    run as the client runs it (a new process, the turn's JSON on stdin), timed from start to
    exit; the capture itself goes on in the process it detaches."""
    import os
    import statistics
    import subprocess
    import sys
    import time

    case = DATA / "claude-code" / f"{cases()[0]['id']}.jsonl"
    waits, bare = [], []
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "ENGRAM_HOME": home}
        try:
            for i in range(runs):
                payload = json.dumps(
                    {"session_id": f"s{i}", "transcript_path": str(case), "cwd": home, "hook_event_name": "Stop"}
                )
                start = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "engram.cli", "hook", "Stop", "--client", "claude-code"],
                    input=payload.encode(),
                    env=env,
                    capture_output=True,
                    check=True,
                    timeout=60,
                )
                waits.append((time.perf_counter() - start) * 1000)
                # An interpreter that does nothing, timed the same way right after: the floor.
                start = time.perf_counter()
                subprocess.run([sys.executable, "-c", "pass"], env=env, capture_output=True, check=True, timeout=60)
                bare.append((time.perf_counter() - start) * 1000)
        finally:
            subprocess.run([sys.executable, "-m", "engram.cli", "stop"], env=env, capture_output=True, timeout=60)
    waits.sort()
    bare.sort()
    return {
        "runs": runs,
        "p50_ms": round(statistics.median(waits)),
        "p95_ms": round(waits[int(0.95 * (runs - 1))]),
        "max_ms": round(waits[-1]),
        "python_c_pass_p50_ms": round(statistics.median(bare)),
        "python_c_pass_p95_ms": round(bare[int(0.95 * (runs - 1))]),
        "load": round(os.getloadavg()[0], 1),
    }


def main(argv: list[str] | None = None) -> int:
    from engram import Engram, Settings
    from engram.models.embedding import load_embedder

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--client", choices=("claude-code", "codex", "gemini"), action="append")
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument(
        "--throughput", type=int, metavar="N", help="only time reading one transcript of N x every case's session"
    )
    ap.add_argument("--hook-wait", type=int, metavar="N", help="only time N runs of the Stop hook's command")
    ap.add_argument("--noise", action="store_true", help="unrelated prompts after every session is captured")
    args = ap.parse_args(argv)
    if args.hook_wait:
        print(json.dumps(hook_wait(args.hook_wait)))
        return 0
    if args.throughput:
        for client in args.client or ["claude-code", "codex", "gemini"]:
            print(json.dumps(throughput(client, args.throughput)))
        return 0
    embedder = load_embedder(args.model, cache_dir=Settings.from_env().model_cache)
    for client in args.client or ["claude-code", "codex", "gemini"]:
        with tempfile.TemporaryDirectory() as home:
            settings = Settings.from_env(home=Path(home))
            with Engram(Path(home) / "memories.duckdb", settings=settings, embedder=embedder) as eng:
                print(json.dumps(noise(eng, client) if args.noise else measure(eng, client)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
