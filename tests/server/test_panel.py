"""The web panel at /ui, driven in headless Chromium (Debian's `chromium`, via Playwright) against a
real `engram serve --http` subprocess with the real model and a token. No mocked API: the set-up
data goes in through the HTTP routes, every action under test through the panel's pages, and the
progress call comes from a real MCP client over stdio talking to the same daemon."""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlparse

import anyio
import httpx
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from playwright.sync_api import expect

from engram.api import Ctx
from engram.panel import STATIC
from engram.server.http_routes import OPS
from tests.support.http_server import launch, serving

pytestmark = [pytest.mark.browser]  # and `model` on every test that runs the real server

TOKEN = "panel-test-token-7f3a"
WAIT_MS = 30_000  # a page's data can wait behind a model load on this 2-core machine
expect.set_options(timeout=WAIT_MS)
SECRET = "The vault combination is 31-41-59"  # stored, then looked for in every panel file


@pytest.fixture(scope="module")
def server(checked_model_cache):
    """`engram serve --http` with a token on a fresh home; yields (base URL, env of that home)."""
    # Short: the daemon's socket lives here. The model loads from the shared cache (checked_model_cache).
    home = Path(tempfile.mkdtemp(prefix="egp", dir="/tmp"))
    try:
        with serving(home, TOKEN) as running:
            yield running
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def api(server):
    base, _ = server
    with httpx.Client(base_url=base, timeout=120, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield c


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    """A logged-in tab (through the login form), failing the test on any script error."""
    base, _ = server
    ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    pg = ctx.new_page()
    errors = watch(pg)
    pg.set_default_timeout(WAIT_MS)
    pg.goto(base + "/ui/")
    pg.fill("#token", TOKEN)
    pg.click("form.login button[type=submit]")
    pg.wait_for_selector("h1:text('Tasks')")
    yield pg
    ctx.close()
    assert not errors, errors


def watch(pg) -> list[str]:
    """Script errors and console errors (a CSP refusal shows up there) of a tab, as they happen.
    The one expected console error is the 401 of the first data call before logging in."""
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: m.type == "error" and "status of 401" not in m.text and errors.append(m.text))
    return errors


def ok(r: httpx.Response) -> dict:
    assert r.status_code < 300, f"{r.request.method} {r.request.url}: {r.status_code} {r.text}"
    return r.json()


def mcp_call(env: dict, tool: str, args: dict) -> dict:
    """One tool call from a real MCP client over stdio (an `engram` process reaching the same daemon),
    on its own thread: the Playwright sync API owns this one's event loop."""
    out: dict = {}

    async def run() -> None:
        params = StdioServerParameters(command=sys.executable, args=["-m", "engram"], env=env)
        async with Client(params, read_timeout_seconds=180) as c:
            r = await c.call_tool(tool, args)
            assert not r.is_error, r.content[0].text
            out.update(r.structured_content)

    errors: list[BaseException] = []

    def target() -> None:
        try:
            anyio.run(run)
        except BaseException as e:  # noqa: BLE001 - re-raised on the test's thread
            errors.append(e)

    t = threading.Thread(target=target)
    t.start()
    t.join(300)
    assert not t.is_alive(), "the MCP call did not finish"
    if errors:
        raise errors[0]
    return out


# ---------------------------------------------------------------- without the token


