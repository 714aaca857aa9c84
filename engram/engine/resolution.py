"""Write-time resolution: does a new memory reinforce, replace, merge with, or sit beside an old one?

Statements are read in text/statements.py and compared in text/statement_diff.py; this module weighs that text
evidence against embedding similarity and chooses the action.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engram.text.statement_diff import Comparison, compare, compare_detail, covers, is_contradiction
from engram.text.statements import sentences

__all__ = [
    "ACTIONS",
    "RELATIONS",
    "Comparison",
    "Resolution",
    "compare",
    "compare_detail",
    "decide",
    "is_contradiction",
    "covers",
    "merge_contents",
    "restated_sentence",
]

ACTIONS: tuple[str, ...] = ("new", "reinforce", "merge", "replace")
RELATIONS: tuple[str, ...] = ("same", "contradiction", "addition", "unrelated")

# Below this similarity two texts are NEW unless the text diff shows the same statement
# (one slot changed, most words shared). MiniLM scores real updates as low as ~0.5.
SIMILARITY_FLOOR = 0.45


@dataclass(frozen=True)
class Resolution:
    action: str  # "new" | "reinforce" | "merge" | "replace"
    target_id: str | None  # the existing memory acted on (None for new)
    similarity: float | None
    reason: str  # short human-readable why, e.g. "number changed: 30 -> 60"
    merged_content: str | None = None  # for merge: the combined text


# --- deciding ------------------------------------------------------------------------------------

_PRIORITY = {"reinforce": 3, "replace": 2, "merge": 1, "new": 0}


def sentence_count(text: str) -> int:
    """How many sentences `text` holds (at least 1). A line break ends one too: a merge joins
    its two texts with one, and the result holds two statements however they were punctuated."""
    return len(sentences(text)) or 1


def _compound_action(c: Comparison, sim: float, reinforce_threshold: float) -> str:
    """Resolution for text of several sentences (a message, a paragraph).

    The rules above read one statement's subject, verb and object; across several sentences
    they compare unrelated clauses, and a merge or replace would fuse or hide separate
    statements. Only a near-identical text is recognised as the same memory.
    """
    if c.basis in ("identical", "subset") and sim >= reinforce_threshold:
        return "reinforce"
    return "new"


def restated_sentence(content: str, new: str) -> Comparison | None:
    """The comparison of `new` with the sentence of `content` it says again, or None."""
    for sentence in sentences(content):
        c = compare_detail(sentence, new)
        if c.basis in RESTATED:
            return c
    return None


# Bases of a text that says again what the old one says, adding nothing.
RESTATED = frozenset({"identical", "subset", "restated"})


def _action(c: Comparison, sim: float, reinforce_threshold: float, dedup_threshold: float) -> str:
    """One candidate: the action the text evidence supports at this similarity."""
    high = sim >= reinforce_threshold
    mid = dedup_threshold <= sim < reinforce_threshold
    low = SIMILARITY_FLOOR <= sim < dedup_threshold
    # Below the floor only a near-identical frame (most words shared) counts as the same subject.
    close_text = c.overlap >= 0.6

    if c.basis in ("subject-swap", "roles-swapped", "disjoint", "old-value"):
        # Nothing in common (disjoint) or old news (old-value): storing beside is the only
        # action that keeps both texts findable as they were written.
        return "new"
    # A reinforce keeps only the old text: never when the new one names a value the old lacks.
    keeps_new = not c.new_values
    if c.basis in ("subject-qualifier", "other-fact"):
        # A paraphrase may reword the subject ("tests" / "the test suite"); trust a high score.
        return "reinforce" if high and keeps_new else "new"
    if c.relation == "contradiction":
        return "replace" if (high or mid or low or close_text) else "new"
    if c.relation == "addition":
        return "merge" if (high or mid or low or close_text) else "new"
    if c.basis in ("identical", "subset", "reworded", "restated"):
        return "reinforce" if (high or mid or (c.basis == "identical" and (low or close_text))) else "new"
    # loose: similarity alone decides, as the base policy says.
    if high:
        return "reinforce" if keeps_new else "merge"
    if mid:
        return "merge"
    return "new"


def decide(
    new: str,
    candidates: Sequence[tuple[str, str, float]],
    *,
    reinforce_threshold: float = 0.85,
    dedup_threshold: float = 0.65,
) -> Resolution:
    """Choose what storing `new` does, given similar existing memories.

    candidates: (memory_id, content, cosine similarity) of existing active memories, any order.
    Among candidates, reinforce beats replace beats merge; ties go to the more similar one.
    """
    best: Resolution | None = None
    best_key: tuple[int, float] | None = None
    closest: tuple[float, Comparison] | None = None  # to explain a NEW
    new_compound = sentence_count(new) > 1
    for memory_id, content, sim in candidates:
        sim = float(sim)
        if new_compound or sentence_count(content) > 1:
            # Below the reinforce threshold the answer is NEW whatever the text says: skip parsing.
            detail = compare_detail(content, new) if sim >= reinforce_threshold else None
            action = _compound_action(detail, sim, reinforce_threshold) if detail is not None else "new"
            if action == "new" and not new_compound and sim >= dedup_threshold:
                # A merged memory holds its texts one per line: a new text that says again
                # what one of them says is that memory again, not a third line.
                again = restated_sentence(content, new)
                if again is not None:
                    action, detail = "reinforce", again
            if action != "new" and detail is not None:
                c = detail
            else:
                c = Comparison(
                    "unrelated",
                    "several sentences, not near-identical",
                    "compound",
                    detail.overlap if detail is not None else 0.0,
                )
        else:
            c = compare_detail(content, new)
            action = _action(c, sim, reinforce_threshold, dedup_threshold)
        if action == "new":
            if closest is None or sim > closest[0]:
                closest = (sim, c)
            continue
        key = (_PRIORITY[action], sim)
        if best_key is None or key > best_key:
            merged = merge_contents(content, new) if action == "merge" else None
            best = Resolution(action, memory_id, sim, f"{c.relation} ({c.basis}): {c.reason}", merged)
            best_key = key
    if best is not None:
        return best
    if closest is None:
        return Resolution("new", None, None, "no similar memory")
    sim, c = closest
    if c.relation == "unrelated":
        reason = f"{c.reason} (best similarity {sim:.2f})"
    else:
        reason = f"too far apart for {c.relation} (best similarity {sim:.2f})"
    return Resolution("new", None, sim, reason)


# --- merging -------------------------------------------------------------------------------------

MERGE_SEPARATOR = "\n"


def merge_contents(old: str, new: str) -> str:
    """One text holding both, each exactly as written: old, a line break, new.

    Neither text is rewritten, re-cased or trimmed, so both stay findable by every word they
    had and each can be read back byte for byte. When one text already contains the other
    verbatim, that one is the merge.
    """
    if new in old:
        return old
    if old in new:
        return new
    return f"{old}{MERGE_SEPARATOR}{new}"
