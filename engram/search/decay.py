"""Spaced-stability decay and quality scores: pure functions of their inputs and `now`.

Each memory has a stability S (days). Its retrievability fades on the clock from its last
recall (or creation), R = e^(−t / S), and its strength is importance × R. A memory starts at
S₀ = 1 / (base_λ × (1 − 0.8 × importance)); each successful recall after t days multiplies S by
1 + GROWTH × w × (1 − e^(−t / S)), w the hit's share of the answer: a recall that comes when
the memory was half forgotten (spaced) grows it a lot, one that comes right after the last
(crammed) barely at all, and however long the wait the gain stays bounded (a faded memory
cannot bank the time it was not intact).
"""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np

from engram.core.clock import SECONDS_PER_DAY
from engram.core.types import Memory

# Base forgetting rate per day, by memory type (S₀ = 1 / (base_λ × (1 − 0.8 × importance))).
# Strategies last longest; failures fade fastest because environments change. A handoff must
# outlive the gap until the next session picks the task up (weeks), so it decays slowly;
# progress snapshots are superseded by newer ones and go stale about as fast as facts.
BASE_LAMBDA: dict[str, float] = {
    "strategy": 0.10,
    "fact": 0.16,
    "assumption": 0.20,
    "failure": 0.35,
    "handoff": 0.05,
    "progress": 0.16,
    "episode": 0.5,  # a captured turn fades within days unless a recall brings it back
}
# Most a recall can multiply stability by is 1 + GROWTH (a recall long after the last one).
# 3 makes four recalls spaced 2, 5, 10 and 20 days apart take a fact of importance 0.8 from
# ~17 days to ~110, so it is still strong after two idle months, while four recalls in one
# hour leave it where it was.
GROWTH = 3.0
MAX_STABILITY = 36500.0  # days (a century): keeps e^(−t / S) and its products finite


# The default stability multiplier of each tier (ENGRAM_TIER_*; engram.core.settings.tier_factors).
TIER_FACTORS: dict[str, float] = {"working": 0.4, "episodic": 1.0, "semantic": 2.5, "procedural": 8.0}


def initial_stability(memory_type: str, importance: float) -> float:
    """S₀ = 1 / (base_λ × (1 − 0.8 × importance)) days: important memories start more stable."""
    return 1.0 / (BASE_LAMBDA.get(memory_type, BASE_LAMBDA["fact"]) * (1.0 - 0.8 * importance))


def stability_of(memory_type: str, importance: float, stability: float | None) -> float:
    """A memory's stability: the stored value once it has been recalled, S₀ until then."""
    return initial_stability(memory_type, importance) if stability is None else stability


def base_stability(m: Memory) -> float:
    """stability_of() for a stored memory, before its tier scales it: what recalls grow."""
    return stability_of(m.memory_type, m.importance, m.stability)


def memory_stability(m: Memory, tier_factors: dict[str, float] = TIER_FACTORS) -> float:
    """How slowly `m` fades: its base stability × its tier's factor (capped at MAX_STABILITY).
    The tier is applied when read, never stored, so moving a memory between tiers or changing a
    factor takes effect at once and undoes cleanly."""
    return min(MAX_STABILITY, base_stability(m) * tier_factors.get(m.tier, 1.0))


def recalled_stability(m: Memory, now: datetime, weight: float = 1.0) -> float:
    """The base stability `m` has after a successful recall at `now` (see grown_stability)."""
    return grown_stability(base_stability(m), m.last_recalled_at or m.created_at, now, weight)


def _days(since: datetime, now: datetime) -> float:
    return max(0.0, (now - since).total_seconds() / SECONDS_PER_DAY)


def strength(importance: float, stability: float, last_touched: datetime, now: datetime) -> float:
    """importance × e^(−days / stability); days since the last recall (or creation)."""
    return importance * math.exp(-_days(last_touched, now) / stability)


