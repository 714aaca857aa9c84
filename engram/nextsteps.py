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
  names one. See :func:`_conflict` for the three conflict rules.

The status then comes from the best matching activity (see :func:`_activity_status`).
A failure record is an attempt, so it gives ``in_progress``, never ``done``.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np
import snowballstemmer

__all__ = [
    "ACTIVITY_KINDS",
    "DEFAULT_THRESHOLD",
    "Activity",
    "StepCheck",
    "TextVectors",
    "content_words",
    "match_score",
    "same_step",
    "stronger",
    "validate_steps",
]

ACTIVITY_KINDS: tuple[str, ...] = ("progress", "memory", "handoff_completed",
                                   "handoff_in_progress", "failure")
STEP_STATUSES: tuple[str, ...] = ("not_started", "in_progress", "done")

DEFAULT_THRESHOLD = 0.6
SIM_WEIGHT = 0.5
# Two different words count as the same word above this word-embedding cosine
# (plurals the stemmer misses, large/big). Kept high: at word level MiniLM rates
# contrasts (import/export 0.58) as close as synonyms (toggle/switch 0.59).
WORD_SYNONYM_SIM = 0.8


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
        return {"step": self.step, "status": self.status,
                "evidence": dict(self.evidence) if self.evidence else None}


class TextVectors:
    """An embedder that keeps the vectors of the short texts it saw (steps, handoff items, words).

    Validation embeds the same steps and the same words on every recall; kept, they cost a
    lookup. Least recently used texts go first beyond ``size``.
    """

    def __init__(self, embedder, size: int = 50_000):
        self.embedder = embedder
        self.dim = embedder.dim
        self.size = size
        self._vecs: OrderedDict[str, np.ndarray] = OrderedDict()

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vecs))
        if missing:
            for t, v in zip(missing, self.embedder.embed_batch(missing)):
                self._vecs[t] = np.asarray(v, dtype=np.float32)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = self._vecs[t]
            self._vecs.move_to_end(t)
        while len(self._vecs) > self.size:
            self._vecs.popitem(last=False)
        return out


# ---------------------------------------------------------------- words

_STEM = snowballstemmer.stemmer("english")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Identifiers keep their punctuation: parser_v2.py, 5.0, --dry-run, #231.
_TOKEN = re.compile(r"--?[a-z0-9][a-z0-9_\-]*|#\d+|[a-z0-9]+(?:[._\-'][a-z0-9]+)*")

_STOPWORDS = _words("""
    a an the and or but of to in into on onto
    for from with without by at as via per is are was
    were be been being am it its this that these those there
    their them they we our us i my me you your he
    she his her so than then too very just also only all
    any every each some more most other such same own both few
    out off over under again further once here when where why how
    what which who whom whose can could should would will shall may
    might must do does did doing done have has had having not
    no nor up down about after before between through during above below
    until while if else now still yet already get got getting make instead
    made makes let lets etc eg ie
""")

# Verbs and status words that say *that* work happened, not *what* it was about.
# They are dropped from content words so "Added X" and "X finished" compare on X.
_GENERIC = _words("""
    add added adding write wrote written writing create created implement implemented set
    setup finish finished complete completed start started starting begin began continue continued
    work worked working ensure support supports use uses used using need needs
    needed try tried attempt attempted merge merged ship shipped land landed fix
    fixed fixing resolve resolved handle handled investigate investigated look new properly proper
    better todo pending wip live publish published found patched run runs ran
    running execute executed perform performed do does did done
""")

# Abbreviations expand before stemming, so both spellings meet on the same stems.
_EXPAND: dict[str, tuple[str, ...]] = {
    "cli": ("command", "line"), "pr": ("pull", "request"), "prs": ("pull", "request"),
    "db": ("database",), "dbs": ("database",), "repo": ("repository",),
    "repos": ("repository",), "docs": ("documentation",), "doc": ("documentation",),
    "config": ("configuration",), "configs": ("configuration",), "auth": ("authentication",),
    "env": ("environment",), "envs": ("environment",), "e2e": ("end", "to", "end"),
    "k8s": ("kubernetes",), "perf": ("performance",), "ui": ("interface",),
}

# Common software synonyms the embedding model does not rate close at word level.
_SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("api", "endpoint", "route"),
    ("remove", "delete", "drop"),
    ("move", "migrate"),
    ("toggle", "switch"),
    ("bug", "issue", "defect"),
    ("speed", "fast", "faster", "slow", "performance"),
)

