"""Sentence splitting (engram/text/statements.py): the cases real transcripts brought."""

from __future__ import annotations

import pytest

from engram.text.statements import sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # issue 45/46: a line opening with an ellipsis before a capital raised IndexError, and
        # one Codex session lost the capture of 18 of its 63 turns to it.
        ("... Then it failed", ["... Then it failed"]),
        ("It ran. ... Then it failed. We fixed it.", ["It ran. ...", "Then it failed.", "We fixed it."]),
        ("?! Why", ["?! Why"]),
        (". . . A", [". . . A"]),
        ("Dr. Lee went home. He left.", ["Dr. Lee went home.", "He left."]),
        ("J. Smith wrote it.", ["J. Smith wrote it."]),
        # Found by test_text_properties.py: the closing quote or bracket of a sentence was dropped.
        ('He said "Go." Then he left.', ['He said "Go."', "Then he left."]),
        ("(See above.) Then go.", ["(See above.)", "Then go."]),
        ('." 0', ['." 0']),
    ],
)
def test_sentences(text, expected):
    assert sentences(text) == expected