def strength_array(importance: np.ndarray, stability: np.ndarray, days: np.ndarray) -> np.ndarray:
    """Vectorised strength() over index rows (days already computed)."""
    return importance * np.exp(-np.maximum(days, 0.0) / stability)


def grown_stability(stability: float, last_touched: datetime, now: datetime, weight: float = 1.0) -> float:
    """Stability after a successful recall at `now`: S × (1 + GROWTH × w × (1 − e^(−days / S))).

    w in [0, 1] is how much of the recall this memory answered: 1 for the best hit (and for a
    repeated store), score / best score for the others, so what merely came along with the
    answer grows in proportion.
    """
    spacing = 1.0 - math.exp(-_days(last_touched, now) / stability)
    w = min(1.0, max(0.0, weight))
    return min(MAX_STABILITY, stability * (1.0 + GROWTH * w * spacing))


def retrieval_weight(strength_value: float, floor: float) -> float:
    """How decay weighs a memory's meaning match in ranking: floor + (1 − floor) × min(1, strength).

    Strength itself falls towards zero (a never-recalled fact of importance 0.5 is at 0.028 after
    a month), and multiplying a cosine by it would make old memories unfindable however well
    they match.
    The floor keeps decay a demotion: a faded memory ranks below an equally good fresh one,
    never below an unrelated one. floor=0 is the raw strength, floor=1 turns decay off.
    """
    return floor + (1.0 - floor) * min(1.0, max(0.0, strength_value))


def retrieval_weight_array(strengths: np.ndarray, floor: float) -> np.ndarray:
    """Vectorised retrieval_weight()."""
    return floor + (1.0 - floor) * np.clip(strengths, 0.0, 1.0)


def days_until(threshold: float, importance: float, stability: float) -> float:
    """Days from the last touch until strength falls below threshold: S × ln(importance / threshold)."""
    if importance <= threshold:
        return 0.0
    return stability * math.log(importance / threshold)


def memory_strength(m: Memory, now: datetime, tier_factors: dict[str, float] = TIER_FACTORS) -> float:
    """strength() of a stored memory at `now`, from its stability and last recall (or creation)."""
    return strength(m.importance, memory_stability(m, tier_factors), m.last_recalled_at or m.created_at, now)


def days_until_prune(
    m: Memory, threshold: float, now: datetime, tier_factors: dict[str, float] = TIER_FACTORS
) -> float:
    """Days from `now` until a memory nothing recalls falls below `threshold` (0 when it has)."""
    touched = m.last_recalled_at or m.created_at
    left = days_until(threshold, m.importance, memory_stability(m, tier_factors))
    return max(0.0, left - (now - touched).total_seconds() / SECONDS_PER_DAY)


def outcome_factor(successes: int, failures: int) -> float:
    """How the outcomes of the session behind a memory weigh on its quality.

    1.0 with no outcome recorded; each success adds 0.1 (up to 1.2), each failure takes 0.25
    (down to 0.25).
    """
    return min(1.2, max(0.25, 1.0 + 0.1 * successes - 0.25 * failures))


def quality_score(importance: float, recall_count: int, successes: int = 0, failures: int = 0) -> float:
    """clamp(importance × (1 + min(recall_count × 0.1, 0.5)) × outcome_factor, 0, 1)."""
    q = importance * (1.0 + min(recall_count * 0.1, 0.5)) * outcome_factor(successes, failures)
    return max(0.0, min(1.0, q))


def ranking_penalty(failures: int) -> float:
    """Memories from sessions that failed more than once rank lower."""
    return 0.7 if failures > 1 else 1.0


def strength_points(
    importance: float, stability: float, last_touched: datetime, start: datetime, end: datetime, steps: int = 40
) -> list[dict]:
    """strength() sampled at steps + 1 evenly spaced times from start to end (a chart's points)."""
    times = [start + (end - start) * i / steps for i in range(steps + 1)]
    return [
        {"at": t.isoformat(), "strength": round(strength(importance, stability, last_touched, t), 6)} for t in times
    ]