# Sets whose members name *different* things of one kind. A step naming one
# member is not carried out by an activity naming another.
_CONTRASTS: tuple[tuple[tuple[str, ...], ...], ...] = (
    (("staging",), ("production", "prod"), ("development", "dev"), ("qa",), ("sandbox",),
     ("localhost",)),
    (("import",), ("export",)), (("upload",), ("download",)), (("input",), ("output",)),
    (("inbound",), ("outbound",)), (("request",), ("response",)), (("client",), ("server",)),
    (("frontend",), ("backend",)), (("encrypt", "encryption"), ("decrypt", "decryption")),
    (("encode", "encoding"), ("decode", "decoding")), (("enable",), ("disable",)),
    (("login",), ("logout",)), (("min", "minimum"), ("max", "maximum")),
    (("ios",), ("android",), ("windows",), ("linux",), ("macos",)),
    (("aws",), ("gcp",), ("azure",)),
    (("english",), ("spanish",), ("french",), ("german",), ("italian",), ("portuguese",),
     ("dutch",), ("russian",), ("japanese",), ("chinese",), ("korean",), ("arabic",)),
    (("python",), ("javascript", "js"), ("typescript",), ("java",), ("rust",),
     ("ruby",), ("php",), ("kotlin",), ("swift",), ("golang",)),
    (("postgres", "postgresql"), ("mysql",), ("sqlite",), ("mongodb", "mongo"), ("redis",),
     ("memcached",), ("dynamodb",), ("elasticsearch",), ("cassandra",), ("duckdb",)),
)


def _inflections(word: str) -> tuple[str, ...]:
    """A word with its regular -s, -ed and -ing forms (disable: disables, disabled, disabling)."""
    stem = word.removesuffix("e")
    return (word, word + "s", word + "es", stem + "ed", stem + "ing")


# Number words become digits, so "one hour" and "1 hour" agree as identifiers do.
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}


def _canon_table() -> tuple[dict[str, str], dict[str, int]]:
    canon: dict[str, str] = {}
    group: dict[str, int] = {}
    for gi, members in enumerate(_CONTRASTS):
        for member in members:
            for spelling in member:
                # Kept unstemmed (production != product); inflections spelt out instead.
                for form in _inflections(spelling):
                    canon.setdefault(form, member[0])
                group[member[0]] = gi
    for syns in _SYNONYMS:
        for w in syns:
            canon.setdefault(w, _STEM.stemWord(syns[0]))
            canon.setdefault(_STEM.stemWord(w), _STEM.stemWord(syns[0]))
    return canon, group


_CANON, _CONTRAST_GROUP = _canon_table()
_NUMBERISH = re.compile(r"^v?\d+(?:\.\d+)*[a-z]{0,2}$")


@lru_cache(maxsize=65_536)  # called for every word pair a validation aligns
def _is_identifier(tok: str) -> bool:
    """Numbers, versions, file names, flags, issue refs: must agree exactly."""
    return any(ch.isdigit() for ch in tok) or tok.startswith("-") or "." in tok or "_" in tok


def _shape(tok: str) -> str:
    if tok.startswith("#"):
        return "ref"
    if tok.startswith("-"):
        return "flag"
    if _NUMBERISH.match(tok):
        return "number"
    if "." in tok:
        return "file:" + tok.rsplit(".", 1)[1]
    return "ident"


def content_words(text: str) -> list[str]:
    """Canonical content words in order: stemmed, abbreviations expanded, filler dropped."""
    return [stem for stem, _ in _content(text)]


def _content(text: str) -> list[tuple[str, str]]:
    """(canonical form, surface word) pairs; the surface word is what gets embedded."""
    return list(_content_cached(text))


