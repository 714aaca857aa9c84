"""Two real stdio MCP servers race to claim one task, round after round; then a holder is killed
(SIGKILL) and, separately, frozen (SIGSTOP), and the time until the other can claim is measured.

Each of the two clients is `python -m engram` driven through the MCP SDK's stdio client, in one
temporary ENGRAM_HOME (so one daemon, one store). Every round: a new task; both send
claim_task at once; exactly one must win, and the loser's error must name the winner's session.
Then the holder of a last task is killed with SIGKILL: the daemon sees its connection drop and
ends the session as interrupted, so its claim lapses at once (the figure is the time from the
kill to the survivor's successful claim, polled every 20 ms). Then a holder is frozen with
SIGSTOP: its connection stays open, its heartbeats stop, and its claim lapses after
ENGRAM_CLAIM_TIMEOUT seconds of silence (set to --claim-timeout here, so the run stays short).

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.claims_race [--rounds 100] [--results]

--results adds the figures, the command and the date to benchmarks/RESULTS.md, in its place for
work in progress (above the link to the history).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from engram.core.settings import Settings
from engram.server.daemon import stop_or_kill

TIMEOUT = 180  # the first call may wait for the daemon to load the embedding model
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
# The line that closes RESULTS.md: new sections go just above it, below the table of today's figures.
HISTORY_LINK = "The history of every figure"
POLL_S = 0.02


def engram_env(home: Path, claim_timeout: float) -> dict[str, str]:
    return {
        **os.environ,
        "ENGRAM_HOME": str(home),
        "ENGRAM_USER": "racer",
        "HF_HUB_OFFLINE": "1",
        "ENGRAM_TORCH_THREADS": "1",
        "ENGRAM_CLAIM_TIMEOUT": str(claim_timeout),
    }


def child_pids() -> set[int]:
    """Direct children of this process (Linux /proc): how the stdio server the SDK spawned is found."""
    me, out = os.getpid(), set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == me:
                out.add(int(stat.parent.name))
    return out


@contextlib.asynccontextmanager
async def server(home: Path, claim_timeout: float):
    """(client, pid of its stdio server process)."""
    before = child_pids()
    params = StdioServerParameters(command=sys.executable, args=["-m", "engram"], env=engram_env(home, claim_timeout))
    async with Client(params, read_timeout_seconds=TIMEOUT) as c:
        await c.call_tool("memory_stats", {})  # the daemon is up and this session registered
        (pid,) = child_pids() - before
        yield c, pid


async def claim(c: Client, task_id: str) -> tuple[bool, Any]:
    """(won, the claim or the error text)."""
    r = await c.call_tool("claim_task", {"task_id": task_id})
    return (False, r.content[0].text) if r.is_error else (True, r.structured_content["claim"])


async def race_round(a: Client, b: Client, task_id: str) -> dict:
    got: dict[str, tuple[bool, Any]] = {}

    async def one(name: str, c: Client) -> None:
        got[name] = await claim(c, task_id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "a", a)
        tg.start_soon(one, "b", b)
    winners = [n for n, (won, _) in got.items() if won]
    out: dict[str, Any] = {"winners": winners}
    if len(winners) == 1:
        w, loser = winners[0], "b" if winners[0] == "a" else "a"
        out["named"] = f"held by session {got[w][1]['session_id']} (stdio)" in got[loser][1]
        out["error"] = got[loser][1]
    return out


async def until_claimed(c: Client, task_id: str, limit_s: float) -> float | None:
    """Seconds until c's claim succeeds, polling; None if it did not within limit_s."""
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        if (await claim(c, task_id))[0]:
            return time.monotonic() - start
        await anyio.sleep(POLL_S)
    return None