@pytest.mark.model
def test_without_the_token_every_data_route_is_401_and_the_panel_files_hold_no_data(server, api):
    base, _ = server
    mid = ok(api.post("/memories", json={"content": SECRET}))["memory_id"]
    tid = ok(api.post("/tasks", json={"name": "token check"}))["task_id"]
    with httpx.Client(base_url=base, timeout=60) as anon:
        checked = []
        for s in OPS:
            path = s.path.replace("{memory_id}", mid).replace("{task_id}", tid)
            r = anon.request(s.method, path, json={} if s.method != "GET" else None)
            assert r.status_code == 401, f"{s.method} {path} answered {r.status_code} without a token"
            checked.append(f"{s.method} {s.path}")
        for path in ("/metrics", "/openapi.json", "/mcp"):
            assert anon.get(path).status_code == 401, path
        # The panel's own data routes are among them.
        for route in (
            "GET /memories",
            "GET /memories/{memory_id}/strength",
            "GET /memories/{memory_id}/versions",
            "GET /tasks/{task_id}/sessions",
            "POST /memories/{memory_id}/pin",
            "GET /stats",
        ):
            assert route in checked
        # A wrong token is refused too.
        assert anon.get("/stats", headers={"Authorization": "Bearer nope"}).status_code == 401
        # The panel's files are code: served without the token, and none of them holds data.
        files = [p.relative_to(STATIC).as_posix() for p in STATIC.rglob("*") if p.is_file()]
        assert "index.html" in files and "js/app.js" in files
        for rel in files:
            r = anon.get(f"/ui/{rel}")
            assert r.status_code == 200, rel
            assert SECRET not in r.text and mid not in r.text and tid not in r.text, rel
        root = anon.get("/ui", follow_redirects=True)
        assert root.status_code == 200 and "<main" in root.text
        assert "default-src 'self'" in root.headers["content-security-policy"]
    ok(api.delete(f"/memories/{mid}"))


@pytest.mark.model
def test_the_login_form_refuses_a_wrong_token_and_keeps_the_right_one_out_of_the_url(browser, server):
    base, _ = server
    ctx = browser.new_context()
    pg = ctx.new_page()
    pg.set_default_timeout(WAIT_MS)
    pg.goto(base + "/ui/#/upkeep")
    pg.fill("#token", "wrong")
    pg.click("form.login button[type=submit]")
    pg.wait_for_selector("#status.error:text('refused')")
    pg.fill("#token", TOKEN)
    pg.click("form.login button[type=submit]")
    pg.wait_for_selector("h1:text('Upkeep')")
    assert TOKEN not in pg.url
    assert pg.evaluate("sessionStorage.getItem('engram.token')") == TOKEN
    assert TOKEN not in pg.evaluate("document.cookie")
    # Logging out forgets it: the next data call needs the form again.
    pg.click("#logout")
    pg.wait_for_selector("form.login")
    assert pg.evaluate("sessionStorage.getItem('engram.token')") is None
    ctx.close()


# ---------------------------------------------------------------- tasks


@pytest.mark.model
def test_a_plan_step_turns_done_on_the_task_page_after_track_progress_over_mcp(page, server, api):
    _, env = server
    tid = ok(
        api.post(
            "/tasks", json={"name": "Migrate billing to Postgres", "goal": "Move billing off MySQL with no downtime"}
        )
    )["task_id"]
    ok(
        api.post(
            "/handoffs",
            json={
                "summary": "Schema ported; the data copy is next",
                "task_id": tid,
                "next_steps": ["copy the invoices table to Postgres", "switch the billing reads to Postgres"],
            },
        )
    )
    ok(
        api.post(
            "/interruptions",
            json={"reason": "context_overflow", "task_id": tid},
            headers={"X-Engram-Session": "agent-a"},
        )
    )
    page.click("a.card:has-text('Migrate billing to Postgres')")
    page.wait_for_selector("table[aria-label=Plan]")
    step = page.locator("tr[data-step='copy the invoices table to Postgres'] td.step-status")
    assert step.inner_text().strip() == "not started"
    # The interruption is on the timeline, marked, with its reason.
    page.wait_for_selector(".timeline li.interrupted:has-text('context_overflow')")

    r = mcp_call(
        {**env, "ENGRAM_USER": "default"},
        "track_progress",
        {"feature": "copy the invoices table to Postgres", "status": "done", "completion": 1.0, "task_id": tid},
    )
    assert r["status"] == "done"
    # The page refreshes itself: no reload, no click.
    page.wait_for_function(
        "() => document.querySelector(\"tr[data-step='copy the invoices table to Postgres'] td.step-status\")"
        "?.innerText.trim() === 'done'"
    )
    other = page.locator("tr[data-step='switch the billing reads to Postgres'] td.step-status")
    assert other.inner_text().strip() == "not started"

    page.click("button:text-is('blocked')")
    page.wait_for_selector("h1 .badge.blocked")
    assert ok(api.get(f"/tasks/{tid}"))["task"]["status"] == "blocked"