@lru_cache(maxsize=16_384)  # the same steps and activity texts come back on every validation
def _content_cached(text: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for raw in _TOKEN.findall(text.lower()):
        raw = raw if raw.startswith("--") else raw.strip("-'")
        raw = raw.removesuffix("'s")
        raw = _NUMBER_WORDS.get(raw, raw)
        if not raw:
            continue
        if raw in _EXPAND:  # before the identifier test: e2e, k8s
            out.extend((w, w) for w in _EXPAND[raw] if w not in _STOPWORDS)
            continue
        if _is_identifier(raw) and not re.fullmatch(r"[a-z]+(?:-[a-z]+)+", raw):
            out.append((raw, raw))
            continue
        for part in raw.replace("'", "").split("-"):
            part = _NUMBER_WORDS.get(part, part)
            if _is_identifier(part):  # one-hour -> 1, hour
                out.append((part, part))
                continue
            for w in _EXPAND.get(part, (part,)):
                if w in _STOPWORDS or w in _GENERIC or len(w) < 2:
                    continue
                if _CANON.get(w) in _CONTRAST_GROUP:
                    out.append((_CANON[w], w))
                    continue
                stem = _STEM.stemWord(w)
                out.append((_CANON.get(w, _CANON.get(stem, stem)), w))
    return tuple(out)


# ---------------------------------------------------------------- matching

@dataclass(frozen=True)
class _Pair:
    score: float
    similarity: float
    coverage: float
    conflict: str | None


def _same_word(a: str, b: str, word_sim: dict[tuple[str, str], float]) -> bool:
    by_form = _same_form(a, b)
    return by_form if by_form is not None else word_sim.get((a, b), 0.0) >= WORD_SYNONYM_SIM


@lru_cache(maxsize=262_144)  # an alignment asks about the same word pairs again and again
def _same_form(a: str, b: str) -> bool | None:
    """Whether two words are one by their spelling alone; None: their vectors decide."""
    if a == b:
        return True
    if _is_identifier(a) or _is_identifier(b) or a in _CONTRAST_GROUP or b in _CONTRAST_GROUP:
        return False
    # A stem that begins another is usually the same word cut short (lint/linter).
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) >= 4 and long_.startswith(short) and len(long_) - len(short) <= 3:
        return True
    return None


def _align(step_w: list[str], act_w: list[str], word_sim) -> list[int | None]:
    """For each step word, the index of a matching activity word (or None)."""
    links: list[int | None] = []
    used: set[int] = set()
    for s in step_w:
        hit = next((j for j, a in enumerate(act_w) if j not in used and s == a), None)
        if hit is None:
            hit = next((j for j, a in enumerate(act_w)
                        if j not in used and _same_word(s, a, word_sim)), None)
        if hit is None:  # a repeated word may match an already linked one
            hit = next((j for j, a in enumerate(act_w) if _same_word(s, a, word_sim)), None)
        else:
            used.add(hit)
        links.append(hit)
    return links


def _conflict(step_w: list[str], act_w: list[str], links: list[int | None]) -> str | None:
    """Why the activity is about something else than the step, or None.

    1. identifier: the step names a number/version/file/flag the activity lacks while
       the activity names another of the same shape (Django 5.0 vs 4.2).
    2. contrast: the step names a member of a contrast set (staging, import, Postgres)
       and the activity names a different member of the same set, not the step's.
    3. substitution: every content word the step has and the activity lacks sits in a
       slot where the activity has a different word (same matched neighbour on the
       same side): "payment webhook client" vs "email webhook client". This is the
       shape of a near miss: the same sentence about another object. A paraphrase
       usually rewords more than the object, so it leaves some word unaligned.
    """
    act_set = set(act_w)
    matched_act = {j for j in links if j is not None}
    missing = [i for i, j in enumerate(links) if j is None]

    for i in missing:
        s = step_w[i]
        if _is_identifier(s):
            shape = _shape(s)
            other = [a for a in act_w if _is_identifier(a) and a not in step_w and _shape(a) == shape]
            if other:
                return f"identifier: {s} vs {other[0]}"
    for s in set(step_w):
        g = _CONTRAST_GROUP.get(s)
        if g is not None and s not in act_set:
            other = [a for a in act_w if _CONTRAST_GROUP.get(a) == g and a not in step_w]
            if other:
                return f"contrast: {s} vs {other[0]}"

    if not missing or len(missing) == len(step_w):
        return None
    # A missing step word next to a matched anchor has a "slot" in the activity:
    # the position on the same side of the anchor's match.
    subs: list[tuple[str, str]] = []
    for i in missing:
        found = None
        for side in (-1, 1):
            k = i + side
            if not 0 <= k < len(step_w) or links[k] is None:
                continue
            j = links[k] - side  # the activity word in the same slot next to that anchor
            if 0 <= j < len(act_w) and j not in matched_act:
                found = act_w[j]
                break
        if found is None:
            return None
        subs.append((step_w[i], found))
    return "substitution: " + ", ".join(f"{a} vs {b}" for a, b in subs)


