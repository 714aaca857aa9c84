"""Hybrid ranking: BM25 + vector × decay weight + cue bonuses + graph bonus, with a relevance
floor and a score breakdown.

score = w_bm25 × BM25 × adapt + w_vector × (cosine × decay) + date + speaker + when + graph, where
- BM25 is divided by the larger of the query's "ideal score" (bm25.BM25Index.ideal_score) and
  the best row's score, so it lies in [0, 1] and keeps the order of the raw scores;
- adapt is, for an independent memory, clip((best coverage − adapt_low) / (adapt_high −
  adapt_low), 0, 1), and for a turn of a conversation (a memory stored with `conversation`: short
  chat lines whose embedding is weak and whose names and words carry the match) at least
  turn_lexical_floor (0.75): a question that names who said what keeps its words' full weight,
  one that paraphrases its answer no longer lets the long replies on its subject outweigh the
  meaning of the short turn that holds it (benchmarks/paraphrase_chat.py); where the best
  coverage is the largest share of the query's IDF mass any eligible memory holds. Words count
  as evidence only when some memory matches enough of the query: one incidental word ("live",
  "run", "use") shared with a wrong fact no longer outweighs the meaning of the right one;
- decay = floor + (1 − floor) × min(1, strength) (see decay.retrieval_weight); the floor for a
  turn of a conversation, which neither age nor use makes more or less relevant;
- graph (hybrid, graph_depth > 0): graph_bonus × a candidate's strongest link to the first
  links.ANCHORS candidates (search/links.py: the turn said just before or after one, a memory
  naming its rare words), each anchor's link worth its share of the best score; the first
  links.KEEP candidates keep their places;
- the cue bonuses go to candidates only (they never pull in a memory neither search found):
  date: written in a range the query names ("on 13 October 2023", "in June"); speaker: opens
  with a label ("Melanie: …") whose name the query has (never a captured episode's "User:", the
  capture's role label); when: the query asks when and the
  memory mentions a time.

Relevance floor. A query gets hits only with evidence by meaning or by words:
- by meaning (vector and hybrid):
  (best − background) + relevance_gap × (best − max(k-th, background)) reaches relevance_cosine.
  best is the query's highest cosine over the eligible memories, k-th its relevance_k-th highest
  (the last when fewer are eligible), background the mean cosine of the query to its three
  nearest REFERENCE_TEXTS, unrelated sentences in the scripts engram tokenises (how close the
  model puts any text to this query; high for short questions and for scripts the model barely
  reads). The first part says the best memory is closer than unrelated text; the second, that
  it stands out from the crowd of this store (a question nothing answers meets many memories
  at about the same distance), the crowd counted no lower than the background (in a store of
  a few memories on other topics the k-th is far below anything and says nothing);
- by words (bm25 and hybrid): some memory holds relevance_coverage of the query's IDF mass, or
  relevance_terms distinct query words (a word borrowed from a turn's context counting at the
  context weight), or a turn of a conversation holds turn_terms of them carrying turn_coverage
  of the mass: BM25's own evidence, which does not need a vector, so bm25 mode (also the
  daemon's degraded mode) keeps long questions that spread their words over a turn, and a
  question about a chat that names who said it and one thing they said.
Then each hit must carry evidence of its own, measured against the query's best (the per-hit
floor): by meaning, its calibrated cosine (cosine − background) is at least hit_share of the
best calibrated cosine in the store and at least hit_cosine; or by words (bm25 and hybrid), its
coverage is at least hit_share of the best coverage and at least hit_coverage, and it holds more
than one query word (a borrowed one counting at the context weight) unless no memory does; a memory
graph expansion links to a hit needs that evidence too (the link moves it up, never in). So a
question nothing stored answers returns nothing, and a question that one or two memories answer
returns those, not `limit` memories that merely sit closer than unrelated text; what is not
returned is not reinforced.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np

from engram.core.recall_query import RecallQuery
from engram.core.settings import Settings
from engram.core.types import MEMORY_TYPES
from engram.search import links
from engram.search.decay import ranking_penalty, retrieval_weight_array, strength_array
from engram.search.memory_index import MemoryIndex
from engram.search.vector_search import top_rows
from engram.text import dates
from engram.text.tokens import tokenize

# Unrelated sentences (see the module docstring); their embeddings are computed once per engine.
REFERENCE_TEXTS: tuple[str, ...] = (
    "The weather was mild this afternoon.",
    "She bought a new pair of shoes.",
    "The train leaves at seven.",
    "He is reading a book about history.",
    "We had pasta for dinner.",
    "The meeting was moved to next week.",
    "The file could not be opened.",
    "They painted the fence green.",
    "My brother lives near the coast.",
    "The shop closes early on Sundays.",
    "今天天气很好。",
    "他在看一本书。",
    "会议改到下周了。",
    "今日はいい天気です。",
    "彼は本を読んでいます。",
    "오늘은 날씨가 좋습니다.",
    "그는 책을 읽고 있습니다.",
)


def background(reference_cos: np.ndarray) -> float:
    """The query's background cosine: its mean cosine to the three nearest reference texts,
    given the query's cosines to all of them."""
    return float(np.sort(reference_cos)[::-1][:3].mean())


