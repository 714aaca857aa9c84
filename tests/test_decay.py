import math
from datetime import timedelta

import pytest

from engram import decay
from tests.conftest import START


def test_strength_matches_hand_computed_values():
    # fact, importance 0.5: λ_eff = 0.16 × (1 − 0.4) = 0.096; 10 days, 2 recalls
    s = decay.strength(0.5, "fact", 2, START, START + timedelta(days=10))
    assert s == pytest.approx(0.5 * math.exp(-0.96) * 1.4, rel=1e-12)
    assert s == pytest.approx(0.268, abs=1e-3)
    # strategy, importance 0.9: λ_eff = 0.1 × 0.28 = 0.028; 30 days, no recalls
    assert decay.strength(0.9, "strategy", 0, START, START + timedelta(days=30)) == pytest.approx(
        0.9 * math.exp(-0.84), rel=1e-12)
    # failure fades fastest: importance 0.5, 5 days -> 0.5 × e^(−0.35×0.6×5)
    assert decay.strength(0.5, "failure", 0, START, START + timedelta(days=5)) == pytest.approx(
        0.5 * math.exp(-1.05), rel=1e-12)


def test_days_count_from_last_touch_and_never_negative():
    assert decay.strength(0.5, "fact", 0, START, START) == pytest.approx(0.5)
    assert decay.strength(0.5, "fact", 0, START, START - timedelta(days=3)) == pytest.approx(0.5)


def test_type_order_strategy_outlasts_failure():
    later = START + timedelta(days=20)
    vals = {t: decay.strength(0.5, t, 0, START, later) for t in decay.BASE_LAMBDA}
    assert vals["handoff"] > vals["strategy"] > vals["fact"] > vals["assumption"] > vals["failure"]


def test_vectorised_strength_agrees_with_scalar():
    import numpy as np
    imp = np.array([0.2, 0.5, 0.9])
    lam = np.array([decay.BASE_LAMBDA[t] for t in ("fact", "failure", "strategy")])
    rc = np.array([0, 3, 1])
    days = np.array([1.0, 12.5, 40.0])
    got = decay.strength_array(imp, lam, rc, days)
    for i, t in enumerate(("fact", "failure", "strategy")):
        want = decay.strength(imp[i], t, int(rc[i]), START, START + timedelta(days=float(days[i])))
        assert got[i] == pytest.approx(want, rel=1e-12)


def test_days_until_threshold():
    d = decay.days_until(0.05, 0.5, "fact", 0)
    later = START + timedelta(days=d)
    assert decay.strength(0.5, "fact", 0, START, later) == pytest.approx(0.05, rel=1e-9)
    assert decay.days_until(0.9, 0.5, "fact", 0) == 0.0


def test_quality_score_formula():
    assert decay.quality_score(0.5, 0) == pytest.approx(0.5)
    assert decay.quality_score(0.5, 3) == pytest.approx(0.65)
    assert decay.quality_score(0.5, 10) == pytest.approx(0.75)        # recall bonus capped at 0.5
    assert decay.quality_score(0.9, 10) == 1.0                        # clamped
    assert decay.quality_score(0.5, 0, failures=2) == pytest.approx(0.25)
    assert decay.quality_score(0.5, 0, successes=1) == pytest.approx(0.55)
    assert decay.ranking_penalty(1) == 1.0 and decay.ranking_penalty(2) < 1.0


def test_retrieval_weight_demotes_but_never_buries():
    import numpy as np

    from engram.decay import retrieval_weight, retrieval_weight_array, strength

    assert retrieval_weight(0.0, 0.5) == 0.5  # a fully faded memory keeps the floor
    assert retrieval_weight(1.3, 0.5) == 1.0  # a much-recalled one is capped
    assert retrieval_weight(0.5, 0.5) == pytest.approx(0.75)
    assert retrieval_weight(0.2, 0.0) == pytest.approx(0.2)  # floor 0: raw strength
    assert retrieval_weight(0.0, 1.0) == 1.0  # floor 1: decay off
    old = strength(0.5, "fact", 0, START, START + timedelta(days=365))
    fresh = strength(0.5, "fact", 0, START, START)
    assert old < 1e-10
    assert 0.5 <= retrieval_weight(old, 0.5) < retrieval_weight(fresh, 0.5)
    xs = np.array([0.0, 0.25, 0.5, 2.0])
    assert retrieval_weight_array(xs, 0.3).tolist() == pytest.approx([retrieval_weight(x, 0.3) for x in xs])
