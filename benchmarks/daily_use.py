"""Daily use: the first MCP tool call after a cold start and warm, each CLI command's wall time with
no daemon running and then warm, and the idle daemon's resident memory.

    python -m benchmarks.daily_use [--runs 10] [--baseline /path/to/older/checkout] [--out FILE]

Everything runs as a user runs it: `engram` commands as processes, MCP over stdio with the SDK's
client, in a fresh ENGRAM_HOME prepared once by `engram-setup` (which checks the ONNX graph).
"Cold" means no daemon runs for that home when the command starts: the command starts one.
`--baseline` runs the same MCP measurement and the idle RSS against another source tree (put
first on PYTHONPATH), for a before/after in one run. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

BIN = Path(sys.executable).parent
# (label, argv) in the order a day might go; every one runs cold and warm.
COMMANDS = [
    ("version", ["version"]),
    ("stats", ["stats"]),
    ("remember", ["remember", "Benchmark note {i}: the nightly build of service s{i} passed"]),
    ("recall", ["recall", "did the nightly build pass"]),
    ("context", ["context", "nightly build status"]),
    ("task list", ["task", "list"]),
    ("consolidate", ["consolidate"]),
    ("export", ["export", "{home}/export.jsonl"]),
]
WARM_TARGET_S = 0.5  # the bar for a warm command
COLD_MCP_TARGET_S = 3.0  # first tool call after a cold start


def _env(home: Path, src: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    else:
        env.pop("PYTHONPATH", None)
    return env


def _engram(home: Path, *argv: str, src: Path | None = None) -> float:
    """Wall time of one `engram` command (the venv's console script, or `python -m engram.cli`)."""
    cmd = [sys.executable, "-m", "engram.cli", *argv] if src else [str(BIN / "engram"), *argv]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=_env(home, src), cwd=_cwd(home, src), capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"engram {' '.join(argv)} failed: {r.stderr.strip()}")
    return took


def _cwd(home: Path, src: Path | None) -> Path:
    """Where each process runs. `python -m` puts the working directory first on sys.path, ahead of
    PYTHONPATH: the baseline runs in its own tree, ours outside any tree (the installed package)."""
    return src if src is not None else home.parent


def _stop(home: Path, src: Path | None = None) -> None:
    _engram(home, "stop", src=src)


def _daemon_pid(home: Path) -> int | None:
    try:
        return int((home / "engram.lock").read_text().strip())
    except (OSError, ValueError):
        return None


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _p50(xs: list[float]) -> float:
    return statistics.median(xs)


def mcp_first_call(home: Path, src: Path | None = None) -> dict[str, float]:
    """Spawn `engram` as a stdio MCP server, connect, make one store_memory call. Seconds."""
    import anyio
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    cwd = str(_cwd(home, src))
    if src is None:
        params = StdioServerParameters(command=str(BIN / "engram"), args=[], env=_env(home), cwd=cwd)
    else:
        params = StdioServerParameters(command=sys.executable, args=["-m", "engram"], env=_env(home, src), cwd=cwd)

    async def go() -> dict[str, float]:
        t0 = time.perf_counter()
        async with Client(params, read_timeout_seconds=300) as client:
            t1 = time.perf_counter()
            r = await client.call_tool("store_memory", {"content": f"MCP benchmark note {time.time_ns()}"})
            t2 = time.perf_counter()
            if r.is_error:
                raise RuntimeError(f"store_memory failed: {r.content[0].text}")
        return {"connect_s": t1 - t0, "first_call_s": t2 - t1, "total_s": t2 - t0}

    return anyio.run(go)


def _mcp_series(home: Path, runs: int, cold: bool, src: Path | None = None) -> dict[str, float]:
    out: list[dict[str, float]] = []
    for _ in range(runs):
        if cold:
            _stop(home, src)
        else:
            _engram(home, "stats", src=src)  # make sure one runs (a no-op when it does)
        out.append(mcp_first_call(home, src))
    return {k: round(_p50([o[k] for o in out]), 3) for k in out[0]}


def _idle_rss(home: Path, src: Path | None, settle_s: float) -> float:
    _engram(home, "stats", src=src)
    pid = _daemon_pid(home)
    if pid is None:
        raise RuntimeError("no daemon pid after a command")
    time.sleep(settle_s)  # idle: no client; let allocator and threads settle
    return round(_rss_mb(pid), 1)