@dataclass(frozen=True)
class Weights:
    # The ranking settings: their defaults are the ones declared in core/settings.py (one place).
    w_bm25: float = Settings.w_bm25
    w_vector: float = Settings.w_vector
    graph_depth: int = Settings.graph_depth
    graph_bonus: float = Settings.graph_bonus
    decay_floor: float = Settings.decay_floor
    turn_lexical_floor: float = Settings.turn_lexical_floor
    bm25_k1: float = Settings.bm25_k1
    bm25_b: float = Settings.bm25_b
    date_bonus: float = Settings.date_bonus
    speaker_bonus: float = Settings.speaker_bonus
    when_bonus: float = Settings.when_bonus
    relevance_cosine: float = Settings.relevance_cosine
    relevance_coverage: float = Settings.relevance_coverage
    # Not settings: fixed parts of the formulas (module docstring).
    relevance_gap: float = 1.0
    relevance_k: int = 5
    relevance_terms: float = 3.0
    turn_terms: float = 2.0
    turn_coverage: float = 0.36
    hit_share: float = 0.4
    hit_cosine: float = 0.0
    hit_coverage: float = 0.1
    adapt_low: float = 0.3
    adapt_high: float = 0.6
    chunk_spread: float = 0.03

    @classmethod
    def from_settings(cls, settings: Settings) -> Weights:
        """Each weight that `settings` declares, taken by name, so no reordering can swap two.

        The others (relevance_gap, relevance_k, relevance_terms, turn_terms, turn_coverage, hit_share,
        hit_cosine, hit_coverage, adapt_low, adapt_high) are not settings and keep their defaults here.
        """
        declared = {f.name for f in fields(settings)}
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls) if f.name in declared})


EPISODE_CODE = MEMORY_TYPES.index("episode")
# A memory's opening label: one to three words and a colon ("Melanie: …", "Dr Ann Lee: …").
_LABEL = re.compile(r"\s*([^\W\d_][\w'’.-]*(?:\s[^\W\d_][\w'’.-]*){0,2})\s*:\s")


def _cues(index: MemoryIndex, query: str, weights: Weights):
    """A function giving the cue bonuses (date, speaker, when) of candidate rows, or None
    when the query has no cue. Reads only the candidates' texts, so it costs microseconds."""
    sel = dates.query_dates(query) if weights.date_bonus > 0 else []
    qterms = set(tokenize(query, query=True)) if weights.speaker_bonus > 0 else set()
    when = weights.when_bonus > 0 and dates.asks_when(query)
    if not sel and not qterms and not when:
        return None

    def bonuses(c: np.ndarray) -> dict[str, np.ndarray]:
        out = {}
        if sel:
            out["date"] = weights.date_bonus * dates.match(sel, index.created[c])
        if qterms:
            sp = np.zeros(len(c))
            for i, r in enumerate(c):
                # A captured episode opens with the capture's role label ("User: ..."), the same
                # on every episode: no speaker, and a query about "the user" lifted them all.
                if index.mtype[r] == EPISODE_CODE:
                    continue
                m = _LABEL.match(index.texts[r] or "")
                if m and qterms.intersection(tokenize(m.group(1))):
                    sp[i] = weights.speaker_bonus
            out["speaker"] = sp
        if when:
            out["when"] = weights.when_bonus * np.array(
                [dates.mentions_time(index.texts[r] or "") for r in c], dtype=np.float64
            )
        return out

    return bonuses


