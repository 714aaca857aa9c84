"""Issue 13 with the real model: the `engram` command as a user runs it (one home, its daemon
stopped at the end), and the library for the ranking cases."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from engram import Engram
from tests.conftest import wait_until

pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def engram_cmd():
    """`engram --json ...` against one home, served by a real daemon (as after the first MCP
    session), stopped at the end."""
    home = Path(tempfile.mkdtemp(prefix="egr"))  # short: the socket path has a length limit
    env = {**os.environ, "ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "engram.cli", "serve"],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool:
        assert daemon.poll() is None, "the daemon exited"
        return (home / "engram.sock").exists()

    wait_until(listening, timeout=300, every=0.2, what="the daemon to listen")

    def run(*argv: str) -> dict:
        r = subprocess.run(
            [sys.executable, "-m", "engram.cli", "--json", *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=300,
            check=False,
        )
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    try:
        yield run
    finally:
        subprocess.run(
            [sys.executable, "-m", "engram.cli", "stop"],
            env=env,
            cwd=REPO,
            capture_output=True,
            timeout=120,
            check=False,
        )
        if daemon.poll() is None:
            daemon.kill()
        daemon.wait(30)
        shutil.rmtree(home, ignore_errors=True)


def test_a_fact_does_not_answer_for_the_one_stored_before_it(engram_cmd):
    saigon = engram_cmd("remember", "The user moved to Saigon.")["memory_id"]
    dog = engram_cmd("remember", "The user's dog is called Biscuit.")["memory_id"]
    hits = engram_cmd("recall", "Saigon", "--mode", "bm25")["memories"]
    assert [h["id"] for h in hits] == [saigon]
    engram_cmd("forget", saigon)
    assert engram_cmd("recall", "Saigon", "--mode", "bm25")["memories"] == []
    assert engram_cmd("recall", "What is the dog called?")["memories"][0]["id"] == dog


def test_a_question_nothing_answers_returns_and_reinforces_nothing(engram_cmd):
    ids = [
        engram_cmd("remember", t)["memory_id"]
        for t in (
            "The billing service is written in Go.",
            "CI runs on GitHub Actions.",
            "The API gateway rate-limits to 100 requests per minute.",
        )
    ]
    out = engram_cmd("recall", "plan a dinner")
    assert out["memories"] == [] and out["handoff"] is None
    assert engram_cmd("context", "plan a dinner")["memory_ids"] == []
    first = engram_cmd("recall", "Which language is the billing service written in?", "--limit", "1")
    assert first["memories"][0]["id"] == ids[0]
    assert first["memories"][0]["recall_count"] == 1  # only this recall counted, not the dinner one


def test_the_pinned_handoff_obeys_limit_and_tag(engram_cmd):
    engram_cmd("remember", "Deploys go to Fly.io from the main branch after CI passes.")
    engram_cmd("remember", "Deploy previews are built for every pull request.")
    engram_cmd("remember", "部署在每周三下午进行。", "--tag", "zh")
    engram_cmd("handoff", "Moved the nightly export job to the new queue", "--next", "watch the queue depth")
    assert len(engram_cmd("recall", "deploy", "--limit", "2")["memories"]) == 2
    tagged = engram_cmd("recall", "部署", "--tag", "zh")["memories"]
    assert tagged and all("zh" in m["tags"] for m in tagged)
    # The handoff is about an export job, not deploys: it is not pinned above the deploy facts.
    hits = engram_cmd("recall", "deploy")["memories"]
    assert not hits[0].get("pinned") and "Deploy" in hits[0]["content"]


def test_chinese_recall_and_forget_by_query(engram_cmd):
    mid = engram_cmd("remember", "生产环境的部署需要先在预发布环境验证。")["memory_id"]
    hits = engram_cmd("recall", "部署", "--mode", "bm25")["memories"]
    assert mid in [h["id"] for h in hits]
    gone = engram_cmd("forget", "--query", "预发布")
    assert gone["deleted"] == [mid]
    assert mid not in [h["id"] for h in engram_cmd("recall", "预发布", "--mode", "bm25")["memories"]]


@pytest.fixture
def agent_eng(real_embedder, settings):
    eng = Engram(":memory:", settings=settings, embedder=real_embedder)
    for text in (
        "The user lives in Lisbon and works remotely.",
        "Our CI runners live in the eu-west-1 region on GitHub Actions.",
        "Terraform state lives in an S3 bucket with DynamoDB locking.",
        "The user drinks oat-milk flat whites and dislikes filter coffee.",
        "The nightly build runs every morning at 06:00 UTC.",
        "Releases are cut on Wednesdays; Friday deploys are forbidden.",
    ):
        eng.store(text, resolve_conflicts=False)
    yield eng
    eng.close()


@pytest.mark.parametrize(
    "query,expect",
    [
        ("What hot beverage do they order?", "flat whites"),  # paraphrase: no shared word
        ("Where does the user live?", "Lisbon"),  # "live": the runners, the state
        ("What does the user drink every morning?", "flat whites"),  # "every morning": the build
        ("Which weekday do we ship new versions?", "Wednesdays"),
    ],
)
def test_meaning_beats_an_incidental_shared_word(agent_eng, query, expect):
    assert expect in agent_eng.recall(query, reinforce=False)[0].memory.content


FIRST_DAY = (
    "We deploy to production with a GitHub Actions workflow that runs on every tag pushed to main.",
    "Releases are cut every second Tuesday; the release manager tags main and writes the changelog.",
    "The user prefers dark mode in every editor and terminal.",
    "The user likes short answers without preamble.",
    "Decision: we use PostgreSQL 16 for the orders service, not MySQL, because of JSONB indexes.",
    "The staging database is reset every Sunday night at 02:00 UTC.",
    "Never run database migrations by hand in production; the deploy job applies them.",
    "Our Python services are formatted with ruff format, line length 100.",
    "The on-call rota rotates every Monday; Priya is on call this week.",
    "API keys live in 1Password, vault Engineering; never commit them to git.",
)


@pytest.fixture
def first_day(real_embedder, settings):
    """A new user's store: ten facts on different topics."""
    eng = Engram(":memory:", settings=settings, embedder=real_embedder)
    for text in FIRST_DAY:
        eng.store(text, resolve_conflicts=False)
    yield eng
    eng.close()


@pytest.mark.parametrize(
    "query,expect",
    [
        ("how do we ship releases", "Releases are cut"),
        ("where are secrets kept", "1Password"),
        ("when is staging wiped", "staging database is reset"),
    ],
)
def test_a_natural_question_finds_its_fact_in_a_small_store(first_day, query, expect):
    assert expect in first_day.recall(query, reinforce=False)[0].memory.content


@pytest.mark.parametrize(
    "query", ["what's the user's favourite food", "plan a dinner for Saturday", "book a flight to Berlin"]
)
def test_a_small_store_gives_no_memory_to_a_question_nothing_answers(first_day, query):
    """A few memories on other topics leave the best far above the store's 5th nearest; that
    gap is no evidence (the crowd counts no lower than the background)."""
    assert first_day.recall(query, reinforce=False) == []
