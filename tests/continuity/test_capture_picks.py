"""A short answer that picks an option the agent offered, captured turn by turn as the Stop hook
captures it (engram.hooks.turn_capture) and stored by the daemon's operation: the decision it
makes, worded from the option, redacted like every memory, once per session."""

from __future__ import annotations

import json

from engram.api import Api
from engram.continuity.conventions import CANDIDATE_TAG, CONVENTION_TAG
from engram.hooks.turn_capture import capture_turns
from tests.continuity.test_capture import PROJECT, InProcess
from tests.hooks.test_hook_transcripts import claude_entry, write_jsonl

KEY = "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
OFFER = (
    "**How should CI log in to the registry?**\n\n"
    "1. **A CI-only key** - stored as the secret REGISTRY_KEY, rotated monthly\n"
    f"2. **The key in the workflow file** - `{KEY}` inline, simplest\n\nWhich one?"
)


def say(text: str) -> dict:
    return claude_entry("assistant", [{"type": "text", "text": text}])


def test_a_pick_in_the_turn_after_the_options_is_stored_as_the_decision(eng, tmp_path):
    api = Api(eng)
    transcript = tmp_path / "t.jsonl"
    payload = {"transcript_path": str(transcript), "session_id": "pick", "cwd": "/repo"}
    rpc = InProcess(api, "claude-code:pick")
    first = [claude_entry("user", "Set up the registry login in CI"), say(OFFER)]
    write_jsonl(transcript, first)
    assert "0 prompts picking an option" in capture_turns(eng.settings, "claude-code", payload, rpc, "/repo")
    state = json.loads(next((eng.settings.home / "hooks" / "capture").glob("*.json")).read_text())
    assert state["offered"].startswith("**How should CI") and KEY not in state["offered"]  # redacted on disk

    write_jsonl(transcript, [*first, claude_entry("user", "2 please"), say("Done.")])
    msg = capture_turns(eng.settings, "claude-code", payload, rpc, "/repo")
    assert "1 prompts picking an option, 0 stating a convention (1 stored)" in msg, msg
    page = eng.list_memories(tags=[CONVENTION_TAG], in_project=PROJECT)["memories"]
    [m] = [eng.get(p["id"]) for p in page]
    assert m.content.startswith("Decided (How should CI log in to the registry?): The key in the workflow file")
    assert KEY not in m.content and CANDIDATE_TAG not in m.tags  # the question asked how it should be

    # Sent again (a later capture rereads it): the same decision, not taken in twice; read from
    # the transcript itself (the checkpoint), the key redacted, still one memory.
    again = {"prompts": [], "answers": [{"prompt": "2 please", "offered": state["offered"]}]}
    assert api.call("capture_conventions", again, rpc.ctx)["already"] == 1
    raw = api.call("capture_conventions", {"prompts": [], "answers": [{"prompt": "2", "offered": OFFER}]}, rpc.ctx)
    assert [s["memory_id"] for s in raw["stored"]] == [m.id]


def test_an_answer_without_options_before_it_stores_nothing(eng, tmp_path):
    api = Api(eng)
    transcript = write_jsonl(
        tmp_path / "t.jsonl", [claude_entry("user", "Fix the flaky test"), say("Fixed it."), claude_entry("user", "A.")]
    )
    payload = {"transcript_path": str(transcript), "session_id": "none", "cwd": "/repo"}
    msg = capture_turns(eng.settings, "claude-code", payload, InProcess(api, "claude-code:none"), "/repo")
    assert "0 prompts picking an option, 0 stating a convention" in msg, msg
    assert eng.list_memories(tags=[CONVENTION_TAG], in_project=PROJECT)["memories"] == []