def _code(home: Path, src: Path | None) -> str:
    """Which engram the runs import (so a baseline that silently ran this tree shows)."""
    r = subprocess.run(
        [sys.executable, "-c", "import engram; print(engram.__file__)"],
        env=_env(home, src),
        cwd=_cwd(home, src),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return r.stdout.strip()


def _prepare(home: Path, src: Path | None) -> float:
    """engram-setup as after an install (makes and checks the ONNX graph); returns its wall time."""
    cmd = [sys.executable, "-m", "engram.setup_command"] if src else [str(BIN / "engram-setup")]
    t0 = time.perf_counter()
    r = subprocess.run(
        cmd + ["--json"], env=_env(home, src), cwd=_cwd(home, src), capture_output=True, text=True, timeout=900
    )
    if r.returncode != 0:
        raise RuntimeError(f"engram-setup failed: {r.stdout[-500:]} {r.stderr[-500:]}")
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.daily_use", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=10, help="runs per measurement (p50 reported)")
    p.add_argument("--baseline", type=Path, help="an older source tree to measure the same way")
    p.add_argument("--baseline-runs", type=int, default=3, help="cold MCP runs for the baseline (slow)")
    p.add_argument("--settle", type=float, default=5.0, help="seconds idle before reading the RSS")
    p.add_argument("--out", type=Path, help="also write the results as JSON")
    a = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="egb", dir="/tmp"))  # short: Unix socket paths are limited
    result: dict = {"runs": a.runs, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    try:
        home = root / "home"
        result["code"] = _code(home, None)
        result["setup_s"] = round(_prepare(home, None), 2)
        rows = []
        for label, args in COMMANDS:
            cold, warm = [], []
            for i in range(a.runs):
                _stop(home)
                cold.append(_engram(home, *[x.format(i=i, home=home) for x in args]))
            for i in range(a.runs):
                warm.append(_engram(home, *[x.format(i=a.runs + i, home=home) for x in args]))
            rows.append({"command": label, "cold_p50_s": round(_p50(cold), 3), "warm_p50_s": round(_p50(warm), 3)})
        result["cli"] = rows
        result["mcp_cold"] = _mcp_series(home, a.runs, cold=True)
        result["mcp_warm"] = _mcp_series(home, a.runs, cold=False)
        result["idle_rss_mb"] = _idle_rss(home, None, a.settle)
        _stop(home)
        if a.baseline:
            base = root / "base"
            result["baseline"] = {
                "src": str(a.baseline),
                "code": _code(base, a.baseline),
                "setup_s": round(_prepare(base, a.baseline), 2),
            }
            result["baseline"]["cold_runs"] = a.baseline_runs
            result["baseline"]["mcp_cold"] = _mcp_series(base, a.baseline_runs, cold=True, src=a.baseline)
            result["baseline"]["mcp_warm"] = _mcp_series(base, a.runs, cold=False, src=a.baseline)
            result["baseline"]["idle_rss_mb"] = _idle_rss(base, a.baseline, a.settle)
            _stop(base, a.baseline)
    finally:
        for h in ("home", "base"):
            if (root / h).exists():
                with contextlib.suppress(RuntimeError):
                    _stop(root / h, a.baseline if h == "base" else None)
        shutil.rmtree(root, ignore_errors=True)
    print(render(result))
    if a.out:
        a.out.write_text(json.dumps(result, indent=2))
    return result


def render(r: dict) -> str:
    lines = [
        f"daily use, {r['date']}, p50 of {r['runs']} runs (engram-setup first: {r['setup_s']} s)",
        f"engram from {r['code']}" + (f"; baseline from {r['baseline']['code']}" if "baseline" in r else ""),
        "",
        "| command | no daemon (s) | warm (s) |",
        "|---|---:|---:|",
    ]
    for row in r["cli"]:
        lines.append(f"| `engram {row['command']}` | {row['cold_p50_s']:.3f} | {row['warm_p50_s']:.3f} |")
    lines += ["", "| MCP over stdio | connect (s) | first store_memory (s) | total (s) |", "|---|---:|---:|---:|"]
    sets = [("cold (no daemon)", r["mcp_cold"]), ("warm (daemon running)", r["mcp_warm"])]
    if "baseline" in r:
        b = r["baseline"]
        sets += [(f"baseline cold (p50 of {b['cold_runs']})", b["mcp_cold"]), ("baseline warm", b["mcp_warm"])]
    for label, m in sets:
        lines.append(f"| {label} | {m['connect_s']:.3f} | {m['first_call_s']:.3f} | {m['total_s']:.3f} |")
    lines += [
        "",
        f"idle daemon RSS: {r['idle_rss_mb']} MB"
        + (f" (baseline {r['baseline']['idle_rss_mb']} MB)" if "baseline" in r else ""),
    ]
    slow = [row["command"] for row in r["cli"] if row["warm_p50_s"] >= WARM_TARGET_S]
    lines.append(f"warm commands under {WARM_TARGET_S} s: " + ("all" if not slow else "NOT " + ", ".join(slow)))
    lines.append(
        f"cold first MCP call (connect + call) under {COLD_MCP_TARGET_S} s: "
        + ("yes" if r["mcp_cold"]["total_s"] < COLD_MCP_TARGET_S else "NO")
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
