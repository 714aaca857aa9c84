"""The three clients' transcripts read for answers that pick an option the agent offered: the
prompt comes with the agent's message before it (Session.answers, and the request event per-turn
capture reads), and a prompt that picks nothing is read as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engram.hooks.formats import READERS, read_transcript
from engram.hooks.transcript import Session
from tests.hooks.test_hook_transcripts import claude_entry, write_jsonl

OFFER = (
    "I read the cache code. **Where should the cache live?**\n\n"
    "| Option | Description |\n|---|---|\n"
    "| **A. Redis** | Shared between workers; needs a Redis server. |\n"
    "| **B. Process memory** | No server; lost on restart. |\n\nWhich do you prefer?"
)
# (who, text) in order: the user's pick, a prompt answering a message with no options, and "A."
# after a message that offers none.
TURNS = [
    ("user", "Add a cache to the price lookups"),
    ("agent", OFFER),
    ("user", "B"),
    ("agent", "Done: the cache is a dict in the lookup module."),
    ("user", "A."),
    ("agent", "There is no option A here; what did you mean?"),
]


def claude_code(tmp_path: Path) -> Path:
    return write_jsonl(
        tmp_path / "c.jsonl",
        [
            claude_entry("user", text) if who == "user" else claude_entry("assistant", [{"type": "text", "text": text}])
            for who, text in TURNS
        ],
    )


def codex(tmp_path: Path) -> Path:
    def entry(who: str, text: str) -> dict:
        if who == "user":
            return {"type": "event_msg", "payload": {"type": "user_message", "message": text}}
        item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        return {"type": "response_item", "payload": item}

    return write_jsonl(tmp_path / "r.jsonl", [entry(w, t) for w, t in TURNS])


def gemini(tmp_path: Path) -> Path:
    p = tmp_path / "g.json"
    messages = [
        {"id": str(i), "type": "user" if who == "user" else "gemini", "content": text}
        for i, (who, text) in enumerate(TURNS)
    ]
    p.write_text(json.dumps({"sessionId": "g", "messages": messages}))
    return p


WRITERS = {"claude-code": claude_code, "codex": codex, "gemini": gemini}


@pytest.mark.parametrize("client", sorted(WRITERS))
def test_a_pick_is_read_with_the_message_it_answers(tmp_path, client):
    path = WRITERS[client](tmp_path)
    s = read_transcript(path, client)
    assert s.answers == [{"prompt": "B", "offered": OFFER}]
    assert s.stated == []  # "A." after a message with no options is nothing
    s = Session(client=client, timeline=[])
    READERS[client](path, s)
    requests = [e for e in s.timeline if e["k"] == "request"]
    assert [(e["text"], e.get("offered")) for e in requests] == [
        ("Add a cache to the price lookups", None),
        ("B", OFFER),
        ("A.", None),
    ]


def test_the_message_a_later_capture_starts_after_is_carried_in(tmp_path):
    """Per-turn capture reads a JSON Lines transcript on from where it stopped: the agent's
    message read by the last capture is what the first prompt of this one may pick from."""
    path = claude_code(tmp_path)
    first_turn = b"".join(path.read_bytes().splitlines(keepends=True)[:2])
    s = Session(client="claude-code", timeline=[])
    s.offset = len(first_turn)
    s.offered = OFFER
    READERS["claude-code"](path, s)
    assert s.answers == [{"prompt": "B", "offered": OFFER}]
