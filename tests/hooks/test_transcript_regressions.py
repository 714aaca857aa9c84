"""Transcripts the property tests (test_transcript_properties.py) found a reader failing on, and
the rule that one bad entry costs that entry only."""

from __future__ import annotations

import json
from pathlib import Path

from engram.continuity.fixes import FixTracker
from engram.hooks.formats import read_transcript
from engram.hooks.transcript import Session
from engram.hooks.turn_capture import fixes_in


def write_jsonl(path: Path, entries: list) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def test_gemini_tool_calls_of_the_wrong_type_are_no_calls(tmp_path):
    # Found by Hypothesis: "toolCalls": 1 raised TypeError, and the whole transcript was lost.
    path = write_jsonl(
        tmp_path / "g.jsonl",
        [
            {"id": "m1", "type": "user", "content": "run the tests"},
            {"id": "m2", "type": "gemini", "content": "ok", "toolCalls": 1},
            {"id": "m3", "type": "user", "content": "now the linter"},
        ],
    )
    s = read_transcript(path, "gemini")
    assert s.requests == ["run the tests", "now the linter"]
    assert s.skipped == 0


def test_a_fault_in_one_entry_costs_that_entry_only():
    s = Session(client="codex")
    for text in ("first", None, "third"):
        with s.one_entry():
            s.request(text)  # None: AttributeError inside the reader
    assert s.requests == ["first", "third"]
    assert s.skip_reasons == {"entry of an unexpected shape (AttributeError)": 1}
    assert s.skipped_summary() == "skipped 1 unreadable entries (entry of an unexpected shape (AttributeError): 1)"


def test_an_event_the_fix_tracker_fails_on_costs_that_event_only():
    class Tracker(FixTracker):  # a fault in the tracker, on one command
        def command(self, command, failed, output="", unfinished=False):
            if command == "make boom":
                raise KeyError("boom")
            self.seen.append(command)
            return super().command(command, failed, output, unfinished)

    tracker = Tracker.from_state([], "/r")
    tracker.seen = []
    events = [{"k": "command", "command": c, "failed": False, "output": ""} for c in ("ls", "make boom", "git status")]
    s = Session(client="claude-code")
    assert fixes_in(events, tracker, "/r", s) == []
    assert tracker.seen == ["ls", "git status"]
    assert s.skip_reasons == {"entry of an unexpected shape (KeyError)": 1}
