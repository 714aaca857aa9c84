"""Ebbinghaus-style decay and quality scores: pure functions of their inputs and `now`."""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np

# Base forgetting rate per day, by memory type. Strategies last longest; failures fade
# fastest because environments change. A handoff must outlive the gap until the next
# session picks the task up (weeks), so it decays slowly; progress snapshots are
# superseded by newer ones and go stale about as fast as facts.
BASE_LAMBDA: dict[str, float] = {
    "strategy": 0.10,
    "fact": 0.16,
    "assumption": 0.20,
    "failure": 0.35,
    "handoff": 0.05,
    "progress": 0.16,
}
SECONDS_PER_DAY = 86400.0


def effective_lambda(memory_type: str, importance: float) -> float:
    """λ_eff = base_λ × (1 − 0.8 × importance): important memories fade slower."""
    return BASE_LAMBDA.get(memory_type, BASE_LAMBDA["fact"]) * (1.0 - 0.8 * importance)


def strength(importance: float, memory_type: str, recall_count: int,
             last_touched: datetime, now: datetime) -> float:
    """importance × e^(−λ_eff × days) × (1 + 0.2 × recall_count); days since last recall or creation."""
    days = max(0.0, (now - last_touched).total_seconds() / SECONDS_PER_DAY)
    return importance * math.exp(-effective_lambda(memory_type, importance) * days) * (1.0 + 0.2 * recall_count)


def strength_array(importance: np.ndarray, base_lambda: np.ndarray, recall_count: np.ndarray,
                   days: np.ndarray) -> np.ndarray:
    """Vectorised strength() over index rows (days already computed)."""
    lam = base_lambda * (1.0 - 0.8 * importance)
    return importance * np.exp(-lam * np.maximum(days, 0.0)) * (1.0 + 0.2 * recall_count)


def retrieval_weight(strength_value: float, floor: float) -> float:
    """How decay weighs a memory's meaning match in ranking: floor + (1 − floor) × min(1, strength).

    Strength itself falls towards zero (a never-recalled fact is at ~0.003 after a month), and
    multiplying a cosine by it would make old memories unfindable however well they match.
    The floor keeps decay a demotion: a faded memory ranks below an equally good fresh one,
    never below an unrelated one. floor=0 is the raw strength, floor=1 turns decay off.
    """
    return floor + (1.0 - floor) * min(1.0, max(0.0, strength_value))


def retrieval_weight_array(strengths: np.ndarray, floor: float) -> np.ndarray:
    """Vectorised retrieval_weight()."""
    return floor + (1.0 - floor) * np.clip(strengths, 0.0, 1.0)


def days_until(threshold: float, importance: float, memory_type: str, recall_count: int) -> float:
    """Days from the last touch until strength falls below threshold (inf if it never does)."""
    peak = importance * (1.0 + 0.2 * recall_count)
    lam = effective_lambda(memory_type, importance)
    if peak <= threshold:
        return 0.0
    if lam <= 0:
        return math.inf
    return math.log(peak / threshold) / lam


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
