"""The late-interaction stage as a user meets it: chat turns remembered with the `engram` command
(through the daemon it starts, with the real models), recalled with --explain, and maintenance
finding nothing to fill in because each turn's token vectors were kept when it was written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

TURNS = [
    "Melanie: I painted a sunrise over the lake last summer, it hangs in our hallway now.",
    "Caroline: I'm researching adoption agencies, I want to give a child a loving home.",
    "Melanie: We took the kids camping in the mountains; we roasted marshmallows all night.",
    "Caroline: My friends from the support group threw me a birthday party.",
]


def engram(home: Path, *argv: str) -> dict:
    """`engram --json ARGV` in `home` (outside any git repository): its JSON answer."""
    env = {**os.environ, "ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "engram.cli", "--json", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_turns_remembered_and_recalled_through_the_daemon(model_home):
    for t in TURNS:
        engram(model_home, "remember", t, "--conversation", "chat-1")
    hits = engram(model_home, "recall", "What is Caroline researching?", "--explain")["memories"]
    assert "adoption" in hits[0]["content"]
    assert len(hits) >= 2 and all("late" in h["explain"] and "first_rank" in h["explain"] for h in hits)
    assert engram(model_home, "consolidate", "--apply")["token_vectors_filled"] == 0  # kept at write


def test_a_store_whose_fill_was_cut_short_is_served_at_once_and_filled_behind(model_home):
    """History imported in bulk, and the process gone before its background fill ran (a crash, a
    stop): the daemon a later command starts serves the later chunks by their words at once and
    embeds them in the background, as the fill would have."""
    from engram import Engram
    from engram.core.settings import Settings

    settings = Settings.from_env({**os.environ, "ENGRAM_HOME": str(model_home)})
    answer = " ".join(f"Step {j}: oil the chain link {j} and wipe it with a dry cloth." for j in range(120))
    turns = ["User: how do I clean my bicycle chain?", f"Assistant: {answer} Last, the marker word quokka7."]
    with Engram(settings.db_path, settings=settings) as eng:
        eng.store_many([{"content": t, "conversation": "c1"} for t in turns], fill_token_vectors=False)
        waiting = len(eng.indexes.unembedded)
    assert waiting >= 2  # the answer's later chunks, quokka7's among them
    hits = engram(model_home, "recall", "quokka7")["memories"]
    assert hits and "quokka7" in hits[0]["content"]
    deadline = time.monotonic() + 120
    while engram(model_home, "stats")["index"]["awaiting_embedding"] and time.monotonic() < deadline:
        time.sleep(0.5)  # polling what the daemon's background fill brings about
    assert engram(model_home, "stats")["index"]["awaiting_embedding"] == 0
    engram(model_home, "stop")
    with Engram(settings.db_path, settings=settings) as eng:
        assert all(blob is not None for _, blob in eng.store_db.iter_index_rows())