@pytest.mark.model
def test_the_board_and_the_task_page_show_who_holds_a_task(page, api):
    tid = ok(api.post("/tasks", json={"name": "Rotate the signing keys"}))["task_id"]
    agent = {"X-Engram-Session": "agent-keys"}
    held = ok(api.post(f"/tasks/{tid}/claim", headers=agent))["claim"]
    refused = api.post(f"/tasks/{tid}/claim", headers={"X-Engram-Session": "agent-other"})
    assert refused.status_code == 409 and "held by session agent-keys (http)" in refused.json()["error"]
    page.reload()
    card = page.locator("a.card:has-text('Rotate the signing keys') .holder")
    assert re.fullmatch(
        r"held by http session agent-keys, since just now, last heard just now", card.inner_text().strip()
    )
    page.click("a.card:has-text('Rotate the signing keys')")
    holder = page.locator("p.holder")
    holder.wait_for()
    assert (
        holder.inner_text().strip()
        == "Held by http session agent-keys, since just now, last heard just now: an agent is working on it."
    )
    assert held["session_id"] == "agent-keys"
    assert ok(api.post(f"/tasks/{tid}/release", headers=agent)) == {"task_id": tid, "released": True}
    # The page refreshes itself.
    page.wait_for_selector("p.holder:has-text('Nobody holds this task')")


# ---------------------------------------------------------------- memories


def search(page, query: str) -> None:
    """Go to Memories and search `query` at once, as a quick user does, then wait for that
    search's own page: its form holds the query as drawn (the value attribute, which typing
    does not set) and its results are in."""
    page.click("header nav a[data-section=memories]")
    page.fill("#q", query)
    page.press("#q", "Enter")  # the keyboard submits the search form
    expect(page.locator(f"#q[value='{query}']")).to_be_attached()
    expect(page.locator(".hit, .muted:text('0 hits')").first).to_be_visible()


def is_the_list(url: str) -> bool:
    return urlparse(url).path == "/memories"


def hold_the_list(page) -> list:
    """Hold the page's GET /memories (the Memories section's list) until the test lets it go:
    the section's render arrives late, as it does on a slow machine. Returns the held routes."""
    held: list = []
    page.route(is_the_list, lambda route: held.append(route))
    return held


def release(page, held: list) -> None:
    """Let the held list go, once the route has reached the test: Playwright runs a route's
    handler during a call to the page, so each round trip below gives it the chance to."""
    for _ in range(1000):
        if held:
            break
        page.evaluate("0")
    assert len(held) == 1, held
    held.pop().continue_()
    page.unroute_all()


@pytest.mark.model
def test_search_shows_each_hits_score_breakdown(page, api):
    ok(api.post("/memories", json={"content": "The staging database is reset every Sunday night", "tags": ["staging"]}))
    search(page, "when is the staging database reset")
    hit = page.locator(".hit").first
    assert "staging database is reset every Sunday" in hit.inner_text()
    score = float(re.search(r"score (\d+\.\d+)", hit.inner_text()).group(1))
    assert score > 0
    hit.locator("summary").click()
    rows = dict(
        zip(
            hit.locator("table.explain th").all_inner_texts(),
            map(float, hit.locator("table.explain td").all_inner_texts()),
        )
    )
    assert {"bm25", "cosine", "decay"} <= rows.keys()
    assert 0 < rows["cosine"] <= 1 and rows["bm25"] > 0
    # A misspelt word is searched as the stored one, and the page says how it was read.
    search(page, "stagign database resett")
    assert page.locator("p.read-as").inner_text() == "Searched “stagign” as staging, “resett” as reset."
    assert "staging database is reset every Sunday" in page.locator(".hit").first.inner_text()
    # A filter narrows the search on the server: no strategy says this.
    page.select_option("select[name=type]", "strategy")
    page.click("form.filters button[type=submit]")
    page.wait_for_selector(".muted:text('0 hits')")


