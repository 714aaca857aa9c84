"""Split long content at sentence boundaries into overlapping chunks, each a verbatim slice."""

from __future__ import annotations

import bisect
import re

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n{2,}")
_SPACE = re.compile(r"\s+")
_PUNCTUATION = re.compile(r"[^\w\s]+")  # in text without spaces (JSON, a URL): still not mid-word


def chunk_spans(text: str, size: int = 1000, overlap: int = 100) -> list[tuple[int, int]]:
    """(start, end) offsets of the chunks of `text`: about `size` characters each, cut after a
    sentence where possible (else after a word, else after punctuation, else anywhere), each
    starting with the last ~`overlap` characters of the one before (whole sentences where
    possible, else whole words).
    A cut is taken only in the second half of a chunk: a sentence ending near the chunk's start
    followed by a long unbroken stretch (a code block, a pasted log) would otherwise end chunk
    after chunk at that same place, each starting a character later, mid-word.

    The spans cover the text end to end, so text[s:e] of each, minus what overlaps the one
    before, adds up to the text byte for byte. Text at or under `size` is one span.
    """
    if len(text) <= size:
        return [(0, len(text))]
    sentences = [m.end() for m in _SENTENCE_END.finditer(text)]
    words = [m.end() for m in _SPACE.finditer(text)]
    marks = [m.end() for m in _PUNCTUATION.finditer(text)]

    def last(cuts: list[int], lo: int, hi: int) -> int | None:
        """The largest cut in (lo, hi]."""
        i = bisect.bisect_right(cuts, hi) - 1
        return cuts[i] if i >= 0 and cuts[i] > lo else None

    def first(cuts: list[int], lo: int, hi: int) -> int | None:
        """The smallest cut in [lo, hi)."""
        i = bisect.bisect_left(cuts, lo)
        return cuts[i] if i < len(cuts) and cuts[i] < hi else None

    spans: list[tuple[int, int]] = []
    start = end = 0
    while True:
        if len(text) - start <= size:
            spans.append((start, len(text)))
            return spans
        # Past the chunk before's end too: an overlap wider than half a chunk would otherwise
        # let a chunk end where the one before it did.
        half = max(start + size // 2, end)
        end = (
            last(sentences, half, start + size)
            or last(words, half, start + size)
            or last(marks, half, start + size)
            or start + size
        )
        spans.append((start, end))
        if not text[end:].strip():  # only whitespace left: it belongs to this chunk
            spans[-1] = (start, len(text))
            return spans
        lo = max(start + 1, end - overlap)
        start = first(sentences, lo, end) or first(words, lo, end) or first(marks, lo, end) or lo


def split_chunks(text: str, size: int = 1000, overlap: int = 100) -> list[str]:
    """The texts of chunk_spans(): verbatim slices of `text`."""
    return [text[s:e] for s, e in chunk_spans(text, size, overlap)]
