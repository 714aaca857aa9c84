"""The stats line of the late-interaction stage, for each state the daemon can report."""

from __future__ import annotations

import pytest

from engram.cli.render import _late


@pytest.mark.parametrize(
    "late, line",
    [
        ({"on": True, "turns": 0, "turns_read": 0}, "on; no turns of a conversation yet (it reads only those)"),
        ({"on": True, "turns": 5882, "turns_read": 5882}, "on; 5,882 of 5,882 turns read (token vectors kept)"),
        (
            {"on": True, "turns": 5882, "turns_read": 1200},
            "on; 1,200 of 5,882 turns read (token vectors kept), 4,682 to fill in the background",
        ),
        ({"on": False, "turns": 12, "turns_read": 0}, "off (ENGRAM_LATE_INTERACTION=0); 12 turns of a conversation"),
    ],
)
def test_the_late_reader_line(late, line):
    assert _late(late) == line
