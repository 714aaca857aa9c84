"""The late-interaction stage as a user meets it: chat turns remembered with the `engram` command
(through the daemon it starts, with the real models), recalled with --explain, and maintenance
finding nothing to fill in because each turn's token vectors were kept when it was written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