@pytest.mark.model
def test_a_query_typed_before_the_section_arrives_is_kept_and_searched(page, api):
    ok(api.post("/memories", json={"content": "The canary deploy waits ten minutes before promoting"}))
    search(page, "canary deploy")
    held = hold_the_list(page)
    with page.expect_request(lambda r: is_the_list(r.url)):
        page.click("header nav a[data-section=memories]")
    # The section is on its way; the user types into the search field already on screen.
    page.fill("#q", "how long does the canary wait")
    release(page, held)
    # The section's page arrives while they type (the list: its pager) and keeps their text and focus.
    expect(page.locator(".pager")).to_be_visible()
    q = page.locator("#q")
    expect(q).to_have_value("how long does the canary wait")
    expect(q).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#q[value='how long does the canary wait']")).to_be_attached()
    expect(page.locator(".hit").first).to_contain_text("canary deploy waits ten minutes")


@pytest.mark.model
def test_a_field_the_user_is_in_keeps_the_focus_when_the_section_arrives(page, api):
    ok(api.post("/memories", json={"content": "The nightly export lands in the reports bucket at 3 am"}))
    search(page, "nightly export")
    held = hold_the_list(page)
    with page.expect_request(lambda r: is_the_list(r.url)):
        page.click("header nav a[data-section=memories]")
    page.focus("#q")  # in the field, no key pressed yet: the keys come after the section arrives
    release(page, held)
    expect(page.locator(".pager")).to_be_visible()
    expect(page.locator("#q")).to_be_focused()
    page.keyboard.type("where does the nightly export land")
    page.keyboard.press("Enter")
    expect(page.locator("#q[value='where does the nightly export land']")).to_be_attached()
    expect(page.locator(".hit").first).to_contain_text("nightly export lands in the reports bucket")


@pytest.mark.model
def test_a_sections_late_render_never_paints_over_the_search_made_meanwhile(page, api):
    ok(api.post("/memories", json={"content": "The release branch is cut every other Thursday"}))
    search(page, "release branch")
    held = hold_the_list(page)
    with page.expect_request(lambda r: is_the_list(r.url)):
        page.click("header nav a[data-section=memories]")
    page.fill("#q", "when is the release branch cut")
    page.press("#q", "Enter")
    expect(page.locator("#q[value='when is the release branch cut']")).to_be_attached()
    expect(page.locator(".hit").first).to_contain_text("release branch is cut every other Thursday")
    # Every node added to the page from now on is recorded: the list, late, must add none.
    page.evaluate("""() => {
        window.painted = [];
        new MutationObserver((records) => records.forEach((r) => window.painted.push(...r.addedNodes)))
            .observe(document.getElementById("main"), { childList: true, subtree: true });
    }""")
    with page.expect_response(lambda r: is_the_list(r.url)) as late:
        release(page, held)
    late.value.finished()
    assert page.evaluate("window.painted.length") == 0
    expect(page.locator("#q")).to_have_value("when is the release branch cut")
    expect(page.locator(".pager")).to_have_count(0)


@pytest.mark.model
def test_forget_a_memory_and_it_is_gone_from_search(page, api):
    mid = ok(api.post("/memories", json={"content": "The office wifi password rotates every Monday"}))
    mid = mid["memory_id"]
    search(page, "office wifi password")
    page.click(".hit a:has-text('office wifi password')")
    page.wait_for_selector(".chart svg")
    assert mid in page.inner_text("dl.kv")
    page.once("dialog", lambda d: d.accept())
    page.click("#forget")
    page.wait_for_selector("#status:text('Forgotten')")
    search(page, "office wifi password")
    assert "office wifi password" not in page.inner_text("main")
    assert api.get(f"/memories/{mid}").status_code == 404


