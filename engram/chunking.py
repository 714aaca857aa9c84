"""Split long content at sentence boundaries into overlapping chunks."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n{2,}")


def split_chunks(text: str, size: int = 1000, overlap: int = 100) -> list[str]:
    """Chunks of about `size` characters; each starts with the last ~`overlap` characters
    (whole sentences where possible) of the previous one. Text at or under `size` is one chunk."""
    text = text.strip()
    if len(text) <= size:
        return [text]
    sentences = [s for s in _SENTENCE_END.split(text) if s and s.strip()]
    # A sentence longer than a chunk is cut at word boundaries.
    pieces: list[str] = []
    for s in sentences:
        while len(s) > size:
            cut = s.rfind(" ", 0, size)
            cut = cut if cut > size // 2 else size
            pieces.append(s[:cut].strip())
            s = s[cut:].strip()
        if s:
            pieces.append(s)
    chunks: list[str] = []
    cur: list[str] = []
    for p in pieces:
        if cur and len(" ".join(cur + [p])) > size:
            chunks.append(" ".join(cur))
            tail: list[str] = []
            for s in reversed(cur):
                if len(" ".join([s] + tail)) > overlap:
                    break
                tail.insert(0, s)
            if not tail:  # no whole sentence fits the overlap: take its last characters
                last = cur[-1][-overlap:]
                tail = [last[last.find(" ") + 1:]] if " " in last else [last]
            cur = tail if len(" ".join(tail + [p])) <= size else []
        cur.append(p)
    if cur:
        chunks.append(" ".join(cur))
    return chunks
