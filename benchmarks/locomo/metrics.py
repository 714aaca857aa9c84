"""Retrieval metrics over ranked lists of dialog-id sets; pure functions.

A ranked item is the set of dialog ids one recalled memory carries: a memory
that write-time resolution merged or reinforced counts for every id in it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

Ranked = Sequence[Collection[str]]

METRIC_KEYS: tuple[str, ...] = ("hit@1", "hit@5", "hit@10", "recall_acc@5", "recall_acc@10", "mrr")
MRR_CUTOFF = 10


def _top_ids(ranked: Ranked, k: int) -> set[str]:
    ids: set[str] = set()
    for item in ranked[:k]:
        ids.update(item)
    return ids


def hit_at(ranked: Ranked, evidence: Collection[str], k: int) -> float:
    """1.0 when any evidence id is carried by one of the top k memories."""
    return 1.0 if _top_ids(ranked, k) & set(evidence) else 0.0


def recall_acc_at(ranked: Ranked, evidence: Collection[str], k: int) -> float:
    """LoCoMo's recall_acc: the fraction of evidence ids found in the top k."""
    gold = set(evidence)
    if not gold:
        raise ValueError("recall_acc is undefined for a question without evidence")
    return len(_top_ids(ranked, k) & gold) / len(gold)


def reciprocal_rank(ranked: Ranked, evidence: Collection[str], cutoff: int = MRR_CUTOFF) -> float:
    """1/rank of the first memory carrying any evidence id; 0 if none within cutoff."""
    gold = set(evidence)
    for rank, item in enumerate(ranked[:cutoff], start=1):
        if gold.intersection(item):
            return 1.0 / rank
    return 0.0


@dataclass(frozen=True)
class QuestionScore:
    category: int
    values: Mapping[str, float]


def score_question(ranked: Ranked, evidence: Collection[str], category: int) -> QuestionScore:
    return QuestionScore(
        category=category,
        values={
            "hit@1": hit_at(ranked, evidence, 1),
            "hit@5": hit_at(ranked, evidence, 5),
            "hit@10": hit_at(ranked, evidence, 10),
            "recall_acc@5": recall_acc_at(ranked, evidence, 5),
            "recall_acc@10": recall_acc_at(ranked, evidence, 10),
            "mrr": reciprocal_rank(ranked, evidence),
        },
    )


def mean_scores(scores: Iterable[QuestionScore]) -> dict[str, float | int | None]:
    """Mean of each metric plus n; metrics are None when there is nothing to average."""
    scores = list(scores)
    n = len(scores)
    out: dict[str, float | int | None] = {
        key: (sum(s.values[key] for s in scores) / n if n else None) for key in METRIC_KEYS
    }
    out["n"] = n
    return out


def aggregate(scores: Iterable[QuestionScore], categories: Mapping[int, str], overall: Collection[int]) -> dict:
    """{"overall": means over the `overall` categories, "by_category": {"1": {...}, ...}}.

    Categories with no questions are left out of by_category.
    """
    scores = list(scores)
    by_category = {}
    for cat, name in sorted(categories.items()):
        group = [s for s in scores if s.category == cat]
        if group:
            by_category[str(cat)] = {"name": name, **mean_scores(group)}
    return {
        "overall": mean_scores(s for s in scores if s.category in overall),
        "by_category": by_category,
    }


def percentile(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile (0-100) with linear interpolation, as numpy's default; None if empty."""
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} is outside 0..100")
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * p / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