@pytest.mark.model
def test_pin_edit_and_the_strength_chart_on_a_memory_page(page, api):
    mid = ok(api.post("/memories", json={"content": "Deploys go out on Tuesdays", "importance": 0.4}))
    mid = mid["memory_id"]
    page.goto(page.url.split("#")[0] + f"#/memory/{mid}")
    page.wait_for_selector(".chart svg path.projected")
    curve = ok(api.get(f"/memories/{mid}/strength"))
    shown = float(re.search(r"threshold in ([\d.]+) days", page.inner_text("main")).group(1))
    assert abs(shown - curve["days_until_prune"]) < 0.05  # the same figure, fetched a moment apart
    page.click("#pin")
    page.wait_for_selector("h1 .badge.pinned")
    assert ok(api.get(f"/memories/{mid}"))["pinned"] is True
    page.wait_for_selector("main:has-text('pinned: never pruned')")
    page.fill("#edit", "Deploys go out on Wednesdays")
    page.click("form button[type=submit]:text('Save')")
    page.wait_for_selector("#content:text('Deploys go out on Wednesdays')")
    got = ok(api.get(f"/memories/{mid}"))
    assert got["content"] == "Deploys go out on Wednesdays"
    assert any(
        e["action"] == "update" and e["detail"]["previous"] == "Deploys go out on Tuesdays" for e in got["history"]
    )
    page.wait_for_selector(".timeline:has-text('was: Deploys go out on Tuesdays')")


@pytest.mark.model
def test_the_memory_list_pages_on_the_server(page, api):
    words = ["amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kelp"]
    for i in range(55):
        text = f"Service {words[i % 11]}-{i} listens on port {8000 + i}"
        r = ok(api.post("/memories", json={"content": text, "tags": ["paging"]}))
        assert r["action"] == "new", r
    page.goto(page.url.split("#")[0] + "#/memories?tag=paging")
    page.wait_for_selector(".pager:has-text('1–50 of 55')")
    assert page.locator("main tbody tr").count() == 50
    assert "port 8054" in page.locator("main tbody tr").first.inner_text()  # newest first
    page.click(".pager a:text('Older →')")
    page.wait_for_selector(".pager:has-text('51–55 of 55')")
    assert page.locator("main tbody tr").count() == 5


@pytest.mark.model
def test_the_project_filter_on_the_memory_list_search_and_task_board(page, api):
    alpha, beta = "github.com/me/alpha", "github.com/me/beta"
    for project, text in (
        (alpha, "Alpha's release notes live in docs/releases"),
        (beta, "Beta's release notes live in the wiki"),
        (None, "Release notes are written in plain English"),
    ):
        ok(
            api.post(
                "/memories",
                params={"project": project} if project else None,
                json={"content": text, "tags": ["projfilter"]},
            )
        )
    for project, name in ((alpha, "Alpha release 2.0"), (beta, "Beta release 1.4"), (None, "Release checklist")):
        ok(api.post("/tasks", params={"project": project} if project else None, json={"name": name}))
    listed = ok(api.get("/projects"))["projects"]
    assert {p["id"] for p in listed} >= {alpha, beta}

    def rows() -> set[str]:
        return {t.split("\n")[0] for t in page.locator("main tbody td.content").all_inner_texts()}

    base = page.url.split("#")[0]
    page.goto(base + "#/memories?tag=projfilter")
    page.wait_for_selector(".pager:has-text('1–3 of 3')")  # all projects by default
    options = page.locator("select[name=project] option").all_inner_texts()
    assert options[:2] == ["all projects", "no project (global)"] and any(o.startswith(alpha) for o in options)
    page.select_option("select[name=project]", f"p:{alpha}")
    page.click("form.filters button[type=submit]")
    page.wait_for_selector(".pager:has-text('1–1 of 1')")
    assert rows() == {"Alpha's release notes live in docs/releases"}
    assert "project=p%3Agithub.com%2Fme%2Falpha" in page.url or "project=p:github.com/me/alpha" in page.url
    page.select_option("select[name=project]", "global")
    page.click("form.filters button[type=submit]")
    page.wait_for_selector("main td.content:has-text('plain English')")
    assert rows() == {"Release notes are written in plain English"}
    # A search in one project reads as its agents do: its memories and the global ones.
    page.select_option("select[name=project]", f"p:{beta}")
    page.fill("#q", "where do the release notes live")
    page.click("form.filters button[type=submit]")
    page.wait_for_selector(".hit")
    hits = " ".join(page.locator(".hit").all_inner_texts())
    assert "the wiki" in hits and "docs/releases" not in hits
    # The task board.
    page.goto(base + "#/tasks")
    page.wait_for_selector(".card:has-text('Alpha release 2.0')")  # every project's by default
    page.select_option("select[name=project]", f"p:{beta}")
    page.wait_for_selector(".card:has-text('Beta release 1.4')")
    page.locator(".card:has-text('Alpha release 2.0')").wait_for(state="detached")
    assert "Release checklist" in page.inner_text("main")
    page.select_option("select[name=project]", "global")
    page.locator(".card:has-text('Beta release 1.4')").wait_for(state="detached")
    assert "Release checklist" in page.inner_text("main")