def _pair(step_w, act_w, sim: float, word_sim) -> _Pair:
    if not step_w:
        return _Pair(sim, sim, 0.0, None)
    links = _align(step_w, act_w, word_sim)
    coverage = sum(j is not None for j in links) / len(step_w)
    score = SIM_WEIGHT * sim + (1 - SIM_WEIGHT) * coverage
    return _Pair(score, sim, coverage, _conflict(step_w, act_w, links))


def match_score(step: str, activity_text: str, embedder) -> dict[str, Any]:
    """Score breakdown for one step/activity pair (for debugging and tuning)."""
    sc, ac = _content(step), _content(activity_text)
    sw, aw = [c for c, _ in sc], [c for c, _ in ac]
    vec = embedder.embed_batch([step, activity_text])
    p = _pair(sw, aw, float(vec[0] @ vec[1]), _word_sims([sc], [ac], embedder))
    return {"score": p.score, "similarity": p.similarity, "coverage": p.coverage,
            "conflict": p.conflict, "step_words": sw, "activity_words": aw}


def _word_sims(step_cs: list[list[tuple[str, str]]], act_cs: list[list[tuple[str, str]]],
               embedder) -> dict[tuple[str, str], float]:
    """Cosine of every (step word, activity word) pair, keyed by canonical form.

    The surface word is embedded: a stem such as "set" (from "settings") means
    something else to the model.
    """
    surface: dict[str, str] = {}
    for cs in (*step_cs, *act_cs):
        for canon, word in cs:
            if not _is_identifier(canon):
                surface.setdefault(canon, word)
    sv = {c for cs in step_cs for c, _ in cs if c in surface}
    av = {c for cs in act_cs for c, _ in cs if c in surface}
    vocab = sorted(sv | av)
    if not vocab:
        return {}
    idx = {w: i for i, w in enumerate(vocab)}
    vec = np.asarray(embedder.embed_batch([surface[w] for w in vocab]), dtype=np.float32)
    sims = vec @ vec.T
    return {(a, b): float(sims[idx[a], idx[b]]) for a in sv for b in av if a != b}


# ---------------------------------------------------------------- status

_NEGATION = re.compile(r"\b(?:not|never|no|yet to|unable to|failed to|cannot|\w+n't)\b")
_OPEN = re.compile(r"\b(?:todo|to-do|to do|pending|planned|still needs?|needs? to|should|backlog)\b")
_ONGOING = re.compile(
    r"\b(?:started|starting|begun|began|working on|in progress|wip|partially|partial|"
    r"halfway|half done|ongoing|underway|under way|drafting|draft|still \w+ing|continuing)\b")
_DONE = re.compile(
    r"\b(?:done|finished|complete|completed|merged|fixed|implemented|shipped|deployed|released|"
    r"landed|resolved|closed|live|published|added|wrote|written|created|migrated|upgraded|"
    r"removed|deleted|refactored|patched|now)\b")
# Past-tense openers that do not say the work got done.
_NOT_DONE_VERBS = _words("""
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
    return bool(_NEGATION.search(clause[max(0, at - 25):at]))


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


def validate_steps(steps: Sequence[str], activities: Sequence[Activity], embedder, *,
                   threshold: float | None = None,
                   vectors: Sequence[np.ndarray | None] | None = None) -> list[StepCheck]:
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
    step_cs = [_content(s) for s in steps]
    act_cs = [_content(a.text) if near[i] else [] for i, a in enumerate(acts)]
    step_ws = [[c for c, _ in cs] for cs in step_cs]
    act_ws = [[c for c, _ in cs] for cs in act_cs]
    word_sim = _word_sims(step_cs, act_cs, embedder)

    out: list[StepCheck] = []
    for si, step in enumerate(steps):
        best: tuple | None = None
        for ai in np.flatnonzero(sims[si] >= floor):
            act = acts[ai]
            p = _pair(step_ws[si], act_ws[ai], float(sims[si, ai]), word_sim)
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
        out.append(StepCheck(step, status, {
            "id": act.id, "kind": act.kind, "text": act.text,
            "created_at": act.created_at.isoformat(), "similarity": round(p.similarity, 4),
        }))
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
    ac, bc = _content(a), _content(b)
    aw, bw = [c for c, _ in ac], [c for c, _ in bc]
    words = _word_sims([ac, bc], [ac, bc], embedder)
    ab, ba = _pair(aw, bw, sim, words), _pair(bw, aw, sim, words)
    if ab.conflict or ba.conflict:
        return False
    return max(ab.score, ba.score) >= thr
