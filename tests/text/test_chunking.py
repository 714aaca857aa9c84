"""Chunking (engram/text/chunking.py): cases the property tests found."""

from __future__ import annotations

from itertools import pairwise

from engram.text.chunking import chunk_spans


def test_a_chunk_never_ends_where_the_one_before_ended():
    # Found by tests/text/test_text_properties.py: the overlap of the second chunk began before the
    # sentence cut the first ended at, and the second chunk ended there again (a chunk of one space).
    text = "Ab. " + "Long" * 30
    spans = chunk_spans(text, 20, 1)
    assert spans[:2] == [(0, 4), (3, 23)]
    assert all(e0 < e1 for (_, e0), (_, e1) in pairwise(spans))
