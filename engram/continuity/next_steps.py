"""Next-step validation: did later sessions carry out the steps a handoff planned?

Pure logic: the caller passes the steps, the later activity and an embedder.

A step *matches* an activity when both are about the same action on the same
object. Two signals decide it:

- ``score = SIM_WEIGHT * cosine + (1 - SIM_WEIGHT) * coverage`` must reach the
  threshold; ``coverage`` is the share of the step's content words (stemmed,
  abbreviations expanded) that the activity also contains. Cosine alone rates
  near misses ("import endpoint" vs "export endpoint") as high as paraphrases,
  and coverage alone misses rewordings, so each covers the other's blind spot.
- no *conflict*: the activity must not name a different object where the step
  names one. See :func:`engram.text.step_words._conflict` for the three conflict rules.

The status then comes from the best matching activity (see :func:`_activity_status`).
A failure record is an attempt, so it gives ``in_progress``, never ``done``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from engram.text.step_words import SIM_WEIGHT, content, content_words, match_score, pair, word_sims, words

__all__ = [
    "ACTIVITY_KINDS",
    "DEFAULT_THRESHOLD",
    "Activity",
    "StepCheck",
    "content_words",
    "match_score",
    "same_step",
    "stronger",
    "validate_steps",
]

ACTIVITY_KINDS: tuple[str, ...] = ("progress", "memory", "handoff_completed", "handoff_in_progress", "failure")
STEP_STATUSES: tuple[str, ...] = ("not_started", "in_progress", "done")

DEFAULT_THRESHOLD = 0.6


@dataclass(frozen=True)
class Activity:
    id: str
    kind: str  # one of ACTIVITY_KINDS
    text: str  # progress: feature (+ notes); handoff items: the item text
    created_at: datetime
    status: str | None = None  # progress: done | in_progress | blocked | planned
    completion: float | None = None


@dataclass(frozen=True)
class StepCheck:
    step: str
    status: str  # done | in_progress | not_started
    evidence: dict | None  # the activity that shows the status, None when not_started

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "status": self.status, "evidence": dict(self.evidence) if self.evidence else None}


_NEGATION = re.compile(r"\b(?:not|never|no|yet to|unable to|failed to|cannot|\w+n't)\b")
_OPEN = re.compile(r"\b(?:todo|to-do|to do|pending|planned|still needs?|needs? to|should|backlog)\b")
_ONGOING = re.compile(
    r"\b(?:started|starting|begun|began|working on|in progress|wip|partially|partial|"
    r"halfway|half done|ongoing|underway|under way|drafting|draft|still \w+ing|continuing)\b"
)
_DONE = re.compile(
    r"\b(?:done|finished|complete|completed|merged|fixed|implemented|shipped|deployed|released|"
    r"landed|resolved|closed|live|published|added|wrote|written|created|migrated|upgraded|"
    r"removed|deleted|refactored|patched|now)\b"
)
# Past-tense openers that do not say the work got done.
_NOT_DONE_VERBS = words("""
    blocked needed planned started stalled failed paused delayed postponed stuck tried attempted
    wanted intended proposed suggested asked requested discussed considered scheduled reverted
    skipped dropped abandoned cancelled canceled deferred queued assigned noticed reported
    investigated looked