async def lapse_after(home: Path, claim_timeout: float, how: signal.Signals) -> float | None:
    """A fresh holder process claims a task, gets `how`, and the survivor polls for the claim."""
    async with server(home, claim_timeout) as (survivor, _):
        task = (await survivor.call_tool("create_task", {"name": f"lapse after {how.name}"})).structured_content
        stack = contextlib.AsyncExitStack()
        holder, pid = await stack.enter_async_context(server(home, claim_timeout))
        try:
            assert (await claim(holder, task["task_id"]))[0]
            assert not (await claim(survivor, task["task_id"]))[0]
            os.kill(pid, how)
            took = await until_claimed(survivor, task["task_id"], limit_s=claim_timeout * 3 + 30)
        finally:
            if how == signal.SIGSTOP:
                os.kill(pid, signal.SIGKILL)  # a frozen process would never read its closed stdin
            with contextlib.suppress(Exception):
                await stack.aclose()
        return took


async def run(home: Path, rounds: int, claim_timeout: float) -> dict:
    async with server(home, claim_timeout) as (a, _), server(home, claim_timeout) as (b, _):
        results = []
        for i in range(rounds):
            t = (await a.call_tool("create_task", {"name": f"race {i}"})).structured_content["task_id"]
            results.append(await race_round(a, b, t))
    killed = await lapse_after(home, claim_timeout, signal.SIGKILL)
    frozen = await lapse_after(home, claim_timeout, signal.SIGSTOP)
    wins = Counter(w for r in results for w in r["winners"])
    return {
        "rounds": rounds,
        "one_winner": sum(len(r["winners"]) == 1 for r in results),
        "loser_named_winner": sum(bool(r.get("named")) for r in results),
        "wins_a": wins["a"],
        "wins_b": wins["b"],
        "claim_timeout_s": claim_timeout,
        "lapse_after_sigkill_s": killed,
        "lapse_after_sigstop_s": frozen,
        "sample_error": next((r["error"] for r in results if r.get("error")), None),
    }


def markdown(r: dict, command: str) -> str:
    def s(x: float | None) -> str:
        return "did not lapse" if x is None else f"{x:.2f} s"

    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = [
        ("rounds (a new task each, both servers send claim_task at once)", r["rounds"]),
        ("rounds with exactly one winner", r["one_winner"]),
        ("rounds where the loser's error named the winner's session", r["loser_named_winner"]),
        ("wins of server a / server b", f"{r['wins_a']} / {r['wins_b']}"),
        (
            "holder SIGKILLed: time until the other server's claim succeeds",
            f"{s(r['lapse_after_sigkill_s'])} (the daemon sees the connection drop; polled every "
            f"{POLL_S * 1000:.0f} ms)",
        ),
        (
            f"holder SIGSTOPped (connection open, heartbeats stop), ENGRAM_CLAIM_TIMEOUT={r['claim_timeout_s']:g}",
            s(r["lapse_after_sigstop_s"]),
        ),
    ]
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    return (
        f"\n## Issue 25: task claims, two stdio MCP servers racing\n\n"
        f"{when}, load average {os.getloadavg()[0]:.1f} (2 cores shared with other engineers).\n\n"
        f"```\n{command}\n```\n\n| what | figure |\n|---|---|\n{table}\n\n"
        f"A loser's error, as the calling model reads it: `{r['sample_error']}`\n"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--claim-timeout", type=float, default=3.0, help="ENGRAM_CLAIM_TIMEOUT of the servers")
    p.add_argument("--results", action="store_true", help="add the figures to benchmarks/RESULTS.md")
    a = p.parse_args()
    home = Path(tempfile.mkdtemp(prefix="engram-claims-"))
    try:
        r = anyio.run(run, home, a.rounds, a.claim_timeout)
    finally:
        stop_or_kill(Settings.from_env({"ENGRAM_HOME": str(home)}))
    print(json.dumps(r, indent=1))
    if a.results:
        command = "HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.claims_race " + " ".join(sys.argv[1:])
        add_section(markdown(r, command))


def add_section(text: str) -> None:
    """Puts a section in RESULTS.md just above the link to the history, where work in progress goes."""
    page = RESULTS.read_text(encoding="utf-8")
    at = page.index(HISTORY_LINK)
    RESULTS.write_text(page[:at] + text.lstrip("\n") + "\n" + page[at:], encoding="utf-8")


if __name__ == "__main__":
    main()