# ---------------------------------------------------------------- captured


@pytest.mark.model
def test_the_captured_page_lists_what_capture_stored_and_deletes_and_keeps_it(page, server, api):
    """Stored as the Stop hook stores a turn: session_capture and capture_conventions over the
    daemon's socket, in a project."""
    from engram.server.rpc_client import RpcClient
    from tests.support.fix_transcripts import captured_fix, cases

    _, env = server
    fix = captured_fix("claude-code", next(c for c in cases() if c["id"] == "rust-unresolved-import"))
    turns = [
        {
            "request": "Why does the nightly export stall?",
            "answer": "The exporter waits on a lock the backup job holds until it finishes.",
        },
        {
            "request": "Where do the staging credentials come from?",
            "answer": "From the vault's staging path, read at deploy time by the release script.",
        },
    ]
    with RpcClient(
        Path(env["ENGRAM_HOME"]) / "engram.sock",
        session_id="panel-capture",
        client="claude-code",
        project="github.com/me/captured",
        timeout=120,
    ) as rpc:
        stored = rpc.call("session_capture", fixes=[fix.to_dict()], episodes=turns, client="claude-code")
        said = rpc.call("capture_conventions", prompts=["In this repo we install packages with uv, never pip."])
    assert stored["fixes"] == 1 and stored["episodes"] == 2 and len(said["stored"]) == 1, (stored, said)
    captured = ok(api.get("/memories", params={"tag": "auto-capture"}))["memories"]
    ids = {kind: next(m["id"] for m in captured if kind in m["tags"]) for kind in ("pitfall", "convention")}
    stall, creds = (
        next(m["id"] for m in captured if words in m["content"]) for words in ("nightly export", "staging credentials")
    )

    page.click("header nav a[data-section=captured]")
    page.wait_for_selector("h1:text('Captured')")
    rows = page.locator("main tbody tr")
    expect(rows).to_have_count(4)
    for kind in ("pitfall", "convention"):
        expect(page.locator(f"tr[data-id='{ids[kind]}'] .badge")).to_have_text(kind)
    expect(page.locator(f"tr[data-id='{stall}'] .badge")).to_have_text("episode")
    expect(page.locator(f"tr[data-id='{stall}'] time")).to_have_count(1)

    page.once("dialog", lambda d: d.accept())
    page.click(f"tr[data-id='{stall}'] button.delete")
    page.wait_for_selector("#status:text('Deleted')")
    expect(rows).to_have_count(3)
    assert api.get(f"/memories/{stall}").status_code == 404

    page.click(f"tr[data-id='{creds}'] button.keep")
    page.wait_for_selector("#status:text('Kept')")
    expect(page.locator(f"tr[data-id='{creds}']")).to_have_count(0)
    expect(rows).to_have_count(2)
    kept = ok(api.get(f"/memories/{creds}"))
    assert kept["memory_type"] == "fact" and kept["content"].startswith("User: Where do the staging credentials")
    assert "auto-capture" not in kept["tags"] and "episode" not in kept["tags"]
    assert any(e["action"] == "keep" for e in kept["history"])
    assert ok(api.get("/memories", params={"tag": "auto-capture"}))["total"] == 2


# ---------------------------------------------------------------- upkeep


@pytest.mark.model
def test_upkeep_says_how_many_turns_the_late_reader_has_read(page, api):
    ok(
        api.post(
            "/memories",
            json={"content": "user: I bought a silver hatchback in Krakow last spring.", "conversation": "panel-chat"},
        )
    )
    late = ok(api.get("/stats"))["late_interaction"]
    assert late["on"] and late["turns"] >= 1 and late["turns_read"] == late["turns"]  # read as written
    page.click("header nav a[data-section=upkeep]")
    page.wait_for_selector("h1:text('Upkeep')")
    card = page.locator(".stat", has_text="Late reader")
    assert card.locator("b").inner_text() == "on"
    assert card.locator("small").inner_text() == f"{late['turns_read']} of {late['turns']} turns read"


