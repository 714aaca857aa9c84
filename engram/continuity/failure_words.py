"""The words a failure is about, for deciding whether a prompt nobody asked about bears on it: its
error and the command that failed, not its fix (a diff's identifiers), not engram's own wording
("Pitfall", "Fixed by running …") and not the pieces of a path ("agentv-remove-legacy" is no
"remove"). A file is one word, its name, so a prompt naming the same file matches it whole.
"""

from __future__ import annotations

import re

from engram.core.types import Memory
from engram.text.tokens import tokenize

__all__ = ["failure_words", "shared_words"]

# A path (has a slash) or a file name (a dot and a short extension): one word, its last part.
PATH_OR_FILE = re.compile(r"[^\s'\"`(),;:=]*[/\\][^\s'\"`(),;:=]*|[\w@-]+(?:\.[\w@-]+)*\.[A-Za-z][\w]{0,5}\b")
EDGE = ".,:;)]}'\"`"


def _words(text: str) -> set[str]:
    files = {m.group().rstrip(EDGE).replace("\\", "/").rsplit("/", 1)[-1].lower() for m in PATH_OR_FILE.finditer(text)}
    # A number ("exit code 1", "line 2") is in every log: no evidence of a subject.
    terms = {t for t in tokenize(PATH_OR_FILE.sub(" ", text), query=True) if not t.isdigit()}
    return terms | {f for f in files if f}


def failure_words(m: Memory) -> set[str]:
    """The words of a failure's error and failed command (its metadata as capture and
    track_failure record them); its text when it has neither."""
    md = m.metadata or {}
    capture = md.get("capture")
    failure = md.get("failure")
    capture = capture if isinstance(capture, dict) else {}
    failure = failure if isinstance(failure, dict) else {}
    parts = [capture.get(k) for k in ("program", "signature", "detail", "command")]
    parts += [failure.get(k) for k in ("error", "component")]
    text = " ".join(p for p in parts if isinstance(p, str) and p)
    return _words(text or m.content)


def shared_words(prompt: str, m: Memory) -> set[str]:
    """The words of `prompt` that failure `m` is about (see failure_words)."""
    return _words(prompt) & failure_words(m)
