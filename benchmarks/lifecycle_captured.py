"""The captured-work scenario of the lifecycle benchmark (issue 49): 120 virtual days of sessions
through the capture path, with recurring problems and recurring questions, run with gists off and
on; `python -m benchmarks.lifecycle --captured` runs it (see lifecycle.py's docstring).

Each day one or two sessions of one project: three ordinary turns captured as episodes (the
hooks' `session_capture` operation, as `engram hook` sends it), the durable facts stated in the
first days (store_memory) and asked about at each session's start (get_context), three failing
tests that come back every 9 to 15 days and are fixed each time another way (a FixTracker fed the
failing output, the edit and the passing run, as the hooks feed it: a pitfall each time, beside the
episode of the turn that asked about it), and three questions asked again every 7 to 13 days in
other words, whose answer says the same thing each time among other sentences. The scheduler's
virtual-clock path runs maintenance every 12 hours.

At the end, for each durable fact, recurring pitfall and recurring question, a new phrasing of
its question: is the answer in recall's top 5, and in the block the prompt hook injects; the
store's size (active memories, the tokens of their text, disk; of them the episodes kept past
their fading for a recurrence, which recall leaves out); the tokens an injection spends; and
every gist's lines traced to the texts of the sources they name (engram.admin.gists.trace, over
the text of every memory captured, kept as it was stored).

    HF_HUB_OFFLINE=1 python -m benchmarks.lifecycle_captured [--days 120] [--seed 7]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from engram import Engram, Settings, VirtualClock
from engram.admin.gists import GIST_TAG, trace
from engram.admin.scheduler import MaintenanceScheduler
from engram.admin.stats import memory_stats
from engram.api import Api
from engram.continuity.fixes import FixTracker
from engram.continuity.rendering import estimate_tokens
from engram.core.types import Ctx, Scope
from engram.models.embedding import load_embedder

PROJECT = "example.com/shop"
# (every how many days, first day, failing command, its output, file edited, the edit's old line,
# phrasings of the request, the explanation the agent gives each time, key words a hit must hold,
# a new phrasing asked at the end)
PITFALLS = [
    dict(
        every=9,
        first=3,
        command="pytest tests/test_checkout.py",
        output=(
            "=================== FAILURES ===================\n"
            "E       AssertionError: assert 10.0 == 9.99\n\n"
            "shop/cart.py:41: AssertionError\n"
            "FAILED tests/test_checkout.py::test_total_rounding - AssertionError: assert 10.0 == 9.99\n"
            "1 failed, 12 passed in 0.42s"
        ),
        file="shop/cart.py",
        old="    return round(sum(items){v})\n",
        asks=[
            "test_total_rounding is failing again",
            "the checkout total test broke, can you look",
            "CI is red on the rounding test in checkout",
            "why does test_total_rounding fail this time",
        ],
        says="The cart total is rounded to whole units, so test_total_rounding fails when prices have cents.",
        key=("test_total_rounding", "shop/cart.py"),
        final="checkout rounding test red again, what did we change last time?",
    ),
    dict(
        every=12,
        first=5,
        command="pytest tests/test_webhooks.py",
        output=(
            "E       TimeoutError: webhook retry did not finish within 5s\n\n"
            "shop/webhooks.py:88: TimeoutError\n"
            "FAILED tests/test_webhooks.py::test_retry_backoff - TimeoutError: webhook retry did not finish within 5s\n"
            "1 failed, 30 passed in 6.10s"
        ),
        file="shop/webhooks.py",
        old="    delay = base * 2 ** attempt{v}\n",
        asks=[
            "the webhook retry test timed out again",
            "test_retry_backoff is flaky, fix it",
            "webhooks tests hang in CI",
            "retry backoff test failing with a timeout",
        ],
        says="The retry backoff has no cap, so test_retry_backoff waits past the 5 second timeout.",
        key=("test_retry_backoff", "shop/webhooks.py"),
        final="the webhook backoff test is timing out, how was it fixed before?",
    ),
    dict(
        every=15,
        first=8,
        command="python manage.py migrate",
        output=(
            "Traceback (most recent call last):\n"
            '  File "shop/settings.py", line 12, in <module>\n'
            "ModuleNotFoundError: No module named 'shop.settings_local'\n"
        ),
        file="shop/settings.py",
        old="from shop.settings_local import *{v}\n",
        asks=[
            "migrate crashes with a missing settings_local module",
            "manage.py migrate fails on import again",
            "ModuleNotFoundError for settings_local when migrating",
            "cannot run migrations, settings import error",
        ],
        says="The settings import settings_local unconditionally, which only exists on developer machines.",
        key=("settings_local", "shop/settings.py"),
        final="migrations blow up importing the local settings module, what's the fix?",
    ),
]
# (every, first day, phrasings, the sentence the answer says each time, key, new phrasing at the end)
QUESTIONS = [
    dict(
        every=7,
        first=2,
        asks=[
            "how do I load the sample catalogue locally",
            "what's the command to seed the product data",
            "I need demo products in my local db",
            "seed data for the shop, how again?",
        ],
        says="Run make seed-catalogue, which loads fixtures/catalogue.json into the local database.",
        key="seed-catalogue",
        final="how can I fill my dev database with example products?",
    ),
    dict(
        every=10,
        first=4,
        asks=[
            "where do the email templates live",
            "which folder has the order confirmation email",
            "I want to change the receipt email text",
            "how are transactional emails templated",
        ],
        says="Transactional emails are MJML templates in shop/emails/templates, compiled by npm run emails.",
        key="MJML",
        final="where would I edit the wording of the order receipt mail?",
    ),
    dict(
        every=13,
        first=6,
        asks=[
            "who approves a database migration",
            "do migrations need a review from someone",
            "what's the rule for merging schema changes",
            "can I merge my migration myself",
        ],
        says="A schema migration needs a review from the data team before it is merged.",
        key="data team",
        final="is there a sign-off needed before a schema change goes in?",
    ),
]
ANSWER_EXTRAS = [
    "I checked it against the current branch.",
    "Nothing else looked off in the logs.",
    "I left the rest of the module as it was.",
    "The change is small and covered by the existing tests.",
    "Let me know if it comes back.",
]


def _fix(p: dict, n: int) -> dict:
    """The n-th occurrence of a recurring failure, through the hooks' fix tracker: the failing run,
    an edit (another one each time), the passing run."""
    t = FixTracker()
    t.command(p["command"], True, p["output"])
    old = p["old"].format(v="")
    t.edit(p["file"], old, p["old"].format(v=f"  # try {n}") + f"    # fixed in attempt {n}\n")
    fix = t.command(p["command"], False, "all passed")
    assert fix is not None, "the tracker found no fix"
    return fix.to_dict()


def run_captured(days: int = 120, seed: int = 7, gists: bool = True, window: float | None = None) -> dict:  # noqa: C901 - a scenario read top to bottom
    from benchmarks.lifecycle import DURABLE, noise_note

    rng = random.Random(seed)
    home = Path(tempfile.mkdtemp(prefix="engram-lifecycle-captured-"))
    env = {"ENGRAM_HOME": str(home), "ENGRAM_GISTS": "1" if gists else "0"}
    if window is not None:
        env["ENGRAM_GIST_WINDOW_DAYS"] = str(window)
    settings = Settings.from_env(env)
    clock = VirtualClock(datetime(2025, 1, 6, 0, 0, tzinfo=UTC))
    eng = Engram(home / "memories.duckdb", settings=settings, embedder=load_embedder("all-MiniLM-L6-v2"), clock=clock)
    api = Api(eng)
    sched = MaintenanceScheduler(eng, settings, api_metrics=api.metrics, clock=clock)
    api.scheduler = sched
    sched.start()
    seen: dict[str, str] = {}  # every memory's text as stored: the sources' texts once they are pruned
    episodes = fixes = 0
    t0 = time.perf_counter()

    def record() -> None:
        idx = eng.index  # rows move when maintenance rebuilds the index: look them up by id
        for mid, r in idx.row_of.items():
            if mid not in seen and idx.texts[r] is not None:
                seen[mid] = idx.texts[r]

    for day in range(days):
        sessions = ["a", "b"] if day % 2 == 0 else ["a"]
        for hour in range(24):
            clock.advance(hours=1)
            slot = {10: 0, 15: 1}.get(hour)
            if slot is not None and slot < len(sessions):
                ctx = Ctx(session_id=f"d{day}-{sessions[slot]}", project=PROJECT, client="claude-code")
                if day < len(DURABLE) and slot == 0:
                    api.call("store_memory", {"content": DURABLE[day][0], "importance": 0.8}, ctx)
                if day >= 1:
                    known = DURABLE[: min(day, len(DURABLE))]
                    q = rng.choice(rng.choice(known)[2]) if rng.random() < 0.6 else "what did we do yesterday"
                    api.call("get_context", {"query": q}, ctx)
                turns = [
                    {"request": f"next: {noise_note(rng, day).lower()}", "answer": noise_note(rng, day)}
                    for _ in range(3)
                ]
                found = []
                if slot == 0:
                    for p in PITFALLS:
                        if day >= p["first"] and (day - p["first"]) % p["every"] == 0:
                            n = (day - p["first"]) // p["every"]
                            found.append(_fix(p, n))
                            turns.append(
                                {
                                    "request": p["asks"][n % len(p["asks"])],
                                    "answer": f"{p['says']} {rng.choice(ANSWER_EXTRAS)}",
                                }
                            )
                    for q in QUESTIONS:
                        if day >= q["first"] and (day - q["first"]) % q["every"] == 0:
                            n = (day - q["first"]) // q["every"]
                            turns.append(
                                {
                                    "request": q["asks"][n % len(q["asks"])],
                                    "answer": f"{rng.choice(ANSWER_EXTRAS)} {q['says']} {rng.choice(ANSWER_EXTRAS)}",
                                }
                            )
                rng.shuffle(turns)
                got = api.call("session_capture", {"episodes": turns, "fixes": found}, ctx)
                episodes += got["episodes"]
                fixes += got["fixes"] + got["reinforced"]
                record()
            sched.tick()
    sim_s = time.perf_counter() - t0
    clock.advance(hours=1)
    ctx = Ctx(session_id="final", project=PROJECT, client="claude-code")
    scope = Scope.of(PROJECT)
    checks = (
        [("durable", final, (key,)) for _, key, _, final in DURABLE]
        + [("pitfall", p["final"], p["key"]) for p in PITFALLS]
        + [("question", q["final"], (q["key"],)) for q in QUESTIONS]
    )
    found5: dict[str, list[bool]] = {"durable": [], "pitfall": [], "question": []}
    injected: dict[str, list[bool]] = {"durable": [], "pitfall": [], "question": []}
    prompt_tokens, ctx_tokens, missing = [], [], []
    for kind, question, keys in checks:
        hits = eng.recall(question, limit=5, reinforce=False, scope=scope)
        ok = any(all(k in h.memory.content for k in keys) for h in hits)
        found5[kind].append(ok)
        if not ok:
            missing.append(f"{kind}: {keys[0]!r}")
        block = api.call("prompt_memories", {"prompt": question}, ctx)
        prompt_tokens.append(block["tokens"])
        injected[kind].append(all(k in block["context"] for k in keys))
    for _, question, _ in checks:  # after the checks above: get_context reinforces
        ctx_tokens.append(api.call("get_context", {"query": question, "limit": 5}, ctx)["tokens"])
    stats = memory_stats(eng)
    idx = eng.index
    active = [i for i in idx.row_of if idx.status[idx.row_of[i]] == 0]
    mems = eng.store_db.get_memories(active)
    # Of those, the episodes kept past their fading for a recurrence (the gist window): not recalled.
    faded = idx.faded_episodes(clock.now(), settings.prune_threshold) if gists else None
    held = [i for i in active if faded is not None and faded[idx.row_of[i]]]
    gist_mems = [m for m in mems.values() if GIST_TAG in m.tags]
    lines = problems = 0
    for g in gist_mems:
        lines += len(g.metadata["gist"]["lines"])
        problems += len(trace(g.content, g.metadata["gist"], seen))
    unknown = sum(1 for g in gist_mems for i in g.metadata["gist"]["sources"] if i not in seen)
    result = {
        "gists_on": gists,
        "days": days,
        "episodes": episodes,
        "fixes": fixes,
        "written_tokens": sum(estimate_tokens(t) for t in seen.values()),
        "active": len(active),
        "active_tokens": sum(estimate_tokens(m.content) for m in mems.values()),
        "held": len(held),
        "held_tokens": sum(estimate_tokens(mems[i].content) for i in held),
        "by_type": stats["by_type"],
        "rows": eng.store_db.count("memories"),
        "disk_bytes": stats["disk_bytes"],
        "found5": {k: (sum(v), len(v)) for k, v in found5.items()},
        "injected": {k: (sum(v), len(v)) for k, v in injected.items()},
        "missing": missing,
        "prompt_tokens": sum(prompt_tokens) / len(prompt_tokens),
        "ctx5_tokens": sum(ctx_tokens) / len(ctx_tokens),
        "gists": len(gist_mems),
        "gist_lines": lines,
        "trace_problems": problems,
        "unknown_sources": unknown,
        "gist_examples": [g.content for g in sorted(gist_mems, key=lambda g: -len(g.metadata["gist"]["sources"]))],
        "totals": stats["totals"],
        "runs": sched.status()["runs"],
        "sim_seconds": sim_s,
    }
    eng.close()
    return result


def render_captured(off: dict, on: dict) -> str:
    def pair(k: str, fmt: str = "") -> str:
        return f"{off[k]:{fmt}} | {on[k]:{fmt}}"

    def frac(r: dict, field: str, kind: str) -> str:
        a, b = r[field][kind]
        return f"{a}/{b}"

    rows = [
        f"### Lifecycle, captured work: {on['days']} virtual days, maintenance every 12 h ({on['runs']} runs)",
        "",
        "| measure | gists off | gists on |",
        "|---|---|---|",
        f"| episodes / pitfalls captured | {off['episodes']} / {off['fixes']} | {on['episodes']} / {on['fixes']} |",
        f"| active memories at the end | {pair('active')} |",
        f"| active by type | {off['by_type']} | {on['by_type']} |",
        f"| tokens of the active memories' text | {off['active_tokens']:,} | {on['active_tokens']:,} |",
        f"| of them, episodes kept past their fading for a recurrence (not recalled) / their tokens | "
        f"{off['held']} / {off['held_tokens']:,} | {on['held']} / {on['held_tokens']:,} |",
        f"| recallable at the end / their tokens | {off['active'] - off['held']} / "
        f"{off['active_tokens'] - off['held_tokens']:,} | {on['active'] - on['held']} / "
        f"{on['active_tokens'] - on['held_tokens']:,} |",
        f"| rows (all statuses) / disk | {off['rows']} / {off['disk_bytes'] / 1e6:.2f} MB | "
        f"{on['rows']} / {on['disk_bytes'] / 1e6:.2f} MB |",
    ]
    for kind in ("durable", "pitfall", "question"):
        top5, block = (
            f"{frac(off, 'found5', kind)} | {frac(on, 'found5', kind)}",
            (f"{frac(off, 'injected', kind)} | {frac(on, 'injected', kind)}"),
        )
        rows.append(f"| {kind}: answer in recall's top 5 for a new phrasing | {top5} |")
        rows.append(f"| {kind}: answer in the prompt hook's injected block | {block} |")
    rows += [
        f"| tokens the prompt hook injects per question (mean) | {pair('prompt_tokens', '.0f')} |",
        f"| get_context tokens per question, limit=5 (mean) | {pair('ctx5_tokens', '.0f')} |",
        f"| gists active / written / updated / merged into another (totals) | {off['gists']} | {on['gists']} / "
        f"{on['totals'].get('gists_written', 0)} / {on['totals'].get('gists_updated', 0)} / "
        f"{on['totals'].get('gists_merged', 0)} |",
        f"| gist lines traced to their sources / problems / sources with no text kept | - | "
        f"{on['gist_lines']} / {on['trace_problems']} / {on['unknown_sources']} |",
        f"| missed | {', '.join(off['missing']) or '-'} | {', '.join(on['missing']) or '-'} |",
        f"| wall time of the simulation | {off['sim_seconds']:.0f} s | {on['sim_seconds']:.0f} s |",
    ]
    if on["gist_examples"]:
        rows += ["", "A gist it wrote:", "", "```", on["gist_examples"][0], "```"]
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=int, default=120)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--gist-window-days", type=float, default=None, help="ENGRAM_GIST_WINDOW_DAYS (default: its default)"
    )
    a = p.parse_args()
    off = run_captured(a.days, a.seed, gists=False)
    print(render_captured(off, run_captured(a.days, a.seed, gists=True, window=a.gist_window_days)))


if __name__ == "__main__":
    main()