@pytest.mark.model
def test_apply_a_consolidation_preview(page, api):
    # Write-time resolution folds a near-duplicate into what is known as it arrives; an edit does
    # not resolve, so editing one memory into another's near-duplicate is what maintenance is for.
    a = ok(api.post("/memories", json={"content": "The nightly backup job runs at 2 am", "tags": ["ops"]}))["memory_id"]
    b = ok(api.post("/memories", json={"content": "Invoices are emailed on the first of the month", "tags": ["ops"]}))[
        "memory_id"
    ]
    assert a != b
    ok(api.patch(f"/memories/{b}", json={"content": "The nightly backup job runs at 2 am every day"}))
    page.click("header nav a[data-section=upkeep]")
    page.wait_for_selector("h1:text('Upkeep')")
    page.click("#preview")
    page.wait_for_selector("#report strong:text('Preview')")
    cluster = page.locator("#report table[aria-label=Clusters] tr", has_text="nightly backup")
    assert cluster.count() == 1
    assert a in cluster.inner_text() and b in cluster.inner_text()
    assert ok(api.get(f"/memories/{a}"))["status"] == "active"  # a preview changes nothing
    page.click("#apply")
    page.wait_for_selector("#report strong:text('Applied')")
    row = page.locator("#report table[aria-label=Clusters] tr", has_text="nightly backup")
    into = row.locator("td").nth(2)
    merged = into.inner_text().strip()
    statuses = {ok(api.get(f"/memories/{m}"))["status"] for m in (a, b)}
    assert statuses == {"consolidated"}
    versions = ok(api.get(f"/memories/{a}/versions"))
    assert [v["id"] for v in versions["chain"]] == [a, merged]
    assert versions["chain"][-1]["status"] == "active"
    # The merged memory's page lists what went into it.
    into.locator("a").click()
    page.wait_for_selector("main:has-text('Consolidated from:')")
    linked = page.locator("main li a").evaluate_all("els => els.map(e => decodeURIComponent(e.hash.split('/').pop()))")
    assert {a, b} <= set(linked)


def test_without_a_token_configured_the_panel_opens_without_a_login(browser, eng, settings, serve):
    """Loopback with no ENGRAM_TOKEN: the API is open, so is the panel; the in-process app (what the
    daemon serves) carries it the same way."""
    from engram.api import Api
    from engram.server.http import build_app

    api = Api(eng)
    task = api.call("create_task", {"name": "An open task"}, Ctx(session_id="t"))["task_id"]
    base = serve(build_app(api, token=None, settings=settings))
    ctx = browser.new_context()
    pg = ctx.new_page()
    pg.set_default_timeout(WAIT_MS)
    errors = watch(pg)
    pg.goto(base + "/ui/")
    pg.wait_for_selector(f"a.card[href='#/task/{task}']")
    assert pg.locator("form.login").count() == 0 and pg.locator("#logout").is_hidden()
    # The keyboard alone: a page puts focus on its content, Tab reaches the project filter, then
    # the first card, Enter opens it.
    pg.keyboard.press("Tab")
    assert pg.evaluate("document.activeElement.getAttribute('name')") == "project"
    pg.keyboard.press("Tab")
    assert pg.evaluate("document.activeElement.getAttribute('href')") == f"#/task/{task}"
    pg.keyboard.press("Enter")
    pg.wait_for_selector("h1:has-text('An open task')")
    ctx.close()
    assert not errors, errors