""")
_CLAUSE = re.compile(r"[;:.!?\n]+\s+|[;:!?\n]+|,\s+(?:and|but|then)\s+|\s+(?:but|then)\s+")


def _memory_status(text: str, step_w: list[str]) -> str:
    """What a memory says about the step: read from the clause that mentions it most."""
    clauses = [c for c in _CLAUSE.split(text.lower()) if c.strip()] or [text.lower()]
    step_set = set(step_w)
    best = max(clauses, key=lambda c: len(step_set & set(content_words(c))))
    for clause in (best, text.lower()):
        if _OPEN.search(clause):
            return "not_started"
        ongoing = _ONGOING.search(clause)
        if ongoing:
            # "has not started yet" says the opposite of "started"
            return "not_started" if _negated(clause, ongoing.start()) else "in_progress"
        for m in _DONE.finditer(clause):
            if not _negated(clause, m.start()):
                return "done"
        if _NEGATION.search(clause):
            return "not_started"
        first = clause.split(maxsplit=1)[0] if clause.split() else ""
        if first.endswith("ed") and first not in _NOT_DONE_VERBS:
            return "done"  # a report that opens with a past-tense verb: "Backfilled the ..."
    return "not_started"


def _negated(clause: str, at: int) -> bool:
    return bool(_NEGATION.search(clause[max(0, at - 25) : at]))


def _activity_status(act: Activity, step_w: list[str]) -> str:
    if act.kind == "handoff_completed":
        return "done"
    if act.kind in ("handoff_in_progress", "failure"):
        # A failure shows someone tried: started, but not carried out.
        return "in_progress"
    if act.kind == "progress":
        if act.status == "done" or (act.completion is not None and act.completion >= 1.0):
            return "done"
        if act.status in ("in_progress", "blocked"):
            return "in_progress"
        if act.completion is not None and act.completion > 0:
            return "in_progress"
        return "not_started"
    if act.kind == "memory":
        return _memory_status(act.text, step_w)
    raise ValueError(f"unknown activity kind {act.kind!r}; expected one of {ACTIVITY_KINDS}")


def validate_steps(
    steps: Sequence[str],
    activities: Sequence[Activity],
    embedder,
    *,
    threshold: float | None = None,
    vectors: Sequence[np.ndarray | None] | None = None,
) -> list[StepCheck]:
    """For each step, whether later activity carried it out, with the activity that shows it.

    ``embedder`` has ``embed_batch(list[str]) -> np.ndarray`` of unit-normalised rows.
    ``vectors``, when given, holds one vector per activity (None: embed its text); the engine
    passes the vectors it already stores, so no memory is embedded twice.
    Among matching activities the strongest status wins (done > in_progress); the
    newest breaks ties, then the higher similarity.
    """
    thr = DEFAULT_THRESHOLD if threshold is None else threshold
    steps = list(steps)
    if not steps:
        return []
    for a in activities:
        if a.kind not in ACTIVITY_KINDS:
            raise ValueError(f"unknown activity kind {a.kind!r}; expected one of {ACTIVITY_KINDS}")
    if vectors is not None and len(vectors) != len(activities):
        raise ValueError(f"{len(vectors)} vectors for {len(activities)} activities")
    keep = [i for i, a in enumerate(activities) if a.text.strip()]
    acts = [activities[i] for i in keep]
    if not acts:
        return [StepCheck(s, "not_started", None) for s in steps]

    given = [None] * len(acts) if vectors is None else [vectors[i] for i in keep]
    todo = [a.text for a, v in zip(acts, given) if v is None]
    fresh = iter(np.asarray(embedder.embed_batch(steps + todo), dtype=np.float32))
    step_vec = np.stack([next(fresh) for _ in steps])
    act_vec = np.stack([np.asarray(v, dtype=np.float32) if v is not None else next(fresh) for v in given])
    sims = step_vec @ act_vec.T
    # A pair below this cosine cannot reach the threshold even with every step word covered:
    # such activities need no word-level look at all.
    floor = (thr - (1 - SIM_WEIGHT)) / SIM_WEIGHT - 1e-6
    near = (sims >= floor).any(axis=0)
    step_cs = [content(s) for s in steps]
    act_cs = [content(a.text) if near[i] else [] for i, a in enumerate(acts)]
    step_ws = [[c for c, _ in cs] for cs in step_cs]
    act_ws = [[c for c, _ in cs] for cs in act_cs]
    word_sim = word_sims(step_cs, act_cs, embedder)

    out: list[StepCheck] = []
    for si, step in enumerate(steps):
        best: tuple | None = None
        for ai in np.flatnonzero(sims[si] >= floor):
            act = acts[ai]
            p = pair(step_ws[si], act_ws[ai], float(sims[si, ai]), word_sim)
            if p.score < thr or p.conflict:
                continue
            status = _activity_status(act, step_ws[si])
            if status == "not_started":
                continue
            key = (STEP_STATUSES.index(status), act.created_at, p.similarity)
            if best is None or key > best[0]:
                best = (key, status, act, p)
        if best is None:
            out.append(StepCheck(step, "not_started", None))
            continue
        _, status, act, p = best
        out.append(
            StepCheck(
                step,
                status,
                {
                    "id": act.id,
                    "kind": act.kind,
                    "text": act.text,
                    "created_at": act.created_at.isoformat(),
                    "similarity": round(p.similarity, 4),
                },
            )
        )
    return out


def _strength(c: StepCheck) -> tuple:
    """The order validate_steps picks evidence by: status, then the newer, then the closer."""
    e = c.evidence or {}
    # "unchecked" (no model to compare meanings) is weaker than any checked status.
    rank = STEP_STATUSES.index(c.status) if c.status in STEP_STATUSES else -1
    return (rank, e.get("created_at", ""), e.get("similarity", 0.0))


def stronger(a: StepCheck, b: StepCheck) -> StepCheck:
    """The check with the stronger evidence (as validate_steps would choose); `a` on a tie.

    Lets a caller validate activity in parts (what is new since it last looked) and combine.
    ISO 8601 times in UTC sort as text.
    """
    return b if _strength(b) > _strength(a) else a


def same_step(a: str, b: str, embedder, *, threshold: float | None = None) -> bool:
    """Whether two planned steps are one step (re-planned, possibly reworded): they match each
    other as a step matches the activity that carries it out, in either direction, and neither
    names a different object than the other."""
    thr = DEFAULT_THRESHOLD if threshold is None else threshold
    va, vb = np.asarray(embedder.embed_batch([a, b]), dtype=np.float32)
    sim = float(va @ vb)
    if sim < (thr - (1 - SIM_WEIGHT)) / SIM_WEIGHT - 1e-6:
        return False  # out of reach even with every word shared (a plan compares many pairs)
    ac, bc = content(a), content(b)
    aw, bw = [c for c, _ in ac], [c for c, _ in bc]
    words = word_sims([ac, bc], [ac, bc], embedder)
    ab, ba = pair(aw, bw, sim, words), pair(bw, aw, sim, words)
    if ab.conflict or ba.conflict:
        return False
    return max(ab.score, ba.score) >= thr
