"""The words of a step and of an activity: content words (stemmed, abbreviations expanded,
synonyms folded), their alignment, and the conflicts that tell two different actions apart.

Pure logic used by engram.continuity.next_steps, which turns a step's best matching activity into a status.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from engram.text.tokens import MORE_FUNCTION_WORDS, STOPWORDS, stem

SIM_WEIGHT = 0.5
# Two different words count as the same word above this word-embedding cosine
# (plurals the stemmer misses, large/big). Kept high: at word level MiniLM rates
# contrasts (import/export 0.58) as close as synonyms (toggle/switch 0.59).
WORD_SYNONYM_SIM = 0.8


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Identifiers keep their punctuation: parser_v2.py, 5.0, --dry-run, #231.
_TOKEN = re.compile(r"--?[a-z0-9][a-z0-9_\-]*|#\d+|[a-z0-9]+(?:[._\-'][a-z0-9]+)*")

# Function words: the base table and MORE_FUNCTION_WORDS, with the negations, helper verbs,
# connectives and abbreviations a step's subject does not lie in. "hers", "him" and "yours" of the
# base table were never in this one: they read as words here.
STEP_STOPWORDS = (
    STOPWORDS
    | MORE_FUNCTION_WORDS
    | words("""
    too also else instead once again further yet now while both above below without
    doing done having get got getting make made makes let lets
    not no nor etc eg ie
""")
) - {"hers", "him", "yours"}

# Verbs and status words that say *that* work happened, not *what* it was about.
# They are dropped from content words so "Added X" and "X finished" compare on X.
_GENERIC = words("""
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
    "cli": ("command", "line"),
    "pr": ("pull", "request"),
    "prs": ("pull", "request"),
    "db": ("database",),
    "dbs": ("database",),
    "repo": ("repository",),
    "repos": ("repository",),
    "docs": ("documentation",),
    "doc": ("documentation",),
    "config": ("configuration",),
    "configs": ("configuration",),
    "auth": ("authentication",),
    "env": ("environment",),
    "envs": ("environment",),
    "e2e": ("end", "to", "end"),
    "k8s": ("kubernetes",),
    "perf": ("performance",),
    "ui": ("interface",),
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
    (("staging",), ("production", "prod"), ("development", "dev"), ("qa",), ("sandbox",), ("localhost",)),
    (("import",), ("export",)),
    (("upload",), ("download",)),
    (("input",), ("output",)),
    (("inbound",), ("outbound",)),
    (("request",), ("response",)),
    (("client",), ("server",)),
    (("frontend",), ("backend",)),
    (("encrypt", "encryption"), ("decrypt", "decryption")),
    (("encode", "encoding"), ("decode", "decoding")),
    (("enable",), ("disable",)),
    (("login",), ("logout",)),
    (("min", "minimum"), ("max", "maximum")),
    (("ios",), ("android",), ("windows",), ("linux",), ("macos",)),
    (("aws",), ("gcp",), ("azure",)),
    (
        ("english",),
        ("spanish",),
        ("french",),
        ("german",),
        ("italian",),
        ("portuguese",),
        ("dutch",),
        ("russian",),
        ("japanese",),
        ("chinese",),
        ("korean",),
        ("arabic",),
    ),
    (
        ("python",),
        ("javascript", "js"),
        ("typescript",),
        ("java",),
        ("rust",),
        ("ruby",),
        ("php",),
        ("kotlin",),
        ("swift",),
        ("golang",),
    ),
    (
        ("postgres", "postgresql"),
        ("mysql",),
        ("sqlite",),
        ("mongodb", "mongo"),
        ("redis",),
        ("memcached",),
        ("dynamodb",),
        ("elasticsearch",),
        ("cassandra",),
        ("duckdb",),
    ),
)


def _inflections(word: str) -> tuple[str, ...]:
    """A word with its regular -s, -ed and -ing forms (disable: disables, disabled, disabling)."""
    stem = word.removesuffix("e")
    return (word, word + "s", word + "es", stem + "ed", stem + "ing")


# Number words become digits, so "one hour" and "1 hour" agree as identifiers do.
_NUMBER_WORDS = {
    w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())
}


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
            canon.setdefault(w, stem(syns[0]))
            canon.setdefault(stem(w), stem(syns[0]))
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
    return [canon for canon, _ in content(text)]


def content(text: str) -> list[tuple[str, str]]:
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
            out.extend((w, w) for w in _EXPAND[raw] if w not in STEP_STOPWORDS)
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
                if w in STEP_STOPWORDS or w in _GENERIC or len(w) < 2:
                    continue
                if _CANON.get(w) in _CONTRAST_GROUP:
                    out.append((_CANON[w], w))
                    continue
                root = stem(w)
                out.append((_CANON.get(w, _CANON.get(root, root)), w))
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
            hit = next((j for j, a in enumerate(act_w) if j not in used and _same_word(s, a, word_sim)), None)
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
            anchor = links[k] if 0 <= k < len(step_w) else None
            if anchor is None:
                continue
            j = anchor - side  # the activity word in the same slot next to that anchor
            if 0 <= j < len(act_w) and j not in matched_act:
                found = act_w[j]
                break
        if found is None:
            return None
        subs.append((step_w[i], found))
    return "substitution: " + ", ".join(f"{a} vs {b}" for a, b in subs)


def pair(step_w, act_w, sim: float, word_sim) -> _Pair:
    if not step_w:
        return _Pair(sim, sim, 0.0, None)
    links = _align(step_w, act_w, word_sim)
    coverage = sum(j is not None for j in links) / len(step_w)
    score = SIM_WEIGHT * sim + (1 - SIM_WEIGHT) * coverage
    return _Pair(score, sim, coverage, _conflict(step_w, act_w, links))


def match_score(step: str, activity_text: str, embedder) -> dict[str, Any]:
    """Score breakdown for one step/activity pair (for debugging and tuning)."""
    sc, ac = content(step), content(activity_text)
    sw, aw = [c for c, _ in sc], [c for c, _ in ac]
    vec = embedder.embed_batch([step, activity_text])
    p = pair(sw, aw, float(vec[0] @ vec[1]), word_sims([sc], [ac], embedder))
    return {
        "score": p.score,
        "similarity": p.similarity,
        "coverage": p.coverage,
        "conflict": p.conflict,
        "step_words": sw,
        "activity_words": aw,
    }


def word_sims(
    step_cs: list[list[tuple[str, str]]], act_cs: list[list[tuple[str, str]]], embedder
) -> dict[tuple[str, str], float]:
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