@pytest.mark.model
def test_the_tier_and_expiry_on_a_memory_page_the_list_and_upkeep(page, api):
    # docs/lifecycle.md: the page shows the tier and the expiry, and moves the memory to another tier.
    mid = ok(
        api.post(
            "/memories",
            json={"content": "Scratch: the flaky socket test fails on port reuse", "tier": "working", "ttl_days": 30},
        )
    )["memory_id"]
    page.goto(page.url.split("#")[0] + f"#/memory/{mid}")
    page.wait_for_selector("#tier:has-text('working')")
    assert "never" not in page.inner_text("#expires")
    assert page.locator("h1 .badge.working").count() == 1
    page.select_option("#set-tier", "procedural")
    page.wait_for_selector("h1 .badge.procedural")
    page.wait_for_selector("#tier:has-text('procedural')")
    got = ok(api.get(f"/memories/{mid}"))
    assert got["tier"] == "procedural"
    assert [e["detail"] for e in got["history"] if e["action"] == "tier"] == [{"from": "working", "to": "procedural"}]
    page.wait_for_selector(".timeline .badge.tier")
    # The list: the tier's badge and the expiry beside the type.
    page.goto(page.url.split("#")[0] + "#/memories")
    row = page.locator("main tbody tr", has_text="flaky socket test")
    expect(row.locator(".badge.procedural")).to_have_count(1)
    expect(row).to_contain_text("expires")
    # Upkeep: active memories by tier, and what expires.
    stats = ok(api.get("/stats"))
    page.click("header nav a[data-section=upkeep]")
    page.wait_for_selector("h1:text('Upkeep')")
    tiers = page.locator(".stat", has_text="Active by tier")
    assert tiers.locator("b").inner_text() == str(sum(stats["by_tier"].values()))
    assert f"procedural {stats['by_tier']['procedural']} (×8)" in tiers.locator("small").inner_text()
    expiry = page.locator(".stat", has_text="Expiry")
    assert expiry.locator("b").inner_text() == f"{stats['expiry']['with_expiry']} with a time to live"


@pytest.mark.model
def test_tiers_prune_and_doctor_over_http(api):
    r = api.post("/memories", json={"content": "A note with a made-up tier", "tier": "forever"})
    assert r.status_code == 422 and "tier" in r.text
    mid = ok(api.post("/memories", json={"content": "Retro notes live in the wiki under team/retro"}))["memory_id"]
    bad = api.post(f"/memories/{mid}/tier", json={"tier": "eternal"})
    assert bad.status_code == 422 and ok(api.get(f"/memories/{mid}"))["tier"] == "semantic"
    assert ok(api.post(f"/memories/{mid}/tier", json={"tier": "working"}))["was"] == "semantic"
    before = ok(api.get("/memories", params={"limit": 500}))["total"]
    preview = ok(api.post("/prune", json={"keep": 0}))
    assert preview["applied"] is False and preview["would_remove"] >= 1
    assert ok(api.get("/memories", params={"limit": 500}))["total"] == before  # a dry run changes nothing
    doctor = ok(api.get("/doctor"))
    assert doctor["checks"][0] == "schema" and not [p for p in doctor["problems"] if p["severity"] == "error"]


@pytest.mark.model
def test_upkeep_counts_the_gists_maintenance_wrote(page, api):
    # docs/lifecycle.md#gists: three sessions' turns that say the same, one maintenance run, one gist.
    answer = (
        "Assistant: The invoice PDF job needs the fonts package installed on the worker. "
        "Install it with `apt-get install fonts-dejavu` and restart the worker. {}"
    )
    for i, ask in enumerate(["invoices render blank again", "why are the PDF invoices empty", "blank invoice PDFs"]):
        ok(
            api.post(
                "/memories",
                json={
                    "content": f"User: {ask}\n" + answer.format(f"Checked on attempt {i}."),
                    "memory_type": "episode",
                    "conversation": f"gist-session-{i}",
                },
                headers={"X-Engram-Session": f"gist-session-{i}"},
            )
        )
    report = ok(api.post("/maintenance", json={"apply": True}))
    assert [g["action"] for g in report["gists"]] == ["new"], report["gists"]
    stats = ok(api.get("/stats"))
    assert stats["gists"] >= 1
    page.click("header nav a[data-section=upkeep]")
    page.wait_for_selector("h1:text('Upkeep')")
    gists = page.locator(".stat", has_text="Gists")
    assert gists.locator("b").inner_text() == str(stats["gists"])
    assert f"{stats['totals']['gists_written']} written" in gists.locator("small").inner_text()
