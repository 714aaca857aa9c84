"""120 virtual days of an agent's memory with maintenance every 12 hours.

The agent writes ten durable facts it keeps using and about three notes of daily noise a day
(~370 memories), recalls organically (get_context, with its defaults unless --limit is given,
at the start of each of two daily work sessions: mostly about a durable fact, otherwise about
recent work), and the scheduler's virtual-clock path runs maintenance every 12 virtual hours.
At the end: what is left, whether each durable fact is still in the top 5 for a new
phrasing of its question, how much noise is gone, and get_context tokens per query against the
tokens of everything the agent wrote.

    HF_HUB_OFFLINE=1 python -m benchmarks.lifecycle [--days 120] [--seed 7] [--limit N]

`--captured` runs the captured-work scenario instead (benchmarks/lifecycle_captured.py): sessions
through the capture path, with recurring problems and questions, once with gists off and once on.

    HF_HUB_OFFLINE=1 python -m benchmarks.lifecycle --captured [--days 120] [--seed 7]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engram import Engram, Settings, VirtualClock
from engram.admin.scheduler import MaintenanceScheduler
from engram.admin.stats import memory_stats
from engram.api import Api, Ctx
from engram.continuity.rendering import estimate_tokens
from engram.models.embedding import load_embedder

# (fact, key that must appear in a hit, questions asked while working, question asked at the end)
DURABLE = [
    (
        "The production database is PostgreSQL 16 listening on port 5433.",
        "5433",
        ["which port does the production database listen on", "prod postgres connection settings"],
        "what port should I use to connect to the prod Postgres?",
    ),
    (
        "Deployments go to Fly.io in the ams region, and only from the main branch.",
        "Fly.io",
        ["where do we deploy", "how do deployments work"],
        "which hosting platform and branch are used for deploys?",
    ),
    (
        "The user wants tests run with pytest -x and no coverage report by default.",
        "pytest -x",
        ["how should I run the tests", "test command preferences"],
        "what flags does the user like for running the test suite?",
    ),
    (
        "The partner API rate limit is 250 requests per minute per key.",
        "250 requests",
        ["partner API rate limit", "how many requests can we send to the partner API"],
        "how fast may we call the partner endpoint?",
    ),
    (
        "Secrets live in the 1Password vault eng-prod and never in .env files.",
        "1Password",
        ["where are secrets stored", "how to handle credentials"],
        "where should I put a new API secret?",
    ),
    (
        "The frontend is built with SvelteKit and served as static files from the CDN.",
        "SvelteKit",
        ["what framework is the frontend", "how is the web app served"],
        "which UI framework does the website use?",
    ),
    (
        "Customer invoices are generated nightly at 02:00 UTC by the billing cron job.",
        "02:00 UTC",
        ["when are invoices generated", "billing cron schedule"],
        "at what time does the invoice job run?",
    ),
    (
        "Changes under payments/ need two approvals in code review.",
        "two approvals",
        ["code review rules for payments", "how many approvals for payment code"],
        "what is the review requirement for the payments directory?",
    ),
    (
        "Logs are shipped to Grafana Loki and kept for 14 days.",
        "Loki",
        ["where do logs go", "log retention"],
        "how long are application logs kept and where?",
    ),
    (
        "The mobile app uses React Native 0.74 with Expo for builds.",
        "React Native",
        ["mobile app stack", "how is the mobile app built"],
        "what technology is the phone app written in?",
    ),
]

SUITES = ["unit", "integration", "e2e", "smoke", "contract"]
SERVICES = ["auth", "search", "billing-worker", "notifier", "gateway", "scheduler", "thumbnailer"]
THINGS = [
    "a flaky timeout",
    "the dark mode toggle",
    "CSV column order",
    "a typo in the docs",
    "the retry backoff",
    "memory usage",
    "the onboarding email",
    "a slow query",
    "cache keys",
    "the date picker",
    "websocket reconnects",
    "the 404 page",
    "image resizing",
    "locale files",
]
TEAMS = ["platform", "design", "data", "mobile", "support"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
TOPICS = [
    "the office plants",
    "a new coffee grinder",
    "weekend hiking",
    "a podcast episode",
    "the football match",
    "keyboard switches",
    "a sci-fi novel",
    "the heat wave",
]


def noise_note(rng: random.Random, day: int) -> str:
    t = rng.randrange(7)
    if t == 0:
        return (
            f"Ran the {rng.choice(SUITES)} tests at {rng.randrange(8, 19)}:{rng.randrange(60):02d}; "
            f"{rng.randrange(80, 400)} passed, {rng.randrange(0, 9)} skipped."
        )
    if t == 1:
        return f"Looked at ticket WEB-{rng.randrange(100, 999)} about {rng.choice(THINGS)}; parked it for now."
    if t == 2:
        return f"Restarted the {rng.choice(SERVICES)} dev container after it ran out of memory."
    if t == 3:
        return f"Pushed a scratch branch try-{rng.randrange(1000, 9999)} to experiment with {rng.choice(THINGS)}."
    if t == 4:
        return f"The {rng.choice(TEAMS)} team sync moved to {rng.choice(DAYS)} this week."
    if t == 5:
        return f"Chatted about {rng.choice(TOPICS)} during lunch on day {day}."
    return f"Reviewed PR #{rng.randrange(1000, 5000)} touching {rng.choice(THINGS)}; left two small comments."


def run(days: int = 120, seed: int = 7, limit: int | None = None) -> dict:  # noqa: C901 - a benchmark scenario read top to bottom
    """limit: the organic get_context calls' limit (None: get_context's default)."""
    rng = random.Random(seed)
    home = Path(tempfile.mkdtemp(prefix="engram-lifecycle-"))
    settings = Settings.from_env({"ENGRAM_HOME": str(home)})
    clock = VirtualClock(datetime(2025, 1, 6, 0, 0, tzinfo=UTC))
    eng = Engram(home / "memories.duckdb", settings=settings, embedder=load_embedder("all-MiniLM-L6-v2"), clock=clock)
    api = Api(eng)
    sched = MaintenanceScheduler(eng, settings, api_metrics=api.metrics, clock=clock)
    api.scheduler = sched
    sched.start()
    ctx = Ctx("lifecycle-agent")
    written: list[str] = []
    noise_written = durable_stores = 0
    organic_tokens: list[int] = []
    used: dict[str, list[int]] = {}  # durable key -> days it came back in a context
    t0 = time.perf_counter()
    for day in range(days):
        for hour in range(24):
            clock.advance(hours=1)
            if hour in (9, 13, 17):
                items = [
                    {"content": noise_note(rng, day), "importance": round(rng.uniform(0.2, 0.4), 2), "tags": ["noise"]}
                ]
                if hour == 9 and day < len(DURABLE):
                    items.append({"content": DURABLE[day][0], "importance": 0.8, "tags": ["durable"]})
                for it in items:
                    api.call("store_memory", it, ctx)
                    written.append(it["content"])
                    noise_written += "noise" in it["tags"]
                    durable_stores += "durable" in it["tags"]
            if hour in (10, 15) and day >= 1:
                # Each work session starts by asking for context: mostly about something durable.
                known = DURABLE[: min(day, len(DURABLE))]
                if rng.random() < 0.6:
                    q = rng.choice(rng.choice(known)[2])
                else:
                    q = f"what happened with {rng.choice(THINGS)}"
                got = api.call("get_context", {"query": q, **({"limit": limit} if limit else {})}, ctx)
                organic_tokens.append(got["tokens"])
                texts = [m.content for m in eng.store_db.get_memories(got["memory_ids"]).values()]
                for _, key, _, _ in DURABLE:
                    if any(key in t for t in texts):
                        used.setdefault(key, []).append(day)
            sched.tick()
    sim_s = time.perf_counter() - t0

    found, ctx5, ctx20, missing = 0, [], [], []
    for _fact, key, _, final_q in DURABLE:
        hits = eng.recall(final_q, limit=5, reinforce=False)
        ok = any(key in h.memory.content for h in hits)
        found += ok
        if not ok:
            rows = [m for m, _ in eng.store_db.iter_memory_rows() if key in m.content]
            if any(m.status == "active" for m in rows):
                why = "ranked below the top 5"
            elif rows:
                ev = eng.store_db.events(rows[-1].id)[-1]
                why = f"{rows[-1].status}: {ev['action']} {ev['detail']}"
            else:
                why = "pruned"
            missing.append(f"{key!r} ({why})")
    for _, _, _, final_q in DURABLE:  # after the recall check: get_context reinforces
        ctx5.append(api.call("get_context", {"query": final_q, "limit": 5}, ctx)["tokens"])
        ctx20.append(api.call("get_context", {"query": final_q}, ctx)["tokens"])
    stats = memory_stats(eng)
    idx = eng.index
    active = [i for i in idx.row_of if idx.status[idx.row_of[i]] == 0]
    mems = eng.store_db.get_memories(active)
    noise_left = sum(1 for m in mems.values() if "noise" in m.tags and "durable" not in m.tags)
    transcript = sum(estimate_tokens(t) for t in written)
    gaps = []
    for i, (_, key, _, _) in enumerate(DURABLE):
        days_used = [i] + used.get(key, []) + [days]
        gaps.append(max(b - a for a, b in itertools.pairwise(days_used)))
    result = {
        "days": days,
        "written": len(written),
        "durable_written": durable_stores,
        "noise_written": noise_written,
        "active_left": len(active),
        "rows_left": eng.store_db.count("memories"),
        "by_status": stats["by_status"],
        "noise_left": noise_left,
        "durable_found": found,
        "missing": missing,
        "runs": sched.status()["runs"],
        "consolidated_total": stats["totals"]["consolidated"],
        "pruned_total": stats["totals"]["pruned"],
        "transcript_tokens": transcript,
        "ctx5_mean": sum(ctx5) / len(ctx5),
        "ctx20_mean": sum(ctx20) / len(ctx20),
        "organic_mean": sum(organic_tokens) / max(1, len(organic_tokens)),
        "organic_limit": limit,
        "longest_gap": max(gaps),
        "median_uses": sorted(len(used.get(k, [])) for _, k, _, _ in DURABLE)[5],
        "disk_bytes": stats["disk_bytes"],
        "sim_seconds": sim_s,
    }
    eng.close()
    return result


def render(r: dict) -> str:
    def pct(x: float) -> str:
        return f"{100 * x / r['transcript_tokens']:.2f}%"

    return "\n".join(
        [
            f"### Lifecycle: {r['days']} virtual days, maintenance every 12 h ({r['runs']} runs)",
            "",
            "| measure | value |",
            "|---|---|",
            (
                f"| memories written (store calls) | {r['written']} ({r['durable_written']} durable, "
                f"{r['noise_written']} noise) |"
            ),
            f"| active memories left | {r['active_left']} |",
            f"| rows left (all statuses) | {r['rows_left']} {r['by_status']} |",
            (
                f"| durable facts in top 5 for a new question | {r['durable_found']}/{len(DURABLE)} "
                f"{'(missed: ' + ', '.join(r['missing']) + ') ' if r['missing'] else ''}|"
            ),
            (
                f"| durable facts: uses in context (median) / longest gap between uses | "
                f"{r['median_uses']} / {r['longest_gap']} days |"
            ),
            (
                f"| noise notes still active | {r['noise_left']} of {r['noise_written']} written "
                "(the rest pruned, or absorbed at write time) |"
            ),
            f"| consolidated / pruned (totals) | {r['consolidated_total']} / {r['pruned_total']} |",
            f"| transcript tokens (all text written) | {r['transcript_tokens']:,} |",
            f"| get_context tokens per query, limit=5 | {r['ctx5_mean']:.0f} ({pct(r['ctx5_mean'])}) |",
            (f"| get_context tokens per query, default limit=20 | {r['ctx20_mean']:.0f} ({pct(r['ctx20_mean'])}) |"),
            (
                f"| organic get_context tokens during the run (limit={r['organic_limit'] or 'default'}) | "
                f"{r['organic_mean']:.0f} |"
            ),
            f"| database on disk at the end | {r['disk_bytes'] / 1e6:.2f} MB |",
            f"| wall time of the simulation | {r['sim_seconds']:.0f} s |",
        ]
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=int, default=120)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--limit", type=int, default=None, help="limit of the organic get_context calls (default: get_context's own)"
    )
    p.add_argument("--captured", action="store_true", help="the captured-work scenario, gists off then on")
    a = p.parse_args()
    if a.captured:
        from benchmarks.lifecycle_captured import render_captured, run_captured

        print(render_captured(run_captured(a.days, a.seed, gists=False), run_captured(a.days, a.seed, gists=True)))
        return
    print(render(run(a.days, a.seed, a.limit)))


if __name__ == "__main__":
    main()