class Ranked(NamedTuple):
    """One ranked row: its row in the index, its score, and the score's parts (the breakdown
    `explain` shows; `floor`, `coverage`, `cosine`... are what confidence reads)."""

    row: int
    score: float
    parts: dict[str, float]


def rank(  # noqa: C901 - debt: one pipeline of stages sharing their arrays; each stage a function is the next step
    index: MemoryIndex,
    q: RecallQuery,
    qvec: np.ndarray | None,
    mask: np.ndarray,
    now_days: float,
    *,
    weights: Weights,
    candidates: int,
    session_failures: dict[int, int] | None = None,
    reference_cos: np.ndarray | None = None,
    floor: bool = True,
    corrections: dict[str, tuple[str, ...]] | None = None,
) -> list[Ranked]:
    """Rank eligible rows (mask) for the query `q` (its text, mode and graph). Returns the best
    `candidates` (the second stages read more than the query's limit), best first; nothing when
    the query has no evidence of relevance (see the module docstring). `reference_cos`: the
    query's cosines to REFERENCE_TEXTS (needed with a query vector).

    floor=False keeps the candidates the relevance floor would drop, each marked in its parts
    (`floor` 1 when it passes the query's and its own floor, else 0), for an offline replay of
    other floors (benchmarks/HISTORY.md); the order is the same either way. `corrections`: the
    query's misspelt words as BM25Index.corrections reads them over `mask`, when the caller has them."""
    query, mode, limit = q.text, q.mode, candidates
    if not mask.any() or limit <= 0:
        return []
    ref = np.zeros(0) if reference_cos is None else np.asarray(reference_cos, dtype=np.float64)
    bg = background(ref) if len(ref) else 0.0
    pool = max(limit * 5, 50)
    n = index.n
    bm25 = np.zeros(n)
    cover = np.zeros(n)
    held = np.zeros(n)
    terms: list[tuple[tuple[str, ...], int]] = []
    if mode in ("hybrid", "bm25"):
        terms = index.bm25.query_terms(query, mask, corrections)  # misspelt words read once (bm25.py)
        raw, cover, held = index.bm25.match(query, n, allowed=mask, k1=weights.bm25_k1, b=weights.bm25_b, terms=terms)
        top = float(raw.max()) if n else 0.0
        if top > 0:
            # Divided, not capped: a cap at 1 tied every row that scored above the ideal (each
            # chunk of a long text repeating a query word) with the one holding all the words.
            bm25 = raw / max(index.bm25.ideal_score(query, mask, terms), top)
    use_vec = mode in ("hybrid", "vector") and qvec is not None
    cos = np.zeros(n, dtype=np.float32)  # filled in for the candidates only
    vec_rows = np.zeros(0, dtype=np.int64)
    meaning = -np.inf  # the query's evidence by meaning (see the module docstring)
    best_cal = 0.0  # the best calibrated cosine, which the per-hit floor measures against
    if use_vec and qvec is not None:
        vec_rows, top_cos = index.top_match(qvec, mask, pool)
        if len(top_cos):
            best_cal = float(top_cos[0]) - bg
            # The crowd sits no lower than the background: a store of a few memories on other
            # topics has its k-th far below the best, which says nothing about relevance.
            kth = max(float(top_cos[min(weights.relevance_k, len(top_cos)) - 1]), bg)
            meaning = float(top_cos[0]) - bg + weights.relevance_gap * (float(top_cos[0]) - kth)
    best_cover = float(cover.max()) if n else 0.0
    # A turn of a conversation may pass with two of the query's words (a question about a chat
    # names who said it and one thing they said, "When did Melanie buy the figurines?") when they
    # carry turn_coverage of its IDF mass; an independent memory, and a turn holding only common
    # words of the query, need the general rule.
    turn_words = (held >= weights.turn_terms - 1e-9) & (cover >= weights.turn_coverage) & index.turn[:n]
    words = mode != "vector" and (
        best_cover >= weights.relevance_coverage
        or float(held.max() if n else 0.0) >= weights.relevance_terms
        or bool(turn_words.any())
    )
    gate = meaning >= weights.relevance_cosine or words
    if not gate and floor:
        return []
    lex_rows = np.flatnonzero(bm25 > 0)
    if len(lex_rows) > pool:
        lex_rows = top_rows(bm25, lex_rows, pool)
    cand = np.union1d(lex_rows, vec_rows).astype(np.int64)
    if not len(cand):
        return []
    span = max(weights.adapt_high - weights.adapt_low, 1e-9)
    adapt = min(1.0, max(0.0, (best_cover - weights.adapt_low) / span))
    cues = _cues(index, query, weights) if mode == "hybrid" else None
    cue_parts: dict[int, dict[str, float]] = {}

    def base_scores(c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        strength = strength_array(index.importance[c], index.stability[c], now_days - index.touched[c])
        decay = retrieval_weight_array(strength, weights.decay_floor)
        # A turn of a conversation is a record of what was said: years later it is as relevant
        # to a question about it, and a stream of questions must not promote the turns earlier
        # ones returned (a recall reinforces its strong hits). So it weighs at the floor, as any
        # memory nothing recalled for long does; the floor keeps the fusion's balance the same.
        decay = np.where(index.turn[c], weights.decay_floor, decay)
        decay = np.where(index.pinned[c], 1.0, decay)  # a pinned memory does not fade
        if use_vec and qvec is not None:
            cos[c] = index.match(c, qvec)
        c_cos = np.maximum(cos[c].astype(np.float64) - weights.chunk_spread * max_lift(index.pieces[c]), 0.0)
        if mode == "bm25":
            s = bm25[c].copy()
        elif mode == "vector":
            s = c_cos * decay
        else:
            lexical = bm25[c] * np.where(index.turn[c], max(weights.turn_lexical_floor, adapt), adapt)
            s = weights.w_bm25 * lexical + weights.w_vector * c_cos * decay
        if cues is not None:
            parts = cues(c)
            for v in parts.values():
                s = s + v
            for i, r in enumerate(c):
                cue_parts[int(r)] = {name: float(v[i]) for name, v in parts.items()}
        if session_failures:
            pen = np.array([ranking_penalty(session_failures.get(int(x), 0)) for x in index.session[c]])
            s = s * pen
        return s, strength, decay

    # hit_share 0 leaves only the absolute floors (a query whose best is below the background,
    # one that passed by words, would otherwise still need a calibrated cosine of 0) and drops
    # the rule on words held.
    share = weights.hit_share > 0
    least_cover = max(weights.hit_coverage, weights.hit_share * best_cover) if share else weights.hit_coverage
    least_cal = max(weights.hit_cosine, weights.hit_share * best_cal) if share else weights.hit_cosine
    top_held = float(held.max()) if n else 0.0

    def evidence(r: int) -> bool:
        """The per-hit floor (module docstring): this hit's own evidence against the best's."""
        # With a margin for rounding: a turn holding every query word through its context alone
        # has exactly context_terms (0.4) of the best's coverage, the default hit_share.
        by_words = mode != "vector" and bm25[r] > 0 and cover[r] >= least_cover - 1e-9
        # One incidental word ("live", "run", "user") is no evidence when some memory holds more.
        if share and top_held > 1.0 + 1e-9 and held[r] <= 1.0 + 1e-9:
            by_words = False
        by_meaning = use_vec and float(cos[r]) - bg >= least_cal
        return by_words or by_meaning

    scores, strength, decay = base_scores(cand)
    info = {int(r): (float(s), float(st), float(d)) for r, s, st, d in zip(cand, scores, strength, decay)}
    bonus: dict[int, float] = {}
    if q.graph and mode == "hybrid" and weights.graph_depth > 0 and len(cand):
        query_words = {t for alts, _ in terms for t in alts}
        bonus = links.expansion(index, cand, scores, mask, query_words, weights.graph_depth, weights.graph_bonus)
        extra = np.array([r for r in bonus if r not in info], dtype=np.int64)
        if len(extra):
            s2, st2, d2 = base_scores(extra)
            for r, s, st, d in zip(extra, s2, st2, d2):
                info[int(r)] = (float(s), float(st), float(d))
        # The first KEEP hits hold their places: a linked memory comes after them.
        firsts = sorted((v[0] for v in info.values()), reverse=True)[: links.KEEP]
        cap = firsts[-1] if len(firsts) == links.KEEP else np.inf
        for r in list(bonus):
            s = info[r][0]
            bonus[r] = max(0.0, min(s + bonus[r], cap - 1e-9) - s) if s < cap else 0.0
    out = []
    for r, (s, st, d) in info.items():
        passed = gate and evidence(r)  # a linked memory needs evidence of its own, as any hit
        if not passed and floor:
            continue
        b = bonus.get(r, 0.0)
        parts = {
            "bm25": float(bm25[r]),
            "cosine": float(max(cos[r], 0.0)),
            "strength": st,
            "decay": d,
            "graph": b,
            "date": 0.0,
            "speaker": 0.0,
            "when": 0.0,
            "base": s,
            "coverage": float(cover[r]),
            "words": float(held[r]),
            "background": bg,
            "floor": float(passed),
            "meaning": float(meaning) if np.isfinite(meaning) else -1.0,
        }
        parts.update(cue_parts.get(r, {}))
        out.append(Ranked(r, s + b, parts))
    out.sort(key=lambda t: (-round(t.score, 9), -index.created[t.row], index.ids[t.row]))
    return best_chunk_only(index, out)[:limit]


def max_lift(pieces: np.ndarray) -> np.ndarray:
    """How far the best of n chunks' cosines stands above one text's, in spreads: sqrt(2 ln n),
    the growth of the largest of n draws (0 for a text not cut). A long text is as close to a query
    as its best chunk, and the more chunks it was cut into, the more chances one of them had to
    come close by chance: without this, long replies crowd out the short turns that hold the
    answer (benchmarks/RESULTS.md, issue 47)."""
    return np.sqrt(2.0 * np.log(np.maximum(pieces, 1)))


def best_chunk_only(index: MemoryIndex, ranked: list[Ranked]) -> list[Ranked]:
    """`ranked` with one hit per stored text: a long text's best chunk stands for it, and its
    other chunks give their places to other texts (a reply cut in five must not take five of ten)."""
    seen: set[int] = set()
    out = []
    for t in ranked:
        g = int(index.group[t.row])
        if g >= 0:
            if g in seen:
                continue
            seen.add(g)
        out.append(t)
    return out


def rerank_hits(
    ranked: list[Ranked],
    score: Callable[[list[int]], np.ndarray],
    pairs: int,
    weight: float,
) -> list[Ranked]:
    """Reorder the first stage's best `pairs` hits by their score over the best one's plus
    `weight` × sigmoid(logit / 2), `score(rows)` giving the cross-encoder's logit for each row.

    Each hit read gains `first_rank` (its place in the first stage, from 0) and `rerank` (the
    logit) in its parts; the ones not read keep their order after them. Nothing is added or
    dropped: the relevance floor has already chosen (letting the cross-encoder bring back what
    it dropped made more nothing-relevant questions return something on the agent set). Scores
    are left as the first stage gave them (reinforcement reads their shares)."""
    head, tail = ranked[:pairs], ranked[pairs:]
    head = [Ranked(*t) for t in head]
    logits = score([t.row for t in head]) if head else np.zeros(0)
    top = max([t.score for t in head], default=0.0)
    read = []
    for i, (t, logit) in enumerate(zip(head, logits)):
        t.parts.setdefault("first_rank", float(i))
        t.parts["rerank"] = float(logit)
        # With the late-interaction stage on too, its term stays in (the two readers add up:
        # benchmarks/HISTORY.md, session 13).
        fused = (
            (t.score / top if top > 0 else 0.0)
            + weight / (1.0 + np.exp(-float(logit) / 2.0))
            + t.parts.get("late_term", 0.0)
        )
        read.append((fused, i, t))
    read.sort(key=lambda x: (-x[0], x[1]))
    return [t for _, _, t in read] + tail


def late_hits(
    ranked: list[Ranked],
    score: Callable[[list[int]], np.ndarray | None],
    candidates: int,
    weight: float,
    reads: Callable[[int], bool] | None = None,
) -> list[Ranked]:
    """Reorder the first stage's best `candidates` hits by their score over the best one's plus
    `weight` × z, z the late-interaction MaxSim (`score(rows)`, one per row read; None: no
    reader, nothing moves) standardised over the rows read (benchmarks/HISTORY.md, sessions
    12, 13 and 16).

    `reads(row)`: whether the stage reads that row (every row unless given); a row not read
    counts as average (z 0). With fewer than two rows to read nothing moves (a z needs a crowd).
    Each hit read gains `first_rank` (its place in the first stage, from 0), `late` (its MaxSim)
    and `late_term` (weight × z) in its parts; the hits past `candidates` keep their order after.
    As with rerank_hits, nothing is added or dropped and the scores stay the first stage's: the
    relevance floor has chosen and confidence reads the first stage's evidence."""
    head, tail = [Ranked(*t) for t in ranked[:candidates]], ranked[candidates:]
    read_rows = [t.row for t in head if reads is None or reads(t.row)]
    if len(read_rows) < 2:
        return ranked
    got = score(read_rows)
    if got is None:  # no reader after all (its model could not load)
        return ranked
    sims = np.asarray(got, dtype=np.float64)
    z = dict(zip(read_rows, (sims - sims.mean()) / (sims.std() + 1e-9)))
    sim = dict(zip(read_rows, sims))
    top = max(t.score for t in head)
    out = []
    for i, t in enumerate(head):
        t.parts["first_rank"] = float(i)
        zi = z.get(t.row, 0.0)
        if t.row in sim:
            t.parts["late"] = float(sim[t.row])
            t.parts["late_term"] = float(weight * zi)
        out.append(((t.score / top if top > 0 else 0.0) + weight * float(zi), i, t))
    out.sort(key=lambda x: (-x[0], x[1]))
    return [t for _, _, t in out] + tail


# The confidence rule, calibrated on the tune half of the agent set (benchmarks/HISTORY.md,
# issue 27): a hit the floor kept is strong when it holds half the query's IDF mass, or when the
# query's evidence by meaning clears the floor by a margin (STRONG_MEANING against
# relevance_cosine's 0.24) and the hit's own calibrated cosine is at least STRONG_COSINE. A finer
# grid (session 9) found own cosine 0-0.16 gaining 2 of 96 tune questions for about twice the
# strong hits that are not the answer (what get_context pushes and recall reinforces), so 0.2 stays.
STRONG_COVERAGE = 0.5
STRONG_MEANING = 0.4
STRONG_COSINE = 0.2


def confidence(parts: dict[str, float]) -> tuple[str, str]:
    """(`strong` or `weak`, the evidence that decided it) for a hit's parts."""
    if not parts.get("floor", 1.0):
        return "weak", "below the relevance floor"
    if parts["coverage"] >= STRONG_COVERAGE:
        return "strong", f"holds {parts['coverage']:.0%} of the query's words (by IDF)"
    cal = parts["cosine"] - parts["background"]
    if parts["meaning"] >= STRONG_MEANING and cal >= STRONG_COSINE:
        return "strong", f"close in meaning (cosine {cal:.2f} above the background)"
    if parts["meaning"] < STRONG_MEANING:
        return "weak", "the best match is only a little closer than unrelated text"
    return "weak", f"only {parts['coverage']:.0%} of the query's words and cosine {cal:.2f} above the background"
