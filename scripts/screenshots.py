"""Screenshots of the web panel for the README: a fresh home, a month of demo data, headless
Chromium (Debian's `chromium`) through Playwright, set up as the panel's tests set it up
(tests/support/http_server.py).

    python -m scripts.screenshots [--out docs/panel]   # from the repository root
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tests.support.http_server import launch, serving

ROOT = Path(__file__).resolve().parents[1]


def seed(home: Path) -> dict[str, str]:
    """A month of plausible history, written before the server starts through the same Api operations
    the routes call, on a clock that runs from 30 days ago to now (so charts and "last activity"
    have a past): two agents on a migration, a failure, a handoff, an interruption, recalls."""
    from engram import Engram, Settings, VirtualClock
    from engram.api import Api, Ctx

    clock = VirtualClock(datetime.now(timezone.utc) - timedelta(days=30))
    with Engram(settings=Settings.from_env({"ENGRAM_HOME": str(home)}), clock=clock) as eng:
        api = Api(eng)
        a, b, me = (
            Ctx(session_id="agent-a", client="claude-code"),
            Ctx(session_id="agent-b", client="codex"),
            Ctx(session_id="panel-demo", client="demo"),
        )

        def op(ctx: Ctx, operation: str, **args) -> dict:
            return api.call(operation, args, ctx)

        tid = op(
            a,
            "create_task",
            name="Migrate billing to Postgres",
            goal="Move the billing service off MySQL with no downtime",
        )["task_id"]
        facts = [
            ("The billing service reads its DSN from BILLING_DATABASE_URL", "fact", ["billing"], 0.7),
            (
                "Run the migration with `make migrate ENV=staging` before production",
                "strategy",
                ["billing", "deploy"],
                0.8,
            ),
            ("The staging database is reset every Sunday night", "fact", ["staging"], 0.5),
            ("Users prefer invoices as PDF attachments", "fact", ["billing"], 0.6),
        ]
        ids = [
            op(a, "store_memory", content=t, memory_type=k, tags=g, importance=i, task_id=tid)["memory_id"]
            for t, k, g, i in facts
        ]
        clock.advance(days=2)
        op(
            a,
            "track_failure",
            error="pg_dump timed out on the invoices table",
            component="migration",
            root_cause="no index on created_at",
            fix="add the index first",
            task_id=tid,
        )
        op(
            a,
            "session_handoff",
            summary="Schema ported; the data copy is next",
            task_id=tid,
            completed=["port the schema"],
            next_steps=["copy the invoices table", "switch reads to Postgres", "drop the MySQL replica"],
        )
        clock.advance(days=5)
        op(a, "track_progress", feature="copy the invoices table", status="in_progress", completion=0.4, task_id=tid)
        op(a, "report_interruption", reason="context_overflow", task_id=tid)
        for days in (4, 6, 8):  # spaced recalls grow a memory's stability
            clock.advance(days=days)
            op(b, "recall_memory", query="which format do users want invoices in")
        op(b, "track_progress", feature="copy the invoices table", status="done", completion=1.0, task_id=tid)
        op(b, "session_outcome", outcome="success")
        flaky = op(me, "create_task", name="Flaky login test", goal="Find why test_login fails on CI")["task_id"]
        op(me, "update_task", task_id=flaky, status="blocked")
        done = op(me, "create_task", name="Write the 0.2 changelog")["task_id"]
        op(me, "update_task", task_id=done, status="done")
        clock.advance(days=3)
        op(me, "create_task", name="Speed up recall at 1M memories", goal="p50 under 30 ms")
        op(me, "store_memory", content="The CI runners have 2 cores", importance=0.2)
        # An edit is not resolved at write time: these two become near-duplicates for the upkeep preview.
        op(me, "store_memory", content="The nightly backup job runs at 2 am", tags=["ops"])
        other = op(me, "store_memory", content="Invoices are emailed on the first of the month", tags=["ops"])
        op(me, "update_memory", memory_id=other["memory_id"], content="The nightly backup job runs at 2 am every day")
        op(me, "pin_memory", memory_id=ids[1])
        for s in (a, b, me):
            eng.end_session(s.session_id)
        clock.advance(days=30 - 2 - 5 - 18 - 3)  # back to now
    return {"task": tid, "memory": ids[3]}


def shoot(base: str, token: str, ids: dict[str, str], out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    shots = []
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1200, "height": 820})
        page.set_default_timeout(60_000)
        page.goto(base + "/ui/")
        page.fill("#token", token)
        page.click("form.login button[type=submit]")
        page.wait_for_selector(".board")

        def snap(name: str) -> None:
            path = out / f"{name}.png"
            page.screenshot(path=str(path), full_page=True)
            shots.append(path)

        snap("tasks")
        page.goto(f"{base}/ui/#/task/{ids['task']}")
        page.wait_for_selector("table[aria-label=Plan]")
        snap("task")
        page.goto(f"{base}/ui/#/memory/{ids['memory']}")  # before the search, which recalls it
        page.wait_for_selector(".chart svg")
        snap("memory")
        page.goto(f"{base}/ui/#/memories?q=which+format+do+users+want+invoices+in")
        page.wait_for_selector(".hit")
        page.locator(".hit summary").first.click()
        snap("search")
        page.goto(f"{base}/ui/#/upkeep")
        page.click("#preview")
        page.wait_for_selector("#report")
        snap("upkeep")
        browser.close()
    return shots


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "panel", help="folder for the PNG files")
    args = ap.parse_args()
    token = "screenshots"
    home = Path(tempfile.mkdtemp(prefix="egs", dir="/tmp"))  # short: the daemon's socket lives here
    try:
        ids = seed(home)
        with serving(home, token) as (base, _):
            for path in shoot(base, token, ids, args.out):
                print(path)
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
